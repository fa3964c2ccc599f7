//! Backward v01: FlashAttention-2's backward on the CUDA cores (f32 math on bf16/f16 inputs):
//! a preprocessing kernel for `D_i = rowsum(dO_i * O_i)`, then one block per key tile that
//! recomputes `P` from Q, K and the forward's log-sum-exp, keeps its dK and dV in registers
//! over every query (and, for GQA, every query head of its kv head), and adds its dQ
//! contributions with f32 atomics; or, deterministic, a separate dQ pass over query tiles.
//! The correct baseline a tensor-core backward would be checked against. Not measured yet
//! (no GPU run).
//!
//! # The math (per (batch, head); `c = scale`, natural log)
//! `P_ij = exp(c q_i.k_j - lse_i)` (0 for masked keys), `dV_j = sum_i P_ij dO_i`,
//! `dP_ij = dO_i.v_j`, `dS_ij = P_ij (dP_ij - D_i)` with `D_i = sum_j P_ij dP_ij =
//! dO_i.O_i`, `dQ_i = c sum_j dS_ij k_j`, `dK_j = c sum_i dS_ij q_i`. A row the mask hides
//! entirely (`lse = -inf`) has no visible key: it contributes nothing and its dQ is 0.
//!
//! # Kernels
//! - [`preprocess`]: a warp per query row: `D` into scratch; with atomic dQ also zeroes the
//!   row's f32 dQ accumulator (scratch after `D`). Grid x = `ceil(batch heads seq_q / WARPS)`.
//! - [`dkdv`]: grid `(ceil(seq_k / BK), kv_heads, batch)`; the block owns [`BK`] keys of one kv
//!   head. It stages its K and V tile (as f32) once, then for every query head of its group
//!   and every tile of [`BQ`] queries from the first one the causal mask lets see its keys:
//!   stages Q, dO, `lse` and `D`, computes P and dS (phase 1), accumulates dK and dV (phase 2)
//!   and, with `atomic_dq`, `dS K` into the f32 dQ accumulator with `atomicAdd` (phase 3).
//! - [`dq`] (deterministic): grid `(ceil(seq_q / BQ), heads, batch)`; the block owns [`BQ`]
//!   queries, stages them once, and loops over the key tiles they see with phases 1 and 3,
//!   keeping dQ in registers: one thread's fixed sequence of operations per output.
//! - [`dq_convert`]: the atomic path's f32 accumulator to `T`, one element per thread.
//!
//! # Thread mapping
//! [`WARPS`] warps, lane `l`, warp `w`. Phase 1: lane `l` scores key `l` of the tile against
//! rows `w, w + WARPS, ..` ([`BQ`] / [`WARPS`] rows; the Q and dO rows are warp broadcasts, the
//! K and V rows one padded row per lane). Phase 2: a thread owns keys `w + WARPS kr` and head
//! dims `l + 32 t` (a warp reads a dO / Q row contiguously, P and dS are broadcasts). Phase 3:
//! rows `w + WARPS r`, dims `l + 32 t`.
//!
//! # Tiling
//! [`BwdTiling`] ([`TILING`]) is read by these kernels and by the launcher. Shared memory: K
//! and V tiles (`BK x (MAX_D + 1)` f32, padded so lanes reading different rows of one column
//! fall in different banks), Q and dO tiles (`BQ x MAX_D` f32), P and dS (`BQ x (BK + 1)` f32),
//! and `lse` (base 2) and `D` per row: 54 KB, so the launch opts in above 48 KB.
//!
//! # Variable length (`VARLEN`)
//! [`dkdv`] and [`dq`] with `VARLEN` read sequence `b`'s lengths and first tokens from
//! `cu_seqlens_q/k` (layout `[heads, total, d]`, `seq_q` / `seq_k` the totals; the mask is
//! aligned per sequence); grid x covers the longest sequence and blocks past their own leave
//! before the first barrier. Separate entry points, so the dense kernels keep their registers.
//! [`preprocess`] and [`dq_convert`] are row passes: over `heads total_q` rows when
//! `cu_seqlens_q` is given ([`AttentionBwdParams::is_varlen`]), one entry point for both.
//!
//! # Determinism
//! `preprocess`, `dkdv` (dK, dV), `dq` and `dq_convert` are bitwise deterministic run to run;
//! the atomic dQ is not (the order of the f32 additions from different key blocks varies).
//!
//! # Safety
//! The launcher guarantees the view lengths match the shapes (scratch holds `batch heads seq_q`
//! floats of `D`, then from [`AttentionBwdParams::dq_accum_start`] `batch heads seq_q d` of dQ
//! when `atomic_dq`), `d` is a multiple of 32 and at most [`MAX_D`], `heads` is a multiple of
//! `kv_heads`, and the grids above with [`THREADS`] threads and [`TILING`]'s shared bytes.
//! Every global access is guarded against `seq_q` / `seq_k` (varlen: the sequence's own
//! lengths). Varlen: both offset arrays have `batch + 1` non-decreasing entries from 0, the
//! last ones the totals `seq_q` / `seq_k`, grid z is `batch`, and scratch is laid out over
//! `heads seq_q` rows.

