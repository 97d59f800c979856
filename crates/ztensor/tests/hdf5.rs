//! HDF5 files written by h5py and Keras 3 (tools/interop/make_hdf5.py): every dataset of
//! numbers reads as h5py reads it, byte for byte (fixtures/interop/hdf5/expected.json), mapped
//! and unmapped, chunked ones included (gzip, shuffle, fletcher32, edge chunks, chunks never
//! written; every chunk index: v1 and v2 B-trees, fixed and extensible arrays, paged ones);
//! strings and compounds are listed and skipped; a filter we do not decode is named; Blosc2
//! chunks from three writers; external
//! links are followed inside the folder and named where not; attributes, soft links and Keras
//! archives.

#[path = "support/expected.rs"]
mod expected;

use std::path::{Path, PathBuf};

use ztensor::{FileVersion, OpenOptions, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/hdf5")
}

/// The fixtures' datasets whose chunks hold Zstandard streams (its own filter, Blosc's and
/// bitshuffle's codec): a build without the `zstd` feature lists them, and reading one says
/// that the build has no zstd.
const ZSTD_DATASETS: [&str; 3] = ["/zstd", "/blosc_zstd", "/bitshuffle_zstd"];

/// Reads every byte of `name`, or, in a build without the `zstd` feature, checks that a
/// dataset of [`ZSTD_DATASETS`] refuses for that reason. Whether it read.
fn read_unless_without_zstd(r: &ztensor::Reader, name: &str) -> bool {
    if cfg!(not(feature = "zstd")) && ZSTD_DATASETS.contains(&name) {
        let e = r.object(name).unwrap().bytes().unwrap_err();
        assert!(e.message().contains("zstd"), "{name}: {e}");
        return false;
    }
    r.object(name)
        .unwrap()
        .bytes()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    true
}

fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_dataset_reads_as_h5py_reads_it() {
    let expected = expected();
    let mut checked = 0;
    for (file, datasets) in expected["files"].as_object().unwrap() {
        for unmapped in [false, true] {
            let r = OpenOptions::new()
                .unmapped(unmapped)
                .open(dir().join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            match file.as_str() {
                "model.keras" => assert_eq!(r.version(), &FileVersion::Keras),
                "h5py_latest.h5" => assert_eq!(r.version(), &FileVersion::Hdf5 { superblock: 3 }),
                _ => assert_eq!(r.version(), &FileVersion::Hdf5 { superblock: 0 }),
            }
            let datasets = datasets.as_object().unwrap();
            let skipped: Vec<&str> = expected["skipped"][file.as_str()]
                .as_array()
                .map_or(Vec::new(), |a| {
                    a.iter().map(|v| v.as_str().unwrap()).collect()
                });
            let unread: Vec<&str> = expected["unread"][file.as_str()]
                .as_array()
                .map_or(Vec::new(), |a| {
                    a.iter().map(|v| v.as_str().unwrap()).collect()
                });
            assert_eq!(
                r.len(),
                datasets.len() + skipped.len() + unread.len(),
                "{file}"
            );
            for (name, want) in datasets {
                if cfg!(not(feature = "zstd")) && ZSTD_DATASETS.contains(&name.as_str()) {
                    read_unless_without_zstd(&r, name);
                    continue;
                }
                expected::check_object(&r, file, name, want);
                checked += 1;
            }
            for name in &skipped {
                let o = r.objects().iter().find(|o| o.name == *name).unwrap();
                assert!(
                    o.skipped().unwrap().contains("not numbers"),
                    "{file} {name}"
                );
            }
            for name in &unread {
                let o = r.object(name).unwrap();
                if *name == "/zfp" {
                    // Listed with its element type and shape, as h5py lists it.
                    let info = o.info();
                    assert_eq!(info.shape.as_slice(), [8, 8], "{file}");
                    assert_eq!(
                        info.element_type().map(|e| e.dtype),
                        Some(zt_formats::DType::F32),
                        "{file}"
                    );
                }
                let e = o.bytes().unwrap_err().to_string();
                let why = if *name == "/zfp" {
                    "unsupported HDF5 filter zfp (id 32013)"
                } else if *name == "/outside" {
                    "an external link to ../other.h5:/x not followed: invalid file: external \
                     link file \"../other.h5\" is not a relative path inside the file's folder"
                } else if *name == "/missing" {
                    "an external link to missing.h5:/x not followed"
                } else {
                    "not read yet"
                };
                assert!(e.contains(why), "{file} {name}: {e}");
            }
        }
    }
    assert!(checked >= 2 * 48, "{checked}");
}

#[test]
fn attributes_and_soft_links() {
    let r = ztensor::open(dir().join("h5py_default.h5")).unwrap();
    let a = r.attributes();
    assert_eq!(a["keras_version"].as_str(), Some("2.15.0"));
    assert_eq!(a["backend"].as_str(), Some("tensorflow"));
    assert_eq!(a["step"], Value::Integer(7));
    assert_eq!(a["scale"], Value::Float(0.125));
    assert_eq!(
        a["/model_weights/dense@weight_names"],
        Value::Array(vec![
            Value::Text("dense/kernel:0".into()),
            Value::Text("dense/bias:0".into())
        ])
    );
    let kernel = r
        .objects()
        .iter()
        .find(|o| o.name == "/model_weights/dense/dense/kernel:0")
        .unwrap();
    assert_eq!(kernel.attributes["units"], Value::Integer(3));
    let soft = r
        .objects()
        .iter()
        .find(|o| o.name == "/soft_kernel")
        .unwrap();
    assert_eq!(
        soft.attributes["hdf5.soft_link"].as_str(),
        Some("/model_weights/dense/dense/kernel:0")
    );
    // Big-endian data is swapped when read.
    let be = r.object("/be_i64").unwrap().read::<i64>().unwrap();
    assert_eq!(be.as_ref(), &[1, -2, 3]);
}

#[test]
fn contiguous_data_is_served_from_the_map() {
    let r = ztensor::open(dir().join("keras.weights.h5")).unwrap();
    let o = r.object("/layers/dense/vars/0").unwrap();
    assert!(matches!(o.bytes().unwrap(), std::borrow::Cow::Borrowed(_)));
    let k = ztensor::open(dir().join("model.keras")).unwrap();
    assert!(k.attributes()["keras.config"]
        .as_str()
        .unwrap()
        .contains("Sequential"));
    assert!(k.attributes()["keras.metadata"]
        .as_str()
        .unwrap()
        .contains("keras_version"));
}

#[test]
fn paged_chunk_indexes() {
    use sha2::Digest;
    use std::io::Read;
    let expected = expected();
    for (file, datasets) in expected["gzipped"].as_object().unwrap() {
        let packed = std::fs::read(dir().join(format!("{file}.gz"))).unwrap();
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(packed.as_slice())
            .read_to_end(&mut bytes)
            .unwrap();
        let r = OpenOptions::new().open_bytes(bytes).unwrap();
        assert_eq!(r.len(), datasets.as_object().unwrap().len());
        for (name, want) in datasets.as_object().unwrap() {
            let o = r.object(name).unwrap();
            let data = o.bytes().unwrap_or_else(|e| panic!("{file} {name}: {e}"));
            let count: u64 = want["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .product();
            assert_eq!(
                o.element_type().unwrap().name(),
                want["type"].as_str().unwrap()
            );
            assert_eq!(
                data.len() as u64,
                count * o.element_type().unwrap().dtype.size() as u64
            );
            let digest = sha2::Sha256::digest(&data[..]);
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex, want["sha256"].as_str().unwrap(), "{file} {name}");
        }
    }
}

/// Files TensorFlow's own tools wrote (tools/interop/make_tensorflow.py): transformers'
/// `tf_model.h5` (Keras 2's weights layout) and a whole model saved by tf-keras in its legacy
/// HDF5 layout; every dataset lists and reads as h5py reads it, mapped and unmapped.
#[test]
fn files_tensorflow_wrote_read_as_h5py_reads_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/tensorflow");
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    let files = expected["files"].as_object().unwrap();
    assert_eq!(files.len(), 2);
    for (file, datasets) in files {
        let datasets = datasets.as_object().unwrap();
        for unmapped in [false, true] {
            let r = OpenOptions::new()
                .unmapped(unmapped)
                .open(dir.join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(r.version(), &FileVersion::Hdf5 { superblock: 0 });
            assert_eq!(r.len(), datasets.len(), "{file}");
            for (name, want) in datasets {
                expected::check_object(&r, file, name, want);
            }
        }
    }
}

/// Keras 3's sharded weights (`model.weights.json`, whose `weight_map` gives each variable
/// group the shards that hold its variables; the first layer's are split over two shards)
/// open as a set: every tensor listed, found in its shard, read as h5py reads it.
#[cfg(feature = "sharded")]
#[test]
fn keras_sharded_weights_open_as_a_set() {
    let expected = expected();
    let want = expected["keras_sharded"].as_object().unwrap();
    let set = ztensor::ShardedSet::open(dir().join("keras_sharded/model.weights.json")).unwrap();
    assert!(set.names().eq(want.keys().map(String::as_str)));
    assert_eq!(
        set.shard_of("/layers/dense/vars/1")
            .unwrap()
            .file_name()
            .unwrap(),
        "model_00001.weights.h5"
    );
    for (name, want) in want {
        expected::check_view(&set.object(name).unwrap(), "keras_sharded", name, want);
    }
    set.check().unwrap();
    // An index that leaves a shard's variable out, or puts one in two shards, is refused.
    let tmp = tempfile::tempdir().unwrap();
    for shard in ["model_00000.weights.h5", "model_00001.weights.h5"] {
        std::fs::copy(
            dir().join("keras_sharded").join(shard),
            tmp.path().join(shard),
        )
        .unwrap();
    }
    std::fs::copy(
        dir().join("keras_sharded/model_00000.weights.h5"),
        tmp.path().join("copy.weights.h5"),
    )
    .unwrap();
    let refused = |weight_map: &str| {
        let index = tmp.path().join("model.weights.json");
        std::fs::write(&index, format!(r#"{{"weight_map": {weight_map}}}"#)).unwrap();
        ztensor::ShardedSet::open(&index).unwrap_err().to_string()
    };
    let e = refused(
        r#"{"/layers/dense/vars": ["model_00000.weights.h5"],
            "/layers/dense_1/vars": ["model_00001.weights.h5"]}"#,
    );
    assert!(
        e.contains("model_00001.weights.h5")
            && e.contains(
                "object \"/layers/dense/vars/1\" is in this shard, but the index does \
                           not list its variable group \"/layers/dense/vars\" in it"
            ),
        "{e}"
    );
    let e = refused(
        r#"{"/layers/dense/vars": ["model_00000.weights.h5", "model_00001.weights.h5",
                                   "copy.weights.h5"],
            "/layers/dense_1/vars": ["model_00001.weights.h5"]}"#,
    );
    assert!(
        e.contains(
            "object \"/layers/dense/vars/0\" is in two shards, \"copy.weights.h5\" and \
             \"model_00000.weights.h5\""
        ),
        "{e}"
    );
}

