//! One checked run of an op on fresh random inputs: what `ferrokern verify`, the test suite
//! and the bench's correctness sweep all call, so what is tested is what ships.

use crate::check::{self, Guarded, Report};
use crate::elementwise::{self as ew, Op};
use crate::rows::{RowStrategy, Rows};
use crate::{BufRef, Context, DType, Error, Float, Result, reference};
use gpu_kernels::KernelDef;
use gpu_kernels::elementwise::ElementwiseParams;
use half::{bf16, f16};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Ops that exist today, as `ferrokern verify` names them.
pub const AVAILABLE: &[&str] = &[
    "axpy",
    "scale",
    "add",
    "mul",
    "gelu",
    "silu",
    "swiglu",
    "sum",
    "max",
    "argmax",
    "softmax",
    "log_softmax",
    "softmax_backward",
    "log_softmax_backward",
    "cross_entropy",
    "layernorm",
    "layernorm_backward",
    "rmsnorm",
    "rmsnorm_backward",
    "gemm",
    "attention",
    "attention_backward",
    "paged_decode",
];

/// Ops planned by open issues: asking for one is a clear error, not a crash.
pub const PLANNED: &[(&str, &str)] = &[];

/// How to draw input values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Values {
    /// Mostly moderate values, some wide magnitudes, no NaN or infinity.
    Finite,
    /// As `Finite`, plus zeros, NaN and infinities (row ops: -inf often, as masking, and
    /// some rows entirely -inf).
    WithSpecials,
    /// Magnitudes near the type's limit: +-1e30 (f32, bf16) or +-6e4 (f16).
    Huge,
}

/// One elementwise case.
#[derive(Clone, Copy, Debug)]
pub struct ElementwiseCase {
    pub op: Op,
    pub dtype: DType,
    pub len: usize,
    pub seed: u64,
    /// Elements to shift every view by from its allocation's start: nonzero offsets make the
    /// views misaligned, which exercises the scalar path.
    pub offset: usize,
    pub values: Values,
}

fn draw<T: Float>(rng: &mut SmallRng, values: Values) -> T {
    let r: f64 = rng.random();
    let sign = if rng.random::<bool>() { 1.0 } else { -1.0 };
    if values == Values::Huge {
        let top = if T::DTYPE == DType::F16 { 6.0e4 } else { 1.0e30 };
        return T::from_f64(sign * top * rng.random_range(0.5..1.0));
    }
    let v = if values == Values::WithSpecials && r < 0.04 {
        [0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY][rng.random_range(0..5)]
    } else if r < 0.15 {
        // Wide magnitudes, inside the type's range: 1e-6 .. 3e4 (f16's max is 65504).
        sign * 10f64.powf(rng.random_range(-6.0..4.5))
    } else {
        rng.random_range(-8.0..8.0)
    };
    T::from_f64(v)
}

fn random_vec<T: Float>(rng: &mut SmallRng, n: usize, values: Values) -> Vec<T> {
    (0..n).map(|_| draw(rng, values)).collect()
}

/// Uploads `data` at `offset` elements into a fresh buffer (the first `offset` are padding).
fn upload_at<T: Float>(ctx: &Context, data: &[T], offset: usize) -> Result<crate::DeviceBuffer<T>> {
    let mut host = vec![T::from_bits32(T::GUARD_BITS); offset];
    host.extend_from_slice(data);
    ctx.upload(&host)
}

fn view_at<T: Float>(b: &crate::DeviceBuffer<T>, offset: usize) -> BufRef<'_, T> {
    b.view(offset..b.len()).expect("in range by construction")
}

/// Runs `case` with `kernel` (normally the op's own; tests pass deliberately broken ones).
pub fn elementwise_with<T: Float>(
    ctx: &Context,
    case: &ElementwiseCase,
    kernel: &'static KernelDef<ElementwiseParams<T>>,
) -> Result<Report> {
    elementwise_outputs(ctx, case, kernel).map(|(r, _)| r)
}

