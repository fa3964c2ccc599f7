//! v02: bandwidth-oriented paged decode: K/V move in 16-byte `cp.async` chunks (coalesced,
//! one block-table lookup per page a thread touches) through a 2-stage shared-memory pipeline
//! as raw 16-bit tiles, and one block owns up to [`MAX_ROWS`] query rows of a kv head, so
//! under GQA and speculative decoding each KV byte leaves DRAM once per step. Not yet
//! measured on a GPU.
//!
//! # Why cp.async into shared memory, and how many bytes are in flight
//! Decode reads every KV byte once and does `2 * rows` flops per byte, so the kernel is a
//! stream: it reaches copy bandwidth only if the SMs keep enough loads outstanding. Little's
//! law on an H200: 4.3 TB/s / 132 SMs = 32.6 B/ns per SM; at ~700 ns loaded DRAM latency an
//! SM needs ~23 KB in flight. One tile here is [`BK`] = 32 tokens of K and V, `32 * 128 * 2 *
//! 2 = 16 KB` at `d = 128`; with 2 stages one tile is always in flight while the other is
//! computed. [`SHARED_BYTES`] = 44 KB would let 5 blocks share an SM (228 KB); registers
//! (ptxas 12.9: 110-118 per thread, sm_80/sm_90) allow 4 blocks of 128 threads: up to ~64 KB in
//! flight per SM, ~2.8x the need, without the >48 KB opt-in. `cp.async` (LDGSTS) lands the
//! bytes in shared memory without holding registers across the compute, which direct 128-bit
//! register loads would (8 x 16 B per thread per tile, live across the whole score and `P V`
//! loops, on top of the accumulators); and the tile is needed in shared memory anyway because
//! every warp reads every key.
//!
//! # Thread mapping
//! Grid x = context chunk (split), y = `kv_head * row_groups + g`, z = sequence, with
//! `row_groups = ceil(q_len * group / MAX_ROWS)` (1 unless `q_len * heads / kv_heads > 16`).
//! Copies: the tile's `BK * d / 8` chunks of K (and of V) are numbered row-major; thread `t`
//! copies chunks `t, t + THREADS, ...`, so consecutive threads copy consecutive 16 bytes of a
//! token row and consecutive tokens of a page (one contiguous run per page: coalesced).
//! Compute: warp `w` owns rows `w, w + WARPS, ...` (up to [`ROWS_PER_WARP`]). Scores: lane `l`
//! dots token `l` of the tile with each of its warp's queries, reading K in 16-byte chunks
//! (the query is an f32 broadcast from shared). Online softmax per row as in v01 (`m`, `l`
//! uniform in the warp), probabilities through a per-row slot of `P_S`. `P V`: lane `l`
//! accumulates dimensions `l + 32 t` of each of its warp's rows (a warp reads a V row
//! contiguously).
//!
//! # Tiling
//! K and V tiles are bf16/f16 rows padded by 16 bytes (pitch [`KV_LD`] = 136 elements, 272
//! bytes): the 8 lanes of a quarter-warp reading 16-byte chunks of 8 different rows start at
//! offsets `0, 272, ...` = `0, 16, ..., 112 (mod 128)`, distinct bank groups, no conflict.
//! Tokens past the chunk (or past the block's causal limit) are zero-filled by `cp.async`
//! with `src-size 0` and masked to `-inf` before the softmax. A 32-token tile spans 2 pages
//! of 16, or part of one page of 32/64; a thread looks its page up once per page.
//!
//! # Cost (per 16 KB tile, rows per warp `r`; an instruction-count estimate, not measured)
//! Per lane: scores `d/8` LDS.128 of K + `r * d/4` LDS.128 of Q + `r * d` FFMA (+ `d`
//! conversions); `P V`: `32 * d/32` LDS.U16 of V + `32 * r` LDS of P + `32 * r * d/32` FFMA.
//! With 4 rows per block (`r = 1`) that is ~2900 warp instructions per tile, ~720 cycles of
//! an SM's issue slots for 16 KB: ~22 B/cycle, above the 32.6 B/ns / 1.98 GHz = 16.5 B/cycle
//! the SM's share of DRAM needs. The flops grow with the rows (`2 * rows` per KV byte): past
//! ~8 rows per block (e.g. GQA group 4 with `q_len >= 2`) the CUDA cores become the limit and
//! a tensor-core rung (mma for `Q K^T` and `P V`) is the next step.
//!
//! # Bench floors (bytes / 4.3 TB/s, bf16, K and V of every cached token read once)
//! | shape | KV bytes | floor |
//! |---|---:|---:|
//! | b64 h32/8 d128 p16 L1024 | 268 MB | 62.4 us |
//! | b64 h32/8 d128 p32 L4096 | 1074 MB | 250 us |
//! | b8 h32/8 d128 p16 L8192 | 268 MB | 62.4 us |
//! | b1 h32/8 d128 p16 L32768 | 134 MB | 31.2 us |
//! | b4 h32/32 d128 p64 L16384 | 1074 MB | 250 us |
//! | b16 h32/8 d128 p16 L4096 q_len 4 | 268 MB | 62.4 us |
//! | b64 h32/4 d128 p16 L1024 | 134 MB | 31.2 us |
//! | b16 h32/4 d128 p16 L4096 q_len 8 | 134 MB | 31.2 us |
//! | b1 h32/4 d128 p16 L32768 q_len 2 | 67 MB | 15.6 us |
//!
//! The floors count each KV byte once. A version reads it once per block of a kv head: v03
//! (up to 64 rows per block) once on every shape here; v02 (16 rows) 4 times on the `q_len 8`
//! GQA-8 row (64 rows per kv head: 537 MB, 125 us from DRAM unless L2 serves the repeats);
//! v01 (4 rows) `ceil(rows / 4)` times.
//!
//! # Safety
//! As v01's (see [`super::v01_simt`]), and: the K and V views are 16-byte aligned (the
//! launcher checks; `d` is a multiple of 32, so every chunk is too), split chunks are
//! multiples of [`BK`], and the launch has [`THREADS`] threads and [`SHARED_BYTES`].