/// The Blosc2 filter's chunks (tools/interop/make_hdf5_blosc2.py), as hdf5plugin, PyTables
/// and c-blosc2 itself wrote them: every dataset reads as h5py reads it (its SHA-256), and a
/// box across its chunks' blocks (B2ND blocks padded at the edges) as the same box of the
/// whole. Without the `zstd` feature, a dataset either reads or names zstd.
#[test]
fn blosc2_chunks_read_as_h5py_reads_them() {
    use sha2::Digest;
    use std::io::Read;
    let text = std::fs::read_to_string(dir().join("blosc2.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut read = 0;
    for (file, datasets) in expected["files"].as_object().unwrap() {
        let mut bytes = std::fs::read(dir().join(file)).unwrap();
        if file.ends_with(".gz") {
            let mut plain = Vec::new();
            flate2::read::GzDecoder::new(bytes.as_slice())
                .read_to_end(&mut plain)
                .unwrap();
            bytes = plain;
        }
        let r = OpenOptions::new().open_bytes(bytes).unwrap();
        let datasets = datasets.as_object().unwrap();
        assert_eq!(r.len(), datasets.len(), "{file}");
        for (name, want) in datasets {
            let o = r.object(name).unwrap();
            let shape = expected::check_listed(&o, file, name, want);
            let data = match o.bytes() {
                Ok(data) => data,
                Err(e) if cfg!(not(feature = "zstd")) && e.message().contains("zstd") => continue,
                Err(e) => panic!("{file} {name} ({}): {e}", want["writer"]),
            };
            let digest = sha2::Sha256::digest(&data[..]);
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(
                hex,
                want["sha256"].as_str().unwrap(),
                "{file} {name} ({})",
                want["writer"]
            );
            // The middle third of every dimension, through the slice path.
            let ranges: Vec<std::ops::Range<u64>> =
                shape.iter().map(|&n| n / 3..(2 * n).div_ceil(3)).collect();
            let size = data.len() as u64 / shape.iter().product::<u64>();
            let slab = ztensor::Hyperslab::new(&shape, &ranges).unwrap();
            let boxed: Vec<u8> = slab
                .runs(size)
                .flat_map(|(at, len)| data[at as usize..(at + len) as usize].to_vec())
                .collect();
            assert_eq!(&o.slice_bytes(&ranges).unwrap()[..], &boxed[..], "{name}");
            read += 1;
        }
    }
    let least = if cfg!(feature = "zstd") { 54 } else { 20 };
    assert!(read >= least, "{read}");
}

/// A slice of a chunked dataset decodes only the chunks it meets: every chunked dataset of
/// the h5py fixtures (gzip, shuffle, fletcher32, szip, edge chunks, chunks never written,
/// big-endian), sliced into boxes that cross chunk edges, gives the bytes of the same box of
/// the whole dataset, mapped and unmapped.
#[test]
fn slices_of_chunked_datasets_match_the_whole_read() {
    let mut sliced = 0;
    for file in ["h5py_default.h5", "h5py_latest.h5"] {
        for unmapped in [false, true] {
            let r = OpenOptions::new()
                .unmapped(unmapped)
                .open(dir().join(file))
                .unwrap();
            for o in r.objects() {
                let chunked = o
                    .components
                    .iter()
                    .any(|c| matches!(c.encoding, ztensor::formats::Encoding::Hdf5Chunks(_)));
                if !chunked || o.skipped().is_some() || o.shape.contains(&0) {
                    continue;
                }
                let view = r.object(&o.name).unwrap();
                let Ok(whole) = view.bytes() else {
                    continue; // a filter we do not decode: named by the whole read's test
                };
                let size = whole.len() as u64 / o.shape.iter().product::<u64>();
                // Boxes: the first and last element, the middle third of every dimension,
                // and every dimension cut at 1..n-1.
                let boxes: Vec<Vec<std::ops::Range<u64>>> = vec![
                    o.shape.iter().map(|_| 0..1).collect(),
                    o.shape.iter().map(|&n| n - 1..n).collect(),
                    o.shape
                        .iter()
                        .map(|&n| n / 3..(2 * n).div_ceil(3))
                        .collect(),
                    o.shape
                        .iter()
                        .map(|&n| n.min(1)..n.saturating_sub(1).max(n.min(1)))
                        .collect(),
                ];
                for ranges in boxes {
                    let got = view.slice_bytes(&ranges).unwrap();
                    let slab = ztensor::Hyperslab::new(&o.shape, &ranges).unwrap();
                    let want: Vec<u8> = slab
                        .runs(size)
                        .flat_map(|(at, len)| whole[at as usize..(at + len) as usize].to_vec())
                        .collect();
                    assert_eq!(&got[..], &want[..], "{file} {} {ranges:?}", o.name);
                    sliced += 1;
                }
            }
        }
    }
    assert!(sliced >= 40, "{sliced}");
}

/// `file` from the fixtures with `edit` applied, opened from memory.
fn damaged(file: &str, edit: impl FnOnce(&mut Vec<u8>)) -> ztensor::Result<ztensor::Reader> {
    let mut bytes = std::fs::read(dir().join(file)).unwrap();
    edit(&mut bytes);
    OpenOptions::new().open_bytes(bytes)
}

fn find(bytes: &[u8], what: &[u8]) -> usize {
    bytes.windows(what.len()).position(|w| w == what).unwrap()
}

/// The first structure signed `signature` whose bytes at `offset` are `kind` (a B-tree's type,
/// and level).
fn find_kind(bytes: &[u8], signature: &[u8], offset: usize, kind: &[u8]) -> usize {
    let mut at = 0;
    loop {
        at += find(&bytes[at..], signature);
        if bytes[at + offset..].starts_with(kind) {
            return at;
        }
        at += signature.len();
    }
}

/// HDF5's lookup3 checksums are checked: a changed byte in an object header refuses the file
/// (before, it could list a wrong shape); one in a chunk index makes that dataset unreadable,
/// as h5py fails on that dataset's read alone, and the others read.
#[test]
fn damaged_checksummed_metadata_is_refused() {
    let e = damaged("h5py_latest.h5", |b| {
        let at = find(b, b"OHDR");
        b[at + 12] ^= 1;
    })
    .unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidFile);
    assert!(e.to_string().contains("object header: its checksum"), "{e}");

    // A dense group's name index: we list links from the heap, but h5py reads the index.
    let e = damaged("h5py_latest.h5", |b| {
        let at = find_kind(b, b"BTLF", 5, &[5]);
        b[at + 8] ^= 1;
    })
    .unwrap_err();
    assert!(
        e.to_string().contains("v2 B-tree node: its checksum"),
        "{e}"
    );

    let r = damaged("h5py_latest.h5", |b| {
        let at = find(b, b"FAHD");
        b[at + 9] ^= 1;
    })
    .unwrap();
    let (bad, good): (Vec<_>, Vec<_>) = r.objects().iter().partition(|o| {
        o.defect
            .as_ref()
            .is_some_and(|d| d.message.contains("fixed array header: its checksum"))
    });
    assert_eq!(bad.len(), 1);
    let e = r.object(&bad[0].name).unwrap().bytes().unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidFile);
    let mut read = 0;
    for o in good.iter().filter(|o| o.defect.is_none()) {
        read += usize::from(read_unless_without_zstd(&r, &o.name));
    }
    assert!(read > 30, "{read}");
}

