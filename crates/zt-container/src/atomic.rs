//! Crash-safe file replacement: write a temporary file beside the target, then rename it.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::temp::TempFile;
use crate::{Error, Result};

/// What a finished file survives.
///
/// Both keep the temporary-file-and-rename: a killed process never leaves a torn target.
///
/// ```
/// # fn main() -> zt_container::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// use std::io::Write;
/// use zt_container::{AtomicFile, Durability};
/// let path = dir.path().join("scratch.bin");
/// let mut f = AtomicFile::create_with(&path, Durability::Unsynced)?;
/// f.write_all(b"cache")?;
/// f.commit()?; // renamed into place, not waited for on disk
/// assert_eq!(std::fs::read(&path)?, b"cache");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Durability {
    /// The file and its folder are synced before [`AtomicFile::commit`] returns: the new file
    /// survives a power loss or an operating-system crash from then on. The default.
    #[default]
    Synced,
    /// Nothing is synced: the new file survives a killed process, but a power loss soon after
    /// the commit may lose it (the old target or an empty file may be there instead). For
    /// scratch output that can be made again; saves the wait for the disk.
    Unsynced,
}

/// A file being written that replaces `target` only when [`AtomicFile::commit`] succeeds.
///
/// The bytes go to a temporary file in the target's folder (so the final rename stays on one
/// file system and is atomic). Until the commit the old target is untouched; if the process dies
/// the old target is intact, and if the value is dropped the temporary file is removed. On
/// Linux the temporary has no name until the commit, so even a killed process leaves nothing
/// behind; elsewhere see [`crate::temp`] for how a dead writer's temporary is swept.
#[derive(Debug)]
pub struct AtomicFile {
    target: PathBuf,
    temp: BufWriter<TempFile>,
    /// Bytes written so far.
    written: u64,
    /// Bytes whose writeback has been started ([`AtomicFile::start_writeback`]).
    writeback_started: u64,
    durability: Durability,
    /// Whether large writes have their blocks allocated before they are copied in
    /// ([`preallocation_pays`]).
    preallocate: bool,
}

/// Writeback is started in whole units of this size, a multiple of every page size in use.
const WRITEBACK_UNIT: u64 = 64 << 10;

/// Runs of zeros at least this long become holes ([`AtomicFile::write_zeros`]): two pages,
/// so that a hole covers at least one whole block of the usual 4096-byte file systems
/// wherever it starts. A shorter run is written: one `write` into the buffer is cheaper than
/// the flush and seek a hole takes.
pub const HOLE_MIN: u64 = 8 << 10;

/// Writeback starts by itself whenever this much more has been written: large writes are
/// split into pieces of this size so the disk works while the rest is still being written,
/// and the final sync waits for at most about this much.
const WRITEBACK_STEP: usize = 8 << 20;

/// A `write_all` of at least this many bytes has its range allocated on disk before it is
/// copied in, where that pays ([`preallocation_pays`]). Smaller writes go through the buffer.
const PREALLOCATE_MIN: usize = 1 << 20;

impl AtomicFile {
    /// Starts writing a replacement for `target`, synced on commit ([`Durability::Synced`]).
    pub fn create(target: &Path) -> Result<Self> {
        Self::create_with(target, Durability::Synced)
    }

