//! Our writer and reader together: round trips, determinism, zero copy, crash safety, bounds.

use std::borrow::Cow;

use half::{bf16, f16};
use ztensor::{
    Complex, ComponentData, DigestAlgorithm, ErrorKind, Format, ObjectData, OpenOptions,
    ReadOptions, Value, WriteOptions,
};

fn write_sample(options: WriteOptions) -> Vec<u8> {
    let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
    w.set_options(options);
    w.set_attribute("framework", "test")
        .set_attribute("n", -3i64);
    w.add("f32", &[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])
        .unwrap();
    w.add("f64", &[], &[0.5f64]).unwrap();
    w.add("f16", &[2], &[f16::from_f32(1.5), f16::from_f32(-2.0)])
        .unwrap();
    w.add("bf16", &[1], &[bf16::from_f32(3.0)]).unwrap();
    w.add("i8", &[3], &[-1i8, 0, 1]).unwrap();
    w.add("u64", &[2], &[u64::MAX, 0]).unwrap();
    w.add("empty", &[0, 4], &[] as &[i32]).unwrap();
    w.add_bool("mask", &[3], &[true, false, true]).unwrap();
    w.add(
        "c64",
        &[1],
        &[Complex {
            re: 1.0f32,
            im: -1.0,
        }],
    )
    .unwrap();
    w.finish().unwrap()
}

#[test]
fn round_trip_every_option() {
    for compression in [None, Some(3)] {
        for digest in [
            None,
            Some(DigestAlgorithm::Crc32c),
            Some(DigestAlgorithm::Sha256),
        ] {
            let bytes = write_sample(WriteOptions {
                compression,
                digest,
            });
            let r = OpenOptions::new().open_bytes(bytes).unwrap();
            assert_eq!(r.attributes()["n"], Value::Integer(-3));
            assert_eq!(
                &r.object("f32").unwrap().read_verified::<f32>().unwrap()[..],
                &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
            );
            assert_eq!(&r.read::<f64>("f64").unwrap()[..], &[0.5]);
            assert_eq!(r.read::<f16>("f16").unwrap()[1], f16::from_f32(-2.0));
            assert_eq!(&r.read::<bf16>("bf16").unwrap()[..], &[bf16::from_f32(3.0)]);
            assert_eq!(&r.read::<i8>("i8").unwrap()[..], &[-1, 0, 1]);
            assert_eq!(&r.read::<u64>("u64").unwrap()[..], &[u64::MAX, 0]);
            assert!(r.read::<i32>("empty").unwrap().is_empty());
            assert_eq!(
                &r.object("mask").unwrap().read_bool().unwrap()[..],
                &[true, false, true]
            );
            assert_eq!(
                &r.read::<Complex<f32>>("c64").unwrap()[..],
                &[Complex { re: 1.0, im: -1.0 }]
            );
            let report = r.verify();
            assert!(report.is_ok());
            assert_eq!(report.checked, if digest.is_some() { 9 } else { 0 });
        }
    }
}

#[test]
fn writing_twice_gives_identical_bytes() {
    let opts = WriteOptions {
        compression: Some(5),
        digest: Some(DigestAlgorithm::Sha256),
    };
    assert_eq!(write_sample(opts), write_sample(opts));
    assert_eq!(
        write_sample(WriteOptions::default()),
        write_sample(WriteOptions::default())
    );
}

#[test]
fn raw_f32_from_a_mapped_file_points_into_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zt");
    let data: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let mut w =
        ztensor::Writer::create_version(&path, ztensor::Version::V1_2, ztensor::Durability::Synced)
            .unwrap();
    w.add("x", &[10, 100], &data).unwrap();
    w.finish().unwrap();

    let r = ztensor::open(&path).unwrap();
    let map = r.source().as_slice().unwrap();
    let map_range = map.as_ptr_range();
    let x = r.read::<f32>("x").unwrap();
    let Cow::Borrowed(slice) = x else {
        panic!("a raw little-endian read must borrow")
    };
    let comp = r.object("x").unwrap().component("data").unwrap();
    assert_eq!(
        slice.as_ptr().cast::<u8>(),
        map[comp.offset as usize..].as_ptr(),
        "the slice starts at the blob"
    );
    assert!(map_range.contains(&slice.as_ptr().cast()));
    assert_eq!(slice, &data[..]);

    // Without a map the same read owns its buffer.
    let r = OpenOptions::new().unmapped(true).open(&path).unwrap();
    assert!(matches!(r.read::<f32>("x").unwrap(), Cow::Owned(_)));
}

