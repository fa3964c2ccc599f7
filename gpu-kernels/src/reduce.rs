//! Row reductions: `sum` (f32 result), `max` (NaN-propagating, result in the input type) and
//! `argmax` (first index of the maximum; NaN counts as the maximum, as in `torch.argmax`).
//!
//! # Thread mapping
//! The row engine's ([`crate::rows`]), each thread accumulating its chunks in registers
//! ([`rows::stream_row`]: four 16-byte loads in flight), then one group reduction. One pass
//! over the input, no caching needed. A block per row for long rows; short rows (the warp
//! kernels) take a group of 1 to 32 lanes each ([`rows::warp_row_lanes`]), so one warp
//! reduces several rows at a time.
//!
//! # Safety
//! As in [`crate::rows`]; the output for each op has `rows` elements.

use crate::device::reduce::{ArgMax, MaxNan, Reduce, Sum};
use crate::device::reduce::{warp_reduce, warp_reduce_groups};
use crate::device::thread::{block_idx_x, thread_idx_x};
use crate::device::{Element, Global, GlobalMut, WARP_SIZE};
use crate::rows::{self, BLOCK_ROW_THREADS, assign, group_reduce};

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ReduceParams<T> {
    pub rows: u32,
    pub cols: u32,
    pub vectorized: u32,
    pub x: Global<T>,
    /// `sum`'s output (f32, one per row); empty for the other ops.
    pub sum: GlobalMut<f32>,
    /// `max`'s output; empty for the other ops.
    pub max: GlobalMut<T>,
    /// `argmax`'s output; empty for the other ops.
    pub argmax: GlobalMut<u32>,
    /// Warp kernels only: threads per row ([`rows::warp_row_lanes`]: a power of two, 1 to
    /// 32); a warp reduces `32 / lanes` rows at a time.
    pub lanes: u32,
    /// Split strategy only: elements per segment, and per-(row, segment) partial states
    /// (3 words each) in scratch.
    pub segment: u32,
    pub partial: GlobalMut<u32>,
}

/// Which reduction a kernel computes.
pub trait RowReduction {
    type State: Reduce;
    fn element(v: f32, index: u32) -> Self::State;
    /// `s` with element `v` at `index` added, where `index` is above every index in `s` (each
    /// thread scans its elements in index order).
    #[inline(always)]
    fn push(s: Self::State, v: f32, index: u32) -> Self::State {
        s.combine(Self::element(v, index))
    }
    fn store<T: Element>(p: &ReduceParams<T>, row: usize, s: Self::State);
}

pub struct SumOp;
pub struct MaxOp;
pub struct ArgMaxOp;

impl RowReduction for SumOp {
    type State = Sum;
    #[inline(always)]
    fn element(v: f32, _: u32) -> Sum {
        Sum(v)
    }
    #[inline(always)]
    fn store<T: Element>(p: &ReduceParams<T>, row: usize, s: Sum) {
        p.sum.store(row, s.0)
    }
}

impl RowReduction for MaxOp {
    type State = MaxNan;
    #[inline(always)]
    fn element(v: f32, _: u32) -> MaxNan {
        MaxNan(v)
    }
    #[inline(always)]
    fn store<T: Element>(p: &ReduceParams<T>, row: usize, s: MaxNan) {
        p.max.store(row, T::from_f32(s.0))
    }
}

impl RowReduction for ArgMaxOp {
    type State = ArgMax;
    #[inline(always)]
    fn element(v: f32, index: u32) -> ArgMax {
        ArgMax { value: v, index }
    }
    /// The element's index is the larger, so it wins only over an empty state, or by being
    /// greater or NaN where `s` is not NaN: two compares instead of `combine`'s index ties and
    /// NaN cases, on every element (argmax ran at 0.37 of a copy where sum ran at 0.87, H200,
    /// 2026-12-04).
    #[inline(always)]
    fn push(s: ArgMax, v: f32, index: u32) -> ArgMax {
        #[allow(clippy::neg_cmp_op_on_partial_ord)] // `!(v <= m)`: greater, or NaN
        let wins = s.index == u32::MAX || (!s.value.is_nan() && !(v <= s.value));
        if wins { ArgMax { value: v, index } } else { s }
    }
    #[inline(always)]
    fn store<T: Element>(p: &ReduceParams<T>, row: usize, s: ArgMax) {
        p.argmax.store(row, s.index)
    }
}

