//! What every row op's launcher shares: the row shape, its checks, the strategy choice, and
//! the kernel tables per dtype.

use crate::{BufRef, Context, Error, LaunchConfig, Result, Scalar};
use gpu_kernels::Dim3;
use gpu_kernels::KernelDef;
use gpu_kernels::norm::{NormBackwardParams, NormParams};
use gpu_kernels::reduce::ReduceParams;
use gpu_kernels::rows::{
    BLOCK_ROW_THREADS, MAX_BLOCK_SHARED_BYTES, MAX_ROW_BLOCKS, SHARED_ROW_OFFSET, SPLIT_MAX_GRID_ROWS,
    WARP_BLOCK_THREADS,
};
pub use gpu_kernels::rows::{RowPlan, RowStrategy};
use gpu_kernels::softmax::{CrossEntropyParams, SoftmaxBackwardParams, SoftmaxParams};

/// A row-major matrix of `rows` contiguous rows of `cols` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rows {
    pub rows: usize,
    pub cols: usize,
}

impl Rows {
    pub const fn new(rows: usize, cols: usize) -> Self {
        Rows { rows, cols }
    }

    /// Elements in the matrix; errors when it cannot be indexed.
    pub fn elements(&self, op: &'static str) -> Result<usize> {
        if self.rows > u32::MAX as usize || self.cols >= 0xFFFF_FFF0 {
            return Err(Error::invalid(
                op,
                format!("{} rows x {} cols: rows and cols must each be below 2^32 - 16", self.rows, self.cols),
            ));
        }
        self.rows
            .checked_mul(self.cols)
            .ok_or_else(|| Error::invalid(op, format!("{} x {} elements overflow usize", self.rows, self.cols)))
    }

    /// Checks that a row-shaped view holds exactly `rows * cols` elements.
    pub fn check_matrix<T: Scalar>(&self, op: &'static str, name: &str, len: usize) -> Result<()> {
        let n = self.elements(op)?;
        if len != n {
            return Err(Error::invalid(
                op,
                format!(
                    "{name} has {len} elements but the shape {} x {} needs {n}; pass a view of exactly rows * cols elements of {}",
                    self.rows,
                    self.cols,
                    T::DTYPE.name()
                ),
            ));
        }
        Ok(())
    }

    /// Checks that a per-row view holds exactly `rows` elements.
    pub fn check_per_row(&self, op: &'static str, name: &str, len: usize) -> Result<()> {
        if len != self.rows {
            return Err(Error::invalid(
                op,
                format!("{name} has {len} elements but there are {} rows; it needs one per row", self.rows),
            ));
        }
        Ok(())
    }
}

/// Whether the 128-bit path can run: every row of every view starts 16-byte aligned.
pub fn vectorized<T: Scalar>(cols: usize, addrs: &[usize]) -> bool {
    (cols * T::DTYPE.size()).is_multiple_of(16) && addrs.iter().all(|a| a.is_multiple_of(16))
}

/// The launch shape for `shape` with `strategy` for an op described by `plan` (the shared
/// strategy's dynamic shared memory holds one row of `plan.cache_elem`-byte elements).
pub fn launch_config(strategy: RowStrategy, shape: Rows, plan: RowPlan) -> LaunchConfig {
    LaunchConfig {
        grid: row_grid(shape.rows, strategy.rows_per_block()),
        block: Dim3::x(strategy.launch_threads(shape.cols, plan)),
        shared_bytes: strategy.shared_bytes(shape.cols, plan.cache_elem),
    }
}

/// The launch shape of a warp-strategy kernel whose rows take `lanes` threads each (the
/// reductions' [`gpu_kernels::rows::warp_row_lanes`]): a block then holds
/// `WARP_BLOCK_THREADS / lanes` rows at a time.
pub fn warp_launch_config(shape: Rows, lanes: u32) -> LaunchConfig {
    LaunchConfig {
        grid: row_grid(shape.rows, WARP_BLOCK_THREADS / lanes),
        ..launch_config(RowStrategy::Warp, shape, RowPlan::ONE_PASS)
    }
}

