//! Writing zTensor files, v2 or v1.2 ([`Version`]): blobs streamed as they are added, the
//! manifest last. The v2 specifics are in `writer_v2`; where a file goes is a [`Sink`].

use std::borrow::Cow;
use std::path::Path;

use zt_container::{AtomicFile, BlobWriter, ContainerVersion, Durability, Error, Result};
use zt_formats::{
    check_layout, ComponentLayout, DType, DigestAlgorithm, Element, ElementType, Format,
};
use zt_manifest::{Attributes, Component, Components, Manifest, Object, Value, WRITE_VERSION};

pub use crate::sink::Sink;
use crate::writer_v2::{self, V2Blobs, ALIGN_CANONICAL, ALIGN_COMPACT};

/// Which zTensor version a [`Writer`] (and a conversion) writes.
///
/// The default is [`Version::V2`]: ztensor 2.x, the current release of the original
/// implementation, opens v2 files only (see docs/decisions.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Version {
    /// zTensor v2 as ztensor 2.x writes it by default: blobs on 64 KiB boundaries. Objects
    /// added in bytewise name order without compression give the canonical form, byte for
    /// byte the original's.
    #[default]
    V2,
    /// zTensor v2 with blobs on 4096-byte boundaries (v2's floor, still valid v2 and what
    /// the original writes with `align=4096`): for models of many small tensors, where 64 KiB
    /// packing makes the file several times its payload.
    V2Compact,
    /// zTensor v1.2 (`ZTEN1000`), what ztensor 1.x reads.
    V1_2,
}

impl Version {
    /// The name the command line uses: `v2`, `v2-compact`, `v1.2`.
    pub fn name(self) -> &'static str {
        match self {
            Version::V2 => "v2",
            Version::V2Compact => "v2-compact",
            Version::V1_2 => "v1.2",
        }
    }

    /// Whether this is a v2 version.
    pub fn is_v2(self) -> bool {
        self != Version::V1_2
    }
}

/// The blob heap of the version being written.
#[derive(Debug)]
enum Blobs<W: Sink> {
    V1(BlobWriter<W>),
    V2(V2Blobs<W>),
}

/// Blobs at least this large are hashed on a second thread while they are written.
const PARALLEL_HASH_MIN: usize = 1 << 20;

/// How to store one object's components.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// zstd level (1-22; 3 is a good default), or `None` for raw. v2 writes
    /// `zt.zstd-seekable/1`, v1.2 one zstd frame.
    pub compression: Option<i32>,
    /// Digest to record for each component. v1.2: over its stored bytes, `None` for none,
    /// xxh3 refused. v2: over its decoded bytes, always one: xxh3 unless sha256 is asked
    /// for, crc32c refused.
    pub digest: Option<DigestAlgorithm>,
}

/// One component to write: its role, element type, and little-endian element bytes.
#[derive(Debug, Clone)]
pub struct ComponentData<'a> {
    /// Role name.
    pub role: String,
    /// Element type.
    pub element: ElementType,
    /// Element bytes, little-endian, uncompressed.
    pub bytes: Cow<'a, [u8]>,
}

impl<'a> ComponentData<'a> {
    /// A component of typed elements (borrowed on little-endian hosts).
    pub fn of<T: Element>(role: &str, data: &'a [T]) -> Self {
        ComponentData {
            role: role.to_owned(),
            element: T::element_type(),
            bytes: le_bytes(data),
        }
    }
}

/// A component whose bytes are already stored form (see [`Writer::add_encoded_object`]).
#[derive(Debug, Clone)]
pub struct EncodedComponent<'a> {
    /// Role name.
    pub role: String,
    /// Element type.
    pub element: ElementType,
    /// The stored bytes (compressed for zstd).
    pub stored: Cow<'a, [u8]>,
    /// Raw or zstd.
    pub encoding: zt_formats::Encoding,
    /// Decompressed size, required for zstd.
    pub uncompressed_length: Option<u64>,
    /// Digest of the stored bytes.
    pub digest: Option<zt_formats::Digest>,
}

/// An object to write in any format.
#[derive(Debug, Clone)]
pub struct ObjectData<'a> {
    /// Logical shape.
    pub shape: Vec<u64>,
    /// Format.
    pub format: Format,
    /// Object attributes.
    pub attributes: Attributes,
    /// Components (roles must be unique).
    pub components: Vec<ComponentData<'a>>,
}

