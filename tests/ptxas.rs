//! Offline validation of the embedded PTX (no GPU needed): ptxas assembles every arch, no
//! kernel spills or keeps a stack frame unless allow-listed, the PTX entry points are exactly
//! the kernels the device crate declares, and the elementwise kernels' SASS moves memory with
//! 128-bit loads and stores; the tensor-core GEMM and attention use HMMA, ldmatrix and cp.async.

use ferrokern::gpu_kernels::ALL_KERNELS;
use ferrokern::info::{self, SPILL_ALLOWLIST};
use std::collections::BTreeSet;

fn tool(name: &str) -> std::path::PathBuf {
    info::find_tool(name).unwrap_or_else(|| {
        panic!("{name} not found: run scripts/setup.sh (it installs ptxas and nvdisasm into .tools/venv), or set FERROKERN_{}", name.to_uppercase())
    })
}

fn declared() -> BTreeSet<String> {
    ALL_KERNELS.iter().flat_map(|(_, ks)| ks.iter().map(|k| k.to_string())).collect()
}

#[test]
fn every_arch_assembles_without_spills() {
    let ptxas = tool("ptxas");
    assert!(ferrokern::PTX.iter().any(|(a, _)| *a == "sm_80"), "sm_80 PTX is embedded");
    assert!(ferrokern::PTX.iter().any(|(a, _)| *a == "sm_90"), "sm_90 PTX is embedded");
    for (arch, ptx) in ferrokern::PTX {
        let (rows, cubin) = info::ptxas(&ptxas, arch, ptx).unwrap_or_else(|e| panic!("{e}"));
        let _ = std::fs::remove_file(cubin);
        let names: BTreeSet<String> = rows.iter().map(|r| r.kernel.clone()).collect();
        assert_eq!(names, declared(), "{arch}: PTX entries differ from the kernels gpu-kernels declares");
        for r in &rows {
            let allowed = SPILL_ALLOWLIST.iter().any(|(k, _)| *k == r.kernel);
            assert!(
                allowed || (r.spill_store_bytes == 0 && r.spill_load_bytes == 0 && r.stack_bytes == 0),
                "{arch} {}: {} B spill stores, {} B spill loads, {} B stack; fix it or list it in SPILL_ALLOWLIST with a reason",
                r.kernel,
                r.spill_store_bytes,
                r.spill_load_bytes,
                r.stack_bytes
            );
        }
        println!("{arch}: {} kernels assembled, none spill", rows.len());
        for r in &rows {
            let threads = ferrokern::gpu_kernels::launch_threads(&r.kernel).unwrap_or_else(|| {
                panic!("{}: no block size known; add its family to gpu_kernels::launch_threads", r.kernel)
            });
            // A block must fit one SM's register file (64K 32-bit registers on sm_80/sm_90,
            // allocated per thread in units of 8), or the launch fails with "too many
            // resources requested".
            assert!(
                r.registers.div_ceil(8) as u64 * 8 * threads as u64 <= 65_536,
                "{arch} {}: {} registers x {threads} threads exceeds the 65536-register file; the launch would fail",
                r.kernel,
                r.registers
            );
        }
        println!("{arch}: every kernel's registers x block threads fit the register file");
    }
}

#[test]
fn elementwise_sass_uses_128_bit_global_accesses() {
    let (ptxas, nvdisasm) = (tool("ptxas"), tool("nvdisasm"));
    let (arch, ptx) = ferrokern::PTX.iter().find(|(a, _)| *a == "sm_90").expect("sm_90 embedded");
    let (_, cubin) = info::ptxas(&ptxas, arch, ptx).unwrap();
    let mix = info::sass_mix(&nvdisasm, &cubin).unwrap();
    let _ = std::fs::remove_file(cubin);
    for k in ferrokern::gpu_kernels::elementwise::KERNEL_NAMES {
        let m = mix.get(*k).unwrap_or_else(|| panic!("{k} missing from the SASS"));
        let ld = m.get("LDG.128").copied().unwrap_or(0);
        let st = m.get("STG.128").copied().unwrap_or(0);
        assert!(ld >= 1 && st >= 1, "{k}: {ld} LDG.128 and {st} STG.128 in its SASS: {m:?}");
        assert_eq!(m.get("LDL").copied().unwrap_or(0) + m.get("STL").copied().unwrap_or(0), 0, "{k} uses local memory");
    }
}

