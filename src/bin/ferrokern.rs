//! `ferrokern`: bench every kernel against its baseline, verify any op on any shape, and show
//! what the build contains (`info`). Exit codes: 0 success, 1 a failed check, 2 bad arguments.

use clap::{Args, Parser, Subcommand, ValueEnum};
use ferrokern::bench::{self, Measurement};
use ferrokern::elementwise::Op;
use ferrokern::gpu_kernels::elementwise::ElementwiseParams;
use ferrokern::gpu_kernels::selftest;
use ferrokern::rows::{RowStrategy, Rows};
use ferrokern::verify::{self, ElementwiseCase, RowCase, RowOp, Values};
use ferrokern::{BackendChoice, Context, DType, KernelDef, info};
use indicatif::{ProgressBar, ProgressStyle};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "ferrokern", version, about = "GPU kernels in Rust: benchmark, verify, inspect")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once per process; boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Every kernel against its baseline on the GPU; without one, the emulator's correctness
    /// sweep and the PTX resource table.
    Bench(BenchArgs),
    /// Run one op on fresh random inputs and compare with the f64 reference.
    Verify(VerifyArgs),
    /// Devices, embedded PTX, and per-kernel resources from ptxas.
    Info {
        /// Add each kernel's SASS instruction mix (nvdisasm).
        #[arg(long)]
        sass: bool,
    },
    /// Assemble the embedded PTX of every arch with ptxas into cubins in DIR. A GPU run with
    /// FERROKERN_CUBIN_DIR=DIR loads them instead of having the driver compile the PTX in
    /// every new process (minutes for the sm_90a module without a warm JIT cache).
    Cubins { dir: std::path::PathBuf },
}

#[derive(Args)]
struct BenchArgs {
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
    /// Write every measurement as JSON.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Write an SVG bar chart of every measurement's ratio to its baseline (GPU only).
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
    /// Only kernels whose op name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Leave a section out of the GPU timing (repeatable), e.g. one whose kernels hung in the
    /// tests: a hung kernel never returns, so the sections after it would never run.
    #[arg(long, value_enum)]
    skip: Vec<Section>,
}

/// The bench's sections, in the order they run.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
enum Section {
    /// The elementwise ops.
    Elementwise,
    /// Reductions, softmax, cross-entropy and the norms.
    Rows,
    Gemm,
    GemmTc,
    PagedDecode,
    Attention,
    AttentionBackward,
}

#[derive(Args)]
struct VerifyArgs {
    /// The op: axpy, scale, add, mul, gelu, silu, swiglu (--len); sum, max, argmax, softmax,
    /// log_softmax, cross_entropy, layernorm, layernorm_backward, rmsnorm, rmsnorm_backward
    /// (--rows, --cols).
    op: String,
    #[arg(long)]
    len: Option<usize>,
    #[arg(long)]
    rows: Option<usize>,
    #[arg(long)]
    cols: Option<usize>,
    #[arg(long)]
    m: Option<usize>,
    #[arg(long)]
    n: Option<usize>,
    #[arg(long)]
    k: Option<usize>,
    #[arg(long)]
    trans_a: bool,
    #[arg(long)]
    trans_b: bool,
    /// gemm: C stored transposed (column-major), `ldc` counting its M rows.
    #[arg(long)]
    trans_c: bool,
    #[arg(long)]
    batch: Option<usize>,
    /// gemm with --dtype bf16|f16: C in the input type instead of f32.
    #[arg(long)]
    out16: bool,
    /// gemm with --dtype bf16|f16: fused epilogue, any of `bias`, `gelu`, `residual`
    /// (comma-separated).
    #[arg(long)]
    epilogue: Option<String>,
    #[arg(long, allow_negative_numbers = true)]
    alpha: Option<f32>,
    #[arg(long, allow_negative_numbers = true)]
    beta: Option<f32>,
    #[arg(long)]
    heads: Option<usize>,
    #[arg(long)]
    kv_heads: Option<usize>,
    #[arg(long)]
    seq_q: Option<usize>,
    #[arg(long)]
    seq_k: Option<usize>,
    #[arg(long)]
    head_dim: Option<usize>,
    #[arg(long)]
    causal: bool,
    #[arg(long)]
    page_size: Option<usize>,
    #[arg(long)]
    context: Option<usize>,
    /// paged_decode: new query tokens per sequence (speculative decoding), 1 to 8.
    #[arg(long)]
    q_len: Option<usize>,
    #[arg(long, default_value = "f32")]
    dtype: String,
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
    /// Seed for the inputs (printed either way, so any run can be repeated).
    #[arg(long)]
    seed: Option<u64>,
    /// Shift every view this many elements from its allocation (misaligned views).
    #[arg(long, default_value_t = 0)]
    offset: usize,
    /// Include zeros, NaN and infinities in the inputs.
    #[arg(long)]
    specials: bool,
    /// Run a deliberately broken self-test kernel instead of the op's own, to show that
    /// `verify` really fails a wrong kernel (hidden: not for users).
    #[arg(long, hide = true)]
    kernel: Option<String>,
    /// Row ops: force the warp-per-row, block-per-row or split (several blocks per row) kernel;
    /// auto picks by shape.
    #[arg(long)]
    strategy: Option<String>,
    /// Values near the dtype's limit (+-1e30 f32/bf16, +-6e4 f16).
    #[arg(long)]
    huge: bool,
    /// attention_backward: the bitwise-reproducible dQ pass instead of f32 atomics.
    #[arg(long)]
    deterministic: bool,
    /// gemm --dtype bf16|f16: split K into this many slices (split-K versions only); default:
    /// as the launcher decides for the device.
    #[arg(long)]
    splits: Option<usize>,
    /// attention, attention_backward: variable-length batch, one `Q:K` (or `L`, both the same) length per sequence,
    /// comma-separated (e.g. `7:9,113,1:40`), packed with cumulative offsets.
    #[arg(long)]
    varlen: Option<String>,
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    match s {
        "f32" => Ok(DType::F32),
        "f16" => Ok(DType::F16),
        "bf16" => Ok(DType::BF16),
        other => Err(format!("unknown dtype `{other}`: use f32, f16 or bf16")),
    }
}

/// `--seed`, or one from the clock (printed in the header line, so a run can be repeated).
fn seed_or_now(seed: Option<u64>) -> u64 {
    seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    })
}

/// `--dtype` of an op that takes 16-bit inputs only (attention, its backward, paged decode).
fn half_dtype(a: &VerifyArgs, op: &str) -> Result<DType, String> {
    match a.dtype.as_str() {
        "bf16" => Ok(DType::BF16),
        "f16" => Ok(DType::F16),
        other => Err(format!("{op} takes --dtype bf16 or f16, not `{other}`")),
    }
}

/// The broken variant `--kernel` names. Only scale f32 has them, so anything else is refused
/// rather than silently running the shipped kernel.
fn selftest_kernel(name: &str, op: Op, dtype: DType) -> Result<&'static KernelDef<ElementwiseParams<f32>>, String> {
    let def = match name {
        "bug_scale_no_tail" => &selftest::BUG_SCALE_NO_TAIL,
        "bug_scale_bf16_math" => &selftest::BUG_SCALE_BF16_MATH,
        other => {
            return Err(format!("unknown --kernel `{other}`: use bug_scale_no_tail or bug_scale_bf16_math"));
        }
    };
    if op != Op::Scale || dtype != DType::F32 {
        return Err(format!(
            "--kernel {name} is a variant of scale over f32; run it as `verify scale --dtype f32`, not {} {}",
            op.name(),
            dtype.name()
        ));
    }
    Ok(def)
}

fn bad_args(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

/// A refused command line: the message [`bad_args`] prints before exit code 2. Any message
/// converts, so `?` refuses with the error of a parser, a check or the context.
struct BadArgs(String);

impl<E: std::fmt::Display> From<E> for BadArgs {
    fn from(e: E) -> Self {
        BadArgs(e.to_string())
    }
}

/// A `verify` step's outcome: on to the next step, or the command line refused.
type ArgsResult<T> = Result<T, BadArgs>;

/// Refuses the command line with `msg`.
fn refuse<T>(msg: impl std::fmt::Display) -> ArgsResult<T> {
    Err(msg.into())
}

/// The shape flags given on the command line, by name.
fn given_flags(a: &VerifyArgs) -> Vec<&'static str> {
    [
        ("--len", a.len.is_some()),
        ("--rows", a.rows.is_some()),
        ("--cols", a.cols.is_some()),
        ("--m", a.m.is_some()),
        ("--n", a.n.is_some()),
        ("--k", a.k.is_some()),
        ("--trans-a", a.trans_a),
        ("--trans-b", a.trans_b),
        ("--trans-c", a.trans_c),
        ("--batch", a.batch.is_some()),
        ("--out16", a.out16),
        ("--epilogue", a.epilogue.is_some()),
        ("--alpha", a.alpha.is_some()),
        ("--beta", a.beta.is_some()),
        ("--heads", a.heads.is_some()),
        ("--kv-heads", a.kv_heads.is_some()),
        ("--seq-q", a.seq_q.is_some()),
        ("--seq-k", a.seq_k.is_some()),
        ("--head-dim", a.head_dim.is_some()),
        ("--causal", a.causal),
        ("--page-size", a.page_size.is_some()),
        ("--context", a.context.is_some()),
        ("--q-len", a.q_len.is_some()),
        ("--strategy", a.strategy.is_some()),
        ("--kernel", a.kernel.is_some()),
        ("--deterministic", a.deterministic),
        ("--varlen", a.varlen.is_some()),
        ("--splits", a.splits.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, set)| set.then_some(f))
    .collect()
}

fn run_verify(a: VerifyArgs) -> ArgsResult<ExitCode> {
    if a.op == "gemm" {
        return run_verify_gemm(a);
    }
    if a.op == "attention" {
        return run_verify_attention(a);
    }
    if a.op == "attention_backward" {
        return run_verify_attention_backward(a);
    }
    if a.op == "paged_decode" {
        return run_verify_paged(a);
    }
    let elementwise = Op::from_name(&a.op);
    let row_op = RowOp::from_name(&a.op);
    if elementwise.is_none() && row_op.is_none() {
        if let Some((_, issue)) = verify::PLANNED.iter().find(|(n, _)| *n == a.op) {
            return refuse(format!(
                "op `{}` is not implemented yet ({issue}); available: {}",
                a.op,
                verify::AVAILABLE.join(", ")
            ));
        }
        return refuse(format!("unknown op `{}`; available: {}", a.op, verify::AVAILABLE.join(", ")));
    }
    let dtype = parse_dtype(&a.dtype)?;
    let (allowed, family): (&[&str], &str) = match elementwise {
        Some(_) => (&["--len", "--kernel"], "elementwise and takes only --len"),
        None => (&["--rows", "--cols", "--strategy"], "a row op and takes --rows and --cols (and --strategy)"),
    };
    let stray: Vec<&str> = given_flags(&a).into_iter().filter(|f| !allowed.contains(f)).collect();
    if !stray.is_empty() {
        return refuse(format!("`{}` is {family}; remove {}", a.op, stray.join(", ")));
    }
    if a.specials && a.huge {
        return refuse("choose one of --specials and --huge");
    }
    let values = if a.specials {
        Values::WithSpecials
    } else if a.huge {
        Values::Huge
    } else {
        Values::Finite
    };
    let seed = seed_or_now(a.seed);
    let result = if let Some(op) = elementwise {
        let Some(len) = a.len else {
            return refuse(format!("`{}` needs --len N (the number of elements)", a.op));
        };
        let kernel = a.kernel.as_deref().map(|k| selftest_kernel(k, op, dtype)).transpose()?;
        let ctx = ferrokern::context(a.backend)?;
        println!(
            "verify {} len={len} dtype={} backend={} seed={seed} offset={}",
            op.name(),
            dtype.name(),
            ctx.backend(),
            a.offset
        );
        if let Some(def) = kernel {
            println!("kernel {} (a deliberately broken self-test variant)", def.name);
        }
        let case = ElementwiseCase { op, dtype, len, seed, offset: a.offset, values };
        match kernel {
            Some(def) => verify::elementwise_with::<f32>(&ctx, &case, def),
            None => verify::elementwise(&ctx, &case),
        }
    } else {
        let op = row_op.expect("checked above");
        let (Some(rows), Some(cols)) = (a.rows, a.cols) else {
            return refuse(format!("`{}` needs --rows R and --cols C", a.op));
        };
        let norm = op.finite_only();
        if norm && values != Values::Finite {
            return refuse(format!("`{}` is checked on finite inputs; remove --specials / --huge", a.op));
        }
        let strategy = match a.strategy.as_deref() {
            None | Some("auto") => None,
            Some("warp") => Some(RowStrategy::Warp),
            Some("block") => Some(RowStrategy::Block),
            Some("shared") => Some(RowStrategy::Shared),
            Some("split") => Some(RowStrategy::Split),
            Some(other) => {
                return refuse(format!("unknown strategy `{other}`: use auto, warp, block, shared or split"));
            }
        };
        let ctx = ferrokern::context(a.backend)?;
        let shape = Rows::new(rows, cols);
        let chosen = strategy.unwrap_or(op.auto_strategy(&ctx, dtype, shape));
        println!(
            "verify {} rows={rows} cols={cols} dtype={} backend={} strategy={chosen:?} seed={seed} offset={}",
            op.name(),
            dtype.name(),
            ctx.backend(),
            a.offset
        );
        verify::rows(&ctx, &RowCase { op, dtype, shape, seed, offset: a.offset, values, strategy })
    };
    report_exit(result)
}

