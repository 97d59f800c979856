//! `Reader`: one open file of any kind the library reads, shared by Python threads.
//!
//! The reader is an `Arc` behind a lock that is held only to clone it: every method clones
//! the `Arc`, releases the GIL and works on its own handle, so reads run in parallel and
//! `close()` never pulls a map out from under a read or an array.

use std::borrow::Cow;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use numpy::PyArrayDescrMethods;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PySlice, PyTuple};
use ztensor::{ComponentInfo, Encoding, FileVersion, Format, ObjectInfo, ObjectView};

use crate::arrays::{array_of, descr_for, f32_array, shareable_array};
use crate::errors::{argument, argument_worded, to_py, IntoPy};
use crate::values::attributes_to_py;

/// An open tensor file (`.zt` of every version, `.mag`, `.safetensors`).
#[pyclass(frozen, module = "ztio._native")]
pub struct Reader {
    inner: RwLock<Option<Arc<ztensor::Reader>>>,
}

impl Reader {
    /// A handle on a reader opened elsewhere (a shard of a set).
    pub(crate) fn of(reader: Arc<ztensor::Reader>) -> Self {
        Reader {
            inner: RwLock::new(Some(reader)),
        }
    }

    /// The open reader, or the closed-file error, in safetensors' words.
    fn get(&self, py: Python<'_>) -> PyResult<Arc<ztensor::Reader>> {
        let slot = self.inner.read().unwrap_or_else(|p| p.into_inner());
        slot.clone()
            .ok_or_else(|| argument_worded(py, "File is closed"))
    }
}

/// The library's options for the keyword arguments every Python open takes.
pub(crate) fn open_options(
    unmapped: bool,
    verify: bool,
    max_memory: Option<u64>,
    writable: bool,
) -> ztensor::OpenOptions {
    let checks = if verify {
        ztensor::Verify::Always
    } else {
        ztensor::Verify::WhenCopying
    };
    let options = ztensor::OpenOptions::new()
        .unmapped(unmapped)
        .copy_on_write(writable)
        .verify(checks);
    match max_memory {
        Some(bytes) => options.memory_budget(bytes),
        None => options,
    }
}

/// An object by name, or the not-found error.
fn object<'r>(py: Python<'_>, r: &'r ztensor::Reader, name: &str) -> PyResult<ObjectView<'r>> {
    r.object(name).py_err(py)
}

/// A version as users name it: `zt v2`, `zt v1.2.0`, `zt v0.1`, `mag v300`, `safetensors`,
/// `gguf v3`, `npy v1.0`, `npz`, `pytorch`, `pytorch legacy`.
fn version_name(v: &FileVersion) -> String {
    match v {
        FileVersion::ZTensorV0_1 => "zt v0.1".to_owned(),
        FileVersion::ZTensor(spec) => format!("zt v{spec}"),
        FileVersion::Mag(layout) => format!("mag {layout}"),
        FileVersion::Safetensors => "safetensors".to_owned(),
        FileVersion::ZTensorV2 => "zt v2".to_owned(),
        FileVersion::Gguf {
            version,
            big_endian,
        } => format!(
            "gguf v{version}{}",
            if *big_endian { " big-endian" } else { "" }
        ),
        FileVersion::Npy(major, minor) => format!("npy v{major}.{minor}"),
        FileVersion::Npz => "npz".to_owned(),
        FileVersion::PyTorch => "pytorch".to_owned(),
        FileVersion::PyTorchLegacy => "pytorch legacy".to_owned(),
        FileVersion::TorchScript => "torchscript".to_owned(),
        FileVersion::TorchDcp => "pytorch dcp".to_owned(),
        // Kinds added later read as the library prints them.
        #[allow(unreachable_patterns)]
        other => other.to_string(),
    }
}

fn encoding_name(e: &Encoding) -> String {
    match e {
        Encoding::Raw => "raw".to_owned(),
        other => other.to_string(),
    }
}

