//! Decoding rules and encoding layout of the v1 manifest and the v0.1 index.

use zt_manifest::*;

fn lim() -> DecodeLimits {
    DecodeLimits::default()
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// {"version": "1.2.0", "objects": {}}
const EMPTY: &str = "a2 67 76657273696f6e 65 312e322e30 67 6f626a65637473 a0";

#[test]
fn empty_manifest_round_trips_to_the_same_bytes() {
    let m = Manifest::decode(&hex(EMPTY), 0, lim()).unwrap();
    assert_eq!(m.version, "1.2.0");
    assert!(m.objects.is_empty());
    assert_eq!(m.encode(), hex(EMPTY));
}

#[test]
fn real_v123_manifest_reencodes_byte_identically() {
    // The manifest of shared/interop/zt/v123_all.zt, copied to fixtures/interop/.
    let file = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/interop/v123_all.zt"
    ))
    .unwrap();
    let n = u64::from_le_bytes(file[file.len() - 16..file.len() - 8].try_into().unwrap()) as usize;
    let bytes = &file[file.len() - 16 - n..file.len() - 16];
    let m = Manifest::decode(bytes, 0, lim()).unwrap();
    assert_eq!(m.objects.len(), 13);
    let fp8 = &m.objects["fp8"];
    assert_eq!(fp8.attributes["f"], Value::Float(1.25));
    assert_eq!(fp8.attributes["neg"], Value::Integer(-3));
    assert_eq!(fp8.attributes["b"], Value::Bytes(vec![1, 2]));
    assert_eq!(fp8.attributes["none"], Value::Null);
    assert_eq!(
        fp8.components.get("data").unwrap().logical_type.as_deref(),
        Some("f8_e4m3fn")
    );
    assert_eq!(
        m.encode(),
        bytes,
        "our encoder lays out a manifest exactly as ztensor 1.2.3 does"
    );
}

#[test]
fn structural_errors() {
    let err = |h: &str| Manifest::decode(&hex(h), 100, lim()).unwrap_err();
    // trailing byte
    let e = err(&format!("{EMPTY} 00"));
    assert!(e.message().contains("trailing"), "{e}");
    assert_eq!(
        e.offset(),
        Some(100 + 24),
        "the 24-byte manifest ends there"
    );
    // duplicate key
    let e = err(
        "a3 67 76657273696f6e 65 312e322e30 67 6f626a65637473 a0 67 76657273696f6e 65 312e322e30",
    );
    assert!(e.message().contains("duplicate key \"version\""), "{e}");
    // missing objects / version
    assert!(err("a1 67 76657273696f6e 65 312e322e30")
        .message()
        .contains("no \"objects\""));
    assert!(err("a1 67 6f626a65637473 a0")
        .message()
        .contains("no \"version\""));
    // major version 2
    let e = err("a2 67 76657273696f6e 65 322e302e30 67 6f626a65637473 a0");
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    // root not a map, not CBOR at all, length larger than input
    assert!(err("80").message().contains("must be a map"));
    assert!(err("ff").message().contains("must be a map, found break"));
    assert!(
        err("a1 78 ff 61").message().contains("runs past the end"),
        "{}",
        err("a1 78 ff 61")
    );
    assert!(err("bb 00000000ffffffff")
        .message()
        .contains("larger than the remaining input"));
    // non-text key
    assert!(err("a1 01 02")
        .message()
        .contains("keys of the manifest root must be text"));
}

