//! The four FP8 formats: exact decoding of all 256 codes, and encoding from `f32` with
//! round-to-nearest-even. Also exact decoding of the OCP MX element types: the E8M0 scale
//! ([`F8E8M0`], [`e8m0_to_f32`]), FP4 E2M1 ([`f4_e2m1_to_f32`], [`unpack_f4_e2m1`]) and the
//! two FP6 codes ([`f6_e2m3_to_f32`], [`f6_e3m2_to_f32`]); and the 4-bit NormalFloat codes
//! ([`nf4_to_f32`]).
//!
//! | format | exponent bias | infinities | NaN codes | negative zero |
//! |---|---|---|---|---|
//! | `f8_e4m3fn` (OCP) | 7 | none | `0x7F`, `0xFF` | yes |
//! | `f8_e5m2` (OCP) | 15 | `0x7C`, `0xFC` | exponent 31, mantissa ≠ 0 | yes |
//! | `f8_e4m3fnuz` (AMD) | 8 | none | `0x80` only | no |
//! | `f8_e5m2fnuz` (AMD) | 16 | none | `0x80` only | no |
//!
//! Encoding follows ml_dtypes' `astype`: values round to nearest, ties to even; a value whose
//! rounding overflows the largest finite code becomes infinity where the format has one and NaN
//! where it does not (or, with saturation, the largest finite value of that sign).

use crate::LogicalType;

/// One FP8 format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fp8Format {
    /// OCP E4M3, finite.
    E4M3Fn,
    /// OCP E5M2.
    E5M2,
    /// AMD E4M3, unsigned zero.
    E4M3Fnuz,
    /// AMD E5M2, unsigned zero.
    E5M2Fnuz,
}

impl Fp8Format {
    /// All four formats.
    pub const ALL: [Fp8Format; 4] = [
        Fp8Format::E4M3Fn,
        Fp8Format::E5M2,
        Fp8Format::E4M3Fnuz,
        Fp8Format::E5M2Fnuz,
    ];

    /// The format of a logical type, if it is FP8.
    pub fn of(t: &LogicalType) -> Option<Self> {
        match t {
            LogicalType::F8E4M3Fn => Some(Fp8Format::E4M3Fn),
            LogicalType::F8E5M2 => Some(Fp8Format::E5M2),
            LogicalType::F8E4M3Fnuz => Some(Fp8Format::E4M3Fnuz),
            LogicalType::F8E5M2Fnuz => Some(Fp8Format::E5M2Fnuz),
            _ => None,
        }
    }

    /// The logical type.
    pub fn logical_type(self) -> LogicalType {
        match self {
            Fp8Format::E4M3Fn => LogicalType::F8E4M3Fn,
            Fp8Format::E5M2 => LogicalType::F8E5M2,
            Fp8Format::E4M3Fnuz => LogicalType::F8E4M3Fnuz,
            Fp8Format::E5M2Fnuz => LogicalType::F8E5M2Fnuz,
        }
    }

    const fn mantissa_bits(self) -> u32 {
        match self {
            Fp8Format::E4M3Fn | Fp8Format::E4M3Fnuz => 3,
            Fp8Format::E5M2 | Fp8Format::E5M2Fnuz => 2,
        }
    }

    const fn bias(self) -> i32 {
        match self {
            Fp8Format::E4M3Fn => 7,
            Fp8Format::E5M2 => 15,
            Fp8Format::E4M3Fnuz => 8,
            Fp8Format::E5M2Fnuz => 16,
        }
    }

    const fn is_fnuz(self) -> bool {
        matches!(self, Fp8Format::E4M3Fnuz | Fp8Format::E5M2Fnuz)
    }

    /// The largest finite code of positive sign.
    const fn max_finite_code(self) -> u8 {
        match self {
            Fp8Format::E4M3Fn => 0x7E,
            Fp8Format::E5M2 => 0x7B,
            Fp8Format::E4M3Fnuz | Fp8Format::E5M2Fnuz => 0x7F,
        }
    }

