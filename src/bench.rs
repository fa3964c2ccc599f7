//! GPU measurements shared by `ferrokern bench` and the criterion benches. Every number is
//! a ratio to a baseline measured in the same process: a device-to-device copy moving the
//! same bytes for memory-bound ops.

use crate::elementwise::{self as ew, Op};
use crate::rows::Rows;
use crate::verify::RowOp;
use crate::{BufRef, Context, DType, DeviceBuffer, Error, Float, Result};
use half::{bf16, f16};

/// Timed runs per measurement (the median is reported) and untimed warm-up runs.
pub const REPS: usize = 20;
pub const WARMUP: usize = 3;

/// Bench input: `n` values in [-1, 1) from a fixed pattern (`salt` shifts it, so tensors of
/// one call differ), finite in every dtype and the same in every run.
pub fn pattern<T: Float>(n: usize, salt: usize) -> Vec<T> {
    (0..n).map(|i| T::from_f64((((i + salt) * 7919) % 1000) as f64 * 0.002 - 1.0)).collect()
}

/// One row of the bench table / JSON.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Measurement {
    pub family: &'static str,
    pub op: String,
    pub version: String,
    pub shape: String,
    pub dtype: &'static str,
    pub median_ms: f64,
    pub min_ms: f64,
    /// Bytes the op must move (inputs read once, output written once).
    pub bytes: u64,
    pub gbps: f64,
    pub baseline: &'static str,
    pub baseline_median_ms: f64,
    pub baseline_gbps: f64,
    /// Kernel throughput over baseline throughput (higher is better; 1.0 = parity).
    pub ratio: f64,
}

/// GPU time of `iters` back-to-back runs of `f`, between two CUDA events: what the criterion
/// benches hand to `iter_custom`.
pub fn gpu_time(ctx: &Context, iters: u64, mut f: impl FnMut() -> Result<()>) -> Result<std::time::Duration> {
    let ms = ctx.time_runs(1, 1, false, || {
        for _ in 0..iters {
            f()?;
        }
        Ok(())
    })?;
    Ok(std::time::Duration::from_secs_f64(ms[0] / 1e3))
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        return f64::NAN;
    }
    let m = s.len() / 2;
    if s.len() % 2 == 1 { s[m] } else { 0.5 * (s[m - 1] + s[m]) }
}

/// Median milliseconds of a device-to-device copy that moves `bytes` in all (reads
/// `bytes / 2`, writes `bytes / 2`), L2 flushed before each run.
pub fn copy_baseline(ctx: &Context, bytes: u64) -> Result<f64> {
    let half = (bytes / 2) as usize;
    let src = ctx.alloc::<u8>(half)?;
    let mut dst = ctx.alloc::<u8>(half)?;
    let t = ctx.time_runs(WARMUP, REPS, true, || ctx.copy(src.as_view(), dst.as_view_mut()))?;
    Ok(median(&t))
}

/// Elements per array in the elementwise sweep: 1M (L2-sized), 16M, 64M (256 MB of f32).
pub const ELEMENTWISE_LENS: &[usize] = &[1 << 20, 1 << 24, 1 << 26];

fn elementwise_one<T: Float>(ctx: &Context, op: Op, n: usize) -> Result<Measurement> {
    let fill = |v: f32| -> Result<DeviceBuffer<T>> { ctx.upload(&vec![T::from_f64(v as f64); n]) };
    let a = fill(0.5)?;
    let b = fill(0.25)?;
    let mut out = fill(0.0)?;
    let second: Option<BufRef<'_, T>> = (op.inputs() == 2 && op != Op::Axpy).then(|| b.as_view());
    let t = ctx.time_runs(WARMUP, REPS, true, || {
        ew::launch_with(ctx, T::elementwise_kernel(op), op, 0.5, a.as_view(), second, out.as_view_mut())
    })?;
    let bytes = (op.bytes_per_element(size_of::<T>()) * n) as u64;
    let base = copy_baseline(ctx, bytes)?;
    let med = median(&t);
    let min = t.iter().cloned().fold(f64::INFINITY, f64::min);
    Ok(Measurement {
        family: "elementwise",
        op: op.name().into(),
        version: "v1".into(),
        shape: format!("n={n}"),
        dtype: T::NAME,
        median_ms: med,
        min_ms: min,
        bytes,
        gbps: bytes as f64 / (med * 1e6),
        baseline: "copy",
        baseline_median_ms: base,
        baseline_gbps: bytes as f64 / (base * 1e6),
        ratio: base / med,
    })
}

