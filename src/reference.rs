//! CPU references: plain f64 formulas, the specification every kernel is checked against,
//! and the error each kernel's f32 arithmetic may add (used by [`crate::check`]).

/// `alpha * x + y`
pub fn axpy(alpha: f64, x: f64, y: f64) -> f64 {
    alpha * x + y
}

/// `alpha * x`
pub fn scale(alpha: f64, x: f64) -> f64 {
    alpha * x
}

/// `a + b`
pub fn add(a: f64, b: f64) -> f64 {
    a + b
}

/// `a * b`
pub fn mul(a: f64, b: f64) -> f64 {
    a * b
}

/// GELU, tanh form: `0.5 x (1 + tanh(u))` with `u = sqrt(2/pi) (x + 0.044715 x^3)`.
///
/// Evaluated as the identical `x / (1 + e^(-2u))`: written literally, `1 + tanh(u)` cancels
/// to 0 in f64 already near x = -5.6, where the true value is about -1e-18.
pub fn gelu(x: f64) -> f64 {
    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    x / (1.0 + (-2.0 * u).exp())
}

/// `x * sigmoid(x)`
pub fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// `silu(gate) * up`
pub fn swiglu(gate: f64, up: f64) -> f64 {
    silu(gate) * up
}

/// The reference for elementwise `op`; `b` is y for axpy, up for swiglu, ignored by one-input ops.
pub fn elementwise(op: crate::elementwise::Op, alpha: f64, a: f64, b: f64) -> f64 {
    use crate::elementwise::Op;
    match op {
        Op::Axpy => axpy(alpha, a, b),
        Op::Scale => scale(alpha, a),
        Op::Add => add(a, b),
        Op::Mul => mul(a, b),
        Op::Gelu => gelu(a),
        Op::Silu => silu(a),
        Op::Swiglu => swiglu(a, b),
    }
}

/// f32's unit roundoff.
pub const U32: f64 = 1.0 / (1u64 << 24) as f64;
/// `ex2.approx.f32`'s relative error bound from the PTX ISA (2^-22), doubled for margin
/// against the ISA's own rounding of its statement.
const EX2_REL: f64 = 1.0 / (1u64 << 21) as f64;

/// A bound on the absolute error the kernel's f32 arithmetic adds to element `reference`
/// (before the output is rounded to its storage type). Derived, not tuned:
/// - axpy (one fma), scale, add, mul: the inputs are exact in f32, so the result is the exact
///   value rounded once; counted twice for margin: `2u |ref|`;
/// - silu, swiglu: `x * sigmoid(x)` with `sigmoid = 1 / (1 + ex2(x log2 e))`. ex2 adds 2^-22;
///   rounding `x log2 e` adds `|x| u` relative to e^x, of which at most all reaches sigmoid;
///   the +, /, and the products add a few `u`: `(8u + 2^-21 + 2|z|u) |ref|`, z the sigmoid's
///   argument;
/// - sigmoid's own floor: below 2^-126 the f32 sigmoid has only subnormal precision, which
///   adds `2^-126` times its multiplier (|x| for silu and gelu, |gate * up| for swiglu);
/// - gelu: the same with z = 2 sqrt(2/pi) (x + 0.044715 x^3), whose own four roundings add
///   `4u|z|` more: `(8u + 2^-21 + 6|z|u) |ref|`.
pub fn elementwise_f32_error(op: crate::elementwise::Op, a: f64, b: f64, reference: f64) -> f64 {
    use crate::elementwise::Op;
    let r = reference.abs();
    match op {
        Op::Axpy | Op::Scale | Op::Add | Op::Mul => 2.0 * U32 * r,
        Op::Silu => (8.0 * U32 + EX2_REL + 2.0 * a.abs() * U32) * r + a.abs() * F32_MIN_NORMAL,
        Op::Swiglu => {
            // silu(gate) underflows f32 entirely below gate = -103 (e^gate < 2^-149); times an
            // infinite `up` the kernel can only give NaN where the exact answer is infinite.
            if b.is_infinite() && a < -100.0 {
                return f64::INFINITY;
            }
            (8.0 * U32 + EX2_REL + 2.0 * a.abs() * U32) * r + (a * b).abs() * F32_MIN_NORMAL
        }
        Op::Gelu => {
            let z = 2.0 * (2.0 / std::f64::consts::PI).sqrt() * (a + 0.044715 * a * a * a);
            (8.0 * U32 + EX2_REL + 6.0 * z.abs() * U32) * r + a.abs() * F32_MIN_NORMAL
        }
    }
}

