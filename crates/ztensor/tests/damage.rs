//! The damage sweep: every valid fixture, truncated at every length (sampled for large files)
//! and with single bytes changed across its header, manifest or records and footer. Opening and
//! reading everything must give data or an error, never a panic. zTensor v2 files are among
//! them (fixtures/interop/zt2 and the generated v2 files in fixtures/valid), the NumPy and
//! PyTorch files numpy and torch wrote (fixtures/interop/numpy, pytorch), the ONNX models
//! onnx wrote (fixtures/interop/onnx, opened from memory: external data is refused), GGUF files
//! (fixtures/interop/gguf, the generated v1 and v2 ones in fixtures/valid), HDF5 files (h5py,
//! Keras, TensorFlow), Flax checkpoints and PyTorch distributed checkpoints' `.metadata`;
//! each damaged v2
//! file is tried again with its manifest hash fixed, so the damage reaches the manifest.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use ztensor::{Format, OpenOptions, ReadOptions};

fn valid_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut v = Vec::new();
    for dir in [
        "valid",
        "interop",
        "interop/mag",
        "interop/safetensors",
        "interop/zt2",
        "interop/numpy",
        "interop/pytorch",
        "interop/gguf",
        "interop/gguf/split",
        "interop/onnx",
        "interop/hdf5",
        "interop/tensorflow",
        "interop/tensorflow/ckpt",
        "interop/tensorflow/saved_model/variables",
        "interop/flax",
        "interop/pickle",
        "interop/pickle/paddle",
        "interop/paddle/pir",
        "interop/paddle/legacy",
        "interop/paddle/paddle1",
        "interop/tflite",
        "interop/caffe",
        "interop/openvino",
        "interop/ggml",
    ] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file()
                && p.extension()
                    .is_some_and(|x| x != "tsv" && x != "json" && x != "data")
                // A TensorFlow checkpoint's data files: raw bytes its index points into.
                && !p.to_string_lossy().contains(".data-")
            {
                v.push(p);
            }
        }
    }
    // Distributed checkpoints' `.metadata` (opened from memory, their data files cannot be
    // found: the damage reaches the pickle and the records; tests/torch_dcp.rs damages the
    // data files).
    for sub in ["single", "two_ranks", "byte_tensors"] {
        v.push(root.join("interop/torch_dcp").join(sub).join(".metadata"));
    }
    v.sort();
    v
}

/// Opens and reads everything; errors are fine, panics are not (caught by the caller).
fn exercise(bytes: Vec<u8>) {
    let opts = OpenOptions::new()
        .max_decompressed_len(64 << 20)
        .verify_mag_checksum(false);
    let Ok(r) = opts.open_bytes(bytes) else {
        return;
    };
    for o in &r {
        for c in o.components() {
            let _ = c.bytes_with(ReadOptions::verified());
        }
        let complex = o.element_type().is_some_and(|t| t.ratio() == 2);
        if !complex && (!matches!(o.format, Format::Unknown(_)) || o.ggml_type().is_some()) {
            let _ = o.read_f32();
            let _ = o.read::<f32>();
        }
        let _ = o.read_bool();
        let _ = o.dense_form();
    }
    let _ = r.verify();
}

/// The offsets worth damaging: the first 512 bytes (header, records, .mag metadata) and the
/// last 4096 (manifest and footer), or all of a small file.
fn interesting(len: usize) -> Vec<usize> {
    if len <= 4096 {
        return (0..len).collect();
    }
    (0..512).chain(len.saturating_sub(4096)..len).collect()
}

/// Truncation lengths: every one for small files, the ends and a stride in between otherwise.
fn cuts(len: usize) -> Vec<usize> {
    if len <= 8192 {
        return (0..len).collect();
    }
    let stride = len / 1024;
    (0..1024)
        .chain(len - 1024..len)
        .chain((0..len).step_by(stride))
        .collect()
}

/// A damaged v2 file with its footer's manifest hash made to match again, so the damage
/// reaches the manifest decoder instead of stopping at the hash check. `None` when the file
/// is not v2 or its footer does not locate a manifest.
fn rehashed_v2(b: &[u8]) -> Option<Vec<u8>> {
    if !b.starts_with(b"\x89ZT2\r\n\x1a\n") {
        return None;
    }
    let f = b.len().checked_sub(40)?;
    let field = |i: usize| -> Option<usize> {
        let bytes: [u8; 8] = b.get(f + i..f + i + 8)?.try_into().ok()?;
        usize::try_from(u64::from_le_bytes(bytes)).ok()
    };
    let (offset, len) = (field(0)?, field(8)?);
    let manifest = b.get(offset..offset.checked_add(len)?)?;
    let mut out = b.to_vec();
    out.get_mut(f + 16..f + 24)?
        .copy_from_slice(&ztensor::formats::xxh3_64(manifest).to_le_bytes());
    Some(out)
}

fn sweep(path: &Path) -> Vec<String> {
    let orig = std::fs::read(path).unwrap();
    let mut failures = Vec::new();
    let mut run = |label: String, bytes: Vec<u8>| {
        let again = rehashed_v2(&bytes).filter(|r| *r != bytes);
        if std::panic::catch_unwind(|| exercise(bytes)).is_err() {
            failures.push(format!("{}: {label}", path.display()));
        }
        if let Some(r) = again {
            if std::panic::catch_unwind(|| exercise(r)).is_err() {
                failures.push(format!("{}: {label}, manifest hash fixed", path.display()));
            }
        }
    };
    for n in cuts(orig.len()) {
        run(format!("truncated to {n}"), orig[..n].to_vec());
    }
    for at in interesting(orig.len()) {
        for v in [0x00, 0xff, 0x80, orig[at].wrapping_add(1), orig[at] ^ 0x40] {
            if v != orig[at] {
                let mut b = orig.clone();
                b[at] = v;
                run(format!("byte {at} set to {v:#04x}"), b);
            }
        }
    }
    failures
}

#[test]
fn no_damage_makes_the_reader_panic() {
    // Silence the default hook: a caught panic would otherwise print for every case.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut files = valid_files();
    assert!(files.len() > 40, "the sweep covers the corpus");
    // Every core the test may use, each taking the next file when it is done with one, the
    // largest first: the files differ in size by 1000x, and a fixed split of the list kept
    // one of two cores idle for most of the sweep (121% of a core over 152 s).
    files.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).map_or(0, |m| m.len())));
    let (next, swept) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut found = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Relaxed);
                        let Some(path) = files.get(i) else {
                            return found;
                        };
                        found.extend(sweep(path));
                        swept.fetch_add(1, Relaxed);
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    std::panic::set_hook(hook);
    assert_eq!(swept.into_inner(), files.len(), "every file was swept");
    // The workers find them in whatever order they finish; sorted, the report names the same
    // first thirty on every run.
    failures.sort();
    assert!(
        failures.is_empty(),
        "{} panics:\n{}",
        failures.len(),
        failures[..failures.len().min(30)].join("\n")
    );
}
