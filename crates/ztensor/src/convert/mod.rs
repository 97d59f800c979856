//! Converting between kinds: any readable file to zTensor v2 or v1.2 ([`upgrade`],
//! [`copy_into`]),
//! and to `.mag` ([`write_mag`]), `.safetensors` ([`write_safetensors`]) and GGUF
//! ([`write_gguf`]).

use std::borrow::Cow;
use std::path::Path;

use zt_container::{AtomicFile, Durability, Error, ErrorKind, Result};
use zt_formats::{DType, DigestAlgorithm, ElementType, Encoding, Format};

use crate::decode::Verify;
use crate::model::{ByteOrder, DigestScope};
use crate::reader::Reader;
use crate::view::ObjectView;
use crate::writer::{
    ComponentData, EncodedComponent, ObjectData, Sink, Version, WriteOptions, Writer,
};

#[cfg(feature = "gguf")]
mod gguf;
#[cfg(feature = "sharded")]
mod indexed;
#[cfg(feature = "safetensors")]
mod safetensors;
mod shard;
#[cfg(all(feature = "gguf", feature = "sharded"))]
pub use self::gguf::GgufSplit;
#[cfg(feature = "gguf")]
pub use self::gguf::{gguf_holds, write_gguf, write_gguf_views, write_gguf_with};
#[cfg(feature = "sharded")]
pub use self::indexed::{
    write_indexed, write_indexed_groups, IndexedFiles, IndexedOptions, ShardKind,
};
#[cfg(feature = "safetensors")]
pub use self::safetensors::{
    safetensors_bytes, write_safetensors, write_safetensors_tensors, write_safetensors_with,
    SafetensorsTensor,
};
#[cfg(feature = "safetensors")]
pub use self::safetensors::{safetensors_metadata, write_safetensors_views};
pub use self::shard::{
    write_sharded, write_sharded_views, write_sharded_with_attributes, ShardOptions,
};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvertOptions {
    /// Compression of every component (a zstd level when `Always`).
    pub compression: Keep<i32>,
    /// Digest of every component.
    pub digest: Keep<DigestAlgorithm>,
    /// Check every digest and checksum of the source on the bytes being copied (default:
    /// yes; a mismatch fails the conversion, naming object, component and offset). Off, the
    /// bytes are copied as they are, and new digests are computed over them.
    pub verify: bool,
    /// Leave out objects the source lists but cannot decode (legacy entries with a defect)
    /// instead of failing; they are named in the [`ConvertReport`].
    pub skip_unreadable: bool,
    /// Whether the output is synced to disk before [`upgrade`] returns (default: yes).
    pub durability: Durability,
    /// The zTensor version [`upgrade`] writes (default: [`Version::V2`]).
    pub version: Version,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            compression: Keep::Source,
            digest: Keep::Source,
            verify: true,
            skip_unreadable: false,
            durability: Durability::default(),
            version: Version::default(),
        }
    }
}

/// The view a conversion reads `obj` through: checking everything the source carries when
/// `verify` (and the reader was not opened with checks off), nothing otherwise.
pub(crate) fn source_view(obj: ObjectView<'_>, verify: bool) -> ObjectView<'_> {
    if verify {
        obj.for_copy()
    } else {
        obj.with_checks(Verify::Never)
    }
}

/// The objects a conversion writes: all but those that are not numbers we decode
/// ([`ObjectInfo::skipped`](crate::ObjectInfo::skipped)), which a conversion passes over.
pub(crate) fn numbers_only<'r>(views: &[ObjectView<'r>]) -> Vec<ObjectView<'r>> {
    views
        .iter()
        .copied()
        .filter(|o| o.skipped().is_none())
        .collect()
}

/// An object's decoded bytes as a conversion writes them (cast, when its view casts): what a
/// shard's size counts.
pub(crate) fn decoded_size(o: &ObjectView<'_>) -> u64 {
    let cast = o.parts_cast();
    o.components
        .iter()
        .map(|c| crate::cast::cast_len(c.decoded_len.unwrap_or(c.length), &c.element, cast))
        .fold(0u64, u64::saturating_add)
}

