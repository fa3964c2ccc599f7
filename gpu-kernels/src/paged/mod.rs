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
//! | [`v03_mma`] | m16 row tiles on `mma.sync` m16n8k16 (sm_80+): `S = Q K^T` and `O += P V` on the tensor cores, online softmax on the accumulator fragments, P re-packed in registers, V by `ldmatrix .trans`; v02's tiles and pipeline, 2 warps per row tile splitting each tile's keys, merged at the end; 1 to 4 row tiles per block, sized at launch, so a kv head's KV is read once for up to 64 rows (GQA 8 x 8 new tokens) |

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
    /// Deliberately wrong (tests only): v03 where every row tile gathers the first one's queries.
    PAGED_DECODE_BUG_V03_Q_ROW_TILE0 = paged_decode_bug_v03_q_row_tile0(PagedDecodeParams<Bf16>) => v03_mma::run::<Bf16, { v03_mma::BUG_Q_ROW_TILE0 }>;
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
    /// Threads per row tile: a block is 1 to [`PagedVersion::max_row_tiles`] of them.
    pub tile_threads: u32,
    /// Query rows (new token x query head of one kv group) per row tile.
    pub tile_rows: u32,
    /// Most row tiles one block takes (1: a fixed block of `tile_threads`).
    pub max_row_tiles: u32,
    /// Dynamic shared memory of every block size.
    pub shared_bytes: u32,
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
    /// Row tiles per block for a kv head of `rows` query rows: as few row groups (blocks per
    /// kv head) as the block's largest size allows, `ceil(rows / (tile_rows *
    /// max_row_tiles))`, and the rows spread evenly over them, so a block carries at most one
    /// partly padded tile. The kernel reads it back from its block size.
    pub const fn row_tiles(&self, rows: u32) -> u32 {
        let groups = rows.div_ceil(self.tile_rows * self.max_row_tiles);
        if groups == 0 { 1 } else { rows.div_ceil(groups * self.tile_rows) }
    }

    /// Threads of the decode block for `rows` query rows per kv head.
    pub const fn threads(&self, rows: u32) -> u32 {
        self.row_tiles(rows) * self.tile_threads
    }

    /// The largest block: what the PTX is declared for ([`launch_threads`]).
    pub const fn max_threads(&self) -> u32 {
        self.max_row_tiles * self.tile_threads
    }

    /// Query rows one block owns for `rows` per kv head.
    pub const fn rows_per_block(&self, rows: u32) -> u32 {
        self.row_tiles(rows) * self.tile_rows
    }

    /// Blocks along grid y per kv head: its `rows = q_len * heads / kv_heads` rows in groups
    /// of [`PagedVersion::rows_per_block`].
    pub const fn row_groups(&self, heads: u32, kv_heads: u32, q_len: u32) -> u32 {
        let rows = q_len * (heads / kv_heads);
        rows.div_ceil(self.rows_per_block(rows))
    }
}

/// Every version, in ladder order; the last is the default.
#[cfg(not(target_arch = "nvptx64"))]
pub const VERSIONS: &[PagedVersion] = &[
    PagedVersion {
        name: "v01_simt",
        bf16: &PAGED_DECODE_V01_BF16,
        f16: &PAGED_DECODE_V01_F16,
        tile_threads: v01_simt::THREADS,
        tile_rows: v01_simt::WARPS,
        max_row_tiles: 1,
        shared_bytes: v01_simt::SHARED_BYTES,
        vector_loads: false,
        tensor_cores: false,
    },
    PagedVersion {
        name: "v02_vec",
        bf16: &PAGED_DECODE_V02_BF16,
        f16: &PAGED_DECODE_V02_F16,
        tile_threads: v02_vec::THREADS,
        tile_rows: v02_vec::MAX_ROWS,
        max_row_tiles: 1,
        shared_bytes: v02_vec::SHARED_BYTES,
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
        tile_threads: v03_mma::TILE_THREADS,
        tile_rows: v03_mma::ROWS,
        max_row_tiles: v03_mma::MAX_ROW_TILES,
        shared_bytes: v03_mma::SHARED_BYTES,
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

/// Deliberately wrong (tests only): v03 where every row tile gathers the queries of the
/// block's first row tile (its key limits and output rows are right), so every row past the
/// 16th is wrong; bf16 only, as above.
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_V03_Q_ROW_TILE0: PagedVersion =
    v03(&PAGED_DECODE_BUG_V03_Q_ROW_TILE0, &PAGED_DECODE_V03_F16, "bug_v03_q_row_tile0");

/// The deliberately wrong variants of the ladder (tests only).
#[cfg(not(target_arch = "nvptx64"))]
pub const BUGS: &[PagedVersion] = &[BUG_V03_V_NO_TRANS, BUG_V03_NO_ROW_LIMIT, BUG_V03_Q_ROW_TILE0];

/// Largest block (threads) of `name` if it is a paged-attention kernel: the launcher sizes a
/// decode block from the rows ([`PagedVersion::threads`]), never above this.
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_threads(name: &str) -> Option<u32> {
    if let Some(v) = VERSIONS.iter().chain(BUGS).find(|v| v.bf16.name == name || v.f16.name == name) {
        return Some(v.max_threads());
    }
    // The combine and the append launch v01's block.
    KERNEL_NAMES.contains(&name).then_some(v01_simt::THREADS)
}