use super::PagedDecodeParams;
use super::v01_simt::{causal_limit, out_row, partial_words, row_token_head};
use crate::device::mma::{MmaInput, cp_async_16, cp_async_commit, cp_async_wait_group};
use crate::device::reduce::{MaxNan, Sum, warp_reduce};
use crate::device::thread::{block_idx_x, block_idx_y, block_idx_z, sync_threads, thread_idx_x};
use crate::device::warp::{FULL_MASK, lane_id, sync_warp};
use crate::device::{Shared, WARP_SIZE, math};
// Per-row state (`s`, `m`, `l`, `acc`) is indexed only inside these unrolled loops: plain
// loops over it were left rolled and put it in a 256-byte stack frame (ptxas, sm_80/sm_90).
use crate::gemm::unroll8;

pub const WARPS: u32 = 4;
pub const THREADS: u32 = WARPS * WARP_SIZE;
/// Tokens per tile: one per lane in the score loop.
pub const BK: u32 = WARP_SIZE;
/// Shared stages of the copy pipeline.
pub const STAGES: u32 = 2;
pub const MAX_HEAD_DIM: u32 = 128;
/// Query rows per warp, and per block.
pub const ROWS_PER_WARP: u32 = 4;
pub const MAX_ROWS: u32 = WARPS * ROWS_PER_WARP;
/// 16-bit elements per 16-byte chunk.
const CHUNK: u32 = 8;
/// Pitch of a K/V tile row in elements: the longest row plus one 16-byte chunk of padding.
pub const KV_LD: u32 = MAX_HEAD_DIM + CHUNK;
/// Output dimensions each lane owns.
const DPL: usize = (MAX_HEAD_DIM / WARP_SIZE) as usize;
const RPW: usize = ROWS_PER_WARP as usize;
const TILE: u32 = BK * KV_LD;

