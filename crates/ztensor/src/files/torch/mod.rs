//! PyTorch checkpoints in the facade's object model: the zip archive `torch.save` has written
//! since PyTorch 1.6 (`<archive>/data.pkl`, `<archive>/data/<key>`, `<archive>/byteorder`,
//! `<archive>/version`), read without executing anything.
//!
//! `data.pkl` is run by [`pickle`], a machine that understands only what a state dict uses;
//! its value is walked here: dicts (ordered or not) flatten to dotted names, each tensor
//! becomes an object whose data is a range of its storage's record, and every other leaf
//! (numbers, strings, opaque objects) becomes a file attribute under its dotted name.
//!
//! - A contiguous tensor in a stored record is served from the map (no copy); a strided one
//!   (a transpose, a slice with a step, an expanded tensor) gets an [`Arrangement`] and is
//!   gathered into a row-major copy when read. Either way its elements are checked at open to
//!   lie inside its storage.
//! - Tensors sharing a storage (tied weights, views) are all listed; each names its storage
//!   in the attribute `torch.storage` (and its offset in `torch.storage_offset`), so the
//!   sharing is visible. Different storages cannot overlap: the zip reader refuses overlapping
//!   records.
//! - Every torch dtype with a zTensor equivalent maps to it ([`dtype_element`]); a tensor of
//!   any other dtype is listed with a defect. `float4_e2m1fn_x2` is our `f4_e2m1`, whose last
//!   dimension counts values, twice torch's, which counts bytes.
//! - The `byteorder` record (`little`, `big`; absent means little, as older torch wrote).
//! - [`streamed`]: an archive listed from its front, as its bytes are decoded (a compressed
//!   chunk of a distributed checkpoint), instead of from its central directory.

pub(crate) mod dtypes;
pub(crate) mod pickle;
#[cfg(feature = "torch-dcp")]
pub(crate) mod streamed;

use std::collections::BTreeMap;

use zt_container::{Error, Result, Source};
use zt_formats::{DType, ElementType, Encoding};
use zt_manifest::{Attributes, Shape, Value};

use crate::listing::{Limits, Listing};
use crate::model::{Arrangement, ByteOrder, Defect, FileVersion, ObjectInfo};
use crate::zip::{self, Method};
use dtypes::{dtype_element, packs_two, storage_dtype};
use pickle::{Heap, Machine, NdArrayRef, Obj, Pv, TensorRef, PICKLE_LIMITS};

/// A tensor with its storage's key and class and its dtype resolved to text, and its size
/// and stride to numbers.
#[derive(Debug, Clone)]
struct Tensor {
    key: String,
    class: String,
    dtype: String,
    numel: u64,
    offset: u64,
    size: Vec<u64>,
    stride: Vec<u64>,
}

/// The largest `data.pkl` read (real ones are kilobytes to a few megabytes).
pub(crate) const MAX_PICKLE_LEN: u64 = 256 << 20;
/// Values visited while flattening the pickle's value, all paths together: a value reached
/// along many paths (shared references) counts once per path. The cap is this, or 4,096 plus
/// twice the pickle's bytes if smaller: every value of a real checkpoint is written out at
/// least once (a tied weight is one 2-byte memo fetch), while shared references nested
/// level after level would name exponentially many values.
pub(crate) const MAX_WALK_NODES: u64 = 1 << 22;

/// The bytes of names, texts and storage keys the walk may produce for a pickle of `len`
/// bytes: a value referenced many times is copied each time, so this too is tied to the
/// pickle's size (a real checkpoint produces about as many bytes as its pickle holds).
fn text_budget(len: u64) -> u64 {
    (1u64 << 30).min(len.saturating_mul(4).saturating_add(1 << 20))
}

/// The longest flattened name (a real one is tens of bytes).
pub(crate) const MAX_NAME_LEN: usize = 4096;

/// The walk's cap for a pickle of `len` bytes (see [`MAX_WALK_NODES`]).
fn walk_cap(len: u64) -> u64 {
    MAX_WALK_NODES.min(len.saturating_mul(2).saturating_add(4096))
}
/// Nesting followed while flattening.
pub(crate) const MAX_WALK_DEPTH: usize = 64;

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("invalid PyTorch checkpoint: {what}"))
}

/// Bytes of one element of a storage's declared size: the class's dtype, or one byte for
/// `UntypedStorage`.
fn storage_unit(class: &str) -> Option<u64> {
    if class == "UntypedStorage" {
        return Some(1);
    }
    storage_dtype(class)
        .and_then(dtype_element)
        .map(|e| e.logical_size())
}

