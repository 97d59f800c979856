//! `cargo xtask gen-fixtures [--check]`: decides which fixture generators run and in which
//! order (that order is the line order of both `EXPECTED.tsv` files), then writes the result
//! to `fixtures/valid` and `fixtures/invalid`, or with `--check` only compares it with the
//! files on disk. The only module that names the generators.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::fixture_set::{Corpus, Tree};
use crate::{corpus, gguf, legacy, mag, numpy_torch, v1_0, zt2};

/// The folders `gen-fixtures` owns entirely; anything else under fixtures/ is left alone.
const GENERATED_DIRS: [&str; 2] = ["valid", "invalid"];

/// Every fixture file, generated from code.
fn generate() -> Tree {
    let mut c = Corpus::default();
    corpus::valid_dense(&mut c);
    corpus::valid_unusual(&mut c);
    corpus::valid_formats(&mut c);
    corpus::invalid_formats(&mut c);
    legacy::generate(&mut c);
    mag::generate(&mut c);
    corpus::invalid_container(&mut c);
    corpus::invalid_manifest(&mut c);
    corpus::invalid_objects(&mut c);
    zt2::valid(&mut c);
    zt2::valid_types(&mut c);
    zt2::invalid(&mut c);
    v1_0::invalid(&mut c);
    numpy_torch::invalid_numpy(&mut c);
    numpy_torch::invalid_torch(&mut c);
    gguf::valid(&mut c);
    gguf::invalid(&mut c);
    c.finish()
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

pub fn run(check: bool) -> Result<()> {
    let tree = generate();
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
