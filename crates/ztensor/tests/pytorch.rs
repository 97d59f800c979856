//! PyTorch checkpoints written by torch.save itself (`tools/interop/make_torch.py`), read
//! without running their pickles: every tensor reads as the values torch was given
//! (row-major, little-endian, compared byte for byte with `expected.json`), mapped and
//! unmapped; contiguous tensors come from the map without a copy; tied weights and views of
//! one storage are all listed and show their storage; strided tensors read correctly;
//! non-tensor values become attributes; unknown globals stay opaque; a model pickled whole
//! lists what its `state_dict()` holds.

#[path = "support/expected.rs"]
mod expected;
#[path = "support/checkpoint.rs"]
mod support;

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use ztensor::{FileVersion, OpenOptions, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/pytorch")
}

#[test]
fn every_tensor_reads_as_torch_wrote_it() {
    let text = std::fs::read_to_string(dir().join("expected.json")).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    let files = expected["files"].as_object().unwrap();
    let mut checked = 0;
    for (file, tensors) in files {
        for unmapped in [false, true] {
            let r = OpenOptions::new()
                .unmapped(unmapped)
                .open(dir().join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            let version = if file.starts_with("legacy") {
                FileVersion::PyTorchLegacy
            } else if file.starts_with("torchscript") {
                FileVersion::TorchScript
            } else {
                FileVersion::PyTorch
            };
            assert_eq!(r.version(), &version);
            let tensors = tensors.as_object().unwrap();
            assert_eq!(
                r.len(),
                tensors.len(),
                "{file}: {:?}",
                r.names().collect::<Vec<_>>()
            );
            for (name, want) in tensors {
                expected::check_object(&r, file, name, want);
                checked += 1;
            }
            assert!(r.verify().is_ok(), "{file}");
        }
    }
    assert!(checked >= 104, "{checked}");
}

/// torch's FP4 dtype (`float4_e2m1fn_x2`, two values a byte, torch's shape counting bytes)
/// reads as our `f4_e2m1`, whose last dimension counts values: packed, at an offset, strided
/// and transposed (gathered a byte at a time), empty. A 0-d one (two values, no dimension to
/// count them) is listed with a defect. Written by torch 2.15 (tools/interop/make_torch_fp4.py).
#[test]
fn fp4_tensors_read_with_their_values_counted() {
    let dir = dir().join("../pytorch_fp4");
    let expected = expected::load(&dir);
    let tensors = expected["files"]["fp4.pt"].as_object().unwrap();
    for unmapped in [false, true] {
        let r = OpenOptions::new()
            .unmapped(unmapped)
            .open(dir.join("fp4.pt"))
            .unwrap();
        assert_eq!(r.len(), tensors.len() + 1);
        for (name, want) in tensors {
            expected::check_object(&r, "fp4.pt", name, want);
        }
        let e = r.object("scalar").unwrap().bytes().unwrap_err();
        assert_eq!(e.kind(), ztensor::ErrorKind::Unsupported, "{e}");
        assert!(
            e.to_string().contains("a 0-d float4_e2m1fn_x2 tensor"),
            "{e}"
        );
    }
    // E2M1 codes 1 and 2 (the low nibble first) are 0.5 and 1.0.
    let r = ztensor::open(dir.join("fp4.pt")).unwrap();
    let packed = r.object("packed").unwrap().read_f32().unwrap();
    assert_eq!(&packed[..2], &[0.5, 1.0]);
}

fn state_dict() -> ztensor::Reader {
    ztensor::open(dir().join("state_dict.pt")).unwrap()
}

fn text_attr<'a>(o: &'a ztensor::ObjectInfo, key: &str) -> Option<&'a str> {
    o.attributes.get(key).and_then(Value::as_str)
}