/// Lists a PyTorch zip checkpoint, or a TorchScript archive (`version`
/// [`FileVersion::TorchScript`]: the same records; its module objects are walked as their
/// state dicts, see the pickle machine's BUILD).
pub(crate) fn list(
    source: &Source,
    entries: Vec<zip::Entry>,
    limits: &Limits,
    version: FileVersion,
) -> Result<Listing> {
    // torch.load reads every record it names; a damaged one refuses the checkpoint.
    let entries = zip::undamaged(entries)?;
    // As torch's reader: the folder of the first record is the archive's, every record must
    // be in it, and the records are looked up there.
    let first = entries
        .first()
        .ok_or_else(|| bad("no <archive>/data.pkl record"))?;
    let Some((folder, _)) = first.name.split_once('/') else {
        return Err(bad(format!(
            "record {:?} is not in a folder, where torch reads a checkpoint's records",
            first.name
        ))
        .at(first.header_offset));
    };
    let prefix = format!("{folder}/");
    if let Some(stray) = entries.iter().find(|e| !e.name.starts_with(&prefix)) {
        return Err(bad(format!(
            "record {:?} is not in the archive's folder {folder:?}, where torch reads every \
             record",
            stray.name
        ))
        .at(stray.header_offset));
    }
    let records: BTreeMap<&str, &zip::Entry> =
        entries.iter().map(|e| (e.name.as_str(), e)).collect();
    let pkl = *records
        .get(format!("{prefix}data.pkl").as_str())
        .ok_or_else(|| bad("no <archive>/data.pkl record"))?;

    let byte_order = match records.get(format!("{prefix}byteorder").as_str()) {
        None => ByteOrder::Little,
        Some(e) => match &*small_record(source, e, 16)? {
            b"little" => ByteOrder::Little,
            b"big" => ByteOrder::Big,
            other => {
                return Err(bad(format!(
                    "byteorder record says {:?}",
                    String::from_utf8_lossy(other)
                ))
                .at(e.data_offset))
            }
        },
    };
    let mut heap = Heap::default();
    let (root, len) = run_record(source, pkl, &mut heap)?;
    let data = |key: &str| {
        records
            .get(format!("{prefix}data/{key}").as_str())
            .map(|e| (*e).clone())
    };
    let mut listing = listing_of(&heap, root, data, byte_order, limits, version.clone(), len)?;
    // A TorchScript archive's tensor constants (a traced module's literals): a tuple in
    // constants.pkl over storages in constants/, listed as `constants.<i>`.
    let constants = records.get(format!("{prefix}constants.pkl").as_str());
    if let (FileVersion::TorchScript, Some(pkl)) = (&version, constants) {
        let found = |key: &str| {
            records
                .get(format!("{prefix}constants/{key}").as_str())
                .map(|e| (*e).clone())
        };
        let mut more = script_constants(source, pkl, found, byte_order, limits)?;
        let Listing {
            version,
            attributes,
            mut objects,
            ..
        } = listing;
        objects.append(&mut more);
        listing = Listing::of_unique(version, attributes, objects);
        if let Some(twice) = crate::listing::sort_by_name(&mut listing.objects) {
            return Err(bad(format!("two tensors are named {twice:?}")));
        }
    }
    listing.zip_entries = entries.into_iter().map(|e| (0, e)).collect();
    Ok(listing)
}

/// Runs the pickle in record `pkl` (at most [`MAX_PICKLE_LEN`] bytes, inflated when
/// deflated) into `heap`: its root value and the pickle's length.
fn run_record(source: &Source, pkl: &zip::Entry, heap: &mut Heap) -> Result<(Pv, u64)> {
    if pkl.uncompressed > MAX_PICKLE_LEN {
        return Err(Error::limit(format!(
            "{} of {} bytes exceeds the cap of {MAX_PICKLE_LEN}",
            pkl.name, pkl.uncompressed
        ))
        .at(pkl.data_offset));
    }
    let pickled = small_record(source, pkl, MAX_PICKLE_LEN)?;
    // Offsets in a stored record are the file's; in an inflated one, the pickle's.
    let base = match pkl.method {
        Method::Stored => pkl.data_offset,
        Method::Deflated => 0,
    };
    let (root, _) = Machine::new(heap, PICKLE_LIMITS, base)
        .run(&pickled)
        .map_err(|e| e.in_object(&pkl.name))?;
    Ok((root, pickled.len() as u64))
}

/// The tensors of a TorchScript archive's constants.pkl, named `constants.<i>`.
fn script_constants(
    source: &Source,
    pkl: &zip::Entry,
    record: impl Fn(&str) -> Option<zip::Entry>,
    byte_order: ByteOrder,
    limits: &Limits,
) -> Result<Vec<ObjectInfo>> {
    let mut heap = Heap::default();
    let (root, len) = run_record(source, pkl, &mut heap)?;
    let listed = listing_of(
        &heap,
        root,
        record,
        byte_order,
        limits,
        FileVersion::TorchScript,
        len,
    )
    .map_err(|e| e.in_object(&pkl.name))?;
    Ok(listed
        .objects
        .into_iter()
        .map(|mut o| {
            o.name = format!("constants.{}", o.name);
            o
        })
        .collect())
}

