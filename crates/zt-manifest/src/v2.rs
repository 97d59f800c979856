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
//!
//! Two ways in: [`decode_manifest_v2`] gives the whole manifest as owned values
//! ([`ManifestV2`]: what the writer encodes, what tests compare); [`visit_manifest_v2`] hands
//! each object over as it is decoded, its texts borrowed from the bytes ([`ObjectV2Ref`]),
//! for a reader that builds a listing of its own without a second copy of the manifest.

use zt_container::{Error, Result};

use crate::det::{Det, MAX_DEPTH_V2};
use crate::value::{Attributes, Value};
use crate::{DecodeLimits, Shape};

/// Longest object, part or attribute name, in bytes of UTF-8.
pub const MAX_NAME_LEN_V2: usize = 1024;
/// Longest shard name, in bytes.
pub const MAX_SHARD_NAME_LEN: usize = 64;

/// A lower bound on the bytes one entry of the `"objects"` map takes in a manifest this
/// decoder accepts: the smallest such entry is 43 bytes (a one-byte name, and a map of an
/// empty shape, an empty layout and one part with a one-byte name, an empty dtype and a blob
/// of two one-byte integers; see the test). A reader that reserves room for the objects a
/// manifest declares bounds it by `bytes / this`.
pub const MIN_OBJECT_ENTRY_V2: usize = 40;

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
        shard_index(&self.shards, name)
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

/// One part of a v2 object with its texts borrowed from the manifest's bytes: what
/// [`visit_manifest_v2`] hands out, with no allocation per field. [`PartV2`] is the owned
/// form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartV2Ref<'a> {
    /// Name (`data`, `values`, ...).
    pub name: &'a str,
    /// Storage dtype as written.
    pub dtype: &'a str,
    /// Logical type as written.
    pub logical_type: Option<&'a str>,
    /// Blob offset (in the file that holds it).
    pub offset: u64,
    /// Blob length.
    pub length: u64,
    /// The shard that holds the blob (in the shard table); `None` for this file.
    pub shard: Option<&'a str>,
    /// That shard's position in the shard table (found when the part was checked), so a
    /// reader that opened the shards in table order needs no search of its own.
    pub shard_position: Option<usize>,
    /// Encoding id; `None` for raw.
    pub encoding: Option<&'a str>,
    /// Size after decoding (present exactly when `encoding` is).
    pub decoded_length: Option<u64>,
    /// Digest text as written (`algo:hex`).
    pub digest: Option<&'a str>,
    /// Absolute offset of the part's key in the file.
    pub at: u64,
}

impl PartV2Ref<'_> {
    /// The owned form.
    pub fn to_part(&self) -> PartV2 {
        PartV2 {
            name: self.name.to_owned(),
            dtype: self.dtype.to_owned(),
            logical_type: self.logical_type.map(str::to_owned),
            offset: self.offset,
            length: self.length,
            shard: self.shard.map(str::to_owned),
            encoding: self.encoding.map(str::to_owned),
            decoded_length: self.decoded_length,
            digest: self.digest.map(str::to_owned),
            at: self.at,
        }
    }
}

/// One object of a v2 manifest, its texts borrowed (see [`PartV2Ref`]). Its shape and
/// attributes are owned: a visitor may take them (`std::mem::take`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectV2Ref<'a> {
    /// Name.
    pub name: &'a str,
    /// Shape (rank checked against [`DecodeLimits::max_rank`]).
    pub shape: Shape,
    /// Layout id as written.
    pub layout: &'a str,
    /// Parts in the manifest's order (at least one).
    pub parts: Vec<PartV2Ref<'a>>,
    /// Object attributes.
    pub attributes: Attributes,
    /// Absolute offset of the object's key in the file.
    pub at: u64,
}

/// What a v2 manifest holds besides its objects: [`visit_manifest_v2`]'s result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ManifestV2Rest {
    /// The shard table, in the manifest's order.
    pub shards: Vec<ShardV2>,
    /// File attributes.
    pub attributes: Attributes,
}