use super::AttentionBwdParams;
use crate::device::thread::{block_idx_x, block_idx_y, block_idx_z, index_1d, sync_threads, thread_idx_x};
use crate::device::warp::reduce_sum_f32;
use crate::device::{Element, Shared, WARP_SIZE, math};

/// The backward's tile configuration; everything else is derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BwdTiling {
    /// Keys per tile (one per lane in phase 1).
    pub bk: u32,
    /// Query rows per tile.
    pub bq: u32,
    pub warps: u32,
    /// Largest head dimension (shared rows are sized for it).
    pub max_d: u32,
}

impl BwdTiling {
    pub const fn threads(self) -> u32 {
        self.warps * WARP_SIZE
    }
    /// Padded K/V row pitch and P/dS row pitch, in floats.
    pub const fn kv_stride(self) -> u32 {
        self.max_d + 1
    }
    pub const fn p_stride(self) -> u32 {
        self.bk + 1
    }
    pub const fn k_offset(self) -> u32 {
        0
    }
    pub const fn v_offset(self) -> u32 {
        self.k_offset() + 4 * self.bk * self.kv_stride()
    }
    pub const fn q_offset(self) -> u32 {
        self.v_offset() + 4 * self.bk * self.kv_stride()
    }
    pub const fn do_offset(self) -> u32 {
        self.q_offset() + 4 * self.bq * self.max_d
    }
    pub const fn p_offset(self) -> u32 {
        self.do_offset() + 4 * self.bq * self.max_d
    }
    pub const fn ds_offset(self) -> u32 {
        self.p_offset() + 4 * self.bq * self.p_stride()
    }
    pub const fn lse_offset(self) -> u32 {
        self.ds_offset() + 4 * self.bq * self.p_stride()
    }
    pub const fn d_offset(self) -> u32 {
        self.lse_offset() + 4 * self.bq
    }
    pub const fn shared_bytes(self) -> u32 {
        self.d_offset() + 4 * self.bq
    }
    pub const fn check(self) -> Self {
        assert!(self.bk == WARP_SIZE, "phase 1 scores one key per lane");
        assert!(self.bq.is_multiple_of(self.warps) && self.bk.is_multiple_of(self.warps), "rows and keys split evenly");
        assert!(self.max_d.is_multiple_of(WARP_SIZE), "a lane owns head dims l + 32 t");
        self
    }
}

pub const TILING: BwdTiling = BwdTiling { bk: 32, bq: 16, warps: 4, max_d: 128 }.check();
pub const WARPS: u32 = TILING.warps;
pub const THREADS: u32 = TILING.threads();
pub const BK: u32 = TILING.bk;
pub const BQ: u32 = TILING.bq;
pub const MAX_D: u32 = TILING.max_d;
pub const SHARED_BYTES: u32 = TILING.shared_bytes();
/// Rows per thread (phases 1 and 3), keys per thread (phase 2), head dims per lane.
const RPT: usize = (BQ / WARPS) as usize;
const KPT: usize = (BK / WARPS) as usize;
const DPL: usize = (MAX_D / WARP_SIZE) as usize;
const KVS: u32 = TILING.kv_stride();
const PS: u32 = TILING.p_stride();

