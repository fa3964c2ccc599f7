//! Every way to call the public API wrongly that the API can detect, one named case each: the
//! call must come back as the right typed error, with a message that says what to fix, must
//! not panic, and must not launch or write anything. A refused call that still ran (or half
//! ran) a kernel would corrupt data silently on the GPU, where nothing checks bounds.
//!
//! Everything runs on the emulator, whose fresh allocations are 0xFF bytes: an output that
//! still holds them was never written.
//!
//! A case lists the words its message must contain. Where today's message states the remedy
//! ("must have the same length", "pass no second input", "allocate every buffer ...") the case
//! asks for it; where it only locates the problem (view ranges, `copy_from_host` and `copy`
//! lengths, an alloc that overflows) the case asks for the numbers that locate it, so a
//! message that loses them fails here.

use ferrokern::elementwise::{self as ew, Op};
use ferrokern::gpu_kernels::Element;
use ferrokern::gpu_kernels::selftest::{self as st, SELFTEST_BLOCK, SELFTEST_SHARED_BYTES, SelftestParams};
use ferrokern::paged;
use ferrokern::rows::{RowStrategy, Rows};
use ferrokern::{Context, DeviceBuffer, Dim3, Error, Float, KernelDef, LaunchConfig, Result};
use half::{bf16, f16};
use std::cell::Cell;
use std::collections::HashSet;
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The error variant a case must produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Invalid,
    WrongContext,
    OutOfMemory,
}

impl Want {
    fn matches(self, e: &Error) -> bool {
        match self {
            Want::Invalid => matches!(e, Error::InvalidArgument { .. }),
            Want::WrongContext => matches!(e, Error::WrongContext { .. }),
            Want::OutOfMemory => matches!(e, Error::OutOfMemory { .. }),
        }
    }
}

/// What a case's call returned, and what it changed that a refused call must leave alone.
struct Outcome {
    result: Result<()>,
    written: Vec<String>,
}

fn outcome<R>(result: Result<R>, checks: impl IntoIterator<Item = Option<String>>) -> Outcome {
    Outcome { result: result.map(drop), written: checks.into_iter().flatten().collect() }
}

struct Case {
    name: &'static str,
    want: Want,
    /// Words the message must contain: the call's name and what to change.
    fix: Vec<&'static str>,
    run: Box<dyn Fn() -> Outcome>,
}

fn case(name: &'static str, want: Want, fix: &[&'static str], run: impl Fn() -> Outcome + 'static) -> Case {
    Case { name, want, fix: fix.to_vec(), run: Box::new(run) }
}

/// `None` while every element of `b` has the bits `bits`; otherwise the first that changed.
fn still<T: Float>(what: &str, b: &DeviceBuffer<T>, bits: u32) -> Option<String> {
    match b.to_host() {
        Err(e) => Some(format!("{what}: cannot read it back: {e}")),
        Ok(v) => v
            .iter()
            .position(|x| x.to_bits32() != bits)
            .map(|i| format!("{what}[{i}] was written: bits {:#x}, expected {bits:#x}", v[i].to_bits32())),
    }
}

/// `None` while `b` still holds the emulator's fresh-allocation fill (all bytes 0xFF).
fn still_fresh<T: Float>(what: &str, b: &DeviceBuffer<T>) -> Option<String> {
    still(what, b, u32::MAX >> (32 - 8 * size_of::<T>()))
}

/// Ranges built at run time, so that inverted ones read as data, not as a typo.
fn range(start: usize, end: usize) -> Range<usize> {
    start..end
}

// ---------------------------------------------------------------------------------------------
// Elementwise ops: every op x dtype x way to get the views wrong.

/// How an elementwise call is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Way {
    /// The (first) input is one element shorter than the output.
    InputShorter,
    /// The output is one element shorter than the inputs.
    OutputShorter,
    /// Two-input ops: the second input is one element shorter. One-input ops and axpy
    /// (whose y is its output): a second input passed through `launch_with`.
    SecondInput,
    /// Two-input ops through `launch_with`: the second input left out.
    MissingSecond,
    /// The (first) input was allocated by another context.
    ForeignBuffer,
    /// The output is a view into a buffer of another context.
    ForeignView,
    /// Every buffer is from one context; the call is made on another.
    ForeignContext,
}

const ELEMS: usize = 37;

fn two_inputs(op: Op) -> bool {
    op.inputs() == 2 && op != Op::Axpy
}

impl Way {
    /// How the case's name describes this way, so names and rows cannot drift apart.
    fn words(self, op: Op) -> &'static str {
        match self {
            Way::InputShorter => "input shorter than output",
            Way::OutputShorter => "output shorter than input",
            Way::SecondInput if two_inputs(op) => "second input shorter",
            Way::SecondInput => "stray second input",
            Way::MissingSecond => "missing second input",
            Way::ForeignBuffer => "input from another context",
            Way::ForeignView => "output view of another context's buffer",
            Way::ForeignContext => "called on another context",
        }
    }

    fn expect(self, op: Op) -> (Want, Vec<&'static str>) {
        let name = op.name();
        match self {
            Way::InputShorter | Way::OutputShorter => (Want::Invalid, vec![name, "must have the same length"]),
            Way::SecondInput if two_inputs(op) => (Want::Invalid, vec![name, "must have the same length"]),
            Way::SecondInput => (Want::Invalid, vec![name, "pass no second input"]),
            Way::MissingSecond => (Want::Invalid, vec![name, "needs a second input"]),
            Way::ForeignBuffer | Way::ForeignView | Way::ForeignContext => {
                (Want::WrongContext, vec![name, "allocate every buffer of a call with the context that runs it"])
            }
        }
    }
}

/// The op through its own typed function, as a user calls it.
fn typed<T: Float>(
    ctx: &Context,
    op: Op,
    a: ferrokern::BufRef<'_, T>,
    b: ferrokern::BufRef<'_, T>,
    out: ferrokern::BufMut<'_, T>,
) -> Result<()> {
    match op {
        Op::Axpy => ew::axpy(ctx, 0.5, a, out),
        Op::Scale => ew::scale(ctx, 0.5, a, out),
        Op::Add => ew::add(ctx, a, b, out),
        Op::Mul => ew::mul(ctx, a, b, out),
        Op::Gelu => ew::gelu(ctx, a, out),
        Op::Silu => ew::silu(ctx, a, out),
        Op::Swiglu => ew::swiglu(ctx, a, b, out),
    }
}

fn elementwise_case<T: Float>(op: Op, way: Way) -> Outcome {
    let ctx = Context::emulator();
    let other = Context::emulator();
    let input = |c: &Context, n: usize| c.upload(&vec![T::from_f64(1.5); n]).unwrap();
    let len_a = if way == Way::InputShorter { ELEMS - 1 } else { ELEMS };
    let len_b = if way == Way::SecondInput && two_inputs(op) { ELEMS - 1 } else { ELEMS };
    let len_out = if way == Way::OutputShorter { ELEMS - 1 } else { ELEMS };
    let a = input(if way == Way::ForeignBuffer { &other } else { &ctx }, len_a);
    let b = input(&ctx, len_b);
    let mut out = ctx.alloc::<T>(len_out).unwrap();
    let mut foreign_out = other.alloc::<T>(ELEMS + 2).unwrap();
    let call_ctx = if way == Way::ForeignContext { &other } else { &ctx };
    let out_view =
        if way == Way::ForeignView { foreign_out.view_mut(1..ELEMS + 1).unwrap() } else { out.as_view_mut() };
    let kernel = T::elementwise_kernel(op);
    let result = match way {
        Way::SecondInput if !two_inputs(op) => {
            ew::launch_with(call_ctx, kernel, op, 0.5, a.as_view(), Some(b.as_view()), out_view)
        }
        Way::MissingSecond => ew::launch_with(call_ctx, kernel, op, 0.5, a.as_view(), None, out_view),
        _ => typed(call_ctx, op, a.as_view(), b.as_view(), out_view),
    };
    outcome(result, [still_fresh("out", &out), still_fresh("the other context's buffer", &foreign_out)])
}

