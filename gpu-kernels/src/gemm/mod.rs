//! SGEMM, `C = alpha * op(A) * op(B) + beta * C` over f32, as an optimisation ladder: one file
//! per step, each adding one idea to the previous one (its `//!` line says which).
//!
//! | version | adds |
//! |---|---|
//! | [`v01_naive`] | one thread per element of C |
//! | [`v02_coalesced`] | consecutive threads take consecutive columns, so warps read B and write C in full lines |
//! | [`v03_smem`] | 32 x 32 tiles of A and B staged in shared memory |
//! | [`v04_blocktile_1d`] | 8 outputs per thread down a column (1D register blocking) |
//! | [`v05_blocktile_2d`] | an 8 x 8 register tile per thread (2D register blocking) |
//! | [`v06_vectorized`] | 16-byte global loads, A stored k-major so shared reads are 16 bytes too |
//! | [`v07_warptile`] | warp tiles: each warp owns a 64 x 32 sub-tile, lanes arranged inside it |
//! | [`v08_double_buffer`] | two shared stages; the next tile's global loads overlap the current tile's math |
//! | [`v09_unrolled`] | the k-step unrolled (shared reads a depth ahead), unguarded loads for interior tiles, two blocks per SM declared, 16-byte stores of C |
//! | [`v10_split_k`] | split-K for C too small to fill the GPU: 16 x 128 tiles, K divided between blocks, partials summed in a fixed order |
//!
//! [`split_k`] is not a rung: it holds the split-K mechanism v10 introduced (a block's range of
//! K, where its partial goes, the kernel that sums the partials), which v09 uses too when its
//! 128 x 128 tiles are too few to fill the GPU.
//!
//! # Semantics (every version)
//! Row-major matrices with leading dimensions; `op(X)` is `X` or `X^T` (`trans_a`, `trans_b`);
//! C may be stored transposed (`trans_c`: column-major, written through [`c_at`]), which is
//! how the launcher runs C with few columns as its transpose; batches are strided (`stride_*`
//! elements between consecutive matrices, 0 broadcasts).
//! Any `M, N, K >= 0`, no multiple required: `K = 0` gives `beta * C`; `beta = 0` writes
//! `alpha * op(A) op(B)` without reading C (NaN already in C is ignored). `M = 0` or `N = 0`
//! is handled by the launcher (nothing to launch).
//!
//! # Thread mapping
//! Block `(x, y, z)` owns the `BM x BN` tile of C at rows `y * BM`, columns `x * BN`, of
//! batch `batch_base + z` (v09 and v10 with a split: a depth range of that tile, see
//! [`split_k`]). Blocks are 1-D (`Tiling::threads` threads); each version documents how its
//! threads split the tile.
//!
//! # Tiling
//! One [`Tiling`] per version, a `const` checked at compile time ([`Tiling::check`]); the
//! launcher reads the same const for the block size, the grid and the shared bytes.
//!
//! # Safety
//! The launcher guarantees: every view holds every element the shape reaches (batch, rows,
//! leading dimension); `vec_a` / `vec_b` / `vec_c` are nonzero only when the operand's view is
//! 16-byte aligned and its leading dimension and batch stride are multiples of 4 elements; the
//! grid covers `ceil(N / BN) x ceil(M / BM) x batches` and the dynamic shared segment is
//! [`Tiling::shared_bytes`]. Every global access below is guarded against `M`, `N`, `K`
//! (tiles past the edge load 0 and store nothing); the emulator proves it in the tests.

use crate::device::math;
use crate::device::thread::{block_idx_x, block_idx_y, block_idx_z};
use crate::device::{Global, GlobalMut, Shared};

pub mod bug_no_edge_guard;
pub mod split_k;
pub mod v01_naive;
pub mod v02_coalesced;
pub mod v03_smem;
pub mod v04_blocktile_1d;
pub mod v05_blocktile_2d;
pub mod v06_vectorized;
pub mod v07_warptile;
pub mod v08_double_buffer;
pub mod v09_unrolled;
pub mod v10_split_k;

