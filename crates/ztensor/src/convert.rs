//! Converting between kinds: any readable file to zTensor v1.2 ([`upgrade`], [`copy_into`]),
//! and to `.mag` ([`write_mag`]) and `.safetensors` ([`write_safetensors`]).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorInfo};
use zt_container::{AtomicFile, Durability, Error, Result};
use zt_formats::{dense_len, DType, DigestAlgorithm, ElementType, Encoding, Format};
use zt_manifest::Value;

use crate::decode::ReadOptions;
use crate::files::safetensors::dtype_of;
use crate::model::{ByteOrder, ObjectInfo};
use crate::reader::Reader;
use crate::view::ObjectView;
use crate::writer::{ComponentData, EncodedComponent, ObjectData, Sink, WriteOptions, Writer};

/// What to do with compression or digests when converting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Keep<T> {
    /// As the source has it (for compression: zstd at [`DEFAULT_ZSTD_LEVEL`]).
    #[default]
    Source,
    /// Never.
    Never,
    /// Always this.
    Always(T),
}

/// zstd level used when a converted component keeps its compression.
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// Options of [`upgrade`] and [`copy_into`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConvertOptions {
    /// Compression of every component (a zstd level when `Always`).
    pub compression: Keep<i32>,
    /// Digest of every component.
    pub digest: Keep<DigestAlgorithm>,
    /// Verify every digest of the source while reading it.
    pub verify: bool,
    /// Leave out objects the source lists but cannot decode (legacy entries with a defect)
    /// instead of failing; they are named in the [`ConvertReport`].
    pub skip_unreadable: bool,
    /// Whether the output is synced to disk before [`upgrade`] returns (default: yes).
    pub durability: Durability,
}

/// What a conversion did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConvertReport {
    /// Objects written.
    pub written: usize,
    /// Objects left out, with the reason (only with [`ConvertOptions::skip_unreadable`]).
    pub skipped: Vec<(String, String)>,
}

/// Upgrades (or converts) `input`, any file [`crate::open`] reads, to a zTensor v1.2 file at
/// `output`, crash-safely. Every object, value, shape and attribute is kept; v0.1 sparse entries
/// become v1.2 `sparse_csr`/`sparse_coo` objects with u64 indices; big-endian data becomes
/// little-endian; digests are recomputed over the new stored bytes.
///
/// An object the source lists but cannot decode makes the upgrade fail, naming it, unless
/// [`ConvertOptions::skip_unreadable`] is set. The output appears only when everything succeeded.
pub fn upgrade(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
    options: ConvertOptions,
) -> Result<ConvertReport> {
    let input = input.as_ref();
    let reader = crate::open(input)?;
    let mut writer = Writer::create_with(output, options.durability)?;
    let report = copy_into(&reader, &mut writer, options).map_err(|e| e.in_file(input))?;
    writer.finish()?;
    Ok(report)
}

/// Copies every object and the file attributes of `reader` into `writer`.
pub fn copy_into<W: Sink>(
    reader: &Reader,
    writer: &mut Writer<W>,
    options: ConvertOptions,
) -> Result<ConvertReport> {
    writer.set_attributes(reader.attributes().clone());
    let mut report = ConvertReport::default();
    for obj in reader {
        if let (Some(d), true) = (&obj.defect, options.skip_unreadable) {
            report.skipped.push((obj.name.clone(), d.message.clone()));
            continue;
        }
        copy_object(obj, writer, options)?;
        report.written += 1;
    }
    Ok(report)
}

/// Copies one object (by its own name).
pub fn copy_object<W: Sink>(
    obj: ObjectView<'_>,
    writer: &mut Writer<W>,
    options: ConvertOptions,
) -> Result<()> {
    let name = obj.name.as_str();
    let read = ReadOptions {
        verify: options.verify,
    };
    let source_zstd = obj.components.iter().any(|c| c.encoding == Encoding::Zstd);
    let source_digest = obj
        .components
        .iter()
        .find_map(|c| c.digest.map(|d| d.algorithm()));
    let write = WriteOptions {
        compression: match options.compression {
            Keep::Source => source_zstd.then_some(DEFAULT_ZSTD_LEVEL),
            Keep::Never => None,
            Keep::Always(l) => Some(l),
        },
        digest: match options.digest {
            Keep::Source => source_digest,
            Keep::Never => None,
            Keep::Always(d) => Some(d),
        },
    };
    let data = if obj.legacy_packing.is_some() {
        if read.verify {
            obj.verify()?;
        }
        legacy_sparse_object(obj)?
    } else {
        let mut components = Vec::with_capacity(obj.components.len());
        for c in obj.components() {
            components.push(ComponentData {
                role: c.role.to_string(),
                element: c.element.clone(),
                bytes: c.bytes_with(read)?,
            });
        }
        ObjectData {
            shape: obj.shape.to_vec(),
            format: obj.format.clone(),
            attributes: obj.attributes.clone(),
            components,
        }
    };
    writer.add_object_with(name, data, write).map_err(|e| {
        // What the writer refuses here came from the source file, not from the caller.
        if e.kind() == zt_container::ErrorKind::InvalidArgument {
            e.with_kind(zt_container::ErrorKind::InvalidFile)
        } else {
            e
        }
    })
}

