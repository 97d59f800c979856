//! Sharded sets on the command line: `zt convert --shard-size` writes Hugging Face-style
//! shards and an index; `info`, `ls`, `cat`, `verify`, `convert`, `merge`, `upgrade` and
//! `rm` take the index.

use std::path::Path;

mod support;
use support::{ok, p, zt};

/// A .zt of tensors a..e, 16 f32 values (64 bytes) each.
fn source(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("src.zt");
    let mut w = ztensor::Writer::create(&path).unwrap();
    for (i, name) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        let v: Vec<f32> = (0..16).map(|x| (i * 16 + x) as f32).collect();
        w.add(name, &[4, 4], &v).unwrap();
    }
    w.finish().unwrap();
    path
}

#[test]
fn convert_writes_a_set_that_every_reading_command_takes() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let out = dir.path().join("model.safetensors");
    ok(&zt(&["convert", p(&src), p(&out), "--shard-size", "128"]));
    let index = dir.path().join("model.safetensors.index.json");
    assert!(
        !out.exists(),
        "OUT itself is not written: the index and shards are"
    );
    for i in 1..=3 {
        assert!(dir
            .path()
            .join(format!("model-0000{i}-of-00003.safetensors"))
            .is_file());
    }
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    assert_eq!(j["metadata"]["total_size"], 320);
    assert_eq!(j["weight_map"]["c"], "model-00002-of-00003.safetensors");
    assert_eq!(j["weight_map"]["e"], "model-00003-of-00003.safetensors");

    assert_eq!(ok(&zt(&["ls", p(&index)])), "a\nb\nc\nd\ne\n");
    let info = ok(&zt(&["info", p(&index)]));
    assert!(info.contains("sharded set, 3 shards, 5 objects"), "{info}");
    let j: serde_json::Value =
        serde_json::from_str(&ok(&zt(&["info", "--json", p(&index)]))).unwrap();
    assert_eq!(j["kind"], "sharded_set");
    assert_eq!(j["shards"].as_array().unwrap().len(), 3);
    // cat, whole and sliced, from the shard that holds it.
    let want: Vec<u8> = (48..64).flat_map(|x| (x as f32).to_le_bytes()).collect();
    assert_eq!(zt(&["cat", p(&index), "d"]).stdout, want);
    assert_eq!(
        zt(&["cat", p(&index), "d", "--slice", "1:2"]).stdout,
        want[16..32]
    );
    let v = ok(&zt(&["verify", p(&index)]));
    assert_eq!(v.lines().filter(|l| l.contains(": OK")).count(), 3, "{v}");

    // Back to one file, of either kind, and merged: the same tensors.
    let one = dir.path().join("one.zt");
    ok(&zt(&["convert", p(&index), p(&one)]));
    ok(&zt(&["diff", p(&src), p(&one)]));
    let one_st = dir.path().join("one.safetensors");
    ok(&zt(&["convert", p(&index), p(&one_st)]));
    ok(&zt(&["diff", p(&src), p(&one_st)]));
    let merged = dir.path().join("merged.zt");
    ok(&zt(&["merge", p(&index), "-o", p(&merged)]));
    ok(&zt(&["diff", p(&src), p(&merged)]));
    // upgrade and rm take a set too (they refused one, naming a Rust API), into one file;
    // the model folder stands for its index.
    for (version, name) in [("v2", "up.zt"), ("v1.2", "up12.zt")] {
        let up = dir.path().join(name);
        ok(&zt(&["upgrade", p(&index), p(&up), "--to", version]));
        ok(&zt(&["diff", p(&src), p(&up)]));
    }
    let fewer = dir.path().join("fewer.zt");
    ok(&zt(&["rm", p(&index), "b", "d", "-o", p(&fewer)]));
    assert_eq!(ok(&zt(&["ls", p(&fewer)])), "a\nc\ne\n");
    let o = zt(&[
        "rm",
        p(&index),
        "b",
        "nope",
        "-o",
        p(&dir.path().join("x.zt")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        support::stderr(&o).contains("not found: no object named \"nope\"\n"),
        "{}",
        support::stderr(&o)
    );
    assert!(!dir.path().join("x.zt").exists());

    // .zt shards with an index, from the set: the same convention.
    let zt_index = dir.path().join("z.zt.index.json");
    ok(&zt(&[
        "convert",
        p(&index),
        p(&zt_index),
        "--shard-size",
        "200",
    ]));
    assert!(dir.path().join("z-00001-of-00002.zt").is_file());
    ok(&zt(&[
        "diff",
        p(&src),
        p(&{
            let back = dir.path().join("back.zt");
            ok(&zt(&["convert", p(&zt_index), p(&back)]));
            back
        }),
    ]));
    // zTensor v2's own shards (a root and its shards, no index), from the set as from a
    // file: the same objects, dealt by name; v1.2 has no such form.
    let root = dir.path().join("own.zt");
    ok(&zt(&[
        "convert",
        p(&index),
        p(&root),
        "--shard-size",
        "128",
    ]));
    for i in 1..=3 {
        let shard = dir.path().join(format!("own-0000{i}-of-00003.zt"));
        assert!(shard.is_file(), "{}", shard.display());
    }
    ok(&zt(&["diff", p(&src), p(&root)]));
    assert!(ok(&zt(&["verify", p(&root)])).contains(": OK"));
    assert_eq!(
        zt(&["cat", p(&root), "e"]).stdout,
        zt(&["cat", p(&src), "e"]).stdout
    );
    let o = zt(&["convert", p(&index), p(&dir.path().join("o12.zt"))])
        .status
        .code();
    assert_eq!(o, Some(0), "a set into one file needs no size");
    let o = zt(&[
        "convert",
        p(&index),
        p(&dir.path().join("own12.zt")),
        "--shard-size",
        "128",
        "--to",
        "v1.2",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(support::stderr(&o).contains("--shard-size writes zTensor v2 only"));
    assert!(!dir.path().join("own12.zt").exists());
    // Own shards named as the input set's own would replace them under its index: refused,
    // with --force too, and the input set still reads.
    let before = std::fs::read(dir.path().join("z-00001-of-00002.zt")).unwrap();
    for force in [false, true] {
        let z_root = dir.path().join("z.zt");
        let mut args = vec!["convert", p(&zt_index), p(&z_root), "--shard-size", "200"];
        if force {
            args.push("--force");
        }
        let o = zt(&args);
        assert_eq!(o.status.code(), Some(2), "{}", support::stderr(&o));
        assert!(
            support::stderr(&o).contains("could take the name of the input"),
            "{}",
            support::stderr(&o)
        );
        assert!(!z_root.exists());
    }
    // So is one file whose name a shard could take.
    let shard = dir.path().join("z-00001-of-00002.zt");
    let o = zt(&[
        "convert",
        p(&shard),
        p(&dir.path().join("z.zt")),
        "--shard-size",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", support::stderr(&o));
    assert!(support::stderr(&o).contains("could take the name of the input"));
    let after = std::fs::read(&shard).unwrap();
    assert_eq!(before, after);
    ok(&zt(&["verify", p(&zt_index)]));
    // The index exists now: not replaced without --force.
    let o = zt(&["convert", p(&src), p(&out), "--shard-size", "128"]);
    assert_eq!(o.status.code(), Some(2));
    ok(&zt(&[
        "convert",
        p(&src),
        p(&out),
        "--shard-size",
        "128",
        "--force",
    ]));
}

#[test]
fn a_broken_set_fails_verify_and_reading_commands_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let out = dir.path().join("model.safetensors");
    ok(&zt(&["convert", p(&src), p(&out), "--shard-size", "128"]));
    let index = dir.path().join("model.safetensors.index.json");
    std::fs::remove_file(dir.path().join("model-00002-of-00003.safetensors")).unwrap();
    for args in [
        vec!["verify", p(&index)],
        vec!["ls", p(&index)],
        vec!["info", p(&index)],
        vec!["cat", p(&index), "a"],
    ] {
        let o = zt(&args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let text = format!("{err}{}", String::from_utf8_lossy(&o.stdout));
        assert_eq!(o.status.code(), Some(1), "{args:?}: {text}");
        assert!(
            text.contains("model-00002-of-00003.safetensors"),
            "{args:?}: {text}"
        );
        assert!(text.contains("missing"), "{text}");
        assert!(!err.contains("panicked"));
    }
    // An index naming a file outside its folder.
    let evil = dir.path().join("evil.index.json");
    std::fs::write(&evil, r#"{"weight_map": {"a": "../src.zt"}}"#).unwrap();
    let o = zt(&["ls", p(&evil)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("own folder"));
}

#[test]
fn verify_of_a_set_names_the_shard_and_object_whose_bytes_are_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let index = dir.path().join("m.zt.index.json");
    ok(&zt(&["convert", p(&src), p(&index), "--shard-size", "128"]));
    // Tensor c (the values 32.0, 33.0, ...) lies in the second shard: one bit of it flipped.
    let shard = dir.path().join("m-00002-of-00003.zt");
    let mut bytes = std::fs::read(&shard).unwrap();
    let c: Vec<u8> = [32.0f32, 33.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let at = bytes
        .windows(c.len())
        .position(|w| w == c)
        .expect("c's bytes in shard 2");
    bytes[at + 5] ^= 0x10;
    std::fs::write(&shard, bytes).unwrap();

    let o = zt(&["verify", p(&index)]);
    let text = support::stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("m-00001-of-00003.zt: OK"), "{text}");
    assert!(lines[1].contains("m-00002-of-00003.zt: FAILED"), "{text}");
    assert!(lines[2].contains("\"c\""), "{text}");
    assert!(
        text.lines().any(|l| l.contains("m-00003-of-00003.zt: OK")),
        "{text}"
    );
    let o = zt(&["verify", "--json", p(&index)]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["ok"], false);
    let rows = j["results"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert!(rows[1]["file"]
        .as_str()
        .unwrap()
        .ends_with("m-00002-of-00003.zt"));
    assert_eq!(rows[1]["ok"], false);
    assert_eq!(rows[1]["failures"][0]["name"], "c");
    assert_eq!(rows[0]["ok"], true);
    assert_eq!(rows[2]["ok"], true);
    // merge and convert hand the bytes on: they check them, name the shard, and leave no output.
    let merged = dir.path().join("merged.zt");
    let one = dir.path().join("one.safetensors");
    for args in [
        vec!["merge", p(&index), "-o", p(&merged)],
        vec!["convert", p(&index), p(&one)],
    ] {
        let o = zt(&args);
        let err = support::stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("m-00002-of-00003.zt"), "{args:?}: {err}");
        assert!(err.contains("\"c\""), "{args:?}: {err}");
    }
    assert!(!merged.exists() && !one.exists());
    // diff reads every value: the damaged object is unreadable, in its shard.
    let o = zt(&["diff", p(&index), p(&src)]);
    let text = format!("{}{}", support::stdout(&o), support::stderr(&o));
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("m-00002-of-00003.zt: checksum mismatch"),
        "{text}"
    );
    assert!(text.contains("\"c\""), "{text}");
    // A set that fails its own check is one row, the index's, of kind "sharded_set".
    std::fs::remove_file(dir.path().join("m-00003-of-00003.zt")).unwrap();
    let o = zt(&["verify", "--json", p(&index)]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = j["results"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["kind"], "sharded_set");
    assert!(rows[0]["file"]
        .as_str()
        .unwrap()
        .ends_with("m.zt.index.json"));
}

#[test]
fn a_set_with_sparse_objects_converts_to_mag_and_dense_zt_with_densify() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/valid/sparse.zt"
    );
    // Its f32 CSR objects (.mag holds neither f64 nor i16).
    let sparse = dir.path().join("sparse.zt");
    ok(&zt(&[
        "rm",
        fixture,
        "coo_3d_crc",
        "coo_dups",
        "-o",
        p(&sparse),
    ]));
    let sparse = p(&sparse);
    let index = dir.path().join("model.zt.index.json");
    ok(&zt(&["convert", sparse, p(&index), "--shard-size", "128"]));
    // The single file densified is what the set densified must give.
    let want = dir.path().join("want.mag");
    ok(&zt(&["convert", sparse, p(&want), "--densify"]));
    let want = ztensor::open(&want).unwrap();

    // .mag holds dense tensors only: refused naming an object, then written with --densify.
    let mag = dir.path().join("set.mag");
    let o = zt(&["convert", p(&index), p(&mag)]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("\"csr\""));
    assert!(!mag.exists());
    ok(&zt(&["convert", p(&index), p(&mag), "--densify"]));
    let got = ztensor::open(&mag).unwrap();
    assert_eq!(
        got.names().collect::<Vec<_>>(),
        want.names().collect::<Vec<_>>()
    );
    for o in &want {
        assert_eq!(
            got.object(o.name()).unwrap().bytes().unwrap(),
            o.bytes().unwrap()
        );
    }

    // .zt keeps sparse objects sparse, unless --densify says otherwise.
    let zt_out = dir.path().join("dense.zt");
    ok(&zt(&["convert", p(&index), p(&zt_out), "--densify"]));
    let dense = ztensor::open(&zt_out).unwrap();
    for o in &want {
        let d = dense.object(o.name()).unwrap();
        assert_eq!(d.format, ztensor::Format::Dense, "{}", o.name());
        assert_eq!(d.bytes().unwrap(), o.bytes().unwrap());
    }
    let kept = dir.path().join("kept.zt");
    ok(&zt(&["convert", p(&index), p(&kept)]));
    assert_eq!(
        ztensor::open(&kept).unwrap().object("csr").unwrap().format,
        ztensor::Format::SparseCsr
    );
}

#[test]
fn a_set_converted_to_an_index_without_a_size_keeps_its_shards() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let st = dir.path().join("model.safetensors");
    // Shards of 2, 2 and 1 tensors (128 bytes each at most).
    ok(&zt(&["convert", p(&src), p(&st), "--shard-size", "128"]));
    let index = dir.path().join("model.safetensors.index.json");
    let out = dir.path().join("zt").join("model.zt.index.json");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    ok(&zt(&["convert", p(&index), p(&out)]));
    let from = ztensor::ShardedSet::open(&index).unwrap();
    let to = ztensor::ShardedSet::open(&out).unwrap();
    assert_eq!(to.shard_paths().count(), 3);
    for name in from.names() {
        let (a, b) = (from.shard_of(name).unwrap(), to.shard_of(name).unwrap());
        assert_eq!(
            a.file_stem().unwrap(),
            b.file_stem().unwrap(),
            "{name} moved shard"
        );
        assert_eq!(
            from.object(name).unwrap().bytes().unwrap(),
            to.object(name).unwrap().bytes().unwrap()
        );
    }
    // A single file still needs a size to be split.
    let o = zt(&["convert", p(&src), p(&dir.path().join("x.zt.index.json"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--shard-size"));
}

/// More shards than the soft limit on open files allows: each staged shard keeps its
/// temporary open until the index is written, so `zt` raises the soft limit (up to the hard
/// one) first. With the usual limit of 1024, sets of about 1,000 shards failed with "Too many
/// open files".
#[cfg(unix)]
#[test]
fn a_set_of_more_shards_than_the_soft_open_file_limit_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("many.zt");
    let mut w = ztensor::Writer::create(&src).unwrap();
    for i in 0..150u32 {
        w.add(&format!("t{i:03}"), &[4], &[i as f32; 4]).unwrap();
    }
    w.finish().unwrap();
    let index = dir.path().join("model.safetensors.index.json");
    // One tensor a shard: 150 shards under a soft limit of 64 descriptors (the hard limit
    // stays as it is; `ulimit -Sn` in a shell of its own).
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -Sn 64 && exec "$0" convert "$1" "$2" --shard-size 16"#)
        .args([env!("CARGO_BIN_EXE_zt"), p(&src), p(&index)])
        .output()
        .unwrap();
    let hard = std::process::Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .unwrap();
    let hard = String::from_utf8_lossy(&hard.stdout).trim().to_owned();
    if hard != "unlimited" && hard.parse::<u64>().is_ok_and(|h| h < 150 + 64) {
        eprintln!("skipped: the hard limit on open files here is {hard}");
        return;
    }
    ok(&out);
    let shards = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref().is_ok_and(|e| {
                e.file_name()
                    .to_string_lossy()
                    .ends_with("-of-00150.safetensors")
            })
        })
        .count();
    assert_eq!(shards, 150);
    assert_eq!(ok(&zt(&["ls", p(&index)])).lines().count(), 150);
}

#[test]
fn one_split_of_a_gguf_model_under_another_name_is_read_but_never_copied() {
    // As Ollama keeps a download (sha256-<hex>), or a renamed file: the other splits are not
    // found, so the file is the split alone.
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop");
    let dir = tempfile::tempdir().unwrap();
    let blob = dir.path().join("sha256-0f1e2d");
    std::fs::copy(
        interop.join("gguf/split/llama-q4_0-00002-of-00003.gguf"),
        &blob,
    )
    .unwrap();
    let info = ok(&zt(&["info", p(&blob)]));
    assert!(info.contains("@split.no = 1"), "{info}");
    ok(&zt(&["diff", p(&blob), p(&blob)]));
    let out = |name: &str| dir.path().join(name);
    let refusals = [
        zt(&["convert", p(&blob), p(&out("a.gguf"))]),
        zt(&[
            "convert",
            p(&blob),
            p(&out("a.safetensors")),
            "--attributes-as-json",
        ]),
        zt(&[
            "convert",
            p(&blob),
            p(&out("s.gguf")),
            "--shard-size",
            "1KB",
        ]),
        zt(&["upgrade", p(&blob), p(&out("u.zt"))]),
        zt(&["merge", "--output", p(&out("m.zt")), p(&blob)]),
        zt(&["rm", "--output", p(&out("r.zt")), p(&blob), "nothing"]),
    ];
    for refused in refusals {
        assert_eq!(refused.status.code(), Some(1));
        let said = support::stderr(&refused);
        assert!(
            said.contains("is split 2 of 3 of a llama.cpp model, opened by itself"),
            "{said}"
        );
        assert!(said.contains("<prefix>-00001-of-00003.gguf"), "{said}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "only the blob: {left:?}");
}

#[test]
fn a_split_gguf_model_is_a_set_read_from_and_one_file_written_to() {
    // llama.cpp's llama-gguf-split wrote the three files (tools/interop/make_gguf_split.py).
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop");
    let split = |n: u32| interop.join(format!("gguf/split/llama-q4_0-{n:05}-of-00003.gguf"));
    let whole = interop.join("ggml/to_gguf/llama-ggjt-v3-q4_0.gguf");
    let info = ok(&zt(&["info", p(&split(3))]));
    assert!(info.contains("sharded set, 3 shards, 12 objects"), "{info}");
    assert!(info.contains("@general.architecture = \"llama\""), "{info}");
    ok(&zt(&["verify", p(&split(1))]));
    // Merged as llama-gguf-split --merge merges it: the model, without split keys.
    let dir = tempfile::tempdir().unwrap();
    let merged = dir.path().join("merged.gguf");
    ok(&zt(&["convert", p(&split(1)), p(&merged)]));
    ok(&zt(&["diff", p(&merged), p(&whole)]));
    // In the model's order, as gguf-split merges (and splits) it: blk.0 before output.
    let names = |path: &Path| {
        let r = ztensor::open(path).unwrap();
        r.iter().map(|o| o.name().to_owned()).collect::<Vec<_>>()
    };
    let model_order = names(&whole);
    assert_ne!(
        model_order.first().map(String::as_str),
        Some("blk.0.attn_k.weight")
    );
    assert_eq!(names(&merged), model_order);
    let merged_zt = dir.path().join("merged.zt");
    ok(&zt(&["merge", "--output", p(&merged_zt), p(&split(2))]));
    ok(&zt(&["diff", p(&merged_zt), p(&whole)]));
    // A split's name as output is the one file it names.
    let named = dir.path().join("m-00001-of-00002.gguf");
    ok(&zt(&["convert", p(&whole), p(&named)]));
    assert_eq!(ztensor::open(&named).unwrap().len(), 12);
    // --shard-size writes splits as llama-gguf-split --split-max-size does.
    let out = dir.path().join("out.gguf");
    ok(&zt(&["convert", p(&whole), p(&out), "--shard-size", "4KB"]));
    assert!(!out.exists());
    let first = dir.path().join("out-00001-of-00003.gguf");
    ok(&zt(&["diff", p(&first), p(&whole)]));
    let in_splits: Vec<String> = (1..=3)
        .flat_map(|n| names(&dir.path().join(format!("out-{n:05}-of-00003.gguf"))))
        .collect();
    assert_eq!(in_splits, model_order);
    let again = zt(&["convert", p(&whole), p(&out), "--shard-size", "4KB"]);
    assert!(!again.status.success());
    assert!(support::stderr(&again).contains("use --force"));
    ok(&zt(&[
        "convert",
        p(&whole),
        p(&out),
        "--shard-size",
        "4KB",
        "--force",
    ]));
    // A legacy GGML llama.cpp model in splits is named by its file, as it is in one file.
    let legacy = dir.path().join("llama-ggjt-v3-q4_0.bin");
    std::fs::copy(interop.join("ggml/llama-ggjt-v3-q4_0.bin"), &legacy).unwrap();
    let out = dir.path().join("legacy.gguf");
    ok(&zt(&[
        "convert",
        p(&legacy),
        p(&out),
        "--shard-size",
        "4KB",
    ]));
    let info = ok(&zt(&[
        "info",
        p(&dir.path().join("legacy-00001-of-00003.gguf")),
    ]));
    assert!(info.contains("sharded set, 3 shards, 12 objects"), "{info}");
    assert!(
        info.contains("@general.name = \"llama-ggjt-v3-q4_0.bin\""),
        "{info}"
    );
}

#[test]
fn shards_that_disagree_on_an_attribute_convert_with_it_set() {
    let dir = tempfile::tempdir().unwrap();
    // s3.zt holds what s2.zt holds, without the attribute.
    for (file, name, format) in [
        ("s1.zt", "a", Some("pt")),
        ("s2.zt", "b", Some("np")),
        ("s3.zt", "b", None),
    ] {
        let mut w = ztensor::Writer::create(dir.path().join(file)).unwrap();
        if let Some(format) = format {
            w.set_attribute("format", format);
        }
        w.add(name, &[2], &[1.0f32, 2.0]).unwrap();
        w.finish().unwrap();
    }
    let index_over = |index: &str, b_shard: &str| {
        let index = dir.path().join(index);
        let weights =
            format!(r#"{{"metadata": {{}}, "weight_map": {{"a": "s1.zt", "b": "{b_shard}"}}}}"#);
        std::fs::write(&index, weights).unwrap();
        index
    };
    let index = index_over("m.zt.index.json", "s2.zt");
    let out = dir.path().join("one.safetensors");
    let refused = zt(&["convert", p(&index), p(&out)]);
    assert!(!refused.status.success());
    let e = support::stderr(&refused);
    assert!(
        e.contains("file attribute \"format\" differs between shards")
            && e.contains(
                "--set format=VALUE gives the output one, --unset format none (zt convert, zt \
                 merge)"
            ),
        "{e}"
    );
    ok(&zt(&["convert", p(&index), p(&out), "--set", "format=pt"]));
    let r = ztensor::open(&out).unwrap();
    assert_eq!(r.attributes()["format"], ztensor::Value::Text("pt".into()));
    assert_eq!(r.len(), 2);
    // Or without it, given `--unset`.
    let out = dir.path().join("none.safetensors");
    ok(&zt(&["convert", p(&index), p(&out), "--unset", "format"]));
    let r = ztensor::open(&out).unwrap();
    assert!(r.attributes().is_empty(), "{:?}", r.attributes());
    assert_eq!(r.len(), 2);

    // `diff` compares such a set: it is the same as itself (it used to be trouble, exit 2, as
    // for transformers' TensorFlow sets, whose shards each list their own layer_names), and
    // differs from a file that holds one of the values or none, in that attribute only.
    let o = zt(&["diff", p(&index), p(&index)]);
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
    for file in ["one.safetensors", "none.safetensors"] {
        let o = zt(&["diff", p(&index), p(&dir.path().join(file))]);
        assert_eq!(o.status.code(), Some(1), "{}", support::stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(
            text.trim(),
            "(file): file attributes differ: [\"format\"]",
            "{file}"
        );
        let o = zt(&[
            "diff",
            "--values-only",
            p(&index),
            p(&dir.path().join(file)),
        ]);
        assert_eq!(o.status.code(), Some(0), "{file}: {}", support::stderr(&o));
    }
    // A shard that leaves the key out agrees with the one that has it: such a set is the same
    // as the file written with that value.
    let partial = index_over("partial.zt.index.json", "s3.zt");
    let o = zt(&["diff", p(&partial), p(&dir.path().join("one.safetensors"))]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// New shards must not take the name of an input: one shard given as a file, or a set under
/// another index, would be replaced by a shard holding other objects (no index names the old
/// one's objects any more). Resharding a set in place, under its own index with --force, is
/// what it asks for: every new file is written before any replaces an old one.
#[test]
fn new_shards_never_take_an_inputs_name() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let out = dir.path().join("model.safetensors");
    ok(&zt(&["convert", p(&src), p(&out), "--shard-size", "128"]));
    let index = dir.path().join("model.safetensors.index.json");
    let first = dir.path().join("model-00001-of-00003.safetensors");
    let before = std::fs::read(&first).unwrap();
    let other = dir.path().join("other.safetensors.index.json");
    std::fs::copy(&index, &other).unwrap();
    for input in [&first, &other] {
        let o = zt(&[
            "convert",
            p(input),
            p(&out),
            "--shard-size",
            "64",
            "--force",
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", support::stderr(&o));
        assert!(
            support::stderr(&o).contains("could take the name of the input"),
            "{}",
            support::stderr(&o)
        );
    }
    assert_eq!(std::fs::read(&first).unwrap(), before);
    // In place: five shards of 64 bytes, none of the three old ones left.
    ok(&zt(&[
        "convert",
        p(&index),
        p(&out),
        "--shard-size",
        "64",
        "--force",
    ]));
    assert!(
        !first.exists(),
        "resharding in place leaves no old shard behind"
    );
    assert!(dir
        .path()
        .join("model-00005-of-00005.safetensors")
        .is_file());
    ok(&zt(&["diff", p(&src), p(&index)]));
}

/// `--dtype` casts the float tensors in every way `convert` writes: one file to one file,
/// to v2's own shards, a set to one file and a set to its own shards; shards are cut by the
/// cast size, integers pass as they are.
#[test]
fn dtype_casts_float_tensors_on_every_convert_path() {
    use half::{bf16, f16};
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.zt");
    let mut w = ztensor::Writer::create(&src).unwrap();
    let values =
        |i: usize| -> Vec<f32> { (0..16).map(|x| (i * 16 + x) as f32 * 0.1 + 0.05).collect() };
    for (i, name) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        w.add(name, &[4, 4], &values(i)).unwrap();
    }
    w.add("steps", &[2], &[7i32, -7]).unwrap();
    w.finish().unwrap();
    let check = |path: &Path, want: ztensor::DType| {
        let r = ztensor::open(path).unwrap();
        for (i, name) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            let o = r.object(name).unwrap();
            assert_eq!(o.element_type().unwrap().dtype, want, "{name} in {path:?}");
            let got = o.read_f32().unwrap();
            let rounded: Vec<f32> = match want {
                ztensor::DType::BF16 => values(i)
                    .iter()
                    .map(|&v| bf16::from_f32(v).to_f32())
                    .collect(),
                _ => values(i)
                    .iter()
                    .map(|&v| f16::from_f32(v).to_f32())
                    .collect(),
            };
            assert_eq!(got, rounded, "{name} in {path:?}");
        }
        assert_eq!(&r.read::<i32>("steps").unwrap()[..], &[7, -7]);
    };

    // `zt convert IN OUT` and the options, which must succeed.
    let convert = |input: &Path, output: &Path, options: &[&str]| {
        ok(&zt(&[&["convert", p(input), p(output)], options].concat()));
    };
    let st = dir.path().join("one.safetensors");
    convert(&src, &st, &["--dtype", "bf16"]);
    check(&st, ztensor::DType::BF16);
    let zt_out = dir.path().join("one.zt");
    convert(&src, &zt_out, &["--dtype", "f16", "--to", "v1.2"]);
    check(&zt_out, ztensor::DType::F16);

    // 64 bytes of f32 each, 32 of bf16: shards of 64 bytes take two cast tensors (and the
    // 8-byte integers ride with the last), so three shards where uncast would take five.
    let root = dir.path().join("h.zt");
    convert(&src, &root, &["--shard-size", "64", "--dtype", "bf16"]);
    check(&root, ztensor::DType::BF16);
    assert!(dir.path().join("h-00003-of-00003.zt").is_file());

    // A set in: to one file, and to its own shards.
    let index = dir.path().join("set.safetensors.index.json");
    convert(&src, &index, &["--shard-size", "128"]);
    let gguf = dir.path().join("set.gguf");
    convert(&index, &gguf, &["--dtype", "f16"]);
    check(&gguf, ztensor::DType::F16);
    let resharded = dir.path().join("cast.safetensors.index.json");
    convert(&index, &resharded, &["--dtype", "bf16"]);
    // Read back through one file made of it, without a cast.
    let flat = dir.path().join("flat.safetensors");
    convert(&resharded, &flat, &[]);
    check(&flat, ztensor::DType::BF16);

    // Integers are no cast target.
    let refused = dir.path().join("x.zt");
    let o = zt(&["convert", p(&src), p(&refused), "--dtype", "i8"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bf16"));
}
