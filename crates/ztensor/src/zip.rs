//! A minimal zip reader for the zip-based kinds (NumPy `.npz`, PyTorch checkpoints): the end
//! of central directory record (and its zip64 form), the central directory, and each entry's
//! local header, which gives where its data starts. Listing reads no entry data: a stored
//! entry is a range of the file, served from the map by the reader; a deflated one is a range
//! of compressed bytes with its declared size. [`check_crc`] (on verify) checks an entry's
//! CRC-32 against its bytes.
//!
//! Hostile archives are refused before anything is allocated from their numbers: the entry
//! count is checked against the central directory's bytes (46 bytes an entry at least), every
//! offset and size through checked arithmetic against the file, every local header against
//! its central directory record (the same name, or by miniz's rules a name of the same
//! length; inside the file, before the directory), and no two entries may overlap.
//! Encrypted entries, archives split over disks and compression methods other than stored
//! (0) and deflate (8) are `Unsupported`.
//!
//! What is wrong with one entry only (its local header, method, encryption, stored sizes) is
//! kept on that entry as its [`Damage`], as Python's zipfile fails on that entry alone: an
//! `.npz` lists the array unreadable; a checkpoint, which needs every record, refuses the
//! archive ([`undamaged`]). Damage to the directory or the end record refuses the archive.
//!
//! Two readers set the rules ([`Rules`]). torch reads checkpoints with miniz, which takes the
//! directory where the end record says (the zip64 one where its locator points) and checks its
//! disk numbers and entry count, and reads a local header for its lengths only. numpy
//! (`.npz`) and Keras read with Python's `zipfile`, which finds the directory from where the
//! end record lies: bytes inserted or cut before it shift every offset the same way
//! (zipfile's "concat", there for archives with data before them), and the entries it still
//! finds read. Disk numbers and counts it ignores; it reads records to the directory's size.
//!
//! An archive written to a stream (a DCP chunk through the zstd transform, decoded on the
//! fly) is not read through its directory: its records are closed by data descriptors
//! ([`descriptor_closing`]), and a read of one checks the archive's end after it
//! ([`check_stream_end`]: the end records and the directory's entry of the record).
//!
//! Written here instead of taken from the `zip` crate: the readers need each entry's data
//! offset (to serve stored entries from the map without a copy), which that crate exposes
//! only through its own reading path, and every check above is easier to state once here.
//!
//! ```text
//!  [local header | data] ... [central directory] [zip64 EOCD] [zip64 locator] [EOCD | comment]
//! ```

use std::borrow::Cow;

use zt_container::{Error, ErrorKind, Result, Source};

/// How an entry's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// As they are (method 0).
    Stored,
    /// Raw deflate (method 8).
    Deflated,
}

/// One entry of an archive, checked against the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The entry's name as written (UTF-8).
    pub name: String,
    /// How its bytes are stored.
    pub method: Method,
    /// Where its stored bytes start (after the local header).
    pub data_offset: u64,
    /// Stored bytes.
    pub compressed: u64,
    /// Bytes after inflating (equal to `compressed` when stored).
    pub uncompressed: u64,
    /// Where its local header starts.
    pub header_offset: u64,
    /// The CRC-32 of its uncompressed bytes, as the central directory gives it (checked by
    /// [`check_crc`] on verify, never at open: it costs a pass over the data).
    pub crc32: u32,
    /// Why the entry cannot be read, when only it is damaged (its local header, its method,
    /// its sizes): Python's zipfile opens such an archive and fails on that entry alone.
    /// `data_offset` is then unknown. [`undamaged`] refuses an archive with any.
    pub damage: Option<Damage>,
}

/// What is wrong with one entry of an archive that is otherwise whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Damage {
    /// `InvalidFile` or `Unsupported`.
    pub kind: ErrorKind,
    /// What is wrong and where.
    pub message: String,
}

impl Damage {
    fn of(e: &Error) -> Self {
        Damage {
            kind: e.kind(),
            message: e.located_message(),
        }
    }

    /// The error reading the entry gives.
    #[cfg(any(feature = "torch", feature = "hdf5"))]
    pub fn to_error(&self) -> Error {
        Error::new(self.kind, self.message.clone())
    }
}

/// `entries`, or the first entry's damage as an error: for readers that need every entry
/// (a checkpoint's records, a `.keras` archive).
#[cfg(any(feature = "torch", feature = "hdf5"))]
pub(crate) fn undamaged(entries: Vec<Entry>) -> Result<Vec<Entry>> {
    match entries
        .iter()
        .find_map(|e| e.damage.as_ref().map(|d| (e, d)))
    {
        Some((e, d)) => Err(d.to_error().in_object(&e.name)),
        None => Ok(entries),
    }
}

/// An entry's bytes, inflated when deflated (into a buffer of its declared size, at most
/// `cap`): for records read whole (a pickle, a JSON file, an embedded HDF5 file).
#[cfg(any(feature = "torch", feature = "hdf5"))]
pub(crate) fn entry_bytes<'s>(source: &'s Source, e: &Entry, cap: u64) -> Result<Cow<'s, [u8]>> {
    if e.uncompressed > cap {
        return Err(Error::limit(format!(
            "record {:?} of {} bytes exceeds the cap of {cap}",
            e.name, e.uncompressed
        ))
        .at(e.data_offset));
    }
    match e.method {
        Method::Stored => source.read_at(e.data_offset, e.compressed),
        Method::Deflated => {
            let stored = source.read_at(e.data_offset, e.compressed)?;
            let n = usize::try_from(e.uncompressed)
                .map_err(|_| Error::limit("record size exceeds usize"))?;
            let mut out = zt_container::internal::try_zeroed_vec::<u8>(n)?;
            inflate_into(&stored, 0, &mut out).map_err(|err| err.at(e.data_offset))?;
            Ok(Cow::Owned(out))
        }
    }
}

