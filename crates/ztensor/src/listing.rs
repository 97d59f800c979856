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
    /// Manifest nesting depth and rank caps.
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

/// What one listed object costs beyond its `ObjectInfo` and its name, roughly: a few
/// attributes (a B-tree node), a name table's entry and the list's spare capacity.
#[cfg(any(feature = "onnx", feature = "hdf5"))]
pub(crate) const LISTED_OVERHEAD: u64 = 1024;

impl Limits {
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

    /// What listing one object named `name` costs, for [`Limits::listing_budget`].
    #[cfg(any(feature = "onnx", feature = "hdf5"))]
    pub(crate) fn listing_cost(name: &str) -> u64 {
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
    /// A zip-based file's entries (`.npz`, PyTorch), whose CRC-32s `verify` checks.
    pub zip_entries: Vec<crate::zip::Entry>,
}

impl Listing {
    /// A listing of objects that are known to carry each name once (the file-kind module
    /// refused duplicates itself): sorts them and indexes them.
    pub fn of_unique(
        version: FileVersion,
        attributes: Attributes,
        mut objects: Vec<ObjectInfo>,
    ) -> Self {
        sort_by_name(&mut objects);
        let index = NameIndex::build(&objects);
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
        }
    }
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
    /// The index of `objects`, hashing every name.
    pub fn build(objects: &[ObjectInfo]) -> Self {
        let state = RandomState::default();
        let hashes: Vec<u64> = objects.iter().map(|o| state.hash_one(&o.name)).collect();
        Self::from_hashes(state, &hashes)
    }

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
pub(crate) fn sort_by_name(objects: &mut [ObjectInfo]) -> Option<&str> {
    if names_strictly_increasing(objects) {
        return None;
    }
    // Objects are large (hundreds of bytes): sorting them directly moves each one many
    // times. Sort their positions instead, then move each object once, along the cycles of
    // the permutation.
    let name = |i: u32| objects.get(i as usize).map_or("", |o| o.name.as_str());
    let mut order: Vec<u32> = (0..objects.len() as u32).collect();
    // The stable sort finds runs already in order and merges them: a v2 manifest lists its
    // objects by encoded key (by length, then bytewise), a few dozen runs in name order each,
    // which it merges in a few sequential passes instead of sorting from scratch.
    order.sort_by(|&a, &b| name(a).cmp(name(b)));
    let twice = order
        .windows(2)
        .position(|w| matches!(w, [a, b] if name(*a) == name(*b)));
    permute(objects, &mut order);
    twice.and_then(|i| objects.get(i)).map(|o| o.name.as_str())
}

/// Reorders `items` so that position `k` holds what was at `order[k]`; `order` is used up.
fn permute<T>(items: &mut [T], order: &mut [u32]) {
    for start in 0..order.len() {
        // Follow the cycle through `start`: each step swaps the element that belongs at
        // `at` into place, and marks `at` done by pointing it at itself.
        let mut at = start;
        loop {
            let from = order.get(at).map_or(at, |&f| f as usize);
            if let Some(slot) = order.get_mut(at) {
                *slot = at as u32;
            }
            if from == start || from == at {
                break;
            }
            items.swap(at, from);
            at = from;
        }
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
    ranges: Vec<BlobRange<()>>,
    hashes: Vec<u64>,
    state: RandomState,
}

/// Files with at least this many objects check blob overlaps and build the name index on a
/// second core while the name order is checked; below it the hand-off costs more than it saves.
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
) {
    let n = declared.min(MAX_RESERVED_OBJECTS);
    objects.reserve_exact(n);
    zt_container::internal::prefer_huge_pages(objects);
    if n >= PREFAULT_MIN_OBJECTS {
        let spare = zt_container::internal::SpareCapacity::of(objects);
        scope.spawn(move |_| spare.prefault(done));
    }
}

/// The most objects whose room is reserved before any is decoded (about 350 MiB); larger
/// lists grow as they go.
const MAX_RESERVED_OBJECTS: usize = 1 << 20;

impl Collected {
    /// Takes what [`Collected::finish`] needs from `o`, the object just listed.
    pub fn add(&mut self, o: &ObjectInfo) {
        self.hashes.push(self.state.hash_one(&o.name));
        self.ranges.extend(o.components.iter().map(|c| BlobRange {
            offset: c.offset,
            length: c.length,
            id: (),
        }));
    }