/// One row per case: `"name" => Op dtype Way;`. The name must read `op dtype <way's words>`.
macro_rules! elementwise_cases {
    ($($name:literal => $op:ident $t:ident $way:ident;)*) => {
        vec![$({
            let (op, way) = (Op::$op, Way::$way);
            assert_eq!(
                $name,
                format!("{} {} {}", op.name(), <$t as Element>::NAME, way.words(op)),
                "a case's name must say what it does"
            );
            let (want, fix) = way.expect(op);
            (op, <$t as Element>::NAME, way, Case {
                name: $name,
                want,
                fix,
                run: Box::new(move || elementwise_case::<$t>(op, way)),
            })
        }),*]
    };
}

fn elementwise_table() -> Vec<(Op, &'static str, Way, Case)> {
    elementwise_cases! {
        "axpy f32 input shorter than output" => Axpy f32 InputShorter;
        "axpy f32 output shorter than input" => Axpy f32 OutputShorter;
        "axpy f32 stray second input" => Axpy f32 SecondInput;
        "axpy f32 input from another context" => Axpy f32 ForeignBuffer;
        "axpy f32 output view of another context's buffer" => Axpy f32 ForeignView;
        "axpy f32 called on another context" => Axpy f32 ForeignContext;
        "axpy f16 input shorter than output" => Axpy f16 InputShorter;
        "axpy f16 output shorter than input" => Axpy f16 OutputShorter;
        "axpy f16 stray second input" => Axpy f16 SecondInput;
        "axpy f16 input from another context" => Axpy f16 ForeignBuffer;
        "axpy f16 output view of another context's buffer" => Axpy f16 ForeignView;
        "axpy bf16 input shorter than output" => Axpy bf16 InputShorter;
        "axpy bf16 output shorter than input" => Axpy bf16 OutputShorter;
        "axpy bf16 stray second input" => Axpy bf16 SecondInput;
        "axpy bf16 input from another context" => Axpy bf16 ForeignBuffer;
        "axpy bf16 output view of another context's buffer" => Axpy bf16 ForeignView;
        "scale f32 input shorter than output" => Scale f32 InputShorter;
        "scale f32 output shorter than input" => Scale f32 OutputShorter;
        "scale f32 stray second input" => Scale f32 SecondInput;
        "scale f32 input from another context" => Scale f32 ForeignBuffer;
        "scale f32 output view of another context's buffer" => Scale f32 ForeignView;
        "scale f32 called on another context" => Scale f32 ForeignContext;
        "scale f16 input shorter than output" => Scale f16 InputShorter;
        "scale f16 output shorter than input" => Scale f16 OutputShorter;
        "scale f16 stray second input" => Scale f16 SecondInput;
        "scale f16 input from another context" => Scale f16 ForeignBuffer;
        "scale f16 output view of another context's buffer" => Scale f16 ForeignView;
        "scale bf16 input shorter than output" => Scale bf16 InputShorter;
        "scale bf16 output shorter than input" => Scale bf16 OutputShorter;
        "scale bf16 stray second input" => Scale bf16 SecondInput;
        "scale bf16 input from another context" => Scale bf16 ForeignBuffer;
        "scale bf16 output view of another context's buffer" => Scale bf16 ForeignView;
        "add f32 input shorter than output" => Add f32 InputShorter;
        "add f32 output shorter than input" => Add f32 OutputShorter;
        "add f32 second input shorter" => Add f32 SecondInput;
        "add f32 input from another context" => Add f32 ForeignBuffer;
        "add f32 output view of another context's buffer" => Add f32 ForeignView;
        "add f32 missing second input" => Add f32 MissingSecond;
        "add f32 called on another context" => Add f32 ForeignContext;
        "add f16 input shorter than output" => Add f16 InputShorter;
        "add f16 output shorter than input" => Add f16 OutputShorter;
        "add f16 second input shorter" => Add f16 SecondInput;
        "add f16 input from another context" => Add f16 ForeignBuffer;
        "add f16 output view of another context's buffer" => Add f16 ForeignView;
        "add f16 missing second input" => Add f16 MissingSecond;
        "add bf16 input shorter than output" => Add bf16 InputShorter;
        "add bf16 output shorter than input" => Add bf16 OutputShorter;
        "add bf16 second input shorter" => Add bf16 SecondInput;
        "add bf16 input from another context" => Add bf16 ForeignBuffer;
        "add bf16 output view of another context's buffer" => Add bf16 ForeignView;
        "add bf16 missing second input" => Add bf16 MissingSecond;
        "mul f32 input shorter than output" => Mul f32 InputShorter;
        "mul f32 output shorter than input" => Mul f32 OutputShorter;
        "mul f32 second input shorter" => Mul f32 SecondInput;
        "mul f32 input from another context" => Mul f32 ForeignBuffer;
        "mul f32 output view of another context's buffer" => Mul f32 ForeignView;
        "mul f32 missing second input" => Mul f32 MissingSecond;
        "mul f32 called on another context" => Mul f32 ForeignContext;
        "mul f16 input shorter than output" => Mul f16 InputShorter;
        "mul f16 output shorter than input" => Mul f16 OutputShorter;
        "mul f16 second input shorter" => Mul f16 SecondInput;
        "mul f16 input from another context" => Mul f16 ForeignBuffer;
        "mul f16 output view of another context's buffer" => Mul f16 ForeignView;
        "mul f16 missing second input" => Mul f16 MissingSecond;
        "mul bf16 input shorter than output" => Mul bf16 InputShorter;
        "mul bf16 output shorter than input" => Mul bf16 OutputShorter;
        "mul bf16 second input shorter" => Mul bf16 SecondInput;
        "mul bf16 input from another context" => Mul bf16 ForeignBuffer;
        "mul bf16 output view of another context's buffer" => Mul bf16 ForeignView;
        "mul bf16 missing second input" => Mul bf16 MissingSecond;
        "gelu f32 input shorter than output" => Gelu f32 InputShorter;
        "gelu f32 output shorter than input" => Gelu f32 OutputShorter;
        "gelu f32 stray second input" => Gelu f32 SecondInput;
        "gelu f32 input from another context" => Gelu f32 ForeignBuffer;
        "gelu f32 output view of another context's buffer" => Gelu f32 ForeignView;
        "gelu f32 called on another context" => Gelu f32 ForeignContext;
        "gelu f16 input shorter than output" => Gelu f16 InputShorter;
        "gelu f16 output shorter than input" => Gelu f16 OutputShorter;
        "gelu f16 stray second input" => Gelu f16 SecondInput;
        "gelu f16 input from another context" => Gelu f16 ForeignBuffer;
        "gelu f16 output view of another context's buffer" => Gelu f16 ForeignView;
        "gelu bf16 input shorter than output" => Gelu bf16 InputShorter;
        "gelu bf16 output shorter than input" => Gelu bf16 OutputShorter;
        "gelu bf16 stray second input" => Gelu bf16 SecondInput;
        "gelu bf16 input from another context" => Gelu bf16 ForeignBuffer;
        "gelu bf16 output view of another context's buffer" => Gelu bf16 ForeignView;
        "silu f32 input shorter than output" => Silu f32 InputShorter;
        "silu f32 output shorter than input" => Silu f32 OutputShorter;
        "silu f32 stray second input" => Silu f32 SecondInput;
        "silu f32 input from another context" => Silu f32 ForeignBuffer;
        "silu f32 output view of another context's buffer" => Silu f32 ForeignView;
        "silu f32 called on another context" => Silu f32 ForeignContext;
        "silu f16 input shorter than output" => Silu f16 InputShorter;
        "silu f16 output shorter than input" => Silu f16 OutputShorter;
        "silu f16 stray second input" => Silu f16 SecondInput;
        "silu f16 input from another context" => Silu f16 ForeignBuffer;
        "silu f16 output view of another context's buffer" => Silu f16 ForeignView;
        "silu bf16 input shorter than output" => Silu bf16 InputShorter;
        "silu bf16 output shorter than input" => Silu bf16 OutputShorter;
        "silu bf16 stray second input" => Silu bf16 SecondInput;
        "silu bf16 input from another context" => Silu bf16 ForeignBuffer;
        "silu bf16 output view of another context's buffer" => Silu bf16 ForeignView;
        "swiglu f32 input shorter than output" => Swiglu f32 InputShorter;
        "swiglu f32 output shorter than input" => Swiglu f32 OutputShorter;
        "swiglu f32 second input shorter" => Swiglu f32 SecondInput;
        "swiglu f32 input from another context" => Swiglu f32 ForeignBuffer;
        "swiglu f32 output view of another context's buffer" => Swiglu f32 ForeignView;
        "swiglu f32 missing second input" => Swiglu f32 MissingSecond;
        "swiglu f32 called on another context" => Swiglu f32 ForeignContext;
        "swiglu f16 input shorter than output" => Swiglu f16 InputShorter;
        "swiglu f16 output shorter than input" => Swiglu f16 OutputShorter;
        "swiglu f16 second input shorter" => Swiglu f16 SecondInput;
        "swiglu f16 input from another context" => Swiglu f16 ForeignBuffer;
        "swiglu f16 output view of another context's buffer" => Swiglu f16 ForeignView;
        "swiglu f16 missing second input" => Swiglu f16 MissingSecond;
        "swiglu bf16 input shorter than output" => Swiglu bf16 InputShorter;
        "swiglu bf16 output shorter than input" => Swiglu bf16 OutputShorter;
        "swiglu bf16 second input shorter" => Swiglu bf16 SecondInput;
        "swiglu bf16 input from another context" => Swiglu bf16 ForeignBuffer;
        "swiglu bf16 output view of another context's buffer" => Swiglu bf16 ForeignView;
        "swiglu bf16 missing second input" => Swiglu bf16 MissingSecond;
    }
}

