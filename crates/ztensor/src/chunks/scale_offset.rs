//! HDF5's scale-offset filter (id 6, `H5Pset_scaleoffset`, h5py's `scaleoffset=`), decoded
//! as HDF5's `H5Zscaleoffset.c` decodes it.
//!
//! The filter's 20 parameters give the scale type (0: floats scaled by a power of ten, 2:
//! integers), the scale factor (decimal digits, or the integers' bit count), the chunk's
//! element count, the class (0 integer, 1 float), the element size, the sign, the byte order,
//! whether a fill value is defined and, from the ninth on, that fill value's bytes (four a
//! parameter, least significant first).
//!
//! A chunk is 21 bytes of header (the bit count per element, a u32; the size of the minimum,
//! one byte; the minimum, little-endian) and then each element's offset from the minimum in
//! that many bits, most significant bit first, packed without gaps. An element whose offset
//! is all ones is the fill value when one is defined. An integer is the minimum plus its
//! offset, wrapping at its size; a float is its offset over ten to the scale factor, plus the
//! minimum (the float whose bytes the minimum holds), in the float's own precision. A bit
//! count of the element's full size means the elements are stored as they are.

use zt_container::{Error, Result};

/// The header's length.
const HEADER: usize = 21;
/// Scale types: floats scaled by a power of ten, floats with a fixed bit count (which HDF5
/// never implemented), integers.
const FLOAT_DSCALE: u32 = 0;
const FLOAT_ESCALE: u32 = 1;
const INTEGER_SCALE: u32 = 2;

/// Decodes the scale-offset chunk `data` with the filter's `params` into `out` (the chunk's
/// bytes, in the dataset's byte order).
pub(super) fn decode_into(data: &[u8], params: &[u32], out: &mut [u8]) -> Result<()> {
    decode(data, params, out)
        .map_err(|e| Error::new(e.kind(), format!("scaleoffset: {}", e.message())))
}

/// What the parameters say of the elements.
struct Elements {
    size: usize,
    float: bool,
    big_endian: bool,
    /// The fill value's bytes (little-endian) when one is defined.
    fill: Option<[u8; 8]>,
    /// Ten to this power divides a float's offset.
    decimals: i32,
}

/// [`decode_into`], its errors not yet named.
fn decode(data: &[u8], params: &[u32], out: &mut [u8]) -> Result<()> {
    // Twenty parameters: eight named, then the fill value's bytes.
    let (&[scale_type, factor, count, class, size, _sign, order, fill_defined, ref fill @ ..], 20) =
        (params, params.len())
    else {
        return Err(Error::invalid(format!(
            "{} parameters, not 20",
            params.len()
        )));
    };
    let float = match (class, scale_type) {
        (1, FLOAT_DSCALE) => true,
        (1, FLOAT_ESCALE) => {
            return Err(Error::unsupported(
                "floats scaled to a fixed bit count (HDF5 does not read them either)",
            ))
        }
        (0, INTEGER_SCALE) => false,
        _ => {
            return Err(Error::invalid(format!(
                "scale type {scale_type} for a datatype of class {class}"
            )))
        }
    };
    let size = size as usize;
    if !matches!((float, size), (false, 1 | 2 | 4 | 8) | (true, 4 | 8)) {
        return Err(Error::invalid(format!(
            "{}-byte {}s",
            size,
            if float { "float" } else { "integer" }
        )));
    }
    let bits = 8 * size as u32;
    if !float {
        // The integers' bit count, as the writer asked for it (negative: worked out).
        let asked = (factor as i32).max(0) as u32;
        if asked > bits {
            return Err(Error::invalid(format!(
                "{asked} bits asked for {bits}-bit integers"
            )));
        }
        // A full bit count: HDF5 skipped the filter and stored the chunk as it is.
        if asked == bits {
            return copy_whole(data, out);
        }
    }
    let expected = (count as usize).checked_mul(size);
    if expected != Some(out.len()) {
        return Err(Error::invalid(format!(
            "{count} elements of {size} bytes for a chunk of {} bytes",
            out.len()
        )));
    }
    let head = data
        .first_chunk::<HEADER>()
        .ok_or_else(|| Error::invalid("a chunk shorter than its 21-byte header"))?;
    let per_element = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let mut minimum = [0u8; 8];
    let minimum_size = usize::from(head[4]).min(8);
    minimum[..minimum_size].copy_from_slice(&head[5..5 + minimum_size]);
    if per_element > bits {
        return Err(Error::invalid(format!(
            "{per_element} bits an element for {bits}-bit elements"
        )));
    }
    let packed = &data[HEADER..];
    let elements = Elements {
        size,
        float,
        big_endian: order == 1,
        fill: (fill_defined == 1).then(|| {
            let mut bytes = [0u8; 8];
            for (slot, byte) in bytes
                .iter_mut()
                .zip(fill.iter().flat_map(|v| v.to_le_bytes()))
            {
                *slot = byte;
            }
            bytes
        }),
        decimals: factor as i32,
    };
    if per_element == bits {
        // Stored as they are, and not scaled back (as HDF5 reads them).
        copy_whole(packed.get(..out.len()).unwrap_or(packed), out)?;
    } else {
        let needed = (count as u64 * u64::from(per_element)).div_ceil(8);
        if (packed.len() as u64) < needed {
            return Err(Error::invalid(format!(
                "{count} elements of {per_element} bits need {needed} bytes; the chunk holds {}",
                packed.len()
            )));
        }
        unpack(
            packed,
            per_element,
            u64::from_le_bytes(minimum),
            &elements,
            out,
        );
    }
    if elements.big_endian {
        for element in out.chunks_exact_mut(size) {
            element.reverse();
        }
    }
    Ok(())
}