#[test]
fn top_gemm_version_uses_128_bit_shared_loads_and_ffma() {
    let (ptxas, nvdisasm) = (tool("ptxas"), tool("nvdisasm"));
    let top =
        ferrokern::gemm::version(ferrokern::gemm::LARGE_VERSION).expect("the large-shape version is in the ladder");
    for (arch, ptx) in ferrokern::PTX {
        let (_, cubin) = info::ptxas(&ptxas, arch, ptx).unwrap();
        let sass = info::disassemble(&nvdisasm, &cubin).unwrap();
        let _ = std::fs::remove_file(cubin);
        let mix = info::count_sass(&sass);
        let m = mix.get(top.kernel.name).unwrap_or_else(|| panic!("{} missing from the {arch} SASS", top.kernel.name));
        let get = |c: &str| m.get(c).copied().unwrap_or(0);
        // Shared operands in 128-bit loads (LDS.128, not 4 LDS or generic LD), a fully
        // unrolled register-tile outer product (FFMA), no local memory.
        assert!(get("LDS.128") >= 4, "{arch} {}: {} LDS.128 in {m:?}", top.name, get("LDS.128"));
        assert!(get("FFMA") >= 128, "{arch} {}: {} FFMA in {m:?}", top.name, get("FFMA"));
        assert_eq!(get("LDL") + get("STL"), 0, "{arch} {}: local memory in {m:?}", top.name);
        // The k-step loop: a whole k-step's FMAs unrolled in it (a rolled depth loop spends
        // 4 of every 72 instructions on its own control, v08's 0.80 FFMA share per k-step),
        // and at least 80% of the loop's instructions as laid out are FFMA (guarded loads and
        // the last k-step's copy included).
        let t = top.tiling;
        let loops = info::sass_loops(&sass);
        let hot = info::busiest_loop(&loops, top.kernel.name).expect("the large-shape version has loops");
        assert!(
            hot.ffma >= t.bk * t.tm * t.tn && hot.ffma * 5 >= hot.instructions * 4,
            "{arch} {}: its busiest loop ({}) has {} FFMA in {} instructions; want a whole k-step's {} \
             and at least 80%",
            top.name,
            hot.label,
            hot.ffma,
            hot.instructions,
            t.bk * t.tm * t.tn
        );
        println!(
            "{arch} {}: {} LDS.128, {} FFMA, no local memory; k-step loop {} FFMA in {} instructions",
            top.name,
            get("LDS.128"),
            get("FFMA"),
            hot.ffma,
            hot.instructions
        );
    }
}

#[test]
fn tensor_core_gemm_sass_has_hmma_ldmatrix_and_async_copies() {
    let (ptxas, nvdisasm) = (tool("ptxas"), tool("nvdisasm"));
    for (arch, ptx) in ferrokern::PTX {
        let (_, cubin) = info::ptxas(&ptxas, arch, ptx).unwrap();
        let mix = info::sass_mix(&nvdisasm, &cubin).unwrap();
        let _ = std::fs::remove_file(cubin);
        for v in ferrokern::gpu_kernels::gemm_tc::VERSIONS {
            if v.config.required_arch().is_some() {
                continue; // the sm_90a gate below
            }
            for k in [v.bf16.name, v.f16.name] {
                let m = mix.get(k).unwrap_or_else(|| panic!("{k} missing from the {arch} SASS"));
                let get = |c: &str| m.get(c).copied().unwrap_or(0);
                assert!(get("HMMA") >= 16, "{arch} {k}: {} HMMA in {m:?}", get("HMMA"));
                assert!(get("LDSM") >= 1, "{arch} {k}: no LDSM (ldmatrix) in {m:?}");
                assert!(get("LDGSTS") >= 1, "{arch} {k}: no LDGSTS (cp.async) in {m:?}");
                assert_eq!(get("LDL") + get("STL"), 0, "{arch} {k}: local memory in {m:?}");
                println!(
                    "{arch} {k}: {} HMMA, {} LDSM, {} LDGSTS, no local memory",
                    get("HMMA"),
                    get("LDSM"),
                    get("LDGSTS")
                );
            }
        }
    }
}

