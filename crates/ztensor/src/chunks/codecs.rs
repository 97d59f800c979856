//! The codecs of HDF5's filters that turn one buffer into another of the chunk's size:
//! deflate (zlib), bzip2, LZ4's block framing, the byte shuffle and the bitshuffle library's
//! bit transposition, and filling a chunk with copies of one element. Each writes into a
//! slice it is given and must fill it exactly; Blosc ([`super::blosc`]), Blosc2
//! ([`super::blosc2`]) and the bitshuffle filter ([`super::bitshuffle`]) take them too.

use zt_container::{Error, Result};

/// Inflates one zlib stream (HDF5's deflate filter) into `out`, which it must fill exactly;
/// bytes after the stream's end are ignored, as HDF5 ignores them.
pub(super) fn inflate(data: &[u8], out: &mut [u8]) -> Result<()> {
    use flate2::{Decompress, FlushDecompress, Status};
    let mut inflater = Decompress::new(true);
    let status = inflater
        .decompress(data, out, FlushDecompress::Finish)
        .map_err(|e| Error::invalid(format!("deflate: {e}")))?;
    let stop = Stop {
        ended: status == Status::StreamEnd,
        made: inflater.total_out(),
        used: inflater.total_in(),
    };
    stop.filled("deflate", "inflates", data, out)
}

/// Decompresses one bzip2 stream (the bzip2 filter) into `out`, which it must fill exactly;
/// bytes after the stream's end are ignored, as the filter ignores them.
pub(super) fn bunzip(data: &[u8], out: &mut [u8]) -> Result<()> {
    use bzip2::{Decompress, Status};
    let mut decoder = Decompress::new(false);
    let status = decoder
        .decompress(data, out)
        // Its messages start "bzip2: " already.
        .map_err(|e| Error::invalid(e.to_string()))?;
    let stop = Stop {
        ended: status == Status::StreamEnd,
        made: decoder.total_out(),
        used: decoder.total_in(),
    };
    stop.filled("bzip2", "decompresses", data, out)
}

/// Where a stream decoder given the whole input and the chunk's buffer stopped.
struct Stop {
    /// Whether it reached the stream's end.
    ended: bool,
    /// Bytes written and read.
    made: u64,
    used: u64,
}

impl Stop {
    /// Whether the stream filled `out` exactly, and if not, which way it missed: the message
    /// names the `codec` and what its stream does (`verb`: "inflates").
    fn filled(&self, codec: &str, verb: &str, data: &[u8], out: &[u8]) -> Result<()> {
        let (size, made) = (out.len(), self.made);
        let missed = |how: String| Err(Error::invalid(format!("{codec}: {how}")));
        match self.ended {
            true if made == size as u64 => Ok(()),
            true => missed(format!("the chunk {verb} to {made} bytes, not {size}")),
            // Not at the stream's end: either the output is full and more would follow, or
            // the input ran out first.
            false if made == size as u64 && self.used < data.len() as u64 => {
                missed(format!("the chunk {verb} to more than {size} bytes"))
            }
            false => missed(format!(
                "the stream ends after {made} of the chunk's {size} bytes"
            )),
        }
    }
}

/// Decodes the LZ4 filter's framing into `out`: the chunk's size (8 bytes) and the block size
/// (4 bytes), big-endian, then each block of that many bytes (the last one shorter) as its
/// stored size (4 bytes, big-endian) and its bytes, an LZ4 block, or the block as it is when
/// its stored size is its size (LZ4 could not shrink it). Bytes after the last block are
/// ignored, as the filter ignores them.
pub(super) fn lz4_blocks(data: &[u8], out: &mut [u8]) -> Result<()> {
    let (size, rest) = data
        .split_first_chunk::<8>()
        .ok_or_else(|| Error::invalid("lz4: a chunk shorter than its 12-byte header"))?;
    let (block, mut rest) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| Error::invalid("lz4: a chunk shorter than its 12-byte header"))?;
    let size = u64::from_be_bytes(*size);
    if size != out.len() as u64 {
        return Err(Error::invalid(format!(
            "lz4: the header gives {size} bytes for a chunk of {}",
            out.len()
        )));
    }
    // A block size larger than the chunk means one block, as the filter reads it.
    let block = usize::try_from(u32::from_be_bytes(*block))
        .unwrap_or(usize::MAX)
        .min(out.len());
    if block == 0 && !out.is_empty() {
        return Err(Error::invalid("lz4: a block size of 0"));
    }
    for (i, piece) in out.chunks_mut(block.max(1)).enumerate() {
        let (stored, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| Error::invalid(format!("lz4: the chunk ends before block {i}")))?;
        let stored = u32::from_be_bytes(*stored) as usize;
        let (body, tail) = tail.split_at_checked(stored).ok_or_else(|| {
            Error::invalid(format!(
                "lz4: block {i} of {stored} stored bytes runs past the chunk's end"
            ))
        })?;
        if stored == piece.len() {
            piece.copy_from_slice(body);
        } else {
            lz4_block_into(body, piece)
                .map_err(|e| Error::new(e.kind(), format!("lz4: block {i}: {}", e.message())))?;
        }
        rest = tail;
    }
    Ok(())
}