// ---------------------------------------------------------------------------------------------
// Buffers, views, copies, allocation.

/// Ten f32 elements in a fresh emulator context, and that context.
fn ten() -> (Context, DeviceBuffer<f32>) {
    let ctx = Context::emulator();
    let b = ctx.alloc::<f32>(10).unwrap();
    (ctx, b)
}

fn view_case(len: usize, r: Range<usize>) -> Outcome {
    let ctx = Context::emulator();
    let b = ctx.alloc::<f32>(len).unwrap();
    let result = b.view(r).map(drop);
    outcome(result, [still_fresh("buffer", &b)])
}

fn view_mut_case(len: usize, r: Range<usize>) -> Outcome {
    let ctx = Context::emulator();
    let mut b = ctx.alloc::<f32>(len).unwrap();
    let result = b.view_mut(r).map(drop);
    outcome(result, [still_fresh("buffer", &b)])
}

/// Reborrows `r` from a writable view of elements 2..8 (six elements) of a ten-element buffer.
fn reborrow_case(r: Range<usize>) -> Outcome {
    let (_ctx, mut b) = ten();
    let result = {
        let mut v = b.view_mut(2..8).unwrap();
        v.reborrow(r).map(drop)
    };
    outcome(result, [still_fresh("buffer", &b)])
}

const SENTINEL: f32 = 7.25;

/// Uploads `host` over a ten-element buffer holding [`SENTINEL`].
fn copy_from_host_case(host: usize) -> Outcome {
    let ctx = Context::emulator();
    let mut b = ctx.upload(&[SENTINEL; 10]).unwrap();
    let result = b.copy_from_host(&vec![1.0f32; host]);
    outcome(result, [still("buffer", &b, SENTINEL.to_bits())])
}

/// As [`copy_from_host_case`] through a writable view of elements 3..7.
fn view_copy_from_host_case(host: usize) -> Outcome {
    let ctx = Context::emulator();
    let mut b = ctx.upload(&[SENTINEL; 10]).unwrap();
    let result = b.view_mut(3..7).and_then(|mut v| v.copy_from_host(&vec![1.0f32; host]));
    outcome(result, [still("buffer", &b, SENTINEL.to_bits())])
}

/// Where `Context::copy`'s arguments come from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CopyFrom {
    Same,
    ForeignSource,
    ForeignSourceView,
    ForeignDestination,
    ForeignCaller,
}

/// Copies `src_len` elements into `dst_len` ([`SENTINEL`]-filled) ones.
fn copy_case(src_len: usize, dst_len: usize, from: CopyFrom) -> Outcome {
    let ctx = Context::emulator();
    let other = Context::emulator();
    let src_ctx = match from {
        CopyFrom::ForeignSource | CopyFrom::ForeignSourceView => &other,
        _ => &ctx,
    };
    let dst_ctx = if from == CopyFrom::ForeignDestination { &other } else { &ctx };
    let src = src_ctx.upload(&vec![1.0f32; src_len + 2]).unwrap();
    let mut dst = dst_ctx.upload(&vec![SENTINEL; dst_len]).unwrap();
    let call_ctx = if from == CopyFrom::ForeignCaller { &other } else { &ctx };
    let src_view = if from == CopyFrom::ForeignSourceView {
        src.view(1..src_len + 1).unwrap()
    } else {
        src.view(0..src_len).unwrap()
    };
    let result = call_ctx.copy(src_view, dst.as_view_mut());
    outcome(result, [still("destination", &dst, SENTINEL.to_bits())])
}

fn alloc_case<T: Float>(len: usize) -> Outcome {
    let ctx = Context::emulator();
    outcome(ctx.alloc::<T>(len), [])
}

// ---------------------------------------------------------------------------------------------
// Raw launches and timing.

/// Launches `def` (a correct self-test kernel, which would write `out` if it ran) with
/// `grid` x `block` and `shared(ctx)` dynamic shared bytes.
fn launch_case(
    def: &'static KernelDef<SelftestParams>,
    grid: Dim3,
    block: Dim3,
    shared: fn(&Context) -> u32,
) -> Outcome {
    let ctx = Context::emulator();
    let n = SELFTEST_BLOCK as usize;
    let input = ctx.upload(&vec![1.5f32; n]).unwrap();
    let mut out = ctx.alloc::<f32>(n).unwrap();
    let params = SelftestParams { input: input.as_view().global(), out: out.as_view_mut().global_mut() };
    let cfg = LaunchConfig { grid, block, shared_bytes: shared(&ctx) };
    let result = ctx.launch(def, cfg, params);
    outcome(result, [still_fresh("out", &out)])
}

fn kernel_shared(_: &Context) -> u32 {
    SELFTEST_SHARED_BYTES
}

fn over_device_limit(ctx: &Context) -> u32 {
    ctx.max_shared_bytes() + 1
}

fn time_runs_case(flush_l2: bool) -> Outcome {
    let ctx = Context::emulator();
    let x = ctx.upload(&[1.0f32; 8]).unwrap();
    let mut y = ctx.alloc::<f32>(8).unwrap();
    let calls = Cell::new(0);
    let result = ctx.time_runs(1, 3, flush_l2, || {
        calls.set(calls.get() + 1);
        ew::silu(&ctx, x.as_view(), y.as_view_mut())
    });
    let ran = (calls.get() > 0).then(|| format!("the timed closure ran {} times", calls.get()));
    outcome(result, [ran, still_fresh("y", &y)])
}

const BLOCK: Dim3 = Dim3::x(SELFTEST_BLOCK);
const ONE: Dim3 = Dim3::x(1);

/// Paged decode with v02 (two sequences, 4 heads over 2 kv heads, head_dim 32, pages of 16):
/// `q_len` new tokens, the given context lengths, K cache one element off a 16-byte boundary
/// when `misaligned`. The output must stay untouched.
fn paged_case(q_len: usize, lens: [i32; 2], misaligned: bool, split: paged::Split) -> Outcome {
    paged_case_with("v02_vec", q_len, lens, misaligned, split)
}

