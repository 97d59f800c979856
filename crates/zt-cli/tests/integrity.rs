//! What a careful user of sha256sum, rsync and git expects of `zt`: corrupt data never passes
//! a command that hands bytes on, an interrupted writer leaves nothing behind, a closed pipe
//! ends the command quietly, a model folder reads as its model, and `diff` compares sets and
//! NaNs as they are.

#![cfg(unix)]

use std::path::{Path, PathBuf};

#[path = "../../ztensor/tests/support/checkpoint.rs"]
mod checkpoint;
mod support;

use std::process::{Command, Stdio};
use support::{p, stderr, stdout, zt};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// The names in `dir`, sorted, hidden ones included.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A v2 file (xxh3 digests on every part) of two f32 tensors, and a copy with 4 bytes of
/// tensor `a` flipped.
fn good_and_bad(dir: &Path) -> (PathBuf, PathBuf) {
    let good = dir.join("good.zt");
    let mut w = ztensor::Writer::create(&good).unwrap();
    w.add("a", &[4], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    w.add("b", &[2], &[5.0f32, 6.0]).unwrap();
    w.finish().unwrap();
    let offset = ztensor::open(&good)
        .unwrap()
        .object("a")
        .unwrap()
        .components[0]
        .offset;
    let mut bytes = std::fs::read(&good).unwrap();
    for b in &mut bytes[offset as usize + 4..offset as usize + 8] {
        *b ^= 0x5a;
    }
    let bad = dir.join("bad.zt");
    std::fs::write(&bad, bytes).unwrap();
    (good, bad)
}

#[test]
fn corrupt_data_fails_every_command_that_hands_it_on() {
    let dir = tempfile::tempdir().unwrap();
    let (_, bad) = good_and_bad(dir.path());
    let out = |n: &str| dir.path().join(n);
    let cases: Vec<Vec<String>> = vec![
        vec!["convert".into(), p(&bad).into(), p(&out("c.zt")).into()],
        vec![
            "convert".into(),
            p(&bad).into(),
            p(&out("z.zt")).into(),
            "--compress".into(),
        ],
        vec![
            "convert".into(),
            p(&bad).into(),
            p(&out("c.safetensors")).into(),
        ],
        vec!["convert".into(), p(&bad).into(), p(&out("c.gguf")).into()],
        vec!["convert".into(), p(&bad).into(), p(&out("c.mag")).into()],
        vec!["upgrade".into(), p(&bad).into(), p(&out("u.zt")).into()],
        vec![
            "merge".into(),
            p(&bad).into(),
            "-o".into(),
            p(&out("m.zt")).into(),
        ],
        vec![
            "rm".into(),
            p(&bad).into(),
            "b".into(),
            "-o".into(),
            p(&out("r.zt")).into(),
        ],
        vec!["cat".into(), p(&bad).into(), "a".into(), "--json".into()],
    ];
    for args in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = zt(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("bad.zt"), "{args:?}: names the input: {err}");
        assert!(err.contains("checksum mismatch"), "{args:?}: {err}");
        assert!(err.contains("object \"a\""), "{args:?}: {err}");
        assert!(err.contains("component \"data\""), "{args:?}: {err}");
        assert!(err.contains("(at offset 0x"), "{args:?}: {err}");
    }
    assert_eq!(names(dir.path()), ["bad.zt", "good.zt"], "nothing written");

    // The explicit opt-out copies the bytes as they are.
    let o = zt(&["convert", "--no-verify", p(&bad), p(&out("n.zt"))]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn zip_crcs_are_checked_on_conversion() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixtures().join("interop/pytorch/dtypes.pt");
    let r = ztensor::open(&src).unwrap();
    let offset = r.object("float32").unwrap().components[0].offset as usize;
    let mut bytes = std::fs::read(&src).unwrap();
    bytes[offset] ^= 1;
    let bad = dir.path().join("bad.pt");
    std::fs::write(&bad, bytes).unwrap();
    let o = zt(&["convert", p(&bad), p(&dir.path().join("x.zt"))]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("CRC-32"), "{}", stderr(&o));
    let o = zt(&["convert", p(&src), p(&dir.path().join("ok.zt"))]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn the_library_checks_on_conversion_and_on_copying_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (_, bad) = good_and_bad(dir.path());
    // Conversions check by default.
    let e = ztensor::upgrade(&bad, dir.path().join("u.zt"), Default::default()).unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::ChecksumMismatch, "{e}");
    let r = ztensor::open(&bad).unwrap();
    let e = ztensor::write_safetensors(&r, dir.path().join("s.safetensors"), false).unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::ChecksumMismatch, "{e}");
    // A zero-copy read does not hash; its checked form does; so does one that copies.
    assert!(r.read::<f32>("a").is_ok());
    assert!(r.object("a").unwrap().read_verified::<f32>().is_err());
    let mut buf = Vec::new();
    let e = r
        .object("a")
        .unwrap()
        .read_into::<f32>(&mut buf)
        .unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::ChecksumMismatch, "{e}");
    let checked = ztensor::OpenOptions::new()
        .verify(ztensor::Verify::Always)
        .open(&bad)
        .unwrap();
    assert!(checked.read::<f32>("a").is_err());
    assert!(checked.read::<f32>("b").is_ok());
    // And the opt-out.
    let unchecked = ztensor::ConvertOptions {
        verify: false,
        ..Default::default()
    };
    ztensor::upgrade(&bad, dir.path().join("n.zt"), unchecked).unwrap();
    assert_eq!(names(dir.path()), ["bad.zt", "good.zt", "n.zt"]);
}

