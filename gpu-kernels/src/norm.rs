//! `layernorm` and `rmsnorm`, forward and backward, over the last dimension.
//!
//! Forward: `layernorm: y = (x - mean) * rstd * gamma + beta` with
//! `rstd = 1 / sqrt(var + eps)` (biased variance), saving `mean` and `rstd` per row;
//! `rmsnorm: y = x * rstd * gamma` with `rstd = 1 / sqrt(mean(x^2) + eps)`, saving `rstd`.
//! Statistics are two-pass (a mean, then squared deviations from it), more accurate than a
//! one-pass variance and free when the row is in registers. A warp per row takes the row's
//! mean, then its squared deviations: two warp reductions. A block's warps each take the
//! mean of their own elements instead ([`centre`]), which needs no exchange between warps,
//! and one exchange through shared memory combines the warps' sums exactly ([`moments`]):
//! two barriers per row where a block reduction of the mean and then of the variance took
//! four.
//!
//! Backward, with `xhat = (x - mean) * rstd` (rmsnorm: `x * rstd`) and `g = dy * gamma`:
//! `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))` (rmsnorm drops `mean(g)`), and the
//! parameter gradients `dgamma = sum over rows of dy * xhat`, `dbeta = sum of dy`. Each row
//! group adds its rows' contributions to its own row of a `partial` buffer (no atomics, so
//! the result is bitwise deterministic); [`column_sum`] then adds the partial rows in a fixed
//! order. Rows that fit the group's registers keep those contributions in registers across
//! rows, and the group stores its partial row once ([`backward_cached`]).
//!
//! # Thread mapping
//! The row engine's ([`crate::rows`]); [`column_sum`] runs one thread per column. The forward
//! keeps the row in registers, in the shared row cache ([`crate::rows::RowStrategy::Shared`])
//! or streams it (three passes for layernorm, two for rmsnorm).
//!
//! The split strategy (few, long rows) runs blocks over [`crate::rows::SPLIT_SEGMENT`]-element
//! segments of a row in two launches, with per-segment partial results in scratch, combined
//! in a fixed order by every warp that needs them ([`warp_fold`]; no atomics, so bitwise
//! deterministic):
//! - forward: [`split_stats`] writes each segment's `(mean, M2)` (two-pass, from registers;
//!   rmsnorm `(0, sum x^2)`); [`split_apply`] merges them (Chan et al.'s pairwise update),
//!   writes `mean`/`rstd` (segment 0) and re-reads its segment to write `y`.
//! - backward: [`split_backward_stats`] writes each segment's `(sum g, sum g xhat)`;
//!   [`split_backward_apply`] runs `(segment, row group)` blocks: each walks the rows of its
//!   group, writes its segment of `dx`, and accumulates `dgamma`/`dbeta` for its segment's
//!   columns in registers, stored once into its row group's partial row for [`column_sum`].
//!
//! # Safety
//! As in [`crate::rows`]; `gamma`/`beta`/`dgamma`/`dbeta` have `cols` elements, `mean`/`rstd`
//! have `rows`, `partial` has `groups * cols * (1 or 2)` where `groups` is the number of row
//! groups in the launch (grid x rows per block; split: grid y). Split launches: grid x is
//! `cols.div_ceil(segment)`, `stats` holds 2 words per (row, segment).

use crate::device::reduce::{Moments, Sum, Sum2, warp_fold, warp_reduce, warp_reduce_groups};
use crate::device::thread::{
    block_dim_x, block_idx_x, block_idx_y, grid_dim_x, grid_dim_y, index_1d, sync_threads, thread_idx_x,
};
use crate::device::{Element, Global, GlobalMut, Shared, WARP_SIZE, math};
use crate::rows::{
    self, BLOCK_ROW_THREADS, MAX_CACHE_CHUNKS, RowPlan, RowWalk, SHARED_ROW_OFFSET, assign, cache_chunks, fill_shared,
    group_reduce, load_chunk, load_raw_chunk, store_chunk, visit_shared, walk_reduce, widen,
};

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NormParams<T> {
    pub rows: u32,
    pub cols: u32,
    pub vectorized: u32,
    /// Warp kernels only: threads per row ([`rows::warp_row_lanes`]; see [`rows::RowWalk`]).
    pub lanes: u32,
    pub eps: f32,
    pub x: Global<T>,
    pub gamma: Global<T>,
    /// layernorm only (empty for rmsnorm).
    pub beta: Global<T>,
    pub y: GlobalMut<T>,
    /// layernorm only (empty for rmsnorm).
    pub mean: GlobalMut<f32>,
    pub rstd: GlobalMut<f32>,
    /// Block kernels only: nonzero when the launch has the shared row cache.
    pub shared: u32,
    /// Split strategy only: elements per segment, and 2 words per (row, segment) of
    /// partial statistics in scratch.
    pub segment: u32,
    pub stats: GlobalMut<f32>,
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
    /// Block kernels only: nonzero when the launch has room for the block's parameter sums in
    /// shared memory ([`backward_sums_bytes`]), used for rows that do not fit in registers.
    pub shared: u32,
    /// Split strategy only: elements per segment, and 2 words per (row, segment) of
    /// partial sums in scratch.
    pub segment: u32,
    pub stats: GlobalMut<f32>,
}

