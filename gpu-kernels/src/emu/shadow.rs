//! A block's shared memory and its shadow: who wrote and read each 2-byte granule, and when.
//!
//! Happens-before is tracked with the block's barrier epoch, each warp's `sync_warp` epoch and,
//! for named barriers and mbarriers, a vector clock of release counts ([`SyncClock`]). An
//! earlier access by thread `a` is ordered before a later access by thread `b` when `a == b`,
//! or a block barrier completed in between, or both are lanes of one warp and a `sync_warp` of
//! that warp completed in between, or `a` (or a lane of its warp, after a `sync_warp` that
//! followed the access) arrived on a named barrier or an mbarrier after the access, in a
//! phase `b` acquired before its access, directly or through other threads. Anything else that
//! involves a write is a race. The epochs are compared first; the vector clock is consulted
//! only where they do not order a pair, so kernels without named barriers and mbarriers pay
//! nothing for it. Each granule remembers its last writer and its two most recent distinct
//! readers: enough to catch every write-write and read-write race between two threads, at
//! the cost of possibly missing a third, older reader.

use super::block::{BlockCtx, ThreadCtx};
use super::{Access, FaultKind, Loc};
use std::cell::RefCell;
use std::collections::HashMap;

/// Race and init tracking granularity in bytes: f16/bf16 elements are the smallest shared type.
const GRANULE: u32 = 2;
/// The async proxy's claims on shared memory are per 16-byte chunk, its access unit.
const CHUNK: u32 = 16;
const NOBODY: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Stamp {
    thread: u32,
    barrier_epoch: u32,
    warp_epoch: u32,
    /// The thread's `fence.proxy.async` count at the access.
    proxy_fences: u32,
    /// The thread's release count at the access ([`SyncClock`]).
    releases: u32,
    at: Option<Loc>,
}

const EMPTY: Stamp = Stamp { thread: NOBODY, barrier_epoch: 0, warp_epoch: 0, proxy_fences: 0, releases: 0, at: None };

/// What a thread knows of other threads through the barriers it waited for: a vector clock.
/// Entry `w` holds two counts thread `w` had when it released something this thread
/// acquired: its `fence.proxy.async`s (whether its stores are published to the async proxy:
/// [`SharedMem::unpublished_write`]) and its releases (whether its plain accesses are ordered
/// before this thread's: the race check); per warp, the warp's `sync_warp` epoch at the
/// release (every lane's access before that `sync_warp` is ordered before it). A release is an
/// arrival on a named barrier or an mbarrier, carrying the arriving thread's clock and its own
/// counts (its release count bumped first) into the phase; waiting for a phase acquires every
/// phase of that barrier completed so far (which may include later ones than the one waited
/// for: that can only accept more, since counts only grow). `sync_warp` joins the clocks of
/// its lanes (and their fence counts). Ordering through global memory (flags, atomics) is not
/// seen. Block barriers are simpler: every thread knows every count at the last one
/// (`BlockCtx::barrier_epoch`, `BlockCtx::barrier_fences`). Entries past the end are zero;
/// kernels without named barriers, mbarriers and fences keep these empty.
#[derive(Clone, Debug, Default)]
pub(crate) struct SyncClock {
    threads: Vec<Known>,
    warps: Vec<u32>,
}

/// A thread's entry of a [`SyncClock`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Known {
    fences: u32,
    releases: u32,
}

fn raise_to<T: Copy + Default>(v: &mut Vec<T>, i: usize, k: T, max: impl Fn(T, T) -> T) {
    if v.len() <= i {
        v.resize(i + 1, T::default());
    }
    v[i] = max(v[i], k);
}

fn join_into<T: Copy + Default>(a: &mut Vec<T>, b: &[T], max: impl Fn(T, T) -> T) {
    if a.len() < b.len() {
        a.resize(b.len(), T::default());
    }
    for (x, &y) in a.iter_mut().zip(b) {
        *x = max(*x, y);
    }
}

fn known_max(a: Known, b: Known) -> Known {
    Known { fences: a.fences.max(b.fences), releases: a.releases.max(b.releases) }
}

impl SyncClock {
    /// What this clock knows of thread `thread`'s `fence.proxy.async` count.
    pub fn fences(&self, thread: u32) -> u32 {
        self.threads.get(thread as usize).map_or(0, |k| k.fences)
    }

    /// Is an access by `s.thread` ordered before this clock's thread through releases?
    fn orders(&self, s: &Stamp) -> bool {
        self.threads.get(s.thread as usize).is_some_and(|k| k.releases > s.releases)
            || self.warps.get((s.thread / 32) as usize).is_some_and(|&e| e > s.warp_epoch)
    }

