//! Memory views: the only way a kernel reads or writes memory. See the module docs of
//! [`crate::device`] for what is checked where.

use super::imp;
use core::marker::PhantomData;

/// A read-only view of `len` elements of global memory, passed to a kernel inside its
/// `#[repr(C)]` parameter struct.
#[repr(C)]
#[derive(Debug)]
pub struct Global<T> {
    ptr: *const T,
    len: usize,
}

/// A writable view of `len` elements of global memory.
#[repr(C)]
#[derive(Debug)]
pub struct GlobalMut<T> {
    ptr: *mut T,
    len: usize,
}

// Views are plain (pointer, length) pairs handed to every thread of a launch, like a CUDA
// kernel's pointer arguments; derive would wrongly require `T: Copy`.
impl<T> Clone for Global<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Global<T> {}
impl<T> Clone for GlobalMut<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GlobalMut<T> {}

// SAFETY: a view is an address range in device memory (or emulator memory that outlives the
// launch); sharing it across the emulator's worker threads is what a launch does on the GPU.
unsafe impl<T: Send> Send for Global<T> {}
// SAFETY: as above; concurrent access discipline is the kernel's, checked by the emulator.
unsafe impl<T: Sync> Sync for Global<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for GlobalMut<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for GlobalMut<T> {}

impl<T: Copy> Global<T> {
    /// An empty view, for parameters a kernel variant does not use.
    pub const fn empty() -> Self {
        Global { ptr: core::ptr::null(), len: 0 }
    }

    /// # Safety
    /// `ptr` must be valid for reads of `len` elements of `T` for the whole launch (device
    /// memory on the GPU, emulator memory on the host). Only launchers call this.
    pub const unsafe fn from_raw_parts(ptr: *const T, len: usize) -> Self {
        Global { ptr, len }
    }

    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The view's address (device address on the GPU); used for alignment decisions.
    #[inline(always)]
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    /// Loads element `i`. Plain `ld` on the GPU; bounds-checked on the emulator.
    #[inline(always)]
    #[track_caller]
    pub fn load(&self, i: usize) -> T {
        imp::check_global::<T>(self.ptr as usize, self.len, i, 1, false);
        // SAFETY: the launcher made the view valid for `len` elements; `i < len` is the kernel's
        // guard, proven by the emulator's check above in every property test.
        unsafe { self.ptr.add(i).read() }
    }

    /// Loads elements `i` and `i + 1` with one load of both (8 bytes of f32, 4 of a 16-bit
    /// type); element `i` must be aligned to the pair's size (the emulator faults otherwise,
    /// as the GPU would).
    #[inline(always)]
    #[track_caller]
    pub fn load_pair(&self, i: usize) -> [T; 2] {
        imp::check_global::<T>(self.ptr as usize, self.len, i, 2, false);
        // SAFETY: as in `load`, for both elements; alignment checked as above.
        unsafe { imp::load_pair::<T>(self.ptr.add(i)) }
    }

    /// Loads the 16-byte chunk `chunk` (elements `chunk*N .. chunk*N+N`) with one 128-bit load.
    /// The view's address must be 16-byte aligned (the launcher picks this path only then; the
    /// emulator faults on a misaligned chunk as the GPU would).
    #[inline(always)]
    #[track_caller]
    pub fn load_chunk<const N: usize>(&self, chunk: usize) -> [T; N] {
        const { assert!(N * core::mem::size_of::<T>() == 16, "a chunk is 16 bytes") };
        imp::check_global::<T>(self.ptr as usize, self.len, chunk * N, N, false);
        // SAFETY: as in `load`, for the N elements of the chunk; alignment checked as above.
        unsafe { imp::load_16b::<T, N>(self.ptr.add(chunk * N)) }
    }
}

