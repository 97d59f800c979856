//! Decoding an HDF5 chunked dataset ([`zt_formats::Encoding::Hdf5Chunks`]): each chunk's
//! stored bytes are unfiltered in the reverse of the order the writer applied its filters
//! (fletcher32 checked and stripped; deflate, szip, h5py's LZF and hdf5plugin's Zstandard,
//! LZ4, bzip2, Blosc, Blosc2 and bitshuffle decoded to exactly the chunk's size: [`codecs`],
//! [`blosc`], [`blosc2`], [`bitshuffle`]; scale-offset unpacked: [`scale_offset`]; shuffle
//! undone; nbit passed over where HDF5 stored the chunk as it is), then its rows are copied
//! into the row-major array, clipped at the dataset's edge.
//! Compressed chunks are unfiltered on the pool a batch at a time and placed in chunk order
//! by the caller ([`decode_box_into`]).
//! Chunks never written read as the table's fill value (zeros, HDF5's default, when it has
//! none).

use std::borrow::Cow;
use std::ops::Range;

use zt_container::{Error, Result};
use zt_formats::{Chunk, ChunkTable};

mod bitshuffle;
mod blosc;
mod blosc2;
mod codecs;
mod scale_offset;

use codecs::{bunzip, fill_elements, inflate, lz4_blocks, unshuffle};

/// HDF5 filter ids.
const DEFLATE: u16 = 1;
const SHUFFLE: u16 = 2;
const FLETCHER32: u16 = 3;
const SZIP: u16 = 4;
/// HDF5's nbit filter: elements packed to their precision; on the full-precision types read
/// here, HDF5 marks it "need not compress" and stores the chunks as they are.
const NBIT: u16 = 5;
/// HDF5's scale-offset filter: integers and decimally scaled floats packed in fewer bits.
const SCALEOFFSET: u16 = 6;
/// h5py's own LZF filter.
const LZF: u16 = 32000;
/// The Zstandard filter of hdf5plugin and HDF5's registered filters: one zstd frame a chunk.
const ZSTD: u16 = 32015;
/// PyTables' bzip2 filter, also in hdf5plugin: one bzip2 stream a chunk.
const BZIP2: u16 = 307;
/// The LZ4 filter of hdf5plugin (HDF5's registered 32004): a header, then LZ4 blocks.
const LZ4: u16 = 32004;
/// hdf5-blosc's filter (hdf5plugin, PyTables): one Blosc 1 chunk an HDF5 chunk.
const BLOSC: u16 = 32001;
/// The bitshuffle library's filter (hdf5plugin): bit-transposed blocks, LZ4 or Zstandard.
const BITSHUFFLE: u16 = 32008;
/// The Blosc2 filter (hdf5plugin, PyTables): one Blosc2 frame an HDF5 chunk.
const BLOSC2: u16 = 32026;

/// Every filter this module decodes (Zstandard only with the `zstd` feature: [`decodable`]);
/// the fuzz target of the decoders picks its pipelines from this list.
pub(crate) const FILTERS: [u16; 13] = [
    DEFLATE,
    SHUFFLE,
    FLETCHER32,
    SZIP,
    NBIT,
    SCALEOFFSET,
    LZF,
    ZSTD,
    BZIP2,
    LZ4,
    BLOSC,
    BITSHUFFLE,
    BLOSC2,
];

/// Whether chunks through the filter `id` can be decoded here.
pub(crate) fn decodable(id: u16) -> bool {
    FILTERS.contains(&id) && (id != ZSTD || cfg!(feature = "zstd"))
}

/// Whether the filter `id` decompresses, so that its chunks are worth decoding on the pool.
fn decompresses(id: u16) -> bool {
    matches!(
        id,
        DEFLATE | SZIP | SCALEOFFSET | LZF | ZSTD | BZIP2 | LZ4 | BLOSC | BITSHUFFLE | BLOSC2
    )
}

/// Decodes every chunk of `table` from `span` (the component's stored bytes) into `dst`, the
/// dataset's row-major bytes. `cap` bounds one chunk's decoded size.
pub(crate) fn decode_into(table: &ChunkTable, span: &[u8], dst: &mut [u8], cap: u64) -> Result<()> {
    let whole: Vec<Range<u64>> = table.dims.iter().map(|&n| 0..n).collect();
    decode_box_into(
        table,
        &whole,
        |chunk| {
            usize::try_from(chunk.at)
                .ok()
                .zip(usize::try_from(chunk.size).ok())
                .and_then(|(a, n)| span.get(a..a.checked_add(n)?))
                .map(Cow::Borrowed)
                .ok_or_else(|| Error::invalid("its bytes lie outside the dataset's span"))
        },
        dst,
        cap,
    )
}

