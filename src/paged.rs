//! Decode attention over a paged KV cache (`q_len` new query tokens per sequence, 1 to 8, causal
//! among themselves; GQA, variable context lengths in one batch, bf16/f16), with split-K over
//! the context (flash-decoding) and a fixed-order combine; and `paged_append`, which writes each
//! sequence's new token into its page. Layout: see `gpu-kernels/src/paged/mod.rs` (`k_cache,
//! v_cache: [num_pages, kv_heads, page_size, head_dim]`, `q, o: [batch, q_len, heads,
//! head_dim]`).
//!
//! **Versions**: [`VERSIONS`] is the ladder (`v01_simt`, `v02_vec`, `v03_mma`);
//! [`paged_decode`] runs the one [`pick_version`] names (v03 on the tensor cores from
//! [`MMA_MIN_ROWS`] query rows per kv head, v02 below, v01 for caches that are not 16-byte
//! aligned: a predicted rule, not yet measured), [`paged_decode_with`] any of them.
//!
//! **Block tables and context lengths come from the host** (`&[i32]`): [`PagedTables::new`]
//! validates them (every page a context uses is in `0..num_pages`, no context longer than its
//! table) and uploads them once, so a bad table is a typed error before any launch, never an
//! out-of-bounds read, and one validated table serves every layer's decode of a step.
//! `paged_append` takes the host slices directly (validated and uploaded per call). Entries
//! past a sequence's used pages are ignored (any value).
//!
//! Bitwise deterministic run to run: no atomics, the combine merges chunks in order.
//! Checked against the f64 reference with FlashAttention's rule (see [`check`]).

use crate::check::{self, Guarded, Report};
use crate::{BufMut, BufRef, Context, DType, Dim3, Error, Float, LaunchConfig, Result};
use gpu_kernels::KernelDef;
use gpu_kernels::device::GlobalMut;
use gpu_kernels::paged::v01_simt::{MAX_HEAD_DIM, THREADS, WARPS, causal_limit, partial_words};
use gpu_kernels::paged::{self as k, MAX_Q_LEN, PagedAppendParams, PagedDecodeParams, TILE_KEYS};
pub use gpu_kernels::paged::{
    BUG_V03_NO_ROW_LIMIT, BUG_V03_Q_ROW_TILE0, BUG_V03_V_NO_TRANS, BUGS, PagedVersion, VERSIONS,
};
use half::{bf16, f16};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const OP: &str = "paged_decode";
const OP_APPEND: &str = "paged_append";

/// Page sizes (tokens per page) the kernels support.
pub const PAGE_SIZES: &[usize] = &[16, 32, 64];

/// The cache types: bf16 and f16.
pub trait PagedFloat: Float {
    const COMBINE: &'static KernelDef<PagedDecodeParams<Self>>;
    const APPEND: &'static KernelDef<PagedAppendParams<Self>>;
    /// Version `v`'s decode kernel for this type.
    fn decode(v: &PagedVersion) -> &'static KernelDef<PagedDecodeParams<Self>>;
}
impl PagedFloat for bf16 {
    const COMBINE: &'static KernelDef<PagedDecodeParams<Self>> = &k::PAGED_DECODE_COMBINE_BF16;
    const APPEND: &'static KernelDef<PagedAppendParams<Self>> = &k::PAGED_APPEND_BF16;
    fn decode(v: &PagedVersion) -> &'static KernelDef<PagedDecodeParams<Self>> {
        v.bf16
    }
}
impl PagedFloat for f16 {
    const COMBINE: &'static KernelDef<PagedDecodeParams<Self>> = &k::PAGED_DECODE_COMBINE_F16;
    const APPEND: &'static KernelDef<PagedAppendParams<Self>> = &k::PAGED_APPEND_F16;
    fn decode(v: &PagedVersion) -> &'static KernelDef<PagedDecodeParams<Self>> {
        v.f16
    }
}

/// Rows per kv head (`q_len * heads / kv_heads`) from which [`paged_decode`] runs `v03_mma`.
pub const MMA_MIN_ROWS: usize = 8;

/// The version [`paged_decode`] runs for `rows = q_len * heads / kv_heads` query rows per kv
/// head (see [`PagedShape::rows_per_kv_head`]); `aligned`: both caches start 16-byte aligned.
///
/// The rule, a **prediction from instruction counts, not yet measured on a GPU** (the bench
/// times every version on every shape, so the threshold can move once it is):
/// - caches not 16-byte aligned: `v01_simt` (the only version that loads elements);
/// - `rows >=` [`MMA_MIN_ROWS`]: `v03_mma`. v02's CUDA-core work grows with the rows
///   (`2 * rows` flops per KV byte, as FFMA plus conversions and shared loads); its docs
///   estimate ~22 B/cycle of issue at 4 rows per block against the ~16.5 B/cycle an SM's
///   share of H200 DRAM needs, so at 8 rows it is at or past the point where issue, not DRAM,
///   limits it. v03's tensor-core work per tile is the same for 1 to 16 rows (one padded m16
///   row tile), ~240 warp instructions per 16 KB tile at d = 128 and row tile. Past 16 rows
///   the bytes decide too: v02 runs `ceil(rows / 16)` blocks per kv head, each reading its
///   K/V, while v03 puts up to 64 rows (4 row tiles) in one block and reads them once.
/// - fewer rows: `v02_vec`. Both are predicted DRAM-bound there, so speed should not decide;
///   v02 spends nothing on padded rows and keeps 4 warps per block to v03's 2.
pub fn pick_version(rows: usize, aligned: bool) -> &'static PagedVersion {
    let name = match (aligned, rows >= MMA_MIN_ROWS) {
        (false, _) => "v01_simt",
        (true, true) => "v03_mma",
        (true, false) => "v02_vec",
    };
    version(name).expect("the picked versions are in the ladder")
}

