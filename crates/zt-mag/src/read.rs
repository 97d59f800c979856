//! Parsing every `.mag` layout into one validated description: tensors with absolute data
//! ranges, and metadata as attribute values.

use std::borrow::Cow;

use zt_container::{Error, Result, Source};
use zt_formats::{byte_size, element_count, ElementType};
use zt_manifest::{Attributes, Value};

use crate::dtype::{code_count, element_of, name_of_code_de};
use crate::json;
use crate::layout::Layout;
use crate::limits::{default_listing_budget, MAX_KEY_LEN, MAX_METADATA_LEN, MAX_RANK};

/// One tensor of a `.mag` file, validated: its data range lies inside the file.
#[derive(Debug, Clone, PartialEq)]
pub struct MagTensor {
    /// Key.
    pub name: String,
    /// Element type.
    pub element: ElementType,
    /// Shape, outermost first.
    pub shape: Vec<u64>,
    /// Absolute offset of the data.
    pub offset: u64,
    /// Bytes of data.
    pub length: u64,
}

/// A parsed `.mag` file.
#[derive(Debug, Clone, PartialEq)]
pub struct MagFile {
    /// The layout.
    pub layout: Layout,
    /// Metadata (version 1: i64 and f64 values; version 300: the `usr_metadata` JSON).
    pub metadata: Attributes,
    /// Tensors in file order.
    pub tensors: Vec<MagTensor>,
    /// Whether the data is big-endian (only version 300 can say so).
    pub big_endian: bool,
    /// The stored CRC-32C and whether it matched, for layouts that have one.
    pub checksum: Option<ChecksumStatus>,
}

/// A layout's checksum, as stored and as computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChecksumStatus {
    /// Stored value.
    pub stored: u32,
    /// Computed value.
    pub computed: u32,
}

/// How to parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Fail when a stored CRC-32C does not match (default). Off for reading damaged files.
    pub verify_checksum: bool,
    /// Most memory a version 300 manifest's metadata values may take once parsed
    /// (default [`zt_manifest::DEFAULT_MAX_VALUE_BYTES`]): two bytes of JSON can be a
    /// 32-byte value.
    pub max_value_bytes: u64,
    /// Most memory the list of a version 300 manifest's tensor entries may take while it is
    /// read; `None` (the default) is [`crate::default_listing_budget`] of the file's length.
    pub max_listing_bytes: Option<u64>,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            verify_checksum: true,
            max_value_bytes: zt_manifest::DEFAULT_MAX_VALUE_BYTES,
            max_listing_bytes: None,
        }
    }
}

/// A bounds-checked reader over the file.
struct Cur<'a> {
    src: &'a Source,
    pos: u64,
}

impl<'a> Cur<'a> {
    fn bytes(&mut self, n: u64, what: &str) -> Result<Cow<'a, [u8]>> {
        let at = self.pos;
        let end = at
            .checked_add(n)
            .filter(|&e| e <= self.src.len())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{what} ({n} bytes) runs past the end of the {}-byte file",
                    self.src.len()
                ))
                .at(at)
            })?;
        let b = self.src.read_at(at, n)?;
        self.pos = end;
        Ok(b)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let b = self.bytes(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(&b);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        self.array::<4>(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        self.array::<8>(what).map(u64::from_le_bytes)
    }

    fn marker(&mut self, m: &[u8; 4]) -> Result<()> {
        let at = self.pos;
        let got = self.array::<4>("section marker")?;
        if &got != m {
            return Err(Error::invalid(format!(
                "expected section marker {:?}, found {:?}",
                String::from_utf8_lossy(m),
                String::from_utf8_lossy(&got)
            ))
            .at(at));
        }
        Ok(())
    }

    /// A key of `len` bytes: non-empty, at most [`MAX_KEY_LEN`], UTF-8 without NUL.
    fn key(&mut self, len: u64) -> Result<String> {
        let at = self.pos;
        if len == 0 {
            return Err(Error::invalid("key is empty").at(at));
        }
        if len > MAX_KEY_LEN {
            return Err(Error::invalid(format!("key length {len} exceeds {MAX_KEY_LEN}")).at(at));
        }
        let b = self.bytes(len, "key")?;
        key_text(&b).map_err(|e| e.at(at))
    }
}

