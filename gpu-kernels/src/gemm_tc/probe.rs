//! One-warp kernels that pin the tensor-core layouts down against the PTX ISA (tests/mma.rs):
//! fragments built straight from the ISA's formulas, the same through ldmatrix, the raw
//! registers of every ldmatrix form, and cp.async. Launch with one block of 32 threads and
//! [`PROBE_SHARED_BYTES`]. Two Hopper probes have their own launch constants: one wgmma from
//! plain-stored tiles, and bulk reductions from shared into global memory.

use crate::device::mma::{self, MmaInput, pack2};
use crate::device::thread::{sync_threads, thread_idx_x};
use crate::device::{Global, GlobalMut, Shared};

/// Dynamic shared bytes every probe uses.
pub const PROBE_SHARED_BYTES: u32 = 1024;

/// One m16n8k16: A 16 x 16 and B 16 x 8 (row-major, `k x n`), C and D 16 x 8 row-major f32.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProbeParams<T: MmaInput> {
    pub a: Global<T>,
    pub b: Global<T>,
    pub c: Global<f32>,
    pub d: GlobalMut<f32>,
}

/// Words in, words out, and which form to run.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawParams {
    pub input: Global<u32>,
    pub out: GlobalMut<u32>,
    pub mode: u32,
    pub _pad: u32,
}

#[inline(always)]
fn group(lane: u32) -> (usize, usize) {
    ((lane / 4) as usize, (lane % 4) as usize)
}

/// D = A B + C with every fragment built from the ISA's (row, col) formulas (module docs of
/// `device::mma`). `SWAP_A`: registers a0/a1 swapped, the deliberate layout bug.
#[inline(always)]
pub fn direct<T: MmaInput, const SWAP_A: bool>(p: ProbeParams<T>) {
    let (g, t) = group(thread_idx_x());
    let a = |r: usize, c: usize| p.a.load(r * 16 + c).to_bits16();
    let b = |k: usize, n: usize| p.b.load(k * 8 + n).to_bits16();
    let mut af = [
        pack2(a(g, 2 * t), a(g, 2 * t + 1)),
        pack2(a(g + 8, 2 * t), a(g + 8, 2 * t + 1)),
        pack2(a(g, 2 * t + 8), a(g, 2 * t + 9)),
        pack2(a(g + 8, 2 * t + 8), a(g + 8, 2 * t + 9)),
    ];
    if SWAP_A {
        af.swap(0, 1);
    }
    let bf = [pack2(b(2 * t, g), b(2 * t + 1, g)), pack2(b(2 * t + 8, g), b(2 * t + 9, g))];
    let at = [g * 8 + 2 * t, g * 8 + 2 * t + 1, (g + 8) * 8 + 2 * t, (g + 8) * 8 + 2 * t + 1];
    let cf = [p.c.load(at[0]), p.c.load(at[1]), p.c.load(at[2]), p.c.load(at[3])];
    let d = mma::mma_m16n8k16::<T>(af, bf, cf);
    for (i, &x) in at.iter().enumerate() {
        p.d.store(x, d[i]);
    }
}

/// As [`direct`], with A and B staged in shared memory and loaded by ldmatrix: A by x4
/// (lanes 0-15 rows 0-15 at column 0, lanes 16-31 the same rows at column 8), B (row-major
/// `k x n`) by x2.trans (lanes 0-15 rows k = 0-15).
#[inline(always)]
pub fn via_ldmatrix<T: MmaInput>(p: ProbeParams<T>) {
    let lane = thread_idx_x();
    let a_s = Shared::<T>::at(0, 256);
    let b_s = Shared::<T>::at(512, 128);
    for q in 0..8 {
        let i = lane * 8 + q;
        a_s.store(i, p.a.load(i as usize));
    }
    for q in 0..4 {
        let i = lane * 4 + q;
        b_s.store(i, p.b.load(i as usize));
    }
    sync_threads();
    let af = mma::ldmatrix::<T, 4>(a_s, (lane % 16) * 16 + (lane / 16) * 8, false);
    let bf = mma::ldmatrix::<T, 2>(b_s, (lane % 16) * 8, true);
    let (g, t) = group(lane);
    let at = [g * 8 + 2 * t, g * 8 + 2 * t + 1, (g + 8) * 8 + 2 * t, (g + 8) * 8 + 2 * t + 1];
    let cf = [p.c.load(at[0]), p.c.load(at[1]), p.c.load(at[2]), p.c.load(at[3])];
    let d = mma::mma_m16n8k16::<T>(af, bf, cf);
    for (i, &x) in at.iter().enumerate() {
        p.d.store(x, d[i]);
    }
}

