//! v04: the [`super::wgmma`] engine with 128 x 256 x 64 tiles: two consumer warpgroups each
//! issuing m64n256k16 (128 f32 accumulators per thread), the producer handing its registers
//! to them with `setmaxnreg` (40 for the producer, 232 for each consumer, from 168 at entry),
//! grouped block order (8 tile rows). H200, 2026-12-04: 0.345 of cuBLAS at 4096^3, 0.471 at 8192^3, with
//! the element-by-element epilogue (see [`super::wgmma`]'s `epilogue`).
//!
//! # The count behind it (H200, bf16)
//! Staged bytes per FLOP equal v03's (a 64-deep k-step stages 16 KB of A and 32 KB of B for
//! 4.2 MFLOP: 11.7 B/kFLOP). What changes is the shared-memory traffic of the wgmmas
//! themselves: an m64n256k16 reads 2 KB of A and 8 KB of B for 0.52 MFLOP (19.1 B/kFLOP),
//! an m64n128k16 2 KB and 4 KB for 0.26 MFLOP (22.9 B/kFLOP). At 900 TFLOP/s that is 17 vs
//! 21 TB/s of shared-memory reads against roughly 33 TB/s the SMs can deliver (128 B per
//! clock per SM, 132 SMs, ~1.98 GHz): less pressure on the operand path. The block also has
//! 384 threads instead of 640, so the idle producer holds fewer registers (40 each).
//! Predicted: at or above v03 at large sizes; to be measured.

use super::TcParams;
use super::wgmma::{self, WgmmaTiling, WgmmaVersion};
use crate::device::mma::MmaInput;

pub struct V04;

impl WgmmaVersion for V04 {
    const TILING: WgmmaTiling = wgmma::tiling(2, 256).grouped(8).registers(40, 232);
    type Acc = [f32; 128];
}

pub const TILING: WgmmaTiling = V04::TILING;

#[inline(always)]
pub fn run<T: MmaInput>(p: TcParams<T>) {
    wgmma::run::<T, V04, 0>(p)
}
