//! Files written by the original zTensor 2.x (ztensor 2.1.2 on PyPI; fixtures/interop/zt2,
//! regenerated and cross-checked by tools/interop/make_zt2.py) read back the values the
//! original reads from them: names, shapes, types, attributes and every value.

use std::path::{Path, PathBuf};

use half::bf16;
use ztensor::{
    DType, Digest, DigestScope, Encoding, ErrorKind, FileVersion, Format, OpenOptions, Reader,
    Value,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/interop/zt2")
        .join(name)
}

/// Every sample, opened both mapped and unmapped.
fn open_both(name: &str) -> [Reader; 2] {
    [
        ztensor::open(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}")),
        OpenOptions::new()
            .unmapped(true)
            .open(fixture(name))
            .unwrap_or_else(|e| panic!("{name}: {e}")),
    ]
}

/// Every digest of the file verifies, with nothing failing.
fn verifies(r: &Reader, digests: usize) {
    let report = r.verify();
    assert!(report.is_ok(), "{:?}", report.failures);
    assert_eq!(report.checked, digests);
}

#[test]
fn tied_f32_shares_one_blob_and_reads_zero_copy() {
    for r in open_both("01_tied_f32_a4k.zt") {
        assert_eq!(r.version(), &FileVersion::ZTensorV2);
        assert!(r.manifest_hash().is_some());
        assert_eq!(
            r.names().collect::<Vec<_>>(),
            ["bias", "weight", "weight_tied"]
        );
        assert_eq!(&r.read::<f32>("bias").unwrap()[..], &[0.5, -1.0, 2.0]);
        let w = r.object("weight").unwrap();
        assert_eq!(w.shape(), &[2, 3]);
        assert_eq!(w.format, Format::Dense);
        let expect: Vec<f32> = (0..6).map(|i| i as f32).collect();
        assert_eq!(&w.read::<f32>().unwrap()[..], &expect[..]);
        assert_eq!(&r.read::<f32>("weight_tied").unwrap()[..], &expect[..]);
        let (a, b) = (
            r.object("weight").unwrap().components[0].offset,
            r.object("weight_tied").unwrap().components[0].offset,
        );
        assert_eq!(a, b, "identical blobs are shared, and allowed");
        let c = &w.components[0];
        assert_eq!(c.digest_scope, DigestScope::Decoded);
        assert!(matches!(c.digest, Some(Digest::Xxh3(_))));
        if r.source().is_in_memory() {
            let map = r.source().as_slice().unwrap().as_ptr_range();
            let data = w.read::<f32>().unwrap();
            assert!(
                map.contains(&(data.as_ptr() as *const u8)),
                "borrowed from the map"
            );
        }
        verifies(&r, 3);
    }
}

#[test]
fn bf16_bool_fp4_and_attributes() {
    for r in open_both("02_bf16_logical_attrs_a4k.zt") {
        let b = r.object("bf16").unwrap();
        assert_eq!(b.shape(), &[2, 2]);
        assert_eq!(
            &b.read::<bf16>().unwrap()[..],
            &[1.0, -2.0, 0.5, 3.140625].map(bf16::from_f32)
        );
        assert_eq!(b.attributes.get("role"), Some(&Value::Text("demo".into())));
        assert_eq!(b.attributes.get("scale"), Some(&Value::Float(0.25)));
        let mask = r.object("mask").unwrap();
        assert_eq!(mask.element_type().unwrap().dtype, DType::Bool);
        assert_eq!(&mask.read_bool().unwrap()[..], &[true, false, true]);
        let fp4 = r.object("fp4").unwrap();
        assert_eq!(fp4.element_type().unwrap().name(), "f4_e2m1");
        assert_eq!(fp4.shape(), &[5]);
        assert_eq!(&fp4.bytes().unwrap()[..], &[0x21, 0x43, 0x05]);
        // Codes 1..5, low nibble first: 0.5, 1, 1.5, 2, 3.
        assert_eq!(fp4.read_f32().unwrap(), [0.5, 1.0, 1.5, 2.0, 3.0]);
        let a = r.attributes();
        assert_eq!(a.get("format"), Some(&Value::Text("sample".into())));
        assert_eq!(a.get("int"), Some(&Value::Integer(7)));
        assert_eq!(a.get("neg"), Some(&Value::Integer(-3)));
        assert_eq!(a.get("big"), Some(&Value::Integer(1 << 40)));
        assert_eq!(a.get("half"), Some(&Value::Float(1.25)));
        assert_eq!(a.get("single"), Some(&Value::Float(0.5 + 2f64.powi(-20))));
        assert_eq!(a.get("double"), Some(&Value::Float(0.1)));
        assert_eq!(a.get("flag"), Some(&Value::Bool(true)));
        assert_eq!(a.get("none"), Some(&Value::Null));
        assert_eq!(
            a.get("list"),
            Some(&Value::Array(vec![
                Value::Integer(1),
                Value::Text("a".into()),
                Value::Array(vec![Value::Float(2.5), Value::Bool(false)])
            ]))
        );
        assert!(matches!(a.get("map"), Some(Value::Map(m)) if m.len() == 2));
        verifies(&r, 3);
    }
}