/// Most SASS instructions a wgmma GEMM kernel may have (16 bytes each: 64 KB, half an SM's
/// 128 KB instruction cache). The element-by-element epilogue, unrolled over 128 accumulators,
/// made v04 214 KB and cost about 85 us per tile on the H200 (`gemm_tc::wgmma::epilogue`);
/// with the pair and staged epilogues v02-v06 have 2456-3688 (ptxas 12.9, 2026-12-07).
const GEMM_MAX_INSTRUCTIONS: u32 = 4096;

/// The offline gate for Hopper: in the sm_90a build every wgmma kernel's SASS (the
/// GEMM versions and attention v03) has HGMMA (warpgroup MMA), UTMALDG (TMA loads) and SYNCS
/// (mbarrier) instructions and no local memory, and ptxas raised no advisory on it: no
/// serialized wgmmas (which it does when the accumulators are touched while in flight), no
/// `warpgroup.arrive` injected between wgmmas (C7519: it fences a wgmma whose accumulators
/// reach it through control flow it cannot follow, as a per-k-step branch on the layout did),
/// no ignored `setmaxnreg` (C7508: the entry must declare its register count). Kernels that
/// trade registers have exactly two `setmaxnreg` in their SASS (USETMAXREG: producer and
/// consumers).
#[test]
fn hopper_sass_has_hgmma_and_tma() {
    let (ptxas, nvdisasm) = (tool("ptxas"), tool("nvdisasm"));
    let (arch, ptx) = ferrokern::PTX.iter().find(|(a, _)| *a == "sm_90a").expect("sm_90a PTX is embedded");
    let (rows, cubin, warnings) = info::ptxas_with_warnings(&ptxas, arch, ptx).unwrap();
    let mix = info::sass_mix(&nvdisasm, &cubin).unwrap();
    let _ = std::fs::remove_file(cubin);
    // (kernel, HGMMA it must have at least, whether it runs setmaxnreg)
    let mut kernels: Vec<(&str, u32, bool)> = Vec::new();
    // The GEMM versions' whole tiles of f32 C go out as accumulator pairs: an 8-byte store per
    // pair (`wgmma::pair_epilogue`), bn / 4 of them per thread, never element by element only;
    // and their code stays within GEMM_MAX_INSTRUCTIONS.
    let mut pairs: Vec<(&str, u32)> = Vec::new();
    // Kernels with the ping-pong's named barriers: BAR for `sync_threads`, the first
    // hand-over, and each turn's wait and hand-over (more where ptxas duplicates a path).
    let mut pingpong: Vec<&str> = Vec::new();
    for v in ferrokern::gpu_kernels::gemm_tc::VERSIONS.iter().filter(|v| v.config.required_arch() == Some("sm_90a")) {
        kernels.extend([v.bf16.name, v.f16.name].map(|k| (k, 4, v.config.uses_setmaxnreg())));
        let ferrokern::gemm_tc::TcConfig::Wgmma(t) = v.config else { unreachable!("sm_90a versions are wgmma") };
        pairs.extend([v.bf16.name, v.f16.name].map(|k| (k, t.bn / 4)));
    }
    assert!(!kernels.is_empty(), "the GEMM ladder has an sm_90a version");
    for v in ferrokern::attention::VERSIONS {
        for kernel in v.kernels.iter().filter(|k| k.required_arch() == Some("sm_90a")) {
            // S = Q K^T: d / 16 wgmmas; O += P V: keys / 16 (one key tile, the TMA box's rows:
            // 128, or 64 at head dim 256). Dense and varlen.
            let keys = kernel.tma.as_ref().map(|t| t.kv_box[1]).expect("an sm_90a attention kernel loads by TMA");
            let hgmma = kernel.head_dims[0] / 16 + keys / 16;
            kernels.extend(kernel.defs().map(|k| (k, hgmma, true)));
            if v.name == "v04_pingpong" {
                pingpong.extend(kernel.defs());
            }
        }
    }
    assert!(kernels.iter().any(|(k, _, _)| k.starts_with("attention")), "the attention ladder has an sm_90a version");
    // The backward's TMA dK/dV kernels, dense and varlen: S^T and dP^T (d / 16 each), dV and
    // dK (bq / 16 each: the Q box's rows), dQ (128 keys / 16); a named barrier besides
    // sync_threads, and the dQ reductions.
    let mut backward: Vec<&str> = Vec::new();
    let bwd = ferrokern::attention_backward::BACKWARD_VERSIONS
        .iter()
        .chain([&ferrokern::attention_backward::BUG_BWD_V03_DS_UNSWIZZLED]);
    for kernel in bwd.flat_map(|v| v.kernels).filter(|k| k.required_arch() == Some("sm_90a")) {
        let tma = kernel.tma.as_ref().expect("an sm_90a backward kernel loads by TMA");
        let hgmma = 2 * (kernel.head_dims[0] / 16) + 2 * (tma.q_box[1] / 16) + tma.kv_box[1] / 16;
        let varlen = kernel.varlen.iter().flat_map(|v| [v.bf16.dkdv.name, v.f16.dkdv.name]);
        for k in [kernel.bf16.dkdv.name, kernel.f16.dkdv.name].into_iter().chain(varlen) {
            kernels.push((k, hgmma, true));
            backward.push(k);
        }
    }
    assert!(!backward.is_empty(), "the backward ladder has an sm_90a version");
    for (k, hgmma, uses_setmaxnreg) in kernels {
        let m = mix.get(k).unwrap_or_else(|| panic!("{k} missing from the {arch} SASS"));
        let get = |c: &str| m.get(c).copied().unwrap_or(0);
        assert!(get("HGMMA") >= hgmma, "{arch} {k}: {} HGMMA (want >= {hgmma}) in {m:?}", get("HGMMA"));
        assert!(get("UTMALDG") >= 1, "{arch} {k}: no UTMALDG (TMA) in {m:?}");
        assert!(get("SYNCS") >= 1, "{arch} {k}: no SYNCS (mbarrier) in {m:?}");
        if !SPILL_ALLOWLIST.iter().any(|(a, _)| *a == k) {
            assert_eq!(get("LDL") + get("STL"), 0, "{arch} {k}: local memory in {m:?}");
        }
        let quoted = format!("'{k}'");
        let advisories: Vec<_> = warnings.iter().filter(|w| w.contains(&quoted)).collect();
        assert!(advisories.is_empty(), "{arch} {k}: ptxas advisories: {advisories:?}");
        if pingpong.contains(&k) {
            assert!(get("BAR") >= 4, "{arch} {k}: {} BAR, want the ping-pong's named barriers in {m:?}", get("BAR"));
        }
        if backward.contains(&k) {
            assert!(get("BAR") >= 2, "{arch} {k}: {} BAR, want the dS^T barrier in {m:?}", get("BAR"));
            // dQ goes out in 8-byte `red.global.add.v2.f32` pairs: every reduction is one,
            // and there is no scalar or value-returning atomic left.
            let (paired, reds) = (get("REDG.F32x2"), get("RED") + get("REDG"));
            assert!(paired >= 1, "{arch} {k}: no paired dQ reduction (REDG.F32x2) in {m:?}");
            assert_eq!(paired, reds, "{arch} {k}: {reds} reductions, only {paired} paired in {m:?}");
            assert_eq!(get("ATOM") + get("ATOMG"), 0, "{arch} {k}: a value-returning atomic in {m:?}");
        }
        if let Some((_, want)) = pairs.iter().find(|(p, _)| *p == k) {
            assert!(
                get("STG.64") >= *want,
                "{arch} {k}: {} STG.64, want the pair epilogue's {want} in {m:?}",
                get("STG.64")
            );
            let size = get(info::SASS_INSTRUCTIONS);
            assert!(
                size <= GEMM_MAX_INSTRUCTIONS,
                "{arch} {k}: {size} SASS instructions ({} KB), over {GEMM_MAX_INSTRUCTIONS}: an epilogue unrolled per accumulator again?",
                size * 16 / 1024
            );
        }
        let setmaxnreg = get("USETMAXREG");
        let want = if uses_setmaxnreg { 2 } else { 0 };
        assert_eq!(setmaxnreg, want, "{arch} {k}: {setmaxnreg} USETMAXREG (want {want}) in {m:?}");
        let r = rows.iter().find(|r| r.kernel == k).expect("ptxas reported it");
        if uses_setmaxnreg {
            // setmaxnreg moves registers within what the block got at launch; the tilings'
            // checks and the emulator take that count from `launch_regs_per_thread`.
            let threads = ferrokern::gpu_kernels::launch_threads(k).expect("a known block size");
            let entry = ferrokern::gpu_kernels::launch_regs_per_thread(threads);
            assert_eq!(
                r.registers, entry,
                "{arch} {k}: {} registers at entry; its register split assumes {entry} ({threads} threads)",
                r.registers
            );
        }
        println!(
            "{arch} {k}: {} instructions, {} registers at entry, {} HGMMA, {} UTMALDG, {} SYNCS, {} BAR, {setmaxnreg} USETMAXREG, no local memory, no ptxas advisory",
            get(info::SASS_INSTRUCTIONS),
            r.registers,
            get("HGMMA"),
            get("UTMALDG"),
            get("SYNCS"),
            get("BAR")
        );
    }
}

