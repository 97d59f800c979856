//! A writer holds little per object until its manifest is written: a file of many tiny
//! tensors must not cost kilobytes of memory each. One test in this binary, under the
//! counting allocator.

use std::sync::atomic::Ordering::Relaxed;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{Counting, LIVE, PEAK};
use ztensor::Version;

#[global_allocator]
static A: Counting = Counting;

/// What a writer of `count` tiny objects of `version` holds for each object once all are
/// added, and at the peak of `finish` (its 1 MiB write buffer aside), in bytes.
fn bytes_an_object(version: Version, count: usize) -> (usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.zt");
    let base = LIVE.load(Relaxed) + (1 << 20);
    let mut w =
        ztensor::Writer::create_version(&path, version, ztensor::Durability::Unsynced).unwrap();
    for i in 0..count {
        let name = format!("model.layers.{}.block.{}.weight", i / 100, i % 100);
        w.add(&name, &[2, 2], &[i as f32, 1.0, 2.0, 3.0]).unwrap();
    }
    let held = LIVE.load(Relaxed).saturating_sub(base) / count;
    PEAK.store(LIVE.load(Relaxed), Relaxed);
    w.finish().unwrap();
    let finishing = PEAK.load(Relaxed).saturating_sub(base) / count;
    assert_eq!(ztensor::open(&path).unwrap().len(), count);
    eprintln!("{version:?}: held {held} bytes an object; at the peak of finish {finishing}");
    (held, finishing)
}

#[test]
fn a_writer_of_many_tiny_objects_holds_little_per_object() {
    // About 430 and 590 now; 1,966 and 2,126 when each object's components were a BTreeMap
    // (room for eleven in its first node).
    let (held, finishing) = bytes_an_object(Version::V1_2, 100_000);
    assert!(held < 700, "the v1.2 writer holds {held} bytes an object");
    assert!(
        finishing < 900,
        "v1.2's finish peaks at {finishing} bytes an object"
    );
    // v2 (4 KiB packing: 80 MB of file) moves its objects into its own manifest types at
    // the end: about 590 and 810 (the blob-sharing table, keyed by digest too, is 50 of it).
    let (held, finishing) = bytes_an_object(Version::V2Compact, 20_000);
    assert!(held < 700, "the v2 writer holds {held} bytes an object");
    assert!(
        finishing < 1100,
        "v2's finish peaks at {finishing} bytes an object"
    );
}
