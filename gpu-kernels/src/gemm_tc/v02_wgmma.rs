//! v02: Hopper's path (sm_90a) on the [`super::wgmma`] engine: TMA into a 4-stage mbarrier
//! ring, one producer and two consumer warpgroups, wgmma m64n128k16; 128 x 128 x 64 tiles,
//! blocks in plain row-major order. H200, 2026-12-04: 0.633 of cuBLAS at 4096^3, 0.667 at 8192^3.

use super::TcParams;
use super::wgmma::{self, WgmmaTiling, WgmmaVersion};
use crate::device::mma::MmaInput;

pub struct V02;

impl WgmmaVersion for V02 {
    const TILING: WgmmaTiling = wgmma::tiling(2, 128);
    type Acc = [f32; 64];
}

pub const TILING: WgmmaTiling = V02::TILING;

#[inline(always)]
pub fn run<T: MmaInput>(p: TcParams<T>) {
    wgmma::run::<T, V02, 0>(p)
}

/// v02 with deliberate bug `BUG` ([`wgmma::bug`]), for the harness tests.
#[inline(always)]
pub fn run_bug<T: MmaInput, const BUG: u32>(p: TcParams<T>) {
    wgmma::run::<T, V02, BUG>(p)
}
