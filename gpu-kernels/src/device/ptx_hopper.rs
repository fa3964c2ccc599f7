// Hopper (sm_90a) instructions, included into `ptx.rs` in the sm_90a build only; see
// `device::hopper` for the layouts and protocols.

#[inline(always)]
pub fn smem_addr(offset: u32) -> u32 {
    shared_addr::<u8>(offset, 0)
}

#[inline(always)]
pub fn mbar_init(offset: u32, count: u32) {
    let a = smem_addr(offset);
    // SAFETY: `offset` names an 8-byte aligned mbarrier slot inside the shared segment (the
    // kernel's const layout); initialized by one thread before any other use.
    unsafe { asm!("mbarrier.init.shared::cta.b64 [{a}], {n};", a = in(reg32) a, n = in(reg32) count, options(nostack)) }
}

#[inline(always)]
pub fn mbar_arrive(offset: u32, tx_bytes: u32) {
    let a = smem_addr(offset);
    // SAFETY: an initialized mbarrier (the kernel's protocol); the state result is discarded.
    unsafe {
        if tx_bytes == 0 {
            asm!("mbarrier.arrive.shared::cta.b64 _, [{a}];", a = in(reg32) a, options(nostack))
        } else {
            asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{a}], {n};", a = in(reg32) a, n = in(reg32) tx_bytes, options(nostack))
        }
    }
}

#[inline(always)]
pub fn mbar_wait(offset: u32, parity: u32) {
    let a = smem_addr(offset);
    loop {
        let done: u32;
        // SAFETY: polls an initialized mbarrier; a memory clobber keeps later shared reads after it.
        unsafe {
            asm!(
                "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{a}], {par}; selp.u32 {d}, 1, 0, p; }}",
                a = in(reg32) a, par = in(reg32) parity, d = out(reg32) done, options(nostack)
            )
        }
        if done != 0 {
            break;
        }
    }
}

#[inline(always)]
pub fn fence_mbarrier_init() {
    // SAFETY: a fence; no operands.
    unsafe { asm!("fence.mbarrier_init.release.cluster;", options(nostack)) }
}

#[inline(always)]
pub fn fence_proxy_async() {
    // SAFETY: a fence; no operands.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) }
}

#[inline(always)]
pub fn fence_tensormap_acquire(map: u64) {
    // SAFETY: a fence on the 128 bytes of a tensor map the launcher wrote before the launch.
    unsafe {
        asm!("fence.proxy.tensormap::generic.acquire.sys [{m}], 128;", m = in(reg64) map, options(nostack))
    }
}

#[inline(always)]
pub fn tma_load_2d(dst: u32, map: u64, c0: i32, c1: i32, bar: u32) {
    let (d, b) = (smem_addr(dst), smem_addr(bar));
    // SAFETY: `map` is a tensor map the launcher encoded in global memory for this launch;
    // `dst` is a box-sized, period-aligned region of the shared segment; `bar` an initialized
    // mbarrier that expects the box's bytes.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}}}], [{b}];",
            d = in(reg32) d, m = in(reg64) map, x = in(reg32) c0, y = in(reg32) c1, b = in(reg32) b,
            options(nostack)
        )
    }
}

#[inline(always)]
pub fn wgmma_fence() {
    // SAFETY: `.sync.aligned`: the whole warpgroup executes it (the kernels' uniform control flow).
    unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) }
}

#[inline(always)]
pub fn wgmma_commit() {
    // SAFETY: as above.
    unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) }
}

#[inline(always)]
pub fn wgmma_wait<const N: u32>() {
    // SAFETY: as above; a memory clobber keeps accumulator uses after it.
    unsafe { asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack)) }
}