/// Decodes the chunks of `table` that meet the box `ranges` (one range per dimension, inside
/// the dataset) into `dst`, the box's row-major bytes, and no other chunk: a slice of a
/// chunked dataset reads and inflates only what it needs, as h5py does. `stored(chunk)`
/// gives a chunk's stored bytes. `cap` bounds one chunk's decoded size.
///
/// Compressed chunks are decoded on the pool a batch at a time (at most
/// [`DECODE_WINDOW`] bytes of them, a few per thread), then placed in order by the caller:
/// a large gzip dataset inflates on every core, and the first error in chunk order is the
/// one reported, as a decode one chunk after another would report it.
pub(crate) fn decode_box_into<'a>(
    table: &ChunkTable,
    ranges: &[Range<u64>],
    mut stored: impl FnMut(&Chunk) -> Result<Cow<'a, [u8]>>,
    dst: &mut [u8],
    cap: u64,
) -> Result<()> {
    use rayon::prelude::*;
    let rank = table.dims.len();
    if table.chunk.len() != rank || table.chunk.contains(&0) || ranges.len() != rank {
        return Err(Error::invalid(
            "chunk dimensions do not match the dataset's",
        ));
    }
    let elements = table.chunk.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    let chunk_bytes = elements
        .and_then(|n| n.checked_mul(table.element_size))
        .filter(|&n| n <= cap)
        .and_then(|n| usize::try_from(n).ok());
    fill_elements(dst, &table.fill)?;
    let meeting: Vec<(usize, &Chunk)> = table
        .chunks
        .iter()
        .enumerate()
        .filter(|(_, c)| meets(table, &c.start, ranges))
        .collect();
    // A dataset never written (one chunk of the whole dataset, none stored) costs only its
    // fill: the buffers are allocated only when a chunk meets the box.
    if meeting.is_empty() {
        return Ok(());
    }
    let chunk_bytes = chunk_bytes.ok_or_else(|| {
        Error::limit(format!(
            "a chunk of {:?} elements exceeds the cap of {cap} bytes",
            table.chunk
        ))
    })?;
    let compressed = table.filters.iter().any(|&f| decompresses(f));
    // Chunks that decode to less than a batch's worth in all are decoded here: waking the
    // pool for them cost more than the decoding (a file of 80 small datasets in filtered
    // chunks of a few hundred bytes, each read whole, took twice as long on the pool).
    let worth_the_pool =
        (meeting.len() as u64).saturating_mul(chunk_bytes as u64) >= BATCH_BYTES as u64;
    let threads = if compressed && meeting.len() > 1 && worth_the_pool {
        crate::pool::threads()
    } else {
        1
    };
    // A few chunks a thread, or as many small ones as fill a batch worth handing over.
    let per_window = DECODE_WINDOW / chunk_bytes.max(1);
    let most = (4 * threads).max(BATCH_BYTES / chunk_bytes.max(1));
    let batch = if threads > 1 {
        per_window.clamp(1, most)
    } else {
        1
    };
    // One decoded chunk and its filters' work buffer per place in a batch, reused.
    let mut slots: Vec<Slot> = Vec::new();
    let mut rest = meeting.as_slice();
    while !rest.is_empty() {
        // A batch also stops before its stored bytes pass the window: read from a file that
        // is not mapped, each chunk's bytes are a buffer of their own, and a chunk index may
        // claim any size for them.
        let mut take = 0;
        let mut stored_bytes = 0u64;
        for (_, c) in rest.iter().take(batch) {
            stored_bytes = stored_bytes.saturating_add(c.size);
            if take > 0 && stored_bytes > DECODE_WINDOW as u64 {
                break;
            }
            take += 1;
        }
        let (group, tail) = rest.split_at(take.max(1));
        rest = tail;
        while slots.len() < group.len() {
            let decoded = zt_container::internal::try_zeroed_vec::<u8>(chunk_bytes)?;
            slots.push(Slot {
                decoded,
                work: Vec::new(),
            });
        }
        let bytes: Vec<Result<Cow<'a, [u8]>>> = group.iter().map(|(_, c)| stored(c)).collect();
        let decode = |slot: &mut Slot, bytes: &Result<Cow<'a, [u8]>>, chunk: &Chunk| match bytes {
            Ok(b) => unfilter(table, chunk.mask, b, &mut slot.decoded, &mut slot.work),
            // Reported below, in its place.
            Err(_) => Ok(()),
        };
        let decoded: Vec<Result<()>> = if group.len() > 1 {
            crate::pool::install(|| {
                slots
                    .par_iter_mut()
                    .zip(bytes.par_iter())
                    .zip(group.par_iter())
                    .map(|((slot, bytes), (_, chunk))| decode(slot, bytes, chunk))
                    .collect()
            })
        } else {
            slots
                .iter_mut()
                .zip(bytes.iter())
                .zip(group)
                .map(|((slot, bytes), (_, chunk))| decode(slot, bytes, chunk))
                .collect()
        };
        for ((((i, chunk), bytes), done), slot) in group.iter().zip(bytes).zip(decoded).zip(&slots)
        {
            let at = |e: Error| {
                Error::new(
                    e.kind(),
                    format!("chunk {i} at {:?}: {}", chunk.start, e.message()),
                )
            };
            bytes.map_err(at)?;
            done.map_err(at)?;
            place_in_box(table, &chunk.start, &slot.decoded, ranges, dst).map_err(at)?;
        }
    }
    Ok(())
}

/// A place in a batch of [`decode_box_into`]: one chunk's decoded bytes and the buffer its
/// filters decode between.
struct Slot {
    decoded: Vec<u8>,
    work: Vec<u8>,
}

/// The most decoded chunk bytes one parallel batch holds, and the most stored bytes it reads
/// at once (at least one chunk's): a few chunks per thread of the sizes h5py chooses (up to
/// 1 MiB), and chunks of more than half of it decode one at a time.
const DECODE_WINDOW: usize = 8 << 20;

/// The decoded bytes a batch of small chunks gathers at least (within [`DECODE_WINDOW`]), so
/// that handing the batch to the pool costs little beside decoding it: 16x16 chunks of f32
/// are 1 KiB each.
const BATCH_BYTES: usize = 256 << 10;

