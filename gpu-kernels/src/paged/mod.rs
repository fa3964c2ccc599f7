//! Decode attention over a paged KV cache: one query token per sequence attends to that
//! sequence's cached keys and values, found page by page through its block table.
//!
//! # Layout
//! - `k_cache, v_cache: [num_pages, kv_heads, page_size, d]`, contiguous: a physical page
//!   holds `page_size` consecutive tokens of every kv head, each token's head row contiguous.
//! - `block_tables: [batch, max_pages]` (i32): logical page `i` of sequence `b` is physical
//!   page `block_tables[b * max_pages + i]`; token `j` of the sequence lives in page
//!   `block_tables[b * max_pages + j / page_size]`, slot `j % page_size`.
//! - `context_lens: [batch]` (i32): tokens in each sequence's cache (0 gives `O = 0`).
//! - `q, o: [batch, heads, d]`: one query token per sequence. Grouped-query attention: head
//!   `h` reads kv head `h / (heads / kv_heads)`.
//!
//! # Split-K (flash-decoding)
//! With `splits > 1` the context is cut into chunks of `split_keys` tokens; each (sequence,
//! head, chunk) writes its partial softmax state `(m, l, acc[d])` (base-2 max, sum of
//! `2^(s - m)`, unnormalized `sum 2^(s - m) v`) into scratch, and [`v01_simt::combine`]
//! merges the chunks in a fixed order (log-sum-exp merge), so results are bitwise
//! deterministic run to run. With `splits == 1` the decode kernel writes `O` directly.
//!
//! The ladder: `v01_simt` (CUDA cores, f32 math, K/V tiles in shared memory).

pub mod v01_simt;

/// Parameters of the decode and combine kernels (one struct for both launches).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PagedDecodeParams<T> {
    pub batch: u32,
    pub heads: u32,
    pub kv_heads: u32,
    /// Head dimension (a multiple of 32, at most [`v01_simt::MAX_HEAD_DIM`]).
    pub d: u32,
    /// Tokens per page (16, 32 or 64).
    pub page_size: u32,
    /// Columns of `block_tables`.
    pub max_pages: u32,
    /// Context chunks per sequence (grid x of the decode kernel); 1: no split.
    pub splits: u32,
    /// Tokens per chunk when `splits > 1` (a multiple of [`v01_simt::BK`]).
    pub split_keys: u32,
    /// `scale * log2(e)`: scores are kept in base-2 units so the exponentials are `ex2`.
    pub scale_log2: f32,
    pub q: crate::device::Global<T>,
    pub k_cache: crate::device::Global<T>,
    pub v_cache: crate::device::Global<T>,
    pub block_tables: crate::device::Global<i32>,
    pub context_lens: crate::device::Global<i32>,
    pub o: crate::device::GlobalMut<T>,
    /// `[batch, heads, splits, d + 2]` f32 bits: `(m, l, acc[d])` per chunk (split only).
    pub partial: crate::device::GlobalMut<u32>,
}

/// Parameters of the append kernel: writes one new token's K and V per sequence into its page.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PagedAppendParams<T> {
    pub batch: u32,
    pub kv_heads: u32,
    pub d: u32,
    pub page_size: u32,
    pub max_pages: u32,
    /// `[batch, kv_heads, d]`: the new token's keys and values.
    pub k_new: crate::device::Global<T>,
    pub v_new: crate::device::Global<T>,
    pub block_tables: crate::device::Global<i32>,
    /// Tokens already cached; the new token goes to position `context_lens[b]`.
    pub context_lens: crate::device::Global<i32>,
    pub k_cache: crate::device::GlobalMut<T>,
    pub v_cache: crate::device::GlobalMut<T>,
}

type F16 = half::f16;
type Bf16 = half::bf16;

crate::kernels! {
    PAGED_DECODE_V01_BF16 = paged_decode_v01_bf16(PagedDecodeParams<Bf16>) => v01_simt::run::<Bf16>;
    PAGED_DECODE_V01_F16 = paged_decode_v01_f16(PagedDecodeParams<F16>) => v01_simt::run::<F16>;
    PAGED_DECODE_COMBINE_BF16 = paged_decode_combine_bf16(PagedDecodeParams<Bf16>) => v01_simt::combine::<Bf16>;
    PAGED_DECODE_COMBINE_F16 = paged_decode_combine_f16(PagedDecodeParams<F16>) => v01_simt::combine::<F16>;
    PAGED_APPEND_BF16 = paged_append_bf16(PagedAppendParams<Bf16>) => v01_simt::append::<Bf16>;
    PAGED_APPEND_F16 = paged_append_f16(PagedAppendParams<F16>) => v01_simt::append::<F16>;
}

/// Threads per block of `name` if it is a paged-attention kernel (all launch [`v01_simt::THREADS`]).
pub fn launch_threads(name: &str) -> Option<u32> {
    KERNEL_NAMES.contains(&name).then_some(v01_simt::THREADS)
}