/// `input`: 128 words = four 8 x 8 matrices of halves, matrix `j` row `r` at halves
/// `64 j + 8 r ..`. Lane `l` gives row `l % 8` of matrix `l / 8`; lanes past `8 N` give an
/// out-of-range index, which ldmatrix must ignore. `mode = 2 log2(N) + trans`; lane `l`
/// writes its registers to `out[4 l ..]`.
#[inline(always)]
pub fn raw(p: RawParams) {
    let lane = thread_idx_x();
    let words = Shared::<u32>::at(0, 128);
    for q in 0..4 {
        words.store(lane * 4 + q, p.input.load((lane * 4 + q) as usize));
    }
    sync_threads();
    let halves = Shared::<u16>::at(0, 256);
    let n = 1u32 << (p.mode / 2);
    let trans = p.mode % 2 == 1;
    let i = if lane < 8 * n { (lane / 8) * 64 + (lane % 8) * 8 } else { 100_000 };
    let mut r = [0u32; 4];
    match n {
        1 => r[..1].copy_from_slice(&mma::ldmatrix::<u16, 1>(halves, i, trans)),
        2 => r[..2].copy_from_slice(&mma::ldmatrix::<u16, 2>(halves, i, trans)),
        _ => r = mma::ldmatrix::<u16, 4>(halves, i, trans),
    }
    for (j, &x) in r.iter().enumerate() {
        p.out.store((lane * 4) as usize + j, x);
    }
}

/// cp.async of 128 words: lane `l` copies chunk `l` (words `4 l .. 4 l + 4`); in mode 2 odd
/// lanes copy only 8 source bytes (the rest zero-filled). After wait + barrier, lane `l`
/// writes chunk `l + 1` (another lane's copy) to `out[4 l ..]`. Mode 1 is the bug: a lane
/// reads its destination before waiting.
#[inline(always)]
pub fn cp_async(p: RawParams) {
    let lane = thread_idx_x();
    let words = Shared::<u32>::at(0, 128);
    let src_bytes = if p.mode == 2 && lane % 2 == 1 { 8 } else { 16 };
    mma::cp_async_16(words, lane * 4, p.input, (lane * 4) as usize, src_bytes);
    mma::cp_async_commit();
    let early = if p.mode == 1 { words.load(lane * 4) } else { 0 };
    mma::cp_async_wait_group::<0>();
    sync_threads();
    let from = ((lane + 1) % 32) * 4;
    for q in 0..4 {
        p.out.store((lane * 4 + q) as usize, words.load(from + q) ^ early);
    }
}

/// One wgmma m64nNk16 (bf16, N = 128, or 256 with mode bit 4): A (64 x 16) and B (16 x N),
/// both row-major in global memory, D (64 x N) row-major f32.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WgmmaProbeParams {
    pub a: Global<half::bf16>,
    pub b: Global<half::bf16>,
    pub d: GlobalMut<f32>,
    /// Bit 0: A M-major (`trans-a`), else K-major; bit 1: B K-major, else N-major
    /// (`trans-b`); bit 2: the deliberate bug (A's descriptor with SBO 512 instead of 1024);
    /// bit 3: another (emulator only): warp 1 names A 16 bytes further on than the others;
    /// bit 4: m64n256k16 instead of m64n128k16; bit 5 (emulator only): the warpgroup first
    /// runs `setmaxnreg.inc`, warp 1 with another count than the others; bit 6: A from
    /// registers (built by the documented register-A layout, bit 0 ignored); bit 7 with bit
    /// 6: the deliberate bug (A registers 1 and 2 swapped); bit 8 (emulator only): no
    /// `fence.proxy.async` between the stores and the wgmma; bit 9 (emulator only): the fence
    /// after the barrier instead of before it; bit 10: a named barrier over the warpgroup
    /// instead of `sync_threads` between the stores and the wgmma.
    pub mode: u32,
    pub _pad: u32,
}

/// Threads and dynamic shared bytes of [`wgmma`]: one warpgroup; A's tile at 0 (8 KB), B's at
/// [`WGMMA_PROBE_B_AT`] (up to 32 KB: 256 K-major rows of 128 bytes).
pub const WGMMA_PROBE_THREADS: u32 = 128;
pub const WGMMA_PROBE_B_AT: u32 = 8192;
pub const WGMMA_PROBE_SHARED_BYTES: u32 = WGMMA_PROBE_B_AT + 32768;

