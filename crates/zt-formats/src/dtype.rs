//! Storage types (`dtype`) and logical types (`type`), and how they fit together.

use std::fmt;

use zt_container::{Error, Result};

/// One of the 13 storage primitives. The dtype alone fixes the byte width of an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE 754 binary64.
    F64,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16: the upper half of a binary32.
    BF16,
    /// Two's complement 64-bit.
    I64,
    /// Two's complement 32-bit.
    I32,
    /// Two's complement 16-bit.
    I16,
    /// Two's complement 8-bit.
    I8,
    /// Unsigned 64-bit.
    U64,
    /// Unsigned 32-bit.
    U32,
    /// Unsigned 16-bit.
    U16,
    /// Unsigned 8-bit.
    U8,
    /// One byte, `0x00` false, `0x01` true.
    Bool,
}

impl DType {
    /// Every storage type, in the spec's order.
    pub const ALL: [DType; 13] = [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U64,
        DType::U32,
        DType::U16,
        DType::U8,
        DType::Bool,
    ];

    /// The v1 spelling (`"f32"`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::I16 => "i16",
            DType::I8 => "i8",
            DType::U64 => "u64",
            DType::U32 => "u32",
            DType::U16 => "u16",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }

    /// The v0.1 spelling (`"float32"`).
    pub fn long_name(self) -> &'static str {
        match self {
            DType::F64 => "float64",
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I64 => "int64",
            DType::I32 => "int32",
            DType::I16 => "int16",
            DType::I8 => "int8",
            DType::U64 => "uint64",
            DType::U32 => "uint32",
            DType::U16 => "uint16",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }

    /// Parses the v1 spelling.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == s)
    }

    /// Parses the v0.1 spelling, and the short one too (some writers used it).
    pub fn from_long_name(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|d| d.long_name() == s)
            .or_else(|| Self::from_name(s))
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
    }

    /// Whether this is an unsigned integer type.
    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::U64 | DType::U32 | DType::U16 | DType::U8)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A logical type: what the storage elements mean, when that differs from the dtype.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogicalType {
    /// OCP FP8 E4M3, finite only (NaN = 0x7F/0xFF), stored as u8.
    F8E4M3Fn,
    /// OCP FP8 E5M2, IEEE-like with infinities, stored as u8.
    F8E5M2,
    /// AMD FP8 E4M3 with unsigned zero (NaN = 0x80), stored as u8.
    F8E4M3Fnuz,
    /// AMD FP8 E5M2 with unsigned zero (NaN = 0x80), stored as u8.
    F8E5M2Fnuz,
    /// OCP MX scale E8M0 (PyTorch `float8_e8m0fnu`): an exponent alone, `2^(code - 127)`,
    /// no sign, no zero, NaN = 0xFF; stored as u8.
    F8E8M0,
    /// OCP MX FP4 E2M1: 4 bits, packed two per u8, low nibble first (PyTorch
    /// `float4_e2m1fn_x2`); `n` elements take `ceil(n / 2)` bytes.
    F4E2M1,
    /// OCP MX FP6 E2M3: 6 bits, bit-packed into u8 (four elements in three bytes), lowest
    /// bits first as ONNX packs FLOAT6 (element `i` is bits `6i..6i + 6` of the little-endian
    /// bit stream); `n` elements take `ceil(6n / 8)` bytes.
    F6E2M3,
    /// OCP MX FP6 E3M2: 6 bits, bit-packed into u8 like [`LogicalType::F6E2M3`].
    F6E3M2,
    /// Signed 4-bit integers (ONNX `INT4`), packed two per u8, low nibble first; `n` elements
    /// take `ceil(n / 2)` bytes.
    I4,
    /// Unsigned 4-bit integers (ONNX `UINT4`), packed like [`LogicalType::I4`].
    U4,
    /// Signed 2-bit integers (ONNX `INT2`, -2..=1), packed four per u8, lowest bits first:
    /// element `4k + j` is bits `2j..2j + 2` of byte `k`; `n` elements take `ceil(n / 4)`
    /// bytes.
    I2,
    /// Unsigned 2-bit integers (ONNX `UINT2`, 0..=3), packed like [`LogicalType::I2`].
    U2,
    /// NormalFloat 4 (QLoRA's NF4; OpenVINO `nf4`): 4-bit codes packed like
    /// [`LogicalType::I4`], each the index of one of sixteen fixed values in `[-1, 1]`
    /// ([`crate::fp8::nf4_to_f32`]).
    Nf4,
    /// Interleaved `[re, im]` f32 pairs.
    Complex64,
    /// Interleaved `[re, im]` f64 pairs.
    Complex128,
    /// A type this library does not know; elements are read as the raw dtype.
    Unknown(String),
}

