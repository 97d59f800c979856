//! Flax checkpoints: the msgpack files `flax.serialization.to_bytes` writes, transformers'
//! `flax_model.msgpack` among them (and its shards, under `flax_model.msgpack.index.json`).
//!
//! The file is one msgpack value: a tree of maps (a state dict) whose leaves are arrays. An
//! array is a msgpack extension of type 1 whose payload is msgpack again, `[shape, dtype
//! name, bytes]`, the bytes row-major in the writer's byte order (little-endian on every
//! machine flax runs on). A NumPy scalar is type 3 with the same payload; a Python complex
//! is type 2 (`[real, imag]`).
//!
//! - [`list`]: walks the tree once. Each array is an object named by its path of keys joined
//!   with `/` (as transformers' index names a shard's tensors), its data a range of the file,
//!   read in place. Other leaves (numbers, text, booleans, bytes) are the file's attributes
//!   under their paths.
//! - An array flax stored in pieces (over 1 GiB: a map marked `__msgpack_chunked_array__`,
//!   its shape and its flat pieces) is one object whose component spans the pieces
//!   ([`Encoding::Pieces`]): read by placing them one after the other (a copy), checked as
//!   flax's `_unchunk` reads them (one element type, the shape's element count).
//!
//! Bounded: nesting depth and rank by [`Limits::decode`], every count and length checked
//! against the end of the file or of its enclosing extension, names and attribute values
//! charged to the listing budget. Like flax's reader, a key must be text, and nothing may
//! follow the value; a key given twice in one map is refused.

use std::borrow::Cow;
use std::cell::RefCell;

use foldhash::fast::RandomState;
use hashbrown::HashSet;

use zt_container::internal::MemoryBudget;
use zt_container::{Error, Result, Source};
use zt_formats::{
    byte_size, element_count, DType, ElementType, Encoding, Format, LogicalType, Piece,
};
use zt_manifest::{Attributes, Value};

use crate::listing::{sort_by_name, Limits, Listing};
use crate::model::{ByteOrder, Defect, FileVersion, ObjectInfo};

/// msgpack extension type codes flax writes (`flax.serialization._MsgpackExtType`).
const EXT_NDARRAY: i8 = 1;
const EXT_COMPLEX: i8 = 2;
const EXT_NPSCALAR: i8 = 3;

/// The key that marks an array flax split in pieces.
const CHUNKED_MARK: &str = "__msgpack_chunked_array__";

/// The longest map key, dtype name or text attribute read.
const MAX_TEXT: u64 = 64 << 10;

/// What one read of a file not in memory takes ahead of a header (at most; never past the
/// end of the file).
const WINDOW: u64 = 64 << 10;

/// Lists a Flax checkpoint.
pub(crate) fn list(source: &Source, limits: &Limits) -> Result<Listing> {
    let len = source.len();
    let whole = source.as_slice();
    let mut walk = Walk {
        source,
        whole,
        len,
        pos: 0,
        budget: MemoryBudget::new(limits.listing_budget(len), "listing the file's arrays"),
        max_depth: limits.decode.max_depth,
        max_rank: limits.decode.max_rank,
        objects: Vec::new(),
        attributes: Attributes::new(),
        window: RefCell::new((0, Vec::new())),
    };
    let at = walk.pos;
    match walk.head(len)? {
        Head::Map(n) => walk.map(n, &mut String::new(), 1, len)?,
        other => {
            return Err(invalid(format!(
                "not a Flax checkpoint: the file holds a msgpack {}, not a map",
                other.kind()
            ))
            .at(at))
        }
    }
    if walk.pos != len {
        return Err(invalid(format!(
            "{} bytes follow the end of the checkpoint's msgpack value",
            len - walk.pos
        ))
        .at(walk.pos));
    }
    let Walk {
        mut objects,
        attributes,
        ..
    } = walk;
    if let Some(name) = sort_by_name(&mut objects) {
        return Err(invalid(format!("two arrays are both named {name:?}")).in_object(name));
    }
    Ok(Listing::of_unique(FileVersion::Flax, attributes, objects))
}

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid(message)
}

