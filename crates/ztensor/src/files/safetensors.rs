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
pub(crate) fn list(source: &Source) -> Result<Listing> {
    let mut size = [0u8; 8];
    source.read_into(0, &mut size)?;
    let n = u64::from_le_bytes(size);
    if n > MAX_HEADER_LEN {
        return Err(Error::limit(format!(
            "safetensors header of {n} bytes exceeds the cap of {MAX_HEADER_LEN}"
        )));
    }
    let base = 8 + n;
    if base > source.len() {
        return Err(bad(format!(
            "header of {n} bytes runs past the end of the {}-byte file",
            source.len()
        ))
        .at(8));
    }
    source.will_need(8, n);
    let header = source.read_at(8, n)?;
    let (mut entries, metadata) = parse_header(&header).map_err(|e| e.at(8))?;

    // In offset order the tensors must tile the data area.
    entries.sort_by_key(|e| (e.start, e.end));
    let data_len = source.len() - base;
    let past_the_end = |end: u64| {
        bad(format!(
            "tensors end at byte {}, but the file has {} bytes",
            base.saturating_add(end),
            source.len()
        ))
    };
    let mut next = 0u64;
    let mut objects = Vec::with_capacity(entries.len());
    for Entry {
        name,
        dtype,
        shape,
        start,
        end,
    } in entries
    {
        let at = |e: Error| e.in_object(&name);
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
        let length = end - start;
        let count = shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| at(bad(format!("shape {shape:?} overflows"))))?;
        let known = DTYPES.iter().find(|(s, _)| *s == dtype).map(|&(_, d)| d);
        let (element, defect) = match known.map(|d| (d, element_of(d))) {
            Some((d, Some(element))) => {
                let bits = count
                    .checked_mul(d.bitsize() as u64)
                    .ok_or_else(|| at(bad(format!("shape {shape:?} of {dtype} overflows"))))?;
                if bits % 8 != 0 {
                    return Err(at(bad(format!(
                        "{count} elements of {dtype} are not a whole number of bytes"
                    ))));
                }
                if bits / 8 != length {
                    return Err(at(bad(format!(
                        "{length} bytes of data, but shape {shape:?} of {dtype} takes {}",
                        bits / 8
                    ))));
                }
                (element, None)
            }
            _ => (
                ElementType {
                    dtype: DType::U8,
                    logical: Some(LogicalType::Unknown(dtype.clone())),
                },
                Some(Box::new(Defect::unsupported(format!(
                    "safetensors dtype {dtype:?} is not supported"
                )))),
            ),
        };
        let range = (base + start, length);
        let shape = shape.into_iter().collect();
        objects.push(ObjectInfo {
            defect,
            ..ObjectInfo::raw_dense(name, shape, element, range, ByteOrder::Little)
        });
    }
    if next != data_len {
        return Err(past_the_end(next));
    }
    let attributes = metadata
        .into_iter()
        .map(|(k, v)| (k, Value::Text(v)))
        .collect();
    // Names are unique: parse_header refused a key given twice.
    Ok(Listing::of_unique(
        FileVersion::Safetensors,
        attributes,
        objects,
    ))
}

fn bad(what: String) -> Error {
    Error::invalid(format!("invalid safetensors file: {what}"))
}

/// `__metadata__` entries.
type Metadata = Vec<(String, String)>;

/// The header's tensor entries in the order written, and its `__metadata__` (string to
/// string; a key given twice keeps its last value, as in the safetensors crate). Fields other
/// than `dtype`, `shape` and `data_offsets` are ignored, as the crate ignores them.
fn parse_header(header: &[u8]) -> Result<(Vec<Entry>, Metadata)> {
    let json: serde_json::Map<String, Json> =
        serde_json::from_slice(header).map_err(|e| bad(format!("header: {e}")))?;
    // A JSON map keeps the last of keys given twice: count the keys as written.
    let written = top_level_keys(header);
    if written.len() != json.len() {
        let mut keys = written;
        keys.sort_unstable();
        let twice = keys.windows(2).find(|w| w[0] == w[1]).map(|w| w[0].clone());
        let twice = twice.unwrap_or_default();
        if twice == "__metadata__" {
            return Err(bad("__metadata__ is given twice".into()));
        }
        return Err(bad(format!("tensor {twice:?} is named twice")));
    }
    let mut entries = Vec::with_capacity(json.len());
    let mut metadata = Vec::new();
    for (name, v) in json {
        if name == "__metadata__" {
            match v {
                Json::Null => {}
                Json::Object(m) => {
                    for (k, v) in m {
                        let Json::String(v) = v else {
                            return Err(bad(format!(
                                "__metadata__ value of {k:?} is not a string"
                            )));
                        };
                        metadata.push((k, v));
                    }
                }
                _ => return Err(bad("__metadata__ is not an object".into())),
            }
            continue;
        }
        let entry = entry(&v).map_err(|what| bad(what).in_object(&name))?;
        let (dtype, shape, (start, end)) = entry;
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

type Fields = (String, Vec<u64>, (u64, u64));

/// A tensor entry's fields, or what is wrong with them.
fn entry(v: &Json) -> std::result::Result<Fields, String> {
    let field = |k: &str| v.get(k).ok_or_else(|| format!("tensor entry has no {k:?}"));
    let dtype = field("dtype")?
        .as_str()
        .ok_or("dtype is not a string")?
        .to_owned();
    let unsigned = |x: &Json| {
        x.as_u64()
            .ok_or_else(|| format!("{x} is not an unsigned integer"))
    };
    let shape = field("shape")?
        .as_array()
        .ok_or("shape is not an array")?
        .iter()
        .map(unsigned)
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let offsets = match field("data_offsets")?.as_array().map(Vec::as_slice) {
        Some([start, end]) => (unsigned(start)?, unsigned(end)?),
        _ => return Err("data_offsets is not an array of two numbers".into()),
    };
    Ok((dtype, shape, offsets))
}

/// The keys of a JSON object's top level, decoded, in the order written. `json` must be
/// valid JSON (serde_json has parsed it).
fn top_level_keys(json: &[u8]) -> Vec<String> {
    let mut keys = Vec::new();
    let mut depth = 0usize;
    let mut expect_key = false;
    let mut i = 0;
    while let Some(&b) = json.get(i) {
        match b {
            b'"' => {
                let start = i;
                i += 1;
                while let Some(&c) = json.get(i) {
                    match c {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
                if depth == 1 && expect_key {
                    let raw = json.get(start..=i).unwrap_or_default();
                    keys.push(serde_json::from_slice(raw).unwrap_or_default());
                    expect_key = false;
                }
            }
            b'{' | b'[' => {
                depth += 1;
                expect_key = depth == 1;
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' => expect_key = depth == 1,
            _ => {}
        }
        i += 1;
    }
    keys
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

    #[test]
    fn top_level_keys_skip_nested_objects_and_strings() {
        let json = br#"{"a\"b": {"x": [1, {"y": 2}], "z": "},{\"w\":"}, "c" : 1 ,"a\"b":[]}"#;
        assert_eq!(top_level_keys(json), ["a\"b", "c", "a\"b"]);
        assert_eq!(top_level_keys(b"{}"), Vec::<String>::new());
    }
}
