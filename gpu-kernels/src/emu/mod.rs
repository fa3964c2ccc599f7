//! The CPU emulator: runs a kernel's host build under the GPU's execution model.
//!
//! # Model
//! - Every block of the grid runs; blocks are spread over worker threads (one per core, or
//!   `FERROKERN_EMU_THREADS`). Inside a block, each GPU thread is a stackful coroutine
//!   (corosensei) and all of a block's threads run on one worker, round-robin, each until it
//!   reaches a barrier, a warp collective, or its end. Scheduling inside a block is
//!   deterministic, so a race report is reproducible.
//! - `sync_threads` releases when every live thread of the block waits at the same barrier.
//!   Named barriers (`bar.sync` / `bar.arrive` with an id from 1 to 15 and a thread count)
//!   complete a phase when that many threads have arrived; `sync` waits for the completion.
//!   Warp collectives complete when every lane named in the mask has posted the same
//!   collective with the same mask.
//! - Shared memory is the launch's dynamic segment, fresh per block and filled with 0xFF
//!   bytes (NaN for floats). Global memory is host memory; atomics are host atomics.
//!
//! # Checks (each error names the kernel, block, thread and address)
//! out-of-bounds and misaligned global accesses, out-of-bounds shared accesses, shared-memory
//! races (a write and another thread's access to the same bytes with no barrier, or for lanes
//! of one warp no `sync_warp`, between them), reads of shared bytes nothing wrote, barrier
//! divergence (threads at different barriers, or a thread exiting while others wait; for
//! named barriers, arrivals that disagree on the thread count, a warp arriving with some of
//! its lanes, a phase still open when the block ends, waiters no arrival will release), warp
//! collective divergence, and panics in kernel code (e.g. arithmetic overflow in test builds).
//!
//! # Not modelled
//! timing and performance; memory ordering beyond barriers (block, named, mbarrier) and
//! `sync_warp` (the emulator is
//! sequentially consistent, so it can accept code that relies on ordering the GPU does not
//! promise between global writes of different blocks); races on global memory; the
//! accuracy of fast-math instructions (the host functions are more accurate); 32-bit
//! shared-memory bank conflicts and other performance effects.

pub(crate) mod api;
mod block;
mod hopper;
mod mma;
mod shadow;

use crate::{Dim3, KernelDef};
use core::fmt;
use core::panic::Location;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Where in the kernel source something happened.
pub type Loc = &'static Location<'static>;

/// Largest dynamic shared segment the emulator accepts: Hopper's 227 KB per block.
pub const MAX_SHARED_BYTES: u32 = 227 * 1024;

/// A launch's shape: grid, block and dynamic shared bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: Dim3,
    pub block: Dim3,
    pub shared_bytes: u32,
}

/// What went wrong in an emulated launch.
#[derive(Clone, Debug)]
pub enum FaultKind {
    /// A global access past the end of its view.
    OutOfBounds { write: bool, index: usize, count: usize, len: usize, addr: usize, at: Loc },
    /// A vector access whose address is not aligned to its size.
    Misaligned { addr: usize, align: usize, at: Loc },
    /// A shared access outside its view or the launch's shared segment.
    SharedOutOfBounds { write: bool, index: u32, len: u32, offset: u32, shared_bytes: u32, at: Loc },
    /// Two threads touched the same shared bytes, at least one writing, with no barrier between.
    SharedRace { offset: u32, first: Access, second: Access },
    /// A shared read of bytes no thread of this block wrote.
    UninitSharedRead { offset: u32, at: Loc },
    /// Threads of a block that cannot all reach the same barrier.
    BarrierDivergence { detail: String },
    /// Lanes of a warp collective that cannot all arrive, or disagree on it.
    WarpDivergence { detail: String },
    /// A Hopper async-proxy rule broken: a wgmma reading bytes whose TMA load it did not wait
    /// for, or generic stores whose `fence.proxy.async` is missing or not ordered before it; a
    /// TMA overwriting bytes a wgmma may still read; a bulk reduction reading unpublished
    /// bytes, or its source rewritten before its wait; a malformed descriptor.
    AsyncProxy { detail: String },
    /// Threads waiting on mbarriers that can no longer complete.
    Deadlock { detail: String },
    /// A panic in the kernel body (on the GPU this is a trap).
    Panic { message: String },
    /// A launch shape the GPU would refuse.
    InvalidLaunch { reason: String },
}

/// One side of a race.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    pub thread: Dim3,
    pub write: bool,
    pub at: Loc,
}

/// An emulated launch's failure: kernel, block, thread, and what happened.
#[derive(Clone, Debug)]
pub struct EmuError {
    pub kernel: &'static str,
    pub block: Option<Dim3>,
    pub thread: Option<Dim3>,
    pub kind: FaultKind,
}

pub(crate) fn d3(d: Dim3) -> String {
    format!("({},{},{})", d.x, d.y, d.z)
}

