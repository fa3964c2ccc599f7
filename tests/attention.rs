//! Attention forward against the f64 reference under FlashAttention's rule (max error at most
//! twice the naive low-precision attention's), every version of the ladder, on the emulator
//! always and the GPU when present: odd and unequal sequence lengths, causal (bottom-right
//! aligned), grouped-query and multi-query heads, fully masked rows; plus bad input, the
//! launcher's version choice, and a deliberately wrong P re-pack the check must reject.

mod common;

use ferrokern::DType;
use ferrokern::attention::{
    AttentionCase, AttentionInput, AttentionShape, AttentionVersion, BUG_V02_SWAPPED_P, BUG_V03_SWAPPED_P,
    BUG_V03_TAIL_NOT_ZEROED, VERSIONS, VarlenCase, VarlenInput, attention, attention_varlen, attention_varlen_with,
    attention_with, check_varlen_with, check_with, default_varlen_version, default_version, unavailable,
};
use ferrokern::{Context, Error};
use proptest::prelude::*;

fn run(ctx: &Context, v: &AttentionVersion, case: AttentionCase) {
    if let Some(why) = unavailable(ctx, v, case.shape.head_dim) {
        common::once(&format!("{}/{}/skip", v.name, ctx.backend()), || format!("SKIP: {why}"));
        return;
    }
    let r = check_with(ctx, &case, Some(v)).unwrap_or_else(|e| panic!("{} {case:?} on {}: {e}", v.name, ctx.backend()));
    assert!(r.passed(), "{} {case:?} on {}: {r}", v.name, ctx.backend());
}

/// The versions that support `head_dim`.
fn versions_for(head_dim: usize) -> impl Iterator<Item = &'static AttentionVersion> {
    VERSIONS.iter().filter(move |v| v.kernel(head_dim).is_some())
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
        seq_q in 1usize..100,
        seq_k in 1usize..150,
        head_dim in proptest::sample::select(vec![32usize, 64, 128, 256]),
        causal in any::<bool>(),
        seed in any::<u64>(),
    ) {
        for ctx in common::property_backends("attention_matches_reference", common::cases(CASES)) {
            for v in versions_for(head_dim) {
                run(&ctx, v, AttentionCase { dtype, shape: shape(batch, heads, kv_heads, seq_q, seq_k, head_dim), causal, seed });
            }
        }
    }
}

#[test]
fn attention_named_lengths() {
    let mut n = 0;
    for ctx in common::backends("attention_named_lengths") {
        for head_dim in [64, 128, 256] {
            for v in versions_for(head_dim) {
                for (seq_q, seq_k) in [(1, 1), (113, 113), (239, 239), (7, 113), (113, 7), (1, 239)] {
                    for causal in [false, true] {
                        // Both dtypes at head dim 64; one per length at 128 and 256 (the
                        // emulator's time).
                        for dtype in [DType::BF16, DType::F16] {
                            if head_dim > 64 && (dtype == DType::F16) != causal {
                                continue;
                            }
                            let seed = (seq_q * 1000 + seq_k + head_dim) as u64;
                            run(
                                &ctx,
                                v,
                                AttentionCase { dtype, shape: shape(1, 2, 1, seq_q, seq_k, head_dim), causal, seed },
                            );
                            n += 1;
                        }
                    }
                }
            }
        }
    }
    println!("attention: {n} named cases passed");
}

#[test]
fn long_key_sequences_wrap_the_pipelines() {
    // 1025 keys: 17 tiles of v02 and 9 of v03 (17 at head dim 256, 64-key tiles), so the
    // rings wrap many times (mbarrier phase parity flips, stages reused) and the last tile
    // holds one key.
    for ctx in common::backends("long_key_sequences_wrap_the_pipelines") {
        for (head_dim, dtype, causal) in [(64, DType::BF16, false), (128, DType::F16, true), (256, DType::BF16, true)] {
            for v in versions_for(head_dim).filter(|v| v.tensor_cores) {
                let case = AttentionCase { dtype, shape: shape(1, 2, 1, 130, 1025, head_dim), causal, seed: 1025 };
                run(&ctx, v, case);
            }
        }
    }
}

