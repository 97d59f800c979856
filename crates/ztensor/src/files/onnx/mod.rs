//! ONNX models in the facade's object model: every weight a `ModelProto` holds, read in place
//! with the protobuf walker of [`proto`], never loading the graph.
//!
//! What is listed, as ONNX names it:
//! - every initializer of the main graph and of every subgraph (`If` branches, `Loop` and
//!   `Scan` bodies, any graph-valued attribute, to [`MAX_GRAPH_DEPTH`]);
//! - the tensor of every `Constant` node, named by the node's output (`value`, and the
//!   `value_float(s)` and `value_int(s)` forms; `value_string(s)` are listed and skipped);
//! - every sparse initializer (and `sparse_value` constant) as a COO object.
//!
//! Where the numbers are: `raw_data` is a range of the file (served from the map);
//! `float_data` and `double_data` are packed runs of little-endian floats, so they are ranges
//! too; `int32_data`, `int64_data` and `uint64_data` are runs of varints, listed with
//! [`Encoding::ProtoVarints`] and decoded when read. What protobuf reads besides one packed
//! run is read too, with a copy: floats or doubles in several packed runs
//! ([`Encoding::Pieces`]), and every other form (values written unpacked, each its own field;
//! varints in several runs; both forms at once; other fields between them) gathered from the
//! tensor's message as protobuf gathers it ([`Encoding::ProtoTagged`]). External data
//! (`data_location: EXTERNAL`) is a range of a file beside the model, opened as one of the
//! reader's shards; its `location` must name a file inside the model's folder.
//!
//! The model's metadata become text file attributes (text, so that every format we write
//! can carry them): `onnx.ir_version`, `onnx.producer_name`, `onnx.producer_version`,
//! `onnx.domain`, `onnx.model_version`, `onnx.doc_string`, `onnx.opset_import` (JSON: domain
//! to version), and each `metadata_props` entry under its own key;
//! each object has `onnx.source` (`initializer`, `constant`, `sparse_initializer`) and
//! `onnx.graph` (the path of the graph that holds it: `main`, `main/if0.then_branch`, ...).
//! A name given twice is kept for the first and qualified by its graph's path for the next.
//!
//! ```text
//!  ModelProto: 1 ir_version, 2 producer_name, 7 graph, 8 opset_import, 14 metadata_props
//!  GraphProto: 1 node, 2 name, 5 initializer, 15 sparse_initializer
//!  NodeProto:  2 output, 3 name, 4 op_type, 5 attribute, 7 domain
//!  TensorProto: 1 dims, 2 data_type, 4 float_data, 5 int32_data, 7 int64_data, 8 name,
//!               9 raw_data, 10 double_data, 11 uint64_data, 13 external_data, 14 data_location
//! ```

mod schema;

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use zt_container::internal::MemoryBudget;
use zt_container::{Error, ErrorKind, Result, Source};
use zt_formats::{DType, ElementType, Encoding, Format, LogicalType, Piece};
use zt_manifest::{Attributes, Value as Attr};

use crate::files::proto::{self, Field, Fields, Span, Value};
use crate::files::zt_v2::OpenShard;
use crate::listing::{Limits, Listing};
use crate::model::{
    Arrangement, ByteOrder, ComponentInfo, Components, Defect, DigestScope, FileVersion,
    ObjectInfo, ShardInfo,
};

/// How deep subgraphs may nest (a graph in a node's attribute is one level down).
pub(crate) const MAX_GRAPH_DEPTH: usize = 32;

/// The most objects one model may list: each costs a few hundred bytes of memory, and a
/// tensor can be written in two bytes.
pub(crate) const MAX_OBJECTS: usize = 1 << 20;

/// The most distinct external data files one model may name.
pub(crate) const MAX_EXTERNAL_FILES: usize = 4096;

/// The longest name, text attribute or external-data entry read.
const MAX_TEXT: u64 = 1 << 20;

/// The longest packed run of `value_ints` counted at open (its values become the shape).
const MAX_COUNTED_RUN: u64 = 64 << 20;

/// The ONNX data type numbers (`TensorProto.DataType`).
mod data_type {
    pub const FLOAT: u64 = 1;
    pub const UINT8: u64 = 2;
    pub const INT8: u64 = 3;
    pub const UINT16: u64 = 4;
    pub const INT16: u64 = 5;
    pub const INT32: u64 = 6;
    pub const INT64: u64 = 7;
    pub const STRING: u64 = 8;
    pub const BOOL: u64 = 9;
    pub const FLOAT16: u64 = 10;
    pub const DOUBLE: u64 = 11;
    pub const UINT32: u64 = 12;
    pub const UINT64: u64 = 13;
    pub const COMPLEX64: u64 = 14;
    pub const COMPLEX128: u64 = 15;
    pub const BFLOAT16: u64 = 16;
    pub const FLOAT8E4M3FN: u64 = 17;
    pub const FLOAT8E4M3FNUZ: u64 = 18;
    pub const FLOAT8E5M2: u64 = 19;
    pub const FLOAT8E5M2FNUZ: u64 = 20;
    pub const UINT4: u64 = 21;
    pub const INT4: u64 = 22;
    pub const FLOAT4E2M1: u64 = 23;
    pub const FLOAT8E8M0: u64 = 24;
    pub const UINT2: u64 = 25;
    pub const INT2: u64 = 26;
    pub const FLOAT6E2M3: u64 = 27;
    pub const FLOAT6E3M2: u64 = 28;
}

