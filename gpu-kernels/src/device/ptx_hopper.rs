// Hopper (sm_90a) instructions, included into `ptx.rs` in the sm_90a build only; see
// `device::hopper` for the layouts and protocols.

/// Two neighbouring f32 words in one 8-byte reduction (PTX 8.1, sm_90).
///
/// # Safety
/// `p` is a valid, 8-byte aligned global address of two f32.
#[inline(always)]
pub unsafe fn red_add_f32x2(p: *mut f32, v: [f32; 2]) {
    // SAFETY: the caller guarantees a valid, 8-byte aligned global address.
    unsafe {
        asm!(
            "red.global.add.v2.f32 [{p}], {{{a}, {b}}};",
            p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1],
            options(nostack)
        )
    }
}

/// `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32`, `bytes` from shared byte
/// `src` added to `p`.
///
/// # Safety
/// `p` is a valid, 16-byte aligned global address of `bytes / 4` f32; `src + bytes` lies in
/// the shared segment, 16-byte aligned, `bytes` a multiple of 16.
#[inline(always)]
pub unsafe fn bulk_reduce_add_f32(p: *mut f32, src: u32, bytes: u32) {
    let s = smem_addr(src);
    // SAFETY: the caller guarantees both ranges; the async proxy reads the shared bytes until
    // the thread's `cp.async.bulk.wait_group.read` covers this op (the kernel's protocol).
    unsafe {
        asm!(
            "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [{p}], [{s}], {n};",
            p = in(reg64) p, s = in(reg32) s, n = in(reg32) bytes,
            options(nostack)
        )
    }
}

#[inline(always)]
pub fn bulk_commit_group() {
    // SAFETY: closes this thread's bulk group; no operands.
    unsafe { asm!("cp.async.bulk.commit_group;", options(nostack)) }
}