/// Decodes one LZ4 block (no frame) into `out`, which it must fill exactly.
pub(super) fn lz4_block_into(data: &[u8], out: &mut [u8]) -> Result<()> {
    let made =
        lz4_flex::block::decompress_into(data, out).map_err(|e| Error::invalid(e.to_string()))?;
    if made != out.len() {
        return Err(Error::invalid(format!(
            "the block decompresses to {made} bytes, not {}",
            out.len()
        )));
    }
    Ok(())
}

/// Undoes HDF5's shuffle filter: `data` holds byte 0 of every `n`-byte element, then byte 1
/// of every element, and so on; `out` (as long as `data`) gets the elements back. The tail
/// that does not fill a whole element stays where it was, as HDF5 leaves it.
pub(super) fn unshuffle(data: &[u8], n: usize, out: &mut [u8]) {
    let n = n.max(1);
    let count = data.len().min(out.len()) / n;
    let whole = count * n;
    if let (Some(o), Some(d)) = (out.get_mut(whole..), data.get(whole..)) {
        o.copy_from_slice(d);
    }
    let (Some(planes), Some(out)) = (data.get(..whole), out.get_mut(..whole)) else {
        return;
    };
    if count == 0 {
        return;
    }
    // Element sizes of the types HDF5 stores get a loop of their own, so that the element
    // is written whole and the compiler knows `N`; a byte at a time was a quarter of the
    // time of reading a shuffled, deflated dataset.
    match n {
        1 => out.copy_from_slice(planes),
        2 => interleave::<2>(planes, count, out),
        4 => interleave::<4>(planes, count, out),
        8 => interleave::<8>(planes, count, out),
        _ => {
            for (b, plane) in planes.chunks_exact(count).enumerate() {
                for (slot, &byte) in out.iter_mut().skip(b).step_by(n).zip(plane) {
                    *slot = byte;
                }
            }
        }
    }
}

/// [`unshuffle`] for elements of `N` bytes: `planes` is `N` planes of `count` bytes, `out`
/// `count` elements.
fn interleave<const N: usize>(planes: &[u8], count: usize, out: &mut [u8]) {
    // Blocks of 64 elements: each plane's block is read in one run, and the block of
    // elements written in one run, while both stay in the L1 cache.
    const BLOCK: usize = 64;
    let mut at = 0;
    for elements in out.chunks_mut(BLOCK * N) {
        let len = elements.len() / N;
        let mut block = [[0u8; N]; BLOCK];
        for (b, plane) in planes.chunks_exact(count).enumerate().take(N) {
            let Some(run) = plane.get(at..at + len) else {
                return;
            };
            for (element, &byte) in block.iter_mut().zip(run) {
                element[b] = byte;
            }
        }
        for (dst, element) in elements.chunks_exact_mut(N).zip(&block) {
            dst.copy_from_slice(element);
        }
        at += len;
    }
}