#[test]
fn fully_masked_rows_give_zero_and_minus_infinity() {
    // Causal with seq_q > seq_k: the first seq_q - seq_k queries see no key (70 rows: the first
    // 64-row block of v02 is entirely masked for its first three warps, partly for the fourth).
    let ctx = Context::emulator();
    let (d, masked) = (64, 54);
    let s = shape(1, 1, 1, 70, 16, d);
    let q = ctx.upload(&vec![half::bf16::from_f32(0.5); s.q_len()]).unwrap();
    let kv = ctx.upload(&vec![half::bf16::from_f32(0.25); s.kv_len()]).unwrap();
    for v in versions_for(d) {
        let mut o = ctx.alloc::<half::bf16>(s.q_len()).unwrap();
        let mut lse = ctx.alloc::<f32>(s.lse_len()).unwrap();
        let input =
            AttentionInput { q: q.as_view(), k: kv.as_view(), v: kv.as_view(), shape: s, causal: true, scale: None };
        attention_with(&ctx, v, input, o.as_view_mut(), lse.as_view_mut()).unwrap();
        let (o, lse) = (o.to_host().unwrap(), lse.to_host().unwrap());
        assert!(o[..masked * d].iter().all(|x| x.to_f32() == 0.0), "{}: masked rows are 0, not NaN", v.name);
        assert!(lse[..masked].iter().all(|&x| x == f32::NEG_INFINITY), "{}: masked rows' lse is -inf", v.name);
        assert!(o[masked * d..].iter().all(|x| (x.to_f32() - 0.25).abs() < 1e-3), "{}: visible rows average V", v.name);
        run(&ctx, v, AttentionCase { dtype: DType::F16, shape: s, causal: true, seed: 3 });
    }
}

