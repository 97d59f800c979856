//! `cargo xtask bench`: ours against safetensors and against the machine's own limits, side by
//! side in one run on the same files (page cache warm unless a section says cold, medians of
//! several runs). Results and the command are in docs/benchmarks.md.
//!
//! Map: this module holds the workload, the timing helpers and [`SECTIONS`], the list that
//! `--only` picks from; each section is one function in a room of its own:
//! [`write`](mod@write) (`write`), [`read`] (`read`, `cold`), [`open`] (`open`, `header`), [`gguf`],
//! [`zstd`], [`verify`], [`remote`], and [`tools`] (`zt`, `python`, `formats`: whole
//! programs).

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use common::*;

mod common;
mod gguf;
mod open;
mod read;
mod remote;
mod tools;
mod verify;
mod write;
mod zstd;

/// One section: its name for `--only`, and its function.
type Section = (&'static str, fn(&mut Bench) -> Result<()>);

/// Every section, in the order they run.
const SECTIONS: &[Section] = &[
    ("write", write::write),
    ("read", read::read),
    ("cold", read::cold),
    ("open", open::open),
    ("header", open::header),
    ("gguf", gguf_section),
    ("zstd", zstd::zstd),
    ("verify", verify::verify),
    ("zt", tools::zt_binary),
    ("remote", remote_section),
    ("python", tools::python),
    ("formats", tools::formats),
];

/// `cargo xtask bench [--scale N] [--only a,b]`.
pub fn run(args: &[&str]) -> Result<()> {
    // Read before anything is built or timed: a typo or `--help` must not start a run of
    // twenty minutes.
    let mut scale = 1usize;
    // `--only read,open`: just those sections (files they need are made once, untimed).
    let mut only: Option<Vec<&str>> = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match *arg {
            "--scale" => {
                let n = it.next().context("--scale needs a number")?;
                scale = n
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n >= 1)
                    .with_context(|| format!("--scale takes a whole number from 1, not {n:?}"))?;
            }
            "--only" => {
                only = Some(
                    it.next()
                        .context("--only needs sections")?
                        .split(',')
                        .collect(),
                )
            }
            "-h" | "--help" => {
                let names: Vec<&str> = SECTIONS.iter().map(|(name, _)| *name).collect();
                println!("usage: cargo xtask bench [--scale N] [--only SECTION,...]");
                println!("sections: {}", names.join(", "));
                return Ok(());
            }
            other => bail!("unknown bench argument {other:?} (cargo xtask bench --help)"),
        }
    }
    if let Some(unknown) = only
        .iter()
        .flatten()
        .find(|s| !SECTIONS.iter().any(|(name, _)| name == *s))
    {
        let names: Vec<&str> = SECTIONS.iter().map(|(name, _)| *name).collect();
        bail!("no section {unknown:?}; the sections: {}", names.join(", "));
    }
    if cfg!(debug_assertions) {
        // Benchmarks of a debug build mean nothing: run ourselves again, optimized.
        let status = Command::new("cargo")
            .args([
                "run",
                "--quiet",
                "--release",
                "--package",
                "xtask",
                "--",
                "bench",
            ])
            .args(args)
            .status()?;
        std::process::exit(status.code().unwrap_or(1));
    }
    let want = |section: &str| only.as_ref().is_none_or(|o| o.contains(&section));
    // One folder per scale: files made at one scale are never read as another's.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/bench-data")
        .join(format!("scale-{scale}"));
    std::fs::create_dir_all(&dir)?;
    let tensors = workload(false, scale);
    let total: u64 = tensors.iter().map(|t| t.bytes.len() as u64).sum();
    println!(
        "workload: {} tensors, {:.2} GiB, {} cores",
        tensors.len(),
        total as f64 / f64::from(1u32 << 30),
        ztensor::formats::available_threads()
    );
    let mut bench = Bench {
        scale,
        runs: 5,
        zt: dir.join("model.zt"),
        zt2: dir.join("model_v2.zt"),
        st: dir.join("model.safetensors"),
        zt_sha: dir.join("model_sha256.zt"),
        dir,
        tensors,
        total,
        table: Table { rows: Vec::new() },
        t_plain: None,
        t_sha_raw: None,
    };
    if !want("write") {
        // Later sections read these files: make them once, untimed.
        write::make_files(&mut bench)?;
    }
    for (name, section) in SECTIONS {
        if want(name) {
            section(&mut bench)?;
        }
    }
    Ok(())
}

/// A quantized model's layout, listed and read; the gguf package beside.
fn gguf_section(b: &mut Bench) -> Result<()> {
    let (runs, scale) = (b.runs, b.scale);
    let Bench { dir, table, .. } = b;
    // --- GGUF: a quantized model's layout, listed and read; the gguf package beside ---
    let median_of = |f: &mut dyn FnMut() -> Result<()>| median(runs, f);
    let helpers = gguf::Helpers {
        median: &median_of,
        touch,
        read_sequential,
        runs,
    };
    for (name, t, vs) in gguf::rows(dir, scale, &helpers)? {
        table.add("gguf", &name, t, vs.as_ref().map(|(d, w)| (*d, w.as_str())));
    }
    Ok(())
}

/// Reading over HTTP from a server on loopback.
fn remote_section(b: &mut Bench) -> Result<()> {
    let runs = b.runs;
    let Bench { zt, .. } = b;
    // Each remote run costs hundreds of requests to a slow server: medians of 3.
    remote::run(zt, runs.min(3))?;
    Ok(())
}
