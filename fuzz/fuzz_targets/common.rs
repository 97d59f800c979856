//! Shared by the targets: open bytes as any file kind and read everything, as a user would.

use ztensor::{DType, ElementType, Format, LogicalType, OpenOptions, ReadOptions};

pub fn read_everything(data: &[u8]) {
    // A small decompression cap keeps runs fast; the cap logic itself is what is under test.
    let opts = OpenOptions::new().max_decompressed_len(16 << 20);
    for verify_mag in [true, false] {
        let Ok(r) = opts.clone().verify_mag_checksum(verify_mag).open_bytes(data.to_vec()) else { continue };
        for o in &r {
            for c in o.components() {
                let _ = c.bytes_with(ReadOptions::verified());
            }
            let dequantizable = o.ggml_type().is_some();
            let values = if (dequantizable || !matches!(o.format, Format::Unknown(_))) && o.element_type().is_some_and(|t| t.ratio() == 1) {
                o.read_f32().ok()
            } else {
                None
            };
            let _ = o.read_bool();
            let dense = o.dense_form();
            // The reads agree: f32 values are one per element of the shape (a type unknown here
            // reads as its storage type, whatever the shape says), and where the dense form is
            // f32 they are its values, bit for bit.
            let unknown = o.element_type().is_some_and(|t| matches!(t.logical, Some(LogicalType::Unknown(_))));
            if let Some(values) = &values {
                let count: Option<u64> = o.shape().iter().try_fold(1u64, |n, &d| n.checked_mul(d));
                assert!(unknown || Some(values.len() as u64) == count, "object {:?}: {} values from read_f32, shape {:?}", o.name(), values.len(), o.shape());
                if let Ok((whole, ty)) = &dense {
                    if *ty == ElementType::plain(DType::F32) {
                        let bits: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
                        let want: Vec<u32> = whole.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
                        assert!(bits == want, "object {:?}: read_f32 differs from the dense form", o.name());
                        if let Ok(read) = o.read::<f32>() {
                            let read: Vec<u32> = read.iter().map(|v| v.to_bits()).collect();
                            assert!(read == want, "object {:?}: read::<f32> differs from the dense form", o.name());
                        }
                    }
                }
            }
            // A cast to f64 is exact: where the dense form is f32, f16 or bf16, its f64 cast
            // holds read_f32's values (NaN as NaN: payloads may go through other converters).
            if let (Some(values), Ok((_, ty))) = (&values, &dense) {
                if ty.logical.is_none() && matches!(ty.dtype, DType::F32 | DType::F16 | DType::BF16) {
                    if let Ok((wide, wide_ty)) = o.cast_floats(DType::F64).and_then(|c| c.dense_form()) {
                        assert!(wide_ty == ElementType::plain(DType::F64), "object {:?}: a cast to f64 gave {wide_ty:?}", o.name());
                        let wide: Vec<f64> = wide.chunks_exact(8).map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])).collect();
                        assert!(wide.len() == values.len(), "object {:?}: {} values cast, {} read", o.name(), wide.len(), values.len());
                        for (w, v) in wide.iter().zip(values) {
                            assert!((w.is_nan() && v.is_nan()) || (*w as f32).to_bits() == v.to_bits(), "object {:?}: cast {w} against read {v}", o.name());
                        }
                    }
                }
            }
            // Slices take their own paths (seek tables, HDF5 chunk boxes, gathers): a box
            // at the start and one in the middle of every dimension. What a slice gives is
            // checked against the same box cut from the whole object's bytes, so a slice that
            // reads bytes the object does not hold is a finding, not only a panic.
            let shape = o.shape();
            let head: Vec<_> = shape.iter().map(|&n| 0..n.min(2)).collect();
            let middle: Vec<_> = shape.iter().map(|&n| n / 3..(n / 2 + 1).min(n)).collect();
            for ranges in [head, middle] {
                let sliced = o.slice_bytes(&ranges);
                // The copy into a caller's buffer takes its own path for raw data: the same
                // bytes, or an error.
                if let Ok(sliced) = &sliced {
                    let mut into = vec![0u8; sliced.len()];
                    if o.slice_bytes_into(&ranges, &mut into).is_ok() {
                        assert!(into[..] == sliced[..], "object {:?}, box {ranges:?}: slice_bytes_into differs", o.name());
                    }
                }
                let (Ok(sliced), Ok((whole, ty))) = (&sliced, &dense) else { continue };
                if o.format != Format::Dense || ty.logical.as_ref().is_some_and(|t| t.packed_bits().is_some()) {
                    continue;
                }
                let size = ty.logical_size();
                match box_of(whole, &shape, &ranges, size) {
                    Some(want) => assert_eq!(&sliced[..], &want[..], "object {:?}, box {ranges:?}", o.name()),
                    None => panic!(
                        "object {:?}: a slice of {} bytes from a whole of {} bytes, which shape {shape:?} does not fit",
                        o.name(),
                        sliced.len(),
                        whole.len()
                    ),
                }
            }
        }
        let _ = r.verify();
    }
}

/// The box `ranges` of a row-major array of `shape` whose elements are `size` bytes, cut out of
/// `whole` one element at a time; `None` when `whole` is not the array's length.
fn box_of(whole: &[u8], shape: &[u64], ranges: &[std::ops::Range<u64>], size: u64) -> Option<Vec<u8>> {
    let count = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))?;
    if count.checked_mul(size)? != whole.len() as u64 {
        return None;
    }
    let picked: u64 = ranges.iter().map(|r| r.end - r.start).product();
    let mut out = Vec::new();
    for flat in 0..picked {
        let (mut rest, mut offset, mut stride) = (flat, 0u64, 1u64);
        for d in (0..shape.len()).rev() {
            let extent = ranges[d].end - ranges[d].start;
            offset += (ranges[d].start + rest % extent) * stride;
            rest /= extent;
            stride *= shape[d];
        }
        let at = (offset * size) as usize;
        out.extend_from_slice(whole.get(at..at + size as usize)?);
    }
    Some(out)
}
