//! `layernorm` and `rmsnorm`, forward and backward. Statistics (`mean`, `rstd`) and parameter
//! gradients (`dgamma`, `dbeta`) are f32; activations use the input type. Parameter
//! gradients are bitwise deterministic (no atomics: per-group partial sums, then a fixed-order
//! column sum). `rows = 0` does nothing; `cols = 0` and a negative or non-finite `eps` are
//! errors. Strategies: a warp or a block per row (the forward caches the row in registers, or
//! in shared memory with the shared strategy), or for few long rows the split strategy:
//! several blocks per row, per-segment partial results in the context's scratch, and a second
//! launch that combines them in a fixed order. Kernels: `gpu-kernels/src/norm.rs`.

use crate::rows::{
    RowPlan, RowStrategy, Rows, choose, launch_config, row_launch_config, shared_limit, slot, split_config, vectorized,
    warp_lanes,
};
use crate::{BufMut, BufRef, Context, Dim3, Error, Float, LaunchConfig, Result};
use gpu_kernels::device::{Global, GlobalMut};
use gpu_kernels::norm::{
    COLUMN_SUM, COLUMN_SUM_THREADS, ColumnSumParams, NormBackwardParams, NormParams, backward_sums_bytes,
};
use gpu_kernels::rows::{SPLIT_SEGMENT, TARGET_SMS};

/// A forward norm's inputs. `beta` is layernorm's shift (`None` for rmsnorm).
#[derive(Clone, Copy)]
pub struct NormInput<'a, T: Float> {
    pub x: BufRef<'a, T>,
    pub gamma: BufRef<'a, T>,
    pub beta: Option<BufRef<'a, T>>,
    pub shape: Rows,
    pub eps: f32,
}

/// A backward norm's inputs: the forward's `x`, `gamma` and saved statistics, and `dy`.
/// `mean` is layernorm's (`None` for rmsnorm).
#[derive(Clone, Copy)]
pub struct NormGrad<'a, T: Float> {
    pub dy: BufRef<'a, T>,
    pub x: BufRef<'a, T>,
    pub gamma: BufRef<'a, T>,
    pub mean: Option<BufRef<'a, f32>>,
    pub rstd: BufRef<'a, f32>,
    pub shape: Rows,
}

/// Most row groups a backward launch uses: each needs a partial row of `cols` (x2) f32.
pub const MAX_BACKWARD_GROUPS: usize = 1024;
/// Most row groups of a block-streaming backward (rows past the block's registers): their
/// partial rows are long (at 32768 columns, 1024 rmsnorm groups wrote and summed 134 MB, a
/// sixth of the f16 rows' own 805 MB), and 528 groups (four waves of one 512-thread block per
/// SM on an H200) still give every SM rows to the end.
pub const STREAM_BACKWARD_GROUPS: usize = SPLIT_BACKWARD_BLOCKS;

fn check_cols(op: &'static str, shape: Rows) -> Result<()> {
    if shape.cols == 0 {
        return Err(Error::invalid(op, "cols = 0: a norm over no elements is undefined; pass at least one column"));
    }
    Ok(())
}

