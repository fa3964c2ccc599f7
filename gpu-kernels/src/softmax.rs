//! `softmax` and `log_softmax` over the last dimension, and the fused `cross_entropy`
//! (loss and gradient w.r.t. the logits) built on the same row statistics.
//!
//! Numerics: the row max is subtracted before exponentiating, so huge magnitudes stay finite;
//! a fully masked row (all -inf) gives 0 (softmax) or -inf (log_softmax), never NaN; a NaN
//! anywhere in a row makes that row NaN and no other.
//!
//! # Thread mapping
//! The row engine's ([`crate::rows`]). Rows that fit the group's registers are read once:
//! each thread takes the max of its values, then their sum of `e^(x - max)`, one group
//! reduction combines those (max, sum) pairs, and the outputs are written from registers.
//! Longer rows on the shared strategy are read once into shared memory and take the same
//! passes from there. Rows longer than that stream in two passes: online (max, sum)
//! statistics per thread, combined across the group, then a second read that writes the
//! outputs. The split
//! strategy computes per-segment statistics in one launch and combines them in a fixed order
//! in the second, which writes the outputs (softmax) or the loss and gradient
//! (cross_entropy).
//!
//! # Safety
//! As in [`crate::rows`]; `y` has `rows * cols` elements.

use crate::device::reduce::{Reduce, SoftmaxStats, Sum, warp_fold};
use crate::device::thread::{block_idx_x, block_idx_y, thread_idx_x};
use crate::device::{Element, Global, GlobalMut, math};
use crate::rows::{
    self, BLOCK_ROW_THREADS, MAX_CACHE_CHUNKS, RowWalk, assign, cache_chunks, fill_shared, group_reduce, load_chunk,
    load_raw_chunk, narrow, store_chunk, visit_shared, walk_reduce, widen,
};

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SoftmaxParams<T> {
    pub rows: u32,
    pub cols: u32,
    pub vectorized: u32,
    /// Warp kernels only: threads per row ([`rows::warp_row_lanes`], a power of two from 1
    /// to 32; see [`rows::RowWalk`]).
    pub lanes: u32,
    pub x: Global<T>,
    pub y: GlobalMut<T>,
    /// Split strategy only: elements per segment, and per-(row, segment) (max, sum) pairs
    /// in scratch.
    pub segment: u32,
    pub partial: GlobalMut<u32>,
    /// Block kernels only: nonzero when the launch has the shared row cache
    /// ([`rows::RowStrategy::Shared`]), for rows past the register cache.
    pub shared: u32,
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

/// Where a row's values are kept between passes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    Registers,
    Shared,
    /// Nowhere: read memory again.
    Stream,
}

/// Where a row's values come from on their last pass: the register cache, the shared row
/// cache, or memory again.
pub struct RowPass<T, const VEC: usize> {
    /// The thread's values in registers ([`Keep::Registers`]), in the storage type
    /// ([`rows::ROW_CACHE_BYTES`]): `x`, or for f32 after `stats::<_, true>` `e^(x - own_max)`
    /// ([`RowPass::KEEPS_EXPS`]).
    cache: [[T; VEC]; MAX_CACHE_CHUNKS],
    /// The max of this thread's values.
    own_max: f32,
    keep: Keep,
    lane: usize,
    /// Threads in the row's group.
    g: usize,
    base: usize,
    cols: usize,
    nchunks: usize,
    vectorized: bool,
    _t: core::marker::PhantomData<T>,
}

impl<T: Element, const VEC: usize> RowPass<T, VEC> {
    /// Whether the register cache holds `e^(x - own_max)` exactly: f32 storage. A 16-bit
    /// cache would round the terms to the storage type before they are scaled and rounded
    /// again, so 16-bit rows keep `x` and take the exponential again when they write.
    const KEEPS_EXPS: bool = core::mem::size_of::<T>() == 4;

