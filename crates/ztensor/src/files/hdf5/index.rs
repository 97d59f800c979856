//! The chunk indexes of HDF5's chunked datasets: where each chunk of a dataset lies, found
//! once when the file is listed, into a [`zt_formats::ChunkTable`].
//!
//! - a version 1 B-tree (layout messages 1-3, and libver "earliest"): keys carry each chunk's
//!   coordinates;
//! - one chunk (the dataset is one chunk);
//! - implicit chunks, back to back from one address (unfiltered, allocated early);
//! - a fixed array (fixed maximum dimensions), its entries in pages when there are many;
//! - an extensible array (one unlimited dimension): an index block, then data blocks and
//!   super blocks of data blocks whose sizes double;
//! - a version 2 B-tree (more than one unlimited dimension): records carry coordinates.
//!
//! The three array indexes number chunks row-major over the chunk grid of the dataset's
//! *maximum* dimensions (an extensible array's unlimited dimension moved first); [`Grid`]
//! turns that number back into a chunk. Every block's lookup3 checksum is checked before
//! anything is read from it, as HDF5 does (a paged block's pages each carry their own).
//!
//! ```text
//!  fixed array      FAHD ver client entry-size page-bits count data-block checksum
//!                   FADB ver client header [page bitmap] [entries] checksum [pages: entries checksum]
//!  extensible array EAHD ver client entry-size max-bits index-entries data-min super-min page-bits
//!                        6 statistics index-block checksum
//!                   EAIB ver client header entries data-block-addrs super-block-addrs checksum
//!                   EASB ver client header offset [page bitmaps] data-block-addrs checksum
//!                   EADB ver client header offset [entries] checksum [pages: entries checksum]
//!  v2 B-tree        BTHD ver type node-size record-size depth split merge root root-records total checksum
//!                   BTIN ver type records children(address, records, [total]) checksum
//!                   BTLF ver type records checksum
//! ```

use super::{bad_at, ChunkIndex, File, Reached, MAX_CHUNKS};
use zt_container::{Error, Result};

/// What one listed chunk costs in memory, roughly: its record (address, stored size, filter
/// mask and its start in the dataset, a vector of one index per dimension) and the list's
/// spare capacity.
const CHUNK_LISTING_COST: u64 = 96;

/// The deepest version 2 B-tree read.
const MAX_BTREE2_DEPTH: u16 = 32;

/// A chunk found in an index.
struct Found {
    /// Its address in the file (from the base).
    at: u64,
    /// Its stored size.
    size: u64,
    /// Its first element's coordinates.
    start: Vec<u64>,
    /// The filters it skipped.
    mask: u32,
}

/// An array index's chunk numbering: row-major over the grid of the maximum dimensions, in
/// `order` (an extensible array puts its unlimited dimension first).
struct Grid<'a> {
    dims: &'a [u64],
    chunk: &'a [u64],
    order: Vec<usize>,
    /// Chunks along each dimension of `order`, from the maximum dimensions.
    counts: Vec<u64>,
}

impl Grid<'_> {
    /// The first element of chunk `i`, or `None` when it lies outside the current dimensions
    /// (room kept for growth, or left by a shrink).
    fn start(&self, i: u64) -> Option<Vec<u64>> {
        let mut start = vec![0u64; self.dims.len()];
        let mut rest = i;
        for (k, &d) in self.order.iter().enumerate().rev() {
            let along = if k == 0 {
                std::mem::take(&mut rest)
            } else {
                let n = self.counts[k].max(1);
                let along = rest % n;
                rest /= n;
                along
            };
            start[d] = along.checked_mul(self.chunk[d])?;
            if start[d] >= self.dims[d] {
                return None;
            }
        }
        (rest == 0).then_some(start)
    }

    /// How many chunk numbers can name a chunk inside the current dimensions.
    fn span(&self) -> u64 {
        let first = self
            .order
            .first()
            .map_or(1, |&d| self.dims[d].div_ceil(self.chunk[d].max(1)));
        self.counts
            .iter()
            .skip(1)
            .try_fold(first, |a, &n| a.checked_mul(n))
            .unwrap_or(u64::MAX)
    }
}

