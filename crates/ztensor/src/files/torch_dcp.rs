//! PyTorch distributed checkpoints (`torch.distributed.checkpoint.save`, "DCP"): a folder
//! holding `.metadata`, a pickle of the checkpoint's `Metadata`, and the data files
//! `__<rank>_<n>.distcp`, in which each saved tensor (or each rank's chunk of a sharded one)
//! is a `torch.save` archive of its own at an offset. The file opened is `.metadata` (or
//! the folder, see [`crate::model_file`]); the data files are opened as the listing's shards.
//!
//! - The pickle is run by the PyTorch reader's machine ([`crate::files::torch::pickle`]),
//!   which makes each record of `torch.distributed.checkpoint` its fields: nothing is
//!   executed. `state_dict_metadata` gives each tensor's dtype, size and chunks;
//!   `storage_data` each chunk's data file, offset and length.
//! - Each chunk's archive is listed by the PyTorch reader through a window onto its data file
//!   ([`Window`]); its one tensor's bytes are then a range of that data file, read from the
//!   map without a copy when the tensor is in one chunk.
//! - A tensor in several chunks (a `DTensor` or `ShardedTensor` saved by several ranks) is
//!   one object whose chunks are checked to tile it ([`zt_formats::tile`]) and are placed
//!   where they lie as it is read.
//! - Values other than tensors (`BytesStorageMetadata`: anything `torch.save` pickled for a
//!   rank, such as a step count) are each an archive too, whose pickle the PyTorch reader
//!   makes attributes (a scalar under the value's name) and, for the tensors it holds (a
//!   tuple of tensors, which DCP pickles whole), objects under `name.index`; the file
//!   attribute `torch.dcp.bytes` names the values.
//! - Chunks and values written through DCP's zstd transform (`stream.zstd/1`) are their
//!   archive as one zstd stream: the archive is listed from the stream's front
//!   ([`crate::files::torch::streamed`]), and each tensor is a span of what the stream
//!   decodes to, decoded up to its end when read and checked against its record's CRC-32
//!   (a tensor in several compressed chunks: boxes, each a span of its chunk's stream);
//!   other transforms are listed with a defect.
//! - Data files must be plain names in the checkpoint's folder; data files saved as
//!   safetensors (`serialization_format=SAFETENSORS`), which torch cannot load, are refused
//!   as such.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zt_container::{Error, RangeRead, Result, Source};
use zt_formats::{tile, BoxTable, Piece, StreamSpan, Tiling};
use zt_manifest::{Attributes, Value, ValueBudget};

use crate::files::torch::dtypes::dtype_element;
use crate::files::torch::pickle::{Heap, Machine, Obj, Pv, PICKLE_LIMITS};
use crate::files::zt_v2::OpenShard;
use crate::listing::{sort_by_name, Limits, Listing};
use crate::model::{Arrangement, ByteOrder, Defect, FileVersion, ObjectInfo, ShardInfo};
use crate::zip;

/// The most data files a checkpoint may name (each is a file held open).
const MAX_DATA_FILES: usize = 4096;
/// The most chunks one tensor may have (each is an archive listed at open).
const MAX_CHUNKS: usize = 1 << 16;
/// The longest data file name (a real one is `__<rank>_<n>.distcp`).
const MAX_FILE_NAME: usize = 255;
/// What listing a checkpoint's compressed archives may decode at open, at least: four times
/// its data files' bytes when that is more. Listing decodes each archive's front, and the
/// storages before its last one (a value holding several tensors); a stream that decodes to
/// far more than it stores must not make opening decode without end.
const MIN_OPEN_DECODE: u64 = 1 << 30;
/// The most fields a record of `torch.distributed.checkpoint` may have (the largest,
/// `Metadata`, has five): a field is found by a search over them, and one record may be
/// shared by every entry of the file, so a larger one would make listing cost their product.
const MAX_RECORD_FIELDS: usize = 64;

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("invalid PyTorch distributed checkpoint: {what}"))
}

/// Where one chunk's archive lies: its data file's name, offset and length.
#[derive(Debug, Clone)]
struct Stored {
    file: String,
    offset: u64,
    length: u64,
    /// The storage transform it was written through.
    transform: Transform,
}

/// A storage transform (DCP's extensions): what its entry's `transform_descriptors` name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Transform {
    /// None: the chunk is the archive.
    None,
    /// `stream.zstd/1` (DCP's `ZStandard`): the archive compressed as one zstd stream.
    Zstd,
    /// Descriptors this reader does not undo (another extension, or several).
    Other(String),
}

impl Stored {
    /// Why this reader cannot undo the chunk's transform, if it cannot.
    fn transform_defect(&self) -> Option<String> {
        match &self.transform {
            Transform::None => None,
            Transform::Zstd if cfg!(feature = "zstd") => None,
            Transform::Zstd => Some(
                "written through DCP's zstd transform, and this build of ztensor has no zstd \
                 support (feature \"zstd\")"
                    .to_owned(),
            ),
            Transform::Other(names) => Some(format!(
                "written through the storage transform {names}, which this reader does not \
                 undo (it undoes DCP's stream.zstd/1)"
            )),
        }
    }
}

