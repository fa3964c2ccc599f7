//! Reductions across a warp or a whole block, over any state that knows how to combine.
//!
//! A state travels as up to three 32-bit words (a shuffle moves one word). Warp reductions
//! are butterflies (`shfl_xor`), so every lane ends with the result; block reductions combine
//! each warp's result through a small shared scratch that every warp then reduces itself, so
//! every thread ends with the result after two barriers. The combination order is fixed, so
//! results are bitwise deterministic run to run, and every lane of a group gets the same bits
//! even where `combine` is not symmetric ([`Reduce::SYMMETRIC`]).

use super::thread::{block_dim_x, sync_threads, thread_idx_x};
use super::warp::{FULL_MASK, lane_id, shfl_xor_sync};
use super::{Shared, WARP_SIZE, math};

/// A reduction state: an associative combine plus a word encoding for shuffles and shared memory.
pub trait Reduce: Copy {
    /// Words used by the encoding (1..=3).
    const WORDS: u32;
    /// Whether `a.combine(b)` and `b.combine(a)` have the same bits. Where they may not
    /// ([`Moments`]), the warp butterfly puts the lower lane's state first in both lanes of
    /// each pair, so that every lane of the group still ends with the same bits.
    const SYMMETRIC: bool = true;
    /// The identity of `combine`.
    fn identity() -> Self;
    fn combine(self, other: Self) -> Self;
    fn to_words(self) -> [u32; 3];
    fn from_words(w: [u32; 3]) -> Self;
}

/// Words of shared scratch a block reduction needs: one state per warp.
pub const fn block_scratch_words(words: u32) -> u32 {
    32 * words
}

/// Sum of f32.
#[derive(Clone, Copy)]
pub struct Sum(pub f32);

impl Reduce for Sum {
    const WORDS: u32 = 1;
    #[inline(always)]
    fn identity() -> Self {
        Sum(0.0)
    }
    #[inline(always)]
    fn combine(self, o: Self) -> Self {
        Sum(self.0 + o.0)
    }
    #[inline(always)]
    fn to_words(self) -> [u32; 3] {
        [self.0.to_bits(), 0, 0]
    }
    #[inline(always)]
    fn from_words(w: [u32; 3]) -> Self {
        Sum(f32::from_bits(w[0]))
    }
}

/// Max of f32 where NaN wins, so a NaN anywhere in the input reaches the result.
#[derive(Clone, Copy)]
pub struct MaxNan(pub f32);

impl Reduce for MaxNan {
    const WORDS: u32 = 1;
    #[inline(always)]
    fn identity() -> Self {
        MaxNan(f32::NEG_INFINITY)
    }
    #[inline(always)]
    fn combine(self, o: Self) -> Self {
        MaxNan(math::max_nan(self.0, o.0))
    }
    #[inline(always)]
    fn to_words(self) -> [u32; 3] {
        [self.0.to_bits(), 0, 0]
    }
    #[inline(always)]
    fn from_words(w: [u32; 3]) -> Self {
        MaxNan(f32::from_bits(w[0]))
    }
}

/// (value, index) of the maximum: NaN counts as larger than everything, and among equal
/// values the smaller index wins, so the result is the first maximum (as `torch.argmax`).
#[derive(Clone, Copy)]
pub struct ArgMax {
    pub value: f32,
    pub index: u32,
}

impl ArgMax {
    #[inline(always)]
    fn beats(&self, o: &Self) -> bool {
        if self.index == u32::MAX {
            return false;
        }
        if o.index == u32::MAX {
            return true;
        }
        let (a, b) = (self.value, o.value);
        if a.is_nan() || b.is_nan() {
            return match (a.is_nan(), b.is_nan()) {
                (true, false) => true,
                (false, true) => false,
                _ => self.index < o.index,
            };
        }
        a > b || (a == b && self.index < o.index)
    }
}

impl Reduce for ArgMax {
    const WORDS: u32 = 2;
    #[inline(always)]
    fn identity() -> Self {
        ArgMax { value: f32::NEG_INFINITY, index: u32::MAX }
    }
    #[inline(always)]
    fn combine(self, o: Self) -> Self {
        if self.beats(&o) { self } else { o }
    }
    #[inline(always)]
    fn to_words(self) -> [u32; 3] {
        [self.value.to_bits(), self.index, 0]
    }
    #[inline(always)]
    fn from_words(w: [u32; 3]) -> Self {
        ArgMax { value: f32::from_bits(w[0]), index: w[1] }
    }
}

