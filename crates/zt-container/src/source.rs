//! Where a file's bytes come from: a memory map, an owned buffer, positional reads, or
//! ranged reads from elsewhere ([`RangeRead`]: an object store or an HTTP server, implemented
//! above this crate, which knows no network).
//!
//! All of them hand out byte ranges through one bounds-checked call, [`Source::read_at`], which
//! borrows from the map or buffer and reads into a fresh buffer only for the unmapped file.
//!
//! A map can be told what is about to be read: [`Source::will_need`] starts the kernel reading
//! a range the caller is about to touch, and [`Source::prefetch`] has a background thread map
//! ranges the caller will touch next, so that neither the disk nor page faults sit on the
//! caller's path. Both are hints: reads see the same bytes with or without them.

use std::borrow::Cow;
use std::fs::File;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};

use crate::{Error, Result};

/// The bytes of one file.
///
/// Choose [`Source::map`] for speed (zero-copy reads), [`Source::unmapped`] when another process
/// may truncate the file while you read it (a truncated map kills the process with SIGBUS; a
/// positional read just fails), and [`Source::from_vec`] for bytes already in memory.
#[derive(Debug)]
pub enum Source {
    /// A read-only memory map of a file.
    Mapped(Map),
    /// Bytes owned in memory.
    Owned(Vec<u8>),
    /// A file read with positional reads (`pread`), never mapped.
    File {
        /// The open file.
        file: File,
        /// Its length when opened; reads past it are refused.
        len: u64,
    },
    /// Bytes read by range from somewhere else (see [`Source::ranged`]).
    Ranged {
        /// What serves the ranges.
        reader: Arc<dyn RangeRead>,
        /// The object's length; reads past it are refused before they reach `reader`.
        len: u64,
    },
}

/// Ranged reads of one immutable object that is not a local file: the way in for remote
/// sources (an object store, an HTTP server), so that this crate never knows HTTP.
///
/// ```
/// use std::sync::Arc;
/// use zt_container::{RangeRead, Source};
/// #[derive(Debug)]
/// struct Zeros;
/// impl RangeRead for Zeros {
///     fn read_exact_at(&self, _offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
///         buf.fill(0);
///         Ok(())
///     }
/// }
/// let s = Source::ranged(Arc::new(Zeros), 100);
/// assert_eq!(&s.read_at(90, 4)?[..], &[0, 0, 0, 0]);
/// assert!(s.read_at(98, 4).is_err()); // checked against the length, never asked for
/// # Ok::<(), zt_container::Error>(())
/// ```
pub trait RangeRead: Send + Sync + std::fmt::Debug {
    /// Fills `buf` with the bytes at `[offset, offset + buf.len())`, exactly: an
    /// implementation that gets fewer bytes than asked must fail (or retry), never leave part
    /// of `buf` unfilled. The caller has checked the range against the object's length.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;

    /// Fills each `(offset, buf)` part exactly, as [`RangeRead::read_exact_at`] would one by
    /// one (which is what this default does). An implementation whose requests cost more
    /// than their bytes (a network round trip) overrides it to serve nearby parts with one
    /// request and to make independent requests at once. The caller has checked every part
    /// against the object's length.
    fn read_scattered(&self, parts: &mut [(u64, &mut [u8])]) -> std::io::Result<()> {
        for (offset, buf) in parts.iter_mut() {
            self.read_exact_at(*offset, buf)?;
        }
        Ok(())
    }

    /// A hint: `(offset, len)` ranges that are about to be read, in the order they will be.
    /// An implementation may start fetching them now and serve the later reads from what it
    /// fetched; the default ignores it. Must return without waiting for the fetches. The
    /// ranges lie inside the object.
    fn prefetch(&self, ranges: &[(u64, u64)]) {
        let _ = ranges;
    }
}

impl Source {
    /// Maps `path` read-only.
    pub fn map(path: &Path) -> Result<Self> {
        let file = open_for_reading(path)?;
        Self::map_file(&file).map_err(|e| e.in_file(path))
    }

    /// Maps `path` read-only and, on a background thread, maps every page of it in file order
    /// ahead of the caller's reads (reading it into the page cache if it is not there yet).
    ///
    /// For loaders that go on to read every tensor: without it the first touch of every few
    /// pages is a page fault, which makes reading a mapped file 10-50% slower than scanning
    /// memory; with it the faults happen on the second core, ahead of the reader. The thread
    /// works in 32 MiB steps and stops when the source is dropped, or at the first step the
    /// kernel refuses (Linux before 5.14, or a file truncated meanwhile: it never touches
    /// pages itself, so it cannot be the one to get SIGBUS). Linux only; elsewhere this is
    /// [`Source::map`].
    pub fn map_populated(path: &Path) -> Result<Self> {
        Self::populated(Self::map(path)?)
    }

    /// Starts populating a map in the background ([`Source::map_populated`]); other sources
    /// are returned as they are.
    pub fn populated(source: Self) -> Result<Self> {
        #[allow(unused_mut)] // only Linux populates
        let mut source = source;
        #[cfg(target_os = "linux")]
        if let Source::Mapped(map) = &mut source {
            map.populate_in_background();
        }
        Ok(source)
    }

    /// Maps an open file read-only. A pipe or a device is an `InvalidArgument` error, a folder
    /// an I/O error of kind `IsADirectory`: neither has a length to map. A file whose file system cannot map files (`ENODEV`:
    /// some FUSE and network file systems) is read by position instead, as
    /// [`Source::unmapped`] reads it: the same bytes, copied per read.
    pub fn map_file(file: &File) -> Result<Self> {
        Self::map_open_file(file, false)
    }

    /// A map of `file`, shared (read-only) or private (copy-on-write); read by position where
    /// its file system cannot map files.
    fn map_open_file(file: &File, private: bool) -> Result<Self> {
        let len = regular_len(file)?;
        if len == 0 {
            // Some platforms refuse to map an empty file; an empty buffer is the same thing.
            return Ok(Source::Owned(Vec::new()));
        }
        // SAFETY: a shared map is read-only. If another process modifies the file the values
        // we read may change, and if it truncates the file the process gets SIGBUS; both are
        // documented on `Source`, and `Source::unmapped` exists for callers who cannot rule
        // them out. The pages written through a private map are private copies, so the file
        // and other maps of it never see those writes.
        let mapped = if private {
            unsafe { memmap2::MmapOptions::new().map_copy(file) }.map(Mapping::Private)
        } else {
            unsafe { memmap2::Mmap::map(file) }.map(Mapping::Shared)
        };
        match mapped {
            Ok(mapping) => Ok(Source::Mapped(Map::new(mapping))),
            // Read by position: every read is a fresh buffer of the caller's (writable).
            Err(e) if cannot_map_here(&e) => {
                let file = file
                    .try_clone()
                    .map_err(|e| Error::io(e, "cannot open the file again to read it"))?;
                Ok(Source::File { file, len })
            }
            Err(e) => Err(Error::io(e, "cannot map file")),
        }
    }

