//! Blosc2, HDF5 filter 32026 (hdf5plugin's and PyTables' `blosc2_filter.c`): each HDF5
//! chunk is one Blosc2 contiguous frame holding one Blosc2 chunk, decoded as c-blosc2 decodes
//! it.
//!
//! - **The frame** (`README_CFRAME_FORMAT`): a msgpack header whose fields sit at fixed
//!   places (the magic `b2frame`, the header's and the frame's lengths, the decoded and
//!   stored sizes, the element and chunk sizes), then its metalayers, a map from names to
//!   msgpack `bin32` values. After the header come the chunks, then a Blosc2 chunk of 64-bit
//!   chunk offsets counted from the header's end; an offset with its top bit set is a whole
//!   chunk of zeros, NaNs or uninitialised values, not stored.
//! - **The chunk** (`README_CHUNK_FORMAT`): Blosc's 16-byte header, extended to 32 bytes
//!   when flags 0x01 and 0x04 are both set, with six filter slots and their meta bytes, a
//!   user codec's id and Blosc2's own flags; those may make the whole chunk zeros, NaNs, one
//!   repeated value (it follows the header) or uninitialised. Otherwise: the bytes as they are
//!   (flag 0x02), or the block offsets and the blocks. A block is one stream, or one a byte
//!   of the element unless flag 0x10 says not to split; the shorter last block is never
//!   split. A stream's stored size of 0 is a run of zeros, a negative one with the token 1 a
//!   run of the byte `-size`, the stream's size the bytes as they are; any other is
//!   BloscLZ, LZ4, zlib or Zstandard by the flags' top three bits.
//! - **The filters**, undone from the last slot to the first: the byte shuffle (by the slot's
//!   meta byte when it is not 0, else by the element), the bit shuffle (whole groups of eight
//!   elements; the rest as it is), bytedelta (a running sum of each byte plane), delta
//!   (undone last: each element of the first block XOR the one before it, every other block
//!   XOR the first), truncated precision (nothing to undo).
//! - **B2ND** (`README_B2ND_METALAYER`): when the frame has the `b2nd` metalayer (`caterva`
//!   before it was renamed), the chunk holds the HDF5 chunk as blocks of a block shape, the
//!   blocks in row-major order, each padded to the block shape at the chunk's far edges; its
//!   rows are placed into the row-major chunk. Without it (1-D datasets), the chunk is the
//!   HDF5 chunk's bytes.
//!
//! Every size, offset and count is checked against the bytes and the chunk before it is used:
//! a hostile frame gives an error naming the part at fault, never a read past the frame or a
//! write past the chunk.

use zt_container::{Error, Result};

use super::blosc::{self, Codec};
use super::codecs::{bit_untranspose, fill_elements, unshuffle};

/// The frame's magic, after its first two msgpack bytes.
const MAGIC: &[u8; 8] = b"b2frame\0";
/// The fixed part of a frame's header, up to its metalayers (`FRAME_HEADER_MINLEN`).
const FRAME_HEADER: usize = 87;
/// The newest frame format version c-blosc2 reads.
const FRAME_VERSION: u8 = 3;
/// The most metalayers a frame may name (`BLOSC2_MAX_METALAYERS`).
const MAX_METALAYERS: usize = 16;
/// The most dimensions of a B2ND array (`B2ND_MAX_DIM`).
const MAX_DIMS: usize = 16;
/// How many times the array's bytes its B2ND chunk, padded to whole blocks, may hold. The
/// writer's blocks are no larger than the array, so padding less than doubles each dimension;
/// the worst seen (4-D) is 6 times.
const MAX_PADDING: usize = 64;
/// A chunk's short and extended headers.
const HEADER: usize = 16;
const EXTENDED: usize = 32;
/// The newest chunk format version c-blosc2 writes; its bit for variable-length blocks.
const CHUNK_VERSION: u8 = 6;
const VL_BLOCKS: u8 = 0x01;
/// Chunk flags: byte shuffle, bytes as they are, bit shuffle, delta, do not split.
const SHUFFLE_FLAG: u8 = 0x01;
const MEMCPYED: u8 = 0x02;
const BITSHUFFLE_FLAG: u8 = 0x04;
const DELTA_FLAG: u8 = 0x08;
const DONT_SPLIT: u8 = 0x10;
/// Blosc2's own flags: a dictionary, a lazy chunk (only ever in memory), an instrumented
/// codec.
const USE_DICT: u8 = 0x01;
const LAZY: u8 = 0x08;
const INSTRUMENTED: u8 = 0x80;
/// The largest dictionary, `BLOSC2_MAXDICTSIZE`.
const MAX_DICT: usize = 32 * 1024;
/// c-blosc2's largest block, `BLOSC2_MAXBLOCKSIZE`.
const MAX_BLOCK: usize = 536_866_816;
/// Filter ids in a chunk's slots.
const NO_FILTER: u8 = 0;
const SHUFFLE: u8 = 1;
const BITSHUFFLE: u8 = 2;
const DELTA: u8 = 3;
const TRUNC_PREC: u8 = 4;
/// c-blosc2's bytedelta plugin (registered filter 35; 34 is its first version, whose output
/// depends on the writer's SIMD width).
const BYTEDELTA: u8 = 35;

/// Decodes one chunk through the Blosc2 filter with its parameters `params` into `out`,
/// which it must fill exactly.
pub(super) fn decode_into(data: &[u8], params: &[u32], out: &mut [u8]) -> Result<()> {
    decode(data, params, out).map_err(|e| blosc::placed(e, "blosc2"))
}

/// [`decode_into`], its errors not yet placed.
fn decode(data: &[u8], params: &[u32], out: &mut [u8]) -> Result<()> {
    let hdf5_chunk = chunk_shape_of(params)?;
    let frame = Frame::read(data)?;
    let layout = match frame.metalayer(b"b2nd")? {
        Some(meta) => Some(meta),
        None => frame.metalayer(b"caterva")?,
    }
    .map(B2nd::read)
    .transpose()?;
    let Some(b2nd) = layout else {
        // One-dimensional: chunk 0 is the HDF5 chunk's bytes.
        return frame.chunk_into(out, None);
    };
    let shape = &b2nd.shape;
    if let Some(dims) = hdf5_chunk {
        if dims.len() != shape.len() {
            return Err(bad(format!(
                "a B2ND array of {} dimensions under a filter of {}",
                shape.len(),
                dims.len()
            )));
        }
        if let Some(d) = (0..dims.len()).find(|&d| u64::from(dims[d]) != shape[d]) {
            return Err(bad(format!(
                "the B2ND array's dimension {d} is {}, the filter's chunk has {}",
                shape[d], dims[d]
            )));
        }
    }
    let element = frame.element;
    let array_bytes = shape
        .iter()
        .try_fold(element as u64, |n, &d| n.checked_mul(d))
        .filter(|&n| n == out.len() as u64)
        .ok_or_else(|| {
            bad(format!(
                "a B2ND array of shape {shape:?} and {element}-byte elements for a chunk of \
                 {} bytes",
                out.len()
            ))
        })?;
    if array_bytes == 0 {
        return Ok(());
    }
    if (0..shape.len()).any(|d| b2nd.chunk[d] != shape[d]) {
        return Err(Error::unsupported(format!(
            "a B2ND array of shape {shape:?} in chunks of {:?} (the HDF5 filter writes one chunk)",
            b2nd.chunk
        )));
    }
    if (0..shape.len()).any(|d| b2nd.block[d] > shape[d]) {
        // The writer's blocks never exceed the chunk; such a block would make a padded
        // chunk many times the array's size.
        return Err(bad(format!(
            "blocks of {:?} larger than the array's shape {shape:?}",
            b2nd.block
        )));
    }
    let grid = Grid::new(shape, &b2nd.block, element);
    if grid.padded / MAX_PADDING > out.len() {
        // Decoding touches every padded byte: a bound on the work a small chunk can ask for.
        return Err(Error::unsupported(format!(
            "blocks of {:?} pad an array of shape {shape:?} to more than {MAX_PADDING} times \
             its size",
            b2nd.block
        )));
    }
    if grid.padded == out.len() && (1..shape.len()).all(|d| b2nd.block[d] == shape[d]) {
        // Blocks of whole rows and no padding: the chunk's bytes are the array's.
        return frame.chunk_into(out, None);
    }
    frame.chunk_into(out, Some(&grid))
}

