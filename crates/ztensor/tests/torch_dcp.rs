//! PyTorch distributed checkpoints written by `torch.distributed.checkpoint.save` itself
//! (`tools/interop/make_torch_dcp.py`): one saved by a single process, one by two ranks from
//! sharded DTensors (rows and columns), one through DCP's zstd transform. Every tensor reads
//! as torch was given it, mapped and unmapped; a tensor in one chunk comes from the map
//! without a copy; the folder opens as the model; damaged checkpoints give the errors they
//! must, and no damage to a data file makes the reader panic.

#[path = "support/expected.rs"]
mod expected;

use std::borrow::Cow;
use std::ops::Range;
use std::path::{Path, PathBuf};

use ztensor::{Encoding, ErrorKind, FileVersion, OpenOptions, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/torch_dcp")
}

#[test]
fn every_tensor_reads_as_torch_saved_it() {
    let want = expected::load(&dir());
    let files = expected::check_every_file(&dir(), &want, "tensors", |file, r, _| {
        assert_eq!(r.version(), &FileVersion::TorchDcp, "{file}");
        let data_files: Vec<&str> = r.shards().iter().map(|s| s.name.as_str()).collect();
        if file.starts_with("single") {
            assert_eq!(data_files, ["__0_0.distcp"]);
            // The value that is not a tensor is read from its archive, and named.
            assert_eq!(r.attributes().get("step"), Some(&Value::Integer(7)));
            let bytes = r.attributes().get("torch.dcp.bytes");
            assert_eq!(bytes, Some(&Value::Array(vec![Value::Text("step".into())])));
        } else if file.starts_with("byte_tensors") {
            assert_eq!(data_files, ["__0_0.distcp"]);
        } else if file.starts_with("zstd/") {
            assert_eq!(data_files, ["__0_0.distcp"]);
            assert_eq!(r.attributes().get("step"), Some(&Value::Integer(7)));
            let bytes = r.attributes().get("torch.dcp.bytes");
            let values = ["step", "pair"].map(|v| Value::Text(v.into()));
            assert_eq!(bytes, Some(&Value::Array(values.to_vec())));
        } else {
            assert_eq!(data_files, ["__0_0.distcp", "__1_0.distcp"]);
        }
    });
    assert_eq!(files, 5);
}

/// DCP's zstd transform compresses each chunk's archive as one stream: a tensor is a span of
/// what it decodes to, decoded up to its end when read (not at open), and checked against the
/// CRC-32 its record's data descriptor gives; a stream that still decodes but to other bytes
/// fails `verify` and every read.
#[test]
fn a_compressed_chunk_is_decoded_when_read_and_checked_against_its_records_crc() {
    let r = ztensor::open(dir().join("zstd/.metadata")).unwrap();
    for o in r.objects() {
        let encodings: Vec<&str> = o.components.iter().map(|c| c.encoding.name()).collect();
        assert_eq!(encodings, ["zstd"], "{}", o.name);
    }
    let t = r.object("layers.0.proj_t").unwrap();
    assert_eq!(t.read::<i64>().unwrap().as_ref(), [0, 3, 1, 4, 2, 5]);
    let report = r.verify();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    // Every tensor's record carries its CRC-32 in a data descriptor, but the empty one's
    // (torch writes a record of no bytes with its sizes in its header, and nothing to check).
    assert_eq!(report.checked, 6);

    // A byte of the stream changed where it still decodes (zstd keeps short literals as they
    // are, and DCP's streams carry no checksum of their own): only the record's CRC-32 sees
    // that the tensor's bytes differ.
    let tmp = copy_with("zstd", |_| {});
    let path = tmp.path().join("__0_0.distcp");
    let values: Vec<u8> = (0..12)
        .flat_map(|i| (i as f32 / 4.0).to_le_bytes())
        .collect();
    change_decoded_bytes(&path, stored_range(&r, "embed.weight"), &values);
    let r = ztensor::open(tmp.path().join(".metadata")).unwrap();
    let report = r.verify();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    let e = r.object("embed.weight").unwrap().read::<f32>().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ChecksumMismatch, "{e}");
    assert!(e.to_string().contains("CRC-32"), "{e}");
    assert_eq!(e.object(), Some("embed.weight"), "{e}");
    assert_eq!(e.path(), Some(path.as_path()), "{e}");
}