/// The body of every reduction kernel: `VEC` elements per chunk, `G` threads per row (the
/// warp kernels: `p.lanes`, see [`run_warp`]).
#[inline(always)]
pub fn run<Op: RowReduction, T: Element, const VEC: usize, const G: u32>(p: ReduceParams<T>) {
    if G == WARP_SIZE {
        return run_warp::<Op, T, VEC>(p);
    }
    let (mut row, stride, lane) = assign::<G>();
    let cols = p.cols as usize;
    let vectorized = p.vectorized != 0;
    while row < p.rows as usize {
        let mut acc = <Op::State as Reduce>::identity();
        let g = rows::group_threads::<G>();
        rows::stream_row::<T, VEC>(&p.x, row * cols, cols, lane as usize, g, vectorized, |start, v, n| {
            for (k, &x) in v.iter().enumerate() {
                if k < n {
                    acc = Op::push(acc, x, (start + k) as u32);
                }
            }
        });
        let total = group_reduce::<Op::State, G>(acc);
        if lane == 0 {
            Op::store(&p, row, total);
        }
        row += stride;
    }
}

/// The warp kernels' body: groups of `p.lanes` threads per row, so a warp reduces
/// `32 / lanes` adjacent rows at a time ([`rows::RowWalk`]: the group reduction's shuffles
/// need the whole warp; a group past the last row loads nothing and stores nothing).
#[inline(always)]
fn run_warp<Op: RowReduction, T: Element, const VEC: usize>(p: ReduceParams<T>) {
    let mut w = rows::RowWalk::new::<WARP_SIZE>(p.lanes);
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let vectorized = p.vectorized != 0;
    while w.more(rows) {
        let row = w.row;
        let mut acc = <Op::State as Reduce>::identity();
        rows::stream_row::<T, VEC>(&p.x, row * cols, w.cols(rows, cols), w.lane, w.g, vectorized, |start, v, n| {
            for (k, &x) in v.iter().enumerate() {
                if k < n {
                    acc = Op::push(acc, x, (start + k) as u32);
                }
            }
        });
        let total = warp_reduce_groups(acc, w.g as u32);
        if w.lane == 0 && w.live(rows) {
            Op::store(&p, row, total);
        }
        w.next();
    }
}

/// Split strategy, first launch: one block reduces one segment of one row into its partial
/// state (`partial[(row * segments + segment) * 3 ..]`).
#[inline(always)]
pub fn split_partial<Op: RowReduction, T: Element, const VEC: usize>(p: ReduceParams<T>) {
    let cols = p.cols as usize;
    let (row, seg, segments, start, len) = rows::split_segment(cols, p.segment as usize);
    let vectorized = p.vectorized != 0;
    let tid = thread_idx_x() as usize;
    let mut acc = <Op::State as Reduce>::identity();
    rows::stream_row::<T, VEC>(
        &p.x,
        row * cols + start,
        len,
        tid,
        BLOCK_ROW_THREADS as usize,
        vectorized,
        |first, v, n| {
            for (k, &x) in v.iter().enumerate() {
                if k < n {
                    acc = Op::push(acc, x, (start + first + k) as u32);
                }
            }
        },
    );
    let total = group_reduce::<Op::State, { BLOCK_ROW_THREADS }>(acc);
    if tid == 0 {
        let w = total.to_words();
        for (i, &word) in w.iter().enumerate() {
            p.partial.store((row * segments + seg) * 3 + i, word);
        }
    }
}

/// Split strategy, second launch: one warp per row combines the row's partial states in a
/// fixed order (deterministic) and stores the result.
#[inline(always)]
pub fn split_final<Op: RowReduction, T: Element>(p: ReduceParams<T>) {
    let row = block_idx_x() as usize;
    let lane = thread_idx_x() as usize;
    let segments = rows::chunks(p.cols as usize, p.segment as usize);
    let mut acc = <Op::State as Reduce>::identity();
    let mut s = lane;
    while s < segments {
        let base = (row * segments + s) * 3;
        acc = acc.combine(<Op::State as Reduce>::from_words([
            p.partial.load(base),
            p.partial.load(base + 1),
            p.partial.load(base + 2),
        ]));
        s += WARP_SIZE as usize;
    }
    let total = warp_reduce(acc);
    if lane == 0 {
        Op::store(&p, row, total);
    }
}

