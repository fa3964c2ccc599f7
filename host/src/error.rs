//! The one error type. Every message says what went wrong and what to do about it.

use cust::error::CudaError;
use gpu_kernels::emu::EmuError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// No GPU backend could be opened.
    #[error(
        "no CUDA device: {reason}. Use the emulator backend (`--backend emulator`, FERROKERN_BACKEND=emulator) to run kernels on the CPU"
    )]
    NoDevice { reason: String },

    /// The device is older than the oldest embedded PTX architecture.
    #[error(
        "the GPU `{device}` has compute capability {major}.{minor}; ferrokern's kernels need 8.0 (Ampere) or newer. Use the emulator backend instead"
    )]
    UnsupportedDevice { device: String, major: i32, minor: i32 },

    /// A call's arguments were refused before anything was launched.
    #[error("{op}: {message}")]
    InvalidArgument { op: &'static str, message: String },

    /// A buffer was used with a context other than the one that made it.
    #[error("{op}: a buffer belongs to another Context; allocate every buffer of a call with the context that runs it")]
    WrongContext { op: &'static str },

    /// A CUDA driver call failed without faulting the context.
    #[error("CUDA error in {call}: {code}")]
    Cuda { call: &'static str, code: CudaError },

    /// Device memory (or, on the emulator, host memory) ran out.
    #[error("out of {memory} memory allocating {bytes} bytes; free buffers or use smaller shapes")]
    OutOfMemory { bytes: usize, memory: &'static str },

    /// A kernel faulted on the GPU. The CUDA context is unusable afterwards: every later call
    /// on this Context returns this same error. Run the same call on the emulator backend
    /// (`ferrokern verify ... --backend emulator`) to see which access was bad.
    #[error(
        "kernel `{kernel}` faulted on the GPU ({code}); the CUDA context is now unusable and every later call on it fails with this error. Reproduce on the emulator backend to locate the bad access"
    )]
    DeviceFault { kernel: &'static str, code: CudaError },

    /// The emulator found a bug in a kernel (or refused its launch).
    #[error("{0}")]
    Emulator(#[from] EmuError),

    /// The PTX embedded in the library failed to load on this driver.
    #[error(
        "loading the embedded PTX for {arch} failed ({code}); the driver may be older than the PTX ISA the toolchain emits (ferrokern emits PTX 7.x-8.x: use a driver for CUDA 12 or newer)"
    )]
    ModuleLoad { arch: &'static str, code: CudaError },
}

impl Error {
    /// An [`Error::InvalidArgument`] for `op`; `message` should say what to fix.
    pub fn invalid(op: &'static str, message: impl Into<String>) -> Self {
        Error::InvalidArgument { op, message: message.into() }
    }
}

/// Errors after which the CUDA context cannot be used again.
pub(crate) fn is_sticky(code: CudaError) -> bool {
    matches!(
        code,
        CudaError::IllegalAddress
            | CudaError::LaunchFailed
            | CudaError::MisalignedAddress
            | CudaError::IllegalInstruction
            | CudaError::InvalidAddressSpace
            | CudaError::InvalidProgramCounter
            | CudaError::HardwareStackError
            | CudaError::AssertError
            | CudaError::LaunchTimeout
            | CudaError::EccUncorrectable
    )
}
