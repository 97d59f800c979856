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

use crate::{json, out, progress, DigestArg, Failure, Kind, MagVersion, Outcome};

fn open(path: &Path) -> Result<Reader, Failure> {
    ztensor::open(path).map_err(|e| Failure::Failed(e.in_file(path).to_string()))
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

fn stored_len(o: &ObjectInfo) -> u64 {
    o.components.iter().map(|c| c.length).sum()
}

pub fn info(path: &Path, as_json: bool) -> Outcome {
    let r = open(path)?;
    if as_json {
        let mut buf = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        return match json::write_info(&r, &mut buf)
            .and_then(|_| std::io::Write::flush(&mut buf).map_err(serde_json::Error::io))
        {
            Ok(()) => Ok(()),
            Err(e) if e.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe) => Ok(()),
            Err(e) => Err(Failure::Failed(format!("cannot write to stdout: {e}"))),
        };
    }
    let mut s = String::new();
    let total: u64 = r.objects().iter().map(stored_len).sum();
    let _ = writeln!(
        s,
        "{}: {}, {} objects, {} of data",
        path.display(),
        r.version(),
        r.objects().len(),
        human_bytes(total)
    );
    for (k, v) in r.attributes() {
        let _ = writeln!(s, "  @{k} = {}", json::value(v));
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
    let _ = writeln!(
        s,
        "{:<32} {:<16} {:<12} {:<20} {:>12}  encoding",
        "name", "format", "type", "shape", "stored"
    );
    for o in r.objects() {
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
        let _ = writeln!(
            s,
            "{:<32} {:<16} {:<12} {:<20} {:>12}  {}",
            o.name,
            o.format.name(),
            type_name(o),
            format!("{:?}", o.shape),
            human_bytes(stored_len(o)),
            enc.join(", ")
        );
        if let Some(d) = &o.defect {
            let _ = writeln!(s, "    unreadable: {d}");
        }
    }
    out(&s)
}

pub fn ls(path: &Path) -> Outcome {
    let r = open(path)?;
    let mut s = String::with_capacity(r.objects().len() * 16);
    for n in r.names() {
        s.push_str(n);
        s.push('\n');
    }
    out(&s)
}

pub fn cat(path: &Path, name: &str, component: Option<&str>, as_json: bool) -> Outcome {
    let r = open(path)?;
    let o = r.object(name).map_err(|e| e.in_file(path))?;
    let (bytes, ty, shape) = match component {
        Some(role) => {
            let c = o.component(role).map_err(|_| {
                Failure::Usage(format!("object {name:?} has no component {role:?}"))
            })?;
            let b = c.bytes().map_err(|e| e.in_file(path))?;
            let n = b.len() as u64 / c.element.logical_size();
            (b, c.element.clone(), vec![n])
        }
        None => {
            if !as_json && o.format != Format::Dense {
                return Err(Failure::Usage(format!(
                    "object {name:?} is {}; use --component ROLE for raw bytes or --json for dense values",
                    o.format
                )));
            }
            let (b, ty) = o.dense_form().map_err(|e| e.in_file(path))?;
            (b, ty, o.shape.to_vec())
        }
    };
    if as_json {
        let j = json!({ "name": name, "shape": shape, "dtype": ty.dtype.name(), "type": ty.type_field(), "values": json::elements(&bytes, &ty) });
        return out(&format!("{j}\n"));
    }
    if std::io::stdout().is_terminal() {
        return Err(Failure::Usage("refusing to write binary data to a terminal: redirect it (zt cat F N > out.bin) or use --json".into()));
    }
    let mut o = std::io::stdout().lock();
    match std::io::Write::write_all(&mut o, &bytes).and_then(|_| std::io::Write::flush(&mut o)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Failed(format!("cannot write to stdout: {e}"))),
    }
}

/// Everything `verify` found in one file.
struct Checked {
    objects: usize,
    checked: usize,
    failures: Vec<ztensor::Error>,
    version: String,
}

