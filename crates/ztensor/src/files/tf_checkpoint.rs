//! TensorFlow checkpoints (the TensorBundle format `tf.train.Checkpoint`,
//! `tf.compat.v1.train.Saver` and Keras's TensorFlow-format `save_weights` write): the file
//! opened is `PREFIX.index`, a LevelDB table mapping each tensor's name to a
//! `BundleEntryProto` (dtype, shape, data shard, offset, size, masked CRC-32C); the bytes are in
//! `PREFIX.data-NNNNN-of-MMMMM` beside it.
//!
//! - [`list`]: the table read whole (it holds names and small records, capped by
//!   [`Limits::max_manifest_len`]): footer, index block, data blocks, each block's masked
//!   CRC-32C checked; the header entry (key "") gives the shard count and byte order; each
//!   entry is a dense object whose data is a range of its data shard, its CRC the
//!   component's digest (checked by `verify` and checked reads). The data shards are opened
//!   last, once everything else has been checked.
//! - String and resource tensors (TensorFlow's object graph among them) are listed and
//!   skipped.
//! - A V1 checkpoint ([`V1`]: one file, the format before TensorBundles) is the same table
//!   holding tensor slices, their values in `TensorProto` fields: bytes read in place, or
//!   varints decoded on read.
//! - A partitioned variable (TensorFlow's partitioners and sharding policies split large
//!   ones) is listed under its whole entry; its slices are entries of their own, whose keys
//!   ([`slice_key`], OrderedCode) give the variable's name and the slice's box. Sliced along
//!   the first axis only (the partitioners' default), the slices in order are the whole
//!   variable's row-major bytes: one component of [`Encoding::Pieces`]; boxes of other
//!   shapes (`MaxShardSizePolicy` cuts variables into irregular boxes) are one component of
//!   [`Encoding::Boxes`], each placed where it lies. Either way each slice is a piece of its
//!   data file, checked against its CRC-32C as it is read, once the slices are checked to
//!   tile the variable exactly; a variable whose slices do not is listed unreadable.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use zt_container::internal::MemoryBudget;
use zt_container::{Error, Result, Source};
use zt_formats::{
    byte_size, element_count, tile, DType, Digest, DigestAlgorithm, ElementType, Encoding, Format,
    LogicalType, Piece,
};
use zt_manifest::Attributes;

use crate::files::zt_v2::OpenShard;
use crate::listing::{sort_by_name, Limits, Listing};
use crate::model::{ByteOrder, Defect, FileVersion, ObjectInfo, ShardInfo};

/// The magic number that ends a LevelDB table (little-endian).
const TABLE_MAGIC: u64 = 0xdb47_7524_8b80_fb57;
/// A table's footer: two block handles padded to 40 bytes, then the magic.
const FOOTER_LEN: usize = 48;
/// A block's trailer: its compression type and masked CRC-32C.
const TRAILER_LEN: usize = 5;
/// LevelDB's CRC mask (`crc32c::Mask`): a rotation and this constant.
const CRC_MASK_DELTA: u32 = 0xa282_ead8;
/// The most data shards a checkpoint may name (each is a file held open).
const MAX_DATA_SHARDS: u64 = 4096;
/// The longest OrderedCode signed number: ten bytes carry 64 bits and the length header.
const MAX_SIGNED_LEN: usize = 10;

