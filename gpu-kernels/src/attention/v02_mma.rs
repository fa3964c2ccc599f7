//! v02: FlashAttention-2 on the tensor cores (`mma.sync` m16n8k16, sm_80+, also runs on
//! Hopper): a warp owns 16 query rows, `S = Q K^T` and `O += P V` are mma, the online
//! softmax runs on the accumulator fragments in registers, and P goes from the S accumulator
//! into the A operand of `P V` without touching shared memory. K and V tiles stream in by
//! cp.async, double-buffered. Not measured yet (no GPU run).
//!
//! # The floor, before any tuning
//! The forward pass is `4 * batch * heads * seq_q * seq_k * d` FLOPs (half of it when
//! causal). An H200 (sm_90) peaks at about 990 TFLOP/s dense bf16, but only through `wgmma`;
//! `mma.sync` on Hopper reaches roughly 60-70 % of that (about 600-690 TFLOP/s) for a pure
//! GEMM, which is this kernel's ceiling. For `b4 h16 s2048 d128` non-causal (137 GFLOP) that is
//! 0.14 ms at 990 TFLOP/s and 0.20-0.23 ms at the mma.sync ceiling. Attention also needs one
//! `ex2` per score against `4 d` FLOPs per score: at wgmma's peak (about 4096 FLOP per clock per
//! SM) and d = 64 that is 16 `ex2` per clock per SM, all of the MUFU unit's throughput, and
//! half of it at d = 128, so the softmax competes with the mma for issue slots. The
//! FlashAttention-3 paper puts FlashAttention-2 (the mma.sync design this follows) at about
//! 35 % utilization of an H100. The bench reports TFLOP/s and the ratio to PyTorch's SDPA
//! measured in the same run; nothing is measured yet.
//!
//! # Thread mapping
//! A block of [`WARPS`] warps owns [`BM`] consecutive queries of one (batch, head): grid
//! x = query tiles, y = heads, z = batch. Warp `w` owns rows `16 w .. 16 w + 15` of the tile;
//! in the mma layouts lane `l` (`g = l / 4`, `t = l % 4`) holds rows `g` and `g + 8` of them
//! and, per n8 tile of keys (S) or of head dimensions (O), columns `2 t` and `2 t + 1`.
//! Per key tile of [`BN`] keys: S (16 x 64 per warp, 32 f32 per lane) from `D / 16` k-steps of
//! 8 mma each, Q's A fragments kept in registers for the whole kernel (loaded once by
//! ldmatrix x4) and K's B fragments by ldmatrix x4 (K rows are the "col" layout B wants, no
//! transpose). The row max and the row sum of `2^(s c - m)` are kept per lane and reduced
//! across the quad (the 4 lanes sharing `g`) with two xor shuffles; the running sum stays a
//! per-lane partial until the end. P's C fragments of key tiles `2 j` and `2 j + 1` are exactly
//! the A fragment of k-step `j` of `P V` (rows `g`, `g + 8`; columns `2 t` and `2 t + 8`), so P
//! is packed to bf16/f16 in registers. V's B fragments come from ldmatrix x4 `.trans` on the
//! row-major V tile.
//!
//! # Tiling
//! [`FlashTiling`] (one per head dim: [`TILING_D64`], [`TILING_D128`]) is read by this kernel
//! and by the launcher (threads, rows per block, shared bytes). Shared memory holds two
//! stages of K and V tiles (`BN x D` each); Q is staged once through stage 1's K slot before
//! the loop uses it. Rows are padded by 8 halves (16 bytes), so the 8 row addresses of one
//! ldmatrix (and the 8 rows of the O staging stores) fall in 8 distinct 16-byte bank groups
//! (a row pitch of 144 or 272 bytes is 16 mod 128): padding rather than an XOR swizzle, as
//! `gemm_tc` does, which keeps every ldmatrix address a constant offset from the lane's base.
//! Causal blocks stop at the last key tile their last query sees; inside a block a warp skips
//! the mma work (not the barriers) of tiles none of its rows sees. Only tiles that cross the
//! causal diagonal or the end of the keys take the masked softmax path.
//! The output goes through shared memory (stage 0's K slot) so that global stores are 16 bytes.
//!
//! # Registers and occupancy (ptxas 12.9, `tests/ptxas.rs` prints them)
//! The per-thread state is O (`D / 2` f32), Q's fragments (`D / 4` b32) and S (32 f32):
//! 128 registers of state at d = 128 before addresses and temporaries. ptxas allocates
//! 137 (sm_80) / 153 (sm_90) registers at d = 64 and 183 at d = 128, no spills, no local memory.
//! That decides 4 warps x 16 rows per block over 8 warps x 16 (128 rows): the per-thread state
//! is the same either way, so the block size only sets the granularity an SM is filled in.
//! At 183 registers an SM's 64K-register file holds 11 warps: two 4-warp blocks (8 warps, 136
//! KB of shared memory at d = 128), where 8-warp blocks would fit only one (8 warps too, but a
//! 128-row block also wastes more rows on short and causal sequences). At d = 64 three 4-warp
//! blocks fit (12 warps) against one 8-warp block. 64 rows per block also halves the work
//! quantum of the last, partial query tile. Keeping the register count low needed care: LLVM
//! hoists `lane-dependent base + constant` out of the loop into one register per constant
//! (per ldmatrix, cp.async and mask column); [`hint::opaque_u32`] and comparing constants
//! against `limit - 2 t` keep those as immediate offsets (from 255 registers with spills at
//! d = 128 to 183).
//! The variable-length kernels (`VARLEN`: lengths and bases from `cu_seqlens_q/k`, held in
//! registers instead of re-read kernel parameters) take 161 / 159 (sm_80 / sm_90) at d = 64
//! and 214 / 213 at d = 128, no spills: the same blocks per SM as the dense kernels (3 at
//! d = 64, 2 at d = 128), which is why they are separate entry points.
//! Head dim 256 is not built: O (128) + Q (64) + S (32) registers alone leave too little of
//! the 255 a thread can address; it would need Q re-read from shared memory per k-step.
//!
//! # Safety
//! The launcher guarantees the view lengths match the shapes, `d` is this kernel's `D`,
//! `heads` is a multiple of `kv_heads`, `seq_q >= 1`, Q, K, V and O start 16-byte aligned (the
//! cp.async copies and the 16-byte output stores), and the grid is `(ceil(seq_q / BM), heads,
//! batch)` with the tiling's threads and shared bytes. Varlen (`cu_seqlens_q` non-empty): both
//! offset arrays have `batch + 1` non-decreasing entries from 0, the last ones `seq_q` /
//! `seq_k` (the totals), and grid x covers the longest query sequence; blocks past their own
//! sequence's end return before touching anything. Every global access is guarded against
//! `seq_q` / `seq_k`: rows past them are zero-filled copies that read nothing.

