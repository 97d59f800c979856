//! The one path from a listed component to its decoded elements: raw bytes borrowed from the
//! map or read positionally, zstd decoded to exactly the declared size under the cap, big-endian
//! elements swapped, digests checked. Every read of [`crate::ObjectView`] ends here.

use std::borrow::Cow;

use bytemuck::Pod;
use zt_container::{Error, Result, Source};
use zt_formats::{DType, Encoding, Format, LogicalType};

use crate::listing::Limits;
use crate::model::{Arrangement, ByteOrder, ComponentInfo, DigestScope, ObjectInfo};
use crate::readahead::ReadAhead;

/// Which reads check the digests and checksums a file carries (see docs/decisions.md,
/// "Integrity on every path").
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let r = ztensor::open(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/v123_all.zt"))?;
/// # let name = r.names().next().unwrap().to_owned();
/// // Every read of this reader checks, zero-copy ones included.
/// let r = ztensor::OpenOptions::new()
///     .verify(ztensor::Verify::Always)
///     .open(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/v123_all.zt"))?;
/// let bytes = r.object(&name)?.bytes()?;
/// # let _ = bytes;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verify {
    /// A read that touches every byte anyway (decompression, a gather of strided elements,
    /// a byte swap, a positional read into a new buffer) checks the digests and checksums
    /// that cover them; a zero-copy read of a map does not, since that would cost a pass over
    /// the bytes. A digest whose algorithm this library does not compute is passed over.
    #[default]
    WhenCopying,
    /// Every read checks, zero-copy ones too (one pass over the bytes, which are then handed
    /// out as they were checked); a digest this library cannot compute is an error.
    Always,
    /// No read checks (a damaged file read on purpose; [`crate::Reader::verify`] still does).
    Never,
}

impl Verify {
    /// Whether a read checks, given whether it copies the bytes anyway.
    pub(crate) fn applies(self, copying: bool) -> bool {
        match self {
            Verify::WhenCopying => copying,
            Verify::Always => true,
            Verify::Never => false,
        }
    }

    /// What a conversion reads with: every byte is copied elsewhere, so everything the file
    /// carries is checked unless checks were turned off.
    pub(crate) fn for_copy(self) -> Self {
        match self {
            Verify::Never => Verify::Never,
            _ => Verify::Always,
        }
    }
}

/// Options of one read.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let r = ztensor::open(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/v123_all.zt"))?;
/// # let name = r.names().next().unwrap().to_owned();
/// let bytes = r.object(&name)?.bytes_with(ztensor::ReadOptions::verified())?;
/// # let _ = bytes;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Which digests and checksums this read checks.
    pub verify: Verify,
}

impl ReadOptions {
    /// Check every digest and checksum that covers the bytes read, zero-copy reads too.
    pub fn verified() -> Self {
        ReadOptions {
            verify: Verify::Always,
        }
    }

    /// Check nothing.
    pub fn unchecked() -> Self {
        ReadOptions {
            verify: Verify::Never,
        }
    }
}

/// What reads go through: the file's bytes, its shards' (zTensor v2), its objects (sorted by
/// name), the caps it was opened with, and the read-ahead that follows the reads.
#[derive(Debug)]
pub(crate) struct Backing {
    pub source: Source,
    /// The shards' bytes; a component's `file` n (from 1) is entry n - 1.
    pub shards: Vec<Source>,
    /// The shards' paths, in the same order: an error in a shard's bytes names its file.
    pub shard_paths: Vec<std::path::PathBuf>,
    pub limits: Limits,
    pub objects: Vec<ObjectInfo>,
    pub readahead: ReadAhead,
    /// What reads check unless they say otherwise ([`crate::OpenOptions::verify`]).
    pub verify: Verify,
    /// A zip-based file's entries, by data offset, and which have had their CRC-32 checked.
    pub zip: ZipEntries,
}

/// The entries of the zip archives of a file (`.npz`, a PyTorch checkpoint, a distributed
/// checkpoint's chunks in its data files) sorted by their file and where their data starts,
/// each with whether its CRC-32 has been found good, so that a checked read checks the
/// entries under it once.
#[derive(Debug, Default)]
pub(crate) struct ZipEntries {
    pub entries: Vec<(u32, crate::zip::Entry)>,
    checked: Vec<std::sync::atomic::AtomicBool>,
}

impl ZipEntries {
    pub fn new(mut entries: Vec<(u32, crate::zip::Entry)>) -> Self {
        entries.sort_unstable_by_key(|(file, e)| (*file, e.data_offset));
        let checked = entries.iter().map(|_| Default::default()).collect();
        ZipEntries { entries, checked }
    }

