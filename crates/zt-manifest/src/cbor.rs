//! A careful CBOR reader over minicbor: depth-limited, duplicate-key aware, with file offsets.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

use minicbor::data::Type;
use minicbor::Decoder;
use smallvec::SmallVec;
use zt_container::{Error, Result};

use crate::value::{Value, ValueBudget};
use crate::DecodeLimits;

/// Most keys of one map checked by a linear scan; past this, [`SeenKeys`] moves to a hash set.
const LINEAR_KEYS: usize = 8;

/// Keys seen in one map: the duplicate-key check, whose keys the file controls.
///
/// Small maps (every object and component map) are checked against a short inline list of
/// borrowed keys: no allocation, nothing to drop, and at most [`LINEAR_KEYS`] comparisons per
/// key. Larger maps, and keys that had to be assembled from chunks, go to a std `HashSet`,
/// whose `RandomState` hasher (SipHash) is keyed afresh for each set: a file cannot choose keys
/// that collide, so a map of n keys costs O(n) expected, never O(n²).
#[derive(Default)]
struct SeenKeys<'b> {
    small: SmallVec<[&'b str; LINEAR_KEYS]>,
    large: Option<HashSet<SetKey<'b>>>,
}

impl<'b> SeenKeys<'b> {
    /// Records `key`; false when it was seen before.
    fn insert(&mut self, key: Cow<'b, str>) -> bool {
        if self.large.is_none() {
            if let Cow::Borrowed(k) = key {
                #[cfg(test)]
                count::add(self.small.len());
                if self.small.contains(&k) {
                    return false;
                }
                if self.small.len() < LINEAR_KEYS {
                    self.small.push(k);
                    return true;
                }
            }
        }
        let small = &mut self.small;
        let set = self
            .large
            .get_or_insert_with(|| small.drain(..).map(|k| SetKey(Cow::Borrowed(k))).collect());
        set.insert(SetKey(key))
    }
}

/// A key in [`SeenKeys`]'s hash set, hashed and compared as its text. Tests count the
/// comparisons, which a flood of colliding keys would make quadratic.
#[derive(Hash, Eq)]
struct SetKey<'b>(Cow<'b, str>);

impl PartialEq for SetKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        #[cfg(test)]
        count::add(1);
        self.0 == other.0
    }
}

/// Key comparisons made by [`SeenKeys`] on this thread, for the tests that bound them.
#[cfg(test)]
mod count {
    use std::cell::Cell;

    thread_local!(static COMPARED: Cell<usize> = const { Cell::new(0) });

    pub fn add(n: usize) {
        COMPARED.with(|c| c.set(c.get() + n));
    }

    /// Returns the count and starts it again from zero.
    pub fn take() -> usize {
        COMPARED.with(|c| c.replace(0))
    }
}

/// A decoder that reports errors at absolute file offsets and never recurses past a limit.
pub(crate) struct Reader<'b> {
    pub d: Decoder<'b>,
    base: u64,
    limits: DecodeLimits,
    /// What the values built so far take ([`DecodeLimits::max_value_bytes`]).
    values: ValueBudget,
}

impl<'b> Reader<'b> {
    pub fn new(bytes: &'b [u8], base: u64, limits: DecodeLimits) -> Self {
        Reader {
            d: Decoder::new(bytes),
            base,
            limits,
            values: ValueBudget::new(limits.max_value_bytes),
        }
    }

    /// Absolute file offset of the next item.
    pub fn offset(&self) -> u64 {
        self.base + self.d.position() as u64
    }

    pub fn limits(&self) -> &DecodeLimits {
        &self.limits
    }

    pub fn error(&self, msg: impl Into<String>) -> Error {
        Error::invalid(msg).at(self.offset())
    }

    fn cbor_error(at: u64, e: minicbor::decode::Error) -> Error {
        let msg = if e.is_end_of_input() {
            "CBOR item runs past the end of the manifest".to_string()
        } else {
            format!("invalid CBOR: {e}")
        };
        Error::invalid(msg).at(at)
    }