/// The listing of a checkpoint's value: tensors to objects (their storages found by
/// `record`), other leaves to attributes, names checked to be unique.
fn listing_of(
    heap: &Heap,
    root: Pv,
    record: impl Fn(&str) -> Option<zip::Entry>,
    byte_order: ByteOrder,
    limits: &Limits,
    version: FileVersion,
    pickle_len: u64,
) -> Result<Listing> {
    let Walked {
        tensors,
        unread,
        attributes,
        ..
    } = walk(heap, root, pickle_len, false)?;
    let mut objects = zt_container::internal::try_with_capacity(tensors.len())?;
    for (name, t) in tensors {
        let r = record(&t.key);
        let o = tensor_object(&name, &t, r.as_ref(), byte_order, limits)
            .map_err(|e| e.in_object(&name))?;
        objects.push(o);
    }
    for (name, call) in unread {
        objects.push(unread_object(name, &call));
    }
    let mut names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(bad(format!("two tensors flatten to the name {:?}", w[0])));
    }
    Ok(Listing::of_unique(version, attributes, objects))
}

use crate::sniff::is_legacy_torch_magic as is_legacy_magic;

/// How much of a legacy checkpoint is read first to run its pickles.
const FIRST_LEGACY_WINDOW: u64 = 1 << 20;

/// Whether the pickle machine stopped because its input ended: a window too small.
fn pickle_cut_short(e: &Error) -> bool {
    e.message().contains("ends without STOP") || e.message().contains("bytes asked for")
}

/// The five pickles at the start of a legacy checkpoint: their heap, their values and where
/// the storages after them start.
fn legacy_pickles(bytes: &[u8]) -> Result<(Heap, [Pv; 5], usize)> {
    let mut heap = Heap::default();
    let mut at = 0usize;
    let mut values = [Pv::None; 5];
    for slot in &mut values {
        let rest = bytes.get(at..).unwrap_or_default();
        let (v, used) = Machine::new(&mut heap, PICKLE_LIMITS, at as u64).run(rest)?;
        *slot = v;
        at += used;
    }
    Ok((heap, values, at))
}

/// Lists a legacy (pre-1.6) checkpoint: five pickles (the magic number, the protocol version
/// 1001, the writer's system information, the value, the list of storage keys), then each
/// storage in the order of that list as its element count (8 bytes) and its elements, in the
/// byte order the system information gives.
pub(crate) fn list_legacy(source: &Source, limits: &Limits) -> Result<Listing> {
    let head = source.read_at(0, source.len().min(32))?;
    if !is_legacy_magic(&head) {
        return Err(Error::unsupported(
            "a pickle that is not a PyTorch checkpoint (no legacy torch.save magic number)",
        ));
    }
    // The pickles come first and are small; read a first window of the file, and a larger
    // one only if they do not end within it (a copy when the file is not mapped).
    let mut window = source.len().min(FIRST_LEGACY_WINDOW);
    let (heap, values, at) = loop {
        let bytes = source.read_at(0, window)?;
        match legacy_pickles(&bytes) {
            Err(e) if pickle_cut_short(&e) && window < source.len() => {
                if window == MAX_PICKLE_LEN {
                    return Err(Error::limit(format!(
                        "the legacy checkpoint's pickles exceed the cap of {MAX_PICKLE_LEN} bytes"
                    )));
                }
                window = source.len().min(MAX_PICKLE_LEN);
            }
            other => break other?,
        }
    };
    let [_, version, info, root, keys] = values;
    match version {
        Pv::Int(1001) => {}
        Pv::Int(n) => {
            return Err(Error::unsupported(format!(
                "legacy checkpoint protocol {n} (1001 is read)"
            )))
        }
        _ => return Err(bad("the legacy protocol version is not an integer")),
    }
    let little = match heap.get(info) {
        Some(Obj::Dict(items)) => items.iter().find_map(|&(k, v)| {
            matches!(heap.get(k), Some(Obj::Str(s)) if s == "little_endian").then_some(v)
        }),
        _ => None,
    };
    let byte_order = match little {
        Some(Pv::Bool(false)) => ByteOrder::Big,
        Some(Pv::Bool(true)) | None => ByteOrder::Little,
        Some(_) => return Err(bad("little_endian is not True or False").at(0)),
    };
    // Each storage's class, from the persistent ids of the value's pickle.
    let mut classes: BTreeMap<&str, &str> = BTreeMap::new();
    for s in heap.storages() {
        if let (Some(key), Some(class)) = (heap.text(s.key), class_name(&heap, s.class)) {
            classes.entry(key).or_insert(class);
        }
    }
    let key_list: Vec<Pv> = match heap.get(keys) {
        Some(Obj::List(k)) => k.clone(),
        _ => return Err(bad("the storage key list is not a list").at(at as u64)),
    };
    let mut records: BTreeMap<String, zip::Entry> = BTreeMap::new();
    let mut offset = at as u64;
    for k in key_list {
        let Some(Obj::Str(key)) = heap.get(k) else {
            return Err(bad("a storage key is not a string").at(offset));
        };
        let unit = classes
            .get(key.as_str())
            .and_then(|c| storage_unit(c))
            .ok_or_else(|| {
                bad(format!(
                    "storage {key:?} is listed but no tensor names its type"
                ))
                .at(offset)
            })?;
        let mut n = [0u8; 8];
        source.read_into(offset, &mut n)?;
        let numel = match byte_order {
            ByteOrder::Little => u64::from_le_bytes(n),
            ByteOrder::Big => u64::from_be_bytes(n),
        };
        let data_offset = offset + 8;
        let len = numel
            .checked_mul(unit)
            .filter(|&l| {
                data_offset
                    .checked_add(l)
                    .is_some_and(|e| e <= source.len())
            })
            .ok_or_else(|| {
                bad(format!(
                    "storage {key:?} of {numel} elements runs past the end of the file \
                     (truncated?)"
                ))
                .at(offset)
            })?;
        if records.contains_key(key) {
            return Err(bad(format!("storage {key:?} is listed twice")).at(offset));
        }
        records.insert(
            key.clone(),
            zip::Entry {
                name: key.clone(),
                method: Method::Stored,
                data_offset,
                compressed: len,
                uncompressed: len,
                header_offset: offset,
                // A legacy storage record has no CRC; it is never among the entries that
                // verify checks.
                crc32: 0,
                damage: None,
            },
        );
        offset = data_offset + len;
    }
    let record = |key: &str| records.get(key).cloned();
    listing_of(
        &heap,
        root,
        record,
        byte_order,
        limits,
        FileVersion::PyTorchLegacy,
        at as u64,
    )
}