impl LogicalType {
    /// Parses a `type` name; unknown names are kept.
    pub fn parse(s: &str) -> Self {
        match s {
            "f8_e4m3fn" => LogicalType::F8E4M3Fn,
            "f8_e5m2" => LogicalType::F8E5M2,
            "f8_e4m3fnuz" => LogicalType::F8E4M3Fnuz,
            "f8_e5m2fnuz" => LogicalType::F8E5M2Fnuz,
            "f8_e8m0" => LogicalType::F8E8M0,
            "f4_e2m1" => LogicalType::F4E2M1,
            "f6_e2m3" => LogicalType::F6E2M3,
            "f6_e3m2" => LogicalType::F6E3M2,
            "i4" => LogicalType::I4,
            "u4" => LogicalType::U4,
            "i2" => LogicalType::I2,
            "u2" => LogicalType::U2,
            "nf4" => LogicalType::Nf4,
            "complex64" => LogicalType::Complex64,
            "complex128" => LogicalType::Complex128,
            other => LogicalType::Unknown(other.to_owned()),
        }
    }

    /// The `type` name.
    pub fn name(&self) -> &str {
        match self {
            LogicalType::F8E4M3Fn => "f8_e4m3fn",
            LogicalType::F8E5M2 => "f8_e5m2",
            LogicalType::F8E4M3Fnuz => "f8_e4m3fnuz",
            LogicalType::F8E5M2Fnuz => "f8_e5m2fnuz",
            LogicalType::F8E8M0 => "f8_e8m0",
            LogicalType::F4E2M1 => "f4_e2m1",
            LogicalType::F6E2M3 => "f6_e2m3",
            LogicalType::F6E3M2 => "f6_e3m2",
            LogicalType::I4 => "i4",
            LogicalType::U4 => "u4",
            LogicalType::I2 => "i2",
            LogicalType::U2 => "u2",
            LogicalType::Nf4 => "nf4",
            LogicalType::Complex64 => "complex64",
            LogicalType::Complex128 => "complex128",
            LogicalType::Unknown(s) => s,
        }
    }

    /// The dtype this type must be stored as; `None` for unknown types.
    pub fn required_dtype(&self) -> Option<DType> {
        match self {
            LogicalType::F8E4M3Fn
            | LogicalType::F8E5M2
            | LogicalType::F8E4M3Fnuz
            | LogicalType::F8E5M2Fnuz
            | LogicalType::F8E8M0
            | LogicalType::F4E2M1
            | LogicalType::F6E2M3
            | LogicalType::F6E3M2
            | LogicalType::I4
            | LogicalType::U4
            | LogicalType::I2
            | LogicalType::U2
            | LogicalType::Nf4 => Some(DType::U8),
            LogicalType::Complex64 => Some(DType::F32),
            LogicalType::Complex128 => Some(DType::F64),
            LogicalType::Unknown(_) => None,
        }
    }

    /// Storage elements per logical element (2 for complex).
    pub fn ratio(&self) -> u64 {
        match self {
            LogicalType::Complex64 | LogicalType::Complex128 => 2,
            _ => 1,
        }
    }

    /// Bits per element of the sub-byte types, which are packed into u8 bytes with no padding
    /// between elements, lowest bits first (`i2`, `u2`: 2; `f4_e2m1`, `i4`, `u4`, `nf4`: 4;
    /// `f6_e2m3`/`f6_e3m2`: 6); `None` for every other type.
    pub fn packed_bits(&self) -> Option<u64> {
        match self {
            LogicalType::I2 | LogicalType::U2 => Some(2),
            LogicalType::F4E2M1 | LogicalType::I4 | LogicalType::U4 | LogicalType::Nf4 => Some(4),
            LogicalType::F6E2M3 | LogicalType::F6E3M2 => Some(6),
            _ => None,
        }
    }

    /// Whether this is one of the four FP8 types of [`crate::fp8`] (not the E8M0 scale, which
    /// has no sign or mantissa: see [`crate::fp8::F8E8M0`]).
    pub fn is_fp8(&self) -> bool {
        matches!(
            self,
            LogicalType::F8E4M3Fn
                | LogicalType::F8E5M2
                | LogicalType::F8E4M3Fnuz
                | LogicalType::F8E5M2Fnuz
        )
    }
}

