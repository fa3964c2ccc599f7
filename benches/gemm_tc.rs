//! Criterion benches of the tensor-core GEMM ladder on the GPU: every version in
//! `gemm_tc::VERSIONS` the device can run (the wgmma ones only where the sm_90a PTX is loaded)
//! on bf16 4096^3 and 8192^3 problems with f32 C, each group with cuBLAS `cublasGemmEx` (f32
//! compute, loaded at run time) as its baseline, timed with CUDA events inside `iter_custom`;
//! throughput in FLOPs. Without a GPU: `SKIP:` and a clean exit; without cuBLAS, the versions
//! run alone and the bench says so.

#[path = "common/gpu.rs"]
mod gpu;

use criterion::{Criterion, Throughput};
use ferrokern::bench::{GemmBench, TcWorkload};
use ferrokern::cublas::Cublas;
use ferrokern::gemm_tc::VERSIONS;

fn main() {
    let Some(ctx) = gpu::context("gemm_tc") else {
        return;
    };
    let arch = ctx.device_info().map_or("", |i| i.ptx_arch);
    let cublas = match Cublas::load(&ctx) {
        Ok(c) => Some(c),
        Err(e) => {
            println!("no cuBLAS baseline: {e}");
            None
        }
    };
    let mut c = Criterion::default().configure_from_args();
    for n in [4096, 8192] {
        let mut w = TcWorkload::new(&ctx, n, n, n).expect("buffers");
        let mut group = c.benchmark_group(format!("gemm_tc/bf16/{n}x{n}x{n}"));
        group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
        group.sample_size(10);
        for v in VERSIONS {
            if v.config.required_arch().is_some_and(|need| need != arch) {
                println!(
                    "{}: skipped, it needs the {} PTX and this device loaded {arch}",
                    v.name,
                    v.config.required_arch().unwrap_or("")
                );
                continue;
            }
            group.bench_function(v.name, |bch| bch.iter_custom(|iters| gpu::time(&ctx, iters, || w.run(&ctx, v))));
        }
        if let Some(cb) = &cublas {
            group.bench_function("cublasGemmEx (baseline)", |bch| {
                bch.iter_custom(|iters| gpu::time(&ctx, iters, || w.run_cublas(cb)))
            });
        }
        group.finish();
    }
    c.final_summary();
}
