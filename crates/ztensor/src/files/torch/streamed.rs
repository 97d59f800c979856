//! `torch.save` archives written to a stream that cannot seek (DCP's zstd transform writes
//! each chunk through a compressor): every record's sizes come after its bytes, in a data
//! descriptor, and only the central directory at the archive's end lists them all. Such an
//! archive is listed here from its front, as its bytes are decoded, so that opening a
//! compressed chunk decodes its first kilobytes and not the tensor behind them.
//!
//! - Records are walked by their local headers. `data.pkl` comes first, as torch writes it:
//!   the pickle ends itself (its STOP), and its value names every storage with its element
//!   count, which gives each `data/<key>` record's length; the few small records between
//!   (`byteorder`, `.format_version`) are as long as the data descriptor that closes them
//!   says, found where its sizes agree with its position.
//! - The walk stops once every storage's record is found: what lies after the last (the
//!   `version` record, the central directory) is not decoded at open.
//! - The records found are listed by the PyTorch reader over the bytes before the first
//!   storage, which hold everything it reads; its offsets are the decoded archive's.

use std::collections::BTreeMap;
use std::io::Read;

use zt_container::{Error, Result, Source};

use super::pickle::{Heap, Machine, PICKLE_LIMITS};
use super::{list, pickle_cut_short, storage_unit, walk, MAX_PICKLE_LEN};
use crate::files::torch::dtypes::dtype_element;
use crate::listing::{Limits, Listing};
use crate::model::FileVersion;
use crate::zip::{self, descriptor_closing, Method, MAX_ZIP_ENTRIES, MAX_ZIP_NAME_LEN};

/// The longest record other than the pickle and the storages that is looked for: torch's
/// are a few bytes (`little`, `3`, `64`).
const MAX_SMALL_RECORD: u64 = 64 << 10;
/// How many bytes are decoded at a time while the walk needs more.
const STEP: usize = 16 << 10;
/// The most decoded bytes held at once: the records before the first storage (the pickle,
/// at most [`MAX_PICKLE_LEN`], and a few small ones), or the small records between two
/// storages.
const MAX_FRONT: u64 = MAX_PICKLE_LEN + (1 << 20);
/// How far before a window's end a pickle's error may start and still be the window's cut
/// (an argument read to its end of line: a name, at most a few KiB), so that the pickle is
/// run again over a larger window; an error before it is the pickle's.
const CUT_MARGIN: u64 = 64 << 10;

const LOCAL_HEADER: &[u8; 4] = b"PK\x03\x04";
const CENTRAL_HEADER: &[u8; 4] = b"PK\x01\x02";
const DESCRIPTOR: &[u8; 4] = b"PK\x07\x08";
/// Zip64's end of central directory, and its locator: an archive of no records ends there.
const ZIP64_END: &[u8; 4] = b"PK\x06\x06";
const END: &[u8; 4] = b"PK\x05\x06";

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "invalid PyTorch archive (written as a stream): {what}"
    ))
}

/// The decoded archive's bytes, from its start: those before the first storage are all kept
/// (the PyTorch reader reads them), a storage's are decoded and dropped.
struct Front<R> {
    reader: R,
    /// The archive's bytes from `start`.
    buf: Vec<u8>,
    /// The offset of `buf`'s first byte in the archive: 0 until a storage is passed over.
    start: u64,
    /// Whether the reader has ended.
    ended: bool,
    /// How many more bytes may be decoded (see [`list_streamed`]).
    left: u64,
}