/// One chunk of a tensor: where it starts and how far it extends in each dimension.
struct Chunk {
    offsets: Vec<u64>,
    sizes: Vec<u64>,
}

/// A tensor as `state_dict_metadata` describes it.
struct TensorMeta {
    dtype: String,
    size: Vec<u64>,
    chunks: Vec<Chunk>,
}

/// Lists the distributed checkpoint whose `.metadata` is `source`, opened from `path` (its
/// data files lie beside it; `None`: opened from memory, whose data cannot be found).
pub(crate) fn list(
    source: &Source,
    path: Option<&Path>,
    limits: &Limits,
    open_shard: OpenShard<'_>,
) -> Result<Listing> {
    let pickled = limits.read_whole(source, "the checkpoint's .metadata")?;
    let mut heap = Heap::default();
    let (root, _) = Machine::new(&mut heap, PICKLE_LIMITS, 0).run(&pickled)?;
    let fields = record(&heap, root, "the checkpoint's Metadata")?;
    let tensors = field(&heap, fields, "state_dict_metadata")
        .ok_or_else(|| bad("Metadata has no state_dict_metadata"))?;
    let tensors = dict(&heap, tensors, "state_dict_metadata")?;
    let storage =
        field(&heap, fields, "storage_data").ok_or_else(|| bad("Metadata has no storage_data"))?;
    let storage = storage_index(
        &heap,
        dict(&heap, storage, "storage_data")?,
        limits.decode.max_rank,
    )?;

    // Every tensor's metadata, checked before any data file is opened. Each chunk has an
    // entry of its own in storage_data, so the chunks of all tensors together are no more
    // than its entries: a chunk list shared by many tensors costs no more than the file's
    // bytes pay for.
    let mut metas = zt_container::internal::try_with_capacity(tensors.len())?;
    let mut byte_values = Vec::new();
    let mut chunks_left = storage.len();
    for &(k, v) in tensors {
        let name = heap
            .text(k)
            .ok_or_else(|| bad("a name in state_dict_metadata is not a string"))?;
        if matches!(heap.get(v), Some(Obj::Opaque(_))) {
            // BytesStorageMetadata: a record with no fields.
            byte_values.push(name);
            continue;
        }
        let meta =
            tensor_meta(&heap, v, limits, &mut chunks_left).map_err(|e| e.in_object(name))?;
        metas.push((name, meta));
    }

    // The data files, numbered from 1 in name order (a B-tree: names come from the file).
    let mut files: BTreeMap<&str, u32> = BTreeMap::new();
    for stored in storage.values() {
        files.insert(&stored.file, 0);
    }
    if files.len() > MAX_DATA_FILES {
        return Err(Error::limit(format!(
            "the checkpoint names {} data files, more than the cap of {MAX_DATA_FILES}",
            files.len()
        )));
    }
    for (n, number) in files.values_mut().enumerate() {
        *number = n as u32 + 1;
    }
    let folder = path.and_then(Path::parent).ok_or_else(|| {
        Error::unsupported(
            "a distributed checkpoint's .metadata opened from memory: its data files cannot \
             be found",
        )
    })?;
    let mut shards = Vec::with_capacity(files.len());
    // A second handle on each data file, through which its chunks' archives are listed.
    let mut windows = Vec::with_capacity(files.len());
    for name in files.keys() {
        let file_path: PathBuf = folder.join(name);
        let open = || open_shard(&file_path).map_err(|e| e.in_file(&file_path));
        let data = open()?;
        windows.push(Arc::new(open()?));
        let info = ShardInfo::data_file((*name).to_owned(), file_path.clone(), data.len());
        shards.push((info, data));
    }

    let mut objects = zt_container::internal::try_with_capacity(metas.len())?;
    let data_bytes = shards.iter().map(|(_, data)| data.len()).sum::<u64>();
    let mut archives = Archives {
        decode_left: data_bytes.saturating_mul(4).max(MIN_OPEN_DECODE),
        ..Archives::default()
    };
    for (name, meta) in &metas {
        let data = (folder, windows.as_slice());
        let object = tensor_object(name, meta, &storage, &files, data, limits, &mut archives)
            .map_err(|e| e.in_object(name))?;
        objects.push(object);
    }
    let mut attributes = Attributes::new();
    // Each value's archive is walked under a budget of its own size; all of them together
    // under the cap of attribute values, as other readers' attributes are.
    let mut budget = ValueBudget::new(limits.decode_limits().max_value_bytes);
    for name in &byte_values {
        let (value, tensors) = byte_value(name, &storage, &files, &windows, limits, &mut archives);
        // Tensors inside a value (DCP flattens dicts and lists that hold tensors, but pickles
        // a tuple whole) are objects under `name.index`, as the value's other leaves are
        // attributes: a conversion must not drop them.
        objects.extend(tensors);
        for (key, value) in value {
            budget.key(name.len().saturating_add(key.len()).saturating_add(1))?;
            charge(&mut budget, &value).map_err(|e| e.in_object(name))?;
            // The value itself (a scalar, as DCP's flattened state dicts hold) under its
            // name, else its entries under `name.key`, as a plain checkpoint's leaves.
            let key = match key.as_str() {
                "value" => (*name).to_owned(),
                _ => format!("{name}.{key}"),
            };
            attributes.insert(key, value);
        }
    }
    if let Some(twice) = sort_by_name(&mut objects) {
        return Err(bad(format!("tensor {twice:?} is listed twice")));
    }
    if !byte_values.is_empty() {
        let names = byte_values.iter().map(|&n| Value::Text(n.to_owned()));
        attributes.insert("torch.dcp.bytes".into(), Value::Array(names.collect()));
    }
    let mut listing = Listing::of_unique(FileVersion::TorchDcp, attributes, objects);
    listing.shards = shards;
    listing.zip_entries = archives.records;
    Ok(listing)
}

