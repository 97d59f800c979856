//! Blosc, HDF5 filter 32001 (hdf5-blosc, shipped by hdf5plugin and PyTables): each HDF5
//! chunk is one Blosc 1 chunk, decoded as c-blosc 1.x decodes it.
//!
//! A Blosc chunk starts with a 16-byte header: the format version (2), the codec's format
//! version (1), flags, the element size, then three little-endian u32s: the decoded size,
//! the block size and the stored size. After it come either the bytes as they are (flag
//! 0x02), or a table of each block's offset in the chunk (a u32 each) and the blocks.
//!
//! A block is one stream, or one stream a byte of the element (the byte planes of a shuffle)
//! when it may be split: flag 0x10 clear, elements of at most 16 bytes, at least 128 of them
//! in a block, and not the shorter last block. Each stream is its stored size (a u32) and
//! its bytes: as they are when that size is the stream's, else compressed by the codec the
//! flags' top three bits name (0 BloscLZ, 1 LZ4, 2 Snappy, 3 zlib, 4 Zstandard). Then the
//! block's byte shuffle (flag 0x01) or bit shuffle (flag 0x04) is undone.
//!
//! Every offset and size is checked against the stored bytes and every count against the
//! output: a hostile chunk gives an error naming the block and stream, never a read past
//! the chunk or a write past the block.

use zt_container::{Error, Result};

use super::codecs::{bit_untranspose, inflate, lz4_block_into, unshuffle};

/// The header's length.
const HEADER: usize = 16;
/// Flags: the byte shuffle, the bytes stored as they are, the bit shuffle, a bit c-blosc
/// 1.x refuses ("from the future"), and "blocks are not split into streams".
const SHUFFLE: u8 = 0x01;
const MEMCPYED: u8 = 0x02;
const BITSHUFFLE: u8 = 0x04;
const FUTURE: u8 = 0x08;
const DONT_SPLIT: u8 = 0x10;
/// c-blosc's largest block, `BLOSC_MAX_BLOCKSIZE`.
const MAX_BLOCK: usize = (i32::MAX as usize - 255 * 4) / 3;
/// A block splits into one stream a byte only for elements of at most this many bytes...
const MAX_SPLITS: usize = 16;
/// ...and at least this many elements in the block.
const MIN_SPLIT_ELEMENTS: usize = 128;
/// BloscLZ's longest near distance; a far one counts from it.
const MAX_DISTANCE: usize = 8191;

/// The codec of a chunk's streams.
#[derive(Clone, Copy)]
pub(super) enum Codec {
    BloscLz,
    Lz4,
    Snappy,
    Zlib,
    Zstd,
}

/// Decodes the Blosc chunk `data` into `out`, which it must fill exactly. Bytes past the
/// stored size the header gives are ignored, as c-blosc ignores them.
pub(super) fn decode_into(data: &[u8], out: &mut [u8]) -> Result<()> {
    decode(data, out).map_err(|e| placed(e, "blosc"))
}

/// `e` with `what` (the filter, a block, a stream) before its message.
pub(super) fn placed(e: Error, what: impl std::fmt::Display) -> Error {
    Error::new(e.kind(), format!("{what}: {}", e.message()))
}

