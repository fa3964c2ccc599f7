//! Decode attention over a paged KV cache against the f64 reference under FlashAttention's
//! rule, every version of the ladder, on the emulator always and the GPU when present: random
//! batches of variable context lengths over shuffled physical pages (every row outside a
//! context is NaN), GQA, page sizes 16/32/64, 1 to 8 new query tokens (causal among
//! themselves), with and without split-K; v03's row tiles (1 to 64 rows of a kv head in one
//! block, more in balanced row groups) and its launch shape; the append kernel; the auto split
//! rule; and bad block tables.

mod common;

use ferrokern::paged::{
    AUTO_MIN_CHUNK, AUTO_TARGET_BLOCKS, BUGS, MMA_MIN_ROWS, PagedAppendInput, PagedCase, PagedDecodeInput, PagedShape,
    PagedTables, PagedVersion, Split, VERSIONS, check_with, decode_launch, paged_append, paged_decode,
    paged_decode_with, pick_version, split_plan, version,
};
use ferrokern::{Context, DType, Error};
use half::bf16;
use proptest::prelude::*;

/// `case` on every version.
fn run(ctx: &Context, case: &PagedCase) {
    for v in VERSIONS {
        run_with(ctx, case, v);
    }
}

fn run_with(ctx: &Context, case: &PagedCase, v: &PagedVersion) {
    let r = check_with(ctx, case, v).unwrap_or_else(|e| panic!("{} {case:?} on {}: {e}", v.name, ctx.backend()));
    assert!(r.passed(), "{} {case:?} on {}: {r}", v.name, ctx.backend());
}

/// Property cases per run (FERROKERN_CASES overrides).
const CASES: u32 = 24;

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(CASES), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn paged_decode_matches_reference(
        dtype in proptest::sample::select(vec![DType::BF16, DType::F16]),
        (heads, kv_heads) in proptest::sample::select(vec![(1usize, 1usize), (2, 2), (4, 1), (8, 2), (6, 1), (12, 2), (8, 1), (16, 2), (16, 1), (24, 2)]),
        head_dim in proptest::sample::select(vec![32usize, 64, 96, 128]),
        page_size in proptest::sample::select(vec![16usize, 32, 64]),
        q_len in proptest::sample::select(vec![1usize, 1, 2, 3, 4, 5, 6, 7, 8]),
        context_lens in proptest::collection::vec(1usize..300, 1..8),
        split in proptest::sample::select(vec![Split::Off, Split::Keys(32), Split::Keys(64), Split::Keys(96)]),
        append in any::<bool>(),
        seed in any::<u64>(),
    ) {
        // Every context holds at least the new tokens.
        let context_lens: Vec<usize> = context_lens.iter().map(|&n| n.max(q_len)).collect();
        for ctx in common::property_backends("paged_decode_matches_reference", common::cases(CASES)) {
            run(&ctx, &PagedCase { dtype, heads, kv_heads, q_len, head_dim, page_size, context_lens: context_lens.clone(), split, append, seed });
        }
    }
}

fn case(context_lens: Vec<usize>, page_size: usize, split: Split, append: bool, seed: u64) -> PagedCase {
    PagedCase {
        dtype: DType::BF16,
        heads: 4,
        kv_heads: 2,
        q_len: 1,
        head_dim: 64,
        page_size,
        context_lens,
        split,
        append,
        seed,
    }
}

