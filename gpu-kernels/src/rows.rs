//! The row engine shared by every row op (reductions, softmax, norms): how rows map to
//! threads, how a row's chunks are loaded and stored, and group-wide reductions.
//!
//! # Thread mapping
//! A row is owned by a *group* of `G` threads: a warp (`G = 32`) for short rows, or a whole
//! block (one row per block) for long ones: the `*_block` kernels with `G =`
//! [`BLOCK_ROW_THREADS`], and the `*_block_small` kernels with `G =` [`BLOCK_GROUP`] for rows
//! that fewer threads cache ([`block_row_threads`]). The warp kernels of the reductions and of
//! the forward ops but layernorm split the warp into groups of the launch's lanes
//! ([`warp_row_lanes`], 1 to 32; [`RowWalk`]), so a warp takes `32 / lanes` short rows at a
//! time. Groups walk rows with a grid-stride loop, so any row count works and the loop is
//! uniform across the warp or block (barriers and full-mask shuffles stay legal).
//! Inside a row, thread `lane` of a group of `g` owns chunks `lane, lane + g, lane + 2g, ...`; a
//! chunk is `VEC` consecutive elements (16 bytes: 4 f32 or 8 f16/bf16). Adjacent threads own
//! adjacent chunks, so a group's accesses coalesce into full 128-byte lines.
//!
//! # Caching
//! Ops that read a row more than once (softmax, cross_entropy, the forward norms) keep up to
//! [`ROW_CACHE_BYTES`] (64) of it per thread in registers, in the storage type: 16 f32 or 32
//! f16/bf16 values, widened to f32 where they are used. Rows up to `G` times that
//! ([`RowStrategy::capacity`]: 512 f32 or 1024 16-bit columns for a warp, 8192 or 16384 for
//! a block of 512) are read from memory once. A block gets the fewest threads that cache its
//! row ([`block_row_threads`]: 256 for 4096 f32 columns, 128 for 4096 f16), so that more rows
//! are in flight per SM (below).
//! Longer rows are cached in dynamic shared memory by the [`RowStrategy::Shared`] strategy
//! while they fit ([`SHARED_ROW_MAX_BYTES`], Hopper's 227 KB per block with the opt-in above
//! 48 KB: 58016 f32 or 116032 f16/bf16 columns); each thread caches exactly the chunks it
//! loads, so the cache needs no barrier. Rows beyond shared capacity stream, re-reading the
//! row per pass, or go to the split strategy.
//!
//! # Bytes per strategy (the floor each can reach)
//! With `m` the bytes of one row-shaped tensor (`rows * cols * size_of::<T>()`), every input
//! read once and every output written once is the op's floor (the bench's `row_bytes`):
//!
//! | op | floor | warp / block (registers), shared | block streaming | split |
//! |---|---|---|---|---|
//! | sum, max, argmax | m | m | m | m (+ 12 B per segment) |
//! | softmax, log_softmax | 2m | 2m | 3m (stats, then re-read to write) | 3m (stats launch, apply launch re-reads) |
//! | cross_entropy with gradient | 2m | 2m | 3m | 3m |
//! | cross_entropy, loss only | m | m | m (online stats) | m |
//! | layernorm | 2m | 2m | 4m (mean, variance, write passes) | 3m |
//! | rmsnorm | 2m | 2m | 3m | 3m |
//! | layernorm/rmsnorm backward | 3m | 3m when the second pass over x, dy hits L1/L2, up to 5m; the parameter sums stay in registers | 5m, or 3m when the second pass hits L2; the parameter sums in shared memory while they fit (layernorm to 29008 columns, rmsnorm 58016) | 5m (+ the partial rows) |
//! | softmax backward | 3m | 3m (registers; no shared path) | 5m, or 3m when the second pass over y, dy hits L2 | - |
//!
//! The cached strategies reach the floor; streaming and split pay an extra read of the row.
//! That sets the thresholds: shared caching is preferred over split whenever it fits and
//! there are enough rows to occupy the GPU at one block per SM, since split's extra read
//! caps it at 2/3 of the floor's speed (softmax, cross_entropy): split wins only for fewer
//! rows than 2/3 of the SMs ([`SPLIT_MAX_ROWS_SHARED`]). When the row does not fit, block
//! streaming and split move the same bytes (or split fewer: layernorm), so split takes every
//! shape with fewer than [`SPLIT_MAX_ROWS`] long rows, as for the reductions. The norm
//! backward's rows whose parameter sums do not fit shared memory take split at any row count
//! ([`RowPlan::stream_sums`]): streaming would read and write them in global memory per row.
//!
//! # Occupancy
//! The block kernels' registers decide how many blocks share an SM. With one 512-thread
//! kernel per op (ptxas 12.9, sm_90a), softmax_f32_block had 76 registers: a block took 40960
//! of the SM's 65536, one 16 KB row (4096 f32) in flight per SM, and the H200 measured
//! softmax at 0.33 of a copy's bandwidth there (2026-12-04), sum (26 registers, four blocks)
//! at 0.87. About 30-40 KB must be in flight per SM to cover HBM's latency
//! (4.8 TB/s / 132 SMs x ~1 us). So a register-cached row gets the fewest threads that hold
//! it, each caching [`ROW_CACHE_BYTES`] ([`block_row_threads`]: 256 threads at 4096 f32
//! columns).
//!
//! Those launches run separate kernels, `*_block_small`, whose group size is read from the
//! launch ([`BLOCK_GROUP`]). This body, then the only block kernel, ran softmax at 0.45 of
//! copy and sum at 0.98 at 32768 x 4096 with 256 threads on the H200 (2026-12-04). The
//! `*_block` kernels keep the constant 512: the run-time stride cost the 512-thread
//! streaming and shared paths up to a third of their speed (f16 log_softmax over
//! 4096 x 32768: 0.66 -> 0.44 of copy), presumably by loops that no longer unroll. One kernel
//! holding both bodies (a branch on the block size) took up to 140 registers (sm_90
//! layernorm_backward_bf16_block; 133 in layernorm_f32_block on sm_80), more than a
//! 512-thread block may have, and the CI's ptxas gate refused it; so each body is its own
//! entry point, with its own register count.
//!
//! Registers (ptxas 12.9, sm_90a; sm_80 in brackets where it differs by more than a few;
//! 2026-12-06):
//!
//! | kernels | `*_block` (512 threads) | `*_block_small` (64-256) | `*_warp` |
//! |---|---|---|---|
//! | sum, max, argmax | 32-39 | 28-46 | 36-64 |
//! | softmax, log_softmax | 56-61 [66-80] | 56-77 | 48-55 [64-76] |
//! | cross_entropy | 64-70 [85-96] | 60-64 [79-96] | 62-64 [78-88] |
//! | layernorm, rmsnorm | 63-80 [77-90] | 63-96 [80-94] | 56-72 [64-80] |
//! | layernorm, rmsnorm backward | 85-121 | 85-116 [89-127] | 80-115 |
//! | softmax backward (always 512) | 60-64 [67-79] | - | 56-61 [64-77] |
//!
//! Most of the drop from the previous table (softmax small blocks 89-115, norms 96-124) came
//! from where the scalar fallbacks of [`load_raw_chunk`] and [`store_chunk`] (unaligned rows,
//! a row's last partial chunk) compute their addresses: LLVM hoisted each cached chunk's
//! address out of the row loop, one 64-bit register pair per chunk and tensor, held for a
//! path that aligned rows never take; now they are computed when the path is taken.
//!
//! (layernorm, since its block kernels exchange each warp's moments once per row in place
//! of two block reductions: 74-96 registers in its block kernels, layernorm_f32_block_small
//! 84 where it took 91. The 16-bit forward kernels, since they keep 32 values of their row
//! per thread as 16-bit values and widen them at each use (2026-12-07): softmax and
//! log_softmax 64-79 [80-96], cross_entropy 78-99 [104-126], layernorm and rmsnorm 80-120
//! [95-118].)
//!
//! Those are the counts ptxas picks by itself. [`ROW_OCCUPANCY`] then declares most of the
//! forward kernels to ptxas for four 256-thread blocks per SM (at most 64 registers; 32 warps,
//! four rows of 4096 f32 in flight, or eight 128-thread blocks of 4096 f16) or two 512-thread
//! blocks, layernorm's small blocks, the 16-bit cross_entropy and norm kernels that spill at
//! 64 and 16-bit rmsnorm backward's for three (80), each at the most blocks that assemble
//! without spills; the other backward norms stay unbounded (two blocks). Not yet measured on
//! the GPU.
//!
//! A block caching `b` bytes of row in shared memory uses `b + 384` bytes of it. An SM has
//! 228 KB, so rows of more than ~113 KB (28k f32 / 56k 16-bit columns) allow one 512-thread
//! block per SM, shorter ones two (registers allow one). Caching the row saves a full re-read
//! (a third of softmax's traffic, half of layernorm's); the fill loop keeps four 16-byte loads
//! in flight per thread, 32 KB per 512-thread block.
//!
//! # Safety
//! Launchers guarantee `rows * cols` elements in every row-shaped view, `rows` elements in
//! per-row outputs, and `vectorized != 0` only when every row of every view starts 16-byte
//! aligned (`cols * size_of::<T>() % 16 == 0` and aligned bases).

