//! Hyperslabs of dense objects: a box of elements given as one range per dimension, read
//! without reading the rest of the tensor.
//!
//! - [`Hyperslab`]: the box, checked against the object's shape, and the runs of contiguous
//!   bytes it covers in row-major order.
//! - [`ObjectView::slice_bytes`] (added to the view here): the box's bytes. A run of whole
//!   rows of a raw, little-endian, mapped object is borrowed from the map; anything else is
//!   one gather into a new buffer, reading each run once (positional reads for an unmapped
//!   file, so only the bytes asked for cross the kernel); a seekable zstd part reads its seek
//!   table from the part's end, then reads and decodes only the frames holding the box; a
//!   chunked HDF5 dataset reads only the chunks meeting it; any other encoded component is
//!   decoded once and the box gathered from it.
//! - [`ObjectView::slice_bytes_into`]: the same bytes written into a buffer of the caller's
//!   (storage aligned for a framework that shares memory only when aligned); raw bytes go
//!   from the file into it run by run, with no buffer between.
//!
//! Slices are not checked against digests: a digest covers the whole component, and reading
//! all of it would defeat the slice. [`crate::Reader::verify`] checks them.

use std::borrow::Cow;
use std::ops::Range;

use zt_container::{Error, Result, Source};
use zt_formats::{Encoding, Format};

use crate::decode::{locate, swap_elements};
use crate::model::{ByteOrder, ComponentInfo};
use crate::view::ObjectView;

/// A box of a dense tensor: one half-open range per dimension, row-major.
///
/// ```
/// use ztensor::Hyperslab;
/// // Rows 1..3 of a 4 x 5 matrix: one run of 2 whole rows.
/// let rows = Hyperslab::new(&[4, 5], &[1..3, 0..5])?;
/// assert_eq!(rows.shape(), vec![2, 5]);
/// assert_eq!(rows.runs(4).collect::<Vec<_>>(), vec![(20, 40)]);
/// // Columns 1..3 of every row: four runs of 2 elements.
/// let cols = Hyperslab::new(&[4, 5], &[0..4, 1..3])?;
/// assert_eq!(cols.runs(4).count(), 4);
/// # Ok::<(), ztensor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hyperslab {
    /// The object's shape.
    shape: Vec<u64>,
    /// One range per dimension, each inside its dimension.
    ranges: Vec<Range<u64>>,
}

impl Hyperslab {
    /// The box `ranges` of a tensor of `shape`: one range per dimension, each with
    /// `start <= end <= dim`. A wrong rank, a range outside its dimension, or a shape of more
    /// elements than fit in 64 bits is the caller's error.
    pub fn new(shape: &[u64], ranges: &[Range<u64>]) -> Result<Self> {
        // A shape with a zero dimension holds nothing, however large the others: only its
        // empty boxes exist. Any other must count its elements in 64 bits, so that every
        // product of its dimensions does.
        if !shape.contains(&0) && zt_formats::element_count(shape).is_err() {
            return Err(Error::argument(format!(
                "shape {shape:?} has more elements than fit in 64 bits"
            )));
        }
        if ranges.len() != shape.len() {
            return Err(Error::argument(format!(
                "a slice of a rank-{} tensor needs {} ranges, not {}",
                shape.len(),
                shape.len(),
                ranges.len()
            )));
        }
        for (d, (r, &n)) in ranges.iter().zip(shape).enumerate() {
            if r.start > r.end || r.end > n {
                return Err(Error::argument(format!(
                    "range {}..{} of dimension {d} does not fit its size {n}",
                    r.start, r.end
                )));
            }
        }
        Ok(Hyperslab {
            shape: shape.to_vec(),
            ranges: ranges.to_vec(),
        })
    }

    /// The box's shape.
    pub fn shape(&self) -> Vec<u64> {
        self.ranges.iter().map(|r| r.end - r.start).collect()
    }

    /// The number of elements in the box.
    pub fn element_count(&self) -> u64 {
        if self.ranges.iter().any(|r| r.start == r.end) {
            return 0;
        }
        // Each range fits its dimension, none of them zero, and `new` checked their product.
        self.ranges.iter().map(|r| r.end - r.start).product()
    }

    /// How many leading dimensions are walked one index at a time: the box's bytes are
    /// contiguous from the first dimension after them on (that one may be partial, every later
    /// one is whole).
    fn walked_dims(&self) -> usize {
        let mut k = self.shape.len();
        // Move left over whole dimensions; the first partial one ends the contiguous tail.
        while k > 0 {
            let d = k - 1;
            let r = &self.ranges[d];
            let whole = r.start == 0 && r.end == self.shape[d];
            k -= 1;
            if !whole {
                break;
            }
        }
        k
    }

    /// The box's contiguous runs as `(byte offset, byte length)` from the start of the tensor,
    /// in row-major order, for elements of `element_size` bytes. An empty box has no runs.
    /// Offsets are exact when the tensor's bytes fit in 64 bits (as a listed object's do) and
    /// saturate otherwise.
    pub fn runs(&self, element_size: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let walked = self.walked_dims();
        // Elements per index of dimension d: the product of the dimensions after it. Exact
        // for a box with elements (no dimension is zero, and `new` checked the product); a
        // shape with a zero dimension has only empty boxes, whose strides are never used.
        let mut stride = vec![1u64; self.shape.len()];
        for d in (0..self.shape.len().saturating_sub(1)).rev() {
            stride[d] = stride[d + 1].saturating_mul(self.shape[d + 1]);
        }
        let run_elements: u64 = if walked < self.shape.len() {
            let r = &self.ranges[walked];
            (r.end - r.start).saturating_mul(stride[walked])
        } else {
            1
        };
        let tail_start: u64 = if walked < self.shape.len() {
            self.ranges[walked].start.saturating_mul(stride[walked])
        } else {
            0
        };
        let empty = self.element_count() == 0;
        let mut index: Vec<u64> = self.ranges[..walked].iter().map(|r| r.start).collect();
        let mut done = empty;
        std::iter::from_fn(move || {
            if done {
                return None;
            }
            let first: u64 = index.iter().zip(&stride).map(|(i, s)| i * s).sum();
            let run = (
                (first + tail_start).saturating_mul(element_size),
                run_elements.saturating_mul(element_size),
            );
            // Advance the odometer over the walked dimensions, last fastest.
            done = true;
            for d in (0..walked).rev() {
                index[d] += 1;
                if index[d] < self.ranges[d].end {
                    done = false;
                    break;
                }
                index[d] = self.ranges[d].start;
            }
            Some(run)
        })
    }
}