#[test]
fn paged_decode_named_cases() {
    let mut n = 0;
    for ctx in common::backends("paged_decode_named_cases") {
        for dtype in [DType::BF16, DType::F16] {
            for page_size in [16, 32, 64] {
                let named = [
                    ("context 1", vec![1], Split::Off, 1),
                    ("context 1 split", vec![1], Split::Keys(32), 1),
                    ("contexts exactly filling their pages", vec![page_size, 3 * page_size], Split::Off, 1),
                    ("full pages, split at page boundaries", vec![4 * page_size, 2 * page_size], Split::Keys(32), 1),
                    ("empty context gives 0", vec![0, 5, 0], Split::Keys(32), 1),
                    ("mixed lengths, auto split", vec![1, 33, 64, 65, 200], Split::Auto, 1),
                    ("q_len 8, contexts of only the new tokens", vec![8, 8], Split::Off, 8),
                    ("q_len 4, new tokens across a page boundary", vec![page_size + 2, 2 * page_size], Split::Off, 4),
                    ("q_len 4, new tokens across a chunk boundary", vec![66, 34, 0], Split::Keys(32), 4),
                    ("q_len 3, auto split", vec![3, 100, 257], Split::Auto, 3),
                ];
                for (name, lens, split, q_len) in named {
                    let c = PagedCase { dtype, q_len, ..case(lens, page_size, split, false, n) };
                    for v in VERSIONS {
                        let r = check_with(&ctx, &c, v).unwrap_or_else(|e| panic!("{} {name}: {e}", v.name));
                        assert!(r.passed(), "{} {name}: {c:?} on {}: {r}", v.name, ctx.backend());
                        n += 1;
                    }
                }
            }
        }
    }
    println!("paged_decode: {n} named cases passed");
}

