//! Property tests of every version of the SGEMM ladder (`gemm::VERSIONS`) against the f64
//! reference, within the worst-case bound `gamma_{k+2} |alpha| (|A||B|)_ij + gamma_2 |beta c|`
//! (`reference::gemm_f32_error`; the harness adds `u |ref|`), on the emulator always and
//! the GPU when present: random shapes up to 70 with every transpose pair, C stored either
//! way, padded leading dimensions, misaligned views, alpha/beta, strided batches; the named odd shapes; `K = 0`,
//! empty problems, `beta = 0` over NaN, B = I, batch splitting; launcher refusals; and a
//! deliberately broken variant that the harness must reject.

mod common;

use ferrokern::gemm::{self, BUG_NO_EDGE_GUARD, Gemm, GemmVersion, Trans, VERSIONS};
use ferrokern::verify::{self, GemmCase};
use ferrokern::{Context, Error};
use proptest::prelude::*;

fn run(ctx: &Context, v: &GemmVersion, case: GemmCase) {
    let r =
        verify::gemm_with(ctx, &case, v).unwrap_or_else(|e| panic!("{} {case:?} on {}: {e}", v.name, ctx.backend()));
    assert!(r.passed(), "{} {case:?} on {}: {r}", v.name, ctx.backend());
}

fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![1 => 0usize..3, 6 => 1usize..70]
}

fn scalar() -> impl Strategy<Value = f32> {
    prop_oneof![2 => Just(1.0f32), 1 => Just(0.0f32), 1 => Just(-1.0f32), 2 => -3.0f32..3.0]
}

/// A problem with optional padding of every leading dimension and batch stride; `tc`: C
/// stored transposed.
#[allow(clippy::too_many_arguments)]
fn problem(
    m: usize,
    n: usize,
    k: usize,
    (ta, tb, tc): (bool, bool, bool),
    batch: usize,
    pad: usize,
    alpha: f32,
    beta: f32,
) -> Gemm {
    let t = |b: bool| if b { Trans::T } else { Trans::N };
    let mut g = Gemm::new(m, n, k).transposed(t(ta), t(tb)).with_trans_c(t(tc)).scaled(alpha, beta);
    g.lda += pad;
    g.ldb += 2 * pad;
    g.ldc += pad;
    let g = g.batched(batch);
    Gemm { stride_a: g.stride_a + pad, stride_c: g.stride_c + 3 * pad, ..g }
}

/// Property cases per run (FERROKERN_CASES overrides).
const CASES: u32 = 40;

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(CASES), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_version_matches_reference(
        m in dim(), n in dim(), k in dim(),
        ta in any::<bool>(), tb in any::<bool>(), tc in any::<bool>(),
        batch in prop_oneof![3 => Just(1usize), 1 => 2usize..4],
        pad in prop_oneof![2 => Just(0usize), 1 => 1usize..5],
        alpha in scalar(), beta in scalar(),
        offset in prop_oneof![3 => Just(0usize), 1 => Just(1usize)],
        seed in any::<u64>(),
    ) {
        let case = GemmCase { gemm: problem(m, n, k, (ta, tb, tc), batch, pad, alpha, beta), seed, offset };
        for ctx in common::property_backends("gemm_every_version_matches_reference", common::cases(CASES)) {
            for v in VERSIONS {
                run(&ctx, v, case);
            }
        }
    }
}

/// The named shapes, every transpose pair, every version; `m x n x k`.
#[test]
fn named_odd_shapes_every_version() {
    let shapes = [(1, 255, 101), (127, 129, 133), (33, 1, 7), (5, 7, 1)];
    for ctx in common::backends("gemm_named_odd_shapes") {
        for (m, n, k) in shapes {
            for ta in [false, true] {
                for tb in [false, true] {
                    for v in VERSIONS {
                        let g = problem(m, n, k, (ta, tb, false), 1, 0, 1.5, -0.5);
                        run(&ctx, v, GemmCase { gemm: g, seed: (m * 7 + n * 3 + k) as u64, offset: 0 });
                    }
                }
            }
        }
    }
}

