//! The device API on `nvptx64`: special registers, barriers and PTX instructions.

use super::warp::{ShflMode, VoteMode};
use core::arch::asm;
use core::arch::nvptx;

// The block's dynamic shared segment; its size is the launch's `sharedMemBytes`. Aligned to
// 1024 bytes: the period of the 128-byte swizzle that TMA writes and wgmma reads.
core::arch::global_asm!(".extern .shared .align 1024 .b8 dyn_smem[];");

#[inline(always)]
pub fn thread_idx_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_thread_idx_x() as u32 }
}
#[inline(always)]
pub fn thread_idx_y() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_thread_idx_y() as u32 }
}
#[inline(always)]
pub fn block_idx_x() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_block_idx_x() as u32 }
}
#[inline(always)]
pub fn block_idx_y() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_block_idx_y() as u32 }
}
#[inline(always)]
pub fn block_idx_z() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_block_idx_z() as u32 }
}
#[inline(always)]
pub fn block_dim_x() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_block_dim_x() as u32 }
}
#[inline(always)]
pub fn block_dim_y() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_block_dim_y() as u32 }
}
#[inline(always)]
pub fn grid_dim_x() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_grid_dim_x() as u32 }
}
#[inline(always)]
pub fn grid_dim_y() -> u32 {
    // SAFETY: as above.
    unsafe { nvptx::_grid_dim_y() as u32 }
}
#[inline(always)]
pub fn lane_id() -> u32 {
    let l: u32;
    // SAFETY: reads %laneid.
    unsafe { asm!("mov.u32 {l}, %laneid;", l = out(reg32) l) };
    l
}

#[inline(always)]
pub fn sync_threads() {
    // SAFETY: bar.sync 0; the kernel's contract is that every thread reaches it.
    unsafe { nvptx::_syncthreads() }
}

#[inline(always)]
pub fn named_barrier_sync(id: u32, threads: u32) {
    // SAFETY: bar.sync with a barrier id in 1..=15 and a warp multiple (NamedBarrier::new);
    // the kernel's contract is that `threads` threads, whole warps, reach it.
    unsafe { asm!("bar.sync {id}, {n};", id = in(reg32) id, n = in(reg32) threads, options(nostack, preserves_flags)) }
}
#[inline(always)]
pub fn named_barrier_arrive(id: u32, threads: u32) {
    // SAFETY: as named_barrier_sync; arriving does not wait.
    unsafe {
        asm!("bar.arrive {id}, {n};", id = in(reg32) id, n = in(reg32) threads, options(nostack, preserves_flags))
    }
}

// Global memory: the GPU does no checking (see the device module docs).
#[inline(always)]
pub fn check_global<T>(_addr: usize, _len: usize, _i: usize, _n: usize, _write: bool) {}
#[inline(always)]
pub fn check_global_bulk<T>(_addr: usize, _len: usize, _i: usize, _n: usize) {}

#[inline(always)]
pub unsafe fn load_16b<T: Copy, const N: usize>(p: *const T) -> [T; N] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees a valid, 16-byte aligned global address. `cvta.to.global`
    // turns the generic pointer into a global-space one so the load is LDG.E.128.
    unsafe {
        asm!(
            "{{ .reg .b64 g; cvta.to.global.u64 g, {p}; ld.global.v4.b32 {{{a}, {b}, {c}, {d}}}, [g]; }}",
            p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
            options(readonly, nostack, preserves_flags)
        );
        core::mem::transmute_copy(&[a, b, c, d])
    }
}

/// A pair of 16-bit or 32-bit elements as one 4- or 8-byte global load.
#[inline(always)]
pub unsafe fn load_pair<T: Copy>(p: *const T) -> [T; 2] {
    const { assert!(core::mem::size_of::<T>() == 2 || core::mem::size_of::<T>() == 4, "pairs of 2- or 4-byte elements") };
    // SAFETY (both arms): the caller guarantees a valid global address aligned to the pair.
    unsafe {
        if core::mem::size_of::<T>() == 4 {
            let (a, b): (u32, u32);
            asm!(
                "{{ .reg .b64 g; cvta.to.global.u64 g, {p}; ld.global.v2.b32 {{{a}, {b}}}, [g]; }}",
                p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, options(readonly, nostack, preserves_flags)
            );
            core::mem::transmute_copy(&[a, b])
        } else {
            let a: u32;
            asm!(
                "{{ .reg .b64 g; cvta.to.global.u64 g, {p}; ld.global.b32 {a}, [g]; }}",
                p = in(reg64) p, a = out(reg32) a, options(readonly, nostack, preserves_flags)
            );
            core::mem::transmute_copy(&a)
        }
    }
}