    /// Checks the CRC-32 of every entry of `file` (`source`) whose data overlaps
    /// `offset..offset + length`, once per entry (a good result is remembered; a bad one is
    /// found again).
    fn check(&self, source: &Source, file: u32, offset: u64, length: u64, cap: u64) -> Result<()> {
        use std::sync::atomic::Ordering;
        let end = offset.saturating_add(length);
        // Entries of one archive never overlap (nor do archives): the first that can hold
        // `offset` is the last of `file` that starts at or before it.
        let first = self
            .entries
            .partition_point(|(f, e)| (*f, e.data_offset) <= (file, offset))
            .saturating_sub(1);
        let candidates = self.entries.iter().zip(&self.checked).skip(first);
        let before_end = |(f, e): &(u32, crate::zip::Entry)| {
            *f == file && e.data_offset < end.max(offset.saturating_add(1))
        };
        for ((f, entry), checked) in candidates
            .skip_while(|((f, _), _)| *f < file)
            .take_while(|(fe, _)| before_end(fe))
        {
            if *f != file || entry.data_end() <= offset || checked.load(Ordering::Relaxed) {
                continue;
            }
            crate::zip::check_crc(source, entry, cap)?;
            checked.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The entry whose stored bytes are exactly `offset..offset + length` and whose CRC-32 is
    /// not yet known to hold: a read that inflates all of it can check it on the way
    /// ([`ZipEntries::note_crc`]) instead of inflating it twice.
    fn unchecked_entry(&self, file: u32, offset: u64, length: u64) -> Option<usize> {
        use std::sync::atomic::Ordering;
        let i = self
            .entries
            .partition_point(|(f, e)| (*f, e.data_offset) < (file, offset));
        let (f, entry) = self.entries.get(i)?;
        let whole = *f == file && entry.data_offset == offset && entry.compressed == length;
        let checked = self.checked.get(i)?.load(Ordering::Relaxed);
        (whole && !checked).then_some(i)
    }

    /// Entry `i` was inflated whole, to `inflated` bytes with CRC-32 `crc`: remembered as
    /// checked when both match the directory. A mismatch is left for [`ZipEntries::check`],
    /// which reports it with the entry's name.
    fn note_crc(&self, i: usize, inflated: u64, crc: u32) {
        if let (Some((_, entry)), Some(checked)) = (self.entries.get(i), self.checked.get(i)) {
            if entry.uncompressed == inflated && entry.crc32 == crc {
                checked.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

/// Where an error of component `comp` of `obj` happened.
pub(crate) fn locate<'a>(
    obj: &'a ObjectInfo,
    comp: &'a ComponentInfo,
) -> impl Fn(Error) -> Error + 'a {
    let (name, role) = (obj.name.as_str(), comp.role.as_ref());
    move |e: Error| e.in_component(role).in_object(name)
}

impl Backing {
    /// Object `index` is about to be read: see [`ReadAhead::note`].
    pub fn note_read(&self, index: u32, walking: bool) {
        self.readahead
            .note(&self.source, &self.objects, index, walking);
    }

    /// The file that holds a component's stored bytes.
    pub(crate) fn file(&self, comp: &ComponentInfo) -> Result<&Source> {
        self.file_numbered(comp.file)
    }

    /// Names file `n` in an error about its bytes when it is a shard (a data file of its
    /// own); file 0 is named by whoever opened it, as it knows its path.
    pub(crate) fn in_file_numbered(&self, n: u32) -> impl Fn(Error) -> Error + '_ {
        move |e: Error| match n
            .checked_sub(1)
            .and_then(|i| self.shard_paths.get(i as usize))
        {
            Some(path) => e.in_file(path),
            None => e,
        }
    }

    /// File `n` of the listing: 0 the opened file, `n` its shard `n`.
    pub(crate) fn file_numbered(&self, n: u32) -> Result<&Source> {
        match n {
            0 => Ok(&self.source),
            n => self
                .shards
                .get(n as usize - 1)
                .ok_or_else(|| Error::invalid(format!("no shard {n}"))),
        }
    }

    /// Loads one component as `T`, whose size must divide the element size. The caller has
    /// checked that `T` fits the component's type.
    pub fn load<T: Pod>(
        &self,
        obj: &ObjectInfo,
        comp: &ComponentInfo,
        opts: ReadOptions,
    ) -> Result<Cow<'_, [T]>> {
        let at = locate(obj, comp);
        if let Some(d) = &obj.defect {
            return Err(d.error_in(&obj.name));
        }
        let borrowable = comp.encoding == Encoding::Raw
            && comp.arrangement.is_none()
            && self.file(comp).map_err(&at)?.is_in_memory();
        let copying = !borrowable || comp.byte_order == ByteOrder::Big;
        let check = opts.verify.applies(copying);
        let strict = opts.verify == Verify::Always;
        // Raw bytes read as they lie are the stored bytes: their digest, of either scope, is
        // checked on the bytes this read returns, in one pass. Other stored-bytes digests are
        // checked before decoding, decoded-bytes ones (v2) on the bytes this read decodes.
        let stored_is_data = comp.encoding == Encoding::Raw && comp.arrangement.is_none();
        if check && !stored_is_data && comp.digest_scope == DigestScope::Stored {
            self.check_stored(comp, strict).map_err(&at)?;
        }
        let data = if borrowable {
            self.borrow::<T>(comp).map_err(&at)?
        } else {
            Cow::Owned(self.decode_new::<T>(comp).map_err(&at)?)
        };
        // After decoding: a stream that cannot be decoded is reported as what it is.
        if check {
            self.check_container(obj, comp).map_err(&at)?;
        }
        if check && (stored_is_data || comp.digest_scope == DigestScope::Decoded) {
            self.check_decoded(comp, bytemuck::cast_slice(&data), strict)
                .map_err(&at)?;
        }
        Ok(match comp.byte_order {
            ByteOrder::Little => data,
            ByteOrder::Big => {
                let mut v = data.into_owned();
                swap_elements(bytemuck::cast_slice_mut(&mut v), comp.element.dtype.size());
                Cow::Owned(v)
            }
        })
    }

    /// The checks a file carries beside its components' own digests, for the bytes of one
    /// component: digests over whole legacy entries, and the CRC-32s of the zip entries
    /// (`.npz`, PyTorch checkpoints, a distributed checkpoint's chunks) its bytes lie in,
    /// every piece of them.
    fn check_container(&self, obj: &ObjectInfo, comp: &ComponentInfo) -> Result<()> {
        self.verify_ranges(obj)?;
        if self.zip.entries.is_empty() {
            return Ok(());
        }
        let cap = self.limits.max_decompressed_len;
        let check = |file: u32, offset: u64, length: u64| {
            self.zip
                .check(self.file_numbered(file)?, file, offset, length, cap)
                .map_err(self.in_file_numbered(file))
        };
        match &comp.encoding {
            Encoding::Pieces(pieces) => pieces
                .iter()
                .try_for_each(|p| check(p.file, p.offset, p.length)),
            Encoding::Boxes(table) => table
                .boxes
                .iter()
                .try_for_each(|(p, ..)| check(p.file, p.offset, p.length)),
            _ => check(comp.file, comp.offset, comp.length),
        }
    }

    /// Checks a stored-bytes digest against the stored bytes; `strict`: a digest whose
    /// algorithm this library does not compute is an error, else passed over.
    fn check_stored(&self, comp: &ComponentInfo, strict: bool) -> Result<()> {
        if comp.foreign_digest.is_some() && !strict {
            return Ok(());
        }
        self.verify_component(comp)
    }

    /// A raw component of an in-memory source, borrowed when aligned for `T`.
    fn borrow<T: Pod>(&self, comp: &ComponentInfo) -> Result<Cow<'_, [T]>> {
        whole_elements::<T>(comp.length).map_err(|e| e.at(comp.offset))?;
        Ok(match self.file(comp)?.read_at(comp.offset, comp.length)? {
            Cow::Borrowed(b) => match bytemuck::try_cast_slice(b) {
                Ok(s) => Cow::Borrowed(s),
                // Owned buffers carry no alignment promise; copy once into aligned storage.
                Err(_) => Cow::Owned(bytemuck::pod_collect_to_vec(b)),
            },
            Cow::Owned(v) => Cow::Owned(bytemuck::pod_collect_to_vec(&v)),
        })
    }

    /// The decoded size of a component, checked against the cap, or `None` for a legacy zstd
    /// stream that records no size. `stored` is the component's stored bytes, needed only for
    /// zstd streams without a declared size.
    fn decoded_size(&self, comp: &ComponentInfo, stored: Option<&[u8]>) -> Result<Option<u64>> {
        let len = match (&comp.encoding, comp.decoded_len) {
            // Gathered from a span of stored or inflated bytes: the copy's size.
            (Encoding::Raw | Encoding::Deflate | Encoding::Zstd, Some(n))
                if comp.arrangement.is_some() =>
            {
                n
            }
            (Encoding::Raw, _) => return Ok(Some(comp.length)),
            (Encoding::Deflate, Some(n)) => n,
            (Encoding::Deflate, None) => {
                return Err(Error::invalid("deflated component has no decoded length"))
            }
            (
                Encoding::ProtoVarints { .. }
                | Encoding::ProtoVarintCodes { .. }
                | Encoding::ProtoTagged { .. }
                | Encoding::Hdf5Chunks(_)
                | Encoding::Latin1Text
                | Encoding::Pieces(_)
                | Encoding::Boxes(_)
                | Encoding::SparseLevels(_)
                | Encoding::BitPlanes { .. },
                decoded_len,
            ) => decoded_len
                .ok_or_else(|| Error::invalid("an encoded component has no decoded length"))?,
            (Encoding::Unknown(e), _) => {
                return Err(Error::unsupported(format!("unknown encoding {e:?}")))
            }
            (Encoding::Zstd, Some(n)) => n,
            (Encoding::Zstd, None) => {
                match stored.and_then(crate::codec::zstd_frame_content_size) {
                    Some(n) => n,
                    None => return Ok(None),
                }
            }
            // The seek table is checked before a buffer of the declared size is allocated.
            (Encoding::ZstdSeekable, Some(n)) => {
                if let Some(blob) = stored {
                    zt_formats::seekable::parse_seek_table(blob, n).map_err(|e| {
                        let at = comp.offset.saturating_add(e.offset().unwrap_or(0));
                        Error::new(e.kind(), e.message()).at(at)
                    })?;
                }
                n
            }
            (Encoding::ZstdSeekable, None) => {
                return Err(Error::invalid("zstd-seekable part has no decoded length"))
            }
        };
        let cap = self.limits.max_decompressed_len;
        if len > cap {
            return Err(Error::limit(format!(
                "declared decompressed size {len} exceeds the cap of {cap} bytes"
            ))
            .at(comp.offset));
        }
        // Elements gathered by strides (a broadcast, a strided view) can make a copy far larger
        // than what the file stores for them: that is bounded by the memory budget.
        if let Some(arrangement) = &comp.arrangement {
            // The span is what a compressed component decodes to (under the cap above); stored
            // bytes are what a raw one holds.
            let spanned = match comp.encoding {
                Encoding::Raw => arrangement.span.min(comp.length),
                _ => arrangement.span,
            };
            let budget = self.limits.read_budget(spanned);
            if len > budget {
                return Err(Error::limit(format!(
                    "materializing {len} bytes from {spanned} stored exceeds the memory budget \
                     of {budget} bytes (raise it: Limits::memory_budget, zt --max-memory, \
                     ztio.open(max_memory=...))"
                ))
                .at(comp.offset));
            }
        }
        Ok(Some(len))
    }

    /// Decodes a component into `dst`, which is exactly its decoded size: raw bytes read
    /// positionally (the kernel's copy), zstd decoded straight into it.
    fn decode_into(
        &self,
        comp: &ComponentInfo,
        stored: Option<&[u8]>,
        dst: &mut [u8],
    ) -> Result<()> {
        let file = self.file(comp)?;
        if let Some(arrangement) = &comp.arrangement {
            return self.gather_into(comp, arrangement, stored, dst);
        }
        // Each piece read positionally from its file into its place (the one copy), and
        // checked against the CRC-32C its writer recorded as it passes: a read of pieces
        // always copies, and a check then costs no pass of its own.
        if let Encoding::Pieces(pieces) = &comp.encoding {
            return zt_formats::pieces_decode_into(pieces, dst, |piece, place| {
                self.file_numbered(piece.file)?
                    .read_into(piece.offset, place)
                    .map_err(|e| e.at(piece.offset))
                    .and_then(|()| Self::check_piece(piece, place))
                    .map_err(self.in_file_numbered(piece.file))
            });
        }
        // Each box read (from the map, or into a buffer), checked, decoded when it is a
        // span of a zstd stream, and placed.
        if let Encoding::Boxes(table) = &comp.encoding {
            let size = usize::try_from(table.element_size)
                .map_err(|_| Error::invalid("an element size over usize"))?;
            for (i, (piece, start, extent)) in table.boxes.iter().enumerate() {
                let in_file = self.in_file_numbered(piece.file);
                let stored = self
                    .file_numbered(piece.file)?
                    .read_at(piece.offset, piece.length)
                    .map_err(&in_file)?;
                Self::check_piece(piece, &stored).map_err(&in_file)?;
                let bytes = match table.spans.get(i) {
                    None => stored,
                    Some(span) => Cow::Owned(
                        self.decode_stream_span(&stored, span)
                            .map_err(|e| in_file(e.at(piece.offset)))?,
                    ),
                };
                zt_formats::place_box(&table.dims, size, start, extent, &bytes, dst)
                    .map_err(|e| e.at(piece.offset))?;
            }
            return Ok(());
        }
        let src = match (&comp.encoding, stored) {
            (Encoding::Raw, _) => return file.read_into(comp.offset, dst),
            (_, Some(src)) => Cow::Borrowed(src),
            (_, None) => file.read_at(comp.offset, comp.length)?,
        };
        match &comp.encoding {
            // The seek table's offsets are relative to the blob: errors add its offset.
            Encoding::ZstdSeekable => {
                crate::codec::zstd_seekable_decode_into(&src, dst).map_err(|e| match e.offset() {
                    Some(o) => {
                        let abs = comp.offset.saturating_add(o);
                        Error::new(e.kind(), e.message()).at(abs)
                    }
                    None => e.at(comp.offset),
                })
            }
            Encoding::Deflate => self.inflate_whole_into(comp, &src, 0, dst),
            Encoding::ProtoVarints { width, boolean } => {
                zt_formats::varints_decode_into(&src, usize::from(*width), *boolean, dst)
                    .map_err(|e| e.at(comp.offset))
            }
            Encoding::ProtoVarintCodes { bits, count } => {
                zt_formats::varint_codes_decode_into(&src, *bits, *count, dst)
                    .map_err(|e| e.at(comp.offset))
            }
            Encoding::ProtoTagged {
                width,
                varint,
                boolean,
            } => zt_formats::tagged_decode_into(&src, usize::from(*width), *varint, *boolean, dst)
                .map_err(|e| e.at(comp.offset)),
            Encoding::Latin1Text => {
                zt_formats::latin1_decode_into(&src, dst).map_err(|e| e.at(comp.offset))
            }
            Encoding::SparseLevels(table) => {
                zt_formats::densify_into(table, &src, dst).map_err(|e| e.at(comp.offset))
            }
            Encoding::BitPlanes { bits } => {
                zt_formats::bit_planes_decode_into(&src, *bits, dst).map_err(|e| e.at(comp.offset))
            }
            #[cfg(feature = "hdf5")]
            Encoding::Hdf5Chunks(table) => {
                let cap = self.limits.max_decompressed_len;
                crate::chunks::decode_into(table, &src, dst, cap).map_err(|e| e.at(comp.offset))
            }
            #[cfg(not(feature = "hdf5"))]
            Encoding::Hdf5Chunks(_) => Err(Error::unsupported(
                "HDF5 chunks: this build of ztensor was built without support for them \
                 (feature \"hdf5\")",
            )),
            _ => crate::codec::zstd_decode_into(&src, dst).map_err(|e| e.at(comp.offset)),
        }
    }

    /// Inflates a deflated component to its end into `dst`, dropping its first `skip` bytes.
    /// When the component is a whole zip entry (a `.npz` member) whose CRC-32 is not yet
    /// checked, the CRC is taken on the way, so that the check a copying read makes after
    /// decoding ([`ZipEntries::check`]) does not inflate the entry a second time.
    fn inflate_whole_into(
        &self,
        comp: &ComponentInfo,
        src: &[u8],
        skip: u64,
        dst: &mut [u8],
    ) -> Result<()> {
        let entry = self
            .zip
            .unchecked_entry(comp.file, comp.offset, comp.length);
        let mut crc = entry.map(|_| crc32fast::Hasher::new());
        crate::zip::inflate_part_into(src, skip, dst, true, crc.as_mut())
            .map_err(|e| e.at(comp.offset))?;
        if let (Some(i), Some(crc)) = (entry, crc) {
            let inflated = skip.saturating_add(dst.len() as u64);
            self.zip.note_crc(i, inflated, crc.finalize());
        }
        Ok(())
    }

    /// Decodes an arranged component (see [`Arrangement`]) into `dst`, its row-major copy:
    /// the span that holds the elements is borrowed (raw) or inflated under the cap (deflate),
    /// then each element is copied from where its strides put it.
    fn gather_into(
        &self,
        comp: &ComponentInfo,
        arrangement: &Arrangement,
        stored: Option<&[u8]>,
        dst: &mut [u8],
    ) -> Result<()> {
        let file = self.file(comp)?;
        let span: Cow<'_, [u8]> = match &comp.encoding {
            Encoding::Raw => file.read_at(comp.offset, comp.length)?,
            Encoding::Deflate => {
                let src = match stored {
                    Some(s) => Cow::Borrowed(s),
                    None => file.read_at(comp.offset, comp.length)?,
                };
                // Packed elements inflate straight into `dst`: the one copy.
                if arrangement.is_packed() && dst.len() as u64 <= arrangement.span {
                    if arrangement.span == dst.len() as u64 {
                        return self.inflate_whole_into(comp, &src, arrangement.skip, dst);
                    }
                    return crate::zip::inflate_part_into(&src, arrangement.skip, dst, false, None)
                        .map_err(|e| e.at(comp.offset));
                }
                let cap = self.limits.max_decompressed_len;
                if arrangement.span > cap {
                    return Err(Error::limit(format!(
                        "inflated size {} exceeds the cap of {cap} bytes",
                        arrangement.span
                    ))
                    .at(comp.offset));
                }
                let n = usize::try_from(arrangement.span)
                    .map_err(|_| Error::limit("inflated size exceeds usize"))?;
                let mut buf = zt_container::internal::try_zeroed_vec::<u8>(n)?;
                self.inflate_whole_into(comp, &src, arrangement.skip, &mut buf)?;
                Cow::Owned(buf)
            }
            // A span of a zstd stream (a compressed DCP chunk's archive): decoded up to its
            // end, under the cap, straight into `dst` when its elements are packed.
            Encoding::Zstd => {
                let src = match stored {
                    Some(s) => Cow::Borrowed(s),
                    None => file.read_at(comp.offset, comp.length)?,
                };
                let cap = self.limits.max_decompressed_len;
                let reach = arrangement.skip.saturating_add(arrangement.span);
                if reach > cap {
                    return Err(Error::limit(format!(
                        "a span ending {reach} bytes into a zstd stream exceeds the cap of {cap} \
                         decoded bytes"
                    ))
                    .at(comp.offset));
                }
                // A whole record closed by a data descriptor is checked against its CRC-32.
                let decode = |out: &mut [u8]| {
                    match arrangement.described {
                        true => crate::codec::zstd_record_into(&src, arrangement.skip, out),
                        false => crate::codec::zstd_part_into(&src, arrangement.skip, out),
                    }
                    .map_err(|e| self.in_file_numbered(comp.file)(e.at(comp.offset)))
                };
                if arrangement.is_packed() && dst.len() as u64 == arrangement.span {
                    return decode(dst);
                }
                let n = usize::try_from(arrangement.span)
                    .map_err(|_| Error::limit("decoded size exceeds usize"))?;
                let mut buf = zt_container::internal::try_zeroed_vec::<u8>(n)?;
                decode(&mut buf)?;
                Cow::Owned(buf)
            }
            // Column-major elements a pickle stored as latin-1 text: decoded whole (the span
            // is the array's own bytes, as its listing checked), then gathered.
            Encoding::Latin1Text => {
                let src = match stored {
                    Some(s) => Cow::Borrowed(s),
                    None => file.read_at(comp.offset, comp.length)?,
                };
                let n = usize::try_from(arrangement.span)
                    .map_err(|_| Error::limit("decoded size exceeds usize"))?;
                let mut buf = zt_container::internal::try_zeroed_vec::<u8>(n)?;
                zt_formats::latin1_decode_into(&src, &mut buf).map_err(|e| e.at(comp.offset))?;
                Cow::Owned(buf)
            }
            other => {
                return Err(Error::unsupported(format!(
                    "arranged elements under encoding {other}"
                )))
            }
        };
        gather(
            &span,
            arrangement,
            comp.element.logical_size() as usize,
            dst,
        )
        .map_err(|e| e.at(comp.offset))
    }