/// Whether the chunk at `start` holds any element of the box `ranges` (a chunk of another
/// rank is let through, for [`place_in_box`] to refuse).
pub(crate) fn meets(table: &ChunkTable, start: &[u64], ranges: &[Range<u64>]) -> bool {
    start.len() != ranges.len()
        || start
            .iter()
            .zip(&table.chunk)
            .zip(ranges)
            .all(|((&s, &c), r)| s < r.end && s.saturating_add(c) > r.start)
}

/// Where a chunk's bytes are between two filters: still the stored bytes, or in one of the
/// two buffers the filters decode into.
#[derive(Clone, Copy, PartialEq)]
enum Held {
    Stored,
    Work,
    Out,
}

/// Undoes the filters of one chunk into `out` (exactly one chunk's bytes). Each filter that
/// transforms the bytes writes into the buffer the previous one did not, `work` or `out`,
/// chosen so that the last one writes into `out`: no filter allocates, and no bytes are
/// copied but the ones a filter moves. `work` is kept across chunks.
fn unfilter(
    table: &ChunkTable,
    mask: u32,
    stored: &[u8],
    out: &mut [u8],
    work: &mut Vec<u8>,
) -> Result<()> {
    let active: Vec<(u16, &[u32])> = table
        .filters
        .iter()
        .enumerate()
        .filter(|(i, _)| *i >= 32 || mask & (1 << i) == 0)
        .map(|(i, &f)| (f, table.filter_params.get(i).map_or(&[][..], Vec::as_slice)))
        .collect();
    // The filters that write a new buffer still to come, counting the current one.
    let mut writes_left = active
        .iter()
        .filter(|&&(f, params)| f != FLETCHER32 && !(f == NBIT && nbit_stored_as_is(params)))
        .count();
    if writes_left > 1 && work.len() != out.len() {
        work.clear();
        work.try_reserve_exact(out.len())
            .map_err(|_| Error::out_of_memory("a chunk's work buffer"))?;
        work.resize(out.len(), 0);
    }
    let (mut held, mut len) = (Held::Stored, stored.len());
    // Undone in the reverse of the order the writer applied them.
    for &(filter, params) in active.iter().rev() {
        if filter == FLETCHER32 {
            let data = match held {
                Held::Stored => stored.get(..len),
                Held::Work => work.get(..len),
                Held::Out => out.get(..len),
            }
            .unwrap_or_default();
            let (body, sum) = data
                .split_last_chunk::<4>()
                .ok_or_else(|| Error::invalid("fletcher32: a chunk shorter than its checksum"))?;
            // Little-endian; libraries before 1.6.3 wrote it byte-swapped, as HDF5 accepts.
            let stored_sum = u32::from_le_bytes(*sum);
            let got = fletcher32(body);
            if got != stored_sum && got.swap_bytes() != stored_sum {
                return Err(Error::checksum(format!(
                    "fletcher32 mismatch: stored {stored_sum:08x}, computed {got:08x}"
                )));
            }
            len = body.len();
            continue;
        }
        if filter == NBIT {
            if nbit_stored_as_is(params) {
                continue;
            }
            return Err(match params.first() {
                Some(&count) if count as usize == params.len() && count >= 2 => {
                    Error::unsupported("nbit: chunks packed to a precision below the element's")
                }
                _ => Error::invalid(format!(
                    "nbit: {} parameters, where the first gives their count",
                    params.len()
                )),
            });
        }
        // Odd counts of writes left end in `out`, even ones in `work`.
        let to = if writes_left % 2 == 1 {
            Held::Out
        } else {
            Held::Work
        };
        writes_left -= 1;
        let (data, dst): (&[u8], &mut [u8]) = match (held, to) {
            (Held::Stored, Held::Out) => (stored, &mut *out),
            (Held::Stored, _) => (stored, work.as_mut_slice()),
            (Held::Work, _) => (work.as_slice(), &mut *out),
            (Held::Out, _) => (&*out, work.as_mut_slice()),
        };
        let data = data.get(..len).unwrap_or_default();
        match filter {
            SZIP => zt_formats::szip::decode_hdf5(data, params, dst)?,
            SCALEOFFSET => scale_offset::decode_into(data, params, dst)?,
            DEFLATE => inflate(data, dst)?,
            LZF => zt_formats::lzf::decode_into(data, dst)?,
            ZSTD => crate::codec::zstd_decode_into(data, dst)?,
            BZIP2 => bunzip(data, dst)?,
            LZ4 => lz4_blocks(data, dst)?,
            BLOSC => blosc::decode_into(data, dst)?,
            BITSHUFFLE => bitshuffle::decode_into(data, params, dst)?,
            BLOSC2 => blosc2::decode_into(data, params, dst)?,
            SHUFFLE => {
                if data.len() != dst.len() {
                    return Err(Error::invalid(format!(
                        "shuffle: {} bytes for a chunk of {}",
                        data.len(),
                        dst.len()
                    )));
                }
                unshuffle(data, table.element_size as usize, dst);
            }
            other => {
                return Err(Error::unsupported(format!(
                    "HDF5 filter {other} ({})",
                    filter_name(other).unwrap_or("unknown")
                )))
            }
        }
        (held, len) = (to, dst.len());
    }
    match held {
        Held::Out => Ok(()),
        Held::Stored if len == out.len() => {
            out.copy_from_slice(stored.get(..len).unwrap_or_default());
            Ok(())
        }
        _ => Err(Error::invalid(format!(
            "{len} bytes stored for a chunk of {}",
            out.len()
        ))),
    }
}