/// Copies one object without decoding it when its stored bytes are valid v1.2 as they are
/// (little-endian, raw or zstd with a known size); otherwise decodes and re-encodes it as
/// [`copy_object`] does. Returns whether the bytes were copied as stored.
pub fn copy_stored<W: Sink>(obj: ObjectView<'_>, writer: &mut Writer<W>) -> Result<bool> {
    let as_is = obj.defect.is_none()
        && obj.legacy_packing.is_none()
        && obj.components.iter().all(|c| {
            c.byte_order == ByteOrder::Little
                && (c.encoding == Encoding::Raw
                    || (c.encoding == Encoding::Zstd && c.decoded_len.is_some()))
        });
    if !as_is {
        copy_object(obj, writer, ConvertOptions::default())?;
        return Ok(false);
    }
    let mut comps = Vec::with_capacity(obj.components.len());
    for c in obj.components() {
        comps.push(EncodedComponent {
            role: c.role.to_string(),
            element: c.element.clone(),
            stored: c.stored_bytes()?,
            encoding: c.encoding.clone(),
            uncompressed_length: c.decoded_len,
            digest: c.digest,
        });
    }
    writer.add_encoded_object(
        &obj.name,
        obj.shape.to_vec(),
        obj.format.clone(),
        obj.attributes.clone(),
        comps,
    )?;
    Ok(true)
}

/// A v0.1 one-blob sparse entry as v1.2 components (u64 indices, as the spec requires).
fn legacy_sparse_object(obj: ObjectView<'_>) -> Result<ObjectData<'static>> {
    let p = obj
        .legacy_packing
        .ok_or_else(|| Error::invalid("not a legacy sparse entry"))?;
    let name = &obj.name;
    let values_type = ElementType::plain(p.values);
    // Index arrays are written as u64, as the spec requires.
    let index = |role: &str, v: &[u64]| ComponentData {
        role: role.into(),
        element: ElementType::plain(DType::U64),
        bytes: Cow::Owned(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
    };
    let values = |bytes: Vec<u8>| ComponentData {
        role: "values".into(),
        element: values_type.clone(),
        bytes: Cow::Owned(bytes),
    };
    // The value type is only known at run time; copy through the byte-level parts.
    let components = match obj.format {
        Format::SparseCsr => {
            let (v, indices, indptr) = obj.legacy_csr_bytes()?;
            vec![
                values(v),
                index("indices", &indices),
                index("indptr", &indptr),
            ]
        }
        Format::SparseCoo => {
            let (v, coords) = obj.legacy_coo_bytes()?;
            vec![values(v), index("coords", &coords)]
        }
        _ => return Err(Error::invalid("legacy packing on a non-sparse object").in_object(name)),
    };
    Ok(ObjectData {
        shape: obj.shape.to_vec(),
        format: obj.format.clone(),
        attributes: obj.attributes.clone(),
        components,
    })
}

/// Options of [`write_mag`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MagOptions {
    /// Layout to write.
    pub version: zt_mag::WriteVersion,
    /// Write sparse objects dense and quantized objects dequantized to f32, instead of failing.
    pub densify: bool,
}

/// Writes every object of `reader` to a `.mag` file at `output`, crash-safely, with the file
/// attributes as metadata. Objects the layout cannot hold (sparse or quantized without
/// `densify`, types or shapes outside the layout) are an error naming the object; nothing is
/// written then.
pub fn write_mag(reader: &Reader, output: impl AsRef<Path>, options: MagOptions) -> Result<()> {
    let output = output.as_ref();
    let mut specs = Vec::with_capacity(reader.objects().len());
    for obj in reader.objects() {
        specs.push(mag_spec(obj, options.densify).map_err(|e| e.in_object(&obj.name))?);
    }
    let sink = zt_container::AtomicFile::create(output)?;
    let meta = reader.attributes().iter().map(|(k, v)| (k.as_str(), v));
    let mut w = zt_mag::MagWriter::new(sink, options.version, meta, &specs)
        .map_err(|e| e.in_file(output))?;
    for (info, spec) in reader.objects().iter().zip(&specs) {
        let obj = reader.object(&info.name)?;
        // Dense data as stored, sparse densified, quantized dequantized: what mag_spec chose.
        let (bytes, _) = obj.dense_form()?;
        debug_assert_eq!(spec.name, obj.name);
        w.write_tensor(&bytes)?;
    }
    w.finish()?.commit()
}

/// The `.mag` tensor an object becomes.
fn mag_spec(obj: &ObjectInfo, densify: bool) -> Result<zt_mag::TensorSpec> {
    if let Some(d) = &obj.defect {
        return Err(d.to_error());
    }
    let element = match obj.format {
        Format::Dense => obj
            .element_type()
            .cloned()
            .ok_or_else(|| Error::invalid("no data component"))?,
        Format::SparseCsr | Format::SparseCoo | Format::QuantizedGroup if !densify => {
            return Err(Error::argument(format!(
                "a {} object cannot be stored in .mag as it is (use densify)",
                obj.format
            )))
        }
        Format::QuantizedGroup => ElementType::plain(DType::F32),
        Format::SparseCsr | Format::SparseCoo => match obj.legacy_packing {
            Some(p) => ElementType::plain(p.values),
            None => obj
                .component("values")
                .map(|c| c.element.clone())
                .ok_or_else(|| Error::invalid("no values component"))?,
        },
        ref f => {
            return Err(Error::argument(format!(
                "a {f} object cannot be stored in .mag"
            )))
        }
    };
    Ok(zt_mag::TensorSpec {
        name: obj.name.clone(),
        element,
        shape: obj.shape.to_vec(),
    })
}

/// One tensor of a `.safetensors` file being written, planned from the listing alone.
struct Tensor<'a> {
    name: &'a str,
    dtype: Dtype,
    shape: Vec<usize>,
    /// Bytes of its dense form, from the shape and type.
    len: u64,
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
    let output = output.as_ref();
    let mut meta = BTreeMap::new();
    for (k, v) in reader.attributes() {
        match v {
            Value::Text(s) => meta.insert(k.as_str(), s.as_str()),
            other => {
                return Err(Error::argument(format!(
                    "attribute {k:?} is {}; safetensors metadata holds text only",
                    other.kind_name()
                )))
            }
        };
    }
    let mut tensors = Vec::with_capacity(reader.objects().len());
    for obj in reader.objects() {
        tensors.push(safetensors_tensor(obj, densify).map_err(|e| e.in_object(&obj.name))?);
    }
    // The order of safetensors::serialize: dtype alignment descending, then name.
    tensors.sort_by(|a, b| b.dtype.cmp(&a.dtype).then(a.name.cmp(b.name)));
    let header = safetensors_header(&meta, &tensors)?;

    let mut file = AtomicFile::create(output)?;
    let written = |e: std::io::Error| Error::io(e, "cannot write safetensors").in_file(output);
    file.write_all(&(header.len() as u64).to_le_bytes())
        .map_err(written)?;
    file.write_all(&header).map_err(written)?;
    for t in &tensors {
        let obj = reader.object(t.name)?;
        let (bytes, _) = obj.dense_form()?;
        if bytes.len() as u64 != t.len {
            return Err(Error::invalid(format!(
                "decodes to {} bytes, but its shape and type take {}",
                bytes.len(),
                t.len
            ))
            .in_object(t.name));
        }
        file.write_all(&bytes).map_err(written)?;
    }
    file.commit()
}

