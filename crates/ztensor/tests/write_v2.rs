//! Writing zTensor v2: the same input as the original's samples gives the same bytes, and
//! everything written reads back through our v2 reader with the same values.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use ztensor::{
    Attributes, ComponentData, DType, ElementType, FileVersion, Format, ObjectData, Value, Version,
    WriteOptions, Writer,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/interop/zt2")
        .join(name)
}

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap()
}

/// Equal bytes, or a panic naming the first difference (never the whole file).
fn same(ours: &[u8], theirs: &[u8]) {
    let first = ours.iter().zip(theirs).position(|(a, b)| a != b);
    assert!(
        first.is_none() && ours.len() == theirs.len(),
        "first difference at {first:?}; lengths {} (ours) and {} (original)",
        ours.len(),
        theirs.len()
    );
}

fn v2(version: Version) -> Writer<Vec<u8>> {
    Writer::new_version(Vec::new(), version).unwrap()
}

fn raw(role: &str, element: ElementType, bytes: Vec<u8>) -> ComponentData<'static> {
    ComponentData {
        role: role.into(),
        element,
        bytes: Cow::Owned(bytes),
    }
}

fn tied(w: &mut Writer<Vec<u8>>) {
    w.add("bias", &[3], &[0.5f32, -1.0, 2.0]).unwrap();
    let weight: Vec<f32> = (0..6).map(|i| i as f32).collect();
    w.add("weight", &[2, 3], &weight).unwrap();
    w.add("weight_tied", &[2, 3], &weight).unwrap();
}

#[test]
fn compact_output_is_the_originals_sample_01_byte_for_byte() {
    let mut w = v2(Version::V2Compact);
    tied(&mut w);
    same(&w.finish().unwrap(), &sample("01_tied_f32_a4k.zt"));
}

#[test]
fn canonical_output_is_the_originals_sample_01() {
    // shared/interop/zt2/01_canonical_f32.zt.gz is too large to commit unpacked; its size and
    // footer (offset 196608, length 296, XXH3 0x454b620051386af7) pin the bytes: the blobs
    // are at 65536 and 131072 with zero padding, and the manifest's hash covers all of it.
    let mut w = v2(Version::V2);
    tied(&mut w);
    let bytes = w.finish().unwrap();
    assert_eq!(bytes.len(), 196_944);
    let footer = &bytes[bytes.len() - 40..];
    assert_eq!(&footer[..8], &196_608u64.to_le_bytes());
    assert_eq!(&footer[8..16], &296u64.to_le_bytes());
    assert_eq!(&footer[16..24], &0x454b_6200_5138_6af7u64.to_le_bytes());
    assert_eq!(&bytes[65536..65548], &bytemuck_f32(&[0.5, -1.0, 2.0]));
    let nonzero = |r: std::ops::Range<usize>| bytes[r].iter().any(|&b| b != 0);
    assert!(!nonzero(8..65536) && !nonzero(65548..131072) && !nonzero(131096..196608));
}

fn bytemuck_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn attributes_bf16_and_logical_types_match_sample_02() {
    let mut w = v2(Version::V2Compact);
    let mut attrs = Attributes::new();
    attrs.insert("format".into(), Value::from("sample"));
    attrs.insert("int".into(), Value::Integer(7));
    attrs.insert("neg".into(), Value::Integer(-3));
    attrs.insert("big".into(), Value::Integer(1 << 40));
    attrs.insert("half".into(), Value::Float(1.25));
    attrs.insert("single".into(), Value::Float(0.5 + 2f64.powi(-20)));
    attrs.insert("double".into(), Value::Float(0.1));
    attrs.insert("flag".into(), Value::Bool(true));
    attrs.insert("none".into(), Value::Null);
    attrs.insert(
        "list".into(),
        Value::Array(vec![
            Value::Integer(1),
            Value::from("a"),
            Value::Array(vec![Value::Float(2.5), Value::Bool(false)]),
        ]),
    );
    let mut map = std::collections::BTreeMap::new();
    map.insert("k".to_owned(), Value::from("v"));
    map.insert("n".to_owned(), Value::Integer(1));
    attrs.insert("map".into(), Value::Map(map));
    w.set_attributes(attrs);
    let mut obj_attrs = Attributes::new();
    obj_attrs.insert("role".into(), Value::from("demo"));
    obj_attrs.insert("scale".into(), Value::Float(0.25));
    // 1.0, -2.0, 0.5, 3.140625 as bf16.
    let bf16: Vec<u8> = [0x3f80u16, 0xc000, 0x3f00, 0x4049]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    w.add_object(
        "bf16",
        ObjectData {
            shape: vec![2, 2],
            format: Format::Dense,
            attributes: obj_attrs,
            components: vec![raw("data", ElementType::plain(DType::BF16), bf16)],
        },
    )
    .unwrap();
    w.add_bool("mask", &[3], &[true, false, true]).unwrap();
    let f4 = ElementType::with_type(DType::U8, Some("f4_e2m1")).unwrap();
    w.add_object(
        "fp4",
        ObjectData {
            shape: vec![5],
            format: Format::Dense,
            attributes: Attributes::new(),
            components: vec![raw("data", f4, vec![0x21, 0x43, 0x05])],
        },
    )
    .unwrap();
    same(
        &w.finish().unwrap(),
        &sample("02_bf16_logical_attrs_a4k.zt"),
    );
}

