//! Reading the container: find the manifest from the tail, hand out checked blob ranges.

use std::borrow::Cow;
use std::fmt;

use crate::layout::*;
use crate::{Error, Result, Source};

/// Which container layout a file uses, told by its header magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerVersion {
    /// `ZTEN0001`: a CBOR array index followed by its u64 LE size, no footer magic.
    V0_1,
    /// `ZTEN1000`: a CBOR map manifest, its u64 LE size, and the footer magic (v1.1 and v1.2).
    V1,
    /// `ZTEN1000` as PyPI ztensor 1.0.0 and 1.0.1 wrote it (v1.0): a CBOR map manifest and its
    /// u64 LE size as the last 8 bytes, with no footer magic.
    V1_0,
}

impl fmt::Display for ContainerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ContainerVersion::V0_1 => "ZTEN0001",
            ContainerVersion::V1 => "ZTEN1000",
            ContainerVersion::V1_0 => "ZTEN1000 without footer magic",
        })
    }
}

/// A zTensor file's outer structure, checked: the header, the tail and where the manifest is.
///
/// It knows nothing of CBOR: the manifest (or v0.1 index) comes out as bytes, and blobs come out
/// by `(offset, length)` after [`Container::check_blob`] has approved the range.
#[derive(Debug)]
pub struct Container {
    source: Source,
    version: ContainerVersion,
    manifest_offset: u64,
    manifest_len: u64,
}

impl Container {
    /// Checks the header and tail of `source` and locates the manifest.
    pub fn parse(source: Source) -> Result<Self> {
        Self::parse_with_limit(source, MAX_MANIFEST_LEN)
    }

    /// As [`Container::parse`], with a custom cap on the manifest size.
    pub fn parse_with_limit(source: Source, max_manifest_len: u64) -> Result<Self> {
        let file_len = source.len();
        if file_len < HEADER_LEN {
            return Err(Error::invalid(format!(
                "file of {file_len} bytes is shorter than the 8-byte header"
            )));
        }
        let head = source.read_at(0, HEADER_LEN)?;
        let mut version = if *head == MAGIC_V1 {
            ContainerVersion::V1
        } else if *head == MAGIC_V0_1 {
            ContainerVersion::V0_1
        } else {
            return Err(Error::invalid(format!(
                "bad header magic {}: expected \"ZTEN1000\" or \"ZTEN0001\"",
                show_magic(&head)
            ))
            .at(0));
        };
        let tail_len = match version {
            ContainerVersion::V1 | ContainerVersion::V1_0 => FOOTER_LEN_V1,
            ContainerVersion::V0_1 => FOOTER_LEN_V0_1,
        };
        let min_len = HEADER_LEN + tail_len;
        if file_len < min_len {
            return Err(Error::invalid(format!(
                "file of {file_len} bytes is shorter than header and footer ({min_len} bytes)"
            )));
        }
        let mut tail_offset = file_len - tail_len;
        let tail = source.read_at(tail_offset, tail_len)?;
        let (mut size_bytes, footer) = tail.split_at(8);
        if version == ContainerVersion::V1 && footer != MAGIC_V1 {
            // No footer magic: either damage, or a v1.0 file whose last 8 bytes are the size.
            if let Some(v1_0) = v1_0_tail(&source, footer, max_manifest_len)? {
                version = ContainerVersion::V1_0;
                tail_offset = v1_0;
                size_bytes = footer;
            } else {
                return Err(Error::invalid(format!(
                    "bad footer magic {}: expected \"ZTEN1000\" (file truncated?)",
                    show_magic(footer)
                ))
                .at(tail_offset + 8));
            }
        }
        let manifest_len = read_u64_le(size_bytes);
        let what = match version {
            ContainerVersion::V1 | ContainerVersion::V1_0 => "manifest",
            ContainerVersion::V0_1 => "index",
        };
        if manifest_len == 0 {
            return Err(Error::invalid(format!("{what} size is 0")).at(tail_offset));
        }
        // A size the file cannot hold is the file's fault (damage, or a truncated copy whose
        // last bytes are not the tail), whatever the cap: checked first, so the error does
        // not send the caller to raise a limit that would not help.
        let room = tail_offset - HEADER_LEN;
        if manifest_len > room {
            return Err(Error::invalid(format!(
                "{what} size {manifest_len} is larger than the {room} bytes between header and footer (file truncated?)"
            ))
            .at(tail_offset));
        }
        if manifest_len > max_manifest_len {
            return Err(Error::limit(format!(
                "{what} size {manifest_len} exceeds the cap of {max_manifest_len} bytes"
            ))
            .at(tail_offset));
        }
        Ok(Container {
            manifest_offset: tail_offset - manifest_len,
            manifest_len,
            source,
            version,
        })
    }