#[test]
fn paged_decode_v02_moves_kv_in_128_bit_copies_without_local_memory() {
    let (ptxas, nvdisasm) = (tool("ptxas"), tool("nvdisasm"));
    let v = ferrokern::paged::version("v02_vec").expect("v02_vec is in the paged ladder");
    for (arch, ptx) in ferrokern::PTX {
        let (rows, cubin) = info::ptxas(&ptxas, arch, ptx).unwrap();
        let mix = info::sass_mix(&nvdisasm, &cubin).unwrap();
        let _ = std::fs::remove_file(cubin);
        for k in [v.bf16.name, v.f16.name] {
            let m = mix.get(k).unwrap_or_else(|| panic!("{k} missing from the {arch} SASS"));
            let get = |c: &str| m.get(c).copied().unwrap_or(0);
            // K and V arrive as 16-byte cp.async copies (LDGSTS.128) or 128-bit loads (LDG.128),
            // never element by element; the accumulators stay in registers.
            let wide = get("LDGSTS.128") + get("LDG.128");
            assert!(wide >= 2, "{arch} {k}: {} LDGSTS.128, {} LDG.128 in {m:?}", get("LDGSTS.128"), get("LDG.128"));
            assert_eq!(get("LDGSTS"), get("LDGSTS.128"), "{arch} {k}: every async copy is 16 bytes: {m:?}");
            assert_eq!(get("LDL") + get("STL"), 0, "{arch} {k}: local memory in {m:?}");
            let r = rows.iter().find(|r| r.kernel == k).expect("ptxas reports the kernel");
            assert!(r.spill_store_bytes == 0 && r.spill_load_bytes == 0 && r.stack_bytes == 0, "{arch} {k}: spills");
            println!(
                "{arch} {k}: {} registers, {} LDGSTS.128, {} LDG.128, {} LDS.128, {} FFMA, no local memory; {} B dynamic shared",
                r.registers,
                get("LDGSTS.128"),
                get("LDG.128"),
                get("LDS.128"),
                get("FFMA"),
                v.shared_bytes
            );
        }
    }
}

