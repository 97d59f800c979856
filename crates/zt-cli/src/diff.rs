//! `zt diff`: two files compared object by object, values in bounded pieces.
//!
//! Memory is a small constant whatever the tensors' sizes. Each side of a common object is a
//! [`Side`]: the bytes of its dense form, compared in step with the other side one window of
//! [`WINDOW`] bytes at a time:
//!
//! - a raw little-endian dense object is a borrowed slice of the map (`zt` always maps, and
//!   `ObjectView::dense_form` returns `Cow::Borrowed`): no copy at all, the kernel pages it in
//!   and out as the windows pass;
//! - anything else (zstd, legacy big-endian, sparse or quantized objects) is decoded whole
//!   first by the library, as it must be, and then compared window by window; GGUF block
//!   types (`gguf.<type>/1`) are compared by their blocks' bytes, exactly.
//!
//! Only windows whose bytes differ are looked at element by element, so a file compared with
//! itself costs a `memcmp`. Nothing is ever turned into one JSON value per element. An object
//! of a format with no dense form here (`zt.mx/1`, a writer's own) is compared by its format
//! and its components' roles, types and decoded bytes ([`compare_components`]). File
//! attributes compare floats by their bits ([`same_value`](crate::common::same_value)).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value as J};
use ztensor::fp8::Fp8Format;
use ztensor::{DType, ElementType, LogicalType, ObjectView};

use crate::commands::error_json;
use crate::common::{has_no_dense_form, out, progress, Failure, Outcome};
use crate::json;

/// Bytes compared per step: a multiple of every element size (1, 2, 4, 8 and 16 bytes).
const WINDOW: usize = 1 << 20;

/// numpy's rule: `|a - b| <= atol + rtol * |b|`, for float values only.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
}

impl Tolerance {
    /// Whether the user allowed any difference: then float objects of different types (a
    /// cast) are compared by value, as `numpy.allclose` compares them.
    fn given(self) -> bool {
        self.atol > 0.0 || self.rtol > 0.0
    }
}

/// One side of a comparison: the bytes of an object's dense form (borrowed from the map when
/// raw and little-endian, decoded otherwise) and their element type.
struct Side<'r> {
    bytes: Cow<'r, [u8]>,
    len: u64,
    ty: ElementType,
}

impl<'r> Side<'r> {
    /// `o`'s bytes to compare: GGUF blocks as they are stored unless `dequantize`, every
    /// other object (and blocks when `dequantize`) in its dense form.
    fn new(o: ObjectView<'r>, dequantize: bool) -> ztensor::Result<Self> {
        // GGUF blocks of one type are compared as they are stored, byte for byte: equal
        // blocks are equal values, and Q8_1 has no dequantization here.
        let (bytes, ty) = if o.ggml_type().is_some() && !dequantize {
            (o.component("data")?.bytes()?, ElementType::plain(DType::U8))
        } else {
            o.dense_form()?
        };
        Ok(Side {
            len: bytes.len() as u64,
            bytes,
            ty,
        })
    }

    /// `n` bytes from `pos`; `pos + n <= len`.
    fn window(&self, pos: u64, n: usize) -> ztensor::Result<&[u8]> {
        usize::try_from(pos)
            .ok()
            .and_then(|p| self.bytes.get(p..p.checked_add(n)?))
            .ok_or_else(|| ztensor::Error::invalid("window outside the data"))
    }
}

/// How one scalar (a storage element; complex values have two per element) is compared.
#[derive(Clone, Copy)]
enum Scalar {
    F16,
    BF16,
    F32,
    F64,
    Fp8(Fp8Format),
    /// The OCP MX scale: an exponent alone.
    E8M0,
    /// Packed sub-byte types (FP4, FP6, 4- and 2-bit integers): compared byte by byte.
    Packed(u64),
    Signed(usize),
    Unsigned(usize),
    /// Unknown logical types: bytes, exactly.
    Bytes(usize),
}

