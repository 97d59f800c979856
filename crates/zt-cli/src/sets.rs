//! Sharded sets on the command line: an index file (`*.index.json`), or one file of a split
//! GGUF model (`model-00001-of-00003.gguf`), given where a file is expected. Every command
//! accepts one (`upgrade` and `rm` through [`with_objects`], into one file); `convert
//! --shard-size` also writes GGUF splits.
//!
//! - [`open`]: the set, its errors as the CLI reports them.
//! - [`info`] / [`ls`]: the set's metadata (main then prints each shard's `info`); the
//!   index's names.
//! - [`open_checked`]: a set checked as a whole (every shard opened, every name where the
//!   index says), for `verify` and `merge`, which then take it shard by shard.
//! - [`convert`]: a set, or a file, to one file, to a new set of shards with an index, or
//!   (a set) to zTensor v2's own shards.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::json;
use ztensor::convert::{write_indexed, GgufSplit, IndexedOptions, ShardKind};
use ztensor::{ConvertOptions, Keep, ObjectView, ShardedSet, Writer};

use crate::common::{
    cast_view, check_output, durability, merge_attributes, names_a_url, out, CastArg, DigestArg,
    Failure, Kind, MagVersion, Outcome,
};
use crate::json;

/// Whether a command-line path read from names a set: an index, or one file of a split GGUF
/// model (`model-00001-of-00003.gguf`).
pub fn is_set(path: &Path) -> bool {
    ztensor::is_set_path(path)
}

/// Whether a command-line path written to names an index (a split GGUF name is written as
/// the one file it names).
fn is_index_output(path: &Path) -> bool {
    ztensor::is_index_path(path)
}

/// Opens the set at `index` (the index read and checked; no shard opened).
pub fn open(index: &Path) -> Result<ShardedSet, Failure> {
    open_set(index).map_err(|e| Failure::Failed(e.in_file(index).into()))
}

/// A set by path, or (feature `remote`) by URL.
fn open_set(index: &Path) -> ztensor::Result<ShardedSet> {
    #[cfg(feature = "remote")]
    if let Some(url) = index.to_str().filter(|s| ztensor::is_url(s)) {
        return ShardedSet::open_url(url, crate::common::open_options());
    }
    ShardedSet::open_with(index, crate::common::open_options())
}

/// `zt info INDEX`: the set's shards and metadata (`--json`: `zt.info/1` with `kind`
/// `"sharded_set"`, `metadata`, and `shards` holding each shard's `zt.info/1` object).
/// Returns the shards whose own table `main` prints after it (none for JSON).
pub fn info(index: &Path, as_json: bool) -> Result<Vec<PathBuf>, Failure> {
    let set = open(index)?;
    set.check().map_err(|e| Failure::Failed(e.into()))?;
    if as_json {
        let mut shards = Vec::new();
        for (i, path) in set.shard_paths().enumerate() {
            let r = set.reader(i).map_err(|e| Failure::Failed(e.into()))?;
            let mut buf = Vec::new();
            json::write_info(r, path, &mut buf)
                .map_err(|e| Failure::Failed(format!("cannot write JSON: {e}").into()))?;
            let shard: serde_json::Value = serde_json::from_slice(&buf)
                .map_err(|e| Failure::Failed(format!("cannot write JSON: {e}").into()))?;
            shards.push(shard);
        }
        let j = json!({
            "schema": "zt.info/1",
            "file": index.to_string_lossy(),
            "kind": "sharded_set",
            "version": "",
            "object_count": set.len(),
            "metadata": json::attributes(set.metadata()),
            "shards": shards,
        });
        return out(&format!("{j}\n")).map(|()| Vec::new());
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: sharded set, {}, {}",
        index.display(),
        crate::common::count(set.shard_paths().count() as u64, "shard"),
        crate::common::count(set.len() as u64, "object")
    );
    for (k, v) in set.metadata() {
        let _ = writeln!(s, "  @{} = {}", crate::common::printable(k), json::value(v));
    }
    out(&s)?;
    Ok(set.shard_paths().map(Path::to_path_buf).collect())
}