/// Today's date (UTC) as YYYY-MM-DD, from the system clock.
fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}")
}

fn print_ptx_table() -> bool {
    let Some(ptxas) = info::find_tool("ptxas") else {
        println!("PTX resources: ptxas not found (run scripts/setup.sh, or put CUDA's ptxas on PATH)");
        return true;
    };
    let mut ok = true;
    println!("{:<6} {:<22} {:>5} {:>9} {:>7} {:>7}", "arch", "kernel", "regs", "static smem B", "spill B", "stack B");
    for (arch, ptx) in ferrokern::PTX {
        match info::ptxas(&ptxas, arch, ptx) {
            Ok((rows, cubin)) => {
                let _ = std::fs::remove_file(cubin);
                for r in rows {
                    println!(
                        "{:<6} {:<22} {:>5} {:>13} {:>7} {:>7}",
                        r.arch,
                        r.kernel,
                        r.registers,
                        r.shared_bytes,
                        r.spill_store_bytes + r.spill_load_bytes,
                        r.stack_bytes
                    );
                }
            }
            Err(e) => {
                println!("{e}");
                ok = false;
            }
        }
    }
    ok
}

/// `info --sass`: each f32 GEMM version's main loop (its loop with the most FFMA) as laid out
/// in `arch`'s SASS, beside its 128-bit shared loads: what the issue's offline gate asks of the
/// large-shape version (tests/ptxas.rs checks it).
fn print_gemm_loops(
    arch: &str,
    text: &str,
    mix: &std::collections::BTreeMap<String, std::collections::BTreeMap<&str, u32>>,
) {
    let loops = info::sass_loops(text);
    println!(
        "\nf32 GEMM main loops, {arch} (the loop with the most FFMA; `gemm` runs {} on large C):",
        ferrokern::gemm::LARGE_VERSION
    );
    println!("{:<20} {:>8} {:>13} {:>6} {:>8}", "version", "FFMA", "instructions", "FFMA%", "LDS.128");
    for v in ferrokern::gemm::VERSIONS {
        let lds = mix.get(v.kernel.name).and_then(|m| m.get("LDS.128")).copied().unwrap_or(0);
        match info::busiest_loop(&loops, v.kernel.name) {
            Some(l) => println!(
                "{:<20} {:>8} {:>13} {:>5.0}% {:>8}",
                v.name,
                l.ffma,
                l.instructions,
                100.0 * l.ffma as f64 / l.instructions.max(1) as f64,
                lds
            ),
            None => println!("{:<20} {:>8} {:>13} {:>6} {:>8}", v.name, "-", "no loop", "-", lds),
        }
    }
}

fn run_info(sass: bool) -> ExitCode {
    match ferrokern::context(BackendChoice::Gpu) {
        Ok(ctx) => {
            let d = ctx.device_info().expect("GPU context");
            println!(
                "device 0: {} (sm_{}{}), {} SMs, {:.0} GB, SM clock {} MHz, memory clock {} MHz x {} bit, driver CUDA {}.{}; loaded PTX {} ({})",
                d.name,
                d.major,
                d.minor,
                d.sm_count,
                d.total_memory as f64 / 1e9,
                d.clock_khz / 1000,
                d.memory_clock_khz / 1000,
                d.memory_bus_bits,
                d.driver_version / 1000,
                (d.driver_version % 1000) / 10,
                d.ptx_arch,
                module_source(d)
            );
        }
        Err(e) => println!("devices: none usable ({e})"),
    }
    for (arch, ptx) in ferrokern::PTX {
        let version = ptx.lines().find(|l| l.starts_with(".version")).unwrap_or(".version ?");
        println!(
            "embedded PTX {arch}: {} bytes, {}, {} entry points",
            ptx.len(),
            version,
            ptx.matches(".entry").count()
        );
    }
    let mut ok = print_ptx_table();
    if sass {
        match (info::find_tool("ptxas"), info::find_tool("nvdisasm")) {
            (Some(ptxas), Some(nvdisasm)) => {
                for (arch, ptx) in ferrokern::PTX {
                    let Ok((_, cubin)) = info::ptxas(&ptxas, arch, ptx) else {
                        continue;
                    };
                    match info::disassemble(&nvdisasm, &cubin) {
                        Ok(text) => {
                            let mix = info::count_sass(&text);
                            println!("\nSASS instruction mix, {arch}:");
                            print!("{:<22}", "kernel");
                            for c in info::SASS_CLASSES {
                                print!(" {c:>8}");
                            }
                            println!();
                            for (k, m) in &mix {
                                print!("{k:<22}");
                                for c in info::SASS_CLASSES {
                                    print!(" {:>8}", m.get(c).copied().unwrap_or(0));
                                }
                                println!();
                            }
                            print_gemm_loops(arch, &text, &mix);
                        }
                        Err(e) => {
                            println!("{e}");
                            ok = false;
                        }
                    }
                    let _ = std::fs::remove_file(cubin);
                }
            }
            _ => println!("--sass: ptxas and nvdisasm are needed (run scripts/setup.sh)"),
        }
    }
    if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// The correctness sweep the bench runs where it cannot time anything: every op and dtype at
/// odd and larger lengths, aligned and misaligned, on the emulator.
fn emulator_sweep(ctx: &Context, filter: Option<&str>) -> bool {
    const LENS: &[usize] = &[1, 7, 33, 1023, 4097, 65_537];
    println!("{:<8} {:<5} {:>7} {:>6} {:>11} {:>11}  result", "op", "dtype", "len", "offset", "max_rel", "elem/s");
    let mut all_ok = true;
    let (mut count, mut failed) = (0, 0);
    for op in Op::ALL.into_iter().filter(|o| filter.is_none_or(|f| o.name().contains(f))) {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            for &len in LENS {
                for offset in [0, 1] {
                    let case = ElementwiseCase {
                        op,
                        dtype,
                        len,
                        seed: 1000 + len as u64,
                        offset,
                        values: Values::WithSpecials,
                    };
                    let t = Instant::now();
                    let r = verify::elementwise(ctx, &case);
                    let rate = len as f64 / t.elapsed().as_secs_f64();
                    count += 1;
                    match r {
                        Ok(rep) => {
                            all_ok &= rep.passed();
                            failed += !rep.passed() as usize;
                            if len >= 4097 || !rep.passed() {
                                println!(
                                    "{:<8} {:<5} {:>7} {:>6} {:>11.2e} {:>11.2e}  {}",
                                    op.name(),
                                    dtype.name(),
                                    len,
                                    offset,
                                    rep.max_rel_err,
                                    rate,
                                    if rep.passed() { "PASS".to_string() } else { rep.to_string() }
                                );
                            }
                        }
                        Err(e) => {
                            all_ok = false;
                            failed += 1;
                            println!("{:<8} {:<5} {:>7} {:>6}  ERROR {e}", op.name(), dtype.name(), len, offset);
                        }
                    }
                }
            }
        }
    }
    println!("\n{:<18} {:<5} {:>12} {:>11}  result", "row op", "dtype", "shape", "max_rel");
    for op in RowOp::ALL.into_iter().filter(|o| filter.is_none_or(|f| o.name().contains(f))) {
        let norm = op.finite_only();
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            for (rows, cols) in [(5, 1), (33, 300), (4, 4097), (2, 9001)] {
                let values = if norm { Values::Finite } else { Values::WithSpecials };
                let case =
                    RowCase { op, dtype, shape: Rows::new(rows, cols), seed: 77, offset: 0, values, strategy: None };
                count += 1;
                match verify::rows(ctx, &case) {
                    Ok(rep) => {
                        all_ok &= rep.passed();
                        failed += !rep.passed() as usize;
                        if cols == 9001 || !rep.passed() {
                            println!(
                                "{:<18} {:<5} {:>12} {:>11.2e}  {}",
                                op.name(),
                                dtype.name(),
                                format!("{rows}x{cols}"),
                                rep.max_rel_err,
                                if rep.passed() { "PASS".to_string() } else { rep.to_string() }
                            );
                        }
                    }
                    Err(e) => {
                        all_ok = false;
                        failed += 1;
                        println!("{:<18} {:<5} {:>12}  ERROR {e}", op.name(), dtype.name(), format!("{rows}x{cols}"));
                    }
                }
            }
        }
    }
    println!(
        "emulator sweep: {} passed, {failed} failed (rows shown: the largest shapes and any failure)",
        count - failed
    );
    all_ok
}

fn print_measurements(rows: &[Measurement]) {
    println!(
        "{:<12} {:<18} {:<6} {:<13} {:<5} {:>10} {:>9} {:>10} {:>7}",
        "family", "op", "ver", "shape", "dtype", "median ms", "GB/s", "copy GB/s", "ratio"
    );
    for m in rows {
        println!(
            "{:<12} {:<18} {:<6} {:<13} {:<5} {:>10.4} {:>9.1} {:>10.1} {:>7.3}",
            m.family, m.op, m.version, m.shape, m.dtype, m.median_ms, m.gbps, m.baseline_gbps, m.ratio
        );
    }
}

