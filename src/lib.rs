//! ferrokern: GPU kernels written entirely in Rust, validated by a CPU emulator that runs the
//! same kernel source under the GPU's execution model.
//!
//! ```no_run
//! use ferrokern::{BackendChoice, elementwise};
//! # fn main() -> ferrokern::Result<()> {
//! let ctx = ferrokern::context(BackendChoice::Auto)?; // the GPU, or the emulator without one
//! let x = ctx.upload(&[1.0f32, 2.0, 3.0])?;
//! let mut y = ctx.upload(&[10.0f32, 20.0, 30.0])?;
//! elementwise::axpy(&ctx, 2.0, x.as_view(), y.as_view_mut())?; // y = 2x + y
//! assert_eq!(y.to_host()?, vec![12.0, 24.0, 36.0]);
//! # Ok(()) }
//! ```

pub mod attention;
pub mod attention_backward;
pub mod bench;
pub mod check;
pub mod cross_entropy;
pub mod cublas;
pub mod elementwise;
pub mod float;
pub mod gemm;
pub mod gemm_tc;
pub mod info;
pub mod norm;
pub mod paged;
pub mod reduce;
pub mod reference;
pub mod rows;
pub mod softmax;
pub mod tma;
pub mod verify;

pub use ferrokern_host::*;
pub use float::Float;
pub use gpu_kernels;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/ptx_table.rs"));
}

/// The PTX compiled from `gpu-kernels` at build time: (arch, text), oldest arch first.
pub const PTX: &[(&str, &str)] = embedded::PTX;

/// Opens a context on the chosen backend with the embedded kernels.
pub fn context(choice: BackendChoice) -> Result<Context> {
    Context::new(choice, PTX)
}
