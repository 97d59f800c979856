//! Opening a file of any kind, validating it once, and reading its objects.

use std::borrow::Cow;
use std::path::Path;

use bytemuck::Pod;
use zt_container::{Container, ContainerVersion, Error, Result, Source};
use zt_formats::{
    element_matches, Element, ElementType, Encoding, Format, DEFAULT_MAX_DECOMPRESSED,
};
use zt_manifest::{Attributes, DecodeLimits};

use crate::model::{ByteOrder, ComponentInfo, FileVersion, ObjectInfo};
use crate::{legacy, zt_v1};

/// Caps that bound what a hostile file can make the reader do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest manifest or index accepted (the spec's 1 GiB by default).
    pub max_manifest_len: u64,
    /// Largest decompressed size of one component (4 GiB by default).
    pub max_decompressed_len: u64,
    /// Manifest nesting depth and rank caps.
    pub decode: DecodeLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_manifest_len: zt_container::layout::MAX_MANIFEST_LEN,
            max_decompressed_len: DEFAULT_MAX_DECOMPRESSED,
            decode: DecodeLimits::default(),
        }
    }
}

/// How to open a file.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    unmapped: bool,
    populate: bool,
    limits: Limits,
    skip_mag_checksum: bool,
}

impl OpenOptions {
    /// Defaults: memory-mapped, default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read with positional reads instead of a memory map. Slower (every read copies), but a
    /// file truncated by another process gives an I/O error instead of killing the process
    /// with SIGBUS.
    pub fn unmapped(mut self, yes: bool) -> Self {
        self.unmapped = yes;
        self
    }

    /// Map every page of the file on a background thread, in file order, ahead of the reads
    /// (default: no; pages are mapped as they are first touched). For loaders that read every
    /// tensor: the page faults of first touches then happen on the second core, which makes
    /// reading a mapped file as fast as scanning memory, and a file not yet in the page cache
    /// is read ahead. Leave it off for tools that look at a few tensors of a large file. No
    /// effect with [`OpenOptions::unmapped`]. See [`Source::map_populated`].
    pub fn populate(mut self, yes: bool) -> Self {
        self.populate = yes;
        self
    }

    /// Whether to verify the CRC-32C of `.mag` layouts that have one (default: yes). magnetron
    /// itself never checks it; turn this off to read a damaged file.
    pub fn verify_mag_checksum(mut self, yes: bool) -> Self {
        self.skip_mag_checksum = !yes;
        self
    }

    /// Replaces all limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Caps one component's decompressed size.
    pub fn max_decompressed_len(mut self, bytes: u64) -> Self {
        self.limits.max_decompressed_len = bytes;
        self
    }

    /// Opens `path`.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Reader> {
        let path = path.as_ref();
        let source = if self.unmapped {
            Source::unmapped(path)
        } else if self.populate {
            Source::map_populated(path)
        } else {
            Source::map(path)
        }?;
        self.open_source(source).map_err(|e| e.in_file(path))
    }

    /// Opens bytes already in memory.
    pub fn open_bytes(&self, bytes: Vec<u8>) -> Result<Reader> {
        self.open_source(Source::from_vec(bytes))
    }

    /// Opens any [`Source`]: tells the kind from the magic and validates the whole file.
    pub fn open_source(&self, source: Source) -> Result<Reader> {
        // Tell the kind by the first bytes: .mag magics, then zTensor's, then a safetensors
        // header (u64 size, then '{'); anything else gets the zTensor container's magic error.
        let mut head = [0u8; 9];
        let n = source.len().min(9) as usize;
        source.read_into(0, head.get_mut(..n).unwrap_or(&mut []))?;
        let head = head.get(..n).unwrap_or(&[]);
        if let Some(magic) = head.first_chunk::<4>() {
            if zt_mag::is_mag_magic(magic) {
                return crate::mag_reader::open(source, &self.limits, !self.skip_mag_checksum);
            }
        }
        if !head.starts_with(b"ZTEN") && crate::safetensors_io::looks_like(head) {
            return crate::safetensors_io::open(source, &self.limits);
        }
        let container = Container::parse_with_limit(source, self.limits.max_manifest_len)?;
        let parsed = match container.version() {
            ContainerVersion::V1 => zt_v1::parse(&container, &self.limits)?,
            ContainerVersion::V0_1 => legacy::parse_v0_1(&container, &self.limits)?,
        };
        Ok(Reader::new(container.into_source(), parsed, self.limits))
    }
}

