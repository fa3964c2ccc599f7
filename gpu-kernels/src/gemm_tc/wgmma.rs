//! The Hopper GEMM engine the wgmma versions share (sm_90a): TMA loads into a 4-stage shared
//! ring guarded by mbarriers, one producer warpgroup and `consumers` consumer warpgroups (warp
//! specialization), and `wgmma.mma_async` m64nBNk16 (BN = 128 or 256) reading both operands
//! straight from 128-byte-swizzled shared memory. Each version is a [`WgmmaVersion`]: a
//! [`WgmmaTiling`] (tiles, block order, register split) and its accumulator type.
//!
//! # Thread mapping
//! `(consumers + 1) x 128` threads. Warpgroups `0 .. consumers` are consumers: warpgroup `w`
//! owns rows `64 w .. 64 w + 63` of the block's `64 consumers x BN` C tile, BN / 2 f32
//! accumulators per thread (the wgmma D layout, `device::hopper`). The last warpgroup is the
//! producer: its first thread issues every TMA load; its other threads exit at once.
//!
//! # Registers
//! With `producer_regs` set, the producer warpgroup gives registers back with `setmaxnreg.dec`
//! and the consumers take them with `setmaxnreg.inc` (the build declares one block per SM,
//! `.minnctapersm 1`, which sets the count at entry to 65536 / threads rounded down to 8;
//! [`WgmmaTiling::check`] keeps the split within the registers the block gets at launch).
//!
//! # Block order
//! With `group_m = 0` block (x, y) computes C tile (row y, column x). Otherwise the blocks,
//! numbered row-major, walk groups of `group_m` tile rows column by column, so the blocks
//! running at once share A rows and B columns in L2 instead of each wave streaming all of B.
//!
//! # Pipeline
//! Stage `s` of k-step `i` (`s = i % stages`, round `r = i / stages`): the producer waits
//! until `empty[s]` completed phase `r - 1` (round 0 passes at once: parity `(r & 1) ^ 1`),
//! announces the stage's bytes on `full[s]`, and issues the A box (64 k x BM rows) and two
//! `BN / 64` B boxes (64 columns x 64 k each). Consumers wait for `full[s]` phase `r`, issue four
//! wgmmas (k 16 each), commit, and wait until at most one group is in flight; the stage of
//! the previous k-step is then free, and lane 0 of each consumer warp arrives on its
//! `empty` barrier (`4 consumers` arrivals complete a phase).
//!
//! # Shared layout (per stage, 1024-byte aligned, 128-byte swizzle)
//! A as stored: BM rows x 128 bytes (K-major: 64 k per row), SBO = 1024 (8 rows); A
//! transposed (stored K x M): panels of 64 k-rows x 128 bytes (M-major), one per consumer.
//! B as stored: BN / 64 panels of 64 k-rows x 128 bytes (N-major: 64 columns per row), SBO = 1024
//! (8 k-rows), LBO = 8192 (next 64 columns); B transposed (stored N x K): BN rows x 128
//! bytes, K-major. A k-step of 16 advances a K-major start by 32 bytes, an MN-major one by
//! 2048 (16 rows).
//!
//! # Persistent blocks
//! Tilings with `persistent` are launched with at most one block per SM. Block b runs units
//! b, b + grid, b + 2 grid, ... of the `tiles x splits` units (unit u: tile `u % tiles` in
//! the block order, slice `u / tiles`). Producer and consumers walk the same units and count
//! k-steps through the ring across them, so stage and phase carry on from one unit to the
//! next: consumers release a unit's last stage once its wgmmas complete, and the producer
//! loads the next unit's first stages while the consumers store the last one's C tile.
//!
//! # Split-K
//! Tilings with `split_k` run k-steps `first .. first + steps` of grid z's slice and, when the
//! launch splits, store raw accumulators to the workspace instead of applying the epilogue
//! ([`super::split_k`]).
//!
//! # Edges
//! TMA zero-fills box elements outside the tensors, so any M, N, K works with no predicates
//! in the main loop; the epilogue guards rows and columns.
//!
//! # Epilogue
//! Whole tiles of a plain launch (no bias, GELU, residual or split workspace) store their
//! accumulators as pairs straight from registers ([`pair_epilogue`]); every other tile goes
//! through a per-warpgroup staging buffer after the ring, [`STAGE_COLS`] columns at a time
//! ([`staged_epilogue`]), so the code that guards and fuses is one rolled loop.