/// Threads per row of the warp kernels over rows of `cols` elements of `elem` bytes
/// ([`gpu_kernels::rows::warp_row_lanes`]): the fewest that leave each thread at most four
/// 16-byte chunks; the kernels' `lanes` parameter.
pub fn warp_lanes(cols: usize, elem: usize) -> u32 {
    gpu_kernels::rows::warp_row_lanes(cols, 16 / elem)
}

/// The launch shape of a row op whose warp kernels take `lanes` threads per row
/// ([`warp_launch_config`]); the other strategies as [`launch_config`].
pub fn row_launch_config(strategy: RowStrategy, shape: Rows, plan: RowPlan, lanes: u32) -> LaunchConfig {
    match strategy {
        RowStrategy::Warp => warp_launch_config(shape, lanes),
        _ => launch_config(strategy, shape, plan),
    }
}

/// Blocks for `rows` rows at `per_block` rows per block at a time, at most [`MAX_ROW_BLOCKS`]
/// (the kernels walk the rest in a grid-stride loop).
fn row_grid(rows: usize, per_block: u32) -> Dim3 {
    Dim3::x(rows.div_ceil(per_block as usize).clamp(1, MAX_ROW_BLOCKS as usize) as u32)
}

/// Dynamic shared memory one block may use for a row op on `ctx`: the device's opt-in limit,
/// at most [`MAX_BLOCK_SHARED_BYTES`] (the config the kernels' layout is checked against).
pub fn shared_limit(ctx: &Context) -> u32 {
    ctx.max_shared_bytes().min(MAX_BLOCK_SHARED_BYTES)
}

/// Most columns of `elem`-byte elements the shared strategy caches on `ctx`.
pub fn shared_capacity(ctx: &Context, elem: usize) -> usize {
    (shared_limit(ctx).saturating_sub(SHARED_ROW_OFFSET) as usize) / 16 * (16 / elem)
}

/// The strategy for an op described by `plan` on `shape` on `ctx`: `requested`, checked, or
/// [`RowStrategy::select`]'s choice. A requested shared strategy is refused for an op that
/// does not cache rows (`plan.cache_elem == 0`) and for rows that do not fit; a requested
/// split for an op without split kernels.
pub fn choose(
    ctx: &Context,
    op: &'static str,
    requested: Option<RowStrategy>,
    plan: RowPlan,
    shape: Rows,
) -> Result<RowStrategy> {
    let Some(s) = requested else {
        return Ok(RowStrategy::select(shape.rows, shape.cols, plan, shared_limit(ctx)));
    };
    match s {
        RowStrategy::Shared if plan.cache_elem == 0 => Err(Error::invalid(
            op,
            "the shared strategy caches rows that an op reads more than once (softmax, log_softmax, cross_entropy with the gradient, layernorm, rmsnorm); use block",
        )),
        RowStrategy::Shared if shape.cols > shared_capacity(ctx, plan.cache_elem) => Err(Error::invalid(
            op,
            format!(
                "a row of {} columns needs {} bytes of shared memory but a block gets at most {} here (rows up to {} columns fit); use block or split",
                shape.cols,
                gpu_kernels::rows::shared_launch_bytes(shape.cols, plan.cache_elem),
                shared_limit(ctx),
                shared_capacity(ctx, plan.cache_elem)
            ),
        )),
        RowStrategy::Split if !plan.split => Err(Error::invalid(
            op,
            "the split strategy (several blocks per row) exists for sum, max, argmax, softmax, log_softmax, cross_entropy, layernorm, rmsnorm and their backward passes; use warp, block or shared",
        )),
        RowStrategy::Split if shape.rows > SPLIT_MAX_GRID_ROWS => Err(Error::invalid(
            op,
            format!(
                "{} rows: the split strategy runs a block per row and segment and takes at most {SPLIT_MAX_GRID_ROWS} rows; use block, or split the rows into batches",
                shape.rows
            ),
        )),
        s => Ok(s),
    }
}

