//! `gemm_tc`: `C = alpha * op(A) * op(B) + beta * C` on the tensor cores, A and B in bf16 or
//! f16, f32 accumulation, C in f32 or the input type, with an optional fused epilogue (bias,
//! GELU, residual). Kernels: `gpu-kernels/src/gemm_tc/` (a ladder, [`VERSIONS`]).
//!
//! Semantics as [`crate::gemm`] for one matrix: any `M, N, K >= 0`, `K = 0` gives `beta * C`,
//! `beta = 0` does not read C, A and B as stored or transposed (NN, NT, TN, TT). Batches are
//! refused (loop over them). Bitwise deterministic run to run: each C element is one lane's
//! fixed sequence of tensor-core instructions and, when K is split ([`split_k`]), one
//! thread's sum of the slices in slice order.

use crate::gemm::Gemm;
use crate::{BufMut, BufRef, Context, DType, Error, Float, LaunchConfig, Result, Scalar};
use gpu_kernels::Dim3;
use gpu_kernels::KernelDef;
use gpu_kernels::device::mma::MmaInput;
use gpu_kernels::device::{Global, GlobalMut};
use gpu_kernels::gemm_tc::TcParams;
pub use gpu_kernels::gemm_tc::{BUG_VERSIONS, TcConfig, TcTiling, TcVersion, VERSIONS};
use half::{bf16, f16};

/// An input type of the tensor-core GEMM (bf16, f16), its kernel in a version and its
/// split-K second pass.
pub trait TcInput: MmaInput + Float + Scalar {
    fn kernel(v: &TcVersion) -> &'static KernelDef<TcParams<Self>>;
    fn split_k_reduce() -> &'static KernelDef<TcParams<Self>>;
}

impl TcInput for bf16 {
    fn kernel(v: &TcVersion) -> &'static KernelDef<TcParams<Self>> {
        v.bf16
    }
    fn split_k_reduce() -> &'static KernelDef<TcParams<Self>> {
        &gpu_kernels::gemm_tc::GEMM_TC_SPLIT_K_REDUCE_BF16
    }
}

impl TcInput for f16 {
    fn kernel(v: &TcVersion) -> &'static KernelDef<TcParams<Self>> {
        v.f16
    }
    fn split_k_reduce() -> &'static KernelDef<TcParams<Self>> {
        &gpu_kernels::gemm_tc::GEMM_TC_SPLIT_K_REDUCE_F16
    }
}

/// The SMs [`split_k`] plans for on the emulator: an H200's 132, so CI runs the splits the
/// H200 would.
pub const EMULATED_SMS: usize = 132;

/// Fewest k-steps a slice keeps when [`split_k`] splits: below it the 4-stage ring barely
/// fills before the slice ends.
pub const MIN_SPLIT_STEPS: usize = 4;

/// The k-slices [`gemm_tc_ex`] runs `g` with on `sms` SMs: 1 unless the version allows
/// split-K and its C tiles would leave at least half of the SMs idle; then as many slices as
/// keep `tiles x slices <= sms` with at least [`MIN_SPLIT_STEPS`] k-steps each, rounded down
/// to a count that leaves no slice empty. Since `tiles x slices <= sms`, the workspace is at
/// most `sms x BM x BN` f32 (17 MB for v05 on 132 SMs).
pub fn split_k(config: TcConfig, g: &Gemm, sms: usize) -> usize {
    let TcConfig::Wgmma(t) = config else { return 1 };
    let tiles = tiles(config, g);
    if !t.split_k || g.k == 0 || tiles == 0 || 2 * tiles > sms {
        return 1;
    }
    let steps = g.k.div_ceil(t.bk as usize);
    slices_without_empty(steps, (sms / tiles).min(steps / MIN_SPLIT_STEPS).max(1))
}

/// How one [`gemm_tc_planned`] launch runs: K in `splits` slices (1: no split) and, for
/// persistent versions, at most `blocks` blocks (one per SM; other versions ignore it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcPlan {
    pub splits: usize,
    pub blocks: usize,
}

