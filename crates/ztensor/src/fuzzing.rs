//! Entry points for the fuzz targets of decoders that no file reaches quickly: not part of the
//! stable API.
//!
//! - [`hdf5_chunk_input`] / [`hdf5_chunk_seed`]: the `decode_hdf5_chunk` target's input, a
//!   small header naming a filter pipeline and a dataset's shape, then a chunk's stored bytes;
//!   and the input that holds a real chunk (what `cargo xtask fuzz` seeds the target with).
//! - [`decode_hdf5_chunks`]: an HDF5 chunk table's chunks through their filter pipeline
//!   (Blosc, Blosc2, bitshuffle, scale-offset, szip, LZF, LZ4, bzip2, zstd, deflate, shuffle,
//!   fletcher32) into the dataset's bytes. The `read_hdf5` target reaches these too, but an
//!   HDF5 file is large beside its chunk and most of its mutations break the structure before
//!   a chunk is read; this target spends every run in the decoders.
//! - [`list_torch_stream`]: a `torch.save` archive listed from its front, as one written to a
//!   stream is (a DCP chunk through the zstd transform decodes to one): records closed by data
//!   descriptors, their lengths from the pickle; and the archive's end after each such record
//!   (end records, central directory), as a read of the record checks it. The
//!   `read_torch_dcp` target opens only `.metadata` files, whose data files it cannot reach.

// The filter ids an input picks from, by a byte modulo their number: every filter the
// decoders take (their own list, so a filter added there is fuzzed here).
use crate::chunks::FILTERS;
use zt_container::{Error, Result};
use zt_formats::{Chunk, ChunkTable};

/// The element sizes an input picks from.
const ELEMENT_SIZES: [u64; 5] = [1, 2, 4, 8, 16];

/// Reads an input's fields front to back; missing bytes read as zero.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn u8(&mut self) -> u8 {
        let (first, rest) = self.0.split_first().map_or((0, &[][..]), |(f, r)| (*f, r));
        self.0 = rest;
        first
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn rest(self) -> &'a [u8] {
        self.0
    }
}

/// The table and stored bytes an input of the `decode_hdf5_chunk` target says: one to three
/// filters, each any parameters; a 1-d or 2-d dataset of one to three chunks a side, clipped
/// at its edge; every chunk the same stored bytes (the input's rest). Any input makes a table
/// the HDF5 listing could build (it checks the shape and the chunks, not the filters'
/// parameters), so a panic in its decoding is the decoders'.
pub fn hdf5_chunk_input(data: &[u8]) -> (ChunkTable, &[u8]) {
    let mut input = Fields(data);
    let count = 1 + usize::from(input.u8() % 3);
    let mut filters = Vec::new();
    let mut filter_params = Vec::new();
    for _ in 0..count {
        filters.push(FILTERS[usize::from(input.u8()) % FILTERS.len()]);
        let params = input.u8() % 9;
        filter_params.push((0..params).map(|_| input.u32()).collect());
    }
    let element_size = ELEMENT_SIZES[usize::from(input.u8()) % ELEMENT_SIZES.len()];
    let rank = 1 + usize::from(input.u8() & 1);
    let (mut dims, mut chunk, mut starts) = (Vec::new(), Vec::new(), vec![Vec::new()]);
    for _ in 0..rank {
        let side = u64::from(input.u16()).max(1);
        let count = 1 + u64::from(input.u8() % 3);
        let clip = u64::from(input.u16()) % side;
        chunk.push(side);
        dims.push(side * count - clip);
        starts = starts
            .iter()
            .flat_map(|s| (0..count).map(move |i| [s.as_slice(), &[i * side]].concat()))
            .collect();
    }
    let mask = u32::from(input.u8());
    let stored = input.rest();
    let size = stored.len() as u64;
    let chunks = starts
        .into_iter()
        .map(|start| Chunk {
            at: 0,
            size,
            start,
            mask,
        })
        .collect();
    let table = ChunkTable {
        dims,
        chunk,
        element_size,
        filters,
        filter_params,
        chunks,
        fill: Vec::new(),
    };
    (table, stored)
}