impl<'r> ObjectView<'r> {
    /// Asks the kernel to start reading the pages of the box `ranges` of a raw dense object in
    /// a mapped file, and returns at once: for a caller that will touch the box through a view
    /// of the whole object (a strided torch tensor over the map), so that its page faults find
    /// exactly those pages read, as [`ObjectView::slice_bytes`] reads them, and never set off
    /// the megabytes of the disk's read-around. Nothing is asked for when the file seems to be
    /// in the page cache already, or is not mapped, or the object is not raw bytes in place,
    /// or the box's pages are at least half of a span of 1 MiB or more (half the columns of a
    /// matrix: the view's faults then read as a whole tensor's do, and their read-around
    /// reads on into what comes next, where hints for the box alone left the disk idle
    /// between tensors: 1.17x safetensors' time cold). Such a box over most of the object's
    /// pages is told to the read-ahead as a read of the object, as [`ObjectView::slice_bytes`]
    /// tells it. An invalid box is an error, as for a read of it.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// let mut w = ztensor::Writer::create(&path)?;
    /// w.add("m", &[3, 2], &[1u8, 2, 3, 4, 5, 6])?;
    /// w.finish()?;
    /// let r = ztensor::open(&path)?;
    /// let m = r.object("m")?;
    /// m.will_need_slice(&[0..3, 1..2])?; // column 1, about to be read through a view
    /// assert!(m.will_need_slice(&[0..4, 0..2]).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn will_need_slice(&self, ranges: &[Range<u64>]) -> Result<()> {
        self.will_need_box(ranges, false)
    }

    /// [`ObjectView::will_need_slice`] for a caller that touches the box through a map of its
    /// own (torch maps a file itself and views its tensors there): a box over most of the
    /// object's pages is told as [`ObjectView::will_read_through_own_map`] tells a read, so
    /// nothing is told in a file that was all in the page cache at its first read. (Through
    /// a view of this reader's map, the read-ahead maps the pages ahead of the caller; through
    /// another map, it would map pages nobody touches.)
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// let mut w = ztensor::Writer::create(&path)?;
    /// w.add("m", &[3, 2], &[1u8, 2, 3, 4, 5, 6])?;
    /// w.finish()?;
    /// let r = ztensor::open(&path)?;
    /// // Column 1, about to be read through a map the caller made of the same file.
    /// r.object("m")?.will_need_slice_through_own_map(&[0..3, 1..2])?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn will_need_slice_through_own_map(&self, ranges: &[Range<u64>]) -> Result<()> {
        self.will_need_box(ranges, true)
    }

    /// [`ObjectView::will_need_slice`]; `own_map`: the caller reads through a map of its own.
    fn will_need_box(&self, ranges: &[Range<u64>], own_map: bool) -> Result<()> {
        let info = self.info();
        let slab = Hyperslab::new(&info.shape, ranges).map_err(|e| e.in_object(self.name()))?;
        let Some(comp) = info.components.0.iter().find(|c| c.role == "data") else {
            return Ok(());
        };
        let in_place = info.format == Format::Dense
            && info.defect.is_none()
            && matches!(comp.encoding, Encoding::Raw)
            && comp.arrangement.is_none()
            && comp
                .element
                .logical
                .as_ref()
                .and_then(|t| t.packed_bits())
                .is_none();
        if in_place {
            if let Ok(source) = self.backing().file(comp) {
                self.ask_for_box(source, comp, &slab, own_map);
            }
        }
        Ok(())
    }

    /// Asks the kernel for exactly the pages of the box `slab` of raw component `comp` (in
    /// `source`) before they are touched ([`ask_for_exactly`]), where that is worth it: not
    /// for a box that is most of a large span ([`DENSE_BOX_SPAN`]: the faults read it as they
    /// read a whole tensor), and not in a file that was all in the page cache at its first
    /// read (each hint would cost its `mincore`, most of the time of a slice of a small
    /// tensor).
    ///
    /// A dense box whose pages are most of the object's ([`MOST_OF_OBJECT`]) tells the
    /// read-ahead that the object is read, as a read of all of it does: a loader that takes
    /// half the columns of every tensor (a tensor-parallel shard) reads the whole file, and
    /// the read-ahead's streams and sweep then read it from the disk ahead of the slices,
    /// in large requests, instead of one fault's read-around at a time. `own_map`: the box is
    /// read through the caller's own map ([`ObjectView::will_need_slice_through_own_map`]).
    fn ask_for_box(&self, source: &Source, comp: &ComponentInfo, slab: &Hyperslab, own_map: bool) {
        let element_size = comp.element.logical_size();
        match dense_and_large(slab, element_size, comp.offset) {
            Some(covered)
                if covered.saturating_mul(MOST_OF_OBJECT.1)
                    >= comp.length.saturating_mul(MOST_OF_OBJECT.0) =>
            {
                if own_map {
                    self.will_read_through_own_map();
                } else {
                    self.will_read();
                }
            }
            // Most of a large span but not of the object: the faults' read-around reads it.
            Some(_) => {}
            None if self.may_be_cold(comp) => {
                ask_for_exactly(source, comp.offset, slab, element_size);
            }
            None => {}
        }
    }

    /// Whether the pages of component `comp` may be missing from the page cache, so that
    /// asking for them is worth a hint: always in another file (a v2 shard), and in this one
    /// unless the whole file was cached at its first read (the read-ahead's sampled guess).
    fn may_be_cold(&self, comp: &ComponentInfo) -> bool {
        let backing = self.backing();
        comp.file != 0 || !backing.readahead.file_seems_cached(&backing.source)
    }

    /// The little-endian bytes of the box `ranges` of a dense object (one range per
    /// dimension), in row-major order, reading only the bytes the box covers.
    ///
    /// Whole rows of a raw object in a map are borrowed from it; anything else is gathered
    /// into one new buffer. Packed sub-byte types (`i4`, `f4_e2m1`, `f6_*`, ...) are sliced
    /// where the box starts and ends on byte boundaries in rows of whole bytes (as
    /// safetensors slices FP4), giving the box's packed bytes; elsewhere they are refused.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// let mut w = ztensor::Writer::create(&path)?;
    /// w.add("m", &[3, 2], &[1u8, 2, 3, 4, 5, 6])?;
    /// w.finish()?;
    /// let r = ztensor::open(&path)?;
    /// let m = r.object("m")?;
    /// // Rows 1..3: a pointer into the map.
    /// assert!(matches!(m.slice_bytes(&[1..3, 0..2])?, std::borrow::Cow::Borrowed(&[3, 4, 5, 6])));
    /// // Column 1: gathered.
    /// assert_eq!(&m.slice_bytes(&[0..3, 1..2])?[..], &[2, 4, 6]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn slice_bytes(&self, ranges: &[Range<u64>]) -> Result<Cow<'r, [u8]>> {
        let info = self.info();
        if info.format != Format::Dense {
            return Err(Error::argument(format!(
                "object is {}, not dense: only dense objects can be sliced",
                info.format
            ))
            .in_object(self.name()));
        }
        let data = self.component("data")?;
        let comp = data.info();
        let at = locate(info, comp);
        if let Some(d) = &info.defect {
            return Err(d.error_in(&info.name));
        }
        // Packed sub-byte elements: a box that starts and ends on byte boundaries is a box of
        // the packed bytes (each element's size is then its storage byte, `logical_size`).
        let packed = comp.element.logical.as_ref().and_then(|t| t.packed_bits());
        let bytes_box = match packed {
            None => None,
            Some(bits) => {
                Hyperslab::new(&info.shape, ranges).map_err(&at)?;
                let in_bytes = packed_box_as_bytes(&info.shape, ranges, bits).ok_or_else(|| {
                    at(Error::unsupported(format!(
                        "{bits}-bit packed elements are sliced on byte boundaries only: \
                         the box must start and end on one in its last dimension, whose \
                         rows must be whole bytes; read the whole object"
                    )))
                })?;
                Some(in_bytes)
            }
        };
        let (shape, ranges) = match &bytes_box {
            Some((shape, ranges)) => (shape.as_slice(), ranges.as_slice()),
            None => (info.shape.as_slice(), ranges),
        };
        let slab = Hyperslab::new(shape, ranges).map_err(&at)?;
        let element_size = comp.element.logical_size();
        check_data_fits_shape(comp, &info.shape).map_err(&at)?;
        let total = slab
            .element_count()
            .checked_mul(element_size)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| at(Error::limit("the slice does not fit in memory")))?;
        let mut runs = slab.runs(element_size).peekable();
        let backing = self.backing();
        let mut gathered = match comp.encoding {
            // Elements an arrangement places (Fortran order, strides) are not row-major runs:
            // they take the decode path below, which lays them out first.
            Encoding::Raw if comp.arrangement.is_none() => {
                let source = backing.file(comp).map_err(&at)?;
                self.ask_for_box(source, comp, &slab, false);
                // One run needing no swap: borrowed from a map, or one positional read.
                let single = runs.peek().copied().filter(|_| slab.is_single_run());
                if let (Some((off, len)), ByteOrder::Little) = (single, comp.byte_order) {
                    return source
                        .read_at(run_offset(comp.offset, off)?, len)
                        .map_err(&at);
                }
                if source.is_ranged() {
                    gather_scattered(source, comp.offset, runs, total).map_err(&at)?
                } else {
                    let mut out = zt_container::internal::try_with_capacity(total).map_err(&at)?;
                    for (off, len) in runs {
                        let bytes = source
                            .read_at(run_offset(comp.offset, off)?, len)
                            .map_err(&at)?;
                        out.extend_from_slice(&bytes);
                    }
                    out
                }
            }
            // A chunked HDF5 dataset: only the chunks that meet the box are read and
            // unfiltered (a 10 x 100 box of a 2000 x 1000 dataset in 10 x 10 chunks: ten
            // chunks, not twenty thousand).
            #[cfg(feature = "hdf5")]
            Encoding::Hdf5Chunks(ref table) => {
                let source = backing.file(comp).map_err(&at)?;
                let chunk_at = |c: &zt_formats::Chunk| comp.offset.saturating_add(c.at);
                // Asked for before any is touched: each chunk's own bytes, not the megabytes
                // a page fault would read around it.
                if self.may_be_cold(comp) {
                    for c in table.chunks.iter() {
                        if crate::chunks::meets(table, &c.start, ranges) {
                            source.will_need(chunk_at(c), c.size);
                        }
                    }
                }
                let mut out = zt_container::internal::try_zeroed_vec::<u8>(total).map_err(&at)?;
                crate::chunks::decode_box_into(
                    table,
                    ranges,
                    |c| source.read_at(chunk_at(c), c.size),
                    &mut out,
                    backing.limits.max_decompressed_len,
                )
                .map_err(|e| at(e.at(comp.offset)))?;
                out
            }
            // v2's seekable zstd: only the frames (1 MiB of decoded bytes each) that hold the
            // box's first to last byte are read and decoded. The seek table comes from the
            // part's end, so a file read by ranges (unmapped, remote) fetches the table and
            // those frames, not the whole part.
            Encoding::ZstdSeekable if comp.arrangement.is_none() && total > 0 => {
                let source = backing.file(comp).map_err(&at)?;
                let runs: Vec<(u64, u64)> = runs.collect();
                let (Some(&(first, _)), Some(&(last, last_len))) = (runs.first(), runs.last())
                else {
                    return Ok(Cow::Owned(Vec::new()));
                };
                let end = last.saturating_add(last_len);
                let decoded_len = comp.decoded_len.ok_or_else(|| {
                    at(Error::invalid("a seekable part without its decoded size"))
                })?;
                // Offsets in the part's own errors are relative to the part.
                let in_part = |e: Error| {
                    at(match e.offset() {
                        Some(o) => {
                            Error::new(e.kind(), e.message()).at(comp.offset.saturating_add(o))
                        }
                        None => e.at(comp.offset),
                    })
                };
                let part_end = comp
                    .offset
                    .checked_add(comp.length)
                    .ok_or_else(|| at(Error::invalid("the part ends past 2^64")))?;
                let guess = comp.length.min(SEEK_TABLE_GUESS);
                let mut tail = source.read_at(part_end - guess, guess).map_err(&at)?;
                let table =
                    zt_formats::seekable::seek_table_len(&tail, comp.length).map_err(in_part)?;
                if table > guess {
                    tail = source.read_at(part_end - table, table).map_err(&at)?;
                }
                let frames =
                    zt_formats::seekable::parse_seek_table_tail(&tail, comp.length, decoded_len)
                        .map_err(in_part)?;
                let chosen = crate::codec::seekable_frames_holding(&frames, first, end);
                let picked = frames.get(chosen.clone()).unwrap_or_default();
                let (from, to) = match (picked.first(), picked.last()) {
                    (Some(a), Some(b)) => (a.offset, b.offset.saturating_add(b.compressed)),
                    _ => (0, 0),
                };
                // A part no longer than the first read is all in `tail` already.
                let stored = if tail.len() as u64 == comp.length {
                    let span = usize::try_from(from).ok().zip(usize::try_from(to).ok());
                    match span.and_then(|(a, b)| tail.get(a..b)) {
                        Some(bytes) => Cow::Borrowed(bytes),
                        None => return Err(at(Error::invalid("frames lie outside the part"))),
                    }
                } else {
                    source
                        .read_at(comp.offset.saturating_add(from), to - from)
                        .map_err(&at)?
                };
                let (span, skip) =
                    crate::codec::zstd_seekable_decode_frames(&stored, &frames, chosen, first)
                        .map_err(in_part)?;
                let mut out = Vec::new();
                out.try_reserve_exact(total)
                    .map_err(|_| at(Error::out_of_memory("the slice")))?;
                for (off, len) in runs {
                    let piece = (off - first)
                        .checked_add(skip)
                        .and_then(|o| usize::try_from(o).ok())
                        .and_then(|o| span.get(o..o.checked_add(usize::try_from(len).ok()?)?))
                        .ok_or_else(|| at(Error::invalid("decoded bytes shorter than shape")))?;
                    out.extend_from_slice(piece);
                }
                out
            }
            _ => {
                // A compressed component is decoded once; the box is gathered from it. The
                // decoded bytes are already little-endian.
                let whole = data.bytes()?;
                let mut out = zt_container::internal::try_with_capacity(total).map_err(&at)?;
                for (off, len) in runs {
                    let piece = usize::try_from(off)
                        .ok()
                        .and_then(|o| whole.get(o..o.checked_add(usize::try_from(len).ok()?)?))
                        .ok_or_else(|| at(Error::invalid("decoded bytes shorter than shape")))?;
                    out.extend_from_slice(piece);
                }
                return Ok(Cow::Owned(out));
            }
        };
        if comp.byte_order == ByteOrder::Big {
            swap_elements(&mut gathered, comp.element.dtype.size());
        }
        Ok(Cow::Owned(gathered))
    }
}

