//! zTensor v0.1 (`ZTEN0001`): index entries listed in the same object model as v1.

use zt_container::{check_blob_range, Container, Error, ErrorKind, Result};
use zt_formats::{dense_len, element_count, DType, Digest, ElementType, Encoding, Format};
use zt_manifest::{decode_index, IndexEntry};

use crate::listing::{Collected, Limits, Listing};
use crate::model::{
    ByteOrder, ComponentInfo, Components, Defect, DigestScope, FileVersion, LegacyLayout,
    LegacyPacking, ObjectInfo, LEGACY_BLOB_ROLE,
};

/// Lists a zTensor v0.1 file whose container has been parsed.
pub(crate) fn list(container: &Container, limits: &Limits) -> Result<Listing> {
    let bytes = container.manifest_bytes()?;
    let entries = decode_index(&bytes, container.manifest_offset(), limits.decode_limits())?;
    let mut objects: Vec<ObjectInfo> = zt_container::internal::try_with_capacity(entries.len())?;
    let mut collected = Collected::default();
    for mut e in entries {
        // An entry whose own fields are damaged (its range, its dtype, its sizes) is listed
        // as unreadable and the rest of the file reads, as the original (0.1.4) opens such
        // a file and fails on that entry alone; limits still refuse the file.
        let obj = match entry(container, &mut e) {
            Ok(obj) => obj,
            Err(err) if matches!(err.kind(), ErrorKind::InvalidFile | ErrorKind::Unsupported) => {
                let layout = if e.layout.is_empty() {
                    "dense"
                } else {
                    &e.layout
                };
                let shape = e.shape.as_slice().into();
                ObjectInfo::unreadable(e.name, shape, Format::parse(layout), &err)
            }
            Err(err) => return Err(err.in_object(&e.name)),
        };
        collected.add(&obj);
        objects.push(obj);
    }
    collected.finish(
        FileVersion::ZTensorV0_1,
        Default::default(),
        objects,
        |name| Error::invalid("two v0.1 entries have this name").in_object(name),
    )
}