    /// The NaN code this format's encoder produces for a NaN of the given sign.
    const fn nan_code(self, negative: bool) -> u8 {
        let s = if negative { 0x80 } else { 0 };
        match self {
            Fp8Format::E4M3Fn => 0x7F | s,
            Fp8Format::E5M2 => 0x7E | s,
            Fp8Format::E4M3Fnuz | Fp8Format::E5M2Fnuz => 0x80,
        }
    }

    /// Decodes one code exactly.
    pub fn decode(self, code: u8) -> f32 {
        let m = self.mantissa_bits();
        let negative = code & 0x80 != 0;
        let exp = i32::from((code & 0x7F) >> m);
        let mant = u32::from(code) & ((1 << m) - 1);
        let max_exp = (1 << (7 - m)) - 1;
        match self {
            Fp8Format::E4M3Fnuz | Fp8Format::E5M2Fnuz if code == 0x80 => return f32::NAN,
            Fp8Format::E4M3Fn if code & 0x7F == 0x7F => return f32::NAN,
            Fp8Format::E5M2 if exp == max_exp => {
                let v = if mant == 0 { f32::INFINITY } else { f32::NAN };
                return if negative { -v } else { v };
            }
            _ => {}
        }
        let bias = self.bias();
        let mag = if exp == 0 {
            mant as f32 * pow2(1 - bias - m as i32)
        } else {
            (((1 << m) + mant) as f32) * pow2(exp - bias - m as i32)
        };
        if negative {
            -mag
        } else {
            mag
        }
    }

    /// Encodes `x` with round-to-nearest-even. Overflow gives infinity (E5M2) or NaN (the
    /// others), as ml_dtypes does; see [`Fp8Format::encode_saturating`] for clamping.
    pub fn encode(self, x: f32) -> u8 {
        self.encode_impl(x, false)
    }

    /// Encodes `x` with round-to-nearest-even, clamping finite overflow and infinities to the
    /// largest finite value of the same sign. NaN stays NaN.
    pub fn encode_saturating(self, x: f32) -> u8 {
        self.encode_impl(x, true)
    }

    fn encode_impl(self, x: f32, saturate: bool) -> u8 {
        let negative = x.is_sign_negative();
        let sign = if negative { 0x80 } else { 0 };
        if x.is_nan() {
            return self.nan_code(negative);
        }
        let overflow = || {
            if saturate {
                self.max_finite_code() | sign
            } else if self == Fp8Format::E5M2 {
                0x7C | sign
            } else {
                self.nan_code(negative)
            }
        };
        if x.is_infinite() {
            return overflow();
        }
        let a = f64::from(x.abs());
        let m = self.mantissa_bits() as i32;
        let bias = self.bias();
        let code = if a == 0.0 {
            0u32
        } else {
            // a = f * 2^e with f in [1, 2): e is the unbiased exponent of a.
            let e = (a.log2().floor() as i32).clamp(-200, 200);
            let e = if pow2f64(e) > a {
                e - 1
            } else if pow2f64(e + 1) <= a {
                e + 1
            } else {
                e
            };
            let biased = e + bias;
            if biased >= 1 {
                // Normal: n counts quanta of 2^(e-m); n in [2^m, 2^(m+1)] after rounding.
                let n = (a / pow2f64(e - m)).round_ties_even();
                let n = n as u64;
                let big = (biased as u64) << m;
                (big + n - (1 << m)).min(0x1000) as u32
            } else {
                // Subnormal: quanta of 2^(1-bias-m); n == 2^m is the smallest normal.
                (a / pow2f64(1 - bias - m)).round_ties_even() as u32
            }
        };
        if code > u32::from(self.max_finite_code()) {
            return overflow();
        }
        if code == 0 && self.is_fnuz() {
            return 0; // no negative zero: -0 and tiny negatives become +0
        }
        code as u8 | sign
    }
}

fn pow2(e: i32) -> f32 {
    pow2f64(e) as f32
}

fn pow2f64(e: i32) -> f64 {
    2f64.powi(e)
}