#[test]
fn tied_weights_and_views_share_a_storage_visibly() {
    let r = state_dict();
    let embed = r.object("state_dict.embed.weight").unwrap();
    let head = r.object("state_dict.head.weight").unwrap();
    let transposed = r.object("state_dict.encoder.layer1.w").unwrap();
    let storage = text_attr(&embed, "torch.storage").unwrap();
    assert_eq!(text_attr(&head, "torch.storage"), Some(storage));
    assert_eq!(text_attr(&transposed, "torch.storage"), Some(storage));
    assert_eq!(embed.components[0].offset, head.components[0].offset);
    // Views into one int32 storage: a window at an offset, every other element.
    let window = r.object("state_dict.window").unwrap();
    let every_other = r.object("state_dict.every_other").unwrap();
    assert_eq!(
        text_attr(&window, "torch.storage"),
        text_attr(&every_other, "torch.storage")
    );
    assert_eq!(
        window.attributes.get("torch.storage_offset"),
        Some(&Value::Integer(5))
    );
    assert_eq!(
        &r.read::<i32>("state_dict.window").unwrap()[..],
        &[5, 6, 7, 8, 9, 10]
    );
    assert_eq!(
        &r.read::<i32>("state_dict.every_other").unwrap()[..],
        &[0, 2, 4, 6, 8, 10, 12, 14, 16, 18]
    );
}

#[test]
fn strided_tensors_are_read_as_the_tensor() {
    let r = state_dict();
    let t = r.read::<f32>("state_dict.encoder.layer1.w").unwrap();
    assert_eq!(
        &r.object("state_dict.encoder.layer1.w").unwrap().shape[..],
        &[3, 4]
    );
    assert_eq!(&t[..], &[0., 3., 6., 9., 1., 4., 7., 10., 2., 5., 8., 11.]);
    assert!(
        matches!(t, Cow::Owned(_)),
        "a transpose is gathered into a copy"
    );
    let e = r.read::<f32>("state_dict.expanded").unwrap();
    assert_eq!(&e[..], &[7., 8., 7., 8., 7., 8.]);
    let o = r.object("state_dict.expanded").unwrap();
    assert_eq!(
        o.attributes.get("torch.stride"),
        Some(&Value::Array(vec![Value::Integer(0), Value::Integer(1)]))
    );
}

#[test]
fn contiguous_tensors_come_from_the_map() {
    let r = ztensor::open(dir().join("pytorch_model.bin")).unwrap();
    for name in r.names() {
        let v = r.read::<f32>(name).unwrap();
        assert!(matches!(v, Cow::Borrowed(_)), "{name}");
    }
    let r = ztensor::open(dir().join("dtypes.pt")).unwrap();
    for name in [
        "float32",
        "bfloat16",
        "float8_e4m3fn",
        "complex128",
        "uint64",
    ] {
        assert!(
            matches!(r.object(name).unwrap().bytes().unwrap(), Cow::Borrowed(_)),
            "{name}"
        );
    }
}

#[test]
fn other_values_become_attributes() {
    let r = state_dict();
    let a = r.attributes();
    assert_eq!(a.get("epoch"), Some(&Value::Integer(3)));
    assert_eq!(a.get("name"), Some(&Value::Text("tiny".into())));
    assert_eq!(a.get("lr"), Some(&Value::Float(0.5)));
    assert_eq!(
        a.get("betas"),
        Some(&Value::Array(vec![Value::Float(0.9), Value::Float(0.999)]))
    );
    assert_eq!(
        a.get("flags"),
        Some(&Value::Array(vec![Value::Bool(true), Value::Null]))
    );
}

#[test]
fn a_big_endian_checkpoint_is_swapped_when_read() {
    let r = ztensor::open(dir().join("big_endian.pt")).unwrap();
    let o = r.object("f32").unwrap();
    assert_eq!(o.components[0].byte_order, ztensor::ByteOrder::Big);
    assert_eq!(&r.read::<f32>("f32").unwrap()[..], &[1.5, -2.0, 3.25, 1e-3]);
    assert_eq!(&r.read::<i64>("i64").unwrap()[..], &[1, -2, 1 << 40]);
}