fn key_text(b: &[u8]) -> Result<String> {
    let s = std::str::from_utf8(b).map_err(|_| Error::invalid("key is not valid UTF-8"))?;
    if s.is_empty() {
        return Err(Error::invalid("key is empty"));
    }
    if s.contains('\0') {
        return Err(Error::invalid("key contains a NUL byte"));
    }
    Ok(s.to_owned())
}

/// Parses a `.mag` file of any layout.
pub fn parse(src: &Source, opts: ParseOptions) -> Result<MagFile> {
    let mut c = Cur { src, pos: 0 };
    let magic = c.array::<4>("magic")?;
    let version = c.u32("version")?;
    let layout = match (&magic, version) {
        (b"MAG&", 1) => Layout::GenA,
        (b"MAG!", 1) => Layout::V1,
        (b"MAG!", 100) => Layout::V100,
        (b"MAG!", 200) => Layout::V200,
        (b"MAG!", 300) => Layout::V300,
        (b"MAG&", v) => {
            return Err(
                Error::unsupported(format!("MAG& version {v}: only version 1 exists")).at(4),
            )
        }
        (b"MAG!", v) => {
            return Err(Error::unsupported(format!(
                "unknown .mag version {v}: we read versions 1, 100, 200 and 300"
            ))
            .at(4))
        }
        _ => {
            return Err(Error::invalid(format!(
                "bad magic {:?}: not a .mag file",
                String::from_utf8_lossy(&magic)
            ))
            .at(0))
        }
    };
    let mut file = match layout {
        Layout::GenA => gen_a(&mut c)?,
        Layout::V1 => gen_b(&mut c)?,
        Layout::V100 | Layout::V200 => gen_cd(&mut c, layout)?,
        Layout::V300 => gen_e(&mut c, &opts)?,
    };
    if let (Some(cs), true) = (file.checksum, opts.verify_checksum) {
        if cs.stored != cs.computed {
            return Err(Error::checksum(format!(
                "header CRC-32C mismatch: stored {:#010x}, computed {:#010x}",
                cs.stored, cs.computed
            ))
            .at(8));
        }
    }
    check_tensors(&mut file, src.len())?;
    Ok(file)
}

/// Shape rules shared by every layout: the product fits, and the data size matches it.
fn data_len(element: &ElementType, shape: &[u64]) -> Result<u64> {
    byte_size(element_count(shape)?, element)
}

/// Rejects duplicate keys, data outside the file and overlapping data ranges.
fn check_tensors(file: &mut MagFile, file_len: u64) -> Result<()> {
    let mut names: Vec<&str> = file.tensors.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w.first() == w.get(1)) {
        return Err(Error::invalid(format!(
            "duplicate tensor key {:?}",
            w.first().copied().unwrap_or("")
        )));
    }
    for t in &file.tensors {
        let end = t
            .offset
            .checked_add(t.length)
            .filter(|&e| e <= file_len)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "data of {} bytes runs past the end of the {file_len}-byte file \
                     (file truncated?)",
                    t.length
                ))
                .at(t.offset)
                .in_object(&t.name)
            })?;
        let _ = end;
    }
    let mut ranges: Vec<zt_container::BlobRange<usize>> = file
        .tensors
        .iter()
        .enumerate()
        .map(|(i, t)| zt_container::BlobRange {
            offset: t.offset,
            length: t.length,
            id: i,
        })
        .collect();
    zt_container::check_overlaps(&mut ranges).map_err(|(a, b)| {
        let n = |i: usize| {
            file.tensors
                .get(i)
                .map_or("?", |t| t.name.as_str())
                .to_owned()
        };
        Error::invalid(format!(
            "data of tensors {:?} and {:?} overlap",
            n(a.id),
            n(b.id)
        ))
        .at(b.offset)
    })
}

