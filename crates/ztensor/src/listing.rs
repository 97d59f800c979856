//! The shared vocabulary of a listed file: what every file-kind module in [`crate::files`]
//! hands back ([`Listing`]), the caps it works under ([`Limits`]), and the steps every kind
//! shares (sorting by name, refusing duplicates and overlaps, the name index).
//!
//! The file-kind modules use this module; it never uses them, and it knows nothing of
//! [`crate::Reader`].

use std::borrow::Cow;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use zt_container::{check_overlaps, BlobRange, Error, Result};
use zt_formats::DEFAULT_MAX_DECOMPRESSED;
use zt_manifest::{Attributes, DecodeLimits};

use crate::model::{FileVersion, ObjectInfo, ShardInfo};

/// Caps that bound what a hostile file can make the reader do.
///
/// ```
/// let limits = ztensor::Limits { max_decompressed_len: 1 << 20, ..Default::default() };
/// let options = ztensor::OpenOptions::new().limits(limits);
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest manifest or index accepted (the spec's 1 GiB by default).
    pub max_manifest_len: u64,
    /// Largest decompressed size of one component (4 GiB by default).
    pub max_decompressed_len: u64,
    /// Manifest nesting depth and rank caps, and the cap on what a file's attribute values
    /// take in memory (see [`Limits::decode_limits`]).
    pub decode: DecodeLimits,
    /// What one read may allocate for a copy larger than what the file stores for it (a
    /// broadcast or strided view materialized): `None` (the default) is twice the bytes
    /// stored for the read plus 64 MiB ([`Limits::read_budget`]). Decompression has its own
    /// cap, [`Limits::max_decompressed_len`].
    pub memory_budget: Option<u64>,
}

/// What the default memory budget adds to twice the stored bytes.
pub const BUDGET_ALLOWANCE: u64 = 64 << 20;

impl Limits {
    /// The memory budget of a read of `stored` bytes: [`Limits::memory_budget`] if set,
    /// else `2 * stored + 64 MiB`.
    ///
    /// ```
    /// let limits = ztensor::Limits::default();
    /// assert_eq!(limits.read_budget(24), 48 + (64 << 20));
    /// let raised = ztensor::Limits { memory_budget: Some(8 << 30), ..Default::default() };
    /// assert_eq!(raised.read_budget(24), 8 << 30);
    /// ```
    pub fn read_budget(&self, stored: u64) -> u64 {
        self.memory_budget
            .unwrap_or_else(|| stored.saturating_mul(2).saturating_add(BUDGET_ALLOWANCE))
    }
}

/// What listing a file may take by default, however small the file (see
/// [`Limits::listing_budget`]).
pub const MIN_LISTING_BUDGET: u64 = 256 << 20;