#[cfg(feature = "zstd")]
#[test]
fn seekable_zstd_matches_sample_03() {
    let mut w = v2(Version::V2Compact);
    w.set_options(WriteOptions {
        compression: Some(3),
        digest: None,
    });
    w.add("zeros_f32", &[1000], &[0f32; 1000]).unwrap();
    same(&w.finish().unwrap(), &sample("03_zstd_seekable_a4k.zt"));
}

#[test]
fn csr_parts_in_name_order_match_sample_04() {
    let mut w = v2(Version::V2Compact);
    let u32s = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    w.add_object(
        "csr",
        ObjectData {
            shape: vec![2, 3],
            format: Format::SparseCsr,
            attributes: Attributes::new(),
            components: vec![
                raw(
                    "values",
                    ElementType::plain(DType::F32),
                    bytemuck_f32(&[1.0, 2.0, 3.0]),
                ),
                raw("indptr", ElementType::plain(DType::U32), u32s(&[0, 2, 3])),
                raw("indices", ElementType::plain(DType::U32), u32s(&[0, 2, 1])),
            ],
        },
    )
    .unwrap();
    same(&w.finish().unwrap(), &sample("04_sparse_csr_a4k.zt"));
}

#[test]
fn an_ordinary_shard_matches_sample_06_shard_1() {
    let mut w = v2(Version::V2Compact);
    w.add("layer0.w", &[2, 2], &[1f32, 2.0, 3.0, 4.0]).unwrap();
    same(
        &w.finish().unwrap(),
        &sample("06_sharded-00001-of-00002.zt"),
    );
}

