//! Temporary files that do not outlive their writer, and the means to stop a writer early.
//!
//! - `TempFile` (crate-private): where an [`crate::AtomicFile`]'s bytes go until the commit. On Linux it is
//!   an unnamed file (`O_TMPFILE`) in the target's folder: a killed process (SIGKILL, a power
//!   loss) leaves nothing behind, and the file gets a name only at the commit, for one rename.
//!   Where the folder's file system cannot make one, it is a named file
//!   `.<target>.<pid>.<n>.zt-tmp` (the target's name cut to 128 bytes), locked (`flock`) for as long as its writer lives; every new
//!   temporary sweeps its folder of such files whose lock it can take, so what a dead writer
//!   left is removed by the next.
//! - [`cleanup`]: named temporaries (and folders of them) register here while they exist, so a
//!   program's SIGINT or SIGTERM handler can remove them before it exits
//!   ([`cleanup::remove_registered`]).
//! - [`interrupt`]: a check a long write calls between pieces of work, so a host that catches
//!   signals itself (Python) can stop it promptly without giving up its own handler.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// The ending of every named temporary this module makes.
pub const TEMP_SUFFIX: &str = ".zt-tmp";

/// Where a file's bytes go before it is committed.
#[derive(Debug)]
pub(crate) struct TempFile {
    file: File,
    /// The name the bytes can be opened by before the commit: `/proc/self/fd/N` for an
    /// unnamed file, the file's own path otherwise.
    path: PathBuf,
    /// Set for a named temporary: its registration for removal on a signal.
    named: Option<cleanup::Registration>,
    dir: PathBuf,
}