/// Runs `$body` for `$i` in `0..$n` (`$n` a constant up to 8), unrolled by hand: with literal
/// indices the register tiles (`acc`, the A and B fragments) stay in registers. Plain loops
/// over them were left rolled by LLVM inside the k loop and put `acc` in a 256-byte local
/// stack frame (ptxas, 2026-11-30), which the CI gate rejects.
macro_rules! unroll8 {
    ($i:ident < $n:expr => $body:block) => {{
        const { assert!($n <= 8, "unroll8 unrolls at most 8 iterations") };
        { let $i: usize = 0; if $i < $n $body }
        { let $i: usize = 1; if $i < $n $body }
        { let $i: usize = 2; if $i < $n $body }
        { let $i: usize = 3; if $i < $n $body }
        { let $i: usize = 4; if $i < $n $body }
        { let $i: usize = 5; if $i < $n $body }
        { let $i: usize = 6; if $i < $n $body }
        { let $i: usize = 7; if $i < $n $body }
    }};
}
pub(crate) use unroll8;

/// `acc[r][c] += a[r] * b[c]` for the whole register tile (one FMA each).
#[inline(always)]
pub fn outer_product<const TM: usize, const TN: usize>(a: &[f32; TM], b: &[f32; TN], acc: &mut [[f32; TN]; TM]) {
    unroll8!(r < TM => {
        unroll8!(c < TN => {
            acc[r][c] = math::fma(a[r], b[c], acc[r][c]);
        });
    });
}

/// The parameters of every GEMM kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GemmParams {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub lda: u32,
    pub ldb: u32,
    pub ldc: u32,
    /// Nonzero: op(A) = A^T, A stored K x M.
    pub trans_a: u32,
    /// Nonzero: op(B) = B^T, B stored N x K.
    pub trans_b: u32,
    /// The batch index of `blockIdx.z = 0` (the launcher splits more than 65535 batches).
    pub batch_base: u32,
    /// Nonzero: A may be read in 16-byte chunks (see the module's Safety section).
    pub vec_a: u32,
    /// Nonzero: B may be read in 16-byte chunks.
    pub vec_b: u32,
    /// Split-K versions only (v09, v10; 0 everywhere else): nonzero splits K into ranges of
    /// this many depths, one per block of grid z, and makes `c` the partial-sum scratch
    /// ([`split_k`]).
    pub k_split: u32,
    /// Nonzero: C is stored transposed, element `(i, j)` at `j * ldc + i` (column-major). The
    /// launcher runs C with few columns as its transpose `C^T = op(B)^T op(A)^T` this way.
    pub trans_c: u32,
    /// Nonzero: C may be written and read in 16-byte chunks ([`store_c4`]): its view is
    /// 16-byte aligned and `ldc` and the batch stride are multiples of 4 elements.
    pub vec_c: u32,
    /// Elements between consecutive matrices of a batch.
    pub stride_a: u64,
    pub stride_b: u64,
    pub stride_c: u64,
    pub alpha: f32,
    pub beta: f32,
    pub a: Global<f32>,
    pub b: Global<f32>,
    pub c: GlobalMut<f32>,
}

/// A version's tile shape. Threads and shared bytes are derived, never restated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiling {
    /// Rows and columns of the block's C tile.
    pub bm: u32,
    pub bn: u32,
    /// Depth of one k-step's A and B tiles (0: no shared tiles).
    pub bk: u32,
    /// C elements per thread along M and N.
    pub tm: u32,
    pub tn: u32,
    /// The warp's C tile (0 x 0: no warp tiling) and how many `tm x tn` sub-tiles it takes
    /// along N per lane.
    pub wm: u32,
    pub wn: u32,
    pub wniter: u32,
    /// Shared stages (0: no shared memory, 1: one A and one B tile, 2: double-buffered).
    pub stages: u32,
    /// Blocks per SM declared to ptxas (`.minnctapersm`, with `.maxntid` the block's
    /// threads), which caps registers at `65536 / (threads x blocks_per_sm)`; 0 declares
    /// nothing and leaves the registers to ptxas.
    pub blocks_per_sm: u32,
}