/// A file whose compression at a high level takes seconds in a test build.
fn slow_input(dir: &Path) -> PathBuf {
    let path = dir.join("in.zt");
    let mut w = ztensor::Writer::create(&path).unwrap();
    for i in 0..8u32 {
        let data: Vec<f32> = (0..(1u32 << 20))
            .map(|j| ((j ^ i).wrapping_mul(2_654_435_761) >> 12) as f32)
            .collect();
        w.add(&format!("t{i}"), &[1 << 20], &data).unwrap();
    }
    w.finish().unwrap();
    path
}

fn slow_convert(input: &Path, output: &Path, extra: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_zt"))
        .args(["convert", p(input), p(output), "--compress=19"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn signal(child: &std::process::Child, name: &str) {
    let ok = Command::new("kill")
        .args([name, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {name}");
}

#[test]
fn an_interrupted_or_killed_writer_leaves_no_file_behind() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let input = slow_input(dir.path());
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let cases: [(&str, &str, &[&str]); 5] = [
        ("-INT", "out.zt", &[]),
        ("-TERM", "out.zt", &[]),
        ("-KILL", "out.zt", &[]),
        ("-INT", "set.zt.index.json", &["--shard-size", "8MiB"]),
        ("-KILL", "root.zt", &["--shard-size", "8MiB"]),
    ];
    for (sig, target, extra) in cases {
        let mut child = slow_convert(&input, &out.join(target), extra);
        std::thread::sleep(std::time::Duration::from_millis(700));
        signal(&child, sig);
        let status = child.wait().unwrap();
        match sig {
            "-KILL" => assert_eq!(status.signal(), Some(9), "{target}: killed mid-write"),
            _ => assert_eq!(status.code(), Some(130), "{sig} {target}: {status:?}"),
        }
        assert_eq!(
            names(&out),
            Vec::<String>::new(),
            "{sig} {target}: nothing left"
        );
    }
}

#[test]
fn a_dead_writers_named_temporary_is_swept_by_the_next() {
    // What a writer on a file system without unnamed files leaves when killed: a named
    // temporary nobody holds a lock on.
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join(format!(
        ".m.zt.99999.1{}",
        ztensor::container::temp::TEMP_SUFFIX
    ));
    std::fs::write(&stale, b"half a file").unwrap();
    let unrelated = dir.path().join(".keep.tmp");
    std::fs::write(&unrelated, b"not ours").unwrap();
    let mut w = ztensor::Writer::create(dir.path().join("m.zt")).unwrap();
    w.add("x", &[1], &[1.0f32]).unwrap();
    w.finish().unwrap();
    assert_eq!(names(dir.path()), [".keep.tmp", "m.zt"]);
}

#[test]
fn a_closed_stdout_ends_zt_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.zt");
    let mut w = ztensor::Writer::create(&path).unwrap();
    w.add("x", &[1 << 18], &vec![0.5f32; 1 << 18]).unwrap();
    w.finish().unwrap();
    ends_quietly_on_a_closed_pipe(&["cat", p(&path), "x", "--json"]);
    ends_quietly_on_a_closed_pipe(&["cat", p(&path), "x"]);
}

/// Runs `zt args` with its stdout a pipe whose reader goes away before the first byte is
/// read: `zt` must end with status 141 (128 + SIGPIPE) and say nothing.
fn ends_quietly_on_a_closed_pipe(args: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zt"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(141), "{args:?}: {}", stderr(&o));
    assert_eq!(stderr(&o), "", "{args:?}: quietly");
}

#[test]
fn a_closed_stdout_ends_zt_info_quietly() {
    // 4,000 one-element tensors: either listing is larger than a pipe's buffer, so the
    // write fails even if it starts before the reader has gone.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.safetensors");
    let n = 4000;
    let entries: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "\"tensor.{i}\":{{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[{},{}]}}",
                4 * i,
                4 * i + 4
            )
        })
        .collect();
    let header = format!("{{{}}}", entries.join(","));
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + 4 * n, 0);
    std::fs::write(&path, bytes).unwrap();
    ends_quietly_on_a_closed_pipe(&["info", p(&path)]);
    ends_quietly_on_a_closed_pipe(&["info", p(&path), "--json"]);
}

