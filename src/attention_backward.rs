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
//!
//! [`attention_varlen_backward`] is the backward of [`attention::attention_varlen`]: the packed
//! variable-length layout and offsets ([`VarlenBackwardInput`]), validated before any launch,
//! on the highest version with variable-length kernels for the head dim
//! ([`BackwardKernel::varlen`]); [`check_varlen_backward`] checks each sequence against the
//! dense reference.

use crate::attention::{self, AttentionFloat, AttentionInput, AttentionShape, VarlenInput, gather, scatter};
use crate::check::{self, Guarded, Report};
use crate::tma::TENSOR_MAP_BYTES;
use crate::{BufMut, BufRef, Context, DType, Dim3, Error, LaunchConfig, Result};
pub use gpu_kernels::attention::{
    AttentionBackwardVersion, BACKWARD_VERSIONS, BUG_BWD_NO_D, BUG_BWD_V02_SWAPPED_DS, BUG_BWD_V03_DS_UNSWIZZLED,
    BUG_BWD_VARLEN_TOP_LEFT, BackwardKernel, BackwardKernels, BackwardVarlen,
};
use gpu_kernels::attention::{AttentionBwdParams, bwd_v01_simt};
use half::{bf16, f16};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const OP: &str = "attention_backward";

/// The input types the backward takes: bf16 and f16.
pub trait BackwardFloat: AttentionFloat {
    fn kernels(k: &BackwardKernel) -> &BackwardKernels<Self>;
    fn varlen_kernels(k: &BackwardVarlen) -> &BackwardKernels<Self>;
}
impl BackwardFloat for bf16 {
    fn kernels(k: &BackwardKernel) -> &BackwardKernels<Self> {
        &k.bf16
    }
    fn varlen_kernels(k: &BackwardVarlen) -> &BackwardKernels<Self> {
        &k.bf16
    }
}
impl BackwardFloat for f16 {
    fn kernels(k: &BackwardKernel) -> &BackwardKernels<Self> {
        &k.f16
    }
    fn varlen_kernels(k: &BackwardVarlen) -> &BackwardKernels<Self> {
        &k.f16
    }
}

/// Looks a backward version up by name (`v01_simt`, `v02_mma`).
pub fn version(name: &str) -> Option<&'static AttentionBackwardVersion> {
    BACKWARD_VERSIONS.iter().find(|v| v.name == name)
}

/// The version [`attention_backward`] runs on `ctx` for `head_dim` when the views are
/// (`aligned16`) or are not all 16-byte aligned: the highest rung that supports the head dim,
/// the alignment and, with `opts`, the device's shared memory per block; `None` when none does.
pub fn default_version(
    ctx: &Context,
    head_dim: usize,
    aligned16: bool,
    opts: BackwardOptions,
) -> Option<&'static AttentionBackwardVersion> {
    BACKWARD_VERSIONS.iter().rev().find(|v| v.kernel(head_dim).is_some_and(|k| runs(ctx, k, aligned16, opts)))
}

/// The dynamic shared memory per block a backward with `kernel` launches, and the kernel that
/// needs it: the dK/dV kernel's or, with a deterministic dQ, the larger of it and the dQ pass's.
fn shared_need(kernel: &BackwardKernel, opts: BackwardOptions) -> (u32, &'static str) {
    if opts.deterministic && kernel.dq_shared_bytes > kernel.dkdv_shared_bytes {
        (kernel.dq_shared_bytes, "deterministic dQ")
    } else {
        (kernel.dkdv_shared_bytes, "dK/dV")
    }
}

/// Whether `ctx` runs `kernel` on views that are (`aligned16`) or are not all 16-byte aligned.
fn runs(ctx: &Context, kernel: &BackwardKernel, aligned16: bool, opts: BackwardOptions) -> bool {
    (aligned16 || !kernel.align16)
        && shared_need(kernel, opts).0 <= ctx.max_shared_bytes()
        && attention::arch_ok(ctx, kernel.required_arch()).is_ok()
}

/// Why `ctx` cannot run `v` at `head_dim` with `opts` (no kernel for the head dim, the PTX its
/// dK/dV kernel needs not loaded, or more shared memory than the device allows per block), or
/// `None` when it can.
pub fn unavailable(
    ctx: &Context,
    v: &AttentionBackwardVersion,
    head_dim: usize,
    opts: BackwardOptions,
) -> Option<String> {
    let Some(k) = v.kernel(head_dim) else {
        return Some(format!("{} has no kernel for head dim {head_dim}", v.name));
    };
    if let Err(why) = attention::arch_ok(ctx, k.required_arch()) {
        return Some(format!("{}'s dK/dV kernel {why}", v.name));
    }
    let (shared, which) = shared_need(k, opts);
    (shared > ctx.max_shared_bytes()).then(|| {
        format!(
            "{}'s {which} kernel needs {shared} bytes of shared memory per block and this device allows {}",
            v.name,
            ctx.max_shared_bytes()
        )
    })
}