fn forward<T: Float>(
    ctx: &Context,
    op: &'static str,
    strategy: Option<RowStrategy>,
    input: NormInput<'_, T>,
    mut y: BufMut<'_, T>,
    mean: Option<BufMut<'_, f32>>,
    mut rstd: BufMut<'_, f32>,
) -> Result<()> {
    let NormInput { x, gamma, beta, shape, eps } = input;
    let layer = beta.is_some();
    x.check_context(ctx, op)?;
    gamma.check_context(ctx, op)?;
    y.check_context(ctx, op)?;
    rstd.check_context(ctx, op)?;
    if let Some(b) = &beta {
        b.check_context(ctx, op)?;
    }
    if let Some(m) = &mean {
        m.check_context(ctx, op)?;
    }
    shape.check_matrix::<T>(op, "x", x.len())?;
    shape.check_matrix::<T>(op, "y", y.len())?;
    for (name, len) in [("gamma", Some(gamma.len())), ("beta", beta.as_ref().map(|b| b.len()))] {
        if let Some(len) = len
            && len != shape.cols
        {
            return Err(Error::invalid(
                op,
                format!("{name} has {len} elements but rows have {} columns; it needs one per column", shape.cols),
            ));
        }
    }
    if let Some(m) = &mean {
        shape.check_per_row(op, "mean", m.len())?;
    }
    shape.check_per_row(op, "rstd", rstd.len())?;
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(Error::invalid(op, format!("eps = {eps}: it must be finite and >= 0 (1e-5 is usual)")));
    }
    check_cols(op, shape)?;
    if shape.rows == 0 {
        return Ok(());
    }
    let plan = RowPlan::cached(T::DTYPE.size());
    let strategy = choose(ctx, op, strategy, plan, shape)?;
    let k = T::row_kernels();
    let mut addrs = vec![x.addr(), gamma.addr(), y.addr()];
    addrs.extend(beta.as_ref().map(|b| b.addr()));
    let mut params = NormParams {
        rows: shape.rows as u32,
        cols: shape.cols as u32,
        vectorized: vectorized::<T>(shape.cols, &addrs) as u32,
        // layernorm's warp kernels take a whole warp per row (see gpu_kernels::norm::forward).
        lanes: if layer { gpu_kernels::device::WARP_SIZE } else { warp_lanes(shape.cols, T::DTYPE.size()) },
        eps,
        x: x.global(),
        gamma: gamma.global(),
        beta: beta.map_or(Global::empty(), |b| b.global()),
        y: y.global_mut(),
        mean: mean.map_or(GlobalMut::empty(), |mut m| m.global_mut()),
        rstd: rstd.global_mut(),
        shared: (strategy == RowStrategy::Shared) as u32,
        segment: SPLIT_SEGMENT,
        stats: GlobalMut::empty(),
    };
    if strategy != RowStrategy::Split {
        let cfg = row_launch_config(strategy, shape, plan, params.lanes);
        let i = slot(strategy, &cfg, op)?;
        return ctx.launch(if layer { k.layernorm[i] } else { k.rmsnorm[i] }, cfg, params);
    }
    let split = if layer { k.layernorm_split } else { k.rmsnorm_split };
    ctx.with_scratch(shape.rows * RowStrategy::segments(shape.cols) * 2, |scratch| {
        params.stats = scratch.as_f32();
        let cfg = split_config(shape.rows, shape.cols);
        ctx.launch(split[0], cfg, params)?;
        ctx.launch(split[1], cfg, params)
    })
}

/// `y = (x - mean) * rstd * gamma + beta` per row; saves `mean` and `rstd` (one per row).
pub fn layernorm_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    input: NormInput<'_, T>,
    y: BufMut<'_, T>,
    mean: BufMut<'_, f32>,
    rstd: BufMut<'_, f32>,
) -> Result<()> {
    if input.beta.is_none() {
        return Err(Error::invalid("layernorm", "layernorm needs beta (for no shift, pass zeros; or use rmsnorm)"));
    }
    forward(ctx, "layernorm", strategy, input, y, Some(mean), rstd)
}

/// `y = x * rstd * gamma` per row, `rstd = 1 / sqrt(mean(x^2) + eps)`; saves `rstd`.
pub fn rmsnorm_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    input: NormInput<'_, T>,
    y: BufMut<'_, T>,
    rstd: BufMut<'_, f32>,
) -> Result<()> {
    if input.beta.is_some() {
        return Err(Error::invalid("rmsnorm", "rmsnorm takes no beta; pass None (or use layernorm)"));
    }
    forward(ctx, "rmsnorm", strategy, input, y, None, rstd)
}

/// LayerNorm forward with the strategy picked by shape ([`RowStrategy::select`]).
pub fn layernorm<T: Float>(
    ctx: &Context,
    input: NormInput<'_, T>,
    y: BufMut<'_, T>,
    mean: BufMut<'_, f32>,
    rstd: BufMut<'_, f32>,
) -> Result<()> {
    layernorm_with(ctx, None, input, y, mean, rstd)
}

/// RMSNorm forward with the strategy picked by shape.
pub fn rmsnorm<T: Float>(
    ctx: &Context,
    input: NormInput<'_, T>,
    y: BufMut<'_, T>,
    rstd: BufMut<'_, f32>,
) -> Result<()> {
    rmsnorm_with(ctx, None, input, y, rstd)
}

fn column_sum(
    ctx: &Context,
    partial: Global<f32>,
    start: usize,
    groups: usize,
    cols: usize,
    stride: usize,
    mut out: BufMut<'_, f32>,
) -> Result<()> {
    let blocks = cols.div_ceil(COLUMN_SUM_THREADS as usize).clamp(1, 65535) as u32;
    let params = ColumnSumParams {
        groups: groups as u32,
        cols: cols as u32,
        stride: stride as u32,
        start: start as u32,
        partial,
        out: out.global_mut(),
    };
    let cfg = LaunchConfig { grid: Dim3::x(blocks), block: Dim3::x(COLUMN_SUM_THREADS), shared_bytes: 0 };
    ctx.launch(&COLUMN_SUM, cfg, params)
}

