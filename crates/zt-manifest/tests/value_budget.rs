//! What attribute values may take once decoded: `DecodeLimits::max_value_bytes`, charged
//! by both CBOR readers as the values are built, with the offset where the cap was passed.

use zt_manifest::*;

/// `n` attribute values of one CBOR byte each: `{"big": [0, 0, ...]}` as attributes.
fn attributes_of_zeros(n: usize) -> Attributes {
    let mut a = Attributes::new();
    a.insert("big".into(), Value::Array(vec![Value::Integer(0); n]));
    a
}

fn limits_of(max_value_bytes: u64) -> DecodeLimits {
    DecodeLimits {
        max_value_bytes,
        ..DecodeLimits::default()
    }
}

const NODE: u64 = std::mem::size_of::<Value>() as u64;

/// Where the `k`th zero of the array (from 0) lies in `bytes`: the zeros are the last `n`
/// bytes of their run, found by the array head `0x9a` + 4-byte length that precedes them.
fn offset_of_zero(bytes: &[u8], n: usize, k: usize) -> u64 {
    let head = [
        0x9a,
        (n >> 24) as u8,
        (n >> 16) as u8,
        (n >> 8) as u8,
        n as u8,
    ];
    let at = bytes
        .windows(5)
        .position(|w| w == head)
        .expect("the array's head");
    (at + 5 + k) as u64
}

#[test]
fn a_v1_manifest_of_one_byte_values_stops_at_the_cap() {
    let n = 100_000;
    let m = Manifest {
        version: "1.2.0".into(),
        attributes: attributes_of_zeros(n),
        ..Default::default()
    };
    let bytes = m.encode();
    assert!(bytes.len() < n + 100, "one byte a value");

    // Room for all, to the byte: the key, the array and every element.
    let all = 24 + 3 + NODE * (n as u64 + 1);
    assert_eq!(Manifest::decode(&bytes, 0, limits_of(all)).unwrap(), m);
    let e = Manifest::decode(&bytes, 0, limits_of(all - 1)).unwrap_err();
    assert_eq!(e.offset(), Some(offset_of_zero(&bytes, n, n - 1)));

    // Room for a thousand elements: refused at the next one, where it lies.
    let cap = 24 + 3 + NODE * 1001;
    let e = Manifest::decode(&bytes, 1000, limits_of(cap)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert!(
        e.message().contains(&format!(
            "the attribute values would take more than the memory budget of {cap} bytes"
        )),
        "{e}"
    );
    assert!(e.message().contains("DecodeLimits::max_value_bytes"), "{e}");
    assert_eq!(e.offset(), Some(1000 + offset_of_zero(&bytes, n, 1000)));
}

#[test]
fn a_v2_manifest_of_one_byte_values_stops_at_the_cap() {
    let n = 100_000;
    let m = ManifestV2 {
        attributes: attributes_of_zeros(n),
        ..Default::default()
    };
    let bytes = encode_manifest_v2(&m).unwrap();
    let all = 24 + 3 + NODE * (n as u64 + 1);
    assert_eq!(decode_manifest_v2(&bytes, 0, limits_of(all)).unwrap(), m);
    assert!(decode_manifest_v2(&bytes, 0, limits_of(all - 1)).is_err());

    let cap = 24 + 3 + NODE * 1001;
    let e = decode_manifest_v2(&bytes, 0, limits_of(cap)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert_eq!(e.offset(), Some(offset_of_zero(&bytes, n, 1000)));
}

#[test]
fn text_and_keys_count_by_their_length() {
    let mut a = Attributes::new();
    a.insert("k".repeat(1000), Value::Text("t".repeat(100_000)));
    let m = Manifest {
        version: "1.2.0".into(),
        attributes: a,
        ..Default::default()
    };
    let bytes = m.encode();
    let exact = 24 + 1000 + NODE + 100_000;
    assert!(Manifest::decode(&bytes, 0, limits_of(exact)).is_ok());
    let e = Manifest::decode(&bytes, 0, limits_of(exact - 1)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
}

#[test]
fn the_default_cap_is_far_above_real_attributes() {
    assert_eq!(DecodeLimits::default().max_value_bytes, 256 << 20);
    assert_eq!(DEFAULT_MAX_VALUE_BYTES, 256 << 20);
}

#[test]
fn indefinite_bytes_count_chunk_by_chunk() {
    // {"version": "1.2.0", "objects": {}, "attributes": {"b": (_ h'00' x 1000, ... x 10)}}
    let mut bytes = vec![0xa3, 0x67];
    bytes.extend(b"version");
    bytes.push(0x65);
    bytes.extend(b"1.2.0");
    bytes.push(0x67);
    bytes.extend(b"objects");
    bytes.extend([0xa0, 0x6a]);
    bytes.extend(b"attributes");
    bytes.extend([0xa1, 0x61, b'b', 0x5f]);
    for _ in 0..10 {
        bytes.extend([0x59, 0x03, 0xe8]);
        bytes.extend([0u8; 1000]);
    }
    bytes.push(0xff);
    let exact = 24 + 1 + NODE + 10_000;
    let m = Manifest::decode(&bytes, 0, limits_of(exact)).unwrap();
    assert_eq!(m.attributes["b"], Value::Bytes(vec![0; 10_000]));
    let e = Manifest::decode(&bytes, 0, limits_of(exact - 1)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
}
