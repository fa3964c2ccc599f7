//! Fused cross-entropy over logits `[rows x vocab]` and integer targets: per-row loss (f32)
//! and, optionally, the gradient w.r.t. the logits, `(softmax - onehot(target)) * grad_scale`,
//! from one read of each row when it fits in registers (vocabularies up to 8192; longer rows
//! take a second read). Rows whose target equals `ignore_index` get loss 0 and gradient 0.
//!
//! With `check_targets`, targets are checked before the launch: every target must be in
//! `0..vocab` or equal to `ignore_index`. That check downloads the targets (4 bytes per row)
//! and waits for them; without it the kernel's own guard gives NaN losses for bad targets.
//! Kernel: `gpu-kernels/src/softmax.rs`.

use crate::rows::{RowStrategy, Rows, launch_config, slot, vectorized};
use crate::{BufMut, BufRef, Context, Error, Float, Result};
use gpu_kernels::device::GlobalMut;
use gpu_kernels::softmax::CrossEntropyParams;

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
    let strategy = strategy.unwrap_or(RowStrategy::for_cols(shape.cols));
    let mut addrs = vec![logits.addr()];
    addrs.extend(dlogits.as_ref().map(|d| d.addr()));
    let write_grad = dlogits.is_some();
    let params = CrossEntropyParams {
        rows: shape.rows as u32,
        cols: shape.cols as u32,
        vectorized: vectorized::<T>(shape.cols, &addrs) as u32,
        has_ignore: ignore_index.is_some() as u32,
        ignore_index: ignore_index.unwrap_or(0),
        write_grad: write_grad as u32,
        grad_scale,
        logits: logits.global(),
        targets: targets.global(),
        loss: loss.global_mut(),
        dlogits: dlogits.map_or(GlobalMut::empty(), |mut d| d.global_mut()),
    };
    ctx.launch(T::row_kernels().cross_entropy[slot(strategy, OP)?], launch_config(strategy, shape.rows), params)
}

/// Cross-entropy with the strategy picked by vocabulary size.
pub fn cross_entropy<T: Float>(
    ctx: &Context,
    input: CrossEntropyInput<'_, T>,
    loss: BufMut<'_, f32>,
    dlogits: Option<BufMut<'_, T>>,
) -> Result<()> {
    cross_entropy_with(ctx, None, input, loss, dlogits)
}
