//! zTensor v2's `zt.zstd-seekable/1` encoding: independent zstd frames, then a seek table in
//! a skippable frame that says how long each frame is before and after decoding.
//!
//! ```text
//! frame_1 ... frame_N
//! 5E 2A 4D 18 | u32 frame_size = N * entry + 9 | N x { u32 compressed, u32 decompressed [, u32 checksum] }
//! | u32 N | u8 descriptor (bit 7: checksum column; bits 0-6 zero) | B1 EA 92 8F
//! ```
//!
//! The table is read whole and checked before any output is written or allocated: its
//! frames tile the bytes before it exactly, their decoded sizes add up to the part's declared
//! size, each is at most 16 MiB and all but the last are equal, and no frame claims more than
//! zstd can produce from its compressed bytes ([`MAX_ZSTD_RATIO`]). Decoding then writes
//! each frame into its own slice of the caller's buffer, exactly.

use zt_container::{Error, Result};

/// Magic of the skippable frame that holds the seek table (little-endian on disk).
const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;
/// Magic at the very end of the seek table.
const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;
/// Bytes after the entries: N, descriptor, magic.
const TABLE_TAIL: u64 = 9;
/// Largest decoded size of one frame the profile allows.
pub const MAX_SEEKABLE_FRAME: u64 = 16 << 20;
/// The most frames a seek table may list: a 4 TiB tensor in the original's 1 MiB frames, or
/// 16 GiB in frames of 4 KiB. The entries are held while a part is decoded (40 bytes each
/// here, 160 MiB at the limit), so a table cannot make a reader hold more than that.
pub const MAX_SEEKABLE_FRAMES: u64 = 1 << 22;
/// The fewest bytes a zstd frame with a content checksum can take: magic (4), frame header
/// descriptor (1), a block header (3) and the checksum (4). A shorter frame in the table is a
/// table that lies, and refusing it there keeps a table of empty entries from passing as
/// millions of frames.
const MIN_FRAME_LEN: u64 = 12;
/// The most bytes zstd can produce per stored byte: a block is at least 4 bytes (a 3-byte
/// header and one byte repeated, an RLE block) and at most 128 KiB of output. A frame that
/// claims more than this ratio of its compressed size is lying, whatever zstd would say.
pub const MAX_ZSTD_RATIO: u64 = (128 << 10) / 4;

/// One frame of the seek table, with where its bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeekFrame {
    /// Offset of the compressed frame in the blob.
    pub offset: u64,
    /// Compressed size.
    pub compressed: u64,
    /// Offset of the frame's output in the decoded bytes.
    pub decoded_offset: u64,
    /// Decompressed size.
    pub decompressed: u64,
    /// The checksum column's entry, when the table has one.
    pub checksum: Option<u32>,
}

/// Reads and checks the seek table at the end of `blob`, for a part that declares
/// `decoded_length` bytes. Allocates one entry per frame, after checking that the table's
/// bytes are really there.
pub fn parse_seek_table(blob: &[u8], decoded_length: u64) -> Result<Vec<SeekFrame>> {
    parse_seek_table_tail(blob, blob.len() as u64, decoded_length)
}

/// How many bytes at the end of a blob of `blob_len` bytes the seek table takes (its
/// skippable-frame header included), read from `tail`, the blob's last `tail.len()` bytes
/// (at least the last 9). A reader that fetches ranges asks for the blob's tail, learns here
/// whether the table was all in it, and hands the table to [`parse_seek_table_tail`] without
/// fetching the frames.
///
/// ```
/// use zt_formats::seekable::{seek_table_len, zstd_seekable_encode};
/// let blob = zstd_seekable_encode(&[7u8; 3 << 20], 3)?;
/// // Three frames of 8-byte entries: 8 + 3 x 8 + 9 bytes.
/// assert_eq!(seek_table_len(&blob[blob.len() - 9..], blob.len() as u64)?, 41);
/// # Ok::<(), zt_container::Error>(())
/// ```
pub fn seek_table_len(tail: &[u8], blob_len: u64) -> Result<u64> {
    Ok(table_shape(tail, blob_len)?.2 + 8)
}