/// The object of one tensor: its chunks' archives listed through windows onto their data
/// files, each one tensor of the metadata's dtype and its chunk's size; one chunk is read
/// in place, several as a tiling. The archives' data records are added to `archives` (with
/// their data file's number and offsets), whose CRC-32s checked reads check.
fn tensor_object(
    name: &str,
    meta: &TensorMeta,
    storage: &BTreeMap<(String, Vec<u64>), Stored>,
    files: &BTreeMap<&str, u32>,
    (folder, windows): (&Path, &[Arc<Source>]),
    limits: &Limits,
    archives: &mut Archives,
) -> Result<ObjectInfo> {
    let element = dtype_element(&meta.dtype).ok_or_else(|| {
        Error::unsupported(format!("torch.{} has no zTensor element type", meta.dtype))
    })?;
    let mut parts = Vec::with_capacity(meta.chunks.len());
    let mut inner = None;
    for chunk in &meta.chunks {
        let key = (name.to_owned(), chunk.offsets.clone());
        let stored = storage.get(&key).ok_or_else(|| {
            bad(format!(
                "no storage_data entry for its chunk at {:?}",
                chunk.offsets
            ))
        })?;
        if let Some(why) = stored.transform_defect() {
            return Ok(ObjectInfo::defective(
                name.to_owned(),
                Defect::unsupported(why),
            ));
        }
        let (number, window) = data_file(stored, files, windows)?;
        let (mut object, record) = archives
            .list(number, window, stored, limits)
            .and_then(chunk_tensor)
            .map_err(|e| in_data_file(e, stored, folder))?;
        if let Some(record) = record {
            archives
                .records
                .push((number, in_data_file_offsets(record, stored)));
        }
        if object.shape.as_slice() != chunk.sizes.as_slice() {
            return Err(bad(format!(
                "its chunk at {:?} holds a tensor of shape {:?}, not the chunk's {:?}",
                chunk.offsets,
                object.shape.as_slice(),
                chunk.sizes
            )));
        }
        let one_component = object.components.len() == 1;
        let Some(c) = object.components.0.first_mut() else {
            return Err(bad("a chunk's tensor has no data"));
        };
        if c.element != element {
            return Err(bad(format!(
                "its chunk at {:?} holds {:?}, not the metadata's torch.{}",
                chunk.offsets, c.element, meta.dtype
            )));
        }
        // The archive's offsets are the window's: make them the data file's.
        c.offset = c
            .offset
            .checked_add(stored.offset)
            .ok_or_else(|| bad(format!("chunk offset {} overflows", stored.offset)))?;
        c.file = number;
        let plain = c.byte_order == ByteOrder::Little
            && object.format == zt_formats::Format::Dense
            && one_component;
        // A compressed chunk whose elements lie packed in its stream is a span of it.
        let span = match (&c.encoding, c.arrangement.as_deref(), c.decoded_len) {
            (zt_formats::Encoding::Zstd, Some(a), Some(len)) if a.is_packed() => Some(StreamSpan {
                skip: a.skip,
                len,
                described: a.described && a.span == len,
            }),
            _ => None,
        };
        let contiguous = plain
            && (span.is_some()
                || matches!(c.encoding, zt_formats::Encoding::Raw) && c.arrangement.is_none());
        parts.push(Part {
            piece: Piece {
                file: number,
                offset: c.offset,
                length: c.length,
                crc32c: None,
            },
            start: chunk.offsets.clone(),
            extent: chunk.sizes.clone(),
            contiguous,
            span,
        });
        inner = Some(object);
    }
    match (parts.len(), inner) {
        // One chunk: its tensor as the archive gives it (strided ones keep their
        // arrangement), under the checkpoint's name.
        (1, Some(mut object))
            if parts
                .first()
                .is_some_and(|p| p.start.iter().all(|&o| o == 0)) =>
        {
            if object.shape.as_slice() != meta.size.as_slice() {
                return Err(bad(format!(
                    "its one chunk has shape {:?}, not the tensor's {:?}",
                    object.shape.as_slice(),
                    meta.size
                )));
            }
            object.name = name.to_owned();
            object.attributes.remove("torch.storage");
            object.attributes.remove("torch.storage_offset");
            Ok(object)
        }
        _ => {
            let compressed = parts.iter().filter(|p| p.span.is_some()).count();
            if parts.iter().any(|p| !p.contiguous) || (compressed > 0 && compressed < parts.len()) {
                return Ok(ObjectInfo::defective(
                    name.to_owned(),
                    Defect::unsupported(
                        "saved in chunks of which one is strided, encoded in another way than \
                         its others, or big-endian, which this reader does not assemble",
                    ),
                ));
            }
            // Compressed chunks are checked to tile the tensor by their decoded sizes, then
            // read as boxes, each a span of its stream.
            let boxes = parts.iter().map(|p| {
                let length = p.span.map_or(p.piece.length, |s| s.len);
                (
                    Piece { length, ..p.piece },
                    p.start.clone(),
                    p.extent.clone(),
                )
            });
            let tiling = match tile(&meta.size, element.logical_size(), boxes.collect()) {
                Ok(tiling) => tiling,
                Err(why) => {
                    return Ok(ObjectInfo::defective(
                        name.to_owned(),
                        Defect::invalid(format!("{why} (its chunks)")),
                    ))
                }
            };
            let tiling = match compressed {
                0 => tiling,
                _ => compressed_tiling(&meta.size, element.logical_size(), parts, tiling.total),
            };
            Ok(ObjectInfo::tiled(
                name.to_owned(),
                meta.size.clone().into(),
                element,
                tiling,
                ByteOrder::Little,
            ))
        }
    }
}