/// Every head dim some version supports, for error messages.
fn supported_dims() -> String {
    attention::dims_by_version(BACKWARD_VERSIONS.iter().map(|v| (v.name, v.kernels)), |k| Some(k.head_dims))
}

/// The backward's inputs: the forward's input as it was passed to [`attention::attention`]
/// (`q`, `k`, `v`, shape, mask and scale, so the backward cannot differ from the forward in
/// any of them), its outputs `o` and `lse` (natural log, `[batch, heads, seq_q]`), and the
/// output gradient `d_o` (O's shape).
#[derive(Clone, Copy)]
pub struct AttentionBackwardInput<'a, T: AttentionFloat> {
    pub forward: AttentionInput<'a, T>,
    pub o: BufRef<'a, T>,
    pub d_o: BufRef<'a, T>,
    pub lse: BufRef<'a, f32>,
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
    let f = &input.forward;
    let aligned = views_aligned16([f.q, f.k, f.v, input.d_o], &grads);
    let v = pick(ctx, f.shape.head_dim, aligned, opts)?;
    attention_backward_with(ctx, v, input, grads, opts)
}

/// Whether Q, K, V, dO and the three gradients all start 16-byte aligned, as the versions with
/// 16-byte copies and stores need ([`BackwardKernel::align16`]).
fn views_aligned16<T: AttentionFloat>(inputs: [BufRef<'_, T>; 4], grads: &AttentionGrads<'_, T>) -> bool {
    let outputs = [grads.dq.addr(), grads.dk.addr(), grads.dv.addr()];
    inputs.iter().map(BufRef::addr).chain(outputs).all(|a| a.is_multiple_of(16))
}

/// The version [`attention_backward`] runs: [`default_version`] or, when none runs here
/// (misaligned views at head dim 256, or more shared memory than the device has), the highest
/// version with the head dim, whose checks then refuse the call saying what to fix.
fn pick(ctx: &Context, d: usize, aligned16: bool, opts: BackwardOptions) -> Result<&'static AttentionBackwardVersion> {
    default_version(ctx, d, aligned16, opts)
        .or_else(|| BACKWARD_VERSIONS.iter().rev().find(|v| v.kernel(d).is_some()))
        .ok_or_else(|| Error::invalid(OP, format!("head_dim = {d} is not supported ({})", supported_dims())))
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
    let AttentionBackwardInput { forward: AttentionInput { q, k, v, shape: s, causal, scale }, o, d_o, lse } = input;
    let AttentionGrads { mut dq, mut dk, mut dv } = grads;
    let views = Views { q, k, v, o, d_o, lse, dq: &mut dq, dk: &mut dk, dv: &mut dv };
    views.check_context(ctx, OP)?;
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
    let (q_len, kv_len) = (s.q_len(), s.kv_len());
    views.check_lens(OP, [q_len, kv_len, kv_len, q_len, q_len, s.lse_len()], |name, got, want| {
        format!("{name} has {got} elements but the shape {s:?} needs {want}")
    })?;
    let scale = views.check_kernel(ctx, OP, version.name, kernel, opts, scale, s.head_dim)?;
    if s.batch == 0 || s.heads == 0 {
        return Ok(());
    }
    let run = Run { kernel, kernels: T::kernels(kernel), shape: s, longest: (s.seq_q, s.seq_k), cu: None };
    launch(ctx, run, views, causal, scale, opts)
}

/// The backward's inputs over a variable-length batch: the forward's [`VarlenInput`] as it was
/// passed to [`attention::attention_varlen`] (Q, K, V, offsets, heads, mask and scale; the
/// offsets are validated per call, so a bad table is a typed error before any launch), its
/// outputs `o` (Q's layout, `[heads, total_q, head_dim]`) and `lse` (`[heads, total_q]`), and
/// the output gradient `d_o` (O's layout). Causal masking is aligned bottom-right per sequence,
/// as in the forward. The gradients: dQ has Q's layout, dK and dV have K's.
#[derive(Clone, Copy)]
pub struct VarlenBackwardInput<'a, T: AttentionFloat> {
    pub forward: VarlenInput<'a, T>,
    pub o: BufRef<'a, T>,
    pub d_o: BufRef<'a, T>,
    pub lse: BufRef<'a, f32>,
}

const VARLEN_OP: &str = "attention_varlen_backward";

/// As [`default_version`], for [`attention_varlen_backward`]: the highest rung with
/// variable-length kernels for `head_dim` that `ctx` runs on these views, or `None`.
pub fn default_varlen_version(
    ctx: &Context,
    head_dim: usize,
    aligned16: bool,
    opts: BackwardOptions,
) -> Option<&'static AttentionBackwardVersion> {
    BACKWARD_VERSIONS
        .iter()
        .rev()
        .find(|v| v.varlen_kernel(head_dim).is_some_and(|(k, _)| runs(ctx, k, aligned16, opts)))
}