    fn raise(&mut self, thread: u32, k: Known) {
        if k != Known::default() {
            raise_to(&mut self.threads, thread as usize, k, known_max);
        }
    }

    fn join(&mut self, other: &SyncClock) {
        join_into(&mut self.threads, &other.threads, known_max);
        join_into(&mut self.warps, &other.warps, u32::max);
    }

    /// Thread `t`'s arrival on a named barrier or an mbarrier, into the phase's clock: what
    /// `t` knows, its fence count, its release count (bumped), and its warp's epoch.
    pub fn release(&mut self, block: &BlockCtx, t: u32) {
        let releases = &block.releases[t as usize];
        releases.set(releases.get() + 1);
        self.join(&block.sync_clocks.borrow()[t as usize]);
        self.raise(t, Known { fences: block.proxy_fences[t as usize].get(), releases: releases.get() });
        let w = (t / 32) as usize;
        raise_to(&mut self.warps, w, block.warp_epoch[w].get(), u32::max);
    }

    /// Lane `t`'s part in a `sync_warp`: what it knows and its fence count (its accesses are
    /// ordered by the warp epoch, which a later arrival carries).
    pub fn join_lane(&mut self, block: &BlockCtx, t: u32) {
        self.join(&block.sync_clocks.borrow()[t as usize]);
        self.raise(t, Known { fences: block.proxy_fences[t as usize].get(), releases: 0 });
    }

    /// A phase completes: its releases join the barrier's completed ones, and the next phase
    /// starts empty.
    pub fn complete(&mut self, phase: &mut SyncClock) {
        self.join(phase);
        phase.threads.clear();
        phase.warps.clear();
    }

    /// Thread `t` acquires a barrier's completed phases.
    pub fn acquire(&self, block: &BlockCtx, t: u32) {
        if !self.threads.is_empty() || !self.warps.is_empty() {
            block.sync_clocks.borrow_mut()[t as usize].join(self);
        }
    }
}

#[derive(Clone, Copy)]
struct Granule {
    written: bool,
    write: Stamp,
    read: Stamp,
    read2: Stamp,
}

pub(crate) struct SharedMem {
    size: u32,
    /// The first read of never-written bytes in this barrier interval. It is reported when the
    /// interval ends (at the next barrier or the block's end) unless a write by another
    /// thread in the same interval turns it into a race first: a thread that runs ahead of a
    /// writer it does not wait for reads stale bytes, and that is the bug to name.
    pending_uninit: std::cell::Cell<Option<(u32, Stamp)>>,
    bytes: RefCell<Vec<u8>>,
    shadow: RefCell<Vec<Granule>>,
    /// Per 16-byte chunk: the bulk op (`cp.reduce.async.bulk`) that may still be reading it,
    /// until its thread's `cp.async.bulk.wait_group` releases the claim. Every write path
    /// ([`SharedMem::track`], [`SharedMem::check_write`], [`SharedMem::write_async`]) checks
    /// it; empty in kernels without bulk ops, so the check is one emptiness test.
    async_reads: RefCell<HashMap<u32, AsyncRead>>,
}

/// A bulk op's pending read of a shared chunk: the issuing thread, its bulk group, where.
#[derive(Clone, Copy)]
pub(crate) struct AsyncRead {
    pub thread: u32,
    pub group: u32,
    pub at: Loc,
}

impl SharedMem {
    pub fn new(size: u32) -> Self {
        SharedMem {
            size,
            pending_uninit: std::cell::Cell::new(None),
            // 0xFF bytes read as NaN in every float type: an unchecked uninitialized read poisons.
            bytes: RefCell::new(vec![0xFF; size as usize]),
            shadow: RefCell::new(vec![
                Granule { written: false, write: EMPTY, read: EMPTY, read2: EMPTY };
                size.div_ceil(GRANULE) as usize
            ]),
            async_reads: RefCell::new(HashMap::new()),
        }
    }

    /// A bulk op reads `offset .. offset + size` (16-byte aligned) until released: a later
    /// claim on a chunk replaces an earlier one.
    pub fn claim_async_read(&self, offset: u32, size: u32, read: AsyncRead) {
        let mut reads = self.async_reads.borrow_mut();
        for c in offset / CHUNK..(offset + size).div_ceil(CHUNK) {
            reads.insert(c, read);
        }
    }

    /// Releases thread `thread`'s claims of bulk groups up to `done`: (chunk's byte offset,
    /// where the op was issued) for each, so the caller can record them as that thread's reads.
    pub fn release_async_reads(&self, thread: u32, done: u32) -> Vec<(u32, Loc)> {
        let mut released = Vec::new();
        self.async_reads.borrow_mut().retain(|&c, r| {
            let mine = r.thread == thread && r.group <= done;
            if mine {
                released.push((c * CHUNK, r.at));
            }
            !mine
        });
        released.sort_unstable_by_key(|&(byte, _)| byte);
        released
    }

