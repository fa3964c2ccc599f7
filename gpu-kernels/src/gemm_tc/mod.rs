//! Tensor-core GEMM, `C = alpha * A * B + beta * C` with bf16 or f16 A and B, f32 accumulate
//! and f32 C, on sm_80's `mma.sync` m16n8k16 (see [`crate::device::mma`]). A ladder like
//! [`crate::gemm`]; one file per step:
//!
//! | version | adds |
//! |---|---|
//! | [`v01_mma`] | 128 x 128 x 32 block tiles, 8 warps of 64 x 32 warp tiles, cp.async into two shared stages, ldmatrix fragments, m16n8k16 mma |
//! | [`v02_wgmma`] | sm_90a: TMA into a 4-stage mbarrier ring, a producer warpgroup and two consumer warpgroups, wgmma m64n128k16 from 128-byte-swizzled shared tiles ([`wgmma`], the engine) |
//! | [`v03_wgmma_256`] | 256 x 128 tiles (four consumer warpgroups) and grouped block order for L2 reuse |
//! | [`v04_wgmma_n256`] | 128 x 256 tiles: two consumer warpgroups on wgmma m64n256k16 (128 accumulators each), registers moved from the producer to the consumers with `setmaxnreg` |
//! | [`v05_wgmma_splitk`] | v04 plus split-K ([`split_k`]): problems with too few C tiles for the SMs split K across blocks and add the slices in a second, deterministic pass |
//! | [`v06_wgmma_persistent`] | v05 run by persistent blocks (one per SM) walking the tiles, the TMA ring running on across tile boundaries |
//!
//! [`probe`] holds one-warp kernels that pin the fragment layouts down (tests/mma.rs).
//!
//! # Semantics
//! Row-major with leading dimensions: A is `M x K` (`lda`) or, transposed, stored `K x M`; B
//! is `K x N` (`ldb`) or stored `N x K`; C is `M x N` (`ldc`), f32 or the input type. Any
//! `M, N, K >= 0`: `K = 0` gives `beta * C`, `beta = 0` does not read C. The epilogue
//! ([`store`]) adds a per-column bias, applies GELU and adds a residual, each optional.
//!
//! # Safety
//! The launcher guarantees every view holds the elements the shape reaches, the grid covers
//! `ceil(N / BN) x ceil(M / BM)` (times `splits` in z, with `splits > 1` only for versions
//! whose tiling has `split_k` and a `partial` view of `splits x M x N`; persistent versions
//! get a 1-D grid of at least one block), the dynamic shared segment is [`TcTiling::shared_bytes`],
//! and `vec_a` / `vec_b` are nonzero only when the operand's view is 16-byte aligned and its
//! leading dimension is a multiple of 8 elements (the cp.async path); otherwise tiles are
//! staged with guarded scalar loads. Every global access is guarded against `M, N, K`.

use crate::device::mma::MmaInput;
use crate::device::{Global, GlobalMut, math};

pub mod probe;
pub mod split_k;
pub mod v01_mma;
pub mod v02_wgmma;
pub mod v03_wgmma_256;
pub mod v04_wgmma_n256;
pub mod v05_wgmma_splitk;
pub mod v06_wgmma_persistent;
pub mod wgmma;

/// The parameters of every tensor-core GEMM kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TcParams<T: MmaInput> {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub lda: u32,
    pub ldb: u32,
    pub ldc: u32,
    /// Nonzero: A's rows may be copied in 16-byte chunks (cp.async); see the Safety section.
    pub vec_a: u32,
    /// Nonzero: B's rows may be copied in 16-byte chunks.
    pub vec_b: u32,
    /// Nonzero: A is stored transposed (`K x M`, `lda >= M`); B likewise (`N x K`).
    pub trans_a: u32,
    pub trans_b: u32,
    /// Epilogue: nonzero applies GELU (tanh form) after bias.
    pub gelu: u32,
    /// Nonzero: C (and the residual) have the input type `T`, through `c16` / `res16`;
    /// zero: f32, through `c` / `res`.
    pub out16: u32,
    /// Split-K ([`split_k`]): k-slices, one per grid z (0 or 1: no split).
    pub splits: u32,
    pub alpha: f32,
    pub beta: f32,
    pub a: Global<T>,
    pub b: Global<T>,
    pub c: GlobalMut<f32>,
    pub c16: GlobalMut<T>,
    /// Epilogue: `bias[j]` added to column `j` (empty: none).
    pub bias: Global<f32>,
    /// Epilogue: a residual with C's shape, leading dimension and type, added last (empty: none).
    pub res: Global<f32>,
    pub res16: Global<T>,
    /// Split-K's workspace of `splits x M x N` f32 ([`split_k`]); empty without a split.
    pub partial: GlobalMut<f32>,
    /// Versions on TMA: the global address of two tensor-map slots (A's, then B's), each
    /// [`crate::device::hopper::TENSOR_MAP_BYTES`]; 0 for the others.
    pub maps: u64,
}

