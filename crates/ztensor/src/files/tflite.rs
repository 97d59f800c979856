//! TensorFlow Lite models (`.tflite`, LiteRT) in the facade's object model: the constant
//! tensors (weights) of every subgraph.
//!
//! A model is a FlatBuffer (file identifier `TFL3` at byte 4) of the schema's `Model` table,
//! read in place by the small reader below:
//!
//! ```text
//!  Model     1 operator_codes  2 subgraphs: [SubGraph]  3 description  4 buffers: [Buffer]
//!  SubGraph  0 tensors: [Tensor]  4 name
//!  Tensor    0 shape: [int]  1 type: byte  2 buffer: uint  3 name  4 quantization  6 sparsity
//!  Buffer    0 data: [ubyte] (16-byte aligned)  1 offset: ulong  2 size: ulong
//!  Quantization  2 scale: [float]  3 zero_point: [long]  6 quantized_dimension: int
//! ```
//!
//! - A tensor whose buffer holds bytes is listed (buffer 0 and empty buffers are activations:
//!   not listed). Its bytes are a range of the file: the `data` vector, or, in a model over
//!   2 GiB, `offset` and `size` into the file past the FlatBuffer. Zero copy.
//! - The bytes must be exactly the shape's, as LiteRT's interpreter requires (INT4 and UINT4
//!   pack two elements in a byte, INT2 four); shapes must be non-negative. A sparse tensor
//!   (`sparsity`: its dimensions each dense or CSR, in a traversal order, maybe in blocks) is
//!   one component of [`Encoding::SparseLevels`] over its stored values, made dense when
//!   read ([`zt_formats::densify_into`]), as LiteRT's DENSIFY op does. Strings, resources and
//!   variants are listed with a defect. Quantization parameters become the object's
//!   attributes `tflite.scale`, `tflite.zero_point`, `tflite.quantized_dimension`.
//! - Names: the first subgraph's tensors by their names, a later subgraph's as
//!   `<subgraph name or index>/<name>`; a name given twice gets `#<tensor index>`.
//! - Every offset is checked against the FlatBuffer before it is followed (a table's vtable,
//!   each field inside its table, each vector's length against the bytes left); what the
//!   listing takes is charged to [`Limits::listing_budget`] first. A model that cannot be
//!   mapped is read whole first, up to [`MAX_UNMAPPED_TFLITE`].

use foldhash::fast::RandomState;
use hashbrown::HashSet;
use zt_container::internal::MemoryBudget;
use zt_container::{Error, Result, Source};
use zt_formats::{
    DType, ElementType, Encoding, Level, LogicalType, SparseLevels, MAX_SPARSE_LEVELS,
};
use zt_manifest::{Attributes, Shape, Value};

use crate::listing::{Limits, Listing};
use crate::model::{Defect, FileVersion, ObjectInfo};
use crate::ByteOrder;

/// The largest model read whole when it cannot be mapped (over HTTP, from an object store):
/// its tables lie between its buffers.
pub(crate) const MAX_UNMAPPED_TFLITE: u64 = 1 << 30;

/// The most quantization scales or zero points one tensor's attributes take (one per channel).
pub(crate) const MAX_QUANT_PARAMS: usize = 1 << 20;

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("invalid TensorFlow Lite model: {what}"))
}

/// The FlatBuffer: every read is checked against its end.
struct Fb<'a> {
    bytes: &'a [u8],
}

/// A table: where it starts and its vtable's field offsets.
#[derive(Clone, Copy)]
struct Table<'a> {
    at: usize,
    slots: &'a [u8],
    inline: usize,
}

impl<'a> Fb<'a> {
    fn get<const N: usize>(&self, at: usize, what: &str) -> Result<[u8; N]> {
        at.checked_add(N)
            .and_then(|end| self.bytes.get(at..end))
            .and_then(|b| b.first_chunk::<N>().copied())
            .ok_or_else(|| {
                bad(format!(
                    "{what} at byte {at} runs past the end of the model"
                ))
            })
    }

    fn u32(&self, at: usize, what: &str) -> Result<u32> {
        self.get::<4>(at, what).map(u32::from_le_bytes)
    }

