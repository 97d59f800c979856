//! Caffe models written as Caffe writes them (protobuf over Caffe's own schema,
//! tools/interop/make_caffe.py): today's layout and the V1 layout of the BVLC model zoo.
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
    assert_eq!(files, 2);
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