use super::TcParams;
use crate::device::hopper::{
    Mbarrier, SmemDesc, Swizzle, TensorMap, WgmmaAccumulator, fence_mbarrier_init, fence_tensormap_acquire,
    setmaxnreg_dec, setmaxnreg_inc, smem_addr, tma_load_2d, wgmma_commit, wgmma_fence, wgmma_wait,
};
use crate::device::mma::MmaInput;
use crate::device::thread::{
    NamedBarrier, block_idx_x, block_idx_y, block_idx_z, grid_dim_x, grid_dim_y, sync_threads, thread_idx_x,
};
use crate::device::{Element, GlobalMut, Shared, hint, math};
use crate::gemm::unroll8;

/// Columns of C a consumer warpgroup stages through shared memory at once
/// ([`staged_epilogue`]): four n8 tiles, one 128-byte row of f32.
pub const STAGE_COLS: u32 = 32;
/// Bytes of one consumer warpgroup's staging buffer: 64 rows of [`STAGE_COLS`] f32.
pub const STAGING_BYTES: u32 = 64 * STAGE_COLS * 4;
/// The first of the named barriers (one per consumer warpgroup, 128 threads) that hand a
/// staged chunk from its writers to its readers and back.
pub const STAGING_BARRIER: u32 = 1;

/// The tile configuration: the one source the launcher reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgmmaTiling {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub stages: u32,
    pub consumers: u32,
    /// Tile rows per group in the block order (0: row-major; see "Block order").
    pub group_m: u32,
    /// `setmaxnreg` counts of the producer and of the consumers (0: no redistribution).
    pub producer_regs: u32,
    pub consumer_regs: u32,
    /// Whether the launcher may split K across blocks ([`super::split_k`]).
    pub split_k: bool,
    /// Persistent: a grid of at most one block per SM, each looping over work units (see
    /// "Persistent blocks").
    pub persistent: bool,
}

impl WgmmaTiling {
    pub const fn threads(self) -> u32 {
        (self.consumers + 1) * 128
    }
    pub const fn a_bytes(self) -> u32 {
        self.bm * self.bk * 2
    }
    pub const fn b_bytes(self) -> u32 {
        self.bn * self.bk * 2
    }
    /// One MN-major panel: `bk` rows of 64 elements (128 bytes).
    pub const fn panel_bytes(self) -> u32 {
        self.bk * 128
    }
    pub const fn stage_bytes(self) -> u32 {
        self.a_bytes() + self.b_bytes()
    }
    pub const fn a_offset(self, s: u32) -> u32 {
        s * self.stage_bytes()
    }
    pub const fn b_offset(self, s: u32) -> u32 {
        self.a_offset(s) + self.a_bytes()
    }
    /// Consumer warpgroup `wg`'s staging buffer for [`staged_epilogue`]: 64 rows of
    /// [`STAGE_COLS`] f32, after the ring (so a persistent block's producer may refill the
    /// ring while the consumers stage).
    pub const fn staging_offset(self, wg: u32) -> u32 {
        self.stages * self.stage_bytes() + wg * STAGING_BYTES
    }
    pub const fn full_bar(self, s: u32) -> u32 {
        self.staging_offset(self.consumers) + 8 * s
    }
    pub const fn empty_bar(self, s: u32) -> u32 {
        self.full_bar(self.stages) + 8 * s
    }
    pub const fn shared_bytes(self) -> u32 {
        self.empty_bar(self.stages)
    }
    /// The TMA box of A and of B, in elements (contiguous dimension first). As stored, A
    /// comes in one `bk x bm` box (K contiguous) and B in `bn / 64` panels of `64 x bk`;
    /// transposed, A comes in `bm / 64` panels of `64 x bk` (M contiguous) and B in one
    /// `bk x bn` box (K contiguous). Either way a stage is [`WgmmaTiling::stage_bytes`].
    pub const fn a_box(self, trans: bool) -> [u32; 2] {
        if trans { [64, self.bk] } else { [self.bk, self.bm] }
    }
    pub const fn b_box(self, trans: bool) -> [u32; 2] {
        if trans { [self.bk, self.bn] } else { [64, self.bk] }
    }
    /// Registers per thread at entry when the build declares one block per SM.
    pub const fn entry_regs(self) -> u32 {
        crate::launch_regs_per_thread(self.threads())
    }
    pub const fn uses_setmaxnreg(self) -> bool {
        self.producer_regs != 0
    }
    pub const fn check(self) -> Self {
        assert!(self.bk * 2 == 128, "a k-step is one 128-byte swizzle row of A (64 halves)");
        assert!(self.bm == 64 * self.consumers, "each consumer warpgroup owns 64 rows");
        assert!(self.bn == 128 || self.bn == 256, "the consumers issue m64n128k16 or m64n256k16");
        assert!(STAGING_BARRIER + self.consumers <= 16, "one named barrier per consumer warpgroup");
        if self.uses_setmaxnreg() {
            let (p, c) = (self.producer_regs, self.consumer_regs);
            assert!(p % 8 == 0 && c % 8 == 0 && p >= 24 && c <= 256, "setmaxnreg counts: multiples of 8 in 24..=256");
            assert!(
                p <= self.entry_regs() && c >= self.entry_regs(),
                "the producer gives registers, the consumers take them"
            );
            // `setmaxnreg.inc` waits for the block's pool, which holds what the block got at
            // launch (entry x threads), not the whole register file: past it, a hang.
            assert!(
                (p + c * self.consumers) * 128 <= self.entry_regs() * self.threads(),
                "the split must fit the block's launch-time registers"
            );
        } else {
            assert!(self.consumer_regs == 0, "consumer_regs without producer_regs");
        }
        assert!(self.bm <= 256 && self.bk <= 256, "TMA boxes are at most 256 per dimension");
        assert!(self.stage_bytes().is_multiple_of(1024), "stages keep the 1024-byte swizzle period");
        assert!(self.stages >= 2, "a ring needs two stages");
        assert!(self.shared_bytes() <= 227 * 1024, "Hopper's 227 KB per block");
        assert!(self.threads() <= 1024, "threads per block");
        self
    }
}

