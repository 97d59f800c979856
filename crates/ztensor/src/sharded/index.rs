//! The JSON index of a sharded checkpoint, Hugging Face's convention
//! (`model.safetensors.index.json`, and the same for `.zt` shards): `weight_map` maps each
//! tensor name to the file that holds it, `metadata` is free-form. Keras 3's sharded weights
//! (`model.weights.json` over `model_00000.weights.h5`, ...) map each variable group
//! (`/layers/dense/vars`) to a list of the files that hold its variables instead.
//! transformers' TensorFlow models list each variable under its full name and store it under
//! a shorter one ([`ShardIndex::tensorflow_stored`] gives those names; the set looks in a
//! shard to tell which it holds).
//!
//! - [`ShardIndex::parse`]: untrusted bytes to a checked index: size and count caps, no
//!   duplicate names, shard file names that are plain relative paths in the index's folder
//!   or below it.
//! - [`ShardIndex::to_json`]: the index a writer makes, deterministic (keys sorted).
//!
//! The index is read before any shard is opened, and it alone answers which shard holds a
//! name; shards are opened by [`super::ShardedSet`].

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use zt_container::{Error, Result};
use zt_manifest::{Attributes, Value};

/// The largest index file read: a real one lists each tensor once with a short file name
/// (a 1,000-shard model of 100,000 tensors takes about 10 MiB).
pub const MAX_INDEX_LEN: u64 = 64 << 20;
/// Most tensor names an index may list.
pub const MAX_INDEX_NAMES: usize = 1 << 20;
/// Most distinct shard files an index may name.
pub const MAX_SHARDS: usize = 1 << 16;
/// The longest file or folder name in a shard's path (a common file system limit).
const MAX_SHARD_NAME_LEN: usize = 255;
/// The longest shard path accepted, folders included.
const MAX_SHARD_PATH_LEN: usize = 1024;
/// The most components a shard path may have (its file and the folders above it).
const MAX_SHARD_PATH_DEPTH: usize = 16;

/// A checked index: names in bytewise order, each with the position of its shard file in
/// [`ShardIndex::shards`] (files in bytewise order of their names).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardIndex {
    /// `metadata`, as attribute values (empty when absent).
    pub metadata: Attributes,
    /// Shard file names, sorted, each once.
    pub shards: Vec<String>,
    /// `(tensor name, shard position)`, sorted by name, names unique.
    pub entries: Vec<(String, u32)>,
    /// For an index of Keras 3's sharded weights: `(variable group, shard positions)`, sorted
    /// by group, groups unique; `entries` is then empty until the shards are listed
    /// ([`super::ShardedSet`] does so when it opens the set). Empty for other indexes.
    pub groups: Vec<(String, Vec<u32>)>,
}

/// What `weight_map` gives a name: one file (Hugging Face's tensors), or a list of files
/// (Keras's variable groups).
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Files {
    One(String),
    Many(Vec<String>),
}

impl Files {
    fn as_slice(&self) -> &[String] {
        match self {
            Files::One(f) => std::slice::from_ref(f),
            Files::Many(v) => v,
        }
    }
}

/// `weight_map` as written, pairs kept in order so duplicates can be seen (serde_json's map
/// would keep the last silently).
struct Pairs(Vec<(String, Files)>);

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct PairsVisitor;
        impl<'de> Visitor<'de> for PairsVisitor {
            type Value = Pairs;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object mapping tensor names to shard file names (or lists of them)")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Pairs, A::Error> {
                let mut pairs = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Files>()? {
                    if pairs.len() == MAX_INDEX_NAMES {
                        return Err(serde::de::Error::custom(format!(
                            "more than {MAX_INDEX_NAMES} names"
                        )));
                    }
                    pairs.push((k, v));
                }
                Ok(Pairs(pairs))
            }
        }
        d.deserialize_map(PairsVisitor)
    }
}

#[derive(Deserialize)]
struct RawIndex {
    #[serde(default)]
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    weight_map: Pairs,
}

