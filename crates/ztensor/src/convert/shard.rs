//! Sharded zTensor v2 output, by the format's positional convention: a root `<stem>.zt` whose
//! manifest lists every object and a shard table, and shards `<stem>-00001-of-0000N.zt` beside
//! it, each an ordinary v2 file with its own manifest (what the original recommends: any tool
//! can open a shard alone). The root holds no data: each of its parts names the shard that
//! holds the blob, with the blob's offset, length and digest there.
//!
//! Objects go to shards in bytewise name order, a new shard starting when the next object
//! would take the current one past the size asked for (an object larger than that gets a
//! shard of its own). Each shard's table entry is its exact size and the SHA-256 of the whole
//! file, as in the original's sample.
//!
//! - [`write_sharded`] / [`write_sharded_with_attributes`]: every object of one file.
//! - [`write_sharded_views`]: objects from anywhere (a sharded set's, several files').

use std::io::Read;
use std::path::{Path, PathBuf};

use zt_container::{AtomicFile, BlobWriterV2, ContainerV2, Error, Result, Source};
use zt_formats::DigestAlgorithm;
use zt_manifest::{decode_manifest_v2, encode_manifest_v2, DecodeLimits, ManifestV2, ShardV2};

use super::{copy_object, copy_object_densified, in_output, ConvertOptions};
use crate::reader::Reader;
use crate::sink::Staged;
use crate::view::ObjectView;
use crate::writer::{Version, Writer};

/// Options of [`write_sharded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardOptions {
    /// Most decoded bytes of objects per shard (one larger object gets a shard of its own).
    pub max_shard_size: u64,
    /// How objects are converted; `version` must be a v2 version.
    pub convert: ConvertOptions,
    /// Write sparse objects dense and quantized ones dequantized, as
    /// [`copy_object_densified`] copies them (v2 has no `quantized_group` layout).
    pub densify: bool,
}

/// Writes every object of `reader` as a sharded v2 model: the shards beside `root`, then the
/// root. Every file is written under a temporary name first and replaces its target only
/// once all are written (shards, then the root, which is what a reader opens): a failure or
/// a kill while writing leaves an old model at these paths whole and no new file behind.
/// Returns the paths of the shards written.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let src = dir.path().join("src.zt");
/// # let mut w = ztensor::Writer::create(&src)?;
/// # w.add("a", &[2], &[1.0f32, 2.0])?;
/// # w.add("b", &[2], &[3.0f32, 4.0])?;
/// # w.finish()?;
/// use ztensor::convert::{write_sharded, ShardOptions};
/// let root = dir.path().join("model.zt");
/// let options = ShardOptions { max_shard_size: 8, convert: Default::default(), densify: false };
/// let shards = write_sharded(&ztensor::open(&src)?, &root, options)?;
/// assert!(shards[1].ends_with("model-00002-of-00002.zt"));
/// assert_eq!(&ztensor::open(&root)?.read::<f32>("b")?[..], &[3.0, 4.0]);
/// # Ok(())
/// # }
/// ```
pub fn write_sharded(
    reader: &Reader,
    root: impl AsRef<Path>,
    options: ShardOptions,
) -> Result<Vec<PathBuf>> {
    write_sharded_with_attributes(reader, root, options, reader.attributes())
}

/// [`write_sharded`] with the root's file attributes given instead of the reader's (as `zt
/// convert --set` makes them).
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let src = dir.path().join("src.zt");
/// # let mut w = ztensor::Writer::create(&src)?;
/// # w.add("a", &[2], &[1.0f32, 2.0])?;
/// # w.finish()?;
/// use ztensor::convert::{write_sharded_with_attributes, ShardOptions};
/// let mut attributes = ztensor::Attributes::new();
/// attributes.insert("format".into(), ztensor::Value::Text("pt".into()));
/// let root = dir.path().join("model.zt");
/// let options = ShardOptions { max_shard_size: 8, convert: Default::default(), densify: false };
/// write_sharded_with_attributes(&ztensor::open(&src)?, &root, options, &attributes)?;
/// assert_eq!(ztensor::open(&root)?.attributes(), &attributes);
/// # Ok(())
/// # }
/// ```
pub fn write_sharded_with_attributes(
    reader: &Reader,
    root: impl AsRef<Path>,
    options: ShardOptions,
    attributes: &crate::Attributes,
) -> Result<Vec<PathBuf>> {
    let objects = reader
        .objects()
        .iter()
        .map(|o| reader.object(&o.name))
        .collect::<Result<Vec<_>>>()?;
    write_sharded_views(&objects, root, options, attributes)
}

