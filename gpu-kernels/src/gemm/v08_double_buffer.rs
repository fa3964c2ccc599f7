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
    F32x4, GemmParams, Tiling, a_storage, b_storage, batch_bases, block_origin, load_chunk4, store_a_chunk,
    store_b_chunk, v07_warptile,
};
use crate::device::Shared;
use crate::device::thread::{sync_threads, thread_idx_x};

pub const TILING: Tiling = Tiling { stages: 2, ..v07_warptile::TILING }.check();

const BM: u32 = TILING.bm;
const BN: u32 = TILING.bn;
const BK: u32 = TILING.bk;
const TM: usize = TILING.tm as usize;
const TN: usize = TILING.tn as usize;
const THREADS: u32 = TILING.threads();
/// Chunks of 4 floats each thread carries per k-step for A and for B.
pub(super) const CH_A: usize = (TILING.a_tile() / 4 / THREADS) as usize;
pub(super) const CH_B: usize = (TILING.b_tile() / 4 / THREADS) as usize;
const _: () = assert!(
    (TILING.a_tile() / 4).is_multiple_of(THREADS) && (TILING.b_tile() / 4).is_multiple_of(THREADS),
    "every thread carries the same number of chunks"
);

/// Chunks loaded for a stage: each one's tile coordinates `(r, c)` and its four values.
pub(super) type Staged<const N: usize> = [(u32, u32, [f32; 4]); N];

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
    let (_, a_cols, a_rows_m, a_cols_m, a_r0, a_c0) = a_storage(p, BM, BK, i0, k0);
    let (_, b_cols, b_rows_m, b_cols_m, b_r0, b_c0) = b_storage(p, BK, BN, k0, j0);
    let mut sa = [(0, 0, [0.0f32; 4]); CH_A];
    for (q, s) in sa.iter_mut().enumerate() {
        let ch = t + q as u32 * THREADS;
        *s = load_chunk4(&p.a, ba, p.lda, a_rows_m, a_cols_m, a_cols, a_r0, a_c0, ch, p.vec_a != 0);
    }
    let mut sb = [(0, 0, [0.0f32; 4]); CH_B];
    for (q, s) in sb.iter_mut().enumerate() {
        let ch = t + q as u32 * THREADS;
        *s = load_chunk4(&p.b, bb, p.ldb, b_rows_m, b_cols_m, b_cols, b_r0, b_c0, ch, p.vec_b != 0);
    }
    (sa, sb)
}

/// Stores staged chunks into stage `s`.
#[inline(always)]
#[track_caller]
pub(super) fn put(p: &GemmParams, s: u32, sa: &Staged<CH_A>, sb: &Staged<CH_B>) {
    let a_s = Shared::<f32>::at(TILING.a_offset(s), TILING.a_tile());
    let b_s = Shared::<f32>::at(TILING.b_offset(s), TILING.b_tile());
    let a_s4 = Shared::<F32x4>::at(TILING.a_offset(s), TILING.a_tile() / 4);
    let b_s4 = Shared::<F32x4>::at(TILING.b_offset(s), TILING.b_tile() / 4);
    for &(r, c, v) in sa.iter() {
        store_a_chunk(p.trans_a != 0, a_s, a_s4, BM, r, c, v);
    }
    for &(r, c, v) in sb.iter() {
        store_b_chunk(p.trans_b != 0, b_s, b_s4, BN, r, c, v);
    }
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
        put(&p, 0, &sa, &sb);
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
            put(&p, 1 - cur, &sa, &sb);
        }
        sync_threads();
        s += 1;
    }
    v07_warptile::store(&p, bc, i0, j0, row0, col0, &acc);
}