    /// Follows the unsigned offset stored at `at` (FlatBuffers point forward).
    fn follow(&self, at: usize, what: &str) -> Result<usize> {
        let to = self.u32(at, what)? as usize;
        at.checked_add(to)
            .filter(|&p| p < self.bytes.len())
            .ok_or_else(|| {
                bad(format!(
                    "{what} at byte {at} points past the end of the model"
                ))
            })
    }

    /// The table at `at`: its vtable found and checked.
    fn table(&self, at: usize, what: &str) -> Result<Table<'a>> {
        let back = i32::from_le_bytes(self.get::<4>(at, what)?);
        let vtable = (at as i64)
            .checked_sub(i64::from(back))
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| {
                bad(format!(
                    "{what} at byte {at}: its vtable lies outside the model"
                ))
            })?;
        let head = self.get::<4>(vtable, what)?;
        let size = usize::from(u16::from_le_bytes([head[0], head[1]]));
        let inline = usize::from(u16::from_le_bytes([head[2], head[3]]));
        if size < 4 || size % 2 != 0 || inline < 4 {
            return Err(bad(format!(
                "{what} at byte {at}: a vtable of {size} bytes for a table of {inline}"
            )));
        }
        let slots = vtable
            .checked_add(size)
            .and_then(|end| self.bytes.get(vtable + 4..end))
            .ok_or_else(|| bad(format!("{what} at byte {at}: its vtable runs past the end")))?;
        if at
            .checked_add(inline)
            .is_none_or(|end| end > self.bytes.len())
        {
            return Err(bad(format!(
                "{what} at byte {at} runs past the end of the model"
            )));
        }
        Ok(Table { at, slots, inline })
    }

    /// Where field `slot` of `t` lies, if the table has it; `width` bytes of it must lie
    /// inside the table.
    fn field(&self, t: Table<'_>, slot: usize, width: usize, what: &str) -> Result<Option<usize>> {
        let Some(pair) = t.slots.get(2 * slot..2 * slot + 2) else {
            return Ok(None);
        };
        let off = usize::from(u16::from_le_bytes([pair[0], pair[1]]));
        if off == 0 {
            return Ok(None);
        }
        if off < 4 || off + width > t.inline {
            return Err(bad(format!(
                "{what} at byte {}: field {slot} lies outside its table",
                t.at
            )));
        }
        Ok(Some(t.at + off))
    }

    fn scalar<const N: usize>(
        &self,
        t: Table<'_>,
        slot: usize,
        what: &str,
    ) -> Result<Option<[u8; N]>> {
        match self.field(t, slot, N, what)? {
            Some(at) => self.get::<N>(at, what).map(Some),
            None => Ok(None),
        }
    }

    /// The vector field `slot` of `t`: where its elements start and how many, each
    /// `element` bytes, all inside the model.
    fn vector(
        &self,
        t: Table<'_>,
        slot: usize,
        element: usize,
        what: &str,
    ) -> Result<Option<(usize, usize)>> {
        let Some(at) = self.field(t, slot, 4, what)? else {
            return Ok(None);
        };
        let start = self.follow(at, what)?;
        let len = self.u32(start, what)? as usize;
        let first = start + 4;
        let fits = len
            .checked_mul(element)
            .and_then(|n| first.checked_add(n))
            .is_some_and(|end| end <= self.bytes.len());
        if !fits {
            return Err(bad(format!(
                "{what} at byte {start}: a vector of {len} elements runs past the end of the model"
            )));
        }
        Ok(Some((first, len)))
    }

    /// The vector of tables in field `slot` of `t` (empty when absent); its tables are
    /// found one by one by [`Fb::nth`], never collected.
    fn tables(&self, t: Table<'_>, slot: usize, what: &str) -> Result<(usize, usize)> {
        Ok(self.vector(t, slot, 4, what)?.unwrap_or((0, 0)))
    }

    /// Table `i` of a vector of tables.
    fn nth(&self, (first, len): (usize, usize), i: usize, what: &str) -> Result<Table<'a>> {
        if i >= len {
            return Err(bad(format!("{what} {i} of {len}")));
        }
        self.table(self.follow(first + 4 * i, what)?, what)
    }

    /// `len` bytes from `first`, which [`Fb::vector`] checked.
    fn run(&self, first: usize, len: usize) -> &'a [u8] {
        let bytes: &'a [u8] = self.bytes;
        first
            .checked_add(len)
            .and_then(|end| bytes.get(first..end))
            .unwrap_or_default()
    }

    /// The string field `slot` of `t` (invalid UTF-8 replaced, as a name is only shown).
    fn string(&self, t: Table<'_>, slot: usize, what: &str) -> Result<Option<String>> {
        Ok(self
            .vector(t, slot, 1, what)?
            .map(|(first, len)| String::from_utf8_lossy(self.run(first, len)).into_owned()))
    }
}

