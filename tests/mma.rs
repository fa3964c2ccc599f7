//! The tensor-core layouts, proven on the emulator (and on the GPU when present) against the
//! PTX ISA's fragment formulas: one m16n8k16 of known matrices against a plain product, with
//! fragments built from the formulas and through ldmatrix; the raw registers of every
//! ldmatrix form against the ISA's distribution; cp.async with zero-fill; and the checks
//! that must reject a mis-laid fragment (a0/a1 swapped) and a read before `cp.async.wait`.
//! On Hopper: one wgmma from canonical tiles, and bulk reductions from shared rows into
//! global memory, each with the emulator's checks of their protocols.

mod common;

use ferrokern::gpu_kernels::emu::FaultKind;
use ferrokern::gpu_kernels::gemm_tc::{self as tc, probe};
use ferrokern::gpu_kernels::{Dim3, KernelDef};
use ferrokern::{Context, Error, LaunchConfig};
use half::{bf16, f16};

const CFG: LaunchConfig =
    LaunchConfig { grid: Dim3::x(1), block: Dim3::x(32), shared_bytes: probe::PROBE_SHARED_BYTES };

/// Small integers and halves: exact in bf16 and f16, and every product and sum below is
/// exact in f32, so the mma must match the plain product bit for bit.
fn matrices() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let a = (0..256).map(|i| ((i * 7 % 23) as f32 - 11.0) * 0.5).collect();
    let b = (0..128).map(|i| ((i * 5 % 17) as f32 - 8.0) * 0.25).collect();
    let c = (0..128).map(|i| (i % 9) as f32 - 4.0).collect();
    (a, b, c)
}

/// D = A B + C, plain loops in f64.
fn product(a: &[f32], b: &[f32], c: &[f32]) -> Vec<f32> {
    let mut d = vec![0.0f32; 128];
    for i in 0..16 {
        for j in 0..8 {
            let mut s = c[i * 8 + j] as f64;
            for k in 0..16 {
                s += a[i * 16 + k] as f64 * b[k * 8 + j] as f64;
            }
            d[i * 8 + j] = s as f32;
        }
    }
    d
}

fn run_mma<T: ferrokern::gpu_kernels::device::mma::MmaInput + ferrokern::Scalar>(
    ctx: &Context,
    def: &'static KernelDef<probe::ProbeParams<T>>,
    a: &[f32],
    b: &[f32],
    c: &[f32],
) -> Result<Vec<f32>, Error> {
    let conv = |v: &[f32]| v.iter().map(|&x| T::from_f32(x)).collect::<Vec<T>>();
    let (ab, bb, cb) = (ctx.upload(&conv(a))?, ctx.upload(&conv(b))?, ctx.upload(c)?);
    let mut d = ctx.upload(&vec![f32::NAN; 128])?;
    let p = probe::ProbeParams {
        a: ab.as_view().global(),
        b: bb.as_view().global(),
        c: cb.as_view().global(),
        d: d.as_view_mut().global_mut(),
    };
    ctx.launch(def, CFG, p)?;
    d.to_host()
}

#[test]
fn mma_fragments_match_plain_product() {
    let (a, b, c) = matrices();
    let want = product(&a, &b, &c);
    for ctx in common::backends("mma_fragments_match_plain_product") {
        let got = run_mma::<bf16>(&ctx, &tc::MMA_PROBE_DIRECT_BF16, &a, &b, &c).unwrap();
        assert_eq!(got, want, "bf16 direct fragments on {}", ctx.backend());
        let got = run_mma::<f16>(&ctx, &tc::MMA_PROBE_DIRECT_F16, &a, &b, &c).unwrap();
        assert_eq!(got, want, "f16 direct fragments on {}", ctx.backend());
        let got = run_mma::<bf16>(&ctx, &tc::MMA_PROBE_LDMATRIX_BF16, &a, &b, &c).unwrap();
        assert_eq!(got, want, "bf16 fragments via ldmatrix on {}", ctx.backend());
    }
}