/// As [`elementwise_with`], also returning the output (for comparing backends bit by bit).
pub fn elementwise_outputs<T: Float>(
    ctx: &Context,
    case: &ElementwiseCase,
    kernel: &'static KernelDef<ElementwiseParams<T>>,
) -> Result<(Report, Vec<T>)> {
    let mut rng = SmallRng::seed_from_u64(case.seed);
    let n = case.len;
    let op = case.op;
    let alpha = if op.uses_alpha() { rng.random_range(-4.0f32..4.0) } else { 0.0 };
    let a = random_vec::<T>(&mut rng, n, case.values);
    let b = random_vec::<T>(&mut rng, n, case.values);
    let a_buf = upload_at(ctx, &a, case.offset)?;
    let b_buf = upload_at(ctx, &b, case.offset)?;
    // axpy updates y in place: its output starts as b (y); every other op's starts poisoned.
    let mut out = if op == Op::Axpy { Guarded::with_data(ctx, &b)? } else { Guarded::poisoned(ctx, n)? };
    let second = (op.inputs() == 2 && op != Op::Axpy).then(|| view_at(&b_buf, case.offset));
    ew::launch_with(ctx, kernel, op, alpha, view_at(&a_buf, case.offset), second, out.view_mut())?;
    let (got, guard) = out.finish()?;
    let (want, bound): (Vec<f64>, Vec<f64>) = a
        .iter()
        .zip(&b)
        .map(|(x, y)| {
            let (x, y) = (x.to_f64(), y.to_f64());
            let w = reference::elementwise(op, alpha as f64, x, y);
            (w, reference::elementwise_f32_error(op, x, y, w))
        })
        .unzip();
    // axpy's y starts as data, not poison: an unwritten y fails the comparison unless
    // alpha * x rounds away against y, so the suite's other ops carry the poison check.
    Ok((check::compare(&got, &want, &bound, guard), got))
}

/// Runs `case` with the op's shipped kernel.
pub fn elementwise(ctx: &Context, case: &ElementwiseCase) -> Result<Report> {
    match case.dtype {
        DType::F32 => elementwise_with::<f32>(ctx, case, f32::elementwise_kernel(case.op)),
        DType::F16 => elementwise_with::<f16>(ctx, case, f16::elementwise_kernel(case.op)),
        DType::BF16 => elementwise_with::<bf16>(ctx, case, bf16::elementwise_kernel(case.op)),
        other => Err(Error::invalid(
            case.op.name(),
            format!("dtype {} is not supported; use f32, f16 or bf16", other.name()),
        )),
    }
}

/// The row ops `verify` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowOp {
    Sum,
    Max,
    Argmax,
    Softmax,
    LogSoftmax,
    CrossEntropy,
    LayerNorm,
    LayerNormBackward,
    RmsNorm,
    RmsNormBackward,
    SoftmaxBackward,
    LogSoftmaxBackward,
}

impl RowOp {
    pub const ALL: [RowOp; 12] = [
        RowOp::Sum,
        RowOp::Max,
        RowOp::Argmax,
        RowOp::Softmax,
        RowOp::LogSoftmax,
        RowOp::CrossEntropy,
        RowOp::LayerNorm,
        RowOp::LayerNormBackward,
        RowOp::RmsNorm,
        RowOp::RmsNormBackward,
        RowOp::SoftmaxBackward,
        RowOp::LogSoftmaxBackward,
    ];
    pub const fn name(self) -> &'static str {
        match self {
            RowOp::Sum => "sum",
            RowOp::Max => "max",
            RowOp::Argmax => "argmax",
            RowOp::Softmax => "softmax",
            RowOp::LogSoftmax => "log_softmax",
            RowOp::CrossEntropy => "cross_entropy",
            RowOp::LayerNorm => "layernorm",
            RowOp::LayerNormBackward => "layernorm_backward",
            RowOp::RmsNorm => "rmsnorm",
            RowOp::RmsNormBackward => "rmsnorm_backward",
            RowOp::SoftmaxBackward => "softmax_backward",
            RowOp::LogSoftmaxBackward => "log_softmax_backward",
        }
    }

    /// Ops checked on finite inputs only (norms, backward passes): NaN, infinities and
    /// masking are forward-softmax and reduction semantics.
    pub const fn finite_only(self) -> bool {
        matches!(
            self,
            RowOp::LayerNorm
                | RowOp::LayerNormBackward
                | RowOp::RmsNorm
                | RowOp::RmsNormBackward
                | RowOp::SoftmaxBackward
                | RowOp::LogSoftmaxBackward
        )
    }
    pub fn from_name(s: &str) -> Option<RowOp> {
        RowOp::ALL.into_iter().find(|o| o.name() == s)
    }

    /// What the strategy choice knows about this op over `elem`-byte elements, as its
    /// launcher passes it (cross_entropy as `verify` and the bench run it: with the gradient).
    pub const fn plan(self, elem: usize) -> crate::rows::RowPlan {
        use crate::rows::RowPlan;
        match self {
            RowOp::Sum | RowOp::Max | RowOp::Argmax => RowPlan::ONE_PASS,
            RowOp::LayerNormBackward => RowPlan::norm_backward(true),
            RowOp::RmsNormBackward => RowPlan::norm_backward(false),
            RowOp::Softmax | RowOp::LogSoftmax | RowOp::CrossEntropy | RowOp::LayerNorm | RowOp::RmsNorm => {
                RowPlan::cached(elem)
            }
            RowOp::SoftmaxBackward | RowOp::LogSoftmaxBackward => RowPlan::BLOCK_ONLY,
        }
    }

    /// The strategy this op's launcher picks on `ctx` for `shape` of `dtype` by default.
    pub fn auto_strategy(self, ctx: &Context, dtype: DType, shape: Rows) -> RowStrategy {
        RowStrategy::select(shape.rows, shape.cols, self.plan(dtype.size()), crate::rows::shared_limit(ctx))
    }
}