/// The element type of a TFLite `TensorType`, or why it holds no numbers we read.
fn element(code: i8) -> std::result::Result<ElementType, Defect> {
    let plain = |d| Ok(ElementType::plain(d));
    let logical = |l| Ok(ElementType::logical(l).unwrap_or(ElementType::plain(DType::U8)));
    match code {
        0 => plain(DType::F32),
        1 => plain(DType::F16),
        2 => plain(DType::I32),
        3 => plain(DType::U8),
        4 => plain(DType::I64),
        6 => plain(DType::Bool),
        7 => plain(DType::I16),
        8 => logical(LogicalType::Complex64),
        9 => plain(DType::I8),
        10 => plain(DType::F64),
        11 => logical(LogicalType::Complex128),
        12 => plain(DType::U64),
        15 => plain(DType::U32),
        16 => plain(DType::U16),
        17 => logical(LogicalType::I4),
        18 => plain(DType::BF16),
        // LiteRT 2.x: packed as INT4 is, lowest bits first (LiteRT's interpreter unpacks
        // them so: tools/interop/make_tflite_types.py), and the two OCP FP8 formats.
        19 => logical(LogicalType::I2),
        20 => logical(LogicalType::U4),
        21 => logical(LogicalType::F8E4M3Fn),
        22 => logical(LogicalType::F8E5M2),
        5 => Err(Defect::not_numbers(
            "a TFLite STRING tensor (text, not numbers)",
        )),
        13 | 14 => Err(Defect::not_numbers(format!(
            "a TFLite {} tensor (a handle, not numbers)",
            if code == 13 { "RESOURCE" } else { "VARIANT" }
        ))),
        other => Err(Defect::unsupported(format!(
            "TFLite tensor type {other} has no element type here"
        ))),
    }
}

/// Lists a TensorFlow Lite model.
pub(crate) fn list(source: &Source, limits: &Limits) -> Result<Listing> {
    let whole = crate::files::whole_file(source, MAX_UNMAPPED_TFLITE, "a TensorFlow Lite model")?;
    let bytes: &[u8] = &whole;
    let fb = Fb { bytes };
    let model = fb.table(fb.follow(0, "the root table")?, "the Model table")?;
    let version = fb
        .scalar::<4>(model, 0, "the model's version")?
        .map_or(0, u32::from_le_bytes);
    let buffers = fb.tables(model, 4, "buffer")?;
    let subgraphs = fb.tables(model, 2, "subgraph")?;
    let mut budget = MemoryBudget::new(limits.listing_budget(source.len()), "listing the model");
    let mut attributes = Attributes::new();
    if let Some(d) = fb.string(model, 3, "the model's description")? {
        budget.charge(d.len() as u64)?;
        attributes.insert("tflite.description".into(), Value::Text(d));
    }
    // Names are the file's: a keyed hasher, so no file can make the set's cost quadratic.
    let mut taken: HashSet<String, RandomState> = HashSet::default();
    let mut objects = Vec::new();
    for g in 0..subgraphs.1 {
        let subgraph = fb.nth(subgraphs, g, "subgraph")?;
        let prefix = match g {
            0 => String::new(),
            _ => match fb.string(subgraph, 4, "a subgraph's name")? {
                Some(n) if !n.is_empty() => format!("{n}/"),
                _ => format!("{g}/"),
            },
        };
        budget.charge(prefix.len() as u64)?;
        let tensors = fb.tables(subgraph, 0, "tensor")?;
        for i in 0..tensors.1 {
            let listed = fb.nth(tensors, i, "tensor").and_then(|tensor| {
                tensor_object(&fb, tensor, buffers, source.len(), limits, &mut budget)
            });
            let Some((mut o, name)) =
                listed.map_err(|e| e.in_object(&format!("{prefix}tensor {i}")))?
            else {
                continue;
            };
            let name = if name.is_empty() {
                format!("tensor_{i}")
            } else {
                name
            };
            let mut full = format!("{prefix}{name}");
            if taken.contains(&full) {
                full = format!("{full}#{i}");
            }
            budget.charge(Limits::listing_cost(&full))?;
            taken.insert(full.clone());
            o.name = full;
            objects
                .try_reserve(1)
                .map_err(|_| Error::out_of_memory("listing the model"))?;
            objects.push(o);
        }
    }
    let mut names: Vec<&str> = objects
        .iter()
        .map(|o: &ObjectInfo| o.name.as_str())
        .collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(bad(format!("two tensors are named {:?}", w[0])));
    }
    Ok(Listing::of_unique(
        FileVersion::TfLite { version },
        attributes,
        objects,
    ))
}

