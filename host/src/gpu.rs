//! The GPU backend on `cust`: context, module from the embedded PTX, one stream, launches.

use crate::context::DeviceInfo;
use crate::error::{Error, Result, is_sticky};
use cust::context::{Context as CuContext, CurrentContext};
use cust::device::{Device, DeviceAttribute};
use cust::error::CudaError;
use cust::module::Module;
use cust::stream::{Stream, StreamFlags};
use gpu_kernels::emu::LaunchConfig;
use std::ffi::c_void;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Above this, a kernel must opt in to more dynamic shared memory (CUDA's static limit).
const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

/// The file name under [`crate::CUBIN_DIR_ENV`] of the cubin made from `arch`'s PTX `text`.
/// It carries a hash (FNV-1a, 64 bits) of the text, so a cubin assembled from other PTX (an
/// older build) is never loaded in place of this build's kernels.
pub fn cubin_file_name(arch: &str, text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{arch}-{h:016x}.cubin")
}

/// The prebuilt cubin for `arch`'s PTX `text`, when [`crate::CUBIN_DIR_ENV`] names a folder
/// holding it.
fn prebuilt_cubin(arch: &str, text: &str) -> Option<Vec<u8>> {
    let dir = std::env::var_os(crate::CUBIN_DIR_ENV)?;
    std::fs::read(Path::new(&dir).join(cubin_file_name(arch, text))).ok()
}

/// One stream on a shared device context. Handles made by [`Gpu::fork`] share the CUDA
/// context, the module and the fault record, each with its own stream.
pub(crate) struct Gpu {
    pub info: DeviceInfo,
    // Field order matters for drop: the stream before the shared module and context.
    stream: Stream,
    shared: Arc<Shared>,
}

struct Shared {
    // Field order matters for drop: the module before the context.
    module: Module,
    ctx: CuContext,
    /// The most recent kernel launched on any stream, to name it when a later call reports a
    /// fault (faults are per CUDA context, not per stream).
    last_kernel: Mutex<&'static str>,
}

fn cuda(call: &'static str) -> impl Fn(CudaError) -> Error {
    move |code| match code {
        CudaError::OutOfMemory => Error::OutOfMemory { bytes: 0, memory: "device" },
        code => Error::Cuda { call, code },
    }
}

/// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, which cust 0.3's safe enum lacks.
fn shared_optin(device: &Device) -> Option<u32> {
    let mut v = 0i32;
    let attr = cust::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN;
    // SAFETY: writes one i32 for a valid device handle.
    let r = unsafe { cust::sys::cuDeviceGetAttribute(&mut v, attr, device.as_raw()) };
    (r == cust::sys::cudaError_enum::CUDA_SUCCESS && v > 0).then_some(v as u32)
}

impl Gpu {
    pub fn open(ptx: &'static [(&'static str, &'static str)]) -> Result<Gpu> {
        cust::init(cust::CudaFlags::empty()).map_err(|e| Error::NoDevice { reason: e.to_string() })?;
        let count = Device::num_devices().map_err(|e| Error::NoDevice { reason: e.to_string() })?;
        if count == 0 {
            return Err(Error::NoDevice { reason: "the driver reports 0 devices".into() });
        }
        let device = Device::get_device(0).map_err(|e| Error::NoDevice { reason: e.to_string() })?;
        let attr = |a| device.get_attribute(a).map_err(cuda("cuDeviceGetAttribute"));
        let name = device.name().map_err(cuda("cuDeviceGetName"))?;
        let major = attr(DeviceAttribute::ComputeCapabilityMajor)?;
        let minor = attr(DeviceAttribute::ComputeCapabilityMinor)?;
        let cc = major * 10 + minor;
        // The embedded archs the device can run, newest first: `sm_XY` runs on compute
        // capability XY and newer, the arch-specific `sm_XYa` only on XY itself.
        let candidates: Vec<(&'static str, &'static str)> = ptx
            .iter()
            .rev()
            .filter(|(a, _)| {
                let specific = a.ends_with('a');
                a.trim_start_matches("sm_")
                    .trim_end_matches('a')
                    .parse::<i32>()
                    .is_ok_and(|n| if specific { n == cc } else { n <= cc })
            })
            .copied()
            .collect();
        if candidates.is_empty() {
            return Err(Error::UnsupportedDevice { device: name.clone(), major, minor });
        }
        let ctx = CuContext::new(device).map_err(cuda("cuCtxCreate"))?;
        CurrentContext::set_current(&ctx).map_err(cuda("cuCtxSetCurrent"))?;
        // A driver older than an arch's PTX ISA refuses that module (sm_90a is PTX 8.3, CUDA
        // 12.3+): the next older arch then runs everything but the kernels that need the newer
        // one, which their launchers refuse by name.
        // A prebuilt cubin of an arch goes first; should the driver refuse it, its PTX follows.
        let mut first_err = None;
        let mut loaded = None;
        'archs: for (arch, text) in candidates {
            let cubin = prebuilt_cubin(arch, text);
            let attempts = cubin.as_deref().map(|c| (Some(c), true)).into_iter().chain([(None, false)]);
            for (bytes, prebuilt) in attempts {
                let module = match bytes {
                    Some(c) => Module::from_cubin(c, &[]),
                    None => Module::from_ptx(text, &[]),
                };
                match module {
                    Ok(m) => {
                        loaded = Some((arch, m, prebuilt));
                        break 'archs;
                    }
                    Err(code) => {
                        first_err.get_or_insert(Error::ModuleLoad { arch, code });
                    }
                }
            }
        }
        let Some((arch, module, prebuilt_cubin)) = loaded else {
            return Err(first_err.expect("at least one candidate was tried"));
        };
        // A blocking stream: ordered with the legacy stream that cust's synchronous copies use.
        let stream = Stream::new(StreamFlags::DEFAULT, None).map_err(cuda("cuStreamCreate"))?;
        let info = DeviceInfo {
            name,
            major,
            minor,
            sm_count: attr(DeviceAttribute::MultiprocessorCount)?,
            total_memory: device.total_memory().map_err(cuda("cuDeviceTotalMem"))?,
            clock_khz: attr(DeviceAttribute::ClockRate)?,
            memory_clock_khz: attr(DeviceAttribute::MemoryClockRate)?,
            memory_bus_bits: attr(DeviceAttribute::GlobalMemoryBusWidth)?,
            driver_version: cust::CudaApiVersion::get().map(|v| v.major() * 1000 + v.minor() * 10).unwrap_or(0),
            max_shared_optin: shared_optin(&device).unwrap_or(DEFAULT_SHARED_LIMIT),
            ptx_arch: arch,
            prebuilt_cubin,
        };
        Ok(Gpu { info, stream, shared: Arc::new(Shared { module, ctx, last_kernel: Mutex::new("(none)") }) })
    }

    /// Another handle on the same device context and module, with its own stream.
    pub fn fork(&self) -> Result<Gpu> {
        self.enter()?;
        let stream = Stream::new(StreamFlags::DEFAULT, None).map_err(cuda("cuStreamCreate"))?;
        Ok(Gpu { info: self.info.clone(), stream, shared: self.shared.clone() })
    }

    /// Makes this context current on the calling thread (CUDA contexts are per thread).
    pub fn enter(&self) -> Result<()> {
        CurrentContext::set_current(&self.shared.ctx).map_err(cuda("cuCtxSetCurrent"))
    }

    fn fault_or(&self, call: &'static str, code: CudaError) -> Error {
        if is_sticky(code) {
            let kernel = *self.shared.last_kernel.lock().unwrap_or_else(|p| p.into_inner());
            Error::DeviceFault { kernel, code }
        } else {
            cuda(call)(code)
        }
    }

    pub fn launch<P: Copy>(&self, name: &'static str, cfg: LaunchConfig, params: P) -> Result<()> {
        self.enter()?;
        let func =
            self.shared.module.get_function(name).map_err(|code| Error::Cuda { call: "cuModuleGetFunction", code })?;
        if cfg.shared_bytes > DEFAULT_SHARED_LIMIT {
            // SAFETY: a plain attribute set on a valid function handle; the size was checked
            // against the device's opt-in limit by Context::launch.
            let r = unsafe {
                cust::sys::cuFuncSetAttribute(
                    func.to_raw(),
                    cust::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    cfg.shared_bytes as i32,
                )
            };
            if r != cust::sys::cudaError_enum::CUDA_SUCCESS {
                return Err(Error::invalid(
                    name,
                    format!("the driver refused {} bytes of dynamic shared memory ({r:?})", cfg.shared_bytes),
                ));
            }
        }
        *self.shared.last_kernel.lock().unwrap_or_else(|p| p.into_inner()) = name;
        let mut p = params;
        let args = [&mut p as *mut P as *mut c_void];
        let g = cfg.grid;
        let b = cfg.block;
        // SAFETY: `P` is the kernel's own #[repr(C)] parameter struct (KernelDef<P> ties the
        // type to the entry point), passed by value as its single `.param`; the views inside it
        // were made by the op's launcher from live buffers of this context, whose sizes it checked.
        unsafe { self.stream.launch(&func, (g.x, g.y, g.z), (b.x, b.y, b.z), cfg.shared_bytes, &args) }
            .map_err(|code| self.fault_or("cuLaunchKernel", code))
    }

    pub fn synchronize(&self) -> Result<()> {
        self.enter()?;
        self.stream.synchronize().map_err(|code| self.fault_or("cuStreamSynchronize", code))
    }

    pub fn map_err(&self, call: &'static str) -> impl Fn(CudaError) -> Error + '_ {
        move |code| self.fault_or(call, code)
    }
}

impl Gpu {
    /// Copies `bytes` from `src` to `dst` (device addresses) on the stream.
    pub fn copy_d2d(&self, dst: usize, src: usize, bytes: usize) -> Result<()> {
        use cust::memory::{AsyncCopyDestination, DevicePointer, DeviceSlice};
        self.enter()?;
        // SAFETY: both ranges come from views of live buffers of this context (checked by the
        // caller), each at least `bytes` long; the copy is ordered on this context's stream.
        unsafe {
            let mut d = DeviceSlice::<u8>::from_raw_parts_mut(DevicePointer::from_raw(dst as u64), bytes);
            let s = DeviceSlice::<u8>::from_raw_parts(DevicePointer::from_raw(src as u64), bytes);
            d.async_copy_from(&s, &self.stream)
        }
        .map_err(self.map_err("cuMemcpyDtoDAsync"))
    }

    /// Sets `bytes` bytes at device address `dst` to `value` on the stream.
    pub fn memset(&self, dst: usize, value: u8, bytes: usize) -> Result<()> {
        use cust::memory::{DevicePointer, DeviceSlice};
        self.enter()?;
        // SAFETY: the range comes from a live buffer of this context, `bytes` long.
        unsafe {
            let mut d = DeviceSlice::<u8>::from_raw_parts_mut(DevicePointer::from_raw(dst as u64), bytes);
            d.set_8_async(value, &self.stream)
        }
        .map_err(self.map_err("cuMemsetD8Async"))
    }

    /// Runs `f` `warmup` times, then `reps` times between two events each, calling `between`
    /// (untimed) before each timed run. Returns each timed run's milliseconds.
    pub fn time_runs(
        &self,
        warmup: usize,
        reps: usize,
        mut between: impl FnMut() -> Result<()>,
        mut f: impl FnMut() -> Result<()>,
    ) -> Result<Vec<f64>> {
        use cust::event::{Event, EventFlags};
        self.enter()?;
        for _ in 0..warmup {
            f()?;
        }
        let ev = |_| Event::new(EventFlags::DEFAULT).map_err(cuda("cuEventCreate"));
        let starts: Vec<Event> = (0..reps).map(ev).collect::<Result<_>>()?;
        let ends: Vec<Event> = (0..reps).map(ev).collect::<Result<_>>()?;
        for i in 0..reps {
            between()?;
            starts[i].record(&self.stream).map_err(self.map_err("cuEventRecord"))?;
            f()?;
            ends[i].record(&self.stream).map_err(self.map_err("cuEventRecord"))?;
        }
        self.synchronize()?;
        (0..reps)
            .map(|i| {
                ends[i].elapsed_time_f32(&starts[i]).map(|ms| ms as f64).map_err(self.map_err("cuEventElapsedTime"))
            })
            .collect()
    }

    /// L2 size in bytes, for sizing the flush buffer.
    pub fn l2_bytes(&self) -> usize {
        Device::get_device(0)
            .and_then(|d| d.get_attribute(DeviceAttribute::L2CacheSize))
            .map(|v| v.max(0) as usize)
            .unwrap_or(64 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::cubin_file_name;

    #[test]
    fn cubin_names_carry_the_arch_and_change_with_any_byte_of_the_ptx() {
        let ptx = ".version 8.3\n.target sm_90a\n.visible .entry k() { ret; }\n";
        let name = cubin_file_name("sm_90a", ptx);
        assert!(name.starts_with("sm_90a-") && name.ends_with(".cubin"), "{name}");
        assert_eq!(name, cubin_file_name("sm_90a", ptx), "the name is a function of arch and text");
        assert_ne!(name, cubin_file_name("sm_90", ptx));
        assert_ne!(name, cubin_file_name("sm_90a", &ptx.replace("ret", "exit")));
        assert_ne!(name, cubin_file_name("sm_90a", &ptx[1..]));
    }
}
