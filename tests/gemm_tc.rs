//! Property tests of the tensor-core GEMM (`gemm_tc::VERSIONS`, bf16 and f16 inputs, f32 C)
//! against the f64 product of the same rounded inputs, within `reference::gemm_tc_error`
//! (`gamma_{2k+2} |alpha| (|A||B|)_ij + gamma_2 |beta c|`, plus `u |ref|` from the harness), on
//! the emulator always and the GPU when present: random shapes up to 140 (one to two block
//! tiles each way), padded leading dimensions, misaligned views (the scalar staging path),
//! alpha/beta; the named odd shapes; `K = 0`; `beta = 0` over NaN (the poison); launcher
//! refusals; split-K (v05) at every slice count, its rule and its refusals.

mod common;

use ferrokern::gemm::{Gemm, Trans};
use ferrokern::gemm_tc::{self, TcInput, TcVersion, VERSIONS};
use ferrokern::verify::{self, EpilogueSpec, GemmCase};
use ferrokern::{Context, Error};
use half::{bf16, f16};
use proptest::prelude::*;

fn run<T: TcInput>(ctx: &Context, v: &TcVersion, case: GemmCase) {
    let r = verify::gemm_tc_with::<T>(ctx, &case, v)
        .unwrap_or_else(|e| panic!("{} {} {case:?} on {}: {e}", v.name, T::NAME, ctx.backend()));
    assert!(r.passed(), "{} {} {case:?} on {}: {r}", v.name, T::NAME, ctx.backend());
}

/// Whether `v` can run `case` on `ctx`; when not, checks that it refuses with a message that
/// says why (TMA alignment, or the sm_90a-only versions elsewhere) instead of running.
fn runs(ctx: &Context, v: &TcVersion, case: GemmCase) -> bool {
    let g = &case.gemm;
    let arch_ok = match (v.config.required_arch(), ctx.device_info()) {
        (Some(need), Some(info)) => info.ptx_arch == need,
        _ => true,
    };
    // TMA: 16-byte aligned bases (views start `offset` elements in) and row pitches.
    let tma_ok = case.offset.is_multiple_of(8) && g.lda.is_multiple_of(8) && g.ldb.is_multiple_of(8);
    let needs_tma = v.config.tma_boxes(false, false).is_some() && g.k > 0 && g.m > 0 && g.n > 0;
    if arch_ok && (!needs_tma || tma_ok) {
        return true;
    }
    let needle = if arch_ok { "TMA" } else { "sm_90a" };
    match verify::gemm_tc_with::<bf16>(ctx, &case, v) {
        Err(e @ Error::InvalidArgument { .. }) => {
            assert!(e.to_string().contains(needle), "{} refuses {case:?} saying {needle}: {e}", v.name)
        }
        other => panic!("{} should refuse {case:?} ({needle}), got {other:?}", v.name),
    }
    false
}

fn both(ctx: &Context, case: GemmCase) {
    for v in VERSIONS {
        if runs(ctx, v, case) {
            run::<bf16>(ctx, v, case);
            run::<f16>(ctx, v, case);
        }
    }
}

fn problem(m: usize, n: usize, k: usize, pad: usize, alpha: f32, beta: f32) -> Gemm {
    layout(m, n, k, Trans::N, Trans::N, pad, alpha, beta)
}

#[allow(clippy::too_many_arguments)]
fn layout(m: usize, n: usize, k: usize, ta: Trans, tb: Trans, pad: usize, alpha: f32, beta: f32) -> Gemm {
    let mut g = Gemm::new(m, n, k).transposed(ta, tb).scaled(alpha, beta);
    g.lda += pad;
    g.ldb += 2 * pad;
    g.ldc += pad;
    g
}

/// Property cases per run (FERROKERN_CASES overrides): each case is two dtypes on every
/// version, up to 2 x 2 blocks of 256 emulated threads.
const CASES: u32 = 24;

