//! GGUF files (llama.cpp, ollama, LM Studio), versions 1 to 3, little- or big-endian, in the
//! facade's object model.
//!
//! A GGUF file is `GGUF`, a u32 version, the tensor and metadata counts, the metadata
//! (key, value type, value), the tensor infos (name, dimensions innermost first, ggml type
//! id, offset into the data section), padding to `general.alignment` (default 32), and the
//! data section. Version 1 counts, lengths and dimensions in u32 where later versions use
//! u64; a file whose version reads with its low 16 bits zero is big-endian (v3 added that),
//! and then every number in it is, dense tensor data included.
//!
//! What it becomes:
//! - every metadata value is a file attribute under its key (integers, floats, bools,
//!   strings, arrays of them, arrays of arrays), as ztensor 2.x projects them; the GGUF
//!   type of each is kept in the attribute [`VALUE_TYPES_KEY`] (see [`value_type`]), so a
//!   file written back has the same types;
//! - a tensor of a dense ggml type (F32, F16, BF16, F64, I8-I64) is a dense object whose
//!   `data` is its range of the file, borrowed from the map when little-endian;
//! - a tensor of a block type (Q4_0 ... MXFP4, NVFP4) is an object of format
//!   `gguf.<type>/1` (ztensor 2.x's id) with one u8 `data` component holding its blocks
//!   byte for byte, attributes `elems_per_block` and `block_bytes`, and its logical shape;
//! - a tensor whose type id ggml's table does not hold is listed as `gguf.type_<id>/1`
//!   with no bytes and a defect (reading it fails; the rest of the file reads).
//!
//! Shapes are row-major: GGUF's dimensions reversed.
//!
//! Hostile input: every count and length is checked against the bytes left before anything
//! is allocated, array nesting is capped ([`MAX_NESTING`]), shapes are capped in rank and
//! checked for overflow, tensor data must lie aligned inside the data section with no two
//! tensors overlapping, unknown value types and bad `general.alignment` are errors at their
//! offset. See docs/hostile-input.md.

use zt_container::internal::{try_with_capacity, MemoryBudget};
use zt_container::{Error, Result, Source};
use zt_formats::ggml::GgmlType;
use zt_formats::{DType, ElementType, Format};
use zt_manifest::{Attributes, Value, ValueBudget};

use crate::files::window::Window;
use crate::listing::{sort_by_name, Limits, Listing};
use crate::model::{ByteOrder, Defect, FileVersion, ObjectInfo};

/// The file attribute that holds the GGUF type of every metadata value, keyed like the
/// metadata (`"u32"`, `"str"`, `"[f32]"`, ...): a GGUF file's reader makes it, and the GGUF
/// writer writes each value with the type it names.
pub const VALUE_TYPES_KEY: &str = "gguf.value_types";

/// The file attribute of a legacy GGML file's listing that holds its tokens, in the file's
/// order: each text, or bytes when it is not UTF-8 (llama.cpp's single-byte tokens). The
/// GGUF writer makes llama.cpp's vocabulary of it.
pub const GGML_VOCAB_KEY: &str = "ggml.vocab";

/// The file attribute of a legacy GGML file's listing that holds its tokens' scores (f32),
/// when the file has them.
pub const GGML_SCORES_KEY: &str = "ggml.scores";

/// The data section's alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// The key that sets the alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Arrays nested deeper than this are refused (ggml writes none; the `gguf` package writes
/// any depth).
pub const MAX_NESTING: usize = 16;

/// GGUF metadata value types, by their numbers.
pub(crate) const VALUE_TYPE_NAMES: [&str; 13] = [
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "array", "u64", "i64", "f64",
];

/// The number of the metadata value type `array`.
pub(crate) const ARRAY: u32 = 9;

/// The type of one metadata value, as kept in [`VALUE_TYPES_KEY`]: its name
/// (`u8 i8 u16 i16 u32 i32 f32 bool str u64 i64 f64`) for a scalar; `[name]` for an array
/// of scalars (`[str]`); for an array of arrays, an array of its elements' types (each
/// inner array has its own).
pub fn value_type(type_id: u32) -> Option<&'static str> {
    VALUE_TYPE_NAMES
        .get(type_id as usize)
        .copied()
        .filter(|_| type_id != ARRAY)
}

