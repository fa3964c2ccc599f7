//! Backward v02: FlashAttention-2's backward on the tensor cores (`mma.sync` m16n8k16, sm_80+,
//! also runs on Hopper): the five products of [`super::bwd_v01_simt`] (`S = Q K^T`,
//! `dV += P^T dO`, `dP = dO V^T`, `dK += dS^T Q`, `dQ += dS K`) as mma on bf16/f16 fragments
//! with f32 accumulators, dK and dV kept in registers per key tile, Q and dO streamed in by
//! cp.async, double-buffered. Not measured yet (no GPU run).
//!
//! # The math
//! As in [`super::bwd_v01_simt`]; `D_i = rowsum(dO_i * O_i)` comes from its `preprocess`
//! kernel, and the atomic path's f32 dQ is converted by its `dq_convert`.
//!
//! # Kernels
//! - [`dkdv`]: grid `(ceil(seq_k / BK), kv_heads, batch)`; a block of the tiling's `warps()` owns
//!   [`BK`] keys of one kv head, warp `w` keys `16 (w % 4) .. 16 (w % 4) + 15` (and, at head
//!   dim 256, one half of the head dims of their dK and dV: "Head dim 256" below). Everything is computed
//!   transposed, keys as the rows: `S^T = K Q^T` and `dP^T = V dO^T` (K and V rows are the A
//!   fragments, by plain ldmatrix; Q and dO rows are the "col" B fragments, by plain ldmatrix),
//!   so `P^T` and `dS^T` land as C fragments whose n8 tiles `2 j`, `2 j + 1` are exactly the A
//!   fragment of k-step `j` of `dV += P^T dO` and `dK += dS^T Q` (B from Q and dO by ldmatrix
//!   `.trans`): neither goes through shared memory. The block loops over the query tiles of
//!   [`BwdMmaTiling::bq`] rows from the first query the causal mask lets see its keys, for
//!   every query head of its kv head (GQA/MQA), as one pipelined sequence of tiles. With
//!   `atomic_dq` it also writes `dS^T` (16-bit) to shared memory and computes `dQ = dS K` of
//!   the tile (A by ldmatrix `.trans` of `dS^T`, B by ldmatrix `.trans` of the K tile), adding
//!   it to the f32 accumulator with `atomicAdd`.
//! - [`dq`] (deterministic): grid `(ceil(seq_q / BM), heads, batch)`; warp `w` owns queries
//!   `16 w ..` of the block and loops over the key tiles they see, FlashAttention-2's forward
//!   shape: `S = Q K^T`, `dP = dO V^T` (Q and dO A fragments by ldmatrix, K and V B fragments
//!   by plain ldmatrix), `dS` re-packed in registers as the A fragment of `dQ += dS K` (K by
//!   ldmatrix `.trans`). One warp's fixed sequence of mma per output: bitwise reproducible.
//!
//! # Thread mapping
//! Lane `l`, `g = l / 4`, `t = l % 4` (the PTX fragment layouts, `device::mma`). In [`dkdv`] a
//! lane holds keys `g`, `g + 8` of its warp's 16 and, per n8 tile of queries, columns `2 t`,
//! `2 t + 1`; `lse` and `D` are per column, read from shared memory. dQ of a tile is split
//! over the warps: row block `w % (bq / 16)`, column group `w / (bq / 16)` of `64` head dims.
//! In [`dq`] a lane holds query rows `g`, `g + 8` and key (or head-dim) columns `2 t`, `2 t + 1`.
//!
//! # Tiling
//! [`BwdMmaTiling`] ([`TILING_D64`], [`TILING_D128`], [`TILING_D256`]) is read by these kernels and by the
//! launcher. [`dkdv`]'s shared memory: the K and V tiles (`BK x D`, loaded once), two stages of
//! Q and dO tiles (`bq x D` each), `dS^T` (`BK x bq`) and two stages of `lse` (base 2) and `D`
//! per query. [`dq`]'s: the Q and dO tiles (`BM x D`, loaded once) and two stages of K and V
//! tiles (`bn x D`). Every row is padded by 8 halves, so its pitch is an odd multiple of 16
//! bytes and the 8 rows of one ldmatrix fall in 8 distinct 16-byte bank groups. The outputs
//! go out through shared memory as 16-byte stores.
//!
//! # Head dim 256 (`dsplit = 2`)
//! A warp's 16 keys x 256 head dims of dK and of dV alone would be 256 f32 registers per lane.
//! So each m16 row block has two warps (8 warps, 256 threads): both compute the block's `S^T`
//! and `dP^T` over all 256 head dims (the same fragments, from the same shared tiles), and each
//! accumulates dK and dV for its own 128 head dims: the d = 128 kernel's register state (128
//! accumulators plus `S^T` and `dP^T` of a 32-query tile). The price is `S^T` and `dP^T`
//! computed twice: 2 of the 5 products, 7/5 of the tensor-core work of one copy. With atomic
//! dQ the first warp of a pair writes the (identical) `dS^T`. [`dq`] splits the same way: both
//! warps of a row block compute its `S` and `dP` over the whole head dim, each owns 128 of
//! dQ's head dims, with 32-key tiles (`bn`). Shared memory: [`dkdv`] 140,800 B, [`dq`]
//! 135,168 B: A100 (163 KB per block) and Hopper (227 KB) take it, GPUs with 99 KB per block
//! (sm_86, sm_89) do not, and the launcher refuses those with the device's limit in the message.
//!
//! # Registers (the reason for `bq`)
//! A [`dkdv`] warp accumulates 16 keys x `own_d` of dK and of dV: `own_d` f32 registers per
//! lane (128 at d = 128 and 256), plus `S^T` and `dP^T` (`bq / 2` each). At d = 64 a 64-query
//! tile fits (64 + 64); at d = 128 and 256 a 32-query tile keeps that state at 160 registers
//! (a 64-query one would be 192 before addresses and temporaries). K and V fragments are
//! re-read from shared memory per tile instead of held (another `D / 2` registers), and dQ is
//! produced 16 head dims at a time straight into the atomics. ptxas 12.9 (`tests/ptxas.rs`
//! prints them), sm_80 / sm_90: [`dkdv`] 229 / 233 registers at d = 64, 249 / 254 at d = 128
//! and 254 / 253 at d = 256; [`dq`] 161 / 131, 180 / 173 and 180 / 163; no spills, no stack
//! frame, no local memory. At 254 registers x 128 threads a dkdv block takes half an SM's
//! register file: two blocks per SM (8 warps), also what 64-74 KB of shared memory per block
//! leaves room for; at d = 256 one block of 256 threads x 254 registers fills it. dkdv at
//! d = 128 and 256 is within one or two registers of the 255 limit, so a change to it must be
//! re-checked by the ptxas gate (which fails on a spill).
//!
//! # Variable length (`VARLEN`)
//! As in [`super::bwd_v01_simt`]: sequence `b`'s lengths and first tokens come from
//! `cu_seqlens_q/k` (layout `[heads, total, D]`), grid x covers the longest sequence and blocks
//! past their own leave before the first barrier; separate entry points, so the dense kernels
//! keep their registers (unchanged by adding these). The same tiling fits at every head dim:
//! ptxas 12.9, sm_80 / sm_90: varlen [`dkdv`] 237 / 232 registers at d = 64, 255 / 255 at
//! d = 128 and at d = 256 (at the limit), [`dq`] 164 / 163, 206 / 186 and 173 / 166;
//! no spills, no stack frame, no local memory (the ptxas gate checks them).
//!
//! # Determinism
//! [`dkdv`]'s dK, dV and [`dq`] are bitwise deterministic run to run; the atomic dQ is not.
//!
//! # Safety
//! The launcher guarantees the view lengths match the shapes (scratch holds `batch heads seq_q`
//! floats of `D`, then, with `atomic_dq`, `batch heads seq_q d` of zeroed dQ from
//! [`AttentionBwdParams::dq_accum_start`]), `d` is this kernel's `D`, `heads` is a multiple of
//! `kv_heads`, Q, K, V, dO, dQ, dK and dV start 16-byte aligned (cp.async copies and 16-byte
//! stores), and the grids above with the tiling's `threads()` and shared bytes. Every global
//! access is guarded against `seq_q` / `seq_k`: rows past them are zero-filled copies that read
//! nothing.

