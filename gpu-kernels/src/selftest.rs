//! Deliberately broken kernels, each with a correct twin, that prove the emulator's checks.
//!
//! Each pair shares one body with a `BROKEN` switch, so the twins differ only in the bug.
//! Every kernel runs one block row of [`SELFTEST_BLOCK`] threads over `input` (length n) and
//! writes `out` (length n); `tests/emulator.rs` asserts the emulator rejects each `bug_*` kernel
//! with the right error and accepts each `ok_*` kernel with the right answer.

use crate::device::thread::{grid_threads_1d, index_1d, sync_threads, thread_idx_x};
use crate::device::warp::{self, FULL_MASK, lane_id};
use crate::device::{Global, GlobalMut, Shared};
use crate::elementwise::ElementwiseParams;

/// Threads per block in every self-test kernel (two warps).
pub const SELFTEST_BLOCK: u32 = 64;
/// Dynamic shared bytes every self-test kernel uses: one f32 per thread.
pub const SELFTEST_SHARED_BYTES: u32 = Shared::<f32>::bytes(SELFTEST_BLOCK);
const TILE: Shared<f32> = Shared::at(0, SELFTEST_BLOCK);

/// Threads per block of `name` if it is a self-test kernel.
pub fn launch_threads(name: &str) -> Option<u32> {
    KERNEL_NAMES.contains(&name).then_some(if name.starts_with("bug_scale") { 256 } else { SELFTEST_BLOCK })
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SelftestParams {
    pub input: Global<f32>,
    pub out: GlobalMut<f32>,
}

/// out[i] = 2 * in[i]. The bug: no `i < n` guard, and the grid has more threads than n.
#[inline(always)]
pub fn oob<const BROKEN: bool>(p: SelftestParams) {
    let i = index_1d();
    if BROKEN || i < p.out.len() {
        p.out.store(i, 2.0 * p.input.load(i));
    }
}

/// out[i] = in[i+1 within the block]. The bug: the neighbour's value is read from shared memory
/// with no barrier after it was written.
#[inline(always)]
pub fn race<const BROKEN: bool>(p: SelftestParams) {
    let t = thread_idx_x();
    let i = index_1d();
    TILE.store(t, p.input.load(i));
    if !BROKEN {
        sync_threads();
    }
    p.out.store(i, TILE.load((t + 1) % SELFTEST_BLOCK));
}

/// out[i] = in[i]. The bug: only the first half-warp reaches the barrier.
#[inline(always)]
pub fn barrier<const BROKEN: bool>(p: SelftestParams) {
    let t = thread_idx_x();
    let i = index_1d();
    TILE.store(t, p.input.load(i));
    if !BROKEN || t < 16 {
        sync_threads();
    }
    p.out.store(i, TILE.load(t));
}

/// out[i] = in[i]. The bug: odd threads never write their shared slot, then read it.
#[inline(always)]
pub fn uninit<const BROKEN: bool>(p: SelftestParams) {
    let t = thread_idx_x();
    let i = index_1d();
    if !BROKEN || t.is_multiple_of(2) {
        TILE.store(t, p.input.load(i));
    }
    sync_threads();
    p.out.store(i, TILE.load(t));
}

/// out[i] = sum of the 32 inputs of i's warp. The bug: lane 31 returns early, so a
/// full-mask shuffle waits for a lane that exited.
#[inline(always)]
pub fn warp_exit<const BROKEN: bool>(p: SelftestParams) {
    let i = index_1d();
    if BROKEN && lane_id() == 31 {
        return;
    }
    let s = warp::reduce_sum_f32(p.input.load(i));
    p.out.store(i, s);
}

/// out[i] = in[i ^ 1] through shared memory. The bug: no `sync_warp` between the write and
/// the partner lane's read.
#[inline(always)]
pub fn warp_race<const BROKEN: bool>(p: SelftestParams) {
    let t = thread_idx_x();
    let i = index_1d();
    TILE.store(t, p.input.load(i));
    if !BROKEN {
        warp::sync_warp(FULL_MASK);
    }
    p.out.store(i, TILE.load(t ^ 1));
}

/// Named-barrier protocols: the correct one, then each way of breaking it.
pub const TURNS_OK: u32 = 0;
/// Nobody gives the first turn: both warps wait for each other.
pub const TURNS_NO_FIRST_TURN: u32 = 1;
/// Warp 1 hands a turn back after its last round: a phase is left open at the end.
pub const TURNS_EXTRA_ARRIVAL: u32 = 2;
/// Half of warp 1's lanes hand the first turn over.
pub const TURNS_HALF_WARP: u32 = 3;
/// Warp 1 names 32 threads where warp 0 waits for 64.
pub const TURNS_WRONG_COUNT: u32 = 4;

/// Turns taken by each warp in [`turns`].
pub const TURN_ROUNDS: u32 = 3;

/// out[i] = in[i], after the block's two warps take [`TURN_ROUNDS`] turns each in strict
/// alternation (warp 0 first), as FlashAttention-3's ping-pong orders two warpgroups'
/// matrix products: warp `w` waits at its own named barrier `1 + w` (64 threads: its own 32
/// and the other warp's 32 arrivals) and then hands the turn over by arriving at the other's.
/// Warp 1 gives warp 0 the first turn and does not hand back its last. `MODE` is
/// [`TURNS_OK`] or one of the broken protocols.
#[inline(always)]
pub fn turns<const MODE: u32>(p: SelftestParams) {
    use crate::device::thread::NamedBarrier;
    let t = thread_idx_x();
    let w = t / 32;
    let bar = |k: u32| NamedBarrier::new(1, 64).offset(k);
    let other = if MODE == TURNS_WRONG_COUNT && w == 1 { NamedBarrier::new(1, 32) } else { bar(0) };
    if w == 1 && MODE != TURNS_NO_FIRST_TURN && (MODE != TURNS_HALF_WARP || lane_id() < 16) {
        other.arrive();
    }
    let mut r = 0;
    while r < TURN_ROUNDS {
        bar(w).sync();
        if w == 0 {
            bar(1).arrive();
        } else if r + 1 < TURN_ROUNDS || MODE == TURNS_EXTRA_ARRIVAL {
            bar(0).arrive();
        }
        r += 1;
    }
    let i = index_1d();
    p.out.store(i, p.input.load(i));
}

/// Writes far past the end of `out` (2^38 elements): on the GPU an illegal-address fault, the
/// sticky kind that poisons the CUDA context; on the emulator an out-of-bounds error. Used by
/// the device-fault test, which runs it in a process of its own.
#[inline(always)]
pub fn wild_write(p: SelftestParams) {
    if index_1d() == 0 {
        p.out.store(p.out.len() + (1 << 38), 1.0);
    }
}

/// Scale without its scalar tail: on the vectorized path the last `n % 4` elements are never
/// written. The harness must reject it (poison left in the output).
#[inline(always)]
pub fn scale_no_tail(p: ElementwiseParams<f32>) {
    let chunks = p.out.len() / 4;
    let mut c = index_1d();
    while c < chunks {
        let mut v = p.a.load_chunk::<4>(c);
        for x in v.iter_mut() {
            *x *= p.alpha;
        }
        p.out.store_chunk::<4>(c, v);
        c += grid_threads_1d();
    }
    if p.vectorized == 0 {
        let mut i = index_1d();
        while i < p.out.len() {
            p.out.store(i, p.alpha * p.a.load(i));
            i += grid_threads_1d();
        }
    }
}

/// Scale that rounds its f32 result through bf16: right shape, wrong precision. The harness
/// must reject it (errors of 2^-9 relative against an f32 tolerance of about 2^-23).
#[inline(always)]
pub fn scale_bf16_math(p: ElementwiseParams<f32>) {
    let mut i = index_1d();
    while i < p.out.len() {
        let v: half::bf16 = crate::Element::from_f32(p.alpha * p.a.load(i));
        p.out.store(i, crate::Element::to_f32(v));
        i += grid_threads_1d();
    }
}

crate::kernels! {
    BUG_SCALE_NO_TAIL = bug_scale_no_tail(ElementwiseParams<f32>) => scale_no_tail;
    BUG_SCALE_BF16_MATH = bug_scale_bf16_math(ElementwiseParams<f32>) => scale_bf16_math;
    BUG_OOB = bug_oob(SelftestParams) => oob::<true>;
    OK_OOB = ok_oob(SelftestParams) => oob::<false>;
    BUG_RACE = bug_race(SelftestParams) => race::<true>;
    OK_RACE = ok_race(SelftestParams) => race::<false>;
    BUG_BARRIER = bug_barrier(SelftestParams) => barrier::<true>;
    OK_BARRIER = ok_barrier(SelftestParams) => barrier::<false>;
    BUG_UNINIT = bug_uninit(SelftestParams) => uninit::<true>;
    OK_UNINIT = ok_uninit(SelftestParams) => uninit::<false>;
    BUG_WARP_EXIT = bug_warp_exit(SelftestParams) => warp_exit::<true>;
    OK_WARP_EXIT = ok_warp_exit(SelftestParams) => warp_exit::<false>;
    BUG_WARP_RACE = bug_warp_race(SelftestParams) => warp_race::<true>;
    FAULT_WILD_WRITE = fault_wild_write(SelftestParams) => wild_write;
    OK_WARP_RACE = ok_warp_race(SelftestParams) => warp_race::<false>;
    OK_TURNS = ok_turns(SelftestParams) => turns::<TURNS_OK>;
    BUG_TURNS_NO_FIRST_TURN = bug_turns_no_first_turn(SelftestParams) => turns::<TURNS_NO_FIRST_TURN>;
    BUG_TURNS_EXTRA_ARRIVAL = bug_turns_extra_arrival(SelftestParams) => turns::<TURNS_EXTRA_ARRIVAL>;
    BUG_TURNS_HALF_WARP = bug_turns_half_warp(SelftestParams) => turns::<TURNS_HALF_WARP>;
    BUG_TURNS_WRONG_COUNT = bug_turns_wrong_count(SelftestParams) => turns::<TURNS_WRONG_COUNT>;
}