/// The tiling of an engine with `consumers` consumer warpgroups issuing m64n`bn`k16:
/// `64 consumers x bn x 64` tiles, 4 stages, row-major block order, no register split.
pub const fn tiling(consumers: u32, bn: u32) -> WgmmaTiling {
    WgmmaTiling {
        bm: 64 * consumers,
        bn,
        bk: 64,
        stages: 4,
        consumers,
        group_m: 0,
        producer_regs: 0,
        consumer_regs: 0,
        split_k: false,
        persistent: false,
    }
    .check()
}

impl WgmmaTiling {
    /// The same tiling with grouped block order.
    pub const fn grouped(self, group_m: u32) -> Self {
        WgmmaTiling { group_m, ..self }.check()
    }
    /// The same tiling with the producer/consumer register split.
    pub const fn registers(self, producer_regs: u32, consumer_regs: u32) -> Self {
        WgmmaTiling { producer_regs, consumer_regs, ..self }.check()
    }
    /// The same tiling with split-K allowed.
    pub const fn split(self) -> Self {
        WgmmaTiling { split_k: true, ..self }.check()
    }
    /// The same tiling run by persistent blocks.
    pub const fn persistent(self) -> Self {
        WgmmaTiling { persistent: true, ..self }.check()
    }
}

/// One version of the engine: its tiling and the accumulator type of its wgmma shape.
pub trait WgmmaVersion {
    const TILING: WgmmaTiling;
    /// `[f32; 64]` for m64n128k16, `[f32; 128]` for m64n256k16.
    type Acc: WgmmaAccumulator;
}

/// C tile `pid` (row-major numbering) of a `tiles_m x tiles_n` grid of tiles, as (row,
/// column), in the block order of `group_m` (see "Block order").
#[inline(always)]
fn tile_of(pid: u32, tiles_m: u32, tiles_n: u32, group_m: u32) -> (u32, u32) {
    if group_m == 0 {
        return (pid / tiles_n, pid % tiles_n);
    }
    let per_group = group_m * tiles_n;
    let first_m = (pid / per_group) * group_m;
    let rows = (tiles_m - first_m).min(group_m);
    let in_group = pid % per_group;
    (first_m + in_group % rows, in_group / rows)
}

