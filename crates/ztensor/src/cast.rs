//! Casting floating-point tensors to another float type as they are converted (`zt convert
//! --dtype bf16`, [`ObjectView::cast_floats`](crate::ObjectView::cast_floats)).
//!
//! - [`castable`]: which element types a cast touches (plain f64, f32, f16 and bf16; integers,
//!   bools, FP8 and packed types keep theirs);
//! - [`cast_element`] and [`cast_len`]: what a cast element type and byte count become, from
//!   the listing alone, so that writers plan headers and shards before reading;
//! - [`cast_bytes`]: the bytes themselves, rounded once, to nearest, ties to even (what
//!   numpy's `astype` does), NaN kept NaN, values past the range becoming infinite;
//!   parallel over both cores for large tensors.

use std::borrow::Cow;

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use rayon::prelude::*;
use zt_container::{Error, Result};
use zt_formats::{DType, ElementType};

/// The float types a cast reads and writes.
pub(crate) const CAST_TYPES: [DType; 4] = [DType::F64, DType::F32, DType::F16, DType::BF16];

/// Whether a cast to a float type touches elements of type `e`: plain f64, f32, f16 or bf16.
pub(crate) fn castable(e: &ElementType) -> bool {
    e.logical.is_none() && CAST_TYPES.contains(&e.dtype)
}

/// Whether a cast to `to` changes elements of type `e`: castable and of another type.
pub(crate) fn changes(e: &ElementType, to: DType) -> bool {
    castable(e) && e.dtype != to
}

/// What elements of type `e` are written as under a cast to `to` (`None`: no cast).
pub(crate) fn cast_element(e: &ElementType, to: Option<DType>) -> ElementType {
    match to {
        Some(to) if castable(e) => ElementType::plain(to),
        _ => e.clone(),
    }
}

/// How many bytes `len` bytes of elements of type `e` take once cast to `to`.
pub(crate) fn cast_len(len: u64, e: &ElementType, to: Option<DType>) -> u64 {
    match to {
        Some(to) if changes(e, to) => {
            let (from, to) = (e.dtype.size() as u64, to.size() as u64);
            (len / from).saturating_mul(to)
        }
        _ => len,
    }
}

/// Elements converted per step: each step's values sit in a small buffer on the stack.
const STEP: usize = 2048;

/// Tensors at least this large are cast on every core; smaller ones are not worth a thread.
const PARALLEL_FROM: usize = 1 << 20;

/// `bytes`, little-endian elements of `from`, as little-endian elements of `to`, allocated
/// fallibly and refused past `cap` bytes (an upcast to f64 takes up to four times the bytes).
/// Borrowed as they are when the types are the same.
pub(crate) fn cast_bytes<'a>(
    bytes: Cow<'a, [u8]>,
    from: DType,
    to: DType,
    cap: u64,
) -> Result<Cow<'a, [u8]>> {
    if from == to {
        return Ok(bytes);
    }
    if !CAST_TYPES.contains(&from) || !CAST_TYPES.contains(&to) {
        return Err(Error::argument(format!(
            "cannot cast {} to {}: casts are between f64, f32, f16 and bf16",
            from.name(),
            to.name()
        )));
    }
    let (from_size, to_size) = (from.size(), to.size());
    if bytes.len() % from_size != 0 {
        return Err(Error::invalid(format!(
            "{} bytes are not a whole number of {} elements",
            bytes.len(),
            from.name()
        )));
    }
    let count = bytes.len() / from_size;
    let out_len = count
        .checked_mul(to_size)
        .filter(|&n| n as u64 <= cap)
        .ok_or_else(|| {
            Error::limit(format!(
                "casting {count} elements to {} takes more than the cap of {cap} bytes",
                to.name()
            ))
        })?;
    let mut out: Vec<u8> = zt_container::internal::try_zeroed_vec(out_len)?;
    let (step_in, step_out) = (STEP * from_size, STEP * to_size);
    if bytes.len() >= PARALLEL_FROM && crate::pool::threads() > 1 {
        // Steps are independent: any thread takes any of them. Through our pool, which a
        // forked process gets afresh.
        crate::pool::install(|| {
            bytes
                .par_chunks(step_in)
                .zip(out.par_chunks_mut(step_out))
                .for_each(|(src, dst)| cast_step(src, from, dst, to))
        });
    } else {
        for (src, dst) in bytes.chunks(step_in).zip(out.chunks_mut(step_out)) {
            cast_step(src, from, dst, to);
        }
    }
    Ok(Cow::Owned(out))
}