/// The epilogue every version applies to accumulator `acc` of C element (`i`, `j`), guarded
/// against the matrix edges: `v = alpha acc + beta C + bias[j]`, then GELU, then `+ residual`,
/// stored as f32 or rounded (to nearest even) to `T`.
#[inline(always)]
#[track_caller]
pub fn store<T: MmaInput>(p: &TcParams<T>, i: u32, j: u32, acc: f32) {
    use crate::elementwise::{ElementwiseOp, Gelu};
    if i >= p.m || j >= p.n {
        return;
    }
    let at = i as usize * p.ldc as usize + j as usize;
    let mut v = p.alpha * acc;
    if p.beta != 0.0 {
        let c = if p.out16 != 0 { p.c16.load(at).to_f32() } else { p.c.load(at) };
        v = math::fma(p.beta, c, v);
    }
    if !p.bias.is_empty() {
        v += p.bias.load(j as usize);
    }
    if p.gelu != 0 {
        v = Gelu::apply(0.0, v, 0.0);
    }
    if p.out16 != 0 {
        if !p.res16.is_empty() {
            v += p.res16.load(at).to_f32();
        }
        p.c16.store(at, T::from_f32(v));
    } else {
        if !p.res.is_empty() {
            v += p.res.load(at);
        }
        p.c.store(at, v);
    }
}

/// A version's tile shape; threads, fragment counts and shared layout are derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcTiling {
    /// The block's C tile and the depth of one k-step.
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    /// One warp's C tile.
    pub wm: u32,
    pub wn: u32,
    /// Shared stages (2: double buffering).
    pub stages: u32,
    /// Halves of padding after each shared row: shifts consecutive rows across banks so the
    /// 8 rows of one ldmatrix hit different banks.
    pub pad: u32,
}

impl TcTiling {
    pub const fn warps(self) -> u32 {
        (self.bm / self.wm) * (self.bn / self.wn)
    }
    pub const fn threads(self) -> u32 {
        self.warps() * 32
    }
    /// m16 tiles and n8 tiles per warp.
    pub const fn mi(self) -> u32 {
        self.wm / 16
    }
    pub const fn ni(self) -> u32 {
        self.wn / 8
    }
    /// Row pitch (elements) of the shared A tile (`bm x bk`) and B tile (`bk x bn`).
    pub const fn a_ld(self) -> u32 {
        self.bk + self.pad
    }
    pub const fn b_ld(self) -> u32 {
        self.bn + self.pad
    }
    /// Row pitch of the transposed layouts' tiles: A^T as `bk x bm`, B^T as `bn x bk`.
    pub const fn at_ld(self) -> u32 {
        self.bm + self.pad
    }
    pub const fn bt_ld(self) -> u32 {
        self.bk + self.pad
    }
    /// Elements of one stage's A and B tiles: room for either layout.
    pub const fn a_tile(self) -> u32 {
        let (n, t) = (self.bm * self.a_ld(), self.bk * self.at_ld());
        if n > t { n } else { t }
    }
    pub const fn b_tile(self) -> u32 {
        let (n, t) = (self.bk * self.b_ld(), self.bn * self.bt_ld());
        if n > t { n } else { t }
    }
    /// Byte offsets of stage `s`'s A and B tiles (2-byte elements).
    pub const fn a_offset(self, s: u32) -> u32 {
        s * 2 * (self.a_tile() + self.b_tile())
    }
    pub const fn b_offset(self, s: u32) -> u32 {
        self.a_offset(s) + 2 * self.a_tile()
    }
    pub const fn shared_bytes(self) -> u32 {
        self.a_offset(self.stages)
    }
    /// 16-byte chunks of one A tile and one B tile.
    pub const fn a_chunks(self) -> u32 {
        self.bm * self.bk / 8
    }
    pub const fn b_chunks(self) -> u32 {
        self.bk * self.bn / 8
    }
    pub const fn check(self) -> Self {
        assert!(self.bm.is_multiple_of(self.wm) && self.bn.is_multiple_of(self.wn), "warp tiles divide the block tile");
        assert!(self.wm.is_multiple_of(16), "a warp tile is whole m16 tiles");
        assert!(self.wn.is_multiple_of(16), "a warp tile is whole pairs of n8 tiles (one ldmatrix.x4.trans each)");
        assert!(self.bk.is_multiple_of(16), "a k-step is whole k16 mma steps");
        let t = self.threads();
        assert!(t >= 32 && t <= 1024, "threads per block");
        assert!(self.mi() <= 8 && self.ni() <= 8, "register tiles are unrolled up to 8");
        assert!(self.stages == 2, "the pipeline is written for two stages");
        assert!((2 * self.a_ld()).is_multiple_of(16) && (2 * self.b_ld()).is_multiple_of(16), "rows 16-byte aligned");
        assert!((2 * self.at_ld()).is_multiple_of(16) && (2 * self.bt_ld()).is_multiple_of(16), "rows 16-byte aligned");
        assert!(self.bm.is_multiple_of(8) && self.bn.is_multiple_of(8), "transposed tiles copy 8-element chunks");
        assert!(
            self.a_chunks().is_multiple_of(t) && self.b_chunks().is_multiple_of(t),
            "every thread copies as many chunks"
        );
        assert!(self.shared_bytes() <= 48 * 1024, "under the 48 KB that needs no opt-in");
        self
    }
}

