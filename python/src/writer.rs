//! `Writer`: a zTensor file written one array at a time, through the library's writer, so
//! the bytes are the Rust writer's for the same objects in the same order.
//!
//! Each array is written (compressed and hashed) with the GIL released as soon as it is
//! added; only the manifest waits for `finish()`. A writer dropped unfinished leaves the old
//! target as it was and no temporary file behind.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use ztensor::container::AtomicFile;
use ztensor::convert::{write_safetensors_tensors, SafetensorsTensor};
use ztensor::{
    ComponentData, DigestAlgorithm, Durability, ElementType, Format, ObjectData, Version,
    WriteOptions,
};

use crate::errors::{argument, detach_interruptible, IntoPy};
use crate::values::{attributes_from_py, from_py};

/// A zTensor file being written.
#[pyclass(frozen, module = "ztio._native")]
pub struct Writer {
    /// `None` once finished or aborted.
    inner: Mutex<Option<ztensor::Writer<AtomicFile>>>,
}

fn parse_version(py: Python<'_>, v: &str) -> PyResult<Version> {
    match v {
        "v2" | "2" => Ok(Version::V2),
        "v2-compact" => Ok(Version::V2Compact),
        "v1.2" | "1.2" => Ok(Version::V1_2),
        other => Err(argument(
            py,
            format!("unknown version {other:?} (v2, v2-compact or v1.2)"),
        )),
    }
}

fn parse_digest(py: Python<'_>, d: Option<&str>) -> PyResult<Option<DigestAlgorithm>> {
    match d {
        None => Ok(None),
        Some("xxh3") => Ok(Some(DigestAlgorithm::Xxh3)),
        Some("sha256") => Ok(Some(DigestAlgorithm::Sha256)),
        Some("crc32c") => Ok(Some(DigestAlgorithm::Crc32c)),
        Some(other) => Err(argument(
            py,
            format!("unknown digest {other:?} (xxh3, sha256 or crc32c)"),
        )),
    }
}

impl Writer {
    fn with<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut ztensor::Writer<AtomicFile>) -> PyResult<R>,
    ) -> PyResult<R> {
        let mut slot = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let w = slot
            .as_mut()
            .ok_or_else(|| argument(py, "the writer is finished"))?;
        f(w)
    }
}

#[pymethods]
impl Writer {
    /// Starts a file that replaces `path` when finished.
    #[new]
    #[pyo3(signature = (path, *, version = "v2", sync = true))]
    fn new(py: Python<'_>, path: PathBuf, version: &str, sync: bool) -> PyResult<Self> {
        let version = parse_version(py, version)?;
        let durability = if sync {
            Durability::Synced
        } else {
            Durability::Unsynced
        };
        let w = py
            .detach(|| ztensor::Writer::create_version(&path, version, durability))
            .py_err(py)?;
        Ok(Writer {
            inner: Mutex::new(Some(w)),
        })
    }

    /// Sets a file attribute.
    fn set_attribute(&self, py: Python<'_>, key: String, value: Bound<'_, PyAny>) -> PyResult<()> {
        let value = from_py(&value)?;
        self.with(py, |w| {
            w.set_attribute(key, value);
            Ok(())
        })
    }