fn component_dict<'py>(py: Python<'py>, c: &ComponentInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(intern!(py, "role"), c.role.as_ref())?;
    d.set_item(intern!(py, "dtype"), c.element.dtype.name())?;
    d.set_item(intern!(py, "type"), c.element.type_field())?;
    d.set_item(intern!(py, "encoding"), encoding_name(&c.encoding))?;
    d.set_item(intern!(py, "offset"), c.offset)?;
    d.set_item(intern!(py, "length"), c.length)?;
    d.set_item(intern!(py, "decoded_length"), c.decoded_len)?;
    d.set_item(
        intern!(py, "digest"),
        c.digest.as_ref().map(|g| g.to_string()),
    )?;
    d.set_item(intern!(py, "file"), c.file)?;
    d.set_item(
        intern!(py, "arranged"),
        c.arrangement.as_ref().is_some_and(|a| !a.is_packed()),
    )?;
    d.set_item(
        intern!(py, "byte_order"),
        match c.byte_order {
            ztensor::ByteOrder::Little => "little",
            ztensor::ByteOrder::Big => "big",
        },
    )?;
    Ok(d)
}

/// What `Reader.raw_span` gives: element type name, shape, offset and length in the file.
type RawSpan = (String, Vec<u64>, u64, u64);

fn object_dict<'py>(py: Python<'py>, o: &ObjectInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(intern!(py, "name"), &o.name)?;
    d.set_item(intern!(py, "shape"), o.shape.to_vec())?;
    d.set_item(intern!(py, "format"), o.format.to_string())?;
    let element = o.main_component().map(|c| &c.element);
    d.set_item(intern!(py, "dtype"), element.map(|e| e.name()))?;
    d.set_item(
        intern!(py, "storage_dtype"),
        element.map(|e| e.dtype.name()),
    )?;
    d.set_item(intern!(py, "logical"), element.and_then(|e| e.type_field()))?;
    d.set_item(
        intern!(py, "attributes"),
        attributes_to_py(py, &o.attributes)?,
    )?;
    let comps = PyList::empty(py);
    for c in o.components.iter() {
        comps.append(component_dict(py, c)?)?;
    }
    d.set_item(intern!(py, "components"), comps)?;
    d.set_item(
        intern!(py, "defect"),
        o.defect.as_ref().map(|x| x.to_error().to_string()),
    )?;
    Ok(d)
}