impl Tiling {
    /// Threads per block: one per `tm x tn` outputs.
    pub const fn threads(self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }
    /// Elements of one A tile (`bm x bk`) and of one B tile (`bk x bn`).
    pub const fn a_tile(self) -> u32 {
        self.bm * self.bk
    }
    pub const fn b_tile(self) -> u32 {
        self.bk * self.bn
    }
    /// Byte offset of stage `s`'s A tile and B tile in the dynamic shared segment.
    pub const fn a_offset(self, s: u32) -> u32 {
        s * Shared::<f32>::bytes(self.a_tile() + self.b_tile())
    }
    pub const fn b_offset(self, s: u32) -> u32 {
        self.a_offset(s) + Shared::<f32>::bytes(self.a_tile())
    }
    /// The dynamic shared memory a launch needs.
    pub const fn shared_bytes(self) -> u32 {
        self.a_offset(self.stages)
    }
    /// Lanes along N inside a warp sub-tile (warp-tiled versions).
    pub const fn warp_lanes_n(self) -> u32 {
        self.wn / self.wniter / (self.tn / self.wniter)
    }
    /// Asserts everything the kernels assume; call it in a `const` so a bad config does not compile.
    pub const fn check(self) -> Self {
        assert!(self.bm > 0 && self.bn > 0 && self.tm > 0 && self.tn > 0, "empty tile");
        assert!(
            self.bm.is_multiple_of(self.tm) && self.bn.is_multiple_of(self.tn),
            "thread tile must divide the block tile"
        );
        let t = self.threads();
        assert!(t >= 32 && t <= 1024 && t.is_multiple_of(32), "threads per block: a multiple of 32 up to 1024");
        if self.stages > 0 {
            assert!(self.bk > 0, "shared tiles need bk > 0");
            assert!(self.shared_bytes() <= 48 * 1024, "keep shared tiles under the 48 KB that needs no opt-in");
            // 16-byte shared views need 16-byte aligned tile offsets.
            assert!(
                self.a_offset(1).is_multiple_of(16) && self.b_offset(0).is_multiple_of(16),
                "tiles must be 16-byte aligned"
            );
        }
        if self.blocks_per_sm > 0 {
            assert!(t * self.blocks_per_sm <= 2048, "an SM holds at most 2048 threads");
            assert!(65536 / (t * self.blocks_per_sm) >= 64, "leave each thread at least 64 registers");
        }
        if self.wm > 0 {
            assert!(
                self.bm.is_multiple_of(self.wm) && self.bn.is_multiple_of(self.wn),
                "warp tiles must divide the block tile"
            );
            assert!((self.bm / self.wm) * (self.bn / self.wn) * 32 == t, "one warp per warp tile");
            assert!(
                self.tn.is_multiple_of(self.wniter) && self.wn.is_multiple_of(self.wniter),
                "wniter must divide tn and wn"
            );
            let sub_n = self.wn / self.wniter;
            let lane_tn = self.tn / self.wniter;
            assert!(sub_n.is_multiple_of(lane_tn), "lane tile must divide the warp sub-tile");
            assert!((self.wm / self.tm) * (sub_n / lane_tn) == 32, "32 lanes cover a warp sub-tile");
        }
        self
    }
}

/// Four floats that move as one 16-byte access (`ld.v4` / `LDS.128`).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct F32x4(pub [f32; 4]);

/// The first elements of this block's batch in A, B and C.
#[inline(always)]
pub fn batch_bases(p: &GemmParams) -> (usize, usize, usize) {
    batch_bases_at(p, p.batch_base + block_idx_z())
}

/// The first elements of batch `z` in A, B and C.
#[inline(always)]
pub fn batch_bases_at(p: &GemmParams, z: u32) -> (usize, usize, usize) {
    let z = z as usize;
    (z * p.stride_a as usize, z * p.stride_b as usize, z * p.stride_c as usize)
}

/// The block's first row and column of C.
#[inline(always)]
pub fn block_origin(bm: u32, bn: u32) -> (u32, u32) {
    (block_idx_y() * bm, block_idx_x() * bn)
}

