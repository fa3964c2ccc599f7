//! Attention backward against the f64 reference under FlashAttention's rule for the backward
//! (max error at most 3x the naive low-precision backward's, plus a tiny atol), on the emulator
//! always and the GPU when present: odd and unequal lengths, causal (bottom-right aligned) and
//! not, grouped-query and multi-query heads, fully masked rows, head dims 64, 128 and 256, both dQ
//! paths (f32 atomics, deterministic); every version of the ladder that has the head dim; plus
//! the deterministic path's bitwise reproducibility, the launcher's version choice (also on an
//! emulator with a smaller GPU's shared memory per block), and
//! deliberately wrong variants (the `D_i` term left out; a mis-laid `dS^T` mma fragment) the
//! check must reject. The variable-length backward likewise: random packed sequence-length
//! sets (empty, single-token, q != k), head dims 32-256, GQA/MQA, both dQ paths, each sequence
//! against the dense reference; its determinism, its launcher choice, and a variant with the
//! causal mask aligned top-left per sequence that the check must reject. Last, the bench
//! timers' setup (inputs, the forward) for the dense and variable-length backward.

mod common;

use ferrokern::DType;
use ferrokern::attention::{AttentionInput, AttentionShape, VarlenInput, attention_varlen};
use ferrokern::attention_backward::{
    AttentionBackwardCase, AttentionBackwardInput, AttentionBackwardVersion, AttentionGrads, BACKWARD_VERSIONS,
    BUG_BWD_NO_D, BUG_BWD_V02_SWAPPED_DS, BUG_BWD_V03_DS_UNSWIZZLED, BUG_BWD_VARLEN_TOP_LEFT, BackwardOptions,
    VarlenBackwardCase, VarlenBackwardInput, attention_backward, attention_varlen_backward_with, check_backward,
    check_varlen_backward, default_varlen_version, default_version, run_case, run_varlen_case, unavailable, version,
};
use ferrokern::{Context, Float};
use proptest::prelude::*;

fn run(ctx: &Context, v: &AttentionBackwardVersion, case: AttentionBackwardCase) {
    if let Some(why) = skip(ctx, v, &case) {
        common::once(&format!("{}/{}/skip", v.name, ctx.backend()), || format!("SKIP: {why}"));
        return;
    }
    let r =
        check_backward(ctx, &case, Some(v)).unwrap_or_else(|e| panic!("{} {case:?} on {}: {e}", v.name, ctx.backend()));
    assert!(r.passed(), "{} {case:?} on {}: {r}", v.name, ctx.backend());
}

/// Why `ctx` cannot run `case` with `v` (a Hopper-only version on another GPU, a device with
/// less shared memory), if it cannot.
fn skip(ctx: &Context, v: &AttentionBackwardVersion, case: &AttentionBackwardCase) -> Option<String> {
    unavailable(ctx, v, case.shape.head_dim, BackwardOptions { deterministic: case.deterministic })
}

/// The versions that support `head_dim`.
fn versions_for(head_dim: usize) -> impl Iterator<Item = &'static AttentionBackwardVersion> {
    BACKWARD_VERSIONS.iter().filter(move |v| v.kernel(head_dim).is_some())
}

fn shape(batch: usize, heads: usize, kv_heads: usize, seq_q: usize, seq_k: usize, head_dim: usize) -> AttentionShape {
    AttentionShape { batch, heads, kv_heads, seq_q, seq_k, head_dim }
}

/// Property cases per run (FERROKERN_CASES overrides).
const CASES: u32 = 24;

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(CASES), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn attention_backward_matches_reference(
        dtype in proptest::sample::select(vec![DType::BF16, DType::F16]),
        batch in 1usize..3,
        (heads, kv_heads) in proptest::sample::select(vec![(1usize, 1usize), (2, 2), (4, 2), (4, 1), (3, 3)]),
        seq_q in 1usize..80,
        seq_k in 1usize..100,
        head_dim in proptest::sample::select(vec![64usize, 128, 256]),
        causal in any::<bool>(),
        deterministic in any::<bool>(),
        seed in any::<u64>(),
    ) {
        for ctx in common::property_backends("attention_backward_matches_reference", common::cases(CASES)) {
            for v in versions_for(head_dim) {
                let case = AttentionBackwardCase {
                    dtype, shape: shape(batch, heads, kv_heads, seq_q, seq_k, head_dim), causal, deterministic, seed,
                };
                run(&ctx, v, case);
            }
        }
    }
}

