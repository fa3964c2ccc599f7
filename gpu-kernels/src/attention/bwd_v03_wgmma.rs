//! Backward v03: FlashAttention-3's dK/dV pass on Hopper's warpgroup MMA (sm_90a). A
//! producer warpgroup loads a block's K and V tiles once and streams Q and dO tiles into a
//! 2-stage mbarrier ring by TMA; two consumer warpgroups, 64 keys each, compute the five
//! products of [`super::bwd_v02_mma`] with `wgmma`: `S^T = K Q^T` and `dP^T = V dO^T` from
//! shared memory (both operands K-major), `dV += P^T dO` and `dK += dS^T Q` with `P^T` and
//! `dS^T` straight from the accumulators as register A fragments (dO and Q MN-major), and
//! `dQ = dS K` from `dS^T` written to shared memory (A MN-major, K MN-major), added to the
//! f32 dQ accumulator by paired atomic reductions. Not measured yet (no GPU run).
//!
//! # The floor, before any tuning
//! The backward is 2.5x the forward's FLOPs (five products of the size of the forward's
//! two): `b4 h16 s2048 d128` non-causal is 344 GFLOP, 0.35 ms at the H200's 990 TFLOP/s
//! dense bf16. Each score needs one `ex2` (P is recomputed), as in the forward, but against
//! 2.5x the matrix work, so the exponentials are a smaller share than in the forward (about
//! 70 us of 350 at d = 128). FlashAttention-3 reports its backward at 1.5-1.75x
//! FlashAttention-2's on H100; ours is here to take the products off `mma.sync`, whose rate
//! on Hopper is about two thirds of wgmma's.
//!
//! # Shape (FlashAttention-3's: computed transposed, keys as rows)
//! Block `(x, kvh, b)` owns keys `BK x .. BK x + BK - 1` ([`BK`] = 128) of kv head `kvh` of
//! batch `b` and walks the query tiles of every query head of its group (GQA/MQA) from the
//! first query the causal mask lets see its first key, as one sequence of tiles for the ring
//! (as [`super::bwd_v02_mma::dkdv`]). Consumer warpgroup `w` owns keys `64 w ..`: one m64 row
//! block of `S^T` and `dP^T` (m64 n`bq` k16 over the head dims), of `dV` and `dK` (m64 n`D`,
//! k16 over the tile's queries) held in registers for the whole walk. Keys as rows make
//! `P^T` and `dS^T` land as accumulators whose n8 tiles `2 kk`, `2 kk + 1` are exactly the
//! register A fragment of k-step `kk` of the next product, so neither goes through shared
//! memory for `dV` and `dK` (FlashAttention-3's `SdP_swapAB`).
//!
//! # dQ
//! `dQ` of a tile is `bq x D` and needs all 128 keys: each consumer writes its 64 rows of
//! `dS^T` (16-bit) into shared memory (128-byte swizzled 64-query panels, `BK` rows each),
//! fences them for the async proxy, and both meet on the named barrier [`DS_READY`]. Then
//! each computes one m64n64 quarter-or-half with k = 128 keys: at head dim 64 (`bq` = 128)
//! warpgroup `w` takes queries `64 w ..` and all 64 head dims, at head dim 128 (`bq` = 64)
//! all 64 queries and head dims `64 w ..`. `dS^T` is double-buffered: a warpgroup writes
//! buffer `j % 2` again only at tile `j + 2`, after passing tile `j + 1`'s barrier, which the
//! other warpgroup reaches only after its tile-`j` `dQ` wgmma completed. The f32 products
//! (times `scale`) go to the accumulator by 8-byte `red.global.add.v2.f32` reductions, a row's
//! two neighbouring columns each (16 per thread per tile, half the scalar atomics), then
//! `dq_convert` (v01's) rounds them to the input type. With a deterministic dQ the launcher
//! runs [`super::bwd_v02_mma::dq`] instead and this kernel skips the dQ step.
//!
//! # Pipeline
//! `kv_full`: K and V, once. Tile `j` goes to stage `s = j % 2` (round `r = j / 2`): the
//! producer waits until `empty[s]` completed phase `r - 1`, then loads Q and dO (one barrier,
//! `qdo_full[s]`). A consumer loads its lanes' `lse` and `D` of the tile from global memory
//! first (below), waits `qdo_full[s]`, issues `S^T` and `dP^T` as two groups, stages `lse`
//! and `D`, waits for the first group and computes `P^T` while `dP^T` runs, then `dS^T`;
//! writes its `dS^T` rows (dQ, below), issues `dV` and `dK` (one group), then the dQ group,
//! waits for everything, and each of its warps arrives on `empty[s]`. `dS^T` goes to shared
//! memory before the `dV`/`dK` issue because ptxas waits for a wgmma group whose register A
//! a later instruction reads (the stores read `dS^T`'s packed registers).
//!
//! # lse and D
//! Column `c` of `S^T` (a query) needs `lse_c` and `D_c`. Lane `l` loads those of columns
//! `64 m + 2 l`, `64 m + 2 l + 1` (`m < bq / 64`) from global memory before the tile's
//! wait, and writes them, after issuing `S^T` and `dP^T`, into its warp's own staging area
//! in shared memory, between two `sync_warp`s (the previous tile's reads are done; the
//! writes are seen by the warp); each thread then reads its columns `8 i + 2 t`, `+ 1`. A
//! warp-private copy needs no block barrier (and the emulator's race check orders it by the
//! `sync_warp`s); holding the values in registers instead (shuffled per column) left head dim
//! 64 eight registers short: ptxas spilled 8-20 bytes. Queries past `seq_q` get
//! `lse = +inf` (so `P = 0`) and `D = 0`: their Q and dO rows are TMA zero fill.
//!
//! # Masking
//! Causal (bottom-right aligned) and keys past `seq_k` (K and V rows of zero fill: their
//! `P^T` would be `2^(-lse)`, finite for any sane `lse` but not for every one): per element,
//! only in the tiles that cross a warp's diagonal or its sequence end ([`super::bwd_v02_mma`]'s
//! `col_min` test). A tile whose keys a whole warpgroup never sees is still computed (its P
//! is zero); skipping it would save work on the causal diagonal only.
//!
//! # Registers
//! Per consumer thread: dK and dV (`D / 2` f32 each), `S^T` and `dP^T` (`bq / 2` each), the
//! packed `P^T` and `dS^T` (`bq / 4` b32 each, live until their wgmmas complete) and the dQ
//! accumulator (32). Head dim 128 with 64-query tiles: 64 + 64 + 32 + 32 at the peak; head
//! dim 64 with 128-query tiles: 32 + 32 + 64 + 64. The consumers take 240 registers
//! (`setmaxnreg`), the producer keeps 24 (FlashAttention-3's split for this shape).
//!
//! # Shared layout (1024-byte aligned, 128-byte swizzle, 64-column panels)
//! K, V: `D / 64` panels of `BK` rows. Per stage Q, dO: `D / 64` panels of `bq` rows. Two
//! `dS^T` buffers: `bq / 64` panels of `BK` rows (keys), 64 queries each. Per consumer warp
//! `2 bq` f32 (`lse`, `D`). Then the mbarriers and 16 bytes of sequence offsets (varlen). 168
//! KB at head dim 64, 164 KB at 128.
//!
//! # Register pressure (ptxas 12.9, sm_90a)
//! The first build spilled 52-136 bytes: LLVM hoisted every loop-invariant wgmma descriptor
//! (K's and V's, dQ's) out of the loop, two registers each for the whole walk. The loop now
//! derives them from an opaque zero defined in each iteration, so each is recomputed (a few
//! integer instructions) where it is used. With that and the staged `lse`/`D`, no entry
//! spills or keeps a stack frame (`tests/ptxas.rs`).
//!
//! The varlen entries first spilled 20-84 bytes: their offsets and lengths come from global
//! loads, which ptxas cannot rematerialize as it does the dense kernel's parameters, so every
//! value derived from them (the walk, the key masks, the 64-bit key index) stayed live, some
//! across `setmaxnreg`, where ptxas spilled them. Now the early-leave test runs on opaque
//! copies of the block index, the four values are staged in shared memory and read where used
//! (behind the loop's opaque zero), the walk is recomputed per tile and `mask_until` too
//! (from the held `key_diag`): no varlen entry spills either.
//!
//! # Variable length (`VARLEN`)
//! Sequence `b`'s lengths and first tokens come from `cu_seqlens_q/k` (layout `[heads,
//! total, D]`); the grid covers the longest sequence and blocks past their own keys leave
//! before the first barrier. The launcher encodes four tensor maps per sequence (Q, K, V, dO
//! at `4 b ..`), each over that sequence's tokens only (base at its first token, rows = its
//! length, one plane per head, the plane pitch the packed total): a box that runs past the
//! sequence reads TMA's zero fill, exactly as a dense batch's last tile does, never the next
//! sequence's rows (whose NaN would reach this one's gradients through `0 * NaN` in
//! `dV += P^T dO` and the others). So the dense kernel's masking serves unchanged, in
//! sequence coordinates. The cost is `4 batch` map encodings on the host per call (and an
//! upload of them when they exceed the launch constants' 4 KB, past 8 sequences).
//! Thread 0 stages the sequence's offsets and lengths in shared memory; each role reads them
//! where it uses them (see Register pressure).
//!
//! # Scope
//! Head dims 64 and 128, bf16/f16, dense and variable-length batches. Head dim 256 runs
//! [`super::bwd_v02_mma`] (the launcher picks the highest version that has the kernel).
//!
//! # Safety
//! The launcher guarantees what [`super::bwd_v02_mma::dkdv`] needs (shapes, `d = D`,
//! `heads % kv_heads == 0`, scratch of `D` and, with `atomic_dq`, the zeroed dQ accumulator),
//! the grid `(ceil(seq_k / BK), kv_heads, batch)` (varlen: the longest `seq_k`) with this
//! tiling's threads and shared bytes, fills `maps` with the Q, K, V and dO tensor maps (rank 3
//! over (head dims, sequence, batch x heads), 128-byte swizzle, boxes `64 x bq` and `64 x BK`;
//! varlen: four per sequence, as above), and launches only where the sm_90a PTX is loaded.