crate::kernels! {
    /// v01: mma.sync m16n8k16, bf16 inputs.
    GEMM_TC_V01_MMA_BF16 = gemm_tc_v01_mma_bf16(TcParams<half::bf16>) => v01_mma::run::<half::bf16>;
    /// v01: mma.sync m16n8k16, f16 inputs.
    GEMM_TC_V01_MMA_F16 = gemm_tc_v01_mma_f16(TcParams<half::f16>) => v01_mma::run::<half::f16>;
    /// v02: TMA + mbarrier ring + wgmma m64n128k16 (sm_90a), bf16 inputs.
    GEMM_TC_V02_WGMMA_BF16 = gemm_tc_v02_wgmma_bf16(TcParams<half::bf16>) => v02_wgmma::run::<half::bf16>;
    /// v02: as above, f16 inputs.
    GEMM_TC_V02_WGMMA_F16 = gemm_tc_v02_wgmma_f16(TcParams<half::f16>) => v02_wgmma::run::<half::f16>;
    /// v03: v02's engine with 256 x 128 tiles and grouped block order, bf16 inputs.
    GEMM_TC_V03_WGMMA_256_BF16 = gemm_tc_v03_wgmma_256_bf16(TcParams<half::bf16>) => v03_wgmma_256::run::<half::bf16>;
    /// v03: as above, f16 inputs.
    GEMM_TC_V03_WGMMA_256_F16 = gemm_tc_v03_wgmma_256_f16(TcParams<half::f16>) => v03_wgmma_256::run::<half::f16>;
    /// v04: 128 x 256 tiles on wgmma m64n256k16 with setmaxnreg, bf16 inputs.
    GEMM_TC_V04_WGMMA_N256_BF16 = gemm_tc_v04_wgmma_n256_bf16(TcParams<half::bf16>) => v04_wgmma_n256::run::<half::bf16>;
    /// v04: as above, f16 inputs.
    GEMM_TC_V04_WGMMA_N256_F16 = gemm_tc_v04_wgmma_n256_f16(TcParams<half::f16>) => v04_wgmma_n256::run::<half::f16>;
    /// v05: v04 with split-K (grid z slices K into an f32 workspace), bf16 inputs.
    GEMM_TC_V05_WGMMA_SPLITK_BF16 = gemm_tc_v05_wgmma_splitk_bf16(TcParams<half::bf16>) => v05_wgmma_splitk::run::<half::bf16>;
    /// v05: as above, f16 inputs.
    GEMM_TC_V05_WGMMA_SPLITK_F16 = gemm_tc_v05_wgmma_splitk_f16(TcParams<half::f16>) => v05_wgmma_splitk::run::<half::f16>;
    /// v06: v05 run by persistent blocks, bf16 inputs.
    GEMM_TC_V06_WGMMA_PERSISTENT_BF16 = gemm_tc_v06_wgmma_persistent_bf16(TcParams<half::bf16>) => v06_wgmma_persistent::run::<half::bf16>;
    /// v06: as above, f16 inputs.
    GEMM_TC_V06_WGMMA_PERSISTENT_F16 = gemm_tc_v06_wgmma_persistent_f16(TcParams<half::f16>) => v06_wgmma_persistent::run::<half::f16>;
    /// Split-K's second pass: the slices added in order, then the epilogue; bf16 inputs.
    GEMM_TC_SPLIT_K_REDUCE_BF16 = gemm_tc_split_k_reduce_bf16(TcParams<half::bf16>) => split_k::reduce::<half::bf16>;
    /// Split-K's second pass, f16 inputs.
    GEMM_TC_SPLIT_K_REDUCE_F16 = gemm_tc_split_k_reduce_f16(TcParams<half::f16>) => split_k::reduce::<half::f16>;
    /// v02 with a mis-laid A descriptor (harness test).
    GEMM_TC_BUG_WGMMA_A_LAYOUT = gemm_tc_bug_wgmma_a_layout(TcParams<half::bf16>) => v02_wgmma::run_bug::<half::bf16, { wgmma::bug::A_LAYOUT }>;
    /// v02 whose consumers skip the TMA wait (harness test).
    GEMM_TC_BUG_WGMMA_NO_FULL_WAIT = gemm_tc_bug_wgmma_no_full_wait(TcParams<half::bf16>) => v02_wgmma::run_bug::<half::bf16, { wgmma::bug::NO_FULL_WAIT }>;
    /// v02 whose producer skips the release wait (harness test).
    GEMM_TC_BUG_WGMMA_NO_EMPTY_WAIT = gemm_tc_bug_wgmma_no_empty_wait(TcParams<half::bf16>) => v02_wgmma::run_bug::<half::bf16, { wgmma::bug::NO_EMPTY_WAIT }>;
    /// v02 that releases stages before its wgmmas complete (harness test).
    GEMM_TC_BUG_WGMMA_EARLY_RELEASE = gemm_tc_bug_wgmma_early_release(TcParams<half::bf16>) => v02_wgmma::run_bug::<half::bf16, { wgmma::bug::EARLY_RELEASE }>;
    /// v05 whose k-slices drop the remainder steps (harness test).
    GEMM_TC_BUG_SPLIT_K_FLOOR_SLICES = gemm_tc_bug_split_k_floor_slices(TcParams<half::bf16>) => v05_wgmma_splitk::run_bug::<half::bf16, { split_k::BUG_FLOOR_SLICES }>;
    /// v06 whose consumers never release a tile's last stage (harness test).
    GEMM_TC_BUG_PERSISTENT_KEEP_LAST_STAGE = gemm_tc_bug_persistent_keep_last_stage(TcParams<half::bf16>) => v06_wgmma_persistent::run_bug::<half::bf16, { wgmma::bug::KEEP_LAST_STAGE }>;
    /// v02 whose consumers read a staged C chunk before the warpgroup wrote it (harness test).
    GEMM_TC_BUG_WGMMA_STAGE_NO_HANDOVER = gemm_tc_bug_wgmma_stage_no_handover(TcParams<half::bf16>) => v02_wgmma::run_bug::<half::bf16, { wgmma::bug::STAGE_NO_HANDOVER }>;
    /// Probe: one m16n8k16 from fragments loaded straight from global memory.
    MMA_PROBE_DIRECT_BF16 = mma_probe_direct_bf16(probe::ProbeParams<half::bf16>) => probe::direct::<half::bf16, false>;
    /// Probe: as above, f16.
    MMA_PROBE_DIRECT_F16 = mma_probe_direct_f16(probe::ProbeParams<half::f16>) => probe::direct::<half::f16, false>;
    /// Probe, deliberately wrong: A registers 0 and 1 swapped.
    MMA_PROBE_BUG_SWAPPED_A = mma_probe_bug_swapped_a(probe::ProbeParams<half::bf16>) => probe::direct::<half::bf16, true>;
    /// Probe: fragments through shared memory and ldmatrix (A x4, B x2.trans).
    MMA_PROBE_LDMATRIX_BF16 = mma_probe_ldmatrix_bf16(probe::ProbeParams<half::bf16>) => probe::via_ldmatrix::<half::bf16>;
    /// Probe: raw ldmatrix registers for every form (`mode` picks it).
    MMA_PROBE_LDMATRIX_RAW = mma_probe_ldmatrix_raw(probe::RawParams) => probe::raw;
    /// Probe: one wgmma m64n128k16 or m64n256k16 from plain-stored canonical tiles (sm_90a; `mode` picks layouts and shape).
    WGMMA_PROBE_BF16 = wgmma_probe_bf16(probe::WgmmaProbeParams) => probe::wgmma;
    /// Probe: cp.async into shared then back out (`mode` 1: reads before the wait, a bug).
    MMA_PROBE_CP_ASYNC = mma_probe_cp_async(probe::RawParams) => probe::cp_async;
    /// Probe: bulk reductions from shared rows into global memory (sm_90a; `mode` picks the emulator-only bugs).
    BULK_PROBE = bulk_probe(probe::BulkProbeParams) => probe::bulk_reduce;
}

