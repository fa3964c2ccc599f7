//! `softmax` and `log_softmax` over the last dimension.
//!
//! Numerics: the row max is subtracted before exponentiating, so huge magnitudes stay finite;
//! a fully masked row (all -inf) gives 0 (softmax) or -inf (log_softmax), never NaN; a NaN
//! anywhere in a row makes that row NaN and no other.
//!
//! # Thread mapping
//! The row engine's ([`crate::rows`]). Rows that fit the group's registers are read once:
//! max, then the sum of `e^(x - max)`, then the outputs, all from registers. Longer rows take
//! two passes: online (max, sum) statistics per thread, combined across the group, then a
//! second read that writes the outputs.
//!
//! # Safety
//! As in [`crate::rows`]; `y` has `rows * cols` elements.

use crate::device::reduce::{MaxNan, Reduce, SoftmaxStats, Sum};
use crate::device::{Element, Global, GlobalMut, math};
use crate::rows::{self, MAX_CACHE_CHUNKS, assign, cache_chunks, group_reduce, load_chunk, store_chunk};

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SoftmaxParams<T> {
    pub rows: u32,
    pub cols: u32,
    pub vectorized: u32,
    pub x: Global<T>,
    pub y: GlobalMut<T>,
}

/// The output for input `x` given the row's max `m`, `1/s` and `ln s`.
#[inline(always)]
fn out<const LOG: bool>(x: f32, m: f32, inv_s: f32, ln_s: f32) -> f32 {
    if m == f32::NEG_INFINITY {
        // Fully masked row: every probability is 0.
        return if LOG { f32::NEG_INFINITY } else { 0.0 };
    }
    if LOG { (x - m) - ln_s } else { math::exp_approx(x - m) * inv_s }
}

/// The body of every softmax kernel: `LOG` selects log_softmax.
#[inline(always)]
pub fn run<T: Element, const VEC: usize, const G: u32, const LOG: bool>(p: SoftmaxParams<T>) {
    let (mut row, stride, lane) = assign::<G>();
    let lane = lane as usize;
    let cols = p.cols as usize;
    let vectorized = p.vectorized != 0;
    let nchunks = rows::chunks(cols, VEC);
    let cache_n = const { cache_chunks(VEC) };
    let cached = nchunks <= G as usize * cache_n;
    while row < p.rows as usize {
        let base = row * cols;
        if cached {
            let mut cache = [[f32::NEG_INFINITY; VEC]; MAX_CACHE_CHUNKS];
            let mut m = f32::NEG_INFINITY;
            crate::for_each_cached_chunk!(j < cache_n => {
                let c = lane + j * G as usize;
                if c < nchunks {
                    cache[j] = load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, f32::NEG_INFINITY);
                    for &x in cache[j].iter() {
                        m = math::max_nan(m, x);
                    }
                }
            });
            let m = group_reduce::<MaxNan, G>(MaxNan(m)).0;
            let mut s = 0.0f32;
            if m != f32::NEG_INFINITY {
                crate::for_each_cached_chunk!(j < cache_n => {
                    for &x in cache[j].iter() {
                        s += math::exp_approx(x - m);
                    }
                });
            }
            let s = group_reduce::<Sum, G>(Sum(s)).0;
            let (inv_s, ln_s) = (1.0 / s, math::ln_approx(s));
            crate::for_each_cached_chunk!(j < cache_n => {
                let c = lane + j * G as usize;
                if c < nchunks {
                    let mut o = [0.0f32; VEC];
                    for k in 0..VEC {
                        o[k] = out::<LOG>(cache[j][k], m, inv_s, ln_s);
                    }
                    store_chunk::<T, VEC>(&p.y, base, cols, c, vectorized, o);
                }
            });
        } else {
            let mut st = SoftmaxStats::identity();
            let mut c = lane;
            while c < nchunks {
                let v = load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, f32::NEG_INFINITY);
                let mut cm = f32::NEG_INFINITY;
                for &x in v.iter() {
                    cm = math::max_nan(cm, x);
                }
                let mut cs = 0.0f32;
                if cm != f32::NEG_INFINITY {
                    for &x in v.iter() {
                        cs += math::exp_approx(x - cm);
                    }
                }
                st = st.combine(SoftmaxStats { m: cm, s: cs });
                c += G as usize;
            }
            let st = group_reduce::<SoftmaxStats, G>(st);
            let (inv_s, ln_s) = (1.0 / st.s, math::ln_approx(st.s));
            let mut c = lane;
            while c < nchunks {
                let v = load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, f32::NEG_INFINITY);
                let mut o = [0.0f32; VEC];
                for k in 0..VEC {
                    o[k] = out::<LOG>(v[k], st.m, inv_s, ln_s);
                }
                store_chunk::<T, VEC>(&p.y, base, cols, c, vectorized, o);
                c += G as usize;
            }
        }
        row += stride;
    }
}

type F16 = half::f16;
type Bf16 = half::bf16;
const W: u32 = crate::device::WARP_SIZE;
const B: u32 = rows::BLOCK_ROW_THREADS;

crate::kernels! {
    SOFTMAX_F32_WARP = softmax_f32_warp(SoftmaxParams<f32>) => run::<f32, 4, W, false>;
    SOFTMAX_F32_BLOCK = softmax_f32_block(SoftmaxParams<f32>) => run::<f32, 4, B, false>;
    SOFTMAX_F16_WARP = softmax_f16_warp(SoftmaxParams<F16>) => run::<F16, 8, W, false>;
    SOFTMAX_F16_BLOCK = softmax_f16_block(SoftmaxParams<F16>) => run::<F16, 8, B, false>;
    SOFTMAX_BF16_WARP = softmax_bf16_warp(SoftmaxParams<Bf16>) => run::<Bf16, 8, W, false>;
    SOFTMAX_BF16_BLOCK = softmax_bf16_block(SoftmaxParams<Bf16>) => run::<Bf16, 8, B, false>;
    LOG_SOFTMAX_F32_WARP = log_softmax_f32_warp(SoftmaxParams<f32>) => run::<f32, 4, W, true>;
    LOG_SOFTMAX_F32_BLOCK = log_softmax_f32_block(SoftmaxParams<f32>) => run::<f32, 4, B, true>;
    LOG_SOFTMAX_F16_WARP = log_softmax_f16_warp(SoftmaxParams<F16>) => run::<F16, 8, W, true>;
    LOG_SOFTMAX_F16_BLOCK = log_softmax_f16_block(SoftmaxParams<F16>) => run::<F16, 8, B, true>;
    LOG_SOFTMAX_BF16_WARP = log_softmax_bf16_warp(SoftmaxParams<Bf16>) => run::<Bf16, 8, W, true>;
    LOG_SOFTMAX_BF16_BLOCK = log_softmax_bf16_block(SoftmaxParams<Bf16>) => run::<Bf16, 8, B, true>;
}