#[test]
fn a_training_checkpoint_keeps_its_other_values_and_builds_nothing() {
    let r = ztensor::open(dir().join("training.pt")).unwrap();
    let a = r.attributes();
    let opaque = |n: &str| {
        Value::Map(std::collections::BTreeMap::from([(
            "opaque".to_owned(),
            Value::Text(n.to_owned()),
        )]))
    };
    assert_eq!(a.get("epoch"), Some(&Value::Integer(7)));
    assert_eq!(a.get("args"), Some(&opaque("argparse.Namespace")));
    assert_eq!(a.get("when"), Some(&opaque("datetime.datetime")));
    // A set, pickled as `set([...])`, is its items (Python's set order: compared sorted).
    let Some(Value::Array(tags)) = a.get("tags") else {
        panic!("{:?}", a.get("tags"))
    };
    let mut tags: Vec<_> = tags.iter().filter_map(Value::as_str).collect();
    tags.sort_unstable();
    assert_eq!(tags, ["a", "b"]);
    assert_eq!(
        a.get("optimizer.param_groups.0.lr"),
        Some(&Value::Float(1e-3))
    );
    assert_eq!(
        a.get("optimizer.param_groups.0.params"),
        Some(&Value::Array((0..4).map(Value::Integer).collect()))
    );
    // The optimizer's state is keyed by integers: dotted names all the same.
    assert!(r.object("optimizer.state.3.exp_avg_sq").is_ok());
}

#[test]
fn verify_checks_every_zip_entry_crc_and_names_a_damaged_one() {
    let bytes = std::fs::read(dir().join("state_dict.pt")).unwrap();
    let r = OpenOptions::new().open_bytes(bytes.clone()).unwrap();
    let report = r.verify();
    assert!(report.is_ok(), "{:?}", report.failures);
    // data.pkl, byteorder, version, ..., and every storage: more checks than tensors.
    assert!(report.checked > r.len(), "{} checks", report.checked);

    // One byte of a storage changed: the values read (zip stores them as they are), and
    // verify says which entry is damaged, where, and that the file is at fault.
    let o = r
        .objects()
        .iter()
        .find(|o| o.name == "state_dict.head.weight")
        .unwrap();
    let at = o.components[0].offset as usize;
    let mut damaged = bytes;
    damaged[at] ^= 0x01;
    let r = OpenOptions::new().open_bytes(damaged).unwrap();
    assert!(r.read::<f32>("state_dict.head.weight").is_ok());
    let report = r.verify();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    let e = &report.failures[0];
    assert_eq!(e.kind(), ztensor::ErrorKind::ChecksumMismatch, "{e}");
    assert!(e.to_string().contains("/data/"), "{e}");
    assert!(e.to_string().contains("CRC-32"), "{e}");
}

/// Where each local header of `bytes` starts, with its name's length.
fn local_headers(bytes: &[u8]) -> Vec<(usize, usize)> {
    (0..bytes.len().saturating_sub(30))
        .filter(|&i| bytes[i..].starts_with(b"PK\x03\x04"))
        .map(|i| {
            (
                i,
                u16::from_le_bytes([bytes[i + 26], bytes[i + 27]]) as usize,
            )
        })
        .collect()
}

