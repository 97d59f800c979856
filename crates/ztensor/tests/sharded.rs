//! Sharded sets (`ShardedSet`, `write_indexed`): Hugging Face's `*.index.json` over
//! `.safetensors` and `.zt` shards, written deterministically and read back lazily; every
//! way a set can disagree with its index is an `InvalidFile` error naming the shard.

#![cfg(feature = "sharded")]

#[path = "support/expected.rs"]
#[allow(dead_code)] // only the TensorFlow sets' test reads expected.json
mod expected;

use std::path::{Path, PathBuf};

use ztensor::convert::{write_indexed, IndexedOptions, ShardKind};
use ztensor::{Durability, ErrorKind, ShardedSet};

/// Tensors `t0`..`t5` of 4, 8, 12, ... f32 values (16, 32, 48, ... bytes) in one .zt.
fn source(dir: &Path) -> PathBuf {
    let path = dir.join("src.zt");
    let mut w = ztensor::Writer::create(&path).unwrap();
    w.set_attribute("format", "pt");
    // Added out of name order: assignment must not depend on it.
    for i in [3usize, 0, 5, 1, 4, 2] {
        let values: Vec<f32> = (0..4 * (i + 1)).map(|x| (100 * i + x) as f32).collect();
        w.add(&format!("t{i}"), &[values.len() as u64], &values)
            .unwrap();
    }
    w.finish().unwrap();
    path
}

fn write_set(src: &Path, out: &Path, max: u64, kind: ShardKind) -> ztensor::convert::IndexedFiles {
    let r = ztensor::open(src).unwrap();
    let objects: Vec<_> = r.iter().collect();
    let options = IndexedOptions {
        max_shard_size: max,
        kind,
        durability: Durability::Unsynced,
    };
    write_indexed(&objects, r.attributes(), &Default::default(), out, options).unwrap()
}

fn kinds() -> [(ShardKind, &'static str); 2] {
    [
        (
            ShardKind::Safetensors { densify: false },
            "model.safetensors",
        ),
        (ShardKind::Zt(Default::default()), "model.zt"),
    ]
}

#[test]
fn a_written_set_reads_back_with_every_value_and_the_convention_names() {
    for (kind, out) in kinds() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        // 64 bytes a shard: t0+t1 (16+32), t2 (48), t3 (64), t4 (80, alone), t5 (96, alone).
        let files = write_set(&src, &dir.path().join(out), 64, kind);
        let ext = out.rsplit_once('.').unwrap().1;
        assert_eq!(files.index, dir.path().join(format!("{out}.index.json")));
        let names: Vec<String> = files
            .shards
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        let want: Vec<String> = (1..=5)
            .map(|i| format!("model-{i:05}-of-00005.{ext}"))
            .collect();
        assert_eq!(names, want);
        let set = ShardedSet::open(&files.index).unwrap();
        assert_eq!(
            set.names().collect::<Vec<_>>(),
            ["t0", "t1", "t2", "t3", "t4", "t5"]
        );
        assert_eq!(set.shard_of("t1").unwrap(), files.shards[0]);
        assert_eq!(set.shard_of("t5").unwrap(), files.shards[4]);
        let r = ztensor::open(&src).unwrap();
        for name in set.names() {
            assert_eq!(
                set.object(name).unwrap().bytes().unwrap(),
                r.object(name).unwrap().bytes().unwrap(),
                "{out} {name}"
            );
        }
        assert_eq!(
            set.metadata()["total_size"],
            ztensor::Value::Integer((16 + 32 + 48 + 64 + 80 + 96) as i128)
        );
        // The shards carry the file attributes.
        assert_eq!(
            ztensor::open(&files.shards[2]).unwrap().attributes()["format"],
            ztensor::Value::Text("pt".into())
        );
        set.check().unwrap();
    }
}