/// The HDF5 chunk's dimensions from the filter's parameters, when they hold them (slot 7 the
/// rank, then the dimensions), checked as the filter checks them.
fn chunk_shape_of(params: &[u32]) -> Result<Option<&[u32]>> {
    if params.len() < 4 {
        return Err(bad(format!(
            "{} filter parameters, not the 4 or more the filter needs",
            params.len()
        )));
    }
    let Some(&rank) = params.get(7) else {
        return Ok(None);
    };
    if !(2..=MAX_DIMS as u32).contains(&rank) {
        return Err(bad(format!(
            "a chunk rank of {rank} in the filter's parameters (B2ND takes 2 to {MAX_DIMS})"
        )));
    }
    params.get(8..8 + rank as usize).map(Some).ok_or_else(|| {
        bad(format!(
            "{} filter parameters for a rank of {rank}",
            params.len()
        ))
    })
}

/// A contiguous frame's header fields and bytes.
struct Frame<'a> {
    /// The frame, cut to its stated length.
    bytes: &'a [u8],
    header_len: usize,
    /// The decoded bytes in the frame, and the stored bytes of its chunks.
    decoded: u64,
    stored: usize,
    element: usize,
    chunk_size: u64,
}

impl<'a> Frame<'a> {
    /// Reads and checks a frame's fixed header, as c-blosc2's `get_header_info` does.
    fn read(data: &'a [u8]) -> Result<Self> {
        let head = data.first_chunk::<FRAME_HEADER>().ok_or_else(|| {
            bad(format!(
                "{} bytes, short of a frame's {FRAME_HEADER}-byte header",
                data.len()
            ))
        })?;
        if head[2..10] != MAGIC[..] {
            return Err(bad("not a Blosc2 frame (no \"b2frame\" magic)".into()));
        }
        let be32 =
            |at: usize| i32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        let be64 = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&head[at..at + 8]);
            i64::from_be_bytes(b)
        };
        let version = head[25] & 0x0f;
        if version > FRAME_VERSION {
            return Err(Error::unsupported(format!(
                "frame format version {version} (c-blosc2 reads up to {FRAME_VERSION})"
            )));
        }
        if head[26] != 0 {
            return Err(bad(format!(
                "frame type {} in a contiguous frame (type 0)",
                head[26]
            )));
        }
        let (header_len, frame_len) = (be32(11), be64(16));
        let (decoded, stored, element, chunk_size) = (be64(30), be64(39), be32(48), be32(58));
        let header_len = usize::try_from(header_len)
            .ok()
            .filter(|&n| n >= FRAME_HEADER && n as i64 <= frame_len)
            .ok_or_else(|| {
                bad(format!(
                    "a header of {header_len} bytes in a frame of {frame_len}"
                ))
            })?;
        let bytes = usize::try_from(frame_len)
            .ok()
            .and_then(|n| data.get(..n))
            .ok_or_else(|| {
                bad(format!(
                    "a frame of {frame_len} bytes in a chunk of {}",
                    data.len()
                ))
            })?;
        let element = usize::try_from(element)
            .ok()
            .filter(|&e| e > 0)
            .ok_or_else(|| bad(format!("an element size of {element}")))?;
        let (Ok(decoded), Ok(stored), Ok(chunk_size)) = (
            u64::try_from(decoded),
            usize::try_from(stored),
            u64::try_from(chunk_size),
        ) else {
            return Err(bad(format!(
                "sizes of {decoded} decoded, {stored} stored, chunks of {chunk_size}"
            )));
        };
        Ok(Self {
            bytes,
            header_len,
            decoded,
            stored,
            element,
            chunk_size,
        })
    }

    /// The value of the metalayer `name`, if the header has one.
    fn metalayer(&self, name: &[u8]) -> Result<Option<&'a [u8]>> {
        let header = self.bytes.get(..self.header_len).unwrap_or_default();
        let cut = || bad("the metalayers' index runs past the header".into());
        // A fixarray of three, the index's size (a uint16), then a map16 of names: its
        // marker, its count, and the names each with an int32 offset.
        let mut at = FRAME_HEADER + 5;
        if header.get(at - 1) != Some(&0xde) {
            return Err(bad("the metalayers' index is not a msgpack map".into()));
        }
        let count = header.get(at..at + 2).ok_or_else(cut)?;
        let count = usize::from(u16::from_be_bytes([count[0], count[1]]));
        if count > MAX_METALAYERS {
            return Err(bad(format!(
                "{count} metalayers (c-blosc2 allows {MAX_METALAYERS})"
            )));
        }
        at += 2;
        for _ in 0..count {
            let &marker = header.get(at).ok_or_else(cut)?;
            if marker & 0xe0 != 0xa0 {
                return Err(bad(format!(
                    "a metalayer's name at byte {at} is not a msgpack fixstr"
                )));
            }
            let len = usize::from(marker & 0x1f);
            let key = header.get(at + 1..at + 1 + len).ok_or_else(cut)?;
            at += 1 + len;
            let offset = header.get(at..at + 5).ok_or_else(cut)?;
            if offset[0] != 0xd2 {
                return Err(bad(format!(
                    "metalayer {:?}'s offset is not a msgpack int32",
                    String::from_utf8_lossy(key)
                )));
            }
            at += 5;
            if key != name {
                continue;
            }
            let offset = i32::from_be_bytes([offset[1], offset[2], offset[3], offset[4]]);
            let value = usize::try_from(offset)
                .ok()
                .and_then(|o| {
                    let head = header.get(o..o.checked_add(5)?)?;
                    if head[0] != 0xc6 {
                        return None;
                    }
                    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
                    let len = usize::try_from(i32::try_from(len).ok()?).ok()?;
                    header.get(o + 5..(o + 5).checked_add(len)?)
                })
                .ok_or_else(|| {
                    bad(format!(
                        "metalayer {:?}'s value at byte {offset} is not a bin32 within the header",
                        String::from_utf8_lossy(key)
                    ))
                })?;
            return Ok(Some(value));
        }
        Ok(None)
    }

    /// Decodes the frame's one chunk into `out`, which it must fill exactly: directly, or
    /// through the B2ND blocks of `grid`.
    fn chunk_into(&self, out: &mut [u8], grid: Option<&Grid>) -> Result<()> {
        let chunks = match self.decoded {
            0 => 0,
            _ if self.chunk_size == 0 => {
                return Err(Error::unsupported(
                    "a frame of chunks of varying sizes".to_string(),
                ))
            }
            n => n.div_ceil(self.chunk_size),
        };
        if chunks != 1 {
            return Err(Error::unsupported(format!(
                "a frame of {chunks} chunks (the HDF5 filter writes one)"
            )));
        }
        let data_end = self
            .header_len
            .checked_add(self.stored)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| {
                bad(format!(
                    "{} stored bytes after a header of {} in a frame of {}",
                    self.stored,
                    self.header_len,
                    self.bytes.len()
                ))
            })?;
        let index = self.bytes.get(data_end..).unwrap_or_default();
        let mut offset = [0u8; 8];
        decode_chunk(index, &mut offset, None)
            .map_err(|e| blosc::placed(e, "the chunk offsets"))?;
        let offset = i64::from_le_bytes(offset);
        if offset < 0 {
            // A chunk not stored: the kind is in the offset's top byte, tested as c-blosc2
            // tests it.
            let kind = (offset as u64 >> 56) as u8;
            let size = self.decoded;
            let expected = grid.map_or(out.len(), |g| g.padded);
            if size != expected as u64 {
                return Err(bad(format!(
                    "a chunk of {size} bytes for {expected} (special offset {kind:#04x})"
                )));
            }
            return if kind & 0x01 != 0 || kind & 0x04 != 0 {
                out.fill(0);
                Ok(())
            } else if kind & 0x02 != 0 {
                fill_nans(self.element, out)
            } else {
                Err(bad(format!("a special chunk offset of kind {kind:#04x}")))
            };
        }
        let at = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(self.header_len))
            .filter(|&at| at.saturating_add(EXTENDED) <= data_end)
            .ok_or_else(|| {
                bad(format!(
                    "chunk 0 at offset {offset} lies outside the frame's {} stored bytes",
                    self.stored
                ))
            })?;
        decode_chunk(self.bytes.get(at..).unwrap_or_default(), out, grid)
            .map_err(|e| blosc::placed(e, "chunk 0"))
    }
}

/// A B2ND metalayer's shapes (`b2nd_deserialize_meta`): the array's, its chunks' and its
/// blocks'.
struct B2nd {
    shape: Vec<u64>,
    chunk: Vec<u64>,
    block: Vec<u64>,
}