#[test]
fn tensor_core_attention_sass_has_hmma_ldmatrix_and_async_copies() {
    use ferrokern::attention::VERSIONS;
    let (ptxas, nvdisasm) = (tool("ptxas"), tool("nvdisasm"));
    // The mma.sync versions (wgmma's are gated in `hopper_sass_has_hgmma_and_tma`).
    let tc: Vec<_> =
        VERSIONS.iter().filter(|v| v.tensor_cores && v.kernels.iter().all(|k| k.required_arch().is_none())).collect();
    assert!(!tc.is_empty(), "the attention ladder has a tensor-core version");
    for (arch, ptx) in ferrokern::PTX {
        let (rows, cubin) = info::ptxas(&ptxas, arch, ptx).unwrap();
        let mix = info::sass_mix(&nvdisasm, &cubin).unwrap();
        let _ = std::fs::remove_file(cubin);
        for v in &tc {
            for kernel in v.kernels {
                let d = kernel.head_dims[0];
                // The variable-length kernels (same body, offsets read per sequence) too.
                for k in kernel.defs() {
                    let m = mix.get(k).unwrap_or_else(|| panic!("{k} missing from the {arch} SASS"));
                    let r = rows.iter().find(|r| r.kernel == k).expect("ptxas reported it");
                    let get = |c: &str| m.get(c).copied().unwrap_or(0);
                    // One tile's body: S = Q K^T is d/16 k-steps x 8 n8 key tiles and P V is 4
                    // k-steps x d/8 n8 tiles of mma, each at least once in the SASS; ldmatrix
                    // for Q (d/16), K (d/16 x 4) and V (4 x d/16).
                    let (hmma, ldsm) = (d / 16 * 8 + 4 * d / 8, d / 16 * 9);
                    assert!(get("HMMA") >= hmma, "{arch} {k}: {} HMMA (want >= {hmma}) in {m:?}", get("HMMA"));
                    assert!(get("LDSM") >= ldsm, "{arch} {k}: {} LDSM (want >= {ldsm}) in {m:?}", get("LDSM"));
                    assert!(get("LDGSTS") >= 1, "{arch} {k}: no LDGSTS (cp.async) in {m:?}");
                    assert_eq!(get("LDL") + get("STL"), 0, "{arch} {k}: local memory in {m:?}");
                    assert!(
                        r.spill_store_bytes == 0 && r.spill_load_bytes == 0 && r.stack_bytes == 0,
                        "{arch} {k}: spills or a stack frame: {r:?}"
                    );
                    println!(
                        "{arch} {k}: {} registers, {} HMMA, {} LDSM, {} LDGSTS, {} BAR, no local memory, no spills; {} B dynamic shared",
                        r.registers,
                        get("HMMA"),
                        get("LDSM"),
                        get("LDGSTS"),
                        get("BAR"),
                        kernel.shared_bytes
                    );
                }
            }
        }
    }
}

