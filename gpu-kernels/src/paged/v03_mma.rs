//! v03: the paged decode on the tensor cores (`mma.sync` m16n8k16, sm_80+, also runs on
//! Hopper): a kv head's query rows (GQA group x new tokens, up to 64 in one block) in m16 row
//! tiles padded with masked rows, each the A operand of `S = Q K^T`; the online softmax runs
//! on the accumulator fragments, P is re-packed to bf16/f16 in registers as the A operand of
//! `O += P V`, and V's B fragments come from `ldmatrix .trans`. K/V pages arrive through the
//! same 16-byte `cp.async` 2-stage pipeline as v02 ([`super::v02_vec::issue_kv_tile`]), once
//! per block for all its row tiles. Not yet measured on a GPU.
//!
//! # Why tensor cores for decode
//! v02 spends CUDA-core instructions proportional to its rows: its module docs estimate
//! ~2900 warp instructions per 16 KB tile (d = 128) at 4 rows per block, and its FFMA count
//! doubles with the rows, so past ~8 rows per block (GQA group x `q_len`, e.g. group 4 with
//! `q_len >= 2`, or group 8) it is predicted to be issue-bound rather than DRAM-bound. Here a
//! tile costs the same per row tile whatever its rows up to 16: per warp and 32-key tile at
//! d = 128, 8 `ldmatrix.x4` + 16 mma for `S`, 8 `ldmatrix.x4.trans` + 16 mma for `P V`, and
//! ~60 instructions of softmax on 8 scores per lane: ~120 warp instructions per warp, ~240
//! per tile and row tile, against v02's thousands. An instruction-count estimate, not a
//! measurement: the launcher's choice between v02 and v03 (`ferrokern::paged::pick_version`)
//! is a prediction the bench must confirm on a GPU.
//!
//! # Why several row tiles per block
//! Decode is a stream over the KV bytes, so the bytes a block reads decide its floor. With one
//! m16 tile per block, a kv head's `rows = q_len * group` rows took `ceil(rows / 16)` blocks,
//! each streaming the same K/V: GQA 8 with `q_len` 3 to 8 (24 to 64 rows) read the cache 2 to
//! 4 times, so against a DRAM-only read its effective bandwidth (KV bytes / time) could not
//! pass 1/2 to 1/4 of a copy's (the duplicates ran in adjacent blocks and may partly have hit
//! L2; unmeasured). Now one block holds up to [`MAX_ROW_TILES`] row tiles (64 rows, GQA 8 x
//! [`super::MAX_Q_LEN`]) and copies each tile once for all of them: the bench's `b16 h32/4
//! q8` shape (64 rows per kv head, d = 128, 4096 tokens) moves 134 MB of K/V instead of 4 x
//! 134 = 537 MB; its floor at 4.3 TB/s is 31.2 us against 125 us before. A prediction from
//! the byte count, not a measurement.
//!
//! # Thread mapping
//! The block is `row_tiles` pairs of warps ([`TILE_THREADS`] = 64 threads each), sized at
//! launch from the rows (`PagedVersion::row_tiles`): `groups = ceil(rows / 64)` row groups per
//! kv head, `row_tiles = ceil(rows / (16 groups))` (1 to 4; balanced, so past 64 rows no
//! block carries more padding than it must). The kernel reads `row_tiles` back from the block
//! size. Grid as v02: x = context chunk (split), y = `kv_head * groups + gi`, z = sequence:
//! for up to 64 rows, one block per (sequence, kv head, chunk). Block rows `rho = block_row0 ..
//! block_row0 + 16 row_tiles` (row `rho` is new token `rho / group`, query head `kvh * group +
//! rho % group`); rows past `q_len * group` are padding: zero queries, a key limit of 0
//! (every score masked), never stored. Warp `w` holds the 16 rows of row tile `w / 2` and owns
//! keys `16 (w % 2) .. + 15` of each [`BK`]-key tile (split-K inside the row tile), so a tile
//! is one k16 step of `P V` per warp; both key warps of every row tile read the same shared
//! K/V tile. All threads of the block issue the tile's copies (chunk `tid + k * threads`).
//! In the mma layouts lane `l` (`g = l / 4`, `t = l % 4`) holds rows `g` and `g + 8` of its row
//! tile, keys `8 nt + 2 t` and `+1` of `S` (`nt` = 0, 1) and dimensions `8 n + 2 t`, `+1` of
//! `O`. Q's A fragments (`d / 16` k-steps, kept in registers) are loaded once from global
//! memory straight into the fragment layout (a one-off 2-byte-element gather per warp). After
//! the last tile, each row tile's second warp leaves its `(m, l, O)` fragments in that tile's
//! shared slot and its first warp merges them (log-sum-exp, as the split combine does) and
//! writes `O` or the split partial state. A tile with no rows (possible only in the last row
//! group past 64 rows) still copies its share, meets every barrier and runs its math on
//! masked rows; it stores nothing (skipping its math cost 2 registers on sm_80 for a case
//! outside the target shapes).
//!
//! # Tiling
//! The K/V tiles are v02's: [`BK`] = 32 tokens (the family's split tile), rows padded to
//! [`super::v02_vec::KV_LD`] = 136 elements (272 bytes, 16 mod 128), so the 8 row addresses of
//! each `ldmatrix` phase fall in 8 distinct 16-byte bank groups. Tokens past the chunk or the
//! block's causal limit (its last row's) are zero-filled by `cp.async` and masked per row
//! before the softmax, so a padded or causally hidden key gets `p = 0` and V's zero rows add
//! nothing. A warp whose 16 keys of a tile all lie past the block's end skips the mma work
//! (not the barriers). Head dims 32, 64, 96 and 128 share one entry point that
//! branches once to a body per head dim (`d / 16` k-steps as a constant), so the fragment
//! arrays are sized exactly and the k-step loops are straight-line code.
//!
//! # Registers and shared memory
//! Per lane: O `d / 2` f32 (64 at d = 128), Q `d / 4` b32 (32), S 8 f32: each warp's plan is
//! the one-tile kernel's, whatever the block size. ptxas 12.9 (`tests/ptxas.rs` prints them,
//! and the blocks per SM they allow at 1 to 4 row tiles): 168 registers on sm_80, sm_90 and
//! sm_90a (the one-tile kernel: 172, 168, 168), no spills, no stack frame, no local memory. The scheduler keeps several ldmatrix results in flight ahead of their mma, which is
//! most of the registers past the ~110 of state. Shared memory is v02's K/V stages (2 x 2 x
//! 32 x 136 x 2 B = 34 KB, no opt-in) for every block size: the merge slots (8.5 KB per row
//! tile at d = 128) reuse the stages after the loop, and 4 of them are exactly 34 KB.
//! Residency on an H200 at 168 registers (64K registers and 228 KB of shared memory per SM),
//! predicted, not measured: 1 row tile (64 threads, 10.5K registers) 6 blocks per SM (shared
//! memory allows 6 too); 2 row tiles 3 blocks; 3 row tiles 2; 4 row tiles (256 threads, 42K
//! registers) 1. Each block has one 16 KB tile (d = 128) in flight while it computes the
//! other and two while it waits, 16-32 KB; an H200 SM needs ~23 KB in flight (v02's
//! Little's-law estimate), so the 4-tile block is the marginal one: a third stage (51 KB,
//! needing the opt-in, free at one block per SM) is the next step if the bench shows it short.
//!
//! # Safety
//! As v02's: the launcher checks the shapes and tables (v01's list), 16-byte aligned K and V
//! views, split chunks that are multiples of [`BK`], and launches `TILE_THREADS * row_tiles`
//! threads (at most [`MAX_THREADS`]; `row_tiles` from the same rows the grid's y counts) with
//! [`SHARED_BYTES`]. Q and O are accessed element by element (no alignment needed).

