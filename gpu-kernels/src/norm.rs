//! `layernorm` and `rmsnorm`, forward and backward, over the last dimension.
//!
//! Forward: `layernorm: y = (x - mean) * rstd * gamma + beta` with
//! `rstd = 1 / sqrt(var + eps)` (biased variance), saving `mean` and `rstd` per row;
//! `rmsnorm: y = x * rstd * gamma` with `rstd = 1 / sqrt(mean(x^2) + eps)`, saving `rstd`.
//! Statistics are two-pass (mean, then squared deviations) over the cached row, which is
//! more accurate than a one-pass variance and free when the row is in registers.
//!
//! Backward, with `xhat = (x - mean) * rstd` (rmsnorm: `x * rstd`) and `g = dy * gamma`:
//! `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))` (rmsnorm drops `mean(g)`), and the
//! parameter gradients `dgamma = sum over rows of dy * xhat`, `dbeta = sum of dy`. Each row
//! group adds its rows' contributions to its own row of a `partial` buffer (no atomics, so
//! the result is bitwise deterministic); [`column_sum`] then adds the partial rows in a fixed
//! order.
//!
//! # Thread mapping
//! The row engine's ([`crate::rows`]); [`column_sum`] runs one thread per column.
//!
//! # Safety
//! As in [`crate::rows`]; `gamma`/`beta`/`dgamma`/`dbeta` have `cols` elements, `mean`/`rstd`
//! have `rows`, `partial` has `groups * cols * (1 or 2)` where `groups` is the number of row
//! groups in the launch (grid x rows per block).

use crate::device::reduce::Sum;
use crate::device::thread::{block_dim_x, block_idx_x, grid_dim_x, index_1d, thread_idx_x};
use crate::device::{Element, Global, GlobalMut, math};
use crate::rows::{self, MAX_CACHE_CHUNKS, assign, cache_chunks, group_reduce, load_chunk, store_chunk};

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NormParams<T> {
    pub rows: u32,
    pub cols: u32,
    pub vectorized: u32,
    pub eps: f32,
    pub x: Global<T>,
    pub gamma: Global<T>,
    /// layernorm only (empty for rmsnorm).
    pub beta: Global<T>,
    pub y: GlobalMut<T>,
    /// layernorm only (empty for rmsnorm).
    pub mean: GlobalMut<f32>,
    pub rstd: GlobalMut<f32>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NormBackwardParams<T> {
    pub rows: u32,
    pub cols: u32,
    pub vectorized: u32,
    pub x: Global<T>,
    pub dy: Global<T>,
    pub gamma: Global<T>,
    /// layernorm only (empty for rmsnorm).
    pub mean: Global<f32>,
    pub rstd: Global<f32>,
    pub dx: GlobalMut<T>,
    /// Per row group: `cols` partial dgamma, then (layernorm) `cols` partial dbeta.
    pub partial: GlobalMut<f32>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ColumnSumParams {
    /// Rows of `partial` to add.
    pub groups: u32,
    pub cols: u32,
    /// Stride between partial rows, in elements.
    pub stride: u32,
    /// Offset of the first partial row's column 0, in elements.
    pub start: u32,
    pub partial: Global<f32>,
    pub out: GlobalMut<f32>,
}

/// The body of every forward norm kernel; `LAYER` selects layernorm (else rmsnorm).
#[inline(always)]
pub fn forward<T: Element, const VEC: usize, const G: u32, const LAYER: bool>(p: NormParams<T>) {
    let (mut row, stride, lane) = assign::<G>();
    let lane = lane as usize;
    let cols = p.cols as usize;
    let vectorized = p.vectorized != 0;
    let nchunks = rows::chunks(cols, VEC);
    let cache_n = const { cache_chunks(VEC) };
    let cached = nchunks <= G as usize * cache_n;
    let inv_cols = 1.0 / p.cols as f32;
    while row < p.rows as usize {
        let base = row * cols;
        let mut cache = [[0.0f32; VEC]; MAX_CACHE_CHUNKS];
        // Pass 1: the mean (layernorm) or nothing (rmsnorm).
        let mut s = 0.0f32;
        if cached {
            crate::for_each_cached_chunk!(j < cache_n => {
                let c = lane + j * G as usize;
                if c < nchunks {
                    cache[j] = load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, 0.0);
                    for &v in cache[j].iter() {
                        s += v;
                    }
                }
            });
        } else if LAYER {
            let mut c = lane;
            while c < nchunks {
                for v in load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, 0.0) {
                    s += v;
                }
                c += G as usize;
            }
        }
        let mean = if LAYER { group_reduce::<Sum, G>(Sum(s)).0 * inv_cols } else { 0.0 };
        // Pass 2: squared deviations from the mean (rmsnorm: from 0), inside the row only.
        let mut q = 0.0f32;
        let mut acc = |c: usize, v: &[f32; VEC]| {
            for (k, &x) in v.iter().enumerate() {
                if c * VEC + k < cols {
                    let d = x - mean;
                    q = math::fma(d, d, q);
                }
            }
        };
        if cached {
            crate::for_each_cached_chunk!(j < cache_n => {
                let c = lane + j * G as usize;
                if c < nchunks {
                    acc(c, &cache[j]);
                }
            });
        } else {
            let mut c = lane;
            while c < nchunks {
                acc(c, &load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, 0.0));
                c += G as usize;
            }
        }
        let var = group_reduce::<Sum, G>(Sum(q)).0 * inv_cols;
        let rstd = 1.0 / math::sqrt(var + p.eps);
        if lane == 0 {
            if LAYER {
                p.mean.store(row, mean);
            }
            p.rstd.store(row, rstd);
        }
        // Pass 3: the output.
        let write = |c: usize, v: &[f32; VEC]| {
            let g = load_chunk::<T, VEC>(&p.gamma, 0, cols, c, vectorized, 0.0);
            let b = if LAYER { load_chunk::<T, VEC>(&p.beta, 0, cols, c, vectorized, 0.0) } else { [0.0; VEC] };
            let mut o = [0.0f32; VEC];
            for k in 0..VEC {
                o[k] = math::fma((v[k] - mean) * rstd, g[k], b[k]);
            }
            store_chunk::<T, VEC>(&p.y, base, cols, c, vectorized, o);
        };
        if cached {
            crate::for_each_cached_chunk!(j < cache_n => {
                let c = lane + j * G as usize;
                if c < nchunks {
                    write(c, &cache[j]);
                }
            });
        } else {
            let mut c = lane;
            while c < nchunks {
                write(c, &load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, 0.0));
                c += G as usize;
            }
        }
        row += stride;
    }
}