#[test]
fn the_launcher_picks_the_highest_version_that_fits() {
    let top = VERSIONS.last().unwrap();
    assert_eq!(top.name, "v04_pingpong");
    // The emulator runs every version; a GPU only those its PTX has (v03, v04: sm_90a).
    let ctx = Context::emulator();
    for d in [64, 128] {
        assert_eq!(default_version(&ctx, d, true).map(|v| v.name), Some("v04_pingpong"), "head dim {d}");
        assert_eq!(default_version(&ctx, d, false).map(|v| v.name), Some("v01_simt"), "head dim {d}, misaligned");
    }
    for d in [32, 96] {
        assert_eq!(default_version(&ctx, d, true).map(|v| v.name), Some("v01_simt"), "head dim {d}");
    }
    // Head dim 256: v03 only (v02 would spill; v01 stages at most 128 dims per row; v04 keeps
    // one more P than v03, whose consumers are at their register cap there).
    assert_eq!(default_version(&ctx, 256, true).map(|v| v.name), Some("v03_wgmma"), "head dim 256");
    assert!(default_version(&ctx, 256, false).is_none(), "head dim 256 needs 16-byte aligned views");
    for gpu in common::backends("the_launcher_picks/gpu").into_iter().filter(|c| c.device_info().is_some()) {
        let hopper = gpu.device_info().is_some_and(|i| i.ptx_arch == "sm_90a");
        let want = if hopper { "v04_pingpong" } else { "v02_mma" };
        assert_eq!(default_version(&gpu, 128, true).map(|v| v.name), Some(want), "on {}", gpu.backend());
        let want = hopper.then_some("v03_wgmma");
        assert_eq!(default_version(&gpu, 256, true).map(|v| v.name), want, "head dim 256 on {}", gpu.backend());
    }
    // A misaligned view (one element off) runs v01 through `attention` and is checked the same.
    let s = shape(1, 2, 1, 33, 47, 64);
    let mut rng = 1u32;
    let mut draw = |n: usize| -> Vec<half::bf16> {
        (0..n)
            .map(|_| {
                rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                half::bf16::from_f32((rng >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0)
            })
            .collect()
    };
    let (q, k, vv) = (draw(s.q_len()), draw(s.kv_len()), draw(s.kv_len()));
    // The same Q once at the start of its buffer and once one element in.
    let shifted: Vec<half::bf16> = [half::bf16::ZERO].into_iter().chain(q.iter().copied()).collect();
    let (qb, qs) = (ctx.upload(&q).unwrap(), ctx.upload(&shifted).unwrap());
    let (kb, vb) = (ctx.upload(&k).unwrap(), ctx.upload(&vv).unwrap());
    let mut outs = Vec::new();
    for (name, qv) in [("aligned", qb.as_view()), ("misaligned", qs.view(1..s.q_len() + 1).unwrap())] {
        let mut o = ctx.alloc::<half::bf16>(s.q_len()).unwrap();
        let mut lse = ctx.alloc::<f32>(s.lse_len()).unwrap();
        let input = AttentionInput { q: qv, k: kb.as_view(), v: vb.as_view(), shape: s, causal: false, scale: None };
        attention(&ctx, input, o.as_view_mut(), lse.as_view_mut()).unwrap_or_else(|e| panic!("{name}: {e}"));
        outs.push(o.to_host().unwrap());
        // The explicit top version refuses the misaligned view with a typed error.
        if name == "misaligned" {
            let mut o = ctx.alloc::<half::bf16>(s.q_len()).unwrap();
            let e = attention_with(&ctx, top, input, o.as_view_mut(), lse.as_view_mut()).expect_err("misaligned q");
            assert!(matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("16-byte"), "{e}");
        }
    }
    // v03 (aligned) and v01 (misaligned) on the same inputs: within bf16 rounding of each other.
    let diff = outs[0].iter().zip(&outs[1]).map(|(x, y)| (x.to_f32() - y.to_f32()).abs()).fold(0.0f32, f32::max);
    assert!(diff < 2e-2, "v03 and v01 differ by {diff}");
    // Head dim 256 has no version for misaligned views: `attention` says to align them.
    let s = shape(1, 1, 1, 5, 5, 256);
    let (qs, kv) = (ctx.alloc::<half::bf16>(s.q_len() + 1).unwrap(), ctx.alloc::<half::bf16>(s.kv_len()).unwrap());
    let (mut o, mut lse) = (ctx.alloc::<half::bf16>(s.q_len()).unwrap(), ctx.alloc::<f32>(s.lse_len()).unwrap());
    let q = qs.view(1..s.q_len() + 1).unwrap();
    let input = AttentionInput { q, k: kv.as_view(), v: kv.as_view(), shape: s, causal: false, scale: None };
    let e = attention(&ctx, input, o.as_view_mut(), lse.as_view_mut()).expect_err("misaligned q at head dim 256");
    let msg = e.to_string();
    assert!(msg.contains("not 16-byte aligned") && msg.contains("v03_wgmma") && msg.contains("32-128"), "{msg}");
}

#[test]
fn tensor_core_versions_agree_with_v01_for_negative_and_zero_scales() {
    // The check uses the default scale; v02 folds a negative scale into Q's sign, v03 negates
    // S, and both treat a zero scale (uniform attention) apart from masking, so they are
    // compared with v01 here.
    let ctx = Context::emulator();
    let s = shape(1, 2, 1, 70, 75, 64);
    let draw = |n: usize, k: usize| -> Vec<half::f16> {
        (0..n).map(|i| half::f16::from_f32((((i * 7919 + k * 104_729) % 1000) as f32) * 0.004 - 2.0)).collect()
    };
    let (q, k, vv) = (
        ctx.upload(&draw(s.q_len(), 1)).unwrap(),
        ctx.upload(&draw(s.kv_len(), 2)).unwrap(),
        ctx.upload(&draw(s.kv_len(), 3)).unwrap(),
    );
    for scale in [-0.3f32, 0.0] {
        for causal in [false, true] {
            let mut got = Vec::new();
            for v in versions_for(64) {
                let mut o = ctx.alloc::<half::f16>(s.q_len()).unwrap();
                let mut lse = ctx.alloc::<f32>(s.lse_len()).unwrap();
                let input = AttentionInput {
                    q: q.as_view(),
                    k: k.as_view(),
                    v: vv.as_view(),
                    shape: s,
                    causal,
                    scale: Some(scale),
                };
                attention_with(&ctx, v, input, o.as_view_mut(), lse.as_view_mut()).unwrap();
                got.push((o.to_host().unwrap(), lse.to_host().unwrap()));
            }
            assert_eq!(got.len(), 4, "v01, v02, v03 and v04 have head dim 64");
            for (b, name) in got[1..].iter().zip(["v02", "v03", "v04"]) {
                let a = &got[0];
                let o_err = a.0.iter().zip(&b.0).map(|(x, y)| (x.to_f32() - y.to_f32()).abs()).fold(0.0f32, f32::max);
                let l_err = a.1.iter().zip(&b.1).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
                // P in f16 (v02-v04) against P in f32 (v01): a few f16 ulps of outputs below 2.
                assert!(
                    o_err < 1e-2 && l_err < 1e-3,
                    "{name}, scale {scale} causal {causal}: O differs by {o_err}, lse by {l_err}"
                );
            }
        }
    }
}

#[test]
fn a_wrong_p_repack_is_rejected() {
    // P's A registers 1 and 2 swapped (rows g + 8 and columns 2t + 8 exchanged): only the check
    // stands between that and a plausible-looking output.
    let ctx = Context::emulator();
    let case = AttentionCase { dtype: DType::BF16, shape: shape(1, 1, 1, 40, 50, 64), causal: false, seed: 17 };
    for bug in [&BUG_V02_SWAPPED_P, &BUG_V03_SWAPPED_P] {
        let r = check_with(&ctx, &case, Some(bug)).expect("it runs");
        assert!(!r.passed(), "{}: the swapped P re-pack passed the check: {r}", bug.name);
        println!("{}: swapped P re-pack rejected: {r}", bug.name);
    }
    for v in &VERSIONS[1..] {
        run(&ctx, v, case);
    }
}

#[test]
fn no_version_reads_another_heads_keys() {
    // seq_k = 70 is not a whole number of key tiles: a tile of kv head 0 ends inside the
    // buffer, right before kv head 1's rows. With NaN in all of kv head 1's K and V, the query
    // heads of kv head 0 must come out exactly as with finite values there.
    let ctx = Context::emulator();
    let s = shape(1, 2, 2, 50, 70, 64);
    let per_head = s.seq_k * s.head_dim;
    let val = |i: usize| half::bf16::from_f32(((i * 37 % 101) as f32) * 0.02 - 1.0);
    let q = ctx.upload(&(0..s.q_len()).map(val).collect::<Vec<_>>()).unwrap();
    let finite: Vec<half::bf16> = (0..s.kv_len()).map(|i| val(i + 7)).collect();
    let mut poisoned = finite.clone();
    poisoned[per_head..].fill(half::bf16::NAN);
    for v in versions_for(64) {
        if unavailable(&ctx, v, 64).is_some() {
            continue;
        }
        let mut outs = Vec::new();
        for kv in [&finite, &poisoned] {
            let kv = ctx.upload(kv).unwrap();
            let mut o = ctx.alloc::<half::bf16>(s.q_len()).unwrap();
            let mut lse = ctx.alloc::<f32>(s.lse_len()).unwrap();
            let input = AttentionInput {
                q: q.as_view(),
                k: kv.as_view(),
                v: kv.as_view(),
                shape: s,
                causal: false,
                scale: None,
            };
            attention_with(&ctx, v, input, o.as_view_mut(), lse.as_view_mut()).unwrap();
            outs.push(o.to_host().unwrap());
        }
        let head0 = s.seq_q * s.head_dim;
        assert!(outs[0][..head0].iter().all(|x| x.is_finite()), "{}: finite inputs, finite head 0", v.name);
        let same = outs[0][..head0].iter().zip(&outs[1][..head0]).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{}: kv head 1's NaNs reached query head 0", v.name);
        assert!(outs[1][head0..].iter().all(|x| x.is_nan()), "{}: head 1 itself is NaN", v.name);
    }
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
        ("head_dim 192", shape(1, 4, 2, 8, 8, 192)),
        ("head_dim 512", shape(1, 4, 2, 8, 8, 512)),
        ("head_dim 0", shape(1, 4, 2, 8, 8, 0)),
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
    // Head dims a version lacks are refused by that version before launching.
    let s32 = shape(1, 4, 2, 8, 8, 32);
    let (q, kv) = (ctx.alloc::<half::bf16>(s32.q_len()).unwrap(), ctx.alloc::<half::bf16>(s32.kv_len()).unwrap());
    let mut o = ctx.alloc::<half::bf16>(s32.q_len()).unwrap();
    let input =
        AttentionInput { q: q.as_view(), k: kv.as_view(), v: kv.as_view(), shape: s32, causal: false, scale: None };
    for (name, dims) in [("v03_wgmma", "64, 128, 256"), ("v04_pingpong", "64, 128")] {
        let v = VERSIONS.iter().find(|v| v.name == name).unwrap();
        let e = attention_with(&ctx, v, input, o.as_view_mut(), lse.as_view_mut()).expect_err(name);
        let want = format!("{name} supports {dims}");
        assert!(matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains(&want), "{e}");
    }
}

/// The versions with variable-length kernels for `head_dim`.
fn varlen_versions_for(head_dim: usize) -> impl Iterator<Item = &'static AttentionVersion> {
    VERSIONS.iter().filter(move |v| v.kernel(head_dim).is_some_and(|k| k.varlen.is_some()))
}