impl Scalar {
    fn of(ty: &ElementType) -> Scalar {
        match &ty.logical {
            Some(LogicalType::Unknown(_)) => return Scalar::Bytes(ty.dtype.size()),
            Some(LogicalType::F8E8M0) => return Scalar::E8M0,
            Some(t) => {
                if let Some(bits) = t.packed_bits() {
                    return Scalar::Packed(bits);
                }
                if let Some(f) = Fp8Format::of(t) {
                    return Scalar::Fp8(f);
                }
            }
            None => {}
        }
        match ty.dtype {
            DType::F16 => Scalar::F16,
            DType::BF16 => Scalar::BF16,
            DType::F32 => Scalar::F32,
            DType::F64 => Scalar::F64,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => Scalar::Signed(ty.dtype.size()),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Bool => {
                Scalar::Unsigned(ty.dtype.size())
            }
        }
    }

    fn size(self) -> usize {
        match self {
            Scalar::F16 | Scalar::BF16 => 2,
            Scalar::F32 => 4,
            Scalar::F64 => 8,
            Scalar::Fp8(_) | Scalar::E8M0 | Scalar::Packed(_) => 1,
            Scalar::Signed(n) | Scalar::Unsigned(n) | Scalar::Bytes(n) => n,
        }
    }

    fn float(self, b: &[u8]) -> Option<f64> {
        let a = |n: usize| -> [u8; 8] {
            let mut x = [0u8; 8];
            if let (Some(d), Some(s)) = (x.get_mut(..n), b.get(..n)) {
                d.copy_from_slice(s);
            }
            x
        };
        Some(match self {
            Scalar::F16 => half::f16::from_le_bytes([a(2)[0], a(2)[1]]).into(),
            Scalar::BF16 => half::bf16::from_le_bytes([a(2)[0], a(2)[1]]).into(),
            Scalar::F32 => {
                let x = a(4);
                f32::from_le_bytes([x[0], x[1], x[2], x[3]]).into()
            }
            Scalar::F64 => f64::from_le_bytes(a(8)),
            Scalar::Fp8(f) => f.decode(b.first().copied().unwrap_or(0)).into(),
            Scalar::E8M0 => ztensor::fp8::e8m0_to_f32(b.first().copied().unwrap_or(0)).into(),
            _ => return None,
        })
    }

    fn integer(self, b: &[u8]) -> Option<i128> {
        let n = self.size();
        let mut x = [0u8; 16];
        x.get_mut(..n)?.copy_from_slice(b.get(..n)?);
        match self {
            Scalar::Unsigned(_) => Some(i128::from_le_bytes(x)),
            Scalar::Signed(_) => {
                // Sign-extend from n bytes.
                let shift = 128 - 8 * n as u32;
                Some((i128::from_le_bytes(x) << shift) >> shift)
            }
            _ => None,
        }
    }

    /// Whether the kind holds floating-point numbers (one part of a complex value, for
    /// complex types).
    fn float_kind(self) -> bool {
        matches!(
            self,
            Scalar::F16 | Scalar::BF16 | Scalar::F32 | Scalar::F64 | Scalar::Fp8(_) | Scalar::E8M0
        )
    }

    /// Whether the kind has a numeric difference to report.
    fn numeric(self) -> bool {
        !matches!(self, Scalar::Bytes(_) | Scalar::Packed(_))
    }

    /// The element that scalar `i` (a byte, for packed types) belongs to (the first element
    /// that starts in the byte, for packed types).
    fn element_of(self, i: u64, ratio: u64) -> u64 {
        match self {
            Scalar::Packed(bits) => i * 8 / bits,
            _ => i / ratio,
        }
    }
}

/// What the comparison of one object found.
#[derive(Default)]
struct Tally {
    differing: u64,
    first: Option<u64>,
    last_counted: Option<u64>,
    max_abs: f64,
    /// A value is NaN where the other side's is not (or is another NaN): the largest
    /// difference is then NaN, not the largest finite one.
    nan: bool,
}