use super::AttentionParams;
use crate::device::mma::{self, MmaInput, cp_async_16, cp_async_commit, cp_async_wait_group, ldmatrix};
use crate::device::thread::{block_idx_x, block_idx_y, block_idx_z, sync_threads, thread_idx_x};
use crate::device::{Global, Shared, WARP_SIZE, hint, math};

/// Query rows per block: one m16 tile per warp.
pub const BM: u32 = 64;
/// Keys per tile.
pub const BN: u32 = 64;
pub const WARPS: u32 = BM / 16;
/// n8 tiles of one S row block.
const NS: usize = (BN / 8) as usize;

/// The tile configuration of one head dimension; everything else is derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashTiling {
    /// Query rows per block (16 per warp).
    pub bm: u32,
    /// Keys per tile.
    pub bn: u32,
    /// Head dimension.
    pub d: u32,
    /// Shared stages of K and V (2: double buffering).
    pub stages: u32,
    /// Halves of padding after each shared row (bank groups; see the module docs).
    pub pad: u32,
}

impl FlashTiling {
    pub const fn warps(self) -> u32 {
        self.bm / 16
    }
    pub const fn threads(self) -> u32 {
        self.warps() * WARP_SIZE
    }
    /// Row pitch of every shared tile, in halves.
    pub const fn ld(self) -> u32 {
        self.d + self.pad
    }
    /// Halves of one K or V tile.
    pub const fn tile(self) -> u32 {
        self.bn * self.ld()
    }
    /// Byte offsets of stage `s`'s K and V tiles.
    pub const fn k_offset(self, s: u32) -> u32 {
        s * 2 * 2 * self.tile()
    }
    pub const fn v_offset(self, s: u32) -> u32 {
        self.k_offset(s) + 2 * self.tile()
    }
    /// Q is staged once in stage 1's K slot (free until the loop prefetches tile 1).
    pub const fn q_offset(self) -> u32 {
        self.k_offset(1)
    }
    /// The output tile is staged in stage 0's K slot after the loop.
    pub const fn o_offset(self) -> u32 {
        0
    }
    pub const fn shared_bytes(self) -> u32 {
        self.k_offset(self.stages)
    }
    /// 16-byte chunks of one row, and per thread for a K/V tile and for the Q/O tile.
    pub const fn row_chunks(self) -> u32 {
        self.d / 8
    }
    pub const fn kv_chunks_per_thread(self) -> u32 {
        self.bn * self.row_chunks() / self.threads()
    }
    pub const fn q_chunks_per_thread(self) -> u32 {
        self.bm * self.row_chunks() / self.threads()
    }
    pub const fn check(self) -> Self {
        assert!(self.bm == BM && self.bn == BN, "the register tiles are written for 64 x 64");
        assert!(self.d.is_multiple_of(16) && self.d <= 128, "whole k16 steps; d 256 would spill (module docs)");
        assert!(self.stages == 2, "the pipeline is written for two stages");
        assert!(self.bm <= self.bn, "Q fits the K slot it is staged in");
        assert!((2 * self.ld()).is_multiple_of(16), "rows start 16-byte aligned (cp.async, ldmatrix)");
        assert!((2 * self.ld()) % 128 == 16, "consecutive rows start one 16-byte bank group apart");
        assert!((self.bn * self.row_chunks()).is_multiple_of(self.threads()), "every thread copies as many chunks");
        assert!((self.bm * self.row_chunks()).is_multiple_of(self.threads()), "every thread copies as many chunks");
        assert!(self.threads().is_multiple_of(self.row_chunks()), "a thread's chunks share a column");
        self
    }
}

