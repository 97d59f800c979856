//! Project tasks, run as `cargo xtask <task>`.
//!
//! | task | what it does |
//! |---|---|
//! | `gen-fixtures` | writes `fixtures/valid` and `fixtures/invalid` from code, deterministically |
//! | `gen-fixtures --check` | fails when the files on disk differ from what the code generates |
//! | `bench [--scale N]` | benchmarks against safetensors and the machine's limits (release build) |
//! | `fuzz [--seconds N] [--target T]` | seeds and runs every cargo-fuzz target (nightly) for N seconds |

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

mod bench;
mod corpus;
mod fuzz;
mod legacy;
mod mag;

/// A generated file tree: relative path to bytes.
pub type Tree = BTreeMap<String, Vec<u8>>;

/// The folders `gen-fixtures` owns entirely; anything else under fixtures/ is left alone.
const GENERATED_DIRS: [&str; 2] = ["valid", "invalid"];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["gen-fixtures"] => gen_fixtures(false),
        ["gen-fixtures", "--check"] => gen_fixtures(true),
        ["fuzz", rest @ ..] => fuzz::run(rest),
        ["bench", rest @ ..] => bench::run(rest),
        _ => {
            eprintln!("usage: cargo xtask gen-fixtures [--check] | cargo xtask fuzz [--seconds N] [--target T]");
            std::process::exit(2);
        }
    }
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

fn gen_fixtures(check: bool) -> Result<()> {
    let tree = corpus::generate()?;
    let root = fixtures_dir();
    let on_disk = read_tree(&root)?;
    if check {
        let mut problems = Vec::new();
        for (path, bytes) in &tree {
            match on_disk.get(path) {
                None => problems.push(format!("missing: fixtures/{path}")),
                Some(b) if b != bytes => problems.push(format!("stale: fixtures/{path}")),
                Some(_) => {}
            }
        }
        for path in on_disk.keys().filter(|p| !tree.contains_key(*p)) {
            problems.push(format!("not generated: fixtures/{path}"));
        }
        if !problems.is_empty() {
            for p in &problems {
                eprintln!("{p}");
            }
            bail!("fixtures/ is out of date: run `cargo xtask gen-fixtures` and commit the result");
        }
        println!("fixtures/ is up to date ({} files)", tree.len());
        return Ok(());
    }
    for path in on_disk.keys().filter(|p| !tree.contains_key(*p)) {
        std::fs::remove_file(root.join(path))
            .with_context(|| format!("removing fixtures/{path}"))?;
    }
    for (path, bytes) in &tree {
        let full = root.join(path);
        if on_disk.get(path) != Some(bytes) {
            std::fs::create_dir_all(full.parent().context("fixture path has no parent")?)?;
            std::fs::write(&full, bytes).with_context(|| format!("writing fixtures/{path}"))?;
        }
    }
    println!("wrote {} fixture files", tree.len());
    Ok(())
}

/// Every file under the generated folders, by path relative to `root`.
fn read_tree(root: &Path) -> Result<Tree> {
    let mut out = Tree::new();
    for dir in GENERATED_DIRS {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries {
                let p = e?.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(root)?.to_string_lossy().replace('\\', "/");
                    out.insert(rel, std::fs::read(&p)?);
                }
            }
        }
    }
    Ok(out)
}
