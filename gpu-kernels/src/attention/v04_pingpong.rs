//! v04: v03 with FlashAttention-3's ping-pong: the two consumer warpgroups take turns at the
//! tensor cores (two named barriers), and each overlaps its softmax with its own `P V`.
//!
//! Everything but the main loop is v03's ([`super::v03_wgmma`]: the tiling, TMA producer,
//! mbarrier ring, descriptors, softmax and epilogue; [`super::v03_wgmma::run`] with `PINGPONG`
//! calls [`main_loop`] here). Head dims 64 and 128, dense and variable-length (the epilogue's
//! first row and query count wait in shared memory, as in v03: in registers through the loop,
//! ptxas 12.9 spilled them at varlen head dim 128).
//!
//! # Why
//! v03's floor analysis: at head dim 128 the exponentials of a tile take about half the time
//! of its matrix products, and at 64 all of it; v03 leaves their overlap to the warp
//! schedulers. Here it is arranged, as in FlashAttention-3:
//! - Ping-pong: turn `j` of a warpgroup issues its `S_j = Q K_j^T` and `O += P_{j-1}
//!   V_{j-1}` back to back, then hands the turn over, so one warpgroup's softmax runs while
//!   the other's products occupy the tensor cores. Consumer warpgroup `w` waits for its turn
//!   at named barrier [`TURN_BARRIER`]` + w` (256 threads: its own 128 wait, the other's 128
//!   arrive); warpgroup 1 gives warpgroup 0 the first turn.
//! - Softmax under `P V`: `S_j` and `P_{j-1} V_{j-1}` are two wgmma groups; the softmax of
//!   `S_j` starts when the first completes (`wgmma_wait::<1>`) and O is rescaled only after
//!   the second does (O must hold tile `j - 1` first).
//!
//! The price: `P_{j-1}` (`BN / 4` registers) stays live through the next turn next to `S_j`,
//! so head dim 256 (at the consumers' register cap in v03) is not built. A tile's V is now
//! read a turn after its K, so the stage is freed in two parts (as FlashAttention-3's K and V
//! pipelines): K on `empty` after its turn, V on `v_empty` after the next; with one barrier
//! for both, the producer could load tile `j + 1`'s K only once tile `j - 1`'s `P V` had
//! completed, just before the turn that needs it. Prediction, to be measured against v03 in
//! the same run: faster at long sequences by up to the softmax's share of a tile; no change
//! at short ones.
//!
//! # What ptxas needs to keep the wgmmas asynchronous (checked by `tests/ptxas.rs`, which
//! refuses any advisory)
//! - The registers of an in-flight group are fenced ([`wgmma_fence_operands`]) after the
//!   wait that covers it, and P_j is packed after that wait from fenced f32: otherwise LLVM
//!   computed P_j into the registers `P_{j-1} V_{j-1}` was still reading (C7513).
//! - Each turn shape (S alone, both groups, P V alone, neither) is its own straight-line
//!   code: with the two groups under run-time conditions ptxas could not tell which one a
//!   `wgmma_wait::<1>` leaves pending (C7514), and with the commits outside the conditions
//!   it fenced the groups again in their branches (C7520). The step closures are
//!   `always_inline!`: called from two shapes, LLVM kept them out of line and the S
//!   accumulator went to local memory.
//!
//! # Protocol (the emulator checks it: a missing first turn is a deadlock it reports, an
//! extra hand-over a phase left open at the block's end)
//! Each warpgroup makes `tiles + 1` turns (the last issues only the last `P V`), so barrier
//! `TURN_BARRIER` completes `tiles + 1` phases (warpgroup 1's first hand-over and `tiles`
//! more) and `TURN_BARRIER + 1` as many (warpgroup 0's). Every consumer warp still waits for
//! every tile's K, as in v03, and arrives once per tile on the stage's `empty` (K) and
//! `v_empty` (V) barriers; the producer waits on both before refilling a stage.

use super::v02_mma::RowState;
use super::v03_wgmma::{CONSUMERS, HeadDim, rescale};
use crate::device::hopper::{WgmmaAccumulator, wgmma_commit, wgmma_fence, wgmma_fence_operands, wgmma_wait};
use crate::device::thread::NamedBarrier;

/// The first of the two named barriers of the ping-pong: consumer warpgroup `w`'s turn at
/// the tensor cores is barrier `TURN_BARRIER + w`.
pub const TURN_BARRIER: u32 = 1;

