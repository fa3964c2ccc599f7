//! Property tests of the fused cross-entropy (loss and logits gradient) against the f64
//! reference, on the emulator always and the GPU when present: every strategy (warp, block,
//! shared, split), vocabularies past every cache boundary, ignored rows, masked logits and
//! NaN; plus target checks.

mod common;

use ferrokern::cross_entropy::{CrossEntropyInput, cross_entropy};
use ferrokern::gpu_kernels::rows::SPLIT_SEGMENT;
use ferrokern::rows::{RowStrategy, Rows, shared_capacity};
use ferrokern::verify::{self, RowCase, RowOp, Values};
use ferrokern::{Context, DType, Error};
use proptest::prelude::*;

/// Property cases per run (FERROKERN_CASES overrides).
const CASES: u32 = 64;

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(CASES), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn cross_entropy_matches_reference(
        dtype in proptest::sample::select(vec![DType::F32, DType::F16, DType::BF16]),
        rows in 1usize..20,
        cols in prop_oneof![3 => 1usize..700, 1 => proptest::sample::select(vec![1usize, 511, 513, 1025, 4097, 8193, 16_385, 32_769, 50257, 262_147])],
        offset in 0usize..2,
        seed in any::<u64>(),
        values in proptest::sample::select(vec![Values::Finite, Values::WithSpecials, Values::Huge]),
        strategy in proptest::sample::select(vec![
            None,
            Some(RowStrategy::Warp),
            Some(RowStrategy::Block),
            Some(RowStrategy::Shared),
            Some(RowStrategy::Split),
        ]),
    ) {
        let rows = if cols > 10_000 { rows.min(2) } else { rows };
        for ctx in common::property_backends("cross_entropy_matches_reference", common::cases(CASES)) {
            // A row past shared memory cannot take the shared strategy: block instead.
            let strategy = if strategy == Some(RowStrategy::Shared) && cols > shared_capacity(&ctx, dtype.size()) {
                Some(RowStrategy::Block)
            } else {
                strategy
            };
            let case = RowCase { op: RowOp::CrossEntropy, dtype, shape: Rows::new(rows, cols), seed, offset, values, strategy };
            let r = verify::rows(&ctx, &case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
            prop_assert!(r.passed(), "{:?} on {}: {}", case, ctx.backend(), r);
        }
    }
}

#[test]
fn targets_out_of_range_are_refused_before_launch() {
    let ctx = Context::emulator();
    let logits = ctx.upload(&[0.5f32; 12]).unwrap();
    let mut loss = ctx.alloc::<f32>(3).unwrap();
    for (name, t, ignore) in [
        ("target = vocab", [0, 4, 1], None),
        ("negative target", [0, -1, 1], None),
        ("-100 without ignore_index", [0, -100, 1], None),
        ("wrong ignore", [0, -100, 1], Some(-1)),
    ] {
        let tb = ctx.upload(&t).unwrap();
        let input = CrossEntropyInput {
            logits: logits.as_view(),
            targets: tb.as_view(),
            shape: Rows::new(3, 4),
            ignore_index: ignore,
            grad_scale: 1.0,
            check_targets: true,
        };
        let e = cross_entropy(&ctx, input, loss.as_view_mut(), None).expect_err(name);
        assert!(matches!(e, Error::InvalidArgument { .. }), "{name}: {e}");
        println!("{name}: {e}");
    }
    assert!(loss.to_host().unwrap().iter().all(|v| v.to_bits() == 0xFFFF_FFFF), "nothing was launched");
}

#[test]
fn ignored_rows_give_zero_and_loss_matches_log_softmax() {
    let ctx = Context::emulator();
    let logits: Vec<f32> = (0..3 * 5).map(|i| (i % 7) as f32 * 0.3).collect();
    let lb = ctx.upload(&logits).unwrap();
    let tb = ctx.upload(&[2i32, -100, 4]).unwrap();
    let (mut loss, mut grad) = (ctx.alloc::<f32>(3).unwrap(), ctx.alloc::<f32>(15).unwrap());
    let input = CrossEntropyInput {
        logits: lb.as_view(),
        targets: tb.as_view(),
        shape: Rows::new(3, 5),
        ignore_index: Some(-100),
        grad_scale: 1.0,
        check_targets: true,
    };
    cross_entropy(&ctx, input, loss.as_view_mut(), Some(grad.as_view_mut())).unwrap();
    let (loss, grad) = (loss.to_host().unwrap(), grad.to_host().unwrap());
    assert_eq!(loss[1], 0.0);
    assert!(grad[5..10].iter().all(|&g| g == 0.0));
    let mut ls = ctx.alloc::<f32>(15).unwrap();
    ferrokern::softmax::log_softmax(&ctx, lb.as_view(), Rows::new(3, 5), ls.as_view_mut()).unwrap();
    let ls = ls.to_host().unwrap();
    assert!((loss[0] + ls[2]).abs() < 1e-6 && (loss[2] + ls[14]).abs() < 1e-6);
    let row_grad_sum: f32 = grad[0..5].iter().sum();
    assert!(row_grad_sum.abs() < 1e-6, "a row's gradient sums to 0: {row_grad_sum}");
}

