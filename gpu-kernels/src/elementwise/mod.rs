//! Elementwise ops: `out[i] = op(alpha, a[i], b[i])`, f32 math over f32, f16 or bf16 storage.
//!
//! One body serves every op ([`run`]); an op is a type implementing [`ElementwiseOp`], so a
//! new op is one small `impl` plus one line per dtype in the kernel table below.
//!
//! # Thread mapping
//! A 1-D grid-stride loop: thread `t` of `T` total handles chunks `t, t + T, ...`. On the
//! vectorized path (chosen by the launcher when every view is 16-byte aligned) a chunk is 16
//! bytes (4 f32 or 8 f16/bf16) moved with one 128-bit load or store per view, so each warp
//! moves 512 contiguous bytes per instruction; the `n % chunk` tail elements are then done one
//! per thread. On the scalar path a chunk is one element. Any length works, 0 included.
//!
//! # Safety
//! The launcher guarantees: `out.len() == n`; `a.len() == n`; `b.len() == n` for two-input ops
//! (`b` is empty otherwise); `vectorized != 0` only when every view's address is 16-byte
//! aligned. Indices stay below `n` by the loop guards (the emulator checks every access).

use crate::device::thread::{grid_threads_1d, index_1d};
use crate::device::{Element, Global, GlobalMut, math};

/// Threads per block for every elementwise kernel: enough warps to hide memory latency,
/// few enough that a small grid still spreads over every SM.
pub const BLOCK_THREADS: u32 = 256;

/// Threads per block of `name` if it is an elementwise kernel.
pub fn launch_threads(name: &str) -> Option<u32> {
    KERNEL_NAMES.contains(&name).then_some(BLOCK_THREADS)
}

/// The kernel parameters, shared by host and device.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ElementwiseParams<T> {
    pub alpha: f32,
    /// Nonzero: use 16-byte chunks (every view is 16-byte aligned).
    pub vectorized: u32,
    pub a: Global<T>,
    pub b: Global<T>,
    pub out: GlobalMut<T>,
}

/// One elementwise op: its arity and its f32 math.
pub trait ElementwiseOp {
    /// 1: reads `a`; 2: reads `a` and `b`.
    const INPUTS: u32;
    fn apply(alpha: f32, a: f32, b: f32) -> f32;
}

/// `y = alpha * x + y`: `a` is x, `b` and `out` are both y.
pub struct Axpy;
/// `y = alpha * x`.
pub struct Scale;
/// `z = x + y`.
pub struct Add;
/// `z = x * y`.
pub struct Mul;
/// GELU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub struct Gelu;
/// SiLU: `x * sigmoid(x)`.
pub struct Silu;
/// SwiGLU: `silu(gate) * up`, with `a` = gate and `b` = up.
pub struct Swiglu;

impl ElementwiseOp for Axpy {
    const INPUTS: u32 = 2;
    #[inline(always)]
    fn apply(alpha: f32, a: f32, b: f32) -> f32 {
        math::fma(alpha, a, b)
    }
}
impl ElementwiseOp for Scale {
    const INPUTS: u32 = 1;
    #[inline(always)]
    fn apply(alpha: f32, a: f32, _: f32) -> f32 {
        alpha * a
    }
}
impl ElementwiseOp for Add {
    const INPUTS: u32 = 2;
    #[inline(always)]
    fn apply(_: f32, a: f32, b: f32) -> f32 {
        a + b
    }
}
impl ElementwiseOp for Mul {
    const INPUTS: u32 = 2;
    #[inline(always)]
    fn apply(_: f32, a: f32, b: f32) -> f32 {
        a * b
    }
}
impl ElementwiseOp for Gelu {
    const INPUTS: u32 = 1;
    #[inline(always)]
    fn apply(_: f32, x: f32, _: f32) -> f32 {
        const SQRT_2_OVER_PI: f32 = 0.797_884_6;
        let u = SQRT_2_OVER_PI * math::fma(0.044_715 * x, x * x, x);
        // 0.5 (1 + tanh(u)) == sigmoid(2u): the same function without the cancellation of
        // 1 + tanh(u) for negative x, so the result keeps full relative accuracy.
        x * math::sigmoid(2.0 * u)
    }
}
impl ElementwiseOp for Silu {
    const INPUTS: u32 = 1;
    #[inline(always)]
    fn apply(_: f32, x: f32, _: f32) -> f32 {
        x * math::sigmoid(x)
    }
}
impl ElementwiseOp for Swiglu {
    const INPUTS: u32 = 2;
    #[inline(always)]
    fn apply(_: f32, gate: f32, up: f32) -> f32 {
        gate * math::sigmoid(gate) * up
    }
}