impl ShardIndex {
    /// The index of a split GGUF model (`<prefix>-00001-of-0000N.gguf` ...): its files,
    /// named as llama.cpp names them, and no names until the set lists the files.
    pub(crate) fn gguf_split(prefix: &str, count: u32) -> ShardIndex {
        ShardIndex {
            metadata: Attributes::new(),
            shards: (1..=count)
                .map(|i| format!("{prefix}-{i:05}-of-{count:05}.gguf"))
                .collect(),
            entries: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// The largest index file read: 64 MiB.
    pub const MAX_LEN: u64 = MAX_INDEX_LEN;

    /// Parses and checks an index's bytes. Every refusal is an `InvalidFile` error saying
    /// what is wrong. An index whose `weight_map` gives any name a list of files is one of
    /// Keras's variable groups: its `groups` are filled and its `entries` left empty.
    ///
    /// ```
    /// use ztensor::ShardIndex;
    /// let json = br#"{"metadata": {"total_size": 16},
    ///                 "weight_map": {"b": "m-00002-of-00002.safetensors",
    ///                                "a": "m-00001-of-00002.safetensors"}}"#;
    /// let index = ShardIndex::parse(json)?;
    /// assert_eq!(index.shards, ["m-00001-of-00002.safetensors", "m-00002-of-00002.safetensors"]);
    /// assert_eq!(index.entries[0], ("a".to_owned(), 0));
    /// assert!(ShardIndex::parse(br#"{"weight_map": {"a": "../etc/passwd"}}"#).is_err());
    /// # Ok::<(), ztensor::Error>(())
    /// ```
    pub fn parse(bytes: &[u8]) -> Result<ShardIndex> {
        if bytes.len() as u64 > MAX_INDEX_LEN {
            return Err(Error::limit(format!(
                "the index is {} bytes, over the {MAX_INDEX_LEN}-byte cap",
                bytes.len()
            )));
        }
        let raw: RawIndex = serde_json::from_slice(bytes)
            .map_err(|e| Error::invalid(format!("not a sharded checkpoint index: {e}")))?;
        let metadata = raw
            .metadata
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, json_value(v)))
            .collect();
        let mut files: BTreeMap<&str, u32> = BTreeMap::new();
        for (name, list) in &raw.weight_map.0 {
            for file in list.as_slice() {
                check_shard_name(file).map_err(|e| e.in_object(name))?;
                if !files.contains_key(file.as_str()) {
                    if files.len() == MAX_SHARDS {
                        return Err(Error::limit(format!(
                            "the index names more than {MAX_SHARDS} shard files"
                        )));
                    }
                    files.insert(file, 0);
                }
            }
        }
        for (position, slot) in files.values_mut().enumerate() {
            *slot = position as u32;
        }
        let position = |file: &String| files.get(file.as_str()).copied().unwrap_or(0);
        // Keras writes every value as a list; Hugging Face never does.
        let grouped = raw
            .weight_map
            .0
            .iter()
            .any(|(_, f)| matches!(f, Files::Many(_)));
        let mut entries: Vec<(String, u32)> = Vec::new();
        let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
        for (name, list) in &raw.weight_map.0 {
            if grouped {
                let mut shards: Vec<u32> = list.as_slice().iter().map(position).collect();
                shards.sort_unstable();
                shards.dedup();
                groups.push((name.clone(), shards));
            } else {
                let file = list.as_slice().first().map(position).unwrap_or(0);
                entries.push((name.clone(), file));
            }
        }
        entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        groups.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        if let Some(name) = repeated(entries.iter().map(|e| &e.0)) {
            return Err(Error::invalid(format!(
                "the index lists tensor {name:?} twice"
            )));
        }
        if let Some(name) = repeated(groups.iter().map(|g| &g.0)) {
            return Err(Error::invalid(format!(
                "the index lists variable group {name:?} twice"
            )));
        }
        let shards = files.keys().map(|s| (*s).to_owned()).collect();
        Ok(ShardIndex {
            metadata,
            shards,
            entries,
            groups,
        })
    }

