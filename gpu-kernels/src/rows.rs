//! The row engine shared by every row op (reductions, softmax, norms): how rows map to
//! threads, how a row's chunks are loaded and stored, and group-wide reductions.
//!
//! # Thread mapping
//! A row is owned by a *group* of `G` threads: a warp (`G = 32`, [`WARP_BLOCK_THREADS`] / 32
//! rows per block) for short rows, or a whole block (`G =` [`BLOCK_ROW_THREADS`], one row per
//! block) for long ones. Groups walk rows with a grid-stride loop, so any row count works and
//! the loop is uniform across the group (barriers and full-mask shuffles stay legal).
//! Inside a row, thread `lane` of the group owns chunks `lane, lane + G, lane + 2G, ...`; a
//! chunk is `VEC` consecutive elements (16 bytes: 4 f32 or 8 f16/bf16). Adjacent threads own
//! adjacent chunks, so a group's accesses coalesce into full 128-byte lines.
//!
//! # Caching
//! Ops that read a row more than once (softmax, norms) keep up to [`CACHE_CHUNKS`] chunks per
//! thread in registers, so rows up to `G * CACHE_CHUNKS * VEC` columns are read from memory
//! once; longer rows stream, re-reading the row per pass.
//!
//! # Safety
//! Launchers guarantee `rows * cols` elements in every row-shaped view, `rows` elements in
//! per-row outputs, and `vectorized != 0` only when every row of every view starts 16-byte
//! aligned (`cols * size_of::<T>() % 16 == 0` and aligned bases).

use crate::device::reduce::{Reduce, block_reduce, warp_reduce};
use crate::device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};
use crate::device::{Element, Global, GlobalMut, Shared, WARP_SIZE};

/// Threads per block in warp-per-row kernels (8 rows per block).
pub const WARP_BLOCK_THREADS: u32 = 256;
/// Threads per row (and per block) in block-per-row kernels.
pub const BLOCK_ROW_THREADS: u32 = 512;
/// Values each thread keeps in registers on the cached path. 16 keeps block-per-row kernels
/// under 128 registers per thread, the most a 512-thread block can have on a 64K-register SM
/// (checked offline by ptxas in CI); 32 values pushed the 16-bit kernels to ~195 registers.
pub const CACHE_VALUES: usize = 16;
/// The most chunks any kernel caches (f32: 16 values in 4 chunks; 16-bit: 2 chunks of 8).
pub const MAX_CACHE_CHUNKS: usize = 4;

/// Chunks of `VEC` elements that make up [`CACHE_VALUES`].
pub const fn cache_chunks(vec: usize) -> usize {
    CACHE_VALUES / vec
}
/// Largest grid a row kernel is launched with; more rows are covered by the grid-stride loop.
pub const MAX_ROW_BLOCKS: u32 = 65535;

/// Dynamic shared memory of block-per-row kernels: the block-reduction scratch (3 words per
/// warp, 32 warps).
pub const BLOCK_SCRATCH_BYTES: u32 = Shared::<u32>::bytes(crate::device::reduce::block_scratch_words(3));
const SCRATCH: Shared<u32> = Shared::at(0, crate::device::reduce::block_scratch_words(3));

/// Elements of one row that one block handles in the split strategy.
pub const SPLIT_SEGMENT: u32 = BLOCK_ROW_THREADS * CACHE_VALUES as u32;
/// The split strategy is chosen for rows longer than this...
pub const SPLIT_MIN_COLS: usize = 4 * SPLIT_SEGMENT as usize;
/// ...when there are fewer rows than this: below it, one block per row leaves SMs idle
/// (an H200 has 132), above it block-per-row already fills the GPU.
pub const SPLIT_MAX_ROWS: usize = 512;
/// Threads per block of the split strategy's final combine (one warp per row).
pub const SPLIT_FINAL_THREADS: u32 = WARP_SIZE;

/// How rows map to threads; one kernel per strategy per op and dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowStrategy {
    /// A warp per row: rows up to [`RowStrategy::capacity`] columns.
    Warp,
    /// A block of [`BLOCK_ROW_THREADS`] per row.
    Block,
    /// Several blocks per row, each over a [`SPLIT_SEGMENT`]-element segment, in two
    /// launches: per-segment partial results into scratch, then a combine (reductions) or a
    /// second pass over the segment that writes the outputs (softmax). For few, long rows.
    Split,
}

impl RowStrategy {
    /// Threads that share one row.
    pub const fn group(self) -> u32 {
        match self {
            RowStrategy::Warp => WARP_SIZE,
            RowStrategy::Block | RowStrategy::Split => BLOCK_ROW_THREADS,
        }
    }
    pub const fn block_threads(self) -> u32 {
        match self {
            RowStrategy::Warp => WARP_BLOCK_THREADS,
            RowStrategy::Block | RowStrategy::Split => BLOCK_ROW_THREADS,
        }
    }
    pub const fn rows_per_block(self) -> u32 {
        self.block_threads() / self.group()
    }
    pub const fn shared_bytes(self) -> u32 {
        match self {
            RowStrategy::Warp => 0,
            RowStrategy::Block | RowStrategy::Split => BLOCK_SCRATCH_BYTES,
        }
    }
    /// Columns a group caches in registers (any element type).
    pub const fn capacity(self) -> usize {
        self.group() as usize * CACHE_VALUES
    }
    /// The strategy for rows of `cols` elements: a warp while the warp can cache the row,
    /// a block beyond.
    pub const fn for_cols(cols: usize) -> Self {
        if cols <= RowStrategy::Warp.capacity() { RowStrategy::Warp } else { RowStrategy::Block }
    }
    /// The strategy for ops that have a split kernel: split for few, long rows, else as
    /// [`RowStrategy::for_cols`].
    pub const fn for_shape(rows: usize, cols: usize) -> Self {
        if cols > SPLIT_MIN_COLS && rows < SPLIT_MAX_ROWS { RowStrategy::Split } else { RowStrategy::for_cols(cols) }
    }
    /// Segments of a split row of `cols` elements.
    pub const fn segments(cols: usize) -> usize {
        cols.div_ceil(SPLIT_SEGMENT as usize)
    }
}