/// A msgpack value's header; the payload of text, bytes and extensions follows it.
#[derive(Debug, Clone, Copy)]
enum Head {
    Nil,
    Bool(bool),
    Int(i128),
    Float(f64),
    Text(u64),
    Bytes(u64),
    Array(u64),
    Map(u64),
    Ext(i8, u64),
}

impl Head {
    fn kind(self) -> &'static str {
        match self {
            Head::Nil => "nil",
            Head::Bool(_) => "boolean",
            Head::Int(_) => "integer",
            Head::Float(_) => "float",
            Head::Text(_) => "string",
            Head::Bytes(_) => "bin",
            Head::Array(_) => "array",
            Head::Map(_) => "map",
            Head::Ext(..) => "extension",
        }
    }
}

struct Walk<'s> {
    source: &'s Source,
    /// The whole file, when it is in memory (mapped or owned).
    whole: Option<&'s [u8]>,
    len: u64,
    pos: u64,
    budget: MemoryBudget,
    max_depth: usize,
    max_rank: usize,
    objects: Vec<ObjectInfo>,
    attributes: Attributes,
    /// For a file not in memory: the last piece read (its start, its bytes), so that the
    /// headers near one another cost one read, or one request for a remote file, not one
    /// each. The data between them is stepped over, never read.
    window: RefCell<(u64, Vec<u8>)>,
}