#[test]
fn attention_backward_named_lengths() {
    let mut n = 0;
    for ctx in common::backends("attention_backward_named_lengths") {
        for head_dim in [64, 128, 256] {
            for v in versions_for(head_dim) {
                for (seq_q, seq_k) in [(1, 1), (113, 113), (239, 239), (7, 113), (113, 7), (1, 239)] {
                    for causal in [false, true] {
                        // One dtype and dQ path per (length, mask) at each head dim, alternating,
                        // so every combination appears (the emulator's time).
                        let flip = (seq_q + seq_k + causal as usize + head_dim / 64).is_multiple_of(2);
                        let dtype = if flip { DType::BF16 } else { DType::F16 };
                        let seed = (seq_q * 1000 + seq_k + head_dim) as u64;
                        // GQA: 4 query heads over 2 kv heads (each kv head sums 2 heads' dK, dV).
                        let s = shape(1, 4, 2, seq_q, seq_k, head_dim);
                        run(&ctx, v, AttentionBackwardCase { dtype, shape: s, causal, deterministic: !flip, seed });
                        n += 1;
                    }
                }
            }
        }
    }
    println!("attention_backward: {n} named cases passed");
}

#[test]
fn an_odd_row_count_keeps_the_dq_accumulator_aligned() {
    // Scratch holds one `D` word per query row, then the atomic dQ accumulator. 3 heads of 41
    // queries (dense) and 3 heads over 41 packed tokens (varlen) are 123 rows: unless the
    // accumulator's start is rounded up, it sits on an odd word and v03's 8-byte paired dQ
    // reductions are misaligned (the emulator reports it, the GPU faults).
    for ctx in common::backends("an_odd_row_count_keeps_the_dq_accumulator_aligned") {
        for head_dim in [64, 128] {
            let causal = head_dim == 64;
            for v in versions_for(head_dim) {
                let s = shape(1, 3, 3, 41, 57, head_dim);
                run(
                    &ctx,
                    v,
                    AttentionBackwardCase { dtype: DType::BF16, shape: s, causal, deterministic: false, seed: 3 },
                );
            }
            for v in varlen_versions_for(head_dim) {
                let case = VarlenBackwardCase {
                    dtype: DType::F16,
                    heads: 3,
                    kv_heads: 1,
                    head_dim,
                    lens: vec![(16, 30), (25, 9)],
                    causal,
                    deterministic: false,
                    seed: 4,
                };
                run_varlen(&ctx, v, &case);
            }
        }
    }
}

#[test]
fn multi_query_and_other_head_dims() {
    let ctx = Context::emulator();
    // MQA: every query head shares one kv head; head dims 32 and 96 (v01 only) and 256 (v02
    // only) too.
    for (head_dim, deterministic) in [(64, false), (128, true), (32, true), (96, false), (256, false), (256, true)] {
        for v in versions_for(head_dim) {
            let s = shape(2, 3, 1, 41, 57, head_dim);
            for causal in [false, true] {
                run(&ctx, v, AttentionBackwardCase { dtype: DType::BF16, shape: s, causal, deterministic, seed: 9 });
            }
        }
    }
}

#[test]
fn fully_masked_rows_get_zero_dq() {
    // Causal with seq_q > seq_k: the first seq_q - seq_k queries see no key (lse = -inf).
    let ctx = Context::emulator();
    let (d, masked) = (64, 30);
    let s = shape(1, 2, 1, 47, 17, d);
    for v in BACKWARD_VERSIONS {
        for deterministic in [false, true] {
            let case = AttentionBackwardCase { dtype: DType::F16, shape: s, causal: true, deterministic, seed: 4 };
            run(&ctx, v, case);
            let (mut dq, mut dk, mut dv) = (
                ctx.alloc::<half::f16>(s.q_len()).unwrap(),
                ctx.alloc::<half::f16>(s.kv_len()).unwrap(),
                ctx.alloc::<half::f16>(s.kv_len()).unwrap(),
            );
            let grads = AttentionGrads { dq: dq.as_view_mut(), dk: dk.as_view_mut(), dv: dv.as_view_mut() };
            run_case(&ctx, &case, v, grads).unwrap();
            let dq = dq.to_host().unwrap();
            for h in 0..s.heads {
                let rows = &dq[h * s.seq_q * d..][..masked * d];
                assert!(rows.iter().all(|x| x.to_f32() == 0.0), "{}: head {h}'s masked rows have dQ = 0", v.name);
                let seen = &dq[(h * s.seq_q + masked) * d..][..(s.seq_q - masked) * d];
                assert!(seen.iter().any(|x| x.to_f32() != 0.0), "{}: head {h}'s visible rows have a gradient", v.name);
            }
        }
    }
}