/// One chunk of a tensor: its bytes in its data file, where its box starts and how far it
/// extends, whether its elements lie as they are or packed in a stream (`contiguous`), and,
/// for a compressed chunk, where they lie in what its stream decodes to.
struct Part {
    piece: Piece,
    start: Vec<u64>,
    extent: Vec<u64>,
    contiguous: bool,
    span: Option<StreamSpan>,
}

/// The tiling of compressed chunks that [`tile`] found to tile the tensor of `dims` by their
/// decoded sizes (`total` bytes): boxes, each a span of its stream (those with no elements
/// left out, as `tile` leaves them out).
fn compressed_tiling(dims: &[u64], element_size: u64, parts: Vec<Part>, total: u64) -> Tiling {
    let (mut boxes, mut spans) = (Vec::new(), Vec::new());
    for part in parts {
        if let Some(span) = part.span.filter(|s| s.len > 0) {
            boxes.push((part.piece, part.start, part.extent));
            spans.push(span);
        }
    }
    let first = boxes.first().map(|(p, ..)| *p);
    let table = BoxTable {
        dims: dims.to_vec(),
        element_size,
        boxes,
        spans,
    };
    Tiling {
        encoding: zt_formats::Encoding::Boxes(Box::new(table)),
        first,
        total,
    }
}

/// The archives of chunks and values listed so far: the ranges of the data files they took,
/// which no other may share (each is an archive of its own; entries that all named one range
/// would make listing cost their number times the archive's), and the records whose CRC-32s
/// reads and `verify` check.
#[derive(Default)]
struct Archives {
    /// Each range's end, by its data file's number and its start.
    taken: BTreeMap<(u32, u64), u64>,
    records: Vec<(u32, zip::Entry)>,
    /// How many more bytes listing compressed archives may decode.
    decode_left: u64,
}

impl Archives {
    /// The archive at `stored` in data file `number` (`window`), listed, once its bytes are
    /// found to be no other archive's.
    fn list(
        &mut self,
        number: u32,
        window: &Arc<Source>,
        stored: &Stored,
        limits: &Limits,
    ) -> Result<Listing> {
        let (start, end) = (stored.offset, stored.offset.saturating_add(stored.length));
        let before = self.taken.range(..=(number, start)).next_back();
        let before = before.filter(|&(&(f, _), &e)| f == number && e > start);
        let after = self.taken.range((number, start)..).next();
        let after = after.filter(|&(&(f, o), _)| f == number && o < end);
        if let Some((&(_, o), &e)) = before.or(after) {
            return Err(bad(format!(
                "its bytes {start}..{end} of {:?} are also another chunk's or value's \
                 ({o}..{e})",
                stored.file
            )));
        }
        self.taken.insert((number, start), end);
        chunk_archive(window, stored, limits, &mut self.decode_left)
    }
}

/// The number (from 1, as records and errors count data files) and the window of the data
/// file a storage entry points into; every file the index names was opened, so a miss is a
/// defect of this reader's bookkeeping reported as the file's, never a panic.
fn data_file<'w>(
    stored: &Stored,
    files: &BTreeMap<&str, u32>,
    windows: &'w [Arc<Source>],
) -> Result<(u32, &'w Arc<Source>)> {
    let number = files.get(stored.file.as_str()).copied().unwrap_or(0);
    let window = windows
        .get((number as usize).wrapping_sub(1))
        .ok_or_else(|| bad(format!("data file {:?} is not open", stored.file)))?;
    Ok((number, window))
}

