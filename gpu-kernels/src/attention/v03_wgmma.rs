//! v03: FlashAttention on Hopper's warpgroup MMA (sm_90a): TMA loads Q once and K, V tiles
//! into a 2-stage mbarrier ring, a producer warpgroup issues them while two consumer
//! warpgroups compute `S = Q K^T` with `wgmma` from shared memory (both operands K-major),
//! run the online softmax on the accumulator fragments, and compute `O += P V` with `wgmma`
//! taking P straight from registers (the S accumulator re-packed as A fragments) and V from
//! shared memory (MN-major). Not measured yet (no GPU run).
//!
//! # The floor, before any tuning
//! `4 * batch * heads * seq_q * seq_k * d` FLOPs (half when causal): `b4 h16 s2048 d128`
//! non-causal is 137 GFLOP, 0.139 ms at the H200's 990 TFLOP/s dense bf16 (wgmma only; the
//! mma.sync of [`super::v02_mma`] reaches roughly two thirds of that). The same shape needs
//! 268 M `ex2`, one per score: at 16 per clock per SM (the MUFU rate), 132 SMs and about
//! 1.8 GHz that is about 70 us, half the matrix time at d = 128 and all of it at d = 64. So
//! the exponentials must run while the tensor cores work. Here that overlap comes only from
//! the two consumer warpgroups of a block (and the warp schedulers interleaving them): while
//! one runs its softmax the other's wgmmas can issue. FlashAttention-3's explicit ping-pong
//! (named barriers ordering the two warpgroups' GEMMs) and its intra-warpgroup pipelining
//! (the softmax of one tile under the `P V` of the last) are [`super::v04_pingpong`]; the
//! bench decides whether they are worth it. Prediction, to be measured: above
//! v02 at every shape with d = 128 and long sequences, by less than the 1.5x the tensor
//! cores alone would allow, because the softmax is not hidden.
//!
//! # Thread mapping
//! `(CONSUMERS + 1) x 128` threads; block (x, y, z) owns queries `BM x .. BM x + BM - 1` of
//! head y of batch z. Consumer warpgroup `w` owns 64 of them (`64 w ..`), one m64 wgmma row
//! block; in its accumulators thread (warp `v`, lane `g = l / 4`, `t = l % 4`) holds rows
//! `16 v + g` and `16 v + g + 8`, columns `8 i + 2 t` and the next, as `mma.sync`'s C layout
//! per warp, so the softmax is [`super::v02_mma`]'s, quad shuffles included. The last
//! warpgroup is the producer: one thread issues every TMA load, the rest exit.
//!
//! # Pipeline
//! Q: one mbarrier phase, `D / 64` boxes. Key tile `j` goes to stage `s = j % STAGES`
//! (round `r = j / STAGES`): the producer waits until `empty[s]` completed phase `r - 1`,
//! then loads K (its own barrier `k_full[s]`) and V (`v_full[s]`), so the consumers start
//! `Q K^T` while V is still arriving. A consumer warpgroup waits `k_full`, issues `D / 16`
//! wgmmas (k 16 each) into S, waits for them, runs the softmax and rescales O, waits
//! `v_full`, issues `BN / 16` register-A wgmmas into O, waits for them, and then each of its
//! warps arrives on `empty[s]` (`4 x CONSUMERS` arrivals complete a phase). A warpgroup
//! whose rows see none of a tile (causal tails, rows past `seq_q`) skips its wgmmas but
//! still waits for its K before arriving: otherwise it would run a round ahead and its
//! arrivals would complete a phase the other warpgroup has not released (the emulator
//! reported exactly that deadlock at 1025 keys before the wait was added).
//!
//! # Shared layout (1024-byte aligned tiles, 128-byte swizzle, `D / 64` column panels)
//! Q: `D / 64` panels of `BM` rows x 128 bytes (64 head dims each), K-major, the A of `Q K^T`
//! (SBO 1024: 8 rows; a k-step of 16 is 32 bytes on inside a panel, then the next panel).
//! K stage: the same shape with `BN` rows, the B of `Q K^T` as stored (N x K: K-major, no
//! transpose). V stage: the same bytes read as the B of `P V` with `imm-trans-b = 1`
//! (K = keys down the rows, N = head dims along them: MN-major, LBO = one panel to the next
//! 64 head dims, SBO 1024, a k-step of 16 keys 2048 bytes on). TMA writes each panel as one
//! `64 x rows` box through a rank-3 map (head dims, sequence, batch x heads): rows past the
//! sequence come in as zeros, never as the next head's rows, so a V row that the mask hides
//! is an exact zero (a NaN in another head cannot leak in through `0 * NaN`).
//!
//! # Registers
//! Per consumer thread: O (`D / 2` f32), S (`BN / 2` f32), then P (`BN / 4` b32, live until
//! its wgmmas complete; S dies as P is packed). `BN` is the tiling's key tile: 128 at head
//! dims 64 and 128; 64 at head dim 256, where O alone takes 128 registers (128 + 32 + 16
//! instead of 128 + 64 + 32, which would not fit the consumers' 232 or 240). The producer
//! gives registers back (`setmaxnreg.dec` to the producer count of
//! [`WgmmaFlashTiling::regs`]) and the consumers take them (`setmaxnreg.inc`); the build
//! declares one block per SM. `tests/ptxas.rs` prints the counts. What the consumers need
//! only once per tile or once at the end (the key-tile count, the first output row, the query
//! count) thread 0 writes to shared memory before the loop, and they read it from there: held
//! in registers through the loop, those values were what ptxas 12.9 spilled at head dim 256.
//!
//! # Variable length (`VARLEN`)
//! The packed batch (`[heads, total, D]`, sequence `b` from `cu_seqlens_q/k`) uses the same
//! rank-3 maps over the totals (head dims, tokens, heads): a block's boxes start at its
//! sequence's first token, and the map zero-fills only past the packed total, so a box that
//! runs past the sequence reads the next sequence's rows. Those Q rows are computed and never
//! stored and those keys' scores are masked, but a masked key's `p = 0` times a NaN or
//! infinite V row of another sequence would still be NaN. So when the block's last key tile
//! ends past `seq_k` (block-uniform, at most once per block), every consumer thread waits
//! `v_full`, zeroes its share of the V rows past the sequence (whole 128-byte rows: the swizzle
//! stays inside a row), issues `fence.proxy.async` (generic writes before the wgmma's async
//! reads), and the 8 consumer warps meet on the `v_clean` mbarrier before any `P V`. The
//! isolation test poisons a neighbouring sequence with NaN; a build without the zeroing
//! (`BUG_TAIL_NOT_ZEROED`) fails it.
//!
//! # Scope
//! Head dims 64, 128 and 256, dense and variable-length batches, bf16/f16.
//! A negative scale negates S before the softmax (the descriptors leave no place to flip Q's
//! sign as v02 does). The output is written from the accumulators, 2 bytes per store (once
//! per block; staging it through shared memory for 16-byte stores is a later step).
//!
//! # Safety
//! The launcher guarantees what v02 needs (shapes, `d = D`, `heads % kv_heads == 0`,
//! `seq_q >= 1`, the grid `(ceil(seq_q / BM), heads, batch)`, this tiling's threads and shared
//! bytes) and fills `maps` with the Q, K and V tensor maps (rank 3, 128-byte swizzle, boxes
//! of `64 x BM` and `64 x BN`), and launches only where the sm_90a PTX is loaded.

