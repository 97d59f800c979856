//! Writing GGUF (version 3, little-endian) from any reader, streamed: metadata from the file
//! attributes, tensor infos from the listing alone, then one tensor's bytes at a time.
//!
//! What each object becomes:
//! - a dense object of a type ggml has (F32, F16, BF16, F64, I8, I16, I32, I64): that type,
//!   its bytes as they are (little-endian);
//! - a GGUF-origin quantized object (format `gguf.<type>/1`, read from a GGUF file or from a
//!   zTensor file converted from one): its block type, its blocks byte for byte;
//! - a sparse or `quantized_group` object: with `densify`, its dense form; otherwise an error;
//! - anything else (u8-u64, bool, FP8, complex, an unknown format, an object with a defect):
//!   an error naming the object, as GGUF has no type for it.
//!
//! A view cast to f16 or bf16 ([`ObjectView::cast_floats`]) is written cast, except its
//! tensors of one dimension and those named `*_norm.weight`, which become f32: what
//! llama.cpp's converter and `llama-quantize` write, as its kernels for norms and biases
//! take f32.
//!
//! Metadata: every file attribute but [`VALUE_TYPES_KEY`] is a key, written with the type
//! that map records for it (so a GGUF read and written back keeps every type); an attribute
//! it does not type is written as the `gguf` package would: integers as i32 (i64, u64 when
//! they do not fit), floats as f32 when that keeps the value (f64 otherwise), text as str,
//! bytes as `[u8]`, arrays by their first element. Maps and null have no GGUF form.
//!
//! A legacy GGML model of llama.cpp (its listing's `ggml.family` is `llama`) is written as
//! llama.cpp loads it: llama.cpp's metadata and tensor names in place of the `ggml.*`
//! attributes and the GGML names (`gguf/llama.rs`).
//!
//! The layout is the `gguf` package's: key-values and tensor infos in order, tensors in the
//! reader's file order at offsets padded to `general.alignment` (32 unless an attribute says
//! otherwise), every tensor's bytes padded to it too.

mod llama;
#[cfg(feature = "sharded")]
mod split;

#[cfg(feature = "sharded")]
pub use split::GgufSplit;

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

use zt_container::{AtomicFile, Durability, Error, Result};
use zt_formats::ggml::GgmlType;
use zt_formats::{dense_len, DType, ElementType, Format};
use zt_manifest::{Attributes, Value};

use super::dense_element_type;
use crate::files::gguf::{
    ALIGNMENT_KEY, ARRAY, DEFAULT_ALIGNMENT, VALUE_TYPES_KEY, VALUE_TYPE_NAMES,
};
use crate::reader::Reader;
use crate::view::ObjectView;

/// The GGUF version written.
const VERSION: u32 = 3;

/// One tensor of the file being written, planned from the listing alone.
struct Planned<'r> {
    object: ObjectView<'r>,
    ggml: GgmlType,
    /// Bytes of its data.
    len: u64,
    /// Whether its data is its dense form rather than its stored `data`.
    densified: bool,
}

/// Writes every object of `reader` as a GGUF v3 file at `output`, crash-safely (a temporary
/// file beside it, renamed into place when complete). See the module docs for what each
/// object and attribute becomes; `densify` writes sparse and `quantized_group` objects in
/// their dense form.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let mut w = ztensor::Writer::create(dir.path().join("m.zt"))?;
/// w.set_attribute("general.architecture", "llama");
/// w.add("w", &[2, 2], &[1.0f32, 2.0, 3.0, 4.0])?;
/// w.finish()?;
///
/// let r = ztensor::open(dir.path().join("m.zt"))?;
/// ztensor::write_gguf(&r, dir.path().join("m.gguf"), false)?;
/// let g = ztensor::open(dir.path().join("m.gguf"))?;
/// assert_eq!(&g.read::<f32>("w")?[..], &[1.0, 2.0, 3.0, 4.0]);
/// assert_eq!(g.object("w")?.shape(), &[2, 2]);
/// # Ok(())
/// # }
/// ```
pub fn write_gguf(reader: &Reader, output: impl AsRef<Path>, densify: bool) -> Result<()> {
    write_gguf_with(reader, output, densify, Durability::Synced)
}

/// As [`write_gguf`], choosing whether the file is synced to disk before it returns.
pub fn write_gguf_with(
    reader: &Reader,
    output: impl AsRef<Path>,
    densify: bool,
    durability: Durability,
) -> Result<()> {
    let views: Vec<ObjectView<'_>> = reader.iter().collect();
    write_gguf_views(&views, reader.attributes(), output, densify, durability)
}

