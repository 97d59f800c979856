//! Flax checkpoints written by flax itself and by transformers (tools/interop/make_flax.py):
//! every array lists and reads as flax's reader reads it, byte for byte
//! (fixtures/interop/flax/expected.json), mapped and unmapped; the other leaves are the file's
//! attributes; an array flax stored in pieces reads whole; transformers'
//! shards open as a set through their index (tests/damage.rs sweeps the files).

#[path = "support/expected.rs"]
mod expected;

use std::path::{Path, PathBuf};

use ztensor::{FileVersion, OpenOptions, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/flax")
}

fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Our attribute value as the JSON flax's leaf gives.
fn json(v: &Value) -> serde_json::Value {
    match v {
        Value::Integer(i) => serde_json::json!(i64::try_from(*i).unwrap()),
        Value::Float(f) => serde_json::json!(f),
        Value::Text(t) => serde_json::json!(t),
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::json!(b),
        Value::Array(a) => serde_json::Value::Array(a.iter().map(json).collect()),
        other => panic!("unexpected attribute {other:?}"),
    }
}

#[test]
fn every_array_reads_as_flax_reads_it() {
    let expected = expected();
    let files = expected["files"].as_object().unwrap();
    assert_eq!(files.len(), 3);
    for (file, want) in files {
        let arrays = want["arrays"].as_object().unwrap();
        let chunked = want["chunked"].as_object().cloned().unwrap_or_default();
        for unmapped in [false, true] {
            let r = OpenOptions::new()
                .unmapped(unmapped)
                .open(dir().join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(r.version(), &FileVersion::Flax);
            assert_eq!(r.len(), arrays.len() + chunked.len(), "{file}");
            for (name, want) in arrays {
                expected::check_object(&r, file, name, want);
            }
            // An array flax stored in pieces reads whole, its pieces one after the other.
            for (name, want) in &chunked {
                expected::check_object(&r, file, name, want);
                let o = r.object(name).unwrap();
                assert_eq!(o.components[0].encoding.name(), "pieces", "{file} {name}");
            }
            let attributes: serde_json::Map<String, serde_json::Value> = r
                .attributes()
                .iter()
                .map(|(k, v)| (k.clone(), json(v)))
                .collect();
            assert_eq!(
                &attributes,
                want["attributes"].as_object().unwrap(),
                "{file}"
            );
        }
    }
}

#[cfg(feature = "sharded")]
#[test]
fn transformers_shards_open_as_a_set() {
    let expected = expected();
    let want = expected["sharded"].as_object().unwrap();
    let index = dir().join("sharded/flax_model.msgpack.index.json");
    assert_eq!(ztensor::model_file(&dir().join("sharded")).unwrap(), index);
    let set = ztensor::ShardedSet::open(&index).unwrap();
    assert!(set.names().eq(want.keys().map(String::as_str)));
    set.check().unwrap();
    for (name, want) in want {
        expected::check_view(&set.object(name).unwrap(), "sharded", name, want);
    }
}
