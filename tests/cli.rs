//! The `ferrokern` binary as a user runs it: `verify` passes real kernels, fails a broken
//! one with exit 1, and refuses bad arguments with exit 2 and a message saying what to do.
//! Everything runs on the emulator, so these hold on machines without a GPU.

use std::process::Command;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn last_line(&self) -> &str {
        self.stdout.lines().last().unwrap_or("")
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {}\n--- stdout\n{}--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

fn ferrokern(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrokern"))
        .args(args)
        // A stray FERROKERN_BACKEND in the caller's environment must not change what runs.
        .env_remove("FERROKERN_BACKEND")
        .output()
        .expect("the ferrokern binary runs");
    Run {
        // A signal (no code) is a crash, which no case here expects.
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn verify(args: &[&str]) -> Run {
    let mut all = vec!["verify"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--backend", "emulator", "--seed", "42"]);
    ferrokern(&all)
}

fn assert_pass(args: &[&str]) {
    let r = verify(args);
    assert_eq!(r.code, 0, "verify {args:?}: {r}");
    assert!(r.last_line().starts_with("PASS max_abs_err="), "verify {args:?}: last line is not a PASS: {r}");
    assert!(r.stdout.contains("backend=emulator"), "verify {args:?}: {r}");
}

/// Exit 2, no PASS/FAIL verdict, and every `needles` in the message on stderr.
fn assert_refused(args: &[&str], needles: &[&str]) {
    let r = ferrokern(args);
    assert_eq!(r.code, 2, "{args:?} should be refused as bad arguments: {r}");
    assert!(
        !r.stdout.contains("PASS") && !r.stdout.contains("FAIL"),
        "{args:?}: a refused command must not run anything: {r}"
    );
    assert!(!r.stdout.contains("version=none"), "{args:?}: no header names a version that does not exist: {r}");
    for n in needles {
        assert!(r.stderr.contains(n), "{args:?}: stderr should mention `{n}`: {r}");
    }
}

#[test]
fn verify_passes_gelu_bf16_misaligned_with_specials() {
    assert_pass(&["gelu", "--dtype", "bf16", "--len", "4097", "--offset", "1", "--specials"]);
}

#[test]
fn verify_passes_axpy_f32_single_element() {
    assert_pass(&["axpy", "--dtype", "f32", "--len", "1"]);
}

#[test]
fn verify_passes_swiglu_f16_past_a_power_of_two() {
    assert_pass(&["swiglu", "--dtype", "f16", "--len", "65537"]);
}

#[test]
fn verify_passes_every_op_at_an_odd_length() {
    for op in ["axpy", "scale", "add", "mul", "gelu", "silu", "swiglu"] {
        for dtype in ["f32", "f16", "bf16"] {
            assert_pass(&[op, "--dtype", dtype, "--len", "1023", "--specials"]);
        }
    }
}

#[test]
fn verify_passes_empty_and_default_dtype() {
    // Length 0 launches nothing and must still report a verdict, not an error.
    assert_pass(&["silu", "--len", "0"]);
    // --dtype defaults to f32.
    assert_pass(&["mul", "--len", "33", "--offset", "3"]);
}

#[test]
fn verify_prints_the_seed_so_a_run_can_be_repeated() {
    let r = verify(&["add", "--len", "7"]);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stdout.contains("seed=42"), "{r}");
}

#[test]
fn verify_fails_a_kernel_that_skips_its_tail() {
    let r = verify(&["scale", "--dtype", "f32", "--len", "1023", "--kernel", "bug_scale_no_tail"]);
    assert_eq!(r.code, 1, "{r}");
    assert!(r.last_line().starts_with("FAIL"), "{r}");
    assert!(r.last_line().contains("first_bad_index=1020"), "{r}");
    assert!(r.last_line().contains("not written"), "{r}");
}

#[test]
fn verify_fails_a_kernel_with_low_precision_math() {
    let r = verify(&["scale", "--len", "4097", "--kernel", "bug_scale_bf16_math"]);
    assert_eq!(r.code, 1, "{r}");
    assert!(r.last_line().starts_with("FAIL"), "{r}");
    assert!(r.last_line().contains("outside tolerance"), "{r}");
}

#[test]
fn kernel_override_is_hidden_from_help() {
    let r = ferrokern(&["verify", "--help"]);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stdout.contains("--len"), "{r}");
    assert!(!r.stdout.contains("--kernel"), "{r}");
}

#[test]
fn refuses_an_unknown_op_and_lists_the_available_ones() {
    assert_refused(
        &["verify", "gleu", "--len", "8", "--backend", "emulator"],
        &["unknown op `gleu`", "available:", "gelu", "swiglu"],
    );
}

#[test]
fn refuses_planned_ops_naming_the_issue() {
    // Read from the library, not restated: ops leave the list as their families land (softmax
    // already has), and each must then be verifiable instead.
    for &(op, issue) in ferrokern::verify::PLANNED {
        assert_refused(
            &["verify", op, "--len", "8", "--backend", "emulator"],
            &[op, "not implemented yet", issue, "available:"],
        );
    }
}

#[test]
fn refuses_a_missing_len() {
    assert_refused(&["verify", "gelu", "--backend", "emulator"], &["needs --len"]);
}

#[test]
fn refuses_a_bad_dtype() {
    assert_refused(
        &["verify", "gelu", "--len", "8", "--dtype", "f64", "--backend", "emulator"],
        &["unknown dtype `f64`", "f32, f16 or bf16"],
    );
}

#[test]
fn refuses_shape_flags_an_elementwise_op_does_not_take() {
    assert_refused(
        &["verify", "add", "--len", "8", "--rows", "4", "--causal", "--backend", "emulator"],
        &["takes only --len", "remove --rows, --causal"],
    );
}

#[test]
fn refuses_a_bad_backend() {
    assert_refused(&["verify", "gelu", "--len", "8", "--backend", "tpu"], &["tpu", "auto, gpu or emulator"]);
}

#[test]
fn bench_refuses_an_unknown_section_to_skip_and_lists_the_sections() {
    assert_refused(
        &["bench", "--backend", "emulator", "--skip", "gemm-tc"],
        &["gemm-tc", "elementwise, rows, gemm, gemm_tc, paged_decode, attention, attention_backward"],
    );
}

#[test]
fn refuses_an_unknown_flag() {
    assert_refused(&["verify", "gelu", "--len", "8", "--lenght", "9", "--backend", "emulator"], &["--lenght"]);
}

#[test]
fn refuses_kernel_overrides_that_do_not_exist_or_do_not_fit() {
    assert_refused(
        &["verify", "scale", "--len", "8", "--kernel", "bug_oob", "--backend", "emulator"],
        &["unknown --kernel `bug_oob`", "bug_scale_no_tail"],
    );
    assert_refused(
        &["verify", "scale", "--len", "8", "--dtype", "bf16", "--kernel", "bug_scale_no_tail", "--backend", "emulator"],
        &["scale over f32", "not scale bf16"],
    );
    assert_refused(
        &["verify", "gelu", "--len", "8", "--kernel", "bug_scale_bf16_math", "--backend", "emulator"],
        &["scale over f32", "not gelu f32"],
    );
}

#[test]
fn verify_passes_row_ops() {
    assert_pass(&["softmax", "--rows", "7", "--cols", "9001", "--dtype", "bf16", "--specials"]);
    assert_pass(&["cross_entropy", "--rows", "3", "--cols", "50257", "--strategy", "warp"]);
    assert_pass(&["layernorm_backward", "--rows", "33", "--cols", "4097", "--dtype", "f16", "--offset", "1"]);
    assert_pass(&["argmax", "--rows", "9", "--cols", "1000", "--huge"]);
}

#[test]
fn refuses_bad_row_op_arguments() {
    assert_refused(&["verify", "max", "--rows", "3", "--backend", "emulator"], &["needs --rows R and --cols C"]);
    assert_refused(&["verify", "sum", "--len", "4", "--backend", "emulator"], &["remove --len"]);
    assert_refused(
        &["verify", "rmsnorm", "--rows", "2", "--cols", "8", "--specials", "--backend", "emulator"],
        &["finite inputs"],
    );
    assert_refused(
        &["verify", "softmax", "--rows", "2", "--cols", "8", "--strategy", "grid", "--backend", "emulator"],
        &["unknown strategy"],
    );
    assert_refused(&["verify", "max", "--rows", "2", "--cols", "0", "--backend", "emulator"], &["no maximum"]);
}

#[test]
fn verify_passes_gemm_tensor_cores_and_attention() {
    assert_pass(&[
        "gemm", "--m", "127", "--n", "129", "--k", "133", "--dtype", "f16", "--alpha", "1.5", "--beta", "-0.5",
    ]);
    assert_pass(&["gemm", "--m", "1", "--n", "255", "--k", "101", "--dtype", "bf16"]);
    assert_pass(&["gemm", "--m", "40", "--n", "9", "--k", "33", "--dtype", "bf16", "--trans-c", "--beta", "0.5"]);
    // f32 C with few columns runs as its transpose on the split-K version, stored either way.
    for extra in [&[][..], &["--trans-c", "--trans-a"][..]] {
        let args = [&["gemm", "--m", "100", "--n", "7", "--k", "300", "--beta", "1.5"][..], extra].concat();
        assert_pass(&args);
        let r = verify(&args);
        assert!(r.stdout.contains("version=v10_split_k (as C^T = op(B)^T op(A)^T)"), "{args:?}: {r}");
    }
    assert_pass(&[
        "attention",
        "--batch",
        "2",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--seq-q",
        "37",
        "--seq-k",
        "61",
        "--head-dim",
        "64",
        "--causal",
        "--dtype",
        "bf16",
    ]);
}

#[test]
fn verify_attention_runs_the_shapes_version_or_a_named_one() {
    let args = ["attention", "--heads", "2", "--kv-heads", "1", "--seq-q", "70", "--seq-k", "33", "--causal"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { args.iter().chain(extra).copied().collect() };
    let r = verify(&with(&["--head-dim", "64", "--dtype", "f16"]));
    // The emulator runs every version, so the top one (v04) is the shape's default there.
    assert!(r.code == 0 && r.stdout.contains("version=v04_pingpong"), "head dim 64 runs v04: {r}");
    let r = verify(&with(&["--head-dim", "32", "--dtype", "bf16"]));
    assert!(r.code == 0 && r.stdout.contains("version=v01_simt"), "head dim 32 runs v01: {r}");
    let r = verify(&with(&["--head-dim", "256", "--dtype", "bf16"]));
    assert!(r.code == 0 && r.stdout.contains("version=v03_wgmma"), "head dim 256 runs v03: {r}");
    assert!(r.last_line().starts_with("PASS"), "head dim 256: {r}");
    for v in ["v01_simt", "v02_mma", "v03_wgmma", "v04_pingpong"] {
        let r = verify(&with(&["--head-dim", "128", "--dtype", "bf16", "--kernel", v]));
        assert!(r.code == 0 && r.stdout.contains(&format!("version={v}")), "--kernel {v}: {r}");
        assert!(r.last_line().starts_with("PASS"), "--kernel {v}: {r}");
    }
    assert_refused(
        &[
            "verify",
            "attention",
            "--heads",
            "2",
            "--seq-q",
            "9",
            "--head-dim",
            "32",
            "--dtype",
            "bf16",
            "--kernel",
            "v02_mma",
            "--backend",
            "emulator",
        ],
        &["v02_mma supports 64, 128"],
    );
    assert_refused(
        &[
            "verify",
            "attention",
            "--heads",
            "2",
            "--seq-q",
            "9",
            "--head-dim",
            "64",
            "--dtype",
            "bf16",
            "--kernel",
            "v04",
            "--backend",
            "emulator",
        ],
        &["unknown attention version `v04`", "v01_simt, v02_mma, v03_wgmma"],
    );
}

#[test]
fn refuses_bad_attention_and_tensor_core_arguments() {
    assert_refused(
        &[
            "verify",
            "attention",
            "--heads",
            "2",
            "--seq-q",
            "9",
            "--head-dim",
            "48",
            "--dtype",
            "f16",
            "--backend",
            "emulator",
        ],
        &["head_dim = 48"],
    );
    assert_refused(
        &["verify", "attention", "--heads", "2", "--seq-q", "9", "--head-dim", "64", "--backend", "emulator"],
        &["bf16 or f16"],
    );
    assert_refused(
        &["verify", "attention", "--seq-q", "9", "--head-dim", "64", "--dtype", "bf16", "--backend", "emulator"],
        &["needs --heads"],
    );
    // The forward and the backward share the dense flags; each names its own optional ones.
    let dense = |op: &'static str, extra: &'static str| -> Vec<&'static str> {
        vec!["verify", op, "--heads", "2", "--seq-q", "9", "--head-dim", "64", "--dtype", "bf16", extra]
    };
    assert_refused(&dense("attention", "--deterministic"), &["`attention` takes", "remove --deterministic"]);
    assert_refused(&dense("attention_backward", "--specials"), &["attention_backward is checked on finite inputs"]);
    assert_refused(&dense("attention_backward", "--huge"), &["remove --specials / --huge"]);
    assert_refused(
        &[
            "verify",
            "gemm",
            "--m",
            "3",
            "--n",
            "3",
            "--k",
            "3",
            "--dtype",
            "bf16",
            "--batch",
            "2",
            "--backend",
            "emulator",
        ],
        &["one matrix"],
    );
    assert_refused(
        &[
            "verify",
            "gemm",
            "--m",
            "3",
            "--n",
            "3",
            "--k",
            "3",
            "--dtype",
            "f16",
            "--epilogue",
            "relu",
            "--backend",
            "emulator",
        ],
        &["unknown epilogue part `relu`"],
    );
    assert_refused(
        &["verify", "gemm", "--m", "3", "--n", "3", "--k", "3", "--out16", "--backend", "emulator"],
        &["--dtype bf16 or f16"],
    );
}

/// The tensor-core layouts, 16-bit C and the fused epilogue through the CLI; the TMA version
/// runs the aligned shape on the emulator.
#[test]
fn verify_passes_tensor_core_layouts_and_epilogues() {
    assert_pass(&[
        "gemm",
        "--m",
        "72",
        "--n",
        "136",
        "--k",
        "200",
        "--dtype",
        "bf16",
        "--trans-a",
        "--out16",
        "--epilogue",
        "bias,gelu,residual",
        "--beta",
        "0.5",
    ]);
    assert_pass(&["gemm", "--m", "33", "--n", "17", "--k", "9", "--dtype", "f16", "--trans-b", "--epilogue", "bias"]);
    assert_pass(&[
        "gemm",
        "--m",
        "64",
        "--n",
        "128",
        "--k",
        "64",
        "--dtype",
        "f16",
        "--trans-a",
        "--trans-b",
        "--kernel",
        "v02_wgmma",
    ]);
}

/// Split-K through the CLI: the split-K version's count is printed (`splits=4 (auto)` on
/// the emulator's 132 SMs), `--splits` forces one, and counts it cannot run are refused.
/// (The default for this shape is v02_wgmma, which does not split.)
#[test]
fn verify_gemm_split_k() {
    let plain = ["verify", "gemm", "--m", "64", "--n", "72", "--k", "1000", "--dtype", "bf16", "--backend", "emulator"];
    let base = [&plain[..], &["--kernel", "v05_wgmma_splitk"]].concat();
    let r = ferrokern(&[&base[..], &["--epilogue", "bias,gelu", "--beta", "0.5"]].concat());
    assert!(r.code == 0 && r.stdout.contains("splits=4 (auto)"), "{r}");
    assert!(r.last_line().starts_with("PASS"), "{r}");
    let r = ferrokern(&[&base[..], &["--splits", "3", "--out16"]].concat());
    assert!(r.code == 0 && r.stdout.contains("splits=3 "), "{r}");
    assert!(r.last_line().starts_with("PASS"), "{r}");
    assert_refused(&[&base[..], &["--splits", "17"]].concat(), &["at most 16"]);
    assert_refused(&[&plain[..], &["--splits", "2", "--kernel", "v01_mma"]].concat(), &["does not split K"]);
    // The default for this shape (v02_wgmma, 1 tile for 132 SMs) does not split either.
    assert_refused(&[&plain[..], &["--splits", "2"]].concat(), &["v02_wgmma does not split K"]);
    assert_refused(
        &["verify", "gemm", "--m", "3", "--n", "3", "--k", "3", "--splits", "2", "--backend", "emulator"],
        &["--dtype bf16 or f16"],
    );
}

#[test]
fn verify_paged_decode() {
    assert_pass(&[
        "paged_decode",
        "--batch",
        "3",
        "--heads",
        "8",
        "--kv-heads",
        "2",
        "--head-dim",
        "64",
        "--page-size",
        "32",
        "--context",
        "300",
        "--dtype",
        "bf16",
    ]);
    assert_pass(&[
        "paged_decode",
        "--heads",
        "4",
        "--head-dim",
        "128",
        "--page-size",
        "16",
        "--context",
        "700",
        "--strategy",
        "split:64",
        "--dtype",
        "f16",
    ]);
    assert_refused(
        &[
            "verify",
            "paged_decode",
            "--heads",
            "4",
            "--head-dim",
            "64",
            "--page-size",
            "24",
            "--context",
            "9",
            "--dtype",
            "bf16",
            "--backend",
            "emulator",
        ],
        &["page"],
    );
    assert_refused(
        &[
            "verify",
            "paged_decode",
            "--heads",
            "4",
            "--head-dim",
            "64",
            "--context",
            "9",
            "--dtype",
            "bf16",
            "--backend",
            "emulator",
        ],
        &["needs --heads"],
    );
}

#[test]
fn verify_paged_decode_versions_and_new_tokens() {
    // Speculative decoding (4 new tokens, causal among themselves) on every version by name.
    for version in ["v01_simt", "v02_vec", "v03_mma"] {
        let args = [
            "paged_decode",
            "--batch",
            "2",
            "--heads",
            "8",
            "--kv-heads",
            "2",
            "--head-dim",
            "64",
            "--page-size",
            "16",
            "--context",
            "150",
            "--q-len",
            "4",
            "--strategy",
            "split:64",
            "--kernel",
            version,
            "--dtype",
            "bf16",
        ];
        assert_pass(&args);
        let r = verify(&args);
        assert!(r.stdout.contains(&format!("version={version}")) && r.stdout.contains("q_len=4"), "{r}");
    }
    // Without --kernel, the version paged_decode picks: v03 (tensor cores) for GQA-8 decode
    // (8 rows per kv head), v02 for 4 rows.
    for (kv_heads, want) in [("1", "v03_mma"), ("2", "v02_vec")] {
        let args = [
            "paged_decode",
            "--heads",
            "8",
            "--kv-heads",
            kv_heads,
            "--head-dim",
            "128",
            "--page-size",
            "32",
            "--context",
            "90",
            "--dtype",
            "f16",
        ];
        assert_pass(&args);
        let r = verify(&args);
        assert!(r.stdout.contains(&format!("version={want}")), "{r}");
    }
    let base = ["verify", "paged_decode", "--heads", "4", "--head-dim", "64", "--page-size", "16", "--dtype", "bf16"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        base.iter().copied().chain(extra.iter().copied()).chain(["--backend", "emulator"]).collect()
    };
    assert_refused(&with(&["--context", "3", "--q-len", "4"]), &["shorter than q_len = 4"]);
    assert_refused(&with(&["--context", "9", "--q-len", "0"]), &["q_len = 0"]);
    assert_refused(&with(&["--context", "9", "--kernel", "v99"]), &["unknown paged_decode version `v99`", "v03_mma"]);
}

#[test]
fn verify_attention_backward_both_dq_paths_and_refusals() {
    let args = ["attention_backward", "--heads", "4", "--kv-heads", "2", "--seq-q", "37", "--seq-k", "61", "--causal"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { args.iter().chain(extra).copied().collect() };
    let r = verify(&with(&["--head-dim", "64", "--dtype", "bf16"]));
    assert!(r.code == 0 && r.stdout.contains("deterministic=false"), "{r}");
    assert!(r.last_line().starts_with("PASS") && r.stdout.contains("version=v03_wgmma"), "{r}");
    // Every version is reachable by name (v01 has head dims 32 and 96 too).
    let r = verify(&with(&["--head-dim", "64", "--dtype", "f16", "--kernel", "v01_simt"]));
    assert!(r.code == 0 && r.stdout.contains("version=v01_simt") && r.last_line().starts_with("PASS"), "{r}");
    let r = verify(&with(&["--head-dim", "128", "--dtype", "bf16", "--kernel", "v02_mma", "--deterministic"]));
    assert!(r.code == 0 && r.stdout.contains("version=v02_mma") && r.last_line().starts_with("PASS"), "{r}");
    let r = verify(&with(&["--head-dim", "128", "--dtype", "f16", "--deterministic"]));
    assert!(r.code == 0 && r.stdout.contains("deterministic=true"), "--deterministic: {r}");
    assert!(r.last_line().starts_with("PASS"), "--deterministic: {r}");
    // Head dim 256: v02 alone (two warps per 16 rows, each owning half the head dims).
    let r = verify(&with(&["--head-dim", "256", "--dtype", "bf16"]));
    assert!(r.code == 0 && r.stdout.contains("version=v02_mma") && r.last_line().starts_with("PASS"), "d256: {r}");
    let base = ["verify", "attention_backward", "--heads", "2", "--seq-q", "9", "--backend", "emulator"];
    let refused = |extra: &[&'static str]| -> Vec<&'static str> { base.iter().chain(extra).copied().collect() };
    assert_refused(&refused(&["--head-dim", "48", "--dtype", "bf16"]), &["head_dim = 48"]);
    assert_refused(&refused(&["--head-dim", "64", "--dtype", "f32"]), &["bf16 or f16"]);
    assert_refused(&refused(&["--head-dim", "64", "--dtype", "bf16", "--len", "3"]), &["remove --len"]);
    assert_refused(
        &refused(&["--head-dim", "64", "--dtype", "bf16", "--kernel", "v03"]),
        &["unknown attention_backward version `v03`", "v01_simt, v02_mma"],
    );
    assert_refused(
        &refused(&["--head-dim", "96", "--dtype", "bf16", "--kernel", "v02_mma"]),
        &["head_dim = 96", "v02_mma supports 64, 128, 256"],
    );
    assert_refused(
        &[
            "verify",
            "attention_backward",
            "--seq-q",
            "9",
            "--head-dim",
            "64",
            "--dtype",
            "bf16",
            "--backend",
            "emulator",
        ],
        &["needs --heads"],
    );
    // The forward takes no --deterministic.
    assert_refused(
        &[
            "verify",
            "attention",
            "--heads",
            "2",
            "--seq-q",
            "9",
            "--head-dim",
            "64",
            "--dtype",
            "bf16",
            "--deterministic",
            "--backend",
            "emulator",
        ],
        &["remove --deterministic"],
    );
}

#[test]
fn verify_attention_varlen_and_its_refusals() {
    let r = verify(&[
        "attention",
        "--varlen",
        "7:9,0:5,113,40:17",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--head-dim",
        "64",
        "--causal",
        "--dtype",
        "bf16",
    ]);
    assert!(r.code == 0 && r.stdout.contains("varlen=7:9,0:5,113:113,40:17"), "{r}");
    assert!(r.last_line().starts_with("PASS"), "{r}");
    let base = ["verify", "attention", "--heads", "2", "--head-dim", "64", "--dtype", "bf16", "--backend", "emulator"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { base.iter().chain(extra).copied().collect() };
    assert_refused(&with(&["--varlen", "7:x"]), &["`7:x` is not a length"]);
    assert_refused(&with(&["--varlen", "7", "--seq-q", "7"]), &["remove --seq-q"]);
    assert_refused(&with(&["--varlen", "7", "--kernel", "v9"]), &["unknown attention version `v9`", "v01_simt"]);
    // Head dim 32 runs packed on v01 (the launcher's pick); a named version runs as asked.
    let varlen = |head_dim: &'static str, extra: &[&'static str]| {
        let args = ["attention", "--varlen", "7:9,1,30:3", "--heads", "2", "--head-dim", head_dim, "--dtype", "f16"];
        verify(&args.iter().chain(extra).copied().collect::<Vec<_>>())
    };
    let r = varlen("32", &[]);
    assert!(r.code == 0 && r.stdout.contains("version=v01_simt") && r.last_line().starts_with("PASS"), "{r}");
    let r = varlen("64", &["--kernel", "v01_simt"]);
    assert!(r.code == 0 && r.stdout.contains("version=v01_simt") && r.last_line().starts_with("PASS"), "{r}");
    assert_refused(
        &[
            "verify",
            "attention",
            "--varlen",
            "7",
            "--heads",
            "2",
            "--head-dim",
            "48",
            "--dtype",
            "bf16",
            "--backend",
            "emulator",
        ],
        &["head_dim = 48", "v01_simt: 32, 64, 96, 128"],
    );
}

#[test]
fn verify_attention_backward_varlen_and_its_refusals() {
    let args = ["attention_backward", "--varlen", "7:9,0:5,1,40:17", "--heads", "4", "--kv-heads", "2", "--causal"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { args.iter().chain(extra).copied().collect() };
    let r = verify(&with(&["--head-dim", "64", "--dtype", "bf16"]));
    assert!(r.code == 0 && r.stdout.contains("varlen=7:9,0:5,1:1,40:17"), "{r}");
    assert!(r.stdout.contains("deterministic=false") && r.last_line().starts_with("PASS"), "{r}");
    // The launcher's pick at head dim 64 on the emulator (which runs sm_90a kernels): v03.
    assert!(r.stdout.contains("version=v03_wgmma"), "{r}");
    // v01 by name (head dim 32 is v01's alone), the deterministic dQ pass.
    let r = verify(&with(&["--head-dim", "32", "--dtype", "f16", "--kernel", "v01_simt", "--deterministic"]));
    assert!(r.code == 0 && r.stdout.contains("version=v01_simt") && r.stdout.contains("deterministic=true"), "{r}");
    assert!(r.last_line().starts_with("PASS"), "{r}");
    let base = ["verify", "attention_backward", "--heads", "2", "--dtype", "bf16", "--backend", "emulator"];
    let refused = |extra: &[&'static str]| -> Vec<&'static str> { base.iter().chain(extra).copied().collect() };
    assert_refused(&refused(&["--varlen", "7:x", "--head-dim", "64"]), &["`7:x` is not a length"]);
    assert_refused(&refused(&["--varlen", "7", "--head-dim", "64", "--seq-q", "7"]), &["remove --seq-q"]);
    assert_refused(&refused(&["--varlen", "7", "--head-dim", "48"]), &["head_dim = 48"]);
    assert_refused(
        &refused(&["--varlen", "7", "--head-dim", "96", "--kernel", "v02_mma"]),
        &["head_dim = 96", "v02_mma has no variable-length backward"],
    );
}