/// The same odd shapes with every leading dimension and stride padded to a multiple of 4
/// and aligned views, so v06 and later take their 16-byte loads inside the matrix and the
/// scalar fallback at its edges.
#[test]
fn vector_paths_with_odd_edges() {
    for ctx in common::backends("gemm_vector_paths") {
        for (m, n, k) in [(127, 129, 133), (1, 255, 101), (66, 70, 45), (4, 4, 4)] {
            for ta in [Trans::N, Trans::T] {
                for tb in [Trans::N, Trans::T] {
                    let mut g = Gemm::new(m, n, k).transposed(ta, tb).scaled(-0.75, 1.25);
                    g.lda = g.lda.next_multiple_of(4);
                    g.ldb = g.ldb.next_multiple_of(4) + 4;
                    g.ldc += 1;
                    let g = g.batched(2);
                    let g = Gemm {
                        stride_a: g.stride_a.next_multiple_of(4),
                        stride_b: g.stride_b.next_multiple_of(4),
                        ..g
                    };
                    for v in VERSIONS {
                        run(&ctx, v, GemmCase { gemm: g, seed: (m + n + k) as u64, offset: 0 });
                    }
                }
            }
        }
    }
}

/// Shapes with whole 128 x 128 C tiles inside the matrix and aligned operands, so v09 runs
/// its unguarded interior path (whole k-steps of 16 from advancing offsets, every layout,
/// the second matrix of a batch at its stride) beside edge tiles and a partial last k-step;
/// 256 x 128 x 64 has no partial step and an aligned C (v09's 16-byte C stores on whole
/// tiles). The shared-tile versions, which share the tile sizes.
#[test]
fn interior_tiles_every_layout() {
    for ctx in common::backends("gemm_interior_tiles") {
        for (m, n, k) in [(260, 264, 75), (256, 128, 64)] {
            for ta in [Trans::N, Trans::T] {
                for tb in [Trans::N, Trans::T] {
                    let mut g = Gemm::new(m, n, k).transposed(ta, tb).scaled(1.25, -0.5);
                    g.lda = g.lda.next_multiple_of(4) + 4;
                    g.ldb = g.ldb.next_multiple_of(4) + 8;
                    // 256 x 128: C's rows 16-byte aligned too (v09's 16-byte stores); else not.
                    g.ldc += if m == 256 { 4 } else { 3 };
                    let g = g.batched(2);
                    let g = Gemm {
                        stride_a: g.stride_a.next_multiple_of(4) + 4,
                        stride_b: g.stride_b.next_multiple_of(4),
                        ..g
                    };
                    for v in VERSIONS.iter().filter(|v| v.tiling.bm >= 128) {
                        run(&ctx, v, GemmCase { gemm: g, seed: (m * 5 + n + k) as u64, offset: 0 });
                    }
                }
            }
        }
    }
}

/// The plan by shape: fewer than 96 rows -> split-K, the rest -> the large-shape version
/// (which splits K itself when its tiles are few); C with fewer than 32 columns and at least
/// 32 rows runs as its transpose (so split-K over its columns); otherwise C stored transposed
/// runs as its transpose, which stores C^T row-major.
#[test]
fn plan_by_shape() {
    let (large, split) = (gemm::LARGE_VERSION, gemm::SPLIT_VERSION);
    for (m, n, k, want, swapped) in [
        (16, 4096, 4096, split, false),
        (1, 1, 1, split, false),
        (31, 4096, 64, split, false),
        (16, 16, 4096, split, false),
        (4096, 31, 64, split, true),
        (4096, 16, 4096, split, true),
        (40, 16, 4096, split, true),
        (31, 31, 4096, split, false),
        (32, 32, 4096, split, false),
        (32, 32, 255, split, false),
        (64, 4096, 4096, split, false),
        (95, 4096, 4096, split, false),
        (96, 4096, 4096, large, false),
        (256, 256, 65536, large, false),
        (1024, 1024, 1024, large, false),
        (1024, 1024, 65536, large, false),
        (4096, 4096, 64, large, false),
    ] {
        let g = Gemm::new(m, n, k);
        let p = gemm::plan(&g);
        assert_eq!((p.version.name, p.swapped), (want, swapped), "{m} x {n} x {k}");
        assert_eq!(p.gemm, if swapped { g.swapped() } else { g }, "{m} x {n} x {k}");
        assert_eq!(p.version.name, gemm::default_version(&p.gemm).name);
    }
    // C stored transposed: the same skinny rule, else the transpose (row-major C^T).
    let t = |m, n| gemm::plan(&Gemm::new(m, n, 64).with_trans_c(Trans::T)).swapped;
    assert!(t(4096, 16) && !t(16, 4096) && t(4096, 4096) && t(16, 16));
    for name in [large, split] {
        assert!(gemm::version(name).is_some(), "{name} is not in the ladder");
    }
}