    /// Runs a minicbor call, turning its error into ours at the item's offset.
    pub fn call<T>(
        &mut self,
        f: impl FnOnce(&mut Decoder<'b>) -> Result<T, minicbor::decode::Error>,
    ) -> Result<T> {
        let at = self.offset();
        f(&mut self.d).map_err(|e| Self::cbor_error(at, e))
    }

    pub fn datatype(&mut self) -> Result<Type> {
        self.call(|d| d.datatype())
    }

    pub fn at_end(&self) -> bool {
        self.d.position() >= self.d.input().len()
    }

    /// Fails unless every byte has been consumed.
    pub fn expect_end(&self, what: &str) -> Result<()> {
        if self.at_end() {
            Ok(())
        } else {
            let left = self.d.input().len() - self.d.position();
            Err(self.error(format!("{left} trailing bytes after the {what}")))
        }
    }

    fn check_depth(&self, depth: usize) -> Result<()> {
        if depth > self.limits.max_depth {
            Err(Error::limit(format!(
                "CBOR nesting deeper than {} levels",
                self.limits.max_depth
            ))
            .at(self.offset()))
        } else {
            Ok(())
        }
    }

    /// The next item's header when it is a small definite-length item of `major` type: its
    /// argument (a length or a value) and the header's size. `None` sends the caller to the
    /// general path, which handles (and reports) everything else. Manifests are almost all
    /// short strings, small maps and integers; decoding those here skips minicbor's type
    /// dispatch, the largest cost of opening a file with many objects.
    fn small_head(&self, major: u8) -> Option<(u64, usize)> {
        let input = self.d.input();
        let pos = self.d.position();
        let initial = *input.get(pos)?;
        if initial >> 5 != major {
            return None;
        }
        let arg = |n: usize| -> Option<u64> {
            let bytes = input.get(pos.checked_add(1)?..pos.checked_add(1 + n)?)?;
            Some(bytes.iter().fold(0u64, |a, &b| a << 8 | u64::from(b)))
        };
        match initial & 0x1f {
            small @ 0..=23 => Some((u64::from(small), 1)),
            24 => Some((arg(1)?, 2)),
            25 => Some((arg(2)?, 3)),
            26 => Some((arg(4)?, 5)),
            27 => Some((arg(8)?, 9)),
            _ => None,
        }
    }

    /// A definite-length text string that lies inside the input and is valid UTF-8.
    fn definite_text(&mut self) -> Option<&'b str> {
        let (len, head) = self.small_head(3)?;
        let input = self.d.input();
        let start = self.d.position().checked_add(head)?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        let text = crate::det::utf8(input.get(start..end)?)?;
        self.d.set_position(end);
        Some(text)
    }