#[test]
fn zstd_seekable_decodes_and_its_digest_covers_the_decoded_bytes() {
    for r in open_both("03_zstd_seekable_a4k.zt") {
        let z = r.object("zeros_f32").unwrap();
        assert_eq!(z.shape(), &[1000]);
        let c = &z.components[0];
        assert_eq!(c.encoding, Encoding::ZstdSeekable);
        assert_eq!((c.length, c.decoded_len), (47, Some(4000)));
        assert_eq!(&z.read::<f32>().unwrap()[..], &[0.0f32; 1000][..]);
        assert_eq!(z.read_verified::<f32>().unwrap().len(), 1000);
        verifies(&r, 1);
        // A cap below the declared size refuses before decoding.
        let small = OpenOptions::new()
            .max_decompressed_len(3999)
            .open(fixture("03_zstd_seekable_a4k.zt"))
            .unwrap();
        let e = small.read::<f32>("zeros_f32").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    }
}

#[test]
fn sparse_csr_with_u32_indices_maps_onto_our_csr() {
    for r in open_both("04_sparse_csr_a4k.zt") {
        let o = r.object("csr").unwrap();
        assert_eq!(o.format, Format::SparseCsr);
        assert_eq!(o.shape(), &[2, 3]);
        let csr = o.read_csr::<f32>().unwrap();
        assert_eq!(&csr.values[..], &[1.0, 2.0, 3.0]);
        assert_eq!(&csr.indices[..], &[0, 2, 1]);
        assert_eq!(&csr.indptr[..], &[0, 2, 3]);
        assert_eq!(
            &o.to_dense::<f32>().unwrap()[..],
            &[1.0, 0.0, 2.0, 0.0, 3.0, 0.0]
        );
        // The original exposed a part with the object's shape (8 MB over a 12-byte blob, and
        // a segfault); a part here is its own bytes and elements, nothing more.
        let values = o.component("values").unwrap();
        assert_eq!(values.bytes().unwrap().len(), 12);
        assert_eq!(&values.read::<f32>().unwrap()[..], &[1.0, 2.0, 3.0]);
        assert_eq!(
            &o.component("indices").unwrap().read::<u32>().unwrap()[..],
            &[0, 2, 1]
        );
        verifies(&r, 3);
    }
}

#[test]
fn an_appended_file_means_its_last_footer() {
    for r in open_both("05_appended_a4k.zt") {
        assert_eq!(r.names().collect::<Vec<_>>(), ["first", "second"]);
        assert_eq!(&r.read::<u8>("first").unwrap()[..], &[0, 1, 2, 3]);
        assert_eq!(&r.read::<u8>("second").unwrap()[..], &[4, 5, 6, 7]);
        verifies(&r, 2);
    }
}

#[test]
fn shards_beside_the_root_hold_its_parts() {
    for r in open_both("06_sharded.zt") {
        let names: Vec<&str> = r.shards().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["00001-of-00002", "00002-of-00002"]);
        assert!(!r.shards()[0].data_shard);
        assert!(r.shards()[1].data_shard);
        assert_eq!(r.shards()[1].path, fixture("06_sharded-00002-of-00002.zt"));
        assert_eq!(&r.read::<u8>("embed").unwrap()[..], &[9, 9]);
        assert_eq!(
            &r.read::<f32>("layer0.w").unwrap()[..],
            &[1.0, 2.0, 3.0, 4.0]
        );
        assert_eq!(
            &r.read::<f32>("layer1.w").unwrap()[..],
            &[5.0, 6.0, 7.0, 8.0]
        );
        assert_eq!(r.object("layer1.w").unwrap().components[0].file, 2);
        assert_eq!(
            r.attributes().get("note"),
            Some(&Value::Text("hand-assembled sharded root".into()))
        );
        // Three part digests and two whole-shard sha256 digests.
        verifies(&r, 5);
    }
    // A data shard opened by itself is a file of no objects.
    for r in open_both("06_sharded-00002-of-00002.zt") {
        assert!(r.is_empty());
        assert_eq!(r.manifest_hash(), None);
    }
    // From memory, the shards cannot be found: said so, not guessed.
    let bytes = std::fs::read(fixture("06_sharded.zt")).unwrap();
    let e = OpenOptions::new().open_bytes(bytes).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.message().contains("opened from memory"), "{e}");
}