/// Measures one elementwise op at `n` elements of `dtype` against the copy baseline.
pub fn elementwise(ctx: &Context, op: Op, dtype: DType, n: usize) -> Result<Measurement> {
    match dtype {
        DType::F32 => elementwise_one::<f32>(ctx, op, n),
        DType::F16 => elementwise_one::<f16>(ctx, op, n),
        DType::BF16 => elementwise_one::<bf16>(ctx, op, n),
        d => Err(Error::invalid("bench", format!("dtype {} has no elementwise kernels", d.name()))),
    }
}

/// Row-op shapes in the sweep (rows, cols): the common 4096-wide hidden size (block, rows in
/// registers), long rows past the register cache (32768 columns: the shared strategy for ops
/// that re-read rows, 128 KB of f32 per row), short rows (warp), and few very long rows (64 x
/// 1M: the split strategy). Every shape moves at least 256 MB in f32.
pub const ROW_SHAPES: &[(usize, usize)] = &[(32_768, 4096), (4096, 32_768), (1 << 20, 128), (64, 1 << 20)];
/// Cross-entropy's shapes: 8192 tokens over a 50257-word vocabulary (the shared strategy: a
/// row is 201 KB in f32, 100 KB in bf16), and a small batch over a 256k vocabulary (8 x
/// 262144: the split strategy; 8 MB of f32 logits, under the 256 MB the other shapes move).
pub const CROSS_ENTROPY_SHAPES: &[(usize, usize)] = &[(8192, 50_257), (8, 262_144)];

/// Bytes a row op must move: every input read once, every output written once.
pub fn row_bytes(op: RowOp, shape: Rows, elem: usize) -> u64 {
    let (r, c) = (shape.rows as u64, shape.cols as u64);
    let e = elem as u64;
    let m = r * c * e;
    match op {
        RowOp::Sum | RowOp::Argmax => m + 4 * r,
        RowOp::Max => m + e * r,
        RowOp::Softmax | RowOp::LogSoftmax => 2 * m,
        RowOp::CrossEntropy => 2 * m + 8 * r,
        RowOp::LayerNorm => 2 * m + 2 * c * e + 8 * r,
        RowOp::RmsNorm => 2 * m + c * e + 4 * r,
        RowOp::LayerNormBackward => 3 * m + c * e + 8 * r + 8 * c,
        RowOp::RmsNormBackward => 3 * m + c * e + 4 * r + 4 * c,
        RowOp::SoftmaxBackward | RowOp::LogSoftmaxBackward => 3 * m,
    }
}

/// Everything one row op needs to run repeatedly on `shape`: inputs with deterministic
/// moderate values and outputs. Shared by `ferrokern bench`
/// and the criterion benches, so both time the same launches.
pub struct RowWorkload<T: Float> {
    pub op: RowOp,
    pub shape: Rows,
    x: DeviceBuffer<T>,
    gamma: DeviceBuffer<T>,
    beta: DeviceBuffer<T>,
    y: DeviceBuffer<T>,
    s1: DeviceBuffer<f32>,
    s2: DeviceBuffer<f32>,
    c1: DeviceBuffer<f32>,
    c2: DeviceBuffer<f32>,
    idx: DeviceBuffer<u32>,
    mx: DeviceBuffer<T>,
    targets: DeviceBuffer<i32>,
    ones: DeviceBuffer<f32>,
    zeros: DeviceBuffer<f32>,
}

impl<T: Float> RowWorkload<T> {
    pub fn new(ctx: &Context, op: RowOp, shape: Rows) -> Result<Self> {
        let n = shape.rows * shape.cols;
        // The bench measures speed; `verify` checked the values first.
        let host: Vec<T> = (0..n).map(|i| T::from_f64(((i * 2_654_435_761) % 1000) as f64 * 0.008 - 4.0)).collect();
        Ok(RowWorkload {
            op,
            shape,
            x: ctx.upload(&host)?,
            gamma: ctx.upload(&vec![T::from_f64(1.0); shape.cols])?,
            beta: ctx.upload(&vec![T::from_f64(0.0); shape.cols])?,
            y: ctx.alloc(n)?,
            s1: ctx.alloc(shape.rows)?,
            s2: ctx.alloc(shape.rows)?,
            c1: ctx.alloc(shape.cols)?,
            c2: ctx.alloc(shape.cols)?,
            idx: ctx.alloc(shape.rows)?,
            mx: ctx.alloc(shape.rows)?,
            targets: ctx.upload(&(0..shape.rows).map(|r| (r % shape.cols.max(1)) as i32).collect::<Vec<_>>())?,
            ones: ctx.upload(&vec![1.0f32; shape.rows])?,
            zeros: ctx.upload(&vec![0.0f32; shape.rows])?,
        })
    }