/// A GGUF file's header, metadata and tensor infos read front to back: a window over the
/// file that is the map itself when there is one, and otherwise reads ahead in pieces.
struct Cursor<'s> {
    ahead: Window<'s>,
    big_endian: bool,
    v1: bool,
    /// What the metadata values made so far take.
    values: ValueBudget,
}

impl<'s> std::ops::Deref for Cursor<'s> {
    type Target = Window<'s>;
    fn deref(&self) -> &Window<'s> {
        &self.ahead
    }
}

impl std::ops::DerefMut for Cursor<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.ahead
    }
}

impl<'s> Cursor<'s> {
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let big = self.big_endian;
        let b = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        if big {
            a.reverse();
        }
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A count or length: u32 in version 1, u64 after.
    fn count(&mut self, what: &str) -> Result<u64> {
        if self.v1 {
            self.u32(what).map(u64::from)
        } else {
            self.u64(what)
        }
    }

    /// A string's bytes: its length, checked against what is left, then the bytes.
    fn string(&mut self, what: &str) -> Result<Vec<u8>> {
        let at = self.pos;
        let n = self.count(what)?;
        if n > self.remaining() {
            return Err(invalid(format!(
                "{what} at byte {at} declares {n} bytes, but only {} are left in the file",
                self.remaining()
            ))
            .at(at));
        }
        Ok(self.take(n, what)?.to_vec())
    }

    /// A string that must be UTF-8 (keys, tensor names).
    fn text(&mut self, what: &str) -> Result<String> {
        let at = self.pos;
        let bytes = self.string(what)?;
        String::from_utf8(bytes)
            .map_err(|_| invalid(format!("{what} at byte {at} is not valid UTF-8")).at(at))
    }

    /// The fewest bytes one value of `type_id` takes, or `None` for an unknown type.
    fn min_size(&self, type_id: u32) -> Option<u64> {
        let count = if self.v1 { 4 } else { 8 };
        Some(match type_id {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            8 => count,
            ARRAY => 4 + count,
            10..=12 => 8,
            _ => return None,
        })
    }

    /// One metadata value of type `type_id` and, when `want_type`, its type (see
    /// [`value_type`]); `depth` counts the arrays around it. The caller has charged the
    /// value's node to the budget; its text, and its type, are charged here.
    fn value(
        &mut self,
        type_id: u32,
        depth: usize,
        type_at: u64,
        want_type: bool,
    ) -> Result<(Value, Option<Value>)> {
        let at = self.pos;
        let int = |v: i128| Value::Integer(v);
        let value = match type_id {
            0 => int(self.array::<1>("u8 value").map(u8::from_le_bytes)?.into()),
            1 => int(self.array::<1>("i8 value").map(i8::from_le_bytes)?.into()),
            2 => int(self.array::<2>("u16 value").map(u16::from_le_bytes)?.into()),
            3 => int(self.array::<2>("i16 value").map(i16::from_le_bytes)?.into()),
            4 => int(self.u32("u32 value")?.into()),
            5 => int(self.array::<4>("i32 value").map(i32::from_le_bytes)?.into()),
            6 => Value::Float(self.array::<4>("f32 value").map(f32::from_le_bytes)?.into()),
            7 => match self.array::<1>("bool value")? {
                [0] => Value::Bool(false),
                [1] => Value::Bool(true),
                [b] => {
                    return Err(
                        invalid(format!("bool value at byte {at} is {b}, not 0 or 1")).at(at),
                    )
                }
            },
            8 => {
                let bytes = self.string("string value")?;
                self.values.payload(bytes.len()).map_err(|e| e.at(at))?;
                // Not every GGUF string is text (a tokenizer's byte tokens may not be):
                // what is not UTF-8 is kept as bytes, and its type still says str.
                match String::from_utf8(bytes) {
                    Ok(s) => Value::Text(s),
                    Err(e) => Value::Bytes(e.into_bytes()),
                }
            }
            ARRAY => return self.array_value(depth, at, want_type),
            10 => int(self.u64("u64 value")?.into()),
            11 => int(self.array::<8>("i64 value").map(i64::from_le_bytes)?.into()),
            12 => Value::Float(self.array::<8>("f64 value").map(f64::from_le_bytes)?),
            other => {
                return Err(invalid(format!(
                    "unknown metadata value type {other} at byte {type_at}"
                ))
                .at(type_at))
            }
        };
        if !want_type {
            return Ok((value, None));
        }
        let name = value_type(type_id).unwrap_or("?");
        self.charge_text_value(name, at)?;
        Ok((value, Some(Value::Text(name.to_owned()))))
    }

