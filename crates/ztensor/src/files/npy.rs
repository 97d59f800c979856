//! NumPy files in the facade's object model: `.npy` arrays (format versions 1.0, 2.0 and
//! 3.0) and `.npz` archives of them (through [`crate::zip`]).
//!
//! A `.npy` file is `\x93NUMPY`, a major and a minor version byte, the header's length (u16
//! for version 1, u32 for 2 and 3), the header (a Python dict literal: `descr`,
//! `fortran_order`, `shape`), then the elements. The header is read by a small parser of that
//! literal subset, never evaluated. Every numeric dtype maps to a zTensor element type
//! (`c8`/`c16` to complex64/complex128 on f32/f64 storage); big-endian arrays are listed as
//! big-endian and swapped when read; a Fortran-order array gets strides that read it as the
//! same logical array, row-major (a copy). Structured, object, string and datetime arrays
//! are refused (`Unsupported`), naming the dtype.
//!
//! In a `.npz`, each entry `<name>.npy` is the object `<name>`. A stored entry's elements are
//! a range of the file, served from the map; a deflated entry's header is inflated at open
//! (at most [`MAX_HEADER_LEN`] bytes) and its elements are inflated when read, exactly to the
//! declared size and under the decompression cap. An entry that is not a `.npy` array, or an
//! array of an unsupported dtype, is listed with a defect and the rest of the archive reads.
//!
//! ```text
//!  \x93NUMPY 01 00 | u16 len | {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   \n | data
//! ```

use zt_container::{Error, ErrorKind, Result, Source};
use zt_formats::{DType, ElementType, Encoding, LogicalType};
use zt_manifest::{Attributes, Shape};

use crate::listing::{Limits, Listing};
use crate::model::{Arrangement, ByteOrder, Defect, FileVersion, ObjectInfo};
use crate::zip::{self, Method};

/// The magic that starts every `.npy` array.
pub(crate) const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The longest header accepted. NumPy itself refuses headers over 10,000 bytes unless told
/// otherwise; real headers of numeric arrays are 118 bytes or so.
pub(crate) const MAX_HEADER_LEN: u64 = 65_536;

/// Nesting of the header literal (a structured dtype's lists) the parser follows.
const MAX_LITERAL_DEPTH: usize = 16;

/// The object name of a bare `.npy` file, which names nothing itself.
pub(crate) const NPY_OBJECT_NAME: &str = "array";

/// A `.npy` header, parsed and checked.
#[derive(Debug)]
struct Header {
    major: u8,
    minor: u8,
    /// Bytes from the magic to the first element.
    data_start: u64,
    element: ElementType,
    byte_order: ByteOrder,
    fortran: bool,
    shape: Vec<u64>,
    /// Bytes of the elements.
    data_len: u64,
}

/// Lists a `.npy` file: one object, [`NPY_OBJECT_NAME`].
pub(crate) fn list_npy(source: &Source, limits: &Limits) -> Result<Listing> {
    let head_len = source.len().min(12 + MAX_HEADER_LEN);
    let head = source.read_at(0, head_len)?;
    let h = header(&head, source.len(), limits)?.map_err(|n| n.0)?;
    let end = h.data_start + h.data_len;
    if end != source.len() {
        return Err(bad(format!(
            "the array's {} bytes of data end at {end}, but the file has {} bytes",
            h.data_len,
            source.len()
        ))
        .at(h.data_start));
    }
    let object = object(NPY_OBJECT_NAME.to_owned(), &h, h.data_start, None);
    Ok(Listing::of_unique(
        FileVersion::Npy(h.major, h.minor),
        Attributes::new(),
        vec![object],
    ))
}