impl Limits {
    /// All of `source`, a file that is listed from its bytes read whole (a TensorFlow
    /// checkpoint's index, a distributed checkpoint's `.metadata`, an OpenVINO model's XML),
    /// if it is at most [`Limits::max_manifest_len`] bytes; `what` names it in the error.
    #[cfg(any(feature = "tensorflow", feature = "openvino", feature = "torch-dcp"))]
    pub(crate) fn read_whole<'s>(
        &self,
        source: &'s zt_container::Source,
        what: &str,
    ) -> Result<Cow<'s, [u8]>> {
        let len = source.len();
        if len > self.max_manifest_len {
            return Err(Error::limit(format!(
                "{what} is {len} bytes, over the cap of {} (Limits::max_manifest_len)",
                self.max_manifest_len
            )));
        }
        source.read_at(0, len)
    }

    /// What listing a file of `file_len` bytes may take in memory (objects, names,
    /// attributes), for kinds whose objects can each be written in a few bytes (ONNX, HDF5):
    /// [`Limits::memory_budget`] if set, else the larger of [`Limits::read_budget`] of the
    /// file and [`MIN_LISTING_BUDGET`].
    ///
    /// ```
    /// let limits = ztensor::Limits::default();
    /// assert_eq!(limits.listing_budget(1000), 256 << 20);
    /// ```
    pub fn listing_budget(&self, file_len: u64) -> u64 {
        self.memory_budget
            .unwrap_or_else(|| self.read_budget(file_len).max(MIN_LISTING_BUDGET))
    }

    /// The caps the manifest and metadata decoders work under: [`Limits::decode`], with its
    /// cap on attribute values ([`DecodeLimits::max_value_bytes`]) raised to
    /// [`Limits::memory_budget`] when that is set higher.
    ///
    /// ```
    /// let raised = ztensor::Limits { memory_budget: Some(8 << 30), ..Default::default() };
    /// assert_eq!(raised.decode_limits().max_value_bytes, 8 << 30);
    /// assert_eq!(ztensor::Limits::default().decode_limits().max_value_bytes, 256 << 20);
    /// ```
    pub fn decode_limits(&self) -> DecodeLimits {
        let raised = self.memory_budget.unwrap_or(0);
        DecodeLimits {
            max_value_bytes: self.decode.max_value_bytes.max(raised),
            ..self.decode
        }
    }

    /// What listing one object named `name` costs, for [`Limits::listing_budget`].
    #[cfg(any(
        feature = "onnx",
        feature = "hdf5",
        feature = "flax",
        feature = "tensorflow",
        feature = "pickle",
        feature = "paddle",
        feature = "tflite",
        feature = "caffe",
        feature = "openvino",
        feature = "ggml"
    ))]
    pub(crate) fn listing_cost(name: &str) -> u64 {
        // What one listed object costs beyond its `ObjectInfo` and its name, roughly: a few
        // attributes (a B-tree node), a name table's entry and the list's spare capacity.
        const LISTED_OVERHEAD: u64 = 1024;
        2 * std::mem::size_of::<ObjectInfo>() as u64 + LISTED_OVERHEAD + 2 * name.len() as u64
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_manifest_len: zt_container::layout::MAX_MANIFEST_LEN,
            max_decompressed_len: DEFAULT_MAX_DECOMPRESSED,
            decode: DecodeLimits::default(),
            memory_budget: None,
        }
    }
}

/// What a file-kind module hands back: the file's kind, its attributes, and its objects
/// validated, sorted by name with each name once, and indexed.
pub(crate) struct Listing {
    pub version: FileVersion,
    pub attributes: Attributes,
    /// Sorted by name, each name once.
    pub objects: Vec<ObjectInfo>,
    /// The name index over `objects`.
    pub index: NameIndex,
    /// The shards a v2 file's parts live in, opened (a component's `file` n is entry n - 1).
    pub shards: Vec<(ShardInfo, zt_container::Source)>,
    /// A v2 file's manifest hash, as checked at open.
    pub manifest_hash: Option<u64>,
    /// The entries of zip archives (`.npz`, PyTorch), each with the file that holds it (0 the
    /// opened file, `n` shard `n`: a distributed checkpoint's chunks are archives in its data
    /// files), whose CRC-32s checked reads and `verify` check.
    pub zip_entries: Vec<(u32, crate::zip::Entry)>,
    /// The file declares a metadata map that is empty (safetensors' `"__metadata__":{}`),
    /// which safetensors tells from a file without one.
    pub empty_metadata: bool,
}

impl Listing {
    /// A listing of objects that are known to carry each name once (the file-kind module
    /// refused duplicates itself): sorts them and indexes them.
    pub fn of_unique(
        version: FileVersion,
        attributes: Attributes,
        mut objects: Vec<ObjectInfo>,
    ) -> Self {
        let sorted = sort_and_index(&mut objects, None, None::<fn()>, false);
        // The caller refused names given twice, so `Err` does not happen; its index would
        // serve all the same.
        let index = sorted.unwrap_or_else(|(_, index)| index);
        Listing::new(version, attributes, objects, index)
    }

    /// A listing of one file (no shards, no manifest hash: v2 sets those on the result).
    fn new(
        version: FileVersion,
        attributes: Attributes,
        objects: Vec<ObjectInfo>,
        index: NameIndex,
    ) -> Self {
        Listing {
            version,
            attributes,
            objects,
            index,
            shards: Vec::new(),
            manifest_hash: None,
            zip_entries: Vec::new(),
            empty_metadata: false,
        }
    }
}