/// A file shorter than its superblock's end-of-file address is refused, as libhdf5 refuses it
/// ("truncated file"): bytes cut from its middle would otherwise read as shifted data. The
/// address moves by as much as the superblock lies from the base address it gives. A version
/// 0 superblock with a free-space address (libhdf5: a superblock extension) is refused too.
#[test]
fn a_truncated_file_and_an_old_superblock_extension_are_refused() {
    let file = std::fs::read(dir().join("h5py_default.h5")).unwrap();
    assert_eq!(file[8], 0, "superblock version 0");
    let (base_at, free_space_at, eof_at) = (24, 32, 40);
    assert_eq!(
        u64::from_le_bytes(file[eof_at..eof_at + 8].try_into().unwrap()),
        file.len() as u64
    );
    let open = |bytes: Vec<u8>| OpenOptions::new().open_bytes(bytes).map(|_| ());
    open(file.clone()).unwrap();

    let mut cut = file.clone();
    cut.remove(file.len() / 2);
    let e = open(cut).expect_err("a byte cut");
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidFile);
    assert_eq!(e.offset(), Some(eof_at as u64), "{e}");
    let says = format!(
        "truncated HDF5 file: its end-of-file address {} (base address 0, superblock at 0) is \
         past its {} bytes",
        file.len(),
        file.len() - 1
    );
    assert!(e.message().contains(&says), "{e}");

    let mut longer = file.clone();
    longer.extend([0; 8]);
    open(longer).expect("bytes after the end-of-file address are read past");
    let mut moved_base = file.clone();
    moved_base[base_at + 6] = 1;
    let e = open(moved_base).expect_err("the base address moved");
    assert!(e.message().contains("truncated HDF5 file"), "{e}");

    let mut extension = file.clone();
    extension[free_space_at..free_space_at + 8].copy_from_slice(&64u64.to_le_bytes());
    let e = open(extension).expect_err("an extension in version 0");
    assert_eq!(e.offset(), Some(free_space_at as u64), "{e}");
    assert!(
        e.message()
            .contains("superblock version 0 gives a free-space"),
        "{e}"
    );
}

