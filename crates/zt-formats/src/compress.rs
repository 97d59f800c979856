//! Encodings: raw and zstd, with decompression bounded by the declared size, and the
//! encodings other formats store numbers in: the protobuf runs of ONNX tensors
//! ([`varints_decode_into`], [`varint_codes_decode_into`], [`tagged_decode_into`]), latin-1
//! text of Python's protocol-2 pickles ([`latin1_decode_into`]), and arrays stored in pieces
//! or boxes (flax's chunked arrays, TensorFlow's partitioned variables: [`pieces_decode_into`],
//! [`place_box`]).
//!
//! [`Encoding`] (the vocabulary) and the protobuf decoders are always available; the zstd
//! codec functions need the `zstd` feature (on by default). [`zstd_decode_into`] is the one
//! decode path for components of declared size; [`zstd_decompress_bounded`] serves legacy
//! streams of unknown size.

use std::fmt;

use zt_container::{Error, Result};

/// How a component's bytes are stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// The elements as they are.
    Raw,
    /// A zstd stream of the elements.
    Zstd,
    /// zTensor v2's `zt.zstd-seekable/1`: independent zstd frames followed by a seek table
    /// (see [`crate::seekable`]).
    ZstdSeekable,
    /// A raw deflate stream: a compressed entry of a zip archive (NumPy `.npz`, PyTorch
    /// checkpoints). Never written, and never parsed from a zTensor manifest (`parse` keeps
    /// the name `deflate` unknown there).
    Deflate,
    /// A run of protobuf varints, one per element (an ONNX tensor's packed `int32_data`,
    /// `int64_data` or `uint64_data`, or an attribute's `ints`): each decodes to `width`
    /// little-endian bytes, as a cast of its 64-bit value truncates it, or, for `boolean`, to
    /// one byte, 1 when its low byte is not zero. See [`varints_decode_into`]. Never written,
    /// and never parsed from a zTensor manifest.
    ProtoVarints {
        /// Bytes per decoded element: 1, 2, 4 or 8.
        width: u8,
        /// Whether a value whose low byte is not zero decodes to 1 (ONNX `BOOL`).
        boolean: bool,
    },
    /// A run of protobuf varints, one per element of a sub-byte type (an ONNX FLOAT6
    /// tensor's packed `int32_data`): each value's low `bits` bits, packed lowest bits first
    /// into `ceil(count * bits / 8)` bytes. See [`varint_codes_decode_into`]. Never written,
    /// and never parsed from a zTensor manifest.
    ProtoVarintCodes {
        /// Bits per element: 1 to 7.
        bits: u8,
        /// Elements the run holds.
        count: u64,
    },
    /// A protobuf repeated number field in any form but one packed run, as protobuf reads
    /// it: the stored bytes are the part of its message from the field's first occurrence to
    /// its last, and every field of that number in them is taken, a value of its own wire
    /// type (each element its own key, proto2's default, as ONNX writes an attribute's
    /// `floats` and `ints`) or a packed run, while other fields between are stepped over;
    /// decodes to `width` bytes per element. See [`tagged_decode_into`]. Never written, and
    /// never parsed from a zTensor manifest.
    ProtoTagged {
        /// Bytes per decoded element: 1, 2, 4 or 8.
        width: u8,
        /// Whether each element is a varint (else `width` fixed bytes).
        varint: bool,
        /// Whether a varint whose low byte is not zero decodes to 1 (ONNX `BOOL`).
        boolean: bool,
    },
    /// An HDF5 chunked dataset: its chunks lie anywhere in the component's stored span, each
    /// filtered (deflate, shuffle, fletcher32) on its own; decoding unfilters each and places
    /// it in the row-major array (chunks never written read as zeros). See [`ChunkTable`].
    /// Never written, and never parsed from a zTensor manifest.
    Hdf5Chunks(Box<ChunkTable>),
    /// UTF-8 text whose characters are the bytes, each below 256: how Python 3 pickles a
    /// byte string under protocol 2 (`_codecs.encode(text, "latin1")`), as a NumPy array's
    /// data is then pickled. See [`latin1_decode_into`]. Never written, and never parsed
    /// from a zTensor manifest.
    Latin1Text,
    /// The elements stored in pieces, in order, each a range of one of the listing's files:
    /// decoding places them one after the other (an array flax stored in pieces, as it
    /// stores arrays over 1 GiB; a TensorFlow variable partitioned along its first axis,
    /// its slices in several data files). See [`pieces_decode_into`]. Never written, and
    /// never parsed from a zTensor manifest.
    Pieces(Box<Vec<Piece>>),
    /// The elements stored as boxes of the array that tile it (a TensorFlow variable a
    /// sharding policy cut into irregular slices): each a [`Piece`] holding its box in
    /// row-major order, placed into the row-major array. See [`place_box`]. Never written,
    /// and never parsed from a zTensor manifest.
    Boxes(Box<BoxTable>),
    /// The stored values of a sparse tensor whose dimensions are each dense or compressed
    /// (CSR), optionally in blocks, as TensorFlow Lite stores sparse weights: decoding puts
    /// each value in its place of the dense array and zeroes the rest. See
    /// [`densify_into`](crate::densify_into). Never written, and never parsed from a zTensor
    /// manifest.
    SparseLevels(Box<crate::SparseLevels>),
    /// Unsigned integers of `bits` bits (1, 3 or 6) stored as OpenVINO stores its `u1`, `u3`
    /// and `u6` constants, in bit planes: per block of elements (8 for 1 and 3 bits, 4 for 6
    /// bits; the last block padded), one plane a power-of-two part of each element's bits,
    /// low parts first (3 bits: their low 2, then their high 1; 6 bits: low 4, then high 2),
    /// each plane packing the block's parts highest bits first. Decodes to one byte an
    /// element. See [`bit_planes_decode_into`]. Never written, and never parsed from a
    /// zTensor manifest.
    BitPlanes {
        /// Bits per element: 1, 3 or 6.
        bits: u8,
    },
    /// An encoding this library does not decode; the object stays listed.
    Unknown(String),
}