/// The seek table's frame count, entry size and length (entries and tail, not the 8-byte
/// skippable header), checked to fit in `blob_len`.
fn table_shape(tail: &[u8], blob_len: u64) -> Result<(u64, u64, u64)> {
    let bad = |msg: String, at: u64| Error::invalid(format!("zstd-seekable: {msg}")).at(at);
    let base = blob_len.checked_sub(tail.len() as u64).ok_or_else(|| {
        Error::argument(format!(
            "zstd-seekable: a tail of {} bytes of a {blob_len}-byte blob",
            tail.len()
        ))
    })?;
    let byte_at = |at: u64| {
        tail.get(usize::try_from(at.checked_sub(base)?).ok()?)
            .copied()
    };
    let u32_at = |at: u64| -> Option<u32> {
        let b = [
            byte_at(at)?,
            byte_at(at + 1)?,
            byte_at(at + 2)?,
            byte_at(at + 3)?,
        ];
        Some(u32::from_le_bytes(b))
    };
    let len = blob_len;
    if len < 8 + TABLE_TAIL {
        return Err(bad(format!("{len} bytes is too short for a seek table"), 0));
    }
    if tail.len() < TABLE_TAIL as usize {
        return Err(Error::argument(format!(
            "zstd-seekable: the seek table's last {TABLE_TAIL} bytes are needed, {} given",
            tail.len()
        )));
    }
    if u32_at(len - 4) != Some(SEEKABLE_MAGIC) {
        return Err(bad("no seek table magic at the end".into(), len - 4));
    }
    let descriptor = byte_at(len - 5).unwrap_or(0);
    if descriptor & 0x7f != 0 {
        return Err(bad(
            format!("seek table descriptor {descriptor:#04x} has reserved bits set"),
            len - 5,
        ));
    }
    let entry: u64 = if descriptor & 0x80 != 0 { 12 } else { 8 };
    let n = u64::from(u32_at(len - TABLE_TAIL).unwrap_or(0));
    // The table (8-byte skippable header, entries, tail) must fit in the blob.
    let table_len = n
        .checked_mul(entry)
        .and_then(|e| e.checked_add(TABLE_TAIL))
        .filter(|t| t.saturating_add(8) <= len)
        .ok_or_else(|| {
            bad(
                format!("seek table of {n} frames does not fit in {len} bytes"),
                len - TABLE_TAIL,
            )
        })?;
    if n > MAX_SEEKABLE_FRAMES {
        return Err(Error::limit(format!(
            "zstd-seekable: a seek table of {n} frames exceeds the limit of {MAX_SEEKABLE_FRAMES}"
        ))
        .at(len - TABLE_TAIL));
    }
    Ok((n, entry, table_len))
}

