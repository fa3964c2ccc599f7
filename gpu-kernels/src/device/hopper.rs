//! Hopper (sm_90a) primitives: `mbarrier` (arrive/expect-tx/wait-parity barriers in shared
//! memory), TMA tile loads (`cp.async.bulk.tensor.2d` / `.3d`, global -> shared through a
//! tensor map the host encodes), and warpgroup MMA (`wgmma.mma_async` m64nNk16 for N = 64,
//! 128, 256, bf16/f16 in, f32 accumulate, B in shared memory named by a 64-bit matrix
//! descriptor, A likewise or in registers).
//!
//! Facts from the PTX ISA (sections "Asynchronous Warpgroup Level Matrix Multiply-Accumulate",
//! "Shared Memory Matrix Layout", "Matrix Descriptor Format", "mbarrier", "cp.async.bulk.tensor";
//! PTX ISA 8.x numbering 9.7.15.x / 9.7.13.15 / 9.7.9.25):
//!
//! - A warpgroup is 4 consecutive warps (128 threads, the first warp's index a multiple of 4).
//!   `wgmma.mma_async.m64nNk16` multiplies A (64 x 16) by B (16 x N) into D (64 x N, f32):
//!   warp `w` of the warpgroup owns rows `16 w ..16 w + 15`; with `g = lane / 4`, `t = lane % 4`,
//!   register `d[4 i + j]` holds row `16 w + g + 8 (j / 2)`, column `8 i + 2 t + (j % 2)`.
//!   A in registers (no `imm-trans-a` then): four b32 per thread in the `mma.sync` m16n8k16 A
//!   layout over the warp's 16 rows (CUTLASS's `ALayout_64x16`): `a[0]` row `g`, columns
//!   `2 t, 2 t + 1`; `a[1]` row `g + 8`; `a[2]`, `a[3]` the same rows at `2 t + 8, 2 t + 9`.
//! - Matrix descriptor: bits 0-13 start address >> 4, 16-29 leading-dimension byte offset
//!   (LBO) >> 4, 32-45 stride-dimension byte offset (SBO) >> 4, 49-51 base offset (0 when the
//!   swizzle pattern starts on its period), 62-63 swizzle (0 none, 1 128B, 2 64B, 3 32B).
//! - Canonical layouts in 16-bit elements (T = 8 elements = 16 bytes), S = swizzle bytes:
//!   K-major (A as stored, B with `trans_b = 0`): row `mn = r + 8 q`, column `k` at byte
//!   `r * S + q * SBO + 2 k` (LBO unused); MN-major (`trans = 1`): `mn = e + (S / 2) p`,
//!   `k = r + 8 q` at byte `2 e + p * LBO + r * S + q * SBO`. The swizzle then XORs address
//!   bits `[4, 4 + b)` with bits `[7, 7 + b)`, `b = log2(S / 16)` (CuTe's `Swizzle<b, 4, 3>`),
//!   on the shared address itself: tiles start on the pattern's period (1024 bytes for 128B).
//! - TMA with the same swizzle writes box row `r` (S bytes) at `dst + r * S` with the same XOR,
//!   so a TMA box of `S / 2` x rows is exactly a canonical swizzled tile; out-of-bounds box
//!   elements are written as zeros and still count toward the transaction bytes.
//! - mbarrier: `init(count)`; a phase completes when `count` arrivals and every expected
//!   transaction byte have arrived; `wait(parity)` returns once the phase with that parity
//!   has completed (initially phase 0 is in progress, so waiting on parity 1 passes at once).
//!
//! Everything here exists only in the sm_90a PTX (`cfg(ferrokern_sm90a)`) and on the
//! emulator; the host launches kernels that use it only there.

use super::imp;
use super::mma::MmaInput;

/// Swizzle mode of a shared tile (TMA and wgmma agree on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Swizzle {
    None = 0,
    B32 = 32,
    B64 = 64,
    B128 = 128,
}

impl Swizzle {
    /// The descriptor's 2-bit code.
    pub const fn desc_code(self) -> u64 {
        match self {
            Swizzle::None => 0,
            Swizzle::B128 => 1,
            Swizzle::B64 => 2,
            Swizzle::B32 => 3,
        }
    }
    /// Alignment the tile's start needs so the pattern starts on its period.
    pub const fn period(self) -> u32 {
        match self {
            Swizzle::None => 128,
            s => 8 * s as u32,
        }
    }
}