    /// The container layout.
    pub fn version(&self) -> ContainerVersion {
        self.version
    }

    /// The underlying bytes.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Gives the source back.
    pub fn into_source(self) -> Source {
        self.source
    }

    /// Absolute offset of the manifest (v1) or index (v0.1).
    pub fn manifest_offset(&self) -> u64 {
        self.manifest_offset
    }

    /// The manifest (or v0.1 index) bytes.
    pub fn manifest_bytes(&self) -> Result<Cow<'_, [u8]>> {
        // Read whole and at once, in large requests, whatever read-around the map has.
        self.source
            .will_need(self.manifest_offset, self.manifest_len);
        self.source.read_at(self.manifest_offset, self.manifest_len)
    }

    /// The end of the data area: blobs must end at or before this offset.
    pub fn data_end(&self) -> u64 {
        self.manifest_offset
    }

    /// Checks that `[offset, offset + length)` is a legal blob: 64-byte aligned, after the
    /// header, without overflow, and wholly before the manifest. Returns the end offset.
    pub fn check_blob(&self, offset: u64, length: u64) -> Result<u64> {
        check_blob_range(offset, length, self.manifest_offset)
    }

    /// A blob's bytes after [`Container::check_blob`]; borrowed from a map, read otherwise.
    pub fn blob(&self, offset: u64, length: u64) -> Result<Cow<'_, [u8]>> {
        self.check_blob(offset, length)?;
        self.source.read_at(offset, length)
    }
}

/// Whether a `ZTEN1000` file without footer magic has the v1.0 tail: its last 8 bytes (`last`)
/// are a manifest size that fits between the header and those 8 bytes, and the byte where that
/// manifest would start opens a CBOR map (major type 5), as every v1.0 manifest does. Returns the
/// offset of the size field then. Damage to a v1.1/v1.2 tail almost never passes both checks, so
/// such a file keeps its footer-magic error.
///
/// A size over `max_manifest_len` is not v1.0 here either: real v1.0 manifests are small, and
/// the file keeps its footer-magic error.
fn v1_0_tail(source: &Source, last: &[u8], max_manifest_len: u64) -> Result<Option<u64>> {
    let file_len = source.len();
    let size = read_u64_le(last);
    // At least the header, one manifest byte and the size; callers checked the first two.
    let Some(size_at) = file_len.checked_sub(8) else {
        return Ok(None);
    };
    let room = size_at.saturating_sub(HEADER_LEN);
    if size == 0 || size > room || size > max_manifest_len {
        return Ok(None);
    }
    // size <= room = size_at - HEADER_LEN, so this cannot underflow.
    let start = size_at - size;
    let first = source.read_at(start, 1)?;
    let is_map = first.first().is_some_and(|b| *b >> 5 == 5);
    Ok(is_map.then_some(size_at))
}

/// The blob rules of the zTensor container, for a data area that ends at `data_end`.
pub fn check_blob_range(offset: u64, length: u64, data_end: u64) -> Result<u64> {
    if offset % ALIGNMENT != 0 {
        return Err(
            Error::invalid(format!("offset {offset} is not a multiple of {ALIGNMENT}")).at(offset),
        );
    }
    if offset < HEADER_LEN {
        return Err(Error::invalid(format!("offset {offset} lies inside the header")).at(offset));
    }
    let end = offset.checked_add(length).ok_or_else(|| {
        Error::invalid(format!(
            "offset {offset} + length {length} overflows 64 bits"
        ))
        .at(offset)
    })?;
    if end > data_end {
        return Err(Error::invalid(format!(
            "blob [{offset}, {end}) reaches past the data area, which ends at {data_end} where the manifest starts"
        ))
        .at(offset));
    }
    Ok(end)
}