/// Lists a `.npz` archive: one object per entry, named as the entry without `.npy`.
pub(crate) fn list_npz(
    source: &Source,
    entries: Vec<zip::Entry>,
    limits: &Limits,
) -> Result<Listing> {
    let mut objects = zt_container::internal::try_with_capacity(entries.len())?;
    // Deflated headers are inflated at open: their total is tied to the archive's size, so
    // many entries of large, highly compressed headers cannot make opening slow.
    let mut inflate_budget = source.len().saturating_mul(16).saturating_add(1 << 20);
    for e in &entries {
        let name = e.name.strip_suffix(".npy").unwrap_or(&e.name).to_owned();
        if let Some(damage) = &e.damage {
            // Damaged in the zip itself (its local header, method or sizes): numpy opens the
            // archive and fails on this array alone. Its data is not placed.
            let defect = Defect {
                kind: damage.kind,
                message: damage.message.clone(),
                skip: false,
            };
            let placed = zip::Entry {
                data_offset: e.header_offset,
                compressed: 0,
                ..e.clone()
            };
            objects.push(unreadable(name, &placed, defect));
            continue;
        }
        match npz_entry(source, e, limits, &mut inflate_budget) {
            Ok(Ok(o)) => objects.push(ObjectInfo { name, ..o }),
            // A structured, object or text array: listed as what it is, and skipped.
            Ok(Err(NotNumbers(err))) => {
                let defect = Defect::not_numbers(err.message());
                objects.push(unreadable(name, e, defect));
            }
            // A damaged or unsupported array (its .npy header, its deflate stream): numpy's
            // archive is lazy, so it lists the array and fails on reading it alone.
            Err(err) if matches!(err.kind(), ErrorKind::InvalidFile | ErrorKind::Unsupported) => {
                objects.push(unreadable(name, e, Defect::from_error(&err)));
            }
            Err(err) => return Err(err.in_object(&name)),
        }
    }
    // Entry names are unique (the zip reader refused duplicates); two entries `a` and
    // `a.npy` would still both be `a`.
    let mut seen: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
    seen.sort_unstable();
    if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
        return Err(bad(format!("two entries make the array {:?}", w[0])));
    }
    let mut listing = Listing::of_unique(FileVersion::Npz, Attributes::new(), objects);
    // Entries whose data is not placed are left out of the CRC checks.
    listing.zip_entries = entries
        .into_iter()
        .filter(|e| e.damage.is_none())
        .map(|e| (0, e))
        .collect();
    Ok(listing)
}

/// One `.npz` entry as an object (named later).
fn npz_entry(
    source: &Source,
    e: &zip::Entry,
    limits: &Limits,
    inflate_budget: &mut u64,
) -> Result<Parsed<ObjectInfo>> {
    if !e.name.ends_with(".npy") {
        return Ok(Err(NotNumbers(Error::unsupported(format!(
            "zip entry {:?} is not a .npy array",
            e.name
        )))));
    }
    let want = e.uncompressed.min(12 + MAX_HEADER_LEN);
    match e.method {
        Method::Stored => {
            let head = source.read_at(e.data_offset, want)?;
            let h =
                header(&head, e.uncompressed, limits).map_err(|err| shift(err, e.data_offset))?;
            let h = match h {
                Ok(h) => h,
                Err(NotNumbers(err)) => return Ok(Err(NotNumbers(shift(err, e.data_offset)))),
            };
            if h.data_start + h.data_len != e.uncompressed {
                return Err(entry_size(&h, e).at(e.data_offset));
            }
            Ok(Ok(object(
                String::new(),
                &h,
                e.data_offset + h.data_start,
                None,
            )))
        }
        Method::Deflated => {
            // The header is at the start of the stream: read only what can encode it (a
            // deflate code is at most 15 bits, so two input bytes per output byte and the
            // block headers), and the whole stream only if that was not enough.
            let first = e
                .compressed
                .min(want.saturating_mul(2).saturating_add(4096));
            // Inflate the fixed part first, then exactly the header it declares.
            let fixed = {
                let stored = source.read_at(e.data_offset, e.compressed.min(4096))?;
                let whole = e.compressed <= 4096;
                zip::inflate_prefix(&stored, 12, whole).map_err(|err| err.at(e.data_offset))?
            };
            let want = declared_header_end(&fixed).map_or(want, |end| end.min(want));
            if want > *inflate_budget {
                return Err(Error::limit(format!(
                    "the archive's deflated .npy headers inflate to more than {} bytes",
                    source.len().saturating_mul(16).saturating_add(1 << 20)
                )));
            }
            *inflate_budget -= want;
            let mut head = Vec::new();
            for len in [first, e.compressed] {
                let stored = source.read_at(e.data_offset, len)?;
                let whole = len == e.compressed;
                head = zip::inflate_prefix(&stored, want, whole)
                    .map_err(|err| err.at(e.data_offset))?;
                if head.len() as u64 == want || whole {
                    break;
                }
            }
            let h = header(&head, e.uncompressed, limits).map_err(|err| err.at(e.data_offset))?;
            let h = match h {
                Ok(h) => h,
                Err(NotNumbers(err)) => return Ok(Err(NotNumbers(err.at(e.data_offset)))),
            };
            if h.data_start + h.data_len != e.uncompressed {
                return Err(entry_size(&h, e).at(e.data_offset));
            }
            let span = (e.data_offset, e.compressed, h.data_start);
            Ok(Ok(object(String::new(), &h, 0, Some(span))))
        }
    }
}

/// Where a header ends, from the magic, version and length at its start (12 bytes suffice);
/// `None` when those are not a `.npy` start (the full parse then says what is wrong).
fn declared_header_end(fixed: &[u8]) -> Option<u64> {
    if !fixed.starts_with(NPY_MAGIC) {
        return None;
    }
    let f = |i: usize| fixed.get(i).copied().map(u64::from);
    match fixed.get(6) {
        Some(1) => Some(10 + (f(8)? | f(9)? << 8)),
        Some(2 | 3) => Some(12 + (f(8)? | f(9)? << 8 | f(10)? << 16 | f(11)? << 24)),
        _ => None,
    }
}

