//! Attention forward (FlashAttention-style, never materializing the scores) over bf16/f16
//! `Q, K, V` with f32 accumulation; also returns the per-row log-sum-exp for the backward.
//! Layout and masking: see `gpu-kernels/src/attention/mod.rs`. Checked against the f64
//! reference with FlashAttention's rule (see [`check`]).
//!
//! Versions: [`VERSIONS`] (the ladder). [`attention`] runs the highest version that supports
//! the shape and the device (head dims 64 and 128 with 16-byte aligned views: `v04_pingpong`
//! where the sm_90a PTX is loaded, else `v02_mma`; `v01_simt` otherwise; head dim 256:
//! `v03_wgmma` only); [`attention_with`]
//! runs a named one. [`attention_varlen`] runs a packed variable-length batch
//! (`cu_seqlens_q/k`) the same way ([`attention_varlen_with`] with a named version); the
//! backward is in [`crate::attention_backward`]. Bitwise deterministic run to run: every
//! output is one thread's fixed sequence of operations.

use crate::check::{self, Guarded, Report};
use crate::{BufMut, BufRef, Context, DType, Dim3, Error, Float, LaunchConfig, Result};
use gpu_kernels::KernelDef;
use gpu_kernels::attention::AttentionParams;
pub use gpu_kernels::attention::{
    AttentionKernel, AttentionVersion, BUG_V02_SWAPPED_P, BUG_V03_SWAPPED_P, BUG_V03_TAIL_NOT_ZEROED, VERSIONS,
    VarlenKernels,
};
use half::{bf16, f16};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The input types attention takes: bf16 and f16.
pub trait AttentionFloat: Float {
    fn kernel(k: &AttentionKernel) -> &'static KernelDef<AttentionParams<Self>>;
    fn varlen_kernel(k: &VarlenKernels) -> &'static KernelDef<AttentionParams<Self>>;
}
impl AttentionFloat for bf16 {
    fn kernel(k: &AttentionKernel) -> &'static KernelDef<AttentionParams<Self>> {
        k.bf16
    }
    fn varlen_kernel(k: &VarlenKernels) -> &'static KernelDef<AttentionParams<Self>> {
        k.bf16
    }
}
impl AttentionFloat for f16 {
    fn kernel(k: &AttentionKernel) -> &'static KernelDef<AttentionParams<Self>> {
        k.f16
    }
    fn varlen_kernel(k: &VarlenKernels) -> &'static KernelDef<AttentionParams<Self>> {
        k.f16
    }
}

/// Looks a version up by name (`v01_simt`, `v02_mma`).
pub fn version(name: &str) -> Option<&'static AttentionVersion> {
    VERSIONS.iter().find(|v| v.name == name)
}

/// The version [`attention`] runs on `ctx` for `head_dim` when the views are (`aligned16`) or
/// are not all 16-byte aligned: the highest rung that supports both and that the device can
/// run (v03 and v04 need the sm_90a PTX; the emulator runs every version), or `None` when none does.
/// The order is the ladder's, not yet a measured one (no GPU run so far).
pub fn default_version(ctx: &Context, head_dim: usize, aligned16: bool) -> Option<&'static AttentionVersion> {
    highest(ctx, |k| k.head_dims.contains(&(head_dim as u32)) && (aligned16 || !k.align16))
}

/// As [`default_version`], for [`attention_varlen`]: the highest rung with variable-length
/// kernels for `head_dim` that the views' alignment and the device allow.
pub fn default_varlen_version(ctx: &Context, head_dim: usize, aligned16: bool) -> Option<&'static AttentionVersion> {
    highest(ctx, |k| k.head_dims.contains(&(head_dim as u32)) && (aligned16 || !k.align16) && k.varlen.is_some())
}

/// The highest version with a kernel that `fits` and that `ctx` can run.
fn highest(ctx: &Context, fits: impl Fn(&AttentionKernel) -> bool) -> Option<&'static AttentionVersion> {
    VERSIONS.iter().rev().find(|v| v.kernels.iter().any(|k| fits(k) && device_ok(ctx, k).is_ok()))
}

/// Refuses a view of a version that copies 16-byte rows (`addrs`: each view's name and start)
/// unless it starts 16-byte aligned.
pub(crate) fn check_align16(op: &'static str, version: &str, addrs: &[(&str, usize)]) -> Result<()> {
    match addrs.iter().find(|(_, addr)| !addr.is_multiple_of(16)) {
        None => Ok(()),
        Some((name, addr)) => Err(Error::invalid(
            op,
            format!(
                "{name} starts at {addr:#x}, not 16-byte aligned: {version} copies 16-byte rows; pass 16-byte aligned views (v01_simt takes any alignment, at head dims 32-128)"
            ),
        )),
    }
}

/// Why `ctx` cannot run `v` at `head_dim` (it has no kernel for it, or the kernel needs PTX
/// this device did not load or more shared memory than it has), or `None` when it can.
pub fn unavailable(ctx: &Context, v: &AttentionVersion, head_dim: usize) -> Option<String> {
    match v.kernel(head_dim) {
        None => Some(format!("{} has no kernel for head dim {head_dim}", v.name)),
        Some(k) => device_ok(ctx, k).err().map(|why| format!("{} {why}", v.name)),
    }
}

/// Whether `ctx` can run `k`: an error naming the PTX or the shared memory it needs when not.
fn device_ok(ctx: &Context, k: &AttentionKernel) -> std::result::Result<(), String> {
    arch_ok(ctx, k.required_arch())?;
    if k.shared_bytes > ctx.max_shared_bytes() {
        return Err(format!(
            "needs {} bytes of shared memory per block and this device allows {}",
            k.shared_bytes,
            ctx.max_shared_bytes()
        ));
    }
    Ok(())
}

fn supported_dims() -> String {
    dims_by_version(VERSIONS.iter().map(|v| (v.name, v.kernels)), |k| Some(k.head_dims))
}