/// As [`paged_case`], with the version named `version`.
fn paged_case_with(version: &str, q_len: usize, lens: [i32; 2], misaligned: bool, split: paged::Split) -> Outcome {
    let ctx = Context::emulator();
    let s = paged::PagedShape {
        batch: 2,
        heads: 4,
        kv_heads: 2,
        q_len,
        head_dim: 32,
        page_size: 16,
        num_pages: 4,
        max_pages: 2,
    };
    let n = s.cache_len();
    let q = ctx.alloc::<bf16>(s.q_elems().max(1)).unwrap();
    let kv = ctx.alloc::<bf16>(n + 8).unwrap();
    let mut o = ctx.alloc::<bf16>(s.q_elems().max(1)).unwrap();
    let r = paged::PagedTables::new(&ctx, &s, &[0, 1, 2, 3], &lens).and_then(|pt| {
        let input = paged::PagedDecodeInput {
            q: q.view(0..s.q_elems()).unwrap(),
            k_cache: kv.view(if misaligned { 1..n + 1 } else { 0..n }).unwrap(),
            v_cache: kv.view(0..n).unwrap(),
            tables: &pt,
            shape: s,
            scale: None,
            split,
        };
        let v = paged::version(version).expect("the version is in the ladder");
        paged::paged_decode_with(&ctx, v, input, o.view_mut(0..s.q_elems()).unwrap())
    });
    outcome(r, [still_fresh("o", &o)])
}

/// The ways a tensor-core GEMM call can be wrong, one per case below.
#[derive(Clone, Copy)]
enum TcWay {
    OutType,
    ShortBias,
    ShortResidual,
    Batch,
    SmallLda,
    ForeignA,
    ForeignBias,
    TmaMisaligned,
    TmaOddLdb,
    BiasTransC,
}

/// An 8 x 8 x 8 bf16 GEMM into f32 C (16-bit C for `OutType`), broken the way `way` says.
fn gemm_tc_case(way: TcWay) -> Outcome {
    use ferrokern::gemm::Gemm;
    use ferrokern::gemm_tc::{self, Epilogue};
    let ctx = Context::emulator();
    let other = Context::emulator();
    let a = ctx.alloc::<bf16>(72).unwrap();
    let b = ctx.alloc::<bf16>(72).unwrap();
    let a_other = other.alloc::<bf16>(64).unwrap();
    let bias_other = other.alloc::<f32>(8).unwrap();
    let bias_short = ctx.alloc::<f32>(7).unwrap();
    let res_short = ctx.alloc::<f32>(63).unwrap();
    let mut c = ctx.alloc::<f32>(64).unwrap();
    let mut c16 = ctx.alloc::<f16>(64).unwrap();
    let mut g = Gemm::new(8, 8, 8);
    let v01 = &gemm_tc::VERSIONS[0];
    let v02 = gemm_tc::version("v02_wgmma").expect("v02_wgmma in the ladder");
    let none = Epilogue::<f32>::default();
    let (av, bv) = (a.view(0..64).unwrap(), b.view(0..64).unwrap());
    let r = match way {
        TcWay::OutType => gemm_tc::gemm_tc_ex(&ctx, v01, &g, av, bv, c16.as_view_mut(), &Epilogue::default()),
        TcWay::ShortBias => {
            let ep = Epilogue { bias: Some(bias_short.as_view()), gelu: true, residual: None };
            gemm_tc::gemm_tc_ex(&ctx, v01, &g, av, bv, c.as_view_mut(), &ep)
        }
        TcWay::ShortResidual => {
            let ep = Epilogue { bias: None, gelu: false, residual: Some(res_short.as_view()) };
            gemm_tc::gemm_tc_ex(&ctx, v01, &g, av, bv, c.as_view_mut(), &ep)
        }
        TcWay::Batch => {
            g = Gemm::new(4, 4, 4).batched(2);
            gemm_tc::gemm_tc_ex(&ctx, v01, &g, av, bv, c.as_view_mut(), &none)
        }
        TcWay::SmallLda => {
            g.lda = 7;
            gemm_tc::gemm_tc_ex(&ctx, v01, &g, av, bv, c.as_view_mut(), &none)
        }
        TcWay::ForeignA => gemm_tc::gemm_tc_ex(&ctx, v01, &g, a_other.as_view(), bv, c.as_view_mut(), &none),
        TcWay::ForeignBias => {
            let ep = Epilogue { bias: Some(bias_other.as_view()), gelu: false, residual: None };
            gemm_tc::gemm_tc_ex(&ctx, v01, &g, av, bv, c.as_view_mut(), &ep)
        }
        TcWay::TmaMisaligned => gemm_tc::gemm_tc_ex(&ctx, v02, &g, a.view(1..65).unwrap(), bv, c.as_view_mut(), &none),
        TcWay::TmaOddLdb => {
            g.ldb = 9;
            gemm_tc::gemm_tc_ex(&ctx, v02, &g, av, b.view(0..72).unwrap(), c.as_view_mut(), &none)
        }
        TcWay::BiasTransC => {
            let bias = ctx.alloc::<f32>(8).unwrap();
            let ep = Epilogue { bias: Some(bias.as_view()), gelu: false, residual: None };
            g = g.with_trans_c(ferrokern::gemm::Trans::T);
            gemm_tc::gemm_tc_ex(&ctx, v01, &g, av, bv, c.as_view_mut(), &ep)
        }
    };
    outcome(r, [still_fresh("c", &c), still_fresh("c16", &c16)])
}

/// A row op called with a forced strategy it cannot take: `which` names the call.
fn row_strategy_case(which: &str, rows: usize, cols: usize, strategy: RowStrategy) -> Outcome {
    let ctx = Context::emulator();
    let shape = Rows::new(rows, cols);
    let x = ctx.upload(&vec![0.5f32; rows * cols]).unwrap();
    let mut y = ctx.alloc::<f32>(rows * cols).unwrap();
    let mut per_row = ctx.alloc::<f32>(rows).unwrap();
    let s = Some(strategy);
    let result = match which {
        "sum" => ferrokern::reduce::sum_with(&ctx, s, x.as_view(), shape, per_row.as_view_mut()),
        "softmax" => ferrokern::softmax::softmax_with(&ctx, s, x.as_view(), shape, y.as_view_mut()),
        "softmax_backward" => {
            ferrokern::softmax::softmax_backward_with(&ctx, s, x.as_view(), x.as_view(), shape, y.as_view_mut())
        }
        "rmsnorm_backward" => {
            let gamma = ctx.upload(&vec![1.0f32; cols]).unwrap();
            let rstd = ctx.upload(&vec![1.0f32; rows]).unwrap();
            let grad = ferrokern::norm::NormGrad {
                dy: x.as_view(),
                x: x.as_view(),
                gamma: gamma.as_view(),
                mean: None,
                rstd: rstd.as_view(),
                shape,
            };
            let mut dgamma = ctx.alloc::<f32>(cols).unwrap();
            let r = ferrokern::norm::rmsnorm_backward_with(&ctx, s, grad, y.as_view_mut(), dgamma.as_view_mut());
            return outcome(r, [still_fresh("dx", &y), still_fresh("dgamma", &dgamma)]);
        }
        other => panic!("no row strategy case for {other}"),
    };
    outcome(result, [still_fresh("y", &y), still_fresh("per-row output", &per_row)])
}

/// The ways an attention backward call can be wrong, one per case below.
#[derive(Clone, Copy)]
enum BwdWay {
    ShortDo,
    ShortLse,
    ShortDk,
    LongDq,
    HeadDim48,
    HeadsNotMultiple,
    NanScale,
    ForeignDv,
    ForeignCall,
    /// v02_mma chosen explicitly with a d_o view one element (2 bytes) past a 16-byte boundary.
    MisalignedDoV02,
    /// Head dim 256 (v02_mma alone has it) with that d_o, the version left to the launcher.
    MisalignedDoD256,
}

