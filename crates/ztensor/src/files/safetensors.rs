//! `.safetensors` files in the facade's object model. The header is parsed here (not by the
//! safetensors crate, whose JSON parsing refuses a whole file over one dtype it does not know),
//! with every check the crate makes; files are written by [`crate::convert`]. `F8_E4M3`,
//! `F8_E5M2`, `F8_E4M3FNUZ`, `F8_E5M2FNUZ`, `F8_E8M0`, `F4`, `F6_E2M3`, `F6_E3M2` and `C64` map
//! to our logical types; `__metadata__` maps to text file attributes. A tensor of a dtype we do
//! not know is listed with a defect (reading it fails) and the rest of the file reads.

use safetensors::tensor::Dtype;
use serde_json::Value as Json;
use zt_container::{Error, Result, Source};
use zt_formats::{DType, ElementType, LogicalType};
use zt_manifest::Value;

use crate::listing::Listing;
use crate::model::{ByteOrder, Defect, FileVersion, ObjectInfo};

/// Every dtype of the safetensors crate (0.8), with its spelling in headers.
pub(crate) const DTYPES: [(&str, Dtype); 22] = [
    ("BOOL", Dtype::BOOL),
    ("F4", Dtype::F4),
    ("F6_E2M3", Dtype::F6_E2M3),
    ("F6_E3M2", Dtype::F6_E3M2),
    ("U8", Dtype::U8),
    ("I8", Dtype::I8),
    ("F8_E5M2", Dtype::F8_E5M2),
    ("F8_E4M3", Dtype::F8_E4M3),
    ("F8_E8M0", Dtype::F8_E8M0),
    ("F8_E4M3FNUZ", Dtype::F8_E4M3FNUZ),
    ("F8_E5M2FNUZ", Dtype::F8_E5M2FNUZ),
    ("I16", Dtype::I16),
    ("U16", Dtype::U16),
    ("F16", Dtype::F16),
    ("BF16", Dtype::BF16),
    ("I32", Dtype::I32),
    ("U32", Dtype::U32),
    ("F32", Dtype::F32),
    ("C64", Dtype::C64),
    ("F64", Dtype::F64),
    ("I64", Dtype::I64),
    ("U64", Dtype::U64),
];

fn element_of(d: Dtype) -> Option<ElementType> {
    let plain = |x| Some(ElementType::plain(x));
    let logical = |t| {
        Some(ElementType {
            dtype: DType::U8,
            logical: Some(t),
        })
    };
    match d {
        Dtype::BOOL => plain(DType::Bool),
        Dtype::U8 => plain(DType::U8),
        Dtype::I8 => plain(DType::I8),
        Dtype::I16 => plain(DType::I16),
        Dtype::U16 => plain(DType::U16),
        Dtype::F16 => plain(DType::F16),
        Dtype::BF16 => plain(DType::BF16),
        Dtype::I32 => plain(DType::I32),
        Dtype::U32 => plain(DType::U32),
        Dtype::F32 => plain(DType::F32),
        Dtype::F64 => plain(DType::F64),
        Dtype::I64 => plain(DType::I64),
        Dtype::U64 => plain(DType::U64),
        Dtype::F8_E4M3 => logical(LogicalType::F8E4M3Fn),
        Dtype::F8_E5M2 => logical(LogicalType::F8E5M2),
        Dtype::F8_E4M3FNUZ => logical(LogicalType::F8E4M3Fnuz),
        Dtype::F8_E5M2FNUZ => logical(LogicalType::F8E5M2Fnuz),
        Dtype::F8_E8M0 => logical(LogicalType::F8E8M0),
        Dtype::F4 => logical(LogicalType::F4E2M1),
        Dtype::F6_E2M3 => logical(LogicalType::F6E2M3),
        Dtype::F6_E3M2 => logical(LogicalType::F6E3M2),
        Dtype::C64 => Some(ElementType {
            dtype: DType::F32,
            logical: Some(LogicalType::Complex64),
        }),
        _ => None,
    }
}

/// The safetensors dtype of an element type, if safetensors has one.
pub(crate) fn dtype_of(e: &ElementType) -> Option<Dtype> {
    DTYPES
        .into_iter()
        .map(|(_, d)| d)
        .find(|d| element_of(*d).as_ref() == Some(e))
}

/// The largest safetensors header accepted, as the safetensors crate caps it.
const MAX_HEADER_LEN: u64 = 100_000_000;

