//! Decode attention over a paged KV cache: `q_len` new query tokens per sequence (1 for plain
//! decode, up to [`MAX_Q_LEN`] for speculative decoding) attend to that sequence's cached keys
//! and values, found page by page through its block table.
//!
//! # Layout
//! - `k_cache, v_cache: [num_pages, kv_heads, page_size, d]`, contiguous: a physical page
//!   holds `page_size` consecutive tokens of every kv head, each token's head row contiguous.
//! - `block_tables: [batch, max_pages]` (i32): logical page `i` of sequence `b` is physical
//!   page `block_tables[b * max_pages + i]`; token `j` of the sequence lives in page
//!   `block_tables[b * max_pages + j / page_size]`, slot `j % page_size`.
//! - `context_lens: [batch]` (i32): tokens in each sequence's cache, the `q_len` new tokens
//!   included (they were appended first); 0 marks an empty slot (`O = 0`), otherwise the
//!   launcher guarantees `context_len >= q_len`.
//! - `q, o: [batch, q_len, heads, d]`: token-major, so `q_len = 1` is `[batch, heads, d]`.
//!   Grouped-query attention: head `h` reads kv head `h / (heads / kv_heads)`.
//! - Causal within the new tokens: new token `i` (0-based) of `n = q_len` sees keys
//!   `j < context_len - n + i + 1` (itself and everything before it).
//!
//! # Query rows
//! A block of any version owns some *rows*: pairs (new token `i`, query head of one kv group),
//! numbered `rho = i * group + (h - kv_head * group)`, `group = heads / kv_heads`. Every
//! version keeps all the rows of a kv head in as few blocks as its row budget allows, so each
//! KV byte is read once per block, not once per query head.
//!
//! # Split-K (flash-decoding)
//! With `splits > 1` the context is cut into chunks of `split_keys` tokens; each (sequence,
//! head, chunk) writes its partial softmax state `(m, l, acc[d])` (base-2 max, sum of
//! `2^(s - m)`, unnormalized `sum 2^(s - m) v`) into scratch, and [`v01_simt::combine`] (one
//! combine for every version) merges the chunks in a fixed order (log-sum-exp merge), so
//! results are bitwise deterministic run to run. With `splits == 1` the decode kernel writes
//! `O` directly. A chunk a row cannot see (past its causal limit) writes `(-inf, 0, 0)`.
//!
//! # The ladder
//! | version | adds |
//! |---|---|
//! | [`v01_simt`] | CUDA cores, f32 math; scalar 2-byte loads, a block-table lookup per element, K/V staged as f32 in shared memory; 4 rows per block |
//! | [`v02_vec`] | 16-byte `cp.async` loads (one table lookup per page a thread touches), a 2-stage pipeline, raw 16-bit tiles; 16 rows per block, so a kv head's KV is read once for up to 16 (token, head) rows |
//! | [`v03_mma`] | the block's 16 rows as one m16 tile on `mma.sync` m16n8k16 (sm_80+): `S = Q K^T` and `O += P V` on the tensor cores, online softmax on the accumulator fragments, P re-packed in registers, V by `ldmatrix .trans`; v02's tiles and pipeline, 2 warps splitting each tile's keys, merged at the end |

pub mod v01_simt;
pub mod v02_vec;
pub mod v03_mma;

/// Most new tokens per sequence (speculative decoding's draft length).
pub const MAX_Q_LEN: u32 = 8;

