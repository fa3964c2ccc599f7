//! Attention backward: dQ, dK, dV from Q, K, V, the forward's O and log-sum-exp, and dO, for
//! the forward's semantics (bf16/f16 in and out, f32 accumulation, causal bottom-right aligned
//! or not, `seq_q != seq_k`, GQA/MQA: dK and dV of a kv head sum over its query heads; a row
//! the mask hides entirely contributes nothing). Layout and masking: see
//! `gpu-kernels/src/attention/mod.rs`; the algorithm: `gpu-kernels/src/attention/bwd_v01_simt.rs`
//! (CUDA cores) and `bwd_v02_mma.rs` (tensor cores); [`attention_backward`] runs the highest
//! version of [`BACKWARD_VERSIONS`] that has the head dim and the views' alignment.
//!
//! dQ sums contributions of every key block. [`BackwardOptions::deterministic`] picks how:
//! - `false` (the default, as FlashAttention's): the dK/dV kernel adds its contributions to an
//!   f32 accumulator with atomics, and a small kernel converts it. One pass over the scores;
//!   not bitwise reproducible (the order of the atomic additions varies run to run).
//! - `true`: a separate dQ kernel over query tiles recomputes `S` and `dP` (two of the five
//!   products of the backward, plus `dS K` again) and keeps dQ in registers: every output is
//!   one thread's fixed sequence of operations, so the result is bitwise reproducible.
//!
//! Neither is measured yet (no GPU run); the default follows FlashAttention, whose atomic dQ is
//! the faster of the two on its hardware.
//!
//! Checked against an f64 reference on the same inputs with FlashAttention's rule for the
//! backward (see [`check_backward`]).

use crate::attention::{self, AttentionFloat, AttentionInput, AttentionShape};
use crate::check::{self, Guarded, Report};
use crate::{BufMut, BufRef, Context, DType, Dim3, Error, LaunchConfig, Result};
pub use gpu_kernels::attention::{
    AttentionBackwardVersion, BACKWARD_VERSIONS, BUG_BWD_NO_D, BUG_BWD_V02_SWAPPED_DS, BackwardKernel, BackwardKernels,
};
use gpu_kernels::attention::{AttentionBwdParams, bwd_v01_simt};
use half::{bf16, f16};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const OP: &str = "attention_backward";

/// The input types the backward takes: bf16 and f16.
pub trait BackwardFloat: AttentionFloat {
    fn kernels(k: &BackwardKernel) -> &BackwardKernels<Self>;
}
impl BackwardFloat for bf16 {
    fn kernels(k: &BackwardKernel) -> &BackwardKernels<Self> {
        &k.bf16
    }
}
impl BackwardFloat for f16 {
    fn kernels(k: &BackwardKernel) -> &BackwardKernels<Self> {
        &k.f16
    }
}

/// Looks a backward version up by name (`v01_simt`, `v02_mma`).
pub fn version(name: &str) -> Option<&'static AttentionBackwardVersion> {
    BACKWARD_VERSIONS.iter().find(|v| v.name == name)
}

/// The version [`attention_backward`] runs for `head_dim` when the views are (`aligned16`) or
/// are not all 16-byte aligned: the highest rung that supports it, or `None` when none does.
pub fn default_version(head_dim: usize, aligned16: bool) -> Option<&'static AttentionBackwardVersion> {
    BACKWARD_VERSIONS.iter().rev().find(|v| v.kernel(head_dim).is_some_and(|k| aligned16 || !k.align16))
}

