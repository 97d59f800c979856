//! Property tests of reads that gather elements: NumPy arrays of any shape in either order
//! and byte order, and PyTorch tensors of any size, stride and offset over a storage (stored
//! or deflated), read the same values as a naive row-major walk of the index space.

use proptest::prelude::*;
use ztensor::OpenOptions;

#[path = "support/checkpoint.rs"]
mod checkpoint;
use checkpoint::{checkpoint, zip};

/// A `.npy` of u16 values `f(i)` for row-major index `i`, stored in the given order and
/// byte order.
fn npy_u16(shape: &[u64], fortran: bool, big: bool) -> Vec<u8> {
    let dims = shape
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let shape_text = if shape.len() == 1 {
        format!("({dims},)")
    } else {
        format!("({dims})")
    };
    let header = format!(
        "{{'descr': '{}u2', 'fortran_order': {}, 'shape': {shape_text}, }}\n",
        if big { '>' } else { '<' },
        if fortran { "True" } else { "False" }
    );
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((header.len() as u16).to_le_bytes());
    b.extend(header.as_bytes());
    let n: u64 = shape.iter().product();
    // Storage position p holds the element whose row-major index is i(p).
    for p in 0..n {
        let i = if fortran {
            // p is column-major: decompose with the first index fastest.
            let mut rest = p;
            let mut idx = vec![0u64; shape.len()];
            for (d, &len) in shape.iter().enumerate() {
                idx[d] = rest % len;
                rest /= len;
            }
            idx.iter()
                .zip(shape)
                .fold(0u64, |a, (&x, &len)| a * len + x)
        } else {
            p
        };
        let v = value(i);
        b.extend(if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    b
}

fn value(i: u64) -> u16 {
    (i.wrapping_mul(40503) ^ 0x5a5a) as u16
}

proptest! {
    #[test]
    fn npy_arrays_read_row_major(
        shape in proptest::collection::vec(1u64..5, 0..5),
        fortran: bool,
        big: bool,
    ) {
        for unmapped in [false, true] {
            let r = OpenOptions::new()
                .unmapped(unmapped)
                .open_bytes(npy_u16(&shape, fortran, big))
                .unwrap();
            let got = r.read::<u16>("array").unwrap();
            let n: u64 = shape.iter().product();
            let want: Vec<u16> = (0..n).map(value).collect();
            prop_assert_eq!(&got[..], &want[..]);
        }
    }

    #[test]
    fn torch_tensors_read_through_their_strides(
        dims in proptest::collection::vec((0u64..4, 0u64..6), 0..4),
        offset in 0u64..5,
        spare in 0u64..3,
        deflate: bool,
    ) {
        let size: Vec<u64> = dims.iter().map(|d| d.0).collect();
        let stride: Vec<u64> = dims.iter().map(|d| d.1).collect();
        let count: u64 = size.iter().product();
        let last: u64 = size.iter().zip(&stride).map(|(&n, &s)| n.saturating_sub(1) * s).sum();
        let numel = offset + if count == 0 { 0 } else { last + 1 } + spare;
        let r = OpenOptions::new()
            .open_bytes(checkpoint(numel, offset, &size, &stride, deflate))
            .unwrap();
        let got = r.read::<i32>("t").unwrap();
        // The naive walk: every index in row-major order.
        let mut want = Vec::new();
        let mut idx = vec![0u64; size.len()];
        for _ in 0..count {
            let at = offset + idx.iter().zip(&stride).map(|(&i, &s)| i * s).sum::<u64>();
            want.push(at as i32 * 7 - 3);
            for d in (0..size.len()).rev() {
                idx[d] += 1;
                if idx[d] < size[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        prop_assert_eq!(&got[..], &want[..]);
        // A tensor that reaches one element past its storage is refused at open.
        if count > 0 && spare == 0 {
            let e = OpenOptions::new()
                .open_bytes(checkpoint(numel - 1, offset, &size, &stride, deflate))
                .err()
                .unwrap();
            prop_assert!(e.message().contains("elements reach byte"), "{}", e);
        }
    }
}

/// A large deflated `.npz` entry: its header is inflated at open from a prefix of the stream
/// (never the whole entry), and its elements from the whole stream when read.
#[test]
fn large_deflated_npz_entries_read_whole() {
    let n = 300_000u64;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let values: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let header = format!("{{'descr': '|u1', 'fortran_order': False, 'shape': ({n},), }}\n");
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend((header.len() as u16).to_le_bytes());
    npy.extend(header.as_bytes());
    npy.extend(&values);
    let archive = zip(&[("big.npy", &npy)], &["big.npy"]);
    assert!(archive.len() > 200_000, "the values do not compress");
    for unmapped in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.npz");
        std::fs::write(&path, &archive).unwrap();
        let r = OpenOptions::new().unmapped(unmapped).open(&path).unwrap();
        assert_eq!(&r.read::<u8>("big").unwrap()[..], &values[..]);
    }
}

/// An empty tensor at an offset far past its storage (torch does not bound it) reads as
/// empty; a non-empty one there is refused, never an overflow.
#[test]
fn empty_tensors_at_any_offset() {
    for offset in [0, 100, 1 << 40, (1 << 62) - 1] {
        let r = OpenOptions::new()
            .open_bytes(checkpoint(2, offset, &[0, 3], &[3, 1], false))
            .unwrap();
        assert!(r.read::<i32>("t").unwrap().is_empty(), "{offset}");
        if offset < 2 {
            continue;
        }
        let e = OpenOptions::new()
            .open_bytes(checkpoint(2, offset, &[1], &[1], false))
            .err()
            .unwrap();
        assert!(e.message().contains("storage"), "{offset}: {e}");
    }
}

/// A `.npy` of version 1.0 with header `dict` and `data`.
fn npy_of(dict: &str, data: &[u8]) -> Vec<u8> {
    let header = format!("{dict}\n");
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend((header.len() as u16).to_le_bytes());
    npy.extend(header.as_bytes());
    npy.extend(data);
    npy
}

/// A structured (record) array, as numpy reads it, is listed as what it is and passed over by
/// verify and conversions, never a failure of the whole file: alone in an archive, or beside
/// arrays that are read.
#[test]
fn structured_arrays_are_listed_and_skipped() {
    let rec = npy_of(
        "{'descr': [('a', '<i4'), ('b', '<f4')], 'fortran_order': False, 'shape': (2,), }",
        &[0; 16],
    );
    let w = npy_of(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
        &[0, 0, 128, 63, 0, 0, 0, 64],
    );
    let dir = tempfile::tempdir().unwrap();
    for (file, entries) in [
        ("alone.npz", vec![("rec.npy", &rec[..])]),
        ("beside.npz", vec![("rec.npy", &rec[..]), ("w.npy", &w[..])]),
    ] {
        let path = dir.path().join(file);
        std::fs::write(&path, zip(&entries, &[])).unwrap();
        let r = ztensor::open(&path).unwrap();
        let rec_info = r.object("rec").unwrap();
        assert!(rec_info.skipped().unwrap().contains("structured"));
        let report = r.verify();
        assert!(report.is_ok(), "{file}: {:?}", report.failures);
        assert_eq!(report.skipped.len(), 1, "{file}");
        let out = dir.path().join(format!("{file}.zt"));
        let converted = ztensor::upgrade(&path, &out, Default::default()).unwrap();
        assert_eq!(converted.skipped.len(), 1, "{file}");
        assert_eq!(converted.written, entries.len() - 1, "{file}");
        let st = dir.path().join(format!("{file}.safetensors"));
        ztensor::write_safetensors(&r, &st, false).unwrap();
        let names: Vec<String> = ztensor::open(&st)
            .unwrap()
            .names()
            .map(String::from)
            .collect();
        assert!(!names.contains(&"rec".to_owned()), "{file}: {names:?}");
    }
}

/// A tensor whose strides repeat a few stored elements over a large shape (a broadcast) is
/// refused past the memory budget (twice the stored bytes plus 64 MiB by default), and read
/// with a larger budget; `verify` never materializes it.
#[test]
fn a_broadcast_past_the_memory_budget_is_refused_until_the_budget_is_raised() {
    // 6 stored i32s seen as (2^15, 2^10) with strides (0, 0): 128 MiB materialized.
    let bytes = checkpoint(6, 0, &[1 << 15, 1 << 10], &[0, 0], false);
    let r = OpenOptions::new().open_bytes(bytes.clone()).unwrap();
    let e = r.object("t").unwrap().bytes().unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::LimitExceeded, "{e}");
    assert!(e.message().contains("exceeds the memory budget of"), "{e}");
    assert!(r.verify().is_ok());
    let raised = OpenOptions::new()
        .memory_budget(256 << 20)
        .open_bytes(bytes)
        .unwrap();
    let values = raised.object("t").unwrap().bytes().unwrap();
    assert_eq!(values.len(), 128 << 20);
}
