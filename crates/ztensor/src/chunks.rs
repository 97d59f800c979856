//! Decoding an HDF5 chunked dataset ([`zt_formats::Encoding::Hdf5Chunks`]): each chunk's
//! stored bytes are unfiltered in the reverse of the order the writer applied its filters
//! (fletcher32 checked and stripped, deflate inflated and szip decoded to exactly the chunk's
//! size, shuffle undone), then its rows are copied into the row-major array, clipped at the dataset's edge.
//! Chunks never written read as the table's fill value (zeros, HDF5's default, when it has
//! none).

use std::borrow::Cow;
use std::ops::Range;

use zt_container::{Error, Result};
use zt_formats::{Chunk, ChunkTable};

/// HDF5 filter ids.
const DEFLATE: u16 = 1;
const SHUFFLE: u16 = 2;
const FLETCHER32: u16 = 3;
const SZIP: u16 = 4;

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

/// Fills `dst` with copies of one element, `fill` (zeros when it is empty), doubling what is
/// done with each copy rather than writing element by element.
fn fill_elements(dst: &mut [u8], fill: &[u8]) -> Result<()> {
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

/// Decodes the chunks of `table` that meet the box `ranges` (one range per dimension, inside
/// the dataset) into `dst`, the box's row-major bytes, and no other chunk: a slice of a
/// chunked dataset reads and inflates only what it needs, as h5py does. `stored(chunk)`
/// gives a chunk's stored bytes. `cap` bounds one chunk's decoded size.
pub(crate) fn decode_box_into<'a>(
    table: &ChunkTable,
    ranges: &[Range<u64>],
    mut stored: impl FnMut(&Chunk) -> Result<Cow<'a, [u8]>>,
    dst: &mut [u8],
    cap: u64,
) -> Result<()> {
    let rank = table.dims.len();
    if table.chunk.len() != rank || table.chunk.contains(&0) || ranges.len() != rank {
        return Err(Error::invalid(
            "chunk dimensions do not match the dataset's",
        ));
    }
    let elements = table.chunk.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    let chunk_bytes = elements
        .and_then(|n| n.checked_mul(table.element_size))
        .filter(|&n| n <= cap);
    // Allocated at the first chunk that meets the box: a dataset never written (one chunk of
    // the whole dataset, none stored) costs only its fill.
    let mut buf = Vec::new();
    let mut work = Vec::new();
    fill_elements(dst, &table.fill)?;
    for (i, chunk) in table.chunks.iter().enumerate() {
        if !meets(table, &chunk.start, ranges) {
            continue;
        }
        if buf.is_empty() {
            let n = chunk_bytes.ok_or_else(|| {
                Error::limit(format!(
                    "a chunk of {:?} elements exceeds the cap of {cap} bytes",
                    table.chunk
                ))
            })?;
            buf = zt_container::internal::try_zeroed_vec::<u8>(n as usize)?;
        }
        let at = |e: Error| {
            Error::new(
                e.kind(),
                format!("chunk {i} at {:?}: {}", chunk.start, e.message()),
            )
        };
        let bytes = stored(chunk).map_err(at)?;
        unfilter(table, chunk.mask, &bytes, &mut buf, &mut work).map_err(at)?;
        place_in_box(table, &chunk.start, &buf, ranges, dst).map_err(at)?;
    }
    Ok(())
}

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

