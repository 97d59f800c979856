//! Crash-safe file replacement: write a temporary file beside the target, then rename it.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// A file being written that replaces `target` only when [`AtomicFile::commit`] succeeds.
///
/// The bytes go to a temporary file in the target's folder (so the final rename stays on one
/// file system and is atomic). Until the commit the old target is untouched; if the process dies
/// the old target is intact, and if the value is dropped the temporary file is removed.
#[derive(Debug)]
pub struct AtomicFile {
    target: PathBuf,
    temp: BufWriter<tempfile::NamedTempFile>,
}

impl AtomicFile {
    /// Starts writing a replacement for `target`.
    pub fn create(target: &Path) -> Result<Self> {
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = target
            .file_name()
            .ok_or_else(|| Error::argument("target path has no file name").in_file(target))?;
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(name);
        prefix.push(".");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // tempfile makes private (0600) files; a replacement should look like any new file
        // (0666 less the umask), or keep the mode of the file it replaces.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(target)
                .map(|m| m.permissions().mode() & 0o7777)
                .unwrap_or(0o666);
            builder.permissions(std::fs::Permissions::from_mode(mode));
        }
        let temp = builder.tempfile_in(dir).map_err(|e| {
            Error::io(e, "cannot create a temporary file beside the target").in_file(target)
        })?;
        Ok(AtomicFile {
            target: target.to_owned(),
            temp: BufWriter::with_capacity(1 << 20, temp),
        })
    }

    /// Where the bytes go until the commit: for writers that insist on opening a path
    /// themselves (they must write the whole file there; nothing written through this value
    /// may be mixed in).
    pub fn temp_path(&self) -> &Path {
        self.temp.get_ref().path()
    }

    /// Asks the operating system to start writing what has been written so far to disk, without
    /// waiting. Called after each large blob, it lets the disk work while the writer goes on
    /// (hashing, compressing), so the final sync has little left to do. A hint: errors are
    /// ignored, and on systems without the call it does nothing.
    pub fn start_writeback(&mut self) {
        if self.temp.flush().is_err() {
            return;
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let fd = self.temp.get_ref().as_file().as_raw_fd();
            // SAFETY: `fd` is our open file; sync_file_range only reads its arguments. Offset 0
            // and length 0 mean the whole file; SYNC_FILE_RANGE_WRITE starts writeback and
            // returns without waiting for it.
            unsafe {
                libc::sync_file_range(fd, 0, 0, libc::SYNC_FILE_RANGE_WRITE);
            }
        }
    }

    /// The path the file will have after the commit.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Flushes, syncs to disk and renames over the target; then syncs the folder so the rename
    /// itself survives a power loss.
    pub fn commit(self) -> Result<()> {
        let target = self.target;
        let temp = self.temp.into_inner().map_err(|e| {
            Error::io(e.into_error(), "cannot flush the temporary file").in_file(&target)
        })?;
        temp.as_file()
            .sync_all()
            .map_err(|e| Error::io(e, "cannot sync the temporary file").in_file(&target))?;
        temp.persist(&target).map_err(|e| {
            Error::io(e.error, "cannot rename the temporary file over the target").in_file(&target)
        })?;
        #[cfg(unix)]
        if let Some(dir) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
            // Best effort: some file systems refuse to sync a folder; the data itself is synced.
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.temp.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.temp.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.temp.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.zt");
        std::fs::write(&target, b"old").unwrap();

        let mut f = AtomicFile::create(&target).unwrap();
        f.write_all(b"new, unfinished").unwrap();
        assert_eq!(
            entries(dir.path()).len(),
            2,
            "the temporary file sits beside the target"
        );
        drop(f);
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        assert_eq!(entries(dir.path()), vec!["a.zt"], "no stray file");

        let mut f = AtomicFile::create(&target).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(entries(dir.path()), vec!["a.zt"]);
    }
}