/// How the scalars of one object are compared.
struct Rule {
    /// The scalar kinds of the two sides, `(a, b)`: the same unless a tolerance lets float
    /// objects of different types be compared.
    kinds: (Scalar, Scalar),
    /// Both sides have one type, so equal bytes are equal values.
    same_type: bool,
    /// Scalars per element (2 for complex).
    ratio: u64,
    tol: Tolerance,
}

/// Compares one window, scalar by scalar; `base` is the index of its first scalar.
fn compare(a: &[u8], b: &[u8], base: u64, rule: &Rule, t: &mut Tally) {
    if rule.same_type && a == b {
        return;
    }
    let (sa, sb) = rule.kinds;
    let (same_type, ratio, tol) = (rule.same_type, rule.ratio, rule.tol);
    let pairs = a.chunks_exact(sa.size()).zip(b.chunks_exact(sb.size()));
    for (i, (x, y)) in pairs.enumerate() {
        let same = if let (Some(p), Some(q)) = (sa.float(x), sb.float(y)) {
            match (p.is_nan(), q.is_nan()) {
                // A NaN equals only the same NaN (the same bits) at the same place.
                (true, true) | (true, false) | (false, true) => {
                    // Across types (a cast) no bits can match: any NaN is the NaN.
                    let same = p.is_nan() && q.is_nan() && (x == y || !same_type);
                    t.nan |= !same;
                    same
                }
                // Infinities equal only themselves.
                (false, false) => {
                    if p != q {
                        t.max_abs = t.max_abs.max((p - q).abs());
                    }
                    p == q || (p - q).abs() <= tol.atol + tol.rtol * q.abs()
                }
            }
        } else if let (Some(p), Some(q)) = (sa.integer(x), sb.integer(y)) {
            t.max_abs = t.max_abs.max((p - q).unsigned_abs() as f64);
            p == q
        } else {
            x == y
        };
        if !same {
            let element = sa.element_of(base + i as u64, ratio);
            if t.last_counted != Some(element) {
                t.last_counted = Some(element);
                t.differing += 1;
                t.first.get_or_insert(element);
            }
        }
    }
}

/// A flat row-major index as one index per dimension.
fn unravel(mut i: u64, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for (slot, &d) in idx.iter_mut().zip(shape).rev() {
        if d > 0 {
            *slot = i % d;
            i /= d;
        }
    }
    idx
}

/// One difference between two files.
struct Difference {
    name: Option<String>,
    what: &'static str,
    detail: String,
    values: Option<Values>,
    error: Option<J>,
}

/// How the values of one object differ.
struct Values {
    differing: u64,
    elements: u64,
    max_abs_diff: Option<f64>,
    first_index: Vec<u64>,
}

impl Difference {
    fn simple(name: Option<&str>, what: &'static str, detail: String) -> Self {
        Difference {
            name: name.map(str::to_owned),
            what,
            detail,
            values: None,
            error: None,
        }
    }

    fn to_json(&self) -> J {
        let v = self.values.as_ref();
        json!({
            "name": self.name,
            "what": self.what,
            "detail": self.detail,
            "differing": v.map(|v| v.differing),
            "elements": v.map(|v| v.elements),
            "max_abs_diff": v.and_then(|v| v.max_abs_diff).map(json::float),
            "first_index": v.map(|v| &v.first_index),
            "error": self.error,
        })
    }
}