/// Lists the checkpoint whose `.index` table is `source`, opened from `path` (its data
/// shards lie beside it; `None`: opened from memory, whose data cannot be found).
pub(crate) fn list(
    source: &Source,
    path: Option<&Path>,
    limits: &Limits,
    open_shard: OpenShard<'_>,
) -> Result<Listing> {
    let len = source.len();
    let table = limits.read_whole(source, "the checkpoint's index")?;
    let mut budget = MemoryBudget::new(limits.listing_budget(len), "listing the checkpoint");
    let mut header = None;
    let mut entries = Vec::new();
    // Slices of partitioned variables by the variable's name (a B-tree: names come from the
    // file), each with its box.
    let mut slices: BTreeMap<String, Vec<(SliceBox, Entry)>> = BTreeMap::new();
    let mut keys = KeyBytes::for_index(len);
    // A V1 checkpoint's tensors, once its "" entry has said it is one.
    let mut v1: Option<V1> = None;
    for block in table_blocks(&table, &mut keys)? {
        let (at, contents) = block?;
        for entry in block_entries(&contents, at, &mut keys)? {
            let (key, value) = entry;
            if key.is_empty() {
                // V2's header opens with a varint (`num_shards`), V1's with a message.
                if value.first() == Some(&0x0a) {
                    let meta = V1::meta(value, limits, &mut budget);
                    v1 = Some(meta.map_err(|e| e.in_object("meta").at(at))?);
                } else {
                    header = Some(bundle_header(value).map_err(|e| e.in_object("header"))?);
                }
                continue;
            }
            if let Some(v1) = &mut v1 {
                v1.data(&key, value, offset_in(&table, value), limits, &mut budget)
                    .map_err(|e| e.at(at))?;
                continue;
            }
            // A partitioned variable's slices: read as part of the whole variable's entry.
            if key.first() == Some(&0) {
                let (name, slice) = slice_key(&key, limits.decode.max_rank).ok_or_else(|| {
                    Error::invalid("a slice's key is not a name and a box (OrderedCode)").at(at)
                })?;
                budget
                    .charge(Limits::listing_cost(&name))
                    .map_err(|e| e.at(at))?;
                let entry = bundle_entry(value, limits).map_err(|e| e.in_object(&name))?;
                slices.entry(name).or_default().push((slice, entry));
                continue;
            }
            let name = String::from_utf8(key)
                .map_err(|_| Error::invalid("a tensor name is not UTF-8").at(at))?;
            budget
                .charge(Limits::listing_cost(&name))
                .map_err(|e| e.at(at))?;
            let entry = bundle_entry(value, limits).map_err(|e| e.in_object(&name))?;
            entries.push((name, entry));
        }
    }
    if let Some(v1) = v1 {
        return v1.listing();
    }
    let header = header.ok_or_else(|| {
        Error::invalid("the checkpoint's index has no header entry (the empty key)")
    })?;
    let mut objects = Vec::with_capacity(entries.len());
    let order = if header.big_endian {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
    for (name, entry) in entries {
        if entry.shard >= header.shards {
            return Err(Error::invalid(format!(
                "its data is in shard {}, but the checkpoint has {}",
                entry.shard, header.shards
            ))
            .in_object(&name));
        }
        let parts = slices.remove(&name);
        objects.push(match (entry.sliced, parts) {
            (true, Some(parts)) => partitioned(name, entry, parts, header.shards, order)?,
            (_, _) => object(name, entry, order)?,
        });
    }
    if let Some(name) = sort_by_name(&mut objects) {
        return Err(Error::invalid(format!("tensor {name:?} is listed twice")).in_object(name));
    }
    let shards = data_shards(path, header.shards, open_shard)?;
    for o in &objects {
        for c in o.components.iter() {
            let pieces: Vec<(u32, u64, u64)> = match &c.encoding {
                Encoding::Pieces(pieces) => pieces
                    .iter()
                    .map(|p| (p.file, p.offset, p.length))
                    .collect(),
                Encoding::Boxes(table) => table
                    .boxes
                    .iter()
                    .map(|(p, ..)| (p.file, p.offset, p.length))
                    .collect(),
                _ => vec![(c.file, c.offset, c.length)],
            };
            for (file, offset, length) in pieces {
                let size = shards
                    .get((file as usize).wrapping_sub(1))
                    .map_or(0, |(info, _)| info.size);
                if offset.checked_add(length).is_none_or(|end| end > size) {
                    return Err(Error::invalid(format!(
                        "its {length} bytes at offset {offset} lie past the end of its data \
                         file ({size} bytes)"
                    ))
                    .in_object(&o.name));
                }
            }
        }
    }
    let mut listing = Listing::of_unique(FileVersion::TfCheckpoint, Attributes::new(), objects);
    listing.shards = shards;
    Ok(listing)
}

/// Where `part`, a slice of `table` (the file read from its start), starts in the file;
/// `None` when it lies elsewhere (in a block Snappy compressed, decompressed in memory).
fn offset_in(table: &[u8], part: &[u8]) -> Option<u64> {
    let start = (part.as_ptr() as usize).checked_sub(table.as_ptr() as usize)?;
    (start.checked_add(part.len())? <= table.len()).then_some(start as u64)
}

/// A V1 checkpoint (one file, as TensorFlow wrote them before 1.0 made V2 the default; the
/// TF-slim model zoo's `.ckpt` files): the same table, whose "" entry is a
/// `SavedTensorSlices` with `meta` (each tensor's name, shape, dtype and slices) and whose
/// other keys name one slice of one tensor (OrderedCode, as V2's slice keys), its value a
/// `SavedTensorSlices` with `data`, whose `TensorProto` holds the values in one repeated
/// field: floats and doubles as their bytes (read in place), integers, booleans and halves
/// as varints ([`Encoding::ProtoVarints`]).
struct V1 {
    /// Each tensor's dtype and shape, by name (a B-tree: names come from the file).
    tensors: BTreeMap<String, (u64, Vec<u64>)>,
    /// Each tensor's slices: box and where its values lie.
    slices: BTreeMap<String, Vec<(SliceBox, V1Values)>>,
}

/// Where one slice's values lie in a V1 checkpoint.
struct V1Values {
    /// The `TensorProto` field that holds them (4 `tensor_content`, 5 `float_val`, ...).
    field: u64,
    /// Their offset in the file (`None`: in a compressed block) and length.
    at: Option<u64>,
    len: u64,
}

impl V1 {
    /// The "" entry: `SavedTensorSlices.meta` (1), a `SavedTensorSliceMeta` whose `tensor`
    /// (1) entries are `SavedSliceMeta`: 1 `name`, 2 `shape`, 3 `type`, 4 `slice`. Each
    /// tensor is charged to the listing budget as it is met.
    fn meta(value: &[u8], limits: &Limits, budget: &mut MemoryBudget) -> Result<Self> {
        let mut tensors = BTreeMap::new();
        for field in fields(value) {
            let (1, Wire::Bytes(meta)) = field? else {
                continue;
            };
            for field in fields(meta) {
                let (1, Wire::Bytes(tensor)) = field? else {
                    continue;
                };
                let (mut name, mut dtype, mut shape) = (None, 0, Vec::new());
                for field in fields(tensor) {
                    match field? {
                        (1, Wire::Bytes(n)) => name = Some(n),
                        (2, Wire::Bytes(s)) => shape = shape_of(s, limits)?.0,
                        (3, Wire::Varint(d)) => dtype = d,
                        _ => {}
                    }
                }
                let name = name
                    .and_then(|n| std::str::from_utf8(n).ok())
                    .ok_or_else(|| Error::invalid("a tensor's name is missing or not UTF-8"))?;
                budget.charge(Limits::listing_cost(name))?;
                if tensors.insert(name.to_owned(), (dtype, shape)).is_some() {
                    return Err(Error::invalid(format!("tensor {name:?} is listed twice")));
                }
            }
        }
        Ok(V1 {
            tensors,
            slices: BTreeMap::new(),
        })
    }

    /// One slice entry: its key's name and box, and where its `SavedTensorSlices.data` (2)
    /// `SavedSlice.data` (3) `TensorProto` holds the values (`at`: the value's offset in the
    /// file, if it lies there).
    fn data(
        &mut self,
        key: &[u8],
        value: &[u8],
        at: Option<u64>,
        limits: &Limits,
        budget: &mut MemoryBudget,
    ) -> Result<()> {
        let (name, slice) = slice_key(key, limits.decode.max_rank).ok_or_else(|| {
            Error::invalid("a V1 checkpoint's key is not a name and a box (OrderedCode)")
        })?;
        budget.charge(Limits::listing_cost(&name))?;
        let mut values = V1Values {
            field: 0,
            at: None,
            len: 0,
        };
        let slice_data = fields(value).find_map(|f| match f {
            Ok((2, Wire::Bytes(b))) => Some(Ok(b)),
            Err(e) => Some(Err(e)),
            _ => None,
        });
        let proto = match slice_data.transpose()? {
            Some(saved) => fields(saved).find_map(|f| match f {
                Ok((3, Wire::Bytes(b))) => Some(Ok(b)),
                Err(e) => Some(Err(e)),
                _ => None,
            }),
            None => None,
        };
        if let Some(proto) = proto.transpose()? {
            for field in fields(proto) {
                if let (n @ (4..=7 | 9..=13 | 16 | 17), Wire::Bytes(b)) = field? {
                    values.field = n;
                    values.len = b.len() as u64;
                    values.at = at.and_then(|at| {
                        let within = (b.as_ptr() as usize).checked_sub(value.as_ptr() as usize)?;
                        at.checked_add(within as u64)
                    });
                }
            }
        }
        self.slices.entry(name).or_default().push((slice, values));
        Ok(())
    }

    /// Every tensor the meta lists, as an object.
    fn listing(mut self) -> Result<Listing> {
        let mut objects = Vec::with_capacity(self.tensors.len());
        for (name, (dtype, shape)) in std::mem::take(&mut self.tensors) {
            let parts = self.slices.remove(&name).unwrap_or_default();
            objects.push(v1_object(name, dtype, shape, parts)?);
        }
        Ok(Listing::of_unique(
            FileVersion::TfCheckpointV1,
            Attributes::new(),
            objects,
        ))
    }
}

/// The `TensorProto` field TensorFlow's V1 writer puts values of `dtype` in (`Fill` of
/// `saved_tensor_slice_util`): 5 `float_val`, 6 `double_val`, 9 `scomplex_val`, 12
/// `dcomplex_val`, 10 `int64_val`, 11 `bool_val`, 13 `half_val` (half and bfloat16 bits),
/// 16 `uint32_val`, 17 `uint64_val`, and 7 `int_val` for the smaller integers.
fn v1_field(dtype: u64) -> u64 {
    match dtype {
        1 => 5,
        2 => 6,
        8 => 9,
        18 => 12,
        9 => 10,
        10 => 11,
        14 | 19 => 13,
        22 => 16,
        23 => 17,
        _ => 7,
    }
}

/// How a V1 slice's `TensorProto` field holds values of `dtype`: `None` for bytes as they
/// are (`tensor_content`, floats, doubles, complex numbers), else the varint encoding.
fn v1_varints(field: u64, element: &ElementType) -> Option<Encoding> {
    match field {
        7 | 10 | 11 | 13 | 16 | 17 => Some(Encoding::ProtoVarints {
            width: element.dtype.size() as u8,
            boolean: field == 11,
        }),
        _ => None,
    }
}

/// One tensor of a V1 checkpoint from its slices.
fn v1_object(
    name: String,
    dtype: u64,
    shape: Vec<u64>,
    parts: Vec<(SliceBox, V1Values)>,
) -> Result<ObjectInfo> {
    let order = ByteOrder::Little;
    let unread = |name: String, shape: Vec<u64>, why: Defect| {
        unread_tensor(name, dtype, shape, (0, 0, 0), order, why)
    };
    let Some(element) = element_of(dtype) else {
        return Ok(unread(name, shape, dtype_defect(dtype)));
    };
    let total = element_count(&shape).and_then(|n| byte_size(n, &element))?;
    let expected = v1_field(dtype);
    if let Some((_, v)) = parts
        .iter()
        .find(|(_, v)| v.len > 0 && v.field != 4 && v.field != expected)
    {
        let why = format!(
            "its values are in TensorProto field {}, which does not hold dtype {dtype}",
            v.field
        );
        return Ok(unread(name, shape, Defect::invalid(why)));
    }
    if parts.iter().any(|(_, v)| v.len > 0 && v.at.is_none()) {
        let why = Defect::unsupported("its values lie in a Snappy-compressed block: not read");
        return Ok(unread(name, shape, why));
    }
    let whole = |slice: &SliceBox| {
        slice.is_empty()
            || slice.len() == shape.len()
                && slice
                    .iter()
                    .zip(&shape)
                    .all(|(&(s, l), &d)| s == 0 && (l == -1 || u64::try_from(l) == Ok(d)))
    };
    match parts.as_slice() {
        [(slice, values)] if whole(slice) => {
            let at = values.at.unwrap_or(0);
            let mut o = ObjectInfo::raw_dense(name, shape.into(), element, (at, values.len), order);
            let varints = o
                .components
                .first()
                .and_then(|c| v1_varints(values.field, &c.element));
            if let (Some(c), Some(encoding)) = (o.components.0.first_mut(), varints) {
                c.encoding = encoding;
                c.decoded_len = Some(total);
                c.uncompressed_length = Some(total);
            } else if values.len != total {
                return Err(Error::invalid(format!(
                    "its values take {} bytes, its shape {total}",
                    values.len
                ))
                .in_object(&o.name));
            }
            Ok(o)
        }
        [] if total == 0 => Ok(ObjectInfo::raw_dense(
            name,
            shape.into(),
            element,
            (0, 0),
            order,
        )),
        [] => Ok(unread(
            name,
            shape,
            Defect::invalid("the checkpoint holds no values for it"),
        )),
        _ if parts
            .iter()
            .any(|(_, v)| v1_varints(v.field, &element).is_some()) =>
        {
            Ok(unread(
                name,
                shape,
                Defect::unsupported("a partitioned tensor of varint-encoded values: not read"),
            ))
        }
        _ => {
            // Slices of bytes as they are: read as a V2 checkpoint's slices, from this file.
            let entries = parts
                .into_iter()
                .map(|(slice, values)| {
                    let entry = Entry {
                        dtype,
                        shape: Vec::new(),
                        unknown_rank: false,
                        shard: 0,
                        offset: values.at.unwrap_or(0),
                        size: values.len,
                        crc: None,
                        sliced: false,
                    };
                    (slice, entry)
                })
                .collect();
            let whole = Entry {
                dtype,
                shape,
                unknown_rank: false,
                shard: 0,
                offset: 0,
                size: 0,
                crc: None,
                sliced: true,
            };
            let mut o = partitioned(name, whole, entries, 1, order)?;
            // In this file, not in a data shard.
            for c in o.components.0.iter_mut() {
                c.file = 0;
                match &mut c.encoding {
                    Encoding::Pieces(pieces) => pieces.iter_mut().for_each(|p| p.file = 0),
                    Encoding::Boxes(table) => table.boxes.iter_mut().for_each(|(p, ..)| p.file = 0),
                    _ => {}
                }
            }
            Ok(o)
        }
    }
}

/// The data shards of the checkpoint whose index is at `path`:
/// `PREFIX.data-00000-of-0000N` for `PREFIX.index`, opened.
fn data_shards(
    path: Option<&Path>,
    count: u64,
    open_shard: OpenShard<'_>,
) -> Result<Vec<(ShardInfo, Source)>> {
    let path = path.ok_or_else(|| {
        Error::unsupported(
            "a TensorFlow checkpoint opened from memory: its data files cannot be found",
        )
    })?;
    let prefix = path
        .to_str()
        .and_then(|p| p.strip_suffix(".index"))
        .ok_or_else(|| {
            Error::argument(
                "a TensorFlow checkpoint's index must be opened by its name, PREFIX.index, \
                 so that its data files (PREFIX.data-*) can be found",
            )
        })?;
    let mut shards = Vec::with_capacity(count as usize);
    for i in 0..count {
        let name = format!("data-{i:05}-of-{count:05}");
        let shard_path = PathBuf::from(format!("{prefix}.{name}"));
        let source = open_shard(&shard_path).map_err(|e| e.in_file(&shard_path))?;
        let info = ShardInfo::data_file(name, shard_path, source.len());
        shards.push((info, source));
    }
    Ok(shards)
}

/// Iterates over the table's data blocks, in key order: `(offset, contents)`.
fn table_blocks<'t>(
    table: &'t [u8],
    keys: &mut KeyBytes,
) -> Result<impl Iterator<Item = Result<(u64, Cow<'t, [u8]>)>>> {
    let footer_at = table.len().checked_sub(FOOTER_LEN).ok_or_else(|| {
        Error::invalid(format!(
            "the checkpoint's index is {} bytes, shorter than a table's {FOOTER_LEN}-byte footer",
            table.len()
        ))
    })?;
    let footer = table.get(footer_at..).unwrap_or_default();
    let magic = footer
        .get(FOOTER_LEN - 8..)
        .and_then(|m| m.try_into().ok())
        .map(u64::from_le_bytes);
    if magic != Some(TABLE_MAGIC) {
        return Err(Error::invalid(
            "not a TensorFlow checkpoint index: the table's footer magic is missing",
        )
        .at(table.len() as u64 - 8));
    }
    let mut pos = 0;
    let handle = |pos: &mut usize| -> Result<(u64, u64)> {
        let offset = varint(footer, pos);
        let size = varint(footer, pos);
        offset.zip(size).ok_or_else(|| {
            Error::invalid("the table's footer holds a malformed block handle").at(footer_at as u64)
        })
    };
    let _metaindex = handle(&mut pos)?;
    let index = handle(&mut pos)?;
    let index_block = block(table, index, "the index block")?;
    let handles: Vec<(u64, u64)> = block_entries(&index_block, index.0, keys)?
        .into_iter()
        .map(|(_, value)| {
            let mut at = 0;
            let offset = varint(value, &mut at);
            let size = varint(value, &mut at);
            offset.zip(size).ok_or_else(|| {
                Error::invalid("the index block holds a malformed block handle").at(index.0)
            })
        })
        .collect::<Result<_>>()?;
    Ok(handles
        .into_iter()
        .map(move |(offset, size)| Ok((offset, block(table, (offset, size), "a data block")?))))
}

