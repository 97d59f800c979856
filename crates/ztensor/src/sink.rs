//! Where a [`Writer`](crate::Writer) puts its bytes ([`Sink`]): an [`AtomicFile`] that
//! replaces its target when complete, a [`Staged`] one that waits for the caller to commit
//! it, a `Vec<u8>`, a `File` or a `BufWriter`.

use std::io::{Read, Seek, SeekFrom, Write};

use zt_container::{AtomicFile, Error, Result};

/// Where a [`Writer`](crate::Writer) puts the file, and what finishing it means.
pub trait Sink: Write {
    /// What [`Writer::finish`](crate::Writer::finish) returns.
    type Output;
    /// Completes the file: flush, and for [`AtomicFile`] sync and rename over the target.
    fn complete(self) -> Result<Self::Output>;
    /// Called after each large blob: a file sink may start writing it back to disk now.
    fn blob_written(&mut self) {}
    /// Reads back `buf.len()` bytes written earlier at `offset`, if this sink can: the v2
    /// writer shares a blob with an earlier identical one only after comparing their bytes.
    /// Returns whether it could (sinks that cannot never share blobs).
    fn read_back(&mut self, _offset: u64, _buf: &mut [u8]) -> Result<bool> {
        Ok(false)
    }
    /// Writes `count` zero bytes: the padding between a v2 file's blobs. A file sink that
    /// writes from start to end leaves long runs as holes instead
    /// ([`AtomicFile::write_zeros`]); the bytes read back the same.
    fn pad_with_zeros(&mut self, count: u64) -> std::io::Result<()> {
        zt_container::write_zeros(self, count)
    }
}

impl Sink for AtomicFile {
    type Output = ();
    fn complete(self) -> Result<()> {
        self.commit()
    }
    fn pad_with_zeros(&mut self, count: u64) -> std::io::Result<()> {
        self.write_zeros(count)
    }
    fn blob_written(&mut self) {
        self.start_writeback();
    }
    fn read_back(&mut self, offset: u64, buf: &mut [u8]) -> Result<bool> {
        AtomicFile::read_back(self, offset, buf).map_err(|e| Error::io(e, "cannot read back"))?;
        Ok(true)
    }
}

/// An [`AtomicFile`] that finishing leaves in its temporary place: [`Writer::finish`](crate::Writer::finish) returns
/// it, and the caller commits it. For outputs of several files (a sharded set) that replace
/// their targets only once every one of them is written, so that a failure or a kill while
/// writing leaves the old set whole (and no new file behind: an uncommitted temporary file
/// is removed when dropped).
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("m.zt");
/// let file = ztensor::container::AtomicFile::create(&path)?;
/// let mut w = ztensor::Writer::new(ztensor::Staged(file))?;
/// w.add("x", &[1], &[1.0f32])?;
/// let staged = w.finish()?;
/// assert!(!path.exists()); // written, not yet in place
/// staged.commit()?;
/// assert!(path.exists());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Staged(pub AtomicFile);

impl Write for Staged {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0.write_all(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Sink for Staged {
    type Output = AtomicFile;
    /// Flushes, so that the temporary file holds every byte (it may be read back by its
    /// [`AtomicFile::temp_path`] before it is committed), and lets go of the write buffer:
    /// a staged file may wait for its commit beside hundreds of others (a set's shards).
    fn complete(self) -> Result<AtomicFile> {
        self.0.release_buffer()
    }
    fn pad_with_zeros(&mut self, count: u64) -> std::io::Result<()> {
        self.0.write_zeros(count)
    }
    fn blob_written(&mut self) {
        self.0.start_writeback();
    }
    fn read_back(&mut self, offset: u64, buf: &mut [u8]) -> Result<bool> {
        self.0
            .read_back(offset, buf)
            .map_err(|e| Error::io(e, "cannot read back"))?;
        Ok(true)
    }
}

impl Sink for Vec<u8> {
    type Output = Vec<u8>;
    fn complete(self) -> Result<Vec<u8>> {
        Ok(self)
    }
    fn read_back(&mut self, offset: u64, buf: &mut [u8]) -> Result<bool> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.get(o..o.checked_add(buf.len())?))
            .ok_or_else(|| Error::invalid("read back past the end of the output"))?;
        buf.copy_from_slice(src);
        Ok(true)
    }
}

impl Sink for std::fs::File {
    type Output = std::fs::File;
    fn complete(mut self) -> Result<std::fs::File> {
        self.flush().map_err(|e| Error::io(e, "cannot flush"))?;
        Ok(self)
    }
    fn read_back(&mut self, offset: u64, buf: &mut [u8]) -> Result<bool> {
        let io = |e| Error::io(e, "cannot read back");
        let end = self.stream_position().map_err(io)?;
        self.seek(SeekFrom::Start(offset)).map_err(io)?;
        // A file opened for writing only cannot be read back: then no blob is shared.
        let read = self.read_exact(buf).is_ok();
        self.seek(SeekFrom::Start(end)).map_err(io)?;
        Ok(read)
    }
}

impl<W: Write> Sink for std::io::BufWriter<W> {
    type Output = W;
    fn complete(self) -> Result<W> {
        self.into_inner()
            .map_err(|e| Error::io(e.into_error(), "cannot flush"))
    }
}