/// `Gemm::swapped` describes the same memory: each view needs as many elements, C's elements
/// map to the transpose's, and swapping twice gives the problem back.
#[test]
fn swapped_is_the_same_product() {
    for (ta, tb, tc) in [(false, false, false), (true, false, true), (false, true, false), (true, true, true)] {
        let g = problem(7, 5, 3, (ta, tb, tc), 2, 1, 0.5, 1.5);
        let s = g.swapped();
        assert_eq!(s.swapped(), g);
        assert_eq!((s.a_len(), s.b_len(), s.c_len()), (g.b_len(), g.a_len(), g.c_len()));
        assert_eq!(s.c_index(1, 4, 6), g.c_index(1, 6, 4));
        assert_eq!((s.m, s.n, s.k, s.trans_c.is_t()), (5, 7, 3, !tc));
    }
}

/// C with few columns, through the public `gemm`: run as its transpose on v10, split (K = 700:
/// 5 splits of 160 over C^T's 3 tiles; the sum kernel stores C^T's rows as C's columns) and
/// not (K = 100: v10 stores them itself), C stored either way, batches, aligned and
/// misaligned views, every layout of A and B.
#[test]
fn skinny_columns_run_as_the_transpose() {
    for k in [700, 100] {
        let want = if k > 256 { 160 } else { 0 };
        let p = gemm::plan(&Gemm::new(300, 5, k));
        assert_eq!(
            (p.version.name, p.swapped, gemm::split_depth(p.version, &p.gemm)),
            (gemm::SPLIT_VERSION, true, want)
        );
    }
    for ctx in common::backends("gemm_skinny_columns") {
        for (m, n, k) in [(300, 5, 700), (300, 5, 100), (70, 31, 300)] {
            for (ta, tb, tc) in [(false, false, false), (true, false, true), (false, true, true), (true, true, false)] {
                for offset in [0, 1] {
                    let g = problem(m, n, k, (ta, tb, tc), 2, offset, 0.75, -0.5);
                    let case = GemmCase { gemm: g, seed: (m + n + k) as u64, offset };
                    let r = verify::gemm(&ctx, &case).unwrap();
                    assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
                }
            }
        }
    }
}