/// The one shard planner: `objects` in bytewise name order dealt into shards greedily, a new
/// shard starting when the next object would take the current one past `max` decoded bytes
/// (an object larger than that gets a shard of its own). The same objects and size always
/// give the same shards.
pub(crate) fn plan_shards<'a, 'r>(
    mut objects: Vec<&'a ObjectView<'r>>,
    max: u64,
) -> Vec<Vec<&'a ObjectView<'r>>> {
    objects.sort_unstable_by(|a, b| a.name().as_bytes().cmp(b.name().as_bytes()));
    let mut groups: Vec<Vec<&'a ObjectView<'r>>> = Vec::new();
    let mut used = 0u64;
    for o in objects {
        let size = decoded_size(o);
        match groups.last_mut() {
            Some(g) if used.saturating_add(size) <= max => {
                g.push(o);
                used = used.saturating_add(size);
            }
            _ => {
                groups.push(vec![o]);
                used = size;
            }
        }
    }
    groups
}

/// What a conversion did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConvertReport {
    /// Objects written.
    pub written: usize,
    /// Objects left out, with the reason: those that are not numbers we decode
    /// ([`ObjectInfo::skipped`](crate::ObjectInfo::skipped)), and with
    /// [`ConvertOptions::skip_unreadable`] those that cannot be decoded.
    pub skipped: Vec<(String, String)>,
}

/// Upgrades (or converts) `input`, any file [`crate::open`] reads, to a zTensor file of
/// [`ConvertOptions::version`] at `output` (v2 by default), crash-safely. Every object, value,
/// shape and attribute is kept; v0.1 sparse entries become `sparse_csr`/`sparse_coo` objects
/// with u64 indices; big-endian data becomes little-endian; digests are recomputed (v1.2: over
/// the new stored bytes; v2: xxh3 or sha256 over the decoded bytes, for every part). A v2
/// output has its objects in bytewise name order. An object v2 cannot hold (v1.2's
/// `quantized_group`) is an error naming it.
///
/// An object the source lists but cannot decode makes the upgrade fail, naming it, unless
/// [`ConvertOptions::skip_unreadable`] is set. The output appears only when everything succeeded.
pub fn upgrade(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
    options: ConvertOptions,
) -> Result<ConvertReport> {
    let (input, output) = (input.as_ref(), output.as_ref());
    let reader = crate::open(input)?;
    let mut writer = Writer::create_version(output, options.version, options.durability)?;
    let report = copy_into(&reader, &mut writer, options).map_err(|e| {
        let file = if inputs_fault(&e) { input } else { output };
        e.in_file(file)
    })?;
    writer.finish()?;
    Ok(report)
}

/// Whether an error met while converting is the input's, so that it names the input's file,
/// never the output's: a digest that does not match, data that breaks its format, or data in
/// a form this library does not decode (all found as the input is read; the writers raise
/// none of them). Anything else (what the output kind cannot hold, a full disk) is the
/// output's.
///
/// ```
/// use ztensor::convert::inputs_fault;
/// assert!(inputs_fault(&ztensor::Error::invalid("blob past the end")));
/// assert!(!inputs_fault(&ztensor::Error::argument("safetensors has no u4 type")));
/// ```
pub fn inputs_fault(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::InvalidFile | ErrorKind::ChecksumMismatch | ErrorKind::Unsupported
    )
}

/// `e`, from writing the output file `path`, placed there unless it is the input's fault
/// ([`inputs_fault`]), which the caller places in the input.
pub(crate) fn in_output(e: Error, path: &Path) -> Error {
    if inputs_fault(&e) {
        e
    } else {
        e.in_file(path)
    }
}

