//! The tensor-core instructions on the emulator: `mma.sync` and `ldmatrix` as warp
//! collectives, `cp.async` as copies deferred to the wait that covers them.
//!
//! Layouts are the PTX ISA's (see `device::mma`). Modelling choices:
//! - `mma` and `ldmatrix` complete when all 32 lanes of the warp post them (full mask, same
//!   instruction); a lane that exits or goes elsewhere is reported as warp divergence.
//! - `ldmatrix`: each address-giving lane (`lane < 8 N`) reads its own 16-byte row at its
//!   call, through the same checks as any shared load (bounds, alignment, race, uninitialized
//!   bytes), so an error names that lane and line; the rows are then dealt out by the ISA's
//!   distribution when the collective completes.
//! - `mma`: D from the assembled 16 x 16 A, 16 x 8 B and 16 x 8 C; each product of two
//!   bf16/f16 values is exact in f32, added to the accumulator in k order with f32 rounding.
//! - `cp.async`: bounds and alignment of both sides are checked at issue, and the destination
//!   is race-checked there as a write (the hardware may land it at any time from issue on);
//!   the bytes move at the `wait_group` that covers the copy's group, recorded as this
//!   thread's write then. So a destination read before the wait sees bytes nothing wrote
//!   (reported as uninitialized when nothing wrote them before) or, for another thread, races
//!   with the deferred write. Copies never waited for are dropped at the thread's end.
//!   Not detected: this thread reading its own destination's older bytes before its wait.

use super::FaultKind;
use super::block::{BlockCtx, Post, State, WarpOp, current};
use crate::device::mma::MmaKind;
use crate::device::warp::FULL_MASK;
use core::panic::Location;
use std::cell::RefCell;
use std::collections::VecDeque;

fn fault(kind: FaultKind) -> ! {
    std::panic::resume_unwind(Box::new(kind))
}

/// Words a lane posts to (and receives from) a wide warp collective: mma needs 4 + 2 + 4 in.
const WIDE: usize = 16;

#[derive(Clone, Copy)]
struct PendingCopy {
    dst: u32,
    src: usize,
    src_bytes: u32,
    size: u32,
    at: super::Loc,
}

#[derive(Default)]
struct ThreadCopies {
    open: Vec<PendingCopy>,
    groups: VecDeque<Vec<PendingCopy>>,
}

/// Per-block state of the tensor-core instructions.
pub(crate) struct TcState {
    wide: RefCell<Vec<[u32; WIDE]>>,
    copies: RefCell<Vec<ThreadCopies>>,
}

impl TcState {
    pub fn new(threads: usize) -> Self {
        TcState {
            wide: RefCell::new(vec![[0; WIDE]; threads]),
            copies: RefCell::new((0..threads).map(|_| ThreadCopies::default()).collect()),
        }
    }
}

/// Posts a wide collective for the current thread and returns its words once it completes.
#[track_caller]
fn wide_collective(op: WarpOp, words: [u32; WIDE]) -> [u32; WIDE] {
    let t = current();
    let block = t.block();
    block.tc.wide.borrow_mut()[t.linear as usize] = words;
    block.posts.borrow_mut()[t.linear as usize] =
        Some(Post { op, mask: FULL_MASK, value: 0, arg: 0, at: Location::caller() });
    t.state.set(State::Warp);
    t.suspend();
    block.tc.wide.borrow()[t.linear as usize]
}

/// Posts a data-less warp collective (all 32 lanes) and waits for it: convergence only.
#[track_caller]
pub(crate) fn warp_converge(op: WarpOp) {
    let _ = wide_collective(op, [0; WIDE]);
}

#[track_caller]
pub fn mma_m16n8k16(kind: MmaKind, a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let mut w = [0u32; WIDE];
    w[..4].copy_from_slice(&a);
    w[4..6].copy_from_slice(&b);
    for (x, v) in w[6..10].iter_mut().zip(c) {
        *x = v.to_bits();
    }
    let r = wide_collective(WarpOp::Mma(kind), w);
    [f32::from_bits(r[0]), f32::from_bits(r[1]), f32::from_bits(r[2]), f32::from_bits(r[3])]
}

/// The register-A collective of a wgmma: posts this thread's A fragment (the m16n8k16 A
/// layout over its warp's 16 rows) and returns its rows `g` and `g + 8` (16 halves each, two
/// per word, `k` ascending: words 0-7 row `g`, 8-15 row `g + 8`).
#[track_caller]
pub(crate) fn wgmma_gather_a(a: [u32; 4]) -> [u32; WIDE] {
    let mut w = [0u32; WIDE];
    w[..4].copy_from_slice(&a);
    wide_collective(WarpOp::WgmmaRegA, w)
}

/// `cvt.rn.{bf16,f16}x2.f32`: both halves rounded to nearest even, `lo` in the low 16 bits.
pub fn cvt_pack_f32x2(kind: MmaKind, lo: f32, hi: f32) -> u32 {
    let bits = |x: f32| -> u32 {
        match kind {
            MmaKind::Bf16 => half::bf16::from_f32(x).to_bits() as u32,
            MmaKind::F16 => half::f16::from_f32(x).to_bits() as u32,
        }
    };
    bits(lo) | (bits(hi) << 16)
}

