//! One remote object read by range: [`RemoteObject`] implements zt-container's
//! [`RangeRead`], so a [`Source`] over it reads like any file.
//!
//! What it keeps, and so what opening costs:
//! - the **head**: the first [`HEAD_LEN`] bytes, read when the object is opened (that one
//!   request also tells the object's size). The kind of file is told from them, and a
//!   safetensors header that fits is in them: a safetensors header costs one request, or two
//!   when it is larger (the rest is one more).
//! - the **tail**: the last [`TAIL_LEN`] bytes, read speculatively by the first read that
//!   falls in them (a `.zt` footer): the footer and a manifest that fits cost one request, a
//!   larger manifest one more (only the part before the tail is asked for).
//! - **ranges fetched ahead** ([`RangeRead::prefetch`], given by the reader's read-ahead when
//!   reads follow an order, and by [`crate::Reader::parallel_objects_whole`]): ranges at
//!   most [`COALESCE_GAP`] apart are fetched as one request of at most [`MAX_COALESCED`]
//!   bytes, at most [`PREFETCH_BUDGET`] bytes are held, and each is dropped once read.
//! - nothing else: every other read is one request for exactly its range (a tensor), or, for
//!   scattered parts ([`RangeRead::read_scattered`]: a block of columns), one request per
//!   group of nearby parts.
//!
//! A server that ignores ranges (one that answers a ranged GET with the whole object, as
//! Python's `http.server` does) is read whole instead, once, when the object is opened: its
//! bytes go to an unnamed temporary file in the system's temporary folder (`TMPDIR`), which
//! the system removes when the object is dropped or the process ends however it ends, and
//! are read from there ([`RemoteObject::is_downloaded`]). The download is checked to be as
//! long as the server declared.
//!
//! Every request is checked to be exactly as long as asked and retried a few times if not;
//! at most [`DEFAULT_REQUESTS_IN_FLIGHT`] (or what
//! [`OpenOptions::requests_in_flight`](crate::OpenOptions::requests_in_flight) says) are in
//! flight at once for one object, however many threads read it.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

use object_store::path::Path as StorePath;
use object_store::{GetOptions, GetRange, ObjectStore};
use tokio::sync::Semaphore;
use zt_container::{Error, RangeRead, Result, Source};

use super::store::{one_line, runtime};

/// Bytes read from the start of an object when it is opened.
pub const HEAD_LEN: u64 = 64 << 10;
/// Bytes read from the end of an object by the first read that needs any of them.
pub const TAIL_LEN: u64 = 1 << 20;
/// Ranges at most this far apart are fetched in one request: skipping a megabyte costs less
/// than a round trip to any store (object_store's own `get_ranges` draws the line at the same
/// place).
pub const COALESCE_GAP: u64 = 1 << 20;
/// The largest request made of several ranges (one range larger than this is one request of
/// its own size): what one response may hold in memory beyond the bytes asked for.
pub const MAX_COALESCED: u64 = 16 << 20;
/// Requests in flight at once for one object, unless the options say otherwise.
pub const DEFAULT_REQUESTS_IN_FLIGHT: usize = 8;
/// Bytes fetched ahead and not yet read that one object holds at most; ranges beyond it are
/// not fetched ahead (their reads fetch them).
pub const PREFETCH_BUDGET: u64 = 256 << 20;
/// Groups fetched ahead and not yet read that one object holds at most.
const MAX_PREFETCHED: usize = 4096;
/// How many times one range is asked for before its error is returned (object_store also
/// retries server errors and failed connections within each attempt).
const ATTEMPTS: u32 = 3;

/// Requests made and bytes received, for one object.
#[derive(Debug, Default)]
pub struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// What a remote object has cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteStats {
    /// Ranged GET requests that returned (object_store's own retries not counted).
    pub requests: u64,
    /// Bytes received in them.
    pub bytes: u64,
}

/// What makes requests for one object: the store, the path, the bound on requests in flight
/// and the counters. Shared with the tasks that fetch ahead.
#[derive(Debug)]
struct Fetcher {
    store: Arc<dyn ObjectStore>,
    path: StorePath,
    /// The URL as messages show it (no credentials).
    shown: String,
    in_flight: Semaphore,
    counters: Counters,
}