    /// The index with the names transformers' TensorFlow models store their variables under,
    /// when every name it lists is a TensorFlow variable's (it ends in `:` and an output
    /// number: `tf_bert_model/bert/pooler/dense/kernel:0`); `None` otherwise. Such an index
    /// keeps each variable's full name, and the shard drops its first component (see
    /// [`super::ShardedSet`], which looks in a shard to tell which it holds). Two variables
    /// that land on one name are an `InvalidFile` error.
    ///
    /// ```
    /// use ztensor::ShardIndex;
    /// let tf = br#"{"weight_map": {"tf_bert_model/bert/pooler/dense/bias:0": "tf_model.h5"}}"#;
    /// let stored = ShardIndex::parse(tf)?.tensorflow_stored()?.unwrap();
    /// assert_eq!(stored.entries[0].0, "/bert/pooler/dense/bias:0");
    /// assert!(ShardIndex::parse(br#"{"weight_map": {"w": "m.zt"}}"#)?
    ///     .tensorflow_stored()?
    ///     .is_none());
    /// # Ok::<(), ztensor::Error>(())
    /// ```
    pub fn tensorflow_stored(&self) -> Result<Option<ShardIndex>> {
        if self.entries.is_empty() || !self.entries.iter().all(|(n, _)| is_tf_variable(n)) {
            return Ok(None);
        }
        let hdf5: Vec<bool> = self
            .shards
            .iter()
            .map(|f| {
                std::path::Path::new(f)
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("h5"))
            })
            .collect();
        let mut entries: Vec<(String, u32)> = self
            .entries
            .iter()
            .map(|(name, file)| {
                let in_hdf5 = hdf5.get(*file as usize).copied().unwrap_or(false);
                (tf_stored_name(name, in_hdf5), *file)
            })
            .collect();
        entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        if let Some(name) = repeated(entries.iter().map(|e| &e.0)) {
            return Err(Error::invalid(format!(
                "the index lists two TensorFlow variables that transformers stores under one \
                 name, {name:?}"
            )));
        }
        Ok(Some(ShardIndex {
            entries,
            ..self.clone()
        }))
    }

    /// The index as JSON, in Hugging Face's layout with every key sorted, so the same set
    /// always gives the same bytes: `{"metadata": {...}, "weight_map": {name: file}}`, from
    /// `entries` (`groups` are not written).
    pub fn to_json(&self) -> String {
        let metadata: serde_json::Map<String, serde_json::Value> = self
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), value_json(v)))
            .collect();
        let weight_map: serde_json::Map<String, serde_json::Value> = self
            .entries
            .iter()
            .map(|(name, shard)| {
                let file = self
                    .shards
                    .get(*shard as usize)
                    .cloned()
                    .unwrap_or_default();
                (name.clone(), serde_json::Value::String(file))
            })
            .collect();
        let index = serde_json::json!({ "metadata": metadata, "weight_map": weight_map });
        // Pretty, as the transformers library writes it; maps are sorted (BTreeMap-backed).
        let mut s = serde_json::to_string_pretty(&index).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// The first name of `sorted` that follows itself.
/// Whether `name` is a TensorFlow variable's name: it ends in `:` and an output number
/// (`tf_bert_model/bert/pooler/dense/kernel:0`). Tensor names from PyTorch and the other
/// writers of indexes never do.
fn is_tf_variable(name: &str) -> bool {
    name.rsplit_once(':')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The name under which transformers' TensorFlow models store the variable its index lists
/// as `name`: the index keeps the variable's full name, the shard drops its first component
/// (the model's own name) unless the name holds `model.` or has one component (transformers'
/// `strip_model_name_and_prefix`). In an HDF5 shard that is a dataset's path, which we name
/// from the root (`/bert/pooler/dense/kernel:0`).
fn tf_stored_name(name: &str, hdf5: bool) -> String {
    let stored = match name.split_once('/') {
        Some((_, rest)) if !name.contains("model.") => rest,
        _ => name,
    };
    if hdf5 && !stored.starts_with('/') {
        format!("/{stored}")
    } else {
        stored.to_owned()
    }
}

fn repeated<'a>(sorted: impl Iterator<Item = &'a String>) -> Option<&'a String> {
    let mut sorted = sorted.peekable();
    while let Some(name) = sorted.next() {
        if sorted.peek() == Some(&name) {
            return Some(name);
        }
    }
    None
}