    /// Charges a text value of `text` (a value's type) to the budget.
    fn charge_text_value(&mut self, text: &str, at: u64) -> Result<()> {
        self.values
            .node()
            .and_then(|()| self.values.payload(text.len()))
            .map_err(|e| e.at(at))
    }

    fn array_value(
        &mut self,
        depth: usize,
        at: u64,
        want_type: bool,
    ) -> Result<(Value, Option<Value>)> {
        if depth >= MAX_NESTING {
            return Err(Error::limit(format!(
                "metadata arrays nested more than {MAX_NESTING} deep at byte {at}"
            ))
            .at(at));
        }
        let elem_at = self.pos;
        let elem = self.u32("array element type")?;
        let min = self.min_size(elem).ok_or_else(|| {
            invalid(format!(
                "unknown metadata value type {elem} at byte {elem_at}"
            ))
            .at(elem_at)
        })?;
        let n_at = self.pos;
        let n = self.count("array length")?;
        // Checked before anything is allocated: each element takes at least `min` bytes.
        if n.checked_mul(min).is_none_or(|b| b > self.remaining()) {
            return Err(invalid(format!(
                "array at byte {at} declares {n} elements of {}, but only {} bytes are left \
                 in the file",
                VALUE_TYPE_NAMES.get(elem as usize).unwrap_or(&"?"),
                self.remaining()
            ))
            .at(n_at));
        }
        // Every element's node is charged before any is allocated: a byte of the file can
        // be a 32-byte value.
        self.values.nodes(n).map_err(|e| e.at(n_at))?;
        let mut values = try_with_capacity(n as usize).map_err(|e| e.at(n_at))?;
        let mut types = Vec::new();
        for _ in 0..n {
            // An array of arrays records each inner array's type; scalars' are not made.
            let (v, t) = self.value(elem, depth + 1, elem_at, elem == ARRAY)?;
            values.push(v);
            types.extend(t);
        }
        if !want_type {
            return Ok((Value::Array(values), None));
        }
        let ty = if elem == ARRAY {
            self.values.node().map_err(|e| e.at(at))?;
            Value::Array(types)
        } else {
            let name = format!("[{}]", value_type(elem).unwrap_or("?"));
            self.charge_text_value(&name, at)?;
            Value::Text(name)
        };
        Ok((Value::Array(values), Some(ty)))
    }
}

fn invalid(what: impl Into<String>) -> Error {
    Error::invalid(format!("invalid GGUF file: {}", what.into()))
}

/// One tensor info as written.
struct TensorInfo {
    name: String,
    /// Row-major.
    shape: Vec<u64>,
    type_id: u32,
    offset: u64,
    /// Where the info starts, for errors.
    at: u64,
}

/// Tells a GGUF file's version and byte order from its version field: a version whose low
/// 16 bits are zero is a big-endian file's (v3 reads as 0x03000000 the wrong way round).
fn version_and_order(raw: u32) -> Result<(u32, bool)> {
    let (version, big) = if raw & 0xFFFF == 0 && raw != 0 {
        (raw.swap_bytes(), true)
    } else {
        (raw, false)
    };
    if !(1..=3).contains(&version) {
        return Err(Error::unsupported(format!(
            "GGUF version {version}: versions 1 to 3 are read"
        ))
        .at(4));
    }
    Ok((version, big))
}