/// Copies a chunk stored as it is.
fn copy_whole(data: &[u8], out: &mut [u8]) -> Result<()> {
    if data.len() != out.len() {
        return Err(Error::invalid(format!(
            "{} bytes stored for a chunk of {}",
            data.len(),
            out.len()
        )));
    }
    out.copy_from_slice(data);
    Ok(())
}

/// Reads each element's offset (`bits` bits, most significant first) from `packed` and
/// writes the element, little-endian, into `out`. `packed` holds enough bits (checked).
fn unpack(packed: &[u8], bits: u32, minimum: u64, elements: &Elements, out: &mut [u8]) {
    let size = elements.size;
    let all_ones = if bits == 0 {
        0
    } else {
        u64::MAX >> (64 - bits)
    };
    let divisor32 = 10f32.powf(elements.decimals as f32);
    let divisor64 = 10f64.powf(f64::from(elements.decimals));
    let min32 = f32::from_le_bytes([
        minimum as u8,
        (minimum >> 8) as u8,
        (minimum >> 16) as u8,
        (minimum >> 24) as u8,
    ]);
    let min64 = f64::from_bits(minimum);
    let (mut acc, mut held) = (0u128, 0u32);
    let mut bytes = packed.iter();
    for element in out.chunks_exact_mut(size) {
        while held < bits {
            acc = acc << 8 | u128::from(*bytes.next().unwrap_or(&0));
            held += 8;
        }
        held -= bits;
        let offset = ((acc >> held) as u64) & all_ones;
        acc &= (1u128 << held) - 1;
        let value: [u8; 8] = match elements.fill {
            Some(fill) if offset == all_ones => fill,
            // Signed or not, the minimum plus the offset wraps to the same bytes.
            _ if !elements.float => offset.wrapping_add(minimum).to_le_bytes(),
            // The offset read as the same-sized signed integer, then in the float's precision.
            _ if size == 4 => {
                let v = (offset as u32 as i32) as f32 / divisor32 + min32;
                let mut b = [0u8; 8];
                b[..4].copy_from_slice(&v.to_le_bytes());
                b
            }
            _ => ((offset as i64) as f64 / divisor64 + min64).to_le_bytes(),
        };
        element.copy_from_slice(&value[..size]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 20 parameters for `count` elements.
    fn params(
        scale_type: u32,
        factor: u32,
        count: u32,
        class: u32,
        size: u32,
        fill: Option<u64>,
    ) -> Vec<u32> {
        let mut p = vec![
            scale_type,
            factor,
            count,
            class,
            size,
            1,
            0,
            u32::from(fill.is_some()),
        ];
        let f = fill.unwrap_or(0);
        p.extend([f as u32, (f >> 32) as u32]);
        p.resize(20, 0);
        p
    }

    /// A chunk of `offsets`, `bits` each, after the header with `minimum`.
    fn chunk(bits: u32, minimum: u64, offsets: &[u64]) -> Vec<u8> {
        let mut out = bits.to_le_bytes().to_vec();
        out.push(8);
        out.extend(minimum.to_le_bytes());
        out.extend([0; 8]);
        let (mut acc, mut held) = (0u128, 0u32);
        for &o in offsets {
            acc = acc << bits | u128::from(o);
            held += bits;
            while held >= 8 {
                held -= 8;
                out.push((acc >> held) as u8);
            }
        }
        if held > 0 {
            out.push((acc << (8 - held)) as u8);
        }
        out
    }

    #[test]
    fn integers_are_the_minimum_plus_their_offsets() {
        // i16: minimum -5, offsets of 3 bits; 7 (all ones) is the fill value 99.
        let raw = chunk(3, (-5i64) as u64, &[0, 1, 6, 7, 2]);
        let mut out = [0u8; 10];
        decode_into(&raw, &params(2, 0, 5, 0, 2, Some(99)), &mut out).unwrap();
        let values: Vec<i16> = out
            .chunks(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(values, [-5, -4, 1, 99, -3]);
        // No fill value: all ones is an offset like any other.
        decode_into(&raw, &params(2, 0, 5, 0, 2, None), &mut out).unwrap();
        let values: Vec<i16> = out
            .chunks(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(values, [-5, -4, 1, 2, -3]);
        // Big-endian elements come out big-endian.
        let mut be = params(2, 0, 5, 0, 2, None);
        be[6] = 1;
        decode_into(&raw, &be, &mut out).unwrap();
        assert_eq!(&out[..4], &[0xff, 0xfb, 0xff, 0xfc]);
        // Zero bits: every element is the minimum.
        let mut out = [0u8; 8];
        decode_into(&chunk(0, 7, &[]), &params(2, 0, 2, 0, 4, None), &mut out).unwrap();
        assert_eq!(out, [7, 0, 0, 0, 7, 0, 0, 0]);
    }

    #[test]
    fn floats_are_scaled_back_by_ten_to_the_factor() {
        // f32, two decimals, minimum 1.5: offsets 0, 25 and 1000 are 1.5, 1.75 and 11.5.
        let minimum = u64::from(1.5f32.to_bits());
        let raw = chunk(10, minimum, &[0, 25, 1000]);
        let mut out = [0u8; 12];
        decode_into(&raw, &params(0, 2, 3, 1, 4, None), &mut out).unwrap();
        let values: Vec<f32> = out
            .chunks(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(values, [1.5, 0.25 + 1.5, 11.5]);
        let raw = chunk(7, (-2.0f64).to_bits(), &[0, 100]);
        let mut out = [0u8; 16];
        decode_into(&raw, &params(0, 1, 2, 1, 8, None), &mut out).unwrap();
        assert_eq!(f64::from_le_bytes(out[8..].try_into().unwrap()), 8.0);
    }

    #[test]
    fn damaged_chunks_and_parameters_are_refused() {
        let mut out = [0u8; 8];
        let mut message =
            |raw: &[u8], p: &[u32]| decode_into(raw, p, &mut out).unwrap_err().to_string();
        let good = params(2, 0, 4, 0, 2, None);
        let raw = chunk(3, 0, &[1, 2, 3, 4]);
        assert!(message(&raw, &good[..19]).contains("scaleoffset: 19 parameters, not 20"));
        assert!(message(&raw[..20], &good).contains("shorter than its 21-byte header"));
        assert!(message(&raw[..21], &good)
            .contains("4 elements of 3 bits need 2 bytes; the chunk holds 0"));
        assert!(
            message(&chunk(17, 0, &[]), &good).contains("17 bits an element for 16-bit elements")
        );
        assert!(message(&raw, &params(2, 0, 5, 0, 2, None))
            .contains("5 elements of 2 bytes for a chunk of 8 bytes"));
        assert!(message(&raw, &params(2, 0, 4, 0, 3, None)).contains("3-byte integers"));
        assert!(message(&raw, &params(2, 0, 4, 1, 2, None))
            .contains("scale type 2 for a datatype of class 1"));
        assert!(message(&raw, &params(1, 0, 4, 1, 2, None)).contains("fixed bit count"));
        assert!(message(&raw, &params(2, 17, 4, 0, 2, None))
            .contains("17 bits asked for 16-bit integers"));
        // A full bit count asked: stored as it is.
        let mut out = [0u8; 8];
        decode_into(
            &[1, 2, 3, 4, 5, 6, 7, 8],
            &params(2, 16, 4, 0, 2, None),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
    }
}
