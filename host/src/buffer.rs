//! Typed device buffers and the views launchers pass to kernels.

use crate::context::Context;
use crate::error::{Error, Result};
use cust::memory::{CopyDestination, DeviceBuffer as CuBuffer, DeviceSlice};
use gpu_kernels::device::{Global, GlobalMut};
use half::{bf16, f16};
use std::alloc::Layout;
use std::marker::PhantomData;
use std::ops::Range;
use std::ptr::NonNull;

/// Element types a buffer can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
    U32,
    I32,
    U8,
}

impl DType {
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::U32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 => 1,
        }
    }
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::U8 => "u8",
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A plain-old-data element type: every bit pattern is a valid value, no padding.
pub trait Scalar: Copy + Send + Sync + 'static + sealed::Sealed {
    const DTYPE: DType;
}

macro_rules! scalar {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Scalar for $t { const DTYPE: DType = DType::$d; }
    )*};
}
scalar!(f32 => F32, f16 => F16, bf16 => BF16, u32 => U32, i32 => I32, u8 => U8);

fn as_bytes<T: Scalar>(s: &[T]) -> &[u8] {
    // SAFETY: Scalar types are plain old data without padding; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
}

fn as_bytes_mut<T: Scalar>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: as above, and every byte pattern written back is a valid T.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u8, std::mem::size_of_val(s)) }
}

/// Emulator memory: one raw allocation, aligned like a CUDA allocation (256 bytes) so that
/// alignment-dependent paths are taken identically on both backends.
pub(crate) struct HostAlloc {
    pub(crate) ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the allocation is owned uniquely by its DeviceBuffer; access discipline follows the
// buffer's borrows (views) exactly as for device memory.
unsafe impl Send for HostAlloc {}
// SAFETY: as above.
unsafe impl Sync for HostAlloc {}

impl HostAlloc {
    fn new(bytes: usize) -> Option<HostAlloc> {
        let layout = Layout::from_size_align(bytes.max(1), 256).ok()?;
        // SAFETY: layout has nonzero size.
        let p = unsafe { std::alloc::alloc(layout) };
        let ptr = NonNull::new(p)?;
        // SAFETY: freshly allocated, `bytes` long. 0xFF is NaN in every float type, so an
        // unwritten output shows up.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0xFF, layout.size()) };
        Some(HostAlloc { ptr, layout })
    }
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

pub(crate) enum Mem {
    Gpu(CuBuffer<u8>),
    Host(HostAlloc),
    Empty,
}

impl Mem {
    /// `bytes` of device memory (GPU) or emulator memory, uninitialized on the GPU.
    pub(crate) fn alloc(ctx: &Context, bytes: usize) -> Result<Mem> {
        if bytes == 0 {
            return Ok(Mem::Empty);
        }
        Ok(match ctx.gpu() {
            Some(g) => {
                g.enter()?;
                // SAFETY: u8 has no invalid bit patterns; the memory is written before the
                // library reads it (uploads, or kernel outputs), and callers are told it is
                // uninitialized.
                Mem::Gpu(unsafe { CuBuffer::<u8>::uninitialized(bytes) }.map_err(|code| match code {
                    cust::error::CudaError::OutOfMemory => Error::OutOfMemory { bytes, memory: "device" },
                    code => g.map_err("cuMemAlloc")(code),
                })?)
            }
            None => Mem::Host(HostAlloc::new(bytes).ok_or(Error::OutOfMemory { bytes, memory: "host (emulator)" })?),
        })
    }