/// One unit of a block's work: a C tile (first row and column) and the k-steps
/// `first .. first + steps` of its slice `z` (all of K without a split).
#[derive(Clone, Copy)]
struct Unit {
    i0: u32,
    j0: u32,
    z: u32,
    first: u32,
    steps: u32,
}

/// The work units of this block: with `persistent`, units `block x, block x + grid x, ...`
/// below `tiles x splits` (unit `u` is slice `u / tiles` of tile `u % tiles`); otherwise the
/// one unit of block (x, y, z): tile (y, x) in the block order, slice z.
///
/// Only the next unit is held: the tile grid and the unit count are recomputed from the
/// launch for each unit, behind an opaque zero so LLVM does not hoist them out of the unit
/// loop, where they would stay live across the main loop beside the accumulators (three of
/// them made v06 spill 12 bytes once the staged epilogue needed its registers).
#[derive(Clone, Copy)]
struct Units {
    next: u32,
}

impl Units {
    #[inline(always)]
    fn of(tiling: WgmmaTiling) -> Units {
        if tiling.persistent {
            Units { next: block_idx_x() }
        } else {
            // One unit: the block's tile, numbered row-major.
            Units { next: block_idx_y() * grid_dim_x() + block_idx_x() }
        }
    }

    /// The next unit, with the k-steps of K (`steps` of them) its slice runs.
    #[inline(always)]
    fn next<T: MmaInput, const BUG: u32>(&mut self, tiling: WgmmaTiling, p: &TcParams<T>, steps: u32) -> Option<Unit> {
        let u = self.next;
        let zero = hint::opaque_u32(u).wrapping_sub(u);
        let (tiles_m, tiles_n, count, stride) = if tiling.persistent {
            let (tiles_m, tiles_n) = ((p.m + zero).div_ceil(tiling.bm), (p.n + zero).div_ceil(tiling.bn));
            let count = tiles_m * tiles_n * if tiling.split_k { p.splits.max(1) } else { 1 };
            (tiles_m, tiles_n, count, grid_dim_x())
        } else {
            let tiles_n = grid_dim_x();
            (grid_dim_y(), tiles_n, block_idx_y() * tiles_n + block_idx_x() + 1, 1)
        };
        if u >= count {
            return None;
        }
        self.next += stride;
        let tiles = tiles_m * tiles_n;
        let (pid, z) = if tiling.persistent { (u % tiles, u / tiles) } else { (u, block_idx_z()) };
        let (tile_m, tile_n) = if tiling.group_m == 0 && !tiling.persistent {
            (block_idx_y(), block_idx_x())
        } else {
            tile_of(pid, tiles_m, tiles_n, tiling.group_m)
        };
        let (first, steps) = if tiling.split_k { super::split_k::slice::<T, BUG>(p, steps, z) } else { (0, steps) };
        Some(Unit { i0: tile_m * tiling.bm, j0: tile_n * tiling.bn, z, first, steps })
    }
}