/// Where the stored bytes of `object`'s component lie in its file: `(offset, length)`.
fn stored_range(r: &ztensor::Reader, object: &str) -> (u64, u64) {
    let c = r.object(object).unwrap().components().next().unwrap();
    (c.offset, c.length)
}

/// Flips a bit of the zstd stream at `(offset, length)` of the file at `path` where the
/// stream still decodes, to the same bytes but for `values` (the only place they are in
/// what it decodes to), which change.
fn change_decoded_bytes(path: &Path, (offset, length): (u64, u64), values: &[u8]) {
    let good = std::fs::read(path).unwrap();
    let decoded = zstd::decode_all(&good[offset as usize..(offset + length) as usize]).unwrap();
    let data = (0..decoded.len())
        .find(|&i| decoded[i..].starts_with(values))
        .unwrap();
    change_decoded_range(path, (offset, length), data..data + values.len());
}

/// Flips a bit of the zstd stream at `(offset, length)` of the file at `path` where the
/// stream still decodes, to the same bytes but in `changed` (a range of what it decodes to:
/// a literal there, or a match's offset where the match is the range).
fn change_decoded_range(path: &Path, (offset, length): (u64, u64), changed: Range<usize>) {
    let (offset, length) = (offset as usize, length as usize);
    let good = std::fs::read(path).unwrap();
    let stream = &good[offset..offset + length];
    let decoded = zstd::decode_all(stream).unwrap();
    let (before, after) = (changed.start, changed.end);
    let (flipped, bit) = (0..length)
        .flat_map(|at| (0..8).map(move |bit| (at, 1u8 << bit)))
        .find(|&(at, bit)| {
            let mut bad = stream.to_vec();
            bad[at] ^= bit;
            zstd::decode_all(bad.as_slice()).is_ok_and(|d| {
                d.len() == decoded.len()
                    && d[..before] == decoded[..before]
                    && d[after..] == decoded[after..]
                    && d != decoded
            })
        })
        .expect("a bit of the stream that changes only the range");
    let mut bad = good.clone();
    bad[offset + flipped] ^= bit;
    std::fs::write(path, bad).unwrap();
}

/// torch reads a record by its central directory entry and checks its bytes against the
/// CRC-32 there: a compressed chunk whose directory alone is damaged (the entry's CRC-32
/// changed, the record and its data descriptor intact) fails every read and `verify`, as
/// `torch.distributed.checkpoint.load` fails on it.
#[test]
fn a_compressed_chunk_whose_central_directory_disagrees_is_refused_when_read() {
    let r = ztensor::open(dir().join("zstd/.metadata")).unwrap();
    let (offset, length) = stored_range(&r, "embed.weight");
    let tmp = copy_with("zstd", |_| {});
    let path = tmp.path().join("__0_0.distcp");
    let good = std::fs::read(&path).unwrap();
    let decoded = zstd::decode_all(&good[offset as usize..(offset + length) as usize]).unwrap();
    // The central directory entry of the tensor's storage record (`<archive>/data/0`): its
    // CRC-32 and stored size lie 16 bytes into it.
    let entry = (0..decoded.len())
        .filter(|&i| decoded[i..].starts_with(b"PK\x01\x02"))
        .find(|&i| {
            let name_len = u16::from_le_bytes([decoded[i + 28], decoded[i + 29]]) as usize;
            decoded[i + 46..i + 46 + name_len].ends_with(b"/data/0")
        })
        .expect("the storage's central directory entry");
    change_decoded_range(&path, (offset, length), entry + 16..entry + 24);

    let r = ztensor::open(tmp.path().join(".metadata")).unwrap();
    let e = r.object("embed.weight").unwrap().read::<f32>().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(e.to_string().contains("central directory's entry"), "{e}");
    assert_eq!(e.object(), Some("embed.weight"), "{e}");
    assert_eq!(e.path(), Some(path.as_path()), "{e}");
    let report = r.verify();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    // The chunks of the other tensors are other archives: they read.
    assert!(r.object("layers.0.proj_t").unwrap().read::<i64>().is_ok());
}