impl Fetcher {
    /// Exactly the bytes `range`, in one request once a place in flight is free; asked
    /// again when the answer is short or fails.
    async fn get_exact(&self, range: Range<u64>) -> std::result::Result<bytes::Bytes, String> {
        let _permit = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| format!("{}: the request queue was closed", self.shown))?;
        let want = range.end - range.start;
        let mut last = None;
        for _ in 0..ATTEMPTS {
            match self.store.get_range(&self.path, range.clone()).await {
                Ok(bytes) => {
                    self.counters.requests.fetch_add(1, Ordering::Relaxed);
                    self.counters
                        .bytes
                        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                    if bytes.len() as u64 == want {
                        return Ok(bytes);
                    }
                    last = Some(format!(
                        "the server returned {} bytes for a range of {want}",
                        bytes.len()
                    ));
                }
                Err(e) => last = Some(store_error(e, &self.shown).to_string()),
            }
        }
        Err(format!(
            "{}: bytes {}..{}: {} (after {ATTEMPTS} attempts)",
            self.shown,
            range.start,
            range.end,
            last.unwrap_or_default()
        ))
    }
}

/// The answer to one request made ahead, filled by the task that made it.
#[derive(Debug, Default)]
struct Slot {
    value: Mutex<Option<std::result::Result<bytes::Bytes, String>>>,
    ready: Condvar,
}

impl Slot {
    fn fill(&self, value: std::result::Result<bytes::Bytes, String>) {
        *self.value.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
        self.ready.notify_all();
    }