/// What libhdf5 checks when it opens a group or a dataset, found by a differential run
/// against h5py 3.16 (`tools/interop/damaged_originals.py --api hdf5`): each copy is a byte
/// that run changed. A group's damage refuses the file (h5py fails to visit it); a dataset's
/// makes that dataset unreadable (h5py fails to open it), and the others read.
#[test]
fn what_hdf5_checks_at_open_is_checked() {
    let with_byte = |file: &str, at: usize, was: u8, now: u8| {
        damaged(file, |b| {
            assert_eq!(b[at], was, "{file} at {at}");
            b[at] = now;
        })
    };
    let refused = |r: ztensor::Result<ztensor::Reader>| r.map(|_| ()).unwrap_err().to_string();
    // The root's symbol table message made a message of unknown type: no type at all.
    let e = refused(with_byte("chunk_btree_deep.h5", 113, 0, 0xD0));
    assert!(
        e.contains("object \"/\": the object header at address 96 holds no group, dataset"),
        "{e}"
    );
    // The local heap's free list starting far past its data.
    let e = refused(with_byte("chunk_btree_deep.h5", 735, 0, 2));
    assert!(
        e.contains("lies outside the heap's 88 bytes of data"),
        "{e}"
    );
    // A group B-tree key (a name's heap offset) past the heap.
    let e = refused(with_byte("chunk_btree_deep.h5", 161, 0, 0x80));
    assert!(e.contains("group B-tree key of heap offset 32768"), "{e}");

    let unreadable = |r: ztensor::Result<ztensor::Reader>, name: &str| {
        let r = r.unwrap();
        let e = r.object(name).unwrap().readable().unwrap_err();
        assert_eq!(e.kind(), ztensor::ErrorKind::InvalidFile, "{e}");
        let others = r.objects().iter().filter(|o| o.name != name);
        assert!(others.clone().count() > 2);
        for o in others.filter(|o| o.defect.is_none()) {
            read_unless_without_zstd(&r, &o.name);
        }
        e.to_string()
    };
    // A v1 B-tree chunked dataset whose layout's element size is not its type's.
    let e = unreadable(with_byte("fill_values_default.h5", 963, 4, 0x84), "/nan");
    assert!(
        e.contains("chunk element size 132, the datatype's is 4"),
        "{e}"
    );
    // A fill value message whose size runs past it, on a contiguous dataset.
    let e = unreadable(
        with_byte("keras.weights.h5", 14335, 0, 8),
        "/layers/dense_1/vars/1",
    );
    assert!(
        e.contains("fill value at byte 14336 needs 134217728 bytes"),
        "{e}"
    );
    // An integer type whose bits run past its element.
    let e = unreadable(with_byte("h5py_default.h5", 6296, 0, 8), "/i64");
    assert!(
        e.contains("a number type of 64 bits at bit 8 in elements of 8 bytes"),
        "{e}"
    );
    // Fewer bits than the element: libhdf5 converts them; we do not read them as numbers.
    let r = with_byte("h5py_default.h5", 6298, 64, 48).unwrap();
    let o = r.objects().iter().find(|o| o.name == "/i64").unwrap();
    let defect = o.defect.as_ref().unwrap();
    assert!(
        defect.message.contains("HDF5 numbers of 48 bits at bit 0"),
        "{defect:?}"
    );
}

