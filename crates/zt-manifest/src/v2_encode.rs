//! Encoding a zTensor v2 manifest as deterministic CBOR (RFC 8949 §4.2.1), byte for byte as
//! ztensor 2.x writes it: shortest heads, definite lengths, floats in the shortest width that
//! keeps their value (NaN as `f9 7e00`), map entries sorted by the bytes of their encoded
//! keys (for text keys: shorter first, then bytewise), optional fields left out rather than
//! written as null.
//!
//! What the strict reader ([`crate::decode_manifest_v2`]) would refuse is refused here too:
//! tags, integers outside CBOR's range, duplicate keys, names that break the v2 rules, and
//! `encoding` without `decoded_length` (or the reverse).
//!
//! Everything is written into one output buffer. The fields of an object, a part and the
//! root have fixed keys, so their order is written out by hand; maps whose keys are data
//! (objects, parts, shards, attributes) have their entries encoded in the order given,
//! into a buffer beside the output, so that the first error is the one a reader of the
//! input would expect, then copied out in key order. A manifest of a million tiny objects
//! took about thirty allocations an object when every head, key and map was a `Vec` of
//! its own.

use std::cmp::Ordering;

use zt_container::{Error, Result};

use crate::v2::{check_name, check_shard_name, ManifestV2, ObjectV2, PartV2, ShardV2};
use crate::value::{Attributes, Value};

/// Encodes `m` as the bytes of a v2 manifest. The `at` fields are ignored; everything else is
/// written, in the order the format fixes (whatever the order of the vectors).
///
/// ```
/// use zt_manifest::{encode_manifest_v2, ManifestV2};
///
/// let bytes = encode_manifest_v2(&ManifestV2::default()).unwrap();
/// assert_eq!(bytes, b"\xa1\x67objects\xa0"); // {"objects": {}}
/// ```
pub fn encode_manifest_v2(m: &ManifestV2) -> Result<Vec<u8>> {
    // Errors come in the order the old tree of maps gave them: objects (in the order given,
    // then names given twice), shards, attributes.
    let mut objects = Entries::with_capacity(m.objects.len());
    let mut parts = Entries::default();
    for o in &m.objects {
        check_name(&o.name, "object")?;
        let start = objects.buf.len();
        object(&mut objects.buf, o, &mut parts).map_err(|e| e.in_object(&o.name))?;
        objects.push(&o.name, start);
    }
    objects.sort_by_key()?;
    let mut shards = Entries::with_capacity(m.shards.len());
    for s in &m.shards {
        let start = shards.buf.len();
        shard(&mut shards.buf, s)?;
        shards.push(&s.name, start);
    }
    shards.sort_by_key()?;

    let mut out = Vec::with_capacity(objects.buf.len() + objects.keys_len() + 64);
    let fields = 1 + u64::from(!m.shards.is_empty()) + u64::from(!m.attributes.is_empty());
    head(&mut out, 5, fields);
    // Root keys in encoded order: "shards" (6 bytes), "objects" (7), "attributes" (10).
    if !m.shards.is_empty() {
        text(&mut out, "shards");
        shards.write_map(&mut out);
    }
    text(&mut out, "objects");
    objects.write_map(&mut out);
    if !m.attributes.is_empty() {
        text(&mut out, "attributes");
        attributes(&mut out, &m.attributes, 1)?;
    }
    Ok(out)
}

/// The entries of a map whose keys are data: each value encoded into `buf` in the order
/// given, with its key and span, to be written out in key order.
#[derive(Default)]
struct Entries<'a> {
    buf: Vec<u8>,
    /// (key, start, end of its value in `buf`).
    spans: Vec<(&'a str, usize, usize)>,
}

impl<'a> Entries<'a> {
    fn with_capacity(n: usize) -> Self {
        Entries {
            spans: Vec::with_capacity(n),
            ..Default::default()
        }
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.spans.clear();
    }