/// A consumer warpgroup's k-loop for one layout, given as the wgmma immediates: `IMM_A = 1`
/// when A is stored transposed (M-major), `IMM_B = 1` when B is stored as is (N-major).
/// `it0` is the count of k-steps this block ran through the ring before (earlier units of a
/// persistent block), which fixes each step's stage and phase. Returns the accumulators after
/// the last group completed.
#[inline(always)]
fn mainloop<T: MmaInput, V: WgmmaVersion, const BUG: u32, const IMM_A: u32, const IMM_B: u32>(
    it0: u32,
    steps: u32,
    t: u32,
) -> V::Acc {
    let tiling = const { V::TILING };
    let stages = tiling.stages;
    let full = |s: u32| Mbarrier::at(tiling.full_bar(s));
    let empty = |s: u32| Mbarrier::at(tiling.empty_bar(s));
    let wg = t / 128;
    let mut acc = V::Acc::ZERO;
    let mut i = 0;
    while i < steps {
        let (s, round) = ((it0 + i) % stages, (it0 + i) / stages);
        if BUG != bug::NO_FULL_WAIT {
            full(s).wait(round & 1);
        }
        wgmma_fence();
        let a_swizzle = if BUG == bug::A_LAYOUT { Swizzle::B64 } else { Swizzle::B128 };
        // K-major tiles (A as stored, B transposed): 128-byte rows of 64 k, a k-step is 32
        // bytes on. MN-major ones (A transposed, B as stored): panels of 64 k-rows, a k-step is
        // 16 rows (2048 bytes) on, the next 64 columns a panel (LBO) on.
        let (a, a_step) = if IMM_A == 0 {
            (SmemDesc::new(smem_addr(tiling.a_offset(s) + wg * 64 * 128), 16, 1024, a_swizzle), 32)
        } else {
            let panel = tiling.a_offset(s) + wg * tiling.panel_bytes();
            (SmemDesc::new(smem_addr(panel), tiling.panel_bytes(), 1024, a_swizzle), 2048)
        };
        let (b, b_step) = if IMM_B == 1 {
            (SmemDesc::new(smem_addr(tiling.b_offset(s)), tiling.panel_bytes(), 1024, Swizzle::B128), 2048)
        } else {
            (SmemDesc::new(smem_addr(tiling.b_offset(s)), 16, 1024, Swizzle::B128), 32)
        };
        // Four wgmmas of k 16: `bk` is 64 (`WgmmaTiling::check`).
        unroll8!(kk < 4 => {
            let kk = kk as u32;
            acc.mma::<T, IMM_A, IMM_B>(a.advance(a_step * kk), b.advance(b_step * kk), true);
        });
        wgmma_commit();
        if BUG == bug::EARLY_RELEASE {
            if t.is_multiple_of(32) {
                empty(s).arrive();
            }
        } else {
            // At most this step's group in flight: the previous step's stage is free.
            wgmma_wait::<1>();
            if i > 0 && t.is_multiple_of(32) {
                empty((it0 + i - 1) % stages).arrive();
            }
        }
        i += 1;
    }
    wgmma_wait::<0>();
    // A persistent block's producer goes on to its next unit: the last stage is free now.
    if tiling.persistent && BUG != bug::KEEP_LAST_STAGE && steps > 0 && t.is_multiple_of(32) {
        empty((it0 + steps - 1) % stages).arrive();
    }
    acc
}

/// Deliberate bugs for the harness tests (`BUG` of [`run`]); 0 is the real kernel.
pub mod bug {
    /// A's descriptor names the 64-byte swizzle while TMA wrote the 128-byte one: a mis-laid
    /// operand that stays inside its tile, so only the numbers can tell.
    pub const A_LAYOUT: u32 = 1;
    /// Consumers skip the wait for the stage's TMA loads.
    pub const NO_FULL_WAIT: u32 = 2;
    /// The producer skips the wait for the consumers to release the stage.
    pub const NO_EMPTY_WAIT: u32 = 3;
    /// Consumers release a stage right after issuing its wgmmas, before waiting for them.
    pub const EARLY_RELEASE: u32 = 4;
    /// Persistent consumers keep each unit's last stage (value 5 is split-K's bug,
    /// [`super::super::split_k::BUG_FLOOR_SLICES`]).
    pub const KEEP_LAST_STAGE: u32 = 6;
    /// Consumers read a staged chunk without waiting for the warpgroup's other threads to
    /// write it ([`super::staged_epilogue`]).
    pub const STAGE_NO_HANDOVER: u32 = 7;
}

