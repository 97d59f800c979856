//! The zstd calls of the facade in one place, so that the `zstd` feature switches them as a
//! whole: with it, they are zt-formats' bounded codec; without it, reading or writing a zstd
//! component is [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) and everything else
//! works unchanged.

#[cfg(not(feature = "zstd"))]
use zt_container::Result;

#[cfg(feature = "zstd")]
pub(crate) use zt_formats::seekable::zstd_seekable_encode;

/// Parts of at least this many frames (1 MiB each) are decoded on every core.
#[cfg(feature = "zstd")]
const PARALLEL_FRAMES: usize = 4;

/// Decodes a `zt.zstd-seekable/1` part into `dst` (see
/// [`zt_formats::seekable::zstd_seekable_decode_into`]), its independent frames spread over
/// rayon's pool when there are enough of them: one large tensor keeps both cores busy, and
/// objects decoded side by side (`parallel_objects`) share the pool with it.
#[cfg(feature = "zstd")]
pub(crate) fn zstd_seekable_decode_into(src: &[u8], dst: &mut [u8]) -> zt_container::Result<()> {
    let frames = zt_formats::seekable::parse_seek_table(src, dst.len() as u64)?;
    decode_frames(src, &frames, 0, dst)
}

/// The frames of a `zt.zstd-seekable/1` part (its seek table, `frames`) that hold decoded
/// bytes `start..end`: a slice of a few rows of a large compressed tensor needs a frame or
/// two, and only their stored bytes are read. Empty when no frame holds them.
pub(crate) fn seekable_frames_holding(
    frames: &[zt_formats::seekable::SeekFrame],
    start: u64,
    end: u64,
) -> std::ops::Range<usize> {
    // Frames lie in decoded order, each after the one before (the seek table says so).
    let first = frames
        .iter()
        .position(|f| f.decoded_offset.saturating_add(f.decompressed) > start)
        .unwrap_or(frames.len());
    let last = frames
        .iter()
        .rposition(|f| f.decoded_offset < end)
        .map_or(first, |k| k + 1)
        .max(first);
    first..last
}

/// Decodes `frames[chosen]` of a seekable part, whose stored bytes are `stored` (from the
/// first chosen frame's offset in the part to the end of the last): returns their decoded
/// bytes and where decoded byte `start` lies in them. Offsets in errors are the part's.
#[cfg(feature = "zstd")]
pub(crate) fn zstd_seekable_decode_frames(
    stored: &[u8],
    frames: &[zt_formats::seekable::SeekFrame],
    chosen: std::ops::Range<usize>,
    start: u64,
) -> zt_container::Result<(Vec<u8>, u64)> {
    let picked = frames.get(chosen.clone()).unwrap_or_default();
    let base = picked.first().map_or(0, |f| f.offset);
    let from = picked.first().map_or(start, |f| f.decoded_offset);
    // The same frames, placed in `stored` instead of the part.
    let mut rebased = Vec::new();
    rebased
        .try_reserve_exact(picked.len())
        .map_err(|_| zt_container::Error::out_of_memory("the frames of a slice"))?;
    rebased.extend(picked.iter().map(|f| zt_formats::seekable::SeekFrame {
        offset: f.offset - base,
        ..*f
    }));
    let len = picked
        .iter()
        .try_fold(0u64, |n, f| n.checked_add(f.decompressed))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| zt_container::Error::invalid("zstd-seekable: frames larger than memory"))?;
    let mut out = zt_container::internal::try_zeroed_vec::<u8>(len)?;
    decode_frames(stored, &rebased, chosen.start, &mut out).map_err(|e| match e.offset() {
        Some(o) => zt_container::Error::new(e.kind(), e.message()).at(o.saturating_add(base)),
        None => e,
    })?;
    Ok((out, start.saturating_sub(from)))
}