/// A record's element count must be the product of its shape (checked arithmetic).
fn check_numel(numel: u64, shape: &[u64], name: &str, at: u64) -> Result<()> {
    let count = element_count(shape).map_err(|e| e.in_object(name).at(at))?;
    if count != numel {
        return Err(Error::invalid(format!(
            "element count {numel} is not the product {count} of shape {shape:?}"
        ))
        .at(at)
        .in_object(name));
    }
    Ok(())
}

fn rank_ok(rank: u64, max: u64, at: u64) -> Result<usize> {
    if rank > max {
        return Err(Error::invalid(format!("rank {rank} exceeds {max}")).at(at));
    }
    Ok(rank as usize)
}

fn element(layout: Layout, code: u32, at: u64) -> Result<ElementType> {
    element_of(layout, code).ok_or_else(|| {
        Error::invalid(format!(
            "dtype code {code} is not one of the {} codes of {layout}",
            code_count(layout)
        ))
        .at(at)
    })
}

/// `MAG&` version 1: fixed 6-dim shapes, a 64-byte debug name, data back to back.
fn gen_a(c: &mut Cur<'_>) -> Result<MagFile> {
    let checksum = c.u32("checksum")?;
    if checksum != 0 {
        return Err(
            Error::invalid(format!("MAG& checksum field is {checksum:#x}, must be 0")).at(8),
        );
    }
    let count = c.u32("tensor count")?;
    let kv = c.u32("key-value count")?;
    let aux = c.u32("aux")?;
    if kv != 0 || aux != 0 {
        return Err(Error::invalid("MAG& key-value count and aux must be 0").at(16));
    }
    c.marker(b"KVDT")?;
    c.marker(b"THDR")?;
    // Each header is at least 121 bytes: a count that cannot fit is a lie, caught before looping.
    check_count(count, 121, c)?;
    let mut heads = Vec::new();
    for _ in 0..count {
        let at = c.pos;
        let klen = c.u32("key length")?;
        if klen == 0 || klen > 1024 {
            return Err(Error::invalid(format!("MAG& key length {klen} is not 1..1024")).at(at));
        }
        let mut dims = [0u64; 6];
        for d in &mut dims {
            let v = c.u64("dimension")? as i64;
            if v < 1 {
                return Err(Error::invalid(format!("dimension {v} is not positive")).at(at + 4));
            }
            *d = v as u64;
        }
        let aux_at = c.pos;
        let aux = c.u32("dtype and rank")?;
        let [code, rank, ..] = aux.to_le_bytes();
        let rank = usize::from(rank);
        if !(1..=6).contains(&rank) {
            return Err(Error::invalid(format!("rank {rank} is not 1..6")).at(aux_at));
        }
        let el = element(Layout::GenA, u32::from(code), aux_at)?;
        c.bytes(64, "debug name")?;
        let name = c.key(u64::from(klen))?;
        let shape = dims.get(..rank).unwrap_or(&[]).to_vec();
        heads.push((name, el, shape));
    }
    c.marker(b"TDAT")?;
    let mut tensors = Vec::new();
    for (name, element, shape) in heads {
        let length = data_len(&element, &shape).map_err(|e| e.in_object(&name))?;
        let offset = c.pos;
        c.pos = offset
            .checked_add(length)
            .ok_or_else(|| Error::invalid("data size overflows").in_object(&name))?;
        tensors.push(MagTensor {
            name,
            element,
            shape,
            offset,
            length,
        });
    }
    Ok(MagFile {
        layout: Layout::GenA,
        metadata: Attributes::new(),
        tensors,
        big_endian: false,
        checksum: None,
    })
}

fn check_count(count: u32, min_record: u64, c: &Cur<'_>) -> Result<()> {
    let need = u64::from(count) * min_record;
    let left = c.src.len().saturating_sub(c.pos);
    if need > left {
        return Err(Error::invalid(format!(
            "{count} records need at least {need} bytes, but only {left} remain"
        ))
        .at(c.pos));
    }
    Ok(())
}