impl<T: Copy> GlobalMut<T> {
    /// An empty view, for parameters a kernel variant does not use.
    pub const fn empty() -> Self {
        GlobalMut { ptr: core::ptr::null_mut(), len: 0 }
    }

    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` elements of `T` for the whole launch.
    /// Only launchers call this.
    pub const unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        GlobalMut { ptr, len }
    }

    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    /// The same memory, read-only.
    #[inline(always)]
    pub const fn as_global(&self) -> Global<T> {
        Global { ptr: self.ptr as *const T, len: self.len }
    }

    #[inline(always)]
    #[track_caller]
    pub fn load(&self, i: usize) -> T {
        self.as_global().load(i)
    }

    /// Stores element `i`. Plain `st` on the GPU; bounds-checked on the emulator.
    #[inline(always)]
    #[track_caller]
    pub fn store(&self, i: usize, v: T) {
        imp::check_global::<T>(self.ptr as usize, self.len, i, 1, true);
        // SAFETY: see `Global::load`.
        unsafe { self.ptr.add(i).write(v) }
    }

    #[inline(always)]
    #[track_caller]
    pub fn load_chunk<const N: usize>(&self, chunk: usize) -> [T; N] {
        self.as_global().load_chunk(chunk)
    }

    /// The first `mid` elements and the rest, as two views of the same memory (a launcher
    /// carving one scratch allocation into regions). Panics if `mid > len`.
    pub fn split_at(self, mid: usize) -> (GlobalMut<T>, GlobalMut<T>) {
        assert!(mid <= self.len, "split_at {mid} of a view of {} elements", self.len);
        (GlobalMut { ptr: self.ptr, len: mid }, GlobalMut { ptr: self.ptr.wrapping_add(mid), len: self.len - mid })
    }

    /// Stores elements `i` and `i + 1` with one store of both; see [`Global::load_pair`].
    #[inline(always)]
    #[track_caller]
    pub fn store_pair(&self, i: usize, v: [T; 2]) {
        imp::check_global::<T>(self.ptr as usize, self.len, i, 2, true);
        // SAFETY: see `load_pair`.
        unsafe { imp::store_pair::<T>(self.ptr.add(i), v) }
    }

    #[inline(always)]
    #[track_caller]
    pub fn load_pair(&self, i: usize) -> [T; 2] {
        self.as_global().load_pair(i)
    }

    /// Stores the 16-byte chunk `chunk` with one 128-bit store; see [`Global::load_chunk`].
    #[inline(always)]
    #[track_caller]
    pub fn store_chunk<const N: usize>(&self, chunk: usize, v: [T; N]) {
        const { assert!(N * core::mem::size_of::<T>() == 16, "a chunk is 16 bytes") };
        imp::check_global::<T>(self.ptr as usize, self.len, chunk * N, N, true);
        // SAFETY: see `load_chunk`.
        unsafe { imp::store_16b::<T, N>(self.ptr.add(chunk * N), v) }
    }
}

impl GlobalMut<f32> {
    /// `atomicAdd` on element `i`; returns the old value.
    #[inline(always)]
    #[track_caller]
    pub fn atomic_add(&self, i: usize, v: f32) -> f32 {
        imp::check_global::<f32>(self.ptr as usize, self.len, i, 1, true);
        // SAFETY: checked as in `store`; the address is 4-byte aligned as an f32 element.
        unsafe { imp::atomic_add_f32(self.ptr.add(i), v) }
    }

    /// Adds `v[0]` to element `i` and `v[1]` to element `i + 1` with one 8-byte reduction
    /// (`red.global.add.v2.f32`, no old value): half the atomic instructions of two
    /// [`atomic_add`](Self::atomic_add)s. Each element's add is atomic; the pair is not one
    /// transaction. `i` must be even from an 8-byte aligned view (the emulator reports a
    /// misaligned pair). sm_90 and newer: only the sm_90a kernels use it (it traps elsewhere).
    #[inline(always)]
    #[track_caller]
    pub fn red_add2(&self, i: usize, v: [f32; 2]) {
        imp::check_global::<f32>(self.ptr as usize, self.len, i, 2, true);
        // SAFETY: checked as in `store_chunk`: both elements in bounds, 8-byte aligned.
        unsafe { imp::red_add_f32x2(self.ptr.add(i), v) }
    }

    /// `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32`: adds the `n` f32 at
    /// shared byte `src` to elements `i .. i + n`, asynchronously, each element's add atomic
    /// (one instruction for a whole row of a tile instead of `n / 2` [`red_add2`](Self::red_add2)s).
    /// Both addresses 16-byte aligned and `n` a multiple of 4 (16 bytes); the shared bytes
    /// must have been stored and then published by their writers' `fence.proxy.async`, as for
    /// a wgmma operand. The op joins the calling thread's open bulk group
    /// ([`bulk_commit_group`](crate::device::hopper::bulk_commit_group)); the source must not
    /// be rewritten before [`bulk_wait_group_read`](crate::device::hopper::bulk_wait_group_read)
    /// covers it. The emulator checks all of this; sm_90a only (it traps elsewhere).
    #[inline(always)]
    #[track_caller]
    pub fn bulk_reduce_add(&self, i: usize, src: u32, n: usize) {
        imp::check_global_bulk::<f32>(self.ptr as usize, self.len, i, n);
        // SAFETY: checked on the emulator: `i .. i + n` in bounds, 16-byte aligned, a whole
        // number of 16-byte chunks; the shared source is checked by the emulator's async proxy.
        unsafe { imp::bulk_reduce_add_f32(self.ptr.add(i), src, (n * 4) as u32) }
    }
}

impl GlobalMut<u32> {
    /// The same words viewed as f32 (every bit pattern is a valid f32): scratch memory is
    /// handed out as u32 words.
    #[inline(always)]
    pub const fn as_f32(self) -> GlobalMut<f32> {
        GlobalMut { ptr: self.ptr as *mut f32, len: self.len }
    }

    /// `atomicAdd` on element `i`; returns the old value.
    #[inline(always)]
    #[track_caller]
    pub fn atomic_add(&self, i: usize, v: u32) -> u32 {
        imp::check_global::<u32>(self.ptr as usize, self.len, i, 1, true);
        // SAFETY: checked as in `store`.
        unsafe { imp::atomic_add_u32(self.ptr.add(i), v) }
    }
}

/// A view of `len` elements of the block's shared memory, starting `offset` bytes into the
/// dynamic shared segment. Shared layouts are compile-time constants of a kernel's config (the
/// host reads the segment size from the same config), so views are made with [`Shared::at`].
///
/// On the emulator every access is checked: bounds (against the view and the launch's shared
/// size), data races (a write and another thread's access with no barrier between them) and
/// reads of bytes nothing wrote.
#[derive(Debug)]
pub struct Shared<T> {
    offset: u32,
    len: u32,
    _t: PhantomData<T>,
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Shared<T> {}

impl<T: Copy> Shared<T> {
    /// The view of `len` elements at byte `offset` of the dynamic shared segment.
    pub const fn at(offset: u32, len: u32) -> Self {
        assert!((offset as usize).is_multiple_of(core::mem::align_of::<T>()), "misaligned shared view");
        Shared { offset, len, _t: PhantomData }
    }

    /// Bytes this view spans; layouts add these up.
    pub const fn bytes(len: u32) -> u32 {
        len * core::mem::size_of::<T>() as u32
    }

    #[inline(always)]
    pub const fn len(&self) -> u32 {
        self.len
    }

    /// The view's byte offset in the dynamic shared segment (for warp-wide loads such as
    /// `ldmatrix`, which take shared addresses).
    #[inline(always)]
    pub const fn offset(&self) -> u32 {
        self.offset
    }

    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    #[track_caller]
    pub fn load(&self, i: u32) -> T {
        imp::shared_load::<T>(self.offset, self.len, i)
    }

    #[inline(always)]
    #[track_caller]
    pub fn store(&self, i: u32, v: T) {
        imp::shared_store::<T>(self.offset, self.len, i, v)
    }
}

/// 16 bytes that move as one shared access (`LDS.128` / `STS.128`): a 16-byte chunk of any
/// element type (4 f32 or 8 f16/bf16), as the row ops cache rows in shared memory.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
pub struct Bytes16([u32; 4]);

impl Shared<Bytes16> {
    /// Stores `N` elements of `T` (16 bytes) as chunk `i`.
    #[inline(always)]
    #[track_caller]
    pub fn store_chunk<T: Copy, const N: usize>(&self, i: u32, v: [T; N]) {
        const { assert!(N * core::mem::size_of::<T>() == 16, "a chunk is 16 bytes") };
        // SAFETY: both types are 16 bytes of plain data (the assert above); every bit
        // pattern is a valid `Bytes16`.
        self.store(i, unsafe { core::mem::transmute_copy::<[T; N], Bytes16>(&v) })
    }

    /// Loads chunk `i` as `N` elements of `T`. `T` must be a plain-data element type (f32,
    /// f16, bf16, integers), for which every bit pattern is valid.
    #[inline(always)]
    #[track_caller]
    pub fn load_chunk<T: super::Element, const N: usize>(&self, i: u32) -> [T; N] {
        const { assert!(N * core::mem::size_of::<T>() == 16, "a chunk is 16 bytes") };
        // SAFETY: 16 bytes to 16 bytes (the assert above); `Element` types are plain data
        // with no invalid bit patterns.
        unsafe { core::mem::transmute_copy::<Bytes16, [T; N]>(&self.load(i)) }
    }
}
