//! v02: the same dot products as v01, but consecutive threads take consecutive columns of C,
//! so a warp reads one row of B and writes one row of C in full 128-byte lines while its
//! A reads become one broadcast address.
//!
//! # Thread mapping
//! Thread `t` computes `C[i0 + t / 32, j0 + t % 32]`.

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
    let (i, j) = (i0 + t / TILING.bn, j0 + t % TILING.bn);
    if i >= p.m || j >= p.n {
        return;
    }
    let mut acc = 0.0f32;
    for kk in 0..p.k {
        acc = math::fma(load_a(&p, ba, i, kk), load_b(&p, bb, kk, j), acc);
    }
    store_c(&p, bc, i, j, acc);
}