/// One row-op case.
#[derive(Clone, Copy, Debug)]
pub struct RowCase {
    pub op: RowOp,
    pub dtype: DType,
    pub shape: Rows,
    pub seed: u64,
    /// Elements to shift the input and output views by (nonzero: misaligned, scalar path).
    pub offset: usize,
    pub values: Values,
    /// Force a strategy (tests cover both on every length); `None` is what users get.
    pub strategy: Option<RowStrategy>,
}

/// Row-op inputs. With specials, each row is one of: fully masked (all -inf, 1 in 8), one NaN
/// (1 in 8), one +inf (1 in 16), or finite values with about 1 in 6 masked to -inf (softmax,
/// log_softmax, cross_entropy) or 1 in 16 set to a signed zero (reductions). Specials
/// are placed per row so long rows still test real values (a per-element NaN rate would make
/// nearly every long row NaN, which would pass trivially).
fn row_inputs<T: Float>(rng: &mut SmallRng, case: &RowCase) -> Vec<T> {
    let Rows { rows, cols } = case.shape;
    // Sums and maxima also see wide magnitudes (cancellation, ties); softmax-like ops and
    // norms get moderate values, since one value of 3e4 in a row would take all the mass
    // and leave nothing to check.
    let wide = matches!(case.op, RowOp::Sum | RowOp::Max | RowOp::Argmax);
    let mut x = Vec::with_capacity(rows * cols);
    for _ in 0..rows {
        let mut row: Vec<T> = (0..cols)
            .map(|_| match case.values {
                Values::Huge => draw::<T>(rng, Values::Huge),
                _ if wide => draw::<T>(rng, Values::Finite),
                _ => T::from_f64(rng.random_range(-8.0..8.0)),
            })
            .collect();
        if case.values == Values::WithSpecials && cols > 0 {
            let at = rng.random_range(0..cols);
            match rng.random_range(0..16) {
                0 | 1 => row.fill(T::from_f64(f64::NEG_INFINITY)),
                2 | 3 => row[at] = T::from_f64(f64::NAN),
                4 => row[at] = T::from_f64(f64::INFINITY),
                // Masking is what softmax-like ops see; a reduction's row stays finite, with
                // signed zeros, so its value is still checked.
                _ if !wide => {
                    for v in row.iter_mut() {
                        if rng.random_range(0..6) == 0 {
                            *v = T::from_f64(f64::NEG_INFINITY);
                        }
                    }
                }
                _ => {
                    for v in row.iter_mut() {
                        if rng.random_range(0..16) == 0 {
                            *v = T::from_f64(if rng.random::<bool>() { 0.0 } else { -0.0 });
                        }
                    }
                }
            }
        }
        x.extend(row);
    }
    x
}

fn rows_t<T: Float>(ctx: &Context, case: &RowCase) -> Result<Report> {
    let mut rng = SmallRng::seed_from_u64(case.seed);
    let shape = case.shape;
    let Rows { rows, cols } = shape;
    let x = row_inputs::<T>(&mut rng, case);
    let x64: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
    let x_buf = upload_at(ctx, &x, case.offset)?;
    let xv = view_at(&x_buf, case.offset);
    let row = |r: usize| &x64[r * cols..(r + 1) * cols];
    Ok(match case.op {
        RowOp::Sum => {
            let mut out = Guarded::<f32>::poisoned(ctx, rows)?;
            crate::reduce::sum_with(ctx, case.strategy, xv, shape, out.view_mut())?;
            let (got, guard) = out.finish()?;
            let want: Vec<f64> = (0..rows).map(|r| reference::sum(row(r))).collect();
            let bound: Vec<f64> = (0..rows)
                .map(|r| {
                    reference::gamma_f32(reference::row_sum_terms(cols)) * row(r).iter().map(|v| v.abs()).sum::<f64>()
                })
                .collect();
            check::compare(&got, &want, &bound, guard)
        }
        RowOp::Max => {
            let mut out = Guarded::<T>::poisoned(ctx, rows)?;
            crate::reduce::max_with(ctx, case.strategy, xv, shape, out.view_mut())?;
            let (got, guard) = out.finish()?;
            let want: Vec<T> = (0..rows).map(|r| T::from_f64(reference::max(row(r)))).collect();
            check::compare_exact(&got, &want, guard)
        }
        RowOp::Argmax => {
            let mut out = Guarded::<u32>::poisoned(ctx, rows)?;
            crate::reduce::argmax_with(ctx, case.strategy, xv, shape, out.view_mut())?;
            let (got, guard) = out.finish()?;
            let want: Vec<u32> = (0..rows).map(|r| reference::argmax(row(r)) as u32).collect();
            check::compare_exact(&got, &want, guard)
        }
        RowOp::Softmax | RowOp::LogSoftmax => {
            let log = case.op == RowOp::LogSoftmax;
            let mut out = Guarded::<T>::poisoned_at(ctx, rows * cols, case.offset)?;
            if log {
                crate::softmax::log_softmax_with(ctx, case.strategy, xv, shape, out.view_mut())?;
            } else {
                crate::softmax::softmax_with(ctx, case.strategy, xv, shape, out.view_mut())?;
            }
            let (got, guard) = out.finish()?;
            let mut want = Vec::with_capacity(rows * cols);
            let mut bound = Vec::with_capacity(rows * cols);
            for r in 0..rows {
                let y = reference::softmax(row(r), log);
                bound.extend(reference::softmax_f32_error(row(r), &y, log));
                want.extend(y);
            }
            check::compare(&got, &want, &bound, guard)
        }
        RowOp::CrossEntropy => cross_entropy_case::<T>(ctx, case, &mut rng, xv, &x64)?,
        RowOp::LayerNorm | RowOp::RmsNorm => norm_forward::<T>(ctx, case, &mut rng, xv, &x64)?,
        RowOp::LayerNormBackward | RowOp::RmsNormBackward => norm_backward::<T>(ctx, case, &mut rng, xv, &x64)?,
        RowOp::SoftmaxBackward | RowOp::LogSoftmaxBackward => softmax_backward_case::<T>(ctx, case, &mut rng, &x64)?,
    })
}

