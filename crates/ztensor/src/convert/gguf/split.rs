//! A GGUF model written in splits as llama.cpp's `gguf-split --split --split-max-size` writes
//! them: `<prefix>-00001-of-0000N.gguf` ..., tensors in the order given, a new split whenever
//! the next tensor (its bytes padded to 32) would take the split past the size; the model's
//! metadata in the first split only; `split.no` (u16, from 0), `split.count` (u16) and
//! `split.tensors.count` (i32) in every one. A tensor larger than the size is a split of its
//! own (where `gguf-split` refuses one that comes first). The sets reader
//! (`sharded::gguf_split`) opens them as one model, as llama.cpp does.

use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};

use zt_container::{Durability, Error, Result};
use zt_manifest::{Attributes, Value};

use super::{gguf_file, prepare, Planned, Prepared, VALUE_TYPES_KEY};
use crate::sharded::gguf_split::{SPLIT_COUNT, SPLIT_NO, SPLIT_TENSORS};
use crate::view::ObjectView;

/// What `gguf-split` pads each tensor to when it sizes a split (`GGUF_DEFAULT_ALIGNMENT`).
const SIZING_ALIGNMENT: u64 = 32;

/// A model planned in GGUF splits, from the listing alone: which tensors go in which file,
/// and the files' paths; [`GgufSplit::write`] writes them.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let mut w = ztensor::Writer::create(dir.path().join("m.zt"))?;
/// w.set_attribute("general.architecture", "llama");
/// for name in ["a", "b", "c"] {
///     w.add(name, &[64], &[1.0f32; 64])?; // 256 bytes each
/// }
/// w.finish()?;
/// let r = ztensor::open(dir.path().join("m.zt"))?;
/// let views: Vec<_> = r.iter().collect();
/// let prefix = dir.path().join("m");
/// let split = ztensor::convert::GgufSplit::plan(&views, r.attributes(), prefix, 600, false)?;
/// assert_eq!(split.paths()[1], dir.path().join("m-00002-of-00002.gguf"));
/// let written = split.write(ztensor::Durability::Unsynced)?;
/// let set = ztensor::ShardedSet::open(&written[0])?;
/// assert_eq!(set.len(), 3);
/// # Ok(())
/// # }
/// ```
pub struct GgufSplit<'r> {
    tensors: Vec<Planned<'r>>,
    names: Option<Vec<String>>,
    attributes: Attributes,
    splits: Vec<Range<usize>>,
    paths: Vec<PathBuf>,
}

impl<'r> GgufSplit<'r> {
    /// Plans `views` (in that order) and `attributes` as GGUF files of at most
    /// `max_split_bytes` of tensor data each, named `<prefix>-0000i-of-0000N.gguf`; as
    /// [`super::write_gguf_views`] writes one file otherwise (a legacy GGML llama.cpp model in
    /// llama.cpp's form, `densify` for sparse objects).
    pub fn plan(
        views: &[ObjectView<'r>],
        attributes: &Attributes,
        prefix: impl AsRef<Path>,
        max_split_bytes: u64,
        densify: bool,
    ) -> Result<Self> {
        let Prepared {
            tensors,
            names,
            attributes,
        } = prepare(views, attributes, densify)?;
        let mut splits: Vec<Range<usize>> = Vec::new();
        let mut filled = 0u64;
        for (i, t) in tensors.iter().enumerate() {
            let padded =
                t.len.saturating_add(SIZING_ALIGNMENT - 1) / SIZING_ALIGNMENT * SIZING_ALIGNMENT;
            match splits.last_mut() {
                Some(last) if filled.saturating_add(padded) <= max_split_bytes => {
                    last.end = i + 1;
                    filled += padded;
                }
                // The first tensor, or one that would take the split past the size.
                _ => {
                    splits.push(i..i + 1);
                    filled = padded;
                }
            }
        }
        if splits.is_empty() {
            splits.push(0..0);
        }
        let count = u16::try_from(splits.len()).map_err(|_| {
            Error::argument(format!(
                "{} splits of at most {max_split_bytes} bytes: GGUF counts splits in 16 bits",
                splits.len()
            ))
        })?;
        let prefix = prefix.as_ref().as_os_str();
        let paths = (1..=count)
            .map(|i| {
                let mut name = OsString::from(prefix);
                name.push(format!("-{i:05}-of-{count:05}.gguf"));
                PathBuf::from(name)
            })
            .collect();
        Ok(GgufSplit {
            tensors,
            names,
            attributes: attributes.into_owned(),
            splits,
            paths,
        })
    }

    /// The files [`GgufSplit::write`] writes, first to last.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Writes every split, and puts them in place together once the last is written (an
    /// error leaves none of them, and the files they would replace as they were). Returns
    /// their paths.
    pub fn write(mut self, durability: Durability) -> Result<Vec<PathBuf>> {
        let count = self.splits.len();
        zt_container::make_room_for_open_files(count);
        let total = i32::try_from(self.tensors.len())
            .map_err(|_| Error::argument("more tensors than GGUF's split.tensors.count holds"))?;
        let mut written = Vec::with_capacity(count);
        for (no, (range, path)) in self.splits.iter().zip(&self.paths).enumerate() {
            // The model's metadata in the first split only, as llama.cpp reads it (moved
            // there: a vocabulary can be megabytes).
            let mut attributes = match no {
                0 => std::mem::take(&mut self.attributes),
                _ => Attributes::new(),
            };
            let mut types = match attributes.remove(VALUE_TYPES_KEY) {
                Some(Value::Map(types)) => types,
                _ => Default::default(),
            };
            for (key, ty, value) in [
                (SPLIT_NO, "u16", no as i128),
                (SPLIT_COUNT, "u16", count as i128),
                (SPLIT_TENSORS, "i32", i128::from(total)),
            ] {
                attributes.insert(key.to_owned(), Value::Integer(value));
                types.insert(key.to_owned(), Value::Text(ty.to_owned()));
            }
            attributes.insert(VALUE_TYPES_KEY.to_owned(), Value::Map(types));
            let tensors = self.tensors.get(range.clone()).unwrap_or_default();
            let names = self.names.as_deref().and_then(|n| n.get(range.clone()));
            let file = gguf_file(tensors, names, &attributes, path, durability)?;
            written.push(file.release_buffer()?);
        }
        for file in written {
            file.commit()?;
        }
        Ok(self.paths)
    }
}