/// Decodes `frames` (frame `first` of the part and those after it) into `dst`, one after
/// another, on rayon's pool when there are enough of them; the first error in frame order.
#[cfg(feature = "zstd")]
fn decode_frames(
    src: &[u8],
    frames: &[zt_formats::seekable::SeekFrame],
    first: usize,
    dst: &mut [u8],
) -> zt_container::Result<()> {
    use rayon::prelude::*;
    use zt_formats::seekable::{decode_frame, frame_outputs};
    let outs = frame_outputs(frames, dst)?;
    if frames.len() < PARALLEL_FRAMES || crate::pool::threads() < 2 {
        for (k, (f, out)) in frames.iter().zip(outs).enumerate() {
            decode_frame(src, first + k, f, out)?;
        }
        return Ok(());
    }
    // The first error in frame order, as the sequential decode would report it.
    let results: Vec<zt_container::Result<()>> = crate::pool::install(|| {
        frames
            .par_iter()
            .zip(outs)
            .enumerate()
            .map(|(k, (f, out))| decode_frame(src, first + k, f, out))
            .collect()
    });
    results.into_iter().collect()
}
/// Blosc2's dictionaries, in HDF5 chunks.
#[cfg(all(feature = "zstd", feature = "hdf5"))]
pub(crate) use zt_formats::zstd_decode_with_dict_into;
#[cfg(feature = "zstd")]
pub(crate) use zt_formats::{
    zstd_compress, zstd_decode_into, zstd_decompress_bounded, zstd_frame_content_size,
    zstd_part_into,
};

/// A reader of what the zstd stream in `len` bytes of `source` from `offset` decodes to,
/// reading the stream as it is needed, a block at a time: decoding its front reads only
/// that much of the file (unmapped, or remote), never the whole stream.
#[cfg(all(feature = "zstd", feature = "torch-dcp"))]
pub(crate) fn zstd_range_reader(
    source: &zt_container::Source,
    offset: u64,
    len: u64,
) -> zt_container::Result<Box<dyn std::io::Read + '_>> {
    let range = RangeReader {
        source,
        at: offset,
        end: offset.saturating_add(len),
    };
    Ok(Box::new(zt_formats::zstd_reader(range)?))
}

/// Without zstd: decoding is unsupported.
#[cfg(all(not(feature = "zstd"), feature = "torch-dcp"))]
pub(crate) fn zstd_range_reader(
    _source: &zt_container::Source,
    _offset: u64,
    _len: u64,
) -> Result<Box<dyn std::io::Read + '_>> {
    without_zstd()
}

/// Bytes `at..end` of a source, read in order by positional reads.
#[cfg(all(feature = "zstd", feature = "torch-dcp"))]
struct RangeReader<'s> {
    source: &'s zt_container::Source,
    at: u64,
    end: u64,
}

#[cfg(all(feature = "zstd", feature = "torch-dcp"))]
impl std::io::Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.end.saturating_sub(self.at)).min(buf.len() as u64) as usize;
        let Some(part) = buf.get_mut(..n) else {
            return Ok(0);
        };
        self.source
            .read_into(self.at, part)
            .map_err(std::io::Error::other)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Decodes the zip record that lies `skip` bytes into a zstd stream and fills `dst`, then the
/// data descriptor that follows it (`PK\x07\x08`, the CRC-32, both sizes in 4 or 8 bytes),
/// whose sizes must be the record's and whose CRC-32 must be its bytes': a record of an
/// archive written to a stream, whose checksum is known only there. Then the archive's end,
/// where it lies within [`crate::zip::MAX_STREAM_END`] bytes ([`crate::zip::check_stream_end`]).
#[cfg(feature = "zstd")]
pub(crate) fn zstd_record_into(src: &[u8], skip: u64, dst: &mut [u8]) -> zt_container::Result<()> {
    use std::io::Read;
    use zt_container::Error;
    let mut stream = zt_formats::zstd_part_then(src, skip, dst)?;
    let mut tail = Vec::with_capacity(24);
    (&mut stream)
        .take(24)
        .read_to_end(&mut tail)
        .map_err(|e| Error::invalid(format!("corrupt zstd stream: {e}")))?;
    let len = dst.len() as u64;
    // Either width that gives the size will do: the walk at open told them apart by the
    // header after them (files/torch/streamed.rs), and the end check below reads on.
    let Some(descriptor) = crate::zip::descriptor_closing(&tail, len, |_| true) else {
        return Err(Error::invalid(format!(
            "a record of {len} bytes is not closed by a data descriptor that gives its size \
             ({} bytes into what the zstd stream decodes to)",
            skip.saturating_add(len)
        )));
    };
    let (want, got) = (descriptor.crc32, crc32fast::hash(dst));
    if want != got {
        return Err(Error::checksum(format!(
            "a record's CRC-32 does not match: its data descriptor gives {want:08x}, its \
             {len} bytes {got:08x}"
        )));
    }
    // The archive's end: torch reads the record by its central directory entry, so a
    // directory that disagrees with the record fails there; decoding it costs the few
    // hundred bytes after the last storage.
    let mut end = tail.split_off(descriptor.len as usize);
    let cap = crate::zip::MAX_STREAM_END;
    (&mut stream)
        .take(cap.saturating_sub(end.len() as u64).saturating_add(1))
        .read_to_end(&mut end)
        .map_err(|e| Error::invalid(format!("corrupt zstd stream: {e}")))?;
    if end.len() as u64 <= cap {
        let end_at = skip.saturating_add(len).saturating_add(descriptor.len);
        crate::zip::check_stream_end(&end, end_at, (skip, len, want))?;
    }
    Ok(())
}