/// The body of every backward norm kernel; `LAYER` selects layernorm (else rmsnorm).
/// Streams the row twice (the two means, then dx and the parameter partials); a row group's
/// partial row stays hot in L2 across its rows.
#[inline(always)]
pub fn backward<T: Element, const VEC: usize, const G: u32, const LAYER: bool>(p: NormBackwardParams<T>) {
    let (mut row, stride, lane) = assign::<G>();
    let lane = lane as usize;
    let cols = p.cols as usize;
    let vectorized = p.vectorized != 0;
    let nchunks = rows::chunks(cols, VEC);
    let inv_cols = 1.0 / p.cols as f32;
    // This group's row of the partial buffer.
    let group = block_idx_x() as usize * (block_dim_x() / G) as usize + thread_idx_x() as usize / G as usize;
    let pbase = group * cols * if LAYER { 2 } else { 1 };
    let mut first = true;
    while row < p.rows as usize {
        let base = row * cols;
        let mean = if LAYER { p.mean.load(row) } else { 0.0 };
        let rstd = p.rstd.load(row);
        let mut sg = 0.0f32;
        let mut sgx = 0.0f32;
        let mut c = lane;
        while c < nchunks {
            let x = load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, 0.0);
            let dy = load_chunk::<T, VEC>(&p.dy, base, cols, c, vectorized, 0.0);
            let gm = load_chunk::<T, VEC>(&p.gamma, 0, cols, c, vectorized, 0.0);
            for k in 0..VEC {
                let g = dy[k] * gm[k];
                sg += g;
                sgx = math::fma(g, (x[k] - mean) * rstd, sgx);
            }
            c += G as usize;
        }
        let mean_g = if LAYER { group_reduce::<Sum, G>(Sum(sg)).0 * inv_cols } else { 0.0 };
        let mean_gx = group_reduce::<Sum, G>(Sum(sgx)).0 * inv_cols;
        let mut c = lane;
        while c < nchunks {
            let x = load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, 0.0);
            let dy = load_chunk::<T, VEC>(&p.dy, base, cols, c, vectorized, 0.0);
            let gm = load_chunk::<T, VEC>(&p.gamma, 0, cols, c, vectorized, 0.0);
            let mut dx = [0.0f32; VEC];
            for k in 0..VEC {
                let xhat = (x[k] - mean) * rstd;
                dx[k] = rstd * (dy[k] * gm[k] - mean_g - xhat * mean_gx);
                let col = c * VEC + k;
                if col < cols {
                    // The group owns this partial row: plain read-modify-write, in row order.
                    let dg = if first { 0.0 } else { p.partial.load(pbase + col) };
                    p.partial.store(pbase + col, math::fma(dy[k], xhat, dg));
                    if LAYER {
                        let db = if first { 0.0 } else { p.partial.load(pbase + cols + col) };
                        p.partial.store(pbase + cols + col, db + dy[k]);
                    }
                }
            }
            store_chunk::<T, VEC>(&p.dx, base, cols, c, vectorized, dx);
            c += G as usize;
        }
        first = false;
        row += stride;
    }
    if first {
        // A group with no rows still owns a partial row, which column_sum adds: zero it.
        let width = cols * if LAYER { 2 } else { 1 };
        let mut i = lane;
        while i < width {
            p.partial.store(pbase + i, 0.0);
            i += G as usize;
        }
    }
}