#[pymethods]
impl Reader {
    /// Opens `path` (mapped unless `unmapped`), or a URL (`s3://`, `gs://`, `az://`,
    /// `http(s)://`) with ranged reads. `verify`: every read checks the digests and
    /// checksums covering its bytes, zero-copy reads too. `writable`: the file is mapped
    /// privately, copy-on-write, and arrays over the map are writable (a write copies a page
    /// in this process, never reaches the file, and is seen by later reads of this reader).
    #[new]
    #[pyo3(signature = (path, *, unmapped = false, verify = false, max_memory = None, writable = false))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        unmapped: bool,
        verify: bool,
        max_memory: Option<u64>,
        writable: bool,
    ) -> PyResult<Self> {
        let options = open_options(unmapped, verify, max_memory, writable);
        let r = py
            .detach(|| match path.to_str().filter(|s| ztensor::is_url(s)) {
                Some(url) => options.open_url(url),
                None => options.open(&path),
            })
            .py_err(py)?;
        Ok(Reader {
            inner: RwLock::new(Some(Arc::new(r))),
        })
    }

    /// Opens the bytes of a file held in memory (a copy of them is kept: arrays borrow from
    /// it, read-only). `safetensors.*.load(data)` goes through here.
    #[staticmethod]
    #[pyo3(signature = (data, *, verify = false))]
    fn from_bytes(py: Python<'_>, data: &[u8], verify: bool) -> PyResult<Self> {
        let checks = if verify {
            ztensor::Verify::Always
        } else {
            ztensor::Verify::WhenCopying
        };
        let bytes = data.to_vec();
        let r = py
            .detach(|| ztensor::OpenOptions::new().verify(checks).open_bytes(bytes))
            .py_err(py)?;
        Ok(Reader {
            inner: RwLock::new(Some(Arc::new(r))),
        })
    }

    /// Another handle on the same open file, which stays open when this one is closed (the
    /// slices of a file that is closed keep reading, as safetensors' do).
    fn handle(&self, py: Python<'_>) -> PyResult<Reader> {
        Ok(Reader::of(self.get(py)?))
    }

    /// Lets go of this handle; arrays already read keep the map alive.
    fn close(&self) {
        let mut slot = self.inner.write().unwrap_or_else(|p| p.into_inner());
        *slot = None;
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// The file's kind and version.
    #[getter]
    fn version(&self, py: Python<'_>) -> PyResult<String> {
        Ok(version_name(self.get(py)?.version()))
    }

    /// Object names, sorted.
    fn names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        // Straight from the listing's names: an owned copy of each name first cost a small
        // allocation per object, most of the call on a file of many objects.
        let reader = self.get(py)?;
        PyList::new(py, reader.names().collect::<Vec<&str>>())
    }

    /// Reads the whole file into the page cache on a thread of its own and returns at once
    /// (`Reader::read_whole_in_background`): for tensors read through a map of their own
    /// (torch's). Whether a read was started.
    fn read_whole_in_background(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.get(py)?.read_whole_in_background())
    }

    /// Object names in the order their data lies in the file (`Reader::iter`; objects
    /// without data last, by name): the order that reads the file front to back.
    fn names_in_file_order<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let reader = self.get(py)?;
        PyList::new(py, reader.iter().map(|o| o.name()).collect::<Vec<&str>>())
    }

    /// The objects that hold no numbers to read (strings, compounds, resources): listed, and
    /// passed over by a whole-file load as `verify` and conversions pass over them.
    fn names_skipped<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let reader = self.get(py)?;
        let skipped: Vec<&str> = reader
            .iter()
            .filter(|o| o.skipped().is_some())
            .map(|o| o.name())
            .collect();
        PyList::new(py, skipped)
    }

    /// The readable dense objects whose read decodes (a compressed, byte-swapped or gathered
    /// component), in file order, each with the bytes it stores: what a whole-file load
    /// hands to worker threads, so that decoding runs on every core.
    fn names_decoded<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let reader = self.get(py)?;
        let stored = |o: &ztensor::ObjectInfo| {
            o.components
                .iter()
                .fold(0u64, |n, c| n.saturating_add(c.length))
        };
        let decoded: Vec<(&str, u64)> = reader
            .iter()
            .filter(|o| {
                o.format == Format::Dense
                    && o.defect.is_none()
                    && !o.components.iter().all(stored_as_it_lies)
            })
            .map(|o| (o.name(), stored(&o)))
            .collect();
        PyList::new(py, decoded)
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.get(py)?.len())
    }

    fn __contains__(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        Ok(self.get(py)?.get(name).is_some())
    }

    /// File attributes as Python values.
    fn attributes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        attributes_to_py(py, self.get(py)?.attributes())
    }

    /// Whether the file declares an empty metadata map (`"__metadata__":{}`), which
    /// safetensors' `metadata()` gives as `{}` rather than `None`.
    fn has_empty_metadata(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.get(py)?.has_empty_metadata())
    }

    /// One object's listing as a dict.
    fn info<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let r = self.get(py)?;
        let o = object(py, &r, name)?;
        object_dict(py, o.info())
    }

    /// One object's shape and element type name (`None` for objects without one): what a
    /// slice needs, without the rest of the listing (`info` builds its attributes and
    /// components too, most of the cost of a slice of a small tensor).
    /// The shape comes as a tuple, as a slice keeps it: a list would be copied once more.
    fn shape_dtype<'py>(
        &self,
        py: Python<'py>,
        name: &str,
    ) -> PyResult<(Bound<'py, PyTuple>, Option<String>)> {
        let r = self.get(py)?;
        let o = object(py, &r, name)?;
        let dtype = o.main_component().map(|c| c.element.name().to_owned());
        Ok((PyTuple::new(py, o.shape.iter())?, dtype))
    }

    /// A dense object's bytes as one range of the main file, when they are the tensor as it
    /// lies (a single raw, little-endian component, its elements packed row-major, the object
    /// readable, and no other object holding any of its bytes): its element type name, shape,
    /// offset and length. `None` otherwise, and the caller takes the general path. What a
    /// framework that maps the file itself (torch) needs per tensor, without building the
    /// object's whole listing (`info` costs about 20 us an object in attributes and component
    /// dicts; this about 1).
    ///
    /// `told`: the caller is about to read the tensor through its own map, which our
    /// read-ahead cannot see (`ObjectView::will_read_through_own_map`); a whole-file load
    /// that fills the page cache itself (`read_whole_in_background`) leaves it off.
    #[pyo3(signature = (name, told = false))]
    fn raw_span(&self, py: Python<'_>, name: &str, told: bool) -> PyResult<Option<RawSpan>> {
        let r = self.get(py)?;
        let o = object(py, &r, name)?;
        let [c] = &o.components[..] else {
            return Ok(None);
        };
        // Bytes another object holds too are left to the general path, which copies them:
        // torch's tensors over the private map are writable.
        let as_it_lies = o.format == Format::Dense
            && o.defect.is_none()
            && stored_as_it_lies(c)
            && c.file == 0
            && !r.bytes_shared(c.offset..c.offset.saturating_add(c.length));
        if told && as_it_lies {
            // Read through the caller's map; any other path reads through ours, which tells.
            o.will_read_through_own_map();
        }
        Ok(as_it_lies.then(|| {
            (
                c.element.name().to_owned(),
                o.shape.to_vec(),
                c.offset,
                c.length,
            )
        }))
    }

    /// Every object's listing, in name order.
    fn infos<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let r = self.get(py)?;
        let list = PyList::empty(py);
        for o in r.objects() {
            list.append(object_dict(py, o)?)?;
        }
        Ok(list)
    }

    /// The format of an object (`dense`, `sparse_csr`, ...).
    fn format(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        let r = self.get(py)?;
        Ok(object(py, &r, name)?.format.to_string())
    }

    /// A dense object as an array: pointing into the map when raw, little-endian and aligned;
    /// `None` for objects of other formats. `verify`: check its digests even when zero-copy.
    /// `told=False`: the bytes are read from the disk by other means (a whole set's load), so
    /// a cold file's read-ahead is told nothing (`ObjectView::read_ahead_elsewhere`).
    #[pyo3(signature = (name, verify = false, told = true))]
    fn array<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        verify: bool,
        told: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let r = self.get(py)?;
        let mut o = object(py, &r, name)?;
        if verify {
            o = o.with_checks(ztensor::Verify::Always);
        }
        if !told {
            o = o.read_ahead_elsewhere();
        }
        // An unreadable object says why, whatever its format.
        o.readable().py_err(py)?;
        if o.format != Format::Dense {
            return Ok(None);
        }
        let element = o
            .main_component()
            .map(|c| c.element.clone())
            .ok_or_else(|| argument(py, format!("object {name:?} has no data component")))?;
        let bytes = match element.dtype {
            // Bools are checked to be 0 or 1 (numpy's bool must be); still zero-copy.
            ztensor::DType::Bool => py.detach(|| o.read_bool()).py_err(py).map(|b| match b {
                Cow::Borrowed(s) => Cow::Borrowed(bool_bytes(s)),
                Cow::Owned(v) => Cow::Owned(v.into_iter().map(u8::from).collect()),
            })?,
            _ => py.detach(|| o.bytes()).py_err(py)?,
        };
        let descr = descr_for(py, &element)?;
        // The listing counted the shape's elements in 64 bits, left to right.
        let count = ztensor::formats::element_count(&o.shape).ok();
        if count.is_some_and(|c| u128::from(c) * descr.itemsize() as u128 == bytes.len() as u128) {
            return array_of(py, &r, bytes, descr, &o.shape).map(Some);
        }
        // Packed sub-byte types and logical types we do not know: the storage elements.
        storage_array(py, &r, bytes, &element).map(Some)
    }

    /// A sparse object's checked parts: `values` typed, `indices` and `indptr` (CSR) or
    /// `coords` (COO, `ndim x nnz`) as uint64.
    fn sparse<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let r = self.get(py)?;
        let o = object(py, &r, name)?;
        let s = py.detach(|| o.read_sparse()).py_err(py)?;
        let d = PyDict::new(py);
        let descr = descr_for(py, &s.value_type)?;
        let size = descr.itemsize() as u64;
        let nnz = (s.values.len() as u64).checked_div(size).unwrap_or(0);
        d.set_item("values", array_of(py, &r, s.values, descr, &[nnz])?)?;
        let u64s = |v: Cow<'_, [u64]>, dims: &[u64]| -> PyResult<Bound<'py, PyAny>> {
            let bytes = match v {
                Cow::Borrowed(b) => Cow::Borrowed(bytemuck::cast_slice::<u64, u8>(b)),
                Cow::Owned(v) => Cow::Owned(bytemuck::cast_slice::<u64, u8>(&v).to_vec()),
            };
            array_of(py, &r, bytes, numpy::dtype::<u64>(py), dims)
        };
        if o.format == Format::SparseCsr {
            let (ni, np) = (s.indices.len() as u64, s.indptr.len() as u64);
            d.set_item("indices", u64s(s.indices, &[ni])?)?;
            d.set_item("indptr", u64s(s.indptr, &[np])?)?;
        } else {
            let ndim = o.shape.len() as u64;
            d.set_item("coords", u64s(s.coords, &[ndim, nnz])?)?;
        }
        Ok(d)
    }

    /// One component's elements as a 1-D array of its element type.
    fn component<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        role: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let r = self.get(py)?;
        let o = object(py, &r, name)?;
        let c = o.component(role).py_err(py)?;
        let element = c.element.clone();
        let bytes = py.detach(|| c.bytes()).py_err(py)?;
        let descr = descr_for(py, &element)?;
        let size = descr.itemsize() as u64;
        let count = (bytes.len() as u64).checked_div(size).unwrap_or(0);
        if count * size != bytes.len() as u64 {
            return storage_array(py, &r, bytes, &element);
        }
        array_of(py, &r, bytes, descr, &[count])
    }

    /// Any numeric object as float32 values in its logical shape: dense data converted, FP8
    /// decoded, sparse objects densified, quantized objects dequantized.
    fn read_f32<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let r = self.get(py)?;
        let o = object(py, &r, name)?;
        let values = py.detach(|| o.read_f32()).py_err(py)?;
        f32_array(py, values, &o.shape)
    }

    /// The box `ranges` (one `(start, stop)` per dimension) of a dense object, reading only
    /// its bytes: a run of whole rows points into the map.
    fn slice<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        ranges: Vec<(u64, u64)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let r = self.get(py)?;
        let o = object(py, &r, name)?;
        let element = sliced_element(py, &o, name)?;
        let ranges: Vec<Range<u64>> = ranges.into_iter().map(|(a, b)| a..b).collect();
        let dims: Vec<u64> = ranges
            .iter()
            .map(|r| r.end.saturating_sub(r.start))
            .collect();
        box_array(py, &r, &o, name, &element, &ranges, &dims)
    }

    /// Starts the kernel reading the pages of the box `ranges` of `name`, about to be read
    /// through a view of the whole tensor (`ObjectView::will_need_slice`); `own_map`: a view
    /// of a map the caller made itself, as torch's (`will_need_slice_through_own_map`).
    #[pyo3(signature = (name, ranges, own_map = false))]
    fn will_need_slice(
        &self,
        py: Python<'_>,
        name: &str,
        ranges: Vec<(u64, u64)>,
        own_map: bool,
    ) -> PyResult<()> {
        let r = self.get(py)?;
        let o = object(py, &r, name)?;
        let ranges: Vec<Range<u64>> = ranges.into_iter().map(|(a, b)| a..b).collect();
        if own_map {
            o.will_need_slice_through_own_map(&ranges).py_err(py)
        } else {
            o.will_need_slice(&ranges).py_err(py)
        }
    }

    /// `get_slice(name)[key]` by safetensors 0.8's rules (`slice_rules`), for elements of
    /// `bits` bits: `(array, index)`, where `index` (a tuple, or `None` when the array is the
    /// answer) is what is left to apply to the array: the steps of slices that have one.
    fn slice_by_safetensors_rules<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        key: &Bound<'py, PyAny>,
        bits: u64,
    ) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyTuple>>)> {
        let r = self.get(py)?;
        let o = object(py, &r, name)?;
        let element = sliced_element(py, &o, name)?;
        let cut = crate::slice_rules::cut(py, key, &o.shape, bits)?;
        if let Some(packed) = element.logical.as_ref().and_then(|t| t.packed_bits()) {
            // Past safetensors' rules (FP4 boxes on byte boundaries): the frameworks take
            // no packed bytes for them here (torch's float4_e2m1fn_x2 counts bytes).
            return Err(to_py(
                py,
                &ztensor::Error::unsupported(format!(
                    "{packed}-bit packed elements cannot be sliced through safe_open; read \
                     the whole object"
                ))
                .in_object(name),
            ));
        }
        let ranges: Vec<Range<u64>> = cut.boxed.iter().map(|&(a, b)| a..b).collect();
        if cut.steps.iter().all(|&s| s == 1) {
            // The box is the answer, less the dimensions an int selected: no index to apply.
            let dims: Vec<u64> = ranges
                .iter()
                .zip(&cut.selects)
                .filter(|(_, &selected)| !selected)
                .map(|(r, _)| r.end - r.start)
                .collect();
            let array = box_array(py, &r, &o, name, &element, &ranges, &dims)?;
            return Ok((array, None));
        }
        let dims: Vec<u64> = ranges.iter().map(|r| r.end - r.start).collect();
        let array = box_array(py, &r, &o, name, &element, &ranges, &dims)?;
        let slice_type = py.get_type::<PySlice>();
        let mut index: Vec<Bound<'py, PyAny>> = Vec::with_capacity(dims.len());
        for (&selected, &step) in cut.selects.iter().zip(&cut.steps) {
            index.push(if selected {
                0i64.into_pyobject(py)?.into_any()
            } else if step == 1 {
                PySlice::full(py).into_any()
            } else {
                slice_type.call1((py.None(), py.None(), step))?
            });
        }
        Ok((array, Some(PyTuple::new(py, index)?)))
    }

    /// Checks every digest and data rule: `(digests checked, [errors])`.
    #[pyo3(signature = (progress = None))]
    fn verify<'py>(
        &self,
        py: Python<'py>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(usize, Bound<'py, PyList>)> {
        let r = self.get(py)?;
        let callback = progress.map(crate::progress::Callback::new);
        let report = py.detach(|| verify_told(&r, callback.as_ref(), "verify"));
        verify_outcome(py, callback.as_ref(), Ok((report.checked, report.failures)))
    }

    /// Every tensor is about to be read, in the caller's order (`Reader::expect_to_read_all`):
    /// the file is read front to back ahead of the reads from the first one on.
    fn expect_to_read_all(&self, py: Python<'_>) -> PyResult<()> {
        self.get(py)?.expect_to_read_all();
        Ok(())
    }

    /// The address and length of the file's memory map, or `None` when it is not mapped:
    /// lets tests see that an array points into the map.
    fn map_range(&self, py: Python<'_>) -> PyResult<Option<(usize, usize)>> {
        let r = self.get(py)?;
        Ok(match r.source() {
            ztensor::Source::Mapped(m) => Some((m.bytes().as_ptr() as usize, m.bytes().len())),
            _ => None,
        })
    }
}