/// The online-softmax state: running max `m` and the sum `s` of `e^(x - m)`. Combining
/// rescales the smaller side's sum; a side with `m = -inf` (nothing seen, or only -inf)
/// contributes nothing, so fully masked inputs give `s = 0` rather than NaN.
#[derive(Clone, Copy)]
pub struct SoftmaxStats {
    pub m: f32,
    pub s: f32,
}

impl Reduce for SoftmaxStats {
    const WORDS: u32 = 2;
    #[inline(always)]
    fn identity() -> Self {
        SoftmaxStats { m: f32::NEG_INFINITY, s: 0.0 }
    }
    #[inline(always)]
    fn combine(self, o: Self) -> Self {
        let m = math::max_nan(self.m, o.m);
        if m == f32::NEG_INFINITY {
            return SoftmaxStats::identity();
        }
        let scale = |x: &Self| if x.m == f32::NEG_INFINITY { 0.0 } else { x.s * math::exp_approx(x.m - m) };
        SoftmaxStats { m, s: scale(&self) + scale(&o) }
    }
    #[inline(always)]
    fn to_words(self) -> [u32; 3] {
        [self.m.to_bits(), self.s.to_bits(), 0]
    }
    #[inline(always)]
    fn from_words(w: [u32; 3]) -> Self {
        SoftmaxStats { m: f32::from_bits(w[0]), s: f32::from_bits(w[1]) }
    }
}

/// Two sums reduced together (one shuffle round for both).
#[derive(Clone, Copy)]
pub struct Sum2(pub f32, pub f32);

impl Reduce for Sum2 {
    const WORDS: u32 = 2;
    #[inline(always)]
    fn identity() -> Self {
        Sum2(0.0, 0.0)
    }
    #[inline(always)]
    fn combine(self, o: Self) -> Self {
        Sum2(self.0 + o.0, self.1 + o.1)
    }
    #[inline(always)]
    fn to_words(self) -> [u32; 3] {
        [self.0.to_bits(), self.1.to_bits(), 0]
    }
    #[inline(always)]
    fn from_words(w: [u32; 3]) -> Self {
        Sum2(f32::from_bits(w[0]), f32::from_bits(w[1]))
    }
}

/// The count, mean and sum of squared deviations (`M2`) of a set of values, merged with
/// Chan, Golub and LeVeque's pairwise update. Not symmetric bit for bit (the mean moves
/// from `self` towards `o`).
#[derive(Clone, Copy)]
pub struct Moments {
    pub n: f32,
    pub mean: f32,
    pub m2: f32,
}

impl Reduce for Moments {
    const WORDS: u32 = 3;
    const SYMMETRIC: bool = false;
    #[inline(always)]
    fn identity() -> Self {
        Moments { n: 0.0, mean: 0.0, m2: 0.0 }
    }
    #[inline(always)]
    fn combine(self, o: Self) -> Self {
        // An empty side returns the other whole (0 / 0 would be NaN when both are empty).
        if o.n == 0.0 {
            return self;
        }
        if self.n == 0.0 {
            return o;
        }
        let n = self.n + o.n;
        let delta = o.mean - self.mean;
        let mean = math::fma(delta, o.n / n, self.mean);
        let m2 = self.m2 + o.m2 + delta * delta * (self.n * (o.n / n));
        Moments { n, mean, m2 }
    }
    #[inline(always)]
    fn to_words(self) -> [u32; 3] {
        [self.n.to_bits(), self.mean.to_bits(), self.m2.to_bits()]
    }
    #[inline(always)]
    fn from_words(w: [u32; 3]) -> Self {
        Moments { n: f32::from_bits(w[0]), mean: f32::from_bits(w[1]), m2: f32::from_bits(w[2]) }
    }
}

/// Combines `n` states `at(0), ..., at(n - 1)` across a full warp: lane `l` folds
/// `at(l), at(l + 32), ...` in order and the lanes are reduced by [`warp_reduce`], so any
/// warp of any block that folds the same states gets the same bits in every lane. For the
/// split strategies' second launch, where every block of a row needs the row's statistics
/// from its segments' partials. Each thread used to fold all `n` itself: 128 segments (a
/// million columns) in front of the 16 elements it then writes; the split forward ops ran at
/// 0.09-0.18 of a copy there, f16 as slow as f32 (H200, 2026-12-04).
#[inline(always)]
#[track_caller]
pub fn warp_fold<R: Reduce>(n: usize, at: impl Fn(usize) -> R) -> R {
    let mut acc = R::identity();
    let mut i = lane_id() as usize;
    while i < n {
        acc = acc.combine(at(i));
        i += WARP_SIZE as usize;
    }
    warp_reduce(acc)
}

