//! v01: paged decode attention on the CUDA cores: per (sequence, kv head, context chunk) a
//! block stages K/V tiles gathered through the block table in shared memory, and each warp
//! runs the online softmax of one query head of the kv group (GQA shares the tiles). The
//! correct baseline; not yet measured on a GPU.
//!
//! # Thread mapping
//! Decode: grid x = context chunk (split), y = `kv_head * row_groups + g`, z = sequence,
//! where `row_groups = ceil(q_len * group / WARPS)` (see the family's "Query rows"); warp `w`
//! owns row `rho = g * WARPS + w` (idle past the kv head's rows, but still loads tiles). For
//! each tile of [`BK`] tokens all threads gather K and V rows (thread `t` loads column `t % d`
//! of row `t / d`, so a row's load is contiguous in its page), then lane `l` scores token `l`
//! and the warp updates its running max and sum and accumulates `P V` into the `d / 32`
//! dimensions lane `l` owns (`l + 32 i`). Combine (every version's): grid
//! (ceil(q_len * heads / WARPS), 1, batch), a warp per output row merges the chunks in order.
//! Append: grid (kv_heads, batch), the block's threads copy one token row of K and V.
//!
//! # Tiling
//! K and V tiles are f32 rows padded by one float so the score loop's lanes (different rows,
//! same column) fall in different banks, as in `attention::v01_simt`. A tile never crosses a
//! chunk boundary (`split_keys` is a multiple of [`BK`]); it may span pages (page size 16) or
//! sit inside one (32, 64): the page is looked up per row.
//!
//! # Safety
//! The launcher guarantees the view lengths match the shapes, `d` is a multiple of 32 and at
//! most [`MAX_HEAD_DIM`], `heads % kv_heads == 0`, `1 <= q_len <= MAX_Q_LEN`, every context
//! length is 0 or in `q_len..=max_pages * page_size`, every block-table entry a context uses is in `0..num_pages`
//! (append: also the entry of position `context_lens[b]`, with distinct target rows), and
//! `partial` holds `batch * q_len * heads * splits * (d + 2)` words when `splits > 1`.

use super::{PagedAppendParams, PagedDecodeParams};
use crate::attention::tile::DPL;
pub use crate::attention::tile::{BK, MAX_HEAD_DIM, SHARED_BYTES, THREADS, WARPS};
use crate::attention::tile::{OnlineRow, stage_kv, stage_query};
use crate::device::thread::{block_idx_x, block_idx_y, block_idx_z, thread_idx_x};
use crate::device::warp::lane_id;
use crate::device::{Element, WARP_SIZE, math};

/// Blocks along grid y per kv head: its `q_len * group` rows, [`WARPS`] per block.
pub const fn row_groups(heads: u32, kv_heads: u32, q_len: u32) -> u32 {
    (q_len * (heads / kv_heads)).div_ceil(WARPS)
}

/// Where row `rho` of kv head `kvh` reads its query and writes its output: `(i, h)`, new token
/// `i` and query head `h`.
#[inline(always)]
pub const fn row_token_head(rho: u32, kvh: u32, group: u32) -> (u32, u32) {
    (rho / group, kvh * group + rho % group)
}

/// Keys new token `i` of `q_len` may see in a context of `ctx_len` tokens (the new ones
/// included): `j < ctx_len - q_len + i + 1`; an empty context (0) sees none.
#[inline(always)]
pub fn causal_limit(ctx_len: usize, q_len: usize, i: usize) -> usize {
    (ctx_len + i + 1).saturating_sub(q_len).min(ctx_len)
}

/// Element offset of the first output (or query) element of row `(b, i, h)`.
#[inline(always)]
pub const fn out_row(b: usize, i: usize, h: usize, q_len: usize, heads: usize) -> usize {
    (b * q_len + i) * heads + h
}

/// Words of one chunk's partial state: `m`, `l`, then `acc[d]`.
pub const fn partial_words(d: u32) -> u32 {
    d + 2
}

