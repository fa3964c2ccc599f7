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

pub mod tile;
pub mod v01_simt;
pub mod v02_mma;

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
}

type F16 = half::f16;
type Bf16 = half::bf16;

crate::kernels! {
    ATTENTION_V01_BF16 = attention_v01_simt_bf16(AttentionParams<Bf16>) => v01_simt::run::<Bf16>;
    ATTENTION_V01_F16 = attention_v01_simt_f16(AttentionParams<F16>) => v01_simt::run::<F16>;
    /// v02, head dim 64.
    ATTENTION_V02_D64_BF16 = attention_v02_mma_d64_bf16(AttentionParams<Bf16>) => v02_mma::run::<Bf16, 64, 4, 8, false>;
    ATTENTION_V02_D64_F16 = attention_v02_mma_d64_f16(AttentionParams<F16>) => v02_mma::run::<F16, 64, 4, 8, false>;
    /// v02, head dim 128.
    ATTENTION_V02_D128_BF16 = attention_v02_mma_d128_bf16(AttentionParams<Bf16>) => v02_mma::run::<Bf16, 128, 8, 16, false>;
    ATTENTION_V02_D128_F16 = attention_v02_mma_d128_f16(AttentionParams<F16>) => v02_mma::run::<F16, 128, 8, 16, false>;
    /// Deliberately wrong (tests only): v02 head dim 64 with P's A registers 1 and 2 swapped.
    ATTENTION_BUG_V02_SWAPPED_P = attention_bug_v02_swapped_p(AttentionParams<Bf16>) => v02_mma::run::<Bf16, 64, 4, 8, true>;
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

#[cfg(not(target_arch = "nvptx64"))]
const fn v02_kernel(
    t: v02_mma::FlashTiling,
    bf16: &'static crate::KernelDef<AttentionParams<Bf16>>,
    f16: &'static crate::KernelDef<AttentionParams<F16>>,
) -> AttentionKernel {
    AttentionKernel {
        head_dims: match t.d {
            64 => &[64],
            _ => &[128],
        },
        bf16,
        f16,
        block_q: t.bm,
        threads: t.threads(),
        shared_bytes: t.shared_bytes(),
        align16: true,
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
        }],
    },
    AttentionVersion {
        name: "v02_mma",
        tensor_cores: true,
        kernels: &[
            v02_kernel(v02_mma::TILING_D64, &ATTENTION_V02_D64_BF16, &ATTENTION_V02_D64_F16),
            v02_kernel(v02_mma::TILING_D128, &ATTENTION_V02_D128_BF16, &ATTENTION_V02_D128_F16),
        ],
    },
];

/// Deliberately wrong (tests only, not in [`VERSIONS`]): v02 with a wrong P re-pack, bf16 and
/// head dim 64 only (its f16 slot is the correct kernel, never used by the tests).
#[cfg(not(target_arch = "nvptx64"))]
pub const BUG_V02_SWAPPED_P: AttentionVersion = AttentionVersion {
    name: "bug_v02_swapped_p",
    tensor_cores: true,
    kernels: &[v02_kernel(v02_mma::TILING_D64, &ATTENTION_BUG_V02_SWAPPED_P, &ATTENTION_V02_D64_F16)],
};

/// Threads per block of `name` if it is an attention kernel.
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_threads(name: &str) -> Option<u32> {
    VERSIONS
        .iter()
        .chain([&BUG_V02_SWAPPED_P])
        .flat_map(|v| v.kernels.iter())
        .find(|k| k.bf16.name == name || k.f16.name == name)
        .map(|k| k.threads)
}