/// How split-K divides K: the skinny benchmark shape makes 32 v10 tiles x 12 splits of 352
/// depths (384 blocks, 3 per SM), 1024^3 64 v09 tiles x 4 splits of 256 (256 blocks, 2 per
/// SM); shapes with enough tiles, or too little K, are not split; splits are whole k-steps, at
/// least two, each shorter than K; versions without a sum kernel never split.
#[test]
fn split_depth_by_shape() {
    let split = gemm::version(gemm::SPLIT_VERSION).unwrap();
    let large = gemm::version(gemm::LARGE_VERSION).unwrap();
    assert_eq!((gemm::split_target(split), gemm::split_target(large)), (396, 264));
    let depth = |m, n, k| gemm::split_depth(split, &Gemm::new(m, n, k));
    assert_eq!(depth(16, 4096, 4096), 352);
    assert_eq!(depth(256, 256, 65536), 5472, "32 tiles: 12 splits");
    assert_eq!(depth(16, 300, 2000), 160, "3 tiles: 15 splits at most, of 63 k-steps: 5 each");
    assert_eq!(depth(4096, 4096, 4096), 0, "8192 tiles: no split");
    assert_eq!(depth(16, 4096, 255), 0, "K under 2 x SPLIT_MIN_DEPTH: no split");
    assert_eq!(depth(0, 4096, 4096), 0, "nothing to split");
    assert_eq!(depth(16, 4096, 4096), gemm::split_depth(split, &Gemm::new(16, 4096, 4096).batched(1)));
    assert_eq!(depth(16, 4096, 4096) * 2, gemm::split_depth(split, &Gemm::new(16, 4096, 4096).batched(2)));
    let large_depth = |m, n, k| gemm::split_depth(large, &Gemm::new(m, n, k));
    assert_eq!(large_depth(1024, 1024, 1024), 256, "64 tiles: 4 splits");
    assert_eq!(large_depth(1024, 1024, 65536), 16384, "64 tiles: 4 splits");
    assert_eq!(large_depth(1280, 1280, 4096), 2048, "100 tiles: 2 splits");
    assert_eq!(large_depth(1536, 1536, 4096), 0, "144 tiles: more than half a wave, no split");
    assert_eq!(large_depth(2048, 2048, 2048), 0, "256 tiles: no split");
    for (v, (m, n, k)) in [
        (split, (1, 1, 256)),
        (split, (16, 4096, 4096)),
        (split, (40, 700, 1000)),
        (split, (16, 128, 1 << 20)),
        (split, (100, 100, 3333)),
        (large, (1000, 1000, 1000)),
        (large, (129, 129, 257)),
        (large, (300, 5000, 1 << 20)),
    ] {
        let d = gemm::split_depth(v, &Gemm::new(m, n, k));
        assert!(d > 0 && d.is_multiple_of(v.tiling.bk as usize) && d < k, "{v:?} {m} x {n} x {k}: depth {d}");
        let blocks = k.div_ceil(d) * m.div_ceil(v.tiling.bm as usize) * n.div_ceil(v.tiling.bn as usize);
        assert!(blocks <= gemm::split_target(v), "{v:?} {m} x {n} x {k}: {blocks} blocks");
    }
    let v08 = gemm::version("v08_double_buffer").unwrap();
    assert_eq!(gemm::split_depth(v08, &Gemm::new(1024, 1024, 1024)), 0, "only split-K versions split");
}

/// The versions that split K (v09, v10).
fn split_versions() -> impl Iterator<Item = &'static GemmVersion> {
    VERSIONS.iter().filter(|v| v.sum.is_some())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(CASES / 2), failure_persistence: None, ..ProptestConfig::default() })]

    /// The split-K path on shapes too small for the launcher to split by itself: K divided
    /// into ranges of 1 to 4 k-steps (a last range of any length), every layout, batches,
    /// alpha/beta, misaligned views. The scratch starts as NaN on the emulator, so a partial
    /// the sum reads but no block wrote fails too.
    #[test]
    fn split_k_matches_reference(
        m in 1usize..40, n in 1usize..150, k in 1usize..300,
        steps in 1usize..5,
        ta in any::<bool>(), tb in any::<bool>(), tc in any::<bool>(),
        batch in prop_oneof![3 => Just(1usize), 1 => 2usize..4],
        pad in prop_oneof![2 => Just(0usize), 1 => 1usize..5],
        alpha in scalar(), beta in scalar(),
        offset in prop_oneof![3 => Just(0usize), 1 => Just(1usize)],
        seed in any::<u64>(),
    ) {
        let case = GemmCase { gemm: problem(m, n, k, (ta, tb, tc), batch, pad, alpha, beta), seed, offset };
        for v in split_versions() {
            let depth = steps * v.tiling.bk as usize;
            for ctx in common::property_backends("gemm_split_k_matches_reference", common::cases(CASES / 2)) {
                let r = verify::gemm_split_with(&ctx, &case, v, depth)
                    .unwrap_or_else(|e| panic!("{v:?} k_split {depth} {case:?} on {}: {e}", ctx.backend()));
                prop_assert!(r.passed(), "{v:?} k_split {depth} {case:?} on {}: {r}", ctx.backend());
            }
        }
    }
}