    /// Launches the op once (asynchronously on the GPU).
    pub fn run(&mut self, ctx: &Context) -> Result<()> {
        use crate::cross_entropy::{CrossEntropyInput, cross_entropy_with};
        use crate::norm::{NormGrad, NormInput};
        let shape = self.shape;
        let x = self.x.as_view();
        match self.op {
            RowOp::Sum => crate::reduce::sum(ctx, x, shape, self.s1.as_view_mut()),
            RowOp::Max => crate::reduce::max(ctx, x, shape, self.mx.as_view_mut()),
            RowOp::Argmax => crate::reduce::argmax(ctx, x, shape, self.idx.as_view_mut()),
            RowOp::Softmax => crate::softmax::softmax(ctx, x, shape, self.y.as_view_mut()),
            RowOp::LogSoftmax => crate::softmax::log_softmax(ctx, x, shape, self.y.as_view_mut()),
            RowOp::CrossEntropy => {
                let input = CrossEntropyInput {
                    logits: x,
                    targets: self.targets.as_view(),
                    shape,
                    ignore_index: None,
                    grad_scale: 1.0,
                    // The host check is a download and a wait per call; the kernel guards anyway.
                    check_targets: false,
                };
                cross_entropy_with(ctx, None, input, self.s1.as_view_mut(), Some(self.y.as_view_mut()))
            }
            RowOp::LayerNorm | RowOp::RmsNorm => {
                let layer = self.op == RowOp::LayerNorm;
                let beta = layer.then(|| self.beta.as_view());
                let input = NormInput { x, gamma: self.gamma.as_view(), beta, shape, eps: 1e-5 };
                if layer {
                    crate::norm::layernorm(
                        ctx,
                        input,
                        self.y.as_view_mut(),
                        self.s1.as_view_mut(),
                        self.s2.as_view_mut(),
                    )
                } else {
                    crate::norm::rmsnorm(ctx, input, self.y.as_view_mut(), self.s2.as_view_mut())
                }
            }
            RowOp::SoftmaxBackward => {
                crate::softmax::softmax_backward_with(ctx, None, x, x, shape, self.y.as_view_mut())
            }
            RowOp::LogSoftmaxBackward => {
                crate::softmax::log_softmax_backward_with(ctx, None, x, x, shape, self.y.as_view_mut())
            }
            RowOp::LayerNormBackward | RowOp::RmsNormBackward => {
                let layer = self.op == RowOp::LayerNormBackward;
                let grad = NormGrad {
                    dy: x,
                    x,
                    gamma: self.gamma.as_view(),
                    mean: layer.then(|| self.zeros.as_view()),
                    rstd: self.ones.as_view(),
                    shape,
                };
                if layer {
                    crate::norm::layernorm_backward(
                        ctx,
                        grad,
                        self.y.as_view_mut(),
                        self.c1.as_view_mut(),
                        self.c2.as_view_mut(),
                    )
                } else {
                    crate::norm::rmsnorm_backward(ctx, grad, self.y.as_view_mut(), self.c1.as_view_mut())
                }
            }
        }
    }
}

fn rows_one<T: Float>(ctx: &Context, op: RowOp, shape: Rows) -> Result<Measurement> {
    let mut w = RowWorkload::<T>::new(ctx, op, shape)?;
    let t = ctx.time_runs(WARMUP, REPS, true, || w.run(ctx))?;
    let bytes = row_bytes(op, shape, size_of::<T>());
    let base = copy_baseline(ctx, bytes)?;
    let med = median(&t);
    Ok(Measurement {
        family: "rows",
        op: op.name().into(),
        version: format!("{:?}", row_strategy::<T>(ctx, op, shape)).to_lowercase(),
        shape: format!("{}x{}", shape.rows, shape.cols),
        dtype: T::NAME,
        median_ms: med,
        min_ms: t.iter().cloned().fold(f64::INFINITY, f64::min),
        bytes,
        gbps: bytes as f64 / (med * 1e6),
        baseline: "copy",
        baseline_median_ms: base,
        baseline_gbps: bytes as f64 / (base * 1e6),
        ratio: base / med,
    })
}

