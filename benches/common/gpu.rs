//! What every criterion bench shares: the GPU context (or `SKIP:` and a clean exit without
//! one; the emulator does not model time) and GPU time for criterion's `iter_custom`.

use ferrokern::{BackendChoice, Context, Result};
use std::time::Duration;

/// The GPU context, or `None` after printing `SKIP:` and why.
pub fn context(family: &str) -> Option<Context> {
    match ferrokern::context(BackendChoice::Gpu) {
        Ok(c) => Some(c),
        Err(e) => {
            println!("SKIP: the {family} benches need a GPU: {e}");
            None
        }
    }
}

/// GPU time of `iters` back-to-back runs of `f` between two CUDA events; a failed run ends the
/// bench with its error.
pub fn time(ctx: &Context, iters: u64, f: impl FnMut() -> Result<()>) -> Duration {
    ferrokern::bench::gpu_time(ctx, iters, f).unwrap_or_else(|e| panic!("timed run: {e}"))
}
