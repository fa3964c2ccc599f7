//! Test helpers: which backends to run on, and the SKIP/REQUIRE_GPU policy.
#![allow(dead_code)]

use ferrokern::{BackendChoice, Context, Error, REQUIRE_GPU_ENV};
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// True when FERROKERN_REQUIRE_GPU=1: a missing GPU fails GPU tests instead of skipping them.
pub fn require_gpu() -> bool {
    std::env::var(REQUIRE_GPU_ENV).is_ok_and(|v| v == "1")
}

/// The GPU, opened once per test process, or why not.
fn gpu() -> &'static Result<Context, String> {
    static GPU: OnceLock<Result<Context, String>> = OnceLock::new();
    GPU.get_or_init(|| {
        ferrokern::context(BackendChoice::Gpu).map_err(|e| match e {
            Error::NoDevice { .. } => "no CUDA device".to_string(),
            other => other.to_string(),
        })
    })
}

/// Prints `line` once per process for `key` (property tests call the helpers per case).
pub fn once(key: &str, line: impl FnOnce() -> String) {
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if seen.get_or_insert_with(HashSet::new).insert(key.to_string()) {
        println!("{}", line());
    }
}

/// The GPU context, or `None` after printing `SKIP: <reason>` once (a failure under
/// FERROKERN_REQUIRE_GPU=1).
pub fn gpu_or_skip(test: &str) -> Option<Context> {
    match gpu() {
        Ok(ctx) => Some(ctx.clone()),
        Err(reason) => {
            assert!(!require_gpu(), "{test}: {REQUIRE_GPU_ENV}=1 but the GPU is unusable: {reason}");
            once(test, || format!("SKIP: {reason} ({test}: the GPU part did not run)"));
            None
        }
    }
}

/// Every backend a test should run on: the emulator always, the GPU when present. With
/// `FERROKERN_SKIP_EMULATOR=1` and a GPU present (the GPU run script, where CI already ran the
/// emulator half), the GPU only; without a GPU the variable is ignored, so nothing is skipped
/// silently.
pub fn backends(test: &str) -> Vec<Context> {
    let gpu = gpu_or_skip(test);
    let skip_emulator = gpu.is_some() && std::env::var("FERROKERN_SKIP_EMULATOR").is_ok_and(|v| v == "1");
    let mut v = Vec::new();
    if skip_emulator {
        once(&format!("{test}/skip-emulator"), || {
            format!("{test}: FERROKERN_SKIP_EMULATOR=1: the GPU only (the emulator half runs in CI)")
        });
    } else {
        v.push(Context::emulator());
    }
    v.extend(gpu);
    v
}

/// [`backends`] for a property test of `cases` cases; prints once where they run.
pub fn property_backends(test: &str, cases: u32) -> Vec<Context> {
    let v = backends(test);
    let on = match (v.len(), v.first().map(|c| c.device_info().is_some())) {
        (2, _) => "the emulator and the GPU",
        (_, Some(true)) => "the GPU",
        _ => "the emulator",
    };
    once(&format!("{test}/cases"), || format!("{test}: {cases} property cases, each on {on}"));
    v
}

/// Property-test cases: `default`, or `FERROKERN_CASES` when set (the GPU run script lowers
/// it under compute-sanitizer, which is orders of magnitude slower).
pub fn cases(default: u32) -> u32 {
    std::env::var("FERROKERN_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
