//! Criterion benches of the attention forward on the GPU: every version of
//! `attention::VERSIONS` that has a kernel for the head dimension, bf16, batch 4 x 16 heads x
//! 2048 tokens, head dims 64 and 128, causal and not, timed with CUDA events inside
//! `iter_custom`; throughput in FLOPs (4 b h sq sk d, halved for causal). The baseline,
//! PyTorch's SDPA, runs in `ferrokern bench` (a Python process), not here. Without a GPU:
//! `SKIP:` and a clean exit.

#[path = "common/gpu.rs"]
mod gpu;

use criterion::{Criterion, Throughput};
use ferrokern::attention::{self, AttentionInput, AttentionShape, VERSIONS};
use half::bf16;

fn main() {
    let Some(ctx) = gpu::context("attention") else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    for head_dim in [64, 128] {
        for causal in [false, true] {
            let s = AttentionShape { batch: 4, heads: 16, kv_heads: 16, seq_q: 2048, seq_k: 2048, head_dim };
            let fill =
                |n: usize| -> Vec<bf16> { (0..n).map(|i| bf16::from_f32((i % 13) as f32 * 0.05 - 0.3)).collect() };
            let (q, k, v) = (
                ctx.upload(&fill(s.q_len())).unwrap(),
                ctx.upload(&fill(s.kv_len())).unwrap(),
                ctx.upload(&fill(s.kv_len())).unwrap(),
            );
            let mut o = ctx.alloc::<bf16>(s.q_len()).unwrap();
            let mut lse = ctx.alloc::<f32>(s.lse_len()).unwrap();
            let mask = if causal { "causal" } else { "full" };
            let mut g = c.benchmark_group(format!("attention/bf16/b4h16s2048d{head_dim}/{mask}"));
            g.throughput(Throughput::Elements(attention::flops(&s, causal) as u64));
            g.sample_size(10);
            for version in VERSIONS {
                if let Some(why) = attention::unavailable(&ctx, version, head_dim) {
                    println!("SKIP: {why}");
                    continue;
                }
                g.bench_function(version.name, |b| {
                    b.iter_custom(|iters| {
                        gpu::time(&ctx, iters, || {
                            let input = AttentionInput {
                                q: q.as_view(),
                                k: k.as_view(),
                                v: v.as_view(),
                                shape: s,
                                causal,
                                scale: None,
                            };
                            attention::attention_with(&ctx, version, input, o.as_view_mut(), lse.as_view_mut())
                        })
                    })
                });
            }
            g.finish();
        }
    }
    c.final_summary();
}
