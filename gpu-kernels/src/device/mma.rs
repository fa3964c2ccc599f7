//! Tensor-core primitives of sm_80: `mma.sync` m16n8k16 (bf16/f16 in, f32 accumulate),
//! `ldmatrix` (8x8 b16 matrices from shared memory into mma fragments) and `cp.async`
//! (global -> shared copies that bypass registers, in commit groups).
//!
//! Every layout below is the PTX ISA's (sections "9.7.14.5.8 Matrix Fragments for
//! mma.m16n8k16 with floating point type", "9.7.14.5.15 Warp-level matrix load instruction:
//! ldmatrix", and "cp.async" / "cp.async.commit_group" / "cp.async.wait_group" under the data
//! movement instructions; section numbers as in PTX ISA 8.x). With `g = lane >> 2` (groupID)
//! and `t = lane % 4` (threadID_in_group), a lane holds:
//!
//! - A (16 x 16, row-major), 4 x .b32 = 8 halves `a0..a7`, two per register, the lower index
//!   in the low 16 bits: `a_i` at row `g` for `i in {0,1,4,5}`, `g + 8` otherwise; column
//!   `2t + (i & 1)` for `i < 4`, `2t + (i & 1) + 8` for `i >= 4`. So register 0 = (g, 2t..2t+1),
//!   1 = (g+8, 2t..), 2 = (g, 2t+8..), 3 = (g+8, 2t+8..).
//! - B (16 x 8, "col": k runs inside a register), 2 x .b32 = `b0..b3`: `b_i` at row (k)
//!   `2t + (i & 1)` for `i < 2`, `2t + (i & 1) + 8` for `i >= 2`; column (n) `g`.
//! - C and D (16 x 8, f32), 4 registers `c0..c3`: row `g` for `c0, c1`, `g + 8` for `c2, c3`;
//!   column `2t + (i & 1)`.
//!
//! All 32 lanes of the warp must execute each `mma`/`ldmatrix` together (`.sync.aligned`);
//! the emulator treats both as warp collectives over the full mask and reports divergence.
//!
//! # Accuracy
//! Products of bf16 or f16 values are exact in f32. The order and internal precision of the
//! tensor core's additions are not specified by the ISA; the emulator adds the 16 products to
//! C one at a time in k order with f32 rounding, and tolerances must not assume more.

use super::{Element, Shared, imp};
use half::{bf16, f16};

/// The input type of an mma: which `.atype/.btype` the instruction names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaKind {
    Bf16,
    F16,
}

/// A 16-bit type the tensor cores multiply (bf16, f16).
pub trait MmaInput: Element {
    const KIND: MmaKind;
    fn to_bits16(self) -> u16;
    fn from_bits16(b: u16) -> Self;
}