use super::AttentionParams;
use super::v02_mma::{RowState, softmax_tile};
use crate::device::hopper::{
    Mbarrier, SmemDesc, Swizzle, TENSOR_MAP_BYTES, TensorMap, WgmmaAccumulator, fence_mbarrier_init, fence_proxy_async,
    fence_tensormap_acquire, setmaxnreg_dec, setmaxnreg_inc, smem_addr, tma_load_3d, wgmma_commit, wgmma_fence,
    wgmma_wait,
};
use crate::device::mma::{self, MmaInput};
use crate::device::thread::{block_idx_x, block_idx_y, block_idx_z, sync_threads, thread_idx_x};
use crate::device::warp::{FULL_MASK, sync_warp};
use crate::device::{Bytes16, Shared, WARP_SIZE, math};

/// Consumer warpgroups per block (64 query rows each).
pub const CONSUMERS: u32 = 2;
/// Query rows per block.
pub const BM: u32 = 64 * CONSUMERS;
/// Bytes of one 128-byte-swizzled row: 64 head dims.
const PANEL_ROW: u32 = 128;
const _: () = assert!(BM <= 256, "TMA boxes are at most 256 rows");

/// The tile configuration of one head dimension; the launcher reads it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgmmaFlashTiling {
    pub d: u32,
    /// Keys per tile: the N of one consumer's S accumulator (m64`bn`k16).
    pub bn: u32,
    pub stages: u32,
    /// The `setmaxnreg` split of the dense entry points and of the varlen ones.
    pub dense: RegSplit,
    pub varlen: RegSplit,
}

