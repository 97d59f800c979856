//! Sharded output in Hugging Face's convention: shards `<stem>-00001-of-0000N.<ext>` beside
//! a JSON index `<stem>.<ext>.index.json` (`metadata.total_size`, `weight_map`), for
//! `.safetensors` or `.zt` shards, each shard an ordinary file any tool opens alone.
//!
//! Objects go to shards in bytewise name order, a new shard starting when the next object
//! would take the current one past the size asked for (an object larger than that gets a
//! shard of its own): the same objects and size always give the same files. Sizes are the
//! objects' decoded bytes. Every file is first written under a temporary name beside its
//! target ([`Staged`]); only when all are written do they replace their targets, the shards
//! and then the index. A failure or a kill while writing leaves an old set at the same paths
//! whole (its shards are not replaced one by one under its index) and no new file behind.

use std::io::Write;
use std::path::{Path, PathBuf};

use zt_container::{AtomicFile, Durability, Error, Result};
use zt_manifest::{Attributes, Value};

use super::{copy_object, copy_object_densified, in_output, ConvertOptions};
use crate::sharded::ShardIndex;
use crate::sink::Staged;
use crate::view::ObjectView;
use crate::writer::Writer;

/// What each shard of [`write_indexed`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardKind {
    /// `.safetensors` shards (dense objects; `densify` writes the others dense).
    #[cfg(feature = "safetensors")]
    Safetensors {
        /// Write sparse objects dense and quantized ones dequantized.
        densify: bool,
    },
    /// `.zt` shards, each object copied as [`copy_object`] copies it.
    Zt(ConvertOptions),
    /// `.zt` shards with sparse objects written dense and quantized ones dequantized, each
    /// object copied as [`copy_object_densified`] copies it.
    ZtDensified(ConvertOptions),
}

/// Options of [`write_indexed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedOptions {
    /// Most decoded bytes of objects per shard (one larger object gets a shard of its own).
    pub max_shard_size: u64,
    /// The shards' kind.
    pub kind: ShardKind,
    /// Whether each file is synced to disk before it is renamed into place.
    pub durability: Durability,
}

/// What [`write_indexed`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedFiles {
    /// The index.
    pub index: PathBuf,
    /// The shards, in order.
    pub shards: Vec<PathBuf>,
}

/// The paths a sharded output `output` takes: `dir/model.safetensors` (or
/// `dir/model.safetensors.index.json`) gives the index `dir/model.safetensors.index.json`
/// and shards `dir/model-0000i-of-0000N.safetensors`. Returns (index, folder, stem, extension).
fn layout(output: &Path) -> Result<(PathBuf, PathBuf, String, String)> {
    let name = output
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::argument("the output path has no file name in UTF-8"))?;
    let base = name.strip_suffix(".index.json").unwrap_or(name);
    let (stem, ext) = base
        .rsplit_once('.')
        .filter(|(s, e)| !s.is_empty() && !e.is_empty())
        .ok_or_else(|| {
            Error::argument(format!(
                "{name:?}: a sharded output is named like model.safetensors or model.zt"
            ))
        })?;
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((
        dir.join(format!("{base}.index.json")),
        dir,
        stem.to_owned(),
        ext.to_owned(),
    ))
}