const K_S: Shared<f32> = Shared::at(TILING.k_offset(), BK * KVS);
const V_S: Shared<f32> = Shared::at(TILING.v_offset(), BK * KVS);
const Q_S: Shared<f32> = Shared::at(TILING.q_offset(), BQ * MAX_D);
const DO_S: Shared<f32> = Shared::at(TILING.do_offset(), BQ * MAX_D);
const P_S: Shared<f32> = Shared::at(TILING.p_offset(), BQ * PS);
const DS_S: Shared<f32> = Shared::at(TILING.ds_offset(), BQ * PS);
/// `lse * log2(e)` per row (`+inf` for a row that sees nothing, so its `P` is 0).
const LSE_S: Shared<f32> = Shared::at(TILING.lse_offset(), BQ);
const D_S: Shared<f32> = Shared::at(TILING.d_offset(), BQ);

/// `D_i = rowsum(dO_i * O_i)` into `scratch[row]`; with `atomic_dq` also zeroes the row's f32
/// dQ accumulator at `scratch[p.dq_accum_start(..) + row * d ..]`.
#[inline(always)]
pub fn preprocess<T: Element>(p: AttentionBwdParams<T>) {
    let (warp, lane) = (thread_idx_x() / WARP_SIZE, thread_idx_x() % WARP_SIZE);
    let row = block_idx_x() as usize * WARPS as usize + warp as usize;
    let varlen = p.is_varlen();
    if row >= p.rows(varlen) {
        return; // the whole warp: the reduction below is warp-uniform
    }
    let (d, dq_at) = (p.d as usize, p.dq_accum_start(varlen));
    let mut acc = 0.0f32;
    let mut c = lane as usize;
    while c < d {
        acc = math::fma(p.d_o.load(row * d + c).to_f32(), p.o.load(row * d + c).to_f32(), acc);
        if p.atomic_dq != 0 {
            p.scratch.store(dq_at + row * d + c, 0.0);
        }
        c += WARP_SIZE as usize;
    }
    let total = reduce_sum_f32(acc);
    if lane == 0 {
        p.scratch.store(row, total);
    }
}

/// Stages `BK` key rows from `k0` (K and V as f32; rows past `seq_k` are zero).
#[inline(always)]
#[track_caller]
fn stage_kv<T: Element>(p: &AttentionBwdParams<T>, tid: u32, kv_row0: usize, k0: usize, seq_k: usize) {
    let d = p.d as usize;
    let mut e = tid as usize;
    while e < BK as usize * d {
        let (r, c) = (e / d, e % d);
        let (kv, vv) = if k0 + r < seq_k {
            let at = (kv_row0 + k0 + r) * d + c;
            (p.k.load(at).to_f32(), p.v.load(at).to_f32())
        } else {
            (0.0, 0.0)
        };
        K_S.store(r as u32 * KVS + c as u32, kv);
        V_S.store(r as u32 * KVS + c as u32, vv);
        e += THREADS as usize;
    }
}

/// Stages `BQ` query rows from `i0` of the (batch, head) whose rows start at `q_row0`: Q, dO,
/// `lse` (base 2) and `D` (rows past `seq_q` are zero and see nothing).
#[inline(always)]
#[track_caller]
fn stage_q<T: Element>(p: &AttentionBwdParams<T>, tid: u32, q_row0: usize, i0: usize, seq_q: usize) {
    let d = p.d as usize;
    let mut e = tid as usize;
    while e < BQ as usize * d {
        let (r, c) = (e / d, e % d);
        let (qv, dov) = if i0 + r < seq_q {
            let at = (q_row0 + i0 + r) * d + c;
            (p.q.load(at).to_f32(), p.d_o.load(at).to_f32())
        } else {
            (0.0, 0.0)
        };
        Q_S.store(r as u32 * MAX_D + c as u32, qv);
        DO_S.store(r as u32 * MAX_D + c as u32, dov);
        e += THREADS as usize;
    }
    if tid < BQ {
        let i = i0 + tid as usize;
        let (lse2, dd) = if i < seq_q {
            let lse = p.lse.load(q_row0 + i);
            // A row that sees no key has lse = -inf: +inf here makes every P of it 0.
            let lse2 = if lse == f32::NEG_INFINITY { f32::INFINITY } else { lse * core::f32::consts::LOG2_E };
            (lse2, p.scratch.load(q_row0 + i))
        } else {
            (f32::INFINITY, 0.0)
        };
        LSE_S.store(tid, lse2);
        D_S.store(tid, dd);
    }
}