impl<'r> ObjectView<'r> {
    /// The box `ranges` of a dense object, the bytes [`ObjectView::slice_bytes`] gives, written
    /// into `out`, which must be exactly the box's size: for a caller that keeps them in
    /// storage of its own choosing (aligned as a framework needs to share memory rather than
    /// copy it). Raw little-endian bytes go from the file straight into `out`, run by run;
    /// anything else (compressed, big-endian, arranged) is sliced as `slice_bytes` slices it,
    /// then copied. A buffer of another size is the caller's error.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// let mut w = ztensor::Writer::create(&path)?;
    /// w.add("m", &[3, 2], &[1u8, 2, 3, 4, 5, 6])?;
    /// w.finish()?;
    /// let r = ztensor::open(&path)?;
    /// let mut column = [0u8; 3];
    /// r.object("m")?.slice_bytes_into(&[0..3, 1..2], &mut column)?;
    /// assert_eq!(column, [2, 4, 6]);
    /// assert!(r.object("m")?.slice_bytes_into(&[0..3, 1..2], &mut [0u8; 4]).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn slice_bytes_into(&self, ranges: &[Range<u64>], out: &mut [u8]) -> Result<()> {
        let info = self.info();
        let direct = info
            .components
            .0
            .iter()
            .find(|c| c.role == "data")
            .filter(|c| {
                info.format == Format::Dense
                    && info.defect.is_none()
                    && matches!(c.encoding, Encoding::Raw)
                    && c.arrangement.is_none()
                    && c.byte_order == ByteOrder::Little
                    && c.element
                        .logical
                        .as_ref()
                        .and_then(|t| t.packed_bits())
                        .is_none()
            });
        let Some(comp) = direct else {
            let bytes = self.slice_bytes(ranges)?;
            check_buffer_len(out, Some(bytes.len() as u64))
                .map_err(|e| e.in_object(self.name()))?;
            out.copy_from_slice(&bytes);
            return Ok(());
        };
        let at = locate(info, comp);
        let slab = Hyperslab::new(&info.shape, ranges).map_err(&at)?;
        let element_size = comp.element.logical_size();
        check_data_fits_shape(comp, &info.shape).map_err(&at)?;
        check_buffer_len(out, slab.element_count().checked_mul(element_size)).map_err(&at)?;
        let source = self.backing().file(comp).map_err(&at)?;
        self.ask_for_box(source, comp, &slab, false);
        read_runs_into(source, comp.offset, slab.runs(element_size), out).map_err(&at)
    }
}