/// Sorts objects by name and returns a name that occurs twice, if any. Real files list their
/// objects sorted already, so this is usually one pass of comparisons that also finds
/// duplicates; only an unsorted list is sorted and then checked.
pub(crate) fn sort_by_name(objects: &mut [ObjectInfo]) -> Option<&str> {
    if !names_strictly_increasing(objects) {
        objects.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let twice = objects
            .windows(2)
            .position(|w| matches!(w, [a, b] if a.name == b.name));
        return twice.and_then(|i| objects.get(i)).map(|o| o.name.as_str());
    }
    None
}

/// Whether the objects are sorted by name with no name twice: one pass of comparisons.
pub(crate) fn names_strictly_increasing(objects: &[ObjectInfo]) -> bool {
    objects
        .windows(2)
        .all(|w| matches!(w, [a, b] if a.name < b.name))
}

/// What a format-specific parser hands the reader.
pub(crate) struct Parsed {
    pub version: FileVersion,
    pub attributes: Attributes,
    /// Sorted by name, each name once ([`sort_by_name`]).
    pub objects: Vec<ObjectInfo>,
    /// The name index over `objects`, when the parser built it already.
    pub index: Option<NameIndex>,
}

/// Options of one read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Check the stored bytes against their digest before decoding.
    pub verify: bool,
}

impl ReadOptions {
    /// Verify digests on this read.
    pub fn verified() -> Self {
        ReadOptions { verify: true }
    }
}

/// An open file: every object listed and validated, data read on demand.
///
/// Reads of raw little-endian components from a memory-mapped file borrow from the map: no
/// copy, just a pointer and a length.
#[derive(Debug)]
pub struct Reader {
    source: Source,
    version: FileVersion,
    attributes: Attributes,
    objects: Vec<ObjectInfo>,
    index: NameIndex,
    limits: Limits,
}

/// Finds an object's position by name: an open-addressing table of (hash, position) pairs
/// over the sorted object list. No owned keys: the names stay in the objects.
#[derive(Debug, Default)]
pub(crate) struct NameIndex {
    slots: Vec<(u64, u32)>,
    mask: usize,
}

const EMPTY_SLOT: u32 = u32::MAX;

pub(crate) fn name_hash(s: &str) -> u64 {
    // FNV-1a over 8-byte words, then a final mix: quick for the long, similar names of
    // real models; collisions only cost a string comparison.
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut chunks = s.as_bytes().chunks_exact(8);
    for c in &mut chunks {
        h = (h ^ u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).wrapping_mul(0x0100_0000_01b3);
    }
    for &b in chunks.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 32)
}

impl NameIndex {
    pub(crate) fn build(objects: &[ObjectInfo]) -> Self {
        let hashes: Vec<u64> = objects.iter().map(|o| name_hash(&o.name)).collect();
        Self::from_hashes(&hashes)
    }

    /// The index of objects whose names have these hashes ([`name_hash`]), in order.
    pub(crate) fn from_hashes(hashes: &[u64]) -> Self {
        let cap = (hashes.len() * 2).next_power_of_two().max(8);
        let mut slots = Vec::with_capacity(cap);
        zt_container::prefer_huge_pages(&mut slots);
        slots.resize(cap, (0u64, EMPTY_SLOT));
        let mask = cap - 1;
        for (i, &h) in hashes.iter().enumerate() {
            let mut at = h as usize & mask;
            while slots.get(at).is_some_and(|s| s.1 != EMPTY_SLOT) {
                at = (at + 1) & mask;
            }
            if let Some(slot) = slots.get_mut(at) {
                *slot = (h, i as u32);
            }
        }
        NameIndex { slots, mask }
    }

    fn find(&self, objects: &[ObjectInfo], name: &str) -> Option<usize> {
        let h = name_hash(name);
        let mut at = h as usize & self.mask;
        loop {
            let &(sh, i) = self.slots.get(at)?;
            if i == EMPTY_SLOT {
                return None;
            }
            if sh == h && objects.get(i as usize).is_some_and(|o| o.name == name) {
                return Some(i as usize);
            }
            at = (at + 1) & self.mask;
        }
    }
}

