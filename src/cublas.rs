//! cuBLAS SGEMM, loaded at run time with `libloading`: the speed baseline of the GEMM
//! ladder. Nothing links against cuBLAS; without it the bench still runs and says so.
//!
//! The library is looked up as `$FERROKERN_CUBLAS` (a path), then `libcublas.so`,
//! `libcublas.so.13`, `libcublas.so.12`. The C signatures below are declared here from
//! cuBLAS's `cublas_api.h` (v2 API).

use crate::gemm::Gemm;
use crate::{BufMut, BufRef, Context, Error, Result};
use std::ffi::{c_int, c_void};

/// Environment variable: the path of the cuBLAS shared library to load first.
pub const CUBLAS_ENV: &str = "FERROKERN_CUBLAS";
const CANDIDATES: &[&str] = &["libcublas.so", "libcublas.so.13", "libcublas.so.12"];

type Handle = *mut c_void;
type Status = c_int;
/// `cublasOperation_t`: CUBLAS_OP_N = 0, CUBLAS_OP_T = 1.
type Op = c_int;
type CreateFn = unsafe extern "C" fn(*mut Handle) -> Status;
type DestroyFn = unsafe extern "C" fn(Handle) -> Status;
type SgemmFn = unsafe extern "C" fn(
    Handle,
    Op,
    Op,
    c_int,
    c_int,
    c_int,
    *const f32,
    *const f32,
    c_int,
    *const f32,
    c_int,
    *const f32,
    *mut f32,
    c_int,
) -> Status;

/// `cublasGemmEx`: typed inputs (`cudaDataType`), a compute type and an algorithm.
type GemmExFn = unsafe extern "C" fn(
    Handle,
    Op,
    Op,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
) -> Status;

/// `cudaDataType` values (library_types.h).
const CUDA_R_32F: c_int = 0;
const CUDA_R_16F: c_int = 2;
const CUDA_R_16BF: c_int = 14;
/// `CUBLAS_COMPUTE_32F` (cublas_api.h): f32 accumulation, as ferrokern's tensor-core GEMM.
const CUBLAS_COMPUTE_32F: c_int = 68;
/// `CUBLAS_GEMM_DEFAULT`: cuBLAS's heuristic picks the algorithm (tensor cores for 16-bit).
const CUBLAS_GEMM_DEFAULT: c_int = -1;

/// A loaded cuBLAS with one handle, on the GPU context current on this thread.
///
/// Stream: ferrokern's `Context` does not expose its raw stream, so the handle keeps
/// cuBLAS's default, the legacy stream. The Context's stream is a blocking stream (created
/// without `CU_STREAM_NON_BLOCKING`), so work on the two is ordered both ways, and the CUDA
/// events the bench records on the Context's stream bracket each cuBLAS call correctly.
pub struct Cublas {
    handle: Handle,
    destroy: DestroyFn,
    sgemm: SgemmFn,
    gemm_ex: Option<GemmExFn>,
    /// Where the library came from, for the bench's header.
    pub path: String,
    // Last: the symbols above point into the library, so it is dropped after `handle`.
    _lib: libloading::Library,
}

impl Cublas {
    /// Loads cuBLAS and creates a handle; `Err` says why not (no library, no GPU context).
    pub fn load(ctx: &Context) -> Result<Cublas> {
        const OP: &str = "cublas";
        if ctx.device_info().is_none() {
            return Err(Error::invalid(OP, "cuBLAS needs the GPU backend"));
        }
        let mut tried = Vec::new();
        let env = std::env::var(CUBLAS_ENV).ok().filter(|p| !p.is_empty());
        for path in env.iter().map(String::as_str).chain(CANDIDATES.iter().copied()) {
            // SAFETY: loading cuBLAS runs its initializers, which only set up the library.
            match unsafe { libloading::Library::new(path) } {
                Ok(lib) => return Self::with_library(lib, path),
                Err(e) => tried.push(format!("{path}: {e}")),
            }
        }
        Err(Error::invalid(OP, format!("cuBLAS not found (set {CUBLAS_ENV} to its path); tried {}", tried.join("; "))))
    }