/// Whether a component's stored bytes are its elements as a read hands them over: raw,
/// little-endian, packed row-major. Anything else is decoded (inflated, byte-swapped or
/// gathered) by a read.
fn stored_as_it_lies(c: &ztensor::ComponentInfo) -> bool {
    c.encoding == Encoding::Raw
        && c.byte_order == ztensor::ByteOrder::Little
        && c.arrangement.as_ref().is_none_or(|a| a.is_packed())
}

/// The element type of an object to slice: its data component's, or why it has none (it
/// is unreadable, or has no data component).
fn sliced_element(
    py: Python<'_>,
    o: &ObjectView<'_>,
    name: &str,
) -> PyResult<ztensor::ElementType> {
    o.readable().py_err(py)?;
    o.main_component()
        .map(|c| c.element.clone())
        .ok_or_else(|| argument(py, format!("object {name:?} has no data component")))
}

/// The bytes of `ranges` of `o` as an array of `dims` (the box's extents, or fewer when
/// dimensions of one element are dropped): borrowed from the map where the box is one run
/// of aligned bytes.
fn box_array<'py>(
    py: Python<'py>,
    r: &Arc<ztensor::Reader>,
    o: &ObjectView<'_>,
    name: &str,
    element: &ztensor::ElementType,
    ranges: &[Range<u64>],
    dims: &[u64],
) -> PyResult<Bound<'py, PyAny>> {
    if element
        .logical
        .as_ref()
        .and_then(|t| t.packed_bits())
        .is_some()
    {
        // Packed sub-byte elements: the box's packed bytes, 1-D (the caller unpacks them).
        let bytes = py.detach(|| o.slice_bytes(ranges)).py_err(py)?;
        return storage_array(py, r, bytes, element);
    }
    let descr = descr_for(py, element)?;
    let is_bool = element.dtype == ztensor::DType::Bool;
    let bad_bool = || ztensor::Error::invalid("bool element is neither 0 nor 1").in_object(name);
    // A box of several runs is gathered: straight into storage aligned as JAX and TensorFlow
    // need to share it (they copy anything less aligned).
    if let Some(len) = gathered_len(o, ranges, element, descr.itemsize()) {
        return shareable_array(py, descr, dims, len, |out| {
            o.slice_bytes_into(ranges, out)?;
            match is_bool && out.iter().any(|&b| b > 1) {
                true => Err(bad_bool()),
                false => Ok(()),
            }
        });
    }
    let bytes = py.detach(|| o.slice_bytes(ranges)).py_err(py)?;
    if is_bool && bytes.iter().any(|&b| b > 1) {
        return Err(to_py(py, &bad_bool()));
    }
    array_of(py, r, bytes, descr, dims)
}