/// Undoes the bitshuffle library's bit transposition (`bshuf_untrans_bit_elem`), which
/// c-blosc and the bitshuffle filter both use: `planes` holds, for each bit `b` of each byte
/// `j` of an element, one bit an element (bit `i % 8` of byte `i / 8` for element `i`), plane
/// `8 * j + b` after plane `8 * j + b - 1`. `planes` and `out` hold the same whole multiple of
/// eight elements; anything else is left to the caller, who copies such tails as they are.
pub(super) fn bit_untranspose(planes: &[u8], element: usize, out: &mut [u8]) {
    let element = element.max(1);
    let rows = planes.len().min(out.len()) / (8 * element);
    if rows == 0 {
        return;
    }
    let whole = rows * 8 * element;
    let (Some(planes), Some(out)) = (planes.get(..whole), out.get_mut(..whole)) else {
        return;
    };
    // For each byte `j` of the element and each eight elements: the eight planes' bytes for
    // those elements, an 8x8 bit matrix, transposed into the elements' eight bytes `j`.
    for (j, eight_planes) in planes.chunks_exact(8 * rows).enumerate() {
        let p: [&[u8]; 8] = std::array::from_fn(|b| &eight_planes[b * rows..(b + 1) * rows]);
        for (r, elements) in out.chunks_exact_mut(8 * element).enumerate() {
            let matrix = u64::from_le_bytes([
                p[0][r], p[1][r], p[2][r], p[3][r], p[4][r], p[5][r], p[6][r], p[7][r],
            ]);
            let bytes = transpose_bits(matrix).to_le_bytes();
            for (slot, byte) in elements.iter_mut().skip(j).step_by(element).zip(bytes) {
                *slot = byte;
            }
        }
    }
}

/// Transposes the 8x8 bit matrix `x` (row `r` its byte `r`, column `c` bit `c` of a row):
/// bit `c` of byte `r` becomes bit `r` of byte `c`. Three rounds of swapping the
/// off-diagonal blocks of 1x1, 2x2 and 4x4 bits.
fn transpose_bits(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x ^= t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x ^= t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^ t ^ (t << 28)
}

/// Fills `dst` with copies of one element, `fill` (zeros when it is empty), doubling what is
/// done with each copy rather than writing element by element.
pub(super) fn fill_elements(dst: &mut [u8], fill: &[u8]) -> Result<()> {
    if fill.is_empty() {
        dst.fill(0);
        return Ok(());
    }
    if dst.len() % fill.len() != 0 {
        return Err(Error::invalid(format!(
            "a fill value of {} bytes for {} bytes of elements",
            fill.len(),
            dst.len()
        )));
    }
    let Some(first) = dst.get_mut(..fill.len()) else {
        return Ok(());
    };
    first.copy_from_slice(fill);
    let mut done = fill.len();
    while done < dst.len() {
        let n = done.min(dst.len() - done);
        dst.copy_within(..n, done);
        done += n;
    }
    Ok(())
}

/// The bitshuffle library's transposition by its definition, for tests: `values` holds a
/// whole multiple of eight elements of `element` bytes; plane `8 * j + b` of the result holds
/// bit `b` of byte `j` of each element, element `i` at bit `i % 8` of the plane's byte `i / 8`.
#[cfg(test)]
pub(super) fn bit_transpose_by_definition(values: &[u8], element: usize) -> Vec<u8> {
    let count = values.len() / element;
    let rows = count / 8;
    let mut planes = vec![0u8; values.len()];
    for i in 0..count {
        for j in 0..element {
            for b in 0..8 {
                let bit = values[i * element + j] >> b & 1;
                planes[(8 * j + b) * rows + i / 8] |= bit << (i % 8);
            }
        }
    }
    planes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_untranspose_agrees_with_the_definition() {
        // Elements of 1 to 8 bytes; one row of eight, three and seventeen.
        for element in [1usize, 2, 3, 4, 5, 8] {
            for count in [8usize, 24, 136] {
                let values: Vec<u8> = (0..count * element)
                    .map(|i| (i * 37 + i / 5) as u8)
                    .collect();
                let planes = bit_transpose_by_definition(&values, element);
                let mut out = vec![0u8; values.len()];
                bit_untranspose(&planes, element, &mut out);
                assert_eq!(out, values, "{count} elements of {element} bytes");
            }
        }
    }

    #[test]
    fn transpose_bits_agrees_with_the_definition() {
        let mut x = 0x0123_4567_89ab_cdefu64;
        for _ in 0..50 {
            let t = transpose_bits(x);
            for r in 0..8 {
                for c in 0..8 {
                    assert_eq!(t >> (8 * c + r) & 1, x >> (8 * r + c) & 1);
                }
            }
            x = x.rotate_left(13).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
}