/// The public `gemm` on a skinny shape splits K by itself (7 splits of 160 here) and passes
/// the harness; two runs give the same bits.
#[test]
fn split_k_by_default_on_a_skinny_shape() {
    let g = Gemm::new(16, 260, 1100).scaled(0.5, 1.5);
    let v = gemm::default_version(&g);
    assert_eq!((v.name, gemm::split_depth(v, &g)), (gemm::SPLIT_VERSION, 160));
    for ctx in common::backends("gemm_split_k_by_default") {
        for offset in [0, 1] {
            let case = GemmCase { gemm: g, seed: 11, offset };
            let r = verify::gemm(&ctx, &case).unwrap();
            assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
        }
        let a: Vec<f32> = (0..g.a_len()).map(|i| ((i * 7919) % 1013) as f32 * 0.01 - 5.0).collect();
        let b: Vec<f32> = (0..g.b_len()).map(|i| ((i * 104_729) % 997) as f32 * 0.01 - 5.0).collect();
        let (ab, bb) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
        let run = || {
            let mut c = ctx.upload(&vec![1.0f32; g.c_len()]).unwrap();
            gemm::gemm(&ctx, &g, ab.as_view(), bb.as_view(), c.as_view_mut()).unwrap();
            c.to_host().unwrap()
        };
        let first = run();
        assert!(first.iter().all(|x| x.is_finite()));
        assert_eq!(
            first.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            run().iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }
}

/// Split tiles wholly inside C (the unguarded loads, which start at the split's first depth)
/// beside edge tiles, every layout, K ending in a partial k-step: each split version against
/// the reference, at two split depths. Every leading dimension and stride is a multiple of 4,
/// so the interior tiles take the 16-byte path.
#[test]
fn split_k_on_interior_tiles() {
    for ctx in common::backends("gemm_split_k_on_interior_tiles") {
        for v in split_versions() {
            let (bm, bn, bk) = (v.tiling.bm as usize, v.tiling.bn as usize, v.tiling.bk as usize);
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                for steps in [1, 3] {
                    // C stored transposed in half of the layouts.
                    let g = problem(2 * bm, bn + 12, 7 * bk + 4, (ta, tb, ta != tb), 2, 0, 0.5, 1.5);
                    let case = GemmCase { gemm: g, seed: 5, offset: 0 };
                    let r = verify::gemm_split_with(&ctx, &case, v, steps * bk).unwrap();
                    assert!(r.passed(), "{v:?} k_split {} {case:?} on {}: {r}", steps * bk, ctx.backend());
                }
            }
        }
    }
}

/// Split-K batches over several launches (here one batch of 3 splits per launch, 5 launches)
/// give the bits of one launch; a depth that is not whole k-steps, and a split asked of a
/// version without a sum kernel, are refused.
#[test]
fn split_k_batches_over_launches_and_bad_depths() {
    let ctx = Context::emulator();
    let v = gemm::version(gemm::SPLIT_VERSION).unwrap();
    let g = problem(20, 70, 150, (false, true, false), 5, 1, 0.5, 1.0);
    let a: Vec<f32> = (0..g.a_len()).map(|i| ((i * 31) % 17) as f32 - 8.0).collect();
    let b: Vec<f32> = (0..g.b_len()).map(|i| ((i * 13) % 11) as f32 * 0.5 - 2.5).collect();
    let c0: Vec<f32> = (0..g.c_len()).map(|i| (i % 7) as f32).collect();
    let (ab, bb) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    let run = |max_z: usize, k_split: Option<usize>| {
        let mut c = ctx.upload(&c0).unwrap();
        gemm::launch(&ctx, v, &g, ab.as_view(), bb.as_view(), c.as_view_mut(), max_z, k_split)
            .map(|_| c.to_host().unwrap())
    };
    let whole = run(gemm::MAX_GRID_Z, Some(64)).unwrap();
    assert_eq!(whole, run(4, Some(64)).unwrap(), "5 launches of one batch (3 splits) equal one launch of 5");
    // Small integers: every order of summation is exact, so split and unsplit agree bit for bit.
    assert_eq!(whole, run(gemm::MAX_GRID_Z, None).unwrap(), "split equals unsplit on exact sums");
    let refused = |r: ferrokern::Result<Vec<f32>>, what: &str| match r {
        Err(Error::InvalidArgument { message, .. }) => assert!(message.contains(what), "`{message}` lacks `{what}`"),
        other => panic!("expected InvalidArgument about `{what}`, got {other:?}"),
    };
    refused(run(gemm::MAX_GRID_Z, Some(48)), "multiple of its k-step (32)");
    let mut c = ctx.upload(&c0).unwrap();
    let v03 = gemm::version("v03_smem").unwrap();
    refused(
        gemm::launch(&ctx, v03, &g, ab.as_view(), bb.as_view(), c.as_view_mut(), gemm::MAX_GRID_Z, Some(64))
            .map(|_| Vec::new()),
        "v03_smem does not split K",
    );
}