impl Encoding {
    /// Parses an encoding name.
    pub fn parse(s: &str) -> Self {
        match s {
            "raw" => Encoding::Raw,
            "zstd" => Encoding::Zstd,
            "zt.zstd-seekable/1" => Encoding::ZstdSeekable,
            other => Encoding::Unknown(other.to_owned()),
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        match self {
            Encoding::Raw => "raw",
            Encoding::Zstd => "zstd",
            Encoding::ZstdSeekable => "zt.zstd-seekable/1",
            Encoding::Deflate => "deflate",
            Encoding::ProtoVarints { .. } => "protobuf-varints",
            Encoding::ProtoVarintCodes { .. } => "protobuf-varint-codes",
            Encoding::ProtoTagged { .. } => "protobuf-tagged",
            Encoding::Hdf5Chunks(_) => "hdf5-chunks",
            Encoding::Latin1Text => "latin1-text",
            Encoding::Pieces(_) => "pieces",
            Encoding::Boxes(_) => "boxes",
            Encoding::SparseLevels(_) => "sparse-levels",
            Encoding::BitPlanes { .. } => "bit-planes",
            Encoding::Unknown(s) => s,
        }
    }

    /// The bytes an encoding's pieces or boxes occupy, wherever they lie: for the encodings
    /// whose stored bytes are not one range of one file; `None` for the others.
    ///
    /// ```
    /// use zt_formats::{Encoding, Piece};
    /// let piece = |offset| Piece { file: 1, offset, length: 64, crc32c: None };
    /// let pieces = Encoding::Pieces(Box::new(vec![piece(0), piece(512)]));
    /// assert_eq!(pieces.pieces_len(), Some(128));
    /// assert_eq!(Encoding::Raw.pieces_len(), None);
    /// ```
    pub fn pieces_len(&self) -> Option<u64> {
        match self {
            Encoding::Pieces(pieces) => Some(pieces.iter().map(|p| p.length).sum()),
            Encoding::Boxes(table) => Some(table.boxes.iter().map(|(p, ..)| p.length).sum()),
            _ => None,
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the chunks of an HDF5 chunked dataset are, and how each was filtered.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChunkTable {
    /// The dataset's dimensions.
    pub dims: Vec<u64>,
    /// A chunk's dimensions (as many as `dims`).
    pub chunk: Vec<u64>,
    /// Bytes per element.
    pub element_size: u64,
    /// The filter pipeline, in the order the writer applied it (HDF5 filter ids: 1 deflate,
    /// 2 shuffle, 3 fletcher32, 4 szip; others are refused when read).
    pub filters: Vec<u16>,
    /// Each filter's parameters (its client data values), as many as `filters`.
    pub filter_params: Vec<Vec<u32>>,
    /// Every chunk written.
    pub chunks: Vec<Chunk>,
    /// One element of the dataset's fill value, which chunks never written hold; empty when
    /// it is zeros (HDF5's default).
    pub fill: Vec<u8>,
}

/// One chunk of a [`ChunkTable`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Chunk {
    /// Where its stored bytes start, from the start of the component's span.
    pub at: u64,
    /// Its stored bytes.
    pub size: u64,
    /// The coordinates of its first element (multiples of the chunk's dimensions).
    pub start: Vec<u64>,
    /// Filters skipped for this chunk: bit `i` set skips the pipeline's filter `i`.
    pub mask: u32,
}

/// The longest varint protobuf allows: ten bytes carry 64 bits.
const MAX_VARINT_LEN: usize = 10;

/// Decodes a run of protobuf varints into `dst`, `width` bytes per value (little-endian, the
/// value cast down as C casts it), or one byte per value for `boolean`: 1 when the value's
/// low byte is not zero (as onnx reads `BOOL`: cast to `uint8`, then seen as `bool`, so 256
/// is false).
/// The run must hold exactly `dst.len() / width` values: fewer, more, or a varint that is
/// cut short or longer than ten bytes is an `InvalidFile` error naming the byte of the run.
///
/// ```
/// let mut out = [0u8; 6];
/// // 1, 300 and -1 (ten bytes, as protobuf writes a negative int32) as 2-byte integers.
/// let run = [0x01, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
/// zt_formats::varints_decode_into(&run, 2, false, &mut out).unwrap();
/// assert_eq!(out, [1, 0, 0x2c, 0x01, 0xff, 0xff]);
/// assert!(zt_formats::varints_decode_into(&run[..2], 2, false, &mut out).is_err());
/// ```
pub fn varints_decode_into(src: &[u8], width: usize, boolean: bool, dst: &mut [u8]) -> Result<()> {
    let width = if boolean { 1 } else { width };
    if !matches!(width, 1 | 2 | 4 | 8) || dst.len() % width != 0 {
        return Err(Error::invalid(format!(
            "{} bytes cannot hold {width}-byte values",
            dst.len()
        )));
    }
    let wanted = dst.len() / width;
    let mut at = 0usize;
    let mut slots = dst.chunks_exact_mut(width);
    let mut count = 0usize;
    while at < src.len() {
        let value = next_varint(src, &mut at)?;
        let Some(slot) = slots.next() else {
            return Err(Error::invalid(format!(
                "the run holds more than the {wanted} values the shape needs"
            )));
        };
        let value = if boolean {
            u64::from(value as u8 != 0)
        } else {
            value
        };
        slot.copy_from_slice(value.to_le_bytes().get(..width).unwrap_or_default());
        count += 1;
    }
    if count != wanted {
        return Err(Error::invalid(format!(
            "the run holds {count} values, the shape needs {wanted}"
        )));
    }
    Ok(())
}

/// Reads the varint at `*at` of a run, moving `*at` past it; an error names its byte in the
/// run when it is cut short or longer than ten bytes.
fn next_varint(src: &[u8], at: &mut usize) -> Result<u64> {
    let start = *at;
    let rest = src.get(start..).unwrap_or_default();
    match read_varint(rest) {
        Some((value, len)) => {
            *at += len;
            Ok(value)
        }
        None if rest.len() > MAX_VARINT_LEN => Err(Error::invalid(format!(
            "varint at byte {start} of the run is longer than {MAX_VARINT_LEN} bytes"
        ))),
        None => Err(Error::invalid(format!(
            "varint at byte {start} of the run is cut short"
        ))),
    }
}

/// Decodes a run of protobuf varints, each one element of a sub-byte type, into `dst`
/// packed `bits` to an element, lowest bits first (element `i` is bits `bits * i ..` of the
/// little-endian bit stream), as ONNX keeps FLOAT6 values one to an `int32_data` entry and
/// packs them in `raw_data`. Each value's low `bits` bits are taken, as onnx masks them;
/// bits past the last element are zero. The run must hold exactly `count` values, and
/// `dst` be the `ceil(count * bits / 8)` bytes they pack into.
///
/// ```
/// // Three 6-bit codes: 1, 2 and 63 (a value of 64 + 63 keeps its low six bits).
/// let mut out = [0u8; 3];
/// zt_formats::varint_codes_decode_into(&[0x01, 0x02, 0x7f], 6, 3, &mut out).unwrap();
/// assert_eq!(out, [0b1000_0001, 0b1111_0000, 0b0000_0011]);
/// assert!(zt_formats::varint_codes_decode_into(&[0x01, 0x02], 6, 3, &mut out).is_err());
/// ```
pub fn varint_codes_decode_into(src: &[u8], bits: u8, count: u64, dst: &mut [u8]) -> Result<()> {
    if !(1..8).contains(&bits)
        || count.checked_mul(u64::from(bits)).map(|b| b.div_ceil(8)) != Some(dst.len() as u64)
    {
        return Err(Error::invalid(format!(
            "{} bytes cannot hold {count} values of {bits} bits",
            dst.len()
        )));
    }
    dst.fill(0);
    let mask = (1u16 << bits) - 1;
    let (mut at, mut held) = (0usize, 0u64);
    while at < src.len() {
        let value = next_varint(src, &mut at)?;
        if held == count {
            return Err(Error::invalid(format!(
                "the run holds more than the {count} values the shape needs"
            )));
        }
        // `held < count`, so these bits lie within `dst` (checked above).
        let bit = held * u64::from(bits);
        let code = (value as u16 & mask) << (bit % 8);
        let byte = (bit / 8) as usize;
        for (slot, part) in dst.iter_mut().skip(byte).zip(code.to_le_bytes()) {
            *slot |= part;
        }
        held += 1;
    }
    if held != count {
        return Err(Error::invalid(format!(
            "the run holds {held} values, the shape needs {count}"
        )));
    }
    Ok(())
}

/// The planes of [`Encoding::BitPlanes`] of `bits` bits an element, each `(width, shift)`:
/// the part's width and where it sits in the element, low parts first, and the elements a
/// block holds; `None` for widths OpenVINO does not store so.
fn bit_planes(bits: u8) -> Option<(&'static [(u32, u32)], u64)> {
    match bits {
        1 => Some((&[(1, 0)], 8)),
        3 => Some((&[(2, 0), (1, 2)], 8)),
        6 => Some((&[(4, 0), (2, 4)], 4)),
        _ => None,
    }
}

/// The stored bytes of `count` elements of `bits` bits in bit planes
/// ([`Encoding::BitPlanes`]): whole blocks, the last padded. `None` for a width not stored
/// so.
///
/// ```
/// use zt_formats::bit_planes_len;
/// assert_eq!(bit_planes_len(1, 9), Some(2));
/// assert_eq!(bit_planes_len(3, 9), Some(6)); // two blocks of 8, 3 bytes each
/// assert_eq!(bit_planes_len(6, 5), Some(6)); // two blocks of 4, 3 bytes each
/// assert_eq!(bit_planes_len(2, 4), None);
/// ```
pub fn bit_planes_len(bits: u8, count: u64) -> Option<u64> {
    let (_, block) = bit_planes(bits)?;
    // A block holds `block * bits` bits: a whole number of bytes for every width here.
    count
        .div_ceil(block)
        .checked_mul(block * u64::from(bits) / 8)
}

/// Decodes `src`, unsigned integers of `bits` bits in OpenVINO's bit planes
/// ([`Encoding::BitPlanes`]), into `dst`, one byte an element (`dst.len()` elements). `src`
/// must be exactly [`bit_planes_len`] bytes.
///
/// ```
/// use zt_formats::bit_planes_decode_into;
/// // 0..=7 and 5 as u3: a block's low two bits (00 01 10 11, twice), then its high bits.
/// let stored = [0x1b, 0x1b, 0x0f, 0x40, 0x00, 0x80];
/// let mut values = [0u8; 9];
/// bit_planes_decode_into(&stored, 3, &mut values)?;
/// assert_eq!(values, [0, 1, 2, 3, 4, 5, 6, 7, 5]);
/// # Ok::<(), zt_formats::Error>(())
/// ```
pub fn bit_planes_decode_into(src: &[u8], bits: u8, dst: &mut [u8]) -> Result<()> {
    let count = dst.len() as u64;
    let (Some((planes, block)), Some(len)) = (bit_planes(bits), bit_planes_len(bits, count)) else {
        return Err(Error::invalid(format!(
            "{bits}-bit elements are not stored in bit planes"
        )));
    };
    if src.len() as u64 != len {
        return Err(Error::invalid(format!(
            "{} bytes do not hold {count} elements of {bits} bits in bit planes ({len} do)",
            src.len()
        )));
    }
    // `block` is 4 or 8: the casts cannot truncate.
    let block = block as usize;
    let block_bytes = block * usize::from(bits) / 8;
    for (stored, values) in src.chunks_exact(block_bytes).zip(dst.chunks_mut(block)) {
        values.fill(0);
        let mut plane_at = 0usize;
        for &(width, shift) in planes {
            let mask = (1u8 << width) - 1;
            for (j, value) in values.iter_mut().enumerate() {
                // Highest bits first: part `j` of the plane starts `j * width` bits from the
                // top of the plane's first byte (a part never crosses a byte: widths are
                // powers of two).
                let bit = j * width as usize;
                let byte = stored.get(plane_at + bit / 8).copied().unwrap_or(0);
                let part = (byte >> (8 - width as usize - bit % 8)) & mask;
                *value |= part << shift;
            }
            plane_at += block * width as usize / 8;
        }
    }
    Ok(())
}

/// Decodes a protobuf repeated number field into `dst`, `width` bytes a value, reading it as
/// protobuf reads it from the part of its message `src` holds, which starts at the field's
/// first occurrence (its key gives the field's number): every field of that number is taken
/// in order, a packed run of values (wire type 2) or one value of the field's own wire type
/// (a varint for `varint`, else 4 or 8 little-endian bytes for `width` 4 or 8), and every
/// other field (another number, or this number with another wire type: an unknown field to
/// protobuf) is stepped over. So values written unpacked, packed runs, several runs, both
/// forms in one message and other fields between them all decode as protobuf concatenates
/// them. A varint is cast down to `width` bytes as C casts; with `boolean`, it decodes to 1
/// when its low byte is not zero (as [`varints_decode_into`]). The field must hold exactly
/// `dst.len() / width` values; groups (wire types 3 and 4), a field cut short and a packed
/// run of fixed-width values that is not whole values are `InvalidFile` errors naming the
/// byte of `src`.
///
/// ```
/// // Field 4 as fixed32 floats, unpacked: key 0x25 before each.
/// let mut run = vec![0x25];
/// run.extend(1.5f32.to_le_bytes());
/// run.push(0x25);
/// run.extend((-2.0f32).to_le_bytes());
/// let mut out = [0u8; 8];
/// zt_formats::tagged_decode_into(&run, 4, false, false, &mut out).unwrap();
/// assert_eq!(out[..4], 1.5f32.to_le_bytes());
/// // Field 5 as varint booleans: 2 is true, 256 false (its low byte is zero).
/// let mut flags = [0u8; 2];
/// zt_formats::tagged_decode_into(&[0x28, 0x02, 0x28, 0x80, 0x02], 1, true, true, &mut flags)
///     .unwrap();
/// assert_eq!(flags, [1, 0]);
/// // Field 7 as int64: a packed run of 1 and 2, field 8 ("ab") between, then 3 unpacked.
/// let message = [0x3a, 0x02, 0x01, 0x02, 0x42, 0x02, b'a', b'b', 0x38, 0x03];
/// let mut ints = [0u8; 24];
/// zt_formats::tagged_decode_into(&message, 8, true, false, &mut ints).unwrap();
/// assert_eq!(ints[16], 3);
/// ```
pub fn tagged_decode_into(
    src: &[u8],
    width: usize,
    varint: bool,
    boolean: bool,
    dst: &mut [u8],
) -> Result<()> {
    // The value's own wire type: varint (0), 8 bytes (1), 4 bytes (5).
    let own_wire = match (varint, width) {
        (true, 1 | 2 | 4 | 8) => 0,
        (false, 8) => 1,
        (false, 4) => 5,
        _ => 8,
    };
    if own_wire == 8 || dst.len() % width != 0 {
        return Err(Error::invalid(format!(
            "{} bytes cannot hold {width}-byte {} values",
            dst.len(),
            if varint { "varint" } else { "fixed-width" }
        )));
    }
    let wanted = dst.len() / width;
    let mut values = Values {
        slots: dst.chunks_exact_mut(width),
        wanted,
        count: 0,
    };
    let varint_at = |at: usize| -> Result<(u64, usize)> {
        read_varint(src.get(at..).unwrap_or_default())
            .ok_or_else(|| Error::invalid(format!("malformed varint at byte {at} of the field")))
    };
    let bytes_at = |at: usize, n: usize| -> Result<&[u8]> {
        at.checked_add(n)
            .and_then(|end| src.get(at..end))
            .ok_or_else(|| {
                Error::invalid(format!("a value at byte {at} of the field is cut short"))
            })
    };
    let mut number = None;
    let mut at = 0usize;
    while at < src.len() {
        let field_at = at;
        let (key, n) = varint_at(at)?;
        at += n;
        let wire = key & 7;
        let ours = *number.get_or_insert(key >> 3) == key >> 3;
        let taken = ours && wire == own_wire;
        match wire {
            0 => {
                let (v, n) = varint_at(at)?;
                at += n;
                if taken {
                    values.put(if boolean { u64::from(v as u8 != 0) } else { v })?;
                }
            }
            1 | 5 => {
                let size = if wire == 1 { 8 } else { 4 };
                let bytes = bytes_at(at, size)?;
                at += size;
                if taken {
                    values.put_bytes(bytes)?;
                }
            }
            2 => {
                let (len, n) = varint_at(at)?;
                at += n;
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                let run = bytes_at(at, len)?;
                if ours && varint {
                    let mut rest = run;
                    while !rest.is_empty() {
                        let Some((v, n)) = read_varint(rest) else {
                            return Err(Error::invalid(format!(
                                "malformed varint in the packed run at byte {at} of the field"
                            )));
                        };
                        values.put(if boolean { u64::from(v as u8 != 0) } else { v })?;
                        rest = rest.get(n..).unwrap_or_default();
                    }
                } else if ours {
                    if run.len() % width != 0 {
                        return Err(Error::invalid(format!(
                            "the packed run at byte {at} of the field holds {} bytes, not \
                             whole {width}-byte values",
                            run.len()
                        )));
                    }
                    for value in run.chunks_exact(width) {
                        values.put_bytes(value)?;
                    }
                }
                at += len;
            }
            other => {
                return Err(Error::invalid(format!(
                    "byte {field_at} of the field starts a field of wire type {other} (a group \
                     or no wire type)"
                )))
            }
        }
    }
    values.finish()
}

/// A protobuf varint (base 128, little-endian) at the start of `bytes`: its value and length,
/// or `None` when it is cut short or longer than ten bytes. Bits past the 64th are dropped,
/// as protobuf drops them.
///
/// ```
/// assert_eq!(zt_formats::read_varint(&[0xac, 0x02, 0xff]), Some((300, 2)));
/// assert_eq!(zt_formats::read_varint(&[0x80]), None);
/// ```
pub fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().take(MAX_VARINT_LEN).enumerate() {
        value |= u64::from(b & 0x7f).checked_shl(7 * i as u32).unwrap_or(0);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// The decoded values' slots, filled in order, counted against the shape.
struct Values<'a> {
    slots: std::slice::ChunksExactMut<'a, u8>,
    wanted: usize,
    count: usize,
}

impl Values<'_> {
    /// The next slot, or an error once the shape's values are all there.
    fn next(&mut self) -> Result<&mut [u8]> {
        let wanted = self.wanted;
        self.count += 1;
        self.slots.next().ok_or_else(|| {
            Error::invalid(format!(
                "the field holds more than the {wanted} values the shape needs"
            ))
        })
    }

    /// A varint's value, cast down to the slot's width.
    fn put(&mut self, value: u64) -> Result<()> {
        let slot = self.next()?;
        let width = slot.len();
        slot.copy_from_slice(value.to_le_bytes().get(..width).unwrap_or_default());
        Ok(())
    }

    /// A fixed-width value, its bytes as they are.
    fn put_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.next()?.copy_from_slice(bytes);
        Ok(())
    }

    /// Whether every slot was filled.
    fn finish(self) -> Result<()> {
        if self.count != self.wanted {
            return Err(Error::invalid(format!(
                "the field holds {} values, the shape needs {}",
                self.count, self.wanted
            )));
        }
        Ok(())
    }
}

/// Decodes UTF-8 text whose every character is below 256 into those characters' bytes
/// ([`Encoding::Latin1Text`]): a byte below `0x80` is itself, `0xC2`/`0xC3` and a
/// continuation byte are one byte from `0x80` to `0xFF`. The text must decode to exactly
/// `dst.len()` bytes; anything else (a character above 255, invalid UTF-8, too few or too many
/// characters) is an `InvalidFile` error naming the byte of the text.
///
/// ```
/// let mut out = [0u8; 3];
/// zt_formats::latin1_decode_into("a\u{e9}\u{80}".as_bytes(), &mut out).unwrap();
/// assert_eq!(out, [b'a', 0xe9, 0x80]);
/// assert!(zt_formats::latin1_decode_into("a\u{100}b".as_bytes(), &mut out).is_err());
/// ```
pub fn latin1_decode_into(src: &[u8], dst: &mut [u8]) -> Result<()> {
    let mut at = 0usize;
    for (written, slot) in dst.iter_mut().enumerate() {
        let Some(&lead) = src.get(at) else {
            return Err(Error::invalid(format!(
                "latin-1 text of {} bytes decodes to {written} bytes, {} expected",
                src.len(),
                dst.len()
            )));
        };
        *slot = match lead {
            0x00..=0x7f => {
                at += 1;
                lead
            }
            0xc2 | 0xc3 => match src.get(at + 1) {
                Some(&next @ 0x80..=0xbf) => {
                    at += 2;
                    ((lead & 0x03) << 6) | (next & 0x3f)
                }
                _ => {
                    return Err(Error::invalid(format!(
                        "latin-1 text holds invalid UTF-8 at byte {at}"
                    )))
                }
            },
            _ => {
                return Err(Error::invalid(format!(
                    "latin-1 text holds a character above 255 (or invalid UTF-8) at byte {at}"
                )))
            }
        };
    }
    if at != src.len() {
        return Err(Error::invalid(format!(
            "latin-1 text holds more than the {} bytes expected (it ends at byte {}, not {at})",
            dst.len(),
            src.len()
        )));
    }
    Ok(())
}

/// One piece of an [`Encoding::Pieces`] component: a range of one of the listing's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Piece {
    /// The file, numbered as a component's: 0 the opened file, `n` its shard `n`.
    pub file: u32,
    /// Where the piece starts in that file.
    pub offset: u64,
    /// Its length in bytes.
    pub length: u64,
    /// The CRC-32C its writer recorded over its bytes, checked as it is read.
    pub crc32c: Option<u32>,
}