/// A tensor sharded over two ranks and saved through the zstd transform is one compressed
/// archive per rank's chunk: the chunks are assembled as boxes, each a span of its stream,
/// and each checked against its record's CRC-32.
#[test]
fn compressed_chunks_of_a_sharded_tensor_are_assembled_and_checked() {
    let r = ztensor::open(dir().join("zstd_two_ranks/.metadata")).unwrap();
    let encoding = |name: &str| {
        r.object(name).unwrap().components[0]
            .encoding
            .name()
            .to_owned()
    };
    assert_eq!(encoding("rows"), "boxes");
    assert_eq!(encoding("cols"), "boxes");
    assert_eq!(encoding("same"), "zstd");
    let cols: Vec<i64> = (0..30).map(|i| i * 3).collect();
    assert_eq!(
        r.object("cols").unwrap().read::<i64>().unwrap().as_ref(),
        cols
    );
    let report = r.verify();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.checked, 5);

    // Rank 1's chunk of `cols`: its columns 3..6, one record of its file's archives.
    let tmp = copy_with("zstd_two_ranks", |_| {});
    let r = ztensor::open(tmp.path().join(".metadata")).unwrap();
    let Some(Encoding::Boxes(table)) = r
        .object("cols")
        .ok()
        .map(|o| o.components[0].encoding.clone())
    else {
        panic!("cols is not boxes");
    };
    let (piece, ..) = table
        .boxes
        .iter()
        .find(|(_, start, _)| start == &[0, 3])
        .unwrap();
    let path = r.shards()[piece.file as usize - 1].path.clone();
    drop(r);
    let values: Vec<u8> = (0..5)
        .flat_map(|row| (3..6).map(move |col| (row * 6 + col) * 3))
        .flat_map(|v: i64| v.to_le_bytes())
        .collect();
    change_decoded_bytes(&path, (piece.offset, piece.length), &values);
    let r = ztensor::open(tmp.path().join(".metadata")).unwrap();
    let e = r.object("cols").unwrap().read::<i64>().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ChecksumMismatch, "{e}");
    assert_eq!(e.path(), Some(path.as_path()), "{e}");
    assert!(r.object("rows").unwrap().read::<f32>().is_ok());
    assert_eq!(r.verify().failures.len(), 1);
}

/// A transform other than DCP's zstd (another extension, or zstd twice) leaves the tensor
/// listed with a defect that names it; the others still open.
#[test]
fn a_transform_this_reader_does_not_undo_is_named() {
    let tmp = copy_with("zstd", |_| {});
    let path = tmp.path().join(".metadata");
    let mut bytes = std::fs::read(&path).unwrap();
    replace(&mut bytes, b"stream.zstd/1", b"stream.lz4x/1");
    std::fs::write(&path, bytes).unwrap();
    let r = ztensor::open(&path).unwrap();
    let e = r.object("embed.weight").unwrap().read::<f32>().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("[\"stream.lz4x/1\"]"), "{e}");
    let step = format!("{:?}", r.attributes().get("step").unwrap());
    assert!(step.contains("stream.lz4x/1"), "{step}");
}

/// DCP pickles a tuple whole, tensors and all (it flattens dicts and lists of tensors only):
/// its tensors are objects under `value.index`, its other items attributes, and a changed
/// byte in one is caught by `verify` and checked reads through its archive's CRC-32.
#[test]
fn tensors_inside_a_value_are_objects_whose_crcs_are_checked() {
    let tmp = copy_with("byte_tensors", |_| {});
    let r = ztensor::open(tmp.path().join(".metadata")).unwrap();
    let names: Vec<&str> = r.objects().iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["mixed.1", "pair.0", "pair.1", "w"]);
    assert_eq!(
        r.attributes().get("mixed.0"),
        Some(&Value::Text("cfg".into()))
    );
    assert_eq!(r.attributes().get("mixed.2"), Some(&Value::Integer(3)));
    let pair = Value::Array(vec![
        Value::Text("pair".into()),
        Value::Text("mixed".into()),
    ]);
    assert_eq!(r.attributes().get("torch.dcp.bytes"), Some(&pair));
    // In place, from the data file's map.
    let o = r.object("pair.1").unwrap();
    assert!(matches!(o.bytes().unwrap(), Cow::Borrowed(_)));
    assert_eq!(o.read::<i64>().unwrap().as_ref(), [7, -8, 9]);
    assert!(r.verify().failures.is_empty());

    let (file, offset) = o.components().next().map(|c| (c.file, c.offset)).unwrap();
    let path = r.shards()[file as usize - 1].path.clone();
    drop(r);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[offset as usize + 8] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();

    let r = ztensor::open(tmp.path().join(".metadata")).unwrap();
    let report = r.verify();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    let o = r.object("pair.1").unwrap();
    // The zero-copy read does not check (the map is not read at open); the checked one does.
    assert_eq!(o.read::<i64>().unwrap().as_ref(), [7, -7, 9]);
    let e = o.read_verified::<i64>().unwrap_err();
    assert!(e.to_string().contains("CRC-32"), "{e}");
    assert_eq!(e.path(), Some(path.as_path()), "{e}");
    assert!(r.object("pair.0").unwrap().read_verified::<f32>().is_ok());
}