    /// The answer, once it is there.
    fn wait(&self) -> std::result::Result<bytes::Bytes, String> {
        let mut value = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(v) = value.as_ref() {
                return v.clone();
            }
            value = self
                .ready
                .wait(value)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn is_filled(&self) -> bool {
        self.value
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}

/// One request made ahead: the span it covers and what of it is still to be read.
#[derive(Debug)]
struct Chunk {
    end: u64,
    /// Bytes of the ranges asked for (the gaps between them not counted).
    wanted: u64,
    /// Bytes read from it so far; at `wanted` it is dropped.
    read: u64,
    slot: Arc<Slot>,
}

/// The requests made ahead and not yet read, by (start, order made).
#[derive(Debug, Default)]
struct Ahead {
    chunks: BTreeMap<(u64, u64), Chunk>,
    /// Bytes the chunks span.
    held: u64,
    made: u64,
}

impl Ahead {
    /// The chunk that holds all of `range`, if one does (the few that start nearest before
    /// it are looked at: chunks rarely overlap).
    fn holding(&self, range: &Range<u64>) -> Option<(u64, u64)> {
        self.chunks
            .range(..=(range.start, u64::MAX))
            .rev()
            .take(8)
            .find(|(_, c)| c.end >= range.end)
            .map(|(k, _)| *k)
    }

    fn remove(&mut self, key: (u64, u64)) {
        if let Some(c) = self.chunks.remove(&key) {
            self.held = self.held.saturating_sub(c.end - key.0);
        }
    }

    /// Drops answered chunks, oldest first, until `need` more bytes fit in the budget;
    /// whether they do.
    fn make_room(&mut self, need: u64) -> bool {
        while self.held.saturating_add(need) > PREFETCH_BUDGET
            || self.chunks.len() >= MAX_PREFETCHED
        {
            let oldest = self
                .chunks
                .iter()
                .filter(|(_, c)| c.slot.is_filled())
                .min_by_key(|(k, _)| k.1)
                .map(|(k, _)| *k);
            match oldest {
                Some(k) => self.remove(k),
                None => return false,
            }
        }
        true
    }
}

/// An object in a store, with its head and tail cached.
#[derive(Debug)]
pub struct RemoteObject {
    fetcher: Arc<Fetcher>,
    size: u64,
    head: Vec<u8>,
    tail: OnceLock<Vec<u8>>,
    ahead: Mutex<Ahead>,
    /// The whole object in an unnamed temporary file, when its server ignores ranges; every
    /// read is served from it.
    downloaded: Option<Downloaded>,
}

/// An object read whole: its unnamed temporary file, and a map of it that serves this
/// object's own ranged reads.
#[derive(Debug)]
struct Downloaded {
    file: std::fs::File,
    map: Source,
}

impl RemoteObject {
    /// Opens `path` in `store`: one request, for the head, which also tells the size. At
    /// most `requests_in_flight` (at least 1) requests for it are in flight at once.
    pub fn open(
        store: Arc<dyn ObjectStore>,
        path: StorePath,
        shown: String,
        requests_in_flight: usize,
    ) -> Result<Self> {
        Self::open_downloading_at_most(store, path, shown, requests_in_flight, u64::MAX)
    }

    /// As [`RemoteObject::open`]; when the server ignores ranges, an object larger than
    /// `max_download` bytes is refused (`LimitExceeded`) before any of it is read, instead of
    /// being read whole (for small files such as a set's index).
    pub fn open_downloading_at_most(
        store: Arc<dyn ObjectStore>,
        path: StorePath,
        shown: String,
        requests_in_flight: usize,
        max_download: u64,
    ) -> Result<Self> {
        let fetcher = Fetcher {
            store,
            path,
            shown,
            in_flight: Semaphore::new(requests_in_flight.clamp(1, Semaphore::MAX_PERMITS)),
            counters: Counters::default(),
        };
        let rt = runtime()?;
        let options = GetOptions {
            range: Some(GetRange::Bounded(0..HEAD_LEN)),
            ..Default::default()
        };
        let result = rt.block_on(async {
            let r = fetcher.store.get_opts(&fetcher.path, options).await?;
            let size = r.meta.size;
            let got = r.range.clone();
            let bytes = r.bytes().await?;
            Ok::<_, object_store::Error>((size, got, bytes))
        });
        let result = match result {
            // The server answered the ranged request with the whole object.
            Err(object_store::Error::NotSupported { .. }) => {
                let (size, file) = rt.block_on(download(&fetcher, max_download))?;
                let map = Source::map_file(&file)?;
                return Ok(RemoteObject {
                    fetcher: Arc::new(fetcher),
                    size,
                    head: Vec::new(),
                    tail: OnceLock::new(),
                    ahead: Mutex::default(),
                    downloaded: Some(Downloaded { file, map }),
                });
            }
            other => other.map_err(|e| store_error(e, &fetcher.shown))?,
        };
        let (size, got, bytes) = result;
        fetcher.counters.requests.fetch_add(1, Ordering::Relaxed);
        fetcher
            .counters
            .bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let want = 0..HEAD_LEN.min(size);
        if got != want || bytes.len() as u64 != want.end {
            return Err(Error::invalid(format!(
                "{}: the server returned {} bytes (range {got:?}) for bytes {want:?} of a \
                 {size}-byte object",
                fetcher.shown,
                bytes.len()
            )));
        }
        Ok(RemoteObject {
            fetcher: Arc::new(fetcher),
            size,
            head: bytes.to_vec(),
            tail: OnceLock::new(),
            ahead: Mutex::default(),
            downloaded: None,
        })
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether the object was read whole when it was opened (its server ignores ranges), so
    /// that every read is local.
    pub fn is_downloaded(&self) -> bool {
        self.downloaded.is_some()
    }

    /// A [`Source`] over the object: ranged reads through it, or, when it was read whole, a
    /// private (copy-on-write) map of its temporary file: zero-copy reads, and arrays handed
    /// out of it writable, as the owned copies of ranged reads are.
    pub fn source(self: &Arc<Self>) -> Result<Source> {
        match &self.downloaded {
            Some(d) => Source::map_file_private(&d.file),
            None => Ok(Source::ranged(self.clone(), self.size)),
        }
    }

    /// Requests and bytes so far.
    pub fn stats(&self) -> RemoteStats {
        let c = &self.fetcher.counters;
        RemoteStats {
            requests: c.requests.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
        }
    }

    /// The first byte the tail covers.
    fn tail_start(&self) -> u64 {
        self.size
            .saturating_sub(TAIL_LEN)
            .max(self.head.len() as u64)
    }

    /// Whether `range` touches the head or the tail (served from them, not fetched ahead or
    /// grouped).
    fn touches_cache(&self, range: &Range<u64>) -> bool {
        range.start < self.head.len() as u64
            || (range.end > self.tail_start() && self.size > self.head.len() as u64)
    }

    /// The part of `range` that neither the head nor the tail holds (the reads of a range
    /// that straddles one take the rest from it).
    fn outside_caches(&self, range: Range<u64>) -> Range<u64> {
        let head_len = self.head.len() as u64;
        let start = range.start.max(head_len);
        let end = if self.size > head_len {
            range.end.min(self.tail_start())
        } else {
            range.end
        };
        start..end.max(start)
    }

    /// Exactly the bytes `range`, in one request (retried when the answer is short or fails).
    fn fetch(&self, range: Range<u64>) -> std::io::Result<bytes::Bytes> {
        let rt = runtime().map_err(std::io::Error::other)?;
        rt.block_on(self.fetcher.get_exact(range))
            .map_err(std::io::Error::other)
    }

    /// The tail, read on first use.
    fn tail(&self) -> std::io::Result<&[u8]> {
        if let Some(t) = self.tail.get() {
            return Ok(t);
        }
        let bytes = self.fetch(self.tail_start()..self.size)?;
        let _ = self.tail.set(bytes.to_vec());
        Ok(self.tail.get().map(Vec::as_slice).unwrap_or_default())
    }

    /// Fills `buf` from a request made ahead that holds all of it (waiting for its answer);
    /// `false` when none does or its request failed (the caller fetches the bytes itself, so
    /// a failure ahead is retried or reported there, never a wrong tensor).
    fn take_ahead(&self, offset: u64, buf: &mut [u8]) -> bool {
        let range = offset..offset + buf.len() as u64;
        let lock = || self.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        let found = {
            let ahead = lock();
            ahead
                .holding(&range)
                .and_then(|k| Some((k, ahead.chunks.get(&k)?.slot.clone())))
        };
        let Some((key, slot)) = found else {
            return false;
        };
        let answer = slot.wait();
        let mut ahead = lock();
        let copied = answer.ok().and_then(|bytes| {
            let from = usize::try_from(range.start - key.0).ok()?;
            let src = bytes.get(from..from.checked_add(buf.len())?)?;
            buf.copy_from_slice(src);
            Some(())
        });
        if copied.is_none() {
            ahead.remove(key);
            return false;
        }
        if let Some(c) = ahead.chunks.get_mut(&key) {
            c.read = c.read.saturating_add(buf.len() as u64);
            if c.read >= c.wanted {
                ahead.remove(key);
            }
        }
        true
    }

    /// Fills `buf` from `offset`, the head's part copied, the rest from a request made ahead
    /// or in one request.
    fn fill(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let head_len = self.head.len() as u64;
        let mut from = offset;
        let mut rest: &mut [u8] = buf;
        if from < head_len {
            let n = (head_len - from).min(rest.len() as u64) as usize;
            let (cached, after) = rest.split_at_mut(n);
            copy_exact(cached, self.head.get(from as usize..from as usize + n))?;
            rest = after;
            from += n as u64;
        }
        if rest.is_empty() || self.take_ahead(from, rest) {
            return Ok(());
        }
        let bytes = self.fetch(from..from + rest.len() as u64)?;
        copy_exact(rest, Some(&bytes))
    }
}

impl RangeRead for RemoteObject {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.size)
            .ok_or_else(|| std::io::Error::other("a range past the end of the object"))?;
        if buf.is_empty() {
            return Ok(());
        }
        if let Some(d) = &self.downloaded {
            return d.map.read_into(offset, buf).map_err(std::io::Error::other);
        }
        let head_len = self.head.len() as u64;
        // Inside the head.
        if end <= head_len {
            return copy_exact(buf, self.head.get(offset as usize..end as usize));
        }
        let tail_start = self.tail_start();
        // Ends inside the tail: the tail (read once), and only what lies before it asked for.
        if end > tail_start && self.size > head_len {
            let tail = self.tail()?;
            let from = offset.max(tail_start);
            let split = (from - offset) as usize;
            let src = tail.get((from - tail_start) as usize..(end - tail_start) as usize);
            let (before, inside) = buf.split_at_mut(split);
            copy_exact(inside, src)?;
            if !before.is_empty() {
                self.fill(offset, before)?;
            }
            return Ok(());
        }
        self.fill(offset, buf)
    }

    /// Parts in the head or the tail, or in a request made ahead, are served from there;
    /// the others are grouped (`group`) and the groups fetched at once, at most the bound
    /// in flight.
    fn read_scattered(&self, parts: &mut [(u64, &mut [u8])]) -> std::io::Result<()> {
        if self.downloaded.is_some() {
            for (offset, buf) in parts.iter_mut() {
                self.read_exact_at(*offset, buf)?;
            }
            return Ok(());
        }
        let mut far: Vec<(Range<u64>, usize)> = Vec::new();
        for (i, (offset, buf)) in parts.iter_mut().enumerate() {
            let range = *offset..offset.saturating_add(buf.len() as u64);
            if buf.is_empty() {
                continue;
            }
            if self.touches_cache(&range) || range.end > self.size {
                self.read_exact_at(*offset, buf)?;
            } else if !self.take_ahead(*offset, buf) {
                far.push((range, i));
            }
        }
        if far.is_empty() {
            return Ok(());
        }
        far.sort_unstable_by_key(|(r, _)| (r.start, r.end));
        let groups = group(far.iter().map(|(r, _)| r.clone()));
        let rt = runtime().map_err(std::io::Error::other)?;
        let answers = rt
            .block_on(futures::future::try_join_all(
                groups
                    .iter()
                    .map(|g| self.fetcher.get_exact(g.span.clone())),
            ))
            .map_err(std::io::Error::other)?;
        let mut members = far.iter();
        for (g, bytes) in groups.iter().zip(&answers) {
            for (range, i) in members.by_ref().take(g.members) {
                let Some((_, buf)) = parts.get_mut(*i) else {
                    continue;
                };
                let from = (range.start - g.span.start) as usize;
                copy_exact(buf, bytes.get(from..from + buf.len()))?;
            }
        }
        Ok(())
    }

    /// Fetches the ranges that no cache and no earlier request covers, grouped, as tasks on
    /// the runtime (at most the bound in flight); what does not fit in
    /// [`PREFETCH_BUDGET`] is left to the reads.
    fn prefetch(&self, ranges: &[(u64, u64)]) {
        if self.downloaded.is_some() {
            return;
        }
        let Ok(rt) = runtime() else {
            return; // only a hint: the reads report the error
        };
        let mut ahead = self.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        let mut wanted: Vec<Range<u64>> = ranges
            .iter()
            .filter_map(|&(o, l)| Some(o..o.checked_add(l)?))
            .filter(|r| r.end <= self.size)
            .map(|r| self.outside_caches(r))
            .filter(|r| r.end > r.start && ahead.holding(r).is_none())
            .collect();
        wanted.sort_unstable_by_key(|r| (r.start, r.end));
        for g in group(wanted.into_iter()) {
            let span_len = g.span.end - g.span.start;
            if !ahead.make_room(span_len) {
                break;
            }
            let slot = Arc::new(Slot::default());
            let key = (g.span.start, ahead.made);
            ahead.made += 1;
            ahead.held += span_len;
            ahead.chunks.insert(
                key,
                Chunk {
                    end: g.span.end,
                    wanted: g.wanted,
                    read: 0,
                    slot: slot.clone(),
                },
            );
            let fetcher = self.fetcher.clone();
            rt.spawn(async move { slot.fill(fetcher.get_exact(g.span).await) });
        }
    }
}

/// The whole object in an unnamed temporary file, for a server that answers a ranged
/// request with all of it: streamed to the file as it comes (never held in memory), and
/// refused unless exactly as long as the size the server declared, which must be at most
/// `max_len`.
async fn download(fetcher: &Fetcher, max_len: u64) -> Result<(u64, std::fs::File)> {
    use futures::StreamExt;
    use std::io::Write;
    let shown = &fetcher.shown;
    let answer = fetcher
        .store
        .get_opts(&fetcher.path, GetOptions::default())
        .await
        .map_err(|e| store_error(e, shown))?;
    let size = answer.meta.size;
    if size > max_len {
        return Err(Error::limit(format!(
            "{shown}: its server ignores ranges, so it would be read whole, and it is {size} \
             bytes, over the {max_len}-byte cap for it"
        )));
    }
    let file = tempfile::tempfile().map_err(|e| {
        Error::io(
            e,
            format!(
                "{shown}: its server ignores ranges, so it is read whole, and no temporary \
                 file could be made for it (TMPDIR)"
            ),
        )
    })?;
    // The server's word for the size, against the room there: a size no disk here holds
    // fails now, naming it, not when the disk is full.
    if let Err(full) = zt_container::temp::room_for(&file, size) {
        let free = zt_container::temp::free_space(&file).unwrap_or(0);
        return Err(Error::io(
            full,
            format!(
                "{shown}: its server ignores ranges, so it is read whole into a temporary \
                 file, and its {size} bytes do not fit in the {free} bytes free there (set \
                 TMPDIR to a folder with room)"
            ),
        ));
    }
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut received = 0u64;
    let mut stream = answer.into_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| store_error(e, shown))?;
        received = received
            .checked_add(chunk.len() as u64)
            .filter(|&n| n <= size)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{shown}: the server sent more than the {size} bytes it declared"
                ))
            })?;
        out.write_all(&chunk)
            .map_err(|e| Error::io(e, format!("{shown}: writing its temporary copy")))?;
    }
    fetcher.counters.requests.fetch_add(1, Ordering::Relaxed);
    fetcher
        .counters
        .bytes
        .fetch_add(received, Ordering::Relaxed);
    if received != size {
        return Err(Error::invalid(format!(
            "{shown}: the server sent {received} of the {size} bytes it declared"
        )));
    }
    let file = out.into_inner().map_err(|e| {
        Error::io(
            e.into_error(),
            format!("{shown}: writing its temporary copy"),
        )
    })?;
    Ok((size, file))
}

