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

/// The block-per-row kernels at every block size a launcher gives them: the small-block
/// kernel (group size from the launch) with 64, 128 and 256 threads and the 512-thread kernel
/// give the exact sums of the same rows; a 512-thread kernel launched with fewer threads traps
/// rather than loop on a zero row stride, and a small-block kernel is refused more than 256.
#[test]
fn block_kernels_sum_at_every_launch_size_and_refuse_others() {
    use ferrokern::LaunchConfig;
    use ferrokern::gpu_kernels::Dim3;
    use ferrokern::gpu_kernels::KernelDef;
    use ferrokern::gpu_kernels::device::GlobalMut;
    use ferrokern::gpu_kernels::reduce::{ReduceParams, SUM_F32_BLOCK, SUM_F32_BLOCK_SMALL};
    use ferrokern::gpu_kernels::rows::BLOCK_SCRATCH_BYTES;
    let (rows, cols) = (3usize, 3001usize);
    // Small integers: every order of summation gives the exact sum in f32.
    let host: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32 - 3.0 + (i / cols) as f32).collect();
    let want: Vec<f32> = host.chunks(cols).map(|r| r.iter().sum()).collect();
    let sum_with = |ctx: &Context, def: &KernelDef<ReduceParams<f32>>, threads: u32| -> Result<Vec<f32>, Error> {
        let x = ctx.upload(&host)?;
        let mut out = ctx.upload(&vec![f32::NAN; rows])?;
        let p = ReduceParams {
            rows: rows as u32,
            cols: cols as u32,
            vectorized: 0,
            x: x.as_view().global(),
            sum: out.as_view_mut().global_mut(),
            max: GlobalMut::empty(),
            argmax: GlobalMut::empty(),
            lanes: 32,
            segment: 0,
            partial: GlobalMut::empty(),
        };
        let cfg = LaunchConfig { grid: Dim3::x(2), block: Dim3::x(threads), shared_bytes: BLOCK_SCRATCH_BYTES };
        ctx.launch(def, cfg, p)?;
        out.to_host()
    };
    for ctx in common::backends("block_kernels_sum_at_every_launch_size_and_refuse_others") {
        for (def, threads) in [
            (&SUM_F32_BLOCK_SMALL, 64),
            (&SUM_F32_BLOCK_SMALL, 128),
            (&SUM_F32_BLOCK_SMALL, 256),
            (&SUM_F32_BLOCK, 512),
        ] {
            assert_eq!(
                sum_with(&ctx, def, threads).unwrap(),
                want,
                "{} with {threads} threads on {}",
                def.name,
                ctx.backend()
            );
        }
        match sum_with(&ctx, &SUM_F32_BLOCK_SMALL, 512) {
            Err(Error::InvalidArgument { message, .. }) => assert!(message.contains("at most 256"), "{message}"),
            other => panic!("a 512-thread launch of sum_f32_block_small should be refused, got {other:?}"),
        }
    }
    match sum_with(&Context::emulator(), &SUM_F32_BLOCK, 256) {
        Err(Error::Emulator(e)) => assert!(e.to_string().contains("whole number of its row groups"), "{e}"),
        other => panic!("a 256-thread launch of sum_f32_block should fail, got {other:?}"),
    }
}

