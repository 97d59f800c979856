//! `cargo xtask fuzz --seconds N [--target T]`: seeds each cargo-fuzz target from fixtures/ and
//! runs it for N seconds with an allocation limit, two targets at a time (one per core).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Each target and the fixture files that seed it.
/// A name that is all extension (a distributed checkpoint's `.metadata`) counts as that
/// extension.
const TARGETS: [(&str, &[&str]); 23] = [
    ("read_zt", &["zt"]),
    ("read_zt2", &["zt"]),
    ("decode_manifest_v2", &["zt"]),
    ("read_mag", &["mag"]),
    ("read_safetensors", &["safetensors"]),
    ("decode_manifest", &["zt"]),
    ("read_numpy", &["npy", "npz"]),
    ("read_pytorch", &["pt", "bin"]),
    ("read_torch_dcp", &["metadata"]),
    ("list_torch_stream", &["pt", "distcp"]),
    ("read_gguf", &["gguf"]),
    ("read_onnx", &["onnx"]),
    ("read_hdf5", &["h5", "keras"]),
    ("read_flax", &["msgpack"]),
    ("read_tf_checkpoint", &["index", "ckpt"]),
    ("read_pickle", &["pkl", "pdparams", "pdopt"]),
    ("read_paddle", &["pdiparams"]),
    ("read_tflite", &["tflite"]),
    ("read_caffe", &["caffemodel"]),
    ("read_openvino", &["xml"]),
    ("read_ggml", &["bin"]),
    ("parse_index", &["json"]),
    ("decode_hdf5_chunk", &["h5", "keras"]),
];

/// A sharded checkpoint's index as writers make it: fixtures/ holds JSON files, not one of
/// these, so the index target also starts from this.
const INDEX_SEED: &str = r#"{"metadata": {"total_size": 24, "format": "pt"},
 "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors",
                "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                "model.norm.weight": "model-00002-of-00002.safetensors"}}"#;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Copies the seeds of one target into fuzz/corpus/TARGET (which git ignores).
fn seed(target: &str, exts: &[&str]) -> Result<PathBuf> {
    let corpus = root().join("fuzz/corpus").join(target);
    std::fs::create_dir_all(&corpus)?;
    if target == "parse_index" {
        std::fs::write(corpus.join("model.safetensors.index.json"), INDEX_SEED)?;
    }
    let mut stack = vec![root().join("fixtures")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .extension()
                .and_then(|x| x.to_str())
                .or_else(|| p.file_name()?.to_str()?.strip_prefix('.'))
                .is_some_and(|x| exts.contains(&x))
            {
                let name = p
                    .strip_prefix(root().join("fixtures"))?
                    .to_string_lossy()
                    .replace('/', "_");
                let bytes = std::fs::read(&p)?;
                let v2 = bytes.starts_with(b"\x89ZT2\r\n\x1a\n");
                // The v2 targets start from v2 files only.
                if (target.ends_with("zt2") || target.ends_with("v2")) && !v2 {
                    continue;
                }
                if target == "list_torch_stream" && p.extension().is_some_and(|x| x == "distcp") {
                    for (n, seed) in decoded_chunk_seeds(&bytes).into_iter().enumerate() {
                        std::fs::write(corpus.join(format!("{name}.{n}")), seed)?;
                    }
                    continue;
                }
                if target == "decode_hdf5_chunk" {
                    for (n, seed) in hdf5_chunk_seeds(&p).into_iter().enumerate() {
                        std::fs::write(corpus.join(format!("{name}.{n}")), seed)?;
                    }
                    continue;
                }
                // The manifest targets want the manifest itself: cut it out of .zt files.
                let bytes = match target {
                    "decode_manifest" => manifest_of(&bytes).unwrap_or(bytes),
                    "decode_manifest_v2" => manifest_of_v2(&bytes).unwrap_or(bytes),
                    _ => bytes,
                };
                std::fs::write(corpus.join(name), bytes)?;
            }
        }
    }
    Ok(corpus)
}

/// Inputs of the `list_torch_stream` target from a data file of a distributed checkpoint:
/// the archives its compressed chunks decode to (their records closed by data descriptors,
/// the central directory after them), each chunk a zstd stream found by its magic. A data
/// file of stored chunks gives none.
fn decoded_chunk_seeds(data_file: &[u8]) -> Vec<Vec<u8>> {
    const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    let starts: Vec<usize> = (data_file.windows(4).enumerate())
        .filter(|(_, w)| *w == ZSTD_MAGIC)
        .map(|(at, _)| at)
        .collect();
    let ends = starts.iter().skip(1).copied().chain([data_file.len()]);
    (starts.iter().zip(ends))
        .filter_map(|(&from, to)| zstd::decode_all(&data_file[from..to]).ok())
        .filter(|archive| archive.starts_with(b"PK\x03\x04"))
        .collect()
}

