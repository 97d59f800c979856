//! Paddle's inference parameters in the facade's object model: `model.pdiparams`, as
//! `paddle.jit.save` and `save_inference_model` write it (PaddleOCR's and PaddleDetection's
//! `inference.pdiparams`; Paddle 1's `__params__`), and a single tensor saved to a file of
//! its own.
//!
//! The file is the persistable variables' tensors one after another, each as Paddle
//! serializes a dense tensor, with no names:
//!
//! ```text
//!  u32 version (0)   u64 LoD levels   per level: u64 length, that many bytes of offsets
//!  u32 version (0)   i32 n            TensorDesc, n bytes of protobuf
//!                                       1: data type (enum)   2: dims (repeated int64)
//!  the elements, little-endian, dims' product times the type's size
//! ```
//!
//! - Paddle writes the variables in the order of their names, sorted; the names are in the
//!   program beside the file (`model.json` from Paddle 3, a PIR program; `model.pdmodel`
//!   before, a `ProgramDesc`; `__model__` beside `__params__`; `model` beside `params`). The
//!   program's persistable variables name the tensors when they are exactly as many and each
//!   declared shape matches; otherwise, and with no program, the tensors are named by their
//!   place (`"00"`, `"01"`, ... `"37"`: one width, so that they sort in the file's order), and
//!   the file attribute `paddle.names` says why.
//! - Each tensor is a raw range of the file: zero copy. Every length is checked against the
//!   file, a rank against [`DecodeLimits::max_rank`](zt_manifest::DecodeLimits), a header
//!   against [`MAX_DESC_LEN`], LoD levels against [`MAX_LOD_LEVELS`]; what the listing
//!   takes is charged to [`Limits::listing_budget`] first.
//! - The program (and the `.info` below) is opened as the file was: from its folder, or, for
//!   a file opened by URL, the object of that name beside it (one request for each name
//!   looked for); at most [`MAX_PROGRAM_LEN`] bytes. A name that is not there is passed over;
//!   any other failure to open it is an error.
//! - Paddle 1 could also save each variable to a file of its own, named as the variable,
//!   beside the program `__model__` (`save_inference_model` with no params file name;
//!   `save_vars`): that program, opened, lists its variables from those files
//!   ([`list_per_variable`]), each file a shard holding one tensor.
//! - With the program's names, `X.pdiparams.info` beside the file (a pickle `paddle.jit.save`
//!   writes beside a ProgramDesc) gives each object the attribute `paddle.structured_name`,
//!   its path in the model (`backbone.conv1.bn.weight`); read by the pickle kind, which runs
//!   nothing (feature `pickle`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use zt_container::internal::MemoryBudget;
use zt_container::{Error, Result, Source};
use zt_formats::{DType, ElementType, LogicalType};
use zt_manifest::{Attributes, Shape, Value as Attr};

use crate::files::proto::{self, Fields, Span, Value};
use crate::files::zt_v2::OpenShard;
use crate::listing::{Limits, Listing};
use crate::model::{FileVersion, ObjectInfo, ShardInfo};
use crate::ByteOrder;

/// The longest tensor header (`TensorDesc`) read: a type and a few dims take a few dozen
/// bytes.
pub(crate) const MAX_DESC_LEN: u64 = 64 << 10;

/// The most LoD levels a tensor may declare (parameters have none; Paddle allows a handful).
pub(crate) const MAX_LOD_LEVELS: u64 = 1024;

/// The largest program read for the tensors' names.
pub(crate) const MAX_PROGRAM_LEN: u64 = 1 << 30;

/// The name of the program beside which Paddle 1 saved each variable to a file of its own.
pub(crate) const PER_VARIABLE_PROGRAM: &str = "__model__";

/// The most variable files a program saved one variable to a file may name (each is a file
/// opened at listing, as many as an ONNX model's external data files).
const MAX_VARIABLE_FILES: usize = 4096;