/// The strategy the launcher picks for `op` on `shape` of `T` on `ctx`.
pub fn row_strategy<T: Float>(ctx: &Context, op: RowOp, shape: Rows) -> crate::rows::RowStrategy {
    op.auto_strategy(ctx, T::DTYPE, shape)
}

/// Measures one row op on `shape` of `dtype` against the copy baseline.
pub fn rows(ctx: &Context, op: RowOp, dtype: DType, shape: Rows) -> Result<Measurement> {
    match dtype {
        DType::F32 => rows_one::<f32>(ctx, op, shape),
        DType::F16 => rows_one::<f16>(ctx, op, shape),
        DType::BF16 => rows_one::<bf16>(ctx, op, shape),
        d => Err(Error::invalid("bench", format!("dtype {} has no row kernels", d.name()))),
    }
}

/// The shapes the sweep measures `op` on.
pub fn row_shapes(op: RowOp) -> Vec<Rows> {
    if op == RowOp::CrossEntropy {
        return CROSS_ENTROPY_SHAPES.iter().map(|&(r, c)| Rows::new(r, c)).collect();
    }
    ROW_SHAPES.iter().map(|&(r, c)| Rows::new(r, c)).collect()
}

/// A self-contained SVG bar chart of each row's `ratio` (one horizontal bar per row, labeled
/// `op dtype shape`), with a dashed line at 1.0, the baseline. Hand-written so the bench needs
/// no plotting stack on a GPU machine, and the file opens in any browser.
pub fn plot_svg(title: &str, rows: &[Measurement]) -> String {
    use std::fmt::Write;

    fn esc(s: &str) -> String {
        s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
    }
    /// A round tick step giving about five ticks up to `max`.
    fn nice_step(max: f64) -> f64 {
        let raw = max / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        [1.0, 2.0, 2.5, 5.0, 10.0].into_iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag)
    }

    let labels: Vec<String> = rows.iter().map(|m| format!("{} {} {}", m.op, m.dtype, m.shape)).collect();
    // Monospace text: about 7.2 px per character at 12 px.
    let label_w = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64 * 7.2;
    let (left, right, top, bottom, row_h) = (label_w + 20.0, 70.0, 74.0, 40.0, 20.0);
    let plot_w = 600.0;
    let width = left + plot_w + right;
    let height = top + row_h * rows.len().max(1) as f64 + bottom;
    // Bars are measured against the larger of the best ratio and the baseline, so the 1.0
    // line is always on the chart; a ratio that is not a finite positive number has no bar.
    let finite = |r: f64| r.is_finite() && r > 0.0;
    let top_ratio = rows.iter().map(|m| m.ratio).filter(|r| finite(*r)).fold(1.0f64, f64::max);
    let step = nice_step(top_ratio * 1.05);
    let x_max = (top_ratio * 1.05 / step).ceil() * step;
    let x = |r: f64| left + plot_w * r / x_max;
    let axis_y = top + row_h * rows.len().max(1) as f64;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="monospace" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="22" font-size="15" font-weight="bold" text-anchor="middle">{}</text>"#,
        width / 2.0,
        esc(title)
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="42" fill="#555" text-anchor="middle">throughput / baseline throughput (higher is better; dashed line: 1.0 = baseline)</text>"##,
        width / 2.0
    );
    if rows.is_empty() {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">no measurements</text>"#,
            width / 2.0,
            top + row_h * 0.7
        );
    }
    // Grid lines and tick labels.
    let ticks = (x_max / step).round() as usize;
    for i in 0..=ticks {
        let r = step * i as f64;
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{top:.1}" x2="{0:.1}" y2="{axis_y:.1}" stroke="#e5e5e5"/><text x="{0:.1}" y="{1:.1}" text-anchor="middle">{r:.2}</text>"##,
            x(r),
            axis_y + 16.0
        );
    }
    for (i, (m, label)) in rows.iter().zip(&labels).enumerate() {
        let y = top + row_h * i as f64;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            left - 8.0,
            y + row_h * 0.7,
            esc(label)
        );
        if finite(m.ratio) {
            let color = if m.ratio >= 1.0 { "#4c78a8" } else { "#e45756" };
            let _ = writeln!(
                s,
                r#"<rect x="{left:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{} ratio {:.3}</title></rect><text x="{:.1}" y="{:.1}">{:.2}</text>"#,
                y + 3.0,
                x(m.ratio) - left,
                row_h - 6.0,
                esc(label),
                m.ratio,
                x(m.ratio) + 4.0,
                y + row_h * 0.7,
                m.ratio
            );
        } else {
            let _ = writeln!(s, r##"<text x="{:.1}" y="{:.1}" fill="#555">n/a</text>"##, left + 4.0, y + row_h * 0.7);
        }
    }
    let _ = writeln!(
        s,
        r##"<line x1="{left:.1}" y1="{top:.1}" x2="{left:.1}" y2="{axis_y:.1}" stroke="#333"/><line x1="{left:.1}" y1="{axis_y:.1}" x2="{:.1}" y2="{axis_y:.1}" stroke="#333"/>"##,
        left + plot_w
    );
    let _ = writeln!(
        s,
        r##"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{axis_y:.1}" stroke="#222" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">baseline</text>"##,
        x(1.0),
        top - 6.0,
        top - 9.0
    );
    let _ = writeln!(s, "</svg>");
    s
}

