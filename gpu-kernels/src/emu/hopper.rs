//! Hopper's asynchronous instructions on the emulator: mbarriers, TMA tile loads, bulk
//! reductions and wgmma.
//!
//! Model (layouts and protocols as in `device::hopper`):
//! - An mbarrier lives in a side table keyed by its shared offset (its 8 bytes are not used):
//!   expected arrivals, pending arrivals, pending transaction bytes, completed phases. A phase
//!   completes when both pending counts reach zero. `wait(parity)` suspends the thread in a
//!   polling state until the phase of that parity has completed; when no thread of the block
//!   can make progress any more while some wait, the launch fails with a deadlock error that
//!   names every waiting thread's barrier and what it still lacks.
//! - A TMA load completes at issue: the box (rank 2 or 3, the map's rank must be the
//!   instruction's) is read from global memory through the descriptor (zeros outside the
//!   tensor, per dimension), written to shared memory with the swizzle, and its
//!   bytes complete on the mbarrier's current phase. Every 16-byte chunk it writes remembers
//!   that (barrier, phase).
//! - A wgmma runs at issue, each thread computing its own 64 x N fragment rows from the shared
//!   operands named by the descriptors (products exact in f32, added in k order with f32
//!   rounding). The warp posts it as a collective, so a lane that skips it is divergence; a
//!   register A is assembled from the warp's lanes in that collective (each thread gets its
//!   rows `g`, `g + 8`), so a mis-laid A fragment gives wrong numbers, as on the GPU.
//! - Ordering checks, the async proxy's own: a wgmma may read a TMA-written chunk only if
//!   its thread has waited for the phase that load completed on; a TMA may overwrite a chunk
//!   only if the last wgmma that read it is known complete to the issuing thread: through
//!   its own `wgmma_wait`, or through an mbarrier phase that the reading warpgroup's threads
//!   arrived on after their wait (a vector clock over warpgroups carried by mbarrier phases).
//! - A wgmma may not read bytes last stored by a thread (the generic proxy) unless that thread
//!   has executed `fence.proxy.async` since the store and, when it is another thread, that
//!   fence is ordered before the wgmma: by a block barrier, or by the writer's arrival on a
//!   named barrier or an mbarrier whose phase the reader waited for, possibly through other
//!   threads' arrivals and `sync_warp`s (`shadow::SyncClock`). The same clock orders plain
//!   shared accesses for the race detector.
//! - A bulk reduction (`cp.reduce.async.bulk ... add.f32`, shared -> global) reads its source
//!   under the same rules as a wgmma operand and applies its adds at issue (each element's
//!   atomically; the emulator does not delay global visibility until `wait_group`). Its
//!   source chunks stay claimed until the issuing thread's `cp.async.bulk.wait_group[.read]`
//!   covers its bulk group: any store into them before that (plain, `cp.async`, TMA) is an
//!   error naming both sides; at the wait they become a plain read by that thread, so the
//!   race detector orders later stores by other threads after it.
//! - Not modelled: the 8 bytes of an mbarrier being touched by plain loads and stores, cluster
//!   scope.

use super::block::{BlockCtx, State, WarpOp, current};
use super::shadow::{AsyncRead, SyncClock};
use super::{FaultKind, Loc};
use crate::device::hopper::{Swizzle, TmaDesc, swizzle_addr};
use crate::device::mma::MmaKind;
use core::panic::Location;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// Warpgroups a block can hold (1024 threads / 128).
const WGS: usize = 8;

fn fault(kind: FaultKind) -> ! {
    std::panic::resume_unwind(Box::new(kind))
}

fn async_fault(detail: String) -> ! {
    fault(FaultKind::AsyncProxy { detail })
}

fn at_str(l: Loc) -> String {
    format!("{}:{}", l.file(), l.line())
}

#[derive(Clone, Debug)]
pub(crate) struct Mbar {
    count: u32,
    pending: u32,
    tx: i64,
    /// Completed phases; the phase in progress has parity `phase & 1`.
    phase: u32,
    /// Warpgroup clock joined from this phase's arrivals so far, and at the last completion.
    arriving: [u32; WGS],
    completed: [u32; WGS],
    /// The arrivals' clocks ([`super::shadow::SyncClock`]): this phase's so far, and
    /// every completed phase's.
    arriving_clock: SyncClock,
    completed_clock: SyncClock,
}

#[derive(Default, Clone)]
struct ThreadState {
    /// wgmma ops issued and known complete (own warpgroup); the op count at each commit.
    issued: u32,
    done: u32,
    commits: Vec<u32>,
    /// Per warpgroup: wgmma ops known complete through mbarrier phases.
    clock: [u32; WGS],
    /// Per mbarrier: phases this thread has seen completed.
    seen: HashMap<u32, u32>,
    /// setmaxnreg instructions executed.
    maxnreg: u32,
    /// Registers per thread this thread holds (its warpgroup's `setmaxnreg` count).
    regs: u32,
    /// `cp.async.bulk.commit_group`s executed: a bulk op issued now joins group `bulk_commits + 1`.
    bulk_commits: u32,
}

/// Per-block state of the Hopper instructions.
pub(crate) struct HopperState {
    bars: RefCell<HashMap<u32, Mbar>>,
    threads: RefCell<Vec<ThreadState>>,
    /// Per 16-byte shared chunk: the (mbarrier, phase) its last TMA write completed on.
    tma_token: RefCell<Vec<Option<(u32, u32)>>>,
    /// Per 16-byte shared chunk: (warpgroup, op number) of the last wgmma that read it.
    last_read: RefCell<Vec<Option<(usize, u32)>>>,
    /// Per (warpgroup, op number): the first thread's operands and where, and how many of the
    /// warpgroup's threads have issued it; every thread must pass the same ones.
    issued_ops: RefCell<HashMap<(usize, u32), IssuedOp>>,
    /// Per (warpgroup, setmaxnreg number): the first thread's call and how many of the
    /// warpgroup's threads executed it.
    maxnreg_ops: RefCell<HashMap<(usize, u32), MaxnregOp>>,
    /// Registers per thread at launch, and the block's pool of registers no thread holds
    /// (`setmaxnreg.dec` gives to it, `.inc` takes from it).
    entry_regs: u32,
    free_regs: Cell<u32>,
}