fn loc(l: Loc) -> String {
    format!("{}:{}", l.file(), l.line())
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultKind::OutOfBounds { write, index, count, len, addr, at } => write!(
                f,
                "out-of-bounds global {} of {} element(s) at index {} (address {:#x}) in a view of {} element(s), at {}",
                if *write { "write" } else { "read" },
                count,
                index,
                addr,
                len,
                loc(at)
            ),
            FaultKind::Misaligned { addr, align, at } => {
                write!(f, "misaligned address {addr:#x}: this access needs {align}-byte alignment, at {}", loc(at))
            }
            FaultKind::SharedOutOfBounds { write, index, len, offset, shared_bytes, at } => write!(
                f,
                "out-of-bounds shared {} at index {} of a view of {} element(s) at byte offset {} (the launch has {} shared bytes), at {}",
                if *write { "write" } else { "read" },
                index,
                len,
                offset,
                shared_bytes,
                loc(at)
            ),
            FaultKind::SharedRace { offset, first, second } => write!(
                f,
                "shared-memory race at byte offset {}: thread {} {} it at {}, and thread {} {} it at {}, with no barrier between",
                offset,
                d3(first.thread),
                if first.write { "wrote" } else { "read" },
                loc(first.at),
                d3(second.thread),
                if second.write { "writes" } else { "reads" },
                loc(second.at)
            ),
            FaultKind::UninitSharedRead { offset, at } => {
                write!(
                    f,
                    "read of uninitialized shared memory at byte offset {} (no thread of this block wrote it), at {}",
                    offset,
                    loc(at)
                )
            }
            FaultKind::BarrierDivergence { detail } => write!(f, "barrier divergence: {detail}"),
            FaultKind::WarpDivergence { detail } => write!(f, "warp divergence: {detail}"),
            FaultKind::AsyncProxy { detail } => write!(f, "async proxy (TMA / wgmma / bulk copies): {detail}"),
            FaultKind::Deadlock { detail } => write!(f, "deadlock: {detail}"),
            FaultKind::Panic { message } => write!(f, "kernel panicked: {message}"),
            FaultKind::InvalidLaunch { reason } => write!(f, "invalid launch: {reason}"),
        }
    }
}

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "emulator: kernel `{}`", self.kernel)?;
        if let Some(b) = self.block {
            write!(f, ", block {}", d3(b))?;
        }
        if let Some(t) = self.thread {
            write!(f, ", thread {}", d3(t))?;
        }
        write!(f, ": {}", self.kind)
    }
}

impl std::error::Error for EmuError {}

/// What a launch did, for throughput reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct LaunchStats {
    pub blocks: u64,
    pub threads: u64,
}

/// The hardware limits a launch must respect (CUDA's, for every GPU ferrokern targets).
pub fn check_launch(cfg: &LaunchConfig) -> Result<(), String> {
    let LaunchConfig { grid, block, shared_bytes } = *cfg;
    if grid.count() == 0 || block.count() == 0 {
        return Err(format!("grid {} and block {} must have no zero dimension", d3(grid), d3(block)));
    }
    if block.count() > 1024 {
        return Err(format!("block {} has {} threads; the limit is 1024", d3(block), block.count()));
    }
    if block.z > 64 {
        return Err(format!("block z = {} exceeds 64", block.z));
    }
    if grid.x > i32::MAX as u32 {
        return Err(format!("grid x = {} exceeds 2^31 - 1", grid.x));
    }
    if grid.y > 65535 || grid.z > 65535 {
        return Err(format!("grid {} has y or z over 65535", d3(grid)));
    }
    if shared_bytes > MAX_SHARED_BYTES {
        return Err(format!("{shared_bytes} bytes of shared memory exceed the 227 KB per-block maximum"));
    }
    Ok(())
}

fn worker_count(blocks: u64) -> usize {
    let want = std::env::var("FERROKERN_EMU_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    want.min(blocks.min(usize::MAX as u64) as usize).max(1)
}

/// Runs `def` over the whole grid. Returns the first error (lowest block index among the
/// blocks that ran) or launch statistics.
pub fn launch<P: Copy + Send + Sync + 'static>(
    def: &KernelDef<P>,
    cfg: &LaunchConfig,
    params: P,
) -> Result<LaunchStats, EmuError> {
    check_launch(cfg).map_err(|reason| EmuError {
        kernel: def.name,
        block: None,
        thread: None,
        kind: FaultKind::InvalidLaunch { reason },
    })?;
    let blocks = cfg.grid.count();
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let first_err: Mutex<Option<(u64, EmuError)>> = Mutex::new(None);
    let body = def.body;
    let name = def.name;
    let run = || {
        let mut runner = block::BlockRunner::new(name, *cfg);
        loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= blocks {
                break;
            }
            if let Err(e) = runner.run(body, params, b) {
                stop.store(true, Ordering::Relaxed);
                let mut slot = first_err.lock().unwrap_or_else(|p| p.into_inner());
                if slot.as_ref().is_none_or(|(ob, _)| b < *ob) {
                    *slot = Some((b, e));
                }
                break;
            }
        }
    };
    let workers = worker_count(blocks);
    if workers == 1 {
        run();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(run);
            }
        });
    }
    match first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some((_, e)) => Err(e),
        None => Ok(LaunchStats { blocks, threads: blocks * cfg.block.count() }),
    }
}
