//! The device API: everything a kernel may touch, with one implementation per target.
//!
//! On `nvptx64` each call is a PTX instruction or special register; on the host each call goes
//! to the CPU emulator ([`crate::emu`]), which runs the kernel under the GPU's execution model and
//! checks what compute-sanitizer checks. Names follow `cuda_std` where they fit.
//!
//! # The safety model of memory views
//! Kernels reach memory only through views: [`Global`] / [`GlobalMut`] for global memory and
//! [`Shared`] for the block's shared memory. A view is made by the launcher (global) or from
//! the kernel's compile-time shared layout, never from arbitrary pointers inside a kernel.
//! On the GPU a view access is a plain load or store, exactly as in CUDA C++: the index is the
//! kernel's responsibility, guarded by the kernel's own `if i < n` checks. On the emulator
//! every access is bounds-checked (and shared accesses are race- and init-checked), and the
//! property tests drive every kernel over its whole index space there. That is the trade:
//! no per-access check on the hot path of the GPU, and a tested guarantee instead of a static one.

mod element;
pub mod hopper;
pub mod math;
mod memory;
pub mod mma;
pub mod reduce;
pub mod warp;

#[cfg(target_arch = "nvptx64")]
pub(crate) mod ptx;

#[cfg(target_arch = "nvptx64")]
use ptx as imp;

#[cfg(not(target_arch = "nvptx64"))]
use crate::emu::api as imp;

pub use element::Element;

/// Optimization barriers for index arithmetic.
pub mod hint {
    use super::imp;

    /// `x`, but opaque to the compiler's reassociation: `opaque(base) + C` stays one add of a
    /// constant (folded into the instruction's immediate offset) instead of LLVM hoisting
    /// `invariant + C` out of a loop into one live register per constant. On the GPU a
    /// `mov.b32` that ptxas removes; on the emulator the identity.
    #[inline(always)]
    pub fn opaque_u32(x: u32) -> u32 {
        imp::opaque_u32(x)
    }

    /// [`opaque_u32`] for a 64-bit index.
    #[inline(always)]
    pub fn opaque_usize(x: usize) -> usize {
        imp::opaque_usize(x)
    }
}
pub use memory::{Bytes16, Global, GlobalMut, Shared};

/// Threads in a warp on every NVIDIA GPU ferrokern targets.
pub const WARP_SIZE: u32 = 32;

/// A grid or block extent, as in CUDA's `dim3`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    pub const fn x(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
    pub const fn xy(x: u32, y: u32) -> Self {
        Dim3 { x, y, z: 1 }
    }
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }
    /// x * y * z, widened so it cannot overflow.
    pub const fn count(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }
}

/// Thread and block coordinates (CUDA's `threadIdx`, `blockIdx`, `blockDim`, `gridDim`).
pub mod thread {
    use super::imp;

    /// `threadIdx.x`
    #[inline(always)]
    pub fn thread_idx_x() -> u32 {
        imp::thread_idx_x()
    }
    /// `threadIdx.y`
    #[inline(always)]
    pub fn thread_idx_y() -> u32 {
        imp::thread_idx_y()
    }
    /// `blockIdx.x`
    #[inline(always)]
    pub fn block_idx_x() -> u32 {
        imp::block_idx_x()
    }
    /// `blockIdx.y`
    #[inline(always)]
    pub fn block_idx_y() -> u32 {
        imp::block_idx_y()
    }
    /// `blockIdx.z`
    #[inline(always)]
    pub fn block_idx_z() -> u32 {
        imp::block_idx_z()
    }
    /// `blockDim.x`
    #[inline(always)]
    pub fn block_dim_x() -> u32 {
        imp::block_dim_x()
    }
    /// `blockDim.y`
    #[inline(always)]
    pub fn block_dim_y() -> u32 {
        imp::block_dim_y()
    }
    /// `gridDim.x`
    #[inline(always)]
    pub fn grid_dim_x() -> u32 {
        imp::grid_dim_x()
    }
    /// `gridDim.y`
    #[inline(always)]
    pub fn grid_dim_y() -> u32 {
        imp::grid_dim_y()
    }

    /// This thread's index in a 1-D grid of 1-D blocks, widened: `blockIdx.x * blockDim.x + threadIdx.x`.
    #[inline(always)]
    pub fn index_1d() -> usize {
        block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize
    }

    /// Total threads in a 1-D grid of 1-D blocks (the stride of a grid-stride loop).
    #[inline(always)]
    pub fn grid_threads_1d() -> usize {
        grid_dim_x() as usize * block_dim_x() as usize
    }

    /// This thread's linear index inside its block (x fastest).
    #[inline(always)]
    pub fn linear_thread_idx() -> u32 {
        (thread_idx_y() * block_dim_x()) + thread_idx_x()
    }

    /// `__syncthreads()`: every thread of the block waits here until all have arrived, and
    /// shared-memory writes before it are visible to all threads after it. Every thread must
    /// reach the same barrier; the emulator reports divergence (and a thread that exits while
    /// others wait) as an error.
    #[inline(always)]
    #[track_caller]
    pub fn sync_threads() {
        imp::sync_threads()
    }

    /// A named barrier (`bar.sync id, threads` / `bar.arrive id, threads`): hardware barrier
    /// `id` (1 to 15; 0 is [`sync_threads`]'s) shared by a subset of the block, `threads` of
    /// them (a multiple of 32). A phase completes when `threads` threads have arrived, by
    /// [`NamedBarrier::sync`] (which waits for the completion) or [`NamedBarrier::arrive`]
    /// (which does not). Arrivals count whole warps: every lane of a warp must make the same
    /// call, and every phase a kernel starts must complete before its block ends. The
    /// emulator reports a call with another thread count than the phase in progress, a warp
    /// arriving with some lanes only, a phase left incomplete at the block's end and threads
    /// that wait for arrivals that never come.
    ///
    /// A named barrier orders execution (FlashAttention-3's ping-pong: one warpgroup's matrix
    /// products issue while the other runs its softmax) and the shared-memory accesses of its
    /// participants: what a thread wrote before it arrived is visible to the threads that
    /// waited for that phase. The emulator's race detector follows the same rule (a vector
    /// clock per phase, `emu::shadow`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct NamedBarrier {
        id: u32,
        threads: u32,
    }

    impl NamedBarrier {
        /// Barrier `id` for `threads` threads; impossible values fail to compile in a const.
        pub const fn new(id: u32, threads: u32) -> Self {
            assert!(id >= 1 && id <= 15, "named barrier ids are 1 to 15 (0 is sync_threads')");
            assert!(
                threads >= 32 && threads <= 1024 && threads.is_multiple_of(32),
                "a named barrier counts whole warps: 32 to 1024 threads, a multiple of 32"
            );
            NamedBarrier { id, threads }
        }
        /// This barrier's id.
        pub const fn id(self) -> u32 {
            self.id
        }
        /// Barrier `self.id + k` with the same thread count (one barrier per warpgroup).
        #[inline(always)]
        pub fn offset(self, k: u32) -> Self {
            NamedBarrier { id: self.id + k, threads: self.threads }
        }
        /// Arrives and waits until the phase completes.
        #[inline(always)]
        #[track_caller]
        pub fn sync(self) {
            imp::named_barrier_sync(self.id, self.threads)
        }
        /// Arrives without waiting.
        #[inline(always)]
        #[track_caller]
        pub fn arrive(self) {
            imp::named_barrier_arrive(self.id, self.threads)
        }
    }
}