impl Entry {
    /// Where the entry's stored bytes end.
    pub fn data_end(&self) -> u64 {
        // Checked when the entry was listed.
        self.data_offset.saturating_add(self.compressed)
    }
}

/// The most entries an archive may list (a checkpoint of 100,000 tensors has about as many).
pub(crate) const MAX_ZIP_ENTRIES: u64 = 1 << 20;
/// The longest entry name accepted (the format's own cap is 65,535).
pub(crate) const MAX_ZIP_NAME_LEN: usize = 4096;

const EOCD_SIG: u32 = 0x0605_4b50;
const EOCD_LEN: u64 = 22;
const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
const ZIP64_LOCATOR_LEN: u64 = 20;
const ZIP64_EOCD_SIG: u32 = 0x0606_4b50;
const ZIP64_EOCD_LEN: u64 = 56;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const CENTRAL_LEN: u64 = 46;
const LOCAL_SIG: u32 = 0x0403_4b50;
const LOCAL_LEN: u64 = 30;
/// The longest comment an EOCD can have: how far from the end its signature can be.
const MAX_COMMENT: u64 = 0xFFFF;

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("invalid zip archive: {what}"))
}

/// Little-endian fields of a record, read without panicking.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn u16(&self, at: usize) -> u16 {
        self.0
            .get(at..at + 2)
            .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&self, at: usize) -> u32 {
        self.0
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_le_bytes)
    }
    fn u64(&self, at: usize) -> u64 {
        self.0
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    }
}

/// Whose rules an archive is read by: the reader its format's own tools use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rules {
    /// miniz's (torch's checkpoints): the directory at the offset the end record gives (the
    /// zip64 one where its locator points), one disk, as many records as the end record
    /// counts; a local header's name is not compared, only its length.
    Miniz,
    /// Python's `zipfile` (numpy's `.npz`, Keras): the directory ends where the end record (or
    /// the zip64 one) starts, and every local header offset moves by as much as the
    /// directory did; records are read to the directory's size (the last one's fields short
    /// where they run past it); disk numbers and counts in a plain end record are not looked
    /// at; a record needing a zip version above 6.3 refuses the archive.
    Zipfile,
}

/// An archive's entries, and whether Python's `zipfile` would find the same ones.
#[derive(Debug)]
pub(crate) struct Archive {
    /// In central directory order.
    pub entries: Vec<Entry>,
    /// Whether Python's `zipfile` finds these entries too: read by its rules, or by miniz's
    /// with the directory ending where the records after it start, no record needing a zip
    /// newer than 6.3, every name ASCII or flagged UTF-8 (zipfile decodes others as code
    /// page 437) and every local header naming its entry as the directory does. When not, an
    /// archive zipfile reads is read again by its rules.
    pub zipfile_agrees: bool,
}

/// Where the central directory is and how many entries it declares.
struct Directory {
    offset: u64,
    size: u64,
    /// Declared records (miniz's rules); `None`: read records to `size` (zipfile's).
    count: Option<u64>,
    /// Where the records after the directory start (zip64 EOCD or EOCD).
    end: u64,
    /// What local header offsets are moved by.
    shift: i128,
    /// The end record's number of this disk (0 or 1 by miniz's rules; zipfile's ignore it),
    /// which each record's first disk must match (or be 1).
    disk: u32,
}

/// Lists an archive's entries in central directory order, each checked as the module says,
/// by `rules`.
pub(crate) fn entries_by(source: &Source, rules: Rules) -> Result<Archive> {
    let dir = match rules {
        Rules::Miniz => find_directory(source)?,
        Rules::Zipfile => find_directory_as_zipfile(source)?,
    };
    // Every record takes 46 bytes at least: the directory's size bounds the count too.
    let most = dir.count.unwrap_or(dir.size / CENTRAL_LEN);
    if most > MAX_ZIP_ENTRIES {
        return Err(Error::limit(format!(
            "zip archive lists {most} entries, more than the cap of {MAX_ZIP_ENTRIES}"
        )));
    }
    let fits = most.checked_mul(CENTRAL_LEN).is_some_and(|n| n <= dir.size);
    if !fits {
        return Err(bad(format!(
            "{most} entries cannot fit in a central directory of {} bytes",
            dir.size
        ))
        .at(dir.offset));
    }
    let cd = source.read_at(dir.offset, dir.size)?;
    let mut out = zt_container::internal::try_with_capacity(most as usize)?;
    let mut at = 0usize;
    let mut newest_version = 0u8;
    // A name that is neither ASCII nor flagged UTF-8 zipfile reads as code page 437.
    let mut names_decode_alike = true;
    // A local header spelling its name otherwise is damage to zipfile, not to miniz.
    let mut local_names_agree = true;
    while match dir.count {
        Some(count) => (out.len() as u64) < count,
        None => (at as u64) < dir.size,
    } {
        let abs = dir.offset + at as u64;
        let Record {
            mut entry,
            next,
            version,
            name_flagged_utf8,
            disk,
        } = central_record(&cd, at, abs, rules)?;
        // miniz refuses the archive for an entry on another disk than the end record's (1
        // passes, as does 0 on disk 0).
        if rules == Rules::Miniz && (disk == u16::MAX || (u32::from(disk) != dir.disk && disk != 1))
        {
            return Err(Error::unsupported(format!(
                "a zip archive split over several disks (entry {:?} starts on disk {disk})",
                entry.name
            ))
            .at(abs));
        }
        newest_version = newest_version.max(version);
        names_decode_alike &= entry.name.is_ascii() || name_flagged_utf8;
        if rules == Rules::Zipfile {
            // zipfile refuses the whole archive for a record that needs a newer zip.
            if version > 63 {
                return Err(Error::unsupported(format!(
                    "zip entry {:?} needs zip version {}.{} to extract (6.3 is read)",
                    entry.name,
                    version / 10,
                    version % 10
                ))
                .at(abs));
            }
            shift_header(&mut entry, dir.shift);
        }
        let entry = match entry.damage {
            Some(_) => entry,
            None => match data_offset(source, &entry, dir.offset, rules) {
                Ok((data_offset, same_name)) => {
                    local_names_agree &= same_name;
                    Entry {
                        data_offset,
                        ..entry
                    }
                }
                Err(e) if e.kind() == ErrorKind::InvalidFile => Entry {
                    damage: Some(Damage::of(&e)),
                    ..entry
                },
                Err(e) => return Err(e),
            },
        };
        out.push(entry);
        at = next;
    }
    // Records must fill the directory (zipfile reads what is left as one more record); by
    // zipfile's rules the last may run past it.
    let past_end = at as u64 > dir.size && rules == Rules::Zipfile;
    if at as u64 != dir.size && !past_end {
        return Err(bad(format!(
            "the central directory's {} records take {at} of its {} bytes",
            out.len(),
            dir.size
        ))
        .at(dir.offset + at as u64));
    }
    check_overlaps(&mut out)?;
    let ends_at_end_record = dir.offset.checked_add(dir.size) == Some(dir.end);
    Ok(Archive {
        entries: out,
        zipfile_agrees: rules == Rules::Zipfile
            || (ends_at_end_record
                && newest_version <= 63
                && names_decode_alike
                && local_names_agree),
    })
}