#[test]
fn the_same_objects_give_the_same_bytes() {
    for (kind, out) in kinds() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        for sub in ["a", "b"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let a = write_set(&src, &dir.path().join("a").join(out), 100, kind);
        let b = write_set(&src, &dir.path().join("b").join(out), 100, kind);
        assert_eq!(
            std::fs::read(&a.index).unwrap(),
            std::fs::read(&b.index).unwrap()
        );
        for (x, y) in a.shards.iter().zip(&b.shards) {
            assert_eq!(
                std::fs::read(x).unwrap(),
                std::fs::read(y).unwrap(),
                "{out}"
            );
        }
    }
}

/// Writes `index` (a weight_map of name -> file) beside .zt shards holding `shards`
/// (file -> names), each name a 2-element f32 tensor.
fn hand_made(dir: &Path, shards: &[(&str, &[&str])], index: &[(&str, &str)]) -> PathBuf {
    for (file, names) in shards {
        let mut w = ztensor::Writer::create(dir.join(file)).unwrap();
        for n in *names {
            w.add(n, &[2], &[1.0f32, 2.0]).unwrap();
        }
        w.finish().unwrap();
    }
    let map: serde_json::Map<String, serde_json::Value> = index
        .iter()
        .map(|(n, f)| (n.to_string(), serde_json::Value::String(f.to_string())))
        .collect();
    let path = dir.join("m.zt.index.json");
    std::fs::write(&path, serde_json::json!({ "weight_map": map }).to_string()).unwrap();
    path
}

#[test]
fn shards_open_only_when_a_lookup_needs_them() {
    let dir = tempfile::tempdir().unwrap();
    let index = hand_made(
        dir.path(),
        &[("a.zt", &["x"]), ("b.zt", &["y"])],
        &[("x", "a.zt"), ("y", "b.zt")],
    );
    // b.zt is garbage: a set that never looks at it never notices.
    std::fs::write(dir.path().join("b.zt"), b"not a tensor file at all").unwrap();
    let set = ShardedSet::open(&index).unwrap();
    assert_eq!(
        &set.object("x").unwrap().read::<f32>().unwrap()[..],
        &[1.0, 2.0]
    );
    let e = set.object("y").unwrap_err();
    assert!(e.path().is_some_and(|p| p.ends_with("b.zt")), "{e}");
    let e = set.check().unwrap_err();
    assert!(e.to_string().contains("b.zt"), "{e}");
    assert_eq!(set.object("z").unwrap_err().kind(), ErrorKind::NotFound);
    // A near miss names the object meant, without opening a shard for it.
    let e = set.object("model.x").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(
        e.to_string()
            .ends_with("no object named \"model.x\" in the set; did you mean \"x\"?"),
        "{e}"
    );
}

#[test]
fn every_disagreement_with_the_index_is_an_error_naming_the_shard() {
    // (shards, index, what the error says, which lookup finds it)
    type Case<'a> = (
        &'a [(&'a str, &'a [&'a str])],
        &'a [(&'a str, &'a str)],
        &'a str,
        &'a str,
    );
    let cases: [Case; 3] = [
        // An extra tensor the index does not list.
        (
            &[("a.zt", &["x", "extra"])],
            &[("x", "a.zt")],
            "does not list it",
            "x",
        ),
        // The same name in two shards.
        (
            &[("a.zt", &["x"]), ("b.zt", &["x", "y"])],
            &[("x", "a.zt"), ("y", "b.zt")],
            "puts it in \"a.zt\"",
            "y",
        ),
        // A listed name the shard lacks.
        (
            &[("a.zt", &["x"])],
            &[("x", "a.zt"), ("w", "a.zt")],
            "does not hold it",
            "x",
        ),
    ];
    for (shards, index, says, lookup) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = hand_made(dir.path(), shards, index);
        let set = ShardedSet::open(&path).unwrap();
        let e = set.object(lookup).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
        assert!(e.to_string().contains(says), "{e}");
        assert!(e.path().is_some(), "{e}");
        assert!(set.check().is_err());
    }
}

#[test]
fn a_missing_shard_is_reported_when_the_set_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = hand_made(
        dir.path(),
        &[("a.zt", &["x"])],
        &[("x", "a.zt"), ("y", "gone-00002-of-00002.zt")],
    );
    let e = ShardedSet::open(&path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile);
    assert!(
        e.to_string()
            .contains("\"gone-00002-of-00002.zt\" named by the index is missing"),
        "{e}"
    );
}

