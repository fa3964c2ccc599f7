//! TMA tensor maps for kernels that load tiles with `cp.async.bulk.tensor`: one
//! [`TmaDesc`] per operand, encoded for the backend that runs the kernel. On the GPU that is
//! the driver's opaque 128-byte `CUtensorMap`, from `cuTensorMapEncodeTiled` (exported by
//! libcuda since CUDA 12, not wrapped by cust 0.3: resolved at run time here); on the
//! emulator it is the `TmaDesc` itself, which `emu::hopper` reads.

use crate::{BufRef, Context, Error, Result, Scalar};
pub use gpu_kernels::device::hopper::{TENSOR_MAP_BYTES, TmaDesc};
use std::ffi::c_void;
use std::sync::OnceLock;

/// A 2D row-major tensor of 16-bit elements seen through `view`: `rows x cols`, `ld` elements
/// between row starts, loaded in `box_dims` boxes (`[cols, rows]`) with a `swizzle`-byte
/// pattern. Checks what TMA requires; the caller checked that the view holds the tensor.
pub fn desc_2d<T: Scalar>(
    op: &'static str,
    view: BufRef<'_, T>,
    rows: usize,
    cols: usize,
    ld: usize,
    box_dims: [u32; 2],
    swizzle: u32,
) -> Result<TmaDesc> {
    if !view.addr().is_multiple_of(16) || !(ld * T::DTYPE.size()).is_multiple_of(16) {
        return Err(Error::invalid(
            op,
            format!(
                "TMA needs a 16-byte aligned base and a row pitch that is a multiple of 16 bytes (got address {:#x}, leading dimension {ld}); use a version without TMA",
                view.addr()
            ),
        ));
    }
    let d = desc_3d(op, view, [cols, rows, 1], ld, rows * ld, [box_dims[0], box_dims[1], 1], swizzle)?;
    Ok(TmaDesc { rank: 2, ..d })
}

/// A 3D tensor of 16-bit elements seen through `view`: `dims` elements along the contiguous
/// dimension, the rows and the planes, `row_ld` elements between row starts and `plane_ld`
/// between plane starts, loaded in `box_dims` boxes. A box never reads across planes: rows
/// past `dims[1]` are zeros. Checks what TMA requires; the caller checked that the view
/// holds the tensor.
pub fn desc_3d<T: Scalar>(
    op: &'static str,
    view: BufRef<'_, T>,
    dims: [usize; 3],
    row_ld: usize,
    plane_ld: usize,
    box_dims: [u32; 3],
    swizzle: u32,
) -> Result<TmaDesc> {
    let elem = T::DTYPE.size();
    let (row_bytes, plane_bytes) = (row_ld * elem, plane_ld * elem);
    if !view.addr().is_multiple_of(16) || !row_bytes.is_multiple_of(16) || !plane_bytes.is_multiple_of(16) {
        return Err(Error::invalid(
            op,
            format!(
                "TMA needs a 16-byte aligned base and row and plane pitches that are multiples of 16 bytes (got address {:#x}, a row pitch of {row_ld} and a plane pitch of {plane_ld} elements); use a version without TMA",
                view.addr()
            ),
        ));
    }
    if dims.iter().any(|&n| n == 0 || n > u32::MAX as usize) || plane_bytes >= 1 << 40 {
        return Err(Error::invalid(op, format!("a {dims:?} tensor is outside TMA's limits")));
    }
    Ok(TmaDesc {
        magic: TmaDesc::MAGIC,
        base: view.addr() as u64,
        dims: dims.map(|n| n as u64),
        strides: [row_bytes as u64, plane_bytes as u64],
        box_dims,
        elem_bytes: elem as u32,
        swizzle,
        rank: 3,
    })
}

/// `CUresult cuTensorMapEncodeTiled(CUtensorMap*, CUtensorMapDataType, cuuint32_t rank,
/// void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
/// const cuuint32_t* boxDim, const cuuint32_t* elementStrides, CUtensorMapInterleave,
/// CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill)`.
type EncodeTiled = unsafe extern "C" fn(
    *mut u8,
    u32,
    u32,
    *mut c_void,
    *const u64,
    *const u64,
    *const u32,
    *const u32,
    u32,
    u32,
    u32,
    u32,
) -> i32;