impl TempFile {
    /// A new temporary in `dir` for a file to be named `target_name`, with `mode` (umask
    /// applied) or, when `exact_mode` is given, exactly that mode (a replacement keeps the
    /// mode of the file it replaces).
    pub fn create(
        dir: &Path,
        target_name: &std::ffi::OsStr,
        exact_mode: Option<u32>,
    ) -> io::Result<Self> {
        sweep(dir);
        #[cfg(target_os = "linux")]
        if let Some(t) = unnamed(dir, exact_mode)? {
            return Ok(t);
        }
        let (file, path) = named(dir, target_name)?;
        #[cfg(unix)]
        if let Some(mode) = exact_mode {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        let _ = exact_mode;
        Ok(TempFile {
            file,
            named: Some(cleanup::register(path.clone())),
            path,
            dir: dir.to_owned(),
        })
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Gives the bytes the name `target`, replacing what was there: a rename of the named
    /// temporary, or for an unnamed one a link under a temporary name and a rename.
    pub fn persist(mut self, target: &Path) -> io::Result<()> {
        if self.named.is_some() {
            std::fs::rename(&self.path, target)?;
            // Renamed: nothing is left to remove, on drop or on a signal.
            self.named = None;
            return Ok(());
        }
        let name = target.file_name().unwrap_or_default();
        let (link, registration) = loop {
            let candidate = self.dir.join(temp_name(name));
            match link_unnamed(&self.path, &candidate) {
                Ok(()) => {
                    let r = cleanup::register(candidate.clone());
                    break (candidate, r);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        };
        let renamed = std::fs::rename(&link, target);
        if renamed.is_err() {
            let _ = std::fs::remove_file(&link);
        }
        drop(registration);
        renamed
    }
}

impl io::Write for TempFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.named.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Most bytes of the target's name a temporary name repeats: a file system's names end at
/// 255 bytes (`NAME_MAX`), and a target named near that would otherwise get a temporary name
/// it refuses ("File name too long") at the commit, after the whole file was written.
const TEMP_NAME_TARGET_BYTES: usize = 128;

/// The first [`TEMP_NAME_TARGET_BYTES`] bytes of `name` (ending on a character's boundary
/// when the name is UTF-8), all of it where names are not bytes.
fn shortened(name: &std::ffi::OsStr) -> std::borrow::Cow<'_, std::ffi::OsStr> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let bytes = name.as_bytes();
        if bytes.len() > TEMP_NAME_TARGET_BYTES {
            let mut end = TEMP_NAME_TARGET_BYTES;
            if let Ok(text) = std::str::from_utf8(bytes) {
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
            }
            let head = bytes.get(..end).unwrap_or(bytes);
            return std::borrow::Cow::Owned(std::ffi::OsStr::from_bytes(head).to_owned());
        }
    }
    std::borrow::Cow::Borrowed(name)
}

/// A fresh temporary name for `target_name`: `.<name>.<pid>.<n><TEMP_SUFFIX>`, the name cut
/// to its first [`TEMP_NAME_TARGET_BYTES`] bytes.
fn temp_name(target_name: &std::ffi::OsStr) -> std::ffi::OsString {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut s = std::ffi::OsString::from(".");
    s.push(shortened(target_name));
    s.push(format!(
        ".{}.{n}{nanos:08x}{TEMP_SUFFIX}",
        std::process::id()
    ));
    s
}

/// A named temporary, created new and locked.
fn named(dir: &Path, target_name: &std::ffi::OsStr) -> io::Result<(File, PathBuf)> {
    loop {
        let path = dir.join(temp_name(target_name));
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o666);
        match options.open(&path) {
            Ok(file) => {
                lock(&file);
                return Ok((file, path));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Bytes free to an unprivileged writer (not those kept for root) on the file system holding
/// `file`, where the system says.
///
/// ```
/// let file = tempfile::tempfile().unwrap();
/// assert!(zt_container::temp::free_space(&file).is_some_and(|n| n > 0));
/// ```
pub fn free_space(file: &File) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: all-zero bytes are a valid `statvfs` (integers only), which `fstatvfs`
        // fills in.
        let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `fstatvfs` writes one `statvfs` into the value it is given, for a
        // descriptor the borrowed `file` keeps open.
        if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut stats) } != 0 {
            return None;
        }
        #[allow(clippy::useless_conversion)] // the fields' widths differ between systems
        let (blocks, size) = (u64::from(stats.f_bavail), u64::from(stats.f_frsize));
        Some(blocks.saturating_mul(size))
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        None
    }
}

/// Whether the file system holding `file` has room for `len` more bytes ([`free_space`]):
/// `Ok` when it has, or when the system cannot say; `ENOSPC` when it has not. For a download
/// about to fill a temporary file: a server's word for a size then fails at once, not once
/// the disk is full.
///
/// ```
/// let file = tempfile::tempfile().unwrap();
/// assert!(zt_container::temp::room_for(&file, 1).is_ok());
/// let e = zt_container::temp::room_for(&file, u64::MAX).unwrap_err();
/// assert_eq!(e.kind(), std::io::ErrorKind::StorageFull);
/// ```
pub fn room_for(file: &File, len: u64) -> io::Result<()> {
    match free_space(file) {
        #[cfg(unix)]
        Some(free) if len > free => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
        _ => Ok(()),
    }
}

/// An unnamed temporary in `dir`, or `None` where the file system (or the kernel) cannot
/// make one, or `/proc` is not there to give it a name later.
#[cfg(target_os = "linux")]
fn unnamed(dir: &Path, exact_mode: Option<u32>) -> io::Result<Option<TempFile>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    if !Path::new("/proc/self/fd").is_dir() {
        return Ok(None);
    }
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o666)
        .open(dir);
    let file = match opened {
        Ok(f) => f,
        // Not supported here (EOPNOTSUPP, EISDIR or EINVAL from older kernels): a named one.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) | Some(libc::EINVAL)
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    if let Some(mode) = exact_mode {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    // Locked like a named one, so that the moment it has a name before the rename, no sweep
    // takes it for a dead writer's.
    lock(&file);
    let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    Ok(Some(TempFile {
        file,
        path,
        named: None,
        dir: dir.to_owned(),
    }))
}

/// Gives the unnamed file behind `proc_path` the name `to`.
#[cfg(target_os = "linux")]
fn link_unnamed(proc_path: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a path"))
    };
    let (from, to) = (c(proc_path)?, c(to)?);
    // SAFETY: both are NUL-terminated strings that live across the call.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn link_unnamed(_: &Path, _: &Path) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "no unnamed files here",
    ))
}