#[test]
fn hostile_indexes_are_refused_before_any_shard_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let write = |json: &str| {
        let p = dir.path().join("h.index.json");
        std::fs::write(&p, json).unwrap();
        p
    };
    for json in [
        r#"{"weight_map": {"x": "../outside.zt"}}"#,
        r#"{"weight_map": {"x": "/etc/passwd"}}"#,
        r#"{"weight_map": {"x": "a.zt", "x": "a.zt"}}"#,
        r#"{"weight_map": []}"#,
        "not json",
    ] {
        let e = ShardedSet::open(write(json)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidFile, "{json}: {e}");
        assert!(e.path().is_some(), "{e}");
    }
    // Over the size cap: refused by its length, before parsing.
    let big = dir.path().join("big.index.json");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(ztensor::ShardIndex::MAX_LEN + 1).unwrap();
    let e = ShardedSet::open(&big).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
}

#[test]
fn a_failed_write_leaves_the_old_set_whole_and_no_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let out = dir.path().join("out").join("model.safetensors");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let kind = ShardKind::Safetensors { densify: false };
    write_set(&src, &out, 64, kind);
    let snapshot = |d: &Path| {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read(&p).unwrap())
            })
            .collect();
        files.sort();
        files
    };
    let before = snapshot(out.parent().unwrap());
    assert!(before.len() >= 4, "{} files", before.len());

    // New values for the same names, and last in name order a CSR object, which
    // safetensors cannot hold without densify: the first shards are written, the last fails.
    let other = dir.path().join("other.zt");
    let mut w = ztensor::Writer::create(&other).unwrap();
    for i in 0..6usize {
        let values: Vec<f32> = (0..4 * (i + 1)).map(|x| -((100 * i + x) as f32)).collect();
        w.add(&format!("t{i}"), &[values.len() as u64], &values)
            .unwrap();
    }
    let u64s = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let part = |role: &str, dtype, bytes| ztensor::ComponentData {
        role: role.into(),
        element: ztensor::ElementType::plain(dtype),
        bytes: std::borrow::Cow::Owned(bytes),
    };
    w.add_object(
        "zz_sparse",
        ztensor::ObjectData {
            shape: vec![2, 2],
            format: ztensor::Format::SparseCsr,
            attributes: ztensor::Attributes::new(),
            components: vec![
                part("values", ztensor::DType::F32, 1.5f32.to_le_bytes().to_vec()),
                part("indices", ztensor::DType::U64, u64s(&[1])),
                part("indptr", ztensor::DType::U64, u64s(&[0, 1, 1])),
            ],
        },
    )
    .unwrap();
    w.finish().unwrap();
    let r = ztensor::open(&other).unwrap();
    let objects: Vec<_> = r.iter().collect();
    let options = IndexedOptions {
        max_shard_size: 64,
        kind,
        durability: Durability::Unsynced,
    };
    let e =
        write_indexed(&objects, r.attributes(), &Default::default(), &out, options).unwrap_err();
    assert!(e.to_string().contains("zz_sparse"), "{e}");
    // The old set, byte for byte, and nothing else (no new shard, no temporary file).
    assert_eq!(snapshot(out.parent().unwrap()), before);
    let set = ShardedSet::open(out.with_file_name("model.safetensors.index.json")).unwrap();
    assert_eq!(
        &set.object("t1").unwrap().read::<f32>().unwrap()[..2],
        &[100.0, 101.0]
    );
}