use crate::device::reduce::{Reduce, block_reduce, warp_reduce_groups};
use crate::device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};
use crate::device::{Bytes16, Element, Global, GlobalMut, Shared, WARP_SIZE, hint};

/// Threads per block in warp-per-row kernels (8 rows per block).
pub const WARP_BLOCK_THREADS: u32 = 256;
/// Threads per row (and per block) in block-per-row kernels.
pub const BLOCK_ROW_THREADS: u32 = 512;
/// Values each thread of the backward kernels keeps per column in f32 registers (softmax
/// backward's `y` and `dy`, the norm backward's parameter sums), and the reductions' share of
/// a row (block threads are sized by it). 16 keeps the block-per-row kernels under 128
/// registers per thread, the most a 512-thread block can have on a 64K-register SM (checked
/// offline by ptxas in CI); 32 f32 values pushed the 16-bit kernels to ~195 registers.
pub const CACHE_VALUES: usize = 16;
/// The most chunks any kernel caches: the forward kernels' whole row cache (4 chunks of 16
/// bytes, 64 bytes per thread in the storage type: 16 f32 or 32 f16/bf16 values); f32
/// [`CACHE_VALUES`] are 4 chunks of f32 and 2 of 16-bit.
pub const MAX_CACHE_CHUNKS: usize = 4;
/// Bytes of its row each thread of a forward kernel (softmax, log_softmax, cross_entropy,
/// layernorm, rmsnorm) keeps in registers, in the storage type ([`RowPlan::cached`]).
pub const ROW_CACHE_BYTES: usize = MAX_CACHE_CHUNKS * 16;

/// Chunks of `VEC` elements that make up [`CACHE_VALUES`].
pub const fn cache_chunks(vec: usize) -> usize {
    CACHE_VALUES / vec
}
/// Largest grid a row kernel is launched with; more rows are covered by the grid-stride loop.
pub const MAX_ROW_BLOCKS: u32 = 65535;

/// Dynamic shared memory of block-per-row kernels: the block-reduction scratch (3 words per
/// warp, 32 warps).
pub const BLOCK_SCRATCH_BYTES: u32 = Shared::<u32>::bytes(crate::device::reduce::block_scratch_words(3));
pub(crate) const SCRATCH: Shared<u32> = Shared::at(0, crate::device::reduce::block_scratch_words(3));

/// The largest dynamic shared segment one block may use: Hopper's 227 KB per block, with the
/// opt-in the GPU launcher sets above 48 KB. Devices with less (sm_80: 163 KB) get what they
/// report: the launcher takes the smaller of the two.
pub const MAX_BLOCK_SHARED_BYTES: u32 = 227 * 1024;
/// Byte offset of the shared row cache: after the block-reduction scratch, 16-byte aligned.
pub const SHARED_ROW_OFFSET: u32 = BLOCK_SCRATCH_BYTES.next_multiple_of(16);
/// Most bytes of row the shared strategy caches per block: the one config the launchers read.
pub const SHARED_ROW_MAX_BYTES: u32 = MAX_BLOCK_SHARED_BYTES - SHARED_ROW_OFFSET;
/// SMs of the GPU the thresholds are tuned for (H200: 132).
pub const TARGET_SMS: usize = 132;
/// With the row cached in shared memory, the split strategy (which re-reads the row) is
/// chosen only for fewer rows than this: 2/3 of the SMs, where one block per row leaves more
/// of the GPU idle than split's extra read costs.
pub const SPLIT_MAX_ROWS_SHARED: usize = TARGET_SMS * 2 / 3;

