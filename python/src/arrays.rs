//! numpy arrays over the bytes the library hands back.
//!
//! Bytes borrowed from a memory map become a read-only array whose base is a [`MapHolder`]:
//! it owns an `Arc` of the reader, so the map lives as long as any array over it, whatever
//! happens to the Python reader object. Owned bytes (decoded, byte-swapped or copied for
//! alignment) become a writable array whose base is an [`OwnedHolder`].
//!
//! The dtype of each element type comes from a table the Python package sets once at import
//! ([`set_dtype_table`]): `ml_dtypes` dtypes for bf16 and FP8 when it is importable, the
//! storage integers otherwise. The table is the package's policy; this module only applies it.

use std::borrow::Cow;
use std::ffi::c_void;
use std::sync::{Arc, RwLock};

use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ztensor::ElementType;

use crate::errors::{argument, IntoPy};

/// Keeps a reader, and so its memory map, alive for the arrays that point into it.
#[pyclass(frozen, module = "ztio._native")]
pub struct MapHolder {
    _reader: Arc<ztensor::Reader>,
}

/// Owns the bytes of an array that could not point into a map.
#[pyclass(frozen, module = "ztio._native")]
pub struct OwnedHolder {
    /// Never read or borrowed after the array is made: numpy writes through the pointer.
    _bytes: AlignedBytes,
}

/// Bytes in storage aligned for the array's type: a decoded buffer taken as it is (its block
/// is aligned, as the allocator's large blocks are), or a copy into 16-byte words.
pub enum AlignedBytes {
    /// Decoded bytes, moved in: no copy.
    Taken(Vec<u8>),
    /// A copy, aligned to 16, enough for every numpy type we make.
    Words(Vec<u128>),
    /// float32 values made for this read (dequantized, converted), moved in: no copy.
    Floats(Vec<f32>),
    /// Bytes from `start` on, the first byte of `bytes` aligned to [`SHAREABLE_ALIGN`]: a
    /// box gathered for a read, which JAX and TensorFlow can then take without a copy.
    Lines { bytes: Vec<u8>, start: usize },
}

/// The alignment JAX and TensorFlow need to take memory without a copy (the widest vectors
/// their kernels load; TensorFlow aborts on less).
pub const SHAREABLE_ALIGN: usize = 64;

impl AlignedBytes {
    /// A copy of `bytes`, allocated fallibly (an allocator that says no is an error).
    fn copy_of(bytes: &[u8]) -> ztensor::Result<Self> {
        let mut words =
            ztensor::container::internal::try_zeroed_vec::<u128>(bytes.len().div_ceil(16))?;
        let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        dst[..bytes.len()].copy_from_slice(bytes);
        Ok(AlignedBytes::Words(words))
    }

    /// `bytes` as they are when their block is aligned to `align`, else a copy.
    fn take(bytes: Vec<u8>, align: usize) -> ztensor::Result<Self> {
        if (bytes.as_ptr() as usize) % align.max(1) == 0 {
            Ok(AlignedBytes::Taken(bytes))
        } else {
            Self::copy_of(&bytes)
        }
    }

    /// `len` zero bytes aligned to [`SHAREABLE_ALIGN`], allocated fallibly. Zeroed by the
    /// allocator (a large block comes zeroed from the kernel, with no clearing pass), with
    /// room to start at an aligned byte: an aligned allocation would be cleared by a pass.
    fn zeroed_shareable(len: usize) -> ztensor::Result<Self> {
        let room = len
            .checked_add(SHAREABLE_ALIGN - 1)
            .ok_or_else(|| ztensor::Error::out_of_memory(format!("cannot allocate {len} bytes")))?;
        let bytes = ztensor::container::internal::try_zeroed_vec::<u8>(room)?;
        let start = (bytes.as_ptr() as usize).wrapping_neg() % SHAREABLE_ALIGN;
        Ok(AlignedBytes::Lines { bytes, start })
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        match self {
            AlignedBytes::Lines { bytes, start } => bytes[*start..].as_mut_ptr(),
            AlignedBytes::Taken(v) => v.as_mut_ptr(),
            AlignedBytes::Words(w) => w.as_mut_ptr().cast(),
            AlignedBytes::Floats(f) => f.as_mut_ptr().cast(),
        }
    }
}

/// element name -> numpy dtype, set by the Python package at import.
static DTYPES: RwLock<Option<Py<PyDict>>> = RwLock::new(None);

/// Sets the table of numpy dtypes by element type name (`"f32"`, `"bf16"`,
/// `"f8_e4m3fn"`, `"complex64"`, ...). Called once by `ztio` at import.
#[pyfunction]
pub fn set_dtype_table(table: Bound<'_, PyDict>) {
    let mut slot = DTYPES.write().unwrap_or_else(|p| p.into_inner());
    *slot = Some(table.unbind());
}