/// Every head dim some version supports, for error messages.
fn supported_dims() -> String {
    BACKWARD_VERSIONS
        .iter()
        .map(|v| format!("{}: {}", v.name, v.head_dims().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The backward's inputs: the forward's (`q`, `k`, `v`, shape, mask, scale), its outputs `o`
/// and `lse` (natural log, `[batch, heads, seq_q]`), and the output gradient `d_o` (O's shape).
#[derive(Clone, Copy)]
pub struct AttentionBackwardInput<'a, T: AttentionFloat> {
    pub q: BufRef<'a, T>,
    pub k: BufRef<'a, T>,
    pub v: BufRef<'a, T>,
    pub o: BufRef<'a, T>,
    pub d_o: BufRef<'a, T>,
    pub lse: BufRef<'a, f32>,
    pub shape: AttentionShape,
    pub causal: bool,
    /// `None` is `1 / sqrt(head_dim)`; must be the forward's.
    pub scale: Option<f32>,
}

/// The gradients: dQ has Q's shape, dK and dV have K's.
pub struct AttentionGrads<'a, T: AttentionFloat> {
    pub dq: BufMut<'a, T>,
    pub dk: BufMut<'a, T>,
    pub dv: BufMut<'a, T>,
}

/// How the backward runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackwardOptions {
    /// Bitwise reproducible dQ (a separate dQ pass instead of f32 atomics); see the module docs.
    pub deterministic: bool,
}

/// dQ, dK, dV with the highest version that supports the head dim and the views' alignment.
pub fn attention_backward<T: BackwardFloat>(
    ctx: &Context,
    input: AttentionBackwardInput<'_, T>,
    grads: AttentionGrads<'_, T>,
    opts: BackwardOptions,
) -> Result<()> {
    let i = &input;
    let aligned = [i.q.addr(), i.k.addr(), i.v.addr(), i.d_o.addr(), grads.dq.addr(), grads.dk.addr(), grads.dv.addr()]
        .iter()
        .all(|a| a.is_multiple_of(16));
    let v = default_version(input.shape.head_dim, aligned).ok_or_else(|| {
        Error::invalid(OP, format!("head_dim = {} is not supported ({})", input.shape.head_dim, supported_dims()))
    })?;
    attention_backward_with(ctx, v, input, grads, opts)
}

fn grid_x(what: &str, n: usize) -> Result<u32> {
    u32::try_from(n).ok().filter(|&x| x < 1 << 31).ok_or_else(|| {
        Error::invalid(OP, format!("{what}: {n} blocks exceed the grid's 2^31 - 1; split the batch into smaller calls"))
    })
}