/// The boxes of an [`Encoding::Boxes`] component, which tile an array of `dims`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BoxTable {
    /// The array's dimensions.
    pub dims: Vec<u64>,
    /// Bytes per element.
    pub element_size: u64,
    /// The boxes, each where it starts and how far it extends in every dimension.
    pub boxes: Vec<(Piece, Vec<u64>, Vec<u64>)>,
    /// Empty when each box's piece holds its elements as they are; else one per box, which
    /// then is a span of what its piece, a zstd stream, decodes to (a compressed chunk of a
    /// PyTorch distributed checkpoint).
    pub spans: Vec<StreamSpan>,
}

/// Where a box's elements lie in what its piece, a zstd stream, decodes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamSpan {
    /// Decoded bytes before the elements.
    pub skip: u64,
    /// The elements' bytes.
    pub len: u64,
    /// Whether a zip data descriptor follows them in the decoded bytes (`PK\x07\x08`, the
    /// CRC-32 of the span, its sizes), which a read checks (with the archive's end, which
    /// ztensor checks).
    pub described: bool,
}

/// The most boxes [`tile`] checks against one another in pairs when they are not whole rows.
pub const MAX_BOXES: usize = 1024;

/// How boxes that tile an array lie, as [`tile`] finds them: the encoding of the one
/// component that reads them, and the first non-empty piece (the component's file and
/// range; `None` when every box is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tiling {
    /// [`Encoding::Raw`] (one box: the whole array), [`Encoding::Pieces`] (whole rows, in row
    /// order) or [`Encoding::Boxes`].
    pub encoding: Encoding,
    /// The first piece with bytes.
    pub first: Option<Piece>,
    /// The array's bytes.
    pub total: u64,
}