/// The contents of the block at `(offset, size)`: its trailer's CRC checked, decompressed
/// if Snappy compressed it.
fn block<'t>(table: &'t [u8], (offset, size): (u64, u64), what: &str) -> Result<Cow<'t, [u8]>> {
    let whole = offset
        .checked_add(size)
        .and_then(|end| end.checked_add(TRAILER_LEN as u64))
        .filter(|&end| end <= table.len() as u64)
        .and_then(|end| table.get(offset as usize..end as usize))
        .ok_or_else(|| {
            Error::invalid(format!(
                "{what} of {size} bytes at offset {offset} lies past the end of the index ({} \
                 bytes)",
                table.len()
            ))
            .at(offset)
        })?;
    let (contents, trailer) = whole.split_at(size as usize);
    let (kind, crc) = match trailer {
        [kind, c0, c1, c2, c3] => (*kind, u32::from_le_bytes([*c0, *c1, *c2, *c3])),
        _ => return Err(Error::invalid(format!("{what} has no trailer")).at(offset)),
    };
    let mut hasher = DigestAlgorithm::Crc32c.hasher();
    hasher.update(contents);
    hasher.update(&[kind]);
    let masked = match hasher.finish() {
        Digest::Crc32c(c) => c.rotate_right(15).wrapping_add(CRC_MASK_DELTA),
        _ => 0,
    };
    if masked != crc {
        return Err(Error::invalid(format!(
            "{what} at offset {offset} fails its CRC-32C (stored {crc:#010x}, computed \
             {masked:#010x}): the index is damaged"
        ))
        .at(offset));
    }
    match kind {
        0 => Ok(Cow::Borrowed(contents)),
        1 => snappy(contents, offset, what).map(Cow::Owned),
        other => Err(Error::unsupported(format!(
            "{what} at offset {offset} is compressed with method {other}, which LevelDB \
             tables do not define"
        ))
        .at(offset)),
    }
}

