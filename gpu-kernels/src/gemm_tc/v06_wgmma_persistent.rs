//! v06: v05 (v04's 128 x 256 x 64 tiles, m64n256k16, `setmaxnreg` 40 / 232, grouped order,
//! split-K) run by persistent blocks ([`super::wgmma`], "Persistent blocks"): at most one
//! block per SM, each walking its share of the C tiles with the TMA ring running on from one
//! tile to the next. H200, 2026-12-04: 0.464 of cuBLAS at 8192^3, with the
//! element-by-element epilogue.
//!
//! # The count behind it (H200, 132 SMs, bf16, 8192^3)
//! 2048 tiles, 15.5 per SM. Each 128 x 256 tile is 128 k-steps of 0.56 us at the per-SM
//! wgmma rate (990 / 132 TFLOP/s), 72 us. Between two tiles a v04/v05 SM is idle for a block
//! exit and launch, the first TMA round trip (about 1 us to DRAM) and the ramp of the
//! 4-stage ring, and the consumers' epilogue stores run with no loads in flight. v06 keeps
//! the ring full across the boundary: the producer loads the next tile's first four stages
//! while the consumers store. The epilogue itself is not overlapped with wgmmas (both
//! consumer warpgroups store at once). Predicted: 1 to 3 % over v05 at 8192^3, more on
//! shapes of few k-steps per tile; equal to v05 where units <= SMs (every split shape).
//! Wave quantization is unchanged: 2048 / 132 leaves the last round 52 % full either way.

use super::TcParams;
use super::wgmma::{self, WgmmaTiling, WgmmaVersion};
use crate::device::mma::MmaInput;

pub struct V06;

impl WgmmaVersion for V06 {
    const TILING: WgmmaTiling = super::v05_wgmma_splitk::TILING.persistent();
    type Acc = [f32; 128];
}

pub const TILING: WgmmaTiling = V06::TILING;

#[inline(always)]
pub fn run<T: MmaInput>(p: TcParams<T>) {
    wgmma::run::<T, V06, 0>(p)
}

/// v06 with deliberate bug `BUG` ([`wgmma::bug::KEEP_LAST_STAGE`]), for the harness tests.
#[inline(always)]
pub fn run_bug<T: MmaInput, const BUG: u32>(p: TcParams<T>) {
    wgmma::run::<T, V06, BUG>(p)
}
