//! Split-K for the SGEMM ladder (not a rung: the mechanism [`super::v10_split_k`] introduced,
//! shared by the versions that split, v09 and v10). When a shape has too few C tiles to fill
//! the GPU, each tile gets several blocks on grid z, each covering one range of K and writing
//! its partial tile, unscaled, to scratch; [`sum`] then adds a tile's partials in split order
//! (the same result every run) and applies `alpha` and `beta` once. The partials are packed
//! row-major whatever C's layout; only [`sum`] writes C (transposed when `trans_c`).
//!
//! # Split
//! `p.k_split == 0`: no split; the block covers all of K of batch `batch_base + blockIdx.z`
//! and writes `alpha * acc + beta * C`, as every version. Otherwise grid z counts
//! `batches x splits` (`splits = ceil(K / k_split)`, `blockIdx.z = batch * splits + split`),
//! the block covers depths `split * k_split ..` up to `k_split` further (a multiple of the
//! version's k-step, so only the last split can end in a partial one), and `p.c` is the
//! scratch: partial tile `blockIdx.z` goes, as is, to `blockIdx.z * stride_c + i * ldc + j`.

use super::{GemmParams, batch_bases_at};
use crate::device::math;
use crate::device::thread::{block_idx_x, block_idx_z, thread_idx_x};
use crate::device::{Global, GlobalMut};

/// The batch and the depths of K one block covers.
#[derive(Clone, Copy)]
pub struct Range {
    /// First elements of the block's batch in A and B.
    pub ba: usize,
    pub bb: usize,
    /// Its depths of K: `k_begin .. k_end`.
    pub k_begin: u32,
    pub k_end: u32,
}

impl Range {
    /// This block's range (see the module's Split section).
    #[inline(always)]
    pub fn of_block(p: &GemmParams) -> Range {
        let z = block_idx_z();
        if p.k_split == 0 {
            let (ba, bb, _) = batch_bases_at(p, p.batch_base + z);
            return Range { ba, bb, k_begin: 0, k_end: p.k };
        }
        // `max(1)` and `max(k_begin)` below only keep a launcher bug from dividing by 0 or
        // making an inverted range: the launcher splits only K > k_split, so no split is empty.
        let splits = p.k.div_ceil(p.k_split).max(1);
        let k_begin = (z % splits) * p.k_split;
        let (ba, bb, _) = batch_bases_at(p, p.batch_base + z / splits);
        Range { ba, bb, k_begin, k_end: p.k.min(k_begin + p.k_split).max(k_begin) }
    }

    /// Depths the block covers.
    #[inline(always)]
    pub fn depth(&self) -> u32 {
        self.k_end - self.k_begin
    }
}

/// Where this block's tile goes, as parameters and base element for `store_c`: C (`p` and its
/// batch's base) or, split, its partial matrix in the scratch with alpha 1 and beta 0, so the
/// accumulators are stored as they are. Called after the main loop, so none of it is live
/// across it.
#[inline(always)]
pub fn output(p: &GemmParams) -> (GemmParams, usize) {
    let z = block_idx_z();
    if p.k_split == 0 {
        (*p, batch_bases_at(p, p.batch_base + z).2)
    } else {
        (GemmParams { alpha: 1.0, beta: 0.0, ..*p }, z as usize * p.stride_c as usize)
    }
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
    /// Partial matrices per batch (the `splits` of the module's Split section).
    pub splits: u32,
    /// The batch of `blockIdx.z = 0`.
    pub batch_base: u32,
    /// Nonzero: C is stored transposed, as [`GemmParams::trans_c`] (the partials never are).
    pub trans_c: u32,
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
/// in full lines; C's rows too unless `ldc` pads them, or C is stored transposed: then a
/// warp's stores are `ldc` apart).
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
    let (r, c) = if p.trans_c == 0 { (i, j) } else { (j, i) };
    let at = (p.batch_base as usize + z) * p.stride_c as usize + r * p.ldc as usize + c;
    let ab = p.alpha * acc;
    let v = if p.beta == 0.0 { ab } else { math::fma(p.beta, p.c.load(at), ab) };
    p.c.store(at, v);
}
