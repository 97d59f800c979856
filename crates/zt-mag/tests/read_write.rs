//! Our `.mag` writers against zt-mag's own reader and magnetron's samples
//! (fixtures/interop/mag): byte-for-byte layout, and what each layout cannot hold.
//! Tests that go through the `ztensor` facade stay in `crates/ztensor/tests/mag.rs`.

use zt_container::{ErrorKind, Source};
use zt_formats::{DType, ElementType};
use zt_mag::{parse, MagWriter, ParseOptions, TensorSpec, WriteVersion};
use zt_manifest::{Attributes, Value};

const V1_SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/interop/mag/v1_0.1.2.mag"
);

#[test]
fn our_version_1_writer_reproduces_magnetron_0_1_2_byte_for_byte() {
    // Same records in the same order as the sample; magnetron adds 128 trailing zero bytes
    // (a size over-estimate), which we do not reproduce.
    let sample_bytes = std::fs::read(V1_SAMPLE).unwrap();
    let r = parse(
        &Source::from_vec(sample_bytes.clone()),
        ParseOptions::default(),
    )
    .unwrap();
    // magnetron wrote its records in hash-slot order; we write in the order given.
    let meta: Vec<(&str, &Value)> = ["lr", "neg", "n_layers"]
        .iter()
        .map(|k| (*k, &r.metadata[*k]))
        .collect();
    let order = ["h", "idx", "w", "m"];
    let tensor = |n: &str| r.tensors.iter().find(|t| t.name == n).unwrap();
    let specs: Vec<TensorSpec> = order
        .iter()
        .map(|n| {
            let t = tensor(n);
            TensorSpec {
                name: (*n).into(),
                element: t.element.clone(),
                shape: t.shape.clone(),
            }
        })
        .collect();
    let mut w = MagWriter::new(Vec::new(), WriteVersion::V1, meta, &specs).unwrap();
    for n in order {
        let t = tensor(n);
        w.write_tensor(&sample_bytes[t.offset as usize..(t.offset + t.length) as usize])
            .unwrap();
    }
    let ours = w.finish().unwrap();
    assert_eq!(ours.len(), sample_bytes.len() - 128);
    assert_eq!(&ours[..], &sample_bytes[..ours.len()]);
    assert!(sample_bytes[ours.len()..].iter().all(|&b| b == 0));
}

#[test]
fn writers_refuse_what_a_layout_cannot_hold() {
    let spec = |name: &str, d: DType, shape: &[u64]| TensorSpec {
        name: name.into(),
        element: ElementType::plain(d),
        shape: shape.to_vec(),
    };
    let none = Attributes::new();
    let e = MagWriter::new(
        Vec::new(),
        WriteVersion::V1,
        attrs(&none),
        &[spec("x", DType::BF16, &[2])],
    )
    .unwrap_err();
    assert_eq!(
        (e.kind(), e.object()),
        (ErrorKind::InvalidArgument, Some("x"))
    );
    assert!(e
        .message()
        .contains("version 1 holds f32, f16, bool and i32, not bf16"));
    assert!(MagWriter::new(
        Vec::new(),
        WriteVersion::V1,
        attrs(&none),
        &[spec("s", DType::F32, &[])]
    )
    .unwrap_err()
    .message()
    .contains("ranks 1 to 6"));
    assert!(MagWriter::new(
        Vec::new(),
        WriteVersion::V1,
        attrs(&none),
        &[spec("z", DType::F32, &[0, 2])]
    )
    .unwrap_err()
    .message()
    .contains("dimensions >= 1"));
    let mut text = Attributes::new();
    text.insert("name".into(), Value::from("x"));
    let e = MagWriter::new(Vec::new(), WriteVersion::V1, attrs(&text), &[]).unwrap_err();
    assert!(
        e.message()
            .contains("metadata \"name\": version 1 holds i64 and f64 values, not a text value"),
        "{e}"
    );
    let mut bytes = Attributes::new();
    bytes.insert("raw".into(), Value::Bytes(vec![1]));
    let e = MagWriter::new(
        Vec::new(),
        WriteVersion::V300,
        attrs(&bytes),
        &[spec("x", DType::F32, &[1])],
    )
    .unwrap_err();
    assert!(
        e.message()
            .contains("metadata \"raw\": a byte string cannot be stored"),
        "{e}"
    );
    let e = MagWriter::new(
        Vec::new(),
        WriteVersion::V300,
        attrs(&none),
        &[spec("x", DType::F32, &[0])],
    )
    .unwrap_err();
    assert!(e.message().contains("at least one tensor with data"), "{e}");
}

fn attrs(a: &Attributes) -> impl Iterator<Item = (&str, &Value)> {
    a.iter().map(|(k, v)| (k.as_str(), v))
}

/// A version 300 manifest over 1 GiB is over the cap (`LimitExceeded`, at the length field),
/// not read: a sparse file, so the test writes next to nothing.
#[test]
fn a_manifest_over_the_cap_is_refused_before_it_is_read() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.mag");
    let meta_len = zt_mag::MAX_METADATA_LEN + 1;
    let blob_offset = (44 + meta_len).next_multiple_of(4096);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(b"MAG!").unwrap();
    f.write_all(&300u32.to_le_bytes()).unwrap();
    f.write_all(&0u32.to_le_bytes()).unwrap();
    for v in [44, meta_len, blob_offset, 0] {
        f.write_all(&v.to_le_bytes()).unwrap();
    }
    f.set_len(blob_offset).unwrap();
    drop(f);
    let source = zt_container::Source::map(&path).unwrap();
    let e = zt_mag::parse(&source, zt_mag::ParseOptions::default()).unwrap_err();
    assert_eq!(e.kind(), zt_container::ErrorKind::LimitExceeded, "{e}");
    assert_eq!(
        e.message(),
        "metadata of 1073741825 bytes exceeds the cap of 1073741824 bytes"
    );
    assert_eq!(e.offset(), Some(20));
}