/// `MAG!` version 1 (magnetron 0.1.2).
fn gen_b(c: &mut Cur<'_>) -> Result<MagFile> {
    let stored = c.u32("checksum")?;
    let n_tensors = c.u32("tensor count")?;
    let n_meta = c.u32("metadata count")?;
    let aux = c.u32("aux")?;
    if aux != 0 {
        return Err(Error::invalid(format!("header aux is {aux:#x}, must be 0")).at(20));
    }
    check_count(n_meta, 17, c)?;
    let mut metadata = Attributes::new();
    for _ in 0..n_meta {
        let at = c.pos;
        let aux = c.u32("metadata type")?;
        let payload = c.array::<8>("metadata payload")?;
        let klen = c.u32("key length")?;
        let key = c.key(u64::from(klen))?;
        if aux >> 8 != 0 {
            return Err(Error::invalid(format!(
                "metadata record aux {aux:#x} has bits above the type set"
            ))
            .at(at));
        }
        let value = match aux & 0xff {
            1 => Value::Integer(i64::from_le_bytes(payload).into()),
            2 => Value::Float(f64::from_le_bytes(payload)),
            t => {
                return Err(
                    Error::invalid(format!("metadata type {t} is not 1 (i64) or 2 (f64)"))
                        .at(at)
                        .in_object(&key),
                )
            }
        };
        if metadata.insert(key.clone(), value).is_some() {
            return Err(Error::invalid(format!("duplicate metadata key {key:?}")).at(at));
        }
    }
    check_count(n_tensors, 33, c)?;
    let mut tensors = Vec::new();
    for _ in 0..n_tensors {
        let at = c.pos;
        let aux = c.u32("dtype and rank")?;
        let [code, rank, a2, a3] = aux.to_le_bytes();
        if a2 != 0 || a3 != 0 {
            return Err(Error::invalid(format!(
                "tensor record aux {aux:#x} has reserved bytes set"
            ))
            .at(at));
        }
        let rank = usize::from(rank);
        if !(1..=6).contains(&rank) {
            return Err(Error::invalid(format!("rank {rank} is not 1..6")).at(at));
        }
        let element = element(Layout::V1, u32::from(code), at)?;
        let numel = c.u64("element count")?;
        let offset = c.u64("data offset")?;
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            let d = c.u64("dimension")?;
            if d == 0 {
                return Err(
                    Error::invalid("dimension 0: version 1 requires dimensions >= 1").at(at),
                );
            }
            shape.push(d);
        }
        let klen = c.u32("key length")?;
        let name = c.key(u64::from(klen))?;
        check_numel(numel, &shape, &name, at)?;
        if offset % 64 != 0 {
            return Err(
                Error::invalid(format!("data offset {offset} is not a multiple of 64"))
                    .at(at)
                    .in_object(&name),
            );
        }
        let length = data_len(&element, &shape).map_err(|e| e.in_object(&name))?;
        tensors.push(MagTensor {
            name,
            element,
            shape,
            offset,
            length,
        });
    }
    let records_end = c.pos;
    for t in &tensors {
        if t.offset < records_end {
            return Err(Error::invalid(format!(
                "data offset {} lies inside the records, which end at {records_end}",
                t.offset
            ))
            .at(t.offset)
            .in_object(&t.name));
        }
    }
    let computed = crc_of(c.src, 12, records_end)?;
    Ok(MagFile {
        layout: Layout::V1,
        metadata,
        tensors,
        big_endian: false,
        checksum: Some(ChecksumStatus { stored, computed }),
    })
}

fn crc_of(src: &Source, start: u64, end: u64) -> Result<u32> {
    let b = src.read_at(start, end.saturating_sub(start))?;
    Ok(crc32c::crc32c(&b))
}

