//! The emulator's checks, each proven by a deliberately broken kernel that it must reject and
//! a correct twin that it must accept (with the right answer).

use ferrokern::gpu_kernels::emu::{self, FaultKind, LaunchConfig};
use ferrokern::gpu_kernels::selftest::{self as st, SELFTEST_BLOCK, SELFTEST_SHARED_BYTES, SelftestParams};
use ferrokern::gpu_kernels::{Dim3, KernelDef};
use ferrokern::{Context, Error};

const N: usize = 2 * SELFTEST_BLOCK as usize;

fn input() -> Vec<f32> {
    (0..N).map(|i| (i as f32) * 0.5 - 7.0).collect()
}

/// Runs a self-test kernel on the emulator over N inputs, with one extra block so that
/// unguarded threads run past the end.
fn run(def: &'static KernelDef<SelftestParams>, extra_block: bool) -> Result<Vec<f32>, Error> {
    let ctx = Context::emulator();
    let x = ctx.upload(&input())?;
    let mut out = ctx.alloc::<f32>(N)?;
    let blocks = N as u32 / SELFTEST_BLOCK + extra_block as u32;
    let cfg =
        LaunchConfig { grid: Dim3::x(blocks), block: Dim3::x(SELFTEST_BLOCK), shared_bytes: SELFTEST_SHARED_BYTES };
    ctx.launch(def, cfg, SelftestParams { input: x.as_view().global(), out: out.as_view_mut().global_mut() })?;
    out.to_host()
}

fn fault(def: &'static KernelDef<SelftestParams>, extra_block: bool) -> (emu::EmuError, String) {
    match run(def, extra_block) {
        Err(Error::Emulator(e)) => {
            let msg = e.to_string();
            println!("{}: caught: {msg}", def.name);
            (e, msg)
        }
        Err(other) => panic!("{}: expected an emulator error, got {other}", def.name),
        Ok(_) => panic!("{}: the emulator accepted a broken kernel", def.name),
    }
}

#[test]
fn out_of_bounds_is_caught_and_guarded_twin_passes() {
    let (e, msg) = fault(&st::BUG_OOB, true);
    assert!(matches!(e.kind, FaultKind::OutOfBounds { index: 128, len: 128, .. }), "{msg}");
    assert_eq!(e.kernel, "bug_oob");
    assert_eq!(e.block, Some(Dim3::new(2, 0, 0)));
    assert_eq!(e.thread, Some(Dim3::new(0, 0, 0)));
    assert!(msg.contains("selftest.rs"), "the message names the source line: {msg}");
    let out = run(&st::OK_OOB, true).unwrap();
    let want: Vec<f32> = input().iter().map(|v| 2.0 * v).collect();
    assert_eq!(out, want);
}

#[test]
fn shared_race_is_caught_and_barrier_twin_passes() {
    let (e, msg) = fault(&st::BUG_RACE, false);
    match e.kind {
        FaultKind::SharedRace { first, second, .. } => {
            assert_ne!(first.thread, second.thread);
            assert!(first.write || second.write);
        }
        other => panic!("expected a race, got {other}"),
    }
    assert!(msg.contains("no barrier between"), "{msg}");
    let out = run(&st::OK_RACE, false).unwrap();
    let x = input();
    let b = SELFTEST_BLOCK as usize;
    let want: Vec<f32> = (0..N).map(|i| x[(i / b) * b + (i % b + 1) % b]).collect();
    assert_eq!(out, want);
}

#[test]
fn barrier_divergence_is_caught_and_uniform_twin_passes() {
    let (e, msg) = fault(&st::BUG_BARRIER, false);
    assert!(matches!(e.kind, FaultKind::BarrierDivergence { .. }), "{msg}");
    assert_eq!(run(&st::OK_BARRIER, false).unwrap(), input());
}

#[test]
fn uninitialized_shared_read_is_caught_and_twin_passes() {
    let (e, msg) = fault(&st::BUG_UNINIT, false);
    assert!(matches!(e.kind, FaultKind::UninitSharedRead { offset: 4, .. }), "{msg}");
    assert_eq!(e.thread, Some(Dim3::new(1, 0, 0)));
    assert_eq!(run(&st::OK_UNINIT, false).unwrap(), input());
}

#[test]
fn warp_collective_with_exited_lane_is_caught_and_twin_passes() {
    let (e, msg) = fault(&st::BUG_WARP_EXIT, false);
    assert!(matches!(e.kind, FaultKind::WarpDivergence { .. }), "{msg}");
    assert!(msg.contains("exited"), "{msg}");
    let out = run(&st::OK_WARP_EXIT, false).unwrap();
    let x = input();
    for (i, got) in out.iter().enumerate() {
        let w = i / 32;
        let want: f32 = x[w * 32..w * 32 + 32].iter().sum();
        assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0), "lane {i}: {got} vs {want}");
    }
}