/// Lists a GGUF file. Only the header, metadata and tensor infos are read; tensors are read
/// on demand like every other kind.
pub(crate) fn list(source: &Source, limits: &Limits) -> Result<Listing> {
    let len = source.len();
    let mut c = Cursor {
        ahead: Window::new(source, 0, "GGUF file"),
        big_endian: false,
        v1: false,
        values: ValueBudget::new(limits.decode_limits().max_value_bytes),
    };
    if c.take(4, "magic")? != b"GGUF" {
        return Err(invalid("no GGUF magic").at(0));
    }
    let (version, big_endian) = version_and_order(c.u32("version")?)?;
    c.big_endian = big_endian;
    c.v1 = version == 1;

    let n_tensors_at = c.pos;
    let n_tensors = c.count("tensor count")?;
    let n_kv_at = c.pos;
    let n_kv = c.count("metadata count")?;
    // Each key-value takes at least a key length, a type and a byte; each tensor info a
    // name length, a dimension count, a type and an offset. Checked before allocating.
    let (kv_min, info_min) = if c.v1 { (9, 20) } else { (13, 24) };
    let need = n_kv
        .checked_mul(kv_min)
        .and_then(|a| a.checked_add(n_tensors.checked_mul(info_min)?));
    if need.is_none_or(|n| n > c.remaining()) {
        return Err(invalid(format!(
            "{n_tensors} tensors and {n_kv} metadata entries cannot fit in the {} bytes left",
            c.remaining()
        ))
        .at(n_kv_at));
    }

    let mut attributes = Attributes::new();
    let mut types = Attributes::new();
    let mut alignment = DEFAULT_ALIGNMENT;
    for _ in 0..n_kv {
        let key_at = c.pos;
        let key = c.text("metadata key")?;
        let type_at = c.pos;
        let type_id = c.u32("metadata value type")?;
        // The key is kept twice (the value's and its type's), the value's node once.
        c.values
            .key(key.len())
            .and_then(|()| c.values.key(key.len()))
            .and_then(|()| c.values.node())
            .map_err(|e| e.at(key_at))?;
        let (value, ty) = c.value(type_id, 0, type_at, true)?;
        let ty = ty.unwrap_or(Value::Null);
        if key == ALIGNMENT_KEY {
            alignment = match (&value, type_id) {
                (Value::Integer(a), 4) if *a > 0 && (*a as u64).is_power_of_two() => *a as u64,
                _ => {
                    let shown = match &value {
                        Value::Integer(i) => i.to_string(),
                        v => v.kind_name().to_owned(),
                    };
                    return Err(invalid(format!(
                        "{ALIGNMENT_KEY} at byte {key_at} is {} {shown}, not a u32 power of two",
                        value_type(type_id).unwrap_or("array")
                    ))
                    .at(key_at));
                }
            };
        }
        if attributes.contains_key(&key) {
            return Err(invalid(format!(
                "metadata key {key:?} is given twice (at byte {key_at})"
            ))
            .at(key_at));
        }
        types.insert(key.clone(), ty);
        attributes.insert(key, value);
    }

    // A tensor info can be written in 24 bytes and lists in about twenty times that: the
    // listing is charged as it grows, against the budget every listing has.
    // The declared count's records are charged before their list is allocated, each name
    // and shape as it is read.
    let mut listing = MemoryBudget::new(limits.listing_budget(len), "listing the file's tensors");
    let record = (std::mem::size_of::<TensorInfo>() + std::mem::size_of::<ObjectInfo>()) as u64;
    listing
        .charge(n_tensors.saturating_mul(record))
        .map_err(|e| e.at(n_tensors_at))?;
    let mut infos = try_with_capacity(n_tensors as usize)?;
    for _ in 0..n_tensors {
        let at = c.pos;
        let info = tensor_info(&mut c, limits)?;
        let cost = 2 * info.name.len() + 16 * info.shape.len();
        listing.charge(cost as u64).map_err(|e| e.at(at))?;
        infos.push(info);
    }

    let data_start = c
        .pos
        .checked_next_multiple_of(alignment)
        .ok_or_else(|| invalid("data section offset overflows").at(c.pos))?;
    let objects = objects(infos, data_start, alignment, len, big_endian)?;

    // Keep the file's own key if it has one of that name (the types then go unrecorded).
    attributes
        .entry(VALUE_TYPES_KEY.to_owned())
        .or_insert(Value::Map(types));
    Ok(Listing::of_unique(
        FileVersion::Gguf {
            version,
            big_endian,
        },
        attributes,
        objects,
    ))
}

fn tensor_info(c: &mut Cursor<'_>, limits: &Limits) -> Result<TensorInfo> {
    let at = c.pos;
    let name = c.text("tensor name")?;
    let in_tensor = |e: Error| e.in_object(&name);
    let n_dims = c.u32("dimension count").map_err(in_tensor)?;
    if n_dims as usize > limits.decode.max_rank {
        return Err(in_tensor(
            Error::rank_over_cap(Some(n_dims.into()), limits.decode.max_rank).at(at),
        ));
    }
    let dims_at = c.pos;
    let mut shape = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        shape.push(c.count("dimension").map_err(in_tensor)?);
    }
    shape.reverse();
    // ggml holds dimensions and their product in int64.
    let count = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .filter(|&n| i64::try_from(n).is_ok());
    if count.is_none() {
        return Err(in_tensor(
            invalid(format!(
                "the dimensions {shape:?} at byte {dims_at} multiply past 2^63"
            ))
            .at(dims_at),
        ));
    }
    let type_id = c.u32("tensor type").map_err(in_tensor)?;
    let offset = c.u64("tensor offset").map_err(in_tensor)?;
    Ok(TensorInfo {
        name,
        shape,
        type_id,
        offset,
        at,
    })
}

