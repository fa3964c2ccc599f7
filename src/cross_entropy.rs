//! Fused cross-entropy over logits `[rows x vocab]` and integer targets: per-row loss (f32)
//! and, optionally, the gradient w.r.t. the logits, `(softmax - onehot(target)) * grad_scale`,
//! from one read of each row when it fits in registers (vocabularies up to 8192, or 16384 in
//! f16/bf16 with the gradient) or, with the gradient, in shared memory (the shared
//! strategy); longer rows take a second read. Few
//! rows of long vocabularies (fewer than 512, or than 88 where shared memory holds the row,
//! over 32768 columns) take the split strategy: per-segment statistics (softmax's kernel),
//! then a launch that combines them in a fixed order and writes the loss and gradient.
//! Rows whose target equals `ignore_index` get loss 0 and gradient 0.
//!
//! With `check_targets`, targets are checked before the launch: every target must be in
//! `0..vocab` or equal to `ignore_index`. That check downloads the targets (4 bytes per row)
//! and waits for them; without it the kernel's own guard gives NaN losses for bad targets.
//! Kernel: `gpu-kernels/src/softmax.rs`.

use crate::rows::{RowPlan, RowStrategy, Rows, choose, row_launch_config, slot, split_config, vectorized, warp_lanes};
use crate::{BufMut, BufRef, Context, Dim3, Error, Float, LaunchConfig, Result};
use gpu_kernels::device::{Global, GlobalMut};
use gpu_kernels::rows::SPLIT_SEGMENT;
use gpu_kernels::softmax::{CrossEntropyParams, SoftmaxParams};

/// Cross-entropy's inputs.
#[derive(Clone, Copy)]
pub struct CrossEntropyInput<'a, T: Float> {
    pub logits: BufRef<'a, T>,
    pub targets: BufRef<'a, i32>,
    /// `rows` x `vocab`.
    pub shape: Rows,
    pub ignore_index: Option<i32>,
    /// Multiplies the gradient (1 / rows for a mean loss; 1 for a sum).
    pub grad_scale: f32,
    /// `true`: download the targets and refuse invalid ones with a typed error before
    /// launching (a device-to-host copy and a wait). `false`: trust them; the kernel still
    /// guards every target and writes a NaN loss for an invalid one instead of reading out
    /// of bounds.
    pub check_targets: bool,
}

/// Loss per row into `loss`, and the logits' gradient into `dlogits` when given.
pub fn cross_entropy_with<T: Float>(
    ctx: &Context,
    strategy: Option<RowStrategy>,
    input: CrossEntropyInput<'_, T>,
    mut loss: BufMut<'_, f32>,
    dlogits: Option<BufMut<'_, T>>,
) -> Result<()> {
    const OP: &str = "cross_entropy";
    let CrossEntropyInput { logits, targets, shape, ignore_index, grad_scale, check_targets } = input;
    logits.check_context(ctx, OP)?;
    targets.check_context(ctx, OP)?;
    loss.check_context(ctx, OP)?;
    if let Some(d) = &dlogits {
        d.check_context(ctx, OP)?;
        shape.check_matrix::<T>(OP, "dlogits", d.len())?;
    }
    shape.check_matrix::<T>(OP, "logits", logits.len())?;
    shape.check_per_row(OP, "targets", targets.len())?;
    shape.check_per_row(OP, "loss", loss.len())?;
    if !grad_scale.is_finite() {
        return Err(Error::invalid(
            OP,
            format!("grad_scale = {grad_scale}: pass a finite scale (1 / rows for a mean loss)"),
        ));
    }
    if shape.rows == 0 {
        return Ok(());
    }
    if shape.cols == 0 {
        return Err(Error::invalid(OP, "vocab = 0: there is no class to predict; pass at least one column"));
    }
    let t = if check_targets { targets.to_host()? } else { Vec::new() };
    if let Some((row, &bad)) =
        t.iter().enumerate().find(|(_, v)| Some(**v) != ignore_index && !(0..shape.cols as i64).contains(&(**v as i64)))
    {
        let ignore = ignore_index.map_or("no ignore_index is set".to_string(), |i| format!("ignore_index is {i}"));
        return Err(Error::invalid(
            OP,
            format!(
                "target {bad} at row {row} is outside 0..{} ({ignore}); fix the target or pass it as ignore_index",
                shape.cols
            ),
        ));
    }
    let write_grad = dlogits.is_some();
    // Without the gradient a row is read once (online statistics): nothing to cache.
    let plan = if write_grad { RowPlan::cached(T::DTYPE.size()) } else { RowPlan::ONE_PASS };
    let strategy = choose(ctx, OP, strategy, plan, shape)?;
    let mut addrs = vec![logits.addr()];
    addrs.extend(dlogits.as_ref().map(|d| d.addr()));
    let mut params = CrossEntropyParams {
        rows: shape.rows as u32,
        cols: shape.cols as u32,
        vectorized: vectorized::<T>(shape.cols, &addrs) as u32,
        lanes: warp_lanes(shape.cols, T::DTYPE.size()),
        has_ignore: ignore_index.is_some() as u32,
        ignore_index: ignore_index.unwrap_or(0),
        write_grad: write_grad as u32,
        grad_scale,
        logits: logits.global(),
        targets: targets.global(),
        loss: loss.global_mut(),
        dlogits: dlogits.map_or(GlobalMut::empty(), |mut d| d.global_mut()),
        shared: (strategy == RowStrategy::Shared) as u32,
        segment: SPLIT_SEGMENT,
        partial: Global::empty(),
    };
    let k = T::row_kernels();
    if strategy != RowStrategy::Split {
        let cfg = row_launch_config(strategy, shape, plan, params.lanes);
        return ctx.launch(k.cross_entropy[slot(strategy, &cfg, OP)?], cfg, params);
    }
    let words = shape.rows * RowStrategy::segments(shape.cols) * 2;
    ctx.with_scratch(words, |partial| {
        let stats = SoftmaxParams {
            rows: params.rows,
            cols: params.cols,
            vectorized: vectorized::<T>(shape.cols, &[logits.addr()]) as u32,
            lanes: params.lanes,
            x: params.logits,
            y: GlobalMut::empty(),
            segment: SPLIT_SEGMENT,
            partial,
            shared: 0,
        };
        let cfg = split_config(shape.rows, shape.cols);
        ctx.launch(k.softmax_split[0], cfg, stats)?;
        params.partial = partial.as_global();
        // Without the gradient only the loss is left: one block per row.
        let apply = if write_grad { cfg } else { LaunchConfig { grid: Dim3::xy(1, shape.rows as u32), ..cfg } };
        ctx.launch(k.cross_entropy_split, apply, params)
    })
}

/// Cross-entropy with the strategy picked by shape ([`RowStrategy::select`]).
pub fn cross_entropy<T: Float>(
    ctx: &Context,
    input: CrossEntropyInput<'_, T>,
    loss: BufMut<'_, f32>,
    dlogits: Option<BufMut<'_, T>>,
) -> Result<()> {
    cross_entropy_with(ctx, None, input, loss, dlogits)
}
