//! One block's execution: its threads as coroutines, its barriers and warp collectives.

use super::shadow::{SharedMem, SyncClock};
use super::{EmuError, FaultKind, LaunchConfig, Loc, d3};
use crate::Dim3;
use crate::device::warp::{ShflMode, VoteMode};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell};
use std::panic::AssertUnwindSafe;

/// Stack per emulated GPU thread. Kernel frames are small (register-sized locals); the rest is
/// headroom for a panic's unwinding and message formatting.
const STACK_BYTES: usize = 256 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Ready,
    Barrier(Loc),
    Warp,
    /// Polling an mbarrier (at shared byte `bar`): resumed every round until its phase completes.
    Poll {
        bar: u32,
        at: Loc,
    },
    /// Waiting at named barrier `id` until its phase `phase` completes.
    Named {
        id: u32,
        phase: u32,
        at: Loc,
    },
    /// In `setmaxnreg.inc` to `want` registers, until the block's pool has them.
    Regs {
        want: u32,
        at: Loc,
    },
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WarpOp {
    Shfl(ShflMode),
    Vote(VoteMode),
    Sync,
    /// `mma.sync` m16n8k16 (see `emu::mma`).
    Mma(crate::device::mma::MmaKind),
    /// `ldmatrix.sync` of `n` 8x8 matrices.
    Ldmatrix {
        n: u8,
        trans: bool,
    },
    /// `wgmma.mma_async` (see `emu::hopper`): only the warp's convergence is collective.
    Wgmma,
    /// `wgmma.mma_async` with A in registers: the warp's A fragments are gathered.
    WgmmaRegA,
    /// `setmaxnreg` (see `emu::hopper`): convergence only.
    Setmaxnreg,
}

impl std::fmt::Display for WarpOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WarpOp::Mma(kind) => return write!(f, "mma.sync.m16n8k16 ({kind:?})"),
            WarpOp::Wgmma => return f.write_str("wgmma.mma_async"),
            WarpOp::WgmmaRegA => return f.write_str("wgmma.mma_async (A in registers)"),
            WarpOp::Setmaxnreg => return f.write_str("setmaxnreg"),
            WarpOp::Ldmatrix { n, trans } => {
                return write!(f, "ldmatrix.x{n}{}", if *trans { ".trans" } else { "" });
            }
            _ => {}
        }
        f.write_str(match self {
            WarpOp::Shfl(ShflMode::Idx) => "shfl_idx_sync",
            WarpOp::Shfl(ShflMode::Up) => "shfl_up_sync",
            WarpOp::Shfl(ShflMode::Down) => "shfl_down_sync",
            WarpOp::Shfl(ShflMode::Xor) => "shfl_xor_sync",
            WarpOp::Vote(VoteMode::All) => "all_sync",
            WarpOp::Vote(VoteMode::Any) => "any_sync",
            WarpOp::Vote(VoteMode::Ballot) => "ballot_sync",
            WarpOp::Sync => "sync_warp",
            WarpOp::Mma(_) | WarpOp::Ldmatrix { .. } | WarpOp::Wgmma | WarpOp::WgmmaRegA | WarpOp::Setmaxnreg => {
                unreachable!("written above")
            }
        })
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Post {
    pub op: WarpOp,
    pub mask: u32,
    pub value: u32,
    pub arg: u32,
    pub at: Loc,
}

/// What the device API needs to know about the thread it runs on.
pub(crate) struct ThreadCtx {
    pub tid: Dim3,
    pub linear: u32,
    pub block: *const BlockCtx,
    pub yielder: Cell<*const Yielder<(), ()>>,
    pub state: Cell<State>,
}

impl ThreadCtx {
    pub fn block(&self) -> &BlockCtx {
        // SAFETY: the BlockCtx outlives every resume of this block's threads (BlockRunner::run).
        unsafe { &*self.block }
    }

    pub fn lane(&self) -> u32 {
        self.linear % 32
    }

    pub fn warp(&self) -> u32 {
        self.linear / 32
    }

    /// Gives control back to the block scheduler until it resumes this thread.
    pub fn suspend(&self) {
        let y = self.yielder.get();
        // SAFETY: set at coroutine start to the yielder of the coroutine now running.
        unsafe { (*y).suspend(()) }
    }
}

