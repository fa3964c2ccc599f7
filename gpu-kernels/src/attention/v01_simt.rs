//! v01: FlashAttention's online softmax on the CUDA cores: one warp per query, key/value
//! tiles staged in shared memory and shared by the block's queries. The correct baseline the
//! tensor-core versions are checked and measured against.
//!
//! # Thread mapping
//! A block of [`WARPS`] warps owns [`WARPS`] consecutive queries of one (batch, head): grid
//! x = query groups, y = heads, z = batch. For each tile of [`BK`] keys: all threads load the
//! K and V tiles (as f32) into shared memory; then warp `w` (query `q0 + w`) has lane `l`
//! score key `l` against the query (the query vector sits in shared memory: a broadcast
//! read), updates the running max and sum across the warp, writes its probability to a
//! per-warp row of shared memory, and accumulates `P V` into the `d / 32` output dimensions
//! it owns (`dd = lane + 32 t`, so a warp reads a V row contiguously).
//!
//! # Tiling
//! K and V rows are padded by one float in shared memory so that lanes reading different
//! rows of the same column (the score loop) fall in different banks.
//!
//! # Safety
//! The launcher guarantees the view lengths match the shapes, `d` is a multiple of 32 and at
//! most [`MAX_HEAD_DIM`], `heads` is a multiple of `kv_heads`, and the grid is
//! `(ceil(seq_q / WARPS), heads, batch)` with [`THREADS`] threads and [`SHARED_BYTES`].

use super::AttentionParams;
use crate::device::reduce::{MaxNan, Sum, warp_reduce};
use crate::device::thread::{block_idx_x, block_idx_y, block_idx_z, sync_threads, thread_idx_x};
use crate::device::warp::{FULL_MASK, lane_id, sync_warp};
use crate::device::{Element, Shared, WARP_SIZE, math};

/// Queries (warps) per block.
pub const WARPS: u32 = 4;
pub const THREADS: u32 = WARPS * WARP_SIZE;
/// Keys per shared-memory tile: one per lane.
pub const BK: u32 = WARP_SIZE;
/// Largest head dimension (output dims per lane: `MAX_HEAD_DIM / 32`).
pub const MAX_HEAD_DIM: u32 = 128;
const DPL: usize = (MAX_HEAD_DIM / WARP_SIZE) as usize;
/// Padded row stride of the K and V tiles, in floats.
const KV_STRIDE: u32 = MAX_HEAD_DIM + 1;

const K_OFF: u32 = 0;
const V_OFF: u32 = K_OFF + Shared::<f32>::bytes(BK * KV_STRIDE);
const Q_OFF: u32 = V_OFF + Shared::<f32>::bytes(BK * KV_STRIDE);
const P_OFF: u32 = Q_OFF + Shared::<f32>::bytes(WARPS * MAX_HEAD_DIM);
/// Dynamic shared memory of the kernel.
pub const SHARED_BYTES: u32 = P_OFF + Shared::<f32>::bytes(WARPS * BK);
const _: () = assert!(SHARED_BYTES <= 48 * 1024, "v01 stays under the 48 KB needing no opt-in");
const _: () = assert!(MAX_HEAD_DIM.is_multiple_of(WARP_SIZE));

const K_S: Shared<f32> = Shared::at(K_OFF, BK * KV_STRIDE);
const V_S: Shared<f32> = Shared::at(V_OFF, BK * KV_STRIDE);
const Q_S: Shared<f32> = Shared::at(Q_OFF, WARPS * MAX_HEAD_DIM);
const P_S: Shared<f32> = Shared::at(P_OFF, WARPS * BK);