/// Whether the nbit filter's parameters `params` mark its chunks as stored as they are:
/// their count first (which HDF5 checks against the parameters it holds), then its "need not
/// compress" flag, which HDF5 sets when every element uses all of its bits.
fn nbit_stored_as_is(params: &[u32]) -> bool {
    matches!(params, [count, flag, ..] if *count as usize == params.len() && *flag != 0)
}

/// The name of an HDF5 filter id, for the filters HDF5 registers that a file may name: the
/// ones decoded here and the ones hdf5plugin writes.
pub(crate) fn filter_name(id: u16) -> Option<&'static str> {
    Some(match id {
        DEFLATE => "deflate",
        SHUFFLE => "shuffle",
        FLETCHER32 => "fletcher32",
        SZIP => "szip",
        NBIT => "nbit",
        SCALEOFFSET => "scaleoffset",
        BZIP2 => "bzip2",
        LZF => "lzf",
        BLOSC => "blosc",
        LZ4 => "lz4",
        BITSHUFFLE => "bitshuffle",
        ZSTD => "zstd",
        BLOSC2 => "blosc2",
        // Registered filters hdf5plugin writes that are not decoded here (lossy ones).
        32013 => "zfp",
        32017 => "sz",
        32018 => "fcidecomp",
        32024 => "sz3",
        32028 => "sperr",
        32033 => "htj2k",
        _ => return None,
    })
}

/// HDF5's Fletcher-32 over 16-bit big-endian words, reduced every 360 words, an odd last
/// byte taken as the high byte of one more word: `H5_checksum_fletcher32`, step for step.
fn fletcher32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (0u32, 0u32);
    let mut words = data.chunks_exact(2);
    loop {
        let mut n = 0;
        for w in words.by_ref().take(360) {
            if let [hi, lo] = w {
                a += u32::from(*hi) << 8 | u32::from(*lo);
                b += a;
            }
            n += 1;
        }
        if n == 0 {
            break;
        }
        a = (a & 0xffff) + (a >> 16);
        b = (b & 0xffff) + (b >> 16);
    }
    if let [odd] = words.remainder() {
        a += u32::from(*odd) << 8;
        b += a;
        a = (a & 0xffff) + (a >> 16);
        b = (b & 0xffff) + (b >> 16);
    }
    a = (a & 0xffff) + (a >> 16);
    b = (b & 0xffff) + (b >> 16);
    (b << 16) | a
}