/// What the ISA requires to be uniform across a warpgroup's threads for one wgmma.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct WgmmaOperands {
    a: u64,
    b: u64,
    n: u32,
    trans_a: u32,
    trans_b: u32,
    scale_d: bool,
}

/// One `setmaxnreg` as the first thread of a warpgroup ran it.
struct MaxnregOp {
    inc: bool,
    regs: u32,
    thread: u32,
    at: Loc,
    seen: u32,
}

struct IssuedOp {
    operands: WgmmaOperands,
    thread: u32,
    at: Loc,
    seen: u32,
}

impl HopperState {
    pub fn new(threads: usize, shared_bytes: u32) -> Self {
        let chunks = shared_bytes.div_ceil(16) as usize;
        // Kernels that move registers between warpgroups are built for one block per SM
        // (`.minnctapersm 1`), so each thread starts with the register file's share of one
        // block this size (tests/ptxas.rs checks that ptxas gives the library's kernels exactly
        // that).
        let entry_regs = crate::launch_regs_per_thread(threads.max(1) as u32);
        HopperState {
            bars: RefCell::new(HashMap::new()),
            threads: RefCell::new(vec![ThreadState { regs: entry_regs, ..ThreadState::default() }; threads]),
            tma_token: RefCell::new(vec![None; chunks]),
            last_read: RefCell::new(vec![None; chunks]),
            issued_ops: RefCell::new(HashMap::new()),
            maxnreg_ops: RefCell::new(HashMap::new()),
            entry_regs,
            free_regs: Cell::new(0),
        }
    }

    /// For the deadlock report of a thread stuck in `setmaxnreg.inc`: the block's registers.
    pub fn describe_regs(&self) -> String {
        let threads = self.threads.borrow();
        let held: u32 = threads.iter().map(|t| t.regs).sum();
        let mut counts: Vec<u32> = threads.iter().map(|t| t.regs).collect();
        counts.dedup();
        format!(
            "the block got {} x {} = {} registers at launch, its threads hold {held} (per thread, in order: {counts:?}) and {} are free; .inc waits until other warpgroups' .dec free enough, so a split whose total exceeds the launch-time registers waits forever",
            self.entry_regs,
            threads.len(),
            self.entry_regs as usize * threads.len(),
            self.free_regs.get()
        )
    }

    /// For the deadlock report: what the barrier a thread polls still lacks.
    pub fn describe(&self, offset: u32) -> String {
        match self.bars.borrow().get(&offset) {
            Some(b) => format!(
                "mbarrier at shared byte {offset}: {} of {} arrivals and {} transaction bytes still missing in phase {}",
                b.pending, b.count, b.tx, b.phase
            ),
            None => format!("mbarrier at shared byte {offset}, never initialized"),
        }
    }
}

fn check_bar_slot(block: &BlockCtx, offset: u32, at: Loc) {
    if !offset.is_multiple_of(8) || offset + 8 > block.shared.size() {
        fault(FaultKind::SharedOutOfBounds {
            write: true,
            index: 0,
            len: 1,
            offset,
            shared_bytes: block.shared.size(),
            at,
        });
    }
}

pub fn smem_addr(offset: u32) -> u32 {
    offset
}

#[track_caller]
pub fn mbar_init(offset: u32, count: u32) {
    let t = current();
    let block = t.block();
    let at = Location::caller();
    check_bar_slot(block, offset, at);
    if count == 0 || count >= 1 << 20 {
        async_fault(format!("mbarrier.init with count {count} at {} (valid: 1 ..= 2^20 - 1)", at_str(at)));
    }
    let mut bars = block.hopper.bars.borrow_mut();
    if bars.contains_key(&offset) {
        async_fault(format!("mbarrier at shared byte {offset} initialized twice (again at {})", at_str(at)));
    }
    let fresh = SyncClock::default();
    bars.insert(
        offset,
        Mbar {
            count,
            pending: count,
            tx: 0,
            phase: 0,
            arriving: [0; WGS],
            completed: [0; WGS],
            arriving_clock: fresh.clone(),
            completed_clock: fresh,
        },
    );
}

fn bar_missing(offset: u32, at: Loc) -> ! {
    async_fault(format!(
        "mbarrier at shared byte {offset} used at {} before mbarrier.init (or after a fault)",
        at_str(at)
    ))
}

/// Completes the phase if nothing is pending.
fn maybe_complete(b: &mut Mbar) {
    if b.pending == 0 && b.tx == 0 {
        b.phase += 1;
        b.pending = b.count;
        b.completed = b.arriving;
        b.completed_clock.complete(&mut b.arriving_clock);
    }
}

#[track_caller]
pub fn mbar_arrive(offset: u32, tx_bytes: u32) {
    let t = current();
    let block = t.block();
    let at = Location::caller();
    let wg = t.linear as usize / 128;
    let ts = block.hopper.threads.borrow()[t.linear as usize].clone();
    let mut bars = block.hopper.bars.borrow_mut();
    let Some(b) = bars.get_mut(&offset) else { bar_missing(offset, at) };
    if b.pending == 0 {
        async_fault(format!(
            "mbarrier at shared byte {offset}: more arrivals than its count {} at {}",
            b.count,
            at_str(at)
        ));
    }
    b.tx += tx_bytes as i64;
    b.pending -= 1;
    for (c, &k) in b.arriving.iter_mut().zip(&ts.clock) {
        *c = (*c).max(k);
    }
    b.arriving[wg] = b.arriving[wg].max(ts.done);
    b.arriving_clock.release(block, t.linear);
    maybe_complete(b);
    block.progress.set(true);
}

