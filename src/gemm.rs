//! `gemm`: `C = alpha * op(A) * op(B) + beta * C` over f32, row-major with leading dimensions,
//! `op` in {N, T} per operand, strided batches. Kernels: `gpu-kernels/src/gemm/` (a ladder of
//! versions, all in [`VERSIONS`]); [`gemm`] runs the one [`default_version`] picks.
//!
//! Semantics: any `M, N, K >= 0`, no multiple of a tile required. `K = 0` gives `beta * C`;
//! `M = 0`, `N = 0` or `batch = 0` succeeds and launches nothing; `beta = 0` writes
//! `alpha * op(A) op(B)` without reading C, so whatever C held (NaN included) is ignored.
//! A and B are always read (`alpha = 0` still propagates NaN and infinity from them, as the
//! f64 reference does). Results are bitwise deterministic run to run: each C element is one
//! thread's fixed-order FMA chain.

use crate::{BufMut, BufRef, Context, Error, LaunchConfig, Result};
use gpu_kernels::Dim3;
use gpu_kernels::gemm::GemmParams;
pub use gpu_kernels::gemm::{BUG_NO_EDGE_GUARD, GemmVersion, Tiling, VERSIONS};

/// Whether an operand is used as stored (`N`) or transposed (`T`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum Trans {
    #[default]
    N,
    T,
}

impl Trans {
    pub const BOTH: [Trans; 2] = [Trans::N, Trans::T];
    pub fn is_t(self) -> bool {
        self == Trans::T
    }
}

/// One GEMM problem: shapes, layouts (row-major, leading dimensions in elements), batches
/// (`stride_*` elements between consecutive matrices; 0 reuses one matrix) and scalars.
///
/// A is stored `M x K` (`trans_a = N`) or `K x M` (`T`), B `K x N` or `N x K`, C `M x N`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub trans_a: Trans,
    pub trans_b: Trans,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub batch: usize,
    pub stride_a: usize,
    pub stride_b: usize,
    pub stride_c: usize,
    pub alpha: f32,
    pub beta: f32,
}

impl Gemm {
    /// `C (m x n) = A (m x k) * B (k x n)`: packed, one matrix, alpha = 1, beta = 0.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Gemm {
            m,
            n,
            k,
            trans_a: Trans::N,
            trans_b: Trans::N,
            lda: k,
            ldb: n,
            ldc: n,
            batch: 1,
            stride_a: m.saturating_mul(k),
            stride_b: k.saturating_mul(n),
            stride_c: m.saturating_mul(n),
            alpha: 1.0,
            beta: 0.0,
        }
    }

    /// The same problem with transposed operands, packed.
    pub fn transposed(self, trans_a: Trans, trans_b: Trans) -> Self {
        let mut g = Gemm { trans_a, trans_b, ..self };
        g.lda = g.a_dims().1;
        g.ldb = g.b_dims().1;
        g
    }

    /// `batch` packed matrices per operand.
    pub fn batched(self, batch: usize) -> Self {
        let mut g = Gemm { batch, ..self };
        g.stride_a = g.extent(g.a_dims(), g.lda);
        g.stride_b = g.extent(g.b_dims(), g.ldb);
        g.stride_c = g.extent(g.c_dims(), g.ldc);
        g
    }

    pub fn scaled(self, alpha: f32, beta: f32) -> Self {
        Gemm { alpha, beta, ..self }
    }

    /// Rows and columns of A, B and C as stored.
    pub fn a_dims(&self) -> (usize, usize) {
        if self.trans_a.is_t() { (self.k, self.m) } else { (self.m, self.k) }
    }
    pub fn b_dims(&self) -> (usize, usize) {
        if self.trans_b.is_t() { (self.n, self.k) } else { (self.k, self.n) }
    }
    pub fn c_dims(&self) -> (usize, usize) {
        (self.m, self.n)
    }

    /// Elements one stored matrix spans (0 when it is empty). Saturates on overflow, which
    /// [`Gemm::check`] reports.
    fn extent(&self, (rows, cols): (usize, usize), ld: usize) -> usize {
        if rows == 0 || cols == 0 {
            return 0;
        }
        (rows - 1).saturating_mul(ld).saturating_add(cols)
    }

    /// Elements a view must hold for operand (rows, cols, ld, stride) over all batches.
    fn needed(&self, dims: (usize, usize), ld: usize, stride: usize) -> Option<usize> {
        let e = self.extent(dims, ld);
        if e == 0 || self.batch == 0 {
            return Some(0);
        }
        (self.batch - 1).checked_mul(stride)?.checked_add(e)
    }

    /// Minimum elements of the A, B and C views.
    pub fn a_len(&self) -> usize {
        self.needed(self.a_dims(), self.lda, self.stride_a).unwrap_or(usize::MAX)
    }
    pub fn b_len(&self) -> usize {
        self.needed(self.b_dims(), self.ldb, self.stride_b).unwrap_or(usize::MAX)
    }
    pub fn c_len(&self) -> usize {
        self.needed(self.c_dims(), self.ldc, self.stride_c).unwrap_or(usize::MAX)
    }

    /// Floating-point operations: `2 M N K` per matrix.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    /// Checks the problem against the views' lengths; errors say what to fix.
    pub fn check(&self, a_len: usize, b_len: usize, c_len: usize) -> Result<()> {
        const OP: &str = "gemm";
        let limit = i32::MAX as usize;
        for (name, v) in [("m", self.m), ("n", self.n), ("k", self.k)] {
            if v > limit {
                return Err(Error::invalid(
                    OP,
                    format!("{name} = {v} is past 32-bit indexing; keep m, n and k below 2^31"),
                ));
            }
        }
        if self.batch > u32::MAX as usize {
            return Err(Error::invalid(OP, format!("batch = {} is past 2^32 - 1; split the batch", self.batch)));
        }
        let ops = [
            ("A", "lda", self.a_dims(), self.lda, self.stride_a, a_len),
            ("B", "ldb", self.b_dims(), self.ldb, self.stride_b, b_len),
            ("C", "ldc", self.c_dims(), self.ldc, self.stride_c, c_len),
        ];
        for (name, ld_name, (rows, cols), ld, stride, len) in ops {
            if ld < cols {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "{ld_name} = {ld} is smaller than a row of {name} ({rows} x {cols} as stored); pass {ld_name} >= {cols}"
                    ),
                ));
            }
            if ld > u32::MAX as usize {
                return Err(Error::invalid(OP, format!("{ld_name} = {ld} is past 2^32 - 1")));
            }
            let need = self.needed((rows, cols), ld, stride).ok_or_else(|| {
                Error::invalid(OP, format!("{name}: {} batches of stride {stride} overflow usize", self.batch))
            })?;
            if len < need {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "{name} has {len} elements but {} batch(es) of {rows} x {cols} with {ld_name} = {ld} and stride {stride} need {need}",
                        self.batch
                    ),
                ));
            }
        }
        let c_extent = self.extent(self.c_dims(), self.ldc);
        if self.batch > 1 && c_extent > 0 && self.stride_c < c_extent {
            return Err(Error::invalid(
                OP,
                format!(
                    "batches of C overlap: stride_c = {} but one C spans {c_extent} elements; pass stride_c >= {c_extent}",
                    self.stride_c
                ),
            ));
        }
        Ok(())
    }
}

