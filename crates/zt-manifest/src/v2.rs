//! The zTensor v2 manifest (ztensor 2.x): its schema decoded from deterministic CBOR.
//!
//! ```text
//! { "objects": { name: { "shape": [uint...], "layout": text, "parts": { name: part }, "attributes"?: map } },
//!   "shards"?: { name: { "size": uint, "digest": text } },
//!   "attributes"?: map }
//! part = { "dtype": text, "type"?: text, "blob": [offset, length], "shard"?: text,
//!          "encoding"?: text, "decoded_length"?: uint (iff encoding), "digest"?: text }
//! ```
//!
//! Syntax only, as for v1: names, dtypes, layouts, encodings and digests stay strings, and
//! `zt-formats` decides what they mean. What is checked here: the CBOR is deterministic
//! ([`crate::det`]), required fields are present and of their type, unknown fields are
//! skipped (and checked), names follow the v2 rules ([`check_name`], [`check_shard_name`]),
//! `decoded_length` is present exactly when `encoding` is, and every `shard` a part names is
//! in the shard table.

use zt_container::{Error, Result};

use crate::det::{Det, MAX_DEPTH_V2};
use crate::value::{Attributes, Value};
use crate::{DecodeLimits, Shape};

/// Longest object, part or attribute name, in bytes of UTF-8.
pub const MAX_NAME_LEN_V2: usize = 1024;
/// Longest shard name, in bytes.
pub const MAX_SHARD_NAME_LEN: usize = 64;

/// A decoded v2 manifest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ManifestV2 {
    /// Objects in the manifest's order (sorted by encoded key: shorter names first).
    pub objects: Vec<ObjectV2>,
    /// The shard table, in the manifest's order.
    pub shards: Vec<ShardV2>,
    /// File attributes.
    pub attributes: Attributes,
}

impl ManifestV2 {
    /// The position of shard `name` in [`ManifestV2::shards`], found by binary search: the
    /// table is in the order of its encoded keys, which for text is by length, then bytewise
    /// (so a table of many shards and parts costs no quadratic scan).
    pub fn shard_index(&self, name: &str) -> Option<usize> {
        let want = (name.len(), name.as_bytes());
        self.shards
            .binary_search_by(|e| (e.name.len(), e.name.as_bytes()).cmp(&want))
            .ok()
    }
}

/// One object of a v2 manifest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectV2 {
    /// Name.
    pub name: String,
    /// Shape (rank checked against [`DecodeLimits::max_rank`]).
    pub shape: Shape,
    /// Layout id as written (`dense`, `zt.sparse_csr/1`, ...).
    pub layout: String,
    /// Parts in the manifest's order (at least one).
    pub parts: Vec<PartV2>,
    /// Object attributes.
    pub attributes: Attributes,
    /// Absolute offset of the object's key in the file.
    pub at: u64,
}

/// One part of a v2 object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartV2 {
    /// Name (`data`, `values`, ...).
    pub name: String,
    /// Storage dtype as written.
    pub dtype: String,
    /// Logical type as written.
    pub logical_type: Option<String>,
    /// Blob offset (in the file that holds it).
    pub offset: u64,
    /// Blob length.
    pub length: u64,
    /// The shard that holds the blob; `None` for this file.
    pub shard: Option<String>,
    /// Encoding id; `None` for raw.
    pub encoding: Option<String>,
    /// Size after decoding (present exactly when `encoding` is).
    pub decoded_length: Option<u64>,
    /// Digest text as written (`algo:hex`).
    pub digest: Option<String>,
    /// Absolute offset of the part's key in the file.
    pub at: u64,
}

/// One entry of the shard table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardV2 {
    /// Name (checked by [`check_shard_name`]).
    pub name: String,
    /// The shard file's exact size.
    pub size: u64,
    /// Whole-file digest text (`algo:hex`).
    pub digest: String,
    /// Absolute offset of the entry's key in the file.
    pub at: u64,
}

/// Checks an object, part or attribute name: non-empty, at most [`MAX_NAME_LEN_V2`] bytes, no
/// NUL.
pub fn check_name(name: &str, what: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(format!("{what} name is empty")));
    }
    if name.len() > MAX_NAME_LEN_V2 {
        return Err(Error::invalid(format!(
            "{what} name of {} bytes is longer than {MAX_NAME_LEN_V2}",
            name.len()
        )));
    }
    if name.contains('\0') {
        return Err(Error::invalid(format!("{what} name {name:?} contains NUL")));
    }
    Ok(())
}