fn verify_one(path: &Path) -> Result<Checked, ztensor::Error> {
    let r = ztensor::open(path).map_err(|e| e.in_file(path))?;
    let report = r.verify();
    let mut failures = report.failures;
    // A .mag CRC was checked when the file was opened.
    let mag_crc = matches!(r.version(), ztensor::FileVersion::Mag(l) if !matches!(l, ztensor::mag::Layout::GenA | ztensor::mag::Layout::V300));
    let bar = progress(r.objects().len(), "verify");
    for o in &r {
        bar.inc(1);
        if let Err(e) = decode_all(o) {
            failures.push(e);
        }
    }
    bar.finish_and_clear();
    Ok(Checked {
        objects: r.objects().len(),
        checked: report.checked + usize::from(mag_crc),
        failures,
        version: r.version().to_string(),
    })
}

/// Decodes every component and applies every data rule (sparse indices, bool bytes).
fn decode_all(o: ObjectView<'_>) -> ztensor::Result<()> {
    for c in o.components() {
        c.bytes()?;
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

pub fn verify(files: &[PathBuf], as_json: bool) -> Outcome {
    let mut all_ok = true;
    let mut rows = Vec::new();
    let mut text = String::new();
    for f in files {
        match verify_one(f) {
            Ok(c) => {
                let ok = c.failures.is_empty();
                all_ok &= ok;
                let _ = writeln!(
                    text,
                    "{}: {} ({}, {} objects decoded, {} digests and checksums verified)",
                    f.display(),
                    if ok { "OK" } else { "FAILED" },
                    c.version,
                    c.objects,
                    c.checked
                );
                for e in &c.failures {
                    let _ = writeln!(text, "  {e}");
                }
                rows.push(json!({
                    "file": f, "ok": ok, "version": c.version, "objects": c.objects, "checked": c.checked,
                    "failures": c.failures.iter().map(error_json).collect::<Vec<_>>(),
                }));
            }
            Err(e) => {
                all_ok = false;
                let _ = writeln!(text, "{}: FAILED\n  {e}", f.display());
                rows.push(json!({ "file": f, "ok": false, "failures": [error_json(&e)] }));
            }
        }
    }
    out(&if as_json {
        format!("{}\n", serde_json::Value::Array(rows))
    } else {
        text
    })?;
    if all_ok {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

fn error_json(e: &ztensor::Error) -> serde_json::Value {
    json!({ "object": e.object(), "component": e.component(), "kind": format!("{:?}", e.kind()), "offset": e.offset(), "message": e.message() })
}

/// One difference between two files.
struct Difference {
    name: Option<String>,
    what: &'static str,
    detail: String,
    max_abs_diff: Option<f64>,
}

fn float_view(bytes: &[u8], ty: &ElementType) -> Option<Vec<f64>> {
    let vals = json::elements(bytes, ty);
    let is_float = ty.dtype.is_float() || ty.logical.as_ref().is_some_and(|t| t.is_fp8());
    is_float.then(|| {
        vals.iter()
            .map(|v| v.as_f64().unwrap_or(f64::NAN))
            .collect()
    })
}

pub fn diff(a: &Path, b: &Path, as_json: bool) -> Outcome {
    let (ra, rb) = (open(a)?, open(b)?);
    let mut diffs = Vec::new();
    if ra.attributes() != rb.attributes() {
        let keys: Vec<&String> = ra
            .attributes()
            .keys()
            .chain(rb.attributes().keys())
            .filter(|k| ra.attributes().get(*k) != rb.attributes().get(*k))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        diffs.push(Difference {
            name: None,
            what: "attributes",
            detail: format!("file attributes differ: {keys:?}"),
            max_abs_diff: None,
        });
    }
    for o in ra.objects() {
        if rb.object(&o.name).is_err() {
            diffs.push(Difference {
                name: Some(o.name.clone()),
                what: "only_in_a",
                detail: "only in A".into(),
                max_abs_diff: None,
            });
        }
    }
    for o in rb.objects() {
        if ra.object(&o.name).is_err() {
            diffs.push(Difference {
                name: Some(o.name.clone()),
                what: "only_in_b",
                detail: "only in B".into(),
                max_abs_diff: None,
            });
        }
    }
    let common: Vec<_> = ra
        .objects()
        .iter()
        .filter_map(|o| Some((ra.get(&o.name)?, rb.get(&o.name)?)))
        .collect();
    let bar = progress(common.len(), "diff");
    for (oa, ob) in common {
        bar.inc(1);
        let name = Some(oa.name.clone());
        if oa.shape != ob.shape {
            diffs.push(Difference {
                name,
                what: "shape",
                detail: format!("shape {:?} vs {:?}", oa.shape, ob.shape),
                max_abs_diff: None,
            });
            continue;
        }
        let (va, vb) = (oa.dense_form(), ob.dense_form());
        let ((ba, ta), (bb, tb)) = match (va, vb) {
            (Ok(x), Ok(y)) => (x, y),
            (Err(e), _) | (_, Err(e)) => {
                diffs.push(Difference {
                    name,
                    what: "unreadable",
                    detail: e.to_string(),
                    max_abs_diff: None,
                });
                continue;
            }
        };
        if ta != tb {
            diffs.push(Difference {
                name,
                what: "dtype",
                detail: format!("type {} vs {}", ta.name(), tb.name()),
                max_abs_diff: None,
            });
            continue;
        }
        if ba != bb {
            let size = ta.logical_size() as usize;
            let n_diff = ba
                .chunks(size)
                .zip(bb.chunks(size))
                .filter(|(x, y)| x != y)
                .count();
            let max = match (float_view(&ba, &ta), float_view(&bb, &tb)) {
                (Some(x), Some(y)) => Some(
                    x.iter()
                        .zip(&y)
                        .map(|(p, q)| (p - q).abs())
                        .fold(0.0f64, f64::max),
                ),
                _ => None,
            };
            let m = max
                .map(|m| format!("; largest absolute difference {m}"))
                .unwrap_or_default();
            diffs.push(Difference {
                name,
                what: "values",
                detail: format!("{n_diff} of {} elements differ{m}", ba.len() / size.max(1)),
                max_abs_diff: max,
            });
        }
    }
    bar.finish_and_clear();
    if as_json {
        let j = json!({
            "same": diffs.is_empty(),
            "differences": diffs.iter().map(|d| json!({ "name": d.name, "what": d.what, "detail": d.detail, "max_abs_diff": d.max_abs_diff })).collect::<Vec<_>>(),
        });
        out(&format!("{j}\n"))?;
    } else if diffs.is_empty() {
        out(&format!(
            "{} and {} hold the same objects and values\n",
            a.display(),
            b.display()
        ))?;
    } else {
        let mut s = String::new();
        for d in &diffs {
            let _ = writeln!(s, "{}: {}", d.name.as_deref().unwrap_or("(file)"), d.detail);
        }
        out(&s)?;
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

#[allow(clippy::too_many_arguments)]
pub fn convert(
    input: &Path,
    output: &Path,
    kind: Kind,
    compress: Option<i32>,
    digest: Option<DigestArg>,
    mag_version: MagVersion,
    densify: bool,
) -> Outcome {
    if kind != Kind::Zt && (compress.is_some() || digest.is_some()) {
        return Err(Failure::Usage(
            "--compress and --digest apply to .zt output only".into(),
        ));
    }
    let r = open(input)?;
    let in_file = |e: ztensor::Error| Failure::from(e.in_file(output));
    match kind {
        Kind::Mag => {
            let version = match mag_version {
                MagVersion::V1 => ztensor::mag::WriteVersion::V1,
                MagVersion::V300 => ztensor::mag::WriteVersion::V300,
            };
            ztensor::write_mag(&r, output, MagOptions { version, densify }).map_err(in_file)
        }
        Kind::Safetensors => ztensor::write_safetensors(&r, output, densify).map_err(in_file),
        Kind::Zt => {
            let opts = ConvertOptions {
                compression: compress.map_or(Keep::Source, Keep::Always),
                digest: match digest {
                    None => Keep::Source,
                    Some(DigestArg::None) => Keep::Never,
                    Some(DigestArg::Crc32c) => Keep::Always(DigestAlgorithm::Crc32c),
                    Some(DigestArg::Sha256) => Keep::Always(DigestAlgorithm::Sha256),
                },
                ..Default::default()
            };
            let mut w = Writer::create(output).map_err(in_file)?;
            w.set_attributes(r.attributes().clone());
            let bar = progress(r.objects().len(), "convert");
            for o in &r {
                bar.inc(1);
                if densify && o.format != Format::Dense {
                    let (bytes, ty) = o.dense_form().map_err(in_file)?;
                    let obj = ztensor::ObjectData {
                        shape: o.shape.to_vec(),
                        format: Format::Dense,
                        attributes: o.attributes.clone(),
                        components: vec![ztensor::ComponentData {
                            role: "data".into(),
                            element: ty,
                            bytes,
                        }],
                    };
                    let wo = ztensor::WriteOptions {
                        compression: compress,
                        digest: match opts.digest {
                            Keep::Always(d) => Some(d),
                            _ => None,
                        },
                    };
                    w.add_object_with(&o.name, obj, wo).map_err(in_file)?;
                } else {
                    convert::copy_object(o, &mut w, opts).map_err(in_file)?;
                }
            }
            bar.finish_and_clear();
            w.finish().map_err(in_file)
        }
    }
}

pub fn upgrade(input: &Path, output: &Path) -> Outcome {
    // Without skip_unreadable an upgrade either writes every object or fails: no report to show.
    ztensor::upgrade(input, output, ConvertOptions::default())?;
    Ok(())
}

pub fn merge(inputs: &[PathBuf], output: &Path) -> Outcome {
    let readers: Vec<(PathBuf, Reader)> = inputs
        .iter()
        .map(|p| open(p).map(|r| (p.clone(), r)))
        .collect::<Result<_, _>>()?;
    let mut owner: BTreeMap<&str, &Path> = BTreeMap::new();
    let mut attributes = ztensor::Attributes::new();
    for (p, r) in &readers {
        for n in r.names() {
            if let Some(first) = owner.insert(n, p) {
                return Err(Failure::Failed(format!(
                    "object {n:?} is in both {} and {}; names must not clash",
                    first.display(),
                    p.display()
                )));
            }
        }
        for (k, v) in r.attributes() {
            match attributes.get(k) {
                Some(old) if old != v => {
                    return Err(Failure::Failed(format!(
                        "file attribute {k:?} differs between inputs ({})",
                        p.display()
                    )));
                }
                _ => {
                    attributes.insert(k.clone(), v.clone());
                }
            }
        }
    }
    let mut w = Writer::create(output)?;
    w.set_attributes(attributes);
    let total = readers.iter().map(|(_, r)| r.objects().len()).sum();
    let bar = progress(total, "merge");
    for (p, r) in &readers {
        for o in r {
            bar.inc(1);
            convert::copy_stored(o, &mut w).map_err(|e| e.in_file(p))?;
        }
    }
    bar.finish_and_clear();
    Ok(w.finish()?)
}

pub fn rm(input: &Path, names: &[String], output: &Path) -> Outcome {
    let r = open(input)?;
    for n in names {
        r.object(n).map_err(|e| e.in_file(input))?;
    }
    let mut w = Writer::create(output)?;
    w.set_attributes(r.attributes().clone());
    for o in r.iter().filter(|o| !names.contains(&o.name)) {
        convert::copy_stored(o, &mut w).map_err(|e| e.in_file(input))?;
    }
    Ok(w.finish()?)
}