#[test]
fn no_queries_give_zero_dk_and_dv() {
    // seq_q = 0 with keys: nothing attends to the keys, so dK = dV = 0 (poisoned before), and
    // there is no dQ. v03's Q and dO tensor maps would have no rows: the launcher must not
    // encode them.
    let ctx = Context::emulator();
    let s = shape(2, 2, 1, 0, 45, 64);
    for v in versions_for(64) {
        for deterministic in [false, true] {
            let case = AttentionBackwardCase { dtype: DType::BF16, shape: s, causal: false, deterministic, seed: 8 };
            let poison = |n: usize| ctx.upload(&vec![half::bf16::NAN; n]).unwrap();
            let (mut dq, mut dk, mut dv) = (poison(0), poison(s.kv_len()), poison(s.kv_len()));
            let grads = AttentionGrads { dq: dq.as_view_mut(), dk: dk.as_view_mut(), dv: dv.as_view_mut() };
            run_case(&ctx, &case, v, grads).unwrap_or_else(|e| panic!("{} {case:?}: {e}", v.name));
            for (name, b) in [("dk", &dk), ("dv", &dv)] {
                assert!(b.to_host().unwrap().iter().all(|x| x.to_f32() == 0.0), "{}: {name} is not all zero", v.name);
            }
        }
    }
}

/// The gradients' bits from one run of `case`.
fn grads_bits(ctx: &Context, v: &AttentionBackwardVersion, case: &AttentionBackwardCase) -> Vec<u32> {
    let s = case.shape;
    let (mut dq, mut dk, mut dv) = (
        ctx.alloc::<half::bf16>(s.q_len()).unwrap(),
        ctx.alloc::<half::bf16>(s.kv_len()).unwrap(),
        ctx.alloc::<half::bf16>(s.kv_len()).unwrap(),
    );
    let grads = AttentionGrads { dq: dq.as_view_mut(), dk: dk.as_view_mut(), dv: dv.as_view_mut() };
    run_case(ctx, case, v, grads).unwrap();
    [dq, dk, dv].iter().flat_map(|b| b.to_host().unwrap()).map(|x| x.to_bits32()).collect()
}

#[test]
fn deterministic_backward_is_bitwise_reproducible() {
    // Many key blocks (seq_k 200: 7 per head) add into each dQ row, so an order-dependent sum
    // would show; the emulator runs blocks on several workers in no fixed order.
    for v in BACKWARD_VERSIONS {
        let case = AttentionBackwardCase {
            dtype: DType::BF16,
            shape: shape(1, 4, 2, 37, 200, 64),
            causal: false,
            deterministic: true,
            seed: 77,
        };
        for ctx in common::backends("deterministic_backward_is_bitwise_reproducible") {
            if let Some(why) = skip(&ctx, v, &case) {
                println!("SKIP: {why}");
                continue;
            }
            let first = grads_bits(&ctx, v, &case);
            for run in 1..3 {
                assert_eq!(first, grads_bits(&ctx, v, &case), "{}: run {run} differs from run 0", v.name);
            }
            println!("{} on {}: 3 deterministic runs bitwise equal", v.name, ctx.backend());
        }
    }
}

#[test]
fn a_missing_d_term_is_rejected() {
    // dS = P dP instead of P (dP - D): plausible magnitudes, wrong gradients (dK and dQ).
    let ctx = Context::emulator();
    for deterministic in [false, true] {
        let case = AttentionBackwardCase {
            dtype: DType::BF16,
            shape: shape(1, 2, 1, 40, 50, 64),
            causal: false,
            deterministic,
            seed: 17,
        };
        let r = check_backward(&ctx, &case, Some(&BUG_BWD_NO_D)).expect("it runs");
        assert!(!r.passed(), "the missing D_i term passed the check: {r}");
        println!("missing D_i term rejected (deterministic = {deterministic}): {r}");
        run(&ctx, &BACKWARD_VERSIONS[0], case);
    }
}

#[test]
fn a_mis_laid_ds_fragment_is_rejected() {
    // v02's dK += dS^T Q with the dS^T A fragment's registers 1 and 2 swapped (keys g + 8 and
    // queries 2t + 8 exchanged): every value is a real dS entry, only the layout is wrong.
    let ctx = Context::emulator();
    let v02 = version("v02_mma").expect("v02_mma is in the ladder");
    for deterministic in [false, true] {
        for causal in [false, true] {
            let case = AttentionBackwardCase {
                dtype: DType::BF16,
                shape: shape(1, 2, 1, 40, 50, 64),
                causal,
                deterministic,
                seed: 18,
            };
            let r = check_backward(&ctx, &case, Some(&BUG_BWD_V02_SWAPPED_DS)).expect("it runs");
            assert!(!r.passed(), "the mis-laid dS^T fragment passed the check: {r}");
            println!("mis-laid dS^T fragment rejected (causal = {causal}, deterministic = {deterministic}): {r}");
            run(&ctx, v02, case);
        }
    }
}