    /// A bulk op still reading shared memory (the first by chunk), if any: at the block's end,
    /// a thread that never waited for its bulk groups.
    pub fn pending_async_read(&self) -> Option<(u32, AsyncRead)> {
        self.async_reads.borrow().iter().min_by_key(|(c, _)| **c).map(|(&c, &r)| (c * CHUNK, r))
    }

    /// A write (plain, `cp.async` or TMA) into bytes a bulk op may still be reading.
    fn check_async_reads(&self, offset: u32, size: u32, at: Loc) -> Result<(), FaultKind> {
        let reads = self.async_reads.borrow();
        if reads.is_empty() {
            return Ok(());
        }
        for c in offset / CHUNK..(offset + size).div_ceil(CHUNK) {
            if let Some(r) = reads.get(&c) {
                return Err(FaultKind::AsyncProxy {
                    detail: format!(
                        "a store at {}:{} overwrites shared byte {} which cp.reduce.async.bulk (thread {}, at {}:{}, bulk group {}) may still be reading: that thread must run cp.async.bulk.wait_group.read covering the group first (and another thread must be ordered after that wait)",
                        at.file(),
                        at.line(),
                        offset.max(CHUNK * c),
                        r.thread,
                        r.at.file(),
                        r.at.line(),
                        r.group
                    ),
                });
            }
        }
        Ok(())
    }

    fn stamp(t: &ThreadCtx, block: &BlockCtx, at: Loc) -> Stamp {
        Stamp {
            thread: t.linear,
            barrier_epoch: block.barrier_epoch.get(),
            warp_epoch: block.warp_epoch[t.warp() as usize].get(),
            proxy_fences: block.proxy_fences[t.linear as usize].get(),
            releases: block.releases[t.linear as usize].get(),
            at: Some(at),
        }
    }

    /// A generic-proxy store in `offset .. offset + size` that the async proxy of thread
    /// `reader` (its wgmma) may not read yet, if any: (writer, where, whether the writer has
    /// fenced since). A store becomes readable once its thread has executed `fence.proxy.async`
    /// after it and, unless the writer is the reader, that fence is ordered before the reader by
    /// a block barrier, or by arrivals on named barriers or mbarriers (and `sync_warp`s
    /// between lanes) whose phases the reader waited for: [`SyncClock`]. Bytes a TMA wrote
    /// last have no generic writer.
    pub fn unpublished_write(&self, block: &BlockCtx, reader: u32, offset: u32, size: u32) -> Option<(u32, Loc, bool)> {
        let shadow = self.shadow.borrow();
        let clocks = block.sync_clocks.borrow();
        (offset / GRANULE..(offset + size).div_ceil(GRANULE)).find_map(|g| {
            let w = &shadow[g as usize].write;
            if w.thread == NOBODY {
                return None;
            }
            let fences = block.proxy_fences[w.thread as usize].get();
            let known = if w.thread == reader {
                fences
            } else {
                block.barrier_fences[w.thread as usize].get().max(clocks[reader as usize].fences(w.thread))
            };
            (known <= w.proxy_fences)
                .then(|| (w.thread, w.at.expect("recorded writes have a location"), fences > w.proxy_fences))
        })
    }

    /// Is the earlier access `s` ordered before `now` (by the same or another thread)? The
    /// epochs first; the vector clock only where they do not order it.
    fn ordered(block: &BlockCtx, s: &Stamp, now: &Stamp) -> bool {
        s.thread == NOBODY
            || s.thread == now.thread
            || s.barrier_epoch < now.barrier_epoch
            || (s.thread / 32 == now.thread / 32 && s.warp_epoch < now.warp_epoch)
            || block.sync_clocks.borrow()[now.thread as usize].orders(s)
    }

    fn race(
        block: &BlockCtx,
        offset: u32,
        prior: &Stamp,
        prior_write: bool,
        now: &Stamp,
        now_write: bool,
    ) -> FaultKind {
        FaultKind::SharedRace {
            offset,
            first: Access {
                thread: block.thread_dim3(prior.thread),
                write: prior_write,
                at: prior.at.expect("recorded accesses have a location"),
            },
            second: Access { thread: block.thread_dim3(now.thread), write: now_write, at: now.at.expect("set") },
        }
    }