/// Runs `case` on every version the backend can run, with C of type `O` (f32: both input
/// types; bf16: bf16 inputs) and epilogue `ep`.
fn every<O: ferrokern::Float>(ctx: &Context, case: GemmCase, ep: EpilogueSpec) {
    for v in VERSIONS {
        if !runs(ctx, v, case) {
            continue;
        }
        let mut reports = vec![verify::gemm_tc_ex_with::<bf16, O>(ctx, &case, ep, v)];
        if O::DTYPE == ferrokern::DType::F32 {
            reports.push(verify::gemm_tc_ex_with::<f16, O>(ctx, &case, ep, v));
        }
        for r in reports {
            let r =
                r.unwrap_or_else(|e| panic!("{} {case:?} {ep:?} out {} on {}: {e}", v.name, O::NAME, ctx.backend()));
            assert!(r.passed(), "{} {case:?} {ep:?} out {} on {}: {r}", v.name, O::NAME, ctx.backend());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(CASES), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_version_matches_reference(
        m in 1usize..140, n in 1usize..140, k in prop_oneof![1 => 0usize..3, 4 => 1usize..100],
        pad in prop_oneof![2 => Just(0usize), 1 => 1usize..9],
        alpha in prop_oneof![2 => Just(1.0f32), 1 => -3.0f32..3.0],
        beta in prop_oneof![1 => Just(0.0f32), 1 => -2.0f32..2.0],
        offset in prop_oneof![3 => Just(0usize), 1 => Just(1usize)],
        seed in any::<u64>(),
    ) {
        let case = GemmCase { gemm: problem(m, n, k, pad, alpha, beta), seed, offset };
        for ctx in common::property_backends("gemm_tc_every_version_matches_reference", common::cases(CASES)) {
            both(&ctx, case);
        }
    }

    /// Transposed layouts (C stored transposed too, where there is no bias), 16-bit C and the
    /// fused epilogue, on shapes whose leading dimensions are multiples of 8 half the time (so
    /// the TMA version runs those).
    #[test]
    fn layouts_outputs_and_epilogues_match_reference(
        m8 in 1usize..18, n8 in 1usize..18, k8 in 0usize..13, odd in any::<bool>(),
        ta in any::<bool>(), tb in any::<bool>(), tc in any::<bool>(), out16 in any::<bool>(),
        bias in any::<bool>(), gelu in any::<bool>(), residual in any::<bool>(),
        beta in prop_oneof![1 => Just(0.0f32), 1 => -2.0f32..2.0],
        seed in any::<u64>(),
    ) {
        let d = if odd { 3 } else { 0 };
        let (m, n, k) = (8 * m8 - d, 8 * n8 - d, 8 * k8 + d);
        let t = |b: bool| if b { Trans::T } else { Trans::N };
        let g = layout(m, n, k, t(ta), t(tb), 0, 1.0, beta).with_trans_c(t(tc && !bias));
        let case = GemmCase { gemm: g, seed, offset: 0 };
        let ep = EpilogueSpec { bias, gelu, residual };
        for ctx in common::property_backends("gemm_tc_layouts_outputs_and_epilogues", common::cases(CASES)) {
            if out16 {
                every::<bf16>(&ctx, case, ep);
            } else {
                every::<f32>(&ctx, case, ep);
            }
        }
    }
}

/// The named shapes (`m x n x k`), aligned (cp.async) and misaligned (scalar staging).
#[test]
fn named_odd_shapes() {
    for ctx in common::backends("gemm_tc_named_odd_shapes") {
        for (m, n, k) in [(1, 255, 101), (127, 129, 133), (33, 1, 7), (128, 128, 64)] {
            for offset in [0, 1] {
                let g = problem(m, n, k, 0, 1.5, -0.5);
                both(&ctx, GemmCase { gemm: g, seed: (m * 7 + n * 3 + k) as u64, offset });
            }
        }
    }
}

#[test]
fn k_zero_gives_beta_c_and_empty_problems_succeed() {
    for ctx in common::backends("gemm_tc_k_zero") {
        both(&ctx, GemmCase { gemm: problem(37, 45, 0, 0, 2.0, 0.5), seed: 1, offset: 0 });
        both(&ctx, GemmCase { gemm: problem(37, 45, 0, 0, 2.0, 0.0), seed: 2, offset: 0 });
        both(&ctx, GemmCase { gemm: problem(0, 45, 9, 0, 1.0, 0.0), seed: 3, offset: 0 });
        both(&ctx, GemmCase { gemm: problem(9, 0, 9, 0, 1.0, 0.0), seed: 4, offset: 0 });
    }
}

#[test]
fn launcher_refuses_what_it_cannot_run() {
    let ctx = Context::emulator();
    let a = ctx.upload(&[bf16::ZERO; 64]).unwrap();
    let b = ctx.upload(&[bf16::ZERO; 64]).unwrap();
    let mut c = ctx.upload(&[0f32; 64]).unwrap();
    let expect = |r: ferrokern::Result<()>, needle: &str| match r {
        Err(Error::InvalidArgument { .. }) => {
            let msg = r.unwrap_err().to_string();
            assert!(msg.contains(needle), "message says what to fix ({needle}): {msg}");
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    let mut c16 = ctx.upload(&[f16::ZERO; 64]).unwrap();
    let plain = Gemm::new(8, 8, 8);
    let v = &VERSIONS[0];
    let none = gemm_tc::Epilogue::default();
    expect(gemm_tc::gemm_tc_ex(&ctx, v, &plain, a.as_view(), b.as_view(), c16.as_view_mut(), &none), "input type");
    let short_bias = ctx.upload(&[0f32; 7]).unwrap();
    let ep = gemm_tc::Epilogue { bias: Some(short_bias.as_view()), gelu: false, residual: None };
    expect(gemm_tc::gemm_tc_ex(&ctx, v, &plain, a.as_view(), b.as_view(), c.as_view_mut(), &ep), "bias");
    let bias = ctx.upload(&[0f32; 8]).unwrap();
    let ep = gemm_tc::Epilogue { bias: Some(bias.as_view()), gelu: false, residual: None };
    let col_major = plain.with_trans_c(Trans::T);
    expect(gemm_tc::gemm_tc_ex(&ctx, v, &col_major, a.as_view(), b.as_view(), c.as_view_mut(), &ep), "trans_c = N");
    let short_res = ctx.upload(&[0f32; 63]).unwrap();
    let ep = gemm_tc::Epilogue { bias: None, gelu: false, residual: Some(short_res.as_view()) };
    expect(gemm_tc::gemm_tc_ex(&ctx, v, &plain, a.as_view(), b.as_view(), c.as_view_mut(), &ep), "residual");
    let batched = Gemm::new(4, 4, 4).batched(2);
    expect(gemm_tc::gemm_tc(&ctx, &batched, a.as_view(), b.as_view(), c.as_view_mut()), "batch");
    let big = Gemm::new(9, 8, 8);
    expect(gemm_tc::gemm_tc(&ctx, &big, a.as_view(), b.as_view(), c.as_view_mut()), "elements");
    let mut short = Gemm::new(8, 8, 8);
    short.lda = 7;
    expect(gemm_tc::gemm_tc(&ctx, &short, a.as_view(), b.as_view(), c.as_view_mut()), "lda");
}

#[test]
fn the_launcher_picks_the_measured_rung_for_the_shape_and_one_that_fits_the_device() {
    let emu = Context::emulator();
    let sms = gemm_tc::sm_count(&emu);
    // v03's C tiles filling half of the (emulated H200's) SMs or more: v03; fewer: v02.
    let (bm, bn) = gemm_tc::version(gemm_tc::LARGE_SHAPES).unwrap().config.block_tile();
    let (bm, bn) = (bm as usize, bn as usize);
    let half = sms.div_ceil(2);
    let pick = |m: usize, n: usize, k: usize| gemm_tc::default_version(&emu, &Gemm::new(m, n, k), 0, 0).name;
    assert_eq!(pick(bm * half, bn, 64), gemm_tc::LARGE_SHAPES, "{half} tiles: half of {sms} SMs");
    assert_eq!(pick(bm * (half - 1), bn, 64), gemm_tc::SMALL_SHAPES, "{} tiles", half - 1);
    assert_eq!(pick(4096, 4096, 4096), gemm_tc::LARGE_SHAPES);
    for (m, n, k) in [(1024, 1024, 1024), (128, 8192, 8192), (1, 8192, 8192), (1024, 1024, 16384)] {
        assert_eq!(pick(m, n, k), gemm_tc::SMALL_SHAPES, "{m}x{n}x{k}");
    }
    // Unaligned operands rule out every TMA rung: v01.
    assert_eq!(gemm_tc::default_version(&emu, &Gemm::new(4096, 4096, 4096), 2, 0).name, VERSIONS[0].name);
    // On a device with sm_86's 99 KB per block, the highest rung whose shared memory fits.
    let g = Gemm::new(64, 64, 64);
    let small = Context::emulator_with_shared_limit(101_376).unwrap();
    let v = gemm_tc::default_version(&small, &g, 0, 0);
    let want = VERSIONS.iter().rev().find(|v| v.config.shared_bytes() <= 101_376).expect("some version fits 99 KB");
    assert_eq!(v.name, want.name, "the highest version that fits");
    let preferred = gemm_tc::version(gemm_tc::SMALL_SHAPES).unwrap();
    assert!(preferred.config.shared_bytes() > 101_376, "the premise: the preferred rung needs more than 99 KB");
    // It runs there and matches the reference.
    let case = GemmCase { gemm: problem(45, 70, 93, 3, 1.0, 0.5), seed: 3, offset: 0 };
    run::<bf16>(&small, v, case);
}

/// TMA-friendly shapes (leading dimensions multiples of 8) that every version runs,
/// including the sm_90a one on the emulator: partial tiles in every dimension, and K long
/// enough to wrap v02's 4-stage ring twice (k-steps of 64).
#[test]
fn aligned_shapes_wrap_the_pipeline() {
    for ctx in common::backends("gemm_tc_aligned_shapes") {
        for (m, n, k) in [(128, 128, 64), (130, 200, 520), (64, 8, 16), (1, 8, 8), (257, 136, 1000)] {
            let g = problem(m, n, k, 0, 1.25, 0.75);
            let case = GemmCase { gemm: g, seed: (m + n + k) as u64, offset: 0 };
            for v in VERSIONS {
                assert!(runs(&ctx, v, case), "{} refuses the TMA-friendly {case:?}", v.name);
                run::<bf16>(&ctx, v, case);
                run::<f16>(&ctx, v, case);
            }
        }
    }
}

/// Whole tiles of every version (v01 and v02 128 x 128, v03 256 x 128, v04-v06
/// 128 x 256): the wgmma versions store them by element pairs (`wgmma::pair_epilogue`), with
/// f32 and bf16 C, beta 0 (C is poisoned and must not be read) and not; then the same with an
/// odd `ldc`, which the pairs cannot take (staged through shared memory:
/// `wgmma::staged_epilogue`).
#[test]
fn whole_tiles_store_by_pairs_and_odd_ldc_through_staging() {
    let plain = EpilogueSpec { bias: false, gelu: false, residual: false };
    for ctx in common::backends("gemm_tc_whole_tiles") {
        for (pad, beta) in [(0, 0.0), (0, 0.75), (1, 0.75)] {
            let mut g = problem(256, 256, 64, 0, 1.25, beta);
            g.ldc += pad;
            let case = GemmCase { gemm: g, seed: 11 + pad as u64, offset: 0 };
            every::<f32>(&ctx, case, plain);
            every::<bf16>(&ctx, case, plain);
        }
    }
}

/// Each deliberately broken variant of v02 is caught on the emulator: a mis-laid B operand by
/// the reference comparison, every pipeline-protocol bug by the async-proxy checks (a
/// wgmma reading a stage its thread did not wait for, a TMA overwriting a stage a wgmma may
/// still read), and the staged epilogue read before its hand-over by the shared-memory
/// checks, before any wrong number could be reported as right. The shape has edge tiles, so
/// the staged epilogue runs.
#[test]
fn broken_wgmma_variants_are_rejected() {
    let ctx = Context::emulator();
    let case = GemmCase { gemm: problem(130, 136, 520, 0, 1.0, 0.0), seed: 7, offset: 0 };
    for v in gemm_tc::BUG_VERSIONS {
        // Wrong numbers, not a broken protocol: the comparison must catch these.
        let layout_bug = v.name.ends_with("layout") || v.name.contains("split_k");
        // Two slices where the version splits, and one block for a persistent one (so it
        // walks all four units and the ring wraps across them).
        let splits = if matches!(v.config, gemm_tc::TcConfig::Wgmma(t) if t.split_k) { 2 } else { 1 };
        match verify::gemm_tc_planned_with::<bf16, f32>(&ctx, &case, EpilogueSpec::default(), v, plan(splits, 1)) {
            Ok(r) => {
                assert!(layout_bug, "{}: a protocol bug should be stopped by the emulator, got {r}", v.name);
                assert!(!r.passed(), "{} passed the harness: {r}", v.name);
                println!("{}: rejected by the comparison: {r}", v.name);
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(!layout_bug, "{}: a layout bug should reach the comparison, got {msg}", v.name);
                // The staging bug reads shared words the warpgroup's other threads have not
                // written yet (or, in a later chunk, are about to write).
                let want: &[&str] = if v.name.contains("handover") {
                    &["uninitialized shared memory", "shared-memory race"]
                } else {
                    &["async proxy", "deadlock"]
                };
                assert!(want.iter().any(|w| msg.contains(w)), "{}: unexpected error {msg}", v.name);
                println!("{}: rejected by the emulator: {msg}", v.name);
            }
        }
    }
}

fn plan(splits: usize, blocks: usize) -> Option<gemm_tc::TcPlan> {
    Some(gemm_tc::TcPlan { splits, blocks })
}

fn split_version() -> &'static TcVersion {
    gemm_tc::version("v05_wgmma_splitk").expect("the split-K version is in the ladder")
}

/// Split-K with every slice count from 1 to all k-steps, remainders included (9 steps in
/// 2, 4, 5 slices; 16 in 3, 7), with beta over C, f32 and 16-bit C, and the epilogue applied
/// once after the slices are added (bias and GELU would be wrong if any slice applied them).
#[test]
fn split_k_slices_match_reference() {
    let v = split_version();
    for ctx in common::backends("gemm_tc_split_k_slices") {
        if !runs(&ctx, v, GemmCase { gemm: problem(8, 8, 8, 0, 1.0, 0.0), seed: 0, offset: 0 }) {
            continue;
        }
        let ep = EpilogueSpec { bias: true, gelu: true, residual: true };
        for (m, n, k, splits) in [(130, 200, 520, 2), (130, 200, 520, 4), (130, 200, 520, 5), (130, 200, 520, 9)] {
            let case = GemmCase { gemm: problem(m, n, k, 0, 1.25, 0.5), seed: (k + splits) as u64, offset: 0 };
            for r in [
                verify::gemm_tc_planned_with::<bf16, f32>(&ctx, &case, EpilogueSpec::default(), v, plan(splits, 132)),
                verify::gemm_tc_planned_with::<f16, f32>(&ctx, &case, ep, v, plan(splits, 132)),
                verify::gemm_tc_planned_with::<bf16, bf16>(&ctx, &case, ep, v, plan(splits, 132)),
            ] {
                let r = r.unwrap_or_else(|e| panic!("{splits} slices {case:?} on {}: {e}", ctx.backend()));
                assert!(r.passed(), "{splits} slices {case:?} on {}: {r}", ctx.backend());
            }
        }
        for (m, n, k, splits) in [(1, 8, 1000, 3), (33, 264, 1000, 7), (64, 8, 1000, 16)] {
            let case = GemmCase { gemm: problem(m, n, k, 0, -1.0, 0.0), seed: splits as u64, offset: 0 };
            let r = verify::gemm_tc_planned_with::<bf16, f32>(&ctx, &case, ep, v, plan(splits, 132))
                .unwrap_or_else(|e| panic!("{splits} slices {case:?} on {}: {e}", ctx.backend()));
            assert!(r.passed(), "{splits} slices {case:?} on {}: {r}", ctx.backend());
        }
    }
}

/// The launcher's rule: a split only where the tiles leave half the SMs idle, never more
/// blocks than SMs, at least `MIN_SPLIT_STEPS` k-steps a slice, no empty slice; the issue's
/// decode-like and K-heavy shapes split four ways on an H200's 132 SMs, 8192^3 does not.
#[test]
fn split_k_rule_fills_idle_sms_only() {
    let cfg = split_version().config;
    let gemm = |m, n, k| Gemm::new(m, n, k);
    for (m, n, k, want) in [
        (1024, 1024, 16384, 4),
        (1, 8192, 8192, 4),
        (128, 8192, 8192, 4),
        (8192, 8192, 8192, 1),
        (64, 64, 2048, 8),
        (64, 64, 100, 1),
        (64, 64, 0, 1),
        (0, 64, 640, 1),
    ] {
        assert_eq!(gemm_tc::split_k(cfg, &gemm(m, n, k), 132), want, "{m} x {n} x {k}");
    }
    for v in VERSIONS {
        let splits = matches!(v.config, gemm_tc::TcConfig::Wgmma(t) if t.split_k);
        assert_eq!(splits, v.name >= "v05", "{}: split-K from v05 on", v.name);
        let want = if splits { 64 } else { 1 };
        assert_eq!(gemm_tc::split_k(v.config, &gemm(64, 64, 16384), 132), want, "{}", v.name);
    }
    let (bm, bn) = cfg.block_tile();
    for sms in [1, 8, 78, 114, 132] {
        for m in [1, 100, 128, 129, 700, 4000] {
            for n in [8, 256, 300, 2048] {
                for k in [1, 255, 256, 1000, 4096, 65536] {
                    let s = gemm_tc::split_k(cfg, &gemm(m, n, k), sms);
                    let (tiles, steps) = (m.div_ceil(bm as usize) * n.div_ceil(bn as usize), k.div_ceil(64));
                    assert!(s >= 1 && (s == 1 || tiles * s <= sms), "{m} x {n} x {k} on {sms}: {s} slices");
                    assert!(s == 1 || steps / s >= gemm_tc::MIN_SPLIT_STEPS, "{m} x {n} x {k}: {s} slices");
                    assert!((s - 1) * steps.div_ceil(s) < steps, "{m} x {n} x {k}: an empty slice of {s}");
                }
            }
        }
    }
}

/// Slice counts the launcher cannot honour are refused with what to pass instead.
#[test]
fn split_k_refusals_say_what_to_pass() {
    let ctx = Context::emulator();
    let a = ctx.upload(&[bf16::ZERO; 64 * 256]).unwrap();
    let b = ctx.upload(&[bf16::ZERO; 256 * 64]).unwrap();
    let mut c = ctx.upload(&[0f32; 64 * 64]).unwrap();
    let g = Gemm::new(64, 64, 256);
    let none = gemm_tc::Epilogue::default();
    let mut refuse = |v: &TcVersion, splits: usize, needle: &str| match gemm_tc::gemm_tc_planned(
        &ctx,
        v,
        &g,
        a.as_view(),
        b.as_view(),
        c.as_view_mut(),
        &none,
        plan(splits, 132).unwrap(),
    ) {
        Err(e @ Error::InvalidArgument { .. }) => {
            assert!(e.to_string().contains(needle), "{} with {splits} slices says {needle}: {e}", v.name)
        }
        other => panic!("{} with {splits} slices should be refused, got {other:?}", v.name),
    };
    refuse(split_version(), 0, "pass 1");
    refuse(split_version(), 5, "at most 4");
    refuse(gemm_tc::version("v04_wgmma_n256").unwrap(), 2, "v05_wgmma_splitk");
    refuse(&VERSIONS[0], 2, "does not split K");
    let persistent = gemm_tc::version("v06_wgmma_persistent").unwrap();
    let no_blocks = gemm_tc::TcPlan { splits: 1, blocks: 0 };
    match gemm_tc::gemm_tc_planned(&ctx, persistent, &g, a.as_view(), b.as_view(), c.as_view_mut(), &none, no_blocks) {
        Err(e @ Error::InvalidArgument { .. }) => assert!(e.to_string().contains("at least one block"), "{e}"),
        other => panic!("blocks = 0 should be refused, got {other:?}"),
    }
}

/// A persistent block walks several tiles (and slices) with the ring's stages and phases
/// running on across them: v06 with 1, 2, 3 and 5 blocks for 9 tiles of 9 k-steps (which
/// leave the ring at a different stage after each tile), with 3 slices, and in every layout
/// with the epilogue.
#[test]
fn persistent_blocks_walk_every_tile() {
    let v = gemm_tc::version("v06_wgmma_persistent").expect("the persistent version is in the ladder");
    for ctx in common::backends("gemm_tc_persistent_blocks") {
        if !runs(&ctx, v, GemmCase { gemm: problem(8, 8, 8, 0, 1.0, 0.0), seed: 0, offset: 0 }) {
            continue;
        }
        let ep = EpilogueSpec { bias: true, gelu: false, residual: true };
        for (blocks, splits) in [(1, 1), (2, 1), (3, 1), (5, 1), (2, 3), (4, 2)] {
            let case = GemmCase { gemm: problem(257, 520, 520, 0, 1.0, 0.5), seed: blocks as u64, offset: 0 };
            let r = verify::gemm_tc_planned_with::<bf16, f32>(&ctx, &case, ep, v, plan(splits, blocks))
                .unwrap_or_else(|e| panic!("{blocks} blocks, {splits} slices on {}: {e}", ctx.backend()));
            assert!(r.passed(), "{blocks} blocks, {splits} slices on {}: {r}", ctx.backend());
        }
        for (ta, tb) in [(Trans::T, Trans::N), (Trans::N, Trans::T), (Trans::T, Trans::T)] {
            let case = GemmCase { gemm: layout(136, 264, 200, ta, tb, 0, -0.5, 0.0), seed: 3, offset: 0 };
            let r = verify::gemm_tc_planned_with::<f16, f16>(&ctx, &case, ep, v, plan(1, 2))
                .unwrap_or_else(|e| panic!("{ta:?}{tb:?} on {}: {e}", ctx.backend()));
            assert!(r.passed(), "{ta:?}{tb:?} on {}: {r}", ctx.backend());
        }
    }
}

/// The public `gemm()` takes bf16 and f16 inputs to the tensor cores, batches included (a
/// loop over the matrices), every layout, C stored either way, aligned (TMA-eligible) and
/// misaligned views.
#[test]
fn public_gemm_dispatches_16_bit_inputs_to_the_tensor_cores() {
    for ctx in common::backends("gemm_public_16_bit") {
        for (ta, tb) in [(Trans::N, Trans::N), (Trans::T, Trans::N), (Trans::N, Trans::T), (Trans::T, Trans::T)] {
            for (batch, offset) in [(1, 0), (3, 0), (2, 1)] {
                let tc = if batch == 1 { Trans::N } else { Trans::T };
                let g = Gemm::new(72, 40, 24).transposed(ta, tb).with_trans_c(tc).batched(batch).scaled(1.0, 0.5);
                let case = GemmCase { gemm: g, seed: batch as u64 + 11, offset };
                for r in [verify::gemm_public::<bf16>(&ctx, &case), verify::gemm_public::<f16>(&ctx, &case)] {
                    let r = r.unwrap_or_else(|e| panic!("{case:?} on {}: {e}", ctx.backend()));
                    assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
                }
            }
        }
    }
}