use super::AttentionBwdParams;
use crate::device::mma::{self, MmaInput, cp_async_16, cp_async_commit, cp_async_wait_group, ldmatrix};
use crate::device::thread::{block_idx_x, block_idx_y, block_idx_z, sync_threads, thread_idx_x};
use crate::device::{Bytes16, Global, Shared, WARP_SIZE, hint, math};

/// Keys per [`dkdv`] block and queries per [`dq`] block: [`ROW_BLOCKS`] m16 row blocks.
pub const BK: u32 = 64;
pub const BM: u32 = 64;
pub const ROW_BLOCKS: u32 = BK / 16;
/// Head dims of dQ one warp computes per query tile in [`dkdv`].
const DQ_COLS: u32 = 64;

/// The tile configuration of one head dimension; everything else is derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BwdMmaTiling {
    /// Head dimension.
    pub d: u32,
    /// Queries per tile of [`dkdv`] (the register budget's knob; module docs).
    pub bq: u32,
    /// Keys per tile of [`dq`].
    pub bn: u32,
    /// Warps per m16 row block: each computes the block's `S` and `dP` over the whole head
    /// dim and owns `d / dsplit` head dims of the outputs (module docs, "Head dim 256").
    pub dsplit: u32,
    /// Halves of padding after each shared row.
    pub pad: u32,
}

