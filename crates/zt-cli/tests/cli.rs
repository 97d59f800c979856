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
    // A non-dense object without --component or --json, and a missing object: usage errors.
    assert_clean_error(
        &zt(&["cat", &fx("interop/v123_all.zt"), "csr"]),
        2,
        "use --component",
    );
    assert_clean_error(
        &zt(&["cat", &fx("interop/v123_all.zt"), "nope"]),
        2,
        "no object named \"nope\"",
    );
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
    assert_eq!(failure["kind"], "ChecksumMismatch");
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
        "--to zt|mag|safetensors",
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
        "exists; use --force",
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
    assert!(!dir.path().join("a.safetensors").exists());
}

#[test]
fn upgrade_merge_rm() {
    let dir = tempfile::tempdir().unwrap();
    let up = dir.path().join("up.zt");
    assert_eq!(
        code(&zt(&[
            "upgrade",
            &fx("interop/v014.zt"),
            up.to_str().unwrap()
        ])),
        0
    );
    let j: serde_json::Value =
        serde_json::from_slice(&zt(&["info", "--json", up.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(j["version"], "1.2.0");
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
    assert!(
        stdout(&o).contains("4 digests"),
        "digests copied with their blobs: {}",
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
            merged.to_str().unwrap()
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