/// [`decode_into`], its errors not yet placed.
pub(super) fn decode(data: &[u8], out: &mut [u8]) -> Result<()> {
    let head = data
        .first_chunk::<HEADER>()
        .ok_or_else(|| bad("a chunk shorter than its 16-byte header".to_owned()))?;
    let [version, codec_version, flags, element, ..] = *head;
    let word = |at: usize| {
        let bytes = [head[at], head[at + 1], head[at + 2], head[at + 3]];
        u32::from_le_bytes(bytes) as usize
    };
    let (size, block, stored) = (word(4), word(8), word(12));
    if version != 2 {
        return Err(Error::unsupported(format!(
            "format version {version} (c-blosc 1.x writes 2)"
        )));
    }
    if size != out.len() {
        return Err(bad(format!(
            "the header gives {size} bytes for a chunk of {}",
            out.len()
        )));
    }
    if size == 0 {
        return Ok(());
    }
    if block == 0 || block > size || block > MAX_BLOCK || element == 0 {
        return Err(bad(format!(
            "a block size of {block} for {size} bytes of {element}-byte elements"
        )));
    }
    if flags & FUTURE != 0 {
        return Err(Error::unsupported(format!(
            "flags {flags:#04x} (bit 0x08 is not in c-blosc 1.x's format)"
        )));
    }
    let data = data
        .get(..stored)
        .filter(|_| stored >= HEADER)
        .ok_or_else(|| {
            bad(format!(
                "the header gives {stored} stored bytes; the chunk holds {}",
                data.len()
            ))
        })?;
    if flags & MEMCPYED != 0 {
        out.copy_from_slice(stored_as_is(data, HEADER, size)?);
        return Ok(());
    }
    let codec = match flags >> 5 {
        0 => Codec::BloscLz,
        1 => Codec::Lz4,
        2 => Codec::Snappy,
        3 => Codec::Zlib,
        4 => Codec::Zstd,
        other => return Err(bad(format!("codec {other} is none of Blosc's"))),
    };
    if codec_version != 1 {
        return Err(Error::unsupported(format!(
            "codec format version {codec_version} (c-blosc 1.x writes 1)"
        )));
    }
    let blocks = size.div_ceil(block);
    let starts = data
        .get(HEADER..)
        .and_then(|table| table.get(..blocks.checked_mul(4)?))
        .ok_or_else(|| {
            bad(format!(
                "{blocks} blocks' offsets do not fit in {stored} stored bytes"
            ))
        })?;
    let element = usize::from(element);
    let shuffled = (flags & SHUFFLE != 0 && element > 1) || flags & BITSHUFFLE != 0;
    // The streams of a shuffled block land in a buffer of planes, and are unshuffled into
    // the output.
    let planes = || -> Result<Vec<u8>> {
        let mut planes = Vec::new();
        if shuffled {
            planes
                .try_reserve_exact(block)
                .map_err(|_| Error::out_of_memory("a Blosc block's buffer"))?;
            planes.resize(block, 0);
        }
        Ok(planes)
    };
    let one = |j: usize, dst: &mut [u8], start: &[u8], planes: &mut Vec<u8>| {
        let start = u32::from_le_bytes([start[0], start[1], start[2], start[3]]) as usize;
        let layout = Layout {
            element,
            flags,
            codec,
            last_and_short: dst.len() < block,
        };
        let planes = planes.get_mut(..dst.len()).unwrap_or_default();
        decode_block(data, start, layout, dst, planes)
            .map_err(|e| placed(e, format_args!("block {j}")))
    };
    if size >= PARALLEL_BYTES && blocks >= 4 && crate::pool::threads() > 1 {
        // A large chunk's blocks on the pool, each task with its own planes.
        use rayon::prelude::*;
        return crate::pool::install(|| {
            out.par_chunks_mut(block)
                .zip(starts.par_chunks_exact(4))
                .enumerate()
                .try_for_each_init(
                    || planes().ok(),
                    |held, (j, (dst, start))| {
                        let held = held
                            .as_mut()
                            .ok_or_else(|| Error::out_of_memory("a Blosc block's buffer"))?;
                        one(j, dst, start, held)
                    },
                )
        });
    }
    let mut held = planes()?;
    for (j, (dst, start)) in out
        .chunks_mut(block)
        .zip(starts.chunks_exact(4))
        .enumerate()
    {
        one(j, dst, start, &mut held)?;
    }
    Ok(())
}

/// Chunks of at least this many decoded bytes (and four blocks) decode their blocks on the
/// pool: a chunk this size takes about a millisecond on one core.
pub(super) const PARALLEL_BYTES: usize = 1 << 20;