/// [`parse_seek_table`] for a reader that holds only the blob's end: `tail` is the last
/// `tail.len()` bytes of a blob of `blob_len`, and must hold the whole table
/// ([`seek_table_len`] says how much that is). Offsets in the frames and in errors are the
/// blob's.
///
/// ```
/// use zt_formats::seekable::{parse_seek_table, parse_seek_table_tail, zstd_seekable_encode};
/// let data = vec![1u8; (2 << 20) + 5];
/// let blob = zstd_seekable_encode(&data, 3)?;
/// let tail = &blob[blob.len() - 100..];
/// let frames = parse_seek_table_tail(tail, blob.len() as u64, data.len() as u64)?;
/// assert_eq!(frames, parse_seek_table(&blob, data.len() as u64)?);
/// assert_eq!(frames.len(), 3);
/// # Ok::<(), zt_container::Error>(())
/// ```
pub fn parse_seek_table_tail(
    tail: &[u8],
    blob_len: u64,
    decoded_length: u64,
) -> Result<Vec<SeekFrame>> {
    let bad = |msg: String, at: u64| Error::invalid(format!("zstd-seekable: {msg}")).at(at);
    let (n, entry, table_len) = table_shape(tail, blob_len)?;
    let len = blob_len;
    let base = len - tail.len() as u64;
    let start = len - 8 - table_len;
    if start < base {
        return Err(Error::argument(format!(
            "zstd-seekable: the seek table starts at {start}, before the {} bytes given",
            tail.len()
        )));
    }
    let u32_at = |at: u64| -> Option<u32> {
        let i = usize::try_from(at.checked_sub(base)?).ok()?;
        let b = tail.get(i..i.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if u32_at(start) != Some(SKIPPABLE_MAGIC) {
        return Err(bad(
            "the seek table does not start with the skippable-frame magic".into(),
            start,
        ));
    }
    if u32_at(start + 4).map(u64::from) != Some(table_len) {
        return Err(bad(
            format!("the seek table's frame size is not {n} x {entry} + 9 = {table_len}"),
            start + 4,
        ));
    }
    let mut frames = Vec::new();
    frames
        .try_reserve_exact(usize::try_from(n).unwrap_or(usize::MAX))
        .map_err(|_| Error::out_of_memory(format!("zstd-seekable: a seek table of {n} frames")))?;
    let (mut offset, mut decoded) = (0u64, 0u64);
    for k in 0..n {
        let at = start + 8 + k * entry;
        let compressed = u64::from(u32_at(at).unwrap_or(0));
        let decompressed = u64::from(u32_at(at + 4).unwrap_or(0));
        let checksum = (entry == 12).then(|| u32_at(at + 8).unwrap_or(0));
        if compressed < MIN_FRAME_LEN {
            return Err(bad(
                format!(
                    "frame {k} is {compressed} bytes, too short for a zstd frame with its checksum"
                ),
                at,
            ));
        }
        if decompressed > MAX_SEEKABLE_FRAME {
            return Err(bad(
                format!("frame {k} decodes to {decompressed} bytes, more than the 16 MiB a frame may hold"),
                at,
            ));
        }
        if decompressed > compressed.saturating_mul(MAX_ZSTD_RATIO) {
            return Err(bad(
                format!(
                    "frame {k} claims {decompressed} bytes from {compressed} compressed, more than zstd can produce"
                ),
                at,
            ));
        }
        if let Some(first) = frames.first().map(|f: &SeekFrame| f.decompressed) {
            // Every frame but the last has the first frame's size; a frame after a short one
            // means the short one was not last.
            let prev = frames.last().map_or(first, |f: &SeekFrame| f.decompressed);
            if prev != first {
                return Err(bad(
                    format!("frame {} decodes to {prev} bytes but is not the last (frames before the last all decode to {first})", k - 1),
                    at,
                ));
            }
        }
        frames.push(SeekFrame {
            offset,
            compressed,
            decoded_offset: decoded,
            decompressed,
            checksum,
        });
        offset = offset.saturating_add(compressed);
        decoded = decoded.saturating_add(decompressed);
    }
    if offset != start {
        return Err(bad(
            format!("the frames' compressed sizes add up to {offset}, but the seek table starts at {start}"),
            start,
        ));
    }
    if decoded != decoded_length {
        return Err(bad(
            format!("the frames decode to {decoded} bytes, but the part declares {decoded_length}"),
            start,
        ));
    }
    Ok(frames)
}

/// Decodes a `zt.zstd-seekable/1` blob into `dst`, which is exactly the declared decoded size:
/// the seek table is checked first ([`parse_seek_table`]), then each frame is decoded into its
/// own slice of `dst` and must fill it exactly and carry zstd's content checksum (which zstd
/// verifies); a checksum column, if any, must agree with each frame's own checksum.
#[cfg(feature = "zstd")]
pub fn zstd_seekable_decode_into(blob: &[u8], dst: &mut [u8]) -> Result<()> {
    let frames = parse_seek_table(blob, dst.len() as u64)?;
    for (k, (f, out)) in frames.iter().zip(frame_outputs(&frames, dst)?).enumerate() {
        decode_frame(blob, k, f, out)?;
    }
    Ok(())
}

/// `dst` cut into each frame's output, in order. The seek table was checked to lay the frames'
/// outputs end to end from 0 ([`parse_seek_table`]).
pub fn frame_outputs<'d>(frames: &[SeekFrame], dst: &'d mut [u8]) -> Result<Vec<&'d mut [u8]>> {
    let mut outs = Vec::new();
    outs.try_reserve_exact(frames.len())
        .map_err(|_| Error::out_of_memory("the frames of a zstd-seekable part"))?;
    let mut rest = dst;
    for (k, f) in frames.iter().enumerate() {
        let n = usize::try_from(f.decompressed)
            .ok()
            .filter(|&n| n <= rest.len())
            .ok_or_else(|| {
                Error::invalid(format!("zstd-seekable: frame {k} decodes outside the part"))
            })?;
        let (out, tail) = rest.split_at_mut(n);
        outs.push(out);
        rest = tail;
    }
    Ok(outs)
}