/// The bytes of the box `ranges` of `o` when a read gathers them from several runs, and they
/// are whole elements of `itemsize` bytes each; `None` for a box of one run (lent from a map
/// as it lies), an empty box, packed sub-byte elements, or a box that is not valid (the
/// general path says why).
fn gathered_len(
    o: &ObjectView<'_>,
    ranges: &[Range<u64>],
    element: &ztensor::ElementType,
    itemsize: usize,
) -> Option<usize> {
    let slab = ztensor::Hyperslab::new(&o.shape, ranges).ok()?;
    let packed = element
        .logical
        .as_ref()
        .and_then(|t| t.packed_bits())
        .is_some();
    if packed || slab.is_single_run() || element.logical_size() != itemsize as u64 {
        return None;
    }
    let len = slab.element_count().checked_mul(element.logical_size())?;
    usize::try_from(len).ok().filter(|&l| l > 0)
}

fn bool_bytes(b: &[bool]) -> &[u8] {
    // SAFETY: bool is one byte, 0 or 1.
    unsafe { std::slice::from_raw_parts(b.as_ptr().cast(), b.len()) }
}

/// Bytes as a 1-D array of their storage type: for packed sub-byte elements (FP4, FP6) and
/// logical types without a numpy dtype.
fn storage_array<'py>(
    py: Python<'py>,
    r: &Arc<ztensor::Reader>,
    bytes: Cow<'_, [u8]>,
    element: &ztensor::ElementType,
) -> PyResult<Bound<'py, PyAny>> {
    let storage = ztensor::ElementType::plain(element.dtype);
    let descr = descr_for(py, &storage)?;
    let size = descr.itemsize().max(1) as u64;
    let count = bytes.len() as u64 / size;
    array_of(py, r, bytes, descr, &[count])
}

