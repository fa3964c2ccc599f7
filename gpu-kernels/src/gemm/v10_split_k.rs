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
//! tile's whole k-steps load without edge guards, as v09's ([`super::Interior`]).
//!
//! # Split
//! `p.k_split == 0`: the block covers all of K and writes `alpha * acc + beta * C`, as every
//! other version. Otherwise grid z counts `batches x splits` (`splits = ceil(K / k_split)`,
//! `blockIdx.z = batch * splits + split`), the block covers depths `split * k_split ..` up to
//! `k_split` further (a multiple of the k-step, so only the last split has a partial one), and
//! `p.c` is the scratch: partial tile `blockIdx.z` goes, as is, to `blockIdx.z * stride_c +
//! i * ldc + j`. The launcher then runs [`sum`] over the partials.

use super::{
    F32x4, GemmParams, Interior, Tiling, batch_bases_at, block_origin, chunks_per_thread, fetch_stage, outer_product,
    put_stage, store_c, unroll8,
};
use crate::device::math;
use crate::device::thread::{block_idx_x, block_idx_z, sync_threads, thread_idx_x};
use crate::device::{Global, GlobalMut, Shared, WARP_SIZE};

pub const TILING: Tiling =
    Tiling { bm: 16, bn: 128, bk: 32, tm: 4, tn: 4, wm: 0, wn: 0, wniter: 1, stages: 2, blocks_per_sm: 0 }.check();

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
    let z = block_idx_z();
    // The block's batch and depth range; with a split, the partial goes to scratch matrix z.
    let (batch, k_begin, k_end) = if p.k_split == 0 {
        (p.batch_base + z, 0, p.k)
    } else {
        // `max(1)` and `saturating_sub` below only keep a launcher bug from dividing by 0 or
        // wrapping: the launcher splits only K > k_split, so every split is nonempty.
        let splits = p.k.div_ceil(p.k_split).max(1);
        let k_begin = (z % splits) * p.k_split;
        (p.batch_base + z / splits, k_begin, p.k.min(k_begin + p.k_split))
    };
    let (ba, bb, bc) = batch_bases_at(&p, batch);
    let depth = k_end.saturating_sub(k_begin);
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
    // A partial is stored as is (alpha 1, beta 0: C's old value is [`sum`]'s business).
    let (out, base) = if p.k_split == 0 {
        (p, bc)
    } else {
        (GemmParams { alpha: 1.0, beta: 0.0, ..p }, z as usize * p.stride_c as usize)
    };
    unroll8!(r < TM => {
        unroll8!(c < TN => {
            store_c(&out, base, i0 + row0 + r as u32, j0 + col0 + c as u32, acc[r][c]);
        });
    });
}

/// Threads per block of [`sum`].
pub const SUM_THREADS: u32 = 256;

/// The parameters of [`sum`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SplitSumParams {
    pub m: u32,
    pub n: u32,
    pub ldc: u32,
    /// Partial matrices per batch (the `splits` of [`run`]).
    pub splits: u32,
    /// The batch of `blockIdx.z = 0`.
    pub batch_base: u32,
    pub _pad: u32,
    pub stride_c: u64,
    pub alpha: f32,
    pub beta: f32,
    /// The partials, packed `m x n` matrices: matrix `z * splits + s` holds split `s` of batch
    /// `batch_base + z`.
    pub part: Global<f32>,
    pub c: GlobalMut<f32>,
}

/// `C = alpha * (partial 0 + partial 1 + ...) + beta * C`, the partials added in split order;
/// `beta = 0` does not read C. One thread per element of C: block `(x, 0, z)` covers elements
/// `x * SUM_THREADS ..` of batch `batch_base + z` in row-major order (the partials are read
/// in full lines; C's rows too unless `ldc` pads them).
///
/// # Safety (launcher)
/// `part` holds `grid z x splits` packed `m x n` matrices, `c` every element of those batches
/// of C, grid x is `ceil(m n / SUM_THREADS)` and `splits >= 1`.
#[inline(always)]
pub fn sum(p: SplitSumParams) {
    let e = block_idx_x() as usize * SUM_THREADS as usize + thread_idx_x() as usize;
    let mn = p.m as usize * p.n as usize;
    if e >= mn {
        return;
    }
    let z = block_idx_z() as usize;
    let first = z * p.splits as usize * mn + e;
    let mut acc = p.part.load(first);
    let mut s = 1;
    while s < p.splits as usize {
        acc += p.part.load(first + s * mn);
        s += 1;
    }
    let (i, j) = (e / p.n as usize, e % p.n as usize);
    let at = (p.batch_base as usize + z) * p.stride_c as usize + i * p.ldc as usize + j;
    let ab = p.alpha * acc;
    let v = if p.beta == 0.0 { ab } else { math::fma(p.beta, p.c.load(at), ab) };
    p.c.store(at, v);
}