fn entry_size(h: &Header, e: &zip::Entry) -> Error {
    bad(format!(
        "a header of {} bytes and {} bytes of data make {}, but the entry holds {}",
        h.data_start,
        h.data_len,
        h.data_start + h.data_len,
        e.uncompressed
    ))
}

/// An error at an offset within an entry, moved to the file's offsets.
fn shift(err: Error, base: u64) -> Error {
    match err.offset() {
        Some(o) => Error::new(err.kind(), err.message()).at(base.saturating_add(o)),
        None => err.at(base),
    }
}

/// The object for a parsed header whose elements start at `offset` of the file, or, for a
/// deflated entry, `(stored offset, stored length, header bytes to skip)`.
fn object(name: String, h: &Header, offset: u64, deflated: Option<(u64, u64, u64)>) -> ObjectInfo {
    let shape: Shape = h.shape.iter().copied().collect();
    let strides = if h.fortran && h.shape.len() > 1 {
        // Column-major: the first index varies fastest.
        let mut s = Vec::with_capacity(h.shape.len());
        let mut step = 1u64;
        for &d in &h.shape {
            s.push(step);
            step = step.saturating_mul(d);
        }
        s
    } else {
        Vec::new()
    };
    let mut o = ObjectInfo::raw_dense(
        name,
        shape,
        h.element.clone(),
        (offset, h.data_len),
        h.byte_order,
    );
    if let Some(c) = o.components.0.first_mut() {
        let skip = match deflated {
            Some((stored_at, stored_len, skip)) => {
                c.offset = stored_at;
                c.length = stored_len;
                c.encoding = Encoding::Deflate;
                c.uncompressed_length = Some(skip + h.data_len);
                skip
            }
            None => 0,
        };
        if deflated.is_some() || !strides.is_empty() {
            c.decoded_len = Some(h.data_len);
            c.arrangement = Some(Box::new(Arrangement {
                skip,
                span: h.data_len,
                dims: h.shape.clone(),
                strides,
                described: false,
            }));
        }
    }
    o
}

/// An entry listed with a defect: its stored bytes as `u8`.
fn unreadable(name: String, e: &zip::Entry, defect: Defect) -> ObjectInfo {
    let element = ElementType::plain(DType::U8);
    let range = (e.data_offset, e.compressed);
    let shape: Shape = std::iter::once(e.compressed).collect();
    ObjectInfo {
        defect: Some(Box::new(defect)),
        ..ObjectInfo::raw_dense(name, shape, element, range, ByteOrder::Little)
    }
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("invalid .npy array: {what}"))
}

/// Parses the magic, version and header at the start of `head` (the first bytes of an array
/// of `total` bytes) and checks the shape and sizes.
fn header(head: &[u8], total: u64, limits: &Limits) -> Result<Parsed<Header>> {
    if !head.starts_with(NPY_MAGIC) {
        return Err(bad("no \\x93NUMPY magic").at(0));
    }
    let (major, minor) = match head.get(6..8) {
        Some(&[a, b]) => (a, b),
        _ => return Err(bad("cut short in its version").at(6)),
    };
    // numpy's loader takes versions 1.0, 2.0 and 3.0, and no minor version.
    let (len_size, utf8) = match (major, minor) {
        (1, 0) => (2usize, false),
        (2, 0) => (4, false),
        (3, 0) => (4, true),
        _ => {
            return Err(Error::unsupported(format!(
                ".npy format version {major}.{minor} (1.0, 2.0 and 3.0 are read)"
            ))
            .at(6))
        }
    };
    let len_bytes = head
        .get(8..8 + len_size)
        .ok_or_else(|| bad("cut short in its header length").at(8))?;
    let header_len = len_bytes
        .iter()
        .rev()
        .fold(0u64, |a, &b| (a << 8) | u64::from(b));
    // A header the array cannot hold first: a truncated copy is the file's fault, not a cap
    // to raise (docs/decisions.md).
    let data_start = (8 + len_size as u64).saturating_add(header_len);
    if data_start > total {
        return Err(bad(format!(
            "a header of {header_len} bytes runs past the end of the {total}-byte array \
             (truncated?)"
        ))
        .at(8));
    }
    if header_len > MAX_HEADER_LEN {
        return Err(Error::limit(format!(
            ".npy header of {header_len} bytes exceeds the cap of {MAX_HEADER_LEN}"
        ))
        .at(8));
    }
    let text = head
        .get(8 + len_size..data_start as usize)
        .ok_or_else(|| bad("cut short in its header").at(8))?;
    // Versions 1 and 2 are latin-1; 3 is UTF-8. Only ASCII means anything in a header of
    // the three keys; other bytes can only sit inside strings.
    if utf8 && std::str::from_utf8(text).is_err() {
        return Err(bad("version 3 header is not UTF-8").at(8 + len_size as u64));
    }
    let at_header = 8 + len_size as u64;
    let fields = parse_dict(text, !utf8).map_err(|e| bad(format!("header: {e}")).at(at_header))?;
    let (descr, fortran, shape) = fields;
    let (element, byte_order) = match element_of(&descr) {
        Ok(found) => found,
        Err(e) => return Ok(Err(NotNumbers(e.at(at_header)))),
    };
    if shape.len() > limits.decode.max_rank {
        return Err(
            Error::rank_over_cap(Some(shape.len() as u64), limits.decode.max_rank).at(at_header),
        );
    }
    let count = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")).at(at_header))?;
    let size = element.logical_size();
    let data_len = count
        .checked_mul(size)
        .ok_or_else(|| bad(format!("shape {shape:?} of {descr} overflows")).at(at_header))?;
    if data_len > total - data_start {
        return Err(bad(format!(
            "shape {shape:?} of {descr} takes {data_len} bytes, but {} follow the header \
             (truncated?)",
            total - data_start
        ))
        .at(data_start));
    }
    Ok(Ok(Header {
        major,
        minor,
        data_start,
        element,
        byte_order,
        fortran,
        shape,
        data_len,
    }))
}