/// Sorts `objects` by name and indexes them, running `beside` (a check over what was
/// collected from the objects as listed) meanwhile. `hashes` are the names' hashes in the
/// objects' order, when the caller took them as it built the objects (each object was in
/// cache then). A name given twice is `Err` with its position in the sorted list, beside the
/// index.
///
/// A long list uses both cores. When the file usually lists its objects in name order
/// (`likely_in_order`: v1.x), the index of the list as it stands is built beside `beside`
/// and a look at the order, and that is all for a list in order. Otherwise (a v2 manifest
/// is in key order, by name length first), `beside` and the hashes run beside the sort of
/// the objects' positions by name, then the index of the sorted hashes beside the moves of
/// the objects into name order.
fn sort_and_index(
    objects: &mut [ObjectInfo],
    mut hashes: Option<(RandomState, Vec<u64>)>,
    mut beside: Option<impl FnOnce() + Send>,
    likely_in_order: bool,
) -> std::result::Result<NameIndex, (usize, NameIndex)> {
    let listed: &[ObjectInfo] = objects;
    let long = listed.len() >= PARALLEL_FINISH_MIN_OBJECTS;
    let hash_all = |hashes: Option<(RandomState, Vec<u64>)>| {
        hashes.unwrap_or_else(|| {
            let state = RandomState::default();
            let hashes = listed.iter().map(|o| state.hash_one(&o.name)).collect();
            (state, hashes)
        })
    };
    let has_beside = beside.is_some();
    let mut run_beside = || {
        if let Some(beside) = beside.take() {
            beside();
        }
    };
    if likely_in_order {
        // Index the list as it stands while the second core runs `beside` and looks at the
        // order: for a list in name order, that is all.
        let mut in_order = false;
        let (state, all, index) = join_here(
            long,
            || {
                let (state, all) = hash_all(hashes.take());
                let index = NameIndex::from_hashes(state.clone(), &all);
                (state, all, index)
            },
            || {
                run_beside();
                in_order = names_strictly_increasing(listed);
            },
        );
        if in_order {
            return Ok(index);
        }
        hashes = Some((state, all));
    } else if names_strictly_increasing(listed) {
        let index = || {
            let (state, all) = hash_all(hashes.take());
            NameIndex::from_hashes(state, &all)
        };
        // With nothing to run beside it, the index is built alone: handing even an empty
        // task to the pool made the safetensors open slower (docs/decisions.md).
        let parallel = long && has_beside;
        return Ok(join_here(parallel, index, run_beside));
    }
    // Room for the positions is taken here, not on the worker that fills it (see `join_here`).
    let mut order: Vec<u32> = Vec::with_capacity(listed.len());
    let (state, hashes) = join_here(
        long,
        || {
            run_beside();
            hash_all(hashes.take())
        },
        || sort_positions(listed, &mut order),
    );
    let name = |i: u32| listed.get(i as usize).map_or("", |o| o.name.as_str());
    let twice = order
        .windows(2)
        .position(|w| matches!(w, [a, b] if name(*a) == name(*b)));
    let sorted: Vec<u64> = order
        .iter()
        .map(|&i| hashes.get(i as usize).copied().unwrap_or(0))
        .collect();
    drop(hashes);
    let index = join_here(
        long,
        || NameIndex::from_hashes(state, &sorted),
        || move_into_order(objects, &mut order),
    );
    match twice {
        Some(i) => Err((i, index)),
        None => Ok(index),
    }
}

/// Runs `here` on this thread and, when `parallel`, `there` on a worker of the pool at the
/// same time; returns `here`'s result once both are done.
///
/// Callers keep what allocates on this thread: its allocations come from this thread's
/// heap, which reuses what earlier work here freed, where a worker's come from an arena of
/// its own.
fn join_here<A>(parallel: bool, here: impl FnOnce() -> A, there: impl FnOnce() + Send) -> A {
    if !parallel {
        there();
        return here();
    }
    crate::pool::in_place_scope(|scope| {
        scope.spawn(|_| there());
        here()
    })
}

/// Finds an object's position by name: a hash table of positions in the sorted object list,
/// with no owned keys (the names stay in the objects).
///
/// The hash is keyed per process ([`RandomState`]), so a file cannot choose names that all
/// land in one bucket: with a fixed hash, 200,000 such names made an open take 30 times
/// longer, and the time grew with the square of the count.
#[derive(Debug, Default)]
pub(crate) struct NameIndex {
    table: HashTable<u32>,
    state: RandomState,
}