#[test]
fn load_all_reads_every_shard_once_concurrently_and_reports_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    // Six shards: more than are read at once, so threads take a second shard each.
    let shards: Vec<(String, Vec<String>)> = (0..6)
        .map(|i| (format!("s{i}.zt"), vec![format!("w{i}")]))
        .collect();
    let borrowed: Vec<(&str, Vec<&str>)> = shards
        .iter()
        .map(|(f, n)| (f.as_str(), n.iter().map(String::as_str).collect()))
        .collect();
    let listing: Vec<(&str, &[&str])> = borrowed.iter().map(|(f, n)| (*f, &n[..])).collect();
    let index: Vec<(&str, &str)> = borrowed.iter().map(|(f, n)| (n[0], *f)).collect();
    let path = hand_made(dir.path(), &listing, &index);
    let set = ShardedSet::open(&path).unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    let threads = std::sync::Mutex::new(std::collections::HashSet::new());
    set.load_all(|position| {
        // Long enough that no one thread can take every shard before the others start.
        std::thread::sleep(std::time::Duration::from_millis(20));
        seen.lock().unwrap().push(position);
        threads.lock().unwrap().insert(std::thread::current().id());
    })
    .unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort_unstable();
    assert_eq!(seen, (0..6).collect::<Vec<_>>());
    assert!(
        threads.into_inner().unwrap().len() > 1,
        "one thread read them all"
    );
    for i in 0..6 {
        let v = set.object(&format!("w{i}")).unwrap().read::<f32>().unwrap();
        assert_eq!(&v[..], &[1.0, 2.0]);
    }
    // A budget of nothing reads nothing ahead, and still opens and checks every shard.
    let tight = ShardedSet::open_with(&path, ztensor::OpenOptions::new().memory_budget(0)).unwrap();
    let count = std::sync::atomic::AtomicUsize::new(0);
    tight
        .load_all(|_| {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
    assert_eq!(count.into_inner(), 6);

    // A shard that is not a tensor file: the error names it.
    std::fs::write(dir.path().join("s4.zt"), b"not a tensor file at all").unwrap();
    let set = ShardedSet::open(&path).unwrap();
    let e = set.load_all(|_| {}).unwrap_err();
    assert!(e.path().is_some_and(|p| p.ends_with("s4.zt")), "{e}");
}

#[test]
fn load_each_hands_every_object_over_once_in_file_order_per_shard() {
    let dir = tempfile::tempdir().unwrap();
    // Shard a is over one populate step (32 MiB), so its objects are handed over step by step.
    let big: Vec<f32> = (0..5 << 20).map(|i| i as f32).collect();
    let mut w = ztensor::Writer::create(dir.path().join("a.zt")).unwrap();
    w.add("big0", &[5 << 20], &big).unwrap();
    w.add("small", &[2], &[1.0f32, 2.0]).unwrap();
    w.add("big1", &[5 << 20], &big).unwrap();
    w.finish().unwrap();
    let mut w = ztensor::Writer::create(dir.path().join("b.zt")).unwrap();
    w.add("c", &[1], &[7.0f32]).unwrap();
    w.finish().unwrap();
    let index = dir.path().join("m.index.json");
    std::fs::write(
        &index,
        r#"{"weight_map": {"big0": "a.zt", "small": "a.zt", "big1": "a.zt", "c": "b.zt"}}"#,
    )
    .unwrap();
    for budget in [None, Some(0)] {
        let options = match budget {
            Some(b) => ztensor::OpenOptions::new().memory_budget(b),
            None => ztensor::OpenOptions::new(),
        };
        let set = ShardedSet::open_with(&index, options).unwrap();
        let handed = std::sync::Mutex::new(Vec::new());
        set.load_each(|shard, object| {
            let sum: f64 = object
                .read::<f32>()
                .unwrap()
                .iter()
                .map(|&x| x as f64)
                .sum();
            handed
                .lock()
                .unwrap()
                .push((shard, object.name().to_owned(), sum));
        })
        .unwrap();
        let handed = handed.into_inner().unwrap();
        let in_a: Vec<&str> = handed
            .iter()
            .filter(|h| h.0 == 0)
            .map(|h| h.1.as_str())
            .collect();
        let file_order: Vec<String> = set
            .reader(0)
            .unwrap()
            .iter()
            .map(|o| o.name().to_owned())
            .collect();
        assert_eq!(in_a, file_order, "budget {budget:?}");
        let big_sum: f64 = big.iter().map(|&x| x as f64).sum();
        let mut by_name: Vec<(&str, f64)> = handed.iter().map(|h| (h.1.as_str(), h.2)).collect();
        by_name.sort_by(|a, b| a.0.cmp(b.0));
        assert_eq!(
            by_name,
            [
                ("big0", big_sum),
                ("big1", big_sum),
                ("c", 7.0),
                ("small", 3.0)
            ],
            "budget {budget:?}"
        );
    }
}

/// transformers' TensorFlow models saved sharded by transformers itself, as HDF5 and as
/// safetensors shards (tools/interop/make_tensorflow.py): the index lists each variable
/// by its full name and the shard stores it under a shorter one; the set names every tensor
/// as its shard does and reads it as transformers' loader does.
#[cfg(all(feature = "hdf5", feature = "safetensors"))]
#[test]
fn transformers_tensorflow_sets_name_tensors_as_their_shards_do() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/tensorflow");
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (kind, index) in [
        ("h5", "tf_model.h5.index.json"),
        ("safetensors", "model.safetensors.index.json"),
    ] {
        let want = expected[kind].as_object().unwrap();
        let set = ShardedSet::open(dir.join(kind).join(index)).unwrap();
        assert!(set.names().eq(want.keys().map(String::as_str)), "{kind}");
        set.check().unwrap();
        for (name, want) in want {
            expected::check_view(&set.object(name).unwrap(), kind, name, want);
        }
    }
}