#[test]
fn an_unfinished_writer_leaves_the_old_file_and_no_stray_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.zt");
    let mut w =
        ztensor::Writer::create_version(&path, ztensor::Version::V1_2, ztensor::Durability::Synced)
            .unwrap();
    w.add("old", &[1], &[1u8]).unwrap();
    w.finish().unwrap();
    let old = std::fs::read(&path).unwrap();

    let mut w =
        ztensor::Writer::create_version(&path, ztensor::Version::V1_2, ztensor::Durability::Synced)
            .unwrap();
    w.add("new", &[1 << 16], &vec![0u8; 1 << 16]).unwrap();
    drop(w);
    assert_eq!(std::fs::read(&path).unwrap(), old);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["m.zt"]);
}

#[test]
fn writer_refuses_bad_arguments() {
    let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
    let e = w.add("x", &[2, 2], &[1.0f32; 3]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(
        e.to_string()
            .contains("12 bytes of data, but shape [2, 2] of f32 takes 16"),
        "{e}"
    );
    w.add("x", &[1], &[1.0f32]).unwrap();
    assert_eq!(
        w.add("x", &[1], &[1.0f32]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        w.add("", &[1], &[1.0f32]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let bad_bool = ObjectData {
        shape: vec![1],
        format: Format::Dense,
        attributes: Default::default(),
        components: vec![ComponentData {
            role: "data".into(),
            element: ztensor::ElementType::plain(ztensor::DType::Bool),
            bytes: Cow::Borrowed(&[2u8]),
        }],
    };
    assert_eq!(
        w.add_object("b", bad_bool).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

/// Builds a v1.2 file whose one zstd component declares `declared` decompressed bytes.
fn zstd_file(payload: &[u8], declared: u64) -> Vec<u8> {
    use ztensor::manifest::{Component, Manifest, Object};
    let z = ztensor::formats::zstd_compress(payload, 19).unwrap();
    let mut blobs =
        ztensor::container::BlobWriter::new(Vec::new(), ztensor::container::ContainerVersion::V1)
            .unwrap();
    let offset = blobs.append_blob(&z).unwrap();
    let mut m = Manifest {
        version: "1.2.0".into(),
        ..Default::default()
    };
    let mut o = Object {
        shape: vec![declared],
        format: "dense".into(),
        ..Default::default()
    };
    o.components.insert(
        "data".into(),
        Component {
            dtype: "u8".into(),
            offset,
            length: z.len() as u64,
            uncompressed_length: Some(declared),
            encoding: Some("zstd".into()),
            ..Default::default()
        },
    );
    m.objects.insert("z".into(), o);
    blobs.finish(&m.encode()).unwrap()
}

#[test]
fn zstd_past_its_declared_length_or_over_the_cap_is_an_error() {
    // A 16 MiB bomb declared as 1 KiB: fails with only 1 KiB allocated for output.
    let bomb = zstd_file(&vec![0u8; 16 << 20], 1024);
    let r = OpenOptions::new().open_bytes(bomb).unwrap();
    let e = r.read::<u8>("z").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile);
    assert!(
        e.message()
            .contains("inflates past its declared length of 1024"),
        "{e}"
    );

    // Declared above the cap: refused before allocating.
    let big = zstd_file(&[1u8; 4096], 4096);
    let r = OpenOptions::new()
        .max_decompressed_len(4095)
        .open_bytes(big.clone())
        .unwrap();
    let e = r.read::<u8>("z").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    assert_eq!((e.object(), e.component()), (Some("z"), Some("data")));
    assert!(OpenOptions::new()
        .open_bytes(big)
        .unwrap()
        .read::<u8>("z")
        .is_ok());

    // Fewer bytes than declared: never silently zero-padded.
    let short = zstd_file(&[1u8; 100], 101);
    let e = OpenOptions::new()
        .open_bytes(short)
        .unwrap()
        .read::<u8>("z")
        .unwrap_err();
    assert!(e.message().contains("fewer than the declared 101"), "{e}");
}

#[test]
fn a_wrong_digest_fails_verified_reads_on_every_path() {
    let mut bytes = write_sample(WriteOptions {
        compression: None,
        digest: Some(DigestAlgorithm::Crc32c),
    });
    let r = OpenOptions::new().open_bytes(bytes.clone()).unwrap();
    let off = r.object("f32").unwrap().components[0].offset as usize;
    bytes[off] ^= 1;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.zt");
    std::fs::write(&path, &bytes).unwrap();
    for (r, copying) in [
        (ztensor::open(&path).unwrap(), false),
        (OpenOptions::new().unmapped(true).open(&path).unwrap(), true),
    ] {
        // Zero-copy reads of the map do not hash; positional reads copy every byte anyway,
        // and check what they copy.
        let plain = r.read::<f32>("f32");
        assert_eq!(plain.is_ok(), !copying, "{plain:?}");
        let e = r
            .object("f32")
            .unwrap()
            .read_with::<f32>(ReadOptions::verified())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ChecksumMismatch);
        assert_eq!(e.object(), Some("f32"));
        let report = r.verify();
        assert_eq!(report.failures.len(), 1);
    }
}

#[test]
fn read_into_reuses_the_buffer_on_every_path() {
    let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
    w.add("a", &[4], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    w.set_options(WriteOptions {
        compression: Some(3),
        digest: None,
    });
    w.add("b", &[2], &[5.0f32, 6.0]).unwrap();
    let bytes = w.finish().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.zt");
    std::fs::write(&path, &bytes).unwrap();
    for r in [
        OpenOptions::new().open(&path).unwrap(),
        OpenOptions::new().unmapped(true).open(&path).unwrap(),
    ] {
        let mut buf: Vec<f32> = Vec::with_capacity(16);
        let ptr = buf.as_ptr();
        r.object("a").unwrap().read_into(&mut buf).unwrap();
        assert_eq!(buf, [1.0, 2.0, 3.0, 4.0]);
        r.object("b").unwrap().read_into(&mut buf).unwrap();
        assert_eq!(buf, [5.0, 6.0]);
        assert_eq!(buf.as_ptr(), ptr, "no reallocation");
        let mut wrong: Vec<f64> = Vec::new();
        assert_eq!(
            r.object("a")
                .unwrap()
                .read_into(&mut wrong)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidArgument
        );
    }
    // Legacy big-endian data comes out swapped here too.
    let r = ztensor::open(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/interop/v014_rust.zt"
    ))
    .unwrap();
    let mut buf = Vec::new();
    r.object("be_f32")
        .unwrap()
        .read_into::<f32>(&mut buf)
        .unwrap();
    assert_eq!(buf, (0..12).map(|i| i as f32).collect::<Vec<_>>());
}

#[test]
fn read_chunked_hands_out_every_element_in_order_on_every_path() {
    let values: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
    w.add("raw", &[1000], &values).unwrap();
    w.set_options(WriteOptions {
        compression: Some(3),
        digest: None,
    });
    w.add("zstd", &[1000], &values).unwrap();
    let bytes = w.finish().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.zt");
    std::fs::write(&path, &bytes).unwrap();
    for unmapped in [false, true] {
        let r = OpenOptions::new().unmapped(unmapped).open(&path).unwrap();
        for name in ["raw", "zstd"] {
            // 1000 elements in pieces of 7 (a short last piece), 1000 and the default.
            for capacity in [7usize, 1000, 0] {
                let mut buf: Vec<f32> = Vec::with_capacity(capacity);
                let (mut got, mut pieces) = (Vec::new(), Vec::new());
                r.object(name)
                    .unwrap()
                    .read_chunked(&mut buf, |piece| {
                        pieces.push(piece.len());
                        got.extend_from_slice(piece);
                        Ok(())
                    })
                    .unwrap();
                assert_eq!(
                    got, values,
                    "{name} unmapped={unmapped} capacity={capacity}"
                );
                if capacity == 7 {
                    assert_eq!(pieces.len(), 143, "{name}: pieces of at most 7");
                    assert_eq!(pieces.last(), Some(&6));
                }
            }
        }
        // The consumer's error ends the read.
        let mut calls = 0;
        let raw = r.object("raw").unwrap();
        let e = raw
            .read_chunked(&mut Vec::<f32>::with_capacity(10), |_| {
                calls += 1;
                Err(ztensor::Error::argument("stop"))
            })
            .unwrap_err();
        assert_eq!((calls, e.kind()), (1, ErrorKind::InvalidArgument));
        let wrong = raw.read_chunked(&mut Vec::<f64>::new(), |_| Ok(()));
        assert_eq!(wrong.unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
    // Legacy big-endian data comes out swapped.
    let legacy = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/interop/v014_rust.zt"
    );
    let r = OpenOptions::new().unmapped(true).open(legacy).unwrap();
    let name = "be_f32";
    let mut got = Vec::new();
    r.object(name)
        .unwrap()
        .read_chunked::<f32>(&mut Vec::with_capacity(5), |p| {
            got.extend_from_slice(p);
            Ok(())
        })
        .unwrap();
    assert_eq!(got, *r.read::<f32>(name).unwrap());
    assert_eq!(got.first(), Some(&0.0));
}

#[test]
fn populated_maps_read_the_same_bytes_and_say_so() {
    // 40 MiB: more than one step of the populating thread.
    let big: Vec<u32> = (0..10u32 << 20).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.zt");
    let mut w =
        ztensor::Writer::create_version(&path, ztensor::Version::V1_2, ztensor::Durability::Synced)
            .unwrap();
    w.add("big", &[big.len() as u64], &big).unwrap();
    w.add("small", &[3], &[1.5f32, 2.5, 3.5]).unwrap();
    w.finish().unwrap();
    let populated = OpenOptions::new().populate(true).open(&path).unwrap();
    let plain = ztensor::open(&path).unwrap();
    let shown = format!("{:?}", populated.source());
    assert!(shown.contains("populated_in_background: true"), "{shown}");
    assert!(format!("{:?}", plain.source()).contains("populated_in_background: false"));
    assert_eq!(*populated.read::<u32>("big").unwrap(), *big);
    assert_eq!(*populated.read::<f32>("small").unwrap(), [1.5, 2.5, 3.5]);
    // Dropping a reader while its thread may still be populating is fine, and so is reading
    // the file again afterwards.
    drop(populated);
    let again = OpenOptions::new().populate(true).open(&path).unwrap();
    drop(again);
    assert_eq!(*plain.read::<u32>("big").unwrap(), *big);
    // Unmapped readers ignore the option.
    let unmapped = OpenOptions::new()
        .unmapped(true)
        .populate(true)
        .open(&path)
        .unwrap();
    assert!(!unmapped.source().is_in_memory());
}

/// A file large enough for the read-ahead (16 MiB and more): every way of reading it, in every
/// order, hands out the bytes written, and the hints it sends (the map's prefetching thread)
/// end with the reader.
#[test]
fn reads_of_a_large_mapped_file_in_any_order_see_the_bytes_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.zt");
    let mut w =
        ztensor::Writer::create_version(&path, ztensor::Version::V1_2, ztensor::Durability::Synced)
            .unwrap();
    // Written in an order that is neither name order nor the reverse.
    let count = 48u32;
    let names: Vec<String> = (0..count)
        .map(|i| format!("t{}", (i * 7) % count))
        .collect();
    let values = |name: &str| -> Vec<u32> {
        let seed: u32 = name[1..].parse().unwrap();
        (0..(128 << 10))
            .map(|k| k ^ seed.wrapping_mul(0x9E37_79B9))
            .collect()
    };
    for n in &names {
        w.add(n, &[128 << 10], &values(n)).unwrap();
    }
    w.finish().unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() >= 24 << 20);

    let r = ztensor::open(&path).unwrap();
    // By name, in name order (a stream the read-ahead follows).
    for name in r.names() {
        assert_eq!(
            &r.read::<u32>(name).unwrap()[..],
            &values(name)[..],
            "{name}"
        );
    }
    // In file order.
    for o in &r {
        assert_eq!(
            &o.read::<u32>().unwrap()[..],
            &values(o.name())[..],
            "{}",
            o.name()
        );
    }
    // In an order that follows neither.
    for i in (0..count).rev().step_by(3) {
        let name = format!("t{i}");
        assert_eq!(&r.read::<u32>(&name).unwrap()[..], &values(&name)[..]);
    }
    // On every core.
    let same = r.parallel_objects(|o| o.read::<u32>().map(|v| v[..] == values(o.name())[..]));
    assert!(same.into_iter().all(|s| s.unwrap()));
    drop(r);
}