/// State shared by the threads of one block.
pub(crate) struct BlockCtx {
    pub block_idx: Dim3,
    pub block_dim: Dim3,
    pub grid_dim: Dim3,
    pub shared: SharedMem,
    /// Completed block barriers so far.
    pub barrier_epoch: Cell<u32>,
    /// Completed `sync_warp`s per warp.
    pub warp_epoch: Vec<Cell<u32>>,
    /// `fence.proxy.async` executed so far, per thread.
    pub proxy_fences: Vec<Cell<u32>>,
    /// Each thread's `proxy_fences` when the last block barrier completed: known to every
    /// thread after it.
    pub barrier_fences: Vec<Cell<u32>>,
    /// Per thread: the fence and release counts of others it knows through named barriers,
    /// mbarriers and `sync_warp` ([`SyncClock`]).
    pub sync_clocks: RefCell<Vec<SyncClock>>,
    /// Arrivals on named barriers and mbarriers so far, per thread ([`SyncClock`]).
    pub releases: Vec<Cell<u32>>,
    pub posts: RefCell<Vec<Option<Post>>>,
    pub results: Vec<Cell<u32>>,
    /// Tensor-core state: wide collective words and pending `cp.async` copies.
    pub tc: super::mma::TcState,
    /// Hopper state: mbarriers, TMA tokens, wgmma bookkeeping.
    pub hopper: super::hopper::HopperState,
    /// Named barriers 1 to 15 (index 0 unused: `sync_threads` is barrier 0).
    pub named: RefCell<[NamedBar; NAMED_BARRIERS]>,
    /// Set when a thread ran or an mbarrier changed in the current scheduling round.
    pub progress: Cell<bool>,
}

/// Hardware barriers per block: `bar.sync 0` is `sync_threads`, 1 to 15 are named.
pub(crate) const NAMED_BARRIERS: usize = 16;

/// One named barrier: the phase in progress and how many completed.
#[derive(Clone, Debug, Default)]
pub(crate) struct NamedBar {
    /// The thread count of the phase in progress (0: none in progress).
    pub threads: u32,
    pub arrived: u32,
    /// Arrivals in the phase in progress, per warp (each must be whole warps); allocated at
    /// the barrier's first arrival, so blocks that use no named barrier allocate nothing.
    pub per_warp: Vec<u32>,
    /// Completed phases.
    pub completed: u32,
    /// The clocks released into the phase in progress, and into every completed one.
    pub arriving: SyncClock,
    pub released: SyncClock,
    /// Where the phase in progress got its first arrival.
    pub first: Option<Loc>,
}

impl NamedBar {
    /// One line on the phase in progress, for deadlock and end-of-block reports.
    pub fn describe(&self, id: u32, block_threads: u32) -> String {
        let first = self.first.map_or(String::new(), |l| format!(", the first at {}:{}", l.file(), l.line()));
        let partial: Vec<String> = self
            .per_warp
            .iter()
            .enumerate()
            .filter_map(|(w, &k)| {
                let lanes = Self::warp_lanes(w, block_threads);
                (!k.is_multiple_of(lanes)).then(|| format!("warp {w} with {k} of its {lanes} lanes"))
            })
            .collect();
        let partial = if partial.is_empty() {
            String::new()
        } else {
            format!(
                "; {} (bar.sync and bar.arrive count whole warps: every lane of a warp must make the call)",
                partial.join(", ")
            )
        };
        format!(
            "named barrier {id}: {} of {} threads arrived in phase {}{first}{partial}",
            self.arrived, self.threads, self.completed
        )
    }

    /// Lanes of warp `w` in a block of `block_threads`.
    pub fn warp_lanes(w: usize, block_threads: u32) -> u32 {
        (block_threads as usize).saturating_sub(32 * w).min(32) as u32
    }
}

impl BlockCtx {
    pub fn thread_dim3(&self, linear: u32) -> Dim3 {
        let bx = self.block_dim.x;
        let by = self.block_dim.y;
        Dim3 { x: linear % bx, y: (linear / bx) % by, z: linear / (bx * by) }
    }
}