/// Looks a version up by name (`v01_simt`, `v02_vec`, `v03_mma`).
pub fn version(name: &str) -> Option<&'static PagedVersion> {
    VERSIONS.iter().find(|v| v.name == name)
}

/// The cache's and the batch's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagedShape {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    /// New query tokens per sequence (1..=8; 1 is plain decode). Token `i` of them sees
    /// keys `j < context_len - q_len + i + 1`.
    pub q_len: usize,
    pub head_dim: usize,
    /// Tokens per page: 16, 32 or 64.
    pub page_size: usize,
    /// Physical pages in the cache.
    pub num_pages: usize,
    /// Columns of the block table (logical pages per sequence at most).
    pub max_pages: usize,
}

impl PagedShape {
    /// Elements of `q` and of `o`: `[batch, q_len, heads, head_dim]`.
    pub fn q_elems(&self) -> usize {
        self.batch * self.q_len * self.heads * self.head_dim
    }
    /// Each of `k_cache`, `v_cache`: `[num_pages, kv_heads, page_size, head_dim]`.
    pub fn cache_len(&self) -> usize {
        self.num_pages * self.kv_heads * self.page_size * self.head_dim
    }
    /// `block_tables`: `[batch, max_pages]`.
    pub fn table_len(&self) -> usize {
        self.batch * self.max_pages
    }
    /// Query rows (new token x query head) that read one kv head: `q_len * heads / kv_heads`.
    pub fn rows_per_kv_head(&self) -> usize {
        self.q_len * self.heads / self.kv_heads.max(1)
    }
    /// Append's `k_new`, `v_new`: `[batch, kv_heads, head_dim]`.
    pub fn new_len(&self) -> usize {
        self.batch * self.kv_heads * self.head_dim
    }
    /// Element offset of token `slot` of kv head `kvh` in physical page `page`.
    pub fn cache_row(&self, page: usize, kvh: usize, slot: usize) -> usize {
        ((page * self.kv_heads + kvh) * self.page_size + slot) * self.head_dim
    }
}

/// How the context is cut for split-K (flash-decoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Split when the batch gives too few blocks to fill the GPU and contexts are long.
    Auto,
    /// One block per (sequence, head group) over the whole context.
    Off,
    /// Chunks of this many tokens (a positive multiple of 32), then the combine.
    Keys(usize),
}

/// SMs of the target GPU (H200, also H100 SXM).
pub const TARGET_SMS: usize = 132;
/// Blocks the auto split aims for: two per SM. One v02 block keeps one 16 KB tile in flight
/// while it computes the other (d = 128); an H200 SM needs ~23 KB in flight to draw its
/// 1/132 of 4.3 TB/s at ~700 ns latency, so two resident blocks per SM is the least that
/// can saturate DRAM (see `gpu_kernels::paged::v02_vec`).
pub const AUTO_TARGET_BLOCKS: usize = 2 * TARGET_SMS;
/// Shortest chunk the auto split makes, in tokens: the combine moves `(d + 2) * 4` bytes per
/// row and chunk twice (write, read), at most ~1/8 of a 256-token chunk's KV bytes even with
/// 16 rows per block, and 1/32 at 4 rows.
pub const AUTO_MIN_CHUNK: usize = 256;

/// `(splits, split_keys)` for a batch whose longest context is `max_ctx`, run by `v`.
///
/// The auto rule: with `blocks = batch * kv_heads * row_groups` blocks per chunk (row groups
/// as `v` packs the `q_len * heads / kv_heads` rows of a kv head: v03 takes up to 64 rows in
/// one block, so a GQA-8 speculative step is one block per kv head), no split when `blocks >=`
/// [`AUTO_TARGET_BLOCKS`] (the grid already fills 132 SMs twice) or `max_ctx < 2 *`
/// [`AUTO_MIN_CHUNK`]; otherwise `ceil(AUTO_TARGET_BLOCKS / blocks)` chunks, at most
/// `max_ctx / AUTO_MIN_CHUNK`, each `ceil(max_ctx / splits)` tokens rounded up to the
/// 32-token tile (so the final count may drop by the rounding). Shorter contexts of the batch
/// leave their trailing chunks empty (they exit at once).
pub fn split_plan(v: &PagedVersion, s: &PagedShape, max_ctx: usize, split: Split) -> (usize, usize) {
    let chunk = match split {
        Split::Off => return (1, 0),
        Split::Keys(n) => n,
        Split::Auto => {
            let rows = v.row_groups(s.heads as u32, s.kv_heads.max(1) as u32, s.q_len.max(1) as u32) as usize;
            let blocks = s.batch * s.kv_heads * rows;
            if blocks >= AUTO_TARGET_BLOCKS || max_ctx < 2 * AUTO_MIN_CHUNK {
                return (1, 0);
            }
            let splits = AUTO_TARGET_BLOCKS.div_ceil(blocks).min(max_ctx / AUTO_MIN_CHUNK);
            max_ctx.div_ceil(splits).next_multiple_of(TILE_KEYS as usize)
        }
    };
    let splits = max_ctx.div_ceil(chunk).max(1);
    if splits == 1 { (1, 0) } else { (splits, chunk) }
}

