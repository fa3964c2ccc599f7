//! Property tests of the row reductions (sum, max, argmax) against the f64 reference, on the
//! emulator always and the GPU when present, over both strategies, odd shapes, misaligned
//! views, NaN and infinities.

mod common;

use ferrokern::rows::{RowStrategy, Rows};
use ferrokern::verify::{self, RowCase, RowOp, Values};
use ferrokern::{Context, DType, Error};
use proptest::prelude::*;

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
const COLS: &[usize] = &[1, 7, 31, 33, 255, 513, 1023, 4097, 9001];

/// Property cases per run (FERROKERN_CASES overrides).
const CASES: u32 = 96;

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(CASES), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn reductions_match_reference(
        op in proptest::sample::select(vec![RowOp::Sum, RowOp::Max, RowOp::Argmax]),
        dtype in proptest::sample::select(DTYPES.to_vec()),
        rows in 1usize..40,
        cols in prop_oneof![3 => 1usize..700, 1 => proptest::sample::select(COLS.to_vec())],
        offset in 0usize..2,
        seed in any::<u64>(),
        values in proptest::sample::select(vec![Values::Finite, Values::WithSpecials, Values::Huge]),
        strategy in proptest::sample::select(vec![None, Some(RowStrategy::Warp), Some(RowStrategy::Block), Some(RowStrategy::Split)]),
    ) {
        for ctx in common::property_backends("reductions_match_reference", common::cases(CASES)) {
            let case = RowCase { op, dtype, shape: Rows::new(rows, cols), seed, offset, values, strategy };
            let r = verify::rows(&ctx, &case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
            prop_assert!(r.passed(), "{:?} on {}: {}", case, ctx.backend(), r);
        }
    }
}

#[test]
fn argmax_takes_the_first_maximum_and_nan_wins() {
    let ctx = Context::emulator();
    let x = ctx.upload(&[1.0f32, 5.0, 5.0, 2.0, /* row 2 */ 1.0, f32::NAN, 9.0, f32::NAN]).unwrap();
    let mut out = ctx.alloc::<u32>(2).unwrap();
    ferrokern::reduce::argmax(&ctx, x.as_view(), Rows::new(2, 4), out.as_view_mut()).unwrap();
    assert_eq!(out.to_host().unwrap(), vec![1, 1]);
}

#[test]
fn empty_rows_sum_to_zero_and_have_no_max() {
    let ctx = Context::emulator();
    let x = ctx.alloc::<f32>(0).unwrap();
    let mut s = ctx.alloc::<f32>(3).unwrap();
    ferrokern::reduce::sum(&ctx, x.as_view(), Rows::new(3, 0), s.as_view_mut()).unwrap();
    assert_eq!(s.to_host().unwrap(), vec![0.0; 3]);
    let mut m = ctx.alloc::<f32>(3).unwrap();
    let e = ferrokern::reduce::max(&ctx, x.as_view(), Rows::new(3, 0), m.as_view_mut()).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
}

#[test]
fn split_rows_match_reference_for_every_reduction() {
    // 40000 columns over 4 rows: the automatic choice is the split strategy (5 segments).
    assert_eq!(RowStrategy::for_shape(4, 40_000), RowStrategy::Split);
    let mut n = 0;
    for ctx in common::backends("split_rows") {
        for op in [RowOp::Sum, RowOp::Max, RowOp::Argmax] {
            for dtype in DTYPES {
                for (cols, strategy) in
                    [(40_000, None), (24_581, Some(RowStrategy::Split)), (8192, Some(RowStrategy::Split))]
                {
                    let case = RowCase {
                        op,
                        dtype,
                        shape: Rows::new(4, cols),
                        seed: cols as u64,
                        offset: cols % 2,
                        values: Values::WithSpecials,
                        strategy,
                    };
                    let r = verify::rows(&ctx, &case).unwrap();
                    assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
                    n += 1;
                }
            }
        }
    }
    println!("split reductions: {n} cases passed");
}