/// Bytes that hold any number up to `limit` (HDF5's `H5VM_limit_enc_size`).
fn width_for(limit: u64) -> usize {
    (limit.checked_ilog2().unwrap_or(0) / 8) as usize + 1
}

/// Whether bit `i` of a page bitmap is set (most significant bit first, as HDF5 writes).
fn bit(bitmap: &[u8], i: u64) -> bool {
    let byte = usize::try_from(i / 8).unwrap_or(usize::MAX);
    bitmap.get(byte).is_some_and(|b| b & (0x80 >> (i % 8)) != 0)
}

/// The shape of one array index's entries: (address, stored size, mask).
#[derive(Clone, Copy)]
struct Entries {
    /// Bytes per entry.
    size: u64,
    /// Filtered entries carry a stored size and a mask after the address.
    filtered: bool,
    /// An unfiltered chunk's stored size.
    chunk_bytes: u64,
}

impl File<'_> {
    /// The chunks of a chunked dataset of `dims` (maximum dimensions `max_dims`, `u64::MAX`
    /// unlimited; elements of `size` bytes), from its index; `pipeline` is the filters, each
    /// with its parameters.
    pub(super) fn chunk_table(
        &mut self,
        dims: &[u64],
        max_dims: &[u64],
        size: u64,
        layout_dims: &[u64],
        index: &ChunkIndex,
        pipeline: Vec<(u16, Vec<u32>)>,
    ) -> Result<(zt_formats::ChunkTable, u64)> {
        let (filters, filter_params) = pipeline.into_iter().unzip();
        // The layout's dimensions end with the element's size.
        let (element, chunk) = layout_dims
            .split_last()
            .ok_or_else(|| Error::invalid("a chunked layout without dimensions"))?;
        if chunk.len() != dims.len() || chunk.contains(&0) {
            return Err(Error::invalid(format!(
                "chunks of {chunk:?} for a dataset of {dims:?}"
            )));
        }
        // libhdf5 refuses the dataset too ("stored datatype size in chunk layout does not
        // match datatype description"), whatever its chunk index.
        if *element != size || *element == 0 {
            return Err(Error::invalid(format!(
                "chunk element size {element}, the datatype's is {size}"
            )));
        }
        let chunk_bytes = chunk
            .iter()
            .try_fold(size, |a, &n| a.checked_mul(n))
            .ok_or_else(|| Error::invalid("a chunk's size overflows"))?;
        // The grid of the maximum dimensions; an unlimited one counts as its current size.
        let unlimited = max_dims.iter().position(|&m| m == u64::MAX);
        let mut order: Vec<usize> = (0..dims.len()).collect();
        if let (ChunkIndex::ExtensibleArray(_), Some(u)) = (index, unlimited) {
            order.remove(u);
            order.insert(0, u);
        }
        let counts = order
            .iter()
            .map(|&d| {
                let max = max_dims.get(d).copied().unwrap_or(dims[d]);
                let max = if max == u64::MAX {
                    dims[d]
                } else {
                    max.max(dims[d])
                };
                max.div_ceil(chunk[d])
            })
            .collect();
        let grid = Grid {
            dims,
            chunk,
            order,
            counts,
        };
        let span = grid.span();
        let mut found: Vec<Found> = Vec::new();
        match *index {
            ChunkIndex::BTree(None)
            | ChunkIndex::Single(None, _)
            | ChunkIndex::Implicit(None)
            | ChunkIndex::FixedArray(None)
            | ChunkIndex::ExtensibleArray(None)
            | ChunkIndex::BTree2(None) => {}
            ChunkIndex::BTree(Some(root)) => self.chunk_btree(root, chunk, span, &mut found)?,
            ChunkIndex::Single(Some(addr), filtered) => {
                let (stored, mask) = filtered.unwrap_or((chunk_bytes, 0));
                let start = vec![0; dims.len()];
                found.push(Found {
                    at: addr,
                    size: stored,
                    start,
                    mask,
                });
            }
            ChunkIndex::Implicit(Some(addr)) => {
                for i in 0..span {
                    let at = i.checked_mul(chunk_bytes).and_then(|o| o.checked_add(addr));
                    let at = at.ok_or_else(|| Error::invalid("implicit chunks overflow"))?;
                    if at >= self.source.len() {
                        // Past the file: the dataset's check of its span says so.
                        break;
                    }
                    let Some(start) = grid.start(i) else { continue };
                    self.count_chunk(found.len())?;
                    found.push(Found {
                        at,
                        size: chunk_bytes,
                        start,
                        mask: 0,
                    });
                }
            }
            ChunkIndex::FixedArray(Some(addr)) => {
                self.fixed_array(addr, &grid, chunk_bytes, &mut found)?
            }
            ChunkIndex::ExtensibleArray(Some(addr)) => {
                self.extensible_array(addr, &grid, chunk_bytes, &mut found)?
            }
            ChunkIndex::BTree2(Some(addr)) => {
                self.btree2(addr, dims, chunk, chunk_bytes, &mut found)?
            }
        }
        let first = found.iter().map(|c| c.at).min().unwrap_or(0);
        let chunks = found
            .into_iter()
            .map(|c| zt_formats::Chunk {
                at: c.at - first,
                size: c.size,
                start: c.start,
                mask: c.mask,
            })
            .collect();
        let table = zt_formats::ChunkTable {
            dims: dims.to_vec(),
            chunk: chunk.to_vec(),
            element_size: size,
            filters,
            filter_params,
            chunks,
            fill: Vec::new(),
        };
        Ok((table, first))
    }

    fn count_chunk(&mut self, n: usize) -> Result<()> {
        if n >= MAX_CHUNKS {
            return Err(Error::limit(format!(
                "a dataset of more than {MAX_CHUNKS} chunks"
            )));
        }
        self.listing.charge_for(CHUNK_LISTING_COST, || {
            format!("listing a dataset's {} chunks", n + 1)
        })
    }

    /// The chunks under a version 1 B-tree of raw data chunks (node type 1), whose chunks
    /// are `chunk` elements on a side. HDF5 finds a chunk by a binary search over the keys
    /// for its aligned offset, so keys out of order, unaligned or with a last offset other
    /// than 0 are damage it would read past, returning the fill value for chunks that are
    /// there: they are refused, named.
    fn chunk_btree(
        &mut self,
        root: u64,
        chunk: &[u64],
        grid: u64,
        found: &mut Vec<Found>,
    ) -> Result<()> {
        let rank = chunk.len();
        let key = 8 + 8 * (rank as u64 + 1);
        let mut stack = vec![root];
        let mut reached = Reached::new();
        reached.first_time(root, "a chunk B-tree")?;
        let mut nodes = 0usize;
        while let Some(node) = stack.pop() {
            nodes += 1;
            if nodes > MAX_CHUNKS {
                return Err(Error::limit("a chunk B-tree of too many nodes"));
            }
            let (level, used, body_at) = self.btree_node(node, 1, "chunk")?;
            let body = self.read(
                body_at,
                used * (key + self.offsets as u64) + key,
                "chunk B-tree entries",
            )?;
            let mut b = self.cursor(&body, body_at);
            let mut children = Vec::new();
            let mut previous: Option<Vec<u64>> = None;
            for _ in 0..used {
                let stored = u64::from(b.u32("chunk size")?);
                let mask = b.u32("filter mask")?;
                let mut start = (0..=rank)
                    .map(|_| b.uint(8, "chunk offset"))
                    .collect::<Result<Vec<u64>>>()?;
                let child = b.addr("chunk address")?;
                // Every key, an inner node's too (HDF5 searches by them), is a chunk's
                // offsets, and they rise through the node.
                let last = start.pop().unwrap_or_default();
                let aligned = start.iter().zip(chunk).all(|(&s, &c)| s % c == 0);
                if last != 0 || !aligned {
                    return Err(bad_at(
                        format!(
                            "a chunk B-tree key of offsets {start:?} and {last}: not a chunk's \
                             (multiples of {chunk:?}, then 0)"
                        ),
                        node,
                    ));
                }
                if previous.as_ref().is_some_and(|p| *p >= start) {
                    return Err(bad_at(
                        format!("chunk B-tree keys out of order at chunk {start:?}"),
                        node,
                    ));
                }
                previous = Some(start.clone());
                let Some(child) = child else { continue };
                if level > 0 {
                    reached.first_time(child, "a chunk B-tree")?;
                    children.push(child);
                    continue;
                }
                if found.len() as u64 >= grid.saturating_add(1) {
                    return Err(bad_at(
                        "a chunk B-tree of more chunks than the dataset holds",
                        node,
                    ));
                }
                self.count_chunk(found.len())?;
                // Leaves are walked left to right: their keys rise throughout.
                if found.last().is_some_and(|p| p.start >= start) {
                    return Err(bad_at(
                        format!("chunk B-tree keys out of order at chunk {start:?}"),
                        node,
                    ));
                }
                found.push(Found {
                    at: child,
                    size: stored,
                    start,
                    mask,
                });
            }
            stack.extend(children.into_iter().rev());
        }
        Ok(())
    }

    /// Reads `count` array entries (numbered from `first`) into `found`, from `bytes`, read
    /// at `at` with the checksum that covers them: the block is read once.
    fn entries(
        &mut self,
        (bytes, at): (&[u8], u64),
        first: u64,
        count: u64,
        shape: Entries,
        grid: &Grid<'_>,
        found: &mut Vec<Found>,
    ) -> Result<()> {
        let mut b = self.cursor(bytes, at);
        for i in first..first.saturating_add(count) {
            let addr = b.addr("chunk address")?;
            let (stored, mask) = if shape.filtered {
                let width = shape.size.saturating_sub(self.offsets as u64 + 4) as usize;
                (b.uint(width.min(8), "chunk size")?, b.u32("filter mask")?)
            } else {
                b.skip(
                    shape.size.saturating_sub(self.offsets as u64) as usize,
                    "entry",
                )?;
                (shape.chunk_bytes, 0)
            };
            if let (Some(addr), Some(start)) = (addr, grid.start(i)) {
                self.count_chunk(found.len())?;
                found.push(Found {
                    at: addr,
                    size: stored,
                    start,
                    mask,
                });
            }
        }
        Ok(())
    }

    /// The start of an array index's header (`head`, read at `addr`): its signature, version,
    /// client and entry size; the cursor is left after them.
    fn array_header<'b>(
        &self,
        head: &'b [u8],
        addr: u64,
        signature: &[u8; 4],
        what: &str,
        chunk_bytes: u64,
    ) -> Result<(super::Cursor<'b>, Entries)> {
        let mut c = self.cursor(head, addr);
        if c.take(4, "signature")? != signature {
            let sig = String::from_utf8_lossy(signature);
            return Err(bad_at(format!("{what} without its {sig} signature"), addr));
        }
        c.skip(1, "version")?;
        let client = c.u8("client id")?;
        let size = c.u8("entry size")?;
        let shape = self.entry_shape(client, size, chunk_bytes, addr)?;
        Ok((c, shape))
    }

    /// The checked entry shape of an array index (client 0: chunks, 1: filtered chunks).
    fn entry_shape(&self, client: u8, size: u8, chunk_bytes: u64, at: u64) -> Result<Entries> {
        let size = u64::from(size);
        let least = self.offsets as u64 + if client == 1 { 5 } else { 0 };
        if client > 1 || size < least || size > self.offsets as u64 + 12 {
            return Err(bad_at(
                format!("a chunk index of client {client} with entries of {size} bytes"),
                at,
            ));
        }
        Ok(Entries {
            size,
            filtered: client == 1,
            chunk_bytes,
        })
    }

    /// The entries of a fixed array chunk index.
    fn fixed_array(
        &mut self,
        addr: u64,
        grid: &Grid<'_>,
        chunk_bytes: u64,
        found: &mut Vec<Found>,
    ) -> Result<()> {
        let head = self.read_checked(
            addr,
            8 + self.lengths as u64 + self.offsets as u64,
            "fixed array header",
        )?;
        let (mut c, shape) = self.array_header(&head, addr, b"FAHD", "fixed array", chunk_bytes)?;
        let page_bits = c.u8("page bits")?;
        let count = c.length("entries")?;
        let block = c
            .addr("data block")?
            .ok_or_else(|| bad_at("fixed array without data", addr))?;
        let all = grid.counts.iter().try_fold(1u64, |a, &n| a.checked_mul(n));
        if all.is_none_or(|all| count > all) || count > MAX_CHUNKS as u64 || page_bits > 32 {
            return Err(bad_at(
                format!(
                    "a fixed array of {count} chunks (page bits {page_bits}) for a grid of {all:?}"
                ),
                addr,
            ));
        }
        // The data block: signature, version, client, header address, then either the entries
        // or, when paged, a bitmap of the pages written; then its checksum.
        let prefix = 6 + self.offsets as u64;
        let page = 1u64 << page_bits;
        if count <= page {
            let all = prefix.saturating_add(count.saturating_mul(shape.size));
            let data = self.read_checked(block, all, "fixed array data block")?;
            let listed = data.get(prefix as usize..).unwrap_or_default();
            let at = block.saturating_add(prefix);
            return self.entries((listed, at), 0, count, shape, grid, found);
        }
        let pages = count.div_ceil(page);
        let bitmap_at = block.saturating_add(prefix);
        let head =
            self.read_checked(block, prefix + pages.div_ceil(8), "fixed array data block")?;
        let bitmap = head.get(prefix as usize..).unwrap_or_default();
        let mut at = bitmap_at.saturating_add(pages.div_ceil(8) + 4);
        for p in 0..pages {
            let first = p * page;
            let n = page.min(count - first);
            if bit(bitmap, p) {
                let data = self.read_checked(at, n * shape.size, "fixed array data block page")?;
                self.entries((&data, at), first, n, shape, grid, found)?;
            }
            at = at.saturating_add(n * shape.size + 4);
        }
        Ok(())
    }

    /// The entries of an extensible array chunk index.
    fn extensible_array(
        &mut self,
        addr: u64,
        grid: &Grid<'_>,
        chunk_bytes: u64,
        found: &mut Vec<Found>,
    ) -> Result<()> {
        let lengths = self.lengths as u64;
        let head = self.read_checked(
            addr,
            12 + 6 * lengths + self.offsets as u64,
            "extensible array header",
        )?;
        let (mut c, shape) =
            self.array_header(&head, addr, b"EAHD", "extensible array", chunk_bytes)?;
        let max_bits = c.u8("maximum bits")?;
        let index_entries = u64::from(c.u8("index block entries")?);
        let data_min = u64::from(c.u8("data block minimum")?);
        let super_min = u64::from(c.u8("super block minimum")?);
        let page_bits = c.u8("page bits")?;
        c.skip(6 * lengths as usize, "statistics")?;
        let Some(iblock) = c.addr("index block")? else {
            return Ok(());
        };
        let data_min_bits = data_min.checked_ilog2().unwrap_or(u32::MAX);
        if !data_min.is_power_of_two()
            || !super_min.is_power_of_two()
            || super_min < 2
            || !(1..=64).contains(&max_bits)
            || u32::from(max_bits) < data_min_bits
            || page_bits > 32
        {
            return Err(bad_at(
                format!(
                    "an extensible array of parameters HDF5 does not write (maximum bits \
                     {max_bits}, data block minimum {data_min}, super block minimum \
                     {super_min}, page bits {page_bits})"
                ),
                addr,
            ));
        }
        // Super block u holds 2^(u/2) data blocks of 2^((u+1)/2) * data_min entries; the
        // index block holds the data blocks of the first 2*log2(super_min) super blocks.
        let supers = 1 + u64::from(max_bits) - u64::from(data_min_bits);
        let in_index = (2 * u64::from(super_min.ilog2())).min(supers);
        let index_data = 2 * (super_min - 1);
        let offset_bytes = u64::from(max_bits).div_ceil(8);
        let offsets = self.offsets as u64;
        let size =
            6 + offsets + index_entries * shape.size + (index_data + supers - in_index) * offsets;
        let body = self.read_checked(iblock, size, "extensible array index block")?;
        let mut b = self.cursor(&body, iblock);
        if b.take(4, "EAIB")? != b"EAIB" {
            return Err(bad_at(
                "extensible array index block without its EAIB signature",
                iblock,
            ));
        }
        b.skip(2 + self.offsets, "index block prefix")?;
        let span = grid.span();
        let here = iblock + 6 + offsets;
        let listed = body.get(6 + offsets as usize..).unwrap_or_default();
        let n = index_entries.min(span);
        self.entries((listed, here), 0, n, shape, grid, found)?;
        b.skip((index_entries * shape.size) as usize, "index block entries")?;
        let page = 1u64 << page_bits;
        // Every data block, in entry order: the index block's, then each super block's.
        let mut next = index_entries;
        let mut listed_data = 0u64;
        for u in 0..supers {
            if next >= span {
                break;
            }
            let blocks = 1u64 << (u / 2);
            let entries = (1u64 << u.div_ceil(2).min(63)).saturating_mul(data_min);
            let paged = entries > page;
            let pages = if paged { entries / page } else { 0 };
            let mut blocks_at = Vec::new();
            let mut bitmaps: Option<Vec<u8>> = None;
            if u < in_index {
                for _ in 0..blocks {
                    if listed_data < index_data {
                        blocks_at.push(b.addr("data block address")?);
                        listed_data += 1;
                    }
                }
                if paged {
                    return Err(Error::unsupported(
                        "an extensible array whose index block holds paged data blocks",
                    )
                    .at(self.base + iblock));
                }
            } else {
                if listed_data < index_data {
                    // The index block's data block addresses are all read first.
                    b.skip(
                        ((index_data - listed_data) * offsets) as usize,
                        "data blocks",
                    )?;
                    listed_data = index_data;
                }
                let Some(sblock) = b.addr("super block address")? else {
                    next = next.saturating_add(blocks.saturating_mul(entries));
                    continue;
                };
                // Parameters the file declares can make these sizes overflow: saturated,
                // they are refused by the read as past the end of the file.
                let bitmap_len = if paged {
                    blocks.saturating_mul(pages.div_ceil(8))
                } else {
                    0
                };
                let size =
                    (6 + offsets + offset_bytes + blocks * offsets).saturating_add(bitmap_len);
                let sb = self.read_checked(sblock, size, "extensible array super block")?;
                let mut s = self.cursor(&sb, sblock);
                if s.take(4, "EASB")? != b"EASB" {
                    return Err(bad_at(
                        "extensible array super block without its EASB signature",
                        sblock,
                    ));
                }
                s.skip((2 + offsets + offset_bytes) as usize, "super block prefix")?;
                if paged {
                    bitmaps = Some(s.take(bitmap_len as usize, "page bitmaps")?.to_vec());
                }
                for _ in 0..blocks {
                    blocks_at.push(s.addr("data block address")?);
                }
            }
            for (j, dblock) in blocks_at.into_iter().enumerate() {
                let first = next;
                next = next.saturating_add(entries);
                let Some(dblock) = dblock else { continue };
                if first >= span {
                    break;
                }
                let prefix = 10 + offsets + offset_bytes;
                // The block's own checksum covers its header, and its entries when unpaged;
                // each page has its own.
                let summed = prefix - 4
                    + if bitmaps.is_none() {
                        entries.saturating_mul(shape.size)
                    } else {
                        0
                    };
                let sig = self.read_checked(dblock, summed, "extensible array data block")?;
                if !sig.starts_with(b"EADB") {
                    return Err(bad_at(
                        "extensible array data block without its EADB signature",
                        dblock,
                    ));
                }
                match &bitmaps {
                    None => {
                        let n = entries.min(span - first);
                        let at = dblock.saturating_add(prefix - 4);
                        let listed = sig.get(prefix as usize - 4..).unwrap_or_default();
                        self.entries((listed, at), first, n, shape, grid, found)?;
                    }
                    Some(bitmaps) => {
                        // One bit per page, numbered across the super block's data blocks
                        // (HDF5 sizes the bitmap a byte-rounded share per block, but numbers
                        // its bits block after block). No page past the bitmap was written.
                        let bits = bitmaps.len() as u64 * 8;
                        let own = (j as u64).saturating_mul(pages);
                        for p in 0..pages.min(bits.saturating_sub(own)) {
                            let at = dblock
                                .saturating_add(prefix)
                                .saturating_add(p.saturating_mul(page * shape.size + 4));
                            let from = first.saturating_add(p.saturating_mul(page));
                            if from < span && bit(bitmaps, own + p) {
                                let n = page.min(span - from);
                                let summed = page * shape.size;
                                let data = self.read_checked(
                                    at,
                                    summed,
                                    "extensible array data block page",
                                )?;
                                self.entries((&data, at), from, n, shape, grid, found)?;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The records of a version 2 B-tree of chunks (record types 10 and 11).
    fn btree2(
        &mut self,
        addr: u64,
        dims: &[u64],
        chunk: &[u64],
        chunk_bytes: u64,
        found: &mut Vec<Found>,
    ) -> Result<()> {
        let offsets = self.offsets as u64;
        let coords = 8 * dims.len() as u64;
        // Type 10 records hold no size (0); type 11 one of this width, and a filter mask.
        let size_width = |kind: u8, record: u64| match kind {
            10 if record == offsets + coords => Ok(0),
            11 if (offsets + coords + 5..=offsets + coords + 12).contains(&record) => {
                Ok(record - offsets - coords - 4)
            }
            _ => Err(bad_at(
                format!("a v2 B-tree of type {kind} and records of {record} bytes for chunks"),
                addr,
            )),
        };
        self.btree2_walk(addr, size_width, |file, b, &size_width| {
            let at = b.addr("chunk address")?;
            let (stored, mask) = if size_width > 0 {
                (
                    b.uint(size_width as usize, "chunk size")?,
                    b.u32("filter mask")?,
                )
            } else {
                (chunk_bytes, 0)
            };
            let mut start = Vec::with_capacity(dims.len());
            let mut inside = true;
            for (&n, &c) in dims.iter().zip(chunk) {
                let s = b.uint(8, "scaled offset")?.checked_mul(c);
                inside &= s.is_some_and(|s| s < n);
                start.push(s.unwrap_or(u64::MAX));
            }
            if let (Some(at), true) = (at, inside) {
                file.count_chunk(found.len())?;
                found.push(Found {
                    at,
                    size: stored,
                    start,
                    mask,
                });
            }
            Ok(())
        })
    }

    /// Every block of a dense group's name index (a v2 B-tree of type 5), checksums checked,
    /// records unread: HDF5 reads the index to list the group's links, so damage in it makes
    /// h5py refuse the file; we read the links from the heap, and refuse it too.
    pub(super) fn check_name_index(&mut self, addr: u64) -> Result<()> {
        let accept = |kind: u8, record: u64| match kind {
            5 if record > 4 => Ok(record),
            _ => Err(bad_at(
                format!("a link name index of type {kind} and records of {record} bytes"),
                addr,
            )),
        };
        self.btree2_walk(addr, accept, |_, b, &record| {
            b.skip(record as usize, "name index record")
        })
    }

    /// Walks the version 2 B-tree whose header is at `addr`, every header and node checksum
    /// checked: `accept` sees the tree's type and record size (and refuses those its caller
    /// cannot read); `record` reads one record, the cursor at its start.
    fn btree2_walk<T>(
        &mut self,
        addr: u64,
        accept: impl FnOnce(u8, u64) -> Result<T>,
        mut record_at: impl FnMut(&mut Self, &mut super::Cursor<'_>, &T) -> Result<()>,
    ) -> Result<()> {
        let offsets = self.offsets as u64;
        let head =
            self.read_checked(addr, 18 + offsets + self.lengths as u64, "v2 B-tree header")?;
        let mut c = self.cursor(&head, addr);
        if c.take(4, "BTHD")? != b"BTHD" {
            return Err(bad_at("v2 B-tree without its BTHD signature", addr));
        }
        c.skip(1, "version")?;
        let kind = c.u8("tree type")?;
        let node_size = u64::from(c.u32("node size")?);
        let record = u64::from(c.u16("record size")?);
        let depth = c.u16("depth")?;
        c.skip(2, "split and merge")?;
        let Some(root) = c.addr("root node")? else {
            return Ok(());
        };
        let root_records = u64::from(c.u16("root records")?);
        let accepted = accept(kind, record)?;
        if depth > MAX_BTREE2_DEPTH
            || node_size > super::MAX_STRUCTURE
            || record == 0
            || node_size < 10 + record
        {
            return Err(bad_at(
                format!("a v2 B-tree of depth {depth} and nodes of {node_size} bytes"),
                addr,
            ));
        }
        // Per depth: the most records a node holds, and the widths of a child pointer's
        // counts (HDF5 sizes them to the most records a subtree can hold).
        let leaf_max = (node_size - 10) / record;
        let count_width = width_for(leaf_max) as u64;
        let mut max = vec![leaf_max];
        let mut total = vec![leaf_max];
        let mut total_width = vec![0u64];
        for d in 1..=usize::from(depth) {
            let pointer = offsets + count_width + total_width[d - 1];
            let n = node_size.saturating_sub(10 + pointer) / (record + pointer);
            let below = (n + 1).saturating_mul(total[d - 1]).saturating_add(n);
            max.push(n);
            total.push(below);
            total_width.push(width_for(below) as u64);
        }
        let mut stack = vec![(root, root_records, usize::from(depth))];
        let mut reached = Reached::new();
        reached.first_time(root, "a v2 B-tree")?;
        let mut nodes = 0usize;
        let mut visited = 0u64;
        while let Some((node, records, d)) = stack.pop() {
            nodes += 1;
            visited = visited.saturating_add(records);
            if visited > MAX_CHUNKS as u64 {
                let why = format!("a v2 B-tree of more than {MAX_CHUNKS} records");
                return Err(bad_at(why, node));
            }
            if nodes > MAX_CHUNKS || records > max[d] {
                return Err(bad_at(
                    format!("a v2 B-tree node of {records} records (at most {})", max[d]),
                    node,
                ));
            }
            let pointer = if d > 0 {
                offsets + count_width + if d > 1 { total_width[d - 1] } else { 0 }
            } else {
                0
            };
            let size = 6 + records * record + if d > 0 { (records + 1) * pointer } else { 0 };
            let body = self.read_checked(node, size, "v2 B-tree node")?;
            let mut b = self.cursor(&body, node);
            let sig = if d > 0 { b"BTIN" } else { b"BTLF" };
            if b.take(4, "node signature")? != sig {
                return Err(bad_at("a v2 B-tree node without its signature", node));
            }
            b.skip(2, "version and type")?;
            for _ in 0..records {
                let from = b.pos;
                record_at(self, &mut b, &accepted)?;
                // Each record is exactly `record` bytes, whatever the reader took of it.
                b.pos = from;
                b.skip(record as usize, "record")?;
            }
            if d > 0 {
                let mut children = Vec::new();
                for _ in 0..=records {
                    let child = b.addr("child node")?;
                    let n = b.uint(count_width as usize, "child records")?;
                    if d > 1 {
                        b.skip(total_width[d - 1] as usize, "child total records")?;
                    }
                    let child = child
                        .ok_or_else(|| bad_at("a v2 B-tree child without an address", node))?;
                    reached.first_time(child, "a v2 B-tree")?;
                    children.push((child, n, d - 1));
                }
                stack.extend(children.into_iter().rev());
            }
        }
        Ok(())
    }
}
