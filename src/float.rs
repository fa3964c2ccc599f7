//! The floating-point storage types ferrokern's kernels take: f32, f16, bf16.

use crate::{DType, Scalar};
use gpu_kernels::Element;
use gpu_kernels::KernelDef;
use gpu_kernels::elementwise::{self as ew, ElementwiseParams};
use half::{bf16, f16};

/// A storage float: converts to and from f64 for references, knows its rounding unit, and
/// names its kernels.
pub trait Float: Scalar + Element + crate::check::Sentinel + PartialEq + std::fmt::Debug {
    /// Unit roundoff: 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16).
    const UNIT_ROUNDOFF: f64;
    /// The absolute error floor: results this small may be flushed to zero or rounded among
    /// subnormals. f32 and bf16: 2^-126 (f32's smallest normal; an f32 intermediate such as
    /// `e^x` may underflow or overflow on the way, as with GPU fast math). f16: 2^-25, half its
    /// subnormal spacing (f16 subnormals lie far above f32's range, so nothing flushes).
    const TINY: f64;
    /// Below this reference magnitude errors are judged absolutely (the floors above), so
    /// relative error is not reported there: f32/bf16 1e-30, f16 its smallest normal 2^-14.
    const REL_FLOOR: f64;
    /// Bits of the NaN that fills guard regions (distinct from the poison and from any NaN
    /// arithmetic produces).
    const GUARD_BITS: u32;
    fn to_f64(self) -> f64;
    /// Round to nearest even (through f32, exact for f16/bf16 targets).
    fn from_f64(v: f64) -> Self;
    fn to_bits32(self) -> u32;
    fn from_bits32(b: u32) -> Self;
    /// The row ops' kernels over this type.
    fn row_kernels() -> &'static crate::rows::RowKernels<Self>;
    /// The elementwise kernel for `op` over this type.
    fn elementwise_kernel(op: crate::elementwise::Op) -> &'static KernelDef<ElementwiseParams<Self>>;
}

macro_rules! ew_table {
    ($op:expr, $axpy:ident, $scale:ident, $add:ident, $mul:ident, $gelu:ident, $silu:ident, $swiglu:ident) => {{
        use crate::elementwise::Op;
        match $op {
            Op::Axpy => &ew::$axpy,
            Op::Scale => &ew::$scale,
            Op::Add => &ew::$add,
            Op::Mul => &ew::$mul,
            Op::Gelu => &ew::$gelu,
            Op::Silu => &ew::$silu,
            Op::Swiglu => &ew::$swiglu,
        }
    }};
}