impl NameIndex {
    /// The index of objects whose names have these hashes under `state`, in order.
    fn from_hashes(state: RandomState, hashes: &[u64]) -> Self {
        let mut table = HashTable::with_capacity(hashes.len());
        for (i, &h) in hashes.iter().enumerate() {
            // With the capacity reserved, the table never rehashes and never calls this.
            let rehash = |&j: &u32| hashes.get(j as usize).copied().unwrap_or(0);
            table.insert_unique(h, i as u32, rehash);
        }
        NameIndex { table, state }
    }

    /// The hash a name is indexed under.
    pub fn hash(&self, name: &str) -> u64 {
        self.state.hash_one(name)
    }

    /// The position of the object named `name`.
    pub fn find(&self, objects: &[ObjectInfo], name: &str) -> Option<usize> {
        let h = self.hash(name);
        let at = |&i: &u32| objects.get(i as usize).is_some_and(|o| o.name == name);
        self.table.find(h, at).map(|&i| i as usize)
    }
}

/// Sorts objects by name and returns a name that occurs twice, if any. Real files list their
/// objects sorted already, so this is usually one pass of comparisons that also finds
/// duplicates; only an unsorted list is sorted and then checked.
#[cfg(any(
    test,
    feature = "gguf",
    feature = "hdf5",
    feature = "torch",
    feature = "flax",
    feature = "tensorflow",
    feature = "pickle"
))]
pub(crate) fn sort_by_name(objects: &mut [ObjectInfo]) -> Option<&str> {
    if names_strictly_increasing(objects) {
        return None;
    }
    let mut order = Vec::new();
    sort_positions(objects, &mut order);
    let name = |i: u32| objects.get(i as usize).map_or("", |o| o.name.as_str());
    let twice = order
        .windows(2)
        .position(|w| matches!(w, [a, b] if name(*a) == name(*b)));
    move_into_order(objects, &mut order);
    twice.and_then(|i| objects.get(i)).map(|o| o.name.as_str())
}

/// Fills `order` with the positions of `objects` in name order.
fn sort_positions(objects: &[ObjectInfo], order: &mut Vec<u32>) {
    // Objects are large (hundreds of bytes): sorting them directly moves each one many
    // times. Sort their positions instead, then move each object once into its place.
    // The names are gathered first (16 bytes each, in one pass): comparing through the
    // objects took a cache line of a different object for each name, and sorting 100,000
    // positions that way took 6-7 ms where this takes 3.5-4.
    let names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
    let name = |i: u32| names.get(i as usize).copied().unwrap_or("");
    order.clear();
    order.extend(0..objects.len() as u32);
    // The stable sort finds runs already in order and merges them: a v2 manifest lists its
    // objects by encoded key (by length, then bytewise), a few dozen runs in name order each,
    // which it merges in a few sequential passes instead of sorting from scratch.
    order.sort_by(|&a, &b| name(a).cmp(name(b)));
}

/// Moves each object to where [`sort_positions`] puts it; `order` is used up.
fn move_into_order(objects: &mut [ObjectInfo], order: &mut [u32]) {
    if !zt_container::internal::permute_in_place(objects, order) {
        // Only a list of more than 2^32 objects gets here (positions are u32).
        objects.sort_by(|a, b| a.name.cmp(&b.name));
    }
}

fn names_strictly_increasing(objects: &[ObjectInfo]) -> bool {
    objects
        .windows(2)
        .all(|w| matches!(w, [a, b] if a.name < b.name))
}

/// Roles every format uses, shared instead of allocated per component.
const ROLES: [&str; 8] = [
    "data",
    "values",
    "indices",
    "indptr",
    "coords",
    "packed_weight",
    "scales",
    "zeros",
];

/// A component role, shared when it is one of the common ones.
pub(crate) fn intern_role(role: &str) -> Cow<'static, str> {
    match ROLES.iter().find(|r| **r == role) {
        Some(r) => Cow::Borrowed(r),
        None => Cow::Owned(role.to_owned()),
    }
}