/// A small record's bytes (the byteorder, the pickle), inflated if deflated, at most `cap`.
fn small_record<'s>(
    source: &'s Source,
    e: &zip::Entry,
    cap: u64,
) -> Result<std::borrow::Cow<'s, [u8]>> {
    zip::entry_bytes(source, e, cap)
}

/// Tensor data a call we do not evaluate would have built (a quantized tensor's
/// `_rebuild_qtensor`, a renamed or newer rebuild function): listed under its name with no
/// bytes and a defect naming the call, so that reads and conversions say what is missing
/// instead of leaving it out unseen; the rest of the file reads.
pub(crate) fn unread_object(name: String, call: &str) -> ObjectInfo {
    ObjectInfo::defective(
        name,
        Defect::unsupported(format!(
            "built by {call}, a call this reader does not evaluate (it runs no pickle code)"
        )),
    )
}

/// One tensor as an object: its element type, and where its elements lie in its storage's
/// record, checked to stay inside it.
fn tensor_object(
    name: &str,
    t: &Tensor,
    record: Option<&zip::Entry>,
    byte_order: ByteOrder,
    limits: &Limits,
) -> Result<ObjectInfo> {
    let record =
        record.ok_or_else(|| bad(format!("storage {:?} has no data/{} record", t.key, t.key)))?;
    if t.size.len() != t.stride.len() {
        return Err(bad(format!(
            "size {:?} and stride {:?} differ in rank",
            t.size, t.stride
        )));
    }
    if t.size.len() > limits.decode.max_rank {
        return Err(Error::rank_over_cap(
            Some(t.size.len() as u64),
            limits.decode.max_rank,
        ));
    }
    let mut attributes = Attributes::new();
    attributes.insert("torch.storage".into(), Value::Text(t.key.clone()));
    if t.offset != 0 {
        attributes.insert(
            "torch.storage_offset".into(),
            Value::Integer(i128::from(t.offset)),
        );
    }
    // Two FP4 values a byte: our last dimension counts values, torch's bytes (the size and
    // strides gathered below stay torch's, in bytes). A 0-d tensor's two values have no
    // shape of ours.
    let mut dims = t.size.clone();
    if packs_two(&t.dtype) {
        match dims.last_mut() {
            Some(last) => {
                *last = last
                    .checked_mul(2)
                    .ok_or_else(|| bad(format!("shape {:?} overflows", t.size)))?
            }
            None => {
                let why = "a 0-d float4_e2m1fn_x2 tensor: its byte holds two values, which no \
                           shape of ours without dimensions says";
                return Ok(unreadable(name, dims, attributes, record, why.into()));
            }
        }
    }
    let Some(element) = dtype_element(&t.dtype) else {
        let why = format!("torch dtype {} has no zTensor equivalent", t.dtype);
        return Ok(unreadable(name, dims, attributes, record, why));
    };
    let shape = Shape::from(dims);
    let size = element.logical_size();
    let unit = storage_unit(&t.class).unwrap_or(size);
    let storage_bytes = t
        .numel
        .checked_mul(unit)
        .ok_or_else(|| bad(format!("storage of {} elements overflows", t.numel)))?;
    if storage_bytes != record.uncompressed {
        return Err(bad(format!(
            "storage {:?} declares {storage_bytes} bytes, but its record holds {}",
            t.key, record.uncompressed
        ))
        .at(record.data_offset));
    }
    let count = t
        .size
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {:?} overflows", t.size)))?;
    let dense_len = count
        .checked_mul(size)
        .ok_or_else(|| bad(format!("shape {:?} overflows", t.size)))?;
    // The elements reach from `offset` to `offset + reach`, one past the largest index the
    // strides give (nothing for an empty tensor); every step checked, the last `+ 1` too.
    let reach = if count == 0 {
        0
    } else {
        t.size
            .iter()
            .zip(&t.stride)
            .try_fold(0u64, |a, (&n, &s)| a.checked_add((n - 1).checked_mul(s)?))
            .and_then(|last| last.checked_add(1))
            .ok_or_else(|| bad(format!("strides {:?} overflow", t.stride)))?
    };
    // An empty tensor reads nothing: its offset, which torch does not bound, is not used.
    let start = if count == 0 {
        0
    } else {
        t.offset
            .checked_mul(size)
            .ok_or_else(|| bad("storage offset overflows"))?
    };
    let span = reach
        .checked_mul(size)
        .ok_or_else(|| bad(format!("strides {:?} overflow", t.stride)))?;
    let end = start
        .checked_add(span)
        .ok_or_else(|| bad("storage offset overflows"))?;
    if count > 0 && end > storage_bytes {
        return Err(bad(format!(
            "elements reach byte {end} of storage {:?}, which holds {storage_bytes}",
            t.key
        ))
        .at(record.data_offset));
    }
    let contiguous = is_row_major(&t.size, &t.stride);
    if !contiguous {
        attributes.insert(
            "torch.stride".into(),
            Value::Array(
                t.stride
                    .iter()
                    .map(|&s| Value::Integer(i128::from(s)))
                    .collect(),
            ),
        );
    }
    let mut o = ObjectInfo::raw_dense(
        name.to_owned(),
        shape,
        element,
        (
            // A stored record's data lies in the file, so this cannot overflow; a deflated
            // one's `start` is into the inflated bytes, and its offset is replaced below.
            record.data_offset.saturating_add(start),
            if contiguous { dense_len } else { span },
        ),
        byte_order,
    );
    o.attributes = attributes;
    let Some(c) = o.components.0.first_mut() else {
        return Ok(o);
    };
    match record.method {
        Method::Stored if contiguous => {}
        Method::Stored => {
            c.decoded_len = Some(dense_len);
            c.arrangement = Some(Box::new(Arrangement {
                skip: 0,
                span,
                dims: t.size.clone(),
                strides: t.stride.clone(),
                described: false,
            }));
        }
        Method::Deflated => {
            // torch.save never deflates storages; a zip tool may have. The record is
            // inflated whole (under the cap) and the elements gathered from it.
            c.offset = record.data_offset;
            c.length = record.compressed;
            c.encoding = Encoding::Deflate;
            c.uncompressed_length = Some(record.uncompressed);
            c.decoded_len = Some(dense_len);
            let strides = if contiguous {
                row_major(&t.size)
            } else {
                t.stride.clone()
            };
            c.arrangement = Some(Box::new(Arrangement {
                skip: start,
                span: storage_bytes - start.min(storage_bytes),
                dims: t.size.clone(),
                strides,
                described: false,
            }));
        }
    }
    Ok(o)
}