/// Dynamic shared memory of a block backward launch that keeps its parameter sums (`cols`
/// f32 of `dy xhat`, then for layernorm `cols` of `dy`) in shared memory, after the
/// block-reduction scratch.
pub const fn backward_sums_bytes(cols: usize, layer: bool) -> usize {
    rows::stream_sums_bytes(cols, RowPlan::norm_backward(layer).stream_sums)
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
    // layernorm's warp kernels keep a whole warp per row: with sub-warp groups they took
    // 80-122 registers (ptxas 12.9, sm_90a) and spilled 12-60 B under their launch bounds.
    let mut w = RowWalk::new::<G>(if LAYER { WARP_SIZE } else { p.lanes });
    let (lane, g) = (w.lane, w.g);
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let vectorized = p.vectorized != 0;
    let row_chunks = rows::chunks(cols, VEC);
    // The row in registers in the storage type (rows::ROW_CACHE_BYTES per thread).
    let cached = row_chunks <= g * MAX_CACHE_CHUNKS;
    let shared = !cached && G != crate::device::WARP_SIZE && p.shared != 0;
    let inv_cols = 1.0 / p.cols as f32;
    // The elements of a row that this warp's threads hold, the same in every row (block
    // kernels' layernorm only: see [`centre`]).
    let warp_n =
        if LAYER && G != WARP_SIZE { warp_reduce(Sum(lane_elements(cols, VEC, lane, g) as f32)).0 } else { 0.0 };
    while w.more(rows) {
        let (row, live) = (w.row, w.live(rows));
        let base = if live { row } else { rows - 1 } * cols;
        let nchunks = row_chunks;
        let mut cache = [[T::from_f32(0.0); VEC]; MAX_CACHE_CHUNKS];
        // Pass 1: this thread's sum (layernorm) or nothing (rmsnorm); the shared path fills
        // its cache.
        let mut s = 0.0f32;
        let mut add = |v: &[f32; VEC]| {
            for &e in v {
                s += e;
            }
        };
        if shared {
            fill_shared::<T, VEC, G>(&p.x, base, cols, lane, vectorized, 0.0, |_, v| add(&v));
        } else if cached {
            crate::for_each_cached_chunk!(j < MAX_CACHE_CHUNKS => {
                let c = lane + j * g;
                if c < nchunks {
                    cache[j] = load_raw_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, T::from_f32(0.0));
                    add(&widen(cache[j]));
                }
            });
        } else if LAYER {
            let mut c = lane;
            while c < nchunks {
                add(&load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, 0.0));
                c += g;
            }
        }
        let centre = if LAYER { centre::<G>(s, warp_n, inv_cols, g) } else { 0.0 };
        // Pass 2: deviations from the centre (rmsnorm: from 0), inside the row only.
        let (mut q, mut r) = (0.0f32, 0.0f32);
        let mut acc = |c: usize, v: &[f32; VEC]| {
            for (k, &x) in v.iter().enumerate() {
                if c * VEC + k < cols {
                    let d = x - centre;
                    q = math::fma(d, d, q);
                    r += d;
                }
            }
        };
        if shared {
            visit_shared::<T, VEC, G>(cols, lane, |c, v| acc(c, &v));
        } else if cached {
            crate::for_each_cached_chunk!(j < MAX_CACHE_CHUNKS => {
                let c = lane + j * g;
                if c < nchunks {
                    acc(c, &widen(cache[j]));
                }
            });
        } else {
            let mut c = lane;
            while c < nchunks {
                acc(c, &load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, 0.0));
                c += g;
            }
        }
        let (mean, var) = if LAYER {
            moments::<G>(centre, q, r, inv_cols, g)
        } else {
            (0.0, walk_reduce::<Sum, G>(Sum(q), g).0 * inv_cols)
        };
        let rstd = 1.0 / math::sqrt(var + p.eps);
        if lane == 0 && live {
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
            if live {
                store_chunk::<T, VEC>(&p.y, base, cols, c, vectorized, o);
            }
        };
        if shared {
            visit_shared::<T, VEC, G>(cols, lane, |c, v| write(c, &v));
        } else if cached {
            crate::for_each_cached_chunk!(j < MAX_CACHE_CHUNKS => {
                let c = lane + j * g;
                if c < nchunks {
                    write(c, &widen(cache[j]));
                }
            });
        } else {
            let mut c = lane;
            while c < nchunks {
                write(c, &load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, 0.0));
                c += g;
            }
        }
        w.next();
    }
}

/// Elements of a `cols`-element row in chunks `lane, lane + g, lane + 2g, ...` of `vec`
/// elements each (the row's last chunk may be partial). Computed once per kernel: counted
/// chunk by chunk in the row loop, LLVM kept each cached chunk's count in a register across
/// rows, and layernorm_f32_block_small spilled 8 B under its 80-register bound (sm_90a).
#[inline(always)]
fn lane_elements(cols: usize, vec: usize, lane: usize, g: usize) -> usize {
    let nchunks = rows::chunks(cols, vec);
    if lane >= nchunks {
        return 0;
    }
    let owned = (nchunks - 1 - lane) / g + 1;
    let pad = if (nchunks - 1) % g == lane { nchunks * vec - cols } else { 0 };
    owned * vec - pad
}

/// Words per warp that layernorm's block kernels exchange through the reduction scratch
/// ([`centre`], [`moments`]): the warp's centre, sum and count, then its sums of squared and
/// plain deviations from the centre.
const MOMENT_WORDS: u32 = 5;
const _: () = assert!(
    BLOCK_ROW_THREADS / WARP_SIZE * MOMENT_WORDS <= crate::device::reduce::block_scratch_words(3),
    "a block's warp moments fit the reduction scratch"
);

/// Where layernorm's second pass measures deviations from, given this thread's sum `s` of
/// its elements and the count `n` of its warp's: with a warp per row, the row's mean; in a
/// block, about the mean of the warp's own elements (`s * rcp(n)` over the warp), which
/// needs no exchange between warps. The block's warps leave their centre, sum and count in
/// the scratch for [`moments`], so that a block row takes one exchange through shared memory
/// where a mean and then a variance took two block reductions.
#[inline(always)]
#[track_caller]
fn centre<const G: u32>(s: f32, n: f32, inv_cols: f32, g: usize) -> f32 {
    if G == WARP_SIZE {
        return warp_reduce_groups(Sum(s), g as u32).0 * inv_cols;
    }
    let s = warp_reduce(Sum(s)).0;
    let c = if n > 0.0 { s * math::rcp_approx(n) } else { 0.0 };
    let (warp, lane) = (thread_idx_x() / WARP_SIZE, thread_idx_x() % WARP_SIZE);
    if lane == 0 {
        for (i, v) in [c, s, n].into_iter().enumerate() {
            rows::SCRATCH.store(warp * MOMENT_WORDS + i as u32, v.to_bits());
        }
    }
    c
}