impl B2nd {
    /// Reads the metalayer as c-blosc2 reads it: by position, each number after its msgpack
    /// marker byte (int64 for the shape, int32 for the others), the markers not checked.
    fn read(meta: &[u8]) -> Result<Self> {
        let cut = || bad("the B2ND metalayer is cut short".into());
        let &ndim = meta.get(2).ok_or_else(cut)?;
        let ndim = usize::from(ndim);
        if ndim > MAX_DIMS {
            return Err(bad(format!(
                "a B2ND array of {ndim} dimensions (at most {MAX_DIMS})"
            )));
        }
        let mut at = 3;
        let mut list = |width: usize| -> Result<Vec<i64>> {
            at += 1;
            (0..ndim)
                .map(|_| {
                    let bytes = meta.get(at + 1..at + 1 + width).ok_or_else(cut)?;
                    at += 1 + width;
                    let mut b = [0u8; 8];
                    b[8 - width..].copy_from_slice(bytes);
                    let n = i64::from_be_bytes(b);
                    // Sign-extend the 32-bit ones.
                    Ok(if width == 4 {
                        i64::from(n as u32 as i32)
                    } else {
                        n
                    })
                })
                .collect()
        };
        let (shape, chunk, block) = (list(8)?, list(4)?, list(4)?);
        // The shape may hold zeros; chunks and blocks may not.
        let checked = |what: &str, v: &[i64], least: i64| -> Result<Vec<u64>> {
            v.iter()
                .map(|&n| u64::try_from(n).ok().filter(|_| n >= least))
                .collect::<Option<Vec<u64>>>()
                .ok_or_else(|| bad(format!("a B2ND {what} of {v:?}")))
        };
        Ok(Self {
            shape: checked("shape", &shape, 0)?,
            chunk: checked("chunk shape", &chunk, 1)?,
            block: checked("block shape", &block, 1)?,
        })
    }
}

/// A B2ND chunk's blocks: the array's shape, the block shape (no dimension larger than the
/// array's), and the chunk padded to whole blocks, whose blocks are stored in row-major order.
struct Grid {
    shape: Vec<usize>,
    block: Vec<usize>,
    element: usize,
    /// Blocks along each dimension.
    blocks: Vec<usize>,
    /// The array's strides in bytes.
    stride: Vec<usize>,
    /// The padded chunk's and one block's bytes.
    padded: usize,
    block_bytes: usize,
}

impl Grid {
    /// The grid of `block` over `shape`, both checked: every dimension positive where
    /// `block`'s is, none of `block`'s larger than `shape`'s, and the array's bytes (`shape`
    /// times `element`) within memory; so the padded chunk is less than `2^n` times them.
    fn new(shape: &[u64], block: &[u64], element: usize) -> Self {
        let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
        let block: Vec<usize> = block.iter().map(|&d| d as usize).collect();
        let n = shape.len();
        let blocks: Vec<usize> = (0..n).map(|d| shape[d].div_ceil(block[d])).collect();
        let mut stride = vec![element; n];
        for d in (0..n.saturating_sub(1)).rev() {
            stride[d] = stride[d + 1] * shape[d + 1];
        }
        let block_bytes = block.iter().product::<usize>() * element;
        let padded = (0..n).fold(element, |bytes, d| {
            bytes.saturating_mul(blocks[d].saturating_mul(block[d]))
        });
        Self {
            shape,
            block,
            element,
            blocks,
            stride,
            padded,
            block_bytes,
        }
    }

    /// Copies block `j` of the padded chunk, `stored`, into `out`, the row-major array from
    /// its byte `base` on, leaving its padding out.
    fn place(&self, j: usize, stored: &[u8], out: &mut [u8], base: usize) {
        let n = self.shape.len();
        let Some(last) = n.checked_sub(1) else {
            return;
        };
        // The block's first element in the array, from its index in the grid.
        let mut origin = vec![0usize; n];
        let mut rest = j;
        for d in (0..n).rev() {
            origin[d] = rest % self.blocks[d] * self.block[d];
            rest /= self.blocks[d];
        }
        let row_bytes = self.block[last] * self.element;
        let width = (self.shape[last] - origin[last]).min(self.block[last]) * self.element;
        // Each row of the block: its index within the block along the first n - 1
        // dimensions, as an odometer.
        let mut row = vec![0usize; n];
        for stored_row in stored.chunks_exact(row_bytes) {
            if (0..last).all(|d| origin[d] + row[d] < self.shape[d]) {
                let at: usize = (0..n).map(|d| (origin[d] + row[d]) * self.stride[d]).sum();
                let at = at.wrapping_sub(base);
                if let (Some(dst), Some(src)) = (
                    out.get_mut(at..at.saturating_add(width)),
                    stored_row.get(..width),
                ) {
                    dst.copy_from_slice(src);
                }
            }
            for d in (0..last).rev() {
                row[d] += 1;
                if row[d] < self.block[d] {
                    break;
                }
                row[d] = 0;
            }
        }
    }
}

/// Fills `out` with NaNs of `element` bytes (a float or a double), as c-blosc2 fills a
/// chunk of NaNs.
fn fill_nans(element: usize, out: &mut [u8]) -> Result<()> {
    match element {
        4 => fill_elements(out, &f32::NAN.to_le_bytes()),
        8 => fill_elements(out, &f64::NAN.to_le_bytes()),
        _ => Err(bad(format!(
            "a chunk of NaNs of {element}-byte elements (NaNs are 4 or 8 bytes)"
        ))),
    }
}

/// A Blosc2 chunk's header, read and checked as `read_chunk_header` and
/// `blosc2_initialize_context_from_header` check it.
struct ChunkHeader {
    flags: u8,
    /// The element's bytes, the decoded bytes (the caller's), the block's (at most the
    /// decoded bytes) and the stored bytes (within the data).
    element: usize,
    size: usize,
    block: usize,
    stored: usize,
    /// The header's length: 16 bytes, or 32 extended.
    overhead: usize,
    filters: [u8; 6],
    filter_meta: [u8; 6],
    blosc2_flags: u8,
}

impl ChunkHeader {
    /// The header at the start of `data`, a chunk of Blosc2's format (version 3 or later)
    /// that must decode to `expected` bytes.
    fn read(data: &[u8], expected: usize) -> Result<Self> {
        let head = data
            .first_chunk::<HEADER>()
            .ok_or_else(|| bad(format!("{} bytes, short of a chunk header", data.len())))?;
        let [version, _, flags, typesize, ..] = *head;
        let word =
            |at: usize| i32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        let (decoded, block, stored) = (word(4), word(8), word(12));
        if stored < HEADER as i32 || block <= 0 || block as usize > MAX_BLOCK || typesize == 0 {
            return Err(bad(format!(
                "a chunk header of {stored} stored bytes, blocks of {block}, {typesize}-byte \
                 elements"
            )));
        }
        let extended = flags & (SHUFFLE_FLAG | BITSHUFFLE_FLAG) == SHUFFLE_FLAG | BITSHUFFLE_FLAG;
        let (overhead, filters, filter_meta, flags2, blosc2_flags) = if extended {
            let ext = data
                .first_chunk::<EXTENDED>()
                .filter(|_| stored >= EXTENDED as i32)
                .ok_or_else(|| bad("a chunk shorter than its 32-byte extended header".into()))?;
            let mut filters = [0u8; 6];
            filters.copy_from_slice(&ext[16..22]);
            let mut meta = [0u8; 6];
            meta.copy_from_slice(&ext[24..30]);
            if version == 3 {
                // The alpha format did not clear the last slot.
                (filters[5], meta[5]) = (0, 0);
            }
            (EXTENDED, filters, meta, ext[30], ext[31])
        } else {
            let mut filters = [0u8; 6];
            if flags & SHUFFLE_FLAG != 0 {
                filters[5] = SHUFFLE;
            }
            if flags & BITSHUFFLE_FLAG != 0 {
                filters[5] = BITSHUFFLE;
            }
            if flags & DELTA_FLAG != 0 {
                filters[4] = DELTA;
            }
            (HEADER, filters, [0u8; 6], 0, 0)
        };
        let element = usize::from(typesize);
        if version > CHUNK_VERSION && flags2 & !VL_BLOCKS != 0 {
            return Err(Error::unsupported(format!(
                "chunk format version {version} with flags {flags2:#04x}"
            )));
        }
        if flags2 & VL_BLOCKS != 0 {
            return Err(Error::unsupported(
                "a chunk of variable-length blocks".to_string(),
            ));
        }
        let size = usize::try_from(decoded)
            .ok()
            .filter(|&n| n == expected)
            .ok_or_else(|| {
                bad(format!(
                    "the chunk header gives {decoded} bytes for {expected}"
                ))
            })?;
        let stored = stored as usize;
        if stored > data.len() {
            return Err(bad(format!(
                "the chunk header gives {stored} stored bytes; {} are there",
                data.len()
            )));
        }
        Ok(ChunkHeader {
            flags,
            element,
            size,
            block: (block as usize).min(size.max(1)),
            stored,
            overhead,
            filters,
            filter_meta,
            blosc2_flags,
        })
    }
}