/// `ProgramDesc` variable types whose variables Paddle never saves: feed, fetch, reader and
/// raw variables.
const UNSAVED_TYPES: [u64; 4] = [9, 10, 15, 17];

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("invalid Paddle parameters file: {what}"))
}

/// The element type of a Paddle data type (`VarType.Type`), or `None` for a type that is
/// not a tensor element.
fn element(code: u64) -> Option<ElementType> {
    let plain = |d| Some(ElementType::plain(d));
    let logical = |d, t| {
        Some(ElementType {
            dtype: d,
            logical: Some(t),
        })
    };
    match code {
        0 => plain(DType::Bool),
        1 => plain(DType::I16),
        2 => plain(DType::I32),
        3 => plain(DType::I64),
        4 => plain(DType::F16),
        5 => plain(DType::F32),
        6 => plain(DType::F64),
        19 | 38 => plain(DType::U64), // SIZE_T is a 64-bit size_t on every platform Paddle ships
        20 => plain(DType::U8),
        21 => plain(DType::I8),
        22 => plain(DType::BF16),
        23 => logical(DType::F32, LogicalType::Complex64),
        24 => logical(DType::F64, LogicalType::Complex128),
        32 => logical(DType::U8, LogicalType::F8E4M3Fn),
        33 => logical(DType::U8, LogicalType::F8E5M2),
        36 => plain(DType::U16),
        37 => plain(DType::U32),
        _ => None,
    }
}

/// A `TensorDesc`: its data type and dims (negative in a program for a size fed at run time).
struct Desc {
    data_type: Option<u64>,
    dims: Vec<i64>,
}

/// Reads a `TensorDesc` message (`dims` packed or not, as protobuf takes either).
fn tensor_desc(source: &Source, span: Span, max_rank: usize) -> Result<Desc> {
    let mut desc = Desc {
        data_type: None,
        dims: Vec::new(),
    };
    let mut push = |d: u64, at: u64| {
        if desc.dims.len() >= max_rank {
            return Err(Error::rank_over_cap(None, max_rank).at(at));
        }
        desc.dims.push(d as i64);
        Ok(())
    };
    for field in Fields::of(source, span)? {
        let field = field?;
        match (field.number, field.value) {
            (1, Value::Varint(v, _)) => desc.data_type = Some(v),
            (2, Value::Varint(v, _)) => push(v, field.at)?,
            (2, Value::Bytes(run)) => {
                proto::each_varint(source, run, max_rank, "a tensor's dims", |v| {
                    push(v, run.start)
                })?;
            }
            _ => {}
        }
    }
    Ok(desc)
}

/// Reads a little-endian integer of `N` bytes at `at`, or says what was cut short.
fn read_le<const N: usize>(source: &Source, at: u64, what: &str) -> Result<[u8; N]> {
    let end = at.checked_add(N as u64).filter(|&e| e <= source.len());
    if end.is_none() {
        return Err(bad(format!("the file ends inside {what}")).at(at));
    }
    let bytes = source.read_at(at, N as u64)?;
    bytes
        .first_chunk::<N>()
        .copied()
        .ok_or_else(|| bad(format!("the file ends inside {what}")).at(at))
}

/// One tensor of the file: its type, dims and where its elements lie.
struct Record {
    element: ElementType,
    dims: Vec<u64>,
    data: (u64, u64),
}