/// The listed objects of the tensor infos: each tensor's bytes checked to lie aligned
/// inside the data section, and no two to overlap.
fn objects(
    infos: Vec<TensorInfo>,
    data_start: u64,
    alignment: u64,
    file_len: u64,
    big_endian: bool,
) -> Result<Vec<ObjectInfo>> {
    let mut objects = try_with_capacity(infos.len())?;
    for info in infos {
        let o = object(info, data_start, alignment, file_len, big_endian)?;
        objects.push(o);
    }
    if let Some(name) = sort_by_name(&mut objects) {
        return Err(invalid(format!("tensor {name:?} is named twice")).in_object(name));
    }
    // Tensors may not share bytes at all: ggml lays them out one after another.
    let mut ranges: Vec<(u64, u64, usize)> = objects
        .iter()
        .enumerate()
        .filter_map(|(i, o)| {
            let d = o.components.first()?;
            (d.length > 0).then_some((d.offset, d.length, i))
        })
        .collect();
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        if let [(a_off, a_len, a), (b_off, _, b)] = *w {
            if b_off < a_off + a_len {
                let name = |i: usize| objects.get(i).map_or("?", |o| o.name.as_str());
                return Err(invalid(format!(
                    "the data of tensors {:?} and {:?} overlap at byte {b_off}",
                    name(a),
                    name(b)
                ))
                .in_object(name(b))
                .at(b_off));
            }
        }
    }
    Ok(objects)
}

