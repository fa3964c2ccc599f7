//! A deliberately broken v03: no edge guards on loads or stores (and C is read even when
//! beta = 0). Correct only when M, N and K are multiples of 32; the tests assert that the
//! harness rejects it on other shapes (an out-of-bounds access on the emulator, or wrong or
//! guard-region values).

use super::{GemmParams, Tiling, v03_smem};

pub const TILING: Tiling = v03_smem::TILING;

#[inline(always)]
pub fn run(p: GemmParams) {
    v03_smem::body::<false>(p)
}
