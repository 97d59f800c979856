//! Read-ahead for mapped files: what makes the plain `open` + `read` loop as fast as a
//! populated map, without reading what nobody asks for.
//!
//! Every read of an object's data tells [`ReadAhead::note`] which object it is, and so does a
//! slice whose pages are most of the object's (`crate::slice`: half the columns of a matrix
//! whose rows are a page or less touch every page). Three cases:
//! - **A lone read** (the first, or one that does not follow the previous read): the kernel is
//!   told to read the object's own range now, in large requests ([`Source::will_need`]), and
//!   nothing else. A tool that looks at one tensor of a large file reads that tensor only (and
//!   its header and manifest: see [`crate::OpenOptions`]'s listing, which reads them exactly).
//! - **A stream**: the read follows the previous one in name order (`for name in names`) or
//!   in file order ([`crate::Reader::iter`], which starts a stream at its first read). The
//!   objects that come next in that order are handed to the map's prefetching thread
//!   ([`Source::prefetch`]), which reads them from disk and maps them on the second core while
//!   the caller works on the current one. The window ahead starts small and doubles up to
//!   [`MAX_WINDOW`] as the stream goes on, like the kernel's own read-ahead; it is topped up
//!   when half of it has been consumed, so a stream of small objects costs one hand-over per
//!   half window, not one per object.
//! - **A sweep**: reads in an order that is neither (a loader asks for tensors in its model's
//!   module order: embeddings, then layer 0's norm, q, k, v, ...), once the reads so far (the
//!   short streams between the jumps included) have covered 1/[`SWEEP_SHARE`] of the file's
//!   data in at least [`SWEEP_MIN_READS`] objects, are taken to be reading the whole file.
//!   The rest is then handed to the prefetching thread in file order, in large sequential
//!   pieces, up to [`MAX_WINDOW`] ahead of what the caller has consumed, skipping what it has
//!   read already (streams skip it too):
//!   the disk reads the file front to back whatever order the caller asks in. A caller that
//!   reads a few tensors never gets there, and reads only those.
//!   A caller that says it reads everything ([`crate::Reader::expect_to_read_all`]: a
//!   framework's `load_file`) starts the sweep at its first read in no order we follow; so
//!   does a read of a file that is all in the page cache (sampled once, at the first read),
//!   where the sweep reads nothing from the disk and only maps ahead, on the second core (from
//!   the fourth read, up to [`WARM_WINDOW`], 1 GiB, at once).
//!   Either way no stream starts beside the sweep: it serves every order.
//! - **Reads from several threads at once** ([`crate::Reader::parallel_objects`]) do not take
//!   the state's lock when another thread holds it: a hint is never worth a wait.
//!
//! Only maps of at least [`MIN_FILE`] bytes take part, and remote sources (where the ranges
//! ahead are fetched in a few grouped requests: `crate::remote::object`); the plan (each
//! object's byte span and the file order) is made on the first read that needs it, not at
//! open.

use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Mutex, OnceLock, TryLockError};

use zt_container::Source;

use crate::model::ObjectInfo;

/// Smaller maps are not worth a thread: their faults cost less than a millisecond.
pub(crate) const MIN_FILE: u64 = 16 << 20;
/// The first window of a stream.
const FIRST_WINDOW: u64 = 8 << 20;
/// The largest window: enough to keep a disk busy while the caller works on a large tensor,
/// small enough that a stream abandoned early reads little in vain.
pub(crate) const MAX_WINDOW: u64 = 64 << 20;

/// The window of a sweep over a file all in the page cache, from the [`SWEEP_MIN_READS`]th
/// read on: mapping cached pages reads nothing and holds nothing but page tables, so the
/// rest of a file of up to 1 GiB is handed over at once. Paced by [`MAX_WINDOW`], the thread
/// mapped in file order while a caller that jumps through the file (name, module or random
/// order) ran ahead of it and took its own faults (docs/benchmarks.md, "Warm loads against
/// their own pages"). The first reads keep [`MAX_WINDOW`]: a caller that reads one tensor
/// of a cached file keeps the thread to it (handed the whole file, such a read took about
/// 2 ms more); and a cached file of 100 GiB is mapped 1 GiB ahead, not whole (a map of small
/// pages costs its page tables and about 27 ms a GiB on the second core).
pub(crate) const WARM_WINDOW: u64 = 1 << 30;

/// Reads that have covered this share of the file's data (1/8) start a sweep at the next read
/// in no order we follow...
pub(crate) const SWEEP_SHARE: u64 = 8;
/// ...when they were reads of at least this many objects: one large tensor read alone (`zt
/// cat`) is not a whole-file load.
pub(crate) const SWEEP_MIN_READS: u32 = 4;

/// How many pages of a map are asked about (`mincore`) to guess, at the first read, whether
/// the whole file is in the page cache: a few dozen microseconds, once per reader.
const WARM_SAMPLES: usize = 256;

/// The name position an [`crate::ObjectView`] carries when its reads give no hints: the
/// caller has already said what it reads ([`crate::Reader::parallel_objects_whole`] on a
/// remote source fetches each batch ahead itself).
pub(crate) const NO_HINTS: u32 = u32::MAX;

/// One object's data: the span from its first component's first byte to its last
/// component's last byte (empty for objects without data).
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
}