use super::PagedDecodeParams;
use super::v01_simt::{causal_limit, out_row, partial_words, row_token_head};
use super::v02_vec::{self, KV_LD, issue_kv_tile, k_tiles, v_tiles};
use crate::device::mma::{self, MmaInput, cp_async_commit, cp_async_wait_group, ldmatrix, pack2};
use crate::device::thread::{block_dim_x, block_idx_x, block_idx_y, block_idx_z, sync_threads, thread_idx_x};
use crate::device::{Shared, WARP_SIZE, math};
use crate::gemm::unroll8;

/// Warps per row tile: each owns 16 keys of every tile (split-K inside the row tile).
pub const KEY_WARPS: u32 = 2;
/// Threads per row tile; a block is 1 to [`MAX_ROW_TILES`] of them, so its size is
/// `TILE_THREADS * row_tiles` (`PagedVersion::threads`).
pub const TILE_THREADS: u32 = KEY_WARPS * WARP_SIZE;
/// Query rows per row tile: one m16 tile.
pub const ROWS: u32 = 16;
/// Most row tiles per block: every row of a kv head at GQA 8 x [`super::MAX_Q_LEN`] new
/// tokens (64 rows) shares one block, so each K/V byte is read once for all of them.
pub const MAX_ROW_TILES: u32 = 4;
/// The largest block (what the PTX is declared for: `launch_threads`).
pub const MAX_THREADS: u32 = MAX_ROW_TILES * TILE_THREADS;
/// Tokens per tile: 16 per key warp (one k16 step of `P V`), the family's split tile.
pub const BK: u32 = 16 * KEY_WARPS;
pub const STAGES: u32 = v02_vec::STAGES;
pub const MAX_HEAD_DIM: u32 = v02_vec::MAX_HEAD_DIM;
/// Dynamic shared memory: v02's K and V stages (the Q/P slots v02 adds are not needed); the
/// same for every block size (the merge slots reuse the stages).
pub const SHARED_BYTES: u32 = 2 * 2 * STAGES * BK * KV_LD;
/// k16 steps of `Q K^T` (and n16 column pairs of `O`) at the largest head dim.
const MAX_KD: u32 = MAX_HEAD_DIM / 16;
/// The merge slot a key warp past the first of a row tile leaves for that tile's first warp:
/// `O` (`KD x 2 x 4` f32 per lane), then `m` and `l` (2 per lane), stored `[value][lane]` so
/// the 32 lanes of a store hit 32 banks. Sized for the largest head dim.
const SLOT_WORDS: u32 = (MAX_KD * 8 + 4) * WARP_SIZE;
/// Merge slots of the largest block: one per key warp past the first of each row tile.
const MERGE_SLOTS: u32 = MAX_ROW_TILES * (KEY_WARPS - 1);
const _: () = assert!(BK == v02_vec::BK && BK == super::TILE_KEYS, "v02's tiles, the family's split tile");
const _: () = assert!(SHARED_BYTES == v02_vec::Q_OFF, "the K/V stages are v02's, from offset 0");
const _: () = assert!(Shared::<f32>::bytes(MERGE_SLOTS * SLOT_WORDS) <= SHARED_BYTES, "merge slots fit the stages");
const _: () = assert!(SHARED_BYTES <= 48 * 1024, "no opt-in");
const _: () = assert!(MAX_ROW_TILES * ROWS >= 8 * super::MAX_Q_LEN, "GQA 8 x the longest draft is one block");