/// The engine for version `V`, with deliberate bug `BUG` (0: none).
#[inline(always)]
pub fn run<T: MmaInput, V: WgmmaVersion, const BUG: u32>(p: TcParams<T>) {
    let tiling = const { V::TILING };
    const { assert!(V::Acc::N == V::TILING.bn, "the accumulator's wgmma shape is the tile width") };
    let consumers = tiling.consumers;
    let stages = tiling.stages;
    let full = |s: u32| Mbarrier::at(tiling.full_bar(s));
    let empty = |s: u32| Mbarrier::at(tiling.empty_bar(s));
    let t = thread_idx_x();
    let wg = t / 128;
    if t == 0 {
        let mut s = 0;
        while s < stages {
            full(s).init(1);
            empty(s).init(4 * consumers);
            s += 1;
        }
        fence_mbarrier_init();
    }
    sync_threads();
    let k_steps = p.k.div_ceil(tiling.bk);

    if wg == consumers {
        if tiling.uses_setmaxnreg() {
            setmaxnreg_dec(tiling.producer_regs);
        }
        if t.is_multiple_of(128) {
            let a_map = TensorMap { addr: p.maps };
            let b_map = TensorMap { addr: p.maps + crate::device::hopper::TENSOR_MAP_BYTES as u64 };
            // K = 0 launches without maps (`maps` is 0) and loads nothing.
            if k_steps > 0 {
                fence_tensormap_acquire(a_map);
                fence_tensormap_acquire(b_map);
            }
            // `it` counts k-steps through the ring across this block's units.
            let mut it = 0;
            let mut units = Units::of(tiling);
            while let Some(u) = units.next::<T, BUG>(tiling, &p, k_steps) {
                let (i0, j0) = (u.i0, u.j0);
                let mut i = 0;
                while i < u.steps {
                    let (s, round) = (it % stages, it / stages);
                    if BUG != bug::NO_EMPTY_WAIT {
                        empty(s).wait((round & 1) ^ 1);
                    }
                    full(s).arrive_expect_tx(tiling.stage_bytes());
                    let k0 = ((u.first + i) * tiling.bk) as i32;
                    let mut q = 0;
                    if p.trans_a == 0 {
                        tma_load_2d(tiling.a_offset(s), a_map, k0, i0 as i32, full(s));
                    } else {
                        while q < tiling.bm / 64 {
                            let dst = tiling.a_offset(s) + q * tiling.panel_bytes();
                            tma_load_2d(dst, a_map, (i0 + 64 * q) as i32, k0, full(s));
                            q += 1;
                        }
                    }
                    if p.trans_b == 0 {
                        q = 0;
                        while q < tiling.bn / 64 {
                            let dst = tiling.b_offset(s) + q * tiling.panel_bytes();
                            tma_load_2d(dst, b_map, (j0 + 64 * q) as i32, k0, full(s));
                            q += 1;
                        }
                    } else {
                        tma_load_2d(tiling.b_offset(s), b_map, k0, j0 as i32, full(s));
                    }
                    i += 1;
                    it += 1;
                }
                if !tiling.persistent {
                    break; // one unit: no loop state for the compiler to carry
                }
            }
        }
        return;
    }

    if tiling.uses_setmaxnreg() {
        setmaxnreg_inc(tiling.consumer_regs);
    }
    let mut it = 0;
    let mut units = Units::of(tiling);
    while let Some(u) = units.next::<T, BUG>(tiling, &p, k_steps) {
        // One main loop per layout, so no branch separates the wgmmas of a k-step (ptxas
        // fences each wgmma whose accumulators arrive through control flow it cannot follow:
        // C7519).
        let acc = match (p.trans_a != 0, p.trans_b != 0) {
            (false, false) => mainloop::<T, V, BUG, 0, 1>(it, u.steps, t),
            (false, true) => mainloop::<T, V, BUG, 0, 0>(it, u.steps, t),
            (true, false) => mainloop::<T, V, BUG, 1, 1>(it, u.steps, t),
            (true, true) => mainloop::<T, V, BUG, 1, 0>(it, u.steps, t),
        };
        it += u.steps;
        epilogue::<T, V, BUG>(&p, &acc, u, t);
        if !tiling.persistent {
            break; // one unit: no loop state for the compiler to carry
        }
    }
}

/// A consumer thread's accumulators of unit `u` to C (or, when the launch splits K, to the
/// workspace): [`pair_epilogue`] where [`takes_pairs`] allows, else [`staged_epilogue`].
///
/// Before the staging, the other tiles went element by element straight from the
/// accumulators, with bounds, beta, bias, GELU, residual and the output type checked per
/// element; unrolled over 128 accumulators that was 214 KB of SASS in v04 (ptxas 12.9,
/// sm_90a), more than an SM's instruction cache. On the H200 (2026-12-04) v04-v06 paid about
/// 85 us per tile over their main loop, as their times at 1024^3 to 8192^3 fit (v04 1024^3:
/// 91 us for 16 k-steps that take about 9), the whole tiles included.
#[inline(always)]
fn epilogue<T: MmaInput, V: WgmmaVersion, const BUG: u32>(p: &TcParams<T>, acc: &V::Acc, u: Unit, t: u32) {
    if takes_pairs::<T, V>(p, u) {
        if p.out16 != 0 {
            pair_epilogue::<T, V, T>(p, &p.c16, acc, u, t);
        } else {
            pair_epilogue::<T, V, f32>(p, &p.c, acc, u, t);
        }
    } else {
        staged_epilogue::<T, V, BUG>(p, acc, u, t);
    }
}