/// One tensor entry of a header, as written.
struct Entry {
    name: String,
    dtype: String,
    shape: Vec<u64>,
    start: u64,
    end: u64,
}

/// Lists a `.safetensors` file. Only the header is read: from a map it is borrowed, from a
/// positional source it is read alone, and tensors are read on demand like every other kind.
///
/// The checks are the safetensors crate's (`Metadata::validate`): names unique; the tensors,
/// in the order of their offsets, tile the data area from 0 to its end with no gap or
/// overlap; each tensor's byte length is its element count times its bits over 8, a whole
/// number of bytes, with no overflow. A dtype we do not know (the crate would refuse the
/// file) leaves only that tensor's length unchecked, and the tensor is listed with a defect.
pub(crate) fn list(source: &Source, max_rank: usize) -> Result<Listing> {
    let mut size = [0u8; 8];
    source.read_into(0, &mut size)?;
    let n = u64::from_le_bytes(size);
    // A header the file cannot hold first (the safetensors crate checks the cap first): a
    // truncated copy is the file's fault, not a cap to raise (docs/decisions.md).
    let base = 8u64.saturating_add(n);
    if base > source.len() {
        return Err(bad(format!(
            "header of {n} bytes runs past the end of the {}-byte file (file truncated?)",
            source.len()
        ))
        .at(8));
    }
    if n > MAX_HEADER_LEN {
        return Err(Error::limit(format!(
            "safetensors header of {n} bytes exceeds the cap of {MAX_HEADER_LEN}"
        )));
    }
    source.will_need(8, n);
    let header = source.read_at(8, n)?;
    let (entries, metadata) = parse_header(&header, max_rank).map_err(|e| e.at(8))?;

    // In offset order the tensors must tile the data area. The entries stay in name order
    // (as `parse_header` gives them, and as the listing keeps them); the walk in offset order
    // goes through their positions. Sorting the entries by offset, building the objects in
    // that order and sorting them back by name moved every entry and object several times:
    // a third of the open of a header of a million tensors.
    let mut by_offset: Vec<(u64, u64, usize)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.start, e.end, i))
        .collect();
    // Unstable, on keys that are unique with the position: ties of offsets keep name order.
    by_offset.sort_unstable();
    let data_len = source.len() - base;
    let past_the_end = |end: u64| {
        bad(format!(
            "tensors end at byte {}, but the file has {} bytes",
            base.saturating_add(end),
            source.len()
        ))
    };
    let mut next = 0u64;
    for &(start, end, i) in &by_offset {
        let Some(entry) = entries.get(i) else {
            continue;
        };
        let at = |e: Error| e.in_object(&entry.name);
        if start != next || end < start {
            return Err(at(bad(format!(
                "data_offsets [{start}, {end}]: the tensor must start at {next}, where the \
                 one before it ends"
            ))));
        }
        // Checked here, before any offset is added to `base`: a tensor of a dtype we do not
        // know has no length check, so its end could be anything.
        if end > data_len {
            return Err(at(past_the_end(end)));
        }
        next = end;
        element_of_entry(entry).map_err(at)?;
    }
    if next != data_len {
        return Err(past_the_end(next));
    }
    drop(by_offset);
    let mut objects = Vec::with_capacity(entries.len());
    for entry in entries {
        // Checked in the walk above; nothing here fails.
        let (element, defect) = element_of_entry(&entry).map_err(|e| e.in_object(&entry.name))?;
        let range = (
            base.saturating_add(entry.start),
            entry.end.saturating_sub(entry.start),
        );
        let shape = entry.shape.into_iter().collect();
        objects.push(ObjectInfo {
            defect,
            ..ObjectInfo::raw_dense(entry.name, shape, element, range, ByteOrder::Little)
        });
    }
    let attributes = metadata
        .into_iter()
        .map(|(k, v)| (k, Value::Text(v)))
        .collect();
    // Names are unique and in order: parse_header sorted them and refused a key given twice.
    Ok(Listing::of_unique(
        FileVersion::Safetensors,
        attributes,
        objects,
    ))
}

fn bad(what: String) -> Error {
    Error::invalid(format!("invalid safetensors file: {what}"))
}