/// `name: d, d; name: none; ...` for error messages: per version, the head dims of its
/// kernels that `dims` keeps.
pub(crate) fn dims_by_version<'a, K: 'a>(
    versions: impl Iterator<Item = (&'static str, &'a [K])>,
    dims: impl Fn(&K) -> Option<&'static [u32]>,
) -> String {
    versions
        .map(|(name, kernels)| {
            let d: Vec<String> = kernels.iter().filter_map(&dims).flatten().map(|d| d.to_string()).collect();
            format!("{name}: {}", if d.is_empty() { "none".to_string() } else { d.join(", ") })
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Attention's shape: `Q, O: [batch, heads, seq_q, head_dim]`, `K, V: [batch, kv_heads,
/// seq_k, head_dim]`, `lse: [batch, heads, seq_q]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub seq_q: usize,
    pub seq_k: usize,
    pub head_dim: usize,
}

impl AttentionShape {
    pub fn q_len(&self) -> usize {
        self.batch * self.heads * self.seq_q * self.head_dim
    }
    pub fn kv_len(&self) -> usize {
        self.batch * self.kv_heads * self.seq_k * self.head_dim
    }
    pub fn lse_len(&self) -> usize {
        self.batch * self.heads * self.seq_q
    }
}

/// Attention's inputs. `scale: None` is `1 / sqrt(head_dim)`.
#[derive(Clone, Copy)]
pub struct AttentionInput<'a, T: AttentionFloat> {
    pub q: BufRef<'a, T>,
    pub k: BufRef<'a, T>,
    pub v: BufRef<'a, T>,
    pub shape: AttentionShape,
    pub causal: bool,
    pub scale: Option<f32>,
}

fn check_shape(s: &AttentionShape) -> Result<()> {
    check_shape_for("attention", s)
}

/// The shape checks the forward and the backward share, in `op`'s name.
pub(crate) fn check_shape_for(op: &'static str, s: &AttentionShape) -> Result<()> {
    if s.kv_heads == 0 && s.heads > 0 {
        return Err(Error::invalid(op, "kv_heads = 0: pass at least one key/value head"));
    }
    if s.kv_heads > 0 && !s.heads.is_multiple_of(s.kv_heads) {
        return Err(Error::invalid(
            op,
            format!(
                "heads = {} is not a multiple of kv_heads = {}; grouped-query attention shares each kv head among heads / kv_heads query heads",
                s.heads, s.kv_heads
            ),
        ));
    }
    if s.heads > 65535 || s.batch > 65535 {
        return Err(Error::invalid(
            op,
            format!("{} heads x {} batch: each must be at most 65535 (grid y and z)", s.heads, s.batch),
        ));
    }
    if [s.seq_q, s.seq_k].iter().any(|&n| n > i32::MAX as usize) {
        return Err(Error::invalid(op, "sequence lengths must be below 2^31"));
    }
    for (what, n) in [("Q", s.q_len()), ("K", s.kv_len())] {
        let _ = n.checked_mul(4).ok_or_else(|| Error::invalid(op, format!("{what} overflows the address space")))?;
    }
    Ok(())
}

/// `O = softmax(Q K^T * scale + mask) V`, and `lse` per query row, with the highest version
/// that supports the head dim and the views' alignment.
pub fn attention<T: AttentionFloat>(
    ctx: &Context,
    input: AttentionInput<'_, T>,
    o: BufMut<'_, T>,
    lse: BufMut<'_, f32>,
) -> Result<()> {
    let aligned = [input.q.addr(), input.k.addr(), input.v.addr(), o.addr()].iter().all(|a| a.is_multiple_of(16));
    // When none runs here (misaligned views at head dim 256, PTX or shared memory the device
    // lacks), the highest version with the head dim refuses the call saying what to fix.
    let d = input.shape.head_dim;
    let v = default_version(ctx, d, aligned)
        .or_else(|| VERSIONS.iter().rev().find(|v| v.kernel(d).is_some()))
        .ok_or_else(|| {
            Error::invalid(
                "attention",
                format!("head_dim = {} is not supported by any version ({})", input.shape.head_dim, supported_dims()),
            )
        })?;
    attention_with(ctx, v, input, o, lse)
}

/// As [`attention`], with a chosen version.
pub fn attention_with<T: AttentionFloat>(
    ctx: &Context,
    version: &AttentionVersion,
    input: AttentionInput<'_, T>,
    mut o: BufMut<'_, T>,
    mut lse: BufMut<'_, f32>,
) -> Result<()> {
    const OP: &str = "attention";
    let AttentionInput { q, k, v, shape: s, causal, scale } = input;
    for r in [&q, &k, &v] {
        r.check_context(ctx, OP)?;
    }
    o.check_context(ctx, OP)?;
    lse.check_context(ctx, OP)?;
    check_shape(&s)?;
    let Some(kernel) = version.kernel(s.head_dim) else {
        return Err(Error::invalid(
            OP,
            format!(
                "head_dim = {}: {} supports {} (all versions: {})",
                s.head_dim,
                version.name,
                version.head_dims().map(|d| d.to_string()).collect::<Vec<_>>().join(", "),
                supported_dims()
            ),
        ));
    };
    for (name, got, want) in [
        ("q", q.len(), s.q_len()),
        ("k", k.len(), s.kv_len()),
        ("v", v.len(), s.kv_len()),
        ("o", o.len(), s.q_len()),
        ("lse", lse.len(), s.lse_len()),
    ] {
        if got != want {
            return Err(Error::invalid(OP, format!("{name} has {got} elements but the shape {s:?} needs {want}")));
        }
    }
    if kernel.align16 {
        check_align16(OP, version.name, &[("q", q.addr()), ("k", k.addr()), ("v", v.addr()), ("o", o.addr())])?;
    }
    let scale = scale.unwrap_or(1.0 / (s.head_dim as f32).sqrt());
    if !scale.is_finite() {
        return Err(Error::invalid(OP, format!("scale = {scale}: pass a finite scale (default 1/sqrt(head_dim))")));
    }
    if let Err(why) = device_ok(ctx, kernel) {
        return Err(Error::invalid(
            OP,
            format!("{} {why}: run the version `{OP}` picks for this device", version.name),
        ));
    }
    if s.batch == 0 || s.heads == 0 || s.seq_q == 0 {
        return Ok(());
    }
    // TMA kernels: maps over (head dims, sequence, batch x heads), so a box never reads into
    // the next head's rows.
    let maps = match kernel.tma {
        Some(tma) => {
            tma_maps(ctx, OP, tma, s.head_dim, (q, s.seq_q, s.batch * s.heads), (k, v, s.seq_k, s.batch * s.kv_heads))?
        }
        None => Vec::new(),
    };
    let grid = Dim3::new(s.seq_q.div_ceil(kernel.block_q as usize) as u32, s.heads as u32, s.batch as u32);
    let cfg = LaunchConfig { grid, block: Dim3::x(kernel.threads), shared_bytes: kernel.shared_bytes };
    let (o, lse) = (o.global_mut(), lse.global_mut());
    let params = |maps: u64| AttentionParams {
        batch: s.batch as u32,
        heads: s.heads as u32,
        kv_heads: s.kv_heads as u32,
        seq_q: s.seq_q as u32,
        seq_k: s.seq_k as u32,
        d: s.head_dim as u32,
        causal: causal as u32,
        scale_log2: scale * std::f32::consts::LOG2_E,
        q: q.global(),
        k: k.global(),
        v: v.global(),
        o,
        lse,
        cu_seqlens_q: gpu_kernels::device::Global::empty(),
        cu_seqlens_k: gpu_kernels::device::Global::empty(),
        maps,
    };
    if maps.is_empty() {
        ctx.launch(T::kernel(kernel), cfg, params(0))
    } else {
        ctx.with_constants(&maps, |addr| ctx.launch(T::kernel(kernel), cfg, params(addr)))
    }
}

/// Whether `ctx` loaded the PTX a kernel needs (`need`: `None` for every arch's): an error
/// naming it when not.
pub(crate) fn arch_ok(ctx: &Context, need: Option<&str>) -> std::result::Result<(), String> {
    match (need, ctx.device_info()) {
        (Some(need), Some(info)) if info.ptx_arch != need => Err(format!(
            "runs only where the {need} PTX is loaded (Hopper, compute capability 9.0); this {} loaded {}",
            info.name, info.ptx_arch
        )),
        _ => Ok(()),
    }
}

/// The Q, K and V tensor maps of a TMA kernel, one after the other: rank 3 (head dims, rows,
/// planes), Q over `q_rows x q_planes` and K, V over `k_rows x kv_planes`. With no key rows no
/// key tile is loaded (and K and V may be empty views): K's and V's maps then describe Q's
/// tensor.
pub(crate) fn tma_maps<T: AttentionFloat>(
    ctx: &Context,
    op: &'static str,
    tma: gpu_kernels::attention::AttentionTma,
    d: usize,
    (q, q_rows, q_planes): (BufRef<'_, T>, usize, usize),
    (k, v, k_rows, kv_planes): (BufRef<'_, T>, BufRef<'_, T>, usize, usize),
) -> Result<Vec<u8>> {
    let q_desc = crate::tma::desc_3d(op, q, [d, q_rows, q_planes], d, q_rows * d, tma.q_box, 128)?;
    let mut maps = crate::tma::encode(ctx, &q_desc)?.to_vec();
    for view in [k, v] {
        let desc = if k_rows == 0 {
            q_desc
        } else {
            crate::tma::desc_3d(op, view, [d, k_rows, kv_planes], d, k_rows * d, tma.kv_box, 128)?
        };
        maps.extend_from_slice(&crate::tma::encode(ctx, &desc)?);
    }
    Ok(maps)
}

/// A variable-length batch, packed as FlashAttention's varlen API packs it: sequence `b` owns
/// query tokens `cu_seqlens_q[b] .. cu_seqlens_q[b + 1]` and key tokens `cu_seqlens_k[b] ..
/// cu_seqlens_k[b + 1]` (`batch + 1` offsets each, from 0, non-decreasing, the last one the
/// total). Heads are the outer dimension: `q: [heads, total_q, head_dim]`, `k, v: [kv_heads,
/// total_k, head_dim]`, `o` as `q`, `lse: [heads, total_q]` (FlashAttention packs `[total,
/// heads, d]`; heads-outer keeps every sequence's rows of a head contiguous, which the
/// kernel's 16-byte row copies need). Causal masking is aligned bottom-right per sequence.
#[derive(Clone, Copy)]
pub struct VarlenInput<'a, T: AttentionFloat> {
    pub q: BufRef<'a, T>,
    pub k: BufRef<'a, T>,
    pub v: BufRef<'a, T>,
    /// Host offsets, validated (and uploaded) per call: a bad table is a typed error.
    pub cu_seqlens_q: &'a [i32],
    pub cu_seqlens_k: &'a [i32],
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub causal: bool,
    pub scale: Option<f32>,
}

/// Validates one offset table against the tokens its buffer holds; returns the longest
/// sequence.
pub(crate) fn check_offsets(op: &'static str, name: &str, cu: &[i32], total: usize) -> Result<usize> {
    if cu.is_empty() {
        return Err(Error::invalid(op, format!("{name} is empty: pass batch + 1 offsets, starting at 0")));
    }
    if cu[0] != 0 {
        return Err(Error::invalid(op, format!("{name}[0] = {}: the offsets start at 0", cu[0])));
    }
    let mut longest = 0;
    for i in 1..cu.len() {
        if cu[i] < cu[i - 1] {
            return Err(Error::invalid(
                op,
                format!("{name}[{i}] = {} < {name}[{}] = {}: offsets must be non-decreasing", cu[i], i - 1, cu[i - 1]),
            ));
        }
        longest = longest.max((cu[i] - cu[i - 1]) as usize);
    }
    let last = *cu.last().expect("non-empty") as usize;
    if last != total {
        return Err(Error::invalid(
            op,
            format!(
                "{name} ends at {last} but the buffer holds {total} tokens: the last offset is the total (offsets past the buffer read out of bounds)"
            ),
        ));
    }
    Ok(longest)
}

/// A packed variable-length batch's shape: the dense shape over the totals (batch as grid z,
/// `seq_q` / `seq_k` the token totals) and the longest query and key sequences.
pub(crate) struct VarlenShape {
    pub shape: AttentionShape,
    pub max_q: usize,
    pub max_k: usize,
}

/// Checks a packed batch (`[heads, total, head_dim]` Q of `q_len` and K of `k_len` elements,
/// `batch + 1` offsets each) and returns its shape; every error before any launch.
#[allow(clippy::too_many_arguments)]
pub(crate) fn varlen_shape(
    op: &'static str,
    cu_seqlens_q: &[i32],
    cu_seqlens_k: &[i32],
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    q_len: usize,
    k_len: usize,
) -> Result<VarlenShape> {
    if cu_seqlens_q.len() != cu_seqlens_k.len() {
        return Err(Error::invalid(
            op,
            format!(
                "cu_seqlens_q has {} offsets and cu_seqlens_k {}: both need batch + 1 (one batch count)",
                cu_seqlens_q.len(),
                cu_seqlens_k.len()
            ),
        ));
    }
    let batch = cu_seqlens_q.len().saturating_sub(1);
    let (q_row, k_row) = (heads * head_dim, kv_heads * head_dim);
    if q_row == 0 || k_row == 0 {
        return Err(Error::invalid(op, "heads, kv_heads and head_dim must be positive"));
    }
    for (name, got, row) in [("q", q_len, q_row), ("k", k_len, k_row)] {
        if !got.is_multiple_of(row) {
            return Err(Error::invalid(
                op,
                format!("{name} has {got} elements, not a whole number of tokens of {row} ([heads, total, head_dim])"),
            ));
        }
    }
    let (total_q, total_k) = (q_len / q_row, k_len / k_row);
    let max_q = check_offsets(op, "cu_seqlens_q", cu_seqlens_q, total_q)?;
    let max_k = check_offsets(op, "cu_seqlens_k", cu_seqlens_k, total_k)?;
    // The dense shape checks (GQA, grid, sizes) on the totals, with the batch as grid z.
    let shape = AttentionShape { batch, heads, kv_heads, seq_q: total_q, seq_k: total_k, head_dim };
    check_shape_for(op, &shape)?;
    Ok(VarlenShape { shape, max_q, max_k })
}

/// Attention over a variable-length batch ([`VarlenInput`]): `o: [heads, total_q, head_dim]`,
/// `lse: [heads, total_q]`, with the highest version that has variable-length kernels for the
/// head dim and that the views' alignment and the device allow ([`default_varlen_version`]).
pub fn attention_varlen<T: AttentionFloat>(
    ctx: &Context,
    input: VarlenInput<'_, T>,
    o: BufMut<'_, T>,
    lse: BufMut<'_, f32>,
) -> Result<()> {
    let aligned = [input.q.addr(), input.k.addr(), input.v.addr(), o.addr()].iter().all(|a| a.is_multiple_of(16));
    let d = input.head_dim;
    let with_varlen = |v: &&AttentionVersion| v.kernel(d).is_some_and(|k| k.varlen.is_some());
    let v = default_varlen_version(ctx, d, aligned).or_else(|| VERSIONS.iter().rev().find(with_varlen)).ok_or_else(
        || {
            Error::invalid(
                "attention_varlen",
                format!("head_dim = {} is not supported by any version ({})", input.head_dim, varlen_dims()),
            )
        },
    )?;
    attention_varlen_with(ctx, v, input, o, lse)
}

/// Every head dim some version's variable-length kernels support, for error messages.
fn varlen_dims() -> String {
    dims_by_version(VERSIONS.iter().map(|v| (v.name, v.kernels)), |k| k.varlen.is_some().then_some(k.head_dims))
}

/// As [`attention_varlen`], with a chosen version.
pub fn attention_varlen_with<T: AttentionFloat>(
    ctx: &Context,
    version: &AttentionVersion,
    input: VarlenInput<'_, T>,
    mut o: BufMut<'_, T>,
    mut lse: BufMut<'_, f32>,
) -> Result<()> {
    const OP: &str = "attention_varlen";
    let VarlenInput { q, k, v, cu_seqlens_q, cu_seqlens_k, heads, kv_heads, head_dim, causal, scale } = input;
    for r in [&q, &k, &v] {
        r.check_context(ctx, OP)?;
    }
    o.check_context(ctx, OP)?;
    lse.check_context(ctx, OP)?;
    let Some((kernel, vk)) = version.kernel(head_dim).and_then(|k| k.varlen.as_ref().map(|vk| (k, vk))) else {
        return Err(Error::invalid(
            OP,
            format!(
                "head_dim = {head_dim}: {} has no variable-length kernel for it (variable-length kernels: {})",
                version.name,
                varlen_dims()
            ),
        ));
    };
    if v.len() != k.len() {
        return Err(Error::invalid(OP, format!("v has {} elements but k has {}", v.len(), k.len())));
    }
    let packed = varlen_shape(OP, cu_seqlens_q, cu_seqlens_k, heads, kv_heads, head_dim, q.len(), k.len())?;
    let (s, max_q) = (packed.shape, packed.max_q);
    let (batch, total_q, total_k) = (s.batch, s.seq_q, s.seq_k);
    for (name, got, want) in [("o", o.len(), q.len()), ("lse", lse.len(), heads * total_q)] {
        if got != want {
            return Err(Error::invalid(OP, format!("{name} has {got} elements but needs {want}")));
        }
    }
    if kernel.align16 {
        check_align16(OP, version.name, &[("q", q.addr()), ("k", k.addr()), ("v", v.addr()), ("o", o.addr())])?;
    }
    let scale = scale.unwrap_or(1.0 / (head_dim as f32).sqrt());
    if !scale.is_finite() {
        return Err(Error::invalid(OP, format!("scale = {scale}: pass a finite scale (default 1/sqrt(head_dim))")));
    }
    if let Err(why) = device_ok(ctx, kernel) {
        return Err(Error::invalid(
            OP,
            format!("{} {why}: run the version `{OP}` picks for this device", version.name),
        ));
    }
    if batch == 0 || max_q == 0 {
        return Ok(());
    }
    let (cq, ck) = (ctx.upload(cu_seqlens_q)?, ctx.upload(cu_seqlens_k)?);
    let (o, lse) = (o.global_mut(), lse.global_mut());
    let params = |maps: u64| AttentionParams {
        batch: batch as u32,
        heads: heads as u32,
        kv_heads: kv_heads as u32,
        seq_q: total_q as u32,
        seq_k: total_k as u32,
        d: head_dim as u32,
        causal: causal as u32,
        scale_log2: scale * std::f32::consts::LOG2_E,
        q: q.global(),
        k: k.global(),
        v: v.global(),
        o,
        lse,
        cu_seqlens_q: cq.as_view().global(),
        cu_seqlens_k: ck.as_view().global(),
        maps,
    };
    // TMA kernels: maps over the packed totals (head dims, tokens, heads); a box past a
    // sequence reads the next one's rows, which the kernel masks (and zeroes in V).
    let maps = match kernel.tma {
        Some(tma) => tma_maps(ctx, OP, tma, head_dim, (q, total_q, heads), (k, v, total_k, kv_heads))?,
        None => Vec::new(),
    };
    let grid = Dim3::new(max_q.div_ceil(kernel.block_q as usize) as u32, heads as u32, batch as u32);
    let cfg = LaunchConfig { grid, block: Dim3::x(kernel.threads), shared_bytes: kernel.shared_bytes };
    if maps.is_empty() {
        ctx.launch(T::varlen_kernel(vk), cfg, params(0))
    } else {
        ctx.with_constants(&maps, |addr| ctx.launch(T::varlen_kernel(vk), cfg, params(addr)))
    }
}

/// Sequence rows `start .. start + len` of every head of a packed `[heads, total, d]` tensor,
/// as a dense `[heads, len, d]` one.
pub(crate) fn gather(src: &[f64], heads: usize, total: usize, start: usize, len: usize, d: usize) -> Vec<f64> {
    (0..heads).flat_map(|h| src[(h * total + start) * d..(h * total + start + len) * d].iter().copied()).collect()
}

/// The inverse of [`gather`]: a dense `[heads, len, d]` tensor into the packed one's rows.
pub(crate) fn scatter(dst: &mut [f64], src: &[f64], heads: usize, total: usize, start: usize, len: usize, d: usize) {
    for h in 0..heads {
        dst[(h * total + start) * d..(h * total + start + len) * d]
            .copy_from_slice(&src[h * len * d..(h + 1) * len * d]);
    }
}

/// One checked variable-length case: `lens[b] = (seq_q, seq_k)` of sequence `b`.
#[derive(Clone, Debug)]
pub struct VarlenCase {
    pub dtype: DType,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub lens: Vec<(usize, usize)>,
    pub causal: bool,
    pub seed: u64,
}

/// `cu_seqlens_q` and `cu_seqlens_k` of a packed batch whose sequence `b` has `lens[b] =
/// (seq_q, seq_k)`: each starts at 0 and adds one length per sequence. Test and bench inputs
/// only (lengths that fit in i32); the public entry points check the offsets they are given.
pub fn cu_seqlens(lens: &[(usize, usize)]) -> (Vec<i32>, Vec<i32>) {
    let (mut cu_q, mut cu_k) = (vec![0i32], vec![0i32]);
    for &(lq, lk) in lens {
        cu_q.push(cu_q[cu_q.len() - 1] + lq as i32);
        cu_k.push(cu_k[cu_k.len() - 1] + lk as i32);
    }
    (cu_q, cu_k)
}

fn check_varlen_t<T: AttentionFloat>(
    ctx: &Context,
    case: &VarlenCase,
    version: Option<&AttentionVersion>,
) -> Result<Report> {
    let (h, hk, d) = (case.heads, case.kv_heads, case.head_dim);
    let (cu_q, cu_k) = cu_seqlens(&case.lens);
    let (tq, tk) = (*cu_q.last().unwrap() as usize, *cu_k.last().unwrap() as usize);
    let mut rng = SmallRng::seed_from_u64(case.seed);
    let mut draw = |n: usize| -> Vec<T> { (0..n).map(|_| T::from_f64(rng.random_range(-2.0..2.0))).collect() };
    let (q, kk, v) = (draw(h * tq * d), draw(hk * tk * d), draw(hk * tk * d));
    let (qb, kb, vb) = (ctx.upload(&q)?, ctx.upload(&kk)?, ctx.upload(&v)?);
    let mut o = Guarded::<T>::poisoned(ctx, h * tq * d)?;
    let mut lse = Guarded::<f32>::poisoned(ctx, h * tq)?;
    let input = VarlenInput {
        q: qb.as_view(),
        k: kb.as_view(),
        v: vb.as_view(),
        cu_seqlens_q: &cu_q,
        cu_seqlens_k: &cu_k,
        heads: h,
        kv_heads: hk,
        head_dim: d,
        causal: case.causal,
        scale: None,
    };
    match version {
        Some(v) => attention_varlen_with(ctx, v, input, o.view_mut(), lse.view_mut())?,
        None => attention_varlen(ctx, input, o.view_mut(), lse.view_mut())?,
    }
    let (go, guo) = o.finish()?;
    let (gl, gul) = lse.finish()?;
    // Each sequence alone through the dense reference and naive attention ([1, heads, len, d]).
    let f = |x: &[T]| x.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
    let (q64, k64, v64) = (f(&q), f(&kk), f(&v));
    let scale = 1.0 / (d as f64).sqrt();
    let (mut ro, mut rl) = (vec![0.0; h * tq * d], vec![0.0; h * tq]);
    let (mut lo, mut ll) = (ro.clone(), rl.clone());
    for (b, &(lq, lk)) in case.lens.iter().enumerate() {
        let (qs, ks) = (cu_q[b] as usize, cu_k[b] as usize);
        let (sq, sk, sv) =
            (gather(&q64, h, tq, qs, lq, d), gather(&k64, hk, tk, ks, lk, d), gather(&v64, hk, tk, ks, lk, d));
        let s = AttentionShape { batch: 1, heads: h, kv_heads: hk, seq_q: lq, seq_k: lk, head_dim: d };
        let (o1, l1) = reference(&sq, &sk, &sv, &s, case.causal, scale);
        let (o2, l2) = naive(&sq, &sk, &sv, &s, case.causal, scale, &|x| T::from_f64(x).to_f64());
        for (dst, src, width) in [(&mut ro, &o1, d), (&mut lo, &o2, d), (&mut rl, &l1, 1), (&mut ll, &l2, 1)] {
            scatter(dst, src, h, tq, qs, lq, width);
        }
    }
    Ok(fa_rule_report(&go, &gl, (&ro, &rl), (&lo, &ll), guo, gul))
}

/// Runs a variable-length case through [`attention_varlen`]: random inputs in [-2, 2),
/// poisoned and guarded outputs, each sequence checked against the dense reference with
/// FlashAttention's rule.
pub fn check_varlen(ctx: &Context, case: &VarlenCase) -> Result<Report> {
    check_varlen_with(ctx, case, None)
}

/// As [`check_varlen`], through [`attention_varlen_with`] when `version` is given.
pub fn check_varlen_with(ctx: &Context, case: &VarlenCase, version: Option<&AttentionVersion>) -> Result<Report> {
    match case.dtype {
        DType::BF16 => check_varlen_t::<bf16>(ctx, case, version),
        DType::F16 => check_varlen_t::<f16>(ctx, case, version),
        other => {
            Err(Error::invalid("attention_varlen", format!("dtype {} is not supported; use bf16 or f16", other.name())))
        }
    }
}

/// The f64 reference on the same (rounded) inputs: `(O, lse)`.
pub fn reference(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    s: &AttentionShape,
    causal: bool,
    scale: f64,
) -> (Vec<f64>, Vec<f64>) {
    naive(q, k, v, s, causal, scale, &|x| x)
}

/// Naive attention with every intermediate passed through `round` (identity for the f64
/// reference; rounding to bf16/f16 for the low-precision naive attention of the check):
/// scores are rounded after the product and after scaling, probabilities after softmax
/// (computed in f32, as PyTorch does for 16-bit inputs), and the output after `P V`.
fn naive(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    s: &AttentionShape,
    causal: bool,
    scale: f64,
    round: &dyn Fn(f64) -> f64,
) -> (Vec<f64>, Vec<f64>) {
    let d = s.head_dim;
    let group = s.heads / s.kv_heads.max(1);
    let mut o = vec![0.0; s.q_len()];
    let mut lse = vec![f64::NEG_INFINITY; s.lse_len()];
    for b in 0..s.batch {
        for h in 0..s.heads {
            let kvh = h / group;
            for i in 0..s.seq_q {
                let qrow = &q[((b * s.heads + h) * s.seq_q + i) * d..][..d];
                // Written as the mask's definition (signed), independently of the kernel's
                // count of visible keys: key j is visible when j <= i + seq_k - seq_q.
                let visible = |j: usize| !causal || j as i64 <= i as i64 + s.seq_k as i64 - s.seq_q as i64;
                let limit = (0..s.seq_k).filter(|&j| visible(j)).count();
                if limit == 0 {
                    continue;
                }
                let scores: Vec<f64> = (0..limit)
                    .map(|j| {
                        let krow = &k[((b * s.kv_heads + kvh) * s.seq_k + j) * d..][..d];
                        round(round(qrow.iter().zip(krow).map(|(a, c)| a * c).sum::<f64>()) * scale)
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = scores.iter().map(|x| (x - m).exp()).sum();
                lse[(b * s.heads + h) * s.seq_q + i] = m + sum.ln();
                let out = &mut o[((b * s.heads + h) * s.seq_q + i) * d..][..d];
                for (j, x) in scores.iter().enumerate() {
                    let pj = round((x - m).exp() / sum);
                    let vrow = &v[((b * s.kv_heads + kvh) * s.seq_k + j) * d..][..d];
                    for (od, vd) in out.iter_mut().zip(vrow) {
                        *od += pj * vd;
                    }
                }
                for od in out.iter_mut() {
                    *od = round(*od);
                }
            }
        }
    }
    (o, lse)
}

/// One checked attention case.
#[derive(Clone, Copy, Debug)]
pub struct AttentionCase {
    pub dtype: DType,
    pub shape: AttentionShape,
    pub causal: bool,
    pub seed: u64,
}

fn check_t<T: AttentionFloat>(
    ctx: &Context,
    case: &AttentionCase,
    version: Option<&AttentionVersion>,
) -> Result<Report> {
    let s = case.shape;
    let mut rng = SmallRng::seed_from_u64(case.seed);
    let mut draw = |n: usize| -> Vec<T> { (0..n).map(|_| T::from_f64(rng.random_range(-2.0..2.0))).collect() };
    let (q, kk, v) = (draw(s.q_len()), draw(s.kv_len()), draw(s.kv_len()));
    let (qb, kb, vb) = (ctx.upload(&q)?, ctx.upload(&kk)?, ctx.upload(&v)?);
    let mut o = Guarded::<T>::poisoned(ctx, s.q_len())?;
    let mut lse = Guarded::<f32>::poisoned(ctx, s.lse_len())?;
    let input = AttentionInput {
        q: qb.as_view(),
        k: kb.as_view(),
        v: vb.as_view(),
        shape: s,
        causal: case.causal,
        scale: None,
    };
    match version {
        Some(v) => attention_with(ctx, v, input, o.view_mut(), lse.view_mut())?,
        None => attention(ctx, input, o.view_mut(), lse.view_mut())?,
    }
    let (go, guo) = o.finish()?;
    let (gl, gul) = lse.finish()?;
    let f = |x: &[T]| x.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
    let (q64, k64, v64) = (f(&q), f(&kk), f(&v));
    let scale = 1.0 / (s.head_dim as f64).sqrt();
    let (ro, rl) = reference(&q64, &k64, &v64, &s, case.causal, scale);
    let (lo, ll) = naive(&q64, &k64, &v64, &s, case.causal, scale, &|x| T::from_f64(x).to_f64());
    Ok(fa_rule_report(&go, &gl, (&ro, &rl), (&lo, &ll), guo, gul))
}

/// Runs `case` with the version [`attention`] picks: random inputs in [-2, 2), poisoned and
/// guarded outputs, FlashAttention's rule.
pub fn check(ctx: &Context, case: &AttentionCase) -> Result<Report> {
    check_with(ctx, case, None)
}

/// As [`check()`], with a chosen version (`None`: the one [`attention`] picks).
pub fn check_with(ctx: &Context, case: &AttentionCase, version: Option<&AttentionVersion>) -> Result<Report> {
    match case.dtype {
        DType::BF16 => check_t::<bf16>(ctx, case, version),
        DType::F16 => check_t::<f16>(ctx, case, version),
        other => Err(Error::invalid("attention", format!("dtype {} is not supported; use bf16 or f16", other.name()))),
    }
}

/// One attention timing against PyTorch's `scaled_dot_product_attention` on the same shape.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AttentionMeasurement {
    pub version: &'static str,
    pub shape: String,
    pub causal: bool,
    pub dtype: &'static str,
    pub median_ms: f64,
    /// `4 * batch * heads * seq_q * seq_k * head_dim` (halved when causal) over the time.
    pub tflops: f64,
    pub torch_median_ms: Option<f64>,
    pub torch_tflops: Option<f64>,
    /// Kernel throughput over PyTorch's (1.0 = parity).
    pub ratio: Option<f64>,
}

/// Shapes the bench times: (batch, heads, seq, head_dim), each causal and not, with every
/// version that supports the head dim; CUDA-core versions only up to [`BENCH_SIMT_MAX_SEQ`].
pub const BENCH_SHAPES: &[(usize, usize, usize, usize)] = &[
    (16, 16, 512, 64),
    (16, 16, 512, 128),
    (4, 16, 2048, 64),
    (4, 16, 2048, 128),
    (4, 16, 2048, 256),
    (2, 16, 4096, 128),
    (1, 16, 8192, 128),
    (1, 16, 16384, 128),
];

/// Longest sequence the bench times a CUDA-core version on (longer ones take minutes there).
pub const BENCH_SIMT_MAX_SEQ: usize = 4096;

/// The variable-length bench batch: 16 sequences (each its own queries and keys) from 256 to
/// 4096 tokens, 30,748 in all, a prefill mix with no common length.
pub const BENCH_VARLEN_LENS: &[usize] =
    &[3989, 512, 2048, 1031, 4096, 700, 1500, 2999, 256, 3500, 1200, 800, 2600, 1777, 3100, 640];

/// (heads, head dim) of the variable-length bench rows, each causal and not.
pub const BENCH_VARLEN_SHAPES: &[(usize, usize)] = &[(16, 64), (16, 128)];

/// Times `version`'s variable-length kernel on `c` (median of [`crate::bench::REPS`], L2
/// flushed before each run). Each run is a whole [`attention_varlen_with`] call, so it includes
/// the upload of the offsets (`batch + 1` integers each), as a caller's would.
pub fn time_varlen<T: AttentionFloat>(
    ctx: &Context,
    version: &AttentionVersion,
    c: &VarlenBenchCase<'_>,
) -> Result<f64> {
    let data = c.upload::<T>(ctx)?;
    let (tq, _) = data.totals();
    let mut o = ctx.alloc::<T>(c.heads * tq * c.head_dim)?;
    let mut lse = ctx.alloc::<f32>(c.heads * tq)?;
    let t = ctx.time_runs(crate::bench::WARMUP, crate::bench::REPS, true, || {
        attention_varlen_with(ctx, version, data.input(c), o.as_view_mut(), lse.as_view_mut())
    })?;
    Ok(crate::bench::median(&t))
}

/// A [`VarlenBenchCase`]'s packed Q, K, V (the bench pattern) on the device, and its offsets.
pub struct VarlenBenchData<T: AttentionFloat> {
    pub q: crate::DeviceBuffer<T>,
    pub k: crate::DeviceBuffer<T>,
    pub v: crate::DeviceBuffer<T>,
    pub cu_q: Vec<i32>,
    pub cu_k: Vec<i32>,
}

impl<T: AttentionFloat> VarlenBenchData<T> {
    /// Total query and key tokens.
    pub fn totals(&self) -> (usize, usize) {
        (self.cu_q[self.cu_q.len() - 1] as usize, self.cu_k[self.cu_k.len() - 1] as usize)
    }
    /// The forward's input over this data, with `c`'s heads, head dim and mask.
    pub fn input(&self, c: &VarlenBenchCase<'_>) -> VarlenInput<'_, T> {
        VarlenInput {
            q: self.q.as_view(),
            k: self.k.as_view(),
            v: self.v.as_view(),
            cu_seqlens_q: &self.cu_q,
            cu_seqlens_k: &self.cu_k,
            heads: c.heads,
            kv_heads: c.heads,
            head_dim: c.head_dim,
            causal: c.causal,
            scale: None,
        }
    }
}

/// FLOPs of the forward pass on `s`.
pub fn flops(s: &AttentionShape, causal: bool) -> f64 {
    4.0 * (s.batch * s.heads * s.seq_q * s.seq_k * s.head_dim) as f64 * if causal { 0.5 } else { 1.0 }
}

/// Times `version` on `s` (median of [`crate::bench::REPS`], L2 flushed before each run).
pub fn time<T: AttentionFloat>(
    ctx: &Context,
    version: &AttentionVersion,
    s: AttentionShape,
    causal: bool,
) -> Result<f64> {
    let fill = |n: usize, salt: usize| crate::bench::pattern::<T>(n, salt);
    let (q, k, v) =
        (ctx.upload(&fill(s.q_len(), 0))?, ctx.upload(&fill(s.kv_len(), 1))?, ctx.upload(&fill(s.kv_len(), 2))?);
    let mut o = ctx.alloc::<T>(s.q_len())?;
    let mut lse = ctx.alloc::<f32>(s.lse_len())?;
    let t = ctx.time_runs(crate::bench::WARMUP, crate::bench::REPS, true, || {
        let input = AttentionInput { q: q.as_view(), k: k.as_view(), v: v.as_view(), shape: s, causal, scale: None };
        attention_with(ctx, version, input, o.as_view_mut(), lse.as_view_mut())
    })?;
    Ok(crate::bench::median(&t))
}

/// PyTorch's times for `shapes` from `scripts/torch_attention.py` (found beside the
/// executable, in the source tree, or at `FERROKERN_TORCH_ATTENTION`; the interpreter is
/// `FERROKERN_PYTHON` or `python3`). `Err` says why there is no baseline at all; a shape's own
/// `Err` why PyTorch could not time it.
pub fn torch_baseline(shapes: &[(AttentionShape, bool, &'static str)]) -> TorchTimes {
    torch_baseline_pass(shapes, false)
}

/// PyTorch's per-shape times (milliseconds, or why a shape has none), or why there are none.
pub type TorchTimes = std::result::Result<Vec<std::result::Result<f64, String>>, String>;

/// As [`torch_baseline`], timing the forward or (`backward`) the backward alone (autograd of
/// `scaled_dot_product_attention`, the graph kept from one forward).
pub fn torch_baseline_pass(shapes: &[(AttentionShape, bool, &'static str)], backward: bool) -> TorchTimes {
    run_torch(
        shapes
            .iter()
            .map(|(s, causal, dtype)| {
                serde_json::json!({"batch": s.batch, "heads": s.heads, "kv_heads": s.kv_heads, "seq_q": s.seq_q,
                    "seq_k": s.seq_k, "head_dim": s.head_dim, "causal": causal, "dtype": dtype, "backward": backward})
            })
            .collect(),
    )
}

/// A variable-length batch the bench times: each sequence's query and key lengths, with
/// `heads` query and key/value heads.
#[derive(Clone, Copy, Debug)]
pub struct VarlenBenchCase<'a> {
    pub lens: &'a [(usize, usize)],
    pub heads: usize,
    pub head_dim: usize,
    pub causal: bool,
    pub dtype: &'static str,
}

impl VarlenBenchCase<'_> {
    /// Uploads the case's packed Q, K, V (the bench pattern, `heads` of each).
    pub fn upload<T: AttentionFloat>(&self, ctx: &Context) -> Result<VarlenBenchData<T>> {
        let (cu_q, cu_k) = cu_seqlens(self.lens);
        let (tq, tk) = (cu_q[self.lens.len()] as usize, cu_k[self.lens.len()] as usize);
        let (q_len, kv_len) = (self.heads * tq * self.head_dim, self.heads * tk * self.head_dim);
        let fill = crate::bench::pattern::<T>;
        Ok(VarlenBenchData {
            q: ctx.upload(&fill(q_len, 0))?,
            k: ctx.upload(&fill(kv_len, 1))?,
            v: ctx.upload(&fill(kv_len, 2))?,
            cu_q,
            cu_k,
        })
    }
    /// FLOPs of the forward pass, as [`flops`] counts them per sequence.
    pub fn flops(&self) -> f64 {
        let (heads, head_dim) = (self.heads, self.head_dim);
        self.lens
            .iter()
            .map(|&(seq_q, seq_k)| {
                flops(&AttentionShape { batch: 1, heads, kv_heads: heads, seq_q, seq_k, head_dim }, self.causal)
            })
            .sum()
    }
}

/// PyTorch's forward times for variable-length batches: `scaled_dot_product_attention` on
/// nested jagged tensors, which PyTorch runs on its variable-length FlashAttention kernel.
pub fn torch_varlen_baseline(cases: &[VarlenBenchCase<'_>]) -> TorchTimes {
    torch_varlen_baseline_pass(cases, false)
}

/// As [`torch_varlen_baseline`], timing the forward or (`backward`) the backward alone
/// (autograd through the nested tensors, the graph kept from one forward).
pub fn torch_varlen_baseline_pass(cases: &[VarlenBenchCase<'_>], backward: bool) -> TorchTimes {
    run_torch(
        cases
            .iter()
            .map(|c| {
                serde_json::json!({"batch": c.lens.len(), "heads": c.heads, "kv_heads": c.heads, "seq_q": 0,
                    "seq_k": 0, "head_dim": c.head_dim, "causal": c.causal, "dtype": c.dtype, "varlen": c.lens,
                    "backward": backward})
            })
            .collect(),
    )
}

/// Runs the torch script on `cases` (one JSON object each) and reads one result per case.
fn run_torch(cases: Vec<serde_json::Value>) -> TorchTimes {
    let python = std::env::var("FERROKERN_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = std::env::var("FERROKERN_TORCH_ATTENTION")
        .map(std::path::PathBuf::from)
        .ok()
        .or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(|d| d.join("torch_attention.py")))
                .filter(|p| p.is_file())
        })
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/torch_attention.py"));
    run_script(&python, &script, cases)
}

/// [`run_torch`] with a given interpreter and script: one JSON line per case comes back, with
/// `median_ms`, or `unsupported` (that case's reason); one line with `error` means no baseline.
fn run_script(python: &str, script: &std::path::Path, cases: Vec<serde_json::Value>) -> TorchTimes {
    if !script.is_file() {
        return Err(format!("{} not found", script.display()));
    }
    let arg = serde_json::to_string(&cases).expect("serializable");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(arg)
        .output()
        .map_err(|e| format!("running {python}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut times = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("bad output from the torch script: {e}: {line}"))?;
        if let Some(e) = v.get("error") {
            return Err(e.as_str().unwrap_or("unknown").to_string());
        }
        times.push(match (v.get("median_ms").and_then(|m| m.as_f64()), v.get("unsupported")) {
            (Some(ms), _) => Ok(ms),
            (None, why) => Err(why.and_then(|w| w.as_str()).unwrap_or("no time reported").to_string()),
        });
    }
    if times.len() != cases.len() {
        return Err(format!(
            "the torch script printed {} results for {} shapes: {}",
            times.len(),
            cases.len(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(times)
}

/// FlashAttention's rule on one case: the kernel's max error (O and lse, against the f64
/// reference `r`) at most twice that of the naive attention computed in `T` (`naive`), plus
/// a tiny atol (1e-5 for O, 1e-4 for lse); guards and poison as [`check::compare`] judges them.
fn fa_rule_report<T: Float>(
    go: &[T],
    gl: &[f32],
    r: (&[f64], &[f64]),
    naive: (&[f64], &[f64]),
    guo: Option<check::GuardViolation>,
    gul: Option<check::GuardViolation>,
) -> Report {
    let max_err = |a: &[f64], b: &[f64]| {
        a.iter().zip(b).filter(|(x, y)| x.is_finite() && y.is_finite()).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
    };
    let ((ro, rl), (lo, ll)) = (r, naive);
    let o_bound = 2.0 * max_err(lo, ro) + 1e-5;
    let l_bound = 2.0 * max_err(ll, rl) + 1e-4;
    let mut ro_report = check::compare(go, ro, &vec![o_bound; ro.len()], guo);
    ro_report.tol = format!("FA rule 2 x naive {} error ({:.2e}) + 1e-5", T::NAME, o_bound);
    let mut rl_report = check::compare(gl, rl, &vec![l_bound; rl.len()], gul);
    rl_report.tol = format!("FA rule 2 x naive {} lse error ({:.2e}) + 1e-4", T::NAME, l_bound);
    check::merge(vec![("o", ro_report), ("lse", rl_report)])
}

#[cfg(test)]
mod tests {
    use super::run_script;

    /// The baseline's protocol: a time per case, a case's own reason, a missing baseline's
    /// reason, and a short answer; the "interpreter" is `sh` running a script that prints them.
    #[test]
    fn torch_script_results_are_read_per_case() {
        let dir = std::env::temp_dir().join(format!("ferrokern-torch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = |name: &str, body: &str| {
            let p = dir.join(name);
            std::fs::write(&p, body).unwrap();
            p
        };
        let cases = || vec![serde_json::json!({"a": 1}), serde_json::json!({"a": 2})];
        let two = script(
            "two.sh",
            "echo '{\"median_ms\": 1.5}'\necho '{\"median_ms\": null, \"unsupported\": \"no jagged causal\"}'\n",
        );
        let t = run_script("sh", &two, cases()).unwrap();
        assert_eq!(t[0], Ok(1.5));
        assert_eq!(t[1], Err("no jagged causal".to_string()));
        let missing = script("missing.sh", "echo '{\"error\": \"torch is not installed\"}'\n");
        assert_eq!(run_script("sh", &missing, cases()), Err("torch is not installed".to_string()));
        let short = run_script("sh", &script("short.sh", "echo '{\"median_ms\": 2.0}'\n"), cases()).unwrap_err();
        assert!(short.contains("printed 1 results for 2 shapes"), "{short}");
        let garbage = run_script("sh", &script("bad.sh", "echo oops\n"), cases()).unwrap_err();
        assert!(garbage.contains("bad output"), "{garbage}");
        assert!(run_script("sh", &dir.join("absent.sh"), cases()).unwrap_err().contains("not found"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