#[test]
fn a_tensor_in_one_chunk_is_read_in_place_and_chunks_are_assembled() {
    let r = ztensor::open(dir().join("single/.metadata")).unwrap();
    let o = r.object("embed.weight").unwrap();
    assert!(matches!(o.bytes().unwrap(), Cow::Borrowed(_)));
    // Saved transposed: torch's strides are kept and the read gathers it.
    let t = r.object("layers.0.proj_t").unwrap();
    assert!(matches!(t.bytes().unwrap(), Cow::Owned(_)));

    let r = ztensor::open(dir().join("two_ranks/.metadata")).unwrap();
    let encodings = |name: &str| -> Vec<String> {
        let o = r.object(name).unwrap();
        o.components()
            .map(|c| c.encoding.name().to_owned())
            .collect()
    };
    // Rows 0..4 in one rank's file, 4..8 in the other's: pieces in row order.
    assert_eq!(encodings("rows"), ["pieces"]);
    // Columns: boxes placed where they lie.
    assert_eq!(encodings("cols"), ["boxes"]);
    // Replicated: one chunk, saved once.
    assert_eq!(encodings("same"), ["raw"]);
}

#[test]
fn the_folder_opens_as_its_model() {
    let metadata = ztensor::model_file(&dir().join("two_ranks")).unwrap();
    assert_eq!(metadata, dir().join("two_ranks/.metadata"));
    let r = ztensor::open(metadata).unwrap();
    assert_eq!(r.version(), &FileVersion::TorchDcp);
    assert_eq!(r.len(), 3);
}

/// A data file by itself is archives one after another: read as one archive it was an error
/// about the zip's central directory, or (where the last archive is a value's) a checkpoint
/// of no tensors. It now says what the file is and what to open instead; the same bytes
/// under another name are still read as a zip.
#[test]
fn a_data_file_opened_by_itself_names_the_checkpoint_to_open() {
    // zstd's chunks are no zip: the name and the .metadata beside it tell the file.
    for sub in [
        "single",
        "two_ranks",
        "byte_tensors",
        "safetensors_format",
        "zstd",
    ] {
        let e = ztensor::open(dir().join(sub).join("__0_0.distcp")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{sub}: {e}");
        let text = e.to_string();
        assert!(
            text.contains("a data file of a PyTorch distributed checkpoint")
                && text.contains("open the checkpoint's folder or its .metadata"),
            "{sub}: {text}"
        );
    }
    let bytes = std::fs::read(dir().join("single/__0_0.distcp")).unwrap();
    let e = OpenOptions::new().open_bytes(bytes).unwrap_err();
    assert!(!e.to_string().contains("distributed checkpoint"), "{e}");
}

/// A copy of `sub` in a temporary folder, its `.metadata` passed through `edit`.
fn copy_with(sub: &str, edit: impl Fn(&mut Vec<u8>)) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dir().join(sub)).unwrap() {
        let p = e.unwrap().path();
        let mut bytes = std::fs::read(&p).unwrap();
        if p.file_name().unwrap() == ".metadata" {
            edit(&mut bytes);
        }
        std::fs::write(tmp.path().join(p.file_name().unwrap()), bytes).unwrap();
    }
    tmp
}

/// `bytes` with the one occurrence of `from` replaced by `to`, of the same length (a pickle's
/// strings carry their lengths).
fn replace(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let hits: Vec<usize> = (0..bytes.len())
        .filter(|&i| bytes[i..].starts_with(from))
        .collect();
    assert!(!hits.is_empty(), "{:?}", String::from_utf8_lossy(from));
    for at in hits {
        bytes[at..at + to.len()].copy_from_slice(to);
    }
}