pub const TILING_D64: FlashTiling = FlashTiling { bm: BM, bn: BN, d: 64, stages: 2, pad: 8 }.check();
pub const TILING_D128: FlashTiling = FlashTiling { bm: BM, bn: BN, d: 128, stages: 2, pad: 8 }.check();

/// The tiling of head dim `d` (a compile error for any other).
pub const fn tiling(d: usize) -> FlashTiling {
    match d {
        64 => TILING_D64,
        128 => TILING_D128,
        _ => panic!("v02_mma is built for head dims 64 and 128"),
    }
}

/// 16 bytes of shared memory, for 128-bit shared loads of the output tile.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct Chunk(pub [u32; 4]);

/// Issues this thread's cp.async copies of one tile: its chunks sit `step = threads / (D / 8)`
/// rows apart (a warp copies whole rows: coalesced 16-byte reads, 128 contiguous shared bytes
/// per 8-lane phase), the first at source index `src_at` and shared index `dst_at`; chunk `q`
/// is real when `first_row + q step < avail`, else zero-filled with nothing read. The bases are
/// opaque (see [`hint::opaque_u32`]), so every further chunk is a constant offset.
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
fn copy_tile<T: MmaInput>(
    cfg: FlashTiling,
    src: Global<T>,
    src_at: usize,
    dst: Shared<T>,
    dst_at: u32,
    first_row: usize,
    avail: usize,
    per_thread: u32,
) {
    let step = cfg.threads() / cfg.row_chunks();
    // Compared with constants q * step (not first_row + q * step: that hoists a register each).
    let rows_left = avail.saturating_sub(first_row);
    let mut q = 0;
    while q < per_thread {
        let inside = ((q * step) as usize) < rows_left;
        // Rows past the end pass index 0 (never read: zero bytes), so no address leaves the view.
        let si = if inside { src_at + (q * step) as usize * cfg.d as usize } else { 0 };
        cp_async_16(dst, dst_at + q * step * cfg.ld(), src, si, if inside { 16 } else { 0 });
        q += 1;
    }
}

