//! The Context: one handle over the GPU or the emulator, chosen at creation.

use crate::buffer::{BufMut, BufRef, DeviceBuffer, Mem, Scalar};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use gpu_kernels::KernelDef;
use gpu_kernels::device::GlobalMut;
use gpu_kernels::emu::{self, LaunchConfig};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Which backend to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// The GPU when one is usable, the emulator otherwise.
    #[default]
    Auto,
    /// The GPU, or an error saying why not.
    Gpu,
    /// The CPU emulator.
    Emulator,
}

impl FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "gpu" => Ok(BackendChoice::Gpu),
            "emulator" | "emu" => Ok(BackendChoice::Emulator),
            other => Err(format!("unknown backend `{other}`: use auto, gpu or emulator")),
        }
    }
}

impl BackendChoice {
    /// Reads `FERROKERN_BACKEND` (auto when unset).
    pub fn from_env() -> Result<Self> {
        match std::env::var(crate::BACKEND_ENV) {
            Ok(v) if !v.is_empty() => v.parse().map_err(|m| Error::invalid("FERROKERN_BACKEND", m)),
            _ => Ok(BackendChoice::Auto),
        }
    }
}

/// The backend a Context runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Gpu,
    Emulator,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Gpu => "gpu",
            Backend::Emulator => "emulator",
        })
    }
}

/// What the GPU reports about itself.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub name: String,
    pub major: i32,
    pub minor: i32,
    pub sm_count: i32,
    pub total_memory: usize,
    /// SM clock, kHz.
    pub clock_khz: i32,
    /// Memory clock, kHz.
    pub memory_clock_khz: i32,
    pub memory_bus_bits: i32,
    /// The driver's CUDA version, e.g. 13000 for 13.0.
    pub driver_version: i32,
    /// Largest dynamic shared memory per block after opt-in, bytes.
    pub max_shared_optin: u32,
    /// The embedded PTX architecture loaded for this device.
    pub ptx_arch: &'static str,
    /// Whether that arch's code came from a prebuilt cubin ([`crate::CUBIN_DIR_ENV`]) rather
    /// than from the driver compiling the PTX.
    pub prebuilt_cubin: bool,
}