/// The address bits a swizzle XORs (see the module docs): the one formula TMA and wgmma use.
#[inline(always)]
pub const fn swizzle_addr(addr: u32, s: Swizzle) -> u32 {
    let bits = match s {
        Swizzle::None => return addr,
        Swizzle::B32 => 1,
        Swizzle::B64 => 2,
        Swizzle::B128 => 3,
    };
    addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)
}

/// The descriptor's 14-bit encoding of a byte address or offset: `(x & 0x3FFFF) >> 4`.
const fn enc(x: u32) -> u64 {
    ((x as u64) & 0x3FFFF) >> 4
}

/// A wgmma shared-memory matrix descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct SmemDesc(pub u64);

impl SmemDesc {
    /// `addr`: the tile's shared-window address ([`smem_addr`]); `lbo`, `sbo` in bytes.
    #[inline(always)]
    pub const fn new(addr: u32, lbo: u32, sbo: u32, swizzle: Swizzle) -> Self {
        SmemDesc(enc(addr) | (enc(lbo) << 16) | (enc(sbo) << 32) | (swizzle.desc_code() << 62))
    }
    /// The same layout `bytes` further on (a k-step inside a tile): only the start moves.
    #[inline(always)]
    pub const fn advance(self, bytes: u32) -> Self {
        SmemDesc(self.0 + ((bytes as u64) >> 4))
    }
}

/// The shared-window address of byte `offset` of the dynamic shared segment: what
/// descriptors, mbarrier and TMA operands name.
#[inline(always)]
pub fn smem_addr(offset: u32) -> u32 {
    imp::smem_addr(offset)
}

/// An mbarrier: 8 bytes at `offset` of the dynamic shared segment (8-byte aligned), touched
/// only through these calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mbarrier {
    offset: u32,
}

impl Mbarrier {
    pub const fn at(offset: u32) -> Self {
        assert!(offset.is_multiple_of(8), "an mbarrier is 8-byte aligned");
        Mbarrier { offset }
    }
    pub const fn offset(self) -> u32 {
        self.offset
    }
    /// `mbarrier.init`: `count` arrivals complete each phase. One thread, before any use,
    /// followed by [`fence_mbarrier_init`] and a block barrier.
    #[inline(always)]
    #[track_caller]
    pub fn init(self, count: u32) {
        imp::mbar_init(self.offset, count)
    }
    /// `mbarrier.arrive`: one arrival on the current phase.
    #[inline(always)]
    #[track_caller]
    pub fn arrive(self) {
        imp::mbar_arrive(self.offset, 0)
    }
    /// `mbarrier.arrive.expect_tx`: expects `bytes` more transaction bytes in the current
    /// phase (the TMA loads that follow), and arrives.
    #[inline(always)]
    #[track_caller]
    pub fn arrive_expect_tx(self, bytes: u32) {
        imp::mbar_arrive(self.offset, bytes)
    }
    /// Waits until the phase with parity `parity` (0 or 1) has completed.
    #[inline(always)]
    #[track_caller]
    pub fn wait(self, parity: u32) {
        imp::mbar_wait(self.offset, parity)
    }
}

/// `fence.mbarrier_init.release.cluster`: makes initialized mbarriers visible to the async
/// proxy (TMA) and other threads, before the barrier that follows.
#[inline(always)]
pub fn fence_mbarrier_init() {
    imp::fence_mbarrier_init()
}

/// `fence.proxy.async.shared::cta`: orders this thread's generic shared-memory writes before
/// later async-proxy accesses (wgmma reads, TMA) of the same bytes.
#[inline(always)]
pub fn fence_proxy_async() {
    imp::fence_proxy_async()
}

