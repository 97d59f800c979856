//! The v0.1 index (`ZTEN0001`): a CBOR array of per-tensor maps.

use zt_container::{Error, Result};

use crate::cbor::Reader;
use crate::encode::{self, Enc};
use crate::manifest::shape;
use crate::value::{Attributes, Value};
use crate::DecodeLimits;

/// One tensor of a v0.1 index, with its fields as the file spells them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IndexEntry {
    /// Tensor name.
    pub name: String,
    /// Absolute offset of the data.
    pub offset: u64,
    /// Bytes on disk (compressed size for zstd).
    pub size: u64,
    /// Data type, long spelling (`float32`, `bfloat16`, ...).
    pub dtype: String,
    /// Dimensions.
    pub shape: Vec<u64>,
    /// `raw` or `zstd` (default `raw`).
    pub encoding: String,
    /// `dense` (default), `sparse`, or a writer's own spelling such as `sparsecsr`.
    pub layout: String,
    /// `little` or `big`, when given.
    pub data_endianness: Option<String>,
    /// `crc32c:0x...` or `sha256:...`, when given.
    pub checksum: Option<String>,
    /// Every other key: custom fields (and sparse details), in the file's own spelling.
    pub extra: Attributes,
}

/// Keys with a meaning in v0.1; everything else lands in [`IndexEntry::extra`].
const KNOWN: [&str; 9] = [
    "name",
    "offset",
    "size",
    "dtype",
    "shape",
    "encoding",
    "layout",
    "data_endianness",
    "checksum",
];

/// Decodes a v0.1 index. `base` is its absolute offset in the file.
pub fn decode_index(bytes: &[u8], base: u64, limits: DecodeLimits) -> Result<Vec<IndexEntry>> {
    let mut r = Reader::new(bytes, base, limits);
    let mut entries = Vec::new();
    r.array_items("the v0.1 index", |r| {
        let at = r.offset();
        let i = entries.len();
        let e = entry(r).map_err(|e| {
            if e.object().is_some() {
                e
            } else {
                let m = format!("tensor #{i}: {}", e.message());
                Error::new(e.kind(), m).at(e.offset().unwrap_or(at))
            }
        })?;
        entries.push(e);
        Ok(())
    })?;
    r.expect_end("v0.1 index")?;
    Ok(entries)
}

fn entry(r: &mut Reader<'_>) -> Result<IndexEntry> {
    let start = r.offset();
    let mut e = IndexEntry::default();
    let (mut name, mut offset, mut size, mut dtype, mut shp) = (None, None, None, None, None);
    let (mut encoding, mut layout) = (None, None);
    r.map_entries("a v0.1 tensor entry", |r, key, _| {
        match &*key {
            "name" => name = Some(r.text("name")?.into_owned()),
            "offset" => offset = Some(r.uint("offset")?),
            "size" => size = Some(r.uint("size")?),
            "dtype" => dtype = Some(r.text("dtype")?.into_owned()),
            "shape" => shp = Some(shape(r)?),
            "encoding" => encoding = Some(r.text("encoding")?.into_owned()),
            "layout" => layout = Some(r.text("layout")?.into_owned()),
            "data_endianness" => e.data_endianness = Some(r.text("data_endianness")?.into_owned()),
            "checksum" => e.checksum = Some(r.text("checksum")?.into_owned()),
            other => {
                let v = r.value(2)?;
                e.extra.insert(other.to_owned(), v);
            }
        }
        Ok(())
    })?;
    let name = name.ok_or_else(|| Error::invalid("v0.1 tensor entry has no \"name\"").at(start))?;
    let missing = |f: &str| {
        Error::invalid(format!("v0.1 tensor entry has no {f:?}"))
            .at(start)
            .in_object(&name)
    };
    e.offset = offset.ok_or_else(|| missing("offset"))?;
    e.size = size.ok_or_else(|| missing("size"))?;
    e.dtype = dtype.ok_or_else(|| missing("dtype"))?;
    e.shape = shp.ok_or_else(|| missing("shape"))?.into_vec();
    e.encoding = encoding.unwrap_or_else(|| "raw".into());
    e.layout = layout.unwrap_or_else(|| "dense".into());
    e.name = name;
    Ok(e)
}

/// Encodes a v0.1 index the way the 0.1.x writers did: a definite array of indefinite-length
/// maps, keys in the order `name, offset, size, dtype, layout, shape, encoding,
/// data_endianness, checksum`, then custom keys.
pub fn encode_index(entries: &[IndexEntry]) -> Vec<u8> {
    let mut e = Enc::new(Vec::new());
    encode::ok(e.array(entries.len() as u64));
    for x in entries {
        encode::ok(e.begin_map());
        encode::text(&mut e, "name");
        encode::text(&mut e, &x.name);
        encode::text(&mut e, "offset");
        encode::uint(&mut e, x.offset);
        encode::text(&mut e, "size");
        encode::uint(&mut e, x.size);
        encode::text(&mut e, "dtype");
        encode::text(&mut e, &x.dtype);
        encode::text(&mut e, "layout");
        encode::text(&mut e, &x.layout);
        encode::text(&mut e, "shape");
        encode::ok(e.array(x.shape.len() as u64));
        for &d in &x.shape {
            encode::uint(&mut e, d);
        }
        encode::text(&mut e, "encoding");
        encode::text(&mut e, &x.encoding);
        for (k, v) in [
            ("data_endianness", &x.data_endianness),
            ("checksum", &x.checksum),
        ] {
            if let Some(v) = v {
                encode::text(&mut e, k);
                encode::text(&mut e, v);
            }
        }
        for (k, v) in &x.extra {
            if !KNOWN.contains(&k.as_str()) {
                encode::text(&mut e, k);
                encode::value(&mut e, v);
            }
        }
        encode::ok(e.end());
    }
    e.into_writer()
}

impl IndexEntry {
    /// A custom field, if present.
    pub fn extra(&self, key: &str) -> Option<&Value> {
        self.extra.get(key)
    }
}
