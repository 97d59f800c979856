//! Slices of dense objects (`ObjectView::slice_bytes`): every box of every kind of file and
//! storage (raw and zstd, little- and big-endian, mapped and unmapped, .zt, .safetensors and
//! .mag) gives the bytes a gather from the whole tensor gives; whole rows of a mapped raw
//! tensor are borrowed; wrong boxes and non-dense objects are refused.

use std::borrow::Cow;
use std::ops::Range;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use ztensor::{ErrorKind, OpenOptions, WriteOptions};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// The box's bytes cut out of the whole tensor's bytes, element by element: the reference.
fn gather(whole: &[u8], shape: &[u64], ranges: &[Range<u64>], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let count: u64 = ranges.iter().map(|r| r.end - r.start).product();
    for flat in 0..count {
        // Index inside the box, row-major, then its offset in the tensor.
        let mut rest = flat;
        let mut offset = 0u64;
        let mut stride = 1u64;
        for d in (0..shape.len()).rev() {
            let extent = ranges[d].end - ranges[d].start;
            let i = ranges[d].start + rest % extent;
            rest /= extent;
            offset += i * stride;
            stride *= shape[d];
        }
        let at = offset as usize * size;
        out.extend_from_slice(&whole[at..at + size]);
    }
    out
}

/// Every box of every dense object of the file at `path` (for small shapes), opened mapped
/// and unmapped.
fn check_every_box(path: &Path) {
    for unmapped in [false, true] {
        let r = OpenOptions::new().unmapped(unmapped).open(path).unwrap();
        for o in &r {
            if o.format != ztensor::Format::Dense || o.defect.is_some() {
                continue;
            }
            let element = o.component("data").unwrap().element.clone();
            if element
                .logical
                .as_ref()
                .is_some_and(|t| t.packed_bits().is_some())
            {
                assert_eq!(
                    o.slice_bytes(&full(o.shape())).unwrap_err().kind(),
                    ErrorKind::Unsupported
                );
                continue;
            }
            let Ok(whole) = o.bytes() else { continue };
            let size = element.logical_size() as usize;
            let shape = o.shape().to_vec();
            if shape.iter().product::<u64>() > 4096 || shape.len() > 3 {
                continue;
            }
            for ranges in boxes(&shape) {
                let got = o.slice_bytes(&ranges).unwrap();
                let want = gather(&whole, &shape, &ranges, size);
                let at = format!("{}: {} {ranges:?}", path.display(), o.name());
                assert_eq!(&got[..], &want[..], "{at}");
                // The same bytes written into a buffer of the caller's; one byte more or less
                // is refused.
                let mut into = vec![0xA5u8; want.len()];
                o.slice_bytes_into(&ranges, &mut into).unwrap();
                assert_eq!(into, want, "{at}");
                let mut longer = vec![0u8; want.len() + 1];
                let e = o.slice_bytes_into(&ranges, &mut longer).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{at}: {e}");
            }
        }
    }
}

fn full(shape: &[u64]) -> Vec<Range<u64>> {
    shape.iter().map(|&n| 0..n).collect()
}

/// A spread of boxes: whole, first and last index of each dimension, an inner block.
fn boxes(shape: &[u64]) -> Vec<Vec<Range<u64>>> {
    let mut out = vec![full(shape)];
    for d in 0..shape.len() {
        let n = shape[d];
        for r in [0..n.min(1), n.saturating_sub(1)..n, n / 3..n - n / 3, 0..0] {
            let mut b = full(shape);
            b[d] = r;
            out.push(b);
        }
    }
    out.push(shape.iter().map(|&n| n / 4..n - n / 4).collect());
    out
}

