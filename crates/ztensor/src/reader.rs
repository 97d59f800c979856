//! An open file: its objects listed and validated once, looked up by name through the keyed
//! index, handed out as [`ObjectView`]s, and verified on every core.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::OnceLock;

use rayon::prelude::*;
use zt_container::{Error, Result, Source};
use zt_formats::Element;
use zt_manifest::Attributes;

use crate::decode::{Backing, Verify, ZipEntries};
use crate::listing::{Limits, Listing, NameIndex};
use crate::model::{FileVersion, ObjectInfo, ShardInfo};
use crate::readahead::{ReadAhead, NO_HINTS};
use crate::view::ObjectView;

/// The bytes of objects [`Reader::parallel_objects`] fetches ahead at a time from a remote
/// file (one batch worked on, the next on its way).
pub const REMOTE_BATCH: u64 = 64 << 20;

/// An open file: every object listed and validated, data read on demand through
/// [`Reader::object`].
///
/// Reads of raw little-endian components from a memory-mapped file borrow from the map: no
/// copy, just a pointer and a length.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("m.zt");
/// # let mut w = ztensor::Writer::create(&path)?;
/// # w.add("a", &[2], &[1.0f32, 2.0])?;
/// # w.add("b", &[1], &[7i32])?;
/// # w.finish()?;
/// let r = ztensor::open(&path)?;
/// // In file order, each object once.
/// for object in &r {
///     let bytes = object.bytes()?;
///     println!("{}: {:?} {:?}, {} bytes", object.name(), object.element_type(), object.shape(), bytes.len());
/// }
/// // A typed read by name; a missing name is its own kind of error.
/// assert_eq!(&r.read::<f32>("a")?[..], &[1.0, 2.0]);
/// assert_eq!(r.object("c").unwrap_err().kind(), ztensor::ErrorKind::NotFound);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Reader {
    /// The bytes, the objects sorted by name, and the read path.
    backing: Backing,
    version: FileVersion,
    attributes: Attributes,
    index: NameIndex,
    /// A v2 file's shards, in the order components name them.
    shards: Vec<ShardInfo>,
    /// A v2 file's manifest hash (checked at open).
    manifest_hash: Option<u64>,
    /// The file declares an empty metadata map ([`Reader::has_empty_metadata`]).
    empty_metadata: bool,
    /// The ranges of the main file that two or more objects claim, found on first asking
    /// ([`Reader::bytes_shared`]).
    shared: OnceLock<Vec<Range<u64>>>,
}

impl Reader {
    pub(crate) fn new(source: Source, listing: Listing, limits: Limits, verify: Verify) -> Self {
        let (shards, shard_sources): (Vec<ShardInfo>, _) = listing.shards.into_iter().unzip();
        let shard_paths = shards.iter().map(|s| s.path.clone()).collect();
        let readahead = ReadAhead::new(&source);
        Reader {
            backing: Backing {
                source,
                shards: shard_sources,
                shard_paths,
                limits,
                objects: listing.objects,
                readahead,
                verify,
                zip: ZipEntries::new(listing.zip_entries),
            },
            shards,
            manifest_hash: listing.manifest_hash,
            empty_metadata: listing.empty_metadata,
            version: listing.version,
            attributes: listing.attributes,
            index: listing.index,
            shared: OnceLock::new(),
        }
    }

    /// The file's kind and version.
    pub fn version(&self) -> &FileVersion {
        &self.version
    }

    /// The shards of a sharded zTensor v2 file, opened with it (empty for every other file).
    /// A component whose `file` is `n` lives in `shards()[n - 1]`.
    pub fn shards(&self) -> &[ShardInfo] {
        &self.shards
    }

    /// A zTensor v2 file's manifest hash (XXH3-64 of the manifest), as its footer stores it
    /// and as it was checked at open; `None` for other files and for a v2 data shard.
    pub fn manifest_hash(&self) -> Option<u64> {
        self.manifest_hash
    }

    /// File-level attributes (.mag and safetensors metadata too).
    pub fn attributes(&self) -> &Attributes {
        &self.attributes
    }