fn snappy(contents: &[u8], offset: u64, what: &str) -> Result<Vec<u8>> {
    // A block holds names and small records; its declared size is capped before it is
    // allocated.
    const MAX_BLOCK: usize = 64 << 20;
    let n = snap::raw::decompress_len(contents).unwrap_or(usize::MAX);
    if n > MAX_BLOCK {
        return Err(Error::invalid(format!(
            "{what} at offset {offset} declares {n} bytes once decompressed, over {MAX_BLOCK}"
        ))
        .at(offset));
    }
    snap::raw::Decoder::new()
        .decompress_vec(contents)
        .map_err(|e| {
            Error::invalid(format!("{what} at offset {offset}: bad Snappy data ({e})")).at(offset)
        })
}

/// How many bytes of keys an index may rebuild: [`MAX_KEY_EXPANSION`] times its size (at
/// least 1 MiB). A key repeats what it shares of the last one, so a few bytes of a block can
/// each stand for a long key; real names share a prefix with the last name and take two to
/// four times their entries' bytes.
struct KeyBytes {
    left: u64,
    cap: u64,
}

/// See [`KeyBytes`].
const MAX_KEY_EXPANSION: u64 = 16;

impl KeyBytes {
    fn for_index(len: u64) -> Self {
        let cap = len.saturating_mul(MAX_KEY_EXPANSION).max(1 << 20);
        KeyBytes { left: cap, cap }
    }