/// The bytes after a chunk's header of `header` bytes, stored as they are (flag 0x02): all of
/// the chunk's `size` bytes, and nothing else, in `data` (the chunk, cut to its stored size).
pub(super) fn stored_as_is(data: &[u8], header: usize, size: usize) -> Result<&[u8]> {
    data.get(header..)
        .filter(|body| body.len() == size)
        .ok_or_else(|| {
            bad(format!(
                "{} bytes stored as they are for {size}",
                data.len().saturating_sub(header)
            ))
        })
}

/// What a block's streams are: the element size, the chunk's flags and codec, and whether
/// this is the last block and shorter than the others (it is never split).
#[derive(Clone, Copy)]
struct Layout {
    element: usize,
    flags: u8,
    codec: Codec,
    last_and_short: bool,
}

/// Decodes one block whose streams start at `start` in `data` into `dst`, through `planes`
/// (as long as `dst`) when it was shuffled.
fn decode_block(
    data: &[u8],
    start: usize,
    layout: Layout,
    dst: &mut [u8],
    planes: &mut [u8],
) -> Result<()> {
    let Layout {
        element,
        flags,
        codec,
        last_and_short,
    } = layout;
    let byte_shuffled = flags & SHUFFLE != 0 && element > 1;
    let bit_shuffled = !byte_shuffled && flags & BITSHUFFLE != 0 && dst.len() >= element;
    let splits = if flags & DONT_SPLIT == 0
        && element <= MAX_SPLITS
        && dst.len() / element >= MIN_SPLIT_ELEMENTS
        && !last_and_short
    {
        element
    } else {
        1
    };
    if dst.len() % splits != 0 {
        // c-blosc would leave the block's last bytes unwritten; its writer never makes one.
        return Err(bad(format!(
            "{} bytes do not split into {splits} streams",
            dst.len()
        )));
    }
    let target: &mut [u8] = if byte_shuffled || bit_shuffled {
        planes
    } else {
        dst
    };
    let stream_len = target.len() / splits;
    let mut at = start;
    for (s, stream) in target.chunks_mut(stream_len.max(1)).enumerate() {
        let stored = at
            .checked_add(4)
            .and_then(|end| data.get(at..end))
            .ok_or_else(|| {
                bad(format!(
                    "stream {s}'s size at byte {at} lies past the chunk"
                ))
            })?;
        let stored = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]) as usize;
        at += 4;
        let body = at
            .checked_add(stored)
            .and_then(|end| data.get(at..end))
            .ok_or_else(|| {
                bad(format!(
                    "stream {s} of {stored} bytes at byte {at} runs past the chunk"
                ))
            })?;
        if stored == stream.len() {
            stream.copy_from_slice(body);
        } else {
            decode_stream(codec, body, stream)
                .map_err(|e| placed(e, format_args!("stream {s}")))?;
        }
        at += stored;
    }
    if byte_shuffled {
        unshuffle(planes, element, dst);
    } else if bit_shuffled {
        bit_unshuffle(planes, element, dst);
    }
    Ok(())
}

/// Decompresses one stream into `out`, which it must fill exactly.
pub(super) fn decode_stream(codec: Codec, body: &[u8], out: &mut [u8]) -> Result<()> {
    let (name, made) = match codec {
        Codec::BloscLz => ("BloscLZ", blosclz_into(body, out)?),
        Codec::Snappy => {
            let made = snap::raw::Decoder::new()
                .decompress(body, out)
                .map_err(|e| bad(format!("snappy: {e}")))?;
            ("Snappy", made)
        }
        Codec::Lz4 => return lz4_block_into(body, out),
        Codec::Zlib => return inflate(body, out),
        Codec::Zstd => return crate::codec::zstd_decode_into(body, out),
    };
    if made != out.len() {
        return Err(bad(format!(
            "{name} gives {made} bytes for a stream of {}",
            out.len()
        )));
    }
    Ok(())
}

/// An error in a Blosc chunk.
fn bad(what: String) -> Error {
    Error::invalid(what)
}