#[test]
fn every_dtype_round_trips_through_the_v2_reader() {
    let dir = tempfile::tempdir().unwrap();
    for (version, compression) in [
        (Version::V2, None),
        (Version::V2Compact, None),
        (Version::V2Compact, Some(3)),
    ] {
        if compression.is_some() && !cfg!(feature = "zstd") {
            continue;
        }
        let path = dir.path().join(format!("{}.zt", version.name()));
        let mut w = Writer::create_version(&path, version, ztensor::Durability::Unsynced).unwrap();
        w.set_options(WriteOptions {
            compression,
            digest: None,
        });
        w.add("f64", &[2], &[1.5f64, -2.0]).unwrap();
        w.add("f32", &[2, 2], &[1f32, 2.0, 3.0, 4.0]).unwrap();
        w.add("f16", &[1], &[half::f16::from_f32(0.5)]).unwrap();
        w.add("bf16", &[1], &[half::bf16::from_f32(-3.0)]).unwrap();
        w.add("i64", &[1], &[i64::MIN]).unwrap();
        w.add("i32", &[1], &[-7i32]).unwrap();
        w.add("i16", &[1], &[-8i16]).unwrap();
        w.add("i8", &[3], &[-1i8, 0, 1]).unwrap();
        w.add("u64", &[1], &[u64::MAX]).unwrap();
        w.add("u32", &[1], &[9u32]).unwrap();
        w.add("u16", &[1], &[10u16]).unwrap();
        w.add("u8", &[0], &[] as &[u8]).unwrap();
        w.add("scalar", &[], &[42u8]).unwrap();
        w.add_bool("bool", &[2], &[false, true]).unwrap();
        w.set_attribute("note", "round trip");
        w.finish().unwrap();

        let r = ztensor::open(&path).unwrap();
        assert_eq!(r.version(), &FileVersion::ZTensorV2);
        assert!(r.verify().is_ok());
        assert_eq!(&r.read::<f64>("f64").unwrap()[..], &[1.5, -2.0]);
        assert_eq!(&r.read::<f32>("f32").unwrap()[..], &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(r.read::<half::f16>("f16").unwrap()[0].to_f32(), 0.5);
        assert_eq!(r.read::<half::bf16>("bf16").unwrap()[0].to_f32(), -3.0);
        assert_eq!(&r.read::<i64>("i64").unwrap()[..], &[i64::MIN]);
        assert_eq!(&r.read::<i32>("i32").unwrap()[..], &[-7]);
        assert_eq!(&r.read::<i16>("i16").unwrap()[..], &[-8]);
        assert_eq!(&r.read::<i8>("i8").unwrap()[..], &[-1, 0, 1]);
        assert_eq!(&r.read::<u64>("u64").unwrap()[..], &[u64::MAX]);
        assert_eq!(&r.read::<u32>("u32").unwrap()[..], &[9]);
        assert_eq!(&r.read::<u16>("u16").unwrap()[..], &[10]);
        assert!(r.read::<u8>("u8").unwrap().is_empty());
        assert_eq!(&r.read::<u8>("scalar").unwrap()[..], &[42]);
        assert_eq!(&r.object("bool").unwrap().bytes().unwrap()[..], &[0, 1]);
        assert_eq!(r.attributes().get("note"), Some(&Value::from("round trip")));
        for o in r.objects() {
            let c = r.object(&o.name).unwrap();
            let d = c.component("data").unwrap().digest.unwrap();
            assert_eq!(d.algorithm(), ztensor::DigestAlgorithm::Xxh3, "{}", o.name);
        }
    }
}

#[test]
fn output_is_deterministic_and_identical_parts_share_a_blob() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str| {
        let path = dir.path().join(name);
        let mut w =
            Writer::create_version(&path, Version::V2Compact, ztensor::Durability::Unsynced)
                .unwrap();
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        w.add("a", &[big.len() as u64], &big).unwrap();
        w.add("b", &[big.len() as u64], &big).unwrap();
        let mut other = big.clone();
        other[2_500_000] ^= 1; // same length, differs past the first MiB
        w.add("c", &[other.len() as u64], &other).unwrap();
        w.finish().unwrap();
        std::fs::read(path).unwrap()
    };
    let (x, y) = (write("x.zt"), write("y.zt"));
    assert_eq!(x, y);
    let r = ztensor::open(dir.path().join("x.zt")).unwrap();
    let at = |n: &str| r.object(n).unwrap().component("data").unwrap().offset;
    assert_eq!(at("a"), at("b"));
    assert_ne!(at("a"), at("c"));
    assert!(r.verify().is_ok());
}

/// A sink in memory that counts the bytes the writer reads back to compare blobs.
struct CountingSink {
    bytes: Vec<u8>,
    read_back: u64,
}

impl std::io::Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl ztensor::Sink for CountingSink {
    type Output = CountingSink;
    fn complete(self) -> ztensor::Result<Self> {
        Ok(self)
    }
    fn read_back(&mut self, offset: u64, buf: &mut [u8]) -> ztensor::Result<bool> {
        self.read_back += buf.len() as u64;
        self.bytes.read_back(offset, buf)
    }
}

