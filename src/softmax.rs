//! `softmax` and `log_softmax` over the last dimension of a row-major matrix.
//!
//! A fully masked row (all -inf) gives 0 (softmax) or -inf (log_softmax), never NaN; a NaN in
//! a row makes that row NaN and no other; huge magnitudes stay finite (the row max is
//! subtracted first). `rows = 0` or `cols = 0` does nothing. Kernels:
//! `gpu-kernels/src/softmax.rs`.

use crate::rows::{
    RowPlan, RowStrategy, Rows, choose, launch_config, row_launch_config, slot, split_config, vectorized, warp_lanes,
};
use crate::{BufMut, BufRef, Context, Float, Result};
use gpu_kernels::Dim3;
use gpu_kernels::device::GlobalMut;
use gpu_kernels::rows::SPLIT_SEGMENT;
use gpu_kernels::softmax::SoftmaxParams;

fn launch<T: Float>(
    ctx: &Context,
    log: bool,
    strategy: Option<RowStrategy>,
    x: BufRef<'_, T>,
    shape: Rows,
    mut y: BufMut<'_, T>,
) -> Result<()> {
    let name = if log { "log_softmax" } else { "softmax" };
    x.check_context(ctx, name)?;
    y.check_context(ctx, name)?;
    shape.check_matrix::<T>(name, "x", x.len())?;
    shape.check_matrix::<T>(name, "y", y.len())?;
    if shape.rows == 0 || shape.cols == 0 {
        return Ok(());
    }
    let plan = RowPlan::cached(T::DTYPE.size());
    let strategy = choose(ctx, name, strategy, plan, shape)?;
    let k = T::row_kernels();
    let mut params = SoftmaxParams {
        rows: shape.rows as u32,
        cols: shape.cols as u32,
        vectorized: vectorized::<T>(shape.cols, &[x.addr(), y.addr()]) as u32,
        lanes: warp_lanes(shape.cols, T::DTYPE.size()),
        x: x.global(),
        y: y.global_mut(),
        segment: SPLIT_SEGMENT,
        partial: GlobalMut::empty(),
        shared: (strategy == RowStrategy::Shared) as u32,
    };
    if strategy != RowStrategy::Split {
        let cfg = row_launch_config(strategy, shape, plan, params.lanes);
        let i = slot(strategy, &cfg, name)?;
        return ctx.launch(if log { k.log_softmax[i] } else { k.softmax[i] }, cfg, params);
    }
    let words = shape.rows * RowStrategy::segments(shape.cols) * 2;
    ctx.with_scratch(words, |partial| {
        params.partial = partial;
        let cfg = split_config(shape.rows, shape.cols);
        ctx.launch(k.softmax_split[0], cfg, params)?;
        ctx.launch(k.softmax_split[if log { 2 } else { 1 }], cfg, params)
    })
}

/// `y = softmax(x)` per row. `strategy: None` picks by shape ([`RowStrategy::select`]).
pub fn softmax_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    x: BufRef<'_, T>,
    shape: Rows,
    y: BufMut<'_, T>,
) -> Result<()> {
    launch(ctx, false, strategy, x, shape, y)
}

/// `y = log_softmax(x)` per row.
pub fn log_softmax_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    x: BufRef<'_, T>,
    shape: Rows,
    y: BufMut<'_, T>,
) -> Result<()> {
    launch(ctx, true, strategy, x, shape, y)
}

/// Softmax per row; see [`softmax_with`].
pub fn softmax<T: Float>(ctx: &Context, x: BufRef<'_, T>, shape: Rows, y: BufMut<'_, T>) -> Result<()> {
    softmax_with(ctx, None, x, shape, y)
}

/// Log-softmax per row; see [`log_softmax_with`].
pub fn log_softmax<T: Float>(ctx: &Context, x: BufRef<'_, T>, shape: Rows, y: BufMut<'_, T>) -> Result<()> {
    log_softmax_with(ctx, None, x, shape, y)
}

fn backward<T: Float>(
    ctx: &Context,
    log: bool,
    strategy: Option<RowStrategy>,
    y: BufRef<'_, T>,
    dy: BufRef<'_, T>,
    shape: Rows,
    mut dx: BufMut<'_, T>,
) -> Result<()> {
    let name = if log { "log_softmax_backward" } else { "softmax_backward" };
    y.check_context(ctx, name)?;
    dy.check_context(ctx, name)?;
    dx.check_context(ctx, name)?;
    shape.check_matrix::<T>(name, "y", y.len())?;
    shape.check_matrix::<T>(name, "dy", dy.len())?;
    shape.check_matrix::<T>(name, "dx", dx.len())?;
    if shape.rows == 0 || shape.cols == 0 {
        return Ok(());
    }
    let strategy = choose(ctx, name, strategy, RowPlan::BLOCK_ONLY, shape)?;
    let params = gpu_kernels::softmax::SoftmaxBackwardParams {
        rows: shape.rows as u32,
        cols: shape.cols as u32,
        vectorized: vectorized::<T>(shape.cols, &[y.addr(), dy.addr(), dx.addr()]) as u32,
        y: y.global(),
        dy: dy.global(),
        dx: dx.global_mut(),
    };
    // The backward keeps 512 threads per row at every length: with the fewest that cache the
    // row (`launch_config`'s choice for the other row ops) the H200 ran f32 softmax_backward
    // over 32768 x 4096 at 0.81 of copy where 512 ran 0.98 (2026-12-04).
    let mut cfg = launch_config(strategy, shape, RowPlan::BLOCK_ONLY);
    cfg.block = Dim3::x(strategy.block_threads());
    let (k, i) = (T::row_kernels(), slot(strategy, &cfg, name)?);
    ctx.launch(if log { k.log_softmax_backward[i] } else { k.softmax_backward[i] }, cfg, params)
}

/// Softmax backward from the forward's output `y`: `dx = y (dy - sum(dy y))` per row.
pub fn softmax_backward_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    y: BufRef<'_, T>,
    dy: BufRef<'_, T>,
    shape: Rows,
    dx: BufMut<'_, T>,
) -> Result<()> {
    backward(ctx, false, strategy, y, dy, shape, dx)
}

/// Log-softmax backward from the forward's output `y`: `dx = dy - e^y sum(dy)` per row.
pub fn log_softmax_backward_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    y: BufRef<'_, T>,
    dy: BufRef<'_, T>,
    shape: Rows,
    dx: BufMut<'_, T>,
) -> Result<()> {
    backward(ctx, true, strategy, y, dy, shape, dx)
}