const _: () = assert!(WARP_BLOCK_THREADS.is_multiple_of(WARP_SIZE) && WARP_BLOCK_THREADS <= 1024);
const _: () = assert!(BLOCK_ROW_THREADS.is_multiple_of(WARP_SIZE) && BLOCK_ROW_THREADS <= 1024);

/// Threads per block of `name` if it is a row kernel (reduce, softmax, norm families).
pub fn launch_threads(name: &str) -> Option<u32> {
    let families = [crate::reduce::KERNEL_NAMES, crate::softmax::KERNEL_NAMES, crate::norm::KERNEL_NAMES];
    if !families.iter().any(|f| f.contains(&name)) {
        return None;
    }
    if name == "column_sum_f32" {
        return Some(crate::norm::COLUMN_SUM_THREADS);
    }
    if name.ends_with("_split_final") {
        Some(SPLIT_FINAL_THREADS)
    } else if name.ends_with("_warp") {
        Some(RowStrategy::Warp.block_threads())
    } else if name.ends_with("_block") || name.ends_with("_split") {
        Some(RowStrategy::Block.block_threads())
    } else {
        None
    }
}

/// This thread's first row, the row stride, and its lane in the row's group.
#[inline(always)]
pub fn assign<const G: u32>() -> (usize, usize, u32) {
    let tid = thread_idx_x();
    let rows_per_block = (block_dim_x() / G) as usize;
    let first = block_idx_x() as usize * rows_per_block + (tid / G) as usize;
    (first, grid_dim_x() as usize * rows_per_block, tid % G)
}

/// Reduces over the row's group (warp shuffles, or the whole block through shared scratch).
#[inline(always)]
#[track_caller]
pub fn group_reduce<R: Reduce, const G: u32>(v: R) -> R {
    if G == WARP_SIZE { warp_reduce(v) } else { block_reduce(v, SCRATCH) }
}

/// Loads chunk `c` of the row starting at element `base`, as f32; elements past `cols` read as
/// `fill`. One 128-bit load on the vectorized path, scalar loads otherwise.
#[inline(always)]
#[track_caller]
pub fn load_chunk<T: Element, const VEC: usize>(
    x: &Global<T>,
    base: usize,
    cols: usize,
    c: usize,
    vectorized: bool,
    fill: f32,
) -> [f32; VEC] {
    let start = c * VEC;
    let mut v = [fill; VEC];
    if vectorized && start + VEC <= cols {
        let raw = x.load_chunk::<VEC>((base + start) / VEC);
        for k in 0..VEC {
            v[k] = raw[k].to_f32();
        }
    } else {
        for (k, slot) in v.iter_mut().enumerate() {
            if start + k < cols {
                *slot = x.load(base + start + k).to_f32();
            }
        }
    }
    v
}

/// Stores chunk `c` of the row starting at `base`; elements past `cols` are not written.
#[inline(always)]
#[track_caller]
pub fn store_chunk<T: Element, const VEC: usize>(
    y: &GlobalMut<T>,
    base: usize,
    cols: usize,
    c: usize,
    vectorized: bool,
    v: [f32; VEC],
) {
    let start = c * VEC;
    if vectorized && start + VEC <= cols {
        let mut raw = [T::from_f32(0.0); VEC];
        for k in 0..VEC {
            raw[k] = T::from_f32(v[k]);
        }
        y.store_chunk::<VEC>((base + start) / VEC, raw);
    } else {
        for (k, &val) in v.iter().enumerate() {
            if start + k < cols {
                y.store(base + start + k, T::from_f32(val));
            }
        }
    }
}

/// Runs `$body` for `$j` in `0..$n` (`$n` a constant at most [`MAX_CACHE_CHUNKS`]), unrolled
/// by hand: with literal indices the row cache (`[[f32; VEC]; MAX_CACHE_CHUNKS]`) stays in
/// registers. A loop over the cache is too large for LLVM's full-unroll heuristics and would
/// put the cache in local memory (a stack frame in ptxas's report, which the CI gate rejects).
#[macro_export]
macro_rules! for_each_cached_chunk {
    ($j:ident < $n:expr => $body:block) => {{
        const _: () = assert!($crate::rows::MAX_CACHE_CHUNKS == 4, "for_each_cached_chunk unrolls 4 chunks");
        { let $j: usize = 0; if $j < $n $body }
        { let $j: usize = 1; if $j < $n $body }
        { let $j: usize = 2; if $j < $n $body }
        { let $j: usize = 3; if $j < $n $body }
    }};
}

/// The split strategy's coordinates: (row, segment, segments, first element of the segment,
/// elements in it). Grid x runs over segments, grid y over rows.
#[inline(always)]
pub fn split_segment(cols: usize, segment: usize) -> (usize, usize, usize, usize, usize) {
    let (seg, row) = (block_idx_x() as usize, crate::device::thread::block_idx_y() as usize);
    let start = seg * segment;
    (row, seg, grid_dim_x() as usize, start, segment.min(cols.saturating_sub(start)))
}

/// Chunks in a row of `cols` elements.
#[inline(always)]
pub const fn chunks(cols: usize, vec: usize) -> usize {
    cols.div_ceil(vec)
}