/// A version's configuration: which machinery it uses and its tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcConfig {
    /// mma.sync + cp.async (sm_80+).
    Mma(TcTiling),
    /// TMA + mbarrier + wgmma (sm_90a only).
    Wgmma(wgmma::WgmmaTiling),
}

impl TcConfig {
    pub const fn threads(self) -> u32 {
        match self {
            TcConfig::Mma(t) => t.threads(),
            TcConfig::Wgmma(t) => t.threads(),
        }
    }
    pub const fn shared_bytes(self) -> u32 {
        match self {
            TcConfig::Mma(t) => t.shared_bytes(),
            TcConfig::Wgmma(t) => t.shared_bytes(),
        }
    }
    /// The block's C tile (rows, columns).
    pub const fn block_tile(self) -> (u32, u32) {
        match self {
            TcConfig::Mma(t) => (t.bm, t.bn),
            TcConfig::Wgmma(t) => (t.bm, t.bn),
        }
    }
    /// The one PTX arch whose build holds the real kernel, when it needs a specific one.
    pub const fn required_arch(self) -> Option<&'static str> {
        match self {
            TcConfig::Mma(_) => None,
            TcConfig::Wgmma(_) => Some("sm_90a"),
        }
    }
    /// Whether its warpgroups trade registers with `setmaxnreg` (the build then declares one
    /// block per SM: [`launch_min_blocks`]).
    pub const fn uses_setmaxnreg(self) -> bool {
        match self {
            TcConfig::Mma(_) => false,
            TcConfig::Wgmma(t) => t.uses_setmaxnreg(),
        }
    }
    /// The TMA boxes (A's, B's) the launcher encodes tensor maps for, per layout; `None` for
    /// versions without TMA.
    pub const fn tma_boxes(self, trans_a: bool, trans_b: bool) -> Option<([u32; 2], [u32; 2])> {
        match self {
            TcConfig::Mma(_) => None,
            TcConfig::Wgmma(t) => Some((t.a_box(trans_a), t.b_box(trans_b))),
        }
    }
}