/// Undoes the filters of one chunk into `out` (exactly one chunk's bytes).
fn unfilter(
    table: &ChunkTable,
    mask: u32,
    stored: &[u8],
    out: &mut [u8],
    work: &mut Vec<u8>,
) -> Result<()> {
    let mut data: &[u8] = stored;
    let mut owned: Vec<u8>;
    let active: Vec<(u16, &[u32])> = table
        .filters
        .iter()
        .enumerate()
        .filter(|(i, _)| *i >= 32 || mask & (1 << i) == 0)
        .map(|(i, &f)| (f, table.filter_params.get(i).map_or(&[][..], Vec::as_slice)))
        .collect();
    for (step, &(filter, params)) in active.iter().enumerate().rev() {
        let last = step == 0;
        // Whether the filter decoded `data` into `work` (exactly one chunk's bytes).
        let decoded = match filter {
            SZIP => {
                work.clear();
                work.try_reserve_exact(out.len())
                    .map_err(|_| Error::out_of_memory("an szip chunk"))?;
                work.resize(out.len(), 0);
                zt_formats::szip::decode_hdf5(data, params, work)?;
                true
            }
            FLETCHER32 => {
                let (body, sum) = data.split_last_chunk::<4>().ok_or_else(|| {
                    Error::invalid("fletcher32: a chunk shorter than its checksum")
                })?;
                // Little-endian; libraries before 1.6.3 wrote it byte-swapped, as HDF5 accepts.
                let stored_sum = u32::from_le_bytes(*sum);
                let got = fletcher32(body);
                if got != stored_sum && got.swap_bytes() != stored_sum {
                    return Err(Error::checksum(format!(
                        "fletcher32 mismatch: stored {stored_sum:08x}, computed {got:08x}"
                    )));
                }
                data = body;
                false
            }
            DEFLATE => {
                use std::io::Read;
                work.clear();
                let limit = out.len() as u64 + 1;
                flate2::bufread::ZlibDecoder::new(data)
                    .take(limit)
                    .read_to_end(work)
                    .map_err(|e| Error::invalid(format!("deflate: {e}")))?;
                if work.len() != out.len() {
                    return Err(Error::invalid(format!(
                        "deflate: the chunk inflates to {} bytes, not {}",
                        work.len().min(out.len() + 1),
                        out.len()
                    )));
                }
                true
            }
            SHUFFLE => {
                let n = table.element_size as usize;
                if data.len() != out.len() {
                    return Err(Error::invalid(format!(
                        "shuffle: {} bytes for a chunk of {}",
                        data.len(),
                        out.len()
                    )));
                }
                unshuffle(data, n, out);
                if last {
                    return Ok(());
                }
                owned = out.to_vec();
                data = &owned;
                continue;
            }
            other => {
                return Err(Error::unsupported(format!(
                    "HDF5 filter {other} ({})",
                    filter_name(other)
                )))
            }
        };
        if decoded {
            owned = std::mem::take(work);
            data = &owned;
            if last {
                out.copy_from_slice(data);
                *work = owned;
                return Ok(());
            }
        }
    }
    if data.len() != out.len() {
        return Err(Error::invalid(format!(
            "{} bytes stored for a chunk of {}",
            data.len(),
            out.len()
        )));
    }
    out.copy_from_slice(data);
    Ok(())
}

/// Undoes HDF5's shuffle filter: `data` holds byte 0 of every `n`-byte element, then byte 1
/// of every element, and so on; `out` (as long as `data`) gets the elements back. The tail
/// that does not fill a whole element stays where it was, as HDF5 leaves it.
fn unshuffle(data: &[u8], n: usize, out: &mut [u8]) {
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

/// The name of an HDF5 filter id.
pub(crate) fn filter_name(id: u16) -> &'static str {
    match id {
        DEFLATE => "deflate",
        SHUFFLE => "shuffle",
        FLETCHER32 => "fletcher32",
        SZIP => "szip",
        5 => "nbit",
        6 => "scaleoffset",
        _ => "unknown",
    }
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
            let mut part = vec![0u8; ((r1 - r0) * (c1 - c0)) as usize];
            decode_box_into(
                &table,
                &[r0..r1, c0..c1],
                |c| {
                    Ok(Cow::Borrowed(
                        &span[c.at as usize..(c.at + c.size) as usize],
                    ))
                },
                &mut part,
                1 << 20,
            )
            .unwrap();
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

    #[test]
    fn shuffle_is_undone() {
        let table = ChunkTable {
            dims: vec![2],
            chunk: vec![2],
            element_size: 4,
            filters: vec![SHUFFLE],
            filter_params: vec![Vec::new()],
            chunks: vec![Chunk {
                at: 0,
                size: 8,
                start: vec![0],
                mask: 0,
            }],
            fill: Vec::new(),
        };
        // 0x04030201, 0x08070605 shuffled: byte planes.
        let span = [1, 5, 2, 6, 3, 7, 4, 8];
        let mut dst = [0u8; 8];
        decode_into(&table, &span, &mut dst, 1 << 20).unwrap();
        assert_eq!(dst, [1, 2, 3, 4, 5, 6, 7, 8]);
    }
}
