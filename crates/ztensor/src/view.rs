//! Borrowed views of one object and one component: the name is looked up once, by
//! [`Reader::object`](crate::Reader::object), and every read hangs off the view.
//!
//! Reads of sparse and quantized objects ([`ObjectView::read_csr`], [`ObjectView::to_dense`],
//! ...) are added to the view by [`crate::sparse`].

use std::borrow::Cow;
use std::ops::Deref;

use zt_container::{Error, Result};
use zt_formats::{element_matches, DType, Element, ElementType, Format};

use crate::decode::{check_bools, locate, Backing, ReadOptions, Verify};
use crate::model::{ComponentInfo, ObjectInfo};

/// One object of an open file: its listing (through `Deref` to [`ObjectInfo`]) and its reads.
///
/// A view is two references and a position, so it is `Copy`; what it reads borrows from the
/// reader, not from the view.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("m.zt");
/// let mut w = ztensor::Writer::create(&path)?;
/// w.add("w", &[2, 2], &[1.0f32, 2.0, 3.0, 4.0])?;
/// w.finish()?;
///
/// let r = ztensor::open(&path)?;
/// let w = r.object("w")?;
/// assert_eq!(w.shape(), &[2, 2]);
/// assert_eq!(w.dims()?, vec![2usize, 2]);
/// assert_eq!(&w.read::<f32>()?[..], &[1.0, 2.0, 3.0, 4.0]);
/// assert_eq!(w.bytes()?.len(), 16);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ObjectView<'r> {
    backing: &'r Backing,
    info: &'r ObjectInfo,
    /// The object's position in name order, for the read-ahead.
    index: u32,
    /// Handed out by [`Reader::iter`](crate::Reader::iter): the caller walks the file.
    walking: bool,
    /// What the reads without options check ([`ObjectView::with_checks`]).
    checks: Verify,
    /// The float type conversions write its float elements as ([`ObjectView::cast_floats`]).
    cast: Option<DType>,
}

impl<'r> Deref for ObjectView<'r> {
    type Target = ObjectInfo;

    fn deref(&self) -> &ObjectInfo {
        self.info
    }
}

impl<'r> ObjectView<'r> {
    pub(crate) fn new(
        backing: &'r Backing,
        info: &'r ObjectInfo,
        index: u32,
        walking: bool,
    ) -> Self {
        ObjectView {
            backing,
            info,
            index,
            walking,
            checks: backing.verify,
            cast: None,
        }
    }

    /// The same view, whose reads tell the reader's read-ahead nothing while the file is not
    /// all in the page cache: for a caller whose reads are read from the disk by other means,
    /// such as a whole set's load ([`crate::ShardedSet::load_all_in_background`]), beside
    /// which each shard's own read-ahead would only read more streams. A file all in the page
    /// cache at its first read is told as ever: there the read-ahead reads nothing and maps
    /// the pages ahead of the reads on another core, which spares the reads their faults.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let r = ztensor::open(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/v123_all.zt"))?;
    /// # let name = r.names().next().unwrap().to_owned();
    /// let bytes = r.object(&name)?.read_ahead_elsewhere().bytes()?;
    /// # let _ = bytes;
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_ahead_elsewhere(mut self) -> Self {
        let backing = self.backing;
        if !backing.readahead.file_seems_cached(&backing.source) {
            self.index = crate::readahead::NO_HINTS;
        }
        self
    }

    /// The same view, whose reads without options ([`ObjectView::read`],
    /// [`ObjectView::bytes`], the sparse and quantized reads, ...) check as `checks` says
    /// instead of as the reader was opened ([`crate::OpenOptions::verify`]).
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let r = ztensor::open(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/v123_all.zt"))?;
    /// # let name = r.names().next().unwrap().to_owned();
    /// let checked = r.object(&name)?.with_checks(ztensor::Verify::Always);
    /// let bytes = checked.bytes()?; // digest checked, still borrowed from the map
    /// # let _ = bytes;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_checks(mut self, checks: Verify) -> Self {
        self.checks = checks;
        self
    }

    /// What the reads without options check.
    pub fn checks(&self) -> Verify {
        self.checks
    }