/// One tensor as an object and its name, or `None` for a tensor with no bytes (an
/// activation, an input).
fn tensor_object(
    fb: &Fb<'_>,
    t: Table<'_>,
    buffers: (usize, usize),
    file_len: u64,
    limits: &Limits,
    budget: &mut MemoryBudget,
) -> Result<Option<(ObjectInfo, String)>> {
    let index = fb
        .scalar::<4>(t, 2, "a tensor's buffer")?
        .map_or(0, u32::from_le_bytes);
    if index == 0 {
        return Ok(None);
    }
    if index as usize >= buffers.1 {
        return Err(bad(format!(
            "a tensor names buffer {index} of the model's {}",
            buffers.1
        )));
    }
    let buffer = fb.nth(buffers, index as usize, "buffer")?;
    let data = match fb.vector(buffer, 0, 1, "a buffer's data")? {
        Some((first, len)) if len > 0 => (first as u64, len as u64),
        _ => {
            let offset = fb
                .scalar::<8>(buffer, 1, "a buffer's offset")?
                .map_or(0, u64::from_le_bytes);
            let size = fb
                .scalar::<8>(buffer, 2, "a buffer's size")?
                .map_or(0, u64::from_le_bytes);
            // LiteRT takes an offset over 1 as data past the FlatBuffer.
            if offset <= 1 || size == 0 {
                return Ok(None);
            }
            if offset.checked_add(size).is_none_or(|end| end > file_len) {
                return Err(bad(format!(
                    "buffer {index}'s {size} bytes at offset {offset} run past the end of the file"
                )));
            }
            (offset, size)
        }
    };
    let name = fb.string(t, 3, "a tensor's name")?.unwrap_or_default();
    let dims: Vec<u64> = match fb.vector(t, 0, 4, "a tensor's shape")? {
        Some((first, len)) => {
            if len > limits.decode.max_rank {
                return Err(Error::rank_over_cap(
                    Some(len as u64),
                    limits.decode.max_rank,
                ));
            }
            (0..len)
                .map(|k| {
                    let d = i32::from_le_bytes(fb.get::<4>(first + 4 * k, "a dim")?);
                    u64::try_from(d).map_err(|_| bad(format!("a constant tensor of dim {d}")))
                })
                .collect::<Result<_>>()?
        }
        None => Vec::new(),
    };
    let shape: Shape = dims.iter().copied().collect();
    let code = fb
        .scalar::<1>(t, 1, "a tensor's type")?
        .map_or(0, |b| b[0] as i8);
    let element = match element(code) {
        Ok(e)
            if e.logical
                .as_ref()
                .and_then(LogicalType::packed_bits)
                .is_some() =>
        {
            match fb.field(t, 6, 4, "a tensor's sparsity")? {
                Some(_) => Err(Defect::unsupported(format!(
                    "a sparse TFLite tensor of packed {} elements",
                    e.name()
                ))),
                None => Ok(e),
            }
        }
        other => other,
    };
    let element = match element {
        Ok(e) => e,
        Err(defect) => {
            let mut o = ObjectInfo::defective(String::new(), defect);
            o.shape = shape;
            return Ok(Some((o, name)));
        }
    };
    if let Some(at) = fb.field(t, 6, 4, "a tensor's sparsity")? {
        let table = fb.table(fb.follow(at, "a tensor's sparsity")?, "a sparsity table")?;
        let levels = sparse_levels(fb, table, &dims, element.logical_size(), budget)?;
        levels.check().map_err(|e| e.at(table.at as u64))?;
        if data.1 % element.logical_size() != 0 {
            return Err(bad(format!(
                "a sparse tensor's buffer {index} of {} bytes is no whole number of values",
                data.1
            ))
            .at(data.0));
        }
        let dense = zt_formats::byte_size(zt_formats::element_count(&dims)?, &element)?;
        let mut o = ObjectInfo::raw_dense(String::new(), shape, element, data, ByteOrder::Little);
        if let Some(c) = o.components.0.first_mut() {
            c.encoding = Encoding::SparseLevels(Box::new(levels));
            c.decoded_len = Some(dense);
            c.uncompressed_length = Some(dense);
        }
        quantization(fb, t, &mut o.attributes, budget)?;
        return Ok(Some((o, name)));
    }
    let nbytes = zt_formats::byte_size(zt_formats::element_count(&dims)?, &element)?;
    if nbytes != data.1 {
        return Err(bad(format!(
            "a tensor of shape {dims:?} needs {nbytes} bytes; its buffer {index} holds {}",
            data.1
        ))
        .at(data.0));
    }
    let mut o = ObjectInfo::raw_dense(String::new(), shape, element, data, ByteOrder::Little);
    quantization(fb, t, &mut o.attributes, budget)?;
    Ok(Some((o, name)))
}