use super::AttentionBwdParams;
use super::v03_wgmma::RegSplit;
use crate::device::hopper::{
    Mbarrier, SmemDesc, Swizzle, TENSOR_MAP_BYTES, TensorMap, WgmmaAccumulator, fence_mbarrier_init, fence_proxy_async,
    fence_tensormap_acquire, setmaxnreg_dec, setmaxnreg_inc, smem_addr, swizzle_addr, tma_load_3d, wgmma_commit,
    wgmma_fence, wgmma_fence_operands, wgmma_wait,
};
use crate::device::mma::{self, MmaInput};
use crate::device::thread::{NamedBarrier, block_idx_x, block_idx_y, block_idx_z, sync_threads, thread_idx_x};
use crate::device::warp::{FULL_MASK, sync_warp};
use crate::device::{Shared, WARP_SIZE, hint, math};

/// Consumer warpgroups per block (64 keys each).
pub const CONSUMERS: u32 = 2;
/// Keys per block.
pub const BK: u32 = 64 * CONSUMERS;
/// The named barrier the consumers meet on once both halves of a tile's `dS^T` are written.
pub const DS_READY: u32 = 1;
/// Bytes of one 128-byte-swizzled row: 64 16-bit values.
const PANEL_ROW: u32 = 128;
const _: () = assert!(BK <= 256, "TMA boxes are at most 256 rows");