/// A pair of 16-bit or 32-bit elements as one 4- or 8-byte global store.
#[inline(always)]
pub unsafe fn store_pair<T: Copy>(p: *mut T, v: [T; 2]) {
    const { assert!(core::mem::size_of::<T>() == 2 || core::mem::size_of::<T>() == 4, "pairs of 2- or 4-byte elements") };
    // SAFETY (both arms): the pair is 8 or 4 bytes, read as u32s; the caller guarantees a
    // valid global address aligned to the pair.
    unsafe {
        if core::mem::size_of::<T>() == 4 {
            let [a, b]: [u32; 2] = core::mem::transmute_copy(&v);
            asm!(
                "{{ .reg .b64 g; cvta.to.global.u64 g, {p}; st.global.v2.b32 [g], {{{a}, {b}}}; }}",
                p = in(reg64) p, a = in(reg32) a, b = in(reg32) b, options(nostack, preserves_flags)
            );
        } else {
            let a: u32 = core::mem::transmute_copy(&v);
            asm!(
                "{{ .reg .b64 g; cvta.to.global.u64 g, {p}; st.global.b32 [g], {a}; }}",
                p = in(reg64) p, a = in(reg32) a, options(nostack, preserves_flags)
            );
        }
    }
}

#[inline(always)]
pub unsafe fn store_16b<T: Copy, const N: usize>(p: *mut T, v: [T; N]) {
    // SAFETY: [T; N] is 16 bytes (asserted by the caller), so it reads as four u32.
    let [a, b, c, d]: [u32; 4] = unsafe { core::mem::transmute_copy(&v) };
    // SAFETY: the caller guarantees a valid, 16-byte aligned global address.
    unsafe {
        asm!(
            "{{ .reg .b64 g; cvta.to.global.u64 g, {p}; st.global.v4.b32 [g], {{{a}, {b}, {c}, {d}}}; }}",
            p = in(reg64) p, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, d = in(reg32) d,
            options(nostack, preserves_flags)
        );
    }
}

#[inline(always)]
pub unsafe fn atomic_add_f32(p: *mut f32, v: f32) -> f32 {
    let old: f32;
    // SAFETY: the caller guarantees a valid global address.
    unsafe { asm!("atom.global.add.f32 {o}, [{p}], {v};", o = out(reg32) old, p = in(reg64) p, v = in(reg32) v) };
    old
}

#[inline(always)]
pub unsafe fn atomic_add_u32(p: *mut u32, v: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller guarantees a valid global address.
    unsafe { asm!("atom.global.add.u32 {o}, [{p}], {v};", o = out(reg32) old, p = in(reg64) p, v = in(reg32) v) };
    old
}

/// The shared-window address of element `i` of a view at byte `offset` of the dynamic segment.
#[inline(always)]
fn shared_addr<T>(offset: u32, i: u32) -> u32 {
    let base: u32;
    // SAFETY: takes the shared-space address of the dynamic shared segment.
    unsafe { asm!("mov.u32 {b}, dyn_smem;", b = out(reg32) base, options(pure, nomem, nostack)) };
    base + offset + i * core::mem::size_of::<T>() as u32
}