impl BwdMmaTiling {
    pub const fn warps(self) -> u32 {
        ROW_BLOCKS * self.dsplit
    }
    /// Threads per block of [`dkdv`] and [`dq`].
    pub const fn threads(self) -> u32 {
        self.warps() * WARP_SIZE
    }
    /// Head dims of dK, dV (in [`dkdv`]) and dQ (in [`dq`]) one warp owns.
    pub const fn own_d(self) -> u32 {
        self.d / self.dsplit
    }
    /// Row pitch of the Q, K, V, dO tiles and of `dS^T`, in halves.
    pub const fn ld(self) -> u32 {
        self.d + self.pad
    }
    pub const fn ds_ld(self) -> u32 {
        self.bq + self.pad
    }
    /// [`dkdv`]'s layout, bytes: K, V, then per stage Q and dO, then `dS^T`, then per stage
    /// `lse` and `D` (f32).
    pub const fn v_offset(self) -> u32 {
        2 * BK * self.ld()
    }
    pub const fn q_offset(self, stage: u32) -> u32 {
        2 * self.v_offset() + stage * 2 * 2 * self.bq * self.ld()
    }
    pub const fn ds_offset(self) -> u32 {
        self.q_offset(2)
    }
    pub const fn lse_offset(self) -> u32 {
        self.ds_offset() + 2 * BK * self.ds_ld()
    }
    pub const fn dkdv_shared_bytes(self) -> u32 {
        self.lse_offset() + 2 * 2 * 4 * self.bq
    }
    /// [`dq`]'s layout, bytes: Q, dO, then per stage K and V.
    pub const fn dq_kv_offset(self, stage: u32) -> u32 {
        2 * 2 * BM * self.ld() + stage * 2 * 2 * self.bn * self.ld()
    }
    pub const fn dq_shared_bytes(self) -> u32 {
        self.dq_kv_offset(2)
    }
    /// 16-byte chunks of one row; rows apart of one thread's chunks.
    pub const fn row_chunks(self) -> u32 {
        self.d / 8
    }
    pub const fn chunk_step(self) -> u32 {
        self.threads() / self.row_chunks()
    }
    /// Row blocks of a [`dkdv`] query tile, and the warps sharing one for dQ.
    pub const fn dq_groups(self) -> u32 {
        self.warps() / (self.bq / 16)
    }
    pub const fn check(self) -> Self {
        assert!(self.d.is_multiple_of(16) && self.d <= 256, "whole k16 steps");
        assert!(self.dsplit >= 1 && self.own_d() * self.dsplit == self.d, "the warps of a row block split d evenly");
        assert!(self.own_d() <= 128, "dK and dV of more than 128 head dims per warp would not fit the registers");
        assert!(self.own_d().is_multiple_of(16), "whole pairs of n8 tiles per warp");
        assert!(self.bq.is_multiple_of(16) && self.bq <= 64 && self.bq >= 16, "whole m16 query blocks");
        assert!(self.bn.is_multiple_of(16) && self.bn <= 64 && self.bn >= 16, "whole k16 key steps");
        assert!(self.warps().is_multiple_of(self.bq / 16), "the warps split a tile's dQ evenly");
        assert!(self.d == self.dq_groups() * DQ_COLS, "each warp computes 64 head dims of dQ");
        assert!((2 * self.ld()).is_multiple_of(16) && (2 * self.ld() / 16) % 2 == 1, "pitch: odd 16-byte groups");
        assert!((2 * self.ds_ld()).is_multiple_of(16) && (2 * self.ds_ld() / 16) % 2 == 1, "pitch: odd 16-byte groups");
        assert!(self.threads().is_multiple_of(self.row_chunks()), "a thread's chunks share a column");
        assert!((self.bq * self.row_chunks()).is_multiple_of(self.threads()), "every thread copies as many chunks");
        assert!((self.bn * self.row_chunks()).is_multiple_of(self.threads()), "every thread copies as many chunks");
        assert!((BK * self.row_chunks()).is_multiple_of(self.threads()), "every thread copies as many chunks");
        assert!(self.bq <= self.threads(), "a thread per query stages lse and D");
        self
    }
}

pub const TILING_D64: BwdMmaTiling = BwdMmaTiling { d: 64, bq: 64, bn: 64, dsplit: 1, pad: 8 }.check();
pub const TILING_D128: BwdMmaTiling = BwdMmaTiling { d: 128, bq: 32, bn: 64, dsplit: 1, pad: 8 }.check();
pub const TILING_D256: BwdMmaTiling = BwdMmaTiling { d: 256, bq: 32, bn: 32, dsplit: 2, pad: 8 }.check();

/// The tiling of head dim `d` (a compile error for any other).
pub const fn tiling(d: usize) -> BwdMmaTiling {
    match d {
        64 => TILING_D64,
        128 => TILING_D128,
        256 => TILING_D256,
        _ => panic!("bwd_v02_mma is built for head dims 64, 128 and 256"),
    }
}

/// This thread's ldmatrix row offsets within a tile of pitch `ld` (in halves):
/// - `a`: an A fragment of 16 rows x 16 (matrices rows 0-7 / 8-15 x cols 0-7, then cols 8-15);
/// - `b`: two "col" B fragments from 16 row-major n-rows x 16 k (n 0-7 k 0-7, n 0-7 k 8-15,
///   n 8-15 k 0-7, n 8-15 k 8-15);
///   With `.trans` the same addresses give the A fragment of the transpose of a 16 x 16 tile
///   stored row-major (stored rows 0-7 cols 0-7 is A's rows 0-7 cols 0-7; stored rows 0-7
///   cols 8-15 is A's rows 8-15 cols 0-7; ...);
/// - `bt`: two B fragments by `.trans` from 16 row-major k-rows x 16 n (k 0-7 n 0-7, k 8-15
///   n 0-7, k 0-7 n 8-15, k 8-15 n 8-15).
struct Lanes {
    a: u32,
    b: u32,
    bt: u32,
}

#[inline(always)]
fn lanes(lane: u32, ld: u32) -> Lanes {
    Lanes {
        a: (lane % 16) * ld + (lane / 16) * 8,
        b: (lane % 8 + (lane / 16) * 8) * ld + ((lane / 8) % 2) * 8,
        bt: (lane % 8 + ((lane / 8) % 2) * 8) * ld + (lane / 16) * 8,
    }
}