/// Decodes frame `k` (`f`, from the seek table) of `blob` into `out`, its slice of the part:
/// the frame must be a zstd frame carrying its content checksum (which zstd verifies), agree
/// with the checksum column if there is one, and fill `out` exactly. Frames are independent:
/// a caller may decode them on as many threads as it likes.
#[cfg(feature = "zstd")]
pub fn decode_frame(blob: &[u8], k: usize, f: &SeekFrame, out: &mut [u8]) -> Result<()> {
    let src = usize::try_from(f.offset)
        .ok()
        .and_then(|o| blob.get(o..o.checked_add(usize::try_from(f.compressed).ok()?)?))
        .ok_or_else(|| Error::invalid(format!("zstd-seekable: frame {k} lies outside the blob")))?;
    // Frame header: 4-byte magic, then the descriptor whose bit 2 says a content checksum
    // follows the frame.
    if src.get(..4) != Some(&[0x28, 0xb5, 0x2f, 0xfd][..]) {
        return Err(
            Error::invalid(format!("zstd-seekable: frame {k} is not a zstd frame")).at(f.offset),
        );
    }
    if src.get(4).is_none_or(|fhd| fhd & 0x04 == 0) {
        return Err(Error::invalid(format!(
            "zstd-seekable: frame {k} carries no content checksum"
        ))
        .at(f.offset));
    }
    if let Some(c) = f.checksum {
        let own = src
            .len()
            .checked_sub(4)
            .and_then(|i| src.get(i..))
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes);
        if own != Some(c) {
            return Err(Error::invalid(format!(
                "zstd-seekable: frame {k}'s checksum column entry {c:#010x} differs from the frame's own checksum"
            ))
            .at(f.offset));
        }
    }
    crate::compress::zstd_decode_into(src, out).map_err(|e| {
        Error::invalid(format!("zstd-seekable frame {k}: {}", e.message())).at(f.offset)
    })
}

/// Decoded bytes per frame when encoding, as the original writer chooses them.
pub const SEEKABLE_CHUNK: usize = 1 << 20;

/// Encodes `data` as a `zt.zstd-seekable/1` blob the way ztensor 2.x does: 1 MiB frames, each
/// an independent zstd frame at `level` with its content checksum and without a content
/// size, then a seek table without a checksum column (descriptor 0).
///
/// ```
/// use zt_formats::seekable::{zstd_seekable_decode_into, zstd_seekable_encode};
/// let data = vec![0u8; 4000];
/// let blob = zstd_seekable_encode(&data, 3).unwrap();
/// assert_eq!(blob.len(), 47); // sample 03: a 22-byte frame and a 25-byte table
/// let mut back = vec![1u8; 4000];
/// zstd_seekable_decode_into(&blob, &mut back).unwrap();
/// assert_eq!(back, data);
/// ```
#[cfg(feature = "zstd")]
pub fn zstd_seekable_encode(data: &[u8], level: i32) -> Result<Vec<u8>> {
    use std::io::Write;
    let fail = |e: std::io::Error| Error::invalid(format!("zstd: {e}"));
    let mut out = Vec::new();
    let mut entries = Vec::new();
    for chunk in data.chunks(SEEKABLE_CHUNK) {
        // A streaming frame with no size pledged, as the original compresses: zstd then
        // picks the level's own window (a known size would shrink it and change the bytes).
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), level).map_err(fail)?;
        e.include_checksum(true).map_err(fail)?;
        e.include_contentsize(false).map_err(fail)?;
        e.write_all(chunk).map_err(fail)?;
        let frame = e.finish().map_err(fail)?;
        let size = |n: usize| {
            u32::try_from(n).map_err(|_| Error::invalid("zstd-seekable: frame over 4 GiB"))
        };
        entries.push((size(frame.len())?, size(chunk.len())?));
        out.extend_from_slice(&frame);
    }
    let n = u32::try_from(entries.len())
        .map_err(|_| Error::invalid("zstd-seekable: too many frames"))?;
    let frame_size = n
        .checked_mul(8)
        .and_then(|x| x.checked_add(TABLE_TAIL as u32))
        .ok_or_else(|| Error::invalid("zstd-seekable: seek table too large"))?;
    out.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
    out.extend_from_slice(&frame_size.to_le_bytes());
    for (compressed, decompressed) in entries {
        out.extend_from_slice(&compressed.to_le_bytes());
        out.extend_from_slice(&decompressed.to_le_bytes());
    }
    out.extend_from_slice(&n.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
    Ok(out)
}