/// An attention backward (2 heads over 1 kv head, 9 queries, 11 keys, head dim 64, bf16)
/// broken the way `way` says. The gradients must stay untouched.
fn attention_backward_case(way: BwdWay) -> Outcome {
    use ferrokern::attention::{AttentionInput, AttentionShape};
    use ferrokern::attention_backward::{
        AttentionBackwardInput, AttentionGrads, BackwardOptions, attention_backward, attention_backward_with, version,
    };
    let ctx = Context::emulator();
    let other = Context::emulator();
    let head_dim = if matches!(way, BwdWay::MisalignedDoD256) { 256 } else { 64 };
    let mut s = AttentionShape { batch: 1, heads: 2, kv_heads: 1, seq_q: 9, seq_k: 11, head_dim };
    let (ql, kl, ll) = (s.q_len(), s.kv_len(), s.lse_len());
    let q = ctx.alloc::<bf16>(ql + 64).unwrap();
    let kv = ctx.alloc::<bf16>(kl).unwrap();
    let lse = ctx.alloc::<f32>(ll).unwrap();
    let mut dq = ctx.alloc::<bf16>(ql + 1).unwrap();
    let mut dk = ctx.alloc::<bf16>(kl).unwrap();
    let mut dv = ctx.alloc::<bf16>(kl).unwrap();
    let mut dv_other = other.alloc::<bf16>(kl).unwrap();
    let mut scale = None;
    let (mut do_len, mut lse_len, mut dk_len, mut dq_len) = (ql, ll, kl, ql);
    match way {
        BwdWay::ShortDo => do_len -= 1,
        BwdWay::ShortLse => lse_len -= 1,
        BwdWay::ShortDk => dk_len -= 1,
        BwdWay::LongDq => dq_len += 1,
        BwdWay::HeadDim48 => s.head_dim = 48,
        BwdWay::HeadsNotMultiple => s.kv_heads = 3,
        BwdWay::NanScale => scale = Some(f32::NAN),
        BwdWay::ForeignDv | BwdWay::ForeignCall | BwdWay::MisalignedDoV02 | BwdWay::MisalignedDoD256 => {}
    }
    let d_o_start = if matches!(way, BwdWay::MisalignedDoV02 | BwdWay::MisalignedDoD256) { 1 } else { 0 };
    let input = AttentionBackwardInput {
        forward: AttentionInput {
            q: q.view(0..ql).unwrap(),
            k: kv.as_view(),
            v: kv.as_view(),
            shape: s,
            causal: true,
            scale,
        },
        o: q.view(0..ql).unwrap(),
        d_o: q.view(d_o_start..d_o_start + do_len).unwrap(),
        lse: lse.view(0..lse_len).unwrap(),
    };
    let dv_view = if matches!(way, BwdWay::ForeignDv) { dv_other.as_view_mut() } else { dv.as_view_mut() };
    let grads =
        AttentionGrads { dq: dq.view_mut(0..dq_len).unwrap(), dk: dk.view_mut(0..dk_len).unwrap(), dv: dv_view };
    let on = if matches!(way, BwdWay::ForeignCall) { &other } else { &ctx };
    let r = if matches!(way, BwdWay::MisalignedDoV02) {
        let v02 = version("v02_mma").expect("v02_mma is in the backward ladder");
        attention_backward_with(on, v02, input, grads, BackwardOptions::default())
    } else {
        attention_backward(on, input, grads, BackwardOptions::default())
    };
    outcome(
        r,
        [still_fresh("dq", &dq), still_fresh("dk", &dk), still_fresh("dv", &dv), still_fresh("dv_other", &dv_other)],
    )
}

/// An attention_varlen call (2 heads over 1 kv head, head dim 64, bf16) with the given
/// offsets over buffers of 12 query and 20 key tokens. The output must stay untouched.
fn varlen_case(cu_q: &'static [i32], cu_k: &'static [i32]) -> Outcome {
    use ferrokern::attention::{VarlenInput, attention_varlen};
    let ctx = Context::emulator();
    let (h, hk, d, tq, tk) = (2, 1, 64, 12, 20);
    let q = ctx.alloc::<bf16>(h * tq * d).unwrap();
    let kv = ctx.alloc::<bf16>(hk * tk * d).unwrap();
    let mut o = ctx.alloc::<bf16>(h * tq * d).unwrap();
    let mut lse = ctx.alloc::<f32>(h * tq).unwrap();
    let input = VarlenInput {
        q: q.as_view(),
        k: kv.as_view(),
        v: kv.as_view(),
        cu_seqlens_q: cu_q,
        cu_seqlens_k: cu_k,
        heads: h,
        kv_heads: hk,
        head_dim: d,
        causal: true,
        scale: None,
    };
    let r = attention_varlen(&ctx, input, o.as_view_mut(), lse.as_view_mut());
    outcome(r, [still_fresh("o", &o), still_fresh("lse", &lse)])
}

/// The ways an attention_varlen_backward call can be wrong besides its offsets.
#[derive(Clone, Copy)]
enum VarlenBwdWay {
    /// Only the offsets given (maybe bad).
    Offsets,
    ShortLse,
    ShortDo,
    LongDk,
    /// q holds 12 tokens and half of one more.
    PartialToken,
    HeadDim48,
    HeadsNotMultiple,
    NanScale,
    ForeignDq,
    /// v02_mma chosen explicitly with a d_o view one element past a 16-byte boundary.
    MisalignedDoV02,
    /// v02_mma chosen explicitly at head dim 32 (only v01_simt has it).
    HeadDim32V02,
}

/// An attention_varlen_backward call (2 heads over 1 kv head, head dim 64, bf16, buffers of
/// 12 query and 20 key tokens) with the given offsets, broken the way `way` says. The
/// gradients must stay untouched.
fn varlen_backward_case(cu_q: &'static [i32], cu_k: &'static [i32], way: VarlenBwdWay) -> Outcome {
    use VarlenBwdWay as W;
    use ferrokern::attention::VarlenInput;
    use ferrokern::attention_backward::{
        AttentionGrads, BackwardOptions, VarlenBackwardInput, attention_varlen_backward,
        attention_varlen_backward_with, version,
    };
    let ctx = Context::emulator();
    let other = Context::emulator();
    let (mut h, mut hk, mut d, tq, tk) = (2, 1, 64, 12, 20);
    match way {
        W::HeadDim48 => d = 48,
        W::HeadDim32V02 => d = 32,
        W::HeadsNotMultiple => (h, hk) = (3, 2),
        _ => {}
    }
    let (ql, kl, ll) = (h * tq * d, hk * tk * d, h * tq);
    let q = ctx.alloc::<bf16>(ql + 64).unwrap();
    let kv = ctx.alloc::<bf16>(kl + 1).unwrap();
    let lse = ctx.alloc::<f32>(ll).unwrap();
    let mut dq = ctx.alloc::<bf16>(ql).unwrap();
    let mut dk = ctx.alloc::<bf16>(kl + 1).unwrap();
    let mut dv = ctx.alloc::<bf16>(kl).unwrap();
    let mut dq_other = other.alloc::<bf16>(ql).unwrap();
    let (mut q_len, mut lse_len, mut do_len, mut dk_len) = (ql, ll, ql, kl);
    match way {
        W::ShortLse => lse_len -= 1,
        W::ShortDo => do_len -= 1,
        W::LongDk => dk_len += 1,
        W::PartialToken => q_len += d / 2,
        _ => {}
    }
    let d_o_start = if matches!(way, W::MisalignedDoV02) { 1 } else { 0 };
    let forward = VarlenInput {
        q: q.view(0..q_len).unwrap(),
        k: kv.view(0..kl).unwrap(),
        v: kv.view(0..kl).unwrap(),
        cu_seqlens_q: cu_q,
        cu_seqlens_k: cu_k,
        heads: h,
        kv_heads: hk,
        head_dim: d,
        causal: true,
        scale: if matches!(way, W::NanScale) { Some(f32::NAN) } else { None },
    };
    let input = VarlenBackwardInput {
        forward,
        o: q.view(0..ql).unwrap(),
        d_o: q.view(d_o_start..d_o_start + do_len).unwrap(),
        lse: lse.view(0..lse_len).unwrap(),
    };
    let dq_view = if matches!(way, W::ForeignDq) { dq_other.as_view_mut() } else { dq.as_view_mut() };
    let grads = AttentionGrads { dq: dq_view, dk: dk.view_mut(0..dk_len).unwrap(), dv: dv.as_view_mut() };
    let r = if matches!(way, W::MisalignedDoV02 | W::HeadDim32V02) {
        let v02 = version("v02_mma").expect("v02_mma is in the backward ladder");
        attention_varlen_backward_with(&ctx, v02, input, grads, BackwardOptions::default())
    } else {
        attention_varlen_backward(&ctx, input, grads, BackwardOptions { deterministic: true })
    };
    outcome(
        r,
        [still_fresh("dq", &dq), still_fresh("dk", &dk), still_fresh("dv", &dv), still_fresh("dq_other", &dq_other)],
    )
}