/// A record of a chunk's archive, its offsets (the window's) made the data file's, as the
/// chunk's component's are (both fit: the chunk lies inside its file).
fn in_data_file_offsets(mut record: zip::Entry, stored: &Stored) -> zip::Entry {
    record.data_offset = record.data_offset.saturating_add(stored.offset);
    record.header_offset = record.header_offset.saturating_add(stored.offset);
    record
}

/// A value that is not a tensor (`BytesStorageMetadata`: `torch.save` of any object into a
/// data file) as the attributes its archive's pickle gives (a plain checkpoint's leaves:
/// `value` for a scalar) and the tensors it holds (a tuple of tensors, which DCP does not
/// flatten), named `name.path` and moved to the data file's offsets; its records added to
/// `archives` for `verify` and checked reads. A value torch would unpickle as any object must
/// not keep the tensors from opening: one that cannot be read (no storage entry, a storage
/// transform, an archive the PyTorch reader refuses) is the attribute `{"unreadable": why}`,
/// which names the data file by its name alone (the attribute is kept by a conversion, where
/// a local path has no place).
fn byte_value(
    name: &str,
    storage: &BTreeMap<(String, Vec<u64>), Stored>,
    files: &BTreeMap<&str, u32>,
    windows: &[Arc<Source>],
    limits: &Limits,
    archives: &mut Archives,
) -> (Attributes, Vec<ObjectInfo>) {
    let mut read = || {
        let stored = storage
            .get(&(name.to_owned(), Vec::new()))
            .ok_or_else(|| bad("no storage_data entry for it"))?;
        if let Some(why) = stored.transform_defect() {
            return Err(Error::unsupported(why));
        }
        let (number, window) = data_file(stored, files, windows)?;
        let listing = archives
            .list(number, window, stored, limits)
            .map_err(|e| in_data_file(e, stored, Path::new("")))?;
        let entries: Vec<_> = (listing.zip_entries.into_iter())
            .map(|(_, e)| (number, in_data_file_offsets(e, stored)))
            .collect();
        let tensors = (listing.objects.into_iter())
            .map(|o| value_tensor(name, o, number, stored))
            .collect::<Result<Vec<_>>>()?;
        Ok((listing.attributes, entries, tensors))
    };
    match read() {
        Ok((attributes, entries, tensors)) => {
            archives.records.extend(entries);
            (attributes, tensors)
        }
        Err(e) => {
            let why = Value::Text(e.to_string());
            let unreadable = BTreeMap::from([("unreadable".to_owned(), why)]);
            let attributes = Attributes::from([("value".to_owned(), Value::Map(unreadable))]);
            (attributes, Vec::new())
        }
    }
}

/// A tensor inside the value `value` (the archive at `stored` in data file `number`) as an
/// object of the checkpoint: named `value.path` (its path in the value, `0` for a tuple's
/// first item), its components' offsets (the archive's) made the data file's. Its
/// `torch.storage` attributes go, as a chunk's do: they name the archive's storages.
fn value_tensor(
    value: &str,
    mut object: ObjectInfo,
    number: u32,
    stored: &Stored,
) -> Result<ObjectInfo> {
    object.name = format!("{value}.{}", object.name);
    object.attributes.remove("torch.storage");
    object.attributes.remove("torch.storage_offset");
    for c in object.components.0.iter_mut() {
        // The PyTorch reader gives a record's bytes, stored or deflated, or a span of the
        // compressed archive: one range each.
        if !matches!(
            c.encoding,
            zt_formats::Encoding::Raw | zt_formats::Encoding::Deflate | zt_formats::Encoding::Zstd
        ) {
            return Ok(ObjectInfo::defective(
                object.name,
                Defect::unsupported("a tensor of a value whose bytes are not one range"),
            ));
        }
        c.offset = c
            .offset
            .checked_add(stored.offset)
            .ok_or_else(|| bad(format!("value offset {} overflows", stored.offset)))?;
        c.file = number;
    }
    Ok(object)
}

/// Charges `value`'s tree to `budget`: its nodes, texts, bytes and keys.
fn charge(budget: &mut ValueBudget, value: &Value) -> Result<()> {
    budget.node()?;
    match value {
        Value::Text(t) => budget.payload(t.len()),
        Value::Bytes(b) => budget.payload(b.len()),
        Value::Array(items) => items.iter().try_for_each(|v| charge(budget, v)),
        Value::Map(entries) => entries.iter().try_for_each(|(k, v)| {
            budget.key(k.len())?;
            charge(budget, v)
        }),
        Value::Tag(_, v) => charge(budget, v),
        Value::Integer(_) | Value::Float(_) | Value::Bool(_) | Value::Null => Ok(()),
    }
}