impl Float for f32 {
    const UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 24) as f64;
    const TINY: f64 = 1.175_494_350_822_287_5e-38; // 2^-126
    const REL_FLOOR: f64 = 1e-30;
    const GUARD_BITS: u32 = 0x7FC0_6A4D;
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_bits32(self) -> u32 {
        self.to_bits()
    }
    fn from_bits32(b: u32) -> Self {
        f32::from_bits(b)
    }
    fn elementwise_kernel(op: crate::elementwise::Op) -> &'static KernelDef<ElementwiseParams<Self>> {
        ew_table!(op, AXPY_F32, SCALE_F32, ADD_F32, MUL_F32, GELU_F32, SILU_F32, SWIGLU_F32)
    }
    fn row_kernels() -> &'static crate::rows::RowKernels<Self> {
        use gpu_kernels::{norm as n, reduce as r, softmax as s};
        static K: crate::rows::RowKernels<f32> = crate::rows::RowKernels {
            sum: [&r::SUM_F32_WARP, &r::SUM_F32_BLOCK, &r::SUM_F32_BLOCK_SMALL],
            max: [&r::MAX_F32_WARP, &r::MAX_F32_BLOCK, &r::MAX_F32_BLOCK_SMALL],
            argmax: [&r::ARGMAX_F32_WARP, &r::ARGMAX_F32_BLOCK, &r::ARGMAX_F32_BLOCK_SMALL],
            softmax: [&s::SOFTMAX_F32_WARP, &s::SOFTMAX_F32_BLOCK, &s::SOFTMAX_F32_BLOCK_SMALL],
            log_softmax: [&s::LOG_SOFTMAX_F32_WARP, &s::LOG_SOFTMAX_F32_BLOCK, &s::LOG_SOFTMAX_F32_BLOCK_SMALL],
            sum_split: [&r::SUM_F32_SPLIT, &r::SUM_F32_SPLIT_FINAL],
            max_split: [&r::MAX_F32_SPLIT, &r::MAX_F32_SPLIT_FINAL],
            argmax_split: [&r::ARGMAX_F32_SPLIT, &r::ARGMAX_F32_SPLIT_FINAL],
            softmax_split: [&s::SOFTMAX_F32_SPLIT, &s::SOFTMAX_F32_APPLY_SPLIT, &s::LOG_SOFTMAX_F32_APPLY_SPLIT],
            cross_entropy: [&s::CROSS_ENTROPY_F32_WARP, &s::CROSS_ENTROPY_F32_BLOCK, &s::CROSS_ENTROPY_F32_BLOCK_SMALL],
            cross_entropy_split: &s::CROSS_ENTROPY_F32_APPLY_SPLIT,
            layernorm_split: [&n::LAYERNORM_F32_SPLIT, &n::LAYERNORM_F32_APPLY_SPLIT],
            rmsnorm_split: [&n::RMSNORM_F32_SPLIT, &n::RMSNORM_F32_APPLY_SPLIT],
            layernorm_backward_split: [&n::LAYERNORM_BACKWARD_F32_SPLIT, &n::LAYERNORM_BACKWARD_F32_APPLY_SPLIT],
            rmsnorm_backward_split: [&n::RMSNORM_BACKWARD_F32_SPLIT, &n::RMSNORM_BACKWARD_F32_APPLY_SPLIT],
            softmax_backward: [&s::SOFTMAX_BACKWARD_F32_WARP, &s::SOFTMAX_BACKWARD_F32_BLOCK],
            log_softmax_backward: [&s::LOG_SOFTMAX_BACKWARD_F32_WARP, &s::LOG_SOFTMAX_BACKWARD_F32_BLOCK],
            layernorm: [&n::LAYERNORM_F32_WARP, &n::LAYERNORM_F32_BLOCK, &n::LAYERNORM_F32_BLOCK_SMALL],
            rmsnorm: [&n::RMSNORM_F32_WARP, &n::RMSNORM_F32_BLOCK, &n::RMSNORM_F32_BLOCK_SMALL],
            layernorm_backward: [
                &n::LAYERNORM_BACKWARD_F32_WARP,
                &n::LAYERNORM_BACKWARD_F32_BLOCK,
                &n::LAYERNORM_BACKWARD_F32_BLOCK_SMALL,
            ],
            rmsnorm_backward: [
                &n::RMSNORM_BACKWARD_F32_WARP,
                &n::RMSNORM_BACKWARD_F32_BLOCK,
                &n::RMSNORM_BACKWARD_F32_BLOCK_SMALL,
            ],
        };
        &K
    }
}