/// Checks that `boxes` (each a piece of a file holding its box's elements row-major, where
/// the box starts and how far it extends in each dimension) tile the array of `dims`
/// (`element_size` bytes each) exactly once, and says how to read them ([`Tiling`]). Boxes
/// that are whole rows are put in row order; others (at most [`MAX_BOXES`]) must not overlap
/// and must hold as many bytes as the array. Checkpoints whose tensors are saved in parts
/// (TensorFlow's partitioned variables, PyTorch's distributed checkpoints) are read this way.
/// The error says why they do not tile it.
///
/// ```
/// use zt_formats::{tile, Encoding, Piece};
/// let piece = |offset| Piece { file: 1, offset, length: 4, crc32c: None };
/// // Rows 2..4 and 0..2 of a 4 x 2 array of bytes.
/// let rows = vec![(piece(4), vec![2, 0], vec![2, 2]), (piece(0), vec![0, 0], vec![2, 2])];
/// let t = tile(&[4, 2], 1, rows).unwrap();
/// assert!(matches!(t.encoding, Encoding::Pieces(ref p) if p[0].offset == 0));
/// // One box twice is not a tiling.
/// let twice = vec![(piece(0), vec![0, 0], vec![2, 2]), (piece(4), vec![0, 0], vec![2, 2])];
/// assert!(tile(&[4, 2], 1, twice).is_err());
/// ```
pub fn tile(
    dims: &[u64],
    element_size: u64,
    mut boxes: Vec<(Piece, Vec<u64>, Vec<u64>)>,
) -> std::result::Result<Tiling, String> {
    let total = crate::element_count(dims)
        .ok()
        .and_then(|n| n.checked_mul(element_size))
        .ok_or("its shape overflows")?;
    let mut covered = 0u64;
    for (piece, start, extent) in &boxes {
        let inside = start.len() == dims.len()
            && extent.len() == dims.len()
            && start
                .iter()
                .zip(extent)
                .zip(dims)
                .all(|((&s, &l), &d)| s.checked_add(l).is_some_and(|end| end <= d));
        if !inside {
            return Err(format!(
                "a part at {start:?} of extent {extent:?} does not lie in its shape {dims:?}"
            ));
        }
        let bytes = crate::element_count(extent)
            .ok()
            .and_then(|n| n.checked_mul(element_size));
        if bytes != Some(piece.length) {
            return Err(format!(
                "a part of extent {extent:?} holds {} bytes, not its box's {}",
                piece.length,
                bytes.map_or("(overflowing)".to_owned(), |b| b.to_string())
            ));
        }
        covered = covered.saturating_add(piece.length);
    }
    if dims.is_empty() && boxes.len() != 1 {
        return Err(format!("a scalar in {} parts", boxes.len()));
    }
    // Whole rows: the boxes in row order must follow one another exactly.
    let by_rows = boxes
        .iter()
        .all(|(_, _, extent)| extent.get(1..) == dims.get(1..));
    if by_rows {
        boxes.sort_by_key(|(_, start, _)| start.first().copied().unwrap_or(0));
        let mut next = 0u64;
        for (_, start, extent) in &boxes {
            if start.first().copied().unwrap_or(0) != next {
                return Err(format!("its parts do not cover rows {next}.. exactly once"));
            }
            next = next.saturating_add(extent.first().copied().unwrap_or(0));
        }
        if next != dims.first().copied().unwrap_or(0) {
            return Err(format!("its parts cover {next} of its rows"));
        }
    } else {
        // Boxes of any shape: as many bytes as the array, and no two overlapping, is an
        // exact tiling.
        if boxes.len() > MAX_BOXES {
            return Err(format!("more than {MAX_BOXES} parts not cut along rows"));
        }
        // Every start and extent was checked to end inside the shape: no overflow.
        let overlap = |(_, s1, e1): &(Piece, Vec<u64>, Vec<u64>),
                       (_, s2, e2): &(Piece, Vec<u64>, Vec<u64>)| {
            s1.iter()
                .zip(e1)
                .zip(s2.iter().zip(e2))
                .all(|((&a, &la), (&b, &lb))| a.max(b) < (a + la).min(b + lb))
        };
        let clash = boxes
            .iter()
            .enumerate()
            .any(|(i, b)| boxes.iter().skip(i + 1).any(|other| overlap(b, other)));
        if clash || covered != total {
            return Err("its parts do not cover it exactly once".to_owned());
        }
    }
    let boxes: Vec<_> = boxes.into_iter().filter(|(p, ..)| p.length > 0).collect();
    let first = boxes.first().map(|(p, ..)| *p);
    let encoding = if boxes.len() <= 1 {
        Encoding::Raw
    } else if by_rows {
        Encoding::Pieces(Box::new(boxes.into_iter().map(|(p, ..)| p).collect()))
    } else {
        Encoding::Boxes(Box::new(BoxTable {
            dims: dims.to_vec(),
            element_size,
            boxes,
            spans: Vec::new(),
        }))
    };
    Ok(Tiling {
        encoding,
        first,
        total,
    })
}