/// Compares two objects component by component: the same format, the same roles with the
/// same element types in the same order, and the same decoded bytes. For objects that have
/// no dense form here, whose values cannot be compared element by element.
fn compare_components(
    oa: ObjectView<'_>,
    ob: ObjectView<'_>,
    bar: &crate::common::Bar,
) -> Result<Option<Difference>, (ztensor::Error, &'static str)> {
    let differ = |what, detail| Ok(Some(Difference::simple(Some(oa.name()), what, detail)));
    if oa.format != ob.format {
        return differ("format", format!("format {} vs {}", oa.format, ob.format));
    }
    let layout = |o: ObjectView<'_>| -> Vec<(String, String)> {
        o.components()
            .map(|c| (c.role.to_string(), c.element.name().to_owned()))
            .collect()
    };
    let (layout_a, layout_b) = (layout(oa), layout(ob));
    if layout_a != layout_b {
        return differ(
            "components",
            format!("components {layout_a:?} vs {layout_b:?}"),
        );
    }
    for (ca, cb) in oa.components().zip(ob.components()) {
        let bytes_a = ca.bytes().map_err(|e| (e, "A"))?;
        let bytes_b = cb.bytes().map_err(|e| (e, "B"))?;
        bar.inc(bytes_a.len() as u64);
        if bytes_a != bytes_b {
            return differ(
                "values",
                format!(
                    "component {:?} differs ({} and {} bytes; a {} object is compared by its \
                     components' bytes)",
                    ca.role,
                    bytes_a.len(),
                    bytes_b.len(),
                    oa.format
                ),
            );
        }
    }
    Ok(None)
}

/// One line per object passed over as not numbers, as `verify` prints them.
fn not_compared_lines(s: &mut String, not_compared: &[(&str, &str)]) {
    for (name, why) in not_compared {
        let line = format!("  not compared: object {name:?}: {why}");
        let _ = writeln!(s, "{}", crate::common::printable(&line));
    }
}

/// Compares the values of one common object; `Ok(None)` when they are equal.
fn compare_values(
    oa: ObjectView<'_>,
    ob: ObjectView<'_>,
    tol: Tolerance,
    bar: &crate::common::Bar,
    by_value_count: &mut u64,
) -> Result<Option<Difference>, (ztensor::Error, &'static str)> {
    // Objects with no dense form are compared by their components; GGUF blocks by their
    // bytes in [`Side`].
    if has_no_dense_form(&oa) || has_no_dense_form(&ob) {
        return compare_components(oa, ob, bar);
    }
    let name = Some(oa.name.as_str());
    // GGUF block types: blocks of one type are compared as stored; blocks of another type,
    // or dense values, differ in type unless a tolerance asks for values (both sides then
    // in their dense form, the blocks dequantized to f32).
    let blocks = |o: ObjectView<'_>| o.ggml_type().map(|t| t.id);
    let other_blocks = blocks(oa) != blocks(ob);
    if other_blocks && !tol.given() {
        let shown = |o: ObjectView<'_>| match o.ggml_type() {
            Some(t) => format!("gguf {} blocks", t.name),
            None => o
                .dense_element_type()
                .map_or_else(|| o.format.to_string(), |t| t.name().to_owned()),
        };
        return Ok(Some(Difference::simple(
            name,
            "dtype",
            format!("type {} vs {}", shown(oa), shown(ob)),
        )));
    }
    let sa = Side::new(oa, other_blocks).map_err(|e| (e, "A"))?;
    let sb = Side::new(ob, other_blocks).map_err(|e| (e, "B"))?;
    let same_type = sa.ty == sb.ty;
    let (scalar, scalar_b) = (Scalar::of(&sa.ty), Scalar::of(&sb.ty));
    let by_value = tol.given()
        && scalar.float_kind()
        && scalar_b.float_kind()
        && sa.ty.ratio() == sb.ty.ratio();
    if !same_type && !by_value {
        return Ok(Some(Difference::simple(
            name,
            "dtype",
            format!("type {} vs {}", sa.ty.name(), sb.ty.name()),
        )));
    }
    if !same_type || other_blocks {
        *by_value_count += 1;
    }
    let ratio = sa.ty.ratio().max(1);
    let elements = oa.element_count();
    let (size_a, size_b) = (scalar.size() as u64, scalar_b.size() as u64);
    let scalars = sa.len / size_a;
    if sa.len % size_a != 0 || sb.len % size_b != 0 || sb.len / size_b != scalars {
        let e = ztensor::Error::invalid(format!(
            "{} and {} bytes of values for {elements} elements",
            sa.len, sb.len
        ))
        .in_object(&oa.name);
        return Err((e, "A"));
    }
    let rule = Rule {
        kinds: (scalar, scalar_b),
        same_type,
        ratio,
        tol,
    };
    let mut tally = Tally::default();
    // Scalars per step: a window of the wider side.
    let step = WINDOW as u64 / size_a.max(size_b);
    let mut done = 0u64;
    while done < scalars {
        let k = step.min(scalars - done);
        // Within a window: `k * size` is at most WINDOW bytes.
        let wa = sa
            .window(done * size_a, (k * size_a) as usize)
            .map_err(|e| (e.in_object(&oa.name), "A"))?;
        let wb = sb
            .window(done * size_b, (k * size_b) as usize)
            .map_err(|e| (e.in_object(&ob.name), "B"))?;
        compare(wa, wb, done, &rule, &mut tally);
        done += k;
        bar.inc(k * size_a);
    }
    let Some(first) = tally.first else {
        return Ok(None);
    };
    let largest = if tally.nan { f64::NAN } else { tally.max_abs };
    let max_abs_diff = scalar.numeric().then_some(largest);
    let first_index = unravel(first, &oa.shape);
    let mut detail = format!(
        "{} of {elements} elements differ; first at {first_index:?}",
        tally.differing
    );
    if let Some(m) = max_abs_diff {
        let _ = write!(detail, "; largest absolute difference {m}");
        if m.is_nan() {
            let _ = write!(detail, " (a NaN against a number or another NaN)");
        }
    }
    Ok(Some(Difference {
        name: name.map(str::to_owned),
        what: "values",
        detail,
        values: Some(Values {
            differing: tally.differing,
            elements,
            max_abs_diff,
            first_index,
        }),
        error: None,
    }))
}