/// Refuses to slice a part whose decoded bytes are not what the object's `shape` takes:
/// runs placed by the shape would lie past the part's end, in other objects' bytes. Open
/// checks this for every known type; an object of a type unknown here (v2 keeps them, their
/// size never judged) can hold any number of bytes. Elements an arrangement places are
/// checked at open to lie inside the part.
fn check_data_fits_shape(comp: &ComponentInfo, shape: &[u64]) -> Result<()> {
    let (None, Some(holds)) = (&comp.arrangement, comp.decoded_len) else {
        return Ok(());
    };
    let takes = zt_formats::element_count(shape)
        .and_then(|n| zt_formats::byte_size(n, &comp.element))
        .ok();
    if takes == Some(holds) {
        return Ok(());
    }
    let takes = takes.map_or_else(|| "more than 2^64".to_owned(), |n| n.to_string());
    Err(Error::unsupported(format!(
        "its data holds {holds} bytes, not the {takes} its shape {shape:?} takes as {}, so \
         a box of it has no place in them; read the whole part",
        comp.element.name()
    ))
    .in_component(comp.role.as_ref()))
}

/// Refuses a buffer `out` whose length is not the box's byte count (`None`: more than 2^64).
fn check_buffer_len(out: &[u8], box_len: Option<u64>) -> Result<()> {
    if box_len == Some(out.len() as u64) {
        return Ok(());
    }
    let box_len = box_len.map_or_else(|| "more than 2^64".to_owned(), |n| n.to_string());
    Err(Error::argument(format!(
        "a buffer of {} bytes for a box of {box_len} bytes",
        out.len()
    )))
}