impl TcPlan {
    /// What [`gemm_tc_ex`] runs `g` with on `sms` SMs: [`split_k`]'s slices, one block per SM.
    pub fn auto(config: TcConfig, g: &Gemm, sms: usize) -> TcPlan {
        TcPlan { splits: split_k(config, g, sms), blocks: sms }
    }
}

/// `splits` lowered to the count of slices of `ceil(steps / splits)` k-steps: none is empty.
fn slices_without_empty(steps: usize, splits: usize) -> usize {
    steps.div_ceil(steps.div_ceil(splits))
}

/// The SMs [`split_k`] plans for on `ctx`: its device's, or [`EMULATED_SMS`].
pub fn sm_count(ctx: &Context) -> usize {
    ctx.device_info().map_or(EMULATED_SMS, |i| i.sm_count.max(1) as usize)
}

/// The optional epilogue of [`gemm_tc_ex`], applied to each C element after
/// `alpha A B + beta C`: `+ bias[j]` (f32, one per column), then GELU (tanh form), then
/// `+ residual` (C's shape, leading dimension and type).
pub struct Epilogue<'a, O: Scalar> {
    pub bias: Option<BufRef<'a, f32>>,
    pub gelu: bool,
    pub residual: Option<BufRef<'a, O>>,
}

impl<O: Scalar> Default for Epilogue<'_, O> {
    fn default() -> Self {
        Epilogue { bias: None, gelu: false, residual: None }
    }
}

/// The version [`gemm_tc`] runs on `ctx` for `g`: the rung the H200 measured fastest for the
/// shape's class (results/2026-12-04-h200.json), if this device and the operands allow it
/// ([`runs_here`]), else the top rung that runs. Measured: `v03_wgmma_256` was fastest on every
/// square from 2048 up (0.70-0.77 of cuBLAS, 1.2x `v02_wgmma`), `v02_wgmma` at 1024^3, with
/// M = 1-128 and N = K = 8192, and at 1024x1024x16384 (within 3% of the split-K and persistent
/// rungs, which were nowhere faster). So: `v03_wgmma_256` when its C tiles fill at least half
/// of the SMs ([`sm_count`]), `v02_wgmma` (tiles half the size) otherwise.
pub fn default_version(ctx: &Context, g: &Gemm, a_addr: usize, b_addr: usize) -> &'static TcVersion {
    let runs = |v: &&TcVersion| runs_here(ctx, v, g, a_addr, b_addr);
    let big = version(LARGE_SHAPES).expect("a version of the ladder");
    let preferred =
        if 2 * tiles(big.config, g) >= sm_count(ctx) { big } else { version(SMALL_SHAPES).expect("a version") };
    Some(preferred).filter(runs).or_else(|| VERSIONS.iter().rev().find(runs)).unwrap_or(&VERSIONS[0])
}

/// The rung [`default_version`] prefers when its tiles fill the GPU, and the one otherwise.
pub const LARGE_SHAPES: &str = "v03_wgmma_256";
pub const SMALL_SHAPES: &str = "v02_wgmma";

/// C tiles of `g` under `config`'s block tile.
fn tiles(config: TcConfig, g: &Gemm) -> usize {
    let (bm, bn) = config.block_tile();
    g.m.div_ceil(bm as usize) * g.n.div_ceil(bn as usize)
}

/// Whether `v` runs on `ctx` with these operands: the device has its PTX arch and its shared
/// memory per block, and TMA versions get 16-byte aligned bases and row pitches.
pub fn runs_here(ctx: &Context, v: &TcVersion, g: &Gemm, a_addr: usize, b_addr: usize) -> bool {
    let tma_ok =
        a_addr.is_multiple_of(16) && b_addr.is_multiple_of(16) && g.lda.is_multiple_of(8) && g.ldb.is_multiple_of(8);
    let arch_ok = match (v.config.required_arch(), ctx.device_info()) {
        (Some(need), Some(info)) => info.ptx_arch == need,
        _ => true,
    };
    let shared_ok = v.config.shared_bytes() <= ctx.max_shared_bytes();
    arch_ok && shared_ok && (v.config.tma_boxes(false, false).is_none() || tma_ok)
}