#[track_caller]
pub fn mbar_wait(offset: u32, parity: u32) {
    let t = current();
    let block = t.block();
    let at = Location::caller();
    loop {
        {
            let bars = block.hopper.bars.borrow();
            let Some(b) = bars.get(&offset) else { bar_missing(offset, at) };
            if b.phase & 1 != parity & 1 {
                let mut threads = block.hopper.threads.borrow_mut();
                let ts = &mut threads[t.linear as usize];
                ts.seen.insert(offset, b.phase);
                for (c, &k) in ts.clock.iter_mut().zip(&b.completed) {
                    *c = (*c).max(k);
                }
                b.completed_clock.acquire(block, t.linear);
                block.progress.set(true);
                t.state.set(State::Ready);
                return;
            }
        }
        t.state.set(State::Poll { bar: offset, at });
        t.suspend();
    }
}

pub fn fence_mbarrier_init() {}

/// `fence.proxy.async`: the thread's generic shared-memory writes so far may now be read by
/// the async proxy (wgmma); counted per thread, checked when a wgmma reads the bytes.
pub fn fence_proxy_async() {
    let t = current();
    let c = &t.block().proxy_fences[t.linear as usize];
    c.set(c.get() + 1);
}

pub fn fence_tensormap_acquire(_map: u64) {}

#[track_caller]
pub fn tma_load_2d(dst: u32, map: u64, c0: i32, c1: i32, bar: u32) {
    tma_load(dst, map, [c0, c1, 0], 2, bar, Location::caller())
}

#[track_caller]
pub fn tma_load_3d(dst: u32, map: u64, c0: i32, c1: i32, c2: i32, bar: u32) {
    tma_load(dst, map, [c0, c1, c2], 3, bar, Location::caller())
}

/// One TMA box load of the instruction form `rank` (2 or 3; the map must have been encoded
/// for it) at coordinates `c`.
fn tma_load(dst: u32, map: u64, c: [i32; 3], rank: u32, bar: u32, at: Loc) {
    let t = current();
    let block = t.block();
    if map == 0 || !map.is_multiple_of(64) {
        async_fault(format!("tensor map address {map:#x} at {} is not a 64-byte aligned slot", at_str(at)));
    }
    // SAFETY: the launcher passes the address of a TmaDesc it wrote into a live buffer of the
    // launch (TENSOR_MAP_BYTES, 64-byte aligned); the magic number is checked before use.
    let d: TmaDesc = unsafe { std::ptr::read(map as *const TmaDesc) };
    if d.magic != TmaDesc::MAGIC {
        async_fault(format!("the tensor map at {map:#x} (used at {}) was not encoded for the emulator", at_str(at)));
    }
    if d.rank != rank || (rank == 2 && (d.dims[2] != 1 || d.box_dims[2] != 1)) {
        async_fault(format!(
            "a {rank}D TMA load at {} through a rank-{} tensor map: the instruction's dimensionality must be the map's",
            at_str(at),
            d.rank
        ));
    }
    let swizzle = match d.swizzle {
        0 => Swizzle::None,
        32 => Swizzle::B32,
        64 => Swizzle::B64,
        128 => Swizzle::B128,
        s => async_fault(format!("tensor map swizzle {s} is not 0, 32, 64 or 128")),
    };
    let row = d.box_dims[0] * d.elem_bytes;
    if swizzle != Swizzle::None && row != swizzle as u32 {
        async_fault(format!(
            "TMA box rows of {row} bytes with a {}-byte swizzle: the emulator models boxes whose rows are exactly the swizzle span",
            swizzle as u32
        ));
    }
    let bytes = d.box_bytes();
    if !dst.is_multiple_of(swizzle.period()) || dst as u64 + bytes as u64 > block.shared.size() as u64 {
        async_fault(format!(
            "TMA destination shared byte {dst} + {bytes} bytes at {}: must be {}-byte aligned and inside the {}-byte segment",
            at_str(at),
            swizzle.period(),
            block.shared.size()
        ));
    }
    // Overwriting chunks a wgmma may still be reading?
    {
        let threads = block.hopper.threads.borrow();
        let ts = &threads[t.linear as usize];
        let own_wg = t.linear as usize / 128;
        let reads = block.hopper.last_read.borrow();
        for c in dst / 16..(dst + bytes) / 16 {
            if let Some((wg, op)) = reads[c as usize] {
                let known = if wg == own_wg { ts.done.max(ts.clock[wg]) } else { ts.clock[wg] };
                if known < op {
                    async_fault(format!(
                        "TMA at {} overwrites shared byte {} which wgmma #{op} of warpgroup {wg} may still be reading: wait on the barrier its threads arrive on after wgmma_wait",
                        at_str(at),
                        16 * c
                    ));
                }
            }
        }
    }
    let phase = {
        let bars = block.hopper.bars.borrow();
        match bars.get(&bar) {
            Some(b) => b.phase,
            None => bar_missing(bar, at),
        }
    };
    let mut buf = vec![0u8; bytes as usize];
    let eb = d.elem_bytes as usize;
    let [c0, c1, c2] = c.map(|x| x as i64);
    // Box rows in order: plane by plane, each `box_dims[1]` rows of `box_dims[0]` elements.
    for (r, (y, z)) in
        (0..d.box_dims[2] as i64).flat_map(|p| (0..d.box_dims[1] as i64).map(move |r| (c1 + r, c2 + p))).enumerate()
    {
        for e in 0..d.box_dims[0] as i64 {
            let x = c0 + e;
            if x < 0 || y < 0 || z < 0 || x as u64 >= d.dims[0] || y as u64 >= d.dims[1] || z as u64 >= d.dims[2] {
                continue; // zero fill
            }
            let src = d.base as usize
                + z as usize * d.strides[1] as usize
                + y as usize * d.strides[0] as usize
                + x as usize * eb;
            let off = (r * d.box_dims[0] as usize + e as usize) * eb;
            let addr = swizzle_addr(dst + off as u32, swizzle) - dst;
            // SAFETY: the launcher encoded `base`, `dims` and `strides` from a view that holds
            // every in-bounds element; (x, y, z) is inside `dims`.
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, buf.as_mut_ptr().add(addr as usize), eb) };
        }
    }
    if let Err(k) = block.shared.write_async(dst, &buf, at) {
        fault(k);
    }
    {
        let mut tokens = block.hopper.tma_token.borrow_mut();
        for c in dst / 16..(dst + bytes) / 16 {
            tokens[c as usize] = Some((bar, phase));
        }
        block.hopper.last_read.borrow_mut()[(dst / 16) as usize..((dst + bytes) / 16) as usize].fill(None);
    }
    let mut bars = block.hopper.bars.borrow_mut();
    let b = bars.get_mut(&bar).expect("checked above");
    b.tx -= bytes as i64;
    maybe_complete(b);
    block.progress.set(true);
}