/// The tile configuration of one head dimension; the launcher reads it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BwdWgmmaTiling {
    pub d: u32,
    /// Queries per tile: the N of `S^T` and `dP^T`, the K of `dV += P^T dO`.
    pub bq: u32,
    pub regs: RegSplit,
}

impl BwdWgmmaTiling {
    pub const fn threads(self) -> u32 {
        (CONSUMERS + 1) * 128
    }
    /// 64-column panels of a K, V, Q or dO tile.
    pub const fn panels(self) -> u32 {
        self.d / 64
    }
    /// Bytes of the K tile (and of the V tile).
    pub const fn kv_bytes(self) -> u32 {
        BK * self.d * 2
    }
    /// Bytes of one Q tile (and of one dO tile).
    pub const fn qd_bytes(self) -> u32 {
        self.bq * self.d * 2
    }
    /// Bytes of one `dS^T` buffer.
    pub const fn ds_bytes(self) -> u32 {
        BK * self.bq * 2
    }
    /// Panel `p` of K, of V, of stage `s`'s Q and dO; buffer `u` of `dS^T`.
    pub const fn k_offset(self, p: u32) -> u32 {
        p * BK * PANEL_ROW
    }
    pub const fn v_offset(self, p: u32) -> u32 {
        self.kv_bytes() + p * BK * PANEL_ROW
    }
    pub const fn q_offset(self, s: u32, p: u32) -> u32 {
        2 * self.kv_bytes() + s * 2 * self.qd_bytes() + p * self.bq * PANEL_ROW
    }
    pub const fn do_offset(self, s: u32, p: u32) -> u32 {
        self.q_offset(s, p) + self.qd_bytes()
    }
    pub const fn ds_offset(self, u: u32) -> u32 {
        self.q_offset(2, 0) + u * self.ds_bytes()
    }
    /// Each consumer warp's staging of a tile's `lse` and `D` (`2 bq` f32).
    pub const fn stats_offset(self) -> u32 {
        self.ds_offset(2)
    }
    const fn bars(self) -> u32 {
        self.stats_offset() + 4 * CONSUMERS * 2 * self.bq * 4
    }
    pub const fn kv_full(self) -> u32 {
        self.bars()
    }
    pub const fn qdo_full(self, s: u32) -> u32 {
        self.bars() + 8 + 8 * s
    }
    pub const fn empty(self, s: u32) -> u32 {
        self.qdo_full(2) + 8 * s
    }
    /// Varlen: the block's sequence's first query, query count, first key and key count.
    pub const fn seq_info(self) -> u32 {
        self.empty(2)
    }
    pub const fn shared_bytes(self) -> u32 {
        self.seq_info() + 16
    }
    /// The TMA boxes, contiguous dimension first: Q and dO `64 x bq`, K and V `64 x BK`.
    pub const fn q_box(self) -> [u32; 3] {
        [64, self.bq, 1]
    }
    pub const fn kv_box(self) -> [u32; 3] {
        [64, BK, 1]
    }
    /// The dQ quarter of consumer `w`: its first query (a 64-query panel of `dS^T`) and its
    /// first head dim (a 64-column panel of K).
    pub const fn dq_part(self, w: u32) -> (u32, u32) {
        if self.bq == 128 { (64 * w, 0) } else { (0, 64 * w) }
    }
    pub const fn check(self) -> Self {
        assert!(self.d == 64 || self.d == 128, "head dims 64 and 128 (dK and dV of 256 would not fit the registers)");
        assert!(self.bq == 64 || self.bq == 128, "query tiles of 64 or 128 (one wgmma N, whole 64-query panels)");
        assert!((self.bq / 64) * (self.d / 64) == CONSUMERS, "the consumers split dQ into m64n64 parts");
        assert!(self.shared_bytes() <= 227 * 1024, "Hopper's 227 KB per block");
        self.regs.check(self.threads());
        self
    }
}

