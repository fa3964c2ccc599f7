//! v05: v04's engine and tiles (128 x 256 x 64, m64n256k16, `setmaxnreg` 40 / 232, grouped
//! order) with split-K ([`super::split_k`]) for problems whose C tiles leave SMs idle. Without
//! a split it is v04. H200, 2026-12-04: 0.517 of cuBLAS at 1024x1024x16384 (v02
//! 0.529), 0.451 at 8192^3, with the element-by-element epilogue.
//!
//! # The count behind it (H200, 132 SMs, bf16)
//! A block holds an SM by itself (a 192 KB shared ring and 384 x 168 registers), so a grid
//! of `tiles` blocks keeps `min(tiles, 132)` SMs busy.
//! - K-heavy `1024 x 1024 x 16384`: 8 x 4 = 32 tiles, 256 k-steps each: 32 SMs busy. At the
//!   per-SM wgmma rate (990 / 132 = 7.5 TFLOP/s) a 128 x 256 x 64 k-step takes 0.56 us, so
//!   the floor of the unsplit kernel is 256 x 0.56 = 143 us; the whole GPU's floor is 35 us
//!   (34.4 GFLOP at 990 TFLOP/s). Four slices put 128 blocks on 128 SMs: 64 k-steps each,
//!   36 us, plus the second pass reading 4 x 4 MB and writing 4 MB (about 5 us at
//!   4.8 TB/s). Predicted: about 3x v04 there.
//! - Decode-like `M <= 128, N = K = 8192`: 32 tiles (one tile row). Memory-bound: B is
//!   128 MB, 27 us at 4.8 TB/s. Unsplit, 32 SMs stream it; how much one SM's TMA loads can
//!   pull is what only a GPU run can tell. Four slices put 128 SMs on it; the workspace is
//!   4 x M x 8192 f32 (at most 16 MB at M = 128).
//! - 8192^3 has 2048 tiles: no split (v04).
//!
//! The launcher's rule is `gemm_tc::split_k` on the host.

use super::TcParams;
use super::wgmma::{self, WgmmaTiling, WgmmaVersion};
use crate::device::mma::MmaInput;

pub struct V05;

impl WgmmaVersion for V05 {
    const TILING: WgmmaTiling = super::v04_wgmma_n256::TILING.split();
    type Acc = [f32; 128];
}

pub const TILING: WgmmaTiling = V05::TILING;

#[inline(always)]
pub fn run<T: MmaInput>(p: TcParams<T>) {
    wgmma::run::<T, V05, 0>(p)
}

/// v05 with deliberate bug `BUG` ([`super::split_k::BUG_FLOOR_SLICES`]), for the harness tests.
#[inline(always)]
pub fn run_bug<T: MmaInput, const BUG: u32>(p: TcParams<T>) {
    wgmma::run::<T, V05, BUG>(p)
}