/// `setmaxnreg`: the count must be a multiple of 8 in 24..=256 and the same, with the same
/// direction, in all 128 threads of the warpgroup (`.sync.aligned`); the warp executes it
/// converged. Registers are counted per thread against the block's pool, as on the GPU:
/// `.dec` returns registers to it, `.inc` waits until the pool has them, so a split beyond
/// the block's launch-time registers is reported as a deadlock where the GPU would hang.
#[track_caller]
fn setmaxnreg(inc: bool, regs: u32) {
    let at = Location::caller();
    let name = if inc { "setmaxnreg.inc" } else { "setmaxnreg.dec" };
    if !(24..=256).contains(&regs) || !regs.is_multiple_of(8) {
        async_fault(format!("{name} {regs} at {}: the count must be a multiple of 8 in 24..=256", at_str(at)));
    }
    super::mma::warp_converge(WarpOp::Setmaxnreg);
    let t = current();
    let block = t.block();
    let wg = t.linear as usize / 128;
    let n = {
        let mut threads = block.hopper.threads.borrow_mut();
        threads[t.linear as usize].maxnreg += 1;
        threads[t.linear as usize].maxnreg
    };
    let mut ops = block.hopper.maxnreg_ops.borrow_mut();
    let e = ops.entry((wg, n)).or_insert(MaxnregOp { inc, regs, thread: t.linear, at, seen: 0 });
    if (e.inc, e.regs) != (inc, regs) {
        async_fault(format!(
            "setmaxnreg #{n} of warpgroup {wg}: thread {} at {} runs {name} {regs}, thread {} at {} ran {} {}; the whole warpgroup must run the same one",
            t.linear,
            at_str(at),
            e.thread,
            at_str(e.at),
            if e.inc { "setmaxnreg.inc" } else { "setmaxnreg.dec" },
            e.regs
        ));
    }
    e.seen += 1;
    if e.seen == 128 {
        ops.remove(&(wg, n));
    }
    drop(ops);
    // `.inc` only takes and `.dec` only gives: one that would move the count the other way
    // (a kernel whose count at launch is not the one assumed above) leaves it as it is.
    let held = block.hopper.threads.borrow()[t.linear as usize].regs;
    let (want, give) = if inc { (regs.saturating_sub(held), 0) } else { (0, held.saturating_sub(regs)) };
    let pool = &block.hopper.free_regs;
    loop {
        if pool.get() >= want {
            pool.set(pool.get() - want + give);
            block.hopper.threads.borrow_mut()[t.linear as usize].regs = held + want - give;
            block.progress.set(true);
            t.state.set(State::Ready);
            return;
        }
        t.state.set(State::Regs { want: regs, at });
        t.suspend();
    }
}

#[track_caller]
pub fn setmaxnreg_inc(regs: u32) {
    setmaxnreg(true, regs)
}

#[track_caller]
pub fn setmaxnreg_dec(regs: u32) {
    setmaxnreg(false, regs)
}

pub fn wgmma_fence() {}

/// The operand fences (`device::hopper::wgmma_fence_operands`) only constrain the compiler's
/// code motion on the GPU; the emulator's wgmmas complete at issue.
pub fn fence_f32x4(_: &mut [f32; 4]) {}
pub fn fence_u32x4(_: &mut [u32; 4]) {}
pub fn fence_f32x32(_: &mut [f32; 32]) {}
pub fn fence_f32x64(_: &mut [f32; 64]) {}
pub fn fence_f32x128(_: &mut [f32; 128]) {}

pub fn wgmma_commit() {
    let t = current();
    let mut threads = t.block().hopper.threads.borrow_mut();
    let ts = &mut threads[t.linear as usize];
    ts.commits.push(ts.issued);
}

#[track_caller]
pub fn wgmma_wait<const N: u32>() {
    let t = current();
    let mut threads = t.block().hopper.threads.borrow_mut();
    let ts = &mut threads[t.linear as usize];
    // The emulator's wgmmas complete at issue; the bookkeeping follows the ISA's rule: every
    // committed group but the newest N is complete (uncommitted wgmmas are not).
    let groups = ts.commits.len();
    if groups > N as usize {
        ts.done = ts.done.max(ts.commits[groups - N as usize - 1]);
    }
}

/// Byte address of element (`mn`, `k`) of a descriptor's 16-bit tile (layouts in
/// `device::hopper`'s docs); `mn_major`: the transposed (MN-major) form.
fn desc_addr(desc: u64, mn: u32, k: u32, mn_major: bool, at: Loc) -> u32 {
    let start = ((desc & 0x3FFF) << 4) as u32;
    let lbo = (((desc >> 16) & 0x3FFF) << 4) as u32;
    let sbo = (((desc >> 32) & 0x3FFF) << 4) as u32;
    let base = (desc >> 49) & 7;
    if base != 0 {
        async_fault(format!("wgmma descriptor {desc:#x} at {} has a nonzero base offset (not modelled)", at_str(at)));
    }
    let swizzle = match desc >> 62 {
        0 => Swizzle::None,
        1 => Swizzle::B128,
        2 => Swizzle::B64,
        _ => Swizzle::B32,
    };
    let off = match (swizzle, mn_major) {
        // Interleaved (no swizzle): 8 x 16-byte core matrices.
        (Swizzle::None, false) => (mn % 8) * 16 + (mn / 8) * sbo + (k % 8) * 2 + (k / 8) * lbo,
        (Swizzle::None, true) => (mn % 8) * 2 + (mn / 8) * sbo + (k % 8) * 16 + (k / 8) * lbo,
        (s, false) => (mn % 8) * s as u32 + (mn / 8) * sbo + 2 * k,
        (s, true) => {
            let per = s as u32 / 2;
            2 * (mn % per) + (mn / per) * lbo + (k % 8) * s as u32 + (k / 8) * sbo
        }
    };
    swizzle_addr(start + off, swizzle)
}

