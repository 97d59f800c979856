//! Attribute values between the library's [`Value`] and Python objects.
//!
//! Reading: integers, floats, text, bytes, booleans, null, arrays (lists) and maps (dicts)
//! are the plain Python types; a CBOR tag becomes `ztio.Tagged(tag, value)`. Writing takes the
//! same types back (tuples as lists, numpy scalars as the numbers they hold), refusing anything
//! else and nesting deeper than [`MAX_DEPTH`].

use std::collections::BTreeMap;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use ztensor::{Attributes, Value};

use crate::errors::argument;

/// Deepest nesting of lists and dicts accepted from Python (the manifest readers cap what
/// files give us).
pub const MAX_DEPTH: usize = 64;

static TAGGED: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static NUMPY_GENERIC: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static NUMPY_ARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// A value as a Python object.
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Integer(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(f) => PyFloat::new(py, *f).into_any(),
        Value::Text(s) => PyString::new(py, s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Null => py.None().into_bound(py),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Map(map) => attributes_to_py(py, map)?.into_any(),
        Value::Tag(tag, inner) => {
            let class = TAGGED.import(py, "ztio.values", "Tagged")?;
            class.call1((*tag, to_py(py, inner)?))?
        }
    })
}

/// Attributes as a dict, keys in their sorted order.
pub fn attributes_to_py<'py>(py: Python<'py>, map: &Attributes) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (k, v) in map {
        dict.set_item(k, to_py(py, v)?)?;
    }
    Ok(dict)
}

/// A Python object as a value.
pub fn from_py(ob: &Bound<'_, PyAny>) -> PyResult<Value> {
    from_py_at(ob, 0)
}

/// A dict with text keys as attributes.
pub fn attributes_from_py(ob: &Bound<'_, PyAny>) -> PyResult<Attributes> {
    match from_py(ob)? {
        Value::Map(m) => Ok(m),
        _ => Err(argument(
            ob.py(),
            "attributes must be a dict with text keys",
        )),
    }
}

fn from_py_at(ob: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    let py = ob.py();
    if depth > MAX_DEPTH {
        return Err(argument(
            py,
            format!("attribute value nests deeper than {MAX_DEPTH} levels"),
        ));
    }
    // bool before int: Python's bool is an int.
    if let Ok(b) = ob.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if ob.is_instance_of::<PyInt>() {
        let i: i128 = ob.extract().map_err(|_| {
            argument(
                py,
                "an integer attribute must fit CBOR's range (-2^64..2^64)",
            )
        })?;
        if !(ztensor::manifest::CBOR_INT_MIN..=ztensor::manifest::CBOR_INT_MAX).contains(&i) {
            return Err(argument(
                py,
                "an integer attribute must fit CBOR's range (-2^64..2^64)",
            ));
        }
        return Ok(Value::Integer(i));
    }
    if let Ok(f) = ob.cast::<PyFloat>() {
        return Ok(Value::Float(f.value()));
    }
    if let Ok(s) = ob.cast::<PyString>() {
        return Ok(Value::Text(s.to_str()?.to_owned()));
    }
    if let Ok(b) = ob.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if ob.is_none() {
        return Ok(Value::Null);
    }
    // Before tuples: Tagged is a named tuple.
    let tagged = TAGGED.import(py, "ztio.values", "Tagged")?;
    if ob.is_instance(tagged)? {
        let tag: u64 = ob.getattr("tag")?.extract()?;
        let inner = from_py_at(&ob.getattr("value")?, depth + 1)?;
        return Ok(Value::Tag(tag, Box::new(inner)));
    }
    if ob.is_instance_of::<PyList>() || ob.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for item in ob.try_iter()? {
            items.push(from_py_at(&item?, depth + 1)?);
        }
        return Ok(Value::Array(items));
    }
    if let Ok(d) = ob.cast::<PyDict>() {
        let mut map = BTreeMap::new();
        for (k, v) in d.iter() {
            let key = k
                .cast::<PyString>()
                .map_err(|_| argument(py, "attribute keys must be text"))?
                .to_str()?
                .to_owned();
            map.insert(key, from_py_at(&v, depth + 1)?);
        }
        return Ok(Value::Map(map));
    }
    // A numpy scalar (`np.float32(0.1)`, `np.int64(7)`, `np.bool_(True)`: what a computed
    // learning rate or step count usually is) as the Python number it holds.
    let numpy_scalar = NUMPY_GENERIC.import(py, "numpy", "generic")?;
    if ob.is_instance(numpy_scalar)? {
        return from_py_at(&ob.call_method0("item")?, depth + 1);
    }
    let numpy_array = NUMPY_ARRAY.import(py, "numpy", "ndarray")?;
    let hint = if ob.is_instance(numpy_array)? {
        "; a numpy array as a list: array.tolist()"
    } else {
        ""
    };
    Err(argument(
        py,
        format!(
            "cannot store a {} as an attribute (use str, int, float, bool, bytes, None, list or \
             dict, or a numpy scalar){hint}",
            ob.get_type().fully_qualified_name()?
        ),
    ))
}
