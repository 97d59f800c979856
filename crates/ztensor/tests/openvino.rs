//! OpenVINO models (IR) written by OpenVINO's own `save_model`
//! (tools/interop/make_openvino.py): constants of ten types, a scalar and an empty one, saved
//! as they are and with OpenVINO's default f16 compression, and constants of its packed and
//! 8-bit float types. Every constant lists and reads as
//! OpenVINO's reader holds it, byte for byte (fixtures/interop/openvino/expected.json),
//! mapped and unmapped, from the `.bin` beside the `.xml` (tests/damage.rs sweeps the files,
//! fixtures/invalid/openvino_* are the reject corpus).

#[path = "support/expected.rs"]
mod expected;

use std::path::{Path, PathBuf};

use ztensor::{ErrorKind, FileKind, FileVersion, OpenOptions, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/openvino")
}

#[test]
fn every_constant_reads_as_openvino_holds_it() {
    let files = expected::check_every_file(
        &dir(),
        &expected::load(&dir()),
        "constants",
        |file, r, _| {
            assert_eq!(r.version(), &FileVersion::OpenVino, "{file}");
        },
    );
    assert_eq!(files, 3);
}

#[test]
fn packed_constants_read_as_the_values_openvino_unpacks() {
    let expected = expected::load(&dir());
    let constants = &expected["files"]["packed.xml"]["constants"];
    let r = ztensor::open(dir().join("packed.xml")).unwrap();
    // nf4: each of its sixteen codes, as OpenVINO's CPU plugin converts them to f32.
    for kind in ["u2", "u4", "nf4"] {
        let want: Vec<f32> = constants[kind]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let got = r.object(kind).unwrap().read_f32().unwrap();
        assert_eq!(&got[..], &want[..], "{kind}");
    }
    // u1, u3, u6: read as u8 (checked with every constant above), from OpenVINO's bit
    // planes as it stores them in the .bin.
    let bin = std::fs::read(dir().join("packed.bin")).unwrap();
    for kind in ["u1", "u3", "u6"] {
        let o = r.object(kind).unwrap();
        let c = o.main_component().unwrap();
        assert_eq!(c.encoding.name(), "bit-planes", "{kind}");
        let stored = &bin[c.offset as usize..(c.offset + c.length) as usize];
        let hex: String = stored.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, constants[kind]["stored"].as_str().unwrap(), "{kind}");
    }
    // The values tools/interop/make_openvino.py gave OpenVINO to pack (its get_vector
    // unpacks none of these types).
    let given: [(&str, &[f32]); 2] = [
        ("i4", &[-8.0, 7.0, -1.0, 0.0, 3.0]),
        ("f4e2m1", &[0.5, -6.0, 1.5]),
    ];
    for (kind, want) in given {
        let got = r.object(kind).unwrap().read_f32().unwrap();
        assert_eq!(&got[..], want, "{kind}");
    }
}

#[test]
fn constants_are_ranges_of_the_weights_file() {
    let r = ztensor::open(dir().join("model.xml")).unwrap();
    assert_eq!(
        r.attributes().get("openvino.version"),
        Some(&Value::Text("11".into()))
    );
    assert_eq!(r.shards().len(), 1);
    let o = r.object("dense1.weight").unwrap();
    assert_eq!(o.components[0].file, 1);
    assert!(matches!(o.bytes().unwrap(), std::borrow::Cow::Borrowed(_)));
    let head = std::fs::read(dir().join("model.xml")).unwrap();
    assert_eq!(
        ztensor::sniff(&head[..256], head.len() as u64, &[]),
        Some(FileKind::OpenVino)
    );
}

#[test]
fn without_its_weights_file_a_model_says_which_file_it_lacks() {
    let tmp = tempfile::tempdir().unwrap();
    let xml = tmp.path().join("lonely.xml");
    std::fs::copy(dir().join("model.xml"), &xml).unwrap();
    let e = ztensor::open(&xml).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(e.to_string().contains("lonely.bin"), "{e}");
    // From bytes there is no folder: the constants are listed, and unreadable.
    let r = OpenOptions::new()
        .open_bytes(std::fs::read(dir().join("model.xml")).unwrap())
        .unwrap();
    let o = r.object("dense1.weight").unwrap();
    assert_eq!(o.dims().unwrap(), vec![8, 16]);
    let e = o.bytes().unwrap_err();
    assert!(e.to_string().contains(".bin"), "{e}");
}

#[test]
fn what_the_listing_takes_is_charged_to_the_memory_budget() {
    let e = OpenOptions::new()
        .memory_budget(4096)
        .open(dir().join("model.xml"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert!(e.to_string().contains("listing the OpenVINO model"), "{e}");
}
