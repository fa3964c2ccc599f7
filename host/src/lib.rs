//! ferrokern's runtime: one [`Context`] over two backends, the GPU (through `cust`) and the
//! CPU emulator, with typed device buffers, launches, and one error type.
//!
//! `unsafe` lives in three places: the byte views of host slices in [`buffer`], the emulator's
//! allocation in [`buffer`], and the kernel launch in [`gpu`]; each block has a `// SAFETY:` line.

mod buffer;
mod context;
mod error;
mod gpu;

pub use buffer::{BufMut, BufRef, DType, DeviceBuffer, Scalar};
pub use context::{Backend, BackendChoice, CONSTANTS_BYTES, Context, DeviceInfo};
pub use error::{Error, Result};
pub use gpu::cubin_file_name;
pub use gpu_kernels::emu::{EmuError, LaunchConfig};
pub use gpu_kernels::{Dim3, KernelDef};

/// Environment variable: set to `1` to make GPU tests fail, instead of skipping, without a GPU.
pub const REQUIRE_GPU_ENV: &str = "FERROKERN_REQUIRE_GPU";
/// Environment variable: `gpu`, `emulator` or `auto` (default), read by [`BackendChoice::from_env`].
pub const BACKEND_ENV: &str = "FERROKERN_BACKEND";
/// Environment variable: a folder of cubins assembled ahead of time from the embedded PTX
/// (`ferrokern cubins DIR` writes them, named by [`cubin_file_name`]). Without one the driver
/// compiles the PTX when a process loads it, which for the sm_90a module takes about as long
/// as ptxas does (minutes) unless the driver's JIT cache already holds it.
pub const CUBIN_DIR_ENV: &str = "FERROKERN_CUBIN_DIR";