/// Phase 1: lane `l` computes `P` and `dS` of key `l` against rows `w + WARPS r` into `P_S` and
/// `DS_S`; `visible(row, key)` (tile-relative) says which pairs the mask keeps.
/// `BUG_NO_D`: a deliberately wrong `dS = P dP` (the `D_i` term left out).
#[inline(always)]
#[track_caller]
fn phase1<const BUG_NO_D: bool>(warp: u32, lane: u32, d: usize, scale_log2: f32, visible: impl Fn(u32, u32) -> bool) {
    let mut s = [0.0f32; RPT];
    let mut dp = [0.0f32; RPT];
    for c in 0..d as u32 {
        let (kc, vc) = (K_S.load(lane * KVS + c), V_S.load(lane * KVS + c));
        for r in 0..RPT {
            let i = warp + WARPS * r as u32;
            s[r] = math::fma(Q_S.load(i * MAX_D + c), kc, s[r]);
            dp[r] = math::fma(DO_S.load(i * MAX_D + c), vc, dp[r]);
        }
    }
    for r in 0..RPT {
        let i = warp + WARPS * r as u32;
        let (pv, ds) = if visible(i, lane) {
            let pv = math::exp2_approx(math::fma(s[r], scale_log2, -LSE_S.load(i)));
            (pv, if BUG_NO_D { pv * dp[r] } else { pv * (dp[r] - D_S.load(i)) })
        } else {
            (0.0, 0.0)
        };
        P_S.store(i * PS + lane, pv);
        DS_S.store(i * PS + lane, ds);
    }
}

/// Phase 3: `acc[r][t] += sum_j dS[w + WARPS r][j] K[j][l + 32 t]` over the tile's keys.
#[inline(always)]
#[track_caller]
fn phase3(warp: u32, lane: u32, d: usize, acc: &mut [[f32; DPL]; RPT]) {
    for j in 0..BK {
        let mut kc = [0.0f32; DPL];
        for (t, kv) in kc.iter_mut().enumerate() {
            let c = lane + WARP_SIZE * t as u32;
            if (c as usize) < d {
                *kv = K_S.load(j * KVS + c);
            }
        }
        for (r, row) in acc.iter_mut().enumerate() {
            let ds = DS_S.load((warp + WARPS * r as u32) * PS + j);
            for (t, a) in row.iter_mut().enumerate() {
                *a = math::fma(ds, kc[t], *a);
            }
        }
    }
}

/// Keys query `i` sees: all, or up to the bottom-right-aligned diagonal.
#[inline(always)]
fn limit(causal: bool, i: usize, seq_q: usize, seq_k: usize) -> usize {
    if causal { (i + seq_k + 1).saturating_sub(seq_q).min(seq_k) } else { seq_k }
}

/// Sequence `b` of a variable-length batch: its first query token, query count, first key
/// token and key count, from `cu_seqlens_q/k`.
#[inline(always)]
#[track_caller]
pub(super) fn varlen_seq<T: Copy>(p: &AttentionBwdParams<T>, b: usize) -> (usize, usize, usize, usize) {
    let (qs, qe) = (p.cu_seqlens_q.load(b) as usize, p.cu_seqlens_q.load(b + 1) as usize);
    let (ks, ke) = (p.cu_seqlens_k.load(b) as usize, p.cu_seqlens_k.load(b + 1) as usize);
    (qs, qe - qs, ks, ke - ks)
}

