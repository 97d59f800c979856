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
                role: c.role.clone(),
                element: c.element.clone(),
                bytes: reader.component_bytes(name, &c.role, read)?,
            });
        }
        ObjectData {
            shape: obj.shape.clone(),
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

/// A v0.1 one-blob sparse entry as v1.2 components (u64 indices, as the spec requires).
fn legacy_sparse_object<'r>(reader: &'r Reader, obj: &ObjectInfo) -> Result<ObjectData<'r>> {
    let p = obj
        .legacy_packing
        .ok_or_else(|| Error::invalid("not a legacy sparse entry"))?;
    let name = &obj.name;
    let values_type = ElementType::plain(p.values);
    let u64_bytes = |v: &[u64]| -> Cow<'r, [u8]> {
        Cow::Owned(v.iter().flat_map(|x| x.to_le_bytes()).collect())
    };
    // The value type is only known at run time; copy through the byte-level parts.
    let components = match obj.format {
        Format::SparseCsr => {
            let (values, indices, indptr) = reader.legacy_csr_bytes(obj)?;
            vec![
                ComponentData {
                    role: "values".into(),
                    element: values_type,
                    bytes: Cow::Owned(values),
                },
                ComponentData {
                    role: "indices".into(),
                    element: ElementType::plain(DType::U64),
                    bytes: u64_bytes(&indices),
                },
                ComponentData {
                    role: "indptr".into(),
                    element: ElementType::plain(DType::U64),
                    bytes: u64_bytes(&indptr),
                },
            ]
        }
        Format::SparseCoo => {
            let (values, coords) = reader.legacy_coo_bytes(obj)?;
            vec![
                ComponentData {
                    role: "values".into(),
                    element: values_type,
                    bytes: Cow::Owned(values),
                },
                ComponentData {
                    role: "coords".into(),
                    element: ElementType::plain(DType::U64),
                    bytes: u64_bytes(&coords),
                },
            ]
        }
        _ => return Err(Error::invalid("legacy packing on a non-sparse object").in_object(name)),
    };
    Ok(ObjectData {
        shape: obj.shape.clone(),
        format: obj.format.clone(),
        attributes: obj.attributes.clone(),
        components,
    })
}