/// One rung of the ladder.
#[cfg(not(target_arch = "nvptx64"))]
pub struct TcVersion {
    pub name: &'static str,
    pub bf16: &'static crate::KernelDef<TcParams<half::bf16>>,
    pub f16: &'static crate::KernelDef<TcParams<half::f16>>,
    pub config: TcConfig,
}

#[cfg(not(target_arch = "nvptx64"))]
impl core::fmt::Debug for TcVersion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every version, in ladder order.
#[cfg(not(target_arch = "nvptx64"))]
pub const VERSIONS: &[TcVersion] = &[
    TcVersion {
        name: "v01_mma",
        bf16: &GEMM_TC_V01_MMA_BF16,
        f16: &GEMM_TC_V01_MMA_F16,
        config: TcConfig::Mma(v01_mma::TILING),
    },
    TcVersion {
        name: "v02_wgmma",
        bf16: &GEMM_TC_V02_WGMMA_BF16,
        f16: &GEMM_TC_V02_WGMMA_F16,
        config: TcConfig::Wgmma(v02_wgmma::TILING),
    },
    TcVersion {
        name: "v03_wgmma_256",
        bf16: &GEMM_TC_V03_WGMMA_256_BF16,
        f16: &GEMM_TC_V03_WGMMA_256_F16,
        config: TcConfig::Wgmma(v03_wgmma_256::TILING),
    },
    TcVersion {
        name: "v04_wgmma_n256",
        bf16: &GEMM_TC_V04_WGMMA_N256_BF16,
        f16: &GEMM_TC_V04_WGMMA_N256_F16,
        config: TcConfig::Wgmma(v04_wgmma_n256::TILING),
    },
    TcVersion {
        name: "v05_wgmma_splitk",
        bf16: &GEMM_TC_V05_WGMMA_SPLITK_BF16,
        f16: &GEMM_TC_V05_WGMMA_SPLITK_F16,
        config: TcConfig::Wgmma(v05_wgmma_splitk::TILING),
    },
    TcVersion {
        name: "v06_wgmma_persistent",
        bf16: &GEMM_TC_V06_WGMMA_PERSISTENT_BF16,
        f16: &GEMM_TC_V06_WGMMA_PERSISTENT_F16,
        config: TcConfig::Wgmma(v06_wgmma_persistent::TILING),
    },
];