/// `setmaxnreg` counts (per thread) of the producer warpgroup and of the consumers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegSplit {
    pub producer: u32,
    pub consumer: u32,
}

/// The split of head dims 64 and 128: the producer keeps 40, the consumers take 232.
const SPLIT_40_232: RegSplit = RegSplit { producer: 40, consumer: 232 };

impl WgmmaFlashTiling {
    pub const fn threads(self) -> u32 {
        (CONSUMERS + 1) * 128
    }
    /// 64-column panels of one Q, K or V tile.
    pub const fn panels(self) -> u32 {
        self.d / 64
    }
    pub const fn q_bytes(self) -> u32 {
        BM * self.d * 2
    }
    /// Bytes of one K or one V tile.
    pub const fn kv_bytes(self) -> u32 {
        self.bn * self.d * 2
    }
    /// Panel `p` of Q, of stage `s`'s K and of its V.
    pub const fn q_offset(self, p: u32) -> u32 {
        p * BM * PANEL_ROW
    }
    pub const fn k_offset(self, s: u32, p: u32) -> u32 {
        self.q_bytes() + s * 2 * self.kv_bytes() + p * self.bn * PANEL_ROW
    }
    pub const fn v_offset(self, s: u32, p: u32) -> u32 {
        self.k_offset(s, p) + self.kv_bytes()
    }
    const fn bars(self) -> u32 {
        self.q_bytes() + self.stages * 2 * self.kv_bytes()
    }
    pub const fn q_full(self) -> u32 {
        self.bars()
    }
    pub const fn k_full(self, s: u32) -> u32 {
        self.bars() + 8 + 8 * s
    }
    pub const fn v_full(self, s: u32) -> u32 {
        self.k_full(self.stages) + 8 * s
    }
    pub const fn empty(self, s: u32) -> u32 {
        self.v_full(self.stages) + 8 * s
    }
    /// Varlen: completes when the consumers have zeroed the V rows of the block's last tile
    /// that lie past the sequence (one phase per block).
    pub const fn v_clean(self) -> u32 {
        self.empty(self.stages)
    }
    /// v04 only: stage `s`'s V is free (its `P V` completed); `empty` then frees its K alone.
    pub const fn v_empty(self, s: u32) -> u32 {
        self.v_clean() + 8 + 8 * s
    }
    /// Three u32 that thread 0 writes before the loop: the block's first output row (of its
    /// (batch, head) plane or its sequence) and query count, read by the epilogue, and its
    /// key-tile count, read by v03's loop (see `run`).
    pub const fn seqs(self) -> u32 {
        self.v_empty(self.stages)
    }
    pub const fn shared_bytes(self) -> u32 {
        self.seqs() + 16
    }
    /// The TMA boxes, contiguous dimension first: Q `64 x BM`, K and V `64 x BN` (one plane).
    pub const fn q_box(self) -> [u32; 3] {
        [64, BM, 1]
    }
    pub const fn kv_box(self) -> [u32; 3] {
        [64, self.bn, 1]
    }
    pub const fn check(self) -> Self {
        assert!(self.d == 64 || self.d == 128 || self.d == 256, "head dims 64, 128 and 256 (one wgmma N for O)");
        assert!(
            self.bn == 64 || self.bn == 128,
            "key tiles of 64 or 128 (one wgmma N for S, an even count of k16 steps)"
        );
        assert!(self.stages >= 2, "a ring needs two stages");
        assert!(self.q_bytes().is_multiple_of(1024) && self.kv_bytes().is_multiple_of(1024), "swizzle periods");
        assert!(self.shared_bytes() <= 227 * 1024, "Hopper's 227 KB per block");
        self.dense.check(self.threads());
        self.varlen.check(self.threads());
        self
    }
    /// The `setmaxnreg` split of the dense (`varlen = false`) or varlen entry points.
    pub const fn regs(self, varlen: bool) -> RegSplit {
        if varlen { self.varlen } else { self.dense }
    }
}