#[inline(always)]
pub fn run<T: Element>(p: PagedDecodeParams<T>) {
    let tid = thread_idx_x();
    let (warp, lane) = (tid / WARP_SIZE, lane_id());
    let (split, by, b) = (block_idx_x() as usize, block_idx_y(), block_idx_z() as usize);
    let d = p.d as usize;
    let group = p.heads / p.kv_heads;
    let groups = row_groups(p.heads, p.kv_heads, p.q_len);
    let (kvh, g) = (by / groups, by % groups);
    let rho = g * WARPS + warp;
    let active = rho < p.q_len * group;
    let (i, h) = row_token_head(rho, kvh, group);
    let row_at = out_row(b, i as usize, h as usize, p.q_len as usize, p.heads as usize);
    let q_base = row_at * d;
    let (page_size, kv_heads, kvh) = (p.page_size as usize, p.kv_heads as usize, kvh as usize);
    let table = b * p.max_pages as usize;

    // This block's tokens: the whole context, or chunk `split` of it; keys past what the
    // block's last row may see are never loaded.
    let ctx_len = p.context_lens.load(b) as usize;
    let last_i = ((g * WARPS + WARPS - 1).min(p.q_len * group - 1) / group) as usize;
    let seen = causal_limit(ctx_len, p.q_len as usize, last_i);
    let my_limit = if active { causal_limit(ctx_len, p.q_len as usize, i as usize) } else { 0 };
    let (begin, end) = if p.splits > 1 {
        let begin = split * p.split_keys as usize;
        (begin, (begin + p.split_keys as usize).min(seen))
    } else {
        (0, seen)
    };

    stage_query(warp, lane, d, |dd| if active { p.q.load(q_base + dd).to_f32() * p.scale_log2 } else { 0.0 });
    let mut row = OnlineRow::new();
    let mut tile = begin;
    while tile < end {
        let rows = (end - tile).min(BK as usize);
        stage_kv(tid, d, rows, |r, c| {
            let j = tile + r;
            let page = p.block_tables.load(table + j / page_size) as usize;
            let at = ((page * kv_heads + kvh) * page_size + j % page_size) * d + c;
            (p.k_cache.load(at).to_f32(), p.v_cache.load(at).to_f32())
        });
        row.tile(warp, lane, d, rows, active && (lane as usize) < rows && tile + (lane as usize) < my_limit);
        tile += BK as usize;
    }
    if !active {
        return;
    }
    if p.splits > 1 {
        // Unnormalized state for the combine; an empty chunk writes (-inf, 0, 0).
        let base = (row_at * p.splits as usize + split) * partial_words(p.d) as usize;
        if lane == 0 {
            p.partial.store(base, row.m.to_bits());
            p.partial.store(base + 1, row.l.to_bits());
        }
        row.for_each_dim(lane, d, |dd, a| p.partial.store(base + 2 + dd, a.to_bits()));
    } else {
        let inv = if row.l > 0.0 { 1.0 / row.l } else { 0.0 };
        row.for_each_dim(lane, d, |dd, a| p.o.store(q_base + dd, T::from_f32(a * inv)));
    }
}

/// Merges the chunks' partial states of one output row (sequence, new token, head) per warp,
/// chunk 0 first. Every version's split path ends here.
#[inline(always)]
pub fn combine<T: Element>(p: PagedDecodeParams<T>) {
    let (warp, lane) = (thread_idx_x() / WARP_SIZE, lane_id());
    // Output rows of one sequence are `[q_len, heads]`, contiguous.
    let r = (block_idx_x() * WARPS + warp) as usize;
    let b = block_idx_z() as usize;
    let rows = (p.q_len * p.heads) as usize;
    if r >= rows {
        return;
    }
    let (d, splits, words) = (p.d as usize, p.splits as usize, partial_words(p.d) as usize);
    let out_at = b * rows + r;
    let row = out_at * splits * words;
    let mut big_m = f32::NEG_INFINITY;
    for s in 0..splits {
        big_m = math::max_nan(big_m, f32::from_bits(p.partial.load(row + s * words)));
    }
    let mut l = 0.0f32;
    let mut acc = [0.0f32; DPL];
    if big_m != f32::NEG_INFINITY {
        for s in 0..splits {
            let at = row + s * words;
            let ms = f32::from_bits(p.partial.load(at));
            if ms == f32::NEG_INFINITY {
                continue; // an empty chunk (past the context) adds nothing
            }
            let w = math::exp2_approx(ms - big_m);
            l = math::fma(f32::from_bits(p.partial.load(at + 1)), w, l);
            for (t, a) in acc.iter_mut().enumerate() {
                let dd = lane as usize + t * WARP_SIZE as usize;
                if dd < d {
                    *a = math::fma(f32::from_bits(p.partial.load(at + 2 + dd)), w, *a);
                }
            }
        }
    }
    let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
    let out = out_at * d;
    for (t, a) in acc.iter().enumerate() {
        let dd = lane as usize + t * WARP_SIZE as usize;
        if dd < d {
            p.o.store(out + dd, T::from_f32(a * inv));
        }
    }
}

/// Writes the new token's K and V rows of one (sequence, kv head) at position
/// `context_lens[b]` of the sequence.
#[inline(always)]
pub fn append<T: Element>(p: PagedAppendParams<T>) {
    let (kvh, b) = (block_idx_x() as usize, block_idx_z() as usize);
    let (d, page_size, kv_heads) = (p.d as usize, p.page_size as usize, p.kv_heads as usize);
    let pos = p.context_lens.load(b) as usize;
    let page = p.block_tables.load(b * p.max_pages as usize + pos / page_size) as usize;
    let dst = ((page * kv_heads + kvh) * page_size + pos % page_size) * d;
    let src = (b * kv_heads + kvh) * d;
    let mut c = thread_idx_x() as usize;
    while c < d {
        p.k_cache.store(dst + c, p.k_new.load(src + c));
        p.v_cache.store(dst + c, p.v_new.load(src + c));
        c += THREADS as usize;
    }
}
