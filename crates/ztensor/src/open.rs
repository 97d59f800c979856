//! Opening a file: [`OpenOptions`], telling the kind of a file from its first bytes, and the
//! one line of dispatch per kind. This is the only module that names the modules of
//! [`crate::files`].

use std::path::Path;

use zt_container::{Container, ContainerVersion, Result, Source};

use crate::files;
use crate::listing::{Limits, Listing};
use crate::reader::Reader;

/// How to open a file.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("m.zt");
/// # let mut w = ztensor::Writer::create(&path)?;
/// # w.add("w", &[2], &[1.0f32, 2.0])?;
/// # w.finish()?;
/// // Positional reads instead of a map: safe against another process truncating the file.
/// let r = ztensor::OpenOptions::new().unmapped(true).open(&path)?;
/// assert_eq!(&r.read::<f32>("w")?[..], &[1.0, 2.0]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    unmapped: bool,
    populate: bool,
    limits: Limits,
    skip_mag_checksum: bool,
}

/// Opens a file of any kind we read (`.zt` of every version, `.mag` of every layout,
/// `.safetensors`), mapped.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// let r = ztensor::open(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/v123_all.zt"))?;
/// for object in &r {
///     println!("{} {:?} {}", object.name(), object.shape(), object.format);
/// }
/// # Ok(())
/// # }
/// ```
pub fn open(path: impl AsRef<Path>) -> Result<Reader> {
    OpenOptions::new().open(path)
}

impl OpenOptions {
    /// Defaults: memory-mapped, default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read with positional reads instead of a memory map. Slower (every read copies), but a
    /// file truncated by another process gives an I/O error instead of killing the process
    /// with SIGBUS.
    pub fn unmapped(mut self, yes: bool) -> Self {
        self.unmapped = yes;
        self
    }

    /// Map every page of the file on a background thread, in file order, ahead of the reads
    /// (default: no; pages are mapped as they are first touched). For loaders that read every
    /// tensor: the page faults of first touches then happen on the second core, which makes
    /// reading a mapped file as fast as scanning memory, and a file not yet in the page cache
    /// is read ahead. Leave it off for tools that look at a few tensors of a large file. No
    /// effect with [`OpenOptions::unmapped`]. See [`Source::map_populated`].
    pub fn populate(mut self, yes: bool) -> Self {
        self.populate = yes;
        self
    }

    /// Whether to verify the CRC-32C of `.mag` layouts that have one (default: yes). magnetron
    /// itself never checks it; turn this off to read a damaged file.
    pub fn verify_mag_checksum(mut self, yes: bool) -> Self {
        self.skip_mag_checksum = !yes;
        self
    }

    /// Replaces all limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Caps one component's decompressed size.
    pub fn max_decompressed_len(mut self, bytes: u64) -> Self {
        self.limits.max_decompressed_len = bytes;
        self
    }

    /// Opens `path`.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Reader> {
        let path = path.as_ref();
        let source = if self.unmapped {
            Source::unmapped(path)
        } else if self.populate {
            Source::map_populated(path)
        } else {
            Source::map(path)
        }?;
        self.open_source(source).map_err(|e| e.in_file(path))
    }

    /// Opens bytes already in memory.
    pub fn open_bytes(&self, bytes: Vec<u8>) -> Result<Reader> {
        self.open_source(Source::from_vec(bytes))
    }

    /// Opens any [`Source`]: tells the kind from the first bytes and validates the whole file.
    pub fn open_source(&self, source: Source) -> Result<Reader> {
        let (source, listing) = self.list(source)?;
        Ok(Reader::new(source, listing, self.limits))
    }

    /// Tells the kind by the first bytes: .mag magics, then zTensor's, then a safetensors
    /// header (u64 size, then '{'); anything else gets the zTensor container's magic error.
    fn list(&self, source: Source) -> Result<(Source, Listing)> {
        let mut head = [0u8; 9];
        let n = source.len().min(9) as usize;
        let head = head.get_mut(..n).unwrap_or(&mut []);
        source.read_into(0, head)?;
        if let Some(magic) = head.first_chunk::<4>() {
            if zt_mag::is_mag_magic(magic) {
                let listing = files::mag::list(&source, !self.skip_mag_checksum)?;
                return Ok((source, listing));
            }
        }
        if !head.starts_with(b"ZTEN") && files::safetensors::looks_like(head) {
            let listing = files::safetensors::list(&source)?;
            return Ok((source, listing));
        }
        let container = Container::parse_with_limit(source, self.limits.max_manifest_len)?;
        let listing = match container.version() {
            ContainerVersion::V1 => files::zt_v1::list(&container, &self.limits),
            ContainerVersion::V0_1 => files::zt_v0_1::list(&container, &self.limits),
        }?;
        Ok((container.into_source(), listing))
    }
}