/// One `wgmma.mma_async.m64n128k16` with f32 accumulators `$d` (64 registers), descriptors
/// `$a`, `$b`, scale-d `$sd` and the type and transpose immediates spelled out (PTX takes them
/// as immediates, so each combination is its own instruction).
macro_rules! wgmma_m64n128 {
    ($d:ident, $a:expr, $b:expr, $sd:expr, $ty:literal, $ta:literal, $tb:literal) => {
        asm!(
            concat!(
                "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.",
                $ty, ".", $ty,
                " {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}, {d32}, {d33}, {d34}, {d35}, {d36}, {d37}, {d38}, {d39}, {d40}, {d41}, {d42}, {d43}, {d44}, {d45}, {d46}, {d47}, {d48}, {d49}, {d50}, {d51}, {d52}, {d53}, {d54}, {d55}, {d56}, {d57}, {d58}, {d59}, {d60}, {d61}, {d62}, {d63}}}, {a}, {b}, p, 1, 1, ",
                $ta, ", ", $tb, "; }}"
            ),
            d0 = inout(reg32) $d[0],
            d1 = inout(reg32) $d[1],
            d2 = inout(reg32) $d[2],
            d3 = inout(reg32) $d[3],
            d4 = inout(reg32) $d[4],
            d5 = inout(reg32) $d[5],
            d6 = inout(reg32) $d[6],
            d7 = inout(reg32) $d[7],
            d8 = inout(reg32) $d[8],
            d9 = inout(reg32) $d[9],
            d10 = inout(reg32) $d[10],
            d11 = inout(reg32) $d[11],
            d12 = inout(reg32) $d[12],
            d13 = inout(reg32) $d[13],
            d14 = inout(reg32) $d[14],
            d15 = inout(reg32) $d[15],
            d16 = inout(reg32) $d[16],
            d17 = inout(reg32) $d[17],
            d18 = inout(reg32) $d[18],
            d19 = inout(reg32) $d[19],
            d20 = inout(reg32) $d[20],
            d21 = inout(reg32) $d[21],
            d22 = inout(reg32) $d[22],
            d23 = inout(reg32) $d[23],
            d24 = inout(reg32) $d[24],
            d25 = inout(reg32) $d[25],
            d26 = inout(reg32) $d[26],
            d27 = inout(reg32) $d[27],
            d28 = inout(reg32) $d[28],
            d29 = inout(reg32) $d[29],
            d30 = inout(reg32) $d[30],
            d31 = inout(reg32) $d[31],
            d32 = inout(reg32) $d[32],
            d33 = inout(reg32) $d[33],
            d34 = inout(reg32) $d[34],
            d35 = inout(reg32) $d[35],
            d36 = inout(reg32) $d[36],
            d37 = inout(reg32) $d[37],
            d38 = inout(reg32) $d[38],
            d39 = inout(reg32) $d[39],
            d40 = inout(reg32) $d[40],
            d41 = inout(reg32) $d[41],
            d42 = inout(reg32) $d[42],
            d43 = inout(reg32) $d[43],
            d44 = inout(reg32) $d[44],
            d45 = inout(reg32) $d[45],
            d46 = inout(reg32) $d[46],
            d47 = inout(reg32) $d[47],
            d48 = inout(reg32) $d[48],
            d49 = inout(reg32) $d[49],
            d50 = inout(reg32) $d[50],
            d51 = inout(reg32) $d[51],
            d52 = inout(reg32) $d[52],
            d53 = inout(reg32) $d[53],
            d54 = inout(reg32) $d[54],
            d55 = inout(reg32) $d[55],
            d56 = inout(reg32) $d[56],
            d57 = inout(reg32) $d[57],
            d58 = inout(reg32) $d[58],
            d59 = inout(reg32) $d[59],
            d60 = inout(reg32) $d[60],
            d61 = inout(reg32) $d[61],
            d62 = inout(reg32) $d[62],
            d63 = inout(reg32) $d[63],
            a = in(reg64) $a,
            b = in(reg64) $b,
            sd = in(reg32) $sd,
            options(nostack)
        )
    };
}

#[inline(always)]
pub fn wgmma_m64n128k16<const TRANS_A: u32, const TRANS_B: u32>(
    kind: super::mma::MmaKind,
    d: &mut [f32; 64],
    a: u64,
    b: u64,
    scale_d: bool,
) {
    use super::mma::MmaKind::{Bf16, F16};
    let sd = scale_d as u32;
    // SAFETY: the descriptors name tiles inside the shared segment in the canonical layouts
    // (the kernel's const layout, checked on the emulator); the warpgroup executes this with
    // uniform operands; `d` is read and written in registers.
    unsafe {
        match (kind, TRANS_A, TRANS_B) {
            (Bf16, 0, 0) => wgmma_m64n128!(d, a, b, sd, "bf16", "0", "0"),
            (Bf16, 0, _) => wgmma_m64n128!(d, a, b, sd, "bf16", "0", "1"),
            (Bf16, _, 0) => wgmma_m64n128!(d, a, b, sd, "bf16", "1", "0"),
            (Bf16, _, _) => wgmma_m64n128!(d, a, b, sd, "bf16", "1", "1"),
            (F16, 0, 0) => wgmma_m64n128!(d, a, b, sd, "f16", "0", "0"),
            (F16, 0, _) => wgmma_m64n128!(d, a, b, sd, "f16", "0", "1"),
            (F16, _, 0) => wgmma_m64n128!(d, a, b, sd, "f16", "1", "0"),
            (F16, _, _) => wgmma_m64n128!(d, a, b, sd, "f16", "1", "1"),
        }
    }
}