/// Looks a version up by name (`v01_mma`).
pub fn version(name: &str) -> Option<&'static TcVersion> {
    VERSIONS.iter().find(|v| v.name == name)
}

/// `C = alpha * op(A) * op(B) + beta * C` with f32 C and the default version.
pub fn gemm_tc<T: TcInput>(
    ctx: &Context,
    g: &Gemm,
    a: BufRef<'_, T>,
    b: BufRef<'_, T>,
    c: BufMut<'_, f32>,
) -> Result<()> {
    // C stored transposed runs as C^T = op(B)^T op(A)^T ([`gemm_tc_planned`]): choose for that.
    let v = if g.trans_c.is_t() {
        default_version(ctx, &g.swapped(), b.addr(), a.addr())
    } else {
        default_version(ctx, g, a.addr(), b.addr())
    };
    gemm_tc_with(ctx, v, g, a, b, c)
}

/// As [`gemm_tc`], with a chosen version.
pub fn gemm_tc_with<T: TcInput>(
    ctx: &Context,
    version: &TcVersion,
    g: &Gemm,
    a: BufRef<'_, T>,
    b: BufRef<'_, T>,
    c: BufMut<'_, f32>,
) -> Result<()> {
    gemm_tc_ex(ctx, version, g, a, b, c, &Epilogue::default())
}

/// The general form: C of type `O` (f32, or the input type `T`), an [`Epilogue`], a chosen
/// version. Transposed A (`K x M` as stored) and B (`N x K`) are supported, and C stored
/// transposed (`trans_c`) without a bias; batches are not.
/// K is split across blocks as [`split_k`] decides for this device, and persistent versions
/// run one block per SM ([`TcPlan::auto`]).
pub fn gemm_tc_ex<T: TcInput, O: Scalar>(
    ctx: &Context,
    version: &TcVersion,
    g: &Gemm,
    a: BufRef<'_, T>,
    b: BufRef<'_, T>,
    c: BufMut<'_, O>,
    ep: &Epilogue<'_, O>,
) -> Result<()> {
    let runs = if g.trans_c.is_t() { g.swapped() } else { *g };
    gemm_tc_planned(ctx, version, g, a, b, c, ep, TcPlan::auto(version.config, &runs, sm_count(ctx)))
}