/// FlashAttention-3's register split for two MMA warpgroups in the backward.
const SPLIT_24_240: RegSplit = RegSplit { producer: 24, consumer: 240 };

pub const TILING_D64: BwdWgmmaTiling = BwdWgmmaTiling { d: 64, bq: 128, regs: SPLIT_24_240 }.check();
pub const TILING_D128: BwdWgmmaTiling = BwdWgmmaTiling { d: 128, bq: 64, regs: SPLIT_24_240 }.check();

/// A head dim of this kernel: its tiling, the dK/dV accumulator (m64n`D`k16) and the `S^T`
/// accumulator (m64n`bq`k16).
pub trait BwdHeadDim {
    const TILING: BwdWgmmaTiling;
    type Acc: WgmmaAccumulator;
    type S: WgmmaAccumulator;
}

pub struct D64;
impl BwdHeadDim for D64 {
    const TILING: BwdWgmmaTiling = TILING_D64;
    type Acc = [f32; 32];
    type S = [f32; 64];
}

pub struct D128;
impl BwdHeadDim for D128 {
    const TILING: BwdWgmmaTiling = TILING_D128;
    type Acc = [f32; 64];
    type S = [f32; 32];
}

/// The correct kernel.
pub const NO_BUG: u32 = 0;
/// Deliberately wrong (tests only): `dS^T` written to shared memory without the 128-byte
/// swizzle the dQ wgmma's descriptor names, so dQ reads a permuted `dS`.
pub const BUG_DS_UNSWIZZLED: u32 = 1;