/// Softmax and log_softmax backward: `y` is the forward of the random rows (computed in f64,
/// rounded to `T`, as a forward kernel would store it), `dy` random; the reference runs on
/// the same rounded `y` and `dy`.
fn softmax_backward_case<T: Float>(ctx: &Context, case: &RowCase, rng: &mut SmallRng, x64: &[f64]) -> Result<Report> {
    let Rows { rows, cols } = case.shape;
    let log = case.op == RowOp::LogSoftmaxBackward;
    let y: Vec<T> =
        (0..rows).flat_map(|r| reference::softmax(&x64[r * cols..(r + 1) * cols], log)).map(T::from_f64).collect();
    let dy: Vec<T> = (0..rows * cols).map(|_| T::from_f64(rng.random_range(-2.0..2.0))).collect();
    let (yb, dyb) = (upload_at(ctx, &y, case.offset)?, upload_at(ctx, &dy, case.offset)?);
    let mut dx = Guarded::<T>::poisoned_at(ctx, rows * cols, case.offset)?;
    let (yv, dyv) = (view_at(&yb, case.offset), view_at(&dyb, case.offset));
    if log {
        crate::softmax::log_softmax_backward_with(ctx, case.strategy, yv, dyv, case.shape, dx.view_mut())?;
    } else {
        crate::softmax::softmax_backward_with(ctx, case.strategy, yv, dyv, case.shape, dx.view_mut())?;
    }
    let (got, guard) = dx.finish()?;
    let (mut want, mut bound) = (Vec::with_capacity(rows * cols), Vec::with_capacity(rows * cols));
    for r in 0..rows {
        let yr: Vec<f64> = y[r * cols..(r + 1) * cols].iter().map(|v| v.to_f64()).collect();
        let dr: Vec<f64> = dy[r * cols..(r + 1) * cols].iter().map(|v| v.to_f64()).collect();
        let d = reference::softmax_backward(&yr, &dr, log);
        bound.extend(reference::softmax_backward_f32_error(&yr, &dr, &d, log));
        want.extend(d);
    }
    Ok(check::compare(&got, &want, &bound, guard))
}

/// The ignore index cross-entropy checks use (PyTorch's default).
pub const IGNORE_INDEX: i32 = -100;

