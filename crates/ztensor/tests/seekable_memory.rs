//! A v2 part whose seek table disagrees with the decoded size its manifest declares is
//! refused before a buffer of that size is allocated: a 1 GiB declaration in a file of a few
//! kilobytes costs nothing. One test in this binary, under the counting allocator.

use std::sync::atomic::Ordering::Relaxed;

use ztensor::container::{BlobWriterV2, ContainerV2, Source};
use ztensor::manifest::{decode_manifest_v2, encode_manifest_v2, DecodeLimits};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{Counting, LIVE, PEAK};

#[global_allocator]
static A: Counting = Counting;

#[test]
fn a_seek_table_that_disagrees_is_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("z.zt");
    let mut w = ztensor::Writer::create(&src).unwrap();
    // Values that do not compress: 64 KiB of zstd may declare 1 GiB without passing the
    // ratio cap checked at open.
    let mut x = 0x9e37_79b9u32;
    let values: Vec<f32> = (0..1 << 14)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            f32::from_bits(x >> 2)
        })
        .collect();
    let options = ztensor::WriteOptions {
        compression: Some(3),
        digest: None,
    };
    w.add_with("w", &[1 << 14], &values, Default::default(), options)
        .unwrap();
    w.finish().unwrap();

    // The same blob, its manifest declaring 1 GiB decoded (and the shape to match).
    let c = ContainerV2::parse(Source::map(&src).unwrap(), 1 << 30).unwrap();
    let bytes = c.manifest_bytes().unwrap();
    let mut m =
        decode_manifest_v2(&bytes, c.footer().manifest_offset, DecodeLimits::default()).unwrap();
    let part = m.objects[0].parts[0].clone();
    let blob =
        std::fs::read(&src).unwrap()[part.offset as usize..][..part.length as usize].to_vec();
    let mut out = BlobWriterV2::new(Vec::new(), 65536).unwrap();
    let at = out.append_blob(&blob).unwrap();
    let p = &mut m.objects[0].parts[0];
    p.offset = at;
    p.decoded_length = Some(1 << 30);
    p.digest = None;
    m.objects[0].shape = vec![1u64 << 28].into();
    let manifest = encode_manifest_v2(&m).unwrap();
    let file = out
        .finish(&manifest, ztensor::formats::xxh3_64(&manifest))
        .unwrap();
    drop(c);

    let r = ztensor::OpenOptions::new().open_bytes(file).unwrap();
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let e = r.read::<f32>("w").unwrap_err();
    let peak = PEAK.load(Relaxed) - base;
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidFile, "{e}");
    assert!(e.message().contains("zstd-seekable"), "{e}");
    assert!(peak < 1 << 20, "{peak} bytes allocated before the refusal");
}