impl Span {
    fn len(self) -> u64 {
        self.end - self.start
    }

    /// What the object counts for in a window ahead: its bytes, and at least a page, which is
    /// what reading it costs. Windows are in bytes; counted by their data alone, a window of
    /// tiny objects held millions of them (100 bytes each: 670,000 in 64 MiB), and every
    /// stream that started handed all of them over again.
    fn weight(self) -> u64 {
        self.len().max(MIN_WEIGHT)
    }
}

/// The least an object counts for in a window ahead: a page.
const MIN_WEIGHT: u64 = 4096;

/// What the read-ahead knows of the file, made once.
#[derive(Debug)]
struct Plan {
    /// Per object, in name order.
    spans: Vec<Span>,
    /// Bytes of every object's data, summed.
    total: u64,
    /// Name positions in file order.
    file_order: Vec<u32>,
    /// File positions by name position.
    file_position: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Name,
    File,
}

/// Where the reads are going.
#[derive(Debug, Default)]
struct Stream {
    /// The object read last (name position).
    last: Option<u32>,
    /// The order the reads follow, if they follow one.
    order: Option<Order>,
    /// Position (in `order`) of the first object not yet handed to the prefetcher.
    frontier: u32,
    /// Bytes handed to the prefetcher and not yet read.
    ahead: u64,
    window: u64,
    /// The books of every read, and the sweep they may start (made on the first read).
    sweep: Option<Sweep>,
}

/// Every object read so far, and the sweep in file order that reads in no order we follow
/// may start.
#[derive(Debug, Default)]
struct Sweep {
    /// Objects read (a bit per name position).
    read: Vec<u64>,
    /// Objects handed to the prefetcher by the sweep.
    handed: Vec<u64>,
    /// Bytes of the objects read.
    read_bytes: u64,
    /// How many objects were read.
    reads: u32,
    /// Whether the sweep has started.
    on: bool,
    /// File position of the first object the sweep has not looked at.
    frontier: u32,
    /// Bytes handed and not yet read.
    ahead: u64,
    /// Name positions of objects with data not yet read, for streams in name order.
    unread_by_name: Unread,
    /// File positions of the same, for streams in file order and the sweep.
    unread_by_file: Unread,
}

impl Sweep {
    /// Empty books for the objects of `plan`.
    fn new(plan: &Plan) -> Self {
        let words = plan.spans.len().div_ceil(64);
        let has_data = |i: u32| {
            plan.spans
                .get(i as usize)
                .is_some_and(|s| s.start != u64::MAX)
        };
        Sweep {
            read: vec![0; words],
            handed: vec![0; words],
            unread_by_name: Unread::new(plan.spans.len(), has_data),
            unread_by_file: Unread::new(plan.file_order.len(), |at| {
                plan.file_order
                    .get(at as usize)
                    .is_some_and(|&i| has_data(i))
            }),
            ..Sweep::default()
        }
    }

    /// The objects with data not yet read, by position in `order`.
    fn unread(&mut self, order: Order) -> &mut Unread {
        match order {
            Order::Name => &mut self.unread_by_name,
            Order::File => &mut self.unread_by_file,
        }
    }

    /// Enters a read of object `index` (at `file_position` in file order) in the books (once
    /// per object).
    fn record(&mut self, index: u32, file_position: u32, span: Span) {
        if bit(&self.read, index) {
            return;
        }
        set_bit(&mut self.read, index);
        self.unread_by_name.remove(index);
        self.unread_by_file.remove(file_position);
        self.reads = self.reads.saturating_add(1);
        if span.start != u64::MAX {
            self.read_bytes = self.read_bytes.saturating_add(span.len());
            if bit(&self.handed, index) {
                self.ahead = self.ahead.saturating_sub(span.weight());
            }
        }
    }
}

/// The positions, in one order, of the objects still to be handed over, each found in
/// near-constant time.
///
/// A stream starts at the object after the one just read and skips what was read already.
/// Walking those one by one made some orders quadratic: 100,000 tiny objects read in pairs
/// from the back of the file (each pair a stream whose every object ahead was read) took
/// 60 s, all of it in these walks. Each position points at or past the first position after
/// it still to be handed over (a disjoint-set forest over the positions, its paths halved as
/// they are walked), so a run of read objects is crossed in a step or two however long it is.
#[derive(Debug, Default)]
struct Unread {
    /// `next[p] == p`: position `p` is still to be handed over; otherwise every position in
    /// `p..next[p]` is not, and `next[p] > p`. The extra last entry (`next[n] == n`) is the
    /// end.
    next: Vec<u32>,
    /// Steps taken by [`Unread::first_from`], for the tests that bound them.
    #[cfg(test)]
    steps: u64,
}

impl Unread {
    /// `len` positions, those for which `keep` is false left out from the start (objects
    /// without data in this file).
    fn new(len: usize, keep: impl Fn(u32) -> bool) -> Self {
        // Positions are u32 throughout the read-ahead; the listing's limit on objects keeps
        // `len` far below u32::MAX.
        let len = u32::try_from(len).unwrap_or(u32::MAX - 1);
        let next = (0..=len)
            .map(|p| if p == len || keep(p) { p } else { p + 1 })
            .collect();
        Unread {
            next,
            #[cfg(test)]
            steps: 0,
        }
    }