/// Decoded bytes an object's comparison reads, roughly: for the progress bar.
fn dense_len(o: &ztensor::ObjectInfo) -> u64 {
    o.element_count()
        .saturating_mul(o.element_type().map_or(1, ElementType::logical_size))
}

/// What `diff` compares besides the values (`--values-only` turns them off).
#[derive(Debug, Clone, Copy)]
pub struct Compare {
    pub tolerance: Tolerance,
    /// Compare names, shapes, types and values only: file attributes are passed over.
    pub values_only: bool,
}

/// `zt diff A B`: each side a file, a URL or a sharded set's index.
pub fn diff(a: &Path, b: &Path, how: Compare, as_json: bool) -> Outcome {
    use crate::sets::{with_objects, Order};
    let compared = with_objects(a, false, Order::Name, &[], |oa, attributes_a, _| {
        with_objects(b, false, Order::Name, &[], |ob, attributes_b, _| {
            let attributes = (!how.values_only).then_some((attributes_a, attributes_b));
            diff_objects(a, b, oa, ob, attributes, how.tolerance, as_json)
        })
        .map_err(Failure::into_trouble)
    })
    .map_err(Failure::into_trouble);
    match compared {
        // A side that could not be opened: JSON callers get the error in the schema too.
        Err(Failure::Trouble(m)) if as_json => {
            let j = json!({
                "schema": "zt.diff/1",
                "files": [a.to_string_lossy(), b.to_string_lossy()],
                "same": null,
                "atol": how.tolerance.atol,
                "rtol": how.tolerance.rtol,
                "differences": [],
                "error": { "error_kind": "Trouble", "message": m.to_string() },
            });
            out(&format!("{j}\n"))?;
            Err(Failure::ReportedTrouble)
        }
        other => other,
    }
}