    /// Adds a dense object: `data` is a buffer of its little-endian bytes, row-major;
    /// `dtype` and `logical` name the element type (`"f32"`, `"u8"` + `"f8_e4m3fn"`, ...).
    #[pyo3(signature = (name, shape, dtype, logical, data, *, compression = None, digest = None, attributes = None))]
    #[allow(clippy::too_many_arguments)]
    fn add(
        &self,
        py: Python<'_>,
        name: &str,
        shape: Vec<u64>,
        dtype: &str,
        logical: Option<&str>,
        data: Bound<'_, PyAny>,
        compression: Option<i32>,
        digest: Option<&str>,
        attributes: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let element = ztensor::DType::from_name(dtype)
            .ok_or_else(|| argument(py, format!("unknown dtype {dtype:?}")))
            .and_then(|d| ElementType::with_type(d, logical).py_err(py))?;
        let attributes = match attributes {
            Some(a) if !a.is_none() => attributes_from_py(&a)?,
            _ => Default::default(),
        };
        let options = WriteOptions {
            compression,
            digest: parse_digest(py, digest)?,
        };
        let buffer = PyBuffer::<u8>::get(&data)?;
        if !buffer.is_c_contiguous() {
            return Err(argument(py, "data must be a C-contiguous buffer"));
        }
        let bytes = buffer_bytes(&buffer);
        let object = ObjectData {
            shape,
            format: Format::Dense,
            attributes,
            components: vec![ComponentData {
                role: "data".to_owned(),
                element,
                bytes: Cow::Borrowed(bytes),
            }],
        };
        // The lock is taken with the GIL released: a thread that waits for it must not hold
        // the GIL this one needs back.
        let result = detach_interruptible(py, || {
            let mut slot = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            slot.as_mut()
                .map(|w| w.add_object_with(name, object, options))
                .transpose()
        })?;
        result.ok_or_else(|| argument(py, "the writer is finished"))
    }

    /// Writes the manifest and puts the file in place.
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        let w = {
            let mut slot = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            slot.take()
        };
        let w = w.ok_or_else(|| argument(py, "the writer is finished"))?;
        detach_interruptible(py, || w.finish())?;
        Ok(())
    }

    /// Drops the file being written; the old target stays as it was.
    fn abort(&self) {
        let mut slot = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        *slot = None;
    }

    /// Whether `finish()` or `abort()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }
}

/// Writes arrays as a `.safetensors` file at `path`, crash-safely: `tensors` is a list of
/// `(name, dtype, logical, shape, data)` (`data` a C-contiguous numpy array of the bytes;
/// `shape` `None` for the array's own), `metadata` text pairs for `__metadata__` (`None`
/// writes none; an empty dict writes `{}`, as safetensors does).
#[pyfunction]
#[pyo3(signature = (tensors, metadata, path, *, sync = true))]
pub fn save_safetensors(
    py: Python<'_>,
    tensors: &Bound<'_, PyAny>,
    metadata: Option<BTreeMap<String, String>>,
    path: PathBuf,
    sync: bool,
) -> PyResult<()> {
    let mut held = HeldTensors::of(py, tensors)?;
    let planned = held.planned();
    let durability = if sync {
        Durability::Synced
    } else {
        Durability::Unsynced
    };
    detach_interruptible(py, || {
        write_safetensors_tensors(&planned, metadata.as_ref(), &path, durability)
    })
}

/// The bytes of a `.safetensors` file holding `tensors` (as [`save_safetensors`] takes them):
/// safetensors' `save`.
#[pyfunction]
pub fn safetensors_bytes<'py>(
    py: Python<'py>,
    tensors: &Bound<'py, PyAny>,
    metadata: Option<BTreeMap<String, String>>,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    let mut held = HeldTensors::of(py, tensors)?;
    let planned = held.planned();
    let bytes = py
        .detach(|| ztensor::convert::safetensors_bytes(&planned, metadata.as_ref()))
        .py_err(py)?;
    Ok(pyo3::types::PyBytes::new(py, &bytes))
}

/// The tensors Python hands the safetensors writers, each `(name, dtype, logical, shape,
/// data)` with `data` a C-contiguous numpy array of the bytes, held for as long as they are
/// written. Per tensor this keeps what the writer needs and no more (a million tiny
/// tensors are a million of everything): the name shared with Python's string, the shape,
/// and a pointer to bytes that stay where they are.
struct HeldTensors<'py> {
    names: Vec<PyBackedStr>,
    /// Element type, shape and bytes of each, beside `names`.
    rest: Vec<(ElementType, Vec<u64>, BorrowedBytes)>,
    /// The numpy arrays the bytes are in, a reference each: kept alive while written.
    arrays: Vec<Bound<'py, PyAny>>,
}