/// As [`write_gguf_with`], for objects from anywhere (a sharded set's, several files'),
/// written in the order given, with `attributes` as the file's metadata.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let mut w = ztensor::Writer::create(dir.path().join("m.zt"))?;
/// # w.add("w", &[2], &[1.0f32, 2.0])?;
/// # w.finish()?;
/// let r = ztensor::open(dir.path().join("m.zt"))?;
/// let views: Vec<_> = r.iter().collect();
/// let out = dir.path().join("m.gguf");
/// ztensor::convert::write_gguf_views(&views, r.attributes(), &out, false, ztensor::Durability::Unsynced)?;
/// assert_eq!(&ztensor::open(&out)?.read::<f32>("w")?[..], &[1.0, 2.0]);
/// # Ok(())
/// # }
/// ```
pub fn write_gguf_views(
    views: &[ObjectView<'_>],
    attributes: &Attributes,
    output: impl AsRef<Path>,
    densify: bool,
    durability: Durability,
) -> Result<()> {
    let p = prepare(views, attributes, densify)?;
    let names = p.names.as_deref();
    gguf_file(
        &p.tensors,
        names,
        &p.attributes,
        output.as_ref(),
        durability,
    )?
    .commit()
}

/// A GGUF output as planned from the listing alone, before a byte is written.
struct Prepared<'r, 'a> {
    /// What each object that is numbers becomes, in the order given.
    tensors: Vec<Planned<'r>>,
    /// The names to write them under, where they are not their own (llama.cpp's, for a
    /// legacy llama.cpp model).
    names: Option<Vec<String>>,
    /// The metadata to write: the attributes given, or llama.cpp's form of them.
    attributes: Cow<'a, Attributes>,
}

/// Plans `views` and `attributes` as one GGUF model (one file or splits): the objects that
/// are numbers, in llama.cpp's form where they are a legacy llama.cpp model's, each planned.
fn prepare<'r, 'a>(
    views: &[ObjectView<'r>],
    attributes: &'a Attributes,
    densify: bool,
) -> Result<Prepared<'r, 'a>> {
    let views = super::numbers_only(views);
    let (attributes, names) = match llama::llama_cpp_form(attributes, &views)? {
        Some(l) => (Cow::Owned(l.attributes), Some(l.names)),
        None => (Cow::Borrowed(attributes), None),
    };
    let tensors = plan_all(&views, densify)?;
    Ok(Prepared {
        tensors,
        names,
        attributes,
    })
}

/// What every object becomes (see [`plan`]), each error naming its object.
fn plan_all<'r>(views: &[ObjectView<'r>], densify: bool) -> Result<Vec<Planned<'r>>> {
    let mut tensors = Vec::with_capacity(views.len());
    for &o in views {
        tensors.push(plan(o, densify).map_err(|e| e.in_object(o.name()))?);
    }
    Ok(tensors)
}

/// Writes `tensors` (named as `names` says, else by their own names) with `attributes` as a
/// GGUF file at `output`, and returns it written but not yet in place.
fn gguf_file(
    tensors: &[Planned<'_>],
    names: Option<&[String]>,
    attributes: &Attributes,
    output: &Path,
    durability: Durability,
) -> Result<AtomicFile> {
    let name = |i: usize, o: &ObjectView<'_>| {
        let renamed = names.and_then(|n| n.get(i));
        renamed.map_or(o.name(), String::as_str).to_owned()
    };
    let (metadata, n_kv, alignment) = metadata(attributes)?;

    let mut head = b"GGUF".to_vec();
    head.extend(VERSION.to_le_bytes());
    head.extend((tensors.len() as u64).to_le_bytes());
    head.extend(n_kv.to_le_bytes());
    head.extend(metadata);
    let mut offset = 0u64;
    for (i, t) in tensors.iter().enumerate() {
        put_string(&mut head, name(i, &t.object).as_bytes());
        head.extend((t.object.shape().len() as u32).to_le_bytes());
        for d in t.object.shape().iter().rev() {
            head.extend(d.to_le_bytes());
        }
        head.extend(t.ggml.id.to_le_bytes());
        head.extend(offset.to_le_bytes());
        offset = t
            .len
            .checked_next_multiple_of(alignment)
            .and_then(|l| offset.checked_add(l))
            .ok_or_else(|| {
                Error::limit("the tensors' sizes overflow").in_object(t.object.name())
            })?;
    }
    head.resize(head.len().next_multiple_of(alignment as usize), 0);

    let mut file = AtomicFile::create_with(output, durability)?;
    let written = |e: std::io::Error| Error::io(e, "cannot write GGUF").in_file(output);
    file.write_all(&head).map_err(written)?;
    let zeros = vec![0u8; alignment as usize];
    for t in tensors {
        let name = t.object.name();
        let bytes = if t.densified {
            t.object.for_copy().dense_form()?.0
        } else {
            t.object.for_copy().component("data")?.bytes()?
        };
        if bytes.len() as u64 != t.len {
            return Err(Error::invalid(format!(
                "holds {} bytes, but its shape and type take {}",
                bytes.len(),
                t.len
            ))
            .in_object(name));
        }
        file.write_all(&bytes).map_err(written)?;
        let pad = t.len.next_multiple_of(alignment) - t.len;
        file.write_all(zeros.get(..pad as usize).unwrap_or_default())
            .map_err(written)?;
    }
    Ok(file)
}

