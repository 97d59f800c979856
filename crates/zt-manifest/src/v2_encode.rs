//! Encoding a zTensor v2 manifest as deterministic CBOR (RFC 8949 §4.2.1), byte for byte as
//! ztensor 2.x writes it: shortest heads, definite lengths, floats in the shortest width that
//! keeps their value (NaN as `f9 7e00`), map entries sorted by the bytes of their encoded
//! keys (for text keys: shorter first, then bytewise), optional fields left out rather than
//! written as null.
//!
//! What the strict reader ([`crate::decode_manifest_v2`]) would refuse is refused here too:
//! tags, integers outside CBOR's range, duplicate keys, names that break the v2 rules, and
//! `encoding` without `decoded_length` (or the reverse).

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
            let n =
                n.map_err(|_| Error::argument(format!("integer {i} is outside CBOR's range")))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode_manifest_v2, DecodeLimits, Shape};

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