#[track_caller]
pub fn ldmatrix<const N: usize>(offset: u32, len: u32, i: u32, elem: u32, trans: bool) -> [u32; N] {
    let t = current();
    let mut w = [0u32; WIDE];
    if t.lane() < 8 * N as u32 {
        let byte = shared_row(offset, len, i, elem, 16, false);
        let block = t.block();
        for (q, x) in w[..4].iter_mut().enumerate() {
            *x = block.shared.read::<u32>(byte + 4 * q as u32);
        }
    }
    let r = wide_collective(WarpOp::Ldmatrix { n: N as u8, trans }, w);
    let mut out = [0u32; N];
    out.copy_from_slice(&r[..N]);
    out
}

/// Checks `size` bytes at element `i` of a shared view (bounds of view and segment, `size`
/// alignment) and, unless `issue_only`, records the access; returns the byte offset.
#[track_caller]
fn shared_row(offset: u32, len: u32, i: u32, elem: u32, size: u32, write: bool) -> u32 {
    let t = current();
    let block = t.block();
    let at = Location::caller();
    let byte = i as u64 * elem as u64 + offset as u64;
    let n = size / elem;
    if i as u64 + n as u64 > len as u64 || byte + size as u64 > block.shared.size() as u64 {
        fault(FaultKind::SharedOutOfBounds { write, index: i, len, offset, shared_bytes: block.shared.size(), at });
    }
    let byte = byte as u32;
    if !byte.is_multiple_of(size) {
        fault(FaultKind::Misaligned { addr: byte as usize, align: size as usize, at });
    }
    if let Err(k) = block.shared.track(t, block, byte, size, write, at) {
        fault(k);
    }
    byte
}

#[track_caller]
pub fn cp_async_16<T>(dst_offset: u32, dst_len: u32, di: u32, src: usize, src_len: usize, si: usize, src_bytes: u32) {
    let t = current();
    let block = t.block();
    let at = Location::caller();
    let elem = size_of::<T>();
    if src_bytes > 16 {
        fault(FaultKind::Panic { message: format!("cp.async src-size {src_bytes} exceeds the copy size 16") });
    }
    let src_addr = src.wrapping_add(si.wrapping_mul(elem));
    if src_bytes > 0 {
        // The whole 16 bytes, even when src-size is less: PTX reads only src-size bytes, but
        // compute-sanitizer's memcheck counts the full copy and aborts the kernel when it
        // leaves the allocation (a partial edge chunk of gemm_tc v01 at the end of B, H200,
        // CUDA 13, 2026-12-04); a partial copy must end inside the buffer.
        let n = 16 / elem;
        if si.checked_add(n).is_none_or(|end| end > src_len) {
            fault(FaultKind::OutOfBounds { write: false, index: si, count: n, len: src_len, addr: src_addr, at });
        }
        if !src_addr.is_multiple_of(16) {
            fault(FaultKind::Misaligned { addr: src_addr, align: 16, at });
        }
    }
    // Destination: bounds and alignment, and a race check as a write (not recorded yet).
    let byte = di as u64 * elem as u64 + dst_offset as u64;
    let n = (16 / elem) as u32;
    if di as u64 + n as u64 > dst_len as u64 || byte + 16 > block.shared.size() as u64 {
        fault(FaultKind::SharedOutOfBounds {
            write: true,
            index: di,
            len: dst_len,
            offset: dst_offset,
            shared_bytes: block.shared.size(),
            at,
        });
    }
    let byte = byte as u32;
    if !byte.is_multiple_of(16) {
        fault(FaultKind::Misaligned { addr: byte as usize, align: 16, at });
    }
    if let Err(k) = block.shared.check_write(t, block, byte, 16, at) {
        fault(k);
    }
    block.tc.copies.borrow_mut()[t.linear as usize].open.push(PendingCopy {
        dst: byte,
        src: src_addr,
        src_bytes,
        size: 16,
        at,
    });
}

pub fn cp_async_commit() {
    let t = current();
    let mut copies = t.block().tc.copies.borrow_mut();
    let c = &mut copies[t.linear as usize];
    let group = std::mem::take(&mut c.open);
    c.groups.push_back(group);
}

pub fn cp_async_wait_group<const N: u32>() {
    let t = current();
    let block = t.block();
    loop {
        let group = {
            let mut copies = block.tc.copies.borrow_mut();
            let c = &mut copies[t.linear as usize];
            if c.groups.len() <= N as usize {
                return;
            }
            c.groups.pop_front().expect("nonempty")
        };
        for p in group {
            if let Err(k) = block.shared.track(t, block, p.dst, p.size, true, p.at) {
                fault(k);
            }
            let mut buf = [0u8; 16];
            // SAFETY: `src_bytes` bytes at `src` were bounds-checked against the view at issue;
            // the launch keeps global memory alive until every block ends.
            unsafe { std::ptr::copy_nonoverlapping(p.src as *const u8, buf.as_mut_ptr(), p.src_bytes as usize) };
            for (q, &b) in buf[..p.size as usize].iter().enumerate() {
                block.shared.write::<u8>(p.dst + q as u32, b);
            }
        }
    }
}