    fn take(&mut self, n: u64, at: u64) -> Result<()> {
        self.left = self.left.checked_sub(n).ok_or_else(|| {
            Error::limit(format!(
                "the index's keys, each rebuilt from the prefix it shares with the last, take \
                 more than {} bytes ({MAX_KEY_EXPANSION} times the index)",
                self.cap
            ))
            .at(at)
        })?;
        Ok(())
    }
}

/// A block's entries, `(key, value)`, keys rebuilt from their shared prefixes and counted
/// against `keys`. `at` is the block's offset, for errors.
fn block_entries<'b>(
    block: &'b [u8],
    at: u64,
    keys: &mut KeyBytes,
) -> Result<Vec<(Vec<u8>, &'b [u8])>> {
    let bad = |why: &str| Error::invalid(format!("the block at offset {at}: {why}")).at(at);
    let restarts = block
        .len()
        .checked_sub(4)
        .and_then(|n| block.get(n..))
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| bad("too short for its restart count"))?;
    let entries_end = (restarts as usize)
        .checked_mul(4)
        .and_then(|r| block.len().checked_sub(4 + r))
        .ok_or_else(|| bad("its restart points run past its start"))?;
    let mut entries = Vec::new();
    let mut key: Vec<u8> = Vec::new();
    let mut pos = 0;
    while pos < entries_end {
        let (Some(shared), Some(unshared), Some(value_len)) = (
            varint(block, &mut pos),
            varint(block, &mut pos),
            varint(block, &mut pos),
        ) else {
            return Err(bad("an entry's lengths are malformed"));
        };
        if shared > key.len() as u64 {
            return Err(bad("an entry shares more of the last key than it has"));
        }
        let key_end = (pos as u64).checked_add(unshared);
        let value_end = key_end.and_then(|k| k.checked_add(value_len));
        let (Some(key_end), Some(value_end)) = (key_end, value_end) else {
            return Err(bad("an entry runs past the end of the block"));
        };
        if value_end > entries_end as u64 {
            return Err(bad("an entry runs past the end of the block"));
        }
        key.truncate(shared as usize);
        key.extend_from_slice(block.get(pos..key_end as usize).unwrap_or_default());
        let value = block
            .get(key_end as usize..value_end as usize)
            .unwrap_or_default();
        keys.take(key.len() as u64, at)?;
        entries.push((key.clone(), value));
        pos = value_end as usize;
    }
    Ok(entries)
}

/// The varint at `pos` ([`crate::files::varint`]), moving past it.
fn varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let (value, used) = crate::files::varint(bytes.get(*pos..)?)?;
    *pos += used;
    Some(value)
}

/// A protobuf field's value.
enum Wire<'b> {
    Varint(u64),
    Fixed32(u32),
    Fixed64,
    Bytes(&'b [u8]),
}

/// The fields of protobuf message `bytes`, in order.
fn fields(bytes: &[u8]) -> impl Iterator<Item = Result<(u64, Wire<'_>)>> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos >= bytes.len() {
            return None;
        }
        let bad = || Error::invalid("a record's protobuf is malformed");
        let Some(key) = varint(bytes, &mut pos) else {
            return Some(Err(bad()));
        };
        let value = match key & 7 {
            0 => varint(bytes, &mut pos).map(Wire::Varint),
            1 => {
                pos = pos.saturating_add(8);
                (pos <= bytes.len()).then_some(Wire::Fixed64)
            }
            2 => varint(bytes, &mut pos).and_then(|n| {
                let end = pos.checked_add(usize::try_from(n).ok()?)?;
                let field = bytes.get(pos..end)?;
                pos = end;
                Some(Wire::Bytes(field))
            }),
            5 => bytes.get(pos..pos + 4).map(|b| {
                pos += 4;
                Wire::Fixed32(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            }),
            _ => None,
        };
        match value {
            Some(v) => Some(Ok((key >> 3, v))),
            None => {
                pos = bytes.len();
                Some(Err(bad()))
            }
        }
    })
}