impl<'s> Walk<'s> {
    /// `n` bytes at `at`, which must lie before `end`.
    fn bytes(&self, at: u64, n: u64, end: u64, what: &str) -> Result<Cow<'s, [u8]>> {
        let stop = at.checked_add(n).filter(|&s| s <= end).ok_or_else(|| {
            let room = end.saturating_sub(at);
            invalid(format!(
                "{what} of {n} bytes at byte {at} runs past the end of {} ({room} bytes left)",
                self.place(end)
            ))
            .at(at)
        })?;
        match self.whole {
            Some(whole) => {
                let range = usize::try_from(at).ok().zip(usize::try_from(stop).ok());
                let slice = range.and_then(|(a, b)| whole.get(a..b));
                slice
                    .map(Cow::Borrowed)
                    .ok_or_else(|| invalid(format!("{what} lies past the end")).at(at))
            }
            None if n > WINDOW => self.source.read_at(at, n),
            None => {
                let mut window = self.window.borrow_mut();
                let (start, held) = &mut *window;
                let inside = at >= *start && stop <= *start + held.len() as u64;
                if !inside {
                    *held = self
                        .source
                        .read_at(at, WINDOW.min(self.len - at))?
                        .into_owned();
                    *start = at;
                }
                let from = usize::try_from(at - *start).unwrap_or(usize::MAX);
                let bytes = from
                    .checked_add(n as usize)
                    .and_then(|to| held.get(from..to))
                    .ok_or_else(|| invalid(format!("{what} lies past the end")).at(at))?;
                Ok(Cow::Owned(bytes.to_vec()))
            }
        }
    }

    /// What ends at `end`: the file, or the extension a payload is read from.
    fn place(&self, end: u64) -> &'static str {
        if end == self.len {
            "the file"
        } else {
            "its extension"
        }
    }

    /// The byte at `at`, which must lie before `end`.
    fn byte(&self, at: u64, end: u64, what: &str) -> Result<u8> {
        let bytes = self.bytes(at, 1, end, what)?;
        bytes
            .first()
            .copied()
            .ok_or_else(|| invalid(format!("{what} at byte {at} could not be read")).at(at))
    }

    /// Reads the header at `pos` (before `end`) and moves past it.
    fn head(&mut self, end: u64) -> Result<Head> {
        let at = self.pos;
        let first = self.byte(at, end, "a msgpack header")?;
        let sized = |n: u64| -> Result<(u64, u64)> {
            let b = self.bytes(at + 1, n, end, "a msgpack header")?;
            let v = b.iter().fold(0u64, |v, &x| (v << 8) | u64::from(x));
            Ok((v, 1 + n))
        };
        let (head, used) = match first {
            0x00..=0x7f => (Head::Int(i128::from(first)), 1),
            0x80..=0x8f => (Head::Map(u64::from(first & 0x0f)), 1),
            0x90..=0x9f => (Head::Array(u64::from(first & 0x0f)), 1),
            0xa0..=0xbf => (Head::Text(u64::from(first & 0x1f)), 1),
            0xc0 => (Head::Nil, 1),
            0xc2 => (Head::Bool(false), 1),
            0xc3 => (Head::Bool(true), 1),
            0xc4..=0xc6 => {
                let (n, used) = sized(1 << (first - 0xc4))?;
                (Head::Bytes(n), used)
            }
            0xc7..=0xc9 => {
                let (n, used) = sized(1 << (first - 0xc7))?;
                let code = self.byte(at + used, end, "an extension's type")? as i8;
                (Head::Ext(code, n), used + 1)
            }
            0xca => {
                let (bits, used) = sized(4)?;
                (Head::Float(f64::from(f32::from_bits(bits as u32))), used)
            }
            0xcb => {
                let (bits, used) = sized(8)?;
                (Head::Float(f64::from_bits(bits)), used)
            }
            0xcc..=0xcf => {
                let (v, used) = sized(1 << (first - 0xcc))?;
                (Head::Int(i128::from(v)), used)
            }
            0xd0..=0xd3 => {
                let width = 1u32 << (first - 0xd0);
                let (v, used) = sized(u64::from(width))?;
                // Sign-extend the big-endian two's complement of `width` bytes.
                let shift = 64 - 8 * width;
                (Head::Int(i128::from(((v << shift) as i64) >> shift)), used)
            }
            0xd4..=0xd8 => {
                let code = self.byte(at + 1, end, "an extension's type")? as i8;
                (Head::Ext(code, 1 << (first - 0xd4)), 2)
            }
            0xd9..=0xdb => {
                let (n, used) = sized(1 << (first - 0xd9))?;
                (Head::Text(n), used)
            }
            0xdc | 0xdd => {
                let (n, used) = sized(if first == 0xdc { 2 } else { 4 })?;
                (Head::Array(n), used)
            }
            0xde | 0xdf => {
                let (n, used) = sized(if first == 0xde { 2 } else { 4 })?;
                (Head::Map(n), used)
            }
            0xe0..=0xff => (Head::Int(i128::from(first as i8)), 1),
            0xc1 => {
                return Err(
                    invalid(format!("byte 0xc1 at byte {at} starts no msgpack value")).at(at),
                );
            }
        };
        self.pos = at + used;
        // Each item of an array takes a byte at least, each entry of a map two.
        let items = match head {
            Head::Array(n) => Some((n, 1)),
            Head::Map(n) => Some((n, 2)),
            _ => None,
        };
        if let Some((n, each)) = items {
            if n.saturating_mul(each) > end - self.pos {
                return Err(invalid(format!(
                    "a msgpack {} at byte {at} declares {n} items, more than the {} bytes \
                     after it can hold",
                    head.kind(),
                    end - self.pos
                ))
                .at(at));
            }
        }
        Ok(head)
    }

    /// The text payload of `n` bytes at `pos` (capped at [`MAX_TEXT`]), moving past it.
    fn text(&mut self, n: u64, end: u64, what: &str) -> Result<String> {
        let at = self.pos;
        if n > MAX_TEXT {
            return Err(Error::limit(format!(
                "{what} at byte {at} is {n} bytes long, over the cap of {MAX_TEXT}"
            ))
            .at(at));
        }
        let bytes = self.bytes(at, n, end, what)?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| invalid(format!("{what} at byte {at} is not UTF-8")).at(at))?
            .to_owned();
        self.pos = at + n;
        Ok(text)
    }

    /// A map of `n` entries whose header is read, under `path`.
    fn map(&mut self, n: u64, path: &mut String, depth: usize, end: u64) -> Result<()> {
        let base = path.len();
        // The keys seen, to refuse one given twice (Python's dict would keep the last value,
        // a map's merely its last children): under a keyed hash, the keys come from the file.
        let mut seen: HashSet<String, RandomState> = HashSet::default();
        for i in 0..n {
            let key_at = self.pos;
            let key = match self.head(end)? {
                Head::Text(len) => self.text(len, end, "a map key")?,
                other => {
                    return Err(invalid(format!(
                        "map key at byte {key_at} is a msgpack {}, not a string (flax's \
                         reader takes text keys only)",
                        other.kind()
                    ))
                    .at(key_at))
                }
            };
            if i == 0 && key == CHUNKED_MARK {
                return self.chunked(n, path, depth, end, key_at);
            }
            if n > 1 {
                self.charge(2 * key.len() as u64 + 32)?;
                if !seen.insert(key.clone()) {
                    let e = invalid(format!(
                        "key {key:?} at byte {key_at} is given twice in its map"
                    ));
                    let e = if path.is_empty() {
                        e
                    } else {
                        e.in_object(path.as_str())
                    };
                    return Err(e.at(key_at));
                }
            }
            if base > 0 {
                path.push('/');
            }
            path.push_str(&key);
            self.value(path, depth + 1, end)?;
            path.truncate(base);
        }
        Ok(())
    }

    /// Any value at `pos`, named `path`, `depth` maps and arrays deep.
    fn value(&mut self, path: &mut String, depth: usize, end: u64) -> Result<()> {
        let at = self.pos;
        if depth > self.max_depth {
            return Err(Error::limit(format!(
                "the tree is nested more than {} deep at byte {at}",
                self.max_depth
            ))
            .at(at));
        }
        let value = match self.head(end)? {
            Head::Map(n) => return self.map(n, path, depth, end),
            Head::Array(n) => {
                let base = path.len();
                for i in 0..n {
                    path.push('/');
                    path.push_str(&i.to_string());
                    self.value(path, depth + 1, end)?;
                    path.truncate(base);
                }
                return Ok(());
            }
            Head::Ext(code, len) => return self.ext(code, len, path, end, at),
            Head::Text(len) => Value::Text(self.text(len, end, "a string")?),
            Head::Bytes(len) => {
                self.charge(len)?;
                let bytes = self.bytes(self.pos, len, end, "a bin")?.into_owned();
                self.pos += len;
                Value::Bytes(bytes)
            }
            Head::Nil => Value::Null,
            Head::Bool(b) => Value::Bool(b),
            Head::Int(i) => Value::Integer(i),
            Head::Float(f) => Value::Float(f),
        };
        self.attribute(path, value, at)
    }

    fn charge(&mut self, bytes: u64) -> Result<()> {
        let at = self.pos;
        self.budget.charge(bytes).map_err(|e| e.at(at))
    }

    /// A leaf that is no array: a file attribute named `path`.
    fn attribute(&mut self, path: &str, value: Value, at: u64) -> Result<()> {
        self.charge(2 * path.len() as u64 + 64)?;
        if self.attributes.contains_key(path) {
            return Err(invalid(format!("the value {path:?} is given twice")).at(at));
        }
        self.attributes.insert(path.to_owned(), value);
        Ok(())
    }

    /// An extension of type `code` and `len` bytes, its header at `at` read.
    fn ext(&mut self, code: i8, len: u64, path: &str, end: u64, at: u64) -> Result<()> {
        let start = self.pos;
        let ext_end = start
            .checked_add(len)
            .filter(|&e| e <= end)
            .ok_or_else(|| {
                invalid(format!(
                    "{path:?}: extension of {len} bytes at byte {at} runs past the end of {} \
                     ({} bytes left)",
                    self.place(end),
                    end - start
                ))
                .at(at)
            })?;
        match code {
            EXT_NDARRAY | EXT_NPSCALAR => {
                let object = self.array(path, ext_end).map_err(|e| e.in_object(path))?;
                if self.pos != ext_end {
                    return Err(invalid(format!(
                        "{} bytes follow the array's payload in its extension at byte {at}",
                        ext_end - self.pos
                    ))
                    .in_object(path)
                    .at(self.pos));
                }
                self.charge(crate::listing::Limits::listing_cost(path))?;
                self.objects.push(object);
                Ok(())
            }
            EXT_COMPLEX => {
                let parts = match self.head(ext_end)? {
                    Head::Array(2) => [self.head(ext_end)?, self.head(ext_end)?],
                    other => {
                        return Err(invalid(format!(
                            "{path:?}: a complex number at byte {at} holds a msgpack {}, not \
                             [real, imag]",
                            other.kind()
                        ))
                        .at(at))
                    }
                };
                let number = |h: Head| match h {
                    Head::Float(f) => Some(Value::Float(f)),
                    Head::Int(i) => Some(Value::Integer(i)),
                    _ => None,
                };
                let (Some(re), Some(im)) = (number(parts[0]), number(parts[1])) else {
                    return Err(invalid(format!(
                        "{path:?}: a complex number at byte {at} is not two numbers"
                    ))
                    .at(at));
                };
                if self.pos != ext_end {
                    return Err(invalid(format!(
                        "{path:?}: bytes follow the complex number at byte {at}"
                    ))
                    .at(self.pos));
                }
                self.attribute(path, Value::Array(vec![re, im]), at)
            }
            _ => {
                // flax's reader hands unknown extensions back as they are.
                self.charge(len)?;
                let data = self.bytes(start, len, end, "an extension")?.into_owned();
                self.pos = ext_end;
                let value = Value::Tag(code as u8 as u64, Box::new(Value::Bytes(data)));
                self.attribute(path, value, at)
            }
        }
    }

    /// An array's payload at `pos`, `[shape, dtype name, bytes]`, ending by `end`.
    fn array(&mut self, path: &str, end: u64) -> Result<ObjectInfo> {
        let at = self.pos;
        match self.head(end)? {
            Head::Array(3) => {}
            other => {
                return Err(invalid(format!(
                    "the array's payload at byte {at} is a msgpack {}, not [shape, dtype, bytes]",
                    other.kind()
                ))
                .at(at))
            }
        }
        let shape_at = self.pos;
        let rank = match self.head(end)? {
            Head::Array(n) if n as usize <= self.max_rank => n as usize,
            Head::Array(n) => {
                return Err(Error::limit(format!(
                    "the shape at byte {shape_at} has {n} dimensions, over the cap of {}",
                    self.max_rank
                ))
                .at(shape_at))
            }
            other => {
                return Err(invalid(format!(
                    "the shape at byte {shape_at} is a msgpack {}, not an array",
                    other.kind()
                ))
                .at(shape_at))
            }
        };
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            let dim_at = self.pos;
            match self.head(end)? {
                Head::Int(d) if d >= 0 => shape.push(u64::try_from(d).unwrap_or(u64::MAX)),
                other => {
                    return Err(invalid(format!(
                        "a dimension at byte {dim_at} is a msgpack {}, not a size",
                        other.kind()
                    ))
                    .at(dim_at))
                }
            }
        }
        let dtype_at = self.pos;
        let dtype = match self.head(end)? {
            // flax writes text; its reader takes the raw bytes of either.
            Head::Text(n) | Head::Bytes(n) => self.text(n, end, "the dtype name")?,
            other => {
                return Err(invalid(format!(
                    "the dtype at byte {dtype_at} is a msgpack {}, not a name",
                    other.kind()
                ))
                .at(dtype_at))
            }
        };
        let data_at = self.pos;
        let length = match self.head(end)? {
            Head::Bytes(n) | Head::Text(n) => n,
            other => {
                return Err(invalid(format!(
                    "the data at byte {data_at} is a msgpack {}, not bytes",
                    other.kind()
                ))
                .at(data_at))
            }
        };
        let offset = self.pos;
        if offset.checked_add(length).is_none_or(|e| e > end) {
            return Err(invalid(format!(
                "the data of {length} bytes at byte {offset} runs past the end of its \
                 extension ({} bytes left)",
                end - offset
            ))
            .at(offset));
        }
        self.pos = offset + length;
        let name = path.to_owned();
        let Some(element) = element_of(&dtype) else {
            let defect = Defect::unsupported(format!(
                "dtype {dtype:?} is not a type ztensor reads from a Flax checkpoint"
            ));
            return Ok(ObjectInfo {
                format: Format::Unknown(format!("flax.{dtype}/1")),
                defect: Some(Box::new(defect)),
                ..ObjectInfo::raw_dense(
                    name,
                    shape.into(),
                    ElementType::plain(DType::U8),
                    (offset, length),
                    ByteOrder::Little,
                )
            });
        };
        let needed = element_count(&shape).and_then(|n| byte_size(n, &element))?;
        if needed != length {
            return Err(invalid(format!(
                "shape {shape:?} of {dtype} takes {needed} bytes, but the data holds {length}"
            ))
            .at(data_at));
        }
        Ok(ObjectInfo::raw_dense(
            name,
            shape.into(),
            element,
            (offset, length),
            ByteOrder::Little,
        ))
    }

    /// The rest of a map whose first key is [`CHUNKED_MARK`] (at `at`; `n` entries in all):
    /// an array over 1 GiB that flax split into row-major pieces, `{mark: True, "shape":
    /// {"0": d0, ...}, "chunks": {"0": piece, ...}}`, each piece a flat array of its own.
    /// Listed under `path` as one object whose pieces are its data ([`Encoding::Pieces`]).
    fn chunked(&mut self, n: u64, path: &str, depth: usize, end: u64, at: u64) -> Result<()> {
        // The entries are walked into lists of their own, under their keys, so that none of
        // them is listed as it is; what they hold is then checked as flax's `_unchunk`
        // reads it.
        let objects = std::mem::take(&mut self.objects);
        let attributes = std::mem::take(&mut self.attributes);
        let walked = (|| {
            self.value(&mut String::from(CHUNKED_MARK), depth + 1, end)?;
            for _ in 1..n {
                let key_at = self.pos;
                let mut key = match self.head(end)? {
                    Head::Text(len) => self.text(len, end, "a map key")?,
                    other => {
                        return Err(invalid(format!(
                            "map key at byte {key_at} is a msgpack {}, not a string",
                            other.kind()
                        ))
                        .at(key_at))
                    }
                };
                self.value(&mut key, depth + 1, end)?;
            }
            Ok(())
        })();
        let pieces = std::mem::replace(&mut self.objects, objects);
        let parts = std::mem::replace(&mut self.attributes, attributes);
        walked?;
        self.charge(crate::listing::Limits::listing_cost(path))?;
        let object = unchunk(path, &pieces, &parts).map_err(|e| e.in_object(path).at(at))?;
        self.objects.push(object);
        Ok(())
    }
}

