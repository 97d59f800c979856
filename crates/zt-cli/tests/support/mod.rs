//! What the `zt` integration tests share: running the binary and reading what it printed.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `zt` with `args` and waits for it.
pub fn zt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zt"))
        .args(args)
        .output()
        .expect("zt runs")
}

/// A path as a command-line argument.
pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Stdout of a run that must have succeeded (exit 0; stderr shown otherwise).
pub fn ok(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(o));
    stdout(o)
}