/// As [`gemm_tc_ex`] with a chosen [`TcPlan`] (tests and tuning). Slices: 1 for any version;
/// more only for versions whose tiling allows split-K, at most the `ceil(K / 64)` k-steps,
/// lowered to the count that leaves no slice empty. Blocks: at least 1.
#[allow(clippy::too_many_arguments)]
pub fn gemm_tc_planned<T: TcInput, O: Scalar>(
    ctx: &Context,
    version: &TcVersion,
    g: &Gemm,
    a: BufRef<'_, T>,
    b: BufRef<'_, T>,
    mut c: BufMut<'_, O>,
    ep: &Epilogue<'_, O>,
    plan: TcPlan,
) -> Result<()> {
    const OP: &str = "gemm_tc";
    a.check_context(ctx, OP)?;
    b.check_context(ctx, OP)?;
    c.check_context(ctx, OP)?;
    let out16 = O::DTYPE == T::DTYPE;
    if O::DTYPE != DType::F32 && !out16 {
        return Err(Error::invalid(
            OP,
            format!("C is {} but the inputs are {}: C must be f32 or the input type", O::DTYPE.name(), T::DTYPE.name()),
        ));
    }
    if g.batch > 1 {
        return Err(Error::invalid(
            OP,
            format!("batch = {}: the tensor-core path runs one matrix; loop over the batch", g.batch),
        ));
    }
    g.check(a.len(), b.len(), c.len())?;
    if let Some(bias) = &ep.bias {
        bias.check_context(ctx, OP)?;
        // A bias per column of C would be one per row of the transpose that runs C stored
        // transposed, which the epilogue does not have.
        if g.trans_c.is_t() {
            return Err(Error::invalid(
                OP,
                "a bias needs C stored row-major (trans_c = N): the epilogue adds it per column of the stored rows",
            ));
        }
        if bias.len() < g.n {
            return Err(Error::invalid(
                OP,
                format!("bias has {} elements for n = {}; pass one per column", bias.len(), g.n),
            ));
        }
    }
    if let Some(r) = &ep.residual {
        r.check_context(ctx, OP)?;
        if r.len() < c.len().min(g.c_len()) {
            return Err(Error::invalid(
                OP,
                format!("the residual has {} elements; it has C's shape and ldc, so it needs {}", r.len(), g.c_len()),
            ));
        }
    }
    if g.m == 0 || g.n == 0 || g.batch == 0 {
        return Ok(());
    }
    if g.trans_c.is_t() {
        // The kernels store C row-major; C^T = op(B)^T op(A)^T is, in the same memory. The
        // residual has C's layout, so it follows (the bias was refused above).
        return gemm_tc_planned(ctx, version, &g.swapped(), b, a, c, ep, plan);
    }
    let cfg = version.config;
    if let (Some(need), Some(info)) = (cfg.required_arch(), ctx.device_info())
        && info.ptx_arch != need
    {
        return Err(Error::invalid(
            OP,
            format!(
                "{} runs only where the {need} PTX is loaded (Hopper, compute capability 9.0); this {} loaded {}: use {}",
                version.name, info.name, info.ptx_arch, VERSIONS[0].name
            ),
        ));
    }
    let TcPlan { splits, blocks } = plan;
    if blocks == 0 {
        return Err(Error::invalid(OP, "blocks = 0: a persistent launch needs at least one block"));
    }
    let splits = match cfg {
        _ if splits == 0 => return Err(Error::invalid(OP, "splits = 0: pass 1 for no split-K")),
        _ if splits == 1 || g.k == 0 => 1,
        TcConfig::Wgmma(t) if t.split_k => {
            let steps = g.k.div_ceil(t.bk as usize);
            if splits > steps || splits > 65_535 {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "splits = {splits}, but k = {} is {steps} k-steps of {}: pass at most {}",
                        g.k,
                        t.bk,
                        steps.min(65_535)
                    ),
                ));
            }
            slices_without_empty(steps, splits)
        }
        _ => {
            let with: Vec<_> = VERSIONS
                .iter()
                .filter(|v| matches!(v.config, TcConfig::Wgmma(t) if t.split_k))
                .map(|v| v.name)
                .collect();
            return Err(Error::invalid(
                OP,
                format!("{} does not split K (splits = {splits}): pass 1, or use {}", version.name, with.join(" or ")),
            ));
        }
    };
    let (bm, bn) = cfg.block_tile();
    let grid_y = g.m.div_ceil(bm as usize);
    if grid_y > 65_535 {
        return Err(Error::invalid(
            OP,
            format!("m = {} needs {grid_y} row tiles of {bm}; the grid allows 65535: split M", g.m),
        ));
    }
    // TMA versions: A is a K-wide, M-tall tensor, B N-wide and K-tall (contiguous dimension
    // first), both with 128-byte swizzled boxes. K = 0 loads nothing and needs no maps.
    let mut maps = Vec::new();
    let (ta, tb) = (g.trans_a.is_t(), g.trans_b.is_t());
    if let Some((a_box, b_box)) = cfg.tma_boxes(ta, tb)
        && g.k > 0
    {
        // (rows, columns) as stored.
        let (ar, ac) = if ta { (g.k, g.m) } else { (g.m, g.k) };
        let (br, bc) = if tb { (g.n, g.k) } else { (g.k, g.n) };
        let a_desc = crate::tma::desc_2d(OP, a, ar, ac, g.lda, a_box, 128)?;
        let b_desc = crate::tma::desc_2d(OP, b, br, bc, g.ldb, b_box, 128)?;
        maps.extend_from_slice(&crate::tma::encode(ctx, &a_desc)?);
        maps.extend_from_slice(&crate::tma::encode(ctx, &b_desc)?);
    }
    // cp.async copies 16-byte chunks: every row must start 16-byte aligned.
    let vec = |addr: usize, ld: usize| addr.is_multiple_of(16) && ld.is_multiple_of(8);
    let c_addr = c.global_mut();
    // SAFETY (both casts): `O` is f32 (C through `c`) or `T` (through `c16`), checked above;
    // the views keep their lengths, and the unused one is empty.
    let (c32, c16) = if out16 {
        (GlobalMut::empty(), unsafe { GlobalMut::from_raw_parts(c_addr.addr() as *mut T, c_addr.len()) })
    } else {
        (unsafe { GlobalMut::from_raw_parts(c_addr.addr() as *mut f32, c_addr.len()) }, { GlobalMut::empty() })
    };
    let (res32, res16) = match &ep.residual {
        None => (Global::empty(), Global::empty()),
        // SAFETY: as above, for the residual (C's type).
        Some(r) if out16 => (Global::empty(), unsafe { Global::from_raw_parts(r.addr() as *const T, r.len()) }),
        Some(r) => (unsafe { Global::from_raw_parts(r.addr() as *const f32, r.len()) }, Global::empty()),
    };
    let bias = ep.bias.as_ref().map_or(Global::empty(), |b| b.global());
    // Work units: tiles times slices (a persistent grid's blocks walk them).
    let units = tiles(cfg, g) * splits;
    if units > u32::MAX as usize {
        return Err(Error::invalid(OP, format!("{units} tiles x slices exceed 2^32: split the problem")));
    }
    // Split-K's workspace: `splits x M x N` f32 (the context's scratch).
    let partial_words = match splits {
        1 => None,
        _ => Some(splits.checked_mul(g.m).and_then(|w| w.checked_mul(g.n)).ok_or_else(|| {
            Error::invalid(OP, format!("a {splits} x {} x {} split-K workspace overflows: pass fewer splits", g.m, g.n))
        })?),
    };
    let launch = |maps_addr: u64, partial: GlobalMut<f32>| {
        let params = TcParams {
            m: g.m as u32,
            n: g.n as u32,
            k: g.k as u32,
            lda: g.lda as u32,
            ldb: g.ldb as u32,
            ldc: g.ldc as u32,
            vec_a: vec(a.addr(), g.lda) as u32,
            vec_b: vec(b.addr(), g.ldb) as u32,
            trans_a: ta as u32,
            trans_b: tb as u32,
            gelu: ep.gelu as u32,
            out16: out16 as u32,
            splits: splits as u32,
            alpha: g.alpha,
            beta: g.beta,
            a: a.global(),
            b: b.global(),
            c: c32,
            c16,
            bias,
            res: res32,
            res16,
            partial,
            maps: maps_addr,
        };
        let grid = match cfg {
            // Persistent: one block per unit (tile and slice) up to `blocks`.
            TcConfig::Wgmma(t) if t.persistent => Dim3::x(units.min(blocks) as u32),
            _ => Dim3::new(g.n.div_ceil(bn as usize) as u32, grid_y as u32, splits as u32),
        };
        let launch_cfg = LaunchConfig { grid, block: Dim3::x(cfg.threads()), shared_bytes: cfg.shared_bytes() };
        ctx.launch(T::kernel(version), launch_cfg, params)?;
        if splits > 1 {
            // The second pass: thread (x, y) adds the slices of C element (y, x).
            let threads = gpu_kernels::gemm_tc::split_k::REDUCE_THREADS;
            let reduce_cfg = LaunchConfig {
                grid: Dim3::new(g.n.div_ceil(threads as usize) as u32, g.m.min(65_535) as u32, 1),
                block: Dim3::x(threads),
                shared_bytes: 0,
            };
            ctx.launch(T::split_k_reduce(), reduce_cfg, TcParams { maps: 0, ..params })?;
        }
        Ok(())
    };
    let run = |maps_addr: u64| match partial_words {
        Some(words) => ctx.with_scratch(words, |scratch| launch(maps_addr, scratch.as_f32())),
        None => launch(maps_addr, GlobalMut::empty()),
    };
    ctx.with_constants(&maps, run)
}