#[test]
fn a_mis_laid_ds_tile_is_rejected() {
    // v03 writes dS^T to shared memory without the 128-byte swizzle the dQ wgmma's descriptor
    // names: dK and dV are right, dQ reads a permuted dS. The deterministic path, whose dQ is
    // v02's pass, is the correct twin.
    let ctx = Context::emulator();
    for causal in [false, true] {
        let case = AttentionBackwardCase {
            dtype: DType::BF16,
            shape: shape(1, 2, 1, 150, 140, 64),
            causal,
            deterministic: false,
            seed: 23,
        };
        let r = check_backward(&ctx, &case, Some(&BUG_BWD_V03_DS_UNSWIZZLED)).expect("it runs");
        assert!(!r.passed(), "the unswizzled dS^T tile passed the check: {r}");
        println!("unswizzled dS^T tile rejected (causal = {causal}): {r}");
        run(&ctx, &BUG_BWD_V03_DS_UNSWIZZLED, AttentionBackwardCase { deterministic: true, ..case });
        run(&ctx, version("v03_wgmma").expect("v03_wgmma is in the ladder"), case);
    }
}

#[test]
fn the_launcher_picks_the_highest_version_that_fits() {
    let (ctx, atomic) = (Context::emulator(), BackwardOptions::default());
    assert_eq!(BACKWARD_VERSIONS.last().map(|v| v.name), Some("v03_wgmma"));
    for d in [64, 128] {
        assert_eq!(default_version(&ctx, d, true, atomic).map(|v| v.name), Some("v03_wgmma"), "head dim {d}");
        assert_eq!(
            default_version(&ctx, d, false, atomic).map(|v| v.name),
            Some("v01_simt"),
            "head dim {d}, misaligned views"
        );
    }
    for d in [32, 96] {
        assert_eq!(default_version(&ctx, d, true, atomic).map(|v| v.name), Some("v01_simt"), "head dim {d}");
    }
    // Head dim 256: v02 alone (v01's shared rows hold at most 128); its loads need 16 bytes.
    assert_eq!(default_version(&ctx, 256, true, atomic).map(|v| v.name), Some("v02_mma"), "head dim 256");
    assert!(default_version(&ctx, 256, false, atomic).is_none(), "v02 at head dim 256 needs 16-byte aligned views");
    assert!(default_version(&ctx, 512, true, atomic).is_none(), "no backward version has head dim 512");
}

// Variable-length batches (`attention_varlen_backward`): each sequence against the dense
// reference, packed; every version with varlen kernels for the head dim.

/// The versions with variable-length kernels for `head_dim`.
fn varlen_versions_for(head_dim: usize) -> impl Iterator<Item = &'static AttentionBackwardVersion> {
    BACKWARD_VERSIONS.iter().filter(move |v| v.varlen_kernel(head_dim).is_some())
}

/// Why `ctx` cannot run `v` for `case`'s head dim and dQ path, if it cannot.
fn skip_varlen(ctx: &Context, v: &AttentionBackwardVersion, case: &VarlenBackwardCase) -> Option<String> {
    unavailable(ctx, v, case.head_dim, BackwardOptions { deterministic: case.deterministic })
}

fn run_varlen(ctx: &Context, v: &AttentionBackwardVersion, case: &VarlenBackwardCase) {
    if let Some(why) = skip_varlen(ctx, v, case) {
        common::once(&format!("{}/{}/varlen-skip", v.name, ctx.backend()), || format!("SKIP: {why}"));
        return;
    }
    let r = check_varlen_backward(ctx, case, Some(v))
        .unwrap_or_else(|e| panic!("{} {case:?} on {}: {e}", v.name, ctx.backend()));
    assert!(r.passed(), "{} {case:?} on {}: {r}", v.name, ctx.backend());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(8), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn varlen_backward_matches_reference(
        dtype in proptest::sample::select(vec![DType::BF16, DType::F16]),
        // Empty and single-token sequences, q != k both ways (causal: fully masked rows).
        lens in proptest::collection::vec(
            prop_oneof![(0usize..3, 0usize..3), (0usize..50, 0usize..60)], 1..4),
        (heads, kv_heads) in proptest::sample::select(vec![(1usize, 1usize), (4, 2), (3, 1)]),
        head_dim in proptest::sample::select(vec![32usize, 64, 96, 128, 256]),
        causal in any::<bool>(),
        deterministic in any::<bool>(),
        seed in any::<u64>(),
    ) {
        for ctx in common::property_backends("varlen_backward_matches_reference", common::cases(8)) {
            for v in varlen_versions_for(head_dim) {
                let case = VarlenBackwardCase {
                    dtype, heads, kv_heads, head_dim, lens: lens.clone(), causal, deterministic, seed,
                };
                if skip_varlen(&ctx, v, &case).is_some() {
                    continue; // a Hopper-only version elsewhere (run_varlen says SKIP once)
                }
                let r = check_varlen_backward(&ctx, &case, Some(v))
                    .unwrap_or_else(|e| panic!("{} {case:?}: {e}", v.name));
                prop_assert!(r.passed(), "{} {:?}: {}", v.name, case, r);
            }
        }
    }
}