#[inline(always)]
pub fn run<T: Element>(p: AttentionParams<T>) {
    let tid = thread_idx_x();
    let (warp, lane) = (tid / WARP_SIZE, lane_id());
    let (b, h) = (block_idx_z() as usize, block_idx_y() as usize);
    let (seq_q, seq_k, d) = (p.seq_q as usize, p.seq_k as usize, p.d as usize);
    let kvh = h / (p.heads / p.kv_heads) as usize;
    let qi = block_idx_x() as usize * WARPS as usize + warp as usize;
    let active = qi < seq_q;
    let q_base = ((b * p.heads as usize + h) * seq_q + qi) * d;
    let kv_base = (b * p.kv_heads as usize + kvh) * seq_k * d;
    // Keys this query may see: all, or up to the bottom-right-aligned diagonal.
    let limit =
        |q: usize| -> usize { if p.causal != 0 { (q + seq_k + 1).saturating_sub(seq_q).min(seq_k) } else { seq_k } };
    // The block's last query decides how many tiles anyone needs (uniform across the block).
    let last_q = (block_idx_x() as usize * WARPS as usize + WARPS as usize - 1).min(seq_q.saturating_sub(1));
    let keys_needed = limit(last_q);
    let my_limit = if active { limit(qi) } else { 0 };

    // Stage this warp's query row (scaled into base-2 units) in shared memory.
    let mut dd = lane as usize;
    while dd < d {
        let qv = if active { p.q.load(q_base + dd).to_f32() * p.scale_log2 } else { 0.0 };
        Q_S.store(warp * MAX_HEAD_DIM + dd as u32, qv);
        dd += WARP_SIZE as usize;
    }

    let mut m = f32::NEG_INFINITY; // running max, base-2 units
    let mut l = 0.0f32; // running sum of 2^(s - m)
    let mut acc = [0.0f32; DPL];
    let mut tile = 0usize;
    while tile < keys_needed {
        sync_threads(); // the previous tile's readers are done
        let rows = (keys_needed - tile).min(BK as usize);
        let mut e = tid as usize;
        while e < BK as usize * d {
            let (r, c) = (e / d, e % d);
            let (kv, vv) = if r < rows {
                let at = kv_base + (tile + r) * d + c;
                (p.k.load(at).to_f32(), p.v.load(at).to_f32())
            } else {
                (0.0, 0.0)
            };
            K_S.store(r as u32 * KV_STRIDE + c as u32, kv);
            V_S.store(r as u32 * KV_STRIDE + c as u32, vv);
            e += THREADS as usize;
        }
        sync_threads();
        // Scores: lane l scores key tile + l.
        let j = tile + lane as usize;
        let mut s = f32::NEG_INFINITY;
        if active && j < my_limit {
            let mut dot = 0.0f32;
            for c in 0..d {
                dot = math::fma(Q_S.load(warp * MAX_HEAD_DIM + c as u32), K_S.load(lane * KV_STRIDE + c as u32), dot);
            }
            s = dot;
        }
        let tile_max = warp_reduce(MaxNan(s)).0;
        let m_new = math::max_nan(m, tile_max);
        let (corr, pj) = if m_new == f32::NEG_INFINITY {
            (1.0, 0.0)
        } else {
            let corr = if m == f32::NEG_INFINITY { 0.0 } else { math::exp2_approx(m - m_new) };
            (corr, if s == f32::NEG_INFINITY { 0.0 } else { math::exp2_approx(s - m_new) })
        };
        l = l * corr + warp_reduce(Sum(pj)).0;
        m = m_new;
        P_S.store(warp * BK + lane, pj);
        sync_warp(FULL_MASK);
        for (t, a) in acc.iter_mut().enumerate() {
            let dd = lane as usize + t * WARP_SIZE as usize;
            if dd < d {
                let mut sum = *a * corr;
                for r in 0..rows {
                    sum = math::fma(P_S.load(warp * BK + r as u32), V_S.load(r as u32 * KV_STRIDE + dd as u32), sum);
                }
                *a = sum;
            }
        }
        // This warp's P row is rewritten next tile only after the block barrier above.
        tile += BK as usize;
    }
    if active {
        let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
        for (t, a) in acc.iter().enumerate() {
            let dd = lane as usize + t * WARP_SIZE as usize;
            if dd < d {
                p.o.store(q_base + dd, T::from_f32(a * inv));
            }
        }
        if lane == 0 {
            let lse = if l > 0.0 { (m + math::log2_approx(l)) * core::f32::consts::LN_2 } else { f32::NEG_INFINITY };
            p.lse.store((b * p.heads as usize + h) * seq_q + qi, lse);
        }
    }
}