#[test]
fn every_box_of_every_fixture_kind() {
    let mut files = vec![
        fixtures().join("interop/v123_all.zt"),
        fixtures().join("interop/v014.zt"),
        fixtures().join("interop/safetensors/numpy.safetensors"),
        fixtures().join("interop/zt2/03_zstd_seekable_a4k.zt"),
        fixtures().join("interop/zt2/06_sharded.zt"),
        fixtures().join("interop/numpy/all.npz"),
        fixtures().join("interop/numpy/all_deflated.npz"),
        fixtures().join("interop/pytorch/state_dict.pt"),
        fixtures().join("interop/pytorch/big_endian.pt"),
        fixtures().join("interop/pytorch/legacy.pt"),
    ];
    for name in [
        "dtypes.zt",
        "dtypes_zstd.zt",
        "v01_big_endian.zt",
        "mag_v300.mag",
        "scalars.zt",
        "zero_size.zt",
    ] {
        files.push(fixtures().join("valid").join(name));
    }
    for f in files {
        check_every_box(&f);
    }
}

#[test]
fn whole_rows_of_a_mapped_raw_tensor_are_borrowed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.zt");
    let values: Vec<f32> = (0..60).map(|i| i as f32).collect();
    let mut w = ztensor::Writer::create(&path).unwrap();
    w.add("raw", &[4, 5, 3], &values).unwrap();
    w.add_with(
        "z",
        &[4, 5, 3],
        &values,
        Default::default(),
        WriteOptions {
            compression: Some(3),
            digest: None,
        },
    )
    .unwrap();
    w.finish().unwrap();
    let r = ztensor::open(&path).unwrap();
    let raw = r.object("raw").unwrap();
    assert!(matches!(
        raw.slice_bytes(&[1..3, 0..5, 0..3]).unwrap(),
        Cow::Borrowed(_)
    ));
    // One row of one matrix is one run too.
    assert!(matches!(
        raw.slice_bytes(&[2..3, 1..2, 0..3]).unwrap(),
        Cow::Borrowed(_)
    ));
    // Columns are gathered; compressed data is decoded.
    assert!(matches!(
        raw.slice_bytes(&[0..4, 0..5, 1..2]).unwrap(),
        Cow::Owned(_)
    ));
    let z = r.object("z").unwrap();
    assert_eq!(
        z.slice_bytes(&[1..3, 0..5, 0..3]).unwrap(),
        raw.slice_bytes(&[1..3, 0..5, 0..3]).unwrap()
    );
}