/// Moves an entry's local header by `shift` (zipfile's rules); one moved outside the file's
/// offsets is damage to that entry, which zipfile finds when the entry is read.
fn shift_header(entry: &mut Entry, shift: i128) {
    if shift == 0 || entry.damage.is_some() {
        return;
    }
    match u64::try_from(i128::from(entry.header_offset) + shift) {
        Ok(moved) => entry.header_offset = moved,
        Err(_) => {
            let e = bad(format!(
                "local header offset {} moved by {shift} (as the directory was) lies before \
                 the file",
                entry.header_offset
            ));
            entry.damage = Some(Damage::of(&e.in_object(&entry.name)));
        }
    }
}

/// The end record as Python's `zipfile` finds it: one with no comment in the last 22 bytes,
/// else the last signature in the last 64 KiB + 22 bytes, whatever its comment length says;
/// the zip64 record when a locator sits right before it (the locator's own offset unread);
/// and the directory placed to end where those records start.
fn find_directory_as_zipfile(source: &Source) -> Result<Directory> {
    let len = source.len();
    if len < EOCD_LEN {
        return Err(bad(format!(
            "no end of central directory record ({len} bytes is too short for one)"
        )));
    }
    let tail_len = len.min(EOCD_LEN + (1 << 16));
    let tail_start = len - tail_len;
    let tail = source.read_at(tail_start, tail_len)?;
    let last = (tail_len - EOCD_LEN) as usize;
    let plain = Fields(tail.get(last..).unwrap_or_default());
    let i = if plain.u32(0) == EOCD_SIG && plain.u16(20) == 0 {
        last
    } else {
        match tail.windows(4).rposition(|w| w == EOCD_SIG.to_le_bytes()) {
            Some(i) if i <= last => i,
            _ => return Err(bad("no end of central directory record (file truncated?)")),
        }
    };
    let eocd_at = tail_start + i as u64;
    let f = Fields(tail.get(i..).unwrap_or_default());
    let (mut size, mut offset) = (u64::from(f.u32(12)), u64::from(f.u32(16)));
    let mut end = eocd_at;
    if let Some(locator_at) = eocd_at.checked_sub(ZIP64_LOCATOR_LEN) {
        let locator = source.read_at(locator_at, ZIP64_LOCATOR_LEN)?;
        let l = Fields(&locator);
        if l.u32(0) == ZIP64_LOCATOR_SIG {
            if l.u32(4) != 0 || l.u32(16) > 1 {
                return Err(
                    Error::unsupported("a zip archive split over several disks").at(locator_at)
                );
            }
            if let Some(z64_at) = locator_at.checked_sub(ZIP64_EOCD_LEN) {
                let z64 = source.read_at(z64_at, ZIP64_EOCD_LEN)?;
                let z = Fields(&z64);
                if z.u32(0) == ZIP64_EOCD_SIG {
                    (size, offset, end) = (z.u64(40), z.u64(48), z64_at);
                }
            }
        }
    }
    let Some(start) = end.checked_sub(size) else {
        return Err(bad(format!(
            "central directory of {size} bytes does not fit before its end record at {end}"
        ))
        .at(end));
    };
    Ok(Directory {
        offset: start,
        size,
        count: None,
        end,
        shift: i128::from(start) - i128::from(offset),
        disk: 0,
    })
}

/// Finds the end record as torch's miniz does (the last signature with a whole record after
/// it, in the last 64 KiB + 22 bytes; what follows the record is not looked at) and, when a
/// zip64 locator sits right before it and points at a zip64 end record, takes the directory
/// from that record, whatever the plain record's fields say: torch writes both, and miniz
/// reads the zip64 one. A locator pointing past the file refuses the archive; one pointing
/// at anything else leaves the plain record in charge.
fn find_directory(source: &Source) -> Result<Directory> {
    find_directory_by(source.len(), 0, &|at, len| source.read_at(at, len))
}