/// Element `(i, kk)` of op(A), 0 outside the `M x K` matrix.
#[inline(always)]
#[track_caller]
pub fn load_a(p: &GemmParams, base: usize, i: u32, kk: u32) -> f32 {
    if i < p.m && kk < p.k {
        let (r, c) = if p.trans_a == 0 { (i, kk) } else { (kk, i) };
        p.a.load(base + r as usize * p.lda as usize + c as usize)
    } else {
        0.0
    }
}

/// Element `(kk, j)` of op(B), 0 outside the `K x N` matrix.
#[inline(always)]
#[track_caller]
pub fn load_b(p: &GemmParams, base: usize, kk: u32, j: u32) -> f32 {
    if kk < p.k && j < p.n {
        let (r, c) = if p.trans_b == 0 { (kk, j) } else { (j, kk) };
        p.b.load(base + r as usize * p.ldb as usize + c as usize)
    } else {
        0.0
    }
}

/// Where element `(i, j)` of C is, from its matrix's first element `base`: `i * ldc + j`, or
/// `j * ldc + i` when C is stored transposed (`trans_c`).
#[inline(always)]
pub fn c_at(p: &GemmParams, base: usize, i: u32, j: u32) -> usize {
    let (r, c) = if p.trans_c == 0 { (i, j) } else { (j, i) };
    base + r as usize * p.ldc as usize + c as usize
}

/// Writes `alpha * acc + beta * C[i, j]` when `(i, j)` is inside C; with `beta = 0`, C is not read.
#[inline(always)]
#[track_caller]
pub fn store_c(p: &GemmParams, base: usize, i: u32, j: u32, acc: f32) {
    if i < p.m && j < p.n {
        let at = c_at(p, base, i, j);
        let ab = p.alpha * acc;
        let v = if p.beta == 0.0 { ab } else { math::fma(p.beta, p.c.load(at), ab) };
        p.c.store(at, v);
    }
}

/// [`store_c`] for the 4 columns `j .. j + 4` of row `i` (`j` a multiple of 4): one 16-byte
/// store (and load, with `beta`) when they lie inside a row-major C that allows it
/// (`vec_c`), element by element otherwise. The same arithmetic either way.
#[inline(always)]
#[track_caller]
pub fn store_c4(p: &GemmParams, base: usize, i: u32, j: u32, acc: [f32; 4]) {
    if p.vec_c != 0 && p.trans_c == 0 && i < p.m && j + 4 <= p.n {
        let chunk = c_at(p, base, i, j) / 4;
        let mut v = [0.0f32; 4];
        for (q, slot) in v.iter_mut().enumerate() {
            *slot = p.alpha * acc[q];
        }
        if p.beta != 0.0 {
            let c = p.c.load_chunk::<4>(chunk);
            for (q, slot) in v.iter_mut().enumerate() {
                *slot = math::fma(p.beta, c[q], *slot);
            }
        }
        p.c.store_chunk::<4>(chunk, v);
    } else {
        for (q, &a) in acc.iter().enumerate() {
            store_c(p, base, i, j + q as u32, a);
        }
    }
}

/// Tile coordinates `(row, column)` of chunk `ch` of a tile `tile_cols` wide, its chunks of 4
/// elements numbered row-major.
#[inline(always)]
pub fn chunk_coords(tile_cols: u32, ch: u32) -> (u32, u32) {
    (ch / (tile_cols / 4), (ch % (tile_cols / 4)) * 4)
}

/// Loads chunk `ch` (4 elements along the contiguous dimension) of a `rows x cols` tile of an
/// operand stored row-major with leading dimension `ld`, at storage `(row0, col0)`, from a
/// matrix of `mat_rows x mat_cols`. Returns the chunk's storage coordinates and values
/// (0 outside the matrix). One 16-byte load when `vec` and the chunk is whole; scalar,
/// guarded loads otherwise (edges, unaligned views).
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn load_chunk4(
    x: &Global<f32>,
    base: usize,
    ld: u32,
    mat_rows: u32,
    mat_cols: u32,
    tile_cols: u32,
    row0: u32,
    col0: u32,
    ch: u32,
    vec: bool,
) -> (u32, u32, [f32; 4]) {
    let (r, c) = chunk_coords(tile_cols, ch);
    let (gr, gc) = (row0 + r, col0 + c);
    let mut v = [0.0f32; 4];
    if gr < mat_rows {
        let at = base + gr as usize * ld as usize + gc as usize;
        if vec && gc + 4 <= mat_cols {
            v = x.load_chunk::<4>(at / 4);
        } else {
            for (q, slot) in v.iter_mut().enumerate() {
                if gc + (q as u32) < mat_cols {
                    *slot = x.load(at + q);
                }
            }
        }
    }
    (r, c, v)
}

