//! Storage element types: f32, f16 and bf16 are stored as themselves and computed in f32.

use half::{bf16, f16};

/// A storage type a kernel can load, convert to f32, and store back.
///
/// Conversions round to nearest even on both targets (`cvt.rn` on the GPU, `half` on the host),
/// so the emulator and the GPU produce the same bits for the same f32 value.
pub trait Element: Copy + Send + Sync + 'static {
    /// The dtype name used by the CLI and in messages (`f32`, `f16`, `bf16`).
    const NAME: &'static str;
    /// The bit pattern of this type's poison value: a signalling NaN that no arithmetic produces,
    /// used to prove every output element was written.
    const POISON_BITS: u32;
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
}

impl Element for f32 {
    const NAME: &'static str = "f32";
    const POISON_BITS: u32 = 0x7FA5_A5A5;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl Element for f16 {
    const NAME: &'static str = "f16";
    const POISON_BITS: u32 = 0x7D5A;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        #[cfg(target_arch = "nvptx64")]
        {
            super::ptx::f16_to_f32(self.to_bits())
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            self.to_f32()
        }
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        #[cfg(target_arch = "nvptx64")]
        {
            f16::from_bits(super::ptx::f32_to_f16(v))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            f16::from_f32(v)
        }
    }
}

impl Element for bf16 {
    const NAME: &'static str = "bf16";
    const POISON_BITS: u32 = 0x7FA5;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        // Exact on both targets: bf16 is the top half of an f32.
        f32::from_bits((self.to_bits() as u32) << 16)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        #[cfg(target_arch = "nvptx64")]
        {
            bf16::from_bits(super::ptx::f32_to_bf16(v))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            bf16::from_f32(v)
        }
    }
}