/// Writes a zTensor file: v2 by default, v1.2 on request ([`Version`]).
///
/// Each object's blobs go to the sink as soon as it is added, so memory stays bounded by the
/// largest object. [`Writer::create`] writes to a temporary file beside the target and renames
/// it over the target in [`Writer::finish`]; dropping an unfinished writer leaves the old target
/// as it was and no temporary file behind. The same objects added in the same order give the
/// same bytes.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// use ztensor::{Version, Writer};
/// let mut w = Writer::new_version(Vec::new(), Version::V2Compact)?;
/// w.add("bias", &[3], &[0.5f32, -1.0, 2.0])?;
/// let bytes = w.finish()?;
/// assert_eq!(&bytes[..4], b"\x89ZT2");
/// // The blob is at 4096, the manifest at 8192; the footer's first field says so.
/// let footer = &bytes[bytes.len() - 40..];
/// assert_eq!(&footer[..8], &8192u64.to_le_bytes());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Writer<W: Sink> {
    blobs: Blobs<W>,
    version: Version,
    manifest: Manifest,
    options: WriteOptions,
}

impl Writer<AtomicFile> {
    /// Starts a file of the default [`Version`] that replaces `path` when finished, synced to
    /// disk then ([`Durability::Synced`]).
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        Self::create_with(path, Durability::Synced)
    }

    /// As [`Writer::create`], choosing whether [`Writer::finish`] waits for the disk. Both
    /// ways a killed process leaves the old file intact.
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("scratch.zt");
    /// let mut w = ztensor::Writer::create_with(&path, ztensor::Durability::Unsynced)?;
    /// w.add("x", &[1], &[1.0f32])?;
    /// w.finish()?; // in place, but not waited for on disk
    /// # Ok(())
    /// # }
    /// ```
    pub fn create_with(path: impl AsRef<Path>, durability: Durability) -> Result<Self> {
        Self::create_version(path, Version::default(), durability)
    }

    /// As [`Writer::create_with`], writing `version`.
    pub fn create_version(
        path: impl AsRef<Path>,
        version: Version,
        durability: Durability,
    ) -> Result<Self> {
        let path = path.as_ref();
        Writer::new_version(AtomicFile::create_with(path, durability)?, version)
            .map_err(|e| e.in_file(path))
    }
}

impl<W: Sink> Writer<W> {
    /// Starts a file of the default [`Version`] on any sink.
    pub fn new(sink: W) -> Result<Self> {
        Self::new_version(sink, Version::default())
    }

    /// Starts a file of `version` on any sink.
    pub fn new_version(sink: W, version: Version) -> Result<Self> {
        let blobs = match version {
            Version::V1_2 => Blobs::V1(
                BlobWriter::new(sink, ContainerVersion::V1)
                    .map_err(|e| Error::io(e, "cannot write the header"))?,
            ),
            Version::V2 => Blobs::V2(V2Blobs::new(sink, ALIGN_CANONICAL)?),
            Version::V2Compact => Blobs::V2(V2Blobs::new(sink, ALIGN_COMPACT)?),
        };
        Ok(Writer {
            blobs,
            version,
            manifest: Manifest {
                version: WRITE_VERSION.into(),
                ..Default::default()
            },
            options: WriteOptions::default(),
        })
    }

    /// The version being written.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Sets the options used by [`Writer::add`] and friends from now on.
    pub fn set_options(&mut self, options: WriteOptions) -> &mut Self {
        self.options = options;
        self
    }

    /// The options in force.
    pub fn options(&self) -> WriteOptions {
        self.options
    }

    /// Sets a file attribute.
    pub fn set_attribute(&mut self, key: impl Into<String>, value: impl Into<Value>) -> &mut Self {
        self.manifest.attributes.insert(key.into(), value.into());
        self
    }

    /// Sets all file attributes at once.
    pub fn set_attributes(&mut self, attributes: Attributes) -> &mut Self {
        self.manifest.attributes = attributes;
        self
    }

    /// Adds a dense object of typed elements.
    pub fn add<T: Element>(&mut self, name: &str, shape: &[u64], data: &[T]) -> Result<()> {
        self.add_with(name, shape, data, Attributes::new(), self.options)
    }

    /// Adds a dense object with attributes and its own options.
    pub fn add_with<T: Element>(
        &mut self,
        name: &str,
        shape: &[u64],
        data: &[T],
        attributes: Attributes,
        options: WriteOptions,
    ) -> Result<()> {
        let obj = ObjectData {
            shape: shape.to_vec(),
            format: Format::Dense,
            attributes,
            components: vec![ComponentData::of("data", data)],
        };
        self.add_object_with(name, obj, options)
    }

    /// Adds a dense bool object.
    pub fn add_bool(&mut self, name: &str, shape: &[u64], data: &[bool]) -> Result<()> {
        let obj = ObjectData {
            shape: shape.to_vec(),
            format: Format::Dense,
            attributes: Attributes::new(),
            components: vec![ComponentData {
                role: "data".into(),
                element: ElementType::plain(DType::Bool),
                bytes: Cow::Borrowed(bytemuck::cast_slice(data)),
            }],
        };
        self.add_object_with(name, obj, self.options)
    }

