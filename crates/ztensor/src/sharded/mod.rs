//! Sharded sets: many files opened as one model through a JSON index (Hugging Face's
//! `*.index.json` convention, over `.safetensors` or `.zt` shards, or any kind we read; and
//! Keras 3's `model.weights.json` over `.weights.h5` shards).
//!
//! - [`index`]: the index's bytes to a checked [`ShardIndex`] (and back, for writers).
//! - [`ShardedSet`]: the index plus the shard files, each opened on the first lookup that
//!   needs it and checked against the index then: a name the index puts elsewhere, a name it
//!   does not list (an extra tensor), or a listed name the shard lacks is an `InvalidFile`
//!   error naming the shard. [`ShardedSet::check`] opens every shard and applies the rules
//!   to the whole set.
//!
//! A set never reads a shard it does not need: looking up one tensor costs the index and that
//! tensor's shard's header. Opened shards stay open (mapped) for the set's life. Keras's index
//! names variable groups, not tensors, so a Keras set lists its shards when it opens. A split
//! GGUF model (llama.cpp's `model-00001-of-00003.gguf` ..., module `gguf_split`) has no index:
//! it opens from any of its files' names, every split listed when it does.

pub(crate) mod gguf_split;
pub mod index;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use zt_container::Source;

/// How much of the next shard is asked for when a shard opens: its start, so the disk is busy
/// with it when the reads move over. The caller waits while the request is submitted (about
/// 0.2 ms per MiB). Until hints went out in pieces the kernel cut this to its read-ahead window
/// (8 MiB on the benchmark machine), and every set benchmark measured that much, so that is
/// what is asked for; the next shard's own read-ahead takes over once it is opened.
const NEXT_SHARD_AHEAD: u64 = 8 << 20;

/// How many shards [`ShardedSet::load_all`] reads at once: enough requests in flight to keep
/// a disk's queue busy, each stream still large and sequential.
pub const CONCURRENT_SHARDS: usize = 4;

use foldhash::fast::RandomState;
use hashbrown::HashMap;
use zt_container::{Error, Result};
use zt_manifest::Attributes;

pub use gguf_split::gguf_split_name;
pub use index::ShardIndex;

use crate::open::OpenOptions;
use crate::reader::Reader;
use crate::view::ObjectView;

/// A sharded checkpoint opened through its JSON index.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// for (file, name) in [("m-00001-of-00002.zt", "a"), ("m-00002-of-00002.zt", "b")] {
///     let mut w = ztensor::Writer::create(dir.path().join(file))?;
///     w.add(name, &[2], &[1.0f32, 2.0])?;
///     w.finish()?;
/// }
/// let index = dir.path().join("m.zt.index.json");
/// std::fs::write(&index, r#"{"metadata": {}, "weight_map":
///     {"a": "m-00001-of-00002.zt", "b": "m-00002-of-00002.zt"}}"#).unwrap();
/// let set = ztensor::ShardedSet::open(&index)?;
/// assert_eq!(set.names().collect::<Vec<_>>(), ["a", "b"]);
/// // Opens m-00002-of-00002.zt only.
/// assert_eq!(&set.object("b")?.read::<f32>()?[..], &[1.0, 2.0]);
/// set.check()?; // every shard opened, every name where the index says
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ShardedSet {
    index_path: PathBuf,
    index: ShardIndex,
    /// Name to its position in `index.entries`, under a per-process keyed hash (the names
    /// come from the file).
    positions: HashMap<String, u32, RandomState>,
    /// For each shard, its path, how many names the index gives it, and its reader once opened.
    shards: Vec<Shard>,
    options: OpenOptions,
    /// For a split GGUF model: the model's metadata (the first split's, without `split.*`).
    split_model: Option<Attributes>,
}

#[derive(Debug)]
struct Shard {
    /// The shard's path, or for a set opened by URL its URL (as a path, for messages).
    path: PathBuf,
    /// For a set opened by URL: the shard's URL.
    url: Option<String>,
    listed: usize,
    /// Shared, so a binding can hand a shard's reader out and keep it past the set.
    reader: OnceLock<std::sync::Arc<Reader>>,
}

