//! Opening a v2 file of many objects holds no second copy of its manifest: the listing is
//! built as the manifest is decoded, from texts borrowed from its bytes. One test in this
//! binary, under the counting allocator.

use std::sync::atomic::Ordering::Relaxed;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{Counting, LIVE, PEAK};

#[global_allocator]
static A: Counting = Counting;

/// Objects in the file: enough that per-object costs dominate.
const OBJECTS: usize = 50_000;

/// The peak of live heap bytes while `f` runs above what was live before, what is still live
/// after it, and its result.
fn peak<R>(f: impl FnOnce() -> R) -> (usize, usize, R) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let r = f();
    (
        PEAK.load(Relaxed) - base,
        LIVE.load(Relaxed).saturating_sub(base),
        r,
    )
}

#[test]
fn a_v2_listing_costs_about_what_it_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.zt");
    let mut w = ztensor::Writer::create_version(
        &path,
        ztensor::Version::V2Compact,
        ztensor::Durability::Unsynced,
    )
    .unwrap();
    for i in 0..OBJECTS {
        w.add(&format!("model.layers.{i}.weight"), &[2], &[1f32, 2.0])
            .unwrap();
    }
    w.finish().unwrap();
    // What the manifest costs decoded into owned values (the old way to a listing).
    let c = zt_container::ContainerV2::parse(zt_container::Source::map(&path).unwrap(), 1 << 30)
        .unwrap();
    let m = c.manifest_bytes().unwrap();
    let f = *c.footer();
    let (owned, _, manifest) =
        peak(|| zt_manifest::decode_manifest_v2(&m, f.manifest_offset, Default::default()));
    let manifest = manifest.unwrap();
    assert_eq!(manifest.objects.len(), OBJECTS);
    drop((manifest, m));
    drop(c);
    let (open_peak, kept, reader) = peak(|| ztensor::OpenOptions::new().open(&path));
    let reader = reader.unwrap();
    assert_eq!(reader.len(), OBJECTS);
    eprintln!("open: peak {open_peak} bytes, kept {kept}; an owned manifest alone: {owned}");
    // The peak is the listing (and the order of its names while it is sorted), not the
    // listing and an owned manifest beside it.
    assert!(
        open_peak < kept + owned / 2,
        "open peaked at {open_peak} bytes, keeps {kept}; an owned manifest takes {owned}"
    );
}
