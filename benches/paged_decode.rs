//! Criterion benches of the paged decode on the GPU: every version of `paged::VERSIONS` on
//! every shape of `paged::BENCH_SHAPES` (bf16, head dim 128, 32 query heads, shuffled pages,
//! auto split), timed with CUDA events inside `iter_custom`; throughput in KV bytes read. The
//! baseline, a device-to-device copy of the same bytes, runs in `ferrokern bench`, which also
//! checks each version first. Without a GPU: `SKIP:` and a clean exit.

#[path = "common/gpu.rs"]
mod gpu;

use criterion::{Criterion, Throughput};
use ferrokern::paged::{BENCH_SHAPES, BenchData, VERSIONS};
use half::bf16;

fn main() {
    let Some(ctx) = gpu::context("paged decode") else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    for shape in BENCH_SHAPES {
        let mut data = BenchData::<bf16>::new(&ctx, shape).expect("bench buffers");
        let mut g = c.benchmark_group(format!("paged_decode/bf16/{}", shape.label().replace(' ', "_")));
        g.throughput(Throughput::Bytes(data.kv_bytes() as u64));
        g.sample_size(10);
        for version in VERSIONS {
            g.bench_function(version.name, |b| {
                b.iter_custom(|iters| gpu::time(&ctx, iters, || data.run(&ctx, version)))
            });
        }
        g.finish();
    }
    c.final_summary();
}
