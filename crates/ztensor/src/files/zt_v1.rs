//! zTensor 1.x files (v1.1 and v1.2): the manifest decoded into validated objects. v1.0 tensors
//! ([`super::zt_v1_0`]) are validated here too, as the v1.1 objects they mean.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use zt_container::{Container, Error, ErrorKind, Result};
use zt_formats::{
    check_layout, dense_len, ComponentLayout, DType, Digest, ElementType, Encoding, Format,
    LogicalType,
};

use zt_manifest::{decode_objects, ComponentRef, ObjectRef, SpecVersion};

use crate::listing::{intern_role, reserve_objects, Collected, Limits, Listing};
use crate::model::{ByteOrder, ComponentInfo, Components, DigestScope, FileVersion, ObjectInfo};

/// Lists a zTensor 1.x file whose container has been parsed.
pub(crate) fn list(container: &Container, limits: &Limits) -> Result<Listing> {
    let bytes = container.manifest_bytes()?;
    // How to read dtypes depends on the version. Every real writer puts it before the objects,
    // so objects are built as they are decoded; a manifest that gives it later has its
    // objects kept (borrowed) and built at the end.
    // The list is reserved for the number of objects the manifest declares (bounded by what
    // its bytes can hold) when the first object arrives: no growing and copying, and on a
    // large file the fresh pages are faulted in on the second core while this one decodes.
    let mut objects = Vec::new();
    let mut collected = Collected::default();
    let mut late = Vec::new();
    let declared = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let head = crate::pool::in_place_scope(|scope| {
        let head = decode_objects(
            &bytes,
            container.manifest_offset(),
            limits.decode_limits(),
            |n| declared.store(n, Ordering::Relaxed),
            |o, _, version| {
                if objects.capacity() == 0 {
                    let declared = declared.load(Ordering::Relaxed);
                    reserve_objects(&mut objects, declared, scope, &done)?;
                }
                match version {
                    Some(v) => {
                        build_or_list_unreadable(container, o, v.minor <= 1, &mut objects)?;
                        if let Some(built) = objects.last() {
                            collected.add(built);
                        }
                    }
                    None => late.push(o.clone()),
                }
                Ok(())
            },
        );
        done.store(true, Ordering::Relaxed);
        head
    })?;
    let version = SpecVersion::parse(&head.version)
        .ok_or_else(|| Error::invalid("manifest version is not MAJOR.MINOR.PATCH"))?;
    for o in &late {
        build_or_list_unreadable(container, o, version.minor <= 1, &mut objects)?;
        if let Some(built) = objects.last() {
            collected.add(built);
        }
    }
    collected.finish(
        FileVersion::ZTensor(version),
        head.attributes,
        objects,
        |name| Error::invalid(format!("duplicate key {name:?} in objects")),
    )
}

/// As [`build_object`], but an object whose own entry is damaged or unknown (a component
/// past the data area, a size its shape does not take, a malformed digest, a missing part) is
/// listed as unreadable, with the error and its offset, and the rest of the file reads: the
/// original (ztensor 1.x) opens such a file and fails on that object alone. Limits and I/O
/// errors still fail the open.
pub(crate) fn build_or_list_unreadable(
    container: &Container,
    o: &ObjectRef<'_>,
    v1_1: bool,
    objects: &mut Vec<ObjectInfo>,
) -> Result<()> {
    match build_object(container, o, v1_1, objects) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.kind(), ErrorKind::InvalidFile | ErrorKind::Unsupported) => {
            objects.push(ObjectInfo::unreadable(
                o.name.to_string(),
                o.shape.clone(),
                Format::parse(&o.format),
                &e,
            ));
            Ok(())
        }
        Err(e) => Err(e.in_object(&o.name)),
    }
}