impl fmt::Display for LogicalType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one element of a component is: a storage type and, optionally, its meaning.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ElementType {
    /// Storage type.
    pub dtype: DType,
    /// Logical type, when the file gives one.
    pub logical: Option<LogicalType>,
}

impl ElementType {
    /// A plain storage type.
    pub fn plain(dtype: DType) -> Self {
        ElementType {
            dtype,
            logical: None,
        }
    }

    /// A logical type stored in its required dtype (`None` for unknown types).
    pub fn logical(t: LogicalType) -> Option<Self> {
        Some(ElementType {
            dtype: t.required_dtype()?,
            logical: Some(t),
        })
    }

    /// Resolves a component's `dtype` and `type` fields: the dtype must be one of the 13, and a
    /// known type must fit it (FP8 on u8, complex64 on f32, complex128 on f64).
    pub fn resolve(dtype: &str, logical: Option<&str>) -> Result<Self> {
        let d = DType::from_name(dtype)
            .ok_or_else(|| Error::invalid(format!("unknown dtype {dtype:?}")))?;
        Self::with_type(d, logical)
    }

    /// As [`ElementType::resolve`], for a dtype already parsed.
    pub fn with_type(dtype: DType, logical: Option<&str>) -> Result<Self> {
        let logical = logical.map(LogicalType::parse);
        if let Some(t) = &logical {
            if let Some(req) = t.required_dtype() {
                if req != dtype {
                    return Err(Error::invalid(format!(
                        "type {t} must be stored as dtype {req}, not {dtype}"
                    )));
                }
            }
        }
        Ok(ElementType { dtype, logical })
    }

    /// Storage elements per logical element.
    pub fn ratio(&self) -> u64 {
        self.logical.as_ref().map_or(1, LogicalType::ratio)
    }

    /// Bytes per logical element. For the packed sub-byte types (`i2`, `f4_e2m1`, `f6_*`) this is
    /// the storage byte, 1, which holds more than one element: use [`byte_size`] for the bytes
    /// of a count of elements, and [`ElementType::bits`].
    pub fn logical_size(&self) -> u64 {
        self.dtype.size() as u64 * self.ratio()
    }

    /// Bits per logical element: 2, 4 or 6 for the packed sub-byte types, else 8 times
    /// [`ElementType::logical_size`].
    pub fn bits(&self) -> u64 {
        self.logical
            .as_ref()
            .and_then(LogicalType::packed_bits)
            .unwrap_or(self.logical_size() * 8)
    }

    /// The type's name: the logical type if any, else the dtype.
    pub fn name(&self) -> &str {
        match &self.logical {
            Some(t) => t.name(),
            None => self.dtype.name(),
        }
    }

    /// The logical type name to put in a manifest, if any.
    pub fn type_field(&self) -> Option<&str> {
        self.logical.as_ref().map(LogicalType::name)
    }
}

/// Product of `shape` with checked arithmetic.
pub fn element_count(shape: &[u64]) -> Result<u64> {
    shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            Error::invalid(format!(
                "shape {shape:?} has more elements than fit in 64 bits"
            ))
        })
}

/// Bytes that `count` logical elements of `ty` take, with checked arithmetic: for the packed
/// sub-byte types `ceil(count * bits / 8)` (a last byte partly used), else
/// `count * logical_size`.
pub fn byte_size(count: u64, ty: &ElementType) -> Result<u64> {
    let bytes = match ty.logical.as_ref().and_then(LogicalType::packed_bits) {
        Some(bits) => count.checked_mul(bits).map(|b| b.div_ceil(8)),
        None => count.checked_mul(ty.logical_size()),
    };
    bytes.ok_or_else(|| {
        Error::invalid(format!(
            "{count} elements of {} take more bytes than fit in 64 bits",
            ty.name()
        ))
    })
}

