//! v08: double buffering: two shared stages; while the block computes k-step `s` out of one
//! stage, each thread already holds k-step `s + 1`'s chunks in registers (global loads in
//! flight during the FMAs) and stores them to the other stage afterwards: one barrier per
//! k-step instead of two. Warp tiling as v07.
//!
//! # Thread mapping
//! As v07. Stage `s % 2` holds k-step `s`. The one barrier per step separates this step's
//! writes of stage `(s + 1) % 2` from the previous step's reads of it, and from the next
//! step's reads.

use super::{
    F32x4, GemmParams, Staged, Tiling, batch_bases, block_origin, chunks_per_thread, fetch_stage, put_stage,
    v07_warptile,
};
use crate::device::Shared;
use crate::device::thread::{sync_threads, thread_idx_x};

pub const TILING: Tiling = Tiling { stages: 2, ..v07_warptile::TILING }.check();

const BM: u32 = TILING.bm;
const BN: u32 = TILING.bn;
const BK: u32 = TILING.bk;
const TM: usize = TILING.tm as usize;
const TN: usize = TILING.tn as usize;
/// Chunks of 4 floats each thread carries per k-step for A and for B.
pub(super) const CH_A: usize = chunks_per_thread(TILING).0;
pub(super) const CH_B: usize = chunks_per_thread(TILING).1;

/// The A and B chunks of k-step `k0` that thread `t` copies, loaded into registers.
#[inline(always)]
#[track_caller]
pub(super) fn fetch(
    p: &GemmParams,
    ba: usize,
    bb: usize,
    i0: u32,
    j0: u32,
    k0: u32,
    t: u32,
) -> (Staged<CH_A>, Staged<CH_B>) {
    fetch_stage(TILING, p, ba, bb, i0, j0, k0, t)
}

#[inline(always)]
pub fn run(p: GemmParams) {
    let (ba, bb, bc) = batch_bases(&p);
    let (i0, j0) = block_origin(BM, BN);
    let t = thread_idx_x();
    let (row0, col0) = v07_warptile::lane_origin(t);
    let mut acc = [[0.0f32; TN]; TM];
    let steps = p.k.div_ceil(BK);
    if steps > 0 {
        let (sa, sb) = fetch(&p, ba, bb, i0, j0, 0, t);
        put_stage(TILING, &p, 0, &sa, &sb);
        sync_threads();
    }
    let mut s = 0;
    while s < steps {
        let cur = s % 2;
        let next = s + 1 < steps;
        // Issue the next step's global loads before this step's FMAs, so they overlap.
        let staged = if next { Some(fetch(&p, ba, bb, i0, j0, (s + 1) * BK, t)) } else { None };
        let a_s4 = Shared::<F32x4>::at(TILING.a_offset(cur), TILING.a_tile() / 4);
        let b_s4 = Shared::<F32x4>::at(TILING.b_offset(cur), TILING.b_tile() / 4);
        v07_warptile::compute(a_s4, b_s4, row0, col0, &mut acc);
        if let Some((sa, sb)) = staged {
            put_stage(TILING, &p, 1 - cur, &sa, &sb);
        }
        sync_threads();
        s += 1;
    }
    v07_warptile::store(&p, bc, i0, j0, row0, col0, &acc);
}