/// Checks a shard name: 1 to 64 bytes of `[A-Za-z0-9._-]`, not starting with a dot and never
/// containing `..`. Shard names become parts of file names beside the root file, so nothing
/// that could name a directory, a parent or a hidden file gets through.
pub fn check_shard_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_SHARD_NAME_LEN {
        return Err(Error::invalid(format!(
            "shard name {name:?} is not 1 to {MAX_SHARD_NAME_LEN} bytes"
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(Error::invalid(format!(
            "shard name {name:?} contains {c:?} (only A-Z a-z 0-9 . _ - are allowed; never a path)"
        )));
    }
    if name.starts_with('.') || name.contains("..") {
        return Err(Error::invalid(format!(
            "shard name {name:?} starts with a dot or contains \"..\""
        )));
    }
    Ok(())
}

/// Decodes a v2 manifest whose first byte is at absolute offset `base`. The nesting cap is
/// the smaller of the v2 format's 32 levels and `limits.max_depth`.
pub fn decode_manifest_v2(bytes: &[u8], base: u64, limits: DecodeLimits) -> Result<ManifestV2> {
    let mut d = Det::new(bytes, base, MAX_DEPTH_V2.min(limits.max_depth));
    let mut m = ManifestV2::default();
    let mut seen_objects = false;
    let n = d.map("manifest")?;
    d.entries(n, 0, "the manifest", |d, key, at| match key {
        Some("objects") => {
            seen_objects = true;
            let n = d.map("objects")?;
            d.entries(n, 1, "objects", |d, name, at| {
                let name = name.ok_or_else(|| Error::invalid("objects key is not text").at(at))?;
                check_name(name, "object").map_err(|e| e.at(at))?;
                let o = object(d, name, at, &limits).map_err(|e| e.in_object(name))?;
                m.objects.push(o);
                Ok(())
            })
        }
        Some("shards") => {
            let n = d.map("shards")?;
            d.entries(n, 1, "shards", |d, name, at| {
                let name = name.ok_or_else(|| Error::invalid("shards key is not text").at(at))?;
                check_shard_name(name).map_err(|e| e.at(at))?;
                m.shards.push(shard(d, name, at)?);
                Ok(())
            })
        }
        Some("attributes") => {
            m.attributes = attributes(d, 1)?;
            Ok(())
        }
        // Unknown fields, and keys that are not text, are checked and skipped.
        _ => d.skip(1).map_err(|e| e.at(at)),
    })?;
    d.expect_end()?;
    if !seen_objects {
        return Err(Error::invalid("manifest has no \"objects\" map").at(base));
    }
    for o in &m.objects {
        for p in &o.parts {
            if let Some(s) = &p.shard {
                if m.shard_index(s).is_none() {
                    return Err(Error::invalid(format!(
                        "part names shard {s:?}, which the shard table does not list"
                    ))
                    .at(p.at)
                    .in_component(&p.name)
                    .in_object(&o.name));
                }
            }
        }
    }
    Ok(m)
}

/// An attribute map at `depth`: text keys (checked as names), any values.
fn attributes(d: &mut Det<'_>, depth: usize) -> Result<Attributes> {
    let mut attrs = Attributes::new();
    let n = d.map("attributes")?;
    d.entries(n, depth, "attributes", |d, key, at| {
        let key = key.ok_or_else(|| Error::invalid("attribute key is not text").at(at))?;
        check_name(key, "attribute").map_err(|e| e.at(at))?;
        let v: Value = d.value(depth + 1)?;
        attrs.insert(key.to_owned(), v);
        Ok(())
    })?;
    Ok(attrs)
}

fn object(d: &mut Det<'_>, name: &str, at: u64, limits: &DecodeLimits) -> Result<ObjectV2> {
    let mut o = ObjectV2 {
        name: name.to_owned(),
        at,
        ..Default::default()
    };
    let (mut shape, mut layout, mut parts) = (false, false, false);
    let n = d.map("object")?;
    d.entries(n, 2, "object", |d, key, at| {
        match key {
            Some("shape") => {
                shape = true;
                let rank = d.array("shape")?;
                if rank > limits.max_rank as u64 {
                    return Err(Error::rank_over_cap(Some(rank), limits.max_rank).at(at));
                }
                for _ in 0..rank {
                    o.shape.push(d.uint("a dimension")?);
                }
            }
            Some("layout") => {
                layout = true;
                o.layout = d.text("layout")?.to_owned();
            }
            Some("parts") => {
                parts = true;
                let n = d.map("parts")?;
                d.entries(n, 3, "parts", |d, pname, at| {
                    let pname =
                        pname.ok_or_else(|| Error::invalid("parts key is not text").at(at))?;
                    check_name(pname, "part").map_err(|e| e.at(at))?;
                    let p = part(d, pname, at).map_err(|e| e.in_component(pname))?;
                    o.parts.push(p);
                    Ok(())
                })?;
            }
            Some("attributes") => o.attributes = attributes(d, 3)?,
            _ => d.skip(3)?,
        }
        Ok(())
    })?;
    for (present, field) in [(shape, "shape"), (layout, "layout"), (parts, "parts")] {
        if !present {
            return Err(Error::invalid(format!("object has no {field:?}")).at(at));
        }
    }
    if o.parts.is_empty() {
        return Err(Error::invalid("object has no parts").at(at));
    }
    Ok(o)
}

fn part(d: &mut Det<'_>, name: &str, at: u64) -> Result<PartV2> {
    let mut p = PartV2 {
        name: name.to_owned(),
        at,
        ..Default::default()
    };
    let (mut dtype, mut blob) = (false, false);
    let n = d.map("part")?;
    d.entries(n, 4, "part", |d, key, at| {
        match key {
            Some("dtype") => {
                dtype = true;
                p.dtype = d.text("dtype")?.to_owned();
            }
            Some("type") => p.logical_type = Some(d.text("type")?.to_owned()),
            Some("blob") => {
                blob = true;
                let n = d.array("blob")?;
                if n != 2 {
                    return Err(Error::invalid(format!(
                        "blob must be [offset, length], not {n} elements"
                    ))
                    .at(at));
                }
                p.offset = d.uint("blob offset")?;
                p.length = d.uint("blob length")?;
            }
            Some("shard") => {
                let s = d.text("shard")?;
                check_shard_name(s).map_err(|e| e.at(at))?;
                p.shard = Some(s.to_owned());
            }
            Some("encoding") => p.encoding = Some(d.text("encoding")?.to_owned()),
            Some("decoded_length") => p.decoded_length = Some(d.uint("decoded_length")?),
            Some("digest") => p.digest = Some(d.text("digest")?.to_owned()),
            _ => d.skip(5)?,
        }
        Ok(())
    })?;
    if !dtype {
        return Err(Error::invalid("part has no \"dtype\"").at(at));
    }
    if !blob {
        return Err(Error::invalid("part has no \"blob\"").at(at));
    }
    if p.encoding.is_some() != p.decoded_length.is_some() {
        return Err(Error::invalid(
            "part must have \"decoded_length\" exactly when it has \"encoding\"",
        )
        .at(at));
    }
    Ok(p)
}

fn shard(d: &mut Det<'_>, name: &str, at: u64) -> Result<ShardV2> {
    let mut s = ShardV2 {
        name: name.to_owned(),
        at,
        ..Default::default()
    };
    let (mut size, mut digest) = (false, false);
    let n = d.map("shard entry")?;
    d.entries(n, 2, "shard entry", |d, key, _| {
        match key {
            Some("size") => {
                size = true;
                s.size = d.uint("shard size")?;
            }
            Some("digest") => {
                digest = true;
                s.digest = d.text("shard digest")?.to_owned();
            }
            _ => d.skip(3)?,
        }
        Ok(())
    })?;
    if !size || !digest {
        return Err(
            Error::invalid(format!("shard {name:?} needs both \"size\" and \"digest\"")).at(at),
        );
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names() {
        for ok in ["00001-of-00002", "a", "x.y_z-1", &"a".repeat(64)] {
            check_shard_name(ok).unwrap();
        }
        for bad in [
            "",
            ".hidden",
            "..",
            "a..b",
            "a/b",
            "a\\b",
            "../x",
            "a b",
            "é",
            &"a".repeat(65),
        ] {
            assert!(check_shard_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn shard_lookup_follows_the_encoded_key_order() {
        let names = ["b", "zz", "aaa", "00001-of-00002"];
        let m = ManifestV2 {
            shards: names
                .iter()
                .map(|n| ShardV2 {
                    name: (*n).into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        for (i, n) in names.iter().enumerate() {
            assert_eq!(m.shard_index(n), Some(i));
        }
        assert_eq!(m.shard_index("a"), None);
    }

    #[test]
    fn names() {
        check_name("w", "object").unwrap();
        assert!(check_name("", "object").is_err());
        assert!(check_name("a\0b", "object").is_err());
        assert!(check_name(&"x".repeat(1025), "object").is_err());
        check_name(&"x".repeat(1024), "object").unwrap();
    }

    #[test]
    fn the_sample_03_manifest_decodes() {
        let hex = concat!(
            "a1676f626a65637473a1697a65726f735f663332a3657061727473a16464617461a564626c6f62",
            "82191000182f656474797065636633326664696765737475787868333a3465636461306566386532",
            "636166623968656e636f64696e67727a742e7a7374642d7365656b61626c652f316e6465636f6465",
            "645f6c656e677468190fa0657368617065811903e8666c61796f75746564656e7365"
        );
        let hex: String = hex.chars().filter(|c| !c.is_whitespace()).collect();
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let m = decode_manifest_v2(&bytes, 8192, DecodeLimits::default()).unwrap();
        let o = &m.objects[0];
        assert_eq!(o.name, "zeros_f32");
        assert_eq!(&o.shape[..], &[1000]);
        assert_eq!(o.layout, "dense");
        let p = &o.parts[0];
        assert_eq!((p.offset, p.length), (4096, 47));
        assert_eq!(p.encoding.as_deref(), Some("zt.zstd-seekable/1"));
        assert_eq!(p.decoded_length, Some(4000));
        assert_eq!(p.digest.as_deref(), Some("xxh3:4ecda0ef8e2cafb9"));
    }
}