/// The old layouts carry no checksums, but HDF5 checks a few of their fields, and refuses a
/// file where they are damaged (found comparing both readers on h5py's `libver="earliest"`
/// files, and h5py 3.16 with HDF5 2.0 on edited message counts): so do we.
#[test]
fn damaged_old_layout_fields_are_refused_as_hdf5_refuses_them() {
    let file = std::fs::read(dir().join("h5py_default.h5")).unwrap();
    let refused = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = file.clone();
        edit(&mut bytes);
        OpenOptions::new()
            .open_bytes(bytes)
            .err()
            .map(|e| e.to_string())
    };
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    // Each symbol table node's first entry (name offset, header address, cache type) with
    // cache type 7. HDF5 leaves stale nodes behind, which neither reader walks; every node
    // that is walked must refuse it.
    let nodes: Vec<usize> = (0..file.len() - 4)
        .filter(|&i| &file[i..i + 4] == b"SNOD")
        .collect();
    let mut live = Vec::new();
    for &node in &nodes {
        if let Some(e) = refused(&|b| {
            let at = node + 8 + 16;
            b[at..at + 4].copy_from_slice(&7u32.to_le_bytes());
        }) {
            assert!(
                e.contains("symbol table entry of cache type 7 (0, 1 or 2)"),
                "{e}"
            );
            live.push(node);
        }
    }
    assert!(!live.is_empty(), "no symbol table node is walked");
    // A version 1 object header named by a walked node, its first message made one byte
    // longer: no longer a multiple of 8.
    let e = refused(&|b| {
        let header = u64_at(b, live[0] + 8 + 8) as usize;
        assert_eq!(b[header], 1, "a version 1 object header");
        let size = header + 16 + 2;
        let len = u16::from_le_bytes([b[size], b[size + 1]]) + 1;
        b[size..size + 2].copy_from_slice(&len.to_le_bytes());
    })
    .expect("an unaligned message is refused");
    assert!(e.contains("not a multiple of 8"), "{e}");
    // Its message count (bytes 2-3): HDF5 refuses fewer than the messages there are and a
    // count of 0 with a chunk, and reads a count that is too large.
    let header = u64_at(&file, live[0] + 8 + 8) as usize;
    let counted = u16::from_le_bytes([file[header + 2], file[header + 3]]);
    let with_count = |n: u16| {
        let mut bytes = file.clone();
        bytes[header + 2..header + 4].copy_from_slice(&n.to_le_bytes());
        OpenOptions::new().open_bytes(bytes)
    };
    let e = with_count(counted - 1)
        .map(|_| ())
        .expect_err("too few counted");
    assert!(
        e.to_string().contains(&format!(
            "object header holds {counted} messages, more than the {} its prefix counts",
            counted - 1
        )),
        "{e}"
    );
    let e = with_count(0).map(|_| ()).expect_err("none counted");
    assert!(
        e.to_string()
            .contains("object header of no messages with a chunk of"),
        "{e}"
    );
    let more = with_count(counted + 4).unwrap();
    assert_eq!(
        more.objects().len(),
        OpenOptions::new()
            .open_bytes(file.clone())
            .unwrap()
            .objects()
            .len()
    );
}

/// A v1 chunk B-tree (h5py's default index) carries no checksum: a key that is not a chunk's
/// (HDF5 would miss the chunk and read zeros in its place) makes the dataset unreadable.
#[test]
fn a_chunk_btree_key_that_is_not_a_chunks_is_refused() {
    let r = damaged("h5py_default.h5", |b| {
        // The first raw-data node (type 1); its keys follow its 24-byte head.
        let at = find_kind(b, b"TREE", 4, &[1]);
        // The first key's offsets are all 0 (the chunk at the origin); the first word after
        // them that is not 0 is its child's address: the word before it is the last offset.
        let key = at + 24;
        let dims = (1..=8)
            .find(|&n| {
                let child = key + 8 + 8 * n;
                u64::from_le_bytes(b[child..child + 8].try_into().unwrap()) > 0
            })
            .unwrap();
        b[key + 8 + 8 * (dims - 1)] = 1;
    })
    .unwrap();
    let bad: Vec<_> = r
        .objects()
        .iter()
        .filter_map(|o| o.defect.as_ref())
        .filter(|d| d.message.contains("a chunk B-tree key of offsets"))
        .collect();
    assert_eq!(bad.len(), 1, "{bad:?}");
}

/// Chunks never written read as the dataset's fill value, as h5py reads them
/// (tools/interop/make_hdf5_fill.py), in both layouts, whole and sliced.
#[test]
fn chunks_never_written_read_as_the_fill_value() {
    for file in ["fill_values_default.h5", "fill_values_latest.h5"] {
        let r = ztensor::open(dir().join(file)).unwrap();
        let nan = r.read::<f32>("/nan").unwrap();
        assert_eq!(nan.len(), 64, "{file}");
        assert!(nan[..32].iter().all(|&v| v == 1.0), "{file}");
        assert!(nan[32..].iter().all(|v| v.is_nan()), "{file}");
        let neg = r.read::<i16>("/neg").unwrap();
        assert_eq!(&neg[..], [0, 1, 2, 3, -1, -1, -1, -1, -1, -1], "{file}");
        let grown = r.read::<f64>("/grown").unwrap();
        assert_eq!(&grown[..8], [3.0; 8], "{file}");
        assert_eq!(&grown[8..], [-2.5; 8], "{file}");
        // A box across written and unwritten chunks: rows 3..5, columns 1..3 of `nan`.
        let view = r.object("/nan").unwrap();
        let got = view.slice_bytes(&[3..5, 1..3]).unwrap();
        let got: Vec<f32> = got
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(&got[..2], [1.0, 1.0], "{file}");
        assert!(got[2..].iter().all(|v| v.is_nan()), "{file} {got:?}");
    }
}