/// The row's `(mean, variance)` from this thread's sums of `(x - c)^2` (`q`) and of `x - c`
/// (`r`) about its warp's centre `c` ([`centre`]). In a block, `sum (x - mean)^2 = sum over
/// warps of q + 2 t r + n t^2` with `t = c - mean`, exact for any centre, so a centre's
/// rounding reaches the variance only squared, as the mean's does in a two-pass variance.
/// Every thread adds the warps' terms in the same order and gets the same bits.
#[inline(always)]
#[track_caller]
fn moments<const G: u32>(c: f32, q: f32, r: f32, inv_cols: f32, g: usize) -> (f32, f32) {
    if G == WARP_SIZE {
        return (c, warp_reduce_groups(Sum(q), g as u32).0 * inv_cols);
    }
    let Sum2(q, r) = warp_reduce(Sum2(q, r));
    let (warp, lane) = (thread_idx_x() / WARP_SIZE, thread_idx_x() % WARP_SIZE);
    if lane == 0 {
        for (i, v) in [q, r].into_iter().enumerate() {
            rows::SCRATCH.store(warp * MOMENT_WORDS + 3 + i as u32, v.to_bits());
        }
    }
    sync_threads();
    let word = |w: u32, i: u32| f32::from_bits(rows::SCRATCH.load(w * MOMENT_WORDS + i));
    let warps = block_dim_x() / WARP_SIZE;
    let mut s = 0.0f32;
    for w in 0..warps {
        s += word(w, 1);
    }
    let mean = s * inv_cols;
    let mut m2 = 0.0f32;
    for w in 0..warps {
        let t = word(w, 0) - mean;
        m2 += math::fma(t, math::fma(word(w, 2), t, 2.0 * word(w, 4)), word(w, 3));
    }
    // The next row's exchange may overwrite the scratch only after every warp has read it.
    sync_threads();
    (mean, m2 * inv_cols)
}

/// The body of every backward norm kernel; `LAYER` selects layernorm (else rmsnorm).
/// Rows that fit the group's registers take [`backward_cached`]; longer rows stream twice
/// (the two means, then dx and the parameter sums). A thread owns the same columns in every
/// row, so it adds its columns' `dy xhat` and `dy` to sums only it touches: in shared memory
/// when the launch has room ([`backward_sums_bytes`]; block kernels), copied to the group's
/// partial row at the end, else in the partial row itself, updated once per row (in L2).
#[inline(always)]
pub fn backward<T: Element, const VEC: usize, const G: u32, const LAYER: bool>(p: NormBackwardParams<T>) {
    let (mut row, stride, lane) = assign::<G>();
    let lane = lane as usize;
    let cols = p.cols as usize;
    let vectorized = p.vectorized != 0;
    let nchunks = rows::chunks(cols, VEC);
    let inv_cols = 1.0 / p.cols as f32;
    // This group's row of the partial buffer.
    let group = rows::group_index::<G>();
    let pbase = group * cols * if LAYER { 2 } else { 1 };
    if nchunks <= rows::group_threads::<G>() * const { cache_chunks(VEC) } {
        backward_cached::<T, VEC, G, LAYER>(&p, row, stride, lane, pbase);
        return;
    }
    let width = cols * if LAYER { 2 } else { 1 };
    let in_shared = G != crate::device::WARP_SIZE && p.shared != 0;
    let sums = Shared::<f32>::at(SHARED_ROW_OFFSET, if in_shared { width as u32 } else { 0 });
    let partial = PartialRow { partial: p.partial, pbase };
    // Each thread owns its chunks' columns in every row, so it zeroes, adds to and (from
    // shared memory) copies out its own sums: no barrier. One branch per chunk, not per
    // element: each arm's loop stays small enough for LLVM to unroll, so the chunk arrays
    // stay in registers (with a branch per element the 16-bit kernels had a stack frame).
    let mut c = lane;
    while c < nchunks {
        if in_shared {
            zero_chunk::<_, VEC, LAYER>(&sums, cols, c);
        } else {
            zero_chunk::<_, VEC, LAYER>(&partial, cols, c);
        }
        c += rows::group_threads::<G>();
    }
    while row < p.rows as usize {
        let base = row * cols;
        let mean = if LAYER { p.mean.load(row) } else { 0.0 };
        let rstd = p.rstd.load(row);
        let (mut sg, mut sgx) = (0.0f32, 0.0f32);
        let mut c = lane;
        while c < nchunks {
            add_grad_moments::<T, VEC>(&p, base, 0, cols, c, mean, rstd, (&mut sg, &mut sgx));
            c += rows::group_threads::<G>();
        }
        let (sg, sgx) = grad_sums::<G, LAYER>(sg, sgx);
        let (mean_g, mean_gx) = (sg * inv_cols, sgx * inv_cols);
        let mut c = lane;
        while c < nchunks {
            let x = load_chunk::<T, VEC>(&p.x, base, cols, c, vectorized, 0.0);
            let dy = load_chunk::<T, VEC>(&p.dy, base, cols, c, vectorized, 0.0);
            let gm = load_chunk::<T, VEC>(&p.gamma, 0, cols, c, vectorized, 0.0);
            let mut dx = [0.0f32; VEC];
            let mut xhat = [0.0f32; VEC];
            for k in 0..VEC {
                xhat[k] = (x[k] - mean) * rstd;
                dx[k] = rstd * (dy[k] * gm[k] - mean_g - xhat[k] * mean_gx);
            }
            if in_shared {
                add_chunk::<_, VEC, LAYER>(&sums, cols, c, &dy, &xhat);
            } else {
                add_chunk::<_, VEC, LAYER>(&partial, cols, c, &dy, &xhat);
            }
            store_chunk::<T, VEC>(&p.dx, base, cols, c, vectorized, dx);
            c += rows::group_threads::<G>();
        }
        row += stride;
    }
    if in_shared {
        let mut c = lane;
        while c < nchunks {
            copy_chunk::<VEC, LAYER>(&sums, &partial, cols, c);
            c += rows::group_threads::<G>();
        }
    }
}