#[test]
fn attention_backward_kernels_have_no_spills_or_local_memory() {
    use ferrokern::attention_backward::{
        BACKWARD_VERSIONS, BUG_BWD_NO_D, BUG_BWD_V02_SWAPPED_DS, BUG_BWD_VARLEN_TOP_LEFT,
    };
    let (ptxas, nvdisasm) = (tool("ptxas"), tool("nvdisasm"));
    for (arch, ptx) in ferrokern::PTX {
        let (rows, cubin) = info::ptxas(&ptxas, arch, ptx).unwrap();
        let mix = info::sass_mix(&nvdisasm, &cubin).unwrap();
        let _ = std::fs::remove_file(cubin);
        let all = BACKWARD_VERSIONS.iter().chain([&BUG_BWD_NO_D, &BUG_BWD_V02_SWAPPED_DS, &BUG_BWD_VARLEN_TOP_LEFT]);
        for v in all {
            // The TMA kernels are gated in `hopper_sass_has_hgmma_and_tma` (sm_90a only).
            for kernel in v.kernels.iter().filter(|k| k.required_arch().is_none()) {
                let d = kernel.head_dims[0];
                // Dense and variable-length entry points, both dtypes.
                for k in kernel.defs() {
                    let m = mix.get(k).unwrap_or_else(|| panic!("{k} missing from the {arch} SASS"));
                    let r = rows.iter().find(|r| r.kernel == k).expect("ptxas reported it");
                    let get = |c: &str| m.get(c).copied().unwrap_or(0);
                    // dK, dV (and the dQ partials) are register arrays indexed by constants only.
                    assert_eq!(get("LDL") + get("STL"), 0, "{arch} {k}: local memory in {m:?}");
                    assert!(
                        r.spill_store_bytes == 0 && r.spill_load_bytes == 0 && r.stack_bytes == 0,
                        "{arch} {k}: spills or a stack frame: {r:?}"
                    );
                    let atomics = get("RED") + get("ATOM") + get("REDG") + get("ATOMG");
                    println!(
                        "{arch} {k}: {} registers, {} HMMA, {} LDSM, {} LDGSTS, {} FFMA, {} BAR, {atomics} global atomics, no local memory, no spills",
                        r.registers,
                        get("HMMA"),
                        get("LDSM"),
                        get("LDGSTS"),
                        get("FFMA"),
                        get("BAR"),
                    );
                    let (dkdv, dq) = (k.contains("dkdv"), k.contains("_dq_") && !k.contains("convert"));
                    if dkdv {
                        // The atomic dQ path is compiled in (it runs when `atomic_dq` is set).
                        assert!(atomics >= 1, "{arch} {k}: no atomic add for dQ in {m:?}");
                    }
                    if v.tensor_cores && (dkdv || dq) {
                        // One query tile of dkdv: S^T and dP^T (d/16 k-steps x bq/8 n8 tiles
                        // each), dV and dK over the warp's head dims (bq/16 k-steps x own_d/8),
                        // one 16-dim chunk of dQ (4 k-steps x 2): 136 mma at d 64 and 128, 200
                        // at d 256 (S^T and dP^T over all 256 dims). One key tile of dq: S and
                        // dP (d/16 x bn/8 each), dQ over the warp's dims (bn/16 x own_d/8).
                        // Each at least once in the SASS, with ldmatrix.
                        let t = ferrokern::gpu_kernels::attention::bwd_v02_mma::tiling(d as usize);
                        let (bq, bn, own) = (t.bq, t.bn, t.own_d());
                        let hmma = if dkdv {
                            2 * (d / 16) * (bq / 8) + 2 * (bq / 16) * (own / 8) + 8
                        } else {
                            2 * (d / 16) * (bn / 8) + (bn / 16) * (own / 8)
                        };
                        assert!(get("HMMA") >= hmma, "{arch} {k}: {} HMMA (want >= {hmma}) in {m:?}", get("HMMA"));
                        assert!(get("LDSM") >= d / 16, "{arch} {k}: {} LDSM in {m:?}", get("LDSM"));
                        assert!(get("LDGSTS") >= 1, "{arch} {k}: no LDGSTS (cp.async) in {m:?}");
                    }
                }
            }
        }
    }
}