fn run_varlen(ctx: &Context, v: &AttentionVersion, case: &VarlenCase) {
    if let Some(why) = unavailable(ctx, v, case.head_dim) {
        common::once(&format!("{}/{}/varlen-skip", v.name, ctx.backend()), || format!("SKIP: {why}"));
        return;
    }
    let r = check_varlen_with(ctx, case, Some(v))
        .unwrap_or_else(|e| panic!("{} {case:?} on {}: {e}", v.name, ctx.backend()));
    assert!(r.passed(), "{} {case:?} on {}: {r}", v.name, ctx.backend());
}

#[test]
fn varlen_matches_each_sequence_alone() {
    let ctx = Context::emulator();
    // Lengths (seq_q, seq_k) per sequence: empty, single, q != k both ways, several tiles, a
    // sequence whose queries outnumber its keys (causal: fully masked rows), all packed.
    let lens = vec![(7, 9), (0, 5), (1, 1), (113, 70), (3, 0), (65, 130), (40, 17)];
    let mut n = 0;
    for head_dim in [32, 64, 96, 128, 256] {
        for v in varlen_versions_for(head_dim) {
            for causal in [false, true] {
                let dtype = if causal { DType::F16 } else { DType::BF16 };
                let case = VarlenCase { dtype, heads: 4, kv_heads: 2, head_dim, lens: lens.clone(), causal, seed: 31 };
                run_varlen(&ctx, v, &case);
                n += 1;
            }
        }
    }
    println!("varlen: {n} cases passed");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(8), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn varlen_matches_reference(
        dtype in proptest::sample::select(vec![DType::BF16, DType::F16]),
        lens in proptest::collection::vec((0usize..80, 0usize..90), 1..4),
        (heads, kv_heads) in proptest::sample::select(vec![(1usize, 1usize), (4, 2), (3, 1)]),
        head_dim in proptest::sample::select(vec![32usize, 64, 96, 128, 256]),
        causal in any::<bool>(),
        seed in any::<u64>(),
    ) {
        for ctx in common::property_backends("varlen_matches_reference", common::cases(8)) {
            for v in varlen_versions_for(head_dim) {
                run_varlen(&ctx, v, &VarlenCase { dtype, heads, kv_heads, head_dim, lens: lens.clone(), causal, seed });
            }
        }
    }
}

