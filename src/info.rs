//! Offline PTX validation: run `ptxas -v` over the embedded PTX for per-kernel resources, and
//! `nvdisasm` over the cubin for the instruction mix. Needs no GPU.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Per-kernel resources as ptxas reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct KernelResources {
    pub arch: String,
    pub kernel: String,
    pub registers: u32,
    pub shared_bytes: u32,
    pub stack_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
}

/// Kernels allowed a stack frame or spills, with the reason: none today. (The last two, v03's
/// head-dim-256 attention kernels, spilled two per-block values they held in registers through
/// the loop; those now wait in shared memory.)
pub const SPILL_ALLOWLIST: &[(&str, &str)] = &[];

/// Finds an NVIDIA tool (`ptxas`, `nvdisasm`): `$FERROKERN_<TOOL>`, the project's `.tools`
/// venv (scripts/setup.sh), a CUDA install, then `PATH`.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    if let Ok(p) = std::env::var(format!("FERROKERN_{}", name.to_uppercase())) {
        return Some(PathBuf::from(p));
    }
    let mut roots = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/venv")];
    if let Ok(cwd) = std::env::current_dir() {
        roots.push(cwd.join(".tools/venv"));
    }
    for root in roots {
        if let Ok(libs) = std::fs::read_dir(root.join("lib")) {
            for py in libs.flatten() {
                let nv = py.path().join("site-packages/nvidia");
                if let Ok(pkgs) = std::fs::read_dir(&nv) {
                    for pkg in pkgs.flatten() {
                        let cand = pkg.path().join("bin").join(name);
                        if cand.is_file() {
                            return Some(cand);
                        }
                    }
                }
            }
        }
    }
    for dir in ["/usr/local/cuda/bin", "/opt/cuda/bin"] {
        let cand = Path::new(dir).join(name);
        if cand.is_file() {
            return Some(cand);
        }
    }
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
}

fn scratch(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("ferrokern-{}-{n}-{name}", std::process::id()))
}

/// Assembles `ptx` for `arch` with `ptxas -v`; returns the per-kernel table and the cubin path.
pub fn ptxas(ptxas: &Path, arch: &str, ptx: &str) -> Result<(Vec<KernelResources>, PathBuf), String> {
    ptxas_with_warnings(ptxas, arch, ptx).map(|(rows, cubin, _)| (rows, cubin))
}

/// As [`ptxas`], also returning ptxas's warnings and its coded performance advisories (lines
/// with `(C7...)`, e.g. C7508 "setmaxnreg ignored", C7519 "warpgroup.arrive is injected",
/// wgmma serialization), each naming its kernel.
pub fn ptxas_with_warnings(
    ptxas: &Path,
    arch: &str,
    ptx: &str,
) -> Result<(Vec<KernelResources>, PathBuf, Vec<String>), String> {
    let src = scratch(&format!("{arch}.ptx"));
    let cubin = scratch(&format!("{arch}.cubin"));
    std::fs::write(&src, ptx).map_err(|e| format!("writing {}: {e}", src.display()))?;
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg(&src)
        .arg("-o")
        .arg(&cubin)
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let _ = std::fs::remove_file(&src);
    let text = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("ptxas rejected the {arch} PTX:\n{text}"));
    }
    let warnings = text.lines().filter(|l| l.contains("warning") || l.contains("(C7")).map(str::to_string).collect();
    Ok((parse_ptxas(arch, &text), cubin, warnings))
}

fn num_before(line: &str, unit: &str) -> Option<u32> {
    let i = line.find(unit)?;
    line[..i].split_whitespace().last()?.parse().ok()
}

/// Parses `ptxas -v` output into one row per kernel.
pub fn parse_ptxas(arch: &str, text: &str) -> Vec<KernelResources> {
    let mut rows: BTreeMap<String, KernelResources> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or("").to_string();
            rows.entry(name.clone()).or_insert_with(|| KernelResources {
                arch: arch.into(),
                kernel: name.clone(),
                ..Default::default()
            });
            current = Some(name);
        } else if let Some(rest) = line.split("Function properties for ").nth(1) {
            current = Some(rest.trim().to_string());
        } else if let Some(k) = current.as_ref().and_then(|c| rows.get_mut(c)) {
            if line.contains("stack frame") {
                k.stack_bytes = num_before(line, "bytes stack frame").unwrap_or(0);
                k.spill_store_bytes = num_before(line, "bytes spill stores").unwrap_or(0);
                k.spill_load_bytes = num_before(line, "bytes spill loads").unwrap_or(0);
            } else if line.contains("Used") && line.contains("registers") {
                k.registers = num_before(line, "registers").unwrap_or(0);
                k.shared_bytes = num_before(line, "bytes smem").unwrap_or(0);
            }
        }
    }
    rows.into_values().collect()
}

