//! A writer holds little per object until its manifest is written: a file of many tiny
//! tensors must not cost kilobytes of memory each. One test in this binary, under the
//! counting allocator.

use std::sync::atomic::Ordering::Relaxed;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{Counting, LIVE, PEAK};

#[global_allocator]
static A: Counting = Counting;

/// Objects written: enough that per-object costs dominate.
const OBJECTS: usize = 100_000;

#[test]
fn a_writer_of_many_tiny_objects_holds_little_per_object() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.zt");
    let base = LIVE.load(Relaxed);
    let mut w = ztensor::Writer::create_version(
        &path,
        ztensor::Version::V1_2,
        ztensor::Durability::Unsynced,
    )
    .unwrap();
    for i in 0..OBJECTS {
        let name = format!("model.layers.{}.block.{}.weight", i / 100, i % 100);
        w.add(&name, &[2, 2], &[i as f32, 1.0, 2.0, 3.0]).unwrap();
    }
    // What the writer holds for its objects (its 1 MiB write buffer aside).
    let held = LIVE.load(Relaxed).saturating_sub(base + (1 << 20)) / OBJECTS;
    PEAK.store(LIVE.load(Relaxed), Relaxed);
    w.finish().unwrap();
    let finishing = PEAK.load(Relaxed).saturating_sub(base + (1 << 20)) / OBJECTS;
    eprintln!("held {held} bytes an object; at the peak of finish {finishing}");
    // About 430 and 590 now; 1,966 and 2,126 when each object's components were a BTreeMap
    // (room for eleven in its first node).
    assert!(held < 700, "the writer holds {held} bytes an object");
    assert!(
        finishing < 900,
        "finish peaks at {finishing} bytes an object"
    );
    assert_eq!(ztensor::open(&path).unwrap().len(), OBJECTS);
}