    /// The first byte's address (device address on the GPU).
    pub(crate) fn addr(&self) -> usize {
        match self {
            Mem::Gpu(b) => b.as_device_ptr().as_raw() as usize,
            Mem::Host(h) => h.ptr.as_ptr() as usize,
            Mem::Empty => 0,
        }
    }
}

/// `len` elements of `T` in device memory (GPU) or emulator memory.
pub struct DeviceBuffer<T: Scalar> {
    ctx: Context,
    mem: Mem,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Scalar> DeviceBuffer<T> {
    pub(crate) fn new(ctx: &Context, len: usize) -> Result<Self> {
        let bytes = len.checked_mul(T::DTYPE.size()).ok_or_else(|| {
            Error::invalid(
                "alloc",
                format!("{len} elements of {} overflow the address space; allocate fewer elements", T::DTYPE.name()),
            )
        })?;
        let mem = Mem::alloc(ctx, bytes)?;
        Ok(DeviceBuffer { ctx: ctx.clone(), mem, len, _t: PhantomData })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }

    fn base_addr(&self) -> usize {
        self.mem.addr()
    }

    fn check_range(&self, op: &'static str, r: &Range<usize>) -> Result<()> {
        if r.start > r.end || r.end > self.len {
            return Err(Error::invalid(op, range_message(r, "buffer", self.len)));
        }
        Ok(())
    }

    /// The whole buffer, read-only.
    pub fn as_view(&self) -> BufRef<'_, T> {
        BufRef { buf: self, offset: 0, len: self.len }
    }

    /// The whole buffer, writable.
    pub fn as_view_mut(&mut self) -> BufMut<'_, T> {
        let len = self.len;
        BufMut { buf: self, offset: 0, len }
    }

    /// Elements `range`, read-only.
    pub fn view(&self, range: Range<usize>) -> Result<BufRef<'_, T>> {
        self.check_range("view", &range)?;
        Ok(BufRef { buf: self, offset: range.start, len: range.end - range.start })
    }

    /// Elements `range`, writable.
    pub fn view_mut(&mut self, range: Range<usize>) -> Result<BufMut<'_, T>> {
        self.check_range("view_mut", &range)?;
        Ok(BufMut { buf: self, offset: range.start, len: range.end - range.start })
    }

    /// Overwrites the whole buffer; `data.len()` must equal `len()`.
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        self.as_view_mut().copy_from_host(data)
    }

    /// Downloads the whole buffer (waiting for launched work first).
    pub fn to_host(&self) -> Result<Vec<T>> {
        self.as_view().to_host()
    }

    fn copy_in(&mut self, offset: usize, data: &[T]) -> Result<()> {
        self.ctx.check_healthy()?;
        let bytes = as_bytes(data);
        let start = offset * T::DTYPE.size();
        match &mut self.mem {
            Mem::Empty => Ok(()),
            Mem::Host(h) => {
                // SAFETY: start + bytes.len() <= allocation size (checked by the view), and the
                // &mut borrow of the buffer excludes any concurrent use.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), h.ptr.as_ptr().add(start), bytes.len()) };
                Ok(())
            }
            Mem::Gpu(b) => {
                let g = self.ctx.gpu().expect("GPU memory implies a GPU context");
                g.enter()?;
                let mut dst: DeviceSlice<u8> = b.index(start..start + bytes.len());
                dst.copy_from(bytes).map_err(|c| self.ctx.note(g.map_err("cuMemcpyHtoD")(c)))
            }
        }
    }

    fn copy_out(&self, offset: usize, out: &mut [T]) -> Result<()> {
        self.ctx.synchronize()?;
        let start = offset * T::DTYPE.size();
        let bytes = as_bytes_mut(out);
        match &self.mem {
            Mem::Empty => Ok(()),
            Mem::Host(h) => {
                // SAFETY: in bounds as above; no kernel runs concurrently on the emulator.
                unsafe { std::ptr::copy_nonoverlapping(h.ptr.as_ptr().add(start), bytes.as_mut_ptr(), bytes.len()) };
                Ok(())
            }
            Mem::Gpu(b) => {
                let g = self.ctx.gpu().expect("GPU memory implies a GPU context");
                let src: DeviceSlice<u8> = b.index(start..start + bytes.len());
                src.copy_to(bytes).map_err(|c| self.ctx.note(g.map_err("cuMemcpyDtoH")(c)))
            }
        }
    }
}

fn range_message(r: &Range<usize>, what: &str, len: usize) -> String {
    if r.start > r.end {
        format!("range {}..{} is inverted; give start <= end", r.start, r.end)
    } else {
        format!("range {}..{} is outside a {what} of {len} elements; keep the range within 0..{len}", r.start, r.end)
    }
}