#[cfg(all(test, feature = "zstd"))]
mod tests {
    use super::*;

    /// A seekable blob of `data` in frames of `frame` bytes, as the original writer makes it.
    fn encode(data: &[u8], frame: usize, checksums: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut entries = Vec::new();
        for chunk in data.chunks(frame) {
            let mut c = zstd::bulk::Compressor::new(3).unwrap();
            c.include_checksum(true).unwrap();
            c.include_contentsize(false).unwrap();
            let z = c.compress(chunk).unwrap();
            let sum = u32::from_le_bytes(z[z.len() - 4..].try_into().unwrap());
            entries.push((z.len() as u32, chunk.len() as u32, sum));
            out.extend_from_slice(&z);
        }
        let entry = if checksums { 12 } else { 8 };
        out.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
        out.extend_from_slice(&((entries.len() * entry + 9) as u32).to_le_bytes());
        for (c, d, s) in &entries {
            out.extend_from_slice(&c.to_le_bytes());
            out.extend_from_slice(&d.to_le_bytes());
            if checksums {
                out.extend_from_slice(&s.to_le_bytes());
            }
        }
        out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        out.push(if checksums { 0x80 } else { 0 });
        out.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
        out
    }

    #[test]
    fn round_trips_with_and_without_a_checksum_column() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 13) as u8).collect();
        for checksums in [false, true] {
            let blob = encode(&data, 4096, checksums);
            let mut out = vec![0u8; data.len()];
            zstd_seekable_decode_into(&blob, &mut out).unwrap();
            assert_eq!(out, data);
            assert_eq!(parse_seek_table(&blob, 10_000).unwrap().len(), 3);
        }
        let empty = encode(&[], 4096, false);
        zstd_seekable_decode_into(&empty, &mut []).unwrap();
    }

    #[test]
    fn a_tail_holding_the_table_parses_as_the_whole_blob_does() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 13) as u8).collect();
        for checksums in [false, true] {
            let blob = encode(&data, 4096, checksums);
            let len = blob.len() as u64;
            let whole = parse_seek_table(&blob, 10_000).unwrap();
            // Three frames: 8 + 3 entries + 9.
            let table = 8 + 3 * if checksums { 12 } else { 8 } + 9;
            for cut in (0..blob.len()).rev() {
                let tail = &blob[cut..];
                if tail.len() < 9 {
                    let e = seek_table_len(tail, len).unwrap_err();
                    assert_eq!(e.kind(), zt_container::ErrorKind::InvalidArgument, "{e}");
                    continue;
                }
                assert_eq!(seek_table_len(tail, len).unwrap(), table);
                let parsed = parse_seek_table_tail(tail, len, 10_000);
                if tail.len() as u64 >= table {
                    assert_eq!(parsed.unwrap(), whole);
                } else {
                    // The caller's mistake, not the file's: it was told how much to read.
                    let e = parsed.unwrap_err();
                    assert_eq!(e.kind(), zt_container::ErrorKind::InvalidArgument, "{e}");
                }
            }
            // A table that claims more frames than the blob holds is the file's fault, seen
            // from the last 9 bytes alone.
            let mut b = blob.clone();
            let n = b.len();
            b[n - 9..n - 5].copy_from_slice(&u32::MAX.to_le_bytes());
            let e = seek_table_len(&b[n - 9..], len).unwrap_err();
            assert!(e.message().contains("does not fit"), "{e}");
            assert_eq!(e.offset(), Some(len - 9));
        }
        // More frames than MAX_SEEKABLE_FRAMES, in a blob large enough to hold their
        // entries: a limit, told from the last 9 bytes (the rest is never read).
        let mut tail = ((MAX_SEEKABLE_FRAMES + 1) as u32).to_le_bytes().to_vec();
        tail.push(0);
        tail.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
        let e = seek_table_len(&tail, 64 << 20).unwrap_err();
        assert_eq!(e.kind(), zt_container::ErrorKind::LimitExceeded, "{e}");
        assert!(e.message().contains("4194305 frames"), "{e}");
    }

    #[test]
    fn a_table_of_empty_frames_is_refused_at_its_first_entry() {
        // 1,000 entries of (0, 0): they tile a part of no frames and decode to nothing, but
        // no zstd frame is 0 bytes long.
        let mut blob = SKIPPABLE_MAGIC.to_le_bytes().to_vec();
        blob.extend_from_slice(&(1000u32 * 8 + 9).to_le_bytes());
        blob.resize(blob.len() + 8000, 0);
        blob.extend_from_slice(&1000u32.to_le_bytes());
        blob.push(0);
        blob.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
        let e = parse_seek_table(&blob, 0).unwrap_err();
        assert!(e.message().contains("frame 0 is 0 bytes, too short"), "{e}");
        assert_eq!(e.offset(), Some(8));
    }

    #[test]
    fn refuses_tables_that_lie() {
        let data = vec![1u8; 8192];
        let blob = encode(&data, 4096, false);
        let e = parse_seek_table(&blob, 8191).unwrap_err();
        assert!(e.message().contains("declares 8191"), "{e}");
        let mut b = blob.clone();
        let n = b.len();
        b[n - 9] = 200; // N frames that cannot fit
        assert!(parse_seek_table(&b, 8192)
            .unwrap_err()
            .message()
            .contains("does not fit"));
        let mut b = blob.clone();
        b[n - 5] = 1;
        assert!(parse_seek_table(&b, 8192)
            .unwrap_err()
            .message()
            .contains("reserved bits"));
        // One frame claiming 16 MiB from a few bytes.
        let mut b = blob.clone();
        let first = n - 9 - 16;
        b[first + 4..first + 8].copy_from_slice(&(16u32 << 20).to_le_bytes());
        assert!(parse_seek_table(&b, 8192)
            .unwrap_err()
            .message()
            .contains("more than zstd can produce"));
        // Frames not tiling the bytes before the table.
        let mut b = blob.clone();
        b[first] = b[first].wrapping_add(1);
        assert!(parse_seek_table(&b, 8192)
            .unwrap_err()
            .message()
            .contains("add up to"));
        // A short frame that is not last.
        let uneven = encode(&[7u8; 7000], 3000, false);
        let mut b = uneven.clone();
        let n = b.len();
        let e0 = n - 9 - 24;
        b[e0 + 12..e0 + 16].copy_from_slice(&1000u32.to_le_bytes());
        b[e0 + 20..e0 + 24].copy_from_slice(&3000u32.to_le_bytes());
        assert!(parse_seek_table(&b, 7000)
            .unwrap_err()
            .message()
            .contains("is not the last"));
    }

    #[test]
    fn frames_without_checksums_are_refused() {
        let mut c = zstd::bulk::Compressor::new(3).unwrap();
        c.include_checksum(false).unwrap();
        let z = c.compress(&[3u8; 100]).unwrap();
        let mut blob = z.clone();
        blob.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
        blob.extend_from_slice(&17u32.to_le_bytes());
        blob.extend_from_slice(&(z.len() as u32).to_le_bytes());
        blob.extend_from_slice(&100u32.to_le_bytes());
        blob.extend_from_slice(&1u32.to_le_bytes());
        blob.push(0);
        blob.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
        let e = zstd_seekable_decode_into(&blob, &mut [0u8; 100]).unwrap_err();
        assert!(e.message().contains("no content checksum"), "{e}");
    }
}