/// The most blocks a launch puts on grid z; larger batches are split into several launches.
pub const MAX_GRID_Z: usize = 65_535;
/// The most blocks on grid y (tiles of M).
const MAX_GRID_Y: usize = 65_535;

/// Below this many rows or columns of C, [`default_version`] takes [`SKINNY_VERSION`].
pub const SKINNY_BELOW: usize = 32;
/// The version for C with fewer than [`SKINNY_BELOW`] rows or columns: 32 x 32 tiles.
pub const SKINNY_VERSION: &str = "v03_smem";

/// The version [`gemm`] runs: the ladder's top rung, except for C with fewer than
/// [`SKINNY_BELOW`] rows or columns, which takes [`SKINNY_VERSION`]. The H200 run of
/// 2026-12-04 had v08 (the top then) fastest at every square shape (1024 to 8192) and at
/// 4096 x 4096 x 64, and v03 twice as fast as v08 at 16 x 4096 x 4096 (0.240 against 0.480
/// ms): a 128 x 128 tile over 16 rows computes 8 times the products it keeps, and gives 32
/// blocks where v03's 32 x 32 tiles give 128. v09 is not yet measured.
pub fn default_version(g: &Gemm) -> &'static GemmVersion {
    if g.m.min(g.n) < SKINNY_BELOW {
        return version(SKINNY_VERSION).expect("the skinny version is in the ladder");
    }
    VERSIONS.last().expect("the ladder has versions")
}

/// Looks a version up by name (`v03_smem`), including the deliberately broken one.
pub fn version(name: &str) -> Option<&'static GemmVersion> {
    VERSIONS.iter().chain(std::iter::once(&BUG_NO_EDGE_GUARD)).find(|v| v.name == name)
}

/// `C = alpha * op(A) * op(B) + beta * C` with the default version.
pub fn gemm<T: GemmInput>(
    ctx: &Context,
    g: &Gemm,
    a: BufRef<'_, T>,
    b: BufRef<'_, T>,
    c: BufMut<'_, f32>,
) -> Result<()> {
    T::gemm(ctx, g, a, b, c)
}