/// Every head dim some version's variable-length kernels support, for error messages.
fn varlen_dims() -> String {
    attention::dims_by_version(BACKWARD_VERSIONS.iter().map(|v| (v.name, v.kernels)), |k| {
        k.varlen.is_some().then_some(k.head_dims)
    })
}

/// dQ, dK, dV of [`attention::attention_varlen`] with the highest version that has
/// variable-length kernels for the head dim and the views' alignment; `opts` as in
/// [`attention_backward`].
pub fn attention_varlen_backward<T: BackwardFloat>(
    ctx: &Context,
    input: VarlenBackwardInput<'_, T>,
    grads: AttentionGrads<'_, T>,
    opts: BackwardOptions,
) -> Result<()> {
    let f = &input.forward;
    let aligned = views_aligned16([f.q, f.k, f.v, input.d_o], &grads);
    let v = pick_varlen(ctx, f.head_dim, aligned, opts)?;
    attention_varlen_backward_with(ctx, v, input, grads, opts)
}

/// As [`pick`], for [`attention_varlen_backward`].
fn pick_varlen(
    ctx: &Context,
    d: usize,
    aligned16: bool,
    opts: BackwardOptions,
) -> Result<&'static AttentionBackwardVersion> {
    default_varlen_version(ctx, d, aligned16, opts)
        .or_else(|| BACKWARD_VERSIONS.iter().rev().find(|v| v.varlen_kernel(d).is_some()))
        .ok_or_else(|| Error::invalid(VARLEN_OP, format!("head_dim = {d} is not supported ({})", varlen_dims())))
}

/// As [`attention_varlen_backward`], with a chosen version.
pub fn attention_varlen_backward_with<T: BackwardFloat>(
    ctx: &Context,
    version: &AttentionBackwardVersion,
    input: VarlenBackwardInput<'_, T>,
    grads: AttentionGrads<'_, T>,
    opts: BackwardOptions,
) -> Result<()> {
    const OP: &str = VARLEN_OP;
    let VarlenBackwardInput { forward, o, d_o, lse } = input;
    let VarlenInput { q, k, v, cu_seqlens_q, cu_seqlens_k, heads, kv_heads, head_dim, causal, scale } = forward;
    let AttentionGrads { mut dq, mut dk, mut dv } = grads;
    let views = Views { q, k, v, o, d_o, lse, dq: &mut dq, dk: &mut dk, dv: &mut dv };
    views.check_context(ctx, OP)?;
    let Some((kernel, varlen)) = version.varlen_kernel(head_dim) else {
        return Err(Error::invalid(
            OP,
            format!(
                "head_dim = {head_dim}: {} has no variable-length backward for it (variable-length backward: {})",
                version.name,
                varlen_dims()
            ),
        ));
    };
    let packed = attention::varlen_shape(OP, cu_seqlens_q, cu_seqlens_k, heads, kv_heads, head_dim, q.len(), k.len())?;
    let (s, max_q, max_k) = (packed.shape, packed.max_q, packed.max_k);
    let (batch, total_q, total_k) = (s.batch, s.seq_q, s.seq_k);
    // Q and K's lengths were checked against the offsets by `varlen_shape`.
    views.check_lens(OP, [q.len(), k.len(), k.len(), q.len(), q.len(), heads * total_q], |name, got, want| {
        format!(
            "{name} has {got} elements but needs {want} ({total_q} query and {total_k} key tokens, {heads} heads, {kv_heads} kv heads, head_dim {head_dim})"
        )
    })?;
    let scale = views.check_kernel(ctx, OP, version.name, kernel, opts, scale, head_dim)?;
    if batch == 0 {
        return Ok(());
    }
    let run = Run {
        kernel,
        kernels: T::varlen_kernels(varlen),
        shape: s,
        longest: (max_q, max_k),
        cu: Some((cu_seqlens_q, cu_seqlens_k)),
    };
    launch(ctx, run, views, causal, scale, opts)
}

/// The views one backward launch reads and writes.
struct Views<'v, 'a, T: AttentionFloat> {
    q: BufRef<'a, T>,
    k: BufRef<'a, T>,
    v: BufRef<'a, T>,
    o: BufRef<'a, T>,
    d_o: BufRef<'a, T>,
    lse: BufRef<'a, f32>,
    dq: &'v mut BufMut<'a, T>,
    dk: &'v mut BufMut<'a, T>,
    dv: &'v mut BufMut<'a, T>,
}

impl<T: AttentionFloat> Views<'_, '_, T> {
    /// Every view belongs to `ctx`.
    fn check_context(&self, ctx: &Context, op: &'static str) -> Result<()> {
        for r in [&self.q, &self.k, &self.v, &self.o, &self.d_o] {
            r.check_context(ctx, op)?;
        }
        self.lse.check_context(ctx, op)?;
        for m in [&*self.dq, &*self.dk, &*self.dv] {
            m.check_context(ctx, op)?;
        }
        Ok(())
    }