/// [`find_directory`] in an archive of `len` bytes of which `read` reads those from `held`
/// on.
fn find_directory_by<'a>(
    len: u64,
    held: u64,
    read: &dyn Fn(u64, u64) -> Result<Cow<'a, [u8]>>,
) -> Result<Directory> {
    if len.saturating_sub(held) < EOCD_LEN {
        return Err(bad(format!(
            "no end of central directory record ({len} bytes is too short for one)"
        )));
    }
    let tail_len = (len - held).min(EOCD_LEN + MAX_COMMENT);
    let tail_start = len - tail_len;
    let tail = read(tail_start, tail_len)?;
    let found = (0..=(tail_len - EOCD_LEN) as usize)
        .rev()
        .find(|&i| Fields(tail.get(i..).unwrap_or_default()).u32(0) == EOCD_SIG);
    let Some(i) = found else {
        return Err(bad("no end of central directory record (file truncated?)"));
    };
    let eocd_at = tail_start + i as u64;
    let f = Fields(tail.get(i..).unwrap_or_default());
    let plain = |zip64_lost: bool| {
        let (here, total) = (f.u16(8), f.u16(10));
        let (size, offset) = (f.u32(12), f.u32(16));
        if here == 0xFFFF || total == 0xFFFF || size == u32::MAX || offset == u32::MAX {
            let what = if zip64_lost {
                "zip64 fields but no zip64 end of central directory where its locator points"
            } else {
                "zip64 fields but no zip64 locator"
            };
            return Err(bad(what).at(eocd_at));
        }
        check_directory(miniz_directory(
            (u32::from(f.u16(4)), u32::from(f.u16(6))),
            (u64::from(here), u64::from(total)),
            (u64::from(offset), u64::from(size)),
            eocd_at,
        )?)
    };
    // miniz looks for the locator only where a zip64 end record could also fit before it.
    let Some(locator_at) = eocd_at
        .checked_sub(ZIP64_LOCATOR_LEN)
        .filter(|&at| at >= ZIP64_EOCD_LEN)
    else {
        return plain(false);
    };
    let locator = read(locator_at, ZIP64_LOCATOR_LEN)?;
    let l = Fields(&locator);
    if l.u32(0) != ZIP64_LOCATOR_SIG {
        return plain(false);
    }
    let z64_at = l.u64(8);
    if len
        .checked_sub(ZIP64_EOCD_LEN)
        .is_none_or(|last| z64_at > last)
    {
        return Err(bad(format!(
            "zip64 end of central directory at {z64_at} runs past the end of the file"
        ))
        .at(locator_at));
    }
    let z64 = read(z64_at, ZIP64_EOCD_LEN)?;
    let z = Fields(&z64);
    if z.u32(0) != ZIP64_EOCD_SIG {
        return plain(true);
    }
    if z.u64(4) < ZIP64_EOCD_LEN - 12 {
        return Err(bad(format!(
            "zip64 end of central directory says it is {} bytes long, less than its fields",
            z.u64(4)
        ))
        .at(z64_at));
    }
    if l.u32(16) != 1 {
        return Err(Error::unsupported("a zip archive split over several disks").at(locator_at));
    }
    let size = z.u64(40);
    if size > u64::from(u32::MAX) {
        // miniz's own limit: torch refuses such an archive ("unsupported central directory
        // size").
        return Err(Error::unsupported(format!(
            "a central directory of {size} bytes (torch's reader takes at most 4 GiB)"
        ))
        .at(z64_at));
    }
    // The directory must end before the zip64 end record.
    check_directory(miniz_directory(
        (z.u32(16), z.u32(20)),
        (z.u64(24), z.u64(32)),
        (z.u64(48), size),
        z64_at,
    )?)
}

/// The directory by miniz's checks of an end record's fields (plain or zip64): as many
/// entries on this disk as in all, and the disk numbers both 0 or both 1.
fn miniz_directory(
    (disk, directory_disk): (u32, u32),
    (here, total): (u64, u64),
    (offset, size): (u64, u64),
    end: u64,
) -> Result<Directory> {
    let one_disk = disk == directory_disk && disk <= 1;
    if here != total || !one_disk {
        return Err(Error::unsupported("a zip archive split over several disks").at(end));
    }
    Ok(Directory {
        offset,
        size,
        count: Some(total),
        end,
        shift: 0,
        disk,
    })
}

/// The central directory must lie before the records that end the archive.
fn check_directory(dir: Directory) -> Result<Directory> {
    let fits = dir
        .offset
        .checked_add(dir.size)
        .is_some_and(|e| e <= dir.end);
    if !fits {
        return Err(bad(format!(
            "central directory of {} bytes at {} runs past its end record at {}",
            dir.size, dir.offset, dir.end
        ))
        .at(dir.end));
    }
    Ok(dir)
}

/// What one central directory record says.
struct Record {
    /// The entry, its data offset not yet known.
    entry: Entry,
    /// Where the next record starts in the directory.
    next: usize,
    /// The zip version needed to extract (major x 10 + minor).
    version: u8,
    /// Whether flag bit 11 says the name is UTF-8.
    name_flagged_utf8: bool,
    /// The disk the entry starts on.
    disk: u16,
}

