//! Pickles of NumPy arrays written by Paddle's `paddle.save` and by Python's `pickle`,
//! protocols 2 to 5 (tools/interop/make_pickle.py): every array lists and reads as
//! `pickle.load` reads it, byte for byte (fixtures/interop/pickle/expected.json), mapped
//! and unmapped; arrays that hold no numbers are listed and skipped; other leaves are the
//! file's attributes (tests/damage.rs sweeps the files, fixtures/invalid/pickle_* are the
//! reject corpus).

#[path = "support/expected.rs"]
mod expected;

use std::path::{Path, PathBuf};

use ztensor::{FileKind, FileVersion, OpenOptions, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/pickle")
}

fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_array_reads_as_pickle_load_reads_it() {
    let expected = expected();
    let files = expected["files"].as_object().unwrap();
    assert_eq!(files.len(), 9);
    for (file, want) in files {
        let arrays = want["arrays"].as_object().unwrap();
        let skipped = want["skipped"].as_array().unwrap();
        for unmapped in [false, true] {
            let r = OpenOptions::new()
                .unmapped(unmapped)
                .open(dir().join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            let protocol = file
                .strip_suffix(".pkl")
                .and_then(|f| f.strip_prefix("arrays_p"))
                .map(|p| p.parse().unwrap())
                .unwrap_or(if file.contains("protocol2") { 2 } else { 4 });
            assert_eq!(r.version(), &FileVersion::Pickle { protocol }, "{file}");
            assert_eq!(r.len(), arrays.len() + skipped.len(), "{file}");
            for (name, want) in arrays {
                expected::check_object(&r, file, name, want);
            }
            for name in skipped {
                let o = r.object(name.as_str().unwrap()).unwrap();
                assert!(o.skipped().is_some(), "{file} {name}");
            }
            // A whole read checks what it touches, and skips what holds no numbers.
            let report = r.verify();
            assert!(report.is_ok(), "{file}: {:?}", report.failures);
            assert_eq!(report.skipped.len(), skipped.len(), "{file}");
        }
    }
}

#[test]
fn zero_copy_from_the_map_except_latin1_text() {
    let r = ztensor::open(dir().join("arrays_p4.pkl")).unwrap();
    let o = r.object("params.large").unwrap();
    let bytes = o.bytes().unwrap();
    assert!(matches!(bytes, std::borrow::Cow::Borrowed(_)));
    let p2 = ztensor::open(dir().join("arrays_p2.pkl")).unwrap();
    let o = p2.object("params.large").unwrap();
    assert_eq!(o.components[0].encoding.name(), "latin1-text");
    assert_eq!(o.bytes().unwrap(), bytes);
}

#[test]
fn paddle_names_and_attributes() {
    let expected = expected();
    let names = expected["files"]["paddle/paddle2.pdparams"]["paddle_names"]
        .as_object()
        .unwrap();
    let r = ztensor::open(dir().join("paddle/paddle2.pdparams")).unwrap();
    for (key, inner) in names {
        let o = r.object(key).unwrap();
        assert_eq!(
            o.attributes.get("paddle.name"),
            Some(&Value::Text(inner.as_str().unwrap().to_owned())),
            "{key}"
        );
        // paddle.save's own map of structured names to parameter names: attributes.
        let attr = format!("StructuredToParameterName@@.{key}");
        assert_eq!(
            r.attributes().get(&attr),
            Some(&Value::Text(inner.as_str().unwrap().to_owned()))
        );
    }
    let p4 = ztensor::open(dir().join("arrays_p4.pkl")).unwrap();
    let attrs = p4.attributes();
    assert_eq!(attrs.get("step"), Some(&Value::Integer(3)));
    assert_eq!(attrs.get("lr"), Some(&Value::Float(0.125)));
    assert_eq!(attrs.get("name"), Some(&Value::Text("adam".into())));
    // Bytes Python 3 pickled as latin-1 text (protocol 2) are bytes again.
    let p2 = b"\x80\x02}X\x03\x00\x00\x00tagc_codecs\nencode\nX\x04\x00\x00\x00\xc3\xa9ab\
               X\x06\x00\x00\x00latin1\x86Rs.";
    let r = OpenOptions::new().open_bytes(p2.to_vec()).unwrap();
    assert_eq!(
        r.attributes().get("tag"),
        Some(&Value::Bytes(vec![0xe9, b'a', b'b']))
    );
    // NumPy scalars are the numbers they hold, at every protocol.
    for protocol in 2..=5 {
        let r = ztensor::open(dir().join(format!("arrays_p{protocol}.pkl"))).unwrap();
        let attrs = r.attributes();
        let want = [
            ("npscalar", Value::Float(1.5)),
            ("npscalars.i64", Value::Integer(-7)),
            ("npscalars.u8", Value::Integer(200)),
            ("npscalars.bool", Value::Bool(true)),
            ("npscalars.f16", Value::Float(0.5)),
            ("npscalars.f64", Value::Float(2.25)),
            ("npscalars.big", Value::Integer(5)),
        ];
        for (key, value) in want {
            assert_eq!(attrs.get(key), Some(&value), "protocol {protocol} {key}");
        }
    }
}

#[test]
fn sniffed_by_bytes_told_apart_from_legacy_torch() {
    for file in [
        "arrays_p2.pkl",
        "paddle/model.pdparams",
        "paddle/model.pdopt",
    ] {
        let head = std::fs::read(dir().join(file)).unwrap();
        assert_eq!(
            ztensor::sniff(&head[..64], head.len() as u64, &[]),
            Some(FileKind::Pickle),
            "{file}"
        );
    }
    for legacy in ["legacy.pt", "legacy_p4.pt"] {
        let path = dir().join("../pytorch").join(legacy);
        let head = std::fs::read(path).unwrap();
        assert_eq!(
            ztensor::sniff(&head[..64], head.len() as u64, &[]),
            Some(FileKind::PyTorchLegacy),
            "{legacy}"
        );
    }
}

/// `{0: a, 1: a, ...}`: one small array named `count` times by a two-byte memo fetch each.
fn one_array_named(count: u32) -> Vec<u8> {
    let mut p = b"\x80\x04}(".to_vec();
    let key = |p: &mut Vec<u8>, i: u32| {
        p.push(b'J');
        p.extend(i.to_le_bytes());
    };
    key(&mut p, 0);
    p.extend(b"cnumpy._core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87R");
    p.extend(b"(K\x01K\x01\x85cnumpy\ndtype\n\x8c\x02f4\x89\x88\x87R(K\x03\x8c\x01<NNN");
    p.extend(b"J\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89C\x04\x00\x00\x80?tb");
    p.extend(b"\x94");
    for i in 1..count {
        // As pickle batches them: SETITEMS every 1,000 items.
        if i % 1000 == 0 {
            p.extend(b"u(");
        }
        key(&mut p, i);
        p.extend(b"h\x00");
    }
    p.extend(b"u.");
    p
}

#[test]
fn names_made_by_memo_fetches_are_charged_to_the_listing_budget() {
    let small = OpenOptions::new().open_bytes(one_array_named(3)).unwrap();
    assert_eq!(small.len(), 3);
    assert_eq!(small.object("2").unwrap().read_f32().unwrap(), [1.0]);
    // 400,000 names in 2.8 MB: far more than the 256 MiB a listing may take by default.
    let e = OpenOptions::new()
        .open_bytes(one_array_named(400_000))
        .unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::LimitExceeded, "{e}");
    assert!(e.to_string().contains("listing the pickle's arrays"), "{e}");
}