    /// Whether the file declares a metadata map with no entries: a `.safetensors` file whose
    /// header holds `"__metadata__":{}` (as safetensors' `save(..., metadata={})` writes),
    /// which safetensors' `metadata()` gives as `{}` where a file without `__metadata__`
    /// (or with `null`) gives `None`. False for every other kind, and whenever
    /// [`Reader::attributes`] is not empty. Converting to `.safetensors` keeps it.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// let header = br#"{"__metadata__":{},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#;
    /// let mut file = (header.len() as u64).to_le_bytes().to_vec();
    /// file.extend_from_slice(header);
    /// file.push(7);
    /// let r = ztensor::OpenOptions::new().open_bytes(file)?;
    /// assert!(r.attributes().is_empty() && r.has_empty_metadata());
    /// # Ok(())
    /// # }
    /// ```
    pub fn has_empty_metadata(&self) -> bool {
        self.empty_metadata
    }

    /// Every object's listing, sorted by name.
    pub fn objects(&self) -> &[ObjectInfo] {
        &self.backing.objects
    }

    /// Whether any byte of `range` (offsets in the main file) belongs to more than one object:
    /// a blob a zTensor writer shared between equal tensors, or a PyTorch storage that several
    /// tensors view. A caller that hands out writable views of a private (copy-on-write) map
    /// copies such bytes instead, so that a write to one tensor never shows in another.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// let mut w = ztensor::Writer::create(&path)?;
    /// w.add("a", &[4], &[0f32; 4])?;
    /// w.add("b", &[4], &[0f32; 4])?; // the same bytes as "a": one blob for both
    /// w.add("c", &[4], &[1f32; 4])?;
    /// w.finish()?;
    /// let r = ztensor::open(&path)?;
    /// let span = |name: &str| {
    ///     let c = &r.object(name).unwrap().components[0];
    ///     c.offset..c.offset + c.length
    /// };
    /// assert!(r.bytes_shared(span("a")) && r.bytes_shared(span("b")));
    /// assert!(!r.bytes_shared(span("c")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn bytes_shared(&self, range: Range<u64>) -> bool {
        let shared = self
            .shared
            .get_or_init(|| shared_ranges(&self.backing.objects));
        // The first shared range that ends after `range` starts meets it if it starts before
        // `range` ends.
        let i = shared.partition_point(|s| s.end <= range.start);
        shared.get(i).is_some_and(|s| s.start < range.end)
    }

    /// How many objects the file holds.
    pub fn len(&self) -> usize {
        self.backing.objects.len()
    }

    /// Whether the file holds no object.
    pub fn is_empty(&self) -> bool {
        self.backing.objects.is_empty()
    }

    /// Object names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.backing.objects.iter().map(|o| o.name.as_str())
    }

    /// The underlying source (to tell whether reads borrow: [`Source::is_in_memory`]).
    pub fn source(&self) -> &Source {
        &self.backing.source
    }

    /// The limits this reader was opened with.
    pub fn limits(&self) -> &Limits {
        &self.backing.limits
    }

    /// An object by name, looked up once; every read hangs off the view. A name the file
    /// does not have is [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    pub fn object(&self, name: &str) -> Result<ObjectView<'_>> {
        self.get(name).ok_or_else(|| {
            let message = format!("no object named {name:?}");
            Error::not_found(crate::suggest::with_suggestion(message, name, self.names()))
        })
    }

    /// An object by name, if the file has it.
    pub fn get(&self, name: &str) -> Option<ObjectView<'_>> {
        let i = self.index.find(&self.backing.objects, name)?;
        self.view(i, false)
    }

    /// The sorted objects and their name index, for the index's own tests.
    #[cfg(test)]
    pub(crate) fn listing_parts(&self) -> (&[ObjectInfo], &NameIndex) {
        (&self.backing.objects, &self.index)
    }

    /// The view of object `index` (name position); `walking` when handed out by [`Iter`].
    fn view(&self, index: usize, walking: bool) -> Option<ObjectView<'_>> {
        let info = self.backing.objects.get(index)?;
        // Fewer than 2^32 objects: the listing's limits cap the count far below that.
        Some(ObjectView::new(&self.backing, info, index as u32, walking))
    }

    /// A dense object's elements as `T`: the common read, short for
    /// `reader.object(name)?.read::<T>()`.
    pub fn read<T: Element>(&self, name: &str) -> Result<Cow<'_, [T]>> {
        self.object(name)?.read::<T>()
    }

    /// Says that every object is about to be read, in an order of the caller's choosing (a
    /// loader's `load_file`, which asks in its model's order): the read-ahead then reads the
    /// file front to back on the prefetching thread from the first read on, rather than after
    /// reads it cannot follow have covered an eighth of the data. A caller that walks the file
    /// with [`Reader::iter`] needs no hint. Memory ahead stays bounded, as for any sweep.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// # let mut w = ztensor::Writer::create(&path)?;
    /// # w.add("b", &[2], &[1.0f32, 2.0])?;
    /// # w.add("a", &[1], &[3.0f32])?;
    /// # w.finish()?;
    /// let reader = ztensor::open(&path)?;
    /// reader.expect_to_read_all();
    /// for name in ["b", "a"] {
    ///     let values = reader.read::<f32>(name)?;
    ///     assert!(!values.is_empty());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn expect_to_read_all(&self) {
        self.backing.readahead.expect_whole();
    }

    /// Reads the whole file into the page cache on a thread of its own, front to back in
    /// large pieces, skipping what is cached already, and returns at once
    /// ([`Source::populate_whole_in_background`]). For a caller that reads every tensor
    /// through a map of its own (ztio hands torch a private map of the file): its page faults
    /// then find the pages in instead of each reading a little. The thread keeps the file
    /// mapped until it is done, even after this reader is dropped. Nothing is started for a
    /// file larger than the memory budget (else half of physical memory), for a source that
    /// is not a map, or off Linux. Returns whether the read was started.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// # let mut w = ztensor::Writer::create(&path)?;
    /// # w.add("a", &[1], &[3.0f32])?;
    /// # w.finish()?;
    /// let reader = ztensor::open(&path)?;
    /// let started = reader.read_whole_in_background();
    /// assert_eq!(started, cfg!(target_os = "linux"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_whole_in_background(&self) -> bool {
        let budget = self.backing.limits.memory_budget.unwrap_or_else(|| {
            zt_container::internal::physical_memory().map_or(u64::MAX, |m| m / 2)
        });
        self.backing.source.len() <= budget && self.backing.source.populate_whole_in_background()
    }

    /// Every object, in the order its data lies in the file (the order that reads a file
    /// front to back; objects without data last, by name).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            reader: self,
            order: self
                .backing
                .readahead
                .file_order(&self.backing.objects)
                .iter(),
        }
    }

    /// Reads the file front to back into the page cache and this process's map on the
    /// calling thread ([`Source::populate_now_stepwise`]) and hands each object to `each`, in
    /// file order, as soon as its bytes are in: a loader starts on the first tensors while the
    /// rest is still coming in. With `populate` false (over a memory budget), or for a source
    /// other than a map, the objects are handed over at once and their reads fetch them.
    /// `stop`, once set, ends the reading at its next step; returns whether every object was
    /// handed over (false when stopped).
    #[cfg(feature = "sharded")]
    pub(crate) fn load_in_file_order(
        &self,
        populate: bool,
        stop: &std::sync::atomic::AtomicBool,
        mut each: impl FnMut(ObjectView<'_>),
    ) -> bool {
        let backing = &self.backing;
        let objects = &backing.objects;
        let order = backing.readahead.file_order(objects);
        // Where each object's bytes in this file end (0 for none: handed over first chance).
        let end_of = |info: &ObjectInfo| {
            info.components
                .iter()
                .filter(|c| c.file == 0)
                .map(|c| c.offset.saturating_add(c.length))
                .max()
                .unwrap_or(0)
        };
        // Only a map is read ahead here; other sources' reads keep their hints.
        let populate = populate && matches!(backing.source, Source::Mapped(_));
        let mut handed = 0usize;
        let mut hand_over_before = |mapped_to: u64| {
            while let Some((i, info)) = order
                .get(handed)
                .and_then(|&i| Some((i, objects.get(i as usize)?)))
            {
                if end_of(info) > mapped_to {
                    return;
                }
                // Bytes mapped already need no read-ahead hints; the others do.
                let hints = if populate { NO_HINTS } else { i };
                each(ObjectView::new(backing, info, hints, false));
                handed += 1;
            }
        };
        if populate {
            backing
                .source
                .populate_now_stepwise(0, backing.source.len(), |mapped_to| {
                    hand_over_before(mapped_to);
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::ops::ControlFlow::Break(())
                    } else {
                        std::ops::ControlFlow::Continue(())
                    }
                });
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return false;
            }
        }
        hand_over_before(u64::MAX);
        true
    }

    /// Runs `f` on every object on every core; results in name order. Large objects are
    /// dealt out first, so the threads finish together.
    ///
    /// `f` may read any part of an object (a slice, one component): on a remote file each
    /// read is its own request (at most the file's bound in flight). For an `f` that reads
    /// every object whole, [`Reader::parallel_objects_whole`] fetches them in fewer requests.
    pub fn parallel_objects<R: Send>(&self, f: impl Fn(ObjectView<'_>) -> R + Sync) -> Vec<R> {
        let weight = |o: &ObjectInfo| {
            o.components
                .iter()
                .fold(0u64, |w, c| w.saturating_add(c.length))
        };
        let mut order: Vec<usize> = (0..self.backing.objects.len()).collect();
        order.sort_unstable_by_key(|&i| {
            std::cmp::Reverse(self.backing.objects.get(i).map_or(0, weight))
        });
        let mut done: Vec<(usize, R)> = crate::pool::install(|| {
            order
                .into_par_iter()
                .with_max_len(1)
                .filter_map(|i| Some((i, f(self.view(i, false)?))))
                .collect()
        });
        done.sort_unstable_by_key(|(i, _)| *i);
        done.into_iter().map(|(_, r)| r).collect()
    }

    /// As [`Reader::parallel_objects`], for an `f` that reads each object whole (a loader,
    /// a checksum, a conversion). On a local file it is the same; on a remote file the
    /// objects go in file order, in batches of at most [`REMOTE_BATCH`] stored bytes, each
    /// batch fetched ahead (components at most 1 MiB apart in one request of up to 16 MiB,
    /// asked of the file that holds them, a v2 file's shards included; at most the bound on
    /// requests in flight) while the one before it is worked on.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// let r = ztensor::open(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/v123_all.zt"))?;
    /// let sizes = r.parallel_objects_whole(|o| o.bytes().map(|b| b.len()));
    /// assert_eq!(sizes.len(), r.len());
    /// # Ok(())
    /// # }
    /// ```
    pub fn parallel_objects_whole<R: Send>(
        &self,
        f: impl Fn(ObjectView<'_>) -> R + Sync,
    ) -> Vec<R> {
        let backing = &self.backing;
        let remote = backing.source.is_ranged() || backing.shards.iter().any(Source::is_ranged);
        if !remote {
            return self.parallel_objects(f);
        }
        let objects = &backing.objects;
        let order = backing.readahead.file_order(objects);
        let stored = |i: u32| {
            objects.get(i as usize).map_or(0, |o| {
                o.components
                    .iter()
                    .fold(0u64, |n, c| n.saturating_add(c.length))
            })
        };
        // Batches of file order, each up to REMOTE_BATCH stored bytes (a larger object alone).
        let mut batches: Vec<&[u32]> = Vec::new();
        let (mut start, mut bytes) = (0usize, 0u64);
        for (at, &i) in order.iter().enumerate() {
            let len = stored(i);
            if at > start && bytes.saturating_add(len) > REMOTE_BATCH {
                batches.extend(order.get(start..at));
                (start, bytes) = (at, 0);
            }
            bytes = bytes.saturating_add(len);
        }
        batches.extend(order.get(start..).filter(|b| !b.is_empty()));
        // Each component's stored bytes, asked of the file that holds them (a v2 file's
        // shards are files of their own).
        let fetch = |batch: &[u32]| {
            let mut per_file: Vec<Vec<(u64, u64)>> = vec![Vec::new(); 1 + backing.shards.len()];
            for c in batch
                .iter()
                .filter_map(|&i| objects.get(i as usize))
                .flat_map(|o| o.components.iter())
            {
                if let Some(ranges) = per_file.get_mut(c.file as usize) {
                    ranges.push((c.offset, c.length));
                }
            }
            for (file, ranges) in per_file.iter().enumerate() {
                let source = match file {
                    0 => Some(&backing.source),
                    n => backing.shards.get(n - 1),
                };
                if let (Some(source), false) = (source, ranges.is_empty()) {
                    source.prefetch(ranges);
                }
            }
        };
        if let Some(first) = batches.first() {
            fetch(first);
        }
        let mut done: Vec<(usize, R)> = Vec::with_capacity(objects.len());
        for (k, batch) in batches.iter().enumerate() {
            if let Some(next) = batches.get(k + 1) {
                fetch(next);
            }
            let results: Vec<(usize, R)> = crate::pool::install(|| {
                batch
                    .par_iter()
                    .with_max_len(1)
                    .filter_map(|&i| {
                        let info = objects.get(i as usize)?;
                        let view = ObjectView::new(&self.backing, info, NO_HINTS, false);
                        Some((i as usize, f(view)))
                    })
                    .collect()
            });
            done.extend(results);
        }
        done.sort_unstable_by_key(|(i, _)| *i);
        done.into_iter().map(|(_, r)| r).collect()
    }

    /// Verifies every digest and checksum in the file on every core; returns how many were
    /// checked and the failures, one per object.
    ///
    /// For zTensor v2 this also checks each part's content rules (bool bytes, the packed
    /// FP4 tail), the data-level rules of CSR and COO objects, and every shard's whole-file
    /// digest; the manifest hash was checked at open. For a zip-based file (`.npz`, a
    /// PyTorch checkpoint) it checks every entry's CRC-32 against its bytes (inflated when
    /// deflated).
    pub fn verify(&self) -> VerifyReport {
        self.verify_with_progress(&|_| {})
    }

    /// As [`Reader::verify`], calling `progress` with each object's stored bytes once that
    /// object is checked (from the worker threads, in no set order), so that a caller can
    /// show how far it has come against the sum of every object's stored bytes.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// # let mut w = ztensor::Writer::create(&path)?;
    /// # w.add("w", &[2], &[1.0f32, 2.0])?;
    /// # w.finish()?;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// let r = ztensor::open(&path)?;
    /// let done = AtomicU64::new(0);
    /// let report = r.verify_with_progress(&|n| { done.fetch_add(n, Ordering::Relaxed); });
    /// assert!(report.failures.is_empty());
    /// assert_eq!(done.into_inner(), 8);
    /// # Ok::<(), ztensor::Error>(())
    /// ```
    pub fn verify_with_progress(&self, progress: &(dyn Fn(u64) + Sync)) -> VerifyReport {
        let mut report = VerifyReport::default();
        for (info, source) in self.shards.iter().zip(&self.backing.shards) {
            report.tally(verify_shard(info, source));
        }
        // The entries of a zip-based file or of the archives in its data files (tensor data,
        // pickle, headers): each CRC-32, in the file that holds it.
        let cap = self.backing.limits.max_decompressed_len;
        let entries: Vec<Result<usize>> = crate::pool::install(|| {
            self.backing
                .zip
                .entries
                .par_iter()
                .with_max_len(1)
                .map(|(file, e)| {
                    let source = self.backing.file_numbered(*file)?;
                    crate::zip::check_crc(source, e, cap)
                        .map(|()| 1)
                        .map_err(self.backing.in_file_numbered(*file))
                })
                .collect()
        });
        for r in entries {
            report.tally(r);
        }
        for o in self.objects() {
            if let Some(why) = o.skipped() {
                report.skipped.push((o.name.clone(), why.to_owned()));
            }
        }
        let results = self.parallel_objects_whole(|o| {
            let checked = match o.skipped() {
                Some(_) => Ok(0),
                None => o.verify(),
            };
            progress(
                o.components
                    .iter()
                    .fold(0u64, |n, c| n.saturating_add(c.length)),
            );
            checked
        });
        for r in results {
            report.tally(r);
        }
        report
    }

    /// As [`Reader::verify`], on a pool of `threads` threads (to measure scaling).
    pub fn verify_with_threads(&self, threads: usize) -> VerifyReport {
        match rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .build()
        {
            Ok(pool) => pool.install(|| self.verify()),
            // No threads to be had: the global pool does the same work.
            Err(_) => self.verify(),
        }
    }
}

/// Checks a shard's whole-file digest; returns how many digests it checked (0 or 1).
fn verify_shard(info: &ShardInfo, source: &Source) -> Result<usize> {
    let at = |e: Error| e.in_file(&info.path);
    // A file that records no digest for it (an ONNX model's external data): nothing to check.
    if info.digest.is_none() && info.digest_text.is_empty() {
        return Ok(0);
    }
    let Some(d) = &info.digest else {
        return Err(at(Error::unsupported(format!(
            "shard {:?}: digest {:?} uses an algorithm this library does not compute",
            info.name, info.digest_text
        ))));
    };
    // In pieces: a shard may be larger than memory (and an unmapped one is never read whole).
    const PIECE: u64 = 1 << 20;
    let mut h = d.algorithm().hasher();
    let mut at_byte = 0u64;
    while at_byte < source.len() {
        let n = PIECE.min(source.len() - at_byte);
        h.update(&source.read_at(at_byte, n).map_err(at)?);
        at_byte += n;
    }
    let got = h.finish();
    if got != *d {
        return Err(at(Error::checksum(format!(
            "shard {:?}: digest mismatch: stored {d}, computed {got}",
            info.name
        ))));
    }
    Ok(1)
}

/// Every object of a [`Reader`] in file order: see [`Reader::iter`].
#[derive(Debug, Clone)]
pub struct Iter<'r> {
    reader: &'r Reader,
    order: std::slice::Iter<'r, u32>,
}