/// A handle to a backend. Cloning is cheap and shares the backend, stream included.
///
/// `Context` is `Send` and `Sync` (checked at compile time below). Launches through one
/// handle from several threads go to its one stream in the order they are made. For work
/// that should overlap, give each thread its own stream with [`Context::fork`]: forks share
/// the device context, the loaded kernels, the buffers (a buffer made through one fork can
/// be used with any other), and the fault record (a fault poisons every fork, as it poisons
/// the CUDA context). Transfers to and from the host are ordered after the work of every
/// fork (the streams are blocking streams, synchronized with CUDA's legacy stream).
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// Identifies the device context: equal for a context and its forks.
    pub id: u64,
    /// Scratch for kernels' temporary results (partial sums): one allocation per handle,
    /// grown on demand. Reusing it without waiting is safe because everything launched
    /// through a handle runs in order on its one stream; forks have their own. Declared
    /// before `gpu` so it is freed while the CUDA context still exists.
    pub scratch: Mutex<(Mem, usize)>,
    /// Launch constants (TMA tensor maps): one allocation per handle (its size: at least
    /// [`CONSTANTS_BYTES`], grown on demand) and the bytes it holds now, so an unchanged set is
    /// not copied again.
    pub constants: Mutex<(Mem, usize, Vec<u8>)>,
    pub gpu: Option<Gpu>,
    /// Set by the first device fault; returned by every later call on every fork.
    pub fault: Arc<Mutex<Option<Error>>>,
    /// The emulator's dynamic shared memory per block (`emu::MAX_SHARED_BYTES`, Hopper's, unless
    /// [`Context::emulator_with_shared_limit`] chose a smaller device's); unused on the GPU.
    pub emu_shared_limit: u32,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Context>();
    send_sync::<DeviceBuffer<f32>>();
};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Context {
    /// Opens a backend. `ptx` is the embedded (arch, PTX) table, oldest arch first; the GPU
    /// backend loads the newest one the device supports.
    pub fn new(choice: BackendChoice, ptx: &'static [(&'static str, &'static str)]) -> Result<Self> {
        let gpu = match choice {
            BackendChoice::Emulator => None,
            BackendChoice::Gpu => Some(Gpu::open(ptx)?),
            BackendChoice::Auto => match Gpu::open(ptx) {
                Ok(g) => Some(g),
                Err(Error::NoDevice { .. }) | Err(Error::UnsupportedDevice { .. }) => None,
                Err(e) => return Err(e),
            },
        };
        Ok(Context {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                gpu,
                fault: Arc::default(),
                scratch: Mutex::new((Mem::Empty, 0)),
                constants: Mutex::new((Mem::Empty, 0, Vec::new())),
                emu_shared_limit: emu::MAX_SHARED_BYTES,
            }),
        })
    }

    /// The CPU emulator, which is always available. It allows Hopper's 227 KB of dynamic shared
    /// memory per block.
    pub fn emulator() -> Self {
        Self::emulator_limited(emu::MAX_SHARED_BYTES)
    }

    fn emulator_limited(emu_shared_limit: u32) -> Self {
        Context {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                gpu: None,
                fault: Arc::default(),
                scratch: Mutex::new((Mem::Empty, 0)),
                constants: Mutex::new((Mem::Empty, 0, Vec::new())),
                emu_shared_limit,
            }),
        }
    }

    /// The CPU emulator with a smaller GPU's limit on dynamic shared memory per block (for
    /// example 101,376 bytes on sm_86 and sm_89, 166,912 on A100): launchers that choose a
    /// kernel by the device's limit, or refuse one past it, are tested on it without that GPU.
    /// `bytes` must be at least 48 KB (every CUDA GPU's) and at most Hopper's 227 KB.
    pub fn emulator_with_shared_limit(bytes: u32) -> Result<Self> {
        if !(48 * 1024..=emu::MAX_SHARED_BYTES).contains(&bytes) {
            return Err(Error::invalid(
                "Context::emulator_with_shared_limit",
                format!(
                    "{bytes} bytes: pass a limit from 49152 (48 KB) to {} (Hopper's 227 KB)",
                    emu::MAX_SHARED_BYTES
                ),
            ));
        }
        Ok(Self::emulator_limited(bytes))
    }

    /// A handle with its own stream on the same device context (see the type's docs). On the
    /// emulator, where launches complete before returning, it is a plain clone.
    pub fn fork(&self) -> Result<Context> {
        self.check_healthy()?;
        let gpu = match self.gpu() {
            Some(g) => Some(g.fork()?),
            None => return Ok(self.clone()),
        };
        Ok(Context {
            inner: Arc::new(Inner {
                id: self.inner.id,
                gpu,
                fault: self.inner.fault.clone(),
                scratch: Mutex::new((Mem::Empty, 0)),
                constants: Mutex::new((Mem::Empty, 0, Vec::new())),
                emu_shared_limit: self.inner.emu_shared_limit,
            }),
        })
    }

    pub fn backend(&self) -> Backend {
        if self.inner.gpu.is_some() { Backend::Gpu } else { Backend::Emulator }
    }

    /// The GPU's properties; `None` on the emulator.
    pub fn device_info(&self) -> Option<&DeviceInfo> {
        self.inner.gpu.as_ref().map(|g| &g.info)
    }

    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }

    pub(crate) fn gpu(&self) -> Option<&Gpu> {
        self.inner.gpu.as_ref()
    }

    /// Returns the context's sticky fault, if a kernel faulted earlier.
    pub fn check_healthy(&self) -> Result<()> {
        match &*self.inner.fault.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Records `e` as the sticky fault when it is one, and returns it.
    pub(crate) fn note(&self, e: Error) -> Error {
        if let Error::DeviceFault { .. } = e {
            let mut f = self.inner.fault.lock().unwrap_or_else(|p| p.into_inner());
            if f.is_none() {
                *f = Some(e.clone());
            }
            return f.clone().expect("set above");
        }
        e
    }

    /// Allocates `len` elements. GPU memory is uninitialized; emulator memory is 0xFF bytes.
    pub fn alloc<T: Scalar>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        self.check_healthy()?;
        DeviceBuffer::new(self, len)
    }

    /// Allocates and fills a buffer from host data.
    pub fn upload<T: Scalar>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut b = self.alloc::<T>(data.len())?;
        b.copy_from_host(data)?;
        Ok(b)
    }

    /// Largest dynamic shared memory a launch may ask for on this backend.
    pub fn max_shared_bytes(&self) -> u32 {
        match self.gpu() {
            Some(g) => g.info.max_shared_optin,
            None => self.inner.emu_shared_limit,
        }
    }

    /// Launches `def` on this backend. Checks the launch shape against the hardware limits
    /// first; on the GPU the launch is asynchronous (errors of the kernel itself surface at the
    /// next synchronizing call, naming the kernel), on the emulator it completes before return.
    pub fn launch<P: Copy + Send + Sync + 'static>(
        &self,
        def: &KernelDef<P>,
        cfg: LaunchConfig,
        params: P,
    ) -> Result<()> {
        self.check_healthy()?;
        emu::check_launch(&cfg).map_err(|m| Error::invalid(def.name, m))?;
        // The build compiled the kernel for at most this many threads (`.maxntid`).
        if let Some(max) = gpu_kernels::launch_threads(def.name)
            && cfg.block.count() > max as u64
        {
            return Err(Error::invalid(
                def.name,
                format!(
                    "a block of {} threads, but its PTX declares at most {max} (gpu_kernels::launch_threads): the launcher and the family's table disagree",
                    cfg.block.count()
                ),
            ));
        }
        if cfg.shared_bytes > self.max_shared_bytes() {
            return Err(Error::invalid(
                def.name,
                format!(
                    "{} bytes of dynamic shared memory exceed this device's {} per block",
                    cfg.shared_bytes,
                    self.max_shared_bytes()
                ),
            ));
        }
        match self.gpu() {
            Some(g) => g.launch(def.name, cfg, params).map_err(|e| self.note(e)),
            None => emu::launch(def, &cfg, params).map(|_| ()).map_err(Error::from),
        }
    }

    /// Waits for all launched work; surfaces a kernel fault as [`Error::DeviceFault`].
    pub fn synchronize(&self) -> Result<()> {
        self.check_healthy()?;
        match self.gpu() {
            Some(g) => g.synchronize().map_err(|e| self.note(e)),
            None => Ok(()),
        }
    }

    /// Copies `src` into `dst` (equal lengths) on the device: the baseline that memory-bound
    /// kernels are measured against.
    pub fn copy<T: Scalar>(&self, src: BufRef<'_, T>, mut dst: BufMut<'_, T>) -> Result<()> {
        src.check_context(self, "copy")?;
        dst.check_context(self, "copy")?;
        if src.len() != dst.len() {
            return Err(Error::invalid(
                "copy",
                format!(
                    "source has {} elements, destination {}; copy between views of equal length",
                    src.len(),
                    dst.len()
                ),
            ));
        }
        let bytes = src.len() * T::DTYPE.size();
        if bytes == 0 {
            return Ok(());
        }
        match self.gpu() {
            Some(g) => g.copy_d2d(dst.addr(), src.addr(), bytes).map_err(|e| self.note(e)),
            None => {
                let host = src.to_host()?;
                dst.copy_from_host(&host)
            }
        }
    }

    /// GPU only: runs `f` `warmup` times, then `reps` timed runs (CUDA events around each),
    /// flushing L2 before each timed run when `flush_l2` (a memset of twice the L2 size,
    /// untimed) so that small inputs are not served from cache. Returns milliseconds per run.
    pub fn time_runs(
        &self,
        warmup: usize,
        reps: usize,
        flush_l2: bool,
        f: impl FnMut() -> Result<()>,
    ) -> Result<Vec<f64>> {
        self.check_healthy()?;
        let Some(g) = self.gpu() else {
            return Err(Error::invalid("time_runs", "timing needs the GPU backend; the emulator does not model time"));
        };
        let flush = if flush_l2 { Some(self.alloc::<u8>(2 * g.l2_bytes())?) } else { None };
        let between = || match &flush {
            Some(b) => g.memset(b.as_view().addr(), 0, b.len()),
            None => Ok(()),
        };
        g.time_runs(warmup, reps, between, f).map_err(|e| self.note(e))
    }

    /// Runs `f` with a scratch view of at least `words` 32-bit words that kernels launched by
    /// `f` on this handle may use for temporary results. Its contents are undefined on entry
    /// (on the emulator: all 0xFF, NaN in every float type, on every call). Launchers use it for partial sums, so a call allocates nothing and waits for nothing.
    pub fn with_scratch<R>(&self, words: usize, f: impl FnOnce(GlobalMut<u32>) -> Result<R>) -> Result<R> {
        self.check_healthy()?;
        let bytes = words
            .checked_mul(4)
            .ok_or_else(|| Error::invalid("scratch", format!("{words} words overflow the address space")))?;
        let mut scratch = self.inner.scratch.lock().unwrap_or_else(|p| p.into_inner());
        if scratch.1 < bytes {
            // Freeing the old allocation waits for the kernels still using it (cuMemFree
            // synchronizes), so growing is safe.
            *scratch = (Mem::alloc(self, bytes.next_power_of_two().max(4096))?, bytes.next_power_of_two().max(4096));
        }
        if let Mem::Host(h) = &scratch.0 {
            // SAFETY: the allocation holds at least `bytes`; emulator launches complete before
            // returning, so no kernel is using it. Poisoned (NaN in every float type) on every
            // call, so a kernel that reads scratch it did not write shows it even when an
            // earlier call left the right values there.
            unsafe { std::ptr::write_bytes(h.ptr.as_ptr(), 0xFF, bytes) };
        }
        // SAFETY: the allocation holds at least `words` u32 and lives in this handle until it is
        // replaced by a larger one (after its users finished) or the handle is dropped; the lock
        // keeps other threads from launching with it meanwhile, and this handle's stream orders
        // the launches that use it.
        let view = unsafe { GlobalMut::from_raw_parts(scratch.0.addr() as *mut u32, words) };
        f(view)
    }

    /// Runs `f` with the device address of a copy of `bytes` (the first byte 256-byte aligned)
    /// that kernels launched by `f` on this handle may read: launch constants too large for
    /// kernel parameters, such as TMA tensor maps; with no bytes, `f` gets 0. One buffer per
    /// handle holds them: [`CONSTANTS_BYTES`] at first, grown to the next power of two when a
    /// larger set comes (freeing the old buffer waits for the kernels still reading it:
    /// cuMemFree synchronizes). The copy is made only when `bytes` differ from what the buffer
    /// holds. Safe to reuse without waiting: on the GPU the copy is a synchronous host-to-device
    /// copy on the legacy stream, which waits for the work already launched on this context's
    /// (blocking) streams.
    pub fn with_constants<R>(&self, bytes: &[u8], f: impl FnOnce(u64) -> Result<R>) -> Result<R> {
        self.check_healthy()?;
        if bytes.is_empty() {
            return f(0);
        }
        let mut c = self.inner.constants.lock().unwrap_or_else(|p| p.into_inner());
        if c.1 < bytes.len() {
            let size = bytes.len().next_power_of_two().max(CONSTANTS_BYTES);
            *c = (Mem::Empty, 0, Vec::new());
            *c = (Mem::alloc(self, size)?, size, Vec::new());
        }
        if c.2 != bytes {
            // Zero past the set, so nothing of a longer earlier set stays readable.
            let mut padded = vec![0u8; c.1];
            padded[..bytes.len()].copy_from_slice(bytes);
            match &mut c.0 {
                Mem::Gpu(b) => {
                    use cust::memory::CopyDestination;
                    b.copy_from(&padded[..]).map_err(|code| self.note(Error::Cuda { call: "cuMemcpyHtoD", code }))?;
                }
                Mem::Host(h) => {
                    // SAFETY: the allocation holds c.1 bytes; emulator launches complete
                    // before returning, so no kernel is reading it now.
                    unsafe { std::ptr::copy_nonoverlapping(padded.as_ptr(), h.ptr.as_ptr(), c.1) }
                }
                Mem::Empty => unreachable!("allocated above"),
            }
            c.2 = bytes.to_vec();
        }
        f(c.0.addr() as u64)
    }
}

/// Bytes of a handle's launch-constant buffer when first made ([`Context::with_constants`]).
pub const CONSTANTS_BYTES: usize = 4096;
