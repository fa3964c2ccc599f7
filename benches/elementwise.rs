//! Criterion benches of the elementwise family on the GPU, each group with its baseline (a
//! device-to-device copy moving the same bytes). Timed with CUDA events inside `iter_custom`.
//! Without a GPU they print `SKIP:` and exit cleanly; the emulator does not model time.

#[path = "common/gpu.rs"]
mod gpu;

use criterion::{Criterion, Throughput};
use ferrokern::elementwise::{self as ew, Op};
use ferrokern::{Context, DeviceBuffer};

const N: usize = 1 << 24;

fn bench_op(c: &mut Criterion, ctx: &Context, op: Op) {
    let a: DeviceBuffer<f32> = ctx.upload(&vec![0.5f32; N]).unwrap();
    let b: DeviceBuffer<f32> = ctx.upload(&vec![0.25f32; N]).unwrap();
    let mut out: DeviceBuffer<f32> = ctx.alloc(N).unwrap();
    let bytes = op.bytes_per_element(4) * N;
    let src = ctx.alloc::<u8>(bytes / 2).unwrap();
    let mut dst = ctx.alloc::<u8>(bytes / 2).unwrap();
    let mut g = c.benchmark_group(format!("elementwise/{}/f32/n={N}", op.name()));
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function(op.name(), |bch| {
        bch.iter_custom(|iters| {
            gpu::time(ctx, iters, || {
                let second = (op.inputs() == 2 && op != Op::Axpy).then(|| b.as_view());
                ew::launch_with(
                    ctx,
                    <f32 as ferrokern::Float>::elementwise_kernel(op),
                    op,
                    0.5,
                    a.as_view(),
                    second,
                    out.as_view_mut(),
                )
            })
        })
    });
    g.bench_function("copy (baseline)", |bch| {
        bch.iter_custom(|iters| gpu::time(ctx, iters, || ctx.copy(src.as_view(), dst.as_view_mut())))
    });
    g.finish();
}

fn main() {
    let Some(ctx) = gpu::context("elementwise") else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    for op in Op::ALL {
        bench_op(&mut c, &ctx, op);
    }
    c.final_summary();
}