/// The attention_varlen_backward cases: every offset-table error, then the lengths, head dims,
/// heads, scale, contexts and alignment.
fn varlen_backward_table() -> Vec<Case> {
    use VarlenBwdWay as W;
    use Want::*;
    const OP: &str = "attention_varlen_backward";
    const Q: &[i32] = &[0, 5, 12];
    const K: &[i32] = &[0, 4, 20];
    vec![
        case(
            "attention_varlen_backward: non-monotone cu_seqlens_k",
            Invalid,
            &[OP, "cu_seqlens_k[2] = 3 < cu_seqlens_k[1] = 4", "non-decreasing"],
            || varlen_backward_case(Q, &[0, 4, 3], W::Offsets),
        ),
        case(
            "attention_varlen_backward: cu_seqlens_q past the buffer",
            Invalid,
            &[OP, "cu_seqlens_q ends at 13", "holds 12 tokens"],
            || varlen_backward_case(&[0, 5, 13], K, W::Offsets),
        ),
        case(
            "attention_varlen_backward: cu_seqlens_k short of the buffer",
            Invalid,
            &[OP, "cu_seqlens_k ends at 19", "holds 20 tokens"],
            || varlen_backward_case(Q, &[0, 4, 19], W::Offsets),
        ),
        case(
            "attention_varlen_backward: mismatched batch counts",
            Invalid,
            &[OP, "cu_seqlens_q has 4 offsets and cu_seqlens_k 3", "batch + 1"],
            || varlen_backward_case(&[0, 5, 5, 12], K, W::Offsets),
        ),
        case(
            "attention_varlen_backward: offsets not starting at 0",
            Invalid,
            &[OP, "cu_seqlens_q[0] = 1", "start at 0"],
            || varlen_backward_case(&[1, 5, 12], K, W::Offsets),
        ),
        case("attention_varlen_backward: empty offsets", Invalid, &[OP, "cu_seqlens_q is empty"], || {
            varlen_backward_case(&[], &[], W::Offsets)
        }),
        case("attention_varlen_backward: lse one element short", Invalid, &[OP, "lse has 23", "needs 24"], || {
            varlen_backward_case(Q, K, W::ShortLse)
        }),
        case("attention_varlen_backward: d_o one element short", Invalid, &[OP, "d_o has 1535", "needs 1536"], || {
            varlen_backward_case(Q, K, W::ShortDo)
        }),
        case("attention_varlen_backward: dk one element long", Invalid, &[OP, "dk has 1281", "needs 1280"], || {
            varlen_backward_case(Q, K, W::LongDk)
        }),
        case(
            "attention_varlen_backward: q not whole tokens",
            Invalid,
            &[OP, "q has 1568 elements", "whole number of tokens of 128"],
            || varlen_backward_case(Q, K, W::PartialToken),
        ),
        case(
            "attention_varlen_backward: head dim 48",
            Invalid,
            &[OP, "head_dim = 48", "v01_simt: 32, 64, 96, 128"],
            || varlen_backward_case(Q, K, W::HeadDim48),
        ),
        case(
            "attention_varlen_backward: heads not a multiple of kv_heads",
            Invalid,
            &[OP, "heads = 3 is not a multiple of kv_heads = 2"],
            || varlen_backward_case(Q, K, W::HeadsNotMultiple),
        ),
        case("attention_varlen_backward: NaN scale", Invalid, &[OP, "scale = NaN", "finite"], || {
            varlen_backward_case(Q, K, W::NanScale)
        }),
        case("attention_varlen_backward: dq from another context", WrongContext, &[OP], || {
            varlen_backward_case(Q, K, W::ForeignDq)
        }),
        case(
            "attention_varlen_backward: v02_mma with a misaligned d_o",
            Invalid,
            &[OP, "d_o starts at", "not 16-byte aligned", "v01_simt"],
            || varlen_backward_case(Q, K, W::MisalignedDoV02),
        ),
        case(
            "attention_varlen_backward: v02_mma at head dim 32",
            Invalid,
            &[OP, "head_dim = 32", "v02_mma has no variable-length backward"],
            || varlen_backward_case(Q, K, W::HeadDim32V02),
        ),
    ]
}