/// A sparse tensor's `SparsityParameters` (0 traversal_order, 1 block_map, 2 dim_metadata)
/// as the table [`zt_formats::densify_into`] walks; each `DimensionMetadata` is 0 format
/// (0 dense, 1 CSR), 1 dense_size, 2-3 array_segments and 4-5 array_indices (a union of
/// 1 `Int32Vector`, 2 `Uint16Vector`, 3 `Uint8Vector`, each `values` in field 0). What the
/// index vectors take is charged to the budget before they are read.
fn sparse_levels(
    fb: &Fb<'_>,
    t: Table<'_>,
    dims: &[u64],
    element_size: u64,
    budget: &mut MemoryBudget,
) -> Result<SparseLevels> {
    let ints = |slot: usize, what: &str| -> Result<Vec<u64>> {
        let Some((first, len)) = fb.vector(t, slot, 4, what)? else {
            return Ok(Vec::new());
        };
        if len > MAX_SPARSE_LEVELS {
            return Err(Error::limit(format!(
                "a sparse tensor's {what} of {len} entries, over the cap of {MAX_SPARSE_LEVELS}"
            )));
        }
        fb.run(first, 4 * len)
            .chunks_exact(4)
            .map(|b| {
                let v = i32::from_le_bytes(b.first_chunk::<4>().copied().unwrap_or_default());
                u64::try_from(v).map_err(|_| bad(format!("a sparse tensor's {what} holds {v}")))
            })
            .collect()
    };
    let traversal_order = ints(0, "traversal order")?;
    let block_map = ints(1, "block map")?;
    let metadata = fb.tables(t, 2, "dimension metadata")?;
    if metadata.1 != traversal_order.len() {
        return Err(bad(format!(
            "a sparse tensor of {} dimension metadata for a traversal order of {}",
            metadata.1,
            traversal_order.len()
        )));
    }
    let mut levels = Vec::with_capacity(metadata.1);
    for l in 0..metadata.1 {
        let m = fb.nth(metadata, l, "dimension metadata")?;
        let format = fb
            .scalar::<1>(m, 0, "a dimension's format")?
            .map_or(0, |b| b[0]);
        let level = match format {
            0 => {
                let n = fb
                    .scalar::<4>(m, 1, "a dense size")?
                    .map_or(0, i32::from_le_bytes);
                Level::Dense(u64::try_from(n).map_err(|_| bad(format!("a dense size of {n}")))?)
            }
            1 => Level::Csr {
                segments: index_vector(fb, m, 2, budget)?,
                indices: index_vector(fb, m, 4, budget)?,
            },
            other => return Err(bad(format!("dimension format {other}"))),
        };
        levels.push(level);
    }
    Ok(SparseLevels {
        dims: dims.to_vec(),
        element_size,
        traversal_order,
        block_map,
        levels,
    })
}

