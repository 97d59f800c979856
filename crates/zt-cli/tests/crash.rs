//! Crash-safe writing, proven: a writing `zt` process is killed with SIGKILL at pseudo-random
//! moments; afterwards the target is always its previous version, intact, or (when the write
//! won the race) the complete new version, never anything in between, and no temporary
//! outlives the next writer. And a write that fails partway (no room left) leaves every old
//! output as it was and nothing else behind.

#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A source file large enough that compressing it takes a while.
fn make_input(path: &Path) {
    let mut w = ztensor::Writer::create(path).unwrap();
    for i in 0..16u32 {
        // Low-entropy but not constant, so zstd has real work to do.
        let data: Vec<f32> = (0..(1u32 << 20))
            .map(|j| ((j ^ i).wrapping_mul(2_654_435_761) >> 20) as f32)
            .collect();
        w.add(&format!("t{i}"), &[1 << 20], &data).unwrap();
    }
    w.finish().unwrap();
}

fn convert(input: &Path, output: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_zt"))
        .args([
            "convert",
            input.to_str().unwrap(),
            output.to_str().unwrap(),
            "--compress=6",
            "--digest",
            "sha256",
            "--force",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_killed_writer_leaves_the_old_file_intact() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.zt");
    make_input(&input);
    let target = dir.path().join("out.zt");
    let mut old = ztensor::Writer::create(&target).unwrap();
    old.add("previous", &[3], &[1u8, 2, 3]).unwrap();
    old.finish().unwrap();
    let previous = std::fs::read(&target).unwrap();

    // How long a full write takes here, then kills spread over that span.
    let start = Instant::now();
    assert!(convert(&input, &dir.path().join("reference.zt"))
        .wait()
        .unwrap()
        .success());
    let full = start.elapsed();
    let reference = std::fs::read(dir.path().join("reference.zt")).unwrap();

    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let (mut killed_mid_write, mut completed) = (0, 0);
    for _ in 0..12 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(seed % (full.as_micros() as u64 * 11 / 10 + 1));
        let mut child = convert(&input, &target);
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        let now = std::fs::read(&target).unwrap();
        if status.success() {
            assert_eq!(now, reference, "a finished write is the complete new file");
            completed += 1;
            // Restore the previous version for the next round.
            std::fs::write(&target, &previous).unwrap();
        } else if now == reference {
            // Killed after the rename, while syncing the folder or exiting: the new version
            // is complete, which is the other allowed outcome.
            completed += 1;
            std::fs::write(&target, &previous).unwrap();
        } else {
            assert!(
                now == previous,
                "killed after {delay:?}: the target is neither the previous version nor the \
                 complete new one ({} bytes)",
                now.len()
            );
            killed_mid_write += 1;
        }
        // Beside the files the test made, only a temporary may remain: one named for its
        // rename when the kill fell in that instant, or a named one where the file system
        // cannot make unnamed files. The next writer in the folder removes it.
        for name in extra_files(dir.path()) {
            assert!(
                name.starts_with(".out.zt.") && name.ends_with(".zt-tmp"),
                "killed after {delay:?}: {name:?} was left beside the target"
            );
        }
    }
    assert!(
        killed_mid_write >= 3,
        "the kills must land mid-write ({killed_mid_write} did, {completed} completed)"
    );
    assert!(convert(&input, &target).wait().unwrap().success());
    assert_eq!(std::fs::read(&target).unwrap(), reference);
    assert_eq!(
        extra_files(dir.path()),
        Vec::<String>::new(),
        "a finished writer leaves nothing beside its target, and removes what dead ones left"
    );
}

/// The names in `dir` other than the input, the target and the reference output.
fn extra_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !["in.zt", "out.zt", "reference.zt"].contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

/// Every kind of output, and sets of shards, when a write fails partway (the file size limit
/// of `ulimit -f`, with SIGXFSZ ignored so that `write` returns `EFBIG`, as a full disk
/// returns `ENOSPC`): `zt` exits with the error, each old output is as it was, and nothing
/// else is left in the folder, no temporary and no shard.
#[test]
fn a_write_that_runs_out_of_room_leaves_the_old_files_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.zt");
    {
        let mut w = ztensor::Writer::create(&input).unwrap();
        for i in 0..32u32 {
            let data: Vec<f32> = (0..16_384u32).map(|j| (j ^ i) as f32).collect();
            w.add(&format!("t{i:02}"), &[16_384], &data).unwrap();
        }
        // Last in every order, and over the limit alone: a set's small shards are written
        // before the one that holds it fails.
        w.add("zz", &[1 << 19], &vec![1f32; 1 << 19]).unwrap();
        w.finish().unwrap();
    }
    let cases: [(&str, &[&str]); 7] = [
        ("out.zt", &[]),
        ("old.zt", &["--to", "v1.2"]),
        ("out.safetensors", &[]),
        ("out.gguf", &[]),
        ("out.mag", &[]),
        ("model.safetensors.index.json", &["--shard-size", "256KiB"]),
        ("root.zt", &["--shard-size", "256KiB"]),
    ];
    for (name, extra) in cases {
        let work = dir.path().join(name.replace('.', "_"));
        std::fs::create_dir(&work).unwrap();
        let target = work.join(name);
        std::fs::write(&target, b"the previous version").unwrap();
        // A limit of 1024 blocks (512 KiB or 1 MiB, as the shell counts): every output here
        // is 4 MiB; a set's shards are 256 KiB but for the last, of the 2 MiB tensor.
        let out = Command::new("sh")
            .arg("-c")
            .arg(r#"trap '' XFSZ; ulimit -f 1024 && exec "$0" convert --force "$@""#)
            .arg(env!("CARGO_BIN_EXE_zt"))
            .arg(&input)
            .arg(&target)
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains("File too large"), "{name}: {stderr}");
        assert_eq!(
            std::fs::read(&target).unwrap(),
            b"the previous version",
            "{name}"
        );
        let left: Vec<_> = std::fs::read_dir(&work)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from(name)], "{name}");
    }
}
