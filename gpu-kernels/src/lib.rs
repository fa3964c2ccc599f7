//! ferrokern's device crate: every GPU kernel, written once in Rust.
//!
//! The same source compiles two ways:
//! - for `nvptx64-nvidia-cuda` (`no_std`), where each kernel becomes a PTX entry point that the
//!   host crate launches through the CUDA driver;
//! - for the host, where each kernel becomes a [`KernelDef`] that the CPU emulator ([`emu`])
//!   runs under the GPU's execution model, with bounds, race, barrier and init checks.
//!
//! Kernels touch the hardware only through [`device`], the small device API that stands in for
//! Rust-CUDA's `cuda_std` (whose codegen cannot be built here; see the README).
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx, asm_experimental_arch, stmt_expr_attributes))]

pub mod attention;
pub mod device;
pub mod elementwise;
pub mod gemm;
pub mod gemm_tc;
pub mod norm;
pub mod paged;
pub mod reduce;
pub mod rows;
pub mod selftest;
pub mod softmax;

#[cfg(not(target_arch = "nvptx64"))]
pub mod emu;

pub use device::{Dim3, Element};

/// Registers per thread of a block of `threads` built for one block per SM (`.maxntid threads`,
/// `.minnctapersm 1`): the SM's 65536 over the threads, rounded down to ptxas's allocation unit
/// of 8, at most 256. The block's register pool is this times `threads` (64512 for 384), and
/// `setmaxnreg` only moves registers within it: the register splits' checks, the emulator's
/// pool and the ptxas test all take the count from here.
pub const fn launch_regs_per_thread(threads: u32) -> u32 {
    let regs = 65536 / threads / 8 * 8;
    if regs < 256 { regs } else { 256 }
}

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // A panic on the device is a bug the emulator should have caught; trap so the host sees a
    // launch failure naming the kernel instead of a wrong answer.
    // SAFETY: `trap` only aborts the kernel.
    unsafe { core::arch::nvptx::trap() }
}

/// A kernel as the host sees it: its PTX entry name and, on the host, the body the emulator runs
/// once per GPU thread. Made only by [`kernels!`], so the name and the parameter type cannot drift
/// from the PTX entry point.
#[cfg(not(target_arch = "nvptx64"))]
pub struct KernelDef<P> {
    /// The PTX `.entry` name (the Rust function name of the entry point).
    pub name: &'static str,
    /// The kernel body; called by the emulator for every thread of every block.
    pub body: fn(P),
}

#[cfg(not(target_arch = "nvptx64"))]
impl<P> KernelDef<P> {
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

/// Declares a family's kernels, each from one line:
///
/// ```ignore
/// kernels! {
///     /// y = alpha * x + y over f32.
///     AXPY_F32 = axpy_f32(ElementwiseParams<f32>) => run::<Axpy, f32>;
/// }
/// ```
///
/// On the device this emits `extern "ptx-kernel" fn axpy_f32(params)` calling the body; on the
/// host it emits `const AXPY_F32: KernelDef<ElementwiseParams<f32>>`. Either way it also emits
/// `KERNEL_NAMES`, the family's entry points, which `info` and the ptxas test check against the
/// PTX. Parameters travel as one `#[repr(C)]` struct, passed by value (`.param .align 8 .b8 [N]`).
#[macro_export]
macro_rules! kernels {
    ($( $(#[$attr:meta])* $DEF:ident = $name:ident($P:ty) => $body:path; )+) => {
        $(
            #[cfg(target_arch = "nvptx64")]
            $(#[$attr])*
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name(params: $P) {
                $body(params)
            }

            #[cfg(not(target_arch = "nvptx64"))]
            $(#[$attr])*
            pub const $DEF: $crate::KernelDef<$P> =
                $crate::KernelDef { name: stringify!($name), body: $body };
        )+

        /// The PTX entry points this family defines.
        pub const KERNEL_NAMES: &[&str] = &[$(stringify!($name)),+];
    };
}

/// Every kernel entry point in the crate, by family. `info` and the ptxas test use it.
pub const ALL_KERNELS: &[(&str, &[&str])] = &[
    ("elementwise", elementwise::KERNEL_NAMES),
    ("attention", attention::KERNEL_NAMES),
    ("paged", paged::KERNEL_NAMES),
    ("reduce", reduce::KERNEL_NAMES),
    ("norm", norm::KERNEL_NAMES),
    ("softmax", softmax::KERNEL_NAMES),
    ("gemm", gemm::KERNEL_NAMES),
    ("gemm_tc", gemm_tc::KERNEL_NAMES),
    ("selftest", selftest::KERNEL_NAMES),
];

/// Threads per block the host launches kernel `name` with (at most): the host refuses a launch
/// with more threads; the offline check confirms registers x threads fit the SM's 65536
/// registers; kernels with [`launch_min_blocks`] get it as the entry's `.maxntid`. Each family answers for its own kernels; a new family adds its function here.
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_threads(name: &str) -> Option<u32> {
    elementwise::launch_threads(name)
        .or_else(|| rows::launch_threads(name))
        .or_else(|| gemm::launch_threads(name))
        .or_else(|| gemm_tc::launch_threads(name))
        .or_else(|| attention::launch_threads(name))
        .or_else(|| paged::launch_threads(name))
        .or_else(|| selftest::launch_threads(name))
}

/// Blocks per SM that kernel `name` must fit in its PTX for `arch` (`"sm_80"`, `"sm_90a"`,
/// ...), declared to ptxas as `.minnctapersm` together with `.maxntid` ([`launch_threads`]);
/// None: no launch bounds at all. Kernels that move registers between warpgroups with
/// `setmaxnreg` need them: they fix the register count at entry (65536 / (threads x
/// blocks), rounded down to 8). Some row kernels use them to cap their registers so more
/// blocks share an SM ([`rows::ROW_OCCUPANCY`]).
#[cfg(not(target_arch = "nvptx64"))]
pub fn launch_min_blocks(name: &str, arch: &str) -> Option<u32> {
    gemm_tc::launch_min_blocks(name)
        .or_else(|| gemm::launch_min_blocks(name))
        .or_else(|| attention::launch_min_blocks(name))
        .or_else(|| rows::launch_min_blocks(name, arch))
}