#[test]
fn unchecked_targets_are_guarded_by_the_kernel() {
    let ctx = Context::emulator();
    let logits = ctx.upload(&[0.5f32; 12]).unwrap();
    let tb = ctx.upload(&[0i32, 7, -3]).unwrap();
    let mut loss = ctx.alloc::<f32>(3).unwrap();
    let mut grad = ctx.alloc::<f32>(12).unwrap();
    let input = CrossEntropyInput {
        logits: logits.as_view(),
        targets: tb.as_view(),
        shape: Rows::new(3, 4),
        ignore_index: None,
        grad_scale: 1.0,
        check_targets: false,
    };
    // The emulator would report any out-of-bounds read; the kernel's guard gives NaN instead.
    cross_entropy(&ctx, input, loss.as_view_mut(), Some(grad.as_view_mut())).unwrap();
    let loss = loss.to_host().unwrap();
    assert!((loss[0] - 4f32.ln()).abs() < 1e-6, "{loss:?}");
    assert!(loss[1].is_nan() && loss[2].is_nan(), "{loss:?}");
}

#[test]
fn split_vocabulary_matches_reference() {
    // The bench's long-vocabulary shape (8 x 262144: split, 32 segments of `SPLIT_SEGMENT`), the split
    // boundary's edges, and 33 segments, one more than the warp that folds their statistics
    // has lanes (the last one long enough that leaving it out fails the comparison).
    let mut n = 0;
    for ctx in common::backends("split_vocabulary") {
        for dtype in [DType::F32, DType::BF16] {
            for (rows, cols, values) in [
                (8, 262_144, Values::WithSpecials),
                (3, 32_769, Values::Huge),
                (87, 32_769, Values::Finite),
                (2, 32 * SPLIT_SEGMENT as usize + 5000, Values::Finite),
            ] {
                let shape = Rows::new(rows, cols);
                assert_eq!(RowOp::CrossEntropy.auto_strategy(&ctx, dtype, shape), RowStrategy::Split);
                let case =
                    RowCase { op: RowOp::CrossEntropy, dtype, shape, seed: 3, offset: 0, values, strategy: None };
                let r = verify::rows(&ctx, &case).unwrap();
                assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
                n += 1;
            }
        }
    }
    println!("split cross_entropy: {n} cases passed");
}

#[test]
fn split_loss_without_gradient_matches_block() {
    // Without the gradient the split strategy's second launch has one block per row: the loss
    // must still match the block kernel's (same row, same f32 statistics up to order).
    let ctx = Context::emulator();
    let (rows, cols) = (4, 40_000);
    let logits: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 2003) as f32 * 0.004 - 4.0).collect();
    let lb = ctx.upload(&logits).unwrap();
    let tb = ctx.upload(&[5i32, -100, 39_999, 20_000]).unwrap();
    let input = CrossEntropyInput {
        logits: lb.as_view(),
        targets: tb.as_view(),
        shape: Rows::new(rows, cols),
        ignore_index: Some(-100),
        grad_scale: 1.0,
        check_targets: true,
    };
    let mut losses = Vec::new();
    for strategy in [RowStrategy::Split, RowStrategy::Block] {
        let mut loss = ctx.alloc::<f32>(rows).unwrap();
        ferrokern::cross_entropy::cross_entropy_with(&ctx, Some(strategy), input, loss.as_view_mut(), None).unwrap();
        losses.push(loss.to_host().unwrap());
    }
    assert_eq!(losses[0][1], 0.0, "ignored row");
    for r in [0, 2, 3] {
        let (a, b) = (losses[0][r], losses[1][r]);
        assert!((a - b).abs() <= 1e-5 * b.abs(), "row {r}: split {a} vs block {b}");
    }
}
