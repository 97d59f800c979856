//! The version 300 JSON manifest, read and written.
//!
//! - [`parse_manifest`]: the text read in one pass into one typed entry per tensor
//!   (`RawEntry`: the keys we use, the rest checked for JSON's faults and repeated keys, then
//!   dropped), then checked in the order and with the errors magnetron's keys call for.
//!   `usr_metadata` becomes attribute values (`JsonValue`), duplicate keys refused everywhere.
//!   What is built is charged as it is built (`Budgets`): values against a cap of their own,
//!   entries against the listing budget.
//! - [`to_json`]: attribute values as JSON, for the writer.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use zt_container::internal::MemoryBudget;
use zt_container::{Error, Result};
use zt_manifest::{Attributes, Value, ValueBudget};

use crate::limits::MAX_RANK;

/// The `visit_*` methods of a visitor to which every JSON scalar (boolean, number, string,
/// null) means the same `$value`: a thing that is not the object or array it wants.
macro_rules! every_scalar_is {
    ($value:expr) => {
        fn visit_bool<E>(self, _: bool) -> std::result::Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E>(self, _: i64) -> std::result::Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E>(self, _: u64) -> std::result::Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E>(self, _: f64) -> std::result::Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_str<E>(self, _: &str) -> std::result::Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
            Ok($value)
        }
    };
}

/// A visitor (which borrows the parse's [`Budgets`]) used as its own seed: it reads whatever
/// JSON value comes (`deserialize_any`) into a `$value`.
macro_rules! seed_by_any {
    ($visitor:ident, $value:ty) => {
        impl<'de> de::DeserializeSeed<'de> for $visitor<'_> {
            type Value = $value;

            fn deserialize<D: Deserializer<'de>>(
                self,
                d: D,
            ) -> std::result::Result<$value, D::Error> {
                d.deserialize_any(self)
            }
        }
    };
}

/// What the parse may still allocate, and the first limit it ran into.
///
/// A byte of the manifest can become tens of bytes in memory (`[0,0,...]` two bytes a
/// value, `"a":{},` seven bytes an entry), so what is built is charged as it is built:
/// attribute values (and the unused keys remembered to refuse repeats) against
/// [`ParseOptions::max_value_bytes`](crate::ParseOptions::max_value_bytes), the tensor
/// entries against the listing budget. serde's errors are text, so a charge that fails
/// keeps its error here and the visitor stops with a placeholder.
struct Budgets {
    values: ValueBudget,
    entries: MemoryBudget,
    exceeded: Option<Error>,
}

impl Budgets {
    /// Runs `charge` on `self`; its error is kept and a serde error returned that stops the
    /// parse.
    fn charge<E: de::Error>(
        &mut self,
        charge: impl FnOnce(&mut Self) -> Result<()>,
    ) -> std::result::Result<(), E> {
        charge(self).map_err(|e| self.fail(e))
    }

    /// Keeps `error` (the first one only) and returns a serde error that stops the parse.
    fn fail<E: de::Error>(&mut self, error: Error) -> E {
        self.exceeded.get_or_insert(error);
        E::custom("memory budget exceeded")
    }
}

/// A JSON value as an attribute [`Value`], refusing duplicate object keys (serde_json would
/// keep the last one silently, so two readers could disagree about the file).
struct JsonValue(Value);

/// Without a budget of the caller's (the tests' reference reader).
#[cfg(test)]
impl<'de> de::Deserialize<'de> for JsonValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let mut budgets = Budgets {
            values: ValueBudget::new(u64::MAX),
            entries: MemoryBudget::new(u64::MAX, "the tensor entries"),
            exceeded: None,
        };
        d.deserialize_any(ValueVisitor(&mut budgets))
    }
}

/// Reads a [`JsonValue`], charging each value to the budget as it is made.
struct ValueVisitor<'a>(&'a mut Budgets);

seed_by_any!(ValueVisitor, JsonValue);

impl ValueVisitor<'_> {
    /// `value`, once its node and `payload` bytes are charged.
    fn charged<E: de::Error>(
        self,
        payload: usize,
        value: impl FnOnce() -> Value,
    ) -> std::result::Result<JsonValue, E> {
        self.0.charge(|b| {
            b.values.node()?;
            b.values.payload(payload)
        })?;
        Ok(JsonValue(value()))
    }
}

