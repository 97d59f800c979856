//! Bounded memory: opening and reading every file of the corpus, valid and hostile, never
//! allocates more than a small multiple of the file's size plus the configured decompression
//! cap. A counting allocator measures the peak of live heap bytes. One test in this binary, so
//! nothing else allocates concurrently.

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;

use ztensor::{Format, OpenOptions, ReadOptions};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{Counting, LIVE, PEAK};

#[global_allocator]
static A: Counting = Counting;

/// The decompression cap this test configures.
const CAP: u64 = 1 << 20;
/// The bound: this many times the file's size, plus the cap, plus a fixed allowance for
/// the reader's own bookkeeping.
const FACTOR: usize = 16;
const FIXED: usize = 256 << 10;

fn read_everything(path: &Path, unmapped: bool) {
    let Ok(r) = OpenOptions::new()
        .unmapped(unmapped)
        .max_decompressed_len(CAP)
        .open(path)
    else {
        return;
    };
    for o in &r {
        for c in o.components() {
            let _ = c.bytes_with(ReadOptions::verified());
        }
        if (!matches!(o.format, Format::Unknown(_)) || o.ggml_type().is_some())
            && o.element_type().is_some_and(|t| t.ratio() == 1)
        {
            let _ = o.read_f32();
        }
    }
    let _ = r.verify();
}

#[test]
fn every_corpus_file_reads_within_the_memory_bound() {
    // The counter counts: a known allocation shows in the peak.
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let probe = std::hint::black_box(vec![1u8; 1 << 20]);
    assert!(PEAK.load(Relaxed) - base >= 1 << 20);
    drop(probe);

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut worst = (0.0f64, String::new());
    let mut over = Vec::new();
    for dir in [
        "invalid",
        "valid",
        "interop",
        "interop/mag",
        "interop/safetensors",
        "interop/numpy",
        "interop/pytorch",
        "interop/gguf",
        "interop/gguf/split",
        "interop/pickle",
        "interop/pickle/paddle",
        "interop/paddle/pir",
        "interop/paddle/legacy",
        "interop/tflite",
        "interop/caffe",
        "interop/openvino",
        "interop/ggml",
    ] {
        let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        for p in paths {
            let len = std::fs::metadata(&p).unwrap().len() as usize;
            for unmapped in [false, true] {
                let base = LIVE.load(Relaxed);
                PEAK.store(base, Relaxed);
                read_everything(&p, unmapped);
                let used = PEAK.load(Relaxed) - base;
                let bound = FACTOR * len + CAP as usize + FIXED;
                let ratio = used as f64 / (len.max(1) as f64);
                if ratio > worst.0 && len > 0 {
                    worst = (ratio, format!("{} ({used} bytes for {len})", p.display()));
                }
                if used > bound {
                    over.push(format!("{} (unmapped={unmapped}): {used} bytes for a {len}-byte file, bound {bound}", p.display()));
                }
            }
        }
    }
    println!("largest heap-to-file ratio: {:.1} for {}", worst.0, worst.1);
    assert!(over.is_empty(), "over the bound:\n{}", over.join("\n"));
}