/// Copies the elements of one box, `src` (row-major, `extent` in each dimension), into
/// their places in `dst`, the row-major array of `dims` (`element_size` bytes each), at
/// `start`. Runs are copied whole: the dimensions after the last the box cuts are contiguous
/// in both. A box that does not fit the array, or `src` or `dst` of the wrong size, is an
/// `InvalidFile` error.
///
/// ```
/// // Column 1 of a 2 x 3 array of bytes.
/// let mut dst = [0u8; 6];
/// zt_formats::place_box(&[2, 3], 1, &[0, 1], &[2, 1], &[7, 8], &mut dst).unwrap();
/// assert_eq!(dst, [0, 7, 0, 0, 8, 0]);
/// assert!(zt_formats::place_box(&[2, 3], 1, &[1, 1], &[2, 1], &[7, 8], &mut dst).is_err());
/// ```
pub fn place_box(
    dims: &[u64],
    element_size: usize,
    start: &[u64],
    extent: &[u64],
    src: &[u8],
    dst: &mut [u8],
) -> Result<()> {
    let bad = |what: &str| Error::invalid(format!("a box {start:?} + {extent:?} {what}"));
    if start.len() != dims.len() || extent.len() != dims.len() {
        return Err(bad("is not of the array's rank"));
    }
    let fits = dims
        .iter()
        .zip(start.iter().zip(extent))
        .all(|(&d, (&s, &e))| s.checked_add(e).is_some_and(|end| end <= d));
    if !fits {
        return Err(bad(&format!("runs past the array's dimensions {dims:?}")));
    }
    let size = |shape: &[u64]| -> Option<usize> {
        shape
            .iter()
            .try_fold(element_size as u64, |n, &d| n.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
    };
    if size(extent) != Some(src.len()) || size(dims) != Some(dst.len()) {
        return Err(bad("and its bytes do not have the sizes their shapes take"));
    }
    if src.is_empty() {
        return Ok(());
    }
    // The last dimension the box does not cover whole: runs span it and everything after.
    let cut = (0..dims.len())
        .rev()
        .find(|&d| extent.get(d) != dims.get(d))
        .unwrap_or(0);
    let inner = size(dims.get(cut + 1..).unwrap_or_default()).unwrap_or(element_size);
    let run = extent.get(cut).map_or(1, |&e| e as usize) * inner;
    // Row-major strides of the array, in bytes.
    let mut strides = vec![0usize; dims.len()];
    let mut step = element_size;
    for (s, &d) in strides.iter_mut().zip(dims).rev() {
        *s = step;
        step = step.saturating_mul(d as usize);
    }
    let mut index = vec![0u64; cut];
    for chunk in src.chunks_exact(run) {
        let at = (0..=cut)
            .map(|d| {
                let i = index.get(d).copied().unwrap_or(0);
                (start.get(d).copied().unwrap_or(0) + i) as usize
                    * strides.get(d).copied().unwrap_or(0)
            })
            .sum::<usize>();
        dst.get_mut(at..at + run)
            .ok_or_else(|| bad("lands outside the array"))?
            .copy_from_slice(chunk);
        // The next outer index, the last dimension fastest.
        for d in (0..cut).rev() {
            if let (Some(i), Some(&e)) = (index.get_mut(d), extent.get(d)) {
                *i += 1;
                if *i < e {
                    break;
                }
                *i = 0;
            }
        }
    }
    Ok(())
}

/// Places `pieces` one after the other in `dst` ([`Encoding::Pieces`]), each read into its
/// place by `read(piece, place)`. The pieces must fill `dst` exactly; one that would run
/// past it, or pieces that leave part of it unfilled, are an `InvalidFile` error naming
/// the piece.
///
/// ```
/// use zt_formats::Piece;
/// let file = b"..abc....de";
/// let read = |p: &Piece, out: &mut [u8]| {
///     out.copy_from_slice(&file[p.offset as usize..][..out.len()]);
///     Ok(())
/// };
/// let piece = |offset, length| Piece { file: 0, offset, length, crc32c: None };
/// let pieces = [piece(2, 3), piece(9, 2)];
/// let mut out = [0u8; 5];
/// zt_formats::pieces_decode_into(&pieces, &mut out, read).unwrap();
/// assert_eq!(&out, b"abcde");
/// assert!(zt_formats::pieces_decode_into(&pieces[..1], &mut out, read).is_err());
/// ```
pub fn pieces_decode_into(
    pieces: &[Piece],
    dst: &mut [u8],
    mut read: impl FnMut(&Piece, &mut [u8]) -> Result<()>,
) -> Result<()> {
    let expected = dst.len();
    let mut filled = 0usize;
    for (i, piece) in pieces.iter().enumerate() {
        let place = usize::try_from(piece.length)
            .ok()
            .and_then(|n| filled.checked_add(n))
            .and_then(|end| dst.get_mut(filled..end))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "piece {i} ({} bytes) runs past the {expected} bytes the pieces should make",
                    piece.length
                ))
            })?;
        read(piece, place)?;
        filled += place.len();
    }
    if filled != expected {
        return Err(Error::invalid(format!(
            "the pieces make {filled} bytes, {expected} expected"
        )));
    }
    Ok(())
}

/// Default cap on one component's decompressed size: 4 GiB.
pub const DEFAULT_MAX_DECOMPRESSED: u64 = 4 << 30;

/// Decompresses a zstd stream that must inflate to exactly `expected` bytes.
///
/// `expected` is checked against `cap` before anything is allocated; the output buffer is then
/// exactly `expected` bytes and is filled by [`zstd_decode_into`], with its rules and errors.
#[cfg(feature = "zstd")]
pub fn zstd_decompress_exact(src: &[u8], expected: u64, cap: u64) -> Result<Vec<u8>> {
    if expected > cap {
        return Err(Error::limit(format!(
            "declared decompressed size {expected} exceeds the cap of {cap} bytes"
        )));
    }
    let n =
        usize::try_from(expected).map_err(|_| Error::limit("decompressed size exceeds usize"))?;
    let mut out = vec![0u8; n];
    zstd_decode_into(src, &mut out)?;
    Ok(out)
}

/// Decodes a zstd stream that must inflate to exactly `dst.len()` bytes, into `dst`.
///
/// This is the canonical decode path for components whose decoded size is declared. Nothing
/// is allocated for the output: a stream that would inflate past `dst` fails inside zstd
/// ("inflates past its declared length"), and one that inflates to fewer bytes fails after it
/// ("inflates to N bytes, fewer than the declared M"). Both, and a corrupt stream, are
/// [`ErrorKind::InvalidFile`](zt_container::ErrorKind::InvalidFile) errors.
#[cfg(feature = "zstd")]
pub fn zstd_decode_into(src: &[u8], dst: &mut [u8]) -> Result<()> {
    let got = decompress_frames(src, dst)?;
    if got != dst.len() {
        return Err(Error::invalid(format!(
            "zstd stream inflates to {got} bytes, fewer than the declared {}",
            dst.len()
        )));
    }
    Ok(())
}

/// Decodes a zstd stream compressed with the dictionary `dict` (a trained dictionary, or raw
/// content when it lacks a dictionary's magic, as zstd takes either) into `dst`, which it
/// must fill exactly, with [`zstd_decode_into`]'s rules and errors.
#[cfg(feature = "zstd")]
pub fn zstd_decode_with_dict_into(src: &[u8], dict: &[u8], dst: &mut [u8]) -> Result<()> {
    let got = with_dctx(|dctx| dctx.decompress_using_dict(&mut *dst, src, dict))
        .map_err(|code| zstd_error(code, dst.len()))?;
    if got != dst.len() {
        return Err(Error::invalid(format!(
            "zstd stream inflates to {got} bytes, fewer than the declared {}",
            dst.len()
        )));
    }
    Ok(())
}

/// The one call into zstd's one-shot decoder, and its error mapping: decodes every frame of
/// `src` into `dst` and returns the bytes written, never writing past `dst`.
#[cfg(feature = "zstd")]
fn decompress_frames(src: &[u8], dst: &mut [u8]) -> Result<usize> {
    with_dctx(|dctx| dctx.decompress(&mut *dst, src)).map_err(|code| zstd_error(code, dst.len()))
}