/// Decodes a BloscLZ stream into `out` as c-blosc's `blosclz_decompress` does; returns the
/// bytes written. Like LZF, items are literal runs (a control byte below 32: that many
/// bytes plus one) and matches (length in the top three bits, 7 meaning more bytes follow,
/// each added while it is 255; distance in the low five bits and the next byte, or, when
/// those are 31 and 255, in the two bytes after, counted from 8191). A match the stream
/// ends on is not copied, as c-blosc's loop stops before copying it.
fn blosclz_into(data: &[u8], out: &mut [u8]) -> Result<usize> {
    let Some(&first) = data.first() else {
        return Ok(0);
    };
    let size = out.len();
    let cut = |ip: usize| bad(format!("BloscLZ: a match cut short at byte {ip}"));
    let (mut ip, mut op) = (1usize, 0usize);
    let mut control = usize::from(first & 31);
    loop {
        if control < 32 {
            let n = control + 1;
            let run = data.get(ip..ip + n).ok_or_else(|| {
                bad(format!(
                    "BloscLZ: a literal run of {n} bytes cut short at byte {ip}"
                ))
            })?;
            out.get_mut(op..op + n)
                .ok_or_else(|| {
                    bad(format!(
                        "BloscLZ: a literal run at byte {op} goes past the stream's {size} bytes"
                    ))
                })?
                .copy_from_slice(run);
            (ip, op) = (ip + n, op + n);
            let Some(&next) = data.get(ip) else { break };
            (control, ip) = (usize::from(next), ip + 1);
            continue;
        }
        let at = ip - 1;
        let mut len = (control >> 5) - 1;
        let near = (control & 31) << 8;
        if len == 6 {
            loop {
                let code = *data
                    .get(ip)
                    .filter(|_| ip + 1 < data.len())
                    .ok_or_else(|| cut(at))?;
                ip += 1;
                len += usize::from(code);
                if code != 255 {
                    break;
                }
            }
        }
        let code = *data
            .get(ip)
            .filter(|_| ip + 1 < data.len())
            .ok_or_else(|| cut(at))?;
        ip += 1;
        len += 3;
        let mut distance = near + usize::from(code) + 1;
        if code == 255 && near == 31 << 8 {
            let far = data
                .get(ip..ip + 2)
                .filter(|_| ip + 1 < data.len())
                .ok_or_else(|| cut(at))?;
            distance = (usize::from(far[0]) << 8 | usize::from(far[1])) + MAX_DISTANCE + 1;
            ip += 2;
        }
        if op + len > out.len() {
            return Err(bad(format!(
                "BloscLZ: a match of {len} bytes at byte {op} goes past the stream's {} bytes",
                out.len()
            )));
        }
        let from = op.checked_sub(distance).ok_or_else(|| {
            bad(format!(
                "BloscLZ: a match at byte {at} reaches {distance} bytes back from byte {op}"
            ))
        })?;
        let Some(&next) = data.get(ip) else { break };
        (control, ip) = (usize::from(next), ip + 1);
        zt_formats::lzf::copy_back_reference(out, from, op, len);
        op += len;
    }
    Ok(op)
}