/// Decodes the Blosc2 chunk at the start of `data` into `out`, which it must fill exactly, as
/// c-blosc2's `blosc2_decompress_ctx` does: its bytes are `out`'s, or with `grid` the padded
/// B2ND blocks of `out`, each placed as it is decoded.
fn decode_chunk(data: &[u8], out: &mut [u8], grid: Option<&Grid>) -> Result<()> {
    if let Some(&version @ ..=2) = data.first() {
        // A chunk of Blosc 1's format, which B2ND never holds.
        return match grid {
            None => blosc::decode(data, out),
            Some(_) => Err(Error::unsupported(format!(
                "a B2ND chunk in Blosc format version {version}"
            ))),
        };
    }
    let expected = grid.map_or(out.len(), |g| g.padded);
    let ChunkHeader {
        flags,
        element,
        size,
        block,
        stored,
        overhead,
        filters,
        filter_meta,
        blosc2_flags,
    } = ChunkHeader::read(data, expected)?;
    let data = data.get(..stored).unwrap_or_default();
    let special = (blosc2_flags >> 4) & 0x07;
    match special {
        0 => {}
        1 | 4 => {
            // Zeros, or values never written, which c-blosc2 leaves as the buffer was.
            if special == 4 && size % element != 0 {
                return Err(bad(format!("{size} bytes of {element}-byte elements")));
            }
            out.fill(0);
            return Ok(());
        }
        2 => {
            if size % element != 0 {
                return Err(bad(format!("{size} bytes of {element}-byte elements")));
            }
            return fill_nans(element, out);
        }
        3 => {
            let value = data.get(EXTENDED..).unwrap_or_default();
            if value.is_empty()
                || value.len() > size
                || size % value.len() != 0
                || out.len() % value.len() != 0
            {
                return Err(bad(format!(
                    "a repeated value of {} bytes for {size} bytes",
                    value.len()
                )));
            }
            return fill_elements(out, value);
        }
        other => return Err(bad(format!("special value kind {other}"))),
    }
    if blosc2_flags & LAZY != 0 {
        return Err(bad(
            "a lazy chunk, which c-blosc2 only makes in memory".into()
        ));
    }
    if blosc2_flags & INSTRUMENTED != 0 {
        return Err(Error::unsupported("an instrumented codec".to_string()));
    }
    if flags & MEMCPYED != 0 {
        let body = blosc::stored_as_is(data, overhead, size)?;
        match grid {
            None => out.copy_from_slice(body),
            Some(g) => {
                for (j, stored_block) in body.chunks_exact(g.block_bytes).enumerate() {
                    g.place(j, stored_block, out, 0);
                }
            }
        }
        return Ok(());
    }
    if size == 0 {
        return Ok(());
    }
    let codec = match flags >> 5 {
        0 => Codec::BloscLz,
        1 => Codec::Lz4,
        3 => Codec::Zlib,
        4 => Codec::Zstd,
        6 => {
            let id = data.get(22).copied().unwrap_or_default();
            return Err(Error::unsupported(format!(
                "the user-defined codec {id} ({})",
                codec_name(id)
            )));
        }
        other => {
            return Err(Error::unsupported(format!(
                "codec format {other} (c-blosc2 reads 0, 1, 3, 4 and 6)"
            )))
        }
    };
    let pipeline = Pipeline::new(filters, filter_meta, element)?;
    let blocks = size.div_ceil(block);
    let starts = data
        .get(overhead..)
        .and_then(|rest| rest.get(..blocks.checked_mul(4)?))
        .ok_or_else(|| {
            bad(format!(
                "{blocks} blocks' offsets do not fit in {stored} stored bytes"
            ))
        })?;
    let dict = if blosc2_flags & USE_DICT != 0 {
        // After the block offsets: the dictionary's size (an i32) and its bytes.
        let at = overhead + starts.len();
        let dict = data
            .get(at..at + 4)
            .map(|n| i32::from_le_bytes([n[0], n[1], n[2], n[3]]))
            .and_then(|n| {
                let n = usize::try_from(n)
                    .ok()
                    .filter(|&n| n > 0 && n <= MAX_DICT)?;
                data.get(at + 4..at + 4 + n)
            })
            .ok_or_else(|| {
                bad(format!(
                    "a dictionary at byte {at} that is empty, over {MAX_DICT} bytes or past \
                     the chunk"
                ))
            })?;
        Some(dict)
    } else {
        None
    };
    if let Some(g) = grid {
        if block != g.block_bytes {
            return Err(bad(format!(
                "blocks of {block} bytes in a B2ND chunk of {}-byte blocks",
                g.block_bytes
            )));
        }
    }
    let scheme = Scheme {
        codec,
        dict,
        element,
        split: flags & DONT_SPLIT == 0,
        block,
        pipeline: &pipeline,
    };
    // Where block `j`'s streams start, checked.
    let start_of = |j: usize| -> Result<usize> {
        let at = starts.get(4 * j..4 * j + 4).unwrap_or_default();
        let start = at.first_chunk::<4>().map_or(0, |b| i32::from_le_bytes(*b));
        usize::try_from(start)
            .ok()
            .filter(|&s| s > 0 && s < stored)
            .ok_or_else(|| {
                bad(format!(
                    "block {j}: an offset of {start} in {stored} stored bytes"
                ))
            })
    };
    let blocks_at_once = size >= blosc::PARALLEL_BYTES && blocks >= 4 && pipeline.delta.is_none();
    if blocks_at_once && crate::pool::threads() > 1 {
        return decode_blocks_in_parallel(&scheme, data, &start_of, out, grid);
    }
    let mut work = Buffers::new(&scheme)?;
    // A B2ND block before it is placed, and the first block for delta's later ones.
    let mut placed = scratch(block, grid.is_some(), "a B2ND block's buffer")?;
    let mut reference = Vec::new();
    for j in 0..blocks {
        let start = start_of(j)?;
        let begin = j * block;
        let len = block.min(size - begin);
        let result = match grid {
            None => {
                let (done, rest) = out.split_at_mut(begin);
                let dst = rest.get_mut(..len).unwrap_or_default();
                scheme.block(data, start, &mut work, dst, done.get(..block))
            }
            Some(g) => {
                let dst = placed.get_mut(..len).unwrap_or_default();
                let earlier = (j > 0).then_some(reference.as_slice());
                let result = scheme.block(data, start, &mut work, dst, earlier);
                if result.is_ok() {
                    g.place(j, dst, out, 0);
                    if j == 0 && pipeline.delta.is_some() {
                        reference = scratch(dst.len(), true, "a B2ND delta reference")?;
                        reference.copy_from_slice(dst);
                    }
                }
                result
            }
        };
        result.map_err(|e| blosc::placed(e, format_args!("block {j}")))?;
    }
    Ok(())
}

/// Decodes a large chunk's blocks on the pool (no delta, whose blocks wait for the first):
/// each block into its own part of `out`, or with `grid` each band of blocks (the blocks
/// that share a first-dimension index, whose rows make one contiguous run of `out`) into its
/// band; every task with buffers of its own.
fn decode_blocks_in_parallel(
    scheme: &Scheme<'_>,
    data: &[u8],
    start_of: &(dyn Fn(usize) -> Result<usize> + Sync),
    out: &mut [u8],
    grid: Option<&Grid>,
) -> Result<()> {
    use rayon::prelude::*;
    let block = scheme.block;
    // Each task's filter buffers, and its buffer for a B2ND block before it is placed.
    let buffers = || {
        let placed = scratch(block, grid.is_some(), "a B2ND block's buffer").ok()?;
        Some((Buffers::new(scheme).ok()?, placed))
    };
    let no_buffers = || Error::out_of_memory("a Blosc2 block's buffers");
    crate::pool::install(|| match grid {
        None => {
            out.par_chunks_mut(block)
                .enumerate()
                .try_for_each_init(buffers, |held, (j, dst)| {
                    let (work, _) = held.as_mut().ok_or_else(no_buffers)?;
                    scheme
                        .block(data, start_of(j)?, work, dst, None)
                        .map_err(|e| blosc::placed(e, format_args!("block {j}")))
                })
        }
        Some(g) => {
            let band = g.block[0] * g.stride[0];
            let per_band: usize = g.blocks.iter().skip(1).product();
            out.par_chunks_mut(band)
                .enumerate()
                .try_for_each_init(buffers, |held, (b, rows)| {
                    let (work, placed) = held.as_mut().ok_or_else(no_buffers)?;
                    for j in b * per_band..(b + 1) * per_band {
                        scheme
                            .block(data, start_of(j)?, work, placed, None)
                            .map_err(|e| blosc::placed(e, format_args!("block {j}")))?;
                        g.place(j, placed, rows, b * band);
                    }
                    Ok(())
                })
        }
    })
}