    /// The same view as conversions write it: its floating-point elements (plain f64, f32,
    /// f16 and bf16) cast to `to`, rounded to nearest, ties to even; NaN stays NaN and values
    /// past `to`'s range become infinities, as numpy's `astype` does.
    /// Integer, bool, FP8 and packed elements keep their types, and so do quantized blocks a
    /// conversion copies as they are (their dense form, when densified, is cast). `zt convert
    /// --dtype`.
    ///
    /// The cast is what [`ObjectView::dense_form`], [`ObjectView::dense_element_type`] and
    /// every writer of [`crate::convert`] give; [`ObjectView::read`] and the other reads
    /// still give the elements as stored. A cast reads the source through its checks first:
    /// bytes that fail their digest are never cast.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// # let mut w = ztensor::Writer::create(&path)?;
    /// # w.add("w", &[2], &[1.0f32, 0.1])?;
    /// # w.add("steps", &[1], &[7i64])?;
    /// # w.finish()?;
    /// use ztensor::DType;
    /// let r = ztensor::open(&path)?;
    /// let w = r.object("w")?.cast_floats(DType::BF16)?;
    /// let (bytes, element) = w.dense_form()?;
    /// assert_eq!((element.dtype, bytes.len()), (DType::BF16, 4));
    /// assert_eq!(&bytes[..], &[0x80, 0x3f, 0xcd, 0x3d]); // 1.0 and 0.1 rounded
    /// // Integers keep their type.
    /// let steps = r.object("steps")?.cast_floats(DType::BF16)?;
    /// assert_eq!(steps.dense_element_type().unwrap().dtype, DType::I64);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cast_floats(mut self, to: DType) -> Result<Self> {
        if !crate::cast::CAST_TYPES.contains(&to) {
            return Err(Error::argument(format!(
                "cannot cast to {}: floating-point tensors are cast to f64, f32, f16 or bf16",
                to.name()
            )));
        }
        self.cast = Some(to);
        Ok(self)
    }

    /// The float type conversions write this object's float elements as, when
    /// [`ObjectView::cast_floats`] set one.
    pub fn float_cast(&self) -> Option<DType> {
        self.cast
    }

    /// The cast its parts take when a conversion copies them as they are: the float cast for
    /// dense and sparse objects (their data or values), none for the others (quantized
    /// blocks and groups are kept as they are).
    pub(crate) fn parts_cast(&self) -> Option<DType> {
        match self.info.format {
            Format::Dense | Format::SparseCsr | Format::SparseCoo => self.cast,
            _ => None,
        }
    }

    /// Whether the cast changes any part a conversion copies as it is (see
    /// [`ObjectView::parts_cast`]): such an object cannot be copied as stored.
    pub(crate) fn cast_changes_parts(&self) -> bool {
        let Some(to) = self.parts_cast() else {
            return false;
        };
        match self.info.legacy_packing {
            Some(p) => crate::cast::changes(&ElementType::plain(p.values), to),
            None => self
                .info
                .components
                .iter()
                .any(|c| crate::cast::changes(&c.element, to)),
        }
    }

    /// The element type of the object's dense form ([`ObjectView::dense_form`]): as
    /// [`ObjectInfo::dense_element_type`] gives it, cast when [`ObjectView::cast_floats`]
    /// says so.
    pub fn dense_element_type(&self) -> Option<ElementType> {
        let element = self.info.dense_element_type()?;
        Some(crate::cast::cast_element(&element, self.cast))
    }

    /// The view a conversion reads through: everything the file carries is checked, unless
    /// the reader was opened with checks off.
    pub(crate) fn for_copy(self) -> Self {
        let checks = self.checks.for_copy();
        self.with_checks(checks)
    }

    /// The options of the reads that take none.
    pub(crate) fn read_options(&self) -> ReadOptions {
        ReadOptions {
            verify: self.checks,
        }
    }

    /// Every read of the object's bytes starts here: it tells the read-ahead what is read.
    pub(crate) fn will_read(&self) {
        self.backing.note_read(self.index, self.walking);
    }

    /// Tells the read-ahead that the object's bytes are about to be read through a map of
    /// the caller's own (torch maps a file itself and views its tensors there), as a read
    /// through this reader tells it: a caller that goes on to read most of the file gets it
    /// read from the disk ahead, in large requests, into the page cache its own map shares,
    /// and a caller that reads a few objects gets only theirs asked for. Nothing is told for
    /// a file that was all in the page cache at its first read: the read-ahead would only
    /// map pages into this reader's map, which such a caller never touches.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// let mut w = ztensor::Writer::create(&path)?;
    /// w.add("m", &[2, 2], &[1u8, 2, 3, 4])?;
    /// w.finish()?;
    /// let r = ztensor::open(&path)?;
    /// r.object("m")?.will_read_through_own_map(); // then read `m` through another map
    /// # Ok(())
    /// # }
    /// ```
    pub fn will_read_through_own_map(&self) {
        let backing = self.backing;
        if !backing.readahead.file_seems_cached(&backing.source) {
            self.will_read();
        }
    }

    pub(crate) fn backing(&self) -> &'r Backing {
        self.backing
    }

    /// The object's listing.
    pub fn info(&self) -> &'r ObjectInfo {
        self.info
    }

    /// The object's name.
    pub fn name(&self) -> &'r str {
        &self.info.name
    }

    /// The logical shape, row-major.
    pub fn shape(&self) -> &'r [u64] {
        &self.info.shape
    }

    /// The shape as `usize`, for indexing memory with it; an error where a dimension does
    /// not fit (32-bit targets).
    pub fn dims(&self) -> Result<Vec<usize>> {
        self.info
            .shape
            .iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| {
                    Error::limit(format!("dimension {d} exceeds usize")).in_object(self.name())
                })
            })
            .collect()
    }

    /// The object's components, sorted by role.
    pub fn components(&self) -> impl ExactSizeIterator<Item = ComponentView<'r>> + 'r {
        let object = *self;
        self.info
            .components
            .iter()
            .map(move |info| ComponentView { object, info })
    }

    /// A component by role; a missing role is [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    pub fn component(&self, role: &str) -> Result<ComponentView<'r>> {
        let Some(info) = self.info.component(role) else {
            // An unreadable object may list no components at all: say why first.
            self.readable()?;
            // Objects have a handful of components; a file may list more: name eight.
            let all = &self.info.components;
            let roles: Vec<&str> = all.iter().take(8).map(|c| &*c.role).collect();
            let more = if all.len() > 8 { " and more" } else { "" };
            let message = format!("no component {role:?} (it has {roles:?}{more})");
            return Err(Error::not_found(message).in_object(self.name()));
        };
        Ok(ComponentView {
            object: *self,
            info,
        })
    }

    /// `Ok` unless the file lists this object as unreadable; then the error reading it gives
    /// (what is wrong, with its component and offset when known). Every read checks this
    /// itself; a caller that picks what to do by the object's format or components checks it
    /// first, so that the reason comes before any complaint about the format.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// let mut w = ztensor::Writer::create(&path)?;
    /// w.add("w", &[2], &[1.0f32, 2.0])?;
    /// w.finish()?;
    /// let r = ztensor::open(&path)?;
    /// for info in r.objects() {
    ///     match r.object(&info.name)?.readable() {
    ///         Ok(()) => println!("{}: {}", info.name, info.format),
    ///         Err(why) => println!("{}: unreadable: {why}", info.name),
    ///     }
    /// }
    /// assert!(r.object("w")?.readable().is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub fn readable(&self) -> Result<()> {
        match &self.info.defect {
            Some(d) => Err(d.error_in(&self.info.name)),
            None => Ok(()),
        }
    }

    /// The `data` component of a dense object whose elements are `T`; `api` names the call
    /// in the error.
    fn dense_data<T: Element>(&self, api: &str) -> Result<ComponentView<'r>> {
        let info = self.info;
        // An object listed as unreadable says why, whatever type the caller asks for.
        self.readable()?;
        if api == "read" && info.format != Format::Dense {
            return Err(Error::argument(format!(
                "object is {}, not dense: read its components or convert it to dense",
                info.format
            ))
            .in_object(self.name()));
        }
        let data = self.component("data")?;
        if info.format == Format::Dense && element_matches::<T>(&data.element) {
            return Ok(data);
        }
        if api == "read" {
            return Err(wrong_type(&data.element, &T::element_type(), data));
        }
        Err(Error::argument(format!(
            "{api} needs a dense object of {}",
            T::element_type().name()
        ))
        .in_component("data")
        .in_object(self.name()))
    }

    /// A dense object's elements as `T`: borrowed from the map when raw, little-endian and
    /// aligned; decoded into a new buffer otherwise. A GGUF-origin quantized object (format
    /// `gguf.<type>/1`) reads as `f32`, dequantized into a new buffer.
    pub fn read<T: Element>(&self) -> Result<Cow<'r, [T]>> {
        self.read_with(self.read_options())
    }

    /// As [`ObjectView::read`], verifying the digest first.
    pub fn read_verified<T: Element>(&self) -> Result<Cow<'r, [T]>> {
        self.read_with(ReadOptions::verified())
    }

    /// As [`ObjectView::read`], with options.
    pub fn read_with<T: Element>(&self, opts: ReadOptions) -> Result<Cow<'r, [T]>> {
        if T::element_type() == ElementType::plain(DType::F32) {
            if let Some(values) = self.dequantize_ggml(opts)? {
                // T is f32 itself: the only element type whose type is plain f32.
                let values: Vec<T> = bytemuck::allocation::try_cast_vec(values)
                    .map_err(|_| Error::argument("not f32").in_object(self.name()))?;
                return Ok(Cow::Owned(values));
            }
        }
        self.dense_data::<T>("read")?.load::<T>(opts)
    }

    /// Reads a dense object into `out`, reusing its allocation: the way to read many tensors
    /// without a map at the kernel's copy rate (a fresh buffer per tensor costs a page fault
    /// and a zeroing per page). `out` ends up exactly the object's length.
    pub fn read_into<T: Element>(&self, out: &mut Vec<T>) -> Result<()> {
        let data = self.dense_data::<T>("read_into")?;
        self.will_read();
        self.backing
            .read_into(self.info, data.info, out, self.checks)
    }

    /// Reads a dense object piece by piece: calls `each` with consecutive runs of its elements,
    /// in order, each at most `buf`'s capacity long (1 MiB of elements when `buf` has none).
    ///
    /// For consumers that take a tensor piecewise (a copy to a device, a checksum, a format
    /// conversion) this is the fastest read without a map: the pieces go through one buffer
    /// that stays in the CPU cache, so the cost is the kernel's copy alone. From a memory map,
    /// raw little-endian pieces are borrowed from the map and `buf` is not used. zstd
    /// components are decoded whole first (bounded by the cap, as [`ObjectView::read`] does).
    /// An error from `each` ends the read and is returned.
    pub fn read_chunked<T: Element>(
        &self,
        buf: &mut Vec<T>,
        each: impl FnMut(&[T]) -> Result<()>,
    ) -> Result<()> {
        let data = self.dense_data::<T>("read_chunked")?;
        self.will_read();
        self.backing
            .read_chunked(self.info, data.info, buf, self.checks, each)
    }

    /// A bool object's elements, checked to be 0 or 1; zero-copy when raw and mapped.
    pub fn read_bool(&self) -> Result<Cow<'r, [bool]>> {
        self.read_bool_with(self.read_options())
    }

    /// As [`ObjectView::read_bool`], with options.
    pub fn read_bool_with(&self, opts: ReadOptions) -> Result<Cow<'r, [bool]>> {
        let data = self.component("data")?;
        if data.element != ElementType::plain(DType::Bool) {
            return Err(wrong_type(
                &data.element,
                &ElementType::plain(DType::Bool),
                data,
            ));
        }
        let bytes = data.load::<u8>(opts)?;
        check_bools(&bytes).map_err(locate(self.info, data.info))?;
        Ok(match bytes {
            Cow::Borrowed(b) => Cow::Borrowed(bytemuck::checked::cast_slice(b)),
            Cow::Owned(v) => Cow::Owned(v.into_iter().map(|b| b == 1).collect()),
        })
    }

    /// The decoded bytes (little-endian elements) of the component that carries the object's
    /// values ([`ObjectInfo::main_component`]), whatever the object's format and type.
    pub fn bytes(&self) -> Result<Cow<'r, [u8]>> {
        self.bytes_with(self.read_options())
    }

    /// As [`ObjectView::bytes`], with options.
    pub fn bytes_with(&self, opts: ReadOptions) -> Result<Cow<'r, [u8]>> {
        let info = self
            .info
            .main_component()
            .ok_or_else(|| Error::not_found("object has no components").in_object(self.name()))?;
        ComponentView {
            object: *self,
            info,
        }
        .bytes_with(opts)
    }

    /// Verifies every digest of the object; returns how many it checked. The public
    /// [`ObjectView::verify`] adds the data rules a format checks on verify ([`crate::sparse`]).
    pub(crate) fn verify_digests(&self) -> Result<usize> {
        self.will_read();
        self.backing.verify_object(self.info)
    }
}