#[test]
fn k_zero_gives_beta_c_and_empty_problems_do_nothing() {
    for ctx in common::backends("gemm_k_zero") {
        for v in VERSIONS {
            // K = 0 with beta = 2: C = 2 C (and beta = 0: C = 0, C unread).
            for beta in [2.0, 0.0] {
                let g = problem(37, 45, 0, (false, true, false), 2, 1, 1.0, beta);
                run(&ctx, v, GemmCase { gemm: g, seed: 3, offset: 0 });
            }
            // M = 0 or N = 0 (with any K): nothing to write, success.
            for (m, n, k) in [(0, 40, 9), (40, 0, 9), (0, 0, 0)] {
                run(
                    &ctx,
                    v,
                    GemmCase { gemm: problem(m, n, k, (false, false, false), 1, 0, 1.0, 1.0), seed: 4, offset: 0 },
                );
            }
        }
        // An empty problem launches nothing, even with empty views.
        let (a, b) = (ctx.alloc::<f32>(0).unwrap(), ctx.alloc::<f32>(0).unwrap());
        let mut c = ctx.alloc::<f32>(0).unwrap();
        gemm::gemm(&ctx, &Gemm::new(0, 70, 0), a.as_view(), b.as_view(), c.as_view_mut()).unwrap();
    }
}

/// beta = 0 must ignore NaN (quiet, not the harness's poison) already in C; and B = I
/// returns A exactly (one nonzero product per element).
#[test]
fn beta_zero_ignores_nan_and_identity_returns_a() {
    let (m, n) = (45, 38);
    let a: Vec<f32> = (0..m * n).map(|i| ((i * 7919) % 1013) as f32 * 0.37 - 150.0).collect();
    let eye: Vec<f32> = (0..n * n).map(|i| if i / n == i % n { 1.0 } else { 0.0 }).collect();
    for ctx in common::backends("gemm_beta_zero_identity") {
        let (ab, bb) = (ctx.upload(&a).unwrap(), ctx.upload(&eye).unwrap());
        for v in VERSIONS {
            let mut c = ctx.upload(&vec![f32::NAN; m * n]).unwrap();
            gemm::gemm_with(&ctx, v, &Gemm::new(m, n, n), ab.as_view(), bb.as_view(), c.as_view_mut()).unwrap();
            assert_eq!(c.to_host().unwrap(), a, "{}: A * I must be A exactly, NaN in C ignored", v.name);
        }
    }
}

/// More batches than one launch's grid z: the launcher splits them (here at 2 per launch).
#[test]
fn batches_split_over_several_launches() {
    let ctx = Context::emulator();
    let g = problem(9, 11, 5, (true, false, false), 5, 1, 0.5, 1.0);
    let mut rng = 1u32;
    let mut next = || {
        rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (rng >> 9) as f32 / (1 << 23) as f32 - 0.5
    };
    let a: Vec<f32> = (0..g.a_len()).map(|_| next()).collect();
    let b: Vec<f32> = (0..g.b_len()).map(|_| next()).collect();
    let c0: Vec<f32> = (0..g.c_len()).map(|_| next()).collect();
    let (ab, bb) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    let v = &VERSIONS[2];
    let mut whole = ctx.upload(&c0).unwrap();
    gemm::gemm_with(&ctx, v, &g, ab.as_view(), bb.as_view(), whole.as_view_mut()).unwrap();
    let mut split = ctx.upload(&c0).unwrap();
    gemm::launch(&ctx, v, &g, ab.as_view(), bb.as_view(), split.as_view_mut(), 2, None).unwrap();
    assert_eq!(whole.to_host().unwrap(), split.to_host().unwrap(), "3 launches of z <= 2 equal one of z = 5");
}

