//! One remote object read by range: [`RemoteObject`] implements zt-container's
//! [`RangeRead`], so a [`Source`](zt_container::Source) over it reads like any file.
//!
//! What it keeps, and so what opening costs:
//! - the **head**: the first [`HEAD_LEN`] bytes, read when the object is opened (that one
//!   request also tells the object's size). The kind of file is told from them, and a
//!   safetensors header that fits is in them: a safetensors header costs one request, or two
//!   when it is larger (the rest is one more).
//! - the **tail**: the last [`TAIL_LEN`] bytes, read speculatively by the first read that
//!   falls in them (a `.zt` footer): the footer and a manifest that fits cost one request, a
//!   larger manifest one more (only the part before the tail is asked for).
//! - nothing else: every other read is one request for exactly its range (a tensor, or the
//!   run of a slice), checked to be exactly as long as asked, retried a few times if not.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use object_store::path::Path as StorePath;
use object_store::{GetOptions, GetRange, ObjectStore};
use zt_container::{Error, RangeRead, Result};

use super::store::runtime;

/// Bytes read from the start of an object when it is opened.
pub const HEAD_LEN: u64 = 64 << 10;
/// Bytes read from the end of an object by the first read that needs any of them.
pub const TAIL_LEN: u64 = 1 << 20;
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

/// An object in a store, with its head and tail cached.
#[derive(Debug)]
pub struct RemoteObject {
    store: Arc<dyn ObjectStore>,
    path: StorePath,
    /// The URL as messages show it (no credentials).
    shown: String,
    size: u64,
    head: Vec<u8>,
    tail: OnceLock<Vec<u8>>,
    counters: Arc<Counters>,
}

impl RemoteObject {
    /// Opens `path` in `store`: one request, for the head, which also tells the size.
    pub fn open(store: Arc<dyn ObjectStore>, path: StorePath, shown: String) -> Result<Self> {
        let counters = Arc::new(Counters::default());
        let rt = runtime()?;
        let options = GetOptions {
            range: Some(GetRange::Bounded(0..HEAD_LEN)),
            ..Default::default()
        };
        let result = rt
            .block_on(async {
                let r = store.get_opts(&path, options).await?;
                let size = r.meta.size;
                let got = r.range.clone();
                let bytes = r.bytes().await?;
                Ok::<_, object_store::Error>((size, got, bytes))
            })
            .map_err(|e| store_error(e, &shown))?;
        let (size, got, bytes) = result;
        counters.requests.fetch_add(1, Ordering::Relaxed);
        counters
            .bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let want = 0..HEAD_LEN.min(size);
        if got != want || bytes.len() as u64 != want.end {
            return Err(Error::invalid(format!(
                "{shown}: the server returned {} bytes (range {got:?}) for bytes {want:?} of a \
                 {size}-byte object",
                bytes.len()
            )));
        }
        Ok(RemoteObject {
            store,
            path,
            shown,
            size,
            head: bytes.to_vec(),
            tail: OnceLock::new(),
            counters,
        })
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Requests and bytes so far.
    pub fn stats(&self) -> RemoteStats {
        RemoteStats {
            requests: self.counters.requests.load(Ordering::Relaxed),
            bytes: self.counters.bytes.load(Ordering::Relaxed),
        }
    }

    /// The first byte the tail covers.
    fn tail_start(&self) -> u64 {
        self.size
            .saturating_sub(TAIL_LEN)
            .max(self.head.len() as u64)
    }

    /// Exactly the bytes `range`, in one request (retried when the answer is short or fails).
    fn fetch(&self, range: Range<u64>) -> std::io::Result<Vec<u8>> {
        let rt = runtime().map_err(std::io::Error::other)?;
        let want = range.end - range.start;
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let got = rt.block_on(self.store.get_range(&self.path, range.clone()));
            match got {
                Ok(bytes) => {
                    self.counters.requests.fetch_add(1, Ordering::Relaxed);
                    self.counters
                        .bytes
                        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                    if bytes.len() as u64 == want {
                        return Ok(bytes.to_vec());
                    }
                    last = Some(format!(
                        "the server returned {} bytes for a range of {want}",
                        bytes.len()
                    ));
                }
                Err(e) => last = Some(store_error(e, &self.shown).to_string()),
            }
        }
        Err(std::io::Error::other(format!(
            "{}: bytes {}..{}: {} (after {ATTEMPTS} attempts)",
            self.shown,
            range.start,
            range.end,
            last.unwrap_or_default()
        )))
    }

    /// The tail, read on first use.
    fn tail(&self) -> std::io::Result<&[u8]> {
        if let Some(t) = self.tail.get() {
            return Ok(t);
        }
        let bytes = self.fetch(self.tail_start()..self.size)?;
        let _ = self.tail.set(bytes);
        Ok(self.tail.get().map(Vec::as_slice).unwrap_or_default())
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
}

impl RemoteObject {
    /// Fills `buf` from `offset`, the head's part copied, the rest in one request.
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
        if rest.is_empty() {
            return Ok(());
        }
        let bytes = self.fetch(from..from + rest.len() as u64)?;
        copy_exact(rest, Some(&bytes))
    }
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
        other => Error::io(std::io::Error::other(other.to_string()), shown.to_owned()),
    }
}