/// Opens a file of any kind we read (`.zt` of every version, `.mag` of every layout), mapped.
pub fn open(path: impl AsRef<Path>) -> Result<Reader> {
    OpenOptions::new().open(path)
}

impl Reader {
    /// `parsed.objects` must be sorted by name with no name twice ([`sort_by_name`]).
    pub(crate) fn new(source: Source, parsed: Parsed, limits: Limits) -> Self {
        let objects = parsed.objects;
        let index = parsed.index.unwrap_or_else(|| NameIndex::build(&objects));
        Reader {
            source,
            version: parsed.version,
            attributes: parsed.attributes,
            objects,
            index,
            limits,
        }
    }

    /// The file's kind and version.
    pub fn version(&self) -> &FileVersion {
        &self.version
    }

    /// File-level attributes (.mag metadata too).
    pub fn attributes(&self) -> &Attributes {
        &self.attributes
    }

    /// Every object, sorted by name.
    pub fn objects(&self) -> &[ObjectInfo] {
        &self.objects
    }

    /// Object names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.objects.iter().map(|o| o.name.as_str())
    }

    /// The underlying source (to tell whether reads borrow: [`Source::is_in_memory`]).
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// An object by name.
    pub fn object(&self, name: &str) -> Result<&ObjectInfo> {
        self.index
            .find(&self.objects, name)
            .and_then(|i| self.objects.get(i))
            .ok_or_else(|| Error::argument(format!("no object named {name:?}")))
    }

    fn component<'s>(
        &'s self,
        name: &str,
        role: &str,
    ) -> Result<(&'s ObjectInfo, &'s ComponentInfo)> {
        let obj = self.object(name)?;
        let comp = obj.component(role).ok_or_else(|| {
            Error::argument(format!("object has no component {role:?}")).in_object(name)
        })?;
        Ok((obj, comp))
    }

    /// A dense object's elements as `T`: borrowed from the map when raw, little-endian and
    /// aligned; decoded into a new buffer otherwise.
    pub fn read<T: Element>(&self, name: &str) -> Result<Cow<'_, [T]>> {
        self.read_with(name, ReadOptions::default())
    }

    /// As [`Reader::read`], verifying the digest first.
    pub fn read_verified<T: Element>(&self, name: &str) -> Result<Cow<'_, [T]>> {
        self.read_with(name, ReadOptions::verified())
    }

    /// As [`Reader::read`], with options.
    pub fn read_with<T: Element>(&self, name: &str, opts: ReadOptions) -> Result<Cow<'_, [T]>> {
        let obj = self.object(name)?;
        if obj.format != Format::Dense {
            return Err(Error::argument(format!(
                "object is {}, not dense: read its components or convert it to dense",
                obj.format
            ))
            .in_object(name));
        }
        self.read_component_with(name, "data", opts)
    }

    /// Reads a dense object into `out`, reusing its allocation: the way to read many tensors
    /// without a map at the kernel's copy rate (a fresh buffer per tensor costs a page fault
    /// and a zeroing per page). `out` ends up exactly the object's length.
    pub fn read_into<T: Element>(&self, name: &str, out: &mut Vec<T>) -> Result<()> {
        let comp = self.dense_data::<T>(name, "read_into")?;
        let at = |e: Error| e.in_component("data").in_object(name);
        let size = std::mem::size_of::<T>() as u64;
        let len = comp
            .decoded_len
            .ok_or_else(|| at(Error::unsupported("size unknown before decoding")))?;
        if len > self.limits.max_decompressed_len && comp.encoding != Encoding::Raw {
            return Err(at(Error::limit(format!(
                "declared decompressed size {len} exceeds the cap"
            ))));
        }
        let n =
            usize::try_from(len / size).map_err(|_| at(Error::limit("object exceeds usize")))?;
        // Shrinking keeps the buffer; growing zeroes only the new tail.
        if out.len() > n {
            out.truncate(n);
        } else {
            out.resize(n, T::zeroed());
        }
        let dst: &mut [u8] = bytemuck::cast_slice_mut(out.as_mut_slice());
        match &comp.encoding {
            Encoding::Raw => self.source.read_into(comp.offset, dst).map_err(at)?,
            Encoding::Zstd => {
                let src = self.source.read_at(comp.offset, comp.length).map_err(at)?;
                let got = zt_formats::zstd_decompress_into(&src, dst)
                    .map_err(|e| at(e.at(comp.offset)))?;
                if got as u64 != len {
                    return Err(at(Error::invalid(format!(
                        "zstd stream inflates to {got} bytes, fewer than the declared {len}"
                    ))
                    .at(comp.offset)));
                }
            }
            Encoding::Unknown(e) => {
                return Err(at(Error::unsupported(format!("unknown encoding {e:?}"))))
            }
        }
        if comp.byte_order == ByteOrder::Big {
            swap_elements(
                bytemuck::cast_slice_mut(out.as_mut_slice()),
                comp.element.dtype.size(),
            );
        }
        Ok(())
    }

    /// The `data` component of dense object `name`, if its elements are `T` and it has no
    /// defect; `api` names the caller in the error.
    fn dense_data<T: Element>(&self, name: &str, api: &str) -> Result<&ComponentInfo> {
        let (obj, comp) = self.component(name, "data")?;
        let at = |e: Error| e.in_component("data").in_object(name);
        if obj.format != Format::Dense || !element_matches::<T>(&comp.element) {
            return Err(at(Error::argument(format!(
                "{api} needs a dense object of {}",
                T::element_type().name()
            ))));
        }
        match &obj.defect {
            Some(d) => Err(at(d.to_error())),
            None => Ok(comp),
        }
    }

    /// Reads a dense object piece by piece: calls `each` with consecutive runs of its elements,
    /// in order, each at most `buf`'s capacity long (1 MiB of elements when `buf` has none).
    ///
    /// For consumers that take a tensor piecewise (a copy to a device, a checksum, a format
    /// conversion) this is the fastest read without a map: the pieces go through one buffer
    /// that stays in the CPU cache, so the cost is the kernel's copy alone. From a memory map,
    /// raw little-endian pieces are borrowed from the map and `buf` is not used. zstd
    /// components are decoded whole first (bounded by the cap, as [`Reader::read`] does).
    /// An error from `each` ends the read and is returned.
    pub fn read_chunked<T: Element>(
        &self,
        name: &str,
        buf: &mut Vec<T>,
        mut each: impl FnMut(&[T]) -> Result<()>,
    ) -> Result<()> {
        let comp = self.dense_data::<T>(name, "read_chunked")?;
        let at = |e: Error| e.in_component("data").in_object(name);
        let size = std::mem::size_of::<T>();
        let piece = if buf.capacity() > 0 {
            buf.capacity()
        } else {
            (1 << 20) / size.max(1)
        }
        .max(1);
        if comp.encoding != Encoding::Raw || comp.byte_order == ByteOrder::Big {
            // Decoded (and byte-swapped) whole, then handed out in pieces all the same.
            self.read_into(name, buf)?;
            return buf.chunks(piece).try_for_each(each);
        }
        // Checked when the file was opened: the range lies inside the file.
        let (offset, length) = (comp.offset, comp.length);
        if let Some(bytes) = self.source.as_slice() {
            let whole = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(length).ok())
                .and_then(|(o, l)| bytes.get(o..o.checked_add(l)?))
                .ok_or_else(|| at(Error::invalid("range outside the file").at(offset)))?;
            if let Ok(elements) = bytemuck::try_cast_slice::<u8, T>(whole) {
                return elements.chunks(piece).try_for_each(each);
            }
        }
        if buf.len() < piece {
            buf.resize(piece, T::zeroed());
        }
        let mut done = 0u64;
        while done < length {
            let n = usize::try_from((length - done) / size as u64)
                .map_or(piece, |left| left.min(piece));
            if n == 0 {
                return Err(at(Error::invalid(format!(
                    "{length} bytes are not a whole number of {size}-byte elements"
                ))
                .at(offset)));
            }
            let chunk = buf.get_mut(..n).unwrap_or_default();
            self.source
                .read_into(offset + done, bytemuck::cast_slice_mut(chunk))
                .map_err(at)?;
            each(chunk)?;
            done += (n * size) as u64;
        }
        Ok(())
    }

    /// One component's decoded elements as `T` (raw typed access, any format).
    pub fn read_component<T: Element>(&self, name: &str, role: &str) -> Result<Cow<'_, [T]>> {
        self.read_component_with(name, role, ReadOptions::default())
    }

    /// As [`Reader::read_component`], with options.
    pub fn read_component_with<T: Element>(
        &self,
        name: &str,
        role: &str,
        opts: ReadOptions,
    ) -> Result<Cow<'_, [T]>> {
        let (obj, comp) = self.component(name, role)?;
        if !element_matches::<T>(&comp.element) {
            return Err(wrong_type(
                comp.element.name(),
                &T::element_type(),
                name,
                role,
            ));
        }
        self.load::<T>(obj, comp, opts)
    }

    /// A component's decoded elements as their storage type `T` (FP8 as `u8`, complex64 as
    /// `f32` pairs, unknown logical types as their dtype).
    pub fn read_storage<T: Element>(
        &self,
        name: &str,
        role: &str,
        opts: ReadOptions,
    ) -> Result<Cow<'_, [T]>> {
        let (obj, comp) = self.component(name, role)?;
        if comp.element.dtype != T::DTYPE || T::logical().is_some() {
            return Err(wrong_type(
                comp.element.dtype.name(),
                &T::element_type(),
                name,
                role,
            ));
        }
        self.load::<T>(obj, comp, opts)
    }

    /// A bool object's elements, checked to be 0 or 1; zero-copy when raw and mapped.
    pub fn read_bool(&self, name: &str) -> Result<Cow<'_, [bool]>> {
        self.read_bool_with(name, ReadOptions::default())
    }

    /// As [`Reader::read_bool`], with options.
    pub fn read_bool_with(&self, name: &str, opts: ReadOptions) -> Result<Cow<'_, [bool]>> {
        let (obj, comp) = self.component(name, "data")?;
        if comp.element != ElementType::plain(zt_formats::DType::Bool) {
            return Err(Error::argument(format!(
                "holds {} elements, not bool",
                comp.element.name()
            ))
            .in_object(name));
        }
        let bytes = self.load::<u8>(obj, comp, opts)?;
        check_bools(&bytes).map_err(|e| e.in_component("data").in_object(name))?;
        Ok(match bytes {
            Cow::Borrowed(b) => Cow::Borrowed(bytemuck::checked::cast_slice(b)),
            Cow::Owned(v) => Cow::Owned(v.into_iter().map(|b| b == 1).collect()),
        })
    }

    /// A component's decoded bytes (little-endian elements), whatever its type.
    pub fn component_bytes(
        &self,
        name: &str,
        role: &str,
        opts: ReadOptions,
    ) -> Result<Cow<'_, [u8]>> {
        let (obj, comp) = self.component(name, role)?;
        self.load_bytes(obj, comp, opts)
    }

    /// A component's stored bytes, as they are on disk (compressed for zstd).
    pub fn stored_bytes(&self, name: &str, role: &str) -> Result<Cow<'_, [u8]>> {
        let (_, comp) = self.component(name, role)?;
        self.source.read_at(comp.offset, comp.length)
    }

    pub(crate) fn load_bytes(
        &self,
        obj: &ObjectInfo,
        comp: &ComponentInfo,
        opts: ReadOptions,
    ) -> Result<Cow<'_, [u8]>> {
        // Bytes need no alignment, and `load` swaps big-endian data per element by the
        // component's own element size: no typed detour, no second copy.
        self.load::<u8>(obj, comp, opts)
    }

    /// Loads one component as `T`, whose size must divide the element size. The caller has
    /// checked that `T` fits the component's type.
    fn load<T: Pod>(
        &self,
        obj: &ObjectInfo,
        comp: &ComponentInfo,
        opts: ReadOptions,
    ) -> Result<Cow<'_, [T]>> {
        let at = |e: Error| e.in_component(&comp.role).in_object(&obj.name);
        if let Some(d) = &obj.defect {
            return Err(at(d.to_error()));
        }
        if opts.verify {
            self.verify_component(comp).map_err(at)?;
            self.verify_ranges(obj).map_err(at)?;
        }
        let data = match &comp.encoding {
            Encoding::Raw => self.raw::<T>(comp).map_err(at)?,
            Encoding::Zstd => Cow::Owned(self.inflate::<T>(comp).map_err(at)?),
            Encoding::Unknown(e) => {
                return Err(at(Error::unsupported(format!("unknown encoding {e:?}"))))
            }
        };
        Ok(match comp.byte_order {
            ByteOrder::Little => data,
            ByteOrder::Big => {
                let mut v = data.into_owned();
                swap_elements(bytemuck::cast_slice_mut(&mut v), comp.element.dtype.size());
                Cow::Owned(v)
            }
        })
    }

    fn raw<T: Pod>(&self, comp: &ComponentInfo) -> Result<Cow<'_, [T]>> {
        let size = std::mem::size_of::<T>() as u64;
        if comp.length % size != 0 {
            return Err(Error::invalid(format!(
                "{} bytes is not a whole number of {size}-byte elements",
                comp.length
            ))
            .at(comp.offset));
        }
        if self.source.is_in_memory() {
            let bytes = self.source.read_at(comp.offset, comp.length)?;
            return Ok(match bytes {
                Cow::Borrowed(b) => match bytemuck::try_cast_slice(b) {
                    Ok(s) => Cow::Borrowed(s),
                    // Owned buffers carry no alignment promise; copy once into aligned storage.
                    Err(_) => Cow::Owned(bytemuck::pod_collect_to_vec(b)),
                },
                Cow::Owned(v) => Cow::Owned(bytemuck::pod_collect_to_vec(&v)),
            });
        }
        // Positional read straight into typed storage: one copy, the kernel's.
        let n = usize::try_from(comp.length / size)
            .map_err(|_| Error::limit("component exceeds usize"))?;
        let mut out = Vec::with_capacity(n);
        // A fresh buffer is faulted in page by page as it is filled; a large one in 2 MiB
        // pages costs 512 times fewer faults.
        zt_container::prefer_huge_pages(&mut out);
        out.resize(n, T::zeroed());
        self.source
            .read_into(comp.offset, bytemuck::cast_slice_mut(&mut out))?;
        Ok(Cow::Owned(out))
    }

    fn inflate<T: Pod>(&self, comp: &ComponentInfo) -> Result<Vec<T>> {
        let cap = self.limits.max_decompressed_len;
        let src = self.source.read_at(comp.offset, comp.length)?;
        let size = std::mem::size_of::<T>() as u64;
        let expected = match comp.decoded_len.or_else(|| frame_content_size(&src)) {
            Some(n) => n,
            None => {
                // Legacy stream of unknown size: bounded by the cap, then one copy into typed
                // storage (only v1.1 and v0.1 sparse components take this path).
                let bytes = zt_formats::zstd_decompress_bounded(&src, cap)
                    .map_err(|e| e.at(comp.offset))?;
                if bytes.len() as u64 % size != 0 {
                    return Err(Error::invalid(format!(
                        "{} bytes is not a whole number of {size}-byte elements",
                        bytes.len()
                    ))
                    .at(comp.offset));
                }
                return Ok(bytemuck::pod_collect_to_vec(&bytes));
            }
        };
        if expected > cap {
            return Err(Error::limit(format!(
                "declared decompressed size {expected} exceeds the cap of {cap} bytes"
            ))
            .at(comp.offset));
        }
        if expected % size != 0 {
            return Err(Error::invalid(format!(
                "{expected} bytes is not a whole number of {size}-byte elements"
            ))
            .at(comp.offset));
        }
        let n = usize::try_from(expected / size)
            .map_err(|_| Error::limit("component exceeds usize"))?;
        let mut out = vec![T::zeroed(); n];
        let got = zt_formats::zstd_decompress_into(&src, bytemuck::cast_slice_mut(&mut out))
            .map_err(|e| e.at(comp.offset))?;
        if got as u64 != expected {
            return Err(Error::invalid(format!(
                "zstd stream inflates to {got} bytes, fewer than the declared {expected}"
            ))
            .at(comp.offset));
        }
        Ok(out)
    }

    /// Checks one component's digest (if it has one) against its stored bytes.
    fn verify_component(&self, comp: &ComponentInfo) -> Result<()> {
        if let Some(d) = &comp.digest {
            let stored = self.source.read_at(comp.offset, comp.length)?;
            d.verify(&stored).map_err(|e| e.at(comp.offset))?;
        }
        Ok(())
    }

    /// Checks the digests that cover a whole legacy entry.
    fn verify_ranges(&self, obj: &ObjectInfo) -> Result<()> {
        for r in &obj.range_digests {
            let stored = self.source.read_at(r.offset, r.length)?;
            r.digest.verify(&stored).map_err(|e| e.at(r.offset))?;
        }
        Ok(())
    }

    /// Verifies every digest of one object; returns how many it checked.
    pub fn verify_object(&self, name: &str) -> Result<usize> {
        let obj = self.object(name)?;
        for c in &obj.components {
            self.verify_component(c)
                .map_err(|e| e.in_component(&c.role).in_object(name))?;
        }
        self.verify_ranges(obj).map_err(|e| e.in_object(name))?;
        Ok(obj.range_digests.len() + obj.components.iter().filter(|c| c.digest.is_some()).count())
    }

    /// Verifies every digest and checksum in the file on every core; returns how many were
    /// checked and the failures, one per object.
    pub fn verify(&self) -> VerifyReport {
        self.verify_with_threads(zt_formats::available_threads())
    }

    /// As [`Reader::verify`], on `threads` threads. Objects are dealt out by stored size, largest
    /// first, so the threads finish together.
    pub fn verify_with_threads(&self, threads: usize) -> VerifyReport {
        let results = self.parallel_objects(threads, |o| self.verify_object(&o.name));
        let mut report = VerifyReport::default();
        for r in results {
            match r {
                Ok(n) => report.checked += n,
                Err(e) => {
                    report.checked += 1;
                    report.failures.push(e);
                }
            }
        }
        report
    }

    /// Runs `f` on every object, spread over `threads` threads; results in object order.
    pub fn parallel_objects<R: Send>(
        &self,
        threads: usize,
        f: impl Fn(&ObjectInfo) -> R + Sync,
    ) -> Vec<R> {
        let n = self.objects.len();
        let threads = threads.clamp(1, n.max(1));
        if threads == 1 {
            return self.objects.iter().map(&f).collect();
        }
        // Longest-processing-time-first: big objects spread across threads.
        let mut order: Vec<usize> = (0..n).collect();
        let weight = |i: usize| {
            self.objects
                .get(i)
                .map_or(0, |o| o.components.iter().map(|c| c.length).sum::<u64>())
        };
        order.sort_unstable_by_key(|&i| std::cmp::Reverse(weight(i)));
        let mut bins: Vec<(u64, Vec<usize>)> = vec![(0, Vec::new()); threads];
        for i in order {
            if let Some(b) = bins.iter_mut().min_by_key(|b| b.0) {
                b.0 += weight(i);
                b.1.push(i);
            }
        }
        let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = bins
                .iter()
                .map(|(_, idx)| {
                    let f = &f;
                    // Only shared references inside: the closure is `Copy`, so a bin whose
                    // thread cannot be started runs on this one instead.
                    let run = move || {
                        idx.iter()
                            .filter_map(|&i| Some((i, f(self.objects.get(i)?))))
                            .collect::<Vec<_>>()
                    };
                    std::thread::Builder::new()
                        .spawn_scoped(s, run)
                        .map_err(|_| run)
                })
                .collect();
            for h in handles {
                let done = match h {
                    // A panic in `f` is the caller's; pass it on.
                    Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                    Err(run) => run(),
                };
                for (i, r) in done {
                    if let Some(slot) = out.get_mut(i) {
                        *slot = Some(r);
                    }
                }
            }
        });
        out.into_iter().flatten().collect()
    }

    /// The limits this reader was opened with.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}

/// What [`Reader::verify`] found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Digests checked.
    pub checked: usize,
    /// Each mismatch or unreadable range.
    pub failures: Vec<Error>,
}

impl VerifyReport {
    /// Whether every digest matched.
    pub fn is_ok(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The caller asked for the wrong element type.
fn wrong_type(stored: &str, asked: &ElementType, name: &str, role: &str) -> Error {
    Error::argument(format!("holds {stored} elements, not {}", asked.name()))
        .in_component(role)
        .in_object(name)
}

pub(crate) fn check_bools(bytes: &[u8]) -> Result<()> {
    match bytes.iter().position(|&b| b > 1) {
        None => Ok(()),
        Some(i) => Err(Error::invalid(format!(
            "bool element {i} is byte {:#04x}, not 0x00 or 0x01",
            bytes.get(i).copied().unwrap_or(0)
        ))),
    }
}

fn swap_elements(bytes: &mut [u8], size: usize) {
    if size > 1 {
        for e in bytes.chunks_exact_mut(size) {
            e.reverse();
        }
    }
}

/// The content size a zstd frame records, if it records one.
fn frame_content_size(src: &[u8]) -> Option<u64> {
    zstd::zstd_safe::get_frame_content_size(src).ok().flatten()
}