/// As [`attention_backward`], with a chosen version.
pub fn attention_backward_with<T: BackwardFloat>(
    ctx: &Context,
    version: &AttentionBackwardVersion,
    input: AttentionBackwardInput<'_, T>,
    grads: AttentionGrads<'_, T>,
    opts: BackwardOptions,
) -> Result<()> {
    let AttentionBackwardInput { q, k, v, o, d_o, lse, shape: s, causal, scale } = input;
    let AttentionGrads { mut dq, mut dk, mut dv } = grads;
    for r in [&q, &k, &v, &o, &d_o] {
        r.check_context(ctx, OP)?;
    }
    lse.check_context(ctx, OP)?;
    for m in [&dq, &dk, &dv] {
        m.check_context(ctx, OP)?;
    }
    attention::check_shape_for(OP, &s)?;
    let Some(kernel) = version.kernel(s.head_dim) else {
        let dims: Vec<String> = version.head_dims().map(|d| d.to_string()).collect();
        return Err(Error::invalid(
            OP,
            format!(
                "head_dim = {}: {} supports {} (all versions: {})",
                s.head_dim,
                version.name,
                dims.join(", "),
                supported_dims()
            ),
        ));
    };
    for (name, got, want) in [
        ("q", q.len(), s.q_len()),
        ("k", k.len(), s.kv_len()),
        ("v", v.len(), s.kv_len()),
        ("o", o.len(), s.q_len()),
        ("d_o", d_o.len(), s.q_len()),
        ("lse", lse.len(), s.lse_len()),
        ("dq", dq.len(), s.q_len()),
        ("dk", dk.len(), s.kv_len()),
        ("dv", dv.len(), s.kv_len()),
    ] {
        if got != want {
            return Err(Error::invalid(OP, format!("{name} has {got} elements but the shape {s:?} needs {want}")));
        }
    }
    if kernel.align16 {
        for (name, addr) in [
            ("q", q.addr()),
            ("k", k.addr()),
            ("v", v.addr()),
            ("d_o", d_o.addr()),
            ("dq", dq.addr()),
            ("dk", dk.addr()),
            ("dv", dv.addr()),
        ] {
            if !addr.is_multiple_of(16) {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "{name} starts at {addr:#x}, not 16-byte aligned: {} copies and stores 16-byte rows; pass aligned views or run v01_simt",
                        version.name
                    ),
                ));
            }
        }
    }
    let scale = scale.unwrap_or(1.0 / (s.head_dim as f32).sqrt());
    if !scale.is_finite() {
        return Err(Error::invalid(OP, format!("scale = {scale}: pass the forward's finite scale")));
    }
    let rows = s.lse_len();
    let kt = kernel.threads as usize;
    let pre_blocks = grid_x("preprocess", rows.div_ceil(kernel.preprocess_rows as usize))?;
    let conv_blocks = grid_x("dq_convert", s.q_len().div_ceil(kt))?;
    if s.batch == 0 || s.heads == 0 {
        return Ok(());
    }
    let atomic = !opts.deterministic;
    let kernels = T::kernels(kernel);
    let words = rows + if atomic { s.q_len() } else { 0 };
    ctx.with_scratch(words.max(1), |scratch| {
        let params = AttentionBwdParams {
            batch: s.batch as u32,
            heads: s.heads as u32,
            kv_heads: s.kv_heads as u32,
            seq_q: s.seq_q as u32,
            seq_k: s.seq_k as u32,
            d: s.head_dim as u32,
            causal: causal as u32,
            atomic_dq: atomic as u32,
            scale,
            scale_log2: scale * std::f32::consts::LOG2_E,
            q: q.global(),
            k: k.global(),
            v: v.global(),
            o: o.global(),
            d_o: d_o.global(),
            lse: lse.global(),
            dq: dq.global_mut(),
            dk: dk.global_mut(),
            dv: dv.global_mut(),
            scratch: scratch.as_f32(),
        };
        let block = Dim3::x(kernel.threads);
        if rows > 0 {
            let cfg = LaunchConfig { grid: Dim3::x(pre_blocks), block, shared_bytes: 0 };
            ctx.launch(kernels.preprocess, cfg, params)?;
        }
        if s.seq_k > 0 {
            let grid = Dim3::new(s.seq_k.div_ceil(kernel.block_k as usize) as u32, s.kv_heads as u32, s.batch as u32);
            ctx.launch(kernels.dkdv, LaunchConfig { grid, block, shared_bytes: kernel.dkdv_shared_bytes }, params)?;
        }
        if rows > 0 {
            if atomic {
                let cfg = LaunchConfig { grid: Dim3::x(conv_blocks), block, shared_bytes: 0 };
                ctx.launch(kernels.dq_convert, cfg, params)?;
            } else {
                let grid = Dim3::new(s.seq_q.div_ceil(kernel.block_q as usize) as u32, s.heads as u32, s.batch as u32);
                ctx.launch(kernels.dq, LaunchConfig { grid, block, shared_bytes: kernel.dq_shared_bytes }, params)?;
            }
        }
        Ok(())
    })
}

/// The gradients of a reference computation: `(dq, dk, dv)`.
pub type Grads = (Vec<f64>, Vec<f64>, Vec<f64>);

/// The f64 backward reference on the same (rounded) inputs.
pub fn reference_backward(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    d_o: &[f64],
    s: &AttentionShape,
    causal: bool,
    scale: f64,
) -> Grads {
    naive_backward(q, k, v, d_o, s, causal, scale, &|x| x)
}