fn other_table() -> Vec<Case> {
    use Want::*;
    vec![
        // DeviceBuffer::view
        case("view: end past the buffer", Invalid, &["view", "5..11", "10 elements"], || view_case(10, range(5, 11))),
        case("view: start and end past the buffer", Invalid, &["view", "11..12", "10 elements"], || {
            view_case(10, range(11, 12))
        }),
        case("view: inverted range", Invalid, &["view", "7..3"], || view_case(10, range(7, 3))),
        case("view: inverted range past the end", Invalid, &["view", "12..11"], || view_case(10, range(12, 11))),
        case("view: end at usize::MAX", Invalid, &["view", "10 elements"], || view_case(10, range(0, usize::MAX))),
        case("view: one element of an empty buffer", Invalid, &["view", "0..1", "0 elements"], || {
            view_case(0, range(0, 1))
        }),
        // DeviceBuffer::view_mut
        case("view_mut: end past the buffer", Invalid, &["view_mut", "5..11", "10 elements"], || {
            view_mut_case(10, range(5, 11))
        }),
        case("view_mut: start and end past the buffer", Invalid, &["view_mut", "11..12"], || {
            view_mut_case(10, range(11, 12))
        }),
        case("view_mut: inverted range", Invalid, &["view_mut", "7..3"], || view_mut_case(10, range(7, 3))),
        case("view_mut: end at usize::MAX", Invalid, &["view_mut", "10 elements"], || {
            view_mut_case(10, range(0, usize::MAX))
        }),
        case("view_mut: one element of an empty buffer", Invalid, &["view_mut", "0..1"], || {
            view_mut_case(0, range(0, 1))
        }),
        // BufMut::reborrow (from a six-element view)
        case("reborrow: end past the view", Invalid, &["0..7", "view of 6 elements"], || reborrow_case(range(0, 7))),
        case("reborrow: start and end past the view", Invalid, &["7..7", "view of 6 elements"], || {
            reborrow_case(range(7, 7))
        }),
        case("reborrow: inverted range", Invalid, &["4..2", "inverted"], || reborrow_case(range(4, 2))),
        case("reborrow: end at usize::MAX", Invalid, &["view of 6 elements"], || reborrow_case(range(1, usize::MAX))),
        // copy_from_host
        case(
            "copy_from_host: fewer host elements than the buffer",
            Invalid,
            &["copy_from_host", "9 host elements", "10"],
            || copy_from_host_case(9),
        ),
        case(
            "copy_from_host: more host elements than the buffer",
            Invalid,
            &["copy_from_host", "11 host elements", "10"],
            || copy_from_host_case(11),
        ),
        case(
            "copy_from_host: no host elements for a full buffer",
            Invalid,
            &["copy_from_host", "0 host elements", "10"],
            || copy_from_host_case(0),
        ),
        case(
            "copy_from_host: more host elements than a view",
            Invalid,
            &["copy_from_host", "5 host elements", "4"],
            || view_copy_from_host_case(5),
        ),
        case(
            "copy_from_host: the whole buffer's worth into a view",
            Invalid,
            &["copy_from_host", "10 host elements", "4"],
            || view_copy_from_host_case(10),
        ),
        // Context::copy
        case("copy: destination shorter", Invalid, &["copy", "source has 10", "destination 9"], || {
            copy_case(10, 9, CopyFrom::Same)
        }),
        case("copy: destination longer", Invalid, &["copy", "source has 9", "destination 10"], || {
            copy_case(9, 10, CopyFrom::Same)
        }),
        case("copy: source from another context", WrongContext, &["copy", "allocate every buffer"], || {
            copy_case(10, 10, CopyFrom::ForeignSource)
        }),
        case("copy: source view of another context's buffer", WrongContext, &["copy", "allocate every buffer"], || {
            copy_case(10, 10, CopyFrom::ForeignSourceView)
        }),
        case("copy: destination from another context", WrongContext, &["copy", "allocate every buffer"], || {
            copy_case(10, 10, CopyFrom::ForeignDestination)
        }),
        case("copy: called on another context", WrongContext, &["copy", "allocate every buffer"], || {
            copy_case(10, 10, CopyFrom::ForeignCaller)
        }),
        case("copy: another context and mismatched lengths", WrongContext, &["copy", "allocate every buffer"], || {
            copy_case(10, 9, CopyFrom::ForeignDestination)
        }),
        // Context::alloc
        case(
            "alloc: usize::MAX / 2 f32 elements (byte size overflows usize)",
            Invalid,
            &["alloc", "elements of f32", "overflow"],
            || alloc_case::<f32>(usize::MAX / 2),
        ),
        case(
            "alloc: usize::MAX f16 elements (byte size overflows usize)",
            Invalid,
            &["alloc", "elements of f16", "overflow"],
            || alloc_case::<f16>(usize::MAX),
        ),
        case(
            "alloc: usize::MAX / 2 + 1 bf16 elements (byte size overflows usize)",
            Invalid,
            &["alloc", "elements of bf16", "overflow"],
            || alloc_case::<bf16>(usize::MAX / 2 + 1),
        ),
        case(
            "alloc: usize::MAX / 8 f32 elements (over isize::MAX bytes)",
            OutOfMemory,
            &["out of host (emulator) memory", "smaller shapes"],
            || alloc_case::<f32>(usize::MAX / 8),
        ),
        case(
            "alloc: 2^60 f32 elements (4 EiB)",
            OutOfMemory,
            &["out of host (emulator) memory", "smaller shapes"],
            || alloc_case::<f32>(1 << 60),
        ),
        // Context::launch: shapes the hardware cannot run
        case("launch: block of 1025 threads", Invalid, &["ok_oob", "1025 threads", "limit is 1024"], || {
            launch_case(&st::OK_OOB, ONE, Dim3::x(1025), kernel_shared)
        }),
        case("launch: block of 32 x 33 threads", Invalid, &["ok_oob", "1056 threads", "limit is 1024"], || {
            launch_case(&st::OK_OOB, ONE, Dim3::xy(32, 33), kernel_shared)
        }),
        case("launch: block z of 65", Invalid, &["ok_oob", "block z = 65", "64"], || {
            launch_case(&st::OK_OOB, ONE, Dim3::new(1, 1, 65), kernel_shared)
        }),
        case("launch: grid y of 65536", Invalid, &["ok_oob", "y or z over 65535"], || {
            launch_case(&st::OK_OOB, Dim3::new(1, 65536, 1), BLOCK, kernel_shared)
        }),
        case("launch: grid z of 65536", Invalid, &["ok_oob", "y or z over 65535"], || {
            launch_case(&st::OK_OOB, Dim3::new(1, 1, 65536), BLOCK, kernel_shared)
        }),
        case("launch: grid x of 2^31", Invalid, &["ok_oob", "2^31 - 1"], || {
            launch_case(&st::OK_OOB, Dim3::x(1 << 31), BLOCK, kernel_shared)
        }),
        case("launch: zero grid", Invalid, &["ok_oob", "no zero dimension"], || {
            launch_case(&st::OK_OOB, Dim3::x(0), BLOCK, kernel_shared)
        }),
        case("launch: grid with y of 0", Invalid, &["ok_oob", "no zero dimension"], || {
            launch_case(&st::OK_OOB, Dim3::new(1, 0, 1), BLOCK, kernel_shared)
        }),
        case("launch: zero block", Invalid, &["ok_oob", "no zero dimension"], || {
            launch_case(&st::OK_OOB, ONE, Dim3::x(0), kernel_shared)
        }),
        case(
            "launch: dynamic shared memory one byte over the device limit",
            Invalid,
            &["ok_race", "bytes of shared memory exceed"],
            || launch_case(&st::OK_RACE, ONE, BLOCK, over_device_limit),
        ),
        case(
            "launch: dynamic shared memory of u32::MAX bytes",
            Invalid,
            &["ok_race", "4294967295 bytes of shared memory exceed"],
            || launch_case(&st::OK_RACE, ONE, BLOCK, |_| u32::MAX),
        ),
        // paged_decode (v02): new-token count, contexts against it, alignment, split chunks
        case("paged_decode: q_len 0", Invalid, &["paged_decode", "q_len = 0", "1 to 8"], || {
            paged_case(0, [20, 32], false, paged::Split::Off)
        }),
        case("paged_decode: q_len 9", Invalid, &["paged_decode", "q_len = 9", "1 to 8"], || {
            paged_case(9, [20, 32], false, paged::Split::Off)
        }),
        case(
            "paged_decode: context shorter than q_len",
            Invalid,
            &["paged_decode", "context_lens[1] = 3", "shorter than q_len = 4"],
            || paged_case(4, [20, 3], false, paged::Split::Off),
        ),
        case("paged_decode: v02 with a misaligned k_cache", Invalid, &["paged_decode", "v02_vec", "16-byte"], || {
            paged_case(2, [20, 32], true, paged::Split::Off)
        }),
        case("paged_decode: v03 with a misaligned k_cache", Invalid, &["paged_decode", "v03_mma", "16-byte"], || {
            paged_case_with("v03_mma", 2, [20, 32], true, paged::Split::Off)
        }),
        case("paged_decode: v03, q_len 9", Invalid, &["paged_decode", "q_len = 9", "1 to 8"], || {
            paged_case_with("v03_mma", 9, [20, 32], false, paged::Split::Off)
        }),
        case(
            "paged_decode: split chunk of 48",
            Invalid,
            &["paged_decode", "Split::Keys(48)", "multiple of 32"],
            || paged_case(2, [20, 32], false, paged::Split::Keys(48)),
        ),
        // gemm_tc: output type, epilogue operands, batch, leading dimension, contexts, TMA rules
        case("gemm_tc: f16 C for bf16 inputs", Invalid, &["gemm_tc", "f32 or the input type"], || {
            gemm_tc_case(TcWay::OutType)
        }),
        case("gemm_tc: bias shorter than n", Invalid, &["gemm_tc", "bias has 7", "one per column"], || {
            gemm_tc_case(TcWay::ShortBias)
        }),
        case("gemm_tc: residual shorter than C", Invalid, &["gemm_tc", "residual has 63", "needs 64"], || {
            gemm_tc_case(TcWay::ShortResidual)
        }),
        case("gemm_tc: batch of 2", Invalid, &["gemm_tc", "batch = 2", "loop over the batch"], || {
            gemm_tc_case(TcWay::Batch)
        }),
        case("gemm_tc: lda smaller than a row of A", Invalid, &["lda = 7", "pass lda >= 8"], || {
            gemm_tc_case(TcWay::SmallLda)
        }),
        case("gemm_tc: A from another context", WrongContext, &["gemm_tc"], || gemm_tc_case(TcWay::ForeignA)),
        case("gemm_tc: bias from another context", WrongContext, &["gemm_tc"], || gemm_tc_case(TcWay::ForeignBias)),
        case("gemm_tc: v02 with a misaligned A", Invalid, &["gemm_tc", "TMA", "16-byte"], || {
            gemm_tc_case(TcWay::TmaMisaligned)
        }),
        case("gemm_tc: v02 with ldb = 9", Invalid, &["gemm_tc", "TMA", "leading dimension 9"], || {
            gemm_tc_case(TcWay::TmaOddLdb)
        }),
        case("gemm_tc: a bias with C stored transposed", Invalid, &["gemm_tc", "trans_c = N"], || {
            gemm_tc_case(TcWay::BiasTransC)
        }),
        // Row ops: a forced strategy the op or the shape cannot take
        case("sum: shared strategy", Invalid, &["sum", "shared strategy", "use block"], || {
            row_strategy_case("sum", 2, 9000, RowStrategy::Shared)
        }),
        case(
            "rmsnorm_backward: shared strategy",
            Invalid,
            &["rmsnorm_backward", "shared strategy", "use block"],
            || row_strategy_case("rmsnorm_backward", 2, 9000, RowStrategy::Shared),
        ),
        case(
            "softmax: shared strategy for a row past shared memory",
            Invalid,
            &["softmax", "58017 columns", "232464 bytes", "232448", "58016 columns fit", "use block or split"],
            || row_strategy_case("softmax", 1, 58_017, RowStrategy::Shared),
        ),
        case("softmax_backward: split strategy", Invalid, &["softmax_backward", "split strategy", "use warp"], || {
            row_strategy_case("softmax_backward", 2, 40_000, RowStrategy::Split)
        }),
        case(
            "sum: split strategy past its grid's rows",
            Invalid,
            &["sum", "65536 rows", "at most 65535 rows", "use block"],
            || row_strategy_case("sum", 65_536, 3, RowStrategy::Split),
        ),
        // attention_backward: lengths against the shape, head dim, heads, scale, contexts
        case(
            "attention_backward: d_o one element short",
            Invalid,
            &["attention_backward", "d_o has 1151", "needs 1152"],
            || attention_backward_case(BwdWay::ShortDo),
        ),
        case(
            "attention_backward: lse one element short",
            Invalid,
            &["attention_backward", "lse has 17", "needs 18"],
            || attention_backward_case(BwdWay::ShortLse),
        ),
        case(
            "attention_backward: dk one element short",
            Invalid,
            &["attention_backward", "dk has 703", "needs 704"],
            || attention_backward_case(BwdWay::ShortDk),
        ),
        case(
            "attention_backward: dq one element long",
            Invalid,
            &["attention_backward", "dq has 1153", "needs 1152"],
            || attention_backward_case(BwdWay::LongDq),
        ),
        case("attention_backward: head dim 48", Invalid, &["attention_backward", "head_dim = 48", "64"], || {
            attention_backward_case(BwdWay::HeadDim48)
        }),
        case(
            "attention_backward: heads not a multiple of kv_heads",
            Invalid,
            &["attention_backward", "heads = 2 is not a multiple of kv_heads = 3"],
            || attention_backward_case(BwdWay::HeadsNotMultiple),
        ),
        case("attention_backward: NaN scale", Invalid, &["attention_backward", "scale = NaN", "finite"], || {
            attention_backward_case(BwdWay::NanScale)
        }),
        case("attention_backward: dv from another context", WrongContext, &["attention_backward"], || {
            attention_backward_case(BwdWay::ForeignDv)
        }),
        case("attention_backward: called on another context", WrongContext, &["attention_backward"], || {
            attention_backward_case(BwdWay::ForeignCall)
        }),
        case(
            "attention_backward: v02_mma with a misaligned d_o",
            Invalid,
            &["attention_backward", "d_o starts at", "not 16-byte aligned", "v01_simt"],
            || attention_backward_case(BwdWay::MisalignedDoV02),
        ),
        case(
            "attention_backward: head dim 256 with a misaligned d_o",
            Invalid,
            &["attention_backward", "d_o starts at", "not 16-byte aligned", "v02_mma", "head dims 32-128"],
            || attention_backward_case(BwdWay::MisalignedDoD256),
        ),
        // attention_varlen: offset tables
        case(
            "attention_varlen: non-monotone cu_seqlens_q",
            Invalid,
            &["attention_varlen", "cu_seqlens_q[2] = 3 < cu_seqlens_q[1] = 5", "non-decreasing"],
            || varlen_case(&[0, 5, 3, 12], &[0, 4, 8, 20]),
        ),
        case(
            "attention_varlen: cu_seqlens_k past the buffer",
            Invalid,
            &["attention_varlen", "cu_seqlens_k ends at 21", "holds 20 tokens"],
            || varlen_case(&[0, 5, 12], &[0, 4, 21]),
        ),
        case(
            "attention_varlen: cu_seqlens_q short of the buffer",
            Invalid,
            &["attention_varlen", "cu_seqlens_q ends at 11", "holds 12 tokens"],
            || varlen_case(&[0, 5, 11], &[0, 4, 20]),
        ),
        case(
            "attention_varlen: mismatched batch counts",
            Invalid,
            &["attention_varlen", "cu_seqlens_q has 3 offsets and cu_seqlens_k 4", "batch + 1"],
            || varlen_case(&[0, 5, 12], &[0, 4, 8, 20]),
        ),
        case(
            "attention_varlen: offsets not starting at 0",
            Invalid,
            &["attention_varlen", "cu_seqlens_k[0] = 2"],
            || varlen_case(&[0, 5, 12], &[2, 4, 20]),
        ),
        case("attention_varlen: empty offsets", Invalid, &["attention_varlen", "cu_seqlens_q is empty"], || {
            varlen_case(&[], &[])
        }),
        // Context::time_runs
        case("time_runs: on the emulator", Invalid, &["time_runs", "needs the GPU backend"], || time_runs_case(false)),
        case("time_runs: on the emulator with an L2 flush", Invalid, &["time_runs", "needs the GPU backend"], || {
            time_runs_case(true)
        }),
    ]
}