/// Contiguous datasets never written (no data address) read as their fill value, as h5py
/// reads them (tools/interop/make_hdf5_fill.py). With no fill value defined HDF5 refuses to
/// read one; with the fill time "never" it leaves h5py's buffer of zeros as it was.
#[test]
fn contiguous_datasets_never_written_read_as_the_fill_value() {
    for file in ["fill_values_default.h5", "fill_values_latest.h5"] {
        let r = ztensor::open(dir().join(file)).unwrap();
        assert_eq!(
            &r.read::<f32>("/unwritten").unwrap()[..],
            [7.5; 15],
            "{file}"
        );
        assert_eq!(
            &r.read::<i32>("/unwritten_zeros").unwrap()[..],
            [0; 4],
            "{file}"
        );
        assert_eq!(
            &r.read::<f64>("/unwritten_scalar").unwrap()[..],
            [-1.0],
            "{file}"
        );
        let got = r
            .object("/unwritten")
            .unwrap()
            .slice_bytes(&[1..3, 2..4])
            .unwrap();
        assert_eq!(&got[..], 7.5f32.to_le_bytes().repeat(4), "{file}");
    }
    // The old layout's fill value message of `unwritten` (version 2, no checksum): version,
    // allocation time, fill time, "defined", then the size (4) and the value (7.5).
    let edited = |edit: fn(&mut [u8])| {
        damaged("fill_values_default.h5", |b| {
            let at = find(b, &[2, 2, 2, 1, 4, 0, 0, 0, 0, 0, 0xf0, 0x40]);
            edit(&mut b[at..]);
        })
        .unwrap()
    };
    let refusal = |r: &ztensor::Reader| r.read::<f32>("/unwritten").err().map(|e| e.to_string());
    for (what, r) in [
        ("not defined", edited(|m| m[3] = 0)),
        ("size -1", edited(|m| m[4..8].copy_from_slice(&[0xff; 4]))),
    ] {
        let e = refusal(&r).unwrap_or_else(|| panic!("{what}: read"));
        assert!(
            e.contains("no fill value defined: HDF5 refuses"),
            "{what}: {e}"
        );
    }
    let never = edited(|m| m[2] = 1);
    assert_eq!(&never.read::<f32>("/unwritten").unwrap()[..], [0.0; 15]);
    // The fill time "never" with no value defined reads as zeros too, as h5py reads it.
    let never = edited(|m| {
        m[2] = 1;
        m[3] = 0;
    });
    assert_eq!(&never.read::<f32>("/unwritten").unwrap()[..], [0.0; 15]);
}

/// A chunked dataset takes HDF5's same two exceptions to its fill value: none of it written
/// (no chunk index) and no fill value defined is refused, and with the fill time "never"
/// chunks never written read as zeros, as h5py reads them.
#[test]
fn chunked_datasets_take_hdf5s_fill_time_and_undefined_fill() {
    let r = ztensor::open(dir().join("fill_values_default.h5")).unwrap();
    assert_eq!(&r.read::<f32>("/chunked_unwritten").unwrap()[..], [6.5; 8]);
    // `chunked_unwritten`'s fill value message: version 2, allocation time 3 (incremental),
    // fill time 2 (if set), defined, size 4, 6.5.
    let edited = |edit: fn(&mut [u8])| {
        damaged("fill_values_default.h5", |b| {
            let at = find(b, &[2, 3, 2, 1, 4, 0, 0, 0, 0, 0, 0xd0, 0x40]);
            edit(&mut b[at..]);
        })
        .unwrap()
    };
    let undefined = edited(|m| m[3] = 0);
    let e = undefined
        .read::<f32>("/chunked_unwritten")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("no fill value defined: HDF5 refuses"), "{e}");
    let never = edited(|m| m[2] = 1);
    assert_eq!(
        &never.read::<f32>("/chunked_unwritten").unwrap()[..],
        [0.0; 8]
    );
    // `nan`, half written, fill NaN: with the fill time "never" its other half reads as zeros.
    let never = damaged("fill_values_default.h5", |b| {
        let at = find(b, &[2, 3, 2, 1, 4, 0, 0, 0, 0, 0, 0xc0, 0x7f]);
        b[at + 2] = 1;
    })
    .unwrap();
    let nan = never.read::<f32>("/nan").unwrap();
    assert!(nan[..32].iter().all(|&v| v == 1.0));
    assert!(nan[32..].iter().all(|&v| v == 0.0), "{nan:?}");
}

