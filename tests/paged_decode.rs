//! Decode attention over a paged KV cache against the f64 reference under FlashAttention's
//! rule, on the emulator always and the GPU when present: random batches of variable context
//! lengths over shuffled physical pages (every row outside a context is NaN), GQA, page sizes
//! 16/32/64, with and without split-K; the append kernel; and bad block tables.

mod common;

use ferrokern::paged::{
    PagedAppendInput, PagedCase, PagedDecodeInput, PagedShape, PagedTables, Split, check, paged_append, paged_decode,
    split_plan,
};
use ferrokern::{Context, DType, Error};
use half::bf16;
use proptest::prelude::*;

fn run(ctx: &Context, case: &PagedCase) {
    let r = check(ctx, case).unwrap_or_else(|e| panic!("{case:?} on {}: {e}", ctx.backend()));
    assert!(r.passed(), "{case:?} on {}: {r}", ctx.backend());
}

/// Property cases per run (FERROKERN_CASES overrides).
const CASES: u32 = 24;

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(CASES), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn paged_decode_matches_reference(
        dtype in proptest::sample::select(vec![DType::BF16, DType::F16]),
        (heads, kv_heads) in proptest::sample::select(vec![(1usize, 1usize), (2, 2), (4, 1), (8, 2), (6, 1), (12, 2)]),
        head_dim in proptest::sample::select(vec![32usize, 64, 128]),
        page_size in proptest::sample::select(vec![16usize, 32, 64]),
        context_lens in proptest::collection::vec(1usize..300, 1..8),
        split in proptest::sample::select(vec![Split::Off, Split::Keys(32), Split::Keys(64), Split::Keys(96)]),
        append in any::<bool>(),
        seed in any::<u64>(),
    ) {
        for ctx in common::property_backends("paged_decode_matches_reference", common::cases(CASES)) {
            run(&ctx, &PagedCase { dtype, heads, kv_heads, head_dim, page_size, context_lens: context_lens.clone(), split, append, seed });
        }
    }
}

fn case(context_lens: Vec<usize>, page_size: usize, split: Split, append: bool, seed: u64) -> PagedCase {
    PagedCase { dtype: DType::BF16, heads: 4, kv_heads: 2, head_dim: 64, page_size, context_lens, split, append, seed }
}

#[test]
fn paged_decode_named_cases() {
    let mut n = 0;
    for ctx in common::backends("paged_decode_named_cases") {
        for dtype in [DType::BF16, DType::F16] {
            for page_size in [16, 32, 64] {
                let named = [
                    ("context 1", vec![1], Split::Off),
                    ("context 1 split", vec![1], Split::Keys(32)),
                    ("contexts exactly filling their pages", vec![page_size, 3 * page_size], Split::Off),
                    ("full pages, split at page boundaries", vec![4 * page_size, 2 * page_size], Split::Keys(32)),
                    ("empty context gives 0", vec![0, 5, 0], Split::Keys(32)),
                    ("mixed lengths, auto split", vec![1, 33, 64, 65, 200], Split::Auto),
                ];
                for (name, lens, split) in named {
                    let c = PagedCase { dtype, ..case(lens, page_size, split, false, n) };
                    let r = check(&ctx, &c).unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(r.passed(), "{name}: {c:?} on {}: {r}", ctx.backend());
                    n += 1;
                }
            }
        }
    }
    println!("paged_decode: {n} named cases passed");
}

#[test]
fn long_context_with_split() {
    // ~4000 tokens, one sequence: the flash-decoding case (auto split picks several chunks).
    let s = PagedShape { batch: 1, heads: 8, kv_heads: 2, head_dim: 64, page_size: 16, num_pages: 250, max_pages: 250 };
    let (splits, keys) = split_plan(&s, 3999, Split::Auto);
    assert!(splits > 1 && keys.is_multiple_of(32), "auto splits a long lone context: {splits} x {keys}");
    for ctx in common::backends("long_context_with_split") {
        let c = PagedCase { heads: 8, ..case(vec![3999], 16, Split::Auto, false, 11) };
        run(&ctx, &c);
        run(&ctx, &PagedCase { split: Split::Off, ..c });
        // A full batch of 64 short, unequal contexts (no split: enough blocks).
        run(&ctx, &case((0..64).map(|i| 1 + (i * 37) % 90).collect(), 32, Split::Auto, true, 12));
    }
}

#[test]
fn append_then_decode_equals_decode_over_the_longer_context() {
    for ctx in common::backends("append_then_decode") {
        for (i, page_size) in [16, 32, 64].into_iter().enumerate() {
            // Lengths whose last token opens a new page, ends a page, or sits inside one.
            let lens = vec![1, page_size, page_size + 1, 2 * page_size - 1, 77];
            run(&ctx, &case(lens.clone(), page_size, Split::Off, true, i as u64));
            run(&ctx, &case(lens, page_size, Split::Keys(32), true, 10 + i as u64));
        }
    }
}