/// The element type of a tensor entry whose offsets have been checked (`start <= end`), after
/// the checks of its length against its shape: with a defect for a dtype we do not know, whose
/// length is not checked.
fn element_of_entry(entry: &Entry) -> Result<(ElementType, Option<Box<Defect>>)> {
    let Entry {
        dtype,
        shape,
        start,
        end,
        ..
    } = entry;
    let length = end.saturating_sub(*start);
    let count = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
    let known = DTYPES.iter().find(|(s, _)| s == dtype).map(|&(_, d)| d);
    match known.map(|d| (d, element_of(d))) {
        Some((d, Some(element))) => {
            let bits = count
                .checked_mul(d.bitsize() as u64)
                .ok_or_else(|| bad(format!("shape {shape:?} of {dtype} overflows")))?;
            if bits % 8 != 0 {
                return Err(bad(format!(
                    "{count} elements of {dtype} are not a whole number of bytes"
                )));
            }
            if bits / 8 != length {
                return Err(bad(format!(
                    "{length} bytes of data, but shape {shape:?} of {dtype} takes {}",
                    bits / 8
                )));
            }
            Ok((element, None))
        }
        _ => Ok((
            ElementType {
                dtype: DType::U8,
                logical: Some(LogicalType::Unknown(dtype.clone())),
            },
            Some(Box::new(Defect::unsupported(format!(
                "safetensors dtype {dtype:?} is not supported"
            )))),
        )),
    }
}

/// `__metadata__` entries.
type Metadata = Vec<(String, String)>;

/// The header's tensor entries, by name, and its `__metadata__` (string to string; a key given
/// twice keeps its last value, as in the safetensors crate). Fields other than `dtype`,
/// `shape` and `data_offsets` are ignored, as the crate ignores them.
///
/// The top level is read entry by entry, each tensor's JSON parsed on its own and dropped:
/// a header of a million tensors costs its names and entries, not a tree of JSON values.
fn parse_header(header: &[u8], max_rank: usize) -> Result<(Vec<Entry>, Metadata)> {
    let top: TopLevel<'_> =
        serde_json::from_slice(header).map_err(|e| bad(format!("header: {e}")))?;
    if top.metadata.len() > 1 {
        return Err(bad("__metadata__ is given twice".into()));
    }
    let mut metadata = Vec::new();
    if let Some(raw) = top.metadata.first() {
        let v: Json = serde_json::from_str(raw.get()).map_err(|e| bad(format!("header: {e}")))?;
        match v {
            Json::Null => {}
            Json::Object(m) => {
                for (k, v) in m {
                    let Json::String(v) = v else {
                        return Err(bad(format!("__metadata__ value of {k:?} is not a string")));
                    };
                    metadata.push((k, v));
                }
            }
            _ => return Err(bad("__metadata__ is not an object".into())),
        }
    }
    let mut tensors = top.tensors;
    // By name, as a JSON map gives them; a name given twice is an error (a map would keep
    // the last silently).
    tensors.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if let Some(w) = tensors.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(bad(format!("tensor {:?} is named twice", w[0].0)));
    }
    let mut entries = Vec::with_capacity(tensors.len());
    for (name, raw) in tensors {
        let (dtype, shape, (start, end)) =
            entry(raw.get(), max_rank).map_err(|e| e.in_object(&name))?;
        entries.push(Entry {
            name,
            dtype,
            shape,
            start,
            end,
        });
    }
    Ok((entries, metadata))
}

/// The header's top level as written: each tensor's name and raw JSON (borrowed from the
/// header), and every `__metadata__` value.
struct TopLevel<'a> {
    tensors: Vec<(String, &'a serde_json::value::RawValue)>,
    metadata: Vec<&'a serde_json::value::RawValue>,
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for TopLevel<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = TopLevel<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object of tensor entries")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> std::result::Result<TopLevel<'a>, M::Error> {
                let mut top = TopLevel {
                    tensors: Vec::new(),
                    metadata: Vec::new(),
                };
                while let Some(key) = map.next_key::<String>()? {
                    let raw: &'de serde_json::value::RawValue = map.next_value()?;
                    if key == "__metadata__" {
                        top.metadata.push(raw);
                    } else {
                        top.tensors.push((key, raw));
                    }
                }
                Ok(top)
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// A tensor entry's dtype, shape and data offsets.
type Fields = (String, Vec<u64>, (u64, u64));

/// A tensor entry's fields, or what is wrong with them. Read field by field from the raw JSON,
/// without a tree of values: a shape longer than `max_rank` is counted, not kept, and
/// refused with the rank cap's error, so a header of one 100,000-dimension shape costs its
/// own bytes, not a value per dimension.
fn entry(raw: &str, max_rank: usize) -> Result<Fields> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let fields =
        serde::de::DeserializeSeed::deserialize(EntrySeed { max_rank }, &mut de).map_err(|e| {
            // A message of ours comes back as serde_json's custom error, with its position.
            let text = e.to_string();
            match text.rsplit_once(" at line ") {
                Some((what, _)) if e.is_data() => bad(what.to_owned()),
                _ => bad(format!("header: {text}")),
            }
        })?;
    if fields.rank > max_rank {
        return Err(Error::rank_over_cap(Some(fields.rank as u64), max_rank));
    }
    let missing = |k: &str| bad(format!("tensor entry has no {k:?}"));
    let dtype = fields.dtype.ok_or_else(|| missing("dtype"))?;
    let shape = fields.shape.ok_or_else(|| missing("shape"))?;
    let offsets = fields.offsets.ok_or_else(|| missing("data_offsets"))?;
    Ok((dtype, shape, offsets))
}

