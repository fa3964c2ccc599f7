//! v01: the first tensor-core rung: 128 x 128 x 32 block tiles, 8 warps each owning a 64 x 32
//! warp tile (4 x 4 m16n8 accumulator tiles, 64 f32 per lane), A and B staged by cp.async in
//! two shared stages (the next k-step's copies in flight during this one's mma), fragments
//! by ldmatrix (A: x4; B: x4.trans, two n8 tiles per load). H200, 2026-12-04: 0.157 of cuBLAS at 4096^3.
//!
//! # Thread mapping
//! Warp `w` owns rows `(w / 4) * 64 ..` and columns `(w % 4) * 32 ..` of the block tile.
//! For the copies, thread `t` takes 16-byte chunks `t` and `t + 256` of each tile, row-major.
//!
//! # Tiling
//! [`TILING`]; shared rows padded by 8 halves (A rows 80 bytes, B rows 272 bytes) so the 8
//! row addresses of one ldmatrix fall in distinct banks.

use super::{TcParams, TcTiling};
use crate::device::Shared;
use crate::device::mma::{self, MmaInput, cp_async_16, cp_async_commit, cp_async_wait_group, ldmatrix};
use crate::device::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x};
use crate::gemm::unroll8;

pub const TILING: TcTiling = TcTiling { bm: 128, bn: 128, bk: 32, wm: 64, wn: 32, stages: 2, pad: 8 }.check();

const BM: u32 = TILING.bm;
const BN: u32 = TILING.bn;
const BK: u32 = TILING.bk;
const WM: u32 = TILING.wm;
const WN: u32 = TILING.wn;
const MI: usize = TILING.mi() as usize;
const NI: usize = TILING.ni() as usize;
const THREADS: u32 = TILING.threads();
const WARPS_N: u32 = BN / WN;
const A_LD: u32 = TILING.a_ld();
const B_LD: u32 = TILING.b_ld();
const AT_LD: u32 = TILING.at_ld();
const BT_LD: u32 = TILING.bt_ld();
const CH_A: u32 = TILING.a_chunks() / THREADS;
const CH_B: u32 = TILING.b_chunks() / THREADS;

/// Copies one 16-byte chunk (8 elements of row `r`, from column `c`) of a `rows x cols`
/// matrix into `dst[at..at + 8]`: cp.async when `vec` and the chunk is whole (or wholly
/// outside: zero-filled), else guarded scalar loads and stores. A partial chunk is never a
/// cp.async: its 16 bytes may run past the end of the matrix (the last row's edge), and
/// compute-sanitizer counts all 16 as read.
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
fn copy_chunk<T: MmaInput>(
    src: crate::device::Global<T>,
    ld: u32,
    rows: u32,
    cols: u32,
    r: u32,
    c: u32,
    dst: Shared<T>,
    at: u32,
    vec: bool,
) {
    let inside = r < rows && c < cols;
    if vec && (!inside || cols - c >= 8) {
        let si = if inside { r as usize * ld as usize + c as usize } else { 0 };
        cp_async_16(dst, at, src, si, if inside { 16 } else { 0 });
    } else {
        let mut e = 0;
        while e < 8 {
            let v = if r < rows && c + e < cols {
                src.load(r as usize * ld as usize + (c + e) as usize)
            } else {
                T::from_bits16(0)
            };
            dst.store(at + e, v);
            e += 1;
        }
    }
}

/// Issues the copies of k-step `k0` into stage `s`. As stored, A's tile is `bm x bk` and
/// B's `bk x bn`; transposed, A's is `bk x bm` (stored `K x M`) and B's `bn x bk`.
#[inline(always)]
#[track_caller]
fn load_stage<T: MmaInput>(p: &TcParams<T>, s: u32, i0: u32, j0: u32, k0: u32, t: u32) {
    let a_s = Shared::<T>::at(TILING.a_offset(s), TILING.a_tile());
    let b_s = Shared::<T>::at(TILING.b_offset(s), TILING.b_tile());
    let mut q = 0;
    while q < CH_A {
        let ch = t + q * THREADS;
        if p.trans_a == 0 {
            let (r, c) = (ch / (BK / 8), (ch % (BK / 8)) * 8);
            copy_chunk(p.a, p.lda, p.m, p.k, i0 + r, k0 + c, a_s, r * A_LD + c, p.vec_a != 0);
        } else {
            let (r, c) = (ch / (BM / 8), (ch % (BM / 8)) * 8);
            copy_chunk(p.a, p.lda, p.k, p.m, k0 + r, i0 + c, a_s, r * AT_LD + c, p.vec_a != 0);
        }
        q += 1;
    }
    let mut q = 0;
    while q < CH_B {
        let ch = t + q * THREADS;
        if p.trans_b == 0 {
            let (r, c) = (ch / (BN / 8), (ch % (BN / 8)) * 8);
            copy_chunk(p.b, p.ldb, p.k, p.n, k0 + r, j0 + c, b_s, r * B_LD + c, p.vec_b != 0);
        } else {
            let (r, c) = (ch / (BK / 8), (ch % (BK / 8)) * 8);
            copy_chunk(p.b, p.ldb, p.n, p.k, j0 + r, k0 + c, b_s, r * BT_LD + c, p.vec_b != 0);
        }
        q += 1;
    }
}