/// Where a group keeps its parameter sums while it walks its rows (sum `i`: `dy xhat` of
/// column `i`, or for `i >= cols` layernorm's `dy` of column `i - cols`).
trait Sums {
    fn load(&self, i: usize) -> f32;
    fn store(&self, i: usize, v: f32);
}

/// The sums in shared memory (block kernels whose launch has room for them).
impl Sums for Shared<f32> {
    #[inline(always)]
    fn load(&self, i: usize) -> f32 {
        Shared::load(self, i as u32)
    }
    #[inline(always)]
    fn store(&self, i: usize, v: f32) {
        Shared::store(self, i as u32, v)
    }
}

/// The sums in the group's row of the partial buffer, from element `pbase`.
struct PartialRow {
    partial: GlobalMut<f32>,
    pbase: usize,
}

impl Sums for PartialRow {
    #[inline(always)]
    fn load(&self, i: usize) -> f32 {
        self.partial.load(self.pbase + i)
    }
    #[inline(always)]
    fn store(&self, i: usize, v: f32) {
        self.partial.store(self.pbase + i, v)
    }
}

/// Sets this thread's sums of chunk `c` to zero.
#[inline(always)]
fn zero_chunk<S: Sums, const VEC: usize, const LAYER: bool>(sums: &S, cols: usize, c: usize) {
    for k in 0..VEC {
        let col = c * VEC + k;
        if col < cols {
            sums.store(col, 0.0);
            if LAYER {
                sums.store(cols + col, 0.0);
            }
        }
    }
}

/// Adds chunk `c`'s `dy xhat` (and layernorm's `dy`) to this thread's sums.
#[inline(always)]
fn add_chunk<S: Sums, const VEC: usize, const LAYER: bool>(
    sums: &S,
    cols: usize,
    c: usize,
    dy: &[f32; VEC],
    xhat: &[f32; VEC],
) {
    for k in 0..VEC {
        let col = c * VEC + k;
        if col < cols {
            sums.store(col, math::fma(dy[k], xhat[k], sums.load(col)));
            if LAYER {
                sums.store(cols + col, sums.load(cols + col) + dy[k]);
            }
        }
    }
}

/// Copies this thread's sums of chunk `c` from shared memory to the group's partial row.
#[inline(always)]
fn copy_chunk<const VEC: usize, const LAYER: bool>(from: &Shared<f32>, to: &PartialRow, cols: usize, c: usize) {
    for k in 0..VEC {
        let col = c * VEC + k;
        if col < cols {
            to.store(col, Sums::load(from, col));
            if LAYER {
                to.store(cols + col, Sums::load(from, cols + col));
            }
        }
    }
}

/// [`backward`] for rows of at most `G * CACHE_VALUES` columns: a thread owns the same
/// chunks (`lane + j * G`) of every row, so it keeps its columns' `dy xhat` and `dy` sums
/// in registers across rows, and the group stores its partial row once, at the end (zeros
/// when it had no rows, as [`column_sum`] adds every group's row). The row itself is read
/// twice, as in the streaming path (the thread reads its own chunks again right after the
/// two means, from L1): keeping `x` and `dy` in registers too took the layernorm block
/// kernels to 138 registers (ptxas 12.9, sm_90a), past the 128 a 512-thread block has.
#[inline(always)]
fn backward_cached<T: Element, const VEC: usize, const G: u32, const LAYER: bool>(
    p: &NormBackwardParams<T>,
    mut row: usize,
    stride: usize,
    lane: usize,
    pbase: usize,
) {
    let cols = p.cols as usize;
    let nchunks = rows::chunks(cols, VEC);
    let cache_n = const { cache_chunks(VEC) };
    let inv_cols = 1.0 / p.cols as f32;
    let mut dg = [[0.0f32; VEC]; MAX_CACHE_CHUNKS];
    let mut db = [[0.0f32; VEC]; MAX_CACHE_CHUNKS];
    while row < p.rows as usize {
        let base = row * cols;
        let mean = if LAYER { p.mean.load(row) } else { 0.0 };
        let rstd = p.rstd.load(row);
        let (mut sg, mut sgx) = (0.0f32, 0.0f32);
        crate::for_each_cached_chunk!(j < cache_n => {
            let c = lane + j * rows::group_threads::<G>();
            if c < nchunks {
                add_grad_moments::<T, VEC>(p, base, 0, cols, c, mean, rstd, (&mut sg, &mut sgx));
            }
        });
        let (sg, sgx) = grad_sums::<G, LAYER>(sg, sgx);
        let (mean_g, mean_gx) = (sg * inv_cols, sgx * inv_cols);
        let grad = RowGrad { mean, rstd, mean_g, mean_gx };
        dx_cached_chunks::<T, VEC, G, LAYER>(p, base, 0, cols, lane, grad, &mut dg, &mut db);
        row += stride;
    }
    store_cached_sums::<VEC, G, LAYER>(p.partial, pbase, cols, cols, lane, &dg, &db);
}