/// Parameters of the decode and combine kernels (one struct for both launches).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PagedDecodeParams<T> {
    pub batch: u32,
    pub heads: u32,
    pub kv_heads: u32,
    /// New query tokens per sequence (1..=[`MAX_Q_LEN`]).
    pub q_len: u32,
    /// Head dimension (a multiple of 32, at most [`v01_simt::MAX_HEAD_DIM`]).
    pub d: u32,
    /// Tokens per page (16, 32 or 64).
    pub page_size: u32,
    /// Columns of `block_tables`.
    pub max_pages: u32,
    /// Context chunks per sequence (grid x of the decode kernel); 1: no split.
    pub splits: u32,
    /// Tokens per chunk when `splits > 1` (a multiple of [`TILE_KEYS`]).
    pub split_keys: u32,
    /// `scale * log2(e)`: scores are kept in base-2 units so the exponentials are `ex2`.
    pub scale_log2: f32,
    pub q: crate::device::Global<T>,
    pub k_cache: crate::device::Global<T>,
    pub v_cache: crate::device::Global<T>,
    pub block_tables: crate::device::Global<i32>,
    pub context_lens: crate::device::Global<i32>,
    pub o: crate::device::GlobalMut<T>,
    /// `[batch, q_len, heads, splits, d + 2]` f32 bits: `(m, l, acc[d])` per chunk (split only).
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
    PAGED_DECODE_V02_BF16 = paged_decode_v02_bf16(PagedDecodeParams<Bf16>) => v02_vec::run::<Bf16>;
    PAGED_DECODE_V02_F16 = paged_decode_v02_f16(PagedDecodeParams<F16>) => v02_vec::run::<F16>;
    PAGED_DECODE_V03_BF16 = paged_decode_v03_bf16(PagedDecodeParams<Bf16>) => v03_mma::run::<Bf16, { v03_mma::BUG_NONE }>;
    PAGED_DECODE_V03_F16 = paged_decode_v03_f16(PagedDecodeParams<F16>) => v03_mma::run::<F16, { v03_mma::BUG_NONE }>;
    /// Deliberately wrong (tests only): v03 with V's B fragments loaded without `.trans`.
    PAGED_DECODE_BUG_V03_V_NO_TRANS = paged_decode_bug_v03_v_no_trans(PagedDecodeParams<Bf16>) => v03_mma::run::<Bf16, { v03_mma::BUG_V_NO_TRANS }>;
    /// Deliberately wrong (tests only): v03 without the per-row key limit (causal, padding).
    PAGED_DECODE_BUG_V03_NO_ROW_LIMIT = paged_decode_bug_v03_no_row_limit(PagedDecodeParams<Bf16>) => v03_mma::run::<Bf16, { v03_mma::BUG_NO_ROW_LIMIT }>;
    PAGED_DECODE_COMBINE_BF16 = paged_decode_combine_bf16(PagedDecodeParams<Bf16>) => v01_simt::combine::<Bf16>;
    PAGED_DECODE_COMBINE_F16 = paged_decode_combine_f16(PagedDecodeParams<F16>) => v01_simt::combine::<F16>;
    PAGED_APPEND_BF16 = paged_append_bf16(PagedAppendParams<Bf16>) => v01_simt::append::<Bf16>;
    PAGED_APPEND_F16 = paged_append_f16(PagedAppendParams<F16>) => v01_simt::append::<F16>;
}

/// Tokens per key tile in every version: split chunks are multiples of it, so a tile never
/// crosses a chunk boundary.
pub const TILE_KEYS: u32 = v01_simt::BK;
const _: () = assert!(v02_vec::BK == TILE_KEYS, "one tile size for the split rule of every version");
const _: () = assert!(v03_mma::BK == TILE_KEYS, "one tile size for the split rule of every version");
const _: () = assert!(v02_vec::MAX_HEAD_DIM == v01_simt::MAX_HEAD_DIM, "one head-dim limit for the launcher");
const _: () = assert!(v03_mma::MAX_HEAD_DIM == v01_simt::MAX_HEAD_DIM, "one head-dim limit for the launcher");