fn cross_entropy_case<T: Float>(
    ctx: &Context,
    case: &RowCase,
    rng: &mut SmallRng,
    xv: BufRef<'_, T>,
    x64: &[f64],
) -> Result<Report> {
    use crate::cross_entropy::{CrossEntropyInput, cross_entropy_with};
    let Rows { rows, cols } = case.shape;
    let scale = 1.0 / rows.max(1) as f32;
    let targets: Vec<i32> = (0..rows)
        .map(|_| if rng.random_range(0..10) == 0 { IGNORE_INDEX } else { rng.random_range(0..cols.max(1)) as i32 })
        .collect();
    let tb = ctx.upload(&targets)?;
    let mut loss = Guarded::<f32>::poisoned(ctx, rows)?;
    let mut grad = Guarded::<T>::poisoned_at(ctx, rows * cols, case.offset)?;
    let input = CrossEntropyInput {
        logits: xv,
        targets: tb.as_view(),
        shape: case.shape,
        ignore_index: Some(IGNORE_INDEX),
        grad_scale: scale,
        check_targets: true,
    };
    cross_entropy_with(ctx, case.strategy, input, loss.view_mut(), Some(grad.view_mut()))?;
    let (mut wl, mut bl, mut wg, mut bg) = (vec![], vec![], vec![], vec![]);
    for (r, &t) in targets.iter().enumerate() {
        let row = &x64[r * cols..(r + 1) * cols];
        let t = (t != IGNORE_INDEX).then_some(t as usize);
        let (l, g) = reference::cross_entropy(row, t, scale as f64);
        let (lb, gb) = reference::cross_entropy_f32_error(row, t, scale as f64, l, &g);
        wl.push(l);
        bl.push(lb);
        wg.extend(g);
        bg.extend(gb);
    }
    let (gl, gul) = loss.finish()?;
    let (gg, gug) = grad.finish()?;
    Ok(check::merge(vec![
        ("loss", check::compare(&gl, &wl, &bl, gul)),
        ("dlogits", check::compare(&gg, &wg, &bg, gug)),
    ]))
}

/// The epsilon every norm check uses.
pub const NORM_EPS: f32 = 1e-5;

fn norm_forward<T: Float>(
    ctx: &Context,
    case: &RowCase,
    rng: &mut SmallRng,
    xv: BufRef<'_, T>,
    x64: &[f64],
) -> Result<Report> {
    use crate::norm::{NormInput, layernorm_with, rmsnorm_with};
    let Rows { rows, cols } = case.shape;
    let layer = case.op == RowOp::LayerNorm;
    let gamma = random_vec::<T>(rng, cols, Values::Finite);
    let beta = random_vec::<T>(rng, cols, Values::Finite);
    let (gb, bb) = (upload_at(ctx, &gamma, case.offset)?, upload_at(ctx, &beta, case.offset)?);
    let mut y = Guarded::<T>::poisoned_at(ctx, rows * cols, case.offset)?;
    let mut mean = Guarded::<f32>::poisoned(ctx, rows)?;
    let mut rstd = Guarded::<f32>::poisoned(ctx, rows)?;
    let input = NormInput {
        x: xv,
        gamma: view_at(&gb, case.offset),
        beta: layer.then(|| view_at(&bb, case.offset)),
        shape: case.shape,
        eps: NORM_EPS,
    };
    if layer {
        layernorm_with(ctx, case.strategy, input, y.view_mut(), mean.view_mut(), rstd.view_mut())?;
    } else {
        rmsnorm_with(ctx, case.strategy, input, y.view_mut(), rstd.view_mut())?;
    }
    let g64: Vec<f64> = gamma.iter().map(|v| v.to_f64()).collect();
    let b64: Vec<f64> = beta.iter().map(|v| v.to_f64()).collect();
    let (mut wy, mut by, mut wm, mut bm, mut wr, mut br) = (vec![], vec![], vec![], vec![], vec![], vec![]);
    for r in 0..rows {
        let row = &x64[r * cols..(r + 1) * cols];
        let (yr, m, rs) = if layer {
            reference::layernorm(row, &g64, &b64, NORM_EPS as f64)
        } else {
            let (yr, rs) = reference::rmsnorm(row, &g64, NORM_EPS as f64);
            (yr, 0.0, rs)
        };
        let (yb, mb, rb) = reference::norm_f32_error(row, &g64, &yr, layer, NORM_EPS as f64);
        wy.extend(yr);
        by.extend(yb);
        wm.push(m);
        bm.push(mb);
        wr.push(rs);
        br.push(rb);
    }
    let (gy, guy) = y.finish()?;
    let (gr, gur) = rstd.finish()?;
    let mut parts = vec![("y", check::compare(&gy, &wy, &by, guy)), ("rstd", check::compare(&gr, &wr, &br, gur))];
    if layer {
        let (gm, gum) = mean.finish()?;
        parts.push(("mean", check::compare(&gm, &wm, &bm, gum)));
    }
    Ok(check::merge(parts))
}