/// `MAG!` version 100 and 200 (magnetron 0.1.5 to 0.1.9): string pool, descriptors, data.
fn gen_cd(c: &mut Cur<'_>, layout: Layout) -> Result<MagFile> {
    let _timestamp = c.u64("timestamp")?;
    let stored = c.u32("checksum")?;
    let _aux = c.u32("aux")?;
    let _meta_len = c.u32("metadata map length")?;
    let n_tensors = c.u32("tensor count")?;
    c.marker(b"SRP!")?;
    let n_strings = c.u32("string count")?;
    check_count(n_strings, 4, c)?;
    let mut ends = zt_container::internal::try_with_capacity(n_strings as usize + 1)?;
    for _ in 0..=n_strings {
        ends.push(u64::from(c.u32("string end offset")?));
    }
    if ends.first() != Some(&0) {
        return Err(Error::invalid("string pool offsets do not start at 0").at(c.pos));
    }
    if ends.windows(2).any(|w| w.first() > w.get(1)) {
        return Err(Error::invalid("string pool offsets decrease").at(c.pos));
    }
    let pool_at = c.pos;
    let pool = c.bytes(ends.last().copied().unwrap_or(0), "string pool")?;
    let mut strings = zt_container::internal::try_with_capacity(n_strings as usize)?;
    for w in ends.windows(2) {
        let (a, b) = (
            w.first().copied().unwrap_or(0) as usize,
            w.get(1).copied().unwrap_or(0) as usize,
        );
        let s = key_text(pool.get(a..b).unwrap_or(&[])).map_err(|e| e.at(pool_at + a as u64))?;
        strings.push(s);
    }
    c.marker(b"MDT!")?;
    c.marker(b"DSC!")?;
    check_count(n_tensors, 24, c)?;
    let mut descs = Vec::new();
    let mut seen_ids = std::collections::HashSet::new();
    for _ in 0..n_tensors {
        let at = c.pos;
        let packed = c.u32("rank and dtype")?;
        let [rank, code, ..] = packed.to_le_bytes();
        let rank = rank_ok(u64::from(rank), MAX_RANK as u64, at)?;
        let element = element(layout, u32::from(code), at)?;
        let key_id = c.u32("key id")?;
        let name = strings.get(key_id as usize).cloned().ok_or_else(|| {
            Error::invalid(format!(
                "key id {key_id} is not below the {} pooled strings",
                strings.len()
            ))
            .at(at)
        })?;
        if !seen_ids.insert(key_id) {
            return Err(Error::invalid(format!("duplicate tensor key {name:?}")).at(at));
        }
        let numel = c.u64("element count")?;
        let rel = c.u64("data offset")?;
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(c.u64("dimension")?);
        }
        check_numel(numel, &shape, &name, at)?;
        descs.push((at, name, element, shape, rel));
    }
    let crc_end = c.pos;
    c.marker(b"BUF!")?;
    let mut base = c.pos;
    let align = if layout == Layout::V200 { 16 } else { 1 };
    if layout == Layout::V200 {
        base = zt_container::layout::align_up(base, 16)
            .ok_or_else(|| Error::invalid("offset overflows"))?;
    }
    let mut running = 0u64;
    let mut tensors = Vec::new();
    for (at, name, element, shape, rel) in descs {
        let length = data_len(&element, &shape).map_err(|e| e.in_object(&name))?;
        let ok = if layout == Layout::V100 {
            rel == running
        } else {
            rel >= running && rel % align == 0
        };
        if !ok {
            let rule = if layout == Layout::V100 {
                "the running end"
            } else {
                "16-aligned and at or after the running end"
            };
            return Err(
                Error::invalid(format!("data offset {rel} is not {rule} {running}"))
                    .at(at)
                    .in_object(&name),
            );
        }
        let offset = base
            .checked_add(rel)
            .ok_or_else(|| Error::invalid("data offset overflows").at(at))?;
        running = rel
            .checked_add(length)
            .ok_or_else(|| Error::invalid("data size overflows").at(at))?;
        tensors.push(MagTensor {
            name,
            element,
            shape,
            offset,
            length,
        });
    }
    let computed = crc_of(c.src, 20, crc_end)?;
    Ok(MagFile {
        layout,
        metadata: Attributes::new(),
        tensors,
        big_endian: false,
        checksum: Some(ChecksumStatus { stored, computed }),
    })
}