/// Validates `o` and appends it to `objects` (built in place there: an object is a few hundred
/// bytes, and moving it through a `Result` showed in profiles of files with many objects).
pub(crate) fn build_object(
    container: &Container,
    o: &ObjectRef<'_>,
    v1_1: bool,
    objects: &mut Vec<ObjectInfo>,
) -> Result<()> {
    let format = Format::parse(&o.format);
    let mut components = Components::default();
    for c in &o.components {
        let listed = component(container, v1_1, c).map_err(|e| e.in_component(&c.role))?;
        components.0.push(listed);
    }
    components.0.sort_unstable_by(|a, b| a.role.cmp(&b.role));
    // v1.1 zstd components declare no uncompressed size; for dense data the shape implies it.
    if format == Format::Dense {
        if let Some(data) = components.0.iter_mut().find(|c| c.role == "data") {
            if data.decoded_len.is_none() {
                data.decoded_len = Some(dense_len(&o.shape, &data.element)?);
            }
        }
    }
    {
        // On the stack: no allocation per object.
        let layout: smallvec::SmallVec<[ComponentLayout<'_>; 4]> = components
            .iter()
            .map(|c| ComponentLayout {
                role: &c.role,
                element: &c.element,
                decoded_len: c.decoded_len,
            })
            .collect();
        check_layout(&format, &o.shape, &o.attributes, &layout)?;
    }
    objects.push(ObjectInfo::listed(
        o.name.to_string(),
        o.shape.clone(),
        format,
        o.attributes.clone(),
        components,
    ));
    Ok(())
}

fn component(container: &Container, v1_1: bool, c: &ComponentRef<'_>) -> Result<ComponentInfo> {
    let element = if v1_1 {
        v1_1_element(&c.dtype, c.logical_type.as_deref())?
    } else {
        ElementType::resolve(&c.dtype, c.logical_type.as_deref())?
    };
    container.check_blob(c.offset, c.length)?;
    let encoding = match Encoding::parse(c.encoding.as_deref().unwrap_or("raw")) {
        // v2's seekable zstd is no v1 encoding: unknown here, like any other.
        Encoding::ZstdSeekable => Encoding::Unknown(Encoding::ZstdSeekable.name().to_owned()),
        e => e,
    };
    let decoded_len = match encoding {
        Encoding::Raw => {
            if c.uncompressed_length.is_some_and(|u| u != c.length) {
                return Err(Error::invalid(format!(
                    "raw component declares uncompressed_length {:?} but is {} bytes",
                    c.uncompressed_length, c.length
                ))
                .at(c.offset));
            }
            Some(c.length)
        }
        Encoding::Zstd => {
            if c.uncompressed_length.is_none() && !v1_1 {
                return Err(
                    Error::invalid("zstd component has no uncompressed_length").at(c.offset)
                );
            }
            c.uncompressed_length
        }
        Encoding::ZstdSeekable
        | Encoding::Deflate
        | Encoding::ProtoVarints { .. }
        | Encoding::ProtoVarintCodes { .. }
        | Encoding::ProtoTagged { .. }
        | Encoding::Hdf5Chunks(_)
        | Encoding::Latin1Text
        | Encoding::Pieces(_)
        | Encoding::Boxes(_)
        | Encoding::SparseLevels(_)
        | Encoding::BitPlanes { .. }
        | Encoding::Unknown(_) => c.uncompressed_length,
    };
    let digest = c
        .digest
        .as_deref()
        .map(Digest::parse)
        .transpose()
        .map_err(|e| e.at(c.offset))?;
    Ok(ComponentInfo {
        role: intern_role(&c.role),
        element,
        offset: c.offset,
        length: c.length,
        encoding,
        uncompressed_length: c.uncompressed_length,
        decoded_len,
        digest,
        byte_order: ByteOrder::Little,
        file: 0,
        digest_scope: DigestScope::Stored,
        foreign_digest: None,
        arrangement: None,
    })
}

/// v1.1 spelled FP8 and complex as dtypes; they map onto the v1.2 model.
fn v1_1_element(dtype: &str, logical: Option<&str>) -> Result<ElementType> {
    let mapped = match dtype {
        "f8_e4m3" => Some((DType::U8, LogicalType::F8E4M3Fn)),
        "f8_e5m2" => Some((DType::U8, LogicalType::F8E5M2)),
        "complex64" => Some((DType::F32, LogicalType::Complex64)),
        "complex128" => Some((DType::F64, LogicalType::Complex128)),
        _ => None,
    };
    match mapped {
        Some((d, t)) => Ok(ElementType {
            dtype: d,
            logical: Some(t),
        }),
        None => ElementType::resolve(dtype, logical),
    }
}