/// [`write_sharded_with_attributes`] of objects from anywhere: the objects of a sharded set
/// (`ShardedSet::objects`), or of several files, in one sharded v2 model. Objects that are no
/// numbers are left out, as are unreadable ones when `options.convert.skip_unreadable` says.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let (a, b) = (dir.path().join("a.zt"), dir.path().join("b.zt"));
/// # let mut w = ztensor::Writer::create(&a)?;
/// # w.add("x", &[2], &[1.0f32, 2.0])?;
/// # w.finish()?;
/// # let mut w = ztensor::Writer::create(&b)?;
/// # w.add("y", &[2], &[3.0f32, 4.0])?;
/// # w.finish()?;
/// use ztensor::convert::{write_sharded_views, ShardOptions};
/// let (ra, rb) = (ztensor::open(&a)?, ztensor::open(&b)?);
/// let objects = [ra.object("x")?, rb.object("y")?];
/// let root = dir.path().join("model.zt");
/// let options = ShardOptions { max_shard_size: 8, convert: Default::default(), densify: false };
/// let shards = write_sharded_views(&objects, &root, options, &Default::default())?;
/// assert_eq!(shards.len(), 2);
/// assert_eq!(&ztensor::open(&root)?.read::<f32>("y")?[..], &[3.0, 4.0]);
/// # Ok(())
/// # }
/// ```
pub fn write_sharded_views(
    objects: &[ObjectView<'_>],
    root: impl AsRef<Path>,
    options: ShardOptions,
    attributes: &crate::Attributes,
) -> Result<Vec<PathBuf>> {
    let root = root.as_ref();
    let alignment = match options.convert.version {
        Version::V2 => 65536,
        Version::V2Compact => 4096,
        Version::V1_2 => return Err(Error::argument("sharded output is zTensor v2 only")),
    };
    if options.max_shard_size == 0 {
        return Err(Error::argument("the shard size must be at least 1 byte"));
    }
    let stem = root
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| Error::argument("the root path has no file name in UTF-8"))?;
    let dir = match root.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let groups = plan(objects, options);
    let n = groups.len();
    let mut manifest = ManifestV2 {
        attributes: attributes.clone(),
        ..Default::default()
    };
    let mut paths = Vec::with_capacity(n);
    let mut staged = Vec::with_capacity(n);
    // Each staged shard keeps its (nameless) temporary open until the root is written.
    zt_container::make_room_for_open_files(n);
    for (i, group) in groups.iter().enumerate() {
        let name = format!("{:05}-of-{n:05}", i + 1);
        let path = dir.join(format!("{stem}-{name}.zt"));
        // Written under a temporary name; in place only once the root is written too.
        let file = Staged(AtomicFile::create_with(&path, options.convert.durability)?);
        let mut w =
            Writer::new_version(file, options.convert.version).map_err(|e| e.in_file(&path))?;
        for &&object in group {
            // The input's faults are left for the caller to place in the input.
            let copied = if options.densify {
                copy_object_densified(object, &mut w, options.convert)
            } else {
                copy_object(object, &mut w, options.convert)
            };
            copied.map_err(|e| in_output(e, &path))?;
        }
        let file = w.finish().map_err(|e| e.in_file(&path))?;
        let written = file.temp_path().to_path_buf();
        let (size, digest) = identity(&written).map_err(|e| e.in_file(&path))?;
        let objects = shard_objects(&written).map_err(|e| e.in_file(&path))?;
        staged.push(file);
        for mut o in objects {
            for p in &mut o.parts {
                p.shard = Some(name.clone());
            }
            manifest.objects.push(o);
        }
        manifest.shards.push(ShardV2 {
            name,
            size,
            digest,
            at: 0,
        });
        paths.push(path);
    }
    let bytes = encode_manifest_v2(&manifest)?;
    let file = AtomicFile::create_with(root, options.convert.durability)?;
    let io = |e| Error::io(e, "cannot write the root").in_file(root);
    let blobs = BlobWriterV2::with_padding(file, alignment, AtomicFile::write_zeros).map_err(io)?;
    let root_file = blobs
        .finish(&bytes, zt_formats::xxh3_64(&bytes))
        .map_err(io)?;
    // Everything is written: the shards replace their targets, then the root. Until here a
    // failure or a kill left an old model at these paths whole, and no new file behind.
    for shard in staged {
        shard.commit()?;
    }
    root_file.commit()?;
    Ok(paths)
}

/// The objects of each shard, in bytewise name order.
fn plan<'o, 'r>(
    objects: &'o [ObjectView<'r>],
    options: ShardOptions,
) -> Vec<Vec<&'o ObjectView<'r>>> {
    let objects: Vec<&ObjectView<'r>> = objects
        .iter()
        .filter(|o| o.skipped().is_none())
        .filter(|o| !(options.convert.skip_unreadable && o.defect.is_some()))
        .collect();
    super::plan_shards(objects, options.max_shard_size)
}

/// A shard's size and the SHA-256 of its bytes.
fn identity(path: &Path) -> Result<(u64, String)> {
    let io = |e| Error::io(e, "cannot read a shard back").in_file(path);
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = DigestAlgorithm::Sha256.hasher();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(buf.get(..n).unwrap_or_default());
        size = size
            .checked_add(n as u64)
            .ok_or_else(|| Error::invalid("shard size overflows"))?;
    }
    Ok((size, hasher.finish().to_string()))
}

/// The objects of a shard just written, as its own manifest lists them.
fn shard_objects(path: &Path) -> Result<Vec<zt_manifest::ObjectV2>> {
    let c = ContainerV2::parse(Source::map(path)?, zt_container::layout::MAX_MANIFEST_LEN)
        .map_err(|e| e.in_file(path))?;
    let bytes = c.manifest_bytes()?;
    let m = decode_manifest_v2(&bytes, c.footer().manifest_offset, DecodeLimits::default())?;
    Ok(m.objects)
}