/// An input type of [`gemm`]: f32 runs on the CUDA cores (this module's ladder), bf16 and f16
/// on the tensor cores ([`crate::gemm_tc`], the version the device and operands allow), with
/// f32 C either way.
pub trait GemmInput: crate::Scalar {
    fn gemm(ctx: &Context, g: &Gemm, a: BufRef<'_, Self>, b: BufRef<'_, Self>, c: BufMut<'_, f32>) -> Result<()>;
}

impl GemmInput for f32 {
    fn gemm(ctx: &Context, g: &Gemm, a: BufRef<'_, f32>, b: BufRef<'_, f32>, c: BufMut<'_, f32>) -> Result<()> {
        gemm_with(ctx, default_version(g), g, a, b, c)
    }
}

/// The tensor-core path runs one matrix per launch: a batch is a loop over its matrices'
/// views (each checked by the launcher like a single call).
fn gemm_16bit<T: crate::gemm_tc::TcInput>(
    ctx: &Context,
    g: &Gemm,
    a: BufRef<'_, T>,
    b: BufRef<'_, T>,
    mut c: BufMut<'_, f32>,
) -> Result<()> {
    g.check(a.len(), b.len(), c.len())?;
    if g.batch <= 1 {
        return crate::gemm_tc::gemm_tc(ctx, g, a, b, c);
    }
    let one = Gemm { batch: 1, ..*g };
    let (a_len, b_len, c_len) = (one.a_len(), one.b_len(), one.c_len());
    for z in 0..g.batch {
        let av = a.slice(z * g.stride_a..z * g.stride_a + a_len)?;
        let bv = b.slice(z * g.stride_b..z * g.stride_b + b_len)?;
        let cv = c.reborrow(z * g.stride_c..z * g.stride_c + c_len)?;
        crate::gemm_tc::gemm_tc(ctx, &one, av, bv, cv)?;
    }
    Ok(())
}

impl GemmInput for half::bf16 {
    fn gemm(ctx: &Context, g: &Gemm, a: BufRef<'_, Self>, b: BufRef<'_, Self>, c: BufMut<'_, f32>) -> Result<()> {
        gemm_16bit(ctx, g, a, b, c)
    }
}

impl GemmInput for half::f16 {
    fn gemm(ctx: &Context, g: &Gemm, a: BufRef<'_, Self>, b: BufRef<'_, Self>, c: BufMut<'_, f32>) -> Result<()> {
        gemm_16bit(ctx, g, a, b, c)
    }
}

/// As [`gemm`], with a chosen version of the ladder.
pub fn gemm_with(
    ctx: &Context,
    version: &GemmVersion,
    g: &Gemm,
    a: BufRef<'_, f32>,
    b: BufRef<'_, f32>,
    c: BufMut<'_, f32>,
) -> Result<()> {
    launch(ctx, version, g, a, b, c, MAX_GRID_Z)
}

/// As [`gemm_with`], splitting the batch into launches of at most `max_z` blocks on grid z
/// (tests use a small `max_z` to cover the split without 65536 batches).
#[doc(hidden)]
pub fn launch(
    ctx: &Context,
    version: &GemmVersion,
    g: &Gemm,
    a: BufRef<'_, f32>,
    b: BufRef<'_, f32>,
    mut c: BufMut<'_, f32>,
    max_z: usize,
) -> Result<()> {
    const OP: &str = "gemm";
    a.check_context(ctx, OP)?;
    b.check_context(ctx, OP)?;
    c.check_context(ctx, OP)?;
    g.check(a.len(), b.len(), c.len())?;
    if g.m == 0 || g.n == 0 || g.batch == 0 {
        return Ok(());
    }
    let t = version.tiling;
    let grid_y = g.m.div_ceil(t.bm as usize);
    if grid_y > MAX_GRID_Y {
        return Err(Error::invalid(
            OP,
            format!(
                "m = {} needs {grid_y} row tiles of {} for {}; the grid allows 65535: split M",
                g.m, t.bm, version.name
            ),
        ));
    }
    let grid_x = g.n.div_ceil(t.bn as usize) as u32;
    // 16-byte loads need every matrix's rows 16-byte aligned: the view, ld and batch stride.
    let vec = |addr: usize, ld: usize, stride: usize| {
        addr.is_multiple_of(16) && ld.is_multiple_of(4) && (g.batch == 1 || stride.is_multiple_of(4))
    };
    let mut params = GemmParams {
        m: g.m as u32,
        n: g.n as u32,
        k: g.k as u32,
        lda: g.lda as u32,
        ldb: g.ldb as u32,
        ldc: g.ldc as u32,
        trans_a: g.trans_a.is_t() as u32,
        trans_b: g.trans_b.is_t() as u32,
        batch_base: 0,
        vec_a: vec(a.addr(), g.lda, g.stride_a) as u32,
        vec_b: vec(b.addr(), g.ldb, g.stride_b) as u32,
        _pad: 0,
        stride_a: g.stride_a as u64,
        stride_b: g.stride_b as u64,
        stride_c: g.stride_c as u64,
        alpha: g.alpha,
        beta: g.beta,
        a: a.global(),
        b: b.global(),
        c: c.global_mut(),
    };
    let max_z = max_z.clamp(1, MAX_GRID_Z);
    let mut done = 0;
    while done < g.batch {
        let z = (g.batch - done).min(max_z);
        params.batch_base = done as u32;
        let cfg = LaunchConfig {
            grid: Dim3::new(grid_x, grid_y as u32, z as u32),
            block: Dim3::x(t.threads()),
            shared_bytes: t.shared_bytes(),
        };
        ctx.launch(version.kernel, cfg, params)?;
        done += z;
    }
    Ok(())
}