    /// Checks and records an access of `size` bytes at `offset` (already bounds-checked).
    pub fn track(
        &self,
        t: &ThreadCtx,
        block: &BlockCtx,
        offset: u32,
        size: u32,
        write: bool,
        at: Loc,
    ) -> Result<(), FaultKind> {
        if write {
            self.check_async_reads(offset, size, at)?;
        }
        let now = Self::stamp(t, block, at);
        let mut shadow = self.shadow.borrow_mut();
        let first = offset / GRANULE;
        let last = (offset + size).div_ceil(GRANULE);
        for g in first..last {
            let gr = &mut shadow[g as usize];
            let byte = g * GRANULE;
            if write {
                if !Self::ordered(block, &gr.write, &now) {
                    return Err(Self::race(block, byte, &gr.write, true, &now, true));
                }
                for r in [gr.read, gr.read2] {
                    if !Self::ordered(block, &r, &now) {
                        return Err(Self::race(block, byte, &r, false, &now, true));
                    }
                }
                gr.write = now;
                gr.written = true;
            } else {
                if !gr.written && self.pending_uninit.get().is_none() {
                    self.pending_uninit.set(Some((byte, now)));
                }
                if !Self::ordered(block, &gr.write, &now) {
                    return Err(Self::race(block, byte, &gr.write, true, &now, false));
                }
                if gr.read.thread != now.thread {
                    gr.read2 = gr.read;
                }
                gr.read = now;
            }
        }
        Ok(())
    }

    /// Checks a write of `size` bytes at `offset` for races as [`SharedMem::track`] would,
    /// without recording it: a `cp.async` destination at issue, whose bytes land later.
    pub fn check_write(
        &self,
        t: &ThreadCtx,
        block: &BlockCtx,
        offset: u32,
        size: u32,
        at: Loc,
    ) -> Result<(), FaultKind> {
        self.check_async_reads(offset, size, at)?;
        let now = Self::stamp(t, block, at);
        let shadow = self.shadow.borrow();
        for g in offset / GRANULE..(offset + size).div_ceil(GRANULE) {
            let gr = &shadow[g as usize];
            let byte = g * GRANULE;
            if !Self::ordered(block, &gr.write, &now) {
                return Err(Self::race(block, byte, &gr.write, true, &now, true));
            }
            for r in [gr.read, gr.read2] {
                if !Self::ordered(block, &r, &now) {
                    return Err(Self::race(block, byte, &r, false, &now, true));
                }
            }
        }
        Ok(())
    }

    /// The uninitialized read of the interval that just ended, if any: (reader, error).
    pub fn take_uninit_read(&self, block: &BlockCtx) -> Option<(crate::Dim3, FaultKind)> {
        self.pending_uninit.take().map(|(offset, s)| {
            (block.thread_dim3(s.thread), FaultKind::UninitSharedRead { offset, at: s.at.expect("recorded") })
        })
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    pub fn read<T: Copy>(&self, offset: u32) -> T {
        let bytes = self.bytes.borrow();
        let src = &bytes[offset as usize..offset as usize + size_of::<T>()];
        // SAFETY: `src` has exactly size_of::<T>() bytes; T is a plain Copy value type, and every
        // bit pattern of the element types stored in shared memory is valid.
        unsafe { std::ptr::read_unaligned(src.as_ptr() as *const T) }
    }

    pub fn write<T: Copy>(&self, offset: u32, v: T) {
        let mut bytes = self.bytes.borrow_mut();
        let dst = &mut bytes[offset as usize..offset as usize + size_of::<T>()];
        // SAFETY: `dst` has exactly size_of::<T>() bytes.
        unsafe { std::ptr::write_unaligned(dst.as_mut_ptr() as *mut T, v) }
    }

    /// Writes bytes on behalf of the async proxy (a TMA load): marks them written, with no
    /// thread as the writer (their ordering is checked by `emu::hopper`'s tokens instead).
    /// Fails, writing nothing, if a bulk op may still be reading them.
    pub fn write_async(&self, offset: u32, data: &[u8], at: Loc) -> Result<(), FaultKind> {
        self.check_async_reads(offset, data.len() as u32, at)?;
        self.bytes.borrow_mut()[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        let mut shadow = self.shadow.borrow_mut();
        for g in offset / GRANULE..(offset + data.len() as u32).div_ceil(GRANULE) {
            let gr = &mut shadow[g as usize];
            gr.written = true;
            gr.write = EMPTY;
        }
        Ok(())
    }

    /// Whether every byte of `offset .. offset + size` was written by someone.
    pub fn is_written(&self, offset: u32, size: u32) -> bool {
        let shadow = self.shadow.borrow();
        (offset / GRANULE..(offset + size).div_ceil(GRANULE)).all(|g| shadow[g as usize].written)
    }
}