/// Any tile, any launch: the warpgroup's 64 x BN accumulators go through its shared staging
/// buffer ([`WgmmaTiling::staging_offset`]) [`STAGE_COLS`] columns at a time, so the code
/// that guards bounds and applies the epilogue ([`super::store`], or
/// [`super::split_k::store_partial`] into the workspace) is one rolled loop, not one copy
/// per accumulator.
///
/// Per chunk: each thread writes its 16 accumulators of the chunk as 8 pairs (d[4 n8 + 2 h +
/// e] is row `16 warp + g + 8 h`, column `8 n8 + 2 tq + e`); a named barrier of the
/// warpgroup; then 16 steps in which each warp reads one row's 32 columns, one per lane, and
/// stores them (128 contiguous bytes of C); the barrier again before the next chunk
/// overwrites the buffer. One element per step, not four: with all accumulators live through
/// the rolled chunk loop, four took v03 past its 96 registers. The buffer's 16-byte chunks
/// are XOR-swizzled by row (`q ^ row % 8`): the pair writes of a warp then fill all 32 banks
/// twice (two wavefronts, the least for 256 bytes), and a row read is one wavefront.
#[inline(always)]
fn staged_epilogue<T: MmaInput, V: WgmmaVersion, const BUG: u32>(p: &TcParams<T>, acc: &V::Acc, u: Unit, t: u32) {
    let tiling = const { V::TILING };
    // A chunk is 16 accumulators of each thread: 4 n8 tiles.
    const { assert!(V::Acc::N.is_multiple_of(STAGE_COLS) && V::Acc::N / STAGE_COLS <= 8, "whole chunks, at most 8") };
    let chunks = tiling.bn / STAGE_COLS;
    // Row r's 16-byte chunk q holds its columns 4 q .. 4 q + 3, at chunk q ^ (r % 8).
    let quads_per_row = STAGE_COLS / 4;
    let split = tiling.split_k && p.splits > 1;
    let acc = acc.as_ref();
    let mut c = 0;
    while c < chunks {
        // The thread's indices, computed per chunk: LLVM would otherwise hoist every address
        // below out of the persistent unit loop, live across the main loop beside the
        // accumulators (v06 spilled 156 bytes, v03 48).
        let t = t + hint::opaque_u32(c).wrapping_sub(c);
        let (wg, lt, warp, lane) = (t / 128, t % 128, (t % 128) / 32, t % 32);
        let pairs = Shared::<u64>::at(tiling.staging_offset(wg), STAGING_BYTES / 8);
        let words = Shared::<f32>::at(tiling.staging_offset(wg), STAGING_BYTES / 4);
        let handover = NamedBarrier::new(STAGING_BARRIER, 128).offset(wg);
        let (g, tq) = (lane / 4, lane % 4);
        // Chunk c's accumulators, picked by literal indices so they stay in registers.
        unroll8!(cc < 8 => {
            if 16 * cc < acc.len() && cc as u32 == c {
                unroll8!(nn < 4 => {
                    unroll8!(h < 2 => {
                        let r = 4 * (4 * cc + nn) + 2 * h;
                        let row = 16 * warp + g + 8 * h as u32;
                        let q = 2 * nn as u32 + tq / 2;
                        let pair = (acc[r].to_bits() as u64) | ((acc[r + 1].to_bits() as u64) << 32);
                        pairs.store(row * 2 * quads_per_row + 2 * (q ^ (row % 8)) + tq % 2, pair);
                    });
                });
            }
        });
        if BUG != bug::STAGE_NO_HANDOVER {
            handover.sync();
        }
        let mut i = 0;
        while i < 64 * STAGE_COLS / 128 {
            // A warp takes one row's 32 columns: 128 bytes of the buffer, 128 of C.
            let (r, col) = (i * (128 / STAGE_COLS) + lt / STAGE_COLS, lt % STAGE_COLS);
            let v = words.load(r * STAGE_COLS + 4 * ((col / 4) ^ (r % 8)) + col % 4);
            let (row, col) = (u.i0 + wg * 64 + r, u.j0 + c * STAGE_COLS + col);
            if split {
                super::split_k::store_partial(p, u.z, row, col, v);
            } else {
                super::store(p, row, col, v);
            }
            i += 1;
        }
        handover.sync();
        c += 1;
    }
}

