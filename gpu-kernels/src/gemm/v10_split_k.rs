//! v10: split-K, for C too small to fill the GPU: a 16 x 128 tile, so C with a few rows keeps
//! most of what it computes, and the blocks of one C tile divide K between them, each writing
//! its partial tile to scratch; a second kernel ([`sum`]) adds the partials in split order
//! (the same result every run) and applies `alpha` and `beta`.
//!
//! # Why
//! At 16 x 4096 x 4096 the H200 run of 2026-12-04 had the best rung (v03, 0.240 ms) at 0.38 of
//! cuBLAS (0.092 ms). The shape is memory-bound: its 64 MiB of B take 0.018 ms at the copy
//! speed measured in that run (3.8 TB/s), its 0.54 GFLOP about 0.01 ms on the CUDA cores. The
//! 128 x 128 tiles of v08 give 32 blocks (computing 8 times the rows C has), v03's 32 x 32
//! tiles 128 blocks of 256 threads reading 4-byte words; neither keeps enough loads in flight
//! on 132 SMs. Here 32 tiles x 12 splits make 384 blocks (one wave: 3 per SM), each streaming
//! 352 rows of B in 16-byte chunks with the next k-step's loads in flight during the FMAs.
//!
//! # Thread mapping
//! 128 threads; warp `w` owns rows `4w .. 4w + 4` of the tile and lane `l` columns
//! `4l .. 4l + 4`, so a warp's A fragment is one broadcast `LDS.128` and its B fragments one
//! contiguous 512-byte row of the B tile. k-steps of 32, two shared stages (staged as v08:
//! [`super::fetch_stage`] before a k-step's FMAs, [`super::put_stage`] after); an interior
//! tile's whole k-steps load without edge guards, and a lane's 4 columns of a row store in
//! 16 bytes, as v09's ([`super::Interior`], [`super::store_c4`]).
//!
//! # Split
//! As [`super::split_k`] describes: `p.k_split == 0` covers all of K and writes C; otherwise
//! the block covers one range of K and writes its partial tile to the scratch, which
//! [`super::split_k::sum`] adds into C.

use super::split_k::{self, Range};
use super::{
    F32x4, GemmParams, Interior, Tiling, block_origin, chunks_per_thread, fetch_stage, outer_product, put_stage,
    store_c4, unroll8,
};
use crate::device::thread::{sync_threads, thread_idx_x};
use crate::device::{Shared, WARP_SIZE};

pub const TILING: Tiling =
    Tiling { bm: 16, bn: 128, bk: 32, tm: 4, tn: 4, wm: 0, wn: 0, wniter: 1, stages: 2, blocks_per_sm: 3 }.check();

const BM: u32 = TILING.bm;
const BN: u32 = TILING.bn;
const BK: u32 = TILING.bk;
const TM: usize = TILING.tm as usize;
const TN: usize = TILING.tn as usize;
const CH_A: usize = chunks_per_thread(TILING).0;
const CH_B: usize = chunks_per_thread(TILING).1;
const _: () = assert!(
    TM == 4 && TN == 4 && BM / TILING.tm == TILING.threads() / WARP_SIZE && BN / TILING.tn == WARP_SIZE,
    "one warp per 4 rows, one lane per 4 columns: the fragments are one LDS.128 each"
);

/// One k-step of FMAs out of stage tiles `a_s4` (k-major A) and `b_s4`.
#[inline(always)]
#[track_caller]
fn compute(a_s4: Shared<F32x4>, b_s4: Shared<F32x4>, row0: u32, col0: u32, acc: &mut [[f32; TN]; TM]) {
    unroll8!(h < 4 => {
        unroll8!(q < 8 => {
            let kk = (h * 8 + q) as u32;
            let a = a_s4.load((kk * BM + row0) / 4).0;
            let b = b_s4.load((kk * BN + col0) / 4).0;
            outer_product(&a, &b, acc);
        });
    });
}

#[inline(always)]
pub fn run(p: GemmParams) {
    let t = thread_idx_x();
    let (i0, j0) = block_origin(BM, BN);
    let (row0, col0) = ((t / WARP_SIZE) * TM as u32, (t % WARP_SIZE) * TN as u32);
    let r = Range::of_block(&p);
    let (ba, bb, k_begin) = (r.ba, r.bb, r.k_begin);
    let depth = r.depth();
    let steps = depth.div_ceil(BK);
    // As v09: an interior tile's whole k-steps load their chunks without edge guards.
    let interior = p.vec_a != 0 && p.vec_b != 0 && i0 + BM <= p.m && j0 + BN <= p.n;
    let whole = if interior { depth / BK } else { 0 };
    let lean = Interior::<CH_A, CH_B>::new(TILING, &p, ba, bb, i0, j0, k_begin, t);
    let fetch = |s: u32| {
        if s < whole {
            lean.fetch(TILING, &p, s, t)
        } else {
            fetch_stage::<CH_A, CH_B>(TILING, &p, ba, bb, i0, j0, k_begin + s * BK, t)
        }
    };
    let mut acc = [[0.0f32; TN]; TM];
    if steps > 0 {
        let (sa, sb) = fetch(0);
        put_stage(TILING, &p, 0, &sa, &sb);
        sync_threads();
    }
    let mut s = 0;
    while s < steps {
        let cur = s % 2;
        let staged = if s + 1 < steps { Some(fetch(s + 1)) } else { None };
        let a_s4 = Shared::<F32x4>::at(TILING.a_offset(cur), TILING.a_tile() / 4);
        let b_s4 = Shared::<F32x4>::at(TILING.b_offset(cur), TILING.b_tile() / 4);
        compute(a_s4, b_s4, row0, col0, &mut acc);
        if let Some((sa, sb)) = staged {
            put_stage(TILING, &p, 1 - cur, &sa, &sb);
        }
        sync_threads();
        s += 1;
    }
    let (out, base) = split_k::output(&p);
    // A lane's 4 columns: one 16-byte store per row where C allows it, as v09's.
    unroll8!(i < TM => {
        store_c4(&out, base, i0 + row0 + i as u32, j0 + col0, acc[i]);
    });
}