/// f32's smallest normal, 2^-126: below it an f32 intermediate (sigmoid of a very negative
/// argument) keeps only subnormal precision, so its absolute error is at most this, scaled
/// by whatever multiplies it.
pub const F32_MIN_NORMAL: f64 = 1.175_494_350_822_287_5e-38;

/// `gamma_k = k u / (1 - k u)` for f32: the worst-case relative error of a k-term f32 sum or
/// product chain (Higham, Accuracy and Stability of Numerical Algorithms, 3.1).
pub fn gamma_f32(k: usize) -> f64 {
    let ku = k as f64 * U32;
    if ku >= 1.0 { f64::INFINITY } else { ku / (1.0 - ku) }
}

/// The longest chain of f32 additions a row reduction over `cols` elements performs: a
/// thread adds at most `cols / 32 + 16` elements in sequence (the smallest group is a warp;
/// a chunk adds up to 8 more), then a butterfly of at most 14 levels (5 in the warp, 5 across
/// warps, with margin). It is a bound, not an estimate.
pub fn row_sum_terms(cols: usize) -> usize {
    cols / 32 + 16 + 14
}

/// Sum of a row.
pub fn sum(row: &[f64]) -> f64 {
    row.iter().sum()
}

/// Max of a row; NaN if the row has a NaN; -inf for an empty row.
pub fn max(row: &[f64]) -> f64 {
    row.iter().fold(f64::NEG_INFINITY, |a, &b| if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) })
}

/// Index of the first NaN, else of the first maximum.
pub fn argmax(row: &[f64]) -> usize {
    if let Some(i) = row.iter().position(|v| v.is_nan()) {
        return i;
    }
    let m = max(row);
    row.iter().position(|&v| v == m).unwrap_or(0)
}

/// Softmax (or log-softmax) of a row: subtract the max, exponentiate, normalize. A fully
/// masked row (max = -inf) gives 0 (log: -inf); NaN or +inf in a row make the row NaN.
pub fn softmax(row: &[f64], log: bool) -> Vec<f64> {
    let m = max(row);
    if m == f64::NEG_INFINITY {
        return vec![if log { f64::NEG_INFINITY } else { 0.0 }; row.len()];
    }
    let s: f64 = row.iter().map(|&v| (v - m).exp()).sum();
    row.iter().map(|&v| if log { (v - m) - s.ln() } else { (v - m).exp() / s }).collect()
}

/// The most times one term of a row's softmax sum may be rescaled by `e^(m_old - m_new)` when
/// the kernels merge (max, sum) pairs: a thread streaming its chunks merges at most
/// `cols / 128 + 1` of them (a 32-lane group of 4-element chunks is the finest split of a
/// streamed row), then a group reduction of at most 10 levels (5 in a warp, 5 across warps),
/// the split strategy's fold of at most `cols / 262144 + 1` segments per lane and 5 more
/// levels, and the final rescaling of a thread's cached terms. It is a bound, not an estimate.
fn softmax_rescales(cols: usize) -> usize {
    cols / 64 + 20
}

/// The relative error of the f32 softmax kernels' row sum `s` of `e^(x - max)` on `row` (a
/// row with a finite max).
///
/// With `d = x - max`: each `e^d` is `ex2.approx` of a rounded argument, relative error
/// `2^-21 + 3|d|u` (capped at |d| = 104, below which `e^d` underflows f32 and no longer
/// matters). A term is taken against its thread's or its chunk's own max and rescaled each
/// time a merge raises the max ([`softmax_rescales`] at most): each rescaling adds an
/// `ex2.approx` error and two roundings, and their arguments add up to at most `|d|`
/// (another `3|d|u`). The sum adds `gamma_k` over `k = row_sum_terms` and inherits the worst
/// term's error.
fn softmax_sum_f32_error(row: &[f64]) -> f64 {
    let m = max(row);
    let rescales = softmax_rescales(row.len()) as f64 * (EX2_REL + 2.0 * U32);
    let worst = row.iter().map(|&v| exp_f32_error(v - m) + 3.0 * (v - m).abs().min(104.0) * U32).fold(0.0, f64::max);
    worst + rescales + gamma_f32(row_sum_terms(row.len()))
}