fn backward<T: Float>(
    ctx: &Context,
    op: &'static str,
    strategy: Option<RowStrategy>,
    grad: NormGrad<'_, T>,
    mut dx: BufMut<'_, T>,
    dgamma: BufMut<'_, f32>,
    dbeta: Option<BufMut<'_, f32>>,
) -> Result<()> {
    let NormGrad { dy, x, gamma, mean, rstd, shape } = grad;
    let layer = mean.is_some();
    for v in [&dy, &x, &gamma] {
        v.check_context(ctx, op)?;
    }
    rstd.check_context(ctx, op)?;
    dx.check_context(ctx, op)?;
    dgamma.check_context(ctx, op)?;
    if let Some(m) = &mean {
        m.check_context(ctx, op)?;
    }
    if let Some(b) = &dbeta {
        b.check_context(ctx, op)?;
    }
    shape.check_matrix::<T>(op, "dy", dy.len())?;
    shape.check_matrix::<T>(op, "x", x.len())?;
    shape.check_matrix::<T>(op, "dx", dx.len())?;
    shape.check_per_row(op, "rstd", rstd.len())?;
    if let Some(m) = &mean {
        shape.check_per_row(op, "mean", m.len())?;
    }
    for (name, len) in
        [("gamma", Some(gamma.len())), ("dgamma", Some(dgamma.len())), ("dbeta", dbeta.as_ref().map(|b| b.len()))]
    {
        if let Some(len) = len
            && len != shape.cols
        {
            return Err(Error::invalid(
                op,
                format!("{name} has {len} elements but rows have {} columns; it needs one per column", shape.cols),
            ));
        }
    }
    check_cols(op, shape)?;
    if shape.rows == 0 {
        // No rows: the parameter gradients are sums over nothing.
        let mut dgamma = dgamma;
        dgamma.copy_from_host(&vec![0.0; shape.cols])?;
        if let Some(mut b) = dbeta {
            b.copy_from_host(&vec![0.0; shape.cols])?;
        }
        return Ok(());
    }
    let plan = RowPlan::norm_backward(layer);
    let strategy = choose(ctx, op, strategy, plan, shape)?;
    if strategy == RowStrategy::Split {
        return split_backward(ctx, layer, grad, dx, dgamma, dbeta);
    }
    // Rows past the block's registers stream; each row group then writes a whole partial row
    // of `width` sums, so they get fewer groups than cached rows do.
    let streams = shape.cols > strategy.capacity(plan);
    let rpb = strategy.rows_per_block() as usize;
    let max_groups = if streams { STREAM_BACKWARD_GROUPS } else { MAX_BACKWARD_GROUPS };
    let blocks = shape.rows.clamp(1, max_groups).div_ceil(rpb);
    let groups = blocks * rpb;
    let width = shape.cols * if layer { 2 } else { 1 };
    let mut cfg = launch_config(strategy, shape, plan);
    cfg.grid = Dim3::x(blocks as u32);
    let (k, i) = (T::row_kernels(), slot(strategy, &cfg, op)?);
    let def = if layer { k.layernorm_backward[i] } else { k.rmsnorm_backward[i] };
    // Streamed rows keep their parameter sums in shared memory while they fit; past that the
    // automatic choice is split, and a forced block strategy (or more rows than split's grid
    // takes) updates them in the partial row, in global memory, once per row.
    let sums_bytes = backward_sums_bytes(shape.cols, layer);
    let shared = strategy == RowStrategy::Block && streams && sums_bytes <= shared_limit(ctx) as usize;
    // The per-group partial gradients live in the context's scratch: no allocation and no
    // wait per call (the stream orders the reuse).
    ctx.with_scratch(groups * width, |scratch| {
        let partial = scratch.as_f32();
        let params = NormBackwardParams {
            rows: shape.rows as u32,
            cols: shape.cols as u32,
            vectorized: vectorized::<T>(shape.cols, &[dy.addr(), x.addr(), gamma.addr(), dx.addr()]) as u32,
            x: x.global(),
            dy: dy.global(),
            gamma: gamma.global(),
            mean: mean.map_or(Global::empty(), |m| m.global()),
            rstd: rstd.global(),
            dx: dx.global_mut(),
            partial,
            shared: shared as u32,
            segment: SPLIT_SEGMENT,
            stats: GlobalMut::empty(),
        };
        let mut cfg = cfg;
        if shared {
            cfg.shared_bytes = sums_bytes as u32;
        }
        ctx.launch(def, cfg, params)?;
        column_sum(ctx, partial.as_global(), 0, groups, shape.cols, width, dgamma)?;
        if let Some(b) = dbeta {
            column_sum(ctx, partial.as_global(), shape.cols, groups, shape.cols, width, b)?;
        }
        Ok(())
    })
}