impl<'r> Iterator for Iter<'r> {
    type Item = ObjectView<'r>;

    fn next(&mut self) -> Option<ObjectView<'r>> {
        let &i = self.order.next()?;
        self.reader.view(i as usize, true)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.order.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'r> IntoIterator for &'r Reader {
    type Item = ObjectView<'r>;
    type IntoIter = Iter<'r>;

    fn into_iter(self) -> Iter<'r> {
        self.iter()
    }
}

/// What [`Reader::verify`] found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Digests checked.
    pub checked: usize,
    /// Each mismatch or unreadable range.
    pub failures: Vec<Error>,
    /// Objects passed over, with why: not numbers we decode ([`ObjectInfo::skipped`]).
    pub skipped: Vec<(String, String)>,
}

impl VerifyReport {
    /// Whether every digest matched.
    pub fn is_ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// Counts one check's result: the digests it checked, or one failed check.
    fn tally(&mut self, result: Result<usize>) {
        match result {
            Ok(n) => self.checked += n,
            Err(e) => {
                self.checked += 1;
                self.failures.push(e);
            }
        }
    }
}

/// The ranges of the main file that components of two or more objects claim, merged and in
/// order: one sort and one sweep, where a component that starts before the furthest end so far
/// joins the cluster before it. Should the list of spans not fit in memory, the whole file
/// counts as shared (copies are made, never aliases).
fn shared_ranges(objects: &[ObjectInfo]) -> Vec<Range<u64>> {
    let count = objects.iter().map(|o| o.components.len()).sum();
    let mut spans: Vec<(u64, u64, usize)> = Vec::new();
    if spans.try_reserve_exact(count).is_err() {
        return std::iter::once(0..u64::MAX).collect();
    }
    for (owner, o) in objects.iter().enumerate() {
        for c in o.components.iter().filter(|c| c.file == 0 && c.length > 0) {
            spans.push((c.offset, c.offset.saturating_add(c.length), owner));
        }
    }
    shared_of_spans(spans)
}