/// The relative error of `ex2.approx` of a rounded `d * log2(e)`: `2^-21 + 3|d|u + u`.
fn exp_f32_error(d: f64) -> f64 {
    EX2_REL + 3.0 * d.abs().min(104.0) * U32 + U32
}

/// Per-element error bounds of the f32 softmax kernels on `row` with reference output `y`.
///
/// softmax = `e^d * (1/s)`, or for a row cached in registers `e^(x - t) * (e^(t - max) / s)`
/// with `t` the thread's own max (two exponentials whose arguments add up to `d`): the
/// exponentials' and the sum's ([`softmax_sum_f32_error`]) relative errors plus four
/// roundings. log_softmax = `d - ln s`: `u|d|` from the subtraction, the sum's relative error
/// and `lg2.approx`'s 2^-22 absolute error (scaled by `|log2 s|` past [0.5, 2]) in `ln s`, and
/// one rounding.
pub fn softmax_f32_error(row: &[f64], y: &[f64], log: bool) -> Vec<f64> {
    let m = max(row);
    if !m.is_finite() {
        return vec![0.0; row.len()];
    }
    let eps_s = softmax_sum_f32_error(row);
    let s: f64 = row.iter().map(|&v| (v - m).exp()).sum();
    let ln_s_err = eps_s + EX2_REL * s.log2().abs().max(1.0) + U32 * s.ln().abs();
    row.iter()
        .zip(y)
        .map(|(&v, &yi)| {
            let d = v - m;
            if log {
                U32 * d.abs() + ln_s_err + 2.0 * U32 * yi.abs()
            } else {
                (exp_f32_error(d) + EX2_REL + eps_s + 4.0 * U32) * yi.abs()
            }
        })
        .collect()
}

/// LayerNorm of a row: `(y, mean, rstd)` with the biased variance.
pub fn layernorm(row: &[f64], gamma: &[f64], beta: &[f64], eps: f64) -> (Vec<f64>, f64, f64) {
    let n = row.len() as f64;
    let mean = row.iter().sum::<f64>() / n;
    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let rstd = 1.0 / (var + eps).sqrt();
    let y = row.iter().zip(gamma).zip(beta).map(|((v, g), b)| (v - mean) * rstd * g + b).collect();
    (y, mean, rstd)
}

/// RMSNorm of a row: `(y, rstd)`.
pub fn rmsnorm(row: &[f64], gamma: &[f64], eps: f64) -> (Vec<f64>, f64) {
    let ms = row.iter().map(|v| v * v).sum::<f64>() / row.len() as f64;
    let rstd = 1.0 / (ms + eps).sqrt();
    (row.iter().zip(gamma).map(|(v, g)| v * rstd * g).collect(), rstd)
}