fn norm_backward<T: Float>(
    ctx: &Context,
    case: &RowCase,
    rng: &mut SmallRng,
    xv: BufRef<'_, T>,
    x64: &[f64],
) -> Result<Report> {
    use crate::norm::{NormGrad, layernorm_backward_with, rmsnorm_backward_with};
    let Rows { rows, cols } = case.shape;
    let layer = case.op == RowOp::LayerNormBackward;
    let gamma = random_vec::<T>(rng, cols, Values::Finite);
    let dy = random_vec::<T>(rng, rows * cols, Values::Finite);
    let g64: Vec<f64> = gamma.iter().map(|v| v.to_f64()).collect();
    let dy64: Vec<f64> = dy.iter().map(|v| v.to_f64()).collect();
    // The saved statistics the kernel reads: the reference's, rounded to f32 as the forward stores them.
    let zeros = vec![0.0; cols];
    let (mut mean, mut rstd) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    for r in 0..rows {
        let row = &x64[r * cols..(r + 1) * cols];
        let (_, m, rs) = if layer {
            reference::layernorm(row, &g64, &zeros, NORM_EPS as f64)
        } else {
            let (y, rs) = reference::rmsnorm(row, &g64, NORM_EPS as f64);
            (y, 0.0, rs)
        };
        mean.push(m as f32);
        rstd.push(rs as f32);
    }
    let (gb, dyb) = (upload_at(ctx, &gamma, case.offset)?, upload_at(ctx, &dy, case.offset)?);
    let (mb, rb) = (ctx.upload(&mean)?, ctx.upload(&rstd)?);
    let mut dx = Guarded::<T>::poisoned_at(ctx, rows * cols, case.offset)?;
    let mut dgamma = Guarded::<f32>::poisoned(ctx, cols)?;
    let mut dbeta = Guarded::<f32>::poisoned(ctx, cols)?;
    let grad = NormGrad {
        dy: view_at(&dyb, case.offset),
        x: xv,
        gamma: view_at(&gb, case.offset),
        mean: layer.then(|| mb.as_view()),
        rstd: rb.as_view(),
        shape: case.shape,
    };
    if layer {
        layernorm_backward_with(ctx, case.strategy, grad, dx.view_mut(), dgamma.view_mut(), dbeta.view_mut())?;
    } else {
        rmsnorm_backward_with(ctx, case.strategy, grad, dx.view_mut(), dgamma.view_mut())?;
    }
    let (mut wdx, mut bdx) = (Vec::with_capacity(rows * cols), Vec::with_capacity(rows * cols));
    let (mut wdg, mut adg, mut wdb, mut adb) = (vec![0.0; cols], vec![0.0; cols], vec![0.0; cols], vec![0.0; cols]);
    for r in 0..rows {
        let (xr, dyr) = (&x64[r * cols..(r + 1) * cols], &dy64[r * cols..(r + 1) * cols]);
        let (m, rs) = (mean[r] as f64, rstd[r] as f64);
        let d = reference::norm_backward_dx(dyr, xr, &g64, m, rs, layer);
        bdx.extend(reference::norm_backward_dx_error(dyr, xr, &g64, m, rs, &d, layer));
        wdx.extend(d);
        for c in 0..cols {
            let t = dyr[c] * (xr[c] - m) * rs;
            wdg[c] += t;
            adg[c] += t.abs();
            wdb[c] += dyr[c];
            adb[c] += dyr[c].abs();
        }
    }
    // dgamma/dbeta: each group adds its rows in order, then the groups are added in order:
    // chains of at most 2 * rows + 2 additions, each product within 3u.
    let k = 2 * rows + 8;
    let bdg: Vec<f64> = adg.iter().map(|a| reference::gamma_f32(k) * a).collect();
    let bdb: Vec<f64> = adb.iter().map(|a| reference::gamma_f32(k) * a).collect();
    let (gdx, gudx) = dx.finish()?;
    let (gdg, gudg) = dgamma.finish()?;
    let mut parts =
        vec![("dx", check::compare(&gdx, &wdx, &bdx, gudx)), ("dgamma", check::compare(&gdg, &wdg, &bdg, gudg))];
    if layer {
        let (gdb, gudb) = dbeta.finish()?;
        parts.push(("dbeta", check::compare(&gdb, &wdb, &bdb, gudb)));
    }
    Ok(check::merge(parts))
}

/// Runs a row-op case with the shipped kernels.
pub fn rows(ctx: &Context, case: &RowCase) -> Result<Report> {
    match case.dtype {
        DType::F32 => rows_t::<f32>(ctx, case),
        DType::F16 => rows_t::<f16>(ctx, case),
        DType::BF16 => rows_t::<bf16>(ctx, case),
        other => Err(Error::invalid(
            case.op.name(),
            format!("dtype {} is not supported; use f32, f16 or bf16", other.name()),
        )),
    }
}

/// One GEMM case (f32): the problem, the input seed, and how far to shift every view.
#[derive(Clone, Copy, Debug)]
pub struct GemmCase {
    pub gemm: crate::gemm::Gemm,
    pub seed: u64,
    /// Elements to shift A, B and C from their allocations' starts (nonzero: misaligned
    /// views, which turns the 16-byte load paths off).
    pub offset: usize,
}

/// What C holds outside its matrices (between stored rows when `ldc` pads them, between
/// batches): the kernel must leave it untouched, and the comparison demands it bit for bit.
pub const GEMM_GAP: f32 = -7777.0;

