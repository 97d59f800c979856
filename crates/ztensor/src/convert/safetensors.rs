//! Writing `.safetensors` files from any reader, streamed: the header from the listing alone,
//! then one object's dense form at a time.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorInfo};
use zt_container::{AtomicFile, Durability, Error, Result};
use zt_formats::{dense_len, ElementType};
use zt_manifest::Value;

use super::dense_element_type;
use crate::files::safetensors::dtype_of;
use crate::reader::Reader;
use crate::view::ObjectView;

/// One tensor of a `.safetensors` file being written, planned from the listing alone.
/// Borrows name and shape from what it was planned from: a million tiny tensors must not
/// cost a million more allocations.
struct Tensor<'a> {
    name: &'a str,
    dtype: Dtype,
    /// Every dimension fits a `usize` (checked when planned).
    shape: &'a [u64],
    /// Bytes of its dense form, from the shape and type.
    len: u64,
    /// Its position in the caller's list, where its bytes come from.
    position: usize,
}

/// Writes every object of `reader` as a `.safetensors` file at `output`, crash-safely. File
/// attributes become `__metadata__` and must be text. Sparse and quantized objects need
/// `densify`; types safetensors lacks are an error naming the object.
///
/// Streams: the header is made from the listing alone (every type and size is known without
/// decoding), then each object is decoded and written in turn and dropped before the next,
/// so memory is bounded by the largest object, not the file. The bytes are those of
/// `safetensors::serialize` for the same tensors (sorted by dtype alignment, largest first,
/// then by name; the header padded with spaces to a multiple of 8), with `__metadata__`
/// sorted by key where the crate writes it in its hash map's order.
pub fn write_safetensors(reader: &Reader, output: impl AsRef<Path>, densify: bool) -> Result<()> {
    write_safetensors_with(reader, output, densify, Durability::Synced)
}

/// As [`write_safetensors`], choosing whether the file is synced to disk before it returns.
pub fn write_safetensors_with(
    reader: &Reader,
    output: impl AsRef<Path>,
    densify: bool,
    durability: Durability,
) -> Result<()> {
    let views: Vec<ObjectView<'_>> = reader.iter().collect();
    write_safetensors_views(
        &views,
        safetensors_metadata(reader),
        output,
        densify,
        durability,
    )
}

/// What a reader's attributes become as `__metadata__`: none when it has none, unless it
/// declared an empty map ([`Reader::has_empty_metadata`]), which is kept.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("m.zt");
/// # let mut w = ztensor::Writer::create(&path)?;
/// # w.add("w", &[1], &[1f32])?;
/// # w.finish()?;
/// let r = ztensor::open(&path)?;
/// assert!(ztensor::convert::safetensors_metadata(&r).is_none());
/// # Ok(())
/// # }
/// ```
pub fn safetensors_metadata(reader: &Reader) -> Option<&zt_manifest::Attributes> {
    let attributes = reader.attributes();
    (!attributes.is_empty() || reader.has_empty_metadata()).then_some(attributes)
}