/// Error bounds of the f32 forward norm kernels on one row: `(y bounds, mean bound, rstd
/// bound)`. With `k = row_sum_terms(n) + 8` (the block kernels add up to 16 warps' sums in
/// sequence after each warp's butterfly): the mean is off by `d <= gamma_k sum|x| / n +
/// 2u|mean|`.
///
/// The variance. A warp kernel takes `sum (x - mean_hat)^2 = sum (x - mean)^2 + n d^2`, each
/// square within `3u`: off by `gamma_{k+3} (var + d^2) + d^2`. A block kernel measures each
/// warp's deviations from that warp's own mean `c = s rcp(n)` (`rcp.approx`, 1 ulp: off by
/// `dw <= (gamma_k + 3u) max|x|` from the warp's true mean), sums `q = sum (x - c)^2` and `r = sum (x - c)`, and adds
/// `q + 2 t r + n_w t^2` over warps (`t = c - mean_hat`), which is `sum (x - mean_hat)^2`
/// exactly. In units of the variance (`s = sqrt(var)`), with Cauchy-Schwarz twice:
/// `sum q <= var + dw^2`; `sum |t| sum|x - c| <= A = (s + dw + d)(s + dw)`;
/// `sum n_w t^2 <= (s + dw + d)^2`. So `q` carries `gamma_{k+3} (var + dw^2)`, `r`
/// `2 gamma_{k+1} A`, and the terms' sum over at most 16 warps and the scaling by `1/n`
/// `gamma_26` of the sum of their magnitudes; plus `d^2` as above. The block bound exceeds
/// the warp bound (`dw >= d`), and is used for both.
///
/// `rstd = 1/sqrt(var + eps)` halves the variance's relative error and adds two roundings.
/// `y = fma((x - mean_hat) rstd, gamma, beta)` inherits `|gamma| rstd (d + 2u|x - mean|) +
/// |gamma| |x - mean| rstd (rel(rstd) + 2u)` and its own rounding. rmsnorm is the warp case
/// with mean = 0 exactly (`d = 0`).
pub fn norm_f32_error(row: &[f64], gamma: &[f64], y: &[f64], layer: bool, eps: f64) -> (Vec<f64>, f64, f64) {
    let n = row.len() as f64;
    let k = row_sum_terms(row.len()) + 8;
    let mean = if layer { row.iter().sum::<f64>() / n } else { 0.0 };
    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let d =
        if layer { gamma_f32(k) * row.iter().map(|v| v.abs()).sum::<f64>() / n + 2.0 * U32 * mean.abs() } else { 0.0 };
    let var_err = if layer {
        let dw = (gamma_f32(k) + 3.0 * U32) * row.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let s = var.sqrt();
        let a = (s + dw + d) * (s + dw);
        let spread = (s + dw + d) * (s + dw + d);
        let q = var + dw * dw;
        gamma_f32(k + 3) * q
            + 2.0 * gamma_f32(k + 1) * a
            + gamma_f32(26) * ((1.0 + gamma_f32(k + 3)) * q + 2.0 * (1.0 + gamma_f32(k + 1)) * a + spread)
            + d * d
    } else {
        gamma_f32(k + 3) * var
    };
    let rel_rstd = var_err / (2.0 * (var + eps)) + 2.0 * U32;
    let rstd = 1.0 / (var + eps).sqrt();
    let yb = row
        .iter()
        .zip(gamma)
        .zip(y)
        .map(|((v, g), yi)| {
            let dev = (v - mean).abs();
            g.abs() * rstd * (d + 2.0 * U32 * dev)
                + g.abs() * dev * rstd * (rel_rstd + 2.0 * U32)
                + 2.0 * U32 * yi.abs()
        })
        .collect();
    (yb, d, rel_rstd * rstd)
}

/// dx of the norm backward for one row, from the forward's saved `mean` (0 for rmsnorm) and
/// `rstd`: `dx = rstd (g - mean(g) - xhat mean(g xhat))`, `g = dy gamma`,
/// `xhat = (x - mean) rstd` (rmsnorm omits `mean(g)`).
pub fn norm_backward_dx(dy: &[f64], x: &[f64], gamma: &[f64], mean: f64, rstd: f64, layer: bool) -> Vec<f64> {
    let n = x.len() as f64;
    let g: Vec<f64> = dy.iter().zip(gamma).map(|(a, b)| a * b).collect();
    let xhat: Vec<f64> = x.iter().map(|v| (v - mean) * rstd).collect();
    let mg = if layer { g.iter().sum::<f64>() / n } else { 0.0 };
    let mgx = g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / n;
    g.iter().zip(&xhat).map(|(gi, xi)| rstd * (gi - mg - xi * mgx)).collect()
}