/// Bytes the shared row cache needs for a row of `cols` elements of `elem` bytes: whole
/// 16-byte chunks (the tail chunk is padded).
pub const fn shared_row_bytes(cols: usize, elem: usize) -> usize {
    cols.div_ceil(16 / elem) * 16
}

/// Dynamic shared memory of a [`RowStrategy::Shared`] launch over rows of `cols` elements.
pub const fn shared_launch_bytes(cols: usize, elem: usize) -> usize {
    SHARED_ROW_OFFSET as usize + shared_row_bytes(cols, elem)
}

/// Fewest threads of a block-per-row launch.
pub const MIN_BLOCK_ROW_THREADS: u32 = 64;

/// Threads of a block-strategy launch over rows of `cols` elements when each thread holds
/// `values` of them ([`RowPlan::values`]): the fewest (a power of two,
/// [`MIN_BLOCK_ROW_THREADS`] to [`BLOCK_ROW_THREADS`]) whose registers cache the row,
/// [`BLOCK_ROW_THREADS`] for rows past the cache. The registers per thread are the kernel's
/// whatever the block size, so smaller blocks put more rows in flight per SM: at 4096
/// columns, two 256-thread softmax blocks share an SM where one 512-thread block fit (see
/// "Occupancy" above).
pub const fn block_row_threads(cols: usize, values: usize) -> u32 {
    let t = cols.div_ceil(values).next_power_of_two();
    if t < MIN_BLOCK_ROW_THREADS as usize {
        MIN_BLOCK_ROW_THREADS
    } else if t > BLOCK_ROW_THREADS as usize {
        BLOCK_ROW_THREADS
    } else {
        t as u32
    }
}

/// Elements of one row that one block handles in the split strategy: what a block's
/// registers hold at [`CACHE_VALUES`] per thread (f32 rows' full cache, half of 16-bit's).
pub const SPLIT_SEGMENT: u32 = BLOCK_ROW_THREADS * CACHE_VALUES as u32;
/// The split strategy is chosen for rows longer than this...
pub const SPLIT_MIN_COLS: usize = 4 * SPLIT_SEGMENT as usize;
/// ...when there are fewer rows than this: below it, one block per row leaves SMs idle
/// (an H200 has 132), above it block-per-row already fills the GPU.
pub const SPLIT_MAX_ROWS: usize = 512;
/// Most rows a split launch takes: its first launch has a block per (segment, row), rows
/// on grid y.
pub const SPLIT_MAX_GRID_ROWS: usize = 65_535;
/// Threads per block of the split strategy's final combine (one warp per row).
pub const SPLIT_FINAL_THREADS: u32 = WARP_SIZE;

/// How rows map to threads; one kernel per strategy per op and dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowStrategy {
    /// A warp per row: rows up to [`RowStrategy::capacity`] columns.
    Warp,
    /// A block of [`BLOCK_ROW_THREADS`] per row; rows past the register cache stream.
    Block,
    /// A block per row with the row cached in dynamic shared memory (rows past the register
    /// cache that fit [`SHARED_ROW_MAX_BYTES`]), so ops that read a row more than once read
    /// it from memory once. Launches the block kernels with the cache turned on.
    Shared,
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
            RowStrategy::Block | RowStrategy::Shared | RowStrategy::Split => BLOCK_ROW_THREADS,
        }
    }
    pub const fn block_threads(self) -> u32 {
        match self {
            RowStrategy::Warp => WARP_BLOCK_THREADS,
            RowStrategy::Block | RowStrategy::Shared | RowStrategy::Split => BLOCK_ROW_THREADS,
        }
    }
    /// Threads per block of a launch of an op described by `plan` over rows of `cols`
    /// elements: the block strategy's [`block_row_threads`], the others'
    /// [`RowStrategy::block_threads`].
    pub const fn launch_threads(self, cols: usize, plan: RowPlan) -> u32 {
        match self {
            RowStrategy::Block => block_row_threads(cols, plan.values),
            _ => self.block_threads(),
        }
    }
    /// Rows one block handles at a time (1 for every block-per-row strategy).
    pub const fn rows_per_block(self) -> u32 {
        self.block_threads() / self.group()
    }
    /// Dynamic shared memory of a launch over rows of `cols` elements of `elem` bytes.
    pub const fn shared_bytes(self, cols: usize, elem: usize) -> u32 {
        match self {
            RowStrategy::Warp => 0,
            RowStrategy::Block | RowStrategy::Split => BLOCK_SCRATCH_BYTES,
            RowStrategy::Shared => shared_launch_bytes(cols, elem) as u32,
        }
    }
    /// Columns a group of an op described by `plan` holds in registers.
    pub const fn capacity(self, plan: RowPlan) -> usize {
        self.group() as usize * plan.values
    }
    /// The strategy for ops that have a split kernel and read a row once (the reductions):
    /// split for few, long rows, a warp while the warp holds the row, else a block.
    pub const fn for_shape(rows: usize, cols: usize) -> Self {
        RowStrategy::select(rows, cols, RowPlan::ONE_PASS, 0)
    }
    /// The strategy for an op described by `plan` over `rows` x `cols`, when one block may
    /// use `shared_limit` bytes of dynamic shared memory: a warp while the warp's registers
    /// hold the row; a block while the block's registers do; beyond, the row cached in shared
    /// memory if the op re-reads rows and the row fits, unless there are too few rows to fill
    /// the GPU and split exists; else split for few long rows, else block streaming. See the
    /// module docs for the byte counts behind each threshold.
    pub const fn select(rows: usize, cols: usize, plan: RowPlan, shared_limit: u32) -> Self {
        if cols <= RowStrategy::Warp.capacity(plan) {
            return RowStrategy::Warp;
        }
        if cols <= RowStrategy::Block.capacity(plan) {
            return RowStrategy::Block;
        }
        let fits = plan.cache_elem > 0 && shared_launch_bytes(cols, plan.cache_elem) <= shared_limit as usize;
        let few = rows < if fits { SPLIT_MAX_ROWS_SHARED } else { SPLIT_MAX_ROWS };
        // Block streaming past its shared sums would update them in global memory every row.
        let sums_spill = plan.stream_sums > 0 && stream_sums_bytes(cols, plan.stream_sums) > shared_limit as usize;
        if plan.split && rows <= SPLIT_MAX_GRID_ROWS && ((cols > SPLIT_MIN_COLS && few) || sums_spill) {
            RowStrategy::Split
        } else if fits {
            RowStrategy::Shared
        } else {
            RowStrategy::Block
        }
    }
    /// Segments of a split row of `cols` elements.
    pub const fn segments(cols: usize) -> usize {
        cols.div_ceil(SPLIT_SEGMENT as usize)
    }
}

