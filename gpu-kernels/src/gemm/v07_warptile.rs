//! v07: warp tiling: the 128 x 128 block tile is split into eight 64 x 32 warp tiles, and
//! each lane computes an 8 x 4 piece of each of its warp's two 64 x 16 sub-tiles. A warp's
//! shared reads per k then span 64 rows of A and 32 columns of B (not 16 x 128 as in v06),
//! and k-steps of 16 halve the barriers per FMA.
//!
//! # Thread mapping
//! Warp `w` owns rows `(w / 4) * 64 ..` and columns `(w % 4) * 32 ..` of the block tile; lane
//! `l` owns rows `(l / 4) * 8 .. + 8` of it, and columns `(l % 4) * 4 .. + 4` of each 16-wide
//! sub-tile. Copies as v06 (two A and two B chunks per thread per k-step).

use super::{
    F32x4, GemmParams, Tiling, a_storage, b_storage, batch_bases, block_origin, load_chunk4, outer_product,
    store_a_chunk, store_b_chunk, store_c, unroll8,
};
use crate::device::thread::{sync_threads, thread_idx_x};
use crate::device::{Shared, WARP_SIZE};

pub const TILING: Tiling =
    Tiling { bm: 128, bn: 128, bk: 16, tm: 8, tn: 8, wm: 64, wn: 32, wniter: 2, stages: 1, blocks_per_sm: 0 }.check();

const BM: u32 = TILING.bm;
const BN: u32 = TILING.bn;
const BK: u32 = TILING.bk;
const TM: usize = TILING.tm as usize;
const TN: usize = TILING.tn as usize;
const WNITER: usize = TILING.wniter as usize;
/// Columns a lane owns in one sub-tile, and the sub-tile's width.
const LANE_TN: usize = TN / WNITER;
const SUB_N: u32 = TILING.wn / TILING.wniter;
const THREADS: u32 = TILING.threads();
const _: () = assert!(TM == 8 && LANE_TN == 4, "the 16-byte shared reads assume 8 rows and 4 columns per lane");

/// The thread's first row of the block tile, and first column of its first sub-tile (the
/// second starts `SUB_N` further).
#[inline(always)]
pub fn lane_origin(t: u32) -> (u32, u32) {
    let (warp, lane) = (t / WARP_SIZE, t % WARP_SIZE);
    let warps_n = BN / TILING.wn;
    let lanes_n = TILING.warp_lanes_n();
    let (wr, wc) = (warp / warps_n, warp % warps_n);
    (wr * TILING.wm + (lane / lanes_n) * TM as u32, wc * TILING.wn + (lane % lanes_n) * LANE_TN as u32)
}

/// The thread's A and B fragments at depth `kk` of the shared tiles `a_s4` (k-major A) and
/// `b_s4`: its 8 rows of A, and its 4 columns of B in each of the two sub-tiles.
#[inline(always)]
#[track_caller]
pub fn fragments(a_s4: Shared<F32x4>, b_s4: Shared<F32x4>, row0: u32, col0: u32, kk: u32) -> ([f32; TM], [f32; TN]) {
    let a_at = (kk * BM + row0) / 4;
    let (a_lo, a_hi) = (a_s4.load(a_at).0, a_s4.load(a_at + 1).0);
    let b_at = (kk * BN + col0) / 4;
    let (b0, b1) = (b_s4.load(b_at).0, b_s4.load(b_at + SUB_N / 4).0);
    (
        [a_lo[0], a_lo[1], a_lo[2], a_lo[3], a_hi[0], a_hi[1], a_hi[2], a_hi[3]],
        [b0[0], b0[1], b0[2], b0[3], b1[0], b1[1], b1[2], b1[3]],
    )
}

/// One k-step of FMAs out of the shared tiles `a_s4` (k-major A) and `b_s4`.
#[inline(always)]
#[track_caller]
pub fn compute(a_s4: Shared<F32x4>, b_s4: Shared<F32x4>, row0: u32, col0: u32, acc: &mut [[f32; TN]; TM]) {
    for kk in 0..BK {
        let (a, b) = fragments(a_s4, b_s4, row0, col0, kk);
        outer_product(&a, &b, acc);
    }
}

/// Writes the thread's accumulators to C (edge-guarded).
#[inline(always)]
#[track_caller]
pub fn store(p: &GemmParams, bc: usize, i0: u32, j0: u32, row0: u32, col0: u32, acc: &[[f32; TN]; TM]) {
    unroll8!(r < TM => {
        unroll8!(c < TN => {
            let j = col0 + (c / LANE_TN) as u32 * SUB_N + (c % LANE_TN) as u32;
            store_c(p, bc, i0 + row0 + r as u32, j0 + j, acc[r][c]);
        });
    });
}

#[inline(always)]
pub fn run(p: GemmParams) {
    let a_s = Shared::<f32>::at(TILING.a_offset(0), TILING.a_tile());
    let b_s = Shared::<f32>::at(TILING.b_offset(0), TILING.b_tile());
    let a_s4 = Shared::<F32x4>::at(TILING.a_offset(0), TILING.a_tile() / 4);
    let b_s4 = Shared::<F32x4>::at(TILING.b_offset(0), TILING.b_tile() / 4);
    let (ba, bb, bc) = batch_bases(&p);
    let (i0, j0) = block_origin(BM, BN);
    let t = thread_idx_x();
    let (row0, col0) = lane_origin(t);
    let (vec_a, vec_b) = (p.vec_a != 0, p.vec_b != 0);
    let mut acc = [[0.0f32; TN]; TM];
    let mut k0 = 0;
    while k0 < p.k {
        let (_, a_cols, a_rows_m, a_cols_m, a_r0, a_c0) = a_storage(&p, BM, BK, i0, k0);
        let mut ch = t;
        while ch < TILING.a_tile() / 4 {
            let (r, c, v) = load_chunk4(&p.a, ba, p.lda, a_rows_m, a_cols_m, a_cols, a_r0, a_c0, ch, vec_a);
            store_a_chunk(p.trans_a != 0, a_s, a_s4, BM, r, c, v);
            ch += THREADS;
        }
        let (_, b_cols, b_rows_m, b_cols_m, b_r0, b_c0) = b_storage(&p, BK, BN, k0, j0);
        let mut ch = t;
        while ch < TILING.b_tile() / 4 {
            let (r, c, v) = load_chunk4(&p.b, bb, p.ldb, b_rows_m, b_cols_m, b_cols, b_r0, b_c0, ch, vec_b);
            store_b_chunk(p.trans_b != 0, b_s, b_s4, BN, r, c, v);
            ch += THREADS;
        }
        sync_threads();
        compute(a_s4, b_s4, row0, col0, &mut acc);
        sync_threads();
        k0 += BK;
    }
    store(&p, bc, i0, j0, row0, col0, &acc);
}