impl Float for f16 {
    const UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 11) as f64;
    const TINY: f64 = 2.980_232_238_769_531_3e-8; // 2^-25
    const REL_FLOOR: f64 = 6.103_515_625e-5; // 2^-14
    const GUARD_BITS: u32 = 0x7E4D;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn to_bits32(self) -> u32 {
        self.to_bits() as u32
    }
    fn from_bits32(b: u32) -> Self {
        f16::from_bits(b as u16)
    }
    fn elementwise_kernel(op: crate::elementwise::Op) -> &'static KernelDef<ElementwiseParams<Self>> {
        ew_table!(op, AXPY_F16, SCALE_F16, ADD_F16, MUL_F16, GELU_F16, SILU_F16, SWIGLU_F16)
    }
    fn row_kernels() -> &'static crate::rows::RowKernels<Self> {
        use gpu_kernels::{norm as n, reduce as r, softmax as s};
        static K: crate::rows::RowKernels<f16> = crate::rows::RowKernels {
            sum: [&r::SUM_F16_WARP, &r::SUM_F16_BLOCK, &r::SUM_F16_BLOCK_SMALL],
            max: [&r::MAX_F16_WARP, &r::MAX_F16_BLOCK, &r::MAX_F16_BLOCK_SMALL],
            argmax: [&r::ARGMAX_F16_WARP, &r::ARGMAX_F16_BLOCK, &r::ARGMAX_F16_BLOCK_SMALL],
            softmax: [&s::SOFTMAX_F16_WARP, &s::SOFTMAX_F16_BLOCK, &s::SOFTMAX_F16_BLOCK_SMALL],
            log_softmax: [&s::LOG_SOFTMAX_F16_WARP, &s::LOG_SOFTMAX_F16_BLOCK, &s::LOG_SOFTMAX_F16_BLOCK_SMALL],
            sum_split: [&r::SUM_F16_SPLIT, &r::SUM_F16_SPLIT_FINAL],
            max_split: [&r::MAX_F16_SPLIT, &r::MAX_F16_SPLIT_FINAL],
            argmax_split: [&r::ARGMAX_F16_SPLIT, &r::ARGMAX_F16_SPLIT_FINAL],
            softmax_split: [&s::SOFTMAX_F16_SPLIT, &s::SOFTMAX_F16_APPLY_SPLIT, &s::LOG_SOFTMAX_F16_APPLY_SPLIT],
            cross_entropy: [&s::CROSS_ENTROPY_F16_WARP, &s::CROSS_ENTROPY_F16_BLOCK, &s::CROSS_ENTROPY_F16_BLOCK_SMALL],
            cross_entropy_split: &s::CROSS_ENTROPY_F16_APPLY_SPLIT,
            layernorm_split: [&n::LAYERNORM_F16_SPLIT, &n::LAYERNORM_F16_APPLY_SPLIT],
            rmsnorm_split: [&n::RMSNORM_F16_SPLIT, &n::RMSNORM_F16_APPLY_SPLIT],
            layernorm_backward_split: [&n::LAYERNORM_BACKWARD_F16_SPLIT, &n::LAYERNORM_BACKWARD_F16_APPLY_SPLIT],
            rmsnorm_backward_split: [&n::RMSNORM_BACKWARD_F16_SPLIT, &n::RMSNORM_BACKWARD_F16_APPLY_SPLIT],
            softmax_backward: [&s::SOFTMAX_BACKWARD_F16_WARP, &s::SOFTMAX_BACKWARD_F16_BLOCK],
            log_softmax_backward: [&s::LOG_SOFTMAX_BACKWARD_F16_WARP, &s::LOG_SOFTMAX_BACKWARD_F16_BLOCK],
            layernorm: [&n::LAYERNORM_F16_WARP, &n::LAYERNORM_F16_BLOCK, &n::LAYERNORM_F16_BLOCK_SMALL],
            rmsnorm: [&n::RMSNORM_F16_WARP, &n::RMSNORM_F16_BLOCK, &n::RMSNORM_F16_BLOCK_SMALL],
            layernorm_backward: [
                &n::LAYERNORM_BACKWARD_F16_WARP,
                &n::LAYERNORM_BACKWARD_F16_BLOCK,
                &n::LAYERNORM_BACKWARD_F16_BLOCK_SMALL,
            ],
            rmsnorm_backward: [
                &n::RMSNORM_BACKWARD_F16_WARP,
                &n::RMSNORM_BACKWARD_F16_BLOCK,
                &n::RMSNORM_BACKWARD_F16_BLOCK_SMALL,
            ],
        };
        &K
    }
}