/// Inner nodes of a v1 chunk B-tree hold keys HDF5 searches by: a damaged one makes the
/// dataset unreadable too (tools/interop/make_hdf5_btree.py: 200 one-element chunks).
#[test]
fn a_damaged_inner_chunk_btree_key_is_refused() {
    let r = ztensor::open(dir().join("chunk_btree_deep.h5")).unwrap();
    let d = r.read::<i16>("/d").unwrap();
    assert!(d.iter().copied().eq(0..200));
    let damage = |edit: fn(&mut [u8])| {
        let r = damaged("chunk_btree_deep.h5", |b| {
            // The inner node: type 1 (chunks), level 1; its keys follow its 24-byte head,
            // each a size, a mask and two offsets (the element's, then 0): 24 bytes, then
            // an 8-byte child.
            let at = find_kind(b, b"TREE", 4, &[1, 1]);
            edit(&mut b[at + 24..]);
        })
        .unwrap();
        r.objects()[0].defect.as_ref().unwrap().message.clone()
    };
    // The second key's last offset (past the first key and child, 32 bytes, then 16).
    let e = damage(|keys| keys[32 + 16] = 1);
    assert!(e.contains("a chunk B-tree key of offsets"), "{e}");
    // The second key's offset made smaller than the first's (which is 0): out of order.
    let e = damage(|keys| {
        let first = keys[8];
        keys[32 + 8..32 + 16].copy_from_slice(&[first, 0, 0, 0, 0, 0, 0, 0]);
    });
    assert!(e.contains("chunk B-tree keys out of order"), "{e}");
    // The first child pointer made the node's own address (a loop), or the second child's
    // (a shared subtree): either ran the walk, and grew its stack, without end.
    let looped = |second: bool| {
        let r = damaged("chunk_btree_deep.h5", |b| {
            let at = find_kind(b, b"TREE", 4, &[1, 1]);
            let target = if second {
                b[at + 24 + 32 + 24..at + 24 + 32 + 32].to_vec()
            } else {
                (at as u64).to_le_bytes().to_vec()
            };
            b[at + 24 + 24..at + 24 + 32].copy_from_slice(&target);
        })
        .unwrap();
        r.objects()[0].defect.as_ref().unwrap().message.clone()
    };
    for second in [false, true] {
        let e = looped(second);
        assert!(
            e.contains("a chunk B-tree that reaches this node twice (a loop or a shared subtree)"),
            "{e}"
        );
    }
}

/// Attribute values count against the cap on values (`DecodeLimits::max_value_bytes`): an
/// attribute message of up to a MiB can hold a million one-byte numbers, and an object header
/// many such messages. A file's attributes over the cap refuse the open, at the message.
#[test]
fn attribute_values_count_against_the_value_cap() {
    let path = dir().join("h5py_default.h5");
    let limits = |max_value_bytes| ztensor::Limits {
        decode: ztensor::manifest::DecodeLimits {
            max_value_bytes,
            ..Default::default()
        },
        ..Default::default()
    };
    let r = OpenOptions::new().limits(limits(4096)).open(&path).unwrap();
    assert_eq!(r.attributes()["keras_version"], Value::from("2.15.0"));
    let e = OpenOptions::new()
        .limits(limits(100))
        .open(&path)
        .map(drop)
        .unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::LimitExceeded, "{e}");
    assert!(
        e.message()
            .starts_with("the attribute values would take more than the memory budget of 100"),
        "{e}"
    );
    assert!(e.offset().is_some(), "{e}");
}

/// A dataset can be written in a few hundred bytes and a chunk's record in a B-tree in a few
/// dozen, and each costs more in memory once listed: both count against the listing budget
/// (`Limits::memory_budget` when set), and the error says which was being listed and how to
/// raise it.
#[test]
fn datasets_and_chunks_count_against_the_listing_budget() {
    let open = |file: &str, budget: u64| {
        let limits = ztensor::Limits {
            memory_budget: Some(budget),
            ..Default::default()
        };
        OpenOptions::new().limits(limits).open(dir().join(file))
    };
    let refused = |file: &str, budget: u64| {
        let e = open(file, budget).map(drop).unwrap_err();
        assert_eq!(e.kind(), ztensor::ErrorKind::LimitExceeded, "{e}");
        assert!(
            e.message().contains("(raise it: Limits::memory_budget"),
            "{e}"
        );
        e.message().to_owned()
    };
    // 81 objects, listed in a quarter of a MiB; an eighth of that stops at the 18th, and
    // some budgets stop within a dataset's chunks.
    assert_eq!(open("h5py_latest.h5", 256 << 10).unwrap().len(), 81);
    let e = refused("h5py_latest.h5", 32 << 10);
    assert!(
        e.starts_with(
            "listing the file's 18 datasets would take more than the memory budget of 32768 bytes"
        ),
        "{e}"
    );
    let e = refused("h5py_latest.h5", 60 << 10);
    assert!(
        e.starts_with("listing a dataset's ")
            && e.contains(" chunks would take more than the memory budget of 61440 bytes"),
        "{e}"
    );
    // A budget the first dataset overruns says so in the singular.
    let e = refused("h5py_latest.h5", 1 << 10);
    assert!(
        e.starts_with("listing the file's 1 dataset would take more than"),
        "{e}"
    );
    // One dataset of hundreds of chunks in a deep B-tree.
    assert_eq!(open("chunk_btree_deep.h5", 64 << 10).unwrap().len(), 1);
    let e = refused("chunk_btree_deep.h5", 16 << 10);
    assert!(
        e.starts_with(
            "listing a dataset's 153 chunks would take more than the memory budget of 16384 bytes"
        ),
        "{e}"
    );
}