/// Casts up to [`STEP`] elements: `src` (of `from`) into `dst` (of `to`), both little-endian.
/// Through f64 when either side is f64 (exact for every narrower source, one rounding into
/// the narrower target), else through f32 (exact for f16 and bf16 sources).
fn cast_step(src: &[u8], from: DType, dst: &mut [u8], to: DType) {
    if from == DType::F64 || to == DType::F64 {
        let mut wide = [0f64; STEP];
        let wide = &mut wide[..src.len() / from.size()];
        read_f64(src, from, wide);
        write_f64(wide, to, dst);
    } else {
        let mut single = [0f32; STEP];
        let single = &mut single[..src.len() / from.size()];
        read_f32(src, from, single);
        write_f32(single, to, dst);
    }
}

/// Half-precision elements of `src` as their bit patterns, in `bits`.
fn read_bits(src: &[u8], bits: &mut [u16]) {
    for (b, v) in src.chunks_exact(2).zip(bits.iter_mut()) {
        *v = u16::from_le_bytes([b[0], b[1]]);
    }
}

/// Writes each element's little-endian bytes in turn into `dst`.
fn write_le<const N: usize>(elements: impl Iterator<Item = [u8; N]>, dst: &mut [u8]) {
    for (b, e) in dst.chunks_exact_mut(N).zip(elements) {
        b.copy_from_slice(&e);
    }
}

/// Writes f32 values as half-precision elements of type `H` (f16 or bf16), rounded to
/// nearest, ties to even, through `half`'s slice conversion (F16C where the CPU has it).
fn write_halves<H>(values: &[f32], dst: &mut [u8])
where
    H: bytemuck::Pod + Default,
    [H]: HalfFloatSliceExt,
{
    let mut halves = [H::default(); STEP];
    let halves = &mut halves[..values.len()];
    halves.convert_from_f32_slice(values);
    let bits = bytemuck::cast_slice::<H, u16>(halves);
    write_le(bits.iter().map(|h| h.to_le_bytes()), dst);
}