/// A tensor listed, with its attributes, as unsupported for `why` (a dtype we do not map):
/// no data, so that nothing reads bytes whose meaning is unknown.
fn unreadable(
    name: &str,
    dims: Vec<u64>,
    attributes: Attributes,
    record: &zip::Entry,
    why: String,
) -> ObjectInfo {
    let mut o = ObjectInfo::raw_dense(
        name.to_owned(),
        Shape::from(dims),
        ElementType::plain(DType::U8),
        (record.data_offset, 0),
        ByteOrder::Little,
    );
    o.attributes = attributes;
    o.defect = Some(Box::new(Defect::unsupported(why)));
    o
}

/// A storage class's name: a global's name or a dtype's.
fn class_name(heap: &Heap, class: Pv) -> Option<&str> {
    match heap.get(class) {
        Some(Obj::Global(g)) => Some(g.1.as_str()),
        Some(Obj::DType(n)) => Some(n.as_str()),
        _ => None,
    }
}

/// A global's dotted name, `module.name`; `None` for anything else.
fn global_name(heap: &Heap, v: Pv) -> Option<String> {
    match heap.get(v) {
        Some(Obj::Global(g)) => Some(format!("{}.{}", g.0, g.1)),
        _ => None,
    }
}

/// The name a tensor at `name` is listed under: a pickle whose root is one tensor gives it
/// no name, so it is called `tensor`.
fn tensor_name(name: String) -> String {
    if name.is_empty() {
        "tensor".to_owned()
    } else {
        name
    }
}