    /// Maps `path` privately, copy-on-write: the pages are the file's (shared with the page
    /// cache, no copy) until something writes to one, which then gets a private copy of that
    /// page; no write ever reaches the file. For handing out arrays that their users may
    /// write to (numpy and torch tensors are writable), as safetensors hands torch a private
    /// map. This library itself never writes to it. The same caveats as [`Source::map`]:
    /// another process truncating the file kills this one with SIGBUS.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("f");
    /// std::fs::write(&path, b"abc")?;
    /// let s = zt_container::Source::map_private(&path)?;
    /// assert!(s.is_private_map());
    /// assert_eq!(&s.read_at(0, 3)?[..], b"abc");
    /// # Ok::<(), zt_container::Error>(())
    /// ```
    pub fn map_private(path: &Path) -> Result<Self> {
        let file = open_for_reading(path)?;
        Self::map_file_private(&file).map_err(|e| e.in_file(path))
    }

    /// As [`Source::map_private`], for a file already open (one with no name, say).
    ///
    /// ```
    /// use std::io::Write;
    /// let mut file = tempfile::tempfile()?;
    /// file.write_all(b"abc")?;
    /// let s = zt_container::Source::map_file_private(&file)?;
    /// assert!(s.is_private_map());
    /// assert_eq!(&s.read_at(1, 2)?[..], b"bc");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn map_file_private(file: &File) -> Result<Self> {
        Self::map_open_file(file, true)
    }

    /// Whether this is a private, copy-on-write map ([`Source::map_private`]).
    pub fn is_private_map(&self) -> bool {
        matches!(self, Source::Mapped(Map { map, .. }) if matches!(**map, Mapping::Private(_)))
    }

    /// Opens `path` for positional reads without mapping it.
    pub fn unmapped(path: &Path) -> Result<Self> {
        let file = open_for_reading(path)?;
        let len = regular_len(&file).map_err(|e| e.in_file(path))?;
        Ok(Source::File { file, len })
    }

    /// Wraps bytes already in memory.
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        Source::Owned(bytes)
    }

    /// An object of `len` bytes read by range through `reader` (every read is one call to
    /// [`RangeRead::read_exact_at`], after the range is checked against `len`).
    pub fn ranged(reader: Arc<dyn RangeRead>, len: u64) -> Self {
        Source::Ranged { reader, len }
    }

    /// The file's length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Source::Mapped(m) => m.bytes().len() as u64,
            Source::Owned(v) => v.len() as u64,
            Source::File { len, .. } | Source::Ranged { len, .. } => *len,
        }
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All bytes, when they are in memory (mapped or owned); `None` for positional reads.
    pub fn as_slice(&self) -> Option<&[u8]> {
        match self {
            Source::Mapped(m) => Some(m.bytes()),
            Source::Owned(v) => Some(v),
            Source::File { .. } | Source::Ranged { .. } => None,
        }
    }

    /// Whether [`Source::read_at`] borrows instead of copying.
    pub fn is_in_memory(&self) -> bool {
        self.as_slice().is_some()
    }

    /// Whether the whole map seems to be in the page cache, judged by `mincore` of at most
    /// `samples` pages spread evenly over it (and its last page): a guess that reads nothing
    /// and costs a system call per sample. `false` for sources other than maps, for an empty
    /// one, and off Linux.
    ///
    /// ```
    /// let source = zt_container::Source::from_vec(vec![0; 16]);
    /// assert!(!source.seems_cached(64)); // not a map: cannot tell
    /// ```
    pub fn seems_cached(&self, samples: usize) -> bool {
        #[cfg(target_os = "linux")]
        if let Source::Mapped(m) = self {
            let bytes = m.bytes();
            let page = crate::memory::page_size();
            let spacing = (bytes.len() / samples.max(1))
                .next_multiple_of(page)
                .max(page);
            return page_cache_holds_every(bytes, 0, bytes.len(), spacing);
        }
        let _ = samples;
        false
    }

    /// Tells the kernel that `[offset, offset + len)` is about to be read, so that a range not
    /// in the page cache is read in large requests now instead of one fault at a time.
    ///
    /// Returns once the requests are submitted, not read; on Linux at most the first 8 MiB of
    /// the range are asked for (the kernel's own read-ahead follows the reads past that). Only
    /// maps take the hint; it is ignored for the other sources, for ranges outside the file,
    /// and where the platform has no such call.
    pub fn will_need(&self, offset: u64, len: u64) {
        if let (Source::Mapped(m), Ok((start, end))) = (self, self.checked_range(offset, len)) {
            m.will_need(start, end - start);
        }
    }

    /// Reads `[offset, offset + len)` of a map into the page cache and maps it into this
    /// process, on the calling thread, in large sequential requests; returns once done, with
    /// the bytes now in memory (0 where nothing was done). Steps of 32 MiB already in the page
    /// cache are not mapped ahead (`mincore` tells): their first read maps them, from memory.
    ///
    /// For a loader that reads several files at once, one thread each: the disk serves large
    /// concurrent requests instead of faults one page at a time, and the caller's reads then
    /// cost neither. It never touches a page itself: a file truncated meanwhile makes the
    /// kernel refuse (and this stop), never a SIGBUS. Linux 5.14 and later only; elsewhere,
    /// for other sources and for ranges outside the file it does nothing.
    ///
    /// ```
    /// let source = zt_container::Source::from_vec(vec![0; 16]);
    /// assert_eq!(source.populate_now(0, 16), 0); // not a map
    /// ```
    pub fn populate_now(&self, offset: u64, len: u64) -> u64 {
        self.populate_now_stepwise(offset, len, |_| ControlFlow::Continue(()))
    }

    /// As [`Source::populate_now`], calling `step_done(end)` after each step with the offset
    /// the range is now mapped up to, so a caller can hand over what lies before it while the
    /// rest is still coming in; `step_done` returns [`ControlFlow::Break`] to stop there.
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// let source = zt_container::Source::from_vec(vec![0; 16]);
    /// let mut steps = 0;
    /// source.populate_now_stepwise(0, 16, |_| {
    ///     steps += 1;
    ///     ControlFlow::Continue(())
    /// });
    /// assert_eq!(steps, 0); // not a map: nothing done, no step
    /// ```
    pub fn populate_now_stepwise(
        &self,
        offset: u64,
        len: u64,
        mut step_done: impl FnMut(u64) -> ControlFlow<()>,
    ) -> u64 {
        #[cfg(target_os = "linux")]
        if let (Source::Mapped(m), Ok((start, end))) = (self, self.checked_range(offset, len)) {
            return (populate_steps(&m.map, start, end, step_done) - start) as u64;
        }
        let _ = (offset, len, &mut step_done);
        0
    }

    /// Reads the whole map into the page cache on a thread of its own, front to back, as
    /// [`Source::populate_now`] does (parts already cached are skipped), and returns at once:
    /// for a caller that will read all of the file through another map of it (torch maps
    /// each file itself), so that its page faults find the pages in. The thread holds the map
    /// until it is done, past this source's life; the map then goes with it. Returns whether a
    /// thread was started (not for other sources, off Linux, or when no thread can be made).
    ///
    /// ```
    /// let source = zt_container::Source::from_vec(vec![0; 16]);
    /// assert!(!source.populate_whole_in_background()); // not a map
    /// ```
    pub fn populate_whole_in_background(&self) -> bool {
        #[cfg(target_os = "linux")]
        if let Source::Mapped(m) = self {
            let map = Arc::clone(&m.map);
            return std::thread::Builder::new()
                .name("zt-read-whole".into())
                .spawn(move || {
                    populate_steps(&map, 0, map.len(), |_| ControlFlow::Continue(()));
                })
                .is_ok();
        }
        false
    }

    /// Tells the kernel whether to read around the pages this map touches (`false`, the
    /// default) or to read exactly the pages touched (`true`: for a phase of small scattered
    /// reads, such as parsing a header and a footer, where read-around would bring in
    /// megabytes nobody asked for). Pair `true` with [`Source::will_need`] for the ranges that
    /// are read whole. Ignored for sources other than maps and where the platform has no
    /// such call.
    pub fn expect_sparse_reads(&self, sparse: bool) {
        #[cfg(unix)]
        if let Source::Mapped(m) = self {
            let advice = if sparse {
                memmap2::Advice::Random
            } else {
                memmap2::Advice::Normal
            };
            // A refused hint changes nothing but speed.
            let _ = m.map.advise(advice);
        }
        #[cfg(not(unix))]
        let _ = sparse;
    }

    /// Has a background thread read `ranges` (`(offset, len)` pairs) into the page cache and
    /// map them into this process, in order, ahead of the caller's reads of them.
    ///
    /// For a reader that knows what it will read next: the caller's own reads of those
    /// ranges then cost neither a disk wait nor a page fault. The thread is started on the
    /// first call and ends with the map; it never touches a page itself, so a file truncated
    /// meanwhile cannot hurt it. A [`Source::Ranged`] passes the hint to its
    /// [`RangeRead::prefetch`] (a remote object fetches the ranges ahead, a few requests at
    /// once). Ignored for the other sources, for ranges outside the file, and off Linux.
    pub fn prefetch(&self, ranges: &[(u64, u64)]) {
        if let Source::Ranged { reader, .. } = self {
            let inside: Vec<(u64, u64)> = ranges
                .iter()
                .copied()
                .filter(|&(o, l)| l > 0 && self.checked_range(o, l).is_ok())
                .collect();
            if !inside.is_empty() {
                reader.prefetch(&inside);
            }
            return;
        }
        if let Source::Mapped(m) = self {
            let inside: Vec<(usize, usize)> = ranges
                .iter()
                .filter_map(|&(o, l)| self.checked_range(o, l).ok())
                .filter(|(s, e)| e > s)
                .map(|(s, e)| (s, e - s))
                .collect();
            if !inside.is_empty() {
                m.prefetch(inside);
            }
        }
    }

    /// Bytes `[offset, offset + len)`, borrowed when in memory, read otherwise.
    ///
    /// The range is checked against the file's length first, so a hostile offset can never
    /// reach outside the file or cause an allocation larger than the file.
    pub fn read_at(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let (start, end) = self.checked_range(offset, len)?;
        match self {
            Source::Mapped(m) => m.bytes().get(start..end).map(Cow::Borrowed),
            Source::Owned(v) => v.get(start..end).map(Cow::Borrowed),
            Source::File { .. } | Source::Ranged { .. } => {
                // The length is the caller's, often a file's word: refused, not aborted on,
                // when the memory is not there.
                let mut buf =
                    crate::memory::try_zeroed_vec::<u8>(end - start).map_err(|e| e.at(offset))?;
                self.read_into(offset, &mut buf)?;
                return Ok(Cow::Owned(buf));
            }
        }
        .ok_or_else(|| Error::invalid("range outside the file").at(offset))
    }

    /// Fills `buf` from `offset`, checked against the file's length.
    pub fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let (start, end) = self.checked_range(offset, buf.len() as u64)?;
        match self {
            Source::Mapped(m) => copy_from(m.bytes(), start, end, buf, offset),
            Source::Owned(v) => copy_from(v, start, end, buf, offset),
            Source::File { file, .. } => read_exact_at(file, buf, offset)
                .map_err(|e| Error::io(e, format!("cannot read {} bytes", buf.len())).at(offset)),
            Source::Ranged { reader, .. } => reader
                .read_exact_at(offset, buf)
                .map_err(|e| Error::io(e, format!("cannot read {} bytes", buf.len())).at(offset)),
        }
    }

    /// Fills each `(offset, buf)` part, every one checked against the file's length first.
    ///
    /// The same as [`Source::read_into`] on each part, except for a [`Source::Ranged`]
    /// source, whose [`RangeRead::read_scattered`] may fetch nearby parts together and
    /// independent ones at once (a block of columns of a remote tensor: one request, not one
    /// per row).
    ///
    /// ```
    /// let s = zt_container::Source::from_vec((0u8..10).collect());
    /// let (mut a, mut b) = ([0u8; 2], [0u8; 3]);
    /// s.read_scattered(&mut [(1, &mut a[..]), (6, &mut b[..])])?;
    /// assert_eq!((a, b), ([1, 2], [6, 7, 8]));
    /// # Ok::<(), zt_container::Error>(())
    /// ```
    pub fn read_scattered(&self, parts: &mut [(u64, &mut [u8])]) -> Result<()> {
        for (offset, buf) in parts.iter() {
            self.checked_range(*offset, buf.len() as u64)?;
        }
        match self {
            Source::Ranged { reader, .. } => {
                let first = parts.first().map_or(0, |p| p.0);
                let total: usize = parts.iter().map(|p| p.1.len()).sum();
                reader.read_scattered(parts).map_err(|e| {
                    Error::io(e, format!("cannot read {total} bytes in parts")).at(first)
                })
            }
            _ => {
                for (offset, buf) in parts.iter_mut() {
                    self.read_into(*offset, buf)?;
                }
                Ok(())
            }
        }
    }

    /// Whether reads go through a [`RangeRead`] (a remote object), where every request costs
    /// a round trip.
    pub fn is_ranged(&self) -> bool {
        matches!(self, Source::Ranged { .. })
    }

    fn checked_range(&self, offset: u64, len: u64) -> Result<(usize, usize)> {
        let end = offset.checked_add(len).ok_or_else(|| {
            Error::invalid(format!("range of {len} bytes overflows 64 bits")).at(offset)
        })?;
        if end > self.len() {
            return Err(Error::invalid(format!(
                "range of {len} bytes ends at {end}, past the end of the {}-byte file",
                self.len()
            ))
            .at(offset));
        }
        // Both fit in the file, whose length fits in memory or in a positional read.
        let start = usize::try_from(offset).map_err(|_| Error::limit("offset exceeds usize"))?;
        let end = usize::try_from(end).map_err(|_| Error::limit("range exceeds usize"))?;
        Ok((start, end))
    }
}