/// Stores a chunk of A's tile, loaded by [`load_chunk4`] at tile coordinates `(r, c)` of its
/// storage, into the k-major shared A tile (`As[kk * bm + i]`).
#[inline(always)]
#[track_caller]
pub fn store_a_chunk(trans_a: bool, a_s: Shared<f32>, a_s4: Shared<F32x4>, bm: u32, r: u32, c: u32, v: [f32; 4]) {
    if trans_a {
        // Stored K x M: the chunk runs along M, which is contiguous in As too.
        a_s4.store((r * bm + c) / 4, F32x4(v));
    } else {
        // Stored M x K: the chunk runs along K, a column of As.
        for (q, &e) in v.iter().enumerate() {
            a_s.store((c + q as u32) * bm + r, e);
        }
    }
}

/// Stores a chunk of B's tile into the row-major shared B tile (`Bs[kk * bn + j]`).
#[inline(always)]
#[track_caller]
pub fn store_b_chunk(trans_b: bool, b_s: Shared<f32>, b_s4: Shared<F32x4>, bn: u32, r: u32, c: u32, v: [f32; 4]) {
    if trans_b {
        // Stored N x K: the chunk runs along K, a column of Bs.
        for (q, &e) in v.iter().enumerate() {
            b_s.store((c + q as u32) * bn + r, e);
        }
    } else {
        b_s4.store((r * bn + c) / 4, F32x4(v));
    }
}

/// The A tile's storage shape for `trans_a`: (tile rows, tile cols, matrix rows, matrix cols,
/// tile origin row, tile origin col) for the tile at op(A) rows `i0..`, depth `k0..`.
#[inline(always)]
pub fn a_storage(p: &GemmParams, bm: u32, bk: u32, i0: u32, k0: u32) -> (u32, u32, u32, u32, u32, u32) {
    if p.trans_a == 0 { (bm, bk, p.m, p.k, i0, k0) } else { (bk, bm, p.k, p.m, k0, i0) }
}

/// The B tile's storage shape, as [`a_storage`], for op(B) depth `k0..`, columns `j0..`.
#[inline(always)]
pub fn b_storage(p: &GemmParams, bk: u32, bn: u32, k0: u32, j0: u32) -> (u32, u32, u32, u32, u32, u32) {
    if p.trans_b == 0 { (bk, bn, p.k, p.n, k0, j0) } else { (bn, bk, p.n, p.k, j0, k0) }
}

/// Chunks of 4 floats each thread of `t` copies per k-step, for A and for B. Every thread
/// copies the same number (checked here, so a tiling that breaks it does not compile).
pub const fn chunks_per_thread(t: Tiling) -> (usize, usize) {
    let threads = t.threads();
    assert!(
        (t.a_tile() / 4).is_multiple_of(threads) && (t.b_tile() / 4).is_multiple_of(threads),
        "every thread carries the same number of chunks"
    );
    assert!(t.a_tile() / 4 / threads <= 8 && t.b_tile() / 4 / threads <= 8, "the staging unrolls 8 chunks at most");
    ((t.a_tile() / 4 / threads) as usize, (t.b_tile() / 4 / threads) as usize)
}

/// Chunks loaded for a stage: each one's tile coordinates `(r, c)` and its four values.
pub type Staged<const N: usize> = [(u32, u32, [f32; 4]); N];