    /// Reads the row starting at `base` and returns it with its softmax statistics
    /// `(max, sum of e^(x - max))` over the `g` threads of the row's group. Rows that fit are
    /// read once into registers, or (`shared`, block kernels) into the shared row cache;
    /// longer rows are read once here, a chunk at a time. Each thread takes the statistics of
    /// its own values (its max, then its sum against that max), and one group reduction of
    /// [`SoftmaxStats`] rescales and adds them: a block pays one reduction per row where the
    /// row max and the row sum took two (two barriers each, between the loads and the first
    /// store; rmsnorm, with one, ran at 0.73 of a copy where softmax ran at 0.45, H200,
    /// 2026-12-04, 32768 x 4096 f32).
    ///
    /// With `EXPS`, an f32 row in registers keeps `e^(x - own max)` in place of `x`, the
    /// terms of the thread's sum, so that [`RowPass::probabilities`] scales them instead of
    /// taking a second exponential per element.
    #[inline(always)]
    #[track_caller]
    pub fn stats<const G: u32, const EXPS: bool>(
        x: &Global<T>,
        base: usize,
        cols: usize,
        lane: usize,
        g: usize,
        vectorized: bool,
        shared: bool,
    ) -> (Self, f32, f32) {
        let nchunks = rows::chunks(cols, VEC);
        let keep = if nchunks <= g * MAX_CACHE_CHUNKS {
            Keep::Registers
        } else if G != crate::device::WARP_SIZE && shared {
            Keep::Shared
        } else {
            Keep::Stream
        };
        let mut pass = RowPass {
            cache: [[T::from_f32(f32::NEG_INFINITY); VEC]; MAX_CACHE_CHUNKS],
            own_max: f32::NEG_INFINITY,
            keep,
            lane,
            g,
            base,
            cols,
            nchunks,
            vectorized,
            _t: core::marker::PhantomData,
        };
        let mine = if keep == Keep::Shared {
            let mut m = f32::NEG_INFINITY;
            fill_shared::<T, VEC, G>(x, base, cols, lane, vectorized, f32::NEG_INFINITY, |_, v| {
                for &e in v.iter() {
                    m = math::max_nan(m, e);
                }
            });
            let mut s = 0.0f32;
            if m != f32::NEG_INFINITY {
                visit_shared::<T, VEC, G>(cols, lane, |_, v| {
                    for &e in v.iter() {
                        s += math::exp_approx(e - m);
                    }
                });
            }
            SoftmaxStats { m, s }
        } else if keep == Keep::Registers {
            let mut m = f32::NEG_INFINITY;
            let fill = T::from_f32(f32::NEG_INFINITY);
            crate::for_each_cached_chunk!(j < MAX_CACHE_CHUNKS => {
                let c = lane + j * g;
                if c < nchunks {
                    pass.cache[j] = load_raw_chunk::<T, VEC>(x, base, cols, c, vectorized, fill);
                    for v in widen(pass.cache[j]) {
                        m = math::max_nan(m, v);
                    }
                }
            });
            let mut s = 0.0f32;
            if m != f32::NEG_INFINITY {
                crate::for_each_cached_chunk!(j < MAX_CACHE_CHUNKS => {
                    let mut v = widen(pass.cache[j]);
                    for e in v.iter_mut() {
                        *e = math::exp_approx(*e - m);
                        s += *e;
                    }
                    if EXPS && Self::KEEPS_EXPS {
                        pass.cache[j] = narrow(v);
                    }
                });
            } else if EXPS && Self::KEEPS_EXPS {
                pass.cache = [[T::from_f32(0.0); VEC]; MAX_CACHE_CHUNKS];
            }
            pass.own_max = m;
            SoftmaxStats { m, s }
        } else {
            let mut st = SoftmaxStats::identity();
            let mut c = lane;
            while c < nchunks {
                let v = load_chunk::<T, VEC>(x, base, cols, c, vectorized, f32::NEG_INFINITY);
                let mut cm = f32::NEG_INFINITY;
                for &e in v.iter() {
                    cm = math::max_nan(cm, e);
                }
                let mut cs = 0.0f32;
                if cm != f32::NEG_INFINITY {
                    for &e in v.iter() {
                        cs += math::exp_approx(e - cm);
                    }
                }
                st = st.combine(SoftmaxStats { m: cm, s: cs });
                c += g;
            }
            st
        };
        let st = walk_reduce::<SoftmaxStats, G>(mine, g);
        (pass, st.m, st.s)
    }

