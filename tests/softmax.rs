//! Property tests of softmax and log_softmax against the f64 reference, on the emulator
//! always and the GPU when present, over every strategy (warp, block, shared, split) and path
//! (rows cached in registers or shared memory, longer rows streamed), odd shapes, misaligned
//! views, masked rows, NaN, and huge magnitudes; each threshold at +-1; the strategy choice
//! for every row op; plus properties beyond the reference.

mod common;

use ferrokern::rows::{RowPlan, RowStrategy, Rows, shared_capacity};
use ferrokern::verify::RowOp::*;
use ferrokern::verify::{self, RowCase, RowOp, Values};
use ferrokern::{Context, DType};
use proptest::prelude::*;

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
/// Column counts around every boundary: chunk (4/8), a warp's registers (512 f32, 1024
/// 16-bit), a block's (8192 f32, 16384 16-bit; past them the shared strategy caches the row),
/// split (more than 32768 columns).
const COLS: &[usize] =
    &[1, 7, 8, 31, 33, 127, 511, 512, 513, 1023, 1024, 1025, 4097, 8191, 8192, 8193, 9001, 16_384, 16_385, 32_769];

fn run(ctx: &Context, case: RowCase) {
    let r = verify::rows(ctx, &case).unwrap_or_else(|e| panic!("{case:?} on {}: {e}", ctx.backend()));
    assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
}