struct Header {
    shards: u64,
    big_endian: bool,
}

/// `BundleHeaderProto`: 1 `num_shards`, 2 `endianness` (0 little, 1 big), 3 `version`.
fn bundle_header(bytes: &[u8]) -> Result<Header> {
    let mut header = Header {
        shards: 0,
        big_endian: false,
    };
    for field in fields(bytes) {
        match field? {
            (1, Wire::Varint(n)) => header.shards = n,
            (2, Wire::Varint(e)) => header.big_endian = e == 1,
            _ => {}
        }
    }
    if header.shards > MAX_DATA_SHARDS {
        return Err(Error::limit(format!(
            "the checkpoint names {} data files, over the cap of {MAX_DATA_SHARDS}",
            header.shards
        )));
    }
    Ok(header)
}

/// A `BundleEntryProto`, as far as the listing needs it.
struct Entry {
    dtype: u64,
    shape: Vec<u64>,
    unknown_rank: bool,
    shard: u64,
    offset: u64,
    size: u64,
    crc: Option<u32>,
    sliced: bool,
}

/// A slice's box: each dimension's start and length (-1: all of it), as its key gives them.
type SliceBox = Vec<(i64, i64)>;

/// A slice entry's key as TensorFlow writes it (`EncodeTensorNameSlice`, in OrderedCode):
/// the number 0, the variable's name, the rank, then each dimension's start and length as
/// signed numbers; `None` when the key is not that. At most `max_rank` dimensions.
fn slice_key(key: &[u8], max_rank: usize) -> Option<(String, SliceBox)> {
    let mut rest = key;
    if ordered_unsigned(&mut rest)? != 0 {
        return None;
    }
    // A string: 00 as 00 ff, ff as ff 00, ended by 00 01.
    let mut name = Vec::new();
    loop {
        let (&b, tail) = rest.split_first()?;
        let (&next, after) = tail.split_first().unwrap_or((&0x02, tail));
        rest = match (b, next) {
            (0x00, 0x01) => {
                rest = after;
                break;
            }
            (0x00, 0xff) => {
                name.push(0x00);
                after
            }
            (0xff, 0x00) => {
                name.push(0xff);
                after
            }
            (0x00 | 0xff, _) => return None,
            _ => {
                name.push(b);
                tail
            }
        };
    }
    let rank = usize::try_from(ordered_unsigned(&mut rest)?).ok()?;
    if rank > max_rank {
        return None;
    }
    let mut dims = Vec::with_capacity(rank);
    for _ in 0..rank {
        let start = ordered_signed(&mut rest)?;
        let length = ordered_signed(&mut rest)?;
        dims.push((start, length));
    }
    if !rest.is_empty() {
        return None;
    }
    Some((String::from_utf8(name).ok()?, dims))
}

/// OrderedCode's `WriteNumIncreasing`: a length byte (0-8), then that many big-endian bytes.
fn ordered_unsigned(rest: &mut &[u8]) -> Option<u64> {
    let (&n, tail) = rest.split_first()?;
    let n = usize::from(n);
    if n > 8 {
        return None;
    }
    let bytes = tail.get(..n)?;
    *rest = tail.get(n..)?;
    Some(bytes.iter().fold(0u64, |v, &b| (v << 8) | u64::from(b)))
}

/// OrderedCode's `WriteSignedNumIncreasing`: `len` one bits and a zero (a negative number's
/// bytes inverted), then the value's low `7 * len - 1` bits, big-endian, in `len` bytes.
fn ordered_signed(rest: &mut &[u8]) -> Option<i64> {
    let first = *rest.first()?;
    let negative = first & 0x80 == 0;
    let flip = |b: u8| if negative { !b } else { b };
    let len = match flip(first) {
        0xff => 8 + flip(*rest.get(1)?).leading_ones() as usize,
        f => f.leading_ones() as usize,
    };
    if len == 0 || len > MAX_SIGNED_LEN {
        return None;
    }
    let bytes = rest.get(..len)?;
    *rest = rest.get(len..)?;
    let all = bytes
        .iter()
        .fold(0u128, |v, &b| (v << 8) | u128::from(flip(b)));
    let x = all & ((1u128 << (7 * len - 1)) - 1);
    let x = i64::try_from(x).ok()?;
    Some(if negative { !x } else { x })
}

/// A variable TensorFlow split into `parts` (boxes and entries), once its slices are checked
/// to tile it exactly, each its box's bytes of the variable's dtype in one of the `shards`:
/// sliced along the first axis only, one object of [`Encoding::Pieces`] (the slices in row
/// order); else of [`Encoding::Boxes`] (each slice placed where its box lies). A variable
/// whose slices do not tile it is listed with why it is not read.
fn partitioned(
    name: String,
    whole: Entry,
    parts: Vec<(SliceBox, Entry)>,
    shards: u64,
    order: ByteOrder,
) -> Result<ObjectInfo> {
    let unread = |name: String, whole: Entry, why: String| {
        let why = Defect::invalid(why);
        unread_tensor(name, whole.dtype, whole.shape, (1, 0, 0), order, why)
    };
    let Some(element) = element_of(whole.dtype) else {
        return object(
            name,
            Entry {
                sliced: false,
                ..whole
            },
            order,
        );
    };
    let size = element.logical_size();
    // Each slice's box, with full extents (-1) made explicit.
    let mut boxes = Vec::with_capacity(parts.len());
    for (slice, entry) in &parts {
        let mut start = Vec::with_capacity(slice.len());
        let mut extent = Vec::with_capacity(slice.len());
        for (d, &(s, l)) in slice.iter().enumerate() {
            let dim = whole.shape.get(d).copied().unwrap_or(0);
            let (s, l) = match (s, l) {
                (0, -1) => (0, dim),
                (s, l) if s >= 0 && l >= 0 => (s as u64, l as u64),
                _ => {
                    let why = format!("a slice's box {slice:?} does not lie in its shape");
                    return Ok(unread(name, whole, why));
                }
            };
            start.push(s);
            extent.push(l);
        }
        if entry.dtype != whole.dtype || entry.shard >= shards {
            let why = "a slice's dtype is not its variable's, or its data file is not one of \
                       the checkpoint's";
            return Ok(unread(name, whole, why.into()));
        }
        let piece = Piece {
            file: entry.shard as u32 + 1,
            offset: entry.offset,
            length: entry.size,
            crc32c: entry
                .crc
                .map(|masked| masked.wrapping_sub(CRC_MASK_DELTA).rotate_left(15)),
        };
        boxes.push((piece, start, extent));
    }
    let tiling = match tile(&whole.shape, size, boxes) {
        Ok(tiling) => tiling,
        Err(why) => return Ok(unread(name, whole, format!("{why} (its slices)"))),
    };
    Ok(ObjectInfo::tiled(
        name,
        whole.shape.into(),
        element,
        tiling,
        order,
    ))
}