/// [`shared_ranges`] over `(start, end, owner)` spans.
fn shared_of_spans(mut spans: Vec<(u64, u64, usize)>) -> Vec<Range<u64>> {
    spans.sort_unstable();
    let mut shared = Vec::new();
    // The current cluster: its extent, its first owner, and whether another object is in it.
    let mut cluster: Option<(Range<u64>, usize, bool)> = None;
    for (start, end, owner) in spans {
        match &mut cluster {
            Some((extent, first, several)) if start < extent.end => {
                extent.end = extent.end.max(end);
                *several |= owner != *first;
            }
            _ => {
                if let Some((extent, _, true)) = cluster.take() {
                    shared.push(extent);
                }
                cluster = Some((start..end, owner, false));
            }
        }
    }
    if let Some((extent, _, true)) = cluster {
        shared.push(extent);
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::shared_of_spans;

    #[test]
    fn shared_ranges_are_where_two_objects_meet() {
        // Object 0's two parts overlap each other only; 1 and 2 hold one blob; 3 overlaps 2's
        // end, and 4 starts where 3 ends; 5 is alone.
        let spans = vec![
            (0, 10, 0),
            (5, 12, 0),
            (20, 30, 1),
            (20, 30, 2),
            (28, 40, 3),
            (40, 50, 4),
            (60, 70, 5),
        ];
        assert_eq!(shared_of_spans(spans), vec![20..40]);
        assert!(
            shared_of_spans(vec![(0, 4, 0), (4, 8, 1)]).is_empty(),
            "touching is not sharing"
        );
        assert_eq!(shared_of_spans(vec![(8, 16, 1), (0, 64, 0)]), vec![0..64]);
    }
}