/// `zt ls INDEX`: the names the index lists, sorted (no shard opened).
pub fn ls(index: &Path) -> Outcome {
    let set = open(index)?;
    let mut s = String::with_capacity(set.len() * 16);
    for n in set.names() {
        s.push_str(&crate::common::printable(n));
        s.push('\n');
    }
    out(&s)
}

/// The set at `index`, opened and checked as a whole (every shard opened, every name where
/// the index says). An error names the shard it is about, else the index.
pub fn open_checked(index: &Path) -> Result<ShardedSet, ztensor::Error> {
    open_set(index)
        .and_then(|set| set.check().map(|()| set))
        .map_err(|e| e.in_file(index))
}

/// In what order [`with_objects`] hands the objects over.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Bytewise by name: the order of every sharded output but GGUF's (and `diff`'s).
    Name,
    /// As the input holds them: a file's listing order; a set's shards in turn, each's
    /// objects by where their data lies. What a GGUF output keeps, as llama.cpp's
    /// `gguf-split` keeps it.
    File,
}

/// The objects of a set or a file, in `order`, to hand to a writer (or to `diff`), with the
/// file's attributes or those the set's shards share (see [`shared_attributes`]; `given` are
/// the keys `--set` and `--unset` name). `f` also gets the set's index metadata (empty for a
/// file), for a new index. `copying`: the objects go into a new file, so a lone split of a
/// GGUF model is refused ([`crate::common::open_to_copy`]), and so are shards that disagree
/// on an attribute.
pub(crate) fn with_objects<T>(
    input: &Path,
    copying: bool,
    order: Order,
    given: &[crate::json::AttributeChange],
    f: impl FnOnce(&[ObjectView<'_>], &ztensor::Attributes, &ztensor::Attributes) -> Result<T, Failure>,
) -> Result<T, Failure> {
    if is_set(input) {
        let set = open(input)?;
        let mut objects = set.objects().map_err(|e| Failure::Failed(e.into()))?;
        if order == Order::File {
            let offset = |o: &ObjectView<'_>| o.components().next().map(|c| c.info().offset);
            objects.sort_by_cached_key(|o| (set.shard_position(o.name()), offset(o)));
        }
        // A set's index metadata (total_size and the like) describes the set, not a file:
        // the shards' own attributes are carried, and must agree where they go into a file.
        let attributes = shared_attributes(&set, given, copying)?;
        // Every object is read (by name, jumping between shards): the set is read ahead
        // beside the work, shards at once.
        set.with_read_ahead(|| f(&objects, &attributes, &index_metadata(&set)))
    } else {
        let r = if copying {
            crate::common::open_to_copy(input)?
        } else {
            crate::common::open_input(input)
                .map_err(|e| Failure::Failed(e.in_file(input).into()))?
        };
        let mut objects: Vec<ObjectView<'_>> = r.iter().collect();
        if order == Order::Name {
            objects.sort_unstable_by(|a, b| a.name().as_bytes().cmp(b.name().as_bytes()));
        }
        f(&objects, r.attributes(), &ztensor::Attributes::new())
    }
}

/// What a new index carries over from the set it is made from: its metadata, less
/// `total_size`, which is computed anew.
fn index_metadata(set: &ShardedSet) -> ztensor::Attributes {
    if set.is_gguf_split() {
        // The model's metadata belongs in its files, not in an index.
        return ztensor::Attributes::new();
    }
    let mut metadata = set.metadata().clone();
    metadata.remove("total_size");
    metadata
}

/// The shards' file attributes, but for the keys `given` sets or unsets (`--set`'s and
/// `--unset`'s, which the output takes from it). Where the shards disagree on a key (a
/// transformers TensorFlow set's `layer_names` lists each shard's own layers), a copy into one
/// file (`copying`) is refused, naming the key and the way out; for a comparison the key's
/// value is a map from each shard's file name to its value (for the shards that have one),
/// so that a set is the same as itself and differs from a file that holds one of them. A key
/// that some shards leave out and the others agree on is theirs.
fn shared_attributes(
    set: &ShardedSet,
    given: &[crate::json::AttributeChange],
    copying: bool,
) -> Result<ztensor::Attributes, Failure> {
    if set.is_gguf_split() {
        // The first split holds the model's; each says where it is in the split.
        return Ok(set.metadata().clone());
    }
    let mut each = Vec::new();
    for (i, path) in set.shard_paths().enumerate() {
        let r = set.reader(i).map_err(|e| Failure::Failed(e.into()))?;
        each.push((path, crate::json::unless_changed(r.attributes(), given)));
    }
    if copying {
        let mut attributes = ztensor::Attributes::new();
        for (path, own) in &each {
            merge_attributes(&mut attributes, own, "shards", path)?;
        }
        return Ok(attributes);
    }
    // Linear in the attributes the shards hold, however many shards there are: a key's
    // values are gathered only from the shards that have it.
    let mut first: std::collections::BTreeMap<&String, (&ztensor::Value, bool)> =
        std::collections::BTreeMap::new();
    for (_, own) in &each {
        for (key, value) in own.iter() {
            let seen = first.entry(key).or_insert((value, false));
            seen.1 |= !crate::common::same_value(seen.0, value);
        }
    }
    let mut attributes = ztensor::Attributes::new();
    let mut per_shard: std::collections::BTreeMap<&String, ztensor::Attributes> =
        std::collections::BTreeMap::new();
    for (path, own) in &each {
        let shard = path
            .file_name()
            .unwrap_or(path.as_os_str())
            .to_string_lossy();
        for (key, value) in own.iter() {
            if first.get(key).is_some_and(|(_, differs)| *differs) {
                let values = per_shard.entry(key).or_default();
                values.insert(shard.clone().into_owned(), value.clone());
            }
        }
    }
    for (key, (value, differs)) in first {
        if !differs {
            attributes.insert(key.clone(), value.clone());
        }
    }
    for (key, values) in per_shard {
        attributes.insert(key.clone(), ztensor::Value::Map(values));
    }
    Ok(attributes)
}

/// What `convert` writes from a set or into one.
pub enum Target {
    /// One `.safetensors` file.
    Safetensors { densify: bool },
    /// One `.zt` file (objects densified when the flag says).
    Zt(ConvertOptions, bool),
    /// zTensor v2's own sharded model of shards of at most this many bytes: a root `.zt`
    /// and its shards beside it (objects densified when the flag says).
    ZtSharded(u64, ConvertOptions, bool),
    /// One `.mag` file.
    Mag(ztensor::convert::MagOptions),
    /// One GGUF file.
    Gguf { densify: bool },
    /// Shards of at most this many bytes and an index (Hugging Face's convention).
    Indexed(u64, ShardKind),
    /// The input set's own shards (the same objects in each), renamed to the convention,
    /// and an index.
    SameShards(ShardKind),
    /// GGUF splits of at most this many bytes of tensors each, as llama.cpp's `gguf-split`
    /// writes them; `force` replaces split files there already.
    GgufSplit {
        max_split_size: u64,
        densify: bool,
        force: bool,
    },
}

/// `zt convert` with a set as input, or with an indexed set as output.
/// `edits`: the attributes `--set` and `--attributes-as-json` change on the way out;
/// `skip_unreadable`: objects listed as unreadable are left out, each named in a note;
/// `cast`: the float type `--dtype` casts floating-point tensors to.
pub fn convert(
    input: &Path,
    output: &Path,
    target: Target,
    cast: Option<CastArg>,
    edits: crate::json::AttributeEdits<'_>,
    skip_unreadable: bool,
) -> Outcome {
    // The library writes a set's output in one call: a spinner, with the time it has taken.
    let bar = crate::common::spinner("convert a set", 0);
    let done = convert_quietly(input, output, target, cast, edits, skip_unreadable);
    bar.finish_and_clear();
    done
}

fn convert_quietly(
    input: &Path,
    output: &Path,
    target: Target,
    cast: Option<CastArg>,
    edits: crate::json::AttributeEdits<'_>,
    skip_unreadable: bool,
) -> Outcome {
    // The input's fault names the shard holding the object, for a set, with the way past an
    // unreadable object; anything else names the output, as for a file.
    let at = |objects: &[ObjectView<'_>], e: ztensor::Error| {
        if !ztensor::convert::inputs_fault(&e) {
            return Failure::from(e.in_file(output));
        }
        let file = blamed_input(input, &e);
        let named = e
            .object()
            .and_then(|n| objects.iter().find(|o| o.name() == n));
        let e = match named {
            Some(o) => crate::common::advised(o, e),
            None => e,
        };
        Failure::from(e.in_file(&file))
    };
    // Whether `o` goes out: not when it is no numbers, or unreadable and to be left out
    // (each said in a note naming the file that holds it, found only then).
    let kept = |holder: &dyn Fn() -> PathBuf, o: &ObjectView<'_>| {
        if o.skipped().is_none() && (o.defect.is_none() || !skip_unreadable) {
            return true;
        }
        let holder = holder();
        !crate::common::skip_with_note(&holder, o)
            && !crate::common::left_out_unreadable(&holder, o, skip_unreadable)
    };
    if let Target::SameShards(kind) = target {
        let set = open(input)?;
        let objects = set.objects().map_err(|e| Failure::Failed(e.into()))?;
        let shared = shared_attributes(&set, edits.changes, true)?;
        let attributes = crate::json::attributes_to_write(&shared, edits);
        // Objects come in name order; each goes to the group of the shard holding it.
        let shards: Vec<PathBuf> = set.shard_paths().map(Path::to_path_buf).collect();
        let mut groups: Vec<Vec<ObjectView<'_>>> = vec![Vec::new(); shards.len()];
        for o in objects {
            let position = set.shard_position(o.name());
            let holder = || {
                position
                    .and_then(|i| shards.get(i))
                    .map_or(input, |p| p)
                    .into()
            };
            if !kept(&holder, &o) {
                continue;
            }
            if let Some(group) = position.and_then(|i| groups.get_mut(i)) {
                group.push(cast_view(o, cast)?);
            }
        }
        groups.retain(|g| !g.is_empty());
        let options = IndexedOptions {
            max_shard_size: u64::MAX,
            kind,
            durability: durability(),
        };
        let metadata = index_metadata(&set);
        return set
            .with_read_ahead(|| {
                ztensor::convert::write_indexed_groups(
                    &groups,
                    &attributes,
                    &metadata,
                    output,
                    options,
                )
            })
            .map(drop)
            .map_err(|e| at(&groups.concat(), e));
    }
    // GGUF keeps the input's order, as llama.cpp's gguf-split keeps it (and the one-file
    // convert does); every other output takes objects in name order.
    let gguf = matches!(target, Target::Gguf { .. } | Target::GgufSplit { .. });
    let order = if gguf { Order::File } else { Order::Name };
    with_objects(
        input,
        true,
        order,
        edits.changes,
        |objects, attributes, metadata| {
            let mut attributes = crate::json::attributes_to_write(attributes, edits);
            if gguf {
                attributes = crate::common::gguf_attributes(input, attributes);
            }
            // The set is opened once for the notes' shard names, and only if one is said.
            let set = std::cell::OnceCell::new();
            let holder = |o: &ObjectView<'_>| -> PathBuf {
                let set = set.get_or_init(|| is_set(input).then(|| open_set(input).ok()).flatten());
                set.as_ref()
                    .and_then(|s: &ShardedSet| s.shard_of(o.name()))
                    .map_or_else(|| input.to_path_buf(), Path::to_path_buf)
            };
            let objects = objects
                .iter()
                .filter(|o| kept(&|| holder(o), o))
                .map(|&o| cast_view(o, cast))
                .collect::<Result<Vec<ObjectView<'_>>, Failure>>()?;
            write_target(&objects, &attributes, metadata, output, target, &|e| {
                at(&objects, e)
            })
        },
    )
}