/// A zeroed buffer of `len` bytes when `wanted`, else an empty one.
fn scratch(len: usize, wanted: bool, what: &'static str) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    if wanted {
        v.try_reserve_exact(len)
            .map_err(|_| Error::out_of_memory(what))?;
        v.resize(len, 0);
    }
    Ok(v)
}

/// How a chunk's blocks are stored: the codec and its dictionary, the element, whether full
/// blocks split into a stream a byte, the block's size and the filters.
struct Scheme<'p> {
    codec: Codec,
    dict: Option<&'p [u8]>,
    element: usize,
    split: bool,
    block: usize,
    pipeline: &'p Pipeline,
}

/// The buffers a block's streams and filters pass through, kept from block to block.
struct Buffers {
    first: Vec<u8>,
    spare: Vec<u8>,
}

impl Buffers {
    /// The buffers `scheme`'s filters need: one for each filter that writes a new buffer,
    /// two at most.
    fn new(scheme: &Scheme<'_>) -> Result<Self> {
        let (block, transforms) = (scheme.block, scheme.pipeline.transforms());
        Ok(Buffers {
            first: scratch(block, transforms >= 1, "a Blosc2 block's buffer")?,
            spare: scratch(block, transforms >= 2, "a Blosc2 block's second buffer")?,
        })
    }
}

impl Scheme<'_> {
    /// Decodes the block whose streams start at `start` in `data` into `dst`, with the first
    /// block, `reference`, for delta when this is not the first.
    fn block(
        &self,
        data: &[u8],
        start: usize,
        buffers: &mut Buffers,
        dst: &mut [u8],
        reference: Option<&[u8]>,
    ) -> Result<()> {
        let streams = if self.split && dst.len() == self.block {
            self.element
        } else {
            1
        };
        let len = dst.len();
        let target = if self.pipeline.transforms() == 0 {
            &mut *dst
        } else {
            buffers.first.get_mut(..len).unwrap_or_default()
        };
        read_streams(data, start, (self.codec, self.dict), streams, target)?;
        let first = buffers.first.get_mut(..len).unwrap_or_default();
        let spare = buffers.spare.get_mut(..len).unwrap_or_default();
        self.pipeline.undo(first, spare, dst, reference)
    }
}

/// Reads a block's `streams` streams from `data` at `start` into `target`, one an equal part
/// of it.
fn read_streams(
    data: &[u8],
    start: usize,
    (codec, dict): (Codec, Option<&[u8]>),
    streams: usize,
    target: &mut [u8],
) -> Result<()> {
    if target.len() % streams != 0 || target.is_empty() {
        // c-blosc2 would leave the block's last bytes unwritten; its writer never makes one.
        return Err(bad(format!(
            "{} bytes do not split into {streams} streams",
            target.len()
        )));
    }
    let mut at = start;
    for (s, stream) in target.chunks_mut(target.len() / streams).enumerate() {
        let size = data.get(at..at + 4).ok_or_else(|| {
            bad(format!(
                "stream {s}'s size at byte {at} lies past the chunk"
            ))
        })?;
        let size = i32::from_le_bytes([size[0], size[1], size[2], size[3]]);
        at += 4;
        match size {
            0 => stream.fill(0),
            i32::MIN..=-1 => {
                let token = *data
                    .get(at)
                    .ok_or_else(|| bad(format!("stream {s}'s token lies past the chunk")))?;
                at += 1;
                if token & 1 == 0 || size < -255 {
                    return Err(bad(format!(
                        "stream {s}: a stored size of {size} with token {token:#04x}"
                    )));
                }
                stream.fill(size.unsigned_abs() as u8);
            }
            _ => {
                let size = size as usize;
                let body = at
                    .checked_add(size)
                    .and_then(|end| data.get(at..end))
                    .ok_or_else(|| {
                        bad(format!(
                            "stream {s} of {size} bytes at byte {at} runs past the chunk"
                        ))
                    })?;
                at += size;
                if size == stream.len() {
                    stream.copy_from_slice(body);
                } else {
                    decode_stream(codec, dict, body, stream)
                        .map_err(|e| blosc::placed(e, format_args!("stream {s}")))?;
                }
            }
        }
    }
    Ok(())
}

/// Decompresses one stream into `out`, which it must fill exactly, with the chunk's
/// dictionary where the codec takes one (LZ4 and Zstandard; c-blosc2's others ignore it).
fn decode_stream(codec: Codec, dict: Option<&[u8]>, body: &[u8], out: &mut [u8]) -> Result<()> {
    match (codec, dict) {
        (Codec::Lz4, Some(dict)) => {
            let made = lz4_flex::block::decompress_into_with_dict(body, out, dict)
                .map_err(|e| bad(format!("LZ4 with a dictionary: {e}")))?;
            if made != out.len() {
                return Err(bad(format!(
                    "LZ4 gives {made} bytes for a stream of {}",
                    out.len()
                )));
            }
            Ok(())
        }
        (Codec::Zstd, Some(dict)) => crate::codec::zstd_decode_with_dict_into(body, dict, out),
        _ => blosc::decode_stream(codec, body, out),
    }
}

/// A chunk's filters, in the order they are undone.
struct Pipeline {
    /// The shuffles, each with the bytes it groups (the bit shuffle: the element).
    steps: Vec<(u8, usize)>,
    /// Whether delta is undone last, and its element.
    delta: Option<usize>,
}

impl Pipeline {
    /// The pipeline of the six slots `filters` with their meta bytes `meta`, for elements of
    /// `element` bytes.
    fn new(filters: [u8; 6], meta: [u8; 6], element: usize) -> Result<Self> {
        let mut steps = Vec::new();
        let mut delta = None;
        for slot in (0..6).rev() {
            let (id, m) = (filters[slot], meta[slot]);
            if delta.is_some() && !matches!(id, NO_FILTER | TRUNC_PREC) {
                return Err(Error::unsupported(format!(
                    "filter {id} ({}) undone after delta",
                    filter_name(id)
                )));
            }
            match id {
                NO_FILTER | TRUNC_PREC => {}
                SHUFFLE => steps.push((SHUFFLE, if m == 0 { element } else { usize::from(m) })),
                BITSHUFFLE => steps.push((BITSHUFFLE, element)),
                BYTEDELTA => steps.push((BYTEDELTA, if m == 0 { element } else { usize::from(m) })),
                DELTA => delta = Some(element),
                other => {
                    return Err(Error::unsupported(format!(
                        "filter {other} ({})",
                        filter_name(other)
                    )))
                }
            }
        }
        Ok(Self { steps, delta })
    }

    /// How many filters write a new buffer.
    fn transforms(&self) -> usize {
        self.steps.len()
    }

    /// Undoes the filters of one block: the streams are in `first` (or already in `dst` when
    /// no filter transforms); the last transform writes into `dst`. `reference` is the
    /// chunk's first block, decoded, for every block but the first.
    fn undo(
        &self,
        first: &mut [u8],
        spare: &mut [u8],
        dst: &mut [u8],
        reference: Option<&[u8]>,
    ) -> Result<()> {
        let n = self.steps.len();
        let len = dst.len();
        for (k, &(id, unit)) in self.steps.iter().enumerate() {
            let (src, to): (&[u8], &mut [u8]) = match (k % 2, k + 1 == n) {
                (0, true) => (&*first, &mut *dst),
                (0, false) => (&*first, &mut *spare),
                (_, true) => (&*spare, &mut *dst),
                (_, false) => (&*spare, &mut *first),
            };
            let (src, to) = (
                src.get(..len).unwrap_or_default(),
                to.get_mut(..len).unwrap_or_default(),
            );
            match id {
                SHUFFLE => unshuffle(src, unit, to),
                BITSHUFFLE => bit_unshuffle(src, unit, to),
                _ => undo_bytedelta(src, unit, to),
            }
        }
        if let Some(element) = self.delta {
            undo_delta(dst, element, reference);
        }
        Ok(())
    }
}

