//! Test helpers: which backends to run on, and the SKIP/REQUIRE_GPU policy.
#![allow(dead_code)]

use ferrokern::{BackendChoice, Context, Error, REQUIRE_GPU_ENV};

/// True when FERROKERN_REQUIRE_GPU=1: a missing GPU fails GPU tests instead of skipping them.
pub fn require_gpu() -> bool {
    std::env::var(REQUIRE_GPU_ENV).is_ok_and(|v| v == "1")
}

/// The GPU context, or `None` after printing `SKIP: <reason>` (a failure under
/// FERROKERN_REQUIRE_GPU=1).
pub fn gpu_or_skip(test: &str) -> Option<Context> {
    match ferrokern::context(BackendChoice::Gpu) {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            assert!(!require_gpu(), "{test}: {REQUIRE_GPU_ENV}=1 but the GPU is unusable: {e}");
            let reason = match e {
                Error::NoDevice { .. } => "no CUDA device".to_string(),
                other => other.to_string(),
            };
            println!("SKIP: {reason} ({test}: the GPU part did not run)");
            None
        }
    }
}

/// Every backend a property test should run on: the emulator always, the GPU when present.
pub fn backends(test: &str) -> Vec<Context> {
    let mut v = vec![Context::emulator()];
    v.extend(gpu_or_skip(test));
    v
}

/// Property-test cases: `default`, or `FERROKERN_CASES` when set (the GPU run script lowers
/// it under compute-sanitizer, which is orders of magnitude slower).
pub fn cases(default: u32) -> u32 {
    std::env::var("FERROKERN_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