fn object(
    info: TensorInfo,
    data_start: u64,
    alignment: u64,
    file_len: u64,
    big_endian: bool,
) -> Result<ObjectInfo> {
    let TensorInfo {
        name,
        shape,
        type_id,
        offset,
        at,
    } = info;
    let fail = |e: Error| e.in_object(&name);
    if offset % alignment != 0 {
        return Err(fail(
            invalid(format!(
                "tensor info at byte {at}: offset {offset} is not a multiple of the \
                 alignment {alignment}"
            ))
            .at(at),
        ));
    }
    // The data section ends at the end of the file.
    let data_len = file_len.saturating_sub(data_start);
    let start = data_start
        .checked_add(offset)
        .filter(|_| offset <= data_len);
    let Some(start) = start else {
        return Err(fail(
            invalid(format!(
                "tensor info at byte {at}: offset {offset} lies past the end of the data \
                 section ({data_len} bytes from byte {data_start})"
            ))
            .at(at),
        ));
    };
    let count = shape.iter().product::<u64>();
    let Some(t) = GgmlType::by_id(type_id) else {
        // Listed with no bytes: without the type its length is unknown.
        let format = Format::Unknown(format!("gguf.type_{type_id}/1"));
        let element = ElementType::plain(DType::U8);
        let defect = Defect::unsupported(format!(
            "ggml type id {type_id} is not in the type table this library knows"
        ));
        return Ok(ObjectInfo {
            format,
            defect: Some(Box::new(defect)),
            ..ObjectInfo::raw_dense(name, shape.into(), element, (start, 0), ByteOrder::Little)
        });
    };
    // Every block type keeps its blocks row by row: the innermost dimension must be whole
    // blocks, not just the total.
    let innermost = shape.last().copied().unwrap_or(1);
    if innermost % t.block_elems != 0 {
        return Err(fail(
            invalid(format!(
                "tensor info at byte {at}: {} blocks hold {} elements each, but the innermost \
                 dimension is {innermost}",
                t.name.to_uppercase(),
                t.block_elems,
            ))
            .at(at),
        ));
    }
    let length = t.byte_len(count).ok_or_else(|| {
        fail(
            invalid(format!(
                "tensor info at byte {at}: its size in bytes overflows"
            ))
            .at(at),
        )
    })?;
    if start.checked_add(length).is_none_or(|end| end > file_len) {
        return Err(fail(
            invalid(format!(
                "tensor data of {length} bytes at byte {start} runs past the end of the \
                 {file_len}-byte file (file truncated?)"
            ))
            .at(start),
        ));
    }
    let order = if big_endian {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
    Ok(typed_object(name, shape, &t, (start, length), order))
}

/// The object of a tensor of ggml type `t` (GGUF's, and the legacy GGML files'): dense
/// with `order` when the type is a plain number, else of format `gguf.<type>/1`, its blocks
/// one u8 component with their `elems_per_block` and `block_bytes` as attributes. `shape`
/// is row-major; `data` the tensor's `(offset, length)` in its file.
pub(crate) fn typed_object(
    name: String,
    shape: Vec<u64>,
    t: &GgmlType,
    data: (u64, u64),
    order: ByteOrder,
) -> ObjectInfo {
    match t.dense {
        Some(d) => ObjectInfo::raw_dense(name, shape.into(), ElementType::plain(d), data, order),
        None => {
            let element = ElementType::plain(DType::U8);
            let mut attributes = Attributes::new();
            attributes.insert(
                "elems_per_block".into(),
                Value::Integer(t.block_elems.into()),
            );
            attributes.insert("block_bytes".into(), Value::Integer(t.block_bytes.into()));
            ObjectInfo {
                format: Format::Unknown(t.layout_id()),
                attributes,
                // Blocks are bytes: their inner numbers are as the writer left them.
                ..ObjectInfo::raw_dense(name, shape.into(), element, data, ByteOrder::Little)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_endian_versions_are_told_by_their_low_half() {
        assert_eq!(version_and_order(3).unwrap(), (3, false));
        assert_eq!(version_and_order(0x0300_0000).unwrap(), (3, true));
        assert_eq!(version_and_order(0x0100_0000).unwrap(), (1, true));
        assert!(version_and_order(4).is_err());
        assert!(version_and_order(0).is_err());
    }

    /// A v3 file of one key of type `type_id` whose value is `payload`, and no tensors.
    fn one_key(key: &[u8], type_id: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = b"GGUF".to_vec();
        f.extend(3u32.to_le_bytes());
        f.extend(0u64.to_le_bytes());
        f.extend(1u64.to_le_bytes());
        f.extend((key.len() as u64).to_le_bytes());
        f.extend(key);
        f.extend(type_id.to_le_bytes());
        f.extend(payload);
        f
    }

    fn listed(bytes: Vec<u8>) -> Result<Listing> {
        list(&Source::from_vec(bytes), &Limits::default())
    }

    #[test]
    fn a_string_that_is_not_utf8_is_kept_as_bytes_typed_str() {
        let mut payload = 3u64.to_le_bytes().to_vec();
        payload.extend(b"a\xffb");
        let l = listed(one_key(b"k", 8, &payload)).unwrap();
        assert_eq!(
            l.attributes.get("k"),
            Some(&Value::Bytes(b"a\xffb".to_vec()))
        );
        let Some(Value::Map(types)) = l.attributes.get(VALUE_TYPES_KEY) else {
            panic!("types")
        };
        assert_eq!(types.get("k"), Some(&Value::Text("str".into())));
    }

    #[test]
    fn an_empty_array_keeps_its_element_type() {
        let mut payload = 6u32.to_le_bytes().to_vec();
        payload.extend(0u64.to_le_bytes());
        let l = listed(one_key(b"k", ARRAY, &payload)).unwrap();
        assert_eq!(l.attributes.get("k"), Some(&Value::Array(vec![])));
        let Some(Value::Map(types)) = l.attributes.get(VALUE_TYPES_KEY) else {
            panic!("types")
        };
        assert_eq!(types.get("k"), Some(&Value::Text("[f32]".into())));
    }

    #[test]
    fn a_file_key_named_like_the_types_map_wins() {
        let mut payload = 1u64.to_le_bytes().to_vec();
        payload.extend(b"x");
        let l = listed(one_key(VALUE_TYPES_KEY.as_bytes(), 8, &payload)).unwrap();
        assert_eq!(
            l.attributes.get(VALUE_TYPES_KEY),
            Some(&Value::Text("x".into()))
        );
    }

    #[test]
    fn value_type_names_skip_array() {
        assert_eq!(value_type(0), Some("u8"));
        assert_eq!(value_type(8), Some("str"));
        assert_eq!(value_type(ARRAY), None);
        assert_eq!(value_type(13), None);
    }
}