    /// Lengths: `want` holds Q's, K's, V's, O's, dO's and lse's; dQ, dK and dV must match Q, K
    /// and V. `says` words the error for (view, its length, the length it needs).
    fn check_lens(
        &self,
        op: &'static str,
        want: [usize; 6],
        says: impl Fn(&str, usize, usize) -> String,
    ) -> Result<()> {
        let [q, k, v, o, d_o, lse] = want;
        let views = [
            ("q", self.q.len(), q),
            ("k", self.k.len(), k),
            ("v", self.v.len(), v),
            ("o", self.o.len(), o),
            ("d_o", self.d_o.len(), d_o),
            ("lse", self.lse.len(), lse),
            ("dq", self.dq.len(), q),
            ("dk", self.dk.len(), k),
            ("dv", self.dv.len(), v),
        ];
        match views.into_iter().find(|&(_, got, want)| got != want) {
            Some((name, got, want)) => Err(Error::invalid(op, says(name, got, want))),
            None => Ok(()),
        }
    }

    /// The checks that depend on the kernel: its shared memory (with `opts`) within the
    /// device's limit, 16-byte alignment where it loads 16 bytes at a time, and a finite scale
    /// (`None`: `1 / sqrt(head_dim)`), which it returns.
    #[allow(clippy::too_many_arguments)]
    fn check_kernel(
        &self,
        ctx: &Context,
        op: &'static str,
        version: &str,
        kernel: &BackwardKernel,
        opts: BackwardOptions,
        scale: Option<f32>,
        head_dim: usize,
    ) -> Result<f32> {
        if let Err(why) = attention::arch_ok(ctx, kernel.required_arch()) {
            return Err(Error::invalid(
                op,
                format!("{version}'s dK/dV kernel {why}: run the version `{op}` picks for this device"),
            ));
        }
        let (shared, which) = shared_need(kernel, opts);
        if shared > ctx.max_shared_bytes() {
            return Err(Error::invalid(
                op,
                format!(
                    "head_dim = {head_dim}: {version}'s {which} kernel needs {shared} bytes of shared memory per block and this device allows {}; run a version that needs less (leave the choice to {op} and it picks one where there is one) or a GPU with more (A100, H100 and H200 allow 163 KB or more)",
                    ctx.max_shared_bytes()
                ),
            ));
        }
        if kernel.align16 {
            let views = [
                ("q", self.q.addr()),
                ("k", self.k.addr()),
                ("v", self.v.addr()),
                ("d_o", self.d_o.addr()),
                ("dq", self.dq.addr()),
                ("dk", self.dk.addr()),
                ("dv", self.dv.addr()),
            ];
            attention::check_align16(op, version, &views)?;
        }
        let scale = scale.unwrap_or(1.0 / (head_dim as f32).sqrt());
        if !scale.is_finite() {
            return Err(Error::invalid(op, format!("scale = {scale}: pass the forward's finite scale")));
        }
        Ok(scale)
    }
}

/// What one validated backward runs: the kernels, the shape (varlen: `batch` sequences over
/// `seq_q` / `seq_k` total tokens), the longest query and key sequence (grid x), and the
/// offsets of a variable-length batch.
struct Run<'a, T: 'static> {
    kernel: &'static BackwardKernel,
    kernels: &'static BackwardKernels<T>,
    shape: AttentionShape,
    longest: (usize, usize),
    cu: Option<(&'a [i32], &'a [i32])>,
}