    /// Starts writing a replacement for `target` with the given durability.
    pub fn create_with(target: &Path, durability: Durability) -> Result<Self> {
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = target
            .file_name()
            .ok_or_else(|| Error::argument("target path has no file name").in_file(target))?;
        let existing = std::fs::metadata(target).ok();
        // The rename at the commit replaces whatever has the name: a device (`/dev/null`
        // given as the output, by a user running as root), a pipe or a folder would be
        // swapped for a regular file.
        if let Some(m) = existing.as_ref().filter(|m| !m.is_file()) {
            let why = "output replaces its target whole (a finished file renamed over it), \
                       so it goes to regular files only";
            return Err(crate::source::not_a_regular_file(&m.file_type(), why).in_file(target));
        }
        // A replacement keeps the mode of the file it replaces; a new file gets 0666 less
        // the umask, like any other.
        #[cfg(unix)]
        let exact_mode = {
            use std::os::unix::fs::PermissionsExt;
            existing.map(|m| m.permissions().mode() & 0o7777)
        };
        #[cfg(not(unix))]
        let exact_mode = None;
        let temp = TempFile::create(dir, name, exact_mode).map_err(|e| {
            // Writers make no folders (as `open(path, "w")` makes none): say which is missing.
            let what = if e.kind() == std::io::ErrorKind::NotFound && !dir.is_dir() {
                format!(
                    "cannot create the output: its folder {} does not exist",
                    dir.display()
                )
            } else {
                "cannot create a temporary file beside the target".to_owned()
            };
            Error::io(e, what).in_file(target)
        })?;
        let preallocate = preallocation_pays(temp.file());
        Ok(AtomicFile {
            target: target.to_owned(),
            temp: BufWriter::with_capacity(1 << 20, temp),
            written: 0,
            writeback_started: 0,
            durability,
            preallocate,
        })
    }

    /// Where the bytes go until the commit: for writers that insist on opening a path
    /// themselves (they must write the whole file there; nothing written through this value
    /// may be mixed in).
    pub fn temp_path(&self) -> &Path {
        self.temp.get_ref().path()
    }

    /// Asks the operating system to start writing what has been written so far to disk, without
    /// waiting, so the disk works while the writer goes on (hashing, compressing) and the final
    /// sync has little left to do. [`Write::write_all`] calls it after every 8 MiB by itself;
    /// callers may add calls at natural breaks (the end of a blob). A hint: errors are
    /// ignored, and on systems without the call it does nothing.
    ///
    /// Only whole 64 KiB units are started, each once: the page the next blob will continue is
    /// left alone. Writing to a page that is under writeback can wait for the disk (devices
    /// with stable pages), and on this project's virtual disk that wait, once per blob, made a
    /// 1 GiB write twice as slow as a plain one.
    ///
    /// Nothing is started for [`Durability::Unsynced`] files: nothing waits for the disk, and
    /// the kernel writes back at its own pace.
    pub fn start_writeback(&mut self) {
        if self.durability == Durability::Unsynced {
            return;
        }
        let end = self.written - self.written % WRITEBACK_UNIT;
        if end <= self.writeback_started || self.temp.flush().is_err() {
            return;
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let fd = self.temp.get_ref().file().as_raw_fd();
            let (Ok(start), Ok(len)) = (
                libc::off64_t::try_from(self.writeback_started),
                libc::off64_t::try_from(end - self.writeback_started),
            ) else {
                return;
            };
            // SAFETY: `fd` is our open file; sync_file_range only reads its arguments.
            // SYNC_FILE_RANGE_WRITE starts writeback of the range and returns without waiting.
            unsafe {
                libc::sync_file_range(fd, start, len, libc::SYNC_FILE_RANGE_WRITE);
            }
        }
        self.writeback_started = end;
    }

    /// Reads back `buf.len()` bytes written earlier, from `offset` of the temporary file
    /// (after flushing the buffer). A writer that shares identical blobs uses it to compare
    /// bytes, never trusting a hash alone.
    pub fn read_back(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        // Bytes still in the write buffer (the last `buffer().len()` of those written) are
        // copied from it: a file of many small identical tensors compares each with an
        // earlier one, often written a moment before, and a flush and a read per tensor
        // were a fifth of converting a million of them.
        let buffered = self.temp.buffer();
        let buffer_start = self.written.saturating_sub(buffered.len() as u64);
        let in_buffer = offset
            .checked_sub(buffer_start)
            .and_then(|from| usize::try_from(from).ok())
            .and_then(|from| buffered.get(from..from.checked_add(buf.len())?));
        if let Some(bytes) = in_buffer {
            buf.copy_from_slice(bytes);
            return Ok(());
        }
        self.temp.flush()?;
        let file = self.temp.get_ref().file();
        #[cfg(unix)]
        {
            // A positional read leaves the file's position where the writing goes on.
            std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
        }
        #[cfg(not(unix))]
        {
            use std::io::{Read, Seek, SeekFrom};
            let mut file = file;
            let end = file.stream_position()?;
            file.seek(SeekFrom::Start(offset))?;
            let read = file.read_exact(buf);
            file.seek(SeekFrom::Start(end))?;
            read
        }
    }

