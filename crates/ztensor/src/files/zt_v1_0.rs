//! zTensor v1.0: the manifest PyPI ztensor 1.0.0 and 1.0.1 wrote, which no spec describes.
//!
//! The container is v1.1's without the footer magic (`ZTEN1000`, 64-byte aligned blobs, the
//! manifest, its u64 size last). The manifest is
//! `{"version": "1.0", "generator": …, "attributes": {}, "tensors": {name: tensor}}`; a tensor has
//! `dtype` spelled long (`"float32"`, `"bfloat16"`, `"bool"`…), `shape`, `format` and
//! `components`, whose entries give `offset`, `length` and optionally `encoding` and `digest` but
//! no dtype. As the 1.0 writer and reader do, the tensor's dtype is that of `data` and `values`;
//! the index roles of the sparse formats (`indices`, `indptr`, `coords`) are u64.
//!
//! Each tensor is turned into the v1.1 object it means and validated by [`zt_v1`], as a v1.1
//! object: zstd components without an uncompressed size are allowed there too.
//!
//! The manifest of these files is small (a few hundred bytes per tensor), so it is decoded into a
//! CBOR value tree first, within the same decode limits as every manifest.

use std::borrow::Cow;

use zt_container::{Container, Error, Result};
use zt_formats::DType;
use zt_manifest::{
    decode_value_at, Attributes, ComponentRef, ObjectRef, Shape, SpecVersion, Value,
};

use crate::files::zt_v1;
use crate::listing::{Collected, Limits, Listing};
use crate::model::FileVersion;

/// The roles whose elements are u64 indices whatever the tensor's dtype.
const INDEX_ROLES: [&str; 3] = ["indices", "indptr", "coords"];

/// Lists a zTensor v1.0 file whose container has been parsed.
pub(crate) fn list(container: &Container, limits: &Limits) -> Result<Listing> {
    let at = container.manifest_offset();
    let bytes = container.manifest_bytes()?;
    let root = decode_value_at(&bytes, at, limits.decode_limits())?;
    let Value::Map(root) = root else {
        return Err(Error::invalid("v1.0 manifest is not a map").at(at));
    };
    let version = match root.get("version") {
        Some(Value::Text(v)) => v.as_str(),
        Some(_) => return Err(Error::invalid("v1.0 manifest version is not text").at(at)),
        None => return Err(Error::invalid("v1.0 manifest has no \"version\"").at(at)),
    };
    let parsed = SpecVersion::parse(version).filter(|v| v.major == 1 && v.minor == 0);
    let Some(parsed) = parsed else {
        // A v1.1/v1.2 manifest here lost its footer magic: the file was cut short.
        return Err(Error::invalid(format!(
            "manifest version {version:?} in a file without footer magic: \
             only v1.0 ends with the manifest size (file truncated?)"
        ))
        .at(at));
    };
    let attributes = match root.get("attributes") {
        None => Attributes::new(),
        Some(Value::Map(m)) => m.clone(),
        Some(_) => return Err(Error::invalid("v1.0 manifest attributes are not a map").at(at)),
    };
    let tensors = match root.get("tensors") {
        Some(Value::Map(m)) => m,
        Some(_) => return Err(Error::invalid("v1.0 \"tensors\" is not a map").at(at)),
        None => return Err(Error::invalid("v1.0 manifest has no \"tensors\"").at(at)),
    };
    let mut objects = zt_container::internal::try_with_capacity(tensors.len())?;
    let mut collected = Collected::default();
    for (name, t) in tensors {
        let o = object(name, t).map_err(|e| e.at(at).in_object(name))?;
        zt_v1::build_or_list_unreadable(container, &o, true, &mut objects)?;
        if let Some(built) = objects.last() {
            collected.add(built);
        }
    }
    collected.finish(FileVersion::ZTensor(parsed), attributes, objects, |name| {
        Error::invalid(format!("duplicate key {name:?} in tensors"))
    })
}

/// The v1.1 object a v1.0 tensor means; its ranges and sizes are checked by the caller.
fn object<'a>(name: &'a str, t: &'a Value) -> Result<ObjectRef<'a>> {
    let Value::Map(t) = t else {
        return Err(Error::invalid("tensor is not a map"));
    };
    let text = |key: &str| match t.get(key) {
        Some(Value::Text(s)) => Ok(s.as_str()),
        Some(_) => Err(Error::invalid(format!("tensor {key:?} is not text"))),
        None => Err(Error::invalid(format!("tensor has no {key:?}"))),
    };
    let dtype_name = text("dtype")?;
    let dtype = DType::from_long_name(dtype_name)
        .ok_or_else(|| Error::invalid(format!("unknown v1.0 dtype {dtype_name:?}")))?;
    let format = text("format")?;
    let mut shape = Shape::new();
    match t.get("shape") {
        Some(Value::Array(dims)) => {
            for d in dims {
                shape.push(uint(d, "a dimension")?);
            }
        }
        Some(_) => return Err(Error::invalid("tensor shape is not an array")),
        None => return Err(Error::invalid("tensor has no \"shape\"")),
    }
    let attributes = match t.get("attributes") {
        None => Attributes::new(),
        Some(Value::Map(m)) => m.clone(),
        Some(_) => return Err(Error::invalid("tensor attributes are not a map")),
    };
    let Some(Value::Map(parts)) = t.get("components") else {
        return Err(Error::invalid("tensor has no \"components\" map"));
    };
    let mut components = Vec::with_capacity(parts.len());
    for (role, c) in parts {
        let element = if INDEX_ROLES.contains(&role.as_str()) {
            DType::U64
        } else {
            dtype
        };
        components.push(component(role, element, c).map_err(|e| e.in_component(role))?);
    }
    Ok(ObjectRef {
        name: Cow::Borrowed(name),
        shape,
        format: Cow::Borrowed(format),
        attributes,
        components,
    })
}

fn component<'a>(role: &'a str, element: DType, c: &'a Value) -> Result<ComponentRef<'a>> {
    let Value::Map(c) = c else {
        return Err(Error::invalid("component is not a map"));
    };
    let field = |key: &str| {
        c.get(key)
            .ok_or_else(|| Error::invalid(format!("component has no {key:?}")))
    };
    let optional_text = |key: &str| match c.get(key) {
        None => Ok(None),
        Some(Value::Text(s)) => Ok(Some(Cow::Borrowed(s.as_str()))),
        Some(_) => Err(Error::invalid(format!("component {key:?} is not text"))),
    };
    Ok(ComponentRef {
        role: Cow::Borrowed(role),
        dtype: Cow::Borrowed(element.name()),
        logical_type: None,
        offset: uint(field("offset")?, "offset")?,
        length: uint(field("length")?, "length")?,
        uncompressed_length: None,
        encoding: optional_text("encoding")?,
        digest: optional_text("digest")?,
    })
}

fn uint(v: &Value, what: &str) -> Result<u64> {
    match v {
        Value::Integer(i) => u64::try_from(*i)
            .map_err(|_| Error::invalid(format!("{what} {i} is not an unsigned 64-bit integer"))),
        _ => Err(Error::invalid(format!("{what} is not an integer"))),
    }
}
