//! JSON forms of attribute values, file descriptions and element values (docs/cli.md).

use serde_json::{json, Value as J};
use ztensor::fp8::Fp8Format;
use ztensor::{
    Attributes, ComponentInfo, DType, ElementType, LogicalType, ObjectInfo, Reader, ShardInfo,
    Value,
};

/// An attribute value as JSON: integers beyond 64 bits and non-finite floats as strings,
/// byte strings as `{"bytes": "<hex>"}`, tags as `{"tag": N, "value": ...}`.
pub fn value(v: &Value) -> J {
    match v {
        Value::Integer(i) => i64::try_from(*i)
            .map(J::from)
            .or_else(|_| u64::try_from(*i).map(J::from))
            .unwrap_or_else(|_| J::from(i.to_string())),
        Value::Float(f) => float(*f),
        Value::Text(s) => J::from(s.as_str()),
        Value::Bytes(b) => {
            json!({ "bytes": b.iter().map(|x| format!("{x:02x}")).collect::<String>() })
        }
        Value::Bool(b) => J::from(*b),
        Value::Null => J::Null,
        Value::Array(a) => J::Array(a.iter().map(value).collect()),
        Value::Map(m) => attributes(m),
        Value::Tag(t, x) => json!({ "tag": t, "value": value(x) }),
    }
}

/// A float as a JSON number, or `"NaN"`, `"Infinity"`, `"-Infinity"`.
pub fn float(f: f64) -> J {
    serde_json::Number::from_f64(f)
        .map(J::Number)
        .unwrap_or_else(|| {
            J::from(if f.is_nan() {
                "NaN"
            } else if f > 0.0 {
                "Infinity"
            } else {
                "-Infinity"
            })
        })
}

pub fn attributes(a: &Attributes) -> J {
    J::Object(a.iter().map(|(k, v)| (k.clone(), value(v))).collect())
}

/// Whether an output kind's metadata holds the attribute `key` = `value` as it is.
pub type MetadataHolds = fn(&str, &Value) -> bool;

/// What `kind`'s metadata holds as it is, for `--attributes-as-json`; `None` for the kinds
/// the option does not apply to (zTensor holds every attribute value).
pub fn metadata_holds(kind: crate::common::Kind) -> Option<MetadataHolds> {
    match kind {
        crate::common::Kind::Safetensors => Some(|_, v| matches!(v, Value::Text(_))),
        crate::common::Kind::Gguf => Some(ztensor::convert::gguf_holds),
        _ => None,
    }
}

/// One change to the file attributes: `--set KEY=VALUE` (the value) or `--unset KEY` (`None`).
pub type AttributeChange = (String, Option<Value>);

/// `--set` and `--unset` as one list of changes, in that order (clap keeps each option's
/// values apart). A key both set and unset is a usage error: which was meant is not known.
pub fn attribute_changes(
    set: Vec<(String, Value)>,
    unset: Vec<String>,
) -> Result<Vec<AttributeChange>, String> {
    if let Some(key) = unset.iter().find(|k| set.iter().any(|(s, _)| s == *k)) {
        return Err(format!("--set and --unset both name the attribute {key:?}"));
    }
    let set = set.into_iter().map(|(k, v)| (k, Some(v)));
    Ok(set.chain(unset.into_iter().map(|k| (k, None))).collect())
}

/// `attributes` without the keys `changes` sets or unsets (borrowed as they are when it
/// names none of them).
pub fn unless_changed<'a>(
    attributes: &'a Attributes,
    changes: &[AttributeChange],
) -> std::borrow::Cow<'a, Attributes> {
    let mut kept = std::borrow::Cow::Borrowed(attributes);
    for (key, _) in changes {
        if kept.contains_key(key) {
            kept.to_mut().remove(key);
        }
    }
    kept
}

/// Makes `changes` in `attributes`: a key set takes its value, a key unset goes, and a GGUF
/// input's type of it (`gguf.value_types`) with it, whether or not the key itself is still
/// there (the inputs' values of a key changed are left out before they are merged).
pub fn apply_changes(attributes: &mut Attributes, changes: &[AttributeChange]) {
    for (key, change) in changes {
        match change {
            Some(value) => {
                attributes.insert(key.clone(), value.clone());
            }
            None => {
                attributes.remove(key);
                if let Some(Value::Map(types)) = attributes.get_mut(ztensor::GGUF_VALUE_TYPES_KEY) {
                    types.remove(key);
                }
            }
        }
    }
}