/// Copies the part of one decoded chunk (starting at element `start`) that lies in the box
/// `ranges` of the dataset (and in the dataset: edge chunks are clipped) into `dst`, the
/// box's row-major bytes.
fn place_in_box(
    table: &ChunkTable,
    start: &[u64],
    chunk: &[u8],
    ranges: &[Range<u64>],
    dst: &mut [u8],
) -> Result<()> {
    let rank = table.dims.len();
    let size = table.element_size;
    if start.len() != rank {
        return Err(Error::invalid(
            "a chunk's coordinates do not match the dataset's rank",
        ));
    }
    if rank == 0 {
        let n = chunk.len().min(dst.len());
        dst.get_mut(..n)
            .unwrap_or_default()
            .copy_from_slice(chunk.get(..n).unwrap_or_default());
        return Ok(());
    }
    // The elements both in the chunk, the dataset and the box, per dimension: lo..hi.
    let mut lo = Vec::with_capacity(rank);
    let mut hi = Vec::with_capacity(rank);
    for d in 0..rank {
        let (s, c, n, r) = (start[d], table.chunk[d], table.dims[d], &ranges[d]);
        let (a, b) = (s.max(r.start), s.saturating_add(c).min(n).min(r.end));
        if a >= b {
            // Nothing of this chunk in the box (or a chunk wholly outside the dataset, left
            // by a shrink): nothing to place.
            return Ok(());
        }
        lo.push(a);
        hi.push(b);
    }
    let too_far = || Error::invalid("a chunk's place lies past the end of the dataset");
    let run = (hi[rank - 1] - lo[rank - 1])
        .checked_mul(size)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(too_far)?;
    // The element at `idx` (dataset coordinates): its offset in the chunk and in the box.
    let offsets = |idx: &[u64]| -> Option<(u64, u64)> {
        let (mut src, mut to) = (0u64, 0u64);
        let (mut cs, mut bs) = (1u64, 1u64);
        for d in (0..rank).rev() {
            src = src.checked_add((idx[d] - start[d]).checked_mul(cs)?)?;
            to = to.checked_add((idx[d] - ranges[d].start).checked_mul(bs)?)?;
            cs = cs.checked_mul(table.chunk[d])?;
            bs = bs.checked_mul(ranges[d].end - ranges[d].start)?;
        }
        Some((src.checked_mul(size)?, to.checked_mul(size)?))
    };
    let mut idx = lo.clone();
    loop {
        let (src, to) = offsets(&idx).ok_or_else(too_far)?;
        let piece = usize::try_from(src)
            .ok()
            .and_then(|s| chunk.get(s..s.checked_add(run)?))
            .ok_or_else(|| Error::invalid("a chunk shorter than its dimensions"))?;
        let slot = usize::try_from(to)
            .ok()
            .and_then(|t| dst.get_mut(t..t.checked_add(run)?))
            .ok_or_else(too_far)?;
        slot.copy_from_slice(piece);
        // Next row: the odometer over all but the last dimension.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < hi[d] {
                break;
            }
            idx[d] = lo[d];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zt_container::ErrorKind;

    /// The box `ranges` (`len` bytes) of the dataset `table` whose chunks lie in `span`.
    fn decode_box(
        table: &ChunkTable,
        span: &[u8],
        ranges: &[Range<u64>],
        len: usize,
    ) -> Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        let stored = |c: &Chunk| {
            Ok(Cow::Borrowed(
                &span[c.at as usize..(c.at + c.size) as usize],
            ))
        };
        decode_box_into(table, ranges, stored, &mut out, 1 << 20).map(|()| out)
    }

    #[test]
    fn fletcher32_sums_words() {
        // One word: a = 0x0102, b = a. Two: a = 0x0102 + 0x0304, b = 0x0102 + a.
        assert_eq!(fletcher32(&[1, 2]), 0x0102_0102);
        assert_eq!(fletcher32(&[1, 2, 3, 4]), (0x0102 + 0x0406) << 16 | 0x0406);
        // An odd byte is the high byte of one more word.
        assert_eq!(fletcher32(&[1, 2, 3]), (0x0102 + 0x0402) << 16 | 0x0402);
    }

    #[test]
    fn chunks_never_written_hold_the_fill_value() {
        // Two of three chunks written; the third, rows 2.., holds 0x0201 per element.
        let table = ChunkTable {
            dims: vec![5],
            chunk: vec![2],
            element_size: 2,
            filters: Vec::new(),
            filter_params: Vec::new(),
            chunks: (0..2)
                .map(|i| Chunk {
                    at: 4 * i,
                    size: 4,
                    start: vec![2 * i],
                    mask: 0,
                })
                .collect(),
            fill: vec![1, 2],
        };
        let span: Vec<u8> = (10..18).collect();
        let mut dst = vec![0xee; 10];
        decode_into(&table, &span, &mut dst, 1 << 20).unwrap();
        assert_eq!(dst, [10, 11, 12, 13, 14, 15, 16, 17, 1, 2]);
        let mut odd = vec![0; 9];
        let e = fill_elements(&mut odd, &[1, 2]).unwrap_err();
        assert!(e.to_string().contains("a fill value of 2 bytes"), "{e}");
        let mut many = vec![0; 2 * 1001];
        fill_elements(&mut many, &[7, 8]).unwrap();
        assert!(many.chunks_exact(2).all(|e| e == [7, 8]));
    }

    /// A 3x3 u8 dataset in 2x2 chunks of 4 stored bytes each, unfiltered; the last row and
    /// column are partial chunks.
    fn three_by_three() -> ChunkTable {
        ChunkTable {
            dims: vec![3, 3],
            chunk: vec![2, 2],
            element_size: 1,
            filters: Vec::new(),
            filter_params: Vec::new(),
            chunks: [[0, 0], [0, 2], [2, 0], [2, 2]]
                .iter()
                .enumerate()
                .map(|(i, s)| Chunk {
                    at: 4 * i as u64,
                    size: 4,
                    start: s.to_vec(),
                    mask: 0,
                })
                .collect(),
            fill: Vec::new(),
        }
    }

    #[test]
    fn chunks_are_placed_and_clipped() {
        let table = three_by_three();
        let span: Vec<u8> = (1..=16).collect();
        let mut dst = [0u8; 9];
        decode_into(&table, &span, &mut dst, 1 << 20).unwrap();
        assert_eq!(dst, [1, 2, 5, 3, 4, 7, 9, 10, 13]);
    }

    #[test]
    fn a_box_reads_only_the_chunks_it_meets() {
        // The box rows 1..3, columns 2..3 meets chunks (0, 2) and (2, 2) only.
        let table = three_by_three();
        let span: Vec<u8> = (1..=16).collect();
        let mut asked = Vec::new();
        let mut dst = [0u8; 2];
        decode_box_into(
            &table,
            &[1..3, 2..3],
            |c| {
                asked.push(c.start.clone());
                Ok(Cow::Borrowed(
                    &span[c.at as usize..(c.at + c.size) as usize],
                ))
            },
            &mut dst,
            1 << 20,
        )
        .unwrap();
        assert_eq!(asked, [vec![0, 2], vec![2, 2]]);
        // The whole dataset is [1, 2, 5, 3, 4, 7, 9, 10, 13]: column 2 of rows 1 and 2.
        assert_eq!(dst, [7, 13]);
        // Every box of the dataset matches the same box of the whole decode.
        let mut whole = [0u8; 9];
        decode_into(&table, &span, &mut whole, 1 << 20).unwrap();
        for (r0, r1, c0, c1) in (0..3u64).flat_map(|a| {
            (a + 1..=3).flat_map(move |b| {
                (0..3u64).flat_map(move |c| (c + 1..=3).map(move |d| (a, b, c, d)))
            })
        }) {
            let len = ((r1 - r0) * (c1 - c0)) as usize;
            let part = decode_box(&table, &span, &[r0..r1, c0..c1], len).unwrap();
            let want: Vec<u8> = (r0..r1)
                .flat_map(|r| (c0..c1).map(move |c| whole[(r * 3 + c) as usize]))
                .collect();
            assert_eq!(part, want, "rows {r0}..{r1}, columns {c0}..{c1}");
        }
    }

    #[test]
    fn unshuffle_agrees_with_the_definition() {
        // Every element size, lengths with and without a tail, across block edges.
        for n in [1usize, 2, 3, 4, 5, 8, 16] {
            for len in [0usize, 1, 7, 8, 63 * n, 64 * n, 64 * n + 3, 1000 * n + 5] {
                let data: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
                let count = len / n;
                let mut want = data.clone();
                for e in 0..count {
                    for b in 0..n {
                        want[e * n + b] = data[b * count + e];
                    }
                }
                let mut got = vec![0xaau8; len];
                unshuffle(&data, n, &mut got);
                assert_eq!(got, want, "{n}-byte elements, {len} bytes");
            }
        }
    }

    /// A 1-D dataset of `elements` u32 in one chunk of `size` stored bytes at 0, through
    /// `filters`.
    fn one_chunk(elements: u64, filters: &[u16], size: u64) -> ChunkTable {
        ChunkTable {
            dims: vec![elements],
            chunk: vec![elements],
            element_size: 4,
            filters: filters.to_vec(),
            filter_params: vec![Vec::new(); filters.len()],
            chunks: vec![Chunk {
                at: 0,
                size,
                start: vec![0],
                mask: 0,
            }],
            fill: Vec::new(),
        }
    }

    /// Shuffles `data`, elements of `n` bytes, into byte planes, as HDF5's shuffle filter does.
    fn shuffle(data: &[u8], n: usize) -> Vec<u8> {
        let count = data.len() / n;
        (0..n)
            .flat_map(|b| (0..count).map(move |e| data[e * n + b]))
            .collect()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(4));
        z.write_all(data).unwrap();
        z.finish().unwrap()
    }

    /// The bytes of u32 `elements` filtered by `filters` (shuffle, deflate, fletcher32), in the
    /// order the writer applies them.
    fn filtered(filters: &[u16], elements: &[u8]) -> Vec<u8> {
        let mut bytes = elements.to_vec();
        for &f in filters {
            bytes = match f {
                SHUFFLE => shuffle(&bytes, 4),
                DEFLATE => zlib(&bytes),
                FLETCHER32 => {
                    let sum = fletcher32(&bytes);
                    [bytes, sum.to_le_bytes().to_vec()].concat()
                }
                _ => unreachable!(),
            };
        }
        bytes
    }

    #[test]
    fn every_order_of_filters_is_undone() {
        let elements: Vec<u8> = (0..1024u32).flat_map(|i| (i / 3).to_le_bytes()).collect();
        let table = |filters: &[u16], size: u64| one_chunk(1024, filters, size);
        // Shuffles, then at most one filter that changes the size, then the checksum: what
        // HDF5's writers build (a second size-changing filter is refused, see
        // docs/decisions.md).
        let pipelines: &[&[u16]] = &[
            &[],
            &[DEFLATE],
            &[SHUFFLE],
            &[FLETCHER32],
            &[SHUFFLE, DEFLATE],
            &[SHUFFLE, SHUFFLE],
            &[SHUFFLE, SHUFFLE, DEFLATE],
            &[SHUFFLE, FLETCHER32],
            &[SHUFFLE, DEFLATE, FLETCHER32],
            &[SHUFFLE, SHUFFLE, DEFLATE, FLETCHER32],
        ];
        for filters in pipelines {
            let span = filtered(filters, &elements);
            let mut dst = vec![0xee; elements.len()];
            decode_into(&table(filters, span.len() as u64), &span, &mut dst, 1 << 20)
                .unwrap_or_else(|e| panic!("{filters:?}: {e}"));
            assert!(dst == elements, "{filters:?}");
        }
        // A filter skipped by the chunk's mask is not undone.
        let span = filtered(&[DEFLATE], &elements);
        let mut t = table(&[SHUFFLE, DEFLATE], span.len() as u64);
        t.chunks[0].mask = 1;
        let mut dst = vec![0; elements.len()];
        decode_into(&t, &span, &mut dst, 1 << 20).unwrap();
        assert!(dst == elements);
    }

    #[test]
    fn nbit_marked_need_not_compress_passes_chunks_through() {
        // HDF5's parameters for 1024 full-precision little-endian 4-byte integers: 8 of
        // them, "need not compress", 1024 elements, an atomic type of 4 bytes, order 0,
        // 32 bits at bit 0.
        let as_is = vec![8, 1, 1024, 1, 4, 0, 32, 0];
        let elements: Vec<u8> = (0..1024u32).flat_map(|i| (i * 7).to_le_bytes()).collect();
        for (filters, span) in [
            (vec![NBIT], elements.clone()),
            (vec![NBIT, DEFLATE], zlib(&elements)),
            (vec![SHUFFLE, NBIT, DEFLATE], zlib(&shuffle(&elements, 4))),
        ] {
            let mut t = one_chunk(1024, &filters, span.len() as u64);
            let at = filters.iter().position(|&f| f == NBIT).unwrap();
            t.filter_params[at] = as_is.clone();
            let mut dst = vec![0; elements.len()];
            decode_into(&t, &span, &mut dst, 1 << 20).unwrap();
            assert!(dst == elements, "{filters:?}");
        }
        // Packed chunks are not read; parameters that miscount themselves are refused.
        let mut packed = as_is.clone();
        packed[1] = 0;
        let short = vec![8, 1];
        for (params, kind, message) in [
            (
                packed,
                ErrorKind::Unsupported,
                "nbit: chunks packed to a precision",
            ),
            (
                short,
                ErrorKind::InvalidFile,
                "nbit: 2 parameters, where the first",
            ),
            (Vec::new(), ErrorKind::InvalidFile, "nbit: 0 parameters"),
        ] {
            let mut t = one_chunk(1024, &[NBIT], elements.len() as u64);
            t.filter_params[0] = params;
            let mut dst = vec![0; elements.len()];
            let e = decode_into(&t, &elements, &mut dst, 1 << 20).unwrap_err();
            assert_eq!(e.kind(), kind, "{e}");
            assert!(e.message().contains(message), "{e}");
        }
    }

    /// A 1-D dataset of 600 deflated chunks of 256 u32 each, three batches of at most 256, and
    /// the elements it holds.
    fn many_deflated_chunks() -> (ChunkTable, Vec<u8>, Vec<u8>) {
        let elements: Vec<u8> = (0..600 * 256u32)
            .flat_map(|i| (i * 7).to_le_bytes())
            .collect();
        let mut span = Vec::new();
        let mut chunks = Vec::new();
        for (k, chunk) in elements.chunks(1024).enumerate() {
            let z = zlib(chunk);
            chunks.push(Chunk {
                at: span.len() as u64,
                size: z.len() as u64,
                start: vec![256 * k as u64],
                mask: 0,
            });
            span.extend_from_slice(&z);
        }
        let table = ChunkTable {
            dims: vec![600 * 256],
            chunk: vec![256],
            element_size: 4,
            filters: vec![SHUFFLE, DEFLATE],
            filter_params: vec![Vec::new(); 2],
            chunks,
            fill: Vec::new(),
        };
        // The chunks were deflated without the shuffle: their masks skip it.
        let mut table = table;
        table.chunks.iter_mut().for_each(|c| c.mask = 1);
        (table, span, elements)
    }

    #[test]
    fn chunks_decoded_in_batches_land_in_place() {
        let (table, span, elements) = many_deflated_chunks();
        let mut dst = vec![0xee; elements.len()];
        decode_into(&table, &span, &mut dst, 1 << 20).unwrap();
        assert!(dst == elements);
        // Three batches of at most 256 chunks, on the pool when it has two threads or more.
        // A box across chunk edges:
        let part = decode_box(&table, &span, std::slice::from_ref(&(300..1300)), 4000).unwrap();
        assert!(part == elements[4 * 300..4 * 1300]);
    }

    #[test]
    fn the_first_bad_chunk_in_order_is_reported() {
        let (table, mut span, _) = many_deflated_chunks();
        // Chunks 9, 40 (first batch) and 300 (second) are damaged; from chunk `upto` on the
        // bytes cannot be read.
        for k in [9, 40, 300] {
            let c = &table.chunks[k];
            span[(c.at + c.size / 2) as usize] ^= 0x55;
            span[(c.at + 2) as usize] = 0xff;
        }
        let read = |from: u64, upto: u64| {
            let mut dst = vec![0u8; ((600 - from) * 1024) as usize];
            decode_box_into(
                &table,
                std::slice::from_ref(&(from * 256..600 * 256)),
                |c| {
                    if c.start[0] >= upto * 256 {
                        Err(Error::invalid("unreadable"))
                    } else {
                        Ok(Cow::Borrowed(
                            &span[c.at as usize..(c.at + c.size) as usize],
                        ))
                    }
                },
                &mut dst,
                1 << 20,
            )
            .unwrap_err()
            .to_string()
        };
        let e = read(0, 600);
        assert!(e.contains("chunk 9 at [2304]: deflate"), "{e}");
        // An unreadable chunk before the damaged ones is the one reported.
        let e = read(0, 3);
        assert!(e.contains("chunk 3 at [768]: unreadable"), "{e}");
        // Past the first batch's damage: the second batch's.
        let e = read(41, 600);
        assert!(e.contains("chunk 300 at [76800]: deflate"), "{e}");
        let e = read(41, 299);
        assert!(e.contains("chunk 299 at [76544]: unreadable"), "{e}");
    }

    #[test]
    fn a_batch_reads_no_more_stored_bytes_than_the_window() {
        // Chunks of 1 KiB whose index claims 5 MiB stored each: one chunk a batch, so the
        // first chunk's damage is found before any other chunk's bytes are read.
        let (mut table, span, _) = many_deflated_chunks();
        table.chunks.iter_mut().for_each(|c| c.size = 5 << 20);
        let mut asked = 0;
        let mut dst = vec![0u8; 600 * 1024];
        let e = decode_box_into(
            &table,
            std::slice::from_ref(&(0..600 * 256)),
            |_| {
                asked += 1;
                Ok(Cow::Borrowed(&span[..7]))
            },
            &mut dst,
            1 << 20,
        )
        .unwrap_err();
        assert!(e.to_string().contains("chunk 0 at [0]: deflate"), "{e}");
        assert_eq!(asked, 1);
    }

    /// `data` as one bzip2 stream.
    fn bzip2(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut z = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(1));
        z.write_all(data).unwrap();
        z.finish().unwrap()
    }

    #[test]
    fn a_deflated_or_bzipped_chunk_of_the_wrong_size_is_refused() {
        type Compress = fn(&[u8]) -> Vec<u8>;
        let streams: [(u16, Compress, &str, &[u8]); 2] = [
            (
                DEFLATE,
                zlib,
                "deflate: the chunk inflates",
                &[0x78, 0x9c, 0xff, 0xff, 0xff],
            ),
            (
                BZIP2,
                bzip2,
                "bzip2: the chunk decompresses",
                b"BZh9 not a bzip2 block",
            ),
        ];
        for (filter, compress, what, junk) in streams {
            let table = |size: u64| one_chunk(16, &[filter], size);
            let message = |span: &[u8]| {
                let mut dst = [0u8; 64];
                decode_into(&table(span.len() as u64), span, &mut dst, 1 << 20)
                    .unwrap_err()
                    .to_string()
            };
            let short = message(&compress(&[1; 63]));
            assert!(
                short.contains(&format!("{what} to 63 bytes, not 64")),
                "{short}"
            );
            let long = message(&compress(&[1; 65]));
            assert!(
                long.contains(&format!("{what} to more than 64 bytes")),
                "{long}"
            );
            let whole = compress(&[1; 64]);
            let cut = message(&whole[..whole.len() - 5]);
            let codec = what.split(':').next().unwrap();
            assert!(
                cut.contains(&format!("{codec}: the stream ends after")),
                "{cut}"
            );
            let junk = message(junk);
            assert!(
                junk.contains(&format!("chunk 0 at [0]: {codec}: ")),
                "{junk}"
            );
            // Bytes after the stream's end are ignored, as HDF5 and the filter ignore them.
            let mut dst = [0u8; 64];
            let trailing = [whole.as_slice(), &[0xab; 7]].concat();
            decode_into(&table(trailing.len() as u64), &trailing, &mut dst, 1 << 20).unwrap();
            assert_eq!(dst, [1; 64]);
        }
        // bzip2's own words for a stream that is not one.
        let mut dst = [0u8; 64];
        let alien = b"PK\x03\x04 a zip";
        let e = decode_into(&one_chunk(16, &[BZIP2], 8), alien, &mut dst, 1 << 20).unwrap_err();
        assert!(e.to_string().ends_with("bzip2: bz2 header missing"), "{e}");
    }

    /// `data` in the LZ4 filter's framing, blocks of `block` bytes; the blocks at `raw` are
    /// stored as they are.
    fn lz4_framed(data: &[u8], block: usize, raw: &[usize]) -> Vec<u8> {
        let mut out = (data.len() as u64).to_be_bytes().to_vec();
        out.extend((block as u32).to_be_bytes());
        for (i, piece) in data.chunks(block).enumerate() {
            let body = if raw.contains(&i) {
                piece.to_vec()
            } else {
                lz4_flex::block::compress(piece)
            };
            out.extend((body.len() as u32).to_be_bytes());
            out.extend(body);
        }
        out
    }

    #[test]
    fn lz4_blocks_are_decoded_and_their_framing_checked() {
        let data: Vec<u8> = (0..64u8).map(|i| i / 8).collect();
        let decode = |span: &[u8]| {
            let mut dst = [0u8; 64];
            let table = one_chunk(16, &[LZ4], span.len() as u64);
            decode_into(&table, span, &mut dst, 1 << 20).map(|()| dst)
        };
        let message = |span: &[u8]| decode(span).unwrap_err().to_string();
        // Blocks of 24 bytes (the last one 16), the second stored as it is; trailing bytes
        // ignored, as the filter ignores them.
        let framed = lz4_framed(&data, 24, &[1]);
        assert_eq!(decode(&framed).unwrap().as_slice(), data);
        let trailing = [framed.as_slice(), &[0xcd; 5]].concat();
        assert_eq!(decode(&trailing).unwrap().as_slice(), data);
        // A block size past the chunk's is one block.
        assert_eq!(
            decode(&lz4_framed(&data, 64, &[])).unwrap().as_slice(),
            data
        );
        let mut big = lz4_framed(&data, 64, &[]);
        big[8..12].copy_from_slice(&1000u32.to_be_bytes());
        assert_eq!(decode(&big).unwrap().as_slice(), data);

        assert!(message(&framed[..11]).contains("shorter than its 12-byte header"));
        let mut wrong = framed.clone();
        wrong[7] = 65;
        let e = message(&wrong);
        assert!(
            e.contains("lz4: the header gives 65 bytes for a chunk of 64"),
            "{e}"
        );
        let mut zero = framed.clone();
        zero[8..12].fill(0);
        assert!(message(&zero).contains("lz4: a block size of 0"));
        let e = message(&framed[..framed.len() - 1]);
        assert!(e.contains("lz4: block 2 of "), "{e}");
        assert!(e.contains("stored bytes runs past the chunk's end"), "{e}");
        let e = message(&lz4_framed(&data[..48], 24, &[]));
        assert!(e.contains("the header gives 48 bytes"), "{e}");
        // Two blocks where the header promises three.
        let mut missing = lz4_framed(&data, 24, &[]);
        let first = 12 + 4 + u32::from_be_bytes(missing[12..16].try_into().unwrap()) as usize;
        let second =
            first + 4 + u32::from_be_bytes(missing[first..first + 4].try_into().unwrap()) as usize;
        missing.truncate(second);
        let e = message(&missing);
        assert!(e.contains("lz4: the chunk ends before block 2"), "{e}");
        // A block that decodes to fewer bytes than its share.
        let mut short = framed.clone();
        let body = lz4_flex::block::compress(&data[..20]);
        short.splice(
            12..,
            (body.len() as u32).to_be_bytes().into_iter().chain(body),
        );
        let e = message(&short);
        assert!(e.contains("lz4: block 0"), "{e}");
    }

    #[test]
    fn shuffle_is_undone() {
        let table = one_chunk(2, &[SHUFFLE], 8);
        // 0x04030201, 0x08070605 shuffled: byte planes.
        let span = [1, 5, 2, 6, 3, 7, 4, 8];
        let mut dst = [0u8; 8];
        decode_into(&table, &span, &mut dst, 1 << 20).unwrap();
        assert_eq!(dst, [1, 2, 3, 4, 5, 6, 7, 8]);
    }
}