// Shared accesses go through `ld.shared`/`st.shared` with 32-bit shared-window addresses:
// through a generic pointer LLVM cannot prove the address space and emits generic `ld`/`st`
// (SASS `LD`/`ST` instead of `LDS`/`STS`, and no `LDS.128`). The size match is resolved at
// compile time; vector forms need the type's alignment to match their width.
#[inline(always)]
pub fn shared_load<T: Copy>(offset: u32, _len: u32, i: u32) -> T {
    let a = shared_addr::<T>(offset, i);
    let (size, align) = (core::mem::size_of::<T>(), core::mem::align_of::<T>());
    // SAFETY (every arm): the view lies inside the launch's dynamic shared size (the layout is
    // a const of the kernel's config and the launcher passes its size), `i < len` is checked
    // on the emulator, and the element is aligned to its type (checked there too); the arms
    // reinterpret exactly `size_of::<T>()` bytes.
    unsafe {
        if size == 16 && align >= 16 {
            let (x, y, z, w): (u32, u32, u32, u32);
            asm!("ld.shared.v4.b32 {{{x}, {y}, {z}, {w}}}, [{a}];", a = in(reg32) a, x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w, options(readonly, nostack, preserves_flags));
            core::mem::transmute_copy(&[x, y, z, w])
        } else if size == 8 && align >= 8 {
            let (x, y): (u32, u32);
            asm!("ld.shared.v2.b32 {{{x}, {y}}}, [{a}];", a = in(reg32) a, x = out(reg32) x, y = out(reg32) y, options(readonly, nostack, preserves_flags));
            core::mem::transmute_copy(&[x, y])
        } else if size == 4 {
            let x: u32;
            asm!("ld.shared.b32 {x}, [{a}];", a = in(reg32) a, x = out(reg32) x, options(readonly, nostack, preserves_flags));
            core::mem::transmute_copy(&x)
        } else if size == 2 {
            let x: u16;
            asm!("ld.shared.b16 {x}, [{a}];", a = in(reg32) a, x = out(reg16) x, options(readonly, nostack, preserves_flags));
            core::mem::transmute_copy(&x)
        } else {
            generic_shared_ptr::<T>(offset, i).read()
        }
    }
}

