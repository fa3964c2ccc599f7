//! Criterion benches of the SGEMM ladder on the GPU: every version in `gemm::VERSIONS` on a
//! 2048^3 and a 4096^3 problem, each group with cuBLAS SGEMM (loaded at run time) as its
//! baseline, timed with CUDA events inside `iter_custom`; throughput in FLOPs. Without a GPU:
//! `SKIP:` and a clean exit; without cuBLAS, the versions run alone and the bench says so.

#[path = "common/gpu.rs"]
mod gpu;

use criterion::{Criterion, Throughput};
use ferrokern::bench::{GemmBench, GemmWorkload};
use ferrokern::cublas::Cublas;
use ferrokern::gemm::VERSIONS;

fn main() {
    let Some(ctx) = gpu::context("gemm") else {
        return;
    };
    let cublas = match Cublas::load(&ctx) {
        Ok(c) => Some(c),
        Err(e) => {
            println!("no cuBLAS baseline: {e}");
            None
        }
    };
    let mut c = Criterion::default().configure_from_args();
    for n in [2048, 4096] {
        let mut w = GemmWorkload::<f32>::new(&ctx, n, n, n).expect("workload");
        let mut g = c.benchmark_group(format!("gemm/f32/{n}x{n}x{n}"));
        g.throughput(Throughput::Elements(w.gemm.flops() as u64));
        g.sample_size(10);
        for v in VERSIONS {
            g.bench_function(v.name, |b| b.iter_custom(|iters| gpu::time(&ctx, iters, || w.run(&ctx, v))));
        }
        if let Some(cb) = &cublas {
            g.bench_function("cublas (baseline)", |b| {
                b.iter_custom(|iters| gpu::time(&ctx, iters, || w.run_cublas(cb)))
            });
        }
        g.finish();
    }
    c.final_summary();
}