impl Hyperslab {
    /// Whether the box is one contiguous run of the tensor's bytes (whole rows, say): what
    /// [`ObjectView::slice_bytes`] can lend from a map without gathering.
    ///
    /// ```
    /// use ztensor::Hyperslab;
    /// assert!(Hyperslab::new(&[4, 3], &[1..3, 0..3]).unwrap().is_single_run());
    /// assert!(!Hyperslab::new(&[4, 3], &[0..4, 0..2]).unwrap().is_single_run());
    /// ```
    pub fn is_single_run(&self) -> bool {
        self.ranges[..self.walked_dims()]
            .iter()
            .all(|r| r.end - r.start == 1)
    }
}

/// Bytes read from the end of a seekable part to find its seek table in one read: a table of
/// up to 2,045 frames (1,363 with a checksum column), 1.3 GiB or more of 1 MiB frames. A
/// larger table costs a second read of exactly its size.
const SEEK_TABLE_GUESS: u64 = 16 << 10;

/// The most runs of a slice told to the kernel one by one; a slice of more runs asks for
/// the span from its first byte to its last.
const MAX_HINTED_RUNS: u64 = 4096;

/// The page size runs are merged at when a slice's pages are asked for: 4 KiB pages are the
/// smallest Linux uses; on systems with larger pages fewer runs merge, and each is still
/// asked for.
const HINT_GRANULE: u64 = 4096;

/// Asks the kernel for exactly the pages of a slice of a mapped component at `base`, before
/// they are touched: a fault on a page not yet read would read the megabytes around it (the
/// disk's read-ahead), for a slice of a few kilobytes.
fn ask_for_exactly(source: &zt_container::Source, base: u64, slab: &Hyperslab, element_size: u64) {
    if !matches!(source, zt_container::Source::Mapped(_)) {
        return;
    }
    let mut runs = slab.runs(element_size);
    let Some((first, first_len)) = runs.next() else {
        return;
    };
    let count = slab
        .element_count()
        .saturating_mul(element_size)
        .checked_div(first_len)
        .unwrap_or(0);
    if count <= MAX_HINTED_RUNS {
        // Runs whose pages touch are asked for as one range: the same pages, in one large
        // request instead of a small one per row (half the columns of a tensor whose rows
        // are a few KiB: every page, which a request per row read slower than a fault's
        // read-around did). Runs pages apart stay apart, so a narrow box reads its pages only.
        // Merged at the file's own pages (the component need not start on one).
        let all = std::iter::once((first, first_len))
            .chain(runs)
            .map(|(off, len)| (base.saturating_add(off), len));
        merged_by_page(all, |at, len| source.will_need(at, len));
    } else {
        let end = slab
            .runs(element_size)
            .last()
            .map_or(first + first_len, |(o, l)| o.saturating_add(l));
        source.will_need(base.saturating_add(first), end.saturating_sub(first));
    }
}

/// The span of a box at least this long whose pages are at least half of it is read as a
/// whole tensor is, without hints: through a view ([`ObjectView::will_need_slice`]) or
/// gathered ([`ObjectView::slice_bytes`], [`ObjectView::slice_bytes_into`]). Its pages are
/// most of the span, and the faults' read-around reads them in large page-cache folios, where
/// a hint reads into 4 KiB ones: half the columns of every matrix of a cold GiB, gathered for
/// TensorFlow, took 1.19x safetensors' time with the hint and 0.82x-0.95x without
/// (docs/benchmarks.md, "A quiet disk, and what our hints cost on it").
const DENSE_BOX_SPAN: u64 = 1 << 20;

/// The share of an object's bytes (3/4, as numerator and denominator) that the pages of a
/// dense box must cover for the box's read to count as a read of the object: half the
/// columns of a matrix whose rows are a few pages or less touch every page; half its rows
/// touch half, and read only those.
const MOST_OF_OBJECT: (u64, u64) = (3, 4);