/// The group's sums of `g` (layernorm; 0 for rmsnorm) and of `g xhat` from this thread's
/// `sg`, `sgx`: one group reduction of both (a block's two reductions cost two more barriers
/// per row; layernorm backward ran at 0.57 of a copy where rmsnorm's, with one, ran at 0.67,
/// H200, 2026-12-04, 32768 x 4096 f32).
#[inline(always)]
#[track_caller]
fn grad_sums<const G: u32, const LAYER: bool>(sg: f32, sgx: f32) -> (f32, f32) {
    if LAYER {
        let Sum2(sg, sgx) = group_reduce::<Sum2, G>(Sum2(sg, sgx));
        (sg, sgx)
    } else {
        (0.0, group_reduce::<Sum, G>(Sum(sgx)).0)
    }
}

/// The backward's first pass over chunk `c` of the `len` elements at `base` (a row, or a split
/// segment whose `gamma` starts at element `gstart`): adds its `g = dy gamma` to `sums.0` and
/// its `g xhat` to `sums.1`, the two sums whose row means `dx` needs.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn add_grad_moments<T: Element, const VEC: usize>(
    p: &NormBackwardParams<T>,
    base: usize,
    gstart: usize,
    len: usize,
    c: usize,
    mean: f32,
    rstd: f32,
    sums: (&mut f32, &mut f32),
) {
    let vectorized = p.vectorized != 0;
    let x = load_chunk::<T, VEC>(&p.x, base, len, c, vectorized, 0.0);
    let dy = load_chunk::<T, VEC>(&p.dy, base, len, c, vectorized, 0.0);
    let gm = load_chunk::<T, VEC>(&p.gamma, gstart, len, c, vectorized, 0.0);
    for k in 0..VEC {
        let g = dy[k] * gm[k];
        *sums.0 += g;
        *sums.1 = math::fma(g, (x[k] - mean) * rstd, *sums.1);
    }
}

/// A row's statistics for its `dx`: the forward's `mean` (0 for rmsnorm) and `rstd`, and the
/// means of `g = dy gamma` and of `g xhat` over the whole row.
#[derive(Clone, Copy)]
struct RowGrad {
    mean: f32,
    rstd: f32,
    mean_g: f32,
    mean_gx: f32,
}

/// Writes `dx` for this thread's cached chunks (`lane + j * G`) of the `len` elements at `base`
/// (a row, or a split segment whose `gamma` starts at element `gstart`), and adds their
/// `dy xhat` and (layernorm) `dy` to the thread's sums `dg`, `db`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn dx_cached_chunks<T: Element, const VEC: usize, const G: u32, const LAYER: bool>(
    p: &NormBackwardParams<T>,
    base: usize,
    gstart: usize,
    len: usize,
    lane: usize,
    r: RowGrad,
    dg: &mut [[f32; VEC]; MAX_CACHE_CHUNKS],
    db: &mut [[f32; VEC]; MAX_CACHE_CHUNKS],
) {
    let vectorized = p.vectorized != 0;
    let nchunks = rows::chunks(len, VEC);
    let cache_n = const { cache_chunks(VEC) };
    crate::for_each_cached_chunk!(j < cache_n => {
        let c = lane + j * rows::group_threads::<G>();
        if c < nchunks {
            let x = load_chunk::<T, VEC>(&p.x, base, len, c, vectorized, 0.0);
            let dy = load_chunk::<T, VEC>(&p.dy, base, len, c, vectorized, 0.0);
            let gm = load_chunk::<T, VEC>(&p.gamma, gstart, len, c, vectorized, 0.0);
            let mut dx = [0.0f32; VEC];
            for k in 0..VEC {
                let xhat = (x[k] - r.mean) * r.rstd;
                dx[k] = r.rstd * (dy[k] * gm[k] - r.mean_g - xhat * r.mean_gx);
                dg[j][k] = math::fma(dy[k], xhat, dg[j][k]);
                if LAYER {
                    db[j][k] += dy[k];
                }
            }
            store_chunk::<T, VEC>(&p.dx, base, len, c, vectorized, dx);
        }
    });
}

/// Stores this thread's sums of its cached chunks (`len` columns) into the group's partial
/// row: `dg` from `pbase`, (layernorm) `db` from `pbase + cols`.
#[inline(always)]
fn store_cached_sums<const VEC: usize, const G: u32, const LAYER: bool>(
    partial: GlobalMut<f32>,
    pbase: usize,
    cols: usize,
    len: usize,
    lane: usize,
    dg: &[[f32; VEC]; MAX_CACHE_CHUNKS],
    db: &[[f32; VEC]; MAX_CACHE_CHUNKS],
) {
    let nchunks = rows::chunks(len, VEC);
    let cache_n = const { cache_chunks(VEC) };
    crate::for_each_cached_chunk!(j < cache_n => {
        let c = lane + j * rows::group_threads::<G>();
        for k in 0..VEC {
            let col = c * VEC + k;
            if c < nchunks && col < len {
                partial.store(pbase + col, dg[j][k]);
                if LAYER {
                    partial.store(pbase + cols + col, db[j][k]);
                }
            }
        }
    });
}