    /// Calls `f(chunk, values)` for each of this thread's chunks, from the cache when the row
    /// was cached, else re-reading `x`.
    #[inline(always)]
    #[track_caller]
    pub fn visit<const G: u32>(&self, x: &Global<T>, mut f: impl FnMut(usize, [f32; VEC])) {
        if self.keep == Keep::Shared {
            visit_shared::<T, VEC, G>(self.cols, self.lane, f);
        } else if self.keep == Keep::Registers {
            crate::for_each_cached_chunk!(j < MAX_CACHE_CHUNKS => {
                let c = self.lane + j * self.g;
                if c < self.nchunks {
                    f(c, widen(self.cache[j]));
                }
            });
        } else {
            let mut c = self.lane;
            while c < self.nchunks {
                f(c, load_chunk::<T, VEC>(x, self.base, self.cols, c, self.vectorized, f32::NEG_INFINITY));
                c += self.g;
            }
        }
    }

    /// Calls `f(chunk, probabilities)` for each of this thread's chunks, given the row's
    /// statistics `m`, `s` from [`RowPass::stats`]: a fully masked row (`m = -inf`) gives 0,
    /// a NaN in the row NaN. `EXPS` as given to `stats`: from the cached exponentials of an
    /// f32 row in registers (one exponential per thread here), else `e^(x - m) / s` per
    /// element.
    #[inline(always)]
    #[track_caller]
    pub fn probabilities<const G: u32, const EXPS: bool>(
        &self,
        x: &Global<T>,
        m: f32,
        s: f32,
        mut f: impl FnMut(usize, [f32; VEC]),
    ) {
        let inv_s = 1.0 / s;
        if EXPS && Self::KEEPS_EXPS && self.keep == Keep::Registers {
            // The thread's terms e^(x - own max), rescaled to the row's max. A thread whose
            // values are all -inf holds zeros (and e^(-inf - m) would be NaN for m = -inf).
            let scale =
                if self.own_max == f32::NEG_INFINITY { 0.0 } else { math::exp_approx(self.own_max - m) * inv_s };
            self.visit::<G>(x, |c, e| {
                let mut o = [0.0f32; VEC];
                for k in 0..VEC {
                    o[k] = e[k] * scale;
                }
                f(c, o);
            });
        } else {
            self.visit::<G>(x, |c, v| {
                let mut o = [0.0f32; VEC];
                for k in 0..VEC {
                    o[k] = out::<false>(v[k], m, inv_s, 0.0);
                }
                f(c, o);
            });
        }
    }
}

/// The body of every softmax kernel: `LOG` selects log_softmax.
#[inline(always)]
pub fn run<T: Element, const VEC: usize, const G: u32, const LOG: bool>(p: SoftmaxParams<T>) {
    let mut w = RowWalk::new::<G>(p.lanes);
    let rows = p.rows as usize;
    let vectorized = p.vectorized != 0;
    while w.more(rows) {
        let live = w.live(rows);
        let cols = p.cols as usize;
        let base = if live { w.row } else { rows - 1 } * cols;
        let (lane, g, shared) = (w.lane, w.g, p.shared != 0);
        if LOG {
            let (pass, m, s) = RowPass::<T, VEC>::stats::<G, false>(&p.x, base, cols, lane, g, vectorized, shared);
            let ln_s = math::ln_approx(s);
            pass.visit::<G>(&p.x, |c, v| {
                let mut o = [0.0f32; VEC];
                for k in 0..VEC {
                    o[k] = out::<true>(v[k], m, 0.0, ln_s);
                }
                if live {
                    store_chunk::<T, VEC>(&p.y, base, cols, c, vectorized, o);
                }
            });
        } else {
            let (pass, m, s) = RowPass::<T, VEC>::stats::<G, true>(&p.x, base, cols, lane, g, vectorized, shared);
            pass.probabilities::<G, true>(&p.x, m, s, |c, o| {
                if live {
                    store_chunk::<T, VEC>(&p.y, base, cols, c, vectorized, o)
                }
            });
        }
        w.next();
    }
}