/// dK and dV of one key block (and, with `atomic_dq`, its dQ contributions) for head dim
/// `H`; `NQ` is the n8 tiles of a query tile (`bq / 8`; a parameter because stable Rust
/// cannot size an array by `H::TILING.bq`). `BUG`: [`NO_BUG`] or a deliberate bug.
#[inline(always)]
pub fn dkdv<T: MmaInput, H: BwdHeadDim, const NQ: usize, const BUG: u32, const VARLEN: bool>(p: AttentionBwdParams<T>) {
    let cfg = const { H::TILING };
    const { assert!(<H::Acc as WgmmaAccumulator>::N == H::TILING.d, "dK's and dV's wgmma N is the head dim") };
    const { assert!(<H::S as WgmmaAccumulator>::N == H::TILING.bq, "S^T's wgmma N is the query tile") };
    const { assert!(NQ == (H::TILING.bq / 8) as usize, "NQ is the query tile's n8 tiles") };
    let (bq, d) = (cfg.bq as usize, cfg.d as usize);
    let tid = thread_idx_x();
    let wg = tid / 128;
    let (k0, kvh, b) = (block_idx_x() as usize * BK as usize, block_idx_y() as usize, block_idx_z() as usize);
    // Sequence b's first query, query count, first key and key count. Varlen stages them in
    // shared memory (thread 0, with the barriers) and each role reads them where it uses them
    // (`z`: an opaque zero), rather than holding them across `setmaxnreg` and through the
    // loop: held, they cost the consumers 20-80 bytes of spills (ptxas 12.9).
    let info = Shared::<u32>::at(cfg.seq_info(), 4);
    let seq_at = |z: u32| -> (usize, usize, usize, usize) {
        if VARLEN {
            let at = |i: u32| info.load(z + i) as usize;
            (at(0), at(1), at(2), at(3))
        } else {
            (0, p.seq_q as usize, 0, p.seq_k as usize)
        }
    };
    // The grid covers the longest sequence; a block past its own leaves before any barrier.
    // From opaque copies of the block index: shared with the roles, the 64-bit key index and
    // offsets' address would stay live across `setmaxnreg`, where ptxas spills them.
    if VARLEN {
        let (x, seq) = (hint::opaque_u32(block_idx_x()), hint::opaque_u32(block_idx_z()));
        if (x * BK) as usize >= super::bwd_v01_simt::varlen_seq(&p, seq as usize).3 {
            return;
        }
    }
    let (heads, kv_heads) = (p.heads as usize, p.kv_heads as usize);
    // No division may panic (a call keeps ptxas from giving the consumers their `setmaxnreg`
    // registers): the launcher guarantees kv_heads >= 1, and per_head >= 1 whenever a tile
    // exists.
    let group = heads / kv_heads.max(1);
    let causal = p.causal != 0;
    // The walk: from the first query that sees key k0, `per_head` query tiles for each query
    // head of the group (every head walks the same ones), `tiles` in all.
    let walk = |(_, seq_q, _, seq_k): (usize, usize, usize, usize)| -> (usize, usize, u32) {
        let i_first = if causal { (k0 + seq_q).saturating_sub(seq_k) } else { 0 };
        let per_head = seq_q.saturating_sub(i_first).div_ceil(bq).max(1);
        (i_first, per_head, if i_first < seq_q { (group * per_head) as u32 } else { 0 })
    };
    // Tile j of the walk: its query head and first query.
    let tile_at = |j: u32, (i_first, per_head, _): (usize, usize, u32)| -> (usize, usize) {
        (kvh * group + j as usize / per_head, i_first + (j as usize % per_head) * bq)
    };

    let kv_full = Mbarrier::at(cfg.kv_full());
    let qdo_full = |s: u32| Mbarrier::at(cfg.qdo_full(s));
    let empty = |s: u32| Mbarrier::at(cfg.empty(s));
    if tid == 0 {
        kv_full.init(1);
        let mut s = 0;
        while s < 2 {
            qdo_full(s).init(1);
            empty(s).init(4 * CONSUMERS);
            s += 1;
        }
        fence_mbarrier_init();
        if VARLEN {
            let (qs, seq_q, ks, seq_k) = super::bwd_v01_simt::varlen_seq(&p, b);
            let mut i = 0;
            while i < 4 {
                info.store(i, [qs, seq_q, ks, seq_k][i as usize] as u32);
                i += 1;
            }
        }
    }
    sync_threads();

    if wg == CONSUMERS {
        setmaxnreg_dec(cfg.regs.producer);
        let plan = walk(seq_at(hint::opaque_u32(0)));
        let tiles = plan.2;
        if tid.is_multiple_of(128) && tiles > 0 {
            // Varlen: four maps per sequence, each over that sequence's tokens only.
            let first = if VARLEN { 4 * b as u64 } else { 0 };
            let map = |i: u64| TensorMap { addr: p.maps + (first + i) * TENSOR_MAP_BYTES as u64 };
            let (q_map, k_map, v_map, do_map) = (map(0), map(1), map(2), map(3));
            fence_tensormap_acquire(q_map);
            fence_tensormap_acquire(k_map);
            fence_tensormap_acquire(v_map);
            fence_tensormap_acquire(do_map);
            let kv_plane = if VARLEN { kvh as i32 } else { (b * kv_heads + kvh) as i32 };
            kv_full.arrive_expect_tx(2 * cfg.kv_bytes());
            let mut pn = 0;
            while pn < cfg.panels() {
                tma_load_3d(cfg.k_offset(pn), k_map, 64 * pn as i32, k0 as i32, kv_plane, kv_full);
                tma_load_3d(cfg.v_offset(pn), v_map, 64 * pn as i32, k0 as i32, kv_plane, kv_full);
                pn += 1;
            }
            let mut j = 0;
            while j < tiles {
                let (s, round) = (j % 2, j / 2);
                empty(s).wait((round & 1) ^ 1);
                let (h, i0) = tile_at(j, plan);
                // Varlen: sequence b's maps, one plane per head.
                let plane = if VARLEN { h } else { b * heads + h };
                qdo_full(s).arrive_expect_tx(2 * cfg.qd_bytes());
                pn = 0;
                while pn < cfg.panels() {
                    let (x, row) = (64 * pn as i32, i0 as i32);
                    tma_load_3d(cfg.q_offset(s, pn), q_map, x, row, plane as i32, qdo_full(s));
                    tma_load_3d(cfg.do_offset(s, pn), do_map, x, row, plane as i32, qdo_full(s));
                    pn += 1;
                }
                j += 1;
            }
        }
        return;
    }

    setmaxnreg_inc(cfg.regs.consumer);
    let (warp, lane) = ((tid % 128) / WARP_SIZE, tid % WARP_SIZE);
    let (g, t) = (lane / 4, lane % 4);
    // This warp's first key; each lane's keys are rows g and g + 8 of its 16.
    let wk0 = k0 + 64 * wg as usize + 16 * warp as usize;
    // The first query each of the lane's keys is visible to (causal), or none (past seq_k),
    // and the first query from which the warp's tiles need no mask: `([diag; 2], until)`.
    // Some key is past seq_k, or some query of the tile does not yet see the warp's last key.
    // 32-bit: the launcher keeps lengths below 2^31 (TMA's i32 coordinates), so `seq_q - (seq_k
    // - key)` cannot overflow; the `+-2^30` sentinels stay clear of every real diagonal below
    // 2^30 tokens, which memory implies (Q alone would be 128 GiB at d = 64).
    let key_mask = |(_, seq_q, _, seq_k): (usize, usize, usize, usize)| -> ([i32; 2], i32) {
        let diag = |key: usize| -> i32 {
            if key >= seq_k {
                i32::MAX / 2
            } else if causal {
                seq_q as i32 - (seq_k - key) as i32
            } else {
                i32::MIN / 2
            }
        };
        let key_diag = [diag(wk0 + g as usize), diag(wk0 + g as usize + 8)];
        (key_diag, if wk0 + 16 > seq_k { i32::MAX } else { key_diag[0].max(key_diag[1]) })
    };
    let c = p.scale_log2;
    let atomic = p.atomic_dq != 0;
    // The dQ accumulator follows the D rows in scratch, from an even word: the paired
    // reductions below need it.
    let dq_base = p.dq_accum_start(VARLEN);
    let first = seq_at(hint::opaque_u32(0));
    let (tiles, (key_diag, _)) = (walk(first).2, key_mask(first));
    let (dq_q0, dq_d0) = cfg.dq_part(wg);

    // Descriptors, from the shared byte `z` + offset (`z` is 0, see the loop). K-major: K and
    // V rows of this warpgroup (A), stage s's Q and dO (B).
    let kmaj =
        |z: u32, panel: u32, part: u32| SmemDesc::new(smem_addr(z + panel), 16, 1024, Swizzle::B128).advance(32 * part);
    let k_desc = |z: u32, kk: u32| kmaj(z, cfg.k_offset(kk / 4) + 64 * wg * PANEL_ROW, kk % 4);
    let v_desc = |z: u32, kk: u32| kmaj(z, cfg.v_offset(kk / 4) + 64 * wg * PANEL_ROW, kk % 4);
    let q_desc = |z: u32, s: u32, kk: u32| kmaj(z, cfg.q_offset(s, kk / 4), kk % 4);
    let do_desc = |z: u32, s: u32, kk: u32| kmaj(z, cfg.do_offset(s, kk / 4), kk % 4);
    // MN-major (the next 64 columns one panel on, a k-step of 16 rows 2048 bytes on): Q and
    // dO as the B of `dV`/`dK` (K = queries), dS^T as the A of dQ (M = queries, K = keys),
    // K as its B (K = keys).
    let mn = |z: u32, offset: u32, panel: u32, kk: u32| {
        SmemDesc::new(smem_addr(z + offset), panel, 1024, Swizzle::B128).advance(2048 * kk)
    };
    let q_mn = |z: u32, s: u32, kk: u32| mn(z, cfg.q_offset(s, 0), cfg.bq * PANEL_ROW, kk);
    let do_mn = |z: u32, s: u32, kk: u32| mn(z, cfg.do_offset(s, 0), cfg.bq * PANEL_ROW, kk);
    let ds_mn = |z: u32, u: u32, kk: u32| mn(z, cfg.ds_offset(u) + dq_q0 / 64 * BK * PANEL_ROW, BK * PANEL_ROW, kk);
    let kt_mn = |z: u32, kk: u32| mn(z, cfg.k_offset(dq_d0 / 64), BK * PANEL_ROW, kk);
    let ds_words = Shared::<u32>::at(cfg.ds_offset(0), 2 * cfg.ds_bytes() / 4);
    let ds_ready = NamedBarrier::new(DS_READY, CONSUMERS * 128);
    // This warp's staging of a tile's lse (base 2) then D, `bq` each.
    let stats = Shared::<f32>::at(cfg.stats_offset() + (tid / WARP_SIZE) * 2 * cfg.bq * 4, 2 * cfg.bq);

    let mut dk = H::Acc::ZERO;
    let mut dv = H::Acc::ZERO;
    if tiles > 0 {
        kv_full.wait(0);
    }
    let mut j = 0;
    while j < tiles {
        let (s, round) = (j % 2, j / 2);
        // 0, but opaque and defined in the loop: the descriptors are recomputed from it in
        // each iteration (a few integer ops each) instead of being hoisted out of the loop,
        // where each would hold two registers for the whole walk (ptxas spilled them).
        let z = hint::opaque_u32(j).wrapping_sub(j);
        let seq = seq_at(z);
        let (h, i0) = tile_at(j, walk(seq));
        // Recomputed per tile (varlen: one register fewer held through the loop).
        let mask_until = key_mask(seq).1;
        let (qs, seq_q, _, _) = seq;
        // The tile's first row in the `[planes, rows]` lse, D and dQ.
        let q_row0 = if VARLEN { h * p.seq_q as usize + qs } else { (b * heads + h) * seq_q };
        // This lane's columns' lse (base 2; +inf where no key or past seq_q) and D.
        let mut lse2 = [0.0f32; 4];
        let mut dd = [0.0f32; 4];
        unroll16!(e < 4 => {
            let col = 64 * (e / 2) + 2 * lane as usize + e % 2;
            if col < bq {
                let i = i0 + col;
                (lse2[e], dd[e]) = if i < seq_q {
                    let lse = p.lse.load(q_row0 + i);
                    let l2 = if lse == f32::NEG_INFINITY { f32::INFINITY } else { lse * core::f32::consts::LOG2_E };
                    (l2, p.scratch.load(q_row0 + i))
                } else {
                    (f32::INFINITY, 0.0)
                };
            }
        });
        qdo_full(s).wait(round & 1);

        // S^T = K Q^T and dP^T = V dO^T, two groups.
        let mut st = H::S::ZERO;
        let mut dpt = H::S::ZERO;
        wgmma_fence();
        unroll16!(kk < (H::TILING.d / 16) as usize => {
            let kk = kk as u32;
            st.mma::<T, 0, 0>(k_desc(z, kk), q_desc(z, s, kk), kk > 0);
        });
        wgmma_commit();
        unroll16!(kk < (H::TILING.d / 16) as usize => {
            let kk = kk as u32;
            dpt.mma::<T, 0, 0>(v_desc(z, kk), do_desc(z, s, kk), kk > 0);
        });
        wgmma_commit();
        // The warp's copy of the tile's lse and D (module docs): the last tile's reads are
        // done (first sync), the stores are seen by every lane (second).
        sync_warp(FULL_MASK);
        unroll16!(e < 4 => {
            let col = (64 * (e / 2) + e % 2) as u32 + 2 * lane;
            if col < cfg.bq {
                stats.store(z + col, lse2[e]);
                stats.store(z + cfg.bq + col, dd[e]);
            }
        });
        sync_warp(FULL_MASK);
        wgmma_wait::<1>();
        wgmma_fence_operands(&mut st);
        // P^T in place of S^T, while dP^T runs.
        if (i0 as i32) < mask_until {
            let cm = |r: usize| (key_diag[r] - i0 as i32 - (2 * t) as i32).clamp(-1, bq as i32 + 1);
            probs::<H, NQ, true>(&mut st, c, stats, [cm(0), cm(1)], t + z);
        } else {
            probs::<H, NQ, false>(&mut st, c, stats, [0, 0], t + z);
        }
        wgmma_wait::<0>();
        wgmma_fence_operands(&mut dpt);
        // dS^T = P^T (dP^T - D) in place of dP^T.
        {
            let (pt, dst) = (st.as_ref(), dpt.as_mut());
            unroll16!(i < NQ => {
                let col = cfg.bq + 8 * i as u32 + 2 * t + z;
                let dcol = [stats.load(col), stats.load(col + 1)];
                unroll16!(e < 4 => {
                    dst[4 * i + e] = pt[4 * i + e] * (dst[4 * i + e] - dcol[e % 2]);
                });
            });
        }
        let pa = pack::<T, H, NQ>(&st);
        let dsa = pack::<T, H, NQ>(&dpt);
        let u = j % 2;
        if atomic {
            // dQ = dS K: this warpgroup's 64 rows of dS^T into buffer j % 2 (module docs),
            // stored before any wgmma reads `dsa` (ptxas waits for a wgmma group whose
            // register A a later instruction reads).
            let row = 64 * wg + 16 * warp + g;
            unroll16!(kk < NQ / 2 => {
                unroll16!(r < 4 => {
                    let col = 16 * kk as u32 + 2 * t + 8 * (r as u32 / 2);
                    let at = cfg.ds_offset(u) + col / 64 * BK * PANEL_ROW + (row + 8 * (r as u32 % 2)) * PANEL_ROW + 2 * (col % 64);
                    let at = if BUG == BUG_DS_UNSWIZZLED { at } else { swizzle_addr(at, Swizzle::B128) };
                    ds_words.store((z + at - cfg.ds_offset(0)) / 4, dsa[kk][r]);
                });
            });
            fence_proxy_async();
        }
        // dV += P^T dO, dK += dS^T Q: one group, A from registers.
        wgmma_fence();
        unroll16!(kk < NQ / 2 => {
            dv.mma_rs::<T, 1>(pa[kk], do_mn(z, s, kk as u32), true);
        });
        unroll16!(kk < NQ / 2 => {
            dk.mma_rs::<T, 1>(dsa[kk], q_mn(z, s, kk as u32), true);
        });
        wgmma_commit();
        if atomic {
            // Both halves of dS^T are written (and fenced); dQ's quarter of this warpgroup.
            ds_ready.sync();
            let mut dq = [0.0f32; 32];
            wgmma_fence();
            unroll16!(kk < (BK / 16) as usize => {
                let kk = kk as u32;
                dq.mma::<T, 1, 1>(ds_mn(z, u, kk), kt_mn(z, kk), kk > 0);
            });
            wgmma_commit();
            wgmma_wait::<0>();
            wgmma_fence_operands(&mut dq);
            // Registers `4 i + 2 h` and `4 i + 2 h + 1` are one row's neighbouring columns
            // (an even one first): one 8-byte reduction each.
            unroll16!(i < 8 => {
                unroll16!(h < 2 => {
                    let qi = i0 + (dq_q0 + 16 * warp + g + 8 * h as u32) as usize;
                    if qi < seq_q {
                        let col = (dq_d0 + 8 * i as u32 + 2 * t) as usize;
                        let pair = [dq[4 * i + 2 * h] * p.scale, dq[4 * i + 2 * h + 1] * p.scale];
                        p.scratch.red_add2(dq_base + (q_row0 + qi) * d + col, pair);
                    }
                });
            });
        } else {
            wgmma_wait::<0>();
        }
        wgmma_fence_operands(&mut dk);
        wgmma_fence_operands(&mut dv);
        // The stage is free: one arrival per consumer warp.
        if lane == 0 {
            empty(s).arrive();
        }
        j += 1;
    }

    // Epilogue: dK (times scale) and dV, each thread's pairs (keys g, g + 8; columns 8 i + 2 t).
    let (_, _, ks, seq_k) = seq_at(hint::opaque_u32(0));
    let kv_row0 = if VARLEN { kvh * p.seq_k as usize + ks } else { (b * kv_heads + kvh) * seq_k };
    let (dk, dv) = (dk.as_ref(), dv.as_ref());
    unroll16!(r < 2 => {
        let key = wk0 + g as usize + 8 * r;
        if key < seq_k {
            let base = (kv_row0 + key) * d + 2 * t as usize;
            unroll16!(i < (H::TILING.d / 8) as usize => {
                let wk = mma::pack_f32x2::<T>(dk[4 * i + 2 * r] * p.scale, dk[4 * i + 2 * r + 1] * p.scale);
                let wv = mma::pack_f32x2::<T>(dv[4 * i + 2 * r], dv[4 * i + 2 * r + 1]);
                p.dk.store(base + 8 * i, T::from_bits16(wk as u16));
                p.dk.store(base + 8 * i + 1, T::from_bits16((wk >> 16) as u16));
                p.dv.store(base + 8 * i, T::from_bits16(wv as u16));
                p.dv.store(base + 8 * i + 1, T::from_bits16((wv >> 16) as u16));
            });
        }
    });
}