/// Row-major strides of a shape, in elements.
fn row_major(size: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; size.len()];
    let mut step = 1u64;
    for (st, &n) in s.iter_mut().zip(size).rev() {
        *st = step;
        step = step.saturating_mul(n);
    }
    s
}

/// Whether strides are those of a packed row-major array (dimensions of size 1 may have any
/// stride, and an empty tensor is packed).
fn is_row_major(size: &[u64], stride: &[u64]) -> bool {
    if size.contains(&0) {
        return true;
    }
    let mut step = 1u64;
    for (&n, &s) in size.iter().zip(stride).rev() {
        if n != 1 && s != step {
            return false;
        }
        step = step.saturating_mul(n);
    }
    true
}

/// What [`walk`] found in a pickle's value.
pub(crate) struct Walked {
    /// Tensors by flattened name.
    tensors: Vec<(String, Tensor)>,
    /// Tensor data built by calls we do not evaluate: name and the call's global.
    pub unread: Vec<(String, String)>,
    /// NumPy arrays by flattened name, with the name Paddle 2 pickled beside one (its
    /// `(name, array)` pair); empty unless asked for.
    #[cfg_attr(not(feature = "pickle"), allow(dead_code))]
    pub arrays: Vec<(String, NdArrayRef, Option<String>)>,
    /// Every other leaf, by flattened name.
    pub attributes: Attributes,
}

impl Walked {
    /// The names of the torch tensors the value holds (a pickle that is not a checkpoint
    /// cannot read them: their storages live in a checkpoint's records).
    #[cfg_attr(not(feature = "pickle"), allow(dead_code))]
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.tensors.iter().map(|(n, _)| n.as_str())
    }
}

/// Flattens the value `root` of a pickle of `pickle_len` bytes: dicts (ordered or not) to
/// dotted names, lists and tuples that hold tensors or containers by index; tensors, and
/// NumPy arrays if `arrays` (else they are opaque attributes), become named objects, every
/// other leaf an attribute. Bounded by [`walk_cap`] and [`text_budget`] of the length.
pub(crate) fn walk(heap: &Heap, root: Pv, pickle_len: u64, arrays: bool) -> Result<Walked> {
    let mut walk = Walk {
        heap,
        nodes: 0,
        cap: walk_cap(pickle_len),
        spent: 0,
        budget: text_budget(pickle_len),
        tensors: Vec::new(),
        unread: Vec::new(),
        arrays: arrays.then(Vec::new),
        attributes: Attributes::new(),
    };
    walk.walk(root, String::new(), 0)?;
    Ok(Walked {
        tensors: walk.tensors,
        unread: walk.unread,
        arrays: walk.arrays.unwrap_or_default(),
        attributes: walk.attributes,
    })
}

/// Flattens the pickle's value: tensors to dotted names, every other leaf to attributes.
struct Walk<'h> {
    heap: &'h Heap,
    nodes: u64,
    cap: u64,
    tensors: Vec<(String, Tensor)>,
    /// Tensor data built by calls we do not evaluate: name and the call's global.
    unread: Vec<(String, String)>,
    /// NumPy arrays, when they are collected.
    arrays: Option<Vec<(String, NdArrayRef, Option<String>)>>,
    /// Bytes of names, texts and keys produced so far, against `budget`.
    spent: u64,
    budget: u64,
    attributes: Attributes,
}

