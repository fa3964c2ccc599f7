//! `gemm_tc`: `C = alpha * op(A) * op(B) + beta * C` on the tensor cores, A and B in bf16 or
//! f16, f32 accumulation, C in f32 or the input type, with an optional fused epilogue (bias,
//! GELU, residual). Kernels: `gpu-kernels/src/gemm_tc/` (a ladder, [`VERSIONS`]).
//!
//! Semantics as [`crate::gemm`] for one matrix: any `M, N, K >= 0`, `K = 0` gives `beta * C`,
//! `beta = 0` does not read C, A and B as stored or transposed (NN, NT, TN, TT). Batches are
//! refused (loop over them). Bitwise deterministic run to run: each C element is one lane's
//! fixed sequence of tensor-core instructions.

use crate::gemm::Gemm;
use crate::{BufMut, BufRef, Context, DType, Error, Float, LaunchConfig, Result, Scalar};
use gpu_kernels::Dim3;
use gpu_kernels::KernelDef;
use gpu_kernels::device::Global;
use gpu_kernels::device::mma::MmaInput;
use gpu_kernels::gemm_tc::TcParams;
pub use gpu_kernels::gemm_tc::{BUG_VERSIONS, TcConfig, TcTiling, TcVersion, VERSIONS};
use half::{bf16, f16};

/// An input type of the tensor-core GEMM (bf16, f16) and its kernel in a version.
pub trait TcInput: MmaInput + Float + Scalar {
    fn kernel(v: &TcVersion) -> &'static KernelDef<TcParams<Self>>;
}

impl TcInput for bf16 {
    fn kernel(v: &TcVersion) -> &'static KernelDef<TcParams<Self>> {
        v.bf16
    }
}

impl TcInput for f16 {
    fn kernel(v: &TcVersion) -> &'static KernelDef<TcParams<Self>> {
        v.f16
    }
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

/// The version [`gemm_tc`] runs on `ctx` for `g`: the top rung this device can run and the
/// operands allow (TMA needs 16-byte aligned bases and row pitches).
pub fn default_version(ctx: &Context, g: &Gemm, a_addr: usize, b_addr: usize) -> &'static TcVersion {
    let tma_ok =
        a_addr.is_multiple_of(16) && b_addr.is_multiple_of(16) && g.lda.is_multiple_of(8) && g.ldb.is_multiple_of(8);
    VERSIONS
        .iter()
        .rev()
        .find(|v| {
            let arch_ok = match (v.config.required_arch(), ctx.device_info()) {
                (Some(need), Some(info)) => info.ptx_arch == need,
                _ => true,
            };
            arch_ok && (v.config.tma_boxes(false, false).is_none() || tma_ok)
        })
        .unwrap_or(&VERSIONS[0])
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
    gemm_tc_with(ctx, default_version(ctx, g, a.addr(), b.addr()), g, a, b, c)
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
/// version. Transposed A (`K x M` as stored) and B (`N x K`) are supported; batches are not.
pub fn gemm_tc_ex<T: TcInput, O: Scalar>(
    ctx: &Context,
    version: &TcVersion,
    g: &Gemm,
    a: BufRef<'_, T>,
    b: BufRef<'_, T>,
    mut c: BufMut<'_, O>,
    ep: &Epilogue<'_, O>,
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
        (gpu_kernels::device::GlobalMut::empty(), unsafe {
            gpu_kernels::device::GlobalMut::from_raw_parts(c_addr.addr() as *mut T, c_addr.len())
        })
    } else {
        (unsafe { gpu_kernels::device::GlobalMut::from_raw_parts(c_addr.addr() as *mut f32, c_addr.len()) }, {
            gpu_kernels::device::GlobalMut::empty()
        })
    };
    let (res32, res16) = match &ep.residual {
        None => (Global::empty(), Global::empty()),
        // SAFETY: as above, for the residual (C's type).
        Some(r) if out16 => (Global::empty(), unsafe { Global::from_raw_parts(r.addr() as *const T, r.len()) }),
        Some(r) => (unsafe { Global::from_raw_parts(r.addr() as *const f32, r.len()) }, Global::empty()),
    };
    let bias = ep.bias.as_ref().map_or(Global::empty(), |b| b.global());
    let launch = |maps_addr: u64| {
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
            alpha: g.alpha,
            beta: g.beta,
            a: a.global(),
            b: b.global(),
            c: c32,
            c16,
            bias,
            res: res32,
            res16,
            maps: maps_addr,
        };
        let launch_cfg = LaunchConfig {
            grid: Dim3::new(g.n.div_ceil(bn as usize) as u32, grid_y as u32, 1),
            block: Dim3::x(cfg.threads()),
            shared_bytes: cfg.shared_bytes(),
        };
        ctx.launch(T::kernel(version), launch_cfg, params)
    };
    if maps.is_empty() { launch(0) } else { ctx.with_constants(&maps, launch) }
}