fn to_f32(kind: MmaKind, h: u16) -> f32 {
    match kind {
        MmaKind::Bf16 => f32::from_bits((h as u32) << 16),
        MmaKind::F16 => half::f16::from_bits(h).to_f32(),
    }
}

/// `pub fn $name` for shape m64n`$n`k16 (`$n / 2` accumulators): A from a descriptor.
macro_rules! wgmma_ss {
    ($name:ident, $n:literal) => {
        #[track_caller]
        pub fn $name<const TRANS_A: u32, const TRANS_B: u32>(
            kind: MmaKind,
            d: &mut [f32; $n / 2],
            a: u64,
            b: u64,
            scale_d: bool,
        ) {
            let ops = WgmmaOperands { a, b, n: $n, trans_a: TRANS_A, trans_b: TRANS_B, scale_d };
            wgmma(kind, d, WgmmaA::Shared(a), b, ops)
        }
    };
}

/// The register-A form: `a` is this thread's A fragment (layout in `device::hopper`).
macro_rules! wgmma_rs {
    ($name:ident, $n:literal) => {
        #[track_caller]
        pub fn $name<const TRANS_B: u32>(kind: MmaKind, d: &mut [f32; $n / 2], a: [u32; 4], b: u64, scale_d: bool) {
            let ops = WgmmaOperands { a: REGS_A, b, n: $n, trans_a: 0, trans_b: TRANS_B, scale_d };
            wgmma(kind, d, WgmmaA::Regs(a), b, ops)
        }
    };
}

wgmma_ss!(wgmma_m64n64k16, 64);
wgmma_ss!(wgmma_m64n128k16, 128);
wgmma_ss!(wgmma_m64n256k16, 256);
wgmma_rs!(wgmma_rs_m64n64k16, 64);
wgmma_rs!(wgmma_rs_m64n128k16, 128);
wgmma_rs!(wgmma_rs_m64n256k16, 256);

/// The `a` operand recorded for a register-A wgmma (no descriptor can be all ones: its
/// reserved bits 46-48 are zero).
const REGS_A: u64 = u64::MAX;

/// Where a wgmma's A comes from.
enum WgmmaA {
    Shared(u64),
    Regs([u32; 4]),
}

/// The async proxy's read of shared bytes `addr .. addr + size` by thread `reader`'s `what`
/// (a wgmma operand, a bulk op's source): bytes a TMA loaded need the reader to have waited
/// for the phase the load completed on; bytes a thread stored need that thread's
/// `fence.proxy.async` after the store, ordered before the reader (`SharedMem::unpublished_write`).
fn async_read_check(block: &BlockCtx, reader: u32, addr: u32, size: u32, what: &str, at: Loc) {
    for chunk in addr / 16..(addr + size).div_ceil(16) {
        let token = block.hopper.tma_token.borrow()[chunk as usize];
        match token {
            Some((bar, phase)) => {
                let seen = block.hopper.threads.borrow()[reader as usize].seen.get(&bar).copied().unwrap_or(0);
                if seen <= phase {
                    async_fault(format!(
                        "{what} at {} reads shared byte {}, loaded by a TMA completing phase {phase} of the mbarrier at shared byte {bar}, which this thread has not waited for",
                        at_str(at),
                        addr.max(16 * chunk)
                    ));
                }
            }
            // A TMA writes whole chunks, so only chunks without a token can hold unwritten bytes.
            None => {
                let (lo, hi) = (addr.max(16 * chunk), (addr + size).min(16 * chunk + 16));
                if !block.shared.is_written(lo, hi - lo) {
                    let first = (lo..hi).step_by(2).find(|&b| !block.shared.is_written(b, 2)).unwrap_or(lo);
                    async_fault(format!("{what} at {} reads shared byte {first}, which nothing wrote", at_str(at)));
                }
            }
        }
    }
    if let Some((writer, wat, fenced)) = block.shared.unpublished_write(block, reader, addr, size) {
        if fenced {
            async_fault(format!(
                "{what} at {} reads shared byte {addr}, stored by thread {writer} at {}, whose fence.proxy.async after the store is not ordered before this {what}: the writer must fence and then reach a barrier this thread waits for (sync_threads, a named barrier, an mbarrier phase, or sync_warp within a warp)",
                at_str(at),
                at_str(wat)
            ));
        }
        async_fault(format!(
            "{what} at {} reads shared byte {addr}, stored by thread {writer} at {} with no fence.proxy.async after the store: the async proxy may not see generic writes until the writer fences (before the barrier that orders the {what} after it)",
            at_str(at),
            at_str(wat)
        ));
    }
}

/// `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32`: the caller checked the
/// global range (`check_global_bulk`). The shared source must be aligned, inside the segment
/// and readable by the async proxy ([`async_read_check`]); the adds are applied at issue, each
/// element's atomically, and the source chunks stay claimed by this op until the thread's
/// `cp.async.bulk.wait_group` covers its group (`SharedMem::claim_async_read`).
///
/// # Safety
/// `p .. p + bytes / 4` is inside a live global view (`GlobalMut::bulk_reduce_add` checks).
#[track_caller]
pub unsafe fn bulk_reduce_add_f32(p: *mut f32, src: u32, bytes: u32) {
    let t = current();
    let block = t.block();
    let at = Location::caller();
    if !src.is_multiple_of(16) || !bytes.is_multiple_of(16) || src as u64 + bytes as u64 > block.shared.size() as u64 {
        async_fault(format!(
            "cp.reduce.async.bulk at {} from shared byte {src}, {bytes} bytes: the source must be 16-byte aligned, a multiple of 16 bytes long and inside the {}-byte segment",
            at_str(at),
            block.shared.size()
        ));
    }
    async_read_check(block, t.linear, src, bytes, "cp.reduce.async.bulk", at);
    for k in 0..bytes / 4 {
        let v: f32 = block.shared.read(src + 4 * k);
        // SAFETY: the caller checked that `p .. p + bytes / 4` is inside a live view.
        unsafe { super::api::atomic_add_f32(p.add(k as usize), v) };
    }
    let group = block.hopper.threads.borrow()[t.linear as usize].bulk_commits + 1;
    block.shared.claim_async_read(src, bytes, AsyncRead { thread: t.linear, group, at });
}

