//! The version 300 JSON manifest: parsed into attribute values with duplicate keys refused,
//! and written from them.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use zt_container::{Error, Result};
use zt_manifest::{Attributes, Value};

use crate::limits::MAX_RANK;

/// A JSON value as an attribute [`Value`], refusing duplicate object keys (serde_json would
/// keep the last one silently, so two readers could disagree about the file).
struct JsonValue(Value);

impl<'de> de::Deserialize<'de> for JsonValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = JsonValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue(Value::Integer(v.into())))
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue(Value::Integer(v.into())))
    }
    fn visit_f64<E>(self, v: f64) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue(Value::Float(v)))
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue(Value::Text(v.to_owned())))
    }
    fn visit_unit<E>(self) -> std::result::Result<JsonValue, E> {
        Ok(JsonValue(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<JsonValue, A::Error> {
        let mut v = Vec::new();
        while let Some(JsonValue(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(JsonValue(Value::Array(v)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<JsonValue, A::Error> {
        let mut m = BTreeMap::new();
        while let Some(k) = map.next_key::<String>()? {
            let JsonValue(v) = map.next_value()?;
            if m.contains_key(&k) {
                return Err(de::Error::custom(format!("duplicate key {k:?}")));
            }
            m.insert(k, v);
        }
        Ok(JsonValue(Value::Map(m)))
    }
}

/// One tensor entry of the manifest.
#[derive(Debug)]
pub(crate) struct JsonTensor {
    pub name: String,
    pub shape: Vec<u64>,
    pub dtype_id: u32,
    pub offset: u64,
    pub nbytes: u64,
}

/// What we use of the manifest.
#[derive(Debug)]
pub(crate) struct ParsedManifest {
    pub metadata: Attributes,
    pub tensors: Vec<JsonTensor>,
}

/// The top-level keys of a version 300 manifest, each required by magnetron's reader.
const REQUIRED_KEYS: [&str; 6] = [
    "manifest_ver",
    "timestamp",
    "magnetron_ver",
    "snapshot_ver",
    "usr_metadata",
    "tensor_map",
];

/// The keys of a `tensor_map` entry, each required by magnetron's reader (it uses
/// `dtype_id`; `dtype` is the type's name, for people).
const REQUIRED_TENSOR_KEYS: [&str; 5] = ["shape", "dtype", "dtype_id", "offset", "nbytes"];

pub(crate) fn parse_manifest(text: &[u8]) -> Result<ParsedManifest> {
    if text.contains(&0) {
        return Err(Error::invalid("metadata JSON contains a NUL byte"));
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    let JsonValue(root) = de::Deserialize::deserialize(&mut de)
        .map_err(|e| Error::invalid(format!("metadata is not valid JSON: {e}")))?;
    de.end()
        .map_err(|e| Error::invalid(format!("metadata JSON has trailing data: {e}")))?;
    let Value::Map(mut root) = root else {
        return Err(Error::invalid("metadata JSON is not an object"));
    };
    // magnetron 0.2.x builds its manifest from these keys and refuses a file missing any
    // (a `KeyError`); we use only the last two, and refuse as it does.
    for key in REQUIRED_KEYS {
        if !root.contains_key(key) {
            return Err(Error::invalid(format!(
                "metadata JSON has no {key:?} (magnetron 0.2.x requires it)"
            )));
        }
    }
    let metadata = match root.remove("usr_metadata") {
        Some(Value::Map(m)) => m,
        other => {
            return Err(Error::invalid(format!(
                "usr_metadata is {}, not an object",
                other.as_ref().map_or("missing", Value::kind_name)
            )))
        }
    };
    let Some(Value::Map(map)) = root.remove("tensor_map") else {
        return Err(Error::invalid(
            "metadata JSON's tensor_map is not an object",
        ));
    };
    let mut tensors = Vec::with_capacity(map.len());
    for (name, v) in map {
        if name.is_empty() || name.contains('\0') {
            return Err(Error::invalid(format!(
                "tensor key {name:?} is empty or contains NUL"
            )));
        }
        let Value::Map(t) = v else {
            return Err(Error::invalid("tensor_map entry is not an object").in_object(&name));
        };
        if let Some(key) = REQUIRED_TENSOR_KEYS.iter().find(|k| !t.contains_key(**k)) {
            return Err(Error::invalid(format!(
                "tensor_map entry has no {key:?} (magnetron 0.2.x requires it)"
            ))
            .in_object(&name));
        }
        let uint = |k: &str| -> Result<u64> {
            t.get(k).and_then(Value::as_u64).ok_or_else(|| {
                Error::invalid(format!(
                    "tensor_map entry has no non-negative integer {k:?}"
                ))
                .in_object(&name)
            })
        };
        let shape = match t.get("shape") {
            Some(Value::Array(a)) if a.len() <= MAX_RANK => a
                .iter()
                .map(|d| {
                    d.as_u64().ok_or_else(|| {
                        Error::invalid(format!("dimension {d:?} is not a non-negative integer"))
                            .in_object(&name)
                    })
                })
                .collect::<Result<Vec<u64>>>()?,
            Some(Value::Array(_)) => {
                return Err(Error::rank_over_cap(None, MAX_RANK).in_object(&name))
            }
            _ => return Err(Error::invalid("tensor_map entry has no shape array").in_object(&name)),
        };
        let dtype_id = u32::try_from(uint("dtype_id")?)
            .map_err(|_| Error::invalid("dtype_id out of range").in_object(&name))?;
        tensors.push(JsonTensor {
            shape,
            dtype_id,
            offset: uint("offset")?,
            nbytes: uint("nbytes")?,
            name,
        });
    }
    tensors.sort_by_key(|t| t.offset);
    Ok(ParsedManifest { metadata, tensors })
}

/// An attribute value as JSON; values JSON cannot hold are errors naming the key.
pub(crate) fn to_json(key: &str, v: &Value) -> Result<serde_json::Value> {
    use serde_json::Value as J;
    let cannot = |what: &str| {
        Error::argument(format!(
            "metadata {key:?}: {what} cannot be stored in .mag version 300 JSON"
        ))
    };
    Ok(match v {
        Value::Integer(i) => {
            if let Ok(x) = i64::try_from(*i) {
                J::from(x)
            } else if let Ok(x) = u64::try_from(*i) {
                J::from(x)
            } else {
                return Err(cannot("an integer outside the 64-bit range"));
            }
        }
        Value::Float(f) => J::from(
            serde_json::Number::from_f64(*f).ok_or_else(|| cannot("a NaN or infinite float"))?,
        ),
        Value::Text(s) => J::from(s.as_str()),
        Value::Bool(b) => J::from(*b),
        Value::Null => J::Null,
        Value::Array(a) => J::Array(a.iter().map(|x| to_json(key, x)).collect::<Result<_>>()?),
        Value::Map(m) => J::Object(
            m.iter()
                .map(|(k, x)| Ok((k.clone(), to_json(key, x)?)))
                .collect::<Result<_>>()?,
        ),
        Value::Bytes(_) => return Err(cannot("a byte string")),
        Value::Tag(..) => return Err(cannot("a tagged CBOR value")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_nul_and_depth_are_refused() {
        let ok = br#"{"manifest_ver":1,"timestamp":"","magnetron_ver":"","snapshot_ver":"","usr_metadata":{"a":1,"b":[1.5,null,"x"]},"tensor_map":{"w":{"shape":[2],"dtype":"float32","dtype_id":0,"offset":0,"nbytes":8}}}"#;
        let m = parse_manifest(ok).unwrap();
        assert_eq!(m.metadata["a"], Value::Integer(1));
        assert_eq!(m.tensors[0].name, "w");
        let dup = br#"{"tensor_map":{"w":{"shape":[2],"dtype_id":0,"offset":0,"nbytes":8},"w":{"shape":[2],"dtype_id":0,"offset":0,"nbytes":8}}}"#;
        assert!(parse_manifest(dup)
            .unwrap_err()
            .message()
            .contains("duplicate key \"w\""));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse_manifest(deep.as_bytes()).is_err());
        assert!(parse_manifest(b"{\"tensor_map\":{}}\0")
            .unwrap_err()
            .message()
            .contains("NUL"));
    }

    /// magnetron 0.2.x reads every key of its manifest and fails on a file missing one.
    #[test]
    fn keys_magnetron_requires_are_required() {
        let ok = r#"{"manifest_ver":1,"timestamp":"t","magnetron_ver":"v","snapshot_ver":"s","usr_metadata":{},"tensor_map":{"w":{"shape":[2],"dtype":"float32","dtype_id":0,"offset":0,"nbytes":8}}}"#;
        assert!(parse_manifest(ok.as_bytes()).is_ok());
        for key in REQUIRED_KEYS.iter().chain(&REQUIRED_TENSOR_KEYS) {
            let broken = ok.replace(&format!("\"{key}\":"), &format!("\"{key}_\":"));
            let e = parse_manifest(broken.as_bytes()).err().unwrap();
            assert!(
                e.message().contains(&format!("has no {key:?}")),
                "{key}: {e}"
            );
        }
        let null = ok.replace(r#""usr_metadata":{}"#, r#""usr_metadata":null"#);
        assert!(parse_manifest(null.as_bytes()).is_err());
    }
}