    /// Records the value encoded into `buf` from `start` to its end under `key`.
    fn push(&mut self, key: &'a str, start: usize) {
        self.spans.push((key, start, self.buf.len()));
    }

    /// The bytes the keys take encoded, at most (for the output's capacity).
    fn keys_len(&self) -> usize {
        self.spans.iter().map(|(key, ..)| key.len() + 9).sum()
    }

    /// Sorts the entries by their encoded keys; a key given twice is an error.
    fn sort_by_key(&mut self) -> Result<()> {
        self.spans.sort_unstable_by(|a, b| key_order(a.0, b.0));
        match self.spans.windows(2).find(|w| w[0].0 == w[1].0) {
            Some(w) => Err(Error::argument(format!("key {:?} given twice", w[0].0))),
            None => Ok(()),
        }
    }

    /// Writes the map, in the order of the spans: its head, then each key and value.
    fn write_map(&self, out: &mut Vec<u8>) {
        head(out, 5, self.spans.len() as u64);
        for &(key, start, end) in &self.spans {
            text(out, key);
            out.extend_from_slice(self.buf.get(start..end).unwrap_or_default());
        }
    }
}

/// The order of deterministic CBOR's map keys for text keys: by the bytes of the encoded
/// key, which for text is shorter first (the head grows with the length), then bytewise.
fn key_order(a: &str, b: &str) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// Appends an object's map; `parts` is a buffer for its parts, reused from object to object.
fn object<'a>(out: &mut Vec<u8>, o: &'a ObjectV2, parts: &mut Entries<'a>) -> Result<()> {
    parts.clear();
    for p in &o.parts {
        check_name(&p.name, "part")?;
        let start = parts.buf.len();
        part(&mut parts.buf, p).map_err(|e| e.in_component(&p.name))?;
        parts.push(&p.name, start);
    }
    if o.parts.is_empty() {
        return Err(Error::argument("object has no parts"));
    }
    parts.sort_by_key()?;
    head(out, 5, 3 + u64::from(!o.attributes.is_empty()));
    // Keys in encoded order: "parts", "shape" (5 bytes), "layout" (6), "attributes" (10).
    text(out, "parts");
    parts.write_map(out);
    text(out, "shape");
    head(out, 4, o.shape.len() as u64);
    for &d in o.shape.iter() {
        head(out, 0, d);
    }
    text(out, "layout");
    text(out, &o.layout);
    if !o.attributes.is_empty() {
        text(out, "attributes");
        attributes(out, &o.attributes, 3)?;
    }
    Ok(())
}

/// Appends a part's map.
fn part(out: &mut Vec<u8>, p: &PartV2) -> Result<()> {
    if let Some(s) = &p.shard {
        check_shard_name(s)?;
    }
    let encoded = match (&p.encoding, p.decoded_length) {
        (Some(e), Some(n)) => Some((e, n)),
        (None, None) => None,
        _ => {
            return Err(Error::argument(
                "a v2 part has \"decoded_length\" exactly when it has \"encoding\"",
            ))
        }
    };
    let fields = 2
        + u64::from(p.logical_type.is_some())
        + u64::from(p.shard.is_some())
        + u64::from(p.digest.is_some())
        + 2 * u64::from(encoded.is_some());
    head(out, 5, fields);
    // Keys in encoded order: "blob", "type" (4 bytes), "dtype", "shard" (5), "digest" (6),
    // "encoding" (8), "decoded_length" (14).
    text(out, "blob");
    head(out, 4, 2);
    head(out, 0, p.offset);
    head(out, 0, p.length);
    if let Some(t) = &p.logical_type {
        text(out, "type");
        text(out, t);
    }
    text(out, "dtype");
    text(out, &p.dtype);
    if let Some(s) = &p.shard {
        text(out, "shard");
        text(out, s);
    }
    if let Some(d) = &p.digest {
        text(out, "digest");
        text(out, d);
    }
    if let Some((e, n)) = encoded {
        text(out, "encoding");
        text(out, e);
        text(out, "decoded_length");
        head(out, 0, n);
    }
    Ok(())
}