    /// The end: the position after the last.
    fn end(&self) -> u32 {
        self.next.len().saturating_sub(1) as u32
    }

    /// The first position at or after `from` still to be handed over, or [`Unread::end`].
    fn first_from(&mut self, from: u32) -> u32 {
        let end = self.end();
        let mut p = from.min(end);
        loop {
            #[cfg(test)]
            {
                self.steps += 1;
            }
            let Some(&q) = self.next.get(p as usize) else {
                return end;
            };
            if q <= p {
                return p;
            }
            // Path halving: `p` is pointed two steps on; every position it jumps is out.
            let r = self.next.get(q as usize).copied().unwrap_or(end).max(q);
            if let Some(slot) = self.next.get_mut(p as usize) {
                *slot = r;
            }
            p = r;
        }
    }

    /// Position `at` no longer needs handing over.
    fn remove(&mut self, at: u32) {
        if at < self.end() {
            if let Some(slot) = self.next.get_mut(at as usize) {
                *slot = (*slot).max(at + 1);
            }
        }
    }
}

fn bit(set: &[u64], i: u32) -> bool {
    set.get(i as usize / 64)
        .is_some_and(|w| w & (1 << (i % 64)) != 0)
}

fn set_bit(set: &mut [u64], i: u32) {
    if let Some(w) = set.get_mut(i as usize / 64) {
        *w |= 1 << (i % 64);
    }
}

/// The read-ahead state of one reader.
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    enabled: bool,
    /// Whether neighbouring objects ahead become one range (for a map: fewer, larger disk
    /// requests); a remote source groups them itself, within its cap on one request.
    merge_neighbours: bool,
    /// The caller said it reads every object: a sweep starts at once.
    whole: AtomicBool,
    /// Whether the whole file seemed to be in the page cache at the first read: a sweep then
    /// costs no disk read, only mapping on the prefetching thread, so it starts at once.
    warm: OnceLock<bool>,
    plan: OnceLock<Plan>,
    stream: Mutex<Stream>,
}

impl ReadAhead {
    /// Read-ahead for a reader of `source`: on for maps of at least [`MIN_FILE`] bytes, and
    /// for every ranged (remote) source, where each read saved is a round trip.
    pub fn new(source: &Source) -> Self {
        ReadAhead {
            enabled: (matches!(source, Source::Mapped(_)) && source.len() >= MIN_FILE)
                || source.is_ranged(),
            merge_neighbours: !source.is_ranged(),
            ..Default::default()
        }
    }

    /// Every object is about to be read, in an order of the caller's choosing: reads in no
    /// order we follow start the sweep at once instead of after 1/[`SWEEP_SHARE`] of the data.
    pub fn expect_whole(&self) {
        self.whole.store(true, AtomicOrdering::Relaxed);
    }

    /// The objects' positions in file order (where their data starts; objects without data
    /// last, by name), made once and shared with [`crate::Reader::iter`].
    pub fn file_order(&self, objects: &[ObjectInfo]) -> &[u32] {
        &self.plan(objects).file_order
    }

    fn plan(&self, objects: &[ObjectInfo]) -> &Plan {
        self.plan.get_or_init(|| {
            let spans: Vec<Span> = objects
                .iter()
                .map(|o| {
                    // Only what lies in this file: a v2 shard's bytes are in another.
                    let here = || o.components.iter().filter(|c| c.file == 0);
                    let start = here().map(|c| c.offset).min();
                    // Ranges were checked against the file at open: no overflow.
                    let end = here().map(|c| c.offset.saturating_add(c.length));
                    match (start, end.max()) {
                        (Some(start), Some(end)) => Span { start, end },
                        _ => Span {
                            start: u64::MAX,
                            end: u64::MAX,
                        },
                    }
                })
                .collect();
            let mut file_order: Vec<u32> = (0..spans.len() as u32).collect();
            // Stable: objects that share a start keep their name order.
            file_order.sort_by_key(|&i| spans.get(i as usize).map_or(u64::MAX, |s| s.start));
            let mut file_position = vec![0u32; spans.len()];
            for (at, &i) in file_order.iter().enumerate() {
                if let Some(slot) = file_position.get_mut(i as usize) {
                    *slot = at as u32;
                }
            }
            let total = spans
                .iter()
                .filter(|s| s.start != u64::MAX)
                .fold(0u64, |a, s| a.saturating_add(s.len()));
            Plan {
                spans,
                total,
                file_order,
                file_position,
            }
        })
    }

    /// Whether the whole file seemed to be in the page cache at the first read (asked once,
    /// at the first read or here, whichever comes first; never for a remote source). A read
    /// of a warm file has nothing to ask the kernel for: the hint would cost only its
    /// `mincore`.
    pub fn file_seems_cached(&self, source: &Source) -> bool {
        !source.is_ranged() && *self.warm.get_or_init(|| source.seems_cached(WARM_SAMPLES))
    }