/// Writes the objects `views` (of one reader or of many, as a sharded set's) as a
/// `.safetensors` file at `output`, crash-safely, with `metadata` as `__metadata__` (text
/// only; `None` writes none and an empty map `{}`, as `safetensors::serialize` does): what
/// [`write_safetensors_with`] does for a whole reader ([`safetensors_metadata`] gives its
/// metadata). Names must be unique.
pub fn write_safetensors_views(
    views: &[ObjectView<'_>],
    metadata: Option<&zt_manifest::Attributes>,
    output: impl AsRef<Path>,
    densify: bool,
    durability: Durability,
) -> Result<()> {
    safetensors_views_staged(views, metadata, output.as_ref(), densify, durability)?.commit()
}

/// As [`write_safetensors_views`], leaving the file written but not in place: the caller
/// commits it (a sharded set commits its files once all are written).
pub(crate) fn safetensors_views_staged(
    views: &[ObjectView<'_>],
    metadata: Option<&zt_manifest::Attributes>,
    output: &Path,
    densify: bool,
    durability: Durability,
) -> Result<AtomicFile> {
    let views = &super::numbers_only(views)[..];
    let mut meta = BTreeMap::new();
    for (k, v) in metadata.into_iter().flatten() {
        match v {
            Value::Text(s) => meta.insert(k.as_str(), s.as_str()),
            other => {
                return Err(Error::argument(format!(
                    "attribute {k:?} is {}; safetensors metadata holds text only (to write \
                     such values as their JSON text: zt convert --attributes-as-json, \
                     ztio.convert(..., attributes_as_json=True))",
                    other.kind_name()
                )))
            }
        };
    }
    let mut tensors = Vec::with_capacity(views.len());
    for (position, view) in views.iter().enumerate() {
        let planned = safetensors_tensor(view, densify, position);
        tensors.push(planned.map_err(|e| e.in_object(view.name()))?);
    }
    refuse_repeated_names(&tensors, "two objects have the same name")?;
    let meta = metadata.is_some().then_some(meta);
    write_planned(output, durability, meta.as_ref(), tensors, |t| {
        let view = views
            .get(t.position)
            .ok_or_else(|| Error::argument("an object vanished").in_object(t.name))?;
        Ok(view.for_copy().dense_form()?.0)
    })
}

/// One tensor held in memory, to write with [`write_safetensors_tensors`].
#[derive(Debug, Clone)]
pub struct SafetensorsTensor<'a> {
    /// Name.
    pub name: &'a str,
    /// Element type (one safetensors has).
    pub element: ElementType,
    /// Shape.
    pub shape: Vec<u64>,
    /// Little-endian element bytes, row-major.
    pub bytes: &'a [u8],
}

/// Writes tensors held in memory as a `.safetensors` file at `output`, crash-safely, with
/// `metadata` as `__metadata__`: the bytes `safetensors::serialize` makes for the same
/// tensors (and metadata sorted by key). As there, `None` writes no `__metadata__` and
/// `Some` of an empty map writes `"__metadata__":{}` (which safetensors' `metadata()` reads
/// back as `{}`, not `None`).
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// use ztensor::convert::{write_safetensors_tensors, SafetensorsTensor};
/// let path = dir.path().join("m.safetensors");
/// let data = [1.0f32, 2.0];
/// let t = SafetensorsTensor {
///     name: "w",
///     element: ztensor::ElementType::plain(ztensor::DType::F32),
///     shape: vec![2],
///     bytes: bytemuck::cast_slice(&data),
/// };
/// write_safetensors_tensors(&[t], None, &path, ztensor::Durability::Unsynced)?;
/// assert_eq!(&ztensor::open(&path)?.read::<f32>("w")?[..], &[1.0, 2.0]);
/// # Ok(())
/// # }
/// ```
pub fn write_safetensors_tensors(
    tensors: &[SafetensorsTensor<'_>],
    metadata: Option<&BTreeMap<String, String>>,
    output: impl AsRef<Path>,
    durability: Durability,
) -> Result<()> {
    let output = output.as_ref();
    write_tensors_to(tensors, metadata, |meta, planned, bytes_of| {
        write_planned(output, durability, meta, planned, bytes_of)?.commit()
    })
}

/// As [`write_safetensors_tensors`], into memory: the bytes of a `.safetensors` file, as
/// `safetensors.serialize` (Python: `save`) gives them.
///
/// ```
/// use ztensor::convert::{safetensors_bytes, SafetensorsTensor};
/// let w = [1.0f32, 2.0];
/// let t = SafetensorsTensor {
///     name: "w",
///     element: ztensor::ElementType::plain(ztensor::DType::F32),
///     shape: vec![2],
///     bytes: bytemuck::cast_slice(&w),
/// };
/// let bytes = safetensors_bytes(&[t], None)?;
/// let r = ztensor::OpenOptions::new().open_bytes(bytes)?;
/// assert_eq!(&r.read::<f32>("w")?[..], &w);
/// # Ok::<(), ztensor::Error>(())
/// ```
pub fn safetensors_bytes(
    tensors: &[SafetensorsTensor<'_>],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write_tensors_to(tensors, metadata, |meta, planned, bytes_of| {
        let data: u64 = planned.iter().map(|t| t.len).sum();
        out.try_reserve(usize::try_from(data).unwrap_or(usize::MAX))
            .map_err(|_| Error::out_of_memory(format!("cannot allocate {data} bytes")))?;
        write_body(&mut out, meta, planned, bytes_of, |e| {
            Error::io(e, "cannot write safetensors")
        })
    })?;
    Ok(out)
}

/// Checks and plans `tensors`, then hands them to `write` with their bytes.
fn write_tensors_to<'t>(
    tensors: &'t [SafetensorsTensor<'t>],
    metadata: Option<&BTreeMap<String, String>>,
    write: impl FnOnce(
        Option<&BTreeMap<&str, &str>>,
        Vec<Tensor<'t>>,
        &mut dyn FnMut(&Tensor<'t>) -> Result<std::borrow::Cow<'t, [u8]>>,
    ) -> Result<()>,
) -> Result<()> {
    let meta: Option<BTreeMap<&str, &str>> =
        metadata.map(|m| m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect());
    let mut planned = Vec::with_capacity(tensors.len());
    for (position, t) in tensors.iter().enumerate() {
        let p = plan(t.name, &t.element, &t.shape, position).map_err(|e| e.in_object(t.name))?;
        if p.len != t.bytes.len() as u64 {
            return Err(Error::argument(format!(
                "has {} bytes, but its shape and type take {}",
                t.bytes.len(),
                p.len
            ))
            .in_object(t.name));
        }
        planned.push(p);
    }
    refuse_repeated_names(&planned, "two tensors have the same name")?;
    let mut bytes_of = |t: &Tensor<'t>| {
        Ok(std::borrow::Cow::Borrowed(
            tensors.get(t.position).map_or(&[][..], |held| held.bytes),
        ))
    };
    write(meta.as_ref(), planned, &mut bytes_of)
}