/// The naive backward (autograd of the naive forward) with every intermediate passed through
/// `round` (identity for the f64 reference; the input type for the low-precision one): the
/// forward's scores and probabilities as in `attention::reference`, then `dP = dO V^T`,
/// `dS = P (dP - rowsum(P dP))` (softmax's backward, computed wide as PyTorch does for
/// 16-bit types, then rounded), the scale's gradient, and `dQ = dS K`, `dK = dS^T Q`,
/// `dV = P^T dO` per head, rounded; GQA sums the heads' rounded dK and dV, rounded again.
#[allow(clippy::too_many_arguments)]
fn naive_backward(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    d_o: &[f64],
    s: &AttentionShape,
    causal: bool,
    scale: f64,
    round: &dyn Fn(f64) -> f64,
) -> Grads {
    let d = s.head_dim;
    let group = s.heads / s.kv_heads.max(1);
    let mut dq = vec![0.0; s.q_len()];
    let mut dk = vec![0.0; s.kv_len()];
    let mut dv = vec![0.0; s.kv_len()];
    for b in 0..s.batch {
        for kvh in 0..s.kv_heads {
            let kv0 = (b * s.kv_heads + kvh) * s.seq_k * d;
            let mut sum_dk = vec![0.0; s.seq_k * d];
            let mut sum_dv = vec![0.0; s.seq_k * d];
            for h in kvh * group..(kvh + 1) * group {
                let mut hdk = vec![0.0; s.seq_k * d];
                let mut hdv = vec![0.0; s.seq_k * d];
                for i in 0..s.seq_q {
                    let q0 = ((b * s.heads + h) * s.seq_q + i) * d;
                    let (qrow, dorow) = (&q[q0..q0 + d], &d_o[q0..q0 + d]);
                    let visible = |j: usize| !causal || j as i64 <= i as i64 + s.seq_k as i64 - s.seq_q as i64;
                    let limit = (0..s.seq_k).filter(|&j| visible(j)).count();
                    if limit == 0 {
                        continue;
                    }
                    let krow = |j: usize| &k[kv0 + j * d..kv0 + (j + 1) * d];
                    let vrow = |j: usize| &v[kv0 + j * d..kv0 + (j + 1) * d];
                    let dot = |a: &[f64], c: &[f64]| a.iter().zip(c).map(|(x, y)| x * y).sum::<f64>();
                    let scores: Vec<f64> = (0..limit).map(|j| round(round(dot(qrow, krow(j))) * scale)).collect();
                    let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let sum: f64 = scores.iter().map(|x| (x - m).exp()).sum();
                    let p: Vec<f64> = scores.iter().map(|x| round((x - m).exp() / sum)).collect();
                    let dp: Vec<f64> = (0..limit).map(|j| round(dot(dorow, vrow(j)))).collect();
                    let dsum: f64 = p.iter().zip(&dp).map(|(a, c)| a * c).sum();
                    let mut dqrow = vec![0.0; d];
                    for j in 0..limit {
                        let ds = round(p[j] * (dp[j] - dsum));
                        let g = round(ds * scale);
                        for c in 0..d {
                            dqrow[c] += g * krow(j)[c];
                            hdk[j * d + c] += g * qrow[c];
                            hdv[j * d + c] += p[j] * dorow[c];
                        }
                    }
                    for (out, x) in dq[q0..q0 + d].iter_mut().zip(dqrow) {
                        *out = round(x);
                    }
                }
                for (acc, x) in sum_dk.iter_mut().zip(hdk) {
                    *acc += round(x);
                }
                for (acc, x) in sum_dv.iter_mut().zip(hdv) {
                    *acc += round(x);
                }
            }
            for (out, x) in dk[kv0..kv0 + s.seq_k * d].iter_mut().zip(sum_dk) {
                *out = round(x);
            }
            for (out, x) in dv[kv0..kv0 + s.seq_k * d].iter_mut().zip(sum_dv) {
                *out = round(x);
            }
        }
    }
    (dq, dk, dv)
}

