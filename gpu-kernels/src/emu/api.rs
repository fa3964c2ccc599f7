//! The device API on the host: every call goes to the emulated thread running now.

use super::FaultKind;
use super::block::{Post, State, WarpOp, current};
use crate::device::warp::{ShflMode, VoteMode};
use core::panic::Location;
use std::sync::atomic::{AtomicU32, Ordering};

/// Ends the current emulated thread with `kind`; the block scheduler turns it into an
/// `EmuError` naming kernel, block and thread. `resume_unwind` skips the panic hook, so a
/// caught fault prints nothing.
fn fault(kind: FaultKind) -> ! {
    std::panic::resume_unwind(Box::new(kind))
}

pub fn thread_idx_x() -> u32 {
    current().tid.x
}
pub fn thread_idx_y() -> u32 {
    current().tid.y
}
pub fn block_idx_x() -> u32 {
    current().block().block_idx.x
}
pub fn block_idx_y() -> u32 {
    current().block().block_idx.y
}
pub fn block_idx_z() -> u32 {
    current().block().block_idx.z
}
pub fn block_dim_x() -> u32 {
    current().block().block_dim.x
}
pub fn block_dim_y() -> u32 {
    current().block().block_dim.y
}
pub fn grid_dim_x() -> u32 {
    current().block().grid_dim.x
}
pub fn grid_dim_y() -> u32 {
    current().block().grid_dim.y
}
pub fn lane_id() -> u32 {
    current().lane()
}

#[track_caller]
pub fn sync_threads() {
    let t = current();
    t.state.set(State::Barrier(Location::caller()));
    t.suspend();
}

/// Arrives at named barrier `id` for a phase of `threads` threads; returns the phase's number.
fn named_barrier_arrival(id: u32, threads: u32, at: &'static Location<'static>) -> u32 {
    let t = current();
    let block = t.block();
    let where_ = || format!("{}:{}", at.file(), at.line());
    let divergence = |detail: String| fault(FaultKind::BarrierDivergence { detail });
    if id == 0 || id as usize >= super::block::NAMED_BARRIERS {
        divergence(format!("named barrier {id} at {} does not exist: ids are 1 to 15", where_()));
    }
    let block_threads = block.block_dim.count() as u32;
    if threads == 0 || !threads.is_multiple_of(32) || threads > block_threads.next_multiple_of(32) {
        divergence(format!(
            "named barrier {id} at {} counts {threads} threads: a multiple of 32, at most the block's {block_threads}",
            where_()
        ));
    }
    let mut named = block.named.borrow_mut();
    let bar = &mut named[id as usize];
    if bar.threads == 0 {
        bar.threads = threads;
        bar.first = Some(at);
    } else if bar.threads != threads {
        divergence(format!(
            "thread {} arrives at named barrier {id} at {} for {threads} threads while the phase in progress counts {} ({}): every arrival of a phase must name the same count",
            super::d3(t.tid),
            where_(),
            bar.threads,
            bar.describe(id, block_threads)
        ));
    }
    bar.arrived += 1;
    if bar.per_warp.is_empty() {
        bar.per_warp = vec![0; block_threads.div_ceil(32) as usize];
    }
    bar.per_warp[t.warp() as usize] += 1;
    bar.arriving.release(block, t.linear);
    let phase = bar.completed;
    if bar.arrived == bar.threads {
        // Arrivals count whole warps on the GPU: a warp with some lanes missing would complete
        // the phase there with fewer threads than the emulator counted.
        let lanes = |w: usize| super::block::NamedBar::warp_lanes(w, block_threads);
        if let Some((w, &k)) = bar.per_warp.iter().enumerate().find(|&(w, &k)| !k.is_multiple_of(lanes(w))) {
            divergence(format!(
                "warp {w} arrived at named barrier {id} with {k} of its {} lanes (phase {}, completed at {}): bar.sync and bar.arrive count whole warps, so every lane of a warp must make the call",
                lanes(w),
                phase,
                where_()
            ));
        }
        bar.completed += 1;
        bar.released.complete(&mut bar.arriving);
        bar.threads = 0;
        bar.arrived = 0;
        bar.first = None;
        bar.per_warp.iter_mut().for_each(|k| *k = 0);
        block.progress.set(true);
    }
    phase
}