/// v04's main loop, run by [`super::v03_wgmma::run`] with `PINGPONG`: `tiles + 1` turns at
/// the tensor cores, alternating between the two consumer warpgroups. Turn `j` of warpgroup `wg` issues
/// `S_j = Q K_j^T` and `O += P_{j-1} V_{j-1}` as two wgmma groups, hands the turn to the
/// other warpgroup, waits for `S_j` alone and runs its softmax while `P V` is still in
/// flight, then waits for `P V`, rescales O and frees tile `j - 1`'s stage. The closures are
/// the kernel's: `wait_k(s, round, start)` waits for tile `j`'s K (and cleans a varlen tail),
/// `wait_v(s, round)` for its V, `free_k(s)` and `free_v(s)` arrive on the stage's `empty`
/// and `v_empty` barriers.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn main_loop<H: HeadDim, const NS: usize>(
    wg: u32,
    tiles: u32,
    wg_max: usize,
    lane: u32,
    o: &mut H::Acc,
    st: &mut RowState,
    wait_k: impl Fn(u32, u32, usize),
    wait_v: impl Fn(u32, u32),
    free_k: impl Fn(u32),
    free_v: impl Fn(u32),
    issue_s: impl Fn(&mut H::S, u32),
    softmax: impl Fn(&H::S, &mut RowState, usize) -> ([[f32; 4]; NS], [f32; 2]),
    pack: impl Fn(&[[f32; 4]; NS]) -> [[u32; 4]; NS],
    issue_pv: impl Fn(&mut H::Acc, &[[u32; 4]; NS], u32),
) {
    const { assert!(CONSUMERS == 2, "the ping-pong alternates two consumer warpgroups") };
    let cfg = const { H::TILING };
    let turn = |w: u32| NamedBarrier::new(TURN_BARRIER, 2 * 128).offset(w);
    // Warpgroup 1 gives warpgroup 0 the first turn; each hands the turn over after its own,
    // except warpgroup 1 after the last, so every phase of both barriers completes.
    if wg == 1 {
        turn(0).arrive();
    }
    let mut pa_prev = [[0u32; 4]; NS];
    // One turn: `$s` whether it issues S_j, `$pv` whether it issues P_{j-1} V_{j-1}
    // (literals, so each expansion is straight-line code; see the loop below).
    macro_rules! one_turn {
        ($j:expr, $s:literal, $pv:literal) => {{
            let j: u32 = $j;
            let start = (j * cfg.bn) as usize;
            let (s, round) = (j % cfg.stages, j / cfg.stages);
            if j < tiles {
                // Every consumer waits for every tile, as in v03 (its arrivals must stay in
                // the round the producer has filled).
                wait_k(s, round, start);
            }
            // Tile j - 1's stage: its V is read by this turn's P V.
            let (ps, pround) = if j > 0 { ((j - 1) % cfg.stages, (j - 1) / cfg.stages) } else { (0, 0) };
            if $pv {
                wait_v(ps, pround);
            }
            turn(wg).sync();
            let mut sacc = H::S::ZERO;
            if $s {
                wgmma_fence();
                issue_s(&mut sacc, s);
                wgmma_commit();
            }
            if $pv {
                wgmma_fence();
                issue_pv(o, &pa_prev, ps);
                wgmma_commit();
            }
            if wg == 0 || j < tiles {
                turn(1 - wg).arrive();
            }
            if $s {
                // S_j is complete once at most the newest group (P V, if any) is pending:
                // the softmax overlaps this warpgroup's P V and the other warpgroup's turn.
                if $pv {
                    wgmma_wait::<1>();
                } else {
                    wgmma_wait::<0>();
                }
                wgmma_fence_operands(&mut sacc);
                let (mut sf, corr) = softmax(&sacc, st, start);
                // O must hold P_{j-1} V_{j-1} before it is rescaled, and P_j is packed only
                // then (as FlashAttention-3 converts P): fencing the f32 it is packed from
                // keeps the compiler from computing P_j into P_{j-1}'s registers while that
                // P V still reads them (ptxas would serialize the wgmmas: C7513).
                wgmma_wait::<0>();
                wgmma_fence_operands(o);
                unroll16!(i < NS => {
                    wgmma_fence_operands(&mut sf[i]);
                });
                rescale::<H>(o, corr);
                pa_prev = pack(&sf);
                // The next turn's wgmmas read these: their values are final here.
                wgmma_fence_operands(o);
                unroll16!(kk < NS / 2 => {
                    wgmma_fence_operands(&mut pa_prev[kk]);
                });
            } else {
                wgmma_wait::<0>();
                wgmma_fence_operands(o);
            }
            // Tile j's K (read by S_j) and tile j - 1's V (by the P V just completed) are free.
            if lane == 0 {
                if j < tiles {
                    free_k(s);
                }
                if j > 0 {
                    free_v(ps);
                }
            }
        }};
    }
    // The tiles this warpgroup's rows see are a prefix (the causal limit only shortens it):
    // turn 0 issues S_0 alone, turns 1 .. live - 1 both groups, turn `live` the last P V
    // alone, the rest neither. Each shape is its own straight-line code: with the groups
    // under run-time conditions, ptxas 12.9 cannot tell which group a `wgmma_wait::<1>`
    // leaves pending and serializes the wgmmas (C7514); with the commits outside them, it
    // fences the groups again in their branches (C7520).
    let live = tiles.min(wg_max.div_ceil(cfg.bn as usize) as u32);
    let mut j = 0;
    if live > 0 {
        one_turn!(0, true, false);
        j = 1;
        while j < live {
            one_turn!(j, true, true);
            j += 1;
        }
        one_turn!(live, false, true);
        j += 1;
    }
    while j <= tiles {
        one_turn!(j, false, false);
        j += 1;
    }
}
