//! Writing zTensor v1.2 files: blobs streamed as they are added, the manifest last.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use zt_container::{AtomicFile, BlobWriter, ContainerVersion, Durability, Error, Result};
use zt_formats::{
    check_layout, ComponentLayout, DType, DigestAlgorithm, Element, ElementType, Format,
};
use zt_manifest::{Attributes, Component, Manifest, Object, Value, WRITE_VERSION};

/// Blobs at least this large are hashed on a second thread while they are written.
const PARALLEL_HASH_MIN: usize = 1 << 20;

/// Where a [`Writer`] puts the file, and what finishing it means.
pub trait Sink: Write {
    /// What [`Writer::finish`] returns.
    type Output;
    /// Completes the file: flush, and for [`AtomicFile`] sync and rename over the target.
    fn complete(self) -> Result<Self::Output>;
    /// Called after each large blob: a file sink may start writing it back to disk now.
    fn blob_written(&mut self) {}
}

impl Sink for AtomicFile {
    type Output = ();
    fn complete(self) -> Result<()> {
        self.commit()
    }
    fn blob_written(&mut self) {
        self.start_writeback();
    }
}

impl Sink for Vec<u8> {
    type Output = Vec<u8>;
    fn complete(self) -> Result<Vec<u8>> {
        Ok(self)
    }
}

impl Sink for std::fs::File {
    type Output = std::fs::File;
    fn complete(mut self) -> Result<std::fs::File> {
        self.flush().map_err(|e| Error::io(e, "cannot flush"))?;
        Ok(self)
    }
}

impl<W: Write> Sink for std::io::BufWriter<W> {
    type Output = W;
    fn complete(self) -> Result<W> {
        self.into_inner()
            .map_err(|e| Error::io(e.into_error(), "cannot flush"))
    }
}

/// How to store one object's components.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// zstd level (1-22; 3 is a good default), or `None` for raw.
    pub compression: Option<i32>,
    /// Digest to record for each component, over its stored bytes.
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

/// Writes a zTensor v1.2 file.
///
/// Each object's blobs go to the sink as soon as it is added, so memory stays bounded by the
/// largest object. [`Writer::create`] writes to a temporary file beside the target and renames
/// it over the target in [`Writer::finish`]; dropping an unfinished writer leaves the old target
/// as it was and no temporary file behind. The same objects added in the same order give the
/// same bytes.
#[derive(Debug)]
pub struct Writer<W: Sink> {
    blobs: BlobWriter<W>,
    manifest: Manifest,
    options: WriteOptions,
}

impl Writer<AtomicFile> {
    /// Starts a file that replaces `path` when finished, synced to disk then
    /// ([`Durability::Synced`]).
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
        let path = path.as_ref();
        Writer::new(AtomicFile::create_with(path, durability)?).map_err(|e| e.in_file(path))
    }
}

impl<W: Sink> Writer<W> {
    /// Starts a file on any sink.
    pub fn new(sink: W) -> Result<Self> {
        let blobs = BlobWriter::new(sink, ContainerVersion::V1)
            .map_err(|e| Error::io(e, "cannot write the header"))?;
        Ok(Writer {
            blobs,
            manifest: Manifest {
                version: WRITE_VERSION.into(),
                ..Default::default()
            },
            options: WriteOptions::default(),
        })
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
        let mut components = BTreeMap::new();
        for c in &obj.components {
            let comp = self
                .write_component(c, options)
                .map_err(|e| e.in_component(&c.role).in_object(name))?;
            components.insert(c.role.clone(), comp);
        }
        self.manifest.objects.insert(
            name.to_owned(),
            Object {
                shape: obj.shape,
                format: obj.format.name().to_owned(),
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
        let blobs = &mut self.blobs;
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
                let offset = rayon::in_place_scope(|s| {
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
            self.blobs.sink_mut().blob_written();
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
        let layout: Vec<_> = components
            .iter()
            .map(|c| ComponentLayout {
                role: &c.role,
                element: &c.element,
                decoded_len: Some(c.uncompressed_length.unwrap_or(c.stored.len() as u64)),
            })
            .collect();
        check_layout(&format, &shape, &attributes, &layout).map_err(|e| e.in_object(name))?;
        let mut comps = BTreeMap::new();
        for c in components {
            let offset = self
                .blobs
                .append_blob(&c.stored)
                .map_err(|e| Error::io(e, "cannot write a blob"))?;
            let zstd = c.encoding == zt_formats::Encoding::Zstd;
            comps.insert(
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
            );
        }
        self.manifest.objects.insert(
            name.to_owned(),
            Object {
                shape,
                format: format.name().to_owned(),
                attributes,
                components: comps,
            },
        );
        Ok(())
    }

    /// Writes the manifest and footer and completes the sink (for [`Writer::create`]: sync
    /// and rename over the target).
    pub fn finish(self) -> Result<W::Output> {
        let manifest = self.manifest.encode();
        let sink = self
            .blobs
            .finish(&manifest)
            .map_err(|e| Error::io(e, "cannot write the manifest"))?;
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