/// `bar.sync id, threads`: arrives and waits until the phase completes.
#[track_caller]
pub fn named_barrier_sync(id: u32, threads: u32) {
    let at = Location::caller();
    let phase = named_barrier_arrival(id, threads, at);
    let t = current();
    while t.block().named.borrow()[id as usize].completed <= phase {
        t.state.set(State::Named { id, phase, at });
        t.suspend();
    }
    t.block().named.borrow()[id as usize].released.acquire(t.block(), t.linear);
    t.state.set(State::Ready);
}

/// `bar.arrive id, threads`: arrives without waiting.
#[track_caller]
pub fn named_barrier_arrive(id: u32, threads: u32) {
    named_barrier_arrival(id, threads, Location::caller());
}

#[track_caller]
pub fn check_global<T>(addr: usize, len: usize, i: usize, n: usize, write: bool) {
    let size = size_of::<T>();
    let a = addr.wrapping_add(i.wrapping_mul(size));
    if i.checked_add(n).is_none_or(|end| end > len) {
        fault(FaultKind::OutOfBounds { write, index: i, count: n, len, addr: a, at: Location::caller() });
    }
    let align = if n > 1 { n * size } else { align_of::<T>() };
    if !a.is_multiple_of(align) {
        fault(FaultKind::Misaligned { addr: a, align, at: Location::caller() });
    }
}

/// A bulk async copy's global range: `i .. i + n` inside the view, the start 16-byte aligned
/// and the length a whole number of 16-byte chunks (the ISA's rule for `cp.async.bulk`).
#[track_caller]
pub fn check_global_bulk<T>(addr: usize, len: usize, i: usize, n: usize) {
    let size = size_of::<T>();
    let a = addr.wrapping_add(i.wrapping_mul(size));
    if n == 0 || i.checked_add(n).is_none_or(|end| end > len) {
        fault(FaultKind::OutOfBounds { write: true, index: i, count: n, len, addr: a, at: Location::caller() });
    }
    if !a.is_multiple_of(16) || !(n * size).is_multiple_of(16) {
        fault(FaultKind::Misaligned { addr: a, align: 16, at: Location::caller() });
    }
}

pub unsafe fn load_16b<T: Copy, const N: usize>(p: *const T) -> [T; N] {
    // SAFETY: the caller checked bounds and alignment.
    unsafe { (p as *const [T; N]).read() }
}

pub unsafe fn load_pair<T: Copy>(p: *const T) -> [T; 2] {
    // SAFETY: the caller checked bounds and alignment.
    unsafe { (p as *const [T; 2]).read() }
}

pub unsafe fn store_pair<T: Copy>(p: *mut T, v: [T; 2]) {
    // SAFETY: the caller checked bounds and alignment.
    unsafe { (p as *mut [T; 2]).write(v) }
}

pub unsafe fn store_16b<T: Copy, const N: usize>(p: *mut T, v: [T; N]) {
    // SAFETY: the caller checked bounds and alignment.
    unsafe { (p as *mut [T; N]).write(v) }
}

pub unsafe fn atomic_add_f32(p: *mut f32, v: f32) -> f32 {
    // SAFETY: the caller checked bounds; f32 and AtomicU32 have the same size and alignment.
    let a = unsafe { AtomicU32::from_ptr(p as *mut u32) };
    let old = a
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| Some((f32::from_bits(bits) + v).to_bits()))
        .expect("the update always succeeds");
    f32::from_bits(old)
}

/// `red.global.add.v2.f32`: each word's add is atomic, the pair is not one transaction (as on
/// the GPU).
pub unsafe fn red_add_f32x2(p: *mut f32, v: [f32; 2]) {
    // SAFETY: the caller checked bounds and alignment of both words.
    unsafe {
        atomic_add_f32(p, v[0]);
        atomic_add_f32(p.add(1), v[1]);
    }
}

pub unsafe fn atomic_add_u32(p: *mut u32, v: u32) -> u32 {
    // SAFETY: the caller checked bounds.
    unsafe { AtomicU32::from_ptr(p) }.fetch_add(v, Ordering::Relaxed)
}

