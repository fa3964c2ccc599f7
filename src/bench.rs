//! GPU measurements shared by `ferrokern bench` and the criterion benches. Every number is
//! a ratio to a baseline measured in the same process: a device-to-device copy moving the
//! same bytes for memory-bound ops.

use crate::elementwise::{self as ew, Op};
use crate::{BufRef, Context, DType, DeviceBuffer, Error, Float, Result};
use half::{bf16, f16};

/// Timed runs per measurement (the median is reported) and untimed warm-up runs.
pub const REPS: usize = 20;
pub const WARMUP: usize = 3;

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