/// What listing a zTensor file collects about each object as it is built, for
/// [`Collected::finish`]: every component's stored range and the name's hash, taken while
/// the object is hot in cache instead of in later passes over the whole list.
#[derive(Default)]
pub(crate) struct Collected {
    ranges: Vec<BlobRange<Held>>,
    hashes: Vec<u64>,
    state: RandomState,
}

/// What a collected range is: stored bytes of the `file`-th file (0 for the file opened, `n`
/// for a v2 file's `n`-th shard), and whether they are a manifest rather than a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    file: u32,
    manifest: bool,
}

/// Files with at least this many objects check blob overlaps, index names and move objects on
/// two cores; below it the hand-off costs more than it saves.
const PARALLEL_FINISH_MIN_OBJECTS: usize = 4096;

/// Object lists of fewer objects are faulted in by the decoder itself: a second task costs
/// more.
const PREFAULT_MIN_OBJECTS: usize = 16_384;

/// Reserves room in the empty list `objects` for the `declared` objects a manifest says it
/// holds (at most [`MAX_RESERVED_OBJECTS`]; the caller bounds `declared` by what the
/// manifest's bytes can hold), in huge pages where the system has them, and for a long list
/// has the pages faulted in on the second core (a task of `scope`, until `done` is set) while
/// this one decodes into them: no growing and copying, and the faults off the open's path.
pub(crate) fn reserve_objects<'scope>(
    objects: &mut Vec<ObjectInfo>,
    declared: usize,
    scope: &rayon::Scope<'scope>,
    done: &'scope std::sync::atomic::AtomicBool,
) -> Result<()> {
    let n = declared.min(MAX_RESERVED_OBJECTS);
    objects.try_reserve_exact(n).map_err(|_| {
        Error::out_of_memory(format!(
            "cannot allocate {} bytes for a list of {n} objects",
            n.saturating_mul(std::mem::size_of::<ObjectInfo>())
        ))
    })?;
    zt_container::internal::prefer_huge_pages(objects);
    if n >= PREFAULT_MIN_OBJECTS {
        let spare = zt_container::internal::SpareCapacity::of(objects);
        scope.spawn(move |_| spare.prefault(done));
    }
    Ok(())
}

/// The most objects whose room is reserved before any is decoded (about 350 MiB); larger
/// lists grow as they go.
const MAX_RESERVED_OBJECTS: usize = 1 << 20;

impl Collected {
    /// Room for the ranges and hashes of the `declared` objects a manifest says it holds, of
    /// one component each (at most [`MAX_RESERVED_OBJECTS`], like [`reserve_objects`]).
    pub fn reserve(&mut self, declared: usize) -> Result<()> {
        let n = declared.min(MAX_RESERVED_OBJECTS);
        let refused = |_| Error::out_of_memory(format!("cannot allocate the index of {n} objects"));
        self.ranges.try_reserve(n).map_err(refused)?;
        self.hashes.try_reserve(n).map_err(refused)
    }

    /// Takes what [`Collected::finish`] needs from `o`, the object just listed.
    pub fn add(&mut self, o: &ObjectInfo) {
        self.hashes.push(self.state.hash_one(&o.name));
        self.ranges.extend(o.components.iter().map(|c| BlobRange {
            offset: c.offset,
            length: c.length,
            id: Held {
                file: c.file,
                manifest: false,
            },
        }));
    }

    /// Adds the manifest stored in `file` at `offset`, which no blob may overlap either.
    pub fn add_manifest(&mut self, file: u32, offset: u64, length: u64) {
        self.ranges.push(BlobRange {
            offset,
            length,
            id: Held {
                file,
                manifest: true,
            },
        });
    }

    /// The last steps of listing a zTensor file: sorts `objects` by name (a name given twice
    /// is `duplicate(name)`), rejects partially overlapping blobs (identical aliases are
    /// allowed) and indexes the names. `self` holds what [`Collected::add`] took from each
    /// object, in the order of `objects`.
    pub fn finish(
        self,
        version: FileVersion,
        attributes: Attributes,
        objects: Vec<ObjectInfo>,
        duplicate: impl FnOnce(&str) -> Error,
    ) -> Result<Listing> {
        // v1.x files list their objects in name order.
        let place = |_| String::new();
        self.finish_as(version, attributes, objects, duplicate, place, true)
    }