/// Writes `objects` and `attributes` (and, for an index, `metadata`) as `target` says.
fn write_target(
    objects: &[ObjectView<'_>],
    attributes: &ztensor::Attributes,
    metadata: &ztensor::Attributes,
    output: &Path,
    target: Target,
    at: &dyn Fn(ztensor::Error) -> Failure,
) -> Outcome {
    match target {
        Target::Safetensors { densify } => ztensor::convert::write_safetensors_views(
            objects,
            (!attributes.is_empty()).then_some(attributes),
            output,
            densify,
            durability(),
        )
        .map_err(at),
        Target::Zt(options, densify) => {
            let mut w =
                Writer::create_version(output, options.version, durability()).map_err(at)?;
            w.set_attributes(attributes.clone());
            for o in objects {
                if densify {
                    ztensor::convert::copy_object_densified(*o, &mut w, options).map_err(at)?;
                } else {
                    ztensor::convert::copy_object(*o, &mut w, options).map_err(at)?;
                }
            }
            w.finish().map_err(at)
        }
        Target::ZtSharded(max_shard_size, options, densify) => {
            let options = ztensor::convert::ShardOptions {
                max_shard_size,
                convert: options,
                densify,
            };
            ztensor::convert::write_sharded_views(objects, output, options, attributes)
                .map(drop)
                .map_err(at)
        }
        Target::Mag(options) => {
            ztensor::convert::write_mag_views(objects, attributes, output, options).map_err(at)
        }
        Target::Gguf { densify } => {
            ztensor::convert::write_gguf_views(objects, attributes, output, densify, durability())
                .map_err(at)
        }
        Target::GgufSplit {
            max_split_size,
            densify,
            force,
        } => {
            // `model.gguf` names the splits `model-00001-of-0000N.gguf`.
            let prefix = match output.extension() {
                Some(e) if e.eq_ignore_ascii_case("gguf") => output.with_extension(""),
                _ => output.to_path_buf(),
            };
            let split = GgufSplit::plan(objects, attributes, prefix, max_split_size, densify)
                .map_err(at)?;
            for path in split.paths() {
                check_output(path, force)?;
            }
            split.write(durability()).map(drop).map_err(at)
        }
        Target::Indexed(max_shard_size, kind) => {
            let options = IndexedOptions {
                max_shard_size,
                kind,
                durability: durability(),
            };
            write_indexed(objects, attributes, metadata, output, options)
                .map(drop)
                .map_err(at)
        }
        // Handled above, before the objects are gathered.
        Target::SameShards(_) => Ok(()),
    }
}

/// The input file an error reading `input` belongs to: for a set, the shard that holds the
/// error's object (the index is read again: this runs once, on failure).
pub(crate) fn blamed_input(input: &Path, e: &ztensor::Error) -> PathBuf {
    let shard = || {
        let set = open_set(input).ok()?;
        set.shard_of(e.object()?).map(Path::to_path_buf)
    };
    match is_set(input).then(shard).flatten() {
        Some(shard) => shard,
        None => input.to_path_buf(),
    }
}

/// Whether `zt convert` goes through this module: a set as input, an index as output, or
/// `.safetensors` or `.gguf` output with `--shard-size` (which writes a set, or splits).
pub fn handles_convert(input: &Path, output: &Path, kind: Kind, shard_size: Option<u64>) -> bool {
    let sharded_file = matches!(kind, Kind::Safetensors | Kind::Gguf);
    is_set(input) || is_index_output(output) || (shard_size.is_some() && sharded_file)
}

/// `zt convert` for what [`handles_convert`] accepts; the arguments as `main` parsed them.
#[allow(clippy::too_many_arguments)]
pub fn convert_command(
    input: &Path,
    output: &Path,
    kind: Kind,
    version: Option<ztensor::Version>,
    shard_size: Option<u64>,
    compress: Option<i32>,
    digest: Option<DigestArg>,
    densify: bool,
    cast: Option<CastArg>,
    edits: crate::json::AttributeEdits<'_>,
    mag_version: MagVersion,
    force: bool,
    skip_unreadable: bool,
) -> Outcome {
    if !kind.is_zt() && (compress.is_some() || digest.is_some()) {
        return Err(Failure::Usage(
            "--compress and --digest apply to .zt output only".into(),
        ));
    }
    let zt_options = |version: ztensor::Version| ConvertOptions {
        compression: compress.map_or(Keep::Source, Keep::Always),
        digest: crate::common::digest_choice(digest),
        version,
        durability: durability(),
        ..Default::default()
    };
    let target = match (shard_size, kind) {
        (Some(size), Kind::Safetensors) => {
            Target::Indexed(size, ShardKind::Safetensors { densify })
        }
        (Some(max_split_size), Kind::Gguf) => Target::GgufSplit {
            max_split_size,
            densify,
            force,
        },
        (Some(size), _) if kind.is_zt() && is_index_output(output) => Target::Indexed(
            size,
            zt_shards(zt_options(version.unwrap_or_default()), densify),
        ),
        (Some(size), _) if kind.is_zt() => match version.unwrap_or_default() {
            v if v.is_v2() => Target::ZtSharded(size, zt_options(v), densify),
            _ => {
                return Err(Failure::Usage(
                    "--shard-size writes zTensor v2 only (a .zt output, not --to v1.2); name \
                     the output model.zt.index.json for v1.2 shards with an index"
                        .into(),
                ))
            }
        },
        (None, _) if is_index_output(output) && is_set(input) => match kind {
            Kind::Safetensors => Target::SameShards(ShardKind::Safetensors { densify }),
            _ if kind.is_zt() => {
                Target::SameShards(zt_shards(zt_options(version.unwrap_or_default()), densify))
            }
            _ => {
                return Err(Failure::Usage(
                    format!(
                        "a sharded set's shards are .zt or .safetensors, not {}",
                        kind.extension()
                    )
                    .into(),
                ))
            }
        },
        (None, _) if is_index_output(output) => {
            return Err(Failure::Usage(
                "an index as output needs --shard-size SIZE (or a set as input, whose \
                 shards it keeps)"
                    .into(),
            ))
        }
        (None, Kind::Safetensors) => Target::Safetensors { densify },
        (None, _) if kind.is_zt() => Target::Zt(zt_options(version.unwrap_or_default()), densify),
        (None, Kind::Mag) => Target::Mag(ztensor::convert::MagOptions {
            version: mag_version.into(),
            densify,
            durability: durability(),
        }),
        (None, Kind::Gguf) => Target::Gguf { densify },
        _ => {
            return Err(Failure::Usage(
                format!(
                    "{} output cannot be sharded (--shard-size): .zt, .safetensors and .gguf can",
                    kind.extension()
                )
                .into(),
            ))
        }
    };
    // Shards are named beside the output, on the disk: an input at a URL is never one.
    let on_disk = !names_a_url(input);
    match (&target, is_set(input)) {
        _ if !on_disk => {}
        (Target::ZtSharded(..), true) => {
            let set = open(input)?;
            refuse_own_shards_over(set.shard_paths(), output)?;
        }
        // New shards with an index: in place of the input's (the same index, with --force) is
        // resharding, whose files are all written before any replaces the old; any other
        // index's shards must not take an input's name.
        (Target::Indexed(..), set) => {
            let name = output
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let base = name.strip_suffix(".index.json").unwrap_or(name);
            if let Some((stem, extension)) = base.rsplit_once('.') {
                let index = indexed_output(output)?;
                if !set {
                    refuse_shards_over([input], output, stem, extension)?;
                } else {
                    let set = open(input)?;
                    if !same_file(set.index_path(), &index) {
                        refuse_shards_over(set.shard_paths(), output, stem, extension)?;
                    }
                }
            }
        }
        _ => {}
    }
    let index = match target {
        Target::Indexed(..) | Target::SameShards(_) => indexed_output(output)?,
        _ => output.to_path_buf(),
    };
    // GGUF splits check their own files, once their count is known.
    if !matches!(target, Target::GgufSplit { .. }) {
        check_output(&index, force)?;
    }
    convert(input, output, target, cast, edits, skip_unreadable)
}

/// Refuses v2's own shards of `output` (`<stem>-00001-of-0000N.zt` beside it) where an input
/// file has a name of that form: it would be replaced by a shard holding other objects (for
/// a set, under an index that still names it). `--force` does not change this: an input
/// would be lost, not an old output.
pub(crate) fn refuse_own_shards_over<'p>(
    inputs: impl IntoIterator<Item = &'p Path>,
    output: &Path,
) -> Outcome {
    match output.file_stem().and_then(|s| s.to_str()) {
        Some(stem) => refuse_shards_over(inputs, output, stem, "zt"),
        None => Ok(()),
    }
}