/// One warp's online-softmax state for its lane's two rows (`g`, `g + 8`): running max `m` of
/// the scaled base-2 scores, this lane's part of the running sum `l` of `2^(s c - m)`.
pub(super) struct RowState {
    pub m: [f32; 2],
    pub l: [f32; 2],
}

/// Folds the scores `s` of one key tile (`NS` n8 tiles in the m16n8 C layout, which is also
/// wgmma's per warp) into `st`, leaving the probabilities in `s`; returns the factors the
/// output rows must be rescaled by.
/// `MASKED`: key column `col` of row `r` counts only when `col < lim[r]` (tile-relative);
/// the other tiles are fully visible and skip the compare. `c > 0` is `|scale| log2(e)`.
#[inline(always)]
#[track_caller]
pub(super) fn softmax_tile<const MASKED: bool, const NS: usize>(
    s: &mut [[f32; 4]; NS],
    st: &mut RowState,
    c: f32,
    lim: [i32; 2],
    t: u32,
) -> [f32; 2] {
    // Column 8 nt + 2 t + e % 2 against the limit, as a constant against limit - 2 t (the
    // other way round LLVM keeps 2 t + constant in a register per column).
    let lim = [lim[0] - (2 * t) as i32, lim[1] - (2 * t) as i32];
    let visible = |nt: usize, e: usize| -> bool { !MASKED || ((nt * 8) as i32 + (e % 2) as i32) < lim[e / 2] };
    let mut mx = [f32::NEG_INFINITY; 2];
    unroll16!(nt < NS => {
        unroll16!(e < 4 => {
            if visible(nt, e) {
                mx[e / 2] = math::max_nan(mx[e / 2], s[nt][e]);
            }
        });
    });
    let mut m_new = [0.0f32; 2];
    let mut corr = [1.0f32; 2];
    unroll16!(r < 2 => {
        let tile_max = mma::quad_max(mx[r]);
        // c * -inf would be NaN for c = 0; no visible key leaves the running max as it was.
        let scaled = if tile_max == f32::NEG_INFINITY { f32::NEG_INFINITY } else { tile_max * c };
        m_new[r] = math::max_nan(st.m[r], scaled);
        if m_new[r] != f32::NEG_INFINITY {
            // exp2(-inf) = 0: the first visible tile drops the (empty) old state.
            corr[r] = math::exp2_approx_ftz(st.m[r] - m_new[r]);
        }
        st.m[r] = m_new[r];
    });
    let neg_m = [-m_new[0], -m_new[1]];
    let mut sum = [0.0f32; 2];
    unroll16!(nt < NS => {
        unroll16!(e < 4 => {
            let pv = if visible(nt, e) { math::exp2_approx_ftz(math::fma(s[nt][e], c, neg_m[e / 2])) } else { 0.0 };
            s[nt][e] = pv;
            sum[e / 2] += pv;
        });
    });
    unroll16!(r < 2 => {
        st.l[r] = st.l[r] * corr[r] + sum[r];
    });
    corr
}

