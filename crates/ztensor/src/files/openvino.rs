//! OpenVINO models (IR: `model.xml` and its weights, `model.bin`) in the facade's object
//! model: every constant (`Const` layer) as a range of the `.bin` beside the `.xml`.
//!
//! ```text
//!  <net name="..." version="11">
//!    <layers>
//!      <layer id="1" name="weights" type="Const" version="opset1">
//!        <data element_type="f32" shape="4, 3" offset="0" size="48"/>
//! ```
//!
//! - The XML is read by quick-xml, which builds no tree: the listing keeps what `Const`
//!   layers say and nothing else. It is read whole, at most [`Limits::max_manifest_len`]
//!   bytes, nested at most [`MAX_DEPTH`] deep.
//! - The weights file is the `.xml`'s path with `.bin`, opened as the listing's one shard;
//!   each constant's `offset` and `size` must lie inside it, and `size` must be at least its
//!   shape's bytes (sub-byte types packed), as OpenVINO's reader requires (it writes an empty
//!   constant with a size of 1); the object is the shape's bytes. A model opened from bytes
//!   lists its constants with a defect (no `.bin` to read them from).
//! - Names are the layers' names; a name given twice gets `#<layer id>`. The net's name and
//!   IR version are the file attributes `openvino.name` and `openvino.version`.
//! - Element types: every numeric one OpenVINO has a zTensor type for (`nf4` among them);
//!   `u1`, `u3` and `u6`, which OpenVINO stores in bit planes, are read as u8, decoded
//!   ([`Encoding::BitPlanes`]); `string` constants and other types are listed with a
//!   defect.

use std::path::{Path, PathBuf};

use foldhash::fast::RandomState;
use hashbrown::HashSet;
use quick_xml::events::{BytesStart, Event};
use zt_container::internal::MemoryBudget;
use zt_container::{Error, Result, Source};
use zt_formats::{DType, ElementType, Encoding, LogicalType};
use zt_manifest::{Attributes, Shape, Value as Attr};

use crate::listing::{Limits, Listing};
use crate::model::{Defect, FileVersion, ObjectInfo, ShardInfo};
use crate::ByteOrder;

/// The deepest nesting of XML elements read (an IR nests five deep).
pub(crate) const MAX_DEPTH: usize = 256;

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("invalid OpenVINO model: {what}"))
}

/// The element type of an IR `element_type`, or why it is not read.
fn element(name: &str) -> std::result::Result<ElementType, Defect> {
    let plain = |d| Ok(ElementType::plain(d));
    let logical = |l| Ok(ElementType::logical(l).unwrap_or(ElementType::plain(DType::U8)));
    match name {
        "f32" => plain(DType::F32),
        "f16" => plain(DType::F16),
        "bf16" => plain(DType::BF16),
        "f64" => plain(DType::F64),
        "i8" => plain(DType::I8),
        "i16" => plain(DType::I16),
        "i32" => plain(DType::I32),
        "i64" => plain(DType::I64),
        "u8" => plain(DType::U8),
        "u16" => plain(DType::U16),
        "u32" => plain(DType::U32),
        "u64" => plain(DType::U64),
        "boolean" => plain(DType::Bool),
        "i4" => logical(LogicalType::I4),
        "u4" => logical(LogicalType::U4),
        "u2" => logical(LogicalType::U2),
        "nf4" => logical(LogicalType::Nf4),
        // Stored in bit planes, decoded to a byte an element (`constant`).
        "u1" | "u3" | "u6" => plain(DType::U8),
        "f8e4m3" => logical(LogicalType::F8E4M3Fn),
        "f8e5m2" => logical(LogicalType::F8E5M2),
        "f8e8m0" => logical(LogicalType::F8E8M0),
        "f4e2m1" => logical(LogicalType::F4E2M1),
        "string" => Err(Defect::not_numbers("an OpenVINO string constant")),
        other => Err(Defect::unsupported(format!(
            "OpenVINO element type {other:?} has no element type here"
        ))),
    }
}