/// Instruction classes counted in the SASS of each kernel: `OP` counts every instruction whose
/// opcode is `OP` (any modifiers), `OP.MOD` those of them that carry the modifier `MOD`.
pub const SASS_CLASSES: &[&str] = &[
    "HGMMA",
    "HMMA",
    "FFMA",
    "LDSM",
    "LDGSTS",
    "LDGSTS.128",
    "UTMALDG",
    "SYNCS",
    // `setmaxnreg` (ALLOC for .inc, DEALLOC for .dec).
    "USETMAXREG",
    "LDS.128",
    "LDG.128",
    "STG.128",
    // The wgmma GEMM's pair epilogue (`st.global.v2.b32` of two f32).
    "STG.64",
    "LDL",
    "STL",
    "BAR",
    // Global atomics (attention backward's dQ): RED without a result, ATOM with; the G forms
    // are what newer ptxas emits for generic-to-global addresses.
    "RED",
    "REDG",
    // v03 backward's paired dQ reductions (`red.global.add.v2.f32`).
    "REDG.F32x2",
    "ATOM",
    "ATOMG",
];

/// The pseudo-class [`count_sass`] gives every instruction of a kernel: its SASS size in
/// instructions (16 bytes each on sm_70 and newer).
pub const SASS_INSTRUCTIONS: &str = "instructions";

/// Disassembles `cubin` and counts [`SASS_CLASSES`] per kernel, and [`SASS_INSTRUCTIONS`].
pub fn sass_mix(nvdisasm: &Path, cubin: &Path) -> Result<BTreeMap<String, BTreeMap<&'static str, u32>>, String> {
    Ok(count_sass(&disassemble(nvdisasm, cubin)?))
}

/// `nvdisasm -c cubin`: the SASS of every kernel in it, as text.
pub fn disassemble(nvdisasm: &Path, cubin: &Path) -> Result<String, String> {
    let out = Command::new(nvdisasm)
        .arg("-c")
        .arg(cubin)
        .output()
        .map_err(|e| format!("running {}: {e}", nvdisasm.display()))?;
    if !out.status.success() {
        return Err(format!("nvdisasm failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The opcode (`LDG.E.128`, its predicate dropped) and the text after the address comment
/// of an instruction line of `nvdisasm -c` output (trimmed); None for other lines.
fn sass_instruction(line: &str) -> Option<(&str, &str)> {
    let body = line[line.find("*/")? + 2..].trim();
    let mut toks = body.split_whitespace();
    let mut op = toks.next()?;
    if op.starts_with('@') {
        op = toks.next()?;
    }
    let op = op.trim_end_matches(';');
    (!op.is_empty()).then_some((op, body))
}

/// Counts [`SASS_CLASSES`] and [`SASS_INSTRUCTIONS`] per kernel in `nvdisasm -c` output.
pub fn count_sass(text: &str) -> BTreeMap<String, BTreeMap<&'static str, u32>> {
    let mut mix: BTreeMap<String, BTreeMap<&'static str, u32>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix(".text.").and_then(|s| s.strip_suffix(':')) {
            current = Some(name.to_string());
            mix.entry(name.to_string()).or_default();
            continue;
        }
        let (Some(k), Some((op, _))) = (current.as_ref(), sass_instruction(t)) else {
            continue;
        };
        let mut parts = op.split('.');
        let base = parts.next().unwrap_or("");
        let modifiers: Vec<&str> = parts.collect();
        let entry = mix.get_mut(k).expect("inserted at .text");
        *entry.entry(SASS_INSTRUCTIONS).or_insert(0) += 1;
        for class in SASS_CLASSES {
            let (cbase, cmod) = match class.split_once('.') {
                Some((b, m)) => (b, Some(m)),
                None => (*class, None),
            };
            if base == cbase && cmod.is_none_or(|m| modifiers.contains(&m)) {
                *entry.entry(class).or_insert(0) += 1;
            }
        }
    }
    mix
}

/// One loop of a kernel's SASS: the instructions from a label to a branch back to it, as
/// laid out (a branch inside it may skip some of them at run time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SassLoop {
    /// The label the loop branches back to (`.L_x_40`).
    pub label: String,
    pub instructions: u32,
    pub ffma: u32,
}