/// Issues this thread's cp.async copies of a tile of `D`-wide rows: chunk `q` goes from source
/// index `src_at + q step D` to shared index `dst_at + q step ld`, where `step` is the rows
/// between one thread's chunks (a warp copies whole rows: coalesced 16-byte reads); it is real
/// when `q step < rows_left`, else zero-filled with nothing read.
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
fn copy_rows<T: MmaInput>(
    cfg: BwdMmaTiling,
    src: Global<T>,
    src_at: usize,
    dst: Shared<T>,
    dst_at: u32,
    rows_left: usize,
    per_thread: u32,
) {
    let step = cfg.chunk_step();
    let mut q = 0;
    while q < per_thread {
        let inside = ((q * step) as usize) < rows_left;
        // Rows past the end pass index 0 (never read: zero bytes), so no address leaves the view.
        let si = if inside { src_at + (q * step * cfg.d) as usize } else { 0 };
        cp_async_16(dst, dst_at + q * step * cfg.ld(), src, si, if inside { 16 } else { 0 });
        q += 1;
    }
}

/// `acc[n] += A B` over `KS` k-steps for `2 NP` n8 tiles: A of k-step `kk` by plain ldmatrix
/// at `a_at + 16 kk` of `a_view`, B of k-step `kk`, n8 tiles `2 np`, `2 np + 1` by plain
/// ldmatrix at `b_at + 16 np ld + 16 kk` of `b_view` (both row-major, k contiguous).
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
fn gemm_nt<T: MmaInput, const KS: usize, const N8: usize>(
    acc: &mut [[f32; 4]; N8],
    a_view: Shared<T>,
    a_at: u32,
    b_view: Shared<T>,
    b_at: u32,
    ld: u32,
) {
    unroll16!(kk < KS => {
        let a = ldmatrix::<T, 4>(a_view, a_at + 16 * kk as u32, false);
        unroll16!(np < N8 / 2 => {
            let r = ldmatrix::<T, 4>(b_view, b_at + 16 * np as u32 * ld + 16 * kk as u32, false);
            acc[2 * np] = mma::mma_m16n8k16::<T>(a, [r[0], r[1]], acc[2 * np]);
            acc[2 * np + 1] = mma::mma_m16n8k16::<T>(a, [r[2], r[3]], acc[2 * np + 1]);
        });
    });
}

/// `acc[n] += A B` where A comes from C fragments `c` (k-step `k` from tiles `2 k`, `2 k + 1`;
/// `BUG_SWAP`: registers 1 and 2 exchanged) and B of k-step `k`, n8 tiles `2 np`, `2 np + 1`
/// by ldmatrix `.trans` at `b_at + 16 k ld + 16 np` of `b_view` (row-major, n contiguous).
#[inline(always)]
#[track_caller]
fn gemm_cn<T: MmaInput, const NC: usize, const N8: usize, const BUG_SWAP: bool>(
    acc: &mut [[f32; 4]; N8],
    c: &[[f32; 4]; NC],
    b_view: Shared<T>,
    b_at: u32,
    ld: u32,
) {
    unroll16!(k < NC / 2 => {
        let mut a = mma::a_from_c::<T>(c[2 * k], c[2 * k + 1]);
        if BUG_SWAP {
            a.swap(1, 2);
        }
        unroll16!(np < N8 / 2 => {
            let r = ldmatrix::<T, 4>(b_view, b_at + 16 * k as u32 * ld + 16 * np as u32, true);
            acc[2 * np] = mma::mma_m16n8k16::<T>(a, [r[0], r[1]], acc[2 * np]);
            acc[2 * np + 1] = mma::mma_m16n8k16::<T>(a, [r[2], r[3]], acc[2 * np + 1]);
        });
    });
}

/// Writes a warp's 16 x `8 N8` f32 C fragments, times `mul`, as `T` pairs into the row-major
/// shared tile `words` (pitch `ld` halves) at rows `row0 + g`, `row0 + g + 8` from column `col0`.
#[inline(always)]
#[track_caller]
fn stage_c<T: MmaInput, const N8: usize>(
    words: Shared<u32>,
    c: &[[f32; 4]; N8],
    mul: f32,
    (row0, col0): (u32, u32),
    ld: u32,
    g: u32,
    t: u32,
) {
    unroll16!(nt < N8 => {
        let col = col0 + 8 * nt as u32 + 2 * t;
        words.store(((row0 + g) * ld + col) / 2, mma::pack_f32x2::<T>(c[nt][0] * mul, c[nt][1] * mul));
        words.store(((row0 + g + 8) * ld + col) / 2, mma::pack_f32x2::<T>(c[nt][2] * mul, c[nt][3] * mul));
    });
}

/// Copies `rows` staged rows (pitch `ld` halves at byte `offset`) to global rows from `dst_at`
/// (in elements), 16 bytes per store, skipping rows at or past `rows_left`.
#[inline(always)]
#[track_caller]
fn store_rows<T: MmaInput>(
    cfg: BwdMmaTiling,
    dst: crate::device::GlobalMut<T>,
    dst_at: usize,
    offset: u32,
    rows: u32,
    rows_left: usize,
    tid: u32,
) {
    let chunks = Shared::<Bytes16>::at(offset, rows * cfg.ld() / 8);
    let mut ch = tid;
    while ch < rows * cfg.row_chunks() {
        let (r, cc) = (ch / cfg.row_chunks(), (ch % cfg.row_chunks()) * 8);
        if (r as usize) < rows_left {
            let v = chunks.load_chunk::<T, 8>((r * cfg.ld() + cc) / 8);
            dst.store_chunk::<8>((dst_at + r as usize * cfg.d as usize + cc as usize) / 8, v);
        }
        ch += cfg.threads();
    }
}