    /// The span of what the zstd stream `stored` decodes to that holds a box's elements,
    /// decoded under the cap, and checked against the CRC-32 of the data descriptor after it
    /// when it has one.
    fn decode_stream_span(&self, stored: &[u8], span: &zt_formats::StreamSpan) -> Result<Vec<u8>> {
        let cap = self.limits.max_decompressed_len;
        let reach = span.skip.saturating_add(span.len);
        if reach > cap {
            return Err(Error::limit(format!(
                "a span ending {reach} bytes into a zstd stream exceeds the cap of {cap} decoded \
                 bytes"
            )));
        }
        let n = usize::try_from(span.len).map_err(|_| Error::limit("a span exceeds usize"))?;
        let mut buf = zt_container::internal::try_zeroed_vec::<u8>(n)?;
        match span.described {
            true => crate::codec::zstd_record_into(stored, span.skip, &mut buf)?,
            false => crate::codec::zstd_part_into(stored, span.skip, &mut buf)?,
        }
        Ok(buf)
    }

    /// Checks a piece's bytes against the CRC-32C its writer recorded, if it recorded one.
    fn check_piece(piece: &zt_formats::Piece, bytes: &[u8]) -> Result<()> {
        let Some(want) = piece.crc32c else {
            return Ok(());
        };
        let mut hasher = zt_formats::DigestAlgorithm::Crc32c.hasher();
        hasher.update(bytes);
        let got = hasher.finish();
        if got != zt_formats::Digest::Crc32c(want) {
            return Err(Error::checksum(format!(
                "a piece's CRC-32C does not match: recorded {want:08x}, computed {got}"
            ))
            .at(piece.offset));
        }
        Ok(())
    }