/// Ranges fetched as one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    /// From the first range's start to the furthest end.
    pub span: Range<u64>,
    /// How many of the (sorted) ranges it covers, in order.
    pub members: usize,
    /// Bytes of those ranges (overlaps counted twice).
    pub wanted: u64,
}

/// Groups ranges sorted by start: a range joins the group before it when it starts at most
/// [`COALESCE_GAP`] after the group's end and the group stays within [`MAX_COALESCED`]
/// bytes (a range larger than that on its own is a group of one).
pub(crate) fn group(sorted: impl Iterator<Item = Range<u64>>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for r in sorted {
        let len = r.end.saturating_sub(r.start);
        if let Some(g) = groups.last_mut() {
            let near = r.start <= g.span.end.saturating_add(COALESCE_GAP);
            let end = g.span.end.max(r.end);
            if near && end - g.span.start <= MAX_COALESCED {
                g.span.end = end;
                g.members += 1;
                g.wanted = g.wanted.saturating_add(len);
                continue;
            }
        }
        groups.push(Group {
            span: r,
            members: 1,
            wanted: len,
        });
    }
    groups
}

/// Copies `src` into `dst` when it is exactly as long; an error otherwise (never a panic).
fn copy_exact(dst: &mut [u8], src: Option<&[u8]>) -> std::io::Result<()> {
    match src {
        Some(s) if s.len() == dst.len() => {
            dst.copy_from_slice(s);
            Ok(())
        }
        _ => Err(std::io::Error::other(
            "a cached range does not cover the read",
        )),
    }
}