#[test]
fn the_varlen_launcher_picks_the_highest_version_with_varlen_kernels() {
    let ctx = Context::emulator();
    for d in [32, 64, 96, 128, 256] {
        let want = varlen_versions_for(d).last().map(|v| v.name);
        assert_eq!(default_varlen_version(&ctx, d, true).map(|v| v.name), want, "head dim {d}");
        let misaligned = (d <= 128).then_some("v01_simt");
        assert_eq!(default_varlen_version(&ctx, d, false).map(|v| v.name), misaligned, "head dim {d}, misaligned");
    }
    assert_eq!(default_varlen_version(&ctx, 256, true).map(|v| v.name), Some("v03_wgmma"), "head dim 256");
    // v04 has variable-length kernels at head dims 64 and 128; v03 runs 256.
    assert_eq!(default_varlen_version(&ctx, 64, true).map(|v| v.name), Some("v04_pingpong"), "head dim 64");
    assert_eq!(default_varlen_version(&ctx, 128, true).map(|v| v.name), Some("v04_pingpong"), "head dim 128");
    // A misaligned Q (one element into its buffer) runs v01 through `attention_varlen`, and
    // gives what the top version gives on the aligned one, within bf16 rounding; the top
    // version named explicitly refuses the misaligned view with a typed error.
    let (h, d, cu) = (2usize, 64usize, [0i32, 5, 5, 41]);
    let total = *cu.last().unwrap() as usize;
    let val = |i: usize| half::bf16::from_f32(((i * 53 % 97) as f32) * 0.02 - 1.0);
    let q: Vec<half::bf16> = (0..h * total * d).map(val).collect();
    let shifted: Vec<half::bf16> = [half::bf16::ZERO].into_iter().chain(q.iter().copied()).collect();
    let kv = ctx.upload(&(0..total * d).map(|i| val(i + 11)).collect::<Vec<_>>()).unwrap();
    let (qb, qs) = (ctx.upload(&q).unwrap(), ctx.upload(&shifted).unwrap());
    let top = varlen_versions_for(d).last().unwrap();
    let mut outs = Vec::new();
    for (name, qv) in [("aligned", qb.as_view()), ("misaligned", qs.view(1..q.len() + 1).unwrap())] {
        let input = VarlenInput {
            q: qv,
            k: kv.as_view(),
            v: kv.as_view(),
            cu_seqlens_q: &cu,
            cu_seqlens_k: &cu,
            heads: h,
            kv_heads: 1,
            head_dim: d,
            causal: true,
            scale: None,
        };
        let mut o = ctx.alloc::<half::bf16>(q.len()).unwrap();
        let mut lse = ctx.alloc::<f32>(h * total).unwrap();
        attention_varlen(&ctx, input, o.as_view_mut(), lse.as_view_mut()).unwrap_or_else(|e| panic!("{name}: {e}"));
        outs.push(o.to_host().unwrap());
        if name == "misaligned" {
            let e = attention_varlen_with(&ctx, top, input, o.as_view_mut(), lse.as_view_mut()).expect_err(name);
            assert!(matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("16-byte"), "{e}");
        }
    }
    let diff = outs[0].iter().zip(&outs[1]).map(|(x, y)| (x.to_f32() - y.to_f32()).abs()).fold(0.0f32, f32::max);
    assert!(diff < 2e-2, "{} and v01 differ by {diff}", top.name);
}