/// Appends a shard's map.
fn shard(out: &mut Vec<u8>, s: &ShardV2) -> Result<()> {
    check_shard_name(&s.name)?;
    head(out, 5, 2);
    // "size" (4 bytes) before "digest" (6).
    text(out, "size");
    head(out, 0, s.size);
    text(out, "digest");
    text(out, &s.digest);
    Ok(())
}

/// Appends an attribute map whose values sit at `depth` (for the 32-level cap).
fn attributes(out: &mut Vec<u8>, a: &Attributes, depth: usize) -> Result<()> {
    let mut entries = Entries::with_capacity(a.len());
    for (k, v) in a {
        check_name(k, "attribute")?;
        let start = entries.buf.len();
        value(&mut entries.buf, v, depth)
            .map_err(|e| Error::argument(format!("attribute {k:?}: {}", e.message())))?;
        entries.push(k, start);
    }
    entries.sort_by_key()?;
    entries.write_map(out);
    Ok(())
}

/// Appends one attribute value.
fn value(out: &mut Vec<u8>, v: &Value, depth: usize) -> Result<()> {
    if depth > crate::MAX_DEPTH_V2 {
        return Err(Error::argument(format!(
            "attribute nests deeper than {} levels",
            crate::MAX_DEPTH_V2
        )));
    }
    match v {
        Value::Integer(i) => {
            let (major, n) = if *i >= 0 {
                (0, u64::try_from(*i))
            } else {
                (1, u64::try_from(-1 - *i))
            };
            let n =
                n.map_err(|_| Error::argument(format!("integer {i} is outside CBOR's range")))?;
            head(out, major, n);
        }
        Value::Float(f) => float(out, *f),
        Value::Text(s) => text(out, s),
        Value::Bytes(b) => {
            head(out, 2, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::Bool(b) => out.push(if *b { 0xf5 } else { 0xf4 }),
        Value::Null => out.push(0xf6),
        Value::Array(a) => {
            head(out, 4, a.len() as u64);
            for x in a {
                value(out, x, depth + 1)?;
            }
        }
        Value::Map(m) => {
            let mut entries = Entries::with_capacity(m.len());
            for (k, x) in m {
                let start = entries.buf.len();
                value(&mut entries.buf, x, depth + 1)?;
                entries.push(k, start);
            }
            entries.sort_by_key()?;
            entries.write_map(out);
        }
        Value::Tag(t, _) => {
            return Err(Error::argument(format!(
                "CBOR tag {t}: a v2 manifest holds no tags"
            )))
        }
    }
    Ok(())
}

/// Appends the shortest head of major type `major` with argument `n`.
fn head(out: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    match n {
        0..=23 => out.push(m | n as u8),
        24..=0xff => out.extend_from_slice(&[m | 24, n as u8]),
        0x100..=0xffff => {
            out.push(m | 25);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(m | 26);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

/// Appends a text string.
fn text(out: &mut Vec<u8>, s: &str) {
    head(out, 3, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A float in the shortest of half, single and double that holds its value exactly.
fn float(out: &mut Vec<u8>, f: f64) {
    let h = half::f16::from_f64(f);
    if f.is_nan() {
        out.extend_from_slice(&[0xf9, 0x7e, 0x00]);
    } else if h.to_f64() == f {
        out.push(0xf9);
        out.extend_from_slice(&h.to_bits().to_be_bytes());
    } else if f64::from(f as f32) == f {
        out.push(0xfa);
        out.extend_from_slice(&(f as f32).to_bits().to_be_bytes());
    } else {
        out.push(0xfb);
        out.extend_from_slice(&f.to_bits().to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode_manifest_v2, DecodeLimits, Shape};
    use proptest::prelude::*;

    /// The encoder as it was before it wrote into one buffer (a `Vec` per head, key and
    /// map, every map's entries sorted by their encoded bytes): the oracle the property
    /// test holds the new one to, bytes and errors alike.
    mod reference {
        use super::super::float;
        use crate::v2::{check_name, check_shard_name, ManifestV2, ObjectV2, PartV2, ShardV2};
        use crate::value::{Attributes, Value};
        use zt_container::{Error, Result};

        pub(super) fn encode_manifest_v2(m: &ManifestV2) -> Result<Vec<u8>> {
            let mut root = Vec::new();
            let mut objects = Vec::with_capacity(m.objects.len());
            for o in &m.objects {
                check_name(&o.name, "object")?;
                objects.push((text(&o.name), object(o).map_err(|e| e.in_object(&o.name))?));
            }
            root.push((text("objects"), map(objects)?));
            if !m.shards.is_empty() {
                let mut shards = Vec::with_capacity(m.shards.len());
                for s in &m.shards {
                    shards.push((text(&s.name), shard(s)?));
                }
                root.push((text("shards"), map(shards)?));
            }
            if !m.attributes.is_empty() {
                root.push((text("attributes"), attributes(&m.attributes, 1)?));
            }
            map(root)
        }

        fn object(o: &ObjectV2) -> Result<Vec<u8>> {
            let mut shape = head(4, o.shape.len() as u64);
            for d in o.shape.iter() {
                shape.extend(head(0, *d));
            }
            let mut parts = Vec::with_capacity(o.parts.len());
            for p in &o.parts {
                check_name(&p.name, "part")?;
                parts.push((text(&p.name), part(p).map_err(|e| e.in_component(&p.name))?));
            }
            if parts.is_empty() {
                return Err(Error::argument("object has no parts"));
            }
            let mut fields = vec![
                (text("shape"), shape),
                (text("layout"), text(&o.layout)),
                (text("parts"), map(parts)?),
            ];
            if !o.attributes.is_empty() {
                fields.push((text("attributes"), attributes(&o.attributes, 3)?));
            }
            map(fields)
        }

        fn part(p: &PartV2) -> Result<Vec<u8>> {
            let mut blob = head(4, 2);
            blob.extend(head(0, p.offset));
            blob.extend(head(0, p.length));
            let mut fields = vec![(text("dtype"), text(&p.dtype)), (text("blob"), blob)];
            if let Some(t) = &p.logical_type {
                fields.push((text("type"), text(t)));
            }
            if let Some(s) = &p.shard {
                check_shard_name(s)?;
                fields.push((text("shard"), text(s)));
            }
            match (&p.encoding, p.decoded_length) {
                (Some(e), Some(n)) => {
                    fields.push((text("encoding"), text(e)));
                    fields.push((text("decoded_length"), head(0, n)));
                }
                (None, None) => {}
                _ => {
                    return Err(Error::argument(
                        "a v2 part has \"decoded_length\" exactly when it has \"encoding\"",
                    ))
                }
            }
            if let Some(d) = &p.digest {
                fields.push((text("digest"), text(d)));
            }
            map(fields)
        }

        fn shard(s: &ShardV2) -> Result<Vec<u8>> {
            check_shard_name(&s.name)?;
            map(vec![
                (text("size"), head(0, s.size)),
                (text("digest"), text(&s.digest)),
            ])
        }

        /// An attribute map whose values sit at `depth` (for the 32-level cap).
        fn attributes(a: &Attributes, depth: usize) -> Result<Vec<u8>> {
            let mut entries = Vec::with_capacity(a.len());
            for (k, v) in a {
                check_name(k, "attribute")?;
                let mut out = Vec::new();
                value(&mut out, v, depth)
                    .map_err(|e| Error::argument(format!("attribute {k:?}: {}", e.message())))?;
                entries.push((text(k), out));
            }
            map(entries)
        }

        /// Appends one attribute value.
        fn value(out: &mut Vec<u8>, v: &Value, depth: usize) -> Result<()> {
            if depth > crate::MAX_DEPTH_V2 {
                return Err(Error::argument(format!(
                    "attribute nests deeper than {} levels",
                    crate::MAX_DEPTH_V2
                )));
            }
            match v {
                Value::Integer(i) => {
                    let (major, n) = if *i >= 0 {
                        (0, u64::try_from(*i))
                    } else {
                        (1, u64::try_from(-1 - *i))
                    };
                    let n = n.map_err(|_| {
                        Error::argument(format!("integer {i} is outside CBOR's range"))
                    })?;
                    out.extend(head(major, n));
                }
                Value::Float(f) => float(out, *f),
                Value::Text(s) => out.extend(text(s)),
                Value::Bytes(b) => {
                    out.extend(head(2, b.len() as u64));
                    out.extend_from_slice(b);
                }
                Value::Bool(b) => out.push(if *b { 0xf5 } else { 0xf4 }),
                Value::Null => out.push(0xf6),
                Value::Array(a) => {
                    out.extend(head(4, a.len() as u64));
                    for x in a {
                        value(out, x, depth + 1)?;
                    }
                }
                Value::Map(m) => {
                    let mut entries = Vec::with_capacity(m.len());
                    for (k, x) in m {
                        let mut enc = Vec::new();
                        value(&mut enc, x, depth + 1)?;
                        entries.push((text(k), enc));
                    }
                    out.extend(map(entries)?);
                }
                Value::Tag(t, _) => {
                    return Err(Error::argument(format!(
                        "CBOR tag {t}: a v2 manifest holds no tags"
                    )))
                }
            }
            Ok(())
        }

        /// The shortest head of major type `major` with argument `n`.
        fn head(major: u8, n: u64) -> Vec<u8> {
            let m = major << 5;
            match n {
                0..=23 => vec![m | n as u8],
                24..=0xff => vec![m | 24, n as u8],
                0x100..=0xffff => [&[m | 25][..], &(n as u16).to_be_bytes()].concat(),
                0x1_0000..=0xffff_ffff => [&[m | 26][..], &(n as u32).to_be_bytes()].concat(),
                _ => [&[m | 27][..], &n.to_be_bytes()].concat(),
            }
        }

        fn text(s: &str) -> Vec<u8> {
            let mut out = head(3, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
            out
        }

        /// A map of encoded (key, value) pairs, sorted by key bytes; an equal key is an error.
        fn map(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<Vec<u8>> {
            entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            if let Some(w) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(Error::argument(format!(
                    "key {:?} given twice",
                    String::from_utf8_lossy(w[0].0.get(1..).unwrap_or_default())
                )));
            }
            let mut out = head(5, entries.len() as u64);
            for (k, v) in entries {
                out.extend(k);
                out.extend(v);
            }
            Ok(out)
        }
    }

    fn names() -> impl Strategy<Value = String> {
        // Short names from a few letters: ties and repeats happen, and a NUL or an empty
        // name now and then.
        prop_oneof![
            12 => proptest::string::string_regex("[ab]{1,3}").unwrap(),
            1 => proptest::string::string_regex("[ab\u{0}]{0,3}").unwrap(),
        ]
    }

    fn values() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            8 => any::<i64>().prop_map(|i| Value::Integer(i.into())),
            1 => Just(Value::Integer(1 << 64)),
            1 => Just(Value::Integer(-(1 << 64) - 1)),
            8 => any::<f64>().prop_map(Value::Float),
            8 => names().prop_map(Value::Text),
            8 => proptest::collection::vec(any::<u8>(), 0..4).prop_map(Value::Bytes),
            8 => any::<bool>().prop_map(Value::Bool),
            8 => Just(Value::Null),
            1 => Just(Value::Tag(2, Box::new(Value::Null))),
        ];
        leaf.prop_recursive(40, 64, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                proptest::collection::btree_map(names(), inner, 0..3).prop_map(Value::Map),
            ]
        })
    }

    fn attrs() -> impl Strategy<Value = Attributes> {
        proptest::collection::btree_map(names(), values(), 0..3)
    }

    fn parts() -> impl Strategy<Value = PartV2> {
        let shard = proptest::option::of(prop_oneof![
            9 => Just("s1".to_owned()),
            1 => Just("../x".to_owned()),
        ]);
        // `encoding` and `decoded_length` together, mostly.
        let encoded = prop_oneof![
            6 => any::<u64>().prop_map(|n| (Some("zt.zstd-seekable/1".to_owned()), Some(n))),
            6 => Just((None, None)),
            1 => Just((Some("zt.zstd-seekable/1".to_owned()), None)),
            1 => any::<u64>().prop_map(|n| (None, Some(n))),
        ];
        let digest = proptest::option::of(Just("xxh3:0000000000000001".to_owned()));
        let fields = (
            names(),
            any::<(u64, u64)>(),
            proptest::option::of(Just("bf16".to_owned())),
        );
        (fields, shard, encoded, digest).prop_map(
            |(
                (name, (offset, length), logical_type),
                shard,
                (encoding, decoded_length),
                digest,
            )| {
                PartV2 {
                    name,
                    dtype: "f32".into(),
                    logical_type,
                    offset,
                    length,
                    shard,
                    encoding,
                    decoded_length,
                    digest,
                    at: 0,
                }
            },
        )
    }

    fn manifests() -> impl Strategy<Value = ManifestV2> {
        let object_names = prop_oneof![
            8 => proptest::string::string_regex("[a-e]{1,4}").unwrap(),
            1 => names(),
        ];
        let object = (
            object_names,
            proptest::collection::vec(any::<u64>(), 0..3),
            prop_oneof![
                12 => proptest::collection::vec(parts(), 1..3),
                1 => proptest::collection::vec(parts(), 0..1),
            ],
            attrs(),
        )
            .prop_map(|(name, shape, parts, attributes)| ObjectV2 {
                name,
                shape: Shape::from(shape),
                layout: "dense".into(),
                parts,
                attributes,
                at: 0,
            });
        let shard = (
            prop_oneof![4 => Just("s1"), 4 => Just("s2"), 1 => Just(".hidden")],
            any::<u64>(),
        )
            .prop_map(|(name, size)| ShardV2 {
                name: name.into(),
                size,
                digest: "xxh3:0000000000000002".into(),
                at: 0,
            });
        (
            proptest::collection::vec(object, 0..5),
            proptest::collection::vec(shard, 0..3),
            attrs(),
        )
            .prop_map(|(objects, shards, attributes)| ManifestV2 {
                objects,
                shards,
                attributes,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// The one-buffer encoder gives the bytes the tree of maps gave, or the same error.
        #[test]
        fn one_buffer_encodes_as_the_tree_of_maps_did(m in manifests()) {
            let ours = encode_manifest_v2(&m).map_err(|e| e.to_string());
            let theirs = reference::encode_manifest_v2(&m).map_err(|e| e.to_string());
            prop_assert_eq!(ours, theirs);
        }
    }

    fn enc(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        value(&mut out, v, 0).unwrap();
        out
    }

    #[test]
    fn shortest_heads_and_floats_as_the_original_writes_them() {
        assert_eq!(enc(&Value::Integer(23)), [0x17]);
        assert_eq!(enc(&Value::Integer(24)), [0x18, 24]);
        assert_eq!(enc(&Value::Integer(-3)), [0x22]);
        assert_eq!(
            enc(&Value::Integer(1 << 40)),
            [0x1b, 0, 0, 1, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            enc(&Value::Integer(-(1 << 64))),
            [0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        assert!(value(&mut Vec::new(), &Value::Integer(1 << 64), 0).is_err());
        assert_eq!(enc(&Value::Float(0.25)), [0xf9, 0x34, 0x00]);
        assert_eq!(enc(&Value::Float(1.25)), [0xf9, 0x3d, 0x00]);
        assert_eq!(
            enc(&Value::Float(0.5 + 2f64.powi(-20))),
            [0xfa, 0x3f, 0x00, 0x00, 0x10]
        );
        assert_eq!(
            enc(&Value::Float(0.1)),
            [0xfb, 0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a]
        );
        assert_eq!(enc(&Value::Float(f64::NAN)), [0xf9, 0x7e, 0x00]);
        assert!(value(&mut Vec::new(), &Value::Tag(1, Box::new(Value::Null)), 0).is_err());
    }

    #[test]
    fn keys_sort_by_encoded_bytes_length_first() {
        let p = PartV2 {
            name: "data".into(),
            dtype: "f32".into(),
            offset: 4096,
            length: 47,
            encoding: Some("zt.zstd-seekable/1".into()),
            decoded_length: Some(4000),
            digest: Some("xxh3:4ecda0ef8e2cafb9".into()),
            ..Default::default()
        };
        let m = ManifestV2 {
            objects: vec![ObjectV2 {
                name: "zeros_f32".into(),
                shape: Shape::from(vec![1000]),
                layout: "dense".into(),
                parts: vec![p],
                ..Default::default()
            }],
            ..Default::default()
        };
        // Sample 03's manifest, written by ztensor 2.1.2.
        let want = concat!(
            "a1676f626a65637473a1697a65726f735f663332a3657061727473a16464617461a564626c6f62",
            "82191000182f656474797065636633326664696765737475787868333a3465636461306566386532",
            "636166623968656e636f64696e67727a742e7a7374642d7365656b61626c652f316e6465636f6465",
            "645f6c656e677468190fa0657368617065811903e8666c61796f75746564656e7365"
        );
        let got: String = encode_manifest_v2(&m)
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn what_is_written_reads_back() {
        let mut attrs = Attributes::new();
        attrs.insert(
            "list".into(),
            Value::Array(vec![Value::Integer(1), Value::from("a")]),
        );
        attrs.insert("none".into(), Value::Null);
        let m = ManifestV2 {
            objects: vec![ObjectV2 {
                name: "w".into(),
                shape: Shape::from(vec![2, 2]),
                layout: "dense".into(),
                parts: vec![PartV2 {
                    name: "data".into(),
                    dtype: "f32".into(),
                    offset: 4096,
                    length: 16,
                    shard: Some("00001-of-00002".into()),
                    ..Default::default()
                }],
                attributes: attrs.clone(),
                ..Default::default()
            }],
            shards: vec![ShardV2 {
                name: "00001-of-00002".into(),
                size: 8336,
                digest: "xxh3:0000000000000001".into(),
                ..Default::default()
            }],
            attributes: attrs,
        };
        let bytes = encode_manifest_v2(&m).unwrap();
        let mut back = decode_manifest_v2(&bytes, 0, DecodeLimits::default()).unwrap();
        back.objects[0].at = 0;
        back.objects[0].parts[0].at = 0;
        back.shards[0].at = 0;
        assert_eq!(back, m);
    }

    #[test]
    fn duplicates_and_bad_parts_are_refused() {
        let o = ObjectV2 {
            name: "w".into(),
            layout: "dense".into(),
            parts: vec![PartV2 {
                name: "data".into(),
                dtype: "u8".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let twice = ManifestV2 {
            objects: vec![o.clone(), o.clone()],
            ..Default::default()
        };
        assert!(encode_manifest_v2(&twice).is_err());
        let mut half = o;
        half.parts[0].encoding = Some("zt.zstd-seekable/1".into());
        let m = ManifestV2 {
            objects: vec![half],
            ..Default::default()
        };
        assert!(encode_manifest_v2(&m).is_err());
    }
}
