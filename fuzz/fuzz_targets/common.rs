//! Shared by the targets: open bytes as any file kind and read everything, as a user would.

use ztensor::{Format, OpenOptions, ReadOptions};

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
            if (dequantizable || !matches!(o.format, Format::Unknown(_))) && o.element_type().is_some_and(|t| t.ratio() == 1) {
                let _ = o.read_f32();
            }
            let _ = o.read_bool();
            let _ = o.dense_form();
            // Slices take their own paths (seek tables, HDF5 chunk boxes, gathers): a box
            // at the start and one in the middle of every dimension.
            let shape = o.shape();
            let head: Vec<_> = shape.iter().map(|&n| 0..n.min(2)).collect();
            let middle: Vec<_> = shape.iter().map(|&n| n / 3..(n / 2 + 1).min(n)).collect();
            let _ = o.slice_bytes(&head);
            let _ = o.slice_bytes(&middle);
        }
        let _ = r.verify();
    }
}