#[inline(always)]
pub fn shared_store<T: Copy>(offset: u32, _len: u32, i: u32, v: T) {
    let a = shared_addr::<T>(offset, i);
    let (size, align) = (core::mem::size_of::<T>(), core::mem::align_of::<T>());
    // SAFETY: as in `shared_load`.
    unsafe {
        if size == 16 && align >= 16 {
            let [x, y, z, w]: [u32; 4] = core::mem::transmute_copy(&v);
            asm!("st.shared.v4.b32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg32) a, x = in(reg32) x, y = in(reg32) y, z = in(reg32) z, w = in(reg32) w, options(nostack, preserves_flags));
        } else if size == 8 && align >= 8 {
            let [x, y]: [u32; 2] = core::mem::transmute_copy(&v);
            asm!("st.shared.v2.b32 [{a}], {{{x}, {y}}};", a = in(reg32) a, x = in(reg32) x, y = in(reg32) y, options(nostack, preserves_flags));
        } else if size == 4 {
            let x: u32 = core::mem::transmute_copy(&v);
            asm!("st.shared.b32 [{a}], {x};", a = in(reg32) a, x = in(reg32) x, options(nostack, preserves_flags));
        } else if size == 2 {
            let x: u16 = core::mem::transmute_copy(&v);
            asm!("st.shared.b16 [{a}], {x};", a = in(reg32) a, x = in(reg16) x, options(nostack, preserves_flags));
        } else {
            generic_shared_ptr::<T>(offset, i).write(v)
        }
    }
}

/// Other sizes: a generic pointer into the shared window.
#[inline(always)]
fn generic_shared_ptr<T>(offset: u32, i: u32) -> *mut T {
    let base: u64;
    // SAFETY: takes the generic address of the dynamic shared segment.
    unsafe { asm!("cvta.shared.u64 {p}, dyn_smem;", p = out(reg64) base, options(pure, nomem, nostack)) };
    (base + offset as u64 + i as u64 * core::mem::size_of::<T>() as u64) as *mut T
}

#[inline(always)]
pub fn shfl_sync(mode: ShflMode, mask: u32, v: u32, arg: u32) -> u32 {
    let r: u32;
    // SAFETY: shfl.sync with the caller's mask; the clamp operand 0x1f (0 for `up`) selects a
    // full 32-lane segment.
    unsafe {
        match mode {
            ShflMode::Idx => {
                asm!("shfl.sync.idx.b32 {r}, {v}, {a}, 31, {m};", r = out(reg32) r, v = in(reg32) v, a = in(reg32) arg, m = in(reg32) mask)
            }
            ShflMode::Up => {
                asm!("shfl.sync.up.b32 {r}, {v}, {a}, 0, {m};", r = out(reg32) r, v = in(reg32) v, a = in(reg32) arg, m = in(reg32) mask)
            }
            ShflMode::Down => {
                asm!("shfl.sync.down.b32 {r}, {v}, {a}, 31, {m};", r = out(reg32) r, v = in(reg32) v, a = in(reg32) arg, m = in(reg32) mask)
            }
            ShflMode::Xor => {
                asm!("shfl.sync.bfly.b32 {r}, {v}, {a}, 31, {m};", r = out(reg32) r, v = in(reg32) v, a = in(reg32) arg, m = in(reg32) mask)
            }
        }
    }
    r
}

#[inline(always)]
pub fn vote_sync(mode: VoteMode, mask: u32, pred: bool) -> u32 {
    let r: u32;
    let p = pred as u32;
    // SAFETY: vote.sync with the caller's mask.
    unsafe {
        match mode {
            VoteMode::All => {
                asm!("{{ .reg .pred p, q; setp.ne.u32 p, {x}, 0; vote.sync.all.pred q, p, {m}; selp.u32 {r}, 1, 0, q; }}", r = out(reg32) r, x = in(reg32) p, m = in(reg32) mask)
            }
            VoteMode::Any => {
                asm!("{{ .reg .pred p, q; setp.ne.u32 p, {x}, 0; vote.sync.any.pred q, p, {m}; selp.u32 {r}, 1, 0, q; }}", r = out(reg32) r, x = in(reg32) p, m = in(reg32) mask)
            }
            VoteMode::Ballot => {
                asm!("{{ .reg .pred p; setp.ne.u32 p, {x}, 0; vote.sync.ballot.b32 {r}, p, {m}; }}", r = out(reg32) r, x = in(reg32) p, m = in(reg32) mask)
            }
        }
    }
    r
}

#[inline(always)]
pub fn sync_warp(mask: u32) {
    // SAFETY: bar.warp.sync with the caller's mask.
    unsafe { asm!("bar.warp.sync {m};", m = in(reg32) mask) }
}

#[inline(always)]
pub fn exp2_approx(x: f32) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("ex2.approx.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
pub fn opaque_u32(x: u32) -> u32 {
    let r: u32;
    // SAFETY: a register move.
    unsafe { asm!("mov.b32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
pub fn opaque_usize(x: usize) -> usize {
    let r: u64;
    // SAFETY: a register move.
    unsafe { asm!("mov.b64 {r}, {x};", r = out(reg64) r, x = in(reg64) x as u64, options(pure, nomem, nostack)) };
    r as usize
}

#[inline(always)]
pub fn exp2_approx_ftz(x: f32) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("ex2.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
pub fn log2_approx(x: f32) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("lg2.approx.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
pub fn rcp_approx(x: f32) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("rcp.approx.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
pub fn rsqrt_approx(x: f32) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("rsqrt.approx.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
pub fn sqrt_rn(x: f32) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("sqrt.rn.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
pub fn fma_rn(a: f32, b: f32, c: f32) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe {
        asm!("fma.rn.f32 {r}, {a}, {b}, {c};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, options(pure, nomem, nostack))
    };
    r
}

#[inline(always)]
pub fn max_nan(a: f32, b: f32) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic (max.NaN needs sm_80, ferrokern's floor).
    unsafe {
        asm!("max.NaN.f32 {r}, {a}, {b};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, options(pure, nomem, nostack))
    };
    r
}

#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let r: f32;
    // SAFETY: pure conversion.
    unsafe { asm!("cvt.f32.f16 {r}, {h};", r = out(reg32) r, h = in(reg16) h, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
pub fn f32_to_f16(x: f32) -> u16 {
    let r: u16;
    // SAFETY: pure conversion, round to nearest even.
    unsafe { asm!("cvt.rn.f16.f32 {r}, {x};", r = out(reg16) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

#[inline(always)]
pub fn f32_to_bf16(x: f32) -> u16 {
    let r: u16;
    // SAFETY: pure conversion, round to nearest even (sm_80+).
    unsafe { asm!("cvt.rn.bf16.f32 {r}, {x};", r = out(reg16) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

// Tensor cores (sm_80+): see `device::mma` for the fragment layouts these instructions use.

#[inline(always)]
pub fn mma_m16n8k16(kind: super::mma::MmaKind, a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    // SAFETY: register-only arithmetic; `.sync.aligned` requires the whole warp to execute it
    // with the same kind, which the kernels do (warp-uniform control flow; the emulator checks).
    unsafe {
        match kind {
            super::mma::MmaKind::Bf16 => asm!(
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
                d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                options(pure, nomem, nostack)
            ),
            super::mma::MmaKind::F16 => asm!(
                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
                d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                options(pure, nomem, nostack)
            ),
        }
    }
    [d0, d1, d2, d3]
}

#[inline(always)]
pub fn cvt_pack_f32x2(kind: super::mma::MmaKind, lo: f32, hi: f32) -> u32 {
    let r: u32;
    // SAFETY: pure conversion (sm_80+); the ISA puts the first source in the upper half.
    unsafe {
        match kind {
            super::mma::MmaKind::Bf16 => {
                asm!("cvt.rn.bf16x2.f32 {r}, {hi}, {lo};", r = out(reg32) r, hi = in(reg32) hi, lo = in(reg32) lo, options(pure, nomem, nostack))
            }
            super::mma::MmaKind::F16 => {
                asm!("cvt.rn.f16x2.f32 {r}, {hi}, {lo};", r = out(reg32) r, hi = in(reg32) hi, lo = in(reg32) lo, options(pure, nomem, nostack))
            }
        }
    }
    r
}

#[inline(always)]
pub fn ldmatrix<const N: usize>(offset: u32, _len: u32, i: u32, elem: u32, trans: bool) -> [u32; N] {
    let a = shared_addr::<u8>(offset, i * elem);
    let mut r = [0u32; N];
    // SAFETY: every lane's row lies inside the view (the kernel's index math, checked on the
    // emulator) and is 16-byte aligned; the whole warp executes the same ldmatrix.
    unsafe {
        match (N, trans) {
            (1, false) => {
                asm!("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {{{r0}}}, [{a}];", a = in(reg32) a, r0 = out(reg32) r[0], options(readonly, nostack))
            }
            (1, true) => {
                asm!("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {{{r0}}}, [{a}];", a = in(reg32) a, r0 = out(reg32) r[0], options(readonly, nostack))
            }
            (2, false) => {
                asm!("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{{r0}, {r1}}}, [{a}];", a = in(reg32) a, r0 = out(reg32) r[0], r1 = out(reg32) r[1], options(readonly, nostack))
            }
            (2, true) => {
                asm!("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {{{r0}, {r1}}}, [{a}];", a = in(reg32) a, r0 = out(reg32) r[0], r1 = out(reg32) r[1], options(readonly, nostack))
            }
            (4, false) => {
                asm!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];", a = in(reg32) a, r0 = out(reg32) r[0], r1 = out(reg32) r[1], r2 = out(reg32) r[2], r3 = out(reg32) r[3], options(readonly, nostack))
            }
            _ => {
                asm!("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];", a = in(reg32) a, r0 = out(reg32) r[0], r1 = out(reg32) r[1], r2 = out(reg32) r[2], r3 = out(reg32) r[3], options(readonly, nostack))
            }
        }
    }
    r
}

#[inline(always)]
pub fn cp_async_16<T>(dst_offset: u32, _dst_len: u32, di: u32, src: usize, _src_len: usize, si: usize, src_bytes: u32) {
    let d = shared_addr::<T>(dst_offset, di);
    let s = src + si * core::mem::size_of::<T>();
    // SAFETY: the kernel keeps `si` (when `src_bytes > 0`) and `di` inside their views with
    // 16-byte aligned addresses (checked on the emulator); `src_bytes <= 16` zero-fills the rest.
    unsafe {
        asm!(
            "{{ .reg .b64 g; cvta.to.global.u64 g, {s}; cp.async.cg.shared.global [{d}], [g], 16, {n}; }}",
            d = in(reg32) d, s = in(reg64) s, n = in(reg32) src_bytes,
            options(nostack, preserves_flags)
        )
    }
}

#[inline(always)]
pub fn cp_async_commit() {
    // SAFETY: closes this thread's cp.async group; no operands.
    unsafe { asm!("cp.async.commit_group;", options(nostack, preserves_flags)) }
}

#[inline(always)]
pub fn cp_async_wait_group<const N: u32>() {
    // SAFETY: waits for this thread's older cp.async groups; a memory clobber (no `nomem`)
    // keeps shared loads after it.
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack, preserves_flags)) }
}

/// `pub fn $name(r: &mut [$ty; $n])`: an empty asm statement (a PTX comment naming the
/// registers) that reads and writes every register of `r` (indices `$i`). Not `pure`, so the
/// compiler keeps it in order with the other asm statements (a `wgmma.wait_group`), and with
/// it every computation that reads or writes `r`: see `device::hopper::wgmma_fence_operands`.
macro_rules! fence_fn {
    ($name:ident, $ty:ty, $n:literal; $($i:tt)*) => {
        #[inline(always)]
        pub fn $name(r: &mut [$ty; $n]) {
            // SAFETY: the statement is a comment: no instruction, no memory access; it only
            // tells the compiler the registers are read and written here.
            unsafe { asm!(concat!("// fence operands", $(" {", stringify!($i), "}",)*), $(inout(reg32) r[$i],)* options(nostack, preserves_flags)) }
        }
    };
}

fence_fn!(fence_f32x4, f32, 4; 0 1 2 3);
fence_fn!(fence_u32x4, u32, 4; 0 1 2 3);
fence_fn!(fence_f32x32, f32, 32; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
fence_fn!(fence_f32x64, f32, 64; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63);
fence_fn!(fence_f32x128, f32, 128; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127);

// Hopper (sm_90a) instructions. The other archs' builds get bodies that trap: the host
// launches the kernels that use them only where the sm_90a PTX is loaded.
#[cfg(ferrokern_sm90a)]
include!("ptx_hopper.rs");

#[cfg(not(ferrokern_sm90a))]
pub use no_hopper::*;

#[cfg(not(ferrokern_sm90a))]
mod no_hopper {
    #[inline(always)]
    fn unavailable() -> ! {
        // SAFETY: `trap` aborts the kernel; reached only if a launcher broke the sm_90a rule.
        unsafe { core::arch::nvptx::trap() }
    }
    pub fn smem_addr(_: u32) -> u32 {
        unavailable()
    }
    /// # Safety
    /// Never runs: it traps.
    pub unsafe fn red_add_f32x2(_: *mut f32, _: [f32; 2]) {
        unavailable()
    }
    /// # Safety
    /// Never runs: it traps.
    pub unsafe fn bulk_reduce_add_f32(_: *mut f32, _: u32, _: u32) {
        unavailable()
    }
    pub fn bulk_commit_group() {
        unavailable()
    }
    pub fn bulk_wait_group<const N: u32>(_: bool) {
        unavailable()
    }
    pub fn mbar_init(_: u32, _: u32) {
        unavailable()
    }
    pub fn mbar_arrive(_: u32, _: u32) {
        unavailable()
    }
    pub fn mbar_wait(_: u32, _: u32) {
        unavailable()
    }
    pub fn fence_mbarrier_init() {
        unavailable()
    }
    pub fn fence_proxy_async() {
        unavailable()
    }
    pub fn tma_load_2d(_: u32, _: u64, _: i32, _: i32, _: u32) {
        unavailable()
    }
    pub fn tma_load_3d(_: u32, _: u64, _: i32, _: i32, _: i32, _: u32) {
        unavailable()
    }
    pub fn fence_tensormap_acquire(_: u64) {
        unavailable()
    }
    pub fn wgmma_fence() {
        unavailable()
    }
    pub fn wgmma_commit() {
        unavailable()
    }
    pub fn wgmma_wait<const N: u32>() {
        unavailable()
    }
    pub fn wgmma_m64n128k16<const TRANS_A: u32, const TRANS_B: u32>(
        _: crate::device::mma::MmaKind,
        _: &mut [f32; 64],
        _: u64,
        _: u64,
        _: bool,
    ) {
        unavailable()
    }
    pub fn wgmma_m64n256k16<const TRANS_A: u32, const TRANS_B: u32>(
        _: crate::device::mma::MmaKind,
        _: &mut [f32; 128],
        _: u64,
        _: u64,
        _: bool,
    ) {
        unavailable()
    }
    pub fn wgmma_m64n64k16<const TRANS_A: u32, const TRANS_B: u32>(
        _: crate::device::mma::MmaKind,
        _: &mut [f32; 32],
        _: u64,
        _: u64,
        _: bool,
    ) {
        unavailable()
    }
    pub fn wgmma_rs_m64n64k16<const TRANS_B: u32>(
        _: crate::device::mma::MmaKind,
        _: &mut [f32; 32],
        _: [u32; 4],
        _: u64,
        _: bool,
    ) {
        unavailable()
    }
    pub fn wgmma_rs_m64n128k16<const TRANS_B: u32>(
        _: crate::device::mma::MmaKind,
        _: &mut [f32; 64],
        _: [u32; 4],
        _: u64,
        _: bool,
    ) {
        unavailable()
    }
    pub fn wgmma_rs_m64n256k16<const TRANS_B: u32>(
        _: crate::device::mma::MmaKind,
        _: &mut [f32; 128],
        _: [u32; 4],
        _: u64,
        _: bool,
    ) {
        unavailable()
    }
    pub fn setmaxnreg_inc(_: u32) {
        unavailable()
    }
    pub fn setmaxnreg_dec(_: u32) {
        unavailable()
    }
}
