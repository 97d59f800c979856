//! Caffe models written as Caffe writes them (protobuf over Caffe's own schema,
//! tools/interop/make_caffe.py): today's layout, the V1 layout of the BVLC model zoo, and a
//! solver's snapshot with gradients.
//! Every blob lists and reads as protobuf parses it, shaped as Caffe shapes it, byte for byte
//! (fixtures/interop/caffe/expected.json), mapped and unmapped (tests/damage.rs sweeps the
//! files, fixtures/invalid/caffe_* are the reject corpus).

#[path = "support/expected.rs"]
mod expected;

use std::path::{Path, PathBuf};

use ztensor::{FileKind, FileVersion, OpenOptions, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/caffe")
}

#[test]
fn every_blob_reads_as_protobuf_parses_it() {
    let files =
        expected::check_every_file(&dir(), &expected::load(&dir()), "blobs", |file, r, _| {
            assert_eq!(r.version(), &FileVersion::Caffe, "{file}");
        });
    assert_eq!(files, 3);
}

#[test]
fn gradients_are_objects_of_their_own_as_pycaffe_names_them() {
    // snapshot.caffemodel: a solver's snapshot with `snapshot_diff`, each blob's gradients
    // beside its values (checked byte for byte with every blob above); ip2 has none.
    let r = ztensor::open(dir().join("snapshot.caffemodel")).unwrap();
    let diff = r.object("conv1.0.diff").unwrap();
    assert!(matches!(
        diff.bytes().unwrap(),
        std::borrow::Cow::Borrowed(_)
    ));
    assert_eq!(
        diff.attributes.get("caffe.type"),
        Some(&Value::Text("Convolution".into()))
    );
    assert_eq!(r.object("ip1.0.diff").unwrap().shape.as_slice(), [2, 36]);
    assert!(r.object("ip2.0.diff").is_err());
    // A `double_data` field that holds no values leaves `data` the values, as Caffe reads
    // it (it asks for `double_data_size() > 0`); so does an empty `diff`: no gradients.
    let model = net(
        2,
        &[bytes(8, &[]), bytes(5, &floats(0..2)), bytes(6, &[])].concat(),
    );
    assert_eq!(read(model.clone()), [0.0, 1.0]);
    assert!(OpenOptions::new()
        .open_bytes(model)
        .unwrap()
        .object("l.0.diff")
        .is_err());
    let with = net(
        2,
        &[bytes(5, &floats(0..2)), bytes(6, &floats(5..7))].concat(),
    );
    let r = OpenOptions::new().open_bytes(with).unwrap();
    assert_eq!(
        r.object("l.0.diff").unwrap().read_f32().unwrap(),
        [5.0, 6.0]
    );
}

#[test]
fn blobs_are_ranges_of_the_map_and_name_their_layer_type() {
    let r = ztensor::open(dir().join("lenet.caffemodel")).unwrap();
    assert_eq!(
        r.attributes().get("caffe.name"),
        Some(&Value::Text("LeNet".into()))
    );
    let o = r.object("conv1.0").unwrap();
    assert!(matches!(o.bytes().unwrap(), std::borrow::Cow::Borrowed(_)));
    assert_eq!(
        o.attributes.get("caffe.type"),
        Some(&Value::Text("Convolution".into()))
    );
    let v1 = ztensor::open(dir().join("v1.caffemodel")).unwrap();
    assert_eq!(
        v1.object("fc6.0").unwrap().attributes.get("caffe.type"),
        Some(&Value::Text("INNER_PRODUCT".into()))
    );
}

#[test]
fn the_bytes_tell_the_kind_without_the_name() {
    for file in ["lenet.caffemodel", "v1.caffemodel"] {
        let head = std::fs::read(dir().join(file)).unwrap();
        assert_eq!(
            ztensor::sniff(&head[..64], head.len() as u64, &[]),
            Some(FileKind::Caffe),
            "{file}"
        );
    }
}

#[test]
fn what_the_listing_takes_is_charged_to_the_memory_budget() {
    let e = OpenOptions::new()
        .memory_budget(4096)
        .open(dir().join("lenet.caffemodel"))
        .unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::LimitExceeded, "{e}");
    assert!(e.to_string().contains("listing the Caffe model"), "{e}");
}

// Blobs built byte by byte: what protobuf reads besides the one packed run it writes.
fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Field `n` of wire type 2 holding `body`.
fn bytes(n: u64, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    varint(n << 3 | 2, &mut f);
    varint(body.len() as u64, &mut f);
    f.extend(body);
    f
}

/// A net of one layer `l` whose one blob is shape `[n]` and `values` (fields, encoded).
fn net(n: u8, values: &[u8]) -> Vec<u8> {
    let mut blob = bytes(7, &bytes(1, &[n]));
    blob.extend(values);
    let mut layer = bytes(1, b"l");
    layer.extend(bytes(7, &blob));
    bytes(100, &layer)
}

fn floats(range: std::ops::Range<u32>) -> Vec<u8> {
    range.flat_map(|i| (i as f32).to_le_bytes()).collect()
}

/// The blob's values, as the reader decodes them.
fn read(model: Vec<u8>) -> Vec<f32> {
    let r = OpenOptions::new().open_bytes(model).unwrap();
    let bytes = r.object("l.0").unwrap().bytes().unwrap().into_owned();
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn values_read_as_protobuf_reads_them_packed_split_or_unpacked() {
    let want: Vec<f32> = (0..4).map(|i| i as f32).collect();
    assert_eq!(read(net(4, &bytes(5, &floats(0..4)))), want);
    // Two packed runs: protobuf concatenates them.
    let mut split = bytes(5, &floats(0..1));
    split.extend(bytes(5, &floats(1..4)));
    assert_eq!(read(net(4, &split)), want);
    // Unpacked: each value its own field (key 0x2d: field 5, wire type 5).
    let unpacked: Vec<u8> = (0..4u32)
        .flat_map(|i| [vec![0x2d], (i as f32).to_le_bytes().to_vec()].concat())
        .collect();
    assert_eq!(read(net(4, &unpacked)), want);
    // With another field between them (the shape, given again: the last stands), and beside
    // a packed run: protobuf gathers the field's values wherever they are.
    let (front, back) = unpacked.split_at(10);
    let apart = [front, &bytes(7, &bytes(1, &[4])), back].concat();
    assert_eq!(read(net(4, &apart)), want);
    let mixed = [&bytes(5, &floats(0..2)), &unpacked[10..]].concat();
    assert_eq!(read(net(4, &mixed)), want);
    // A value of another wire type is an unknown field to protobuf.
    let mut odd = bytes(5, &floats(0..4));
    odd.extend([0x28, 0x07]);
    assert_eq!(read(net(4, &odd)), want);
}

#[test]
fn runs_that_are_not_whole_values_are_refused_as_protobuf_refuses_them() {
    let mut split = bytes(5, &floats(0..4)[..6]);
    split.extend(bytes(5, &floats(0..4)[6..]));
    let e = OpenOptions::new().open_bytes(net(4, &split)).unwrap_err();
    assert!(
        e.message()
            .contains("a run of 6 bytes of f32 values is not whole values"),
        "{e}"
    );
}