/// What the strategy choice needs to know about an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowPlan {
    /// Bytes per column the op caches in shared memory when its rows do not fit registers
    /// (the element size for ops that read a row more than once; 0 for single-pass ops).
    pub cache_elem: usize,
    /// Whether the op has split kernels.
    pub split: bool,
    /// Columns of a row each thread holds in registers: a group of `G` threads holds rows of
    /// up to `G * values` columns ([`RowStrategy::capacity`]), and a block gets the fewest
    /// threads that hold its row ([`block_row_threads`]).
    pub values: usize,
    /// Bytes per column that the op's block streaming keeps in shared memory across rows (the
    /// norm backward's f32 parameter sums: 8 for layernorm, 4 for rmsnorm; 0 for other ops).
    /// Where they do not fit ([`stream_sums_bytes`]), streaming would update them in global
    /// memory once per row, so such rows take split whatever their count.
    pub stream_sums: usize,
}

/// Dynamic shared memory of a block-streaming launch that keeps `per_col` bytes of sums per
/// column of a `cols`-column row, after the block-reduction scratch.
pub const fn stream_sums_bytes(cols: usize, per_col: usize) -> usize {
    SHARED_ROW_OFFSET as usize + cols * per_col
}

impl RowPlan {
    /// Reads each row once, has split kernels (sum, max, argmax; cross_entropy without the
    /// gradient; the norm backward, whose registers hold f32 parameter sums per column).
    pub const ONE_PASS: RowPlan = RowPlan { cache_elem: 0, split: true, values: CACHE_VALUES, stream_sums: 0 };
    /// The norm backward (`layer`: layernorm, else rmsnorm): one pass as far as the choice
    /// goes, with f32 parameter sums per column (`dy xhat`, and layernorm's `dy`) that block
    /// streaming keeps in shared memory. Past them it took 1024 row groups' partial rows
    /// through a read and a write per row: layernorm backward at 4096 x 32768 ran at 0.057 of
    /// a copy in f16, 0.18 in f32 (H200, 2026-12-04), where split reads the row twice (5m).
    pub const fn norm_backward(layer: bool) -> RowPlan {
        RowPlan { stream_sums: if layer { 8 } else { 4 }, ..RowPlan::ONE_PASS }
    }
    /// Reads each row more than once, has split kernels and a shared-memory cache (softmax,
    /// log_softmax, cross_entropy with the gradient, layernorm, rmsnorm) over `elem`-byte
    /// elements, and keeps [`ROW_CACHE_BYTES`] of the row per thread in registers in the
    /// storage type: 16 f32 or 32 f16/bf16 values, so that a 16-bit row of 4096 columns takes
    /// 128 threads with four 16-byte loads in flight each, as f32's 256 do. Cached as 16
    /// values widened to f32, a 16-bit thread had two loads in flight, and 16-bit softmax ran
    /// at 0.34 of a copy where f32 ran at 0.45 (H200, 2026-12-04, 32768 x 4096).
    pub const fn cached(elem: usize) -> RowPlan {
        RowPlan { cache_elem: elem, split: true, values: ROW_CACHE_BYTES / elem, stream_sums: 0 }
    }
    /// No cache, no split (softmax and log_softmax backward).
    pub const BLOCK_ONLY: RowPlan = RowPlan { cache_elem: 0, split: false, values: CACHE_VALUES, stream_sums: 0 };
}

const _: () = assert!(WARP_BLOCK_THREADS.is_multiple_of(WARP_SIZE) && WARP_BLOCK_THREADS <= 1024);
const _: () = assert!(SHARED_ROW_OFFSET.is_multiple_of(16) && SHARED_ROW_MAX_BYTES.is_multiple_of(16));
const _: () = assert!(
    SPLIT_SEGMENT as usize == RowStrategy::Block.capacity(RowPlan::cached(4))
        && SPLIT_SEGMENT as usize <= RowStrategy::Block.capacity(RowPlan::cached(2)),
    "a split segment fits the block's registers"
);
const _: () = assert!(BLOCK_ROW_THREADS.is_multiple_of(WARP_SIZE) && BLOCK_ROW_THREADS <= 1024);

/// Threads per block of `name` if it is a row kernel (reduce, softmax, norm families).
pub fn launch_threads(name: &str) -> Option<u32> {
    let families = [crate::reduce::KERNEL_NAMES, crate::softmax::KERNEL_NAMES, crate::norm::KERNEL_NAMES];
    // Every split kernel (`_split`, `_apply_split`) runs a block per segment.
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
    } else if name.ends_with("_block_small") {
        Some(SMALL_BLOCK_MAX_THREADS)
    } else if name.ends_with("_block") || name.ends_with("_split") {
        Some(RowStrategy::Block.block_threads())
    } else {
        None
    }
}

/// Blocks per SM declared to ptxas for a set of row kernels ([`launch_min_blocks`]): with
/// `.maxntid` at the kernel's launch threads, ptxas caps its registers at
/// `65536 / (threads x blocks)` (64 for four 256-thread blocks, 80 for three, 64 for two of
/// 512). Every combination of `ops`, `dtypes` and `kinds` names a kernel `{op}_{dtype}_{kind}`.
#[derive(Clone, Copy, Debug)]
pub struct RowOccupancy {
    pub ops: &'static [&'static str],
    pub dtypes: &'static [&'static str],
    /// `warp` and `block_small` (256 threads) or `block` (512).
    pub kinds: &'static [&'static str],
    pub blocks: u32,
    /// The oldest arch (`sm_80` = 80) it applies to.
    pub since_sm: u32,
}