/// `P^T` of one tile in place of `S^T` (`s`), and `dS^T = P^T (dP^T - D)` in place of `dP^T`
/// (`dp`). Column `col` (query) reads `lse2[col]` and `dd[col]` of the staged tile.
/// `MASKED`: row `r`'s key counts for columns `col >= col_min[r]` only (tile-relative, already
/// less `2 t`); other tiles are fully visible and skip the compare.
#[inline(always)]
#[track_caller]
fn probs_t<const MASKED: bool, const NQ: usize>(
    s: &mut [[f32; 4]; NQ],
    c: f32,
    stats: Shared<f32>,
    lse_at: u32,
    col_min: [i32; 2],
    t: u32,
) {
    unroll16!(nt < NQ => {
        let col = 8 * nt as u32 + 2 * t;
        let l = [stats.load(lse_at + col), stats.load(lse_at + col + 1)];
        unroll16!(e < 4 => {
            let visible = !MASKED || ((nt * 8) as i32 + (e % 2) as i32) >= col_min[e / 2];
            s[nt][e] = if visible { math::exp2_approx(math::fma(s[nt][e], c, -l[e % 2])) } else { 0.0 };
        });
    });
}

#[inline(always)]
#[track_caller]
fn ds_t<const NQ: usize>(p: &[[f32; 4]; NQ], dp: &mut [[f32; 4]; NQ], stats: Shared<f32>, d_at: u32, t: u32) {
    unroll16!(nt < NQ => {
        let col = 8 * nt as u32 + 2 * t;
        let dd = [stats.load(d_at + col), stats.load(d_at + col + 1)];
        unroll16!(e < 4 => {
            dp[nt][e] = p[nt][e] * (dp[nt][e] - dd[e % 2]);
        });
    });
}

/// dK and dV of one key tile (and, with `atomic_dq`, its dQ contributions). `D = 16 KD`,
/// `NO` n8 tiles of head dims owned per warp (the tiling's `own_d / 8`), `BQ = 8 NQ` (the
/// tiling's `bq`). `BUG_SWAP_DS`: a deliberately wrong `dS^T` A fragment in
/// `dK += dS^T Q` (registers 1 and 2 swapped) that the tests must reject. `VARLEN`: over
/// sequence `b` of a variable-length batch.
#[inline(always)]
pub fn dkdv<
    T: MmaInput,
    const D: usize,
    const KD: usize,
    const NO: usize,
    const BQ: usize,
    const NQ: usize,
    const BUG_SWAP_DS: bool,
    const VARLEN: bool,