/// The bytes of the file's pages that the runs of `slab` (of a component at file offset
/// `base`) touch, when the runs span at least [`DENSE_BOX_SPAN`] bytes and those pages cover
/// at least half of that span; `None` otherwise.
fn dense_and_large(slab: &Hyperslab, element_size: u64, base: u64) -> Option<u64> {
    let mut runs = slab
        .runs(element_size)
        .map(|(off, len)| (base.saturating_add(off), len));
    let (first, first_len) = runs.next()?;
    let (mut covered, mut end) = (0u64, first.saturating_add(first_len));
    let all = std::iter::once((first, first_len)).chain(runs);
    merged_by_page(all, |off, len| {
        // Counted in whole pages: what a fault reads of the range.
        let pages = off.saturating_add(len).div_ceil(HINT_GRANULE) - off / HINT_GRANULE;
        covered = covered.saturating_add(pages.saturating_mul(HINT_GRANULE));
        end = off.saturating_add(len);
    });
    let span = end - first;
    (span >= DENSE_BOX_SPAN && covered.saturating_mul(2) >= span).then_some(covered)
}

/// Calls `ask(offset, len)` for `runs` (in increasing order, not overlapping) merged where
/// their pages touch: the ranges cover exactly the pages the runs do.
fn merged_by_page(runs: impl Iterator<Item = (u64, u64)>, mut ask: impl FnMut(u64, u64)) {
    let page_of = |at: u64| at / HINT_GRANULE;
    let mut current: Option<(u64, u64)> = None;
    for (off, len) in runs.filter(|&(_, len)| len > 0) {
        let run_end = off.saturating_add(len);
        current = match current {
            Some((start, end)) if page_of(off) <= page_of(end - 1).saturating_add(1) => {
                Some((start, run_end))
            }
            Some((start, end)) => {
                ask(start, end - start);
                Some((off, run_end))
            }
            None => Some((off, run_end)),
        };
    }
    if let Some((start, end)) = current {
        ask(start, end - start);
    }
}

/// Runs handed to one [`Source::read_scattered`] call: bounds the list of parts (24 bytes
/// a run) while leaving a remote source room to group many rows into one request.
const RUNS_PER_CALL: usize = 1 << 16;

/// The runs of a box of a remote component (at `base`) into one buffer of `total` bytes,
/// through [`Source::read_scattered`]: nearby rows come in one request, far ones in
/// requests made at once.
fn gather_scattered(
    source: &Source,
    base: u64,
    runs: impl Iterator<Item = (u64, u64)>,
    total: usize,
) -> Result<Vec<u8>> {
    let mut out = zt_container::internal::try_zeroed_vec::<u8>(total)?;
    read_runs_into(source, base, runs, &mut out)?;
    Ok(out)
}

/// Reads the runs `(offset from base, length)` one after another into `out`, which they must
/// fill exactly: by batches of positional reads from a ranged source (one round trip per
/// batch), by a copy from a map or memory, or a positional read of an unmapped file, per run.
fn read_runs_into(
    source: &Source,
    base: u64,
    runs: impl Iterator<Item = (u64, u64)>,
    out: &mut [u8],
) -> Result<()> {
    let ranged = source.is_ranged();
    let mut rest: &mut [u8] = out;
    let mut parts: Vec<(u64, &mut [u8])> = Vec::new();
    for (off, len) in runs {
        let len = usize::try_from(len).map_err(|_| Error::limit("run exceeds usize"))?;
        if len > rest.len() {
            return Err(Error::invalid("the box's runs exceed its size"));
        }
        let (part, after) = std::mem::take(&mut rest).split_at_mut(len);
        rest = after;
        if !ranged {
            // Straight into the caller's bytes: a read of a file that is not mapped fills
            // them, where a `read_at` made a buffer per run to copy from.
            source.read_into(run_offset(base, off)?, part)?;
            continue;
        }
        parts.push((run_offset(base, off)?, part));
        if parts.len() == RUNS_PER_CALL {
            source.read_scattered(&mut parts)?;
            parts.clear();
        }
    }
    if !rest.is_empty() {
        return Err(Error::invalid("the box's runs fall short of its size"));
    }
    source.read_scattered(&mut parts)
}

/// The absolute offset of a run that starts `off` bytes into a component at `base`.
fn run_offset(base: u64, off: u64) -> Result<u64> {
    base.checked_add(off)
        .ok_or_else(|| Error::invalid("slice offset overflows"))
}