impl<R: Read> Front<R> {
    /// Decodes until the archive's bytes up to `end` are held, or it ends: whether they are.
    fn fill_to(&mut self, end: u64) -> Result<bool> {
        while self.start.saturating_add(self.buf.len() as u64) < end && !self.ended {
            let have = self.buf.len();
            if end - self.start > MAX_FRONT {
                return Err(Error::limit(format!(
                    "an archive's records before or between its storages hold more than \
                     {MAX_FRONT} bytes"
                )));
            }
            let want = usize::try_from(end - self.start)
                .map_err(|_| Error::limit("an archive's front exceeds usize"))?
                .saturating_sub(have)
                .max(STEP);
            self.buf
                .try_reserve(want)
                .map_err(|_| Error::limit("cannot allocate an archive's front"))?;
            self.buf.resize(have + want, 0);
            let n = read_some(&mut self.reader, &mut self.buf[have..])?;
            self.buf.truncate(have + n);
            self.ended = n == 0;
            self.spend(n as u64)?;
        }
        Ok(self.start.saturating_add(self.buf.len() as u64) >= end)
    }

    /// The bytes `at..at + len`, which must be held (after a [`Front::fill_to`] that said so).
    fn held(&self, at: u64, len: u64) -> Result<&[u8]> {
        let from = at
            .checked_sub(self.start)
            .and_then(|f| usize::try_from(f).ok());
        let to = from.and_then(|f| f.checked_add(usize::try_from(len).ok()?));
        match (from, to) {
            (Some(f), Some(t)) => self.buf.get(f..t),
            _ => None,
        }
        .ok_or_else(|| {
            bad(format!(
                "bytes {at}..+{len} are not decoded (a reader defect)"
            ))
        })
    }

    /// The bytes `at..at + len`, decoded as needed; an archive that ends first is an error.
    fn bytes(&mut self, at: u64, len: u64, what: &str) -> Result<&[u8]> {
        let end = at
            .checked_add(len)
            .ok_or_else(|| bad(format!("{what} lies past any archive")))?;
        if !self.fill_to(end)? {
            return Err(bad(format!("the archive ends inside {what}")).at(at));
        }
        self.held(at, len)
    }

    /// Moves the front to `at`, dropping what lies before it (decoded, unkept).
    fn drop_to(&mut self, at: u64) -> Result<()> {
        let end = self.start.saturating_add(self.buf.len() as u64);
        if at <= end {
            let cut = usize::try_from(at.saturating_sub(self.start)).unwrap_or(usize::MAX);
            self.buf.drain(..cut.min(self.buf.len()));
        } else {
            self.buf.clear();
            let skip = at - end;
            let allowed = skip.min(self.left.saturating_add(1));
            let passed = std::io::copy(&mut (&mut self.reader).take(allowed), &mut std::io::sink())
                .map_err(|e| bad(format!("the stream's decoding fails: {e}")))?;
            self.spend(passed)?;
            if passed != skip {
                return Err(bad("the archive ends inside a storage's record").at(end + passed));
            }
        }
        self.start = self.start.max(at);
        Ok(())
    }

    /// Counts `n` bytes decoded against what may be.
    fn spend(&mut self, n: u64) -> Result<()> {
        self.left = self.left.checked_sub(n).ok_or_else(|| {
            Error::limit(
                "listing compressed archives decodes more than their files' bytes allow at \
                 open (four times them, at least 1 GiB): their storages hold far more than \
                 the files",
            )
        })?;
        Ok(())
    }
}