/// What an object becomes in a `.safetensors` file: the type and size of its dense form,
/// from its listing.
fn safetensors_tensor(obj: &ObjectInfo, densify: bool) -> Result<Tensor<'_>> {
    if let Some(d) = &obj.defect {
        return Err(d.to_error());
    }
    // The element type of what dense_form gives, as mag_spec tells it for .mag.
    let element = match obj.format {
        Format::Dense => obj
            .element_type()
            .cloned()
            .ok_or_else(|| Error::invalid("no data component"))?,
        Format::QuantizedGroup if densify => ElementType::plain(DType::F32),
        Format::SparseCsr | Format::SparseCoo if densify => match obj.legacy_packing {
            Some(p) => ElementType::plain(p.values),
            None => obj
                .component("values")
                .map(|c| c.element.clone())
                .ok_or_else(|| Error::invalid("no values component"))?,
        },
        ref f => {
            return Err(Error::argument(format!(
                "a {f} object cannot be stored in .safetensors as it is (use densify)"
            )))
        }
    };
    let dtype = dtype_of(&element)
        .ok_or_else(|| Error::argument(format!("safetensors has no {} type", element.name())))?;
    let len = dense_len(&obj.shape, &element)?;
    // safetensors holds whole bytes only: an odd count of 4-bit elements does not fit.
    let bits = obj.element_count().checked_mul(dtype.bitsize() as u64);
    if bits.is_none_or(|b| b % 8 != 0) {
        return Err(Error::argument(format!(
            "{} elements of {} are not a whole number of bytes, which safetensors requires",
            obj.element_count(),
            element.name()
        )));
    }
    let shape = obj
        .shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| Error::limit("dimension exceeds usize")))
        .collect::<Result<_>>()?;
    Ok(Tensor {
        name: &obj.name,
        dtype,
        shape,
        len,
    })
}

/// The JSON header `safetensors::serialize` writes for these tensors, in this order, padded
/// with spaces to a multiple of 8 bytes.
fn safetensors_header(meta: &BTreeMap<&str, &str>, tensors: &[Tensor<'_>]) -> Result<Vec<u8>> {
    let json = |e: serde_json::Error| Error::argument(format!("cannot write the header: {e}"));
    let mut h = b"{".to_vec();
    if !meta.is_empty() {
        h.extend(b"\"__metadata__\":");
        serde_json::to_writer(&mut h, meta).map_err(json)?;
    }
    let mut offset = 0usize;
    for (i, t) in tensors.iter().enumerate() {
        if i > 0 || !meta.is_empty() {
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
            shape: t.shape.clone(),
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