/// What one `Const` layer's `<data>` says.
struct Constant {
    name: String,
    id: String,
    element_type: String,
    shape: String,
    offset: String,
    size: String,
}

/// An attribute's value, unescaped (the first, if the element gives it twice).
fn attribute(e: &BytesStart<'_>, key: &[u8], at: u64) -> Result<Option<String>> {
    let mut attributes = e.attributes();
    // quick-xml's check for an attribute given twice compares each with every one before it:
    // an element of a million attributes would take 10^12 comparisons.
    attributes.with_checks(false);
    for a in attributes {
        let a = a.map_err(|err| bad(format!("an attribute: {err}")).at(at))?;
        if a.key.as_ref() == key {
            let v = a
                .unescape_value()
                .map_err(|err| bad(format!("an attribute's value: {err}")).at(at))?;
            return Ok(Some(v.into_owned()));
        }
    }
    Ok(None)
}

/// Lists an OpenVINO IR. `path` is where the `.xml` was opened from (its `.bin` is beside
/// it); `open_bin` opens that file as the model was opened.
pub(crate) fn list(
    source: &Source,
    path: Option<&Path>,
    limits: &Limits,
    open_bin: &dyn Fn(&Path) -> Result<Source>,
) -> Result<Listing> {
    let xml = limits.read_whole(source, "the OpenVINO model's XML")?;
    let mut budget = MemoryBudget::new(
        limits.listing_budget(source.len()),
        "listing the OpenVINO model",
    );
    let mut reader = quick_xml::Reader::from_reader(&xml[..]);
    let mut attributes = Attributes::new();
    let mut constants = Vec::new();
    let mut depth = 0usize;
    let mut layer: Option<(String, String, bool)> = None;
    loop {
        let at = reader.buffer_position();
        let event = reader
            .read_event()
            .map_err(|e| bad(format!("XML: {e}")).at(at))?;
        let (e, empty) = match &event {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                if depth == 2 {
                    layer = None;
                }
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        match (depth, e.name().as_ref()) {
            (0, b"net") => {
                for (key, attr) in [
                    ("openvino.name", b"name".as_slice()),
                    ("openvino.version", b"version"),
                ] {
                    if let Some(v) = attribute(e, attr, at)? {
                        budget.charge(v.len() as u64)?;
                        attributes.insert(key.into(), Attr::Text(v));
                    }
                }
            }
            (0, other) => {
                return Err(bad(format!(
                    "the root element is <{}>, not <net>",
                    String::from_utf8_lossy(other)
                ))
                .at(at))
            }
            (2, b"layer") => {
                let kind = attribute(e, b"type", at)?.unwrap_or_default();
                let is_const = kind == "Const" || kind == "Constant";
                let name = attribute(e, b"name", at)?.unwrap_or_default();
                let id = attribute(e, b"id", at)?.unwrap_or_default();
                layer = Some((name, id, is_const));
            }
            (2, _) => layer = None,
            (3, b"data") => {
                if let Some((name, id, true)) = &layer {
                    let get = |key: &[u8]| attribute(e, key, at).map(Option::unwrap_or_default);
                    let c = Constant {
                        name: name.clone(),
                        id: id.clone(),
                        element_type: get(b"element_type")?,
                        shape: get(b"shape")?,
                        offset: get(b"offset")?,
                        size: get(b"size")?,
                    };
                    budget.charge(
                        Limits::listing_cost(&c.name) + (c.shape.len() + c.id.len()) as u64,
                    )?;
                    constants
                        .try_reserve(1)
                        .map_err(|_| Error::out_of_memory("listing the OpenVINO model"))?;
                    constants.push(c);
                }
            }
            _ => {}
        }
        if !empty {
            depth += 1;
            if depth > MAX_DEPTH {
                return Err(
                    Error::limit(format!("XML nested deeper than {MAX_DEPTH} elements")).at(at),
                );
            }
        }
    }
    let bin = path.map(|p| p.with_extension("bin"));
    let weights = match &bin {
        Some(p) if !constants.is_empty() => Some(open_bin(p).map_err(|e| e.in_file(p))?),
        _ => None,
    };
    let mut objects = Vec::new();
    let mut taken: HashSet<String, RandomState> = HashSet::default();
    for c in constants {
        let mut name = c.name.clone();
        if name.is_empty() || taken.contains(&name) {
            name = format!("{name}#{}", c.id);
        }
        let o = constant(&c, weights.as_ref().map(Source::len), limits)
            .map_err(|e| e.in_object(&name))?;
        taken.insert(name.clone());
        let mut o = o;
        o.name = name;
        objects.push(o);
    }
    let mut names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(bad(format!("two constants are named {:?}", w[0])));
    }
    let mut listing = Listing::of_unique(FileVersion::OpenVino, attributes, objects);
    if let (Some(path), Some(source)) = (bin, weights) {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let info = ShardInfo::data_file(name.into_owned(), PathBuf::from(&path), source.len());
        listing.shards = vec![(info, source)];
    }
    Ok(listing)
}

