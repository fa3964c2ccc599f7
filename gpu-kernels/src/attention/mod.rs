//! Attention forward: `O = softmax(Q K^T * scale + mask) V` per (batch, head), never
//! materializing the score matrix, and the log-sum-exp of each score row for the backward.
//!
//! Layout: `Q, O: [batch, heads, seq_q, d]`, `K, V: [batch, kv_heads, seq_k, d]`, contiguous;
//! `lse: [batch, heads, seq_q]` (f32, natural log). Grouped-query attention: head `h` reads kv
//! head `h / (heads / kv_heads)`. Causal masking is aligned bottom-right, as FlashAttention-2
//! does for `seq_q != seq_k` (prefill appended to a cache): query `i` sees keys
//! `j <= i + seq_k - seq_q`. A query that sees no key gets `O = 0` and `lse = -inf`.
//!
//! The ladder ([`VERSIONS`]; tests, `verify` and the bench iterate it, and the launcher runs
//! the highest version that supports the shape):
//!
//! | version | adds |
//! |---|---|
//! | [`v01_simt`] | online softmax on the CUDA cores (f32 math on bf16/f16 inputs), a warp per query, K/V tiles staged in shared memory; head dims 32, 64, 96, 128 |
//! | [`v02_mma`] | FlashAttention-2 on `mma.sync` m16n8k16: 16 query rows per warp, Q fragments in registers, K/V by cp.async double-buffered, online softmax on the accumulator fragments, P re-packed in registers, V by ldmatrix `.trans`; head dims 64 and 128 |
//! | [`v03_wgmma`] | sm_90a: TMA (rank-3 maps: no tile reads across heads) into a 2-stage mbarrier ring, a producer warpgroup and two consumer warpgroups of 64 query rows, `S = Q K^T` by wgmma from shared memory, `O += P V` by wgmma with P from registers, `setmaxnreg`; head dims 64, 128 and 256, dense and variable-length batches |
//! | [`v04_pingpong`] | v03 with FlashAttention-3's ping-pong: the two consumer warpgroups take turns at the tensor cores (two named barriers), each issuing `S_j` and `P_{j-1} V_{j-1}` together and running the softmax of `S_j` while that `P V` runs; head dims 64 and 128, dense and variable-length |
//!
//! The backward ([`BACKWARD_VERSIONS`]): dQ, dK, dV from Q, K, V, O, dO and the forward's `lse`.
//!
//! | version | adds |
//! |---|---|
//! | [`bwd_v01_simt`] | FlashAttention-2's backward on the CUDA cores: `D = rowsum(dO * O)` first, then a block per key tile recomputing P and keeping dK, dV in registers over all queries (and the query heads of its kv head); dQ by f32 atomics or, deterministic, a second pass over query tiles; head dims 32, 64, 96, 128 |
//! | [`bwd_v02_mma`] | the same on `mma.sync` m16n8k16: per key tile 4 warps x 16 keys compute `S^T = K Q^T` and `dP^T = V dO^T`, re-pack `P^T` and `dS^T` in registers as the A fragments of `dV += P^T dO` and `dK += dS^T Q` (Q, dO by cp.async double-buffered, ldmatrix `.trans`), atomic dQ `= dS K` through `dS^T` in shared memory; the deterministic dQ pass is the forward's shape on mma; head dims 64 (64-query tiles) and 128 (32-query tiles, the register budget); 16-byte aligned views |
//! | [`bwd_v03_wgmma`] | sm_90a: FlashAttention-3's dK/dV pass, 128 keys per block: TMA loads K and V once and streams Q and dO through a 2-stage mbarrier ring, two consumer warpgroups of 64 keys compute `S^T`, `dP^T` by wgmma from shared memory and `dV`, `dK` by wgmma with `P^T`, `dS^T` from registers, dQ by wgmma from `dS^T` in shared memory and f32 atomics; the deterministic dQ pass is v02's; head dims 64 and 128; varlen through per-sequence tensor maps |
//!
//! The backward over a variable-length batch ([`BackwardKernel::varlen`], the forward's
//! `cu_seqlens_q/k` layout) has its own `dkdv` and `dq` entry points (`VARLEN`), so the dense
//! kernels keep their registers; its row passes (`preprocess`, `dq_convert`) are the dense
//! ones, which run over `[heads, total_q]` rows when `cu_seqlens_q` is given
//! ([`AttentionBwdParams::is_varlen`]).

/// Unrolls `body` for `i = 0 .. n` (`n <= 16`, a constant), so register arrays are indexed by
/// constants and stay in registers.
macro_rules! unroll16 {
    ($i:ident < $n:expr => $body:block) => {{
        const { assert!($n <= 16, "unroll16 unrolls at most 16 iterations") };
        { let $i: usize = 0; if $i < $n $body }
        { let $i: usize = 1; if $i < $n $body }
        { let $i: usize = 2; if $i < $n $body }
        { let $i: usize = 3; if $i < $n $body }
        { let $i: usize = 4; if $i < $n $body }
        { let $i: usize = 5; if $i < $n $body }
        { let $i: usize = 6; if $i < $n $body }
        { let $i: usize = 7; if $i < $n $body }
        { let $i: usize = 8; if $i < $n $body }
        { let $i: usize = 9; if $i < $n $body }
        { let $i: usize = 10; if $i < $n $body }
        { let $i: usize = 11; if $i < $n $body }
        { let $i: usize = 12; if $i < $n $body }
        { let $i: usize = 13; if $i < $n $body }
        { let $i: usize = 14; if $i < $n $body }
        { let $i: usize = 15; if $i < $n $body }
    }};
}

/// `$closure` marked `#[inline(always)]` in the PTX build (an attribute on an expression,
/// unstable: the host build, on stable Rust, gets the closure as it is). For a closure with
/// more than one call site whose registers must stay registers: LLVM's inliner may keep a
/// large one out of line, and its `&mut` arguments then live in local memory.
macro_rules! always_inline {
    ($closure:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        let f = #[inline(always)]
        $closure;
        #[cfg(not(target_arch = "nvptx64"))]
        let f = $closure;
        f
    }};
}

pub mod bwd_v01_simt;
pub mod bwd_v02_mma;
pub mod bwd_v03_wgmma;
pub mod tile;
pub mod v01_simt;
pub mod v02_mma;
pub mod v03_wgmma;
pub mod v04_pingpong;

/// The kernel parameters, shared by host and device.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AttentionParams<T> {
    pub batch: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub seq_q: u32,
    pub seq_k: u32,
    /// Head dimension (one the version's kernel supports: [`AttentionKernel::head_dims`]).
    pub d: u32,
    /// Nonzero: causal mask, aligned bottom-right.
    pub causal: u32,
    /// `scale * log2(e)`: scores are kept in base-2 units so the exponentials are `ex2`.
    pub scale_log2: f32,
    pub q: crate::device::Global<T>,
    pub k: crate::device::Global<T>,
    pub v: crate::device::Global<T>,
    pub o: crate::device::GlobalMut<T>,
    pub lse: crate::device::GlobalMut<f32>,
    /// Variable-length batch (versions with [`AttentionKernel::varlen`]; empty: dense).
    /// `batch + 1` cumulative token offsets of the queries and of the keys: sequence `b` owns
    /// query tokens `cu_seqlens_q[b] .. cu_seqlens_q[b + 1]`. Layout then `Q, O: [heads,
    /// total_q, d]`, `K, V: [kv_heads, total_k, d]`, `lse: [heads, total_q]`, with `seq_q` and
    /// `seq_k` holding `total_q` and `total_k`; the mask is aligned per sequence.
    pub cu_seqlens_q: crate::device::Global<i32>,
    pub cu_seqlens_k: crate::device::Global<i32>,
    /// TMA versions ([`AttentionKernel::tma`]): the address of the Q, K and V tensor maps,
    /// [`crate::device::hopper::TENSOR_MAP_BYTES`] apart; 0 for the others.
    pub maps: u64,
}

