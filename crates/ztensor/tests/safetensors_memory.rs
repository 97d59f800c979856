//! Converting to `.safetensors` streams: memory is bounded by the largest tensor, not the
//! file. A counting allocator measures the peak of live heap bytes; one test in this binary,
//! so nothing else allocates concurrently.

use std::sync::atomic::Ordering::Relaxed;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{Counting, LIVE, PEAK};

#[global_allocator]
static A: Counting = Counting;

#[test]
fn converting_zstd_to_safetensors_holds_one_tensor_at_a_time() {
    const TENSORS: usize = 16;
    const ELEMENTS: usize = 256 << 10; // 1 MiB of f32 each
    let dir = tempfile::tempdir().unwrap();
    let zt = dir.path().join("in.zt");
    let mut w = ztensor::Writer::create(&zt).unwrap();
    w.set_options(ztensor::WriteOptions {
        compression: Some(3),
        digest: None,
    });
    let values: Vec<f32> = (0..ELEMENTS).map(|i| (i % 251) as f32).collect();
    for i in 0..TENSORS {
        w.add(&format!("t{i:02}"), &[ELEMENTS as u64], &values)
            .unwrap();
    }
    w.finish().unwrap();
    drop(values);
    let r = ztensor::open(&zt).unwrap();
    let out = dir.path().join("out.safetensors");

    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    ztensor::write_safetensors(&r, &out, false).unwrap();
    let peak = PEAK.load(Relaxed) - base;

    let tensor = ELEMENTS * 4;
    // One decoded tensor, the file's 1 MiB write buffer, the header and small change; the
    // whole file decoded at once would be 16 tensors.
    assert!(
        peak <= 3 * tensor,
        "peak {peak} bytes while writing {} tensors of {tensor} bytes",
        TENSORS
    );
    let st = std::fs::read(&out).unwrap();
    assert_eq!(
        safetensors::SafeTensors::deserialize(&st).unwrap().len(),
        TENSORS
    );
}
