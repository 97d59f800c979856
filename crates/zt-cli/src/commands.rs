//! The commands. Each returns `Ok(())`, or a [`Failure`] that `main` turns into a message and
//! an exit status.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use serde_json::json;
use ztensor::{
    convert, ConvertOptions, DigestAlgorithm, ElementType, Format, Keep, MagOptions, ObjectInfo,
    ObjectView, Reader, Writer,
};

use crate::common::{
    advised, cast_view, durability, left_out_unreadable, merge_attributes, open_to_copy, out,
    printable, progress, skip_with_note, spinner, stdout_written, CastArg, DigestArg, Failure,
    Kind, MagVersion, Outcome,
};
use crate::json;
use crate::sets::Order;
use crate::slice_arg::SliceSpec;

fn open(path: &Path) -> Result<Reader, Failure> {
    crate::common::open_input(path).map_err(|e| Failure::Failed(e.in_file(path).into()))
}

/// [`advised`] for an error from a library call over many objects of `r`: the object it
/// names, looked up.
fn advised_by(r: &Reader, e: ztensor::Error) -> ztensor::Error {
    match e.object().and_then(|name| r.object(name).ok()) {
        Some(o) => advised(&o, e),
        None => e,
    }
}

/// `e`, from converting `r` (read from `input`) into `output`, as `zt` reports it: the
/// input's fault names the input, with the remedy for an unreadable object ([`advised_by`]);
/// anything else names the output.
fn conversion_failure(r: &Reader, input: &Path, output: &Path, e: ztensor::Error) -> Failure {
    let file = if ztensor::convert::inputs_fault(&e) {
        input
    } else {
        output
    };
    Failure::from(advised_by(r, e).in_file(file))
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS.get(u).unwrap_or(&"B"))
    }
}

fn type_name(o: &ObjectInfo) -> String {
    o.element_type()
        .map_or_else(|| "-".into(), |t| t.name().to_owned())
}

/// The bytes an object occupies in its file (or files, for pieces): what `info` shows and the
/// progress bars count.
fn stored_len(o: &ObjectInfo) -> u64 {
    o.components
        .iter()
        .map(|c| c.encoding.pieces_len().unwrap_or(c.length))
        .sum()
}

fn total_stored(r: &Reader) -> u64 {
    r.objects().iter().map(stored_len).sum()
}

/// Padding worth a word: below this a file's packing is not worth a note.
const NOTEWORTHY_PADDING: u64 = 16 << 20;

/// After a v2 file is written with 64 KiB packing (the original's default): a note when that
/// packing made it mostly padding, as for a model of many small tensors (20,000 tensors of
/// 256 bytes: a 1.3 GB file for 5 MB of data), naming the options that pack closer. The file
/// stays as written: it is valid, and what the original would write.
fn packing_note(output: &Path, version: ztensor::Version) {
    if version != ztensor::Version::V2 {
        return;
    }
    let Ok(len) = std::fs::metadata(output).map(|m| m.len()) else {
        return;
    };
    if len < NOTEWORTHY_PADDING {
        return;
    }
    // The manifest alone: what the objects store, against what the file takes.
    let Ok(written) = ztensor::open(output) else {
        return;
    };
    let data = total_stored(&written);
    let padding = len.saturating_sub(data);
    if padding >= NOTEWORTHY_PADDING && padding > data {
        crate::common::note(format!(
            "{} takes {} for {} of data in {} objects: v2 puts each blob on a 64 KiB \
             boundary, as the original does; --compact (compact=True from Python) packs them \
             on 4 KiB boundaries, --to v1.2 on 64 bytes",
            output.display(),
            human_bytes(len),
            human_bytes(data),
            written.len()
        ));
    }
}

/// `n` things as a person reads a parameter count: exact below 10,000, else to three
/// significant figures in thousands, millions, billions or trillions.
fn human_count(n: u64, noun: &str) -> String {
    const SCALES: [(f64, &str); 4] = [
        (1e12, "trillion"),
        (1e9, "billion"),
        (1e6, "million"),
        (1e3, "thousand"),
    ];
    if n < 10_000 {
        return crate::common::count(n, noun);
    }
    let x = n as f64;
    let (scale, word) = SCALES
        .into_iter()
        .find(|(scale, _)| x >= *scale)
        .unwrap_or((1e3, "thousand"));
    let v = x / scale;
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {word} {noun}s")
}

