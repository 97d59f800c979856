//! llama.cpp's split GGUF models (its `gguf-split` tool, and `convert_hf_to_gguf.py
//! --split-max-size`): `<prefix>-00001-of-0000N.gguf` to `<prefix>-0000N-of-0000N.gguf` beside
//! each other, each a whole GGUF file holding some of the tensors. The first holds the model's
//! metadata; every one says which it is (`split.no`, from 0), the first how many there are
//! (`split.count`) and how many tensors all hold (`split.tensors.count`).
//!
//! Opened as one [`ShardedSet`] from any of the files, with the rules llama.cpp's loader
//! applies: every file of the count present, each one's `split.no` its place, no tensor in
//! two files, and as many tensors as the first says. There is no index to say which file
//! holds a name, so every file's header is read when the set opens (a GGUF header is small).
//! The set's metadata is the first file's, without the `split.*` keys: the model's, as a
//! merged file holds it.

use std::path::Path;

use zt_container::{Error, Result};
use zt_manifest::{Attributes, Value};

use super::index::{ShardIndex, MAX_SHARDS};
use super::ShardedSet;
use crate::open::OpenOptions;

/// The keys that say where a file is in a split model (the GGUF writer's splits write them).
pub(crate) const SPLIT_NO: &str = "split.no";
pub(crate) const SPLIT_COUNT: &str = "split.count";
pub(crate) const SPLIT_TENSORS: &str = "split.tensors.count";

/// The file attribute that types a GGUF file's metadata (`files::gguf::VALUE_TYPES_KEY`).
const VALUE_TYPES: &str = "gguf.value_types";

/// A split GGUF file's name, `<prefix>-NNNNN-of-MMMMM.gguf` as llama.cpp writes it (numbers
/// of five digits or more, `1 <= N <= M`, `M >= 2`): its prefix, `N` and `M`.
///
/// ```
/// use std::path::Path;
/// let name = ztensor::gguf_split_name(Path::new("dir/Llama-3-70B-Q4_K_M-00002-of-00003.gguf"));
/// assert_eq!(name, Some(("Llama-3-70B-Q4_K_M".to_owned(), 2, 3)));
/// assert_eq!(ztensor::gguf_split_name(Path::new("model-00001-of-00001.gguf")), None);
/// assert_eq!(ztensor::gguf_split_name(Path::new("model-1-of-3.gguf")), None);
/// ```
pub fn gguf_split_name(path: &Path) -> Option<(String, u32, u32)> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".gguf")?;
    let (head, count) = stem.rsplit_once("-of-")?;
    let (prefix, number) = head.rsplit_once('-')?;
    // llama.cpp's `%05d`: at least five digits, no more leading zeros than that.
    let parse = |digits: &str| -> Option<u32> {
        let n: u32 = digits.parse().ok()?;
        let plain = digits.bytes().all(|b| b.is_ascii_digit());
        (plain && format!("{n:05}") == digits).then_some(n)
    };
    let (number, count) = (parse(number)?, parse(count)?);
    let fits = count >= 2 && (1..=count).contains(&number) && count as usize <= MAX_SHARDS;
    (fits && !prefix.is_empty()).then(|| (prefix.to_owned(), number, count))
}

impl ShardedSet {
    /// The split model `path` is one file of (see [`gguf_split_name`]), every file opened.
    pub(super) fn open_gguf_splits(
        path: &Path,
        prefix: &str,
        count: u32,
        options: OpenOptions,
    ) -> Result<ShardedSet> {
        let index = ShardIndex::gguf_split(prefix, count);
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        for file in &index.shards {
            let split = dir.map_or_else(|| Path::new(file).to_path_buf(), |d| d.join(file));
            if !split.is_file() {
                return Err(Error::invalid(format!(
                    "split {file:?} of the model is missing ({})",
                    split.display()
                ))
                .in_file(path));
            }
        }
        Self::from_index(path, index, options)?
            .with_splits_listed()
            .map_err(|e| e.in_file(path))
    }

    /// The set with every split's tensors listed and checked as llama.cpp's loader checks
    /// them, and the model's metadata.
    pub(super) fn with_splits_listed(mut self) -> Result<Self> {
        let count = self.shards.len();
        let mut entries = Vec::new();
        let mut readers = Vec::with_capacity(count);
        let mut model = Attributes::new();
        let mut expected_tensors = None;
        for (position, shard) in self.shards.iter().enumerate() {
            let reader = self
                .open_reader(shard)
                .map_err(|e| e.in_file(&shard.path))?;
            let fail = |what: String| Error::invalid(what).in_file(&shard.path);
            if reader.version().kind() != "gguf" {
                return Err(fail(format!(
                    "split {} of {count} is a {}, not a GGUF file",
                    position + 1,
                    reader.version()
                )));
            }
            let number = |key: &str| reader.attributes().get(key).and_then(Value::as_u64);
            if number(SPLIT_NO) != Some(position as u64) {
                return Err(fail(format!(
                    "split {} of {count} has {SPLIT_NO} {}, where llama.cpp wants {position}",
                    position + 1,
                    shown(reader.attributes().get(SPLIT_NO)),
                )));
            }
            if position == 0 {
                if number(SPLIT_COUNT) != Some(count as u64) {
                    return Err(fail(format!(
                        "the first split has {SPLIT_COUNT} {}, but its name says {count}",
                        shown(reader.attributes().get(SPLIT_COUNT)),
                    )));
                }
                expected_tensors = number(SPLIT_TENSORS);
                model = without_split_keys(reader.attributes());
            }
            entries
                .try_reserve(reader.len())
                .map_err(|_| Error::out_of_memory("listing a split GGUF model"))?;
            entries.extend(reader.names().map(|n| (n.to_owned(), position as u32)));
            readers.push(reader);
        }
        if expected_tensors != Some(entries.len() as u64) {
            let first = self.shards.first().map(|s| s.path.as_path());
            return Err(Error::invalid(format!(
                "the splits hold {} tensors, but the first split's {SPLIT_TENSORS} says {}",
                entries.len(),
                expected_tensors.map_or_else(|| "nothing".to_owned(), |n| n.to_string()),
            ))
            .in_file(first.unwrap_or(&self.index_path)));
        }
        self.split_model = Some(model);
        self.with_listed(entries, readers, ("tensor", "splits"))
    }
}

/// A metadata value as an error shows it: absent, or its value.
fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| "absent".to_owned(), |v| format!("{v:?}"))
}

/// A split's attributes without the keys that place it in the split: the model's.
fn without_split_keys(attributes: &Attributes) -> Attributes {
    let is_split_key = |k: &str| k.starts_with("split.");
    let mut model: Attributes = attributes
        .iter()
        .filter(|(k, _)| !is_split_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(Value::Map(types)) = model.get_mut(VALUE_TYPES) {
        types.retain(|k, _| !is_split_key(k));
        // A GGUF reader makes the map only for a file with keys.
        if types.is_empty() {
            model.remove(VALUE_TYPES);
        }
    }
    model
}