/// One component of an object: its listing (through `Deref` to [`ComponentInfo`]) and its
/// reads.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("m.zt");
/// let mut w = ztensor::Writer::create(&path)?;
/// w.add_csr("m", [2, 3], &[5.0f32, 6.0], &[0, 2], &[0, 1, 2])?;
/// w.finish()?;
///
/// let r = ztensor::open(&path)?;
/// let indptr = r.object("m")?.component("indptr")?;
/// assert_eq!(&indptr.read::<u64>()?[..], &[0, 1, 2]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ComponentView<'r> {
    object: ObjectView<'r>,
    info: &'r ComponentInfo,
}

impl<'r> Deref for ComponentView<'r> {
    type Target = ComponentInfo;

    fn deref(&self) -> &ComponentInfo {
        self.info
    }
}

impl<'r> ComponentView<'r> {
    /// The component's listing.
    pub fn info(&self) -> &'r ComponentInfo {
        self.info
    }

    /// The object the component belongs to.
    pub fn object(&self) -> ObjectView<'r> {
        self.object
    }

    /// The decoded elements as `T` (raw typed access: `T` must be the element type, logical
    /// types included).
    pub fn read<T: Element>(&self) -> Result<Cow<'r, [T]>> {
        self.read_with(self.object.read_options())
    }

    /// As [`ComponentView::read`], with options.
    pub fn read_with<T: Element>(&self, opts: ReadOptions) -> Result<Cow<'r, [T]>> {
        if !element_matches::<T>(&self.info.element) {
            return Err(wrong_type(&self.info.element, &T::element_type(), *self));
        }
        self.load::<T>(opts)
    }

    /// The decoded elements as their storage type `T` (FP8 as `u8`, complex64 as `f32` pairs,
    /// unknown logical types as their dtype).
    pub fn read_storage<T: Element>(&self, opts: ReadOptions) -> Result<Cow<'r, [T]>> {
        if self.info.element.dtype != T::DTYPE || T::logical().is_some() {
            return Err(wrong_type(
                &ElementType::plain(self.info.element.dtype),
                &T::element_type(),
                *self,
            ));
        }
        self.load::<T>(opts)
    }

    /// The decoded bytes (little-endian elements), whatever the type.
    pub fn bytes(&self) -> Result<Cow<'r, [u8]>> {
        self.bytes_with(self.object.read_options())
    }

    /// As [`ComponentView::bytes`], with options.
    pub fn bytes_with(&self, opts: ReadOptions) -> Result<Cow<'r, [u8]>> {
        // Bytes need no alignment, and the load swaps big-endian data per element by the
        // component's own element size: no typed detour, no second copy.
        self.load::<u8>(opts)
    }

    /// The stored bytes, as they are on disk (compressed for zstd).
    pub fn stored_bytes(&self) -> Result<Cow<'r, [u8]>> {
        self.object.will_read();
        self.object
            .backing
            .stored(self.info)
            .map_err(locate(self.object.info, self.info))
    }

    fn load<T: bytemuck::Pod>(&self, opts: ReadOptions) -> Result<Cow<'r, [T]>> {
        self.object.will_read();
        self.object
            .backing
            .load::<T>(self.object.info, self.info, opts)
    }
}

/// The caller asked for the wrong element type.
fn wrong_type(stored: &ElementType, asked: &ElementType, at: ComponentView<'_>) -> Error {
    Error::argument(format!(
        "holds {} elements, not {}",
        stored.name(),
        asked.name()
    ))
    .in_component(&at.info.role)
    .in_object(at.object.name())
}