    /// Object `index` (name position) is about to be read; `walking` when the caller walks
    /// the file in file order ([`crate::Reader::iter`]). Passes the hints on to `source`.
    pub fn note(&self, source: &Source, objects: &[ObjectInfo], index: u32, walking: bool) {
        if !self.enabled || index == NO_HINTS {
            return;
        }
        if !source.is_ranged() {
            self.warm.get_or_init(|| source.seems_cached(WARM_SAMPLES));
        }
        let mut hints = self.plan_read(objects, index, walking);
        if source.is_ranged() {
            // A remote object: the object read now joins the ranges ahead, so that it and its
            // neighbours come in one request; a lone read is just read.
            if !hints.ahead.is_empty() {
                if let Some(now) = hints.now {
                    hints.ahead.insert(0, now);
                }
                source.prefetch(&hints.ahead);
            }
            return;
        }
        if let Some((offset, len)) = hints.now {
            source.will_need(offset, len);
        }
        if !hints.ahead.is_empty() {
            source.prefetch(&hints.ahead);
        }
    }

    /// The name position of the last object noted as read, for tests of who notes reads.
    #[cfg(test)]
    pub(crate) fn last_noted(&self) -> Option<u32> {
        self.stream.lock().map_or(None, |s| s.last)
    }

    /// Whether the file was all in the page cache at the first read (`warm`).
    fn judged_warm(&self) -> bool {
        self.warm.get().is_some_and(|&w| w)
    }

    /// Whether the sweep serves every read from the first: the caller reads everything
    /// (`whole`), or the file is warm.
    fn sweeps_from_the_start(&self) -> bool {
        self.whole.load(AtomicOrdering::Relaxed) || self.judged_warm()
    }

    /// What to tell the kernel about a read of object `index`: the decisions of
    /// [`ReadAhead::note`], without acting on them.
    fn plan_read(&self, objects: &[ObjectInfo], index: u32, walking: bool) -> Hints {
        let mut hints = self.plan_read_in_any_state(objects, index, walking);
        // A file that was all in the page cache at the first read has nothing for the kernel
        // to start reading: the hint for the object read now would only cost its `mincore`
        // (a system call per read, most of the time of a read of a tiny object).
        if self.judged_warm() {
            hints.now = None;
        }
        hints
    }

    /// [`ReadAhead::plan_read`], the hint for the object read now given whatever the page
    /// cache holds.
    fn plan_read_in_any_state(&self, objects: &[ObjectInfo], index: u32, walking: bool) -> Hints {
        let mut hints = Hints::default();
        let mut stream = match self.stream.try_lock() {
            Ok(s) => s,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return hints,
        };
        if stream.last == Some(index) {
            return hints; // another component of the same object
        }
        let plan = self.plan(objects);
        let Some(&span) = plan.spans.get(index as usize) else {
            return hints;
        };
        let has_data = span.start != u64::MAX;
        let position_in = |order: Order, i: u32| match order {
            Order::Name => i,
            Order::File => plan
                .file_position
                .get(i as usize)
                .copied()
                .unwrap_or(u32::MAX),
        };
        let follows = |order: Order| {
            stream.last.is_some_and(|last| {
                position_in(order, last).checked_add(1) == Some(position_in(order, index))
            })
        };
        let order = if walking {
            Some(Order::File)
        } else if self.sweeps_from_the_start() {
            // Everything is read, or the file is all in the page cache (its sweep started at
            // the first read): the sweep in file order serves every order, name order
            // included, and a second stream beside it would hand ranges over twice. Module
            // order's short runs (a layer's bias, then its weight) each started a stream that
            // handed a window over again: warm loads of 1 GiB in that order took 65-67 ms in
            // the bench, 61-62 without (docs/benchmarks.md, "Warm loads in module order").
            None
        } else if stream.order.is_some_and(follows) {
            stream.order
        } else if follows(Order::Name) {
            Some(Order::Name)
        } else if follows(Order::File) {
            Some(Order::File)
        } else {
            None
        };
        stream.last = Some(index);
        // Every read is entered in the sweep's books, whichever way it is served: a sweep
        // must skip what a stream has read already and count it towards the share that starts
        // it, and an object the sweep handed over that a stream reads is consumed all the
        // same. Module order runs short streams (q, k, v, o follow each other in the file)
        // between its jumps; counting only the jumps started the sweep three times later, and
        // it then handed over objects the streams had read, which no read ever consumed: the
        // sweep stalled a window ahead of nothing.
        let sweep = stream.sweep.get_or_insert_with(|| Sweep::new(plan));
        sweep.record(index, position_in(Order::File, index), span);
        let Some(order) = order else {
            let sweep = stream.sweep.take();
            *stream = Stream {
                last: Some(index),
                sweep,
                ..Stream::default()
            };
            let Some(sweep) = stream.sweep.as_mut() else {
                return hints;
            };
            let start_now = self.sweeps_from_the_start();
            Self::sweep_read(
                plan,
                sweep,
                index,
                span,
                self.merge_neighbours,
                start_now,
                self.judged_warm(),
                &mut hints,
            );
            return hints;
        };
        let here = position_in(order, index);
        if stream.order != Some(order) || here >= stream.frontier {
            // A new stream, or one that ran past what was handed over: this object is read
            // now, the window starts after it.
            if has_data {
                hints.now = Some((span.start, span.len()));
            }
            stream.order = Some(order);
            stream.frontier = here.saturating_add(1);
            stream.ahead = 0;
            stream.window = FIRST_WINDOW;
        } else if has_data {
            stream.ahead = stream.ahead.saturating_sub(span.weight());
        }
        if stream.ahead >= stream.window / 2 {
            return hints;
        }
        while stream.ahead < stream.window {
            // An object read already (by a read out of this stream) is mapped already, and
            // one without data has nothing to map: both are skipped. One handed over before
            // (by the sweep, or by a stream that broke off) is handed over again: skipping
            // those too was measured 2x slower cold in module order.
            let from = stream.frontier;
            let at = match stream.sweep.as_mut() {
                Some(books) => books.unread(order).first_from(from),
                None => from,
            };
            let next = match order {
                Order::Name => Some(at),
                Order::File => plan.file_order.get(at as usize).copied(),
            };
            let Some(next) = next.and_then(|i| plan.spans.get(i as usize)) else {
                break;
            };
            stream.frontier = at.saturating_add(1);
            if next.start == u64::MAX {
                continue;
            }
            // Neighbours in the file become one range: fewer calls, larger disk requests.
            match hints.ahead.last_mut() {
                Some((o, l)) if self.merge_neighbours && *o + *l == next.start => *l += next.len(),
                _ => hints.ahead.push((next.start, next.len())),
            }
            stream.ahead = stream.ahead.saturating_add(next.weight());
        }
        stream.window = stream.window.saturating_mul(2).min(MAX_WINDOW);
        hints
    }
}