/// Decode's inputs. `scale: None` is `1 / sqrt(head_dim)`.
#[derive(Clone, Copy)]
pub struct PagedDecodeInput<'a, T: PagedFloat> {
    pub q: BufRef<'a, T>,
    pub k_cache: BufRef<'a, T>,
    pub v_cache: BufRef<'a, T>,
    /// The validated block tables and context lengths (their shape must equal `shape`'s).
    pub tables: &'a PagedTables,
    pub shape: PagedShape,
    pub scale: Option<f32>,
    pub split: Split,
}

/// Block tables and context lengths, validated against a shape and uploaded.
pub struct PagedTables {
    tables: crate::DeviceBuffer<i32>,
    lens: crate::DeviceBuffer<i32>,
    shape: PagedShape,
    max_context: usize,
}

impl PagedTables {
    /// Checks `block_tables: [batch, max_pages]` and `context_lens: [batch]` against `shape`
    /// (every context fits its table, every page it uses is in `0..num_pages`) and uploads them.
    pub fn new(ctx: &Context, shape: &PagedShape, block_tables: &[i32], context_lens: &[i32]) -> Result<Self> {
        check_shape(OP, shape)?;
        check_lengths(
            OP,
            shape,
            &[
                ("block_tables", block_tables.len(), shape.table_len()),
                ("context_lens", context_lens.len(), shape.batch),
            ],
        )?;
        let max_context = check_tables(OP, shape, block_tables, context_lens, 0, shape.q_len)?;
        Ok(PagedTables {
            tables: upload_i32(ctx, block_tables)?,
            lens: upload_i32(ctx, context_lens)?,
            shape: *shape,
            max_context,
        })
    }

    /// The longest context.
    pub fn max_context(&self) -> usize {
        self.max_context
    }
}

fn check_shape(op: &'static str, s: &PagedShape) -> Result<()> {
    if s.kv_heads == 0 || s.heads == 0 {
        return Err(Error::invalid(
            op,
            format!("heads = {}, kv_heads = {}: pass at least one of each", s.heads, s.kv_heads),
        ));
    }
    if !s.heads.is_multiple_of(s.kv_heads) {
        return Err(Error::invalid(
            op,
            format!(
                "heads = {} is not a multiple of kv_heads = {}; grouped-query attention shares each kv head among heads / kv_heads query heads",
                s.heads, s.kv_heads
            ),
        ));
    }
    if !s.head_dim.is_multiple_of(32) || s.head_dim == 0 || s.head_dim > MAX_HEAD_DIM as usize {
        return Err(Error::invalid(op, format!("head_dim = {}: this version supports 32, 64, 96 and 128", s.head_dim)));
    }
    if s.q_len == 0 || s.q_len > MAX_Q_LEN as usize {
        return Err(Error::invalid(
            op,
            format!("q_len = {}: pass 1 to {MAX_Q_LEN} new query tokens per sequence", s.q_len),
        ));
    }
    if !PAGE_SIZES.contains(&s.page_size) {
        return Err(Error::invalid(
            op,
            format!("page_size = {}: supported page sizes are {PAGE_SIZES:?}", s.page_size),
        ));
    }
    // The tallest grid of any version (v01 packs the fewest rows per block).
    let grid_y = VERSIONS
        .iter()
        .map(|v| s.kv_heads * v.row_groups(s.heads as u32, s.kv_heads as u32, s.q_len as u32) as usize)
        .max()
        .unwrap_or(0);
    if s.batch > 65535 || grid_y > 65535 {
        return Err(Error::invalid(
            op,
            format!("batch = {} and {grid_y} head blocks must each be at most 65535", s.batch),
        ));
    }
    if s.num_pages > i32::MAX as usize || s.max_pages.checked_mul(s.page_size).is_none_or(|n| n > i32::MAX as usize) {
        return Err(Error::invalid(
            op,
            "num_pages and max_pages * page_size must be below 2^31 (i32 page ids and lengths)",
        ));
    }
    let _ = s
        .cache_len()
        .checked_mul(4)
        .and_then(|_| s.num_pages.checked_mul(s.kv_heads * s.page_size * s.head_dim * 4))
        .ok_or_else(|| Error::invalid(op, "the cache overflows the address space"))?;
    Ok(())
}

fn check_lengths(op: &'static str, s: &PagedShape, lens: &[(&str, usize, usize)]) -> Result<()> {
    for &(name, got, want) in lens {
        if got != want {
            return Err(Error::invalid(op, format!("{name} has {got} elements but the shape {s:?} needs {want}")));
        }
    }
    Ok(())
}

