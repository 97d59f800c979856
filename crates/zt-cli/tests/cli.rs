//! The real `zt` binary: every command, every exit status, hostile inputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn zt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zt"))
        .args(args)
        .output()
        .expect("zt runs")
}

fn fx(p: &str) -> String {
    fixtures().join(p).to_string_lossy().into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally, not by a signal")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// An error is one line on stderr, starting with "zt: ", never a panic or a backtrace.
fn assert_clean_error(o: &Output, want_code: i32, contains: &str) {
    let err = stderr(o);
    assert_eq!(code(o), want_code, "stderr: {err}");
    assert!(
        err.starts_with("zt: ") && err.lines().count() == 1,
        "one line: {err:?}"
    );
    assert!(
        err.contains(contains),
        "{err:?} should contain {contains:?}"
    );
    assert!(!err.contains("panicked") && !err.contains("backtrace"));
}

#[test]
fn info_table_and_json() {
    let o = zt(&["info", &fx("interop/v123_all.zt")]);
    assert_eq!(code(&o), 0);
    let s = stdout(&o);
    assert!(s.contains("zTensor 1.2.0, 13 objects"), "{s}");
    assert!(s.contains("quantized_group"));
    assert!(
        stderr(&o).is_empty(),
        "no progress output when stderr is not a terminal"
    );

    let o = zt(&["info", "--json", &fx("interop/v123_all.zt")]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["kind"], "zt");
    assert_eq!(j["version"], "1.2.0");
    let objects = j["objects"].as_array().unwrap();
    assert_eq!(objects.len(), 13);
    // The parameter count: every shape's product, as the summary line gives it too.
    let elements: u64 = objects
        .iter()
        .map(|o| {
            o["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .product::<u64>()
        })
        .sum();
    assert_eq!(j["elements"], elements);
    assert!(
        s.contains(&format!(", 13 objects, {elements} elements, ")),
        "{s}"
    );
    let fp8 = objects.iter().find(|o| o["name"] == "fp8").unwrap();
    assert_eq!(
        (fp8["dtype"].as_str(), fp8["type"].as_str()),
        (Some("u8"), Some("f8_e4m3fn"))
    );
    assert_eq!(fp8["attributes"]["b"]["bytes"], "0102");
    assert_eq!(fp8["components"]["data"]["length"], 4);
    let z = objects
        .iter()
        .find(|o| o["name"] == "zstd_sha_i64")
        .unwrap();
    assert_eq!(z["components"]["data"]["encoding"], "zstd");
    assert_eq!(z["components"]["data"]["uncompressed_length"], 64);
    assert!(z["components"]["data"]["digest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));

    let o = zt(&["info", "--json", &fx("interop/mag/snap_v300_0.2.2.mag")]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (j["kind"].as_str(), j["version"].as_str()),
        (Some("mag"), Some("300"))
    );
    assert_eq!(j["attributes"]["nested"]["k"], -1);
}

#[test]
fn ls_lists_names() {
    let o = zt(&["ls", &fx("valid/sparse.zt")]);
    assert_eq!(
        stdout(&o),
        "coo_3d_crc\ncoo_dups\ncsr\ncsr_empty\ncsr_u32_index\ncsr_zstd_sha\n"
    );
}

#[test]
fn cat_raw_json_and_components() {
    let o = zt(&["cat", &fx("interop/v123_all.zt"), "dense_f32"]);
    assert_eq!(code(&o), 0);
    let want: Vec<u8> = (0..12).flat_map(|i| (i as f32).to_le_bytes()).collect();
    assert_eq!(o.stdout, want);
    let o = zt(&[
        "cat",
        &fx("interop/v123_all.zt"),
        "csr",
        "--component",
        "indptr",
    ]);
    assert_eq!(
        o.stdout,
        [0u64, 1, 1, 3]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<_>>()
    );
    let o = zt(&["cat", "--json", &fx("interop/v123_all.zt"), "coo"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["values"][1], 5.0);
    assert_eq!(j["shape"], serde_json::json!([3, 4]));
    let o = zt(&["cat", "--json", &fx("valid/dtypes.zt"), "bool"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["values"][0], true);
    // Usage errors (exit 2), each saying what to do: a non-dense object without --component
    // or --json; a missing object; a missing component, naming those the object has; a near
    // miss, naming the object meant (a typo, or a prefix one naming scheme adds).
    let file = fx("interop/v123_all.zt");
    for (args, said) in [
        (&["csr"][..], "use --component"),
        (&["nope"], "no object named \"nope\""),
        (
            &["coo", "--component", "indice"],
            "not found: object \"coo\": no component \"indice\" (it has [\"coords\", \"values\"])",
        ),
        (
            &["dense_f23"],
            "no object named \"dense_f23\"; did you mean \"dense_f32\"?",
        ),
        (
            &["model.coo"],
            "no object named \"model.coo\"; did you mean \"coo\"?",
        ),
    ] {
        let args: Vec<&str> = ["cat", file.as_str()].iter().chain(args).copied().collect();
        assert_clean_error(&zt(&args), 2, said);
    }
}

/// An object of a layout read structurally has no dense form: `cat` of it, raw or as JSON, is
/// a usage error naming its parts, and `--component` gives each.
#[test]
fn cat_of_an_object_with_no_dense_form_names_its_parts() {
    let file = fx("valid/v2_structural.zt");
    for json in [false, true] {
        let mut args = vec!["cat", &file, "custom"];
        if json {
            args.push("--json");
        }
        let o = zt(&args);
        assert_clean_error(
            &o,
            2,
            "object \"custom\" is x.custom/1, which has no dense form here; --component ROLE \
             gives a part's bytes (its parts: payload)",
        );
    }
    let o = zt(&["cat", &file, "custom", "--component", "payload"]);
    assert_eq!((code(&o), o.stdout.len()), (0, 5), "{}", stderr(&o));
}

/// `future` is of a type unknown here, shape [999], and holds 8 bytes (v2 never judges the
/// size of such a type): `cat` gives those bytes, `--json` with the shape of the elements
/// there are (as ztio's), and a slice, which would read past its part, is refused.
#[test]
fn cat_of_a_type_unknown_here_gives_what_its_part_holds() {
    let file = fx("valid/v2_structural.zt");
    let o = zt(&["cat", &file, "future"]);
    assert_eq!((code(&o), o.stdout.len()), (0, 8), "{}", stderr(&o));
    let o = zt(&["cat", "--json", &file, "future"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["shape"], serde_json::json!([8]));
    assert_eq!(j["type"], "x.future/1");
    assert_eq!(j["values"].as_array().map(Vec::len), Some(8));
    for spec in ["0:2", "::-1"] {
        let o = zt(&["cat", &file, "future", "--slice", spec]);
        assert_clean_error(
            &o,
            1,
            "its data holds 8 bytes, not the 999 its shape [999] takes as x.future/1",
        );
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn verify_ok_failed_and_hostile() {
    let o = zt(&[
        "verify",
        &fx("valid/digests.zt"),
        &fx("interop/mag/v1_0.1.2.mag"),
    ]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    assert!(stdout(&o).contains("4 digests and checksums verified"));
    let o = zt(&["verify", "--json", &fx("invalid/digest_mismatch.zt")]);
    assert_eq!(code(&o), 1);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "zt.verify/1");
    assert_eq!(
        (&j["ok"], &j["results"][0]["ok"]),
        (&false.into(), &false.into())
    );
    let failure = &j["results"][0]["failures"][0];
    assert_eq!(failure["error_kind"], "ChecksumMismatch");
    assert_eq!(failure["name"], "w");
    assert!(failure["file"]
        .as_str()
        .unwrap()
        .ends_with("digest_mismatch.zt"));
    // Every hostile file of the corpus: exit 1, a clear report, never a crash.
    for e in std::fs::read_dir(fixtures().join("invalid")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "tsv") {
            continue;
        }
        let o = zt(&["verify", p.to_str().unwrap()]);
        assert_eq!(code(&o), 1, "{p:?}: {}", stdout(&o));
        assert!(stdout(&o).contains("FAILED"), "{p:?}");
        assert!(!stderr(&o).contains("panicked"), "{p:?}");
    }
}

#[test]
fn hostile_inputs_give_one_line_errors_on_every_reading_command() {
    for f in [
        "invalid/nesting_10000.zt",
        "invalid/zstd_bomb.zt",
        "invalid/mag_v1_crc_mismatch.mag",
        "invalid/empty_file.zt",
    ] {
        for cmd in [vec!["info", &fx(f)[..]], vec!["ls", &fx(f)[..]]] {
            let o = zt(&cmd);
            if code(&o) != 0 {
                assert_clean_error(&o, 1, "");
            }
        }
    }
    assert_clean_error(
        &zt(&["info", &fx("invalid/nesting_10000.zt")]),
        1,
        "CBOR nesting deeper than 128 levels",
    );
    assert_clean_error(
        &zt(&["cat", &fx("invalid/zstd_bomb.zt"), "w"]),
        1,
        "inflates past its declared length",
    );
    assert_clean_error(
        &zt(&["info", "/nonexistent/file.zt"]),
        1,
        "cannot open file",
    );
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(code(&zt(&[])), 2);
    assert_eq!(code(&zt(&["info"])), 2);
    assert_eq!(code(&zt(&["info", "--bogus", "x"])), 2);
    assert_eq!(code(&zt(&["--help"])), 0);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.unknown");
    assert_clean_error(
        &zt(&["convert", &fx("valid/dtypes.zt"), out.to_str().unwrap()]),
        2,
        "--to zt|v2|v1.2|mag|safetensors",
    );
}

#[test]
fn diff_same_and_different() {
    let o = zt(&[
        "diff",
        &fx("interop/v123_savefile.zt"),
        &fx("interop/v123_savefile.zt"),
    ]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("same objects and values"));
    // dtypes.zt has a bool object dtypes_zstd.zt lacks; values otherwise equal.
    let o = zt(&[
        "diff",
        "--json",
        &fx("valid/dtypes.zt"),
        &fx("valid/dtypes_zstd.zt"),
    ]);
    assert_eq!(code(&o), 1);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["same"], false);
    assert_eq!(j["differences"].as_array().unwrap().len(), 1);
    assert_eq!(
        (
            j["differences"][0]["name"].as_str(),
            j["differences"][0]["what"].as_str()
        ),
        (Some("bool"), Some("only_in_a"))
    );
    // Values that differ: the object, how many elements, the largest difference.
    let o = zt(&["diff", &fx("interop/v111.zt"), &fx("interop/v123_all.zt")]);
    assert_eq!(code(&o), 1);
    let s = stdout(&o);
    assert!(s.contains("bf16: only in A"), "{s}");
}

#[test]
fn safetensors_round_trip_keeps_bytes_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let st = fx("interop/safetensors/numpy.safetensors");
    let z = dir.path().join("a.zt");
    let back = dir.path().join("b.safetensors");
    assert_eq!(
        code(&zt(&[
            "convert",
            &st,
            z.to_str().unwrap(),
            "--compress",
            "--digest",
            "sha256"
        ])),
        0
    );
    assert_eq!(code(&zt(&["verify", z.to_str().unwrap()])), 0);
    assert_eq!(
        code(&zt(&[
            "convert",
            z.to_str().unwrap(),
            back.to_str().unwrap()
        ])),
        0
    );
    let o = zt(&["diff", &st, back.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    let o = zt(&["diff", &st, z.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    let j: serde_json::Value =
        serde_json::from_slice(&zt(&["info", "--json", back.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(j["attributes"]["note"], "made by safetensors (Python)");
    // Every tensor's bytes are identical.
    for name in ["f64", "f32", "f16", "i64", "u64", "bool", "scalar", "empty"] {
        assert_eq!(
            zt(&["cat", &st, name]).stdout,
            zt(&["cat", back.to_str().unwrap(), name]).stdout,
            "{name}"
        );
    }
}

/// Names and keys come from the file: in the human views they are shown with control
/// characters and bidirectional overrides escaped, so a hostile file cannot move the cursor,
/// retitle the terminal, clear it or fake lines of output; `--json` keeps them exact.
#[test]
fn names_from_a_file_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evil.safetensors");
    let name = "w\u{1b}[2J\u{7}\r\nfake\u{202e}";
    let header = serde_json::json!({
        name: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
        "__metadata__": {"k\u{1b}]0;title\u{7}": "v"},
    })
    .to_string();
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    bytes.extend([0u8; 4]);
    std::fs::write(&path, bytes).unwrap();
    let p_ = path.to_str().unwrap();
    let hidden = |c: char| c.is_control() && c != '\n' || c == '\u{202e}';
    for args in [
        vec!["ls", p_],
        vec!["info", p_],
        vec!["verify", p_],
        vec!["diff", p_, &fx("interop/mag/v1_0.1.2.mag")],
    ] {
        let o = zt(&args);
        for text in [String::from_utf8_lossy(&o.stdout), stderr(&o).into()] {
            assert!(!text.contains(hidden), "{args:?}: {text:?}");
        }
    }
    assert_eq!(
        String::from_utf8_lossy(&zt(&["ls", p_]).stdout),
        "w\\u{1b}[2J\\u{7}\\r\\nfake\\u{202e}\n"
    );
    let j: serde_json::Value = serde_json::from_slice(&zt(&["info", "--json", p_]).stdout).unwrap();
    assert!(j.to_string().contains("\\u001b[2J"), "{j}");
}

/// File names need not be UTF-8 (Linux allows any bytes but `/` and NUL): the output's kind
/// still comes from its extension, and the file reads back.
#[cfg(target_os = "linux")]
#[test]
fn a_name_that_is_not_utf8_is_read_and_written() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(std::ffi::OsStr::from_bytes(b"\xff\xfe.zt"));
    let src = fx("interop/mag/v1_0.1.2.mag");
    let run = |args: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_zt"))
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["convert".as_ref(), src.as_ref(), out.as_os_str()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = run(&["diff".as_ref(), src.as_ref(), out.as_os_str()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// An output that is a folder or a pipe is refused with and without --force (not told to
/// use --force), and stays what it was: the writer's rename would have replaced it with a
/// regular file (a device too: `/dev/null` given as the output, as root).
#[cfg(unix)]
#[test]
fn convert_refuses_an_output_that_is_not_a_regular_file() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("out.safetensors");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let folder = dir.path().join("out.zt");
    std::fs::create_dir(&folder).unwrap();
    for (out, what) in [(&fifo, "not a regular file"), (&folder, "a folder")] {
        for force in [false, true] {
            let src = fx("interop/mag/v1_0.1.2.mag");
            let mut args = vec![
                "convert",
                &src,
                out.to_str().unwrap(),
                "--to",
                "safetensors",
            ];
            if force {
                args.push("--force");
            }
            let o = zt(&args);
            assert_clean_error(
                &o,
                2,
                &format!("{what}; zt writes its output to a regular file"),
            );
        }
    }
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(std::fs::metadata(&folder).unwrap().is_dir());
}

#[test]
fn convert_to_mag_refuses_overwrite_and_what_the_target_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.mag");
    let o_ = out.to_str().unwrap();
    assert_eq!(
        code(&zt(&[
            "convert",
            &fx("interop/mag/v1_0.1.2.mag"),
            o_,
            "--mag-version",
            "1"
        ])),
        0
    );
    assert_clean_error(
        &zt(&["convert", &fx("interop/mag/v1_0.1.2.mag"), o_]),
        2,
        "I/O error: the output exists: use --force (force=True from Python) to replace it",
    );
    assert_eq!(
        code(&zt(&[
            "convert",
            &fx("interop/mag/v1_0.1.2.mag"),
            o_,
            "--force"
        ])),
        0
    );
    assert_eq!(code(&zt(&["diff", &fx("interop/mag/v1_0.1.2.mag"), o_])), 0);
    let o = zt(&[
        "convert",
        &fx("interop/v123_all.zt"),
        dir.path().join("y.mag").to_str().unwrap(),
        "--force",
    ]);
    assert_clean_error(&o, 2, "use densify");
    let o = zt(&[
        "convert",
        &fx("valid/sparse.zt"),
        dir.path().join("s.safetensors").to_str().unwrap(),
    ]);
    assert_clean_error(&o, 2, "cannot be stored in .safetensors as it is");
    // GGUF blocks no dequantizer decodes: densify cannot help, and the message says so.
    let q = dir.path().join("q.safetensors");
    let o = zt(&[
        "convert",
        &fx("interop/gguf/quant.gguf"),
        q.to_str().unwrap(),
        "--densify",
        "--attributes-as-json",
    ]);
    assert_clean_error(
        &o,
        1,
        "object \"q8_1\": a gguf.q8_1/1 object cannot be stored in .safetensors: dequantizing \
         Q8_1 blocks is not supported (a .zt or GGUF output keeps them as they are)",
    );
    assert!(!q.exists());
    let dense = dir.path().join("s2.safetensors");
    assert_eq!(
        code(&zt(&[
            "convert",
            &fx("valid/sparse.zt"),
            dense.to_str().unwrap(),
            "--densify"
        ])),
        0
    );
    let j: serde_json::Value =
        serde_json::from_slice(&zt(&["cat", "--json", dense.to_str().unwrap(), "csr"]).stdout)
            .unwrap();
    assert_eq!(j["values"][10], 2.0);
    let o = zt(&[
        "convert",
        &fx("valid/attributes.zt"),
        dir.path().join("a.safetensors").to_str().unwrap(),
    ]);
    assert_clean_error(&o, 2, "safetensors metadata holds text only");
    assert!(
        stderr(&o).contains("--attributes-as-json"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.path().join("a.safetensors").exists());
    // Asked for, every value that is not text is written as its JSON text.
    let text = dir.path().join("a.safetensors");
    let o = zt(&[
        "convert",
        &fx("valid/attributes.zt"),
        text.to_str().unwrap(),
        "--attributes-as-json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let info: serde_json::Value =
        serde_json::from_slice(&zt(&["info", "--json", text.to_str().unwrap()]).stdout).unwrap();
    let want = serde_json::json!({
        "bytes": "{\"bytes\":\"0001ff\"}",
        "double": "0.1",
        "half": "1.25",
        "list": "[1,2.5]",
        "map": "{\"inner\":[1,\"a\",null]}",
        "nint": "-18446744073709551616",
        "none": "null",
        "single": "0.10000000149011612",
        "small": "-3",
        "tagged": "{\"tag\":1,\"value\":1700000000}",
        "text": "h\u{e9}llo \u{2713}",
        "uint": "18446744073709551615",
        "yes": "true",
    });
    assert_eq!(info["attributes"], want);
    // The same for a set's shards (--shard-size writes an index and .safetensors shards).
    let index = dir.path().join("set.safetensors.index.json");
    let o = zt(&[
        "convert",
        &fx("valid/attributes.zt"),
        index.to_str().unwrap(),
        "--shard-size",
        "1KB",
        "--attributes-as-json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let shard = dir.path().join("set-00001-of-00001.safetensors");
    let info: serde_json::Value =
        serde_json::from_slice(&zt(&["info", "--json", shard.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(info["attributes"], want);
    // GGUF holds numbers, text and lists of one type; null, maps, tags and byte strings
    // (a u8 list) as JSON text when asked. Its own table of value types stays a table.
    let gguf = dir.path().join("a.gguf");
    let source = fx("valid/attributes.zt");
    let convert_gguf = |extra: &[&str]| {
        let args = [
            &["convert", &source, gguf.to_str().unwrap(), "--force"],
            extra,
        ]
        .concat();
        zt(&args)
    };
    assert_clean_error(&convert_gguf(&[]), 2, "--attributes-as-json");
    let o = convert_gguf(&["--attributes-as-json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let info: serde_json::Value =
        serde_json::from_slice(&zt(&["info", "--json", gguf.to_str().unwrap()]).stdout).unwrap();
    let attributes = &info["attributes"];
    assert_eq!(attributes["none"], "null");
    assert_eq!(attributes["map"], "{\"inner\":[1,\"a\",null]}");
    assert_eq!(attributes["small"], -3);
    // An integer and a float: no one GGUF type holds both.
    assert_eq!(attributes["list"], "[1,2.5]");
    assert_eq!(attributes["text"], "h\u{e9}llo \u{2713}");
    assert!(attributes["gguf.value_types"].is_object(), "{attributes}");
    // zTensor holds every value as it is: the option is a mistake there.
    let o = zt(&[
        "convert",
        &fx("valid/attributes.zt"),
        dir.path().join("a.zt").to_str().unwrap(),
        "--attributes-as-json",
    ]);
    assert_clean_error(
        &o,
        2,
        "--attributes-as-json applies to .safetensors and GGUF output only",
    );
}

#[test]
fn a_damaged_entry_is_shown_as_declared_and_upgrade_can_leave_it_out() {
    let mut bytes = std::fs::read(fixtures().join("interop/v123_all.zt")).unwrap();
    // `csr`'s part "indptr" renamed: that object's entry is damaged, the rest is whole.
    let at = bytes.windows(6).position(|w| w == b"indptr").unwrap();
    bytes[at + 5] = b's';
    let dir = tempfile::tempdir().unwrap();
    let damaged = dir.path().join("damaged.zt");
    std::fs::write(&damaged, bytes).unwrap();
    let damaged = damaged.to_str().unwrap();
    let why = "object \"csr\": sparse_csr object has no \"indptr\" component";

    let info = stdout(&zt(&["info", damaged]));
    let row = info.lines().find(|l| l.starts_with("csr ")).unwrap();
    assert_eq!(
        row.split_whitespace().take(3).collect::<Vec<_>>(),
        ["csr", "sparse_csr", "-"]
    );
    assert_clean_error(&zt(&["cat", damaged, "csr"]), 1, why);

    // Without the flag an upgrade fails on it and writes nothing; with it, the rest.
    let out = dir.path().join("salvaged.zt");
    let out_s = out.to_str().unwrap();
    let advice = "; to write the rest without it: --skip-unreadable";
    let plain = zt(&["upgrade", "--to", "v1.2", damaged, out_s]);
    assert_clean_error(&plain, 1, why);
    assert!(stderr(&plain).contains(advice), "{}", stderr(&plain));
    assert!(!out.exists());
    // Into shards, the input is blamed (v2's own named the shard being written), with the
    // way past it (into .safetensors shards with an index too, since 2026-12-06).
    for (name, extra, after) in [
        ("sharded.zt", &[][..], advice),
        ("indexed.safetensors", &["--densify"][..], advice),
    ] {
        let target = dir.path().join(name);
        let args = [damaged, target.to_str().unwrap(), "--shard-size", "1KB"];
        let plain = zt(&[&["convert"][..], &args, extra].concat());
        assert_clean_error(&plain, 1, why);
        assert!(
            stderr(&plain).starts_with(&format!("zt: {damaged}: invalid file: {why}{after}")),
            "{name}: {}",
            stderr(&plain)
        );
        assert!(!target.exists(), "{name}");
    }
    let salvaged = zt(&[
        "upgrade",
        "--to",
        "v1.2",
        "--skip-unreadable",
        damaged,
        out_s,
    ]);
    assert_eq!(code(&salvaged), 0, "{}", stderr(&salvaged));
    assert!(stderr(&salvaged).contains("object \"csr\" left out, unreadable"));
    let names = stdout(&zt(&["ls", out_s]));
    assert_eq!(names.lines().count(), 12, "{names}");
    assert!(!names.lines().any(|n| n == "csr"));
    assert_eq!(code(&zt(&["verify", out_s])), 0);

    // `convert` takes the flag too (the views writers: .safetensors; the object loop: .zt;
    // the set writers: .safetensors shards with an index).
    for (name, options) in [
        ("salvaged_v2.zt", &["--densify"][..]),
        ("salvaged.safetensors", &["--densify"][..]),
        (
            "salvaged.safetensors.index.json",
            &["--densify", "--shard-size", "1KB"][..],
        ),
    ] {
        let out = dir.path().join(name);
        let out_s = out.to_str().unwrap();
        let plain = zt(&[&["convert", damaged, out_s][..], options].concat());
        assert_clean_error(&plain, 1, why);
        assert!(
            stderr(&plain).contains(advice),
            "{name}: {}",
            stderr(&plain)
        );
        assert!(!out.exists(), "{name}");
        let salvage = [
            &["convert", "--skip-unreadable", damaged, out_s][..],
            options,
        ]
        .concat();
        let salvaged = zt(&salvage);
        assert_eq!(code(&salvaged), 0, "{name}: {}", stderr(&salvaged));
        assert!(stderr(&salvaged).contains("object \"csr\" left out, unreadable"));
        let names = stdout(&zt(&["ls", out_s]));
        assert!(names.lines().count() > 3, "{name}: {names}");
        assert!(!names.lines().any(|n| n == "csr"), "{name}");
    }
}

#[test]
fn a_v1_0_file_shows_its_version_and_upgrades() {
    let v100 = fx("interop/v100_pypi-1.0.1.zt");
    let o = zt(&["info", &v100]);
    assert_eq!(code(&o), 0);
    assert!(
        stdout(&o).contains("zTensor 1.0.0, 4 objects"),
        "{}",
        stdout(&o)
    );
    let dir = tempfile::tempdir().unwrap();
    let up = dir.path().join("up.zt");
    let upgrade = zt(&["upgrade", &v100, up.to_str().unwrap(), "--to", "v1.2"]);
    assert_eq!(code(&upgrade), 0);
    let j: serde_json::Value =
        serde_json::from_slice(&zt(&["info", "--json", up.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(j["version"], "1.2.0");
    // The default is v2: the same tensors.
    let up2 = dir.path().join("up2.zt");
    assert_eq!(code(&zt(&["upgrade", &v100, up2.to_str().unwrap()])), 0);
    let j: serde_json::Value =
        serde_json::from_slice(&zt(&["info", "--json", up2.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(j["version"], "2");
    assert_eq!(code(&zt(&["diff", &v100, up2.to_str().unwrap()])), 0);
    assert_eq!(code(&zt(&["diff", &v100, up.to_str().unwrap()])), 0);
    assert_eq!(code(&zt(&["verify", up.to_str().unwrap()])), 0);
}

#[test]
fn upgrade_merge_rm() {
    let dir = tempfile::tempdir().unwrap();
    let up = dir.path().join("up.zt");
    assert_eq!(
        code(&zt(&[
            "upgrade",
            &fx("interop/v014.zt"),
            up.to_str().unwrap(),
            "--to",
            "v1.2"
        ])),
        0
    );
    let j: serde_json::Value =
        serde_json::from_slice(&zt(&["info", "--json", up.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(j["version"], "1.2.0");
    // By default, and with --compact, upgrade writes v2 with the same values.
    for (name, extra) in [("up2.zt", None), ("up2c.zt", Some("--compact"))] {
        let (out, src) = (dir.path().join(name), fx("interop/v014.zt"));
        let mut args = vec!["upgrade", &src[..], out.to_str().unwrap()];
        args.extend(extra);
        assert_eq!(code(&zt(&args)), 0);
        let j = json_of(&zt(&["info", "--json", out.to_str().unwrap()]));
        assert_eq!(j["version"], "2");
        assert_eq!(
            code(&zt(&[
                "diff",
                &fx("interop/v014.zt"),
                out.to_str().unwrap()
            ])),
            0
        );
        assert_eq!(code(&zt(&["verify", out.to_str().unwrap()])), 0);
    }
    assert_eq!(
        code(&zt(&[
            "upgrade",
            &fx("interop/v014.zt"),
            dir.path().join("bad.zt").to_str().unwrap(),
            "--to",
            "v1.2",
            "--compact"
        ])),
        2
    );
    assert_eq!(
        code(&zt(&["diff", &fx("interop/v014.zt"), up.to_str().unwrap()])),
        0
    );
    assert_clean_error(
        &zt(&[
            "upgrade",
            &fx("interop/v014_rust.zt"),
            dir.path().join("r.zt").to_str().unwrap(),
        ]),
        1,
        "csr_try",
    );

    let merged = dir.path().join("m.zt");
    let o = zt(&[
        "merge",
        &fx("valid/digests.zt"),
        &fx("valid/scalars.zt"),
        "-o",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stdout(&zt(&["ls", merged.to_str().unwrap()]))
            .lines()
            .count(),
        7
    );
    let o = zt(&["verify", merged.to_str().unwrap()]);
    // v2 output (the default) digests every part: 8 parts in 7 objects.
    assert!(
        stdout(&o).contains("8 digests"),
        "every part digested: {}",
        stdout(&o)
    );
    let o = zt(&[
        "merge",
        &fx("valid/digests.zt"),
        &fx("valid/digests.zt"),
        "-o",
        dir.path().join("c.zt").to_str().unwrap(),
    ]);
    assert_clean_error(&o, 1, "names must not clash");

    let removed = dir.path().join("r.zt");
    assert_eq!(
        code(&zt(&[
            "rm",
            merged.to_str().unwrap(),
            "rank0",
            "crc32c_raw",
            "-o",
            removed.to_str().unwrap()
        ])),
        0
    );
    assert_eq!(
        stdout(&zt(&["ls", removed.to_str().unwrap()]))
            .lines()
            .count(),
        5
    );
    assert_clean_error(
        &zt(&[
            "rm",
            merged.to_str().unwrap(),
            "nope",
            "-o",
            dir.path().join("q.zt").to_str().unwrap(),
        ]),
        2,
        "no object named",
    );
}

#[test]
fn merged_blobs_are_copied_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let merged = dir.path().join("m.zt");
    assert_eq!(
        code(&zt(&[
            "merge",
            &fx("valid/digests.zt"),
            "-o",
            merged.to_str().unwrap(),
            "--to",
            "v1.2"
        ])),
        0
    );
    let a = ztensor::open(fx("valid/digests.zt")).unwrap();
    let b = ztensor::open(&merged).unwrap();
    for o in &a {
        for c in o.components() {
            let copied = b.object(&o.name).unwrap().component(&c.role).unwrap();
            assert_eq!(c.stored_bytes().unwrap(), copied.stored_bytes().unwrap());
            assert_eq!(
                c.digest,
                b.object(&o.name)
                    .unwrap()
                    .component(&c.role)
                    .unwrap()
                    .digest
            );
        }
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Each of `names` reads the same bytes through `zt cat` from `a` as from `b`.
fn assert_same_objects<'a>(a: &str, b: &str, names: impl IntoIterator<Item = &'a str>) {
    for name in names {
        let (x, y) = (zt(&["cat", a, name]), zt(&["cat", b, name]));
        assert!(
            code(&x) == 0 && x.stdout == y.stdout,
            "{name}: {}",
            stderr(&y)
        );
    }
}

/// Writes a .zt of f32 tensors.
fn write_f32(path: &Path, tensors: &[(&str, &[u64], &[f32])]) {
    let mut w = ztensor::Writer::create(path).unwrap();
    for (name, shape, data) in tensors {
        w.add(name, shape, data).unwrap();
    }
    w.finish().unwrap();
}

fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn diff_exits_0_same_1_different_2_trouble() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.zt"), dir.path().join("b.zt"));
    write_f32(&a, &[("w", &[2], &[1.0, 2.0])]);
    write_f32(&b, &[("w", &[2], &[1.0, 3.0])]);
    assert_eq!(code(&zt(&["diff", p(&a), p(&a)])), 0);
    assert_eq!(code(&zt(&["diff", p(&a), p(&b)])), 1);
    // A missing or unreadable file is trouble, not a difference.
    assert_clean_error(&zt(&["diff", p(&a), "/nonexistent/b.zt"]), 2, "cannot open");
    assert_clean_error(
        &zt(&["diff", &fx("invalid/empty_file.zt"), p(&a)]),
        2,
        "empty_file.zt",
    );
    // Bad usage.
    assert_eq!(code(&zt(&["diff", p(&a)])), 2);
    assert_eq!(code(&zt(&["diff", "--atol", "-1", p(&a), p(&b)])), 2);
    assert_eq!(code(&zt(&["diff", "--rtol", "nan", p(&a), p(&b)])), 2);
}

/// A conversion's error names the file at fault: the input for what is wrong with it or
/// cannot be decoded in it (exit 1), the output for what the output kind cannot hold (a
/// usage error, exit 2).
#[test]
fn a_conversion_error_names_the_file_at_fault() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.zt");
    let convert = |input: &str| zt(&["convert", &fx(input), p(&out), "--no-sync"]);
    // A v0.1 CSR object whose blob is too short for its row pointers.
    let o = convert("interop/v014_rust.zt");
    assert_clean_error(&o, 1, "v014_rust.zt: invalid file: object \"csr_try\"");
    // An HDF5 dataset that cannot be read: the first, an external link to a file not there.
    let o = convert("interop/hdf5/h5py_default.h5");
    assert_eq!(code(&o), 1);
    let last = stderr(&o).lines().last().unwrap_or_default().to_owned();
    assert!(
        last.starts_with("zt: ")
            && last.contains("h5py_default.h5: unsupported: object \"/missing\""),
        "{last}"
    );
    // v1.2 objects zTensor v2 has no layout for.
    let o = convert("valid/quantized.zt");
    assert_clean_error(
        &o,
        2,
        "out.zt: invalid argument: object \"q2_u8\": zTensor v2 has no layout",
    );
    // A v1.1 CSR object with u16 indices (v2's index parts are u32 or u64): the message
    // names both ways on, and each works.
    let o = convert("valid/v11_types.zt");
    assert_clean_error(&o, 2, "out.zt: invalid argument: object \"csr_narrow\"");
    assert!(
        stderr(&o).contains("not u16; write v1.2 to keep it as it is, or densify it"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
    for way in ["--to=v1.2", "--densify"] {
        let o = zt(&[
            "convert",
            &fx("valid/v11_types.zt"),
            p(&out),
            "--no-sync",
            "--force",
            way,
        ]);
        assert_eq!(code(&o), 0, "{way}: {}", stderr(&o));
        let o = zt(&["diff", &fx("valid/v11_types.zt"), p(&out)]);
        assert_eq!(code(&o), 0, "{way}: {}{}", stdout(&o), stderr(&o));
    }
}

/// An object an input lists but cannot read stops `merge`, naming it and the way past it;
/// `--skip-unreadable` leaves it out, with a note, and merges the rest.
#[test]
fn merge_skips_an_unreadable_object_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.zt");
    // The HDF5 file's "/missing" is an external link to a file not there.
    let h5 = fx("interop/hdf5/h5py_default.h5");
    let other = fx("valid/v2_every_type.zt");
    let o = zt(&["merge", "-o", p(&out), "--no-sync", &h5, &other]);
    assert_clean_error(&o, 1, "h5py_default.h5: unsupported: object \"/missing\"");
    assert!(stderr(&o).contains("--skip-unreadable"), "{}", stderr(&o));
    assert!(!out.exists());
    let o = zt(&[
        "merge",
        "-o",
        p(&out),
        "--no-sync",
        "--skip-unreadable",
        &h5,
        &other,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("h5py_default.h5: object \"/missing\" left out, unreadable"),
        "{}",
        stderr(&o)
    );
    let names = stdout(&zt(&["ls", p(&out)]));
    assert!(!names.lines().any(|n| n == "/missing"), "{names}");
    assert!(names.lines().any(|n| n == "/f32"), "{names}");
    // The other input's objects are all there, with their values.
    let names = stdout(&zt(&["ls", &other]));
    assert_same_objects(&other, p(&out), names.lines());
}

/// Conversions into a set and from one take `--skip-unreadable` as one-file conversions do
/// (they refused it), and their refusal names it.
#[test]
fn set_conversions_skip_unreadable_objects_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    // The HDF5 file's "/missing" is an external link to a file not there.
    let h5 = fx("interop/hdf5/h5py_default.h5");
    let set = dir.path().join("m.zt.index.json");
    let last_line = |o: &Output| stderr(o).lines().last().unwrap_or_default().to_owned();
    let args = ["convert", &h5, p(&set), "--shard-size", "4KB", "--no-sync"];
    let o = zt(&args);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let refusal = last_line(&o);
    assert!(
        refusal.starts_with(&format!("zt: {h5}: unsupported: object \"/missing\""))
            && refusal.ends_with(
                "; to write the rest without it: --skip-unreadable (ztio: skip_unreadable=True)"
            ),
        "{refusal}"
    );
    assert!(!set.exists());
    let o = zt(&[&args[..], &["--skip-unreadable"]].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("{h5}: object \"/missing\" left out, unreadable")),
        "{}",
        stderr(&o)
    );
    let names = stdout(&zt(&["ls", p(&set)]));
    assert!(!names.lines().any(|n| n == "/missing"), "{names}");
    assert!(names.lines().count() > 20, "{names}");
    assert_same_objects(&h5, p(&set), names.lines());

    // A set whose shard holds unreadable objects (an index over the HDF5 file), into a set of
    // the same shards and into one file: refused, or each left out naming the shard.
    let shard = dir.path().join("a.h5");
    std::fs::copy(&h5, &shard).unwrap();
    let listed = stdout(&zt(&["ls", p(&shard)]));
    let map: serde_json::Map<String, serde_json::Value> = listed
        .lines()
        .map(|n| (n.to_owned(), "a.h5".into()))
        .collect();
    let index = dir.path().join("in.safetensors.index.json");
    let index_json = serde_json::json!({ "metadata": {}, "weight_map": map });
    std::fs::write(&index, index_json.to_string()).unwrap();
    for out in ["same.zt.index.json", "one.zt"] {
        let out = dir.path().join(out);
        let args = ["convert", p(&index), p(&out), "--no-sync"];
        let o = zt(&args);
        assert_eq!(code(&o), 1, "{}", stderr(&o));
        assert!(
            last_line(&o).contains("--skip-unreadable"),
            "{}",
            stderr(&o)
        );
        assert!(!out.exists());
        let o = zt(&[&args[..], &["--skip-unreadable"]].concat());
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let left_out = format!(
            "{}: object \"/missing\" left out, unreadable",
            shard.display()
        );
        assert!(stderr(&o).contains(&left_out), "{}", stderr(&o));
        // Every object but those left out or skipped (each in a note), with its values.
        let notes = stderr(&o);
        let passed_over = |n: &str| {
            notes.contains(&format!("object {n:?} left out"))
                || notes.contains(&format!("object {n:?} skipped"))
        };
        let kept: Vec<&str> = listed.lines().filter(|n| !passed_over(n)).collect();
        assert_eq!(
            stdout(&zt(&["ls", p(&out)])).lines().collect::<Vec<_>>(),
            kept
        );
        assert_same_objects(p(&shard), p(&out), kept);
    }
}

/// A file attribute that is NaN is the same NaN in every shard of a set made from the file: the
/// set diffs the same as the file, and its shards merge back into one file (they were
/// "differing" by `!=`, so a set could not be made whole again).
#[test]
fn a_nan_attribute_is_the_same_in_every_shard() {
    let dir = tempfile::tempdir().unwrap();
    let file = fx("valid/v2_structural.zt");
    let set = dir.path().join("m.zt.index.json");
    let o = zt(&["convert", &file, p(&set), "--shard-size", "1", "--no-sync"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = zt(&["diff", &file, p(&set)]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    for (args, out) in [
        (vec!["convert", p(&set)], dir.path().join("one.zt")),
        (vec!["merge", p(&set), "-o"], dir.path().join("merged.zt")),
    ] {
        let o = zt(&[&args[..], &[p(&out), "--no-sync"]].concat());
        assert_eq!(code(&o), 0, "{args:?}: {}", stderr(&o));
        let o = zt(&["diff", &file, p(&out)]);
        assert_eq!(code(&o), 0, "{args:?}: {}{}", stdout(&o), stderr(&o));
    }
}

/// `--densify` into `.zt` shards, with an index from a file and from a set, and v2's own (v2
/// holds no `quantized_group`: the refusal's "dequantize" now has a way there).
#[test]
fn densify_writes_zt_shards() {
    let dir = tempfile::tempdir().unwrap();
    let file = fx("valid/quantized.zt");
    let v12_set = dir.path().join("q.zt.index.json");
    let o = zt(&[
        "convert",
        &file,
        p(&v12_set),
        "--to",
        "v1.2",
        "--shard-size",
        "1",
        "--no-sync",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for (input, out, sized) in [
        (&file, "d.zt.index.json", true),
        (&p(&v12_set).to_owned(), "e.zt.index.json", false),
        // v2's own shards (a root and its shards, no index).
        (&file, "root.zt", true),
    ] {
        let out = dir.path().join(out);
        let mut args = vec!["convert", input.as_str(), p(&out), "--no-sync"];
        if sized {
            args.extend(["--shard-size", "1KB"]);
        }
        let o = zt(&args);
        assert_eq!(code(&o), 2, "{}", stderr(&o));
        assert!(
            stderr(&o).contains("write v1.2, or dequantize"),
            "{}",
            stderr(&o)
        );
        let o = zt(&[&args[..], &["--densify"]].concat());
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let info = stdout(&zt(&["info", p(&out)]));
        assert!(
            info.contains("zTensor 2") && !info.contains("quantized_group"),
            "{info}"
        );
        let o = zt(&["diff", &file, p(&out), "--atol", "1e-6"]);
        assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    }
}

/// `zt cat --json` of packed sub-byte objects gives their values (it gave the stored bytes
/// under the object's shape, half as many numbers as the shape counts), sliced where a box
/// lies on byte boundaries; `--component` gives the stored bytes.
#[test]
fn cat_of_packed_objects_gives_their_values() {
    let onnx = fx("interop/onnx/dtypes_raw.onnx");
    let values = |args: &[&str]| {
        let o = zt(args);
        assert_eq!(code(&o), 0, "{args:?}: {}", stderr(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (j["shape"].clone(), j["values"].clone())
    };
    for (name, want) in [
        ("int4", serde_json::json!([-8, -1, 0, 1, 6, 7])),
        ("uint4", serde_json::json!([0, 15, 3, 9, 1])),
        ("int2", serde_json::json!([-2, -1, 0, 1, 1, -2])),
        ("uint2", serde_json::json!([0, 3, 1, 2, 3])),
        ("float4e2m1", serde_json::json!([0.5, -6.0, 1.5])),
        ("float6e3m2", serde_json::json!([28.0, -0.0625, 1.5, -3.0])),
    ] {
        assert_eq!(values(&["cat", &onnx, name, "--json"]).1, want, "{name}");
    }
    // int4 [2, 3]: rows 0..2, taken whole, are the first 3 bytes.
    let (_, got) = values(&["cat", &onnx, "int4", "--slice", "0:2", "--json"]);
    assert_eq!(got, serde_json::json!([-8, -1, 0, 1, 6, 7]));
    // Row 1 starts mid-byte (bit 12): not a box of bytes.
    let o = zt(&["cat", &onnx, "int4", "--slice", "1:2", "--json"]);
    assert_clean_error(
        &o,
        1,
        "4-bit packed elements are sliced on byte boundaries only",
    );
    // uint2 [5]: elements 4.. start the second byte.
    let (shape, got) = values(&["cat", &onnx, "uint2", "--slice", "4:5", "--json"]);
    assert_eq!(
        (shape, got),
        (serde_json::json!([1]), serde_json::json!([3]))
    );
    let o = zt(&["cat", &onnx, "uint2", "--slice", "::2", "--json"]);
    assert_clean_error(
        &o,
        2,
        "a --slice with steps is not taken for 2-bit packed elements",
    );
    let (shape, got) = values(&["cat", &onnx, "uint4", "--component", "data", "--json"]);
    assert_eq!(
        (shape, got),
        (serde_json::json!([3]), serde_json::json!([240, 147, 1]))
    );
}

/// A file compared with itself is the same, whatever it holds: a NaN attribute, objects of
/// formats with no dense form here (compared by their components' bytes), MX and quantized
/// objects, a type from the future.
#[test]
fn diff_of_a_file_with_itself_is_the_same_whatever_it_holds() {
    let file = fx("valid/v2_structural.zt");
    let o = zt(&["diff", &file, &file]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    // One byte of the x.custom/1 object's component changed (digests not checked).
    let dir = tempfile::tempdir().unwrap();
    let changed = dir.path().join("changed.zt");
    let info: serde_json::Value =
        serde_json::from_slice(&zt(&["info", "--json", &file]).stdout).unwrap();
    let custom = info["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "custom")
        .unwrap();
    let at = custom["components"]["payload"]["offset"].as_u64().unwrap() as usize;
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[at] ^= 1;
    std::fs::write(&changed, bytes).unwrap();
    let o = zt(&["diff", "--no-verify", &file, p(&changed)]);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    assert_eq!(
        stdout(&o),
        "custom: component \"payload\" differs (5 and 5 bytes; a x.custom/1 object is compared by its components' bytes)\n"
    );
}

#[test]
fn diff_tolerance_nan_and_per_tensor_summary() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.zt"), dir.path().join("b.zt"));
    let nan = f32::NAN;
    write_f32(
        &a,
        &[
            ("w", &[2, 3], &[0.0, 1.0, nan, 3.0, 4.0, 100.0]),
            ("same", &[1], &[7.0]),
        ],
    );
    write_f32(
        &b,
        &[
            ("w", &[2, 3], &[0.0, 1.0, nan, 3.0, 4.5, 100.5]),
            ("same", &[1], &[7.0]),
        ],
    );
    let o = zt(&["diff", "--json", p(&a), p(&b)]);
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    let j = json_of(&o);
    assert_eq!(j["schema"], "zt.diff/1");
    assert_eq!(j["same"], false);
    let d = j["differences"].as_array().unwrap();
    assert_eq!(d.len(), 1, "NaN equals NaN at the same place: {j}");
    assert_eq!(
        (d[0]["name"].as_str(), d[0]["what"].as_str()),
        (Some("w"), Some("values"))
    );
    assert_eq!(d[0]["differing"], 2);
    assert_eq!(d[0]["elements"], 6);
    assert_eq!(d[0]["first_index"], serde_json::json!([1, 1]));
    assert_eq!(d[0]["max_abs_diff"], 0.5);
    // The text form says the same.
    let s = stdout(&zt(&["diff", p(&a), p(&b)]));
    assert!(
        s.contains("w: 2 of 6 elements differ; first at [1, 1]; largest absolute difference 0.5"),
        "{s}"
    );
    // numpy's rule |a-b| <= atol + rtol*|b|: atol 0.5 covers both differences; rtol 0.01
    // covers only the one at |b| = 100.5 (0.5 <= 1.005), not the one at |b| = 4.5.
    assert_eq!(code(&zt(&["diff", "--atol", "0.5", p(&a), p(&b)])), 0);
    let o = zt(&["diff", "--json", "--rtol", "0.01", p(&a), p(&b)]);
    assert_eq!(code(&o), 1);
    let j = json_of(&o);
    assert_eq!(j["differences"][0]["differing"], 1);
    assert_eq!(
        j["differences"][0]["first_index"],
        serde_json::json!([1, 1])
    );
    let o = zt(&["diff", "--rtol", "0.2", p(&a), p(&b)]);
    assert_eq!(code(&o), 0);
    assert!(
        stdout(&o).contains("within atol 0, rtol 0.2"),
        "{}",
        stdout(&o)
    );
    // Integers compare exactly whatever the tolerance.
    let (c, d_) = (dir.path().join("c.zt"), dir.path().join("d.zt"));
    for (path, v) in [(&c, 5i64), (&d_, 6)] {
        let mut w = ztensor::Writer::create(path).unwrap();
        w.add("i", &[3], &[1i64, v, -3]).unwrap();
        w.finish().unwrap();
    }
    let o = zt(&["diff", "--json", "--atol", "10", p(&c), p(&d_)]);
    assert_eq!(code(&o), 1);
    let j = json_of(&o);
    assert_eq!(j["differences"][0]["max_abs_diff"], 1.0);
    assert_eq!(j["differences"][0]["first_index"], serde_json::json!([1]));
}

/// A cast (f32 to bf16 or f16, f64 to f32) is a `dtype` difference, unless a tolerance is
/// given: then floats of different types are compared by value, as numpy.allclose compares
/// them, across windows of different widths; integers of different types never are.
#[test]
fn diff_with_a_tolerance_compares_a_cast_by_value() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.zt"), dir.path().join("b.zt"));
    // Enough values that one side's windows end before the other's: 2^20 + 3 elements.
    let n = (1usize << 20) + 3;
    let wide: Vec<f32> = (0..n).map(|i| (i % 997) as f32 * 0.01 + 1.0).collect();
    let mut narrow: Vec<half::bf16> = wide.iter().map(|&x| half::bf16::from_f32(x)).collect();
    let mut wa = ztensor::Writer::create(&a).unwrap();
    wa.add("w", &[n as u64], &wide).unwrap();
    wa.add("d", &[2], &[0.5f64, f64::NAN]).unwrap();
    wa.add("i", &[2], &[1i32, 2]).unwrap();
    wa.finish().unwrap();
    // One element past bf16's rounding: the last, which only a full pass finds.
    narrow[n - 1] = half::bf16::from_f32(wide[n - 1] * 1.5);
    let mut wb = ztensor::Writer::create(&b).unwrap();
    wb.add("w", &[n as u64], &narrow).unwrap();
    wb.add("d", &[2], &[0.5f32, f32::NAN]).unwrap();
    wb.add("i", &[2], &[1i64, 2]).unwrap();
    wb.finish().unwrap();

    let kinds = |o: &std::process::Output| -> Vec<(String, String)> {
        json_of(o)["differences"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["name"].as_str().unwrap().into(),
                    d["what"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    let strict = zt(&["diff", "--json", p(&a), p(&b)]);
    assert_eq!(code(&strict), 1);
    let dtype = |n: &str| (n.to_owned(), "dtype".to_owned());
    assert_eq!(kinds(&strict), [dtype("d"), dtype("i"), dtype("w")]);

    let o = zt(&["diff", "--json", "--rtol", "0.01", p(&a), p(&b)]);
    assert_eq!(code(&o), 1);
    let j = json_of(&o);
    assert_eq!(j["compared_across_types"], 2, "{j}");
    assert_eq!(kinds(&o), [dtype("i"), ("w".into(), "values".into())]);
    let w = &j["differences"][1];
    assert_eq!(w["differing"], 1);
    assert_eq!(w["first_index"], serde_json::json!([n - 1]));

    // Without the integers and the far element: the same, and the line says why.
    let mut wb = ztensor::Writer::create(&b).unwrap();
    narrow[n - 1] = half::bf16::from_f32(wide[n - 1]);
    wb.add("w", &[n as u64], &narrow).unwrap();
    wb.add("d", &[2], &[0.5f32, f32::NAN]).unwrap();
    wb.add("i", &[2], &[1i32, 2]).unwrap();
    wb.finish().unwrap();
    let o = zt(&["diff", "--rtol", "0.01", p(&a), p(&b)]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    assert!(
        stdout(&o).contains("rtol 0.01; 2 of another float type, compared by value)"),
        "{}",
        stdout(&o)
    );
    assert_eq!(code(&zt(&["diff", p(&a), p(&b)])), 1);
}

/// A 64 MiB tensor against a copy that differs in one element. The comparison runs in 1 MiB
/// windows over slices borrowed from the two maps (see src/diff.rs), so its memory does not
/// grow with the tensor; here the result is checked (the old diff built a JSON value per
/// element, 3.6 GB for 125 MiB).
#[test]
fn diff_of_a_large_tensor_finds_the_one_element() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.zt"), dir.path().join("b.zt"));
    let n = 4096 * 4096;
    let mut data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    write_f32(&a, &[("big", &[4096, 4096], &data)]);
    let at = 12_345_678;
    data[at] += 0.25;
    write_f32(&b, &[("big", &[4096, 4096], &data)]);
    drop(data);
    let o = zt(&["diff", "--json", p(&a), p(&b)]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let j = json_of(&o);
    let d = &j["differences"][0];
    assert_eq!(d["differing"], 1);
    assert_eq!(d["elements"], n as u64);
    assert_eq!(d["first_index"], serde_json::json!([at / 4096, at % 4096]));
    assert_eq!(d["max_abs_diff"], 0.25);
    assert_eq!(code(&zt(&["diff", "--atol", "0.25", p(&a), p(&b)])), 0);
}

#[test]
fn writing_commands_honour_the_output_kind_or_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let input = fx("valid/digests.zt");
    for (args, out) in [
        (vec!["merge", &input[..], "-o"], "m.safetensors"),
        (vec!["merge", &input[..], "-o"], "m.mag"),
        (vec!["rm", &input[..], "rank0", "-o"], "r.safetensors"),
        (vec!["upgrade", &fx("interop/v014.zt")[..]], "u.mag"),
    ] {
        let target = dir.path().join(out);
        let mut args = args.clone();
        args.push(p(&target));
        assert_clean_error(&zt(&args), 2, "writes .zt only");
        assert!(!target.exists(), "{out}: nothing written");
    }
    // --to lists only the kinds the command writes: another is a usage error from the parser.
    let z = dir.path().join("m.zt");
    let o = zt(&["merge", &input, "-o", p(&z), "--to", "safetensors"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("[possible values: zt, v2, v1.2]"),
        "{}",
        stderr(&o)
    );
    assert!(!z.exists());
    // No extension: say how to name the kind; with --to zt it is written.
    let bare = dir.path().join("merged");
    assert_clean_error(
        &zt(&["merge", &input, "-o", p(&bare)]),
        2,
        "--to zt|v2|v1.2|mag|safetensors",
    );
    assert_eq!(
        code(&zt(&["merge", &input, "-o", p(&bare), "--to", "zt"])),
        0
    );
    let j = json_of(&zt(&["info", "--json", p(&bare)]));
    assert_eq!(j["kind"], "zt");
    assert_eq!(code(&zt(&["merge", &input, "-o", p(&z)])), 0);
    // convert writes what was asked for.
    let st = dir.path().join("c.safetensors");
    assert_eq!(code(&zt(&["convert", &fx("valid/scalars.zt"), p(&st)])), 0);
    assert_eq!(
        json_of(&zt(&["info", "--json", p(&st)]))["kind"],
        "safetensors"
    );
}

#[test]
fn compress_never_takes_a_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.zt");
    let o = zt(&["convert", "--compress", &fx("valid/dtypes.zt"), p(&out)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let j = json_of(&zt(&["info", "--json", p(&out)]));
    for obj in j["objects"].as_array().unwrap() {
        assert_eq!(
            obj["components"]["data"]["encoding"], "zt.zstd-seekable/1",
            "{obj}"
        );
    }
    // A level only with '='.
    let out9 = dir.path().join("c.zt");
    let o = zt(&["convert", "--compress=9", &fx("valid/dtypes.zt"), p(&out9)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(code(&zt(&["diff", &fx("valid/dtypes.zt"), p(&out9)])), 0);
    // A number after a space is a file name, so three positionals: a usage error.
    let o = zt(&[
        "convert",
        "--compress",
        "9",
        &fx("valid/dtypes.zt"),
        p(&out9),
    ]);
    assert_eq!(code(&o), 2);
}

#[test]
fn no_sync_writes_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["zt", "mag", "safetensors"] {
        let synced = dir.path().join(format!("synced.{kind}"));
        let unsynced = dir.path().join(format!("unsynced.{kind}"));
        let src = fx("valid/dtypes.zt");
        let o = zt(&["convert", &src, p(&synced), "--densify"]);
        let o2 = zt(&["convert", "--no-sync", &src, p(&unsynced), "--densify"]);
        if code(&o) != 0 {
            // A kind that cannot hold every dtype refuses both ways alike.
            assert_eq!(code(&o2), code(&o), "{kind}: {}", stderr(&o2));
            continue;
        }
        assert_eq!(code(&o2), 0, "{kind}: {}", stderr(&o2));
        assert_eq!(
            std::fs::read(&synced).unwrap(),
            std::fs::read(&unsynced).unwrap(),
            "{kind}: --no-sync changes when, not what"
        );
    }
}

#[test]
fn info_json_gives_an_unreadable_object_the_common_error_shape() {
    let j = json_of(&zt(&["info", "--json", &fx("interop/v014_rust.zt")]));
    let objects = j["objects"].as_array().unwrap();
    let broken = objects.iter().find(|o| o["name"] == "csr_try").unwrap();
    assert_eq!(
        broken["unreadable"]["error_kind"], "InvalidFile",
        "{broken}"
    );
    assert!(broken["unreadable"]["message"]
        .as_str()
        .unwrap()
        .contains("CSR"));
    let fine = objects.iter().find(|o| o["name"] != "csr_try").unwrap();
    assert!(fine.get("unreadable").is_none(), "{fine}");
}

#[test]
fn info_columns_fit_long_names() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("names.zt");
    let long = "model.layers.31.self_attn.q_proj.weight_scale_inv";
    let huge = format!("start{}end", "x".repeat(300));
    write_f32(
        &f,
        &[
            (long, &[2, 2], &[0.0; 4]),
            ("b", &[1], &[0.0]),
            (&huge, &[1], &[0.0]),
        ],
    );
    let s = stdout(&zt(&["info", p(&f)]));
    let rows: Vec<&str> = s.lines().skip(1).collect();
    assert_eq!(rows.len(), 4, "{s}");
    // Every row's format column starts at the same character.
    let format_at = |row: &str| {
        let chars: Vec<char> = row.chars().collect();
        (1..chars.len())
            .find(|&i| chars[i - 1] == ' ' && chars[i] != ' ')
            .unwrap()
    };
    let col = format_at(rows[0]);
    assert!(rows[0][..col].starts_with("name "), "{s}");
    for r in &rows {
        assert_eq!(format_at(r), col, "misaligned: {s}");
    }
    assert!(s.contains(long), "{s}");
    // The 308-character name is cut in the middle, to 80 characters.
    let cut = rows.iter().find(|r| r.starts_with("start")).unwrap();
    let name = cut.split(' ').next().unwrap();
    assert_eq!(name.chars().count(), 80, "{name}");
    assert!(name.ends_with("xend") && name.contains('…'), "{name}");
    assert_eq!(col, 81);
}

#[test]
fn json_output_carries_a_schema_and_one_vocabulary() {
    let f = fx("interop/v123_all.zt");
    let j = json_of(&zt(&["info", "--json", &f]));
    assert_eq!(j["schema"], "zt.info/1");
    assert_eq!(j["file"], f.as_str());
    let j = json_of(&zt(&["cat", "--json", &f, "dense_f32"]));
    assert_eq!(j["schema"], "zt.cat/1");
    assert_eq!(
        (j["file"].as_str(), j["name"].as_str()),
        (Some(&f[..]), Some("dense_f32"))
    );
    assert_eq!(
        (j["dtype"].as_str(), j["component"].clone()),
        (Some("f32"), serde_json::Value::Null)
    );
    let j = json_of(&zt(&["verify", "--json", &f]));
    assert_eq!(j["schema"], "zt.verify/1");
    assert_eq!(j["results"][0]["file"], f.as_str());
    assert_eq!(j["results"][0]["object_count"], 13);
    // The same version string as info's.
    assert_eq!(
        (
            j["results"][0]["kind"].as_str(),
            j["results"][0]["version"].as_str()
        ),
        (Some("zt"), Some("1.2.0"))
    );
    let j = json_of(&zt(&["diff", "--json", &f, &f]));
    assert_eq!(j["schema"], "zt.diff/1");
    assert_eq!(j["files"], serde_json::json!([f, f]));
    assert_eq!(j["same"], true);
    // Errors have one shape: in verify and in diff.
    let keys = |e: &serde_json::Value| {
        let mut k: Vec<String> = e.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    // A failed check and a missing file report their error in one shape.
    for file in [
        fx("invalid/digest_mismatch.zt"),
        "/nonexistent/x.zt".to_owned(),
    ] {
        let v = json_of(&zt(&["verify", "--json", &file]));
        assert_eq!(
            keys(&v["results"][0]["failures"][0]),
            [
                "component",
                "error_kind",
                "file",
                "message",
                "name",
                "offset"
            ]
        );
    }
}

#[test]
fn info_and_verify_of_zt_v2() {
    let root = fx("interop/zt2/06_sharded.zt");
    let o = zt(&["info", "--json", &root]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((&j["kind"], &j["version"]), (&"zt".into(), &"2".into()));
    assert_eq!(j["manifest_hash"], "xxh3:df8123fa6d46414d");
    assert_eq!(j["shards"][1]["name"], "00002-of-00002");
    assert_eq!(j["shards"][1]["data_shard"], true);
    assert_eq!(j["shards"][0]["size"], 8336);
    let layer1 = j["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "layer1.w")
        .unwrap();
    assert_eq!(layer1["components"]["data"]["shard"], "00002-of-00002");
    // A v2 file without shards lists an empty table; other versions list none at all.
    let o = zt(&["info", "--json", &fx("interop/zt2/03_zstd_seekable_a4k.zt")]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["shards"], serde_json::json!([]));
    assert_eq!(
        j["objects"][0]["components"]["data"]["uncompressed_length"],
        4000
    );
    let o = zt(&["info", "--json", &fx("valid/digests.zt")]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j.get("shards").is_none() && j.get("manifest_hash").is_none());

    // verify: the manifest hash, three part digests and two shard digests.
    let o = zt(&["verify", "--json", &root]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["results"][0]["digests_checked"], 6);
    assert_eq!(j["results"][0]["version"], "2");
    // Data-level rules are verify's too: a packed FP4 tail that is not zero.
    let o = zt(&["verify", &fx("invalid/v2_fp4_odd_tail.zt")]);
    assert_eq!(code(&o), 1);
    assert!(stdout(&o).contains("unused high nibble"), "{}", stdout(&o));
}

#[test]
fn convert_to_v2_compact_v1_2_and_shards() {
    let dir = tempfile::tempdir().unwrap();
    let src = fx("valid/dtypes.zt");
    let out = |n: &str| dir.path().join(n);
    let size = |n: &str| std::fs::metadata(out(n)).unwrap().len();
    for (name, args) in [
        ("a.zt", vec![]),
        ("b.zt", vec!["--compact"]),
        ("c.zt", vec!["--to", "v1.2"]),
        ("d.zt", vec!["--shard-size", "100B"]),
    ] {
        let target = out(name);
        let mut all = vec!["convert", &src[..], p(&target)];
        all.extend(args);
        let o = zt(&all);
        assert_eq!(code(&o), 0, "{name}: {}", stderr(&o));
        assert_eq!(code(&zt(&["diff", &src, p(&target)])), 0, "{name}");
        assert_eq!(code(&zt(&["verify", p(&target)])), 0, "{name}");
    }
    assert_eq!(
        json_of(&zt(&["info", "--json", p(&out("a.zt"))]))["version"],
        "2"
    );
    assert_eq!(
        json_of(&zt(&["info", "--json", p(&out("c.zt"))]))["version"],
        "1.2.0"
    );
    assert!(
        size("b.zt") * 8 < size("a.zt"),
        "4096-byte packing is far smaller"
    );
    let shards = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            n.to_str().unwrap().starts_with("d-00001-of-")
        })
        .count();
    assert_eq!(shards, 1);
    // --compact means v2; sharding means v2.
    let bad = out("e.zt");
    assert_eq!(
        code(&zt(&[
            "convert",
            &src,
            p(&bad),
            "--to",
            "v1.2",
            "--compact"
        ])),
        2
    );
    assert_eq!(
        code(&zt(&[
            "convert",
            &src,
            p(&bad),
            "--to",
            "v1.2",
            "--shard-size",
            "1MB"
        ])),
        2
    );
    assert_eq!(
        code(&zt(&["convert", &src, p(&bad), "--shard-size", "0"])),
        2
    );
    assert!(!bad.exists());
}

#[test]
fn a_v2_output_that_is_mostly_padding_says_how_to_pack_it_closer() {
    // 300 tensors of 16 bytes: on 64 KiB boundaries, 19.7 MB of padding for 4.8 KB of data.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("small.zt");
    let mut w = ztensor::Writer::create_version(
        &src,
        ztensor::Version::V1_2,
        ztensor::Durability::default(),
    )
    .unwrap();
    for i in 0..300 {
        w.add(&format!("t{i:03}"), &[4], &[i as f32; 4]).unwrap();
    }
    w.finish().unwrap();
    let hint = "--compact (compact=True from Python) packs them on 4 KiB boundaries";
    let wide = dir.path().join("wide.zt");
    let o = zt(&["convert", p(&src), p(&wide)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains(hint), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("for 4.7 KiB of data in 300 objects"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        code(&zt(&["verify", p(&wide)])),
        0,
        "the file is kept, and valid"
    );
    let o = zt(&["upgrade", p(&src), p(&dir.path().join("up.zt"))]);
    assert!(stderr(&o).contains(hint), "{}", stderr(&o));
    // Packed closer, nothing to say.
    for (name, extra) in [("compact.zt", "--compact"), ("v12.zt", "--to=v1.2")] {
        let o = zt(&["convert", p(&src), p(&dir.path().join(name)), extra]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert_eq!(stderr(&o), "", "{name}");
    }
}

#[test]
fn gguf_info_ls_cat_verify_diff_and_convert_both_ways() {
    let quant = fx("interop/gguf/quant.gguf");
    let j = json_of(&zt(&["info", "--json", &quant]));
    assert_eq!(j["kind"], "gguf");
    assert_eq!(j["version"], "3");
    let q4 = j["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "q4_0")
        .unwrap();
    assert_eq!(q4["format"], "gguf.q4_0/1");
    assert_eq!(q4["shape"], serde_json::json!([2, 64]));
    assert_eq!(q4["attributes"]["block_bytes"], 18);
    assert_eq!(
        j["attributes"]["gguf.value_types"]["general.quantization_version"],
        "u32"
    );
    let ls = stdout(&zt(&["ls", &quant]));
    assert_eq!(ls.lines().count(), 26);
    assert_eq!(code(&zt(&["verify", &quant])), 0);

    // Raw cat of a block tensor needs a choice; --dequantize is the gguf package's values.
    assert_clean_error(&zt(&["cat", &quant, "q4_0"]), 2, "use --dequantize");
    let o = zt(&["cat", "--dequantize", &quant, "q6_k"]);
    assert_eq!(code(&o), 0);
    let golden = std::fs::read(fixtures().join("interop/gguf/golden/q6_k.f32")).unwrap();
    assert_eq!(o.stdout, golden);
    let o = zt(&["cat", "--dequantize", &quant, "iq4_xs"]);
    assert_eq!(code(&o), 0);
    let golden = std::fs::read(fixtures().join("interop/gguf/golden/iq4_xs.f32")).unwrap();
    assert_eq!(o.stdout, golden);
    let o = zt(&["cat", "--dequantize", &quant, "q8_k"]);
    let golden = std::fs::read(fixtures().join("interop/gguf/golden/q8_k.f32")).unwrap();
    assert_eq!((code(&o), o.stdout), (0, golden));
    assert_clean_error(
        &zt(&["cat", "--dequantize", &quant, "q8_1"]),
        1,
        "dequantizing Q8_1 blocks is not supported",
    );
    assert_clean_error(
        &zt(&["cat", "--dequantize", &fx("interop/gguf/dense.gguf"), "f32"]),
        2,
        "not quantized",
    );
    let blocks = zt(&["cat", "--component", "data", &quant, "iq4_xs"]);
    assert_eq!(blocks.stdout.len(), 4 * 136);

    // .gguf -> .zt -> .gguf: the same objects, values and metadata.
    let dir = tempfile::tempdir().unwrap();
    for src in [
        "interop/gguf/quant.gguf",
        "interop/gguf/dense.gguf",
        "valid/gguf_v1.gguf",
    ] {
        let z = dir.path().join("m.zt");
        let back = dir.path().join("m.gguf");
        let (z, back) = (z.to_str().unwrap(), back.to_str().unwrap());
        assert_eq!(code(&zt(&["convert", "--force", &fx(src), z])), 0, "{src}");
        assert_eq!(code(&zt(&["convert", "--force", z, back])), 0, "{src}");
        for (a, b) in [(fx(src), z.to_owned()), (fx(src), back.to_owned())] {
            let o = zt(&["diff", &a, &b]);
            assert_eq!(code(&o), 0, "{src}: {}", stdout(&o));
        }
        assert_eq!(code(&zt(&["verify", back])), 0);
    }

    // safetensors -> GGUF for the dense types GGUF holds; u64 and bool are refused by name.
    let out = dir.path().join("st.gguf");
    assert_clean_error(
        &zt(&[
            "convert",
            &fx("interop/safetensors/numpy.safetensors"),
            out.to_str().unwrap(),
        ]),
        2,
        "GGUF has no",
    );
    assert!(!out.exists(), "nothing written");

    // A file made into a GGUF is the same as the GGUF: the types the GGUF's reader keeps of
    // its metadata (gguf.value_types) are compared only when both sides have them.
    let scalars = fx("valid/scalars.zt");
    let out = dir.path().join("scalars.gguf");
    assert_eq!(code(&zt(&["convert", &scalars, p(&out)])), 0);
    let o = zt(&["diff", &scalars, p(&out)]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    let o = zt(&["diff", &fx("interop/gguf/dense.gguf"), p(&out)]);
    assert_eq!(code(&o), 1);
    assert!(stdout(&o).contains("gguf.value_types"), "{}", stdout(&o));
}

/// `zt diff` of GGUF block tensors of two types, or of blocks against dense values: a type
/// difference, or with a tolerance a comparison of the dequantized values. Two block types
/// used to be compared as bytes of different lengths, an "invalid file" (exit 2).
#[test]
fn diff_of_two_block_types_is_a_type_difference_or_by_value() {
    let dir = tempfile::tempdir().unwrap();
    let quant = fx("interop/gguf/quant.gguf");
    // The same file with the names of its q4_0 and q8_0 tensors (both [2, 64]) swapped.
    let mut bytes = std::fs::read(&quant).unwrap();
    let at = |name: &[u8], bytes: &[u8]| bytes.windows(4).position(|w| w == name).unwrap();
    let (q4, q8) = (at(b"q4_0", &bytes), at(b"q8_0", &bytes));
    bytes[q4..q4 + 4].copy_from_slice(b"q8_0");
    bytes[q8..q8 + 4].copy_from_slice(b"q4_0");
    let swapped = dir.path().join("swapped.gguf");
    std::fs::write(&swapped, &bytes).unwrap();
    let swapped = p(&swapped);

    let o = zt(&["diff", &quant, swapped]);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("q4_0: type gguf q4_0 blocks vs gguf q8_0 blocks")
            && text.contains("q8_0: type gguf q8_0 blocks vs gguf q4_0 blocks"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 2, "{text}");
    // By value: the golden values of the two types lie at most 187.5 apart.
    let j = json_of(&zt(&["diff", "--json", &quant, swapped, "--atol", "200"]));
    assert_eq!(
        (j["same"].clone(), j["compared_across_types"].clone()),
        (true.into(), 2.into())
    );
    let j = json_of(&zt(&["diff", "--json", &quant, swapped, "--atol", "1"]));
    let differences = j["differences"].as_array().unwrap();
    assert_eq!(differences.len(), 2, "{j}");
    let q4_diff = &differences[0];
    assert_eq!(
        (q4_diff["name"].as_str(), q4_diff["what"].as_str()),
        (Some("q4_0"), Some("values"))
    );
    let largest = q4_diff["max_abs_diff"].as_f64().unwrap();
    assert!(largest > 180.0 && largest < 190.0, "{largest}");

    // Blocks against their dequantized values, in a .zt written from the golden f32 values.
    let golden = std::fs::read(fixtures().join("interop/gguf/golden/q4_0.f32")).unwrap();
    let values: Vec<f32> = golden
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let dense = dir.path().join("dense.zt");
    let mut w = ztensor::Writer::create(&dense).unwrap();
    w.add("q4_0", &[2, 64], &values).unwrap();
    w.finish().unwrap();
    let q4_entry = |extra: &[&str]| {
        let args = [
            &["diff", "--json", "--values-only", &quant, p(&dense)],
            extra,
        ]
        .concat();
        let j = json_of(&zt(&args));
        j["differences"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == "q4_0")
            .cloned()
    };
    let entry = q4_entry(&[]).expect("a type difference");
    assert_eq!(entry["detail"], "type gguf q4_0 blocks vs f32");
    assert_eq!(
        q4_entry(&["--atol", "1e-30"]),
        None,
        "equal once dequantized"
    );
}

/// `convert --set KEY=VALUE` replaces or adds a file attribute in the output: a JSON value as
/// its type, anything else as the text it is.
#[test]
fn convert_sets_the_attributes_given() {
    use ztensor::Value;
    let dir = tempfile::tempdir().unwrap();
    let src = fx("valid/attributes.zt");
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    // .safetensors holds text: `format=pt` is what transformers looks for.
    let st = p("s.safetensors");
    let set = ["--set", "format=pt", "--set", "small=7"];
    let o = zt(&[&["convert", &src, &st, "--attributes-as-json"][..], &set].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = ztensor::open(&st).unwrap();
    assert_eq!(r.attributes()["format"], Value::Text("pt".into()));
    assert_eq!(r.attributes()["small"], Value::Text("7".into()));
    // .zt v1.2 holds every value as it is (v2 no tags); the input's value of a key is replaced.
    let out = p("a.zt");
    let o = zt(&[
        "convert",
        &src,
        &out,
        "--to",
        "v1.2",
        "--set",
        "small=7",
        "--set",
        "ratio=1e-5",
        "--set",
        "quoted=\"7\"",
        "--set",
        "raw={\"bytes\":\"00ff\"}",
        "--set",
        "list=[1,2.5,\"a\"]",
        "--set",
        "empty=",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = ztensor::open(&out).unwrap();
    let a = r.attributes();
    assert_eq!(a["small"], Value::Integer(7));
    assert_eq!(a["ratio"], Value::Float(1e-5));
    assert_eq!(a["quoted"], Value::Text("7".into()));
    assert_eq!(a["raw"], Value::Bytes(vec![0, 255]));
    let list = [
        Value::Integer(1),
        Value::Float(2.5),
        Value::Text("a".into()),
    ];
    assert_eq!(a["list"], Value::Array(list.to_vec()));
    assert_eq!(a["empty"], Value::Text(String::new()));
    assert_eq!(a["text"], ztensor::open(&src).unwrap().attributes()["text"]);
    // Not KEY=VALUE: a usage error naming it.
    let o = zt(&["convert", &src, &p("x.zt"), "--set", "novalue"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("\"novalue\" is not KEY=VALUE"),
        "{}",
        stderr(&o)
    );
    // `--unset` leaves a key out (a key the input lacks is no error); v2's own shards take
    // both.
    let plain = p("plain.zt");
    let mut w = ztensor::Writer::create(&plain).unwrap();
    w.set_attribute("text", "dropped");
    w.set_attribute("kept", 3i64);
    w.add("w", &[2], &[1.0f32, 2.0]).unwrap();
    w.finish().unwrap();
    let sharded = p("sh.zt");
    let o = zt(&[
        "convert",
        &plain,
        &sharded,
        "--shard-size",
        "1KB",
        "--set",
        "a=1",
        "--unset",
        "text",
        "--unset",
        "not-there",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = ztensor::open(&sharded).unwrap();
    let a = r.attributes();
    let kept: Vec<(&str, &Value)> = a.iter().map(|(k, v)| (k.as_str(), v)).collect();
    assert_eq!(
        kept,
        [("a", &Value::Integer(1)), ("kept", &Value::Integer(3))]
    );
    // One key both set and unset: a usage error, nothing written.
    let both = p("both.zt");
    let o = zt(&["convert", &src, &both, "--set", "a=1", "--unset", "a"]);
    assert_clean_error(&o, 2, "--set and --unset both name the attribute \"a\"");
    assert!(!Path::new(&both).exists());
}

/// A GGUF key set keeps its GGUF type from the input (`gguf.value_types`): a value that does
/// not fit it is a usage error saying where the type came from; a key unset is left out.
#[test]
fn gguf_keys_set_keep_their_type_and_unset_ones_go() {
    use ztensor::Value;
    let dir = tempfile::tempdir().unwrap();
    let src = fx("interop/gguf/dense.gguf");
    let out = dir.path().join("o.gguf");
    let out = out.to_str().unwrap();
    let o = zt(&["convert", &src, out, "--set", "t.u16=70000"]);
    assert_clean_error(
        &o,
        2,
        "attribute \"t.u16\": 70000 does not fit u16 (its GGUF type, as \"gguf.value_types\" \
         gives it)",
    );
    assert!(!Path::new(out).exists());
    let o = zt(&["convert", &src, out, "--set", "t.u16=7", "--unset", "t.u8"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = ztensor::open(out).unwrap();
    let a = r.attributes();
    assert_eq!(a["t.u16"], Value::Integer(7));
    assert!(!a.contains_key("t.u8"));
    let Value::Map(types) = &a["gguf.value_types"] else {
        panic!("{:?}", a["gguf.value_types"]);
    };
    assert_eq!(types["t.u16"], Value::Text("u16".into()));
    // In a .zt, where the types are kept as an attribute, the type of a key unset goes too.
    let zt_out = dir.path().join("o.zt");
    let o = zt(&["convert", &src, zt_out.to_str().unwrap(), "--unset", "t.u8"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = ztensor::open(&zt_out).unwrap();
    let Value::Map(types) = &r.attributes()["gguf.value_types"] else {
        panic!("{:?}", r.attributes()["gguf.value_types"]);
    };
    assert!(types.contains_key("t.u16") && !types.contains_key("t.u8"));
    // A merge the same, though each input's value of the key is left out before merging.
    let merged = dir.path().join("m.zt");
    let o = zt(&[
        "merge",
        "-o",
        merged.to_str().unwrap(),
        "--unset",
        "t.u8",
        &src,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = ztensor::open(&merged).unwrap();
    let Value::Map(types) = &r.attributes()["gguf.value_types"] else {
        panic!("{:?}", r.attributes()["gguf.value_types"]);
    };
    assert!(!r.attributes().contains_key("t.u8"));
    assert!(types.contains_key("t.u16") && !types.contains_key("t.u8"));
}

/// `merge` refuses inputs whose file attributes disagree, naming the key and `--set`; with
/// `--set` the output takes the value given.
#[test]
fn merge_sets_an_attribute_the_inputs_disagree_on() {
    use ztensor::Value;
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    for (file, name, format) in [("a.zt", "a", "pt"), ("b.zt", "b", "np")] {
        let mut w = ztensor::Writer::create(p(file)).unwrap();
        w.set_attribute("format", format);
        w.set_attribute("shared", 1i64);
        w.add(name, &[2], &[1.0f32, 2.0]).unwrap();
        w.finish().unwrap();
    }
    let out = p("ab.zt");
    let o = zt(&["merge", "-o", &out, &p("a.zt"), &p("b.zt")]);
    assert_clean_error(&o, 1, "file attribute \"format\" differs between inputs");
    let e = stderr(&o);
    assert!(
        e.contains("--set format=VALUE") && e.contains("--unset format"),
        "{e}"
    );
    assert!(!Path::new(&out).exists());
    let o = zt(&[
        "merge",
        "-o",
        &out,
        "--set",
        "format=pt",
        "--set",
        "note=merged",
        &p("a.zt"),
        &p("b.zt"),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = ztensor::open(&out).unwrap();
    assert_eq!(r.attributes()["format"], Value::Text("pt".into()));
    assert_eq!(r.attributes()["note"], Value::Text("merged".into()));
    assert_eq!(r.attributes()["shared"], Value::Integer(1));
    assert_eq!(r.len(), 2);
    // `--unset` merges them without the key.
    let unset = p("unset.zt");
    let o = zt(&[
        "merge",
        "-o",
        &unset,
        "--unset",
        "format",
        &p("a.zt"),
        &p("b.zt"),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = ztensor::open(&unset).unwrap();
    let keys: Vec<&str> = r.attributes().keys().map(String::as_str).collect();
    assert_eq!(keys, ["shared"]);
}