#[test]
fn intra_warp_race_without_syncwarp_is_caught_and_twin_passes() {
    let (e, msg) = fault(&st::BUG_WARP_RACE, false);
    assert!(matches!(e.kind, FaultKind::SharedRace { .. }), "{msg}");
    let out = run(&st::OK_WARP_RACE, false).unwrap();
    let x = input();
    let want: Vec<f32> = (0..N).map(|i| x[i ^ 1]).collect();
    assert_eq!(out, want);
}

#[test]
fn launches_past_hardware_or_declared_limits_are_refused() {
    let ctx = Context::emulator();
    let x = ctx.upload(&input()).unwrap();
    let mut out = ctx.alloc::<f32>(N).unwrap();
    let p = SelftestParams { input: x.as_view().global(), out: out.as_view_mut().global_mut() };
    let bad = [
        LaunchConfig { grid: Dim3::x(1), block: Dim3::x(1025), shared_bytes: 0 },
        LaunchConfig { grid: Dim3::xy(1, 65536), block: Dim3::x(32), shared_bytes: 0 },
        LaunchConfig { grid: Dim3::new(1, 1, 65536), block: Dim3::x(32), shared_bytes: 0 },
        LaunchConfig { grid: Dim3::x(0), block: Dim3::x(32), shared_bytes: 0 },
        LaunchConfig { grid: Dim3::x(1), block: Dim3::x(32), shared_bytes: 228 * 1024 },
        // More threads than the kernel's table says it is launched with (`launch_threads`,
        // what kernels with launch bounds are compiled for).
        LaunchConfig { grid: Dim3::x(1), block: Dim3::x(2 * SELFTEST_BLOCK), shared_bytes: SELFTEST_SHARED_BYTES },
    ];
    for cfg in bad {
        let e = ctx.launch(&st::OK_OOB, cfg, p).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{cfg:?}: {e}");
        println!("refused {cfg:?}: {e}");
    }
}

#[test]
fn emulator_runs_blocks_on_several_workers_deterministically() {
    // The same launch twice gives the same bits (block scheduling across workers does not
    // change a correct kernel's result).
    let a = run(&st::OK_WARP_EXIT, false).unwrap();
    let b = run(&st::OK_WARP_EXIT, false).unwrap();
    assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
}

/// The emulator hands out scratch poisoned on every call (0xFF: NaN in every float type), so
/// a kernel that reads scratch it did not write in this call (split-K's second pass reading a
/// slice the first pass skipped) sees NaN even where an earlier call left the right value.
#[test]
fn scratch_is_poisoned_on_every_call() {
    let ctx = ferrokern::Context::emulator();
    ctx.with_scratch(64, |s| {
        (0..64).for_each(|i| s.store(i, 7));
        Ok(())
    })
    .unwrap();
    let words = ctx.with_scratch(48, |s| Ok((0..48).map(|i| s.load(i)).collect::<Vec<u32>>())).unwrap();
    assert!(words.iter().all(|&w| w == u32::MAX), "scratch kept an earlier call's values: {words:?}");
    assert!(f32::from_bits(words[0]).is_nan());
}

/// Named barriers (FlashAttention-3's ping-pong protocol between two warps): the correct
/// hand-over runs; each broken one is reported, naming the barrier and what is missing.
#[test]
fn named_barrier_protocols_are_checked_and_the_correct_one_runs() {
    assert_eq!(run(&st::OK_TURNS, false).unwrap(), input());

    // No first turn: both warps wait for each other (the barrier really blocks).
    let (e, msg) = fault(&st::BUG_TURNS_NO_FIRST_TURN, false);
    assert!(matches!(e.kind, FaultKind::Deadlock { .. }), "{msg}");
    assert!(msg.contains("named barrier 1: 32 of 64 threads arrived in phase 0"), "{msg}");

    // One hand-over too many: its phase is still open when the block ends.
    let (e, msg) = fault(&st::BUG_TURNS_EXTRA_ARRIVAL, false);
    assert!(matches!(e.kind, FaultKind::BarrierDivergence { .. }), "{msg}");
    assert!(
        msg.contains("phase open") && msg.contains("named barrier 1: 32 of 64 threads arrived in phase 3"),
        "{msg}"
    );

    // Half a warp hands the first turn over: the GPU would count 32 arrivals, the emulator
    // counts 16 and says why the phase cannot complete.
    let (e, msg) = fault(&st::BUG_TURNS_HALF_WARP, false);
    assert!(matches!(e.kind, FaultKind::Deadlock { .. }), "{msg}");
    assert!(msg.contains("48 of 64") && msg.contains("warp 1 with 16 of its 32 lanes"), "{msg}");

    // Two thread counts for one phase.
    let (e, msg) = fault(&st::BUG_TURNS_WRONG_COUNT, false);
    assert!(matches!(e.kind, FaultKind::BarrierDivergence { .. }), "{msg}");
    assert!(msg.contains("for 32 threads") && msg.contains("counts 64"), "{msg}");
}