    /// Adds an object of any format with the writer's options.
    pub fn add_object(&mut self, name: &str, obj: ObjectData<'_>) -> Result<()> {
        self.add_object_with(name, obj, self.options)
    }

    /// Adds an object of any format. Its components are checked against the format's size
    /// rules, compressed and digested as `options` say, and written at once.
    pub fn add_object_with(
        &mut self,
        name: &str,
        obj: ObjectData<'_>,
        options: WriteOptions,
    ) -> Result<()> {
        self.check_new(name, &obj).map_err(|e| e.in_object(name))?;
        let mut order: Vec<&ComponentData<'_>> = obj.components.iter().collect();
        if self.version.is_v2() {
            // v2 writes an object's parts in bytewise order of their names, as the original.
            order.sort_by(|a, b| a.role.as_bytes().cmp(b.role.as_bytes()));
        }
        // Collected, not inserted one by one: an object copied from a file has as many
        // components as the file gives it, in its order.
        let components = order
            .into_iter()
            .map(|c| {
                self.write_component(c, options)
                    .map(|comp| (c.role.clone(), comp))
                    .map_err(|e| e.in_component(&c.role).in_object(name))
            })
            .collect::<Result<Components>>()?;
        let format = match self.version {
            Version::V1_2 => obj.format.name().to_owned(),
            _ => writer_v2::layout_id(&obj.format)?,
        };
        self.manifest.objects.insert(
            name.to_owned(),
            Object {
                shape: obj.shape,
                format,
                attributes: obj.attributes,
                components,
            },
        );
        Ok(())
    }

    fn check_new(&self, name: &str, obj: &ObjectData<'_>) -> Result<()> {
        if name.is_empty() {
            return Err(Error::argument("object name is empty"));
        }
        if self.manifest.objects.contains_key(name) {
            return Err(Error::argument("an object of this name was already added"));
        }
        let mut roles: Vec<&str> = obj.components.iter().map(|c| c.role.as_str()).collect();
        roles.sort_unstable();
        if let Some(w) = roles.windows(2).find(|w| w.first() == w.get(1)) {
            return Err(Error::argument(format!(
                "component {:?} given twice",
                w.first().copied().unwrap_or("")
            )));
        }
        for c in &obj.components {
            if c.role.is_empty() {
                return Err(Error::argument("component role is empty"));
            }
            if c.element.dtype == DType::Bool {
                crate::decode::check_bools(&c.bytes).map_err(|e| {
                    e.with_kind(zt_container::ErrorKind::InvalidArgument)
                        .in_component(&c.role)
                })?;
            }
        }
        if self.version.is_v2() {
            let parts: Vec<_> = obj
                .components
                .iter()
                .map(|c| (c.role.as_str(), &c.element, c.bytes.len() as u64))
                .collect();
            return writer_v2::check_object(&obj.format, &obj.shape, &parts);
        }
        let layout: Vec<_> = obj
            .components
            .iter()
            .map(|c| ComponentLayout {
                role: &c.role,
                element: &c.element,
                decoded_len: Some(c.bytes.len() as u64),
            })
            .collect();
        // A layout error here is the caller's, not a file's.
        check_layout(&obj.format, &obj.shape, &obj.attributes, &layout)
            .map_err(|e| Error::argument(e.to_string().replacen("invalid file: ", "", 1)))
    }

    fn write_component(
        &mut self,
        c: &ComponentData<'_>,
        options: WriteOptions,
    ) -> Result<Component> {
        let blobs = match &mut self.blobs {
            Blobs::V1(b) => b,
            Blobs::V2(v2) => {
                return v2.write_part(&c.element, &c.bytes, options.compression, options.digest)
            }
        };
        if options.digest == Some(DigestAlgorithm::Xxh3) {
            // v1.2 knows sha256 and crc32c only; an xxh3 digest would make the file unreadable.
            return Err(Error::argument(
                "v1.2 files have no xxh3 digests: choose sha256 or crc32c",
            ));
        }
        let (stored, uncompressed_length, encoding) = match options.compression {
            None => (Cow::Borrowed(&*c.bytes), None, None),
            Some(level) => (
                Cow::Owned(crate::codec::zstd_compress(&c.bytes, level)?),
                Some(c.bytes.len() as u64),
                Some("zstd".to_owned()),
            ),
        };
        let write = |blobs: &mut BlobWriter<W>| {
            blobs
                .append_blob(&stored)
                .map_err(|e| Error::io(e, "cannot write a blob"))
        };
        let (offset, digest) = match options.digest {
            None => (write(blobs)?, None),
            // Large blobs: hash on a second core while this one writes, so a digest costs no
            // time when writing is the slower of the two.
            Some(alg)
                if stored.len() >= PARALLEL_HASH_MIN && zt_formats::available_threads() > 1 =>
            {
                // rayon's pool keeps its threads: starting a thread per blob cost a fifth of
                // the time (the new thread begins on this core and migrates late).
                let mut digest = None;
                let offset = crate::pool::in_place_scope(|s| {
                    s.spawn(|_| digest = Some(alg.compute(&stored)));
                    write(blobs)
                })?;
                (offset, digest)
            }
            Some(alg) => {
                let d = alg.compute(&stored);
                (write(blobs)?, Some(d))
            }
        };
        if stored.len() >= PARALLEL_HASH_MIN {
            blobs.sink_mut().blob_written();
        }
        Ok(Component {
            dtype: c.element.dtype.name().to_owned(),
            logical_type: c.element.type_field().map(str::to_owned),
            offset,
            length: stored.len() as u64,
            uncompressed_length,
            encoding,
            digest: digest.map(|d| d.to_string()),
        })
    }

