//! Row reductions: `sum` (f32 result), `max` (result in the input type, NaN-propagating) and
//! `argmax` (u32 index of the first maximum; NaN counts as the maximum).
//!
//! Every function checks its views first and returns `Error::InvalidArgument` naming the
//! mismatch. `rows = 0` does nothing; `cols = 0` gives sums of 0 and is an error for max and
//! argmax (there is no maximum of nothing). Kernels: `gpu-kernels/src/reduce.rs`.

use crate::rows::{RowPlan, RowStrategy, Rows, choose, row_launch_config, slot, split_config, vectorized, warp_lanes};
use crate::{BufMut, BufRef, Context, Dim3, Error, Float, LaunchConfig, Result};
use gpu_kernels::device::GlobalMut;
use gpu_kernels::reduce::ReduceParams;
use gpu_kernels::rows::{SPLIT_FINAL_THREADS, SPLIT_SEGMENT};

/// Which reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    Sum,
    Max,
    Argmax,
}

impl Reduction {
    pub const fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Max => "max",
            Reduction::Argmax => "argmax",
        }
    }
}

/// A reduction's output, which also names the reduction.
enum Output<'a, T: Float> {
    Sum(BufMut<'a, f32>),
    Max(BufMut<'a, T>),
    Argmax(BufMut<'a, u32>),
}

fn launch<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    x: BufRef<'_, T>,
    shape: Rows,
    out: Output<'_, T>,
) -> Result<()> {
    let (op, out_len) = match &out {
        Output::Sum(v) => (Reduction::Sum, v.len()),
        Output::Max(v) => (Reduction::Max, v.len()),
        Output::Argmax(v) => (Reduction::Argmax, v.len()),
    };
    let name = op.name();
    x.check_context(ctx, name)?;
    match &out {
        Output::Sum(v) => v.check_context(ctx, name)?,
        Output::Max(v) => v.check_context(ctx, name)?,
        Output::Argmax(v) => v.check_context(ctx, name)?,
    }
    shape.check_matrix::<T>(name, "x", x.len())?;
    shape.check_per_row(name, "the output", out_len)?;
    if shape.cols == 0 && op != Reduction::Sum {
        return Err(Error::invalid(name, "cols = 0: a row with no elements has no maximum; pass at least one column"));
    }
    if shape.rows == 0 {
        return Ok(());
    }
    let mut strategy = choose(ctx, name, strategy, RowPlan::ONE_PASS, shape)?;
    if shape.cols == 0 {
        // Nothing to split: every row's sum is 0, which block-per-row writes directly.
        strategy = RowStrategy::Block;
    }
    let kernels = T::row_kernels();
    let mut params = ReduceParams {
        rows: shape.rows as u32,
        cols: shape.cols as u32,
        vectorized: vectorized::<T>(shape.cols, &[x.addr()]) as u32,
        x: x.global(),
        sum: GlobalMut::empty(),
        max: GlobalMut::empty(),
        argmax: GlobalMut::empty(),
        lanes: warp_lanes(shape.cols, T::DTYPE.size()),
        segment: SPLIT_SEGMENT,
        partial: GlobalMut::empty(),
    };
    let (pair, split) = match out {
        Output::Sum(mut v) => {
            params.sum = v.global_mut();
            (kernels.sum, kernels.sum_split)
        }
        Output::Max(mut v) => {
            params.max = v.global_mut();
            (kernels.max, kernels.max_split)
        }
        Output::Argmax(mut v) => {
            params.argmax = v.global_mut();
            (kernels.argmax, kernels.argmax_split)
        }
    };
    if strategy != RowStrategy::Split {
        let cfg = row_launch_config(strategy, shape, RowPlan::ONE_PASS, params.lanes);
        return ctx.launch(pair[slot(strategy, &cfg, name)?], cfg, params);
    }
    let words = shape.rows * RowStrategy::segments(shape.cols) * 3;
    ctx.with_scratch(words, |partial| {
        params.partial = partial;
        ctx.launch(split[0], split_config(shape.rows, shape.cols), params)?;
        let fin =
            LaunchConfig { grid: Dim3::x(shape.rows as u32), block: Dim3::x(SPLIT_FINAL_THREADS), shared_bytes: 0 };
        ctx.launch(split[1], fin, params)
    })
}

/// `out[r] = sum of row r`, accumulated in f32. `strategy: None` picks by row length.
pub fn sum_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    x: BufRef<'_, T>,
    shape: Rows,
    out: BufMut<'_, f32>,
) -> Result<()> {
    launch(ctx, strategy, x, shape, Output::Sum(out))
}

/// `out[r] = max of row r` (NaN if the row has a NaN).
pub fn max_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    x: BufRef<'_, T>,
    shape: Rows,
    out: BufMut<'_, T>,
) -> Result<()> {
    launch(ctx, strategy, x, shape, Output::Max(out))
}

/// `out[r] = index of the first maximum of row r` (a NaN counts as the maximum).
pub fn argmax_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    x: BufRef<'_, T>,
    shape: Rows,
    out: BufMut<'_, u32>,
) -> Result<()> {
    launch(ctx, strategy, x, shape, Output::Argmax(out))
}

/// Row sums; see [`sum_with`].
pub fn sum<T: Float>(ctx: &Context, x: BufRef<'_, T>, shape: Rows, out: BufMut<'_, f32>) -> Result<()> {
    sum_with(ctx, None, x, shape, out)
}

/// Row maxima; see [`max_with`].
pub fn max<T: Float>(ctx: &Context, x: BufRef<'_, T>, shape: Rows, out: BufMut<'_, T>) -> Result<()> {
    max_with(ctx, None, x, shape, out)
}

/// Row argmax; see [`argmax_with`].
pub fn argmax<T: Float>(ctx: &Context, x: BufRef<'_, T>, shape: Rows, out: BufMut<'_, u32>) -> Result<()> {
    argmax_with(ctx, None, x, shape, out)
}