/// Checks every context length against its table and every page id it uses, and that a
/// non-empty context holds at least `min_len` tokens (the new query tokens); returns the
/// longest context.
fn check_tables(
    op: &'static str,
    s: &PagedShape,
    tables: &[i32],
    lens: &[i32],
    extra: usize,
    min_len: usize,
) -> Result<usize> {
    let mut max_ctx = 0;
    for (b, &len) in lens.iter().enumerate() {
        if len > 0 && (len as usize) < min_len {
            return Err(Error::invalid(
                op,
                format!(
                    "context_lens[{b}] = {len} is shorter than q_len = {min_len}: the new tokens are part of the context (append them first), or pass 0 for an empty slot"
                ),
            ));
        }
        let cap = s.max_pages * s.page_size;
        if len < 0 || len as usize + extra > cap {
            return Err(Error::invalid(
                op,
                format!(
                    "context_lens[{b}] = {len}{}: the block table holds {} pages of {} tokens ({cap} tokens)",
                    if extra > 0 { " plus the appended token" } else { "" },
                    s.max_pages,
                    s.page_size
                ),
            ));
        }
        let used = (len as usize + extra).div_ceil(s.page_size);
        for (i, &page) in tables[b * s.max_pages..][..used].iter().enumerate() {
            if page < 0 || page as usize >= s.num_pages {
                return Err(Error::invalid(
                    op,
                    format!(
                        "block_tables[{b}][{i}] = {page} is not a page id in 0..{} (sequence {b} uses {used} pages)",
                        s.num_pages
                    ),
                ));
            }
        }
        max_ctx = max_ctx.max(len as usize);
    }
    Ok(max_ctx)
}

/// Uploads a host i32 slice (one dummy element when empty, never read).
fn upload_i32(ctx: &Context, v: &[i32]) -> Result<crate::DeviceBuffer<i32>> {
    ctx.upload(if v.is_empty() { &[0][..] } else { v })
}

/// `o[b, i, h] = softmax(q[b, i, h] . K_b^T * scale + causal mask) V_b` over sequence `b`'s
/// cached tokens, with the version [`pick_version`] names for the shape and the caches'
/// alignment (`v01_simt` for a view carved out of a larger buffer at an odd offset).
pub fn paged_decode<T: PagedFloat>(ctx: &Context, input: PagedDecodeInput<'_, T>, o: BufMut<'_, T>) -> Result<()> {
    let aligned = input.k_cache.addr().is_multiple_of(16) && input.v_cache.addr().is_multiple_of(16);
    paged_decode_with(ctx, pick_version(input.shape.rows_per_kv_head(), aligned), input, o)
}

/// As [`paged_decode`], with a chosen version of the ladder.
pub fn paged_decode_with<T: PagedFloat>(
    ctx: &Context,
    v: &PagedVersion,
    input: PagedDecodeInput<'_, T>,
    mut o: BufMut<'_, T>,
) -> Result<()> {
    let PagedDecodeInput { q, k_cache, v_cache, tables, shape: s, scale, split } = input;
    for r in [&q, &k_cache, &v_cache] {
        r.check_context(ctx, OP)?;
    }
    tables.tables.as_view().check_context(ctx, OP)?;
    o.check_context(ctx, OP)?;
    check_shape(OP, &s)?;
    if tables.shape != s {
        return Err(Error::invalid(
            OP,
            format!(
                "the tables were validated for {:?}, not for this call's {s:?}; build PagedTables for this shape",
                tables.shape
            ),
        ));
    }
    check_lengths(
        OP,
        &s,
        &[
            ("q", q.len(), s.q_elems()),
            ("k_cache", k_cache.len(), s.cache_len()),
            ("v_cache", v_cache.len(), s.cache_len()),
            ("o", o.len(), s.q_elems()),
        ],
    )?;
    if v.vector_loads && !(k_cache.addr().is_multiple_of(16) && v_cache.addr().is_multiple_of(16)) {
        return Err(Error::invalid(
            OP,
            format!(
                "{} reads K and V in 16-byte chunks: pass 16-byte aligned k_cache and v_cache views (whole allocations are), or run v01_simt",
                v.name
            ),
        ));
    }
    let scale = scale.unwrap_or(1.0 / (s.head_dim as f32).sqrt());
    if !scale.is_finite() {
        return Err(Error::invalid(OP, format!("scale = {scale}: pass a finite scale (default 1/sqrt(head_dim))")));
    }
    if let Split::Keys(n) = split
        && (n == 0 || !n.is_multiple_of(TILE_KEYS as usize))
    {
        return Err(Error::invalid(
            OP,
            format!("Split::Keys({n}): chunks must be a positive multiple of {TILE_KEYS} tokens"),
        ));
    }
    if s.batch == 0 {
        return Ok(());
    }
    let (splits, split_keys) = split_plan(v, &s, tables.max_context, split);
    let mut params = PagedDecodeParams {
        batch: s.batch as u32,
        heads: s.heads as u32,
        kv_heads: s.kv_heads as u32,
        q_len: s.q_len as u32,
        d: s.head_dim as u32,
        page_size: s.page_size as u32,
        max_pages: s.max_pages as u32,
        splits: splits as u32,
        split_keys: split_keys as u32,
        scale_log2: scale * std::f32::consts::LOG2_E,
        q: q.global(),
        k_cache: k_cache.global(),
        v_cache: v_cache.global(),
        block_tables: tables.tables.as_view().global(),
        context_lens: tables.lens.as_view().global(),
        o: o.global_mut(),
        partial: GlobalMut::empty(),
    };
    let decode = decode_launch(v, &s, splits);
    if splits == 1 {
        return ctx.launch(T::decode(v), decode, params);
    }
    let out_rows = s.batch * s.q_len * s.heads;
    let words = out_rows * splits * partial_words(s.head_dim as u32) as usize;
    ctx.with_scratch(words, |partial| {
        params.partial = partial;
        ctx.launch(T::decode(v), decode, params)?;
        let combine = LaunchConfig {
            grid: Dim3::new((s.q_len * s.heads).div_ceil(WARPS as usize) as u32, 1, s.batch as u32),
            block: Dim3::x(THREADS),
            shared_bytes: 0,
        };
        ctx.launch(T::COMBINE, combine, params)
    })
}