/// Split strategy, first launch: one block computes the (max, sum) statistics of one
/// segment of one row into `partial[(row * segments + segment) * 2 ..]`.
#[inline(always)]
pub fn split_stats<T: Element, const VEC: usize>(p: SoftmaxParams<T>) {
    let cols = p.cols as usize;
    let (row, seg, segments, start, len) = rows::split_segment(cols, p.segment as usize);
    let tid = thread_idx_x() as usize;
    let (_, m, s) = RowPass::<T, VEC>::stats::<{ BLOCK_ROW_THREADS }, false>(
        &p.x,
        row * cols + start,
        len,
        tid,
        BLOCK_ROW_THREADS as usize,
        p.vectorized != 0,
        false,
    );
    if tid == 0 {
        p.partial.store((row * segments + seg) * 2, m.to_bits());
        p.partial.store((row * segments + seg) * 2 + 1, s.to_bits());
    }
}

/// Split strategy, second launch: every warp combines the row's segment statistics in the
/// same fixed order (so all agree, bit for bit), then the block writes its segment's outputs.
#[inline(always)]
pub fn split_apply<T: Element, const VEC: usize, const LOG: bool>(p: SoftmaxParams<T>) {
    let cols = p.cols as usize;
    let (row, _, segments, start, len) = rows::split_segment(cols, p.segment as usize);
    let st = split_combine(&p.partial.as_global(), row, segments);
    let (inv_s, ln_s) = (1.0 / st.s, math::ln_approx(st.s));
    let base = row * cols + start;
    let vectorized = p.vectorized != 0;
    let mut c = thread_idx_x() as usize;
    while c < rows::chunks(len, VEC) {
        let v = load_chunk::<T, VEC>(&p.x, base, len, c, vectorized, f32::NEG_INFINITY);
        let mut o = [0.0f32; VEC];
        for k in 0..VEC {
            o[k] = out::<LOG>(v[k], st.m, inv_s, ln_s);
        }
        store_chunk::<T, VEC>(&p.y, base, len, c, vectorized, o);
        c += BLOCK_ROW_THREADS as usize;
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CrossEntropyParams<T> {
    pub rows: u32,
    pub cols: u32,
    pub vectorized: u32,
    /// Warp kernels only: threads per row, as [`SoftmaxParams::lanes`].
    pub lanes: u32,
    /// Nonzero: rows whose target equals `ignore_index` get loss 0 and gradient 0.
    pub has_ignore: u32,
    pub ignore_index: i32,
    /// Nonzero: write `dlogits`.
    pub write_grad: u32,
    /// Multiplies the gradient (e.g. 1 / number of rows for a mean loss).
    pub grad_scale: f32,
    pub logits: Global<T>,
    pub targets: Global<i32>,
    pub loss: GlobalMut<f32>,
    pub dlogits: GlobalMut<T>,
    /// Block kernels only: nonzero when the launch has the shared row cache.
    pub shared: u32,
    /// Split strategy only: elements per segment, and the per-(row, segment) (max, sum)
    /// pairs the first launch (softmax's `split_stats` over the logits) left in scratch.
    pub segment: u32,
    pub partial: Global<u32>,
}

/// Fused cross-entropy: per row, `loss = logsumexp(x) - x[target]` and
/// `dlogits = (softmax(x) - onehot(target)) * grad_scale`, from one read of the row when it
/// fits in registers. An ignored row gets 0 and 0; a target outside `0..cols` (the launcher
/// refuses those) gives a NaN loss rather than an out-of-bounds read.
#[inline(always)]
pub fn cross_entropy<T: Element, const VEC: usize, const G: u32>(p: CrossEntropyParams<T>) {
    let mut w = RowWalk::new::<G>(p.lanes);
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let vectorized = p.vectorized != 0;
    while w.more(rows) {
        let live = w.live(rows);
        // A group past the last row reads the last row again and writes nothing.
        let row = if live { w.row } else { rows - 1 };
        let base = row * cols;
        let t = p.targets.load(row);
        let ignored = p.has_ignore != 0 && t == p.ignore_index;
        let valid = !ignored && t >= 0 && (t as usize) < cols;
        let shared = p.shared != 0;
        let (pass, m, s) = RowPass::<T, VEC>::stats::<G, true>(&p.logits, base, cols, w.lane, w.g, vectorized, shared);
        let ln_s = math::ln_approx(s);
        if w.lane == 0 && live {
            let loss = if ignored {
                0.0
            } else if !valid {
                f32::NAN
            } else if m == f32::NEG_INFINITY {
                f32::INFINITY
            } else {
                (m + ln_s) - p.logits.load(base + t as usize).to_f32()
            };
            p.loss.store(row, loss);
        }
        if p.write_grad != 0 {
            pass.probabilities::<G, true>(&p.logits, m, s, |c, prob| {
                let mut o = [0.0f32; VEC];
                for k in 0..VEC {
                    let hit = valid && c * VEC + k == t as usize;
                    o[k] = if ignored { 0.0 } else { (prob[k] - hit as u32 as f32) * p.grad_scale };
                }
                if live {
                    store_chunk::<T, VEC>(&p.dlogits, base, cols, c, vectorized, o);
                }
            });
        }
        w.next();
    }
}

/// The row's statistics from the split strategy's per-segment pairs, folded by each warp
/// ([`warp_fold`]: every thread of every block of the row gets the same bits).
#[inline(always)]
#[track_caller]
fn split_combine(partial: &Global<u32>, row: usize, segments: usize) -> SoftmaxStats {
    warp_fold(segments, |s| {
        let at = (row * segments + s) * 2;
        SoftmaxStats { m: f32::from_bits(partial.load(at)), s: f32::from_bits(partial.load(at + 1)) }
    })
}

/// Cross-entropy's split strategy, second launch (the first is softmax's [`split_stats`] over
/// the logits): block `(segment, row)` combines the row's segment statistics, block 0 of the
/// row writes the loss, and with `write_grad` each block writes its segment of the gradient.
/// Without the gradient the launch has one block per row. Ignored rows and bad targets as
/// [`cross_entropy`].
#[inline(always)]
pub fn cross_entropy_split_apply<T: Element, const VEC: usize>(p: CrossEntropyParams<T>) {
    let cols = p.cols as usize;
    let segment = p.segment as usize;
    let (seg, row) = (block_idx_x() as usize, block_idx_y() as usize);
    let segments = cols.div_ceil(segment);
    let st = split_combine(&p.partial, row, segments);
    let (m, s) = (st.m, st.s);
    let (inv_s, ln_s) = (1.0 / s, math::ln_approx(s));
    let t = p.targets.load(row);
    let ignored = p.has_ignore != 0 && t == p.ignore_index;
    let valid = !ignored && t >= 0 && (t as usize) < cols;
    let tid = thread_idx_x() as usize;
    if seg == 0 && tid == 0 {
        let loss = if ignored {
            0.0
        } else if !valid {
            f32::NAN
        } else if m == f32::NEG_INFINITY {
            f32::INFINITY
        } else {
            (m + ln_s) - p.logits.load(row * cols + t as usize).to_f32()
        };
        p.loss.store(row, loss);
    }
    if p.write_grad == 0 {
        return;
    }
    let start = seg * segment;
    let len = segment.min(cols - start);
    let base = row * cols + start;
    let vectorized = p.vectorized != 0;
    let mut c = tid;
    while c < rows::chunks(len, VEC) {
        let v = load_chunk::<T, VEC>(&p.logits, base, len, c, vectorized, f32::NEG_INFINITY);
        let mut o = [0.0f32; VEC];
        for k in 0..VEC {
            let hit = valid && start + c * VEC + k == t as usize;
            o[k] = if ignored { 0.0 } else { (out::<false>(v[k], m, inv_s, ln_s) - hit as u32 as f32) * p.grad_scale };
        }
        store_chunk::<T, VEC>(&p.dlogits, base, len, c, vectorized, o);
        c += BLOCK_ROW_THREADS as usize;
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SoftmaxBackwardParams<T> {
    pub rows: u32,
    pub cols: u32,
    pub vectorized: u32,
    /// The forward's output (softmax probabilities, or log-probabilities for `LOG`).
    pub y: Global<T>,
    pub dy: Global<T>,
    pub dx: GlobalMut<T>,
}

/// Backward of softmax (`dx = y (dy - sum(dy y))`) and of log_softmax
/// (`dx = dy - e^y sum(dy)`), from the forward's output: one row reduction, then the
/// elementwise formula. Rows that fit the group's registers are read once
/// ([`backward_cached`]); longer rows take two passes over `y` and `dy` (the second mostly
/// from L2).
#[inline(always)]
pub fn backward<T: Element, const VEC: usize, const G: u32, const LOG: bool>(p: SoftmaxBackwardParams<T>) {
    let (mut row, stride, lane) = assign::<G>();
    let cols = p.cols as usize;
    let vectorized = p.vectorized != 0;
    let nchunks = rows::chunks(cols, VEC);
    if nchunks <= rows::group_threads::<G>() * const { cache_chunks(VEC) } {
        backward_cached::<T, VEC, G, LOG>(&p, row, stride, lane as usize);
        return;
    }
    while row < p.rows as usize {
        let base = row * cols;
        let mut s = 0.0f32;
        let mut c = lane as usize;
        while c < nchunks {
            let dy = load_chunk::<T, VEC>(&p.dy, base, cols, c, vectorized, 0.0);
            if LOG {
                for v in dy {
                    s += v;
                }
            } else {
                let y = load_chunk::<T, VEC>(&p.y, base, cols, c, vectorized, 0.0);
                for k in 0..VEC {
                    s = math::fma(dy[k], y[k], s);
                }
            }
            c += rows::group_threads::<G>();
        }
        let s = group_reduce::<Sum, G>(Sum(s)).0;
        let mut c = lane as usize;
        while c < nchunks {
            let dy = load_chunk::<T, VEC>(&p.dy, base, cols, c, vectorized, 0.0);
            let y = load_chunk::<T, VEC>(&p.y, base, cols, c, vectorized, 0.0);
            let mut dx = [0.0f32; VEC];
            for k in 0..VEC {
                dx[k] = if LOG { dy[k] - math::exp_approx(y[k]) * s } else { y[k] * (dy[k] - s) };
            }
            store_chunk::<T, VEC>(&p.dx, base, cols, c, vectorized, dx);
            c += rows::group_threads::<G>();
        }
        row += stride;
    }
}

/// [`backward`] for rows of at most `G * CACHE_VALUES` columns: each thread keeps its chunks
/// of `y` and `dy` in registers between the reduction and the formula.
#[inline(always)]
fn backward_cached<T: Element, const VEC: usize, const G: u32, const LOG: bool>(
    p: &SoftmaxBackwardParams<T>,
    mut row: usize,
    stride: usize,
    lane: usize,
) {
    let cols = p.cols as usize;
    let vectorized = p.vectorized != 0;
    let nchunks = rows::chunks(cols, VEC);
    let cache_n = const { cache_chunks(VEC) };
    while row < p.rows as usize {
        let base = row * cols;
        let mut y = [[0.0f32; VEC]; MAX_CACHE_CHUNKS];
        let mut dy = [[0.0f32; VEC]; MAX_CACHE_CHUNKS];
        let mut s = 0.0f32;
        crate::for_each_cached_chunk!(j < cache_n => {
            let c = lane + j * rows::group_threads::<G>();
            if c < nchunks {
                dy[j] = load_chunk::<T, VEC>(&p.dy, base, cols, c, vectorized, 0.0);
                y[j] = load_chunk::<T, VEC>(&p.y, base, cols, c, vectorized, 0.0);
                for k in 0..VEC {
                    s = if LOG { s + dy[j][k] } else { math::fma(dy[j][k], y[j][k], s) };
                }
            }
        });
        let s = group_reduce::<Sum, G>(Sum(s)).0;
        crate::for_each_cached_chunk!(j < cache_n => {
            let c = lane + j * rows::group_threads::<G>();
            if c < nchunks {
                let mut dx = [0.0f32; VEC];
                for k in 0..VEC {
                    let (y, dy) = (y[j][k], dy[j][k]);
                    dx[k] = if LOG { dy - math::exp_approx(y) * s } else { y * (dy - s) };
                }
                store_chunk::<T, VEC>(&p.dx, base, cols, c, vectorized, dx);
            }
        });
        row += stride;
    }
}

type F16 = half::f16;
type Bf16 = half::bf16;
const W: u32 = crate::device::WARP_SIZE;
const B: u32 = rows::BLOCK_ROW_THREADS;
const S: u32 = rows::BLOCK_GROUP;

crate::kernels! {
    SOFTMAX_F32_WARP = softmax_f32_warp(SoftmaxParams<f32>) => run::<f32, 4, W, false>;
    SOFTMAX_F32_BLOCK = softmax_f32_block(SoftmaxParams<f32>) => run::<f32, 4, B, false>;
    SOFTMAX_F32_BLOCK_SMALL = softmax_f32_block_small(SoftmaxParams<f32>) => run::<f32, 4, S, false>;
    SOFTMAX_F16_WARP = softmax_f16_warp(SoftmaxParams<F16>) => run::<F16, 8, W, false>;
    SOFTMAX_F16_BLOCK = softmax_f16_block(SoftmaxParams<F16>) => run::<F16, 8, B, false>;
    SOFTMAX_F16_BLOCK_SMALL = softmax_f16_block_small(SoftmaxParams<F16>) => run::<F16, 8, S, false>;
    SOFTMAX_BF16_WARP = softmax_bf16_warp(SoftmaxParams<Bf16>) => run::<Bf16, 8, W, false>;
    SOFTMAX_BF16_BLOCK = softmax_bf16_block(SoftmaxParams<Bf16>) => run::<Bf16, 8, B, false>;
    SOFTMAX_BF16_BLOCK_SMALL = softmax_bf16_block_small(SoftmaxParams<Bf16>) => run::<Bf16, 8, S, false>;
    LOG_SOFTMAX_F32_WARP = log_softmax_f32_warp(SoftmaxParams<f32>) => run::<f32, 4, W, true>;
    LOG_SOFTMAX_F32_BLOCK = log_softmax_f32_block(SoftmaxParams<f32>) => run::<f32, 4, B, true>;
    LOG_SOFTMAX_F32_BLOCK_SMALL = log_softmax_f32_block_small(SoftmaxParams<f32>) => run::<f32, 4, S, true>;
    LOG_SOFTMAX_F16_WARP = log_softmax_f16_warp(SoftmaxParams<F16>) => run::<F16, 8, W, true>;
    LOG_SOFTMAX_F16_BLOCK = log_softmax_f16_block(SoftmaxParams<F16>) => run::<F16, 8, B, true>;
    LOG_SOFTMAX_F16_BLOCK_SMALL = log_softmax_f16_block_small(SoftmaxParams<F16>) => run::<F16, 8, S, true>;
    LOG_SOFTMAX_BF16_WARP = log_softmax_bf16_warp(SoftmaxParams<Bf16>) => run::<Bf16, 8, W, true>;
    LOG_SOFTMAX_BF16_BLOCK = log_softmax_bf16_block(SoftmaxParams<Bf16>) => run::<Bf16, 8, B, true>;
    LOG_SOFTMAX_BF16_BLOCK_SMALL = log_softmax_bf16_block_small(SoftmaxParams<Bf16>) => run::<Bf16, 8, S, true>;
    SOFTMAX_F32_SPLIT = softmax_f32_split(SoftmaxParams<f32>) => split_stats::<f32, 4>;
    SOFTMAX_F16_SPLIT = softmax_f16_split(SoftmaxParams<F16>) => split_stats::<F16, 8>;
    SOFTMAX_BF16_SPLIT = softmax_bf16_split(SoftmaxParams<Bf16>) => split_stats::<Bf16, 8>;
    SOFTMAX_F32_APPLY_SPLIT = softmax_f32_apply_split(SoftmaxParams<f32>) => split_apply::<f32, 4, false>;
    SOFTMAX_F16_APPLY_SPLIT = softmax_f16_apply_split(SoftmaxParams<F16>) => split_apply::<F16, 8, false>;
    SOFTMAX_BF16_APPLY_SPLIT = softmax_bf16_apply_split(SoftmaxParams<Bf16>) => split_apply::<Bf16, 8, false>;
    LOG_SOFTMAX_F32_APPLY_SPLIT = log_softmax_f32_apply_split(SoftmaxParams<f32>) => split_apply::<f32, 4, true>;
    LOG_SOFTMAX_F16_APPLY_SPLIT = log_softmax_f16_apply_split(SoftmaxParams<F16>) => split_apply::<F16, 8, true>;
    LOG_SOFTMAX_BF16_APPLY_SPLIT = log_softmax_bf16_apply_split(SoftmaxParams<Bf16>) => split_apply::<Bf16, 8, true>;
    SOFTMAX_BACKWARD_F32_WARP = softmax_backward_f32_warp(SoftmaxBackwardParams<f32>) => backward::<f32, 4, W, false>;
    SOFTMAX_BACKWARD_F32_BLOCK = softmax_backward_f32_block(SoftmaxBackwardParams<f32>) => backward::<f32, 4, B, false>;
    SOFTMAX_BACKWARD_F16_WARP = softmax_backward_f16_warp(SoftmaxBackwardParams<F16>) => backward::<F16, 8, W, false>;
    SOFTMAX_BACKWARD_F16_BLOCK = softmax_backward_f16_block(SoftmaxBackwardParams<F16>) => backward::<F16, 8, B, false>;
    SOFTMAX_BACKWARD_BF16_WARP = softmax_backward_bf16_warp(SoftmaxBackwardParams<Bf16>) => backward::<Bf16, 8, W, false>;
    SOFTMAX_BACKWARD_BF16_BLOCK = softmax_backward_bf16_block(SoftmaxBackwardParams<Bf16>) => backward::<Bf16, 8, B, false>;
    LOG_SOFTMAX_BACKWARD_F32_WARP = log_softmax_backward_f32_warp(SoftmaxBackwardParams<f32>) => backward::<f32, 4, W, true>;
    LOG_SOFTMAX_BACKWARD_F32_BLOCK = log_softmax_backward_f32_block(SoftmaxBackwardParams<f32>) => backward::<f32, 4, B, true>;
    LOG_SOFTMAX_BACKWARD_F16_WARP = log_softmax_backward_f16_warp(SoftmaxBackwardParams<F16>) => backward::<F16, 8, W, true>;
    LOG_SOFTMAX_BACKWARD_F16_BLOCK = log_softmax_backward_f16_block(SoftmaxBackwardParams<F16>) => backward::<F16, 8, B, true>;
    LOG_SOFTMAX_BACKWARD_BF16_WARP = log_softmax_backward_bf16_warp(SoftmaxBackwardParams<Bf16>) => backward::<Bf16, 8, W, true>;
    LOG_SOFTMAX_BACKWARD_BF16_BLOCK = log_softmax_backward_bf16_block(SoftmaxBackwardParams<Bf16>) => backward::<Bf16, 8, B, true>;
    CROSS_ENTROPY_F32_WARP = cross_entropy_f32_warp(CrossEntropyParams<f32>) => cross_entropy::<f32, 4, W>;
    CROSS_ENTROPY_F32_BLOCK = cross_entropy_f32_block(CrossEntropyParams<f32>) => cross_entropy::<f32, 4, B>;
    CROSS_ENTROPY_F32_BLOCK_SMALL = cross_entropy_f32_block_small(CrossEntropyParams<f32>) => cross_entropy::<f32, 4, S>;
    CROSS_ENTROPY_F16_WARP = cross_entropy_f16_warp(CrossEntropyParams<F16>) => cross_entropy::<F16, 8, W>;
    CROSS_ENTROPY_F16_BLOCK = cross_entropy_f16_block(CrossEntropyParams<F16>) => cross_entropy::<F16, 8, B>;
    CROSS_ENTROPY_F16_BLOCK_SMALL = cross_entropy_f16_block_small(CrossEntropyParams<F16>) => cross_entropy::<F16, 8, S>;
    CROSS_ENTROPY_BF16_WARP = cross_entropy_bf16_warp(CrossEntropyParams<Bf16>) => cross_entropy::<Bf16, 8, W>;
    CROSS_ENTROPY_BF16_BLOCK = cross_entropy_bf16_block(CrossEntropyParams<Bf16>) => cross_entropy::<Bf16, 8, B>;
    CROSS_ENTROPY_BF16_BLOCK_SMALL = cross_entropy_bf16_block_small(CrossEntropyParams<Bf16>) => cross_entropy::<Bf16, 8, S>;
    CROSS_ENTROPY_F32_APPLY_SPLIT = cross_entropy_f32_apply_split(CrossEntropyParams<f32>) => cross_entropy_split_apply::<f32, 4>;
    CROSS_ENTROPY_F16_APPLY_SPLIT = cross_entropy_f16_apply_split(CrossEntropyParams<F16>) => cross_entropy_split_apply::<F16, 8>;
    CROSS_ENTROPY_BF16_APPLY_SPLIT = cross_entropy_bf16_apply_split(CrossEntropyParams<Bf16>) => cross_entropy_split_apply::<Bf16, 8>;
}