/// Bounds for [`norm_backward_dx`]'s f32 evaluation: `g` and `xhat` carry `u` and `2u`; the
/// two means `gamma_{k+1}` and `gamma_{k+3}` of their absolute sums; the combination three
/// roundings of its terms, and the product with rstd one more.
pub fn norm_backward_dx_error(
    dy: &[f64],
    x: &[f64],
    gamma: &[f64],
    mean: f64,
    rstd: f64,
    dx: &[f64],
    layer: bool,
) -> Vec<f64> {
    let n = x.len() as f64;
    let k = row_sum_terms(x.len());
    let g: Vec<f64> = dy.iter().zip(gamma).map(|(a, b)| a * b).collect();
    let xhat: Vec<f64> = x.iter().map(|v| (v - mean) * rstd).collect();
    let mg = if layer { g.iter().sum::<f64>() / n } else { 0.0 };
    let mgx = g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / n;
    let e_mg = if layer { gamma_f32(k + 1) * g.iter().map(|v| v.abs()).sum::<f64>() / n } else { 0.0 };
    let e_mgx = gamma_f32(k + 3) * g.iter().zip(&xhat).map(|(a, b)| (a * b).abs()).sum::<f64>() / n
        + 2.0 * U32 * g.iter().zip(&xhat).map(|(a, b)| (a * b).abs()).sum::<f64>() / n;
    g.iter()
        .zip(&xhat)
        .zip(dx)
        .map(|((gi, xi), di)| {
            let inner = U32 * gi.abs()
                + e_mg
                + xi.abs() * e_mgx
                + 2.0 * U32 * (xi * mgx).abs()
                + 3.0 * U32 * (gi.abs() + mg.abs() + (xi * mgx).abs());
            rstd * inner + U32 * di.abs()
        })
        .collect()
}

/// Cross-entropy of one row: `(loss, dlogits)` with `loss = logsumexp(x) - x[t]` and
/// `dlogits = (softmax(x) - onehot(t)) * scale`; `t = None` is an ignored row (0 and 0).
/// A fully masked row has an infinite loss.
pub fn cross_entropy(row: &[f64], target: Option<usize>, scale: f64) -> (f64, Vec<f64>) {
    let Some(t) = target else { return (0.0, vec![0.0; row.len()]) };
    let m = max(row);
    let p = softmax(row, false);
    let loss = if m == f64::NEG_INFINITY {
        f64::INFINITY
    } else {
        m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln() - row[t]
    };
    let grad = p.iter().enumerate().map(|(c, pc)| (pc - (c == t) as u8 as f64) * scale).collect();
    (loss, grad)
}

/// Bounds for [`cross_entropy`]'s f32 evaluation: the loss is `(m + ln s) - x[t]`, so it
/// carries `ln s`'s error (as in [`softmax_f32_error`]) and two roundings; each gradient
/// element carries the softmax element's bound, the rounding of `p - onehot`, and the scale.
pub fn cross_entropy_f32_error(
    row: &[f64],
    target: Option<usize>,
    scale: f64,
    loss: f64,
    grad: &[f64],
) -> (f64, Vec<f64>) {
    let Some(t) = target else { return (0.0, vec![0.0; row.len()]) };
    let p = softmax(row, false);
    let pb = softmax_f32_error(row, &p, false);
    let m = max(row);
    let lb = if m.is_finite() {
        let s: f64 = row.iter().map(|&v| (v - m).exp()).sum();
        softmax_sum_f32_error(row)
            + EX2_REL * s.log2().abs().max(1.0)
            + U32 * (m.abs() + s.ln().abs() + row[t].abs())
            + 2.0 * U32 * loss.abs()
    } else {
        0.0
    };
    let gb = p
        .iter()
        .zip(&pb)
        .zip(grad)
        .enumerate()
        .map(|(c, ((pc, b), g))| scale.abs() * (b + U32 * (pc - (c == t) as u8 as f64).abs()) + U32 * g.abs())
        .collect();
    (lb, gb)
}

/// Element `(i, j)` of `op(A) op(B)` for batch `z` of the GEMM `g`, and the same element of
/// `|op(A)| |op(B)|` (the scale of the error bound), both in f64 from the stored f32 values.
pub fn gemm_dot(g: &crate::gemm::Gemm, a: &[f64], b: &[f64], z: usize, i: usize, j: usize) -> (f64, f64) {
    let (mut s, mut abs) = (0.0, 0.0);
    for p in 0..g.k {
        let ai = if g.trans_a.is_t() { p * g.lda + i } else { i * g.lda + p };
        let bi = if g.trans_b.is_t() { j * g.ldb + p } else { p * g.ldb + j };
        let (x, y) = (a[z * g.stride_a + ai], b[z * g.stride_b + bi]);
        s += x * y;
        abs += (x * y).abs();
    }
    (s, abs)
}

