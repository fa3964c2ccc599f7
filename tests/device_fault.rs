//! A device fault surfaces as an error naming the kernel, and the context refuses all later
//! work with that same error (GPU only). The faulting run happens in a child process: a
//! sticky fault poisons the CUDA context for the rest of its process.

mod common;

use ferrokern::gpu_kernels::emu::LaunchConfig;
use ferrokern::gpu_kernels::selftest::{FAULT_WILD_WRITE, SELFTEST_BLOCK, SelftestParams};
use ferrokern::{BackendChoice, Context, Dim3, Error};

const CHILD_ENV: &str = "FERROKERN_FAULT_CHILD";

fn launch_wild_write(ctx: &Context) -> Result<(), Error> {
    let x = ctx.upload(&[1.0f32; 64])?;
    let mut out = ctx.alloc::<f32>(64)?;
    let cfg = LaunchConfig { grid: Dim3::x(1), block: Dim3::x(SELFTEST_BLOCK), shared_bytes: 0 };
    ctx.launch(
        &FAULT_WILD_WRITE,
        cfg,
        SelftestParams { input: x.as_view().global(), out: out.as_view_mut().global_mut() },
    )?;
    ctx.synchronize()
}

/// The child's side: fault, then check that everything afterwards returns the same error.
fn child() {
    let ctx = ferrokern::context(BackendChoice::Gpu).expect("the parent checked for a GPU");
    let first = launch_wild_write(&ctx).expect_err("a write 2^38 elements past the end must fault");
    println!("first error: {first}");
    assert!(matches!(first, Error::DeviceFault { kernel: "fault_wild_write", .. }), "{first:?}");
    let later = [
        ("alloc", ctx.alloc::<f32>(16).map(|_| ())),
        ("synchronize", ctx.synchronize()),
        ("fork", ctx.fork().map(|_| ())),
        (
            "elementwise",
            ctx.alloc::<f32>(0)
                .and_then(|x| ferrokern::elementwise::silu(&ctx, x.as_view(), ctx.alloc::<f32>(0)?.as_view_mut())),
        ),
    ];
    for (what, r) in later {
        let e = r.expect_err(what);
        assert_eq!(e.to_string(), first.to_string(), "{what} after the fault");
        println!("{what} after the fault: refused with the same error");
    }
    println!("FAULT-CHILD-OK");
}

#[test]
fn device_fault_names_the_kernel_and_is_sticky() {
    if std::env::var(CHILD_ENV).is_ok() {
        child();
        return;
    }
    if common::gpu_or_skip("device_fault_names_the_kernel_and_is_sticky").is_none() {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "device_fault_names_the_kernel_and_is_sticky", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .expect("spawning the child test process");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    assert!(
        out.status.success() && text.contains("FAULT-CHILD-OK"),
        "the child did not confirm the sticky fault:\n{text}"
    );
}

#[test]
fn the_same_kernel_is_an_out_of_bounds_error_on_the_emulator() {
    let e = launch_wild_write(&Context::emulator()).expect_err("the emulator checks every access");
    println!("{e}");
    assert!(e.to_string().contains("out-of-bounds global write"), "{e}");
}