#[test]
fn varlen_backward_named_lengths() {
    // Empty, single, q != k both ways, several tiles, a sequence whose queries outnumber its
    // keys (causal: fully masked rows) and one with queries but no keys, all packed. Nine
    // sequences: v03's 36 tensor maps (4.5 KB) outgrow the 4 KB the launch constants start with.
    let lens = vec![(7, 9), (0, 5), (1, 1), (97, 70), (3, 0), (40, 130), (40, 17), (2, 3), (20, 20)];
    let mut n = 0;
    for ctx in common::backends("varlen_backward_named_lengths") {
        for head_dim in [64, 128, 256] {
            for v in varlen_versions_for(head_dim) {
                for causal in [false, true] {
                    // One dtype and dQ path per (head dim, mask), alternating, so each appears.
                    let flip = (causal as usize + head_dim / 64).is_multiple_of(2);
                    let dtype = if flip { DType::BF16 } else { DType::F16 };
                    let case = VarlenBackwardCase {
                        dtype,
                        heads: 4,
                        kv_heads: 2,
                        head_dim,
                        lens: lens.clone(),
                        causal,
                        deterministic: !flip,
                        seed: 31 + head_dim as u64,
                    };
                    run_varlen(&ctx, v, &case);
                    n += 1;
                }
            }
        }
    }
    println!("attention_varlen_backward: {n} named cases passed");
}

#[test]
fn varlen_backward_other_head_dims_and_mqa() {
    // Head dims 32 and 96 (v01 only; O and lse from the per-sequence reference), MQA.
    let ctx = Context::emulator();
    for (head_dim, deterministic) in [(32, true), (96, false)] {
        for v in varlen_versions_for(head_dim) {
            for causal in [false, true] {
                let case = VarlenBackwardCase {
                    dtype: DType::BF16,
                    heads: 3,
                    kv_heads: 1,
                    head_dim,
                    lens: vec![(19, 40), (0, 0), (33, 9)],
                    causal,
                    deterministic,
                    seed: 5,
                };
                run_varlen(&ctx, v, &case);
            }
        }
    }
}

/// The gradients' bits from one varlen run of `case`.
fn varlen_grads_bits(ctx: &Context, v: &AttentionBackwardVersion, case: &VarlenBackwardCase) -> Vec<u32> {
    let (mut dq, mut dk, mut dv) = (
        ctx.alloc::<half::bf16>(case.q_len()).unwrap(),
        ctx.alloc::<half::bf16>(case.kv_len()).unwrap(),
        ctx.alloc::<half::bf16>(case.kv_len()).unwrap(),
    );
    let grads = AttentionGrads { dq: dq.as_view_mut(), dk: dk.as_view_mut(), dv: dv.as_view_mut() };
    run_varlen_case(ctx, case, v, grads).unwrap();
    [dq, dk, dv].iter().flat_map(|b| b.to_host().unwrap()).map(|x| x.to_bits32()).collect()
}

#[test]
fn varlen_deterministic_backward_is_bitwise_reproducible() {
    // Several key blocks per sequence add into each dQ row (seq_k 150: 5 v01 tiles).
    for v in varlen_versions_for(64) {
        let case = VarlenBackwardCase {
            dtype: DType::BF16,
            heads: 4,
            kv_heads: 2,
            head_dim: 64,
            lens: vec![(37, 150), (0, 3), (20, 70)],
            causal: false,
            deterministic: true,
            seed: 78,
        };
        for ctx in common::backends("varlen_deterministic_backward_is_bitwise_reproducible") {
            if let Some(why) = skip_varlen(&ctx, v, &case) {
                println!("SKIP: {why}");
                continue;
            }
            let first = varlen_grads_bits(&ctx, v, &case);
            assert_eq!(first, varlen_grads_bits(&ctx, v, &case), "{}: run 1 differs from run 0", v.name);
            println!("{} varlen on {}: 2 deterministic runs bitwise equal", v.name, ctx.backend());
        }
    }
}