fn run_bench(a: BenchArgs) -> ExitCode {
    let ctx = match ferrokern::context(a.backend) {
        Ok(c) => c,
        Err(e) => return bad_args(e),
    };
    let filter = a.filter.as_deref();
    let Some(dev) = ctx.device_info().cloned() else {
        let why = ferrokern::context(BackendChoice::Gpu)
            .err()
            .map_or_else(|| "the emulator backend was chosen".to_string(), |e| e.to_string());
        println!("No GPU: {why}");
        println!(
            "Nothing can be timed without a GPU. Running the correctness sweep on the emulator, then the PTX resource table.\n"
        );
        if !a.skip.is_empty() {
            println!("--skip leaves sections out of the GPU timing only; the emulator sweep covers every section.\n");
        }
        let ok = emulator_sweep(&ctx, filter)
            & gemm_emulator_sweep(&ctx, filter)
            & attention_emulator_sweep(&ctx, filter)
            & attention_backward_emulator_sweep(&ctx, filter)
            & paged_emulator_sweep(&ctx, filter);
        println!();
        let ptx_ok = print_ptx_table();
        if let Some(path) = &a.plot {
            println!("--plot: nothing was timed without a GPU, so {} was not written", path.display());
        }
        return if ok && ptx_ok { ExitCode::SUCCESS } else { ExitCode::from(1) };
    };
    println!(
        "ferrokern bench {}: {} (sm_{}{}, {} SMs, SM clock {} MHz, memory {} MHz x {} bit), driver CUDA {}.{}, PTX {} ({})",
        today(),
        dev.name,
        dev.major,
        dev.minor,
        dev.sm_count,
        dev.clock_khz / 1000,
        dev.memory_clock_khz / 1000,
        dev.memory_bus_bits,
        dev.driver_version / 1000,
        (dev.driver_version % 1000) / 10,
        dev.ptx_arch,
        module_source(&dev)
    );
    println!(
        "times: median of {} runs after {} warm-up, CUDA events, L2 flushed before each run\n",
        bench::REPS,
        bench::WARMUP
    );
    let mut rows = Vec::new();
    let mut ok = true;
    let runs = |s: Section| {
        let run = !a.skip.contains(&s);
        if !run {
            println!(
                "{}: skipped (--skip)",
                s.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string())
            );
        }
        run
    };
    let ops: Vec<Op> = if runs(Section::Elementwise) {
        Op::ALL.into_iter().filter(|o| filter.is_none_or(|f| o.name().contains(f))).collect()
    } else {
        Vec::new()
    };
    let row_ops: Vec<RowOp> = if runs(Section::Rows) {
        RowOp::ALL.into_iter().filter(|o| filter.is_none_or(|f| o.name().contains(f))).collect()
    } else {
        Vec::new()
    };
    const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
    let total = ops.len() * DTYPES.len() * bench::ELEMENTWISE_LENS.len()
        + row_ops.iter().map(|&o| bench::row_shapes(o).len()).sum::<usize>() * DTYPES.len();
    // On stderr, so stdout stays the table; indicatif draws nothing when stderr is not a
    // terminal, so logs of a bundle run get no control characters.
    let progress = ProgressBar::new(total as u64).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} measurements, {elapsed} {msg}").expect("a valid template"),
    );
    for op in ops {
        for dtype in DTYPES {
            // Check before timing: a fast wrong kernel is not a result.
            let case =
                ElementwiseCase { op, dtype, len: 1 << 20 | 3, seed: 5, offset: 0, values: Values::WithSpecials };
            progress.set_message(format!("checking {} {}", op.name(), dtype.name()));
            match verify::elementwise(&ctx, &case) {
                Ok(r) if r.passed() => {}
                Ok(r) => {
                    progress.suspend(|| println!("{} {}: {r}", op.name(), dtype.name()));
                    ok = false;
                    progress.inc(bench::ELEMENTWISE_LENS.len() as u64);
                    continue;
                }
                Err(e) => {
                    progress.abandon();
                    println!("{} {}: {e}", op.name(), dtype.name());
                    return ExitCode::from(1);
                }
            }
            for &n in bench::ELEMENTWISE_LENS {
                progress.set_message(format!("measuring {} {} n={n}", op.name(), dtype.name()));
                match bench::elementwise(&ctx, op, dtype, n) {
                    Ok(m) => rows.push(m),
                    Err(e) => {
                        progress.suspend(|| println!("{} {} n={n}: {e}", op.name(), dtype.name()));
                        ok = false;
                    }
                }
                progress.inc(1);
            }
        }
    }
    for op in row_ops {
        for dtype in DTYPES {
            let shapes = bench::row_shapes(op);
            // Check both strategies before timing.
            progress.set_message(format!("checking {} {}", op.name(), dtype.name()));
            let mut checked = true;
            for shape in [Rows::new(33, 300), Rows::new(9, 9001)] {
                let values = if op.finite_only() { Values::Finite } else { Values::WithSpecials };
                let case = RowCase { op, dtype, shape, seed: 5, offset: 0, values, strategy: None };
                match verify::rows(&ctx, &case) {
                    Ok(r) if r.passed() => {}
                    Ok(r) => {
                        progress.suspend(|| println!("{} {} {shape:?}: {r}", op.name(), dtype.name()));
                        checked = false;
                    }
                    Err(e) => {
                        progress.abandon();
                        println!("{} {} {shape:?}: {e}", op.name(), dtype.name());
                        return ExitCode::from(1);
                    }
                }
            }
            if !checked {
                ok = false;
                progress.inc(shapes.len() as u64);
                continue;
            }
            for shape in shapes {
                progress.set_message(format!("measuring {} {} {}x{}", op.name(), dtype.name(), shape.rows, shape.cols));
                match bench::rows(&ctx, op, dtype, shape) {
                    Ok(m) => rows.push(m),
                    Err(e) => {
                        progress.suspend(|| println!("{} {} {shape:?}: {e}", op.name(), dtype.name()));
                        ok = false;
                    }
                }
                progress.inc(1);
            }
        }
    }
    progress.finish_and_clear();
    print_measurements(&rows);
    // The JSON is rewritten after every section, so a run cut short (a timeout on a lent GPU)
    // still leaves what it measured; "complete" says whether every section ran.
    let write_json = |gemm: &[bench::GemmMeasurement],
                      gemm_tc: &[bench::GemmMeasurement],
                      paged: &[Measurement],
                      attention: &[ferrokern::attention::AttentionMeasurement],
                      attention_backward: &[ferrokern::attention::AttentionMeasurement],
                      complete: bool|
     -> bool {
        let Some(path) = &a.json else { return true };
        let doc = serde_json::json!({
            "date": today(),
            "gpu": dev.name,
            "compute_capability": format!("{}.{}", dev.major, dev.minor),
            "sm_count": dev.sm_count,
            "sm_clock_mhz": dev.clock_khz / 1000,
            "memory_clock_mhz": dev.memory_clock_khz / 1000,
            "driver_cuda_version": format!("{}.{}", dev.driver_version / 1000, (dev.driver_version % 1000) / 10),
            "ptx_arch": dev.ptx_arch,
            "prebuilt_cubin": dev.prebuilt_cubin,
            // The program by its name, not its path (the JSON is committed under results/).
            "command": std::env::args()
                .enumerate()
                .map(|(i, a)| if i == 0 { "ferrokern".to_string() } else { a })
                .collect::<Vec<_>>()
                .join(" "),
            "reps": bench::REPS,
            "complete": complete,
            "skipped": a.skip,
            "measurements": rows,
            "gemm": gemm,
            "gemm_tc": gemm_tc,
            "attention": attention,
            "attention_backward": attention_backward,
            "paged_decode": paged,
        });
        match std::fs::write(path, serde_json::to_string_pretty(&doc).expect("serializable")) {
            Ok(()) => true,
            Err(e) => {
                println!("writing {}: {e}", path.display());
                false
            }
        }
    };
    ok &= write_json(&[], &[], &[], &[], &[], false);
    let gemm_rows = if gemm_selected(filter) && runs(Section::Gemm) { gemm_bench(&ctx, &mut ok) } else { Vec::new() };
    ok &= write_json(&gemm_rows, &[], &[], &[], &[], false);
    let gemm_tc_rows =
        if gemm_selected(filter) && runs(Section::GemmTc) { gemm_tc_bench(&ctx, &mut ok) } else { Vec::new() };
    ok &= write_json(&gemm_rows, &gemm_tc_rows, &[], &[], &[], false);
    let paged_rows = if filter.is_none_or(|f| "paged_decode".contains(f)) && runs(Section::PagedDecode) {
        paged_bench(&ctx, &mut ok)
    } else {
        Vec::new()
    };
    ok &= write_json(&gemm_rows, &gemm_tc_rows, &paged_rows, &[], &[], false);
    let attention_rows = if filter.is_none_or(|f| "attention".contains(f)) && runs(Section::Attention) {
        attention_bench(&ctx, &mut ok)
    } else {
        Vec::new()
    };
    ok &= write_json(&gemm_rows, &gemm_tc_rows, &paged_rows, &attention_rows, &[], false);
    let attention_backward_rows =
        if filter.is_none_or(|f| "attention_backward".contains(f)) && runs(Section::AttentionBackward) {
            attention_backward_bench(&ctx, &mut ok)
        } else {
            Vec::new()
        };
    ok &= write_json(&gemm_rows, &gemm_tc_rows, &paged_rows, &attention_rows, &attention_backward_rows, true);
    if let Some(path) = a.plot {
        let title =
            format!("ferrokern bench {}: {} (sm_{}{}), ratio to baseline", today(), dev.name, dev.major, dev.minor);
        match std::fs::write(&path, bench::plot_svg(&title, &rows)) {
            Ok(()) => println!("plot: {}", path.display()),
            Err(e) => {
                println!("writing {}: {e}", path.display());
                ok = false;
            }
        }
    }
    if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Bench(a) => run_bench(a),
        Cmd::Verify(a) => run_verify(a).unwrap_or_else(|BadArgs(msg)| bad_args(msg)),
        Cmd::Info { sass } => run_info(sass),
        Cmd::Cubins { dir } => run_cubins(&dir),
    }
}

/// How the loaded arch's code was made, for the device lines of `info` and `bench`.
fn module_source(d: &ferrokern::DeviceInfo) -> &'static str {
    if d.prebuilt_cubin { "prebuilt cubin" } else { "compiled by the driver" }
}

