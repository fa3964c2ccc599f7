//! v04: 1D register blocking: each thread computes 8 rows of one column of C, so one `Bs`
//! read feeds 8 FMAs; 64 x 64 block tiles with k-steps of 8 (512 threads).
//!
//! # Thread mapping
//! Thread `t` owns column `t % 64` and rows `(t / 64) * 8 .. + 8` of the block's tile. Each
//! k-step the block copies the 64 x 8 A tile (`As[i * 8 + kk]`) and the 8 x 64 B tile
//! (`Bs[kk * 64 + j]`), one element of each per thread.

use super::{GemmParams, Tiling, batch_bases, block_origin, load_a, load_b, store_c};
use crate::device::thread::{sync_threads, thread_idx_x};
use crate::device::{Shared, math};

pub const TILING: Tiling =
    Tiling { bm: 64, bn: 64, bk: 8, tm: 8, tn: 1, wm: 0, wn: 0, wniter: 1, stages: 1, blocks_per_sm: 0 }.check();

const BN: u32 = TILING.bn;
const BK: u32 = TILING.bk;
const TM: usize = TILING.tm as usize;
const THREADS: u32 = TILING.threads();
const A_S: Shared<f32> = Shared::at(TILING.a_offset(0), TILING.a_tile());
const B_S: Shared<f32> = Shared::at(TILING.b_offset(0), TILING.b_tile());

#[inline(always)]
pub fn run(p: GemmParams) {
    let (ba, bb, bc) = batch_bases(&p);
    let (i0, j0) = block_origin(TILING.bm, BN);
    let t = thread_idx_x();
    let (row0, col) = ((t / BN) * TM as u32, t % BN);
    let mut acc = [0.0f32; TM];
    let mut k0 = 0;
    while k0 < p.k {
        let mut e = t;
        while e < TILING.a_tile() {
            A_S.store(e, load_a(&p, ba, i0 + e / BK, k0 + e % BK));
            e += THREADS;
        }
        let mut e = t;
        while e < TILING.b_tile() {
            B_S.store(e, load_b(&p, bb, k0 + e / BN, j0 + e % BN));
            e += THREADS;
        }
        sync_threads();
        for kk in 0..BK {
            // One shared read of B reused across the thread's 8 rows.
            let b = B_S.load(kk * BN + col);
            for (r, a) in acc.iter_mut().enumerate() {
                *a = math::fma(A_S.load((row0 + r as u32) * BK + kk), b, *a);
            }
        }
        sync_threads();
        k0 += BK;
    }
    for (r, &a) in acc.iter().enumerate() {
        store_c(&p, bc, i0 + row0 + r as u32, j0 + col, a);
    }
}