thread_local! {
    static CURRENT: Cell<*const ThreadCtx> = const { Cell::new(std::ptr::null()) };
}

/// The emulated thread running on this OS thread; panics (with a message) outside a launch.
pub(crate) fn current() -> &'static ThreadCtx {
    let p = CURRENT.with(|c| c.get());
    assert!(
        !p.is_null(),
        "ferrokern device API called outside a kernel launch: kernels run through the emulator's launch()"
    );
    // SAFETY: set by BlockRunner only while that ThreadCtx is alive and being resumed.
    unsafe { &*p }
}

type Coro = Coroutine<(), (), (), DefaultStack>;

/// Runs blocks one at a time on one worker, reusing coroutine stacks.
pub(crate) struct BlockRunner {
    kernel: &'static str,
    cfg: LaunchConfig,
    stacks: Vec<DefaultStack>,
}

impl BlockRunner {
    pub fn new(kernel: &'static str, cfg: LaunchConfig) -> Self {
        BlockRunner { kernel, cfg, stacks: Vec::new() }
    }

    fn stack(&mut self) -> DefaultStack {
        self.stacks
            .pop()
            .unwrap_or_else(|| DefaultStack::new(STACK_BYTES).expect("emulator: cannot map a coroutine stack"))
    }

    pub fn run<P: Copy + 'static>(&mut self, body: fn(P), params: P, linear_block: u64) -> Result<(), EmuError> {
        let g = self.cfg.grid;
        let b = Dim3 {
            x: (linear_block % g.x as u64) as u32,
            y: ((linear_block / g.x as u64) % g.y as u64) as u32,
            z: (linear_block / (g.x as u64 * g.y as u64)) as u32,
        };
        let n = self.cfg.block.count() as usize;
        let warps = n.div_ceil(32);
        let block = BlockCtx {
            block_idx: b,
            block_dim: self.cfg.block,
            grid_dim: g,
            shared: SharedMem::new(self.cfg.shared_bytes),
            barrier_epoch: Cell::new(0),
            warp_epoch: (0..warps).map(|_| Cell::new(0)).collect(),
            proxy_fences: (0..n).map(|_| Cell::new(0)).collect(),
            barrier_fences: (0..n).map(|_| Cell::new(0)).collect(),
            sync_clocks: RefCell::new(vec![SyncClock::default(); n]),
            releases: (0..n).map(|_| Cell::new(0)).collect(),
            posts: RefCell::new(vec![None; n]),
            results: (0..n).map(|_| Cell::new(0)).collect(),
            tc: super::mma::TcState::new(n),
            hopper: super::hopper::HopperState::new(n, self.cfg.shared_bytes),
            named: RefCell::new(Default::default()),
            progress: Cell::new(false),
        };
        let threads: Vec<ThreadCtx> = (0..n as u32)
            .map(|l| ThreadCtx {
                tid: block.thread_dim3(l),
                linear: l,
                block: &block,
                yielder: Cell::new(std::ptr::null()),
                state: Cell::new(State::Ready),
            })
            .collect();
        let mut coros: Vec<Option<Coro>> = (0..n).map(|_| None).collect();
        let kernel = self.kernel;
        let err = |thread: Option<Dim3>, kind: FaultKind| EmuError { kernel, block: Some(b), thread, kind };