    /// Writes `count` zero bytes. A run of at least [`HOLE_MIN`] bytes is not written but
    /// skipped over (the buffer is flushed and the file position moved on), so the file
    /// system leaves a hole there: it reads back as zeros, as every reader of the file sees
    /// it, and costs neither disk space nor a write. A v2 file of many small tensors is
    /// mostly the padding between its 64 KiB boundaries: written out, each tensor of a few
    /// bytes cost a 64 KiB write and its writeback.
    ///
    /// The file must go on past the hole (a v2 file always ends with its footer), else its
    /// length would stop where the last byte was written.
    ///
    /// ```
    /// # fn main() -> zt_container::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use std::io::Write;
    /// let path = dir.path().join("holes.bin");
    /// let mut f = zt_container::AtomicFile::create(&path)?;
    /// f.write_all(b"head")?;
    /// f.write_zeros(1 << 20)?; // a hole, not a megabyte of writes
    /// f.write_all(b"tail")?;
    /// f.commit()?;
    /// let bytes = std::fs::read(&path)?;
    /// assert_eq!(bytes.len(), 4 + (1 << 20) + 4);
    /// assert!(bytes[4..4 + (1 << 20)].iter().all(|&b| b == 0));
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_zeros(&mut self, count: u64) -> io::Result<()> {
        use std::io::{Seek, SeekFrom};
        if count < HOLE_MIN {
            return crate::write_zeros(self, count);
        }
        let end = self
            .written
            .checked_add(count)
            .ok_or_else(|| io::Error::other("file offset overflows 64 bits"))?;
        let skip =
            i64::try_from(count).map_err(|_| io::Error::other("file offset overflows 64 bits"))?;
        self.temp.flush()?;
        let mut file = self.temp.get_ref().file();
        file.seek(SeekFrom::Current(skip))?;
        self.written = end;
        Ok(())
    }

    /// Whether this file's large writes have their blocks allocated before they are copied
    /// in: on ext4, where that makes writing faster (not on tmpfs or XFS, where it makes it
    /// slower).
    pub fn preallocates(&self) -> bool {
        self.preallocate
    }