/// Runs one case; `Err` says how it fell short.
fn check(c: &Case) -> std::result::Result<String, String> {
    let Outcome { result, written } = catch_unwind(AssertUnwindSafe(|| (c.run)())).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a non-string payload".into());
        format!("panicked: {msg}")
    })?;
    let e = match result {
        Ok(()) => return Err(format!("was accepted; expected {:?}", c.want)),
        Err(e) => e,
    };
    let msg = e.to_string();
    if !c.want.matches(&e) {
        return Err(format!("expected {:?}, got {e:?} ({msg})", c.want));
    }
    if msg.trim().is_empty() {
        return Err("the message is empty".into());
    }
    let missing: Vec<_> = c.fix.iter().filter(|w| !msg.contains(**w)).collect();
    if !missing.is_empty() {
        return Err(format!("the message `{msg}` does not mention {missing:?}"));
    }
    if !written.is_empty() {
        return Err(format!("refused, yet: {}", written.join("; ")));
    }
    Ok(msg)
}

#[test]
fn bad_input_matrix() {
    let elementwise = elementwise_table();

    // Every op x dtype has every way that applies to it, once.
    let mut seen = HashSet::new();
    for (op, dtype, way, c) in &elementwise {
        assert!(seen.insert((*op, *dtype, *way)), "{}: listed twice", c.name);
    }
    for op in Op::ALL {
        for dtype in ["f32", "f16", "bf16"] {
            let mut ways =
                vec![Way::InputShorter, Way::OutputShorter, Way::SecondInput, Way::ForeignBuffer, Way::ForeignView];
            if two_inputs(op) {
                ways.push(Way::MissingSecond);
            }
            for way in ways {
                assert!(seen.contains(&(op, dtype, way)), "no case for {} {dtype} {}", op.name(), way.words(op));
            }
        }
    }

    let cases: Vec<Case> =
        elementwise.into_iter().map(|(_, _, _, c)| c).chain(other_table()).chain(varlen_backward_table()).collect();
    let names: HashSet<_> = cases.iter().map(|c| c.name).collect();
    assert_eq!(names.len(), cases.len(), "case names must be unique");

    let mut failures = Vec::new();
    for c in &cases {
        match check(c) {
            Ok(msg) => println!("ok  {}: {msg}", c.name),
            Err(why) => {
                println!("BAD {}: {why}", c.name);
                failures.push(format!("{}: {why}", c.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases were not refused as they should be:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    println!("bad-input matrix: {} cases, all refused", cases.len());
    assert!(cases.len() >= 100, "only {} cases", cases.len());
}
