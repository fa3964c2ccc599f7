//! Compiles `gpu-kernels` to PTX for each target architecture and embeds it in the library.
//!
//! Uses rustc's own NVPTX backend: a nested `cargo rustc` for `nvptx64-nvidia-cuda` with
//! `-Zbuild-std=core`. `RUSTC_BOOTSTRAP=1` is set for that one child build only, on the pinned
//! stable toolchain (rust-toolchain.toml); the host build stays on stable Rust.

use std::path::{Path, PathBuf};
use std::process::Command;

/// (arch, extra target features). The host picks the newest arch the device supports; an
/// arch-specific one (`sm_90a`: wgmma, setmaxnreg) only on exactly that compute capability.
/// sm_90a uses PTX ISA 8.3 for `fence.proxy.tensormap` (tensor maps read from global memory).
/// Device code sees `cfg(ferrokern_sm90a)` in the sm_90a build, where the Hopper-only kernels
/// get their real bodies (elsewhere those entry points trap, and the host never launches them).
const ARCHS: &[(&str, &str)] = &[("sm_80", ""), ("sm_90", ""), ("sm_90a", "+ptx83")];

const SETUP_HINT: &str = "run `scripts/setup.sh` (or `rustup toolchain install` in the repository root, which installs \
the toolchain and the rust-src, llvm-tools and llvm-bitcode-linker components named in rust-toolchain.toml)";

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    for p in ["gpu-kernels/src", "gpu-kernels/Cargo.toml", "rust-toolchain.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }

    // One device target dir shared by every host profile (dev, test, release): target/ferrokern-ptx.
    // OUT_DIR is <target>/<profile>/build/ferrokern-<hash>/out.
    let target_root = out.ancestors().nth(4).map(Path::to_path_buf).unwrap_or_else(|| out.clone());
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());

    let mut table = String::from("/// (arch, PTX) for every embedded architecture, oldest first.\n");
    table.push_str("pub const PTX: &[(&str, &str)] = &[\n");
    for (arch, features) in ARCHS {
        let ptx = build_arch(&cargo, &root, &target_root.join("ferrokern-ptx").join(arch), arch, features);
        let dest = out.join(format!("gpu_kernels.{arch}.ptx"));
        let text = std::fs::read_to_string(&ptx).unwrap_or_else(|e| panic!("reading {} failed: {e}", ptx.display()));
        let bounded = add_launch_bounds(&text, arch).unwrap_or_else(|e| panic!("{arch} PTX: {e}"));
        std::fs::write(&dest, bounded).unwrap_or_else(|e| panic!("writing {} failed: {e}", dest.display()));
        table.push_str(&format!(
            "    (\"{arch}\", include_str!(concat!(env!(\"OUT_DIR\"), \"/gpu_kernels.{arch}.ptx\"))),\n"
        ));
    }
    table.push_str("];\n");
    std::fs::write(out.join("ptx_table.rs"), table).unwrap();
}

fn build_arch(cargo: &str, root: &Path, target_dir: &Path, arch: &str, features: &str) -> PathBuf {
    let mut flags = format!("-Ctarget-cpu={arch}");
    if !features.is_empty() {
        flags.push_str(&format!("\x1f-Ctarget-feature={features}"));
    }
    if arch == "sm_90a" {
        flags.push_str("\x1f--cfg=ferrokern_sm90a");
    }
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args(["rustc", "--release", "--locked", "-p", "gpu-kernels", "--lib", "--crate-type", "cdylib"])
        .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core", "--target-dir"])
        .arg(target_dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_ENCODED_RUSTFLAGS", flags)
        // The host build's wrappers and flags (clippy, coverage, sanitizers) do not apply to PTX.
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_PROFILE_RELEASE_DEBUG");
    let output =
        cmd.output().unwrap_or_else(|e| panic!("could not run `{cargo}` for the PTX build: {e}. {SETUP_HINT}"));
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint = if stderr.contains("rust-src")
            || stderr.contains("llvm-bitcode-linker")
            || stderr.contains("is not installed")
        {
            format!("\n\nA toolchain component is missing: {SETUP_HINT}.")
        } else {
            String::new()
        };
        panic!("building gpu-kernels for nvptx64-nvidia-cuda ({arch}) failed:\n{stderr}{hint}");
    }
    let ptx = target_dir.join("nvptx64-nvidia-cuda/release/gpu_kernels.ptx");
    assert!(ptx.exists(), "the PTX build succeeded but {} is missing", ptx.display());
    ptx
}

/// Declares launch bounds to ptxas for the kernels that ask for them in `arch`'s PTX
/// (`gpu_kernels::launch_min_blocks`): `.maxntid T, 1, 1` from `gpu_kernels::launch_threads`
/// (the host refuses a larger block) and `.minnctapersm B`. Together they fix the register
/// count at entry, which `setmaxnreg` needs (without them ptxas ignores it: C7508). rustc's
/// NVPTX backend has no attribute for these directives, hence this pass over its output.
/// Other kernels get none: with `.maxntid` alone ptxas capped registers below what those
/// kernels use today and spilled in several (softmax, paged decode v01, attention v02 d64).
fn add_launch_bounds(ptx: &str, arch: &str) -> Result<String, String> {
    let mut out = String::with_capacity(ptx.len() + 64 * 1024);
    let mut pending: Option<String> = None;
    for line in ptx.lines() {
        if let Some(rest) =
            line.trim_start().strip_prefix(".visible .entry ").or_else(|| line.trim_start().strip_prefix(".entry "))
        {
            let name = rest.split(|c: char| c == '(' || c.is_whitespace()).next().unwrap_or_default();
            if let Some(prev) = pending.replace(name.to_string()) {
                return Err(format!("entry {prev} has no body before entry {name}"));
            }
        } else if line.trim() == "{"
            && let Some(name) = pending.take()
            && let Some(blocks) = gpu_kernels::launch_min_blocks(&name, arch)
        {
            let threads = gpu_kernels::launch_threads(&name).ok_or_else(|| {
                format!("kernel {name} has no block size: add it to its family's launch_threads (gpu_kernels::launch_threads)")
            })?;
            out.push_str(&format!(".maxntid {threads}, 1, 1\n.minnctapersm {blocks}\n"));
        }
        out.push_str(line);
        out.push('\n');
    }
    match pending {
        Some(name) => Err(format!("entry {name} has no body")),
        None => Ok(out),
    }
}