/// How `convert` changes the input's file attributes on their way out.
#[derive(Clone, Copy, Default)]
pub struct AttributeEdits<'a> {
    /// `--set KEY=VALUE` replaces (or adds) its key; `--unset KEY` leaves it out.
    pub changes: &'a [AttributeChange],
    /// `--attributes-as-json`: what the output's metadata cannot hold, written as JSON text.
    pub as_text: Option<MetadataHolds>,
}

/// The file attributes an output gets: `attributes` with `edits` made (`--set` and `--unset`
/// first, so that `--attributes-as-json` applies to the values set too), or as they are.
pub fn attributes_to_write<'a>(
    attributes: &'a Attributes,
    edits: AttributeEdits<'_>,
) -> std::borrow::Cow<'a, Attributes> {
    let mut out = std::borrow::Cow::Borrowed(attributes);
    if !edits.changes.is_empty() {
        apply_changes(out.to_mut(), edits.changes);
    }
    match edits.as_text {
        Some(holds) => std::borrow::Cow::Owned(attributes_as_text(&out, holds)),
        None => out,
    }
}

/// `--set KEY=VALUE`: the key, and the value read as JSON (`4096`, `1e-5`, `true`, `[1,2]`,
/// `"4096"`, `{"bytes":"00ff"}` as [`value`] writes bytes) or, where it is not JSON, as the
/// text it is (`format=pt`).
pub fn attribute_arg(arg: &str) -> Result<(String, Value), String> {
    let (key, text) = arg
        .split_once('=')
        .ok_or_else(|| format!("{arg:?} is not KEY=VALUE"))?;
    if key.is_empty() {
        return Err(format!("{arg:?} has no key before '='"));
    }
    let value = match serde_json::from_str::<J>(text) {
        Ok(j) => from_json(&j),
        Err(_) => Value::Text(text.to_owned()),
    };
    Ok((key.to_owned(), value))
}

/// A JSON value as an attribute value, as [`value`] writes them: integers as integers, other
/// numbers as floats, `{"bytes": "<hex>"}` as bytes.
fn from_json(j: &J) -> Value {
    match j {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Integer(i.into()),
            (None, Some(u)) => Value::Integer(u.into()),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::Text(s.clone()),
        J::Array(a) => Value::Array(a.iter().map(from_json).collect()),
        J::Object(m) => {
            let hex = match m.get("bytes") {
                Some(J::String(hex)) if m.len() == 1 => hex_bytes(hex),
                _ => None,
            };
            match hex {
                Some(bytes) => Value::Bytes(bytes),
                None => Value::Map(m.iter().map(|(k, v)| (k.clone(), from_json(v))).collect()),
            }
        }
    }
}

/// `hex` (two digits a byte) as its bytes.
fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
        })
        .collect()
}

/// `attributes` with each value that `holds` refuses written as its JSON text, in
/// [`value`]'s form (`8`, `[1,2]`, `{"bytes":"00ff"}`): what `convert --attributes-as-json`
/// hands a writer whose metadata cannot hold every value (`.safetensors`: text only; GGUF:
/// no null, map or mixed list).
pub fn attributes_as_text(a: &Attributes, holds: MetadataHolds) -> Attributes {
    a.iter()
        .map(|(k, v)| {
            let kept = match v {
                v if holds(k, v) => v.clone(),
                // Any integer is a JSON number as text, past 64 bits too.
                Value::Integer(i) => Value::Text(i.to_string()),
                other => Value::Text(value(other).to_string()),
            };
            (k.clone(), kept)
        })
        .collect()
}

/// `zt info --json` object entries, serialized straight from the reader's data (no tree of
/// JSON values per object: 100,000 objects must print fast and in little memory).
#[derive(serde::Serialize)]
struct InfoComponent<'a> {
    dtype: &'a str,
    r#type: Option<&'a str>,
    offset: u64,
    length: u64,
    encoding: &'a str,
    uncompressed_length: Option<u64>,
    digest: Option<String>,
    /// zTensor v2: the shard that holds the bytes (absent: this file).
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<&'a str>,
}