/// The input of the `decode_hdf5_chunk` target that holds `stored`, a chunk of `table` whose
/// filter mask is `mask`, as a dataset of that one chunk (its shape flattened to one or two
/// dimensions); `None` where the input cannot say the table (more than three filters, more
/// than eight parameters, or a chunk too large).
pub fn hdf5_chunk_seed(table: &ChunkTable, mask: u32, stored: &[u8]) -> Option<Vec<u8>> {
    if !(1..=3).contains(&table.filters.len()) {
        return None;
    }
    let mut seed = vec![table.filters.len() as u8 - 1];
    for (id, params) in table.filters.iter().zip(&table.filter_params) {
        seed.push(FILTERS.iter().position(|f| f == id)? as u8);
        seed.push(u8::try_from(params.len()).ok().filter(|&n| n <= 8)?);
        params.iter().for_each(|p| seed.extend(p.to_le_bytes()));
    }
    seed.push(
        ELEMENT_SIZES
            .iter()
            .position(|&e| e == table.element_size)? as u8,
    );
    let (head, rest) = table.chunk.split_first()?;
    let rest = rest.iter().try_fold(1u64, |n, &d| n.checked_mul(d))?;
    let sides = match head.checked_mul(rest)? {
        n if n <= 0xFFFF => vec![n],
        _ => vec![*head, rest],
    };
    seed.push(sides.len() as u8 - 1);
    for side in sides {
        seed.extend(u16::try_from(side).ok()?.to_le_bytes());
        seed.extend([0, 0, 0]); // one chunk a side, not clipped
    }
    seed.push(u8::try_from(mask).ok()?);
    seed.extend(stored);
    Some(seed)
}

/// Decodes every chunk of `table` from `span` (the bytes its chunks' offsets point into) into
/// a new buffer of the dataset's size, no chunk over `cap` bytes decoded. The dataset's size
/// must be at most `cap` too.
pub fn decode_hdf5_chunks(table: &ChunkTable, span: &[u8], cap: u64) -> Result<Vec<u8>> {
    let size = table
        .dims
        .iter()
        .try_fold(table.element_size, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= cap)
        .ok_or_else(|| Error::limit("the dataset is larger than the cap"))?;
    let mut out = zt_container::internal::try_zeroed_vec(size as usize)?;
    crate::chunks::decode_into(table, span, &mut out, cap)?;
    Ok(out)
}

/// Lists `archive`, the bytes a compressed DCP chunk decodes to, from its front as its reader
/// does (see the map above), then checks the end of the archive after each record closed by
/// a data descriptor as a read of that record does: the number of objects and of records
/// closed by data descriptors it found, or the first error.
#[cfg(all(feature = "torch-dcp", feature = "zstd"))]
pub fn list_torch_stream(archive: &[u8]) -> Result<usize> {
    let limits = crate::listing::Limits::default();
    let mut budget = 1 << 30;
    let (listing, closed) =
        crate::files::torch::streamed::list_streamed(archive, &limits, &mut budget)?;
    for &(data_at, len) in &closed {
        let end_at = data_at.saturating_add(len);
        let after = usize::try_from(end_at)
            .ok()
            .and_then(|at| archive.get(at..))
            .unwrap_or_default();
        let Some(d) = crate::zip::descriptor_closing(after, len, |_| true) else {
            continue;
        };
        let end = after.get(d.len as usize..).unwrap_or_default();
        crate::zip::check_stream_end(end, end_at.saturating_add(d.len), (data_at, len, d.crc32))?;
    }
    Ok(listing.objects.len() + closed.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds of every chunked HDF5 fixture decode through the target's own reading of
    /// them, as their datasets' first chunks decode in a read: the target starts from real
    /// chunks of every filter the fixtures hold, not from inputs refused at the first byte.
    #[test]
    fn seeds_of_the_fixtures_chunks_decode() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/hdf5");
        let (mut seeds, mut filters) = (0, std::collections::BTreeSet::new());
        for entry in std::fs::read_dir(root).unwrap() {
            let path = entry.unwrap().path();
            let Ok(reader) = crate::open(&path) else {
                continue;
            };
            let file = std::fs::read(&path).unwrap();
            for object in &reader {
                for c in object.components() {
                    let zt_formats::Encoding::Hdf5Chunks(table) = &c.info().encoding else {
                        continue;
                    };
                    // In this file (not behind an external link), with a chunk written.
                    let first = table.chunks.first().filter(|_| c.info().file == 0);
                    let Some(first) = first else { continue };
                    let at = (c.info().offset + first.at) as usize;
                    let stored = &file[at..at + first.size as usize];
                    let Some(seed) = hdf5_chunk_seed(table, first.mask, stored) else {
                        continue;
                    };
                    let (parsed, span) = hdf5_chunk_input(&seed);
                    assert_eq!(parsed.filters, table.filters, "{}", object.name());
                    let decoded = decode_hdf5_chunks(&parsed, span, 16 << 20);
                    assert!(
                        decoded.is_ok(),
                        "{} {}: {decoded:?}",
                        path.display(),
                        object.name()
                    );
                    seeds += 1;
                    filters.extend(table.filters.iter().copied());
                }
            }
        }
        assert!(seeds >= 30, "{seeds} seeds");
        // Deflate, shuffle, fletcher32, LZF, and the Blosc2 of blosc2_small.h5 at least.
        for id in [1, 2, 3, 32000, 32026] {
            assert!(
                filters.contains(&id),
                "no fixture chunk through filter {id}: {filters:?}"
            );
        }
    }
}