/// A shard file name must name a file in the index's folder or in a folder below it, as
/// transformers joins it to the index's folder: `/`-separated plain names (none empty, `.` or
/// `..`, so nothing absolute and nothing above), no backslash, drive colon or NUL, and short.
fn check_shard_name(file: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::invalid(format!(
            "shard file name {file:?} {why}; an index may name only files in its own folder \
             or in folders below it"
        )))
    };
    if file.is_empty() {
        return bad("is empty");
    }
    if file.len() > MAX_SHARD_PATH_LEN {
        return bad("is too long");
    }
    if file.contains(['\\', '\0', ':']) {
        return bad("contains a backslash, a colon or NUL");
    }
    if file.starts_with('/') {
        return bad("is an absolute path");
    }
    if file.split('/').count() > MAX_SHARD_PATH_DEPTH {
        return bad("lies too many folders deep");
    }
    for part in file.split('/') {
        match part {
            "" => return bad("has an empty path component"),
            "." | ".." => return bad("has a `.` or `..` path component"),
            _ if part.len() > MAX_SHARD_NAME_LEN => return bad("has a component too long"),
            _ => {}
        }
    }
    Ok(())
}

/// A JSON value as an attribute value (integers exactly; others as floats).
fn json_value(v: serde_json::Value) -> Value {
    use serde_json::Value as J;
    match v {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(b),
        J::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Integer(i128::from(i)),
            (None, Some(u)) => Value::Integer(i128::from(u)),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::Text(s),
        J::Array(a) => Value::Array(a.into_iter().map(json_value).collect()),
        J::Object(m) => Value::Map(m.into_iter().map(|(k, v)| (k, json_value(v))).collect()),
    }
}