#[derive(serde::Serialize)]
struct InfoObject<'a> {
    name: &'a str,
    format: &'a str,
    shape: &'a [u64],
    dtype: Option<&'a str>,
    r#type: Option<&'a str>,
    attributes: Attrs<'a>,
    components: BTreeMapRef<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unreadable: Option<Unreadable<'a>>,
}

/// Why a listed object cannot be decoded, in the error shape every command uses (the
/// object's own name and file are the listing's).
#[derive(serde::Serialize)]
struct Unreadable<'a> {
    error_kind: String,
    message: &'a str,
}

/// Attributes, serialized as [`value`] maps them.
struct Attrs<'a>(&'a Attributes);

impl serde::Serialize for Attrs<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.is_empty() {
            return serde::Serialize::serialize(&serde_json::Map::new(), s);
        }
        serde::Serialize::serialize(&attributes(self.0), s)
    }
}

/// Components by role, with the file's shards to name where v2 parts live.
struct BTreeMapRef<'a>(&'a [ComponentInfo], &'a [ShardInfo]);

impl serde::Serialize for BTreeMapRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for c in self.0 {
            m.serialize_entry(
                &c.role,
                &InfoComponent {
                    dtype: c.element.dtype.name(),
                    r#type: c.element.type_field(),
                    offset: c.offset,
                    length: c.length,
                    encoding: c.encoding.name(),
                    uncompressed_length: c.decoded_len.filter(|_| {
                        matches!(
                            c.encoding,
                            ztensor::Encoding::Zstd | ztensor::Encoding::ZstdSeekable
                        )
                    }),
                    digest: c
                        .digest
                        .map(|d| d.to_string())
                        .or_else(|| c.foreign_digest.as_deref().map(str::to_owned)),
                    shard: (c.file as usize)
                        .checked_sub(1)
                        .and_then(|i| self.1.get(i))
                        .map(|s| s.name.as_str()),
                },
            )?;
        }
        m.end()
    }
}

fn info_object<'a>(o: &'a ObjectInfo, shards: &'a [ShardInfo]) -> InfoObject<'a> {
    let el = o.element_type();
    InfoObject {
        name: &o.name,
        format: o.format.name(),
        shape: &o.shape,
        dtype: el.map(|e| e.dtype.name()),
        r#type: el.and_then(|e| e.type_field()),
        attributes: Attrs(&o.attributes),
        components: BTreeMapRef(&o.components, shards),
        unreadable: o.defect.as_ref().map(|d| Unreadable {
            error_kind: format!("{:?}", d.kind),
            message: &d.message,
        }),
    }
}

/// Writes `zt info --json` to `w`, one object at a time.
pub fn write_info(
    r: &Reader,
    file: &std::path::Path,
    w: &mut impl std::io::Write,
) -> serde_json::Result<()> {
    #[derive(serde::Serialize)]
    struct Info<'a> {
        schema: &'a str,
        file: std::borrow::Cow<'a, str>,
        kind: &'a str,
        version: String,
        /// zTensor v2: XXH3-64 of the manifest, as the footer stores it and open checked it.
        #[serde(skip_serializing_if = "Option::is_none")]
        manifest_hash: Option<String>,
        /// zTensor v2: the shards the file's parts live in (empty when it has none).
        #[serde(skip_serializing_if = "Option::is_none")]
        shards: Option<Vec<InfoShard<'a>>>,
        /// Elements of the objects that hold numbers (a model's parameter count).
        elements: u64,
        attributes: Attrs<'a>,
        objects: Objects<'a>,
    }
    #[derive(serde::Serialize)]
    struct InfoShard<'a> {
        name: &'a str,
        path: std::borrow::Cow<'a, str>,
        size: u64,
        digest: &'a str,
        data_shard: bool,
    }
    struct Objects<'a>(&'a [ObjectInfo], &'a [ShardInfo]);
    impl serde::Serialize for Objects<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(self.0.iter().map(|o| info_object(o, self.1)))
        }
    }
    let v2 = *r.version() == ztensor::FileVersion::ZTensorV2;
    let v = r.version();
    serde_json::to_writer(
        &mut *w,
        &Info {
            schema: "zt.info/1",
            file: file.to_string_lossy(),
            kind: v.kind(),
            version: version(v),
            manifest_hash: r.manifest_hash().map(|h| format!("xxh3:{h:016x}")),
            shards: v2.then(|| {
                r.shards()
                    .iter()
                    .map(|s| InfoShard {
                        name: &s.name,
                        path: s.path.to_string_lossy(),
                        size: s.size,
                        digest: &s.digest_text,
                        data_shard: s.data_shard,
                    })
                    .collect()
            }),
            elements: crate::common::element_count(r.objects()),
            attributes: Attrs(r.attributes()),
            objects: Objects(r.objects(), r.shards()),
        },
    )?;
    writeln!(w).map_err(serde_json::Error::io)
}