/// An error of a chunk's archive, said of its data file in `folder`: its offset (the
/// archive's) made the file's, and the archive's record it names (`archive/data.pkl`) in the
/// message, so that the tensor's name can be the error's object.
fn in_data_file(e: Error, stored: &Stored, folder: &Path) -> Error {
    let message = match e.object() {
        Some(record) => format!(
            "{} (in record {record:?} of a chunk's archive)",
            e.message()
        ),
        None => e.message().to_owned(),
    };
    let offset = stored.offset.saturating_add(e.offset().unwrap_or(0));
    Error::new(e.kind(), message)
        .at(offset)
        .in_file(&folder.join(&stored.file))
}

/// The `torch.save` archive at `stored` in `window`'s data file, listed by the PyTorch
/// reader, its offsets the archive's.
fn chunk_archive(
    window: &Arc<Source>,
    stored: &Stored,
    limits: &Limits,
    decode_left: &mut u64,
) -> Result<Listing> {
    let end = stored.offset.checked_add(stored.length);
    if end.is_none_or(|end| end > window.len()) {
        return Err(bad(format!(
            "a chunk of {} bytes at offset {} lies past the end of its data file ({} bytes)",
            stored.length,
            stored.offset,
            window.len()
        )));
    }
    let archive = Source::ranged(
        Arc::new(Window {
            file: Arc::clone(window),
            start: stored.offset,
        }),
        stored.length,
    );
    // `FileSystemWriter(serialization_format=SAFETENSORS)` writes each data file's tensors as
    // one safetensors file after its byte values and gives every tensor that file's offset:
    // its chunks are no archives, and torch's own reader cannot load them either.
    let head = archive.read_at(0, stored.length.min(9))?;
    if !head.starts_with(b"PK") && head.get(8) == Some(&b'{') {
        return Err(Error::unsupported(
            "its chunk is a safetensors file, not a torch.save archive: the checkpoint was \
             saved with serialization_format=SAFETENSORS, which torch.distributed.checkpoint's \
             own reader does not load either",
        ));
    }
    if stored.transform == Transform::Zstd {
        // Read as decoded: its front is what listing needs, and a large chunk is not read.
        let decoded = crate::codec::zstd_range_reader(&archive, 0, stored.length)?;
        let listed = crate::files::torch::streamed::list_streamed(decoded, limits, decode_left);
        let (listing, closed) = listed.map_err(in_decoded_archive)?;
        return Ok(compressed_spans(listing, &closed, stored.length));
    }
    let entries = zip::entries_by(&archive, zip::Rules::Miniz)?.entries;
    crate::files::torch::list(&archive, entries, limits, FileVersion::PyTorch)
}

/// The transform a storage entry's `transform_descriptors` name (a list of texts
/// `name/version`, or None): DCP's zstd alone when it is the one descriptor, with major
/// version 1, as its registry takes it.
fn transform(heap: &Heap, descriptors: Option<Pv>) -> Transform {
    let items = match descriptors.map(|d| (d, heap.get(d))) {
        None | Some((Pv::None, _)) => return Transform::None,
        Some((_, Some(Obj::List(l) | Obj::Tuple(l)))) => l.as_slice(),
        Some(_) => return Transform::Other("(descriptors that are not a list)".to_owned()),
    };
    let text = |d: &Pv| heap.text(*d).unwrap_or("(not a text)");
    match items {
        [] => Transform::None,
        [one]
            if text(one).split_once('/').is_some_and(|(name, version)| {
                name == "stream.zstd" && version.split('.').next() == Some("1")
            }) =>
        {
            Transform::Zstd
        }
        // Named in every tensor's defect: a few, each cut short, since one list may be
        // shared by every entry of the file.
        _ => {
            let shown: Vec<String> = (items.iter().take(MAX_SHOWN_DESCRIPTORS))
                .map(|d| text(d).chars().take(MAX_DESCRIPTOR_CHARS).collect())
                .collect();
            let more = items.len().saturating_sub(MAX_SHOWN_DESCRIPTORS);
            match more {
                0 => Transform::Other(format!("{shown:?}")),
                _ => Transform::Other(format!("{shown:?} and {more} more")),
            }
        }
    }
}

/// How many of a storage entry's transform descriptors a defect names, and how many
/// characters of each (DCP's own are `stream.zstd/1`).
const MAX_SHOWN_DESCRIPTORS: usize = 4;
const MAX_DESCRIPTOR_CHARS: usize = 64;

/// An error of a compressed chunk's archive, whose offsets are the decoded archive's: the
/// offset goes into the message (the file's offset is then the chunk's start).
fn in_decoded_archive(e: Error) -> Error {
    let message = match e.offset() {
        Some(at) => format!(
            "{} (at byte {at} of the chunk's archive as its zstd stream decodes)",
            e.message()
        ),
        None => e.message().to_owned(),
    };
    let located = Error::new(e.kind(), message);
    match e.object() {
        Some(record) => located.in_object(record),
        None => located,
    }
}