/// Parts of one length whose first 64 KiB are the same (rows of zeros, then data) share the
/// sharing key; only the ones with the same digest are compared byte for byte. Compared with
/// every earlier one, 48 parts read back 48 x 47 / 2 parts' worth: a file of such tensors
/// took time quadratic in their count to write.
#[test]
fn parts_that_only_start_alike_are_not_compared_and_identical_ones_still_share() {
    let part = |i: u32| -> Vec<f32> {
        let mut p = vec![0f32; 32 << 10]; // 128 KiB, its first 64 KiB zeros like every other
        p[(32 << 10) - 1] = i as f32;
        p
    };
    let len = (128u64) << 10;
    let sha256 = WriteOptions {
        digest: Some(ztensor::DigestAlgorithm::Sha256),
        ..Default::default()
    };
    let write = |more: &dyn Fn(&mut Writer<CountingSink>)| {
        let sink = CountingSink {
            bytes: Vec::new(),
            read_back: 0,
        };
        let mut w = Writer::new_version(sink, Version::V2Compact).unwrap();
        for i in 0..48 {
            w.add(&format!("p{i:02}"), &[32 << 10], &part(i)).unwrap();
        }
        more(&mut w);
        let out = w.finish().unwrap();
        let read_back = out.read_back;
        let r = ztensor::OpenOptions::new().open_bytes(out.bytes).unwrap();
        assert!(r.verify().is_ok());
        (r, read_back)
    };
    let at = |r: &ztensor::Reader, n: &str| r.object(n).unwrap().component("data").unwrap().offset;

    // Identical to p00 and p01: each compared with its twin alone.
    let (r, read_back) = write(&|w| {
        w.add("same_as_p00", &[32 << 10], &part(0)).unwrap();
        w.add("same_as_p01", &[32 << 10], &part(1)).unwrap();
    });
    assert_eq!(read_back, 2 * len);
    assert_eq!(at(&r, "same_as_p00"), at(&r, "p00"));
    assert_eq!(at(&r, "same_as_p01"), at(&r, "p01"));
    let offsets: std::collections::BTreeSet<u64> =
        (0..48).map(|i| at(&r, &format!("p{i:02}"))).collect();
    assert_eq!(offsets.len(), 48);
    assert_eq!(
        r.object("p47").unwrap().read::<f32>().unwrap()[(32 << 10) - 1],
        47.0
    );

    // A part with a digest of another algorithm is hashed by the earlier blobs' algorithm
    // too, and compared with its twin alone; a twin of a part with that other digest finds
    // it by that one.
    let (r, read_back) = write(&|w| {
        w.add_with("sha_p00", &[32 << 10], &part(0), Attributes::new(), sha256)
            .unwrap();
        w.add_with("sha_new", &[32 << 10], &part(99), Attributes::new(), sha256)
            .unwrap();
        w.add("same_as_sha_new", &[32 << 10], &part(99)).unwrap();
    });
    assert_eq!(read_back, 2 * len);
    assert_eq!(at(&r, "sha_p00"), at(&r, "p00"));
    assert_eq!(at(&r, "same_as_sha_new"), at(&r, "sha_new"));
    let offsets: std::collections::BTreeSet<u64> =
        (0..48).map(|i| at(&r, &format!("p{i:02}"))).collect();
    assert!(!offsets.contains(&at(&r, "sha_new")));
    assert_eq!(
        r.object("sha_new").unwrap().read::<f32>().unwrap()[(32 << 10) - 1],
        99.0
    );
}

/// The padding between 64 KiB boundaries is skipped over in a file (a hole), not written:
/// the file reads byte for byte as the same writer's output in memory, blobs shared across a
/// hole included, and takes about a page per small tensor on disk, not 64 KiB.
#[test]
fn a_canonical_file_has_holes_for_its_padding_and_the_same_bytes() {
    fn objects<W: ztensor::Sink>(w: &mut Writer<W>) {
        w.add("bias", &[3], &[0.5f32, -1.0, 2.0]).unwrap();
        let weight: Vec<f32> = (0..6).map(|i| i as f32).collect();
        w.add("weight", &[2, 3], &weight).unwrap();
        w.add("weight_tied", &[2, 3], &weight).unwrap(); // read back across a hole
        for i in 0..64u32 {
            w.add(&format!("z{i:02}"), &[2], &[i, i + 1]).unwrap();
        }
    }
    let mut memory = v2(Version::V2);
    objects(&mut memory);
    let expected = memory.finish().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holes.zt");
    let mut file =
        Writer::create_version(&path, Version::V2, ztensor::Durability::Unsynced).unwrap();
    objects(&mut file);
    file.finish().unwrap();
    same(&std::fs::read(&path).unwrap(), &expected);
    // 66 blobs (weight_tied shares weight's) after the 64 KiB header block, then the manifest.
    assert_eq!(expected.len(), 67 * 65536 + manifest_len(&expected) + 40);

    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let allocated = std::fs::metadata(&path).unwrap().blocks() * 512;
        // 66 blobs and a manifest of a page or two each, against 4.4 MB of length: a file
        // system without holes (none that Linux tests run on) would allocate all of it.
        assert!(
            allocated < expected.len() as u64 / 4,
            "{allocated} bytes allocated for a file of {}",
            expected.len()
        );
    }
}