/// The decode kernel's launch for `s` run by `v` over `splits` context chunks: grid x = chunk,
/// y = kv head x its row groups ([`PagedVersion::row_groups`]), z = sequence; a block of
/// [`PagedVersion::threads`] for the shape's rows per kv head (v03: 64 threads per m16 row
/// tile, so up to 64 rows per kv head are one block per (sequence, kv head, chunk)).
pub fn decode_launch(v: &PagedVersion, s: &PagedShape, splits: usize) -> LaunchConfig {
    let (heads, kv_heads, q_len) = (s.heads as u32, s.kv_heads.max(1) as u32, s.q_len as u32);
    let grid_y = kv_heads * v.row_groups(heads, kv_heads, q_len);
    LaunchConfig {
        grid: Dim3::new(splits as u32, grid_y, s.batch as u32),
        block: Dim3::x(v.threads(s.rows_per_kv_head() as u32)),
        shared_bytes: v.shared_bytes,
    }
}

/// Append's inputs: one new token per sequence, written at position `context_lens[b]`
/// (the length before the append; the caller then counts it in).
#[derive(Clone, Copy)]
pub struct PagedAppendInput<'a, T: PagedFloat> {
    /// `[batch, kv_heads, head_dim]`.
    pub k_new: BufRef<'a, T>,
    pub v_new: BufRef<'a, T>,
    pub block_tables: &'a [i32],
    pub context_lens: &'a [i32],
    pub shape: PagedShape,
}

/// Writes each sequence's new K and V rows into page `block_tables[b][len / page_size]`,
/// slot `len % page_size`. Two sequences may not target the same row (a shared prefix page
/// must be copied before it is appended to).
pub fn paged_append<T: PagedFloat>(
    ctx: &Context,
    input: PagedAppendInput<'_, T>,
    mut k_cache: BufMut<'_, T>,
    mut v_cache: BufMut<'_, T>,
) -> Result<()> {
    let PagedAppendInput { k_new, v_new, block_tables, context_lens, shape: s } = input;
    k_new.check_context(ctx, OP_APPEND)?;
    v_new.check_context(ctx, OP_APPEND)?;
    k_cache.check_context(ctx, OP_APPEND)?;
    v_cache.check_context(ctx, OP_APPEND)?;
    check_shape(OP_APPEND, &s)?;
    check_lengths(
        OP_APPEND,
        &s,
        &[
            ("k_new", k_new.len(), s.new_len()),
            ("v_new", v_new.len(), s.new_len()),
            ("k_cache", k_cache.len(), s.cache_len()),
            ("v_cache", v_cache.len(), s.cache_len()),
            ("block_tables", block_tables.len(), s.table_len()),
            ("context_lens", context_lens.len(), s.batch),
        ],
    )?;
    check_tables(OP_APPEND, &s, block_tables, context_lens, 1, 0)?;
    let mut targets = std::collections::HashMap::new();
    for (b, &len) in context_lens.iter().enumerate() {
        let len = len as usize;
        let page = block_tables[b * s.max_pages + len / s.page_size];
        if let Some(other) = targets.insert((page, len % s.page_size), b) {
            return Err(Error::invalid(
                OP_APPEND,
                format!(
                    "sequences {other} and {b} both append to page {page} slot {}; give each sequence its own last page",
                    len % s.page_size
                ),
            ));
        }
    }
    if s.batch == 0 {
        return Ok(());
    }
    let (tables, lens) = (upload_i32(ctx, block_tables)?, ctx.upload(context_lens)?);
    let params = PagedAppendParams {
        batch: s.batch as u32,
        kv_heads: s.kv_heads as u32,
        d: s.head_dim as u32,
        page_size: s.page_size as u32,
        max_pages: s.max_pages as u32,
        k_new: k_new.global(),
        v_new: v_new.global(),
        block_tables: tables.as_view().global(),
        context_lens: lens.as_view().global(),
        k_cache: k_cache.global_mut(),
        v_cache: v_cache.global_mut(),
    };
    let cfg = LaunchConfig {
        grid: Dim3::new(s.kv_heads as u32, 1, s.batch as u32),
        block: Dim3::x(THREADS),
        shared_bytes: 0,
    };
    ctx.launch(T::APPEND, cfg, params)
}

/// The f64 reference: naive attention of each new token over its sequence's tokens gathered
/// through the table, up to its causal limit (`j < len - q_len + i + 1`).
pub fn reference(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    tables: &[i32],
    lens: &[i32],
    s: &PagedShape,
    scale: f64,
) -> Vec<f64> {
    naive(q, k, v, tables, lens, s, scale, &|x| x)
}