/// An object_store error as ours: a missing object is `NotFound`, anything else `Io`, with the
/// URL (no credentials) in front.
fn store_error(e: object_store::Error, shown: &str) -> Error {
    match e {
        object_store::Error::NotFound { .. } => {
            Error::not_found(format!("{shown}: no such object"))
        }
        other => Error::io(std::io::Error::other(one_line(&other)), shown.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearby_ranges_group_and_far_or_large_ones_do_not() {
        let g = group([0..10, 10..20, 30..40].into_iter());
        assert_eq!(
            g,
            vec![Group {
                span: 0..40,
                members: 3,
                wanted: 30
            }]
        );
        let far = COALESCE_GAP + 41;
        let g = group([0..10, far..far + 1].into_iter());
        assert_eq!(g.len(), 2);
        // A group never grows past MAX_COALESCED; one large range is its own group.
        let big = MAX_COALESCED;
        let g = group([0..10, 10..big + 1, big + 1..big + 2].into_iter());
        assert_eq!(g.iter().map(|g| g.members).collect::<Vec<_>>(), [1, 2]);
        // Overlaps (shared blobs) extend to the furthest end.
        let g = group([0..100, 20..50].into_iter());
        assert_eq!(g[0].span, 0..100);
        assert_eq!(g[0].members, 2);
    }
}