/// Copies the sharded sample into a fresh folder, so a test can break one piece of it.
fn sharded_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "06_sharded.zt",
        "06_sharded-00001-of-00002.zt",
        "06_sharded-00002-of-00002.zt",
    ] {
        std::fs::copy(fixture(name), dir.path().join(name)).unwrap();
    }
    dir
}

#[test]
fn a_missing_or_resized_shard_is_an_error_naming_it() {
    let dir = sharded_copy();
    let shard = dir.path().join("06_sharded-00002-of-00002.zt");
    std::fs::remove_file(&shard).unwrap();
    let e = ztensor::open(dir.path().join("06_sharded.zt")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert_eq!(e.path(), Some(shard.as_path()));

    let dir = sharded_copy();
    let shard = dir.path().join("06_sharded-00001-of-00002.zt");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes.insert(8, 0);
    std::fs::write(&shard, bytes).unwrap();
    let e = ztensor::open(dir.path().join("06_sharded.zt")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(
        e.message()
            .contains("shard \"00001-of-00002\" is 8337 bytes, but the shard table says 8336"),
        "{e}"
    );
}

#[test]
fn a_changed_shard_of_the_same_size_fails_verify_by_its_digest() {
    let dir = sharded_copy();
    let shard = dir.path().join("06_sharded-00002-of-00002.zt");
    let mut bytes = std::fs::read(&shard).unwrap();
    // Padding between the header and the blob: nothing reads it, only the shard digest
    // covers it.
    bytes[100] ^= 1;
    std::fs::write(&shard, bytes).unwrap();
    let r = ztensor::open(dir.path().join("06_sharded.zt")).unwrap();
    assert_eq!(
        &r.read::<f32>("layer1.w").unwrap()[..],
        &[5.0, 6.0, 7.0, 8.0]
    );
    let report = r.verify();
    assert_eq!(report.failures.len(), 1);
    let e = &report.failures[0];
    assert_eq!(e.kind(), ErrorKind::ChecksumMismatch);
    assert!(
        e.message()
            .starts_with("shard \"00002-of-00002\": digest mismatch"),
        "{e}"
    );
    assert_eq!(e.path(), Some(shard.as_path()));
}

#[test]
fn upgrading_a_v2_file_writes_a_readable_v1_2_file() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "02_bf16_logical_attrs_a4k.zt",
        "03_zstd_seekable_a4k.zt",
        "04_sparse_csr_a4k.zt",
    ] {
        let out = dir.path().join(name);
        let r = ztensor::open(fixture(name)).unwrap();
        let v1_2 = ztensor::ConvertOptions {
            version: ztensor::Version::V1_2,
            ..Default::default()
        };
        ztensor::upgrade(fixture(name), &out, v1_2).unwrap();
        let new = ztensor::open(&out).unwrap();
        assert!(matches!(new.version(), FileVersion::ZTensor(v) if v.minor == 2));
        assert!(new.verify().is_ok(), "{name}");
        for o in r.objects() {
            let (a, b) = (r.object(&o.name).unwrap(), new.object(&o.name).unwrap());
            for c in a.components() {
                let d = b.component(&c.role).unwrap();
                assert_eq!(c.bytes().unwrap(), d.bytes().unwrap(), "{name}/{}", o.name);
                // v1.2 has no xxh3: the digests were written as sha256.
                assert!(d
                    .digest
                    .is_none_or(|d| d.algorithm() == ztensor::DigestAlgorithm::Sha256));
            }
        }
    }
}

#[test]
fn a_verified_read_checks_the_digest_of_the_decoded_bytes() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/invalid/v2_digest_mismatch.zt");
    for (r, copying) in [
        (ztensor::open(&path).unwrap(), false),
        (OpenOptions::new().unmapped(true).open(&path).unwrap(), true),
    ] {
        let w = r.object("w").unwrap();
        // A zero-copy read does not hash; a read that copies anyway does.
        let plain = w.read::<f32>();
        if copying {
            assert_eq!(plain.unwrap_err().kind(), ErrorKind::ChecksumMismatch);
        } else {
            assert_eq!(&plain.unwrap()[..], &[1.0, 2.0]);
        }
        let e = w.read_verified::<f32>().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ChecksumMismatch, "{e}");
        assert_eq!((e.object(), e.component()), (Some("w"), Some("data")));
    }
}
