//! TensorFlow checkpoints written by TensorFlow itself (tools/interop/make_tensorflow.py):
//! every tensor lists and reads as `tf.train.load_checkpoint` reads it, byte for byte
//! (fixtures/interop/tensorflow/expected.json, `checkpoints`), mapped and unmapped, across
//! several data files, and a SavedModel's variables from its folder; each tensor's CRC-32C is
//! checked by `verify`; strings are listed and skipped, a variable split into slices across
//! data files reads whole (each slice's CRC-32C checked); damage is refused.

#[path = "support/expected.rs"]
mod expected;

use std::path::{Path, PathBuf};

use ztensor::{ErrorKind, FileVersion, OpenOptions};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/tensorflow/ckpt")
}

/// Where the checkpoint recorded under `key` lies: `ckpt/KEY.index`, and for the SavedModel
/// the checkpoint of its variables, found from its folder as `zt` and `ztio` find it.
fn index_of(key: &str) -> PathBuf {
    if key == "saved_model" {
        let folder = dir().join("../saved_model");
        let index = ztensor::model_file(&folder).unwrap();
        assert_eq!(index, folder.join("variables/variables.index"));
        return index;
    }
    if key == "v1" {
        return dir().join("v1.ckpt");
    }
    dir().join(format!("{key}.index"))
}

/// The variable `make_tensorflow.py` has TensorFlow split into slices across data files.
const SLICED: &str = "split/.ATTRIBUTES/VARIABLE_VALUE";
/// Variables whose slices are boxes of other shapes than whole rows.
const BOXED: [&str; 3] = [
    "cols",
    "m/.ATTRIBUTES/VARIABLE_VALUE",
    "t/.ATTRIBUTES/VARIABLE_VALUE",
];

#[test]
fn every_tensor_reads_as_tensorflow_reads_it() {
    let text = std::fs::read_to_string(dir().join("../expected.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    let checkpoints = expected["checkpoints"].as_object().unwrap();
    assert_eq!(checkpoints.len(), 7);
    let mut read = 0;
    for (key, want) in checkpoints {
        let file = key.to_owned();
        let tensors = want["tensors"].as_object().unwrap();
        let strings = want["strings"].as_array().unwrap();
        let unread = want["unread"].as_array().cloned().unwrap_or_default();
        for unmapped in [false, true] {
            let r = OpenOptions::new()
                .unmapped(unmapped)
                .open(index_of(key))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            let version = if key == "v1" {
                FileVersion::TfCheckpointV1
            } else {
                FileVersion::TfCheckpoint
            };
            assert_eq!(r.version(), &version);
            assert_eq!(
                r.len(),
                tensors.len() + strings.len() + unread.len(),
                "{file}"
            );
            for name in &unread {
                let e = r
                    .object(name.as_str().unwrap())
                    .unwrap()
                    .bytes()
                    .unwrap_err();
                assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
            }
            for (name, want) in tensors {
                // A variable split into slices reads whole: slices of whole rows placed one
                // after another, boxes of other shapes each where it lies.
                let encoding = r.object(name).unwrap().components[0]
                    .encoding
                    .name()
                    .to_owned();
                if name == SLICED || name == "rows" {
                    assert_eq!(encoding, "pieces");
                }
                if BOXED.contains(&name.as_str()) {
                    assert_eq!(encoding, "boxes");
                }
                expected::check_object(&r, &file, name, want);
                read += 1;
            }
            for name in strings {
                let o = r.object(name.as_str().unwrap()).unwrap();
                assert!(o.skipped().is_some(), "{file} {name}");
            }
        }
    }
    assert_eq!(read, 2 * (19 + 4 + 2 + 2 + 15 + 8 + 2));
    let report = ztensor::open(dir().join("all.index")).unwrap().verify();
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(report.checked, 19);
}

/// A data file's byte changed fails that tensor's CRC-32C; a missing data file, or an index
/// not named `.index`, is refused at open, naming what is wrong.
#[test]
fn damage_in_the_data_fails_its_crc_and_missing_data_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    for f in ["all.index", "all.data-00000-of-00001"] {
        std::fs::copy(dir().join(f), tmp.path().join(f)).unwrap();
    }
    let data = tmp.path().join("all.data-00000-of-00001");
    let r = ztensor::open(tmp.path().join("all.index")).unwrap();
    let o = r.object("f32/.ATTRIBUTES/VARIABLE_VALUE").unwrap();
    let at = o.components().next().unwrap().offset;
    drop(r);
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[at as usize] ^= 1;
    std::fs::write(&data, bytes).unwrap();
    let r = ztensor::open(tmp.path().join("all.index")).unwrap();
    let report = r.verify();
    assert!(!report.is_ok());
    let failure = format!("{report:?}");
    assert!(
        failure.contains("f32/.ATTRIBUTES/VARIABLE_VALUE"),
        "{failure}"
    );
    std::fs::remove_file(&data).unwrap();
    let e = ztensor::open(tmp.path().join("all.index")).unwrap_err();
    assert!(e.to_string().contains("all.data-00000-of-00001"), "{e}");
    std::fs::copy(dir().join("all.index"), tmp.path().join("renamed")).unwrap();
    let e = ztensor::open(tmp.path().join("renamed")).unwrap_err();
    assert!(e.to_string().contains("PREFIX.index"), "{e}");
}

/// A damaged slice of a partitioned variable fails its own CRC-32C when the variable is
/// read (a read of slices always copies, and checks as it copies), whether its slices are
/// rows or boxes, and `verify` reports it.
#[test]
fn a_damaged_slice_fails_its_crc() {
    for (prefix, name, files) in [
        ("sharded", SLICED, 7),
        ("boxes", "m/.ATTRIBUTES/VARIABLE_VALUE", 11),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut data_files = Vec::new();
        for e in std::fs::read_dir(dir()).unwrap() {
            let file = e.unwrap().file_name().into_string().unwrap();
            if file.starts_with(&format!("{prefix}.")) {
                std::fs::copy(dir().join(&file), tmp.path().join(&file)).unwrap();
                if file.contains(".data-") {
                    data_files.push(tmp.path().join(&file));
                }
            }
        }
        assert_eq!(data_files.len(), files, "{prefix}");
        let index = tmp.path().join(format!("{prefix}.index"));
        let o = ztensor::open(&index).unwrap();
        let whole = o.object(name).unwrap().read_f32().unwrap();
        assert!(!whole.is_empty());
        // The first byte of every data file: each starts with a slice of some variable.
        for f in &data_files {
            let mut bytes = std::fs::read(f).unwrap();
            if let Some(first) = bytes.first_mut() {
                *first ^= 0x40;
            }
            std::fs::write(f, bytes).unwrap();
        }
        let r = ztensor::open(&index).unwrap();
        let e = r.object(name).unwrap().read_f32().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ChecksumMismatch, "{prefix}: {e}");
        assert!(e.to_string().contains("CRC-32C"), "{e}");
        assert!(!r.verify().is_ok(), "{prefix}");
        drop(r);
        // A data file cut short: a slice past its end refuses the checkpoint at open.
        let last = data_files.iter().max().unwrap();
        std::fs::write(last, b"").unwrap();
        let e = ztensor::open(&index).unwrap_err();
        assert!(
            e.to_string().contains("past the end of its data file"),
            "{e}"
        );
    }
}