/// Where a held tensor's bytes are.
#[derive(Clone, Copy)]
struct BorrowedBytes {
    start: *const u8,
    len: usize,
}

impl<'py> HeldTensors<'py> {
    fn of(py: Python<'py>, tensors: &Bound<'py, PyAny>) -> PyResult<Self> {
        let count = tensors.len()?;
        let mut held = HeldTensors {
            names: Vec::with_capacity(count),
            rest: Vec::with_capacity(count),
            arrays: Vec::with_capacity(count),
        };
        for item in tensors.try_iter()? {
            let (name, dtype, logical, shape, data): (
                PyBackedStr,
                PyBackedStr,
                Option<PyBackedStr>,
                Option<Vec<u64>>,
                Bound<'py, PyAny>,
            ) = item?.extract()?;
            let element = ztensor::DType::from_name(&dtype)
                .ok_or_else(|| argument(py, format!("unknown dtype {:?}", &*dtype)))
                .and_then(|d| ElementType::with_type(d, logical.as_deref()).py_err(py))?;
            let (shape, bytes) = held.hold(py, data, shape)?;
            held.names.push(name);
            held.rest.push((element, shape, bytes));
        }
        Ok(held)
    }

    /// Holds `data`, a numpy array, and says where its bytes are: the array's own pointer,
    /// not a buffer export (which numpy answers by allocating a description it keeps until
    /// the array goes). The shape is `shape`, or when `None` the array's own.
    fn hold(
        &mut self,
        py: Python<'py>,
        data: Bound<'py, PyAny>,
        shape: Option<Vec<u64>>,
    ) -> PyResult<(Vec<u64>, BorrowedBytes)> {
        let array = data
            .cast::<PyUntypedArray>()
            .map_err(|_| argument(py, "data must be a numpy array"))?;
        if !array.is_c_contiguous() {
            return Err(argument(py, "data must be a C-contiguous array"));
        }
        let shape = shape.unwrap_or_else(|| array.shape().iter().map(|&d| d as u64).collect());
        let len = array
            .len()
            .checked_mul(array.dtype().itemsize())
            .ok_or_else(|| argument(py, "array exceeds the address space"))?;
        // SAFETY: a numpy array object's `data` points at its `len x itemsize` bytes
        // (contiguous, checked above) for as long as the array lives, which the reference
        // kept in `arrays` makes at least as long as these bytes are read.
        let start = unsafe {
            (*numpy::npyffi::_PyArray_GET_ITEM_DATA(array.as_array_ptr())).data as *const u8
        };
        self.arrays.push(data);
        Ok((shape, BorrowedBytes { start, len }))
    }

    /// The tensors as the library's safetensors writers take them (once: element types
    /// and shapes move there).
    fn planned(&mut self) -> Vec<SafetensorsTensor<'_>> {
        let rest = std::mem::take(&mut self.rest);
        self.names
            .iter()
            .zip(rest)
            .map(|(name, (element, shape, bytes))| SafetensorsTensor {
                name,
                element,
                shape,
                bytes: if bytes.len == 0 {
                    &[]
                } else {
                    // SAFETY: the bytes of an array held by `self` for the
                    // borrow; another thread writing the array while it is saved is the
                    // caller's race, as with any buffer consumer.
                    unsafe { std::slice::from_raw_parts(bytes.start, bytes.len) }
                },
            })
            .collect()
    }
}

/// The bytes of a held, C-contiguous u8 buffer.
fn buffer_bytes(buffer: &PyBuffer<u8>) -> &[u8] {
    // SAFETY: the buffer is held (its exporter pinned) for as long as the borrow; a u8 buffer
    // is `len_bytes` readable bytes. Another thread writing the array while it is saved is
    // the caller's race, as with any buffer consumer.
    if buffer.len_bytes() == 0 {
        return &[]; // the pointer of an empty buffer may be null
    }
    unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes()) }
}
