//! Property tests of softmax and log_softmax against the f64 reference, on the emulator
//! always and the GPU when present, over both strategies (warp and block per row) and both
//! paths (rows cached in registers, and longer rows streamed), odd shapes, misaligned views,
//! masked rows, NaN, and huge magnitudes; plus properties beyond the reference.

mod common;

use ferrokern::rows::{RowStrategy, Rows};
use ferrokern::verify::{self, RowCase, RowOp, Values};
use ferrokern::{Context, DType};
use proptest::prelude::*;

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
/// Column counts around every boundary: chunk (4/8), warp capacity (512), block capacity (8192).
const COLS: &[usize] = &[1, 7, 8, 31, 33, 127, 511, 512, 513, 1023, 4097, 8191, 8192, 8193, 9001];

fn run(ctx: &Context, case: RowCase) {
    let r = verify::rows(ctx, &case).unwrap_or_else(|e| panic!("{case:?} on {}: {e}", ctx.backend()));
    assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
}

fn strategy() -> impl Strategy<Value = Option<RowStrategy>> {
    proptest::sample::select(vec![None, Some(RowStrategy::Warp), Some(RowStrategy::Block), Some(RowStrategy::Split)])
}

/// Property cases per run (FERROKERN_CASES overrides).
const CASES: u32 = 96;

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(CASES), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn softmax_matches_reference(
        log in any::<bool>(),
        dtype in proptest::sample::select(DTYPES.to_vec()),
        rows in 1usize..24,
        cols in prop_oneof![3 => 1usize..700, 1 => proptest::sample::select(COLS.to_vec())],
        offset in 0usize..2,
        seed in any::<u64>(),
        values in proptest::sample::select(vec![Values::Finite, Values::WithSpecials, Values::Huge]),
        strategy in strategy(),
    ) {
        let op = if log { RowOp::LogSoftmax } else { RowOp::Softmax };
        for ctx in common::property_backends("softmax_matches_reference", common::cases(CASES)) {
            run(&ctx, RowCase { op, dtype, shape: Rows::new(rows, cols), seed, offset, values, strategy });
        }
    }
}

#[test]
fn softmax_every_boundary_both_strategies() {
    let mut n = 0;
    for ctx in common::backends("softmax_every_boundary") {
        for op in [RowOp::Softmax, RowOp::LogSoftmax] {
            for dtype in DTYPES {
                for &cols in COLS {
                    for strategy in [RowStrategy::Warp, RowStrategy::Block, RowStrategy::Split] {
                        for offset in [0, 1] {
                            let case = RowCase {
                                op,
                                dtype,
                                shape: Rows::new(3, cols),
                                seed: cols as u64,
                                offset,
                                values: Values::WithSpecials,
                                strategy: Some(strategy),
                            };
                            run(&ctx, case);
                            n += 1;
                        }
                    }
                }
            }
        }
    }
    println!("softmax: {n} boundary cases passed");
}

#[test]
fn softmax_rows_sum_to_one_and_masked_rows_are_zero() {
    let ctx = Context::emulator();
    let (rows, cols) = (5, 1000);
    let mut x: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 1000) as f32 * 0.02 - 10.0).collect();
    x[2 * cols..3 * cols].fill(f32::NEG_INFINITY); // row 2 fully masked
    x[3 * cols + 17] = f32::NAN; // row 3 has a NaN
    x[4 * cols] = 1e30; // row 4 has a huge value
    let xb = ctx.upload(&x).unwrap();
    let mut y = ctx.alloc::<f32>(rows * cols).unwrap();
    ferrokern::softmax::softmax(&ctx, xb.as_view(), Rows::new(rows, cols), y.as_view_mut()).unwrap();
    let y = y.to_host().unwrap();
    for r in [0, 1, 4] {
        let row = &y[r * cols..(r + 1) * cols];
        let s: f64 = row.iter().map(|&v| v as f64).sum();
        assert!((s - 1.0).abs() < 1e-5, "row {r} sums to {s}");
        assert!(row.iter().all(|&v| (0.0..=1.0).contains(&v)), "row {r} has values outside [0, 1]");
    }
    assert!(y[2 * cols..3 * cols].iter().all(|&v| v == 0.0), "a fully masked row gives 0, not NaN");
    assert!(y[3 * cols..4 * cols].iter().all(|v| v.is_nan()), "NaN stays in its row");
    assert!(y[..3 * cols].iter().all(|v| !v.is_nan()) && y[4 * cols..].iter().all(|v| !v.is_nan()), "and only there");
    assert_eq!(y[4 * cols], 1.0, "a huge value takes all the mass and stays finite");
}

#[test]
fn a_million_columns() {
    // The upper end: one row of 1,000,003 columns (split strategy, 123 segments).
    for ctx in common::backends("a_million_columns") {
        for op in [RowOp::Softmax, RowOp::LogSoftmax, RowOp::Sum, RowOp::Argmax] {
            let case = RowCase {
                op,
                dtype: DType::BF16,
                shape: Rows::new(1, 1_000_003),
                seed: 1,
                offset: 1,
                values: Values::Finite,
                strategy: None,
            };
            let r = verify::rows(&ctx, &case).unwrap();
            assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
        }
    }
}

#[test]
fn split_rows_match_reference() {
    assert_eq!(RowStrategy::for_shape(3, 40_000), RowStrategy::Split);
    for ctx in common::backends("split_rows") {
        for op in [RowOp::Softmax, RowOp::LogSoftmax] {
            for dtype in DTYPES {
                for values in [Values::Finite, Values::WithSpecials, Values::Huge] {
                    let case =
                        RowCase { op, dtype, shape: Rows::new(3, 40_000), seed: 9, offset: 0, values, strategy: None };
                    let r = verify::rows(&ctx, &case).unwrap();
                    assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(CASES), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn softmax_backward_matches_reference(
        log in any::<bool>(),
        dtype in proptest::sample::select(DTYPES.to_vec()),
        rows in 1usize..24,
        cols in prop_oneof![3 => 1usize..700, 1 => proptest::sample::select(COLS.to_vec())],
        offset in 0usize..2,
        seed in any::<u64>(),
        strategy in proptest::sample::select(vec![None, Some(RowStrategy::Warp), Some(RowStrategy::Block)]),
    ) {
        let op = if log { RowOp::LogSoftmaxBackward } else { RowOp::SoftmaxBackward };
        for ctx in common::property_backends("softmax_backward_matches_reference", common::cases(CASES)) {
            run(&ctx, RowCase { op, dtype, shape: Rows::new(rows, cols), seed, offset, values: Values::Finite, strategy });
        }
    }
}