const K_OFF: u32 = 0;
const V_OFF: u32 = K_OFF + 2 * STAGES * TILE;
/// Byte offset of the Q slot: the K and V stages end here (v03 uses only the stages).
pub(super) const Q_OFF: u32 = V_OFF + 2 * STAGES * TILE;
const P_OFF: u32 = Q_OFF + Shared::<f32>::bytes(MAX_ROWS * MAX_HEAD_DIM);
/// Dynamic shared memory of the decode kernel.
pub const SHARED_BYTES: u32 = P_OFF + Shared::<f32>::bytes(MAX_ROWS * BK);
const _: () = assert!(SHARED_BYTES <= 48 * 1024, "stays under the 48 KB needing no opt-in");
const _: () = assert!((2 * KV_LD).is_multiple_of(16) && V_OFF.is_multiple_of(16) && Q_OFF.is_multiple_of(16));
const _: () = assert!(MAX_HEAD_DIM.is_multiple_of(WARP_SIZE) && ROWS_PER_WARP == 4);

/// Eight 16-bit elements that move as one 16-byte shared access (`LDS.128`).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
pub struct U16x8(pub [u16; 8]);

/// Four floats that move as one 16-byte shared access.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
pub struct F32x4(pub [f32; 4]);

const K8: Shared<U16x8> = Shared::at(K_OFF, STAGES * TILE / CHUNK);
const V16: Shared<u16> = Shared::at(V_OFF, STAGES * TILE);
const Q_S: Shared<f32> = Shared::at(Q_OFF, MAX_ROWS * MAX_HEAD_DIM);
const Q4: Shared<F32x4> = Shared::at(Q_OFF, MAX_ROWS * MAX_HEAD_DIM / 4);
const P_S: Shared<f32> = Shared::at(P_OFF, MAX_ROWS * BK);

/// The 16-bit tiles as `T` (the cp.async destinations).
#[inline(always)]
pub(super) fn k_tiles<T: Copy>() -> Shared<T> {
    Shared::at(K_OFF, STAGES * TILE)
}
#[inline(always)]
pub(super) fn v_tiles<T: Copy>() -> Shared<T> {
    Shared::at(V_OFF, STAGES * TILE)
}

#[inline(always)]
fn to_f32<T: MmaInput>(bits: u16) -> f32 {
    T::from_bits16(bits).to_f32()
}

/// Issues one thread's `cp.async` copies of the K and V rows of tokens `tile0 .. tile0 + BK`
/// of kv head `kvh` of sequence `b` into stage `stage` of the K and V tiles, and commits them
/// as one group. The tile's `BK * d / 8` 16-byte chunks of K (and of V) are numbered
/// row-major and thread `tid` of `threads` copies chunks `tid, tid + threads, ...`: consecutive
/// threads copy consecutive 16 bytes of a token row and consecutive tokens of a page (one
/// contiguous run per page). Tokens from `end` on are zero-filled (`src-size 0`, nothing read).
/// A thread's rows ascend, so it looks a page up once per page it touches. Shared with
/// [`super::v03_mma`], which stages the same tiles.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn issue_kv_tile<T: MmaInput>(
    p: &PagedDecodeParams<T>,
    tid: u32,
    threads: u32,
    stage: u32,
    tile0: usize,
    end: usize,
    b: usize,
    kvh: usize,
) {
    let (d, page_size, kv_heads) = (p.d as usize, p.page_size as usize, p.kv_heads as usize);
    let table = b * p.max_pages as usize;
    let chunks_per_row = d / CHUNK as usize;
    let (mut page_idx, mut page) = (usize::MAX, 0usize);
    let mut e = tid as usize;
    while e < BK as usize * chunks_per_row {
        let (r, c) = (e / chunks_per_row, e % chunks_per_row);
        let di = (stage * BK + r as u32) * KV_LD + c as u32 * CHUNK;
        let j = tile0 + r;
        if j < end {
            if j / page_size != page_idx {
                page_idx = j / page_size;
                page = p.block_tables.load(table + page_idx) as usize;
            }
            let src = ((page * kv_heads + kvh) * page_size + j % page_size) * d + c * CHUNK as usize;
            cp_async_16(k_tiles::<T>(), di, p.k_cache, src, 16);
            cp_async_16(v_tiles::<T>(), di, p.v_cache, src, 16);
        } else {
            // Past the chunk: zero-fill, read nothing.
            cp_async_16(k_tiles::<T>(), di, p.k_cache, 0, 0);
            cp_async_16(v_tiles::<T>(), di, p.v_cache, 0, 0);
        }
        e += threads as usize;
    }
    cp_async_commit();
}