/// dK and dV of one key tile (and, with `atomic_dq`, its dQ contributions). `VARLEN`: over
/// sequence `b` of a variable-length batch (module docs). `BUG_TOP_LEFT`: a deliberately wrong
/// varlen mask aligned top-left (key `j` visible to query `i` when `j <= i`) instead of
/// bottom-right per sequence, which the tests must reject.
#[inline(always)]
pub fn dkdv<T: Element, const BUG_NO_D: bool, const VARLEN: bool, const BUG_TOP_LEFT: bool>(p: AttentionBwdParams<T>) {
    let tid = thread_idx_x();
    let (warp, lane) = (tid / WARP_SIZE, tid % WARP_SIZE);
    let (k0, kvh, b) = (block_idx_x() as usize * BK as usize, block_idx_y() as usize, block_idx_z() as usize);
    let (heads, kv_heads) = (p.heads as usize, p.kv_heads as usize);
    // Dense: every (batch, head) has seq_q / seq_k rows; varlen: sequence b's own, at its offsets.
    let (qs, seq_q, ks, seq_k) = if VARLEN { varlen_seq(&p, b) } else { (0, p.seq_q as usize, 0, p.seq_k as usize) };
    if VARLEN && k0 >= seq_k {
        return; // the grid covers the longest sequence; the whole block leaves before a barrier
    }
    let d = p.d as usize;
    let group = heads / kv_heads;
    let causal = p.causal != 0;
    let kv_row0 = if VARLEN { kvh * p.seq_k as usize + ks } else { (b * kv_heads + kvh) * seq_k };
    stage_kv(&p, tid, kv_row0, k0, seq_k);
    // The mask's query count: the sequence's (bottom-right), or the bug's top-left alignment.
    let mask_q = if BUG_TOP_LEFT { seq_k } else { seq_q };
    // The first query that sees key k0 (every earlier one sees none of the tile).
    let i_first = if causal { (k0 + mask_q).saturating_sub(seq_k) } else { 0 };
    let dq_at = p.dq_accum_start(VARLEN);
    let mut dk = [[0.0f32; DPL]; KPT];
    let mut dv = [[0.0f32; DPL]; KPT];
    for h in kvh * group..(kvh + 1) * group {
        let q_row0 = if VARLEN { h * p.seq_q as usize + qs } else { (b * heads + h) * seq_q };
        let mut i0 = i_first;
        while i0 < seq_q {
            // The previous tile's readers are done (and, the first time, K and V are in).
            sync_threads();
            stage_q(&p, tid, q_row0, i0, seq_q);
            sync_threads();
            phase1::<BUG_NO_D>(warp, lane, d, p.scale_log2, |i, j| {
                let (qi, kj) = (i0 + i as usize, k0 + j as usize);
                qi < seq_q && kj < limit(causal, qi, mask_q, seq_k)
            });
            sync_threads();
            // Phase 2: dV_j += P_ij dO_i, dK_j += dS_ij q_i over the tile's rows.
            for i in 0..BQ {
                let mut dov = [0.0f32; DPL];
                let mut qv = [0.0f32; DPL];
                unroll16!(t < DPL => {
                    let c = lane + WARP_SIZE * t as u32;
                    if (c as usize) < d {
                        dov[t] = DO_S.load(i * MAX_D + c);
                        qv[t] = Q_S.load(i * MAX_D + c);
                    }
                });
                // Constant indices only (unrolled), so dK and dV stay in registers.
                unroll16!(kr < KPT => {
                    let j = warp + WARPS * kr as u32;
                    let (pv, ds) = (P_S.load(i * PS + j), DS_S.load(i * PS + j));
                    unroll16!(t < DPL => {
                        dv[kr][t] = math::fma(pv, dov[t], dv[kr][t]);
                        dk[kr][t] = math::fma(ds, qv[t], dk[kr][t]);
                    });
                });
            }
            if p.atomic_dq != 0 {
                let mut acc = [[0.0f32; DPL]; RPT];
                phase3(warp, lane, d, &mut acc);
                for (r, row) in acc.iter().enumerate() {
                    let qi = i0 + (warp + WARPS * r as u32) as usize;
                    if qi < seq_q {
                        for (t, &a) in row.iter().enumerate() {
                            let c = (lane + WARP_SIZE * t as u32) as usize;
                            if c < d {
                                p.scratch.atomic_add(dq_at + (q_row0 + qi) * d + c, a * p.scale);
                            }
                        }
                    }
                }
            }
            i0 += BQ as usize;
        }
    }
    unroll16!(kr < KPT => {
        let kj = k0 + (warp + WARPS * kr as u32) as usize;
        if kj < seq_k {
            unroll16!(t < DPL => {
                let c = (lane + WARP_SIZE * t as u32) as usize;
                if c < d {
                    let at = (kv_row0 + kj) * d + c;
                    p.dk.store(at, T::from_f32(dk[kr][t] * p.scale));
                    p.dv.store(at, T::from_f32(dv[kr][t]));
                }
            });
        }
    });
}