/// Runs `op` with this thread's decompression context. One context per thread, kept: making
/// one (about 160 KiB, set up) took a sixth of the time of reading 20,000 small zstd
/// tensors. The one-shot calls start each frame afresh (and load a dictionary each time), so
/// nothing carries over from the last stream, a failed one included. A thread that is ending
/// (its context gone), or a call within a call, gets a context of its own.
#[cfg(feature = "zstd")]
fn with_dctx<T>(mut op: impl FnMut(&mut zstd::zstd_safe::DCtx<'static>) -> T) -> T {
    use zstd::zstd_safe::DCtx;
    thread_local! {
        static DCTX: std::cell::RefCell<DCtx<'static>> = std::cell::RefCell::new(DCtx::create());
    }
    let done = DCTX
        .try_with(|cell| cell.try_borrow_mut().ok().map(|mut dctx| op(&mut dctx)))
        .ok()
        .flatten();
    match done {
        Some(done) => done,
        None => op(&mut DCtx::create()),
    }
}

/// The error for zstd's error `code` from a decode into `len` bytes.
#[cfg(feature = "zstd")]
fn zstd_error(code: usize, len: usize) -> Error {
    let name = zstd::zstd_safe::get_error_name(code);
    if name.contains("Destination buffer is too small") {
        Error::invalid(format!(
            "zstd stream inflates past its declared length of {len} bytes"
        ))
    } else {
        Error::invalid(format!("corrupt zstd stream: {name}"))
    }
}

/// The decompressed size the header of the zstd frame at the start of `src` records, if it
/// records one. `None` when the frame omits it (streams written without a known size) or `src`
/// does not start with a valid frame header. The value is the file's claim, not a checked
/// fact: decode with [`zstd_decode_into`] into a buffer of that size, after capping it.
#[cfg(feature = "zstd")]
pub fn zstd_frame_content_size(src: &[u8]) -> Option<u64> {
    zstd::zstd_safe::get_frame_content_size(src).ok().flatten()
}

/// A reader of what a zstd stream (one frame or several, with or without their sizes)
/// decodes to, decoding as it is read: for a stream wanted in part, such as its first bytes.
/// Its errors are [`std::io::Error`]s that say the stream is corrupt.
///
/// ```
/// use std::io::Read;
/// let stream = zstd::encode_all(&b"header, then the rest"[..], 3).unwrap();
/// let mut first = [0u8; 6];
/// zt_formats::zstd_stream_reader(&stream).unwrap().read_exact(&mut first).unwrap();
/// assert_eq!(&first, b"header");
/// ```
#[cfg(feature = "zstd")]
pub fn zstd_stream_reader(src: &[u8]) -> Result<impl std::io::Read + '_> {
    zstd::stream::read::Decoder::with_buffer(src).map_err(|e| Error::io(e, "cannot start zstd"))
}

/// [`zstd_stream_reader`] over a stream read from `input` as it is needed (through a buffer
/// of its own), for a stream of which only the front is decoded: the rest is never read.
///
/// ```
/// use std::io::Read;
/// let stream = zstd::encode_all(&b"header, then the rest"[..], 3).unwrap();
/// let mut first = [0u8; 6];
/// zt_formats::zstd_reader(stream.as_slice()).unwrap().read_exact(&mut first).unwrap();
/// assert_eq!(&first, b"header");
/// ```
#[cfg(feature = "zstd")]
pub fn zstd_reader<'r>(input: impl std::io::Read + 'r) -> Result<impl std::io::Read + 'r> {
    zstd::stream::read::Decoder::new(input).map_err(|e| Error::io(e, "cannot start zstd"))
}

/// Decodes `dst.len()` bytes of a zstd stream from `skip` bytes into it: the first `skip` are
/// decoded and dropped, nothing after `dst`'s last byte is decoded (a span inside a stream
/// that goes on). A stream that ends first, or is corrupt, is an
/// [`ErrorKind::InvalidFile`](zt_container::ErrorKind::InvalidFile) error.
///
/// ```
/// let stream = zstd::encode_all(&b"header, then the rest"[..], 3).unwrap();
/// let mut span = [0u8; 4];
/// zt_formats::zstd_part_into(&stream, 8, &mut span).unwrap();
/// assert_eq!(&span, b"then");
/// assert!(zt_formats::zstd_part_into(&stream, 20, &mut span).is_err());
/// ```
#[cfg(feature = "zstd")]
pub fn zstd_part_into(src: &[u8], skip: u64, dst: &mut [u8]) -> Result<()> {
    zstd_part_then(src, skip, dst).map(drop)
}

/// [`zstd_part_into`] that hands back the stream where `dst` ends, for what follows the part
/// (a zip record's data descriptor after the record's bytes).
///
/// ```
/// use std::io::Read;
/// let stream = zstd::encode_all(&b"skip this, then more"[..], 3).unwrap();
/// let mut span = [0u8; 4];
/// let mut rest = String::new();
/// zt_formats::zstd_part_then(&stream, 11, &mut span).unwrap().read_to_string(&mut rest).unwrap();
/// assert_eq!((&span, rest.as_str()), (b"then", " more"));
/// ```
#[cfg(feature = "zstd")]
pub fn zstd_part_then<'s>(
    src: &'s [u8],
    skip: u64,
    dst: &mut [u8],
) -> Result<impl std::io::Read + 's> {
    use std::io::Read;
    let mut stream = zstd_stream_reader(src)?;
    let corrupt = |e: std::io::Error| Error::invalid(format!("corrupt zstd stream: {e}"));
    let skipped =
        std::io::copy(&mut (&mut stream).take(skip), &mut std::io::sink()).map_err(corrupt)?;
    let mut filled = 0;
    while filled < dst.len() && skipped == skip {
        match stream.read(&mut dst[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(corrupt(e)),
        }
    }
    if skipped != skip || filled != dst.len() {
        let got = skipped.saturating_add(filled as u64);
        let want = skip.saturating_add(dst.len() as u64);
        return Err(Error::invalid(format!(
            "zstd stream ends after {got} bytes, before the {want} it must hold"
        )));
    }
    Ok(stream)
}

/// Decompresses a zstd stream of unknown size, refusing to produce more than `cap` bytes.
/// Used only for legacy components that declare no size (v1.1, v0.1 sparse); the buffer grows
/// with the output, so memory follows what the stream really holds, up to the cap.
#[cfg(feature = "zstd")]
pub fn zstd_decompress_bounded(src: &[u8], cap: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut dec = zstd::stream::read::Decoder::with_buffer(src)
        .map_err(|e| Error::io(e, "cannot start zstd"))?;
    let mut out = Vec::new();
    let limit = cap.saturating_add(1);
    (&mut dec)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| Error::invalid(format!("corrupt zstd stream: {e}")))?;
    if out.len() as u64 > cap {
        return Err(Error::limit(format!(
            "zstd stream inflates past the cap of {cap} bytes"
        )));
    }
    Ok(out)
}

/// Inputs at least this large are compressed by zstd's own worker threads.
#[cfg(feature = "zstd")]
pub const ZSTD_PARALLEL_MIN: usize = 2 << 20;

/// The size of one zstd job in multithreaded mode.
#[cfg(feature = "zstd")]
const ZSTD_JOB_SIZE: u32 = 1 << 20;

/// Compresses `data` at `level` (1-22; 3 is zstd's default) into one frame that records its
/// content size. Large inputs use every core through zstd's multithreaded mode, whose output
/// does not depend on the number of workers or their timing: equal input gives equal bytes.
#[cfg(feature = "zstd")]
pub fn zstd_compress(data: &[u8], level: i32) -> Result<Vec<u8>> {
    // Large inputs always take the multithreaded mode, even with one core: its output differs
    // from the single-threaded mode's, and must not depend on the machine.
    let workers = if data.len() >= ZSTD_PARALLEL_MIN {
        available_threads()
    } else {
        0
    };
    zstd_compress_with_threads(data, level, workers)
}

