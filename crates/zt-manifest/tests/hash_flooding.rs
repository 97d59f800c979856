//! Maps keyed by file-controlled text, at sizes where a quadratic duplicate check would show:
//! 200,000 distinct keys decode whole, and a duplicate is still found at the end of a large
//! map. That the check is not quadratic is proved by counting key comparisons (the unit test
//! in `src/cbor.rs`), not by timing: a test never asserts a time.

use zt_manifest::{decode_value, DecodeLimits, Manifest, Value};

/// A CBOR text string (short keys only).
fn text(out: &mut Vec<u8>, s: &str) {
    let n = s.len();
    assert!(n < 256);
    if n < 24 {
        out.push(0x60 | n as u8);
    } else {
        out.extend_from_slice(&[0x78, n as u8]);
    }
    out.extend_from_slice(s.as_bytes());
}

/// A CBOR unsigned integer.
fn uint(out: &mut Vec<u8>, v: u64) {
    out.push(0x1b);
    out.extend_from_slice(&v.to_be_bytes());
}

/// A definite-length map header with a 4-byte length.
fn map_header(out: &mut Vec<u8>, n: usize) {
    out.push(0xba);
    out.extend_from_slice(&u32::try_from(n).unwrap().to_be_bytes());
}

/// Keys that share a long prefix, so every comparison walks it: the worst case for an ordered
/// map, and irrelevant to a keyed hash.
fn key(i: usize) -> String {
    format!("model.layers.attention.projection.{i:08}")
}

/// An attribute map of `n` distinct keys, each mapped to an integer.
fn attribute_map(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 50);
    map_header(&mut out, n);
    for i in 0..n {
        text(&mut out, &key(i));
        uint(&mut out, i as u64);
    }
    out
}

/// A manifest of `n` objects, each a one-component dense object.
fn manifest(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 120);
    map_header(&mut out, 2);
    text(&mut out, "version");
    text(&mut out, "1.2.0");
    text(&mut out, "objects");
    map_header(&mut out, n);
    for i in 0..n {
        text(&mut out, &key(i));
        map_header(&mut out, 3);
        text(&mut out, "shape");
        out.push(0x81);
        uint(&mut out, 1);
        text(&mut out, "format");
        text(&mut out, "dense");
        text(&mut out, "components");
        map_header(&mut out, 1);
        text(&mut out, "data");
        map_header(&mut out, 3);
        text(&mut out, "dtype");
        text(&mut out, "u8");
        text(&mut out, "offset");
        uint(&mut out, i as u64);
        text(&mut out, "length");
        uint(&mut out, 1);
    }
    out
}

const N: usize = 50_000;

#[test]
fn large_maps_of_distinct_keys_decode_whole() {
    let Value::Map(m) = decode_value(&attribute_map(4 * N), DecodeLimits::default()).unwrap()
    else {
        panic!("not a map")
    };
    assert_eq!(m.len(), 4 * N);
    let m = Manifest::decode(&manifest(4 * N), 0, DecodeLimits::default()).unwrap();
    assert_eq!(m.objects.len(), 4 * N);
}

#[test]
fn a_duplicate_at_the_end_of_a_large_map_is_found() {
    let mut bytes = attribute_map(N);
    // One more entry, repeating the first key.
    bytes[1..5].copy_from_slice(&u32::try_from(N + 1).unwrap().to_be_bytes());
    text(&mut bytes, &key(0));
    uint(&mut bytes, 0);
    let e = decode_value(&bytes, DecodeLimits::default()).unwrap_err();
    assert!(e.message().contains("duplicate key"), "{e}");
    assert!(e.message().contains(&key(0)), "{e}");

    let mut bytes = manifest(N);
    let objects_at = 5 + 8 + 6 + 8;
    assert_eq!(bytes[objects_at], 0xba);
    bytes[objects_at + 1..objects_at + 5]
        .copy_from_slice(&u32::try_from(N + 1).unwrap().to_be_bytes());
    let one = manifest(1);
    bytes.extend_from_slice(&one[objects_at + 5..]);
    let e = Manifest::decode(&bytes, 0, DecodeLimits::default()).unwrap_err();
    assert!(e.message().contains("duplicate key"), "{e}");
}