impl RowOccupancy {
    /// Whether kernel `name` is one of this entry's.
    pub fn matches(&self, name: &str) -> bool {
        fn after<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
            s.strip_prefix(prefix)?.strip_prefix('_')
        }
        self.ops
            .iter()
            .filter_map(|op| after(name, op))
            .any(|r| self.dtypes.iter().filter_map(|d| after(r, d)).any(|kind| self.kinds.contains(&kind)))
    }
}

const ALL_DTYPES: &[&str] = &["f32", "f16", "bf16"];
const HALF_DTYPES: &[&str] = &["f16", "bf16"];
const SMALL: &[&str] = &["warp", "block_small"];

/// The row kernels built for more blocks per SM than their registers would otherwise allow.
/// Each entry is the most blocks at which the kernels assemble without spills on every arch
/// it names (ptxas 12.9, 2026-12-06, the 16-bit forward kernels 2026-12-07; the CI's ptxas
/// gate checks it on sm_80, sm_90 and sm_90a). Unbounded, the small-block softmax kernels
/// took 89-115 registers (two 256-thread blocks per SM, two rows of 4096 columns in flight)
/// and ran at 0.45 of a copy (f16: 0.34; H200, 2026-12-04), where sum, at four blocks, ran at
/// 0.98. Since the scalar fallbacks compute their addresses in place (see "Occupancy" in the
/// module docs), most of the forward kernels take 53-77 registers unbounded and fit 64
/// without spills. At three blocks (80): layernorm's small blocks (8-24 B of spills at 64,
/// measured before its single exchange per row, see norm.rs), and the 16-bit cross_entropy
/// and rmsnorm small kernels and layernorm warp kernels since their rows stay in registers as
/// 16-bit values (78-119 unbounded, 8-32 B of spills at 64: each use widens them again). The backward norms spill at 80 (layernorm, 32-236 B; rmsnorm f32 small
/// blocks 32 B; rmsnorm warp kernels 8 B on sm_80 only), the 512-thread backward norms and
/// 16-bit forward norms and cross_entropy at 64 (8-624 B), and those stay where they are.
pub const ROW_OCCUPANCY: &[RowOccupancy] = &[
    RowOccupancy { ops: &["softmax", "log_softmax"], dtypes: ALL_DTYPES, kinds: SMALL, blocks: 4, since_sm: 80 },
    RowOccupancy { ops: &["cross_entropy", "rmsnorm"], dtypes: &["f32"], kinds: SMALL, blocks: 4, since_sm: 80 },
    RowOccupancy { ops: &["layernorm"], dtypes: &["f32"], kinds: &["warp"], blocks: 4, since_sm: 80 },
    RowOccupancy {
        ops: &["softmax_backward", "log_softmax_backward"],
        dtypes: ALL_DTYPES,
        kinds: &["warp"],
        blocks: 4,
        since_sm: 80,
    },
    RowOccupancy { ops: &["cross_entropy", "rmsnorm"], dtypes: HALF_DTYPES, kinds: SMALL, blocks: 3, since_sm: 80 },
    RowOccupancy { ops: &["layernorm"], dtypes: HALF_DTYPES, kinds: &["warp"], blocks: 3, since_sm: 80 },
    RowOccupancy { ops: &["layernorm"], dtypes: ALL_DTYPES, kinds: &["block_small"], blocks: 3, since_sm: 80 },
    RowOccupancy { ops: &["rmsnorm_backward"], dtypes: HALF_DTYPES, kinds: &["block_small"], blocks: 3, since_sm: 80 },
    RowOccupancy { ops: &["rmsnorm_backward"], dtypes: ALL_DTYPES, kinds: &["warp"], blocks: 3, since_sm: 90 },
    RowOccupancy {
        ops: &["softmax", "log_softmax", "softmax_backward", "log_softmax_backward"],
        dtypes: ALL_DTYPES,
        kinds: &["block"],
        blocks: 2,
        since_sm: 80,
    },
    RowOccupancy {
        ops: &["cross_entropy", "rmsnorm", "layernorm"],
        dtypes: &["f32"],
        kinds: &["block"],
        blocks: 2,
        since_sm: 80,
    },
];

/// Blocks per SM that row kernel `name` must fit when built for `arch` ([`ROW_OCCUPANCY`];
/// see `crate::launch_min_blocks`).
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_min_blocks(name: &str, arch: &str) -> Option<u32> {
    let sm = arch.strip_prefix("sm_").and_then(|v| v.trim_end_matches('a').parse::<u32>().ok())?;
    ROW_OCCUPANCY.iter().find(|o| sm >= o.since_sm && o.matches(name)).map(|o| o.blocks)
}

/// The `G` of the small-block kernels (`*_block_small`): the row's group is the whole block,
/// of whatever size the launcher gives it ([`block_row_threads`], 64 to
/// [`SMALL_BLOCK_MAX_THREADS`]). The `*_block` kernels have `G =` [`BLOCK_ROW_THREADS`]
/// instead, a constant: see "Occupancy" above for why both exist.
pub const BLOCK_GROUP: u32 = 0;

/// Most threads a small-block kernel is launched with: block-strategy rows that need
/// [`BLOCK_ROW_THREADS`] run the `*_block` kernels.
pub const SMALL_BLOCK_MAX_THREADS: u32 = BLOCK_ROW_THREADS / 2;

/// Threads in the row's group: `G`, or the block's size for [`BLOCK_GROUP`].
#[inline(always)]
pub fn group_threads<const G: u32>() -> usize {
    if G == BLOCK_GROUP { block_dim_x() as usize } else { G as usize }
}

/// The index of this thread's group in the grid.
#[inline(always)]
pub fn group_index<const G: u32>() -> usize {
    let g = group_threads::<G>();
    block_idx_x() as usize * (block_dim_x() as usize / g) + thread_idx_x() as usize / g
}