impl MmaInput for bf16 {
    const KIND: MmaKind = MmaKind::Bf16;
    #[inline(always)]
    fn to_bits16(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_bits16(b: u16) -> Self {
        bf16::from_bits(b)
    }
}

impl MmaInput for f16 {
    const KIND: MmaKind = MmaKind::F16;
    #[inline(always)]
    fn to_bits16(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_bits16(b: u16) -> Self {
        f16::from_bits(b)
    }
}

/// Two halves in one .b32 register: `lo` is the element with the lower index.
#[inline(always)]
pub const fn pack2(lo: u16, hi: u16) -> u32 {
    lo as u32 | ((hi as u32) << 16)
}

/// Two f32 rounded (to nearest even) to `T` and packed into one fragment register, `lo` in the
/// low 16 bits: one `cvt.rn.{bf16,f16}x2.f32` (SASS `F2FP`) instead of two conversions.
#[inline(always)]
pub fn pack_f32x2<T: MmaInput>(lo: f32, hi: f32) -> u32 {
    imp::cvt_pack_f32x2(T::KIND, lo, hi)
}

/// The C fragments of n8 tiles `2 k` and `2 k + 1` (rows `g`, `g + 8`; columns `2 t`,
/// `2 t + 1`), rounded to `T`, as the A fragment of k-step `k` of the next mma: (g, 2t..),
/// (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..). How FlashAttention-style kernels feed a
/// product (P, dS) to the next one without shared memory.
#[inline(always)]
pub fn a_from_c<T: MmaInput>(lo: [f32; 4], hi: [f32; 4]) -> [u32; 4] {
    [
        pack_f32x2::<T>(lo[0], lo[1]),
        pack_f32x2::<T>(lo[2], lo[3]),
        pack_f32x2::<T>(hi[0], hi[1]),
        pack_f32x2::<T>(hi[2], hi[3]),
    ]
}

/// Max (NaN-propagating) over the quad of lanes that hold one C-fragment row (lanes
/// `4 g .. 4 g + 3`).
#[inline(always)]
#[track_caller]
pub fn quad_max(v: f32) -> f32 {
    use super::warp::{FULL_MASK, shfl_xor_sync};
    let v = super::math::max_nan(v, shfl_xor_sync(FULL_MASK, v, 1));
    super::math::max_nan(v, shfl_xor_sync(FULL_MASK, v, 2))
}

/// Sum over the quad of lanes that hold one C-fragment row (see [`quad_max`]).
#[inline(always)]
#[track_caller]
pub fn quad_sum(v: f32) -> f32 {
    use super::warp::{FULL_MASK, shfl_xor_sync};
    let v = v + shfl_xor_sync(FULL_MASK, v, 1);
    v + shfl_xor_sync(FULL_MASK, v, 2)
}

/// `D = A * B + C`: `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32` with
/// this lane's fragments (layouts in the module docs).
#[inline(always)]
#[track_caller]
pub fn mma_m16n8k16<T: MmaInput>(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    imp::mma_m16n8k16(T::KIND, a, b, c)
}

/// `ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16`: loads `N` (1, 2 or 4) 8 x 8 matrices of
/// 16-bit elements. Lanes `8j .. 8j + 7` give the addresses of rows `0..7` of matrix `j`: this
/// lane's row is the 8 elements at index `i` of `view` (16 bytes, 16-byte aligned); lanes
/// `>= 8N` give no address (their `i` is ignored). Register `j` of lane `l` receives matrix `j`'s
/// elements (row `l / 4`, columns `2 (l % 4)` and `+1`); with `trans`, (rows `2 (l % 4)` and `+1`,
/// column `l / 4`): the layout of an mma B fragment read from a row-major `k x n` tile.
#[inline(always)]
#[track_caller]
pub fn ldmatrix<T: Copy, const N: usize>(view: Shared<T>, i: u32, trans: bool) -> [u32; N] {
    const {
        assert!(size_of::<T>() == 2, "ldmatrix loads 16-bit elements");
        assert!(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
    };
    imp::ldmatrix::<N>(view.offset(), view.len(), i, 2, trans)
}

/// `cp.async.cg.shared.global [dst], [src], 16, src_bytes`: copies the 16 bytes at element `si`
/// of `src` to element `di` of `dst` without going through registers; only the first
/// `src_bytes` (0..=16) are read, the rest of the 16 destination bytes are zero-filled
/// (`src_bytes = 0` reads nothing: the edge tiles' zero padding). Both addresses must be
/// 16-byte aligned. The copy is complete and visible to this thread only after a
/// [`cp_async_wait_group`] that covers its group ([`cp_async_commit`]), and to other threads
/// after a barrier following that wait.
#[inline(always)]
#[track_caller]
pub fn cp_async_16<T: Copy>(dst: Shared<T>, di: u32, src: super::Global<T>, si: usize, src_bytes: u32) {
    imp::cp_async_16::<T>(dst.offset(), dst.len(), di, src.addr(), src.len(), si, src_bytes)
}

/// `cp.async.commit_group`: closes this thread's group of `cp.async`s issued since the last commit.
#[inline(always)]
#[track_caller]
pub fn cp_async_commit() {
    imp::cp_async_commit()
}

/// `cp.async.wait_group N`: waits until at most `N` of this thread's committed groups are
/// still pending (the most recent ones); the others' data is then in shared memory.
#[inline(always)]
#[track_caller]
pub fn cp_async_wait_group<const N: u32>() {
    imp::cp_async_wait_group::<N>()
}

/// `cp.async.wait_all`: commits the open group and waits for every group.
#[inline(always)]
#[track_caller]
pub fn cp_async_wait_all() {
    imp::cp_async_commit();
    imp::cp_async_wait_group::<0>()
}
