//! The bitshuffle library's HDF5 filter (32008; in hdf5plugin, and written by the Dectris
//! detectors' files): a chunk's elements bit-transposed a block at a time, and each block
//! optionally LZ4- or Zstandard-compressed. Follows `bshuf_h5filter.c` and
//! `bshuf_blocked_wrap_fun`:
//!
//! - The filter's parameters: the library's version (two slots), the element size, the
//!   block size in elements (0 or absent: about 8 KiB's worth), the compression (2 LZ4,
//!   3 Zstandard; any other value or none: no compression, as the filter reads it) and the
//!   writer's level.
//! - Uncompressed, the chunk is the transposed blocks as they are. Compressed, it starts with
//!   the chunk's size (8 bytes) and the block size in bytes (4 bytes, which overrides the
//!   parameter), big-endian; then each block is its stored size (4 bytes, big-endian) and its
//!   compressed bytes.
//! - Blocks hold `block` elements, a multiple of 8; the last holds the rest rounded down to a
//!   multiple of 8; the last `count % 8` elements follow as they are.

use zt_container::{Error, Result};

use super::codecs::{bit_untranspose, lz4_block_into};

/// The compression parameter's values for LZ4 and Zstandard.
const COMPRESS_LZ4: u32 = 2;
const COMPRESS_ZSTD: u32 = 3;
/// A block's element count is a multiple of this; so many elements transpose as one.
const BLOCKED_MULT: usize = 8;
/// The default block's size in bytes (`BSHUF_TARGET_BLOCK_SIZE_B`), and the least default
/// block in elements (`BSHUF_MIN_RECOMMEND_BLOCK`).
const TARGET_BLOCK_BYTES: usize = 8192;
const MIN_DEFAULT_BLOCK: usize = 128;

/// Which codec a compressed chunk's blocks use.
#[derive(Clone, Copy)]
enum Codec {
    Lz4,
    Zstd,
}

/// Decodes one chunk through the bitshuffle filter with its parameters `params` into `out`,
/// which it must fill exactly. Bytes after the last element are ignored, as the filter
/// ignores them.
pub(super) fn decode_into(data: &[u8], params: &[u32], out: &mut [u8]) -> Result<()> {
    let bad = |what: String| Error::invalid(format!("bitshuffle: {what}"));
    let &[_, _, element, ref options @ ..] = params else {
        return Err(bad(format!(
            "{} filter parameters, not the 3 or more the filter needs",
            params.len()
        )));
    };
    if element == 0 {
        return Err(bad("an element size of 0".into()));
    }
    let element = element as usize;
    let codec = match options.get(1) {
        Some(&COMPRESS_LZ4) => Some(Codec::Lz4),
        Some(&COMPRESS_ZSTD) => Some(Codec::Zstd),
        _ => None,
    };
    let mut block = options.first().map_or(0, |&b| b as usize);
    let mut body = data;
    if codec.is_some() {
        let (size, rest) = data
            .split_first_chunk::<8>()
            .ok_or_else(|| bad("a chunk shorter than its 12-byte header".into()))?;
        let (block_bytes, rest) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| bad("a chunk shorter than its 12-byte header".into()))?;
        let size = u64::from_be_bytes(*size);
        if size != out.len() as u64 {
            return Err(bad(format!(
                "the header gives {size} bytes for a chunk of {}",
                out.len()
            )));
        }
        block = u32::from_be_bytes(*block_bytes) as usize / element;
        body = rest;
    } else if data.len() != out.len() {
        return Err(bad(format!(
            "{} bytes stored for an uncompressed chunk of {}",
            data.len(),
            out.len()
        )));
    }
    if out.len() % element != 0 {
        return Err(bad(format!(
            "a chunk of {} bytes is not a whole number of {element}-byte elements",
            out.len()
        )));
    }
    if block == 0 {
        block = default_block(element);
    }
    if block % BLOCKED_MULT != 0 {
        return Err(bad(format!(
            "a block of {block} elements, not a multiple of {BLOCKED_MULT}"
        )));
    }
    let count = out.len() / element;
    let transposed = (count - count % BLOCKED_MULT) * element;
    let (blocks, tail) = out.split_at_mut(transposed);
    // A block larger than the chunk is one block of the chunk's transposed elements.
    let block_len = block.saturating_mul(element).min(transposed).max(1);
    let mut at = 0usize;
    let mut unpacked = Vec::new();
    for (i, piece) in blocks.chunks_mut(block_len).enumerate() {
        let place =
            |e: Error| Error::new(e.kind(), format!("bitshuffle: block {i}: {}", e.message()));
        let Some(codec) = codec else {
            // Within the chunk: its stored bytes are as many as the output's.
            let planes = body
                .get(at..at + piece.len())
                .ok_or_else(|| bad(format!("the chunk ends before block {i}")))?;
            bit_untranspose(planes, element, piece);
            at += piece.len();
            continue;
        };
        let stored = body
            .get(at..)
            .and_then(|rest| rest.first_chunk::<4>())
            .ok_or_else(|| bad(format!("the chunk ends before block {i}")))?;
        let stored = u32::from_be_bytes(*stored) as usize;
        let start = at + 4;
        let packed = start
            .checked_add(stored)
            .and_then(|end| body.get(start..end))
            .ok_or_else(|| {
                bad(format!(
                    "block {i} of {stored} stored bytes runs past the chunk's end"
                ))
            })?;
        if unpacked.len() != piece.len() {
            // The first block, or the shorter last one: never more than one block's bytes,
            // themselves at most the chunk's.
            unpacked.clear();
            unpacked
                .try_reserve_exact(piece.len())
                .map_err(|_| Error::out_of_memory("a bitshuffle block"))?;
            unpacked.resize(piece.len(), 0);
        }
        match codec {
            Codec::Lz4 => lz4_block_into(packed, &mut unpacked),
            Codec::Zstd => crate::codec::zstd_decode_into(packed, &mut unpacked),
        }
        .map_err(place)?;
        bit_untranspose(&unpacked, element, piece);
        at = start + stored;
    }
    let rest = body
        .get(at..)
        .and_then(|rest| rest.get(..tail.len()))
        .ok_or_else(|| {
            bad(format!(
                "the chunk ends before its last {} elements, stored as they are",
                count % BLOCKED_MULT
            ))
        })?;
    tail.copy_from_slice(rest);
    Ok(())
}