/// An index of TensorFlow variable names whose shards hold them as listed (a model exported
/// from TensorFlow and sharded by another tool) is read as written: the first shard tells.
#[test]
fn tensorflow_names_stored_as_listed_stay_as_listed() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["model/dense/kernel:0", "model/dense/bias:0"];
    let index = hand_made(
        dir.path(),
        &[("a.zt", &names[..1]), ("b.zt", &names[1..])],
        &[(names[0], "a.zt"), (names[1], "b.zt")],
    );
    let set = ShardedSet::open(&index).unwrap();
    assert_eq!(
        set.names().collect::<Vec<_>>(),
        ["model/dense/bias:0", "model/dense/kernel:0"]
    );
    set.check().unwrap();
    // Stored without the model's name, as transformers stores them: the set takes those.
    let dir = tempfile::tempdir().unwrap();
    let index = hand_made(
        dir.path(),
        &[("a.zt", &["dense/kernel:0"]), ("b.zt", &["dense/bias:0"])],
        &[(names[0], "a.zt"), (names[1], "b.zt")],
    );
    let set = ShardedSet::open(&index).unwrap();
    assert_eq!(
        set.names().collect::<Vec<_>>(),
        ["dense/bias:0", "dense/kernel:0"]
    );
    set.check().unwrap();
}

#[test]
fn a_set_replaced_in_place_takes_its_old_shards_in_folders_below_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let part = dir.path().join("part");
    std::fs::create_dir_all(part.join("deeper")).unwrap();
    std::fs::create_dir(dir.path().join("kept")).unwrap();
    std::fs::write(dir.path().join("kept/notes.txt"), b"not the set's").unwrap();
    // The old set: one shard two folders down, one in a folder that holds more than the set.
    let mut w = ztensor::Writer::create(part.join("deeper/a.zt")).unwrap();
    w.add("x", &[2], &[1.0f32, 2.0]).unwrap();
    w.finish().unwrap();
    let mut w = ztensor::Writer::create(dir.path().join("kept/b.zt")).unwrap();
    w.add("y", &[2], &[1.0f32, 2.0]).unwrap();
    w.finish().unwrap();
    let index = dir.path().join("model.zt.index.json");
    let old = r#"{"weight_map": {"x": "part/deeper/a.zt", "y": "kept/b.zt"}}"#;
    std::fs::write(&index, old).unwrap();
    assert_eq!(ShardedSet::open(&index).unwrap().names().count(), 2);
    let out = dir.path().join("model.zt");
    let files = write_set(&src, &out, u64::MAX, ShardKind::Zt(Default::default()));
    assert_eq!(ShardedSet::open(&files.index).unwrap().names().count(), 6);
    // The old shards are gone, and the folders they alone filled; the rest stays.
    assert!(!part.exists());
    assert!(!dir.path().join("kept/b.zt").exists());
    assert!(dir.path().join("kept/notes.txt").is_file());
}