pub fn info(path: &Path, as_json: bool) -> Outcome {
    let r = open(path)?;
    if as_json {
        let mut buf = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        return stdout_written(
            json::write_info(&r, path, &mut buf)
                .map_err(std::io::Error::from)
                .and_then(|_| std::io::Write::flush(&mut buf)),
        );
    }
    let mut s = String::new();
    let total: u64 = r.objects().iter().map(stored_len).sum();
    let _ = writeln!(
        s,
        "{}: {}, {}, {}, {} of data",
        path.display(),
        r.version(),
        crate::common::count(r.objects().len() as u64, "object"),
        human_count(crate::common::element_count(r.objects()), "element"),
        human_bytes(total)
    );
    for (k, v) in r.attributes() {
        let _ = writeln!(
            s,
            "  @{} = {}",
            printable(k),
            shortened(&json::value(v).to_string())
        );
    }
    if r.objects().len() > 20 {
        // A summary first: what kinds of objects, and how much of each.
        let mut kinds: BTreeMap<(String, String), (usize, u64)> = BTreeMap::new();
        for o in r.objects() {
            let e = kinds
                .entry((o.format.name().to_owned(), type_name(o)))
                .or_default();
            e.0 += 1;
            e.1 += stored_len(o);
        }
        let _ = writeln!(s, "summary:");
        for ((format, ty), (n, bytes)) in &kinds {
            let _ = writeln!(s, "  {n:>8} {format:<16} {ty:<12} {}", human_bytes(*bytes));
        }
    }
    let header = ["name", "format", "type", "shape", "stored", "encoding"];
    // Two passes over the listing: the first measures the columns, the second writes each row
    // as it is made. The table held whole (its cells twice, then the text) cost about 1 KB per
    // object: for a file of 1,000,000 objects, more memory than its listing.
    let mut width = header.map(|h| h.chars().count());
    for o in r.objects() {
        for (w, c) in width.iter_mut().zip(info_cells(o)) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |w: &mut dyn std::io::Write, row: [&str; 6]| {
        let [name, format, ty, shape, stored, enc] = row;
        let l = format!(
            "{} {} {} {} {}  {}",
            pad(name, width[0]),
            pad(format, width[1]),
            pad(ty, width[2]),
            pad(shape, width[3]),
            pad_left(stored, width[4]),
            enc
        );
        writeln!(w, "{}", l.trim_end())
    };
    let mut table = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let written = (|| -> std::io::Result<()> {
        use std::io::Write as _;
        table.write_all(s.as_bytes())?;
        line(&mut table, header)?;
        for o in r.objects() {
            let cells = info_cells(o);
            line(&mut table, cells.each_ref().map(String::as_str))?;
            // Object attributes under their object (a PyTorch tensor's storage shows which
            // tensors share one).
            for (k, v) in &o.attributes {
                writeln!(
                    table,
                    "    @{} = {}",
                    printable(k),
                    fit(&json::value(v).to_string(), MAX_COLUMN)
                )?;
            }
            if let Some(d) = &o.defect {
                writeln!(table, "    unreadable: {}", printable(&d.to_string()))?;
            }
        }
        table.flush()
    })();
    stdout_written(written)
}

/// One row of `zt info`'s table, each cell cut to [`MAX_COLUMN`].
fn info_cells(o: &ObjectInfo) -> [String; 6] {
    let enc: Vec<String> = o
        .components
        .iter()
        .map(|c| {
            let d = c
                .digest
                .map(|d| format!(" {}", d.algorithm().name()))
                .unwrap_or_default();
            if o.components.len() == 1 {
                format!("{}{d}", c.encoding)
            } else {
                format!("{}:{}({}){d}", c.role, c.encoding, c.element.name())
            }
        })
        .collect();
    [
        o.name.clone(),
        o.format.name().to_owned(),
        type_name(o),
        format!("{:?}", o.shape),
        human_bytes(stored_len(o)),
        enc.join(", "),
    ]
    .map(|c| fit(&printable(&c), MAX_COLUMN))
}

/// The widest a column of `zt info`'s table grows.
const MAX_COLUMN: usize = 80;

/// `s` if it has at most `max` characters; otherwise its start and end around an ellipsis.
fn fit(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    let keep = max.saturating_sub(1);
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let mut t: String = s.chars().take(head).collect();
    t.push('…');
    t.extend(s.chars().skip(n - tail));
    t
}

fn pad(s: &str, width: usize) -> String {
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(width.saturating_sub(n)))
}

fn pad_left(s: &str, width: usize) -> String {
    let n = s.chars().count();
    format!("{}{s}", " ".repeat(width.saturating_sub(n)))
}

pub fn ls(path: &Path) -> Outcome {
    let r = open(path)?;
    let mut s = String::with_capacity(r.objects().len() * 16);
    for n in r.names() {
        s.push_str(&printable(n));
        s.push('\n');
    }
    out(&s)
}

