//! v09: a main loop of FMAs and little else: the k-step's 16 depths unrolled with each depth's
//! shared reads issued under the previous depth's FMAs, tiles wholly inside the matrices
//! fetched without edge guards from offsets that advance by one k-step, two blocks per SM
//! declared to ptxas (at most 128 registers per thread), and C stored 16 bytes at a time.
//!
//! # Why
//! v08's SASS (ptxas 12.9, sm_90) spends about 1280 instructions per k-step and warp on 1024
//! FFMAs: the depth loop was left rolled (4 shared loads, then 3 loop instructions and a
//! branch per 64 FFMAs), and every chunk of the next tile went through the edge checks of
//! [`super::load_chunk4`] (about 25 instructions with its branches). The 2026-12-04 H200 run
//! had v08 at 0.80-0.82 of cuBLAS at 4096^3 and 8192^3, close to that FFMA share (0.80), as
//! an issue-bound kernel would be. Here a k-step of an interior tile is 1024 FFMAs, 64
//! `LDS.128`, 4 `LDG.128` and the stores and barrier around them.
//!
//! # Thread mapping
//! As v07/v08 (the same tile: 128 x 128 x 16, 256 threads, 8 x 8 outputs each, two stages).
//! A block is interior when its whole C tile lies inside `M x N` and both operands allow
//! 16-byte loads; its first `K / 16` k-steps then load unguarded chunks, and the partial last
//! k-step (and every k-step of an edge block) takes v08's guarded loads.
//!
//! # C stores
//! A lane's 8 columns are two runs of 4 (one per 16-wide sub-tile), so where C allows it
//! (`vec_c`: aligned, row-major) each run is one 16-byte store ([`super::store_c4`]): 16
//! `STG.128` per thread instead of 64 4-byte stores, and a warp's store covers 8 rows x 64
//! bytes, 16 sectors for 512 bytes, where a 4-byte store covers 16 sectors for 128. The bench's 4096 x
//! 4096 x 64 is 4 k-steps per tile, so its stores weigh: v08 ran it at 0.52 of cuBLAS
//! (2026-12-04), against 0.80 at 4096^3.
//!
//! # Split
//! When the tiles are too few to fill the GPU (1024^3 makes 64 for 132 SMs), the launcher
//! splits K between blocks as for v10 ([`super::split_k`]): the block covers one range of
//! depths and writes its partial tile to scratch.

use super::split_k::{self, Range};
use super::{F32x4, GemmParams, Interior, Tiling, block_origin, outer_product, put_stage, store_c4, unroll8};
use super::{v07_warptile, v08_double_buffer as v08};
use crate::device::Shared;
use crate::device::thread::{sync_threads, thread_idx_x};

pub const TILING: Tiling = Tiling { blocks_per_sm: 2, ..v08::TILING }.check();

const BM: u32 = TILING.bm;
const BN: u32 = TILING.bn;
const BK: u32 = TILING.bk;
const TM: usize = TILING.tm as usize;
const TN: usize = TILING.tn as usize;
const _: () = assert!(
    TILING.shared_bytes() == v08::TILING.shared_bytes() && TILING.threads() == v08::TILING.threads(),
    "v08's fetch and put stage this tile"
);
const _: () = assert!(BK == 16, "compute unrolls exactly 16 depths");
/// A warp's sub-tile width: a lane's second run of 4 columns starts this far past its first.
const SUB_N: u32 = TILING.wn / TILING.wniter;
const _: () = assert!(TM == 8 && TN == 8 && TILING.wniter == 2, "a lane's columns are two runs of 4");

/// One k-step of FMAs, as [`v07_warptile::compute`] but unrolled, depth `kk + 1`'s fragments
/// read before depth `kk`'s FMAs.
#[inline(always)]
#[track_caller]
#[allow(unused_assignments)] // the last depth's copy of `f = next` is never read
fn compute(a_s4: Shared<F32x4>, b_s4: Shared<F32x4>, row0: u32, col0: u32, acc: &mut [[f32; TN]; TM]) {
    let fragments = |kk| v07_warptile::fragments(a_s4, b_s4, row0, col0, kk);
    let mut f = fragments(0);
    unroll8!(h < 2 => {
        unroll8!(q < 8 => {
            let kk = (h * 8 + q) as u32;
            let next = if kk + 1 < BK { fragments(kk + 1) } else { f };
            outer_product(&f.0, &f.1, acc);
            f = next;
        });
    });
}

#[inline(always)]
pub fn run(p: GemmParams) {
    let (i0, j0) = block_origin(BM, BN);
    let t = thread_idx_x();
    let (row0, col0) = v07_warptile::lane_origin(t);
    let mut acc = [[0.0f32; TN]; TM];
    let r = Range::of_block(&p);
    let (ba, bb, k_begin) = (r.ba, r.bb, r.k_begin);
    let depth = r.depth();
    let steps = depth.div_ceil(BK);
    let interior = p.vec_a != 0 && p.vec_b != 0 && i0 + BM <= p.m && j0 + BN <= p.n;
    // k-steps whose chunks all lie inside A and B (block-uniform).
    let whole = if interior { depth / BK } else { 0 };
    let lean = Interior::<{ v08::CH_A }, { v08::CH_B }>::new(TILING, &p, ba, bb, i0, j0, k_begin, t);
    let fetch = |s: u32| {
        if s < whole { lean.fetch(TILING, &p, s, t) } else { v08::fetch(&p, ba, bb, i0, j0, k_begin + s * BK, t) }
    };
    if steps > 0 {
        let (sa, sb) = fetch(0);
        put_stage(TILING, &p, 0, &sa, &sb);
        sync_threads();
    }
    let mut s = 0;
    while s < steps {
        let cur = s % 2;
        // The next k-step's global loads issue before this one's FMAs, as in v08.
        let staged = if s + 1 < steps { Some(fetch(s + 1)) } else { None };
        let a_s4 = Shared::<F32x4>::at(TILING.a_offset(cur), TILING.a_tile() / 4);
        let b_s4 = Shared::<F32x4>::at(TILING.b_offset(cur), TILING.b_tile() / 4);
        compute(a_s4, b_s4, row0, col0, &mut acc);
        if let Some((sa, sb)) = staged {
            put_stage(TILING, &p, 1 - cur, &sa, &sb);
        }
        sync_threads();
        s += 1;
    }
    let (out, bc) = split_k::output(&p);
    unroll8!(r < TM => {
        let i = i0 + row0 + r as u32;
        let row = &acc[r];
        store_c4(&out, bc, i, j0 + col0, [row[0], row[1], row[2], row[3]]);
        store_c4(&out, bc, i, j0 + col0 + SUB_N, [row[4], row[5], row[6], row[7]]);
    });
}