    fn with_library(lib: libloading::Library, path: &str) -> Result<Cublas> {
        const OP: &str = "cublas";
        let sym = |name: &str| Error::invalid(OP, format!("{path} has no {name}"));
        // SAFETY: the types are cuBLAS's v2 C signatures (cublas_api.h); the copied function
        // pointers stay valid while `_lib` lives, which the struct guarantees.
        let (create, destroy, sgemm, gemm_ex) = unsafe {
            let create: CreateFn = *lib.get::<CreateFn>(b"cublasCreate_v2\0").map_err(|_| sym("cublasCreate_v2"))?;
            let destroy: DestroyFn =
                *lib.get::<DestroyFn>(b"cublasDestroy_v2\0").map_err(|_| sym("cublasDestroy_v2"))?;
            let sgemm: SgemmFn = *lib.get::<SgemmFn>(b"cublasSgemm_v2\0").map_err(|_| sym("cublasSgemm_v2"))?;
            let gemm_ex = lib.get::<GemmExFn>(b"cublasGemmEx\0").ok().map(|f| *f);
            (create, destroy, sgemm, gemm_ex)
        };
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: writes one handle; the GPU context is current on this thread (the caller's
        // Context made it current when it opened and on each call).
        let st = unsafe { create(&mut handle) };
        if st != 0 || handle.is_null() {
            return Err(Error::invalid(OP, format!("cublasCreate_v2 failed with status {st}")));
        }
        Ok(Cublas { handle, destroy, sgemm, gemm_ex, path: path.to_string(), _lib: lib })
    }

    /// `C = alpha op(A) op(B) + beta C`, row-major, one matrix (`g.batch == 1`), through
    /// column-major cuBLAS: a row-major matrix is its transpose in column-major, so cuBLAS
    /// computes `C^T = op(B)^T op(A)^T` with the operands swapped, same transposes and leading
    /// dimensions.
    pub fn sgemm(&self, g: &Gemm, a: BufRef<'_, f32>, b: BufRef<'_, f32>, c: BufMut<'_, f32>) -> Result<()> {
        const OP: &str = "cublas";
        if g.batch != 1 {
            return Err(Error::invalid(OP, "the cuBLAS baseline runs one matrix; pass batch = 1"));
        }
        g.check(a.len(), b.len(), c.len())?;
        if g.trans_c.is_t() {
            // C^T row-major is C column-major: cuBLAS's own layout, reached by the same swap.
            return self.sgemm(&g.swapped(), b, a, c);
        }
        let dims = [g.m, g.n, g.k, g.lda.max(1), g.ldb.max(1), g.ldc.max(1)];
        if dims.iter().any(|&d| d > i32::MAX as usize) {
            return Err(Error::invalid(OP, "cuBLAS takes 32-bit sizes and leading dimensions"));
        }
        let i = |v: usize| v as c_int;
        let (alpha, beta) = (g.alpha, g.beta);
        // SAFETY: the views are live device buffers of the GPU context (checked lengths above
        // cover every element the shape reaches); alpha and beta are host scalars, cuBLAS's
        // default pointer mode.
        let st = unsafe {
            (self.sgemm)(
                self.handle,
                g.trans_b.is_t() as Op,
                g.trans_a.is_t() as Op,
                i(g.n),
                i(g.m),
                i(g.k),
                &alpha,
                b.addr() as *const f32,
                i(g.ldb.max(1)),
                a.addr() as *const f32,
                i(g.lda.max(1)),
                &beta,
                c.addr() as *mut f32,
                i(g.ldc.max(1)),
            )
        };
        if st != 0 {
            return Err(Error::invalid(OP, format!("cublasSgemm_v2 failed with status {st}")));
        }
        Ok(())
    }
}

impl Cublas {
    /// The tensor-core baseline: `C (f32) = alpha A B + beta C` with 16-bit `A`, `B`
    /// (`T` = bf16 or f16), f32 compute, NN row-major, through `cublasGemmEx` with the same
    /// row-major trick as [`Cublas::sgemm`].
    pub fn gemm_ex<T: crate::gemm_tc::TcInput>(
        &self,
        g: &Gemm,
        a: BufRef<'_, T>,
        b: BufRef<'_, T>,
        c: BufMut<'_, f32>,
    ) -> Result<()> {
        const OP: &str = "cublas";
        let Some(gemm_ex) = self.gemm_ex else {
            return Err(Error::invalid(OP, format!("{} has no cublasGemmEx", self.path)));
        };
        if g.batch != 1 || g.trans_a.is_t() || g.trans_b.is_t() || g.trans_c.is_t() {
            return Err(Error::invalid(OP, "the cublasGemmEx baseline runs one NN matrix with row-major C"));
        }
        let dims = [g.m, g.n, g.k, g.lda.max(1), g.ldb.max(1), g.ldc.max(1)];
        if dims.iter().any(|&d| d > i32::MAX as usize) {
            return Err(Error::invalid(OP, "cuBLAS takes 32-bit sizes and leading dimensions"));
        }
        let need = |rows: usize, ld: usize, cols: usize| if rows == 0 { 0 } else { (rows - 1) * ld + cols };
        if a.len() < need(g.m, g.lda, g.k) || b.len() < need(g.k, g.ldb, g.n) || c.len() < need(g.m, g.ldc, g.n) {
            return Err(Error::invalid(OP, "a view is shorter than the shape and leading dimensions need"));
        }
        let ty = if T::DTYPE == crate::DType::BF16 { CUDA_R_16BF } else { CUDA_R_16F };
        let i = |v: usize| v as c_int;
        let (alpha, beta) = (g.alpha, g.beta);
        // SAFETY: live device views of the GPU context whose lengths cover the shape (checked
        // above); the element types match `ty` and CUDA_R_32F; alpha and beta are host f32
        // scalars, as CUBLAS_COMPUTE_32F expects.
        let st = unsafe {
            gemm_ex(
                self.handle,
                0,
                0,
                i(g.n),
                i(g.m),
                i(g.k),
                &alpha as *const f32 as *const c_void,
                b.addr() as *const c_void,
                ty,
                i(g.ldb.max(1)),
                a.addr() as *const c_void,
                ty,
                i(g.lda.max(1)),
                &beta as *const f32 as *const c_void,
                c.addr() as *mut c_void,
                CUDA_R_32F,
                i(g.ldc.max(1)),
                CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT,
            )
        };
        if st != 0 {
            return Err(Error::invalid(OP, format!("cublasGemmEx failed with status {st}")));
        }
        Ok(())
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: the handle came from cublasCreate_v2 and is destroyed once.
        unsafe { (self.destroy)(self.handle) };
    }
}