/// `BundleEntryProto`: 1 `dtype`, 2 `shape`, 3 `shard_id`, 4 `offset`, 5 `size`,
/// 6 `crc32c` (masked), 7 `slices`.
fn bundle_entry(bytes: &[u8], limits: &Limits) -> Result<Entry> {
    let mut e = Entry {
        dtype: 0,
        shape: Vec::new(),
        unknown_rank: false,
        shard: 0,
        offset: 0,
        size: 0,
        crc: None,
        sliced: false,
    };
    for field in fields(bytes) {
        match field? {
            (1, Wire::Varint(d)) => e.dtype = d,
            (2, Wire::Bytes(shape)) => (e.shape, e.unknown_rank) = shape_of(shape, limits)?,
            (3, Wire::Varint(s)) => e.shard = s,
            (4, Wire::Varint(o)) => e.offset = o,
            (5, Wire::Varint(s)) => e.size = s,
            (6, Wire::Fixed32(c)) => e.crc = Some(c),
            (7, Wire::Bytes(_)) => e.sliced = true,
            _ => {}
        }
    }
    Ok(e)
}

/// A `TensorShapeProto` (2 `dim`, each 1 `size`; 3 `unknown_rank`): its dimensions, at
/// most the rank cap, none negative, and whether its rank is unknown.
fn shape_of(bytes: &[u8], limits: &Limits) -> Result<(Vec<u64>, bool)> {
    let (mut shape, mut unknown_rank) = (Vec::new(), false);
    for field in fields(bytes) {
        match field? {
            (2, Wire::Bytes(dim)) => {
                if shape.len() == limits.decode.max_rank {
                    return Err(Error::limit(format!(
                        "its shape has more than {} dimensions",
                        limits.decode.max_rank
                    )));
                }
                let mut size = 0;
                for field in fields(dim) {
                    if let (1, Wire::Varint(s)) = field? {
                        size = s;
                    }
                }
                if size > i64::MAX as u64 {
                    return Err(Error::invalid(format!(
                        "its shape holds the negative size {}",
                        size as i64
                    )));
                }
                shape.push(size);
            }
            (3, Wire::Varint(u)) => unknown_rank = u != 0,
            _ => {}
        }
    }
    Ok((shape, unknown_rank))
}

/// TensorFlow's `DataType` numbers (types.proto) as our element types.
fn element_of(dtype: u64) -> Option<ElementType> {
    let plain = |d| Some(ElementType::plain(d));
    match dtype {
        1 => plain(DType::F32),
        2 => plain(DType::F64),
        3 | 13 => plain(DType::I32), // int32, qint32
        4 | 12 => plain(DType::U8),  // uint8, quint8
        5 | 15 => plain(DType::I16), // int16, qint16
        6 | 11 => plain(DType::I8),  // int8, qint8
        8 => ElementType::logical(LogicalType::Complex64),
        9 => plain(DType::I64),
        10 => plain(DType::Bool),
        14 => plain(DType::BF16),
        16 | 17 => plain(DType::U16), // quint16, uint16
        18 => ElementType::logical(LogicalType::Complex128),
        19 => plain(DType::F16),
        22 => plain(DType::U32),
        23 => plain(DType::U64),
        24 => ElementType::logical(LogicalType::F8E5M2),
        25 => ElementType::logical(LogicalType::F8E4M3Fn),
        26 => ElementType::logical(LogicalType::F8E4M3Fnuz),
        28 => ElementType::logical(LogicalType::F8E5M2Fnuz),
        _ => None,
    }
}

/// A tensor of TensorFlow dtype `dtype` listed with why it is not read: its stored bytes as
/// `u8`, `(file, offset, length)` in the listing's files.
fn unread_tensor(
    name: String,
    dtype: u64,
    shape: Vec<u64>,
    (file, offset, length): (u32, u64, u64),
    order: ByteOrder,
    why: Defect,
) -> ObjectInfo {
    let u8s = ElementType::plain(DType::U8);
    let mut o = ObjectInfo {
        format: Format::Unknown(format!("tensorflow.dtype_{dtype}/1")),
        defect: Some(Box::new(why)),
        ..ObjectInfo::raw_dense(name, shape.into(), u8s, (offset, length), order)
    };
    for c in o.components.0.iter_mut() {
        c.file = file;
    }
    o
}

/// Why a tensor whose dtype has no element type of ours is not read: strings, resources
/// and variants hold no numbers (skipped), any other dtype is unsupported.
fn dtype_defect(dtype: u64) -> Defect {
    match dtype {
        7 => Defect::not_numbers("a string tensor: not numbers"),
        20 | 21 => Defect::not_numbers("a resource or variant tensor: not numbers"),
        d => Defect::unsupported(format!("TensorFlow dtype {d} is not a type ztensor reads")),
    }
}