/// Rounding: inputs that are not exact in bf16 are rounded by the host; the mma must then
/// agree with the f64 product of the rounded inputs within the f32 accumulation bound.
#[test]
fn mma_rounded_inputs_within_f32_bound() {
    let a: Vec<f32> = (0..256).map(|i| ((i as f32) * 0.37).sin() * 3.0).collect();
    let b: Vec<f32> = (0..128).map(|i| ((i as f32) * 0.91).cos() * 2.0).collect();
    let c: Vec<f32> = (0..128).map(|i| ((i as f32) * 0.13).sin()).collect();
    let r = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x).to_f32()).collect::<Vec<f32>>();
    let (ar, br) = (r(&a), r(&b));
    for ctx in common::backends("mma_rounded_inputs_within_f32_bound") {
        let got = run_mma::<bf16>(&ctx, &tc::MMA_PROBE_DIRECT_BF16, &a, &b, &c).unwrap();
        for i in 0..16 {
            for j in 0..8 {
                let (mut s, mut abs) = (c[i * 8 + j] as f64, c[i * 8 + j].abs() as f64);
                for k in 0..16 {
                    let p = ar[i * 16 + k] as f64 * br[k * 8 + j] as f64;
                    s += p;
                    abs += p.abs();
                }
                let tol = ferrokern::reference::gamma_f32(17) * abs + 1e-30;
                let g = got[i * 8 + j] as f64;
                assert!((g - s).abs() <= tol, "({i},{j}) on {}: got {g}, want {s}, tol {tol}", ctx.backend());
            }
        }
    }
}

#[test]
fn swapped_a_registers_give_a_wrong_product() {
    let (a, b, c) = matrices();
    let want = product(&a, &b, &c);
    for ctx in common::backends("swapped_a_registers_give_a_wrong_product") {
        let got = run_mma::<bf16>(&ctx, &tc::MMA_PROBE_BUG_SWAPPED_A, &a, &b, &c).unwrap();
        let bad = got.iter().zip(&want).filter(|(g, w)| g != w).count();
        assert!(bad > 64, "a0/a1 swapped must be caught: only {bad} of 128 elements differ on {}", ctx.backend());
    }
}

/// The ISA's ldmatrix distribution: lane l, register j holds matrix j's (row l/4, columns
/// 2(l%4), +1), or with .trans (rows 2(l%4), +1, column l/4).
#[test]
fn ldmatrix_every_form_matches_isa_distribution() {
    let halves: Vec<u16> = (0..256).map(|i| (i * 37 + 11) as u16).collect();
    let words: Vec<u32> = (0..128).map(|w| halves[2 * w] as u32 | (halves[2 * w + 1] as u32) << 16).collect();
    let h = |j: usize, r: usize, c: usize| halves[64 * j + 8 * r + c] as u32;
    for ctx in common::backends("ldmatrix_every_form_matches_isa_distribution") {
        let input = ctx.upload(&words).unwrap();
        for mode in 0..6u32 {
            let (n, trans) = (1usize << (mode / 2), mode % 2 == 1);
            let mut out = ctx.upload(&vec![0xDEAD_BEEFu32; 128]).unwrap();
            let p = probe::RawParams {
                input: input.as_view().global(),
                out: out.as_view_mut().global_mut(),
                mode,
                _pad: 0,
            };
            ctx.launch(&tc::MMA_PROBE_LDMATRIX_RAW, CFG, p).unwrap();
            let got = out.to_host().unwrap();
            for l in 0..32 {
                for j in 0..n {
                    let (lo, hi) = if trans {
                        (h(j, 2 * (l % 4), l / 4), h(j, 2 * (l % 4) + 1, l / 4))
                    } else {
                        (h(j, l / 4, 2 * (l % 4)), h(j, l / 4, 2 * (l % 4) + 1))
                    };
                    assert_eq!(
                        got[4 * l + j],
                        lo | hi << 16,
                        "x{n} trans={trans} lane {l} reg {j} on {}",
                        ctx.backend()
                    );
                }
            }
        }
    }
}

fn run_cp_async(ctx: &Context, mode: u32) -> Result<Vec<u32>, Error> {
    run_cp_async_from(ctx, mode, 128)
}

/// As [`run_cp_async`] with an input of `len` words (the probe copies 128).
fn run_cp_async_from(ctx: &Context, mode: u32, len: u32) -> Result<Vec<u32>, Error> {
    let words: Vec<u32> = (0..len).map(|i| 0x1000_0000 + i * 3).collect();
    let input = ctx.upload(&words)?;
    let mut out = ctx.upload(&vec![0u32; 128])?;
    let p = probe::RawParams { input: input.as_view().global(), out: out.as_view_mut().global_mut(), mode, _pad: 0 };
    ctx.launch(&tc::MMA_PROBE_CP_ASYNC, CFG, p)?;
    out.to_host()
}