/// Naive decode attention with every intermediate passed through `round` (identity for the
/// reference; rounding to bf16/f16 for the low-precision attention of FlashAttention's rule,
/// as `attention::naive` does): scores after the product and the scaling, probabilities, and
/// the output.
#[allow(clippy::too_many_arguments)]
fn naive(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    tables: &[i32],
    lens: &[i32],
    s: &PagedShape,
    scale: f64,
    round: &dyn Fn(f64) -> f64,
) -> Vec<f64> {
    let d = s.head_dim;
    let group = s.heads / s.kv_heads;
    let mut o = vec![0.0; s.q_elems()];
    for b in 0..s.batch {
        let len = lens[b] as usize;
        // Token j's row of kv head kvh, through the block table.
        let row = |kvh: usize, j: usize| {
            let page = tables[b * s.max_pages + j / s.page_size] as usize;
            s.cache_row(page, kvh, j % s.page_size)
        };
        for (i, h) in (0..s.q_len).flat_map(|i| (0..s.heads).map(move |h| (i, h))) {
            let kvh = h / group;
            let seen = causal_limit(len, s.q_len, i);
            if seen == 0 {
                continue;
            }
            let at = ((b * s.q_len + i) * s.heads + h) * d;
            let qrow = &q[at..][..d];
            let scores: Vec<f64> = (0..seen)
                .map(|j| {
                    let krow = &k[row(kvh, j)..][..d];
                    round(round(qrow.iter().zip(krow).map(|(a, c)| a * c).sum::<f64>()) * scale)
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = scores.iter().map(|x| (x - m).exp()).sum();
            let out = &mut o[at..][..d];
            for (j, x) in scores.iter().enumerate() {
                let pj = round((x - m).exp() / sum);
                for (od, vd) in out.iter_mut().zip(&v[row(kvh, j)..][..d]) {
                    *od += pj * vd;
                }
            }
            for od in out.iter_mut() {
                *od = round(*od);
            }
        }
    }
    o
}

/// One checked decode case: the cache holds exactly the pages the contexts need (plus
/// `spare_pages`), assigned to sequences in shuffled order; every cache row no context covers
/// is NaN (a kernel reading past a context or through a wrong page turns the output NaN),
/// and table entries past a sequence's pages are -1.
#[derive(Clone, Debug)]
pub struct PagedCase {
    pub dtype: DType,
    pub heads: usize,
    pub kv_heads: usize,
    /// New query tokens per sequence (each context must hold at least this many, or be 0).
    pub q_len: usize,
    pub head_dim: usize,
    pub page_size: usize,
    pub context_lens: Vec<usize>,
    pub split: Split,
    /// Run `paged_append` first: each sequence's last token is appended (context_lens[b] - 1
    /// before), and the cache rows it writes are compared bit for bit.
    pub append: bool,
    pub seed: u64,
}

impl PagedCase {
    /// As [`PagedShape::rows_per_kv_head`].
    pub fn rows_per_kv_head(&self) -> usize {
        self.q_len * self.heads / self.kv_heads.max(1)
    }
}

/// A random cache for `case`: (shape, tables, k, v) with NaN in every row outside a context.
fn build_cache<T: PagedFloat>(case: &PagedCase, rng: &mut SmallRng) -> (PagedShape, Vec<i32>, Vec<T>, Vec<T>) {
    let ps = case.page_size;
    let used: Vec<usize> = case.context_lens.iter().map(|&n| n.div_ceil(ps)).collect();
    let max_pages = used.iter().copied().max().unwrap_or(0) + rng.random_range(0..2);
    let num_pages = used.iter().sum::<usize>() + rng.random_range(0..3);
    let s = PagedShape {
        batch: case.context_lens.len(),
        heads: case.heads,
        kv_heads: case.kv_heads,
        q_len: case.q_len,
        head_dim: case.head_dim,
        page_size: ps,
        num_pages,
        max_pages,
    };
    let mut pages: Vec<i32> = (0..num_pages as i32).collect();
    pages.shuffle(rng);
    let mut tables = vec![-1i32; s.table_len()];
    let mut next = pages.into_iter();
    for (b, &u) in used.iter().enumerate() {
        for i in 0..u {
            tables[b * max_pages + i] = next.next().expect("enough pages by construction");
        }
    }
    let nan = T::from_f64(f64::NAN);
    let (mut k, mut v) = (vec![nan; s.cache_len()], vec![nan; s.cache_len()]);
    for (b, &len) in case.context_lens.iter().enumerate() {
        for j in 0..len {
            let page = tables[b * max_pages + j / ps] as usize;
            for kvh in 0..s.kv_heads {
                let at = s.cache_row(page, kvh, j % ps);
                for c in 0..s.head_dim {
                    k[at + c] = T::from_f64(rng.random_range(-2.0..2.0));
                    v[at + c] = T::from_f64(rng.random_range(-2.0..2.0));
                }
            }
        }
    }
    (s, tables, k, v)
}

fn check_t<T: PagedFloat>(ctx: &Context, case: &PagedCase, v: &PagedVersion) -> Result<Report> {
    let mut rng = SmallRng::seed_from_u64(case.seed);
    let (s, tables, mut kk, mut vv) = build_cache::<T>(case, &mut rng);
    let lens: Vec<i32> = case.context_lens.iter().map(|&n| n as i32).collect();
    let q: Vec<T> = (0..s.q_elems()).map(|_| T::from_f64(rng.random_range(-2.0..2.0))).collect();
    let qb = ctx.upload(&q)?;
    let mut reports = Vec::new();
    let (kb, vb) = if case.append {
        // Take each non-empty sequence's last token out of the cache and append it back.
        let before: Vec<i32> = lens.iter().map(|&n| (n - 1).max(0)).collect();
        let nan = T::from_f64(f64::NAN);
        let (mut k_new, mut v_new) = (vec![nan; s.new_len()], vec![nan; s.new_len()]);
        let (mut k_start, mut v_start) = (kk.clone(), vv.clone());
        let live: Vec<usize> = (0..s.batch).filter(|&b| lens[b] > 0).collect();
        for &b in &live {
            let j = before[b] as usize;
            let page = tables[b * s.max_pages + j / s.page_size] as usize;
            for kvh in 0..s.kv_heads {
                let (at, src) = (s.cache_row(page, kvh, j % s.page_size), (b * s.kv_heads + kvh) * s.head_dim);
                k_new[src..][..s.head_dim].copy_from_slice(&kk[at..][..s.head_dim]);
                v_new[src..][..s.head_dim].copy_from_slice(&vv[at..][..s.head_dim]);
                k_start[at..][..s.head_dim].fill(nan);
                v_start[at..][..s.head_dim].fill(nan);
            }
        }
        // Only sequences with a token to append take part (a sub-batch with its own tables).
        let sub = PagedShape { batch: live.len(), ..s };
        let pick = |x: &[T], w: usize| -> Vec<T> { live.iter().flat_map(|&b| x[b * w..][..w].to_vec()).collect() };
        let sub_tables: Vec<i32> =
            live.iter().flat_map(|&b| tables[b * s.max_pages..][..s.max_pages].to_vec()).collect();
        let sub_lens: Vec<i32> = live.iter().map(|&b| before[b]).collect();
        let w = s.kv_heads * s.head_dim;
        let (knb, vnb) = (ctx.upload(&pick(&k_new, w))?, ctx.upload(&pick(&v_new, w))?);
        let mut kc = Guarded::with_data(ctx, &k_start)?;
        let mut vc = Guarded::with_data(ctx, &v_start)?;
        let input = PagedAppendInput {
            k_new: knb.as_view(),
            v_new: vnb.as_view(),
            block_tables: &sub_tables,
            context_lens: &sub_lens,
            shape: sub,
        };
        paged_append(ctx, input, kc.view_mut(), vc.view_mut())?;
        let (gk, guk) = kc.finish()?;
        let (gv, guv) = vc.finish()?;
        reports.push(("k_cache after append", check::compare_exact(&gk, &kk, guk)));
        reports.push(("v_cache after append", check::compare_exact(&gv, &vv, guv)));
        (kk, vv) = (gk, gv);
        (ctx.upload(&kk)?, ctx.upload(&vv)?)
    } else {
        (ctx.upload(&kk)?, ctx.upload(&vv)?)
    };
    let mut o = Guarded::<T>::poisoned(ctx, s.q_elems())?;
    let pt = PagedTables::new(ctx, &s, &tables, &lens)?;
    let input = PagedDecodeInput {
        q: qb.as_view(),
        k_cache: kb.as_view(),
        v_cache: vb.as_view(),
        tables: &pt,
        shape: s,
        scale: None,
        split: case.split,
    };
    paged_decode_with(ctx, v, input, o.view_mut())?;
    let (go, guo) = o.finish()?;
    let f = |x: &[T]| x.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
    let (q64, k64, v64) = (f(&q), f(&kk), f(&vv));
    let scale = 1.0 / (s.head_dim as f64).sqrt();
    let ro = reference(&q64, &k64, &v64, &tables, &lens, &s, scale);
    let lo = naive(&q64, &k64, &v64, &tables, &lens, &s, scale, &|x| T::from_f64(x).to_f64());
    let max_err = ro.iter().zip(&lo).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    // FlashAttention's rule: at most twice the naive low-precision attention's max error,
    // plus a tiny atol.
    let bound = 2.0 * max_err + 1e-5;
    let mut r = check::compare(&go, &ro, &vec![bound; ro.len()], guo);
    r.tol = format!("FA rule 2 x naive {} error ({bound:.2e}) + 1e-5", T::NAME);
    reports.push(("o", r));
    Ok(check::merge(reports))
}

/// Runs `case` with the version [`paged_decode`] picks for it (the check's caches are whole,
/// aligned allocations): random cache and queries in [-2, 2), poisoned and guarded output,
/// FlashAttention's rule against the f64 reference.
pub fn check(ctx: &Context, case: &PagedCase) -> Result<Report> {
    check_with(ctx, case, pick_version(case.rows_per_kv_head(), true))
}

/// As [`check`], with a chosen version.
pub fn check_with(ctx: &Context, case: &PagedCase, v: &PagedVersion) -> Result<Report> {
    if let Some(&n) = case.context_lens.iter().find(|&&n| n > i32::MAX as usize) {
        return Err(Error::invalid(OP, format!("context length {n} does not fit i32")));
    }
    match case.dtype {
        DType::BF16 => check_t::<bf16>(ctx, case, v),
        DType::F16 => check_t::<f16>(ctx, case, v),
        other => Err(Error::invalid(OP, format!("dtype {} is not supported; use bf16 or f16", other.name()))),
    }
}

/// One bench shape: every sequence holds `context` tokens, `q_len` of them new.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchShape {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub page_size: usize,
    pub context: usize,
    pub q_len: usize,
}

impl BenchShape {
    const fn new(batch: usize, kv_heads: usize, page_size: usize, context: usize, q_len: usize) -> Self {
        BenchShape { batch, heads: 32, kv_heads, head_dim: 128, page_size, context, q_len }
    }

    /// The cache shape: exactly the pages the contexts need.
    pub fn paged(&self) -> PagedShape {
        let per_seq = self.context.div_ceil(self.page_size);
        PagedShape {
            batch: self.batch,
            heads: self.heads,
            kv_heads: self.kv_heads,
            q_len: self.q_len,
            head_dim: self.head_dim,
            page_size: self.page_size,
            num_pages: self.batch * per_seq,
            max_pages: per_seq,
        }
    }

    /// The label in bench tables: `b64 h32/8 p16 L1024` (`q4` appended when `q_len > 1`).
    pub fn label(&self) -> String {
        let q = if self.q_len > 1 { format!(" q{}", self.q_len) } else { String::new() };
        format!("b{} h{}/{} p{} L{}{q}", self.batch, self.heads, self.kv_heads, self.page_size, self.context)
    }
}

/// Bench shapes (head_dim 128, 32 query heads): batch x context >= 64k tokens (the issue's
/// 0.8-of-copy regime), batch 1 x 32k (carried by split-K), plain MHA, a 4-token
/// speculative step, and GQA-8 (8 query heads per kv head) decode and 8-token speculative
/// steps: 8 and 64 rows per kv head, where `pick_version` predicts v03 (tensor cores) beats
/// v02. Their DRAM floors are in `gpu_kernels::paged::v02_vec`'s docs.
pub const BENCH_SHAPES: &[BenchShape] = &[
    BenchShape::new(64, 8, 16, 1024, 1),
    BenchShape::new(64, 8, 32, 4096, 1),
    BenchShape::new(8, 8, 16, 8192, 1),
    BenchShape::new(1, 8, 16, 32768, 1),
    BenchShape::new(4, 32, 64, 16384, 1),
    BenchShape::new(16, 8, 16, 4096, 4),
    BenchShape::new(64, 4, 16, 1024, 1),
    BenchShape::new(16, 4, 16, 4096, 8),
    BenchShape::new(1, 4, 16, 32768, 2),
];

/// KV bytes one decode reads (each cached K and V element once).
pub fn kv_bytes<T: PagedFloat>(s: &PagedShape, context_lens: &[i32]) -> usize {
    context_lens.iter().map(|&n| n as usize).sum::<usize>() * s.kv_heads * s.head_dim * 2 * size_of::<T>()
}

/// A bench shape's device buffers: every sequence at `context` tokens over shuffled pages
/// (seeded), deterministic values in [-1, 1), validated tables.
pub struct BenchData<T: PagedFloat> {
    pub shape: PagedShape,
    pub q: crate::DeviceBuffer<T>,
    pub k_cache: crate::DeviceBuffer<T>,
    pub v_cache: crate::DeviceBuffer<T>,
    pub o: crate::DeviceBuffer<T>,
    pub tables: PagedTables,
    pub context_lens: Vec<i32>,
}

impl<T: PagedFloat> BenchData<T> {
    /// Uploads `shape`'s cache, queries and tables.
    pub fn new(ctx: &Context, shape: &BenchShape) -> Result<Self> {
        let s = shape.paged();
        let mut pages: Vec<i32> = (0..s.num_pages as i32).collect();
        pages.shuffle(&mut SmallRng::seed_from_u64(7));
        let context_lens = vec![shape.context as i32; s.batch];
        let fill = crate::bench::pattern::<T>;
        Ok(BenchData {
            q: ctx.upload(&fill(s.q_elems(), 0))?,
            k_cache: ctx.upload(&fill(s.cache_len(), 1))?,
            v_cache: ctx.upload(&fill(s.cache_len(), 2))?,
            o: ctx.alloc::<T>(s.q_elems())?,
            tables: PagedTables::new(ctx, &s, &pages, &context_lens)?,
            context_lens,
            shape: s,
        })
    }

    /// One decode by version `v` with the auto split.
    pub fn run(&mut self, ctx: &Context, v: &PagedVersion) -> Result<()> {
        let input = PagedDecodeInput {
            q: self.q.as_view(),
            k_cache: self.k_cache.as_view(),
            v_cache: self.v_cache.as_view(),
            tables: &self.tables,
            shape: self.shape,
            scale: None,
            split: Split::Auto,
        };
        paged_decode_with(ctx, v, input, self.o.as_view_mut())
    }

    /// KV bytes one decode reads ([`kv_bytes`]).
    pub fn kv_bytes(&self) -> usize {
        kv_bytes::<T>(&self.shape, &self.context_lens)
    }
}

/// GPU: median milliseconds of one decode by version `v` (auto split) over the shape's
/// sequences with shuffled pages, and of a device-to-device copy of the same KV bytes (the
/// bandwidth ceiling). Effective bandwidth is [`kv_bytes`] over the time.
pub fn time<T: PagedFloat>(ctx: &Context, v: &PagedVersion, shape: &BenchShape) -> Result<(f64, f64)> {
    let mut data = BenchData::<T>::new(ctx, shape)?;
    let t = ctx.time_runs(crate::bench::WARMUP, crate::bench::REPS, true, || data.run(ctx, v))?;
    let bytes = data.kv_bytes();
    let src = ctx.upload(&vec![0u8; bytes])?;
    let mut dst = ctx.alloc::<u8>(bytes)?;
    let c =
        ctx.time_runs(crate::bench::WARMUP, crate::bench::REPS, true, || ctx.copy(src.as_view(), dst.as_view_mut()))?;
    Ok((crate::bench::median(&t), crate::bench::median(&c)))
}