/// One central directory record at `at` in `cd` (`abs` in the file).
fn central_record(cd: &[u8], at: usize, abs: u64, rules: Rules) -> Result<Record> {
    let rec = cd.get(at..).unwrap_or_default();
    let f = Fields(rec);
    if rec.len() < CENTRAL_LEN as usize {
        return Err(bad("central directory ends inside a record").at(abs));
    }
    if f.u32(0) != CENTRAL_SIG {
        return Err(bad("bad central directory record signature").at(abs));
    }
    let flags = f.u16(8);
    // What makes only this entry unreadable (the archive stays readable, as in zipfile).
    let mut damage = None;
    let method = match f.u16(10) {
        0 => Method::Stored,
        8 => Method::Deflated,
        m => {
            damage = Some(Error::unsupported(format!(
                "zip compression method {m} (only stored and deflate are read)"
            )));
            Method::Stored
        }
    };
    let (name_len, extra_len, comment_len) =
        (f.u16(28) as usize, f.u16(30) as usize, f.u16(32) as usize);
    let name_at = CENTRAL_LEN as usize;
    let extra_at = name_at + name_len;
    let next_rel = extra_at + extra_len + comment_len;
    // zipfile reads the last record's fields short when they run past the directory (and
    // stops there: its loop runs while it is inside); miniz refuses the record.
    let field = |from: usize, len: usize| match rules {
        Rules::Miniz => rec.get(from..from + len),
        Rules::Zipfile => rec.get(from.min(rec.len())..(from + len).min(rec.len())),
    };
    let (Some(name), Some(extra)) = (field(name_at, name_len), field(extra_at, extra_len)) else {
        return Err(bad("central directory record runs past the directory").at(abs));
    };
    if rec.len() < next_rel && rules == Rules::Miniz {
        return Err(bad("central directory record runs past the directory").at(abs));
    }
    // The bytes taken (a name read short is only what is left of the directory).
    if name.len() > MAX_ZIP_NAME_LEN {
        return Err(Error::limit(format!(
            "zip entry name of {} bytes exceeds the cap of {MAX_ZIP_NAME_LEN}",
            name.len()
        ))
        .at(abs));
    }
    let name = entry_name(name, flags, rules)
        .ok_or_else(|| bad("entry name is not UTF-8").at(abs + name_at as u64))?;
    if flags & 1 != 0 {
        damage.get_or_insert(Error::unsupported(format!(
            "zip entry {name:?} is encrypted"
        )));
    }
    let mut uncompressed = u64::from(f.u32(24));
    let mut compressed = u64::from(f.u32(20));
    let mut header_offset = u64::from(f.u32(42));
    // zip64: the extended information field holds, in this order, those of the three that
    // are 0xFFFFFFFF in the record.
    let wants = [
        uncompressed == u64::from(u32::MAX),
        compressed == u64::from(u32::MAX),
        header_offset == u64::from(u32::MAX),
    ];
    // Every extra record must lie inside the extra field, as Python's zipfile requires of
    // every entry, whether or not its zip64 values are needed.
    let zip64 = zip64_extra(extra).map_err(|m| bad(format!("entry {name:?}: {m}")).at(abs))?;
    if wants.iter().any(|&w| w) {
        let values =
            zip64.ok_or_else(|| bad(format!("entry {name:?} has no zip64 extra field")).at(abs))?;
        let mut values = values.chunks_exact(8).map(|b| Fields(b).u64(0));
        for (i, want) in wants.into_iter().enumerate() {
            if !want {
                continue;
            }
            let v = values.next().ok_or_else(|| {
                bad(format!("entry {name:?}: zip64 extra field too short")).at(abs)
            })?;
            match i {
                0 => uncompressed = v,
                1 => compressed = v,
                _ => header_offset = v,
            }
        }
    }
    if damage.is_none() && method == Method::Stored && compressed != uncompressed {
        damage = Some(bad(format!(
            "stored entry {name:?} has {compressed} stored bytes but declares {uncompressed}"
        )));
    }
    let entry = Entry {
        name,
        method,
        data_offset: 0,
        compressed,
        uncompressed,
        header_offset,
        crc32: f.u32(16),
        damage: damage.map(|e| Damage::of(&e.at(abs))),
    };
    Ok(Record {
        entry,
        next: at + next_rel,
        version: rec.get(6).copied().unwrap_or(0),
        name_flagged_utf8: flags & FLAG_UTF8 != 0,
        disk: f.u16(34),
    })
}

/// General purpose flag bit 11: the name is UTF-8.
const FLAG_UTF8: u16 = 1 << 11;

/// An entry's name from its bytes: UTF-8 by miniz's rules (torch's names are ASCII); by
/// zipfile's, UTF-8 when flag bit 11 says so and code page 437 otherwise, as zipfile decodes
/// them (so a name numpy lists with a damaged byte is listed the same). `None`: not UTF-8
/// where it must be.
fn entry_name(bytes: &[u8], flags: u16, rules: Rules) -> Option<String> {
    if rules == Rules::Miniz || flags & FLAG_UTF8 != 0 {
        return String::from_utf8(bytes.to_vec()).ok();
    }
    Some(
        bytes
            .iter()
            .map(|&b| match b.checked_sub(0x80) {
                None => char::from(b),
                Some(high) => CP437_HIGH.get(usize::from(high)).copied().unwrap_or('?'),
            })
            .collect(),
    )
}

/// Code page 437's characters for bytes 0x80-0xFF (below, it is ASCII).
const CP437_HIGH: [char; 128] = [
    'Ç', 'ü', 'é', 'â', 'ä', 'à', 'å', 'ç', 'ê', 'ë', 'è', 'ï', 'î', 'ì', 'Ä', 'Å', 'É', 'æ', 'Æ',
    'ô', 'ö', 'ò', 'û', 'ù', 'ÿ', 'Ö', 'Ü', '¢', '£', '¥', '₧', 'ƒ', 'á', 'í', 'ó', 'ú', 'ñ', 'Ñ',
    'ª', 'º', '¿', '⌐', '¬', '½', '¼', '¡', '«', '»', '░', '▒', '▓', '│', '┤', '╡', '╢', '╖', '╕',
    '╣', '║', '╗', '╝', '╜', '╛', '┐', '└', '┴', '┬', '├', '─', '┼', '╞', '╟', '╚', '╔', '╩', '╦',
    '╠', '═', '╬', '╧', '╨', '╤', '╥', '╙', '╘', '╒', '╓', '╫', '╪', '┘', '┌', '█', '▄', '▌', '▐',
    '▀', 'α', 'ß', 'Γ', 'π', 'Σ', 'σ', 'µ', 'τ', 'Φ', 'Θ', 'Ω', 'δ', '∞', 'φ', 'ε', '∩', '≡', '±',
    '≥', '≤', '⌠', '⌡', '÷', '≈', '°', '∙', '·', '√', 'ⁿ', '²', '■', '\u{a0}',
];