    /// [`Collected::finish`] for objects stored across files (a v2 file and its shards):
    /// overlaps count within each file, and `place(n)` says where file `n` is in the error
    /// (empty for the file opened).
    pub fn finish_in_files(
        self,
        version: FileVersion,
        attributes: Attributes,
        objects: Vec<ObjectInfo>,
        duplicate: impl FnOnce(&str) -> Error,
        place: impl FnOnce(u32) -> String,
    ) -> Result<Listing> {
        // A v2 manifest lists its objects by encoded key: by name length first.
        self.finish_as(version, attributes, objects, duplicate, place, false)
    }

    fn finish_as(
        self,
        version: FileVersion,
        attributes: Attributes,
        mut objects: Vec<ObjectInfo>,
        duplicate: impl FnOnce(&str) -> Error,
        place: impl FnOnce(u32) -> String,
        likely_in_order: bool,
    ) -> Result<Listing> {
        let Collected {
            mut ranges,
            hashes,
            state,
        } = self;
        let mut overlap = Ok(());
        let sorted = sort_and_index(
            &mut objects,
            Some((state, hashes)),
            Some(|| overlap = check_overlaps_per_file(&mut ranges)),
            likely_in_order,
        );
        let index = match sorted {
            Ok(index) => index,
            Err((i, _)) => {
                let name = objects.get(i).map_or("", |o| o.name.as_str());
                return Err(duplicate(name));
            }
        };
        if let Err((a, b)) = overlap {
            // Name the blobs by their ranges: the first component with each (an alias, if any,
            // has the same range and is just as much at fault).
            let name = |r: BlobRange<Held>| {
                if r.id.manifest {
                    return "the manifest".to_owned();
                }
                objects
                    .iter()
                    .find_map(|o| {
                        let c = o.components.iter().find(|c| {
                            (c.file, c.offset, c.length) == (r.id.file, r.offset, r.length)
                        })?;
                        Some(format!("{}/{}", o.name, c.role))
                    })
                    .unwrap_or_else(|| "?".to_owned())
            };
            return Err(Error::invalid(format!(
                "blobs of {} and {} partially overlap{}",
                name(a),
                name(b),
                place(b.id.file)
            ))
            .at(b.offset));
        }
        Ok(Listing::new(version, attributes, objects, index))
    }
}