/// Runs `case` with `version`. Inputs are moderate and wide-magnitude finite values. C
/// starts as the poison NaN inside every matrix when `beta = 0` (an element left unwritten
/// stays poison, and a kernel that reads C turns `0 * NaN` into NaN, so both fail), as
/// random values otherwise; its gaps hold [`GEMM_GAP`]; guard regions surround it. Each
/// element is judged against the f64 reference within [`reference::gemm_f32_error`].
pub fn gemm_with(ctx: &Context, case: &GemmCase, version: &crate::gemm::GemmVersion) -> Result<Report> {
    gemm_check::<f32, f32>(
        ctx,
        case,
        EpilogueSpec::default(),
        |g, a, b, c, _, _| crate::gemm::gemm_with(ctx, version, g, a, b, c),
        reference::gemm_f32_error,
    )
}

/// As [`gemm_with`] for a split-K version (`GemmVersion::sum`), with K split into ranges of
/// `k_split` depths (a multiple of its k-step) whatever the shape: the tests' way to reach the
/// split path on shapes too small for [`crate::gemm::split_depth`] to split.
pub fn gemm_split_with(
    ctx: &Context,
    case: &GemmCase,
    version: &crate::gemm::GemmVersion,
    k_split: usize,
) -> Result<Report> {
    gemm_check::<f32, f32>(
        ctx,
        case,
        EpilogueSpec::default(),
        |g, a, b, c, _, _| crate::gemm::launch(ctx, version, g, a, b, c, crate::gemm::MAX_GRID_Z, Some(k_split)),
        reference::gemm_f32_error,
    )
}

/// Which parts of the tensor-core GEMM's epilogue a check turns on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpilogueSpec {
    pub bias: bool,
    pub gelu: bool,
    pub residual: bool,
}

/// The largest `|d gelu(x) / dx|` of the tanh-form GELU (about 1.129, near x = 2.4), rounded
/// up: how much an error in GELU's input can grow through it.
const GELU_SLOPE_MAX: f64 = 1.13;

/// The GEMM check every path shares: inputs of type `T` (random f32 values rounded to `T`),
/// C of type `O` filled with data (or poison when beta = 0, which must not be read) and gaps
/// between rows, guards around it; optional bias (f32, per column) and residual (`O`, C's
/// shape); `launch` runs the kernel; each element is judged against the f64 value of the same
/// formula on the rounded inputs, within `bound(k, alpha, (|A||B|)_ij, beta, c)` for the
/// product, plus one f32 rounding per epilogue add, GELU's slope times that bound plus GELU's
/// own f32 error ([`reference::elementwise_f32_error`]); `compare` adds `O`'s rounding.
#[allow(clippy::type_complexity)]
fn gemm_check<T: Float, O: Float>(
    ctx: &Context,
    case: &GemmCase,
    ep: EpilogueSpec,
    launch: impl FnOnce(
        &crate::gemm::Gemm,
        BufRef<'_, T>,
        BufRef<'_, T>,
        crate::BufMut<'_, O>,
        Option<BufRef<'_, f32>>,
        Option<BufRef<'_, O>>,
    ) -> Result<()>,
    bound_of: fn(usize, f64, f64, f64, f64) -> f64,
) -> Result<Report> {
    let g = case.gemm;
    let mut rng = SmallRng::seed_from_u64(case.seed);
    let round = |v: Vec<f32>| -> Vec<T> { v.iter().map(|&x| T::from_f64(x as f64)).collect() };
    let a: Vec<T> = round(random_vec::<f32>(&mut rng, g.a_len(), Values::Finite));
    let b: Vec<T> = round(random_vec::<f32>(&mut rng, g.b_len(), Values::Finite));
    let mut c0 = vec![O::from_f64(GEMM_GAP as f64); g.c_len()];
    let poison = O::from_bits32(O::POISON_BITS);
    let each = |f: &mut dyn FnMut(usize, usize, usize, usize)| {
        for z in 0..g.batch {
            for i in 0..g.m {
                for j in 0..g.n {
                    f(z, i, j, g.c_index(z, i, j));
                }
            }
        }
    };
    each(&mut |_, _, _, at| c0[at] = if g.beta == 0.0 { poison } else { draw::<O>(&mut rng, Values::Finite) });
    let bias: Vec<f32> = if ep.bias { random_vec::<f32>(&mut rng, g.n, Values::Finite) } else { Vec::new() };
    let res: Vec<O> = if ep.residual { random_vec::<O>(&mut rng, g.c_len(), Values::Finite) } else { Vec::new() };
    let (a_buf, b_buf) = (upload_at(ctx, &a, case.offset)?, upload_at(ctx, &b, case.offset)?);
    let bias_buf = if ep.bias { Some(ctx.upload(&bias)?) } else { None };
    let res_buf = if ep.residual { Some(upload_at(ctx, &res, case.offset)?) } else { None };
    let mut out = Guarded::<O>::poisoned_at(ctx, c0.len(), case.offset)?;
    out.view_mut().copy_from_host(&c0)?;
    launch(
        &g,
        view_at(&a_buf, case.offset),
        view_at(&b_buf, case.offset),
        out.view_mut(),
        bias_buf.as_ref().map(|b| b.as_view()),
        res_buf.as_ref().map(|r| view_at(r, case.offset)),
    )?;
    let (got, guard) = out.finish()?;
    let a64: Vec<f64> = a.iter().map(|v| v.to_f64()).collect();
    let b64: Vec<f64> = b.iter().map(|v| v.to_f64()).collect();
    let mut want: Vec<f64> = c0.iter().map(|&v| v.to_f64()).collect();
    let mut bound = vec![0.0; c0.len()];
    let (alpha, beta) = (g.alpha as f64, g.beta as f64);
    let u = reference::gamma_f32(1);
    each(&mut |z, i, j, at| {
        let (ab, abs) = reference::gemm_dot(&g, &a64, &b64, z, i, j);
        let c = c0[at].to_f64();
        let mut w = reference::gemm_element(alpha, ab, beta, c);
        let mut e = bound_of(g.k, alpha, abs, beta, c);
        if ep.bias {
            w += bias[j] as f64;
            e += u * (w.abs() + e);
        }
        if ep.gelu {
            let gw = reference::gelu(w);
            e = GELU_SLOPE_MAX * e + reference::elementwise_f32_error(crate::elementwise::Op::Gelu, w, 0.0, gw);
            w = gw;
        }
        if ep.residual {
            w += res[at].to_f64();
            e += u * (w.abs() + e);
        }
        want[at] = w;
        bound[at] = e;
    });
    Ok(check::compare(&got, &want, &bound, guard))
}

