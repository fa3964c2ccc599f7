//! Elementwise ops: axpy, scale, add, mul, gelu, silu, swiglu over f32, f16 and bf16.
//!
//! Each function checks its views (same context, equal lengths) before launching and returns
//! [`Error::InvalidArgument`] naming the op and the mismatch. Length 0 launches nothing.
//! Kernels: `gpu-kernels/src/elementwise/`. References: [`crate::reference`].

use crate::{BufMut, BufRef, Context, Dim3, Error, Float, LaunchConfig, Result};
use gpu_kernels::KernelDef;
use gpu_kernels::device::Global;
use gpu_kernels::elementwise::{BLOCK_THREADS, ElementwiseParams};

/// The elementwise ops, one word each across kernel, launcher, reference, test and bench.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Axpy,
    Scale,
    Add,
    Mul,
    Gelu,
    Silu,
    Swiglu,
}

impl Op {
    pub const ALL: [Op; 7] = [Op::Axpy, Op::Scale, Op::Add, Op::Mul, Op::Gelu, Op::Silu, Op::Swiglu];

    pub const fn name(self) -> &'static str {
        match self {
            Op::Axpy => "axpy",
            Op::Scale => "scale",
            Op::Add => "add",
            Op::Mul => "mul",
            Op::Gelu => "gelu",
            Op::Silu => "silu",
            Op::Swiglu => "swiglu",
        }
    }

    pub fn from_name(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == s)
    }

    /// How many input arrays the op reads (axpy's second input is its output, y).
    pub const fn inputs(self) -> usize {
        match self {
            Op::Axpy | Op::Add | Op::Mul | Op::Swiglu => 2,
            Op::Scale | Op::Gelu | Op::Silu => 1,
        }
    }

    /// Whether the op takes `alpha`.
    pub const fn uses_alpha(self) -> bool {
        matches!(self, Op::Axpy | Op::Scale)
    }

    /// Bytes moved per element: each input read once, the output written once.
    pub const fn bytes_per_element(self, elem: usize) -> usize {
        (self.inputs() + 1) * elem
    }
}

/// Most blocks an elementwise launch uses; larger arrays are covered by the grid-stride loop.
/// 65536 blocks of 256 threads keep every SM of any current GPU busy many times over.
pub const MAX_BLOCKS: u32 = 65536;

/// The launch shape for `n` elements of `T` on the chosen path.
pub fn launch_config<T: Float>(n: usize, vectorized: bool) -> LaunchConfig {
    let per_chunk = if vectorized { 16 / size_of::<T>() } else { 1 };
    let work = n.div_ceil(per_chunk).max(1);
    let blocks = work.div_ceil(BLOCK_THREADS as usize).min(MAX_BLOCKS as usize) as u32;
    LaunchConfig { grid: Dim3::x(blocks), block: Dim3::x(BLOCK_THREADS), shared_bytes: 0 }
}

/// Launches `kernel` (one of `op`'s kernels, or a test's variant of it) after every check.
/// `b` is the second input for two-input ops; for axpy it is `None` and `out` is read as y.
pub fn launch_with<T: Float>(
    ctx: &Context,
    kernel: &'static KernelDef<ElementwiseParams<T>>,
    op: Op,
    alpha: f32,
    a: BufRef<'_, T>,
    b: Option<BufRef<'_, T>>,
    mut out: BufMut<'_, T>,
) -> Result<()> {
    let name = op.name();
    a.check_context(ctx, name)?;
    out.check_context(ctx, name)?;
    if let Some(b) = &b {
        b.check_context(ctx, name)?;
    }
    let n = out.len();
    let (a_name, b_name, out_name) = match op {
        Op::Axpy => ("x", "", "y"),
        Op::Swiglu => ("gate", "up", "out"),
        _ => ("a", "b", "out"),
    };
    if a.len() != n {
        return Err(Error::invalid(
            name,
            format!("{a_name} has {} elements but {out_name} has {n}; they must have the same length", a.len()),
        ));
    }
    let b_global = match (op, &b) {
        (Op::Axpy, None) => out.as_ref().global(),
        (Op::Axpy, Some(_)) => {
            return Err(Error::invalid(name, "axpy reads y from its output view; pass no second input"));
        }
        (_, Some(b)) if op.inputs() == 2 => {
            if b.len() != n {
                return Err(Error::invalid(
                    name,
                    format!("{b_name} has {} elements but {out_name} has {n}; they must have the same length", b.len()),
                ));
            }
            b.global()
        }
        (_, None) if op.inputs() == 2 => {
            return Err(Error::invalid(name, format!("{name} needs a second input ({b_name})")));
        }
        (_, Some(_)) => {
            return Err(Error::invalid(name, format!("{name} takes one input; pass no second input")));
        }
        (_, None) => Global::empty(),
    };
    if n == 0 {
        return Ok(());
    }
    // The 128-bit path needs every view 16-byte aligned; otherwise the scalar path runs.
    let vectorized = [a.addr(), out.addr(), b_global.addr()].iter().all(|&p| p % 16 == 0);
    let params =
        ElementwiseParams { alpha, vectorized: vectorized as u32, a: a.global(), b: b_global, out: out.global_mut() };
    ctx.launch(kernel, launch_config::<T>(n, vectorized), params)
}

fn launch<T: Float>(
    ctx: &Context,
    op: Op,
    alpha: f32,
    a: BufRef<'_, T>,
    b: Option<BufRef<'_, T>>,
    out: BufMut<'_, T>,
) -> Result<()> {
    launch_with(ctx, T::elementwise_kernel(op), op, alpha, a, b, out)
}

/// `y = alpha * x + y`.
pub fn axpy<T: Float>(ctx: &Context, alpha: f32, x: BufRef<'_, T>, y: BufMut<'_, T>) -> Result<()> {
    launch(ctx, Op::Axpy, alpha, x, None, y)
}

/// `out = alpha * x`.
pub fn scale<T: Float>(ctx: &Context, alpha: f32, x: BufRef<'_, T>, out: BufMut<'_, T>) -> Result<()> {
    launch(ctx, Op::Scale, alpha, x, None, out)
}

/// `out = a + b`.
pub fn add<T: Float>(ctx: &Context, a: BufRef<'_, T>, b: BufRef<'_, T>, out: BufMut<'_, T>) -> Result<()> {
    launch(ctx, Op::Add, 0.0, a, Some(b), out)
}

/// `out = a * b`.
pub fn mul<T: Float>(ctx: &Context, a: BufRef<'_, T>, b: BufRef<'_, T>, out: BufMut<'_, T>) -> Result<()> {
    launch(ctx, Op::Mul, 0.0, a, Some(b), out)
}

/// `out = gelu(x)`, tanh approximation.
pub fn gelu<T: Float>(ctx: &Context, x: BufRef<'_, T>, out: BufMut<'_, T>) -> Result<()> {
    launch(ctx, Op::Gelu, 0.0, x, None, out)
}

/// `out = x * sigmoid(x)`.
pub fn silu<T: Float>(ctx: &Context, x: BufRef<'_, T>, out: BufMut<'_, T>) -> Result<()> {
    launch(ctx, Op::Silu, 0.0, x, None, out)
}

/// `out = silu(gate) * up`.
pub fn swiglu<T: Float>(ctx: &Context, gate: BufRef<'_, T>, up: BufRef<'_, T>, out: BufMut<'_, T>) -> Result<()> {
    launch(ctx, Op::Swiglu, 0.0, gate, Some(up), out)
}
