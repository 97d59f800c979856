//! Rust types that zTensor elements can be read into and written from.

use crate::fp8::{F8E4M3Fn, F8E4M3Fnuz, F8E5M2Fnuz, F8E5M2, F8E8M0};
use crate::{DType, ElementType, LogicalType};

/// A complex number stored as interleaved `[re, im]`, the layout of `complex64` (`Complex<f32>`)
/// and `complex128` (`Complex<f64>`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[repr(C)]
pub struct Complex<T> {
    /// Real part.
    pub re: T,
    /// Imaginary part.
    pub im: T,
}

// SAFETY: `Complex<T>` is `repr(C)` with two fields of the same Pod type, so it has no padding,
// every bit pattern is valid, and all-zeros is a valid value.
unsafe impl bytemuck::Zeroable for Complex<f32> {}
unsafe impl bytemuck::Pod for Complex<f32> {}
unsafe impl bytemuck::Zeroable for Complex<f64> {}
unsafe impl bytemuck::Pod for Complex<f64> {}

/// A Rust type whose values are a zTensor element type, byte for byte (little-endian).
///
/// Reading `T` from an object requires the object's element type to be `T::element_type()`
/// exactly: `f32` does not read an FP8 or complex64 object; use the FP8 newtypes or
/// [`Complex<f32>`] for those.
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// Storage type.
    const DTYPE: DType;
    /// The logical type, for types that have one.
    fn logical() -> Option<LogicalType> {
        None
    }
    /// The element type.
    fn element_type() -> ElementType {
        ElementType {
            dtype: Self::DTYPE,
            logical: Self::logical(),
        }
    }
}

macro_rules! plain {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$d;
        }
    )*};
}
plain!(
    f64 => F64, f32 => F32, half::f16 => F16, half::bf16 => BF16,
    i64 => I64, i32 => I32, i16 => I16, i8 => I8,
    u64 => U64, u32 => U32, u16 => U16, u8 => U8,
);

macro_rules! logical {
    ($($t:ty => $d:ident, $l:ident),* $(,)?) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn logical() -> Option<LogicalType> {
                Some(LogicalType::$l)
            }
        }
    )*};
}
logical!(
    F8E4M3Fn => U8, F8E4M3Fn, F8E5M2 => U8, F8E5M2, F8E4M3Fnuz => U8, F8E4M3Fnuz,
    F8E5M2Fnuz => U8, F8E5M2Fnuz, F8E8M0 => U8, F8E8M0, Complex<f32> => F32, Complex64,
    Complex<f64> => F64, Complex128,
);

/// Whether an object of element type `stored` can be read as `T`. An unknown logical type
/// falls back to its dtype, as the spec allows.
pub fn element_matches<T: Element>(stored: &ElementType) -> bool {
    if stored.dtype != T::DTYPE {
        return false;
    }
    match (&stored.logical, T::logical()) {
        (None, None) | (Some(LogicalType::Unknown(_)), None) => true,
        (Some(a), Some(b)) => *a == b,
        _ => false,
    }
}