/// One read into `buf`, retried when interrupted: the count, 0 at the end.
fn read_some(reader: &mut impl Read, buf: &mut [u8]) -> Result<usize> {
    loop {
        match reader.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(bad(format!("the stream's decoding fails: {e}"))),
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |s| u16::from_le_bytes([s[0], s[1]]))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Lists the `torch.save` archive that `reader` decodes (its offsets the decoded archive's),
/// decoding only as far as its last storage's record starts; with the listing, each record
/// closed by a data descriptor, as the range of its bytes (whose CRC-32 follows them).
/// `budget` is how many bytes may be decoded, less what this one decodes: the archives of a
/// checkpoint share one, so that a stream that decodes to far more than it stores (its
/// storages passed over to reach the next) cannot make opening decode without end.
pub(crate) fn list_streamed(
    reader: impl Read,
    limits: &Limits,
    budget: &mut u64,
) -> Result<(Listing, Vec<(u64, u64)>)> {
    let mut front = Front {
        reader,
        buf: Vec::new(),
        start: 0,
        ended: false,
        left: *budget,
    };
    let listed = walk_records(&mut front, limits);
    *budget = front.left;
    listed
}

/// The walk of [`list_streamed`] over `front`.
fn walk_records(
    front: &mut Front<impl Read>,
    limits: &Limits,
) -> Result<(Listing, Vec<(u64, u64)>)> {
    let mut names = std::collections::BTreeSet::new();
    let mut entries: Vec<zip::Entry> = Vec::new();
    // Each storage's record length, by key, once the pickle is run.
    let mut storages: Option<BTreeMap<String, u64>> = None;
    let mut folder = String::new();
    let mut found = 0usize;
    let mut head: Option<Vec<u8>> = None;
    let mut closed = Vec::new();
    let mut at = 0u64;
    loop {
        let sig: [u8; 4] = front
            .bytes(at, 4, "a record's header")?
            .try_into()
            .map_err(|_| bad("a short signature (a reader defect)"))?;
        if [CENTRAL_HEADER, ZIP64_END, END].contains(&&sig) {
            break;
        }
        if &sig != LOCAL_HEADER {
            return Err(bad("no record header where the last record ends").at(at));
        }
        if entries.len() as u64 >= MAX_ZIP_ENTRIES {
            return Err(Error::limit(format!(
                "the archive holds more than {MAX_ZIP_ENTRIES} records"
            )));
        }
        let fixed = front.bytes(at, 30, "a record's header")?;
        let (flags, method) = (u16_at(fixed, 6), u16_at(fixed, 8));
        let (crc, stored_len, inflated_len) =
            (u32_at(fixed, 14), u32_at(fixed, 18), u32_at(fixed, 22));
        let (name_len, extra_len) = (u16_at(fixed, 26), u16_at(fixed, 28));
        if usize::from(name_len) > MAX_ZIP_NAME_LEN {
            return Err(bad("a record's name is too long").at(at));
        }
        let name_bytes = front.bytes(at + 30, u64::from(name_len), "a record's name")?;
        let name = std::str::from_utf8(name_bytes)
            .map_err(|_| bad("a record's name is not UTF-8").at(at + 30))?
            .to_owned();
        // A B-tree: names come from the file.
        if !names.insert(name.clone()) {
            return Err(bad(format!("record {name:?} is written twice")).at(at));
        }
        let data_at = at + 30 + u64::from(name_len) + u64::from(extra_len);
        // The whole header, its extra field (torch's alignment padding) too, is there.
        front.bytes(at, data_at - at, "a record's header")?;
        if method != 0 {
            return Err(Error::unsupported(format!(
                "record {name:?} is compressed (method {method}): torch writes every record \
                 stored"
            ))
            .at(at));
        }
        let described = flags & 8 != 0;
        let len = if entries.is_empty() {
            // The first record is the pickle, in the archive's folder.
            let Some((dir, "data.pkl")) = name.split_once('/') else {
                return Err(bad(format!(
                    "its first record is {name:?}, not <archive>/data.pkl, which torch writes \
                     first"
                ))
                .at(at));
            };
            folder = format!("{dir}/");
            let (len, sizes) = run_pickle(front, data_at, limits)?;
            if !described && u64::from(stored_len) != len {
                return Err(bad(format!(
                    "{name:?} declares {stored_len} bytes, but its pickle is {len}"
                ))
                .at(at));
            }
            storages = Some(sizes);
            len
        } else if let Some(key) = name
            .strip_prefix(folder.as_str())
            .and_then(|n| n.strip_prefix("data/"))
        {
            let Some(&len) = storages.as_ref().and_then(|s| s.get(key)) else {
                return Err(bad(format!(
                    "record {name:?} holds no storage the pickle names (its length is known \
                     only from the pickle)"
                ))
                .at(at));
            };
            if !described && u64::from(stored_len) != len {
                return Err(bad(format!(
                    "storage {key:?} declares {len} bytes, but its record holds {stored_len}"
                ))
                .at(at));
            }
            len
        } else if !described {
            u64::from(stored_len)
        } else {
            small_record_len(front, data_at, &name)?
        };
        if !described && stored_len != inflated_len {
            return Err(bad(format!("stored record {name:?} changes size")).at(at));
        }
        let is_storage = name
            .strip_prefix(folder.as_str())
            .is_some_and(|n| n.starts_with("data/"));
        if is_storage && head.is_none() {
            // Everything the PyTorch reader reads lies before the first storage.
            head = Some(front.bytes(0, data_at, "the records")?.to_vec());
        }
        if described {
            closed.push((data_at, len));
        }
        entries.push(zip::Entry {
            name,
            method: Method::Stored,
            data_offset: data_at,
            compressed: len,
            uncompressed: len,
            header_offset: at,
            crc32: crc,
            damage: None,
        });
        let end = data_at
            .checked_add(len)
            .ok_or_else(|| bad("a record's length overflows").at(at))?;
        if is_storage {
            found += 1;
            if storages.as_ref().is_some_and(|s| found >= s.len()) {
                break;
            }
            front.drop_to(end)?;
        }
        at = if described {
            end + descriptor_len(front, end, len)?
        } else {
            end
        };
    }
    let head = match head {
        Some(h) => h,
        None => front.bytes(0, at, "the records")?.to_vec(),
    };
    let source = Source::from_vec(head);
    Ok((
        list(&source, entries, limits, FileVersion::PyTorch)?,
        closed,
    ))
}

/// Runs the pickle that starts at `at`, decoding more of the archive while it is cut short:
/// its length, and each storage it names with its record's length in bytes.
fn run_pickle(
    front: &mut Front<impl Read>,
    at: u64,
    limits: &Limits,
) -> Result<(u64, BTreeMap<String, u64>)> {
    let mut window = STEP as u64;
    loop {
        let end = at.saturating_add(window);
        let complete = !front.fill_to(end)?;
        let held = front.start.saturating_add(front.buf.len() as u64).min(end);
        let bytes = front.held(at, held.saturating_sub(at))?;
        let mut heap = Heap::default();
        match Machine::new(&mut heap, PICKLE_LIMITS, at).run(bytes) {
            Ok((root, len)) => {
                let sizes = storage_lengths(&heap, root, len as u64, limits)?;
                return Ok((len as u64, sizes));
            }
            // An error near the end of a window the archive goes on past may be the
            // window's cut (a text argument missing its end of line, as much as an opcode
            // cut short): the pickle is run again over twice as much, up to its cap.
            Err(e)
                if !complete
                    && window < MAX_PICKLE_LEN
                    && (pickle_cut_short(&e)
                        || e.offset().unwrap_or(0) >= end.saturating_sub(CUT_MARGIN)) =>
            {
                window = window.saturating_mul(2).min(MAX_PICKLE_LEN);
            }
            Err(e) if pickle_cut_short(&e) && complete => {
                return Err(bad("the archive ends inside its data.pkl").at(at))
            }
            Err(e) if pickle_cut_short(&e) => {
                return Err(Error::limit(format!(
                    "the archive's data.pkl is not over within {MAX_PICKLE_LEN} bytes"
                ))
                .at(at))
            }
            Err(e) => return Err(e),
        }
    }
}

/// Each storage the pickle's value names, with its bytes (elements times the storage's
/// element size); a storage of an element whose size is unknown cannot be walked past.
fn storage_lengths(
    heap: &Heap,
    root: super::pickle::Pv,
    pickle_len: u64,
    limits: &Limits,
) -> Result<BTreeMap<String, u64>> {
    let walked = walk(heap, root, pickle_len, false)?;
    let mut sizes = BTreeMap::new();
    for (name, t) in &walked.tensors {
        let unit = storage_unit(&t.class)
            .or_else(|| dtype_element(&t.dtype).map(|e| e.logical_size()))
            .ok_or_else(|| {
                Error::unsupported(format!(
                    "tensor {name:?} is stored as {}, whose element size this reader does not \
                     know, and its record's length in a streamed archive is known only from it",
                    t.class
                ))
            })?;
        let bytes = t.numel.checked_mul(unit).ok_or_else(|| {
            bad(format!(
                "storage {:?} of {} elements overflows",
                t.key, t.numel
            ))
        })?;
        if bytes > limits.max_decompressed_len {
            return Err(Error::limit(format!(
                "storage {:?} of {bytes} bytes exceeds the cap of {} decoded bytes",
                t.key, limits.max_decompressed_len
            )));
        }
        if let Some(&other) = sizes.get(&t.key) {
            if other != bytes {
                return Err(bad(format!(
                    "storage {:?} is given {other} and {bytes} bytes",
                    t.key
                )));
            }
        }
        sizes.insert(t.key.clone(), bytes);
    }
    Ok(sizes)
}

/// The length of a small record whose bytes start at `at`: where a data descriptor follows
/// that gives the distance from `at` as both its sizes.
fn small_record_len(front: &mut Front<impl Read>, at: u64, name: &str) -> Result<u64> {
    let mut want = STEP as u64;
    loop {
        let complete = !front.fill_to(at.saturating_add(want).saturating_add(16))?;
        let end = front.start.saturating_add(front.buf.len() as u64);
        let bytes = front.held(at, end.saturating_sub(at))?;
        let limit = bytes.len().min(MAX_SMALL_RECORD as usize + 16);
        let closes = |p: usize| {
            let from = bytes.get(p..).unwrap_or_default();
            descriptor_closing(from, p as u64, |_| true).is_some()
        };
        if let Some(p) = (0..limit.saturating_sub(15)).find(|&p| closes(p)) {
            return Ok(p as u64);
        }
        if complete || want >= MAX_SMALL_RECORD {
            return Err(bad(format!(
                "record {name:?} has no data descriptor within {MAX_SMALL_RECORD} bytes"
            ))
            .at(at));
        }
        want = want.saturating_mul(2).min(MAX_SMALL_RECORD);
    }
}

/// The length of the data descriptor at `at` that closes a record of `len` bytes: 16 with
/// 4-byte sizes, 24 with zip64's 8-byte ones, whichever gives `len` and is followed by the
/// next header.
fn descriptor_len(front: &mut Front<impl Read>, at: u64, len: u64) -> Result<u64> {
    front.fill_to(at.saturating_add(28))?;
    let end = front.start.saturating_add(front.buf.len() as u64);
    let bytes = front.held(at, end.saturating_sub(at))?;
    if !bytes.starts_with(DESCRIPTOR) {
        return Err(bad("a record is not closed by a data descriptor where it ends").at(at));
    }
    let next_is_header = |rest: &[u8]| rest.get(..2).is_none_or(|s| s == b"PK");
    match descriptor_closing(bytes, len, next_is_header) {
        Some(descriptor) => Ok(descriptor.len),
        None => Err(bad(format!(
            "a record's data descriptor does not give its {len} bytes"
        ))
        .at(at)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PYTORCH: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/interop/pytorch/"
    );

    /// `archive` listed with no bound on what it may decode.
    fn unbounded(archive: &[u8]) -> Result<(Listing, Vec<(u64, u64)>)> {
        let mut budget = u64::MAX;
        list_streamed(archive, &Limits::default(), &mut budget)
    }

    /// Checkpoints `torch.save` wrote (their records closed by data descriptors, torch's
    /// writer never seeks back), listed from the front, give what the central directory
    /// gives; every record with bytes is found closed (but in the big-endian one, which
    /// Python's zipfile wrote, sizes first).
    #[test]
    fn the_front_lists_what_the_directory_lists() {
        let limits = Limits::default();
        for name in ["dtypes.pt", "state_dict.pt", "training.pt", "big_endian.pt"] {
            let bytes = std::fs::read(format!("{PYTORCH}{name}")).unwrap();
            let source = Source::from_vec(bytes.clone());
            let entries = zip::entries_by(&source, zip::Rules::Miniz).unwrap().entries;
            let whole = list(&source, entries, &limits, FileVersion::PyTorch).unwrap();
            let (front, closed) = unbounded(bytes.as_slice()).unwrap();
            assert!(!whole.objects.is_empty(), "{name}");
            assert_eq!(whole.objects, front.objects, "{name}");
            assert_eq!(whole.attributes, front.attributes, "{name}");
            for o in &whole.objects {
                let c = o.components.first().unwrap();
                let at = (c.offset, c.length);
                let inside = closed
                    .iter()
                    .any(|&(s, l)| s <= at.0 && at.0 + at.1 <= s + l);
                let sized_first = name == "big_endian.pt";
                assert!(inside != sized_first || c.length == 0, "{name}: {}", o.name);
            }
        }
    }

    /// Cut before its last storage's record starts, an archive is refused with an error,
    /// never a panic (the walk stops there: what lies after is not read).
    #[test]
    fn every_cut_before_the_last_storage_is_an_error() {
        let bytes = std::fs::read(format!("{PYTORCH}state_dict.pt")).unwrap();
        let source = Source::from_vec(bytes.clone());
        let entries = zip::entries_by(&source, zip::Rules::Miniz).unwrap().entries;
        let last = entries
            .iter()
            .filter(|e| e.name.contains("/data/"))
            .map(|e| e.data_offset)
            .max()
            .unwrap();
        for cut in 0..last as usize {
            match unbounded(&bytes[..cut]) {
                Ok(_) => panic!("cut at {cut}: listed"),
                Err(e) => {
                    let m = e.message();
                    assert!(
                        m.contains("PyTorch archive") || m.contains("pickle"),
                        "{cut}: {e}"
                    );
                }
            }
        }
        assert!(unbounded(&bytes[..last as usize]).is_ok());
    }

    /// Decoding more than the budget allows (here, to pass over the first storages) is a
    /// limit error; within it, what was decoded is taken from it.
    #[test]
    fn decoding_is_counted_against_the_budget() {
        let bytes = std::fs::read(format!("{PYTORCH}state_dict.pt")).unwrap();
        let limits = Limits::default();
        let mut budget = 1500;
        match list_streamed(bytes.as_slice(), &limits, &mut budget) {
            Ok(_) => panic!("listed within 1500 bytes"),
            Err(e) => assert_eq!(e.kind(), zt_container::ErrorKind::LimitExceeded, "{e}"),
        }
        let mut budget = 1 << 20;
        assert!(list_streamed(bytes.as_slice(), &limits, &mut budget).is_ok());
        let spent = (1 << 20) - budget;
        assert!(spent > 1500 && spent <= bytes.len() as u64, "{spent}");
    }

    /// A record name written twice is refused, as the zip reader refuses it.
    #[test]
    fn a_record_written_twice_is_refused() {
        let mut bytes = std::fs::read(format!("{PYTORCH}state_dict.pt")).unwrap();
        let second = bytes
            .windows(17)
            .position(|w| w == b"state_dict/data/1")
            .unwrap();
        bytes[second + 16] = b'0';
        match unbounded(bytes.as_slice()) {
            Ok(_) => panic!("listed"),
            Err(e) => assert!(e.message().contains("written twice"), "{e}"),
        }
    }
}
