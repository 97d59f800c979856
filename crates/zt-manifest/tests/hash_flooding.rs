//! Maps keyed by file-controlled text must not be made quadratic by the file: decoding 4n
//! distinct keys (attribute maps, the objects map) takes a few times as long as n keys, not 16x,
//! and a duplicate is still found at the end of a large map.
//!
//! The timing check is coarse on purpose. Near-linear decoding does not give exactly 4x: the
//! maps are n log n, and 4n keys' hash set and tree fall out of a cache that n keys' fit in (on
//! a machine with 2 MiB of L2, std's `HashSet` alone takes 7-8x as long for 200,000 keys as for
//! 50,000, and the attribute map decodes in about 6x). So the bound is 12x, still well clear of
//! the 16x (and more) of a quadratic check. The exact bound, a count of key comparisons, is the
//! unit test in `src/cbor.rs`.

use std::time::{Duration, Instant};

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

/// The fastest of a few runs: the least disturbed by whatever else the machine is doing.
fn fastest(mut run: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed()
        })
        .min()
        .unwrap()
}

/// Time of 4n keys over time of n keys: 4 to 8 when decoding is near-linear (n log n, and
/// caches), 16 or more when it is quadratic.
fn growth(small: &[u8], large: &[u8], decode: impl Fn(&[u8])) -> f64 {
    decode(small); // warm up: page in the input, grow the allocator
    let a = fastest(|| decode(small));
    let b = fastest(|| decode(large));
    let ratio = b.as_secs_f64() / a.as_secs_f64().max(1e-9);
    eprintln!(
        "{} bytes: {a:?}, {} bytes: {b:?}, ratio {ratio:.2}",
        small.len(),
        large.len()
    );
    ratio
}

const N: usize = 50_000;

/// Most time 4n keys may take, as a multiple of n keys' time (see the module docs).
const MAX_GROWTH: f64 = 12.0;

#[test]
fn many_keys_decode_in_near_linear_time() {
    // One test, so the measurements do not run alongside each other.
    let (small, large) = (attribute_map(N), attribute_map(4 * N));
    let check = |bytes: &[u8], n: usize| {
        let Value::Map(m) = decode_value(bytes, DecodeLimits::default()).unwrap() else {
            panic!("not a map")
        };
        assert_eq!(m.len(), n);
    };
    check(&small, N);
    check(&large, 4 * N);
    let ratio = growth(&small, &large, |b| {
        decode_value(b, DecodeLimits::default()).unwrap();
    });
    assert!(
        ratio < MAX_GROWTH,
        "attribute map: 4x the keys took {ratio:.1}x the time"
    );

    let (small, large) = (manifest(N), manifest(4 * N));
    let m = Manifest::decode(&large, 0, DecodeLimits::default()).unwrap();
    assert_eq!(m.objects.len(), 4 * N);
    let ratio = growth(&small, &large, |b| {
        Manifest::decode(b, 0, DecodeLimits::default()).unwrap();
    });
    assert!(
        ratio < MAX_GROWTH,
        "objects map: 4x the objects took {ratio:.1}x the time"
    );
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