/// A well-formed array that is not numbers we decode (structured, object, text): a `.npy` of
/// one is refused with this error, an `.npz` lists it as what it is and skips it.
struct NotNumbers(Error);

/// What a parse found: the thing, or a well-formed array that is not numbers.
type Parsed<T> = std::result::Result<T, NotNumbers>;

/// A NumPy dtype string as an element type and byte order: what `numpy.dtype(descr)`
/// accepts for the numbers we read. numpy writes type strings (`<f4`, `|b1`, `>c16`); other
/// writers also use the order-less form (`f4`), the one-character codes (`f`, `<d`, `?`) and
/// the type names (`float32`, `int64`), which numpy reads in the reading machine's order.
fn element_of(descr: &Descr) -> Result<(ElementType, ByteOrder)> {
    let text = match descr {
        Descr::Text(t) => t.as_str(),
        Descr::Structured => {
            return Err(Error::unsupported(
                "a structured .npy array (fields are not read)",
            ))
        }
    };
    let native = if cfg!(target_endian = "big") {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
    if let Some(numeric) = numeric_by_name(text) {
        return Ok((numeric.element(), native));
    }
    let after_order = text.get(1..).unwrap_or_default();
    let (order, rest) = match text.as_bytes().first() {
        Some(b'<') => (ByteOrder::Little, after_order),
        Some(b'>') => (ByteOrder::Big, after_order),
        Some(b'|' | b'=') => (native, after_order),
        _ => (native, text),
    };
    let mut chars = rest.chars();
    let kind = chars.next();
    let size = chars.as_str();
    let numeric = if size.is_empty() {
        kind.and_then(numeric_by_code)
    } else if size.bytes().all(|b| b.is_ascii_digit()) {
        // numpy reads the size as a number: `i01` is `i1`.
        let bytes = size.trim_start_matches('0').parse::<u8>().ok();
        kind.zip(bytes).and_then(|(k, n)| numeric_by_kind(k, n))
    } else {
        None
    };
    if let Some(numeric) = numeric {
        return Ok((numeric.element(), order));
    }
    match kind {
        Some('O') => Err(Error::unsupported(
            "an object .npy array (its elements are pickles, which are never run)",
        )),
        Some('V') => Err(Error::unsupported(format!(
            "a structured or void .npy array (dtype {text:?})"
        ))),
        _ => Err(Error::unsupported(format!(
            ".npy dtype {text:?} has no zTensor equivalent"
        ))),
    }
}

/// A NumPy type string (`<f4`, `|b1`, `>c16`, `f4`) as an element type and byte order, for
/// the readers of other kinds that name NumPy dtypes (pickled arrays); the error of one that
/// holds no numbers we read names a `.npy` array.
#[cfg(feature = "pickle")]
pub(crate) fn element_of_text(text: &str) -> Result<(ElementType, ByteOrder)> {
    element_of(&Descr::Text(text.to_owned()))
}

/// The numbers a `.npy` may hold, before a byte order is attached.
#[derive(Clone, Copy)]
enum Numeric {
    Plain(DType),
    Complex64,
    Complex128,
}

impl Numeric {
    fn element(self) -> ElementType {
        match self {
            Numeric::Plain(d) => ElementType::plain(d),
            Numeric::Complex64 => ElementType {
                dtype: DType::F32,
                logical: Some(LogicalType::Complex64),
            },
            Numeric::Complex128 => ElementType {
                dtype: DType::F64,
                logical: Some(LogicalType::Complex128),
            },
        }
    }
}

/// A type string's kind and size in bytes (`f` and 4 in `<f4`).
fn numeric_by_kind(kind: char, bytes: u8) -> Option<Numeric> {
    use DType::*;
    Some(match (kind, bytes) {
        ('b', 1) => Numeric::Plain(Bool),
        ('i', 1) => Numeric::Plain(I8),
        ('i', 2) => Numeric::Plain(I16),
        ('i', 4) => Numeric::Plain(I32),
        ('i', 8) => Numeric::Plain(I64),
        ('u', 1) => Numeric::Plain(U8),
        ('u', 2) => Numeric::Plain(U16),
        ('u', 4) => Numeric::Plain(U32),
        ('u', 8) => Numeric::Plain(U64),
        ('f', 2) => Numeric::Plain(F16),
        ('f', 4) => Numeric::Plain(F32),
        ('f', 8) => Numeric::Plain(F64),
        ('c', 8) => Numeric::Complex64,
        ('c', 16) => Numeric::Complex128,
        _ => return None,
    })
}

/// numpy's one-character type codes, as numpy on a 64-bit Linux reads them (`l` is 8 bytes).
fn numeric_by_code(code: char) -> Option<Numeric> {
    use DType::*;
    Some(match code {
        '?' => Numeric::Plain(Bool),
        'b' => Numeric::Plain(I8),
        'B' => Numeric::Plain(U8),
        'h' => Numeric::Plain(I16),
        'H' => Numeric::Plain(U16),
        'i' => Numeric::Plain(I32),
        'I' => Numeric::Plain(U32),
        'l' | 'q' | 'p' => Numeric::Plain(I64),
        'L' | 'Q' | 'P' => Numeric::Plain(U64),
        'e' => Numeric::Plain(F16),
        'f' => Numeric::Plain(F32),
        'd' => Numeric::Plain(F64),
        'F' => Numeric::Complex64,
        'D' => Numeric::Complex128,
        _ => return None,
    })
}

/// numpy's type names (`float32`, `int`, `double`), which take no byte order.
fn numeric_by_name(name: &str) -> Option<Numeric> {
    use DType::*;
    Some(match name {
        "bool" | "bool_" => Numeric::Plain(Bool),
        "int8" | "byte" => Numeric::Plain(I8),
        "int16" | "short" => Numeric::Plain(I16),
        "int32" | "intc" => Numeric::Plain(I32),
        "int64" | "int" | "long" | "longlong" | "intp" => Numeric::Plain(I64),
        "uint8" | "ubyte" => Numeric::Plain(U8),
        "uint16" | "ushort" => Numeric::Plain(U16),
        "uint32" | "uintc" => Numeric::Plain(U32),
        "uint64" | "ulong" | "ulonglong" | "uintp" => Numeric::Plain(U64),
        "float16" | "half" => Numeric::Plain(F16),
        "float32" | "single" => Numeric::Plain(F32),
        "float64" | "double" | "float" => Numeric::Plain(F64),
        "complex64" | "csingle" => Numeric::Complex64,
        "complex128" | "cdouble" => Numeric::Complex128,
        _ => return None,
    })
}

/// A header's `descr`: a type string, or a structured dtype's list of fields.
#[derive(Debug)]
enum Descr {
    Text(String),
    Structured,
}

impl std::fmt::Display for Descr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Descr::Text(t) => f.write_str(t),
            Descr::Structured => f.write_str("a structured dtype"),
        }
    }
}