/// Reads the tensor that starts at `at`; returns it and where the next one starts.
fn record(source: &Source, at: u64, limits: &Limits) -> Result<(Record, u64)> {
    let version = u32::from_le_bytes(read_le(source, at, "a tensor's version")?);
    if version != 0 {
        return Err(bad(format!("tensor version {version}; Paddle writes 0")).at(at));
    }
    let levels = u64::from_le_bytes(read_le(source, at + 4, "a tensor's LoD level count")?);
    if levels > MAX_LOD_LEVELS {
        return Err(Error::limit(format!(
            "a tensor declares {levels} LoD levels, over the cap of {MAX_LOD_LEVELS}"
        ))
        .at(at + 4));
    }
    let mut pos = at + 12;
    for _ in 0..levels {
        let len = u64::from_le_bytes(read_le(source, pos, "a LoD level's length")?);
        pos = pos
            .checked_add(8)
            .and_then(|p| p.checked_add(len))
            .filter(|&p| p <= source.len())
            .ok_or_else(|| bad(format!("a LoD level of {len} bytes runs past the file")).at(pos))?;
    }
    let version = u32::from_le_bytes(read_le(source, pos, "a tensor's version")?);
    if version != 0 {
        return Err(bad(format!("dense tensor version {version}; Paddle writes 0")).at(pos));
    }
    let desc_len = i32::from_le_bytes(read_le(source, pos + 4, "a tensor's header length")?);
    let desc_at = pos + 8;
    let desc_len = u64::try_from(desc_len)
        .map_err(|_| bad(format!("a tensor header of {desc_len} bytes")).at(pos + 4))?;
    if desc_len > MAX_DESC_LEN {
        return Err(Error::limit(format!(
            "a tensor header of {desc_len} bytes, over the cap of {MAX_DESC_LEN}"
        ))
        .at(pos + 4));
    }
    let desc_end = desc_at
        .checked_add(desc_len)
        .filter(|&e| e <= source.len())
        .ok_or_else(|| bad("a tensor header runs past the end of the file").at(pos + 4))?;
    let span = Span {
        start: desc_at,
        end: desc_end,
    };
    let desc = tensor_desc(source, span, limits.decode.max_rank)?;
    let code = desc
        .data_type
        .ok_or_else(|| bad("a tensor header without a data type").at(desc_at))?;
    let element = element(code).ok_or_else(|| {
        Error::unsupported(format!(
            "Paddle data type {code} is not a tensor element type"
        ))
        .at(desc_at)
    })?;
    let dims: Vec<u64> = desc
        .dims
        .iter()
        .map(|&d| u64::try_from(d).map_err(|_| bad(format!("a tensor of dim {d}")).at(desc_at)))
        .collect::<Result<_>>()?;
    let nbytes = dims
        .iter()
        .try_fold(element.logical_size(), |n, &d| n.checked_mul(d))
        .ok_or_else(|| bad(format!("dims {dims:?} overflow")).at(desc_at))?;
    let end = desc_end
        .checked_add(nbytes)
        .filter(|&e| e <= source.len())
        .ok_or_else(|| {
            bad(format!(
                "a tensor of dims {dims:?} needs {nbytes} bytes; the file ends {} bytes after \
                 its header",
                source.len() - desc_end
            ))
            .at(desc_end)
        })?;
    let data = (desc_end, nbytes);
    Ok((
        Record {
            element,
            dims,
            data,
        },
        end,
    ))
}