impl<'de> Visitor<'de> for ValueVisitor<'_> {
    type Value = JsonValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<JsonValue, E> {
        self.charged(0, || Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<JsonValue, E> {
        self.charged(0, || Value::Integer(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<JsonValue, E> {
        self.charged(0, || Value::Integer(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<JsonValue, E> {
        self.charged(0, || Value::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<JsonValue, E> {
        self.charged(v.len(), || Value::Text(v.to_owned()))
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<JsonValue, E> {
        self.charged(0, || Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<JsonValue, A::Error> {
        self.0.charge(|b| b.values.node())?;
        let mut v = Vec::new();
        while let Some(JsonValue(x)) = seq.next_element_seed(ValueVisitor(&mut *self.0))? {
            v.push(x);
        }
        Ok(JsonValue(Value::Array(v)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<JsonValue, A::Error> {
        self.0.charge(|b| b.values.node())?;
        let mut m = BTreeMap::new();
        while let Some(k) = map.next_key::<String>()? {
            self.0.charge(|b| b.values.key(k.len()))?;
            let JsonValue(v) = map.next_value_seed(ValueVisitor(&mut *self.0))?;
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

/// A key of an object we read: its place in the list of keys we use, or its text. The keys
/// we use (five per tensor) are matched without allocating.
enum Key {
    Known(usize),
    Other(String),
}

/// Reads a [`Key`] given the keys we use.
struct KeySeed(&'static [&'static str]);

impl<'de> de::DeserializeSeed<'de> for KeySeed {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Key, E> {
        Ok(match self.0.iter().position(|k| *k == v) {
            Some(i) => Key::Known(i),
            None => Key::Other(v.to_owned()),
        })
    }
}

/// Keys seen in one JSON object: those we use by bit, the rest by name. A file may give an
/// object any number of keys, so the rest go in an ordered set, never a list scanned per key.
#[derive(Default)]
struct SeenKeys {
    known: u8,
    others: BTreeSet<String>,
}

impl SeenKeys {
    /// Notes `key` (of an object whose keys we use are `known`); an error the second time,
    /// worded as the attribute parser words it.
    fn note<E: de::Error>(
        &mut self,
        key: Key,
        known: &[&str],
        budgets: &mut Budgets,
    ) -> std::result::Result<(), E> {
        let repeated = match key {
            Key::Known(i) => {
                let bit = 1u8 << i;
                let repeated = self.known & bit != 0;
                self.known |= bit;
                repeated.then(|| known.get(i).copied().unwrap_or_default().to_owned())
            }
            Key::Other(k) if self.others.contains(&k) => Some(k),
            Key::Other(k) => {
                // Remembered until the object ends: charged as attribute values are.
                budgets.charge(|b| b.values.key(k.len()))?;
                self.others.insert(k);
                None
            }
        };
        match repeated {
            Some(k) => Err(de::Error::custom(format!("duplicate key {k:?}"))),
            None => Ok(()),
        }
    }

    fn has(&self, known_index: usize) -> bool {
        self.known & (1 << known_index) != 0
    }
}

/// A JSON value read for its faults only (JSON's own, a repeated key, depth), kept nowhere:
/// the values of keys we do not use.
struct Skipped;

/// Reads a [`Skipped`] value.
struct SkipVisitor<'a>(&'a mut Budgets);

seed_by_any!(SkipVisitor, Skipped);

impl<'de> Visitor<'de> for SkipVisitor<'_> {
    type Value = Skipped;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    every_scalar_is!(Skipped);
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Skipped, A::Error> {
        while let Some(Skipped) = seq.next_element_seed(SkipVisitor(&mut *self.0))? {}
        Ok(Skipped)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Skipped, A::Error> {
        let mut seen = SeenKeys::default();
        while let Some(key) = map.next_key_seed(KeySeed(&[]))? {
            let Skipped = map.next_value_seed(SkipVisitor(&mut *self.0))?;
            seen.note(key, &[], self.0)?;
        }
        Ok(Skipped)
    }
}

/// The manifest as read, before any check beyond JSON's own: the checks run afterwards, in
/// the order the tree-of-values reader ran them, so a file's error does not depend on how it
/// was parsed.
#[derive(Default)]
struct RawManifest {
    /// Which of [`REQUIRED_KEYS`] the root has.
    keys: SeenKeys,
    usr_metadata: Option<Value>,
    tensor_map: Option<RawTensorMap>,
}

/// `tensor_map`: its entries in file order, or word that it was not an object.
enum RawTensorMap {
    Entries(Vec<RawEntry>),
    NotAnObject,
}

/// One `tensor_map` entry: its name and, if it is an object, the keys we use, still
/// unchecked.
struct RawEntry {
    name: String,
    body: Option<RawBody>,
}

#[derive(Default)]
struct RawBody {
    /// Which of [`REQUIRED_TENSOR_KEYS`] the entry has.
    keys: SeenKeys,
    shape: RawShape,
    /// Each `None` if not a non-negative integer that fits 64 bits (or absent).
    dtype_id: Option<u64>,
    offset: Option<u64>,
    nbytes: Option<u64>,
}

/// A `shape` as read: its dimensions, or what is wrong with it.
#[derive(Default)]
enum RawShape {
    Dims(Vec<u64>),
    /// More than [`MAX_RANK`] elements.
    TooManyDims,
    /// The first element that is not a non-negative integer, as `{:?}` shows it.
    BadDim(String),
    #[default]
    NotAnArray,
}

/// Parses the root object; anything else is consumed (so JSON's own errors come first, as
/// before) and reported as not an object.
struct RootVisitor<'a>(&'a mut Budgets);

impl<'de> Visitor<'de> for RootVisitor<'_> {
    type Value = Option<RawManifest>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    every_scalar_is!(None);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Self::Value, A::Error> {
        SkipVisitor(self.0).visit_seq(seq).map(|_| None)
    }
    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut root = RawManifest::default();
        while let Some(key) = map.next_key_seed(KeySeed(&REQUIRED_KEYS))? {
            // Each value is parsed before its key is checked for a repeat, as the tree-of-
            // values reader did.
            match key {
                Key::Known(4) => {
                    let JsonValue(v) = map.next_value_seed(ValueVisitor(&mut *self.0))?;
                    root.usr_metadata = Some(v);
                }
                Key::Known(5) => {
                    let entries = map.next_value_seed(TensorMapVisitor(&mut *self.0))?;
                    root.tensor_map = Some(entries);
                }
                _ => {
                    let Skipped = map.next_value_seed(SkipVisitor(&mut *self.0))?;
                }
            }
            root.keys.note(key, &REQUIRED_KEYS, self.0)?;
        }
        Ok(Some(root))
    }
}

/// Parses `tensor_map` into [`RawEntry`]s, refusing a name given twice as it is read. The
/// entries are kept once, in file order, and indexed by a table of (hash, position) with a
/// per-process hash: a file cannot make it quadratic, and growing it hashes no name again.
struct TensorMapVisitor<'a>(&'a mut Budgets);

seed_by_any!(TensorMapVisitor, RawTensorMap);

impl<'de> Visitor<'de> for TensorMapVisitor<'_> {
    type Value = RawTensorMap;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    every_scalar_is!(RawTensorMap::NotAnObject);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<RawTensorMap, A::Error> {
        SkipVisitor(self.0)
            .visit_seq(seq)
            .map(|_| RawTensorMap::NotAnObject)
    }
    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<RawTensorMap, A::Error> {
        let state = RandomState::new();
        let mut entries: Vec<RawEntry> = Vec::new();
        let mut by_name: HashTable<(u64, usize)> = HashTable::new();
        while let Some(name) = map.next_key::<String>()? {
            let body = map.next_value_seed(EntryVisitor(&mut *self.0))?;
            let dims = match &body {
                Some(RawBody {
                    shape: RawShape::Dims(d),
                    ..
                }) => d.len(),
                _ => 0,
            };
            // The entry, its name, its dimensions, its slot in the table.
            let cost = std::mem::size_of::<RawEntry>() + name.len() + dims * 8 + 16;
            self.0.charge(|b| b.entries.charge(cost as u64))?;
            if entries.try_reserve(1).is_err() {
                let e = Error::out_of_memory(format!(
                    "cannot allocate the list of {} tensor entries",
                    entries.len() + 1
                ));
                return Err(self.0.fail(e));
            }
            let hash = state.hash_one(name.as_str());
            let same = |&(h, i): &(u64, usize)| {
                h == hash && entries.get(i).is_some_and(|e| e.name == name)
            };
            if by_name.find(hash, same).is_some() {
                return Err(de::Error::custom(format!("duplicate key {name:?}")));
            }
            by_name.insert_unique(hash, (hash, entries.len()), |&(h, _)| h);
            entries.push(RawEntry { name, body });
        }
        Ok(RawTensorMap::Entries(entries))
    }
}

/// Parses one `tensor_map` entry: the keys we use kept, the others read and dropped.
struct EntryVisitor<'a>(&'a mut Budgets);

seed_by_any!(EntryVisitor, Option<RawBody>);

impl<'de> Visitor<'de> for EntryVisitor<'_> {
    type Value = Option<RawBody>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    every_scalar_is!(None);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Self::Value, A::Error> {
        SkipVisitor(self.0).visit_seq(seq).map(|_| None)
    }
    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut body = RawBody::default();
        while let Some(key) = map.next_key_seed(KeySeed(&REQUIRED_TENSOR_KEYS))? {
            let uint = |JsonValue(v)| v.as_u64();
            let b = &mut *self.0;
            match key {
                Key::Known(0) => body.shape = map.next_value_seed(ShapeVisitor(b))?,
                Key::Known(2) => body.dtype_id = uint(map.next_value_seed(ValueVisitor(b))?),
                Key::Known(3) => body.offset = uint(map.next_value_seed(ValueVisitor(b))?),
                Key::Known(4) => body.nbytes = uint(map.next_value_seed(ValueVisitor(b))?),
                _ => {
                    let Skipped = map.next_value_seed(SkipVisitor(b))?;
                }
            }
            body.keys.note(key, &REQUIRED_TENSOR_KEYS, self.0)?;
        }
        Ok(Some(body))
    }
}

/// Parses a `shape` into a [`RawShape`], keeping at most [`MAX_RANK`] dimensions.
struct ShapeVisitor<'a>(&'a mut Budgets);

seed_by_any!(ShapeVisitor, RawShape);

impl<'de> Visitor<'de> for ShapeVisitor<'_> {
    type Value = RawShape;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    every_scalar_is!(RawShape::NotAnArray);
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<RawShape, A::Error> {
        SkipVisitor(self.0)
            .visit_map(map)
            .map(|_| RawShape::NotAnArray)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<RawShape, A::Error> {
        let mut dims = Vec::new();
        let mut count = 0usize;
        let mut bad = None;
        while let Some(JsonValue(d)) = seq.next_element_seed(ValueVisitor(&mut *self.0))? {
            count += 1;
            if count <= MAX_RANK && bad.is_none() {
                match d.as_u64() {
                    Some(x) => dims.push(x),
                    None => bad = Some(format!("{d:?}")),
                }
            }
        }
        Ok(match bad {
            _ if count > MAX_RANK => RawShape::TooManyDims,
            Some(d) => RawShape::BadDim(d),
            None => RawShape::Dims(dims),
        })
    }
}

/// Parses the manifest `text`, building at most `max_value_bytes` of attribute values and
/// `max_entry_bytes` of tensor entries.
pub(crate) fn parse_manifest(
    text: &[u8],
    max_value_bytes: u64,
    max_entry_bytes: u64,
) -> Result<ParsedManifest> {
    if text.contains(&0) {
        return Err(Error::invalid("metadata JSON contains a NUL byte"));
    }
    let mut budgets = Budgets {
        values: ValueBudget::new(max_value_bytes),
        entries: MemoryBudget::new(max_entry_bytes, "the manifest's tensor entries"),
        exceeded: None,
    };
    let mut de = serde_json::Deserializer::from_slice(text);
    let root = de.deserialize_any(RootVisitor(&mut budgets)).map_err(|e| {
        match budgets.exceeded.take() {
            Some(limit) => limit,
            None => Error::invalid(format!("metadata is not valid JSON: {e}")),
        }
    })?;
    de.end()
        .map_err(|e| Error::invalid(format!("metadata JSON has trailing data: {e}")))?;
    let Some(root) = root else {
        return Err(Error::invalid("metadata JSON is not an object"));
    };
    // magnetron 0.2.x builds its manifest from these keys and refuses a file missing any
    // (a `KeyError`); we use only the last two, and refuse as it does.
    if let Some(key) = (0..REQUIRED_KEYS.len()).find(|&i| !root.keys.has(i)) {
        return Err(Error::invalid(format!(
            "metadata JSON has no {:?} (magnetron 0.2.x requires it)",
            REQUIRED_KEYS[key]
        )));
    }
    let metadata = match root.usr_metadata {
        Some(Value::Map(m)) => m,
        other => {
            return Err(Error::invalid(format!(
                "usr_metadata is {}, not an object",
                other.as_ref().map_or("missing", Value::kind_name)
            )))
        }
    };
    let Some(RawTensorMap::Entries(mut entries)) = root.tensor_map else {
        return Err(Error::invalid(
            "metadata JSON's tensor_map is not an object",
        ));
    };
    // Checked in name order, so a file with several faults reports the same one however
    // its entries are ordered.
    entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    let mut tensors = Vec::with_capacity(entries.len());
    for RawEntry { name, body } in entries {
        tensors.push(checked_entry(name, body)?);
    }
    // Stable: entries at one offset (empty tensors) stay in name order.
    tensors.sort_by_key(|t| t.offset);
    Ok(ParsedManifest { metadata, tensors })
}

/// One entry checked as magnetron 0.2.x reads it.
fn checked_entry(name: String, body: Option<RawBody>) -> Result<JsonTensor> {
    if name.is_empty() || name.contains('\0') {
        return Err(Error::invalid(format!(
            "tensor key {name:?} is empty or contains NUL"
        )));
    }
    let Some(t) = body else {
        return Err(Error::invalid("tensor_map entry is not an object").in_object(&name));
    };
    if let Some(key) = (0..REQUIRED_TENSOR_KEYS.len()).find(|&i| !t.keys.has(i)) {
        return Err(Error::invalid(format!(
            "tensor_map entry has no {:?} (magnetron 0.2.x requires it)",
            REQUIRED_TENSOR_KEYS[key]
        ))
        .in_object(&name));
    }
    let uint = |v: Option<u64>, k: &str| -> Result<u64> {
        v.ok_or_else(|| {
            Error::invalid(format!(
                "tensor_map entry has no non-negative integer {k:?}"
            ))
            .in_object(&name)
        })
    };
    let shape = match t.shape {
        RawShape::Dims(dims) => dims,
        RawShape::BadDim(d) => {
            return Err(
                Error::invalid(format!("dimension {d} is not a non-negative integer"))
                    .in_object(&name),
            )
        }
        RawShape::TooManyDims => return Err(Error::rank_over_cap(None, MAX_RANK).in_object(&name)),
        RawShape::NotAnArray => {
            return Err(Error::invalid("tensor_map entry has no shape array").in_object(&name))
        }
    };
    let dtype_id = u32::try_from(uint(t.dtype_id, "dtype_id")?)
        .map_err(|_| Error::invalid("dtype_id out of range").in_object(&name))?;
    let offset = uint(t.offset, "offset")?;
    let nbytes = uint(t.nbytes, "nbytes")?;
    Ok(JsonTensor {
        name,
        shape,
        dtype_id,
        offset,
        nbytes,
    })
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
    use proptest::prelude::*;

    /// [`super::parse_manifest`] with the default budgets of a small file.
    fn parse_manifest(text: &[u8]) -> Result<ParsedManifest> {
        super::parse_manifest(
            text,
            zt_manifest::DEFAULT_MAX_VALUE_BYTES,
            crate::limits::default_listing_budget(0),
        )
    }

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

    /// The reader this module had before it read the manifest into typed entries: the whole
    /// manifest as a tree of attribute values, checked afterwards. Kept as the oracle the
    /// typed reader must agree with, error for error.
    mod reference {
        use super::super::{JsonTensor, JsonValue, MAX_RANK, REQUIRED_KEYS, REQUIRED_TENSOR_KEYS};
        use serde::de;
        use zt_container::{Error, Result};
        use zt_manifest::{Attributes, Value};

        pub fn parse_manifest(text: &[u8]) -> Result<(Attributes, Vec<JsonTensor>)> {
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
                    return Err(
                        Error::invalid("tensor_map entry is not an object").in_object(&name)
                    );
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
                                Error::invalid(format!(
                                    "dimension {d:?} is not a non-negative integer"
                                ))
                                .in_object(&name)
                            })
                        })
                        .collect::<Result<Vec<u64>>>()?,
                    Some(Value::Array(_)) => {
                        return Err(Error::rank_over_cap(None, MAX_RANK).in_object(&name))
                    }
                    _ => {
                        return Err(
                            Error::invalid("tensor_map entry has no shape array").in_object(&name)
                        )
                    }
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
            Ok((metadata, tensors))
        }
    }

    /// A JSON value for a key or element of a manifest: mostly what a manifest holds, often
    /// what it must not (negative, fractional, huge, text, nested, repeated keys).
    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => (0u64..5000).prop_map(|n| n.to_string()),
            1 => Just("18446744073709551615".to_owned()),
            1 => Just("18446744073709551616".to_owned()),
            1 => Just("4294967296".to_owned()),
            1 => Just("-1".to_owned()),
            1 => Just("2.0".to_owned()),
            1 => Just("1e3".to_owned()),
            1 => Just("\"float32\"".to_owned()),
            1 => Just("null".to_owned()),
            1 => Just("true".to_owned()),
            1 => Just("[1,{\"a\":1,\"b\":2}]".to_owned()),
            1 => Just("[1,{\"a\":1,\"a\":2}]".to_owned()),
            1 => Just("{\"x\":[]}".to_owned()),
        ]
    }

    fn shape() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => prop::collection::vec((0u64..9).prop_map(|n| n.to_string()), 0..4)
                .prop_map(|d| format!("[{}]", d.join(","))),
            1 => prop::collection::vec(scalar(), 0..4).prop_map(|d| format!("[{}]", d.join(","))),
            1 => (60usize..70).prop_map(|n| format!("[{}]", vec!["1"; n].join(","))),
            1 => (60usize..70).prop_map(|n| format!("[-1,{}]", vec!["1"; n].join(","))),
            1 => scalar(),
        ]
    }

    /// `"key":value` pairs, `keys` in a shuffled order, each kept unless `drop` says so, and
    /// now and then one given twice.
    fn object(
        pairs: Vec<(String, String)>,
        keep: &[bool],
        twice: Option<usize>,
        rng: &mut proptest::test_runner::TestRng,
    ) -> String {
        let mut kv: Vec<String> = pairs
            .iter()
            .zip(keep.iter().chain(std::iter::repeat(&true)))
            .filter(|(_, &k)| k)
            .map(|((k, v), _)| format!("{k:?}:{v}"))
            .collect();
        if let Some(i) = twice.filter(|_| !kv.is_empty()) {
            let again = kv[i % kv.len()].clone();
            kv.push(again);
        }
        for i in (1..kv.len()).rev() {
            kv.swap(i, rng.random_range(0..=i));
        }
        format!("{{{}}}", kv.join(","))
    }

    /// A `tensor_map` entry: usually whole, sometimes missing or repeating a key, or wrong.
    fn entry() -> impl Strategy<Value = String> {
        let uint = || prop_oneof![9 => (0u64..14).prop_map(|n| n.to_string()), 1 => scalar()];
        let whole = (
            shape(),
            uint(),
            prop_oneof![9 => (0u64..4).prop_map(|n| (n * 4096).to_string()), 1 => scalar()],
            uint(),
            prop::collection::vec(prop::bool::weighted(0.97), 6),
            prop::option::weighted(0.05, any::<usize>()),
        )
            .prop_perturb(|(shape, id, offset, nbytes, keep, twice), mut rng| {
                let pairs = [
                    ("shape", shape),
                    ("dtype", "\"f\"".to_owned()),
                    ("dtype_id", id),
                    ("offset", offset),
                    ("nbytes", nbytes),
                    ("extra", "[{}]".to_owned()),
                ];
                let pairs = pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                object(pairs, &keep, twice, &mut rng)
            });
        prop_oneof![12 => whole, 1 => scalar()]
    }

    /// A manifest: the root's keys usually all there, once, in any order, beside others.
    fn manifest() -> impl Strategy<Value = String> {
        let name = prop_oneof![
            1 => Just("\"\"".to_owned()),
            1 => Just("\"a\\u0000b\"".to_owned()),
            1 => Just("\"t\\u0030\"".to_owned()),
            1 => Just("\"t1\"".to_owned()),
            1 => Just("\"b\"".to_owned()),
        ];
        let entries = prop::collection::vec((prop::option::weighted(0.05, name), entry()), 0..12);
        let tensor_map = prop_oneof![
            12 => entries.prop_map(|es| {
                let es: Vec<String> = es
                    .iter()
                    .enumerate()
                    .map(|(i, (n, e))| format!("{}:{e}", n.clone().unwrap_or(format!("\"t{i}\""))))
                    .collect();
                format!("{{{}}}", es.join(","))
            }),
            1 => scalar(),
        ];
        let usr = prop_oneof![
            12 => Just(r#"{"a":1,"b":[1.5,null,"x"],"c":{"d":true}}"#.to_owned()),
            1 => Just(r#"{"a":1,"a":2}"#.to_owned()),
            1 => scalar(),
        ];
        (
            tensor_map,
            usr,
            prop::collection::vec(prop::bool::weighted(0.98), 7),
            prop::option::weighted(0.03, any::<usize>()),
        )
            .prop_perturb(|(tm, usr, keep, twice), mut rng| {
                let mut pairs: Vec<(String, String)> = REQUIRED_KEYS
                    .iter()
                    .map(|k| (k.to_string(), "\"v\"".to_owned()))
                    .collect();
                pairs[4].1 = usr;
                pairs[5].1 = tm;
                pairs.push(("other".to_owned(), "{\"x\":{\"y\":[1]}}".to_owned()));
                object(pairs, &keep, twice, &mut rng)
            })
    }

    fn outcome(r: Result<(Attributes, Vec<JsonTensor>)>) -> String {
        match r {
            Ok((meta, tensors)) => format!("{meta:?} {tensors:?}"),
            Err(e) => format!("error {:?}: {e}", e.kind()),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// The typed reader accepts what the tree-of-values reader accepted, with the same
        /// tensors in the same order, and refuses the rest with the same error.
        #[test]
        fn typed_reader_agrees_with_the_tree_of_values(text in manifest(), cut in any::<prop::sample::Index>(), truncate in prop::bool::weighted(0.1)) {
            let text = if truncate { &text[..cut.index(text.len() + 1)] } else { &text[..] };
            let typed = parse_manifest(text.as_bytes()).map(|m| (m.metadata, m.tensors));
            prop_assert_eq!(outcome(typed), outcome(reference::parse_manifest(text.as_bytes())), "{}", text);
        }
    }

    /// The generator reaches both outcomes and the faults it was written for.
    #[test]
    fn manifests_generated_cover_each_outcome() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let mut runner = TestRunner::deterministic();
        let strategy = manifest();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..3000 {
            let text = strategy.new_tree(&mut runner).unwrap().current();
            let label = match reference::parse_manifest(text.as_bytes()) {
                Ok((_, t)) if t.is_empty() => "ok, no tensor".to_owned(),
                Ok(_) => "ok".to_owned(),
                Err(e) => e.message().to_owned(),
            };
            seen.insert(label);
        }
        for want in [
            "duplicate key",
            "rank exceeds",
            "no non-negative integer \"offset\"",
            "ok",
            "ok, no tensor",
            "metadata is not valid JSON",
            "metadata JSON has no",
            "usr_metadata is",
            "metadata JSON's tensor_map is not an object",
            "tensor key",
            "tensor_map entry is not an object",
            "tensor_map entry has no",
            "dimension",
            "dtype_id out of range",
        ] {
            assert!(
                seen.iter().any(|m| m.contains(want)),
                "{want} not generated in 3000 manifests"
            );
        }
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
