//! Invalid zTensor v1.0 files (the layout of PyPI ztensor 1.0.0/1.0.1: `ZTEN1000`, blobs, a
//! `"tensors"` manifest and its size last, no footer magic), built by hand: our writer writes
//! v1.2 only. Each breaks one rule of that layout; the valid v1.0 files are the originals in
//! fixtures/interop.

use std::collections::BTreeMap;

use ztensor::manifest::encode_value;
use ztensor::Value;

use crate::fixture_set::Corpus;

/// f32 [1.0, 2.0].
const EIGHT: &[u8] = &[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40];

fn map(entries: &[(&str, Value)]) -> Value {
    Value::Map(
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
    )
}

/// A v1.0 tensor `w` of shape `[2]` whose one component `data` is at `offset` for `length`.
fn tensor(dtype: &str, offset: u64, length: u64) -> Value {
    let data = map(&[("offset", offset.into()), ("length", length.into())]);
    map(&[
        ("dtype", dtype.into()),
        ("shape", Value::Array(vec![2u64.into()])),
        ("format", "dense".into()),
        ("components", map(&[("data", data)])),
    ])
}

/// The manifest the 1.0 writer writes around `tensors`.
fn manifest(tensors: Value) -> Value {
    map(&[
        ("version", "1.0".into()),
        ("generator", "zTensor-Rust v0.1.0".into()),
        ("attributes", map(&[])),
        ("tensors", tensors),
    ])
}

/// Header, the eight data bytes at 64, the manifest and its size.
fn file(manifest: &Value) -> Vec<u8> {
    let mut f = b"ZTEN1000".to_vec();
    f.resize(64, 0);
    f.extend_from_slice(EIGHT);
    let m = encode_value(manifest);
    f.extend_from_slice(&m);
    f.extend_from_slice(&(m.len() as u64).to_le_bytes());
    f
}

fn good() -> Vec<u8> {
    file(&manifest(map(&[("w", tensor("float32", 64, 8))])))
}

pub fn invalid(c: &mut Corpus) {
    // Cut short: the last 8 bytes are no plausible size, so the file is a damaged v1.1/v1.2 one.
    let mut b = good();
    b.truncate(b.len() - 3);
    c.invalid(
        "v1_0_truncated.zt",
        b,
        "open",
        "InvalidFile",
        "bad footer magic 31 2e 30 89 00 00 00 00: expected \"ZTEN1000\" (file truncated?)",
    );
    let mut b = good();
    let n = b.len();
    b[n - 8..].copy_from_slice(&(n as u64).to_le_bytes());
    c.invalid(
        "v1_0_size_past_file.zt",
        b,
        "open",
        "InvalidFile",
        "bad footer magic d9 00 00 00 00 00 00 00: expected \"ZTEN1000\" (file truncated?)",
    );
    // A size that fits but does not reach back to a CBOR map.
    let mut b = good();
    let n = b.len();
    b[n - 8..].copy_from_slice(&3u64.to_le_bytes());
    c.invalid(
        "v1_0_size_not_at_manifest.zt",
        b,
        "open",
        "InvalidFile",
        "bad footer magic 03 00 00 00 00 00 00 00: expected \"ZTEN1000\" (file truncated?)",
    );
    // A v1.2 manifest whose footer magic was cut off is not read as v1.0.
    let m = map(&[("version", "1.2.0".into()), ("objects", map(&[]))]);
    c.invalid(
        "v1_0_v12_without_footer.zt",
        file(&m),
        "open",
        "InvalidFile",
        "manifest version \"1.2.0\" in a file without footer magic: only v1.0 ends with the manifest size (file truncated?)",
    );
    let m = map(&[("version", "1.0".into()), ("objects", map(&[]))]);
    c.invalid(
        "v1_0_no_tensors.zt",
        file(&m),
        "open",
        "InvalidFile",
        "v1.0 manifest has no \"tensors\"",
    );
    c.invalid(
        "v1_0_unknown_dtype.zt",
        file(&manifest(map(&[("w", tensor("float8", 64, 8))]))),
        "open",
        "InvalidFile",
        "unknown v1.0 dtype \"float8\"",
    );
    c.invalid(
        "v1_0_blob_into_manifest.zt",
        file(&manifest(map(&[("w", tensor("float32", 64, 16))]))),
        "open",
        "InvalidFile",
        "blob [64, 80) reaches past the data area, which ends at 72 where the manifest starts",
    );
    c.invalid(
        "v1_0_length_not_shape.zt",
        file(&manifest(map(&[("w", tensor("float64", 64, 8))]))),
        "open",
        "InvalidFile",
        "8 bytes of data, but shape [2] of f64 takes 16",
    );
}