/// Whether a path looks like a sharded set's index: a name ending in `.index.json`, or any
/// `.json` (the CLI opens those as sets; [`ShardedSet::open`] itself takes any name).
///
/// ```
/// assert!(ztensor::is_index_path("dir/model.safetensors.index.json".as_ref()));
/// assert!(!ztensor::is_index_path("model.safetensors".as_ref()));
/// ```
pub fn is_index_path(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// Whether a path opens as a set: an index ([`is_index_path`]) or one file of a split GGUF
/// model ([`gguf_split_name`]: `model-00001-of-00003.gguf`, as llama.cpp opens it).
///
/// ```
/// assert!(ztensor::is_set_path("model.safetensors.index.json".as_ref()));
/// assert!(ztensor::is_set_path("m-00002-of-00003.gguf".as_ref()));
/// assert!(!ztensor::is_set_path("m.gguf".as_ref()));
/// ```
pub fn is_set_path(path: &Path) -> bool {
    is_index_path(path) || gguf_split_name(path).is_some()
}

/// How many names the index lists in each shard, and each name's position in the index
/// (a keyed hash: the names come from the file).
fn name_positions(index: &ShardIndex) -> (Vec<usize>, HashMap<String, u32, RandomState>) {
    let mut listed = vec![0usize; index.shards.len()];
    let mut positions =
        HashMap::with_capacity_and_hasher(index.entries.len(), RandomState::default());
    for (i, (name, shard)) in index.entries.iter().enumerate() {
        if let Some(n) = listed.get_mut(*shard as usize) {
            *n += 1;
        }
        positions.insert(name.clone(), i as u32);
    }
    (listed, positions)
}

/// Reads and parses the index at `path` (capped), without looking at its shards.
pub(crate) fn read_index(path: &Path) -> Result<ShardIndex> {
    ShardIndex::parse(&read_capped(path)?)
}

impl ShardedSet {
    /// Opens the set whose index is at `index_path` with default [`OpenOptions`] for the
    /// shards. Reads and checks the index and checks that every shard file it names exists;
    /// opens no shard.
    pub fn open(index_path: impl AsRef<Path>) -> Result<ShardedSet> {
        Self::open_with(index_path, OpenOptions::new())
    }

    /// As [`ShardedSet::open`], opening each shard with `options`. A split GGUF file's path
    /// ([`gguf_split_name`]) opens its model's every split (module `gguf_split`).
    pub fn open_with(index_path: impl AsRef<Path>, options: OpenOptions) -> Result<ShardedSet> {
        let index_path = index_path.as_ref();
        if let Some((prefix, _, count)) = gguf_split_name(index_path) {
            return Self::open_gguf_splits(index_path, &prefix, count, options);
        }
        let at = |e: Error| e.in_file(index_path);
        let index = read_index(index_path).map_err(at)?;
        Self::from_index(index_path, index, options)
    }

    /// A set from an index already parsed, its shards named relative to `index_path`'s folder.
    fn from_index(index_path: &Path, index: ShardIndex, options: OpenOptions) -> Result<Self> {
        let dir = match index_path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let (listed, positions) = name_positions(&index);
        let mut shards = Vec::with_capacity(index.shards.len());
        for (file, listed) in index.shards.iter().zip(listed) {
            let path = dir.join(file);
            // A stat, not an open: a missing shard is reported now, before any lookup.
            if !path.is_file() {
                return Err(Error::invalid(format!(
                    "shard {file:?} named by the index is missing ({})",
                    path.display()
                ))
                .in_file(index_path));
            }
            shards.push(Shard {
                path,
                url: None,
                listed,
                reader: OnceLock::new(),
            });
        }
        ShardedSet {
            index_path: index_path.to_path_buf(),
            index,
            positions,
            shards,
            options,
            split_model: None,
        }
        .with_tensorflow_names()
        .and_then(Self::with_groups_listed)
        .map_err(|e| e.in_file(index_path))
    }

    /// For an index whose every name is a TensorFlow variable's, the set with the names its
    /// shards hold: transformers' TensorFlow models list each variable by its full name
    /// (`tf_bert_model/bert/...:0`) and store it under a shorter one (`bert/...:0`,
    /// [`ShardIndex::tensorflow_stored`]), while other writers of such names (a model
    /// exported from TensorFlow and sharded by hand) store them as listed. The shard of the
    /// first name tells which: opened now, checked against the index as chosen, and kept.
    /// Other sets are returned as they are.
    fn with_tensorflow_names(mut self) -> Result<Self> {
        let Some(stored) = self.index.tensorflow_stored()? else {
            return Ok(self);
        };
        let Some((first, position)) = self.index.entries.first().cloned() else {
            return Ok(self);
        };
        let position = position as usize;
        let shard = self
            .shards
            .get(position)
            .ok_or_else(|| Error::invalid("the index names a shard it does not list"))?;
        let reader = self
            .open_reader(shard)
            .map_err(|e| e.in_file(&shard.path))?;
        if reader.get(&first).is_none() {
            self.index = stored;
            let (listed, positions) = name_positions(&self.index);
            self.positions = positions;
            for (shard, listed) in self.shards.iter_mut().zip(listed) {
                shard.listed = listed;
            }
        }
        if let Some(shard) = self.shards.get(position) {
            self.check_shard(position, shard, &reader)
                .map_err(|e| e.in_file(&shard.path))?;
            let _ = shard.reader.set(std::sync::Arc::new(reader));
        }
        Ok(self)
    }

    /// For an index of Keras's variable groups, the set with its tensors listed: every shard
    /// opened, each of its names put in the set when the index lists its group (the name up
    /// to its last `/`) in that shard. A name whose group the index does not put there, or a
    /// name in two shards, is an `InvalidFile` error. Other sets are returned as they are.
    fn with_groups_listed(self) -> Result<Self> {
        if self.index.groups.is_empty() {
            return Ok(self);
        }
        let mut entries = Vec::new();
        let mut readers = Vec::with_capacity(self.shards.len());
        for (position, shard) in self.shards.iter().enumerate() {
            let reader = self
                .open_reader(shard)
                .map_err(|e| e.in_file(&shard.path))?;
            let groups = &self.index.groups;
            for name in reader.names() {
                let group = name.rsplit_once('/').map_or("", |(g, _)| g);
                let listed_here = groups
                    .binary_search_by(|(g, _)| g.as_bytes().cmp(group.as_bytes()))
                    .ok()
                    .and_then(|i| groups.get(i))
                    .is_some_and(|(_, shards)| shards.contains(&(position as u32)));
                if !listed_here {
                    return Err(Error::invalid(format!(
                        "object {name:?} is in this shard, but the index does not list its \
                         variable group {group:?} in it"
                    ))
                    .in_file(&shard.path));
                }
                entries.push((name.to_owned(), position as u32));
            }
            readers.push(reader);
        }
        self.with_listed(entries, readers, ("object", "shards"))
    }

    /// The set with `entries` (each name and its shard) as its names, in bytewise order, and
    /// `readers` (every shard's, in order) kept: for a set whose shards name its objects,
    /// there being no index to. A name in two shards is an `InvalidFile` error, worded with
    /// `(thing, units)` (`("object", "shards")`: "object "x" is in two shards, ...").
    fn with_listed(
        mut self,
        mut entries: Vec<(String, u32)>,
        readers: Vec<Reader>,
        (thing, units): (&str, &str),
    ) -> Result<Self> {
        entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        if let Some(w) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
            let files = |p: u32| {
                self.index
                    .shards
                    .get(p as usize)
                    .map_or("?", String::as_str)
            };
            return Err(Error::invalid(format!(
                "{thing} {:?} is in two {units}, {:?} and {:?}",
                w[0].0,
                files(w[0].1),
                files(w[1].1)
            )));
        }
        self.index.entries = entries;
        let (listed, positions) = name_positions(&self.index);
        self.positions = positions;
        for ((shard, listed), reader) in self.shards.iter_mut().zip(listed).zip(readers) {
            shard.listed = listed;
            let _ = shard.reader.set(std::sync::Arc::new(reader));
        }
        Ok(self)
    }

    /// Opens the set whose index is at `url` (feature `remote`): one or two requests for the
    /// index (at most [`ShardIndex::MAX_LEN`] bytes), its shards named relative to it and
    /// opened by URL on the first lookup that needs them (a missing shard is reported then,
    /// as `NotFound` naming its URL: checking them all first would cost a request each).
    #[cfg(feature = "remote")]
    pub fn open_url(index_url: &str, options: OpenOptions) -> Result<ShardedSet> {
        let parsed = crate::remote::store::parse(index_url)?;
        let shown = crate::remote::store::redacted(&parsed);
        let at = |e: Error| e.in_file(Path::new(&shown));
        // A split GGUF model's files are named by the one given, no index read.
        let split = gguf_split_name(Path::new(parsed.path()));
        let index = match &split {
            Some((prefix, _, count)) => ShardIndex::gguf_split(prefix, *count),
            None => Self::read_url_index(&parsed, &shown).map_err(at)?,
        };
        let (listed, positions) = name_positions(&index);
        let mut shards = Vec::with_capacity(index.shards.len());
        for (file, listed) in index.shards.iter().zip(listed) {
            // A relative path (checked by the parser) in place of the index's file name.
            let url = crate::remote::store::url_beside(&parsed, file).map_err(at)?;
            let shard_shown = crate::remote::store::redacted(&url);
            shards.push(Shard {
                path: PathBuf::from(shard_shown),
                url: Some(url.to_string()),
                listed,
                reader: OnceLock::new(),
            });
        }
        let set = ShardedSet {
            index_path: PathBuf::from(shown.clone()),
            index,
            positions,
            shards,
            options,
            split_model: None,
        };
        match split {
            Some(_) => set.with_splits_listed().map_err(at),
            None => set
                .with_tensorflow_names()
                .and_then(Self::with_groups_listed)
                .map_err(at),
        }
    }

    /// The index at `parsed` (shown as `shown`), read whole (at most `MAX_INDEX_LEN`
    /// bytes) and parsed.
    #[cfg(feature = "remote")]
    fn read_url_index(parsed: &url::Url, shown: &str) -> Result<ShardIndex> {
        let (store, location) = crate::remote::store::connect(parsed)?;
        let object = crate::remote::RemoteObject::open_downloading_at_most(
            store,
            location,
            shown.to_owned(),
            1,
            index::MAX_INDEX_LEN,
        )?;
        if object.size() > index::MAX_INDEX_LEN {
            return Err(Error::limit(format!(
                "the index is {} bytes, over the {}-byte cap",
                object.size(),
                index::MAX_INDEX_LEN
            )));
        }
        let len = usize::try_from(object.size()).map_err(|_| Error::limit("index too large"))?;
        let mut bytes = vec![0u8; len];
        zt_container::RangeRead::read_exact_at(&object, 0, &mut bytes)
            .map_err(|e| Error::io(e, "reading the index"))?;
        ShardIndex::parse(&bytes)
    }

    /// The index file's path (for a set opened by URL, its URL without credentials).
    pub fn index_path(&self) -> &Path {
        &self.index_path
    }

    /// The index's `metadata`; for a split GGUF model, the model's metadata (the first
    /// split's, without the `split.*` keys).
    pub fn metadata(&self) -> &Attributes {
        self.split_model.as_ref().unwrap_or(&self.index.metadata)
    }

    /// Whether the set is a split GGUF model (opened from one of its files), whose
    /// [`ShardedSet::metadata`] is the model's and whose splits' own attributes differ.
    pub fn is_gguf_split(&self) -> bool {
        self.split_model.is_some()
    }

    /// Every tensor name the index lists, in bytewise order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.index.entries.iter().map(|(n, _)| n.as_str())
    }

    /// How many names the index lists.
    pub fn len(&self) -> usize {
        self.index.entries.len()
    }

    /// Whether the index lists no name.
    pub fn is_empty(&self) -> bool {
        self.index.entries.is_empty()
    }

    /// The shard files' paths, in bytewise order of their names.
    pub fn shard_paths(&self) -> impl Iterator<Item = &Path> {
        self.shards.iter().map(|s| s.path.as_path())
    }

    /// The path of the shard the index puts `name` in, without opening anything.
    pub fn shard_of(&self, name: &str) -> Option<&Path> {
        let shard = self.shard_position(name)?;
        self.shards.get(shard).map(|s| s.path.as_path())
    }

    /// The position (in [`ShardedSet::shard_paths`] order, as [`ShardedSet::reader`] counts
    /// them) of the shard the index puts `name` in, without opening anything; one hash
    /// lookup, whatever the number of shards.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # for (file, name) in [("a.zt", "x"), ("b.zt", "y")] {
    /// #     let mut w = ztensor::Writer::create(dir.path().join(file)).unwrap();
    /// #     w.add(name, &[2], &[1.0f32, 2.0]).unwrap();
    /// #     w.finish().unwrap();
    /// # }
    /// # std::fs::write(dir.path().join("m.index.json"),
    /// #     r#"{"weight_map": {"x": "a.zt", "y": "b.zt"}}"#).unwrap();
    /// let set = ztensor::ShardedSet::open(dir.path().join("m.index.json"))?;
    /// assert_eq!(set.shard_position("y"), Some(1));
    /// assert_eq!(set.shard_position("z"), None);
    /// assert!(set.reader(1)?.names().eq(["y"]));
    /// # Ok::<(), ztensor::Error>(())
    /// ```
    pub fn shard_position(&self, name: &str) -> Option<usize> {
        let i = *self.positions.get(name)?;
        self.index.entries.get(i as usize).map(|(_, s)| *s as usize)
    }

    /// An object by name: opens (once) and checks the shard the index puts it in. A name the
    /// index does not list is `NotFound`.
    pub fn object(&self, name: &str) -> Result<ObjectView<'_>> {
        let shard = self.shard_position(name).ok_or_else(|| {
            let message = format!("no object named {name:?} in the set");
            Error::not_found(crate::suggest::with_suggestion(message, name, self.names()))
        })?;
        let reader = self.reader(shard)?;
        let path = self.shards.get(shard).map(|s| s.path.as_path());
        reader.object(name).map_err(|e| match path {
            Some(p) => e.in_file(p),
            None => e,
        })
    }

    /// The reader of shard `position` (in [`ShardedSet::shard_paths`] order), opened and
    /// checked against the index on first use.
    pub fn reader(&self, position: usize) -> Result<&Reader> {
        self.shared_reader(position).map(|r| &**r)
    }

    /// As [`ShardedSet::reader`], shared: for holders that outlive a borrow of the set (the
    /// Python bindings hand shard readers to arrays that keep them alive).
    pub fn shared_reader(&self, position: usize) -> Result<&std::sync::Arc<Reader>> {
        self.open_shard(position, true)
    }

    /// The reader of shard `position`, opened on first use; `hint_next` asks the disk for the
    /// start of the next shard (a set read shard after shard; not when each shard has its
    /// own reading thread).
    fn open_shard(&self, position: usize, hint_next: bool) -> Result<&std::sync::Arc<Reader>> {
        let shard = self.shards.get(position).ok_or_else(|| {
            Error::argument(format!(
                "shard {position} of a set of {}",
                self.shards.len()
            ))
        })?;
        if let Some(r) = shard.reader.get() {
            return Ok(r);
        }
        let reader = self
            .open_reader(shard)
            .map_err(|e| e.in_file(&shard.path))?;
        self.check_shard(position, shard, &reader)
            .map_err(|e| e.in_file(&shard.path))?;
        // A set is mostly read shard after shard: the next one starts coming in from the disk
        // while this one is read.
        if let Some(next) = self.shards.get(position + 1).filter(|_| hint_next) {
            if next.url.is_none() && next.reader.get().is_none() {
                Source::will_need_file(&next.path, NEXT_SHARD_AHEAD);
            }
        }
        // Two threads may open the same shard at once; the first one kept wins.
        let _ = shard.reader.set(std::sync::Arc::new(reader));
        shard
            .reader
            .get()
            .ok_or_else(|| Error::invalid("a shard reader vanished"))
    }

    /// Opens `shard` with the set's options, by path or URL, unchecked.
    fn open_reader(&self, shard: &Shard) -> Result<Reader> {
        match &shard.url {
            #[cfg(feature = "remote")]
            Some(url) => self.options.open_url(url),
            #[cfg(not(feature = "remote"))]
            Some(_) => Err(Error::unsupported("a URL without the remote feature")),
            None => self.options.open(&shard.path),
        }
    }

    /// Every name in the shard must be one the index puts there, and the shard must hold
    /// every name the index gives it.
    fn check_shard(&self, position: usize, shard: &Shard, reader: &Reader) -> Result<()> {
        for name in reader.names() {
            match self.shard_position(name) {
                Some(p) if p == position => {}
                Some(p) => {
                    let other = self.index.shards.get(p).map_or("?", String::as_str);
                    return Err(Error::invalid(format!(
                        "object {name:?} is in this shard, but the index puts it in {other:?} \
                         (a name may be in one shard only)"
                    )));
                }
                None => {
                    return Err(Error::invalid(format!(
                        "object {name:?} is in this shard, but the index does not list it"
                    )))
                }
            }
        }
        // Every name here is listed for this shard and names in a file are unique, so equal
        // counts mean the shard holds all of them.
        if reader.len() != shard.listed {
            let missing = self
                .index
                .entries
                .iter()
                .find(|(n, s)| *s as usize == position && reader.get(n).is_none())
                .map_or("?", |(n, _)| n.as_str());
            return Err(Error::invalid(format!(
                "the index puts object {missing:?} in this shard, which does not hold it"
            )));
        }
        Ok(())
    }

    /// Opens every shard and checks the whole set against the index: every listed name
    /// where the index says, no name twice, no name the index does not list.
    pub fn check(&self) -> Result<()> {
        for position in 0..self.shards.len() {
            self.reader(position)?;
        }
        Ok(())
    }

    /// Opens every shard and reads the set into memory as a loader that wants all of it does:
    /// four shards at once (`CONCURRENT_SHARDS`), each front to back on its own thread in large
    /// sequential requests, into the page cache and this process's maps (no copy: reads of
    /// the set's objects then cost no disk wait; parts already in the page cache are left for
    /// the reads to map, as mapping them ahead costs as much). `ready(position)`
    /// is called from the reading thread as each shard's bytes are in; [`ShardedSet::load_each`]
    /// hands over each object instead.
    ///
    /// What is read in this way is bounded: by the memory budget of the set's
    /// [`OpenOptions`] when one is set, else by half the machine's memory. Shards that do not
    /// fit in what is left of it are opened and checked, and read when their objects are.
    /// Shards opened unmapped or remotely are opened and checked only (their reads fetch what
    /// they need). Returns the first error opening or checking a shard; the other threads
    /// stop at their next step of 32 MiB.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let shard = |name: &str, t: &str| {
    /// #     let mut w = ztensor::Writer::create(dir.path().join(name)).unwrap();
    /// #     w.add(t, &[2], &[1.0f32, 2.0]).unwrap();
    /// #     w.finish().unwrap();
    /// # };
    /// # shard("a.zt", "x");
    /// # shard("b.zt", "y");
    /// # std::fs::write(dir.path().join("m.index.json"),
    /// #     r#"{"weight_map": {"x": "a.zt", "y": "b.zt"}}"#).unwrap();
    /// let set = ztensor::ShardedSet::open(dir.path().join("m.index.json"))?;
    /// let done = std::sync::atomic::AtomicUsize::new(0);
    /// set.load_all(|_shard| {
    ///     done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    /// })?;
    /// assert_eq!(done.into_inner(), 2);
    /// assert_eq!(set.object("y")?.read::<f32>()?.as_ref(), &[1.0, 2.0]);
    /// # Ok::<(), ztensor::Error>(())
    /// ```
    pub fn load_all(&self, ready: impl Fn(usize) + Sync) -> Result<()> {
        self.load(
            &|_, _| {},
            &ready,
            &AtomicBool::new(false),
            CONCURRENT_SHARDS,
        )
    }

    /// As [`ShardedSet::load_all`], handing each object to `ready(shard position, object)` as
    /// soon as its bytes are in, from the thread reading its shard (objects of one shard in
    /// the order they lie in it; shards interleave): a loader copies the first tensors to
    /// their device while the disk still reads the rest. Every object of the set is handed
    /// over once when this returns `Ok`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # for (file, name) in [("a.zt", "x"), ("b.zt", "y")] {
    /// #     let mut w = ztensor::Writer::create(dir.path().join(file)).unwrap();
    /// #     w.add(name, &[2], &[1.0f32, 2.0]).unwrap();
    /// #     w.finish().unwrap();
    /// # }
    /// # std::fs::write(dir.path().join("m.index.json"),
    /// #     r#"{"weight_map": {"x": "a.zt", "y": "b.zt"}}"#).unwrap();
    /// let set = ztensor::ShardedSet::open(dir.path().join("m.index.json"))?;
    /// let sums = std::sync::Mutex::new(Vec::new());
    /// set.load_each(|_shard, object| {
    ///     let sum: f32 = object.read::<f32>().unwrap().iter().sum();
    ///     sums.lock().unwrap().push((object.name().to_owned(), sum));
    /// })?;
    /// let mut sums = sums.into_inner().unwrap();
    /// sums.sort_by(|a, b| a.0.cmp(&b.0));
    /// assert_eq!(sums, [("x".to_owned(), 3.0), ("y".to_owned(), 3.0)]);
    /// # Ok::<(), ztensor::Error>(())
    /// ```
    pub fn load_each(&self, ready: impl Fn(usize, ObjectView<'_>) + Sync) -> Result<()> {
        self.load(&ready, &|_| {}, &AtomicBool::new(false), CONCURRENT_SHARDS)
    }

    /// Runs `work` while the set is read into memory beside it, as [`ShardedSet::load_all`]
    /// reads it (shards at once, each front to back, within the same memory bound), and
    /// returns what `work` returns. For a caller that reads every object in an order of its
    /// own (a converter writes in name order, which jumps between shards): its reads then
    /// find their bytes in instead of each waiting on the disk. The reading stops as soon as
    /// `work` returns or panics, at its next step of 32 MiB, so a `work` that fails early
    /// does not wait for the rest of the set. Errors opening a shard are left to `work`'s own
    /// reads, which meet them too.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # for (file, name) in [("a.zt", "x"), ("b.zt", "y")] {
    /// #     let mut w = ztensor::Writer::create(dir.path().join(file)).unwrap();
    /// #     w.add(name, &[2], &[1.0f32, 2.0]).unwrap();
    /// #     w.finish().unwrap();
    /// # }
    /// # std::fs::write(dir.path().join("m.index.json"),
    /// #     r#"{"weight_map": {"x": "a.zt", "y": "b.zt"}}"#).unwrap();
    /// let set = ztensor::ShardedSet::open(dir.path().join("m.index.json"))?;
    /// let total = set.with_read_ahead(|| -> ztensor::Result<f32> {
    ///     let mut total = 0.0;
    ///     for object in set.objects()? {
    ///         total += object.read::<f32>()?.iter().sum::<f32>();
    ///     }
    ///     Ok(total)
    /// })?;
    /// assert_eq!(total, 6.0);
    /// # Ok::<(), ztensor::Error>(())
    /// ```
    pub fn with_read_ahead<T>(&self, work: impl FnOnce() -> T) -> T {
        /// Tells the reading threads to stop when dropped: after `work` returns, and while a
        /// panic of `work` unwinds (the scope would otherwise wait for the whole set).
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            // Without a thread, the work runs as it would have: slower, not wrong.
            let _reading = std::thread::Builder::new()
                .name("zt-set-ahead".into())
                .spawn_scoped(scope, || {
                    let _ = self.load(&|_, _| {}, &|_| {}, &stop, CONCURRENT_SHARDS);
                });
            let _stop_when_done = StopOnDrop(&stop);
            work()
        })
    }

    /// Reads the set into the page cache and its maps on a thread of its own, one shard after
    /// another in the index's order, each front to back, and returns at once. For a loader
    /// that takes every tensor at once as a view (ztio's numpy arrays over the set's maps,
    /// torch's tensors over maps of its own) and then works through them in that order:
    /// its work follows the one stream as it comes in, as it follows a single file's
    /// read-ahead, instead of waiting for every byte first ([`ShardedSet::load_each`]) or
    /// for its next shard among four read at once (a probe, in turns: a cold 1 GiB set of five
    /// shards into numpy, each byte touched, 0.59 s this way, 0.72 s with four shards at
    /// once, 0.80 s waiting for the bytes first). Reads through views of this set should
    /// then tell the shards' own read-ahead nothing ([`ObjectView::read_ahead_elsewhere`]),
    /// which would only read beside the stream. Bounded as `load_all` is; errors are left
    /// to the caller's own reads, which meet them too. The thread holds the set until done.
    /// Returns whether it was started.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # for (file, name) in [("a.zt", "x"), ("b.zt", "y")] {
    /// #     let mut w = ztensor::Writer::create(dir.path().join(file)).unwrap();
    /// #     w.add(name, &[2], &[1.0f32, 2.0]).unwrap();
    /// #     w.finish().unwrap();
    /// # }
    /// # std::fs::write(dir.path().join("m.index.json"),
    /// #     r#"{"weight_map": {"x": "a.zt", "y": "b.zt"}}"#).unwrap();
    /// let set = std::sync::Arc::new(ztensor::ShardedSet::open(dir.path().join("m.index.json"))?);
    /// assert!(set.load_all_in_background());
    /// // Reads go on as ever, their bytes in or not yet.
    /// let y = set.object("y")?.read_ahead_elsewhere();
    /// assert_eq!(y.read::<f32>()?.as_ref(), &[1.0, 2.0]);
    /// # Ok::<(), ztensor::Error>(())
    /// ```
    pub fn load_all_in_background(self: &std::sync::Arc<Self>) -> bool {
        let set = std::sync::Arc::clone(self);
        std::thread::Builder::new()
            .name("zt-load-set".into())
            .spawn(move || {
                // A shard that fails fails the caller's own read of it as well.
                let _ = set.load(&|_, _| {}, &|_| {}, &AtomicBool::new(false), 1);
            })
            .is_ok()
    }

    /// Reads the set as [`ShardedSet::load_all`] says, `threads` shards at once; `stop` (also
    /// set here on the first error) ends every reading thread at its next step.
    fn load(
        &self,
        object_ready: &(dyn Fn(usize, ObjectView<'_>) + Sync),
        shard_ready: &(dyn Fn(usize) + Sync),
        stop: &AtomicBool,
        threads: usize,
    ) -> Result<()> {
        let budget = self.options.limits_ref().memory_budget.unwrap_or_else(|| {
            zt_container::internal::physical_memory().map_or(u64::MAX, |m| m / 2)
        });
        let next = AtomicUsize::new(0);
        let loaded = AtomicU64::new(0);
        let first_error = std::sync::Mutex::new(None);
        let work = || {
            while !stop.load(Ordering::Relaxed) {
                let position = next.fetch_add(1, Ordering::Relaxed);
                if position >= self.shards.len() {
                    return;
                }
                match self.open_shard(position, false) {
                    Ok(reader) => {
                        let len = reader.source().len();
                        // Claim this shard's share of the budget before reading it; a shard
                        // that does not fit claims nothing, so a smaller one after it may.
                        let fits = loaded
                            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                                l.checked_add(len).filter(|&total| total <= budget)
                            })
                            .is_ok();
                        if reader
                            .load_in_file_order(fits, stop, |object| object_ready(position, object))
                        {
                            shard_ready(position);
                        }
                    }
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        if let Ok(mut first) = first_error.lock() {
                            first.get_or_insert(e);
                        }
                    }
                }
            }
        };
        let threads = threads.clamp(1, self.shards.len().max(1));
        std::thread::scope(|scope| {
            for _ in 1..threads {
                scope.spawn(work);
            }
            work();
        });
        match first_error.into_inner() {
            Ok(Some(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Every object of the set, in bytewise name order (opens every shard).
    pub fn objects(&self) -> Result<Vec<ObjectView<'_>>> {
        self.check()?;
        self.names().map(|n| self.object(n)).collect()
    }
}

/// Reads a file of at most [`index::MAX_INDEX_LEN`] bytes.
fn read_capped(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| Error::io(e, "opening the index"))?;
    let mut bytes = Vec::new();
    file.take(index::MAX_INDEX_LEN + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(e, "reading the index"))?;
    if bytes.len() as u64 > index::MAX_INDEX_LEN {
        return Err(Error::limit(format!(
            "the index is over the {}-byte cap",
            index::MAX_INDEX_LEN
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set of two shards, `a.zt` (x) and `b.zt` (y), in a fresh folder.
    fn two_shards(dir: &Path) -> ShardedSet {
        for (file, name) in [("a.zt", "x"), ("b.zt", "y")] {
            let mut w = crate::Writer::create(dir.join(file)).unwrap();
            w.add(name, &[2], &[1.0f32, 2.0]).unwrap();
            w.finish().unwrap();
        }
        let index = dir.join("m.index.json");
        std::fs::write(&index, r#"{"weight_map": {"x": "a.zt", "y": "b.zt"}}"#).unwrap();
        ShardedSet::open(index).unwrap()
    }

    #[test]
    fn a_load_told_to_stop_hands_over_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let set = two_shards(dir.path());
        let handed = AtomicUsize::new(0);
        let count = |_: usize, _: ObjectView<'_>| {
            handed.fetch_add(1, Ordering::Relaxed);
        };
        set.load(&count, &|_| {}, &AtomicBool::new(true), CONCURRENT_SHARDS)
            .unwrap();
        assert_eq!(handed.load(Ordering::Relaxed), 0);
        set.load(&count, &|_| {}, &AtomicBool::new(false), CONCURRENT_SHARDS)
            .unwrap();
        assert_eq!(handed.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn work_beside_the_read_ahead_sees_its_own_error() {
        let dir = tempfile::tempdir().unwrap();
        let set = two_shards(dir.path());
        let got: Result<()> = set.with_read_ahead(|| Err(Error::argument("stop here")));
        assert!(got.unwrap_err().to_string().contains("stop here"));
        // And the set reads as before once the read-ahead has stopped.
        assert_eq!(
            &set.object("y").unwrap().read::<f32>().unwrap()[..],
            &[1.0, 2.0]
        );
    }

    #[test]
    fn a_panic_in_the_work_reaches_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let set = two_shards(dir.path());
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            set.with_read_ahead(|| panic!("the work failed"))
        }));
        let message = unwound.unwrap_err();
        assert_eq!(message.downcast_ref::<&str>(), Some(&"the work failed"));
    }

    #[test]
    fn shards_in_folders_below_the_index_open() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("part")).unwrap();
        for (file, name) in [("part/a.zt", "x"), ("b.zt", "y")] {
            let mut w = crate::Writer::create(dir.path().join(file)).unwrap();
            w.add(name, &[2], &[1.0f32, 2.0]).unwrap();
            w.finish().unwrap();
        }
        let index = dir.path().join("m.index.json");
        std::fs::write(&index, r#"{"weight_map": {"x": "part/a.zt", "y": "b.zt"}}"#).unwrap();
        let set = ShardedSet::open(index).unwrap();
        let x = set.object("x").unwrap();
        assert_eq!(&x.read::<f32>().unwrap()[..], &[1.0, 2.0]);
        assert!(set.shard_of("x").unwrap().ends_with("part/a.zt"));
    }
}