/// A value of the header's literal subset.
#[derive(Debug)]
enum Lit {
    Str(String),
    Int(u64),
    Bool(bool),
    None,
    /// A list, `[...]` (only a structured `descr` holds one; its items are not kept).
    List,
    /// A tuple, `(...)`: numpy's loader takes a shape only as a tuple.
    Tuple(Vec<Lit>),
    Dict(Vec<(Lit, Lit)>),
}

/// Parses a header: a dict literal with exactly the keys `descr`, `fortran_order` and `shape`,
/// as numpy's loader reads it (`ast.literal_eval`): Python's literal syntax (comments,
/// parentheses around a value, string prefixes and escapes, integers in any base, a repeated
/// key's last value) and, in versions 1 and 2 (`python2_longs`), the `L` of Python 2's long
/// integers, which numpy strips before it parses.
fn parse_dict(
    text: &[u8],
    python2_longs: bool,
) -> std::result::Result<(Descr, bool, Vec<u64>), String> {
    let mut p = Parser {
        text,
        at: 0,
        python2_longs,
    };
    let lit = p.value(0)?;
    p.space();
    if p.at != text.len() {
        return Err(format!("unexpected byte at {} after the dict", p.at));
    }
    let Lit::Dict(items) = lit else {
        return Err("not a dict".into());
    };
    // A key given twice keeps its last value, as in a Python dict.
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (k, v) in items {
        let Lit::Str(k) = k else {
            return Err("a key is not a string".into());
        };
        match k.as_str() {
            "descr" => {
                descr = Some(match v {
                    Lit::Str(s) => Descr::Text(s),
                    Lit::List | Lit::Tuple(_) => Descr::Structured,
                    _ => return Err("descr is not a string or a list".into()),
                })
            }
            "fortran_order" => {
                fortran = Some(match v {
                    Lit::Bool(b) => b,
                    _ => return Err("fortran_order is not True or False".into()),
                })
            }
            "shape" => {
                shape = Some(match v {
                    Lit::Tuple(items) => items
                        .into_iter()
                        .map(|d| match d {
                            Lit::Int(n) => Ok(n),
                            _ => Err("shape holds something other than integers".to_owned()),
                        })
                        .collect::<std::result::Result<Vec<u64>, String>>()?,
                    _ => return Err("shape is not a tuple".into()),
                })
            }
            other => return Err(format!("unexpected key {other:?}")),
        }
    }
    match (descr, fortran, shape) {
        (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
        _ => Err("it lacks one of descr, fortran_order, shape".into()),
    }
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
    /// Whether an integer may end in Python 2's `L` (format versions 1 and 2).
    python2_longs: bool,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    /// Skips whitespace and comments (`#` to the end of the line).
    fn space(&mut self) {
        loop {
            match self.peek() {
                Some(b) if b.is_ascii_whitespace() => self.at += 1,
                Some(b'#') => {
                    while self.peek().is_some_and(|b| b != b'\n') {
                        self.at += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn value(&mut self, depth: usize) -> std::result::Result<Lit, String> {
        if depth > MAX_LITERAL_DEPTH {
            return Err(format!("nested deeper than {MAX_LITERAL_DEPTH}"));
        }
        self.space();
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => self.string(q, false),
            Some(b'(') => {
                // `(x)` is x; a tuple needs a comma, or nothing: `()`, `(x,)`.
                let (mut items, comma) = self.items(b')', depth)?;
                match (items.len(), comma) {
                    (1, false) => Ok(items.pop().unwrap_or(Lit::None)),
                    _ => Ok(Lit::Tuple(items)),
                }
            }
            Some(b'[') => self.items(b']', depth).map(|_| Lit::List),
            Some(b'{') => self.dict(depth),
            Some(b'+') => {
                // Unary plus on a number, which literal_eval allows.
                self.at += 1;
                self.space();
                match self.peek() {
                    Some(b'0'..=b'9') => self.int(),
                    _ => Err(format!(
                        "'+' before something other than a number at {}",
                        self.at
                    )),
                }
            }
            Some(b'0'..=b'9') => self.int(),
            Some(b'A'..=b'Z' | b'a'..=b'z') => {
                // String prefixes: `u` changes nothing in Python 3, `r` turns escapes off.
                let prefix = self.peek();
                let quote = self.text.get(self.at + 1).copied();
                if let (Some(b'u' | b'U' | b'r' | b'R'), Some(q @ (b'\'' | b'"'))) = (prefix, quote)
                {
                    self.at += 1;
                    return self.string(q, matches!(prefix, Some(b'r' | b'R')));
                }
                let start = self.at;
                while self.peek().is_some_and(|b| b.is_ascii_alphanumeric()) {
                    self.at += 1;
                }
                match self.text.get(start..self.at) {
                    Some(b"True") => Ok(Lit::Bool(true)),
                    Some(b"False") => Ok(Lit::Bool(false)),
                    Some(b"None") => Ok(Lit::None),
                    // `L` suffixes of Python 2 integers are not words of their own.
                    _ => Err(format!("unexpected word at {start}")),
                }
            }
            Some(b) => Err(format!("unexpected byte {b:#04x} at {}", self.at)),
            None => Err("ends early".into()),
        }
    }

    /// A string in `quote`s, its escapes undone unless `raw`. The header's bytes are latin-1
    /// (versions 1, 2) or UTF-8 (3); only ASCII strings mean anything to the three keys, so
    /// each byte is kept as one char.
    fn string(&mut self, quote: u8, raw: bool) -> std::result::Result<Lit, String> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let at = self.at;
            let b = self.peek().ok_or("a string does not end")?;
            self.at += 1;
            if b == quote {
                return Ok(Lit::Str(out));
            }
            if b == b'\n' {
                return Err(format!("a line ends inside a string at {at}"));
            }
            if b != b'\\' {
                out.push(char::from(b));
                continue;
            }
            let e = self.peek().ok_or("a string does not end")?;
            self.at += 1;
            if raw {
                // A raw string keeps the backslash; it still cannot end the string.
                out.push('\\');
                out.push(char::from(e));
                continue;
            }
            match e {
                b'\n' => {}
                b'\\' | b'\'' | b'"' => out.push(char::from(e)),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'a' => out.push('\x07'),
                b'b' => out.push('\x08'),
                b'f' => out.push('\x0c'),
                b'v' => out.push('\x0b'),
                b'0'..=b'7' => {
                    let mut code = u32::from(e - b'0');
                    for _ in 0..2 {
                        match self.peek() {
                            Some(d @ b'0'..=b'7') => {
                                code = code * 8 + u32::from(d - b'0');
                                self.at += 1;
                            }
                            _ => break,
                        }
                    }
                    out.push(char::from_u32(code).ok_or("an octal escape out of range")?);
                }
                b'x' | b'u' | b'U' => {
                    let digits = match e {
                        b'x' => 2,
                        b'u' => 4,
                        _ => 8,
                    };
                    let hex = self
                        .text
                        .get(self.at..self.at + digits)
                        .and_then(|h| std::str::from_utf8(h).ok())
                        .filter(|h| h.bytes().all(|d| d.is_ascii_hexdigit()))
                        .ok_or_else(|| format!("a bad \\{} escape at {at}", char::from(e)))?;
                    self.at += digits;
                    let code = u32::from_str_radix(hex, 16)
                        .map_err(|_| format!("a bad escape at {at}"))?;
                    out.push(
                        char::from_u32(code)
                            .ok_or_else(|| format!("escape at {at} is no character"))?,
                    );
                }
                // Python keeps an unknown escape as it is (and warns).
                _ => {
                    out.push('\\');
                    out.push(char::from(e));
                }
            }
        }
    }

    /// An integer as Python writes one: decimal (no leading zeros but in `0`), `0x`, `0o`
    /// or `0b`, with single underscores between digits.
    fn int(&mut self) -> std::result::Result<Lit, String> {
        let start = self.at;
        let radix = match (
            self.peek(),
            self.text.get(self.at + 1).map(u8::to_ascii_lowercase),
        ) {
            (Some(b'0'), Some(b'x')) => 16,
            (Some(b'0'), Some(b'o')) => 8,
            (Some(b'0'), Some(b'b')) => 2,
            _ => 10,
        };
        if radix != 10 {
            self.at += 2;
            // `0x_1f` is allowed: an underscore may follow the prefix.
            if self.peek() == Some(b'_') {
                self.at += 1;
            }
        }
        let mut n = 0u64;
        let mut digits = 0usize;
        let mut leading_zero = false;
        while let Some(b) = self.peek() {
            if b == b'_' {
                // One underscore, between digits.
                match self
                    .text
                    .get(self.at + 1)
                    .map(|&d| char::from(d).to_digit(radix))
                {
                    Some(Some(_)) if digits > 0 => {
                        self.at += 1;
                        continue;
                    }
                    _ => return Err(format!("a misplaced '_' in the integer at {start}")),
                }
            }
            let Some(d) = char::from(b).to_digit(radix) else {
                break;
            };
            if radix == 10 && digits == 0 && d == 0 {
                leading_zero = true;
            }
            n = n
                .checked_mul(u64::from(radix))
                .and_then(|n| n.checked_add(u64::from(d)))
                .ok_or_else(|| format!("integer at {start} exceeds 64 bits"))?;
            digits += 1;
            self.at += 1;
        }
        if digits == 0 {
            return Err(format!("an integer without digits at {start}"));
        }
        if leading_zero && n != 0 {
            return Err(format!("a decimal integer with a leading zero at {start}"));
        }
        if self.python2_longs && self.peek() == Some(b'L') {
            self.at += 1;
        }
        if self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'.')
        {
            return Err(format!("a malformed number at {start}"));
        }
        Ok(Lit::Int(n))
    }

    /// Items up to `close`, separated by commas, with an optional trailing comma; and
    /// whether there was a comma (`(x)` is no tuple, `(x,)` is).
    fn items(&mut self, close: u8, depth: usize) -> std::result::Result<(Vec<Lit>, bool), String> {
        self.at += 1;
        let mut out = Vec::new();
        let mut comma = false;
        loop {
            self.space();
            if self.peek() == Some(close) {
                self.at += 1;
                return Ok((out, comma));
            }
            out.push(self.value(depth + 1)?);
            self.space();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    comma = true;
                }
                Some(b) if b == close => {}
                _ => return Err(format!("expected ',' at {}", self.at)),
            }
        }
    }

    fn dict(&mut self, depth: usize) -> std::result::Result<Lit, String> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            self.space();
            if self.peek() == Some(b'}') {
                self.at += 1;
                return Ok(Lit::Dict(out));
            }
            let k = self.value(depth + 1)?;
            self.space();
            if self.peek() != Some(b':') {
                return Err(format!("expected ':' at {}", self.at));
            }
            self.at += 1;
            let v = self.value(depth + 1)?;
            out.push((k, v));
            self.space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {}
                _ => return Err(format!("expected ',' at {}", self.at)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_as_numpy_writes_them_parse() {
        let (d, f, s) = parse_dict(
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   \n",
            true,
        )
        .unwrap();
        assert!(matches!(d, Descr::Text(t) if t == "<f4"));
        assert!(!f);
        assert_eq!(s, [2, 3]);
        let (_, _, s) = parse_dict(
            b"{'descr': '|b1', 'fortran_order': True, 'shape': (), }",
            true,
        )
        .unwrap();
        assert!(s.is_empty());
        let (_, _, s) = parse_dict(
            b"{'descr': '<i8', 'fortran_order': False, 'shape': (7,), }",
            true,
        )
        .unwrap();
        assert_eq!(s, [7]);
        let (d, _, _) = parse_dict(
            b"{'descr': [('a', '<i4'), ('b', '<f8')], 'fortran_order': False, 'shape': (2,), }",
            true,
        )
        .unwrap();
        assert!(matches!(d, Descr::Structured));
    }

    #[test]
    fn bad_headers_are_refused() {
        for h in [
            &b"{'descr': '<f4', 'fortran_order': False}"[..],
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
            b"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
            b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
            b"{'descr': '<f4",
        ] {
            assert!(
                parse_dict(h, true).is_err(),
                "{}",
                String::from_utf8_lossy(h)
            );
        }
    }

    #[test]
    fn every_spelling_numpy_takes_for_a_number_is_read() {
        let native = if cfg!(target_endian = "big") {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        };
        // What numpy.dtype(descr).str says for each (checked with numpy 2.4).
        for (descr, dtype, order) in [
            ("<f4", DType::F32, ByteOrder::Little),
            (">f8", DType::F64, ByteOrder::Big),
            ("f4", DType::F32, native),
            ("=u1", DType::U8, native),
            ("|f8", DType::F64, native),
            ("i01", DType::I8, native),
            ("?", DType::Bool, native),
            ("b", DType::I8, native),
            ("b1", DType::Bool, native),
            ("B", DType::U8, native),
            ("<h", DType::I16, ByteOrder::Little),
            ("l", DType::I64, native),
            ("e", DType::F16, native),
            (">d", DType::F64, ByteOrder::Big),
            ("float32", DType::F32, native),
            ("int", DType::I64, native),
            ("double", DType::F64, native),
            ("ubyte", DType::U8, native),
        ] {
            let (element, got_order) =
                element_of(&Descr::Text(descr.into())).unwrap_or_else(|e| panic!("{descr}: {e}"));
            assert_eq!((element.dtype, got_order), (dtype, order), "{descr}");
        }
        let (element, _) = element_of(&Descr::Text("D".into())).unwrap();
        assert_eq!(element.logical, Some(LogicalType::Complex128));
        // What numpy refuses, or reads as something we do not hold.
        for descr in [
            "i0", "b2", "u", "F8", "<float32", "f4 ", "?1", "<U1", "|O", "V4", "<f16",
        ] {
            assert!(element_of(&Descr::Text(descr.into())).is_err(), "{descr}");
        }
    }

    #[test]
    fn python_literal_syntax_parses_as_numpy_reads_it() {
        // Each line is a header numpy 2.4's loader reads as float32 of shape (2,).
        for h in [
            &b"{'descr': '<f4', 'fortran_order': False, 'shape': (0x2,)}"[..],
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (0b10,)} # a comment",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': ((2),)}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (+2,)}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (0o2,)}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (2_0,)}",
            b"{u'descr': u'<f4', 'fortran_order': False, 'shape': (2,)}",
            b"{'descr': r'<f4', 'fortran_order': False, 'shape': (2,)}",
            b"{'descr': '<\\x66\\u0034', 'fortran_order': False, 'shape': (2,)}",
            b"{'descr': '<i4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (2L,)}",
        ] {
            let (d, f, s) = parse_dict(h, true)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(h)));
            assert!(
                matches!(d, Descr::Text(t) if t == "<f4"),
                "{}",
                String::from_utf8_lossy(h)
            );
            assert!(!f);
            assert!(s == [2] || s == [20], "{}", String::from_utf8_lossy(h));
        }
        // What numpy refuses: Python 2's `L` in a version 3 header, leading zeros, stray
        // underscores, `l`.
        for (h, longs) in [
            (
                &b"{'descr': '<f4', 'fortran_order': False, 'shape': (2L,)}"[..],
                false,
            ),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (02,)}",
                true,
            ),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (2__0,)}",
                true,
            ),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (2_,)}",
                true,
            ),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (2l,)}",
                true,
            ),
            (
                b"{'descr': '<f4', 'fortran_order': False, 'shape': (0x,)}",
                true,
            ),
            (
                b"{'descr': '<f4\n', 'fortran_order': False, 'shape': (2,)}",
                true,
            ),
        ] {
            assert!(
                parse_dict(h, longs).is_err(),
                "{}",
                String::from_utf8_lossy(h)
            );
        }
    }
}