/// A chunked array's object from its entries, walked on their own: the mark must be true,
/// `shape/0`.. its dimensions, `chunks/0`.. its flat pieces, all of one element type, that
/// together hold the shape's elements.
fn unchunk(path: &str, pieces: &[ObjectInfo], parts: &Attributes) -> Result<ObjectInfo> {
    if parts.get(CHUNKED_MARK) != Some(&Value::Bool(true)) {
        return Err(invalid(format!("{CHUNKED_MARK} is not true")));
    }
    let mut shape = Vec::new();
    while let Some(d) = parts.get(&format!("shape/{}", shape.len())) {
        match d {
            Value::Integer(d) if *d >= 0 && *d <= i128::from(u64::MAX) => shape.push(*d as u64),
            _ => {
                return Err(invalid(
                    "a chunked array's shape holds a negative or non-integer",
                ))
            }
        }
    }
    if parts.keys().filter(|k| k.starts_with("shape/")).count() != shape.len() {
        return Err(invalid(
            "a chunked array's shape is not numbered 0, 1, ... in full",
        ));
    }
    let by_name: std::collections::BTreeMap<&str, &ObjectInfo> =
        pieces.iter().map(|o| (o.name.as_str(), o)).collect();
    let mut ranges = Vec::new();
    let mut element: Option<ElementType> = None;
    let mut count = 0u64;
    while let Some(piece) = by_name.get(format!("chunks/{}", ranges.len()).as_str()) {
        let i = ranges.len();
        let c = match (&piece.defect, piece.components.first()) {
            (None, Some(c)) if piece.shape.len() == 1 && c.arrangement.is_none() => c,
            _ => {
                return Err(invalid(format!(
                    "piece {i} of a chunked array is not a flat array"
                )))
            }
        };
        if element.as_ref().is_some_and(|e| *e != c.element) {
            return Err(invalid(format!(
                "piece {i} of a chunked array is {}, its first piece {}",
                c.element.name(),
                element.as_ref().map_or("", |e| e.name())
            )));
        }
        element = Some(c.element.clone());
        count = count
            .checked_add(piece.shape.first().copied().unwrap_or(0))
            .ok_or_else(|| invalid("a chunked array's pieces overflow"))?;
        ranges.push((c.offset, c.length));
    }
    if pieces
        .iter()
        .filter(|o| o.name.starts_with("chunks/"))
        .count()
        != ranges.len()
    {
        return Err(invalid(
            "a chunked array's pieces are not numbered 0, 1, ... in full",
        ));
    }
    let Some(element) = element else {
        // np.concatenate of no pieces raises.
        return Err(invalid("a chunked array has no pieces"));
    };
    let want = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(|| invalid(format!("shape {shape:?} overflows")))?;
    if count != want {
        return Err(invalid(format!(
            "a chunked array's pieces hold {count} elements, its shape {shape:?} {want}"
        )));
    }
    let bytes = count
        .checked_mul(element.logical_size())
        .ok_or_else(|| invalid(format!("shape {shape:?} overflows")))?;
    // The component spans the pieces (what a read-ahead of it covers); each is read from
    // where it lies.
    let first = ranges.iter().map(|r| r.0).min().unwrap_or(0);
    let last = ranges.iter().map(|r| r.0 + r.1).max().unwrap_or(first);
    let pieces = ranges
        .iter()
        .map(|&(offset, length)| Piece {
            file: 0,
            offset,
            length,
            crc32c: None,
        })
        .collect();
    let mut o = ObjectInfo::raw_dense(
        path.to_owned(),
        shape.into_iter().collect(),
        element,
        (first, last - first),
        ByteOrder::Little,
    );
    if let Some(c) = o.components.0.first_mut() {
        c.encoding = Encoding::Pieces(Box::new(pieces));
        c.decoded_len = Some(bytes);
        c.uncompressed_length = Some(bytes);
    }
    Ok(o)
}