/// Bytes of a stored entry hashed at a time (borrowed from a map, or read), so a large entry
/// never needs memory of its size.
const CRC_CHUNK: u64 = 8 << 20;
/// Bytes a deflated entry is inflated into at a time.
const INFLATE_PIECE: usize = 64 << 10;

/// Checks an entry's CRC-32 (zip's, the ISO-HDLC polynomial) against its uncompressed bytes:
/// a stored entry's bytes as they are, a deflated one's inflated, which must come to exactly
/// the declared size. The error names the entry and its data offset; the file is at fault.
///
/// A deflated entry is inflated in small pieces, never whole, and one declared larger than
/// `max_inflated` (the reader's cap on decompressed sizes) is a limit error, not a pass over
/// gigabytes a small file can declare.
pub(crate) fn check_crc(source: &Source, entry: &Entry, max_inflated: u64) -> Result<()> {
    let at = |e: Error| {
        Error::new(
            e.kind(),
            format!("zip entry {:?}: {}", entry.name, e.message()),
        )
        .at(e.offset().unwrap_or(entry.data_offset))
    };
    let mut crc = crc32fast::Hasher::new();
    match entry.method {
        Method::Stored => {
            let mut done = 0u64;
            while done < entry.compressed {
                let n = (entry.compressed - done).min(CRC_CHUNK);
                let offset = entry
                    .data_offset
                    .checked_add(done)
                    .ok_or_else(|| at(bad("entry data offset overflows")))?;
                crc.update(&source.read_at(offset, n).map_err(at)?);
                done += n;
            }
        }
        Method::Deflated => {
            use std::io::Read;
            if entry.uncompressed > max_inflated {
                return Err(at(Error::limit(format!(
                    "declares {} bytes inflated, over the cap of {max_inflated}; its CRC-32 \
                     is not checked",
                    entry.uncompressed
                ))));
            }
            let stored = source
                .read_at(entry.data_offset, entry.compressed)
                .map_err(at)?;
            // One byte past the declared size is read, so that more data is seen as such.
            let mut inflater = flate2::bufread::DeflateDecoder::new(&stored[..])
                .take(entry.uncompressed.saturating_add(1));
            let mut buf = vec![0u8; INFLATE_PIECE];
            let mut total = 0u64;
            loop {
                let n = inflater
                    .read(&mut buf)
                    .map_err(|e| at(bad(format!("the deflated data does not inflate ({e})"))))?;
                if n == 0 {
                    break;
                }
                total += n as u64;
                crc.update(buf.get(..n).unwrap_or_default());
            }
            if total != entry.uncompressed {
                return Err(at(bad(format!(
                    "inflates to {}{} bytes, but the directory declares {}",
                    total.min(entry.uncompressed),
                    if total > entry.uncompressed {
                        " or more"
                    } else {
                        ""
                    },
                    entry.uncompressed
                ))));
            }
        }
    }
    let got = crc.finalize();
    if got != entry.crc32 {
        return Err(at(Error::checksum(format!(
            "CRC-32 of its bytes is {got:08x}, but the directory says {:08x}",
            entry.crc32
        ))));
    }
    Ok(())
}

/// The data of the zip64 extended information extra field (id 1), if present; an error for
/// an extra record that runs past the end of the extra field.
fn zip64_extra(mut extra: &[u8]) -> std::result::Result<Option<&[u8]>, String> {
    let mut zip64 = None;
    while extra.len() >= 4 {
        let f = Fields(extra);
        let (id, len) = (f.u16(0), f.u16(2) as usize);
        let Some(data) = extra.get(4..4 + len) else {
            return Err(format!(
                "extra record {id:#06x} of {len} bytes runs past its extra field ({} left)",
                extra.len() - 4
            ));
        };
        if id == 1 && zip64.is_none() {
            zip64 = Some(data);
        }
        extra = extra.get(4 + len..).unwrap_or_default();
    }
    Ok(zip64)
}

/// Where an entry's data starts, from its local header, and whether the header spells the
/// entry's name as the directory does. By zipfile's rules the header must name the same
/// entry. miniz never reads the header's name, only its length: a name of the directory's
/// length with other bytes leaves the data where it is (torch reads it, and so do we), while
/// one of another length moves the data, which torch then reads from the wrong place without
/// a word (refused here). Either way the data must end before the central directory.
fn data_offset(source: &Source, e: &Entry, cd_offset: u64, rules: Rules) -> Result<(u64, bool)> {
    let at = e.header_offset;
    let in_entry = |err: Error| err.in_object(&e.name);
    let head_fits = at
        .checked_add(LOCAL_LEN)
        .is_some_and(|end| end <= cd_offset);
    if !head_fits {
        return Err(in_entry(
            bad(format!(
                "local header at {at} is not before the central directory at {cd_offset}"
            ))
            .at(at),
        ));
    }
    let head = source.read_at(at, LOCAL_LEN)?;
    let f = Fields(&head);
    if f.u32(0) != LOCAL_SIG {
        return Err(in_entry(bad("bad local header signature").at(at)));
    }
    let (name_len, extra_len) = (u64::from(f.u16(26)), u64::from(f.u16(28)));
    let name: Cow<'_, [u8]> = source.read_at(at + LOCAL_LEN, name_len)?;
    // zipfile compares the names as each header's own flag decodes them.
    let same = match rules {
        Rules::Miniz => *name == *e.name.as_bytes(),
        Rules::Zipfile => entry_name(&name, f.u16(6), rules).as_deref() == Some(e.name.as_str()),
    };
    if rules == Rules::Miniz && name.len() != e.name.len() {
        return Err(in_entry(
            bad(format!(
                "local header's name is {} bytes where the central directory's is {} (its data \
                 would move)",
                name.len(),
                e.name.len()
            ))
            .at(at),
        ));
    }
    if !same && rules == Rules::Zipfile {
        return Err(in_entry(
            bad("local header names another entry than the central directory").at(at),
        ));
    }
    let data_offset = at + LOCAL_LEN + name_len + extra_len;
    let data_fits = data_offset
        .checked_add(e.compressed)
        .is_some_and(|end| end <= cd_offset);
    if !data_fits {
        return Err(in_entry(
            bad(format!(
                "{} bytes of data at {data_offset} run past the central directory at {cd_offset}",
                e.compressed
            ))
            .at(at),
        ));
    }
    Ok((data_offset, same))
}