/// Checks that within each file (the one opened, with a v2 file's manifest, and each shard)
/// blobs are identical or disjoint: aliases (parts sharing one blob, as the original v2
/// writer makes for equal tensors) are fine, partial overlaps are not, and empty blobs
/// overlap nothing. One sort by file, then by offset, and one pass over each file's run.
fn check_overlaps_per_file(
    ranges: &mut [BlobRange<Held>],
) -> std::result::Result<(), (BlobRange<Held>, BlobRange<Held>)> {
    // Stable for its run detection, not for the ties: blobs are mostly written in the order
    // of some list (names, a v2 manifest's encoded keys, the caller's), so the ranges arrive
    // as a few long runs in offset order, which it merges instead of sorting from scratch
    // (a v2 manifest of 100,000 objects: a fifth of the comparisons).
    ranges.sort_by_key(|r| (r.id.file, r.offset, r.length));
    for file in ranges.chunk_by_mut(|a, b| a.id.file == b.id.file) {
        // Sorted already: the check's own sort finds nothing to do.
        check_overlaps(file)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{sort_by_name, Collected, PARALLEL_FINISH_MIN_OBJECTS};
    use crate::model::{ByteOrder, Components, FileVersion, ObjectInfo};
    use zt_container::Error;
    use zt_formats::{DType, ElementType, Format};

    fn named(names: &[&str]) -> Vec<ObjectInfo> {
        names
            .iter()
            .map(|n| {
                ObjectInfo::listed(
                    (*n).to_owned(),
                    Default::default(),
                    Format::Dense,
                    Default::default(),
                    Components::default(),
                )
            })
            .collect()
    }

    fn names(objects: &[ObjectInfo]) -> Vec<&str> {
        objects.iter().map(|o| o.name.as_str()).collect()
    }

    #[test]
    fn sorting_by_name_merges_the_runs_of_a_v2_manifest_and_finds_a_name_given_twice() {
        // Deterministic CBOR's order: by length, then bytewise.
        let mut objects = named(&["b", "x", "aa", "bz", "zz", "abc", "b.1"]);
        assert_eq!(sort_by_name(&mut objects), None);
        assert_eq!(names(&objects), ["aa", "abc", "b", "b.1", "bz", "x", "zz"]);
        // Already sorted: nothing moves.
        assert_eq!(sort_by_name(&mut objects), None);
        let mut twice = named(&["w", "a", "w"]);
        assert_eq!(sort_by_name(&mut twice), Some("w"));
        assert_eq!(names(&twice), ["a", "w", "w"]);
    }

    /// `count` objects of 16 bytes each in file 1, their blobs in name order, listed in a v2
    /// manifest's order (by name length, then bytewise) and finished as v2 files are, or
    /// (`v1`) finished as v1.x files are; `edit` changes them first.
    fn collected(
        count: usize,
        v1: bool,
        edit: impl FnOnce(&mut Vec<ObjectInfo>),
    ) -> crate::Result<Vec<String>> {
        let mut names: Vec<String> = (0..count).map(|i| format!("t.{i}")).collect();
        names.sort();
        let mut objects: Vec<ObjectInfo> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut o = ObjectInfo::raw_dense(
                    n.clone(),
                    [4u64].into_iter().collect(),
                    ElementType::plain(DType::F32),
                    (64 + 16 * i as u64, 16),
                    ByteOrder::Little,
                );
                for c in o.components.0.iter_mut() {
                    c.file = 1;
                }
                o
            })
            .collect();
        objects.sort_by(|a, b| (a.name.len(), &a.name).cmp(&(b.name.len(), &b.name)));
        edit(&mut objects);
        let mut c = Collected::default();
        c.add_manifest(0, 0, 64);
        for o in &objects {
            c.add(o);
        }
        let duplicate = |name: &str| Error::invalid(format!("{name} twice"));
        let listing = if v1 {
            c.finish(
                FileVersion::ZTensorV2,
                Default::default(),
                objects,
                duplicate,
            )?
        } else {
            let place = |file| format!(" in file {file}");
            c.finish_in_files(
                FileVersion::ZTensorV2,
                Default::default(),
                objects,
                duplicate,
                place,
            )?
        };
        // The index finds every object where the sorted list has it.
        for (i, o) in listing.objects.iter().enumerate() {
            assert_eq!(listing.index.find(&listing.objects, &o.name), Some(i));
        }
        Ok(listing.objects.into_iter().map(|o| o.name).collect())
    }

    /// Short lists are finished on one core, long ones on two: both sort, index, and find
    /// the same faults.
    #[test]
    fn finishing_a_collected_listing_sorts_indexes_and_refuses_faults_short_and_long() {
        for (count, v1) in [50, PARALLEL_FINISH_MIN_OBJECTS + 50]
            .into_iter()
            .flat_map(|n| [(n, false), (n, true)])
        {
            let mut want: Vec<String> = (0..count).map(|i| format!("t.{i}")).collect();
            want.sort();
            assert_eq!(collected(count, v1, |_| ()).unwrap(), want);
            // Aliases (one blob for two objects) are fine.
            let alias = collected(count, v1, |o| {
                let (offset, length) = (o[3].components[0].offset, o[3].components[0].length);
                o[7].components.0[0].offset = offset;
                o[7].components.0[0].length = length;
            });
            assert_eq!(alias.unwrap().len(), count);
            // A blob 8 bytes into another's, in shard 1.
            let mut pair = (String::new(), String::new());
            let e = collected(count, v1, |o| {
                o[7].components.0[0].offset = o[3].components[0].offset + 8;
                pair = (o[3].name.clone(), o[7].name.clone());
            })
            .unwrap_err();
            assert_eq!(
                e.message(),
                format!(
                    "blobs of {}/data and {}/data partially overlap{}",
                    pair.0,
                    pair.1,
                    if v1 { "" } else { " in file 1" }
                ),
                "{count} {v1}"
            );
            // A name given twice, found wherever it sorts.
            let mut twice = String::new();
            let e = collected(count, v1, |o| {
                o[9].name = o[2].name.clone();
                twice = o[2].name.clone();
            })
            .unwrap_err();
            assert_eq!(e.message(), format!("{twice} twice"), "{count} {v1}");
        }
    }
}