/// The A and B chunks of the k-step at depth `k0` that thread `tid` copies for tiling `t`
/// (`NA, NB` = [`chunks_per_thread`]`(t)`, at most 8 each; chunk `tid + q * threads` of each
/// tile as stored), loaded into registers with [`load_chunk4`]'s edge guards. The
/// double-buffered versions issue these before a k-step's FMAs and [`put_stage`] them after.
/// Unrolled by hand: a rolled loop over 8 chunks kept them in a stack frame (v10, ptxas 12.9).
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn fetch_stage<const NA: usize, const NB: usize>(
    t: Tiling,
    p: &GemmParams,
    ba: usize,
    bb: usize,
    i0: u32,
    j0: u32,
    k0: u32,
    tid: u32,
) -> (Staged<NA>, Staged<NB>) {
    let threads = t.threads();
    let (_, a_cols, a_rows_m, a_cols_m, a_r0, a_c0) = a_storage(p, t.bm, t.bk, i0, k0);
    let (_, b_cols, b_rows_m, b_cols_m, b_r0, b_c0) = b_storage(p, t.bk, t.bn, k0, j0);
    let mut sa = [(0, 0, [0.0f32; 4]); NA];
    unroll8!(q < NA => {
        let ch = tid + q as u32 * threads;
        sa[q] = load_chunk4(&p.a, ba, p.lda, a_rows_m, a_cols_m, a_cols, a_r0, a_c0, ch, p.vec_a != 0);
    });
    let mut sb = [(0, 0, [0.0f32; 4]); NB];
    unroll8!(q < NB => {
        let ch = tid + q as u32 * threads;
        sb[q] = load_chunk4(&p.b, bb, p.ldb, b_rows_m, b_cols_m, b_cols, b_r0, b_c0, ch, p.vec_b != 0);
    });
    (sa, sb)
}

/// Stores staged chunks into stage `s` of tiling `t`'s shared tiles (A k-major).
#[inline(always)]
#[track_caller]
pub fn put_stage<const NA: usize, const NB: usize>(
    t: Tiling,
    p: &GemmParams,
    s: u32,
    sa: &Staged<NA>,
    sb: &Staged<NB>,
) {
    let a_s = Shared::<f32>::at(t.a_offset(s), t.a_tile());
    let b_s = Shared::<f32>::at(t.b_offset(s), t.b_tile());
    let a_s4 = Shared::<F32x4>::at(t.a_offset(s), t.a_tile() / 4);
    let b_s4 = Shared::<F32x4>::at(t.b_offset(s), t.b_tile() / 4);
    unroll8!(q < NA => {
        let (r, c, v) = sa[q];
        store_a_chunk(p.trans_a != 0, a_s, a_s4, t.bm, r, c, v);
    });
    unroll8!(q < NB => {
        let (r, c, v) = sb[q];
        store_b_chunk(p.trans_b != 0, b_s, b_s4, t.bn, r, c, v);
    });
}

/// A thread's chunks of an interior tile (the whole C tile inside `M x N`, both operands
/// allowed 16-byte loads) for tiling `t`: where they start, in 16-byte chunks of the
/// operand's view at the first k-step (the batch base included), and how many chunks one
/// k-step moves them. Whole chunk numbers, so the address of a chunk is one multiply-add (an
/// element offset needs its division by 4 masked at every use). [`fetch`](Self::fetch) then
/// loads a k-step without edge guards.
pub struct Interior<const NA: usize, const NB: usize> {
    a: [usize; NA],
    b: [usize; NB],
    a_step: usize,
    b_step: usize,
}