/// Byte of element (`mn`, `k`) in a 128-byte-swizzled tile at `base`, by the ISA's canonical
/// layouts written out directly (`device::hopper`'s docs): K-major rows of 128 bytes, 8-row
/// groups 1024 bytes apart; MN-major panels of 64 `mn` x 8 k-rows, k groups 1024 apart,
/// panels `lbo` apart.
#[inline(always)]
fn canonical(base: u32, mn: u32, k: u32, mn_major: bool, lbo: u32) -> u32 {
    use crate::device::hopper::{Swizzle, swizzle_addr};
    let off = if mn_major {
        2 * (mn % 64) + (mn / 64) * lbo + (k % 8) * 128 + (k / 8) * 1024
    } else {
        (mn % 8) * 128 + (mn / 8) * 1024 + 2 * k
    };
    swizzle_addr(base + off, Swizzle::B128)
}

/// Plain stores place A and B in shared memory at the canonical addresses, then the whole
/// warpgroup runs one wgmma from descriptors: on the GPU this checks the descriptor and
/// swizzle formulas against the hardware without TMA or a pipeline in the way.
#[inline(always)]
pub fn wgmma(p: WgmmaProbeParams) {
    if p.mode & 16 != 0 { wgmma_n::<[f32; 128]>(p) } else { wgmma_n::<[f32; 64]>(p) }
}

#[inline(always)]
fn wgmma_n<D: crate::device::hopper::WgmmaAccumulator>(p: WgmmaProbeParams) {
    use crate::device::hopper::{
        SmemDesc, Swizzle, fence_proxy_async, setmaxnreg_inc, smem_addr, wgmma_commit, wgmma_fence, wgmma_wait,
    };
    let n = D::N;
    let t = thread_idx_x();
    let (a_mn, b_k) = (p.mode & 1 != 0, p.mode & 2 != 0);
    if p.mode & 32 != 0 {
        setmaxnreg_inc(if t / 32 == 1 { 240 } else { 232 });
    }
    let smem = Shared::<half::bf16>::at(0, WGMMA_PROBE_SHARED_BYTES / 2);
    let mut e = t;
    while e < 64 * 16 {
        let (m, k) = (e / 16, e % 16);
        smem.store(canonical(0, m, k, a_mn, 2048) / 2, p.a.load(e as usize));
        e += WGMMA_PROBE_THREADS;
    }
    let mut e = t;
    while e < 16 * n {
        let (k, c) = (e / n, e % n);
        smem.store(canonical(WGMMA_PROBE_B_AT, c, k, !b_k, 2048) / 2, p.b.load(e as usize));
        e += WGMMA_PROBE_THREADS;
    }
    // The stores are generic-proxy writes that wgmma (the async proxy) reads: each thread
    // fences its own, then the barrier orders every fence before every thread's wgmma.
    let (fence_before, fence_after) = (p.mode & (256 | 512) == 0, p.mode & 512 != 0);
    if fence_before {
        fence_proxy_async();
    }
    if p.mode & 1024 != 0 {
        crate::device::thread::NamedBarrier::new(1, WGMMA_PROBE_THREADS).sync();
    } else {
        sync_threads();
    }
    if fence_after {
        fence_proxy_async();
    }
    let sbo = if p.mode & 4 != 0 { 512 } else { 1024 };
    let a_at = if p.mode & 8 != 0 && t / 32 == 1 { 16 } else { 0 };
    let a = SmemDesc::new(smem_addr(a_at), if a_mn { 2048 } else { 16 }, sbo, Swizzle::B128);
    let b = SmemDesc::new(smem_addr(WGMMA_PROBE_B_AT), if b_k { 16 } else { 2048 }, 1024, Swizzle::B128);
    let (warp, lane) = (t / 32, t % 32);
    let (g, tq) = (lane / 4, lane % 4);
    // Register A (mode bit 6): warp w's rows 16 w .. in the mma.sync A layout.
    let ra = |r: u32, c: u32| p.a.load(((16 * warp + r) * 16 + c) as usize).to_bits16();
    let mut af = [
        mma::pack2(ra(g, 2 * tq), ra(g, 2 * tq + 1)),
        mma::pack2(ra(g + 8, 2 * tq), ra(g + 8, 2 * tq + 1)),
        mma::pack2(ra(g, 2 * tq + 8), ra(g, 2 * tq + 9)),
        mma::pack2(ra(g + 8, 2 * tq + 8), ra(g + 8, 2 * tq + 9)),
    ];
    if p.mode & 128 != 0 {
        af.swap(1, 2);
    }
    let mut d = D::ZERO;
    wgmma_fence();
    match (p.mode & 64 != 0, a_mn, b_k) {
        (true, _, false) => d.mma_rs::<half::bf16, 1>(af, b, false),
        (true, _, true) => d.mma_rs::<half::bf16, 0>(af, b, false),
        (false, false, false) => d.mma::<half::bf16, 0, 1>(a, b, false),
        (false, false, true) => d.mma::<half::bf16, 0, 0>(a, b, false),
        (false, true, false) => d.mma::<half::bf16, 1, 1>(a, b, false),
        (false, true, true) => d.mma::<half::bf16, 1, 0>(a, b, false),
    }
    wgmma_commit();
    wgmma_wait::<0>();
    let d = d.as_ref();
    crate::gemm::unroll8!(h < 2 => {
        crate::gemm::unroll8!(hi < 8 => {
            crate::gemm::unroll8!(lo < 8 => {
                let r = 64 * h + 8 * hi + lo;
                if r < d.len() {
                    let (n8, j) = (r as u32 / 4, r as u32 % 4);
                    let row = 16 * warp + g + 8 * (j / 2);
                    let col = 8 * n8 + 2 * tq + j % 2;
                    p.d.store((row * n + col) as usize, d[r]);
                }
            });
        });
    });
}