/// A verify's outcome as Python sees it: the exception the progress callable raised, if it
/// did; else `outcome`'s error, or `(digests checked, [errors])`.
pub fn verify_outcome<'py>(
    py: Python<'py>,
    callback: Option<&crate::progress::Callback>,
    outcome: ztensor::Result<(usize, Vec<ztensor::Error>)>,
) -> PyResult<(usize, Bound<'py, PyList>)> {
    if let Some(e) = callback.and_then(|c| c.take_error()) {
        return Err(e);
    }
    let (checked, failures) = outcome.py_err(py)?;
    let errors = PyList::empty(py);
    for e in &failures {
        errors.append(to_py(py, e).value(py))?;
    }
    Ok((checked, errors))
}

/// `r.verify()`, telling `callback` (when given) the bytes checked as `what`.
pub fn verify_told(
    r: &ztensor::Reader,
    callback: Option<&crate::progress::Callback>,
    what: &str,
) -> ztensor::VerifyReport {
    let Some(callback) = callback else {
        return r.verify();
    };
    let total = r
        .objects()
        .iter()
        .flat_map(|o| &o.components)
        .fold(0u64, |n, c| n.saturating_add(c.length));
    let done = std::sync::atomic::AtomicU64::new(0);
    callback.tell(what, 0, total, false);
    let report = r.verify_with_progress(&|n| {
        let now = done.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
        callback.tell(what, now, total, false);
    });
    callback.tell(what, total, total, true);
    report
}