/// Takes an exclusive lock on `file` for as long as it is open (released by the kernel when
/// the process dies, however it dies). Best effort: without locks, a sweep cannot tell a live
/// writer's file from a dead one's and leaves both.
fn lock(file: &File) {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on our own open descriptor.
        unsafe {
            libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB);
        }
    }
    let _ = file;
}

/// Removes the named temporaries in `dir` left by writers that are gone: those whose lock can
/// be taken (a live writer holds its own). Errors are ignored: a sweep is housekeeping. Once
/// per folder per process: a set of many shards written into a large folder lists it once.
fn sweep(dir: &Path) {
    static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|p| p.into_inner());
        if swept.iter().any(|d| d == dir) {
            return;
        }
        swept.push(dir.to_owned());
    }
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        use std::os::unix::ffi::OsStrExt;
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let bytes = name.as_bytes();
            if !bytes.starts_with(b".") || !bytes.ends_with(TEMP_SUFFIX.as_bytes()) {
                continue;
            }
            let path = entry.path();
            let Ok(file) = std::fs::OpenOptions::new().read(true).open(&path) else {
                continue;
            };
            // SAFETY: flock on a descriptor we just opened.
            let free = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
            if free {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let _ = dir;
}

/// Named temporaries (and folders of them) that exist right now, for a signal handler to
/// remove before the program exits.
pub mod cleanup {
    use std::path::PathBuf;
    use std::sync::Mutex;

    /// Paths registered, by registration number.
    static REGISTERED: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    /// A path's registration: dropping it unregisters the path (it does not remove it).
    #[derive(Debug)]
    pub struct Registration(u64);

    /// Registers `path` (a file, or a folder removed whole) for [`remove_registered`].
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let scratch = dir.path().join("scratch");
    /// std::fs::create_dir(&scratch).unwrap();
    /// let registration = zt_container::cleanup::register(scratch.clone());
    /// zt_container::cleanup::remove_registered(); // what a SIGINT handler calls
    /// assert!(!scratch.exists());
    /// drop(registration);
    /// ```
    pub fn register(path: PathBuf) -> Registration {
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut list = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
        list.push((id, path));
        Registration(id)
    }

    impl Drop for Registration {
        fn drop(&mut self) {
            let mut list = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
            list.retain(|(id, _)| *id != self.0);
        }
    }

    /// Removes every registered path (files, and folders with what is in them). For a
    /// program's SIGINT and SIGTERM handler, just before it exits.
    pub fn remove_registered() {
        let list = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
        for (_, path) in list.iter() {
            if path.is_dir() {
                let _ = std::fs::remove_dir_all(path);
            } else {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// A check that long writes call between pieces of work, so that a host with its own signal
/// handling (Python, whose SIGINT handler must stay its own) stops them promptly.
pub mod interrupt {
    use std::cell::RefCell;

    /// The check of this thread: returns `true` when the work should stop.
    type Check = Box<dyn Fn() -> bool>;

    thread_local! {
        static CHECK: RefCell<Option<Check>> = const { RefCell::new(None) };
    }

    /// Runs `work` with `check` called between its pieces of work on this thread (writes of
    /// [`crate::AtomicFile`], every few megabytes); a `true` from it fails the write with
    /// [`std::io::ErrorKind::Interrupted`]-kind error "interrupted".
    ///
    /// ```
    /// use std::io::Write;
    /// let dir = tempfile::tempdir().unwrap();
    /// let target = dir.path().join("big.bin");
    /// let result = zt_container::interrupt::with_check(|| true, || {
    ///     let mut f = zt_container::AtomicFile::create(&target)?;
    ///     f.write_all(&vec![0u8; 32 << 20])?;
    ///     f.commit()
    /// });
    /// assert!(result.is_err());
    /// assert!(!target.exists());
    /// ```
    pub fn with_check<R>(check: impl Fn() -> bool + 'static, work: impl FnOnce() -> R) -> R {
        let previous = CHECK.with(|c| c.replace(Some(Box::new(check))));
        let result = work();
        CHECK.with(|c| *c.borrow_mut() = previous);
        result
    }

    /// Whether this thread's check says stop (never, without one).
    pub fn requested() -> bool {
        CHECK.with(|c| c.borrow().as_ref().is_some_and(|f| f()))
    }
}