#[test]
fn a_top_left_varlen_mask_is_rejected() {
    // Causal masks aligned top-left per sequence (j <= i) instead of bottom-right: identical
    // when a sequence has as many queries as keys, wrong whenever they differ.
    let ctx = Context::emulator();
    for deterministic in [false, true] {
        let case = VarlenBackwardCase {
            dtype: DType::BF16,
            heads: 2,
            kv_heads: 1,
            head_dim: 64,
            lens: vec![(20, 45), (33, 33), (9, 30)],
            causal: true,
            deterministic,
            seed: 19,
        };
        let r = check_varlen_backward(&ctx, &case, Some(&BUG_BWD_VARLEN_TOP_LEFT)).expect("it runs");
        assert!(!r.passed(), "the top-left varlen mask passed the check: {r}");
        println!("top-left varlen mask rejected (deterministic = {deterministic}): {r}");
        run_varlen(&ctx, &BACKWARD_VERSIONS[0], &case);
        // Equal lengths per sequence: top-left and bottom-right coincide, so the variant passes.
        let equal = VarlenBackwardCase { lens: vec![(20, 20), (33, 33)], ..case };
        run_varlen(&ctx, &BUG_BWD_VARLEN_TOP_LEFT, &equal);
    }
}

/// Runs the backward of three packed sequences through `v` twice (deterministic dQ, so runs
/// compare bit for bit), the second time with the middle sequence's Q, K, V, O, dO and lse all
/// NaN; an error says where its NaNs reached another sequence's gradients. Query lengths 50
/// and 30 and key lengths 70 and 33 end inside every version's tiles, right before the next
/// sequence's rows.
fn backward_sequence_isolation(ctx: &Context, v: &AttentionBackwardVersion, causal: bool) -> Result<(), String> {
    use half::bf16;
    let (h, hk, d) = (2usize, 1usize, 64usize);
    let (cu_q, cu_k) = ([0i32, 50, 80, 100], [0i32, 70, 140, 173]);
    let (tq, tk) = (100usize, 173usize);
    let val = |i: usize| bf16::from_f32(((i * 37 % 101) as f32) * 0.02 - 1.0);
    let q: Vec<bf16> = (0..h * tq * d).map(val).collect();
    let kv: Vec<bf16> = (0..hk * tk * d).map(|i| val(i + 7)).collect();
    let d_o: Vec<bf16> = (0..h * tq * d).map(|i| val(i + 3)).collect();
    // O and lse of the clean inputs.
    let (q_buf, kv_buf) = (ctx.upload(&q).unwrap(), ctx.upload(&kv).unwrap());
    let clean = VarlenInput {
        q: q_buf.as_view(),
        k: kv_buf.as_view(),
        v: kv_buf.as_view(),
        cu_seqlens_q: &cu_q,
        cu_seqlens_k: &cu_k,
        heads: h,
        kv_heads: hk,
        head_dim: d,
        causal,
        scale: None,
    };
    let mut o_buf = ctx.alloc::<bf16>(h * tq * d).unwrap();
    let mut lse_buf = ctx.alloc::<f32>(h * tq).unwrap();
    attention_varlen(ctx, clean, o_buf.as_view_mut(), lse_buf.as_view_mut()).unwrap();
    let (o, lse) = (o_buf.to_host().unwrap(), lse_buf.to_host().unwrap());
    let mut runs = Vec::new();
    for poison in [false, true] {
        let (mut q, mut kv, mut o, mut d_o, mut lse) = (q.clone(), kv.clone(), o.clone(), d_o.clone(), lse.clone());
        if poison {
            for hh in 0..h {
                for x in [&mut q, &mut o, &mut d_o] {
                    x[(hh * tq + 50) * d..(hh * tq + 80) * d].fill(bf16::NAN);
                }
                lse[hh * tq + 50..hh * tq + 80].fill(f32::NAN);
            }
            kv[70 * d..140 * d].fill(bf16::NAN);
        }
        let (q, kv) = (ctx.upload(&q).unwrap(), ctx.upload(&kv).unwrap());
        let (o, d_o, lse) = (ctx.upload(&o).unwrap(), ctx.upload(&d_o).unwrap(), ctx.upload(&lse).unwrap());
        let mut dq = ctx.alloc::<bf16>(h * tq * d).unwrap();
        let (mut dk, mut dv) = (ctx.alloc::<bf16>(hk * tk * d).unwrap(), ctx.alloc::<bf16>(hk * tk * d).unwrap());
        let forward = VarlenInput { q: q.as_view(), k: kv.as_view(), v: kv.as_view(), ..clean };
        let input = VarlenBackwardInput { forward, o: o.as_view(), d_o: d_o.as_view(), lse: lse.as_view() };
        let grads = AttentionGrads { dq: dq.as_view_mut(), dk: dk.as_view_mut(), dv: dv.as_view_mut() };
        attention_varlen_backward_with(ctx, v, input, grads, BackwardOptions { deterministic: true })
            .map_err(|e| e.to_string())?;
        runs.push([dq.to_host().unwrap(), dk.to_host().unwrap(), dv.to_host().unwrap()]);
    }
    // Rows of each gradient: dQ `[heads, 100]`, dK and dV `[kv_heads, 173]`; sequences 0 and 2.
    for (g, name) in ["dq", "dk", "dv"].iter().enumerate() {
        let (planes, total, seqs) = if g == 0 { (h, tq, [0..50, 80..100]) } else { (hk, tk, [0..70, 140..173]) };
        for p in 0..planes {
            for (seq, rows) in [0, 2].into_iter().zip(seqs.clone()) {
                let range = (p * total + rows.start) * d..(p * total + rows.end) * d;
                let (a, b) = (&runs[0][g][range.clone()], &runs[1][g][range]);
                assert!(a.iter().all(|x| x.is_finite()), "{}: finite inputs, finite {name} of sequence {seq}", v.name);
                let differ = a.iter().zip(b).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
                if differ > 0 {
                    return Err(format!(
                        "sequence 1's NaNs changed {differ} {name} values of sequence {seq}, plane {p}"
                    ));
                }
            }
            let own = if g == 0 {
                (p * total + 50) * d..(p * total + 80) * d
            } else {
                (p * total + 70) * d..(p * total + 140) * d
            };
            assert!(runs[1][g][own].iter().any(|x| x.is_nan()), "{}: sequence 1's own {name} has no NaN", v.name);
        }
    }
    Ok(())
}