/// One blob's range, for [`check_overlaps`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobRange<Id> {
    /// Start offset.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
    /// Whatever the caller uses to name the blob in an error.
    pub id: Id,
}

/// Rejects blobs that partially overlap. Blobs with identical ranges (aliases) and empty blobs
/// are allowed. Ranges must already have passed [`check_blob_range`] (no overflow).
///
/// On failure returns the two overlapping blobs, the earlier first; they meet at the second
/// one's offset.
pub fn check_overlaps<Id: Copy>(
    ranges: &mut [BlobRange<Id>],
) -> std::result::Result<(), (BlobRange<Id>, BlobRange<Id>)> {
    ranges.sort_unstable_by_key(|r| (r.offset, r.length));
    let mut prev: Option<BlobRange<Id>> = None;
    for r in ranges.iter().filter(|r| r.length > 0) {
        if let Some(p) = prev {
            if p.offset == r.offset && p.length == r.length {
                continue;
            }
            // Sorted by start and free of overlaps so far, so `p` ends last; no overflow
            // after check_blob_range.
            if r.offset < p.offset + p.length {
                return Err((p, *r));
            }
        }
        prev = Some(*r);
    }
    Ok(())
}

fn read_u64_le(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    for (d, s) in a.iter_mut().zip(b) {
        *d = *s;
    }
    u64::from_le_bytes(a)
}