/// A read-only memory map, with the thread that populates it when one was asked for.
pub struct Map {
    map: Arc<Mapping>,
    /// Dropped with the map: tells the populating thread to stop and let go of it.
    populator: Option<mpsc::Sender<()>>,
    /// The prefetching thread's queue, made on the first [`Source::prefetch`]; `None` inside
    /// when no thread could be started. Dropped with the map, which ends the thread.
    prefetcher: OnceLock<Option<PrefetchQueue>>,
    /// Cleared when the map is dropped: the prefetching thread stops at its next step
    /// instead of reading the rest of what it was handed for nobody.
    prefetch_wanted: Arc<AtomicBool>,
}

impl Drop for Map {
    fn drop(&mut self) {
        self.prefetch_wanted.store(false, AtomicOrdering::Relaxed);
    }
}

/// Batches of `(start, len)` ranges for the prefetching thread.
type PrefetchQueue = mpsc::Sender<Vec<(usize, usize)>>;

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Map")
            .field("len", &self.map.len())
            .field("populated_in_background", &self.populator.is_some())
            .field(
                "prefetching",
                &self.prefetcher.get().is_some_and(|p| p.is_some()),
            )
            .finish()
    }
}

/// How much of a map the populating thread maps per step; it checks between steps whether
/// the map is still wanted.
#[cfg(target_os = "linux")]
const POPULATE_STEP: usize = 32 << 20;