#[test]
fn a_model_folder_reads_as_its_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    std::fs::write(model.join("config.json"), b"{}").unwrap();
    let st = model.join("model.safetensors");
    let src = ztensor::open(fixtures().join("valid/dtypes.zt")).unwrap();
    let views: Vec<_> = src
        .iter()
        .filter(|o| o.name() == "f32" || o.name() == "i64")
        .collect();
    ztensor::convert::write_safetensors_views(
        &views,
        None,
        &st,
        false,
        ztensor::Durability::Unsynced,
    )
    .unwrap();
    let o = zt(&["ls", p(&model)]);
    assert_eq!(stdout(&o), "f32\ni64\n", "{}", stderr(&o));
    let o = zt(&["info", p(&model)]);
    assert!(
        stdout(&o).contains("model.safetensors: safetensors, 2 objects"),
        "{}",
        stdout(&o)
    );

    // Two files of the same rank: the one transformers loads by default is the model...
    std::fs::copy(&st, model.join("other.safetensors")).unwrap();
    let o = zt(&["info", p(&model)]);
    assert!(
        stdout(&o).contains("model.safetensors: safetensors"),
        "{}",
        stderr(&o)
    );
    // ...and without it, they are listed and the user names one.
    std::fs::rename(model.join("model.safetensors"), model.join("w.safetensors")).unwrap();
    let o = zt(&["info", p(&model)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("2 candidate model files (other.safetensors, w.safetensors)"),
        "{}",
        stderr(&o)
    );
    // An empty folder.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = zt(&["info", p(&empty)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is a directory"), "{}", stderr(&o));
    assert!(stderr(&o).contains("*.index.json"), "{}", stderr(&o));
}