        loop {
            block.progress.set(false);
            for t in 0..n {
                match threads[t].state.get() {
                    State::Ready => block.progress.set(true),
                    State::Poll { .. } | State::Named { .. } | State::Regs { .. } => {}
                    _ => continue,
                }
                if coros[t].is_none() {
                    let stack = self.stack();
                    coros[t] = Some(Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
                        current().yielder.set(y);
                        body(params);
                    }));
                }
                let coro = coros[t].as_mut().expect("created above");
                CURRENT.with(|c| c.set(&threads[t]));
                let r = std::panic::catch_unwind(AssertUnwindSafe(|| coro.resume(())));
                CURRENT.with(|c| c.set(std::ptr::null()));
                match r {
                    Ok(CoroutineResult::Return(())) => {
                        threads[t].state.set(State::Done);
                        let done = coros[t].take().expect("present");
                        self.stacks.push(done.into_stack());
                    }
                    Ok(CoroutineResult::Yield(())) => {}
                    Err(payload) => {
                        let kind = match payload.downcast::<FaultKind>() {
                            Ok(k) => *k,
                            Err(p) => FaultKind::Panic {
                                message: p
                                    .downcast_ref::<&str>()
                                    .map(|s| s.to_string())
                                    .or_else(|| p.downcast_ref::<String>().cloned())
                                    .unwrap_or_else(|| "non-string panic payload".into()),
                            },
                        };
                        return Err(err(Some(threads[t].tid), kind));
                    }
                }
            }

            let all_done = threads.iter().all(|t| t.state.get() == State::Done);
            if all_done || threads.iter().all(|t| matches!(t.state.get(), State::Barrier(_) | State::Done)) {
                // The barrier interval ends here: an uninitialized read in it that no race
                // explained is now certain.
                if let Some((thread, kind)) = block.shared.take_uninit_read(&block) {
                    return Err(err(Some(thread), kind));
                }
            }
            if all_done {
                // A bulk op's shared source must stay valid until its thread's wait: the block's
                // shared memory is handed to the next block when the last thread exits.
                if let Some((byte, r)) = block.shared.pending_async_read() {
                    return Err(err(
                        Some(block.thread_dim3(r.thread)),
                        FaultKind::AsyncProxy {
                            detail: format!(
                                "the thread exited while cp.reduce.async.bulk at {}:{} (bulk group {}) may still read shared byte {byte}: run cp.async.bulk.wait_group (or .read) covering the group before the kernel ends",
                                r.at.file(),
                                r.at.line(),
                                r.group
                            ),
                        },
                    ));
                }
                // Every phase a kernel starts must complete: an arrival nobody waits for (one
                // `arrive` too many) leaves a phase open.
                let named = block.named.borrow();
                if let Some((id, bar)) = named.iter().enumerate().find(|(_, b)| b.threads != 0) {
                    return Err(err(
                        None,
                        FaultKind::BarrierDivergence {
                            detail: format!(
                                "the block ended with a phase open at {}: every phase a kernel starts must complete",
                                bar.describe(id as u32, n as u32)
                            ),
                        },
                    ));
                }
                return Ok(());
            }
            if block.progress.get() {
                continue;
            }
            if self.resolve_warps(&block, &threads).map_err(|k| err(None, k))? {
                continue;
            }
            // Nothing ran, no mbarrier moved and no collective completed: pollers wait forever.
            let polling: Vec<String> = threads
                .iter()
                .filter_map(|t| match t.state.get() {
                    State::Poll { bar, at } => Some(format!(
                        "thread {} at {}:{} waits on the {}",
                        d3(t.tid),
                        at.file(),
                        at.line(),
                        block.hopper.describe(bar)
                    )),
                    State::Named { id, at, .. } => Some(format!(
                        "thread {} at {}:{} waits on {}",
                        d3(t.tid),
                        at.file(),
                        at.line(),
                        block.named.borrow()[id as usize].describe(id, n as u32)
                    )),
                    State::Regs { want, at } => Some(format!(
                        "thread {} at {}:{} waits in setmaxnreg.inc {want}: {}",
                        d3(t.tid),
                        at.file(),
                        at.line(),
                        block.hopper.describe_regs()
                    )),
                    _ => None,
                })
                .collect();
            if !polling.is_empty() {
                let more = if polling.len() > 4 { format!(" (and {} more)", polling.len() - 4) } else { String::new() };
                return Err(err(
                    None,
                    FaultKind::Deadlock { detail: format!("{}{more}", polling[..polling.len().min(4)].join("; ")) },
                ));
            }
            self.release_barrier(&block, &threads).map_err(|k| err(None, k))?;
        }
    }

    /// Completes every warp collective whose lanes have all arrived. Returns whether any did.
    fn resolve_warps(&self, block: &BlockCtx, threads: &[ThreadCtx]) -> Result<bool, FaultKind> {
        let n = threads.len();
        let mut progressed = false;
        let mut posts = block.posts.borrow_mut();
        for w in 0..n.div_ceil(32) {
            let base = w * 32;
            let lanes = (n - base).min(32);
            let exists: u32 = if lanes == 32 { !0 } else { (1u32 << lanes) - 1 };
            let mut posted = 0u32;
            for l in 0..lanes {
                if threads[base + l].state.get() == State::Warp {
                    posted |= 1 << l;
                }
            }
            let mut handled = 0u32;
            for l in 0..lanes {
                if posted & (1 << l) == 0 || handled & (1 << l) != 0 {
                    continue;
                }
                let p = posts[base + l].expect("a lane in State::Warp has a post");
                let who = |lane: usize| d3(block.thread_dim3((base + lane) as u32));
                let at = |l: Loc| format!("{}:{}", l.file(), l.line());
                if p.mask & (1 << l) == 0 {
                    return Err(FaultKind::WarpDivergence {
                        detail: format!(
                            "thread {} calls {} with mask {:#010x}, which excludes its own lane {}, at {}",
                            who(l),
                            p.op,
                            p.mask,
                            l,
                            at(p.at)
                        ),
                    });
                }
                if p.mask & !exists != 0 {
                    return Err(FaultKind::WarpDivergence {
                        detail: format!(
                            "mask {:#010x} at {} names lanes past the block's last thread",
                            p.mask,
                            at(p.at)
                        ),
                    });
                }
                for m in 0..lanes {
                    if p.mask & (1 << m) != 0 && threads[base + m].state.get() == State::Done {
                        return Err(FaultKind::WarpDivergence {
                            detail: format!(
                                "{} at {} (mask {:#010x}) waits for lane {} (thread {}), which exited without reaching it",
                                p.op,
                                at(p.at),
                                p.mask,
                                m,
                                who(m)
                            ),
                        });
                    }
                }
                if p.mask & !posted != 0 {
                    continue; // someone is not there yet
                }
                for m in 0..lanes {
                    if p.mask & (1 << m) != 0 {
                        let q = posts[base + m].expect("posted");
                        if q.op != p.op || q.mask != p.mask {
                            return Err(FaultKind::WarpDivergence {
                                detail: format!(
                                    "lane {} is at {} (mask {:#010x}) at {} while lane {} is at {} (mask {:#010x}) at {}",
                                    l,
                                    p.op,
                                    p.mask,
                                    at(p.at),
                                    m,
                                    q.op,
                                    q.mask,
                                    at(q.at)
                                ),
                            });
                        }
                    }
                }
                if matches!(p.op, WarpOp::Mma(_) | WarpOp::Ldmatrix { .. } | WarpOp::WgmmaRegA) {
                    super::mma::resolve(p.op, p.mask, block, base)?;
                }
                let value = |lane: usize| posts[base + lane].expect("posted").value;
                for m in 0..lanes {
                    if p.mask & (1 << m) == 0 {
                        continue;
                    }
                    let q = posts[base + m].expect("posted");
                    let r = match p.op {
                        WarpOp::Sync
                        | WarpOp::Mma(_)
                        | WarpOp::Ldmatrix { .. }
                        | WarpOp::Wgmma
                        | WarpOp::WgmmaRegA
                        | WarpOp::Setmaxnreg => 0,
                        WarpOp::Vote(mode) => {
                            let mut ballot = 0u32;
                            for k in 0..lanes {
                                if p.mask & (1 << k) != 0 && value(k) != 0 {
                                    ballot |= 1 << k;
                                }
                            }
                            match mode {
                                VoteMode::All => (ballot == p.mask) as u32,
                                VoteMode::Any => (ballot != 0) as u32,
                                VoteMode::Ballot => ballot,
                            }
                        }
                        WarpOp::Shfl(mode) => {
                            let src = match mode {
                                ShflMode::Idx => (q.arg & 31) as usize,
                                ShflMode::Up => m.checked_sub(q.arg as usize).unwrap_or(m),
                                ShflMode::Down => {
                                    let s = m + q.arg as usize;
                                    if s < 32 { s } else { m }
                                }
                                ShflMode::Xor => m ^ (q.arg as usize & 31),
                            };
                            if src >= lanes || p.mask & (1 << src) == 0 {
                                return Err(FaultKind::WarpDivergence {
                                    detail: format!(
                                        "lane {} shuffles from lane {}, which is not in mask {:#010x} (its value is undefined on the GPU), at {}",
                                        m,
                                        src,
                                        p.mask,
                                        at(q.at)
                                    ),
                                });
                            }
                            value(src)
                        }
                    };
                    block.results[base + m].set(r);
                }
                for m in 0..lanes {
                    if p.mask & (1 << m) != 0 {
                        posts[base + m] = None;
                        threads[base + m].state.set(State::Ready);
                    }
                }
                if p.op == WarpOp::Sync {
                    block.warp_epoch[w].set(block.warp_epoch[w].get() + 1);
                    // Each participating lane now knows what the others knew (their accesses
                    // before this are ordered by the warp epoch).
                    let lanes_in = (0..lanes).filter(|&m| p.mask & (1 << m) != 0).map(|m| (base + m) as u32);
                    let mut joined = SyncClock::default();
                    lanes_in.clone().for_each(|l| joined.join_lane(block, l));
                    lanes_in.for_each(|l| joined.acquire(block, l));
                }
                handled |= p.mask;
                progressed = true;
            }
        }
        Ok(progressed)
    }

    /// Releases the block barrier when every live thread waits at the same one; otherwise the
    /// block can make no progress, and the error says why.
    fn release_barrier(&self, block: &BlockCtx, threads: &[ThreadCtx]) -> Result<(), FaultKind> {
        let mut first: Option<(usize, Loc)> = None;
        let mut exited: Option<usize> = None;
        let mut in_warp_op: Option<usize> = None;
        for (i, t) in threads.iter().enumerate() {
            match t.state.get() {
                State::Barrier(at) => match first {
                    None => first = Some((i, at)),
                    Some((j, at0)) if at0 != at => {
                        return Err(FaultKind::BarrierDivergence {
                            detail: format!(
                                "thread {} waits at the barrier at {}:{} while thread {} waits at another barrier at {}:{}",
                                d3(threads[j].tid),
                                at0.file(),
                                at0.line(),
                                d3(t.tid),
                                at.file(),
                                at.line()
                            ),
                        });
                    }
                    _ => {}
                },
                State::Done => exited = exited.or(Some(i)),
                State::Warp => in_warp_op = in_warp_op.or(Some(i)),
                State::Ready | State::Poll { .. } | State::Named { .. } | State::Regs { .. } => {
                    unreachable!("the scheduler runs every ready thread and reports stuck pollers before this")
                }
            }
        }
        let Some((j, at)) = first else {
            let i = in_warp_op.expect("some thread is blocked");
            let p = block.posts.borrow()[i].expect("posted");
            return Err(FaultKind::WarpDivergence {
                detail: format!(
                    "thread {} waits in {} (mask {:#010x}) at {}:{} for lanes that never arrive",
                    d3(threads[i].tid),
                    p.op,
                    p.mask,
                    p.at.file(),
                    p.at.line()
                ),
            });
        };
        if let Some(i) = in_warp_op {
            let p = block.posts.borrow()[i].expect("posted");
            return Err(FaultKind::BarrierDivergence {
                detail: format!(
                    "thread {} waits at the barrier at {}:{} while thread {} waits in {} at {}:{} for lanes that are at that barrier",
                    d3(threads[j].tid),
                    at.file(),
                    at.line(),
                    d3(threads[i].tid),
                    p.op,
                    p.at.file(),
                    p.at.line()
                ),
            });
        }
        if let Some(i) = exited {
            return Err(FaultKind::BarrierDivergence {
                detail: format!(
                    "thread {} waits at the barrier at {}:{}, but thread {} exited without reaching it",
                    d3(threads[j].tid),
                    at.file(),
                    at.line(),
                    d3(threads[i].tid)
                ),
            });
        }
        block.barrier_epoch.set(block.barrier_epoch.get() + 1);
        for (known, fences) in block.barrier_fences.iter().zip(&block.proxy_fences) {
            known.set(fences.get());
        }
        for t in threads {
            t.state.set(State::Ready);
        }
        Ok(())
    }
}
