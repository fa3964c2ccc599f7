//! `gemm`: `C = alpha * op(A) * op(B) + beta * C` over f32, row-major with leading dimensions,
//! `op` in {N, T} per operand, strided batches. Kernels: `gpu-kernels/src/gemm/` (a ladder of
//! versions, all in [`VERSIONS`]); [`gemm`] runs the one [`plan`] picks, on the problem or on
//! its transpose.
//!
//! Semantics: any `M, N, K >= 0`, no multiple of a tile required. `K = 0` gives `beta * C`;
//! `M = 0`, `N = 0` or `batch = 0` succeeds and launches nothing; `beta = 0` writes
//! `alpha * op(A) op(B)` without reading C, so whatever C held (NaN included) is ignored.
//! A and B are always read (`alpha = 0` still propagates NaN and infinity from them, as the
//! f64 reference does). Results are bitwise deterministic run to run: each C element is one
//! thread's fixed-order FMA chain, or (split-K, [`split_depth`]) a fixed number of such chains
//! over fixed ranges of K, added in a fixed order; the split depends on the shape only.

use crate::{BufMut, BufRef, Context, Error, LaunchConfig, Result};
use gpu_kernels::Dim3;
use gpu_kernels::gemm::GemmParams;
use gpu_kernels::gemm::split_k::{SUM_THREADS, SplitSumParams};
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
/// A is stored `M x K` (`trans_a = N`) or `K x M` (`T`), B `K x N` or `N x K`, C `M x N` or,
/// with `trans_c = T`, `N x M` (C^T row-major, which is C column-major, as BLAS stores it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub trans_a: Trans,
    pub trans_b: Trans,
    pub trans_c: Trans,
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
            trans_c: Trans::N,
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

    /// The same problem with C stored transposed (`T`) or not, packed.
    pub fn with_trans_c(self, trans_c: Trans) -> Self {
        let mut g = Gemm { trans_c, ..self };
        g.ldc = g.c_dims().1;
        g
    }

    /// The same product written as its transpose, `C^T = op(B)^T op(A)^T`: `m` and `n`
    /// exchanged, B in A's place and A in B's (their leading dimensions and strides with
    /// them), every transpose flag flipped. The same memory is read and written, so run it
    /// with B's view passed as A and A's as B. Swapping twice gives `self` back.
    pub fn swapped(&self) -> Self {
        let flip = |t: Trans| if t.is_t() { Trans::N } else { Trans::T };
        Gemm {
            m: self.n,
            n: self.m,
            trans_a: flip(self.trans_b),
            trans_b: flip(self.trans_a),
            trans_c: flip(self.trans_c),
            lda: self.ldb,
            ldb: self.lda,
            stride_a: self.stride_b,
            stride_b: self.stride_a,
            ..*self
        }
    }

    /// Where element `(i, j)` of matrix `z` of C is in C's view.
    pub fn c_index(&self, z: usize, i: usize, j: usize) -> usize {
        let (r, c) = if self.trans_c.is_t() { (j, i) } else { (i, j) };
        z * self.stride_c + r * self.ldc + c
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
        if self.trans_c.is_t() { (self.n, self.m) } else { (self.m, self.n) }
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

/// C with fewer rows than this takes [`SPLIT_VERSION`] whatever its columns; C with fewer
/// columns than this (and at least this many rows) runs as its transpose ([`plan`]), so its
/// columns become the 16 rows of [`SPLIT_VERSION`]'s tiles.
pub const SKINNY_BELOW: usize = 32;
/// The version for C with fewer than [`SPLIT_BELOW_ROWS`] rows: 16-row tiles, K split between
/// blocks when the tiles are too few to fill the GPU.
pub const SPLIT_VERSION: &str = "v10_split_k";
/// The version for everything else (it too splits K when its tiles are too few).
pub const LARGE_VERSION: &str = "v09_unrolled";
/// [`default_version`] takes [`SPLIT_VERSION`] for C with fewer rows than this. By the
/// offline SASS counts (ptxas 12.9, sm_90) v09's main loop is 85% FFMA and v10's 61%; at 96
/// rows v09's 128-row tile keeps 3/4 of its products (0.75 x 85% = 64%), at 64 rows half
/// (42%), while v10's 16-row tiles keep all of them from 16 rows on. Not yet measured.
pub const SPLIT_BELOW_ROWS: usize = 96;

/// How [`gemm`] runs a problem: `gemm` itself or, `swapped`, its transpose
/// ([`Gemm::swapped`], launched with A's and B's views exchanged), with `version`.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub gemm: Gemm,
    pub swapped: bool,
    pub version: &'static GemmVersion,
}