macro_rules! fp8_type {
    ($(#[$doc:meta])* $name:ident, $fmt:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, bytemuck::Pod, bytemuck::Zeroable)]
        #[repr(transparent)]
        pub struct $name(pub u8);

        impl $name {
            /// The format.
            pub const FORMAT: Fp8Format = Fp8Format::$fmt;

            /// Decodes to `f32` exactly.
            pub fn to_f32(self) -> f32 {
                Self::FORMAT.decode(self.0)
            }

            /// Encodes with round-to-nearest-even (see [`Fp8Format::encode`]).
            pub fn from_f32(x: f32) -> Self {
                $name(Self::FORMAT.encode(x))
            }
        }
    };
}

fp8_type!(
    /// An OCP FP8 E4M3 (finite) value.
    F8E4M3Fn,
    E4M3Fn
);
fp8_type!(
    /// An OCP FP8 E5M2 value.
    F8E5M2,
    E5M2
);
fp8_type!(
    /// An AMD FP8 E4M3 value with unsigned zero.
    F8E4M3Fnuz,
    E4M3Fnuz
);
fp8_type!(
    /// An AMD FP8 E5M2 value with unsigned zero.
    F8E5M2Fnuz,
    E5M2Fnuz
);

// The OCP Microscaling (MX v1.0) element types: the E8M0 scale and the FP4/FP6 element
// codes. Decoding only; they have no sign-magnitude rounding rules worth an encoder here yet.

/// An OCP MX E8M0 scale (PyTorch `float8_e8m0fnu`, safetensors `F8_E8M0`): `2^(code - 127)`,
/// with no sign and no zero; `0xFF` is NaN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct F8E8M0(pub u8);

impl F8E8M0 {
    /// Decodes to `f32` exactly (see [`e8m0_to_f32`]).
    pub fn to_f32(self) -> f32 {
        e8m0_to_f32(self.0)
    }
}

/// Decodes an E8M0 code exactly: `2^(code - 127)`; `0x00` is `2^-127` (an f32 subnormal) and
/// `0xFF` is NaN.
pub fn e8m0_to_f32(code: u8) -> f32 {
    match code {
        0xFF => f32::NAN,
        0 => f32::from_bits(1 << 22),
        e => f32::from_bits(u32::from(e) << 23),
    }
}

/// Decodes an FP4 E2M1 code (the low 4 bits of `code`) exactly: sign, 2 exponent bits with
/// bias 1, 1 mantissa bit; the magnitudes are 0, 0.5, 1, 1.5, 2, 3, 4, 6. No infinities or
/// NaN.
pub fn f4_e2m1_to_f32(code: u8) -> f32 {
    const MAGNITUDES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let mag = MAGNITUDES[usize::from(code & 0x7)];
    if code & 0x8 != 0 {
        -mag
    } else {
        mag
    }
}

/// The sixteen values of NormalFloat 4 (NF4, from the QLoRA paper: quantiles of a normal
/// distribution scaled to `[-1, 1]`, with an exact zero), by code, as the f32 bit patterns
/// OpenVINO 2026.4's CPU plugin converts its `nf4` codes to (bitsandbytes' table, rounded to
/// f32).
const NF4_BITS: [u32; 16] = [
    0xbf80_0000,
    0xbf32_39b1,
    0xbf06_6b30,
    0xbeca_32a0,
    0xbe91_a24d,
    0xbe3d_353f,
    0xbdba_7871,
    0x0000_0000,
    0x3da2_faff,
    0x3e24_cae3,
    0x3e7c_04dd,
    0x3ead_033a,
    0x3ee1_a4b8,
    0x3f10_07ab,
    0x3f39_13b3,
    0x3f80_0000,
];

/// Decodes an NF4 code (the low 4 bits of `code`): one of sixteen fixed values, -1 for code
/// 0, 0 for code 7, 1 for code 15.
///
/// ```
/// use zt_formats::fp8::nf4_to_f32;
/// assert_eq!(nf4_to_f32(0), -1.0);
/// assert_eq!(nf4_to_f32(7), 0.0);
/// assert_eq!(nf4_to_f32(15), 1.0);
/// assert!((nf4_to_f32(12) - 0.4407).abs() < 1e-4);
/// ```
pub fn nf4_to_f32(code: u8) -> f32 {
    // `code & 0xf` is at most 15: in range of the 16 entries.
    f32::from_bits(NF4_BITS[usize::from(code & 0xf)])
}

/// Decodes `count` FP4 E2M1 elements packed two per byte, low nibble first (the element at
/// an even index is a byte's low nibble), as `float4_e2m1fn_x2` and safetensors `F4` store
/// them. `None` if `bytes` is not exactly `ceil(count / 2)` long.
pub fn unpack_f4_e2m1(bytes: &[u8], count: usize) -> Option<Vec<f32>> {
    if bytes.len() != count.div_ceil(2) {
        return None;
    }
    let pairs = bytes.iter().flat_map(|&b| [b & 0xF, b >> 4]);
    Some(pairs.take(count).map(f4_e2m1_to_f32).collect())
}

/// Decodes an FP6 E2M3 code (the low 6 bits of `code`) exactly: sign, 2 exponent bits with
/// bias 1, 3 mantissa bits; largest magnitude 7.5. No infinities or NaN.
pub fn f6_e2m3_to_f32(code: u8) -> f32 {
    fp6_to_f32(code, 3, 1)
}

/// Decodes an FP6 E3M2 code (the low 6 bits of `code`) exactly: sign, 3 exponent bits with
/// bias 3, 2 mantissa bits; largest magnitude 28. No infinities or NaN.
pub fn f6_e3m2_to_f32(code: u8) -> f32 {
    fp6_to_f32(code, 2, 3)
}

fn fp6_to_f32(code: u8, mantissa_bits: u32, bias: i32) -> f32 {
    let negative = code & 0x20 != 0;
    let exp = i32::from((code & 0x1F) >> mantissa_bits);
    let mant = u32::from(code) & ((1 << mantissa_bits) - 1);
    let m = mantissa_bits as i32;
    let mag = if exp == 0 {
        mant as f32 * pow2(1 - bias - m)
    } else {
        (((1 << mantissa_bits) + mant) as f32) * pow2(exp - bias - m)
    };
    if negative {
        -mag
    } else {
        mag
    }
}

/// The value of one code of the packed sub-byte type `t` ([`LogicalType::packed_bits`]): the
/// integer types' codes sign-extended (`i4`, `i2`) or as they are (`u4`, `u2`), the float
/// types' decoded; `None` for every other type.
///
/// ```
/// use zt_formats::{fp8::packed_value, LogicalType};
/// assert_eq!(packed_value(&LogicalType::I4, 0xF), Some(-1.0));
/// assert_eq!(packed_value(&LogicalType::U2, 3), Some(3.0));
/// assert_eq!(packed_value(&LogicalType::F4E2M1, 0b1010), Some(-1.0));
/// ```
pub fn packed_value(t: &LogicalType, code: u8) -> Option<f32> {
    Some(match t {
        LogicalType::I4 => f32::from(((code << 4) as i8) >> 4),
        LogicalType::I2 => f32::from(((code << 6) as i8) >> 6),
        LogicalType::U4 => f32::from(code & 0x0F),
        LogicalType::U2 => f32::from(code & 0x03),
        LogicalType::F4E2M1 => f4_e2m1_to_f32(code),
        LogicalType::Nf4 => nf4_to_f32(code),
        LogicalType::F6E2M3 => f6_e2m3_to_f32(code),
        LogicalType::F6E3M2 => f6_e3m2_to_f32(code),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mx_codes() {
        assert_eq!(e8m0_to_f32(127), 1.0);
        assert_eq!(e8m0_to_f32(128), 2.0);
        assert_eq!(e8m0_to_f32(126), 0.5);
        assert_eq!(e8m0_to_f32(254), 2f32.powi(127));
        assert_eq!(e8m0_to_f32(1), 2f32.powi(-126));
        assert_eq!(e8m0_to_f32(0), 2f64.powi(-127) as f32);
        assert!(e8m0_to_f32(0xFF).is_nan());
        assert_eq!(F8E8M0(130).to_f32(), 8.0);

        let f4: Vec<f32> = (0..16).map(f4_e2m1_to_f32).collect();
        assert_eq!(
            f4,
            [
                0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0,
                -6.0
            ]
        );
        // Low nibble first: 0x72 holds 1.0 (code 2) then 6.0 (code 7).
        assert_eq!(unpack_f4_e2m1(&[0x72, 0x0A], 3).unwrap(), [1.0, 6.0, -1.0]);
        assert_eq!(unpack_f4_e2m1(&[0x72], 3), None);

        // E2M3: 0b0_01_000 = 1.0, subnormal 0b0_00_001 = 1/8, max 0b0_11_111 = 7.5.
        assert_eq!(f6_e2m3_to_f32(0b001000), 1.0);
        assert_eq!(f6_e2m3_to_f32(0b000001), 0.125);
        assert_eq!(f6_e2m3_to_f32(0b011111), 7.5);
        assert_eq!(f6_e2m3_to_f32(0b111111), -7.5);
        // E3M2: 0b0_011_00 = 1.0, subnormal 0b0_000_01 = 1/16, max 0b0_111_11 = 28.
        assert_eq!(f6_e3m2_to_f32(0b001100), 1.0);
        assert_eq!(f6_e3m2_to_f32(0b000001), 0.0625);
        assert_eq!(f6_e3m2_to_f32(0b011111), 28.0);
        assert_eq!(f6_e3m2_to_f32(0b100000), -0.0);
    }

    #[test]
    fn known_codes() {
        let f = Fp8Format::E4M3Fn;
        assert_eq!(f.decode(0x38), 1.0);
        assert_eq!(f.decode(0xC0), -2.0);
        assert_eq!(f.decode(0x30), 0.5);
        assert_eq!(f.decode(0x7E), 448.0);
        assert!(f.decode(0x7F).is_nan());
        assert_eq!(f.decode(0x01), 2f32.powi(-9));
        assert_eq!(Fp8Format::E5M2.decode(0x7B), 57344.0);
        assert_eq!(Fp8Format::E5M2.decode(0xFC), f32::NEG_INFINITY);
        assert_eq!(Fp8Format::E4M3Fnuz.decode(0x7F), 240.0);
        assert_eq!(Fp8Format::E5M2Fnuz.decode(0x7F), 57344.0);
        assert!(Fp8Format::E5M2Fnuz.decode(0x80).is_nan());
    }

    #[test]
    fn every_finite_code_encodes_back_to_itself() {
        for f in Fp8Format::ALL {
            for c in 0..=255u8 {
                let x = f.decode(c);
                if x.is_nan() {
                    continue;
                }
                assert_eq!(f.encode(x), c, "{f:?} code {c:#04x} = {x}");
            }
        }
    }

    #[test]
    fn rounding_and_overflow() {
        let f = Fp8Format::E4M3Fn;
        // Between 1.0 (0x38) and 1.125 (0x39): the tie goes to the even code 0x38.
        assert_eq!(f.encode(1.0625), 0x38);
        assert_eq!(f.encode(1.0626), 0x39);
        assert_eq!(
            f.encode(464.0),
            0x7E,
            "below the rounding midpoint to 480 stays at max"
        );
        assert_eq!(f.encode(480.0), 0x7F, "overflow is NaN without infinities");
        assert_eq!(f.encode_saturating(1e9), 0x7E);
        assert_eq!(f.encode_saturating(-1e9), 0xFE);
        assert_eq!(Fp8Format::E5M2.encode(1e9), 0x7C);
        assert_eq!(Fp8Format::E4M3Fnuz.encode(-0.0), 0x00);
        assert_eq!(Fp8Format::E4M3Fnuz.encode(f32::NAN), 0x80);
        assert_eq!(
            f.encode(2f32.powi(-11)),
            0x00,
            "half the smallest subnormal ties to even zero"
        );
    }
}
