//! v06: 16-byte accesses: A and B tiles are read from global memory in 4-float chunks when the
//! launcher proved alignment (scalar, guarded loads at the edges and otherwise), and A is
//! stored k-major in shared memory so a thread's 8 A values and 8 B values per k are four
//! `LDS.128` instead of sixteen 4-byte reads. Tiles as v05.
//!
//! # Thread mapping
//! As v05 for the outputs. Copies work in chunks along each operand's contiguous dimension:
//! one A chunk and one B chunk per thread per k-step (`super::load_chunk4`); shared layout
//! `As[kk * 128 + i]`, `Bs[kk * 128 + j]`.

use super::{
    F32x4, GemmParams, Tiling, a_storage, b_storage, batch_bases, block_origin, load_chunk4, outer_product,
    store_a_chunk, store_b_chunk, store_c, unroll8,
};
use crate::device::Shared;
use crate::device::thread::{sync_threads, thread_idx_x};

pub const TILING: Tiling =
    Tiling { bm: 128, bn: 128, bk: 8, tm: 8, tn: 8, wm: 0, wn: 0, wniter: 1, stages: 1, blocks_per_sm: 0 }.check();

const BM: u32 = TILING.bm;
const BN: u32 = TILING.bn;
const BK: u32 = TILING.bk;
const TM: usize = TILING.tm as usize;
const TN: usize = TILING.tn as usize;
const THREADS: u32 = TILING.threads();
const A_S: Shared<f32> = Shared::at(TILING.a_offset(0), TILING.a_tile());
const B_S: Shared<f32> = Shared::at(TILING.b_offset(0), TILING.b_tile());
const A_S4: Shared<F32x4> = Shared::at(TILING.a_offset(0), TILING.a_tile() / 4);
const B_S4: Shared<F32x4> = Shared::at(TILING.b_offset(0), TILING.b_tile() / 4);
const _: () =
    assert!(TM == 8 && TN == 8 && BK.is_multiple_of(4) && BM.is_multiple_of(4), "the 16-byte reads assume 8 x 8");

#[inline(always)]
pub fn run(p: GemmParams) {
    let (ba, bb, bc) = batch_bases(&p);
    let (i0, j0) = block_origin(BM, BN);
    let t = thread_idx_x();
    let lanes_n = BN / TN as u32;
    let (row0, col0) = ((t / lanes_n) * TM as u32, (t % lanes_n) * TN as u32);
    let (vec_a, vec_b) = (p.vec_a != 0, p.vec_b != 0);
    let mut acc = [[0.0f32; TN]; TM];
    let mut k0 = 0;
    while k0 < p.k {
        let (_, a_cols, a_rows_m, a_cols_m, a_r0, a_c0) = a_storage(&p, BM, BK, i0, k0);
        let mut ch = t;
        while ch < TILING.a_tile() / 4 {
            let (r, c, v) = load_chunk4(&p.a, ba, p.lda, a_rows_m, a_cols_m, a_cols, a_r0, a_c0, ch, vec_a);
            store_a_chunk(p.trans_a != 0, A_S, A_S4, BM, r, c, v);
            ch += THREADS;
        }
        let (_, b_cols, b_rows_m, b_cols_m, b_r0, b_c0) = b_storage(&p, BK, BN, k0, j0);
        let mut ch = t;
        while ch < TILING.b_tile() / 4 {
            let (r, c, v) = load_chunk4(&p.b, bb, p.ldb, b_rows_m, b_cols_m, b_cols, b_r0, b_c0, ch, vec_b);
            store_b_chunk(p.trans_b != 0, B_S, B_S4, BN, r, c, v);
            ch += THREADS;
        }
        sync_threads();
        for kk in 0..BK {
            let a_at = (kk * BM + row0) / 4;
            let b_at = (kk * BN + col0) / 4;
            let (a_lo, a_hi) = (A_S4.load(a_at).0, A_S4.load(a_at + 1).0);
            let (b_lo, b_hi) = (B_S4.load(b_at).0, B_S4.load(b_at + 1).0);
            let a = [a_lo[0], a_lo[1], a_lo[2], a_lo[3], a_hi[0], a_hi[1], a_hi[2], a_hi[3]];
            let b = [b_lo[0], b_lo[1], b_lo[2], b_lo[3], b_hi[0], b_hi[1], b_hi[2], b_hi[3]];
            outer_product(&a, &b, &mut acc);
        }
        sync_threads();
        k0 += BK;
    }
    unroll8!(r < TM => {
        unroll8!(c < TN => { store_c(&p, bc, i0 + row0 + r as u32, j0 + col0 + c as u32, acc[r][c]); });
    });
}