/// `P^T` in place of `S^T` (`s`): `2^(S c - lse2)` with column `col = 8 i + 2 t + e % 2`'s
/// `lse2` from the warp's staged copy (`stats[col]`). `MASKED`: row `r`'s key counts for
/// columns `col >= col_min[r]` only (tile-relative, already less `2 t`). `t` comes in as the
/// loop's opaque `t + 0`, so the addresses are computed at each load rather than held in
/// registers through the loop.
#[inline(always)]
#[track_caller]
fn probs<H: BwdHeadDim, const NQ: usize, const MASKED: bool>(
    s: &mut H::S,
    c: f32,
    stats: Shared<f32>,
    col_min: [i32; 2],
    t: u32,
) {
    let s = s.as_mut();
    unroll16!(i < NQ => {
        let col = 8 * i as u32 + 2 * t;
        let l = [stats.load(col), stats.load(col + 1)];
        unroll16!(e < 4 => {
            let visible = !MASKED || ((i * 8) as i32 + (e % 2) as i32) >= col_min[e / 2];
            s[4 * i + e] = if visible { math::exp2_approx(math::fma(s[4 * i + e], c, -l[e % 2])) } else { 0.0 };
        });
    });
}

/// The accumulator's n8 tiles `2 kk`, `2 kk + 1` as the register A fragment of k-step `kk`
/// (entries past `NQ / 2` are never touched and take no registers).
#[inline(always)]
fn pack<T: MmaInput, H: BwdHeadDim, const NQ: usize>(acc: &H::S) -> [[u32; 4]; NQ] {
    let a = acc.as_ref();
    let mut out = [[0u32; 4]; NQ];
    unroll16!(kk < NQ / 2 => {
        let lo = [a[8 * kk], a[8 * kk + 1], a[8 * kk + 2], a[8 * kk + 3]];
        let hi = [a[8 * kk + 4], a[8 * kk + 5], a[8 * kk + 6], a[8 * kk + 7]];
        out[kk] = mma::a_from_c::<T>(lo, hi);
    });
    out
}