/// Runs `case` through the public [`crate::gemm::gemm`] with inputs of type `T`: the f32
/// ladder for f32, the tensor cores (looping over a batch) for bf16 and f16.
pub fn gemm_public<T: crate::gemm::GemmInput + Float>(ctx: &Context, case: &GemmCase) -> Result<Report> {
    let bound = if T::DTYPE == DType::F32 { reference::gemm_f32_error } else { reference::gemm_tc_error };
    gemm_check::<T, f32>(
        ctx,
        case,
        EpilogueSpec::default(),
        |g, a, b, c, _, _| crate::gemm::gemm(ctx, g, a, b, c),
        bound,
    )
}

/// Runs `case` as [`crate::gemm::gemm`] does (its [`crate::gemm::plan`]: the version, on the
/// problem or its transpose).
pub fn gemm(ctx: &Context, case: &GemmCase) -> Result<Report> {
    gemm_public::<f32>(ctx, case)
}

/// Runs `case` on the tensor-core GEMM with inputs of type `T` (bf16, f16): random f32 values
/// rounded to `T`; C, poison, gaps and guards as [`gemm_with`]; each element judged against
/// the f64 product of the rounded inputs within [`reference::gemm_tc_error`].
pub fn gemm_tc_with<T: crate::gemm_tc::TcInput>(
    ctx: &Context,
    case: &GemmCase,
    version: &crate::gemm_tc::TcVersion,
) -> Result<Report> {
    gemm_tc_ex_with::<T, f32>(ctx, case, EpilogueSpec::default(), version)
}

/// As [`gemm_tc_with`], with C of type `O` (f32 or `T`) and the epilogue `ep`.
pub fn gemm_tc_ex_with<T: crate::gemm_tc::TcInput, O: Float>(
    ctx: &Context,
    case: &GemmCase,
    ep: EpilogueSpec,
    version: &crate::gemm_tc::TcVersion,
) -> Result<Report> {
    gemm_tc_planned_with::<T, O>(ctx, case, ep, version, None)
}

/// As [`gemm_tc_ex_with`], with a chosen plan ([`crate::gemm_tc::gemm_tc_planned`]: K slices,
/// persistent blocks); `None`: as the launcher decides. The bound needs no change: adding the slices puts at most
/// `splits - 1 < k` more f32 roundings in each element's chain, inside `gamma_{2k+2}`'s margin.
pub fn gemm_tc_planned_with<T: crate::gemm_tc::TcInput, O: Float>(
    ctx: &Context,
    case: &GemmCase,
    ep: EpilogueSpec,
    version: &crate::gemm_tc::TcVersion,
    plan: Option<crate::gemm_tc::TcPlan>,
) -> Result<Report> {
    gemm_check::<T, O>(
        ctx,
        case,
        ep,
        |g, a, b, c, bias, residual| {
            let e = crate::gemm_tc::Epilogue { bias, gelu: ep.gelu, residual };
            match plan {
                None => crate::gemm_tc::gemm_tc_ex(ctx, version, g, a, b, c, &e),
                Some(plan) => crate::gemm_tc::gemm_tc_planned(ctx, version, g, a, b, c, &e, plan),
            }
        },
        reference::gemm_tc_error,
    )
}