    /// A component's decoded elements in a new buffer.
    fn decode_new<T: Pod>(&self, comp: &ComponentInfo) -> Result<Vec<T>> {
        let stored = match comp.encoding {
            // Pieces are read where they lie, each into its place.
            Encoding::Raw | Encoding::Pieces(_) | Encoding::Boxes(_) => None,
            _ => Some(self.file(comp)?.read_at(comp.offset, comp.length)?),
        };
        let Some(len) = self.decoded_size(comp, stored.as_deref())? else {
            // Legacy stream of unknown size: bounded by the cap, then one copy into typed
            // storage (only v1.1 and v0.1 sparse components take this path).
            let cap = self.limits.max_decompressed_len;
            let bytes =
                crate::codec::zstd_decompress_bounded(stored.as_deref().unwrap_or(&[]), cap)
                    .map_err(|e| e.at(comp.offset))?;
            whole_elements::<T>(bytes.len() as u64).map_err(|e| e.at(comp.offset))?;
            return Ok(bytemuck::pod_collect_to_vec(&bytes));
        };
        let n = whole_elements::<T>(len).map_err(|e| e.at(comp.offset))?;
        // Fallible (an allocator that says no is an error, not an abort), and in 2 MiB pages
        // where it can be: a fresh buffer is faulted in page by page as it is filled.
        let mut out =
            zt_container::internal::try_zeroed_vec::<T>(n).map_err(|e| e.at(comp.offset))?;
        self.decode_into(comp, stored.as_deref(), bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }

    /// Decodes a component into `out`, reusing its allocation; `out` ends up exactly the
    /// component's length. Shrinking keeps the buffer; growing zeroes only the new tail.
    pub fn read_into<T: Pod>(
        &self,
        obj: &ObjectInfo,
        comp: &ComponentInfo,
        out: &mut Vec<T>,
        verify: Verify,
    ) -> Result<()> {
        let at = locate(obj, comp);
        if let Some(d) = &obj.defect {
            return Err(d.error_in(&obj.name));
        }
        // Always a copy: checked unless checks are off (see `load` for the order of checks).
        let (check, strict) = (verify.applies(true), verify == Verify::Always);
        let stored_is_data = comp.encoding == Encoding::Raw && comp.arrangement.is_none();
        let stored = match comp.encoding {
            Encoding::Raw | Encoding::Pieces(_) | Encoding::Boxes(_) => None,
            _ => Some(
                self.file(comp)
                    .and_then(|f| f.read_at(comp.offset, comp.length))
                    .map_err(&at)?,
            ),
        };
        if check && !stored_is_data && comp.digest_scope == DigestScope::Stored {
            self.check_stored(comp, strict).map_err(&at)?;
        }
        let len = self
            .decoded_size(comp, stored.as_deref())
            .map_err(&at)?
            .ok_or_else(|| at(Error::unsupported("size unknown before decoding")))?;
        let n = whole_elements::<T>(len).map_err(|e| at(e.at(comp.offset)))?;
        if out.len() > n {
            out.truncate(n);
        } else {
            out.try_reserve_exact(n - out.len()).map_err(|_| {
                at(Error::out_of_memory(format!("cannot allocate {len} bytes")).at(comp.offset))
            })?;
            out.resize(n, T::zeroed());
        }
        self.decode_into(
            comp,
            stored.as_deref(),
            bytemuck::cast_slice_mut(out.as_mut_slice()),
        )
        .map_err(&at)?;
        if check {
            self.check_container(obj, comp).map_err(&at)?;
        }
        if check && (stored_is_data || comp.digest_scope == DigestScope::Decoded) {
            self.check_decoded(comp, bytemuck::cast_slice(out.as_slice()), strict)
                .map_err(&at)?;
        }
        if comp.byte_order == ByteOrder::Big {
            swap_elements(
                bytemuck::cast_slice_mut(out.as_mut_slice()),
                comp.element.dtype.size(),
            );
        }
        Ok(())
    }

    /// Hands a component out in consecutive pieces of at most `buf`'s capacity (1 MiB of
    /// elements when it has none): borrowed from the map when raw, little-endian and aligned;
    /// read piece by piece through `buf` when raw and unmapped; decoded whole first otherwise.
    pub fn read_chunked<T: Pod>(
        &self,
        obj: &ObjectInfo,
        comp: &ComponentInfo,
        buf: &mut Vec<T>,
        verify: Verify,
        mut each: impl FnMut(&[T]) -> Result<()>,
    ) -> Result<()> {
        let at = locate(obj, comp);
        let size = std::mem::size_of::<T>();
        let piece = if buf.capacity() > 0 {
            buf.capacity()
        } else {
            (1 << 20) / size.max(1)
        }
        .max(1);
        let strict = verify == Verify::Always;
        if comp.encoding != Encoding::Raw
            || comp.byte_order == ByteOrder::Big
            || comp.arrangement.is_some()
            || (comp.digest_scope == DigestScope::Decoded && comp.element.dtype == DType::Bool)
        {
            // Decoded (and byte-swapped) whole, then handed out in pieces all the same.
            self.read_into(obj, comp, buf, verify)?;
            return buf.chunks(piece).try_for_each(each);
        }
        if let Some(d) = &obj.defect {
            return Err(d.error_in(&obj.name));
        }
        // Checked when the file was opened: the range lies inside the file.
        let (offset, length) = (comp.offset, comp.length);
        let file = self.file(comp).map_err(&at)?;
        if let Some(bytes) = file.as_slice() {
            let whole = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(length).ok())
                .and_then(|(o, l)| bytes.get(o..o.checked_add(l)?))
                .ok_or_else(|| at(Error::invalid("range outside the file").at(offset)))?;
            if let Ok(elements) = bytemuck::try_cast_slice::<u8, T>(whole) {
                if verify.applies(false) {
                    self.check_container(obj, comp).map_err(&at)?;
                    self.check_decoded(comp, whole, strict).map_err(&at)?;
                }
                return elements.chunks(piece).try_for_each(each);
            }
        }
        // Pieces read positionally: the digest is computed as they pass and compared at the
        // end, as a streaming checksum is (a mismatch fails the read after the last piece).
        let check = verify.applies(true);
        if check {
            self.check_container(obj, comp).map_err(&at)?;
        }
        let digest = comp
            .digest
            .filter(|_| check && (strict || comp.foreign_digest.is_none()));
        if let (Some(text), true) = (&comp.foreign_digest, check && strict) {
            return Err(at(Error::unsupported(format!(
                "digest {text:?}: its algorithm is not one this library computes"
            ))
            .at(offset)));
        }
        let mut hasher = digest.map(|d| d.algorithm().hasher());
        whole_elements::<T>(length).map_err(|e| at(e.at(offset)))?;
        if buf.len() < piece {
            buf.resize(piece, T::zeroed());
        }
        let mut done = 0u64;
        while done < length {
            let n = usize::try_from((length - done) / size as u64)
                .map_or(piece, |left| left.min(piece));
            let chunk = buf.get_mut(..n).unwrap_or_default();
            file.read_into(offset + done, bytemuck::cast_slice_mut(chunk))
                .map_err(&at)?;
            if let Some(h) = hasher.as_mut() {
                h.update(bytemuck::cast_slice(chunk));
            }
            each(chunk)?;
            done += (n * size) as u64;
        }
        if let (Some(h), Some(d)) = (hasher, digest) {
            let got = h.finish();
            if got != d {
                return Err(at(Error::checksum(format!(
                    "digest mismatch: stored {d}, computed {got}"
                ))
                .at(offset)));
            }
        }
        Ok(())
    }