/// What an object becomes, from its listing: its ggml type and its data's length.
fn plan(o: ObjectView<'_>, densify: bool) -> Result<Planned<'_>> {
    if let Some(d) = &o.defect {
        return Err(d.to_error());
    }
    let o = kept_f32(o);
    let count = o.element_count();
    if let Some(t) = o.ggml_type() {
        // The object's own geometry, where it states one, must be the table's.
        for (key, want) in [
            ("elems_per_block", t.block_elems),
            ("block_bytes", t.block_bytes),
        ] {
            if let Some(v) = o.attributes.get(key) {
                if v.as_u64() != Some(want) {
                    return Err(Error::invalid(format!(
                        "attribute {key} is {v:?}, but {} has {want}",
                        t.name.to_uppercase()
                    )));
                }
            }
        }
        let innermost = o.shape().last().copied().unwrap_or(1);
        let len = (innermost % t.block_elems == 0)
            .then(|| t.byte_len(count))
            .flatten()
            .ok_or_else(|| {
                Error::invalid(format!(
                    "shape {:?} is not whole rows of {}-element {} blocks",
                    o.shape(),
                    t.block_elems,
                    t.name.to_uppercase()
                ))
            })?;
        return Ok(Planned {
            object: o,
            ggml: t,
            len,
            densified: false,
        });
    }
    // A cast dense object is written from its dense form, which casts it.
    let densified = o.format != Format::Dense || o.cast_changes_parts();
    let element = if densified {
        dense_element_type(&o, densify, "GGUF")?
    } else {
        o.component("data")?.element.clone()
    };
    let ggml = dense_ggml(&element).ok_or_else(|| {
        Error::argument(format!(
            "GGUF has no {} type (it holds f32, f16, bf16, f64, i8, i16, i32, i64 and ggml's \
             block types)",
            element.name()
        ))
    })?;
    let len = dense_len(&o.shape, &element)?;
    Ok(Planned {
        object: o,
        ggml,
        len,
        densified,
    })
}

/// `o` with a cast to f16 or bf16 made a cast to f32 where llama.cpp keeps f32: tensors of
/// one dimension (norms, biases) and those named `*_norm.weight`, as its converter
/// (`convert_hf_to_gguf.py --outtype`) and `llama-quantize` keep them, since its kernels for
/// them take f32.
fn kept_f32(o: ObjectView<'_>) -> ObjectView<'_> {
    let narrowing = matches!(o.float_cast(), Some(DType::F16 | DType::BF16));
    if narrowing && (o.shape().len() <= 1 || o.name().ends_with("_norm.weight")) {
        // f32 is a cast target: this cannot fail.
        o.cast_floats(DType::F32).unwrap_or(o)
    } else {
        o
    }
}

/// The ggml type of a plain dense element type.
fn dense_ggml(e: &ElementType) -> Option<GgmlType> {
    if e.logical.is_some() {
        return None;
    }
    GgmlType::of_dtype(e.dtype)
}

fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s);
}