impl<const NA: usize, const NB: usize> Interior<NA, NB> {
    /// The chunk numbering is [`fetch_stage`]'s (`ch = tid + q * threads`, row-major over the
    /// tile as stored), so [`put_stage`] places these chunks as it places the guarded ones.
    /// `k0`: the depth of k-step 0.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn new(t: Tiling, p: &GemmParams, ba: usize, bb: usize, i0: u32, j0: u32, k0: u32, tid: u32) -> Self {
        let threads = t.threads();
        let (_, a_cols, _, _, a_r0, a_c0) = a_storage(p, t.bm, t.bk, i0, k0);
        let (_, b_cols, _, _, b_r0, b_c0) = b_storage(p, t.bk, t.bn, k0, j0);
        let at = |base: usize, ld: u32, cols: u32, r0: u32, c0: u32, ch: u32| {
            let (r, c) = chunk_coords(cols, ch);
            // A multiple of 4: `vec_*` promises 16-byte aligned rows and bases.
            (base + (r0 + r) as usize * ld as usize + (c0 + c) as usize) / 4
        };
        let mut a = [0; NA];
        unroll8!(q < NA => { a[q] = at(ba, p.lda, a_cols, a_r0, a_c0, tid + q as u32 * threads); });
        let mut b = [0; NB];
        unroll8!(q < NB => { b[q] = at(bb, p.ldb, b_cols, b_r0, b_c0, tid + q as u32 * threads); });
        // A k-step moves bk along K: bk columns of A stored M x K, bk rows stored K x M; B the
        // other way round.
        let bk = t.bk as usize;
        let a_step = if p.trans_a == 0 { bk } else { bk * p.lda as usize } / 4;
        let b_step = if p.trans_b == 0 { bk * p.ldb as usize } else { bk } / 4;
        Interior { a, b, a_step, b_step }
    }

    /// k-step `s`'s chunks (counted from `new`'s `k0`), unguarded: the caller has checked that
    /// the block is interior and that the k-step lies inside K, so every chunk lies inside
    /// its operand (the emulator checks it).
    #[inline(always)]
    #[track_caller]
    pub fn fetch(&self, t: Tiling, p: &GemmParams, s: u32, tid: u32) -> (Staged<NA>, Staged<NB>) {
        let threads = t.threads();
        let (_, a_cols, ..) = a_storage(p, t.bm, t.bk, 0, 0);
        let (_, b_cols, ..) = b_storage(p, t.bk, t.bn, 0, 0);
        let mut sa = [(0, 0, [0.0f32; 4]); NA];
        unroll8!(q < NA => {
            let (r, c) = chunk_coords(a_cols, tid + q as u32 * threads);
            sa[q] = (r, c, p.a.load_chunk::<4>(self.a[q] + s as usize * self.a_step));
        });
        let mut sb = [(0, 0, [0.0f32; 4]); NB];
        unroll8!(q < NB => {
            let (r, c) = chunk_coords(b_cols, tid + q as u32 * threads);
            sb[q] = (r, c, p.b.load_chunk::<4>(self.b[q] + s as usize * self.b_step));
        });
        (sa, sb)
    }
}

type P = GemmParams;

crate::kernels! {
    /// v01: one thread per C element, consecutive threads down a column.
    GEMM_V01_NAIVE = gemm_v01_naive(P) => v01_naive::run;
    /// v02: one thread per C element, consecutive threads along a row.
    GEMM_V02_COALESCED = gemm_v02_coalesced(P) => v02_coalesced::run;
    /// v03: shared-memory tiles.
    GEMM_V03_SMEM = gemm_v03_smem(P) => v03_smem::run;
    /// v04: 1D register blocking.
    GEMM_V04_BLOCKTILE_1D = gemm_v04_blocktile_1d(P) => v04_blocktile_1d::run;
    /// v05: 2D register blocking.
    GEMM_V05_BLOCKTILE_2D = gemm_v05_blocktile_2d(P) => v05_blocktile_2d::run;
    /// v06: 16-byte global and shared accesses.
    GEMM_V06_VECTORIZED = gemm_v06_vectorized(P) => v06_vectorized::run;
    /// v07: warp tiling.
    GEMM_V07_WARPTILE = gemm_v07_warptile(P) => v07_warptile::run;
    /// v08: double-buffered shared tiles.
    GEMM_V08_DOUBLE_BUFFER = gemm_v08_double_buffer(P) => v08_double_buffer::run;
    /// v09: unrolled k-step, unguarded interior tiles.
    GEMM_V09_UNROLLED = gemm_v09_unrolled(P) => v09_unrolled::run;
    /// v10: 16 x 128 tiles over a range of K each (split-K partials, or C when unsplit).
    GEMM_V10_SPLIT_K = gemm_v10_split_k(P) => v10_split_k::run;
    /// The second kernel of a split (v09, v10): sums a C tile's partials in split order into C.
    GEMM_SPLIT_K_SUM = gemm_split_k_sum(split_k::SplitSumParams) => split_k::sum;
    /// A deliberately broken v03 without edge guards: the harness must reject it.
    GEMM_BUG_NO_EDGE_GUARD = gemm_bug_no_edge_guard(P) => bug_no_edge_guard::run;
}