    /// Allocates the `len` bytes that come next in the file, without changing its length,
    /// so that copying them in finds their blocks there. A hint: errors are ignored (the
    /// write that follows reports a full disk), and elsewhere than Linux it does nothing.
    fn allocate_next(&self, len: usize) {
        if !self.preallocate {
            return;
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let fd = self.temp.get_ref().file().as_raw_fd();
            // `off_t`: 64 bits wherever files this large are written; where it is narrower, an
            // offset past it is simply not allocated ahead.
            let (Ok(start), Ok(len)) = (
                libc::off_t::try_from(self.written),
                libc::off_t::try_from(len),
            ) else {
                return;
            };
            // SAFETY: `fd` is our open file; fallocate only reads its arguments. KEEP_SIZE:
            // the length still grows only as bytes are written, so a write that fails
            // partway leaves the file as long as what it holds.
            unsafe {
                libc::fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, start, len);
            }
        }
    }

    /// The path the file will have after the commit.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Writes out what is buffered and lets go of the buffer (1 MiB): for a file written in
    /// full that waits to be committed with others (the shards of a set go into place
    /// together, after the last is written), so that each waiting file holds its descriptor
    /// and no memory. Writes after this go straight to the file.
    ///
    /// ```
    /// # fn main() -> zt_container::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use std::io::Write;
    /// let mut shard = zt_container::AtomicFile::create(&dir.path().join("a.zt"))?;
    /// shard.write_all(b"shard")?;
    /// let shard = shard.release_buffer()?; // written; waits for the others
    /// shard.commit()?;
    /// assert_eq!(std::fs::read(dir.path().join("a.zt"))?, b"shard");
    /// # Ok(())
    /// # }
    /// ```
    pub fn release_buffer(self) -> Result<Self> {
        let AtomicFile {
            target,
            temp,
            written,
            writeback_started,
            durability,
            preallocate,
        } = self;
        let temp = temp.into_inner().map_err(|e| {
            Error::io(e.into_error(), "cannot flush the temporary file").in_file(&target)
        })?;
        Ok(AtomicFile {
            target,
            temp: BufWriter::with_capacity(0, temp),
            written,
            writeback_started,
            durability,
            preallocate,
        })
    }

    /// Flushes and renames over the target. For [`Durability::Synced`] files (the default) it
    /// syncs the file to disk first, and the folder after, so the rename itself survives a
    /// power loss.
    pub fn commit(self) -> Result<()> {
        let target = self.target;
        let synced = self.durability == Durability::Synced;
        let temp = self.temp.into_inner().map_err(|e| {
            Error::io(e.into_error(), "cannot flush the temporary file").in_file(&target)
        })?;
        if synced {
            temp.file()
                .sync_all()
                .map_err(|e| Error::io(e, "cannot sync the temporary file").in_file(&target))?;
        }
        temp.persist(&target).map_err(|e| {
            Error::io(e, "cannot rename the temporary file over the target").in_file(&target)
        })?;
        #[cfg(unix)]
        if let Some(dir) = synced
            .then(|| target.parent())
            .flatten()
            .filter(|p| !p.as_os_str().is_empty())
        {
            // Best effort: some file systems refuse to sync a folder; the data itself is synced.
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

/// Whether allocating a large write's blocks before copying it in makes writing `file`
/// faster: on ext4, whose delayed allocation otherwise reserves each 4 KiB block as it is
/// copied in. Measured on a save of 1 GiB in 258 writes (docs/benchmarks.md, "Saves"):
/// ext4 took 221-224 ms against 238 without; tmpfs 10% longer (an allocated page is
/// zeroed, then copied over); XFS 3% longer (it allocates no blocks while copying). Other
/// file systems were not measured, and get no allocation ahead.
fn preallocation_pays(file: &File) -> bool {
    #[cfg(target_os = "linux")]
    {
        file_system_magic(file) == Some(libc::EXT4_SUPER_MAGIC)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        false
    }
}

/// The type of the file system holding `file` (or a folder opened as one), as `statfs`
/// gives it (`EXT4_SUPER_MAGIC`, `TMPFS_MAGIC`, ...); `None` when the system does not say.
#[cfg(target_os = "linux")]
fn file_system_magic(file: &File) -> Option<libc::c_long> {
    use std::os::fd::AsRawFd;
    // SAFETY: statfs is plain data, for which all zeros is a valid value; fstatfs writes
    // one into it.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open; fstatfs writes one statfs into `fs`.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) } != 0 {
        return None;
    }
    // The field's type differs between systems; every magic number fits a c_long.
    #[allow(clippy::unnecessary_cast)]
    Some(fs.f_type as libc::c_long)
}

/// Makes room for `count` more open files in this process: when the soft limit on open
/// descriptors (`RLIMIT_NOFILE`) is below `count` and a margin of 64, raises it by that much,
/// at most to the hard limit. Files that wait to be committed together (the shards of a set) each
/// keep a descriptor open until the last is written: on Linux they have no name until
/// then, so closing one would lose it. The usual soft limit of 1024 refused sets of about
/// 1,000 shards ("Too many open files"). Never lowers a limit; does nothing where the hard
/// limit is reached already, or on other systems.
///
/// ```
/// zt_container::make_room_for_open_files(2000);
/// ```
pub fn make_room_for_open_files(count: usize) {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit into the value it is given.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return;
        }
        // Descriptors in use are not counted (that takes a walk of /proc): the old limit is
        // added to what is asked for, so whatever was open before keeps its room.
        let wanted = (count as libc::rlim_t).saturating_add(OPEN_FILE_MARGIN);
        if limit.rlim_cur >= wanted || limit.rlim_cur >= limit.rlim_max {
            return;
        }
        limit.rlim_cur = wanted.saturating_add(limit.rlim_cur).min(limit.rlim_max);
        // SAFETY: setrlimit reads one rlimit; a refusal leaves the limit as it was, and the
        // open that runs out reports it.
        unsafe {
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
    #[cfg(not(unix))]
    let _ = count;
}

/// Descriptors [`make_room_for_open_files`] leaves for everything else.
#[cfg(unix)]
const OPEN_FILE_MARGIN: libc::rlim_t = 64;

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.temp.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if buf.len() >= PREALLOCATE_MIN {
            self.allocate_next(buf.len());
        }
        for piece in buf.chunks(WRITEBACK_STEP) {
            if crate::interrupt::requested() {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
            }
            self.temp.write_all(piece)?;
            self.written += piece.len() as u64;
            if self.written - self.writeback_started >= WRITEBACK_STEP as u64 {
                self.start_writeback();
            }
        }
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.temp.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file system a folder is on, as `statfs` names it.
    #[cfg(target_os = "linux")]
    fn file_system_of(dir: &Path) -> libc::c_long {
        file_system_magic(&File::open(dir).unwrap()).unwrap()
    }

    /// On ext4, large writes are allocated before they are copied in: the file reads back
    /// as written, as long as what was written, and its holes stay holes (an allocation at
    /// the wrong offset would fill one). On tmpfs nothing is allocated ahead.
    #[cfg(target_os = "linux")]
    #[test]
    fn large_writes_are_allocated_ahead_on_ext4_only_and_holes_stay_holes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let shm = Path::new("/dev/shm");
        // A /dev/shm this process may not write to is passed over.
        if shm.is_dir() && file_system_of(shm) == libc::TMPFS_MAGIC {
            let probe = shm.join("zt-prealloc-probe");
            if let Ok(f) = AtomicFile::create_with(&probe, Durability::Unsynced) {
                assert!(!f.preallocates(), "tmpfs zeroes what is allocated");
            }
        }
        if file_system_of(dir.path()) != libc::EXT4_SUPER_MAGIC {
            eprintln!("skipped: the temporary folder is not on ext4");
            return;
        }
        let target = dir.path().join("big.bin");
        let mut f = AtomicFile::create_with(&target, Durability::Unsynced).unwrap();
        assert!(f.preallocates());
        let first: Vec<u8> = (0..(2u32 << 20)).map(|i| (i % 251) as u8).collect();
        let second: Vec<u8> = (0..(3u32 << 20)).map(|i| (i % 241) as u8).collect();
        f.write_all(b"head").unwrap();
        f.write_all(&first).unwrap();
        f.write_zeros(4 << 20).unwrap();
        f.write_all(&second).unwrap();
        f.commit().unwrap();
        let bytes = std::fs::read(&target).unwrap();
        let hole = 4 + first.len()..4 + first.len() + (4 << 20);
        assert_eq!(bytes.len(), hole.end + second.len());
        assert_eq!(&bytes[..4], b"head");
        assert_eq!(&bytes[4..hole.start], &first[..]);
        assert!(bytes[hole.clone()].iter().all(|&b| b == 0));
        assert_eq!(&bytes[hole.end..], &second[..]);
        // 5 MiB written, 4 MiB of hole: allocated, at most the written blocks and a few more.
        let allocated = std::fs::metadata(&target).unwrap().blocks() * 512;
        assert!(
            allocated < (6 << 20),
            "{allocated} bytes allocated: the hole was filled"
        );
    }

    #[cfg(unix)]
    #[test]
    fn new_files_follow_the_umask_and_replacements_keep_their_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("p.zt");
        AtomicFile::create(&target).unwrap().commit().unwrap();
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_ne!(mode, 0o600, "not tempfile's private default");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
        AtomicFile::create(&target).unwrap().commit().unwrap();
        assert_eq!(
            std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o640
        );
    }

    /// A target that is a pipe, a folder, or a device (a symlink to `/dev/null` here: a test
    /// may not make device nodes) is refused before anything is written, and stays what it
    /// was; the commit's rename would have swapped it for a regular file.
    #[cfg(unix)]
    #[test]
    fn a_target_that_is_not_a_regular_file_is_refused_and_kept() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        crate::test_support::make_fifo(&fifo);
        let folder = dir.path().join("folder");
        std::fs::create_dir(&folder).unwrap();
        let null = dir.path().join("null");
        std::os::unix::fs::symlink("/dev/null", &null).unwrap();
        for (target, what) in [
            (&fifo, "a pipe"),
            (&folder, "a folder"),
            (&null, "a character device"),
        ] {
            let e = AtomicFile::create(target).unwrap_err();
            let want = if what == "a folder" {
                crate::ErrorKind::Io // IsADirectory, as Python's callers expect
            } else {
                crate::ErrorKind::InvalidArgument
            };
            assert_eq!(e.kind(), want);
            assert!(
                e.to_string()
                    .contains(&format!("{what}, not a regular file")),
                "{e}"
            );
        }
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert!(std::fs::metadata(&folder).unwrap().is_dir());
        assert!(std::fs::symlink_metadata(&null).unwrap().is_symlink());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            3,
            "nothing left behind"
        );
    }

    #[test]
    fn a_missing_folder_is_named_and_nothing_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("nope").join("m.zt");
        let err = AtomicFile::create(&target).expect_err("no folder to write in");
        let message = err.to_string();
        assert!(
            message.contains("its folder") && message.contains("nope"),
            "{message}"
        );
        let cause =
            std::error::Error::source(&err).and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(
            cause.map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
        assert!(!dir.path().join("nope").exists());
    }

    /// A target that is a symbolic link to a regular file: the link is replaced by the new
    /// file, and the file it pointed to is left as it was (docs/decisions.md, "Symbolic links
    /// as output").
    #[cfg(unix)]
    #[test]
    fn a_link_as_target_is_replaced_and_what_it_pointed_to_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let pointed = dir.path().join("blob");
        std::fs::write(&pointed, b"old").unwrap();
        let link = dir.path().join("model.safetensors");
        std::os::unix::fs::symlink(&pointed, &link).unwrap();
        let mut f = AtomicFile::create(&link).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
        assert_eq!(std::fs::read(&link).unwrap(), b"new");
        assert_eq!(std::fs::read(&pointed).unwrap(), b"old");
    }

    /// A target whose name is near the 255-byte limit of names: the temporary's name (the
    /// target's and a suffix) must stay under it too, or the commit fails after the whole
    /// file was written ("File name too long").
    #[test]
    fn a_target_named_near_the_longest_name_is_committed() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            format!("{}.zt", "a".repeat(250)),
            format!("{}.zt", "é".repeat(125)), // two bytes each: cut on a boundary
        ] {
            let target = dir.path().join(&name);
            let mut f = AtomicFile::create(&target).unwrap();
            f.write_all(b"bytes").unwrap();
            f.commit().unwrap();
            assert_eq!(std::fs::read(&target).unwrap(), b"bytes");
        }
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temporary left"
        );
    }

    #[test]
    fn zeros_short_and_long_read_back_as_zeros_around_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("z.bin");
        let mut f = AtomicFile::create_with(&target, Durability::Unsynced).unwrap();
        f.write_all(b"ab").unwrap();
        f.write_zeros(HOLE_MIN - 1).unwrap(); // written
        f.write_all(b"cd").unwrap();
        f.write_zeros(HOLE_MIN).unwrap(); // skipped
        f.write_all(b"ef").unwrap();
        let mut back = [0u8; 2];
        f.read_back(HOLE_MIN + 1, &mut back).unwrap();
        assert_eq!(&back, b"cd", "read back before a hole");
        f.write_zeros(0).unwrap();
        f.write_all(b"gh").unwrap(); // after a read back, at the end again
        f.commit().unwrap();
        let bytes = std::fs::read(&target).unwrap();
        let mut expected = b"ab".to_vec();
        expected.resize(expected.len() + HOLE_MIN as usize - 1, 0);
        expected.extend_from_slice(b"cd");
        expected.resize(expected.len() + HOLE_MIN as usize, 0);
        expected.extend_from_slice(b"efgh");
        assert_eq!(bytes, expected);
    }

    #[test]
    fn read_back_takes_buffered_bytes_from_the_buffer_and_the_rest_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("r.bin");
        let mut f = AtomicFile::create_with(&target, Durability::Unsynced).unwrap();
        f.write_all(b"0123456789").unwrap();
        let mut back = [0u8; 4];
        f.read_back(3, &mut back).unwrap();
        assert_eq!(&back, b"3456");
        assert_eq!(
            f.temp.buffer().len(),
            10,
            "read from the buffer, nothing flushed"
        );
        f.temp.flush().unwrap();
        f.write_all(b"abcdef").unwrap();
        f.read_back(8, &mut back).unwrap(); // half in the file, half in the buffer
        assert_eq!(&back, b"89ab");
        assert!(
            f.temp.buffer().is_empty(),
            "flushed, then read from the file"
        );
        assert!(f.read_back(14, &mut back).is_err(), "past what was written");
        f.write_all(b"XY").unwrap(); // the writing goes on at the end
        f.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"0123456789abcdefXY");
    }

    #[test]
    fn a_released_file_keeps_its_bytes_and_no_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("shard.zt");
        let mut f = AtomicFile::create(&target).unwrap();
        f.write_all(b"first").unwrap();
        assert!(f.temp.capacity() >= 1 << 20);
        let mut f = f.release_buffer().unwrap();
        assert_eq!(f.temp.capacity(), 0, "a staged file holds no buffer");
        f.write_all(b", then more").unwrap();
        assert!(!target.exists(), "not in place before the commit");
        f.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"first, then more");
    }

    #[test]
    fn large_writes_start_writeback_in_whole_units_and_keep_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("big.zt");
        let bytes: Vec<u8> = (0..20_000_003u32).map(|i| (i % 251) as u8).collect();
        let mut f = AtomicFile::create(&target).unwrap();
        f.write_all(&bytes[..7]).unwrap();
        assert_eq!(f.writeback_started, 0, "nothing started for small writes");
        f.write_all(&bytes[7..]).unwrap();
        assert_eq!(f.written, bytes.len() as u64);
        // Started by itself along the way, in whole units, never past what was written.
        assert!(f.writeback_started >= 16 << 20, "{}", f.writeback_started);
        assert_eq!(f.writeback_started % WRITEBACK_UNIT, 0);
        f.start_writeback();
        let started = f.writeback_started;
        assert_eq!(
            started,
            bytes.len() as u64 / WRITEBACK_UNIT * WRITEBACK_UNIT
        );
        f.start_writeback();
        assert_eq!(f.writeback_started, started, "each unit once");
        f.commit().unwrap();
        assert!(std::fs::read(&target).unwrap() == bytes);
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn commit_replaces_and_drop_keeps_the_old_file() {
        for durability in [Durability::Synced, Durability::Unsynced] {
            replace_or_keep(durability);
        }
    }

    #[test]
    fn unsynced_files_start_no_writeback() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("big.bin");
        let mut f = AtomicFile::create_with(&target, Durability::Unsynced).unwrap();
        let bytes = vec![7u8; 3 * WRITEBACK_STEP];
        f.write_all(&bytes).unwrap();
        f.start_writeback();
        assert_eq!(f.writeback_started, 0, "nothing waits for the disk");
        f.commit().unwrap();
        assert!(std::fs::read(&target).unwrap() == bytes);
    }

    fn replace_or_keep(durability: Durability) {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.zt");
        std::fs::write(&target, b"old").unwrap();

        let mut f = AtomicFile::create_with(&target, durability).unwrap();
        f.write_all(b"new, unfinished").unwrap();
        // On Linux the temporary has no name until the commit; elsewhere it sits beside the
        // target under a name of its own.
        let beside = if cfg!(target_os = "linux") { 1 } else { 2 };
        assert_eq!(
            entries(dir.path()).len(),
            beside,
            "{:?}",
            entries(dir.path())
        );
        drop(f);
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        assert_eq!(entries(dir.path()), vec!["a.zt"], "no stray file");

        let mut f = AtomicFile::create_with(&target, durability).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(entries(dir.path()), vec!["a.zt"]);
    }
}