/// Reads f32, f16 or bf16 elements into f32 (exactly).
fn read_f32(src: &[u8], from: DType, out: &mut [f32]) {
    match from {
        DType::F32 => {
            for (b, v) in src.chunks_exact(4).zip(out.iter_mut()) {
                *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        DType::F16 | DType::BF16 => {
            let mut bits = [0u16; STEP];
            let bits = &mut bits[..out.len()];
            read_bits(src, bits);
            if from == DType::F16 {
                bytemuck::cast_slice::<u16, f16>(bits).convert_to_f32_slice(out);
            } else {
                bytemuck::cast_slice::<u16, bf16>(bits).convert_to_f32_slice(out);
            }
        }
        _ => {}
    }
}

/// Writes f32 values as f32, f16 or bf16 elements (rounded to nearest, ties to even).
fn write_f32(values: &[f32], to: DType, dst: &mut [u8]) {
    match to {
        DType::F32 => write_le(values.iter().map(|v| v.to_le_bytes()), dst),
        DType::F16 => write_halves::<f16>(values, dst),
        DType::BF16 => write_halves::<bf16>(values, dst),
        _ => {}
    }
}

/// Reads any of the four float types into f64 (exactly).
fn read_f64(src: &[u8], from: DType, out: &mut [f64]) {
    match from {
        DType::F64 => {
            for (b, v) in src.chunks_exact(8).zip(out.iter_mut()) {
                let mut le = [0u8; 8];
                le.copy_from_slice(b);
                *v = f64::from_le_bytes(le);
            }
        }
        _ => {
            let mut single = [0f32; STEP];
            let single = &mut single[..out.len()];
            read_f32(src, from, single);
            for (w, s) in out.iter_mut().zip(single.iter()) {
                *w = f64::from(*s);
            }
        }
    }
}

/// Writes f64 values as any of the four float types, with one rounding to nearest, ties to
/// even (never through f32 on the way to f16 or bf16, which could round twice).
fn write_f64(values: &[f64], to: DType, dst: &mut [u8]) {
    let values = values.iter().copied();
    match to {
        DType::F64 => write_le(values.map(f64::to_le_bytes), dst),
        DType::F32 => write_le(values.map(|v| (v as f32).to_le_bytes()), dst),
        // `half`'s own f64 conversions go through f32 rounded to nearest on some CPUs (F16C).
        DType::F16 => write_le(values.map(|v| f16::from_f32(to_odd(v)).to_le_bytes()), dst),
        DType::BF16 => write_le(values.map(|v| bf16::from_f32(to_odd(v)).to_le_bytes()), dst),
        _ => {}
    }
}

/// `x` as f32 rounded to odd: toward zero, with the last bit set when that was inexact. f32
/// keeps more than two bits beyond f16's and bf16's, so rounding this to nearest gives what
/// rounding `x` itself would (rounding to nearest twice would not: a value just past a
/// midpoint can land on it).
fn to_odd(x: f64) -> f32 {
    let nearest = x as f32;
    if !nearest.is_finite() || f64::from(nearest) == x {
        return nearest;
    }
    let mut bits = nearest.to_bits();
    if f64::from(nearest).abs() > x.abs() {
        // One step toward zero: the magnitude is above zero here, so the sign bit stays.
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cast(bytes: &[u8], from: DType, to: DType) -> Vec<u8> {
        cast_bytes(Cow::Borrowed(bytes), from, to, u64::MAX)
            .unwrap()
            .into_owned()
    }

    /// bf16 from f32 by the bits, rounded to nearest, ties to even: the rule itself, written
    /// apart from `half` (NaN kept quiet).
    fn bf16_bits(x: f32) -> u16 {
        let b = x.to_bits();
        if x.is_nan() {
            return ((b >> 16) as u16) | 0x40;
        }
        let round = 0x7fff + ((b >> 16) & 1);
        (b.wrapping_add(round) >> 16) as u16
    }

    #[test]
    fn f32_to_bf16_rounds_to_nearest_even_in_every_step_and_on_every_core() {
        // Enough values to take the parallel path, with ties, both signs, the extremes.
        let mut values: Vec<f32> = (0..(PARALLEL_FROM / 4 + 7))
            .map(|i| f32::from_bits((i as u32).wrapping_mul(2_654_435_761)))
            .collect();
        values.extend([
            0.0,
            -0.0,
            1.0 + f32::EPSILON * 64.0,  // a tie below: stays even
            1.0 + f32::EPSILON * 192.0, // a tie above: rounds up
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
        ]);
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let out = cast(&bytes, DType::F32, DType::BF16);
        assert_eq!(out.len(), values.len() * 2);
        for (i, (v, b)) in values.iter().zip(out.chunks_exact(2)).enumerate() {
            let got = u16::from_le_bytes([b[0], b[1]]);
            if v.is_nan() {
                assert!(bf16::from_bits(got).is_nan(), "element {i}");
            } else {
                assert_eq!(got, bf16_bits(*v), "element {i}: {v:e}");
            }
        }
    }

    #[test]
    fn casts_between_every_pair_keep_values_every_type_holds() {
        // Each exact in f64, f32, f16 and bf16 (2^-15 is an f16 subnormal).
        let values = [
            0.0f64,
            -0.0,
            -1.5,
            2.0,
            0.25,
            -448.0,
            2f64.powi(-15),
            f64::INFINITY,
        ];
        let encode = |t: DType| -> Vec<u8> {
            let f32s = values.iter().map(|&v| v as f32);
            match t {
                DType::F64 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                DType::F32 => f32s.flat_map(|v| v.to_le_bytes()).collect(),
                DType::F16 => f32s.flat_map(|v| f16::from_f32(v).to_le_bytes()).collect(),
                _ => f32s.flat_map(|v| bf16::from_f32(v).to_le_bytes()).collect(),
            }
        };
        for from in CAST_TYPES {
            for to in CAST_TYPES {
                let got = cast(&encode(from), from, to);
                assert_eq!(got, encode(to), "{} -> {}", from.name(), to.name());
            }
        }
    }

    #[test]
    fn f64_to_f16_rounds_once() {
        // Just above the midpoint of two f16 values, by less than f32 can tell: through f32 it
        // would become the tie and round down to even; rounded once it rounds up.
        let lo = f16::from_f32(1.0).to_f64();
        let hi = f16::from_bits(f16::from_f32(1.0).to_bits() + 1).to_f64();
        let x = (lo + hi) / 2.0 + 1e-12;
        assert_eq!((x as f32) as f64, (lo + hi) / 2.0);
        let out = cast(&x.to_le_bytes(), DType::F64, DType::F16);
        assert_eq!(
            u16::from_le_bytes([out[0], out[1]]),
            f16::from_f64(hi).to_bits()
        );
    }

    #[test]
    fn f64_to_bf16_rounds_once_and_keeps_tiny_signed_values() {
        let one = bf16::from_f32(1.0);
        let hi = bf16::from_bits(one.to_bits() + 1).to_f64();
        let x = (1.0 + hi) / 2.0 + 1e-14;
        let out = cast(&x.to_le_bytes(), DType::F64, DType::BF16);
        assert_eq!(u16::from_le_bytes([out[0], out[1]]), one.to_bits() + 1);
        // Below f32's least subnormal: zero, with its sign.
        let out = cast(&(-1e-300f64).to_le_bytes(), DType::F64, DType::BF16);
        assert_eq!(u16::from_le_bytes([out[0], out[1]]), 0x8000);
        for v in [f64::NAN, f64::INFINITY, 1e300, -1e300, f64::from(f32::MAX)] {
            let out = cast(&v.to_le_bytes(), DType::F64, DType::F16);
            let got = f16::from_bits(u16::from_le_bytes([out[0], out[1]]));
            assert_eq!(got.is_nan(), v.is_nan());
            assert!(v.is_nan() || got.is_infinite() && got.is_sign_negative() == (v < 0.0));
        }
    }

    #[test]
    fn refused_past_the_cap_and_for_other_types() {
        let bytes = [0u8; 16];
        let e = cast_bytes(Cow::Borrowed(&bytes[..]), DType::BF16, DType::F64, 31).unwrap_err();
        assert!(e.to_string().contains("cap of 31"), "{e}");
        assert!(cast_bytes(Cow::Borrowed(&bytes[..]), DType::I32, DType::F32, 99).is_err());
        let odd = cast_bytes(Cow::Borrowed(&bytes[..3]), DType::F16, DType::F32, 99);
        assert!(odd.unwrap_err().to_string().contains("whole number"));
    }

    #[test]
    fn planned_lengths_match_the_cast_bytes() {
        let f32_type = ElementType::plain(DType::F32);
        assert_eq!(cast_len(40, &f32_type, Some(DType::BF16)), 20);
        assert_eq!(cast_len(40, &f32_type, Some(DType::F64)), 80);
        assert_eq!(
            cast_len(40, &ElementType::plain(DType::I32), Some(DType::F16)),
            40
        );
        assert_eq!(cast_len(40, &f32_type, None), 40);
        assert_eq!(
            cast_element(&ElementType::plain(DType::U8), Some(DType::F16)).dtype,
            DType::U8
        );
    }
}
