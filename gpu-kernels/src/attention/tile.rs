//! The CUDA-core attention tile machinery shared by `attention::v01_simt` and
//! `paged::v01_simt`: the shared-memory layout, query and key/value staging, and one warp's
//! online-softmax state updated tile by tile.
//!
//! # Thread mapping
//! A block of [`WARPS`] warps; each warp owns one query row, staged (scaled into base-2
//! units) in its row of `Q_S`. For each tile of up to [`BK`] keys, all threads stage K and V
//! (as f32) in shared memory; then in each warp lane `l` scores key `l` against the warp's
//! query, the warp updates its running max and sum, writes its probabilities to its row of
//! `P_S`, and accumulates `P V` into the `d / 32` output dimensions each lane owns
//! (`dd = lane + 32 t`, so a warp reads a V row contiguously).
//!
//! # Tiling
//! K and V rows are padded by one float so that lanes reading different rows of the same
//! column (the score loop) fall in different banks.

use crate::device::reduce::{MaxNan, Sum, warp_reduce};
use crate::device::thread::sync_threads;
use crate::device::warp::{FULL_MASK, sync_warp};
use crate::device::{Shared, WARP_SIZE, math};

/// Query rows (warps) per block.
pub const WARPS: u32 = 4;
pub const THREADS: u32 = WARPS * WARP_SIZE;
/// Keys per shared-memory tile: one per lane.
pub const BK: u32 = WARP_SIZE;
/// Largest head dimension.
pub const MAX_HEAD_DIM: u32 = 128;
/// Output dimensions each lane owns.
pub const DPL: usize = (MAX_HEAD_DIM / WARP_SIZE) as usize;
/// Padded row stride of the K and V tiles, in floats.
const KV_STRIDE: u32 = MAX_HEAD_DIM + 1;

const K_OFF: u32 = 0;
const V_OFF: u32 = K_OFF + Shared::<f32>::bytes(BK * KV_STRIDE);
const Q_OFF: u32 = V_OFF + Shared::<f32>::bytes(BK * KV_STRIDE);
const P_OFF: u32 = Q_OFF + Shared::<f32>::bytes(WARPS * MAX_HEAD_DIM);
/// Dynamic shared memory of a kernel built on this module.
pub const SHARED_BYTES: u32 = P_OFF + Shared::<f32>::bytes(WARPS * BK);
const _: () = assert!(SHARED_BYTES <= 48 * 1024, "stays under the 48 KB needing no opt-in");
const _: () = assert!(MAX_HEAD_DIM.is_multiple_of(WARP_SIZE));

const K_S: Shared<f32> = Shared::at(K_OFF, BK * KV_STRIDE);
const V_S: Shared<f32> = Shared::at(V_OFF, BK * KV_STRIDE);
const Q_S: Shared<f32> = Shared::at(Q_OFF, WARPS * MAX_HEAD_DIM);
const P_S: Shared<f32> = Shared::at(P_OFF, WARPS * BK);

/// Stages warp `warp`'s query row: `query(dd)` is element `dd`, already scaled.
#[inline(always)]
#[track_caller]
pub fn stage_query(warp: u32, lane: u32, d: usize, query: impl Fn(usize) -> f32) {
    let mut dd = lane as usize;
    while dd < d {
        Q_S.store(warp * MAX_HEAD_DIM + dd as u32, query(dd));
        dd += WARP_SIZE as usize;
    }
}

/// Stages a tile of `rows` keys (rows past it are zero): `kv(r, c)` is (K, V) of key `r`,
/// column `c`. Every thread of the block calls it; it waits for the previous tile's readers
/// first and for the stores after.
#[inline(always)]
#[track_caller]
pub fn stage_kv(tid: u32, d: usize, rows: usize, kv: impl Fn(usize, usize) -> (f32, f32)) {
    sync_threads();
    let mut e = tid as usize;
    while e < BK as usize * d {
        let (r, c) = (e / d, e % d);
        let (k, v) = if r < rows { kv(r, c) } else { (0.0, 0.0) };
        K_S.store(r as u32 * KV_STRIDE + c as u32, k);
        V_S.store(r as u32 * KV_STRIDE + c as u32, v);
        e += THREADS as usize;
    }
    sync_threads();
}

/// One warp's online-softmax state: running max `m` (base 2), running sum `l` of `2^(s - m)`,
/// and the unnormalized output dimensions this lane owns.
pub struct OnlineRow {
    pub m: f32,
    pub l: f32,
    pub acc: [f32; DPL],
}

impl OnlineRow {
    #[inline(always)]
    pub fn new() -> Self {
        OnlineRow { m: f32::NEG_INFINITY, l: 0.0, acc: [0.0; DPL] }
    }

    /// Folds in the staged tile of `rows` keys; `visible` says whether this lane's key counts
    /// (masked keys score -inf). Every lane of the warp calls it.
    #[inline(always)]
    #[track_caller]
    pub fn tile(&mut self, warp: u32, lane: u32, d: usize, rows: usize, visible: bool) {
        let mut s = f32::NEG_INFINITY;
        if visible {
            let mut dot = 0.0f32;
            for c in 0..d {
                dot = math::fma(Q_S.load(warp * MAX_HEAD_DIM + c as u32), K_S.load(lane * KV_STRIDE + c as u32), dot);
            }
            s = dot;
        }
        let m_new = math::max_nan(self.m, warp_reduce(MaxNan(s)).0);
        let (corr, pj) = if m_new == f32::NEG_INFINITY {
            (1.0, 0.0)
        } else {
            let corr = if self.m == f32::NEG_INFINITY { 0.0 } else { math::exp2_approx(self.m - m_new) };
            (corr, if s == f32::NEG_INFINITY { 0.0 } else { math::exp2_approx(s - m_new) })
        };
        self.l = self.l * corr + warp_reduce(Sum(pj)).0;
        self.m = m_new;
        // This warp's P row is rewritten next tile only after stage_kv's barriers.
        P_S.store(warp * BK + lane, pj);
        sync_warp(FULL_MASK);
        for (t, a) in self.acc.iter_mut().enumerate() {
            let dd = lane as usize + t * WARP_SIZE as usize;
            if dd < d {
                let mut sum = *a * corr;
                for r in 0..rows {
                    sum = math::fma(P_S.load(warp * BK + r as u32), V_S.load(r as u32 * KV_STRIDE + dd as u32), sum);
                }
                *a = sum;
            }
        }
    }

    /// Calls `f(dd, acc)` for each output dimension this lane owns.
    #[inline(always)]
    pub fn for_each_dim(&self, lane: u32, d: usize, mut f: impl FnMut(usize, f32)) {
        for (t, &a) in self.acc.iter().enumerate() {
            let dd = lane as usize + t * WARP_SIZE as usize;
            if dd < d {
                f(dd, a);
            }
        }
    }
}

impl Default for OnlineRow {
    fn default() -> Self {
        Self::new()
    }
}