    /// A component's stored bytes, as they are on disk (compressed for zstd).
    pub fn stored(&self, comp: &ComponentInfo) -> Result<Cow<'_, [u8]>> {
        self.file(comp)?.read_at(comp.offset, comp.length)
    }

    /// Checks one component's digest (if it has one): against its stored bytes, or for v2
    /// against its decoded bytes, after the content rules of its type (bool bytes are 0 or 1;
    /// an odd count of packed FP4 leaves the last high nibble 0), which v2 checks on verify
    /// even without a digest.
    pub fn verify_component(&self, comp: &ComponentInfo) -> Result<()> {
        if let Some(text) = &comp.foreign_digest {
            return Err(Error::unsupported(format!(
                "digest {text:?}: its algorithm is not one this library computes"
            ))
            .at(comp.offset));
        }
        // Pieces that carry their own CRC-32Cs are checked as they are read.
        if piece_crcs(comp) > 0 {
            self.decode_new::<u8>(comp)?;
            return Ok(());
        }
        match comp.digest_scope {
            DigestScope::Stored => {
                if let Some(d) = &comp.digest {
                    d.verify(&self.stored(comp)?)
                        .map_err(|e| e.at(comp.offset))?;
                }
            }
            DigestScope::Decoded => {
                let typed = comp.element.dtype == DType::Bool
                    || comp.element.logical == Some(LogicalType::F4E2M1);
                if comp.digest.is_none() && !typed {
                    return Ok(());
                }
                let bytes = self.decode_new::<u8>(comp)?;
                self.check_decoded(comp, &bytes, true)?;
            }
        }
        Ok(())
    }

    /// The checks of a component's bytes as a read returns them (a v2 part's decoded bytes,
    /// or raw bytes as stored): a digest this library cannot compute is `Unsupported` when
    /// `strict` (else passed over), bool bytes of v2 are 0 or 1, and the digest matches.
    fn check_decoded(&self, comp: &ComponentInfo, bytes: &[u8], strict: bool) -> Result<()> {
        if let (Some(text), true) = (&comp.foreign_digest, strict) {
            return Err(Error::unsupported(format!(
                "digest {text:?}: its algorithm is not one this library computes"
            ))
            .at(comp.offset));
        }
        if comp.digest_scope == DigestScope::Decoded && comp.element.dtype == DType::Bool {
            check_bools(bytes).map_err(|e| e.at(comp.offset))?;
        }
        if let Some(d) = &comp.digest {
            d.verify(bytes).map_err(|e| e.at(comp.offset))?;
        }
        Ok(())
    }

    /// A dense v2 object of packed FP4 with an odd element count must leave the last byte's
    /// high nibble 0 (it holds no element).
    pub fn verify_fp4_tail(&self, obj: &ObjectInfo) -> Result<()> {
        let Some(c) = obj.component("data") else {
            return Ok(());
        };
        if obj.format != Format::Dense
            || c.digest_scope != DigestScope::Decoded
            || c.element.logical != Some(LogicalType::F4E2M1)
            || obj.element_count() % 2 == 0
        {
            return Ok(());
        }
        let bytes = self.decode_new::<u8>(c)?;
        match bytes.last() {
            Some(b) if b >> 4 != 0 => Err(Error::invalid(format!(
                "odd count of f4_e2m1 elements, but the unused high nibble of the last byte is {:#x}",
                b >> 4
            ))
            .at(c.offset)),
            _ => Ok(()),
        }
    }

    /// Checks the digests that cover a whole legacy entry.
    pub fn verify_ranges(&self, obj: &ObjectInfo) -> Result<()> {
        for r in &obj.range_digests {
            let stored = self.source.read_at(r.offset, r.length)?;
            r.digest.verify(&stored).map_err(|e| e.at(r.offset))?;
        }
        Ok(())
    }

    /// Verifies every digest of one object; returns how many it checked.
    pub fn verify_object(&self, obj: &ObjectInfo) -> Result<usize> {
        for c in &obj.components {
            self.verify_component(c).map_err(locate(obj, c))?;
        }
        if let Some(c) = obj.component("data") {
            self.verify_fp4_tail(obj).map_err(locate(obj, c))?;
        }
        self.verify_ranges(obj)
            .map_err(|e| e.in_object(&obj.name))?;
        let pieces: usize = obj.components.iter().map(piece_crcs).sum();
        Ok(obj.range_digests.len()
            + obj.components.iter().filter(|c| c.digest.is_some()).count()
            + pieces)
    }
}