/// How much the prefetching thread maps per call.
#[cfg(target_os = "linux")]
const PREFETCH_STEP: usize = 4 << 20;

/// How far past the step it maps the prefetching thread has already asked the disk to read
/// (`MADV_WILLNEED`, which returns at once): two steps, so that a few requests are in flight
/// instead of only those of the page fault the populate call waits on.
#[cfg(target_os = "linux")]
const PREFETCH_AHEAD: usize = 2 * PREFETCH_STEP;

/// The most a single `MADV_WILLNEED` or `posix_fadvise(WILLNEED)` is made to ask for. Linux
/// reads at most the larger of the file's read-ahead window and the device's largest request
/// per call (`force_page_cache_ra`) and drops the rest without a word: with the benchmark
/// machine's 8 MiB window a 32 MiB hint read 8 MiB, and with the kernel's default window (128 KiB) and a common
/// largest request (1280 KiB) it would read 1.25 MiB. Hints are therefore sent in pieces no
/// larger than the smallest window the kernel defaults to, so that each is read whole on any
/// device. Measured on a 1 GiB file read by 32 MiB populate steps, each next step asked for
/// ahead: asked in 128 KiB pieces or in 8 MiB pieces, 506-626 ms cold; in one call (8 MiB of
/// it read), 679-853 ms. The calls cost about 0.2 ms per MiB asked for, whatever the piece.
#[cfg(target_os = "linux")]
const HINT_PIECE: usize = 128 << 10;

/// The most a lone read's hint asks for ([`Map::will_need`]): what a single hint read on the
/// benchmark machine's disk (its 8 MiB read-ahead window) before hints were sent in pieces,
/// and what every benchmark of lone reads measured. The caller waits while a hint is
/// submitted (about 0.2 ms per MiB); past this, the kernel's own read-ahead follows the pages
/// as they are touched.
#[cfg(target_os = "linux")]
const LONE_HINT_MAX: usize = 8 << 20;

/// The memory of a [`Map`]: a shared read-only map, or a private copy-on-write one.
#[derive(Debug)]
enum Mapping {
    Shared(memmap2::Mmap),
    Private(memmap2::MmapMut),
}

impl std::ops::Deref for Mapping {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Mapping::Shared(m) => m,
            Mapping::Private(m) => m,
        }
    }
}

#[cfg(unix)]
impl Mapping {
    fn advise(&self, advice: memmap2::Advice) -> std::io::Result<()> {
        match self {
            Mapping::Shared(m) => m.advise(advice),
            Mapping::Private(m) => m.advise(advice),
        }
    }

    fn advise_range(&self, advice: memmap2::Advice, at: usize, len: usize) -> std::io::Result<()> {
        match self {
            Mapping::Shared(m) => m.advise_range(advice, at, len),
            Mapping::Private(m) => m.advise_range(advice, at, len),
        }
    }
}

