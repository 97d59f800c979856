//! Writing the container: aligned blobs with zero padding, then manifest, size and footer.

use std::io::{self, Write};

use crate::layout::*;
use crate::ContainerVersion;

/// Streams blobs to any [`Write`] at 64-byte aligned offsets, then finishes the file.
///
/// It tracks the position itself, so the sink needs no `Seek`; a `BufWriter<File>`, a socket or a
/// `Vec<u8>` all work. Padding is `0x00`, as the spec requires, so equal input gives equal bytes.
#[derive(Debug)]
pub struct BlobWriter<W: Write> {
    sink: W,
    position: u64,
    version: ContainerVersion,
}

const ZEROS: [u8; ALIGNMENT as usize] = [0; ALIGNMENT as usize];

impl<W: Write> BlobWriter<W> {
    /// Writes the header magic of `version` and returns the writer.
    pub fn new(mut sink: W, version: ContainerVersion) -> io::Result<Self> {
        let magic = match version {
            ContainerVersion::V1 | ContainerVersion::V1_0 => MAGIC_V1,
            ContainerVersion::V0_1 => MAGIC_V0_1,
        };
        sink.write_all(&magic)?;
        Ok(BlobWriter {
            sink,
            position: HEADER_LEN,
            version,
        })
    }

    /// The number of bytes written so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Pads to the next 64-byte boundary and returns it: the offset of the next blob.
    pub fn start_blob(&mut self) -> io::Result<u64> {
        let aligned = align_up(self.position, ALIGNMENT)
            .ok_or_else(|| io::Error::other("file offset overflows 64 bits"))?;
        let pad = (aligned - self.position) as usize;
        self.sink.write_all(ZEROS.get(..pad).unwrap_or(&[]))?;
        self.position = aligned;
        Ok(aligned)
    }

    /// Appends bytes to the blob being written (after [`BlobWriter::start_blob`]).
    pub fn write_chunk(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.sink.write_all(bytes)?;
        self.position += bytes.len() as u64;
        Ok(())
    }

    /// Writes one whole blob; returns its offset.
    pub fn append_blob(&mut self, bytes: &[u8]) -> io::Result<u64> {
        let offset = self.start_blob()?;
        self.write_chunk(bytes)?;
        Ok(offset)
    }

    /// Writes the manifest (or v0.1 index) right after the last blob, then its size and, for
    /// v1.1/v1.2, the footer magic (v0.1 and v1.0 end with the size). Returns the sink, flushed.
    pub fn finish(mut self, manifest: &[u8]) -> io::Result<W> {
        self.sink.write_all(manifest)?;
        self.sink
            .write_all(&(manifest.len() as u64).to_le_bytes())?;
        if self.version == ContainerVersion::V1 {
            self.sink.write_all(&MAGIC_V1)?;
        }
        self.sink.flush()?;
        Ok(self.sink)
    }

    /// The sink, for callers that write something the container does not model (test fixtures).
    pub fn sink_mut(&mut self) -> &mut W {
        &mut self.sink
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Container, Source};

    #[test]
    fn blobs_are_aligned_and_padded_with_zeros() {
        let mut w = BlobWriter::new(Vec::new(), ContainerVersion::V1).unwrap();
        assert_eq!(w.append_blob(b"abc").unwrap(), 64);
        assert_eq!(w.append_blob(b"").unwrap(), 128);
        assert_eq!(w.append_blob(b"d").unwrap(), 128);
        let bytes = w.finish(b"\xa0").unwrap();
        assert!(bytes[8..64].iter().all(|&b| b == 0));
        assert!(bytes[67..128].iter().all(|&b| b == 0));
        assert_eq!(bytes.len(), 129 + 1 + 16);
        let c = Container::parse(Source::from_vec(bytes)).unwrap();
        assert_eq!(&*c.blob(64, 3).unwrap(), b"abc");
        assert_eq!(c.manifest_offset(), 129);
    }

    #[test]
    fn v0_1_has_no_footer_magic() {
        let w = BlobWriter::new(Vec::new(), ContainerVersion::V0_1).unwrap();
        let bytes = w.finish(b"\x80").unwrap();
        assert_eq!(bytes, b"ZTEN0001\x80\x01\0\0\0\0\0\0\0");
    }
}