impl Float for bf16 {
    const UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 8) as f64;
    const TINY: f64 = 1.175_494_350_822_287_5e-38; // 2^-126
    const REL_FLOOR: f64 = 1e-30;
    const GUARD_BITS: u32 = 0x7FCD;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
    fn to_bits32(self) -> u32 {
        self.to_bits() as u32
    }
    fn from_bits32(b: u32) -> Self {
        bf16::from_bits(b as u16)
    }
    fn elementwise_kernel(op: crate::elementwise::Op) -> &'static KernelDef<ElementwiseParams<Self>> {
        ew_table!(op, AXPY_BF16, SCALE_BF16, ADD_BF16, MUL_BF16, GELU_BF16, SILU_BF16, SWIGLU_BF16)
    }
    fn row_kernels() -> &'static crate::rows::RowKernels<Self> {
        use gpu_kernels::{norm as n, reduce as r, softmax as s};
        static K: crate::rows::RowKernels<bf16> = crate::rows::RowKernels {
            sum: [&r::SUM_BF16_WARP, &r::SUM_BF16_BLOCK, &r::SUM_BF16_BLOCK_SMALL],
            max: [&r::MAX_BF16_WARP, &r::MAX_BF16_BLOCK, &r::MAX_BF16_BLOCK_SMALL],
            argmax: [&r::ARGMAX_BF16_WARP, &r::ARGMAX_BF16_BLOCK, &r::ARGMAX_BF16_BLOCK_SMALL],
            softmax: [&s::SOFTMAX_BF16_WARP, &s::SOFTMAX_BF16_BLOCK, &s::SOFTMAX_BF16_BLOCK_SMALL],
            log_softmax: [&s::LOG_SOFTMAX_BF16_WARP, &s::LOG_SOFTMAX_BF16_BLOCK, &s::LOG_SOFTMAX_BF16_BLOCK_SMALL],
            sum_split: [&r::SUM_BF16_SPLIT, &r::SUM_BF16_SPLIT_FINAL],
            max_split: [&r::MAX_BF16_SPLIT, &r::MAX_BF16_SPLIT_FINAL],
            argmax_split: [&r::ARGMAX_BF16_SPLIT, &r::ARGMAX_BF16_SPLIT_FINAL],
            softmax_split: [&s::SOFTMAX_BF16_SPLIT, &s::SOFTMAX_BF16_APPLY_SPLIT, &s::LOG_SOFTMAX_BF16_APPLY_SPLIT],
            cross_entropy: [
                &s::CROSS_ENTROPY_BF16_WARP,
                &s::CROSS_ENTROPY_BF16_BLOCK,
                &s::CROSS_ENTROPY_BF16_BLOCK_SMALL,
            ],
            cross_entropy_split: &s::CROSS_ENTROPY_BF16_APPLY_SPLIT,
            layernorm_split: [&n::LAYERNORM_BF16_SPLIT, &n::LAYERNORM_BF16_APPLY_SPLIT],
            rmsnorm_split: [&n::RMSNORM_BF16_SPLIT, &n::RMSNORM_BF16_APPLY_SPLIT],
            layernorm_backward_split: [&n::LAYERNORM_BACKWARD_BF16_SPLIT, &n::LAYERNORM_BACKWARD_BF16_APPLY_SPLIT],
            rmsnorm_backward_split: [&n::RMSNORM_BACKWARD_BF16_SPLIT, &n::RMSNORM_BACKWARD_BF16_APPLY_SPLIT],
            softmax_backward: [&s::SOFTMAX_BACKWARD_BF16_WARP, &s::SOFTMAX_BACKWARD_BF16_BLOCK],
            log_softmax_backward: [&s::LOG_SOFTMAX_BACKWARD_BF16_WARP, &s::LOG_SOFTMAX_BACKWARD_BF16_BLOCK],
            layernorm: [&n::LAYERNORM_BF16_WARP, &n::LAYERNORM_BF16_BLOCK, &n::LAYERNORM_BF16_BLOCK_SMALL],
            rmsnorm: [&n::RMSNORM_BF16_WARP, &n::RMSNORM_BF16_BLOCK, &n::RMSNORM_BF16_BLOCK_SMALL],
            layernorm_backward: [
                &n::LAYERNORM_BACKWARD_BF16_WARP,
                &n::LAYERNORM_BACKWARD_BF16_BLOCK,
                &n::LAYERNORM_BACKWARD_BF16_BLOCK_SMALL,
            ],
            rmsnorm_backward: [
                &n::RMSNORM_BACKWARD_BF16_WARP,
                &n::RMSNORM_BACKWARD_BF16_BLOCK,
                &n::RMSNORM_BACKWARD_BF16_BLOCK_SMALL,
            ],
        };
        &K
    }
}

/// The dtype names the CLI accepts, for messages.
pub const FLOAT_DTYPES: &[DType] = &[DType::F32, DType::F16, DType::BF16];