pub fn bulk_commit_group() {
    let t = current();
    t.block().hopper.threads.borrow_mut()[t.linear as usize].bulk_commits += 1;
}

/// `cp.async.bulk.wait_group[.read] N`: every committed group of the thread but the newest
/// `N` is complete (the emulator applied its adds at issue, so `.read` and the full wait
/// differ only on the GPU). Their source chunks are released, each recorded as a plain read
/// by the issuing thread, so a later store by another thread must be ordered after this
/// wait (block barrier or `sync_warp`), as for any read.
#[track_caller]
pub fn bulk_wait_group<const N: u32>(_read: bool) {
    let t = current();
    let block = t.block();
    let commits = block.hopper.threads.borrow()[t.linear as usize].bulk_commits;
    for (byte, at) in block.shared.release_async_reads(t.linear, commits.saturating_sub(N)) {
        if let Err(k) = block.shared.track(t, block, byte, 16, false, at) {
            fault(k);
        }
    }
}

/// One `wgmma.mma_async.m64nNk16` (`N = ops.n`, `d.len() = N / 2`) for the calling thread.
#[track_caller]
fn wgmma(kind: MmaKind, d: &mut [f32], a: WgmmaA, b: u64, ops: WgmmaOperands) {
    let WgmmaOperands { n, trans_a, trans_b, scale_d, .. } = ops;
    debug_assert_eq!(d.len() as u32, n / 2);
    let t = current();
    let block = t.block();
    let at = Location::caller();
    // The warp executes it together (`.sync.aligned`); a lane that skips it is divergence. A
    // register A is gathered from the warp's lanes: this thread gets its rows g and g + 8.
    let regs_a = match a {
        WgmmaA::Shared(_) => {
            super::mma::warp_converge(WarpOp::Wgmma);
            None
        }
        WgmmaA::Regs(regs) => Some(super::mma::wgmma_gather_a(regs)),
    };
    let wg = t.linear as usize / 128;
    let (warp, lane) = ((t.linear % 128) / 32, t.linear % 32);
    let (g, tq) = (lane / 4, lane % 4);
    let op = {
        let mut threads = block.hopper.threads.borrow_mut();
        threads[t.linear as usize].issued += 1;
        threads[t.linear as usize].issued
    };
    // The descriptors (and immediates) must be the same in all 128 threads of the warpgroup.
    {
        let mine = ops;
        let mut ops = block.hopper.issued_ops.borrow_mut();
        let entry = ops.entry((wg, op)).or_insert(IssuedOp { operands: mine, thread: t.linear, at, seen: 0 });
        if entry.operands != mine {
            async_fault(format!(
                "wgmma #{op} of warpgroup {wg}: thread {} at {} passes {mine:?}, thread {} at {} passed {:?}; every thread of a warpgroup must pass the same descriptors",
                t.linear,
                at_str(at),
                entry.thread,
                at_str(entry.at),
                entry.operands
            ));
        }
        entry.seen += 1;
        if entry.seen == 128 {
            ops.remove(&(wg, op));
        }
    }
    // Operand element reader with the async-proxy checks.
    let read = |addr: u32| -> f32 {
        if addr as u64 + 2 > block.shared.size() as u64 {
            async_fault(format!(
                "wgmma at {} reads shared byte {addr}, past the {}-byte segment",
                at_str(at),
                block.shared.size()
            ));
        }
        async_read_check(block, t.linear, addr, 2, "wgmma", at);
        block.hopper.last_read.borrow_mut()[(addr / 16) as usize] = Some((wg, op));
        to_f32(kind, block.shared.read::<u16>(addr))
    };
    let rows = [16 * warp + g, 16 * warp + g + 8];
    let mut a_rows = [[0f32; 16]; 2];
    for (ri, &r) in rows.iter().enumerate() {
        for k in 0..16 {
            a_rows[ri][k as usize] = match (&a, &regs_a) {
                (WgmmaA::Shared(desc), _) => read(desc_addr(*desc, r, k, trans_a != 0, at)),
                (WgmmaA::Regs(_), Some(words)) => {
                    let w = words[8 * ri + k as usize / 2];
                    to_f32(kind, (w >> (16 * (k % 2))) as u16)
                }
                (WgmmaA::Regs(_), None) => unreachable!("gathered above"),
            };
        }
    }
    for i in 0..n / 8 {
        for c in 0..2 {
            let col = 8 * i + 2 * tq + c;
            let mut bcol = [0f32; 16];
            for k in 0..16 {
                bcol[k as usize] = read(desc_addr(b, col, k, trans_b != 0, at));
            }
            for (ri, arow) in a_rows.iter().enumerate() {
                let reg = (4 * i + 2 * ri as u32 + c) as usize;
                let mut acc = if scale_d { d[reg] } else { 0.0 };
                for k in 0..16 {
                    // Each product is exact in f32: one rounding per add, in k order.
                    acc += arow[k] * bcol[k];
                }
                d[reg] = acc;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::hopper::SmemDesc;

    fn at() -> Loc {
        Location::caller()
    }

    /// The PTX ISA's worked example "MN-major, 64B swizzling, bf16": exact layout
    /// `Swizzle<2,4,3> o ((8,4,2),(8,2)):((1,8,256),(32,512))` (elements), LBO = 256 x 2 bytes,
    /// SBO = 512 x 2 bytes.
    #[test]
    fn mn_major_64b_matches_the_isa_example() {
        let d = SmemDesc::new(0, 512, 1024, Swizzle::B64);
        for mn in 0..64u32 {
            for k in 0..16u32 {
                let (e, c, p) = (mn % 8, (mn / 8) % 4, mn / 32);
                let (r, q) = (k % 8, k / 8);
                let elems = e + 8 * c + 256 * p + 32 * r + 512 * q;
                let want = swizzle_addr(2 * elems, Swizzle::B64);
                assert_eq!(desc_addr(d.0, mn, k, true, at()), want, "mn {mn} k {k}");
            }
        }
    }

    /// K-major, 128B swizzle, as TMA writes a 64-column box: row `mn` is 128 bytes at
    /// `mn * 128` (8-row groups SBO = 1024 apart), its 16-byte chunks XORed with `mn % 8`.
    #[test]
    fn k_major_128b_is_the_tma_box_layout() {
        let d = SmemDesc::new(2048, 16, 1024, Swizzle::B128);
        for mn in 0..64u32 {
            for k in 0..16u32 {
                let plain = 2048 + mn * 128 + 2 * k;
                let chunk = ((plain / 16) % 8) ^ (mn % 8);
                let want = (plain & !0x70) | (chunk << 4);
                assert_eq!(desc_addr(d.0, mn, k, false, at()), want, "mn {mn} k {k}");
            }
        }
        // A k-step of 16 moves the start by 32 bytes, inside the same swizzled rows.
        let d2 = d.advance(32);
        assert_eq!(desc_addr(d2.0, 3, 0, false, at()), desc_addr(d.0, 3, 16, false, at()));
    }

    /// The descriptor fields land where the ISA puts them.
    #[test]
    fn descriptor_bit_fields() {
        let d = SmemDesc::new(0x1_2340, 8192, 1024, Swizzle::B128).0;
        assert_eq!(d & 0x3FFF, 0x1234);
        assert_eq!((d >> 16) & 0x3FFF, 8192 >> 4);
        assert_eq!((d >> 32) & 0x3FFF, 1024 >> 4);
        assert_eq!((d >> 49) & 7, 0);
        assert_eq!(d >> 62, 1);
    }

    /// Tiles stored by warp 1 and handed to the whole warpgroup's wgmma through an mbarrier
    /// that one lane per warp arrives on (as attention v03's `v_clean`): the modes of
    /// [`handover`].
    const HANDOVER_OK: u32 = 0;
    /// No `sync_warp` before lane 0's arrival: the other lanes' fences are not carried.
    const HANDOVER_NO_SYNC_WARP: u32 = 1;
    /// The fence after the arrival instead of before it.
    const HANDOVER_FENCE_LATE: u32 = 2;
    const HANDOVER_BAR: u32 = 16384;

    fn handover(mode: u32) {
        use crate::device::hopper::{
            Mbarrier, WgmmaAccumulator, fence_mbarrier_init, fence_proxy_async, wgmma_commit, wgmma_fence, wgmma_wait,
        };
        use crate::device::thread::{sync_threads, thread_idx_x};
        use crate::device::warp::{FULL_MASK, sync_warp};
        let t = thread_idx_x();
        let (warp, lane) = (t / 32, t % 32);
        let bar = Mbarrier::at(HANDOVER_BAR);
        if t == 0 {
            bar.init(4);
            fence_mbarrier_init();
        }
        sync_threads();
        if warp == 1 {
            // A (64 x 16, K-major rows of 128 bytes) and B (64 x 16, the same) of ones: every
            // byte of both 8 KB tiles, lane `l` the elements `l mod 32`.
            let tiles = crate::device::Shared::<half::bf16>::at(0, 8192);
            let mut e = lane;
            while e < 8192 {
                tiles.store(e, half::bf16::ONE);
                e += 32;
            }
            if mode != HANDOVER_FENCE_LATE {
                fence_proxy_async();
            }
            if mode != HANDOVER_NO_SYNC_WARP {
                sync_warp(FULL_MASK);
            }
        }
        if lane == 0 {
            bar.arrive();
        }
        if warp == 1 && mode == HANDOVER_FENCE_LATE {
            fence_proxy_async();
        }
        bar.wait(0);
        let desc = |at: u32| SmemDesc::new(at, 16, 1024, Swizzle::B128);
        let mut d = [0f32; 32];
        wgmma_fence();
        d.mma::<half::bf16, 0, 0>(desc(0), desc(8192), false);
        wgmma_commit();
        wgmma_wait::<0>();
        assert!(d.iter().all(|&x| x == 16.0), "ones: every product is 16");
    }

    /// One block of 128 threads (and the hand-over tests' shared bytes) running `body` with
    /// `mode` as its parameter.
    fn run_block(
        name: &'static str,
        body: fn(u32),
        mode: u32,
        threads: u32,
    ) -> Result<super::super::LaunchStats, super::super::EmuError> {
        let def = crate::KernelDef { name, body };
        let cfg = super::super::LaunchConfig {
            grid: crate::Dim3::x(1),
            block: crate::Dim3::x(threads),
            shared_bytes: HANDOVER_BAR + 8,
        };
        super::super::launch(&def, &cfg, mode)
    }

    fn run_handover(mode: u32) -> Result<super::super::LaunchStats, super::super::EmuError> {
        run_block("handover", handover, mode, 128)
    }

    /// Plain shared stores by warp 1 read by warp 2 after a hand-over that is not a block
    /// barrier: the modes of [`plain_handover`].
    const PLAIN_NAMED: u32 = 0;
    /// The stores after warp 1's arrival on the named barrier instead of before it.
    const PLAIN_NAMED_LATE: u32 = 1;
    /// Warp 1 stores, `sync_warp`, lane 0 arrives on an mbarrier warp 2 waits for.
    const PLAIN_MBAR: u32 = 2;
    /// As [`PLAIN_MBAR`] without the `sync_warp`: lane 0's arrival carries only its own stores.
    const PLAIN_MBAR_NO_SYNC_WARP: u32 = 3;
    /// As [`PLAIN_MBAR`], the arrival by warp 3 after a named barrier with warp 1: ordering
    /// through a third thread.
    const PLAIN_MBAR_RELAYED: u32 = 4;

    fn plain_handover(mode: u32) {
        use crate::device::hopper::{Mbarrier, fence_mbarrier_init};
        use crate::device::thread::{NamedBarrier, sync_threads, thread_idx_x};
        use crate::device::warp::{FULL_MASK, sync_warp};
        let t = thread_idx_x();
        let (warp, lane) = (t / 32, t % 32);
        let words = crate::device::Shared::<u32>::at(0, 32);
        let bar = Mbarrier::at(HANDOVER_BAR);
        let named = NamedBarrier::new(1, 64);
        if t == 0 {
            bar.init(1);
            fence_mbarrier_init();
        }
        sync_threads();
        let mbar = mode >= PLAIN_MBAR;
        if warp == 1 {
            if mode == PLAIN_NAMED_LATE {
                named.arrive();
            }
            words.store(lane, 7 * lane);
            match mode {
                PLAIN_NAMED => named.arrive(),
                PLAIN_MBAR => {
                    sync_warp(FULL_MASK);
                    if lane == 0 {
                        bar.arrive();
                    }
                }
                PLAIN_MBAR_NO_SYNC_WARP if lane == 0 => bar.arrive(),
                PLAIN_MBAR_RELAYED => {
                    sync_warp(FULL_MASK);
                    NamedBarrier::new(2, 64).arrive();
                }
                _ => {}
            }
        }
        if warp == 3 && mode == PLAIN_MBAR_RELAYED {
            NamedBarrier::new(2, 64).sync();
            if lane == 0 {
                bar.arrive();
            }
        }
        if warp == 2 {
            if mbar {
                bar.wait(0);
            } else {
                named.sync();
            }
            assert_eq!(words.load(lane), 7 * lane);
        }
    }

    fn run_plain(mode: u32) -> Result<super::super::LaunchStats, super::super::EmuError> {
        run_block("plain_handover", plain_handover, mode, 128)
    }

    /// The race detector orders plain shared accesses by named barriers and mbarriers too,
    /// not only by block barriers and `sync_warp`: stores released by an arrival that the
    /// reader's wait acquired (directly, after a `sync_warp` carrying the warp's other lanes,
    /// or through a third warp) are not a race; stores after the arrival, or by lanes whose
    /// `sync_warp` never came, are.
    #[test]
    fn named_barriers_and_mbarriers_order_plain_shared_accesses() {
        for mode in [PLAIN_NAMED, PLAIN_MBAR, PLAIN_MBAR_RELAYED] {
            run_plain(mode).unwrap_or_else(|e| panic!("mode {mode}: a correct hand-over was rejected: {e}"));
        }
        for mode in [PLAIN_NAMED_LATE, PLAIN_MBAR_NO_SYNC_WARP] {
            let msg = run_plain(mode).expect_err("a broken hand-over must be rejected").to_string();
            assert!(msg.contains("race") && msg.contains("hopper.rs"), "mode {mode}: {msg}");
        }
    }

    /// A producer warpgroup gives registers to two consumer warpgroups (384 threads, 168
    /// registers each at launch): the modes of [`register_split`]. 40 / 232 is the
    /// launch-time 64512 registers exactly.
    const SPLIT_FITS: u32 = 0;
    /// 48 / 232: 65536 registers, the whole file but more than the block got at launch.
    const SPLIT_OVER: u32 = 1;
    /// 40 / 232 with the producer as the last warpgroup: the consumers' `.inc` runs first
    /// and waits for its `.dec`.
    const SPLIT_FITS_PRODUCER_LAST: u32 = 2;

    fn register_split(mode: u32) {
        use crate::device::hopper::{setmaxnreg_dec, setmaxnreg_inc};
        use crate::device::thread::thread_idx_x;
        let producer = if mode == SPLIT_FITS_PRODUCER_LAST { 2 } else { 0 };
        if thread_idx_x() / 128 == producer {
            setmaxnreg_dec(if mode == SPLIT_OVER { 48 } else { 40 });
        } else {
            setmaxnreg_inc(232);
        }
    }

    /// `setmaxnreg.inc` takes registers from the block's pool, which holds what the block got
    /// at launch: a split within it runs in either order, one beyond it is a deadlock (the
    /// H200 hung on 48 / 232 at 384 threads).
    #[test]
    fn setmaxnreg_beyond_the_launch_time_registers_deadlocks() {
        for mode in [SPLIT_FITS, SPLIT_FITS_PRODUCER_LAST] {
            run_block("register_split", register_split, mode, 384)
                .unwrap_or_else(|e| panic!("mode {mode}: a split that fits was rejected: {e}"));
        }
        let msg = run_block("register_split", register_split, SPLIT_OVER, 384)
            .expect_err("a split beyond the launch-time registers must be rejected")
            .to_string();
        assert!(msg.contains("setmaxnreg.inc 232") && msg.contains("168 x 384 = 64512"), "{msg}");
    }

    /// Generic stores reach another thread's wgmma only through the storing thread's fence
    /// and then a barrier the reader waits for: here lane 0's mbarrier arrival, which carries
    /// its lanes' fences only after a `sync_warp`. Both broken hand-overs are reported, naming
    /// the store; the correct one runs.
    #[test]
    fn a_wgmma_sees_stores_fenced_before_an_mbarrier_it_waited_for() {
        run_handover(HANDOVER_OK).expect("fence, sync_warp, arrive, wait");
        for mode in [HANDOVER_NO_SYNC_WARP, HANDOVER_FENCE_LATE] {
            let msg = run_handover(mode).expect_err("a broken hand-over must be rejected").to_string();
            assert!(msg.contains("not ordered before this wgmma") && msg.contains("hopper.rs"), "mode {mode}: {msg}");
        }
    }
}