#[test]
fn deep_nesting_is_a_limit_not_a_stack_overflow() {
    let mut b = hex("a3 67 76657273696f6e 65 312e322e30 67 6f626a65637473 a0 61 78");
    b.extend(std::iter::repeat_n(0x81, 10_000));
    b.push(0x00);
    let e = Manifest::decode(&b, 0, lim()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
}

fn one_component(fields: &str, n: u8) -> Vec<u8> {
    // {"version":"1.2.0","objects":{"w":{"shape":[2],"format":"dense","components":{"data":{...}}}}}
    hex(&format!(
        "a2 67 76657273696f6e 65 312e322e30 67 6f626a65637473 a1 61 77 a3 \
         65 7368617065 81 02 66 666f726d6174 65 64656e7365 6a 636f6d706f6e656e7473 a1 64 64617461 {:02x} {fields}",
        0xa0 + n
    ))
}

#[test]
fn component_fields_are_checked_and_located() {
    let ok = one_component(
        "65 6474797065 63 663332 66 6f6666736574 18 40 66 6c656e677468 08",
        3,
    );
    let m = Manifest::decode(&ok, 0, lim()).unwrap();
    assert_eq!(m.objects["w"].components.get("data").unwrap().offset, 64);
    assert_eq!(Manifest::decode(&m.encode(), 0, lim()).unwrap(), m);

    let neg = one_component(
        "65 6474797065 63 663332 66 6f6666736574 38 3f 66 6c656e677468 08",
        3,
    );
    let e = Manifest::decode(&neg, 0, lim()).unwrap_err();
    assert!(
        e.message().contains("offset must be an unsigned integer"),
        "{e}"
    );
    assert_eq!((e.object(), e.component()), (Some("w"), Some("data")));

    let float = one_component(
        "65 6474797065 63 663332 66 6f6666736574 f9 3c00 66 6c656e677468 08",
        3,
    );
    assert!(Manifest::decode(&float, 0, lim())
        .unwrap_err()
        .message()
        .contains("found f16"));

    let missing = one_component("65 6474797065 63 663332 66 6f6666736574 18 40", 2);
    assert!(Manifest::decode(&missing, 0, lim())
        .unwrap_err()
        .message()
        .contains("no \"length\""));

    let bad_utf8 = one_component(
        "65 6474797065 63 66ff32 66 6f6666736574 18 40 66 6c656e677468 08",
        3,
    );
    assert!(Manifest::decode(&bad_utf8, 0, lim()).is_err());

    // Unknown fields are ignored, whatever their kind.
    let unknown = one_component(
        "65 6474797065 63 663332 66 6f6666736574 18 40 66 6c656e677468 08 63 666f6f a1 61 61 82 01 f6",
        4,
    );
    assert_eq!(Manifest::decode(&unknown, 0, lim()).unwrap(), m);
}

#[test]
fn values_of_every_kind_round_trip() {
    let mut map = std::collections::BTreeMap::new();
    map.insert(
        "k".to_string(),
        Value::Array(vec![Value::Null, Value::Bool(true)]),
    );
    for v in [
        Value::Integer(0),
        Value::Integer(CBOR_INT_MAX),
        Value::Integer(CBOR_INT_MIN),
        Value::Integer(-1),
        Value::Float(1.25),
        Value::Float(0.1),
        Value::Float(1e300),
        Value::Float(f64::INFINITY),
        Value::Float(-0.0),
        Value::Text("héllo".into()),
        Value::Bytes(vec![0, 255]),
        Value::Bool(false),
        Value::Null,
        Value::Map(map),
        Value::Tag(32, Box::new(Value::Text("http://x".into()))),
    ] {
        let b = encode_value(&v);
        let back = decode_value(&b, lim()).unwrap();
        match (&v, &back) {
            (Value::Float(a), Value::Float(b)) => assert_eq!(a.to_bits(), b.to_bits()),
            _ => assert_eq!(back, v),
        }
    }
    assert_eq!(encode_value(&Value::Float(1.25)), [0xf9, 0x3d, 0x00]);
    assert_eq!(encode_value(&Value::Float(0.1)).len(), 9);
    assert_eq!(encode_value(&Value::Float(f64::NAN)), [0xf9, 0x7e, 0x00]);
}

#[test]
fn v0_1_index_round_trips_with_custom_fields() {
    let mut e = IndexEntry {
        name: "t".into(),
        offset: 64,
        size: 48,
        dtype: "float32".into(),
        shape: vec![3, 4],
        encoding: "raw".into(),
        layout: "dense".into(),
        data_endianness: Some("big".into()),
        checksum: Some("crc32c:0x389BA15E".into()),
        ..Default::default()
    };
    e.extra.insert("my_key".into(), Value::from("hello"));
    let b = encode_index(std::slice::from_ref(&e));
    assert_eq!(
        b[1], 0xbf,
        "indefinite-length maps, as the 0.1.x writers used"
    );
    assert_eq!(decode_index(&b, 0, lim()).unwrap(), vec![e]);
    assert_eq!(decode_index(&[0x80], 0, lim()).unwrap(), vec![]);
    let e = decode_index(&hex("81 a1 64 6e616d65 61 78"), 0, lim()).unwrap_err();
    assert!(e.message().contains("no \"offset\""), "{e}");
}