type F16 = half::f16;
type Bf16 = half::bf16;
const W: u32 = crate::device::WARP_SIZE;
const B: u32 = rows::BLOCK_ROW_THREADS;
const S: u32 = rows::BLOCK_GROUP;

crate::kernels! {
    SUM_F32_WARP = sum_f32_warp(ReduceParams<f32>) => run::<SumOp, f32, 4, W>;
    SUM_F32_BLOCK = sum_f32_block(ReduceParams<f32>) => run::<SumOp, f32, 4, B>;
    SUM_F32_BLOCK_SMALL = sum_f32_block_small(ReduceParams<f32>) => run::<SumOp, f32, 4, S>;
    SUM_F16_WARP = sum_f16_warp(ReduceParams<F16>) => run::<SumOp, F16, 8, W>;
    SUM_F16_BLOCK = sum_f16_block(ReduceParams<F16>) => run::<SumOp, F16, 8, B>;
    SUM_F16_BLOCK_SMALL = sum_f16_block_small(ReduceParams<F16>) => run::<SumOp, F16, 8, S>;
    SUM_BF16_WARP = sum_bf16_warp(ReduceParams<Bf16>) => run::<SumOp, Bf16, 8, W>;
    SUM_BF16_BLOCK = sum_bf16_block(ReduceParams<Bf16>) => run::<SumOp, Bf16, 8, B>;
    SUM_BF16_BLOCK_SMALL = sum_bf16_block_small(ReduceParams<Bf16>) => run::<SumOp, Bf16, 8, S>;
    MAX_F32_WARP = max_f32_warp(ReduceParams<f32>) => run::<MaxOp, f32, 4, W>;
    MAX_F32_BLOCK = max_f32_block(ReduceParams<f32>) => run::<MaxOp, f32, 4, B>;
    MAX_F32_BLOCK_SMALL = max_f32_block_small(ReduceParams<f32>) => run::<MaxOp, f32, 4, S>;
    MAX_F16_WARP = max_f16_warp(ReduceParams<F16>) => run::<MaxOp, F16, 8, W>;
    MAX_F16_BLOCK = max_f16_block(ReduceParams<F16>) => run::<MaxOp, F16, 8, B>;
    MAX_F16_BLOCK_SMALL = max_f16_block_small(ReduceParams<F16>) => run::<MaxOp, F16, 8, S>;
    MAX_BF16_WARP = max_bf16_warp(ReduceParams<Bf16>) => run::<MaxOp, Bf16, 8, W>;
    MAX_BF16_BLOCK = max_bf16_block(ReduceParams<Bf16>) => run::<MaxOp, Bf16, 8, B>;
    MAX_BF16_BLOCK_SMALL = max_bf16_block_small(ReduceParams<Bf16>) => run::<MaxOp, Bf16, 8, S>;
    ARGMAX_F32_WARP = argmax_f32_warp(ReduceParams<f32>) => run::<ArgMaxOp, f32, 4, W>;
    ARGMAX_F32_BLOCK = argmax_f32_block(ReduceParams<f32>) => run::<ArgMaxOp, f32, 4, B>;
    ARGMAX_F32_BLOCK_SMALL = argmax_f32_block_small(ReduceParams<f32>) => run::<ArgMaxOp, f32, 4, S>;
    ARGMAX_F16_WARP = argmax_f16_warp(ReduceParams<F16>) => run::<ArgMaxOp, F16, 8, W>;
    ARGMAX_F16_BLOCK = argmax_f16_block(ReduceParams<F16>) => run::<ArgMaxOp, F16, 8, B>;
    ARGMAX_F16_BLOCK_SMALL = argmax_f16_block_small(ReduceParams<F16>) => run::<ArgMaxOp, F16, 8, S>;
    ARGMAX_BF16_WARP = argmax_bf16_warp(ReduceParams<Bf16>) => run::<ArgMaxOp, Bf16, 8, W>;
    ARGMAX_BF16_BLOCK = argmax_bf16_block(ReduceParams<Bf16>) => run::<ArgMaxOp, Bf16, 8, B>;
    ARGMAX_BF16_BLOCK_SMALL = argmax_bf16_block_small(ReduceParams<Bf16>) => run::<ArgMaxOp, Bf16, 8, S>;
    SUM_F32_SPLIT = sum_f32_split(ReduceParams<f32>) => split_partial::<SumOp, f32, 4>;
    SUM_F16_SPLIT = sum_f16_split(ReduceParams<F16>) => split_partial::<SumOp, F16, 8>;
    SUM_BF16_SPLIT = sum_bf16_split(ReduceParams<Bf16>) => split_partial::<SumOp, Bf16, 8>;
    MAX_F32_SPLIT = max_f32_split(ReduceParams<f32>) => split_partial::<MaxOp, f32, 4>;
    MAX_F16_SPLIT = max_f16_split(ReduceParams<F16>) => split_partial::<MaxOp, F16, 8>;
    MAX_BF16_SPLIT = max_bf16_split(ReduceParams<Bf16>) => split_partial::<MaxOp, Bf16, 8>;
    ARGMAX_F32_SPLIT = argmax_f32_split(ReduceParams<f32>) => split_partial::<ArgMaxOp, f32, 4>;
    ARGMAX_F16_SPLIT = argmax_f16_split(ReduceParams<F16>) => split_partial::<ArgMaxOp, F16, 8>;
    ARGMAX_BF16_SPLIT = argmax_bf16_split(ReduceParams<Bf16>) => split_partial::<ArgMaxOp, Bf16, 8>;
    SUM_F32_SPLIT_FINAL = sum_f32_split_final(ReduceParams<f32>) => split_final::<SumOp, f32>;
    SUM_F16_SPLIT_FINAL = sum_f16_split_final(ReduceParams<F16>) => split_final::<SumOp, F16>;
    SUM_BF16_SPLIT_FINAL = sum_bf16_split_final(ReduceParams<Bf16>) => split_final::<SumOp, Bf16>;
    MAX_F32_SPLIT_FINAL = max_f32_split_final(ReduceParams<f32>) => split_final::<MaxOp, f32>;
    MAX_F16_SPLIT_FINAL = max_f16_split_final(ReduceParams<F16>) => split_final::<MaxOp, F16>;
    MAX_BF16_SPLIT_FINAL = max_bf16_split_final(ReduceParams<Bf16>) => split_final::<MaxOp, Bf16>;
    ARGMAX_F32_SPLIT_FINAL = argmax_f32_split_final(ReduceParams<f32>) => split_final::<ArgMaxOp, f32>;
    ARGMAX_F16_SPLIT_FINAL = argmax_f16_split_final(ReduceParams<F16>) => split_final::<ArgMaxOp, F16>;
    ARGMAX_BF16_SPLIT_FINAL = argmax_bf16_split_final(ReduceParams<Bf16>) => split_final::<ArgMaxOp, Bf16>;
}