/// What an ONNX data type is here, and which typed field carries it when `raw_data` does not.
struct TypeInfo {
    element: ElementType,
    /// Which typed field holds its values, and how.
    typed: Typed,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Typed {
    /// `float_data` (field 4), packed little-endian f32.
    Floats,
    /// `double_data` (field 10), packed little-endian f64.
    Doubles,
    /// A run of varints in `field`, each `width` bytes when decoded.
    Varints {
        field: u64,
        width: u8,
        boolean: bool,
    },
    /// A run of varints in `int32_data` (field 5), one element each, packed `bits` to an
    /// element when decoded (FLOAT6, which onnx keeps one value to an entry and packs only
    /// in `raw_data`).
    Codes { bits: u8 },
}

/// The element type of an ONNX data type, or why it is not read.
fn type_info(code: u64) -> std::result::Result<TypeInfo, Defect> {
    use data_type as t;
    let plain = |d: DType| ElementType::plain(d);
    let logical = |l: LogicalType| ElementType::logical(l).unwrap_or(ElementType::plain(DType::U8));
    let varints = |field: u64, width: u8| Typed::Varints {
        field,
        width,
        boolean: false,
    };
    let (element, typed) = match code {
        t::FLOAT => (plain(DType::F32), Typed::Floats),
        t::DOUBLE => (plain(DType::F64), Typed::Doubles),
        t::COMPLEX64 => (logical(LogicalType::Complex64), Typed::Floats),
        t::COMPLEX128 => (logical(LogicalType::Complex128), Typed::Doubles),
        t::UINT8 => (plain(DType::U8), varints(5, 1)),
        t::INT8 => (plain(DType::I8), varints(5, 1)),
        t::UINT16 => (plain(DType::U16), varints(5, 2)),
        t::INT16 => (plain(DType::I16), varints(5, 2)),
        t::INT32 => (plain(DType::I32), varints(5, 4)),
        t::INT64 => (plain(DType::I64), varints(7, 8)),
        t::UINT32 => (plain(DType::U32), varints(11, 4)),
        t::UINT64 => (plain(DType::U64), varints(11, 8)),
        t::BOOL => (
            plain(DType::Bool),
            Typed::Varints {
                field: 5,
                width: 1,
                boolean: true,
            },
        ),
        t::FLOAT16 => (plain(DType::F16), varints(5, 2)),
        t::BFLOAT16 => (plain(DType::BF16), varints(5, 2)),
        t::FLOAT8E4M3FN => (logical(LogicalType::F8E4M3Fn), varints(5, 1)),
        t::FLOAT8E4M3FNUZ => (logical(LogicalType::F8E4M3Fnuz), varints(5, 1)),
        t::FLOAT8E5M2 => (logical(LogicalType::F8E5M2), varints(5, 1)),
        t::FLOAT8E5M2FNUZ => (logical(LogicalType::F8E5M2Fnuz), varints(5, 1)),
        t::FLOAT8E8M0 => (logical(LogicalType::F8E8M0), varints(5, 1)),
        // Two 4-bit values per int32_data element, as one byte.
        t::UINT4 => (logical(LogicalType::U4), varints(5, 1)),
        t::INT4 => (logical(LogicalType::I4), varints(5, 1)),
        t::FLOAT4E2M1 => (logical(LogicalType::F4E2M1), varints(5, 1)),
        // Four 2-bit values per int32_data element, as one byte.
        t::UINT2 => (logical(LogicalType::U2), varints(5, 1)),
        t::INT2 => (logical(LogicalType::I2), varints(5, 1)),
        t::FLOAT6E2M3 => (logical(LogicalType::F6E2M3), Typed::Codes { bits: 6 }),
        t::FLOAT6E3M2 => (logical(LogicalType::F6E3M2), Typed::Codes { bits: 6 }),
        t::STRING => {
            return Err(Defect::not_numbers(
                "an ONNX STRING tensor (text, not numbers)",
            ))
        }
        other => {
            return Err(Defect::unsupported(format!(
                "ONNX data type {other} ({}) has no element type here",
                type_name(other)
            )))
        }
    };
    Ok(TypeInfo { element, typed })
}

fn type_name(code: u64) -> &'static str {
    match code {
        0 => "UNDEFINED",
        _ => "unknown",
    }
}

/// Bytes `count` elements of `element` take (packed sub-byte types included).
fn byte_len(element: &ElementType, count: u64) -> Option<u64> {
    if let Some(bits) = element.logical.as_ref().and_then(LogicalType::packed_bits) {
        return count.checked_mul(bits).map(|b| b.div_ceil(8));
    }
    let ratio = element.logical.as_ref().map_or(1, LogicalType::ratio);
    count
        .checked_mul(ratio)?
        .checked_mul(element.dtype.size() as u64)
}

/// Lists an ONNX model. `path` is where it was opened from (its folder holds any external
/// data); `open_external` opens such a file as the model was opened.
pub(crate) fn list(
    source: &Source,
    path: Option<&Path>,
    limits: &Limits,
    open_external: OpenShard<'_>,
) -> Result<Listing> {
    let mut walk = Walk {
        source,
        limits,
        model_path: path.map(Path::to_path_buf),
        objects: Vec::new(),
        names: Names::default(),
        externals: Vec::new(),
        external_numbers: HashMap::new(),
        open_external,
        listing: MemoryBudget::new(limits.listing_budget(source.len()), "listing the model"),
    };
    let whole = Span {
        start: 0,
        end: source.len(),
    };
    // What onnx.load refuses (a damaged graph input, node or type annotation) is refused
    // here too, although the listing reads only the messages that hold tensors.
    proto::check(source, whole, &schema::MODEL)?;
    let (attributes, ir_version) = walk.model(whole)?;
    let Walk {
        mut objects,
        externals,
        names,
        ..
    } = walk;
    // `Walk::add` claimed one name for each object, in the same order.
    for (object, name) in objects.iter_mut().zip(names.into_list()) {
        object.name = name;
    }
    let mut listing = Listing::of_unique(FileVersion::Onnx { ir_version }, attributes, objects);
    listing.shards = externals;
    Ok(listing)
}

/// The walk over one model: what it has listed so far.
struct Walk<'s, 'o> {
    source: &'s Source,
    limits: &'s Limits,
    /// Where the model was opened from, whose folder holds its external data (`None`:
    /// opened from memory).
    model_path: Option<PathBuf>,
    objects: Vec<ObjectInfo>,
    names: Names,
    /// External data files opened, in the order first named (component `file` n is n - 1).
    externals: Vec<(ShardInfo, Source)>,
    /// Each external file's shard number by its name as the model gives it: one lookup per
    /// tensor however many files the model names (std's per-process keyed hash).
    external_numbers: HashMap<String, u32>,
    open_external: OpenShard<'o>,
    /// What the listing costs so far (objects, names, attributes), roughly, against
    /// [`Limits::listing_budget`].
    listing: MemoryBudget,
}

/// The names given so far, in the order given, with a table of their positions keyed by a
/// per-process hash (a file cannot make it quadratic), and for each qualified name the last
/// `#k` given to it. The names are kept here, not copied into the table, and handed to the
/// objects at the end ([`Names::into_list`]): a copy per tensor was a fifth of the open of a
/// model of many small tensors, most of it in freeing the copies.
#[derive(Default)]
struct Names {
    list: Vec<String>,
    table: HashTable<u32>,
    counters: HashTable<(String, u32)>,
    state: RandomState,
}

impl Names {
    fn taken(&self, name: &str) -> bool {
        Self::in_table(&self.table, &self.list, &self.state, name)
    }

    /// Whether `name` is in `table` (positions in `list`): a function of the fields, for the
    /// loop of `claim` that holds a counter borrowed meanwhile.
    fn in_table(table: &HashTable<u32>, list: &[String], state: &RandomState, name: &str) -> bool {
        table
            .find(state.hash_one(name), |&i| {
                list.get(i as usize).is_some_and(|n| n == name)
            })
            .is_some()
    }

    /// Room for one more name (and its `#k` counter), or `OutOfMemory`: a model's count of
    /// tensors is the file's to choose.
    fn reserve_one(&mut self) -> Result<()> {
        let (state, list) = (&self.state, &self.list);
        let hash_at = |&i: &u32| state.hash_one(list.get(i as usize).map_or("", String::as_str));
        let full = || Error::out_of_memory("the table of tensor names");
        self.table.try_reserve(1, hash_at).map_err(|_| full())?;
        self.counters
            .try_reserve(1, |(n, _)| state.hash_one(n))
            .map_err(|_| full())?;
        self.list.try_reserve(1).map_err(|_| full())
    }