// The driver's enum values (cuda.h): data type UINT16 = 1 (TMA moves bits: bf16 and f16
// alike), interleave NONE = 0, swizzle NONE/32B/64B/128B = 0/1/2/3, L2 promotion 256B = 3,
// out-of-bounds fill NONE = 0 (zeros).
const DATA_TYPE_UINT16: u32 = 1;
const L2_PROMOTION_256B: u32 = 3;

fn encode_tiled() -> Result<EncodeTiled> {
    static LIB: OnceLock<std::result::Result<(libloading::Library, EncodeTiled), String>> = OnceLock::new();
    let r = LIB.get_or_init(|| {
        // SAFETY: loading the CUDA driver library, already loaded by cust in this process.
        let lib = unsafe { libloading::Library::new("libcuda.so.1") }.map_err(|e| e.to_string())?;
        // SAFETY: the symbol has the C signature declared in `EncodeTiled` (cuda.h, CUDA 12+).
        let f = unsafe { lib.get::<EncodeTiled>(b"cuTensorMapEncodeTiled\0") }.map_err(|e| e.to_string())?;
        let f = *f;
        Ok((lib, f))
    });
    match r {
        Ok((_, f)) => Ok(*f),
        Err(e) => Err(Error::invalid(
            "tma",
            format!("cuTensorMapEncodeTiled is not available ({e}); TMA kernels need a CUDA 12 or newer driver"),
        )),
    }
}

/// The 128 bytes the kernel reads for `d` on `ctx`'s backend.
pub fn encode(ctx: &Context, d: &TmaDesc) -> Result<[u8; TENSOR_MAP_BYTES]> {
    let mut out = [0u8; TENSOR_MAP_BYTES];
    if ctx.device_info().is_none() {
        // SAFETY: TmaDesc is a repr(C) struct of integers, smaller than the slot.
        let bytes =
            unsafe { std::slice::from_raw_parts(d as *const TmaDesc as *const u8, std::mem::size_of::<TmaDesc>()) };
        out[..bytes.len()].copy_from_slice(bytes);
        return Ok(out);
    }
    let swizzle = match d.swizzle {
        0 => 0,
        32 => 1,
        64 => 2,
        128 => 3,
        s => return Err(Error::invalid("tma", format!("swizzle {s} is not 0, 32, 64 or 128 bytes"))),
    };
    if d.elem_bytes != 2 {
        return Err(Error::invalid("tma", "only 16-bit elements are encoded"));
    }
    let f = encode_tiled()?;
    let rank = d.rank;
    if rank != 2 && rank != 3 {
        return Err(Error::invalid("tma", format!("tensor rank {rank} is not 2 or 3")));
    }
    // The driver reads `rank` dims and box sizes and `rank - 1` strides (the first dimension's
    // is the element size).
    let dims = d.dims;
    let strides = d.strides;
    let box_dims = d.box_dims;
    let elem_strides = [1u32; 3];
    // CUtensorMap is 64-byte aligned: encode into an aligned buffer.
    #[repr(C, align(64))]
    struct Aligned([u8; TENSOR_MAP_BYTES]);
    let mut map = Aligned([0; TENSOR_MAP_BYTES]);
    // SAFETY: every pointer names a live array at least as long as the rank (2 or 3) implies;
    // the output is a 64-byte aligned 128-byte buffer, as CUtensorMap is.
    let r = unsafe {
        f(
            map.0.as_mut_ptr(),
            DATA_TYPE_UINT16,
            rank,
            d.base as *mut c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            box_dims.as_ptr(),
            elem_strides.as_ptr(),
            0,
            swizzle,
            L2_PROMOTION_256B,
            0,
        )
    };
    if r != 0 {
        return Err(Error::invalid(
            "tma",
            format!("cuTensorMapEncodeTiled refused {d:?} (CUresult {r}); check alignment, strides and box sizes"),
        ));
    }
    out.copy_from_slice(&map.0);
    Ok(out)
}