/// A compressed chunk's listing, its components (spans of the decoded archive) made spans
/// of the chunk's zstd stream of `stored_len` bytes, which a read decodes up to their end.
/// A span that is a whole record of `closed` (a record closed by a data descriptor) is read
/// with the descriptor after it, whose CRC-32 it is checked against: the CRC-32s are known
/// only there, and finding them at open would decode the stream to its end.
fn compressed_spans(mut listing: Listing, closed: &[(u64, u64)], stored_len: u64) -> Listing {
    let closed: BTreeSet<&(u64, u64)> = closed.iter().collect();
    for object in &mut listing.objects {
        let dims: Vec<u64> = object.shape.as_slice().to_vec();
        for c in object.components.0.iter_mut() {
            let mut arrangement = c.arrangement.take().unwrap_or_else(|| {
                Box::new(Arrangement {
                    skip: 0,
                    span: c.length,
                    dims: dims.clone(),
                    strides: Vec::new(),
                    described: false,
                })
            });
            // Offsets into the decoded archive fit: they were read from it.
            arrangement.skip = arrangement.skip.saturating_add(c.offset);
            arrangement.described = closed.contains(&(arrangement.skip, arrangement.span));
            c.decoded_len = c.decoded_len.or(Some(c.length));
            c.arrangement = Some(arrangement);
            c.encoding = zt_formats::Encoding::Zstd;
            c.offset = 0;
            c.length = stored_len;
        }
    }
    listing.zip_entries.clear();
    listing
}

/// The one tensor of a chunk's archive (its `listing`), and the record that holds its data,
/// their offsets the archive's.
fn chunk_tensor(listing: Listing) -> Result<(ObjectInfo, Option<zip::Entry>)> {
    let mut objects = listing.objects.into_iter();
    let data = |o: &ObjectInfo| {
        let c = o.components.first()?;
        let (_, e) = listing.zip_entries.iter().find(|(_, e)| {
            e.data_offset <= c.offset
                && c.offset < e.data_end().max(e.data_offset.saturating_add(1))
        })?;
        Some(e.clone())
    };
    match (objects.next(), objects.next()) {
        (Some(o), None) if o.defect.is_none() => {
            let record = data(&o);
            Ok((o, record))
        }
        (Some(o), None) => Err(o
            .defect
            .map_or_else(|| bad("unreadable chunk"), |d| bad(d.message))),
        _ => Err(bad("a chunk's archive does not hold exactly one tensor")),
    }
}

/// Part of a data file, read as a file of its own (a chunk's archive, whose offsets start
/// at its first byte).
#[derive(Debug)]
struct Window {
    file: Arc<Source>,
    start: u64,
}

impl RangeRead for Window {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        // The archive's source checked `offset + buf.len()` against the chunk's length, which
        // was checked to end inside the file.
        let at = self
            .start
            .checked_add(offset)
            .ok_or_else(|| std::io::Error::other("a chunk offset overflows"))?;
        self.file
            .read_into(at, buf)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }
}

/// `storage_data`: each chunk's place, by tensor name and chunk offsets.
fn storage_index(
    heap: &Heap,
    items: &[(Pv, Pv)],
    max_rank: usize,
) -> Result<BTreeMap<(String, Vec<u64>), Stored>> {
    let mut index = BTreeMap::new();
    for &(k, v) in items {
        let key = record(heap, k, "a storage_data key (MetadataIndex)")?;
        let fqn = field(heap, key, "fqn")
            .and_then(|f| heap.text(f))
            .ok_or_else(|| bad("a MetadataIndex has no fqn"))?;
        let offsets = match field(heap, key, "offset") {
            Some(o) => ints(heap, o, "a MetadataIndex offset", max_rank)?,
            None => Vec::new(),
        };
        let info = record(heap, v, "a storage_data value (_StorageInfo)")?;
        let file = field(heap, info, "relative_path")
            .and_then(|f| heap.text(f))
            .ok_or_else(|| bad(format!("the storage of {fqn:?} has no relative_path")))?;
        if file.is_empty()
            || file.len() > MAX_FILE_NAME
            || file.contains(['/', '\\', '\0'])
            || file == "."
            || file == ".."
        {
            return Err(bad(format!(
                "the storage of {fqn:?} names {file:?}, not a file in the checkpoint's folder"
            )));
        }
        let number = |name: &str| match field(heap, info, name) {
            Some(Pv::Int(n)) if n >= 0 => Ok(n as u64),
            _ => Err(bad(format!(
                "the storage of {fqn:?} has no {name} (a non-negative integer)"
            ))),
        };
        let stored = Stored {
            file: file.to_owned(),
            offset: number("offset")?,
            length: number("length")?,
            transform: transform(heap, field(heap, info, "transform_descriptors")),
        };
        if index.insert((fqn.to_owned(), offsets), stored).is_some() {
            return Err(bad(format!(
                "two storage_data entries for one chunk of {fqn:?}"
            )));
        }
    }
    Ok(index)
}