#[track_caller]
fn shared_access<T>(offset: u32, len: u32, i: u32, write: bool) -> u32 {
    let t = current();
    let block = t.block();
    let size = size_of::<T>() as u32;
    let at = Location::caller();
    let byte = (i as u64) * size as u64 + offset as u64;
    if i >= len || byte + size as u64 > block.shared.size() as u64 {
        fault(FaultKind::SharedOutOfBounds { write, index: i, len, offset, shared_bytes: block.shared.size(), at });
    }
    let byte = byte as u32;
    if !byte.is_multiple_of(align_of::<T>() as u32) {
        fault(FaultKind::Misaligned { addr: byte as usize, align: align_of::<T>(), at });
    }
    if let Err(k) = block.shared.track(t, block, byte, size, write, at) {
        fault(k);
    }
    byte
}

#[track_caller]
pub fn shared_load<T: Copy>(offset: u32, len: u32, i: u32) -> T {
    let byte = shared_access::<T>(offset, len, i, false);
    current().block().shared.read(byte)
}

#[track_caller]
pub fn shared_store<T: Copy>(offset: u32, len: u32, i: u32, v: T) {
    let byte = shared_access::<T>(offset, len, i, true);
    current().block().shared.write(byte, v)
}

#[track_caller]
fn warp_collective(op: WarpOp, mask: u32, value: u32, arg: u32) -> u32 {
    let t = current();
    let block = t.block();
    block.posts.borrow_mut()[t.linear as usize] = Some(Post { op, mask, value, arg, at: Location::caller() });
    t.state.set(State::Warp);
    t.suspend();
    block.results[t.linear as usize].get()
}

#[track_caller]
pub fn shfl_sync(mode: ShflMode, mask: u32, v: u32, arg: u32) -> u32 {
    warp_collective(WarpOp::Shfl(mode), mask, v, arg)
}

#[track_caller]
pub fn vote_sync(mode: VoteMode, mask: u32, pred: bool) -> u32 {
    warp_collective(WarpOp::Vote(mode), mask, pred as u32, 0)
}

#[track_caller]
pub fn sync_warp(mask: u32) {
    warp_collective(WarpOp::Sync, mask, 0, 0);
}

pub fn exp2_approx(x: f32) -> f32 {
    x.exp2()
}
pub fn opaque_u32(x: u32) -> u32 {
    x
}
pub fn opaque_usize(x: usize) -> usize {
    x
}
pub fn exp2_approx_ftz(x: f32) -> f32 {
    // Subnormal inputs count as zero and subnormal results flush to (sign-preserving) zero.
    let x = if x.is_subnormal() { 0.0 } else { x };
    let r = x.exp2();
    if r.is_subnormal() { 0.0 } else { r }
}
pub fn log2_approx(x: f32) -> f32 {
    x.log2()
}
pub fn rcp_approx(x: f32) -> f32 {
    1.0 / x
}
pub fn rsqrt_approx(x: f32) -> f32 {
    1.0 / x.sqrt()
}
pub fn sqrt_rn(x: f32) -> f32 {
    x.sqrt()
}
pub fn fma_rn(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}
pub fn max_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() { f32::NAN } else { a.max(b) }
}

pub use super::hopper::{
    bulk_commit_group, bulk_reduce_add_f32, bulk_wait_group, fence_f32x4, fence_f32x32, fence_f32x64, fence_f32x128,
    fence_mbarrier_init, fence_proxy_async, fence_tensormap_acquire, fence_u32x4, mbar_arrive, mbar_init, mbar_wait,
    setmaxnreg_dec, setmaxnreg_inc, smem_addr, tma_load_2d, tma_load_3d, wgmma_commit, wgmma_fence, wgmma_m64n64k16,
    wgmma_m64n128k16, wgmma_m64n256k16, wgmma_rs_m64n64k16, wgmma_rs_m64n128k16, wgmma_rs_m64n256k16, wgmma_wait,
};
pub use super::mma::{cp_async_16, cp_async_commit, cp_async_wait_group, cvt_pack_f32x2, ldmatrix, mma_m16n8k16};
