//! Measures the emulator's speed (quoted in the README): an elementwise kernel (no barriers)
//! and the self-test kernel with a block barrier and shared memory.
//! `cargo run --release --example emulator_speed`

use ferrokern::elementwise as ew;
use ferrokern::gpu_kernels::emu::LaunchConfig;
use ferrokern::gpu_kernels::selftest::{OK_RACE, SELFTEST_BLOCK, SELFTEST_SHARED_BYTES, SelftestParams};
use ferrokern::{Context, Dim3};
use std::time::Instant;

fn main() -> ferrokern::Result<()> {
    let ctx = Context::emulator();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = 1 << 24;
    let x = ctx.upload(&vec![0.5f32; n])?;
    let mut y = ctx.alloc::<f32>(n)?;
    for (label, view_off) in [("vectorized (16-byte chunks)", 0usize), ("scalar (misaligned views)", 1)] {
        let xs = x.view(view_off..n)?;
        let mut ys = y.view_mut(view_off..n)?;
        let t = Instant::now();
        ew::silu(&ctx, xs, ys.reborrow(0..n - view_off)?)?;
        let s = t.elapsed().as_secs_f64();
        let cfg = ew::launch_config::<f32>(n - view_off, view_off == 0);
        let threads = cfg.grid.count() * cfg.block.count();
        println!(
            "silu f32, {label}: {:.2e} elements/s, {:.2e} GPU threads/s ({} threads, {workers} workers)",
            (n - view_off) as f64 / s,
            threads as f64 / s,
            threads
        );
    }
    let blocks = 4096u32;
    let m = (blocks * SELFTEST_BLOCK) as usize;
    let a = ctx.upload(&vec![1.0f32; m])?;
    let mut b = ctx.alloc::<f32>(m)?;
    let cfg =
        LaunchConfig { grid: Dim3::x(blocks), block: Dim3::x(SELFTEST_BLOCK), shared_bytes: SELFTEST_SHARED_BYTES };
    let t = Instant::now();
    ctx.launch(&OK_RACE, cfg, SelftestParams { input: a.as_view().global(), out: b.as_view_mut().global_mut() })?;
    let s = t.elapsed().as_secs_f64();
    println!(
        "ok_race (shared memory + one barrier per thread, race-checked): {:.2e} GPU threads/s ({m} threads)",
        m as f64 / s
    );
    Ok(())
}