/// GEMM shapes the bench measures (m, n, k): squares, a skinny M (decode-like), the same
/// skinny in N (which `gemm()` runs as its transpose), a short K.
pub const GEMM_SHAPES: &[(usize, usize, usize)] = &[
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (16, 4096, 4096),
    (4096, 16, 4096),
    (4096, 4096, 64),
];

/// One GEMM timing: a ladder version and cuBLAS on the same buffers (both `None` fields
/// when cuBLAS is not available).
#[derive(Clone, Debug, serde::Serialize)]
pub struct GemmMeasurement {
    /// The version, or for the public `gemm()` what it ran ([`gemm_default`]).
    pub version: String,
    pub shape: String,
    pub median_ms: f64,
    pub min_ms: f64,
    pub tflops: f64,
    pub cublas_median_ms: Option<f64>,
    pub cublas_tflops: Option<f64>,
    /// Version throughput over cuBLAS throughput (1.0 = parity).
    pub ratio: Option<f64>,
}

/// Buffers for one GEMM shape (`T` inputs, f32 C; NN, packed, alpha 1, beta 0) with
/// deterministic moderate values, shared by `ferrokern bench` and the criterion benches so
/// both time the same launches; each version and cuBLAS run in turn on the same bytes.
pub struct GemmWorkload<T: Float> {
    pub gemm: crate::gemm::Gemm,
    a: DeviceBuffer<T>,
    b: DeviceBuffer<T>,
    c: DeviceBuffer<f32>,
}

/// The tensor-core GEMM's buffers: bf16 A and B.
pub type TcWorkload = GemmWorkload<bf16>;

impl<T: Float> GemmWorkload<T> {
    pub fn new(ctx: &Context, m: usize, n: usize, k: usize) -> Result<Self> {
        let g = crate::gemm::Gemm::new(m, n, k);
        let fill = |len: usize, salt: usize| -> Vec<T> {
            (0..len)
                .map(|i| T::from_f64(((i.wrapping_mul(2_654_435_761) ^ salt) % 1000) as f64 * 0.002 - 1.0))
                .collect()
        };
        Ok(GemmWorkload {
            gemm: g,
            a: ctx.upload(&fill(g.a_len(), 1))?,
            b: ctx.upload(&fill(g.b_len(), 2))?,
            c: ctx.alloc(g.c_len())?,
        })
    }
}

/// A GEMM family timed on a [`GemmWorkload`]: f32 (SGEMM ladder, cuBLAS SGEMM) or bf16
/// (tensor-core ladder, `cublasGemmEx`).
pub trait GemmBench {
    type Version: 'static;
    fn name(version: &Self::Version) -> &'static str;
    /// One launch of `version`.
    fn run(&mut self, ctx: &Context, version: &Self::Version) -> Result<()>;
    /// One launch of the cuBLAS baseline on the same buffers.
    fn run_cublas(&mut self, cublas: &crate::cublas::Cublas) -> Result<()>;
}