/// Writes `objects` (of one reader or of a sharded set) as shards beside `output` and an
/// index, in Hugging Face's convention; `attributes` go into every shard (as `__metadata__`
/// for safetensors: text only), the index's metadata holds `index_metadata` (an input set's
/// own, such as `total_parameters`) and `total_size`, computed anew. The files replace their
/// targets only once every one is written, the index last (see the module); a set the new
/// index replaces loses the shards the new one does not use (resharding in place leaves no
/// old shard behind).
///
/// ```
/// # #[cfg(feature = "safetensors")]
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let src = dir.path().join("src.zt");
/// # let mut w = ztensor::Writer::create(&src)?;
/// # w.add("a", &[2], &[1.0f32, 2.0])?;
/// # w.add("b", &[2], &[3.0f32, 4.0])?;
/// # w.finish()?;
/// use ztensor::convert::{write_indexed, IndexedOptions, ShardKind};
/// let r = ztensor::open(&src)?;
/// let objects: Vec<_> = r.iter().collect();
/// let options = IndexedOptions {
///     max_shard_size: 8,
///     kind: ShardKind::Safetensors { densify: false },
///     durability: ztensor::Durability::Unsynced,
/// };
/// let out = dir.path().join("model.safetensors");
/// let files = write_indexed(&objects, r.attributes(), &Default::default(), &out, options)?;
/// assert!(files.index.ends_with("model.safetensors.index.json"));
/// assert!(files.shards[1].ends_with("model-00002-of-00002.safetensors"));
/// let set = ztensor::ShardedSet::open(&files.index)?;
/// assert_eq!(&set.object("b")?.read::<f32>()?[..], &[3.0, 4.0]);
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "safetensors"))]
/// # fn main() {}
/// ```
pub fn write_indexed(
    objects: &[ObjectView<'_>],
    attributes: &Attributes,
    index_metadata: &Attributes,
    output: impl AsRef<Path>,
    options: IndexedOptions,
) -> Result<IndexedFiles> {
    if options.max_shard_size == 0 {
        return Err(Error::argument("the shard size must be at least 1 byte"));
    }
    let objects = &super::numbers_only(objects)[..];
    let groups = plan(objects, options.max_shard_size);
    write_planned(
        &groups,
        attributes,
        index_metadata,
        output.as_ref(),
        options,
    )
}

/// As [`write_indexed`], with the objects already dealt into shards: `groups[i]` is shard
/// `i + 1`'s objects (written in bytewise name order; `max_shard_size` is not used). For
/// keeping a set's own shards when it is converted or downloaded (`zt convert INDEX
/// OUT.index.json` without `--shard-size`).
///
/// ```
/// # #[cfg(feature = "safetensors")]
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let src = dir.path().join("src.zt");
/// # let mut w = ztensor::Writer::create(&src)?;
/// # w.add("a", &[2], &[1.0f32, 2.0])?;
/// # w.add("b", &[2], &[3.0f32, 4.0])?;
/// # w.add("c", &[2], &[5.0f32, 6.0])?;
/// # w.finish()?;
/// use ztensor::convert::{write_indexed_groups, IndexedOptions, ShardKind};
/// let r = ztensor::open(&src)?;
/// let (a, b, c) = (r.object("a")?, r.object("b")?, r.object("c")?);
/// let options = IndexedOptions {
///     max_shard_size: u64::MAX,
///     kind: ShardKind::Safetensors { densify: false },
///     durability: ztensor::Durability::Unsynced,
/// };
/// let out = dir.path().join("model.safetensors");
/// let groups = [vec![c, a], vec![b]];
/// let files = write_indexed_groups(&groups, r.attributes(), &Default::default(), &out, options)?;
/// let set = ztensor::ShardedSet::open(&files.index)?;
/// assert!(set.shard_of("c").unwrap().ends_with("model-00001-of-00002.safetensors"));
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "safetensors"))]
/// # fn main() {}
/// ```
pub fn write_indexed_groups(
    groups: &[Vec<ObjectView<'_>>],
    attributes: &Attributes,
    index_metadata: &Attributes,
    output: impl AsRef<Path>,
    options: IndexedOptions,
) -> Result<IndexedFiles> {
    let mut sorted: Vec<Vec<&ObjectView<'_>>> = Vec::with_capacity(groups.len());
    for group in groups {
        let mut g: Vec<&ObjectView<'_>> = group.iter().filter(|o| o.skipped().is_none()).collect();
        g.sort_unstable_by(|a, b| a.name().as_bytes().cmp(b.name().as_bytes()));
        sorted.push(g);
    }
    write_planned(
        &sorted,
        attributes,
        index_metadata,
        output.as_ref(),
        options,
    )
}

/// Writes the shards `groups` and their index (see [`write_indexed`]).
fn write_planned(
    groups: &[Vec<&ObjectView<'_>>],
    attributes: &Attributes,
    index_metadata: &Attributes,
    output: &Path,
    options: IndexedOptions,
) -> Result<IndexedFiles> {
    let (index_path, dir, stem, ext) = layout(output)?;
    // The shards of a set this one replaces: those the new index does not name go once it is
    // in place. An unreadable old index is not ours to judge: its files stay.
    let replaced: Vec<String> = crate::sharded::read_index(&index_path)
        .map(|old| old.shards)
        .unwrap_or_default();
    let n = groups.len();
    let objects: usize = groups.iter().map(Vec::len).sum();
    let mut index = ShardIndex {
        metadata: index_metadata.clone(),
        shards: Vec::with_capacity(n),
        entries: Vec::with_capacity(objects),
        groups: Vec::new(),
    };
    let mut total = 0u64;
    let mut shards = Vec::with_capacity(n);
    let mut staged = Vec::with_capacity(n);
    // Each staged shard keeps its (nameless) temporary open until the index is written.
    zt_container::make_room_for_open_files(n);
    for (i, group) in groups.iter().enumerate() {
        let file = format!("{stem}-{:05}-of-{n:05}.{ext}", i + 1);
        let path = dir.join(&file);
        // The input's faults are placed by the caller, who knows where the object came from.
        staged
            .push(write_shard(group, attributes, &path, options).map_err(|e| in_output(e, &path))?);
        for o in group {
            index.entries.push((o.name().to_owned(), i as u32));
            total = total.saturating_add(super::decoded_size(o));
        }
        index.shards.push(file);
        shards.push(path);
    }
    index
        .entries
        .sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    index
        .metadata
        .insert("total_size".into(), Value::Integer(i128::from(total)));
    let mut file = AtomicFile::create_with(&index_path, options.durability)?;
    file.write_all(index.to_json().as_bytes())
        .map_err(|e| Error::io(e, "cannot write the index").in_file(&index_path))?;
    // Every file is written: only now do they replace their targets, the index last. Until
    // here a failure (or a kill) left the old set as it was and no new file behind.
    for shard in staged {
        shard.commit()?;
    }
    file.commit()?;
    // The old index's shard names are the old file's to choose: looked up in a set.
    let kept: std::collections::HashSet<&str> = index.shards.iter().map(String::as_str).collect();
    for old in replaced.iter().filter(|old| !kept.contains(old.as_str())) {
        // Checked when the old index was parsed: a relative path in the index's folder or
        // below it. The folders it leaves empty go too (a folder still holding anything is
        // kept: `remove_dir` refuses it).
        let removed = std::fs::remove_file(dir.join(old));
        for folder in std::path::Path::new(old).ancestors().skip(1) {
            if folder.as_os_str().is_empty() || std::fs::remove_dir(dir.join(folder)).is_err() {
                break;
            }
        }
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(
                    Error::io(e, format!("cannot remove the replaced shard {old:?}"))
                        .in_file(&index_path),
                )
            }
            _ => {}
        }
    }
    Ok(IndexedFiles {
        index: index_path,
        shards,
    })
}