#[inline(always)]
fn one<Op: ElementwiseOp, T: Element>(p: &ElementwiseParams<T>, i: usize) {
    let a = p.a.load(i).to_f32();
    let b = if Op::INPUTS == 2 { p.b.load(i).to_f32() } else { 0.0 };
    p.out.store(i, T::from_f32(Op::apply(p.alpha, a, b)));
}

/// The body of every elementwise kernel. `N` is the number of `T` in 16 bytes.
#[inline(always)]
pub fn run<Op: ElementwiseOp, T: Element, const N: usize>(p: ElementwiseParams<T>) {
    let n = p.out.len();
    let stride = grid_threads_1d();
    let tid = index_1d();
    let mut tail_start = 0;
    if p.vectorized != 0 {
        let chunks = n / N;
        let mut c = tid;
        while c < chunks {
            let a = p.a.load_chunk::<N>(c);
            let b = if Op::INPUTS == 2 { p.b.load_chunk::<N>(c) } else { a };
            let mut o = a;
            for k in 0..N {
                o[k] = T::from_f32(Op::apply(p.alpha, a[k].to_f32(), b[k].to_f32()));
            }
            p.out.store_chunk::<N>(c, o);
            c += stride;
        }
        tail_start = chunks * N;
    }
    let mut i = tail_start + tid;
    while i < n {
        one::<Op, T>(&p, i);
        i += stride;
    }
}

type F16 = half::f16;
type Bf16 = half::bf16;

crate::kernels! {
    AXPY_F32 = axpy_f32(ElementwiseParams<f32>) => run::<Axpy, f32, 4>;
    AXPY_F16 = axpy_f16(ElementwiseParams<F16>) => run::<Axpy, F16, 8>;
    AXPY_BF16 = axpy_bf16(ElementwiseParams<Bf16>) => run::<Axpy, Bf16, 8>;
    SCALE_F32 = scale_f32(ElementwiseParams<f32>) => run::<Scale, f32, 4>;
    SCALE_F16 = scale_f16(ElementwiseParams<F16>) => run::<Scale, F16, 8>;
    SCALE_BF16 = scale_bf16(ElementwiseParams<Bf16>) => run::<Scale, Bf16, 8>;
    ADD_F32 = add_f32(ElementwiseParams<f32>) => run::<Add, f32, 4>;
    ADD_F16 = add_f16(ElementwiseParams<F16>) => run::<Add, F16, 8>;
    ADD_BF16 = add_bf16(ElementwiseParams<Bf16>) => run::<Add, Bf16, 8>;
    MUL_F32 = mul_f32(ElementwiseParams<f32>) => run::<Mul, f32, 4>;
    MUL_F16 = mul_f16(ElementwiseParams<F16>) => run::<Mul, F16, 8>;
    MUL_BF16 = mul_bf16(ElementwiseParams<Bf16>) => run::<Mul, Bf16, 8>;
    GELU_F32 = gelu_f32(ElementwiseParams<f32>) => run::<Gelu, f32, 4>;
    GELU_F16 = gelu_f16(ElementwiseParams<F16>) => run::<Gelu, F16, 8>;
    GELU_BF16 = gelu_bf16(ElementwiseParams<Bf16>) => run::<Gelu, Bf16, 8>;
    SILU_F32 = silu_f32(ElementwiseParams<f32>) => run::<Silu, f32, 4>;
    SILU_F16 = silu_f16(ElementwiseParams<F16>) => run::<Silu, F16, 8>;
    SILU_BF16 = silu_bf16(ElementwiseParams<Bf16>) => run::<Silu, Bf16, 8>;
    SWIGLU_F32 = swiglu_f32(ElementwiseParams<f32>) => run::<Swiglu, f32, 4>;
    SWIGLU_F16 = swiglu_f16(ElementwiseParams<F16>) => run::<Swiglu, F16, 8>;
    SWIGLU_BF16 = swiglu_bf16(ElementwiseParams<Bf16>) => run::<Swiglu, Bf16, 8>;
}