impl GemmBench for GemmWorkload<f32> {
    type Version = crate::gemm::GemmVersion;
    fn name(version: &Self::Version) -> &'static str {
        version.name
    }
    fn run(&mut self, ctx: &Context, version: &Self::Version) -> Result<()> {
        crate::gemm::gemm_with(ctx, version, &self.gemm, self.a.as_view(), self.b.as_view(), self.c.as_view_mut())
    }
    /// cuBLAS SGEMM.
    fn run_cublas(&mut self, cublas: &crate::cublas::Cublas) -> Result<()> {
        cublas.sgemm(&self.gemm, self.a.as_view(), self.b.as_view(), self.c.as_view_mut())
    }
}

/// Median and min milliseconds of `f`: one untimed probe first, and when a run takes over
/// 250 ms (the slow rungs on the large squares) 3 timed runs instead of [`REPS`].
fn time_gemm(ctx: &Context, mut f: impl FnMut() -> Result<()>) -> Result<(f64, f64)> {
    let probe = ctx.time_runs(0, 1, false, &mut f)?;
    let (warmup, reps) = if probe[0] > 250.0 { (0, 3) } else { (WARMUP, REPS) };
    let t = ctx.time_runs(warmup, reps, true, &mut f)?;
    Ok((median(&t), t.iter().cloned().fold(f64::INFINITY, f64::min)))
}

/// Times cuBLAS on `w`'s shape; `None` without cuBLAS.
pub fn gemm_cublas<T: Float>(
    ctx: &Context,
    w: &mut GemmWorkload<T>,
    cublas: Option<&crate::cublas::Cublas>,
) -> Result<Option<f64>>
where
    GemmWorkload<T>: GemmBench,
{
    let Some(cb) = cublas else { return Ok(None) };
    Ok(Some(time_gemm(ctx, || w.run_cublas(cb))?.0))
}

/// Times `version` on `w`'s shape against an already measured cuBLAS median.
pub fn gemm<T: Float>(
    ctx: &Context,
    version: &'static <GemmWorkload<T> as GemmBench>::Version,
    w: &mut GemmWorkload<T>,
    cublas_ms: Option<f64>,
) -> Result<GemmMeasurement>
where
    GemmWorkload<T>: GemmBench,
{
    let (med, min) = time_gemm(ctx, || w.run(ctx, version))?;
    Ok(GemmMeasurement::new(GemmWorkload::<T>::name(version), &w.gemm, med, min, cublas_ms))
}

/// Times the public f32 [`crate::gemm::gemm`] on `w`'s shape, as users call it: its row reads
/// `gemm() <version>`, with `^T` when its [`crate::gemm::plan`] runs the transpose.
pub fn gemm_default(ctx: &Context, w: &mut GemmWorkload<f32>, cublas_ms: Option<f64>) -> Result<GemmMeasurement> {
    let plan = crate::gemm::plan(&w.gemm);
    let (g, a, b) = (w.gemm, &w.a, &w.b);
    let (med, min) = time_gemm(ctx, || crate::gemm::gemm(ctx, &g, a.as_view(), b.as_view(), w.c.as_view_mut()))?;
    let label = format!("gemm() {}{}", plan.version.name, if plan.swapped { "^T" } else { "" });
    Ok(GemmMeasurement::new(label, &g, med, min, cublas_ms))
}

impl GemmMeasurement {
    /// The row of `version` on `g` from its median and min and cuBLAS's median.
    fn new(version: impl Into<String>, g: &crate::gemm::Gemm, med: f64, min: f64, cublas_ms: Option<f64>) -> Self {
        let tf = |ms: f64| g.flops() / (ms * 1e9);
        GemmMeasurement {
            version: version.into(),
            shape: format!("{}x{}x{}", g.m, g.n, g.k),
            median_ms: med,
            min_ms: min,
            tflops: tf(med),
            cublas_median_ms: cublas_ms,
            cublas_tflops: cublas_ms.map(tf),
            ratio: cublas_ms.map(|c| c / med),
        }
    }
}

/// Tensor-core GEMM shapes (m, n, k) from the issue: squares, decode-like skinny M with
/// N = K = 8192, and a long K.
pub const GEMM_TC_SHAPES: &[(usize, usize, usize)] = &[
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (1, 8192, 8192),
    (16, 8192, 8192),
    (64, 8192, 8192),
    (128, 8192, 8192),
    (1024, 1024, 16384),
];