/// The position of shard `name` in a shard table in the manifest's order (see
/// [`ManifestV2::shard_index`]).
pub fn shard_index(shards: &[ShardV2], name: &str) -> Option<usize> {
    let want = (name.len(), name.as_bytes());
    shards
        .binary_search_by(|e| (e.name.len(), e.name.as_bytes()).cmp(&want))
        .ok()
}

/// Decodes a v2 manifest whose first byte is at absolute offset `base`. The nesting cap is
/// the smaller of the v2 format's 32 levels and `limits.max_depth`.
///
/// ```
/// use zt_manifest::{decode_manifest_v2, encode_manifest_v2, ManifestV2, ObjectV2, PartV2};
/// let mut m = ManifestV2::default();
/// m.objects.push(ObjectV2 {
///     name: "w".into(),
///     shape: vec![2].into(),
///     layout: "dense".into(),
///     parts: vec![PartV2 { name: "data".into(), dtype: "f32".into(), offset: 8, length: 8, ..Default::default() }],
///     ..Default::default()
/// });
/// let bytes = encode_manifest_v2(&m).unwrap();
/// let back = decode_manifest_v2(&bytes, 0, Default::default()).unwrap();
/// assert_eq!(back.objects[0].parts[0].dtype, "f32");
/// ```
pub fn decode_manifest_v2(bytes: &[u8], base: u64, limits: DecodeLimits) -> Result<ManifestV2> {
    let mut objects = Vec::new();
    let rest = visit_manifest_v2(
        bytes,
        base,
        limits,
        |_, _| Ok(()),
        |o| {
            objects.push(ObjectV2 {
                name: o.name.to_owned(),
                shape: std::mem::take(&mut o.shape),
                layout: o.layout.to_owned(),
                parts: o.parts.iter().map(PartV2Ref::to_part).collect(),
                attributes: std::mem::take(&mut o.attributes),
                at: o.at,
            });
            Ok(())
        },
    )?;
    Ok(ManifestV2 {
        objects,
        shards: rest.shards,
        attributes: rest.attributes,
    })
}

/// Decodes a v2 manifest as [`decode_manifest_v2`] does, handing each object to `object` as
/// it is decoded, its texts borrowed from `bytes`: a reader that builds its own listing makes
/// no owned copy of the manifest on the way (for a file of many objects, most of the cost).
///
/// `objects_start` is called once, before the first object, with the shard table (complete:
/// deterministic CBOR puts `"shards"` before `"objects"`) and the number of objects, which
/// the bytes left have been checked to hold. Every shard a part names is in that table when
/// `object` sees it. The [`ObjectV2Ref`] handed over is reused for the next object; the
/// visitor takes what it keeps.
pub fn visit_manifest_v2<'a>(
    bytes: &'a [u8],
    base: u64,
    limits: DecodeLimits,
    mut objects_start: impl FnMut(&[ShardV2], u64) -> Result<()>,
    mut object: impl FnMut(&mut ObjectV2Ref<'a>) -> Result<()>,
) -> Result<ManifestV2Rest> {
    let mut d = Det::new(
        bytes,
        base,
        MAX_DEPTH_V2.min(limits.max_depth),
        limits.max_value_bytes,
    );
    let mut rest = ManifestV2Rest::default();
    let mut seen_objects = false;
    let mut o = ObjectV2Ref::default();
    let n = d.map("manifest")?;
    d.entries(n, 0, "the manifest", |d, key, at| match key {
        Some("objects") => {
            seen_objects = true;
            let n = d.map("objects")?;
            let shards = &rest.shards;
            objects_start(shards, n)?;
            d.entries(n, 1, "objects", |d, name, at| {
                let name = name.ok_or_else(|| Error::invalid("objects key is not text").at(at))?;
                check_name(name, "object").map_err(|e| e.at(at))?;
                object_ref(d, name, at, &limits, shards, &mut o).map_err(|e| e.in_object(name))?;
                object(&mut o).map_err(|e| e.in_object(name))
            })
        }
        Some("shards") => {
            let n = d.map("shards")?;
            d.entries(n, 1, "shards", |d, name, at| {
                let name = name.ok_or_else(|| Error::invalid("shards key is not text").at(at))?;
                check_shard_name(name).map_err(|e| e.at(at))?;
                rest.shards.push(shard(d, name, at)?);
                Ok(())
            })
        }
        Some("attributes") => {
            rest.attributes = attributes(d, 1)?;
            Ok(())
        }
        // Unknown fields, and keys that are not text, are checked and skipped.
        _ => d.skip(1).map_err(|e| e.at(at)),
    })?;
    d.expect_end()?;
    if !seen_objects {
        return Err(Error::invalid("manifest has no \"objects\" map").at(base));
    }
    Ok(rest)
}