/// As [`zstd_compress`] with an explicit number of zstd worker threads (0: zstd's
/// single-threaded mode; 1 or more: its multithreaded mode, whose output is the same for any
/// number of workers).
#[cfg(feature = "zstd")]
pub fn zstd_compress_with_threads(data: &[u8], level: i32, threads: usize) -> Result<Vec<u8>> {
    use zstd::zstd_safe::{CCtx, CParameter};
    thread_local! {
        // One context per thread, kept: a multithreaded context owns a pool of workers, and
        // starting that pool for every tensor would cost more than it saves.
        static CCTX: std::cell::RefCell<CCtx<'static>> = std::cell::RefCell::new(CCtx::create());
    }
    let fail = |code: usize| {
        Error::io(
            std::io::Error::other(zstd::zstd_safe::get_error_name(code)),
            "zstd compression failed",
        )
    };
    CCTX.with(|cell| {
        let mut cctx = cell.borrow_mut();
        cctx.reset(zstd::zstd_safe::ResetDirective::SessionAndParameters)
            .map_err(fail)?;
        cctx.set_parameter(CParameter::CompressionLevel(level))
            .map_err(fail)?;
        cctx.set_parameter(CParameter::ContentSizeFlag(true))
            .map_err(fail)?;
        // A fixed job size: small enough that a few-MiB tensor splits into jobs for every
        // core, and fixed so the output never depends on the machine.
        let workers = u32::try_from(threads).unwrap_or(u32::MAX);
        cctx.set_parameter(CParameter::NbWorkers(workers))
            .map_err(fail)?;
        if workers > 0 {
            cctx.set_parameter(CParameter::JobSize(ZSTD_JOB_SIZE))
                .map_err(fail)?;
        }
        let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len()));
        cctx.compress2(&mut out, data).map_err(fail)?;
        Ok(out)
    })
}

/// Cores this process may use.
pub fn available_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(all(test, feature = "zstd"))]
mod tests {
    use super::*;

    /// The bytes OpenVINO 2026.4.1 stores for its `u1`, `u3` and `u6` constants of these
    /// values (`ops.constant(values, dtype=ov.Type.u1)` and so on), and what they decode to.
    #[test]
    fn bit_planes_decode_as_openvino_stores_them() {
        let cases: [(u8, &[u8], &[u8]); 3] = [
            (1, &[0xb2, 0x80], &[1, 0, 1, 1, 0, 0, 1, 0, 1]),
            (
                3,
                &[0x1b, 0x1b, 0x0f, 0x40, 0x00, 0x80],
                &[0, 1, 2, 3, 4, 5, 6, 7, 5],
            ),
            (
                6,
                &[0x01, 0xf0, 0x0e, 0x10, 0x00, 0x40],
                &[0, 1, 63, 32, 17],
            ),
        ];
        for (bits, stored, values) in cases {
            assert_eq!(
                bit_planes_len(bits, values.len() as u64),
                Some(stored.len() as u64)
            );
            let mut got = vec![0xffu8; values.len()];
            bit_planes_decode_into(stored, bits, &mut got).unwrap();
            assert_eq!(got, values, "{bits} bits");
            // One byte short or long is refused, naming both lengths.
            let e = bit_planes_decode_into(&stored[1..], bits, &mut got).unwrap_err();
            assert!(
                e.message().contains(&format!("({} do)", stored.len())),
                "{e}"
            );
        }
        // Fewer bytes than elements: no count overflows.
        assert_eq!(bit_planes_len(6, u64::MAX), Some(u64::MAX.div_ceil(4) * 3));
        assert!(bit_planes_decode_into(&[], 4, &mut []).is_err());
        bit_planes_decode_into(&[], 3, &mut []).unwrap();
    }

    /// Packs `values` as OpenVINO's packer does (per block, each plane's parts highest bits
    /// first): the inverse the decoder must undo.
    fn pack_bit_planes(bits: u8, values: &[u8]) -> Vec<u8> {
        let (planes, block) = bit_planes(bits).unwrap();
        let block = block as usize;
        let mut out = vec![0u8; bit_planes_len(bits, values.len() as u64).unwrap() as usize];
        let block_bytes = block * usize::from(bits) / 8;
        for (b, chunk) in values.chunks(block).enumerate() {
            let mut plane_at = b * block_bytes;
            for &(width, shift) in planes {
                for (j, &v) in chunk.iter().enumerate() {
                    let part = (v >> shift) & ((1 << width) - 1);
                    let bit = j * width as usize;
                    out[plane_at + bit / 8] |= part << (8 - width as usize - bit % 8);
                }
                plane_at += block * width as usize / 8;
            }
        }
        out
    }

    proptest::proptest! {
        /// Any values of 1, 3 or 6 bits packed into bit planes decode to themselves; any
        /// bytes of any length decode or are refused, never panic.
        #[test]
        fn bit_planes_round_trip(
            which in 0usize..3,
            raw in proptest::collection::vec(proptest::num::u8::ANY, 0..70),
            junk in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
            count in 0usize..90,
        ) {
            let bits = [1u8, 3, 6][which];
            let values: Vec<u8> = raw.iter().map(|v| v & ((1 << bits) - 1)).collect();
            let stored = pack_bit_planes(bits, &values);
            let mut got = vec![0xff; values.len()];
            bit_planes_decode_into(&stored, bits, &mut got).unwrap();
            proptest::prop_assert_eq!(got, values);
            let mut out = vec![0u8; count];
            let fits = bit_planes_len(bits, count as u64) == Some(junk.len() as u64);
            proptest::prop_assert_eq!(bit_planes_decode_into(&junk, bits, &mut out).is_ok(), fits);
        }
    }
    use zt_container::ErrorKind;

    /// Codes of every width and count pack as the little-endian bit stream a `u128` holds,
    /// wide values keep their low bits, and a count the run does not hold is refused.
    #[test]
    fn varint_codes_pack_lowest_bits_first() {
        for bits in 1..8u8 {
            for count in 0..16u64 {
                let values: Vec<u64> = (0..count).map(|i| i * 37 + 200 * (i % 3)).collect();
                let mut run = Vec::new();
                for &v in &values {
                    let mut v = v;
                    while v >= 0x80 {
                        run.push(v as u8 | 0x80);
                        v >>= 7;
                    }
                    run.push(v as u8);
                }
                let mask = (1u128 << bits) - 1;
                let stream = values.iter().enumerate().fold(0u128, |acc, (i, &v)| {
                    acc | (u128::from(v) & mask) << (i as u32 * u32::from(bits))
                });
                let len = (count * u64::from(bits)).div_ceil(8) as usize;
                let mut out = vec![0xAAu8; len];
                varint_codes_decode_into(&run, bits, count, &mut out).unwrap();
                assert_eq!(out, stream.to_le_bytes()[..len], "{bits} bits, {count}");
                if count > 0 {
                    let e = varint_codes_decode_into(&run, bits, count - 1, &mut out);
                    assert!(e.is_err(), "{bits} bits, {count}");
                }
            }
        }
        assert!(varint_codes_decode_into(&[1], 8, 1, &mut [0]).is_err());
        assert!(varint_codes_decode_into(&[1], 6, 1, &mut [0, 0]).is_err());
        let e = varint_codes_decode_into(&[0x80], 6, 1, &mut [0]).unwrap_err();
        assert_eq!(e.message(), "varint at byte 0 of the run is cut short");
    }

    #[test]
    fn exact_round_trip() {
        let data: Vec<u8> = (0..10_000u32).flat_map(|i| (i % 7).to_le_bytes()).collect();
        let z = zstd_compress(&data, 3).unwrap();
        assert_eq!(
            zstd_decompress_exact(&z, data.len() as u64, 1 << 20).unwrap(),
            data
        );
    }