/// Whether unit `u`'s tile takes [`pair_epilogue`]: it lies wholly inside C, the launch has
/// no bias, GELU, residual or split-K workspace, and C's rows keep an element pair aligned
/// (even `ldc`, the base aligned to a pair). The same in every thread of the block.
#[inline(always)]
fn takes_pairs<T: MmaInput, V: WgmmaVersion>(p: &TcParams<T>, u: Unit) -> bool {
    let tiling = const { V::TILING };
    let (base, pair_bytes) = if p.out16 != 0 { (p.c16.addr(), 4) } else { (p.c.addr(), 8) };
    // `i0 < m` and `j0 < n`: the unit's tile exists.
    p.m - u.i0 >= tiling.bm
        && p.n - u.j0 >= tiling.bn
        && p.bias.is_empty()
        && p.gelu == 0
        && p.res.is_empty()
        && p.res16.is_empty()
        && !(tiling.split_k && p.splits > 1)
        && p.ldc.is_multiple_of(2)
        && base.is_multiple_of(pair_bytes)
}

/// `C = alpha acc + beta C` for a tile [`takes_pairs`] accepts, into `c` (f32, or the input
/// type): each accumulator pair (columns `2 tq`, `2 tq + 1` of an n8 tile, one row) with one
/// two-element store at a constant offset from the thread's two row addresses. With beta, each
/// group of 4 n8 tiles loads its 8 C pairs before it stores any (a load after a store to the
/// same buffer stays after it, so loads and stores in turn would wait for memory once per
/// pair; groups of 8 took v03 from 90 registers to 112, past its 640 threads' 102). The same
/// arithmetic as [`super::store`], so both paths give the same bits.
#[inline(always)]
fn pair_epilogue<T: MmaInput, V: WgmmaVersion, O: Element>(
    p: &TcParams<T>,
    c: &GlobalMut<O>,
    acc: &V::Acc,
    u: Unit,
    t: u32,
) {
    const { assert!(V::Acc::N.is_multiple_of(32), "whole groups of 4 n8 tiles") };
    let wg = t / 128;
    let (warp, lane) = ((t % 128) / 32, t % 32);
    let (g, tq) = (lane / 4, lane % 4);
    let ldc = p.ldc as usize;
    let row = (u.i0 + wg * 64 + 16 * warp + g) as usize;
    let col = (u.j0 + 2 * tq) as usize;
    let acc = acc.as_ref();
    // d[4 n8 + 2 h + e]: row g + 8 h, column 8 n8 + 2 tq + e (see `epilogue`).
    let at = |n8: usize, h: usize| (row + 8 * h) * ldc + col + 8 * n8;
    unroll8!(hi < 8 => {
        unroll8!(mid < 2 => {
            // n8 tiles `n0 .. n0 + 4`, their C pairs loaded first.
            let n0 = 8 * hi + 4 * mid;
            if 4 * n0 < acc.len() {
                let mut old = [[[O::from_f32(0.0); 2]; 2]; 4];
                if p.beta != 0.0 {
                    unroll8!(lo < 4 => {
                        unroll8!(h < 2 => {
                            old[lo][h] = c.load_pair(at(n0 + lo, h));
                        });
                    });
                }
                unroll8!(lo < 4 => {
                    unroll8!(h < 2 => {
                        let r = 4 * (n0 + lo) + 2 * h;
                        let mut v = [p.alpha * acc[r], p.alpha * acc[r + 1]];
                        if p.beta != 0.0 {
                            let [c0, c1] = old[lo][h];
                            v = [math::fma(p.beta, c0.to_f32(), v[0]), math::fma(p.beta, c1.to_f32(), v[1])];
                        }
                        c.store_pair(at(n0 + lo, h), [O::from_f32(v[0]), O::from_f32(v[1])]);
                    });
                });
            }
        });
    });
}