/// One checked backward case.
#[derive(Clone, Copy, Debug)]
pub struct AttentionBackwardCase {
    pub dtype: DType,
    pub shape: AttentionShape,
    pub causal: bool,
    pub deterministic: bool,
    pub seed: u64,
}

/// The absolute tolerance added to FlashAttention's rule: the kernel's own f32 rounding where
/// the naive error happens to be 0 (exact cancellation in `dP - D`, a single key), far below
/// one bf16 or f16 ulp of the gradients' magnitudes.
pub const GRAD_ATOL: f64 = 1e-4;

/// The case's random inputs (Q, K, V, dO in [-2, 2)).
fn inputs<T: AttentionFloat>(case: &AttentionBackwardCase) -> [Vec<T>; 4] {
    let s = case.shape;
    let mut rng = SmallRng::seed_from_u64(case.seed);
    let mut draw = |n: usize| -> Vec<T> { (0..n).map(|_| T::from_f64(rng.random_range(-2.0..2.0))).collect() };
    [draw(s.q_len()), draw(s.kv_len()), draw(s.kv_len()), draw(s.q_len())]
}

/// Runs the forward (the version `attention` picks) and then the backward on the case's inputs;
/// the gradients land in `grads`.
pub fn run_case<T: BackwardFloat>(
    ctx: &Context,
    case: &AttentionBackwardCase,
    version: &AttentionBackwardVersion,
    grads: AttentionGrads<'_, T>,
) -> Result<()> {
    let s = case.shape;
    let [q, k, v, d_o] = inputs::<T>(case);
    let (qb, kb, vb, dob) = (ctx.upload(&q)?, ctx.upload(&k)?, ctx.upload(&v)?, ctx.upload(&d_o)?);
    let mut o = ctx.alloc::<T>(s.q_len())?;
    let mut lse = ctx.alloc::<f32>(s.lse_len())?;
    let fwd = AttentionInput {
        q: qb.as_view(),
        k: kb.as_view(),
        v: vb.as_view(),
        shape: s,
        causal: case.causal,
        scale: None,
    };
    attention::attention(ctx, fwd, o.as_view_mut(), lse.as_view_mut())?;
    let input = AttentionBackwardInput {
        q: qb.as_view(),
        k: kb.as_view(),
        v: vb.as_view(),
        o: o.as_view(),
        d_o: dob.as_view(),
        lse: lse.as_view(),
        shape: s,
        causal: case.causal,
        scale: None,
    };
    attention_backward_with(ctx, version, input, grads, BackwardOptions { deterministic: case.deterministic })
}

fn check_t<T: BackwardFloat>(
    ctx: &Context,
    case: &AttentionBackwardCase,
    version: &AttentionBackwardVersion,
) -> Result<Report> {
    let s = case.shape;
    let mut dq = Guarded::<T>::poisoned(ctx, s.q_len())?;
    let mut dk = Guarded::<T>::poisoned(ctx, s.kv_len())?;
    let mut dv = Guarded::<T>::poisoned(ctx, s.kv_len())?;
    run_case(ctx, case, version, AttentionGrads { dq: dq.view_mut(), dk: dk.view_mut(), dv: dv.view_mut() })?;
    let f = |x: &[T]| x.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
    let [q, k, v, d_o] = inputs::<T>(case);
    let (q, k, v, d_o) = (f(&q), f(&k), f(&v), f(&d_o));
    let scale = 1.0 / (s.head_dim as f64).sqrt();
    let want = reference_backward(&q, &k, &v, &d_o, &s, case.causal, scale);
    let low = naive_backward(&q, &k, &v, &d_o, &s, case.causal, scale, &|x| T::from_f64(x).to_f64());
    let max_err = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    let mut named = Vec::new();
    for (name, got, want, low) in
        [("dq", &dq, &want.0, &low.0), ("dk", &dk, &want.1, &low.1), ("dv", &dv, &want.2, &low.2)]
    {
        let (g, guard) = got.finish()?;
        // FlashAttention's rule for the backward: at most 3x the naive low-precision error.
        let bound = 3.0 * max_err(low, want) + GRAD_ATOL;
        let mut r = check::compare(&g, want, &vec![bound; want.len()], guard);
        r.tol = format!("FA rule 3 x naive {} {name} error ({bound:.2e}) + {GRAD_ATOL:.0e}", T::NAME);
        named.push((name, r));
    }
    Ok(check::merge(named))
}