/// What torch itself (miniz) reads, found comparing `torch.load(weights_only=True)` with ours
/// on damaged copies of this file (`tools/interop/damaged_originals.py --api torch`).
#[test]
fn the_archive_is_read_by_torchs_rules() {
    let intact = std::fs::read(dir().join("state_dict.pt")).unwrap();
    let read_all = |bytes: Vec<u8>| -> ztensor::Result<Vec<(String, Vec<u8>)>> {
        let r = OpenOptions::new().open_bytes(bytes)?;
        let mut out = Vec::new();
        for name in r.names() {
            out.push((name.to_owned(), r.object(name)?.bytes()?.to_vec()));
        }
        Ok(out)
    };
    let want = read_all(intact.clone()).unwrap();
    assert!(want.len() >= 8, "{}", want.len());
    let headers = local_headers(&intact);
    assert!(headers.len() > 8, "{headers:?}");

    // miniz never reads a local header's name, only its length: another name of the same
    // length leaves every byte where it was, so torch and we read the intact values.
    let mut b = intact.clone();
    for &(at, name_len) in &headers {
        b[at + 30 + name_len - 1] ^= 0x01;
    }
    assert_eq!(read_all(b).unwrap(), want);
    // A name of another length moves the data, which torch then reads from the wrong place
    // without a word: refused, naming the entry.
    let (at, name_len) = headers[4];
    let mut b = intact.clone();
    b[at + 26..at + 28].copy_from_slice(&(name_len as u16 + 1).to_le_bytes());
    let e = read_all(b).unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidFile, "{e}");
    let message = e.to_string();
    assert!(message.contains("its data would move"), "{message}");
    assert!(message.contains("state_dict/"), "{message}");

    // torch writes the zip64 end records too, and miniz takes the directory from the zip64
    // one where the locator points: counts damaged in the plain end record do not matter.
    let eocd = intact.len() - 22;
    assert_eq!(&intact[eocd..eocd + 4], b"PK\x05\x06");
    let mut b = intact.clone();
    b[eocd + 10..eocd + 12].copy_from_slice(&155u16.to_le_bytes());
    assert_eq!(read_all(b).unwrap(), want);
    // ... and a damaged zip64 directory size refuses the file, as torch does ("unsupported
    // central directory size").
    let z64 = eocd - 20 - 56;
    assert_eq!(&intact[z64..z64 + 4], b"PK\x06\x06");
    let mut b = intact.clone();
    b[z64 + 40..z64 + 48].copy_from_slice(&(1u64 << 47).to_le_bytes());
    let e = read_all(b).unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("at most 4 GiB"), "{e}");
    // miniz reads the zip64 end record where the locator points, and nowhere else: past the
    // file refuses it ("not a ZIP archive").
    let mut b = intact.clone();
    b[eocd - 20 + 12] = 0x80;
    let e = read_all(b).unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidFile, "{e}");
    assert!(
        e.to_string().contains("runs past the end of the file"),
        "{e}"
    );
    // Bytes after the end record, or a comment length that no longer reaches the end, are not
    // looked at.
    let mut b = intact.clone();
    b.extend_from_slice(b"\xd0\x05");
    assert_eq!(read_all(b).unwrap(), want);
    let mut b = intact.clone();
    b[eocd + 20] = 0xbf;
    assert_eq!(read_all(b).unwrap(), want);
    // A record on another disk than the end record's refuses the archive ("unsupported
    // multidisk archive"); disk 1 passes.
    let first_record = u32::from_le_bytes(intact[z64 + 48..z64 + 52].try_into().unwrap());
    let disk_field = first_record as usize + 34;
    let mut b = intact.clone();
    b[disk_field] = 1;
    assert_eq!(read_all(b).unwrap(), want);
    let mut b = intact;
    b[disk_field] = 2;
    let e = read_all(b).unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("starts on disk 2"), "{e}");
}

/// torch before 0.4 pickled a tensor as `torch._utils._rebuild_tensor(storage, offset, size,
/// stride)`, four arguments where v2 has six; `torch.load(weights_only=True)` allows it, and
/// published checkpoints (lpips' v0.0 weights) hold it. It was listed as an opaque value.
#[test]
fn a_tensor_pickled_by_torch_before_0_4_is_a_tensor() {
    let v2 = support::checkpoint(6, 1, &[2, 2], &[2, 1], false);
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let at = find(&v2, b"_rebuild_tensor_v2\n").unwrap();
    let mut old = v2[..at].to_vec();
    old.extend(b"_rebuild_tensor\n");
    let rest = &v2[at + b"_rebuild_tensor_v2\n".len()..];
    // v2's last two arguments (requires_grad False, an empty dict of hooks) go.
    let end = find(rest, b"t\x89}tRu.").unwrap();
    old.extend(&rest[..end]);
    old.extend(b"ttRu.");
    old.extend(&rest[end + b"t\x89}tRu.".len()..]);
    // The pickle's entry grew shorter: rebuild the zip around the new pickle.
    let pkl_start = find(&old, b"\x80\x02").unwrap();
    let pkl_end = find(&old, b"tRu.").unwrap() + 4;
    let pickle = old[pkl_start..pkl_end].to_vec();
    let storage: Vec<u8> = (0..6i32).flat_map(|v| (v * 7 - 3).to_le_bytes()).collect();
    let file = support::zip(
        &[
            ("archive/data.pkl", &pickle),
            ("archive/byteorder", b"little"),
            ("archive/data/0", &storage),
        ],
        &[],
    );
    let r = OpenOptions::new().open_bytes(file).unwrap();
    let t = r.object("t").unwrap();
    assert_eq!(t.shape(), &[2, 2]);
    // Offset 1, strides (2, 1): elements 1, 2, 3, 4 of the storage.
    assert_eq!(&t.read::<i32>().unwrap()[..], &[4, 11, 18, 25]);
}