    /// Reads a text string (definite or indefinite), borrowing when possible.
    pub fn text(&mut self, what: &str) -> Result<Cow<'b, str>> {
        if let Some(text) = self.definite_text() {
            return Ok(Cow::Borrowed(text));
        }
        match self.datatype()? {
            Type::String => self.call(|d| d.str()).map(Into::into),
            Type::StringIndef => {
                let mut s = String::new();
                let at = self.offset();
                let iter = self.d.str_iter().map_err(|e| Self::cbor_error(at, e))?;
                for part in iter {
                    s.push_str(
                        part.map_err(|e| Error::invalid(format!("invalid CBOR: {e}")).at(at))?,
                    );
                }
                Ok(s.into())
            }
            t => Err(self.error(format!("{what} must be text, found {t}"))),
        }
    }

    /// Reads an unsigned integer; negative numbers, floats and others are errors naming `what`.
    pub fn uint(&mut self, what: &str) -> Result<u64> {
        if let Some((value, head)) = self.small_head(0) {
            self.d.set_position(self.d.position() + head);
            return Ok(value);
        }
        match self.datatype()? {
            Type::U8 | Type::U16 | Type::U32 | Type::U64 => self.call(|d| d.u64()),
            Type::I8 | Type::I16 | Type::I32 | Type::I64 | Type::Int => Err(self.error(format!(
                "{what} must be an unsigned integer, found a negative number"
            ))),
            t => Err(self.error(format!("{what} must be an unsigned integer, found {t}"))),
        }
    }

    /// Reads an array header; `None` for indefinite length.
    pub fn array_header(&mut self, what: &str) -> Result<Option<u64>> {
        if let Some((len, head)) = self.small_head(4) {
            self.d.set_position(self.d.position() + head);
            return Ok(Some(len));
        }
        match self.datatype()? {
            Type::Array | Type::ArrayIndef => self.call(|d| d.array()),
            t => Err(self.error(format!("{what} must be an array, found {t}"))),
        }
    }

    /// Calls `item` for each element of an array (definite or indefinite).
    pub fn array_items(
        &mut self,
        what: &str,
        mut item: impl FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let len = self.array_header(what)?;
        self.items(len, |r| item(r))
    }

    fn items(
        &mut self,
        len: Option<u64>,
        mut item: impl FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        match len {
            // A declared length is never used to allocate: each item costs at least one byte of
            // input, so the loop ends at the input's end whatever the header claims.
            Some(n) => {
                for _ in 0..n {
                    if self.at_end() {
                        return Err(self.error("CBOR length is larger than the remaining input"));
                    }
                    item(self)?;
                }
            }
            None => loop {
                if self.datatype()? == Type::Break {
                    self.call(|d| d.skip())?;
                    break;
                }
                item(self)?;
            },
        }
        Ok(())
    }

    /// Calls `entry` with each key of a text-keyed map; rejects non-text and duplicate keys.
    /// `entry` must consume the value.
    pub fn map_entries(
        &mut self,
        what: &str,
        mut entry: impl FnMut(&mut Self, Cow<'b, str>, u64) -> Result<()>,
    ) -> Result<()> {
        let mut seen = SeenKeys::default();
        self.map_entries_unchecked(what, |r, key, at| {
            if !seen.insert(key.clone()) {
                return Err(Error::invalid(format!("duplicate key {key:?} in {what}")).at(at));
            }
            entry(r, key, at)
        })
    }

    /// As [`Reader::map_entries`], without the duplicate check: for maps whose caller detects
    /// duplicates more cheaply itself (the objects map, checked after sorting).
    pub fn map_entries_unchecked(
        &mut self,
        what: &str,
        mut entry: impl FnMut(&mut Self, Cow<'b, str>, u64) -> Result<()>,
    ) -> Result<()> {
        self.map_entries_unchecked_sized(what, |_| {}, |r, key, at| entry(r, key, at))
    }

    /// As [`Reader::map_entries_unchecked`], first telling `declared` how many entries the map
    /// declares (`None` for an indefinite-length map). The count comes from the input: use it
    /// only as a hint, bounded by what the remaining input can hold.
    pub fn map_entries_unchecked_sized(
        &mut self,
        what: &str,
        declared: impl FnOnce(Option<u64>),
        mut entry: impl FnMut(&mut Self, Cow<'b, str>, u64) -> Result<()>,
    ) -> Result<()> {
        let len = if let Some((len, head)) = self.small_head(5) {
            self.d.set_position(self.d.position() + head);
            Some(len)
        } else {
            match self.datatype()? {
                Type::Map | Type::MapIndef => self.call(|d| d.map())?,
                t => return Err(self.error(format!("{what} must be a map, found {t}"))),
            }
        };
        declared(len);
        self.items(len, |r| {
            let at = r.offset();
            if let Some(key) = r.definite_text() {
                return entry(r, Cow::Borrowed(key), at);
            }
            let key = match r.datatype()? {
                Type::String | Type::StringIndef => r.text("key")?,
                t => return Err(r.error(format!("keys of {what} must be text, found {t}"))),
            };
            entry(r, key, at)
        })
    }

    /// Skips one item of any kind, within the depth limit.
    pub fn skip(&mut self, depth: usize) -> Result<()> {
        self.value(depth).map(drop)
    }

    /// Charges a map key of `len` bytes, read at `at`, to the values' budget.
    pub fn charge_key(&mut self, len: usize, at: u64) -> Result<()> {
        self.values.key(len).map_err(|e| e.at(at))
    }

    /// Reads one item as a [`Value`], within the depth limit.
    pub fn value(&mut self, depth: usize) -> Result<Value> {
        self.check_depth(depth)?;
        let at = self.offset();
        self.values.node().map_err(|e| e.at(at))?;
        let t = self.datatype()?;
        Ok(match t {
            Type::Bool => Value::Bool(self.call(|d| d.bool())?),
            Type::Null => {
                self.call(|d| d.null())?;
                Value::Null
            }
            Type::U8
            | Type::U16
            | Type::U32
            | Type::U64
            | Type::I8
            | Type::I16
            | Type::I32
            | Type::I64
            | Type::Int => {
                let i = self.call(|d| d.int())?;
                Value::Integer(i128::from(i))
            }
            Type::F16 => Value::Float(self.call(|d| d.f16())?.into()),
            Type::F32 => Value::Float(self.call(|d| d.f32())?.into()),
            Type::F64 => Value::Float(self.call(|d| d.f64())?),
            Type::String | Type::StringIndef => {
                let text = self.text("text")?;
                self.values.payload(text.len()).map_err(|e| e.at(at))?;
                Value::Text(text.into_owned())
            }
            Type::Bytes => {
                let bytes = self.call(|d| d.bytes())?;
                self.values.payload(bytes.len()).map_err(|e| e.at(at))?;
                Value::Bytes(bytes.to_vec())
            }
            Type::BytesIndef => {
                let at = self.offset();
                let mut v = Vec::new();
                let iter = self.d.bytes_iter().map_err(|e| Self::cbor_error(at, e))?;
                for part in iter {
                    let part =
                        part.map_err(|e| Error::invalid(format!("invalid CBOR: {e}")).at(at))?;
                    self.values.payload(part.len()).map_err(|e| e.at(at))?;
                    v.extend_from_slice(part);
                }
                Value::Bytes(v)
            }
            Type::Array | Type::ArrayIndef => {
                let mut v = Vec::new();
                self.array_items("array", |r| {
                    v.push(r.value(depth + 1)?);
                    Ok(())
                })?;
                Value::Array(v)
            }
            Type::Map | Type::MapIndef => {
                let mut m = BTreeMap::new();
                self.map_entries("attribute map", |r, k, key_at| {
                    r.charge_key(k.len(), key_at)?;
                    m.insert(k.into_owned(), r.value(depth + 1)?);
                    Ok(())
                })?;
                Value::Map(m)
            }
            Type::Tag => {
                let tag = self.call(|d| d.tag())?;
                Value::Tag(tag.as_u64(), Box::new(self.value(depth + 1)?))
            }
            t => return Err(self.error(format!("unsupported CBOR item {t}"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(bytes: &[u8]) -> Reader<'_> {
        Reader::new(bytes, 100, DecodeLimits::default())
    }

    /// A definite-length CBOR map of `keys`, each mapped to 0.
    fn map_of(keys: &[String]) -> Vec<u8> {
        let mut out = vec![0xba];
        out.extend_from_slice(&u32::try_from(keys.len()).unwrap().to_be_bytes());
        for k in keys {
            out.push(0x78);
            out.push(u8::try_from(k.len()).unwrap());
            out.extend_from_slice(k.as_bytes());
            out.push(0);
        }
        out
    }

    #[test]
    fn duplicate_checks_of_a_large_map_cost_a_bounded_number_of_comparisons_per_key() {
        const N: usize = 50_000;
        let keys: Vec<String> = (0..N)
            .map(|i| format!("model.layers.attention.projection.{i:08}"))
            .collect();
        let bytes = map_of(&keys);
        count::take();
        let mut n = 0;
        reader(&bytes)
            .map_entries("m", |r, _, _| {
                n += 1;
                r.skip(1)
            })
            .unwrap();
        assert_eq!(n, N);
        // The linear scan compares only the first LINEAR_KEYS + 1 keys (0 + 1 + ... + 8); the
        // keyed hash set compares a key only when a 7-bit tag of its hash matches another's,
        // a small fraction of the keys. A scan over every key, or an unkeyed hash flooded
        // with collisions, would make about N * N / 2 comparisons.
        let compared = count::take();
        assert!(
            compared <= LINEAR_KEYS * (LINEAR_KEYS + 1) / 2 + N / 4,
            "{compared} key comparisons for {N} keys"
        );

        // A duplicate at the end of the large map is still found.
        let mut dup = keys.clone();
        dup.push(keys[0].clone());
        let e = reader(&map_of(&dup))
            .map_entries("m", |r, _, _| r.skip(1))
            .unwrap_err();
        assert!(e.message().contains("duplicate key"), "{e}");
    }

    #[test]
    fn seen_keys_moves_from_the_list_to_the_set_past_linear_keys() {
        let keys: Vec<String> = (0..20).map(|i| format!("key{i}")).collect();
        let mut seen = SeenKeys::default();
        for k in &keys[..LINEAR_KEYS] {
            assert!(seen.insert(Cow::Borrowed(k)));
        }
        assert!(seen.large.is_none());
        assert!(!seen.insert(Cow::Borrowed(&keys[3])));
        for k in &keys[LINEAR_KEYS..] {
            assert!(seen.insert(Cow::Borrowed(k)));
        }
        assert_eq!(seen.large.as_ref().map(HashSet::len), Some(keys.len()));
        for k in &keys {
            assert!(!seen.insert(Cow::Borrowed(k)), "{k}");
            assert!(!seen.insert(Cow::Owned(k.clone())), "{k}");
        }

        // An owned (chunked) key moves a small map to the set, and still finds a borrowed
        // duplicate.
        let mut small = SeenKeys::default();
        assert!(small.insert(Cow::Borrowed(&keys[0])));
        assert!(!small.insert(Cow::Owned(keys[0].clone())));
        assert!(small.large.is_some());
    }

    #[test]
    fn every_head_size_decodes_as_minicbor_does() {
        // "ab" with its length in 0, 1, 2, 4 and 8 extra bytes (the longer ones non-canonical).
        for bytes in [
            &b"\x62ab"[..],
            b"\x78\x02ab",
            b"\x79\x00\x02ab",
            b"\x7a\x00\x00\x00\x02ab",
            b"\x7b\x00\x00\x00\x00\x00\x00\x00\x02ab",
        ] {
            let mut r = reader(bytes);
            assert_eq!(r.text("t").unwrap(), "ab", "{bytes:x?}");
            assert!(r.at_end());
        }
        for (bytes, value) in [
            (&b"\x17"[..], 23u64),
            (b"\x18\xff", 255),
            (b"\x19\x01\x00", 256),
            (b"\x1a\x00\x01\x00\x00", 65536),
            (b"\x1b\xff\xff\xff\xff\xff\xff\xff\xff", u64::MAX),
        ] {
            let mut r = reader(bytes);
            assert_eq!(r.uint("u").unwrap(), value);
            assert!(r.at_end());
            assert_eq!(Decoder::new(bytes).u64().unwrap(), value);
        }
        assert_eq!(reader(b"\x98\x03").array_header("a").unwrap(), Some(3));
        assert_eq!(reader(b"\x9f").array_header("a").unwrap(), None);
    }

    #[test]
    fn what_the_fast_path_declines_still_gets_the_general_errors() {
        // Runs past the end, invalid UTF-8, truncated heads, reserved additional info.
        for (bytes, expect) in [
            (&b"\x63ab"[..], "past the end"),
            (b"\x78", "past the end"),
            (b"\x62\xff\xfe", "invalid CBOR"),
            (b"\x19\x01", "past the end"),
            (b"\x1c", "found 0x1c"),
        ] {
            let mut r = reader(bytes);
            let e = if bytes[0] >> 5 == 3 {
                r.text("t").unwrap_err()
            } else {
                r.uint("u").unwrap_err()
            };
            assert!(e.to_string().contains(expect), "{bytes:x?}: {e}");
            assert_eq!(e.offset(), Some(100), "{bytes:x?}");
        }
        let e = reader(b"\x38\x01").uint("a dimension").unwrap_err();
        assert!(e.to_string().contains("negative"), "{e}");
    }
}