/// The plan [`gemm`] follows for `g`. It runs the transpose when C has fewer than
/// [`SKINNY_BELOW`] columns and at least that many rows (a 16 x 128 tile of v10 then spans
/// 16 of C's columns and 128 of its rows, where it would otherwise compute 4 to 128 times
/// the columns C has), or else, C not skinny either way, when C is stored transposed (so
/// the kernel stores whole rows of memory); then [`default_version`] of what it runs.
pub fn plan(g: &Gemm) -> Plan {
    let swapped = if g.n < SKINNY_BELOW && g.m >= SKINNY_BELOW {
        true
    } else if g.m < SKINNY_BELOW && g.n >= SKINNY_BELOW {
        false
    } else {
        g.trans_c.is_t()
    };
    let gemm = if swapped { g.swapped() } else { *g };
    Plan { gemm, swapped, version: default_version(&gemm) }
}

/// The version for `g` as it is launched (after [`plan`] has chosen its orientation):
/// - C with fewer than [`SPLIT_BELOW_ROWS`] rows: [`SPLIT_VERSION`] (16-row tiles, K split
///   between blocks). The H200 run of 2026-12-04 had v03 best at 16 x 4096 x 4096 (0.240 ms,
///   0.38 of cuBLAS; v08 0.480); v10 came after it and is not yet measured (the prediction is
///   in docs/gpu-session.md).
/// - Everything else: [`LARGE_VERSION`] (v08, the top rung measured on 2026-12-04, was fastest
///   at every square shape and at 4096 x 4096 x 64; v09 is not yet measured), which splits K
///   when its tiles are too few ([`split_depth`]: 1024^3 makes 64 tiles, run as 4 splits).
pub fn default_version(g: &Gemm) -> &'static GemmVersion {
    let name = if g.m < SPLIT_BELOW_ROWS { SPLIT_VERSION } else { LARGE_VERSION };
    version(name).expect("the default versions are in the ladder")
}

/// C tiles (blocks without a split) a launch of `t` makes for `g`, all batches together.
fn tiles(t: Tiling, g: &Gemm) -> usize {
    g.m.div_ceil(t.bm as usize).saturating_mul(g.n.div_ceil(t.bn as usize)).saturating_mul(g.batch)
}

/// SMs a split-K launch aims to fill: an H200's. Fixed rather than read from the device, so a
/// shape splits (and rounds) the same way on every GPU and on the emulator.
pub const SPLIT_SMS: usize = 132;
/// The least depth of K one split covers. At 128 a v10 block reads (16 + 128) x 128 words of
/// A and B and writes and rereads 16 x 128 partial words (the partials add at most 22% to its
/// traffic); a v09 block does 128 x 128 x 128 FMAs per 2 x 128 x 128 partial words.
pub const SPLIT_MIN_DEPTH: usize = 128;
/// Most scratch words one launch's partials take (256 MiB): C larger than this over two
/// splits is not split, and batches whose partials exceed it run in several launches.
pub const SPLIT_SCRATCH_WORDS: usize = 1 << 26;

/// The blocks of `version` a split launch aims for: those [`SPLIT_SMS`] SMs hold at once
/// (`Tiling::blocks_per_sm` each: v09 2, v10 3), so it runs in one wave rather than a full
/// wave and a thin one.
pub fn split_target(version: &GemmVersion) -> usize {
    SPLIT_SMS * (version.tiling.blocks_per_sm.max(1) as usize)
}

/// The depth of K each block covers when `version` runs `g`, or 0 for no split: `version` must
/// be split-K ([`GemmVersion::sum`]); it then makes `floor(split_target / tiles)` splits (so
/// shapes with more than half a wave of tiles are not split), at most one per
/// [`SPLIT_MIN_DEPTH`] depths and fewer when the partials would pass
/// [`SPLIT_SCRATCH_WORDS`], each split a whole number of k-steps. Two splits or more, or none.
pub fn split_depth(version: &GemmVersion, g: &Gemm) -> usize {
    let t = version.tiling;
    let tiles = tiles(t, g);
    if version.sum.is_none() || tiles == 0 {
        return 0;
    }
    let splits =
        (g.k / SPLIT_MIN_DEPTH).min(split_target(version) / tiles).min(SPLIT_SCRATCH_WORDS / g.m.saturating_mul(g.n));
    if splits < 2 {
        return 0;
    }
    // Fewer than `steps` splits (K >= 2 x 128 depths of 16 or 32), so each covers less than K.
    g.k.div_ceil(t.bk as usize).div_ceil(splits) * t.bk as usize
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
        let p = plan(g);
        if !p.swapped {
            return gemm_with(ctx, p.version, g, a, b, c);
        }
        // Checked as given first, so an error names the caller's operands, not the swap's.
        g.check(a.len(), b.len(), c.len())?;
        gemm_with(ctx, p.version, &p.gemm, b, a, c)
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
    launch(ctx, version, g, a, b, c, MAX_GRID_Z, None)
}