/// Lists a Paddle parameters file. `path` is where it was opened from: its folder holds the
/// program that names its tensors, which `open` opens (a local file, or the object beside a
/// URL).
pub(crate) fn list(
    source: &Source,
    path: Option<&Path>,
    limits: &Limits,
    open: OpenShard<'_>,
) -> Result<Listing> {
    if path.is_some_and(is_per_variable_program) {
        return list_per_variable(source, path, limits, open);
    }
    let mut budget = MemoryBudget::new(
        limits.listing_budget(source.len()),
        "listing the Paddle parameters",
    );
    let mut records = Vec::new();
    let mut at = 0;
    while at < source.len() {
        budget.charge(Limits::listing_cost(""))?;
        let (r, next) =
            record(source, at, limits).map_err(|e| e.in_object(&records.len().to_string()))?;
        records
            .try_reserve(1)
            .map_err(|_| Error::out_of_memory("listing the Paddle parameters"))?;
        records.push(r);
        at = next;
    }
    let mut attributes = Attributes::new();
    // Each variable's path in the model (`.pdiparams.info`), by its name.
    #[cfg_attr(not(feature = "pickle"), allow(unused_mut))]
    let mut structured = Attributes::new();
    let program = match path {
        Some(path) => program_beside(path, open)?,
        None => None,
    };
    let names = match program {
        None => {
            attributes.insert(
                "paddle.names".into(),
                Attr::Text("by place: no program beside the file names its tensors".into()),
            );
            None
        }
        Some((program, program_source)) => {
            let file = program
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let named = program_names(&program_source, records.len(), limits, &mut budget)
                .map_err(|e| e.in_file(&program))?;
            match matched(named, &records) {
                Ok(names) => {
                    attributes.insert("paddle.names".into(), Attr::Text(format!("from {file}")));
                    #[cfg(feature = "pickle")]
                    if let Some((p, info)) =
                        path.map(|p| info_beside(p, open)).transpose()?.flatten()
                    {
                        structured = structured_names(&info, limits).map_err(|e| e.in_file(&p))?;
                    }
                    Some(names)
                }
                Err(why) => {
                    attributes.insert(
                        "paddle.names".into(),
                        Attr::Text(format!("by place: {file} {why}")),
                    );
                    None
                }
            }
        }
    };
    // Names by place have one width, so that they sort in the file's order.
    let width = records.len().saturating_sub(1).to_string().len();
    let mut objects = zt_container::internal::try_with_capacity(records.len())?;
    for (i, r) in records.into_iter().enumerate() {
        let name = match &names {
            Some(names) => names.get(i).cloned().unwrap_or_default(),
            None => format!("{i:0width$}"),
        };
        budget.charge(Limits::listing_cost(&name))?;
        let dims: Shape = r.dims.iter().copied().collect();
        let key = format!("{name}.structured_name");
        let mut o = ObjectInfo::raw_dense(name, dims, r.element, r.data, ByteOrder::Little);
        if let Some(path @ Attr::Text(_)) = structured.get(&key) {
            o.attributes
                .insert("paddle.structured_name".into(), path.clone());
        }
        objects.push(o);
    }
    Ok(Listing::of_unique(
        FileVersion::PaddleParams,
        attributes,
        objects,
    ))
}

/// Whether `path` names a Paddle 1 program beside which each variable may lie in a file of
/// its own (`__model__`).
pub(crate) fn is_per_variable_program(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == PER_VARIABLE_PROGRAM)
}

/// Lists the variables of the program `source` (`__model__`, opened from `path`), each from
/// the file of its name beside it, as Paddle 1's `save_inference_model` with no params file
/// name and `save_vars` write them and `load_inference_model(dir, model_filename=
/// "__model__", params_filename=None)` reads them: every persistable variable (as for a
/// combined file), each file one tensor whose dims must be those the program declares. Each
/// file is a shard of the listing, so its tensor is read from its own map without a copy. A
/// program with `__params__` beside is that file's, and is refused naming it; a variable
/// whose file is missing, holds more than one tensor or does not fit its declaration is an
/// error naming both.
pub(crate) fn list_per_variable(
    source: &Source,
    path: Option<&Path>,
    limits: &Limits,
    open: OpenShard<'_>,
) -> Result<Listing> {
    let Some((path, folder)) = path.and_then(|p| Some((p, p.parent()?))) else {
        return Err(Error::unsupported(
            "a Paddle program (__model__) opened from memory: the variable files beside it \
             cannot be found",
        ));
    };
    if beside(&folder.join("__params__"), open)?.is_some() {
        return Err(Error::unsupported(
            "this Paddle program's variables are in __params__ beside it: open that file (or \
             the folder)",
        ));
    }
    let mut budget = MemoryBudget::new(
        limits.listing_budget(source.len()),
        "listing the Paddle variables",
    );
    let named = program_names(source, MAX_VARIABLE_FILES, limits, &mut budget)?;
    if named.len() > MAX_VARIABLE_FILES {
        return Err(Error::limit(format!(
            "the program names more than {MAX_VARIABLE_FILES} variables saved to files of \
             their own"
        )));
    }
    zt_container::make_room_for_open_files(named.len());
    let mut objects = zt_container::internal::try_with_capacity(named.len())?;
    let mut shards = zt_container::internal::try_with_capacity(named.len())?;
    for (number, (name, declared)) in (1u32..).zip(named) {
        // Paddle joins the name to the folder; a name that leaves it is refused, as an ONNX
        // model's external data that would.
        let file =
            crate::files::path_in_folder(path, &name, "variable file", "the program's folder")
                .map_err(|e| e.in_object(&name))?;
        let at = |e: Error| e.in_object(&name).in_file(&file);
        let data = open(&file).map_err(at)?;
        let (r, end) = record(&data, 0, limits).map_err(at)?;
        if end != data.len() {
            return Err(at(bad(format!(
                "the file holds {} bytes after its one tensor, which ends at byte {end}",
                data.len() - end
            ))));
        }
        if !fits(&declared, &r.dims) {
            return Err(at(bad(format!(
                "the program declares dims {declared:?}; the file's tensor has {:?}",
                r.dims
            ))));
        }
        budget.charge(Limits::listing_cost(&name))?;
        let dims: Shape = r.dims.iter().copied().collect();
        let mut o = ObjectInfo::raw_dense(name.clone(), dims, r.element, r.data, ByteOrder::Little);
        if let Some(c) = o.components.0.first_mut() {
            c.file = number;
        }
        objects.push(o);
        let info = ShardInfo::data_file(name, file, data.len());
        shards.push((info, data));
    }
    let mut attributes = Attributes::new();
    attributes.insert(
        "paddle.names".into(),
        Attr::Text(format!(
            "from {PER_VARIABLE_PROGRAM}, one file per variable"
        )),
    );
    let mut listing = Listing::of_unique(FileVersion::PaddleParams, attributes, objects);
    listing.shards = shards;
    Ok(listing)
}