    /// Adds an object whose components are already encoded: stored bytes are written as they
    /// are, with their encoding, uncompressed length and digest (used to copy objects between
    /// files without decoding them).
    pub fn add_encoded_object(
        &mut self,
        name: &str,
        shape: Vec<u64>,
        format: Format,
        attributes: Attributes,
        components: Vec<EncodedComponent<'_>>,
    ) -> Result<()> {
        if name.is_empty() || self.manifest.objects.contains_key(name) {
            return Err(Error::argument("object name is empty or already added").in_object(name));
        }
        let blobs = match &mut self.blobs {
            Blobs::V1(b) => b,
            Blobs::V2(_) => {
                // v2 digests cover decoded bytes: raw components are written as data, and
                // encoded ones must be decoded by the caller first.
                let mut data = Vec::with_capacity(components.len());
                for c in components {
                    if c.encoding != zt_formats::Encoding::Raw {
                        return Err(Error::argument(format!(
                            "component {:?} is {}: a v2 writer takes decoded bytes",
                            c.role, c.encoding
                        ))
                        .in_object(name));
                    }
                    data.push(ComponentData {
                        role: c.role,
                        element: c.element,
                        bytes: c.stored,
                    });
                }
                let obj = ObjectData {
                    shape,
                    format,
                    attributes,
                    components: data,
                };
                let options = WriteOptions {
                    compression: None,
                    digest: None,
                };
                return self.add_object_with(name, obj, options);
            }
        };
        let layout: Vec<_> = components
            .iter()
            .map(|c| ComponentLayout {
                role: &c.role,
                element: &c.element,
                decoded_len: Some(c.uncompressed_length.unwrap_or(c.stored.len() as u64)),
            })
            .collect();
        check_layout(&format, &shape, &attributes, &layout).map_err(|e| e.in_object(name))?;
        let mut comps = Vec::with_capacity(components.len());
        for c in components {
            let offset = blobs
                .append_blob(&c.stored)
                .map_err(|e| Error::io(e, "cannot write a blob"))?;
            let zstd = c.encoding == zt_formats::Encoding::Zstd;
            comps.push((
                c.role.clone(),
                Component {
                    dtype: c.element.dtype.name().to_owned(),
                    logical_type: c.element.type_field().map(str::to_owned),
                    offset,
                    length: c.stored.len() as u64,
                    uncompressed_length: if zstd { c.uncompressed_length } else { None },
                    encoding: zstd.then(|| "zstd".to_owned()),
                    digest: c.digest.map(|d| d.to_string()),
                },
            ));
        }
        self.manifest.objects.insert(
            name.to_owned(),
            Object {
                shape,
                format: format.name().to_owned(),
                attributes,
                components: comps.into_iter().collect(),
            },
        );
        Ok(())
    }

    /// Writes the manifest and footer and completes the sink (for [`Writer::create`]: sync
    /// and rename over the target).
    pub fn finish(self) -> Result<W::Output> {
        let sink = match self.blobs {
            Blobs::V1(blobs) => blobs
                .finish(&self.manifest.encode())
                .map_err(|e| Error::io(e, "cannot write the manifest"))?,
            Blobs::V2(blobs) => blobs.finish(self.manifest)?,
        };
        sink.complete()
    }
}

/// Elements as little-endian bytes: borrowed on little-endian hosts, swapped copies elsewhere.
pub(crate) fn le_bytes<T: Element>(data: &[T]) -> Cow<'_, [u8]> {
    let bytes: &[u8] = bytemuck::cast_slice(data);
    if cfg!(target_endian = "little") {
        return Cow::Borrowed(bytes);
    }
    let size = T::DTYPE.size();
    let mut v = bytes.to_vec();
    for e in v.chunks_exact_mut(size) {
        e.reverse();
    }
    Cow::Owned(v)
}