impl RegSplit {
    pub(super) const fn check(self, threads: u32) {
        let (p, c) = (self.producer, self.consumer);
        assert!(p % 8 == 0 && c % 8 == 0 && p >= 24 && c <= 256, "setmaxnreg counts: multiples of 8 in 24..=256");
        let entry = crate::launch_regs_per_thread(threads);
        assert!(p <= entry && c >= entry, "the producer gives registers, the consumers take them");
        // `setmaxnreg.inc` waits until the block's pool has the registers, and the pool is
        // what the block got at launch (entry x threads: 64512 for 384 threads), not the
        // 65536 of the register file: a split over it hangs every block (48/232 and 32/240
        // did on the H200, 2026-12-04).
        assert!((p + c * CONSUMERS) * 128 <= entry * threads, "the split must fit the block's launch-time registers");
    }
}

pub const TILING_D64: WgmmaFlashTiling =
    WgmmaFlashTiling { d: 64, bn: 128, stages: 2, dense: SPLIT_40_232, varlen: SPLIT_40_232 }.check();
pub const TILING_D128: WgmmaFlashTiling =
    WgmmaFlashTiling { d: 128, bn: 128, stages: 2, dense: SPLIT_40_232, varlen: SPLIT_40_232 }.check();
/// Head dim 256: O alone is 128 accumulators per consumer thread, so the key tile halves to
/// 64 (S 32, P 16) to stay under the consumers' 232 registers; Q 64 KB and two stages of K
/// and V (32 KB each) take 192 KB of shared memory.
///
/// The consumers sit at their cap here. The varlen consumers (which also carry the
/// sequence's bounds through the loop) need 240, which leaves the producer 24; the dense
/// ones keep 232 and the producer 40. (48/232 and 32/240, which ptxas preferred, add up to
/// more than the block's launch-time registers, and the consumers' `setmaxnreg.inc` waited
/// forever on the H200.)
pub const TILING_D256: WgmmaFlashTiling = WgmmaFlashTiling {
    d: 256,
    bn: 64,
    stages: 2,
    dense: SPLIT_40_232,
    varlen: RegSplit { producer: 24, consumer: 240 },
}
.check();

/// A head dim of this kernel: its tiling, the O accumulator (the wgmma shape m64n`D`k16) and
/// the S accumulator (m64n`BN`k16).
pub trait HeadDim {
    const TILING: WgmmaFlashTiling;
    type Acc: WgmmaAccumulator;
    type S: WgmmaAccumulator;
}

pub struct D64;
impl HeadDim for D64 {
    const TILING: WgmmaFlashTiling = TILING_D64;
    type Acc = [f32; 32];
    type S = [f32; 64];
}

pub struct D128;
impl HeadDim for D128 {
    const TILING: WgmmaFlashTiling = TILING_D128;
    type Acc = [f32; 64];
    type S = [f32; 64];
}

pub struct D256;
impl HeadDim for D256 {
    const TILING: WgmmaFlashTiling = TILING_D256;
    type Acc = [f32; 128];
    type S = [f32; 32];
}

/// The correct kernel.
pub const NO_BUG: u32 = 0;
/// Deliberately wrong (tests only): P's register-A fragment re-packed with registers 1 and 2
/// swapped (rows `g + 8` and columns `2 t + 8` exchanged).
pub const BUG_SWAPPED_P: u32 = 1;
/// Deliberately wrong (tests only): varlen without zeroing the V rows past the sequence, so
/// the next sequence's values reach the output through `0 * NaN`.
pub const BUG_TAIL_NOT_ZEROED: u32 = 2;