/// This thread's first row, the row stride, and its lane in the row's group.
#[inline(always)]
pub fn assign<const G: u32>() -> (usize, usize, u32) {
    let tid = thread_idx_x();
    if G == BLOCK_GROUP {
        return (block_idx_x() as usize, grid_dim_x() as usize, tid);
    }
    if !block_dim_x().is_multiple_of(G) {
        // A launcher bug (rows::launch_threads names each kernel's block size); without this,
        // a block smaller than its group would loop forever on a row stride of zero.
        panic!("a row kernel's block must be a whole number of its row groups");
    }
    let rows_per_block = (block_dim_x() / G) as usize;
    let first = block_idx_x() as usize * rows_per_block + (tid / G) as usize;
    (first, grid_dim_x() as usize * rows_per_block, tid % G)
}

/// A thread's walk over the rows of a forward row kernel: its group of `g` threads and its
/// `lane` in it, the group's current `row`, and the row stride. Block kernels: the block is
/// the group ([`assign`]). Warp kernels: groups of the launch's lanes per row
/// ([`warp_row_lanes`]), so a warp takes `32 / g` adjacent rows at a time; with a whole warp
/// per row, a 128-column f16 row (16 chunks) left half the lanes idle and one 16-byte load in
/// flight per busy thread (f16 softmax ran at 0.27 of a copy at 1048576 x 128, H200,
/// 2026-12-04). A warp's groups step together ([`RowWalk::more`]), so the group reductions'
/// shuffles always have the whole warp. A group past the last row ([`RowWalk::live`] false)
/// writes nothing: the reductions walk an empty row ([`RowWalk::cols`]); the forward ops read
/// the last row again and skip their stores, so that their column count stays the same in
/// every row (with a count per row, the warp kernels took 4 to 16 more registers and
/// cross_entropy_f32_warp spilled 36 B under its launch bound: ptxas 12.9, sm_90a,
/// 2026-12-07). layernorm keeps a whole warp per row (see norm.rs).
#[derive(Clone, Copy)]
pub struct RowWalk {
    pub row: usize,
    pub stride: usize,
    pub lane: usize,
    pub g: usize,
    /// The group's index in its warp (0 in block kernels): `row - group` is the warp's first
    /// row.
    group: usize,
}

impl RowWalk {
    /// The walk of a kernel whose rows take groups of `G` threads; warp kernels (`G = 32`)
    /// take groups of `lanes` threads (a power of two, 1 to 32).
    #[inline(always)]
    pub fn new<const G: u32>(lanes: u32) -> RowWalk {
        if G != WARP_SIZE {
            let (row, stride, lane) = assign::<G>();
            return RowWalk { row, stride, lane: lane as usize, g: group_threads::<G>(), group: 0 };
        }
        if lanes == 0 || lanes > WARP_SIZE || !lanes.is_power_of_two() {
            // A launcher bug (rows::warp_row_lanes gives the count): a group must tile the warp.
            panic!("a warp row kernel's lanes per row must be a power of two from 1 to 32");
        }
        let tid = thread_idx_x() as usize;
        let (lanes, warp_lane) = (lanes as usize, tid % WARP_SIZE as usize);
        let rows_per_warp = WARP_SIZE as usize / lanes;
        let warps_per_block = block_dim_x() as usize / WARP_SIZE as usize;
        let warp = block_idx_x() as usize * warps_per_block + tid / WARP_SIZE as usize;
        let group = warp_lane / lanes;
        RowWalk {
            row: warp * rows_per_warp + group,
            stride: grid_dim_x() as usize * warps_per_block * rows_per_warp,
            lane: warp_lane % lanes,
            g: lanes,
            group,
        }
    }
    /// Whether the group's warp (or block) has rows left: the same in every lane of a warp.
    #[inline(always)]
    pub fn more(&self, rows: usize) -> bool {
        self.row - self.group < rows
    }
    /// Whether the group's current row exists.
    #[inline(always)]
    pub fn live(&self, rows: usize) -> bool {
        self.row < rows
    }
    /// The columns the group walks in its current row: `cols`, or none past the last row.
    #[inline(always)]
    pub fn cols(&self, rows: usize, cols: usize) -> usize {
        if self.live(rows) { cols } else { 0 }
    }
    #[inline(always)]
    pub fn next(&mut self) {
        self.row += self.stride;
    }
}

/// [`group_reduce`] over groups of `g` threads: sub-warp groups in warp kernels
/// ([`RowWalk`]), the block otherwise.
#[inline(always)]
#[track_caller]
pub fn walk_reduce<R: Reduce, const G: u32>(v: R, g: usize) -> R {
    if G == WARP_SIZE { warp_reduce_groups(v, g as u32) } else { block_reduce(v, SCRATCH) }
}

/// Reduces over the row's group (warp shuffles, or the whole block through shared scratch):
/// [`walk_reduce`] for kernels whose warp is one group.
#[inline(always)]
#[track_caller]
pub fn group_reduce<R: Reduce, const G: u32>(v: R) -> R {
    walk_reduce::<R, G>(v, WARP_SIZE as usize)
}

/// Loads chunk `c` of the row starting at element `base`, as f32; elements past `cols` read as
/// `fill` (a value the storage type holds exactly: the kernels pass 0 and -inf). One 128-bit
/// load on the vectorized path, scalar loads otherwise.
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
    widen(load_raw_chunk::<T, VEC>(x, base, cols, c, vectorized, T::from_f32(fill)))
}

/// A chunk in the storage type, as f32.
#[inline(always)]
pub fn widen<T: Element, const VEC: usize>(raw: [T; VEC]) -> [f32; VEC] {
    let mut v = [0.0f32; VEC];
    for k in 0..VEC {
        v[k] = raw[k].to_f32();
    }
    v
}