/// Split forward, first launch: block `(segment, row)` writes its segment's `(mean, M2)`
/// (rmsnorm: `(0, sum of x^2)`) to `stats[(row * segments + segment) * 2 ..]`, two-pass from
/// registers (a segment is exactly the block's register capacity).
#[inline(always)]
pub fn split_stats<T: Element, const VEC: usize, const LAYER: bool>(p: NormParams<T>) {
    const G: u32 = BLOCK_ROW_THREADS;
    let cols = p.cols as usize;
    let (row, seg, segments, start, len) = rows::split_segment(cols, p.segment as usize);
    let lane = thread_idx_x() as usize;
    let base = row * cols + start;
    let vectorized = p.vectorized != 0;
    let nchunks = rows::chunks(len, VEC);
    let cache_n = const { cache_chunks(VEC) };
    let mut cache = [[0.0f32; VEC]; MAX_CACHE_CHUNKS];
    let mut s = 0.0f32;
    crate::for_each_cached_chunk!(j < cache_n => {
        let c = lane + j * rows::group_threads::<G>();
        if c < nchunks {
            cache[j] = load_chunk::<T, VEC>(&p.x, base, len, c, vectorized, 0.0);
            for &v in cache[j].iter() {
                s += v;
            }
        }
    });
    let mean = if LAYER { group_reduce::<Sum, G>(Sum(s)).0 / len as f32 } else { 0.0 };
    let mut q = 0.0f32;
    crate::for_each_cached_chunk!(j < cache_n => {
        let c = lane + j * rows::group_threads::<G>();
        if c < nchunks {
            for (k, &x) in cache[j].iter().enumerate() {
                if c * VEC + k < len {
                    let d = x - mean;
                    q = math::fma(d, d, q);
                }
            }
        }
    });
    let m2 = group_reduce::<Sum, G>(Sum(q)).0;
    if lane == 0 {
        p.stats.store((row * segments + seg) * 2, mean);
        p.stats.store((row * segments + seg) * 2 + 1, m2);
    }
}

/// The row's `(mean, variance)` from the split strategy's per-segment `(mean, M2)`, merged by
/// each warp ([`warp_fold`] of [`Moments`]: every thread of the row's blocks gets the same
/// bits; rmsnorm's means are 0, so it adds the sums of squares).
#[inline(always)]
#[track_caller]
fn split_moments(stats: &Global<f32>, row: usize, cols: usize, segment: usize) -> (f32, f32) {
    let segments = cols.div_ceil(segment);
    let m = warp_fold(segments, |s| Moments {
        n: segment.min(cols - s * segment) as f32,
        mean: stats.load((row * segments + s) * 2),
        m2: stats.load((row * segments + s) * 2 + 1),
    });
    (m.mean, m.m2 / cols as f32)
}

/// Split forward, second launch: block `(segment, row)` merges the row's segment statistics
/// (every warp, the same order), block 0 of the row saves `mean`/`rstd`, and the block
/// re-reads its segment to write `y`.
#[inline(always)]
pub fn split_apply<T: Element, const VEC: usize, const LAYER: bool>(p: NormParams<T>) {
    let cols = p.cols as usize;
    let (row, seg, _, start, len) = rows::split_segment(cols, p.segment as usize);
    let (mean, var) = split_moments(&p.stats.as_global(), row, cols, p.segment as usize);
    let rstd = 1.0 / math::sqrt(var + p.eps);
    let lane = thread_idx_x() as usize;
    if seg == 0 && lane == 0 {
        if LAYER {
            p.mean.store(row, mean);
        }
        p.rstd.store(row, rstd);
    }
    let base = row * cols + start;
    let vectorized = p.vectorized != 0;
    let mut c = lane;
    while c < rows::chunks(len, VEC) {
        let v = load_chunk::<T, VEC>(&p.x, base, len, c, vectorized, 0.0);
        let g = load_chunk::<T, VEC>(&p.gamma, start, len, c, vectorized, 0.0);
        let b = if LAYER { load_chunk::<T, VEC>(&p.beta, start, len, c, vectorized, 0.0) } else { [0.0; VEC] };
        let mut o = [0.0f32; VEC];
        for k in 0..VEC {
            o[k] = math::fma((v[k] - mean) * rstd, g[k], b[k]);
        }
        store_chunk::<T, VEC>(&p.y, base, len, c, vectorized, o);
        c += BLOCK_ROW_THREADS as usize;
    }
}

/// Split backward, first launch: block `(segment, row)` writes its segment's
/// `(sum of g, sum of g xhat)` (`g = dy gamma`) to `stats[(row * segments + segment) * 2 ..]`.
#[inline(always)]
pub fn split_backward_stats<T: Element, const VEC: usize, const LAYER: bool>(p: NormBackwardParams<T>) {
    const G: u32 = BLOCK_ROW_THREADS;
    let cols = p.cols as usize;
    let (row, seg, segments, start, len) = rows::split_segment(cols, p.segment as usize);
    let lane = thread_idx_x() as usize;
    let base = row * cols + start;
    let mean = if LAYER { p.mean.load(row) } else { 0.0 };
    let rstd = p.rstd.load(row);
    let (mut sg, mut sgx) = (0.0f32, 0.0f32);
    let mut c = lane;
    while c < rows::chunks(len, VEC) {
        add_grad_moments::<T, VEC>(&p, base, start, len, c, mean, rstd, (&mut sg, &mut sgx));
        c += rows::group_threads::<G>();
    }
    let (sg, sgx) = grad_sums::<G, LAYER>(sg, sgx);
    if lane == 0 {
        p.stats.store((row * segments + seg) * 2, sg);
        p.stats.store((row * segments + seg) * 2 + 1, sgx);
    }
}