/// Fails with `message`, naming one, when two of `tensors` have the same name (a sort of
/// the names: no table of a million entries kept while the file is written).
fn refuse_repeated_names(tensors: &[Tensor<'_>], message: &str) -> Result<()> {
    let mut names: Vec<&str> = tensors.iter().map(|t| t.name).collect();
    names.sort_unstable();
    match names.windows(2).find(|pair| pair[0] == pair[1]) {
        Some(pair) => Err(Error::argument(message).in_object(pair[0])),
        None => Ok(()),
    }
}

/// Writes planned tensors: sorted as `safetensors::serialize` sorts them, the header, then
/// each tensor's bytes in turn.
fn write_planned<'a, 'b>(
    output: &Path,
    durability: Durability,
    meta: Option<&BTreeMap<&str, &str>>,
    tensors: Vec<Tensor<'a>>,
    bytes_of: impl FnMut(&Tensor<'a>) -> Result<std::borrow::Cow<'b, [u8]>>,
) -> Result<AtomicFile> {
    let mut file = AtomicFile::create_with(output, durability)?;
    let written = |e: std::io::Error| Error::io(e, "cannot write safetensors").in_file(output);
    write_body(&mut file, meta, tensors, bytes_of, written)?;
    // Staged files of a set wait for the last one: none keeps its buffer meanwhile.
    file.release_buffer()
}

/// The header and the tensors, in the order of `safetensors::serialize`, into `out`.
fn write_body<'a, 'b, W: Write>(
    out: &mut W,
    meta: Option<&BTreeMap<&str, &str>>,
    mut tensors: Vec<Tensor<'a>>,
    mut bytes_of: impl FnMut(&Tensor<'a>) -> Result<std::borrow::Cow<'b, [u8]>>,
    written: impl Fn(std::io::Error) -> Error,
) -> Result<()> {
    // The order of safetensors::serialize: dtype alignment descending, then name.
    tensors.sort_by(|a, b| b.dtype.cmp(&a.dtype).then(a.name.cmp(b.name)));
    let header = safetensors_header(meta, &tensors)?;
    out.write_all(&(header.len() as u64).to_le_bytes())
        .map_err(&written)?;
    out.write_all(&header).map_err(&written)?;
    for t in &tensors {
        let bytes = bytes_of(t)?;
        if bytes.len() as u64 != t.len {
            return Err(Error::invalid(format!(
                "decodes to {} bytes, but its shape and type take {}",
                bytes.len(),
                t.len
            ))
            .in_object(t.name));
        }
        out.write_all(&bytes).map_err(&written)?;
    }
    Ok(())
}

/// What an object becomes in a `.safetensors` file: the type and size of its dense form,
/// from its listing.
fn safetensors_tensor<'r>(
    obj: &ObjectView<'r>,
    densify: bool,
    position: usize,
) -> Result<Tensor<'r>> {
    if let Some(d) = &obj.defect {
        return Err(d.to_error());
    }
    let element = dense_element_type(obj, densify, ".safetensors")?;
    plan(obj.name(), &element, obj.shape(), position)
}

/// The safetensors type and size of a tensor of `element` and `shape`.
fn plan<'a>(
    name: &'a str,
    element: &ElementType,
    shape: &'a [u64],
    position: usize,
) -> Result<Tensor<'a>> {
    let dtype = dtype_of(element)
        .ok_or_else(|| Error::argument(format!("safetensors has no {} type", element.name())))?;
    let len = dense_len(shape, element)?;
    let count = zt_formats::element_count(shape)?;
    // safetensors holds whole bytes only: an odd count of 4-bit elements does not fit.
    let bits = count.checked_mul(dtype.bitsize() as u64);
    if bits.is_none_or(|b| b % 8 != 0) {
        return Err(Error::argument(format!(
            "{count} elements of {} are not a whole number of bytes, which safetensors requires",
            element.name()
        )));
    }
    if shape.iter().any(|&d| usize::try_from(d).is_err()) {
        return Err(Error::limit("dimension exceeds usize"));
    }
    Ok(Tensor {
        name,
        dtype,
        shape,
        len,
        position,
    })
}