/// One rung of the ladder, as tests, `verify` and the bench see it.
#[cfg(not(target_arch = "nvptx64"))]
pub struct GemmVersion {
    /// `v03_smem`: the file name, also the name `verify --version` and the bench use.
    pub name: &'static str,
    pub kernel: &'static crate::KernelDef<GemmParams>,
    pub tiling: Tiling,
    /// Split-K versions: the kernel that sums the partials into C (the launcher then splits K
    /// when the shape calls for it; see `ferrokern::gemm::split_depth`). None for the others.
    pub sum: Option<&'static crate::KernelDef<split_k::SplitSumParams>>,
}

#[cfg(not(target_arch = "nvptx64"))]
impl core::fmt::Debug for GemmVersion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every version, in ladder order. Tests and benches iterate this table.
#[cfg(not(target_arch = "nvptx64"))]
pub const VERSIONS: &[GemmVersion] = &[
    GemmVersion { name: "v01_naive", kernel: &GEMM_V01_NAIVE, tiling: v01_naive::TILING, sum: None },
    GemmVersion { name: "v02_coalesced", kernel: &GEMM_V02_COALESCED, tiling: v02_coalesced::TILING, sum: None },
    GemmVersion { name: "v03_smem", kernel: &GEMM_V03_SMEM, tiling: v03_smem::TILING, sum: None },
    GemmVersion {
        name: "v04_blocktile_1d",
        kernel: &GEMM_V04_BLOCKTILE_1D,
        tiling: v04_blocktile_1d::TILING,
        sum: None,
    },
    GemmVersion {
        name: "v05_blocktile_2d",
        kernel: &GEMM_V05_BLOCKTILE_2D,
        tiling: v05_blocktile_2d::TILING,
        sum: None,
    },
    GemmVersion { name: "v06_vectorized", kernel: &GEMM_V06_VECTORIZED, tiling: v06_vectorized::TILING, sum: None },
    GemmVersion { name: "v07_warptile", kernel: &GEMM_V07_WARPTILE, tiling: v07_warptile::TILING, sum: None },
    GemmVersion {
        name: "v08_double_buffer",
        kernel: &GEMM_V08_DOUBLE_BUFFER,
        tiling: v08_double_buffer::TILING,
        sum: None,
    },
    GemmVersion {
        name: "v09_unrolled",
        kernel: &GEMM_V09_UNROLLED,
        tiling: v09_unrolled::TILING,
        sum: Some(&GEMM_SPLIT_K_SUM),
    },
    GemmVersion {
        name: "v10_split_k",
        kernel: &GEMM_V10_SPLIT_K,
        tiling: v10_split_k::TILING,
        sum: Some(&GEMM_SPLIT_K_SUM),
    },
];

/// Threads per block of `name` if it is a GEMM kernel (a rung or the broken variant).
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_threads(name: &str) -> Option<u32> {
    if name == GEMM_SPLIT_K_SUM.name {
        return Some(split_k::SUM_THREADS);
    }
    VERSIONS.iter().chain([&BUG_NO_EDGE_GUARD]).find(|v| v.kernel.name == name).map(|v| v.tiling.threads())
}

/// Blocks per SM declared to ptxas for `name` (its tiling's `blocks_per_sm`; see
/// `crate::launch_min_blocks`), None for kernels that declare none.
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_min_blocks(name: &str) -> Option<u32> {
    let v = VERSIONS.iter().chain([&BUG_NO_EDGE_GUARD]).find(|v| v.kernel.name == name)?;
    (v.tiling.blocks_per_sm > 0).then_some(v.tiling.blocks_per_sm)
}

/// The deliberately broken variant (not a rung; tests assert the harness rejects it).
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_NO_EDGE_GUARD: GemmVersion = GemmVersion {
    name: "bug_no_edge_guard",
    kernel: &GEMM_BUG_NO_EDGE_GUARD,
    tiling: bug_no_edge_guard::TILING,
    sum: None,
};