/// An attribute map at `depth`: text keys (checked as names), any values.
fn attributes(d: &mut Det<'_>, depth: usize) -> Result<Attributes> {
    let mut attrs = Attributes::new();
    let n = d.map("attributes")?;
    d.entries(n, depth, "attributes", |d, key, at| {
        let key = key.ok_or_else(|| Error::invalid("attribute key is not text").at(at))?;
        check_name(key, "attribute").map_err(|e| e.at(at))?;
        d.charge_key(key.len(), at)?;
        let v: Value = d.value(depth + 1)?;
        attrs.insert(key.to_owned(), v);
        Ok(())
    })?;
    Ok(attrs)
}

/// Decodes one object into `o` (its parts, shape and attributes emptied first).
fn object_ref<'a>(
    d: &mut Det<'a>,
    name: &'a str,
    at: u64,
    limits: &DecodeLimits,
    shards: &[ShardV2],
    o: &mut ObjectV2Ref<'a>,
) -> Result<()> {
    o.name = name;
    o.at = at;
    o.layout = "";
    o.shape = Shape::default();
    o.parts.clear();
    o.attributes = Attributes::new();
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
                o.layout = d.text("layout")?;
            }
            Some("parts") => {
                parts = true;
                let n = d.map("parts")?;
                d.entries(n, 3, "parts", |d, pname, at| {
                    let pname =
                        pname.ok_or_else(|| Error::invalid("parts key is not text").at(at))?;
                    check_name(pname, "part").map_err(|e| e.at(at))?;
                    let p = part(d, pname, at, shards).map_err(|e| e.in_component(pname))?;
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
    Ok(())
}

fn part<'a>(d: &mut Det<'a>, name: &'a str, at: u64, shards: &[ShardV2]) -> Result<PartV2Ref<'a>> {
    let mut p = PartV2Ref {
        name,
        at,
        ..Default::default()
    };
    let (mut dtype, mut blob) = (false, false);
    let n = d.map("part")?;
    d.entries(n, 4, "part", |d, key, at| {
        match key {
            Some("dtype") => {
                dtype = true;
                p.dtype = d.text("dtype")?;
            }
            Some("type") => p.logical_type = Some(d.text("type")?),
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
                p.shard = Some(s);
            }
            Some("encoding") => p.encoding = Some(d.text("encoding")?),
            Some("decoded_length") => p.decoded_length = Some(d.uint("decoded_length")?),
            Some("digest") => p.digest = Some(d.text("digest")?),
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
    if let Some(s) = p.shard {
        p.shard_position = shard_index(shards, s);
        if p.shard_position.is_none() {
            return Err(Error::invalid(format!(
                "part names shard {s:?}, which the shard table does not list"
            ))
            .at(at));
        }
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
    fn the_smallest_object_entry_is_no_smaller_than_the_bound() {
        // { "objects": { "a": { "parts": { "p": { "blob": [0, 0], "dtype": "" } },
        //                       "shape": [], "layout": "" } } }
        let mut m = b"\xa1\x67objects\xa1".to_vec();
        let entry_start = m.len();
        m.extend_from_slice(b"\x61a\xa3\x65parts\xa1\x61p\xa2\x64blob\x82\x00\x00");
        m.extend_from_slice(b"\x65dtype\x60\x65shape\x80\x66layout\x60");
        let entry = m.len() - entry_start;
        let decoded = decode_manifest_v2(&m, 0, DecodeLimits::default()).unwrap();
        assert_eq!(decoded.objects[0].parts[0].dtype, "");
        assert_eq!(entry, 43);
        assert!(entry >= MIN_OBJECT_ENTRY_V2);
    }

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