/// As [`gemm_with`], splitting the batch into launches of at most `max_z` batches on grid z
/// (tests use a small `max_z` to cover the split without 65536 batches), and for a split-K
/// version splitting K into ranges of `k_split` depths (None: [`split_depth`]'s choice; tests
/// force splits on shapes too small for it).
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn launch(
    ctx: &Context,
    version: &GemmVersion,
    g: &Gemm,
    a: BufRef<'_, f32>,
    b: BufRef<'_, f32>,
    mut c: BufMut<'_, f32>,
    max_z: usize,
    k_split: Option<usize>,
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
    // 16-byte loads and stores need every matrix's rows 16-byte aligned: the view, ld and
    // batch stride.
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
        k_split: 0,
        trans_c: g.trans_c.is_t() as u32,
        vec_c: vec(c.addr(), g.ldc, g.stride_c) as u32,
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
    let depth = k_split.unwrap_or_else(|| split_depth(version, g));
    if depth > 0 && depth < g.k {
        let sum = version
            .sum
            .ok_or_else(|| Error::invalid(OP, format!("{} does not split K; pass no k_split for it", version.name)))?;
        return launch_split(ctx, version, sum, g, params, depth, max_z, (grid_x, grid_y as u32));
    }
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

/// The split-K path of [`launch`]: per launch of up to `max_z` batches, `version.kernel` writes
/// `ceil(K / depth)` partial tiles per C tile into the handle's scratch, and `sum` adds them into C.
#[allow(clippy::too_many_arguments)]
fn launch_split(
    ctx: &Context,
    version: &GemmVersion,
    sum: &'static gpu_kernels::KernelDef<SplitSumParams>,
    g: &Gemm,
    params: GemmParams,
    depth: usize,
    max_z: usize,
    (grid_x, grid_y): (u32, u32),
) -> Result<()> {
    const OP: &str = "gemm";
    let bk = version.tiling.bk as usize;
    let splits = g.k.div_ceil(depth);
    let mn = g.m * g.n;
    if !depth.is_multiple_of(bk) || splits > MAX_GRID_Z || splits.saturating_mul(mn) > SPLIT_SCRATCH_WORDS {
        return Err(Error::invalid(
            OP,
            format!(
                "k_split = {depth} for {}: pass a multiple of its k-step ({bk}) that makes at most {MAX_GRID_Z} splits of {} x {} partials within {SPLIT_SCRATCH_WORDS} words",
                version.name, g.m, g.n
            ),
        ));
    }
    let per_launch = (max_z / splits).clamp(1, SPLIT_SCRATCH_WORDS / (splits * mn)).min(g.batch);
    ctx.with_scratch(per_launch * splits * mn, |scratch| {
        let part = scratch.as_f32();
        let mut done = 0;
        while done < g.batch {
            let z = (g.batch - done).min(per_launch);
            let partial = GemmParams {
                batch_base: done as u32,
                k_split: depth as u32,
                ldc: g.n as u32,
                trans_c: 0,
                // Packed partials: rows of n, matrices of m n (each a multiple of 4 when n is).
                vec_c: (part.addr().is_multiple_of(16) && g.n.is_multiple_of(4)) as u32,
                stride_c: mn as u64,
                alpha: 1.0,
                beta: 0.0,
                c: part,
                ..params
            };
            let t = version.tiling;
            let cfg = LaunchConfig {
                grid: Dim3::new(grid_x, grid_y, (z * splits) as u32),
                block: Dim3::x(t.threads()),
                shared_bytes: t.shared_bytes(),
            };
            ctx.launch(version.kernel, cfg, partial)?;
            let p = SplitSumParams {
                m: params.m,
                n: params.n,
                ldc: params.ldc,
                splits: splits as u32,
                batch_base: done as u32,
                trans_c: params.trans_c,
                stride_c: params.stride_c,
                alpha: params.alpha,
                beta: params.beta,
                part: part.as_global(),
                c: params.c,
            };
            let cfg = LaunchConfig {
                grid: Dim3::new(mn.div_ceil(SUM_THREADS as usize) as u32, 1, z as u32),
                block: Dim3::x(SUM_THREADS),
                shared_bytes: 0,
            };
            ctx.launch(sum, cfg, p)?;
            done += z;
        }
        Ok(())
    })
}
