//! Criterion benches of the attention backward on the GPU: every version of
//! `attention_backward::BACKWARD_VERSIONS` that runs the head dimension, bf16, batch 4 x 16
//! heads x 2048 tokens, head dims 64 and 128, causal and not, the default (atomic dQ) path,
//! timed with CUDA events inside `iter_custom`; throughput in FLOPs (2.5 times the forward's).
//! O and the log-sum-exp come from one forward run. The baseline, the backward of PyTorch's
//! SDPA, runs in `ferrokern bench` (a Python process), not here. Without a GPU: `SKIP:` and a
//! clean exit.

#[path = "common/gpu.rs"]
mod gpu;

use criterion::{Criterion, Throughput};
use ferrokern::attention::{self, AttentionInput, AttentionShape};
use ferrokern::attention_backward::{
    self as bwd, AttentionBackwardInput, AttentionGrads, BACKWARD_VERSIONS, BackwardOptions,
};
use ferrokern::bench::pattern;
use half::bf16;

fn main() {
    let Some(ctx) = gpu::context("attention backward") else {
        return;
    };
    let opts = BackwardOptions::default();
    let mut c = Criterion::default().configure_from_args();
    for head_dim in [64, 128] {
        for causal in [false, true] {
            let s = AttentionShape { batch: 4, heads: 16, kv_heads: 16, seq_q: 2048, seq_k: 2048, head_dim };
            let (q, k, v) = (
                ctx.upload(&pattern::<bf16>(s.q_len(), 0)).unwrap(),
                ctx.upload(&pattern::<bf16>(s.kv_len(), 1)).unwrap(),
                ctx.upload(&pattern::<bf16>(s.kv_len(), 2)).unwrap(),
            );
            let d_o = ctx.upload(&pattern::<bf16>(s.q_len(), 3)).unwrap();
            let mut o = ctx.alloc::<bf16>(s.q_len()).unwrap();
            let mut lse = ctx.alloc::<f32>(s.lse_len()).unwrap();
            let forward =
                AttentionInput { q: q.as_view(), k: k.as_view(), v: v.as_view(), shape: s, causal, scale: None };
            attention::attention(&ctx, forward, o.as_view_mut(), lse.as_view_mut()).expect("the forward for O and lse");
            let (mut dq, mut dk, mut dv) = (
                ctx.alloc::<bf16>(s.q_len()).unwrap(),
                ctx.alloc::<bf16>(s.kv_len()).unwrap(),
                ctx.alloc::<bf16>(s.kv_len()).unwrap(),
            );
            let mask = if causal { "causal" } else { "full" };
            let mut g = c.benchmark_group(format!("attention_backward/bf16/b4h16s2048d{head_dim}/{mask}"));
            g.throughput(Throughput::Elements(bwd::flops(&s, causal) as u64));
            g.sample_size(10);
            for version in BACKWARD_VERSIONS {
                if let Some(why) = bwd::unavailable(&ctx, version, head_dim, opts) {
                    println!("SKIP: {why}");
                    continue;
                }
                g.bench_function(version.name, |b| {
                    b.iter_custom(|iters| {
                        gpu::time(&ctx, iters, || {
                            let input = AttentionBackwardInput {
                                forward,
                                o: o.as_view(),
                                d_o: d_o.as_view(),
                                lse: lse.as_view(),
                            };
                            let grads =
                                AttentionGrads { dq: dq.as_view_mut(), dk: dk.as_view_mut(), dv: dv.as_view_mut() };
                            bwd::attention_backward_with(&ctx, version, input, grads, opts)
                        })
                    })
                });
            }
            g.finish();
        }
    }
    c.final_summary();
}