#[test]
fn cp_async_copies_and_zero_fills() {
    for ctx in common::backends("cp_async_copies_and_zero_fills") {
        for mode in [0u32, 2] {
            let got = run_cp_async(&ctx, mode).unwrap();
            for l in 0..32 {
                let from = (l + 1) % 32;
                for q in 0..4 {
                    let zero = mode == 2 && from % 2 == 1 && q >= 2;
                    let want = if zero { 0 } else { 0x1000_0000 + (4 * from + q) as u32 * 3 };
                    assert_eq!(got[4 * l + q], want, "mode {mode} lane {l} word {q} on {}", ctx.backend());
                }
            }
        }
    }
}

#[test]
fn emulator_rejects_read_before_cp_async_wait() {
    match run_cp_async(&Context::emulator(), 1) {
        Err(Error::Emulator(e)) => {
            println!("caught: {e}");
            assert!(matches!(e.kind, FaultKind::UninitSharedRead { .. }), "{e}");
            assert!(e.to_string().contains("probe.rs"), "names the line: {e}");
        }
        Err(other) => panic!("expected an emulator error, got {other}"),
        Ok(_) => panic!("the emulator accepted a read before cp.async.wait_group"),
    }
}

/// Mode 2's last lane copies 8 bytes (words 124-125) of its 16-byte chunk: inside a
/// 126-word input, yet compute-sanitizer counts the whole 16 bytes and aborts the kernel, so
/// the emulator refuses it too; a partial copy must end inside the buffer.
#[test]
fn emulator_rejects_a_partial_cp_async_whose_chunk_leaves_the_buffer() {
    match run_cp_async_from(&Context::emulator(), 2, 126) {
        Err(Error::Emulator(e)) => {
            println!("caught: {e}");
            assert!(matches!(e.kind, FaultKind::OutOfBounds { index: 124, count: 4, len: 126, .. }), "{e}");
            assert!(e.to_string().contains("probe.rs"), "names the line: {e}");
        }
        Err(other) => panic!("expected an emulator error, got {other}"),
        Ok(_) => panic!("the emulator accepted a partial cp.async whose 16 bytes leave the buffer"),
    }
    // The same copy with the whole chunk inside passes.
    run_cp_async_from(&Context::emulator(), 2, 128).unwrap();
}

#[test]
fn emulator_rejects_half_warp_mma() {
    // A warp where only some lanes reach the collective cannot complete it: the probes are
    // one-warp kernels launched with 16 threads here, so the full mask names absent lanes.
    let ctx = Context::emulator();
    let (a, b, c) = matrices();
    let conv = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<bf16>>();
    let (ab, bb, cb) = (ctx.upload(&conv(&a)).unwrap(), ctx.upload(&conv(&b)).unwrap(), ctx.upload(&c).unwrap());
    let mut d = ctx.upload(&vec![0f32; 128]).unwrap();
    let p = probe::ProbeParams {
        a: ab.as_view().global(),
        b: bb.as_view().global(),
        c: cb.as_view().global(),
        d: d.as_view_mut().global_mut(),
    };
    let half_warp = LaunchConfig { block: Dim3::x(16), ..CFG };
    match ctx.launch(&tc::MMA_PROBE_DIRECT_BF16, half_warp, p) {
        Err(Error::Emulator(e)) => {
            println!("caught: {e}");
            assert!(matches!(e.kind, FaultKind::WarpDivergence { .. }), "{e}");
        }
        other => panic!("a half-warp mma must be rejected, got {other:?}"),
    }
}

