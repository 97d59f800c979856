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

use zt_container::{Error, Result, Source};
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
    let mut objects = Vec::with_capacity(entries.len());
    // Deflated headers are inflated at open: their total is tied to the archive's size, so
    // many entries of large, highly compressed headers cannot make opening slow.
    let mut inflate_budget = source.len().saturating_mul(16).saturating_add(1 << 20);
    for e in &entries {
        let name = e.name.strip_suffix(".npy").unwrap_or(&e.name).to_owned();
        let listed = npz_entry(source, e, limits, &mut inflate_budget)
            .map_err(|err| err.in_object(&name))?;
        match listed {
            Ok(o) => objects.push(ObjectInfo { name, ..o }),
            // A structured, object or text array: listed as what it is, and skipped. Any
            // other refusal (a version numpy does not read) refuses the archive, as numpy does.
            Err(NotNumbers(err)) => {
                let defect = Defect::not_numbers(err.message());
                objects.push(unreadable(name, e, defect));
            }
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
    listing.zip_entries = entries;
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
    if header_len > MAX_HEADER_LEN {
        return Err(Error::limit(format!(
            ".npy header of {header_len} bytes exceeds the cap of {MAX_HEADER_LEN}"
        ))
        .at(8));
    }
    let data_start = 8 + len_size as u64 + header_len;
    if data_start > total {
        return Err(bad(format!(
            "a header of {header_len} bytes runs past the end of the {total}-byte array"
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
    let fields = parse_dict(text).map_err(|e| bad(format!("header: {e}")).at(at_header))?;
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
            "shape {shape:?} of {descr} takes {data_len} bytes, but {} follow the header",
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

/// A NumPy type string (`<f4`, `|b1`, `>c16`) as an element type and byte order.
fn element_of(descr: &Descr) -> Result<(ElementType, ByteOrder)> {
    let text = match descr {
        Descr::Text(t) => t.as_str(),
        Descr::Structured => {
            return Err(Error::unsupported(
                "a structured .npy array (fields are not read)",
            ))
        }
    };
    let mut chars = text.chars();
    let order = match chars.next() {
        Some('<') => ByteOrder::Little,
        Some('>') => ByteOrder::Big,
        Some('|') => ByteOrder::Little,
        _ => return Err(bad(format!("dtype {text:?} has no byte order"))),
    };
    let kind = chars.next();
    let size: &str = chars.as_str();
    let plain = |d| Ok((ElementType::plain(d), order));
    let complex = |d, t| {
        Ok((
            ElementType {
                dtype: d,
                logical: Some(t),
            },
            order,
        ))
    };
    match (kind, size) {
        (Some('b'), "1") => plain(DType::Bool),
        (Some('i'), "1") => plain(DType::I8),
        (Some('i'), "2") => plain(DType::I16),
        (Some('i'), "4") => plain(DType::I32),
        (Some('i'), "8") => plain(DType::I64),
        (Some('u'), "1") => plain(DType::U8),
        (Some('u'), "2") => plain(DType::U16),
        (Some('u'), "4") => plain(DType::U32),
        (Some('u'), "8") => plain(DType::U64),
        (Some('f'), "2") => plain(DType::F16),
        (Some('f'), "4") => plain(DType::F32),
        (Some('f'), "8") => plain(DType::F64),
        (Some('c'), "8") => complex(DType::F32, LogicalType::Complex64),
        (Some('c'), "16") => complex(DType::F64, LogicalType::Complex128),
        (Some('O'), _) => Err(Error::unsupported(
            "an object .npy array (its elements are pickles, which are never run)",
        )),
        (Some('V'), _) => Err(Error::unsupported(format!(
            "a structured or void .npy array (dtype {text:?})"
        ))),
        _ => Err(Error::unsupported(format!(
            ".npy dtype {text:?} has no zTensor equivalent"
        ))),
    }
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
/// followed by spaces and a newline, as NumPy writes it and requires.
fn parse_dict(text: &[u8]) -> std::result::Result<(Descr, bool, Vec<u64>), String> {
    let mut p = Parser { text, at: 0 };
    let lit = p.value(0)?;
    p.space();
    if p.at != text.len() {
        return Err(format!("unexpected byte at {} after the dict", p.at));
    }
    let Lit::Dict(items) = lit else {
        return Err("not a dict".into());
    };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (k, v) in items {
        let Lit::Str(k) = k else {
            return Err("a key is not a string".into());
        };
        let slot_taken = match k.as_str() {
            "descr" => descr.replace(match v {
                Lit::Str(s) => Descr::Text(s),
                Lit::List | Lit::Tuple(_) => Descr::Structured,
                _ => return Err("descr is not a string or a list".into()),
            }),
            "fortran_order" => fortran
                .replace(match v {
                    Lit::Bool(b) => b,
                    _ => return Err("fortran_order is not True or False".into()),
                })
                .map(|_| Descr::Structured),
            "shape" => shape
                .replace(match v {
                    Lit::Tuple(items) => items
                        .into_iter()
                        .map(|d| match d {
                            Lit::Int(n) => Ok(n),
                            _ => Err("shape holds something other than integers".to_owned()),
                        })
                        .collect::<std::result::Result<Vec<u64>, String>>()?,
                    _ => return Err("shape is not a tuple".into()),
                })
                .map(|_| Descr::Structured),
            other => return Err(format!("unexpected key {other:?}")),
        };
        if slot_taken.is_some() {
            return Err(format!("key {k:?} is given twice"));
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
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn space(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn value(&mut self, depth: usize) -> std::result::Result<Lit, String> {
        if depth > MAX_LITERAL_DEPTH {
            return Err(format!("nested deeper than {MAX_LITERAL_DEPTH}"));
        }
        self.space();
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => self.string(q),
            Some(b'(') => self.items(b')', depth).map(Lit::Tuple),
            Some(b'[') => self.items(b']', depth).map(|_| Lit::List),
            Some(b'{') => self.dict(depth),
            Some(b'0'..=b'9') => self.int(),
            Some(b'A'..=b'Z' | b'a'..=b'z') => {
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

    fn string(&mut self, quote: u8) -> std::result::Result<Lit, String> {
        let start = self.at + 1;
        let mut i = start;
        loop {
            match self.text.get(i) {
                Some(&b) if b == quote => break,
                // Escapes never occur in type strings; refusing them keeps the parser small.
                Some(b'\\') => return Err(format!("escape in a string at {i}")),
                Some(_) => i += 1,
                None => return Err("a string does not end".into()),
            }
        }
        self.at = i + 1;
        let s = self.text.get(start..i).unwrap_or_default();
        Ok(Lit::Str(s.iter().map(|&b| b as char).collect()))
    }

    fn int(&mut self) -> std::result::Result<Lit, String> {
        let start = self.at;
        let mut n = 0u64;
        while let Some(b @ b'0'..=b'9') = self.peek() {
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(b - b'0')))
                .ok_or_else(|| format!("integer at {start} exceeds 64 bits"))?;
            self.at += 1;
        }
        if self.peek() == Some(b'L') {
            self.at += 1;
        }
        Ok(Lit::Int(n))
    }

    /// Items up to `close`, separated by commas, with an optional trailing comma.
    fn items(&mut self, close: u8, depth: usize) -> std::result::Result<Vec<Lit>, String> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            self.space();
            if self.peek() == Some(close) {
                self.at += 1;
                return Ok(out);
            }
            out.push(self.value(depth + 1)?);
            self.space();
            match self.peek() {
                Some(b',') => self.at += 1,
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
        let (d, f, s) =
            parse_dict(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   \n")
                .unwrap();
        assert!(matches!(d, Descr::Text(t) if t == "<f4"));
        assert!(!f);
        assert_eq!(s, [2, 3]);
        let (_, _, s) =
            parse_dict(b"{'descr': '|b1', 'fortran_order': True, 'shape': (), }").unwrap();
        assert!(s.is_empty());
        let (_, _, s) =
            parse_dict(b"{'descr': '<i8', 'fortran_order': False, 'shape': (7,), }").unwrap();
        assert_eq!(s, [7]);
        let (d, _, _) = parse_dict(
            b"{'descr': [('a', '<i4'), ('b', '<f8')], 'fortran_order': False, 'shape': (2,), }",
        )
        .unwrap();
        assert!(matches!(d, Descr::Structured));
    }

    #[test]
    fn bad_headers_are_refused() {
        for h in [
            &b"{'descr': '<f4', 'fortran_order': False}"[..],
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
            b"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
            b"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
            b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
            b"{'descr': '<f4",
        ] {
            assert!(parse_dict(h).is_err(), "{}", String::from_utf8_lossy(h));
        }
    }
}