/// The address of a view, or 0 for an absent one (alignment-neutral).
pub fn addr<T: Scalar>(v: &BufRef<'_, T>) -> usize {
    v.addr()
}

/// A row op's kernels for one dtype: `[warp, block, block_small]` per op ([`slot`]); the
/// softmax backward, always 512 threads a row, has no small-block kernels.
pub struct RowKernels<T: 'static> {
    pub sum: [&'static KernelDef<ReduceParams<T>>; 3],
    pub max: [&'static KernelDef<ReduceParams<T>>; 3],
    pub argmax: [&'static KernelDef<ReduceParams<T>>; 3],
    pub softmax: [&'static KernelDef<SoftmaxParams<T>>; 3],
    pub log_softmax: [&'static KernelDef<SoftmaxParams<T>>; 3],
    /// Split strategy: (per-segment partial, final combine) per reduction.
    pub sum_split: [&'static KernelDef<ReduceParams<T>>; 2],
    pub max_split: [&'static KernelDef<ReduceParams<T>>; 2],
    pub argmax_split: [&'static KernelDef<ReduceParams<T>>; 2],
    /// Split strategy: (segment statistics, softmax apply, log_softmax apply).
    pub softmax_split: [&'static KernelDef<SoftmaxParams<T>>; 3],
    pub cross_entropy: [&'static KernelDef<CrossEntropyParams<T>>; 3],
    /// Split strategy, second launch (the first is `softmax_split[0]` over the logits).
    pub cross_entropy_split: &'static KernelDef<CrossEntropyParams<T>>,
    /// Split strategy: (segment statistics, apply) per norm, forward and backward.
    pub layernorm_split: [&'static KernelDef<NormParams<T>>; 2],
    pub rmsnorm_split: [&'static KernelDef<NormParams<T>>; 2],
    pub layernorm_backward_split: [&'static KernelDef<NormBackwardParams<T>>; 2],
    pub rmsnorm_backward_split: [&'static KernelDef<NormBackwardParams<T>>; 2],
    pub softmax_backward: [&'static KernelDef<SoftmaxBackwardParams<T>>; 2],
    pub log_softmax_backward: [&'static KernelDef<SoftmaxBackwardParams<T>>; 2],
    pub layernorm: [&'static KernelDef<NormParams<T>>; 3],
    pub rmsnorm: [&'static KernelDef<NormParams<T>>; 3],
    pub layernorm_backward: [&'static KernelDef<NormBackwardParams<T>>; 3],
    pub rmsnorm_backward: [&'static KernelDef<NormBackwardParams<T>>; 3],
}

/// Index of the kernel that runs `strategy` with launch `cfg` in a `[warp, block,
/// block_small]` triple: the shared strategy runs the block kernel with the cache on; a
/// block-per-row launch of fewer than [`BLOCK_ROW_THREADS`] threads (the block strategy's
/// [`RowStrategy::launch_threads`] for rows that fewer threads cache) runs the small-block
/// kernel, whose group size is the launch's. The split strategy has its own kernels, which
/// launchers pick before this, so reaching it here is refused.
pub fn slot(strategy: RowStrategy, cfg: &LaunchConfig, op: &'static str) -> Result<usize> {
    match strategy {
        RowStrategy::Warp => Ok(0),
        RowStrategy::Block | RowStrategy::Shared if cfg.block.x < BLOCK_ROW_THREADS => Ok(2),
        RowStrategy::Block | RowStrategy::Shared => Ok(1),
        RowStrategy::Split => {
            Err(Error::invalid(op, "the split strategy has no kernel here; use warp, block or shared"))
        }
    }
}

/// The split strategy's launches: `(segments, rows)` blocks for the per-segment pass.
pub fn split_config(rows: usize, cols: usize) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::xy(RowStrategy::segments(cols) as u32, rows as u32),
        block: Dim3::x(RowStrategy::Split.block_threads()),
        shared_bytes: RowStrategy::Split.shared_bytes(cols, 4),
    }
}