#[test]
fn long_context_with_split() {
    // ~4000 tokens, one sequence: the flash-decoding case (auto split picks several chunks).
    let s = PagedShape {
        batch: 1,
        heads: 8,
        kv_heads: 2,
        q_len: 1,
        head_dim: 64,
        page_size: 16,
        num_pages: 250,
        max_pages: 250,
    };
    for v in VERSIONS {
        let (splits, keys) = split_plan(v, &s, 3999, Split::Auto);
        assert!(
            splits > 1 && keys.is_multiple_of(32),
            "{}: auto splits a long lone context: {splits} x {keys}",
            v.name
        );
    }
    for ctx in common::backends("long_context_with_split") {
        let c = PagedCase { heads: 8, ..case(vec![3999], 16, Split::Auto, false, 11) };
        run(&ctx, &c);
        run(&ctx, &PagedCase { split: Split::Off, ..c.clone() });
        // Speculative decoding on the long context: 8 new tokens, GQA group 4 (32 rows: two
        // row groups in v02), split.
        run(&ctx, &PagedCase { q_len: 8, ..c });
        // A full batch of 64 short, unequal contexts (no split: enough blocks).
        run(&ctx, &case((0..64).map(|i| 1 + (i * 37) % 90).collect(), 32, Split::Auto, true, 12));
        run(
            &ctx,
            &PagedCase { q_len: 2, ..case((0..64).map(|i| 2 + (i * 37) % 90).collect(), 16, Split::Auto, false, 13) },
        );
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
    let c = PagedCase { q_len: 2, ..case(vec![300, 17, 250], 16, Split::Keys(64), false, 5) };
    for v in VERSIONS {
        let a = check_with(&ctx, &c, v).unwrap();
        let b = check_with(&ctx, &c, v).unwrap();
        assert!(a.passed() && b.passed());
        assert_eq!(a.max_abs_err.to_bits(), b.max_abs_err.to_bits(), "{}: same inputs, same bits", v.name);
    }
}

/// A shape for the launch rules alone (head dim 128, pages of 16, a one-page cache).
fn launch_shape(batch: usize, heads: usize, kv_heads: usize, q_len: usize) -> PagedShape {
    PagedShape { batch, heads, kv_heads, q_len, head_dim: 128, page_size: 16, num_pages: 1, max_pages: 1 }
}

#[test]
fn auto_split_rule_edges() {
    let v02 = version("v02_vec").unwrap();
    let v01 = &VERSIONS[0];
    let shape = |batch, kv_heads, heads, q_len| launch_shape(batch, heads, kv_heads, q_len);
    let plan = |v: &PagedVersion, s: PagedShape, ctx: usize| split_plan(v, &s, ctx, Split::Auto);
    // Batch 1 x 32k, 8 kv heads of 4 query heads: 8 blocks, 33 chunks wanted, 993 tokens
    // rounded to 1024 gives 32 chunks, 256 blocks (~2 per SM).
    assert_eq!(plan(v02, shape(1, 8, 32, 1), 32768), (32, 1024));
    // Enough blocks already (exactly the target): no split; one fewer: split in two.
    assert_eq!(plan(v02, shape(AUTO_TARGET_BLOCKS / 8, 8, 32, 1), 1 << 20), (1, 0));
    assert_eq!(plan(v02, shape(AUTO_TARGET_BLOCKS - 1, 1, 1, 1), 2 * AUTO_MIN_CHUNK), (2, AUTO_MIN_CHUNK));
    // Contexts shorter than two minimum chunks are never split, however few the blocks.
    assert_eq!(plan(v02, shape(1, 1, 1, 1), 2 * AUTO_MIN_CHUNK - 1), (1, 0));
    assert_eq!(plan(v02, shape(1, 1, 1, 1), 0), (1, 0));
    // The minimum chunk caps the count: 4 chunks of 256 for a 1024-token context.
    assert_eq!(plan(v02, shape(1, 1, 1, 1), 1024), (4, 256));
    // Chunks are whole tiles: 1000 tokens over 3 chunks is 334 -> 352, 3 chunks.
    assert_eq!(plan(v02, shape(88, 1, 1, 1), 1000), (3, 352));
    // Rows per block differ by version: 16 (token, head) rows are one v02 block but four of
    // v01's, so v01 reaches the target with fewer sequences.
    let s = shape(66, 1, 4, 4);
    assert_eq!(plan(v01, s, 4096), (1, 0), "66 x 4 = 264 v01 blocks");
    assert_eq!(plan(v02, s, 4096).0, 4, "66 v02 blocks want 4 chunks");
    // v03 takes a GQA-8 speculative step's 64 rows per kv head in one block (v02 needs 4):
    // batch 16 x 4 kv heads is 64 blocks, so 5 chunks of 832 tokens of a 4096-token context
    // (ceil(264 / 64) = 5, 4096 / 5 -> 832) where v02's 256 blocks want only 2.
    let v03 = version("v03_mma").unwrap();
    assert_eq!(plan(v03, shape(16, 4, 32, 8), 4096), (5, 832));
    assert_eq!(plan(v02, shape(16, 4, 32, 8), 4096), (2, 2048));
    // Explicit chunks: one chunk covering the context is no split.
    assert_eq!(split_plan(v02, &shape(1, 1, 1, 1), 64, Split::Keys(64)), (1, 0));
    assert_eq!(split_plan(v02, &shape(1, 1, 1, 1), 65, Split::Keys(64)), (2, 64));
    assert_eq!(split_plan(v02, &shape(1, 1, 1, 1), 1 << 20, Split::Off), (1, 0));
}

#[test]
fn bad_tables_and_shapes_are_refused() {
    let ctx = Context::emulator();
    let s = PagedShape {
        batch: 2,
        heads: 4,
        kv_heads: 2,
        q_len: 1,
        head_dim: 64,
        page_size: 16,
        num_pages: 4,
        max_pages: 2,
    };
    let q = ctx.alloc::<bf16>(9 * s.q_elems()).unwrap();
    let kv = ctx.alloc::<bf16>(s.cache_len()).unwrap();
    let mut o = ctx.alloc::<bf16>(s.q_elems()).unwrap();
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
        ("q_len 0", PagedShape { q_len: 0, ..s }, &good_tables, &good_lens),
        ("q_len 9", PagedShape { q_len: 9, ..s }, &good_tables, &good_lens),
        ("context shorter than q_len", PagedShape { q_len: 4, ..s }, &good_tables, &[20, 3]),
    ];
    // The decode, with its tables validated for `shape` (the first refusal either gives).
    let decode =
        |shape: PagedShape, tables: &[i32], lens: &[i32], split: Split, o: &mut ferrokern::DeviceBuffer<bf16>| {
            let pt = PagedTables::new(&ctx, &shape, tables, lens)?;
            let input = PagedDecodeInput {
                q: q.view(0..shape.q_elems()).unwrap(),
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

    // A cache view off a 16-byte boundary: v02 (16-byte chunks) refuses it by name; the
    // default decode runs it with v01 instead.
    let big_kv = ctx.alloc::<bf16>(s.cache_len() + 1).unwrap();
    let pt = PagedTables::new(&ctx, &s, &good_tables, &good_lens).unwrap();
    let input = PagedDecodeInput {
        q: q.view(0..s.q_elems()).unwrap(),
        k_cache: big_kv.view(1..s.cache_len() + 1).unwrap(),
        v_cache: kv.as_view(),
        tables: &pt,
        shape: s,
        scale: None,
        split: Split::Off,
    };
    for v in VERSIONS.iter().filter(|v| v.vector_loads) {
        let e = paged_decode_with(&ctx, v, input, o.as_view_mut()).expect_err("misaligned k_cache");
        assert!(matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("16-byte"), "{e}");
        assert!(e.to_string().contains(v.name), "{e}");
        println!("misaligned cache for {}: {e}", v.name);
    }
    paged_decode(&ctx, input, o.as_view_mut()).expect("the default falls back to v01 for a misaligned cache");

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

#[test]
fn every_q_len_and_gqa_group_on_every_version() {
    // New tokens 1 to 8 against GQA groups 1, 4 and 8 (rows per kv head 1 to 64: one to four
    // row groups of 16, padded m16 tiles in v03), split and not, head dims 64 and 128, with
    // contexts that end inside a page, exactly at the new tokens, and past a few tiles.
    let mut n = 0;
    for ctx in common::backends("every_q_len_and_gqa_group") {
        for q_len in 1..=8 {
            for (heads, kv_heads) in [(2, 2), (8, 2), (8, 1)] {
                let split = if q_len % 2 == 0 { Split::Keys(32) } else { Split::Off };
                let c = PagedCase {
                    dtype: if q_len % 3 == 0 { DType::F16 } else { DType::BF16 },
                    heads,
                    kv_heads,
                    q_len,
                    head_dim: if heads == 8 && kv_heads == 1 { 128 } else { 64 },
                    page_size: [16, 32, 64][q_len % 3],
                    context_lens: vec![q_len, 45 + q_len, 130],
                    split,
                    append: false,
                    seed: 100 + n,
                };
                run(&ctx, &c);
                n += 1;
            }
        }
    }
    println!("{n} cases x {} versions passed", VERSIONS.len());
}

#[test]
fn pick_version_follows_the_rows_per_kv_head() {
    for rows in 1..MMA_MIN_ROWS {
        assert_eq!(pick_version(rows, true).name, "v02_vec", "{rows} rows");
    }
    for rows in [MMA_MIN_ROWS, 16, 17, 64, 256] {
        assert_eq!(pick_version(rows, true).name, "v03_mma", "{rows} rows");
    }
    for rows in [1, MMA_MIN_ROWS, 64] {
        assert_eq!(pick_version(rows, false).name, "v01_simt", "{rows} rows, misaligned cache");
    }
    // GQA-8 decode (8 rows) and GQA-4 with 2 new tokens go to the tensor cores; MHA decode
    // and GQA-4 decode stay on v02.
    let s = |heads, kv_heads, q_len| launch_shape(1, heads, kv_heads, q_len);
    assert_eq!(s(32, 4, 1).rows_per_kv_head(), 8);
    assert_eq!(pick_version(s(32, 4, 1).rows_per_kv_head(), true).name, "v03_mma");
    assert_eq!(pick_version(s(32, 8, 2).rows_per_kv_head(), true).name, "v03_mma");
    assert_eq!(pick_version(s(32, 32, 1).rows_per_kv_head(), true).name, "v02_vec");
    assert_eq!(pick_version(s(32, 8, 1).rows_per_kv_head(), true).name, "v02_vec");
    // The shipped entry point on a GQA-8 speculative step (v03) and on MHA decode (v02).
    let ctx = Context::emulator();
    for (heads, kv_heads, q_len) in [(8, 1, 3), (2, 2, 1)] {
        let c = PagedCase { heads, kv_heads, q_len, ..case(vec![q_len, 70], 16, Split::Off, false, 3) };
        let r = ferrokern::paged::check(&ctx, &c).unwrap();
        assert!(r.passed(), "{c:?}: {r}");
    }
}

#[test]
fn broken_v03_variants_are_rejected() {
    use ferrokern::paged::{BUG_V03_NO_ROW_LIMIT, BUG_V03_Q_ROW_TILE0, BUG_V03_V_NO_TRANS};
    let ctx = Context::emulator();
    // V's B fragments without .trans: the P V product reads V transposed within each 16 x 16
    // block. Plain decode, GQA group 8, one sequence of 70 tokens.
    let c = PagedCase { heads: 8, kv_heads: 1, ..case(vec![70], 16, Split::Off, false, 41) };
    let r = check_with(&ctx, &c, &BUG_V03_V_NO_TRANS).expect("it runs");
    assert!(!r.passed(), "V without .trans passed the check: {r}");
    println!("V fragments without .trans rejected: {r}");
    run_with(&ctx, &c, version("v03_mma").unwrap());
    // No per-row key limit: every new token sees the later new tokens too (the causal rule
    // for q_len > 1). With q_len 1 the bug is invisible by construction, so the check must
    // use several new tokens; split and not.
    for split in [Split::Off, Split::Keys(32)] {
        let c = PagedCase { heads: 4, kv_heads: 1, q_len: 4, ..case(vec![40, 4], 32, split, false, 42) };
        let r = check_with(&ctx, &c, &BUG_V03_NO_ROW_LIMIT).expect("it runs");
        assert!(!r.passed(), "{split:?}: the missing row limit passed the check: {r}");
        println!("missing row limit ({split:?}) rejected: {r}");
        run_with(&ctx, &c, version("v03_mma").unwrap());
    }
    // Every row tile gathering the first tile's queries: invisible with one row tile (16 rows
    // or fewer: the same kernel as v03, so it must pass there), wrong for every row past the
    // 16th: GQA 8 with 3 and 8 new tokens (24 and 64 rows), group 16 with 5 (80 rows, two
    // row groups of 3 tiles), split and not.
    let c16 = PagedCase { heads: 8, kv_heads: 1, q_len: 2, ..case(vec![70, 2], 16, Split::Off, false, 43) };
    run_with(&ctx, &c16, &BUG_V03_Q_ROW_TILE0);
    for (heads, q_len, split) in [(8, 3, Split::Off), (8, 8, Split::Keys(32)), (16, 5, Split::Off)] {
        let c = PagedCase { heads, kv_heads: 1, q_len, ..case(vec![70, q_len], 32, split, false, 44) };
        let r = check_with(&ctx, &c, &BUG_V03_Q_ROW_TILE0).expect("it runs");
        assert!(!r.passed(), "{heads} heads q_len {q_len} {split:?}: row tiles reading tile 0's queries passed: {r}");
        println!("row tiles reading tile 0's queries ({heads} heads, q_len {q_len}, {split:?}) rejected: {r}");
        run_with(&ctx, &c, version("v03_mma").unwrap());
    }
}

#[test]
fn v03_row_tiles_cover_17_to_64_rows_and_past() {
    // Rows per kv head (query heads per kv head x new tokens) across one to four m16 row tiles
    // of one block: 17 (group 17), 18 (6 x 3), 20 (4 x 5), 24 (8 x 3), 32 (8 x 4), 40, 48, 56,
    // 64 (8 x 8; also 32 x 2 and plain decode at group 64); rows past 64 in balanced row
    // groups: 66 (33 x 2: two blocks of 3 tiles), 72 (9 x 8: 48 + 24 rows, the second block
    // with a padding tile), 80 (16 x 5); and group 1 with 8 new tokens (8 rows). Both dtypes,
    // page sizes 16/32/64, head dims 32 to 128, split and not, causal per row (contexts of
    // exactly the new tokens, inside a page, past a few tiles), two kv heads where it is cheap.
    let v03 = version("v03_mma").unwrap();
    let shapes: [(usize, usize, usize); 16] = [
        (17, 1, 1),
        (6, 1, 3),
        (4, 1, 5),
        (8, 1, 3),
        (16, 2, 4),
        (8, 1, 5),
        (16, 2, 6),
        (8, 1, 7),
        (8, 1, 8),
        (32, 1, 2),
        (64, 1, 1),
        (33, 1, 2),
        (9, 1, 8),
        (16, 1, 5),
        (1, 1, 8),
        (2, 2, 8),
    ];
    let mut n = 0;
    for ctx in common::backends("v03_row_tiles") {
        for (k, &(heads, kv_heads, q_len)) in shapes.iter().enumerate() {
            for split in [Split::Off, Split::Keys(64)] {
                let c = PagedCase {
                    dtype: if k % 2 == 0 { DType::BF16 } else { DType::F16 },
                    heads,
                    kv_heads,
                    q_len,
                    head_dim: [32, 64, 96, 128][k % 4],
                    page_size: [16, 32, 64][k % 3],
                    context_lens: vec![q_len, 37 + q_len, 150],
                    split,
                    append: false,
                    seed: 200 + n,
                };
                run_with(&ctx, &c, v03);
                n += 1;
            }
        }
    }
    println!("v03: {n} row-tile cases passed");
}

#[test]
fn v03_launch_is_one_block_per_kv_head_up_to_64_rows() {
    // One block per (chunk, kv head, sequence) with 64 threads per m16 row tile up to 64 rows
    // per kv head; past that, the fewest blocks of at most 4 tiles with the rows spread evenly.
    let v03 = version("v03_mma").unwrap();
    let shape = |heads, kv_heads, q_len| launch_shape(3, heads, kv_heads, q_len);
    let max = ferrokern::gpu_kernels::launch_threads(v03.bf16.name).expect("v03 has a block size");
    assert_eq!(max, 256, "4 row tiles of 2 warps");
    for kv_heads in [1, 2, 8] {
        for group in 1..=40 {
            for q_len in 1..=8 {
                let s = shape(group * kv_heads, kv_heads, q_len);
                let rows = s.rows_per_kv_head();
                assert_eq!(rows, group * q_len);
                let cfg = decode_launch(v03, &s, 5);
                let (gx, gy, gz) = (cfg.grid.x as usize, cfg.grid.y as usize, cfg.grid.z as usize);
                let threads = cfg.block.count() as usize;
                let what = format!("group {group} x q_len {q_len} = {rows} rows, {kv_heads} kv heads");
                assert_eq!((gx, gz, cfg.shared_bytes), (5, 3, v03.shared_bytes), "{what}");
                assert!(threads <= max as usize && threads.is_multiple_of(64), "{what}: {threads} threads");
                let (groups, tiles) = (gy / kv_heads, threads / 64);
                assert_eq!(gy, kv_heads * groups, "{what}");
                if rows <= 64 {
                    assert_eq!((groups, tiles), (1, rows.div_ceil(16)), "{what}: one block per kv head");
                } else {
                    assert_eq!(groups, rows.div_ceil(64), "{what}: the fewest row groups");
                    // Balanced: the groups' 16-row tiles hold the rows, one tile fewer would not.
                    assert!(groups * tiles * 16 >= rows && groups * (tiles - 1) * 16 < rows, "{what}: {tiles} tiles");
                }
            }
        }
    }
    // Every version's blocks cover a kv head's rows with no block left empty.
    for v in VERSIONS.iter().chain(BUGS) {
        for rows in 1..=300u32 {
            let per = v.rows_per_block(rows);
            let groups = v.row_groups(rows, 1, 1);
            assert!(groups * per >= rows && (groups - 1) * per < rows, "{}: {rows} rows", v.name);
            assert!(v.threads(rows) <= v.max_threads(), "{}: {rows} rows", v.name);
        }
    }
}