/// The loops of every kernel in `nvdisasm -c` output, in layout order (a loop nested in
/// another appears in both).
pub fn sass_loops(text: &str) -> BTreeMap<String, Vec<SassLoop>> {
    let mut loops: BTreeMap<String, Vec<SassLoop>> = BTreeMap::new();
    let mut current: Option<String> = None;
    // The current kernel's labels (by instruction index) and whether each instruction is an FFMA.
    let mut labels: BTreeMap<String, usize> = BTreeMap::new();
    let mut ffma: Vec<bool> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix(".text.").and_then(|s| s.strip_suffix(':')) {
            current = Some(name.to_string());
            loops.entry(name.to_string()).or_default();
            labels.clear();
            ffma.clear();
            continue;
        }
        let Some(k) = current.as_ref() else { continue };
        if let Some(label) = t.strip_suffix(':').filter(|l| l.starts_with(".L")) {
            labels.insert(label.to_string(), ffma.len());
            continue;
        }
        let Some((op, body)) = sass_instruction(t) else { continue };
        ffma.push(op.split('.').next() == Some("FFMA"));
        if op.split('.').next() != Some("BRA") {
            continue;
        }
        let target = body.split("`(").nth(1).and_then(|s| s.split(')').next());
        if let Some(&start) = target.and_then(|l| labels.get(l)) {
            let span = &ffma[start..];
            loops.get_mut(k).expect("inserted at .text").push(SassLoop {
                label: target.unwrap_or_default().to_string(),
                instructions: span.len() as u32,
                ffma: span.iter().filter(|&&f| f).count() as u32,
            });
        }
    }
    loops
}

/// The loop of `kernel` with the most FFMA in `loops` ([`sass_loops`]'s output): a GEMM's
/// main loop. None when the kernel is missing or has no loop.
pub fn busiest_loop<'a>(loops: &'a BTreeMap<String, Vec<SassLoop>>, kernel: &str) -> Option<&'a SassLoop> {
    loops.get(kernel)?.iter().max_by_key(|l| l.ffma)
}

#[cfg(test)]
mod tests {
    use super::{SassLoop, count_sass, sass_loops};

    #[test]
    fn sass_classes_match_opcodes_and_modifiers() {
        let text = "\
        .text.k:
        /*0010*/                   REDG.E.ADD.F32x2.FTZ.RN.STRONG.GPU desc[UR4][R2.64], R4 ;
        /*0020*/              @!P0 REDG.E.ADD.F32.FTZ.RN.STRONG.GPU desc[UR4][R2.64], R6 ;
        /*0030*/                   LDG.E.128 R8, desc[UR4][R2.64] ;
        /*0040*/                   LDG.E R9, desc[UR4][R2.64] ;
        /*0050*/                   HGMMA.64x128x16.F32.BF16 gdesc[UR8], RZ, !UPT ;
        .text.other:
        /*0010*/                   STG.E.128 desc[UR4][R2.64], R8 ;
";
        let mix = count_sass(text);
        let k = &mix["k"];
        assert_eq!(k.get("REDG"), Some(&2));
        assert_eq!(k.get("REDG.F32x2"), Some(&1), "only the paired reduction: {k:?}");
        assert_eq!(k.get("LDG.128"), Some(&1));
        assert_eq!(k.get("HGMMA"), Some(&1));
        assert_eq!(k.get("STG.128"), None);
        assert_eq!(mix["other"].get("STG.128"), Some(&1));
        assert_eq!(k.get(super::SASS_INSTRUCTIONS), Some(&5));
        assert_eq!(mix["other"].get(super::SASS_INSTRUCTIONS), Some(&1));
    }

    #[test]
    fn loops_span_from_their_label_to_the_branch_back() {
        let text = "\
        .text.k:
        /*0000*/                   MOV R1, RZ ;
.L_x_1:
        /*0010*/                   FFMA R2, R3, R4, R2 ;
.L_x_2:
        /*0020*/                   FFMA R2, R3, R4, R2 ;
        /*0030*/                   IADD3 R5, R5, 0x1, RZ ;
        /*0040*/               @P0 BRA `(.L_x_2) ;
        /*0050*/               @P1 BRA `(.L_x_3) ;
        /*0060*/                   BRA `(.L_x_1) ;
.L_x_3:
        /*0070*/                   EXIT ;
        .text.none:
        /*0000*/                   BRA `(.L_x_9) ;
.L_x_9:
        /*0010*/                   EXIT ;
";
        let loops = sass_loops(text);
        let inner = SassLoop { label: ".L_x_2".into(), instructions: 3, ffma: 1 };
        let outer = SassLoop { label: ".L_x_1".into(), instructions: 6, ffma: 2 };
        assert_eq!(loops["k"], vec![inner, outer], "a forward branch is no loop");
        assert!(loops["none"].is_empty());
    }
}