/// Blocks the split backward's second launch aims for: 4 per SM, enough to fill the GPU,
/// while the row groups (and so the partial rows written and summed) stay few.
pub const SPLIT_BACKWARD_BLOCKS: usize = 4 * TARGET_SMS;

/// Row groups of the split backward for `shape`: enough `(segment, group)` blocks for
/// [`SPLIT_BACKWARD_BLOCKS`], at most one group per row.
pub fn split_backward_groups(shape: Rows) -> usize {
    SPLIT_BACKWARD_BLOCKS.div_ceil(RowStrategy::segments(shape.cols)).clamp(1, shape.rows.max(1))
}

/// The split strategy's backward: per-(row, segment) sums, then `(segment, group)` blocks
/// writing dx and per-group partial parameter gradients, then the fixed-order column sums.
/// The context's scratch holds the `rows * segments * 2` sums, then `groups * width` partials.
fn split_backward<T: Float>(
    ctx: &Context,
    layer: bool,
    grad: NormGrad<'_, T>,
    mut dx: BufMut<'_, T>,
    dgamma: BufMut<'_, f32>,
    dbeta: Option<BufMut<'_, f32>>,
) -> Result<()> {
    let NormGrad { dy, x, gamma, mean, rstd, shape } = grad;
    let segments = RowStrategy::segments(shape.cols);
    let groups = split_backward_groups(shape);
    let width = shape.cols * if layer { 2 } else { 1 };
    // Partials first (16-byte aligned), then the sums.
    let stats_at = (groups * width).next_multiple_of(4);
    let k = T::row_kernels();
    let split = if layer { k.layernorm_backward_split } else { k.rmsnorm_backward_split };
    ctx.with_scratch(stats_at + shape.rows * segments * 2, |scratch| {
        let all = scratch.as_f32();
        let (partial, stats) = all.split_at(stats_at);
        let params = NormBackwardParams {
            rows: shape.rows as u32,
            cols: shape.cols as u32,
            vectorized: vectorized::<T>(shape.cols, &[dy.addr(), x.addr(), gamma.addr(), dx.addr()]) as u32,
            x: x.global(),
            dy: dy.global(),
            gamma: gamma.global(),
            mean: mean.map_or(Global::empty(), |m| m.global()),
            rstd: rstd.global(),
            dx: dx.global_mut(),
            partial,
            shared: 0,
            segment: SPLIT_SEGMENT,
            stats,
        };
        let cfg = split_config(shape.rows, shape.cols);
        ctx.launch(split[0], cfg, params)?;
        ctx.launch(split[1], LaunchConfig { grid: Dim3::xy(segments as u32, groups as u32), ..cfg }, params)?;
        column_sum(ctx, partial.as_global(), 0, groups, shape.cols, width, dgamma)?;
        if let Some(b) = dbeta {
            column_sum(ctx, partial.as_global(), shape.cols, groups, shape.cols, width, b)?;
        }
        Ok(())
    })
}

/// LayerNorm backward: `dx`, and the parameter gradients `dgamma`, `dbeta` (f32).
pub fn layernorm_backward_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    grad: NormGrad<'_, T>,
    dx: BufMut<'_, T>,
    dgamma: BufMut<'_, f32>,
    dbeta: BufMut<'_, f32>,
) -> Result<()> {
    if grad.mean.is_none() {
        return Err(Error::invalid("layernorm_backward", "needs the forward's saved mean"));
    }
    backward(ctx, "layernorm_backward", strategy, grad, dx, dgamma, Some(dbeta))
}

/// RMSNorm backward: `dx` and `dgamma` (f32).
pub fn rmsnorm_backward_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    grad: NormGrad<'_, T>,
    dx: BufMut<'_, T>,
    dgamma: BufMut<'_, f32>,
) -> Result<()> {
    if grad.mean.is_some() {
        return Err(Error::invalid("rmsnorm_backward", "rmsnorm has no mean; pass None"));
    }
    backward(ctx, "rmsnorm_backward", strategy, grad, dx, dgamma, None)
}

/// LayerNorm backward with the strategy picked by shape.
pub fn layernorm_backward<T: Float>(
    ctx: &Context,
    grad: NormGrad<'_, T>,
    dx: BufMut<'_, T>,
    dgamma: BufMut<'_, f32>,
    dbeta: BufMut<'_, f32>,
) -> Result<()> {
    layernorm_backward_with(ctx, None, grad, dx, dgamma, dbeta)
}

/// RMSNorm backward with the strategy picked by shape.
pub fn rmsnorm_backward<T: Float>(
    ctx: &Context,
    grad: NormGrad<'_, T>,
    dx: BufMut<'_, T>,
    dgamma: BufMut<'_, f32>,
) -> Result<()> {
    rmsnorm_backward_with(ctx, None, grad, dx, dgamma)
}