/// One shard's file, written but not yet in place (see [`Staged`]).
fn write_shard(
    group: &[&ObjectView<'_>],
    attributes: &Attributes,
    path: &Path,
    options: IndexedOptions,
) -> Result<AtomicFile> {
    match options.kind {
        #[cfg(feature = "safetensors")]
        ShardKind::Safetensors { densify } => {
            let views: Vec<ObjectView<'_>> = group.iter().map(|v| **v).collect();
            super::safetensors::safetensors_views_staged(
                &views,
                (!attributes.is_empty()).then_some(attributes),
                path,
                densify,
                options.durability,
            )
        }
        ShardKind::Zt(convert) | ShardKind::ZtDensified(convert) => {
            let densify = matches!(options.kind, ShardKind::ZtDensified(_));
            let file = Staged(AtomicFile::create_with(path, options.durability)?);
            let mut w = Writer::new_version(file, convert.version)?;
            w.set_attributes(attributes.clone());
            for o in group {
                if densify {
                    copy_object_densified(**o, &mut w, convert)?;
                } else {
                    copy_object(**o, &mut w, convert)?;
                }
            }
            w.finish()
        }
    }
}

/// The objects of each shard, in bytewise name order (the one planner).
fn plan<'a, 'r>(objects: &'a [ObjectView<'r>], max: u64) -> Vec<Vec<&'a ObjectView<'r>>> {
    super::plan_shards(objects.iter().collect(), max)
}