/// Refuses shards `<stem>-00001-of-0000N.<extension>` beside `output` where an input file
/// has a name of that form (see [`refuse_own_shards_over`]).
fn refuse_shards_over<'p>(
    inputs: impl IntoIterator<Item = &'p Path>,
    output: &Path,
    stem: &str,
    extension: &str,
) -> Outcome {
    let folder = |p: &Path| match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => std::fs::canonicalize(d).ok(),
        _ => std::fs::canonicalize(".").ok(),
    };
    let Some(out_dir) = folder(output) else {
        return Ok(());
    };
    // `<stem>-00001-of-00003.zt`: what the writers name shard 1 of 3.
    let a_shard_name = |name: &str| {
        let counts = name
            .strip_prefix(stem)
            .and_then(|n| n.strip_prefix('-'))
            .and_then(|n| n.strip_suffix(extension))
            .and_then(|n| n.strip_suffix('.'));
        let number = |n: &str| n.len() >= 5 && n.bytes().all(|b| b.is_ascii_digit());
        counts
            .and_then(|c| c.split_once("-of-"))
            .is_some_and(|(i, n)| number(i) && number(n))
    };
    let clash = inputs.into_iter().find(|input| {
        let name = input.file_name().and_then(|n| n.to_str());
        name.is_some_and(a_shard_name) && input.is_file() && folder(input) == Some(out_dir.clone())
    });
    match clash {
        Some(input) => Err(Failure::Usage(
            format!(
                "{}'s shards could take the name of the input {} and replace it; name the \
                 output otherwise",
                output.display(),
                input.display()
            )
            .into(),
        )),
        None => Ok(()),
    }
}

/// Whether `a` and `b` are one file (both exist and resolve to the same path).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// `.zt` shards of `options`, densified when asked.
fn zt_shards(options: ConvertOptions, densify: bool) -> ShardKind {
    if densify {
        ShardKind::ZtDensified(options)
    } else {
        ShardKind::Zt(options)
    }
}

/// The index a sharded output writes: OUT itself when it is one, else `OUT.index.json`.
fn indexed_output(output: &Path) -> Result<PathBuf, Failure> {
    if is_index_output(output) {
        return Ok(output.to_path_buf());
    }
    let mut name = output
        .file_name()
        .ok_or_else(|| Failure::Usage(format!("{}: no file name", output.display()).into()))?
        .to_os_string();
    name.push(".index.json");
    Ok(output.with_file_name(name))
}