/// Launches a validated backward: `preprocess`, `dkdv`, then `dq_convert` or `dq`.
fn launch<T: BackwardFloat>(
    ctx: &Context,
    run: Run<'_, T>,
    views: Views<'_, '_, T>,
    causal: bool,
    scale: f32,
    opts: BackwardOptions,
) -> Result<()> {
    let Run { kernel, kernels, shape: s, longest: (max_q, max_k), cu } = run;
    let rows = gpu_kernels::attention::backward_rows(s.batch, s.heads, s.seq_q, cu.is_some());
    let q_len = rows * s.head_dim;
    let kt = kernel.row_threads as usize;
    let pre_blocks = grid_x("preprocess", rows.div_ceil(kernel.preprocess_rows as usize))?;
    let conv_blocks = grid_x("dq_convert", q_len.div_ceil(kt))?;
    let atomic = !opts.deterministic;
    let offsets = match cu {
        Some((cq, ck)) => Some((ctx.upload(cq)?, ctx.upload(ck)?)),
        None => None,
    };
    let empty = gpu_kernels::device::Global::empty;
    // `D`, then the atomic path's dQ accumulator from the word the kernels expect.
    let words = if atomic { gpu_kernels::attention::dq_accum_offset(rows) + q_len } else { rows };
    let maps = match kernel.tma {
        Some(tma) if max_k > 0 => tma_maps(ctx, tma, &views, &s, cu)?,
        _ => Vec::new(),
    };
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
            q: views.q.global(),
            k: views.k.global(),
            v: views.v.global(),
            o: views.o.global(),
            d_o: views.d_o.global(),
            lse: views.lse.global(),
            dq: views.dq.global_mut(),
            dk: views.dk.global_mut(),
            dv: views.dv.global_mut(),
            scratch: scratch.as_f32(),
            cu_seqlens_q: offsets.as_ref().map_or_else(empty, |(cq, _)| cq.as_view().global()),
            cu_seqlens_k: offsets.as_ref().map_or_else(empty, |(_, ck)| ck.as_view().global()),
            maps: 0,
        };
        let (block, row_block) = (Dim3::x(kernel.threads), Dim3::x(kernel.row_threads));
        let dq_block = Dim3::x(kernel.dq_threads);
        if rows > 0 {
            let cfg = LaunchConfig { grid: Dim3::x(pre_blocks), block: row_block, shared_bytes: 0 };
            ctx.launch(kernels.preprocess, cfg, params)?;
        }
        if max_k > 0 {
            let grid = Dim3::new(max_k.div_ceil(kernel.block_k as usize) as u32, s.kv_heads as u32, s.batch as u32);
            let cfg = LaunchConfig { grid, block, shared_bytes: kernel.dkdv_shared_bytes };
            // Varlen's maps are four per sequence (128 bytes each), more than the 4 KB the
            // constants start with past eight sequences; the buffer grows to hold them.
            ctx.with_constants(&maps, |addr| {
                ctx.launch(kernels.dkdv, cfg, AttentionBwdParams { maps: addr, ..params })
            })?;
        }
        if rows > 0 {
            if atomic {
                let cfg = LaunchConfig { grid: Dim3::x(conv_blocks), block: row_block, shared_bytes: 0 };
                ctx.launch(kernels.dq_convert, cfg, params)?;
            } else if max_q > 0 {
                let grid = Dim3::new(max_q.div_ceil(kernel.block_q as usize) as u32, s.heads as u32, s.batch as u32);
                let cfg = LaunchConfig { grid, block: dq_block, shared_bytes: kernel.dq_shared_bytes };
                ctx.launch(kernels.dq, cfg, params)?;
            }
        }
        Ok(())
    })
}

/// The Q, K, V and dO tensor maps of a TMA `dkdv` (rank 3 over (head dims, rows, planes), as
/// the forward's): one set over the dense batch (`batch x heads` planes of `seq_q` rows), or,
/// over a variable-length batch (`cu`), one set per sequence, each over that sequence's own
/// tokens (base at its first token, one plane per head, the packed total as the plane
/// pitch), so a box past the sequence reads zeros, never the next sequence.
fn tma_maps<T: AttentionFloat>(
    ctx: &Context,
    tma: gpu_kernels::attention::AttentionTma,
    views: &Views<'_, '_, T>,
    s: &AttentionShape,
    cu: Option<(&[i32], &[i32])>,
) -> Result<Vec<u8>> {
    let Some((cq, ck)) = cu else {
        let q = Rows { first: 0, rows: s.seq_q, planes: s.batch * s.heads, pitch: s.seq_q };
        return map_set(
            ctx,
            tma,
            views,
            s.head_dim,
            q,
            Rows { first: 0, rows: s.seq_k, planes: s.batch * s.kv_heads, pitch: s.seq_k },
        );
    };
    // `seq_q` and `seq_k` hold the totals; the offsets were validated against them.
    let mut maps = Vec::with_capacity(4 * TENSOR_MAP_BYTES * cq.len().saturating_sub(1));
    for (q, k) in cq.windows(2).zip(ck.windows(2)) {
        let rows = |w: &[i32], planes: usize, pitch: usize| Rows {
            first: w[0] as usize,
            rows: (w[1] - w[0]) as usize,
            planes,
            pitch,
        };
        let (q, k) = (rows(q, s.heads, s.seq_q), rows(k, s.kv_heads, s.seq_k));
        maps.extend(map_set(ctx, tma, views, s.head_dim, q, k)?);
    }
    Ok(maps)
}

/// Rows of a TMA map: from row `first` of the first plane, `rows` per plane, `planes` planes
/// `pitch` rows apart.
#[derive(Clone, Copy)]
struct Rows {
    first: usize,
    rows: usize,
    planes: usize,
    pitch: usize,
}