/// Reduces over the 32 lanes of a full warp; every lane gets the result.
#[inline(always)]
#[track_caller]
pub fn warp_reduce<R: Reduce>(v: R) -> R {
    warp_reduce_groups(v, WARP_SIZE)
}

/// Reduces over aligned groups of `width` lanes of a full warp (`width` a power of two, 1 to
/// 32): lanes `k * width .. (k + 1) * width` reduce their own values, and each of them gets its
/// group's result, the same bits in every lane (each pair combines the lower lane's state
/// with the upper's, in both lanes, unless `combine` is [`Reduce::SYMMETRIC`]). Every lane of
/// the warp must call it.
#[inline(always)]
#[track_caller]
pub fn warp_reduce_groups<R: Reduce>(v: R, width: u32) -> R {
    let mut v = v;
    let mut offset = width / 2;
    while offset > 0 {
        let w = v.to_words();
        let mut o = [0u32; 3];
        for i in 0..R::WORDS as usize {
            o[i] = shfl_xor_sync(FULL_MASK, w[i], offset);
        }
        let other = R::from_words(o);
        v = if R::SYMMETRIC || lane_id() & offset == 0 { v.combine(other) } else { other.combine(v) };
        offset /= 2;
    }
    v
}

/// Reduces over every thread of a 1-D block (a multiple of 32 threads); every thread gets the
/// result. `scratch` needs [`block_scratch_words`]`(R::WORDS)` words and is free again when
/// this returns. Every thread of the block must call it.
#[inline(always)]
#[track_caller]
pub fn block_reduce<R: Reduce>(v: R, scratch: Shared<u32>) -> R {
    let v = warp_reduce(v);
    let tid = thread_idx_x();
    let (warp, lane) = (tid / WARP_SIZE, tid % WARP_SIZE);
    let warps = block_dim_x() / WARP_SIZE;
    if lane == 0 {
        let w = v.to_words();
        for i in 0..R::WORDS {
            scratch.store(warp * R::WORDS + i, w[i as usize]);
        }
    }
    sync_threads();
    let mut mine = R::identity();
    if lane < warps {
        let mut w = [0u32; 3];
        for i in 0..R::WORDS {
            w[i as usize] = scratch.load(lane * R::WORDS + i);
        }
        mine = R::from_words(w);
    }
    let total = warp_reduce(mine);
    // The next reduction may overwrite the scratch only after every warp has read it.
    sync_threads();
    total
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::{Moments, Reduce, warp_reduce_groups};
    use crate::device::GlobalMut;
    use crate::device::warp::lane_id;

    #[derive(Clone, Copy)]
    struct Params {
        out: GlobalMut<u32>,
        width: u32,
    }

    /// Each lane reduces a [`Moments`] (whose combine is not symmetric) over groups of
    /// `width` lanes and writes the result's three words.
    fn reduce_moments(p: Params) {
        let lane = lane_id();
        let l = lane as f32;
        // Scattered means: with these, an unordered butterfly leaves lanes of one group with
        // different bits at every width tested (checked with a host model of it).
        let scattered = (lane as u64 * 2654435761 % 1000) as f32 * 0.0137 - 5.0 + l * 1e-3;
        let mine = Moments { n: (1 + lane % 3) as f32, mean: scattered, m2: l * 0.1 };
        let w = warp_reduce_groups(mine, p.width).to_words();
        for (i, &word) in w.iter().enumerate() {
            p.out.store(lane as usize * 3 + i, word);
        }
    }

    /// Every lane of a group ends with the same bits, though `a.combine(b)` and
    /// `b.combine(a)` differ: the butterfly puts the lower lane's state first in both lanes.
    #[test]
    fn every_lane_of_a_group_gets_the_same_bits_from_a_non_symmetric_combine() {
        for width in [2u32, 8, 32] {
            let mut host = vec![0u32; 32 * 3];
            // SAFETY: `host` outlives the launch and is not touched during it.
            let out = unsafe { GlobalMut::from_raw_parts(host.as_mut_ptr(), host.len()) };
            let def = crate::KernelDef { name: "reduce_moments", body: reduce_moments };
            let cfg = crate::emu::LaunchConfig { grid: crate::Dim3::x(1), block: crate::Dim3::x(32), shared_bytes: 0 };
            crate::emu::launch(&def, &cfg, Params { out, width }).unwrap();
            for (g, group) in host.chunks(3 * width as usize).enumerate() {
                for (l, lane) in group.chunks(3).enumerate() {
                    assert_eq!(
                        lane,
                        &group[..3],
                        "width {width}: lane {l} of group {g} differs from the group's lane 0"
                    );
                }
            }
        }
    }
}