/// `ferrokern cubins DIR`: ptxas over every embedded arch, one thread each, each cubin named
/// by [`ferrokern::cubin_file_name`] so that only this build's PTX ever loads it.
fn run_cubins(dir: &std::path::Path) -> ExitCode {
    let Some(ptxas) = info::find_tool("ptxas") else {
        println!("cubins: ptxas not found (run scripts/setup.sh, or put CUDA's ptxas on PATH)");
        return ExitCode::from(1);
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        println!("cubins: cannot create {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    let ptxas = &ptxas;
    let results: Vec<Result<std::path::PathBuf, String>> = std::thread::scope(|s| {
        let jobs: Vec<_> = ferrokern::PTX
            .iter()
            .map(|&(arch, ptx)| {
                s.spawn(move || {
                    let (_, cubin) = info::ptxas(ptxas, arch, ptx)?;
                    let dest = dir.join(ferrokern::cubin_file_name(arch, ptx));
                    let copied = std::fs::copy(&cubin, &dest);
                    let _ = std::fs::remove_file(&cubin);
                    copied.map_err(|e| format!("copying the {arch} cubin to {}: {e}", dest.display()))?;
                    Ok(dest)
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap_or_else(|_| Err("a ptxas thread panicked".into()))).collect()
    });
    let mut ok = true;
    for r in results {
        match r {
            Ok(path) => println!("wrote {}", path.display()),
            Err(e) => {
                println!("{e}");
                ok = false;
            }
        }
    }
    if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// Whether `--filter` selects the GEMM family.
fn gemm_selected(filter: Option<&str>) -> bool {
    filter.is_none_or(|f| f.contains("gemm") || "gemm".contains(f))
}

/// `verify gemm`: one f32 GEMM on fresh random inputs, with the shipped version or, with the
/// hidden `--kernel NAME`, any version of the ladder (or the broken `bug_no_edge_guard`).
fn run_verify_gemm(a: VerifyArgs) -> ArgsResult<ExitCode> {
    use ferrokern::gemm::{self, Gemm, Trans};
    let allowed = [
        "--m",
        "--n",
        "--k",
        "--trans-a",
        "--trans-b",
        "--trans-c",
        "--batch",
        "--out16",
        "--epilogue",
        "--alpha",
        "--beta",
        "--kernel",
        "--splits",
    ];
    let stray: Vec<&str> = given_flags(&a).into_iter().filter(|f| !allowed.contains(f)).collect();
    if !stray.is_empty() {
        return refuse(format!(
            "`gemm` takes --m, --n, --k (and --trans-a, --trans-b, --trans-c, --batch, --alpha, --beta; with --dtype bf16|f16 also --out16, --epilogue, --splits); remove {}",
            stray.join(", ")
        ));
    }
    let tensor_cores = match a.dtype.as_str() {
        "f32" => false,
        "bf16" | "f16" => true,
        other => {
            return refuse(format!("unknown dtype `{other}` for gemm: f32 (CUDA cores) or bf16/f16 (tensor cores)"));
        }
    };
    if a.specials || a.huge {
        return refuse("gemm is checked on finite inputs; remove --specials / --huge");
    }
    let (Some(m), Some(n), Some(k)) = (a.m, a.n, a.k) else {
        return refuse("`gemm` needs --m M --n N --k K (C is M x N, the inner dimension K)");
    };
    if tensor_cores {
        return run_verify_gemm_tc(&a, m, n, k);
    }
    if a.out16 || a.epilogue.is_some() || a.splits.is_some() {
        return refuse("--out16, --epilogue and --splits apply to the tensor-core gemm: add --dtype bf16 or f16");
    }
    let version = match a.kernel.as_deref() {
        None => None,
        Some(name) => match gemm::version(name) {
            Some(v) => Some(v),
            None => {
                let names: Vec<&str> = gemm::VERSIONS.iter().map(|v| v.name).collect();
                return refuse(format!(
                    "unknown gemm version `{name}`: use one of {}, or bug_no_edge_guard",
                    names.join(", ")
                ));
            }
        },
    };
    let t = |b: bool| if b { Trans::T } else { Trans::N };
    let g = Gemm::new(m, n, k)
        .transposed(t(a.trans_a), t(a.trans_b))
        .with_trans_c(t(a.trans_c))
        .batched(a.batch.unwrap_or(1))
        .scaled(a.alpha.unwrap_or(1.0), a.beta.unwrap_or(0.0));
    let seed = seed_or_now(a.seed);
    let ctx = ferrokern::context(a.backend)?;
    // Without --kernel, what `gemm()` runs: its plan's version, on C or on C^T.
    let (name, how) = match version {
        Some(v) => (v.name, "as given"),
        None => {
            let p = gemm::plan(&g);
            (p.version.name, if p.swapped { "as C^T = op(B)^T op(A)^T" } else { "as given" })
        }
    };
    println!(
        "verify gemm m={m} n={n} k={k} trans_a={:?} trans_b={:?} trans_c={:?} batch={} alpha={} beta={} dtype=f32 backend={} version={name} ({how}) seed={seed} offset={}",
        g.trans_a,
        g.trans_b,
        g.trans_c,
        g.batch,
        g.alpha,
        g.beta,
        ctx.backend(),
        a.offset
    );
    let case = verify::GemmCase { gemm: g, seed, offset: a.offset };
    report_exit(match version {
        Some(v) => verify::gemm_with(&ctx, &case, v),
        None => verify::gemm(&ctx, &case),
    })
}

/// `verify gemm --dtype bf16|f16`: the tensor-core path (any layout, f32 or 16-bit C, an
/// optional fused epilogue).
fn run_verify_gemm_tc(a: &VerifyArgs, m: usize, n: usize, k: usize) -> ArgsResult<ExitCode> {
    use ferrokern::gemm::{Gemm, Trans};
    use ferrokern::gemm_tc;
    use half::{bf16, f16};
    if a.batch.is_some_and(|b| b != 1) {
        return refuse("the tensor-core gemm runs one matrix; remove --batch, or use --dtype f32");
    }
    let mut ep = verify::EpilogueSpec::default();
    for part in a.epilogue.as_deref().unwrap_or("").split(',').filter(|p| !p.is_empty()) {
        match part.trim() {
            "bias" => ep.bias = true,
            "gelu" => ep.gelu = true,
            "residual" => ep.residual = true,
            other => {
                return refuse(format!("unknown epilogue part `{other}`: use bias, gelu, residual (comma-separated)"));
            }
        }
    }
    let t = |b: bool| if b { Trans::T } else { Trans::N };
    let g = Gemm::new(m, n, k)
        .transposed(t(a.trans_a), t(a.trans_b))
        .with_trans_c(t(a.trans_c))
        .scaled(a.alpha.unwrap_or(1.0), a.beta.unwrap_or(0.0));
    let ctx = ferrokern::context(a.backend)?;
    // The launcher runs C stored transposed as C^T = op(B)^T op(A)^T: the defaults are for that.
    let runs = if g.trans_c.is_t() { g.swapped() } else { g };
    // The inputs start `offset` elements into 256-byte aligned buffers.
    let version = kernel_version("tensor-core gemm", a.kernel.as_deref(), gemm_tc::VERSIONS, |v| v.name, || None)?
        .unwrap_or_else(|| gemm_tc::default_version(&ctx, &runs, 2 * a.offset, 2 * a.offset));
    let seed = seed_or_now(a.seed);
    let sms = gemm_tc::sm_count(&ctx);
    println!(
        "verify gemm m={m} n={n} k={k} trans_a={:?} trans_b={:?} trans_c={:?} alpha={} beta={} dtype={} out={} epilogue={ep:?} backend={} version={} splits={} seed={seed} offset={}",
        g.trans_a,
        g.trans_b,
        g.trans_c,
        g.alpha,
        g.beta,
        a.dtype,
        if a.out16 { a.dtype.as_str() } else { "f32" },
        ctx.backend(),
        version.name,
        a.splits.map_or_else(|| format!("{} (auto)", gemm_tc::split_k(version.config, &runs, sms)), |s| s.to_string()),
        a.offset
    );
    let case = verify::GemmCase { gemm: g, seed, offset: a.offset };
    let plan = a.splits.map(|splits| gemm_tc::TcPlan { splits, blocks: sms });
    let result = match (a.dtype.as_str(), a.out16) {
        ("bf16", false) => verify::gemm_tc_planned_with::<bf16, f32>(&ctx, &case, ep, version, plan),
        ("bf16", true) => verify::gemm_tc_planned_with::<bf16, bf16>(&ctx, &case, ep, version, plan),
        (_, false) => verify::gemm_tc_planned_with::<f16, f32>(&ctx, &case, ep, version, plan),
        (_, true) => verify::gemm_tc_planned_with::<f16, f16>(&ctx, &case, ep, version, plan),
    };
    report_exit(result)
}

/// `verify attention`: FlashAttention's rule against the f64 reference, with the version the
/// launcher picks for the shape or, with the hidden `--kernel NAME`, any version of the ladder.
fn run_verify_attention(a: VerifyArgs) -> ArgsResult<ExitCode> {
    use ferrokern::attention::{self as att, AttentionCase, check_with};
    if a.varlen.is_some() {
        return run_verify_attention_varlen(a);
    }
    let DenseArgs { dtype, shape, seed } = dense_args(&a, "attention", &[])?;
    let head_dim = shape.head_dim;
    let ctx = ferrokern::context(a.backend)?;
    // The check's buffers are fresh allocations: 16-byte aligned.
    let version = kernel_version(
        "attention",
        a.kernel.as_deref(),
        att::VERSIONS,
        |v| v.name,
        || att::default_version(&ctx, head_dim, true),
    )?;
    let case = AttentionCase { dtype, shape, causal: a.causal, seed };
    let Some(version) = version else {
        // No version runs the call: the launcher's refusal, with no header naming none.
        return report_exit(check_with(&ctx, &case, None));
    };
    println!(
        "verify attention batch={} heads={} kv_heads={} seq_q={} seq_k={} head_dim={} causal={} dtype={} backend={} version={} seed={seed}",
        shape.batch,
        shape.heads,
        shape.kv_heads,
        shape.seq_q,
        shape.seq_k,
        shape.head_dim,
        a.causal,
        dtype.name(),
        ctx.backend(),
        version.name
    );
    report_exit(check_with(&ctx, &case, Some(version)))
}

/// The version `--kernel NAME` names among `versions` (`what`: the op, for the refusal), or
/// `default()` without the flag.
fn kernel_version<V>(
    what: &str,
    kernel: Option<&str>,
    versions: &'static [V],
    name: impl Fn(&V) -> &'static str,
    default: impl FnOnce() -> Option<&'static V>,
) -> Result<Option<&'static V>, String> {
    let Some(wanted) = kernel else { return Ok(default()) };
    versions.iter().find(|v| name(v) == wanted).map(Some).ok_or_else(|| {
        let names: Vec<&str> = versions.iter().map(&name).collect();
        format!("unknown {what} version `{wanted}`: use one of {}", names.join(", "))
    })
}

/// `verify attention --varlen 7:9,113,1:40`: a variable-length batch (one `Q:K` or `L` per
/// sequence), packed with cumulative offsets, each sequence checked against the dense
/// reference with FlashAttention's rule; the version the launcher picks or, with the hidden
/// `--kernel NAME`, any version with variable-length kernels.
fn run_verify_attention_varlen(a: VerifyArgs) -> ArgsResult<ExitCode> {
    use ferrokern::attention::{VarlenCase, check_varlen_with, default_varlen_version};
    let VarlenArgs { lens, shown, dtype, heads, kv_heads, head_dim, seed } = varlen_args(&a, "attention", &[])?;
    let ctx = ferrokern::context(a.backend)?;
    let version = kernel_version(
        "attention",
        a.kernel.as_deref(),
        ferrokern::attention::VERSIONS,
        |v| v.name,
        || default_varlen_version(&ctx, head_dim, true),
    )?;
    let case = VarlenCase { dtype, heads, kv_heads, head_dim, lens, causal: a.causal, seed };
    let Some(version) = version else {
        return report_exit(check_varlen_with(&ctx, &case, None));
    };
    println!(
        "verify attention varlen={shown} heads={heads} kv_heads={kv_heads} head_dim={head_dim} causal={} dtype={} backend={} version={} seed={seed}",
        a.causal,
        dtype.name(),
        ctx.backend(),
        version.name
    );
    report_exit(check_varlen_with(&ctx, &case, Some(version)))
}

/// The flags `verify attention` and `verify attention_backward` share (a dense batch).
struct DenseArgs {
    dtype: DType,
    shape: ferrokern::attention::AttentionShape,
    seed: u64,
}

/// Parses and checks the shared dense-batch flags of `verify op`; `extra` are the op's own
/// optional flags (shown in its usage; `--kernel` is accepted and hidden).
fn dense_args(a: &VerifyArgs, op: &str, extra: &[&str]) -> Result<DenseArgs, String> {
    let shared = ["--batch", "--heads", "--kv-heads", "--seq-q", "--seq-k", "--head-dim", "--causal", "--kernel"];
    let stray: Vec<&str> = given_flags(a).into_iter().filter(|f| !shared.contains(f) && !extra.contains(f)).collect();
    if !stray.is_empty() {
        let optional: String = extra.iter().map(|f| format!(" [{f}]")).collect();
        return Err(format!(
            "`{op}` takes --batch --heads --kv-heads --seq-q --seq-k --head-dim [--causal]{optional} (or --varlen LENS --heads --kv-heads --head-dim [--causal]{optional}); remove {}",
            stray.join(", ")
        ));
    }
    let dtype = finite_half_inputs(a, op)?;
    let (Some(heads), Some(seq_q), Some(head_dim)) = (a.heads, a.seq_q, a.head_dim) else {
        return Err(format!(
            "`{op}` needs --heads H --seq-q SQ --head-dim D (and --batch, --kv-heads, --seq-k default to 1, H, SQ)"
        ));
    };
    let shape = ferrokern::attention::AttentionShape {
        batch: a.batch.unwrap_or(1),
        heads,
        kv_heads: a.kv_heads.unwrap_or(heads),
        seq_q,
        seq_k: a.seq_k.unwrap_or(seq_q),
        head_dim,
    };
    Ok(DenseArgs { dtype, shape, seed: seed_or_now(a.seed) })
}

/// The 16-bit `--dtype` of an attention op, which is checked on finite inputs only.
fn finite_half_inputs(a: &VerifyArgs, op: &str) -> Result<DType, String> {
    let dtype = half_dtype(a, op)?;
    if a.specials || a.huge {
        return Err(format!("{op} is checked on finite inputs; remove --specials / --huge"));
    }
    Ok(dtype)
}

/// The flags `verify attention --varlen` and `verify attention_backward --varlen` share.
struct VarlenArgs {
    lens: Vec<(usize, usize)>,
    /// The lengths as `Q:K,...`, for the header line.
    shown: String,
    dtype: DType,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    seed: u64,
}

/// Parses and checks the shared packed-batch flags of `verify op --varlen`; `extra` are the
/// op's own optional flags (shown in its usage; `--kernel` is accepted and hidden).
fn varlen_args(a: &VerifyArgs, op: &str, extra: &[&str]) -> Result<VarlenArgs, String> {
    let shared = ["--varlen", "--heads", "--kv-heads", "--head-dim", "--causal", "--kernel"];
    let stray: Vec<&str> = given_flags(a).into_iter().filter(|f| !shared.contains(f) && !extra.contains(f)).collect();
    if !stray.is_empty() {
        let optional: String = extra.iter().map(|f| format!(" [{f}]")).collect();
        return Err(format!(
            "`{op} --varlen` takes --varlen LENS --heads --kv-heads --head-dim [--causal]{optional}; remove {}",
            stray.join(", ")
        ));
    }
    let lens = parse_varlen(a.varlen.as_deref().unwrap_or_default())?;
    let dtype = finite_half_inputs(a, op)?;
    let (Some(heads), Some(head_dim)) = (a.heads, a.head_dim) else {
        return Err(format!("`{op} --varlen` needs --heads H --head-dim D (and --kv-heads, default H)"));
    };
    let seed = seed_or_now(a.seed);
    let shown = lens.iter().map(|(q, k)| format!("{q}:{k}")).collect::<Vec<_>>().join(",");
    Ok(VarlenArgs { lens, shown, dtype, heads, kv_heads: a.kv_heads.unwrap_or(heads), head_dim, seed })
}

/// `--varlen 7:9,113,1:40`: one `(seq_q, seq_k)` per sequence.
fn parse_varlen(spec: &str) -> Result<Vec<(usize, usize)>, String> {
    spec.split(',')
        .map(|item| {
            let parsed = match item.split_once(':') {
                Some((q, k)) => q.trim().parse().ok().zip(k.trim().parse().ok()),
                None => item.trim().parse().ok().map(|l: usize| (l, l)),
            };
            parsed.ok_or_else(|| {
                format!(
                    "--varlen `{spec}`: `{item}` is not a length; give one Q:K (or L for both) per sequence, comma-separated, e.g. 7:9,113,1:40"
                )
            })
        })
        .collect()
}

/// `verify attention_backward --varlen 7:9,113,1:40`: the variable-length backward after the
/// forward, each sequence checked against the dense backward reference with FlashAttention's
/// rule; the shipped version or, with the hidden `--kernel NAME`, any version with varlen kernels.
fn run_verify_attention_backward_varlen(a: VerifyArgs) -> ArgsResult<ExitCode> {
    use ferrokern::attention_backward::{self as bwd, VarlenBackwardCase, check_varlen_backward};
    let VarlenArgs { lens, shown, dtype, heads, kv_heads, head_dim, seed } =
        varlen_args(&a, "attention_backward", &["--deterministic"])?;
    let ctx = ferrokern::context(a.backend)?;
    let opts = bwd::BackwardOptions { deterministic: a.deterministic };
    let version = kernel_version(
        "attention_backward",
        a.kernel.as_deref(),
        bwd::BACKWARD_VERSIONS,
        |v| v.name,
        || bwd::default_varlen_version(&ctx, head_dim, true, opts),
    )?;
    let case = VarlenBackwardCase {
        dtype,
        heads,
        kv_heads,
        head_dim,
        lens,
        causal: a.causal,
        deterministic: a.deterministic,
        seed,
    };
    let Some(version) = version else {
        return report_exit(check_varlen_backward(&ctx, &case, None));
    };
    println!(
        "verify attention_backward varlen={shown} heads={heads} kv_heads={kv_heads} head_dim={head_dim} causal={} deterministic={} dtype={} backend={} version={} seed={seed}",
        a.causal,
        a.deterministic,
        dtype.name(),
        ctx.backend(),
        version.name
    );
    report_exit(check_varlen_backward(&ctx, &case, Some(version)))
}

/// `verify attention_backward`: the forward (the version `attention` picks) then the backward,
/// FlashAttention's backward rule against the f64 reference; the shipped backward or, with the
/// hidden `--kernel NAME`, any version; `--deterministic` for the reproducible dQ pass.
fn run_verify_attention_backward(a: VerifyArgs) -> ArgsResult<ExitCode> {
    if a.varlen.is_some() {
        return run_verify_attention_backward_varlen(a);
    }
    use ferrokern::attention_backward::{self as bwd, AttentionBackwardCase, check_backward};
    let DenseArgs { dtype, shape, seed } = dense_args(&a, "attention_backward", &["--deterministic"])?;
    let head_dim = shape.head_dim;
    let ctx = ferrokern::context(a.backend)?;
    let opts = bwd::BackwardOptions { deterministic: a.deterministic };
    let version = kernel_version(
        "attention_backward",
        a.kernel.as_deref(),
        bwd::BACKWARD_VERSIONS,
        |v| v.name,
        || bwd::default_version(&ctx, head_dim, true, opts),
    )?;
    let case = AttentionBackwardCase { dtype, shape, causal: a.causal, deterministic: a.deterministic, seed };
    let Some(version) = version else {
        return report_exit(check_backward(&ctx, &case, None));
    };
    println!(
        "verify attention_backward batch={} heads={} kv_heads={} seq_q={} seq_k={} head_dim={} causal={} deterministic={} dtype={} backend={} version={} seed={seed}",
        shape.batch,
        shape.heads,
        shape.kv_heads,
        shape.seq_q,
        shape.seq_k,
        shape.head_dim,
        a.causal,
        a.deterministic,
        dtype.name(),
        ctx.backend(),
        version.name
    );
    report_exit(check_backward(&ctx, &case, Some(version)))
}

/// `verify paged_decode`: decode attention over a paged KV cache with shuffled pages, every
/// sequence at `--context` tokens (`--q-len` of them new), FlashAttention's rule against the
/// f64 reference; the shipped version or, with the hidden `--kernel NAME`, any version.
fn run_verify_paged(a: VerifyArgs) -> ArgsResult<ExitCode> {
    use ferrokern::paged::{self, PagedCase, Split, check_with};
    let allowed = [
        "--batch",
        "--heads",
        "--kv-heads",
        "--head-dim",
        "--page-size",
        "--context",
        "--q-len",
        "--strategy",
        "--kernel",
    ];
    let stray: Vec<&str> = given_flags(&a).into_iter().filter(|f| !allowed.contains(f)).collect();
    if !stray.is_empty() {
        return refuse(format!(
            "`paged_decode` takes --batch --heads --kv-heads --head-dim --page-size --context [--q-len N] [--strategy auto|off|split:N]; remove {}",
            stray.join(", ")
        ));
    }
    let version = kernel_version("paged_decode", a.kernel.as_deref(), paged::VERSIONS, |v| v.name, || None)?;
    let dtype = half_dtype(&a, "paged_decode")?;
    let (Some(heads), Some(head_dim), Some(page_size), Some(context)) = (a.heads, a.head_dim, a.page_size, a.context)
    else {
        return refuse(
            "`paged_decode` needs --heads H --head-dim D --page-size P --context L (and --batch, --kv-heads default to 1, H)",
        );
    };
    let split = match a.strategy.as_deref() {
        None | Some("auto") => Split::Auto,
        Some("off") => Split::Off,
        Some(s) => match s.strip_prefix("split:").and_then(|n| n.parse().ok()) {
            Some(n) => Split::Keys(n),
            None => return refuse(format!("unknown strategy `{s}`: use auto, off or split:N (N a multiple of 32)")),
        },
    };
    let batch = a.batch.unwrap_or(1);
    let case = PagedCase {
        dtype,
        heads,
        kv_heads: a.kv_heads.unwrap_or(heads),
        q_len: a.q_len.unwrap_or(1),
        head_dim,
        page_size,
        context_lens: vec![context; batch],
        split,
        append: false,
        seed: a.seed.unwrap_or(1),
    };
    // Without --kernel, the version paged_decode picks for this shape (the check's caches are
    // aligned allocations).
    let version = version.unwrap_or_else(|| paged::pick_version(case.rows_per_kv_head(), true));
    let ctx = ferrokern::context(a.backend)?;
    println!(
        "verify paged_decode batch={batch} heads={heads} kv_heads={} q_len={} head_dim={head_dim} page_size={page_size} context={context} split={split:?} dtype={} backend={} version={} seed={}",
        case.kv_heads,
        case.q_len,
        dtype.name(),
        ctx.backend(),
        version.name,
        case.seed
    );
    report_exit(check_with(&ctx, &case, version))
}

/// Prints a verify result as the last line and maps it to the exit code; the launcher's
/// refusal of the arguments is a refused command line.
fn report_exit(result: ferrokern::Result<ferrokern::check::Report>) -> ArgsResult<ExitCode> {
    match result {
        Ok(report) => {
            println!("{report}");
            Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Err(e @ ferrokern::Error::InvalidArgument { .. }) => refuse(e),
        Err(e) => {
            println!("FAIL error: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

/// A sweep case's result column (`PASS`, the failed report, or the error), counting failures.
fn sweep_line(r: &ferrokern::Result<ferrokern::check::Report>, failed: &mut usize) -> String {
    let line = match r {
        Ok(rep) if rep.passed() => return "PASS".to_string(),
        Ok(rep) => rep.to_string(),
        Err(e) => format!("ERROR {e}"),
    };
    *failed += 1;
    line
}

/// The attention part of the emulator sweep: odd, unequal lengths, GQA, both dtypes, causal
/// and not, under FlashAttention's rule.
fn attention_emulator_sweep(ctx: &Context, filter: Option<&str>) -> bool {
    use ferrokern::attention::{AttentionCase, AttentionShape, VERSIONS, VarlenCase, check_varlen_with, check_with};
    if !filter.is_none_or(|f| "attention".contains(f)) {
        return true;
    }
    let (mut count, mut failed) = (0, 0);
    println!("\n{:<10} {:<34} {:>5} {:<6}  result", "attention", "shape", "dtype", "causal");
    for (v, dtype) in VERSIONS.iter().flat_map(|v| [(v, DType::BF16), (v, DType::F16)]) {
        for causal in [false, true] {
            for (seq_q, seq_k, head_dim) in [(113, 113, 64), (7, 239, 128), (65, 33, 32)] {
                if v.kernel(head_dim).is_none() {
                    continue;
                }
                let shape = AttentionShape { batch: 1, heads: 4, kv_heads: 2, seq_q, seq_k, head_dim };
                count += 1;
                let r = check_with(ctx, &AttentionCase { dtype, shape, causal, seed: 21 }, Some(v));
                let line = sweep_line(&r, &mut failed);
                println!(
                    "{:<10} {:<34} {:>5} {:<6}  {line}",
                    v.name,
                    format!("h4/kv2 q{seq_q} k{seq_k} d{head_dim}"),
                    dtype.name(),
                    causal
                );
            }
            // A packed variable-length batch: an empty, a short and a two-tile sequence.
            let head_dim = if v.kernel(96).is_some_and(|k| k.varlen.is_some()) { 96 } else { 64 };
            if v.kernel(head_dim).is_some_and(|k| k.varlen.is_some()) {
                let lens = vec![(7, 9), (0, 5), (130, 140)];
                let case = VarlenCase { dtype, heads: 4, kv_heads: 2, head_dim, lens, causal, seed: 21 };
                count += 1;
                let r = check_varlen_with(ctx, &case, Some(v));
                let line = sweep_line(&r, &mut failed);
                let shape = format!("h4/kv2 varlen 7:9,0:5,130:140 d{head_dim}");
                println!("{:<10} {:<34} {:>5} {:<6}  {line}", v.name, shape, dtype.name(), causal);
            }
        }
    }
    println!("attention emulator sweep: {} passed, {failed} failed", count - failed);
    failed == 0
}

/// The paged-decode part of the emulator sweep: shuffled pages, GQA, every page size, split
/// and not, with an append first.
fn paged_emulator_sweep(ctx: &Context, filter: Option<&str>) -> bool {
    use ferrokern::paged::{PagedCase, Split, VERSIONS, check_with};
    if !filter.is_none_or(|f| "paged_decode".contains(f)) {
        return true;
    }
    let (mut count, mut failed) = (0, 0);
    println!("\n{:<12} {:<32} {:>5}  result", "paged_decode", "case", "dtype");
    for (v, dtype) in VERSIONS.iter().flat_map(|v| [DType::BF16, DType::F16].map(|d| (v, d))) {
        for (page_size, split, q_len) in [
            (16, Split::Off, 1),
            (32, Split::Keys(64), 1),
            (64, Split::Auto, 1),
            (16, Split::Keys(32), 4),
            (32, Split::Off, 8),
        ] {
            let case = PagedCase {
                dtype,
                heads: 8,
                kv_heads: 2,
                q_len,
                head_dim: 64,
                page_size,
                context_lens: vec![q_len, 77, 300],
                split,
                append: true,
                seed: 9,
            };
            count += 1;
            let r = check_with(ctx, &case, v);
            let line = sweep_line(&r, &mut failed);
            println!(
                "{:<12} {:<32} {:>5}  {line}",
                v.name,
                format!("p{page_size} {split:?} q{q_len} L[{q_len},77,300]"),
                dtype.name()
            );
        }
    }
    println!("paged_decode emulator sweep: {} passed, {failed} failed", count - failed);
    failed == 0
}

/// The GEMM part of the emulator sweep: every version on odd shapes, all four transpose
/// pairs, with a batch and alpha/beta; then the tensor-core versions.
fn gemm_emulator_sweep(ctx: &Context, filter: Option<&str>) -> bool {
    use ferrokern::gemm::{Gemm, Trans, VERSIONS};
    if !gemm_selected(filter) {
        return true;
    }
    println!("\n{:<18} {:<16} {:>4} {:>11}  result", "gemm version", "m x n x k", "op", "max_rel");
    let (mut count, mut failed) = (0, 0);
    for v in VERSIONS {
        for (m, n, k) in [(1, 255, 101), (127, 129, 133), (70, 3, 0)] {
            for (ta, tb) in [(Trans::N, Trans::N), (Trans::N, Trans::T), (Trans::T, Trans::N), (Trans::T, Trans::T)] {
                let g = Gemm::new(m, n, k).transposed(ta, tb).batched(2).scaled(1.5, -0.5);
                let case = verify::GemmCase { gemm: g, seed: 11, offset: 0 };
                count += 1;
                let op = format!("{ta:?}{tb:?}");
                match verify::gemm_with(ctx, &case, v) {
                    Ok(rep) => {
                        failed += !rep.passed() as usize;
                        if m == 127 || !rep.passed() {
                            println!(
                                "{:<18} {:<16} {:>4} {:>11.2e}  {}",
                                v.name,
                                format!("{m}x{n}x{k}"),
                                op,
                                rep.max_rel_err,
                                if rep.passed() { "PASS".to_string() } else { rep.to_string() }
                            );
                        }
                    }
                    Err(e) => {
                        failed += 1;
                        println!("{:<18} {:<16} {:>4}  ERROR {e}", v.name, format!("{m}x{n}x{k}"), op);
                    }
                }
            }
        }
    }
    println!(
        "gemm emulator sweep: {} passed, {failed} failed (rows shown: 127x129x133 and any failure)",
        count - failed
    );
    (failed == 0) & gemm_tc_emulator_sweep(ctx)
}

/// The tensor-core part of the GEMM sweep: every version, both input types, B as stored and
/// transposed, on shapes TMA accepts (leading dimensions multiples of 8): odd M with a K
/// that v05 splits four ways, and a single row.
fn gemm_tc_emulator_sweep(ctx: &Context) -> bool {
    use ferrokern::gemm::{Gemm, Trans};
    use ferrokern::gemm_tc::{self, VERSIONS};
    println!("\n{:<24} {:<14} {:>5} {:>6} {:>6}  result", "gemm_tc version", "m x n x k", "dtype", "op", "splits");
    let (mut count, mut failed) = (0, 0);
    for v in VERSIONS {
        for (m, n, k) in [(131, 264, 1000), (1, 8, 72)] {
            for tb in [Trans::N, Trans::T] {
                let g = Gemm::new(m, n, k).transposed(Trans::N, tb).scaled(1.5, -0.5);
                let case = verify::GemmCase { gemm: g, seed: 13, offset: 0 };
                let splits = gemm_tc::split_k(v.config, &g, gemm_tc::sm_count(ctx));
                for (dtype, r) in [
                    ("bf16", verify::gemm_tc_with::<half::bf16>(ctx, &case, v)),
                    ("f16", verify::gemm_tc_with::<half::f16>(ctx, &case, v)),
                ] {
                    count += 1;
                    let line = sweep_line(&r, &mut failed);
                    println!(
                        "{:<24} {:<16} {dtype:>5} {:>4} {splits:>6}  {line}",
                        v.name,
                        format!("{m}x{n}x{k}"),
                        format!("N{tb:?}")
                    );
                }
            }
        }
    }
    println!("gemm_tc emulator sweep: {} passed, {failed} failed", count - failed);
    failed == 0
}

/// The tensor-core GEMM (bf16 in, f32 out) against cuBLAS `cublasGemmEx` in the same run:
/// each version checked on an odd shape first (a fast wrong kernel is not a result), then per
/// shape cuBLAS timed once and every checked version on the same buffers; then the same with
/// the fused bias + GELU epilogue ([`bench::GEMM_TC_FUSED_SHAPES`]) against cuBLAS's plain
/// product.
fn gemm_tc_bench(ctx: &Context, ok: &mut bool) -> Vec<bench::GemmMeasurement> {
    use ferrokern::gemm::Gemm;
    let cublas = ferrokern::cublas::Cublas::load(ctx).map_err(|e| println!("\ngemm_tc baseline: none ({e})")).ok();
    // Odd M and N, leading dimensions TMA accepts (multiples of 8 elements), and a K of 15.6
    // k-steps of 64 that v05 splits four ways (4 tiles of 128 x 256).
    let case = verify::GemmCase { gemm: Gemm::new(131, 264, 1000).scaled(1.0, 0.5), seed: 5, offset: 0 };
    let mut checked = Vec::new();
    for v in ferrokern::gemm_tc::VERSIONS {
        if let (Some(need), Some(info)) = (v.config.required_arch(), ctx.device_info())
            && info.ptx_arch != need
        {
            println!("\ngemm_tc {}: skipped, it needs the {need} PTX and this device loaded {}", v.name, info.ptx_arch);
            continue;
        }
        if passes_check(&format!("gemm_tc {}", v.name), verify::gemm_tc_with::<half::bf16>(ctx, &case, v), ok) {
            checked.push(v);
        }
    }
    let mut rows = gemm_shapes(
        ctx,
        "gemm_tc",
        bench::GEMM_TC_SHAPES,
        &checked,
        cublas.as_ref(),
        bench::gemm::<half::bf16>,
        None,
        ok,
    );
    // The fused bias + GELU epilogue: each version checked with it on the odd shape, then
    // timed against cuBLAS's plain product.
    let fused = verify::EpilogueSpec { bias: true, gelu: true, residual: false };
    let checked: Vec<_> = checked
        .into_iter()
        .filter(|v| {
            let r = verify::gemm_tc_ex_with::<half::bf16, f32>(ctx, &case, fused, v);
            passes_check(&format!("gemm_tc {} +bias+gelu", v.name), r, ok)
        })
        .collect();
    let family = "gemm_tc +bias+gelu";
    rows.extend(gemm_shapes(
        ctx,
        family,
        bench::GEMM_TC_FUSED_SHAPES,
        &checked,
        cublas.as_ref(),
        bench::gemm_tc_fused,
        None,
        ok,
    ));
    rows
}

/// A version's row on a shape: `bench::gemm`, or `bench::gemm_tc_fused` (the fused epilogue).
type TimeGemm<T> = fn(
    &Context,
    &'static <bench::GemmWorkload<T> as bench::GemmBench>::Version,
    &mut bench::GemmWorkload<T>,
    Option<f64>,
) -> ferrokern::Result<bench::GemmMeasurement>;
/// Times a family's public entry point on a shape ([`bench::gemm_default`]).
type TimePublic<T> =
    fn(&Context, &mut bench::GemmWorkload<T>, Option<f64>) -> ferrokern::Result<bench::GemmMeasurement>;

/// Times every checked version of a GEMM family on each shape with `time` against cuBLAS's
/// plain product, which is timed once per shape on the same buffers, then the family's
/// public entry point when `public` is given.
#[allow(clippy::too_many_arguments)]
fn gemm_shapes<T: ferrokern::Float>(
    ctx: &Context,
    family: &str,
    shapes: &[(usize, usize, usize)],
    checked: &[&'static <bench::GemmWorkload<T> as bench::GemmBench>::Version],
    cublas: Option<&ferrokern::cublas::Cublas>,
    time: TimeGemm<T>,
    public: Option<TimePublic<T>>,
    ok: &mut bool,
) -> Vec<bench::GemmMeasurement>
where
    bench::GemmWorkload<T>: bench::GemmBench,
{
    use bench::GemmBench;
    println!(
        "\n{:<18} {:<26} {:>10} {:>8} {:>10} {:>8} {:>7}",
        format!("{family} version"),
        "m x n x k",
        "median ms",
        "TFLOP/s",
        "cuBLAS ms",
        "TFLOP/s",
        "ratio"
    );
    let mut rows = Vec::new();
    for &(m, n, k) in shapes {
        let mut w = match bench::GemmWorkload::<T>::new(ctx, m, n, k) {
            Ok(w) => w,
            Err(e) => {
                println!("{family} {m}x{n}x{k}: {e}");
                *ok = false;
                continue;
            }
        };
        let base = match bench::gemm_cublas(ctx, &mut w, cublas) {
            Ok(b) => b,
            Err(e) => {
                println!("cuBLAS {m}x{n}x{k}: {e}");
                None
            }
        };
        for &v in checked {
            match time(ctx, v, &mut w, base) {
                Ok(r) => {
                    print_gemm_row(&r);
                    rows.push(r);
                }
                Err(e) => {
                    println!("{family} {} {m}x{n}x{k}: {e}", bench::GemmWorkload::<T>::name(v));
                    *ok = false;
                }
            }
        }
        match public.map(|f| f(ctx, &mut w, base)) {
            None => {}
            Some(Ok(r)) => {
                print_gemm_row(&r);
                rows.push(r);
            }
            Some(Err(e)) => {
                println!("{family} gemm() {m}x{n}x{k}: {e}");
                *ok = false;
            }
        }
    }
    rows
}

/// Paged decode (bf16), every version, against a device-to-device copy of the KV bytes it
/// must read, each shape with shuffled pages; each version checked first (q_len 1 and 4).
fn paged_bench(ctx: &Context, ok: &mut bool) -> Vec<Measurement> {
    use ferrokern::paged::{self, PagedCase, Split, VERSIONS};
    let mut rows = Vec::new();
    for v in VERSIONS {
        let case = |q_len| PagedCase {
            dtype: DType::BF16,
            heads: 8,
            kv_heads: 2,
            q_len,
            head_dim: 128,
            page_size: 16,
            context_lens: vec![q_len, 300, 777],
            split: Split::Keys(64),
            append: true,
            seed: 5,
        };
        if !passes_check(&format!("paged_decode {}", v.name), paged::check_with(ctx, &case(1), v), ok)
            || !passes_check(&format!("paged_decode {} q_len 4", v.name), paged::check_with(ctx, &case(4), v), ok)
        {
            continue;
        }
        for shape in paged::BENCH_SHAPES {
            match paged::time::<half::bf16>(ctx, v, shape) {
                Ok((ms, copy_ms)) => {
                    let s = shape.paged();
                    let bytes = paged::kv_bytes::<half::bf16>(&s, &vec![shape.context as i32; s.batch]) as u64;
                    rows.push(Measurement {
                        family: "paged",
                        op: "paged_decode".into(),
                        version: v.name.into(),
                        shape: shape.label(),
                        dtype: "bf16",
                        median_ms: ms,
                        // paged::time reports medians only (JSON null).
                        min_ms: f64::NAN,
                        bytes,
                        gbps: bytes as f64 / (ms * 1e6),
                        baseline: "copy",
                        baseline_median_ms: copy_ms,
                        baseline_gbps: bytes as f64 / (copy_ms * 1e6),
                        ratio: copy_ms / ms,
                    });
                }
                Err(e) => {
                    println!("paged_decode {} {}: {e}", v.name, shape.label());
                    *ok = false;
                }
            }
        }
    }
    if !rows.is_empty() {
        println!();
        print_measurements(&rows);
    }
    rows
}

/// Whether a bench family's check before timing passed; prints why not and marks the run
/// failed (a fast wrong kernel is not a result).
fn passes_check(what: &str, result: ferrokern::Result<ferrokern::check::Report>, ok: &mut bool) -> bool {
    match result {
        Ok(r) if r.passed() => true,
        Ok(r) => {
            println!("{what} check: {r}");
            *ok = false;
            false
        }
        Err(e) => {
            println!("{what} check: {e}");
            *ok = false;
            false
        }
    }
}

/// Attention (bf16) against PyTorch's scaled_dot_product_attention in the same run: every
/// version of the ladder, each checked with FlashAttention's rule on a small case first (a
/// fast wrong kernel is not a result), then timed on every shape it supports.
fn attention_bench(ctx: &Context, ok: &mut bool) -> Vec<ferrokern::attention::AttentionMeasurement> {
    use ferrokern::attention::{self as att, AttentionCase, AttentionShape};
    let mut checked = Vec::new();
    for v in att::VERSIONS {
        let mut good = true;
        for head_dim in v.head_dims() {
            if let Some(why) = att::unavailable(ctx, v, head_dim as usize) {
                println!("attention {} d{head_dim}: SKIP: {why}", v.name);
                good = false;
                continue;
            }
            let check = AttentionCase {
                dtype: DType::BF16,
                shape: AttentionShape {
                    batch: 1,
                    heads: 2,
                    kv_heads: 1,
                    seq_q: 100,
                    seq_k: 100,
                    head_dim: head_dim as usize,
                },
                causal: true,
                seed: 5,
            };
            good &=
                passes_check(&format!("attention {} d{head_dim}", v.name), att::check_with(ctx, &check, Some(v)), ok);
        }
        if good {
            checked.push(v);
        }
    }
    let mut shapes = Vec::new();
    for &(batch, heads, seq, head_dim) in att::BENCH_SHAPES {
        for causal in [false, true] {
            let s = AttentionShape { batch, heads, kv_heads: heads, seq_q: seq, seq_k: seq, head_dim };
            shapes.push((s, causal, "bf16"));
        }
    }
    let torch = att::torch_baseline(&shapes);
    if let Err(why) = &torch {
        println!("attention baseline: PyTorch unavailable ({why}); kernel times only");
    }
    let mut rows = Vec::new();
    for (i, (s, causal, dtype)) in shapes.iter().enumerate() {
        let torch_ms = torch_time("attention", &torch, i, &format!("{s:?} causal={causal}"));
        for &v in &checked {
            if v.kernel(s.head_dim).is_none() || (!v.tensor_cores && s.seq_q > att::BENCH_SIMT_MAX_SEQ) {
                continue;
            }
            match att::time::<half::bf16>(ctx, v, *s, *causal) {
                Ok(ms) => {
                    let shape = format!("b{} h{} s{} d{}", s.batch, s.heads, s.seq_q, s.head_dim);
                    rows.push(attention_row(v.name, shape, *causal, dtype, ms, att::flops(s, *causal), torch_ms));
                }
                Err(e) => {
                    println!("attention {} {s:?} causal={causal}: {e}", v.name);
                    *ok = false;
                }
            }
        }
    }
    attention_varlen_bench(ctx, &checked, &mut rows, ok);
    print_attention_table("attention", &rows);
    rows
}

/// PyTorch's time for case `i` of a baseline run, printing why there is none (once per case;
/// a baseline missing altogether was reported already).
fn torch_time(label: &str, torch: &ferrokern::attention::TorchTimes, i: usize, case: &str) -> Option<f64> {
    match torch.as_ref().ok().map(|t| &t[i]) {
        Some(Ok(ms)) => Some(*ms),
        Some(Err(why)) => {
            println!("{label} baseline {case}: PyTorch could not time it ({why})");
            None
        }
        None => None,
    }
}

/// The variable-length rows: [`att::BENCH_VARLEN_LENS`] packed, every checked tensor-core
/// version with variable-length kernels for the head dim, against PyTorch's attention on the
/// same sequences as nested jagged tensors.
fn attention_varlen_bench(
    ctx: &Context,
    checked: &[&'static ferrokern::attention::AttentionVersion],
    rows: &mut Vec<ferrokern::attention::AttentionMeasurement>,
    ok: &mut bool,
) {
    use ferrokern::attention as att;
    let lens: Vec<(usize, usize)> = att::BENCH_VARLEN_LENS.iter().map(|&l| (l, l)).collect();
    let cases: Vec<_> = att::BENCH_VARLEN_SHAPES
        .iter()
        .flat_map(|&(heads, head_dim)| {
            [false, true].map(|causal| att::VarlenBenchCase { lens: &lens, heads, head_dim, causal, dtype: "bf16" })
        })
        .collect();
    let torch = att::torch_varlen_baseline(&cases);
    if let Err(why) = &torch {
        println!("attention varlen baseline: PyTorch unavailable ({why}); kernel times only");
    }
    // Each version's variable-length kernels pass a small packed check before they are timed.
    let mut passed = Vec::new();
    for &v in checked.iter().filter(|v| v.tensor_cores) {
        for &(_, head_dim) in att::BENCH_VARLEN_SHAPES {
            if v.kernel(head_dim).is_none_or(|k| k.varlen.is_none()) || passed.contains(&(v.name, head_dim)) {
                continue;
            }
            let case = att::VarlenCase {
                dtype: DType::BF16,
                heads: 2,
                kv_heads: 1,
                head_dim,
                lens: vec![(100, 100), (0, 3), (37, 170)],
                causal: true,
                seed: 5,
            };
            let what = format!("attention varlen {} d{head_dim}", v.name);
            if passes_check(&what, att::check_varlen_with(ctx, &case, Some(v)), ok) {
                passed.push((v.name, head_dim));
            }
        }
    }
    let total: usize = lens.iter().map(|l| l.0).sum();
    for (i, c) in cases.iter().enumerate() {
        let (shape, causal) = (format!("varlen{} t{total} h{} d{}", lens.len(), c.heads, c.head_dim), c.causal);
        let torch_ms = torch_time("attention varlen", &torch, i, &format!("{shape} causal={causal}"));
        for &v in checked {
            if !passed.contains(&(v.name, c.head_dim)) {
                continue;
            }
            match att::time_varlen::<half::bf16>(ctx, v, c) {
                Ok(ms) => rows.push(attention_row(v.name, shape.clone(), causal, c.dtype, ms, c.flops(), torch_ms)),
                Err(e) => {
                    println!("attention varlen {} {shape} causal={causal}: {e}", v.name);
                    *ok = false;
                }
            }
        }
    }
}

/// Attention backward (bf16, the default atomic dQ path) against the backward of PyTorch's
/// scaled_dot_product_attention in the same run: every backward version, checked with
/// FlashAttention's backward rule on a small case first (both dQ paths), then timed on the
/// forward's bench shapes up to [`att::BENCH_SIMT_MAX_SEQ`] for CUDA-core versions. TFLOP/s
/// counts 2.5 times the forward's FLOPs.
fn attention_backward_bench(ctx: &Context, ok: &mut bool) -> Vec<ferrokern::attention::AttentionMeasurement> {
    use ferrokern::attention::{self as att, AttentionShape};
    use ferrokern::attention_backward::{self as bwd, AttentionBackwardCase, BackwardOptions};
    let mut checked = Vec::new();
    for v in bwd::BACKWARD_VERSIONS {
        let mut good = true;
        for head_dim in v.head_dims().filter(|&d| d == 64 || d == 128 || d == 256) {
            if let Some(why) = bwd::unavailable(ctx, v, head_dim as usize, BackwardOptions::default()) {
                println!("attention_backward {} d{head_dim}: SKIP: {why}", v.name);
                good = false;
                continue;
            }
            for deterministic in [false, true] {
                let case = AttentionBackwardCase {
                    dtype: DType::BF16,
                    shape: AttentionShape {
                        batch: 1,
                        heads: 2,
                        kv_heads: 1,
                        seq_q: 100,
                        seq_k: 100,
                        head_dim: head_dim as usize,
                    },
                    causal: true,
                    deterministic,
                    seed: 5,
                };
                let what = format!("attention_backward {} d{head_dim} deterministic={deterministic}", v.name);
                good &= passes_check(&what, bwd::check_backward(ctx, &case, Some(v)), ok);
            }
        }
        if good {
            checked.push(v);
        }
    }
    let mut shapes = Vec::new();
    // Only head dims some checked version has: PyTorch's time for a shape nothing here runs
    // would only spend GPU time.
    for &(batch, heads, seq, head_dim) in att::BENCH_SHAPES {
        if !checked.iter().any(|v| v.kernel(head_dim).is_some()) {
            continue;
        }
        for causal in [false, true] {
            let s = AttentionShape { batch, heads, kv_heads: heads, seq_q: seq, seq_k: seq, head_dim };
            shapes.push((s, causal, "bf16"));
        }
    }
    let torch = att::torch_baseline_pass(&shapes, true);
    if let Err(why) = &torch {
        println!("attention_backward baseline: PyTorch unavailable ({why}); kernel times only");
    }
    let mut rows = Vec::new();
    for (i, (s, causal, dtype)) in shapes.iter().enumerate() {
        let torch_ms = torch_time("attention_backward", &torch, i, &format!("{s:?} causal={causal}"));
        for &v in &checked {
            if v.kernel(s.head_dim).is_none() || (!v.tensor_cores && s.seq_q > att::BENCH_SIMT_MAX_SEQ) {
                continue;
            }
            match bwd::time::<half::bf16>(ctx, v, *s, *causal, BackwardOptions::default()) {
                Ok(ms) => {
                    let shape = format!("b{} h{} s{} d{}", s.batch, s.heads, s.seq_q, s.head_dim);
                    rows.push(attention_row(v.name, shape, *causal, dtype, ms, bwd::flops(s, *causal), torch_ms));
                }
                Err(e) => {
                    println!("attention_backward {} {s:?} causal={causal}: {e}", v.name);
                    *ok = false;
                }
            }
        }
    }
    attention_backward_varlen_bench(ctx, &checked, &mut rows, ok);
    print_attention_table("attn bwd", &rows);
    rows
}

/// The backward's variable-length rows: the forward's packed batch ([`att::BENCH_VARLEN_LENS`],
/// [`att::BENCH_VARLEN_SHAPES`]), every checked tensor-core backward version with
/// variable-length kernels for the head dim (the default atomic dQ path), against the
/// backward of PyTorch's attention on the same sequences as nested jagged tensors.
fn attention_backward_varlen_bench(
    ctx: &Context,
    checked: &[&'static ferrokern::attention_backward::AttentionBackwardVersion],
    rows: &mut Vec<ferrokern::attention::AttentionMeasurement>,
    ok: &mut bool,
) {
    use ferrokern::attention as att;
    use ferrokern::attention_backward::{self as bwd, BackwardOptions, VarlenBackwardCase};
    // Each version's variable-length kernels pass a small packed check (both dQ paths) first.
    let mut passed = Vec::new();
    for &v in checked.iter().filter(|v| v.tensor_cores) {
        for &(_, head_dim) in att::BENCH_VARLEN_SHAPES {
            if v.varlen_kernel(head_dim).is_none() || passed.contains(&(v.name, head_dim)) {
                continue;
            }
            let mut good = true;
            for deterministic in [false, true] {
                let case = VarlenBackwardCase {
                    dtype: DType::BF16,
                    heads: 2,
                    kv_heads: 1,
                    head_dim,
                    lens: vec![(100, 100), (0, 3), (37, 170)],
                    causal: true,
                    deterministic,
                    seed: 5,
                };
                let what = format!("attention_backward varlen {} d{head_dim} deterministic={deterministic}", v.name);
                good &= passes_check(&what, bwd::check_varlen_backward(ctx, &case, Some(v)), ok);
            }
            if good {
                passed.push((v.name, head_dim));
            }
        }
    }
    if passed.is_empty() {
        println!("attention_backward varlen: no version passed its check; no varlen rows");
        return;
    }
    let lens: Vec<(usize, usize)> = att::BENCH_VARLEN_LENS.iter().map(|&l| (l, l)).collect();
    let cases: Vec<_> = att::BENCH_VARLEN_SHAPES
        .iter()
        .filter(|&&(_, head_dim)| passed.iter().any(|&(_, d)| d == head_dim))
        .flat_map(|&(heads, head_dim)| {
            [false, true].map(|causal| att::VarlenBenchCase { lens: &lens, heads, head_dim, causal, dtype: "bf16" })
        })
        .collect();
    let torch = att::torch_varlen_baseline_pass(&cases, true);
    if let Err(why) = &torch {
        println!("attention_backward varlen baseline: PyTorch unavailable ({why}); kernel times only");
    }
    let total: usize = lens.iter().map(|l| l.0).sum();
    for (i, c) in cases.iter().enumerate() {
        let (shape, causal) = (format!("varlen{} t{total} h{} d{}", lens.len(), c.heads, c.head_dim), c.causal);
        let torch_ms = torch_time("attention_backward varlen", &torch, i, &format!("{shape} causal={causal}"));
        for &v in checked {
            if !passed.contains(&(v.name, c.head_dim)) {
                continue;
            }
            match bwd::time_varlen::<half::bf16>(ctx, v, c, BackwardOptions::default()) {
                Ok(ms) => {
                    rows.push(attention_row(v.name, shape.clone(), causal, c.dtype, ms, bwd::varlen_flops(c), torch_ms))
                }
                Err(e) => {
                    println!("attention_backward varlen {} {shape} causal={causal}: {e}", v.name);
                    *ok = false;
                }
            }
        }
    }
}

/// The attention backward part of the emulator sweep: odd, unequal lengths, GQA, both dtypes,
/// causal and not, both dQ paths, under FlashAttention's backward rule.
fn attention_backward_emulator_sweep(ctx: &Context, filter: Option<&str>) -> bool {
    use ferrokern::attention::AttentionShape;
    use ferrokern::attention_backward::{AttentionBackwardCase, BACKWARD_VERSIONS, check_backward};
    if !filter.is_none_or(|f| "attention_backward".contains(f)) {
        return true;
    }
    let (mut count, mut failed) = (0, 0);
    println!("\n{:<10} {:<34} {:>5} {:<6} {:<5}  result", "attn bwd", "shape", "dtype", "causal", "det");
    for (v, dtype) in BACKWARD_VERSIONS.iter().flat_map(|v| [(v, DType::BF16), (v, DType::F16)]) {
        for causal in [false, true] {
            for (seq_q, seq_k, head_dim, deterministic) in
                [(113, 113, 64, false), (7, 239, 128, true), (65, 33, 64, true)]
            {
                let shape = AttentionShape { batch: 1, heads: 4, kv_heads: 2, seq_q, seq_k, head_dim };
                count += 1;
                let case = AttentionBackwardCase { dtype, shape, causal, deterministic, seed: 21 };
                let r = check_backward(ctx, &case, Some(v));
                let line = sweep_line(&r, &mut failed);
                println!(
                    "{:<10} {:<34} {:>5} {:<6} {:<5}  {line}",
                    v.name,
                    format!("h4/kv2 q{seq_q} k{seq_k} d{head_dim}"),
                    dtype.name(),
                    causal,
                    deterministic
                );
            }
        }
    }
    println!("attention_backward emulator sweep: {} passed, {failed} failed", count - failed);
    failed == 0
}

/// One row of a GEMM table: the version, then cuBLAS, then the ratio.
fn print_gemm_row(r: &bench::GemmMeasurement) {
    let opt = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |x| format!("{x:.p$}"));
    println!(
        "{:<18} {:<26} {:>10.4} {:>8.2} {:>10} {:>8} {:>7}",
        r.version,
        r.shape,
        r.median_ms,
        r.tflops,
        opt(r.cublas_median_ms, 4),
        opt(r.cublas_tflops, 2),
        opt(r.ratio, 3)
    );
}

fn gemm_bench(ctx: &Context, ok: &mut bool) -> Vec<bench::GemmMeasurement> {
    use ferrokern::gemm::{Gemm, Trans, VERSIONS};
    let cublas = match ferrokern::cublas::Cublas::load(ctx) {
        Ok(c) => {
            println!("\ngemm baseline: cuBLAS SGEMM from {}", c.path);
            Some(c)
        }
        Err(e) => {
            println!("\ngemm baseline: none ({e}); the versions are timed without a ratio");
            None
        }
    };
    let mut checked = Vec::new();
    for v in VERSIONS {
        let mut good = true;
        // A split-K version also on shapes it splits (7 splits each: edge tiles only, then
        // interior tiles beside edge ones).
        let split_cases: &[_] = if v.sum.is_some() { &[(16, 257, 1000), (256, 260, 1000)] } else { &[] };
        for ((m, n, k), (ta, tb)) in std::iter::once((131, 257, 67))
            .chain(split_cases.iter().copied())
            .flat_map(|s| [(Trans::N, Trans::N), (Trans::T, Trans::T)].map(|t| (s, t)))
        {
            let g = Gemm::new(m, n, k).transposed(ta, tb).scaled(1.0, 0.5);
            match verify::gemm_with(ctx, &verify::GemmCase { gemm: g, seed: 5, offset: 0 }, v) {
                Ok(r) if r.passed() => {}
                Ok(r) => {
                    println!("gemm {} {m}x{n}x{k} {ta:?}{tb:?}: {r}", v.name);
                    good = false;
                }
                Err(e) => {
                    println!("gemm {} {m}x{n}x{k} {ta:?}{tb:?}: {e}", v.name);
                    good = false;
                }
            }
        }
        *ok &= good;
        if good {
            checked.push(v);
        }
    }
    // The public gemm() on C with few columns (run as its transpose, C stored either way),
    // split (260 x 9 x 1000) and not (131 x 7 x 67), before its rows are timed.
    let mut public_ok = true;
    for (m, n, k) in [(260, 9, 1000), (131, 7, 67)] {
        for tc in Trans::BOTH {
            let g = Gemm::new(m, n, k).with_trans_c(tc).scaled(1.0, 0.5);
            let r = verify::gemm(ctx, &verify::GemmCase { gemm: g, seed: 6, offset: 0 });
            public_ok &= passes_check(&format!("gemm() {m}x{n}x{k} trans_c {tc:?}"), r, ok);
        }
    }
    gemm_shapes(
        ctx,
        "gemm",
        bench::GEMM_SHAPES,
        &checked,
        cublas.as_ref(),
        bench::gemm::<f32>,
        public_ok.then_some(bench::gemm_default as _),
        ok,
    )
}

/// One attention measurement (forward or backward) against PyTorch's time for the same case.
fn attention_row(
    version: &'static str,
    shape: String,
    causal: bool,
    dtype: &'static str,
    ms: f64,
    flops: f64,
    torch_ms: Option<f64>,
) -> ferrokern::attention::AttentionMeasurement {
    ferrokern::attention::AttentionMeasurement {
        version,
        shape,
        causal,
        dtype,
        median_ms: ms,
        tflops: flops / (ms * 1e9),
        torch_median_ms: torch_ms,
        torch_tflops: torch_ms.map(|t| flops / (t * 1e9)),
        ratio: torch_ms.map(|t| t / ms),
    }
}

/// The attention table under `label`: TFLOP/s against PyTorch's, per measurement.
fn print_attention_table(label: &str, rows: &[ferrokern::attention::AttentionMeasurement]) {
    println!(
        "\n{:<10} {:<26} {:<6} {:>10} {:>8} {:>12} {:>9}",
        label, "shape", "causal", "median ms", "TFLOP/s", "torch TFLOP/s", "ratio"
    );
    for r in rows {
        let f = |v: Option<f64>, p: usize| v.map_or("n/a".to_string(), |x| format!("{x:.p$}"));
        println!(
            "{:<10} {:<26} {:<6} {:>10.4} {:>8.2} {:>12} {:>9}",
            r.version,
            r.shape,
            r.causal,
            r.median_ms,
            r.tflops,
            f(r.torch_tflops, 2),
            f(r.ratio, 3)
        );
    }
}