/// What an entry's object held of the three fields read (others are ignored, as the
/// safetensors crate ignores them; a field given twice keeps its last value).
struct EntryFields {
    dtype: Option<String>,
    shape: Option<Vec<u64>>,
    /// The shape's length (beyond the cap, its dimensions are not kept).
    rank: usize,
    offsets: Option<(u64, u64)>,
}

/// Reads one tensor entry's object.
struct EntrySeed {
    max_rank: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for EntrySeed {
    type Value = EntryFields;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for EntrySeed {
    type Value = EntryFields;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a tensor entry (an object)")
    }
    fn visit_map<M: serde::de::MapAccess<'de>>(
        self,
        mut map: M,
    ) -> std::result::Result<EntryFields, M::Error> {
        use serde::de::Error as _;
        let mut fields = EntryFields {
            dtype: None,
            shape: None,
            rank: 0,
            offsets: None,
        };
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "dtype" => match map.next_value::<Json>()? {
                    Json::String(s) => fields.dtype = Some(s),
                    _ => return Err(M::Error::custom("dtype is not a string")),
                },
                "shape" => {
                    let cap = self.max_rank;
                    let (dims, rank) = map.next_value_seed(ShapeSeed { cap })?;
                    fields.shape = Some(dims);
                    fields.rank = rank;
                }
                "data_offsets" => {
                    let v = map.next_value::<Json>()?;
                    let pair = match v.as_array().map(Vec::as_slice) {
                        Some([start, end]) => (unsigned(start), unsigned(end)),
                        _ => {
                            return Err(M::Error::custom(
                                "data_offsets is not an array of two numbers",
                            ))
                        }
                    };
                    fields.offsets = Some((
                        pair.0.map_err(M::Error::custom)?,
                        pair.1.map_err(M::Error::custom)?,
                    ));
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(fields)
    }
}

/// A JSON number as a u64, or what it is instead.
fn unsigned(x: &Json) -> std::result::Result<u64, String> {
    x.as_u64()
        .ok_or_else(|| format!("{x} is not an unsigned integer"))
}

/// Reads a shape and its rank: at most `cap` dimensions are kept; a longer shape is counted
/// to its end (and refused by [`entry`] with the rank cap's error, the same for every kind).
struct ShapeSeed {
    cap: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for ShapeSeed {
    type Value = (Vec<u64>, usize);
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ShapeSeed {
    type Value = (Vec<u64>, usize);
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("shape is not an array")
    }
    fn visit_seq<S: serde::de::SeqAccess<'de>>(
        self,
        mut seq: S,
    ) -> std::result::Result<(Vec<u64>, usize), S::Error> {
        use serde::de::Error as _;
        let mut dims = Vec::new();
        let mut rank = 0usize;
        while let Some(d) = seq.next_element::<Json>()? {
            let d = unsigned(&d).map_err(S::Error::custom)?;
            rank += 1;
            if rank <= self.cap {
                dims.push(d);
            }
        }
        Ok((dims, rank))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_of_the_crate_is_spelled_as_it_writes_it() {
        for (s, d) in DTYPES {
            assert_eq!(d.to_string(), s);
            assert!(element_of(d).is_some(), "{s} maps to an element type");
            assert_eq!(dtype_of(&element_of(d).unwrap()), Some(d));
        }
    }
}