/// One rung of the ladder: its kernels and the launch shape the host derives from it.
#[cfg(not(target_arch = "nvptx64"))]
pub struct PagedVersion {
    pub name: &'static str,
    pub bf16: &'static crate::KernelDef<PagedDecodeParams<Bf16>>,
    pub f16: &'static crate::KernelDef<PagedDecodeParams<F16>>,
    pub threads: u32,
    pub shared_bytes: u32,
    /// Query rows (new token x query head of one kv group) one block owns.
    pub rows_per_block: u32,
    /// Nonzero: K/V are read in 16-byte chunks, so the caches must be 16-byte aligned.
    pub vector_loads: bool,
    /// `mma.sync` on the tensor cores (sm_80+; the SASS gate checks HMMA, LDSM, LDGSTS).
    pub tensor_cores: bool,
}

#[cfg(not(target_arch = "nvptx64"))]
impl core::fmt::Debug for PagedVersion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl PagedVersion {
    /// Blocks along grid y per kv head: its `q_len * heads / kv_heads` rows in groups of
    /// [`PagedVersion::rows_per_block`].
    pub const fn row_groups(&self, heads: u32, kv_heads: u32, q_len: u32) -> u32 {
        (q_len * (heads / kv_heads)).div_ceil(self.rows_per_block)
    }
}

/// Every version, in ladder order; the last is the default.
#[cfg(not(target_arch = "nvptx64"))]
pub const VERSIONS: &[PagedVersion] = &[
    PagedVersion {
        name: "v01_simt",
        bf16: &PAGED_DECODE_V01_BF16,
        f16: &PAGED_DECODE_V01_F16,
        threads: v01_simt::THREADS,
        shared_bytes: v01_simt::SHARED_BYTES,
        rows_per_block: v01_simt::WARPS,
        vector_loads: false,
        tensor_cores: false,
    },
    PagedVersion {
        name: "v02_vec",
        bf16: &PAGED_DECODE_V02_BF16,
        f16: &PAGED_DECODE_V02_F16,
        threads: v02_vec::THREADS,
        shared_bytes: v02_vec::SHARED_BYTES,
        rows_per_block: v02_vec::MAX_ROWS,
        vector_loads: true,
        tensor_cores: false,
    },
    v03(&PAGED_DECODE_V03_BF16, &PAGED_DECODE_V03_F16, "v03_mma"),
];

#[cfg(not(target_arch = "nvptx64"))]
const fn v03(
    bf16: &'static crate::KernelDef<PagedDecodeParams<Bf16>>,
    f16: &'static crate::KernelDef<PagedDecodeParams<F16>>,
    name: &'static str,
) -> PagedVersion {
    PagedVersion {
        name,
        bf16,
        f16,
        threads: v03_mma::THREADS,
        shared_bytes: v03_mma::SHARED_BYTES,
        rows_per_block: v03_mma::ROWS,
        vector_loads: true,
        tensor_cores: true,
    }
}

/// Deliberately wrong (tests only, not in [`VERSIONS`]): v03 with V's B fragments loaded
/// without `.trans` (a wrong fragment layout); bf16 only (its f16 slot is the correct kernel,
/// never used by the tests).
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_V03_V_NO_TRANS: PagedVersion =
    v03(&PAGED_DECODE_BUG_V03_V_NO_TRANS, &PAGED_DECODE_V03_F16, "bug_v03_v_no_trans");

/// Deliberately wrong (tests only): v03 where every row sees the block's whole key range
/// (the causal limit of each new token dropped); bf16 only, as above.
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_V03_NO_ROW_LIMIT: PagedVersion =
    v03(&PAGED_DECODE_BUG_V03_NO_ROW_LIMIT, &PAGED_DECODE_V03_F16, "bug_v03_no_row_limit");

/// Threads per block of `name` if it is a paged-attention kernel.
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_threads(name: &str) -> Option<u32> {
    let all = VERSIONS.iter().chain([&BUG_V03_V_NO_TRANS, &BUG_V03_NO_ROW_LIMIT]);
    if let Some(v) = all.into_iter().find(|v| v.bf16.name == name || v.f16.name == name) {
        return Some(v.threads);
    }
    // The combine and the append launch v01's block.
    KERNEL_NAMES.contains(&name).then_some(v01_simt::THREADS)
}