impl Map {
    fn new(mapping: Mapping) -> Self {
        Map {
            map: Arc::new(mapping),
            populator: None,
            prefetcher: OnceLock::new(),
            prefetch_wanted: Arc::new(AtomicBool::new(true)),
        }
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    #[cfg(unix)]
    fn will_need(&self, start: usize, len: usize) {
        // The hint walks the page cache page by page even where every page is there already
        // (about 18 ms per GiB): a range the samples find cached is not worth it. Measured on
        // warm reads in module and random order: 10-15% faster, file order unchanged.
        #[cfg(target_os = "linux")]
        ask_disk_for(&self.map, start, len.min(LONE_HINT_MAX));
        #[cfg(not(target_os = "linux"))]
        let _ = self.map.advise_range(memmap2::Advice::WillNeed, start, len);
    }

    #[cfg(not(unix))]
    fn will_need(&self, _start: usize, _len: usize) {}

    #[cfg(target_os = "linux")]
    fn prefetch(&self, ranges: Vec<(usize, usize)>) {
        let queue = self.prefetcher.get_or_init(|| {
            let (send, receive) = mpsc::channel::<Vec<(usize, usize)>>();
            let map = Arc::clone(&self.map);
            let wanted = Arc::clone(&self.prefetch_wanted);
            std::thread::Builder::new()
                .name("zt-prefetch".into())
                .spawn(move || prefetch_until_dropped(&map, &receive, &wanted))
                .ok()
                .map(|_| send)
        });
        if let Some(queue) = queue {
            // The thread ends only when the map is dropped, so a send cannot fail while
            // `self` lives; if it did, the hint is lost and nothing else.
            let _ = queue.send(ranges);
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn prefetch(&self, _ranges: Vec<(usize, usize)>) {}

    /// Starts a thread that maps every page in order, a step at a time, until done or until
    /// this map is dropped. Faulting pages in is all it does: reads see the same bytes either
    /// way. The thread keeps a reference and lets go of it only once this map is dropped, so
    /// the unmapping (for a large file, page tables of GiBs) happens on that thread too,
    /// off the caller's path.
    #[cfg(target_os = "linux")]
    fn populate_in_background(&mut self) {
        let (stop, stopped) = mpsc::channel::<()>();
        let map = Arc::clone(&self.map);
        let spawned = std::thread::Builder::new()
            .name("zt-populate".into())
            .spawn(move || {
                let mut at = 0usize;
                ask_disk_for(&map, 0, POPULATE_STEP.min(map.len()));
                while at < map.len() && matches!(stopped.try_recv(), Err(mpsc::TryRecvError::Empty))
                {
                    let step = POPULATE_STEP.min(map.len() - at);
                    // The next step is asked for before this one is mapped: the disk has it
                    // queued while this thread waits (see `prefetch_until_dropped`).
                    let next = at + step;
                    ask_disk_for(&map, next, POPULATE_STEP.min(map.len() - next));
                    let advised = map.advise_range(memmap2::Advice::PopulateRead, at, step);
                    if advised.is_err() {
                        break;
                    }
                    at += step;
                }
                // Wait for the owner to drop the map (the channel closes), then unmap here.
                let _ = stopped.recv();
                drop(map);
            });
        // Without a thread there is no prefetch; reads fault pages in themselves.
        if spawned.is_ok() {
            self.populator = Some(stop);
        }
    }
}

/// Maps `map[start..end]` in, front to back, a [`POPULATE_STEP`] at a time, calling
/// `step_done(end of the step)` after each; returns where it stopped. `start..end` lies in
/// the map.
#[cfg(target_os = "linux")]
fn populate_steps(
    map: &Mapping,
    start: usize,
    end: usize,
    mut step_done: impl FnMut(u64) -> ControlFlow<()>,
) -> usize {
    // Each step is asked for (`MADV_WILLNEED`: the kernel submits it in large requests,
    // asynchronously) one step ahead of the one being mapped in, so the disk always has the
    // next piece queued; mapping a cold step alone faults it in with the small read-around of
    // a page fault.
    //
    // A step already in the page cache is left for the first read to map: mapping it now
    // costs as much as that read's faults would, and a caller that reads through a map of
    // its own (torch maps each file itself) gains nothing from ours. Measured: a warm 1 GiB
    // set into a torch model, 1.23x safetensors' time with it, 0.96x without.
    let mut at = start;
    let mut cached = !ask_disk_for(map, at, POPULATE_STEP.min(end - at));
    while at < end {
        let step = POPULATE_STEP.min(end - at);
        let next = at + step;
        // Past the end the range is empty: nothing is asked for and nothing mapped.
        let next_cached = !ask_disk_for(map, next, POPULATE_STEP.min(end - next));
        if !cached
            && map
                .advise_range(memmap2::Advice::PopulateRead, at, step)
                .is_err()
        {
            break;
        }
        cached = next_cached;
        at = next;
        if step_done(at as u64).is_break() {
            break;
        }
    }
    at
}

/// Asks the kernel to start reading `map[start..start + len]` from the disk (`MADV_WILLNEED`
/// in [`HINT_PIECE`]s, which return once submitted), unless it seems to be in the page cache
/// already: the hint walks the page cache page by page even where every page is there. Empty
/// ranges ask for nothing. Returns whether it asked: `false` means the range is empty or
/// seems cached already.
#[cfg(target_os = "linux")]
fn ask_disk_for(map: &Mapping, start: usize, len: usize) -> bool {
    if len == 0 || page_cache_holds(map, start, len) {
        return false;
    }
    for_each_hint_piece(start as u64, len as u64, |at, piece| {
        // A refused hint changes nothing but speed. The pieces lie in `start..start + len`,
        // a range of the map, so they fit a `usize`.
        let _ = map.advise_range(memmap2::Advice::WillNeed, at as usize, piece as usize);
    });
    true
}

/// Calls `hint(offset, len)` for each piece of `start..start + len`, front to back: pieces of
/// [`HINT_PIECE`], the last one shorter, so that the kernel reads every hint whole.
#[cfg(target_os = "linux")]
fn for_each_hint_piece(start: u64, len: u64, mut hint: impl FnMut(u64, u64)) {
    let end = start.saturating_add(len);
    let mut at = start;
    while at < end {
        let piece = (HINT_PIECE as u64).min(end - at);
        hint(at, piece);
        at += piece;
    }
}

/// Whether `bytes[start..start + len]` (a live map) is in the page cache, judged by one page
/// in every [`RESIDENCY_SAMPLE`] and the last one (`mincore`, which neither reads nor maps
/// anything); `false` where it cannot tell. Sampled, because asking for every page costs a
/// page-cache lookup each: 18 ms per GiB, most of a warm set's load.
#[cfg(target_os = "linux")]
fn page_cache_holds(bytes: &[u8], start: usize, len: usize) -> bool {
    page_cache_holds_every(bytes, start, len, RESIDENCY_SAMPLE)
}

/// [`page_cache_holds`], one page in every `spacing` bytes (a multiple of the page size).
#[cfg(target_os = "linux")]
fn page_cache_holds_every(bytes: &[u8], start: usize, len: usize, spacing: usize) -> bool {
    let page = crate::memory::page_size();
    let Some(end) = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len() && len > 0)
    else {
        return false;
    };
    let first = start - start % page;
    let last = (end - 1) - (end - 1) % page;
    let resident = |at: usize| {
        let mut flag = 0u8;
        // SAFETY: `at` is a page boundary inside the live map `bytes` (`first..=last` lie in
        // it and maps start on a page boundary), and `flag` holds the one byte mincore
        // writes for one page. mincore reads the page tables only.
        let rc =
            unsafe { libc::mincore(bytes.as_ptr().add(at) as *mut libc::c_void, 1, &mut flag) };
        rc == 0 && flag & 1 == 1
    };
    let spacing = spacing.max(1);
    // The last page is asked about apart unless the steps land on it (a range within one
    // page: one call, not two; a slice of a small tensor pays for each).
    (first..=last).step_by(spacing).all(resident)
        && ((last - first) % spacing == 0 || resident(last))
}

/// How far apart the pages [`page_cache_holds`] asks about lie.
#[cfg(target_os = "linux")]
const RESIDENCY_SAMPLE: usize = 1 << 20;

/// The prefetching thread: maps each batch of ranges in order, a step at a time, until the
/// map's owner drops the queue, or drops the map (`wanted` cleared), which stops it at the
/// next step: a reader dropped early left this thread reading up to a window (64 MiB) more
/// for nobody, on the disk the next reader needs.
///
/// Mapping a page that is not in the page cache reads it, with the kernel's read-around, on
/// this thread; the next [`PREFETCH_AHEAD`] bytes of the range are asked for before each
/// step is mapped, so the disk has the next requests queued while this one is waited on.
/// Without that, a sweep in file order was one stream of synchronous faults, which this VM's
/// virtual disk served at a third of its speed whenever it was busy (the cold load told
/// `expect_to_read_all` took 2.7-3.5 s in the bench, 1.1-1.2 s with it). Asking for a whole
/// batch at once was tried and measured slower: for ranges of tens of MiB the call submits
/// all of it before it returns, and the first pages the caller waits for come no sooner.
#[cfg(target_os = "linux")]
fn prefetch_until_dropped(
    map: &Mapping,
    batches: &mpsc::Receiver<Vec<(usize, usize)>>,
    wanted: &AtomicBool,
) {
    while let Ok(batch) = batches.recv() {
        for (start, len) in batch {
            let mut at = start;
            let end = start.saturating_add(len);
            // How far past `at` the disk has been asked to read.
            let mut asked = start;
            while at < end {
                if !wanted.load(AtomicOrdering::Relaxed) {
                    return; // the map's owner is gone: nobody will read the rest
                }
                let step = PREFETCH_STEP.min(end - at);
                let ahead = end.min(at.saturating_add(step).saturating_add(PREFETCH_AHEAD));
                while asked < ahead {
                    let piece = PREFETCH_STEP.min(ahead - asked);
                    ask_disk_for(map, asked, piece);
                    asked += piece;
                }
                // Refused for a file truncated meanwhile (the caller's own read reports that)
                // or by a kernel before 5.14 (no populate call): either way, done here.
                if map
                    .advise_range(memmap2::Advice::PopulateRead, at, step)
                    .is_err()
                {
                    return;
                }
                at += step;
            }
        }
    }
}

fn copy_from(bytes: &[u8], start: usize, end: usize, buf: &mut [u8], offset: u64) -> Result<()> {
    let src = bytes
        .get(start..end)
        .ok_or_else(|| Error::invalid("range outside the file").at(offset))?;
    buf.copy_from_slice(src);
    Ok(())
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// Whether a map failed because the file's file system maps no files (`ENODEV`), not
/// because of this file or the process's limits: such a file is read by position instead.
fn cannot_map_here(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    return e.raw_os_error() == Some(libc::ENODEV);
    #[cfg(not(unix))]
    return false;
}

/// What a file that is not a regular one is, for [`not_a_regular_file`].
fn kind_of_file(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a pipe";
        } else if file_type.is_char_device() {
            return "a character device";
        } else if file_type.is_block_device() {
            return "a block device";
        } else if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a folder"
    } else {
        "a special file"
    }
}

/// Opens `path` for reading. On Unix a FIFO is opened without waiting for a writer (an open
/// for reading blocks until one comes), so that naming one gets [`regular_len`]'s error
/// instead of a hang; the flag is taken off again once the file is known to be regular.
fn open_for_reading(path: &Path) -> Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options
        .open(path)
        .map_err(|e| Error::io(e, "cannot open file").in_file(path))?;
    #[cfg(unix)]
    if file.metadata().is_ok_and(|m| m.is_file()) {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: F_GETFL and F_SETFL on a descriptor this function owns; they read and set
        // its status flags and touch no memory.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
    }
    Ok(file)
}