#[inline(always)]
pub fn bulk_wait_group<const N: u32>(read: bool) {
    // SAFETY: waits on this thread's bulk groups; a memory clobber keeps later shared stores
    // after it.
    unsafe {
        if read {
            asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack))
        } else {
            asm!("cp.async.bulk.wait_group {n};", n = const N, options(nostack))
        }
    }
}

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
pub fn tma_load_3d(dst: u32, map: u64, c0: i32, c1: i32, c2: i32, bar: u32) {
    let (d, b) = (smem_addr(dst), smem_addr(bar));
    // SAFETY: as `tma_load_2d`, through a rank-3 map.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}, {z}}}], [{b}];",
            d = in(reg32) d, m = in(reg64) map, x = in(reg32) c0, y = in(reg32) c1, z = in(reg32) c2, b = in(reg32) b,
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

/// One `wgmma.mma_async.m64nNk16` (`$shape`) with f32 accumulators `$d` (positional operands
/// `$i`, N / 2 registers), descriptors `$a`, `$b`, scale-d `$sd` and the type and transpose
/// immediates spelled out (PTX takes them as immediates, so each combination is its own
/// instruction).
macro_rules! wgmma_async {
    ($shape:literal, $d:ident, $a:expr, $b:expr, $sd:expr, $ty:literal, $ta:literal, $tb:literal; $first:tt $($i:tt)*) => {
        asm!(
            concat!(
                "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; wgmma.mma_async.sync.aligned.", $shape, ".f32.",
                $ty, ".", $ty,
                " {{{", stringify!($first), "}", $(", {", stringify!($i), "}",)* "}}, {a}, {b}, p, 1, 1, ",
                $ta, ", ", $tb, "; }}"
            ),
            inout(reg32) $d[$first],
            $(inout(reg32) $d[$i],)*
            a = in(reg64) $a,
            b = in(reg64) $b,
            sd = in(reg32) $sd,
            options(nostack)
        )
    };
}

/// The register-A form: `$a` holds A's four b32 registers; only `imm-trans-b` remains.
macro_rules! wgmma_async_rs {
    ($shape:literal, $d:ident, $a:expr, $b:expr, $sd:expr, $ty:literal, $tb:literal; $first:tt $($i:tt)*) => {
        asm!(
            concat!(
                "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; wgmma.mma_async.sync.aligned.", $shape, ".f32.",
                $ty, ".", $ty,
                " {{{", stringify!($first), "}", $(", {", stringify!($i), "}",)* "}}, {{{a0}, {a1}, {a2}, {a3}}}, {b}, p, 1, 1, ",
                $tb, "; }}"
            ),
            inout(reg32) $d[$first],
            $(inout(reg32) $d[$i],)*
            a0 = in(reg32) $a[0],
            a1 = in(reg32) $a[1],
            a2 = in(reg32) $a[2],
            a3 = in(reg32) $a[3],
            b = in(reg64) $b,
            sd = in(reg32) $sd,
            options(nostack)
        )
    };
}

macro_rules! wgmma_m64n64 {
    ($d:ident, $a:expr, $b:expr, $sd:expr, $ty:literal, $ta:literal, $tb:literal) => {
        wgmma_async!("m64n64k16", $d, $a, $b, $sd, $ty, $ta, $tb; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
    };
}

macro_rules! wgmma_rs_m64n64 {
    ($d:ident, $a:expr, $b:expr, $sd:expr, $ty:literal, $tb:literal) => {
        wgmma_async_rs!("m64n64k16", $d, $a, $b, $sd, $ty, $tb; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
    };
}

macro_rules! wgmma_rs_m64n128 {
    ($d:ident, $a:expr, $b:expr, $sd:expr, $ty:literal, $tb:literal) => {
        wgmma_async_rs!("m64n128k16", $d, $a, $b, $sd, $ty, $tb; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63)
    };
}

macro_rules! wgmma_rs_m64n256 {
    ($d:ident, $a:expr, $b:expr, $sd:expr, $ty:literal, $tb:literal) => {
        wgmma_async_rs!("m64n256k16", $d, $a, $b, $sd, $ty, $tb; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127)
    };
}

macro_rules! wgmma_m64n128 {
    ($d:ident, $a:expr, $b:expr, $sd:expr, $ty:literal, $ta:literal, $tb:literal) => {
        wgmma_async!("m64n128k16", $d, $a, $b, $sd, $ty, $ta, $tb; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63)
    };
}

macro_rules! wgmma_m64n256 {
    ($d:ident, $a:expr, $b:expr, $sd:expr, $ty:literal, $ta:literal, $tb:literal) => {
        wgmma_async!("m64n256k16", $d, $a, $b, $sd, $ty, $ta, $tb; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127)
    };
}

/// `pub fn $name`: one wgmma of the shape `$shape` issues (`$regs` accumulators), with the type
/// and transpose immediates picked from the arguments (constants after inlining).
macro_rules! wgmma_fn {
    ($name:ident, $regs:literal, $shape:ident) => {
        #[inline(always)]
        pub fn $name<const TRANS_A: u32, const TRANS_B: u32>(
            kind: super::mma::MmaKind,
            d: &mut [f32; $regs],
            a: u64,
            b: u64,
            scale_d: bool,
        ) {
            use super::mma::MmaKind::{Bf16, F16};
            let sd = scale_d as u32;
            // SAFETY: the descriptors name tiles inside the shared segment in the canonical
            // layouts (the kernel's const layout, checked on the emulator); the warpgroup
            // executes this with uniform operands; `d` is read and written in registers.
            unsafe {
                match (kind, TRANS_A, TRANS_B) {
                    (Bf16, 0, 0) => $shape!(d, a, b, sd, "bf16", "0", "0"),
                    (Bf16, 0, _) => $shape!(d, a, b, sd, "bf16", "0", "1"),
                    (Bf16, _, 0) => $shape!(d, a, b, sd, "bf16", "1", "0"),
                    (Bf16, _, _) => $shape!(d, a, b, sd, "bf16", "1", "1"),
                    (F16, 0, 0) => $shape!(d, a, b, sd, "f16", "0", "0"),
                    (F16, 0, _) => $shape!(d, a, b, sd, "f16", "0", "1"),
                    (F16, _, 0) => $shape!(d, a, b, sd, "f16", "1", "0"),
                    (F16, _, _) => $shape!(d, a, b, sd, "f16", "1", "1"),
                }
            }
        }
    };
}

wgmma_fn!(wgmma_m64n64k16, 32, wgmma_m64n64);
wgmma_fn!(wgmma_m64n128k16, 64, wgmma_m64n128);
wgmma_fn!(wgmma_m64n256k16, 128, wgmma_m64n256);

/// `pub fn $name`: one register-A wgmma of the shape `$shape` (see `wgmma_fn`).
macro_rules! wgmma_rs_fn {
    ($name:ident, $regs:literal, $shape:ident) => {
        #[inline(always)]
        pub fn $name<const TRANS_B: u32>(
            kind: super::mma::MmaKind,
            d: &mut [f32; $regs],
            a: [u32; 4],
            b: u64,
            scale_d: bool,
        ) {
            use super::mma::MmaKind::{Bf16, F16};
            let sd = scale_d as u32;
            // SAFETY: `b` names a tile inside the shared segment in a canonical layout (the
            // kernel's const layout, checked on the emulator); the warpgroup executes this with
            // uniform operands; `a` and `d` are registers.
            unsafe {
                match (kind, TRANS_B) {
                    (Bf16, 0) => $shape!(d, a, b, sd, "bf16", "0"),
                    (Bf16, _) => $shape!(d, a, b, sd, "bf16", "1"),
                    (F16, 0) => $shape!(d, a, b, sd, "f16", "0"),
                    (F16, _) => $shape!(d, a, b, sd, "f16", "1"),
                }
            }
        }
    };
}

wgmma_rs_fn!(wgmma_rs_m64n64k16, 32, wgmma_rs_m64n64);
wgmma_rs_fn!(wgmma_rs_m64n128k16, 64, wgmma_rs_m64n128);
wgmma_rs_fn!(wgmma_rs_m64n256k16, 128, wgmma_rs_m64n256);

/// `setmaxnreg.{inc,dec}.sync.aligned.u32 regs`: `regs` is a constant after inlining (a
/// version's tiling), so one arm remains; PTX takes it as an immediate.
macro_rules! setmaxnreg_arms {
    ($op:literal, $regs:expr; $($n:literal)*) => {
        match $regs {
            // SAFETY: the whole warpgroup executes it (the kernels' uniform control flow) with
            // the same count; the entry declares its register budget (`.minnctapersm`).
            $($n => unsafe { asm!(concat!("setmaxnreg.", $op, ".sync.aligned.u32 ", $n, ";"), options(nostack)) },)*
            // SAFETY: `trap` aborts the kernel: a count that is not a multiple of 8 in 24..=256.
            _ => unsafe { core::arch::nvptx::trap() },
        }
    };
}

#[inline(always)]
pub fn setmaxnreg_inc(regs: u32) {
    setmaxnreg_arms!("inc", regs; 24 32 40 48 56 64 72 80 88 96 104 112 120 128 136 144 152 160 168 176 184 192 200 208 216 224 232 240 248 256)
}

#[inline(always)]
pub fn setmaxnreg_dec(regs: u32) {
    setmaxnreg_arms!("dec", regs; 24 32 40 48 56 64 72 80 88 96 104 112 120 128 136 144 152 160 168 176 184 192 200 208 216 224 232 240 248 256)
}
