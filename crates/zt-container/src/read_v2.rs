//! The zTensor v2 container (ztensor 2.x): header magic, blob heap on 4096-byte boundaries,
//! and a 40-byte footer at the end of the file that locates the manifest.
//!
//! ```text
//! 89 5A 54 32 0D 0A 1A 0A | blobs at offset % 4096 == 0, offset >= 4096 | ... | manifest blob |
//! footer: u64 manifest_offset, u64 manifest_length, u64 manifest_hash, u32 version (2),
//!         u32 reserved, 8-byte magic
//! ```
//!
//! The file means what the footer at its end says: an appended file keeps its earlier
//! manifests and footers in the heap, and they are never looked for. A footer whose
//! manifest offset, length and hash are all zero is a *data shard*: blobs and no manifest.
//! This module knows nothing of CBOR or of hashing; the manifest comes out as bytes and its
//! hash as the number the footer stores.

use std::borrow::Cow;

use crate::layout::{
    ALIGNMENT_V2, FOOTER_LEN_V2, HEADER_LEN, MAGIC_V2, MIN_FILE_LEN_V2, VERSION_V2,
};
use crate::{Error, Result, Source};

/// The fields of a v2 footer, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FooterV2 {
    /// Absolute offset of the manifest blob (0 for a data shard).
    pub manifest_offset: u64,
    /// Length of the manifest blob (0 for a data shard).
    pub manifest_length: u64,
    /// XXH3-64 of the manifest bytes (0 for a data shard).
    pub manifest_hash: u64,
    /// The footer's version field (always [`VERSION_V2`] once parsed).
    pub version: u32,
    /// The reserved field: writers put 0 there, readers ignore it.
    pub reserved: u32,
}

impl FooterV2 {
    /// Decodes the 40 footer bytes (without judging them).
    fn decode(b: &[u8; FOOTER_LEN_V2 as usize]) -> (Self, [u8; 8]) {
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.iter_mut()
                .zip(b.iter().skip(i))
                .for_each(|(d, s)| *d = *s);
            u64::from_le_bytes(a)
        };
        let u32_at = |i: usize| {
            let mut a = [0u8; 4];
            a.iter_mut()
                .zip(b.iter().skip(i))
                .for_each(|(d, s)| *d = *s);
            u32::from_le_bytes(a)
        };
        let mut magic = [0u8; 8];
        magic
            .iter_mut()
            .zip(b.iter().skip(32))
            .for_each(|(d, s)| *d = *s);
        (
            FooterV2 {
                manifest_offset: u64_at(0),
                manifest_length: u64_at(8),
                manifest_hash: u64_at(16),
                version: u32_at(24),
                reserved: u32_at(28),
            },
            magic,
        )
    }
}

/// A v2 file's outer structure, checked: magics, version, and where the manifest is.
#[derive(Debug)]
pub struct ContainerV2 {
    source: Source,
    footer: FooterV2,
}

impl ContainerV2 {
    /// Checks the header, the footer and the manifest's range, in the order the original
    /// reader does: size, header magic, footer magic, version, then the manifest range.
    /// `max_manifest_len` caps the manifest before a byte of it is read.
    pub fn parse(source: Source, max_manifest_len: u64) -> Result<Self> {
        let file_len = source.len();
        if file_len < MIN_FILE_LEN_V2 {
            return Err(Error::invalid(format!(
                "v2 file of {file_len} bytes is shorter than header and footer ({MIN_FILE_LEN_V2} bytes)"
            )));
        }
        if *source.read_at(0, HEADER_LEN)? != MAGIC_V2 {
            return Err(Error::invalid("bad v2 header magic").at(0));
        }
        let footer_at = file_len - FOOTER_LEN_V2;
        let raw = source.read_at(footer_at, FOOTER_LEN_V2)?;
        let raw: &[u8; FOOTER_LEN_V2 as usize] = raw
            .as_ref()
            .try_into()
            .map_err(|_| Error::invalid("short v2 footer read").at(footer_at))?;
        let (footer, magic) = FooterV2::decode(raw);
        if magic != MAGIC_V2 {
            return Err(
                Error::invalid("bad v2 footer magic (file truncated or appended to?)")
                    .at(footer_at + 32),
            );
        }
        if footer.version != VERSION_V2 {
            return Err(Error::unsupported(format!(
                "v2 footer version {}, expected {VERSION_V2}",
                footer.version
            ))
            .at(footer_at + 24));
        }
        let c = ContainerV2 { source, footer };
        if footer.manifest_length == 0 {
            // A data shard: nothing else may be set.
            if footer.manifest_offset != 0 || footer.manifest_hash != 0 {
                return Err(Error::invalid(
                    "data shard footer (manifest length 0) has a non-zero manifest offset or hash",
                )
                .at(footer_at));
            }
            return Ok(c);
        }
        // The range first: a manifest the file cannot hold is the file's fault whatever the
        // cap (a truncated copy), and the error should not send the caller to raise a limit.
        check_blob_range_v2(footer.manifest_offset, footer.manifest_length, c.data_end()).map_err(
            |e| Error::invalid(format!("manifest: {}", e.message())).at(footer.manifest_offset),
        )?;
        if footer.manifest_length > max_manifest_len {
            return Err(Error::limit(format!(
                "manifest size {} exceeds the cap of {max_manifest_len} bytes",
                footer.manifest_length
            ))
            .at(footer_at + 8));
        }
        Ok(c)
    }

