//! `zt` run in-process, command after command, as the Python package runs it
//! (`ztio.convert`, `ztio.verify`, ...): each command's options are its own, and none carries
//! over to the next (a `--no-verify` once must not let a later conversion copy bytes whose
//! digests fail).

use std::path::{Path, PathBuf};

fn fixture(p: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(p)
        .to_string_lossy()
        .into_owned()
}

fn run(args: &[&str]) -> u8 {
    zt_cli::run_embedded(std::iter::once("zt").chain(args.iter().copied()))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn no_verify_holds_for_its_own_command_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = |n: &str| -> PathBuf { dir.path().join(n) };
    let good = fixture("valid/dtypes.zt");
    // A v1.1 file whose object's digest does not match its bytes.
    let bad = fixture("invalid/v11_bad_digest.zt");

    assert_eq!(run(&["convert", &bad, s(&out("a.zt")), "--no-sync"]), 1);
    assert!(!out("a.zt").exists());
    assert_eq!(run(&["convert", &good, s(&out("b.zt")), "--no-verify"]), 0);
    // The command before said --no-verify; this one did not.
    assert_eq!(run(&["convert", &bad, s(&out("c.zt"))]), 1);
    assert!(!out("c.zt").exists());
    // Asked for, it copies the bytes as they are.
    assert_eq!(run(&["convert", &bad, s(&out("d.zt")), "--no-verify"]), 0);
    assert!(out("d.zt").exists());
    assert_eq!(run(&["cat", &bad, "w"]), 1);
}

#[test]
fn max_memory_holds_for_its_own_command_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.zt");
    // A dataset of hundreds of chunks takes more than a KiB to list.
    let h5 = fixture("interop/hdf5/chunk_btree_deep.h5");
    let convert = |budget: &[&str]| {
        let args = [budget, &["convert", &h5, s(&out), "--no-sync", "--force"]].concat();
        run(&args)
    };
    assert_eq!(convert(&["--max-memory", "1KiB"]), 1);
    assert_eq!(convert(&[]), 0);
    assert_eq!(convert(&["--max-memory", "1KiB"]), 1);
}

#[test]
fn commands_on_two_threads_keep_their_own_options() {
    let dir = tempfile::tempdir().unwrap();
    let bad = fixture("invalid/v11_bad_digest.zt");
    let h5 = fixture("interop/hdf5/chunk_btree_deep.h5");
    std::thread::scope(|scope| {
        let copied = scope.spawn(|| {
            (0..20)
                .map(|i| {
                    let out = dir.path().join(format!("copy{i}.zt"));
                    run(&["convert", &bad, s(&out), "--no-verify", "--no-sync"])
                })
                .collect::<Vec<_>>()
        });
        let refused = scope.spawn(|| {
            (0..20)
                .map(|i| {
                    let out = dir.path().join(format!("refused{i}.zt"));
                    run(&["convert", &bad, s(&out), "--no-sync"])
                })
                .collect::<Vec<_>>()
        });
        let listed = scope.spawn(|| {
            (0..20)
                .map(|i| {
                    let out = dir.path().join(format!("listed{i}.zt"));
                    run(&["--max-memory", "1KiB", "convert", &h5, s(&out), "--no-sync"])
                })
                .collect::<Vec<_>>()
        });
        assert!(copied.join().unwrap().iter().all(|&c| c == 0));
        assert!(refused.join().unwrap().iter().all(|&c| c == 1));
        assert!(listed.join().unwrap().iter().all(|&c| c == 1));
    });
}

#[test]
fn an_in_process_host_gets_the_notes_and_the_failure_instead_of_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.zt");
    // One of the archive's arrays is structured (not numbers): left out, with a note.
    let mixed = fixture("interop/numpy/mixed.npz");
    let ended =
        zt_cli::run_embedded_reporting(["zt", "convert", &mixed, s(&out), "--no-sync"], None);
    assert_eq!(ended.status, 0);
    assert!(ended.failure.is_none());
    assert_eq!(ended.notes.len(), 1, "{:?}", ended.notes);
    assert!(ended.notes[0]
        .ends_with("object \"structured\" skipped: a structured .npy array (fields are not read)"));
    // The library's error, as it was.
    let bad = fixture("invalid/v11_bad_digest.zt");
    let ended = zt_cli::run_embedded_reporting(["zt", "convert", &bad, s(&out), "--force"], None);
    assert_eq!(ended.status, 1);
    match ended.failure {
        Some(zt_cli::Failed::Error(e)) => {
            assert_eq!(e.kind(), ztensor::ErrorKind::ChecksumMismatch);
            assert_eq!(
                (e.object(), e.component(), e.offset()),
                (Some("w"), Some("data"), Some(0x40))
            );
        }
        other => panic!("{other:?}"),
    }
    // A mistake in the arguments, in clap's words.
    let ended = zt_cli::run_embedded_reporting(["zt", "convert", &bad], None);
    assert_eq!(ended.status, 2);
    match ended.failure {
        Some(zt_cli::Failed::Usage(m)) => assert!(m.contains("<OUTPUT>"), "{m}"),
        other => panic!("{other:?}"),
    }
}
