//! Split-K for the [`super::wgmma`] engine: when a problem has too few C tiles to occupy the
//! GPU (decode-like `M <= 128`, or small `M x N` with a long K), the launcher gives each tile
//! `splits` blocks (grid z). Block z runs the k-steps of slice z only and stores its raw
//! accumulators, unscaled, to an f32 workspace (a persistent version's unit carries its slice
//! instead of grid z); [`reduce`] then adds the slices in order
//! 0, 1, ... (so the result does not depend on block timing) and applies the epilogue
//! ([`super::store`]) once.
//!
//! # Slices
//! `steps = ceil(K / bk)` k-steps of `bk` split into slices of `per = ceil(steps / splits)`;
//! slice z is steps `z per .. min(steps, (z + 1) per)`. The launcher picks `splits` so that
//! no slice is empty (`splits = ceil(steps / per)`).
//!
//! # Workspace
//! `splits x M x N` f32, row-major, slice-major: slice z's element (i, j) at
//! `(z M + i) N + j`. Only tiles' in-bounds elements are written, and every one is.

use super::TcParams;
use crate::device::mma::MmaInput;
use crate::device::thread::{block_dim_x, block_idx_x, block_idx_y, grid_dim_y, thread_idx_x};

/// Threads per block of [`reduce`].
pub const REDUCE_THREADS: u32 = 256;

/// Deliberate bug for the harness tests: slices of `floor(steps / splits)`, which drop the
/// last `steps % splits` k-steps.
pub const BUG_FLOOR_SLICES: u32 = 5;

/// Slice `z`'s k-steps of K's `steps` when the launch splits K: (first step, count).
/// Without a split, `(0, steps)`.
#[inline(always)]
pub fn slice<T: MmaInput, const BUG: u32>(p: &TcParams<T>, steps: u32, z: u32) -> (u32, u32) {
    if p.splits <= 1 {
        return (0, steps);
    }
    let per = if BUG == BUG_FLOOR_SLICES { steps / p.splits } else { steps.div_ceil(p.splits) };
    let first = z * per;
    (first, steps.saturating_sub(first).min(per))
}

/// Slice `z`'s raw accumulator for C element (`i`, `j`), guarded against the matrix edges.
#[inline(always)]
pub fn store_partial<T: MmaInput>(p: &TcParams<T>, z: u32, i: u32, j: u32, acc: f32) {
    if i >= p.m || j >= p.n {
        return;
    }
    let (m, n) = (p.m as usize, p.n as usize);
    p.partial.store((z as usize * m + i as usize) * n + j as usize, acc);
}

/// The second pass: thread (x, row) adds the `splits` partial sums of C element (row, x) in
/// slice order and applies the epilogue. Grid: `ceil(N / REDUCE_THREADS)` x `min(M, 65535)`
/// (rows beyond the grid are taken in strides of it).
#[inline(always)]
pub fn reduce<T: MmaInput>(p: TcParams<T>) {
    let j = block_idx_x() * block_dim_x() + thread_idx_x();
    if j >= p.n {
        return;
    }
    let plane = p.m as usize * p.n as usize;
    let mut i = block_idx_y();
    while i < p.m {
        let at = i as usize * p.n as usize + j as usize;
        let mut acc = 0.0f32;
        let mut z = 0;
        while z < p.splits {
            acc += p.partial.load(z as usize * plane + at);
            z += 1;
        }
        super::store(&p, i, j, acc);
        i += grid_dim_y();
    }
}
