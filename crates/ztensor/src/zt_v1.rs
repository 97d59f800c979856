//! zTensor 1.x files (v1.1 and v1.2): manifest to validated objects.

use std::borrow::Cow;
use zt_container::{check_overlaps, BlobRange, Container, Error, Result};
use zt_formats::{
    check_layout, dense_len, ComponentLayout, DType, Digest, ElementType, Encoding, Format,
    LogicalType,
};

use zt_manifest::{decode_objects, ComponentRef, ObjectRef, SpecVersion};

use crate::model::{ByteOrder, ComponentInfo, Components, FileVersion, ObjectInfo};
use crate::reader::{
    name_hash, names_strictly_increasing, sort_by_name, Limits, NameIndex, Parsed,
};

pub(crate) fn parse(container: &Container, limits: &Limits) -> Result<Parsed> {
    let bytes = container.manifest_bytes()?;
    // How to read dtypes depends on the version. Every real writer puts it before the objects,
    // so objects are built as they are decoded; a manifest that gives it later has its
    // objects kept (borrowed) and built at the end.
    // Real objects take 100 bytes of manifest or more: reserving for that many avoids growing
    // (and copying) the list again and again. Over-reserving costs only untouched memory, and
    // the cap keeps a manifest of one huge attribute from reserving GiBs for no objects.
    let mut objects = Vec::with_capacity((bytes.len() / 96).min(MAX_RESERVED_OBJECTS));
    zt_container::prefer_huge_pages(&mut objects);
    let mut collected = Collected::default();
    let mut late = Vec::new();
    let head = decode_objects(
        &bytes,
        container.manifest_offset(),
        limits.decode,
        |o, _, version| {
            match version {
                Some(v) => {
                    build_object(container, o, v.minor <= 1, &mut objects)
                        .map_err(|e| e.in_object(&o.name))?;
                    if let Some(built) = objects.last() {
                        collected.add(built);
                    }
                }
                None => late.push(o.clone()),
            }
            Ok(())
        },
    )?;
    let version = SpecVersion::parse(&head.version)
        .ok_or_else(|| Error::invalid("manifest version is not MAJOR.MINOR.PATCH"))?;
    for o in &late {
        build_object(container, o, version.minor <= 1, &mut objects)
            .map_err(|e| e.in_object(&o.name))?;
        if let Some(built) = objects.last() {
            collected.add(built);
        }
    }
    let index = finish_objects(&mut objects, collected, |name| {
        Error::invalid(format!("duplicate key {name:?} in objects"))
    })?;
    Ok(Parsed {
        version: FileVersion::ZTensor(version),
        attributes: head.attributes,
        objects,
        index: Some(index),
    })
}