/// How many pieces of a component of pieces or boxes carry a CRC-32C of their own, or spans
/// closed by a data descriptor (their record's CRC-32, checked as they are decoded).
fn piece_crcs(comp: &ComponentInfo) -> usize {
    if comp.arrangement.as_ref().is_some_and(|a| a.described) {
        return 1;
    }
    match &comp.encoding {
        Encoding::Pieces(pieces) => pieces.iter().filter(|p| p.crc32c.is_some()).count(),
        Encoding::Boxes(table) => {
            let pieces = table.boxes.iter().filter(|(p, ..)| p.crc32c.is_some());
            pieces.count() + table.spans.iter().filter(|s| s.described).count()
        }
        _ => 0,
    }
}

/// Copies the elements an arrangement places in `span` into `dst` in row-major order, `size`
/// bytes each. Every position is checked: a span too short for the strides is an error,
/// never a panic.
fn gather(span: &[u8], arrangement: &Arrangement, size: usize, dst: &mut [u8]) -> Result<()> {
    let short = || Error::invalid("elements lie past the end of their storage");
    if arrangement.strides.is_empty() {
        let src = span.get(..dst.len()).ok_or_else(short)?;
        dst.copy_from_slice(src);
        return Ok(());
    }
    let (dims, strides) = (&arrangement.dims, &arrangement.strides);
    if dims.len() != strides.len() || size == 0 {
        return Err(Error::invalid("strides do not match the shape"));
    }
    let mut index = vec![0u64; dims.len()];
    let mut at = 0u64; // element offset of `index` in the span
    for out in dst.chunks_exact_mut(size) {
        let from = usize::try_from(at)
            .ok()
            .and_then(|a| a.checked_mul(size))
            .and_then(|a| span.get(a..a.checked_add(size)?))
            .ok_or_else(short)?;
        out.copy_from_slice(from);
        // Next index, last dimension fastest.
        for d in (0..dims.len()).rev() {
            let (Some(i), Some(&n), Some(&s)) = (index.get_mut(d), dims.get(d), strides.get(d))
            else {
                break;
            };
            *i += 1;
            at = at.wrapping_add(s);
            if *i < n {
                break;
            }
            at = at.wrapping_sub(s.wrapping_mul(n));
            *i = 0;
        }
    }
    Ok(())
}

/// How many `T` a run of `len` bytes holds, if it holds a whole number that fits in memory.
fn whole_elements<T>(len: u64) -> Result<usize> {
    let size = std::mem::size_of::<T>() as u64;
    if len % size != 0 {
        return Err(Error::invalid(format!(
            "{len} bytes is not a whole number of {size}-byte elements"
        )));
    }
    usize::try_from(len / size).map_err(|_| Error::limit("component exceeds usize"))
}

/// Checks that every byte of a bool array is 0 or 1.
pub(crate) fn check_bools(bytes: &[u8]) -> Result<()> {
    match bytes.iter().position(|&b| b > 1) {
        None => Ok(()),
        Some(i) => Err(Error::invalid(format!(
            "bool element {i} is byte {:#04x}, not 0x00 or 0x01",
            bytes.get(i).copied().unwrap_or(0)
        ))),
    }
}

pub(crate) fn swap_elements(bytes: &mut [u8], size: usize) {
    if size > 1 {
        for e in bytes.chunks_exact_mut(size) {
            e.reverse();
        }
    }
}
