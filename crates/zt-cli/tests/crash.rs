//! Crash-safe writing, proven: a writing `zt` process is killed with SIGKILL at pseudo-random
//! moments; afterwards the target is always its previous version, intact, or (when the write
//! won the race) the complete new version, never anything in between.

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
    }
    assert!(
        killed_mid_write >= 3,
        "the kills must land mid-write ({killed_mid_write} did, {completed} completed)"
    );
}