/// `MAG!` version 300 (magnetron 0.2.x): a JSON manifest and 4096-aligned data.
fn gen_e(c: &mut Cur<'_>, opts: &ParseOptions) -> Result<MagFile> {
    let aux = c.u32("aux")?;
    if aux >> 1 != 0 {
        return Err(Error::invalid(format!("header aux {aux:#x} has reserved bits set")).at(8));
    }
    let meta_offset = c.u64("metadata offset")?;
    let meta_span = c.u64("metadata length")?;
    let blob_offset = c.u64("data offset")?;
    let blob_span = c.u64("data length")?;
    if meta_offset < 44 {
        return Err(Error::invalid(format!(
            "metadata offset {meta_offset} lies inside the 44-byte header"
        ))
        .at(12));
    }
    let meta_end = meta_offset
        .checked_add(meta_span)
        .ok_or_else(|| Error::invalid("metadata range overflows").at(12))?;
    let blob_end = blob_offset
        .checked_add(blob_span)
        .ok_or_else(|| Error::invalid("data range overflows").at(28))?;
    if meta_end > c.src.len() || blob_end > c.src.len() {
        return Err(Error::invalid(format!(
            "metadata or data range reaches past the end of the {}-byte file",
            c.src.len()
        ))
        .at(12));
    }
    if blob_offset < meta_end || blob_offset % 4096 != 0 {
        return Err(Error::invalid(format!("data offset {blob_offset} is not 4096-aligned after the metadata, which ends at {meta_end}")).at(28));
    }
    // Past the end first (the file's fault), then the cap (a limit one may raise).
    if meta_span > MAX_METADATA_LEN {
        return Err(Error::limit(format!(
            "metadata of {meta_span} bytes exceeds the cap of {MAX_METADATA_LEN} bytes"
        ))
        .at(20));
    }
    c.pos = meta_offset;
    let text = c.bytes(meta_span, "metadata")?;
    let listing = opts
        .max_listing_bytes
        .unwrap_or_else(|| default_listing_budget(c.src.len()));
    let manifest = json::parse_manifest(&text, opts.max_value_bytes, listing)
        .map_err(|e| e.at(meta_offset))?;
    let mut tensors = Vec::with_capacity(manifest.tensors.len());
    for t in manifest.tensors {
        let element = element_of(Layout::V300, t.dtype_id).ok_or_else(|| {
            Error::invalid(format!(
                "dtype_id {} is not one of the 13 codes of version 300",
                t.dtype_id
            ))
            .in_object(&t.name)
        })?;
        let _ = name_of_code_de(t.dtype_id);
        let length = data_len(&element, &t.shape).map_err(|e| e.in_object(&t.name))?;
        if length != t.nbytes {
            return Err(Error::invalid(format!(
                "nbytes {} is not shape {:?} x {}, {length}",
                t.nbytes,
                t.shape,
                element.name()
            ))
            .in_object(&t.name));
        }
        if length > 0 && t.offset % 4096 != 0 {
            return Err(Error::invalid(format!(
                "data offset {} is not a multiple of 4096",
                t.offset
            ))
            .in_object(&t.name));
        }
        let inside = t.offset.checked_add(length).is_some_and(|e| e <= blob_span);
        if !inside {
            return Err(Error::invalid(format!(
                "data [{}, +{length}) lies outside the {blob_span}-byte data section",
                t.offset
            ))
            .in_object(&t.name));
        }
        tensors.push(MagTensor {
            name: t.name,
            element,
            shape: t.shape,
            offset: blob_offset + t.offset,
            length,
        });
    }
    Ok(MagFile {
        layout: Layout::V300,
        metadata: manifest.metadata,
        tensors,
        big_endian: aux & 1 == 1,
        checksum: None,
    })
}
