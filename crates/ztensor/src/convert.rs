//! Converting any readable file to zTensor v1.2: upgrades of old zTensor files, and `.mag`.

use std::borrow::Cow;
use std::path::Path;

use zt_container::{Error, Result};
use zt_formats::{DType, DigestAlgorithm, ElementType, Encoding, Format};

use crate::model::ObjectInfo;
use crate::reader::{ReadOptions, Reader};
use crate::writer::{ComponentData, ObjectData, Sink, WriteOptions, Writer};

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
    let mut writer = Writer::create(output)?;
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
    for obj in reader.objects() {
        if let (Some(d), true) = (&obj.defect, options.skip_unreadable) {
            report.skipped.push((obj.name.clone(), d.message.clone()));
            continue;
        }
        copy_object(reader, obj, writer, options)?;
        report.written += 1;
    }
    Ok(report)
}

/// Copies one object (by its own name).
pub fn copy_object<W: Sink>(
    reader: &Reader,
    obj: &ObjectInfo,
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
            reader.verify_object(name)?;
        }
        legacy_sparse_object(reader, obj)?
    } else {
        let mut components = Vec::with_capacity(obj.components.len());
        for c in &obj.components {
            components.push(ComponentData {
                role: c.role.to_string(),
                element: c.element.clone(),
                bytes: reader.component_bytes(name, &c.role, read)?,
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
        if e.kind() == zt_container::ErrorKind::InvalidArgument {
            Error::invalid(e.message()).in_object(name)
        } else {
            e
        }
    })
}

/// Copies one object without decoding it when its stored bytes are valid v1.2 as they are
/// (little-endian, raw or zstd with a known size); otherwise decodes and re-encodes it as
/// [`copy_object`] does. Returns whether the bytes were copied as stored.
pub fn copy_stored<W: Sink>(
    reader: &Reader,
    obj: &ObjectInfo,
    writer: &mut Writer<W>,
) -> Result<bool> {
    let as_is = obj.defect.is_none()
        && obj.legacy_packing.is_none()
        && obj.components.iter().all(|c| {
            c.byte_order == crate::ByteOrder::Little
                && (c.encoding == Encoding::Raw
                    || (c.encoding == Encoding::Zstd && c.decoded_len.is_some()))
        });
    if !as_is {
        copy_object(reader, obj, writer, ConvertOptions::default())?;
        return Ok(false);
    }
    let mut comps = Vec::with_capacity(obj.components.len());
    for c in &obj.components {
        comps.push(crate::writer::EncodedComponent {
            role: c.role.to_string(),
            element: c.element.clone(),
            stored: reader.stored_bytes(&obj.name, &c.role)?,
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
fn legacy_sparse_object<'r>(reader: &'r Reader, obj: &ObjectInfo) -> Result<ObjectData<'r>> {
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
            let (v, indices, indptr) = reader.legacy_csr_bytes(obj)?;
            vec![
                values(v),
                index("indices", &indices),
                index("indptr", &indptr),
            ]
        }
        Format::SparseCoo => {
            let (v, coords) = reader.legacy_coo_bytes(obj)?;
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
    for (obj, spec) in reader.objects().iter().zip(&specs) {
        let bytes: Cow<'_, [u8]> = match obj.format {
            Format::Dense => reader.component_bytes(&obj.name, "data", ReadOptions::default())?,
            Format::QuantizedGroup => Cow::Owned(
                reader
                    .read_f32(&obj.name)?
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect(),
            ),
            _ => dense_bytes(reader, obj)?,
        };
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

/// A sparse object's dense little-endian bytes, in its own value type.
pub(crate) fn dense_bytes<'r>(reader: &'r Reader, obj: &ObjectInfo) -> Result<Cow<'r, [u8]>> {
    use zt_formats::fp8::{F8E4M3Fn, F8E4M3Fnuz, F8E5M2Fnuz, F8E5M2};
    use zt_formats::{Complex, LogicalType};
    let ty = match obj.legacy_packing {
        Some(p) => ElementType::plain(p.values),
        None => obj
            .main_component()
            .map(|c| c.element.clone())
            .ok_or_else(|| Error::invalid("no values").in_object(&obj.name))?,
    };
    let name = obj.name.as_str();
    macro_rules! dense {
        ($t:ty) => {
            reader
                .to_dense::<$t>(name)
                .map(|d| Cow::Owned(bytemuck::cast_slice::<$t, u8>(&d).to_vec()))
        };
    }
    match (&ty.logical, ty.dtype) {
        (Some(LogicalType::F8E4M3Fn), _) => dense!(F8E4M3Fn),
        (Some(LogicalType::F8E5M2), _) => dense!(F8E5M2),
        (Some(LogicalType::F8E4M3Fnuz), _) => dense!(F8E4M3Fnuz),
        (Some(LogicalType::F8E5M2Fnuz), _) => dense!(F8E5M2Fnuz),
        (Some(LogicalType::Complex64), _) => dense!(Complex<f32>),
        (Some(LogicalType::Complex128), _) => dense!(Complex<f64>),
        (_, DType::F64) => dense!(f64),
        (_, DType::F32) => dense!(f32),
        (_, DType::F16) => dense!(half::f16),
        (_, DType::BF16) => dense!(half::bf16),
        (_, DType::I64) => dense!(i64),
        (_, DType::I32) => dense!(i32),
        (_, DType::I16) => dense!(i16),
        (_, DType::I8) => dense!(i8),
        (_, DType::U64) => dense!(u64),
        (_, DType::U32) => dense!(u32),
        (_, DType::U16) => dense!(u16),
        (_, DType::U8) => dense!(u8),
        // Summing duplicate bools has no meaning that keeps them bools.
        (_, DType::Bool) => {
            Err(Error::unsupported("sparse bool objects cannot be densified").in_object(name))
        }
    }
}