/// Without zstd: decoding is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_record_into(_src: &[u8], _skip: u64, _dst: &mut [u8]) -> Result<()> {
    without_zstd()
}

/// Without zstd: decoding is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_part_into(_src: &[u8], _skip: u64, _dst: &mut [u8]) -> Result<()> {
    without_zstd()
}

#[cfg(not(feature = "zstd"))]
fn without_zstd<T>() -> Result<T> {
    Err(zt_container::Error::unsupported(
        "zstd component: this build of ztensor has no zstd support (feature \"zstd\")",
    ))
}

/// Without zstd: decoding is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_decode_into(_src: &[u8], _dst: &mut [u8]) -> Result<()> {
    without_zstd()
}

/// Without zstd: decoding is unsupported.
#[cfg(all(not(feature = "zstd"), feature = "hdf5"))]
pub(crate) fn zstd_decode_with_dict_into(_src: &[u8], _dict: &[u8], _dst: &mut [u8]) -> Result<()> {
    without_zstd()
}

/// Without zstd: decoding v2's seekable zstd is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_seekable_decode_into(_src: &[u8], _dst: &mut [u8]) -> Result<()> {
    without_zstd()
}

/// Without zstd: decoding v2's seekable zstd is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_seekable_decode_frames(
    _stored: &[u8],
    _frames: &[zt_formats::seekable::SeekFrame],
    _chosen: std::ops::Range<usize>,
    _start: u64,
) -> Result<(Vec<u8>, u64)> {
    without_zstd()
}

/// Without zstd: no frame is read, so no size is known.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_frame_content_size(_src: &[u8]) -> Option<u64> {
    None
}

/// Without zstd: decoding is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_decompress_bounded(_src: &[u8], _cap: u64) -> Result<Vec<u8>> {
    without_zstd()
}

/// Without zstd: compressing is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_compress(_data: &[u8], _level: i32) -> Result<Vec<u8>> {
    without_zstd()
}

/// Without zstd: encoding v2's seekable zstd is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_seekable_encode(_data: &[u8], _level: i32) -> Result<Vec<u8>> {
    without_zstd()
}

#[cfg(all(test, feature = "zstd"))]
mod tests {
    use super::*;

    #[test]
    fn frames_decoded_on_every_core_give_the_bytes_and_the_first_error() {
        // Five 1 MiB frames (and a short sixth) of bytes that compress, but not to nothing.
        let data: Vec<u8> = (0..(5 << 20) + 1000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8 & 0x0f)
            .collect();
        let blob = zstd_seekable_encode(&data, 3).unwrap();
        let mut out = vec![0u8; data.len()];
        zstd_seekable_decode_into(&blob, &mut out).unwrap();
        assert!(out == data);
        // Damage frames 1 and 3: the error is frame 1's, as a sequential decode says.
        let frames = zt_formats::seekable::parse_seek_table(&blob, data.len() as u64).unwrap();
        let mut bad = blob.clone();
        for k in [1, 3] {
            let at = (frames[k].offset + frames[k].compressed / 2) as usize;
            bad[at] ^= 0xff;
        }
        let e = zstd_seekable_decode_into(&bad, &mut out).unwrap_err();
        assert!(e.message().contains("frame 1"), "{e}");
    }
}