>(
    p: AttentionBwdParams<T>,
) {
    let cfg = const { tiling(D) };
    const { assert!(KD * 16 == D && NO * 8 == tiling(D).own_d() as usize && NQ * 8 == BQ && tiling(D).bq as usize == BQ) };
    let (ld, ds_ld) = (cfg.ld(), cfg.ds_ld());
    let tid = thread_idx_x();
    let (warp, lane) = (tid / WARP_SIZE, tid % WARP_SIZE);
    // The warp's 16 keys (row block) and its share of dK's and dV's head dims.
    let (kb, own0) = (warp % ROW_BLOCKS, (warp / ROW_BLOCKS) * cfg.own_d());
    let (g, t) = (lane / 4, lane % 4);
    let (k0, kvh, b) = (block_idx_x() as usize * BK as usize, block_idx_y() as usize, block_idx_z() as usize);
    let (qs, seq_q, ks, seq_k) =
        if VARLEN { super::bwd_v01_simt::varlen_seq(&p, b) } else { (0, p.seq_q as usize, 0, p.seq_k as usize) };
    if VARLEN && k0 >= seq_k {
        return; // the grid covers the longest sequence; the whole block leaves before a barrier
    }
    let (heads, kv_heads) = (p.heads as usize, p.kv_heads as usize);
    let group = heads / kv_heads;
    let causal = p.causal != 0;
    let kv_row0 = if VARLEN { kvh * p.seq_k as usize + ks } else { (b * kv_heads + kvh) * seq_k };
    let dq_base = p.dq_accum_start(VARLEN);
    // The first query that sees key k0 (every earlier one sees none of the tile); every head
    // of the group walks the same query tiles, as one sequence of `tiles` for the pipeline.
    let i_first = if causal { (k0 + seq_q).saturating_sub(seq_k) } else { 0 };
    let per_head = seq_q.saturating_sub(i_first).div_ceil(BQ);
    let tiles = group * per_head;

    let kv_s = Shared::<T>::at(0, 2 * BK * ld);
    let stage_elems = 2 * BQ as u32 * ld;
    let qd_s = Shared::<T>::at(cfg.q_offset(0), 2 * stage_elems);
    let ds_s = Shared::<T>::at(cfg.ds_offset(), BK * ds_ld);
    let ds_words = Shared::<u32>::at(cfg.ds_offset(), BK * ds_ld / 2);
    // Stage s: lse (base 2) at 2 BQ s, D at 2 BQ s + BQ.
    let stats = Shared::<f32>::at(cfg.lse_offset(), 4 * BQ as u32);

    let (r0, c0) = (tid / cfg.row_chunks(), (tid % cfg.row_chunks()) * 8);
    let (src_off, dst_off) = (r0 as usize * D + c0 as usize, r0 * ld + c0);
    let tile_at = |j: usize| -> (usize, usize) {
        let h = kvh * group + j / per_head;
        let q_row0 = if VARLEN { h * p.seq_q as usize + qs } else { (b * heads + h) * seq_q };
        (q_row0, i_first + (j % per_head) * BQ)
    };
    let load_q = |j: usize, s: u32| {
        let (q_row0, i0) = tile_at(j);
        let src_at = hint::opaque_usize((q_row0 + i0) * D + src_off);
        let dst_at = hint::opaque_u32(s * stage_elems + dst_off);
        let (left, n) = (seq_q.saturating_sub(i0 + r0 as usize), BQ as u32 * cfg.row_chunks() / cfg.threads());
        copy_rows(cfg, p.q, src_at, qd_s, dst_at, left, n);
        copy_rows(cfg, p.d_o, src_at, qd_s, dst_at + BQ as u32 * ld, left, n);
        if tid < BQ as u32 {
            let i = i0 + tid as usize;
            let (lse2, dd) = if i < seq_q {
                let lse = p.lse.load(q_row0 + i);
                // A row that sees no key has lse = -inf: +inf here makes every P of it 0.
                let lse2 = if lse == f32::NEG_INFINITY { f32::INFINITY } else { lse * core::f32::consts::LOG2_E };
                (lse2, p.scratch.load(q_row0 + i))
            } else {
                (f32::INFINITY, 0.0)
            };
            stats.store(2 * BQ as u32 * s + tid, lse2);
            stats.store(2 * BQ as u32 * s + BQ as u32 + tid, dd);
        }
    };

    // Prologue: K, V and query tile 0 in one group.
    let kv_at = hint::opaque_usize((kv_row0 + k0) * D + src_off);
    let (kv_left, kv_n) = (seq_k.saturating_sub(k0 + r0 as usize), BK * cfg.row_chunks() / cfg.threads());
    copy_rows(cfg, p.k, kv_at, kv_s, dst_off, kv_left, kv_n);
    copy_rows(cfg, p.v, kv_at, kv_s, dst_off + BK * ld, kv_left, kv_n);
    if tiles > 0 {
        load_q(0, 0);
    }
    cp_async_commit();

    let ln = lanes(lane, ld);
    let (k_a, v_a) = (16 * kb * ld + ln.a, 16 * kb * ld + ln.a + BK * ld);
    // This lane's keys (rows g, g + 8 of the warp's 16) and the first query each is visible to
    // (causal), or none (past seq_k).
    let warp_k0 = k0 + 16 * kb as usize;
    let diag = |key: usize| -> i64 {
        if key >= seq_k {
            i64::MAX / 2
        } else if causal {
            key as i64 + seq_q as i64 - seq_k as i64
        } else {
            i64::MIN / 2
        }
    };
    let key_diag = [diag(warp_k0 + g as usize), diag(warp_k0 + g as usize + 8)];
    // The warp's tiles need the mask while some key is past seq_k or some query of the tile
    // does not yet see the warp's last key.
    let mask_until = if warp_k0 + 16 > seq_k { i64::MAX } else { key_diag[0].max(key_diag[1]) };
    let (dq_rb, dq_cg) = (warp % (BQ as u32 / 16), warp / (BQ as u32 / 16));
    let c = p.scale_log2;

    let mut dk = [[0.0f32; 4]; NO];
    let mut dv = [[0.0f32; 4]; NO];
    let mut j = 0usize;
    while j < tiles {
        let stage = (j % 2) as u32;
        if j + 1 < tiles {
            load_q(j + 1, 1 - stage);
        }
        // Always commit (possibly an empty group), so "all but the newest group" is tile j.
        cp_async_commit();
        cp_async_wait_group::<1>();
        sync_threads();
        let (q_row0, i0) = tile_at(j);
        let q_b = hint::opaque_u32(stage * stage_elems + ln.b);
        let q_bt = hint::opaque_u32(stage * stage_elems + ln.bt);
        let (do_b, do_bt) = (q_b + BQ as u32 * ld, q_bt + BQ as u32 * ld);
        let stats_at = 2 * BQ as u32 * stage;

        // S^T = K Q^T, then P^T in place.
        let mut pt = [[0.0f32; 4]; NQ];
        gemm_nt::<T, KD, NQ>(&mut pt, kv_s, k_a, qd_s, q_b, ld);
        if (i0 as i64) < mask_until {
            let cm = |r: usize| (key_diag[r] - i0 as i64 - (2 * t) as i64).clamp(-1, BQ as i64 + 1) as i32;
            probs_t::<true, NQ>(&mut pt, c, stats, stats_at, [cm(0), cm(1)], t);
        } else {
            probs_t::<false, NQ>(&mut pt, c, stats, stats_at, [0, 0], t);
        }
        // dV += P^T dO over the warp's head dims.
        gemm_cn::<T, NQ, NO, false>(&mut dv, &pt, qd_s, do_bt + own0, ld);
        // dP^T = V dO^T, then dS^T in place.
        let mut dst = [[0.0f32; 4]; NQ];
        gemm_nt::<T, KD, NQ>(&mut dst, kv_s, v_a, qd_s, do_b, ld);
        ds_t::<NQ>(&pt, &mut dst, stats, stats_at + BQ as u32, t);
        // dK += dS^T Q.
        gemm_cn::<T, NQ, NO, BUG_SWAP_DS>(&mut dk, &dst, qd_s, q_bt + own0, ld);

        if p.atomic_dq != 0 {
            // dQ = dS K: dS^T goes through shared memory (its rows are spread over the warps);
            // the warps of a row block hold the same dS^T, and the first one writes it.
            if own0 == 0 {
                stage_c::<T, NQ>(ds_words, &dst, 1.0, (16 * kb, 0), ds_ld, g, t);
            }
            sync_threads();
            let ds_b = lanes(lane, ds_ld).b + 16 * dq_rb;
            let mut a = [[0u32; 4]; 4];
            unroll16!(kk < 4 => {
                // dS of row block dq_rb (queries) x keys 16 kk ..: the transpose of the stored
                // dS^T, by `.trans` at the `b` addresses.
                a[kk] = ldmatrix::<T, 4>(ds_s, ds_b + 16 * kk as u32 * ds_ld, true);
            });
            let col0 = dq_cg * DQ_COLS;
            let k_bt = hint::opaque_u32(ln.bt + col0);
            let mut cc = 0u32;
            while cc < DQ_COLS / 16 {
                let mut acc = [[0.0f32; 4]; 2];
                unroll16!(kk < 4 => {
                    let r = ldmatrix::<T, 4>(kv_s, k_bt + 16 * kk as u32 * ld + 16 * cc, true);
                    acc[0] = mma::mma_m16n8k16::<T>(a[kk], [r[0], r[1]], acc[0]);
                    acc[1] = mma::mma_m16n8k16::<T>(a[kk], [r[2], r[3]], acc[1]);
                });
                unroll16!(e < 4 => {
                    let qi = i0 + (16 * dq_rb + g) as usize + 8 * (e / 2);
                    if qi < seq_q {
                        let at = dq_base + (q_row0 + qi) * D + (col0 + 16 * cc + 2 * t) as usize + e % 2;
                        p.scratch.atomic_add(at, acc[0][e] * p.scale);
                        p.scratch.atomic_add(at + 8, acc[1][e] * p.scale);
                    }
                });
                cc += 1;
            }
        }
        // All reads of this stage (and of dS^T) are done before tile j + 2's copies go in.
        sync_threads();
        j += 1;
    }

    // Epilogue: dK (scaled) and dV through the K and V slots, then 16-byte stores. With no
    // tile the K/V copies may still be in flight: wait for them before overwriting.
    cp_async_wait_group::<0>();
    sync_threads();
    let kv_words = Shared::<u32>::at(0, BK * ld);
    stage_c::<T, NO>(kv_words, &dk, p.scale, (16 * kb, own0), ld, g, t);
    stage_c::<T, NO>(kv_words, &dv, 1.0, (BK + 16 * kb, own0), ld, g, t);
    sync_threads();
    let left = seq_k.saturating_sub(k0);
    store_rows(cfg, p.dk, (kv_row0 + k0) * D, 0, BK, left, tid);
    store_rows(cfg, p.dv, (kv_row0 + k0) * D, cfg.v_offset(), BK, left, tid);
}

