//! v03: stage 32 x 32 tiles of A and B in shared memory, so each global element is read once
//! per block instead of once per thread (32x fewer global reads than v02).
//!
//! # Thread mapping
//! As v02: thread `t` owns `C[i0 + t / 32, j0 + t % 32]`. For each k-step the block's 1024
//! threads copy the A tile (`As[i * 32 + kk]`) and the B tile (`Bs[kk * 32 + j]`), one element
//! each, wait, then each thread runs 32 FMAs out of shared memory: a warp reads one `As`
//! address (broadcast) and 32 consecutive `Bs` words (no bank conflict).

use super::{GemmParams, Tiling, batch_bases, block_origin, c_at, load_a, load_b, store_c};
use crate::device::thread::{sync_threads, thread_idx_x};
use crate::device::{Shared, math};

pub const TILING: Tiling =
    Tiling { bm: 32, bn: 32, bk: 32, tm: 1, tn: 1, wm: 0, wn: 0, wniter: 1, stages: 1, blocks_per_sm: 0 }.check();

const BM: u32 = TILING.bm;
const BN: u32 = TILING.bn;
const BK: u32 = TILING.bk;
const THREADS: u32 = TILING.threads();
const A_S: Shared<f32> = Shared::at(TILING.a_offset(0), TILING.a_tile());
const B_S: Shared<f32> = Shared::at(TILING.b_offset(0), TILING.b_tile());

#[inline(always)]
pub fn run(p: GemmParams) {
    body::<true>(p)
}

/// The v03 body; `GUARD = false` drops every edge check, which is the deliberately broken
/// [`super::bug_no_edge_guard`] (never shipped: the tests prove the harness rejects it).
#[inline(always)]
pub fn body<const GUARD: bool>(p: GemmParams) {
    let (ba, bb, bc) = batch_bases(&p);
    let (i0, j0) = block_origin(BM, BN);
    let t = thread_idx_x();
    let (tr, tc) = (t / BN, t % BN);
    let mut acc = 0.0f32;
    let mut k0 = 0;
    // Every thread runs every k-step (no early exit): the barriers need the whole block.
    while k0 < p.k {
        let mut e = t;
        while e < TILING.a_tile() {
            // Consecutive threads take consecutive k: one row segment of A (N layout).
            let (r, c) = (e / BK, e % BK);
            let v = if GUARD { load_a(&p, ba, i0 + r, k0 + c) } else { unguarded_a(&p, ba, i0 + r, k0 + c) };
            A_S.store(e, v);
            e += THREADS;
        }
        let mut e = t;
        while e < TILING.b_tile() {
            let (r, c) = (e / BN, e % BN);
            let v = if GUARD { load_b(&p, bb, k0 + r, j0 + c) } else { unguarded_b(&p, bb, k0 + r, j0 + c) };
            B_S.store(e, v);
            e += THREADS;
        }
        sync_threads();
        for kk in 0..BK {
            acc = math::fma(A_S.load(tr * BK + kk), B_S.load(kk * BN + tc), acc);
        }
        // Before the next k-step overwrites the tiles, everyone must be done reading them.
        sync_threads();
        k0 += BK;
    }
    if GUARD {
        store_c(&p, bc, i0 + tr, j0 + tc, acc);
    } else {
        let at = c_at(&p, bc, i0 + tr, j0 + tc);
        p.c.store(at, p.alpha * acc + p.beta * p.c.load(at));
    }
}

#[inline(always)]
#[track_caller]
fn unguarded_a(p: &GemmParams, base: usize, i: u32, kk: u32) -> f32 {
    let (r, c) = if p.trans_a == 0 { (i, kk) } else { (kk, i) };
    p.a.load(base + r as usize * p.lda as usize + c as usize)
}

#[inline(always)]
#[track_caller]
fn unguarded_b(p: &GemmParams, base: usize, kk: u32, j: u32) -> f32 {
    let (r, c) = if p.trans_b == 0 { (kk, j) } else { (j, kk) };
    p.b.load(base + r as usize * p.ldb as usize + c as usize)
}