/// The reference result `alpha * ab + beta * c`; with `beta = 0`, C is not read (NaN in it
/// is ignored), as BLAS specifies.
pub fn gemm_element(alpha: f64, ab: f64, beta: f64, c: f64) -> f64 {
    if beta == 0.0 { alpha * ab } else { alpha * ab + beta * c }
}

/// A bound on the error of the f32 GEMM kernels for one element, worst case (Higham 3.5):
/// the k-term FMA chain gives `acc = ab + e`, `|e| <= gamma_k (|A||B|)_ij`; then
/// `fl(alpha * acc)` and the final `fma(beta, c, .)` (or `+`) add a rounding each to the
/// alpha term and two to the beta term:
/// `gamma_{k+2} |alpha| (|A||B|)_ij + gamma_2 |beta c|`. The harness adds the output's own
/// `u |ref|` on top. Order-independent, so it covers every version's summation order.
pub fn gemm_f32_error(k: usize, alpha: f64, abs_ab: f64, beta: f64, c: f64) -> f64 {
    let beta_term = if beta == 0.0 { 0.0 } else { gamma_f32(2) * (beta * c).abs() };
    gamma_f32(k + 2) * alpha.abs() * abs_ab + beta_term
}

/// A bound on the tensor-core GEMM's error for one element (`gemm_tc`), with the reference
/// computed in f64 from the same bf16/f16-rounded inputs: products of two 16-bit floats are
/// exact in f32, leaving f32 accumulation, alpha and beta as in [`gemm_f32_error`]. The order
/// and internal rounding of a tensor core's additions are not specified (reported to
/// truncate rather than round in places), so the accumulation term is taken with twice the
/// chain length, `gamma_{2k+2}`: a margin for up to one extra unit roundoff per addition.
/// The emulator (sequential f32 adds) needs only `gamma_{k+2}`; the GPU side is unmeasured.
pub fn gemm_tc_error(k: usize, alpha: f64, abs_ab: f64, beta: f64, c: f64) -> f64 {
    gemm_f32_error(2 * k, alpha, abs_ab, beta, c)
}

/// Softmax backward from the forward's output: `dx = y (dy - sum(dy y))`; log_softmax
/// backward: `dx = dy - e^y sum(dy)`.
pub fn softmax_backward(y: &[f64], dy: &[f64], log: bool) -> Vec<f64> {
    if log {
        let s: f64 = dy.iter().sum();
        y.iter().zip(dy).map(|(yi, di)| di - yi.exp() * s).collect()
    } else {
        let s: f64 = y.iter().zip(dy).map(|(a, b)| a * b).sum();
        y.iter().zip(dy).map(|(yi, di)| yi * (di - s)).collect()
    }
}

/// Bounds for [`softmax_backward`]'s f32 evaluation: the row sum `s` is off by
/// `gamma_k sum|terms|` (k = row_sum_terms); softmax: `dx = y (dy - s)` adds `u|dy - s|` and
/// one rounding; log_softmax: `e^y` carries `ex2.approx`'s error and the rounding of `y log2 e`
/// (`2^-21 + 3|y|u`), then the product with `s`, the subtraction and one rounding.
pub fn softmax_backward_f32_error(y: &[f64], dy: &[f64], dx: &[f64], log: bool) -> Vec<f64> {
    let k = row_sum_terms(y.len());
    if log {
        let s: f64 = dy.iter().sum();
        let es = gamma_f32(k) * dy.iter().map(|v| v.abs()).sum::<f64>();
        y.iter()
            .zip(dx)
            .map(|(yi, xi)| {
                let e = yi.exp();
                let eps = EX2_REL + 3.0 * yi.abs().min(104.0) * U32;
                e * (s.abs() * eps + es) + 2.0 * U32 * (e * s).abs() + 2.0 * U32 * xi.abs()
            })
            .collect()
    } else {
        let s: f64 = y.iter().zip(dy).map(|(a, b)| a * b).sum();
        let es = gamma_f32(k) * y.iter().zip(dy).map(|(a, b)| (a * b).abs()).sum::<f64>();
        y.iter()
            .zip(dy)
            .zip(dx)
            .map(|((yi, di), xi)| yi.abs() * (es + U32 * (di - s).abs()) + 2.0 * U32 * xi.abs())
            .collect()
    }
}