#[cfg(test)]
mod tests {
    use super::{ArgMaxOp, RowReduction};
    use crate::device::reduce::{ArgMax, Reduce};

    /// `push` over a scan in index order gives what folding `combine` gives, on rows built
    /// from values that tie, NaN, infinities and signed zeros: every sequence of length 0..=5.
    #[test]
    fn argmax_push_agrees_with_combine() {
        let values = [f32::NEG_INFINITY, -1.0, -0.0, 0.0, 2.0, f32::INFINITY, f32::NAN];
        let mut rows: Vec<Vec<f32>> = Vec::new();
        for len in 0..=5u32 {
            for code in 0..values.len().pow(len) {
                let digits = (0..len as usize).map(|d| code / values.len().pow(d as u32) % values.len());
                rows.push(digits.map(|i| values[i]).collect());
            }
        }
        let mut checked = 0;
        for row in &rows {
            let pushed = row.iter().enumerate().fold(ArgMax::identity(), |s, (i, &v)| ArgMaxOp::push(s, v, i as u32));
            let combined =
                row.iter().enumerate().fold(ArgMax::identity(), |s, (i, &v)| s.combine(ArgMaxOp::element(v, i as u32)));
            assert_eq!(pushed.index, combined.index, "{row:?}");
            checked += 1;
        }
        assert_eq!(checked, (0..=5).map(|l| 7usize.pow(l)).sum::<usize>());
    }
}