/// Bulk reductions (`cp.reduce.async.bulk ... add.f32`): each block's two warps stage 16 rows
/// of 16 f32 each, publish them, and add them to global rows `16 w .. 16 w + 15` (16 f32
/// each) with one bulk op per row, twice, rewriting the staging rows in between.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BulkProbeParams {
    /// [`BULK_PROBE_ROWS`] rows of 16 f32: every block adds to every row.
    pub out: GlobalMut<f32>,
    /// 0: the protocol; the bugs (emulator only): bit 0 no `fence.proxy.async` after the
    /// stores; bit 1 the second round's stores before `wait_group.read`; bit 2 no `sync_warp`
    /// after the wait (a lane rewrites rows other lanes' ops read); bit 3 the source 4 bytes
    /// off its 16-byte alignment; bit 4 no final `wait_group` (the block exits with its last
    /// group's reads pending).
    pub mode: u32,
    pub _pad: u32,
}

/// Threads, dynamic shared bytes and output rows of [`bulk_reduce`]: two warps, each with 16
/// staging rows of [`BULK_PROBE_PITCH`] f32.
pub const BULK_PROBE_THREADS: u32 = 64;
/// f32 per staging row: 80 bytes keeps every row 16-byte aligned.
pub const BULK_PROBE_PITCH: u32 = 20;
pub const BULK_PROBE_SHARED_BYTES: u32 = 2 * 16 * BULK_PROBE_PITCH * 4;
pub const BULK_PROBE_ROWS: u32 = 32;

/// The value block `block`'s warp `warp` stages at (`r`, `c`) in `round`: small integers, so
/// every sum is exact in f32 whatever the order of the adds.
pub const fn bulk_probe_value(block: u32, round: u32, warp: u32, r: u32, c: u32) -> f32 {
    (1 + block + 3 * round + 5 * warp + r * c) as f32
}

/// Per warp: lanes store the 16 x 16 staging tile (lane `l` the elements `l mod 32`, so each
/// row mixes lanes), fence, `sync_warp`; lanes 0-15 each reduce one row into global memory and
/// commit; before the second round's stores every lane waits for its reads and the warp
/// syncs again; at the end every lane waits for its writes.
#[inline(always)]
pub fn bulk_reduce(p: BulkProbeParams) {
    use crate::device::hopper::{bulk_commit_group, bulk_wait_group, bulk_wait_group_read, fence_proxy_async};
    use crate::device::warp::{FULL_MASK, sync_warp};
    let t = thread_idx_x();
    let (warp, lane) = (t / 32, t % 32);
    let block = crate::device::thread::block_idx_x();
    let base = warp * 16 * BULK_PROBE_PITCH * 4;
    let stage = Shared::<f32>::at(base, 16 * BULK_PROBE_PITCH);
    for round in 0..2 {
        if round == 1 && p.mode & 2 == 0 {
            bulk_wait_group_read::<0>();
            if p.mode & 4 == 0 {
                sync_warp(FULL_MASK);
            }
        }
        let mut e = lane;
        while e < 256 {
            let (r, c) = (e / 16, e % 16);
            stage.store(r * BULK_PROBE_PITCH + c, bulk_probe_value(block, round, warp, r, c));
            e += 32;
        }
        if p.mode & 1 == 0 {
            fence_proxy_async();
        }
        sync_warp(FULL_MASK);
        if lane < 16 {
            let src = base + lane * BULK_PROBE_PITCH * 4 + if p.mode & 8 != 0 { 4 } else { 0 };
            p.out.bulk_reduce_add(((16 * warp + lane) * 16) as usize, src, 16);
        }
        bulk_commit_group();
    }
    if p.mode & 16 == 0 {
        bulk_wait_group::<0>();
    }
}