#[test]
fn no_varlen_backward_reads_another_sequences_rows() {
    // v03 loads whole tiles by TMA; its per-sequence tensor maps end at each sequence's last
    // token (zero fill past it), so the next sequence's NaNs cannot come in through `0 * NaN`.
    for ctx in common::backends("no_varlen_backward_reads_another_sequences_rows") {
        for v in varlen_versions_for(64) {
            if let Some(why) = unavailable(&ctx, v, 64, BackwardOptions { deterministic: true }) {
                println!("SKIP: {why}");
                continue;
            }
            for causal in [false, true] {
                if let Err(e) = backward_sequence_isolation(&ctx, v, causal) {
                    panic!("{} causal={causal} on {}: {e}", v.name, ctx.backend());
                }
            }
            println!("{} on {}: sequences 0 and 2 untouched by sequence 1's NaNs", v.name, ctx.backend());
        }
    }
}

#[test]
fn the_varlen_launcher_picks_the_highest_version_with_varlen_kernels() {
    let (ctx, atomic) = (Context::emulator(), BackwardOptions::default());
    for d in [32, 64, 96, 128, 256] {
        let want = BACKWARD_VERSIONS.iter().rev().find(|v| v.varlen_kernel(d).is_some()).map(|v| v.name);
        assert_eq!(default_varlen_version(&ctx, d, true, atomic).map(|v| v.name), want, "head dim {d}");
        let misaligned = if d == 256 { None } else { Some("v01_simt") };
        assert_eq!(
            default_varlen_version(&ctx, d, false, atomic).map(|v| v.name),
            misaligned,
            "head dim {d}, misaligned"
        );
    }
    assert_eq!(
        default_varlen_version(&ctx, 64, true, atomic).map(|v| v.name),
        Some("v03_wgmma"),
        "v03 has varlen at head dims 64 and 128 (and the emulator runs sm_90a kernels)"
    );
    assert_eq!(
        default_varlen_version(&ctx, 256, true, atomic).map(|v| v.name),
        Some("v02_mma"),
        "v02 has varlen at head dim 256"
    );
    assert!(default_varlen_version(&ctx, 512, true, atomic).is_none(), "no backward version has head dim 512");
}

