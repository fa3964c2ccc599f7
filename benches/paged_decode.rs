//! Criterion benches of the paged decode on the GPU: every version of `paged::VERSIONS` on
//! every shape of `paged::BENCH_SHAPES` (bf16, head dim 128, 32 query heads, shuffled pages,
//! auto split), timed with CUDA events inside `iter_custom`; throughput in KV bytes read. The
//! baseline, a device-to-device copy of the same bytes, runs in `ferrokern bench`, which also
//! checks each version first. Without a GPU: `SKIP:` and a clean exit.

use criterion::{Criterion, Throughput};
use ferrokern::paged::{BENCH_SHAPES, BenchData, VERSIONS};
use ferrokern::{BackendChoice, Context, Result};
use half::bf16;
use std::time::Duration;

fn gpu_time(ctx: &Context, iters: u64, f: impl FnMut() -> Result<()>) -> Duration {
    ferrokern::bench::gpu_time(ctx, iters, f).expect("timed run")
}

fn main() {
    let ctx = match ferrokern::context(BackendChoice::Gpu) {
        Ok(c) => c,
        Err(_) => {
            println!("SKIP: no CUDA device; the paged decode benches need a GPU");
            return;
        }
    };
    let mut c = Criterion::default().configure_from_args();
    for shape in BENCH_SHAPES {
        let mut data = BenchData::<bf16>::new(&ctx, shape).expect("bench buffers");
        let mut g = c.benchmark_group(format!("paged_decode/bf16/{}", shape.label().replace(' ', "_")));
        g.throughput(Throughput::Bytes(data.kv_bytes() as u64));
        g.sample_size(10);
        for version in VERSIONS {
            g.bench_function(version.name, |b| {
                b.iter_custom(|iters| gpu_time(&ctx, iters, || data.run(&ctx, version)))
            });
        }
        g.finish();
    }
    c.final_summary();
}