/// Whether a tensor of `dims` fits the dims a program declares (none declared fits any; a
/// negative one, fed at run time, fits any size).
fn fits(declared: &[i64], dims: &[u64]) -> bool {
    declared.is_empty()
        || declared.len() == dims.len()
            && declared
                .iter()
                .zip(dims)
                .all(|(&d, &n)| d < 0 || d as u64 == n)
}

/// The program beside a parameters file, if there is one, and its bytes: `X.json` or
/// `X.pdmodel` beside `X.pdiparams`, `__model__` beside `__params__`, `model` beside
/// `params`.
fn program_beside(path: &Path, open: OpenShard<'_>) -> Result<Option<(PathBuf, Source)>> {
    let (Some(folder), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
    else {
        return Ok(None);
    };
    let candidates: Vec<String> = match name {
        "__params__" => vec!["__model__".into()],
        "params" => vec!["model".into()],
        _ => match name.strip_suffix(".pdiparams") {
            Some(stem) => vec![format!("{stem}.json"), format!("{stem}.pdmodel")],
            None => return Ok(None),
        },
    };
    for candidate in candidates {
        if let Some(found) = beside(&folder.join(candidate), open)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// `X.pdiparams.info` beside `X.pdiparams`, if it is there, and its bytes.
#[cfg(feature = "pickle")]
fn info_beside(path: &Path, open: OpenShard<'_>) -> Result<Option<(PathBuf, Source)>> {
    let Some(name) = path.file_name() else {
        return Ok(None);
    };
    let mut name = name.to_os_string();
    name.push(".info");
    beside(&path.with_file_name(name), open)
}

/// The file at `path`, opened by `open`, or `None` when there is none (a local file or a
/// remote object that does not exist); any other failure is the caller's error.
fn beside(path: &Path, open: OpenShard<'_>) -> Result<Option<(PathBuf, Source)>> {
    match open(path) {
        Ok(source) => Ok(Some((path.to_owned(), source))),
        Err(e) if is_missing(&e) => Ok(None),
        Err(e) => Err(e.in_file(path)),
    }
}

/// Whether `e` says that a file or object does not exist (a folder is no program either).
fn is_missing(e: &Error) -> bool {
    use std::io::ErrorKind as Io;
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
    e.kind() == zt_container::ErrorKind::NotFound
        || io.is_some_and(|io| matches!(io.kind(), Io::NotFound | Io::IsADirectory))
}

/// The attributes of `X.pdiparams.info`, a pickle of `{name: {"structured_name": path,
/// "stop_gradient": ..., "trainable": ...}}` (`paddle.jit.save` writes it beside a
/// ProgramDesc), flattened as the pickle kind flattens any pickle: `<name>.structured_name`.
/// Read by the pickle machine, which runs nothing.
#[cfg(feature = "pickle")]
fn structured_names(source: &Source, limits: &Limits) -> Result<Attributes> {
    Ok(crate::files::pickled::list(source, limits)?.attributes)
}

/// The names a program gives the saved variables, sorted as Paddle writes them, each with
/// its declared dims (empty when it declares none).
type Named = BTreeMap<String, Vec<i64>>;

/// Whether the program's variables name the records: as many, and each declared shape
/// the record's. `Err` says why not.
fn matched(named: Named, records: &[Record]) -> std::result::Result<Vec<String>, String> {
    if named.len() != records.len() {
        let more = if named.len() > records.len() {
            "more"
        } else {
            "fewer"
        };
        return Err(format!(
            "names {more} persistable variables than the file's {} tensors",
            records.len()
        ));
    }
    let mut names = Vec::with_capacity(named.len());
    for ((name, declared), r) in named.into_iter().zip(records) {
        if !fits(&declared, &r.dims) {
            return Err(format!(
                "declares {name:?} of dims {declared:?}; the tensor in its place has {:?}",
                r.dims
            ));
        }
        names.push(name);
    }
    Ok(names)
}

/// Reads the persistable variables' names from a program: a PIR program in JSON
/// (Paddle 3) or a `ProgramDesc` (protobuf). Past `cap` names (the file's tensors) no more are
/// kept: one more already says the program is not the file's.
fn program_names(
    source: &Source,
    cap: usize,
    limits: &Limits,
    budget: &mut MemoryBudget,
) -> Result<Named> {
    if source.len() > MAX_PROGRAM_LEN {
        return Err(Error::limit(format!(
            "a program of {} bytes, over the cap of {MAX_PROGRAM_LEN}",
            source.len()
        )));
    }
    let bytes = source.read_at(0, source.len())?;
    if bytes.first() == Some(&b'{') {
        pir_names(&bytes, cap, budget)
    } else {
        program_desc_names(source, cap, limits, budget)
    }
}

/// `ProgramDesc`: blocks (1) of `BlockDesc`, whose vars (3) are `VarDesc`s: name (1), type
/// (2: `VarType`, its type 1 and its dense tensor 3 holding a `TensorDesc` 1), persistable
/// (3). Paddle saves the persistable ones but feed, fetch, reader and raw variables.
fn program_desc_names(
    source: &Source,
    cap: usize,
    limits: &Limits,
    budget: &mut MemoryBudget,
) -> Result<Named> {
    let whole = Span {
        start: 0,
        end: source.len(),
    };
    let mut named = Named::new();
    for block in Fields::of(source, whole)? {
        let block = block?;
        let (1, Value::Bytes(block)) = (block.number, block.value) else {
            continue;
        };
        for var in Fields::of(source, block)? {
            let var = var?;
            let (3, Value::Bytes(var)) = (var.number, var.value) else {
                continue;
            };
            let mut name = None;
            let mut persistable = false;
            let mut var_type = None;
            let mut dims = Vec::new();
            for f in Fields::of(source, var)? {
                let f = f?;
                match (f.number, f.value) {
                    (1, Value::Bytes(s)) => {
                        name = Some(crate::files::proto::text(source, s, 1 << 20, "a name")?)
                    }
                    (3, Value::Varint(v, _)) => persistable = v != 0,
                    (2, Value::Bytes(t)) => {
                        for g in Fields::of(source, t)? {
                            match g? {
                                g if g.number == 1 => {
                                    if let Value::Varint(v, _) = g.value {
                                        var_type = Some(v);
                                    }
                                }
                                g if g.number == 3 => {
                                    let Value::Bytes(dense) = g.value else {
                                        continue;
                                    };
                                    for h in Fields::of(source, dense)? {
                                        let h = h?;
                                        if let (1, Value::Bytes(d)) = (h.number, h.value) {
                                            dims = tensor_desc(source, d, limits.decode.max_rank)?
                                                .dims;
                                        }
                                    }
                                }
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
            let saved = persistable && !var_type.is_some_and(|t| UNSAVED_TYPES.contains(&t));
            if let (true, Some(name), true) = (saved, name, named.len() <= cap) {
                budget.charge(Limits::listing_cost(&name))?;
                named.insert(name, dims);
            }
        }
    }
    Ok(named)
}

/// A PIR program (`model.json`): its top-level parameter ops (`"#": "p"`) name the saved
/// variables (the name is the last of the op's attributes `A`), their type `O.TT.D[1]` the
/// dims. The ops are held as ranges of the text (what the parse holds is charged to the
/// budget first: at most one range per 16 bytes), and only parameter ops are parsed further.
fn pir_names(bytes: &[u8], cap: usize, budget: &mut MemoryBudget) -> Result<Named> {
    use serde::Deserialize;
    use serde_json::value::RawValue;
    use std::borrow::Cow;
    #[derive(Deserialize)]
    struct File<'a> {
        #[serde(borrow)]
        program: Program<'a>,
    }
    #[derive(Deserialize)]
    struct Program<'a> {
        #[serde(borrow)]
        regions: Vec<Region<'a>>,
    }
    #[derive(Deserialize)]
    struct Region<'a> {
        #[serde(borrow)]
        blocks: Vec<Block<'a>>,
    }
    #[derive(Deserialize)]
    struct Block<'a> {
        #[serde(borrow)]
        ops: Vec<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Op<'a> {
        #[serde(rename = "#", borrow)]
        id: Cow<'a, str>,
        #[serde(rename = "A", borrow, default)]
        attrs: Option<&'a RawValue>,
        #[serde(rename = "O", borrow, default)]
        output: Option<&'a RawValue>,
    }
    let invalid = |e: serde_json::Error| Error::invalid(format!("not a Paddle PIR program: {e}"));
    budget.charge(bytes.len() as u64)?;
    let file: File = serde_json::from_slice(bytes).map_err(invalid)?;
    let mut named = Named::new();
    let ops = file
        .program
        .regions
        .iter()
        .take(1)
        .flat_map(|r| &r.blocks)
        .flat_map(|b| &b.ops);
    for op in ops {
        let op: Op = serde_json::from_str(op.get()).map_err(invalid)?;
        if op.id != "p" || named.len() > cap {
            continue;
        }
        let attrs: Vec<serde_json::Value> = match op.attrs {
            Some(a) => serde_json::from_str(a.get()).map_err(invalid)?,
            None => Vec::new(),
        };
        let name = attrs.last().and_then(|a| a.as_str()).ok_or_else(|| {
            Error::invalid("a PIR parameter op whose last attribute is not its name")
        })?;
        let output: Option<serde_json::Value> = match op.output {
            Some(o) => Some(serde_json::from_str(o.get()).map_err(invalid)?),
            None => None,
        };
        let dims = output
            .as_ref()
            .and_then(|o| o.pointer("/TT/D/1")?.as_array())
            .map(|d| d.iter().map(|d| d.as_i64().unwrap_or(-1)).collect())
            .unwrap_or_default();
        budget.charge(Limits::listing_cost(name))?;
        named.insert(name.to_owned(), dims);
    }
    Ok(named)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One tensor: versions, `levels` LoD levels of 16 bytes each, its `TensorDesc` `desc`.
    fn tensor(levels: u64, desc: &[u8], data: &[u8]) -> Vec<u8> {
        let mut out = 0u32.to_le_bytes().to_vec();
        out.extend_from_slice(&levels.to_le_bytes());
        for _ in 0..levels {
            out.extend_from_slice(&16u64.to_le_bytes());
            out.extend_from_slice(&[0xee; 16]);
        }
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(desc.len() as i32).to_le_bytes());
        out.extend_from_slice(desc);
        out.extend_from_slice(data);
        out
    }

    fn listed(file: Vec<u8>, limits: &Limits) -> Result<Vec<ObjectInfo>> {
        let source = Source::from_vec(file);
        list(&source, None, limits, &|p| Source::map(p)).map(|l| l.objects)
    }

    #[test]
    fn lod_levels_are_passed_over_and_packed_dims_read() {
        // FP32 [2] after two LoD levels; then FP32 [2, 3] with its dims packed in one run.
        let mut file = tensor(2, &[0x08, 5, 0x10, 2], &[1, 0, 0, 0, 2, 0, 0, 0]);
        file.extend_from_slice(&tensor(0, &[0x08, 5, 0x12, 2, 2, 3], &[3; 24]));
        let objects = listed(file, &Limits::default()).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0].name, "0");
        assert_eq!(objects[0].shape.as_slice(), &[2]);
        assert_eq!(
            objects[0].components.0[0].offset,
            4 + 8 + 2 * 24 + 4 + 4 + 4
        );
        assert_eq!(objects[1].shape.as_slice(), &[2, 3]);
        assert_eq!(objects[1].components.0[0].length, 24);
    }

    #[test]
    fn a_rank_over_the_cap_is_refused() {
        let limits = Limits::default();
        let mut desc = vec![0x08, 5];
        for _ in 0..=limits.decode.max_rank {
            desc.extend_from_slice(&[0x10, 1]);
        }
        let e = listed(tensor(0, &desc, &[0; 4]), &limits).unwrap_err();
        assert_eq!(e.kind(), zt_container::ErrorKind::LimitExceeded, "{e}");
    }

    #[test]
    fn a_program_opened_from_memory_cannot_find_its_variable_files() {
        let source = Source::from_vec(Vec::new());
        let open: &dyn Fn(&Path) -> Result<Source> = &|_| unreachable!("nothing is opened");
        let Err(e) = list_per_variable(&source, None, &Limits::default(), open) else {
            panic!("listed with no folder");
        };
        assert_eq!(e.kind(), zt_container::ErrorKind::Unsupported, "{e}");
    }

    /// A `ProgramDesc` of one block declaring one persistable dense tensor `name`.
    fn program_of(name: &str) -> Vec<u8> {
        let mut var = vec![0x0a, name.len() as u8];
        var.extend_from_slice(name.as_bytes());
        var.extend_from_slice(&[0x12, 0x02, 0x08, 0x07, 0x18, 0x01]);
        let mut block = vec![0x1a, var.len() as u8];
        block.extend_from_slice(&var);
        let mut program = vec![0x0a, block.len() as u8];
        program.extend_from_slice(&block);
        program
    }

    #[test]
    fn a_variable_file_must_lie_in_the_programs_folder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PER_VARIABLE_PROGRAM);
        let open: &dyn Fn(&Path) -> Result<Source> = &|p| Source::map(p);
        for name in ["../x", "/etc/passwd", "a/../../x"] {
            let source = Source::from_vec(program_of(name));
            let Err(e) = list_per_variable(&source, Some(&path), &Limits::default(), open) else {
                panic!("{name:?} listed");
            };
            let text = e.to_string();
            assert!(
                text.contains("is not a relative path inside the program's folder"),
                "{e}"
            );
            assert!(text.contains(name), "{e}");
        }
        // A plain name is looked for in the folder: missing here, and said so.
        let source = Source::from_vec(program_of("fc_0.w_0"));
        let Err(e) = list_per_variable(&source, Some(&path), &Limits::default(), open) else {
            panic!("listed a missing file");
        };
        assert!(e.path().is_some_and(|p| p.ends_with("fc_0.w_0")), "{e}");
    }
}