/// Inputs of the `decode_hdf5_chunk` target, each the first chunk of a chunked dataset in the
/// HDF5 file at `path` (`ztensor::fuzzing::hdf5_chunk_seed`; datasets it cannot say are left
/// out).
fn hdf5_chunk_seeds(path: &Path) -> Vec<Vec<u8>> {
    let (Ok(reader), Ok(file)) = (ztensor::open(path), std::fs::read(path)) else {
        return Vec::new();
    };
    let mut seeds = Vec::new();
    for object in &reader {
        for c in object.components() {
            let ztensor::formats::Encoding::Hdf5Chunks(table) = &c.info().encoding else {
                continue;
            };
            let Some(first) = table.chunks.first().filter(|_| c.info().file == 0) else {
                continue;
            };
            let stored = usize::try_from(c.info().offset + first.at)
                .ok()
                .and_then(|at| file.get(at..at.checked_add(first.size as usize)?));
            seeds.extend(
                stored.and_then(|s| ztensor::fuzzing::hdf5_chunk_seed(table, first.mask, s)),
            );
        }
    }
    seeds
}

fn manifest_of(b: &[u8]) -> Option<Vec<u8>> {
    let tail = b.len().checked_sub(16)?;
    let size = u64::from_le_bytes(b.get(tail..tail + 8)?.try_into().ok()?) as usize;
    Some(b.get(tail.checked_sub(size)?..tail)?.to_vec())
}

/// The manifest of a v2 file, located by its 40-byte footer.
fn manifest_of_v2(b: &[u8]) -> Option<Vec<u8>> {
    let footer = b.get(b.len().checked_sub(40)?..)?;
    let offset = usize::try_from(u64::from_le_bytes(footer.get(..8)?.try_into().ok()?)).ok()?;
    let len = usize::try_from(u64::from_le_bytes(footer.get(8..16)?.try_into().ok()?)).ok()?;
    Some(b.get(offset..offset.checked_add(len)?)?.to_vec())
}

pub fn run(args: &[&str]) -> Result<()> {
    let mut seconds = 60u64;
    let mut only: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "--seconds" => seconds = it.next().context("--seconds needs a number")?.parse()?,
            "--target" => only = Some(it.next().context("--target needs a name")?.to_string()),
            other => bail!("unknown fuzz argument {other}"),
        }
    }
    let targets: Vec<_> = TARGETS
        .iter()
        .filter(|(t, _)| only.as_deref().is_none_or(|o| o == *t))
        .collect();
    let status = Command::new("cargo")
        .args(["+nightly", "fuzz", "build", "-O"])
        .current_dir(root())
        .status()?;
    if !status.success() {
        bail!("cargo +nightly fuzz build failed");
    }
    for pair in targets.chunks(2) {
        let mut children = Vec::new();
        for (target, exts) in pair {
            let corpus = seed(target, exts)?;
            let log = root().join("fuzz").join(format!("{target}.log"));
            let child = Command::new("cargo")
                .args(["+nightly", "fuzz", "run", "-O", target])
                .arg(&corpus)
                .args([
                    "--",
                    &format!("-max_total_time={seconds}"),
                    "-rss_limit_mb=2048",
                    // The default memory budget of a read (64 MiB beside twice what the input
                    // stores) and the targets' 16 MiB decompression cap, with room for the
                    // listing: an input that makes us allocate more is a finding.
                    "-malloc_limit_mb=128",
                    "-print_final_stats=1",
                ])
                .current_dir(root())
                .stdout(std::fs::File::create(&log)?)
                .stderr(std::fs::File::create(log.with_extension("err"))?)
                .spawn()?;
            children.push((target, child, log));
        }
        for (target, mut child, log) in children {
            let ok = child.wait()?.success();
            let err = std::fs::read_to_string(log.with_extension("err")).unwrap_or_default();
            let runs = err
                .lines()
                .rev()
                .find(|l| l.contains("stat::number_of_executed_units"))
                .unwrap_or("")
                .trim()
                .to_owned();
            println!(
                "{target}: {} in {seconds} s; {runs}",
                if ok {
                    "no crash"
                } else {
                    "CRASH (see fuzz/artifacts)"
                }
            );
            if !ok {
                bail!(
                    "fuzz target {target} found a crash; its log is {}",
                    log.with_extension("err").display()
                );
            }
        }
    }
    Ok(())
}