/// Deterministic dQ of one query tile of [`BM`] rows: loops over the key tiles its rows see.
/// `D = 16 KD`, `NO` n8 tiles of dQ's head dims owned per warp, `NB` n8 tiles of keys per tile
/// (the tiling's `bn / 8`). `VARLEN`: over sequence `b` of a variable-length batch.
#[inline(always)]
pub fn dq<T: MmaInput, const D: usize, const KD: usize, const NO: usize, const NB: usize, const VARLEN: bool>(
    p: AttentionBwdParams<T>,
) {
    let cfg = const { tiling(D) };
    const { assert!(KD * 16 == D && NO * 8 == tiling(D).own_d() as usize && NB * 8 == tiling(D).bn as usize) };
    let (ld, bn) = (cfg.ld(), cfg.bn);
    let tid = thread_idx_x();
    let (warp, lane) = (tid / WARP_SIZE, tid % WARP_SIZE);
    // The warp's 16 queries (row block) and its share of dQ's head dims.
    let (qb, own0) = (warp % ROW_BLOCKS, (warp / ROW_BLOCKS) * cfg.own_d());
    let (g, t) = (lane / 4, lane % 4);
    let (q0, h, b) = (block_idx_x() as usize * BM as usize, block_idx_y() as usize, block_idx_z() as usize);
    let (qs, seq_q, ks, seq_k) =
        if VARLEN { super::bwd_v01_simt::varlen_seq(&p, b) } else { (0, p.seq_q as usize, 0, p.seq_k as usize) };
    if VARLEN && q0 >= seq_q {
        return; // the grid covers the longest sequence; the whole block leaves before a barrier
    }
    let kvh = h / (p.heads / p.kv_heads) as usize;
    let causal = p.causal != 0;
    let q_row0 = if VARLEN { h * p.seq_q as usize + qs } else { (b * p.heads as usize + h) * seq_q };
    let kv_row0 = if VARLEN { kvh * p.seq_k as usize + ks } else { (b * p.kv_heads as usize + kvh) * seq_k };
    let limit = |i: usize| -> usize { if causal { (i + seq_k + 1).saturating_sub(seq_q).min(seq_k) } else { seq_k } };
    // The block's last query sees the most keys (uniform across the block).
    let last_q = (q0 + BM as usize - 1).min(seq_q - 1);
    let tiles = limit(last_q).div_ceil(bn as usize);
    let wq0 = q0 + 16 * qb as usize;
    let (warp_min, warp_max) = if wq0 < seq_q { (limit(wq0), limit((wq0 + 15).min(seq_q - 1))) } else { (0, 0) };
    let rows = [wq0 + g as usize, wq0 + g as usize + 8];
    let row_lim = [limit(rows[0]) as i64, limit(rows[1]) as i64];
    let mut lse2 = [f32::INFINITY; 2];
    let mut dd = [0.0f32; 2];
    unroll16!(r < 2 => {
        if rows[r] < seq_q {
            let lse = p.lse.load(q_row0 + rows[r]);
            if lse != f32::NEG_INFINITY {
                lse2[r] = lse * core::f32::consts::LOG2_E;
            }
            dd[r] = p.scratch.load(q_row0 + rows[r]);
        }
    });

    let qd_s = Shared::<T>::at(0, 2 * BM * ld);
    let stage_elems = 2 * bn * ld;
    let kv_s = Shared::<T>::at(cfg.dq_kv_offset(0), 2 * stage_elems);
    let (r0, c0) = (tid / cfg.row_chunks(), (tid % cfg.row_chunks()) * 8);
    let (src_off, dst_off) = (r0 as usize * D + c0 as usize, r0 * ld + c0);
    let load_kv = |tile: usize, s: u32| {
        let row0 = tile * bn as usize;
        let src_at = hint::opaque_usize((kv_row0 + row0) * D + src_off);
        let dst_at = hint::opaque_u32(s * stage_elems + dst_off);
        let (left, n) = (seq_k.saturating_sub(row0 + r0 as usize), bn * cfg.row_chunks() / cfg.threads());
        copy_rows(cfg, p.k, src_at, kv_s, dst_at, left, n);
        copy_rows(cfg, p.v, src_at, kv_s, dst_at + bn * ld, left, n);
    };
    // Prologue: Q, dO and key tile 0 in one group.
    let q_at = hint::opaque_usize((q_row0 + q0) * D + src_off);
    let (q_left, q_n) = (seq_q.saturating_sub(q0 + r0 as usize), BM * cfg.row_chunks() / cfg.threads());
    copy_rows(cfg, p.q, q_at, qd_s, dst_off, q_left, q_n);
    copy_rows(cfg, p.d_o, q_at, qd_s, dst_off + BM * ld, q_left, q_n);
    if tiles > 0 {
        load_kv(0, 0);
    }
    cp_async_commit();

    let ln = lanes(lane, ld);
    let (q_a, do_a) = (16 * qb * ld + ln.a, 16 * qb * ld + ln.a + BM * ld);
    let c = p.scale_log2;
    let mut acc = [[0.0f32; 4]; NO];
    let mut j = 0usize;
    while j < tiles {
        let stage = (j % 2) as u32;
        if j + 1 < tiles {
            load_kv(j + 1, 1 - stage);
        }
        cp_async_commit();
        cp_async_wait_group::<1>();
        sync_threads();
        let start = j * bn as usize;
        if start < warp_max {
            let k_b = hint::opaque_u32(stage * stage_elems + ln.b);
            let k_bt = hint::opaque_u32(stage * stage_elems + ln.bt);
            let mut s = [[0.0f32; 4]; NB];
            gemm_nt::<T, KD, NB>(&mut s, qd_s, q_a, kv_s, k_b, ld);
            // Key column 8 nt + 2 t + e % 2 against the row's limit, as a constant against
            // limit - 2 t (the other way round LLVM keeps 2 t + constant in a register each).
            let masked = start + (bn as usize) > warp_min;
            let lim = [
                (row_lim[0] - start as i64 - (2 * t) as i64) as i32,
                (row_lim[1] - start as i64 - (2 * t) as i64) as i32,
            ];
            unroll16!(nt < NB => {
                unroll16!(e < 4 => {
                    let visible = !masked || ((nt * 8) as i32 + (e % 2) as i32) < lim[e / 2];
                    s[nt][e] = if visible { math::exp2_approx(math::fma(s[nt][e], c, -lse2[e / 2])) } else { 0.0 };
                });
            });
            let mut dp = [[0.0f32; 4]; NB];
            gemm_nt::<T, KD, NB>(&mut dp, qd_s, do_a, kv_s, k_b + bn * ld, ld);
            unroll16!(nt < NB => {
                unroll16!(e < 4 => {
                    dp[nt][e] = s[nt][e] * (dp[nt][e] - dd[e / 2]);
                });
            });
            // dQ += dS K over the warp's head dims: K rows (keys) are the k index, so K comes
            // by ldmatrix .trans.
            gemm_cn::<T, NB, NO, false>(&mut acc, &dp, kv_s, k_bt + own0, ld);
        }
        // All reads of this stage are done before tile j + 2's copies go into it.
        sync_threads();
        j += 1;
    }

    // Epilogue: dQ (scaled) through the Q slot, then 16-byte stores.
    cp_async_wait_group::<0>();
    sync_threads();
    let q_words = Shared::<u32>::at(0, BM * ld / 2);
    stage_c::<T, NO>(q_words, &acc, p.scale, (16 * qb, own0), ld, g, t);
    sync_threads();
    store_rows(cfg, p.dq, (q_row0 + q0) * D, 0, BM, seq_q.saturating_sub(q0), tid);
}