/// Entries may not share bytes (a header or data), and a name may be given once. A damaged
/// entry's data is not placed, so only its name counts.
fn check_overlaps(entries: &mut [Entry]) -> Result<()> {
    let mut order: Vec<usize> = (0..entries.len())
        .filter(|&i| entries.get(i).is_some_and(|e| e.damage.is_none()))
        .collect();
    order.sort_unstable_by_key(|&i| entries.get(i).map_or(0, |e| e.header_offset));
    for w in order.windows(2) {
        let (Some(a), Some(b)) = (entries.get(w[0]), entries.get(w[1])) else {
            continue;
        };
        if a.data_end() > b.header_offset {
            return Err(
                bad(format!("entries {:?} and {:?} overlap", a.name, b.name)).at(b.header_offset),
            );
        }
    }
    let mut names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(bad(format!("entry {:?} is listed twice", w[0])));
    }
    Ok(())
}

/// Inflates the first `want` bytes of a deflated stream. `stored` is the whole stream
/// (`whole`), which must not end before its final block, or a prefix of it, which may end
/// anywhere: then fewer bytes may come back.
#[cfg(feature = "numpy")]
pub(crate) fn inflate_prefix(stored: &[u8], want: u64, whole: bool) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    let read = flate2::bufread::DeflateDecoder::new(stored)
        .take(want)
        .read_to_end(&mut out);
    match read {
        Ok(_) => Ok(out),
        // A prefix of a stream ends inside it: what was inflated so far is kept.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !whole => Ok(out),
        Err(e) => Err(bad(format!("deflate stream: {e}"))),
    }
}

/// Inflates a deflated stream that must decode to exactly `skip + dst.len()` bytes, dropping
/// the first `skip` and filling `dst` with the rest. Nothing past the declared size is
/// decoded, and a stream that ends early or goes on is an error.
#[cfg(any(feature = "torch", feature = "hdf5"))]
pub(crate) fn inflate_into(stored: &[u8], skip: u64, dst: &mut [u8]) -> Result<()> {
    inflate_part_into(stored, skip, dst, true, None)
}

/// A sink for the skipped head of a stream that still feeds the CRC-32 of the entry.
struct HashedSink<'h>(Option<&'h mut crc32fast::Hasher>);

impl std::io::Write for HashedSink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(crc) = self.0.as_deref_mut() {
            crc.update(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Inflates `dst.len()` bytes of a deflate stream, from `skip` bytes into it; with `to_end`,
/// the stream must end there (the whole entry is being read), otherwise the rest is not
/// inflated (a tensor that is a prefix of its storage; the entry's CRC-32 check reads it all).
/// `crc`, when given, is fed every byte inflated, the skipped ones too: a read that inflates
/// a whole entry checks its CRC-32 in the same pass.
pub(crate) fn inflate_part_into(
    stored: &[u8],
    skip: u64,
    dst: &mut [u8],
    to_end: bool,
    mut crc: Option<&mut crc32fast::Hasher>,
) -> Result<()> {
    use std::io::Read;
    // The buffered decoder reads the slice in place (the unbuffered one copies it through a
    // buffer of its own first).
    let mut d = flate2::bufread::DeflateDecoder::new(stored);
    let mut head = HashedSink(crc.as_deref_mut());
    let skipped = std::io::copy(&mut (&mut d).take(skip), &mut head)
        .map_err(|e| bad(format!("deflate stream: {e}")))?;
    if skipped != skip {
        return Err(bad("deflate stream ends before its declared size"));
    }
    d.read_exact(dst).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => bad("deflate stream ends before its declared size"),
        _ => bad(format!("deflate stream: {e}")),
    })?;
    if let Some(crc) = crc {
        crc.update(dst);
    }
    if !to_end {
        return Ok(());
    }
    let mut one = [0u8; 1];
    match d.read(&mut one) {
        Ok(0) => Ok(()),
        Ok(_) => Err(bad("deflate stream goes on past its declared size")),
        Err(e) => Err(bad(format!("deflate stream: {e}"))),
    }
}

/// A zip data descriptor, which follows a record written as a stream (flag bit 3) because
/// its header was written before its CRC-32 and sizes were known.
#[cfg(any(feature = "zstd", feature = "torch-dcp"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Descriptor {
    /// The CRC-32 of the record's bytes.
    pub(crate) crc32: u32,
    /// The descriptor's own length: 16 bytes with 4-byte sizes, 24 with zip64's 8-byte ones.
    pub(crate) len: u64,
}

/// The data descriptor at the start of `bytes`, if one is there that closes a record of
/// `record_len` bytes: `PK\x07\x08`, the CRC-32, then `record_len` as both sizes. A record's
/// own bytes may hold the same pattern, so a form counts only where `then` accepts the bytes
/// after it (what follows a record is the next header); the 16-byte form is tried first.
#[cfg(any(feature = "zstd", feature = "torch-dcp"))]
pub(crate) fn descriptor_closing(
    bytes: &[u8],
    record_len: u64,
    then: impl Fn(&[u8]) -> bool,
) -> Option<Descriptor> {
    let le32 = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let le64 = |at: usize| Some(u64::from(le32(at)?) | u64::from(le32(at + 4)?) << 32);
    if bytes.get(..4) != Some(b"PK\x07\x08".as_slice()) {
        return None;
    }
    let crc32 = le32(4)?;
    let short =
        le32(8).map(u64::from) == Some(record_len) && le32(12).map(u64::from) == Some(record_len);
    let long = le64(8) == Some(record_len) && le64(16) == Some(record_len);
    let follows = |len: usize| then(bytes.get(len..).unwrap_or_default());
    if short && follows(16) {
        Some(Descriptor { crc32, len: 16 })
    } else if long && follows(24) {
        Some(Descriptor { crc32, len: 24 })
    } else {
        None
    }
}