/// The pickle of `support::checkpoint`, cut out of its zip.
fn checkpoint_pickle() -> Vec<u8> {
    let file = support::checkpoint(6, 0, &[6], &[1], false);
    let find = |needle: &[u8]| {
        file.windows(needle.len())
            .position(|w| w == needle)
            .unwrap()
    };
    file[find(b"\x80\x02")..find(b"tRu.") + 4].to_vec()
}

fn checkpoint_with(pickle: &[u8]) -> Vec<u8> {
    let storage: Vec<u8> = (0..6i32).flat_map(|v| (v * 7 - 3).to_le_bytes()).collect();
    support::zip(
        &[
            ("archive/data.pkl", pickle),
            ("archive/byteorder", b"little"),
            ("archive/data/0", &storage),
        ],
        &[],
    )
}

/// A tensor built by a call we do not evaluate (a quantized tensor's `_rebuild_qtensor`,
/// here a rebuild function under a name torch does not have) was an opaque attribute, so a
/// conversion dropped it unseen. It is listed, and reading it says which call built it;
/// `torch.load(weights_only=True)` refuses such a file whole.
#[test]
fn a_tensor_built_by_a_call_we_do_not_evaluate_is_listed_and_unreadable() {
    let mut renamed = checkpoint_pickle();
    let at = renamed
        .windows(18)
        .position(|w| w == b"_rebuild_tensor_v2")
        .unwrap();
    renamed[at + 17] = b'9';
    let r = OpenOptions::new()
        .open_bytes(checkpoint_with(&renamed))
        .unwrap();
    assert_eq!(r.names().collect::<Vec<_>>(), ["t"]);
    assert!(r.attributes().is_empty(), "{:?}", r.attributes());
    let e = r.read::<u8>("t").unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string().contains("torch._utils._rebuild_tensor_v9"),
        "{e}"
    );
}

/// A REDUCE whose callable is a tuple (a damaged memo index fetched the wrong value): the
/// Python unpickler and torch's weights-only one refuse it; it used to make an opaque value.
#[test]
fn a_call_of_something_not_callable_is_refused() {
    // {"t": ()(*())}
    let pickle = b"\x80\x02}(X\x01\x00\x00\x00t))Ru.";
    let e = OpenOptions::new()
        .open_bytes(checkpoint_with(pickle))
        .unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::InvalidFile, "{e}");
    assert!(e.to_string().contains("REDUCE calls a tuple"), "{e}");
}

/// A dict subclass we do not know (a config dict; here a renamed `OrderedDict`) is built by
/// `NEWOBJ` and filled by `SETITEMS`: its items are its contents. They were dropped with the
/// object left opaque, and a tensor among them went unseen.
#[test]
fn the_items_of_a_dict_subclass_are_its_contents() {
    let p = checkpoint_pickle();
    let start = p.windows(13).position(|w| w == b"ctorch._utils").unwrap();
    let tensor = &p[start..p.len() - 2]; // up to its REDUCE, before "u."
    let mut pickle =
        b"\x80\x02}(X\x01\x00\x00\x00dc__main__\nMyDict\n)\x81(X\x01\x00\x00\x00t".to_vec();
    pickle.extend(tensor);
    pickle.extend(b"uu.");
    let r = OpenOptions::new()
        .open_bytes(checkpoint_with(&pickle))
        .unwrap();
    assert_eq!(r.names().collect::<Vec<_>>(), ["d.t"]);
    assert_eq!(&r.read::<i32>("d.t").unwrap()[..], &[-3, 4, 11, 18, 25, 32]);
}