/// The warp kernels with every group size `rows::warp_row_lanes` can give (1 to 32 threads
/// per row, 32 / lanes rows per warp): from one block and from three, so the warps walk the
/// rows in a grid-stride loop whose last pass has groups past the last row; on aligned
/// 16-byte loads and on scalar ones. Lanes that do not tile a warp are refused by the kernel.
#[test]
fn warp_kernels_reduce_rows_at_every_group_size_and_refuse_others() {
    use ferrokern::LaunchConfig;
    use ferrokern::gpu_kernels::Dim3;
    use ferrokern::gpu_kernels::device::GlobalMut;
    use ferrokern::gpu_kernels::reduce::{ReduceParams, SUM_F32_WARP};
    use ferrokern::gpu_kernels::rows::{BLOCK_SCRATCH_BYTES, WARP_BLOCK_THREADS};
    let rows = 301usize;
    let sum_with = |ctx: &Context, cols: usize, lanes: u32, grid: u32| -> Result<(Vec<f32>, Vec<f32>), Error> {
        // Small integers: every order of summation gives the exact sum in f32.
        let host: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32 - 3.0 + (i / cols % 5) as f32).collect();
        let want: Vec<f32> = host.chunks(cols).map(|r| r.iter().sum()).collect();
        let x = ctx.upload(&host)?;
        let mut out = ctx.upload(&vec![f32::NAN; rows])?;
        let p = ReduceParams {
            rows: rows as u32,
            cols: cols as u32,
            vectorized: u32::from(cols.is_multiple_of(4)),
            x: x.as_view().global(),
            sum: out.as_view_mut().global_mut(),
            max: GlobalMut::empty(),
            argmax: GlobalMut::empty(),
            lanes,
            segment: 0,
            partial: GlobalMut::empty(),
        };
        let cfg =
            LaunchConfig { grid: Dim3::x(grid), block: Dim3::x(WARP_BLOCK_THREADS), shared_bytes: BLOCK_SCRATCH_BYTES };
        ctx.launch(&SUM_F32_WARP, cfg, p)?;
        Ok((out.to_host()?, want))
    };
    let mut n = 0;
    for ctx in common::backends("warp_kernels_reduce_rows_at_every_group_size") {
        // 100 columns: 25 aligned chunks (a thread has 1 to 25 of them); 23: scalar loads.
        for cols in [100, 23] {
            for lanes in [1, 2, 4, 8, 16, 32] {
                for grid in [1, 3] {
                    let (got, want) = sum_with(&ctx, cols, lanes, grid).unwrap();
                    assert_eq!(got, want, "{cols} columns, {lanes} lanes per row, grid {grid} on {}", ctx.backend());
                    n += 1;
                }
            }
        }
    }
    println!("warp reductions: {n} launches exact");
    for lanes in [0, 3, 64] {
        match sum_with(&Context::emulator(), 100, lanes, 1) {
            Err(Error::Emulator(e)) => assert!(e.to_string().contains("power of two from 1 to 32"), "{e}"),
            other => panic!("sum_f32_warp with {lanes} lanes per row should fail, got {other:?}"),
        }
    }
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

/// Rows where a thread owns every count of chunks that `rows::stream_row` treats apart: 3
/// (no unrolled round, then a 4-chunk tail whose last chunk is the row's partial one), 4
/// (one round, no tail), 5, 7 (one round, then a 4-chunk tail) and 8 (two rounds), on exact
/// rows and on ragged ones (a third of the group one chunk more, the next thread a partial
/// chunk), aligned (16-byte loads) and misaligned (scalar loads), in the warp kernels, the
/// 512-thread block kernels and (f32) the 64-thread small-block kernels.
#[test]
fn streamed_rows_match_reference_at_every_chunk_count() {
    let mut shapes = Vec::new();
    for dtype in DTYPES {
        let vec = 16 / dtype.size();
        for q in [3, 4, 5, 7, 8] {
            for ragged in [false, true] {
                for (strategy, group) in [(RowStrategy::Warp, 32), (RowStrategy::Block, 512)] {
                    let extra = if ragged { vec * (group / 3) + vec - 1 } else { 0 };
                    shapes.push((dtype, strategy, group, group * vec * q + extra));
                }
            }
        }
    }
    // The small-block kernels: f32 rows of up to 1024 columns run on 64 threads, 4 chunks each.
    shapes.push((DType::F32, RowStrategy::Block, 64, 64 * 4 * 3 + 4 * 21 + 3));
    shapes.push((DType::F32, RowStrategy::Block, 64, 64 * 4 * 4));
    let mut n = 0;
    for ctx in common::backends("streamed_rows") {
        for &(dtype, strategy, group, cols) in &shapes {
            if strategy == RowStrategy::Block {
                assert_eq!(
                    strategy.launch_threads(cols, ferrokern::rows::RowPlan::ONE_PASS) as usize,
                    group,
                    "{cols} columns"
                );
            }
            for op in [RowOp::Sum, RowOp::Max, RowOp::Argmax] {
                for offset in [0, 1] {
                    let case = RowCase {
                        op,
                        dtype,
                        shape: Rows::new(2, cols),
                        seed: (cols + offset) as u64,
                        offset,
                        values: Values::Finite,
                        strategy: Some(strategy),
                    };
                    let r = verify::rows(&ctx, &case).unwrap();
                    assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
                    n += 1;
                }
            }
        }
    }
    println!("streamed reductions: {n} cases passed");
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