/// The manifest's length, from a v2 footer.
fn manifest_len(file: &[u8]) -> usize {
    let footer = &file[file.len() - 40..];
    u64::from_le_bytes(footer[8..16].try_into().unwrap()) as usize
}

#[test]
fn what_v2_cannot_hold_is_refused() {
    let mut w = v2(Version::V2);
    w.set_options(WriteOptions {
        compression: None,
        digest: Some(ztensor::DigestAlgorithm::Crc32c),
    });
    let e = w.add("x", &[1], &[1f32]).unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidArgument);
    let mut w = v2(Version::V2);
    let e = w
        .add_object(
            "q",
            ObjectData {
                shape: vec![2],
                format: Format::Dense,
                attributes: Attributes::new(),
                components: vec![raw("values", ElementType::plain(DType::F32), vec![0; 8])],
            },
        )
        .unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidArgument);
}

#[test]
fn an_attribute_name_v2_refuses_is_the_callers_error() {
    // A file attribute and an object attribute named "" (v2's readers, the original's too,
    // refuse the file): the writer says so as an argument error, naming the object.
    let mut w = v2(Version::V2);
    w.set_attribute("", 1);
    w.add("x", &[1], &[1f32]).unwrap();
    let e = w.finish().unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidArgument, "{e}");
    assert_eq!(e.message(), "attribute name is empty");
    let mut w = v2(Version::V2);
    let mut attributes = Attributes::new();
    attributes.insert("a\0b".into(), Value::Integer(1));
    let element = ElementType::plain(DType::F32);
    let data = ObjectData {
        shape: vec![1],
        format: Format::Dense,
        attributes,
        components: vec![raw("data", element, vec![0; 4])],
    };
    w.add_object("x", data).unwrap();
    let e = w.finish().unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidArgument, "{e}");
    assert_eq!(e.object(), Some("x"));
    assert!(e.message().contains("contains NUL"), "{e}");
}

#[test]
fn a_sharded_model_reads_as_its_source() {
    use ztensor::convert::{write_sharded, ShardOptions};
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.zt");
    let mut w = Writer::create_version(&src, Version::V1_2, ztensor::Durability::Unsynced).unwrap();
    w.set_attribute("note", "sharded");
    for i in 0..5u8 {
        let data: Vec<u8> = (0..100).map(|j| j ^ i).collect();
        w.add(&format!("t{i}"), &[100], &data).unwrap();
    }
    w.finish().unwrap();
    let source = ztensor::open(&src).unwrap();
    let root = dir.path().join("model.zt");
    let options = ShardOptions {
        max_shard_size: 200,
        convert: ztensor::ConvertOptions {
            version: Version::V2Compact,
            durability: ztensor::Durability::Unsynced,
            ..Default::default()
        },
        densify: false,
    };
    let shards = write_sharded(&source, &root, options).unwrap();
    assert_eq!(shards.len(), 3, "two objects of 100 bytes a shard");
    assert!(shards[2].ends_with("model-00003-of-00003.zt"));
    let r = ztensor::open(&root).unwrap();
    assert!(r.verify().is_ok());
    assert_eq!(r.attributes().get("note"), Some(&Value::from("sharded")));
    for o in source.objects() {
        let (a, b) = (source.object(&o.name).unwrap(), r.object(&o.name).unwrap());
        assert_eq!(a.bytes().unwrap(), b.bytes().unwrap(), "{}", o.name);
    }
    // Each shard is an ordinary file of its own.
    let s = ztensor::open(&shards[0]).unwrap();
    assert_eq!(s.names().collect::<Vec<_>>(), ["t0", "t1"]);
    // v1.2 has no shards.
    let v1 = ShardOptions {
        convert: ztensor::ConvertOptions {
            version: Version::V1_2,
            ..Default::default()
        },
        ..options
    };
    assert!(write_sharded(&source, dir.path().join("x.zt"), v1).is_err());
}