/// A `TensorStorageMetadata`: `properties` (a `TensorProperties`, whose state is the tuple
/// `(dtype, layout, requires_grad, memory_format, pin_memory)`), `size`, `chunks`; its
/// chunks are taken from `chunks_left`, the `storage_data` entries not yet claimed.
fn tensor_meta(heap: &Heap, v: Pv, limits: &Limits, chunks_left: &mut usize) -> Result<TensorMeta> {
    let fields = record(heap, v, "its TensorStorageMetadata")?;
    let dtype = field(heap, fields, "properties")
        .and_then(|p| match heap.get(p) {
            Some(Obj::Tuple(t)) => t.first().copied(),
            _ => None,
        })
        .and_then(|d| match heap.get(d) {
            Some(Obj::DType(name)) => Some(name.clone()),
            _ => None,
        })
        .ok_or_else(|| bad("its properties give no torch dtype this reader knows"))?;
    let max_rank = limits.decode.max_rank;
    let size = field(heap, fields, "size").ok_or_else(|| bad("it has no size"))?;
    let size = ints(heap, size, "its size", max_rank)?;
    let chunks = match field(heap, fields, "chunks").map(|c| heap.get(c)) {
        Some(Some(Obj::List(c))) => c,
        _ => return Err(bad("it has no list of chunks")),
    };
    if chunks.len() > MAX_CHUNKS {
        return Err(Error::limit(format!(
            "{} chunks, more than the cap of {MAX_CHUNKS}",
            chunks.len()
        )));
    }
    *chunks_left = chunks_left.checked_sub(chunks.len()).ok_or_else(|| {
        bad(format!(
            "its {} chunks are more than the storage_data entries left for them ({})",
            chunks.len(),
            chunks_left
        ))
    })?;
    let chunks = chunks
        .iter()
        .map(|&c| {
            let f = record(heap, c, "a ChunkStorageMetadata")?;
            let get = |name: &str| {
                field(heap, f, name)
                    .ok_or_else(|| bad(format!("a chunk has no {name}")))
                    .and_then(|v| ints(heap, v, name, max_rank))
            };
            let (offsets, sizes) = (get("offsets")?, get("sizes")?);
            if offsets.len() != size.len() || sizes.len() != size.len() {
                return Err(bad(format!(
                    "a chunk at {offsets:?} of {sizes:?} is not of the tensor's rank {}",
                    size.len()
                )));
            }
            Ok(Chunk { offsets, sizes })
        })
        .collect::<Result<Vec<_>>>()?;
    if chunks.is_empty() {
        return Err(bad("it has no chunks"));
    }
    // Each chunk is an archive listed at open: a repeated one would be listed again and
    // again before the tiling check refused it.
    let mut starts = BTreeSet::new();
    if let Some(twice) = chunks.iter().find(|c| !starts.insert(c.offsets.as_slice())) {
        return Err(bad(format!(
            "two of its chunks start at {:?}",
            twice.offsets
        )));
    }
    Ok(TensorMeta {
        dtype,
        size,
        chunks,
    })
}

/// The items of a dict.
fn dict<'h>(heap: &'h Heap, v: Pv, what: &str) -> Result<&'h [(Pv, Pv)]> {
    match heap.get(v) {
        Some(Obj::Dict(items)) => Ok(items),
        _ => Err(bad(format!("{what} is {}, not a dict", heap.kind(v)))),
    }
}

/// The fields of a record (a dataclass of `torch.distributed.checkpoint` the pickle machine
/// made a dict), at most [`MAX_RECORD_FIELDS`] of them.
fn record<'h>(heap: &'h Heap, v: Pv, what: &str) -> Result<&'h [(Pv, Pv)]> {
    let fields = dict(heap, v, what)?;
    if fields.len() > MAX_RECORD_FIELDS {
        return Err(bad(format!(
            "{what} has {} fields: not a record of torch.distributed.checkpoint (at most \
             {MAX_RECORD_FIELDS})",
            fields.len()
        )));
    }
    Ok(fields)
}

/// The value of field `name` of a record (at most [`MAX_RECORD_FIELDS`], found by a search).
fn field(heap: &Heap, fields: &[(Pv, Pv)], name: &str) -> Option<Pv> {
    fields
        .iter()
        .find(|&&(k, _)| heap.text(k) == Some(name))
        .map(|&(_, v)| v)
}

/// A tuple or list of non-negative integers (a `torch.Size`), at most `max_rank` of them.
fn ints(heap: &Heap, v: Pv, what: &str, max_rank: usize) -> Result<Vec<u64>> {
    match heap.get(v) {
        Some(Obj::Tuple(items) | Obj::List(items)) if items.len() > max_rank => {
            Err(Error::rank_over_cap(Some(items.len() as u64), max_rank).in_object(what))
        }
        Some(Obj::Tuple(items) | Obj::List(items)) => items
            .iter()
            .map(|&i| match i {
                Pv::Int(n) if n >= 0 => Ok(n as u64),
                _ => Err(bad(format!(
                    "{what} holds something not a non-negative integer"
                ))),
            })
            .collect(),
        _ => Err(bad(format!("{what} is {}, not a tuple", heap.kind(v)))),
    }
}