/// The JSON header `safetensors::serialize` writes for these tensors, in this order, padded
/// with spaces to a multiple of 8 bytes; `__metadata__` when `meta` is given, empty or not.
fn safetensors_header(
    meta: Option<&BTreeMap<&str, &str>>,
    tensors: &[Tensor<'_>],
) -> Result<Vec<u8>> {
    let json = |e: serde_json::Error| Error::argument(format!("cannot write the header: {e}"));
    let mut h = b"{".to_vec();
    if let Some(meta) = meta {
        h.extend(b"\"__metadata__\":");
        serde_json::to_writer(&mut h, meta).map_err(json)?;
    }
    let mut offset = 0usize;
    for (i, t) in tensors.iter().enumerate() {
        if i > 0 || meta.is_some() {
            h.push(b',');
        }
        let end = usize::try_from(t.len)
            .ok()
            .and_then(|n| offset.checked_add(n))
            .ok_or_else(|| Error::limit("tensors exceed usize").in_object(t.name))?;
        serde_json::to_writer(&mut h, t.name).map_err(json)?;
        h.push(b':');
        let info = TensorInfo {
            dtype: t.dtype,
            // Checked to fit when planned.
            shape: t.shape.iter().map(|&d| d as usize).collect(),
            data_offsets: (offset, end),
        };
        serde_json::to_writer(&mut h, &info).map_err(json)?;
        offset = end;
    }
    h.push(b'}');
    h.resize(h.len().next_multiple_of(8), b' ');
    if h.len() as u64 > SAFETENSORS_MAX_HEADER_LEN {
        return Err(Error::limit(format!(
            "a safetensors header of {} bytes exceeds the cap of {SAFETENSORS_MAX_HEADER_LEN}",
            h.len()
        )));
    }
    Ok(h)
}

/// The largest header the safetensors crate writes or reads.
const SAFETENSORS_MAX_HEADER_LEN: u64 = 100_000_000;