/// A chunk of f32 values, rounded to the storage type.
#[inline(always)]
pub fn narrow<T: Element, const VEC: usize>(v: [f32; VEC]) -> [T; VEC] {
    let mut raw = [T::from_f32(0.0); VEC];
    for k in 0..VEC {
        raw[k] = T::from_f32(v[k]);
    }
    raw
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
        y.store_chunk::<VEC>((base + start) / VEC, narrow(v));
    } else {
        // The scalar path's address is computed here, when it is taken: hoisted out of the
        // row loop, the addresses of a thread's cached chunks took registers that the 16-byte
        // path needs (softmax_f32_block_small spilled them under its 80-register bound,
        // ptxas 12.9, sm_90a).
        let at = hint::opaque_usize(base + start);
        for (k, &val) in v.iter().enumerate() {
            if start + k < cols {
                y.store(at + k, T::from_f32(val));
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

/// Calls `f(start, values, n)` on this thread's chunks (`lane, lane + g, ...`, in index order,
/// `g` the threads of the row's group) of the row of `cols` elements at `base`: `values[..n]`
/// are elements `start..start + n` as f32 (`n < VEC` only in the row's last chunk; the rest
/// of `values` is 0).
///
/// For ops that read a row once (the reductions). One 16-byte load per step, used by the next
/// step's math, keeps one load in flight per thread: 16-bit rows, whose threads need more
/// registers than f32's and so fit fewer per SM, ran at 0.70-0.79 of a copy where f32 ran at
/// 0.98 (H200, 2026-12-04). So, as [`fill_shared`] does, each round loads up to
/// [`MAX_CACHE_CHUNKS`] chunks before it uses any: 64 bytes in flight per thread. The loads
/// are 16-byte only, so that no round carries a scalar fallback in its registers.
#[inline(always)]
#[track_caller]
pub fn stream_row<T: Element, const VEC: usize>(
    x: &Global<T>,
    base: usize,
    cols: usize,
    lane: usize,
    g: usize,
    vectorized: bool,
    mut f: impl FnMut(usize, &[f32; VEC], usize),
) {
    // Whole chunks of an aligned row: rounds of up to MAX_CACHE_CHUNKS 16-byte loads. `full`
    // (every chunk of the round exists) is redundant with the per-chunk guards, but without it
    // ptxas used chunk 0 before it issued the other three loads (sm_90a SASS, 2026-12-06).
    let whole = if vectorized { cols / VEC } else { 0 };
    let zero = T::from_f32(0.0);
    let mut c0 = lane;
    while c0 < whole {
        let full = c0 + (MAX_CACHE_CHUNKS - 1) * g < whole;
        let mut raw = [[zero; VEC]; MAX_CACHE_CHUNKS];
        crate::for_each_cached_chunk!(j < MAX_CACHE_CHUNKS => {
            if full || c0 + j * g < whole {
                raw[j] = x.load_chunk::<VEC>((base + (c0 + j * g) * VEC) / VEC);
            }
        });
        crate::for_each_cached_chunk!(j < MAX_CACHE_CHUNKS => {
            if full || c0 + j * g < whole {
                f((c0 + j * g) * VEC, &widen(raw[j]), VEC);
            }
        });
        c0 += MAX_CACHE_CHUNKS * g;
    }
    // The rest, scalar loads one chunk at a time: the row's partial last chunk, or every chunk
    // of an unaligned row. This thread's first chunk at or past `whole`:
    let mut c = if lane < whole { lane + (whole - lane).div_ceil(g) * g } else { lane };
    while c < chunks(cols, VEC) {
        f(c * VEC, &load_chunk::<T, VEC>(x, base, cols, c, false, 0.0), VEC.min(cols - c * VEC));
        c += g;
    }
}

/// Threads per row of the sub-warp row kernels ([`RowWalk`]) over rows of `cols` elements
/// (`vec` per chunk): the fewest, a power of two up to 32, that leave no thread more than
/// [`MAX_CACHE_CHUNKS`] chunks (one [`stream_row`] round, or the forward ops' register
/// cache), so that a warp takes `32 / lanes` rows at a time. With a whole warp per row, a
/// 128-column f16 row (16 chunks) left half the lanes idle and one 16-byte load in flight per
/// busy thread: sum ran at 0.39 of a copy there, f32 (32 chunks) at 0.90 (H200, 2026-12-04).
/// With 4 threads per row, every thread issues 4 loads at once.
pub const fn warp_row_lanes(cols: usize, vec: usize) -> u32 {
    let t = chunks(cols, vec).div_ceil(MAX_CACHE_CHUNKS).next_power_of_two();
    if t > WARP_SIZE as usize { WARP_SIZE } else { t as u32 }
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

/// Loads chunk `c` of the row starting at element `base` in the storage type; elements past
/// `cols` read as `fill`. As [`load_chunk`] without the conversion, for the shared cache.
#[inline(always)]
#[track_caller]
pub fn load_raw_chunk<T: Element, const VEC: usize>(
    x: &Global<T>,
    base: usize,
    cols: usize,
    c: usize,
    vectorized: bool,
    fill: T,
) -> [T; VEC] {
    let start = c * VEC;
    if vectorized && start + VEC <= cols {
        return x.load_chunk::<VEC>((base + start) / VEC);
    }
    // As in store_chunk: the scalar path's address is computed when it is taken.
    let at = hint::opaque_usize(base + start);
    let mut v = [fill; VEC];
    for (k, slot) in v.iter_mut().enumerate() {
        if start + k < cols {
            *slot = x.load(at + k);
        }
    }
    v
}

/// The shared row cache of a row of `nchunks` chunks: chunk `c` at [`SHARED_ROW_OFFSET`]
/// `+ 16 c`, in the storage type.
#[inline(always)]
pub fn shared_row(nchunks: usize) -> Shared<Bytes16> {
    Shared::at(SHARED_ROW_OFFSET, nchunks as u32)
}

/// Fills the shared row cache with this thread's chunks (`lane, lane + G, ...`) of the row at
/// `base` and calls `f(c, values)` on each as f32 (elements past `cols` read as `fill`).
/// Four chunks per thread are loaded before any is stored, so 64 bytes per thread are in
/// flight. Each thread later reads back only its own chunks: no barrier is needed, and the
/// next row's fill overwrites only the thread's own chunks.
#[inline(always)]
#[track_caller]
pub fn fill_shared<T: Element, const VEC: usize, const G: u32>(
    x: &Global<T>,
    base: usize,
    cols: usize,
    lane: usize,
    vectorized: bool,
    fill: f32,
    mut f: impl FnMut(usize, [f32; VEC]),
) {
    let nchunks = chunks(cols, VEC);
    let cache = shared_row(nchunks);
    let fill_t = T::from_f32(fill);
    let mut c0 = lane;
    while c0 < nchunks {
        let mut raw = [[fill_t; VEC]; MAX_CACHE_CHUNKS];
        crate::for_each_cached_chunk!(j < MAX_CACHE_CHUNKS => {
            let c = c0 + j * group_threads::<G>();
            if c < nchunks {
                raw[j] = load_raw_chunk::<T, VEC>(x, base, cols, c, vectorized, fill_t);
            }
        });
        crate::for_each_cached_chunk!(j < MAX_CACHE_CHUNKS => {
            let c = c0 + j * group_threads::<G>();
            if c < nchunks {
                cache.store_chunk::<T, VEC>(c as u32, raw[j]);
                f(c, widen(raw[j]));
            }
        });
        c0 += MAX_CACHE_CHUNKS * group_threads::<G>();
    }
}

/// Calls `f(c, values)` for this thread's chunks of a row of `cols` elements from the shared
/// row cache that [`fill_shared`] filled.
#[inline(always)]
#[track_caller]
pub fn visit_shared<T: Element, const VEC: usize, const G: u32>(
    cols: usize,
    lane: usize,
    mut f: impl FnMut(usize, [f32; VEC]),
) {
    let nchunks = chunks(cols, VEC);
    let cache = shared_row(nchunks);
    let mut c = lane;
    while c < nchunks {
        f(c, widen(cache.load_chunk::<T, VEC>(c as u32)));
        c += group_threads::<G>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block strategy's threads: a power of two from 64 to 512 whose registers hold the row,
    /// the fewest such, and 512 for rows past the cache.
    #[test]
    fn block_rows_get_the_fewest_threads_that_cache_them() {
        let f32_row = RowPlan::cached(4);
        for (cols, want) in
            [(1, 64), (513, 64), (1024, 64), (1025, 128), (4096, 256), (4097, 512), (8192, 512), (1 << 20, 512)]
        {
            assert_eq!(block_row_threads(cols, f32_row.values), want, "{cols} columns");
            assert_eq!(block_row_threads(cols, CACHE_VALUES), want, "{cols} columns, one pass");
        }
        // 16-bit rows: 32 values per thread, so 4096 columns take 128 threads.
        for (cols, want) in [(2048, 64), (2049, 128), (4096, 128), (8192, 256), (8193, 512), (16384, 512)] {
            assert_eq!(block_row_threads(cols, RowPlan::cached(2).values), want, "16-bit, {cols} columns");
        }
        for plan in [f32_row, RowPlan::cached(2), RowPlan::ONE_PASS, RowPlan::BLOCK_ONLY] {
            let values = plan.values;
            for cols in 1..=RowStrategy::Block.capacity(plan) {
                let t = block_row_threads(cols, values) as usize;
                assert!(t.is_power_of_two() && t * values >= cols, "{cols} columns: {t} threads");
                assert!(
                    t == MIN_BLOCK_ROW_THREADS as usize || (t / 2) * values < cols,
                    "{cols}: {t} is not the fewest"
                );
                let t = RowStrategy::Block.launch_threads(cols, plan);
                assert!(t <= SMALL_BLOCK_MAX_THREADS || t == BLOCK_ROW_THREADS, "{cols} columns: {t} threads");
            }
        }
        assert_eq!(RowStrategy::Shared.launch_threads(4096, f32_row), BLOCK_ROW_THREADS);
        assert_eq!(RowStrategy::Warp.launch_threads(100, f32_row), WARP_BLOCK_THREADS);
        // The forward ops' 16-bit rows stay on a warp to 1024 columns, a block to 16384.
        assert_eq!(RowStrategy::select(10_000, 1024, RowPlan::cached(2), 0), RowStrategy::Warp);
        assert_eq!(RowStrategy::select(10_000, 1025, RowPlan::cached(2), 0), RowStrategy::Block);
        assert_eq!(RowStrategy::select(10_000, 513, f32_row, 0), RowStrategy::Block);
        assert_eq!(RowStrategy::select(10_000, 16384, RowPlan::cached(2), 0), RowStrategy::Block);
        assert_eq!(RowStrategy::select(10_000, 16385, RowPlan::cached(2), MAX_BLOCK_SHARED_BYTES), RowStrategy::Shared);
        assert_eq!(RowStrategy::select(10_000, 513, RowPlan::ONE_PASS, 0), RowStrategy::Block);
    }

    /// Every kernel [`ROW_OCCUPANCY`] names exists, is a 256- or 512-thread row kernel whose
    /// blocks fit one SM's 2048 threads, and takes its entry's blocks, on its archs only; no
    /// other kernel matches an entry.
    #[test]
    fn occupancy_entries_name_existing_kernels() {
        let families = [crate::reduce::KERNEL_NAMES, crate::softmax::KERNEL_NAMES, crate::norm::KERNEL_NAMES];
        let mut named = 0;
        for o in ROW_OCCUPANCY {
            for op in o.ops {
                for d in o.dtypes {
                    for k in o.kinds {
                        let name = format!("{op}_{d}_{k}");
                        assert!(families.iter().any(|f| f.contains(&name.as_str())), "{name} is not a row kernel");
                        let threads = launch_threads(&name).unwrap();
                        assert!(threads * o.blocks <= 2048, "{name}: {threads} threads x {} blocks", o.blocks);
                        for arch in ["sm_80", "sm_90", "sm_90a"] {
                            let sm: u32 = arch[3..5].parse().unwrap();
                            let want = (sm >= o.since_sm).then_some(o.blocks);
                            assert_eq!(launch_min_blocks(&name, arch), want, "{name} on {arch}");
                        }
                        named += 1;
                    }
                }
            }
        }
        let all = families.iter().flat_map(|f| f.iter()).filter(|n| launch_min_blocks(n, "sm_90a").is_some()).count();
        assert_eq!(all, named, "a kernel matches an entry without being one of its combinations");
        assert_eq!(launch_min_blocks("softmax_backward_f32_block_small", "sm_90a"), None);
        assert_eq!(launch_min_blocks("layernorm_backward_f32_warp", "sm_90a"), None);
    }
}
