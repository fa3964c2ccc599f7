//! Fast math. On the GPU these are single PTX instructions; on the emulator they are the
//! correctly rounded (or more accurate) host functions, so tolerances must cover the
//! hardware's approximation error, quoted per function from the PTX ISA.

use super::imp;

/// 2^x. GPU: `ex2.approx.f32` (max relative error 2^-22 over the full range per the PTX ISA;
/// subnormal results are kept).
#[inline(always)]
pub fn exp2_approx(x: f32) -> f32 {
    imp::exp2_approx(x)
}

/// 2^x with subnormal inputs and results flushed to zero. GPU: `ex2.approx.ftz.f32`, one
/// MUFU.EX2 (the non-ftz form adds a range check and two multiplies around it). For softmax
/// probabilities, where a result below 2^-126 is negligible next to the row's largest term 1.
#[inline(always)]
pub fn exp2_approx_ftz(x: f32) -> f32 {
    imp::exp2_approx_ftz(x)
}

/// e^x through `ex2.approx`: the rounding of `x * log2(e)` adds a relative error of about
/// |x| * 2^-24 on top of ex2's own.
#[inline(always)]
pub fn exp_approx(x: f32) -> f32 {
    exp2_approx(x * core::f32::consts::LOG2_E)
}

/// log2(x). GPU: `lg2.approx.f32` (max absolute error 2^-22 on [0.5, 2], relative 2^-22
/// elsewhere, per the PTX ISA).
#[inline(always)]
pub fn log2_approx(x: f32) -> f32 {
    imp::log2_approx(x)
}

/// ln(x) through `lg2.approx`.
#[inline(always)]
pub fn ln_approx(x: f32) -> f32 {
    log2_approx(x) * core::f32::consts::LN_2
}

/// 1/x. GPU: `rcp.approx.f32` (max error 1 ulp over the full range per the PTX ISA), one
/// MUFU.RCP where `1.0 / x` (`div.rn.f32`) adds a Newton step and a call to a slow path that
/// holds registers across it.
#[inline(always)]
pub fn rcp_approx(x: f32) -> f32 {
    imp::rcp_approx(x)
}

/// 1/sqrt(x). GPU: `rsqrt.approx.f32` (max relative error 2^-22.9 per the PTX ISA).
#[inline(always)]
pub fn rsqrt_approx(x: f32) -> f32 {
    imp::rsqrt_approx(x)
}

/// sqrt(x), correctly rounded (`sqrt.rn.f32`).
#[inline(always)]
pub fn sqrt(x: f32) -> f32 {
    imp::sqrt_rn(x)
}

/// a * b + c with one rounding (`fma.rn.f32`; `mul_add` on the host gives the same bits).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    imp::fma_rn(a, b, c)
}

/// max(a, b) that returns NaN if either is NaN (`max.NaN.f32`), so NaN cannot vanish in a
/// reduction.
#[inline(always)]
pub fn max_nan(a: f32, b: f32) -> f32 {
    imp::max_nan(a, b)
}

/// tanh(x) = 1 - 2 / (e^(2x) + 1): exact limits at +-inf, NaN stays NaN, absolute error a few
/// f32 ulps of 1 (it loses relative accuracy near 0, which GELU absorbs: it adds 1 first).
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    1.0 - 2.0 / (exp_approx(2.0 * x) + 1.0)
}

/// The logistic function 1 / (1 + e^-x), in the form that never overflows: with
/// `e = e^-|x|` in (0, 1], sigmoid is `1 / (1 + e)` for x >= 0 and `e / (1 + e)` below.
/// For x < 0 this keeps full relative accuracy down to f32's subnormals (the naive form's
/// `e^-x` overflows at x < -88.7 and returns 0 where the answer is still representable).
/// NaN stays NaN; sigmoid(+inf) = 1, sigmoid(-inf) = 0.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let e = exp_approx(-x.abs());
    let s = 1.0 / (1.0 + e);
    if x >= 0.0 { s } else { e * s }
}