#[test]
fn wrong_boxes_and_non_dense_objects_are_refused() {
    let r = ztensor::open(fixtures().join("interop/v123_all.zt")).unwrap();
    let d = r.object("dense_f32").unwrap();
    let e = d.slice_bytes(&[0..4, 0..5]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("does not fit its size"), "{e}");
    assert_eq!(
        d.slice_bytes(std::slice::from_ref(&(0..1)))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    let csr = r.object("csr").unwrap();
    let e = csr.slice_bytes(&[0..1, 0..1]).unwrap_err();
    assert!(e.to_string().contains("not dense"), "{e}");
}

/// A box of `shape` from random `picks`: each pair clamped into its dimension, in order.
fn box_of(shape: &[u64], picks: &[(u64, u64)]) -> Vec<Range<u64>> {
    shape
        .iter()
        .zip(picks)
        .map(|(&d, &(a, b))| {
            let (a, b) = (a.min(d), b.min(d));
            a.min(b)..a.max(b)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_boxes_equal_the_gather(
        shape in prop::collection::vec(1u64..6, 1..4),
        picks in prop::collection::vec((0u64..6, 0u64..6), 3),
        zstd in any::<bool>(),
        unmapped in any::<bool>(),
    ) {
        let n: u64 = shape.iter().product();
        let values: Vec<u16> = (0..n as u16).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.zt");
        let mut w = ztensor::Writer::create(&path).unwrap();
        let opts = WriteOptions { compression: zstd.then_some(1), digest: None };
        w.add_with("t", &shape, &values, Default::default(), opts).unwrap();
        w.finish().unwrap();
        let ranges = box_of(&shape, &picks);
        let r = OpenOptions::new().unmapped(unmapped).open(&path).unwrap();
        let o = r.object("t").unwrap();
        let whole = o.bytes().unwrap();
        let got = o.slice_bytes(&ranges).unwrap();
        let want = gather(&whole, &shape, &ranges, 2);
        prop_assert_eq!(&got[..], &want[..]);
        let mut into = vec![0xA5u8; want.len()];
        o.slice_bytes_into(&ranges, &mut into).unwrap();
        prop_assert_eq!(into, want);
    }
}

/// The `bits`-bit codes packed lowest bits first, as the file stores them.
fn pack(codes: &[u8], bits: u64) -> Vec<u8> {
    let mut out = vec![0u8; (codes.len() as u64 * bits).div_ceil(8) as usize];
    for (i, &c) in codes.iter().enumerate() {
        for b in 0..bits {
            let at = i as u64 * bits + b;
            if c >> b & 1 == 1 {
                out[(at / 8) as usize] |= 1 << (at % 8);
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A box of packed sub-byte elements is sliced exactly when it starts and ends on byte
    /// boundaries in rows of whole bytes (or one row), and is then the box's codes, packed.
    #[test]
    fn packed_boxes_on_byte_boundaries_are_their_packed_codes(
        shape in prop::collection::vec(1u64..9, 0..3),
        picks in prop::collection::vec((0u64..9, 0u64..9), 2),
        bits in prop::sample::select(vec![2u64, 4, 6]),
        zstd in any::<bool>(),
    ) {
        use ztensor::{ComponentData, DType, ElementType, Format, LogicalType, ObjectData};
        let n: u64 = shape.iter().product();
        let codes: Vec<u8> = (0..n).map(|i| ((i * 7 + 3) % (1 << bits)) as u8).collect();
        let logical = match bits { 2 => LogicalType::U2, 4 => LogicalType::U4, _ => LogicalType::F6E2M3 };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.zt");
        let mut w = ztensor::Writer::create(&path).unwrap();
        w.set_options(WriteOptions { compression: zstd.then_some(1), digest: None });
        let data = ObjectData {
            shape: shape.clone(),
            format: Format::Dense,
            attributes: Default::default(),
            components: vec![ComponentData {
                role: "data".into(),
                element: ElementType { dtype: DType::U8, logical: Some(logical) },
                bytes: Cow::Owned(pack(&codes, bits)),
            }],
        };
        w.add_object("t", data).unwrap();
        w.finish().unwrap();
        let ranges = box_of(&shape, &picks);
        let r = ztensor::open(&path).unwrap();
        let got = r.object("t").unwrap().slice_bytes(&ranges);
        let empty = ranges.iter().any(|r| r.is_empty());
        // The rule: dimensions taken whole join the one outside them; then the rows of the
        // last are whole bytes (or there is one row), and the box starts and ends on a byte
        // in it (or at the row's end).
        let (mut dims, mut picked) = (shape.clone(), ranges.clone());
        while dims.len() >= 2 && picked[picked.len() - 1] == (0..dims[dims.len() - 1]) {
            let n = dims.pop().unwrap();
            picked.pop();
            *dims.last_mut().unwrap() *= n;
            let r = picked.last_mut().unwrap();
            *r = r.start * n..r.end * n;
        }
        let aligned = match (dims.split_last(), picked.last()) {
            (Some((&last, leading)), Some(inner)) => {
                (last * bits % 8 == 0 || leading.iter().all(|&d| d == 1))
                    && inner.start * bits % 8 == 0
                    && (inner.end * bits % 8 == 0 || inner.end == last)
            }
            _ => true,
        };
        prop_assert_eq!(got.is_ok(), empty || aligned, "{:?}", got.as_ref().err());
        if let Ok(bytes) = got {
            let boxed = gather(&codes, &shape, &ranges, 1);
            prop_assert_eq!(&bytes[..], &pack(&boxed, bits)[..]);
        }
    }
}

/// A slice of a seekable zstd part decodes only the frames that hold it: with a frame it does
/// not touch damaged, the slice still reads, while the whole read and a slice that reaches the
/// damaged frame fail, naming it. Boxes within a frame, across frames and of columns give the
/// same bytes as the whole read.
#[test]
fn slices_of_seekable_zstd_decode_only_their_frames() {
    // 1536 rows of 1024 u16 (2 KiB a row): three frames of 1 MiB, 512 rows each.
    let shape = [1536u64, 1024];
    let values: Vec<u16> = (0..1536u32 * 1024)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 20) as u16)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.zt");
    let mut w = ztensor::Writer::create(&path).unwrap();
    let opts = WriteOptions {
        compression: Some(1),
        digest: None,
    };
    w.add_with("t", &shape, &values, Default::default(), opts)
        .unwrap();
    w.finish().unwrap();
    let whole: Vec<u8> = bytemuck::cast_slice(&values).to_vec();
    for unmapped in [false, true] {
        let r = OpenOptions::new().unmapped(unmapped).open(&path).unwrap();
        let o = r.object("t").unwrap();
        for ranges in [
            vec![10..20, 0..1024],
            vec![500..530, 0..1024],
            vec![1535..1536, 1000..1024],
            vec![0..1536, 7..9],
            vec![300..700, 100..101],
            vec![5..5, 0..1024],
        ] {
            let got = o.slice_bytes(&ranges).unwrap();
            assert_eq!(
                &got[..],
                &gather(&whole, &shape, &ranges, 2)[..],
                "{ranges:?}"
            );
        }
    }
    // Damage the last frame's compressed bytes.
    let r = ztensor::open(&path).unwrap();
    let c = r.objects()[0].components[0].clone();
    assert!(matches!(
        c.encoding,
        ztensor::formats::Encoding::ZstdSeekable
    ));
    let mut bytes = std::fs::read(&path).unwrap();
    let stored = &bytes[c.offset as usize..(c.offset + c.length) as usize];
    let frames = ztensor::formats::seekable::parse_seek_table(stored, 1536 * 2048).unwrap();
    assert_eq!(frames.len(), 3);
    let at = (c.offset + frames[2].offset + frames[2].compressed / 2) as usize;
    bytes[at] ^= 0x55;
    drop(r);
    std::fs::write(&path, &bytes).unwrap();
    let r = ztensor::open(&path).unwrap();
    let o = r.object("t").unwrap();
    let rows = o.slice_bytes(&[10..20, 0..1024]).unwrap();
    assert_eq!(&rows[..], &whole[10 * 2048..20 * 2048]);
    let e = o.bytes().unwrap_err().to_string();
    assert!(e.contains("frame 2"), "{e}");
    let e = o.slice_bytes(&[1030..1040, 0..1024]).unwrap_err();
    assert!(e.to_string().contains("frame 2"), "{e}");
    // Where: the damaged frame's first byte in the file, as the whole read says.
    let whole_error = o.bytes().unwrap_err();
    assert_eq!(e.offset(), Some(c.offset + frames[2].offset), "{e}");
    assert_eq!(e.offset(), whole_error.offset());
}

/// An object of a type unknown here holds whatever bytes its writer gave it (v2 never judges
/// their size): `future` in `v2_structural.zt` has shape [999] and 8 bytes. A box placed by
/// its shape would read the bytes of the objects after it; it is refused, mapped or not, and
/// the whole part still reads.
#[test]
fn a_part_its_shape_does_not_fit_is_not_sliced() {
    let path = fixtures().join("valid/v2_structural.zt");
    for unmapped in [false, true] {
        let r = OpenOptions::new().unmapped(unmapped).open(&path).unwrap();
        let o = r.object("future").unwrap();
        assert_eq!(o.shape.to_vec(), vec![999]);
        for ranges in [0..2, 0..999, 500..900] {
            let e = o.slice_bytes(std::slice::from_ref(&ranges)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
            let message = e.to_string();
            assert!(
                message.contains("holds 8 bytes, not the 999 its shape [999] takes"),
                "{message}"
            );
            let mut out = vec![0u8; (ranges.end - ranges.start) as usize];
            let e = o.slice_bytes_into(&[ranges], &mut out).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        }
        assert_eq!(o.component("data").unwrap().bytes().unwrap().len(), 8);
    }
}