/// The numpy dtype an element type reads as: its own name in the table, else its storage
/// type's.
pub fn descr_for<'py>(
    py: Python<'py>,
    element: &ElementType,
) -> PyResult<Bound<'py, PyArrayDescr>> {
    let table = {
        let slot = DTYPES.read().unwrap_or_else(|p| p.into_inner());
        slot.as_ref().map(|t| t.clone_ref(py)).ok_or_else(|| {
            PyRuntimeError::new_err("ztio._native used before ztio set its dtype table")
        })?
    };
    let table = table.bind(py);
    let found = match table.get_item(element.name())? {
        Some(d) => Some(d),
        None => table.get_item(element.dtype.name())?,
    };
    let dtype = found.ok_or_else(|| {
        argument(
            py,
            format!("no numpy dtype for elements of {}", element.name()),
        )
    })?;
    PyArrayDescr::new(py, dtype)
}

/// A numpy array of `dims` elements of `descr` over `bytes`: pointing into the map (read-only,
/// base a [`MapHolder`]) when the bytes are borrowed and aligned for the dtype, else over an
/// owned, aligned copy (writable, base an [`OwnedHolder`]).
pub fn array_of<'py>(
    py: Python<'py>,
    reader: &Arc<ztensor::Reader>,
    bytes: Cow<'_, [u8]>,
    descr: Bound<'py, PyArrayDescr>,
    dims: &[u64],
) -> PyResult<Bound<'py, PyAny>> {
    let itemsize = descr.itemsize();
    // The caller's shape, so the caller's error (element_count's own says the file's).
    let count = ztensor::formats::element_count(dims).map_err(|_| {
        argument(
            py,
            format!("shape {dims:?} has more elements than fit in 64 bits"),
        )
    })?;
    if (count as u128) * (itemsize as u128) != bytes.len() as u128 {
        return Err(argument(
            py,
            format!(
                "{} bytes do not make {count} elements of {itemsize} bytes",
                bytes.len()
            ),
        ));
    }
    let align = descr.alignment().max(1);
    match bytes {
        Cow::Borrowed(b) if (b.as_ptr() as usize) % align == 0 => {
            let holder = Bound::new(
                py,
                MapHolder {
                    _reader: Arc::clone(reader),
                },
            )?;
            // Writable only over bytes this process holds privately: a private (copy-on-write)
            // map of the file that was opened, where a write copies the page in this process,
            // or the reader's own copy of bytes it was given (safetensors' `load`). Bytes of a
            // shard's shared map stay read-only. Bytes another object also holds (a blob the
            // writer shared between equal tensors) are copied, so that a write to one tensor
            // never shows in another.
            let private = reader.source().is_private_map()
                || matches!(reader.source(), ztensor::Source::Owned(_));
            let in_private_bytes = reader
                .source()
                .as_slice()
                .filter(|_| private)
                .and_then(|map| {
                    let start = (b.as_ptr() as usize).checked_sub(map.as_ptr() as usize)?;
                    let end = start.checked_add(b.len()).filter(|&end| end <= map.len())?;
                    Some(start as u64..end as u64)
                });
            if in_private_bytes
                .clone()
                .is_some_and(|range| reader.bytes_shared(range))
            {
                return owned_array(py, b, descr, dims);
            }
            let flags = if in_private_bytes.is_some() {
                npyffi::NPY_ARRAY_WRITEABLE
            } else {
                0
            };
            // SAFETY: the bytes live in the reader's map or buffer, which the holder keeps
            // alive. A read-only array writes nothing; a writable one writes to private pages
            // of a copy-on-write map, or to the reader's own buffer, which the library reads
            // as it would a file another process changed (never past its length: neither
            // grows).
            unsafe {
                new_array(
                    py,
                    descr,
                    dims,
                    b.as_ptr() as *mut c_void,
                    flags,
                    holder.into_any(),
                )
            }
        }
        // Decoded for this read: the buffer becomes the array's, with no second copy.
        Cow::Owned(v) => {
            let storage = AlignedBytes::take(v, align).py_err(py)?;
            array_over(py, storage, descr, dims)
        }
        other => owned_array(py, &other, descr, dims),
    }
}

/// A writable array over a copy of `bytes` in aligned storage: for borrowed bytes not aligned
/// for the dtype (decoded buffers are taken as they are, [`array_of`]).
fn owned_array<'py>(
    py: Python<'py>,
    bytes: &[u8],
    descr: Bound<'py, PyArrayDescr>,
    dims: &[u64],
) -> PyResult<Bound<'py, PyAny>> {
    let storage = py.detach(|| AlignedBytes::copy_of(bytes)).py_err(py)?;
    array_over(py, storage, descr, dims)
}