/// Runs `case` with `version` (`None`: the one [`attention_backward`] picks): random inputs in
/// [-2, 2), the forward's O and lse, poisoned and guarded gradients, FlashAttention's rule.
pub fn check_backward(
    ctx: &Context,
    case: &AttentionBackwardCase,
    version: Option<&AttentionBackwardVersion>,
) -> Result<Report> {
    let version = match version {
        Some(v) => v,
        None => default_version(case.shape.head_dim, true).ok_or_else(|| {
            Error::invalid(OP, format!("head_dim = {} is not supported ({})", case.shape.head_dim, supported_dims()))
        })?,
    };
    match case.dtype {
        DType::BF16 => check_t::<bf16>(ctx, case, version),
        DType::F16 => check_t::<f16>(ctx, case, version),
        other => Err(Error::invalid(OP, format!("dtype {} is not supported; use bf16 or f16", other.name()))),
    }
}

/// FLOPs of the backward on `s`: 2.5 times the forward's (five matrix products to its two).
pub fn flops(s: &AttentionShape, causal: bool) -> f64 {
    2.5 * attention::flops(s, causal)
}

/// Times the backward of `version` on `s` (median of [`crate::bench::REPS`], L2 flushed
/// before each run); O and lse come from one forward run first.
pub fn time<T: BackwardFloat>(
    ctx: &Context,
    version: &AttentionBackwardVersion,
    s: AttentionShape,
    causal: bool,
    opts: BackwardOptions,
) -> Result<f64> {
    let fill = |n: usize, k: usize| -> Vec<T> {
        (0..n).map(|i| T::from_f64((((i + k) * 7919) % 1000) as f64 * 0.002 - 1.0)).collect()
    };
    let (q, k, v) =
        (ctx.upload(&fill(s.q_len(), 0))?, ctx.upload(&fill(s.kv_len(), 1))?, ctx.upload(&fill(s.kv_len(), 2))?);
    let d_o = ctx.upload(&fill(s.q_len(), 3))?;
    let mut o = ctx.alloc::<T>(s.q_len())?;
    let mut lse = ctx.alloc::<f32>(s.lse_len())?;
    let fwd = AttentionInput { q: q.as_view(), k: k.as_view(), v: v.as_view(), shape: s, causal, scale: None };
    attention::attention(ctx, fwd, o.as_view_mut(), lse.as_view_mut())?;
    let (mut dq, mut dk, mut dv) =
        (ctx.alloc::<T>(s.q_len())?, ctx.alloc::<T>(s.kv_len())?, ctx.alloc::<T>(s.kv_len())?);
    let t = ctx.time_runs(crate::bench::WARMUP, crate::bench::REPS, true, || {
        let input = AttentionBackwardInput {
            q: q.as_view(),
            k: k.as_view(),
            v: v.as_view(),
            o: o.as_view(),
            d_o: d_o.as_view(),
            lse: lse.as_view(),
            shape: s,
            causal,
            scale: None,
        };
        let grads = AttentionGrads { dq: dq.as_view_mut(), dk: dk.as_view_mut(), dv: dv.as_view_mut() };
        attention_backward_with(ctx, version, input, grads, opts)
    })?;
    Ok(crate::bench::median(&t))
}

/// Keeps the tile constants the launcher reads in one place (the device crate's).
pub const TILING: bwd_v01_simt::BwdTiling = bwd_v01_simt::TILING;