/// What the host encodes for one TMA tensor of rank 2 or 3: the emulator reads this struct
/// from the tensor-map slot (the GPU reads the driver's opaque `CUtensorMap`, built from the
/// same fields with `cuTensorMapEncodeTiled`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaDesc {
    /// [`TmaDesc::MAGIC`]: the emulator refuses anything else.
    pub magic: u64,
    pub base: u64,
    /// Elements along the contiguous dimension (0), the rows (1) and the planes (2; 1 for a
    /// rank-2 tensor).
    pub dims: [u64; 3],
    /// Bytes from one row (dimension 1) to the next and from one plane (dimension 2) to the
    /// next; multiples of 16.
    pub strides: [u64; 2],
    /// The box (elements) one load copies (`box_dims[2]` is 1 for rank 2).
    pub box_dims: [u32; 3],
    pub elem_bytes: u32,
    /// Swizzle in bytes (0, 32, 64, 128).
    pub swizzle: u32,
    /// 2 or 3: the `cp.async.bulk.tensor` form that reads the map ([`tma_load_2d`],
    /// [`tma_load_3d`]).
    pub rank: u32,
}

impl TmaDesc {
    pub const MAGIC: u64 = 0x6665_7272_6f54_4d41;
    /// Bytes one load writes to shared memory (the whole box, out-of-bounds parts as zeros).
    pub const fn box_bytes(&self) -> u32 {
        self.box_dims[0] * self.box_dims[1] * self.box_dims[2] * self.elem_bytes
    }
}

/// The global address of a 64-byte aligned, 128-byte tensor-map slot the launcher filled.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TensorMap {
    pub addr: u64,
}

/// Size and alignment of one tensor-map slot (`CUtensorMap` is 128 bytes, 64-byte aligned).
pub const TENSOR_MAP_BYTES: usize = 128;

/// `fence.proxy.tensormap::generic.acquire.sys [map], 128`: makes the tensor map the host
/// wrote into global memory before the launch visible to the TMA unit (whose descriptor
/// cache is not coherent with generic writes). The issuing thread runs it once per map
/// before its first load through it.
#[inline(always)]
pub fn fence_tensormap_acquire(map: TensorMap) {
    imp::fence_tensormap_acquire(map.addr)
}

/// `cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`: copies
/// the box at element coordinates (`c0` along the contiguous dimension, `c1` along rows) to
/// shared byte `dst` (aligned to the swizzle period), completing its bytes on `bar`. One
/// thread issues it; the others wait on `bar`.
#[inline(always)]
#[track_caller]
pub fn tma_load_2d(dst: u32, map: TensorMap, c0: i32, c1: i32, bar: Mbarrier) {
    imp::tma_load_2d(dst, map.addr, c0, c1, bar.offset)
}

/// `cp.async.bulk.tensor.3d...`: as [`tma_load_2d`] through a rank-3 map, `c2` selecting the
/// plane. Rows past the plane's `dims[1]` are zeros, not the next plane's rows: a box never
/// reads across planes (attention tiles of one (batch, head) never see the next one's keys).
#[inline(always)]
#[track_caller]
pub fn tma_load_3d(dst: u32, map: TensorMap, c0: i32, c1: i32, c2: i32, bar: Mbarrier) {
    imp::tma_load_3d(dst, map.addr, c0, c1, c2, bar.offset)
}

/// `wgmma.fence.sync.aligned`: before the first wgmma that reads accumulator registers
/// written by other instructions.
#[inline(always)]
#[track_caller]
pub fn wgmma_fence() {
    imp::wgmma_fence()
}

/// `wgmma.commit_group.sync.aligned`: closes the group of wgmmas issued since the last one.
#[inline(always)]
#[track_caller]
pub fn wgmma_commit() {
    imp::wgmma_commit()
}

/// `wgmma.wait_group.sync.aligned N`: waits until at most `N` committed groups are pending;
/// accumulators and shared operands of the others are then final / free.
#[inline(always)]
#[track_caller]
pub fn wgmma_wait<const N: u32>() {
    imp::wgmma_wait::<N>()
}

/// `cp.async.bulk.commit_group`: closes the bulk group of the calling thread's
/// [`GlobalMut::bulk_reduce_add`](crate::device::GlobalMut::bulk_reduce_add)s issued since
/// its last commit. Bulk groups are per thread.
#[inline(always)]
#[track_caller]
pub fn bulk_commit_group() {
    imp::bulk_commit_group()
}

/// `cp.async.bulk.wait_group.read N`: waits until every committed bulk group of the calling
/// thread but the newest `N` has finished reading its shared source; those bytes may then be
/// rewritten (by another thread only after a barrier that orders it after this wait). Their
/// global results need not be visible yet.
#[inline(always)]
#[track_caller]
pub fn bulk_wait_group_read<const N: u32>() {
    imp::bulk_wait_group::<N>(true)
}