/// The object for `entry`: dense, its data a range of data shard `entry.shard` (file
/// `shard + 1` in the listing), its CRC the digest; or listed with why it is not read.
fn object(name: String, entry: Entry, order: ByteOrder) -> Result<ObjectInfo> {
    let range = (entry.offset, entry.size);
    let place = (entry.shard as u32 + 1, entry.offset, entry.size);
    let listed = |why: Defect, shape: Vec<u64>| {
        unread_tensor(name.clone(), entry.dtype, shape, place, order, why)
    };
    if entry.sliced {
        let why =
            Defect::unsupported("a partitioned variable whose slices the index does not hold");
        return Ok(listed(why, entry.shape));
    }
    if entry.unknown_rank {
        let why = Defect::unsupported("its shape has an unknown rank");
        return Ok(listed(why, entry.shape));
    }
    let Some(element) = element_of(entry.dtype) else {
        return Ok(listed(dtype_defect(entry.dtype), entry.shape));
    };
    let needed = element_count(&entry.shape).and_then(|n| byte_size(n, &element))?;
    if needed != entry.size {
        return Err(Error::invalid(format!(
            "shape {:?} of {} takes {needed} bytes, but the entry says {}",
            entry.shape,
            element.name(),
            entry.size
        ))
        .in_object(&name));
    }
    let mut o = ObjectInfo::raw_dense(name, entry.shape.into(), element, range, order);
    for c in o.components.0.iter_mut() {
        c.file = entry.shard as u32 + 1;
        c.digest = entry.crc.map(|masked| {
            let crc = masked.wrapping_sub(CRC_MASK_DELTA).rotate_left(15);
            Digest::Crc32c(crc)
        });
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `contents` as a table block stored with compression `kind`, with LevelDB's trailer.
    fn stored(contents: &[u8], kind: u8) -> Vec<u8> {
        let mut hasher = DigestAlgorithm::Crc32c.hasher();
        hasher.update(contents);
        hasher.update(&[kind]);
        let Digest::Crc32c(crc) = hasher.finish() else {
            unreachable!()
        };
        let mut b = contents.to_vec();
        b.push(kind);
        b.extend(
            crc.rotate_right(15)
                .wrapping_add(CRC_MASK_DELTA)
                .to_le_bytes(),
        );
        b
    }

    /// Entries `(shared, unshared key, value)` and one restart point, as a block's contents.
    fn contents(entries: &[(u8, &[u8], &[u8])]) -> Vec<u8> {
        let mut b = Vec::new();
        for (shared, key, value) in entries {
            b.extend([*shared, key.len() as u8, value.len() as u8]);
            b.extend_from_slice(key);
            b.extend_from_slice(value);
        }
        b.extend(0u32.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        b
    }

    #[test]
    fn slice_keys_in_ordered_code() {
        // "a\0b" (its NUL escaped), rank 2, rows 100..105, all of dimension 1.
        let key = b"\x00a\x00\xffb\x00\x01\x01\x02\xc0\x64\x85\x80\x7f";
        assert_eq!(
            slice_key(key, 8),
            Some(("a\0b".to_owned(), vec![(100, 5), (0, -1)]))
        );
        // The rank over the cap, a name that does not end, bytes after the last number.
        assert_eq!(slice_key(key, 1), None);
        assert_eq!(slice_key(b"\x00ab", 8), None);
        let mut long = key.to_vec();
        long.push(0x80);
        assert_eq!(slice_key(&long, 8), None);
        let signed = |bytes: &[u8]| ordered_signed(&mut &bytes[..]);
        assert_eq!(signed(&[0x3f, 0x9c]), Some(-100));
        assert_eq!(signed(&[0x7f]), Some(-1));
        let mut max = vec![0xff, 0xc0, 0x7f];
        max.extend([0xff; 7]);
        assert_eq!(signed(&max), Some(i64::MAX));
        let min: Vec<u8> = max.iter().map(|b| !b).collect();
        assert_eq!(signed(&min), Some(i64::MIN));
        assert_eq!(signed(&[0xc0]), None, "cut short");
    }

    #[test]
    fn reads_snappy_blocks_and_rebuilds_shared_keys() {
        let data = contents(&[
            (0, b"", b"\x08\x01"),
            (0, b"layer/w", b"v1"),
            (6, b"b", b"v2"),
        ]);
        let squeezed = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let table = stored(&squeezed, 1);
        let plain = stored(&data, 0);
        // A block read through its handle: Snappy undone, the CRC taken over what is stored.
        assert_eq!(
            &block(&table, (0, squeezed.len() as u64), "a block").unwrap()[..],
            &data[..]
        );
        assert_eq!(
            &block(&plain, (0, data.len() as u64), "a block").unwrap()[..],
            &data[..]
        );
        let mut keys = KeyBytes::for_index(100);
        let entries = block_entries(&data, 0, &mut keys).unwrap();
        let keys: Vec<&[u8]> = entries.iter().map(|(k, _)| &k[..]).collect();
        assert_eq!(keys, [&b""[..], b"layer/w", b"layer/b"]);
        // A method LevelDB does not define, and a stored byte changed.
        let e = block(&stored(&data, 7), (0, data.len() as u64), "a block").unwrap_err();
        assert_eq!(e.kind(), zt_container::ErrorKind::Unsupported, "{e}");
        let mut bad = table.clone();
        bad[0] ^= 1;
        let e = block(&bad, (0, squeezed.len() as u64), "a block").unwrap_err();
        assert!(e.to_string().contains("fails its CRC-32C"), "{e}");
        // A key that shares more than the last key has.
        let overreach = contents(&[(0, b"ab", b""), (3, b"c", b"")]);
        let e = block_entries(&overreach, 0, &mut KeyBytes::for_index(100)).unwrap_err();
        assert!(e.to_string().contains("shares more of the last key"), "{e}");
    }
}