/// One wgmma from canonical tiles the threads stored themselves: A 64 x 16, B 16 x N of
/// small integers and halves (every product and sum exact in f32), for each layout (A K- or
/// M-major or in registers, B N- or K-major) and both shapes (m64n128k16, m64n256k16). On the
/// GPU this checks the descriptor and swizzle formulas and the register-A fragment layout
/// against the hardware with nothing else in the way (sm_90a only; elsewhere it says SKIP).
/// Two deliberate bugs must give a wrong product: A's descriptor with SBO 512, and register A
/// with its registers 1 and 2 swapped.
#[test]
fn wgmma_from_canonical_tiles_matches_plain_product() {
    for ctx in common::backends("wgmma_from_canonical_tiles") {
        if let Some(info) = ctx.device_info()
            && info.ptx_arch != "sm_90a"
        {
            println!("SKIP: wgmma needs the sm_90a PTX; this {} loaded {}", info.name, info.ptx_arch);
            continue;
        }
        for n in [128usize, 256] {
            let a: Vec<f32> = (0..64 * 16).map(|i| ((i * 7 % 23) as f32 - 11.0) * 0.5).collect();
            let b: Vec<f32> = (0..16 * n).map(|i| ((i * 5 % 17) as f32 - 8.0) * 0.25).collect();
            let mut want = vec![0.0f32; 64 * n];
            for i in 0..64 {
                for j in 0..n {
                    want[i * n + j] = (0..16).map(|k| a[i * 16 + k] as f64 * b[k * n + j] as f64).sum::<f64>() as f32;
                }
            }
            let shape = if n == 256 { 16 } else { 0 };
            // Descriptor layouts 0-3, the SBO bug 4, register A with B N- or K-major (64,
            // 66), and register A mis-laid (192).
            for mode in [0u32, 1, 2, 3, 4, 64, 66, 192] {
                let got = run_wgmma(&ctx, &a, &b, n, mode | shape)
                    .unwrap_or_else(|e| panic!("n {n} mode {mode} on {}: {e}", ctx.backend()));
                let bad = got.iter().zip(&want).filter(|(g, w)| g != w).count();
                if mode < 4 || mode == 64 || mode == 66 {
                    assert_eq!(
                        bad,
                        0,
                        "n {n} layout mode {mode} on {}: {bad} of {} elements differ",
                        ctx.backend(),
                        64 * n
                    );
                } else {
                    assert!(
                        bad > 0,
                        "n {n} mode {mode}: the mis-laid operand must give a wrong product on {}",
                        ctx.backend()
                    );
                }
            }
        }
    }
}

/// Runs the wgmma probe (N = 128, all-ones operands) on the emulator with `mode`, which must
/// be rejected with an error naming every one of `needles`; `what` says what was wrong.
fn assert_probe_rejected(mode: u32, needles: &[&str], what: &str) {
    let (a, b) = (vec![1.0f32; 64 * 16], vec![1.0f32; 16 * 128]);
    match run_wgmma(&Context::emulator(), &a, &b, 128, mode) {
        Err(e) => {
            let msg = e.to_string();
            assert!(needles.iter().all(|n| msg.contains(n)), "mode {mode}: {msg}");
            println!("mode {mode} rejected: {msg}");
        }
        Ok(_) => panic!("{what} must be rejected"),
    }
}

/// The ISA requires the same descriptors in every thread of a warpgroup; the emulator names
/// the thread and line that differ (warp 1 pointing A elsewhere).
#[test]
fn emulator_rejects_a_warpgroup_disagreeing_on_descriptors() {
    assert_probe_rejected(8, &["same descriptors", "warpgroup 0"], "a warp with its own A descriptor");
}

/// `setmaxnreg` is `.sync.aligned` over the warpgroup with one count; the emulator rejects a
/// warp that asks for another (warp 1: 240, the others 232), and accepts the same probe
/// without the mode bit (above).
#[test]
fn emulator_rejects_a_warpgroup_disagreeing_on_setmaxnreg() {
    assert_probe_rejected(32, &["setmaxnreg", "warpgroup 0"], "a warp with its own setmaxnreg count");
}

/// A wgmma must not read shared bytes stored through the generic proxy before the storing
/// thread's `fence.proxy.async`; the emulator names the storing thread and line (the probe
/// without the fence, mode bit 8). The same probe with the fence passes (above).
#[test]
fn emulator_rejects_a_wgmma_reading_unfenced_stores() {
    assert_probe_rejected(256, &["fence.proxy.async", "probe.rs"], "a wgmma reading unfenced generic stores");
}

/// The fence must also come before the barrier that orders the wgmma after the stores: a
/// thread's wgmma reads other threads' stores, so their fences must reach it. Fenced after the
/// barrier (mode bit 9) is rejected, naming the store, through `sync_threads` and through a
/// named barrier (bit 10); fenced before, the named barrier orders the fences (right product).
#[test]
fn emulator_rejects_a_wgmma_whose_stores_are_fenced_after_the_barrier() {
    let needle = ["not ordered before this wgmma", "probe.rs"];
    assert_probe_rejected(512, &needle, "stores fenced after sync_threads");
    assert_probe_rejected(512 | 1024, &needle, "stores fenced after the named barrier");
    let (a, b) = (vec![1.0f32; 64 * 16], vec![1.0f32; 16 * 128]);
    let d = run_wgmma(&Context::emulator(), &a, &b, 128, 1024).expect("fenced stores, then a named barrier");
    assert!(d.iter().all(|&x| x == 16.0), "all-ones 64x16 by 16x128 gives 16 everywhere");
}