/// `cp.async.bulk.wait_group N`: as [`bulk_wait_group_read`], and the groups' writes to
/// global memory are complete.
#[inline(always)]
#[track_caller]
pub fn bulk_wait_group<const N: u32>() {
    imp::bulk_wait_group::<N>(false)
}

/// Registers that a wgmma reads or writes asynchronously: an accumulator, a register A
/// fragment, or four f32 about to become one ([`wgmma_fence_operands`]).
pub trait WgmmaOperand {
    /// See [`wgmma_fence_operands`].
    fn fence_operands(&mut self);
}

/// Pins `regs` to this point of the program (CUTLASS's `warpgroup_fence_operand`): the
/// compiler may move no computation that reads or writes them across it. A wgmma reads its
/// register operands and writes its accumulators until a [`wgmma_wait`] covers its group,
/// but the compiler sees only the issue: it may move the accumulators' next use above the
/// wait, or compute a value into the registers of an A fragment still in flight. ptxas then
/// serializes the wgmmas (advisory C7513). Fence a group's registers right after the wait
/// that covers it, and the values an in-flight group must not see computed early (what
/// becomes its registers next) there too. On the emulator it does nothing.
#[inline(always)]
pub fn wgmma_fence_operands<R: WgmmaOperand>(regs: &mut R) {
    regs.fence_operands()
}

/// `WgmmaOperand` for `[$ty; N]` through the backend's `$f`.
macro_rules! wgmma_operand {
    ($ty:ty, $f:ident) => {
        impl WgmmaOperand for $ty {
            #[inline(always)]
            fn fence_operands(&mut self) {
                imp::$f(self)
            }
        }
    };
}

wgmma_operand!([f32; 4], fence_f32x4);
wgmma_operand!([u32; 4], fence_u32x4);
wgmma_operand!([f32; 32], fence_f32x32);
wgmma_operand!([f32; 64], fence_f32x64);
wgmma_operand!([f32; 128], fence_f32x128);

/// `wgmma.mma_async.sync.aligned.m64n128k16.f32.{bf16,f16}`: `d = A * B + (scale_d ? d : 0)`
/// with A at `a`, K-major (`TRANS_A = 0`) or M-major (`1`), and B at `b`, K-major
/// (`TRANS_B = 0`) or N-major (`1`).
/// All 128 threads of the warpgroup execute it with the same descriptors; `d` is this
/// thread's 64-register fragment (layout in the module docs). Asynchronous: `d` and the
/// shared operands belong to the tensor cores until a [`wgmma_wait`] covers its group.
#[inline(always)]
#[track_caller]
pub fn wgmma_m64n128k16<T: MmaInput, const TRANS_A: u32, const TRANS_B: u32>(
    d: &mut [f32; 64],
    a: SmemDesc,
    b: SmemDesc,
    scale_d: bool,
) {
    imp::wgmma_m64n128k16::<TRANS_A, TRANS_B>(T::KIND, d, a.0, b.0, scale_d)
}

/// `wgmma.mma_async.sync.aligned.m64n256k16.f32.{bf16,f16}`: as [`wgmma_m64n128k16`] with
/// 256 columns of B and D, 128 accumulator registers per thread (`d[4 i + j]`, `i < 32`).
#[inline(always)]
#[track_caller]
pub fn wgmma_m64n256k16<T: MmaInput, const TRANS_A: u32, const TRANS_B: u32>(
    d: &mut [f32; 128],
    a: SmemDesc,
    b: SmemDesc,
    scale_d: bool,
) {
    imp::wgmma_m64n256k16::<TRANS_A, TRANS_B>(T::KIND, d, a.0, b.0, scale_d)
}

/// `wgmma.mma_async.sync.aligned.m64n64k16.f32.{bf16,f16}`: as [`wgmma_m64n128k16`] with
/// 64 columns of B and D, 32 accumulator registers per thread.
#[inline(always)]
#[track_caller]
pub fn wgmma_m64n64k16<T: MmaInput, const TRANS_A: u32, const TRANS_B: u32>(
    d: &mut [f32; 32],
    a: SmemDesc,
    b: SmemDesc,
    scale_d: bool,
) {
    imp::wgmma_m64n64k16::<TRANS_A, TRANS_B>(T::KIND, d, a.0, b.0, scale_d)
}