/// `out[c] = sum over g < groups of partial[start + g * stride + c]`, in order of `g`: the second
/// stage of the parameter gradients. One thread per column, so a warp reads 32 adjacent
/// columns of one partial row per step (coalesced).
#[inline(always)]
pub fn column_sum(p: ColumnSumParams) {
    let mut c = index_1d();
    let step = grid_dim_x() as usize * block_dim_x() as usize;
    while c < p.cols as usize {
        let mut s = 0.0f32;
        for g in 0..p.groups as usize {
            s += p.partial.load(p.start as usize + g * p.stride as usize + c);
        }
        p.out.store(c, s);
        c += step;
    }
}

/// Threads per block of [`column_sum`].
pub const COLUMN_SUM_THREADS: u32 = 256;

type F16 = half::f16;
type Bf16 = half::bf16;
const W: u32 = crate::device::WARP_SIZE;
const B: u32 = rows::BLOCK_ROW_THREADS;

crate::kernels! {
    LAYERNORM_F32_WARP = layernorm_f32_warp(NormParams<f32>) => forward::<f32, 4, W, true>;
    LAYERNORM_F32_BLOCK = layernorm_f32_block(NormParams<f32>) => forward::<f32, 4, B, true>;
    LAYERNORM_F16_WARP = layernorm_f16_warp(NormParams<F16>) => forward::<F16, 8, W, true>;
    LAYERNORM_F16_BLOCK = layernorm_f16_block(NormParams<F16>) => forward::<F16, 8, B, true>;
    LAYERNORM_BF16_WARP = layernorm_bf16_warp(NormParams<Bf16>) => forward::<Bf16, 8, W, true>;
    LAYERNORM_BF16_BLOCK = layernorm_bf16_block(NormParams<Bf16>) => forward::<Bf16, 8, B, true>;
    RMSNORM_F32_WARP = rmsnorm_f32_warp(NormParams<f32>) => forward::<f32, 4, W, false>;
    RMSNORM_F32_BLOCK = rmsnorm_f32_block(NormParams<f32>) => forward::<f32, 4, B, false>;
    RMSNORM_F16_WARP = rmsnorm_f16_warp(NormParams<F16>) => forward::<F16, 8, W, false>;
    RMSNORM_F16_BLOCK = rmsnorm_f16_block(NormParams<F16>) => forward::<F16, 8, B, false>;
    RMSNORM_BF16_WARP = rmsnorm_bf16_warp(NormParams<Bf16>) => forward::<Bf16, 8, W, false>;
    RMSNORM_BF16_BLOCK = rmsnorm_bf16_block(NormParams<Bf16>) => forward::<Bf16, 8, B, false>;
    LAYERNORM_BACKWARD_F32_WARP = layernorm_backward_f32_warp(NormBackwardParams<f32>) => backward::<f32, 4, W, true>;
    LAYERNORM_BACKWARD_F32_BLOCK = layernorm_backward_f32_block(NormBackwardParams<f32>) => backward::<f32, 4, B, true>;
    LAYERNORM_BACKWARD_F16_WARP = layernorm_backward_f16_warp(NormBackwardParams<F16>) => backward::<F16, 8, W, true>;
    LAYERNORM_BACKWARD_F16_BLOCK = layernorm_backward_f16_block(NormBackwardParams<F16>) => backward::<F16, 8, B, true>;
    LAYERNORM_BACKWARD_BF16_WARP = layernorm_backward_bf16_warp(NormBackwardParams<Bf16>) => backward::<Bf16, 8, W, true>;
    LAYERNORM_BACKWARD_BF16_BLOCK = layernorm_backward_bf16_block(NormBackwardParams<Bf16>) => backward::<Bf16, 8, B, true>;
    RMSNORM_BACKWARD_F32_WARP = rmsnorm_backward_f32_warp(NormBackwardParams<f32>) => backward::<f32, 4, W, false>;
    RMSNORM_BACKWARD_F32_BLOCK = rmsnorm_backward_f32_block(NormBackwardParams<f32>) => backward::<f32, 4, B, false>;
    RMSNORM_BACKWARD_F16_WARP = rmsnorm_backward_f16_warp(NormBackwardParams<F16>) => backward::<F16, 8, W, false>;
    RMSNORM_BACKWARD_F16_BLOCK = rmsnorm_backward_f16_block(NormBackwardParams<F16>) => backward::<F16, 8, B, false>;
    RMSNORM_BACKWARD_BF16_WARP = rmsnorm_backward_bf16_warp(NormBackwardParams<Bf16>) => backward::<Bf16, 8, W, false>;
    RMSNORM_BACKWARD_BF16_BLOCK = rmsnorm_backward_bf16_block(NormBackwardParams<Bf16>) => backward::<Bf16, 8, B, false>;
    COLUMN_SUM = column_sum_f32(ColumnSumParams) => column_sum;
}