/// The element type of a NumPy (or ml_dtypes) type name, as `dtype.name` gives it.
fn element_of(name: &str) -> Option<ElementType> {
    let plain = |d| Some(ElementType::plain(d));
    match name {
        "bool" => plain(DType::Bool),
        "int8" => plain(DType::I8),
        "int16" => plain(DType::I16),
        "int32" => plain(DType::I32),
        "int64" => plain(DType::I64),
        "uint8" => plain(DType::U8),
        "uint16" => plain(DType::U16),
        "uint32" => plain(DType::U32),
        "uint64" => plain(DType::U64),
        "float16" => plain(DType::F16),
        "bfloat16" => plain(DType::BF16),
        "float32" => plain(DType::F32),
        "float64" => plain(DType::F64),
        "complex64" => ElementType::logical(LogicalType::Complex64),
        "complex128" => ElementType::logical(LogicalType::Complex128),
        "float8_e4m3fn" => ElementType::logical(LogicalType::F8E4M3Fn),
        "float8_e5m2" => ElementType::logical(LogicalType::F8E5M2),
        "float8_e4m3fnuz" => ElementType::logical(LogicalType::F8E4M3Fnuz),
        "float8_e5m2fnuz" => ElementType::logical(LogicalType::F8E5M2Fnuz),
        "float8_e8m0fnu" => ElementType::logical(LogicalType::F8E8M0),
        // ml_dtypes keeps its 4- and 6-bit types one to a byte; ours are packed.
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A msgpack array payload: `[shape, dtype, bytes]`.
    fn payload(shape: &[u8], dtype: &str, data: &[u8]) -> Vec<u8> {
        let mut p = vec![0x93, 0x90 | shape.len() as u8];
        p.extend_from_slice(shape);
        p.push(0xa0 | dtype.len() as u8);
        p.extend_from_slice(dtype.as_bytes());
        p.push(0xc4);
        p.push(data.len() as u8);
        p.extend_from_slice(data);
        p
    }

    fn ext(code: u8, payload: &[u8]) -> Vec<u8> {
        let mut e = vec![0xc7, payload.len() as u8, code];
        e.extend_from_slice(payload);
        e
    }

    fn listed(bytes: Vec<u8>) -> Result<Listing> {
        list(&Source::from_vec(bytes), &Limits::default())
    }

    #[test]
    fn lists_arrays_by_path_and_other_leaves_as_attributes() {
        // {"params": {"dense": {"kernel": f32[2], "bias": bf16[1]}, "step": 7, "s": 3.5j}}
        let mut file = vec![0x81, 0xa6];
        file.extend_from_slice(b"params");
        file.extend_from_slice(&[0x83, 0xa5]);
        file.extend_from_slice(b"dense");
        file.extend_from_slice(&[0x82, 0xa6]);
        file.extend_from_slice(b"kernel");
        file.extend(ext(
            1,
            &payload(&[2], "float32", &[0, 0, 128, 63, 0, 0, 0, 64]),
        ));
        file.extend_from_slice(&[0xa4]);
        file.extend_from_slice(b"bias");
        file.extend(ext(1, &payload(&[1], "bfloat16", &[0x80, 0x3f])));
        file.extend_from_slice(&[0xa4]);
        file.extend_from_slice(b"step");
        file.push(0x07);
        file.extend_from_slice(&[0xa1, b's']);
        file.extend(ext(2, &[0x92, 0x00, 0xcb, 0x40, 0x0c, 0, 0, 0, 0, 0, 0]));
        let listing = listed(file).unwrap();
        let names: Vec<&str> = listing.objects.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["params/dense/bias", "params/dense/kernel"]);
        let kernel = &listing.objects[1];
        assert_eq!(&kernel.shape[..], &[2]);
        assert_eq!(listing.attributes["params/step"], Value::Integer(7));
        assert_eq!(
            listing.attributes["params/s"],
            Value::Array(vec![Value::Integer(0), Value::Float(3.5)])
        );
    }

    #[test]
    fn refuses_what_flax_refuses_and_what_would_overrun() {
        let array = ext(1, &payload(&[2], "float32", &[0; 8]));
        let with = |value: &[u8]| {
            let mut f = vec![0x81, 0xa1, b'w'];
            f.extend_from_slice(value);
            f
        };
        let short = ext(1, &payload(&[3], "float32", &[0; 8]));
        let mut trailing = with(&array);
        trailing.push(0xc0);
        let mut int_key = vec![0x81, 0x01];
        int_key.extend_from_slice(&array);
        let mut cut = with(&array);
        cut.truncate(cut.len() - 3);
        let deep: Vec<u8> = std::iter::repeat_n([0x81, 0xa1, b'x'], 200)
            .flatten()
            .chain([0xc0])
            .collect();
        let cases: [(Vec<u8>, &str); 7] = [
            (
                with(&short),
                "shape [3] of float32 takes 12 bytes, but the data holds 8",
            ),
            (
                trailing,
                "1 bytes follow the end of the checkpoint's msgpack value",
            ),
            (
                int_key,
                "map key at byte 1 is a msgpack integer, not a string",
            ),
            (cut, "runs past the end of the file"),
            (
                vec![0x91, 0xc0],
                "not a Flax checkpoint: the file holds a msgpack array",
            ),
            (deep, "nested more than 128 deep"),
            (
                vec![0xdf, 0xff, 0xff, 0xff, 0xff, 0xa0],
                "declares 4294967295 items",
            ),
        ];
        for (bytes, why) in cases {
            let e = listed(bytes).err().expect(why);
            assert!(e.to_string().contains(why), "{why}: {e}");
        }
        let mut twice = vec![0x82, 0xa1, b'w'];
        twice.extend_from_slice(&array);
        twice.extend_from_slice(&[0xa1, b'w']);
        twice.extend_from_slice(&array);
        let e = listed(twice).err().unwrap();
        assert!(
            e.to_string()
                .contains("key \"w\" at byte 27 is given twice"),
            "{e}"
        );
        // Twice as maps with other children: merging them would list what flax drops.
        let mut maps = vec![0x82, 0xa1, b'm', 0x81, 0xa1, b'a'];
        maps.extend_from_slice(&array);
        maps.extend_from_slice(&[0xa1, b'm', 0x81, 0xa1, b'b']);
        maps.extend_from_slice(&array);
        let e = listed(maps).err().unwrap();
        assert!(
            e.to_string()
                .contains("key \"m\" at byte 30 is given twice"),
            "{e}"
        );
    }
}