/// The encoded key-values, their count and the alignment.
fn metadata(attrs: &Attributes) -> Result<(Vec<u8>, u64, u64)> {
    let types = match attrs.get(VALUE_TYPES_KEY) {
        Some(Value::Map(m)) => Some(m),
        _ => None,
    };
    let mut out = Vec::new();
    let mut n = 0u64;
    let mut alignment = DEFAULT_ALIGNMENT;
    for (key, value) in attrs {
        if key == VALUE_TYPES_KEY && types.is_some() {
            continue;
        }
        let bad = |what: String| Error::argument(format!("attribute {key:?}: {what}"));
        let given = types.and_then(|t| t.get(key));
        let ty = match given {
            Some(t) => t.clone(),
            None => infer(value).map_err(|what| {
                bad(format!(
                    "{what} (to write such values as their JSON text: zt convert \
                     --attributes-as-json, ztio.convert(..., attributes_as_json=True))"
                ))
            })?,
        };
        if key == ALIGNMENT_KEY {
            alignment = match (value.as_u64(), &ty) {
                (Some(a), Value::Text(t))
                    if t == "u32" && a.is_power_of_two() && u32::try_from(a).is_ok() =>
                {
                    a
                }
                _ => return Err(bad("must be a u32 power of two".into())),
            };
        }
        put_string(&mut out, key.as_bytes());
        encode(&mut out, value, &ty, true).map_err(|what| match given {
            // The type came with the attributes (a GGUF input's, kept for the value a
            // `--set` replaced): say so, as the value alone does not explain it.
            Some(_) => bad(format!(
                "{what} (its GGUF type, as {VALUE_TYPES_KEY:?} gives it)"
            )),
            None => bad(what),
        })?;
        n += 1;
    }
    Ok((out, n, alignment))
}

/// Whether the GGUF writer takes the file attribute `key` = `value` as it is: the map of value
/// types a GGUF reader keeps (`gguf.value_types`, which the writer uses and does not write),
/// or a value GGUF metadata has a type for when no such map types it: not null, a map, a
/// tag, an integer past 64 bits or a list of mixed types.
///
/// ```
/// use ztensor::{convert::gguf_holds, Value};
/// assert!(gguf_holds("general.alignment", &Value::Integer(64)));
/// assert!(gguf_holds("x", &Value::Array(vec![Value::Float(0.5), Value::Float(1.0)])));
/// assert!(!gguf_holds("x", &Value::Null));
/// assert!(!gguf_holds("x", &Value::Array(vec![Value::Integer(1), Value::Text("a".into())])));
/// assert!(gguf_holds("gguf.value_types", &Value::Map(Default::default())));
/// ```
pub fn gguf_holds(key: &str, value: &Value) -> bool {
    (key == VALUE_TYPES_KEY && matches!(value, Value::Map(_))) || infer(value).is_ok()
}

/// The type the `gguf` package would give a value it was handed untyped.
fn infer(v: &Value) -> std::result::Result<Value, String> {
    let name = |s: &str| Ok(Value::Text(s.to_owned()));
    match v {
        Value::Integer(i) => {
            if i32::try_from(*i).is_ok() {
                name("i32")
            } else if i64::try_from(*i).is_ok() {
                name("i64")
            } else if u64::try_from(*i).is_ok() {
                name("u64")
            } else {
                Err(format!("{i} fits no GGUF integer type"))
            }
        }
        Value::Float(f) if f64::from(*f as f32) == *f || f.is_nan() => name("f32"),
        Value::Float(_) => name("f64"),
        Value::Bool(_) => name("bool"),
        Value::Text(_) => name("str"),
        Value::Bytes(_) => name("[u8]"),
        Value::Array(items) => {
            if items.iter().any(|x| matches!(x, Value::Array(_))) {
                return items
                    .iter()
                    .map(infer)
                    .collect::<std::result::Result<_, _>>()
                    .map(Value::Array);
            }
            // The widest type any element needs (integers), else the first's.
            let mut elem = "i32".to_owned();
            for (i, x) in items.iter().enumerate() {
                let Value::Text(t) = infer(x)? else {
                    return Err("an array mixes arrays and scalars".into());
                };
                let rank = |s: &str| ["i32", "i64", "u64"].iter().position(|r| *r == s);
                elem = match (rank(&elem), rank(&t)) {
                    (Some(a), Some(b)) => {
                        if b > a {
                            t
                        } else {
                            elem
                        }
                    }
                    (None, None) if elem == t => elem,
                    _ if i == 0 => t,
                    // f32 and f64 mixed: f64 holds both.
                    _ if ["f32", "f64"].contains(&elem.as_str())
                        && ["f32", "f64"].contains(&t.as_str()) =>
                    {
                        "f64".to_owned()
                    }
                    _ => return Err("an array's elements have different types".into()),
                };
            }
            Ok(Value::Text(format!("[{elem}]")))
        }
        other => Err(format!("GGUF metadata has no {} values", other.kind_name())),
    }
}