/// The backward's parameters, shared by host and device: the forward's shape and inputs, its
/// output `o` and `lse`, the output gradient `d_o`, the three gradients, and f32 scratch (`D`,
/// then the atomic path's dQ accumulator at [`AttentionBwdParams::dq_accum_start`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AttentionBwdParams<T> {
    pub batch: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub seq_q: u32,
    pub seq_k: u32,
    pub d: u32,
    pub causal: u32,
    /// Nonzero: dQ by f32 atomics into scratch (then `dq_convert`); zero: the `dq` kernel.
    pub atomic_dq: u32,
    pub scale: f32,
    /// `scale * log2(e)`.
    pub scale_log2: f32,
    pub q: crate::device::Global<T>,
    pub k: crate::device::Global<T>,
    pub v: crate::device::Global<T>,
    pub o: crate::device::Global<T>,
    pub d_o: crate::device::Global<T>,
    pub lse: crate::device::Global<f32>,
    pub dq: crate::device::GlobalMut<T>,
    pub dk: crate::device::GlobalMut<T>,
    pub dv: crate::device::GlobalMut<T>,
    pub scratch: crate::device::GlobalMut<f32>,
    /// Variable-length batch (the `varlen` kernels; empty: dense), as in [`AttentionParams`]:
    /// `batch + 1` cumulative offsets each, `seq_q` / `seq_k` the totals, layout `[heads,
    /// total, d]`, `lse` and scratch over `heads total_q` rows.
    pub cu_seqlens_q: crate::device::Global<i32>,
    pub cu_seqlens_k: crate::device::Global<i32>,
    /// TMA versions ([`BackwardKernel::tma`]): the address of the Q, K, V and dO tensor maps,
    /// [`crate::device::hopper::TENSOR_MAP_BYTES`] apart (varlen: those four per sequence,
    /// each over the sequence's own tokens); 0 for the others.
    pub maps: u64,
}

impl<T> AttentionBwdParams<T> {
    /// A variable-length batch: `cu_seqlens_q` is given. The `dkdv` and `dq` kernels know it
    /// at compile time (their `VARLEN` entry points); the row passes, shared by both, read it
    /// here.
    #[inline(always)]
    pub const fn is_varlen(&self) -> bool {
        !self.cu_seqlens_q.is_empty()
    }

    /// The rows of `lse`, `D` and dQ ([`backward_rows`] of this shape).
    #[inline(always)]
    pub const fn rows(&self, varlen: bool) -> usize {
        backward_rows(self.batch as usize, self.heads as usize, self.seq_q as usize, varlen)
    }

    /// The word of `scratch` where the atomic path's f32 dQ accumulator starts:
    /// [`dq_accum_offset`] of [`Self::rows`].
    #[inline(always)]
    pub const fn dq_accum_start(&self, varlen: bool) -> usize {
        dq_accum_offset(self.rows(varlen))
    }
}

/// The rows of the backward's `lse`, `D` and dQ: `batch heads seq_q` for a dense batch,
/// `heads total_q` for a variable-length one (`seq_q` is then the total). The host sizes the
/// scratch and the row passes' grids with it; the kernels read it through
/// [`AttentionBwdParams::rows`].
pub const fn backward_rows(batch: usize, heads: usize, seq_q: usize, varlen: bool) -> usize {
    let planes = if varlen { heads } else { batch * heads };
    planes * seq_q
}

/// Where the atomic path's f32 dQ accumulator starts in the backward's scratch, in words: after
/// the `rows` words of `D`, rounded up to a multiple of 4 so every accumulator word keeps the
/// alignment of its index (v03 adds pairs of neighbouring columns with one 8-byte reduction,
/// which needs an even word). The host's scratch size and every kernel (through
/// [`AttentionBwdParams::dq_accum_start`]) read the offset from here.
pub const fn dq_accum_offset(rows: usize) -> usize {
    rows.next_multiple_of(4)
}

type F16 = half::f16;
type Bf16 = half::bf16;

