//! Split GGUF models as llama.cpp's `llama-gguf-split` writes them
//! (tools/interop/make_gguf_split.py: fixtures/interop/gguf/split, the Q4_0 llama model of
//! fixtures/interop/ggml/to_gguf in three files): any of the files opens the model as one
//! set, as llama.cpp's loader reads it; damaged sets give llama.cpp's refusals, named.

use std::path::{Path, PathBuf};

use ztensor::{ErrorKind, ShardedSet, Value};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop")
}

fn split(n: u32) -> PathBuf {
    fixtures()
        .join("gguf/split")
        .join(format!("llama-q4_0-{n:05}-of-00003.gguf"))
}

#[test]
fn any_split_opens_the_model_the_splits_were_made_from() {
    let whole = ztensor::open(fixtures().join("ggml/to_gguf/llama-ggjt-v3-q4_0.gguf")).unwrap();
    for n in 1..=3 {
        assert!(ztensor::is_set_path(&split(n)));
        let set = ShardedSet::open(split(n)).unwrap();
        assert!(set.is_gguf_split());
        assert_eq!(set.shard_paths().count(), 3);
        set.check().unwrap();
        // The model's metadata, as the whole file has it: no split.* keys.
        assert_eq!(set.metadata(), whole.attributes(), "opened from split {n}");
        let mut names: Vec<_> = whole.names().collect();
        names.sort_unstable();
        assert_eq!(set.names().collect::<Vec<_>>(), names);
        for name in names {
            let o = set.object(name).unwrap();
            assert_eq!(o.shape(), whole.object(name).unwrap().shape(), "{name}");
            assert_eq!(
                o.bytes().unwrap(),
                whole.object(name).unwrap().bytes().unwrap(),
                "{name}"
            );
        }
    }
    // The first split alone, as a file, is one GGUF file with its split keys.
    let first = ztensor::open(split(1)).unwrap();
    assert_eq!(
        first.attributes().get("split.count"),
        Some(&Value::Integer(3))
    );
    assert_eq!(first.len(), 5);
}

/// The three splits copied into a new folder, `change` applied, the set opened from split 1.
fn damaged(change: impl FnOnce(&Path)) -> ztensor::Error {
    let dir = tempfile::tempdir().unwrap();
    for n in 1..=3 {
        std::fs::copy(split(n), dir.path().join(split(n).file_name().unwrap())).unwrap();
    }
    change(dir.path());
    let first = dir.path().join(split(1).file_name().unwrap());
    ShardedSet::open(first).unwrap_err()
}

#[test]
fn damaged_sets_are_refused_as_llama_cpp_refuses_them() {
    let name = |n: u32| split(n).file_name().unwrap().to_owned();
    // A split missing.
    let e = damaged(|d| std::fs::remove_file(d.join(name(2))).unwrap());
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(
        e.to_string().contains("llama-q4_0-00002-of-00003.gguf"),
        "{e}"
    );
    assert!(e.to_string().contains("is missing"), "{e}");
    // A split in another's place: its split.no says so.
    let e = damaged(|d| std::fs::copy(split(3), d.join(name(2))).map(drop).unwrap());
    assert!(
        e.to_string()
            .contains("split 2 of 3 has split.no Integer(2), where llama.cpp wants 1"),
        "{e}"
    );
    // A file of another kind in a split's place.
    let e = damaged(|d| {
        let zt = fixtures().join("ggml/llama-ggjt-v3-q4_0.bin");
        std::fs::copy(zt, d.join(name(3))).map(drop).unwrap()
    });
    assert!(e.to_string().contains("not a GGUF file"), "{e}");
}

/// Writes a GGUF file of `tensors` (name, value) with the split keys given.
fn write_split(path: &Path, tensors: &[&str], keys: &[(&str, &str, i128)]) {
    let zt = path.with_extension("zt");
    let mut w = ztensor::Writer::create(&zt).unwrap();
    let mut types = std::collections::BTreeMap::new();
    for &(key, ty, value) in keys {
        w.set_attribute(key, Value::Integer(value));
        types.insert(key.to_owned(), Value::Text(ty.to_owned()));
    }
    w.set_attribute("gguf.value_types", Value::Map(types));
    for t in tensors {
        w.add(t, &[2], &[1.0f32, 2.0]).unwrap();
    }
    w.finish().unwrap();
    ztensor::write_gguf(&ztensor::open(&zt).unwrap(), path, false).unwrap();
}

#[test]
fn a_tensor_twice_or_a_wrong_count_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = |n: u32| dir.path().join(format!("m-{n:05}-of-00002.gguf"));
    let first = |count: i128| {
        let keys = [
            ("split.no", "u16", 0),
            ("split.count", "u16", 2),
            ("split.tensors.count", "i32", count),
        ];
        write_split(&path(1), &["a", "b"], &keys);
    };
    first(3);
    write_split(&path(2), &["c"], &[("split.no", "u16", 1)]);
    let set = ShardedSet::open(path(2)).unwrap();
    assert_eq!(set.names().collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(set.shard_of("c"), Some(path(2).as_path()));
    assert!(set.metadata().is_empty(), "{:?}", set.metadata());

    first(4);
    let e = ShardedSet::open(path(1)).unwrap_err();
    assert!(
        e.to_string().contains(
            "the splits hold 3 tensors, but the first split's split.tensors.count says 4"
        ),
        "{e}"
    );
    first(3);
    write_split(&path(2), &["b"], &[("split.no", "u16", 1)]);
    let e = ShardedSet::open(path(1)).unwrap_err();
    assert!(
        e.to_string().contains("tensor \"b\" is in two splits"),
        "{e}"
    );
}

#[test]
fn a_model_written_in_splits_reads_back_as_llama_cpps_splits_do() {
    let whole = ztensor::open(fixtures().join("ggml/to_gguf/llama-ggjt-v3-q4_0.gguf")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let views: Vec<_> = whole.iter().collect();
    // 4000 bytes of tensors at most: three splits of this model, in its file order.
    let prefix = dir.path().join("llama-q4_0");
    let planned =
        ztensor::convert::GgufSplit::plan(&views, whole.attributes(), &prefix, 4000, false)
            .unwrap();
    assert_eq!(planned.paths().len(), 3);
    let written = planned.write(ztensor::Durability::Unsynced).unwrap();
    let set = ShardedSet::open(&written[2]).unwrap();
    set.check().unwrap();
    assert_eq!(set.metadata(), whole.attributes());
    for o in whole.iter() {
        let ours = set.object(o.name()).unwrap();
        assert_eq!(ours.bytes().unwrap(), o.bytes().unwrap(), "{}", o.name());
    }
    // Past the first, a split holds the split keys only, typed as llama-gguf-split types them.
    let second = ztensor::open(&written[1]).unwrap();
    let theirs = ztensor::open(split(2)).unwrap();
    assert_eq!(second.attributes(), theirs.attributes());
    // Every tensor over the size: one split each.
    let one_each =
        ztensor::convert::GgufSplit::plan(&views, whole.attributes(), &prefix, 1, false).unwrap();
    assert_eq!(one_each.paths().len(), whole.len());
}
