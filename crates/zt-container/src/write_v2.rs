//! Writing the zTensor v2 container: the header magic, blobs on a power-of-two boundary of at
//! least 4096 bytes with zero padding, the manifest blob, and the 40-byte footer.
//!
//! Like the v2 reader beside it, this module knows nothing of CBOR or hashing: the caller
//! hands over the manifest bytes and the XXH3-64 the footer stores.

use std::io::{self, Write};

use crate::layout::{align_up, ALIGNMENT_V2, FOOTER_LEN_V2, HEADER_LEN, MAGIC_V2, VERSION_V2};
use crate::FooterV2;

impl FooterV2 {
    /// The footer of a file whose manifest is at `offset`, `length` bytes long, with hash
    /// `hash` (version 2, reserved 0).
    pub fn new(manifest_offset: u64, manifest_length: u64, manifest_hash: u64) -> Self {
        FooterV2 {
            manifest_offset,
            manifest_length,
            manifest_hash,
            version: VERSION_V2,
            reserved: 0,
        }
    }

    /// The 40 bytes of the footer as stored: the three u64 and two u32 little-endian, then
    /// the magic.
    ///
    /// ```
    /// let f = zt_container::FooterV2::new(8192, 153, 0xdd53dc524204c5d0);
    /// let b = f.encode();
    /// assert_eq!(&b[..8], &8192u64.to_le_bytes());
    /// assert_eq!(&b[24..28], &2u32.to_le_bytes());
    /// assert_eq!(&b[32..], b"\x89ZT2\r\n\x1a\n");
    /// ```
    pub fn encode(&self) -> [u8; FOOTER_LEN_V2 as usize] {
        let mut out = [0u8; FOOTER_LEN_V2 as usize];
        let fields = self
            .manifest_offset
            .to_le_bytes()
            .into_iter()
            .chain(self.manifest_length.to_le_bytes())
            .chain(self.manifest_hash.to_le_bytes())
            .chain(self.version.to_le_bytes())
            .chain(self.reserved.to_le_bytes())
            .chain(MAGIC_V2);
        out.iter_mut().zip(fields).for_each(|(d, s)| *d = s);
        out
    }
}

/// Streams blobs of a v2 file to any [`Write`] at offsets that are multiples of an alignment
/// (a power of two, at least [`ALIGNMENT_V2`]), then finishes the file with the manifest and
/// footer, or as a data shard (footer only).
///
/// The position is tracked here, so the sink needs no `Seek`. Padding is `0x00`: the same
/// blobs give the same bytes.
///
/// ```
/// use zt_container::{layout::MAX_MANIFEST_LEN, BlobWriterV2, ContainerV2, Source};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut w = BlobWriterV2::new(Vec::new(), 4096)?;
/// assert_eq!(w.append_blob(b"abc")?, 4096);
/// let bytes = w.finish(b"\xa0", 0)?; // manifest bytes and their hash, as the caller computes
/// assert_eq!(bytes.len(), 8192 + 1 + 40);
/// let c = ContainerV2::parse(Source::from_vec(bytes), MAX_MANIFEST_LEN)?;
/// assert_eq!(c.footer().manifest_offset, 8192);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct BlobWriterV2<W: Write> {
    sink: W,
    position: u64,
    alignment: u64,
    pad: Padding<W>,
}

/// How a [`BlobWriterV2`] writes the zeros between blobs: given the sink and a count, it
/// must leave the sink that many bytes further on, reading as zeros. [`write_zeros`] by
/// default; a file sink may skip over long runs instead ([`AtomicFile::write_zeros`](crate::AtomicFile::write_zeros)).
pub type Padding<W> = fn(&mut W, u64) -> io::Result<()>;

const ZEROS: [u8; 4096] = [0; 4096];

/// Writes `count` zero bytes to `sink`, 4096 at a time.
///
/// ```
/// let mut out = Vec::new();
/// zt_container::write_zeros(&mut out, 5000)?;
/// assert_eq!(out, vec![0u8; 5000]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_zeros<W: Write + ?Sized>(sink: &mut W, count: u64) -> io::Result<()> {
    let mut left = count;
    while left > 0 {
        let n = left.min(ZEROS.len() as u64);
        // `n` is at most 4096, so it indexes ZEROS.
        sink.write_all(ZEROS.get(..n as usize).unwrap_or(&[]))?;
        left -= n;
    }
    Ok(())
}

impl<W: Write> BlobWriterV2<W> {
    /// Writes the header magic and returns the writer. `alignment` must be a power of two and
    /// at least 4096.
    pub fn new(sink: W, alignment: u64) -> io::Result<Self> {
        Self::with_padding(sink, alignment, write_zeros)
    }