/// The object of entry `e`, its fields checked. On success its name, shape and custom fields
/// are moved out of `e`; on failure they are left there (with its layout), to list the entry
/// as unreadable without copying them for every entry that is not.
fn entry(container: &Container, e: &mut IndexEntry) -> Result<ObjectInfo> {
    let dtype = DType::from_long_name(&e.dtype)
        .ok_or_else(|| Error::invalid(format!("unknown dtype {:?}", e.dtype)))?;
    let element = ElementType::plain(dtype);
    element_count(&e.shape)?;
    check_blob_range(e.offset, e.size, container.data_end())?;
    let mut defect = None;
    let encoding = match Encoding::parse(&e.encoding) {
        // v2's seekable zstd is no v0.1 encoding.
        Encoding::ZstdSeekable => Encoding::Unknown(e.encoding.clone()),
        enc => enc,
    };
    if let Encoding::Unknown(x) = &encoding {
        defect = Some(Defect::unsupported(format!("unknown v0.1 encoding {x:?}")));
    }
    let byte_order = match e.data_endianness.as_deref() {
        None | Some("little") => ByteOrder::Little,
        Some("big") => ByteOrder::Big,
        Some(x) => {
            return Err(Error::invalid(format!(
                "data_endianness {x:?} is neither \"little\" nor \"big\""
            )))
        }
    };
    let checksum = e
        .checksum
        .as_deref()
        .map(Digest::parse)
        .transpose()
        .map_err(|err| err.at(e.offset))?;
    let sparse_format = if e.layout == "sparse" {
        match e.extra.remove("sparse_format") {
            Some(v) => v.as_str().map(str::to_owned),
            None => None,
        }
    } else {
        None
    };
    let (format, packing) = match (e.layout.as_str(), sparse_format.as_deref()) {
        ("dense", _) => (Format::Dense, None),
        ("sparsecsr", _) | ("sparse", Some("csr")) => (Format::SparseCsr, Some(LegacyLayout::Csr)),
        ("sparsecoo", _) | ("sparse", Some("coo")) => (Format::SparseCoo, Some(LegacyLayout::Coo)),
        (layout, sf) => {
            defect.get_or_insert_with(|| {
                Defect::unsupported(match sf {
                    Some(sf) => format!("unknown v0.1 sparse_format {sf:?}"),
                    None if layout == "sparse" => "v0.1 sparse entry has no sparse_format".into(),
                    None => format!("unknown v0.1 layout {layout:?}"),
                })
            });
            (Format::Unknown(layout.to_owned()), None)
        }
    };
    let decoded_len = match (&format, &encoding) {
        (Format::Dense, _) => Some(dense_len(&e.shape, &element)?),
        (_, Encoding::Raw) => Some(e.size),
        // Legacy sparse zstd: the size is data-dependent; the decoder bounds it by the cap.
        _ => None,
    };
    if format == Format::Dense && encoding == Encoding::Raw && decoded_len != Some(e.size) {
        defect.get_or_insert_with(|| {
            Defect::invalid(format!(
                "{} bytes of data, but shape {:?} of {} takes {}",
                e.size,
                e.shape,
                element.name(),
                decoded_len.unwrap_or(0)
            ))
        });
    }
    if let Some(p) = packing {
        if let Some(d) = legacy_sparse_defect(p, &e.shape, dtype, &encoding, e.size) {
            defect.get_or_insert(Defect::invalid(d));
        }
    }
    let component = ComponentInfo {
        role: if packing.is_some() {
            LEGACY_BLOB_ROLE.into()
        } else {
            "data".into()
        },
        element: if packing.is_some() {
            ElementType::plain(DType::U8)
        } else {
            element.clone()
        },
        offset: e.offset,
        length: e.size,
        encoding,
        uncompressed_length: None,
        decoded_len,
        // A v0.1 checksum covers the entry's stored bytes: exactly this one component.
        digest: checksum,
        byte_order: if packing.is_some() {
            ByteOrder::Little
        } else {
            byte_order
        },
        file: 0,
        digest_scope: DigestScope::Stored,
        foreign_digest: None,
        arrangement: None,
    };
    Ok(ObjectInfo {
        name: std::mem::take(&mut e.name),
        shape: std::mem::take(&mut e.shape).into(),
        format,
        attributes: std::mem::take(&mut e.extra),
        components: Components::one(component),
        range_digests: Vec::new(),
        legacy_packing: packing.map(|layout| LegacyPacking {
            layout,
            values: dtype,
            byte_order,
        }),
        defect: defect.map(Box::new),
    })
}

/// Why a raw legacy sparse blob cannot hold its shape under any reading, if it cannot.
fn legacy_sparse_defect(
    p: LegacyLayout,
    shape: &[u64],
    dtype: DType,
    enc: &Encoding,
    size: u64,
) -> Option<String> {
    if *enc != Encoding::Raw {
        return None;
    }
    match p {
        LegacyLayout::Csr => {
            let [rows, _] = shape else {
                return Some(format!(
                    "v0.1 CSR entry must have rank 2, has shape {shape:?}"
                ));
            };
            let indptr = rows.checked_add(1).and_then(|n| n.checked_mul(8));
            match indptr {
                Some(n) if n <= size => {
                    let rest = size - n;
                    (rest % (8 + dtype.size() as u64) != 0).then(|| {
                        format!("v0.1 CSR blob of {size} bytes: {rest} bytes after indptr is not whole (index, value) pairs")
                    })
                }
                _ => Some(format!(
                    "v0.1 CSR blob of {size} bytes is too small for the indptr of {} rows",
                    shape.first().copied().unwrap_or(0)
                )),
            }
        }
        LegacyLayout::Coo => {
            if shape.is_empty() {
                return Some("v0.1 COO entry must have rank 1 or more".into());
            }
            let rec = (shape.len() as u64)
                .checked_mul(8)
                .and_then(|n| n.checked_add(dtype.size() as u64));
            match rec {
                Some(r) if size % r == 0 => None,
                _ => Some(format!("v0.1 COO blob of {size} bytes is not a whole number of (coordinates, value) records")),
            }
        }
    }
}