#[test]
fn split_is_deterministic() {
    let ctx = Context::emulator();
    let c = case(vec![300, 17, 250], 16, Split::Keys(64), false, 5);
    let a = check(&ctx, &c).unwrap();
    let b = check(&ctx, &c).unwrap();
    assert!(a.passed() && b.passed());
    assert_eq!(a.max_abs_err.to_bits(), b.max_abs_err.to_bits(), "same inputs, same bits");
}

#[test]
fn bad_tables_and_shapes_are_refused() {
    let ctx = Context::emulator();
    let s = PagedShape { batch: 2, heads: 4, kv_heads: 2, head_dim: 64, page_size: 16, num_pages: 4, max_pages: 2 };
    let q = ctx.alloc::<bf16>(s.q_len()).unwrap();
    let kv = ctx.alloc::<bf16>(s.cache_len()).unwrap();
    let mut o = ctx.alloc::<bf16>(s.q_len()).unwrap();
    let good_tables = [0, 1, 2, 3];
    let good_lens = [20, 32];
    let bad: Vec<(&str, PagedShape, &[i32], &[i32])> = vec![
        ("page id out of range", s, &[0, 4, 2, 3], &good_lens),
        ("negative page id", s, &[0, 1, -1, 3], &good_lens),
        ("context longer than its table", s, &good_tables, &[20, 33]),
        ("negative context", s, &good_tables, &[-1, 3]),
        ("block_tables too short", s, &[0, 1, 2], &good_lens),
        ("context_lens too long", s, &good_tables, &[1, 2, 3]),
        ("page size 8", PagedShape { page_size: 8, ..s }, &good_tables, &good_lens),
        ("heads not a multiple of kv_heads", PagedShape { heads: 3, ..s }, &good_tables, &good_lens),
        ("head_dim 48", PagedShape { head_dim: 48, ..s }, &good_tables, &good_lens),
        ("cache shorter than num_pages", PagedShape { num_pages: 5, ..s }, &good_tables, &good_lens),
    ];
    // The decode, with its tables validated for `shape` (the first refusal either gives).
    let decode =
        |shape: PagedShape, tables: &[i32], lens: &[i32], split: Split, o: &mut ferrokern::DeviceBuffer<bf16>| {
            let pt = PagedTables::new(&ctx, &shape, tables, lens)?;
            let input = PagedDecodeInput {
                q: q.as_view(),
                k_cache: kv.as_view(),
                v_cache: kv.as_view(),
                tables: &pt,
                shape,
                scale: None,
                split,
            };
            paged_decode(&ctx, input, o.as_view_mut())
        };
    for (name, shape, tables, lens) in bad {
        let e = decode(shape, tables, lens, Split::Off, &mut o).expect_err(name);
        assert!(matches!(e, Error::InvalidArgument { .. }), "{name}: {e}");
        println!("{name}: {e}");
    }
    decode(s, &good_tables, &good_lens, Split::Off, &mut o).expect("the good case runs");
    let e = decode(s, &good_tables, &good_lens, Split::Keys(48), &mut o).expect_err("split not a multiple of 32");
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    // Tables validated for a different shape (a larger cache) are refused.
    let big = PagedShape { num_pages: 8, ..s };
    let pt = PagedTables::new(&ctx, &big, &[0, 7, 2, 3], &good_lens).unwrap();
    let input = PagedDecodeInput {
        q: q.as_view(),
        k_cache: kv.as_view(),
        v_cache: kv.as_view(),
        tables: &pt,
        shape: s,
        scale: None,
        split: Split::Off,
    };
    let e = paged_decode(&ctx, input, o.as_view_mut()).expect_err("tables for another shape");
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    println!("tables for another shape: {e}");

    // Append: no room past a full table, and two sequences writing one row.
    let new = ctx.alloc::<bf16>(s.new_len()).unwrap();
    let (mut kc, mut vc) = (ctx.alloc::<bf16>(s.cache_len()).unwrap(), ctx.alloc::<bf16>(s.cache_len()).unwrap());
    let bad_append: Vec<(&str, &[i32], &[i32])> = vec![
        ("append past a full table", &good_tables, &[20, 32]),
        ("append page out of range", &[0, 9, 2, 3], &[20, 3]),
        ("two sequences append to one row", &[0, 1, 0, 3], &[3, 3]),
    ];
    for (name, tables, lens) in bad_append {
        let input = PagedAppendInput {
            k_new: new.as_view(),
            v_new: new.as_view(),
            block_tables: tables,
            context_lens: lens,
            shape: s,
        };
        let e = paged_append(&ctx, input, kc.as_view_mut(), vc.as_view_mut()).expect_err(name);
        assert!(matches!(e, Error::InvalidArgument { .. }), "{name}: {e}");
        println!("{name}: {e}");
    }
}