/// An attribute value as JSON, for the metadata a writer puts in an index (byte strings as
/// arrays of numbers, tags as their content, integers beyond 64 bits as decimal text).
fn value_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Integer(i) => i64::try_from(*i)
            .map(J::from)
            .or_else(|_| u64::try_from(*i).map(J::from))
            .unwrap_or_else(|_| J::String(i.to_string())),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Value::Text(s) => J::String(s.clone()),
        Value::Bytes(b) => J::Array(b.iter().map(|&x| J::from(x)).collect()),
        Value::Bool(b) => J::Bool(*b),
        Value::Null => J::Null,
        Value::Array(a) => J::Array(a.iter().map(value_json).collect()),
        Value::Map(m) => J::Object(m.iter().map(|(k, v)| (k.clone(), value_json(v))).collect()),
        Value::Tag(_, inner) => value_json(inner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_a_hostile_index_may_hold() {
        let refused = [
            (r#"{"weight_map": {"a": "x.st", "a": "y.st"}}"#, "twice"),
            (r#"{"weight_map": {"a": "/etc/passwd"}}"#, "absolute"),
            (r#"{"weight_map": {"a": "..\\x"}}"#, "backslash"),
            (r#"{"weight_map": {"a": ".."}}"#, "`..` path component"),
            (
                r#"{"weight_map": {"a": "sub/../../x"}}"#,
                "`..` path component",
            ),
            (r#"{"weight_map": {"a": "./x"}}"#, "`.` or `..`"),
            (r#"{"weight_map": {"a": "sub//x"}}"#, "empty path component"),
            (r#"{"weight_map": {"a": "sub/"}}"#, "empty path component"),
            (r#"{"weight_map": {"a": "C:x"}}"#, "colon"),
            (r#"{"weight_map": {"a": ""}}"#, "empty"),
            (r#"{"weight_map": {"a": 3}}"#, "not a sharded"),
            (r#"{"weight_map": {"a": [3]}}"#, "not a sharded"),
            (
                r#"{"weight_map": {"/g": ["x.h5"], "/g": ["y.h5"]}}"#,
                "variable group \"/g\" twice",
            ),
            (
                r#"{"weight_map": {"/g": ["x.h5", "../y.h5"]}}"#,
                "`..` path component",
            ),
            (r#"{"metadata": {}}"#, "weight_map"),
            (r#"[1, 2]"#, "not a sharded"),
            ("{\"weight_map\": {\"a\": \"x\"}", "not a sharded"),
        ];
        for (json, why) in refused {
            let e = ShardIndex::parse(json.as_bytes()).unwrap_err();
            assert_eq!(e.kind(), zt_container::ErrorKind::InvalidFile, "{json}");
            assert!(e.to_string().contains(why), "{json}: {e}");
        }
        let long = format!(r#"{{"weight_map": {{"a": "{}"}}}}"#, "x".repeat(300));
        assert!(ShardIndex::parse(long.as_bytes()).is_err());
        let deep = format!(r#"{{"weight_map": {{"a": "{}x"}}}}"#, "d/".repeat(16));
        let e = ShardIndex::parse(deep.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("too many folders deep"), "{e}");
        // Folders below the index's are where transformers would look too.
        let sub = br#"{"weight_map": {"a": "part/m-1.safetensors", "b": "m-2.safetensors"}}"#;
        let index = ShardIndex::parse(sub).unwrap();
        assert_eq!(index.shards, ["m-2.safetensors", "part/m-1.safetensors"]);
    }

    #[test]
    fn reads_keras_variable_groups() {
        let json = br#"{"metadata": {"total_size": 92.0}, "weight_map": {
            "/layers/dense/vars": ["m_00000.weights.h5", "m_00001.weights.h5"],
            "/layers/dense_1/vars": ["m_00001.weights.h5"], "/vars": "m_00000.weights.h5"}}"#;
        let index = ShardIndex::parse(json).unwrap();
        assert_eq!(index.shards, ["m_00000.weights.h5", "m_00001.weights.h5"]);
        assert!(index.entries.is_empty());
        assert_eq!(
            index.groups,
            [
                ("/layers/dense/vars".to_owned(), vec![0, 1]),
                ("/layers/dense_1/vars".to_owned(), vec![1]),
                ("/vars".to_owned(), vec![0]),
            ]
        );
    }

    #[test]
    fn gives_transformers_tensorflow_names_as_their_shards_store_them() {
        let json = br#"{"weight_map": {
            "tf_bert_model/bert/pooler/dense/kernel:0": "tf_model-00002-of-00002.h5",
            "tf_bert_model/bert/embeddings/LayerNorm/beta:0": "tf_model-00001-of-00002.H5",
            "tf_bart_model/model.shared/weight:0": "tf_model-00001-of-00002.H5",
            "kernel:12": "tf_model-00002-of-00002.h5",
            "tf_bert_model/bert/pooler/dense/bias:0": "m.safetensors"}}"#;
        let index = ShardIndex::parse(json).unwrap();
        assert!(
            index.entries[0].0.starts_with("kernel:12"),
            "parse keeps the names"
        );
        let stored = index.tensorflow_stored().unwrap().unwrap();
        let names: Vec<&str> = stored.entries.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "/bert/embeddings/LayerNorm/beta:0",
                "/bert/pooler/dense/kernel:0",
                "/kernel:12",
                "/tf_bart_model/model.shared/weight:0",
                "bert/pooler/dense/bias:0",
            ]
        );
        // One name that is not a variable's, and there is no such index.
        for other in ["model.embed:0x", "w:", "w"] {
            let json = format!(r#"{{"weight_map": {{"m/a/x:0": "s.h5", "{other}": "s.h5"}}}}"#);
            let index = ShardIndex::parse(json.as_bytes()).unwrap();
            assert!(index.tensorflow_stored().unwrap().is_none(), "{other}");
        }
        let twice = br#"{"weight_map": {"m/a/x:0": "s.h5", "n/a/x:0": "s.h5"}}"#;
        let e = ShardIndex::parse(twice)
            .unwrap()
            .tensorflow_stored()
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("two TensorFlow variables that transformers stores under one name"),
            "{e}"
        );
    }

    #[test]
    fn writes_what_it_reads() {
        let json =
            br#"{"metadata": {"total_size": 12, "format": "pt", "big": 18446744073709551615},
            "weight_map": {"z": "b.st", "a": "a.st", "m": "b.st"}}"#;
        let index = ShardIndex::parse(json).unwrap();
        assert_eq!(index.shards, ["a.st", "b.st"]);
        assert_eq!(
            index.entries,
            [("a".into(), 0), ("m".into(), 1), ("z".into(), 1)]
        );
        assert_eq!(index.metadata["total_size"], Value::Integer(12));
        let again = ShardIndex::parse(index.to_json().as_bytes()).unwrap();
        assert_eq!(again, index);
        assert_eq!(again.to_json(), index.to_json());
    }
}