/// One set of Q, K, V and dO maps. A side without rows has nothing to load (a sequence without
/// queries walks no query tile; one without keys runs no block), so the other side's map holds
/// its places, and a sequence with neither gets zero bytes that no block reads.
fn map_set<T: AttentionFloat>(
    ctx: &Context,
    tma: gpu_kernels::attention::AttentionTma,
    views: &Views<'_, '_, T>,
    d: usize,
    q: Rows,
    k: Rows,
) -> Result<Vec<u8>> {
    let desc = |view: BufRef<'_, T>, r: Rows, box_dims| -> Result<Option<[u8; TENSOR_MAP_BYTES]>> {
        if r.rows == 0 || r.planes == 0 {
            return Ok(None);
        }
        let view = view.slice(r.first * d..view.len())?;
        let desc = crate::tma::desc_3d(OP, view, [d, r.rows, r.planes], d, r.pitch * d, box_dims, 128)?;
        crate::tma::encode(ctx, &desc).map(Some)
    };
    let (qm, om) = (desc(views.q, q, tma.q_box)?, desc(views.d_o, q, tma.q_box)?);
    let (km, vm) = (desc(views.k, k, tma.kv_box)?, desc(views.v, k, tma.kv_box)?);
    let none = [0u8; TENSOR_MAP_BYTES];
    let (qm, om) = (qm.or(km).unwrap_or(none), om.or(vm).unwrap_or(none));
    let (km, vm) = (km.unwrap_or(qm), vm.unwrap_or(om));
    Ok([qm, km, vm, om].concat())
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
                    // D = rowsum(dO * O) from O stored in the dtype, as every memory-efficient
                    // backward computes it (O is its input): O's rounding enters D, and through
                    // dP - D it dominates the error of rows over two or three keys.
                    let orow: Vec<f64> =
                        (0..d).map(|c| round((0..limit).map(|j| p[j] * vrow(j)[c]).sum::<f64>())).collect();
                    let dsum = dot(dorow, &orow);
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

/// The absolute tolerance added to FlashAttention's rule, as FlashAttention's own tests set it:
/// twice the largest error of `round(round(x + 0.3) - 0.3)` in the dtype over the rounded
/// reference gradients `x`: about one ulp of the largest `|x| + 0.3`, the rounding floor of a
/// max-error test on outputs stored in the dtype, never below one ulp of 0.3 (bf16 2e-3, f16
/// 2.4e-4; the tests' bf16 gradients reach 1 to 4, where it is 8e-3 to 1.6e-2). It covers rows over
/// one to three keys, where `dP - D` cancels and one or two rows are too small a sample of the
/// naive error to stand for the noise: with the former 1e-4, 4 of 1016 random sequences of
/// 1..3 queries and 1..4 keys failed, v01 and v02 (f32 SIMT and mma) on the same ones; with
/// this atol none of 4015 (with GQA and a second sequence of 0..8 x 0..8).
fn grad_atol<T: BackwardFloat>(want: &[f64]) -> f64 {
    let r = |x: f64| T::from_f64(x).to_f64();
    2.0 * want.iter().map(|&w| r(w)).map(|x| (r(r(x + 0.3) - 0.3) - x).abs()).fold(0.0, f64::max)
}

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
    let input = AttentionBackwardInput { forward: fwd, o: o.as_view(), d_o: dob.as_view(), lse: lse.as_view() };
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
    fa_rule_grads([&dq, &dk, &dv], &want, &low)
}

/// FlashAttention's rule for the backward: each gradient's max error against the f64
/// reference `want` at most 3x the naive low-precision backward's (`low`), plus
/// [`grad_atol`]; poison and guards as [`check::compare`] judges them.
fn fa_rule_grads<T: BackwardFloat>(got: [&Guarded<T>; 3], want: &Grads, low: &Grads) -> Result<Report> {
    let max_err = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    let mut named = Vec::new();
    for (name, got, want, low) in
        [("dq", got[0], &want.0, &low.0), ("dk", got[1], &want.1, &low.1), ("dv", got[2], &want.2, &low.2)]
    {
        let (g, guard) = got.finish()?;
        let (naive, atol) = (max_err(low, want), grad_atol::<T>(want));
        let bound = 3.0 * naive + atol;
        let mut r = check::compare(&g, want, &vec![bound; want.len()], guard);
        r.tol = format!("FA rule 3 x naive {} {name} error {naive:.2e} + atol {atol:.1e} = {bound:.2e}", T::NAME);
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
        None => pick(ctx, case.shape.head_dim, true, BackwardOptions { deterministic: case.deterministic })?,
    };
    match case.dtype {
        DType::BF16 => check_t::<bf16>(ctx, case, version),
        DType::F16 => check_t::<f16>(ctx, case, version),
        other => Err(Error::invalid(OP, format!("dtype {} is not supported; use bf16 or f16", other.name()))),
    }
}

/// One checked variable-length backward case: `lens[b] = (seq_q, seq_k)` of sequence `b`.
#[derive(Clone, Debug)]
pub struct VarlenBackwardCase {
    pub dtype: DType,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub lens: Vec<(usize, usize)>,
    pub causal: bool,
    pub deterministic: bool,
    pub seed: u64,
}