/// The `bits`-wide codes packed in `bytes`, lowest bits first (as ONNX and OpenVINO pack the
/// sub-byte types): every whole code the bytes hold, so a caller that knows the element
/// count takes that many.
///
/// ```
/// let codes: Vec<u8> = zt_formats::packed_codes(&[0x21, 0x03], 4).collect();
/// assert_eq!(codes, [1, 2, 3, 0]);
/// ```
pub fn packed_codes(bytes: &[u8], bits: u64) -> impl Iterator<Item = u8> + '_ {
    let bits = bits.clamp(1, 8);
    let count = (bytes.len() as u64).saturating_mul(8) / bits;
    (0..count).map(move |i| {
        let bit = i * bits;
        let byte = |k: u64| usize::try_from(k).ok().and_then(|k| bytes.get(k)).copied();
        let pair = u16::from_le_bytes([byte(bit / 8).unwrap_or(0), byte(bit / 8 + 1).unwrap_or(0)]);
        ((pair >> (bit % 8)) & ((1u16 << bits) - 1)) as u8
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(DType::from_long_name(d.long_name()), Some(d));
        }
        assert_eq!(DType::from_name("float32"), None);
        assert_eq!(DType::from_long_name("f32"), Some(DType::F32));
    }

    #[test]
    fn types_must_fit_their_dtype() {
        assert!(ElementType::resolve("u8", Some("f8_e4m3fn")).is_ok());
        let e = ElementType::resolve("f32", Some("f8_e4m3fn")).unwrap_err();
        assert_eq!(
            e.message(),
            "type f8_e4m3fn must be stored as dtype u8, not f32"
        );
        assert!(ElementType::resolve("f64", Some("complex64")).is_err());
        let t = ElementType::resolve("f64", Some("complex128")).unwrap();
        assert_eq!(t.logical_size(), 16);
        let u = ElementType::resolve("i16", Some("my_type")).unwrap();
        assert_eq!(u.name(), "my_type");
        assert_eq!(u.logical_size(), 2);
        assert_eq!(
            ElementType::resolve("f31", None).unwrap_err().message(),
            "unknown dtype \"f31\""
        );
    }

    #[test]
    fn mx_types_are_u8_and_packed() {
        for (name, t, bits) in [
            ("f8_e8m0", LogicalType::F8E8M0, 8),
            ("f4_e2m1", LogicalType::F4E2M1, 4),
            ("f6_e2m3", LogicalType::F6E2M3, 6),
            ("f6_e3m2", LogicalType::F6E3M2, 6),
            ("i2", LogicalType::I2, 2),
            ("u2", LogicalType::U2, 2),
            ("nf4", LogicalType::Nf4, 4),
        ] {
            assert_eq!(LogicalType::parse(name), t);
            assert_eq!(t.name(), name);
            let e = ElementType::resolve("u8", Some(name)).unwrap();
            assert_eq!(e, ElementType::logical(t.clone()).unwrap());
            assert_eq!(e.bits(), bits);
            assert_eq!(e.logical_size(), 1);
            assert!(!t.is_fp8());
            assert_eq!(
                ElementType::resolve("i8", Some(name))
                    .unwrap_err()
                    .message(),
                format!("type {name} must be stored as dtype u8, not i8")
            );
        }
        let size = |n, t| byte_size(n, &ElementType::logical(t).unwrap()).unwrap();
        assert_eq!(size(5, LogicalType::F8E8M0), 5);
        // Two per byte, the last byte half used for an odd count.
        assert_eq!(size(4, LogicalType::F4E2M1), 2);
        assert_eq!(size(5, LogicalType::F4E2M1), 3);
        assert_eq!(size(0, LogicalType::F4E2M1), 0);
        // Four in three bytes.
        assert_eq!(size(4, LogicalType::F6E2M3), 3);
        assert_eq!(size(5, LogicalType::F6E3M2), 4);
        assert_eq!(size(1, LogicalType::F6E3M2), 1);
        // Four in a byte.
        assert_eq!(size(4, LogicalType::I2), 1);
        assert_eq!(size(5, LogicalType::U2), 2);
        assert_eq!(size(5, LogicalType::Nf4), 3);
        let f4 = ElementType::logical(LogicalType::F4E2M1).unwrap();
        assert!(byte_size(u64::MAX / 2, &f4).is_err());
        assert_eq!(
            byte_size(u64::MAX / 4, &f4).unwrap(),
            (u64::MAX / 4).div_ceil(2)
        );
    }

    #[test]
    fn sizes_are_checked() {
        assert_eq!(element_count(&[]).unwrap(), 1);
        assert_eq!(element_count(&[3, 0, 5]).unwrap(), 0);
        assert!(element_count(&[1 << 32, 1 << 32]).is_err());
        let f32t = ElementType::plain(DType::F32);
        assert!(
            byte_size(1 << 62, &f32t).is_err(),
            "shape [2^62] f32 must not wrap to 0 bytes"
        );
    }
}
