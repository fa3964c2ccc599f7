//! Attention forward: `O = softmax(Q K^T * scale + mask) V` per (batch, head), never
//! materializing the score matrix, and the log-sum-exp of each score row for the backward.
//!
//! Layout: `Q, O: [batch, heads, seq_q, d]`, `K, V: [batch, kv_heads, seq_k, d]`, contiguous;
//! `lse: [batch, heads, seq_q]` (f32, natural log). Grouped-query attention: head `h` reads kv
//! head `h / (heads / kv_heads)`. Causal masking is aligned bottom-right, as FlashAttention-2
//! does for `seq_q != seq_k` (prefill appended to a cache): query `i` sees keys
//! `j <= i + seq_k - seq_q`. A query that sees no key gets `O = 0` and `lse = -inf`.
//!
//! The ladder: `v01_simt` computes on the CUDA cores (f32 math on bf16/f16 inputs) with
//! online softmax over key tiles staged in shared memory; tensor-core versions follow.

pub mod tile;
pub mod v01_simt;

/// The kernel parameters, shared by host and device.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AttentionParams<T> {
    pub batch: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub seq_q: u32,
    pub seq_k: u32,
    /// Head dimension (a multiple of 32, at most [`v01_simt::MAX_HEAD_DIM`]).
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
}

type F16 = half::f16;
type Bf16 = half::bf16;

crate::kernels! {
    ATTENTION_V01_BF16 = attention_v01_simt_bf16(AttentionParams<Bf16>) => v01_simt::run::<Bf16>;
    ATTENTION_V01_F16 = attention_v01_simt_f16(AttentionParams<F16>) => v01_simt::run::<F16>;
}

/// Threads per block of `name` if it is an attention kernel.
pub fn launch_threads(name: &str) -> Option<u32> {
    KERNEL_NAMES.contains(&name).then_some(v01_simt::THREADS)
}
