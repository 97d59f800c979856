//! A v2 root's blobs in a shard obey that shard's rules as the root's own blobs obey the
//! root's: in particular none may overlap the shard's own manifest, whose bytes would
//! otherwise be read as a tensor's.

use std::io::Write;

use ztensor::container::{AtomicFile, BlobWriterV2, ContainerV2, Source};
use ztensor::manifest::{decode_manifest_v2, encode_manifest_v2, DecodeLimits};

#[test]
fn a_part_over_its_shards_own_manifest_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.zt");
    let mut w = ztensor::Writer::create(&src).unwrap();
    w.add("w", &[1024], &vec![1.0f32; 1024]).unwrap();
    w.finish().unwrap();
    let root = dir.path().join("m.zt");
    let options = ztensor::convert::ShardOptions {
        max_shard_size: 1 << 20,
        convert: Default::default(),
        densify: false,
    };
    let written =
        ztensor::convert::write_sharded(&ztensor::open(&src).unwrap(), &root, options).unwrap();
    assert!(ztensor::open(&root).unwrap().verify().is_ok());

    // The shard is a v2 file with a manifest of its own: where is it?
    let shard = written.iter().find(|p| *p != &root).unwrap();
    let c = ContainerV2::parse(Source::map(shard).unwrap(), 1 << 30).unwrap();
    let (m_offset, m_len) = (c.footer().manifest_offset, c.footer().manifest_length);

    // The root, rewritten so that `w`'s part is the shard's manifest bytes.
    let rc = ContainerV2::parse(Source::map(&root).unwrap(), 1 << 30).unwrap();
    let bytes = rc.manifest_bytes().unwrap();
    let mut m =
        decode_manifest_v2(&bytes, rc.footer().manifest_offset, DecodeLimits::default()).unwrap();
    let part = &mut m.objects[0].parts[0];
    assert!(part.shard.is_some());
    part.offset = m_offset;
    part.length = m_len / 4 * 4;
    part.digest = None;
    m.objects[0].shape = vec![m_len / 4].into();
    drop(rc);
    let encoded = encode_manifest_v2(&m).unwrap();
    let mut file = AtomicFile::create(&root).unwrap();
    file.flush().unwrap();
    let blobs = BlobWriterV2::new(file, 65536).unwrap();
    blobs
        .finish(&encoded, ztensor::formats::xxh3_64(&encoded))
        .unwrap()
        .commit()
        .unwrap();

    let e = ztensor::open(&root).unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidFile, "{e}");
    assert!(e.message().contains("in shard"), "{e}");
    assert!(e.message().contains("the manifest"), "{e}");
}