/// A value that is not a tensor whose archive cannot be read (its local header damaged) is
/// said to be unreadable (naming its data file), and the tensors still open and read.
#[test]
fn an_unreadable_value_that_is_not_a_tensor_keeps_the_tensors() {
    let tmp = copy_with("single", |_| {});
    let data = tmp.path().join("__0_0.distcp");
    let mut bytes = std::fs::read(&data).unwrap();
    // `step` is written first (byte values before tensors): its archive starts the file.
    assert!(bytes.starts_with(b"PK\x03\x04"));
    bytes[0] = b'X';
    std::fs::write(&data, bytes).unwrap();
    let r = ztensor::open(tmp.path().join(".metadata")).unwrap();
    let Some(Value::Map(step)) = r.attributes().get("step") else {
        panic!("{:?}", r.attributes().get("step"))
    };
    let Some(Value::Text(why)) = step.get("unreadable") else {
        panic!("{step:?}")
    };
    assert!(why.starts_with("__0_0.distcp: invalid file: "), "{why}");
    assert_eq!(r.object("embed.weight").unwrap().bytes().unwrap().len(), 48);
}

#[test]
fn a_data_file_outside_the_folder_is_refused() {
    let tmp = copy_with("single", |b| replace(b, b"__0_0.distcp", b"../0_0.distc"));
    let e = ztensor::open(tmp.path().join(".metadata")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(
        e.to_string().contains(
            "invalid PyTorch distributed checkpoint: the storage of \"step\" names \
             \"../0_0.distc\", not a file in the checkpoint's folder"
        ),
        "{e}"
    );
}

#[test]
fn a_missing_or_short_data_file_is_named() {
    let tmp = copy_with("two_ranks", |_| {});
    std::fs::remove_file(tmp.path().join("__1_0.distcp")).unwrap();
    let e = ztensor::open(tmp.path().join(".metadata")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(e.to_string().contains("__1_0.distcp"), "{e}");

    let tmp = copy_with("single", |_| {});
    let data = tmp.path().join("__0_0.distcp");
    let len = std::fs::metadata(&data).unwrap().len();
    std::fs::File::options()
        .write(true)
        .open(&data)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let e = ztensor::open(tmp.path().join(".metadata")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(
        e.to_string().contains("lies past the end of its data file"),
        "{e}"
    );
}

#[test]
fn a_chunk_that_is_not_its_tensors_shape_is_refused() {
    // `rows` says it is 8 x 6; a chunk of 4 x 6 then covers half of a 9 x 6 tensor... made by
    // changing the size's first dimension (BININT1 8, the only `K\x08` before `K\x06`).
    let tmp = copy_with("two_ranks", |b| replace(b, b"K\x08K\x06", b"K\x09K\x06"));
    let r = ztensor::open(tmp.path().join(".metadata")).unwrap();
    let e = r.object("rows").unwrap().bytes().unwrap_err();
    assert!(e.to_string().contains("cover 8 of its rows"), "{e}");
}

/// Saved with `serialization_format=SAFETENSORS` (which `dcp.load` fails on: the script
/// checks): refused as such, naming the data file, not as a damaged archive.
#[test]
fn a_checkpoint_saved_as_safetensors_is_refused_as_torch_refuses_it() {
    let e = ztensor::open(dir().join("safetensors_format/.metadata")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string().contains("serialization_format=SAFETENSORS"),
        "{e}"
    );
    assert!(e.to_string().contains("__0_0.distcp"), "{e}");
    assert!(e.to_string().contains("object \"a\""), "{e}");
}

#[test]
fn metadata_from_memory_says_its_data_cannot_be_found() {
    let bytes = std::fs::read(dir().join("single/.metadata")).unwrap();
    let e = OpenOptions::new().open_bytes(bytes).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("opened from memory"), "{e}");
}

#[test]
fn no_damage_to_a_data_file_makes_the_reader_panic() {
    // Rank 1's file of chunks, and a file of values holding tensors (tuples, strings, ints).
    for (sub, file) in [
        ("two_ranks", "__1_0.distcp"),
        ("byte_tensors", "__0_0.distcp"),
        ("zstd", "__0_0.distcp"),
    ] {
        let tmp = copy_with(sub, |_| {});
        let path = tmp.path().join(file);
        let good = std::fs::read(&path).unwrap();
        let mut outcomes = [0usize; 2];
        for at in (0..good.len()).step_by(3) {
            for flip in [0x01u8, 0x80] {
                let mut bad = good.clone();
                bad[at] ^= flip;
                std::fs::write(&path, &bad).unwrap();
                let opened = OpenOptions::new()
                    .unmapped(true)
                    .open(tmp.path().join(".metadata"));
                let ok = opened.is_ok_and(|r| {
                    let names: Vec<String> = r.names().map(str::to_owned).collect();
                    let read = (names.iter()).all(|n| r.object(n).and_then(|o| o.bytes()).is_ok());
                    read && r.verify().failures.is_empty()
                });
                outcomes[usize::from(ok)] += 1;
            }
        }
        // Damage to what no reader looks at (padding, fields of the zip records unread)
        // passes; damage to data fails `verify` (the archives' CRC-32s) and damage to the
        // archives' structure is refused.
        assert!(
            outcomes[0] > 100 && outcomes[1] > 100,
            "{sub}: {outcomes:?}"
        );
    }
}

#[test]
fn a_changed_value_fails_the_archives_crc_in_verify_and_checked_reads() {
    let tmp = copy_with("two_ranks", |_| {});
    let r = ztensor::open(tmp.path().join(".metadata")).unwrap();
    // A byte of `cols`'s second box (rank 1's file): a tensor in chunks checks every piece.
    let Some(zt_formats::Encoding::Boxes(table)) = r
        .object("cols")
        .unwrap()
        .components()
        .next()
        .map(|c| c.encoding.clone())
    else {
        panic!("cols is not in boxes")
    };
    let (piece, ..) = table.boxes.last().unwrap();
    let path = &r.shards()[piece.file as usize - 1].path.clone();
    drop(r);
    let mut bytes = std::fs::read(path).unwrap();
    bytes[piece.offset as usize + 3] ^= 0x10;
    std::fs::write(path, bytes).unwrap();

    let r = ztensor::open(tmp.path().join(".metadata")).unwrap();
    let report = r.verify();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    let e = r.object("cols").unwrap().bytes().unwrap_err();
    assert!(e.to_string().contains("CRC-32"), "{e}");
    // The error names the data file the bad bytes are in, not the .metadata opened.
    assert_eq!(e.path(), Some(path.as_path()), "{e}");
    assert!(
        format!("{:?}", report.failures).contains(".distcp"),
        "{:?}",
        report.failures
    );
    // The other tensors are intact.
    assert!(r.object("rows").unwrap().bytes().is_ok());
}

/// A tensor of the checkpoint named as a tensor inside a value (`w` renamed `pair.0` in the
/// pickle, where it is memoized once) is a name given twice: refused, not one of them lost.
#[test]
fn a_tensor_named_as_a_values_tensor_is_refused() {
    let tmp = copy_with("byte_tensors", |bytes| {
        let at = bytes.windows(3).position(|w| w == b"\x8c\x01w").unwrap();
        bytes.splice(at..at + 3, b"\x8c\x06pair.0".iter().copied());
    });
    let e = ztensor::open(tmp.path().join(".metadata")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(
        e.to_string().contains("tensor \"pair.0\" is listed twice"),
        "{e}"
    );
}

/// A `.metadata` built by hand: protocol 2, `Metadata` made (NEWOBJ, then BUILD) with the
/// fields `state_dict_metadata` and `storage_data`, pickled by `tensors` and `storage` (each
/// pushes one dict). Records are plain dicts here, which is what the reader makes of them.
fn metadata(tensors: impl Fn(&mut Vec<u8>), storage: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut p = b"\x80\x02ctorch.distributed.checkpoint.metadata\nMetadata\n)\x81}(".to_vec();
    text(&mut p, "state_dict_metadata");
    tensors(&mut p);
    text(&mut p, "storage_data");
    storage(&mut p);
    p.extend(b"ub.");
    p
}

/// BINUNICODE of `s`.
fn text(p: &mut Vec<u8>, s: &str) {
    p.push(b'X');
    p.extend((s.len() as u32).to_le_bytes());
    p.extend(s.as_bytes());
}

/// BININT of `n`.
fn int(p: &mut Vec<u8>, n: u32) {
    p.push(b'J');
    p.extend(n.to_le_bytes());
}

/// A `MetadataIndex` of tensor `fqn` at the one-dimensional offset `offset`.
fn index(p: &mut Vec<u8>, fqn: &str, offset: u32) {
    p.extend(b"}(");
    text(p, "fqn");
    text(p, fqn);
    text(p, "offset");
    int(p, offset);
    p.extend(b"\x85u");
}

/// One record of 100,000 fields (memo 0) is every `storage_data` value of 20,000 entries: a
/// field found by a search over it would cost their product, hours. The record is refused
/// as no record of torch.distributed.checkpoint before any search.
#[test]
fn a_record_of_many_fields_is_refused() {
    let bytes = metadata(
        |p| p.push(b'}'),
        |p| {
            p.extend(b"}(");
            for i in 0..20_000 {
                if i % 1000 == 999 {
                    p.extend(b"u(");
                }
                index(p, "t", i);
                if i == 0 {
                    p.extend(b"}r\x00\x00\x00\x00(");
                    for f in 0..100_000 {
                        text(p, &format!("f{f}"));
                        p.push(b'N');
                        if f % 1000 == 999 {
                            p.extend(b"u("); // SETITEMS in batches, as pickle does
                        }
                    }
                    for (name, value) in [("offset", 0), ("length", 1)] {
                        text(p, name);
                        int(p, value);
                    }
                    text(p, "relative_path");
                    text(p, "__0_0.distcp");
                    p.push(b'u');
                } else {
                    p.extend(b"j\x00\x00\x00\x00");
                }
            }
            p.push(b'u');
        },
    );
    let e = OpenOptions::new().open_bytes(bytes).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(
        e.to_string()
            .contains("has 100003 fields: not a record of torch.distributed.checkpoint"),
        "{e}"
    );
}

/// A `TensorStorageMetadata` of a float32 vector of `len` elements in `chunks` chunks of one
/// element, chunk `i` at `offset(i)`.
fn tensor(p: &mut Vec<u8>, len: u32, chunks: u32, offset: impl Fn(u32) -> u32) {
    p.extend(b"}(");
    text(p, "properties");
    p.extend(b"ctorch\nfloat32\n\x85");
    text(p, "size");
    int(p, len);
    p.push(0x85);
    text(p, "chunks");
    p.extend(b"](");
    for i in 0..chunks {
        if i % 1000 == 999 {
            p.extend(b"e("); // APPENDS in batches, as pickle does
        }
        p.extend(b"}(");
        text(p, "offsets");
        int(p, offset(i));
        p.push(0x85);
        text(p, "sizes");
        int(p, 1);
        p.extend(b"\x85u");
    }
    p.extend(b"eu");
}

/// A `storage_data` of one entry per offset in `offsets` of tensor `fqn`.
fn storage(p: &mut Vec<u8>, fqn: &str, offsets: std::ops::Range<u32>) {
    p.extend(b"}(");
    for i in offsets {
        if i % 1000 == 999 {
            p.extend(b"u(");
        }
        index(p, fqn, i);
        p.extend(b"}(");
        text(p, "relative_path");
        text(p, "__0_0.distcp");
        for name in ["offset", "length"] {
            text(p, name);
            int(p, 0);
        }
        p.push(b'u');
    }
    p.push(b'u');
}

/// Chunks that repeat one offset (each would be an archive listed again) are refused before
/// any archive is listed, as are more chunks over all tensors than `storage_data` has
/// entries: here one tensor's chunk list of 60,000 entries, memoized and given to 10,000
/// tensors, which would be 600 million archives to list.
#[test]
fn repeated_or_shared_chunks_are_refused_before_any_archive_is_listed() {
    let once = metadata(
        |p| {
            p.extend(b"}(");
            text(p, "t");
            tensor(p, 4, 4, |_| 0);
            p.push(b'u');
        },
        |p| storage(p, "t", 0..4),
    );
    let e = OpenOptions::new().open_bytes(once).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(
        e.to_string().contains("two of its chunks start at [0]"),
        "{e}"
    );

    let shared = metadata(
        |p| {
            p.extend(b"}(");
            for t in 0..10_000 {
                if t % 1000 == 999 {
                    p.extend(b"u(");
                }
                text(p, &format!("t{t}"));
                if t == 0 {
                    tensor(p, 60_000, 60_000, |i| i);
                    p.extend(b"r\x00\x00\x00\x00");
                } else {
                    p.extend(b"j\x00\x00\x00\x00");
                }
            }
            p.push(b'u');
        },
        |p| storage(p, "t0", 0..60_000),
    );
    let e = OpenOptions::new().open_bytes(shared).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(
        e.to_string()
            .contains("its 60000 chunks are more than the storage_data entries left for them (0)"),
        "{e}"
    );
    assert!(e.to_string().contains("t1"), "{e}");
}

/// Entries that name the same bytes of a data file (each chunk and each value is an archive
/// of its own): the second is refused, a tensor's with the checkpoint, a value's as
/// unreadable, so that entries cannot make listing read one archive again and again.
#[test]
fn entries_that_share_an_archive_are_refused() {
    let data = std::fs::read(dir().join("single/__0_0.distcp")).unwrap();
    // The archives lie one after another: `step`'s, then `embed.weight`'s (f32, [3, 4]).
    let ends: Vec<u32> = (0..data.len())
        .filter(|&i| data[i..].starts_with(b"PK\x05\x06"))
        .map(|i| i as u32 + 22)
        .collect();
    let (step, weight) = ((0, ends[0]), (ends[0], ends[1]));
    let entry = |p: &mut Vec<u8>, fqn: &str, offset: bool, (start, end): (u32, u32)| {
        p.extend(b"}(");
        text(p, "fqn");
        text(p, fqn);
        if offset {
            text(p, "offset");
            int(p, 0);
            int(p, 0);
            p.push(0x86);
        }
        p.extend(b"u}(");
        text(p, "relative_path");
        text(p, "__0_0.distcp");
        text(p, "offset");
        int(p, start);
        text(p, "length");
        int(p, end - start);
        p.push(b'u');
    };
    let open = |metadata: Vec<u8>| {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(".metadata"), metadata).unwrap();
        std::fs::write(tmp.path().join("__0_0.distcp"), &data).unwrap();
        let opened = ztensor::open(tmp.path().join(".metadata"));
        (tmp, opened)
    };

    // Two entries, `a` and `b`, each pickled by `value`, both stored at `range`.
    let both = |value: &dyn Fn(&mut Vec<u8>), tensor: bool, range| {
        metadata(
            |p| {
                p.extend(b"}(");
                for name in ["a", "b"] {
                    text(p, name);
                    value(p);
                }
                p.push(b'u');
            },
            |p| {
                p.extend(b"}(");
                for name in ["a", "b"] {
                    entry(p, name, tensor, range);
                }
                p.push(b'u');
            },
        )
    };

    let bytes_value = |p: &mut Vec<u8>| {
        p.extend(b"ctorch.distributed.checkpoint.metadata\nBytesStorageMetadata\n)\x81");
    };
    let (_tmp, r) = open(both(&bytes_value, false, step));
    let r = r.unwrap();
    assert_eq!(r.attributes().get("a"), Some(&Value::Integer(7)));
    let b = format!("{:?}", r.attributes().get("b"));
    assert!(
        b.contains("unreadable") && b.contains("also another chunk's or value's"),
        "{b}"
    );

    // A float32 tensor of [3, 4] in one chunk.
    let tensor = |p: &mut Vec<u8>| {
        p.extend(b"}(");
        text(p, "properties");
        p.extend(b"ctorch\nfloat32\n\x85");
        text(p, "size");
        int(p, 3);
        int(p, 4);
        p.push(0x86);
        text(p, "chunks");
        p.extend(b"](}(");
        text(p, "offsets");
        int(p, 0);
        int(p, 0);
        p.push(0x86);
        text(p, "sizes");
        int(p, 3);
        int(p, 4);
        p.extend(b"\x86ueu");
    };
    let (_tmp, r) = open(both(&tensor, true, weight));
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(e.to_string().contains("object \"b\""), "{e}");
    assert!(
        e.to_string().contains(&format!(
            "its bytes {}..{} of \"__0_0.distcp\" are also another chunk's or value's",
            weight.0, weight.1
        )),
        "{e}"
    );
}

/// The values that are not tensors count against the cap on attribute values, all of them
/// together (each value's own walk is bounded by its pickle's size).
#[test]
fn values_that_are_not_tensors_count_against_the_value_cap() {
    let limits = |max_value_bytes| ztensor::Limits {
        decode: ztensor::manifest::DecodeLimits {
            max_value_bytes,
            ..Default::default()
        },
        ..Default::default()
    };
    let path = dir().join("single/.metadata");
    let r = OpenOptions::new().limits(limits(4096)).open(&path).unwrap();
    assert_eq!(r.attributes().get("step"), Some(&Value::Integer(7)));
    let e = OpenOptions::new()
        .limits(limits(40))
        .open(&path)
        .map(drop)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert!(
        e.message()
            .starts_with("the attribute values would take more than the memory budget of 40"),
        "{e}"
    );
}
