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
pub use gpu_kernels::emu::{EmuError, LaunchConfig};
pub use gpu_kernels::{Dim3, KernelDef};

/// Environment variable: set to `1` to make GPU tests fail, instead of skipping, without a GPU.
pub const REQUIRE_GPU_ENV: &str = "FERROKERN_REQUIRE_GPU";
/// Environment variable: `gpu`, `emulator` or `auto` (default), read by [`BackendChoice::from_env`].
pub const BACKEND_ENV: &str = "FERROKERN_BACKEND";