/// The table view keeps attribute lines readable: a GGUF vocabulary or chat template runs to
/// megabytes. Longer values show their start and their length (`--json` gives them whole).
fn shortened(json: &str) -> String {
    const MAX: usize = 160;
    if json.len() <= MAX {
        return json.to_owned();
    }
    let mut cut = MAX;
    while !json.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}... ({} bytes of JSON; --json for all)",
        &json[..cut],
        json.len()
    )
}

/// What `zt cat` writes of an object.
pub enum CatWhat<'a> {
    /// Its dense form (a dense object's data; sparse and quantized objects only with --json).
    Dense,
    /// One component's elements.
    Component(&'a str),
    /// A quantized object's values as f32.
    Dequantized,
    /// A box of a dense object's values.
    Slice(&'a SliceSpec),
}

pub fn cat(path: &Path, name: &str, what: CatWhat<'_>, as_json: bool) -> Outcome {
    if crate::sets::is_set(path) {
        let set = crate::sets::open(path)?;
        let o = set.object(name).map_err(|e| e.in_file(path))?;
        return cat_object(path, o, what, as_json);
    }
    let r = open(path)?;
    let o = r.object(name).map_err(|e| e.in_file(path))?;
    cat_object(path, o, what, as_json)
}

/// `cat` of one object, of a file or of a set.
fn cat_object(path: &Path, o: ObjectView<'_>, what: CatWhat<'_>, as_json: bool) -> Outcome {
    // An unreadable object: why, before any word about its format.
    o.readable().map_err(|e| e.in_file(path))?;
    let name = o.name();
    let quantized = o.ggml_type().is_some() || o.format == Format::QuantizedGroup;
    let component = match what {
        CatWhat::Component(role) => Some(role),
        _ => None,
    };
    let (bytes, ty, shape) = match what {
        CatWhat::Slice(spec) => {
            if o.format != Format::Dense {
                return Err(Failure::Usage(
                    format!(
                        "object {name:?} is {}: only dense objects can be sliced",
                        o.format
                    )
                    .into(),
                ));
            }
            let picked = spec
                .resolve(&o.shape)
                .map_err(|m| Failure::Usage(format!("object {name:?}: {m}").into()))?;
            let ty = o
                .component("data")
                .map_err(|e| e.in_file(path))?
                .element
                .clone();
            let packed = ty.logical.as_ref().and_then(|t| t.packed_bits());
            if let (Some(bits), true) = (packed, picked.has_steps()) {
                // The picks of a step would be codes inside bytes: a box of bytes is all a
                // slice of packed elements gives.
                return Err(Failure::Usage(
                    format!(
                        "object {name:?}: a --slice with steps is not taken for {bits}-bit \
                         packed elements; slice without steps, on byte boundaries"
                    )
                    .into(),
                ));
            }
            let mut b = o.slice_bytes(&picked.ranges).map_err(|e| e.in_file(path))?;
            if picked.has_steps() {
                // The library read the box from the first pick to the last; keep the picks.
                let size = usize::try_from(ty.logical_size()).unwrap_or(usize::MAX);
                let kept = picked.keep_steps(&b, size).ok_or_else(|| {
                    Failure::Failed(
                        format!("object {name:?}: the slice read is not its box").into(),
                    )
                })?;
                b = kept.into();
            }
            (b, ty, picked.shape())
        }
        CatWhat::Component(role) => {
            // The library's error: a missing role (NotFound, a usage error) names the roles
            // there are; an unreadable object says why.
            let c = o.component(role).map_err(|e| e.in_file(path))?;
            let b = c.bytes().map_err(|e| e.in_file(path))?;
            // A part of packed sub-byte elements is given as its stored bytes.
            let element = match c.element.logical.as_ref().and_then(|t| t.packed_bits()) {
                Some(_) => ztensor::ElementType::plain(c.element.dtype),
                None => c.element.clone(),
            };
            let n = b.len() as u64 / element.logical_size();
            (b, element, vec![n])
        }
        CatWhat::Dequantized => {
            if !quantized {
                return Err(Failure::Usage(
                    format!(
                    "object {name:?} is {}, not quantized: --dequantize is for GGUF block types \
                     and quantized_group objects",
                    o.format
                )
                    .into(),
                ));
            }
            // A quantized object's dense form is its f32 values, little-endian.
            let (b, f32) = o.dense_form().map_err(|e| e.in_file(path))?;
            (b, f32, o.shape.to_vec())
        }
        CatWhat::Dense => {
            if crate::common::has_no_dense_form(&o) {
                // A layout read structurally (`x.custom/1`, `zt.mx/1`, ...): its parts are
                // all there is to give.
                let roles: Vec<&str> = o.components().map(|c| c.info().role.as_ref()).collect();
                return Err(Failure::Usage(
                    format!(
                        "object {name:?} is {}, which has no dense form here; --component ROLE \
                         gives a part's bytes (its parts: {})",
                        o.format,
                        roles.join(", ")
                    )
                    .into(),
                ));
            }
            if !as_json && o.format != Format::Dense {
                let hint = if quantized {
                    "use --dequantize for f32 values, --component data for its blocks, or --json"
                } else {
                    "use --component ROLE for raw bytes or --json for dense values"
                };
                return Err(Failure::Usage(
                    format!("object {name:?} is {}; {hint}", o.format).into(),
                ));
            }
            let (b, ty) = o.dense_form().map_err(|e| e.in_file(path))?;
            // A type unknown here holds what its writer gave it, whatever the shape says (v2
            // never judges its size): the shape given is the elements there are, as ztio's.
            let count = o.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
            let size = ty.logical_size().max(1);
            let unknown = matches!(ty.logical, Some(ztensor::LogicalType::Unknown(_)));
            let shape =
                if unknown && count.and_then(|n| n.checked_mul(size)) != Some(b.len() as u64) {
                    vec![b.len() as u64 / size]
                } else {
                    o.shape.to_vec()
                };
            (b, ty, shape)
        }
    };
    if as_json {
        let j = json!({
            "schema": "zt.cat/1",
            "file": path.to_string_lossy(),
            "name": name,
            "component": component,
            "shape": shape,
            "dtype": ty.dtype.name(),
            "type": ty.type_field(),
            "values": json::elements(&bytes, &ty, shape.iter().fold(1u64, |n, &d| n.saturating_mul(d))),
        });
        return out(&format!("{j}\n"));
    }
    if std::io::stdout().is_terminal() {
        return Err(Failure::Usage("refusing to write binary data to a terminal: redirect it (zt cat F N > out.bin) or use --json".into()));
    }
    let mut o = std::io::stdout().lock();
    stdout_written(
        std::io::Write::write_all(&mut o, &bytes).and_then(|_| std::io::Write::flush(&mut o)),
    )
}

/// Everything `verify` found in one file.
struct Checked {
    objects: usize,
    checked: usize,
    failures: Vec<ztensor::Error>,
    /// Objects passed over (not numbers we decode), with why.
    skipped: Vec<(String, String)>,
    version: String,
    /// `kind` and `version` as `info --json` gives them.
    kind: &'static str,
    json_version: String,
}

fn verify_one(path: &Path) -> Result<Checked, ztensor::Error> {
    let r = crate::common::open_input(path).map_err(|e| e.in_file(path))?;
    verify_reader(&r)
}

/// Checks every digest of `r`, then decodes every object.
fn verify_reader(r: &ztensor::Reader) -> Result<Checked, ztensor::Error> {
    // The digests are checked in one parallel call that reports each object as it is done;
    // then a bar follows the decoding, object by object.
    let checking = progress(total_stored(r), "verify: digests");
    let report = r.verify_with_progress(&|n| checking.inc(n));
    checking.finish_and_clear();
    let bar = progress(total_stored(r), "verify: decode");
    let mut failures = report.failures;
    let skipped = report.skipped;
    // A .mag CRC was checked when the file was opened.
    let mag_crc = matches!(r.version(), ztensor::FileVersion::Mag(l) if !matches!(l, ztensor::mag::Layout::GenA | ztensor::mag::Layout::V300));
    // Objects listed with a defect are passed over: `verify` above reported the unreadable
    // ones, and noted the rest as skipped.
    for o in r.iter().filter(|o| o.defect.is_none()) {
        // Every digest was checked above: the decoding need not hash again.
        if let Err(e) = decode_all(o.with_checks(ztensor::Verify::Never)) {
            failures.push(e);
        }
        bar.inc(stored_len(&o));
    }
    bar.finish_and_clear();
    Ok(Checked {
        objects: r.objects().len(),
        // So was a v2 manifest hash.
        checked: report.checked + usize::from(mag_crc) + usize::from(r.manifest_hash().is_some()),
        failures,
        skipped,
        version: r.version().to_string(),
        kind: r.version().kind(),
        json_version: json::version(r.version()),
    })
}

/// Decodes every component and applies every data rule (sparse indices, bool bytes). A
/// strided view (a broadcast) is not materialized: that its elements lie in their storage is
/// checked from its strides.
fn decode_all(o: ObjectView<'_>) -> ztensor::Result<()> {
    for c in o.components() {
        match &c.arrangement {
            Some(a) if !a.strides.is_empty() => strides_fit(a, c.element.logical_size())
                .map_err(|e| e.in_component(&c.role).in_object(o.name()))?,
            _ => {
                c.bytes()?;
            }
        }
    }
    let complex = o.element_type().is_some_and(|t| t.ratio() == 2);
    match o.format {
        Format::Dense if o.element_type().map(ElementType::name) == Some("bool") => {
            o.read_bool().map(drop)
        }
        Format::SparseCsr | Format::SparseCoo | Format::QuantizedGroup if !complex => {
            o.read_f32().map(drop)
        }
        _ => Ok(()),
    }
}

/// Whether the last element a strided view reaches lies inside its span, as a gather would
/// find: `(sum((dim - 1) * stride) + 1) * size <= span`, in checked arithmetic.
fn strides_fit(a: &ztensor::Arrangement, size: u64) -> ztensor::Result<()> {
    if a.dims.contains(&0) {
        return Ok(());
    }
    let last = a
        .dims
        .iter()
        .zip(&a.strides)
        .try_fold(0u64, |acc, (&d, &s)| {
            (d - 1).checked_mul(s)?.checked_add(acc)
        });
    let end = last
        .and_then(|l| l.checked_add(1))
        .and_then(|n| n.checked_mul(size));
    match end {
        Some(end) if end <= a.span => Ok(()),
        _ => Err(ztensor::Error::invalid(
            "elements lie past the end of their storage",
        )),
    }
}

pub fn verify(files: &[PathBuf], as_json: bool) -> Outcome {
    let mut all_ok = true;
    let mut rows = Vec::new();
    let mut text = String::new();
    let mut report = |f: &Path, checked: Result<Checked, ztensor::Error>| match checked {
        Ok(c) => {
            let ok = c.failures.is_empty();
            all_ok &= ok;
            let _ = writeln!(
                text,
                "{}: {} ({}, {} decoded, {} and checksums verified)",
                f.display(),
                if ok { "OK" } else { "FAILED" },
                c.version,
                crate::common::count(c.objects as u64, "object"),
                crate::common::count(c.checked as u64, "digest")
            );
            for e in &c.failures {
                let _ = writeln!(text, "  {}", printable(&e.to_string()));
            }
            for (name, why) in &c.skipped {
                let line = format!("  skipped: object {name:?}: {why}");
                let _ = writeln!(text, "{}", printable(&line));
            }
            rows.push(json!({
                "file": f.to_string_lossy(), "ok": ok, "kind": c.kind, "version": c.json_version,
                "object_count": c.objects,
                "digests_checked": c.checked,
                "failures": c.failures.iter().map(|e| error_json(e, Some(f))).collect::<Vec<_>>(),
                "skipped": c.skipped.iter().map(|(n, why)| json!({"name": n, "reason": why})).collect::<Vec<_>>(),
            }));
        }
        Err(e) => {
            all_ok = false;
            let _ = writeln!(
                text,
                "{}: FAILED\n  {}",
                f.display(),
                printable(&e.to_string())
            );
            // A set that failed its own check has no kind of file: it is reported as a set.
            let kind = crate::sets::is_set(f).then_some("sharded_set");
            rows.push(json!({
                "file": f.to_string_lossy(), "ok": false, "kind": kind, "version": null, "object_count": null,
                "digests_checked": null, "failures": [error_json(&e, Some(f))],
            }));
        }
    };
    for f in files {
        if !crate::sets::is_set(f) {
            report(f, verify_one(f));
            continue;
        }
        // A set is checked as a whole (every shard opened, every name where the index says),
        // then each shard as a file, in order, while the set is read ahead beside the checks.
        match crate::sets::open_checked(f) {
            Ok(set) => set.with_read_ahead(|| {
                for (position, shard) in set.shard_paths().enumerate() {
                    let checked = set.reader(position).and_then(verify_reader);
                    report(shard, checked.map_err(|e| e.in_file(shard)));
                }
            }),
            Err(e) => report(f, Err(e)),
        }
    }
    out(&if as_json {
        let j = json!({ "schema": "zt.verify/1", "ok": all_ok, "results": rows });
        format!("{j}\n")
    } else {
        text
    })?;
    if all_ok {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

/// The one shape of an error in every command's JSON (docs/cli.md).
/// `file` names the file when the error does not.
pub(crate) fn error_json(e: &ztensor::Error, file: Option<&Path>) -> serde_json::Value {
    json!({
        "error_kind": format!("{:?}", e.kind()),
        "message": e.message(),
        "file": e.path().or(file).map(|p| p.to_string_lossy()),
        "name": e.object(),
        "component": e.component(),
        "offset": e.offset(),
    })
}

#[allow(clippy::too_many_arguments)]
pub fn convert(
    input: &Path,
    output: &Path,
    kind: Kind,
    version: Option<ztensor::Version>,
    compress: Option<i32>,
    digest: Option<DigestArg>,
    mag_version: MagVersion,
    densify: bool,
    cast: Option<CastArg>,
    edits: json::AttributeEdits<'_>,
    skip_unreadable: bool,
) -> Outcome {
    if !kind.is_zt() && (compress.is_some() || digest.is_some()) {
        return Err(Failure::Usage(
            "--compress and --digest apply to .zt output only".into(),
        ));
    }
    let r = open_to_copy(input)?;
    // The objects written: all but the skipped (not numbers) and, when asked, the unreadable;
    // each left out is named once, here.
    let left_out =
        |o: &ObjectInfo| o.skipped().is_some() || (skip_unreadable && o.defect.is_some());
    let mut views = Vec::with_capacity(r.len());
    for o in r.iter() {
        if !skip_with_note(input, &o) && !left_out_unreadable(input, &o, skip_unreadable) {
            views.push(cast_view(o, cast)?);
        }
    }
    let in_file = |e| conversion_failure(&r, input, output, e);
    match kind {
        Kind::Mag => {
            let version = mag_version.into();
            // The library writes the whole file in one call: a spinner, not a byte count.
            let bar = spinner("convert to .mag", total_stored(&r));
            let done = convert::write_mag_views(
                &views,
                &json::attributes_to_write(r.attributes(), edits),
                output,
                MagOptions {
                    version,
                    densify,
                    durability: durability(),
                },
            );
            bar.finish_and_clear();
            done.map_err(in_file)
        }
        Kind::Safetensors => {
            let bar = spinner("convert to .safetensors", total_stored(&r));
            let attributes = json::attributes_to_write(r.attributes(), edits);
            // An empty `__metadata__` map stays one, as safetensors tells it from none.
            let keep_map = !attributes.is_empty() || r.has_empty_metadata();
            let done = convert::write_safetensors_views(
                &views,
                keep_map.then_some(&attributes),
                output,
                densify,
                durability(),
            );
            bar.finish_and_clear();
            done.map_err(in_file)
        }
        Kind::Gguf => {
            let bar = spinner("convert to .gguf", total_stored(&r));
            let attributes = json::attributes_to_write(r.attributes(), edits);
            let attributes = crate::common::gguf_attributes(input, attributes);
            let done =
                convert::write_gguf_views(&views, &attributes, output, densify, durability());
            bar.finish_and_clear();
            done.map_err(in_file)
        }
        Kind::Zt | Kind::V2 | Kind::V1_2 => {
            let version = version.unwrap_or_default();
            let opts = ConvertOptions {
                compression: compress.map_or(Keep::Source, Keep::Always),
                digest: crate::common::digest_choice(digest),
                version,
                ..Default::default()
            };
            let mut w = Writer::create_version(output, version, durability()).map_err(in_file)?;
            w.set_attributes(json::attributes_to_write(r.attributes(), edits).into_owned());
            let bar = progress(total_stored(&r), "convert");
            for o in in_write_order(&r, version) {
                let o = cast_view(o.map_err(in_file)?, cast)?;
                if left_out(&o) {
                    continue;
                }
                if densify {
                    convert::copy_object_densified(o, &mut w, opts).map_err(in_file)?;
                } else {
                    convert::copy_object(o, &mut w, opts).map_err(in_file)?;
                }
                bar.inc(stored_len(&o));
            }
            bar.finish_and_clear();
            w.finish().map_err(in_file)?;
            packing_note(output, version);
            Ok(())
        }
    }
}

/// `zt convert --shard-size`: a sharded v2 model.
#[allow(clippy::too_many_arguments)] // the command's options, as `main` parsed them
pub fn convert_sharded(
    input: &Path,
    output: &Path,
    version: Option<ztensor::Version>,
    max_shard_size: u64,
    compress: Option<i32>,
    digest: Option<DigestArg>,
    densify: bool,
    cast: Option<CastArg>,
    edits: json::AttributeEdits<'_>,
    skip_unreadable: bool,
) -> Outcome {
    let version = match version {
        Some(v) if v.is_v2() => v,
        _ => {
            return Err(Failure::Usage(
                "--shard-size writes zTensor v2 only (a .zt output, not --to v1.2)".into(),
            ))
        }
    };
    crate::sets::refuse_own_shards_over([input], output)?;
    let r = open_to_copy(input)?;
    for o in r.objects() {
        left_out_unreadable(input, o, skip_unreadable);
    }
    let options = ztensor::convert::ShardOptions {
        max_shard_size,
        convert: ConvertOptions {
            version,
            durability: durability(),
            compression: compress.map_or(Keep::Source, Keep::Always),
            digest: match digest {
                Some(DigestArg::Sha256) => Keep::Always(DigestAlgorithm::Sha256),
                Some(DigestArg::Crc32c) => Keep::Always(DigestAlgorithm::Crc32c),
                _ => Keep::Source,
            },
            skip_unreadable,
            ..Default::default()
        },
        densify,
    };
    let bar = spinner("convert to sharded .zt", total_stored(&r));
    let attributes = json::attributes_to_write(r.attributes(), edits);
    let mut views = Vec::with_capacity(r.len());
    for o in r.objects() {
        views.push(cast_view(r.object(&o.name).map_err(Failure::from)?, cast)?);
    }
    let done = ztensor::convert::write_sharded_views(&views, output, options, &attributes);
    bar.finish_and_clear();
    done.map(|_| ())
        .map_err(|e| conversion_failure(&r, input, output, e))
}

/// The objects of `r` in the order a file of `version` gets them: v2 in bytewise name order
/// (so raw output is in the canonical form), v1.2 in the reader's order.
fn in_write_order(
    r: &Reader,
    version: ztensor::Version,
) -> impl Iterator<Item = ztensor::Result<ztensor::ObjectView<'_>>> {
    let mut names: Vec<&str> = r.names().collect();
    if version.is_v2() {
        names.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    }
    names.into_iter().map(|n| r.object(n))
}

pub fn upgrade(
    input: &Path,
    output: &Path,
    version: ztensor::Version,
    skip_unreadable: bool,
) -> Outcome {
    // What `ztensor::upgrade` does (`copy_into`), object by object so the bar can follow: it
    // writes every object or fails, or with `skip_unreadable` leaves out, naming each, the
    // objects listed as unreadable. A set's objects all go into the one file, as `convert`
    // puts them.
    let order = if version.is_v2() {
        Order::Name
    } else {
        Order::File
    };
    crate::sets::with_objects(input, true, order, &[], |objects, attributes, _| {
        let mut w = Writer::create_version(output, version, durability())?;
        w.set_attributes(attributes.clone());
        let bar = progress(objects.iter().map(|o| stored_len(o)).sum(), "upgrade");
        let opts = ConvertOptions {
            version,
            ..Default::default()
        };
        for o in objects {
            if skip_with_note(input, o) || left_out_unreadable(input, o, skip_unreadable) {
                continue;
            }
            convert::copy_object(*o, &mut w, opts).map_err(|e| in_input(input, advised(o, e)))?;
            bar.inc(stored_len(o));
        }
        bar.finish_and_clear();
        w.finish()?;
        packing_note(output, version);
        Ok(())
    })
}

/// `e`, from reading `input` (a file, or a set: then the shard holding the object), named
/// after it.
fn in_input(input: &Path, e: ztensor::Error) -> ztensor::Error {
    let file = crate::sets::blamed_input(input, &e);
    e.in_file(&file)
}

/// One input of `merge`: a file, or a set checked as a whole (its shards are its parts).
enum MergeInput {
    File(PathBuf, Box<Reader>),
    Set(Box<ztensor::ShardedSet>),
}

/// `zt merge`: every object of every input, in input order (a set's shards in index order,
/// each file's objects in file order), into one new file. A set is read ahead beside the copy,
/// as `convert` reads one. The inputs' file attributes must agree, but for the keys `changes`
/// sets or unsets (`--set`, `--unset`), which the output takes from it.
pub fn merge(
    inputs: &[PathBuf],
    output: &Path,
    version: ztensor::Version,
    changes: &[crate::json::AttributeChange],
    skip_unreadable: bool,
) -> Outcome {
    let opened: Vec<MergeInput> = inputs
        .iter()
        .map(|p| {
            if crate::sets::is_set(p) {
                crate::sets::open_checked(p)
                    .map(|set| MergeInput::Set(Box::new(set)))
                    .map_err(|e| Failure::Failed(e.into()))
            } else {
                open_to_copy(p).map(|r| MergeInput::File(p.clone(), Box::new(r)))
            }
        })
        .collect::<Result<_, _>>()?;
    // Each input's parts: (file, reader), a set's shards through the set's own readers.
    let mut groups: Vec<Vec<(&Path, &Reader)>> = Vec::with_capacity(opened.len());
    for input in &opened {
        groups.push(match input {
            MergeInput::File(p, r) => vec![(p.as_path(), r)],
            MergeInput::Set(set) => set
                .shard_paths()
                .enumerate()
                .map(|(i, p)| set.reader(i).map(|r| (p, r)))
                .collect::<Result<_, _>>()
                .map_err(|e| Failure::Failed(e.into()))?,
        });
    }
    let mut owner: BTreeMap<&str, &Path> = BTreeMap::new();
    let mut attributes = ztensor::Attributes::new();
    for &(p, r) in groups.iter().flatten() {
        for n in r.names() {
            if let Some(first) = owner.insert(n, p) {
                return Err(Failure::Failed(
                    format!(
                        "object {n:?} is in both {} and {}; names must not clash",
                        first.display(),
                        p.display()
                    )
                    .into(),
                ));
            }
        }
    }
    for (input, parts) in opened.iter().zip(&groups) {
        match input {
            // A split GGUF model's splits each say where they are; the model's metadata is
            // the set's.
            MergeInput::Set(model) if model.is_gguf_split() => {
                let metadata = crate::json::unless_changed(model.metadata(), changes);
                merge_attributes(&mut attributes, &metadata, "inputs", model.index_path())?
            }
            _ => {
                for &(p, r) in parts {
                    let own = crate::json::unless_changed(r.attributes(), changes);
                    merge_attributes(&mut attributes, &own, "inputs", p)?;
                }
            }
        }
    }
    json::apply_changes(&mut attributes, changes);
    let mut w = Writer::create_version(output, version, durability())?;
    w.set_attributes(attributes);
    let total = groups.iter().flatten().map(|(_, r)| total_stored(r)).sum();
    let bar = progress(total, "merge");
    let mut copy = |parts: &[(&Path, &Reader)]| -> Result<(), ztensor::Error> {
        for &(p, r) in parts {
            for o in r.iter() {
                if skip_with_note(p, &o) || left_out_unreadable(p, &o, skip_unreadable) {
                    continue;
                }
                convert::copy_stored(o, &mut w).map_err(|e| advised(&o, e).in_file(p))?;
                bar.inc(stored_len(&o));
            }
        }
        Ok(())
    };
    for (input, parts) in opened.iter().zip(&groups) {
        match input {
            MergeInput::File(..) => copy(parts)?,
            MergeInput::Set(set) => set.with_read_ahead(|| copy(parts))?,
        }
    }
    bar.finish_and_clear();
    w.finish()?;
    packing_note(output, version);
    Ok(())
}

/// `zt rm`: the input (a file, or a set's objects into one file) without `names`, each of
/// which it must hold, the rest in the input's order.
pub fn rm(input: &Path, names: &[String], output: &Path, version: ztensor::Version) -> Outcome {
    crate::sets::with_objects(input, true, Order::File, &[], |objects, attributes, _| {
        // A set, not the list: `names.contains` per object made removing 20,000 names from
        // a file of 100,000 objects take 10 s.
        let removed: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
        let held: std::collections::HashSet<&str> = objects.iter().map(|o| o.name()).collect();
        if let Some(absent) = names.iter().find(|n| !held.contains(n.as_str())) {
            let mut message = format!("no object named {absent:?}");
            let names = objects.iter().map(|o| o.name());
            if let Some(near) = ztensor::nearest_name(absent, names) {
                message = format!("{message}; did you mean {near:?}?");
            }
            let e = ztensor::Error::not_found(message);
            return Err(e.in_file(input).into());
        }
        let kept = |o: &&ObjectView<'_>| !removed.contains(o.name());
        let mut w = Writer::create_version(output, version, durability())?;
        w.set_attributes(attributes.clone());
        let bar = progress(
            objects.iter().filter(kept).map(|o| stored_len(o)).sum(),
            "rm",
        );
        for o in objects.iter().filter(kept) {
            if skip_with_note(input, o) {
                continue;
            }
            convert::copy_stored(*o, &mut w).map_err(|e| in_input(input, e))?;
            bar.inc(stored_len(o));
        }
        bar.finish_and_clear();
        w.finish()?;
        packing_note(output, version);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::human_count;

    #[test]
    fn parameter_counts_read_as_people_say_them() {
        assert_eq!(human_count(1, "element"), "1 element");
        assert_eq!(human_count(9_999, "element"), "9999 elements");
        assert_eq!(human_count(10_000, "element"), "10.0 thousand elements");
        assert_eq!(human_count(124_439_808, "element"), "124 million elements");
        assert_eq!(
            human_count(7_241_732_096, "element"),
            "7.24 billion elements"
        );
        assert_eq!(
            human_count(u64::MAX, "element"),
            "18446744 trillion elements"
        );
    }
}