/// A writable float32 array of `values` in the shape `dims`, which takes the values' buffer
/// as its own: no copy.
pub fn f32_array<'py>(
    py: Python<'py>,
    values: Vec<f32>,
    dims: &[u64],
) -> PyResult<Bound<'py, PyAny>> {
    let count = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    // numpy reads as many values as the shape says: fewer would be read past the buffer.
    if count != Some(values.len() as u64) {
        return Err(argument(
            py,
            format!("{} float32 values for the shape {dims:?}", values.len()),
        ));
    }
    array_over(
        py,
        AlignedBytes::Floats(values),
        numpy::dtype::<f32>(py),
        dims,
    )
}

/// A writable array of `dims` elements of `descr`, `len` bytes in all, in storage aligned to
/// [`SHAREABLE_ALIGN`] that `fill` writes (without the GIL): for bytes gathered for a read,
/// which JAX and TensorFlow can then take as they are.
pub fn shareable_array<'py>(
    py: Python<'py>,
    descr: Bound<'py, PyArrayDescr>,
    dims: &[u64],
    len: usize,
    fill: impl FnOnce(&mut [u8]) -> ztensor::Result<()> + Send,
) -> PyResult<Bound<'py, PyAny>> {
    let count = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    // numpy reads as many bytes as the shape says: fewer would be read past the buffer.
    if count.and_then(|c| c.checked_mul(descr.itemsize() as u64)) != Some(len as u64) {
        return Err(argument(
            py,
            format!(
                "{len} bytes for {dims:?} elements of {} bytes",
                descr.itemsize()
            ),
        ));
    }
    let storage = py
        .detach(|| {
            let mut storage = AlignedBytes::zeroed_shareable(len)?;
            if let AlignedBytes::Lines { bytes, start } = &mut storage {
                let out = bytes.get_mut(*start..).and_then(|b| b.get_mut(..len));
                fill(out.ok_or_else(|| ztensor::Error::invalid("aligned storage too short"))?)?;
            }
            Ok(storage)
        })
        .py_err(py)?;
    array_over(py, storage, descr, dims)
}

/// A writable array over `storage`, which its holder owns and which holds at least the
/// bytes of `dims` elements of `descr`.
fn array_over<'py>(
    py: Python<'py>,
    mut storage: AlignedBytes,
    descr: Bound<'py, PyArrayDescr>,
    dims: &[u64],
) -> PyResult<Bound<'py, PyAny>> {
    let ptr = storage.as_mut_ptr();
    let holder = Bound::new(py, OwnedHolder { _bytes: storage })?;
    // SAFETY: the holder owns the storage (its heap block does not move with the holder) and
    // nothing else reads or writes it.
    unsafe {
        new_array(
            py,
            descr,
            dims,
            ptr.cast(),
            npyffi::NPY_ARRAY_WRITEABLE,
            holder.into_any(),
        )
    }
}

/// # Safety
/// `data` must point to `product(dims) * itemsize` bytes that `base` keeps alive and
/// aligned as `descr` asks (numpy reads the flag we set).
unsafe fn new_array<'py>(
    py: Python<'py>,
    descr: Bound<'py, PyArrayDescr>,
    dims: &[u64],
    data: *mut c_void,
    flags: i32,
    base: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut npy_dims = dims
        .iter()
        .map(|&d| npy_intp::try_from(d))
        .collect::<Result<Vec<npy_intp>, _>>()
        .map_err(|_| argument(py, "a dimension does not fit numpy's index type"))?;
    let nd = i32::try_from(npy_dims.len()).map_err(|_| argument(py, "too many dimensions"))?;
    // SAFETY: the caller's contract; PyArray_NewFromDescr steals the descr reference (hence
    // into_dtype_ptr, which adds one) and copies the dims; a null stride array makes the array
    // C-contiguous.
    unsafe {
        let subtype = npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type);
        let arr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            subtype,
            descr.into_dtype_ptr(),
            nd,
            npy_dims.as_mut_ptr(),
            std::ptr::null_mut(),
            data,
            flags,
            std::ptr::null_mut(),
        );
        if arr.is_null() {
            return Err(PyErr::fetch(py));
        }
        let arr = Bound::from_owned_ptr(py, arr);
        // SetBaseObject steals a reference to the base.
        if PY_ARRAY_API.PyArray_SetBaseObject(py, arr.as_ptr().cast(), base.into_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        PY_ARRAY_API.PyArray_UpdateFlags(
            py,
            arr.as_ptr().cast(),
            npyffi::NPY_ARRAY_ALIGNED
                | npyffi::NPY_ARRAY_C_CONTIGUOUS
                | npyffi::NPY_ARRAY_F_CONTIGUOUS,
        );
        Ok(arr)
    }
}