    fn take(&mut self, name: String) -> &str {
        let (state, list) = (&self.state, &self.list);
        // `Walk::add` stops at `MAX_OBJECTS` (2^20) names, so a position fits in a `u32`.
        let position = list.len() as u32;
        self.table
            .insert_unique(state.hash_one(&name), position, |&i| {
                state.hash_one(list.get(i as usize).map_or("", String::as_str))
            });
        self.list.push(name);
        self.list.last().map_or("", String::as_str)
    }

    /// `name` if free, else `"{graph}/{name}"`, else that with `#2`, `#3`, ... (counted per
    /// qualified name, so a thousand copies of one name cost a thousand steps); taken, and
    /// the next of [`Names::into_list`].
    fn claim(&mut self, name: String, graph: &str) -> &str {
        if !self.taken(&name) {
            return self.take(name);
        }
        let qualified = format!("{graph}/{name}");
        if !self.taken(&qualified) {
            return self.take(qualified);
        }
        let state = self.state.clone();
        let h = state.hash_one(&qualified);
        let k = match self.counters.find_mut(h, |(n, _)| *n == qualified) {
            Some((_, k)) => k,
            None => {
                let entry =
                    self.counters
                        .insert_unique(h, (qualified.clone(), 2), move |(n, _)| state.hash_one(n));
                &mut entry.into_mut().1
            }
        };
        let candidate = loop {
            let candidate = format!("{qualified}#{k}");
            *k += 1;
            if !Self::in_table(&self.table, &self.list, &self.state, &candidate) {
                break candidate;
            }
        };
        self.take(candidate)
    }

    /// The names claimed, in the order claimed.
    fn into_list(self) -> Vec<String> {
        self.list
    }
}

/// A `TensorProto`'s fields, gathered in one pass.
#[derive(Default)]
struct TensorFields {
    dims: Vec<u64>,
    /// An `int32`: the varint's low 32 bits, as protobuf reads it.
    data_type: u64,
    name: Option<Span>,
    raw: Option<Span>,
    /// Each typed field's values, by field number.
    typed: [TypedValues; 12],
    external: Vec<Span>,
    location_external: bool,
    segment: bool,
    at: u64,
}

/// The most packed runs of floats or doubles one typed field of a tensor is read from as
/// [`Encoding::Pieces`] (protobuf concatenates them; writers write one). Past it, and for
/// every other form but one run, the field is gathered from its message as it is decoded
/// ([`Encoding::ProtoTagged`]).
const MAX_TYPED_RUNS: usize = 1024;

/// Where one typed field of a `TensorProto` holds its values, gathered as its fields come:
/// packed runs, or values written unpacked (each its own key).
#[derive(Default)]
struct TypedValues {
    /// Its packed runs, in order (at most [`MAX_TYPED_RUNS`] kept).
    runs: Vec<Span>,
    /// How many packed runs there were.
    run_count: u64,
    /// The bytes of all its packed runs.
    run_bytes: u64,
    /// How many values came unpacked.
    singles: u64,
    /// The bytes from the field's first occurrence (its key) to the end of its last, and
    /// the piece of the tensor they lie in (a tensor given in several pieces is merged).
    span: Option<(Span, usize)>,
    /// Whether the field occurs in more than one piece of the tensor.
    split: bool,
}

impl TypedValues {
    /// Takes one field of this number, from piece `piece` of the tensor: a packed run or a
    /// value of the field's own type.
    fn take(&mut self, field: &Field, piece: usize) {
        match field.value {
            Value::Bytes(run) => {
                self.run_count += 1;
                self.run_bytes = self.run_bytes.saturating_add(run.len());
                if self.runs.len() < MAX_TYPED_RUNS {
                    self.runs.push(run);
                }
            }
            _ => self.singles += 1,
        }
        let end = field.end();
        self.span = match self.span {
            None => Some((
                Span {
                    start: field.at,
                    end,
                },
                piece,
            )),
            Some((span, p)) if p == piece => Some((Span { end, ..span }, p)),
            Some(first) => {
                self.split = true;
                Some(first)
            }
        };
    }
}

/// Where an external tensor's data is, as its `external_data` entries say.
struct External {
    /// Its file's shard number (from 1).
    file: u32,
    offset: u64,
    length: u64,
}

impl External {
    /// The file, offset and length of `bytes` of data here, or why the range cannot hold
    /// them (a size that is not the tensor's: onnx loads such a model and fails on the
    /// tensor). The range was checked against the file when listed.
    fn holding(&self, bytes: u64) -> std::result::Result<(u32, u64, u64), Defect> {
        if self.length != bytes {
            return Err(Defect::invalid(format!(
                "external data of {} bytes; its shape and type need {bytes}",
                self.length
            )));
        }
        Ok((self.file, self.offset, self.length))
    }
}

/// The most pieces one message may come in: protobuf merges a message field given several
/// times, which no writer does on purpose.
const MAX_PIECES: usize = 64;

