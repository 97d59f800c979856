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

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
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
/// `(name, dtype, logical, shape, buffer)`, `metadata` text pairs for `__metadata__`.
#[pyfunction]
#[pyo3(signature = (tensors, metadata, path, *, sync = true))]
#[allow(clippy::type_complexity)]
pub fn save_safetensors(
    py: Python<'_>,
    tensors: Vec<PyTensor<'_>>,
    metadata: BTreeMap<String, String>,
    path: PathBuf,
    sync: bool,
) -> PyResult<()> {
    let buffers = held_buffers(py, &tensors)?;
    let planned = planned_tensors(py, &tensors, &buffers)?;
    let durability = if sync {
        Durability::Synced
    } else {
        Durability::Unsynced
    };
    detach_interruptible(py, || {
        write_safetensors_tensors(&planned, &metadata, &path, durability)
    })
}

/// The bytes of a `.safetensors` file holding `tensors` (as [`save_safetensors`] takes them):
/// safetensors' `save`.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn safetensors_bytes<'py>(
    py: Python<'py>,
    tensors: Vec<PyTensor<'py>>,
    metadata: BTreeMap<String, String>,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    let buffers = held_buffers(py, &tensors)?;
    let planned = planned_tensors(py, &tensors, &buffers)?;
    let bytes = py
        .detach(|| ztensor::convert::safetensors_bytes(&planned, &metadata))
        .py_err(py)?;
    Ok(pyo3::types::PyBytes::new(py, &bytes))
}

/// One tensor as Python hands it to the safetensors writers: name, dtype, logical type,
/// shape, and a buffer of its bytes.
type PyTensor<'py> = (String, String, Option<String>, Vec<u64>, Bound<'py, PyAny>);

/// Each tensor's buffer, held (pinned) while it is written; C-contiguous ones only.
fn held_buffers(py: Python<'_>, tensors: &[PyTensor<'_>]) -> PyResult<Vec<PyBuffer<u8>>> {
    let mut buffers = Vec::with_capacity(tensors.len());
    for (_, _, _, _, data) in tensors {
        let buffer = PyBuffer::<u8>::get(data)?;
        if !buffer.is_c_contiguous() {
            return Err(argument(py, "data must be a C-contiguous buffer"));
        }
        buffers.push(buffer);
    }
    Ok(buffers)
}

/// The tensors with their element types and bytes, as the safetensors writers take them.
fn planned_tensors<'a>(
    py: Python<'_>,
    tensors: &'a [PyTensor<'_>],
    buffers: &'a [PyBuffer<u8>],
) -> PyResult<Vec<SafetensorsTensor<'a>>> {
    let mut planned = Vec::with_capacity(tensors.len());
    for ((name, dtype, logical, shape, _), buffer) in tensors.iter().zip(buffers) {
        let element = ztensor::DType::from_name(dtype)
            .ok_or_else(|| argument(py, format!("unknown dtype {dtype:?}")))
            .and_then(|d| ElementType::with_type(d, logical.as_deref()).py_err(py))?;
        planned.push(SafetensorsTensor {
            name,
            element,
            shape: shape.clone(),
            bytes: buffer_bytes(buffer),
        });
    }
    Ok(planned)
}

/// The bytes of a held, C-contiguous u8 buffer.
fn buffer_bytes(buffer: &PyBuffer<u8>) -> &[u8] {
    // SAFETY: the buffer is held (its exporter pinned) for as long as the borrow; a u8 buffer
    // is `len_bytes` readable bytes. Another thread writing the array while it is saved is
    // the caller's race, as with any buffer consumer.
    unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes()) }
}