/// Runs three packed sequences through `v` twice, the second time with the middle one's keys
/// and values all NaN; an error says where its NaNs reached another sequence's output. Key
/// lengths 70 and 33 end inside a key tile, right before the next sequence's rows (and a
/// causal row sees fewer).
fn sequence_isolation(ctx: &Context, v: &AttentionVersion, causal: bool) -> Result<(), String> {
    let (h, hk, d) = (2usize, 1usize, 64usize);
    let (cu_q, cu_k) = ([0i32, 50, 80, 100], [0i32, 70, 140, 173]);
    let (tq, tk) = (100usize, 173usize);
    let val = |i: usize| half::bf16::from_f32(((i * 37 % 101) as f32) * 0.02 - 1.0);
    let q = ctx.upload(&(0..h * tq * d).map(val).collect::<Vec<_>>()).unwrap();
    let finite: Vec<half::bf16> = (0..hk * tk * d).map(|i| val(i + 7)).collect();
    let mut poisoned = finite.clone();
    poisoned[70 * d..140 * d].fill(half::bf16::NAN);
    let mut outs = Vec::new();
    for kv in [&finite, &poisoned] {
        let kv = ctx.upload(kv).unwrap();
        let mut o = ctx.alloc::<half::bf16>(h * tq * d).unwrap();
        let mut lse = ctx.alloc::<f32>(h * tq).unwrap();
        let input = VarlenInput {
            q: q.as_view(),
            k: kv.as_view(),
            v: kv.as_view(),
            cu_seqlens_q: &cu_q,
            cu_seqlens_k: &cu_k,
            heads: h,
            kv_heads: hk,
            head_dim: d,
            causal,
            scale: None,
        };
        attention_varlen_with(ctx, v, input, o.as_view_mut(), lse.as_view_mut()).unwrap();
        outs.push(o.to_host().unwrap());
    }
    for hh in 0..h {
        let row = |t: usize| (hh * tq + t) * d;
        for (seq, range) in [(0, row(0)..row(50)), (2, row(80)..row(100))] {
            let (a, b) = (&outs[0][range.clone()], &outs[1][range]);
            assert!(a.iter().all(|x| x.is_finite()), "{}: finite inputs, finite sequence {seq}", v.name);
            let differ = a.iter().zip(b).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
            if differ > 0 {
                return Err(format!("sequence 1's NaNs changed {differ} outputs of sequence {seq}, head {hh}"));
            }
        }
        assert!(outs[1][row(50)..row(80)].iter().all(|x| x.is_nan()), "{}: sequence 1 itself is NaN", v.name);
    }
    Ok(())
}

#[test]
fn no_varlen_version_reads_another_sequences_keys() {
    let ctx = Context::emulator();
    for v in varlen_versions_for(64) {
        for causal in [false, true] {
            if let Err(e) = sequence_isolation(&ctx, v, causal) {
                panic!("{} causal={causal}: {e}", v.name);
            }
        }
    }
    // v03 loads whole key tiles through maps over the packed totals; without zeroing the V
    // rows past the sequence, the next sequence's NaNs come in through `0 * NaN`.
    let e = sequence_isolation(&ctx, &BUG_V03_TAIL_NOT_ZEROED, false).expect_err("the unzeroed tail passed");
    println!("{}: rejected: {e}", BUG_V03_TAIL_NOT_ZEROED.name);
}