/// The kernel body for head dim `D` (`KD = D / 16` k-steps of `Q K^T`, `ND = D / 8` n8 tiles
/// of O). `BUG_SWAP_P`: a deliberately wrong P re-pack (A registers 1 and 2 swapped: rows
/// `g + 8` and columns `2 t + 8` exchanged) that the tests must reject.
#[inline(always)]
pub fn run<
    T: MmaInput,
    const D: usize,
    const KD: usize,
    const ND: usize,
    const BUG_SWAP_P: bool,
    const VARLEN: bool,
>(
    p: AttentionParams<T>,
) {
    let cfg = const { tiling(D) };
    const { assert!(KD * 16 == D && ND * 8 == D) };
    let ld = cfg.ld();
    let tid = thread_idx_x();
    let (warp, lane) = (tid / WARP_SIZE, tid % WARP_SIZE);
    let (g, t) = (lane / 4, lane % 4);
    let (b, h) = (block_idx_z() as usize, block_idx_y() as usize);
    let kvh = h / (p.heads / p.kv_heads) as usize;
    // The (batch, head)'s first row: dense `[batch, heads, seq, D]`, or varlen `[heads, total,
    // D]` with sequence b at its cumulative offset (and seq_q / seq_k its own lengths).
    // A separate kernel for varlen keeps the dense one's registers (its lengths stay kernel
    // parameters, re-read from constant memory rather than held in registers).
    let (q_row0, seq_q, kv_row0, seq_k) = if !VARLEN {
        let (sq, sk) = (p.seq_q as usize, p.seq_k as usize);
        ((b * p.heads as usize + h) * sq, sq, (b * p.kv_heads as usize + kvh) * sk, sk)
    } else {
        let (qs, qe) = (p.cu_seqlens_q.load(b) as usize, p.cu_seqlens_q.load(b + 1) as usize);
        let (ks, ke) = (p.cu_seqlens_k.load(b) as usize, p.cu_seqlens_k.load(b + 1) as usize);
        (h * p.seq_q as usize + qs, qe - qs, kvh * p.seq_k as usize + ks, ke - ks)
    };
    let q0 = block_idx_x() as usize * BM as usize;
    if VARLEN && q0 >= seq_q {
        // Varlen: the grid covers the longest sequence; the whole block leaves (no barrier yet).
        return;
    }
    let q_base = q_row0 * D;
    let kv_base = kv_row0 * D;
    let causal = p.causal != 0;
    // Keys query `i` sees: all, or up to the bottom-right-aligned diagonal (rows past seq_q,
    // which are never stored, see all keys).
    let limit = |i: usize| -> usize { if causal { (i + seq_k + 1).saturating_sub(seq_q).min(seq_k) } else { seq_k } };
    // The block's last query decides how many tiles the block loads (uniform across the block).
    let last_q = (q0 + BM as usize - 1).min(seq_q - 1);
    let tiles = limit(last_q).div_ceil(BN as usize);
    // The warp's rows: keys its first row sees (every tile below it is unmasked for the whole
    // warp) and its last row sees (tiles from there on are skipped).
    let wq0 = q0 + 16 * warp as usize;
    let (warp_min, warp_max) = if wq0 < seq_q { (limit(wq0), limit((wq0 + 15).min(seq_q - 1))) } else { (0, 0) };
    let row_lim = [limit(wq0 + g as usize) as i64, limit(wq0 + g as usize + 8) as i64];

    // One view of both stages: stage s's K tile starts at element s * stage, its V tile one
    // tile later.
    let stage_elems = 2 * cfg.tile();
    let kv_s = Shared::<T>::at(cfg.k_offset(0), cfg.stages * stage_elems);
    let q_s = Shared::<T>::at(cfg.q_offset(), cfg.tile());
    // This thread's copy chunks: column c of rows r0, r0 + step, ...
    let (r0, c0) = (tid / cfg.row_chunks(), (tid % cfg.row_chunks()) * 8);
    let (src_off, dst_off) = (r0 as usize * D + c0 as usize, r0 * ld + c0);
    let load_kv = |tile: usize, s: u32| {
        let row0 = tile * BN as usize;
        let src_at = hint::opaque_usize(kv_base + row0 * D + src_off);
        let dst_at = hint::opaque_u32(s * stage_elems + dst_off);
        let (first, n) = (row0 + r0 as usize, cfg.kv_chunks_per_thread());
        copy_tile(cfg, p.k, src_at, kv_s, dst_at, first, seq_k, n);
        copy_tile(cfg, p.v, src_at, kv_s, dst_at + cfg.tile(), first, seq_k, n);
    };

    // Prologue: Q and key tile 0 in one group.
    let q_at = hint::opaque_usize(q_base + q0 * D + src_off);
    copy_tile(cfg, p.q, q_at, q_s, dst_off, q0 + r0 as usize, seq_q, cfg.q_chunks_per_thread());
    if tiles > 0 {
        load_kv(0, 0);
    }
    cp_async_commit();
    cp_async_wait_group::<0>();
    sync_threads();
    // Q's A fragments for every k-step, kept for the whole kernel: lanes 0-15 give rows 0-15
    // at column 16 kk, lanes 16-31 the same rows at 16 kk + 8. A negative scale is folded into
    // Q's sign (exact), so the scale in the exponent is positive and the max commutes with it.
    let flip = if p.scale_log2 < 0.0 { 0x8000_8000u32 } else { 0 };
    let c = p.scale_log2.abs();
    let mut qf = [[0u32; 4]; KD];
    unroll16!(kk < KD => {
        let row = 16 * warp + lane % 16;
        let r = ldmatrix::<T, 4>(q_s, row * ld + 16 * kk as u32 + (lane / 16) * 8, false);
        qf[kk] = [r[0] ^ flip, r[1] ^ flip, r[2] ^ flip, r[3] ^ flip];
    });
    // Every warp has its Q before tile 1's copies overwrite the slot.
    sync_threads();
    // The lanes' ldmatrix rows within a tile. K (plain): matrices (keys 0-7, d 0-7), (keys 0-7,
    // d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15). V (.trans): (keys 0-7, d 0-7), (keys
    // 8-15, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 8-15).
    let k_lane = (lane % 8 + (lane / 16) * 8) * ld + ((lane / 8) % 2) * 8;
    let v_lane = (lane % 8 + ((lane / 8) % 2) * 8) * ld + (lane / 16) * 8 + cfg.tile();

    let mut st = RowState { m: [f32::NEG_INFINITY; 2], l: [0.0; 2] };
    let mut o = [[0.0f32; 4]; ND];
    let mut j = 0usize;
    while j < tiles {
        let stage = (j % 2) as u32;
        if j + 1 < tiles {
            load_kv(j + 1, 1 - stage);
        }
        // Always commit (possibly an empty group), so "all but the newest group" is tile j.
        cp_async_commit();
        cp_async_wait_group::<1>();
        // Every thread's copies of tile j are in; the barrier makes them visible to all.
        sync_threads();
        let start = j * BN as usize;
        if start < warp_max {
            // S = Q K^T: K rows (keys) are the n index, so a plain ldmatrix of K gives B's
            // "col" fragment, two n8 key tiles per load.
            let mut s = [[0.0f32; 4]; NS];
            let k_at = hint::opaque_u32(stage * stage_elems + k_lane);
            unroll16!(kk < KD => {
                unroll16!(np < NS / 2 => {
                    let r = ldmatrix::<T, 4>(kv_s, k_at + 16 * np as u32 * ld + 16 * kk as u32, false);
                    s[2 * np] = mma::mma_m16n8k16::<T>(qf[kk], [r[0], r[1]], s[2 * np]);
                    s[2 * np + 1] = mma::mma_m16n8k16::<T>(qf[kk], [r[2], r[3]], s[2 * np + 1]);
                });
            });
            let corr = if start + (BN as usize) > warp_min {
                let lim = [(row_lim[0] - start as i64) as i32, (row_lim[1] - start as i64) as i32];
                softmax_tile::<true, NS>(&mut s, &mut st, c, lim, t)
            } else {
                softmax_tile::<false, NS>(&mut s, &mut st, c, [0, 0], t)
            };
            unroll16!(nt < ND => {
                unroll16!(e < 4 => {
                    o[nt][e] *= corr[e / 2];
                });
            });
            // O += P V. P's C fragments of key tiles 2 kp and 2 kp + 1 are the A fragment of
            // k-step kp (`mma::a_from_c`).
            let v_at = hint::opaque_u32(stage * stage_elems + v_lane);
            unroll16!(kp < NS / 2 => {
                let mut a = mma::a_from_c::<T>(s[2 * kp], s[2 * kp + 1]);
                if BUG_SWAP_P {
                    a.swap(1, 2);
                }
                unroll16!(dp < ND / 2 => {
                    // Two n8 tiles of V's B fragments (d 16 dp .. 16 dp + 15) per load.
                    let r = ldmatrix::<T, 4>(kv_s, v_at + 16 * kp as u32 * ld + 16 * dp as u32, true);
                    o[2 * dp] = mma::mma_m16n8k16::<T>(a, [r[0], r[1]], o[2 * dp]);
                    o[2 * dp + 1] = mma::mma_m16n8k16::<T>(a, [r[2], r[3]], o[2 * dp + 1]);
                });
            });
        }
        // All reads of this stage are done before tile j + 2's copies go into it.
        sync_threads();
        j += 1;
    }

    // Epilogue: normalize, stage the warp's 16 x D output tile in shared memory (4-byte
    // stores, conflict-free thanks to the padding), then write whole 16-byte chunks.
    let l = [mma::quad_sum(st.l[0]), mma::quad_sum(st.l[1])];
    let inv = [if l[0] > 0.0 { 1.0 / l[0] } else { 0.0 }, if l[1] > 0.0 { 1.0 / l[1] } else { 0.0 }];
    let o_words = Shared::<u32>::at(cfg.o_offset(), cfg.tile() / 2);
    unroll16!(nt < ND => {
        let col = 8 * nt as u32 + 2 * t;
        let row = 16 * warp + g;
        o_words.store((row * ld + col) / 2, mma::pack_f32x2::<T>(o[nt][0] * inv[0], o[nt][1] * inv[0]));
        o_words.store(((row + 8) * ld + col) / 2, mma::pack_f32x2::<T>(o[nt][2] * inv[1], o[nt][3] * inv[1]));
    });
    if t == 0 {
        unroll16!(r < 2 => {
            let qi = wq0 + g as usize + 8 * r;
            if qi < seq_q {
                let lse = if l[r] > 0.0 {
                    (st.m[r] + math::log2_approx(l[r])) * core::f32::consts::LN_2
                } else {
                    f32::NEG_INFINITY
                };
                p.lse.store(q_row0 + qi, lse);
            }
        });
    }
    sync_threads();
    let o_chunks = Shared::<Chunk>::at(cfg.o_offset(), cfg.tile() / 8);
    let mut q = 0;
    while q < cfg.q_chunks_per_thread() {
        let ch = tid + q * cfg.threads();
        let (r, cc) = (ch / cfg.row_chunks(), (ch % cfg.row_chunks()) * 8);
        if q0 + (r as usize) < seq_q {
            let w = o_chunks.load((r * ld + cc) / 8).0;
            let half = |i: usize| T::from_bits16((w[i / 2] >> (16 * (i % 2))) as u16);
            let v = [half(0), half(1), half(2), half(3), half(4), half(5), half(6), half(7)];
            p.o.store_chunk::<8>((q_base + (q0 + r as usize) * D + cc as usize) / 8, v);
        }
        q += 1;
    }
}