/// Undoes Blosc2's bit shuffle of a block: whole groups of eight elements are transposed,
/// the bytes after them are as they are.
fn bit_unshuffle(planes: &[u8], element: usize, out: &mut [u8]) {
    let count = planes.len() / element.max(1);
    let whole = (count - count % 8) * element;
    if let (Some(o), Some(p)) = (out.get_mut(whole..), planes.get(whole..)) {
        o.copy_from_slice(p);
    }
    if let (Some(planes), Some(out)) = (planes.get(..whole), out.get_mut(..whole)) {
        bit_untranspose(planes, element, out);
    }
}

/// Undoes bytedelta (`bytedelta_backward`): the block is `channels` streams of equal length
/// (the byte planes a shuffle made), each a running difference of bytes, undone by a running
/// sum; the bytes after the last whole channel are as they are.
fn undo_bytedelta(src: &[u8], channels: usize, out: &mut [u8]) {
    let stream = src.len().min(out.len()) / channels.max(1);
    let whole = stream * channels;
    if let (Some(o), Some(d)) = (out.get_mut(whole..), src.get(whole..)) {
        o.copy_from_slice(d);
    }
    if stream == 0 {
        return;
    }
    for (o, d) in out[..whole]
        .chunks_exact_mut(stream)
        .zip(src.chunks_exact(stream))
    {
        let mut sum = 0u8;
        for (o, &d) in o.iter_mut().zip(d) {
            sum = sum.wrapping_add(d);
            *o = sum;
        }
    }
}

/// Undoes delta on a decoded block, as c-blosc2's `delta_decoder` does, in units of the
/// element when it is 1, 2, 4 or 8 bytes, of 8 bytes when it is a multiple of 8, else of a
/// byte. The first block (`reference` None): each unit XOR the one before it, as decoded;
/// any other: each unit XOR the same unit of the first block.
fn undo_delta(block: &mut [u8], element: usize, reference: Option<&[u8]>) {
    let unit = match element {
        1 | 2 | 4 | 8 => element,
        e if e % 8 == 0 => 8,
        _ => 1,
    };
    let whole = block.len() / unit * unit;
    match reference {
        None => {
            for i in unit..whole {
                block[i] ^= block[i - unit];
            }
        }
        Some(reference) => {
            for (b, r) in block[..whole].iter_mut().zip(reference) {
                *b ^= r;
            }
        }
    }
}

/// The name of a filter id in a Blosc2 chunk's slots.
fn filter_name(id: u8) -> &'static str {
    match id {
        SHUFFLE => "shuffle",
        BITSHUFFLE => "bitshuffle",
        DELTA => "delta",
        TRUNC_PREC => "trunc_prec",
        32 => "ndcell",
        33 => "ndmean",
        34 => "bytedelta, first version",
        BYTEDELTA => "bytedelta",
        36 => "int_trunc",
        _ => "unknown",
    }
}

/// The name of a user-defined codec id in a Blosc2 chunk's header.
fn codec_name(id: u8) -> &'static str {
    match id {
        32 => "ndlz",
        33..=35 => "zfp",
        36 => "openhtj2k",
        37 => "grok",
        38 => "openzl",
        39 => "j2k",
        40 => "htj2k",
        _ => "unknown",
    }
}

