//! v03: v02's engine with 256 x 128 x 64 tiles (four consumer warpgroups, 640 threads) and
//! grouped block order (groups of 8 tile rows), for twice the FLOPs per byte staged and L2
//! reuse across the blocks of a wave. H200, 2026-12-04: 0.768 of cuBLAS at 4096^3, 0.867 at 8192^3.
//!
//! # The count behind it (H200, bf16, 8192^3)
//! Per 64-deep k-step a block stages A (BM x 64) and B (64 x 128) for `2 BM 128 64` FLOPs:
//! 128 x 128 tiles stage 32 KB per 2.1 MFLOP (15.6 B/kFLOP), 256 x 128 tiles 48 KB per
//! 4.2 MFLOP (11.7 B/kFLOP): at 800 TFLOP/s that is 12.5 vs 9.4 TB/s of L2-to-SM traffic.
//! In row-major block order a wave of 132 blocks spans two tile rows and all 64 tile columns
//! of C, so every wave streams all of B (128 MB, more than the 50 MB L2) from DRAM: about
//! 2 GB over the 16 waves, 0.4 ms at 4.8 TB/s against a 1.4 ms compute floor. Groups of 8
//! tile rows cut a wave's footprint to about 8 x 256 rows of A plus 17 x 128 columns of B
//! (66 MB), about 1 GB in all. Predicted: at or above v02; to be measured.

use super::TcParams;
use super::wgmma::{self, WgmmaTiling, WgmmaVersion};
use crate::device::mma::MmaInput;

pub struct V03;

impl WgmmaVersion for V03 {
    const TILING: WgmmaTiling = wgmma::tiling(4, 128).grouped(8);
    type Acc = [f32; 64];
}

pub const TILING: WgmmaTiling = V03::TILING;

#[inline(always)]
pub fn run<T: MmaInput>(p: TcParams<T>) {
    wgmma::run::<T, V03, 0>(p)
}