/// The most bytes decoded after a record of an archive written to a stream to reach its
/// end records ([`check_stream_end`]): the few small records torch writes after its
/// storages and the central directory. Where more follow (an archive of several storages
/// read at one before the last), the end is not reached and not checked.
#[cfg(feature = "zstd")]
pub(crate) const MAX_STREAM_END: u64 = 1 << 20;

/// Checks the end of an archive written to a stream (a DCP chunk through the zstd
/// transform), of which `end` holds the bytes from `end_at` (in what the stream decodes to)
/// to the last: its end records and central directory must be inside `end` and whole by
/// miniz's rules, and the directory's entry of the record whose bytes start at `data_at`
/// must give its `len` bytes and the CRC-32 its data descriptor gave, `crc32`. torch's reader
/// (miniz) finds the record by that entry and checks its bytes against that CRC-32, so an
/// archive whose directory alone is damaged fails there too.
#[cfg(feature = "zstd")]
pub(crate) fn check_stream_end(
    end: &[u8],
    end_at: u64,
    (data_at, len, crc32): (u64, u64, u32),
) -> Result<()> {
    let total = end_at.saturating_add(end.len() as u64);
    let read = |at: u64, n: u64| -> Result<Cow<'_, [u8]>> {
        let from = at.checked_sub(end_at).and_then(|r| usize::try_from(r).ok());
        let part = from
            .zip(usize::try_from(n).ok())
            .and_then(|(f, n)| end.get(f..f.checked_add(n)?));
        part.map(Cow::Borrowed).ok_or_else(|| {
            bad(format!(
                "the archive's end records point at {n} bytes at {at}, before the record at \
                 {data_at} ends or past the archive's end at {total}"
            ))
        })
    };
    let dir = find_directory_by(total, end_at, &read)?;
    let count = dir.count.unwrap_or(0);
    if count > MAX_ZIP_ENTRIES {
        return Err(Error::limit(format!(
            "the central directory declares {count} entries, more than {MAX_ZIP_ENTRIES}"
        )));
    }
    let cd = read(dir.offset, dir.size)?;
    // The record is the one whose header starts last before its bytes.
    let mut record: Option<Entry> = None;
    let mut next = 0;
    for _ in 0..count {
        let r = central_record(&cd, next, dir.offset + next as u64, Rules::Miniz)?;
        next = r.next;
        let before = r.entry.header_offset < data_at;
        if before
            && record
                .as_ref()
                .is_none_or(|e| e.header_offset < r.entry.header_offset)
        {
            record = Some(r.entry);
        }
    }
    let Some(e) = record else {
        return Err(bad(format!(
            "no central directory entry holds the record whose bytes start at {data_at}"
        )));
    };
    let header_end = e
        .header_offset
        .saturating_add(LOCAL_LEN + e.name.len() as u64);
    if header_end > data_at || (e.compressed, e.uncompressed, e.crc32) != (len, len, crc32) {
        return Err(bad(format!(
            "the central directory's entry {:?} (its header at {}) gives {} bytes with CRC-32 \
             {:08x}; the record at {data_at} has {len}, and its data descriptor CRC-32 \
             {crc32:08x}",
            e.name, e.header_offset, e.uncompressed, e.crc32
        )));
    }
    Ok(())
}

#[cfg(all(test, any(feature = "zstd", feature = "torch-dcp")))]
mod tests {
    use super::*;

    /// A descriptor for a record of `len` bytes with CRC-32 `crc`, its sizes `width` bytes.
    fn descriptor(crc: u32, len: u64, width: usize) -> Vec<u8> {
        let mut d = b"PK\x07\x08".to_vec();
        d.extend(crc.to_le_bytes());
        for _ in 0..2 {
            d.extend(&len.to_le_bytes()[..width]);
        }
        d
    }

    #[test]
    fn a_descriptor_closes_a_record_in_either_width() {
        let any = |_: &[u8]| true;
        let short = descriptor(0xdead_beef, 300, 4);
        let found = descriptor_closing(&short, 300, any);
        assert_eq!(
            found,
            Some(Descriptor {
                crc32: 0xdead_beef,
                len: 16
            })
        );
        let long = descriptor(7, 5 << 32, 8);
        assert_eq!(
            descriptor_closing(&long, 5 << 32, any).map(|d| d.len),
            Some(24)
        );
        // Another length, another signature, or too few bytes: no descriptor.
        assert_eq!(descriptor_closing(&short, 301, any), None);
        assert_eq!(descriptor_closing(&short[1..], 300, any), None);
        assert_eq!(descriptor_closing(&short[..15], 300, any), None);
    }

    #[test]
    fn what_follows_tells_the_widths_apart() {
        // The zip64 descriptor of an empty record reads as the 4-byte form too (sizes 0 and
        // 0, the halves of the first 8-byte size): only the bytes after tell.
        let mut bytes = descriptor(1, 0, 8);
        bytes.extend(b"PK\x03\x04");
        let header_next = |rest: &[u8]| rest.starts_with(b"PK");
        assert_eq!(
            descriptor_closing(&bytes, 0, header_next).map(|d| d.len),
            Some(24)
        );
        assert_eq!(
            descriptor_closing(&bytes, 0, |_| true).map(|d| d.len),
            Some(16)
        );
        // Nothing that accepts what follows: no descriptor.
        assert_eq!(descriptor_closing(&bytes, 0, |_| false), None);
    }
}
