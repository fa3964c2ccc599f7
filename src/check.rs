//! The correctness harness shared by tests, `ferrokern verify` and the bench's sweep:
//! guarded and poisoned outputs, and comparison with a reference under an error bound.
//!
//! Per element, `|got - want| <= bound + u_out |want| + tiny` passes, where `bound` is the
//! kernel's own arithmetic error (from [`crate::reference`]), `u_out` the output type's unit
//! roundoff and `tiny` half its subnormal spacing. NaN passes only where the reference is
//! NaN; an infinite result passes only where the reference, rounded to the output type, is the
//! same infinity. An element still holding the poison pattern was never written.

use crate::{BufMut, Context, DeviceBuffer, Float, Result, Scalar};
use half::{bf16, f16};
use std::fmt;

/// Output types the harness can guard and poison: a poison value no kernel computes and a
/// distinct guard value, compared by bits.
pub trait Sentinel: Scalar {
    const POISON: Self;
    const GUARD: Self;
    fn bits(self) -> u32;
    fn as_f64(self) -> f64;
}

macro_rules! float_sentinel {
    ($($t:ty),*) => {$(
        impl Sentinel for $t {
            const POISON: Self = <$t>::from_bits(<$t as gpu_kernels::Element>::POISON_BITS as _);
            const GUARD: Self = <$t>::from_bits(<$t as Float>::GUARD_BITS as _);
            fn bits(self) -> u32 {
                self.to_bits() as u32
            }
            fn as_f64(self) -> f64 {
                Float::to_f64(self)
            }
        }
    )*};
}
float_sentinel!(f32, f16, bf16);

impl Sentinel for u32 {
    /// Larger than any index a launcher accepts.
    const POISON: Self = 0xFFFF_FFF0;
    const GUARD: Self = 0xA5A5_A5A5;
    fn bits(self) -> u32 {
        self
    }
    fn as_f64(self) -> f64 {
        self as f64
    }
}

/// Bytes of guard region on each side of a checked output.
pub const GUARD_BYTES: usize = 4096;

/// An output buffer with guard regions on both sides (NaN for floats), the output poisoned.
pub struct Guarded<T: Sentinel> {
    buf: DeviceBuffer<T>,
    guard: usize,
    len: usize,
}

impl<T: Sentinel> Guarded<T> {
    fn guard_elems() -> usize {
        GUARD_BYTES / size_of::<T>()
    }

    /// `len` poisoned elements between two guard regions.
    pub fn poisoned(ctx: &Context, len: usize) -> Result<Self> {
        let g = Self::guard_elems();
        let mut host = vec![T::GUARD; len + 2 * g];
        host[g..g + len].fill(T::POISON);
        Ok(Guarded { buf: ctx.upload(&host)?, guard: g, len })
    }

    /// As [`Guarded::poisoned`], with the output starting `offset` elements after the front
    /// guard (so it is misaligned when the offset is), still guarded on both sides.
    pub fn poisoned_at(ctx: &Context, len: usize, offset: usize) -> Result<Self> {
        let g = Self::guard_elems() + offset;
        let mut host = vec![T::GUARD; len + g + Self::guard_elems()];
        host[g..g + len].fill(T::POISON);
        Ok(Guarded { buf: ctx.upload(&host)?, guard: g, len })
    }

    /// `data` between two guard regions (an in/out operand such as axpy's y).
    pub fn with_data(ctx: &Context, data: &[T]) -> Result<Self> {
        let g = Self::guard_elems();
        let mut host = vec![T::GUARD; data.len() + 2 * g];
        host[g..g + data.len()].copy_from_slice(data);
        Ok(Guarded { buf: ctx.upload(&host)?, guard: g, len: data.len() })
    }

    /// The output view handed to the op.
    pub fn view_mut(&mut self) -> BufMut<'_, T> {
        let (g, n) = (self.guard, self.len);
        self.buf.view_mut(g..g + n).expect("in range by construction")
    }

    /// Downloads the output and checks that both guard regions are untouched.
    pub fn finish(&self) -> Result<(Vec<T>, Option<GuardViolation>)> {
        let all = self.buf.to_host()?;
        let (g, n) = (self.guard, self.len);
        debug_assert_eq!(all.len(), g + n + Self::guard_elems());
        let bad = all
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < g || *i >= g + n)
            .find(|(_, v)| v.bits() != T::GUARD.bits())
            .map(|(i, v)| GuardViolation { offset: i as isize - g as isize, value: v.as_f64() });
        Ok((all[g..g + n].to_vec(), bad))
    }
}

/// A write into a guard region: `offset` is relative to the output's first element
/// (negative: before it; `>= len`: after it).
#[derive(Clone, Copy, Debug)]
pub struct GuardViolation {
    pub offset: isize,
    pub value: f64,
}

/// The first element that failed, and why.
#[derive(Clone, Debug)]
pub struct Mismatch {
    pub index: usize,
    pub got: f64,
    pub want: f64,
    pub tol: f64,
    pub reason: &'static str,
}