/// An error in a Blosc2 frame or chunk.
fn bad(what: String) -> Error {
    Error::invalid(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small writer of the format, for tests: chunks whose streams are stored as they are
    /// (or as runs of one byte), the filters applied as c-blosc2 applies them, a B2ND layout
    /// when `blocks` is given, and one frame around it.
    struct Writer {
        element: usize,
        /// Filter slots and their meta bytes.
        filters: [u8; 6],
        meta: [u8; 6],
        split: bool,
    }

    impl Writer {
        /// The frame holding `array` (of `shape`) in one chunk: B2ND blocks of `blocks`, or
        /// plain blocks of `block` bytes.
        fn frame(
            &self,
            array: &[u8],
            shape: &[u64],
            blocks: Option<&[u64]>,
            block: usize,
        ) -> Vec<u8> {
            let (data, block) = match blocks {
                Some(b) => {
                    let grid = Grid::new(shape, b, self.element);
                    let mut padded = vec![0u8; grid.padded];
                    for (j, stored) in padded.chunks_exact_mut(grid.block_bytes).enumerate() {
                        gather(&grid, j, array, stored);
                    }
                    (padded, grid.block_bytes)
                }
                None => (array.to_vec(), block),
            };
            let chunk = self.chunk(&data, block);
            let offsets = memcpyed_chunk(&0i64.to_le_bytes());
            let meta = blocks.map(|b| b2nd_meta(shape, shape, b));
            frame_of(&chunk, &offsets, data.len(), self.element, meta)
        }

        /// One chunk of `data` in blocks of `block` bytes, its streams stored as they are.
        fn chunk(&self, data: &[u8], block: usize) -> Vec<u8> {
            // As c-blosc2 does, a block no larger than the chunk.
            let block = block.min(data.len());
            let blocks: Vec<&[u8]> = data.chunks(block).collect();
            let mut out = vec![0u8; EXTENDED + 4 * blocks.len()];
            out[0] = 5;
            out[1] = 1;
            out[2] =
                SHUFFLE_FLAG | BITSHUFFLE_FLAG | if self.split { 0 } else { DONT_SPLIT } | (1 << 5);
            out[3] = self.element as u8;
            out[4..8].copy_from_slice(&(data.len() as i32).to_le_bytes());
            out[8..12].copy_from_slice(&(block as i32).to_le_bytes());
            out[16..22].copy_from_slice(&self.filters);
            out[24..30].copy_from_slice(&self.meta);
            let first = blocks.first().map(|b| b.to_vec()).unwrap_or_default();
            for (j, b) in blocks.iter().enumerate() {
                let start = out.len() as i32;
                out[EXTENDED + 4 * j..EXTENDED + 4 * j + 4].copy_from_slice(&start.to_le_bytes());
                let filtered = self.forward(b, (j > 0).then_some(&first[..]));
                let streams = if self.split && b.len() == block {
                    self.element
                } else {
                    1
                };
                for s in filtered.chunks(filtered.len() / streams) {
                    if s.iter().all(|&x| x == s[0]) && s.len() > 8 {
                        // A run: 0 for zeros, else minus the byte and the token 1.
                        out.extend((-i32::from(s[0])).to_le_bytes());
                        if s[0] != 0 {
                            out.push(1);
                        }
                    } else {
                        out.extend((s.len() as i32).to_le_bytes());
                        out.extend(s);
                    }
                }
            }
            let stored = out.len() as i32;
            out[12..16].copy_from_slice(&stored.to_le_bytes());
            out
        }

        /// The filters applied to one block, from the first slot to the last.
        fn forward(&self, block: &[u8], first: Option<&[u8]>) -> Vec<u8> {
            let mut data = block.to_vec();
            for slot in 0..6 {
                let m = usize::from(self.meta[slot]);
                data = match self.filters[slot] {
                    SHUFFLE => shuffle(&data, if m == 0 { self.element } else { m }),
                    BITSHUFFLE => {
                        let count = data.len() / self.element;
                        let whole = (count - count % 8) * self.element;
                        let mut out = super::super::codecs::bit_transpose_by_definition(
                            &data[..whole],
                            self.element,
                        );
                        out.extend(&data[whole..]);
                        out
                    }
                    DELTA => {
                        let unit = match self.element {
                            1 | 2 | 4 | 8 => self.element,
                            e if e % 8 == 0 => 8,
                            _ => 1,
                        };
                        let whole = data.len() / unit * unit;
                        let mut out = data.clone();
                        for i in 0..whole {
                            out[i] ^= match first {
                                None if i >= unit => data[i - unit],
                                None => 0,
                                Some(r) => r[i],
                            };
                        }
                        out
                    }
                    BYTEDELTA => {
                        let channels = if m == 0 { self.element } else { m };
                        let stream = data.len() / channels;
                        let mut out = data.clone();
                        for c in 0..channels {
                            for i in (1..stream).rev() {
                                out[c * stream + i] =
                                    data[c * stream + i].wrapping_sub(data[c * stream + i - 1]);
                            }
                        }
                        out
                    }
                    _ => data,
                };
            }
            data
        }
    }

    /// Fills block `j` of a padded B2ND chunk from `array`, element by element: the inverse
    /// of [`Grid::place`], written without it.
    fn gather(grid: &Grid, j: usize, array: &[u8], stored: &mut [u8]) {
        let n = grid.shape.len();
        let e = grid.element;
        let mut origin = vec![0usize; n];
        let mut rest = j;
        for d in (0..n).rev() {
            origin[d] = rest % grid.blocks[d] * grid.block[d];
            rest /= grid.blocks[d];
        }
        for (k, slot) in stored.chunks_exact_mut(e).enumerate() {
            // Element k of the block, its coordinates in the block, row-major.
            let mut rest = k;
            let mut at = Some(0usize);
            for d in (0..n).rev() {
                let c = origin[d] + rest % grid.block[d];
                rest /= grid.block[d];
                at = at
                    .filter(|_| c < grid.shape[d])
                    .map(|a| a + c * grid.stride[d]);
            }
            if let Some(at) = at {
                slot.copy_from_slice(&array[at..at + e]);
            }
        }
    }

    /// HDF5's byte shuffle.
    fn shuffle(data: &[u8], n: usize) -> Vec<u8> {
        let count = data.len() / n;
        let mut out = data.to_vec();
        for i in 0..count {
            for b in 0..n {
                out[b * count + i] = data[i * n + b];
            }
        }
        out
    }

    /// A chunk of `data` stored as it is.
    fn memcpyed_chunk(data: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; EXTENDED];
        out[0] = 5;
        out[1] = 1;
        out[2] = SHUFFLE_FLAG | BITSHUFFLE_FLAG | MEMCPYED;
        out[3] = 8;
        out[4..8].copy_from_slice(&(data.len() as i32).to_le_bytes());
        out[8..12].copy_from_slice(&(data.len() as i32).to_le_bytes());
        out[12..16].copy_from_slice(&((EXTENDED + data.len()) as i32).to_le_bytes());
        out.extend(data);
        out
    }

    /// A frame of one chunk, `chunk`, its offsets chunk, and the metalayer `b2nd` if given.
    fn frame_of(
        chunk: &[u8],
        offsets: &[u8],
        decoded: usize,
        element: usize,
        b2nd: Option<Vec<u8>>,
    ) -> Vec<u8> {
        let mut head = vec![0u8; FRAME_HEADER];
        head[0] = 0x9e;
        head[1] = 0xa8;
        head[2..10].copy_from_slice(MAGIC);
        head[10] = 0xd2;
        head[15] = 0xcf;
        head[24] = 0xa4;
        head[25] = 0x12;
        head[29] = 0xd3;
        head[30..38].copy_from_slice(&(decoded as i64).to_be_bytes());
        head[38] = 0xd3;
        head[39..47].copy_from_slice(&(chunk.len() as i64).to_be_bytes());
        head[47] = 0xd2;
        head[48..52].copy_from_slice(&(element as i32).to_be_bytes());
        head[57] = 0xd2;
        head[58..62].copy_from_slice(&(decoded as i32).to_be_bytes());
        head.extend([0x93, 0xcd, 0, 0, 0xde]);
        match &b2nd {
            None => head.extend([0, 0, 0xdc, 0, 0]),
            Some(meta) => {
                head.extend([0, 1, 0xa4]);
                head.extend(b"b2nd");
                let value_at = head.len() + 5 + 3;
                head.push(0xd2);
                head.extend((value_at as i32).to_be_bytes());
                head.extend([0xdc, 0, 1]);
                head.push(0xc6);
                head.extend((meta.len() as u32).to_be_bytes());
                head.extend(meta);
            }
        }
        let header_len = head.len();
        head[11..15].copy_from_slice(&(header_len as i32).to_be_bytes());
        head.extend(chunk);
        head.extend(offsets);
        let frame_len = head.len() as u64;
        head[16..24].copy_from_slice(&frame_len.to_be_bytes());
        head
    }

    /// `n` bytes of test data; for a quarter of the seeds, one repeated element of `element`
    /// bytes, whose shuffled planes are runs of a byte other than 0.
    fn values(n: usize, element: usize, seed: u8) -> Vec<u8> {
        if seed < 64 {
            return (0..n).map(|i| (i % element) as u8 + 1).collect();
        }
        (0..n)
            .map(|i| (i as u8).wrapping_mul(seed | 1) ^ (i / 7) as u8)
            .collect()
    }

    /// A B2ND metalayer of the array `shape` in chunks of `chunk` and blocks of `block`.
    fn b2nd_meta(shape: &[u64], chunk: &[u64], block: &[u64]) -> Vec<u8> {
        let mut meta = vec![0x97, 0, shape.len() as u8, 0x90 | shape.len() as u8];
        for &d in shape {
            meta.push(0xd3);
            meta.extend(d.to_be_bytes());
        }
        for list in [chunk, block] {
            meta.push(0x90 | shape.len() as u8);
            for &d in list {
                meta.push(0xd2);
                meta.extend((d as i32).to_be_bytes());
            }
        }
        meta.extend([0, 0xdb, 0, 0, 0, 0]);
        meta
    }

    /// A frame's header length, where its chunk starts.
    fn header_len(frame: &[u8]) -> usize {
        i32::from_be_bytes(frame[11..15].try_into().unwrap()) as usize
    }

    #[test]
    fn frame_and_chunk_refusals_name_what_is_wrong() {
        use zt_container::ErrorKind::{InvalidFile, Unsupported};
        let writer = |filters: [u8; 6]| Writer {
            element: 4,
            filters,
            meta: [0; 6],
            split: true,
        };
        let array = values(4 * 5 * 7, 4, 99);
        let b2nd = writer([0, 0, 0, 0, 0, SHUFFLE]).frame(&array, &[5, 7], Some(&[2, 3]), 0);
        let plain = writer([0, 0, 0, 0, 0, SHUFFLE]).frame(&array, &[140], None, 48);
        let params: &[u32] = &[1, 0, 4, 140, 5, 1, 0, 2, 5, 7];
        let flat: &[u32] = &[1, 0, 4, 140];
        let edit = |frame: &[u8], at: usize, bytes: &[u8]| {
            let mut f = frame.to_vec();
            f[at..at + bytes.len()].copy_from_slice(bytes);
            f
        };
        let chunk = header_len(&plain);
        // The chunk's first block offset, and where its first stream's size is.
        let first_block = chunk + EXTENDED;
        let first_stream = chunk
            + i32::from_le_bytes(plain[first_block..first_block + 4].try_into().unwrap()) as usize;
        let b2nd_chunk = header_len(&b2nd);
        let cases: Vec<(Vec<u8>, &[u32], zt_container::ErrorKind, &str)> = vec![
            (
                plain.clone(),
                &[1, 0, 4],
                InvalidFile,
                "3 filter parameters, not the 4 or more",
            ),
            (
                plain.clone(),
                &[1, 0, 4, 140, 5, 1, 0, 1, 140],
                InvalidFile,
                "a chunk rank of 1 in the filter's parameters",
            ),
            (
                plain.clone(),
                &[1, 0, 4, 140, 5, 1, 0, 3, 5],
                InvalidFile,
                "9 filter parameters for a rank of 3",
            ),
            (
                edit(&plain, 2, b"b3frame"),
                flat,
                InvalidFile,
                "not a Blosc2 frame",
            ),
            (
                edit(&plain, 25, &[0x14]),
                flat,
                Unsupported,
                "frame format version 4",
            ),
            (
                edit(&plain, 26, &[1]),
                flat,
                InvalidFile,
                "frame type 1 in a contiguous frame",
            ),
            (
                edit(&plain, 11, &[0, 0, 0, 40]),
                flat,
                InvalidFile,
                "a header of 40 bytes",
            ),
            (
                plain[..plain.len() - 1].to_vec(),
                flat,
                InvalidFile,
                "bytes in a chunk of",
            ),
            (
                edit(&plain, 48, &[0, 0, 0, 0]),
                flat,
                InvalidFile,
                "an element size of 0",
            ),
            (
                edit(&plain, 58, &70i32.to_be_bytes()),
                flat,
                Unsupported,
                "a frame of 2 chunks (the HDF5 filter writes one)",
            ),
            (
                b2nd.clone(),
                &[1, 0, 4, 140, 5, 1, 0, 2, 7, 5],
                InvalidFile,
                "the B2ND array's dimension 0 is 5, the filter's chunk has 7",
            ),
            (
                b2nd.clone(),
                &[1, 0, 4, 140, 5, 1, 0, 3, 5, 7, 1],
                InvalidFile,
                "a B2ND array of 2 dimensions under a filter of 3",
            ),
            (
                edit(&plain, chunk + 4, &141i32.to_le_bytes()),
                flat,
                InvalidFile,
                "the chunk header gives 141 bytes for 140",
            ),
            (
                edit(&plain, chunk + 21, &[36]),
                flat,
                Unsupported,
                "filter 36 (int_trunc)",
            ),
            (
                edit(&plain, chunk + 21, &[34]),
                flat,
                Unsupported,
                "filter 34 (bytedelta, first version)",
            ),
            (
                edit(&plain, chunk + 16, &[SHUFFLE, 0, 0, 0, 0, DELTA]),
                flat,
                Unsupported,
                "filter 1 (shuffle) undone after delta",
            ),
            (
                edit(&plain, chunk + 2, &[0xc5]),
                flat,
                Unsupported,
                "the user-defined codec 0 (unknown)",
            ),
            (
                edit(&plain, chunk + 2, &[0x45]),
                flat,
                Unsupported,
                "codec format 2 (c-blosc2 reads 0, 1, 3, 4 and 6)",
            ),
            (
                edit(&plain, chunk + 30, &[VL_BLOCKS]),
                flat,
                Unsupported,
                "a chunk of variable-length blocks",
            ),
            (
                edit(&plain, chunk + 31, &[LAZY]),
                flat,
                InvalidFile,
                "a lazy chunk",
            ),
            (
                edit(&plain, chunk + 31, &[0x50]),
                flat,
                InvalidFile,
                "special value kind 5",
            ),
            (
                edit(&plain, first_block, &[0, 0, 0, 0]),
                flat,
                InvalidFile,
                "block 0: an offset of 0 in",
            ),
            (
                edit(&plain, first_stream, &(-3i32).to_le_bytes()),
                flat,
                InvalidFile,
                "a stored size of -3 with token",
            ),
            (
                edit(&plain, first_stream, &4000i32.to_le_bytes()),
                flat,
                InvalidFile,
                "stream 0 of 4000 bytes at byte",
            ),
            (
                edit(&b2nd, b2nd_chunk + 8, &48i32.to_le_bytes()),
                params,
                InvalidFile,
                "blocks of 48 bytes in a B2ND chunk of 24-byte blocks",
            ),
        ];
        for (frame, params, kind, expected) in cases {
            let mut out = vec![0u8; array.len()];
            let e = decode_into(&frame, params, &mut out).unwrap_err();
            assert!(
                e.message().starts_with("blosc2: ") && e.message().contains(expected),
                "{expected}: {e}"
            );
            assert_eq!(e.kind(), kind, "{expected}: {e}");
        }
    }

    #[test]
    fn b2nd_shapes_and_special_chunks_are_checked() {
        use zt_container::ErrorKind::{InvalidFile, Unsupported};
        let params: &[u32] = &[1, 0, 4, 140, 5, 1, 0, 2, 5, 7];
        // B2ND shapes the filter never writes: blocks larger than the array, chunks other than
        // the array, padding past the bound.
        let empty = memcpyed_chunk(&0i64.to_le_bytes());
        let mut out = vec![0u8; 140];
        for (chunk, block, kind, expected) in [
            (
                [5, 7],
                [6, 3],
                InvalidFile,
                "blocks of [6, 3] larger than the array's shape [5, 7]",
            ),
            (
                [5, 4],
                [2, 3],
                Unsupported,
                "a B2ND array of shape [5, 7] in chunks of [5, 4]",
            ),
        ] {
            let frame = frame_of(
                &[],
                &empty,
                140,
                4,
                Some(b2nd_meta(&[5, 7], &chunk, &block)),
            );
            let e = decode_into(&frame, params, &mut out).unwrap_err();
            assert!(e.message().contains(expected), "{expected}: {e}");
            assert_eq!(e.kind(), kind, "{expected}: {e}");
        }
        let shape = [3u64; 16];
        let mut out = vec![0u8; 3usize.pow(16)];
        let frame = frame_of(
            &[],
            &empty,
            out.len(),
            1,
            Some(b2nd_meta(&shape, &shape, &[2; 16])),
        );
        let e = decode_into(&frame, &[1, 0, 1, out.len() as u32], &mut out).unwrap_err();
        assert!(
            e.message().contains("to more than 64 times its size"),
            "{e}"
        );
        // A special chunk of NaNs needs 4- or 8-byte elements.
        let mut out = vec![0u8; 6];
        let nan = frame_of(
            &[],
            &memcpyed_chunk(&(2i64 << 56 | 1 << 63).to_le_bytes()),
            6,
            2,
            None,
        );
        let e = decode_into(&nan, &[1, 0, 2, 6], &mut out).unwrap_err();
        assert!(
            e.message().contains("a chunk of NaNs of 2-byte elements"),
            "{e}"
        );
        let none = frame_of(
            &[],
            &memcpyed_chunk(&(1i64 << 63).to_le_bytes()),
            6,
            2,
            None,
        );
        let e = decode_into(&none, &[1, 0, 2, 6], &mut out).unwrap_err();
        assert!(
            e.message().contains("a special chunk offset of kind 0x80"),
            "{e}"
        );
        let zeros = frame_of(
            &[],
            &memcpyed_chunk(&(1i64 << 56 | 1 << 63).to_le_bytes()),
            6,
            2,
            None,
        );
        out.fill(9);
        decode_into(&zeros, &[1, 0, 2, 6], &mut out).unwrap();
        assert_eq!(out, [0; 6]);
    }

    proptest::proptest! {
        /// What the test writer makes reads back: any element size, B2ND blocks padded or
        /// not, or plain blocks with a short last one, split or not, under shuffles, bit
        /// shuffles, bytedelta and delta.
        #[test]
        fn written_frames_read_back(
            element in 1usize..10,
            dims in proptest::collection::vec((1u64..9, 1u64..5), 1..4),
            plain in proptest::prelude::any::<bool>(),
            block in 1usize..40,
            split in proptest::prelude::any::<bool>(),
            pipeline in 0usize..6,
            seed in proptest::prelude::any::<u8>(),
        ) {
            let shape: Vec<u64> = dims.iter().map(|d| d.0).collect();
            let blocks: Vec<u64> = dims.iter().map(|d| d.1.min(d.0)).collect();
            let size = shape.iter().product::<u64>() as usize * element;
            let array = values(size, element, seed);
            let (filters, meta) = match pipeline {
                0 => ([0, 0, 0, 0, 0, 0], [0; 6]),
                1 => ([0, 0, 0, 0, 0, SHUFFLE], [0; 6]),
                2 => ([0, 0, 0, 0, 0, BITSHUFFLE], [0; 6]),
                3 => ([0, 0, 0, 0, DELTA, SHUFFLE], [0; 6]),
                4 => ([0, 0, 0, 0, SHUFFLE, BYTEDELTA], [0; 6]),
                _ => ([0, 0, 0, 0, TRUNC_PREC, SHUFFLE], [0, 0, 0, 0, 0, 2]),
            };
            let writer = Writer { element, filters, meta, split };
            let block = block * element;
            let (frame, params) = if plain || shape.len() < 2 {
                (writer.frame(&array, &shape, None, block), vec![1, 0, element as u32, size as u32])
            } else {
                let mut params =
                    vec![1, 0, element as u32, size as u32, 5, 1, 0, shape.len() as u32];
                params.extend(shape.iter().map(|&d| d as u32));
                (writer.frame(&array, &shape, Some(&blocks), block), params)
            };
            let mut out = vec![0u8; size];
            decode_into(&frame, &params, &mut out).unwrap();
            proptest::prop_assert_eq!(out, array);
        }

        /// Any bytes, and a written frame with one byte changed or cut short, under any
        /// parameters: an error or a filled chunk, never a panic.
        #[test]
        fn damaged_frames_are_refused_or_read(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            params in proptest::collection::vec(
                proptest::prop_oneof![0u32..12, proptest::prelude::any::<u32>()],
                0..12,
            ),
            len in 0usize..400,
            flip in proptest::prelude::any::<(u16, u8)>(),
            cut in proptest::prelude::any::<u16>(),
        ) {
            let mut out = vec![0u8; len];
            let _ = decode_into(&data, &params, &mut out);
            let writer = Writer {
                element: 4,
                filters: [0, 0, 0, 0, DELTA, SHUFFLE],
                meta: [0; 6],
                split: true,
            };
            let array = values(4 * 5 * 7, 4, 99);
            let mut frame = writer.frame(&array, &[5, 7], Some(&[2, 3]), 24);
            let params = [1, 0, 4, 140, 5, 1, 0, 2, 5, 7];
            let at = usize::from(flip.0) % frame.len();
            frame[at] ^= flip.1;
            let mut out = vec![0u8; array.len()];
            let _ = decode_into(&frame, &params, &mut out);
            let _ = decode_into(&frame[..usize::from(cut) % frame.len()], &params, &mut out);
        }
    }
}
