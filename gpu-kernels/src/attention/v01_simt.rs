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
//! The staging, layout and per-warp update live in [`super::tile`], shared with paged decode.
//!
//! # Variable length (`VARLEN`)
//! The varlen entry points read sequence `b`'s first tokens and lengths from `cu_seqlens_q/k`
//! (layout `[heads, total, d]`, `seq_q` / `seq_k` the totals); the grid covers the longest
//! sequence and blocks past a shorter one leave before any barrier.
//!
//! # Safety
//! The launcher guarantees the view lengths match the shapes, `d` is a multiple of 32 and at
//! most [`MAX_HEAD_DIM`], `heads` is a multiple of `kv_heads`, and the grid is
//! `(ceil(seq_q / WARPS), heads, batch)` with [`THREADS`] threads and [`SHARED_BYTES`]
//! (varlen: `ceil(longest / WARPS)`, and offsets checked as `batch + 1` non-decreasing
//! entries from 0 ending at the totals).

use super::AttentionParams;
pub use super::tile::{BK, MAX_HEAD_DIM, SHARED_BYTES, THREADS, WARPS};
use super::tile::{OnlineRow, stage_kv, stage_query};
use crate::device::thread::{block_idx_x, block_idx_y, block_idx_z, thread_idx_x};
use crate::device::warp::lane_id;
use crate::device::{Element, WARP_SIZE, math};

#[inline(always)]
pub fn run<T: Element, const VARLEN: bool>(p: AttentionParams<T>) {
    let tid = thread_idx_x();
    let (warp, lane) = (tid / WARP_SIZE, lane_id());
    let (b, h) = (block_idx_z() as usize, block_idx_y() as usize);
    let d = p.d as usize;
    let kvh = h / (p.heads / p.kv_heads) as usize;
    // The (batch, head)'s first query and key rows and its lengths: dense `[batch, heads, seq,
    // d]`, or varlen `[heads, total, d]` with sequence b at its cumulative offsets.
    let (q_row0, seq_q, kv_row0, seq_k) = if VARLEN {
        let (qs, qe) = (p.cu_seqlens_q.load(b) as usize, p.cu_seqlens_q.load(b + 1) as usize);
        let (ks, ke) = (p.cu_seqlens_k.load(b) as usize, p.cu_seqlens_k.load(b + 1) as usize);
        (h * p.seq_q as usize + qs, qe - qs, kvh * p.seq_k as usize + ks, ke - ks)
    } else {
        let (sq, sk) = (p.seq_q as usize, p.seq_k as usize);
        ((b * p.heads as usize + h) * sq, sq, (b * p.kv_heads as usize + kvh) * sk, sk)
    };
    if VARLEN && block_idx_x() as usize * WARPS as usize >= seq_q {
        // Varlen: the grid covers the longest sequence; the whole block leaves (no barrier yet).
        return;
    }
    let qi = block_idx_x() as usize * WARPS as usize + warp as usize;
    let active = qi < seq_q;
    let q_base = (q_row0 + qi) * d;
    let kv_base = kv_row0 * d;
    // Keys this query may see: all, or up to the bottom-right-aligned diagonal.
    let limit =
        |q: usize| -> usize { if p.causal != 0 { (q + seq_k + 1).saturating_sub(seq_q).min(seq_k) } else { seq_k } };
    // The block's last query decides how many tiles anyone needs (uniform across the block).
    let last_q = (block_idx_x() as usize * WARPS as usize + WARPS as usize - 1).min(seq_q.saturating_sub(1));
    let keys_needed = limit(last_q);
    let my_limit = if active { limit(qi) } else { 0 };

    stage_query(warp, lane, d, |dd| if active { p.q.load(q_base + dd).to_f32() * p.scale_log2 } else { 0.0 });
    let mut row = OnlineRow::new();
    let mut tile = 0usize;
    while tile < keys_needed {
        let rows = (keys_needed - tile).min(BK as usize);
        stage_kv(tid, d, rows, |r, c| {
            let at = kv_base + (tile + r) * d + c;
            (p.k.load(at).to_f32(), p.v.load(at).to_f32())
        });
        // Lane l scores key tile + l.
        row.tile(warp, lane, d, rows, active && tile + (lane as usize) < my_limit);
        tile += BK as usize;
    }
    if active {
        let l = row.l;
        let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
        row.for_each_dim(lane, d, |dd, a| p.o.store(q_base + dd, T::from_f32(a * inv)));
        if lane == 0 {
            let lse =
                if l > 0.0 { (row.m + math::log2_approx(l)) * core::f32::consts::LN_2 } else { f32::NEG_INFINITY };
            p.lse.store(q_row0 + qi, lse);
        }
    }
}