/// A read-only view of part of a buffer, as launchers take it.
#[derive(Clone, Copy)]
pub struct BufRef<'a, T: Scalar> {
    buf: &'a DeviceBuffer<T>,
    offset: usize,
    len: usize,
}

/// A writable view of part of a buffer.
pub struct BufMut<'a, T: Scalar> {
    buf: &'a mut DeviceBuffer<T>,
    offset: usize,
    len: usize,
}

impl<'a, T: Scalar> BufRef<'a, T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The first element's address (device address on the GPU).
    pub fn addr(&self) -> usize {
        self.buf.base_addr() + self.offset * T::DTYPE.size()
    }
    pub fn context(&self) -> &Context {
        &self.buf.ctx
    }
    /// Errors unless this view belongs to `ctx`.
    pub fn check_context(&self, ctx: &Context, op: &'static str) -> Result<()> {
        if self.buf.ctx.id() == ctx.id() { Ok(()) } else { Err(Error::WrongContext { op }) }
    }
    /// A shorter view of the same elements, `range` relative to this one.
    pub fn slice(&self, range: Range<usize>) -> Result<BufRef<'a, T>> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::invalid("slice", range_message(&range, "view", self.len)));
        }
        Ok(BufRef { buf: self.buf, offset: self.offset + range.start, len: range.end - range.start })
    }
    /// The kernel-side view. Launchers only.
    pub fn global(&self) -> Global<T> {
        // SAFETY: the address range is this view's, inside a live allocation of the buffer's
        // context, and the borrow keeps it alive for the launch (launches on the emulator
        // complete before returning; on the GPU the buffer's drop waits on the context).
        unsafe { Global::from_raw_parts(self.addr() as *const T, self.len) }
    }
    pub fn to_host(&self) -> Result<Vec<T>> {
        let mut v = Vec::with_capacity(self.len);
        // Fill with a copy of nothing meaningful first: Scalar has no invalid bit patterns.
        v.resize(self.len, bytemuck_zero::<T>());
        self.buf.copy_out(self.offset, &mut v)?;
        Ok(v)
    }
}

fn bytemuck_zero<T: Scalar>() -> T {
    // SAFETY: Scalar types are plain old data for which all-zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

impl<'a, T: Scalar> BufMut<'a, T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn addr(&self) -> usize {
        self.buf.base_addr() + self.offset * T::DTYPE.size()
    }
    pub fn context(&self) -> &Context {
        &self.buf.ctx
    }
    pub fn check_context(&self, ctx: &Context, op: &'static str) -> Result<()> {
        if self.buf.ctx.id() == ctx.id() { Ok(()) } else { Err(Error::WrongContext { op }) }
    }
    /// The same elements, read-only.
    pub fn as_ref(&self) -> BufRef<'_, T> {
        BufRef { buf: self.buf, offset: self.offset, len: self.len }
    }
    /// A shorter writable view, `range` relative to this one.
    pub fn reborrow(&mut self, range: Range<usize>) -> Result<BufMut<'_, T>> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::invalid("reborrow", range_message(&range, "view", self.len)));
        }
        Ok(BufMut { buf: self.buf, offset: self.offset + range.start, len: range.end - range.start })
    }
    /// The kernel-side view. Launchers only.
    pub fn global_mut(&mut self) -> GlobalMut<T> {
        // SAFETY: as in `BufRef::global`; the &mut borrow makes this the only live view.
        unsafe { GlobalMut::from_raw_parts(self.addr() as *mut T, self.len) }
    }
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        if data.len() != self.len {
            return Err(Error::invalid(
                "copy_from_host",
                format!(
                    "{} host elements for a view of {}; pass exactly {} elements, or a view of {}",
                    data.len(),
                    self.len,
                    self.len,
                    data.len()
                ),
            ));
        }
        self.buf.copy_in(self.offset, data)
    }
    pub fn to_host(&self) -> Result<Vec<T>> {
        self.as_ref().to_host()
    }
}