impl VarlenBackwardCase {
    /// `cu_seqlens_q`, `cu_seqlens_k` of the lengths.
    pub fn offsets(&self) -> (Vec<i32>, Vec<i32>) {
        attention::cu_seqlens(&self.lens)
    }
    /// Total query and key tokens.
    pub fn totals(&self) -> (usize, usize) {
        self.lens.iter().fold((0, 0), |(a, b), &(lq, lk)| (a + lq, b + lk))
    }
    /// Elements of Q (dQ, O, dO) and of K (V, dK, dV).
    pub fn q_len(&self) -> usize {
        self.heads * self.totals().0 * self.head_dim
    }
    pub fn kv_len(&self) -> usize {
        self.kv_heads * self.totals().1 * self.head_dim
    }
    /// Sequence `b` alone as a dense shape (`[1, heads, len, head_dim]`).
    fn seq_shape(&self, b: usize) -> AttentionShape {
        let (seq_q, seq_k) = self.lens[b];
        AttentionShape { batch: 1, heads: self.heads, kv_heads: self.kv_heads, seq_q, seq_k, head_dim: self.head_dim }
    }
}

/// The varlen case's random inputs (Q, K, V, dO in [-2, 2), packed).
fn varlen_inputs<T: AttentionFloat>(case: &VarlenBackwardCase) -> [Vec<T>; 4] {
    let mut rng = SmallRng::seed_from_u64(case.seed);
    let mut draw = |n: usize| -> Vec<T> { (0..n).map(|_| T::from_f64(rng.random_range(-2.0..2.0))).collect() };
    [draw(case.q_len()), draw(case.kv_len()), draw(case.kv_len()), draw(case.q_len())]
}

/// The forward's O and lse for a varlen case's `input`, from [`attention::attention_varlen`].
fn varlen_forward<T: BackwardFloat>(
    ctx: &Context,
    case: &VarlenBackwardCase,
    input: VarlenInput<'_, T>,
) -> Result<(crate::DeviceBuffer<T>, crate::DeviceBuffer<f32>)> {
    let mut o = ctx.alloc::<T>(case.q_len())?;
    let mut lse = ctx.alloc::<f32>(case.heads * case.totals().0)?;
    attention::attention_varlen(ctx, input, o.as_view_mut(), lse.as_view_mut())?;
    Ok((o, lse))
}

/// Runs the forward (as [`varlen_forward`]) and then [`attention_varlen_backward_with`] on the
/// case's inputs; the gradients land in `grads`.
pub fn run_varlen_case<T: BackwardFloat>(
    ctx: &Context,
    case: &VarlenBackwardCase,
    version: &AttentionBackwardVersion,
    grads: AttentionGrads<'_, T>,
) -> Result<()> {
    let [q, k, v, d_o] = varlen_inputs::<T>(case);
    let (qb, kb, vb, dob) = (ctx.upload(&q)?, ctx.upload(&k)?, ctx.upload(&v)?, ctx.upload(&d_o)?);
    let (cu_q, cu_k) = case.offsets();
    let forward = VarlenInput {
        q: qb.as_view(),
        k: kb.as_view(),
        v: vb.as_view(),
        cu_seqlens_q: &cu_q,
        cu_seqlens_k: &cu_k,
        heads: case.heads,
        kv_heads: case.kv_heads,
        head_dim: case.head_dim,
        causal: case.causal,
        scale: None,
    };
    let (o, lse) = varlen_forward(ctx, case, forward)?;
    let input = VarlenBackwardInput { forward, o: o.as_view(), d_o: dob.as_view(), lse: lse.as_view() };
    attention_varlen_backward_with(ctx, version, input, grads, BackwardOptions { deterministic: case.deterministic })
}