    /// The footer's fields.
    pub fn footer(&self) -> &FooterV2 {
        &self.footer
    }

    /// Whether the file is a data shard (no manifest).
    pub fn is_data_shard(&self) -> bool {
        self.footer.manifest_length == 0
    }

    /// The underlying bytes.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Gives the source back.
    pub fn into_source(self) -> Source {
        self.source
    }

    /// The manifest bytes (empty for a data shard).
    pub fn manifest_bytes(&self) -> Result<Cow<'_, [u8]>> {
        self.source
            .read_at(self.footer.manifest_offset, self.footer.manifest_length)
    }

    /// Where blobs must end: the start of the footer.
    pub fn data_end(&self) -> u64 {
        self.source.len().saturating_sub(FOOTER_LEN_V2)
    }

    /// Checks a blob of this file: see [`check_blob_range_v2`].
    pub fn check_blob(&self, offset: u64, length: u64) -> Result<u64> {
        check_blob_range_v2(offset, length, self.data_end())
    }
}

/// The v2 blob rules for a file whose footer starts at `data_end`: the offset is a multiple
/// of 4096 and at least 4096 (even for empty blobs), and `offset + length` neither overflows
/// nor reaches into the footer. The manifest blob obeys the same rules. Returns the end.
pub fn check_blob_range_v2(offset: u64, length: u64, data_end: u64) -> Result<u64> {
    if offset % ALIGNMENT_V2 != 0 {
        return Err(Error::invalid(format!(
            "blob offset {offset} is not a multiple of {ALIGNMENT_V2}"
        ))
        .at(offset));
    }
    if offset < ALIGNMENT_V2 {
        return Err(Error::invalid(format!(
            "blob offset {offset} lies before {ALIGNMENT_V2}, inside the header's page"
        ))
        .at(offset));
    }
    let end = offset.checked_add(length).ok_or_else(|| {
        Error::invalid(format!(
            "blob offset {offset} + length {length} overflows 64 bits"
        ))
        .at(offset)
    })?;
    if end > data_end {
        return Err(Error::invalid(format!(
            "blob [{offset}, {end}) reaches past the data area, which ends at {data_end} where the footer starts"
        ))
        .at(offset));
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    /// A v2 file of `heap` bytes after the header, then a footer with these fields.
    fn file(heap: usize, offset: u64, length: u64, hash: u64, version: u32) -> Vec<u8> {
        let mut f = MAGIC_V2.to_vec();
        f.resize(8 + heap, 0);
        f.extend_from_slice(&offset.to_le_bytes());
        f.extend_from_slice(&length.to_le_bytes());
        f.extend_from_slice(&hash.to_le_bytes());
        f.extend_from_slice(&version.to_le_bytes());
        f.extend_from_slice(&7u32.to_le_bytes());
        f.extend_from_slice(&MAGIC_V2);
        f
    }

    fn parse(b: Vec<u8>) -> Result<ContainerV2> {
        ContainerV2::parse(Source::from_vec(b), 1 << 30)
    }

    #[test]
    fn finds_the_manifest_and_ignores_reserved() {
        let c = parse(file(4096 + 100, 4096, 100, 5, 2)).unwrap();
        assert_eq!(c.footer().manifest_offset, 4096);
        assert_eq!(c.footer().reserved, 7);
        assert_eq!(c.manifest_bytes().unwrap().len(), 100);
        assert_eq!(c.data_end(), 8 + 4096 + 100);
        assert!(!c.is_data_shard());
    }

    #[test]
    fn data_shards_have_all_zero_manifest_fields() {
        assert!(parse(file(0, 0, 0, 0, 2)).unwrap().is_data_shard());
        let e = parse(file(4096, 4096, 0, 0, 2)).unwrap_err();
        assert!(e.message().contains("data shard footer"), "{e}");
    }

    #[test]
    fn rejects_bad_footers() {
        let e = parse(vec![0; 47]).unwrap_err();
        assert!(
            e.message().contains("shorter than header and footer"),
            "{e}"
        );
        let e = parse(file(0, 0, 0, 0, 3)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        let mut f = file(0, 0, 0, 0, 2);
        *f.last_mut().unwrap() ^= 1;
        assert!(parse(f).unwrap_err().message().contains("footer magic"));
        // Over the cap and past the file: the file's fault, not the cap's.
        let e = parse(file(100, 4096, 1 << 31, 0, 2)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidFile);
        assert!(e.message().contains("reaches past the data area"), "{e}");
        // Over the cap and in the file: the cap's.
        let fits = || Source::from_vec(file(4088 + 100, 4096, 100, 0, 2));
        let e = ContainerV2::parse(fits(), 99).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded);
        assert_eq!(e.message(), "manifest size 100 exceeds the cap of 99 bytes");
        assert!(ContainerV2::parse(fits(), 100).is_ok());
        let e = parse(file(4088 + 10, 4096, 11, 0, 2)).unwrap_err();
        assert!(e.message().contains("reaches past the data area"), "{e}");
        let e = parse(file(4096, 4095, 1, 0, 2)).unwrap_err();
        assert!(e.message().contains("not a multiple of 4096"), "{e}");
        let e = parse(file(4096, 0, 1, 0, 2)).unwrap_err();
        assert!(e.message().contains("before 4096"), "{e}");
        let e = parse(file(4096, u64::MAX - 4095, 4096, 0, 2)).unwrap_err();
        assert!(e.message().contains("overflows"), "{e}");
    }
}