#[inline(always)]
pub fn run<T: MmaInput>(p: PagedDecodeParams<T>) {
    let tid = thread_idx_x();
    let (warp, lane) = (tid / WARP_SIZE, lane_id());
    let (split, by, b) = (block_idx_x() as usize, block_idx_y(), block_idx_z() as usize);
    let (d, q_len, heads) = (p.d as usize, p.q_len as usize, p.heads as usize);
    let group = p.heads / p.kv_heads;
    let total_rows = p.q_len * group;
    let groups = total_rows.div_ceil(MAX_ROWS);
    let (kvh, g) = (by / groups, by % groups);
    let row0 = g * MAX_ROWS;
    let block_rows = (total_rows - row0).min(MAX_ROWS);
    // Rows of this warp: local `warp + WARPS * k` for k < my_rows (uniform in the warp).
    let my_rows = if warp < block_rows { (block_rows - warp).div_ceil(WARPS) } else { 0 };

    let ctx_len = p.context_lens.load(b) as usize;
    let last_i = ((row0 + block_rows - 1) / group) as usize;
    let seen = causal_limit(ctx_len, q_len, last_i);
    let (begin, end) = if p.splits > 1 {
        let begin = split * p.split_keys as usize;
        (begin, (begin + p.split_keys as usize).min(seen))
    } else {
        (0, seen)
    };
    let n_tiles = if end > begin { (end - begin).div_ceil(BK as usize) } else { 0 };

    // Queries, scaled into base-2 units; each warp stages its own rows (read after the first
    // tile's barrier).
    let mut limit = [0usize; RPW];
    let mut out_at = [0usize; RPW];
    unroll8!(k < RPW => {
        if (k as u32) < my_rows {
            let local = warp + WARPS * k as u32;
            let (i, h) = row_token_head(row0 + local, kvh, group);
            limit[k] = causal_limit(ctx_len, q_len, i as usize);
            out_at[k] = out_row(b, i as usize, h as usize, q_len, heads);
            let mut dd = lane as usize;
            while dd < d {
                let x = p.q.load(out_at[k] * d + dd).to_f32() * p.scale_log2;
                Q_S.store(local * MAX_HEAD_DIM + dd as u32, x);
                dd += WARP_SIZE as usize;
            }
        }
    });

    // Issues the copies of tile `t` into stage `t % STAGES`.
    let issue = |t: usize| {
        let tile0 = begin + t * BK as usize;
        issue_kv_tile(&p, tid, THREADS, (t % STAGES as usize) as u32, tile0, end, b, kvh as usize);
    };
    let chunks_per_row = d / CHUNK as usize;

    let mut m = [f32::NEG_INFINITY; RPW];
    let mut l = [0.0f32; RPW];
    let mut acc = [[0.0f32; DPL]; RPW];
    if n_tiles > 0 {
        issue(0);
    }
    for t in 0..n_tiles {
        // Keep one tile in flight while this one is computed; the group committed for the
        // last tile is empty.
        if t + 1 < n_tiles {
            issue(t + 1);
        } else {
            cp_async_commit();
        }
        cp_async_wait_group::<1>();
        sync_threads();

        let stage = (t % STAGES as usize) as u32;
        let tile0 = begin + t * BK as usize;
        let rows_in = (end - tile0).min(BK as usize);
        let key = tile0 + lane as usize;

        // Scores of key `lane` against this warp's rows.
        let mut s = [0.0f32; RPW];
        let krow = (stage * BK + lane) * (KV_LD / CHUNK);
        for c in 0..chunks_per_row as u32 {
            let kc = K8.load(krow + c).0;
            let mut kf = [0.0f32; 8];
            unroll8!(e < 8 => {
                kf[e] = to_f32::<T>(kc[e]);
            });
            unroll8!(k < RPW => {
                if (k as u32) < my_rows {
                    let qi = (warp + WARPS * k as u32) * (MAX_HEAD_DIM / 4) + 2 * c;
                    let (q0, q1) = (Q4.load(qi).0, Q4.load(qi + 1).0);
                    let mut dot = s[k];
                    unroll8!(e < 4 => {
                        dot = math::fma(q0[e], kf[e], dot);
                    });
                    unroll8!(e < 4 => {
                        dot = math::fma(q1[e], kf[4 + e], dot);
                    });
                    s[k] = dot;
                }
            });
        }

        // Online softmax per row; probabilities to the row's P slot.
        let mut corr = [1.0f32; RPW];
        unroll8!(ku < RPW => {
            if (ku as u32) < my_rows {
                let k = ku as u32;
                let visible = (lane as usize) < rows_in && key < limit[ku];
                let sk = if visible { s[ku] } else { f32::NEG_INFINITY };
                let m_new = math::max_nan(m[ku], warp_reduce(MaxNan(sk)).0);
                let pj = if m_new == f32::NEG_INFINITY {
                    0.0
                } else {
                    corr[ku] = if m[ku] == f32::NEG_INFINITY { 0.0 } else { math::exp2_approx(m[ku] - m_new) };
                    if sk == f32::NEG_INFINITY { 0.0 } else { math::exp2_approx(sk - m_new) }
                };
                l[ku] = l[ku] * corr[ku] + warp_reduce(Sum(pj)).0;
                m[ku] = m_new;
                P_S.store((warp + WARPS * k) * BK + lane, pj);
            }
        });
        sync_warp(FULL_MASK);

        // P V: V row j once per lane and dimension, used by every row of the warp.
        unroll8!(k < RPW => {
            unroll8!(tt < DPL => {
                acc[k][tt] *= corr[k];
            });
        });
        let vbase = stage * BK * KV_LD;
        for j in 0..rows_in as u32 {
            let mut vf = [0.0f32; DPL];
            unroll8!(tt < DPL => {
                let dd = lane + tt as u32 * WARP_SIZE;
                if (dd as usize) < d {
                    vf[tt] = to_f32::<T>(V16.load(vbase + j * KV_LD + dd));
                }
            });
            unroll8!(k < RPW => {
                if (k as u32) < my_rows {
                    let pj = P_S.load((warp + WARPS * k as u32) * BK + j);
                    unroll8!(tt < DPL => {
                        acc[k][tt] = math::fma(pj, vf[tt], acc[k][tt]);
                    });
                }
            });
        }
        // Every warp is done with this stage before the next iteration refills it.
        sync_threads();
    }
    cp_async_wait_group::<0>();

    unroll8!(ku < RPW => {
        if (ku as u32) < my_rows {
            if p.splits > 1 {
                // Unnormalized state for the combine; an empty chunk writes (-inf, 0, 0).
                let base = (out_at[ku] * p.splits as usize + split) * partial_words(p.d) as usize;
                if lane == 0 {
                    p.partial.store(base, m[ku].to_bits());
                    p.partial.store(base + 1, l[ku].to_bits());
                }
                unroll8!(tt < DPL => {
                    let dd = lane as usize + tt * WARP_SIZE as usize;
                    if dd < d {
                        p.partial.store(base + 2 + dd, acc[ku][tt].to_bits());
                    }
                });
            } else {
                let inv = if l[ku] > 0.0 { 1.0 / l[ku] } else { 0.0 };
                unroll8!(tt < DPL => {
                    let dd = lane as usize + tt * WARP_SIZE as usize;
                    if dd < d {
                        p.o.store(out_at[ku] * d + dd, T::from_f32(acc[ku][tt] * inv));
                    }
                });
            }
        }
    });
}