/// The length of `file`, which must be a regular file: a pipe, a terminal, a device or a
/// folder has no length to map or read by position (their `stat` size is 0 or meaningless),
/// and is refused as the caller's mistake, saying what it is.
fn regular_len(file: &File) -> Result<u64> {
    let meta = file
        .metadata()
        .map_err(|e| Error::io(e, "cannot stat file"))?;
    if meta.is_file() {
        return Ok(meta.len());
    }
    Err(not_a_regular_file(
        &meta.file_type(),
        "tensor files are mapped or read by position (save a stream to a file first)",
    ))
}

/// The error for a path that is not a regular file, saying what it is and `why` that
/// matters: a folder is an I/O error of kind `IsADirectory` (what `except IsADirectoryError`
/// catches in Python, and what opening one as a file gives elsewhere), anything else the
/// caller's `InvalidArgument`.
pub(crate) fn not_a_regular_file(file_type: &std::fs::FileType, why: &str) -> Error {
    let what = kind_of_file(file_type);
    if file_type.is_dir() {
        #[cfg(unix)]
        let source = std::io::Error::from_raw_os_error(libc::EISDIR);
        #[cfg(not(unix))]
        let source = std::io::Error::from(std::io::ErrorKind::IsADirectory);
        return Error::io(source, format!("{what}, not a regular file: {why}"));
    }
    Error::argument(format!("{what}, not a regular file: {why}"))
}