/// Compares two lists of objects (each in name order) and their file attributes (`None`:
/// not compared) and reports.
fn diff_objects(
    a: &Path,
    b: &Path,
    objects_a: &[ObjectView<'_>],
    objects_b: &[ObjectView<'_>],
    attributes: Option<(&ztensor::Attributes, &ztensor::Attributes)>,
    tol: Tolerance,
    as_json: bool,
) -> Outcome {
    let mut diffs = Vec::new();
    let mut trouble = false;
    // Float objects of different types compared by value (a tolerance was given).
    let mut by_value = 0u64;
    if let Some((attributes_a, attributes_b)) = attributes {
        let differs = |k: &&String| match (attributes_a.get(*k), attributes_b.get(*k)) {
            (Some(x), Some(y)) => !crate::common::same_value(x, y),
            // The types a GGUF reader keeps of the other attributes: of a file made from a
            // GGUF, or made into one, not an attribute either file was given.
            _ if k.as_str() == ztensor::GGUF_VALUE_TYPES_KEY => false,
            _ => true,
        };
        let keys: Vec<&String> = attributes_a
            .keys()
            .chain(attributes_b.keys())
            .filter(differs)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !keys.is_empty() {
            diffs.push(Difference::simple(
                None,
                "attributes",
                format!("file attributes differ: {keys:?}"),
            ));
        }
    }
    // Names come from the files: a keyed hash.
    let by_name = |objects: &[ObjectView<'_>]| -> std::collections::HashSet<String> {
        objects.iter().map(|o| o.name().to_owned()).collect()
    };
    let (names_a, names_b) = (by_name(objects_a), by_name(objects_b));
    for o in objects_a.iter().filter(|o| !names_b.contains(o.name())) {
        diffs.push(Difference::simple(
            Some(o.name()),
            "only_in_a",
            "only in A".into(),
        ));
    }
    for o in objects_b.iter().filter(|o| !names_a.contains(o.name())) {
        diffs.push(Difference::simple(
            Some(o.name()),
            "only_in_b",
            "only in B".into(),
        ));
    }
    let views_b: std::collections::HashMap<&str, ObjectView<'_>> =
        objects_b.iter().map(|o| (o.name(), *o)).collect();
    let common: Vec<(ObjectView<'_>, ObjectView<'_>)> = objects_a
        .iter()
        .filter_map(|oa| Some((*oa, *views_b.get(oa.name())?)))
        .collect();
    let bar = progress(
        common.iter().map(|(o, _)| dense_len(o.info())).sum(),
        "diff",
    );
    // Objects both files list as not numbers (text, structured and object arrays): passed
    // over, as verify and convert pass over them, and named. Their stored bytes say nothing
    // sure of their content (an HDF5 string is a reference into a heap; a pickled object
    // array is stored as no bytes at all), so they are neither the same nor different.
    let mut not_compared: Vec<(&str, &str)> = Vec::new();
    for (oa, ob) in common {
        if oa.shape != ob.shape {
            diffs.push(Difference::simple(
                Some(&oa.name),
                "shape",
                format!("shape {:?} vs {:?}", oa.shape, ob.shape),
            ));
            continue;
        }
        if let (Some(why), Some(_)) = (oa.info().skipped(), ob.skipped()) {
            not_compared.push((oa.name(), why));
            continue;
        }
        match compare_values(oa, ob, tol, &bar, &mut by_value) {
            Ok(None) => {}
            Ok(Some(d)) => diffs.push(d),
            Err((e, side)) => {
                trouble = true;
                // The file the bytes are in: a set's shard, not its index.
                let file = crate::sets::blamed_input(if side == "A" { a } else { b }, &e);
                let e = e.in_file(&file);
                diffs.push(Difference {
                    name: Some(oa.name.clone()),
                    what: "unreadable",
                    detail: e.to_string(),
                    values: None,
                    error: Some(error_json(&e, Some(&file))),
                });
            }
        }
    }
    bar.finish_and_clear();
    if as_json {
        let j = json!({
            "schema": "zt.diff/1",
            "files": [a.to_string_lossy(), b.to_string_lossy()],
            "same": diffs.is_empty(),
            "atol": tol.atol,
            "rtol": tol.rtol,
            "compared_across_types": by_value,
            "differences": diffs.iter().map(Difference::to_json).collect::<Vec<_>>(),
            "not_compared": not_compared
                .iter()
                .map(|(name, why)| json!({ "name": name, "reason": why }))
                .collect::<Vec<_>>(),
        });
        out(&format!("{j}\n"))?;
    } else if diffs.is_empty() {
        let within = if tol.atol > 0.0 || tol.rtol > 0.0 {
            let across = match by_value {
                0 => String::new(),
                n => format!("; {n} of another float type, compared by value"),
            };
            format!(
                " (floats within atol {}, rtol {}{across})",
                tol.atol, tol.rtol
            )
        } else {
            String::new()
        };
        let mut s = format!(
            "{} and {} hold the same objects and values{within}\n",
            a.display(),
            b.display()
        );
        not_compared_lines(&mut s, &not_compared);
        out(&s)?;
    } else {
        let mut s = String::new();
        for d in &diffs {
            let line = format!("{}: {}", d.name.as_deref().unwrap_or("(file)"), d.detail);
            let _ = writeln!(s, "{}", crate::common::printable(&line));
        }
        not_compared_lines(&mut s, &not_compared);
        out(&s)?;
    }
    if trouble {
        Err(Failure::ReportedTrouble)
    } else if diffs.is_empty() {
        Ok(())
    } else {
        Err(Failure::Reported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unravel_row_major() {
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
        assert_eq!(unravel(0, &[]), Vec::<u64>::new());
        assert_eq!(unravel(23, &[2, 3, 4]), vec![1, 2, 3]);
    }

    #[test]
    fn signed_integers_sign_extend() {
        assert_eq!(Scalar::Signed(2).integer(&(-3i16).to_le_bytes()), Some(-3));
        assert_eq!(
            Scalar::Unsigned(2).integer(&u16::MAX.to_le_bytes()),
            Some(65535)
        );
        assert_eq!(
            Scalar::Signed(8).integer(&i64::MIN.to_le_bytes()),
            Some(i64::MIN as i128)
        );
    }

    #[test]
    fn tolerance_and_nan() {
        let f = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let rule = |ratio, tol| Rule {
            kinds: (Scalar::F32, Scalar::F32),
            same_type: true,
            ratio,
            tol,
        };
        let (a, b) = (f(&[1.0, f32::NAN, 2.0]), f(&[1.05, f32::NAN, 2.0]));
        let mut t = Tally::default();
        compare(&a, &b, 0, &rule(1, Tolerance::default()), &mut t);
        assert_eq!((t.differing, t.first), (1, Some(0)));
        let mut t = Tally::default();
        let tol = Tolerance {
            atol: 0.1,
            rtol: 0.0,
        };
        compare(&a, &b, 0, &rule(1, tol), &mut t);
        assert_eq!(t.differing, 0);
        // Complex: two scalars, one element.
        let mut t = Tally::default();
        let (c, d) = (f(&[0.0, 1.0]), f(&[0.5, 2.0]));
        compare(&c, &d, 0, &rule(2, Tolerance::default()), &mut t);
        assert_eq!((t.differing, t.max_abs), (1, 1.0));
        // Across types: f32 against f16 by value; a NaN against a NaN of other bits is the
        // same there, and a number against a NaN is not.
        let h = |v: &[f32]| {
            v.iter()
                .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
                .collect::<Vec<u8>>()
        };
        let cast = Rule {
            kinds: (Scalar::F32, Scalar::F16),
            same_type: false,
            ratio: 1,
            tol,
        };
        let mut t = Tally::default();
        compare(
            &f(&[1.0, f32::NAN, 3.0]),
            &h(&[1.0, f32::NAN, f32::NAN]),
            0,
            &cast,
            &mut t,
        );
        assert_eq!((t.differing, t.first, t.nan), (1, Some(2), true));
    }
}