impl Walk<'_> {
    fn count(&mut self, depth: usize) -> Result<()> {
        self.nodes += 1;
        if self.nodes > self.cap {
            return Err(Error::limit(format!(
                "the checkpoint's value has more than {} parts (counting shared ones once per use)",
                self.cap
            )));
        }
        if depth > MAX_WALK_DEPTH {
            return Err(Error::limit(format!(
                "the checkpoint's value is nested deeper than {MAX_WALK_DEPTH}"
            )));
        }
        Ok(())
    }

    /// Charges `n` bytes of names or texts about to be made against the budget.
    fn spend(&mut self, n: usize) -> Result<()> {
        self.spent = self.spent.saturating_add(n as u64);
        if self.spent > self.budget {
            return Err(Error::limit(format!(
                "the checkpoint's names and values take more than {} bytes",
                self.budget
            )));
        }
        Ok(())
    }

    /// `prefix.key`, checked against the name cap and the budget before it is made.
    fn join(&mut self, prefix: &str, key: &str) -> Result<String> {
        let len = prefix.len() + 1 + key.len();
        if len > MAX_NAME_LEN {
            return Err(Error::limit(format!(
                "a flattened name of {len} bytes exceeds the cap of {MAX_NAME_LEN}"
            )));
        }
        self.spend(len)?;
        Ok(if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}.{key}")
        })
    }

    fn walk(&mut self, v: Pv, name: String, depth: usize) -> Result<()> {
        self.count(depth)?;
        let heap = self.heap;
        match heap.get(v) {
            Some(Obj::Dict(items)) => {
                for &(k, child) in items {
                    let key = self.key_text(k)?;
                    let child_name = self.join(&name, &key)?;
                    self.walk(child, child_name, depth + 1)?;
                }
            }
            Some(Obj::Tensor(t)) => {
                let t = self.resolve(t)?;
                self.tensors.push((tensor_name(name), t));
            }
            Some(Obj::Unread(cls)) => {
                let call = global_name(heap, *cls)
                    .unwrap_or_else(|| "a call that is not a global".to_owned());
                self.spend(call.len())?;
                self.unread.push((tensor_name(name), call));
            }
            Some(Obj::NdArray(a)) if self.arrays.is_some() => {
                let a = **a;
                self.spend(name.len())?;
                if let Some(arrays) = &mut self.arrays {
                    arrays.push((tensor_name(name), a, None));
                }
            }
            // Paddle 2 pickled a tensor as the pair (its name, its array).
            Some(Obj::Tuple(items))
                if self.arrays.is_some() && self.paddle_pair(items).is_some() =>
            {
                if let Some((inner, a)) = self.paddle_pair(items) {
                    let inner = inner.to_owned();
                    self.spend(name.len() + inner.len())?;
                    if let Some(arrays) = &mut self.arrays {
                        arrays.push((tensor_name(name), a, Some(inner)));
                    }
                }
            }
            Some(Obj::List(items) | Obj::Tuple(items)) if self.holds_tensors(items) => {
                for (i, &child) in items.iter().enumerate() {
                    let child_name = self.join(&name, &i.to_string())?;
                    self.walk(child, child_name, depth + 1)?;
                }
            }
            _ => {
                let value = self.value(v, depth)?;
                let key = if name.is_empty() {
                    "value".to_owned()
                } else {
                    name
                };
                self.attributes.insert(key, value);
            }
        }
        Ok(())
    }

    /// Whether a list or tuple holds a tensor, a collected array or a container (then it is
    /// flattened by index).
    fn holds_tensors(&self, items: &[Pv]) -> bool {
        items.iter().any(|&i| match self.heap.get(i) {
            Some(Obj::Tensor(_) | Obj::Unread(_) | Obj::Dict(_) | Obj::List(_) | Obj::Tuple(_)) => {
                true
            }
            Some(Obj::NdArray(_)) => self.arrays.is_some(),
            _ => false,
        })
    }

    /// A tuple `(name, array)`, as Paddle 2 pickled a tensor: the name and the array.
    fn paddle_pair(&self, items: &[Pv]) -> Option<(&str, NdArrayRef)> {
        match (items, items.get(1).map(|&a| self.heap.get(a))) {
            ([n, _], Some(Some(Obj::NdArray(a)))) => Some((self.heap.text(*n)?, **a)),
            _ => None,
        }
    }

    /// A dict key as text, checked against the name cap before it is copied.
    fn key_text(&mut self, k: Pv) -> Result<String> {
        if let Some(Obj::TextSpan { len, .. }) = self.heap.get(k) {
            return Err(Error::limit(format!(
                "a key of {len} bytes exceeds the name cap of {MAX_NAME_LEN}"
            )));
        }
        let key = match (k, self.heap.get(k)) {
            (_, Some(Obj::Str(s))) => {
                if s.len() > MAX_NAME_LEN {
                    return Err(Error::limit(format!(
                        "a key of {} bytes exceeds the name cap of {MAX_NAME_LEN}",
                        s.len()
                    )));
                }
                s.clone()
            }
            (Pv::Int(n), _) => n.to_string(),
            (Pv::Bool(b), _) => if b { "True" } else { "False" }.to_owned(),
            (Pv::None, _) => "None".to_owned(),
            _ => "?".to_owned(),
        };
        self.spend(key.len())?;
        Ok(key)
    }

    /// A tensor's handles resolved: its storage's key and class, its dtype, its size and
    /// stride as numbers.
    fn resolve(&mut self, t: &TensorRef) -> Result<Tensor> {
        let heap = self.heap;
        let Some(Obj::Storage(s)) = heap.get(t.storage) else {
            return Err(bad("a tensor's storage is not a storage"));
        };
        let key = heap.text(s.key).unwrap_or_default();
        if key.len() > MAX_NAME_LEN {
            return Err(Error::limit(format!(
                "a storage key of {} bytes exceeds the cap of {MAX_NAME_LEN}",
                key.len()
            )));
        }
        let class = class_name(heap, s.class).unwrap_or_default();
        let dtype = match t.dtype.and_then(|d| heap.get(d)) {
            Some(Obj::DType(d)) => d.clone(),
            Some(Obj::Global(g)) => format!("{}.{}", g.0, g.1),
            _ => storage_dtype(class).unwrap_or(class).to_owned(),
        };
        self.spend(key.len() + class.len() + dtype.len())?;
        let ints = |v: Pv, what: &str| -> Result<Vec<u64>> {
            match heap.get(v) {
                Some(Obj::Tuple(items)) => items
                    .iter()
                    .map(|x| match x {
                        Pv::Int(n) if *n >= 0 => Ok(*n as u64),
                        _ => Err(bad(format!(
                            "a tensor's {what} holds a negative or non-integer"
                        ))),
                    })
                    .collect(),
                _ => Err(bad(format!("a tensor's {what} is not a tuple"))),
            }
        };
        Ok(Tensor {
            key: key.to_owned(),
            class: class.to_owned(),
            dtype,
            numel: s.numel,
            offset: t.offset,
            size: ints(t.size, "size")?,
            stride: ints(t.stride, "stride")?,
        })
    }

    /// A leaf as an attribute value (opaque objects as `{"opaque": "module.name"}`).
    fn value(&mut self, v: Pv, depth: usize) -> Result<Value> {
        self.count(depth)?;
        let heap = self.heap;
        Ok(match v {
            Pv::None => Value::Null,
            Pv::Bool(b) => Value::Bool(b),
            Pv::Int(n) => Value::Integer(i128::from(n)),
            Pv::Float(f) => Value::Float(f),
            Pv::Obj(_) => match heap.get(v) {
                Some(Obj::Str(s) | Obj::BigInt(s)) => {
                    self.spend(s.len())?;
                    Value::Text(s.clone())
                }
                Some(Obj::Bytes(b)) => {
                    self.spend(b.len())?;
                    Value::Bytes(b.clone())
                }
                Some(Obj::List(items) | Obj::Tuple(items) | Obj::Set(items)) => {
                    let mut out = Vec::with_capacity(items.len().min(1024));
                    for &i in items {
                        out.push(self.value(i, depth + 1)?);
                    }
                    Value::Array(out)
                }
                Some(Obj::Dict(items)) => {
                    let mut out = BTreeMap::new();
                    for &(k, i) in items {
                        let key = self.key_text(k)?;
                        let val = self.value(i, depth + 1)?;
                        out.insert(key, val);
                    }
                    Value::Map(out)
                }
                Some(Obj::DType(d)) => self.opaque(format!("torch.{d}"))?,
                Some(Obj::Global(g)) => self.opaque(format!("{}.{}", g.0, g.1))?,
                Some(Obj::Opaque(cls) | Obj::Unread(cls)) => {
                    let class = global_name(heap, *cls).unwrap_or_else(|| "an object".to_owned());
                    self.opaque(class)?
                }
                Some(Obj::Storage(s)) => {
                    let key = heap.text(s.key).unwrap_or_default();
                    let key: String = key.chars().take(64).collect();
                    self.opaque(format!("storage {key}"))?
                }
                Some(Obj::Span { len, .. }) => self.opaque(format!("bytes ({len})"))?,
                // Bytes Python 3 pickled as latin-1 text (protocol 2): the bytes again.
                Some(Obj::Latin1 { text, len, .. }) => {
                    self.spend(*len as usize)?;
                    let bytes: Option<Vec<u8>> = heap
                        .text(*text)
                        .and_then(|t| t.chars().map(|c| u8::try_from(c).ok()).collect());
                    match bytes {
                        Some(b) => Value::Bytes(b),
                        None => self.opaque(format!("bytes (latin-1 text of {len} bytes)"))?,
                    }
                }
                Some(Obj::TextSpan { len, .. }) => self.opaque(format!("text ({len} bytes)"))?,
                Some(Obj::NdArray(_)) => self.opaque("numpy.ndarray".to_owned())?,
                Some(Obj::NpDType(d)) => {
                    let code: String = d.code.chars().take(64).collect();
                    self.opaque(format!("numpy.dtype {code}"))?
                }
                Some(Obj::Tensor(_)) | None => Value::Null,
            },
        })
    }

    fn opaque(&mut self, name: String) -> Result<Value> {
        self.spend(name.len())?;
        Ok(Value::Map(BTreeMap::from([(
            "opaque".to_owned(),
            Value::Text(name),
        )])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_major_strides() {
        assert!(is_row_major(&[2, 3], &[3, 1]));
        assert!(!is_row_major(&[2, 3], &[1, 2]));
        assert!(is_row_major(&[1, 3], &[99, 1]));
        assert!(is_row_major(&[0, 3], &[0, 0]));
        assert!(is_row_major(&[], &[]));
        assert_eq!(row_major(&[2, 3, 4]), [12, 4, 1]);
    }
}