/// A file's version as `info` and `verify` give it ([`ztensor::FileVersion::number`]).
pub fn version(v: &ztensor::FileVersion) -> String {
    v.number()
}

/// Decoded little-endian elements of `ty` as JSON values: numbers (floats that are not finite
/// as strings), booleans, and `[re, im]` pairs for complex types. Packed sub-byte elements
/// (`i4`, `f4_e2m1`, `nf4`, ...) are decoded from their codes, lowest bits first: the first
/// `count` of them (the bytes' last may hold unused bits).
pub fn elements(bytes: &[u8], ty: &ElementType, count: u64) -> Vec<J> {
    fn each<const N: usize>(b: &[u8], f: impl Fn([u8; N]) -> J) -> Vec<J> {
        b.chunks_exact(N)
            .map(|c| f(c.try_into().unwrap_or([0; N])))
            .collect()
    }
    if let Some((t, bits)) = ty
        .logical
        .as_ref()
        .and_then(|t| Some((t, t.packed_bits()?)))
    {
        let integers = matches!(
            t,
            LogicalType::I4 | LogicalType::U4 | LogicalType::I2 | LogicalType::U2
        );
        return ztensor::formats::packed_codes(bytes, bits)
            .take(usize::try_from(count).unwrap_or(usize::MAX))
            .map(|c| {
                let v = ztensor::fp8::packed_value(t, c).unwrap_or(f32::NAN);
                if integers {
                    J::from(v as i64)
                } else {
                    float(v.into())
                }
            })
            .collect();
    }
    if let Some(f) = ty.logical.as_ref().and_then(Fp8Format::of) {
        return bytes.iter().map(|&b| float(f.decode(b).into())).collect();
    }
    match (&ty.logical, ty.dtype) {
        // The OCP MX scale is an exponent alone (2^(code - 127)), not an FP8 format.
        (Some(LogicalType::F8E8M0), _) => bytes
            .iter()
            .map(|&b| float(ztensor::fp8::e8m0_to_f32(b).into()))
            .collect(),
        (Some(LogicalType::Complex64), _) => each::<8>(bytes, |c| {
            let re = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let im = f32::from_le_bytes([c[4], c[5], c[6], c[7]]);
            json!([float(re.into()), float(im.into())])
        }),
        (Some(LogicalType::Complex128), _) => each::<16>(bytes, |c| {
            let (a, b) = c.split_at(8);
            let re = f64::from_le_bytes(a.try_into().unwrap_or([0; 8]));
            let im = f64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            json!([float(re), float(im)])
        }),
        (_, DType::F64) => each::<8>(bytes, |c| float(f64::from_le_bytes(c))),
        (_, DType::F32) => each::<4>(bytes, |c| float(f32::from_le_bytes(c).into())),
        (_, DType::F16) => each::<2>(bytes, |c| float(half::f16::from_le_bytes(c).into())),
        (_, DType::BF16) => each::<2>(bytes, |c| float(half::bf16::from_le_bytes(c).into())),
        (_, DType::I64) => each::<8>(bytes, |c| J::from(i64::from_le_bytes(c))),
        (_, DType::I32) => each::<4>(bytes, |c| J::from(i32::from_le_bytes(c))),
        (_, DType::I16) => each::<2>(bytes, |c| J::from(i16::from_le_bytes(c))),
        (_, DType::I8) => bytes.iter().map(|&b| J::from(b as i8)).collect(),
        (_, DType::U64) => each::<8>(bytes, |c| J::from(u64::from_le_bytes(c))),
        (_, DType::U32) => each::<4>(bytes, |c| J::from(u32::from_le_bytes(c))),
        (_, DType::U16) => each::<2>(bytes, |c| J::from(u16::from_le_bytes(c))),
        (_, DType::U8) => bytes.iter().map(|&b| J::from(b)).collect(),
        (_, DType::Bool) => bytes.iter().map(|&b| J::from(b != 0)).collect(),
    }
}