    #[test]
    fn too_long_too_short_corrupt_and_over_cap() {
        let z = zstd_compress(&[7u8; 1000], 3).unwrap();
        let e = zstd_decompress_exact(&z, 999, 1 << 20).unwrap_err();
        assert!(
            e.message()
                .contains("inflates past its declared length of 999"),
            "{e}"
        );
        let e = zstd_decompress_exact(&z, 1001, 1 << 20).unwrap_err();
        assert!(e.message().contains("fewer than the declared 1001"), "{e}");
        let e = zstd_decompress_exact(&z, 1000, 999).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded);
        let e = zstd_decompress_exact(&z[..z.len() - 3], 1000, 1 << 20).unwrap_err();
        assert!(e.message().starts_with("corrupt zstd stream"), "{e}");
        let e = zstd_decompress_exact(b"not zstd", 8, 1 << 20).unwrap_err();
        assert!(e.message().starts_with("corrupt zstd stream"), "{e}");
    }

    #[test]
    fn decode_into_exact_short_long_and_corrupt() {
        let data: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
        let z = zstd_compress(&data, 3).unwrap();

        let mut exact = vec![0u8; data.len()];
        zstd_decode_into(&z, &mut exact).unwrap();
        assert_eq!(exact, data);

        // The buffer is shorter than the stream: it inflates past the declared length.
        let mut short = vec![0u8; data.len() - 1];
        let e = zstd_decode_into(&z, &mut short).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidFile);
        assert!(
            e.message()
                .contains("inflates past its declared length of 3999 bytes"),
            "{e}"
        );

        // The buffer is longer than the stream: it inflates to fewer bytes than declared.
        let mut long = vec![0u8; data.len() + 1];
        let e = zstd_decode_into(&z, &mut long).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidFile);
        assert!(
            e.message()
                .contains("inflates to 4000 bytes, fewer than the declared 4001"),
            "{e}"
        );

        // A stream without a recorded size takes the same checks.
        let unsized_z = zstd::stream::encode_all(&data[..], 3).unwrap();
        let e = zstd_decode_into(&unsized_z, &mut long).unwrap_err();
        assert!(e.message().contains("fewer than the declared 4001"), "{e}");
        zstd_decode_into(&unsized_z, &mut exact).unwrap();
        assert_eq!(exact, data);

        for corrupt in [&z[..z.len() - 3], b"not zstd"] {
            let e = zstd_decode_into(corrupt, &mut exact).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidFile);
            assert!(e.message().starts_with("corrupt zstd stream"), "{e}");
        }
        // No frames at all inflate to nothing: short of any non-empty declared length.
        let e = zstd_decode_into(&[], &mut exact).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidFile);
        assert!(e.message().contains("inflates to 0 bytes"), "{e}");
    }

    #[test]
    fn frame_content_size_with_and_without_a_recorded_size() {
        let data = [9u8; 1234];
        assert_eq!(
            zstd_frame_content_size(&zstd_compress(&data, 3).unwrap()),
            Some(1234)
        );
        assert_eq!(
            zstd_frame_content_size(&zstd_compress(&[], 3).unwrap()),
            Some(0)
        );
        let unsized_z = zstd::stream::encode_all(&data[..], 3).unwrap();
        assert_eq!(zstd_frame_content_size(&unsized_z), None);
        assert_eq!(zstd_frame_content_size(b"not zstd"), None);
        assert_eq!(zstd_frame_content_size(&[]), None);
    }

    #[test]
    fn multithreaded_output_is_deterministic_and_decodes() {
        let data: Vec<u8> = (0..(6u32 << 20))
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 27) as u8)
            .collect();
        let a = zstd_compress_with_threads(&data, 3, 2).unwrap();
        assert_eq!(a, zstd_compress_with_threads(&data, 3, 2).unwrap());
        assert_eq!(
            a,
            zstd_compress_with_threads(&data, 3, 1).unwrap(),
            "independent of the worker count"
        );
        assert_eq!(
            a,
            zstd_compress_with_threads(&data, 3, 4).unwrap(),
            "independent of the worker count"
        );
        assert_eq!(
            a,
            zstd_compress(&data, 3).unwrap(),
            "what the writer uses, on any machine"
        );
        assert_eq!(
            zstd_decompress_exact(&a, data.len() as u64, 1 << 30).unwrap(),
            data
        );
    }

    #[test]
    fn the_kept_context_decodes_well_after_failures() {
        // Each thread keeps one context: a stream that failed half way (past its buffer,
        // truncated, not zstd) must leave nothing that changes the next decode.
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let other: Vec<u8> = (0..70_000u32).map(|i| (i * 7 % 13) as u8).collect();
        let z = zstd_compress(&data, 3).unwrap();
        let z_other = zstd_compress(&other, 19).unwrap();
        for _ in 0..3 {
            assert!(zstd_decompress_exact(&z, 1000, 1 << 20).is_err());
            assert!(zstd_decompress_exact(&z[..z.len() / 2], 200_000, 1 << 20).is_err());
            assert!(zstd_decompress_exact(b"not zstd at all", 8, 1 << 20).is_err());
            assert_eq!(
                zstd_decompress_exact(&z_other, 70_000, 1 << 20).unwrap(),
                other
            );
            assert_eq!(zstd_decompress_exact(&z, 200_000, 1 << 20).unwrap(), data);
        }
        // From another thread, with a context of its own.
        std::thread::spawn(move || {
            assert_eq!(zstd_decompress_exact(&z, 200_000, 1 << 20).unwrap(), data)
        })
        .join()
        .unwrap();
    }

    #[test]
    fn bounded_decompression_of_unknown_size() {
        let z = zstd_compress(&[5u8; 3000], 3).unwrap();
        assert_eq!(zstd_decompress_bounded(&z, 3000).unwrap().len(), 3000);
        assert_eq!(
            zstd_decompress_bounded(&z, 2999).unwrap_err().kind(),
            ErrorKind::LimitExceeded
        );
        assert!(zstd_decompress_bounded(b"junk", 100).is_err());
    }

    #[test]
    fn a_bomb_never_allocates_past_the_declared_length() {
        // 1 GiB of zeros compresses to a few KiB; declared as 1 KiB it must fail, having
        // allocated only the 1 KiB.
        let chunk = vec![0u8; 1 << 20];
        let mut out = Vec::new();
        let mut enc = zstd::stream::write::Encoder::new(&mut out, 19).unwrap();
        for _ in 0..64 {
            std::io::Write::write_all(&mut enc, &chunk).unwrap();
        }
        enc.finish().unwrap();
        assert!(out.len() < 64 << 10);
        let e = zstd_decompress_exact(&out, 1024, 1 << 20).unwrap_err();
        assert!(e.message().contains("inflates past"), "{e}");
    }

    /// A repeated field in every form protobuf reads: packed runs, single values, other
    /// fields and this number with another wire type between them (both unknown to
    /// protobuf, stepped over); and the errors, each naming the byte.
    #[test]
    fn a_repeated_field_is_gathered_as_protobuf_reads_it() {
        let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        // Field 4, floats: a packed run of two, field 8 (bytes), 3.0 alone, field 4 as a
        // varint (another wire type: unknown), a packed run of one.
        let mut message = vec![0x22, 8];
        message.extend(f32s(&[1.0, 2.0]));
        message.extend([0x42, 2, b'h', b'i', 0x25]);
        message.extend(f32s(&[3.0]));
        message.extend([0x20, 0x07, 0x22, 4]);
        message.extend(f32s(&[4.0]));
        let mut out = [0u8; 16];
        tagged_decode_into(&message, 4, false, false, &mut out).unwrap();
        assert_eq!(out.as_slice(), f32s(&[1.0, 2.0, 3.0, 4.0]).as_slice());
        // Too few and too many values for the shape.
        let e = tagged_decode_into(&message, 4, false, false, &mut [0u8; 20]).unwrap_err();
        assert!(
            e.message().contains("holds 4 values, the shape needs 5"),
            "{e}"
        );
        let e = tagged_decode_into(&message, 4, false, false, &mut [0u8; 12]).unwrap_err();
        assert!(e.message().contains("more than the 3 values"), "{e}");
        // Field 5, int32 as 2-byte values: a run of 1 and 300, a fixed32 of field 5
        // (unknown), -1 alone, a run of 7.
        let mut ints = vec![0x2a, 3, 0x01, 0xac, 0x02, 0x2d, 0, 0, 0, 0, 0x28];
        ints.extend([0xff; 9]);
        ints.extend([0x01, 0x2a, 1, 7]);
        let mut out = [0u8; 8];
        tagged_decode_into(&ints, 2, true, false, &mut out).unwrap();
        assert_eq!(out, [1, 0, 0x2c, 0x01, 0xff, 0xff, 7, 0]);
        for (bytes, width, varint, message) in [
            (
                &[0x2b, 0x2c][..],
                4,
                false,
                "byte 0 of the field starts a field of wire type 3",
            ),
            (
                &[0x25, 1, 2],
                4,
                false,
                "a value at byte 1 of the field is cut short",
            ),
            (
                &[0x22, 3, 1, 2, 3],
                4,
                false,
                "holds 3 bytes, not whole 4-byte values",
            ),
            (
                &[0x22, 9, 1, 2],
                4,
                false,
                "a value at byte 2 of the field is cut short",
            ),
            (
                &[0x28, 0x80],
                4,
                true,
                "malformed varint at byte 1 of the field",
            ),
            (
                &[0x2a, 1, 0x80],
                4,
                true,
                "malformed varint in the packed run at byte 2",
            ),
            (
                &[0x25, 0, 0, 0, 0],
                2,
                false,
                "cannot hold 2-byte fixed-width values",
            ),
        ] {
            let e = tagged_decode_into(bytes, width, varint, false, &mut [0u8; 8]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
            assert!(e.message().contains(message), "{message}: {e}");
        }
    }
}