/// Split backward, second launch: block `(segment, group)` walks rows `group, group + groups,
/// ...` (groups = grid y): merges the row's segment sums (every warp, the same order), writes its
/// segment of `dx`, and adds `dy xhat` (and `dy`) for its columns into registers; at the end
/// it stores them into its group's partial row (`partial[group * width + column]`), which
/// [`column_sum`] adds over groups. A thread owns the same columns in every row.
#[inline(always)]
pub fn split_backward_apply<T: Element, const VEC: usize, const LAYER: bool>(p: NormBackwardParams<T>) {
    const G: u32 = BLOCK_ROW_THREADS;
    let cols = p.cols as usize;
    let segment = p.segment as usize;
    let (seg, group, groups) = (block_idx_x() as usize, block_idx_y() as usize, grid_dim_y() as usize);
    let segments = cols.div_ceil(segment);
    let start = seg * segment;
    let len = segment.min(cols - start);
    let lane = thread_idx_x() as usize;
    let inv_cols = 1.0 / p.cols as f32;
    let mut dg = [[0.0f32; VEC]; MAX_CACHE_CHUNKS];
    let mut db = [[0.0f32; VEC]; MAX_CACHE_CHUNKS];
    let mut row = group;
    while row < p.rows as usize {
        let Sum2(sg, sgx) = warp_fold(segments, |s| {
            Sum2(p.stats.load((row * segments + s) * 2), p.stats.load((row * segments + s) * 2 + 1))
        });
        let (mean_g, mean_gx) = (sg * inv_cols, sgx * inv_cols);
        let mean = if LAYER { p.mean.load(row) } else { 0.0 };
        let rstd = p.rstd.load(row);
        let grad = RowGrad { mean, rstd, mean_g, mean_gx };
        dx_cached_chunks::<T, VEC, G, LAYER>(&p, row * cols + start, start, len, lane, grad, &mut dg, &mut db);
        row += groups;
    }
    let width = cols * if LAYER { 2 } else { 1 };
    store_cached_sums::<VEC, G, LAYER>(p.partial, group * width + start, cols, len, lane, &dg, &db);
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
const S: u32 = rows::BLOCK_GROUP;

crate::kernels! {
    LAYERNORM_F32_WARP = layernorm_f32_warp(NormParams<f32>) => forward::<f32, 4, W, true>;
    LAYERNORM_F32_BLOCK = layernorm_f32_block(NormParams<f32>) => forward::<f32, 4, B, true>;
    LAYERNORM_F32_BLOCK_SMALL = layernorm_f32_block_small(NormParams<f32>) => forward::<f32, 4, S, true>;
    LAYERNORM_F16_WARP = layernorm_f16_warp(NormParams<F16>) => forward::<F16, 8, W, true>;
    LAYERNORM_F16_BLOCK = layernorm_f16_block(NormParams<F16>) => forward::<F16, 8, B, true>;
    LAYERNORM_F16_BLOCK_SMALL = layernorm_f16_block_small(NormParams<F16>) => forward::<F16, 8, S, true>;
    LAYERNORM_BF16_WARP = layernorm_bf16_warp(NormParams<Bf16>) => forward::<Bf16, 8, W, true>;
    LAYERNORM_BF16_BLOCK = layernorm_bf16_block(NormParams<Bf16>) => forward::<Bf16, 8, B, true>;
    LAYERNORM_BF16_BLOCK_SMALL = layernorm_bf16_block_small(NormParams<Bf16>) => forward::<Bf16, 8, S, true>;
    RMSNORM_F32_WARP = rmsnorm_f32_warp(NormParams<f32>) => forward::<f32, 4, W, false>;
    RMSNORM_F32_BLOCK = rmsnorm_f32_block(NormParams<f32>) => forward::<f32, 4, B, false>;
    RMSNORM_F32_BLOCK_SMALL = rmsnorm_f32_block_small(NormParams<f32>) => forward::<f32, 4, S, false>;
    RMSNORM_F16_WARP = rmsnorm_f16_warp(NormParams<F16>) => forward::<F16, 8, W, false>;
    RMSNORM_F16_BLOCK = rmsnorm_f16_block(NormParams<F16>) => forward::<F16, 8, B, false>;
    RMSNORM_F16_BLOCK_SMALL = rmsnorm_f16_block_small(NormParams<F16>) => forward::<F16, 8, S, false>;
    RMSNORM_BF16_WARP = rmsnorm_bf16_warp(NormParams<Bf16>) => forward::<Bf16, 8, W, false>;
    RMSNORM_BF16_BLOCK = rmsnorm_bf16_block(NormParams<Bf16>) => forward::<Bf16, 8, B, false>;
    RMSNORM_BF16_BLOCK_SMALL = rmsnorm_bf16_block_small(NormParams<Bf16>) => forward::<Bf16, 8, S, false>;
    LAYERNORM_BACKWARD_F32_WARP = layernorm_backward_f32_warp(NormBackwardParams<f32>) => backward::<f32, 4, W, true>;
    LAYERNORM_BACKWARD_F32_BLOCK = layernorm_backward_f32_block(NormBackwardParams<f32>) => backward::<f32, 4, B, true>;
    LAYERNORM_BACKWARD_F32_BLOCK_SMALL = layernorm_backward_f32_block_small(NormBackwardParams<f32>) => backward::<f32, 4, S, true>;
    LAYERNORM_BACKWARD_F16_WARP = layernorm_backward_f16_warp(NormBackwardParams<F16>) => backward::<F16, 8, W, true>;
    LAYERNORM_BACKWARD_F16_BLOCK = layernorm_backward_f16_block(NormBackwardParams<F16>) => backward::<F16, 8, B, true>;
    LAYERNORM_BACKWARD_F16_BLOCK_SMALL = layernorm_backward_f16_block_small(NormBackwardParams<F16>) => backward::<F16, 8, S, true>;
    LAYERNORM_BACKWARD_BF16_WARP = layernorm_backward_bf16_warp(NormBackwardParams<Bf16>) => backward::<Bf16, 8, W, true>;
    LAYERNORM_BACKWARD_BF16_BLOCK = layernorm_backward_bf16_block(NormBackwardParams<Bf16>) => backward::<Bf16, 8, B, true>;
    LAYERNORM_BACKWARD_BF16_BLOCK_SMALL = layernorm_backward_bf16_block_small(NormBackwardParams<Bf16>) => backward::<Bf16, 8, S, true>;
    RMSNORM_BACKWARD_F32_WARP = rmsnorm_backward_f32_warp(NormBackwardParams<f32>) => backward::<f32, 4, W, false>;
    RMSNORM_BACKWARD_F32_BLOCK = rmsnorm_backward_f32_block(NormBackwardParams<f32>) => backward::<f32, 4, B, false>;
    RMSNORM_BACKWARD_F32_BLOCK_SMALL = rmsnorm_backward_f32_block_small(NormBackwardParams<f32>) => backward::<f32, 4, S, false>;
    RMSNORM_BACKWARD_F16_WARP = rmsnorm_backward_f16_warp(NormBackwardParams<F16>) => backward::<F16, 8, W, false>;
    RMSNORM_BACKWARD_F16_BLOCK = rmsnorm_backward_f16_block(NormBackwardParams<F16>) => backward::<F16, 8, B, false>;
    RMSNORM_BACKWARD_F16_BLOCK_SMALL = rmsnorm_backward_f16_block_small(NormBackwardParams<F16>) => backward::<F16, 8, S, false>;
    RMSNORM_BACKWARD_BF16_WARP = rmsnorm_backward_bf16_warp(NormBackwardParams<Bf16>) => backward::<Bf16, 8, W, false>;
    RMSNORM_BACKWARD_BF16_BLOCK = rmsnorm_backward_bf16_block(NormBackwardParams<Bf16>) => backward::<Bf16, 8, B, false>;
    RMSNORM_BACKWARD_BF16_BLOCK_SMALL = rmsnorm_backward_bf16_block_small(NormBackwardParams<Bf16>) => backward::<Bf16, 8, S, false>;
    COLUMN_SUM = column_sum_f32(ColumnSumParams) => column_sum;
    LAYERNORM_F32_SPLIT = layernorm_f32_split(NormParams<f32>) => split_stats::<f32, 4, true>;
    LAYERNORM_F16_SPLIT = layernorm_f16_split(NormParams<F16>) => split_stats::<F16, 8, true>;
    LAYERNORM_BF16_SPLIT = layernorm_bf16_split(NormParams<Bf16>) => split_stats::<Bf16, 8, true>;
    RMSNORM_F32_SPLIT = rmsnorm_f32_split(NormParams<f32>) => split_stats::<f32, 4, false>;
    RMSNORM_F16_SPLIT = rmsnorm_f16_split(NormParams<F16>) => split_stats::<F16, 8, false>;
    RMSNORM_BF16_SPLIT = rmsnorm_bf16_split(NormParams<Bf16>) => split_stats::<Bf16, 8, false>;
    LAYERNORM_F32_APPLY_SPLIT = layernorm_f32_apply_split(NormParams<f32>) => split_apply::<f32, 4, true>;
    LAYERNORM_F16_APPLY_SPLIT = layernorm_f16_apply_split(NormParams<F16>) => split_apply::<F16, 8, true>;
    LAYERNORM_BF16_APPLY_SPLIT = layernorm_bf16_apply_split(NormParams<Bf16>) => split_apply::<Bf16, 8, true>;
    RMSNORM_F32_APPLY_SPLIT = rmsnorm_f32_apply_split(NormParams<f32>) => split_apply::<f32, 4, false>;
    RMSNORM_F16_APPLY_SPLIT = rmsnorm_f16_apply_split(NormParams<F16>) => split_apply::<F16, 8, false>;
    RMSNORM_BF16_APPLY_SPLIT = rmsnorm_bf16_apply_split(NormParams<Bf16>) => split_apply::<Bf16, 8, false>;
    LAYERNORM_BACKWARD_F32_SPLIT = layernorm_backward_f32_split(NormBackwardParams<f32>) => split_backward_stats::<f32, 4, true>;
    LAYERNORM_BACKWARD_F16_SPLIT = layernorm_backward_f16_split(NormBackwardParams<F16>) => split_backward_stats::<F16, 8, true>;
    LAYERNORM_BACKWARD_BF16_SPLIT = layernorm_backward_bf16_split(NormBackwardParams<Bf16>) => split_backward_stats::<Bf16, 8, true>;
    RMSNORM_BACKWARD_F32_SPLIT = rmsnorm_backward_f32_split(NormBackwardParams<f32>) => split_backward_stats::<f32, 4, false>;
    RMSNORM_BACKWARD_F16_SPLIT = rmsnorm_backward_f16_split(NormBackwardParams<F16>) => split_backward_stats::<F16, 8, false>;
    RMSNORM_BACKWARD_BF16_SPLIT = rmsnorm_backward_bf16_split(NormBackwardParams<Bf16>) => split_backward_stats::<Bf16, 8, false>;
    LAYERNORM_BACKWARD_F32_APPLY_SPLIT = layernorm_backward_f32_apply_split(NormBackwardParams<f32>) => split_backward_apply::<f32, 4, true>;
    LAYERNORM_BACKWARD_F16_APPLY_SPLIT = layernorm_backward_f16_apply_split(NormBackwardParams<F16>) => split_backward_apply::<F16, 8, true>;
    LAYERNORM_BACKWARD_BF16_APPLY_SPLIT = layernorm_backward_bf16_apply_split(NormBackwardParams<Bf16>) => split_backward_apply::<Bf16, 8, true>;
    RMSNORM_BACKWARD_F32_APPLY_SPLIT = rmsnorm_backward_f32_apply_split(NormBackwardParams<f32>) => split_backward_apply::<f32, 4, false>;
    RMSNORM_BACKWARD_F16_APPLY_SPLIT = rmsnorm_backward_f16_apply_split(NormBackwardParams<F16>) => split_backward_apply::<F16, 8, false>;
    RMSNORM_BACKWARD_BF16_APPLY_SPLIT = rmsnorm_backward_bf16_apply_split(NormBackwardParams<Bf16>) => split_backward_apply::<Bf16, 8, false>;
}