/// The block size in elements the filter picks when none is given (`bshuf_default_block_size`,
/// which the library keeps the same in every version): about 8 KiB, a multiple of 8, at
/// least 128 elements.
fn default_block(element: usize) -> usize {
    let block = TARGET_BLOCK_BYTES / element / BLOCKED_MULT * BLOCKED_MULT;
    block.max(MIN_DEFAULT_BLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::chunks::codecs::bit_transpose_by_definition as transpose;

    /// `count` elements of `element` bytes written by the filter with blocks of `block`
    /// elements, uncompressed: the blocks' transpositions, then the tail as it is.
    fn shuffled(values: &[u8], element: usize, block: usize) -> Vec<u8> {
        let count = values.len() / element;
        let whole = (count - count % 8) * element;
        let mut out = Vec::new();
        for piece in values[..whole].chunks(block * element) {
            out.extend(transpose(piece, element));
        }
        out.extend(&values[whole..]);
        out
    }

    fn values(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 151 + i / 7) as u8).collect()
    }

    #[test]
    fn uncompressed_blocks_a_short_last_block_and_a_tail() {
        // 8-element blocks of 3-byte elements, 29 elements: three whole blocks, none short,
        // five left as they are; then 16-element blocks: one whole, one of 8, the same tail.
        for block in [8, 16, 0] {
            let values = values(29 * 3);
            let stored = shuffled(
                &values,
                3,
                if block == 0 { default_block(3) } else { block },
            );
            let mut out = vec![0u8; values.len()];
            decode_into(&stored, &[0, 4, 3, block as u32], &mut out).unwrap();
            assert_eq!(out, values, "blocks of {block}");
        }
    }

    #[test]
    fn compressed_blocks_take_their_size_from_the_header() {
        // LZ4 blocks stored by `lz4_flex`, the parameter's block size (64) overridden by the
        // header's (16 elements of 2 bytes): 45 elements are blocks of 16, 16 and 8, and a
        // tail of 5.
        let values = values(45 * 2);
        let mut stored = (values.len() as u64).to_be_bytes().to_vec();
        stored.extend(32u32.to_be_bytes());
        for piece in values[..40 * 2].chunks(32) {
            let packed = lz4_flex::block::compress(&transpose(piece, 2));
            stored.extend((packed.len() as u32).to_be_bytes());
            stored.extend(packed);
        }
        stored.extend(&values[40 * 2..]);
        let mut out = vec![0u8; values.len()];
        decode_into(&stored, &[0, 4, 2, 64, COMPRESS_LZ4], &mut out).unwrap();
        assert_eq!(out, values);
    }

    /// A chunk as the filter writes it: the header and LZ4 blocks when `lz4`, the blocks as
    /// they are when not; `block` elements a block (a multiple of 8).
    fn written(values: &[u8], element: usize, block: usize, lz4: bool) -> Vec<u8> {
        if !lz4 {
            return shuffled(values, element, block);
        }
        let count = values.len() / element;
        let whole = (count - count % 8) * element;
        let mut out = (values.len() as u64).to_be_bytes().to_vec();
        out.extend(((block * element) as u32).to_be_bytes());
        for piece in values[..whole].chunks(block * element) {
            let packed = lz4_flex::block::compress(&transpose(piece, element));
            out.extend((packed.len() as u32).to_be_bytes());
            out.extend(packed);
        }
        out.extend(&values[whole..]);
        out
    }

    proptest::proptest! {
        /// Any elements, element size and block size, compressed or not, read back as they
        /// were written.
        #[test]
        fn what_the_filter_writes_reads_back(
            element in 1usize..10,
            count in 0usize..300,
            eights in 1usize..12,
            lz4 in proptest::prelude::any::<bool>(),
            seed in proptest::prelude::any::<u8>(),
        ) {
            let values: Vec<u8> = (0..count * element)
                .map(|i| (i as u8).wrapping_mul(seed) ^ (i / 13) as u8)
                .collect();
            let stored = written(&values, element, 8 * eights, lz4);
            let compression = if lz4 { COMPRESS_LZ4 } else { 0 };
            let params = [0, 4, element as u32, (8 * eights) as u32, compression];
            let mut out = vec![0u8; values.len()];
            decode_into(&stored, &params, &mut out).unwrap();
            proptest::prop_assert_eq!(out, values);
        }

        /// Any bytes under any parameters: an error or a filled chunk, never a panic.
        #[test]
        fn any_bytes_are_refused_or_read(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            params in proptest::collection::vec(
                proptest::prop_oneof![0u32..20, proptest::prelude::any::<u32>()],
                0..7,
            ),
            len in 0usize..300,
            flip in proptest::prelude::any::<(u16, u8)>(),
        ) {
            let mut out = vec![0u8; len];
            let _ = decode_into(&data, &params, &mut out);
            // And a valid LZ4 chunk with one byte changed.
            let values: Vec<u8> = (0..len).map(|i| (i / 3) as u8).collect();
            let mut stored = written(&values, 1, 64, true);
            let at = usize::from(flip.0) % stored.len();
            stored[at] ^= flip.1;
            let _ = decode_into(&stored, &[0, 4, 1, 64, COMPRESS_LZ4], &mut out);
        }
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let values = values(16 * 4);
        let plain = shuffled(&values, 4, 8);
        let mut framed = (values.len() as u64).to_be_bytes().to_vec();
        framed.extend(32u32.to_be_bytes());
        for piece in values.chunks(32) {
            let packed = lz4_flex::block::compress(&transpose(piece, 4));
            framed.extend((packed.len() as u32).to_be_bytes());
            framed.extend(packed);
        }
        let mut short_size = framed.clone();
        short_size[7] -= 4;
        let mut odd_block = framed.clone();
        odd_block[11] = 12;
        let mut long_block = framed.clone();
        long_block[15] = 200;
        let lz4 = [0, 4, 4, 0, COMPRESS_LZ4];
        let cases: [(&[u8], &[u32], &str); 8] = [
            (&plain, &[0, 4], "2 filter parameters, not the 3 or more"),
            (&plain, &[0, 4, 0], "an element size of 0"),
            (&plain, &[0, 4, 3], "not a whole number of 3-byte elements"),
            (
                &plain[1..],
                &[0, 4, 4],
                "63 bytes stored for an uncompressed chunk of 64",
            ),
            (
                &plain,
                &[0, 4, 4, 12],
                "a block of 12 elements, not a multiple of 8",
            ),
            (
                &short_size,
                &lz4,
                "the header gives 60 bytes for a chunk of 64",
            ),
            (
                &odd_block,
                &lz4,
                "a block of 3 elements, not a multiple of 8",
            ),
            (
                &long_block,
                &lz4,
                "block 0 of 200 stored bytes runs past the chunk's end",
            ),
        ];
        for (stored, params, expected) in cases {
            let mut out = vec![0u8; values.len()];
            let err = decode_into(stored, params, &mut out).unwrap_err();
            assert!(
                err.message().contains(expected),
                "{expected}: {}",
                err.message()
            );
        }
        let mut out = vec![0u8; values.len()];
        for cut in [4, 12, 20, framed.len() - 1] {
            let err = decode_into(&framed[..cut], &lz4, &mut out).unwrap_err();
            assert!(
                err.message().starts_with("bitshuffle: "),
                "{cut}: {}",
                err.message()
            );
        }
    }
}