/// Shows magic bytes as text when printable, hex otherwise.
fn show_magic(b: &[u8]) -> String {
    if b.iter().all(|c| c.is_ascii_graphic()) {
        format!("{:?}", String::from_utf8_lossy(b))
    } else {
        b.iter()
            .map(|c| format!("{c:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn v1_file(manifest: &[u8], blobs_len: usize) -> Vec<u8> {
        let mut f = MAGIC_V1.to_vec();
        f.resize(8 + blobs_len, 0);
        f.extend_from_slice(manifest);
        f.extend_from_slice(&(manifest.len() as u64).to_le_bytes());
        f.extend_from_slice(&MAGIC_V1);
        f
    }

    fn parse(bytes: Vec<u8>) -> Result<Container> {
        Container::parse(Source::from_vec(bytes))
    }

    #[test]
    fn finds_the_manifest() {
        let c = parse(v1_file(b"\xa0", 120)).unwrap();
        assert_eq!(c.version(), ContainerVersion::V1);
        assert_eq!(c.manifest_offset(), 128);
        assert_eq!(&*c.manifest_bytes().unwrap(), b"\xa0");
    }

    #[test]
    fn the_v0_1_empty_file_opens() {
        let mut f = MAGIC_V0_1.to_vec();
        f.push(0x80);
        f.extend_from_slice(&1u64.to_le_bytes());
        let c = parse(f).unwrap();
        assert_eq!(c.version(), ContainerVersion::V0_1);
        assert_eq!(&*c.manifest_bytes().unwrap(), b"\x80");
    }

    #[test]
    fn rejects_bad_tails() {
        let kind = |b: Vec<u8>| parse(b).unwrap_err().kind();
        assert_eq!(kind(vec![]), ErrorKind::InvalidFile);
        assert_eq!(kind(b"ZTEN1000".to_vec()), ErrorKind::InvalidFile);
        assert_eq!(
            kind(b"NOTZTEN!xxxxxxxxxxxxxxxx".to_vec()),
            ErrorKind::InvalidFile
        );
        let mut f = v1_file(b"\xa0", 0);
        *f.last_mut().unwrap() = b'1';
        assert!(parse(f).unwrap_err().message().contains("footer magic"));
        // size 0, size larger than the room, size over the cap
        let mut f = v1_file(b"\xa0", 0);
        f[9..17].copy_from_slice(&0u64.to_le_bytes());
        assert!(parse(f).unwrap_err().message().contains("size is 0"));
        let mut f = v1_file(b"\xa0", 0);
        f[9..17].copy_from_slice(&2u64.to_le_bytes());
        assert!(parse(f)
            .unwrap_err()
            .message()
            .contains("between header and footer"));
        // Over the cap and past the file: the file's fault (a truncated copy), not the cap's.
        let mut f = v1_file(b"\xa0", 0);
        f[9..17].copy_from_slice(&(MAX_MANIFEST_LEN + 1).to_le_bytes());
        let e = parse(f).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidFile);
        assert!(e.message().contains("(file truncated?)"), "{e}");
        // Over the cap and in the file: the cap's.
        let manifest = [0xa1, 0x61, b'k', 0x60];
        let e =
            Container::parse_with_limit(Source::from_vec(v1_file(&manifest, 0)), 3).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded);
        assert_eq!(e.message(), "manifest size 4 exceeds the cap of 3 bytes");
        assert!(Container::parse_with_limit(Source::from_vec(v1_file(&manifest, 0)), 4).is_ok());
    }

    #[test]
    fn a_v1_0_tail_is_the_size_alone() {
        // v1.0: the manifest (a CBOR map) and its size are the last bytes, no footer magic.
        let mut f = MAGIC_V1.to_vec();
        f.resize(64, 0);
        f.extend_from_slice(b"\xa1\x61k\x00");
        f.extend_from_slice(&4u64.to_le_bytes());
        let c = parse(f.clone()).unwrap();
        assert_eq!(c.version(), ContainerVersion::V1_0);
        assert_eq!(c.manifest_offset(), 64);
        assert_eq!(c.data_end(), 64);
        assert_eq!(&*c.manifest_bytes().unwrap(), b"\xa1\x61k\x00");
        let footer_error = |f: Vec<u8>| {
            let e = parse(f).unwrap_err();
            assert!(e.message().starts_with("bad footer magic"), "{e}");
            e
        };
        // A size that does not start at a CBOR map, or does not fit, or is 0: still damage.
        let mut g = f.clone();
        g[64] = 0x80;
        footer_error(g);
        let n = f.len();
        let mut g = f.clone();
        g[n - 8..].copy_from_slice(&(n as u64).to_le_bytes());
        footer_error(g);
        let mut g = f.clone();
        g[n - 8..].copy_from_slice(&u64::MAX.to_le_bytes());
        footer_error(g);
        let mut g = f.clone();
        g[n - 8..].copy_from_slice(&0u64.to_le_bytes());
        assert_eq!(footer_error(g).offset(), Some(n as u64 - 8));
        // Over the cap: not taken for v1.0.
        let e = Container::parse_with_limit(Source::from_vec(f), 3).unwrap_err();
        assert!(e.message().starts_with("bad footer magic"));
    }

    #[test]
    fn checks_blob_ranges() {
        let c = parse(v1_file(b"\xa0", 120)).unwrap();
        assert_eq!(c.check_blob(64, 64).unwrap(), 128);
        assert!(c
            .check_blob(64, 65)
            .unwrap_err()
            .message()
            .contains("past the data area"));
        assert!(c
            .check_blob(65, 0)
            .unwrap_err()
            .message()
            .contains("multiple of 64"));
        assert!(c
            .check_blob(0, 8)
            .unwrap_err()
            .message()
            .contains("inside the header"));
        let e = c.check_blob(u64::MAX - 63, 128).unwrap_err();
        assert!(e.message().contains("overflows"));
    }

    #[test]
    fn overlap_rules() {
        let r = |offset, length, id| BlobRange { offset, length, id };
        assert!(check_overlaps(&mut [r(64, 64, 0), r(128, 64, 1)]).is_ok());
        assert!(
            check_overlaps(&mut [r(64, 64, 0), r(64, 64, 1)]).is_ok(),
            "aliases are fine"
        );
        assert!(
            check_overlaps(&mut [r(64, 0, 0), r(64, 64, 1)]).is_ok(),
            "empty blobs are fine"
        );
        assert_eq!(
            check_overlaps(&mut [r(128, 64, 1), r(64, 65, 0)]),
            Err((r(64, 65, 0), r(128, 64, 1)))
        );
        // A blob inside a larger one overlaps it partially.
        assert!(check_overlaps(&mut [r(64, 256, 0), r(128, 64, 1)]).is_err());
    }
}