/// Copies every object and the file attributes of `reader` into `writer`.
pub fn copy_into<W: Sink>(
    reader: &Reader,
    writer: &mut Writer<W>,
    options: ConvertOptions,
) -> Result<ConvertReport> {
    writer.set_attributes(reader.attributes().clone());
    let mut report = ConvertReport::default();
    // v2: objects in bytewise name order, so that raw output is in the canonical form.
    let mut names: Vec<&str> = reader.objects().iter().map(|o| o.name.as_str()).collect();
    if writer.version().is_v2() {
        names.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    }
    for name in names {
        let obj = reader.object(name)?;
        if let Some(why) = obj.skipped() {
            report.skipped.push((obj.name.clone(), why.to_owned()));
            continue;
        }
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
    // An object listed as unreadable has no parts to copy: why, not an empty object.
    obj.readable()?;
    let obj = source_view(obj, options.verify);
    let name = obj.name.as_str();
    let write = write_options(&obj, writer, options);
    let data = if obj.legacy_packing.is_some() {
        legacy_sparse_object(obj)?
    } else {
        let mut components = Vec::with_capacity(obj.components.len());
        for c in obj.components() {
            components.push(ComponentData {
                role: c.role.to_string(),
                element: c.element.clone(),
                bytes: c.bytes()?,
            });
        }
        ObjectData {
            shape: obj.shape.to_vec(),
            format: obj.format.clone(),
            attributes: obj.attributes.clone(),
            components,
        }
    };
    let data = cast_parts(&obj, data)?;
    // What the writer refuses here is what the target cannot hold (a v2 file has no
    // quantized_group layout, no u16 index part, no CBOR tag): the caller's choice of target,
    // as safetensors' and GGUF's refusals are. A source object broken in itself fails when it
    // is read, above, as the source file's fault.
    writer.add_object_with(name, data, write)
}

/// `data`, the parts of `obj` as a conversion copies them, with their float elements cast as
/// `obj`'s view says ([`ObjectView::cast_floats`]): the data of a dense object, the values of
/// a sparse one.
fn cast_parts<'a>(obj: &ObjectView<'_>, mut data: ObjectData<'a>) -> Result<ObjectData<'a>> {
    let Some(to) = obj.parts_cast() else {
        return Ok(data);
    };
    let cap = obj.backing().limits.max_decompressed_len;
    for c in &mut data.components {
        if crate::cast::changes(&c.element, to) {
            let bytes = std::mem::take(&mut c.bytes);
            c.bytes = crate::cast::cast_bytes(bytes, c.element.dtype, to, cap)
                .map_err(|e| e.in_component(&c.role).in_object(&obj.name))?;
            c.element = ElementType::plain(to);
        }
    }
    Ok(data)
}

/// How [`copy_object`] writes `obj`'s components: compression and digest as `options` keep
/// them from the source, or as they say.
fn write_options<W: Sink>(
    obj: &ObjectView<'_>,
    writer: &Writer<W>,
    options: ConvertOptions,
) -> WriteOptions {
    let source_zstd = obj
        .components
        .iter()
        .any(|c| matches!(c.encoding, Encoding::Zstd | Encoding::ZstdSeekable));
    // v1.2 has no xxh3: a v2 source's digests become sha256 ones.
    let source_digest = obj
        .components
        .iter()
        .find_map(|c| c.digest.map(|d| d.algorithm()))
        .map(|a| match a {
            DigestAlgorithm::Xxh3 => DigestAlgorithm::Sha256,
            a => a,
        });
    let source_digest = match (writer.version().is_v2(), options.digest) {
        // v2 digests every part (xxh3 unless sha256 is asked for): crc32c has no place.
        (true, Keep::Always(DigestAlgorithm::Sha256)) => Some(DigestAlgorithm::Sha256),
        (true, _) => None,
        (false, _) => source_digest,
    };
    WriteOptions {
        compression: match options.compression {
            Keep::Source => source_zstd.then_some(DEFAULT_ZSTD_LEVEL),
            Keep::Never => None,
            Keep::Always(l) => Some(l),
        },
        digest: match options.digest {
            _ if writer.version().is_v2() => source_digest,
            Keep::Source => source_digest,
            Keep::Never => None,
            Keep::Always(d) => Some(d),
        },
    }
}

/// As [`copy_object`], except that a sparse or quantized object is written in its dense
/// form (sparse densified, quantized dequantized to f32): `zt convert --densify`.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let src = dir.path().join("m.zt");
/// # let mut w = ztensor::Writer::create(&src)?;
/// # w.add("w", &[2], &[1.0f32, 2.0])?;
/// # w.finish()?;
/// let r = ztensor::open(&src)?;
/// let mut w = ztensor::Writer::create(dir.path().join("dense.zt"))?;
/// for o in &r {
///     ztensor::convert::copy_object_densified(o, &mut w, Default::default())?;
/// }
/// w.finish()?;
/// # Ok(())
/// # }
/// ```
pub fn copy_object_densified<W: Sink>(
    obj: ObjectView<'_>,
    writer: &mut Writer<W>,
    options: ConvertOptions,
) -> Result<()> {
    if obj.format == Format::Dense {
        return copy_object(obj, writer, options);
    }
    let obj = source_view(obj, options.verify);
    let write = write_options(&obj, writer, options);
    let (bytes, element) = obj.dense_form()?;
    let data = ObjectData {
        shape: obj.shape.to_vec(),
        format: Format::Dense,
        attributes: obj.attributes.clone(),
        components: vec![ComponentData {
            role: "data".into(),
            element,
            bytes,
        }],
    };
    writer.add_object_with(obj.name.as_str(), data, write)
}

/// Copies one object without decoding it when its stored bytes are valid v1.2 as they are
/// (little-endian, raw or zstd with a known size); otherwise decodes and re-encodes it as
/// [`copy_object`] does. Returns whether the bytes were copied as stored.
///
/// Everything the source carries is checked first (its digests are copied with the bytes
/// they cover), unless the reader was opened with checks off.
pub fn copy_stored<W: Sink>(obj: ObjectView<'_>, writer: &mut Writer<W>) -> Result<bool> {
    // A v2 file's digests cover decoded bytes: its parts are always written from data.
    let as_is = !writer.version().is_v2()
        && obj.defect.is_none()
        && !obj.cast_changes_parts()
        && obj.legacy_packing.is_none()
        && obj.components.iter().all(|c| {
            c.byte_order == ByteOrder::Little
                // A v2 digest covers decoded bytes and may be xxh3: not a v1.2 digest.
                && c.digest_scope == DigestScope::Stored
                && c.foreign_digest.is_none()
                // Elements gathered from a span (strided, Fortran order) are not its bytes.
                && c.arrangement.is_none()
                && (c.encoding == Encoding::Raw
                    || (c.encoding == Encoding::Zstd && c.decoded_len.is_some()))
        });
    let verify = obj.for_copy().checks() != Verify::Never;
    if !as_is {
        let options = ConvertOptions {
            verify,
            ..ConvertOptions::default()
        };
        copy_object(obj, writer, options)?;
        return Ok(false);
    }
    if verify {
        obj.verify()?;
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
        bytes: Cow::Owned(crate::writer::le_bytes(v).into_owned()),
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
    /// Whether the file is synced to disk before [`write_mag`] returns.
    pub durability: Durability,
}

/// Writes every object of `reader` to a `.mag` file at `output`, crash-safely, with the file
/// attributes as metadata. Objects the layout cannot hold (sparse or quantized without
/// `densify`, types or shapes outside the layout) are an error naming the object; nothing is
/// written then.
pub fn write_mag(reader: &Reader, output: impl AsRef<Path>, options: MagOptions) -> Result<()> {
    let views = reader
        .objects()
        .iter()
        .map(|info| reader.object(&info.name))
        .collect::<Result<Vec<_>>>()?;
    write_mag_views(&views, reader.attributes(), output, options)
}

/// As [`write_mag`], for objects from anywhere (a sharded set's, several files'), written in
/// the order given, with `attributes` as the file's metadata.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let src = dir.path().join("m.zt");
/// # let mut w = ztensor::Writer::create(&src)?;
/// # w.add("w", &[2], &[1.0f32, 2.0])?;
/// # w.finish()?;
/// let r = ztensor::open(&src)?;
/// let views: Vec<_> = r.iter().collect();
/// let options = ztensor::convert::MagOptions {
///     version: ztensor::mag::WriteVersion::V300,
///     densify: false,
///     durability: ztensor::Durability::Unsynced,
/// };
/// ztensor::convert::write_mag_views(&views, r.attributes(), dir.path().join("m.mag"), options)?;
/// assert_eq!(&ztensor::open(dir.path().join("m.mag"))?.read::<f32>("w")?[..], &[1.0, 2.0]);
/// # Ok(())
/// # }
/// ```
pub fn write_mag_views(
    views: &[ObjectView<'_>],
    attributes: &zt_manifest::Attributes,
    output: impl AsRef<Path>,
    options: MagOptions,
) -> Result<()> {
    let output = output.as_ref();
    let views = &numbers_only(views)[..];
    let mut specs = Vec::with_capacity(views.len());
    for obj in views {
        specs.push(mag_spec(obj, options.densify).map_err(|e| e.in_object(&obj.name))?);
    }
    let sink = AtomicFile::create_with(output, options.durability)?;
    let meta = attributes.iter().map(|(k, v)| (k.as_str(), v));
    let mut w = zt_mag::MagWriter::new(sink, options.version, meta, &specs)
        .map_err(|e| e.in_file(output))?;
    for obj in views {
        // Dense data as stored, sparse densified, quantized dequantized: what mag_spec chose.
        let (bytes, _) = obj.for_copy().dense_form()?;
        w.write_tensor(&bytes)?;
    }
    w.finish()?.commit()
}

/// The `.mag` tensor an object becomes.
fn mag_spec(obj: &ObjectView<'_>, densify: bool) -> Result<zt_mag::TensorSpec> {
    if let Some(d) = &obj.defect {
        return Err(d.to_error());
    }
    let element = dense_element_type(obj, densify, ".mag")?;
    Ok(zt_mag::TensorSpec {
        name: obj.name.clone(),
        element,
        shape: obj.shape.to_vec(),
    })
}

/// The element type an object is written as in a format that holds dense tensors only
/// (`target`): its dense form's, when it is dense or `densify` allows densifying it, cast as
/// the view says ([`ObjectView::cast_floats`]).
pub(crate) fn dense_element_type(
    obj: &ObjectView<'_>,
    densify: bool,
    target: &str,
) -> Result<ElementType> {
    let ggml = match &obj.format {
        Format::Unknown(id) => zt_formats::ggml::GgmlType::by_layout_id(id),
        _ => None,
    };
    let sparse_or_quantized = ggml.is_some()
        || matches!(
            obj.format,
            Format::SparseCsr | Format::SparseCoo | Format::QuantizedGroup
        );
    if sparse_or_quantized && !densify {
        return Err(Error::argument(format!(
            "a {} object cannot be stored in {target} as it is (use densify: zt convert \
             --densify, ztio.convert(..., densify=True))",
            obj.format
        )));
    }
    obj.dense_element_type()
        .ok_or_else(|| match (&obj.format, ggml) {
            (Format::Dense, _) => Error::invalid("no data component"),
            // Blocks we cannot dequantize (Q8_1): densify cannot help either.
            (f, Some(t)) => Error::unsupported(format!(
                "a {f} object cannot be stored in {target}: dequantizing {} blocks is not \
                 supported (a .zt or GGUF output keeps them as they are)",
                t.name.to_uppercase()
            )),
            (f, None) => Error::argument(format!("a {f} object cannot be stored in {target}")),
        })
}