    /// The last steps of listing a zTensor file: sorts `objects` by name (a name given twice
    /// is `duplicate(name)`), rejects partially overlapping blobs across the whole file
    /// (identical aliases are allowed) and indexes the names. `self` holds what
    /// [`Collected::add`] took from each object, in the order of `objects`.
    pub fn finish(
        self,
        version: FileVersion,
        attributes: Attributes,
        mut objects: Vec<ObjectInfo>,
        duplicate: impl FnOnce(&str) -> Error,
    ) -> Result<Listing> {
        let Collected {
            mut ranges,
            hashes,
            state,
        } = self;
        let checks = move || {
            (
                check_overlaps(&mut ranges),
                NameIndex::from_hashes(state, &hashes),
            )
        };
        let ((overlap, index), in_order) = if objects.len() >= PARALLEL_FINISH_MIN_OBJECTS {
            rayon::join(checks, || names_strictly_increasing(&objects))
        } else {
            (checks(), names_strictly_increasing(&objects))
        };
        // Files list their objects sorted, so the index built from the hashes in file order
        // is usually the final one; otherwise sort, refuse duplicates and index again.
        let index = if in_order {
            index
        } else {
            if let Some(name) = sort_by_name(&mut objects) {
                return Err(duplicate(name));
            }
            NameIndex::build(&objects)
        };
        if let Err((a, b)) = overlap {
            // Name the blobs by their ranges: the first component with each (an alias, if any,
            // has the same range and is just as much at fault).
            let name = |r: BlobRange<()>| {
                objects
                    .iter()
                    .find_map(|o| {
                        let c = o
                            .components
                            .iter()
                            .find(|c| (c.offset, c.length) == (r.offset, r.length))?;
                        Some(format!("{}/{}", o.name, c.role))
                    })
                    .unwrap_or_else(|| "?".to_owned())
            };
            return Err(Error::invalid(format!(
                "blobs of {} and {} partially overlap",
                name(a),
                name(b)
            ))
            .at(b.offset));
        }
        Ok(Listing::new(version, attributes, objects, index))
    }
}

#[cfg(test)]
mod tests {
    use super::permute;

    #[test]
    fn permute_moves_each_item_to_where_the_order_says() {
        // Every permutation of 6 items, and a few longer ones with long cycles.
        let mut orders: Vec<Vec<u32>> = Vec::new();
        let mut p: Vec<u32> = (0..6).collect();
        // Heap's algorithm, iteratively.
        let mut c = [0usize; 6];
        orders.push(p.clone());
        let mut i = 0;
        while i < 6 {
            if c[i] < i {
                let j = if i % 2 == 0 { 0 } else { c[i] };
                p.swap(j, i);
                orders.push(p.clone());
                c[i] += 1;
                i = 0;
            } else {
                c[i] = 0;
                i += 1;
            }
        }
        assert_eq!(orders.len(), 720);
        orders.push((0..1000).rev().collect());
        orders.push((0..1000).map(|k| (k * 7 + 3) % 1000).collect());
        for order in orders {
            let mut items: Vec<String> = (0..order.len()).map(|k| format!("item{k}")).collect();
            let want: Vec<String> = order.iter().map(|&k| format!("item{k}")).collect();
            let mut scratch = order.clone();
            permute(&mut items, &mut scratch);
            assert_eq!(items, want, "order {order:?}");
        }
    }
}