impl<'s> Walk<'s, '_> {
    fn text(&self, span: Span, what: &str) -> Result<String> {
        proto::text(self.source, span, MAX_TEXT, what)
    }

    /// Counts `bytes` more of listing against the memory budget a file of this size may
    /// spend (objects, names, attributes): a tensor or a metadata entry can be written in a
    /// few bytes, and listing it costs hundreds.
    fn charge(&mut self, bytes: u64, what: impl FnOnce() -> String) -> Result<()> {
        self.listing
            .charge_for(bytes, || format!("listing the model's {}", what()))
    }

    /// The model's attributes and IR version; lists its main graph on the way (protobuf
    /// merges a graph given twice, so each piece is walked as part of `main`).
    fn model(&mut self, whole: Span) -> Result<(Attributes, u64)> {
        let mut attributes = Attributes::new();
        let mut ir_version = 0;
        let mut opsets = std::collections::BTreeMap::new();
        let mut props = std::collections::BTreeMap::new();
        for field in Fields::of(self.source, whole)? {
            let field = field?;
            let (key, value) = match (field.number, field.value) {
                (1, Value::Varint(v, _)) => {
                    ir_version = v;
                    ("onnx.ir_version", Attr::Text(v.to_string()))
                }
                (5, Value::Varint(v, _)) => ("onnx.model_version", Attr::Text(v.to_string())),
                (n @ (2 | 3 | 4 | 6), Value::Bytes(s)) => {
                    let key = match n {
                        2 => "onnx.producer_name",
                        3 => "onnx.producer_version",
                        4 => "onnx.domain",
                        _ => "onnx.doc_string",
                    };
                    self.charge(s.len(), || "metadata".into())?;
                    (key, Attr::Text(self.text(s, &key[5..])?))
                }
                (7, Value::Bytes(s)) => {
                    self.graph(s, "main", 0)?;
                    continue;
                }
                (8, Value::Bytes(s)) => {
                    let (domain, version) = self.pair(s, true)?;
                    self.charge(domain.len() as u64 + 64, || "opset_import".into())?;
                    opsets.insert(domain, version);
                    continue;
                }
                (14, Value::Bytes(s)) => {
                    let (key, value) = self.pair(s, false)?;
                    self.charge(s.len() + 64, || "metadata_props".into())?;
                    props.insert(key, value);
                    continue;
                }
                _ => continue,
            };
            attributes.insert(key.to_owned(), value);
        }
        if !opsets.is_empty() {
            // Text (JSON), so that every format we write can carry it.
            let json = serde_json::Value::Object(
                opsets
                    .into_iter()
                    .map(|(d, v)| {
                        let v = match v {
                            Attr::Integer(n) => i64::try_from(n).unwrap_or(i64::MAX),
                            _ => 0,
                        };
                        (d, serde_json::Value::from(v))
                    })
                    .collect(),
            );
            attributes.insert("onnx.opset_import".into(), Attr::Text(json.to_string()));
        }
        // metadata_props are text pairs already: each under its own key, unless it would
        // hide one of the model's fields above.
        for (key, value) in props {
            if !key.starts_with("onnx.") {
                attributes.insert(key, value);
            }
        }
        Ok((attributes, ir_version))
    }

    /// A two-field message: `OperatorSetIdProto` (domain, version) when `opset`, else
    /// `StringStringEntryProto` (key, value).
    fn pair(&self, span: Span, opset: bool) -> Result<(String, Attr)> {
        let mut first = String::new();
        let mut second = if opset {
            Attr::Integer(0)
        } else {
            Attr::Text(String::new())
        };
        for field in Fields::of(self.source, span)? {
            let field = field?;
            match (field.number, field.value, opset) {
                (1, Value::Bytes(s), _) => first = self.text(s, "key")?,
                (2, Value::Varint(v, _), true) => second = Attr::Integer(v.into()),
                (2, Value::Bytes(s), false) => second = Attr::Text(self.text(s, "value")?),
                _ => {}
            }
        }
        Ok((first, second))
    }

    /// Lists a graph's initializers, sparse initializers and constants, and its subgraphs'.
    fn graph(&mut self, span: Span, path: &str, depth: usize) -> Result<()> {
        if depth > MAX_GRAPH_DEPTH {
            return Err(Error::limit(format!(
                "subgraphs nest deeper than {MAX_GRAPH_DEPTH} levels (graph {path})"
            ))
            .at(span.start));
        }
        for field in Fields::of(self.source, span)? {
            let field = field?;
            match (field.number, field.value) {
                (1, Value::Bytes(s)) => self.node(s, path, depth)?,
                (5, Value::Bytes(s)) => {
                    let (name, object) = self.tensor(&[s], None)?;
                    self.add(name, object, path, "initializer")?;
                }
                (15, Value::Bytes(s)) => {
                    let (name, object) = self.sparse(&[s], None)?;
                    self.add(name, object, path, "sparse_initializer")?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn add(&mut self, name: String, mut object: ObjectInfo, graph: &str, from: &str) -> Result<()> {
        if self.objects.len() >= MAX_OBJECTS {
            return Err(Error::limit(format!(
                "the model holds more than {MAX_OBJECTS} tensors"
            )));
        }
        let cost = Limits::listing_cost(&name) + graph.len() as u64;
        let count = self.objects.len() + 1;
        self.charge(cost, || {
            let plural = if count == 1 { "" } else { "s" };
            format!("{count} tensor{plural}")
        })?;
        // The name itself joins the object at the end of the walk (`list`).
        self.names.reserve_one()?;
        self.names.claim(name, graph);
        object
            .attributes
            .insert("onnx.source".into(), Attr::Text(from.into()));
        object
            .attributes
            .insert("onnx.graph".into(), Attr::Text(graph.into()));
        self.objects
            .try_reserve(1)
            .map_err(|_| Error::out_of_memory("the list of tensors"))?;
        self.objects.push(object);
        Ok(())
    }

    /// A node: a `Constant`'s tensor, and every graph in its attributes.
    fn node(&mut self, span: Span, graph: &str, depth: usize) -> Result<()> {
        let (mut output, mut name, mut op, mut domain) = (None, None, None, None);
        let mut has_attributes = false;
        for field in Fields::of(self.source, span)? {
            let field = field?;
            match (field.number, field.value) {
                (2, Value::Bytes(s)) if output.is_none() => output = Some(s),
                (3, Value::Bytes(s)) => name = Some(s),
                (4, Value::Bytes(s)) => op = Some(s),
                (7, Value::Bytes(s)) => domain = Some(s),
                (5, Value::Bytes(_)) => has_attributes = true,
                _ => {}
            }
        }
        if !has_attributes {
            return Ok(());
        }
        let op = op.map(|s| self.text(s, "op_type")).transpose()?;
        let domain = domain.map(|s| self.text(s, "domain")).transpose()?;
        let onnx_domain = matches!(domain.as_deref(), None | Some("" | "ai.onnx"));
        let constant = onnx_domain && op.as_deref() == Some("Constant");
        let output = output.map(|s| self.text(s, "output")).transpose()?;
        let label = match name.map(|s| self.text(s, "node name")).transpose()? {
            Some(n) if !n.is_empty() => n,
            _ => op.clone().unwrap_or_else(|| "node".into()),
        };
        for field in Fields::of(self.source, span)? {
            let field = field?;
            if let (5, Value::Bytes(attribute)) = (field.number, field.value) {
                self.attribute(attribute, constant, output.as_deref(), graph, &label, depth)?;
            }
        }
        Ok(())
    }

    /// The spans of every length-delimited field `number` of the message at `span`, in
    /// order: the pieces protobuf merges into one message.
    fn pieces(&self, span: Span, number: u64, what: &str) -> Result<Vec<Span>> {
        let mut pieces = Vec::new();
        for field in Fields::of(self.source, span)? {
            let field = field?;
            if let (n, Value::Bytes(s)) = (field.number, field.value) {
                if n == number {
                    if pieces.len() >= MAX_PIECES {
                        return Err(Error::limit(format!(
                            "{what} given in more than {MAX_PIECES} pieces"
                        ))
                        .at(field.at));
                    }
                    pieces.push(s);
                }
            }
        }
        Ok(pieces)
    }

    /// One `AttributeProto`: graphs are walked; a `Constant`'s value is listed.
    fn attribute(
        &mut self,
        span: Span,
        constant: bool,
        output: Option<&str>,
        graph: &str,
        node: &str,
        depth: usize,
    ) -> Result<()> {
        let mut name = None;
        let mut graphs = false;
        for field in Fields::of(self.source, span)? {
            let field = field?;
            match (field.number, field.value) {
                (1, Value::Bytes(s)) => name = Some(s),
                (6 | 11, Value::Bytes(_)) => graphs = true,
                _ => {}
            }
        }
        let name = name
            .map(|s| self.text(s, "attribute name"))
            .transpose()?
            .unwrap_or_default();
        if graphs {
            let path = format!("{graph}/{node}.{name}");
            for field in Fields::of(self.source, span)? {
                let field = field?;
                if let (6 | 11, Value::Bytes(sub)) = (field.number, field.value) {
                    self.graph(sub, &path, depth + 1)?;
                }
            }
        }
        let (true, Some(output)) = (constant, output) else {
            return Ok(());
        };
        let object = match name.as_str() {
            "value" => {
                let pieces = self.pieces(span, 5, "Constant value")?;
                if pieces.is_empty() {
                    return Ok(());
                }
                self.tensor(&pieces, Some(output))?.1
            }
            "sparse_value" => {
                let pieces = self.pieces(span, 22, "Constant sparse_value")?;
                if pieces.is_empty() {
                    return Ok(());
                }
                self.sparse(&pieces, Some(output))?.1
            }
            "value_float" | "value_int" | "value_floats" | "value_ints" => {
                match self.scalar_constant(&name, span)? {
                    Some(o) => o,
                    None => return Ok(()),
                }
            }
            "value_string" | "value_strings" => {
                let mut o = dense(ElementType::plain(DType::U8), Vec::new(), (span.start, 0));
                o.defect = Some(Box::new(Defect::not_numbers(
                    "an ONNX string constant (text, not numbers)",
                )));
                o
            }
            _ => return Ok(()),
        };
        self.add(output.to_owned(), object, graph, "constant")
    }

    /// A `Constant`'s `value_float`, `value_floats`, `value_int` or `value_ints`, from the
    /// attribute at `span`.
    fn scalar_constant(&self, name: &str, span: Span) -> Result<Option<ObjectInfo>> {
        let f32s = ElementType::plain(DType::F32);
        let i64s = ElementType::plain(DType::I64);
        let ints = Encoding::ProtoVarints {
            width: 8,
            boolean: false,
        };
        let (want, floats) = match name {
            "value_float" => (2, true),
            "value_int" => (3, false),
            "value_floats" => (7, true),
            _ => (8, false),
        };
        // The fields of that number whose wire type is the field's (any other is unknown to
        // protobuf); a one-value field keeps the last, as protobuf does. A list's values are
        // counted as they come: one a single field, and a packed run's.
        let mut first: Option<Field> = None;
        let mut last: Option<Field> = None;
        let (mut singles, mut runs, mut values, mut run_bytes) = (0u64, 0u64, 0u64, 0u64);
        for field in Fields::of(self.source, span)? {
            let field = field?;
            match (field.number == want, field.value, floats) {
                (false, ..) => continue,
                (true, Value::Fixed32(_), true) | (true, Value::Varint(..), false) => {
                    singles += 1;
                    values += 1;
                }
                (true, Value::Bytes(s), _) if want >= 7 => {
                    runs += 1;
                    values += if floats {
                        if s.len() % 4 != 0 {
                            return Err(Error::invalid(format!(
                                "Constant value_floats: {} bytes is not whole floats",
                                s.len()
                            ))
                            .at(s.start));
                        }
                        s.len() / 4
                    } else {
                        run_bytes = run_bytes.saturating_add(s.len());
                        if run_bytes > MAX_COUNTED_RUN {
                            return Err(Error::limit(format!(
                                "Constant value_ints: runs of {run_bytes} bytes, over the cap of \
                                 {MAX_COUNTED_RUN}"
                            ))
                            .at(s.start));
                        }
                        proto::count_varints(self.source, s)?
                    };
                }
                _ => continue,
            }
            first.get_or_insert(field);
            last = Some(field);
        }
        let (Some(first), Some(last)) = (first, last) else {
            return Ok(None);
        };
        let width: u8 = if floats { 4 } else { 8 };
        Ok(Some(match (name, last.value) {
            ("value_float", Value::Fixed32(s)) => dense(f32s, Vec::new(), (s.start, 4)),
            ("value_int", Value::Varint(_, s)) => {
                encoded(dense(i64s, Vec::new(), (s.start, s.len())), ints, 8)
            }
            (_, Value::Bytes(s)) if runs == 1 && singles == 0 && floats => {
                dense(f32s, vec![values], (s.start, s.len()))
            }
            (_, Value::Bytes(s)) if runs == 1 && singles == 0 => encoded(
                dense(i64s, vec![values], (s.start, s.len())),
                ints,
                values.saturating_mul(8),
            ),
            // Unpacked (proto2's default for an attribute's floats and ints): each number its
            // own field; or several runs, or both: gathered from the attribute when read.
            _ => {
                let tagged = Encoding::ProtoTagged {
                    width,
                    varint: !floats,
                    boolean: false,
                };
                let span = (first.at, last.end() - first.at);
                let element = if floats { f32s } else { i64s };
                let decoded = values.saturating_mul(u64::from(width));
                encoded(dense(element, vec![values], span), tagged, decoded)
            }
        }))
    }

    /// Adds a packed run of dimensions (ONNX declares dims unpacked, but protobuf takes
    /// either form).
    fn packed_dims(&self, dims: &mut Vec<u64>, run: Span, at: u64) -> Result<()> {
        let max_rank = self.limits.decode.max_rank;
        if run.len() > 10 * max_rank as u64 {
            return Err(Error::rank_over_cap(None, max_rank).at(at));
        }
        let bytes = self.source.read_at(run.start, run.len())?;
        let mut rest: &[u8] = &bytes;
        while !rest.is_empty() {
            let (d, n) = proto::varint(rest)
                .ok_or_else(|| Error::invalid("malformed varint in dims").at(run.start))?;
            push_dim(dims, d, max_rank, at)?;
            rest = rest.get(n..).unwrap_or_default();
        }
        Ok(())
    }

    /// One pass over a `TensorProto` given in `pieces` (protobuf merges them: repeated
    /// fields add up, a single field keeps its last value).
    fn tensor_fields(&self, pieces: &[Span]) -> Result<TensorFields> {
        let mut t = TensorFields {
            at: pieces.first().map_or(0, |s| s.start),
            ..Default::default()
        };
        let max_rank = self.limits.decode.max_rank;
        for (piece, &span) in pieces.iter().enumerate() {
            for field in Fields::of(self.source, span)? {
                let field = field?;
                match (field.number, field.value) {
                    (1, Value::Varint(d, _)) => push_dim(&mut t.dims, d, max_rank, field.at)?,
                    // Packed dims: a writer may pack them although ONNX declares them not.
                    (1, Value::Bytes(s)) => self.packed_dims(&mut t.dims, s, field.at)?,
                    (2, Value::Varint(v, _)) => t.data_type = v & u64::from(u32::MAX),
                    (3, Value::Bytes(_)) => t.segment = true,
                    (8, Value::Bytes(s)) => t.name = Some(s),
                    (9, Value::Bytes(s)) => t.raw = Some(s),
                    (13, Value::Bytes(s)) => {
                        if t.external.len() >= 64 {
                            return Err(
                                Error::limit("more than 64 external_data entries").at(field.at)
                            );
                        }
                        t.external.push(s);
                    }
                    // A closed enum: a value it does not name is an unknown field to
                    // protobuf, and the last valid one stands.
                    (14, Value::Varint(v, _)) => match v as u32 {
                        0 => t.location_external = false,
                        1 => t.location_external = true,
                        _ => {}
                    },
                    (n @ (4 | 5 | 7 | 10 | 11), value) => {
                        // A run, or one value of the field's own wire type.
                        let matches = matches!(
                            (n, value),
                            (_, Value::Bytes(_))
                                | (4, Value::Fixed32(_))
                                | (10, Value::Fixed64(_))
                                | (5 | 7 | 11, Value::Varint(..))
                        );
                        if let (true, Some(slot)) = (matches, t.typed.get_mut(n as usize)) {
                            slot.take(&field, piece);
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(t)
    }

    /// A `TensorProto` (in `pieces`) as a dense object: its name (or `name`) and the object.
    fn tensor(&mut self, pieces: &[Span], name: Option<&str>) -> Result<(String, ObjectInfo)> {
        let t = self.tensor_fields(pieces)?;
        let name = match (name, t.name) {
            (Some(n), _) => n.to_owned(),
            (None, Some(s)) => self.text(s, "tensor name")?,
            (None, None) => String::new(),
        };
        let object = self.dense_of(&t).map_err(|e| e.in_object(&name))?;
        Ok((name, object))
    }

    /// Where a tensor's numbers are. What `numpy_helper.to_array` would fail on (a negative
    /// or overflowing shape, data of the wrong size) lists the tensor as unreadable: onnx
    /// loads such a model and fails on that tensor alone.
    fn dense_of(&mut self, t: &TensorFields) -> Result<ObjectInfo> {
        let dims = t.dims.clone();
        let listed_with = |defect: Defect| {
            let mut o = dense(ElementType::plain(DType::U8), dims.clone(), (t.at, 0));
            o.defect = Some(Box::new(defect));
            Ok(o)
        };
        let external = match t.location_external {
            true => Some(self.external(t)?),
            false => None,
        };
        let info = match type_info(t.data_type) {
            Ok(i) => i,
            Err(d) => return listed_with(d),
        };
        if t.segment {
            return listed_with(Defect::unsupported(
                "a segmented tensor (TensorProto.segment)",
            ));
        }
        if let Some(d) = dims.iter().find(|&&d| d > i64::MAX as u64) {
            return listed_with(Defect::invalid(format!(
                "dimension {} is negative (shape {:?})",
                *d as i64,
                dims.iter().map(|&d| d as i64).collect::<Vec<_>>()
            )));
        }
        let count = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let Some(bytes) = count.and_then(|c| byte_len(&info.element, c)) else {
            return listed_with(Defect::invalid(format!("shape {dims:?} overflows")));
        };
        let count = count.unwrap_or(0);
        if let Some(place) = external {
            let (file, offset, length) = match place.holding(bytes) {
                Ok(placed) => placed,
                Err(defect) => return listed_with(defect),
            };
            let mut o = dense(info.element, dims, (offset, length));
            if let Some(c) = o.components.0.first_mut() {
                c.file = file;
            }
            return Ok(o);
        }
        if let Some(raw) = t.raw {
            if raw.len() != bytes {
                return listed_with(Defect::invalid(format!(
                    "raw_data holds {} bytes; shape {dims:?} of {} needs {bytes}",
                    raw.len(),
                    info.element.name()
                )));
            }
            return Ok(dense(info.element, dims, (raw.start, raw.len())));
        }
        let field = match info.typed {
            Typed::Floats => 4,
            Typed::Doubles => 10,
            Typed::Varints { field, .. } => field,
            Typed::Codes { .. } => 5,
        };
        let values = t.typed.get(field as usize);
        let (runs, singles) = values.map_or((0, 0), |v| (v.run_count, v.singles));
        if count == 0 && runs == 0 && singles == 0 {
            return Ok(dense(info.element, dims, (t.at, 0)));
        }
        let Some(values) = values.filter(|_| runs + singles > 0) else {
            return listed_with(Defect::invalid(format!(
                "no data: neither raw_data nor field {field} holds the {count} values"
            )));
        };
        let fixed = match info.typed {
            Typed::Floats => Some(4u64),
            Typed::Doubles => Some(8),
            Typed::Varints { .. } | Typed::Codes { .. } => None,
        };
        let (width, boolean) = match info.typed {
            Typed::Varints { width, boolean, .. } => (width, boolean),
            _ => (fixed.unwrap_or(4) as u8, false),
        };
        // One packed run, as every writer writes the field: floats and doubles are a range
        // of the file, read in place.
        if let ([run], 0) = (&values.runs[..], singles) {
            let run = *run;
            return match fixed {
                Some(_) if run.len() != bytes => listed_with(Defect::invalid(format!(
                    "field {field} holds {} bytes; shape {dims:?} of {} needs {bytes}",
                    run.len(),
                    info.element.name()
                ))),
                Some(_) => Ok(dense(info.element, dims, (run.start, run.len()))),
                None if count == 0 && run.len() > 0 => listed_with(Defect::invalid(format!(
                    "field {field} holds values; shape {dims:?} holds none"
                ))),
                None => {
                    let o = dense(info.element, dims, (run.start, run.len()));
                    let encoding = match info.typed {
                        Typed::Codes { bits } => Encoding::ProtoVarintCodes { bits, count },
                        _ => Encoding::ProtoVarints { width, boolean },
                    };
                    Ok(encoded(o, encoding, bytes))
                }
            };
        }
        // What protobuf reads besides: values written unpacked (each its own key), several
        // packed runs, both at once, other fields between them. Read with a copy.
        if let Typed::Codes { .. } = info.typed {
            return listed_with(Defect::unsupported(format!(
                "{} values in field {field} in any form but one packed run",
                info.element.name()
            )));
        }
        let Some((span, _)) = values.span.filter(|_| !values.split) else {
            return listed_with(Defect::unsupported(format!(
                "field {field} holds values in more than one piece of a tensor given in pieces \
                 (protobuf merges them)"
            )));
        };
        // Each value decodes to `width` bytes (a complex element takes two floats; a 4-bit
        // type's value holds two elements).
        let width = if boolean { 1 } else { width };
        let held = match fixed {
            Some(w) => values.run_bytes.saturating_add(singles.saturating_mul(w)),
            None if runs == 0 => singles.saturating_mul(u64::from(width)),
            // Varints in runs are counted as they are decoded.
            None => bytes,
        };
        let ragged = fixed.is_some_and(|w| values.runs.iter().any(|r| r.len() % w != 0));
        if held != bytes || ragged {
            let (name, per) = (info.element.name(), u64::from(width));
            return listed_with(Defect::invalid(match (runs, singles) {
                (0, _) => format!(
                    "field {field} holds {singles} values; shape {dims:?} of {name} needs {}",
                    bytes / per
                ),
                (_, 0) => format!(
                    "field {field} holds {held} bytes in {runs} runs; shape {dims:?} of {name} \
                     needs {bytes}"
                ),
                _ => format!(
                    "field {field} holds {held} bytes in {runs} packed run{} and {singles} \
                     unpacked value{}; shape {dims:?} of {name} needs {bytes}",
                    if runs == 1 { "" } else { "s" },
                    if singles == 1 { "" } else { "s" },
                ),
            }));
        }
        if count == 0 && values.run_bytes > 0 {
            return listed_with(Defect::invalid(format!(
                "field {field} holds values; shape {dims:?} holds none"
            )));
        }
        // Floats or doubles in packed runs alone: each run a range of the file, placed one
        // after the other. Every other form is gathered from the tensor's message.
        let Some(_) = fixed.filter(|_| singles == 0 && runs as usize <= MAX_TYPED_RUNS) else {
            let tagged = Encoding::ProtoTagged {
                width,
                varint: fixed.is_none(),
                boolean,
            };
            let o = dense(info.element, dims, (span.start, span.len()));
            return Ok(encoded(o, tagged, bytes));
        };
        let pieces = values.runs.iter().map(|r| Piece {
            file: 0,
            offset: r.start,
            length: r.len(),
            crc32c: None,
        });
        let pieces: Vec<Piece> = pieces.collect();
        let (start, end) = (pieces.first(), pieces.last());
        let start = start.map_or(t.at, |p| p.offset);
        let end = end.map_or(start, |p| p.offset.saturating_add(p.length));
        let o = dense(info.element, dims, (start, end.saturating_sub(start)));
        Ok(encoded(o, Encoding::Pieces(Box::new(pieces)), bytes))
    }

    /// An external tensor's place: its file (opened now, as onnx.load opens it whatever the
    /// tensor's type), the offset, and the length (with no `length`, the data runs to the
    /// end of the file, as onnx reads it), checked against the file.
    fn external(&mut self, t: &TensorFields) -> Result<External> {
        let (mut location, mut offset, mut length) = (None, 0u64, None);
        for span in &t.external {
            let (key, value) = self.pair(*span, false)?;
            let value = match value {
                Attr::Text(v) => v,
                _ => String::new(),
            };
            let number = |v: &str| {
                python_int(v).ok_or_else(|| {
                    Error::invalid(format!(
                        "external_data {key} {v:?} is not a whole number of bytes"
                    ))
                    .at(t.at)
                })
            };
            match key.as_str() {
                "location" => location = Some(value),
                "offset" => offset = number(&value)?,
                "length" => length = Some(number(&value)?),
                _ => {}
            }
        }
        let location =
            location.ok_or_else(|| Error::invalid("external data names no location").at(t.at))?;
        let file = self.external_file(&location).map_err(|e| e.at(t.at))?;
        let size = self
            .externals
            .get(file as usize - 1)
            .map_or(0, |(_, s)| s.len());
        // onnx.load checks the range against the file and refuses the model.
        let past_end = |length: &dyn std::fmt::Display| {
            Error::invalid(format!(
                "external data at offset {offset}, {length} bytes, lies past the end of \
                 {location:?} ({size} bytes)"
            ))
            .at(t.at)
        };
        let length = match length {
            Some(n) => n,
            None => size
                .checked_sub(offset)
                .ok_or_else(|| past_end(&"to its end"))?,
        };
        if offset.checked_add(length).is_none_or(|end| end > size) {
            return Err(past_end(&length));
        }
        Ok(External {
            file,
            offset,
            length,
        })
    }

    /// The shard number (from 1) of external file `location`, opened on first use.
    fn external_file(&mut self, location: &str) -> Result<u32> {
        if let Some(&number) = self.external_numbers.get(location) {
            return Ok(number);
        }
        if self.externals.len() >= MAX_EXTERNAL_FILES {
            return Err(Error::limit(format!(
                "the model names more than {MAX_EXTERNAL_FILES} external data files"
            )));
        }
        let model_path = self.model_path.as_deref().ok_or_else(|| {
            Error::unsupported(
                "external data: a model opened from memory has no folder to find it in",
            )
        })?;
        let path = external_path(model_path, location)?;
        let source = (self.open_external)(&path).map_err(|e| e.in_file(&path))?;
        let info = ShardInfo::data_file(location.to_owned(), path, source.len());
        self.externals.push((info, source));
        let number = self.externals.len() as u32;
        self.external_numbers.insert(location.to_owned(), number);
        Ok(number)
    }

    /// A `SparseTensorProto` (in `pieces`) as a COO object. What onnx would fail to turn
    /// into an array lists it as unreadable, as for a dense tensor.
    fn sparse(&mut self, pieces: &[Span], name: Option<&str>) -> Result<(String, ObjectInfo)> {
        let (mut values, mut indices, mut dims) = (Vec::new(), Vec::new(), Vec::new());
        for &span in pieces {
            for field in Fields::of(self.source, span)? {
                let field = field?;
                let (list, s) = match (field.number, field.value) {
                    (1, Value::Bytes(s)) => (&mut values, s),
                    (2, Value::Bytes(s)) => (&mut indices, s),
                    (3, Value::Varint(d, _)) => {
                        push_dim(&mut dims, d, self.limits.decode.max_rank, field.at)?;
                        continue;
                    }
                    (3, Value::Bytes(s)) => {
                        self.packed_dims(&mut dims, s, field.at)?;
                        continue;
                    }
                    _ => continue,
                };
                if list.len() >= MAX_PIECES {
                    return Err(Error::limit(format!(
                        "a sparse tensor's values or indices in more than {MAX_PIECES} pieces"
                    ))
                    .at(field.at));
                }
                list.push(s);
            }
        }
        let at = pieces.first().map_or(0, |s| s.start);
        let vt = self.tensor_fields(&values)?;
        let name = match (name, vt.name) {
            (Some(n), _) => n.to_owned(),
            (None, Some(s)) => self.text(s, "tensor name")?,
            (None, None) => String::new(),
        };
        let listed = (|| {
            if values.is_empty() {
                return Err(Error::invalid("sparse tensor has no values").at(at));
            }
            let v = self.dense_of(&vt)?;
            let nnz = v.shape.first().copied().unwrap_or(0);
            let mut value_part = v
                .components
                .0
                .into_iter()
                .next()
                .ok_or_else(|| Error::invalid("no values"))?;
            value_part.role = "values".into();
            let defect = v.defect;
            let rank = dims.len() as u64;
            let index_part = match indices.is_empty() {
                true if nnz == 0 => None,
                true => return Err(Error::invalid("sparse tensor has values but no indices")),
                false => {
                    let it = self.tensor_fields(&indices)?;
                    Some(self.coords(&it, nnz, rank)?)
                }
            };
            let mut parts = vec![value_part];
            parts.extend(index_part);
            parts.sort_by(|a, b| a.role.cmp(&b.role));
            let mut o = ObjectInfo::listed(
                String::new(),
                dims.as_slice().into(),
                Format::SparseCoo,
                Attributes::new(),
                Components(parts.into_iter().collect()),
            );
            o.defect = defect;
            Ok(o)
        })();
        let listed = match listed {
            // onnx reads the model and fails on this tensor alone.
            Err(e) if matches!(e.kind(), ErrorKind::InvalidFile | ErrorKind::Unsupported) => {
                let mut o = dense(ElementType::plain(DType::U8), dims.clone(), (at, 0));
                o.defect = Some(Box::new(Defect::from_error(&e)));
                o
            }
            listed => listed.map_err(|e| e.in_object(&name))?,
        };
        Ok((name, listed))
    }

    /// The `coords` component of a COO object from ONNX's `[nnz, rank]` int64 indices,
    /// gathered axis by axis (our layout) through strides.
    fn coords(&mut self, t: &TensorFields, nnz: u64, rank: u64) -> Result<ComponentInfo> {
        if t.data_type != data_type::INT64 {
            return Err(Error::invalid(format!(
                "sparse indices of data type {}, not INT64",
                t.data_type
            )));
        }
        let as_pairs = t.dims.as_slice() == [nnz, rank];
        let linear = t.dims.as_slice() == [nnz];
        if !(as_pairs || linear && rank == 1) {
            return Err(Error::unsupported(format!(
                "sparse indices of shape {:?} for {nnz} values of rank {rank} (linearized \
                 indices of rank above 1 are not read)",
                t.dims
            )));
        }
        let mut it = self.dense_of(t)?;
        if let Some(d) = it.defect {
            return Err(d.to_error());
        }
        let mut part = it
            .components
            .0
            .pop()
            .ok_or_else(|| Error::invalid("no indices"))?;
        // Indices are int64 and must not be negative: as u64, a negative one is out of range.
        part.element = ElementType::plain(DType::U64);
        part.role = "coords".into();
        if rank > 1 {
            if part.encoding != Encoding::Raw {
                return Err(Error::unsupported(
                    "sparse indices in int64_data for rank above 1 (only raw_data is read)",
                ));
            }
            part.arrangement = Some(Box::new(Arrangement {
                skip: 0,
                span: part.length,
                dims: vec![rank, nnz],
                strides: vec![1, rank],
                described: false,
            }));
        }
        Ok(part)
    }
}

/// A whole number as Python's `int()` reads the text (onnx reads `offset` and `length`
/// so): spaces around it, a leading `+`, and `_` between digits are allowed.
fn python_int(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let digits = digits.replace('_', "");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Adds a dimension, refusing a rank over `max_rank`.
fn push_dim(dims: &mut Vec<u64>, d: u64, max_rank: usize, at: u64) -> Result<()> {
    if dims.len() >= max_rank {
        return Err(Error::rank_over_cap(Some(dims.len() as u64 + 1), max_rank).at(at));
    }
    dims.push(d);
    Ok(())
}

/// A dense object of one `data` component at `(offset, length)` of the model file, raw.
fn dense(element: ElementType, dims: Vec<u64>, (offset, length): (u64, u64)) -> ObjectInfo {
    ObjectInfo::raw_dense(
        String::new(),
        dims.as_slice().into(),
        element,
        (offset, length),
        ByteOrder::Little,
    )
}

/// `object` with its one component under `encoding`, decoding to `decoded` bytes.
fn encoded(mut object: ObjectInfo, encoding: Encoding, decoded: u64) -> ObjectInfo {
    if let Some(c) = object.components.0.first_mut() {
        c.encoding = encoding;
        c.decoded_len = Some(decoded);
        c.uncompressed_length = Some(decoded);
        c.digest_scope = DigestScope::Stored;
    }
    object
}

/// The path of external data file `location` beside the model at `model_path`.
pub(crate) fn external_path(model_path: &Path, location: &str) -> Result<PathBuf> {
    super::path_in_folder(
        model_path,
        location,
        "external data location",
        "the model's folder",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_paths_stay_in_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.onnx");
        std::fs::write(&model, b"").unwrap();
        std::fs::write(dir.path().join("w.bin"), b"1234").unwrap();
        assert!(external_path(&model, "w.bin").is_ok());
        assert!(external_path(&model, "sub/w.bin").is_ok());
        for bad in ["../w.bin", "/etc/passwd", "a/../../w.bin", "", "a\0b"] {
            let e = external_path(&model, bad).unwrap_err();
            assert!(
                e.to_string().contains("inside the model's folder"),
                "{bad}: {e}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_link_out_of_the_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m.onnx"), b"").unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("link")).unwrap();
        let e = external_path(&dir.path().join("m.onnx"), "link/hostname").unwrap_err();
        assert!(
            e.to_string().contains("leads out of the model's folder"),
            "{e}"
        );
        // Named from the current folder, where the parent of `m.onnx` is the empty path: the
        // CLI's test `a_model_named_from_its_own_folder_keeps_its_data_inside` (a test here
        // would change the current folder of every test running beside it).
    }

    #[cfg(unix)]
    #[test]
    fn hugging_face_cache_links_into_blobs_are_followed_and_no_further() {
        // models--org--name/{blobs/<hash>, snapshots/<rev>/<name> -> ../../blobs/<hash>}
        let repo = tempfile::tempdir().unwrap();
        let (blobs, snapshot) = (repo.path().join("blobs"), repo.path().join("snapshots/r1"));
        std::fs::create_dir_all(&blobs).unwrap();
        std::fs::create_dir_all(snapshot.join("sub")).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("secret"), b"x").unwrap();
        for (blob, name) in [("aa", "m.onnx"), ("bb", "m.onnx.data"), ("cc", "sub/w.bin")] {
            std::fs::write(blobs.join(blob), b"1234").unwrap();
            let up = if name.contains('/') {
                "../../../blobs/"
            } else {
                "../../blobs/"
            };
            std::os::unix::fs::symlink(format!("{up}{blob}"), snapshot.join(name)).unwrap();
        }
        std::os::unix::fs::symlink(elsewhere.path().join("secret"), snapshot.join("s")).unwrap();
        let model = snapshot.join("m.onnx");
        assert_eq!(
            external_path(&model, "m.onnx.data").unwrap(),
            snapshot.join("m.onnx.data")
        );
        assert!(external_path(&model, "sub/w.bin").is_ok());
        let e = external_path(&model, "s").unwrap_err();
        assert!(
            e.to_string().contains("leads out of the model's folder"),
            "{e}"
        );
        // A model that is no link has no second folder: the blobs are out of its reach.
        let plain = snapshot.join("plain.onnx");
        std::fs::write(&plain, b"").unwrap();
        let e = external_path(&plain, "m.onnx.data").unwrap_err();
        assert!(
            e.to_string().contains("leads out of the model's folder"),
            "{e}"
        );
    }

    #[test]
    fn external_numbers_are_read_as_python_reads_them() {
        for (text, want) in [
            ("8", Some(8)),
            ("8 ", Some(8)),
            (" +1_000\n", Some(1000)),
            ("007", Some(7)),
            ("", None),
            ("-1", None),
            ("1__0", None),
            ("_1", None),
            ("1_", None),
            ("0x10", None),
            ("99999999999999999999", None),
        ] {
            assert_eq!(python_int(text), want, "{text:?}");
        }
    }

    #[test]
    fn names_given_twice_are_qualified() {
        let mut names = Names::default();
        assert_eq!(names.claim("w".into(), "main"), "w");
        assert_eq!(
            names.claim("w".into(), "main/if0.then_branch"),
            "main/if0.then_branch/w"
        );
        assert_eq!(
            names.claim("w".into(), "main/if0.then_branch"),
            "main/if0.then_branch/w#2"
        );
        // Many unnamed tensors: each gets its own name, counted, not searched for.
        let got: Vec<String> = (0..1000)
            .map(|_| names.claim(String::new(), "main").to_owned())
            .collect();
        assert_eq!(got[0], "");
        assert_eq!(got[1], "main/");
        assert_eq!(got[999], "main/#999");
        let distinct: std::collections::BTreeSet<&String> = got.iter().collect();
        assert_eq!(distinct.len(), 1000);
        // The list hands the names over in the order claimed.
        let list = names.into_list();
        assert_eq!(list.len(), 1003);
        assert_eq!(
            list[..3],
            ["w", "main/if0.then_branch/w", "main/if0.then_branch/w#2"]
        );
        assert_eq!(list[3..], got[..]);
    }
}