fn strategy() -> impl Strategy<Value = Option<RowStrategy>> {
    proptest::sample::select(vec![
        None,
        Some(RowStrategy::Warp),
        Some(RowStrategy::Block),
        Some(RowStrategy::Shared),
        Some(RowStrategy::Split),
    ])
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
                    for strategy in [RowStrategy::Warp, RowStrategy::Block, RowStrategy::Shared, RowStrategy::Split] {
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

#[test]
fn shared_capacity_boundary() {
    // The emulator grants 227 KB per block, like an H200: 58016 f32 or 116032 16-bit columns.
    let mut n = 0;
    for ctx in common::backends("shared_capacity_boundary") {
        for dtype in DTYPES {
            let cap = shared_capacity(&ctx, dtype.size());
            if ctx.backend() == ferrokern::Backend::Emulator {
                assert_eq!(cap, if dtype == DType::F32 { 58_016 } else { 116_032 });
            }
            for (cols, strategy) in [
                (cap - 1, Some(RowStrategy::Shared)),
                (cap, Some(RowStrategy::Shared)),
                (cap + 1, Some(RowStrategy::Block)),
                (cap + 1, None),
            ] {
                let case = RowCase {
                    op: RowOp::Softmax,
                    dtype,
                    shape: Rows::new(2, cols),
                    seed: cols as u64,
                    offset: cols % 2,
                    values: Values::WithSpecials,
                    strategy,
                };
                run(&ctx, case);
                n += 1;
            }
        }
    }
    println!("shared capacity boundary: {n} cases passed");
}

#[test]
fn split_row_count_boundary() {
    // With the row in shared memory, split takes fewer than 88 rows of more than 32768 columns.
    assert_eq!(RowStrategy::select(87, 32_769, RowPlan::cached(4), 232_448), RowStrategy::Split);
    assert_eq!(RowStrategy::select(88, 32_769, RowPlan::cached(4), 232_448), RowStrategy::Shared);
    for ctx in common::backends("split_row_count_boundary") {
        for (rows, cols) in [(87, 32_769), (88, 32_769), (87, 32_768)] {
            let case = RowCase {
                op: RowOp::LogSoftmax,
                dtype: DType::BF16,
                shape: Rows::new(rows, cols),
                seed: rows as u64,
                offset: 0,
                values: Values::Finite,
                strategy: None,
            };
            run(&ctx, case);
        }
    }
}

#[test]
fn strategy_selection_picks_shared_and_split() {
    use RowStrategy::*;
    let ctx = Context::emulator();
    let cached = [Softmax, LogSoftmax, CrossEntropy, LayerNorm, RmsNorm];
    let one_pass = [Sum, Max, Argmax, LayerNormBackward, RmsNormBackward];
    let backward = [SoftmaxBackward, LogSoftmaxBackward];
    let pick = |op: RowOp, dtype: DType, rows: usize, cols: usize| op.auto_strategy(&ctx, dtype, Rows::new(rows, cols));
    for dtype in DTYPES {
        let cap = if dtype == DType::F32 { 58_016 } else { 116_032 };
        for op in one_pass.into_iter().chain(backward) {
            // A warp up to 512 columns, a block from registers up to 8192.
            assert_eq!(pick(op, dtype, 1000, 512), Warp, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 1000, 513), Block, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 1000, 8192), Block, "{op:?} {dtype:?}");
        }
        // The forward ops keep 64 bytes of row per thread: 512 f32 or 1024 16-bit columns per
        // warp, 8192 or 16384 per block.
        let warp_cols = 32 * 64 / dtype.size();
        for op in cached {
            assert_eq!(pick(op, dtype, 1000, warp_cols), Warp, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 1000, warp_cols + 1), Block, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 1000, 16 * warp_cols), Block, "{op:?} {dtype:?}");
            // Past the registers: shared while the row fits, block streaming beyond.
            assert_eq!(pick(op, dtype, 1000, 16 * warp_cols + 1), Shared, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 1000, cap), Shared, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 1000, cap + 1), Block, "{op:?} {dtype:?}");
            // Few long rows: split, below 88 rows while the row fits shared memory, below
            // 512 beyond; only past 32768 columns.
            assert_eq!(pick(op, dtype, 87, 32_769), Split, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 88, 32_769), Shared, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 87, 32_768), Shared, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 511, cap + 1), Split, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 512, cap + 1), Block, "{op:?} {dtype:?}");
        }
        for op in one_pass {
            // Read once: nothing to cache; split below 512 rows past 32768 columns.
            assert_eq!(pick(op, dtype, 1000, 8193), Block, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 511, 32_769), Split, "{op:?} {dtype:?}");
        }
        for op in [Sum, Max, Argmax] {
            assert_eq!(pick(op, dtype, 512, 32_769), Block, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 511, 32_768), Block, "{op:?} {dtype:?}");
        }
        // The norm backward streams while its f32 parameter sums fit shared memory (8 bytes a
        // column for layernorm, 4 for rmsnorm, after 384 bytes of reduction scratch), and
        // splits past them at any row count that split's grid takes.
        for (op, last) in [(LayerNormBackward, 29_008), (RmsNormBackward, 58_016)] {
            assert_eq!(pick(op, dtype, 4096, last), Block, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 4096, last + 1), Split, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 65_535, last + 1), Split, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 65_536, last + 1), Block, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 511, 32_769), Split, "{op:?} {dtype:?}");
        }
        assert_eq!(pick(LayerNormBackward, dtype, 4096, 32_768), Split);
        assert_eq!(pick(RmsNormBackward, dtype, 4096, 32_768), Block);
        for op in backward {
            assert_eq!(pick(op, dtype, 1000, 8193), Block, "{op:?} {dtype:?}");
            assert_eq!(pick(op, dtype, 8, 1 << 20), Block, "{op:?} {dtype:?}");
        }
        // The bench's long-row shapes.
        for op in cached.into_iter().chain(one_pass) {
            assert_eq!(pick(op, dtype, 64, 1 << 20), Split, "{op:?} {dtype:?}");
        }
        assert_eq!(pick(CrossEntropy, dtype, 8, 262_144), Split);
        assert_eq!(pick(Softmax, dtype, 4096, 32_768), Shared);
    }
    // A device with less shared memory (sm_80's 163 KB) caches fewer columns.
    assert_eq!(RowStrategy::select(1000, 50_000, RowPlan::cached(4), 163 * 1024), Block);
    assert_eq!(RowStrategy::select(1000, 40_000, RowPlan::cached(4), 163 * 1024), Shared);
}