/// The kernel body for head dim `H`; `BUG` is [`NO_BUG`] or a deliberate bug the tests must
/// reject. `VARLEN`: a packed variable-length batch (see the module docs). `NS`: the n8 tiles
/// of one S row block, `BN / 8` (a parameter because stable Rust cannot size an array by
/// `H::TILING.bn`). `PINGPONG`: v04's main loop (see [`super::v04_pingpong`]) instead of v03's.
#[inline(always)]
pub fn run<T: MmaInput, H: HeadDim, const BUG: u32, const VARLEN: bool, const NS: usize, const PINGPONG: bool>(
    p: AttentionParams<T>,
) {
    let cfg = const { H::TILING };
    const { assert!(<H::Acc as WgmmaAccumulator>::N == H::TILING.d, "O's wgmma N is the head dim") };
    const { assert!(<H::S as WgmmaAccumulator>::N == H::TILING.bn, "S's wgmma N is the key tile") };
    const { assert!(NS == (H::TILING.bn / 8) as usize, "NS is the key tile's n8 tiles") };
    let bn = cfg.bn;
    let d = cfg.d as usize;
    let tid = thread_idx_x();
    let wg = tid / 128;
    let (b, h) = (block_idx_z() as usize, block_idx_y() as usize);
    let kvh = h / (p.heads / p.kv_heads) as usize;
    // The (batch, head)'s first query and key rows in its map plane and its lengths: dense,
    // plane `batch x heads` from row 0; varlen, plane `head` of the packed `[heads, total, D]`
    // from the sequence's cumulative offsets.
    let (q_first, seq_q, k_first, seq_k) = if VARLEN {
        let (qs, qe) = (p.cu_seqlens_q.load(b) as usize, p.cu_seqlens_q.load(b + 1) as usize);
        let (ks, ke) = (p.cu_seqlens_k.load(b) as usize, p.cu_seqlens_k.load(b + 1) as usize);
        (qs, qe - qs, ks, ke - ks)
    } else {
        (0, p.seq_q as usize, 0, p.seq_k as usize)
    };
    let q0 = block_idx_x() as usize * BM as usize;
    if VARLEN && q0 >= seq_q {
        // Varlen: the grid covers the longest sequence; the whole block leaves (no barrier yet).
        return;
    }
    let causal = p.causal != 0;
    // Keys query `i` sees (bottom-right aligned when causal; rows past seq_q see all keys).
    let limit = |i: usize| -> usize { if causal { (i + seq_k + 1).saturating_sub(seq_q).min(seq_k) } else { seq_k } };
    let last_q = (q0 + BM as usize - 1).min(seq_q - 1);
    let tiles = limit(last_q).div_ceil(bn as usize) as u32;

    // Per-block values the consumers read from shared memory (module docs, "Registers"). The
    // row fits u32: the output holds fewer than 2^32 rows of 128+ bytes.
    let seqs = Shared::<u32>::at(cfg.seqs(), 3);
    let q_full = Mbarrier::at(cfg.q_full());
    let k_full = |s: u32| Mbarrier::at(cfg.k_full(s));
    let v_full = |s: u32| Mbarrier::at(cfg.v_full(s));
    let empty = |s: u32| Mbarrier::at(cfg.empty(s));
    let v_empty = |s: u32| Mbarrier::at(cfg.v_empty(s));
    let v_clean = Mbarrier::at(cfg.v_clean());
    if tid == 0 {
        q_full.init(1);
        let mut s = 0;
        while s < cfg.stages {
            k_full(s).init(1);
            v_full(s).init(1);
            empty(s).init(4 * CONSUMERS);
            if PINGPONG {
                v_empty(s).init(4 * CONSUMERS);
            }
            s += 1;
        }
        v_clean.init(4 * CONSUMERS);
        let row0 = if VARLEN { h * p.seq_q as usize + q_first } else { (b * p.heads as usize + h) * seq_q };
        seqs.store(0, row0 as u32);
        seqs.store(1, seq_q as u32);
        seqs.store(2, tiles);
        fence_mbarrier_init();
    }
    sync_threads();

    if wg == CONSUMERS {
        setmaxnreg_dec(cfg.regs(VARLEN).producer);
        if tid.is_multiple_of(128) {
            let map = |i: u64| TensorMap { addr: p.maps + i * TENSOR_MAP_BYTES as u64 };
            let (q_map, k_map, v_map) = (map(0), map(1), map(2));
            fence_tensormap_acquire(q_map);
            fence_tensormap_acquire(k_map);
            fence_tensormap_acquire(v_map);
            let (q_plane, kv_plane) = if VARLEN {
                (h as i32, kvh as i32)
            } else {
                ((b * p.heads as usize + h) as i32, (b * p.kv_heads as usize + kvh) as i32)
            };
            q_full.arrive_expect_tx(cfg.q_bytes());
            let mut pn = 0;
            while pn < cfg.panels() {
                tma_load_3d(cfg.q_offset(pn), q_map, 64 * pn as i32, (q_first + q0) as i32, q_plane, q_full);
                pn += 1;
            }
            let mut j = 0;
            while j < tiles {
                let (s, round) = (j % cfg.stages, j / cfg.stages);
                empty(s).wait((round & 1) ^ 1);
                let row = (k_first + (j * bn) as usize) as i32;
                k_full(s).arrive_expect_tx(cfg.kv_bytes());
                pn = 0;
                while pn < cfg.panels() {
                    tma_load_3d(cfg.k_offset(s, pn), k_map, 64 * pn as i32, row, kv_plane, k_full(s));
                    pn += 1;
                }
                if PINGPONG {
                    // v04 frees a stage's K a turn before its V.
                    v_empty(s).wait((round & 1) ^ 1);
                }
                v_full(s).arrive_expect_tx(cfg.kv_bytes());
                pn = 0;
                while pn < cfg.panels() {
                    tma_load_3d(cfg.v_offset(s, pn), v_map, 64 * pn as i32, row, kv_plane, v_full(s));
                    pn += 1;
                }
                j += 1;
            }
        }
        return;
    }

    setmaxnreg_inc(cfg.regs(VARLEN).consumer);
    let (warp, lane) = ((tid % 128) / WARP_SIZE, tid % WARP_SIZE);
    let (g, t) = (lane / 4, lane % 4);
    // The warpgroup's rows, and the keys its last row sees: tiles from there on are skipped
    // by the whole warpgroup (wgmma is warpgroup-wide, so the test must be uniform across it).
    let g0 = q0 + 64 * wg as usize;
    let wg_max = if g0 < seq_q { limit((g0 + 63).min(seq_q - 1)) } else { 0 };
    // The warp's: tiles below the keys its first row sees are unmasked for the whole warp.
    let wq0 = g0 + 16 * warp as usize;
    let warp_min = if wq0 < seq_q { limit(wq0) } else { 0 };
    // Key counts fit i32 (the launcher checks lengths against TMA's i32 coordinates); 32-bit
    // limits keep two registers free at head dim 256, where the consumers are at their cap.
    let row_lim = [limit(wq0 + g as usize) as i32, limit(wq0 + g as usize + 8) as i32];
    let flip = p.scale_log2 < 0.0;
    let c = p.scale_log2.abs();
    // Descriptors: Q rows of this warpgroup (K-major), K as stored (K-major), V as stored
    // (MN-major, the next 64 head dims one panel on).
    let q_desc = |kk: u32| {
        let (pn, part) = (kk / 4, kk % 4);
        SmemDesc::new(smem_addr(cfg.q_offset(pn) + wg * 64 * PANEL_ROW), 16, 1024, Swizzle::B128).advance(32 * part)
    };
    let k_desc = |s: u32, kk: u32| {
        let (pn, part) = (kk / 4, kk % 4);
        SmemDesc::new(smem_addr(cfg.k_offset(s, pn)), 16, 1024, Swizzle::B128).advance(32 * part)
    };
    let v_desc = |s: u32, kk: u32| {
        SmemDesc::new(smem_addr(cfg.v_offset(s, 0)), bn * PANEL_ROW, 1024, Swizzle::B128).advance(2048 * kk)
    };

    let mut st = RowState { m: [f32::NEG_INFINITY; 2], l: [0.0; 2] };
    let mut o = H::Acc::ZERO;
    // Varlen: zeroes the V rows of the block's last tile (stage `s`, keys from `start`) that
    // lie past the sequence, once, before any `P V` reads them (see the module docs).
    let clean_tail = always_inline!(|s: u32, round: u32, start: usize| {
        if VARLEN && start + bn as usize > seq_k {
            // The tile runs past the sequence's keys into the next sequence's rows (the map
            // zero-fills only past the packed total). Their scores are masked, but `p = 0`
            // times another sequence's NaN would still be NaN: zero those V rows first. Only
            // the block's last tile can end past `seq_k`, so this is block-uniform and once.
            v_full(s).wait(round & 1);
            if BUG != BUG_TAIL_NOT_ZEROED {
                zero_v_rows::<H>(s, seq_k - start, tid);
            }
            fence_proxy_async();
            sync_warp(FULL_MASK);
            if lane == 0 {
                v_clean.arrive();
            }
            v_clean.wait(0);
        }
    });
    // S = Q K^T over stage `s`'s keys: D / 16 k-steps over the head dims (issued, not waited).
    let issue_s = always_inline!(|sacc: &mut H::S, s: u32| {
        unroll16!(kk < (H::TILING.d / 16) as usize => {
            let kk = kk as u32;
            sacc.mma::<T, 0, 0>(q_desc(kk), k_desc(s, kk), kk > 0);
        });
    });
    // The online softmax of one S tile (keys from `start`): P in place of S, the running
    // max and sum updated; returns the factor O's rows must be rescaled by.
    let softmax = always_inline!(|sacc: &H::S, st: &mut RowState, start: usize| -> ([[f32; 4]; NS], [f32; 2]) {
        let sacc = sacc.as_ref();
        let mut sf = [[0.0f32; 4]; NS];
        unroll16!(i < NS => {
            sf[i] = [sacc[4 * i], sacc[4 * i + 1], sacc[4 * i + 2], sacc[4 * i + 3]];
            if flip {
                sf[i] = [-sf[i][0], -sf[i][1], -sf[i][2], -sf[i][3]];
            }
        });
        let corr = if start + (bn as usize) > warp_min {
            let lim = [row_lim[0] - start as i32, row_lim[1] - start as i32];
            softmax_tile::<true, NS>(&mut sf, st, c, lim, t)
        } else {
            softmax_tile::<false, NS>(&mut sf, st, c, [0, 0], t)
        };
        (sf, corr)
    });
    // P's accumulator n8 tiles 2 kk and 2 kk + 1 are the A fragment of the `P V` k-step over
    // keys 16 kk .. (the array has `NS` entries because stable Rust cannot size it by
    // `NS / 2`; the second half is never touched and takes no registers).
    let pack = always_inline!(|sf: &[[f32; 4]; NS]| -> [[u32; 4]; NS] {
        let mut pa = [[0u32; 4]; NS];
        unroll16!(kk < NS / 2 => {
            pa[kk] = mma::a_from_c::<T>(sf[2 * kk], sf[2 * kk + 1]);
            if BUG == BUG_SWAPPED_P {
                pa[kk].swap(1, 2);
            }
        });
        pa
    });
    // O += P V over stage `s`'s values (issued, not waited).
    let issue_pv = always_inline!(|o: &mut H::Acc, pa: &[[u32; 4]; NS], s: u32| {
        unroll16!(kk < NS / 2 => {
            o.mma_rs::<T, 1>(pa[kk], v_desc(s, kk as u32), true);
        });
    });
    q_full.wait(0);
    if PINGPONG {
        super::v04_pingpong::main_loop::<H, NS>(
            wg,
            tiles,
            wg_max,
            lane,
            &mut o,
            &mut st,
            |s, round, start| {
                k_full(s).wait(round & 1);
                clean_tail(s, round, start)
            },
            |s, round| v_full(s).wait(round & 1),
            |s| empty(s).arrive(),
            |s| v_empty(s).arrive(),
            issue_s,
            softmax,
            pack,
            issue_pv,
        );
    }
    // v03's loop: one wgmma group at a time, each waited for before the next step.
    let mut j = 0;
    while !PINGPONG && j < seqs.load(2) {
        let (s, round) = (j % cfg.stages, j / cfg.stages);
        let start = (j * bn) as usize;
        // Every consumer waits for the tile, even one whose rows all skip it: its arrival on
        // `empty[s]` below must not count toward a phase of a round the other consumer has
        // not finished (waiting here keeps it within the round the producer has filled).
        k_full(s).wait(round & 1);
        clean_tail(s, round, start);
        if start < wg_max {
            let mut sacc = H::S::ZERO;
            wgmma_fence();
            issue_s(&mut sacc, s);
            wgmma_commit();
            wgmma_wait::<0>();
            let (sf, corr) = softmax(&sacc, &mut st, start);
            rescale::<H>(&mut o, corr);
            // All `NS / 2` A fragments stay in registers until the `P V` group completes.
            let pa = pack(&sf);
            v_full(s).wait(round & 1);
            wgmma_fence();
            issue_pv(&mut o, &pa, s);
            wgmma_commit();
            wgmma_wait::<0>();
        }
        // The stage is free: one arrival per consumer warp (also for a skipped tile).
        if lane == 0 {
            empty(s).arrive();
        }
        j += 1;
    }

    // Epilogue: normalize and store each thread's pairs (rows g, g + 8; columns 8 i + 2 t).
    let l = [mma::quad_sum(st.l[0]), mma::quad_sum(st.l[1])];
    let inv = [if l[0] > 0.0 { 1.0 / l[0] } else { 0.0 }, if l[1] > 0.0 { 1.0 / l[1] } else { 0.0 }];
    // The first output row and the query count, from their shared copies (see above).
    let (q_row0, seq_q) = (seqs.load(0) as usize, seqs.load(1) as usize);
    let o = o.as_ref();
    unroll16!(r < 2 => {
        let qi = wq0 + g as usize + 8 * r;
        if qi < seq_q {
            let base = (q_row0 + qi) * d + 2 * t as usize;
            unroll16!(hi < 2 => {
                unroll16!(lo < 16 => {
                    let i = 16 * hi + lo;
                    if 4 * i < o.len() {
                        let w = mma::pack_f32x2::<T>(o[4 * i + 2 * r] * inv[r], o[4 * i + 2 * r + 1] * inv[r]);
                        p.o.store(base + 8 * i, T::from_bits16(w as u16));
                        p.o.store(base + 8 * i + 1, T::from_bits16((w >> 16) as u16));
                    }
                });
            });
            if t == 0 {
                let lse = if l[r] > 0.0 {
                    (st.m[r] + math::log2_approx(l[r])) * core::f32::consts::LN_2
                } else {
                    f32::NEG_INFINITY
                };
                p.lse.store(q_row0 + qi, lse);
            }
        }
    });
}