/// Shapes the tensor-core GEMM is timed on with its fused bias + GELU epilogue (f32 C), each
/// against cuBLAS's plain `cublasGemmEx` on the same shape: the ratio is what the product with
/// the fused epilogue costs over the product alone. The odd one (8000 is not a multiple of
/// the 128- and 256-wide tiles) adds edge tiles.
pub const GEMM_TC_FUSED_SHAPES: &[(usize, usize, usize)] =
    &[(4096, 4096, 4096), (8192, 8192, 8192), (8000, 8000, 8000)];

/// Times `version` on `w`'s shape with the fused bias + GELU epilogue (a bias of N f32
/// uploaded here) against an already measured cuBLAS median of the plain product; the row's
/// shape reads `MxNxK+bias+gelu`.
pub fn gemm_tc_fused(
    ctx: &Context,
    version: &'static crate::gemm_tc::TcVersion,
    w: &mut TcWorkload,
    cublas_ms: Option<f64>,
) -> Result<GemmMeasurement> {
    let bias: Vec<f32> = (0..w.gemm.n).map(|j| (j % 13) as f32 * 0.05 - 0.3).collect();
    let bias = ctx.upload(&bias)?;
    let ep = crate::gemm_tc::Epilogue { bias: Some(bias.as_view()), gelu: true, residual: None };
    let (a, b, g) = (&w.a, &w.b, w.gemm);
    let (med, min) = time_gemm(ctx, || {
        crate::gemm_tc::gemm_tc_ex(ctx, version, &g, a.as_view(), b.as_view(), w.c.as_view_mut(), &ep)
    })?;
    let mut row = GemmMeasurement::new(version.name, &g, med, min, cublas_ms);
    row.shape += "+bias+gelu";
    Ok(row)
}

impl GemmBench for TcWorkload {
    type Version = crate::gemm_tc::TcVersion;
    fn name(version: &Self::Version) -> &'static str {
        version.name
    }
    fn run(&mut self, ctx: &Context, version: &Self::Version) -> Result<()> {
        crate::gemm_tc::gemm_tc_with(ctx, version, &self.gemm, self.a.as_view(), self.b.as_view(), self.c.as_view_mut())
    }
    /// cuBLAS `cublasGemmEx` (same types, f32 compute).
    fn run_cublas(&mut self, cublas: &crate::cublas::Cublas) -> Result<()> {
        cublas.gemm_ex(&self.gemm, self.a.as_view(), self.b.as_view(), self.c.as_view_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(op: &str, dtype: &'static str, shape: &str, ratio: f64) -> Measurement {
        Measurement {
            family: "elementwise",
            op: op.into(),
            version: "v1".into(),
            shape: shape.into(),
            dtype,
            median_ms: 1.0,
            min_ms: 0.9,
            bytes: 1 << 20,
            gbps: 1.0,
            baseline: "copy",
            baseline_median_ms: ratio,
            baseline_gbps: 1.0 / ratio,
            ratio,
        }
    }

    #[test]
    fn plot_svg_has_a_labeled_bar_per_row_and_the_baseline() {
        let rows = [row("gelu", "bf16", "n=1048576", 0.93), row("axpy", "f32", "n=16777216", 1.21)];
        let svg = plot_svg("ferrokern bench 2026-11-30: H200 <test> & co", &rows);
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(svg.contains(">gelu bf16 n=1048576</text>"), "{svg}");
        assert!(svg.contains(">axpy f32 n=16777216</text>"), "{svg}");
        assert_eq!(svg.matches("<rect x=").count(), 2, "one bar per row: {svg}");
        assert!(svg.contains("stroke-dasharray"), "the 1.0 line: {svg}");
        // The title is escaped, so a GPU name with markup characters cannot break the file.
        assert!(svg.contains("H200 &lt;test&gt; &amp; co"), "{svg}");
        assert!(svg.contains(">0.93</text>") && svg.contains(">1.21</text>"), "{svg}");
    }

    #[test]
    fn plot_svg_survives_no_rows_and_non_finite_ratios() {
        let empty = plot_svg("t", &[]);
        assert!(empty.contains("no measurements"), "{empty}");
        let odd = plot_svg("t", &[row("mul", "f16", "n=1", f64::INFINITY)]);
        assert!(odd.contains(">mul f16 n=1</text>") && odd.contains(">n/a</text>"), "{odd}");
        assert!(!odd.contains("NaN") && !odd.contains("inf"), "{odd}");
    }
}