#[test]
fn a_device_with_less_shared_memory_gets_a_version_that_fits_or_a_clear_refusal() {
    // sm_86 and sm_89 allow 101,376 bytes of dynamic shared memory per block.
    let limit = 101_376;
    let small = Context::emulator_with_shared_limit(limit).unwrap();
    let (atomic, det) = (BackwardOptions::default(), BackwardOptions { deterministic: true });
    let v02 = version("v02_mma").unwrap();
    let (k128, k256) = (v02.kernel(128).unwrap(), v02.kernel(256).unwrap());
    // The premise: at head dim 128 v02's dK/dV kernel fits and its deterministic dQ pass does
    // not; at 256 neither does.
    assert!(k128.dkdv_shared_bytes <= limit && k128.dq_shared_bytes > limit, "d128 fits atomic only");
    assert!(k256.dkdv_shared_bytes > limit && k256.dq_shared_bytes > limit, "d256 fits neither");
    assert_eq!(default_version(&small, 128, true, atomic).map(|v| v.name), Some("v02_mma"));
    assert_eq!(default_version(&small, 128, true, det).map(|v| v.name), Some("v01_simt"));
    assert_eq!(default_varlen_version(&small, 128, true, det).map(|v| v.name), Some("v01_simt"));
    assert!(default_version(&small, 256, true, atomic).is_none(), "nothing runs head dim 256 there");
    assert!(default_varlen_version(&small, 256, true, atomic).is_none(), "nor its varlen backward");
    // The forward it recomputes from picks by the same limit: not v03 or v04 (164 KB at head
    // dim 128).
    let fwd = ferrokern::attention::default_version(&small, 128, true).map(|v| v.name);
    assert_eq!(fwd, Some("v02_mma"), "forward on the smaller device");
    // What the launcher picks there runs and passes.
    let case = AttentionBackwardCase {
        dtype: DType::BF16,
        shape: shape(1, 2, 1, 37, 45, 128),
        causal: true,
        deterministic: true,
        seed: 12,
    };
    let r = check_backward(&small, &case, None).unwrap();
    assert!(r.passed(), "d128 deterministic on the smaller device: {r}");
    // Head dim 256 is refused before any launch, with the numbers and what to do; the
    // gradients keep their poison.
    let s = shape(1, 2, 1, 9, 11, 256);
    let q = small.alloc::<half::bf16>(s.q_len()).unwrap();
    let kv = small.alloc::<half::bf16>(s.kv_len()).unwrap();
    let lse = small.alloc::<f32>(s.lse_len()).unwrap();
    let poison = |n: usize| small.upload(&vec![half::bf16::NAN; n]).unwrap();
    let (mut dq, mut dk, mut dv) = (poison(s.q_len()), poison(s.kv_len()), poison(s.kv_len()));
    let forward =
        AttentionInput { q: q.as_view(), k: kv.as_view(), v: kv.as_view(), shape: s, causal: true, scale: None };
    let input = AttentionBackwardInput { forward, o: q.as_view(), d_o: q.as_view(), lse: lse.as_view() };
    let grads = AttentionGrads { dq: dq.as_view_mut(), dk: dk.as_view_mut(), dv: dv.as_view_mut() };
    let e = attention_backward(&small, input, grads, atomic).expect_err("head dim 256 on 99 KB per block");
    let msg = e.to_string();
    let need = format!("needs {} bytes", k256.dkdv_shared_bytes);
    for part in ["head_dim = 256", "v02_mma", need.as_str(), "allows 101376", "a GPU with more"] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    for (name, b) in [("dq", &dq), ("dk", &dk), ("dv", &dv)] {
        assert!(b.to_host().unwrap().iter().all(|x| x.is_nan()), "{name} was written");
    }
    // The same limit the other way: the full emulator runs head dim 256 with v02.
    assert_eq!(default_version(&Context::emulator(), 256, true, atomic).map(|v| v.name), Some("v02_mma"));
    // Limits outside 48 KB ..= 227 KB are refused.
    for bad in [0, 1000, 300_000] {
        assert!(Context::emulator_with_shared_limit(bad).is_err(), "{bad} bytes accepted");
    }
}

#[test]
fn the_bench_timers_set_up_valid_calls() {
    // `time` and `time_varlen` build their inputs and run the forward before they time the
    // backward: on the emulator that setup must pass every check and stop only at the timer
    // (the emulator does not model time); on a GPU they time and return a positive median.
    use ferrokern::attention::VarlenBenchCase;
    use ferrokern::attention_backward::{time, time_varlen};
    let lens = [(40, 40), (0, 0), (70, 70)];
    for ctx in common::backends("the_bench_timers_set_up_valid_calls") {
        for v in versions_for(64) {
            if let Some(why) = unavailable(&ctx, v, 64, BackwardOptions::default()) {
                println!("SKIP: {why}");
                continue;
            }
            let dense = time::<half::bf16>(&ctx, v, shape(1, 2, 2, 50, 50, 64), true, BackwardOptions::default());
            let varlen = v.varlen_kernel(64).map(|_| {
                let c = VarlenBenchCase { lens: &lens, heads: 2, head_dim: 64, causal: true, dtype: "bf16" };
                time_varlen::<half::bf16>(&ctx, v, &c, BackwardOptions::default())
            });
            for (what, r) in [("time", Some(dense)), ("time_varlen", varlen)] {
                match (r, ctx.backend() == ferrokern::Backend::Gpu) {
                    (None, _) => {}
                    (Some(Ok(ms)), true) => assert!(ms.is_finite() && ms > 0.0, "{} {what}: {ms} ms", v.name),
                    (Some(Err(e)), false) if e.to_string().contains("timing needs the GPU backend") => {}
                    (Some(r), _) => panic!("{} {what} on {}: {r:?}", v.name, ctx.backend()),
                }
            }
        }
    }
}
