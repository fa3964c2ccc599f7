//! v01: one thread per element of C, consecutive threads down a column of C: each warp reads
//! 32 rows of A at a stride and writes C at a stride (uncoalesced). The ladder's baseline.
//!
//! # Thread mapping
//! Thread `t` of the block computes `C[i0 + t % 32, j0 + t / 32]` as one k-long dot product
//! straight from global memory.

use super::{GemmParams, Tiling, batch_bases, block_origin, load_a, load_b, store_c};
use crate::device::math;
use crate::device::thread::thread_idx_x;

pub const TILING: Tiling =
    Tiling { bm: 32, bn: 32, bk: 0, tm: 1, tn: 1, wm: 0, wn: 0, wniter: 1, stages: 0, blocks_per_sm: 0 }.check();

#[inline(always)]
pub fn run(p: GemmParams) {
    let (ba, bb, bc) = batch_bases(&p);
    let (i0, j0) = block_origin(TILING.bm, TILING.bn);
    let t = thread_idx_x();
    let (i, j) = (i0 + t % TILING.bm, j0 + t / TILING.bm);
    if i >= p.m || j >= p.n {
        return; // no barrier follows, so edge threads may leave
    }
    let mut acc = 0.0f32;
    for kk in 0..p.k {
        acc = math::fma(load_a(&p, ba, i, kk), load_b(&p, bb, kk, j), acc);
    }
    store_c(&p, bc, i, j, acc);
}