crate::kernels! {
    ATTENTION_V01_BF16 = attention_v01_simt_bf16(AttentionParams<Bf16>) => v01_simt::run::<Bf16, false>;
    ATTENTION_V01_F16 = attention_v01_simt_f16(AttentionParams<F16>) => v01_simt::run::<F16, false>;
    /// v01 over a variable-length batch (`cu_seqlens_q/k`), head dims 32 to 128.
    ATTENTION_V01_VARLEN_BF16 = attention_v01_simt_varlen_bf16(AttentionParams<Bf16>) => v01_simt::run::<Bf16, true>;
    ATTENTION_V01_VARLEN_F16 = attention_v01_simt_varlen_f16(AttentionParams<F16>) => v01_simt::run::<F16, true>;
    /// v02, head dim 64.
    ATTENTION_V02_D64_BF16 = attention_v02_mma_d64_bf16(AttentionParams<Bf16>) => v02_mma::run::<Bf16, 64, 4, 8, false, false>;
    ATTENTION_V02_D64_F16 = attention_v02_mma_d64_f16(AttentionParams<F16>) => v02_mma::run::<F16, 64, 4, 8, false, false>;
    /// v02, head dim 128.
    ATTENTION_V02_D128_BF16 = attention_v02_mma_d128_bf16(AttentionParams<Bf16>) => v02_mma::run::<Bf16, 128, 8, 16, false, false>;
    ATTENTION_V02_D128_F16 = attention_v02_mma_d128_f16(AttentionParams<F16>) => v02_mma::run::<F16, 128, 8, 16, false, false>;
    /// v02 over a variable-length batch (`cu_seqlens_q/k`), head dims 64 and 128.
    ATTENTION_V02_VARLEN_D64_BF16 = attention_v02_mma_varlen_d64_bf16(AttentionParams<Bf16>) => v02_mma::run::<Bf16, 64, 4, 8, false, true>;
    ATTENTION_V02_VARLEN_D64_F16 = attention_v02_mma_varlen_d64_f16(AttentionParams<F16>) => v02_mma::run::<F16, 64, 4, 8, false, true>;
    ATTENTION_V02_VARLEN_D128_BF16 = attention_v02_mma_varlen_d128_bf16(AttentionParams<Bf16>) => v02_mma::run::<Bf16, 128, 8, 16, false, true>;
    ATTENTION_V02_VARLEN_D128_F16 = attention_v02_mma_varlen_d128_f16(AttentionParams<F16>) => v02_mma::run::<F16, 128, 8, 16, false, true>;
    /// v03 (sm_90a: TMA, wgmma, warp specialization), head dims 64, 128 and 256.
    ATTENTION_V03_D64_BF16 = attention_v03_wgmma_d64_bf16(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D64, { v03_wgmma::NO_BUG }, false, 16, false>;
    ATTENTION_V03_D64_F16 = attention_v03_wgmma_d64_f16(AttentionParams<F16>) => v03_wgmma::run::<F16, v03_wgmma::D64, { v03_wgmma::NO_BUG }, false, 16, false>;
    ATTENTION_V03_D128_BF16 = attention_v03_wgmma_d128_bf16(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D128, { v03_wgmma::NO_BUG }, false, 16, false>;
    ATTENTION_V03_D128_F16 = attention_v03_wgmma_d128_f16(AttentionParams<F16>) => v03_wgmma::run::<F16, v03_wgmma::D128, { v03_wgmma::NO_BUG }, false, 16, false>;
    ATTENTION_V03_D256_BF16 = attention_v03_wgmma_d256_bf16(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D256, { v03_wgmma::NO_BUG }, false, 8, false>;
    ATTENTION_V03_D256_F16 = attention_v03_wgmma_d256_f16(AttentionParams<F16>) => v03_wgmma::run::<F16, v03_wgmma::D256, { v03_wgmma::NO_BUG }, false, 8, false>;
    /// v03 over a variable-length batch (`cu_seqlens_q/k`), head dims 64, 128 and 256.
    ATTENTION_V03_VARLEN_D64_BF16 = attention_v03_wgmma_varlen_d64_bf16(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D64, { v03_wgmma::NO_BUG }, true, 16, false>;
    ATTENTION_V03_VARLEN_D64_F16 = attention_v03_wgmma_varlen_d64_f16(AttentionParams<F16>) => v03_wgmma::run::<F16, v03_wgmma::D64, { v03_wgmma::NO_BUG }, true, 16, false>;
    ATTENTION_V03_VARLEN_D128_BF16 = attention_v03_wgmma_varlen_d128_bf16(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D128, { v03_wgmma::NO_BUG }, true, 16, false>;
    ATTENTION_V03_VARLEN_D128_F16 = attention_v03_wgmma_varlen_d128_f16(AttentionParams<F16>) => v03_wgmma::run::<F16, v03_wgmma::D128, { v03_wgmma::NO_BUG }, true, 16, false>;
    ATTENTION_V03_VARLEN_D256_BF16 = attention_v03_wgmma_varlen_d256_bf16(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D256, { v03_wgmma::NO_BUG }, true, 8, false>;
    ATTENTION_V03_VARLEN_D256_F16 = attention_v03_wgmma_varlen_d256_f16(AttentionParams<F16>) => v03_wgmma::run::<F16, v03_wgmma::D256, { v03_wgmma::NO_BUG }, true, 8, false>;
    /// v04 (v03 with the ping-pong of two consumer warpgroups), head dims 64 and 128.
    ATTENTION_V04_D64_BF16 = attention_v04_pingpong_d64_bf16(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D64, { v03_wgmma::NO_BUG }, false, 16, true>;
    ATTENTION_V04_D64_F16 = attention_v04_pingpong_d64_f16(AttentionParams<F16>) => v03_wgmma::run::<F16, v03_wgmma::D64, { v03_wgmma::NO_BUG }, false, 16, true>;
    ATTENTION_V04_D128_BF16 = attention_v04_pingpong_d128_bf16(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D128, { v03_wgmma::NO_BUG }, false, 16, true>;
    ATTENTION_V04_D128_F16 = attention_v04_pingpong_d128_f16(AttentionParams<F16>) => v03_wgmma::run::<F16, v03_wgmma::D128, { v03_wgmma::NO_BUG }, false, 16, true>;
    /// v04 over a variable-length batch (`cu_seqlens_q/k`), head dims 64 and 128.
    ATTENTION_V04_VARLEN_D64_BF16 = attention_v04_pingpong_varlen_d64_bf16(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D64, { v03_wgmma::NO_BUG }, true, 16, true>;
    ATTENTION_V04_VARLEN_D64_F16 = attention_v04_pingpong_varlen_d64_f16(AttentionParams<F16>) => v03_wgmma::run::<F16, v03_wgmma::D64, { v03_wgmma::NO_BUG }, true, 16, true>;
    ATTENTION_V04_VARLEN_D128_BF16 = attention_v04_pingpong_varlen_d128_bf16(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D128, { v03_wgmma::NO_BUG }, true, 16, true>;
    ATTENTION_V04_VARLEN_D128_F16 = attention_v04_pingpong_varlen_d128_f16(AttentionParams<F16>) => v03_wgmma::run::<F16, v03_wgmma::D128, { v03_wgmma::NO_BUG }, true, 16, true>;
    /// Deliberately wrong (tests only): v03 head dim 64 with P's register-A fragment mis-laid.
    ATTENTION_BUG_V03_SWAPPED_P = attention_bug_v03_swapped_p(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D64, { v03_wgmma::BUG_SWAPPED_P }, false, 16, false>;
    /// Deliberately wrong (tests only): v03 varlen head dim 64 leaving the next sequence's V
    /// rows in the last tile.
    ATTENTION_BUG_V03_TAIL_NOT_ZEROED = attention_bug_v03_tail_not_zeroed(AttentionParams<Bf16>) => v03_wgmma::run::<Bf16, v03_wgmma::D64, { v03_wgmma::BUG_TAIL_NOT_ZEROED }, true, 16, false>;
    /// Deliberately wrong (tests only): v02 head dim 64 with P's A registers 1 and 2 swapped.
    ATTENTION_BUG_V02_SWAPPED_P = attention_bug_v02_swapped_p(AttentionParams<Bf16>) => v02_mma::run::<Bf16, 64, 4, 8, true, false>;
    /// Backward: `D = rowsum(dO * O)` (and the atomic path's zeroed dQ accumulator).
    ATTENTION_BWD_PRE_BF16 = attention_bwd_preprocess_bf16(AttentionBwdParams<Bf16>) => bwd_v01_simt::preprocess::<Bf16>;
    ATTENTION_BWD_PRE_F16 = attention_bwd_preprocess_f16(AttentionBwdParams<F16>) => bwd_v01_simt::preprocess::<F16>;
    /// Backward: the atomic path's f32 dQ to the input type.
    ATTENTION_BWD_DQ_CONVERT_BF16 = attention_bwd_dq_convert_bf16(AttentionBwdParams<Bf16>) => bwd_v01_simt::dq_convert::<Bf16>;
    ATTENTION_BWD_DQ_CONVERT_F16 = attention_bwd_dq_convert_f16(AttentionBwdParams<F16>) => bwd_v01_simt::dq_convert::<F16>;
    /// Backward v01: dK and dV per key tile (and atomic dQ), and the deterministic dQ pass.
    ATTENTION_BWD_V01_DKDV_BF16 = attention_bwd_v01_dkdv_bf16(AttentionBwdParams<Bf16>) => bwd_v01_simt::dkdv::<Bf16, false, false, false>;
    ATTENTION_BWD_V01_DKDV_F16 = attention_bwd_v01_dkdv_f16(AttentionBwdParams<F16>) => bwd_v01_simt::dkdv::<F16, false, false, false>;
    ATTENTION_BWD_V01_DQ_BF16 = attention_bwd_v01_dq_bf16(AttentionBwdParams<Bf16>) => bwd_v01_simt::dq::<Bf16, false, false, false>;
    ATTENTION_BWD_V01_DQ_F16 = attention_bwd_v01_dq_f16(AttentionBwdParams<F16>) => bwd_v01_simt::dq::<F16, false, false, false>;
    /// Backward v01 over a variable-length batch (`cu_seqlens_q/k`).
    ATTENTION_BWD_V01_VARLEN_DKDV_BF16 = attention_bwd_v01_varlen_dkdv_bf16(AttentionBwdParams<Bf16>) => bwd_v01_simt::dkdv::<Bf16, false, true, false>;
    ATTENTION_BWD_V01_VARLEN_DKDV_F16 = attention_bwd_v01_varlen_dkdv_f16(AttentionBwdParams<F16>) => bwd_v01_simt::dkdv::<F16, false, true, false>;
    ATTENTION_BWD_V01_VARLEN_DQ_BF16 = attention_bwd_v01_varlen_dq_bf16(AttentionBwdParams<Bf16>) => bwd_v01_simt::dq::<Bf16, false, true, false>;
    ATTENTION_BWD_V01_VARLEN_DQ_F16 = attention_bwd_v01_varlen_dq_f16(AttentionBwdParams<F16>) => bwd_v01_simt::dq::<F16, false, true, false>;
    /// Deliberately wrong (tests only): backward v01 with `dS = P dP` (the `D_i` term left out).
    ATTENTION_BUG_BWD_NO_D_DKDV = attention_bug_bwd_no_d_dkdv(AttentionBwdParams<Bf16>) => bwd_v01_simt::dkdv::<Bf16, true, false, false>;
    ATTENTION_BUG_BWD_NO_D_DQ = attention_bug_bwd_no_d_dq(AttentionBwdParams<Bf16>) => bwd_v01_simt::dq::<Bf16, true, false, false>;
    /// Deliberately wrong (tests only): backward v01 varlen with the causal mask aligned
    /// top-left in each sequence (`j <= i`) instead of bottom-right.
    ATTENTION_BUG_BWD_VARLEN_TOP_LEFT_DKDV = attention_bug_bwd_varlen_top_left_dkdv(AttentionBwdParams<Bf16>) => bwd_v01_simt::dkdv::<Bf16, false, true, true>;
    ATTENTION_BUG_BWD_VARLEN_TOP_LEFT_DQ = attention_bug_bwd_varlen_top_left_dq(AttentionBwdParams<Bf16>) => bwd_v01_simt::dq::<Bf16, false, true, true>;
    /// Backward v02 (tensor cores), head dim 64: dK and dV per key tile (and atomic dQ), and
    /// the deterministic dQ pass.
    ATTENTION_BWD_V02_DKDV_D64_BF16 = attention_bwd_v02_mma_dkdv_d64_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dkdv::<Bf16, 64, 4, 8, 64, 8, false, false>;
    ATTENTION_BWD_V02_DKDV_D64_F16 = attention_bwd_v02_mma_dkdv_d64_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dkdv::<F16, 64, 4, 8, 64, 8, false, false>;
    ATTENTION_BWD_V02_DQ_D64_BF16 = attention_bwd_v02_mma_dq_d64_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dq::<Bf16, 64, 4, 8, 8, false>;
    ATTENTION_BWD_V02_DQ_D64_F16 = attention_bwd_v02_mma_dq_d64_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dq::<F16, 64, 4, 8, 8, false>;
    /// Backward v02, head dim 128 (32-query tiles in dK/dV: the register budget).
    ATTENTION_BWD_V02_DKDV_D128_BF16 = attention_bwd_v02_mma_dkdv_d128_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dkdv::<Bf16, 128, 8, 16, 32, 4, false, false>;
    ATTENTION_BWD_V02_DKDV_D128_F16 = attention_bwd_v02_mma_dkdv_d128_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dkdv::<F16, 128, 8, 16, 32, 4, false, false>;
    ATTENTION_BWD_V02_DQ_D128_BF16 = attention_bwd_v02_mma_dq_d128_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dq::<Bf16, 128, 8, 16, 8, false>;
    ATTENTION_BWD_V02_DQ_D128_F16 = attention_bwd_v02_mma_dq_d128_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dq::<F16, 128, 8, 16, 8, false>;
    /// Backward v02, head dim 256 (two warps per 16 rows, each owning 128 head dims of the
    /// outputs; 32-key tiles in dQ).
    ATTENTION_BWD_V02_DKDV_D256_BF16 = attention_bwd_v02_mma_dkdv_d256_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dkdv::<Bf16, 256, 16, 16, 32, 4, false, false>;
    ATTENTION_BWD_V02_DKDV_D256_F16 = attention_bwd_v02_mma_dkdv_d256_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dkdv::<F16, 256, 16, 16, 32, 4, false, false>;
    ATTENTION_BWD_V02_DQ_D256_BF16 = attention_bwd_v02_mma_dq_d256_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dq::<Bf16, 256, 16, 16, 4, false>;
    ATTENTION_BWD_V02_DQ_D256_F16 = attention_bwd_v02_mma_dq_d256_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dq::<F16, 256, 16, 16, 4, false>;
    /// Backward v02 over a variable-length batch (`cu_seqlens_q/k`), head dims 64, 128 and 256.
    ATTENTION_BWD_V02_VARLEN_DKDV_D64_BF16 = attention_bwd_v02_mma_varlen_dkdv_d64_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dkdv::<Bf16, 64, 4, 8, 64, 8, false, true>;
    ATTENTION_BWD_V02_VARLEN_DKDV_D64_F16 = attention_bwd_v02_mma_varlen_dkdv_d64_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dkdv::<F16, 64, 4, 8, 64, 8, false, true>;
    ATTENTION_BWD_V02_VARLEN_DQ_D64_BF16 = attention_bwd_v02_mma_varlen_dq_d64_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dq::<Bf16, 64, 4, 8, 8, true>;
    ATTENTION_BWD_V02_VARLEN_DQ_D64_F16 = attention_bwd_v02_mma_varlen_dq_d64_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dq::<F16, 64, 4, 8, 8, true>;
    ATTENTION_BWD_V02_VARLEN_DKDV_D128_BF16 = attention_bwd_v02_mma_varlen_dkdv_d128_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dkdv::<Bf16, 128, 8, 16, 32, 4, false, true>;
    ATTENTION_BWD_V02_VARLEN_DKDV_D128_F16 = attention_bwd_v02_mma_varlen_dkdv_d128_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dkdv::<F16, 128, 8, 16, 32, 4, false, true>;
    ATTENTION_BWD_V02_VARLEN_DQ_D128_BF16 = attention_bwd_v02_mma_varlen_dq_d128_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dq::<Bf16, 128, 8, 16, 8, true>;
    ATTENTION_BWD_V02_VARLEN_DQ_D128_F16 = attention_bwd_v02_mma_varlen_dq_d128_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dq::<F16, 128, 8, 16, 8, true>;
    ATTENTION_BWD_V02_VARLEN_DKDV_D256_BF16 = attention_bwd_v02_mma_varlen_dkdv_d256_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dkdv::<Bf16, 256, 16, 16, 32, 4, false, true>;
    ATTENTION_BWD_V02_VARLEN_DKDV_D256_F16 = attention_bwd_v02_mma_varlen_dkdv_d256_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dkdv::<F16, 256, 16, 16, 32, 4, false, true>;
    ATTENTION_BWD_V02_VARLEN_DQ_D256_BF16 = attention_bwd_v02_mma_varlen_dq_d256_bf16(AttentionBwdParams<Bf16>) => bwd_v02_mma::dq::<Bf16, 256, 16, 16, 4, true>;
    ATTENTION_BWD_V02_VARLEN_DQ_D256_F16 = attention_bwd_v02_mma_varlen_dq_d256_f16(AttentionBwdParams<F16>) => bwd_v02_mma::dq::<F16, 256, 16, 16, 4, true>;
    /// Deliberately wrong (tests only): backward v02 head dim 64 with the `dS^T` A fragment of
    /// `dK += dS^T Q` mis-laid (registers 1 and 2 swapped: keys g + 8 and queries 2t + 8 exchanged).
    ATTENTION_BUG_BWD_V02_SWAPPED_DS = attention_bug_bwd_v02_swapped_ds(AttentionBwdParams<Bf16>) => bwd_v02_mma::dkdv::<Bf16, 64, 4, 8, 64, 8, true, false>;
    /// Backward v03 (sm_90a: TMA, wgmma, warp specialization), head dims 64 and 128.
    ATTENTION_BWD_V03_DKDV_D64_BF16 = attention_bwd_v03_wgmma_dkdv_d64_bf16(AttentionBwdParams<Bf16>) => bwd_v03_wgmma::dkdv::<Bf16, bwd_v03_wgmma::D64, 16, { bwd_v03_wgmma::NO_BUG }, false>;
    ATTENTION_BWD_V03_DKDV_D64_F16 = attention_bwd_v03_wgmma_dkdv_d64_f16(AttentionBwdParams<F16>) => bwd_v03_wgmma::dkdv::<F16, bwd_v03_wgmma::D64, 16, { bwd_v03_wgmma::NO_BUG }, false>;
    ATTENTION_BWD_V03_DKDV_D128_BF16 = attention_bwd_v03_wgmma_dkdv_d128_bf16(AttentionBwdParams<Bf16>) => bwd_v03_wgmma::dkdv::<Bf16, bwd_v03_wgmma::D128, 8, { bwd_v03_wgmma::NO_BUG }, false>;
    ATTENTION_BWD_V03_DKDV_D128_F16 = attention_bwd_v03_wgmma_dkdv_d128_f16(AttentionBwdParams<F16>) => bwd_v03_wgmma::dkdv::<F16, bwd_v03_wgmma::D128, 8, { bwd_v03_wgmma::NO_BUG }, false>;
    /// Backward v03 over a variable-length batch (`cu_seqlens_q/k`), head dims 64 and 128.
    ATTENTION_BWD_V03_VARLEN_DKDV_D64_BF16 = attention_bwd_v03_wgmma_varlen_dkdv_d64_bf16(AttentionBwdParams<Bf16>) => bwd_v03_wgmma::dkdv::<Bf16, bwd_v03_wgmma::D64, 16, { bwd_v03_wgmma::NO_BUG }, true>;
    ATTENTION_BWD_V03_VARLEN_DKDV_D64_F16 = attention_bwd_v03_wgmma_varlen_dkdv_d64_f16(AttentionBwdParams<F16>) => bwd_v03_wgmma::dkdv::<F16, bwd_v03_wgmma::D64, 16, { bwd_v03_wgmma::NO_BUG }, true>;
    ATTENTION_BWD_V03_VARLEN_DKDV_D128_BF16 = attention_bwd_v03_wgmma_varlen_dkdv_d128_bf16(AttentionBwdParams<Bf16>) => bwd_v03_wgmma::dkdv::<Bf16, bwd_v03_wgmma::D128, 8, { bwd_v03_wgmma::NO_BUG }, true>;
    ATTENTION_BWD_V03_VARLEN_DKDV_D128_F16 = attention_bwd_v03_wgmma_varlen_dkdv_d128_f16(AttentionBwdParams<F16>) => bwd_v03_wgmma::dkdv::<F16, bwd_v03_wgmma::D128, 8, { bwd_v03_wgmma::NO_BUG }, true>;
    /// Deliberately wrong (tests only): backward v03 head dim 64 writing `dS^T` without the
    /// swizzle the dQ wgmma reads it with.
    ATTENTION_BUG_BWD_V03_DS_UNSWIZZLED = attention_bug_bwd_v03_ds_unswizzled(AttentionBwdParams<Bf16>) => bwd_v03_wgmma::dkdv::<Bf16, bwd_v03_wgmma::D64, 16, { bwd_v03_wgmma::BUG_DS_UNSWIZZLED }, false>;
}

/// One kernel of a version: the head dims it computes and how the launcher runs it.
#[cfg(not(target_arch = "nvptx64"))]
pub struct AttentionKernel {
    pub head_dims: &'static [u32],
    pub bf16: &'static crate::KernelDef<AttentionParams<Bf16>>,
    pub f16: &'static crate::KernelDef<AttentionParams<F16>>,
    /// Queries per block: grid x is `ceil(seq_q / block_q)`.
    pub block_q: u32,
    pub threads: u32,
    pub shared_bytes: u32,
    /// Q, K, V and O must start 16-byte aligned (cp.async copies, 16-byte stores).
    pub align16: bool,
    /// The same kernel over a variable-length batch (reads `cu_seqlens_q/k`), if built.
    pub varlen: Option<VarlenKernels>,
    /// TMA kernels (sm_90a only): the boxes of the Q, K and V tensor maps the launcher encodes.
    pub tma: Option<AttentionTma>,
}

/// The TMA boxes of a kernel's rank-3 tensor maps (head dims, sequence, batch x heads), each
/// 128-byte swizzled: Q's, and K's and V's.
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy, Debug)]
pub struct AttentionTma {
    pub q_box: [u32; 3],
    pub kv_box: [u32; 3],
}

#[cfg(not(target_arch = "nvptx64"))]
impl AttentionKernel {
    /// The PTX the kernel needs loaded, if not every arch's.
    pub const fn required_arch(&self) -> Option<&'static str> {
        if self.tma.is_some() { Some("sm_90a") } else { None }
    }
    /// Every kernel entry point (both dtypes, dense and varlen).
    pub fn defs(&self) -> impl Iterator<Item = &'static str> + '_ {
        [self.bf16.name, self.f16.name].into_iter().chain(self.varlen.iter().flat_map(|v| [v.bf16.name, v.f16.name]))
    }
}

/// A version's variable-length kernels (same tiling, threads and shared bytes).
#[cfg(not(target_arch = "nvptx64"))]
pub struct VarlenKernels {
    pub bf16: &'static crate::KernelDef<AttentionParams<Bf16>>,
    pub f16: &'static crate::KernelDef<AttentionParams<F16>>,
}

/// One rung of the ladder.
#[cfg(not(target_arch = "nvptx64"))]
pub struct AttentionVersion {
    pub name: &'static str,
    /// Runs on the tensor cores (the bench times CUDA-core versions only on shorter sequences).
    pub tensor_cores: bool,
    pub kernels: &'static [AttentionKernel],
}

#[cfg(not(target_arch = "nvptx64"))]
impl AttentionVersion {
    /// The kernel for `head_dim`, if this version has one.
    pub fn kernel(&self, head_dim: usize) -> Option<&'static AttentionKernel> {
        self.kernels.iter().find(|k| k.head_dims.iter().any(|&d| d as usize == head_dim))
    }
    /// Every head dim this version supports, ascending.
    pub fn head_dims(&self) -> impl Iterator<Item = u32> + '_ {
        self.kernels.iter().flat_map(|k| k.head_dims.iter().copied())
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl core::fmt::Debug for AttentionVersion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

/// The head-dim list of a kernel built for head dim `d` alone (64, 128 or 256).
#[cfg(not(target_arch = "nvptx64"))]
const fn one_head_dim(d: u32) -> &'static [u32] {
    match d {
        64 => &[64],
        128 => &[128],
        256 => &[256],
        _ => panic!("the tensor-core kernels are built for head dims 64, 128 and 256"),
    }
}

#[cfg(not(target_arch = "nvptx64"))]
const fn v02_kernel(
    t: v02_mma::FlashTiling,
    bf16: &'static crate::KernelDef<AttentionParams<Bf16>>,
    f16: &'static crate::KernelDef<AttentionParams<F16>>,
    varlen: Option<VarlenKernels>,
) -> AttentionKernel {
    AttentionKernel {
        head_dims: one_head_dim(t.d),
        bf16,
        f16,
        block_q: t.bm,
        threads: t.threads(),
        shared_bytes: t.shared_bytes(),
        align16: true,
        varlen,
        tma: None,
    }
}

#[cfg(not(target_arch = "nvptx64"))]
const fn v03_kernel(
    t: v03_wgmma::WgmmaFlashTiling,
    bf16: &'static crate::KernelDef<AttentionParams<Bf16>>,
    f16: &'static crate::KernelDef<AttentionParams<F16>>,
    varlen: Option<VarlenKernels>,
) -> AttentionKernel {
    AttentionKernel {
        head_dims: one_head_dim(t.d),
        bf16,
        f16,
        block_q: v03_wgmma::BM,
        threads: t.threads(),
        shared_bytes: t.shared_bytes(),
        align16: true,
        varlen,
        tma: Some(AttentionTma { q_box: t.q_box(), kv_box: t.kv_box() }),
    }
}

/// Every version, in ladder order.
#[cfg(not(target_arch = "nvptx64"))]
pub const VERSIONS: &[AttentionVersion] = &[
    AttentionVersion {
        name: "v01_simt",
        tensor_cores: false,
        kernels: &[AttentionKernel {
            head_dims: &[32, 64, 96, 128],
            bf16: &ATTENTION_V01_BF16,
            f16: &ATTENTION_V01_F16,
            block_q: v01_simt::WARPS,
            threads: v01_simt::THREADS,
            shared_bytes: v01_simt::SHARED_BYTES,
            align16: false,
            varlen: Some(VarlenKernels { bf16: &ATTENTION_V01_VARLEN_BF16, f16: &ATTENTION_V01_VARLEN_F16 }),
            tma: None,
        }],
    },
    AttentionVersion {
        name: "v02_mma",
        tensor_cores: true,
        kernels: &[
            v02_kernel(
                v02_mma::TILING_D64,
                &ATTENTION_V02_D64_BF16,
                &ATTENTION_V02_D64_F16,
                Some(VarlenKernels { bf16: &ATTENTION_V02_VARLEN_D64_BF16, f16: &ATTENTION_V02_VARLEN_D64_F16 }),
            ),
            v02_kernel(
                v02_mma::TILING_D128,
                &ATTENTION_V02_D128_BF16,
                &ATTENTION_V02_D128_F16,
                Some(VarlenKernels { bf16: &ATTENTION_V02_VARLEN_D128_BF16, f16: &ATTENTION_V02_VARLEN_D128_F16 }),
            ),
        ],
    },
    AttentionVersion {
        name: "v03_wgmma",
        tensor_cores: true,
        kernels: &[
            v03_kernel(
                v03_wgmma::TILING_D64,
                &ATTENTION_V03_D64_BF16,
                &ATTENTION_V03_D64_F16,
                Some(VarlenKernels { bf16: &ATTENTION_V03_VARLEN_D64_BF16, f16: &ATTENTION_V03_VARLEN_D64_F16 }),
            ),
            v03_kernel(
                v03_wgmma::TILING_D128,
                &ATTENTION_V03_D128_BF16,
                &ATTENTION_V03_D128_F16,
                Some(VarlenKernels { bf16: &ATTENTION_V03_VARLEN_D128_BF16, f16: &ATTENTION_V03_VARLEN_D128_F16 }),
            ),
            v03_kernel(
                v03_wgmma::TILING_D256,
                &ATTENTION_V03_D256_BF16,
                &ATTENTION_V03_D256_F16,
                Some(VarlenKernels { bf16: &ATTENTION_V03_VARLEN_D256_BF16, f16: &ATTENTION_V03_VARLEN_D256_F16 }),
            ),
        ],
    },
    AttentionVersion {
        name: "v04_pingpong",
        tensor_cores: true,
        kernels: &[
            v03_kernel(
                v03_wgmma::TILING_D64,
                &ATTENTION_V04_D64_BF16,
                &ATTENTION_V04_D64_F16,
                Some(VarlenKernels { bf16: &ATTENTION_V04_VARLEN_D64_BF16, f16: &ATTENTION_V04_VARLEN_D64_F16 }),
            ),
            v03_kernel(
                v03_wgmma::TILING_D128,
                &ATTENTION_V04_D128_BF16,
                &ATTENTION_V04_D128_F16,
                Some(VarlenKernels { bf16: &ATTENTION_V04_VARLEN_D128_BF16, f16: &ATTENTION_V04_VARLEN_D128_F16 }),
            ),
        ],
    },
];

/// Deliberately wrong (tests only, not in [`VERSIONS`]): v03 with a mis-laid register-A P
/// fragment, bf16 and head dim 64 only (its f16 slot is the correct kernel).
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_V03_SWAPPED_P: AttentionVersion = AttentionVersion {
    name: "bug_v03_swapped_p",
    tensor_cores: true,
    kernels: &[v03_kernel(v03_wgmma::TILING_D64, &ATTENTION_BUG_V03_SWAPPED_P, &ATTENTION_V03_D64_F16, None)],
};

/// Deliberately wrong (tests only, not in [`VERSIONS`]): v03 varlen that leaves the next
/// sequence's V rows in its last key tile, bf16 and head dim 64 only (its dense kernels and
/// f16 slot are the correct ones).
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_V03_TAIL_NOT_ZEROED: AttentionVersion = AttentionVersion {
    name: "bug_v03_tail_not_zeroed",
    tensor_cores: true,
    kernels: &[v03_kernel(
        v03_wgmma::TILING_D64,
        &ATTENTION_V03_D64_BF16,
        &ATTENTION_V03_D64_F16,
        Some(VarlenKernels { bf16: &ATTENTION_BUG_V03_TAIL_NOT_ZEROED, f16: &ATTENTION_V03_VARLEN_D64_F16 }),
    )],
};

/// Deliberately wrong (tests only, not in [`VERSIONS`]): v02 with a wrong P re-pack, bf16 and
/// head dim 64 only (its f16 slot is the correct kernel, never used by the tests).
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_V02_SWAPPED_P: AttentionVersion = AttentionVersion {
    name: "bug_v02_swapped_p",
    tensor_cores: true,
    kernels: &[v02_kernel(v02_mma::TILING_D64, &ATTENTION_BUG_V02_SWAPPED_P, &ATTENTION_V02_D64_F16, None)],
};

/// One dtype's kernels of a backward version, in launch order.
#[cfg(not(target_arch = "nvptx64"))]
pub struct BackwardKernels<T: 'static> {
    /// `D = rowsum(dO * O)`; zeroes the atomic dQ accumulator.
    pub preprocess: &'static crate::KernelDef<AttentionBwdParams<T>>,
    /// dK, dV per key tile; with atomic dQ also dQ's contributions.
    pub dkdv: &'static crate::KernelDef<AttentionBwdParams<T>>,
    /// Deterministic dQ per query tile.
    pub dq: &'static crate::KernelDef<AttentionBwdParams<T>>,
    /// Atomic path: f32 dQ to `T`.
    pub dq_convert: &'static crate::KernelDef<AttentionBwdParams<T>>,
}

#[cfg(not(target_arch = "nvptx64"))]
impl<T> BackwardKernels<T> {
    /// Every kernel, in launch order (the deterministic `dq` after `dq_convert`).
    pub fn all(&self) -> [&'static crate::KernelDef<AttentionBwdParams<T>>; 4] {
        [self.preprocess, self.dkdv, self.dq_convert, self.dq]
    }
}

/// The kernels of a backward version for some head dims, and how the launcher runs them.
#[cfg(not(target_arch = "nvptx64"))]
pub struct BackwardKernel {
    pub head_dims: &'static [u32],
    pub bf16: BackwardKernels<Bf16>,
    pub f16: BackwardKernels<F16>,
    /// Keys per dK/dV block (grid x of `dkdv`) and queries per dQ block (grid x of `dq`).
    pub block_k: u32,
    pub block_q: u32,
    /// Threads per block of `dkdv`, and of `dq`.
    pub threads: u32,
    pub dq_threads: u32,
    /// Threads per block of the row passes `preprocess` and `dq_convert` (v01's, in every
    /// version), and query rows per `preprocess` block.
    pub row_threads: u32,
    pub preprocess_rows: u32,
    /// Dynamic shared bytes of `dkdv` and of `dq` (the others use none).
    pub dkdv_shared_bytes: u32,
    pub dq_shared_bytes: u32,
    /// Q, K, V, dO, dQ, dK and dV must start 16-byte aligned (cp.async copies, 16-byte stores).
    pub align16: bool,
    /// The same kernels over a variable-length batch (read `cu_seqlens_q/k`), if built.
    pub varlen: Option<BackwardVarlen>,
    /// TMA `dkdv` (sm_90a only): the boxes of the Q (and dO) and the K (and V) tensor maps.
    pub tma: Option<AttentionTma>,
}

/// A backward version's variable-length kernels (same tiling, threads and shared bytes); the
/// row passes `preprocess` and `dq_convert` are the dense ones (they read
/// [`AttentionBwdParams::is_varlen`]).
#[cfg(not(target_arch = "nvptx64"))]
pub struct BackwardVarlen {
    pub bf16: BackwardKernels<Bf16>,
    pub f16: BackwardKernels<F16>,
}

#[cfg(not(target_arch = "nvptx64"))]
impl BackwardKernel {
    /// Every kernel entry point (both dtypes, dense and varlen).
    pub fn defs(&self) -> impl Iterator<Item = &'static str> + '_ {
        let names = |b: &BackwardKernels<Bf16>, f: &BackwardKernels<F16>| {
            b.all().into_iter().map(|d| d.name).chain(f.all().into_iter().map(|d| d.name))
        };
        names(&self.bf16, &self.f16).chain(self.varlen.iter().flat_map(move |v| names(&v.bf16, &v.f16)))
    }
    /// Threads per block of the kernel entry point `name`, if it is one of these.
    pub fn threads_of(&self, name: &str) -> Option<u32> {
        let row_passes = [
            ATTENTION_BWD_PRE_BF16.name,
            ATTENTION_BWD_PRE_F16.name,
            ATTENTION_BWD_DQ_CONVERT_BF16.name,
            ATTENTION_BWD_DQ_CONVERT_F16.name,
        ];
        let mut dq = [self.bf16.dq.name, self.f16.dq.name]
            .into_iter()
            .chain(self.varlen.iter().flat_map(|v| [v.bf16.dq.name, v.f16.dq.name]));
        let threads = if row_passes.contains(&name) {
            self.row_threads
        } else if dq.any(|d| d == name) {
            self.dq_threads
        } else {
            self.threads
        };
        self.defs().any(|d| d == name).then_some(threads)
    }
    /// The PTX the `dkdv` kernel needs loaded, if not every arch's.
    pub const fn required_arch(&self) -> Option<&'static str> {
        if self.tma.is_some() { Some("sm_90a") } else { None }
    }
    /// Whether `name` is one of this kernel set's `dkdv` entry points.
    fn is_dkdv(&self, name: &str) -> bool {
        [self.bf16.dkdv.name, self.f16.dkdv.name]
            .into_iter()
            .chain(self.varlen.iter().flat_map(|v| [v.bf16.dkdv.name, v.f16.dkdv.name]))
            .any(|d| d == name)
    }
}

/// One rung of the backward ladder.
#[cfg(not(target_arch = "nvptx64"))]
pub struct AttentionBackwardVersion {
    pub name: &'static str,
    pub tensor_cores: bool,
    pub kernels: &'static [BackwardKernel],
}

#[cfg(not(target_arch = "nvptx64"))]
impl AttentionBackwardVersion {
    /// The kernels for `head_dim`, if this version has them.
    pub fn kernel(&self, head_dim: usize) -> Option<&'static BackwardKernel> {
        self.kernels.iter().find(|k| k.head_dims.iter().any(|&d| d as usize == head_dim))
    }
    /// Every head dim this version supports, ascending.
    pub fn head_dims(&self) -> impl Iterator<Item = u32> + '_ {
        self.kernels.iter().flat_map(|k| k.head_dims.iter().copied())
    }
    /// Every kernel entry point of the version (both dtypes, every head dim, dense and varlen).
    pub fn kernel_defs(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.kernels.iter().flat_map(|k| k.defs())
    }
    /// The kernels for `head_dim` if this version has a variable-length variant of them.
    pub fn varlen_kernel(&self, head_dim: usize) -> Option<(&'static BackwardKernel, &'static BackwardVarlen)> {
        self.kernel(head_dim).and_then(|k| k.varlen.as_ref().map(|v| (k, v)))
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl core::fmt::Debug for AttentionBackwardVersion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

#[cfg(not(target_arch = "nvptx64"))]
const fn bwd_v01(
    bf16: BackwardKernels<Bf16>,
    f16: BackwardKernels<F16>,
    varlen: Option<BackwardVarlen>,
) -> BackwardKernel {
    BackwardKernel {
        head_dims: &[32, 64, 96, 128],
        bf16,
        f16,
        block_k: bwd_v01_simt::BK,
        block_q: bwd_v01_simt::BQ,
        threads: bwd_v01_simt::THREADS,
        dq_threads: bwd_v01_simt::THREADS,
        row_threads: bwd_v01_simt::THREADS,
        preprocess_rows: bwd_v01_simt::WARPS,
        dkdv_shared_bytes: bwd_v01_simt::SHARED_BYTES,
        dq_shared_bytes: bwd_v01_simt::SHARED_BYTES,
        align16: false,
        varlen,
        tma: None,
    }
}

#[cfg(not(target_arch = "nvptx64"))]
const BF16_BWD_V01: BackwardKernels<Bf16> = BackwardKernels {
    preprocess: &ATTENTION_BWD_PRE_BF16,
    dkdv: &ATTENTION_BWD_V01_DKDV_BF16,
    dq: &ATTENTION_BWD_V01_DQ_BF16,
    dq_convert: &ATTENTION_BWD_DQ_CONVERT_BF16,
};

#[cfg(not(target_arch = "nvptx64"))]
const F16_BWD_V01: BackwardKernels<F16> = BackwardKernels {
    preprocess: &ATTENTION_BWD_PRE_F16,
    dkdv: &ATTENTION_BWD_V01_DKDV_F16,
    dq: &ATTENTION_BWD_V01_DQ_F16,
    dq_convert: &ATTENTION_BWD_DQ_CONVERT_F16,
};

/// Both dtypes' kernel sets from their `[dkdv, dq]` pairs, with v01's row passes
/// (`preprocess`, `dq_convert`: memory-bound, every version shares them).
#[cfg(not(target_arch = "nvptx64"))]
const fn with_row_passes(
    bf16: [&'static crate::KernelDef<AttentionBwdParams<Bf16>>; 2],
    f16: [&'static crate::KernelDef<AttentionBwdParams<F16>>; 2],
) -> BackwardVarlen {
    BackwardVarlen {
        bf16: BackwardKernels {
            preprocess: &ATTENTION_BWD_PRE_BF16,
            dkdv: bf16[0],
            dq: bf16[1],
            dq_convert: &ATTENTION_BWD_DQ_CONVERT_BF16,
        },
        f16: BackwardKernels {
            preprocess: &ATTENTION_BWD_PRE_F16,
            dkdv: f16[0],
            dq: f16[1],
            dq_convert: &ATTENTION_BWD_DQ_CONVERT_F16,
        },
    }
}

/// A version's varlen kernels, with `dkdv` and `dq` given (the correct ones or a deliberate
/// bug's).
#[cfg(not(target_arch = "nvptx64"))]
const fn varlen_kernels(
    bf16: [&'static crate::KernelDef<AttentionBwdParams<Bf16>>; 2],
    f16: [&'static crate::KernelDef<AttentionBwdParams<F16>>; 2],
) -> Option<BackwardVarlen> {
    Some(with_row_passes(bf16, f16))
}

/// v02's kernels of one head dim: its own `dkdv` and `dq`, v01's `preprocess` and
/// `dq_convert` (memory-bound row passes with v01's block).
#[cfg(not(target_arch = "nvptx64"))]
const fn bwd_v02(
    t: bwd_v02_mma::BwdMmaTiling,
    dkdv: [&'static crate::KernelDef<AttentionBwdParams<Bf16>>; 2],
    dkdv_f16: [&'static crate::KernelDef<AttentionBwdParams<F16>>; 2],
    varlen: Option<BackwardVarlen>,
) -> BackwardKernel {
    let BackwardVarlen { bf16, f16 } = with_row_passes(dkdv, dkdv_f16);
    BackwardKernel {
        head_dims: one_head_dim(t.d),
        bf16,
        f16,
        block_k: bwd_v02_mma::BK,
        block_q: bwd_v02_mma::BM,
        threads: t.threads(),
        dq_threads: t.threads(),
        row_threads: bwd_v01_simt::THREADS,
        preprocess_rows: bwd_v01_simt::WARPS,
        dkdv_shared_bytes: t.dkdv_shared_bytes(),
        dq_shared_bytes: t.dq_shared_bytes(),
        align16: true,
        varlen,
        tma: None,
    }
}

/// v03's kernels of one head dim: its own `dkdv` (TMA, sm_90a), v02's deterministic `dq`
/// pass for the same head dim (dense and varlen), v01's row passes.
#[cfg(not(target_arch = "nvptx64"))]
const fn bwd_v03(
    t: bwd_v03_wgmma::BwdWgmmaTiling,
    dkdv: [&'static crate::KernelDef<AttentionBwdParams<Bf16>>; 2],
    dkdv_f16: [&'static crate::KernelDef<AttentionBwdParams<F16>>; 2],
    varlen: Option<BackwardVarlen>,
) -> BackwardKernel {
    let dq = bwd_v02_mma::tiling(t.d as usize);
    let BackwardVarlen { bf16, f16 } = with_row_passes(dkdv, dkdv_f16);
    BackwardKernel {
        head_dims: one_head_dim(t.d),
        bf16,
        f16,
        block_k: bwd_v03_wgmma::BK,
        block_q: bwd_v02_mma::BM,
        threads: t.threads(),
        dq_threads: dq.threads(),
        row_threads: bwd_v01_simt::THREADS,
        preprocess_rows: bwd_v01_simt::WARPS,
        dkdv_shared_bytes: t.shared_bytes(),
        dq_shared_bytes: dq.dq_shared_bytes(),
        align16: true,
        varlen,
        tma: Some(AttentionTma { q_box: t.q_box(), kv_box: t.kv_box() }),
    }
}

/// The backward ladder, in order.
#[cfg(not(target_arch = "nvptx64"))]
pub const BACKWARD_VERSIONS: &[AttentionBackwardVersion] = &[
    AttentionBackwardVersion {
        name: "v01_simt",
        tensor_cores: false,
        kernels: &[bwd_v01(
            BF16_BWD_V01,
            F16_BWD_V01,
            varlen_kernels(
                [&ATTENTION_BWD_V01_VARLEN_DKDV_BF16, &ATTENTION_BWD_V01_VARLEN_DQ_BF16],
                [&ATTENTION_BWD_V01_VARLEN_DKDV_F16, &ATTENTION_BWD_V01_VARLEN_DQ_F16],
            ),
        )],
    },
    AttentionBackwardVersion {
        name: "v02_mma",
        tensor_cores: true,
        kernels: &[
            bwd_v02(
                bwd_v02_mma::TILING_D64,
                [&ATTENTION_BWD_V02_DKDV_D64_BF16, &ATTENTION_BWD_V02_DQ_D64_BF16],
                [&ATTENTION_BWD_V02_DKDV_D64_F16, &ATTENTION_BWD_V02_DQ_D64_F16],
                // The row passes are v01's, as in the dense set.
                varlen_kernels(
                    [&ATTENTION_BWD_V02_VARLEN_DKDV_D64_BF16, &ATTENTION_BWD_V02_VARLEN_DQ_D64_BF16],
                    [&ATTENTION_BWD_V02_VARLEN_DKDV_D64_F16, &ATTENTION_BWD_V02_VARLEN_DQ_D64_F16],
                ),
            ),
            bwd_v02(
                bwd_v02_mma::TILING_D128,
                [&ATTENTION_BWD_V02_DKDV_D128_BF16, &ATTENTION_BWD_V02_DQ_D128_BF16],
                [&ATTENTION_BWD_V02_DKDV_D128_F16, &ATTENTION_BWD_V02_DQ_D128_F16],
                varlen_kernels(
                    [&ATTENTION_BWD_V02_VARLEN_DKDV_D128_BF16, &ATTENTION_BWD_V02_VARLEN_DQ_D128_BF16],
                    [&ATTENTION_BWD_V02_VARLEN_DKDV_D128_F16, &ATTENTION_BWD_V02_VARLEN_DQ_D128_F16],
                ),
            ),
            bwd_v02(
                bwd_v02_mma::TILING_D256,
                [&ATTENTION_BWD_V02_DKDV_D256_BF16, &ATTENTION_BWD_V02_DQ_D256_BF16],
                [&ATTENTION_BWD_V02_DKDV_D256_F16, &ATTENTION_BWD_V02_DQ_D256_F16],
                varlen_kernels(
                    [&ATTENTION_BWD_V02_VARLEN_DKDV_D256_BF16, &ATTENTION_BWD_V02_VARLEN_DQ_D256_BF16],
                    [&ATTENTION_BWD_V02_VARLEN_DKDV_D256_F16, &ATTENTION_BWD_V02_VARLEN_DQ_D256_F16],
                ),
            ),
        ],
    },
    AttentionBackwardVersion {
        name: "v03_wgmma",
        tensor_cores: true,
        kernels: &[
            bwd_v03(
                bwd_v03_wgmma::TILING_D64,
                [&ATTENTION_BWD_V03_DKDV_D64_BF16, &ATTENTION_BWD_V02_DQ_D64_BF16],
                [&ATTENTION_BWD_V03_DKDV_D64_F16, &ATTENTION_BWD_V02_DQ_D64_F16],
                varlen_kernels(
                    [&ATTENTION_BWD_V03_VARLEN_DKDV_D64_BF16, &ATTENTION_BWD_V02_VARLEN_DQ_D64_BF16],
                    [&ATTENTION_BWD_V03_VARLEN_DKDV_D64_F16, &ATTENTION_BWD_V02_VARLEN_DQ_D64_F16],
                ),
            ),
            bwd_v03(
                bwd_v03_wgmma::TILING_D128,
                [&ATTENTION_BWD_V03_DKDV_D128_BF16, &ATTENTION_BWD_V02_DQ_D128_BF16],
                [&ATTENTION_BWD_V03_DKDV_D128_F16, &ATTENTION_BWD_V02_DQ_D128_F16],
                varlen_kernels(
                    [&ATTENTION_BWD_V03_VARLEN_DKDV_D128_BF16, &ATTENTION_BWD_V02_VARLEN_DQ_D128_BF16],
                    [&ATTENTION_BWD_V03_VARLEN_DKDV_D128_F16, &ATTENTION_BWD_V02_VARLEN_DQ_D128_F16],
                ),
            ),
        ],
    },
];

/// Deliberately wrong (tests only, not in [`BACKWARD_VERSIONS`]): backward v01 without the
/// `D_i` term, bf16 only (its f16 slots are the correct kernels, never used by the tests).
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_BWD_NO_D: AttentionBackwardVersion = AttentionBackwardVersion {
    name: "bug_bwd_no_d",
    tensor_cores: false,
    kernels: &[bwd_v01(
        BackwardKernels {
            preprocess: &ATTENTION_BWD_PRE_BF16,
            dkdv: &ATTENTION_BUG_BWD_NO_D_DKDV,
            dq: &ATTENTION_BUG_BWD_NO_D_DQ,
            dq_convert: &ATTENTION_BWD_DQ_CONVERT_BF16,
        },
        F16_BWD_V01,
        None,
    )],
};

/// Deliberately wrong (tests only, not in [`BACKWARD_VERSIONS`]): backward v01 whose varlen
/// kernels align the causal mask top-left in each sequence, bf16 only (its dense kernels and
/// its f16 varlen slots are the correct ones, never used by the tests).
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_BWD_VARLEN_TOP_LEFT: AttentionBackwardVersion = AttentionBackwardVersion {
    name: "bug_bwd_varlen_top_left",
    tensor_cores: false,
    kernels: &[bwd_v01(
        BF16_BWD_V01,
        F16_BWD_V01,
        varlen_kernels(
            [&ATTENTION_BUG_BWD_VARLEN_TOP_LEFT_DKDV, &ATTENTION_BUG_BWD_VARLEN_TOP_LEFT_DQ],
            [&ATTENTION_BWD_V01_VARLEN_DKDV_F16, &ATTENTION_BWD_V01_VARLEN_DQ_F16],
        ),
    )],
};

/// Deliberately wrong (tests only, not in [`BACKWARD_VERSIONS`]): backward v02 with a mis-laid
/// `dS^T` fragment in `dK += dS^T Q`, bf16 and head dim 64 only (its f16 slots and its dQ
/// pass are the correct kernels).
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_BWD_V02_SWAPPED_DS: AttentionBackwardVersion = AttentionBackwardVersion {
    name: "bug_bwd_v02_swapped_ds",
    tensor_cores: true,
    kernels: &[bwd_v02(
        bwd_v02_mma::TILING_D64,
        [&ATTENTION_BUG_BWD_V02_SWAPPED_DS, &ATTENTION_BWD_V02_DQ_D64_BF16],
        [&ATTENTION_BWD_V02_DKDV_D64_F16, &ATTENTION_BWD_V02_DQ_D64_F16],
        None,
    )],
};

/// Deliberately wrong (tests only, not in [`BACKWARD_VERSIONS`]): backward v03 writing
/// `dS^T` unswizzled for the dQ wgmma, bf16 and head dim 64 only (its f16 slot is the correct
/// kernel).
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_BWD_V03_DS_UNSWIZZLED: AttentionBackwardVersion = AttentionBackwardVersion {
    name: "bug_bwd_v03_ds_unswizzled",
    tensor_cores: true,
    kernels: &[bwd_v03(
        bwd_v03_wgmma::TILING_D64,
        [&ATTENTION_BUG_BWD_V03_DS_UNSWIZZLED, &ATTENTION_BWD_V02_DQ_D64_BF16],
        [&ATTENTION_BWD_V03_DKDV_D64_F16, &ATTENTION_BWD_V02_DQ_D64_F16],
        None,
    )],
};

/// Every backward version the tests know, the deliberately wrong ones last.
#[cfg(not(target_arch = "nvptx64"))]
pub fn backward_versions_and_bugs() -> impl Iterator<Item = &'static AttentionBackwardVersion> {
    BACKWARD_VERSIONS.iter().chain([
        &BUG_BWD_NO_D,
        &BUG_BWD_V02_SWAPPED_DS,
        &BUG_BWD_VARLEN_TOP_LEFT,
        &BUG_BWD_V03_DS_UNSWIZZLED,
    ])
}

/// Every forward version the tests know, the deliberately wrong ones last.
#[cfg(not(target_arch = "nvptx64"))]
pub fn versions_and_bugs() -> impl Iterator<Item = &'static AttentionVersion> {
    VERSIONS.iter().chain([&BUG_V02_SWAPPED_P, &BUG_V03_SWAPPED_P, &BUG_V03_TAIL_NOT_ZEROED])
}

/// The forward kernel with entry point `name`, if any.
#[cfg(not(target_arch = "nvptx64"))]
fn forward_kernel(name: &str) -> Option<&'static AttentionKernel> {
    versions_and_bugs().flat_map(|v| v.kernels.iter()).find(|k| k.defs().any(|d| d == name))
}

/// Threads per block of `name` if it is an attention kernel.
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_threads(name: &str) -> Option<u32> {
    let bwd = backward_versions_and_bugs().flat_map(|v| v.kernels.iter()).find_map(|k| k.threads_of(name));
    bwd.or_else(|| forward_kernel(name).map(|k| k.threads))
}

/// Blocks per SM to declare for `name` (see `crate::launch_min_blocks`): one for the TMA
/// kernels (forward v03 and v04, backward v03's `dkdv`), whose warpgroups trade registers
/// with `setmaxnreg`.
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_min_blocks(name: &str) -> Option<u32> {
    let fwd = forward_kernel(name).is_some_and(|k| k.tma.is_some());
    let bwd =
        || backward_versions_and_bugs().flat_map(|v| v.kernels.iter()).any(|k| k.tma.is_some() && k.is_dkdv(name));
    (fwd || bwd()).then_some(1)
}