/// Multiplies O's rows `g` and `g + 8` by `corr[0]` and `corr[1]` (the online softmax's
/// rescale when a row's running max grows).
#[inline(always)]
pub(super) fn rescale<H: HeadDim>(o: &mut H::Acc, corr: [f32; 2]) {
    let acc = o.as_mut();
    unroll16!(hi < 2 => {
        unroll16!(i < 16 => {
            unroll16!(e < 4 => {
                let at = 4 * (16 * hi + i) + e;
                if at < acc.len() {
                    acc[at] *= corr[e / 2];
                }
            });
        });
    });
}

/// Zeroes rows `from .. bn` of stage `s`'s V tile (every panel), shared among the consumer
/// threads (`ctid` in `0 .. 128 CONSUMERS`). A swizzled row is its own 128 bytes (the swizzle
/// permutes 16-byte chunks within a row), so whole rows are zeroed without unswizzling. Every
/// chunk of the tile is visited with constant strides and the rows before `from` skipped, so
/// there is no runtime divisor (and no panic path: a call would keep ptxas from giving the
/// consumers their `setmaxnreg` registers).
#[inline(always)]
#[track_caller]
fn zero_v_rows<H: HeadDim>(s: u32, from: usize, ctid: u32) {
    const CHUNKS_PER_ROW: u32 = PANEL_ROW / 16;
    const THREADS: u32 = 128 * CONSUMERS;
    let cfg = const { H::TILING };
    // Stage 0's V tile onwards, as 16-byte chunks (stage s starts 2 s K/V tiles on).
    let v = const {
        let t = H::TILING;
        Shared::<Bytes16>::at(t.v_offset(0, 0), (t.v_offset(t.stages - 1, 0) + t.kv_bytes() - t.v_offset(0, 0)) / 16)
    };
    let stage = s * (cfg.v_offset(1, 0) - cfg.v_offset(0, 0)) / 16;
    const { assert!((H::TILING.panels() * H::TILING.bn * CHUNKS_PER_ROW).is_multiple_of(THREADS)) };
    unroll16!(it < (H::TILING.panels() * H::TILING.bn * CHUNKS_PER_ROW / THREADS) as usize => {
        let i = it as u32 * THREADS + ctid;
        if (i / CHUNKS_PER_ROW) % cfg.bn >= from as u32 {
            v.store_chunk::<u32, 4>(stage + i, [0; 4]);
        }
    });
}