/// A `SparseIndexVector` union (its type in field `slot`, its table in `slot + 1`) as numbers.
fn index_vector(
    fb: &Fb<'_>,
    m: Table<'_>,
    slot: usize,
    budget: &mut MemoryBudget,
) -> Result<Vec<u32>> {
    let kind = fb
        .scalar::<1>(m, slot, "an index vector's type")?
        .map_or(0, |b| b[0]);
    let width = match kind {
        1 => 4,
        2 => 2,
        3 => 1,
        other => return Err(bad(format!("index vector type {other}"))),
    };
    let at = fb
        .field(m, slot + 1, 4, "an index vector")?
        .ok_or_else(|| bad("a compressed dimension without its index vector"))?;
    let table = fb.table(fb.follow(at, "an index vector")?, "an index vector")?;
    let (first, len) = fb
        .vector(table, 0, width, "an index vector's values")?
        .unwrap_or((0, 0));
    budget.charge(4 * len as u64)?;
    let mut out = Vec::new();
    out.try_reserve_exact(len)
        .map_err(|_| Error::out_of_memory("a sparse tensor's indices"))?;
    for b in fb.run(first, width * len).chunks_exact(width) {
        let v = match *b {
            [x] => u32::from(x),
            [x, y] => u32::from(u16::from_le_bytes([x, y])),
            [x, y, z, w] => {
                let v = i32::from_le_bytes([x, y, z, w]);
                u32::try_from(v).map_err(|_| bad(format!("an index vector holds {v}")))?
            }
            _ => 0,
        };
        out.push(v);
    }
    Ok(out)
}

/// A tensor's quantization parameters as its attributes.
fn quantization(
    fb: &Fb<'_>,
    t: Table<'_>,
    attributes: &mut Attributes,
    budget: &mut MemoryBudget,
) -> Result<()> {
    let Some(at) = fb.field(t, 4, 4, "a tensor's quantization")? else {
        return Ok(());
    };
    let q = fb.table(
        fb.follow(at, "a tensor's quantization")?,
        "a quantization table",
    )?;
    let mut put =
        |key: &str, slot: usize, width: usize, number: fn(&[u8]) -> Value| -> Result<()> {
            if let Some((first, len)) = fb.vector(q, slot, width, "a quantization vector")? {
                if len > MAX_QUANT_PARAMS {
                    return Err(Error::limit(format!(
                        "{len} quantization parameters, over the cap of {MAX_QUANT_PARAMS}"
                    )));
                }
                if len > 0 {
                    // Tensors may share one vector: each one's values are charged.
                    budget.charge((len * std::mem::size_of::<Value>()) as u64)?;
                    let run = fb.run(first, len * width);
                    let values = run.chunks_exact(width).map(number).collect();
                    attributes.insert(key.into(), Value::Array(values));
                }
            }
            Ok(())
        };
    put("tflite.scale", 2, 4, |b| {
        let w = b.first_chunk::<4>().copied().unwrap_or_default();
        Value::Float(f64::from(f32::from_le_bytes(w)))
    })?;
    put("tflite.zero_point", 3, 8, |b| {
        let w = b.first_chunk::<8>().copied().unwrap_or_default();
        Value::Integer(i64::from_le_bytes(w).into())
    })?;
    if attributes.contains_key("tflite.scale") {
        let axis = fb
            .scalar::<4>(q, 6, "a quantized dimension")?
            .map_or(0, i32::from_le_bytes);
        attributes.insert(
            "tflite.quantized_dimension".into(),
            Value::Integer(axis.into()),
        );
    }
    Ok(())
}