/// A warpgroup's f32 accumulator fragment for one `wgmma.mma_async.m64nNk16` shape: `N / 2`
/// registers per thread, `self.as_ref()[4 i + j]` at row `16 warp + g + 8 (j / 2)`, column
/// `8 i + 2 t + j % 2` (module docs). Kernels generic over the tile width take it as a type.
pub trait WgmmaAccumulator: AsRef<[f32]> + AsMut<[f32]> + Copy + WgmmaOperand {
    /// N: the columns of B and D.
    const N: u32;
    const ZERO: Self;
    /// `self = A * B + (scale_d ? self : 0)`, A and B named by descriptors (see
    /// [`wgmma_m64n128k16`]).
    fn mma<T: MmaInput, const TRANS_A: u32, const TRANS_B: u32>(&mut self, a: SmemDesc, b: SmemDesc, scale_d: bool);
    /// The same with A in registers (`wgmma.mma_async ... d, {a0, a1, a2, a3}, b-desc, ...`):
    /// `a` is this thread's part of the warpgroup's 64 x 16 A, warp `w` holding rows
    /// `16 w .. 16 w + 15` in the `mma.sync` m16n8k16 A layout (`a[0]`: row `g`, columns `2 t`,
    /// `2 t + 1`; `a[1]`: row `g + 8`; `a[2]`, `a[3]`: the same rows at columns `2 t + 8`,
    /// `2 t + 9`). So the accumulator of one wgmma, packed to 16 bits, is the A of the next
    /// ([`crate::device::mma::a_from_c`] on its n8 tiles `2 kk`, `2 kk + 1`).
    fn mma_rs<T: MmaInput, const TRANS_B: u32>(&mut self, a: [u32; 4], b: SmemDesc, scale_d: bool);
}

/// The accumulator of shape `m64n$n k16`: `$regs` f32 per thread, the shared-A function
/// `$ss` and the register-A one `$rs`.
macro_rules! accumulator {
    ($regs:literal, $n:literal, $ss:ident, $rs:ident) => {
        impl WgmmaAccumulator for [f32; $regs] {
            const N: u32 = $n;
            const ZERO: Self = [0.0; $regs];
            #[inline(always)]
            #[track_caller]
            fn mma<T: MmaInput, const TRANS_A: u32, const TRANS_B: u32>(
                &mut self,
                a: SmemDesc,
                b: SmemDesc,
                scale_d: bool,
            ) {
                $ss::<T, TRANS_A, TRANS_B>(self, a, b, scale_d)
            }
            #[inline(always)]
            #[track_caller]
            fn mma_rs<T: MmaInput, const TRANS_B: u32>(&mut self, a: [u32; 4], b: SmemDesc, scale_d: bool) {
                imp::$rs::<TRANS_B>(T::KIND, self, a, b.0, scale_d)
            }
        }
    };
}

accumulator!(32, 64, wgmma_m64n64k16, wgmma_rs_m64n64k16);
accumulator!(64, 128, wgmma_m64n128k16, wgmma_rs_m64n128k16);
accumulator!(128, 256, wgmma_m64n256k16, wgmma_rs_m64n256k16);

/// `setmaxnreg.inc.sync.aligned.u32 regs`: raises this warpgroup's per-thread register limit
/// to `regs` (a multiple of 8 in 24..=256, the same in all 128 threads; a constant in the
/// kernel), waiting until the block's pool holds the registers other warpgroups released
/// with [`setmaxnreg_dec`]. Only in kernels whose entry declares its register count (the
/// build's `.minnctapersm` from `gpu_kernels::launch_min_blocks`; without it ptxas ignores
/// the instruction).
#[inline(always)]
#[track_caller]
pub fn setmaxnreg_inc(regs: u32) {
    imp::setmaxnreg_inc(regs)
}

/// `setmaxnreg.dec.sync.aligned.u32 regs`: lowers this warpgroup's per-thread register limit
/// to `regs`, returning the rest to the block's pool (see [`setmaxnreg_inc`]).
#[inline(always)]
#[track_caller]
pub fn setmaxnreg_dec(regs: u32) {
    imp::setmaxnreg_dec(regs)
}