/// The outcome of one checked run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub elements: usize,
    pub max_abs_err: f64,
    /// Over elements with |reference| >= `Float::REL_FLOOR` (smaller ones are judged absolutely).
    pub max_rel_err: f64,
    /// Largest `|err| / tol` seen: how close the run came to failing (1.0 = at the limit).
    pub max_err_over_tol: f64,
    pub first_bad: Option<Mismatch>,
    pub guard: Option<GuardViolation>,
    /// How the tolerance was formed, for the report line.
    pub tol: String,
    /// Mismatching elements in all.
    pub bad_count: usize,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.first_bad.is_none() && self.guard.is_none()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stats =
            format!("max_abs_err={:.3e} max_rel_err={:.3e} tol={}", self.max_abs_err, self.max_rel_err, self.tol);
        if self.passed() {
            return write!(f, "PASS {stats}");
        }
        write!(f, "FAIL")?;
        if let Some(m) = &self.first_bad {
            write!(
                f,
                " first_bad_index={} got={:e} want={:e} tol={:.3e} ({}; {} of {} elements bad)",
                m.index, m.got, m.want, m.tol, m.reason, self.bad_count, self.elements
            )?;
        }
        if let Some(gv) = &self.guard {
            write!(f, " guard_written_at_offset={} value={:e}", gv.offset, gv.value)?;
        }
        write!(f, " {stats}")
    }
}

/// Compares `got` with `want`, element by element, allowing `bound[i]` of arithmetic error.
pub fn compare<T: Float>(got: &[T], want: &[f64], bound: &[f64], guard: Option<GuardViolation>) -> Report {
    assert_eq!(got.len(), want.len());
    assert_eq!(got.len(), bound.len());
    let mut r = Report {
        elements: got.len(),
        guard,
        tol: format!("bound+{:.1e}*|ref|+{:.1e} ({})", T::UNIT_ROUNDOFF, T::TINY, T::NAME),
        ..Report::default()
    };
    for (i, ((&g, &w), &b)) in got.iter().zip(want).zip(bound).enumerate() {
        let gv = g.to_f64();
        let tol = b + T::UNIT_ROUNDOFF * w.abs() + T::TINY;
        let bad = if g.to_bits32() == T::POISON_BITS {
            Some("not written: still poison")
        } else if tol.is_infinite() {
            None // the op's error analysis gives no bound here (documented per op)
        } else if w.is_nan() {
            (!gv.is_nan()).then_some("reference is NaN")
        } else if gv.is_nan() {
            Some("NaN where the reference is a number")
        } else if T::from_f64(w).to_f64().is_infinite() || gv.is_infinite() {
            (T::from_f64(w).to_f64() != gv).then_some("infinity mismatch")
        } else {
            let err = (gv - w).abs();
            r.max_abs_err = r.max_abs_err.max(err);
            if w.abs() >= T::REL_FLOOR {
                r.max_rel_err = r.max_rel_err.max(err / w.abs());
            }
            r.max_err_over_tol = r.max_err_over_tol.max(err / tol);
            (err > tol).then_some("outside tolerance")
        };
        if let Some(reason) = bad {
            r.bad_count += 1;
            if r.first_bad.is_none() {
                r.first_bad = Some(Mismatch { index: i, got: gv, want: w, tol, reason });
            }
        }
    }
    r
}

/// Compares outputs that must be exact (indices, maxima): bit-equal, or both NaN.
pub fn compare_exact<T: Sentinel>(got: &[T], want: &[T], guard: Option<GuardViolation>) -> Report {
    assert_eq!(got.len(), want.len());
    let mut r = Report { elements: got.len(), guard, tol: "exact".into(), ..Report::default() };
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (gv, wv) = (g.as_f64(), w.as_f64());
        let bad = if g.bits() == T::POISON.bits() {
            Some("not written: still poison")
        } else if gv.is_nan() && wv.is_nan() {
            None
        } else if g.bits() != w.bits() && gv != wv {
            Some("not equal")
        } else {
            None
        };
        if !gv.is_nan() && !wv.is_nan() {
            r.max_abs_err = r.max_abs_err.max((gv - wv).abs());
        }
        if let Some(reason) = bad {
            r.bad_count += 1;
            if r.first_bad.is_none() {
                r.first_bad = Some(Mismatch { index: i, got: gv, want: wv, tol: 0.0, reason });
            }
        }
    }
    r
}

/// Several outputs of one run (e.g. y, mean and rstd) judged together: the first failing
/// output's mismatch is reported; the error statistics are the worst over all outputs.
pub fn merge(named: Vec<(&str, Report)>) -> Report {
    let mut out = Report::default();
    let mut tols = Vec::new();
    for (name, r) in named {
        out.elements += r.elements;
        out.max_abs_err = out.max_abs_err.max(r.max_abs_err);
        out.max_rel_err = out.max_rel_err.max(r.max_rel_err);
        out.max_err_over_tol = out.max_err_over_tol.max(r.max_err_over_tol);
        out.bad_count += r.bad_count;
        if out.passed() && !r.passed() {
            out.first_bad = r.first_bad.map(|mut m| {
                m.reason = if m.reason.is_empty() { "mismatch" } else { m.reason };
                m
            });
            out.guard = r.guard;
            tols.insert(0, format!("{name}(failed): {}", r.tol));
        } else {
            tols.push(format!("{name}: {}", r.tol));
        }
    }
    out.tol = tols.join("; ");
    out
}