impl ReadAhead {
    /// A read in no order we follow: the object is read now (unless the sweep handed it over
    /// already); once such reads cover [`SWEEP_SHARE`] of the data, the rest of the file is
    /// handed over in file order, [`MAX_WINDOW`] ahead of what has been consumed. `start_now`:
    /// the caller said it reads everything, or the file is all cached: no share to wait for.
    /// `warm`: the file is all cached, and from the [`SWEEP_MIN_READS`]th read on the rest is
    /// handed over up to [`WARM_WINDOW`] ahead.
    #[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
    fn sweep_read(
        plan: &Plan,
        sweep: &mut Sweep,
        index: u32,
        span: Span,
        merge: bool,
        start_now: bool,
        warm: bool,
        hints: &mut Hints,
    ) {
        let has_data = span.start != u64::MAX;
        // Even for a small object: once its pages are asked for, touching them does not
        // set off the kernel's read-around of megabytes nobody asked for.
        if has_data && !bit(&sweep.handed, index) {
            hints.now = Some((span.start, span.len()));
        }
        if !sweep.on
            && (start_now
                || sweep.reads >= SWEEP_MIN_READS
                    && sweep.read_bytes.saturating_mul(SWEEP_SHARE) >= plan.total)
        {
            sweep.on = true;
        }
        // Past a few reads only: a caller that reads one tensor keeps the thread to a window.
        let window = if warm && sweep.reads >= SWEEP_MIN_READS {
            WARM_WINDOW
        } else {
            MAX_WINDOW
        };
        if !sweep.on || sweep.ahead >= window / 2 {
            return;
        }
        while sweep.ahead < window {
            let at = sweep.unread_by_file.first_from(sweep.frontier);
            let Some(&next) = plan.file_order.get(at as usize) else {
                break;
            };
            sweep.frontier = at.saturating_add(1);
            let Some(&s) = plan.spans.get(next as usize) else {
                break;
            };
            if s.start == u64::MAX || bit(&sweep.read, next) {
                continue;
            }
            set_bit(&mut sweep.handed, next);
            match hints.ahead.last_mut() {
                Some((o, l)) if merge && *o + *l == s.start => *l += s.len(),
                _ => hints.ahead.push((s.start, s.len())),
            }
            sweep.ahead = sweep.ahead.saturating_add(s.weight());
        }
    }
}

