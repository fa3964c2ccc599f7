//! Shared by the row-op criterion benches: each op timed on the GPU with CUDA events inside
//! `iter_custom`, throughput in bytes moved, and a device-to-device copy of the same bytes as
//! the group's baseline. Without a GPU: `SKIP:` and a clean exit.

use criterion::{Criterion, Throughput};
use ferrokern::bench::{RowWorkload, row_bytes};
use ferrokern::rows::Rows;
use ferrokern::verify::RowOp;

/// Benches `ops` (bf16, each on `shape`) with their copy baselines.
pub fn run(family: &str, ops: &[RowOp], shape: Rows) {
    let Some(ctx) = crate::gpu::context(family) else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    for &op in ops {
        let mut w = RowWorkload::<half::bf16>::new(&ctx, op, shape).expect("workload");
        let bytes = row_bytes(op, shape, 2);
        let src = ctx.alloc::<u8>(bytes as usize / 2).unwrap();
        let mut dst = ctx.alloc::<u8>(bytes as usize / 2).unwrap();
        let mut g = c.benchmark_group(format!("{family}/{}/bf16/{}x{}", op.name(), shape.rows, shape.cols));
        g.throughput(Throughput::Bytes(bytes));
        g.bench_function(op.name(), |b| b.iter_custom(|iters| crate::gpu::time(&ctx, iters, || w.run(&ctx))));
        g.bench_function("copy (baseline)", |b| {
            b.iter_custom(|iters| crate::gpu::time(&ctx, iters, || ctx.copy(src.as_view(), dst.as_view_mut())))
        });
        g.finish();
    }
    c.final_summary();
}