/// For packed sub-byte elements of `bits` bits (lowest bits first, rows one after another),
/// the box `ranges` of `shape` as a box of the packed bytes: its shape and ranges with the
/// last dimension counted in bytes, once the dimensions the box takes whole are joined to the
/// one outside them. Only where that is exact: the last dimension's rows are whole bytes (or
/// there is one row), and the box starts and ends on a byte boundary in it (or ends at the
/// row's end). `ranges` were checked against `shape`.
fn packed_box_as_bytes(
    shape: &[u64],
    ranges: &[Range<u64>],
    bits: u64,
) -> Option<(Vec<u64>, Vec<Range<u64>>)> {
    if shape.is_empty() {
        // Rank 0: one element, one byte, the whole of it.
        return Some((Vec::new(), Vec::new()));
    }
    if ranges.iter().any(|r| r.is_empty()) {
        // Nothing selected, wherever it starts: an empty box of bytes.
        return Some((vec![0], std::iter::once(0..0).collect()));
    }
    // Dimensions the box takes whole, innermost first, join the one outside them: the rows
    // of a [3, 5] FP4 tensor are 2.5 bytes, yet its rows 0..2 are its first 5 bytes.
    let mut shape = shape.to_vec();
    let mut ranges = ranges.to_vec();
    while shape.len() >= 2 {
        let (Some(&n), Some(r)) = (shape.last(), ranges.last()) else {
            break;
        };
        if *r != (0..n) {
            break;
        }
        shape.pop();
        ranges.pop();
        let (d, r) = (shape.last_mut()?, ranges.last_mut()?);
        *d = d.checked_mul(n)?;
        *r = r.start.checked_mul(n)?..r.end.checked_mul(n)?;
    }
    let (Some((&last, leading)), Some((inner, outer))) = (shape.split_last(), ranges.split_last())
    else {
        return None;
    };
    let row_bits = last.checked_mul(bits)?;
    if row_bits % 8 != 0 && leading.iter().any(|&d| d != 1) {
        return None;
    }
    let start_bits = inner.start.checked_mul(bits)?;
    let end_bits = inner.end.checked_mul(bits)?;
    if start_bits % 8 != 0 || (end_bits % 8 != 0 && inner.end != last) {
        return None;
    }
    let mut byte_shape = leading.to_vec();
    byte_shape.push(row_bits.div_ceil(8));
    let mut byte_ranges = outer.to_vec();
    byte_ranges.push(start_bits / 8..end_bits.div_ceil(8));
    Some((byte_shape, byte_ranges))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merged(runs: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let mut asked = Vec::new();
        merged_by_page(runs.iter().copied(), |o, l| asked.push((o, l)));
        asked
    }

    #[test]
    fn a_box_is_dense_when_its_pages_are_half_of_a_long_span() {
        let slab = |shape: &[u64], ranges: &[Range<u64>]| Hyperslab::new(shape, ranges).unwrap();
        // Half the columns of 1,024 rows of 4 KiB (2 MiB): dense.
        let half = slab(&[1024, 2048], &[0..1024, 0..1024]);
        // Every 4 KiB page is touched: all of the object (4 MiB), so it counts as read whole.
        assert_eq!(dense_and_large(&half, 2, 0), Some(4 << 20));
        // The same half of 16 rows (64 KiB): too short to be worth the read-around.
        assert!(dense_and_large(&slab(&[16, 2048], &[0..16, 0..1024]), 2, 0).is_none());
        // 16 bytes of each 32 KiB row: sparse.
        assert!(dense_and_large(&slab(&[1024, 8192], &[0..1024, 0..4]), 4, 0).is_none());
        // Whole rows, one run: half the object's pages, which is not most of it.
        assert_eq!(
            dense_and_large(&slab(&[1024, 2048], &[0..512, 0..2048]), 2, 0),
            Some(2 << 20)
        );
        assert!(dense_and_large(&slab(&[1024, 2048], &[0..0, 0..2048]), 2, 0).is_none());
        // The 4 bytes that end the first page of each 12 KiB row: one page a row at file
        // offset 0, two where the component starts 2 bytes into a page (each run then
        // crosses a page boundary): the pages counted are the file's.
        let column = slab(&[128, 3072], &[0..128, 1023..1024]);
        assert!(dense_and_large(&column, 4, 0).is_none());
        assert!(dense_and_large(&column, 4, 2).is_some());
    }

    #[test]
    fn a_box_over_most_of_a_tensors_pages_is_noted_as_a_read_of_it() {
        // Two 16 MiB tensors: rows of one page ("paged") and rows of eight ("wide"), so
        // that the read-ahead takes part (the file is over its 16 MiB floor).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.zt");
        let mut w = crate::Writer::create(&path).unwrap();
        w.add("paged", &[4096, 4096], &vec![1u8; 16 << 20]).unwrap();
        w.add("wide", &[512, 32768], &vec![2u8; 16 << 20]).unwrap();
        w.finish().unwrap();
        let r = crate::open(&path).unwrap();
        let (paged, wide) = (r.object("paged").unwrap(), r.object("wide").unwrap());
        let noted = || paged.backing().readahead.last_noted();
        // 16 bytes of each 32 KiB row, half of its rows, half its columns (half its pages):
        // reads of part of it, not noted.
        wide.slice_bytes(&[0..512, 0..16]).unwrap();
        wide.slice_bytes(&[0..256, 0..32768]).unwrap();
        wide.slice_bytes(&[0..512, 0..16384]).unwrap();
        assert_eq!(noted(), None);
        // Half the columns of one-page rows touch every page: noted as a read of "paged",
        // gathered or through a view alike.
        assert_eq!(
            paged.slice_bytes(&[0..4096, 0..2048]).unwrap().len(),
            8 << 20
        );
        assert_eq!(noted(), Some(0));
        wide.read::<u8>().unwrap();
        assert_eq!(noted(), Some(1));
        paged.will_need_slice(&[0..4096, 2048..4096]).unwrap();
        assert_eq!(noted(), Some(0));
    }

    /// `m.zt` in `dir`, with objects "a" (16 MiB of 1s) and "b" (16 MiB of 2s): large enough
    /// for a read-ahead of its own (`readahead::MIN_FILE`); just written, so in the page cache.
    #[cfg(target_os = "linux")]
    fn two_large_objects(dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("m.zt");
        let mut w = crate::Writer::create(&path).unwrap();
        w.add("a", &[16 << 20], &vec![1u8; 16 << 20]).unwrap();
        w.add("b", &[16 << 20], &vec![2u8; 16 << 20]).unwrap();
        w.finish().unwrap();
        path
    }

    /// Writes `path` back and drops it from the page cache; false (the test then stops, and
    /// says so) on a file system that keeps its pages in memory (tmpfs), which drops nothing.
    #[cfg(target_os = "linux")]
    fn dropped_from_the_page_cache(path: &std::path::Path) -> bool {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).unwrap();
        file.sync_all().unwrap();
        // SAFETY: a hint about a descriptor `file` keeps open; it touches no memory.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
        let kept = zt_container::Source::map(path).unwrap().seems_cached(256);
        if kept {
            eprintln!("skipped: the page cache kept {}", path.display());
        }
        !kept
    }

    /// A read through the caller's own map, of a whole object or of a box over most of it, is
    /// told to the read-ahead in a file out of the page cache, and not in one all in it (the
    /// read-ahead would only map pages nobody touches).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_read_through_another_map_is_told_only_while_the_file_is_cold() {
        let dir = tempfile::tempdir().unwrap();
        let path = two_large_objects(dir.path());
        // Just written: in the page cache.
        {
            let r = crate::open(&path).unwrap();
            let a = r.object("a").unwrap();
            a.will_read_through_own_map();
            a.will_need_slice_through_own_map(std::slice::from_ref(&(0..16 << 20)))
                .unwrap();
            assert_eq!(a.backing().readahead.last_noted(), None);
        }
        // Written back and dropped from the page cache, then told.
        if !dropped_from_the_page_cache(&path) {
            return;
        }
        let r = crate::open(&path).unwrap();
        let b = r.object("b").unwrap();
        b.will_read_through_own_map();
        assert_eq!(b.backing().readahead.last_noted(), Some(1));
        // A box over all of "a", read through the caller's map: told as a read of "a".
        r.object("a")
            .unwrap()
            .will_need_slice_through_own_map(std::slice::from_ref(&(0..16 << 20)))
            .unwrap();
        assert_eq!(b.backing().readahead.last_noted(), Some(0));
    }

    /// A view read ahead elsewhere tells the read-ahead of a cold file nothing, and that of
    /// a file all in the page cache what it reads, as the plain view does.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_view_read_ahead_elsewhere_tells_only_a_cached_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = two_large_objects(dir.path());
        // Just written: in the page cache, and told.
        {
            let r = crate::open(&path).unwrap();
            let b = r.object("b").unwrap().read_ahead_elsewhere();
            assert_eq!(b.bytes().unwrap().first(), Some(&2));
            assert_eq!(b.backing().readahead.last_noted(), Some(1));
        }
        // Written back and dropped from the page cache: not told.
        if !dropped_from_the_page_cache(&path) {
            return;
        }
        let r = crate::open(&path).unwrap();
        let quiet = r.object("b").unwrap().read_ahead_elsewhere();
        assert_eq!(quiet.bytes().unwrap().first(), Some(&2));
        assert_eq!(quiet.backing().readahead.last_noted(), None);
        r.object("b").unwrap().bytes().unwrap();
        assert_eq!(quiet.backing().readahead.last_noted(), Some(1));
    }

    #[test]
    fn runs_are_asked_for_merged_where_their_pages_touch() {
        // Half of each 5,632-byte row: every page is the box's, so one range.
        let half: Vec<_> = (0..4).map(|r| (r * 5632, 2816)).collect();
        assert_eq!(merged(&half), [(0, 3 * 5632 + 2816)]);
        // 16 bytes of each 32 KiB row: pages apart, each run asked for alone.
        let narrow: Vec<_> = (0..3).map(|r| (r * 32768, 16)).collect();
        assert_eq!(merged(&narrow), narrow);
        // The next page (no page between): merged; two pages on: apart. Empty runs: skipped.
        assert_eq!(merged(&[(0, 10), (4096, 10), (4106, 0)]), [(0, 4106)]);
        assert_eq!(merged(&[(0, 10), (8192, 10)]), [(0, 10), (8192, 10)]);
        assert_eq!(merged(&[]), []);
    }

    fn runs(shape: &[u64], ranges: &[Range<u64>]) -> Vec<(u64, u64)> {
        Hyperslab::new(shape, ranges).unwrap().runs(1).collect()
    }

    #[test]
    fn whole_rows_are_one_run() {
        assert_eq!(runs(&[4, 3], &[1..3, 0..3]), vec![(3, 6)]);
        assert_eq!(runs(&[4, 3], &[0..4, 0..3]), vec![(0, 12)]);
    }

    #[test]
    fn a_block_is_one_run_per_row() {
        assert_eq!(runs(&[3, 4], &[1..3, 1..3]), vec![(5, 2), (9, 2)]);
    }

    #[test]
    fn three_dimensions() {
        // Shape 2x3x4, box [0..2, 1..2, 0..4]: rows (i, 1, *) for i in 0..2.
        assert_eq!(runs(&[2, 3, 4], &[0..2, 1..2, 0..4]), vec![(4, 4), (16, 4)]);
        // Box [1..2, 0..3, 2..3]: one element per row of the second matrix.
        assert_eq!(
            runs(&[2, 3, 4], &[1..2, 0..3, 2..3]),
            vec![(14, 1), (18, 1), (22, 1)]
        );
    }

    #[test]
    fn empty_and_scalar_boxes() {
        assert!(runs(&[4, 3], &[2..2, 0..3]).is_empty());
        assert_eq!(runs(&[], &[]), vec![(0, 1)]);
    }

    #[test]
    fn a_zero_dimension_beside_huge_ones_has_only_empty_boxes() {
        // 2^40 x 2^40 x 0 elements: the strides of the leading dimensions do not fit in 64
        // bits, and are never needed (found by the read_safetensors fuzz target, via GGUF).
        let huge = 1u64 << 40;
        for shape in [[0, huge, huge], [huge, huge, 0], [huge, 0, huge]] {
            let head: Vec<_> = shape.iter().map(|&n| 0..n.min(2)).collect();
            let slab = Hyperslab::new(&shape, &head).unwrap();
            assert_eq!(slab.element_count(), 0);
            assert_eq!(slab.runs(8).count(), 0);
        }
        // Without a zero, a shape must count its elements in 64 bits.
        let e = Hyperslab::new(&[huge, huge], &[0..1, 0..1]).unwrap_err();
        assert_eq!(e.kind(), zt_container::ErrorKind::InvalidArgument);
        assert!(
            e.to_string().contains("more elements than fit in 64 bits"),
            "{e}"
        );
    }

    #[test]
    fn out_of_range_is_refused() {
        let past_end = Range { start: 3, end: 5 };
        let reversed = Range { start: 3, end: 2 };
        assert!(Hyperslab::new(&[4], std::slice::from_ref(&past_end)).is_err());
        assert!(Hyperslab::new(&[4], std::slice::from_ref(&reversed)).is_err());
        assert!(Hyperslab::new(&[4, 4], std::slice::from_ref(&(0..1))).is_err());
    }
}