/// A .zt of f32 tensors with a file attribute.
fn write_zt(path: &Path, tensors: &[(&str, &[f32])], attribute: &str) {
    let mut w = ztensor::Writer::create(path).unwrap();
    w.set_attribute("source", attribute);
    for (name, v) in tensors {
        w.add(name, &[v.len() as u64], v).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn diff_takes_sets_and_counts_nans_as_differences() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.zt");
    write_zt(&a, &[("x", &[1.0, 2.0]), ("y", &[3.0, f32::NAN])], "one");
    // A set of the same objects: the same values.
    let index = dir.path().join("set.zt.index.json");
    let o = zt(&["convert", p(&a), p(&index), "--shard-size", "8B"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = zt(&["diff", p(&index), p(&a)]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));

    // A value that became NaN is a difference, reported as a NaN difference.
    let b = dir.path().join("b.zt");
    write_zt(
        &b,
        &[("x", &[1.0, f32::NAN]), ("y", &[3.0, f32::NAN])],
        "one",
    );
    let o = zt(&["diff", p(&a), p(&b)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o)
            .contains("x: 1 of 2 elements differ; first at [1]; largest absolute difference NaN"),
        "{}",
        stdout(&o)
    );
    let o = zt(&["diff", p(&a), p(&b), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["differences"][0]["max_abs_diff"], "NaN");

    // Attributes alone: a difference, unless only values are compared.
    let c = dir.path().join("c.zt");
    write_zt(&c, &[("x", &[1.0, 2.0]), ("y", &[3.0, f32::NAN])], "two");
    assert_eq!(zt(&["diff", p(&a), p(&c)]).status.code(), Some(1));
    let o = zt(&["diff", "--values-only", p(&a), p(&c)]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));

    // Trouble in JSON is JSON too.
    let o = zt(&["diff", "--json", p(&a), p(&dir.path().join("missing.zt"))]);
    assert_eq!(o.status.code(), Some(2));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "zt.diff/1");
    assert!(j["error"]["message"]
        .as_str()
        .unwrap()
        .contains("missing.zt"));
}

#[test]
fn resharding_in_place_leaves_no_old_shard_and_keeps_the_index_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.zt");
    let tensors: Vec<(String, Vec<f32>)> = (0..6)
        .map(|i| (format!("t{i}"), vec![i as f32; 16]))
        .collect();
    let refs: Vec<(&str, &[f32])> = tensors.iter().map(|(n, v)| (n.as_str(), &v[..])).collect();
    write_zt(&src, &refs, "x");
    let sh = dir.path().join("sh");
    std::fs::create_dir(&sh).unwrap();
    let index = sh.join("model.safetensors.index.json");
    let o = zt(&["convert", p(&src), p(&index), "--shard-size", "64B"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(names(&sh).len(), 7, "{:?}", names(&sh));
    // The index as a publisher writes it: more metadata than total_size.
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    json["metadata"]["total_parameters"] = 96.into();
    std::fs::write(&index, serde_json::to_vec(&json).unwrap()).unwrap();

    let o = zt(&[
        "convert",
        p(&index),
        p(&index),
        "--shard-size",
        "128B",
        "--force",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        names(&sh),
        [
            "model-00001-of-00003.safetensors",
            "model-00002-of-00003.safetensors",
            "model-00003-of-00003.safetensors",
            "model.safetensors.index.json"
        ]
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    assert_eq!(json["metadata"]["total_parameters"], 96);
    assert_eq!(json["metadata"]["total_size"], 384);
    let o = zt(&["diff", "--values-only", p(&index), p(&src)]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));

    // A set converts to GGUF too.
    let gguf = dir.path().join("m.gguf");
    let o = zt(&["convert", p(&index), p(&gguf)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = zt(&["diff", "--values-only", p(&gguf), p(&src)]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn cat_json_gives_e8m0_values_not_codes() {
    let o = zt(&[
        "cat",
        p(&fixtures().join("interop/pytorch/dtypes.pt")),
        "float8_e8m0fnu",
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // The stored codes 7e 7f 81 80 7d 80: 2^(code - 127).
    assert_eq!(
        j["values"],
        serde_json::json!([0.5, 1.0, 4.0, 2.0, 0.25, 2.0])
    );
}

#[test]
fn float_attributes_keep_every_digit() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.zt");
    let mut w = ztensor::Writer::create(&src).unwrap();
    w.set_attribute("lr", ztensor::Value::Float(0.417_241_487_574_282_03));
    w.add("w", &[1], &[1.0f32]).unwrap();
    w.finish().unwrap();
    let mag = dir.path().join("m.mag");
    let o = zt(&["convert", p(&src), p(&mag)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = ztensor::open(&mag).unwrap();
    assert_eq!(
        r.attributes().get("lr"),
        Some(&ztensor::Value::Float(0.417_241_487_574_282_03))
    );
    let o = zt(&["info", "--json", p(&mag)]);
    assert!(stdout(&o).contains("0.41724148757428203"), "{}", stdout(&o));
}

#[test]
fn a_v2_csr_whose_columns_do_not_increase_fails_verify_and_densify() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("csr.zt");
    let mut w = ztensor::Writer::create(&path).unwrap();
    // Row 0 holds columns 2 then 0: valid CSR for scipy, not for zTensor v2.
    w.add_csr("m", [2, 3], &[1.0f32, 2.0, 3.0], &[2, 0, 1], &[0, 2, 3])
        .unwrap();
    w.finish().unwrap();
    let o = zt(&["verify", p(&path)]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("column indices do not strictly increase within row 0 (index 1)"),
        "{}",
        stdout(&o)
    );
    let o = zt(&[
        "convert",
        "--densify",
        p(&path),
        p(&dir.path().join("d.zt")),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("layout data rule"), "{}", stderr(&o));
}

#[test]
fn help_says_what_a_file_may_be_and_lists_only_what_applies() {
    let top = stdout(&zt(&["--help"]));
    for kind in [
        "GGUF",
        "NumPy",
        "PyTorch",
        "index.json",
        "model folder",
        "URL",
    ] {
        assert!(top.contains(kind), "{kind}: {top}");
    }
    let info = stdout(&zt(&["info", "--help"]));
    assert!(!info.contains("--no-sync"), "{info}");
    assert!(
        info.contains("The file (or index, model folder or URL)"),
        "{info}"
    );
    let merge = stdout(&zt(&["merge", "--help"]));
    let to = merge.split("--to <TO>").nth(1).unwrap_or_default();
    let values = to.split("--compact").next().unwrap_or_default();
    assert!(values.contains("- v1.2"), "{merge}");
    assert!(
        !values.contains("safetensors") && !values.contains("mag"),
        "{merge}"
    );
    for flag in ["--force", "--no-sync", "--no-verify"] {
        assert!(merge.contains(flag), "{flag}: {merge}");
    }
    let convert = stdout(&zt(&["convert", "--help"]));
    assert!(
        convert.contains("Replace the output if it exists"),
        "{convert}"
    );
}

#[test]
fn a_broadcast_is_verified_without_being_materialized_and_refused_past_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broadcast.pt");
    // 6 stored i32s seen as (2^19, 2^10) with strides (0, 0): 2 GiB if materialized.
    let bytes = checkpoint::checkpoint(6, 0, &[1 << 19, 1 << 10], &[0, 0], false);
    std::fs::write(&path, bytes).unwrap();
    let o = zt(&["verify", p(&path)]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let o = zt(&["cat", p(&path), "t", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("exceeds the memory budget"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("--max-memory"), "{}", stderr(&o));
    // A view reaching past its storage is refused (at open, from its strides).
    let short = dir.path().join("short.pt");
    std::fs::write(
        &short,
        checkpoint::checkpoint(5, 0, &[2, 3], &[3, 1], false),
    )
    .unwrap();
    let o = zt(&["verify", p(&short)]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("elements reach byte 24"),
        "{}",
        stdout(&o)
    );
}