/// One element (16 bits) of an 8 x 8 matrix given as 8 rows of 4 words.
fn half(rows: &[[u32; 4]; 8], r: usize, c: usize) -> u32 {
    (rows[r][c / 2] >> (16 * (c % 2))) & 0xFFFF
}

fn to_f32(kind: MmaKind, h: u32) -> f32 {
    match kind {
        MmaKind::Bf16 => f32::from_bits(h << 16),
        MmaKind::F16 => half::f16::from_bits(h as u16).to_f32(),
    }
}

/// Completes a wide collective (`mma`, `ldmatrix`) of warp lanes `base .. base + 32`: reads
/// every lane's posted words and writes every lane's result words. The caller checked that
/// the lanes agree on op and mask.
// Index loops mirror the ISA's per-register formulas.
#[allow(clippy::needless_range_loop)]
pub(crate) fn resolve(op: WarpOp, mask: u32, block: &BlockCtx, base: usize) -> Result<(), FaultKind> {
    if mask != FULL_MASK {
        return Err(FaultKind::WarpDivergence {
            detail: format!("{op} is .sync.aligned: all 32 lanes must execute it (mask {mask:#010x})"),
        });
    }
    let mut wide = block.tc.wide.borrow_mut();
    let lanes: Vec<[u32; WIDE]> = wide[base..base + 32].to_vec();
    match op {
        WarpOp::Mma(kind) => {
            let mut a = [[0f32; 16]; 16];
            let mut b = [[0f32; 8]; 16];
            let mut c = [[0f32; 8]; 16];
            for (l, w) in lanes.iter().enumerate() {
                let (g, t) = (l / 4, l % 4);
                for reg in 0..4 {
                    let row = g + 8 * (reg % 2);
                    let col = 2 * t + 8 * (reg / 2);
                    a[row][col] = to_f32(kind, w[reg] & 0xFFFF);
                    a[row][col + 1] = to_f32(kind, w[reg] >> 16);
                }
                for reg in 0..2 {
                    let k = 2 * t + 8 * reg;
                    b[k][g] = to_f32(kind, w[4 + reg] & 0xFFFF);
                    b[k + 1][g] = to_f32(kind, w[4 + reg] >> 16);
                }
                for i in 0..4 {
                    c[g + 8 * (i / 2)][2 * t + i % 2] = f32::from_bits(w[6 + i]);
                }
            }
            for (l, out) in wide[base..base + 32].iter_mut().enumerate() {
                let (g, t) = (l / 4, l % 4);
                for i in 0..4 {
                    let (row, col) = (g + 8 * (i / 2), 2 * t + i % 2);
                    let mut acc = c[row][col];
                    for (k, brow) in b.iter().enumerate() {
                        // The product is exact in f32, so this is one f32 rounding per add.
                        acc += a[row][k] * brow[col];
                    }
                    out[i] = acc.to_bits();
                }
            }
        }
        WarpOp::WgmmaRegA => {
            // Halves of the warp's 16 x 16 A: register r of lane (g, t) holds row g + 8 (r % 2),
            // columns 2 t + 8 (r / 2) and the next.
            let mut a = [[0u16; 16]; 16];
            for (l, w) in lanes.iter().enumerate() {
                let (g, t) = (l / 4, l % 4);
                for reg in 0..4 {
                    let (row, col) = (g + 8 * (reg % 2), 2 * t + 8 * (reg / 2));
                    a[row][col] = w[reg] as u16;
                    a[row][col + 1] = (w[reg] >> 16) as u16;
                }
            }
            for (l, out) in wide[base..base + 32].iter_mut().enumerate() {
                let g = l / 4;
                for (ri, row) in [g, g + 8].into_iter().enumerate() {
                    for k2 in 0..8 {
                        out[8 * ri + k2] = a[row][2 * k2] as u32 | ((a[row][2 * k2 + 1] as u32) << 16);
                    }
                }
            }
        }
        WarpOp::Ldmatrix { n, trans } => {
            for (l, out) in wide[base..base + 32].iter_mut().enumerate() {
                for (j, o) in out[..n as usize].iter_mut().enumerate() {
                    let mut rows = [[0u32; 4]; 8];
                    for (r, row) in rows.iter_mut().enumerate() {
                        row.copy_from_slice(&lanes[8 * j + r][..4]);
                    }
                    let (lo, hi) = if trans {
                        (half(&rows, 2 * (l % 4), l / 4), half(&rows, 2 * (l % 4) + 1, l / 4))
                    } else {
                        (half(&rows, l / 4, 2 * (l % 4)), half(&rows, l / 4, 2 * (l % 4) + 1))
                    };
                    *o = lo | (hi << 16);
                }
            }
        }
        _ => unreachable!("only wide collectives come here"),
    }
    Ok(())
}
