//! Attention forward against the f64 reference under FlashAttention's rule (max error at most
//! twice the naive low-precision attention's), on the emulator always and the GPU when
//! present: odd and unequal sequence lengths, causal (bottom-right aligned), grouped-query
//! and multi-query heads, fully masked rows; plus bad input.

mod common;

use ferrokern::DType;
use ferrokern::attention::{AttentionCase, AttentionInput, AttentionShape, attention, check};
use ferrokern::{Context, Error};
use proptest::prelude::*;

fn run(ctx: &Context, case: AttentionCase) {
    let r = check(ctx, &case).unwrap_or_else(|e| panic!("{case:?} on {}: {e}", ctx.backend()));
    assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
}

fn shape(batch: usize, heads: usize, kv_heads: usize, seq_q: usize, seq_k: usize, head_dim: usize) -> AttentionShape {
    AttentionShape { batch, heads, kv_heads, seq_q, seq_k, head_dim }
}

/// Property cases per run (FERROKERN_CASES overrides).
const CASES: u32 = 24;

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(CASES), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn attention_matches_reference(
        dtype in proptest::sample::select(vec![DType::BF16, DType::F16]),
        batch in 1usize..3,
        (heads, kv_heads) in proptest::sample::select(vec![(1usize, 1usize), (2, 2), (4, 2), (4, 1), (3, 3)]),
        seq_q in 1usize..50,
        seq_k in 1usize..70,
        head_dim in proptest::sample::select(vec![32usize, 64, 128]),
        causal in any::<bool>(),
        seed in any::<u64>(),
    ) {
        for ctx in common::property_backends("attention_matches_reference", common::cases(CASES)) {
            run(&ctx, AttentionCase { dtype, shape: shape(batch, heads, kv_heads, seq_q, seq_k, head_dim), causal, seed });
        }
    }
}

#[test]
fn attention_named_lengths() {
    let mut n = 0;
    for ctx in common::backends("attention_named_lengths") {
        for (seq_q, seq_k) in [(1, 1), (113, 113), (239, 239), (7, 113), (113, 7), (1, 239)] {
            for causal in [false, true] {
                for dtype in [DType::BF16, DType::F16] {
                    run(
                        &ctx,
                        AttentionCase {
                            dtype,
                            shape: shape(1, 2, 1, seq_q, seq_k, 64),
                            causal,
                            seed: (seq_q * 1000 + seq_k) as u64,
                        },
                    );
                    n += 1;
                }
            }
        }
    }
    println!("attention: {n} named cases passed");
}

#[test]
fn fully_masked_rows_give_zero_and_minus_infinity() {
    // Causal with seq_q > seq_k: the first seq_q - seq_k queries see no key.
    let ctx = Context::emulator();
    let s = shape(1, 1, 1, 40, 16, 32);
    let q = ctx.upload(&vec![half::bf16::from_f32(0.5); s.q_len()]).unwrap();
    let kv = ctx.upload(&vec![half::bf16::from_f32(0.25); s.kv_len()]).unwrap();
    let mut o = ctx.alloc::<half::bf16>(s.q_len()).unwrap();
    let mut lse = ctx.alloc::<f32>(s.lse_len()).unwrap();
    let input =
        AttentionInput { q: q.as_view(), k: kv.as_view(), v: kv.as_view(), shape: s, causal: true, scale: None };
    attention(&ctx, input, o.as_view_mut(), lse.as_view_mut()).unwrap();
    let (o, lse) = (o.to_host().unwrap(), lse.to_host().unwrap());
    assert!(o[..24 * 32].iter().all(|v| v.to_f32() == 0.0), "masked rows are 0, not NaN");
    assert!(lse[..24].iter().all(|&v| v == f32::NEG_INFINITY));
    assert!(o[24 * 32..].iter().all(|v| (v.to_f32() - 0.25).abs() < 1e-3), "visible rows average V");
    run(&ctx, AttentionCase { dtype: DType::F16, shape: s, causal: true, seed: 3 });
}

#[test]
fn attention_bad_inputs_are_refused() {
    let ctx = Context::emulator();
    let s = shape(1, 4, 2, 8, 8, 64);
    let q = ctx.alloc::<half::bf16>(s.q_len()).unwrap();
    let kv = ctx.alloc::<half::bf16>(s.kv_len()).unwrap();
    let mut o = ctx.alloc::<half::bf16>(s.q_len()).unwrap();
    let mut lse = ctx.alloc::<f32>(s.lse_len()).unwrap();
    let bad = [
        ("heads not a multiple of kv_heads", shape(1, 3, 2, 8, 8, 64)),
        ("kv_heads = 0", shape(1, 4, 0, 8, 8, 64)),
        ("head_dim 48", shape(1, 4, 2, 8, 8, 48)),
        ("head_dim 256", shape(1, 4, 2, 8, 8, 256)),
        ("shape does not match q", shape(1, 4, 2, 9, 8, 64)),
        ("shape does not match k", shape(1, 4, 2, 8, 9, 64)),
    ];
    for (name, shape) in bad {
        let input =
            AttentionInput { q: q.as_view(), k: kv.as_view(), v: kv.as_view(), shape, causal: false, scale: None };
        let e = attention(&ctx, input, o.as_view_mut(), lse.as_view_mut()).expect_err(name);
        assert!(matches!(e, Error::InvalidArgument { .. }), "{name}: {e}");
        println!("{name}: {e}");
    }
}