/// The tensor-core paged decode (and its deliberately broken twins, which ship in the PTX):
/// mma.sync (HMMA) for `Q K^T` and `P V`, ldmatrix (LDSM) for K and V, the K/V pages by
/// 16-byte cp.async (LDGSTS.128), no local memory, no spills or stack frame, on every arch.
#[test]
fn paged_decode_mma_sass_has_hmma_ldmatrix_and_async_copies() {
    use ferrokern::paged::{BUGS, VERSIONS};
    let (ptxas, nvdisasm) = (tool("ptxas"), tool("nvdisasm"));
    let tc: Vec<_> = VERSIONS.iter().filter(|v| v.tensor_cores).collect();
    assert!(!tc.is_empty(), "the paged ladder has a tensor-core version");
    for (arch, ptx) in ferrokern::PTX {
        let (rows, cubin) = info::ptxas(&ptxas, arch, ptx).unwrap();
        let mix = info::sass_mix(&nvdisasm, &cubin).unwrap();
        let _ = std::fs::remove_file(cubin);
        let kernels = tc.iter().flat_map(|v| [v.bf16.name, v.f16.name]).chain(BUGS.iter().map(|v| v.bf16.name));
        for k in kernels {
            let m = mix.get(k).unwrap_or_else(|| panic!("{k} missing from the {arch} SASS"));
            let r = rows.iter().find(|r| r.kernel == k).expect("ptxas reported it");
            let get = |c: &str| m.get(c).copied().unwrap_or(0);
            // One body per head dim (KD = d / 16 = 2, 4, 6, 8 k-steps), each with a tile's
            // straight-line KD x 2 mma for S and KD x 2 for P V, and KD ldmatrix for K and KD
            // (.trans) for V: at least 4 x 20 HMMA and 2 x 20 LDSM in the SASS.
            let kd_sum: u32 = [2, 4, 6, 8].iter().sum();
            let (hmma, ldsm) = (4 * kd_sum, 2 * kd_sum);
            assert!(get("HMMA") >= hmma, "{arch} {k}: {} HMMA (want >= {hmma}) in {m:?}", get("HMMA"));
            assert!(get("LDSM") >= ldsm, "{arch} {k}: {} LDSM (want >= {ldsm}) in {m:?}", get("LDSM"));
            assert!(get("LDGSTS.128") >= 2, "{arch} {k}: {} LDGSTS.128 in {m:?}", get("LDGSTS.128"));
            assert_eq!(get("LDGSTS"), get("LDGSTS.128"), "{arch} {k}: every async copy is 16 bytes: {m:?}");
            assert_eq!(get("LDL") + get("STL"), 0, "{arch} {k}: local memory in {m:?}");
            assert!(
                r.spill_store_bytes == 0 && r.spill_load_bytes == 0 && r.stack_bytes == 0,
                "{arch} {k}: spills or a stack frame: {r:?}"
            );
            println!(
                "{arch} {k}: {} registers, {} HMMA, {} LDSM, {} LDGSTS.128, {} BAR, no local memory, no spills; {} B dynamic shared",
                r.registers,
                get("HMMA"),
                get("LDSM"),
                get("LDGSTS.128"),
                get("BAR"),
                tc[0].shared_bytes
            );
            // The block grows to 4 row tiles (`max_threads`): it must fit one SM's registers
            // (64K, allocated per warp in units of 256), and how many fit is the residency the
            // module docs predict from.
            let v = tc[0];
            let per_warp = (r.registers * 32).div_ceil(256) * 256;
            let resident: Vec<u32> =
                (1..=v.max_row_tiles).map(|tiles| 65_536 / (per_warp * v.tile_threads / 32 * tiles)).collect();
            assert!(resident.iter().all(|&b| b >= 1), "{arch} {k}: a {}-thread block does not fit", v.max_threads());
            println!("{arch} {k}: blocks per SM by registers at 1..={} row tiles: {resident:?}", v.max_row_tiles);
        }
    }
}