fn check_varlen_t<T: BackwardFloat>(
    ctx: &Context,
    case: &VarlenBackwardCase,
    version: &AttentionBackwardVersion,
) -> Result<Report> {
    let (h, hk, d) = (case.heads, case.kv_heads, case.head_dim);
    let mut dq = Guarded::<T>::poisoned(ctx, case.q_len())?;
    let mut dk = Guarded::<T>::poisoned(ctx, case.kv_len())?;
    let mut dv = Guarded::<T>::poisoned(ctx, case.kv_len())?;
    run_varlen_case(ctx, case, version, AttentionGrads { dq: dq.view_mut(), dk: dk.view_mut(), dv: dv.view_mut() })?;
    // Each sequence alone through the dense reference and naive backward, packed back.
    let f = |x: &[T]| x.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
    let [q, k, v, d_o] = varlen_inputs::<T>(case).map(|x| f(&x));
    let (cu_q, cu_k) = case.offsets();
    let (tq, tk) = case.totals();
    let scale = 1.0 / (d as f64).sqrt();
    let zeros = || (vec![0.0; case.q_len()], vec![0.0; case.kv_len()], vec![0.0; case.kv_len()]);
    let (mut want, mut low) = (zeros(), zeros());
    for (b, &(lq, lk)) in case.lens.iter().enumerate() {
        let (qs, ks) = (cu_q[b] as usize, cu_k[b] as usize);
        let (sq, sdo) = (gather(&q, h, tq, qs, lq, d), gather(&d_o, h, tq, qs, lq, d));
        let (sk, sv) = (gather(&k, hk, tk, ks, lk, d), gather(&v, hk, tk, ks, lk, d));
        let s = case.seq_shape(b);
        let r = reference_backward(&sq, &sk, &sv, &sdo, &s, case.causal, scale);
        let l = naive_backward(&sq, &sk, &sv, &sdo, &s, case.causal, scale, &|x| T::from_f64(x).to_f64());
        for (dst, src) in [(&mut want, r), (&mut low, l)] {
            scatter(&mut dst.0, &src.0, h, tq, qs, lq, d);
            scatter(&mut dst.1, &src.1, hk, tk, ks, lk, d);
            scatter(&mut dst.2, &src.2, hk, tk, ks, lk, d);
        }
    }
    fa_rule_grads([&dq, &dk, &dv], &want, &low)
}

/// Runs a variable-length case with `version` (`None`: the one [`attention_varlen_backward`]
/// picks): random packed inputs in [-2, 2), the forward's O and lse, poisoned and guarded
/// gradients, each sequence checked against the dense reference with FlashAttention's rule.
pub fn check_varlen_backward(
    ctx: &Context,
    case: &VarlenBackwardCase,
    version: Option<&AttentionBackwardVersion>,
) -> Result<Report> {
    let version = match version {
        Some(v) => v,
        None => pick_varlen(ctx, case.head_dim, true, BackwardOptions { deterministic: case.deterministic })?,
    };
    match case.dtype {
        DType::BF16 => check_varlen_t::<bf16>(ctx, case, version),
        DType::F16 => check_varlen_t::<f16>(ctx, case, version),
        other => Err(Error::invalid(VARLEN_OP, format!("dtype {} is not supported; use bf16 or f16", other.name()))),
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
    let fill = crate::bench::pattern::<T>;
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
        let input = AttentionBackwardInput { forward: fwd, o: o.as_view(), d_o: d_o.as_view(), lse: lse.as_view() };
        let grads = AttentionGrads { dq: dq.as_view_mut(), dk: dk.as_view_mut(), dv: dv.as_view_mut() };
        attention_backward_with(ctx, version, input, grads, opts)
    })?;
    Ok(crate::bench::median(&t))
}

/// FLOPs of the backward on a variable-length batch: 2.5 times the forward's.
pub fn varlen_flops(c: &attention::VarlenBenchCase<'_>) -> f64 {
    2.5 * c.flops()
}

/// Times the variable-length backward of `version` on `c` (median of [`crate::bench::REPS`],
/// L2 flushed before each run), each run a whole [`attention_varlen_backward_with`] call, so
/// it includes what the call does on the host (the offsets' upload; v03's per-sequence tensor
/// maps). O and lse come from one forward run first.
pub fn time_varlen<T: BackwardFloat>(
    ctx: &Context,
    version: &AttentionBackwardVersion,
    c: &attention::VarlenBenchCase<'_>,
    opts: BackwardOptions,
) -> Result<f64> {
    let data = c.upload::<T>(ctx)?;
    let (tq, tk) = data.totals();
    let (q_len, kv_len) = (c.heads * tq * c.head_dim, c.heads * tk * c.head_dim);
    let d_o = ctx.upload(&crate::bench::pattern::<T>(q_len, 3))?;
    let mut o = ctx.alloc::<T>(q_len)?;
    let mut lse = ctx.alloc::<f32>(c.heads * tq)?;
    let forward = data.input(c);
    attention::attention_varlen(ctx, forward, o.as_view_mut(), lse.as_view_mut())?;
    let (mut dq, mut dk, mut dv) = (ctx.alloc::<T>(q_len)?, ctx.alloc::<T>(kv_len)?, ctx.alloc::<T>(kv_len)?);
    let t = ctx.time_runs(crate::bench::WARMUP, crate::bench::REPS, true, || {
        let input = VarlenBackwardInput { forward, o: o.as_view(), d_o: d_o.as_view(), lse: lse.as_view() };
        let grads = AttentionGrads { dq: dq.as_view_mut(), dk: dk.as_view_mut(), dv: dv.as_view_mut() };
        attention_varlen_backward_with(ctx, version, input, grads, opts)
    })?;
    Ok(crate::bench::median(&t))
}

/// Keeps the tile constants the launcher reads in one place (the device crate's).
pub const TILING: bwd_v01_simt::BwdTiling = bwd_v01_simt::TILING;