impl Source {
    /// Asks the kernel to start reading the first `len` bytes of the file at `path` into the
    /// page cache, in the background (`posix_fadvise(WILLNEED)` on Linux; nothing elsewhere):
    /// for a file about to be read whole (the next shard of a set being loaded), so that the
    /// disk is already busy with it when its reader opens. The caller waits while the requests
    /// are submitted (about 0.2 ms per MiB asked for), not while they are read. Errors (a
    /// missing file) are left for the open that follows to report.
    ///
    /// ```
    /// zt_container::Source::will_need_file(std::path::Path::new("/no/such/file"), 1 << 20);
    /// ```
    pub fn will_need_file(path: &std::path::Path, len: u64) {
        #[cfg(target_os = "linux")]
        if let Ok((file, file_len)) =
            open_for_reading(path).and_then(|f| regular_len(&f).map(|n| (f, n)))
        {
            use std::os::fd::AsRawFd;
            // In pieces, as every hint, and no further than the file goes.
            for_each_hint_piece(0, len.min(file_len), |at, piece| {
                let (Ok(at), Ok(piece)) = (libc::off_t::try_from(at), libc::off_t::try_from(piece))
                else {
                    return;
                };
                // SAFETY: the descriptor is open for the call; the advice reads nothing into
                // our memory and its failure changes nothing but speed.
                unsafe {
                    libc::posix_fadvise(file.as_raw_fd(), at, piece, libc::POSIX_FADV_WILLNEED);
                }
            });
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (path, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A hint larger than the kernel reads per call (its read-ahead window: 8 MiB on the
    /// benchmark machine, 128 KiB by default) is read whole: a 24 MiB hint, on a map and on a
    /// file, brings in all 24 MiB. One call read only the window's worth.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_hint_larger_than_the_read_ahead_window_is_read_whole() {
        use std::os::fd::AsRawFd;
        const LEN: usize = 24 << 20;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cold.bin");
        let file = {
            let mut f = File::create(&path).unwrap();
            f.write_all(&vec![7u8; LEN]).unwrap();
            f.sync_all().unwrap();
            drop(f);
            File::open(&path).unwrap()
        };
        // SAFETY: the file is this test's own, and nothing changes it while it is mapped.
        let map = Mapping::Shared(unsafe { memmap2::Mmap::map(&file) }.unwrap());
        let drop_pages = || {
            // SAFETY: the descriptor is open; the advice only drops clean cached pages.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        };
        let resident = |len: usize| {
            (0..len)
                .step_by(4096)
                .all(|at| page_cache_holds(&map, at, 1))
        };
        let all_in_soon = || {
            let start = std::time::Instant::now();
            while start.elapsed() < std::time::Duration::from_secs(20) {
                if resident(LEN) {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            false
        };
        drop_pages();
        if resident(LEN) {
            return; // a file system that keeps every page (tmpfs): nothing to show here
        }
        assert!(ask_disk_for(&map, 0, LEN));
        assert!(
            all_in_soon(),
            "a hint on the map left pages out of the page cache"
        );
        drop_pages();
        Source::will_need_file(&path, LEN as u64);
        assert!(
            all_in_soon(),
            "a hint on the file left pages out of the page cache"
        );
    }

    /// A regular file on a file system that maps no files (sysfs here, which refuses a map
    /// of an attribute with ENODEV, as some FUSE and network file systems do) is read by
    /// position instead of refused.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_the_file_system_cannot_map_is_read_by_position() {
        let path = Path::new("/sys/kernel/mm/transparent_hugepage/enabled");
        let Ok(expected) = std::fs::read(path) else {
            return; // no such file in this container: nothing to show
        };
        for s in [
            Source::map(path).unwrap(),
            Source::map_private(path).unwrap(),
        ] {
            assert!(matches!(s, Source::File { .. }), "{s:?}");
            let n = expected.len().min(4) as u64;
            assert_eq!(&s.read_at(0, n).unwrap()[..], &expected[..n as usize]);
        }
    }

    /// A pipe, a device or a folder has no length: each open says what it is, as the
    /// caller's mistake, and a FIFO no one writes to does not make the open wait (it would,
    /// opened as a plain file is). A regular file opened the same way still reads and maps.
    #[cfg(unix)]
    #[test]
    fn what_is_not_a_regular_file_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        crate::test_support::make_fifo(&fifo);
        let (tx, rx) = mpsc::channel();
        let paths = [fifo.clone(), "/dev/null".into(), dir.path().to_path_buf()];
        std::thread::spawn(move || {
            for p in &paths {
                let outcomes = [
                    Source::map(p).err(),
                    Source::map_private(p).err(),
                    Source::unmapped(p).err(),
                ];
                Source::will_need_file(p, 1 << 20);
                tx.send(outcomes.map(|e| e.map(|e| (e.kind(), e.to_string()))))
                    .unwrap();
            }
        });
        for what in ["a pipe", "a character device", "a folder"] {
            let outcomes = rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .expect("opening a FIFO waited for a writer");
            for outcome in outcomes {
                let (kind, message) = outcome.expect("not a regular file, yet opened");
                let want = if what == "a folder" {
                    crate::ErrorKind::Io // IsADirectory, as Python's callers expect
                } else {
                    crate::ErrorKind::InvalidArgument
                };
                assert_eq!(kind, want, "{message}");
                assert!(
                    message.contains(&format!("{what}, not a regular file")),
                    "{message}"
                );
            }
        }
        let regular = dir.path().join("f");
        std::fs::write(&regular, b"abc").unwrap();
        for s in [
            Source::map(&regular).unwrap(),
            Source::map_private(&regular).unwrap(),
            Source::unmapped(&regular).unwrap(),
        ] {
            assert_eq!(&s.read_at(0, 3).unwrap()[..], b"abc");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn page_cache_residency_is_read_without_touching_the_map() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&vec![7u8; 3 << 20]).unwrap(); // just written: in the page cache
        let source = Source::map(f.path()).unwrap();
        let Source::Mapped(m) = &source else {
            panic!("not mapped")
        };
        assert!(page_cache_holds(m.bytes(), 5000, 2 << 20));
        // Empty, or past the end: cannot tell.
        assert!(!page_cache_holds(m.bytes(), 5000, 0));
        assert!(!page_cache_holds(m.bytes(), 1 << 20, 3 << 20));
        // A hole never read is in no cache.
        let f = holes(8 << 20);
        let source = Source::map(f.path()).unwrap();
        let Source::Mapped(m) = &source else {
            panic!("not mapped")
        };
        assert!(!page_cache_holds(m.bytes(), 0, 8 << 20));
        source.populate_now(0, 8 << 20);
        assert!(page_cache_holds(m.bytes(), 0, 8 << 20));
    }

    /// A file of `len` bytes of holes: never read, so in no cache, and reading it costs no
    /// disk. The file goes when the handle does.
    #[cfg(target_os = "linux")]
    fn holes(len: u64) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        f.as_file().set_len(len).unwrap();
        f
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_prefetching_thread_stops_once_the_map_is_dropped() {
        let f = holes(16 << 20);
        let source = Source::map(f.path()).unwrap();
        let Source::Mapped(m) = &source else {
            panic!("not mapped")
        };
        let batch = || {
            let (send, receive) = mpsc::channel();
            send.send(vec![(0usize, 16usize << 20)]).unwrap();
            receive
        };
        // Handed a batch, but the map's owner is gone: nothing of it is read.
        prefetch_until_dropped(&m.map, &batch(), &AtomicBool::new(false));
        assert!(!page_cache_holds(m.bytes(), 0, 16 << 20));
        // The same batch while the map is wanted is read.
        prefetch_until_dropped(&m.map, &batch(), &AtomicBool::new(true));
        assert!(page_cache_holds(m.bytes(), 0, 16 << 20));
        // Dropping the map is what says so.
        let wanted = Arc::clone(&m.prefetch_wanted);
        assert!(wanted.load(AtomicOrdering::Relaxed));
        drop(source);
        assert!(!wanted.load(AtomicOrdering::Relaxed));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_whole_file_read_in_the_background_outlives_its_source() {
        let f = holes(40 << 20);
        let source = Source::map(f.path()).unwrap();
        assert!(source.populate_whole_in_background());
        drop(source);
        let again = Source::map(f.path()).unwrap();
        let Source::Mapped(m) = &again else {
            panic!("not mapped")
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !page_cache_holds(m.bytes(), 0, 40 << 20) {
            assert!(
                std::time::Instant::now() < deadline,
                "the background read never got there"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn populating_now_reports_each_step_as_it_is_mapped() {
        let f = holes(70 << 20);
        let source = Source::map(f.path()).unwrap();
        let mut steps = Vec::new();
        assert_eq!(
            source.populate_now_stepwise(1 << 20, 69 << 20, |end| {
                steps.push(end >> 20);
                ControlFlow::Continue(())
            }),
            69 << 20
        );
        assert_eq!(steps, [33, 65, 70]);
        // Stopped after the first step: that step is all it did.
        let done = source.populate_now_stepwise(0, 70 << 20, |_| ControlFlow::Break(()));
        assert_eq!(done, 32 << 20);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_truncated_while_populating_stops_the_thread_without_a_signal() {
        // 256 MiB: populating takes a while.
        let f = holes(256 << 20);
        let source = Source::map_populated(f.path()).unwrap();
        assert!(format!("{source:?}").contains("populated_in_background: true"));
        // Cut the file under the running thread. Touching a page past the new end would kill
        // this process with SIGBUS; the kernel's populate call refuses instead.
        f.as_file().set_len(4096).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(source.read_at(0, 8).unwrap().as_ref(), [0u8; 8]);
        drop(source);
    }

    fn sources(bytes: &[u8]) -> (tempfile::NamedTempFile, Vec<Source>) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        f.flush().unwrap();
        let all = vec![
            Source::map(f.path()).unwrap(),
            Source::unmapped(f.path()).unwrap(),
            Source::from_vec(bytes.to_vec()),
        ];
        (f, all)
    }

    #[test]
    fn every_source_reads_the_same_and_refuses_out_of_range() {
        let (_keep, all) = sources(b"0123456789");
        for s in &all {
            assert_eq!(s.len(), 10);
            assert_eq!(&*s.read_at(2, 3).unwrap(), b"234");
            assert_eq!(&*s.read_at(10, 0).unwrap(), b"");
            assert!(s.read_at(8, 3).is_err());
            assert!(s.read_at(u64::MAX, 2).is_err());
            let mut b = [0u8; 4];
            s.read_into(6, &mut b).unwrap();
            assert_eq!(&b, b"6789");
        }
        assert!(matches!(all[0].read_at(0, 1).unwrap(), Cow::Borrowed(_)));
        assert!(matches!(all[1].read_at(0, 1).unwrap(), Cow::Owned(_)));
    }

    #[test]
    fn empty_file_maps_to_empty_source() {
        let (_keep, all) = sources(b"");
        for s in &all {
            assert!(s.is_empty());
        }
    }

    #[test]
    fn hints_change_no_byte_and_ignore_ranges_outside_the_file() {
        let bytes: Vec<u8> = (0..(3 << 20)).map(|i: u32| (i % 251) as u8).collect();
        let (_keep, all) = sources(&bytes);
        for s in &all {
            s.expect_sparse_reads(true);
            s.will_need(4096, 1 << 20);
            s.will_need(u64::MAX - 1, 10);
            s.prefetch(&[
                (0, 1 << 20),
                (2 << 20, 1 << 20),
                (u64::MAX, 2),
                (3 << 20, 1),
            ]);
            s.expect_sparse_reads(false);
            assert_eq!(&*s.read_at(0, 3 << 20).unwrap(), &bytes[..]);
        }
        // The prefetching thread ends with the map: dropping it does not wait or hang.
        drop(all);
    }
}