/// v02, v05 and v06 with deliberate bugs, as versions (bf16 only; `f16` names the real kernel of
/// the same version): the harness must reject each one on the emulator.
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_VERSIONS: &[TcVersion] = &[
    TcVersion {
        name: "bug_wgmma_a_layout",
        bf16: &GEMM_TC_BUG_WGMMA_A_LAYOUT,
        f16: &GEMM_TC_V02_WGMMA_F16,
        config: TcConfig::Wgmma(v02_wgmma::TILING),
    },
    TcVersion {
        name: "bug_wgmma_no_full_wait",
        bf16: &GEMM_TC_BUG_WGMMA_NO_FULL_WAIT,
        f16: &GEMM_TC_V02_WGMMA_F16,
        config: TcConfig::Wgmma(v02_wgmma::TILING),
    },
    TcVersion {
        name: "bug_wgmma_no_empty_wait",
        bf16: &GEMM_TC_BUG_WGMMA_NO_EMPTY_WAIT,
        f16: &GEMM_TC_V02_WGMMA_F16,
        config: TcConfig::Wgmma(v02_wgmma::TILING),
    },
    TcVersion {
        name: "bug_wgmma_early_release",
        bf16: &GEMM_TC_BUG_WGMMA_EARLY_RELEASE,
        f16: &GEMM_TC_V02_WGMMA_F16,
        config: TcConfig::Wgmma(v02_wgmma::TILING),
    },
    TcVersion {
        name: "bug_wgmma_stage_no_handover",
        bf16: &GEMM_TC_BUG_WGMMA_STAGE_NO_HANDOVER,
        f16: &GEMM_TC_V02_WGMMA_F16,
        config: TcConfig::Wgmma(v02_wgmma::TILING),
    },
    TcVersion {
        name: "bug_split_k_floor_slices",
        bf16: &GEMM_TC_BUG_SPLIT_K_FLOOR_SLICES,
        f16: &GEMM_TC_V05_WGMMA_SPLITK_F16,
        config: TcConfig::Wgmma(v05_wgmma_splitk::TILING),
    },
    TcVersion {
        name: "bug_persistent_keep_last_stage",
        bf16: &GEMM_TC_BUG_PERSISTENT_KEEP_LAST_STAGE,
        f16: &GEMM_TC_V06_WGMMA_PERSISTENT_F16,
        config: TcConfig::Wgmma(v06_wgmma_persistent::TILING),
    },
];

/// Threads per block of `name` if it is a kernel of this family.
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_threads(name: &str) -> Option<u32> {
    if let Some(v) = VERSIONS.iter().chain(BUG_VERSIONS).find(|v| v.bf16.name == name || v.f16.name == name) {
        return Some(v.config.threads());
    }
    if name == WGMMA_PROBE_BF16.name {
        return Some(probe::WGMMA_PROBE_THREADS);
    }
    if name == BULK_PROBE.name {
        return Some(probe::BULK_PROBE_THREADS);
    }
    if name == GEMM_TC_SPLIT_K_REDUCE_BF16.name || name == GEMM_TC_SPLIT_K_REDUCE_F16.name {
        return Some(split_k::REDUCE_THREADS);
    }
    KERNEL_NAMES.contains(&name).then_some(32)
}

/// `.minnctapersm` for this family's kernels: one block per SM for the wgmma versions (see
/// [`crate::launch_min_blocks`]). Their shared ring takes an SM anyway; the bound fixes the
/// registers at entry, which `setmaxnreg` needs, and keeps v02/v03 within their block's share
/// of the register file (v03: 640 threads, at most 96 each; it uses 96 since the pair
/// epilogue) instead of a count whose launch would fail.
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_min_blocks(name: &str) -> Option<u32> {
    if name == WGMMA_PROBE_BF16.name {
        // Its emulator-only mode 32 runs setmaxnreg (ptxas would flag it as ignored: C7508).
        return Some(1);
    }
    let v = VERSIONS.iter().chain(BUG_VERSIONS).find(|v| v.bf16.name == name || v.f16.name == name)?;
    matches!(v.config, TcConfig::Wgmma(_)).then_some(1)
}