/// Validates `o` and appends it to `objects` (built in place there: an object is a few hundred
/// bytes, and moving it through a `Result` showed in profiles of files with many objects).
fn build_object(
    container: &Container,
    o: &ObjectRef<'_>,
    v1_1: bool,
    objects: &mut Vec<ObjectInfo>,
) -> Result<()> {
    let format = Format::parse(&o.format);
    let mut components = Components::new();
    for c in &o.components {
        components.push(component(container, v1_1, c).map_err(|e| e.in_component(&c.role))?);
    }
    components.sort_unstable_by(|a, b| a.role.cmp(&b.role));
    // v1.1 zstd components declare no uncompressed size; for dense data the shape implies it.
    if format == Format::Dense {
        if let Some(data) = components.iter_mut().find(|c| c.role == "data") {
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
    objects.push(ObjectInfo {
        name: o.name.to_string(),
        shape: o.shape.clone(),
        format,
        attributes: o.attributes.clone(),
        components,
        range_digests: Vec::new(),
        legacy_packing: None,
        defect: None,
    });
    Ok(())
}

/// Roles every format uses, shared instead of allocated per component.
const ROLES: [&str; 8] = [
    "data",
    "values",
    "indices",
    "indptr",
    "coords",
    "packed_weight",
    "scales",
    "zeros",
];

pub(crate) fn intern_role(role: &str) -> Cow<'static, str> {
    match ROLES.iter().find(|r| **r == role) {
        Some(r) => Cow::Borrowed(r),
        None => Cow::Owned(role.to_owned()),
    }
}

fn component(container: &Container, v1_1: bool, c: &ComponentRef<'_>) -> Result<ComponentInfo> {
    let element = if v1_1 {
        v1_1_element(&c.dtype, c.logical_type.as_deref())?
    } else {
        ElementType::resolve(&c.dtype, c.logical_type.as_deref())?
    };
    container.check_blob(c.offset, c.length)?;
    let encoding = Encoding::parse(c.encoding.as_deref().unwrap_or("raw"));
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
        Encoding::Unknown(_) => c.uncompressed_length,
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

/// What listing a zTensor file collects about each object as it is built, for
/// [`finish_objects`]: every component's stored range and the name's hash, taken while the
/// object is hot in cache instead of in later passes over the whole list.
#[derive(Default)]
pub(crate) struct Collected {
    ranges: Vec<BlobRange<()>>,
    hashes: Vec<u64>,
}

impl Collected {
    pub(crate) fn add(&mut self, o: &ObjectInfo) {
        self.hashes.push(name_hash(&o.name));
        self.ranges.extend(o.components.iter().map(|c| BlobRange {
            offset: c.offset,
            length: c.length,
            id: (),
        }));
    }
}

/// The most objects whose room is reserved before any is decoded (about 350 MiB); larger
/// lists grow as they go.
const MAX_RESERVED_OBJECTS: usize = 1 << 20;

/// Files with at least this many objects check blob overlaps and build the name index on a
/// second thread while the name order is checked; below it a thread costs more than it saves.
const PARALLEL_FINISH_MIN_OBJECTS: usize = 4096;

/// The last steps of listing a zTensor file: sorts `objects` by name (a name given twice is
/// `duplicate(name)`), rejects partially overlapping blobs across the whole file (identical
/// aliases are allowed) and builds the name index. `collected` holds what [`Collected::add`]
/// took from each object, in the order of `objects`.
pub(crate) fn finish_objects(
    objects: &mut [ObjectInfo],
    collected: Collected,
    duplicate: impl FnOnce(&str) -> Error,
) -> Result<NameIndex> {
    let Collected { mut ranges, hashes } = collected;
    let (in_order, done) = std::thread::scope(|s| {
        let worker = (objects.len() >= PARALLEL_FINISH_MIN_OBJECTS)
            .then(|| {
                std::thread::Builder::new()
                    .spawn_scoped(s, || {
                        (check_overlaps(&mut ranges), NameIndex::from_hashes(&hashes))
                    })
                    .ok()
            })
            .flatten();
        let in_order = names_strictly_increasing(objects);
        let done = worker.map(|w| {
            w.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        (in_order, done)
    });
    // A small file, or no thread to be had: the same work here.
    let (overlap, index) =
        done.unwrap_or_else(|| (check_overlaps(&mut ranges), NameIndex::from_hashes(&hashes)));
    // Files list their objects sorted, so the index built from the hashes in file order is
    // usually the final one; otherwise sort, refuse duplicates and index again.
    let index = if in_order {
        index
    } else {
        if let Some(name) = sort_by_name(objects) {
            return Err(duplicate(name));
        }
        NameIndex::build(objects)
    };
    if let Err((a, b)) = overlap {
        // Name the blobs by their ranges: the first component with each (an alias, if any,
        // has the same range and is just as much at fault).
        let name = |r: BlobRange<()>| {
            objects
                .iter()
                .find_map(|o| {
                    let c = o
                        .components
                        .iter()
                        .find(|c| (c.offset, c.length) == (r.offset, r.length))?;
                    Some(format!("{}/{}", o.name, c.role))
                })
                .unwrap_or_else(|| "?".to_owned())
        };
        return Err(Error::invalid(format!(
            "blobs of {} and {} partially overlap",
            name(a),
            name(b)
        ))
        .at(b.offset));
    }
    Ok(index)
}