fn run_wgmma(ctx: &Context, a: &[f32], b: &[f32], n: usize, mode: u32) -> Result<Vec<f32>, Error> {
    let conv = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<bf16>>();
    let (ab, bb) = (ctx.upload(&conv(a))?, ctx.upload(&conv(b))?);
    let mut d = ctx.upload(&vec![f32::NAN; 64 * n])?;
    let p = probe::WgmmaProbeParams {
        a: ab.as_view().global(),
        b: bb.as_view().global(),
        d: d.as_view_mut().global_mut(),
        mode,
        _pad: 0,
    };
    let cfg = LaunchConfig {
        grid: Dim3::x(1),
        block: Dim3::x(probe::WGMMA_PROBE_THREADS),
        shared_bytes: probe::WGMMA_PROBE_SHARED_BYTES,
    };
    ctx.launch(&tc::WGMMA_PROBE_BF16, cfg, p)?;
    d.to_host()
}

/// Blocks of the bulk-reduction probe: every block adds to every output row.
const BULK_BLOCKS: u32 = 8;

/// Runs the bulk-reduction probe with `mode` into [`probe::BULK_PROBE_ROWS`] rows of 16 f32
/// that start at 0.25, followed by 16 guard f32 of -7.5 outside the kernel's view.
fn run_bulk(ctx: &Context, mode: u32) -> Result<Vec<f32>, Error> {
    let n = (probe::BULK_PROBE_ROWS * 16) as usize;
    let mut init = vec![0.25f32; n + 16];
    init[n..].fill(-7.5);
    let mut out = ctx.upload(&init)?;
    let p = probe::BulkProbeParams { out: out.view_mut(0..n)?.global_mut(), mode, _pad: 0 };
    let cfg = LaunchConfig {
        grid: Dim3::x(BULK_BLOCKS),
        block: Dim3::x(probe::BULK_PROBE_THREADS),
        shared_bytes: probe::BULK_PROBE_SHARED_BYTES,
    };
    ctx.launch(&tc::BULK_PROBE, cfg, p)?;
    out.to_host()
}

/// Bulk reductions (`cp.reduce.async.bulk ... add.f32`) from shared rows into global memory:
/// every block adds both rounds of its staging rows, rewritten between the rounds after
/// `wait_group.read`, to every row. The sums are small integers plus 0.25, exact in any
/// order, and the guard past the view is untouched. On the GPU this checks the instruction,
/// the bulk-group protocol and the row addressing against the hardware (sm_90a only;
/// elsewhere it says SKIP).
#[test]
fn bulk_reduce_adds_published_shared_rows() {
    for ctx in common::backends("bulk_reduce_adds_published_shared_rows") {
        if let Some(info) = ctx.device_info()
            && info.ptx_arch != "sm_90a"
        {
            println!("SKIP: bulk reductions need the sm_90a PTX; this {} loaded {}", info.name, info.ptx_arch);
            continue;
        }
        let got = run_bulk(&ctx, 0).unwrap_or_else(|e| panic!("bulk probe on {}: {e}", ctx.backend()));
        for row in 0..probe::BULK_PROBE_ROWS {
            let (warp, r) = (row / 16, row % 16);
            for c in 0..16 {
                let added: f32 = (0..BULK_BLOCKS)
                    .flat_map(|b| (0..2).map(move |round| probe::bulk_probe_value(b, round, warp, r, c)))
                    .sum();
                let i = (row * 16 + c) as usize;
                assert_eq!(got[i], 0.25 + added, "row {row} col {c} on {}", ctx.backend());
            }
        }
        let guard = &got[(probe::BULK_PROBE_ROWS * 16) as usize..];
        assert!(guard.iter().all(|&x| x == -7.5), "the guard past the view changed on {}: {guard:?}", ctx.backend());
    }
}

/// The emulator names each broken bulk protocol at the probe's line: stores not published by
/// `fence.proxy.async` (mode 1), staging rows rewritten before `wait_group.read` (2), rewritten
/// by other lanes with no `sync_warp` after the issuing lanes' waits (4, a race with the
/// released read), and a source off its 16-byte alignment (8).
#[test]
fn emulator_rejects_broken_bulk_reductions() {
    for (mode, needle) in [
        (1, "no fence.proxy.async after the store"),
        (2, "may still be reading"),
        (4, "race"),
        (8, "16-byte aligned"),
        (16, "exited while"),
    ] {
        match run_bulk(&Context::emulator(), mode) {
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(needle) && msg.contains("probe.rs"), "mode {mode}: {msg}");
                println!("mode {mode} rejected: {msg}");
            }
            Ok(_) => panic!("bulk probe mode {mode} must be rejected"),
        }
    }
}