/// Deterministic dQ of one query tile: loops over the key tiles its rows see. `VARLEN` and
/// `BUG_TOP_LEFT` as in [`dkdv`].
#[inline(always)]
pub fn dq<T: Element, const BUG_NO_D: bool, const VARLEN: bool, const BUG_TOP_LEFT: bool>(p: AttentionBwdParams<T>) {
    let tid = thread_idx_x();
    let (warp, lane) = (tid / WARP_SIZE, tid % WARP_SIZE);
    let (i0, h, b) = (block_idx_x() as usize * BQ as usize, block_idx_y() as usize, block_idx_z() as usize);
    let (qs, seq_q, ks, seq_k) = if VARLEN { varlen_seq(&p, b) } else { (0, p.seq_q as usize, 0, p.seq_k as usize) };
    if VARLEN && i0 >= seq_q {
        return; // the grid covers the longest sequence; the whole block leaves before a barrier
    }
    let d = p.d as usize;
    let kvh = h / (p.heads / p.kv_heads) as usize;
    let causal = p.causal != 0;
    let q_row0 = if VARLEN { h * p.seq_q as usize + qs } else { (b * p.heads as usize + h) * seq_q };
    let kv_row0 = if VARLEN { kvh * p.seq_k as usize + ks } else { (b * p.kv_heads as usize + kvh) * seq_k };
    let mask_q = if BUG_TOP_LEFT { seq_k } else { seq_q };
    stage_q(&p, tid, q_row0, i0, seq_q);
    // The block's last row sees the most keys (uniform across the block).
    let keys = limit(causal, (i0 + BQ as usize).min(seq_q) - 1, mask_q, seq_k);
    let mut acc = [[0.0f32; DPL]; RPT];
    let mut k0 = 0;
    while k0 < keys {
        sync_threads();
        stage_kv(&p, tid, kv_row0, k0, seq_k);
        sync_threads();
        phase1::<BUG_NO_D>(warp, lane, d, p.scale_log2, |i, j| {
            let (qi, kj) = (i0 + i as usize, k0 + j as usize);
            qi < seq_q && kj < limit(causal, qi, mask_q, seq_k)
        });
        sync_threads();
        phase3(warp, lane, d, &mut acc);
        k0 += BK as usize;
    }
    for (r, row) in acc.iter().enumerate() {
        let qi = i0 + (warp + WARPS * r as u32) as usize;
        if qi < seq_q {
            for (t, &a) in row.iter().enumerate() {
                let c = (lane + WARP_SIZE * t as u32) as usize;
                if c < d {
                    p.dq.store((q_row0 + qi) * d + c, T::from_f32(a * p.scale));
                }
            }
        }
    }
}

/// The atomic path's f32 dQ accumulator (after `D` in scratch) to `T`.
#[inline(always)]
pub fn dq_convert<T: Element>(p: AttentionBwdParams<T>) {
    let i = index_1d();
    let varlen = p.is_varlen();
    if i < p.rows(varlen) * p.d as usize {
        p.dq.store(i, T::from_f32(p.scratch.load(p.dq_accum_start(varlen) + i)));
    }
}