/// The warp's mma over one stage: `BK / 16` steps of `MI x NI` m16n8k16.
#[inline(always)]
#[track_caller]
fn compute<T: MmaInput>(
    s: u32,
    wr: u32,
    wc: u32,
    lane: u32,
    trans_a: bool,
    trans_b: bool,
    acc: &mut [[[f32; 4]; NI]; MI],
) {
    let a_s = Shared::<T>::at(TILING.a_offset(s), TILING.a_tile());
    let b_s = Shared::<T>::at(TILING.b_offset(s), TILING.b_tile());
    let mut kk = 0;
    while kk < BK {
        let mut af = [[0u32; 4]; MI];
        unroll8!(mi < MI => {
            let m0 = wr * WM + mi as u32 * 16;
            af[mi] = if !trans_a {
                // Lanes 0-15 give rows 0-15 at column kk, lanes 16-31 the same rows at kk + 8:
                // matrices (rows 0-7, 8-15) x (cols kk, kk+8) = registers 0..3 of the fragment.
                ldmatrix::<T, 4>(a_s, (m0 + lane % 16) * A_LD + kk + (lane / 16) * 8, false)
            } else {
                // Stored k x m: transposed 8x8 loads; matrix j = (m half j % 2, k half j / 2).
                let krow = kk + lane % 8 + (lane / 16) * 8;
                ldmatrix::<T, 4>(a_s, krow * AT_LD + m0 + ((lane / 8) % 2) * 8, true)
            };
        });
        let mut bf = [[0u32; 2]; NI];
        unroll8!(nj < NI / 2 => {
            let n0 = wc * WN + nj as u32 * 16;
            let r = if !trans_b {
                // B (row-major k x n): transposed 8x8 loads give the "col" fragment; matrices
                // are (k 0-7, k 8-15) x (n 0-7, n 8-15): two n8 tiles' b0/b1 per load.
                let krow = kk + lane % 8 + ((lane / 8) % 2) * 8;
                ldmatrix::<T, 4>(b_s, krow * B_LD + n0 + (lane / 16) * 8, true)
            } else {
                // Stored n x k: plain 8x8 loads are already the "col" fragment; matrices
                // (n 0-7: k 0-7, k 8-15), (n 8-15: k 0-7, k 8-15).
                let nrow = n0 + lane % 8 + (lane / 16) * 8;
                ldmatrix::<T, 4>(b_s, nrow * BT_LD + kk + ((lane / 8) % 2) * 8, false)
            };
            bf[2 * nj] = [r[0], r[1]];
            bf[2 * nj + 1] = [r[2], r[3]];
        });
        unroll8!(mi < MI => {
            unroll8!(ni < NI => {
                acc[mi][ni] = mma::mma_m16n8k16::<T>(af[mi], bf[ni], acc[mi][ni]);
            });
        });
        kk += 16;
    }
}

#[inline(always)]
pub fn run<T: MmaInput>(p: TcParams<T>) {
    let t = thread_idx_x();
    let (warp, lane) = (t / 32, t % 32);
    let (wr, wc) = (warp / WARPS_N, warp % WARPS_N);
    let (i0, j0) = (block_idx_y() * BM, block_idx_x() * BN);
    let mut acc = [[[0.0f32; 4]; NI]; MI];
    let steps = p.k.div_ceil(BK);
    if steps > 0 {
        load_stage(&p, 0, i0, j0, 0, t);
    }
    cp_async_commit();
    let mut s = 0;
    while s < steps {
        if s + 1 < steps {
            load_stage(&p, (s + 1) % 2, i0, j0, (s + 1) * BK, t);
        }
        // Always commit (possibly an empty group), so "all but the newest group" is step s.
        cp_async_commit();
        cp_async_wait_group::<1>();
        // Every thread's copies of stage s are in; the barrier makes them visible to all.
        sync_threads();
        compute::<T>(s % 2, wr, wc, lane, p.trans_a != 0, p.trans_b != 0, &mut acc);
        // All reads of stage s % 2 are done before step s + 1 issues copies into it.
        sync_threads();
        s += 1;
    }
    let (g, tg) = (lane / 4, lane % 4);
    unroll8!(mi < MI => {
        unroll8!(ni < NI => {
            // Accumulator register e sits at row g (+8 for e >= 2), column 2 tg + e % 2.
            unroll8!(e < 4 => {
                let i = i0 + wr * WM + mi as u32 * 16 + g + 8 * (e as u32 / 2);
                let j = j0 + wc * WN + ni as u32 * 8 + 2 * tg + e as u32 % 2;
                super::store(&p, i, j, acc[mi][ni][e]);
            });
        });
    });
}
