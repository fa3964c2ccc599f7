//! Warp-level collectives (`__shfl_*_sync`, `__all_sync`, `__any_sync`, `__ballot_sync`,
//! `__syncwarp`). Every lane named in `mask` must execute the same collective; the emulator
//! waits for all of them and reports a lane that exited or went elsewhere as divergence.

use super::imp;

/// All 32 lanes.
pub const FULL_MASK: u32 = 0xFFFF_FFFF;

/// This thread's lane in its warp (0..32).
#[inline(always)]
pub fn lane_id() -> u32 {
    imp::lane_id()
}

/// A 32-bit value that can travel through a shuffle.
pub trait ShflValue: Copy {
    fn to_bits32(self) -> u32;
    fn from_bits32(b: u32) -> Self;
}
impl ShflValue for u32 {
    #[inline(always)]
    fn to_bits32(self) -> u32 {
        self
    }
    #[inline(always)]
    fn from_bits32(b: u32) -> Self {
        b
    }
}
impl ShflValue for i32 {
    #[inline(always)]
    fn to_bits32(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn from_bits32(b: u32) -> Self {
        b as i32
    }
}
impl ShflValue for f32 {
    #[inline(always)]
    fn to_bits32(self) -> u32 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_bits32(b: u32) -> Self {
        f32::from_bits(b)
    }
}

/// How a shuffle picks its source lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShflMode {
    /// from lane `arg` (`__shfl_sync`)
    Idx,
    /// from lane `lane - arg`, own value below it (`__shfl_up_sync`)
    Up,
    /// from lane `lane + arg`, own value past lane 31 (`__shfl_down_sync`)
    Down,
    /// from lane `lane ^ arg` (`__shfl_xor_sync`)
    Xor,
}

#[inline(always)]
#[track_caller]
pub fn shfl_sync<V: ShflValue>(mode: ShflMode, mask: u32, v: V, arg: u32) -> V {
    V::from_bits32(imp::shfl_sync(mode, mask, v.to_bits32(), arg))
}

#[inline(always)]
#[track_caller]
pub fn shfl_down_sync<V: ShflValue>(mask: u32, v: V, delta: u32) -> V {
    shfl_sync(ShflMode::Down, mask, v, delta)
}

#[inline(always)]
#[track_caller]
pub fn shfl_up_sync<V: ShflValue>(mask: u32, v: V, delta: u32) -> V {
    shfl_sync(ShflMode::Up, mask, v, delta)
}

#[inline(always)]
#[track_caller]
pub fn shfl_xor_sync<V: ShflValue>(mask: u32, v: V, lane_mask: u32) -> V {
    shfl_sync(ShflMode::Xor, mask, v, lane_mask)
}

#[inline(always)]
#[track_caller]
pub fn shfl_idx_sync<V: ShflValue>(mask: u32, v: V, src_lane: u32) -> V {
    shfl_sync(ShflMode::Idx, mask, v, src_lane)
}

/// A vote over the lanes of `mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteMode {
    All,
    Any,
    Ballot,
}

/// `__all_sync`: true when `pred` holds on every lane of `mask`.
#[inline(always)]
#[track_caller]
pub fn all_sync(mask: u32, pred: bool) -> bool {
    imp::vote_sync(VoteMode::All, mask, pred) != 0
}

/// `__any_sync`: true when `pred` holds on some lane of `mask`.
#[inline(always)]
#[track_caller]
pub fn any_sync(mask: u32, pred: bool) -> bool {
    imp::vote_sync(VoteMode::Any, mask, pred) != 0
}

/// `__ballot_sync`: bit `l` set when `pred` holds on lane `l` of `mask`.
#[inline(always)]
#[track_caller]
pub fn ballot_sync(mask: u32, pred: bool) -> u32 {
    imp::vote_sync(VoteMode::Ballot, mask, pred)
}

/// `__syncwarp`: the lanes of `mask` wait for each other, and their shared-memory accesses
/// before it are ordered before those after it.
#[inline(always)]
#[track_caller]
pub fn sync_warp(mask: u32) {
    imp::sync_warp(mask)
}

/// Sum over the 32 lanes of a full warp (butterfly, so every lane gets the total).
#[inline(always)]
#[track_caller]
pub fn reduce_sum_f32(mut v: f32) -> f32 {
    let mut offset = 16;
    while offset > 0 {
        v += shfl_xor_sync(FULL_MASK, v, offset);
        offset /= 2;
    }
    v
}

/// Max over the 32 lanes of a full warp; NaN in any lane gives NaN.
#[inline(always)]
#[track_caller]
pub fn reduce_max_f32(mut v: f32) -> f32 {
    let mut offset = 16;
    while offset > 0 {
        v = super::math::max_nan(v, shfl_xor_sync(FULL_MASK, v, offset));
        offset /= 2;
    }
    v
}