/// One constant as an object over its range of the weights file (`bin_len` its length, or
/// `None` when there is no weights file to read from).
fn constant(c: &Constant, bin_len: Option<u64>, limits: &Limits) -> Result<ObjectInfo> {
    let mut dims = Vec::new();
    for d in c.shape.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        if dims.len() >= limits.decode.max_rank {
            return Err(Error::rank_over_cap(None, limits.decode.max_rank));
        }
        dims.push(
            d.parse::<u64>()
                .map_err(|_| bad(format!("a constant of shape {:?}", c.shape)))?,
        );
    }
    let shape: Shape = dims.iter().copied().collect();
    let element = match element(&c.element_type) {
        Ok(e) => e,
        Err(defect) => {
            let mut o = ObjectInfo::defective(String::new(), defect);
            o.shape = shape;
            return Ok(o);
        }
    };
    let number = |v: &str, what: &str| {
        v.parse::<u64>()
            .map_err(|_| bad(format!("a constant's {what} {v:?}")))
    };
    let (offset, size) = (number(&c.offset, "offset")?, number(&c.size, "size")?);
    let count = zt_formats::element_count(&dims)?;
    let planes = bit_planes(&c.element_type);
    let nbytes = match planes {
        // Fewer stored bytes than elements: no count overflows.
        Some(bits) => zt_formats::bit_planes_len(bits, count).unwrap_or(u64::MAX),
        None => zt_formats::byte_size(count, &element)?,
    };
    // OpenVINO's reader requires at least the shape's bytes (it writes an empty constant
    // with a size of 1), and reads those.
    if size < nbytes {
        return Err(bad(format!(
            "a constant of shape {dims:?} and type {} needs {nbytes} bytes; its size says {size}",
            c.element_type
        )));
    }
    let Some(bin_len) = bin_len else {
        let mut o = ObjectInfo::defective(
            String::new(),
            Defect::unsupported(
                "its weights are in the .bin beside the .xml, which was not opened",
            ),
        );
        o.shape = shape;
        return Ok(o);
    };
    if offset.checked_add(size).is_none_or(|end| end > bin_len) {
        return Err(bad(format!(
            "{size} bytes at offset {offset} run past the end of the weights file ({bin_len} bytes)"
        )));
    }
    let mut o = ObjectInfo::raw_dense(
        String::new(),
        shape,
        element,
        (offset, nbytes),
        ByteOrder::Little,
    );
    if let Some(c) = o.components.0.first_mut() {
        c.file = 1;
        if let Some(bits) = planes {
            c.encoding = Encoding::BitPlanes { bits };
            c.decoded_len = Some(count);
        }
    }
    Ok(o)
}

/// The width of the element types OpenVINO stores in bit planes (`u1`, `u3`, `u6`), read
/// as u8 ([`Encoding::BitPlanes`]: no zTensor type has their layout).
fn bit_planes(element_type: &str) -> Option<u8> {
    match element_type {
        "u1" => Some(1),
        "u3" => Some(3),
        "u6" => Some(6),
        _ => None,
    }
}