/// Encodes `v` as type `ty` (see [`crate::files::gguf::value_type`]); `with_type` writes
/// the value type number first (every value but an array's elements).
fn encode(
    out: &mut Vec<u8>,
    v: &Value,
    ty: &Value,
    with_type: bool,
) -> std::result::Result<(), String> {
    match ty {
        Value::Text(t) if t.starts_with('[') && t.ends_with(']') => {
            let elem = t
                .strip_prefix('[')
                .and_then(|e| e.strip_suffix(']'))
                .unwrap_or_default();
            let id = type_id(elem)?;
            let items: Vec<Value> = match v {
                Value::Array(items) => items.clone(),
                Value::Bytes(b) if elem == "u8" => {
                    b.iter().map(|&x| Value::Integer(x.into())).collect()
                }
                _ => return Err(format!("{} is not an array of {elem}", v.kind_name())),
            };
            if with_type {
                out.extend(ARRAY.to_le_bytes());
            }
            out.extend(id.to_le_bytes());
            out.extend((items.len() as u64).to_le_bytes());
            let elem_ty = Value::Text(elem.to_owned());
            for x in &items {
                encode(out, x, &elem_ty, false)?;
            }
            Ok(())
        }
        Value::Text(t) => {
            let id = type_id(t)?;
            if with_type {
                out.extend(id.to_le_bytes());
            }
            scalar(out, v, t)
        }
        Value::Array(inner) => {
            let Value::Array(items) = v else {
                return Err(format!("{} is not an array of arrays", v.kind_name()));
            };
            if items.len() != inner.len() {
                return Err(format!(
                    "{} arrays, but {} types for them",
                    items.len(),
                    inner.len()
                ));
            }
            if with_type {
                out.extend(ARRAY.to_le_bytes());
            }
            out.extend(ARRAY.to_le_bytes());
            out.extend((items.len() as u64).to_le_bytes());
            for (x, t) in items.iter().zip(inner) {
                // Each element is an array: its own element type and length, no type number.
                encode(out, x, t, false)?;
            }
            Ok(())
        }
        other => Err(format!("{other:?} is not a GGUF type")),
    }
}

fn type_id(name: &str) -> std::result::Result<u32, String> {
    VALUE_TYPE_NAMES
        .iter()
        .position(|n| *n == name)
        .filter(|&i| i as u32 != ARRAY)
        .map(|i| i as u32)
        .ok_or_else(|| format!("{name:?} is not a GGUF value type"))
}

/// One scalar of type `t`, range-checked.
fn scalar(out: &mut Vec<u8>, v: &Value, t: &str) -> std::result::Result<(), String> {
    let range = |what: &str| match v {
        Value::Integer(i) => format!("{i} does not fit {what}"),
        _ => format!("{v:?} does not fit {what}"),
    };
    macro_rules! int {
        ($ty:ty) => {{
            let Value::Integer(i) = v else {
                return Err(format!("{} is not an integer", v.kind_name()));
            };
            let x = <$ty>::try_from(*i).map_err(|_| range(t))?;
            out.extend(x.to_le_bytes());
        }};
    }
    match t {
        "u8" => int!(u8),
        "i8" => int!(i8),
        "u16" => int!(u16),
        "i16" => int!(i16),
        "u32" => int!(u32),
        "i32" => int!(i32),
        "u64" => int!(u64),
        "i64" => int!(i64),
        "f32" | "f64" => {
            let f = v
                .as_f64()
                .filter(|_| matches!(v, Value::Float(_)))
                .ok_or_else(|| format!("{} is not a float", v.kind_name()))?;
            if t == "f32" {
                out.extend((f as f32).to_le_bytes());
            } else {
                out.extend(f.to_le_bytes());
            }
        }
        "bool" => match v {
            Value::Bool(b) => out.push(u8::from(*b)),
            _ => return Err(format!("{} is not a bool", v.kind_name())),
        },
        "str" => match v {
            Value::Text(s) => put_string(out, s.as_bytes()),
            Value::Bytes(b) => put_string(out, b),
            _ => return Err(format!("{} is not a string", v.kind_name())),
        },
        other => return Err(format!("{other:?} is not a scalar GGUF type")),
    }
    Ok(())
}