/// Deliberately wrong variants (tests only): which bug a kernel carries.
pub const BUG_NONE: u32 = 0;
/// V's B fragments loaded without `.trans` (the K layout): a wrong fragment layout.
pub const BUG_V_NO_TRANS: u32 = 1;
/// Every row sees the block's whole key range: the per-row causal limit (and the padded
/// rows' empty limit) left out.
pub const BUG_NO_ROW_LIMIT: u32 = 2;
/// Every row tile gathers its queries from the block's first row tile (row tile index
/// ignored for Q; the keys' limits and the output rows are right): wrong past 16 rows.
pub const BUG_Q_ROW_TILE0: u32 = 3;

/// The kernel: one body per head dim (`p.d / 16` k-steps as a constant, so each k-step's
/// ldmatrix and mma are straight-line code the scheduler can overlap; a runtime bound put a
/// branch between every ldmatrix and its mma).
#[inline(always)]
pub fn run<T: MmaInput, const BUG: u32>(p: PagedDecodeParams<T>) {
    match p.d {
        32 => body::<T, BUG, 2>(p),
        64 => body::<T, BUG, 4>(p),
        96 => body::<T, BUG, 6>(p),
        _ => body::<T, BUG, 8>(p),
    }
}

/// Head dim `16 KD`.
#[inline(always)]
fn body<T: MmaInput, const BUG: u32, const KD: usize>(p: PagedDecodeParams<T>) {
    let (tid, threads) = (thread_idx_x(), block_dim_x());
    let (warp, lane) = (tid / WARP_SIZE, tid % WARP_SIZE);
    // Warp `w` computes row tile `w / KEY_WARPS` over key part `w % KEY_WARPS` of every tile.
    let (tile, part) = (warp / KEY_WARPS, warp % KEY_WARPS);
    let (g, t) = (lane / 4, lane % 4);
    let (split, by, b) = (block_idx_x(), block_idx_y(), block_idx_z());
    // The dispatch in `run` made `p.d == 16 KD`; as a constant it folds into the addresses.
    let (d, q_len, heads) = (16 * KD, p.q_len as usize, p.heads as usize);
    let group = p.heads / p.kv_heads;
    let total_rows = p.q_len * group;
    // The launcher sized the block from the rows (`PagedVersion::row_tiles`): the same
    // row groups as the grid's y.
    let rows_per_block = ROWS * (threads / TILE_THREADS);
    let groups = total_rows.div_ceil(rows_per_block);
    let (kvh, gi) = (by / groups, by % groups);
    let block_row0 = gi * rows_per_block;
    let block_rows = (total_rows - block_row0).min(rows_per_block);
    // This warp's rows: `row0 .. row0 + tile_rows`; none in a padding tile (the last row
    // group of a kv head past 64 rows), which still copies tiles and meets every barrier.
    let row0 = block_row0 + ROWS * tile;
    let tile_rows = block_rows.saturating_sub(ROWS * tile).min(ROWS);

    let ctx_len = p.context_lens.load(b as usize) as usize;
    // The block streams the keys its last row sees; rows (and tiles) ascend in new token.
    // Key positions are u32 (contexts are below 2^31, the launcher checks): with 64-bit
    // positions and the block size read at run time ptxas took 174 registers (sm_90), with
    // these 168, the one-tile kernel's count.
    let last_i = ((block_row0 + block_rows - 1) / group) as usize;
    let seen = causal_limit(ctx_len, q_len, last_i) as u32;
    let (begin, end) = if p.splits > 1 {
        let begin = split * p.split_keys;
        (begin, (begin + p.split_keys).min(seen))
    } else {
        (0, seen)
    };
    let n_tiles = if end > begin { (end - begin).div_ceil(BK) } else { 0 };

    // This lane's rows g and g + 8 of the row tile: where they read Q and write O, and the
    // keys they see (absolute, clipped to the block's range; 0 for padding rows: every key
    // masked).
    let mut valid = [false; 2];
    let mut out_at = [0usize; 2];
    let mut q_at = [0usize; 2];
    let mut lim = [0u32; 2];
    unroll8!(r < 2 => {
        let local = g + 8 * r as u32;
        if local < tile_rows {
            let (i, h) = row_token_head(row0 + local, kvh, group);
            valid[r] = true;
            out_at[r] = out_row(b as usize, i as usize, h as usize, q_len, heads);
            q_at[r] = out_at[r];
            lim[r] = (causal_limit(ctx_len, q_len, i as usize) as u32).min(end);
            if BUG == BUG_Q_ROW_TILE0 {
                let (i0, h0) = row_token_head(block_row0 + local, kvh, group);
                q_at[r] = out_row(b as usize, i0 as usize, h0 as usize, q_len, heads);
            }
        }
        if BUG == BUG_NO_ROW_LIMIT {
            lim[r] = end;
        }
    });

    // Q's A fragments for every k-step: registers 0..3 = (g, 2t..), (g + 8, 2t..),
    // (g, 2t + 8..), (g + 8, 2t + 8..) of columns 16 kk ... A negative scale is folded into
    // Q's sign (exact), so the exponent's scale is positive and the max commutes with it.
    let flip = if p.scale_log2 < 0.0 { 0x8000_8000u32 } else { 0 };
    let c = p.scale_log2.abs();
    let mut qf = [[0u32; 4]; KD];
    unroll8!(kk < KD => {
        unroll8!(e < 4 => {
            let r = e % 2;
            if valid[r] {
                let at = q_at[r] * d + 16 * kk + 2 * t as usize + 8 * (e / 2);
                qf[kk][e] = pack2(p.q.load(at).to_bits16(), p.q.load(at + 1).to_bits16()) ^ flip;
            }
        });
    });

    // The lanes' ldmatrix rows within this warp's 16 keys (the same for every row tile). K (plain, the "col" B of Q K^T):
    // matrices (keys 0-7, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15)
    // give B of key tiles 0 (registers 0, 1) and 1 (2, 3). V (.trans, a row-major k x n tile):
    // (keys 0-7, d 0-7), (keys 8-15, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 8-15) give B of
    // d tiles 0 (0, 1) and 1 (2, 3).
    let warp_keys = 16 * part * KV_LD;
    let k_lane = warp_keys + (lane % 8 + (lane / 16) * 8) * KV_LD + ((lane / 8) % 2) * 8;
    let v_lane = if BUG == BUG_V_NO_TRANS {
        k_lane
    } else {
        warp_keys + (lane % 8 + ((lane / 8) % 2) * 8) * KV_LD + (lane / 16) * 8
    };
    let (k_s, v_s) = (k_tiles::<T>(), v_tiles::<T>());

    let mut m = [f32::NEG_INFINITY; 2];
    let mut l = [0.0f32; 2];
    // O's n8 tiles as (column pair dp, half hf): dimensions 16 dp + 8 hf + 2 t, +1.
    let mut o = [[[0.0f32; 4]; 2]; KD];
    // Every thread of the block copies its share of each tile, once for all row tiles.
    let issue = |stage: u32, tile0: u32| {
        issue_kv_tile(&p, tid, threads, stage, tile0 as usize, end as usize, b as usize, kvh as usize);
    };
    if n_tiles > 0 {
        issue(0, begin);
    }
    for j in 0..n_tiles {
        let stage = j % STAGES;
        // Keep one tile in flight while this one is computed; the group committed for the
        // last tile is empty.
        if j + 1 < n_tiles {
            issue(1 - stage, begin + (j + 1) * BK);
        } else {
            cp_async_commit();
        }
        cp_async_wait_group::<1>();
        // Every thread's copies of tile j are in; the barrier makes them visible to all.
        sync_threads();

        let key0 = begin + j * BK + 16 * part;
        if key0 < end {
            let tile_at = stage * BK * KV_LD;
            // S = Q K^T over this warp's 16 keys: two n8 key tiles per ldmatrix.x4.
            let mut s = [[0.0f32; 4]; 2];
            unroll8!(kk < KD => {
                let r = ldmatrix::<T, 4>(k_s, tile_at + k_lane + 16 * kk as u32, false);
                s[0] = mma::mma_m16n8k16::<T>(qf[kk], [r[0], r[1]], s[0]);
                s[1] = mma::mma_m16n8k16::<T>(qf[kk], [r[2], r[3]], s[1]);
            });

            // Key 8 nt + 2 t + e % 2 (warp-relative) of row e / 2 counts when it is below
            // the row's limit: compared as a constant against `limit - key0 - 2 t`.
            let rel = [lim[0].saturating_sub(key0 + 2 * t), lim[1].saturating_sub(key0 + 2 * t)];
            let visible = |nt: usize, e: usize| -> bool { (8 * nt + e % 2) < rel[e / 2] as usize };
            let mut mx = [f32::NEG_INFINITY; 2];
            unroll8!(nt < 2 => {
                unroll8!(e < 4 => {
                    if visible(nt, e) {
                        mx[e / 2] = math::max_nan(mx[e / 2], s[nt][e]);
                    }
                });
            });
            let mut corr = [1.0f32; 2];
            unroll8!(r < 2 => {
                let tile_max = mma::quad_max(mx[r]);
                // c * -inf would be NaN for c = 0; no visible key leaves the max as it was.
                let scaled = if tile_max == f32::NEG_INFINITY { f32::NEG_INFINITY } else { tile_max * c };
                let m_new = math::max_nan(m[r], scaled);
                if m_new != f32::NEG_INFINITY {
                    // exp2(-inf) = 0: the first visible tile drops the (empty) old state.
                    corr[r] = math::exp2_approx_ftz(m[r] - m_new);
                }
                m[r] = m_new;
            });
            let mut sum = [0.0f32; 2];
            unroll8!(nt < 2 => {
                unroll8!(e < 4 => {
                    let pv = if visible(nt, e) { math::exp2_approx_ftz(math::fma(s[nt][e], c, -m[e / 2])) } else { 0.0 };
                    s[nt][e] = pv;
                    sum[e / 2] += pv;
                });
            });
            unroll8!(r < 2 => {
                l[r] = l[r] * corr[r] + sum[r];
            });

            // O += P V. P's C fragments of key tiles 0 and 1 are the A fragment of the warp's
            // k16 step (`mma::a_from_c`).
            let a = mma::a_from_c::<T>(s[0], s[1]);
            unroll8!(dp < KD => {
                unroll8!(hf < 2 => {
                    unroll8!(e < 4 => {
                        o[dp][hf][e] *= corr[e / 2];
                    });
                });
                let r = ldmatrix::<T, 4>(v_s, tile_at + v_lane + 16 * dp as u32, BUG != BUG_V_NO_TRANS);
                o[dp][0] = mma::mma_m16n8k16::<T>(a, [r[0], r[1]], o[dp][0]);
                o[dp][1] = mma::mma_m16n8k16::<T>(a, [r[2], r[3]], o[dp][1]);
            });
        }
        // Every warp is done with this stage before the next iteration refills it.
        sync_threads();
    }
    cp_async_wait_group::<0>();

    // Merge each row tile's key warps (each covered its own keys of every tile) into its
    // first. The K/V stages are free: the loop's last barrier follows every read, and no
    // copy is pending.
    l = [mma::quad_sum(l[0]), mma::quad_sum(l[1])];
    let slot = |w: u32, value: u32| -> u32 { (tile * (KEY_WARPS - 1) + w - 1) * SLOT_WORDS + value * WARP_SIZE + lane };
    const { assert!(KD as u32 <= MAX_KD) };
    let merge = Shared::<f32>::at(0, MERGE_SLOTS * SLOT_WORDS);
    if part > 0 {
        unroll8!(dp < KD => {
            unroll8!(hf < 2 => {
                unroll8!(e < 4 => {
                    merge.store(slot(part, (8 * dp + 4 * hf + e) as u32), o[dp][hf][e]);
                });
            });
        });
        unroll8!(r < 2 => {
            merge.store(slot(part, 8 * KD as u32 + r as u32), m[r]);
            merge.store(slot(part, 8 * KD as u32 + 2 + r as u32), l[r]);
        });
    }
    sync_threads();
    if part > 0 {
        return;
    }
    let mut w = 1;
    while w < KEY_WARPS {
        unroll8!(r < 2 => {
            let mw = merge.load(slot(w, 8 * KD as u32 + r as u32));
            let lw = merge.load(slot(w, 8 * KD as u32 + 2 + r as u32));
            let big = math::max_nan(m[r], mw);
            // Both empty: nothing to merge (and -inf - -inf would be NaN).
            if big != f32::NEG_INFINITY {
                let (a0, aw) = (math::exp2_approx_ftz(m[r] - big), math::exp2_approx_ftz(mw - big));
                l[r] = math::fma(l[r], a0, lw * aw);
                unroll8!(dp < KD => {
                    unroll8!(hf < 2 => {
                        unroll8!(eh < 2 => {
                            let e = 2 * r + eh;
                            let ow = merge.load(slot(w, (8 * dp + 4 * hf + e) as u32));
                            o[dp][hf][e] = math::fma(o[dp][hf][e], a0, ow * aw);
                        });
                    });
                });
                m[r] = big;
            }
        });
        w += 1;
    }

    unroll8!(r < 2 => {
        if valid[r] {
            if p.splits > 1 {
                // Unnormalized state for the combine; an empty chunk writes (-inf, 0, 0).
                let base = (out_at[r] * p.splits as usize + split as usize) * partial_words(p.d) as usize;
                if t == 0 {
                    p.partial.store(base, m[r].to_bits());
                    p.partial.store(base + 1, l[r].to_bits());
                }
                unroll8!(dp < KD => {
                    unroll8!(hf < 2 => {
                        let col = 16 * dp + 8 * hf + 2 * t as usize;
                        p.partial.store(base + 2 + col, o[dp][hf][2 * r].to_bits());
                        p.partial.store(base + 3 + col, o[dp][hf][2 * r + 1].to_bits());
                    });
                });
            } else {
                let inv = if l[r] > 0.0 { 1.0 / l[r] } else { 0.0 };
                unroll8!(dp < KD => {
                    unroll8!(hf < 2 => {
                        let at = out_at[r] * d + 16 * dp + 8 * hf + 2 * t as usize;
                        p.o.store(at, T::from_f32(o[dp][hf][2 * r] * inv));
                        p.o.store(at + 1, T::from_f32(o[dp][hf][2 * r + 1] * inv));
                    });
                });
            }
        }
    });
}
