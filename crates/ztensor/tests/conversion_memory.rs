//! Conversions of a compressed tensor hold at most that tensor's decoded bytes beyond the
//! maps: the decoded buffer is the one copy, written out from where it was decoded. A
//! counting allocator measures the peak of live heap bytes; one test in this binary, so
//! nothing else allocates concurrently.

use std::sync::atomic::Ordering::Relaxed;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{Counting, LIVE, PEAK};

#[global_allocator]
static A: Counting = Counting;

/// The tensor: 16 MiB of f32, compressible.
const ELEMENTS: usize = 4 << 20;
const TENSOR: usize = ELEMENTS * 4;
/// What a conversion may hold beside the tensor: buffers of the writers (1 MiB each), zstd's
/// contexts and the listing.
const ALLOWANCE: usize = 6 << 20;

/// One conversion of the reader to a path.
type Convert<'a> = dyn Fn(&std::path::Path) + 'a;

#[test]
fn converting_a_compressed_tensor_holds_one_copy_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("z.zt");
    {
        let values: Vec<f32> = (0..ELEMENTS).map(|i| (i % 1000) as f32).collect();
        let mut w = ztensor::Writer::create(&src).unwrap();
        w.add_with(
            "w",
            &[ELEMENTS as u64],
            &values,
            Default::default(),
            ztensor::WriteOptions {
                compression: Some(3),
                digest: None,
            },
        )
        .unwrap();
        w.finish().unwrap();
    }
    let r = ztensor::open(&src).unwrap();
    let durability = ztensor::Durability::Unsynced;
    let conversions: [(&str, &Convert); 3] = [
        ("safetensors", &|out| {
            ztensor::write_safetensors_with(&r, out, false, durability).unwrap()
        }),
        ("gguf", &|out| {
            ztensor::write_gguf_with(&r, out, false, durability).unwrap()
        }),
        ("mag", &|out| {
            let options = ztensor::MagOptions {
                version: ztensor::mag::WriteVersion::V300,
                densify: false,
                durability,
            };
            ztensor::write_mag(&r, out, options).unwrap()
        }),
    ];
    for (kind, convert) in conversions {
        let out = dir.path().join(format!("out.{kind}"));
        let base = LIVE.load(Relaxed);
        PEAK.store(base, Relaxed);
        convert(&out);
        let peak = PEAK.load(Relaxed) - base;
        assert!(
            peak <= TENSOR + ALLOWANCE,
            "{kind}: {peak} bytes at the peak for a {TENSOR}-byte tensor"
        );
        assert!(peak >= TENSOR, "{kind}: the count counts ({peak})");
    }
}