/// Undoes Blosc's bit shuffle of a block: only a whole multiple of eight elements is
/// shuffled ([`bit_untranspose`]); the bytes after it, or the whole block when the count is
/// not such a multiple (c-blosc's rule for format version 2), are as they are.
fn bit_unshuffle(planes: &[u8], element: usize, out: &mut [u8]) {
    let count = planes.len() / element.max(1);
    let whole = if count % 8 == 0 { count * element } else { 0 };
    if let (Some(o), Some(p)) = (out.get_mut(whole..), planes.get(whole..)) {
        o.copy_from_slice(p);
    }
    if let (Some(planes), Some(out)) = (planes.get(..whole), out.get_mut(..whole)) {
        bit_untranspose(planes, element, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_unshuffle_agrees_with_the_definition() {
        let element = 3;
        for count in [8usize, 16, 13] {
            let values: Vec<u8> = (0..count * element).map(|i| (i * 37 + 5) as u8).collect();
            // A count not a multiple of 8 is left as it is.
            let planes = if count % 8 == 0 {
                crate::chunks::codecs::bit_transpose_by_definition(&values, element)
            } else {
                values.clone()
            };
            let mut out = vec![0u8; values.len()];
            bit_unshuffle(&planes, element, &mut out);
            assert_eq!(out, values, "{count} elements");
        }
    }

    #[test]
    fn blosclz_reads_runs_matches_and_far_matches() {
        // "abc", a match of 6 bytes 3 back, a literal "X".
        let mut out = [0u8; 10];
        let stream = [2, b'a', b'b', b'c', 4 << 5, 2, 0, b'X'];
        assert_eq!(blosclz_into(&stream, &mut out).unwrap(), 10);
        assert_eq!(&out, b"abcabcabcX");
        // A long match: length 7 in the top bits, then 255 and 4 more: 6 + 255 + 4 + 3.
        let mut out = vec![0u8; 1 + 268 + 1];
        let stream = [0, b'z', 7 << 5, 255, 4, 0, 0, b'.'];
        assert_eq!(blosclz_into(&stream, &mut out).unwrap(), 270);
        assert!(out[..269].iter().all(|&b| b == b'z') && out[269] == b'.');
        // A far match: 31 and 255, then two bytes counted from 8191. After 8320 bytes of
        // literals, a match of 3 bytes 8192 + 10 back (10 + 8191 + 1) and a literal "!".
        let mut stream = Vec::new();
        for k in 0..260u32 {
            stream.push(31);
            stream.extend((0..32u32).map(|i| ((k * 32 + i) % 251) as u8));
        }
        let written = 260 * 32;
        stream.extend([1 << 5 | 31, 255, 0, 10, 0, b'!']);
        let mut out = vec![0u8; written + 4];
        assert_eq!(blosclz_into(&stream, &mut out).unwrap(), written + 4);
        let from = written - (8192 + 10);
        assert_eq!(out[written..written + 3], out[from..from + 3].to_vec()[..]);
        assert_eq!(out[written + 3], b'!');
        // A (far) match the stream ends on is not copied, as c-blosc stops before it; a
        // near one cannot end it (c-blosc wants a byte after its distance byte).
        let ends_on_match = &stream[..stream.len() - 2];
        assert_eq!(blosclz_into(ends_on_match, &mut out).unwrap(), written);
        let mut out = [0u8; 10];
        let e = blosclz_into(&[2, b'a', b'b', b'c', 4 << 5, 2], &mut out).unwrap_err();
        assert!(e.to_string().contains("a match cut short at byte 4"), "{e}");
    }

    /// A Blosc chunk of `element`-byte elements, `flags` (the codec in the top bits), blocks
    /// of `block` bytes, each block given as its streams' stored bytes.
    fn chunk(
        flags: u8,
        element: u8,
        size: usize,
        block: usize,
        blocks: &[Vec<Vec<u8>>],
    ) -> Vec<u8> {
        let table = HEADER + 4 * blocks.len();
        let mut body = Vec::new();
        let mut starts = Vec::new();
        for streams in blocks {
            starts.extend(((table + body.len()) as u32).to_le_bytes());
            for stream in streams {
                body.extend((stream.len() as u32).to_le_bytes());
                body.extend(stream);
            }
        }
        let mut out = vec![2, 1, flags, element];
        for word in [size, block, table + body.len()] {
            out.extend((word as u32).to_le_bytes());
        }
        out.extend(starts);
        out.extend(body);
        out
    }

    #[test]
    fn blocks_streams_and_shuffles_are_undone() {
        // 1000 bytes of u32s in blocks of 512 (128 elements: split into four byte streams)
        // and a last block of 488 (not split), byte-shuffled; streams stored as they are,
        // LZ4 and zlib.
        let values: Vec<u8> = (0..250u32)
            .flat_map(|i| i.wrapping_mul(2654435761).to_le_bytes())
            .collect();
        let mut shuffled = vec![0u8; 1000];
        for (block, out) in values.chunks(512).zip(shuffled.chunks_mut(512)) {
            let n = block.len() / 4;
            for i in 0..n {
                for b in 0..4 {
                    out[b * n + i] = block[i * 4 + b];
                }
            }
        }
        let (first, last) = shuffled.split_at(512);
        let streams: Vec<Vec<u8>> = first.chunks(128).map(<[u8]>::to_vec).collect();
        let raw = chunk(
            SHUFFLE,
            4,
            1000,
            512,
            &[streams.clone(), vec![last.to_vec()]],
        );
        let mut out = vec![0u8; 1000];
        decode_into(&raw, &mut out).unwrap();
        assert_eq!(out, values);
        let lz4: Vec<Vec<u8>> = streams
            .iter()
            .map(|s| lz4_flex::block::compress(s))
            .collect();
        let packed = chunk(
            SHUFFLE | 1 << 5,
            4,
            1000,
            512,
            &[lz4, vec![lz4_flex::block::compress(last)]],
        );
        out.fill(0);
        decode_into(&packed, &mut out).unwrap();
        assert_eq!(out, values);
        // Flag 0x10: one stream a block.
        let unsplit = chunk(
            SHUFFLE | DONT_SPLIT,
            4,
            1000,
            512,
            &[vec![first.to_vec()], vec![last.to_vec()]],
        );
        out.fill(0);
        decode_into(&unsplit, &mut out).unwrap();
        assert_eq!(out, values);
        // Stored as they are: the header, then the bytes.
        let mut memcpyed = vec![2, 1, MEMCPYED, 4];
        for word in [1000u32, 512, 1016] {
            memcpyed.extend(word.to_le_bytes());
        }
        memcpyed.extend(&values);
        out.fill(0);
        decode_into(&memcpyed, &mut out).unwrap();
        assert_eq!(out, values);
        let e = decode_into(&memcpyed[..1015], &mut out)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("blosc: the header gives 1016 stored bytes; the chunk holds 1015"),
            "{e}"
        );
    }

    /// A chunk past [`PARALLEL_BYTES`] decodes its blocks on the pool (when it has two
    /// threads) into the same bytes, and a damaged block is named.
    #[test]
    fn a_large_chunk_decodes_block_by_block_in_parallel() {
        let (block, blocks) = (256 << 10, 6);
        let size = block * blocks - 1000;
        let values: Vec<u8> = (0..size).map(|i| (i / 7 % 251) as u8).collect();
        let streams: Vec<Vec<Vec<u8>>> = values
            .chunks(block)
            .map(|b| vec![lz4_flex::block::compress(b)])
            .collect();
        let raw = chunk(DONT_SPLIT | 1 << 5, 1, size, block, &streams);
        let mut out = vec![0u8; size];
        decode_into(&raw, &mut out).unwrap();
        assert!(out == values);
        let mut damaged = streams;
        damaged[4][0].truncate(100);
        let raw = chunk(DONT_SPLIT | 1 << 5, 1, size, block, &damaged);
        let e = decode_into(&raw, &mut out).unwrap_err().to_string();
        assert!(e.contains("blosc: block 4: stream 0"), "{e}");
    }

    #[test]
    fn a_hostile_chunk_is_refused_with_its_place() {
        let mut out = vec![0u8; 64];
        let mut message = |raw: &[u8]| decode_into(raw, &mut out).unwrap_err().to_string();
        let plain = |streams: Vec<Vec<u8>>| chunk(0, 1, 64, 64, &[streams]);
        let good = plain(vec![vec![7; 64]]);
        assert!(message(&good[..15]).contains("blosc: a chunk shorter than its 16-byte header"));
        // One field of the header or the block table changed at a time: (where, new bytes,
        // the error).
        let damages: [(usize, &[u8], &str); 9] = [
            (0, &[3], "blosc: format version 3"),
            (4, &[65], "the header gives 65 bytes for a chunk of 64"),
            (8, &[0], "a block size of 0 for 64 bytes"),
            (2, &[FUTURE], "flags 0x08"),
            (2, &[6 << 5], "codec 6 is none of Blosc's"),
            (1, &[2], "codec format version 2"),
            (
                12,
                &[200],
                "the header gives 200 stored bytes; the chunk holds 88",
            ),
            // A block's offset past the stored bytes; a stream's size running past them.
            (
                16,
                &1000u32.to_le_bytes(),
                "blosc: block 0: stream 0's size at byte 1000 lies past the chunk",
            ),
            (
                20,
                &65u32.to_le_bytes(),
                "block 0: stream 0 of 65 bytes at byte 24 runs past the chunk",
            ),
        ];
        for (at, bytes, want) in damages {
            let mut v = good.clone();
            v[at..at + bytes.len()].copy_from_slice(bytes);
            let e = message(&v);
            assert!(e.contains(want), "{at}: {e}");
        }
        let snappy = |data: &[u8]| {
            let stream = snap::raw::Encoder::new().compress_vec(data).unwrap();
            let mut v = plain(vec![stream]);
            v[2] = 2 << 5;
            v
        };
        let mut good_out = vec![0u8; 64];
        let data: Vec<u8> = (0..64u8).map(|i| i / 5).collect();
        decode_into(&snappy(&data), &mut good_out).unwrap();
        assert_eq!(good_out, data);
        let e = message(&snappy(&data[..40]));
        assert!(
            e.contains("stream 0: Snappy gives 40 bytes for a stream of 64"),
            "{e}"
        );
        let e = message(&snappy(&[data.as_slice(), &[1]].concat()));
        assert!(e.contains("stream 0: snappy: "), "{e}");
        // Too many blocks for their offsets to fit.
        let mut v = good.clone();
        v[8] = 1;
        v[12..16].copy_from_slice(&100u32.to_le_bytes());
        v.resize(100, 0);
        let e = message(&v);
        assert!(
            e.contains("64 blocks' offsets do not fit in 100 stored bytes"),
            "{e}"
        );
        // A stream that decodes short, and one that is not LZ4 at all.
        let lz4 = |data: &[u8]| {
            let mut v = plain(vec![lz4_flex::block::compress(data)]);
            v[2] = 1 << 5;
            v
        };
        let e = message(&lz4(&[1; 60]));
        assert!(
            e.contains("blosc: block 0: stream 0: the block decompresses to 60 bytes, not 64"),
            "{e}"
        );
        let e = message(&lz4(&[]));
        assert!(
            e.starts_with("invalid file: blosc: block 0: stream 0: "),
            "{e}"
        );
        // A block whose byte count does not split into its streams.
        let mut out = vec![0u8; 514];
        let odd = chunk(SHUFFLE, 2, 514, 514, &[vec![vec![0; 257], vec![0; 257]]]);
        decode_into(&odd, &mut out).unwrap();
        let odd = chunk(SHUFFLE, 4, 514, 514, &[vec![vec![0; 514]]]);
        let e = decode_into(&odd, &mut out).unwrap_err().to_string();
        assert!(
            e.contains("block 0: 514 bytes do not split into 4 streams"),
            "{e}"
        );
    }

    #[test]
    fn blosclz_refuses_what_lies_outside() {
        let mut out = [0u8; 8];
        let e = blosclz_into(&[2, b'a', b'b'], &mut out).unwrap_err();
        assert!(
            e.to_string()
                .contains("literal run of 3 bytes cut short at byte 1"),
            "{e}"
        );
        let e = blosclz_into(&[0, b'a', 1 << 5, 5, 0], &mut out).unwrap_err();
        assert!(
            e.to_string().contains("reaches 6 bytes back from byte 1"),
            "{e}"
        );
        let e = blosclz_into(&[0, b'a', 7 << 5, 0, 0, 0], &mut out).unwrap_err();
        assert!(
            e.to_string()
                .contains("a match of 9 bytes at byte 1 goes past"),
            "{e}"
        );
        let e = blosclz_into(&[0, b'a', 1 << 5], &mut out).unwrap_err();
        assert!(e.to_string().contains("a match cut short at byte 2"), "{e}");
        let e = blosclz_into(&[7, 1, 2, 3, 4, 5, 6, 7, 8, 0, 9], &mut out).unwrap_err();
        assert!(
            e.to_string().contains("goes past the stream's 8 bytes"),
            "{e}"
        );
    }
}