/// The hints for one read.
#[derive(Debug, Default, PartialEq, Eq)]
struct Hints {
    /// The range read now, to be read from the disk at once.
    now: Option<(u64, u64)>,
    /// Ranges to map ahead of the reads, in order.
    ahead: Vec<(u64, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ByteOrder;
    use proptest::prelude::*;
    use zt_formats::{DType, ElementType};

    /// Objects named `o00`, `o01`, ... of `mib` MiB each, laid out in the file in the order
    /// `file` gives (positions in name order).
    fn objects(file: &[usize], mib: u64) -> Vec<ObjectInfo> {
        let len = mib << 20;
        let mut objects: Vec<ObjectInfo> = (0..file.len())
            .map(|i| {
                let data = ElementType::plain(DType::U8);
                let shape = vec![len].into();
                ObjectInfo::raw_dense(format!("o{i:02}"), shape, data, (0, len), ByteOrder::Little)
            })
            .collect();
        for (at, &i) in file.iter().enumerate() {
            if let Some(c) = objects[i].components.0.first_mut() {
                c.offset = 4096 + (at as u64) * len;
            }
        }
        objects
    }

    fn on() -> ReadAhead {
        ReadAhead {
            enabled: true,
            merge_neighbours: true,
            ..Default::default()
        }
    }

    #[test]
    fn a_lone_read_asks_for_its_own_range_and_nothing_ahead() {
        let objects = objects(&[0, 1, 2, 3, 4, 5], 4);
        let ra = on();
        let first = ra.plan_read(&objects, 3, false);
        assert_eq!(first.now, Some((4096 + (12 << 20), 4 << 20)));
        assert!(first.ahead.is_empty());
        // Not a neighbour in either order: still nothing ahead.
        let second = ra.plan_read(&objects, 0, false);
        assert_eq!(second.now, Some((4096, 4 << 20)));
        assert!(second.ahead.is_empty());
    }

    #[test]
    fn reads_in_name_order_hand_the_next_objects_over_as_one_range_per_run() {
        // Name order 0..8, but the file holds them as 0 2 4 6 1 3 5 7.
        let objects = objects(&[0, 2, 4, 6, 1, 3, 5, 7], 2);
        let ra = on();
        assert!(ra.plan_read(&objects, 0, false).ahead.is_empty());
        let second = ra.plan_read(&objects, 1, false);
        // The stream starts: 8 MiB ahead in name order (objects 2, 3, 4, 5).
        let at = |pos: u64| 4096 + pos * (2 << 20);
        assert_eq!(
            second.ahead,
            vec![
                (at(1), 2 << 20),
                (at(5), 2 << 20),
                (at(2), 2 << 20),
                (at(6), 2 << 20)
            ]
        );
        // The next read was handed over already: no hint for it. The window has doubled to
        // 16 MiB and only 6 MiB are left ahead, so it is topped up with the rest (6 and 7).
        let third = ra.plan_read(&objects, 2, false);
        assert_eq!(third.now, None);
        assert_eq!(third.ahead, vec![(at(3), 2 << 20), (at(7), 2 << 20)]);
        // Nothing is left to hand over.
        assert_eq!(ra.plan_read(&objects, 3, false), Hints::default());
    }

    #[test]
    fn walking_the_file_prefetches_from_the_first_read_and_merges_neighbours() {
        let objects = objects(&[0, 1, 2, 3, 4, 5, 6, 7], 2);
        let ra = on();
        let first = ra.plan_read(&objects, 0, true);
        assert_eq!(first.now, Some((4096, 2 << 20)));
        assert_eq!(first.ahead, vec![(4096 + (2 << 20), 8 << 20)]);
    }

    #[test]
    fn a_second_component_of_the_same_object_adds_nothing() {
        let objects = objects(&[0, 1, 2], 1);
        let ra = on();
        ra.plan_read(&objects, 1, false);
        assert_eq!(ra.plan_read(&objects, 1, false), Hints::default());
    }

    #[test]
    fn reads_in_module_order_sweep_the_rest_of_the_file_in_file_order() {
        // 32 objects of 2 MiB in file order 0..32, read in an order that is neither name nor
        // file order: 0, 16, 1, 17, 2, 18, ... (a model's layers asked for in turns).
        let objects = objects(&(0..32).collect::<Vec<_>>(), 2);
        let ra = on();
        let order: Vec<u32> = (0..16).flat_map(|i| [i, i + 16]).collect();
        let mut handed: Vec<(u64, u64)> = Vec::new();
        for (k, &i) in order.iter().enumerate() {
            let hints = ra.plan_read(&objects, i, false);
            if k < 3 {
                // A few reads: each asks for itself only.
                assert!(hints.ahead.is_empty(), "read {k}");
                assert!(hints.now.is_some());
            }
            handed.extend(hints.ahead);
        }
        // 1/8 of 64 MiB read: the sweep hands the rest over in file order, skipping what was
        // read, in merged ranges, never more than the window ahead.
        let at = |pos: u64| 4096 + pos * (2 << 20);
        // Objects 0, 16, 1 and 17 were read (8 MiB): the sweep starts at 2, and 2..16 is
        // one range.
        assert_eq!(handed.first(), Some(&(at(2), 28 << 20)));
        assert!(handed.windows(2).all(|w| w[0].0 < w[1].0), "{handed:?}");
        let total: u64 = handed.iter().map(|h| h.1).sum();
        assert!((32 << 20..=64 << 20).contains(&total), "{total}");
        // An object the sweep handed over is not asked for again when read.
        let ra = on();
        for &i in &order[..4] {
            ra.plan_read(&objects, i, false);
        }
        let late = ra.plan_read(&objects, 30, false);
        assert_eq!(late.now, None);
    }

    #[test]
    fn reads_served_by_short_streams_count_towards_the_sweep_and_are_never_handed_again() {
        // A model's module order: short runs that follow each other in the file (q, k, v, o)
        // between jumps. Here pairs: 0 1, 16 17, 2 3, 18 19, ... of 2 MiB objects.
        let objects = objects(&(0..32).collect::<Vec<_>>(), 2);
        let at = |pos: u64| 4096 + pos * (2 << 20);
        let object_at = |offset: u64| (offset - 4096) / (2 << 20);
        let order: Vec<u32> = (0..8)
            .flat_map(|i| [2 * i, 2 * i + 1, 16 + 2 * i, 16 + 2 * i + 1])
            .collect();
        let ra = on();
        let mut read = std::collections::BTreeSet::new();
        for (k, &i) in order.iter().enumerate() {
            read.insert(u64::from(i));
            let hints = ra.plan_read(&objects, i, false);
            if k == 4 {
                // The fifth read (object 2, a jump) finds 10 MiB read in five objects, the
                // two streams' reads included: the sweep starts. Counting the jumps alone
                // (0, 16, 2: 6 MiB) it would not have. It hands over what follows in the
                // file, skipping what was read.
                assert_eq!(
                    hints.ahead,
                    vec![(at(3), 26 << 20), (at(18), 28 << 20)],
                    "{hints:?}"
                );
            }
            for &(offset, len) in &hints.ahead {
                for pos in object_at(offset)..object_at(offset + len) {
                    assert!(!read.contains(&pos), "read {k}: object {pos} handed again");
                }
            }
        }
    }

    #[test]
    fn unread_positions_match_a_plain_set() {
        // Positions 0..10, the odd ones without data.
        let mut unread = Unread::new(10, |p| p % 2 == 0);
        assert_eq!(unread.first_from(0), 0);
        assert_eq!(unread.first_from(1), 2);
        unread.remove(2);
        unread.remove(4);
        assert_eq!(unread.first_from(1), 6);
        unread.remove(8);
        unread.remove(6);
        assert_eq!(unread.first_from(3), 10, "all gone: the end");
        assert_eq!(unread.first_from(u32::MAX), 10);
        unread.remove(10); // the end stays the end
        assert_eq!(unread.first_from(0), 0);
    }

    #[test]
    fn streams_cross_runs_of_read_objects_in_a_few_steps() {
        // 4096 objects read in pairs from the back: each pair starts a stream in name order
        // whose every object ahead was read already. Walked one by one, that is n^2/4 steps
        // (about 4 million here); the books cross each run in a few.
        let n = 4096u32;
        let objects = objects(&(0..n as usize).collect::<Vec<_>>(), 1);
        let ra = on();
        for pair in (0..n / 2).rev() {
            ra.plan_read(&objects, 2 * pair, false);
            ra.plan_read(&objects, 2 * pair + 1, false);
        }
        let stream = ra.stream.lock().unwrap();
        let books = stream.sweep.as_ref().unwrap();
        let steps = books.unread_by_name.steps + books.unread_by_file.steps;
        assert!(steps < 16 * u64::from(n), "{steps} steps for {n} reads");
    }

    proptest::proptest! {
        #[test]
        fn unread_finds_what_a_plain_set_finds(
            len in 0usize..200,
            data in proptest::collection::vec(any::<bool>(), 200),
            ops in proptest::collection::vec((any::<bool>(), 0u32..210), 0..300),
        ) {
            let mut unread = Unread::new(len, |p| data[p as usize]);
            let mut left: Vec<bool> = (0..len).map(|p| data[p]).collect();
            for (remove, at) in ops {
                if remove {
                    unread.remove(at);
                    if let Some(slot) = left.get_mut(at as usize) {
                        *slot = false;
                    }
                } else {
                    let want = (at as usize..len).find(|&p| left[p]).unwrap_or(len);
                    proptest::prop_assert_eq!(unread.first_from(at) as usize, want);
                }
            }
        }

        /// Whatever the order of the reads and the layout of the file, no hint hands over an
        /// object already read. (An object may be handed over twice, by a stream and by the
        /// sweep: see the stream's loop.)
        #[test]
        fn no_object_is_handed_over_after_it_is_read(
            layout in Just((0..40usize).collect::<Vec<_>>()).prop_shuffle(),
            reads in Just((0..40u32).collect::<Vec<_>>()).prop_shuffle(),
            runs in proptest::collection::vec((1usize..6, any::<bool>()), 1..20),
            whole in any::<bool>(),
        ) {
            // Runs of reads in name order or in file order between jumps, as a loader's
            // layers give.
            let mut order: Vec<u32> = Vec::new();
            let mut shuffled = reads.into_iter();
            for &(run, in_file_order) in runs.iter().cycle() {
                let Some(start) = shuffled.next() else { break };
                let at = layout.iter().position(|&n| n == start as usize).unwrap_or(0);
                let next: Vec<u32> = if in_file_order {
                    layout.iter().skip(at).take(run).map(|&n| n as u32).collect()
                } else {
                    (start..(start + run as u32).min(40)).collect()
                };
                for i in next {
                    if !order.contains(&i) {
                        order.push(i);
                    }
                }
            }
            let objects = objects(&layout, 1);
            let object_at = |offset: u64| ((offset - 4096) >> 20) as usize;
            let ra = on();
            if whole {
                ra.expect_whole();
            }
            let mut read = [false; 40];
            for &i in &order {
                read[i as usize] = true;
                let hints = ra.plan_read(&objects, i, false);
                for &(offset, len) in &hints.ahead {
                    for &name in &layout[object_at(offset)..object_at(offset + len)] {
                        proptest::prop_assert!(!read[name], "object {} handed after its read", name);
                    }
                }
            }
        }
    }

    #[test]
    fn a_caller_that_reads_everything_sweeps_from_its_first_read() {
        let objects = objects(&(0..32).collect::<Vec<_>>(), 2);
        let at = |pos: u64| 4096 + pos * (2 << 20);
        let ra = on();
        ra.expect_whole();
        let first = ra.plan_read(&objects, 16, false);
        assert_eq!(first.now, Some((at(16), 2 << 20)));
        // The window ahead in file order from the front, skipping the object read now.
        assert_eq!(first.ahead, vec![(at(0), 32 << 20), (at(17), 30 << 20)]);
        // Name order next (17 follows 16) is not a stream of its own: 17 was handed over.
        assert_eq!(ra.plan_read(&objects, 17, false).now, None);
    }

    #[test]
    fn a_file_all_in_the_page_cache_sweeps_from_the_first_read_and_soon_hands_the_rest_over() {
        let small = objects(&(0..32).collect::<Vec<_>>(), 2);
        let ra = on();
        let _ = ra.warm.set(true);
        let first = ra.plan_read(&small, 16, false);
        let at = |pos: u64| 4096 + pos * (2 << 20);
        assert_eq!(first.ahead, vec![(at(0), 32 << 20), (at(17), 30 << 20)]);
        // A larger file: a window at first (a caller that reads one tensor keeps the thread
        // to it), then from the fourth read the whole rest at once (up to WARM_WINDOW).
        let bigger = objects(&(0..96).collect::<Vec<_>>(), 2);
        let ra_bigger = on();
        let _ = ra_bigger.warm.set(true);
        assert_eq!(
            ra_bigger.plan_read(&bigger, 50, false).ahead,
            vec![(at(0), 64 << 20)]
        );
        assert_eq!(ra_bigger.plan_read(&bigger, 70, false).ahead, vec![]);
        assert_eq!(ra_bigger.plan_read(&bigger, 80, false).ahead, vec![]);
        assert_eq!(
            ra_bigger.plan_read(&bigger, 90, false).ahead,
            vec![
                (at(32), 18 << 21),
                (at(51), 19 << 21),
                (at(71), 9 << 21),
                (at(81), 9 << 21),
                (at(91), 5 << 21)
            ]
        );
        // Bounded: of a file of 1.2 GiB, 1 GiB ahead of what has been read.
        let larger = objects(&(0..600).collect::<Vec<_>>(), 2);
        let ra_larger = on();
        let _ = ra_larger.warm.set(true);
        for i in [300, 301, 302] {
            ra_larger.plan_read(&larger, i, false);
        }
        let bounded = ra_larger.plan_read(&larger, 303, false);
        assert_eq!(
            bounded.ahead,
            vec![(at(32), 268 << 21), (at(304), 212 << 21)]
        );
        // A caller that reads everything of a file not all cached keeps the window.
        let told = on();
        let _ = told.warm.set(false);
        told.expect_whole();
        let paced = told.plan_read(&bigger, 50, false);
        assert_eq!(paced.ahead, vec![(at(0), 64 << 20)]);
        // Nor is the object read now asked for: it is in the page cache.
        assert_eq!(first.now, None);
        assert_eq!(ra.plan_read(&small, 3, false).now, None);
        // Nor do reads that follow each other start a stream beside the sweep: 4 follows 3
        // in name and file order, and was handed over by the sweep already. (Module order's
        // short runs, a layer's bias then its weight, each handed a window over again, and
        // made warm loads in that order 8% slower.)
        assert_eq!(ra.plan_read(&small, 4, false).ahead, vec![]);
        // A file not all in the cache waits for its eighth, as before.
        let cold = on();
        let _ = cold.warm.set(false);
        let lone = cold.plan_read(&small, 16, false);
        assert!(lone.ahead.is_empty());
        assert_eq!(lone.now, Some((4096 + (32 << 20), 2 << 20)));
    }

    #[test]
    fn a_window_of_tiny_objects_counts_each_as_a_page() {
        // 100,000 objects of 16 bytes, 64 bytes apart, in name order in the file. Counted by
        // their bytes, a 64 MiB window would hold all of them, and each stream that starts
        // would hand them all over again; each counts for a page.
        let n = 100_000usize;
        let mut objects = objects(&(0..n).collect::<Vec<_>>(), 0);
        for (i, o) in objects.iter_mut().enumerate() {
            if let Some(c) = o.components.0.first_mut() {
                (c.offset, c.length) = (4096 + 64 * i as u64, 16);
            }
        }
        let ra = ReadAhead {
            merge_neighbours: false,
            ..on()
        };
        let most = (MAX_WINDOW / MIN_WEIGHT) as usize;
        let mut handed = 0;
        for i in 0..2000u32 {
            let hints = ra.plan_read(&objects, i, false);
            assert!(hints.ahead.len() <= most, "read {i}: {}", hints.ahead.len());
            handed += hints.ahead.len();
        }
        // One stream, reading 2,000 objects: what it handed over is what it read and at most
        // one window more.
        assert!(handed <= 2000 + most, "{handed}");
        assert!(handed >= 1999, "{handed}");
    }

    #[test]
    fn a_few_scattered_reads_never_start_a_sweep() {
        let objects = objects(&(0..64).collect::<Vec<_>>(), 2);
        let ra = on();
        for i in [40, 3, 27, 9, 51, 14] {
            let hints = ra.plan_read(&objects, i, false);
            assert!(hints.ahead.is_empty());
        }
    }

    #[test]
    fn small_files_and_unmapped_sources_take_no_part() {
        let small = Source::from_vec(vec![0; 1024]);
        assert!(!ReadAhead::new(&small).enabled);
    }
}