#[test]
fn broken_edge_guard_is_rejected() {
    let ctx = Context::emulator();
    // On multiples of its tile (and beta != 0, since it reads C regardless) it is correct...
    let ok = GemmCase { gemm: Gemm::new(64, 32, 64).scaled(1.0, 0.5), seed: 1, offset: 0 };
    let r = verify::gemm_with(&ctx, &ok, &BUG_NO_EDGE_GUARD).unwrap();
    assert!(r.passed(), "the broken variant is right on tile multiples: {r}");
    // ...and the harness rejects it everywhere else: an out-of-bounds access on the
    // emulator, or wrong, unwritten or guard-region values.
    let mut rejected = 0;
    for (m, n, k) in [(33, 32, 64), (32, 33, 64), (32, 32, 31), (1, 255, 101), (40, 40, 40)] {
        let case = GemmCase { gemm: Gemm::new(m, n, k).scaled(1.0, 0.5), seed: 2, offset: 0 };
        match verify::gemm_with(&ctx, &case, &BUG_NO_EDGE_GUARD) {
            Err(Error::Emulator(e)) => {
                assert!(e.to_string().contains("out-of-bounds"), "{m}x{n}x{k}: {e}");
                rejected += 1;
            }
            Ok(r) => {
                assert!(!r.passed(), "{m}x{n}x{k}: the broken variant passed: {r}");
                rejected += 1;
            }
            Err(e) => panic!("{m}x{n}x{k}: unexpected error {e}"),
        }
    }
    assert_eq!(rejected, 5);
}

#[test]
fn launcher_refuses_bad_arguments() {
    let ctx = Context::emulator();
    let (a, b) = (ctx.alloc::<f32>(64).unwrap(), ctx.alloc::<f32>(64).unwrap());
    let mut c = ctx.alloc::<f32>(64).unwrap();
    let v = &VERSIONS[0];
    let mut expect = |g: Gemm, what: &str| match gemm::gemm_with(&ctx, v, &g, a.as_view(), b.as_view(), c.as_view_mut())
    {
        Err(Error::InvalidArgument { message, .. }) => {
            assert!(message.contains(what), "{g:?}: message `{message}` should mention `{what}`")
        }
        other => panic!("{g:?}: expected InvalidArgument about {what}, got {other:?}"),
    };
    expect(Gemm { lda: 3, ..Gemm::new(8, 8, 8) }, "lda = 3 is smaller than a row of A");
    expect(Gemm { ldb: 7, ..Gemm::new(8, 8, 8) }, "ldb");
    expect(Gemm { ldc: 2, ..Gemm::new(8, 8, 8) }, "ldc");
    expect(
        Gemm { ldc: 4, ..Gemm::new(8, 4, 8).with_trans_c(Trans::T) },
        "ldc = 4 is smaller than a row of C (4 x 8 as stored)",
    );
    expect(Gemm::new(9, 8, 8), "A has 64 elements");
    expect(Gemm::new(8, 8, 9), "need");
    expect(Gemm::new(8, 8, 8).batched(2), "need");
    expect(Gemm { stride_c: 10, ..Gemm::new(2, 8, 1).batched(2) }, "batches of C overlap");
    expect(Gemm::new(1 << 31, 1, 1), "past 32-bit indexing");
    expect(Gemm { batch: 1 << 33, ..Gemm::new(1, 1, 1) }, "split the batch");
    // The public gemm runs this skinny C as its transpose, but checks it as given: the error
    // names B, not A (which B is in the transpose).
    let mut c128 = ctx.alloc::<f32>(128).unwrap();
    let short_b = b.as_view().slice(0..7).unwrap();
    let r = gemm::gemm(&ctx, &Gemm::new(32, 4, 2), a.as_view(), short_b, c128.as_view_mut());
    assert!(
        matches!(&r, Err(Error::InvalidArgument { message, .. }) if message.starts_with("B has 7 elements")),
        "{r:?}"
    );
    // A view of another context is refused.
    let other = Context::emulator();
    let a2 = other.alloc::<f32>(64).unwrap();
    let r = gemm::gemm(&ctx, &Gemm::new(8, 8, 8), a2.as_view(), b.as_view(), c.as_view_mut());
    assert!(matches!(r, Err(Error::WrongContext { .. })), "{r:?}");
}