    /// As [`BlobWriterV2::new`], with the padding between blobs written by `pad` (which may
    /// leave holes in a file instead of writing zeros).
    ///
    /// ```
    /// use zt_container::BlobWriterV2;
    /// let mut w = BlobWriterV2::with_padding(Vec::new(), 4096, |sink, n| {
    ///     sink.resize(sink.len() + n as usize, 0);
    ///     Ok(())
    /// })?;
    /// assert_eq!(w.append_blob(b"abc")?, 4096);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_padding(mut sink: W, alignment: u64, pad: Padding<W>) -> io::Result<Self> {
        if !alignment.is_power_of_two() || alignment < ALIGNMENT_V2 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("v2 alignment {alignment} is not a power of two of at least 4096"),
            ));
        }
        sink.write_all(&MAGIC_V2)?;
        Ok(BlobWriterV2 {
            sink,
            position: HEADER_LEN,
            alignment,
            pad,
        })
    }

    /// The number of bytes written so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The alignment of every blob.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Pads with zeros to the next boundary (through the writer's [`Padding`]) and returns
    /// it: the offset of the next blob.
    pub fn start_blob(&mut self) -> io::Result<u64> {
        let aligned = align_up(self.position, self.alignment)
            .ok_or_else(|| io::Error::other("file offset overflows 64 bits"))?;
        (self.pad)(&mut self.sink, aligned - self.position)?;
        self.position = aligned;
        Ok(aligned)
    }

    /// Appends bytes to the blob being written (after [`BlobWriterV2::start_blob`]).
    pub fn write_chunk(&mut self, bytes: &[u8]) -> io::Result<()> {
        let end = self
            .position
            .checked_add(bytes.len() as u64)
            .ok_or_else(|| io::Error::other("file offset overflows 64 bits"))?;
        self.sink.write_all(bytes)?;
        self.position = end;
        Ok(())
    }

    /// Writes one whole blob; returns its offset.
    pub fn append_blob(&mut self, bytes: &[u8]) -> io::Result<u64> {
        let offset = self.start_blob()?;
        self.write_chunk(bytes)?;
        Ok(offset)
    }

    /// Writes the manifest as the last blob (on a boundary), then the footer right after it.
    /// `manifest_hash` is the XXH3-64 of `manifest`. Returns the sink, flushed.
    pub fn finish(mut self, manifest: &[u8], manifest_hash: u64) -> io::Result<W> {
        let offset = self.append_blob(manifest)?;
        let footer = FooterV2::new(offset, manifest.len() as u64, manifest_hash);
        self.sink.write_all(&footer.encode())?;
        self.sink.flush()?;
        Ok(self.sink)
    }

    /// Finishes a data shard: blobs and a footer whose manifest offset, length and hash are
    /// zero. Returns the sink, flushed.
    pub fn finish_data_shard(mut self) -> io::Result<W> {
        self.sink.write_all(&FooterV2::new(0, 0, 0).encode())?;
        self.sink.flush()?;
        Ok(self.sink)
    }

    /// The sink, for callers that need it between blobs (a file sink starting write-back).
    pub fn sink_mut(&mut self) -> &mut W {
        &mut self.sink
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::MAX_MANIFEST_LEN;
    use crate::{ContainerV2, Source};

    #[test]
    fn blobs_manifest_and_footer_are_placed_on_the_alignment() {
        let mut w = BlobWriterV2::new(Vec::new(), 65536).unwrap();
        assert_eq!(w.append_blob(&[1; 12]).unwrap(), 65536);
        assert_eq!(w.append_blob(&[2; 24]).unwrap(), 131072);
        let bytes = w.finish(b"\xa1\x67objects\xa0", 7).unwrap();
        assert_eq!(bytes.len(), 196608 + 10 + 40);
        assert!(bytes[8..65536].iter().all(|&b| b == 0));
        let c = ContainerV2::parse(Source::from_vec(bytes), MAX_MANIFEST_LEN).unwrap();
        assert_eq!(*c.footer(), FooterV2::new(196608, 10, 7));
    }

    #[test]
    fn an_empty_canonical_file_is_65586_bytes() {
        let w = BlobWriterV2::new(Vec::new(), 65536).unwrap();
        assert_eq!(w.finish(b"\xa1\x67objects\xa0", 0).unwrap().len(), 65586);
    }

    #[test]
    fn data_shard_footer_is_zero() {
        let mut w = BlobWriterV2::new(Vec::new(), 4096).unwrap();
        w.append_blob(b"abcd").unwrap();
        let bytes = w.finish_data_shard().unwrap();
        assert_eq!(bytes.len(), 4096 + 4 + 40);
        let c = ContainerV2::parse(Source::from_vec(bytes), MAX_MANIFEST_LEN).unwrap();
        assert!(c.is_data_shard());
    }

    #[test]
    fn alignment_must_be_a_power_of_two_of_4096_or_more() {
        for bad in [0, 2048, 4095, 6144] {
            assert!(BlobWriterV2::new(Vec::new(), bad).is_err(), "{bad}");
        }
    }
}
