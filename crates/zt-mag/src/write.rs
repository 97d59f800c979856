//! Writing `.mag` version 1 (magnetron 0.1.2) and version 300 (magnetron 0.2.x).
//!
//! The writer takes every tensor's name, type and shape first (both layouts put all records
//! before the data), writes the header and records, then streams each tensor's bytes in order.

use std::io::Write;

use zt_container::layout::align_up;
use zt_container::{Error, Result};
use zt_formats::{byte_size, element_count, ElementType};
use zt_manifest::Value;

use crate::dtype::{code_of, name_of_code_de};
use crate::json::to_json;
use crate::layout::Layout;
use crate::limits::MAX_KEY_LEN;

/// A tensor to write: its key, element type and shape.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    /// Key.
    pub name: String,
    /// Element type.
    pub element: ElementType,
    /// Shape, outermost first.
    pub shape: Vec<u64>,
}

/// Which layout to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteVersion {
    /// `MAG!` version 1, as magnetron 0.1.2 lays it out.
    V1,
    /// `MAG!` version 300, as magnetron 0.2.x lays it out.
    V300,
}

/// Streams a `.mag` file: [`MagWriter::new`] writes the header and records, then
/// [`MagWriter::write_tensor`] once per tensor in the given order, then [`MagWriter::finish`].
#[derive(Debug)]
pub struct MagWriter<W: Write> {
    sink: W,
    plan: Vec<Planned>,
    next: usize,
    position: u64,
    pad_byte: u8,
    /// Where the file ends (version 300: no padding after the last tensor).
    end: u64,
}

#[derive(Debug)]
struct Planned {
    name: String,
    offset: u64,
    length: u64,
}

const V1_HEADER: u64 = 24;
const V300_HEADER: u64 = 44;
/// The version 300 data alignment.
pub const V300_ALIGN: u64 = 4096;
/// Fixed manifest fields, so equal input gives equal bytes (magnetron itself writes the clock).
const V300_TIMESTAMP: &str = "1970-01-01T00:00:00+00:00";

fn check_key(name: &str, what: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::argument(format!("{what} key is empty")));
    }
    if name.len() as u64 > MAX_KEY_LEN {
        return Err(Error::argument(format!(
            "{what} key {name:?} is longer than {MAX_KEY_LEN} bytes"
        )));
    }
    if name.contains('\0') {
        return Err(Error::argument(format!(
            "{what} key {name:?} contains a NUL byte"
        )));
    }
    Ok(())
}

fn check_unique(tensors: &[TensorSpec]) -> Result<()> {
    let mut names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    match names.windows(2).find(|w| w.first() == w.get(1)) {
        Some(w) => Err(Error::argument(format!(
            "tensor key {:?} given twice",
            w.first().copied().unwrap_or("")
        ))),
        None => Ok(()),
    }
}

impl<W: Write> MagWriter<W> {
    /// Checks everything the layout can and cannot hold, and writes header and records.
    /// Metadata and tensors are written in the order given.
    pub fn new<'m>(
        sink: W,
        version: WriteVersion,
        metadata: impl IntoIterator<Item = (&'m str, &'m Value)>,
        tensors: &[TensorSpec],
    ) -> Result<Self> {
        check_unique(tensors)?;
        let metadata: Vec<(&str, &Value)> = metadata.into_iter().collect();
        let mut keys: Vec<&str> = metadata.iter().map(|(k, _)| *k).collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w.first() == w.get(1)) {
            return Err(Error::argument(format!(
                "metadata key {:?} given twice",
                w.first().copied().unwrap_or("")
            )));
        }
        match version {
            WriteVersion::V1 => Self::new_v1(sink, &metadata, tensors),
            WriteVersion::V300 => Self::new_v300(sink, &metadata, tensors),
        }
    }

    fn new_v1(sink: W, metadata: &[(&str, &Value)], tensors: &[TensorSpec]) -> Result<Self> {
        let mut head = Vec::new();
        head.extend_from_slice(b"MAG!");
        head.extend_from_slice(&1u32.to_le_bytes());
        head.extend_from_slice(&0u32.to_le_bytes()); // checksum, patched below
        head.extend_from_slice(
            &u32::try_from(tensors.len())
                .map_err(|_| Error::argument("too many tensors"))?
                .to_le_bytes(),
        );
        head.extend_from_slice(
            &u32::try_from(metadata.len())
                .map_err(|_| Error::argument("too much metadata"))?
                .to_le_bytes(),
        );
        head.extend_from_slice(&0u32.to_le_bytes());
        debug_assert_eq!(head.len() as u64, V1_HEADER);
        for &(key, value) in metadata {
            check_key(key, "metadata")?;
            let (kind, payload) = match value {
                Value::Integer(i) => (
                    1u32,
                    i64::try_from(*i)
                        .map_err(|_| v1_cannot(key, "an integer outside the i64 range"))?
                        .to_le_bytes(),
                ),
                Value::Bool(b) => (1, i64::from(*b).to_le_bytes()),
                Value::Float(f) => (2, f.to_le_bytes()),
                other => return Err(v1_cannot(key, &format!("a {} value", other.kind_name()))),
            };
            head.extend_from_slice(&kind.to_le_bytes());
            head.extend_from_slice(&payload);
            head.extend_from_slice(&(key.len() as u32).to_le_bytes());
            head.extend_from_slice(key.as_bytes());
        }
        // Sizes first: the records hold absolute data offsets.
        let mut lengths = Vec::with_capacity(tensors.len());
        let mut records_len = head.len() as u64;
        for t in tensors {
            check_key(&t.name, "tensor")?;
            let at = |e: Error| e.in_object(&t.name);
            if !(1..=6).contains(&t.shape.len()) {
                return Err(at(Error::argument(format!(
                    "version 1 holds ranks 1 to 6, not shape {:?}",
                    t.shape
                ))));
            }
            if t.shape.contains(&0) {
                return Err(at(Error::argument(format!(
                    "version 1 holds dimensions >= 1, not shape {:?}",
                    t.shape
                ))));
            }
            if code_of(Layout::V1, &t.element).is_none() {
                return Err(at(Error::argument(format!(
                    "version 1 holds f32, f16, bool and i32, not {}",
                    t.element.name()
                ))));
            }
            lengths.push(byte_size(element_count(&t.shape).map_err(at)?, &t.element).map_err(at)?);
            records_len += 28 + 8 * t.shape.len() as u64 + t.name.len() as u64 - 4;
        }
        let data_base =
            align_up(records_len, 64).ok_or_else(|| Error::argument("file too large"))?;
        let mut offset = data_base;
        let mut plan = Vec::with_capacity(tensors.len());
        for (t, &length) in tensors.iter().zip(&lengths) {
            let code = code_of(Layout::V1, &t.element).unwrap_or(0);
            head.extend_from_slice(&(code | (t.shape.len() as u32) << 8).to_le_bytes());
            head.extend_from_slice(&element_count(&t.shape)?.to_le_bytes());
            head.extend_from_slice(&offset.to_le_bytes());
            for d in &t.shape {
                head.extend_from_slice(&d.to_le_bytes());
            }
            head.extend_from_slice(&(t.name.len() as u32).to_le_bytes());
            head.extend_from_slice(t.name.as_bytes());
            plan.push(Planned {
                name: t.name.clone(),
                offset,
                length,
            });
            offset =
                align_up(offset + length, 64).ok_or_else(|| Error::argument("file too large"))?;
        }
        debug_assert_eq!(head.len() as u64, records_len);
        // CRC-32C over [12, end of records): magic, version and the checksum itself excluded.
        let crc = crc32c::crc32c(head.get(12..).unwrap_or(&[]));
        if let Some(slot) = head.get_mut(8..12) {
            slot.copy_from_slice(&crc.to_le_bytes());
        }
        let mut w = MagWriter {
            sink,
            plan,
            next: 0,
            position: 0,
            pad_byte: 0xFF,
            end: offset,
        };
        w.emit(&head)?;
        Ok(w)
    }

    fn new_v300(sink: W, metadata: &[(&str, &Value)], tensors: &[TensorSpec]) -> Result<Self> {
        let mut running = 0u64;
        let mut blob_span = 0u64;
        let mut plan = Vec::with_capacity(tensors.len());
        // Each tensor's entry of `tensor_map`: (its position, type code, offset, bytes).
        let mut entries = Vec::with_capacity(tensors.len());
        for (position, t) in tensors.iter().enumerate() {
            check_key(&t.name, "tensor")?;
            let at = |e: Error| e.in_object(&t.name);
            let code = code_of(Layout::V300, &t.element).ok_or_else(|| {
                at(Error::argument(format!(
                    "version 300 cannot hold {} elements",
                    t.element.name()
                )))
            })?;
            let length = byte_size(element_count(&t.shape).map_err(at)?, &t.element).map_err(at)?;
            // Empty tensors sit at the running end, unaligned, as magnetron places them.
            let offset = if length > 0 {
                align_up(running, V300_ALIGN).ok_or_else(|| Error::argument("file too large"))?
            } else {
                running
            };
            if length > 0 {
                running = offset + length;
                blob_span = running;
            }
            entries.push((position, code, offset, length));
            plan.push(Planned {
                name: t.name.clone(),
                offset,
                length,
            });
        }
        if blob_span == 0 {
            return Err(Error::argument("version 300 needs at least one tensor with data (magnetron rejects an empty data section)"));
        }
        let mut usr = serde_json::Map::new();
        for &(k, v) in metadata {
            usr.insert(k.to_owned(), to_json(k, v)?);
        }
        // The manifest as serde_json writes a tree of maps (keys sorted, no spaces), written
        // as it goes: a tree of a million tensor entries would take a kilobyte each.
        entries.sort_unstable_by(|a, b| tensors[a.0].name.cmp(&tensors[b.0].name));
        let json = |e: serde_json::Error| Error::argument(format!("cannot encode metadata: {e}"));
        let mut text = Vec::with_capacity(256 + 96 * entries.len());
        text.extend_from_slice(b"{\"magnetron_ver\":");
        serde_json::to_writer(&mut text, concat!("ztensor ", env!("CARGO_PKG_VERSION")))
            .map_err(json)?;
        text.extend_from_slice(b",\"manifest_ver\":1,\"snapshot_ver\":\"0.3.0\",\"tensor_map\":{");
        for (k, &(position, code, offset, length)) in entries.iter().enumerate() {
            let t = &tensors[position];
            if k > 0 {
                text.push(b',');
            }
            serde_json::to_writer(&mut text, &t.name).map_err(json)?;
            text.extend_from_slice(b":{\"dtype\":");
            serde_json::to_writer(&mut text, name_of_code_de(code)).map_err(json)?;
            write!(
                text,
                ",\"dtype_id\":{code},\"nbytes\":{length},\"offset\":{offset},\"shape\":"
            )
            .map_err(|e| Error::io(e, "cannot encode metadata"))?;
            serde_json::to_writer(&mut text, &t.shape).map_err(json)?;
            text.push(b'}');
        }
        text.extend_from_slice(b"},\"timestamp\":");
        serde_json::to_writer(&mut text, V300_TIMESTAMP).map_err(json)?;
        text.extend_from_slice(b",\"usr_metadata\":");
        serde_json::to_writer(&mut text, &usr).map_err(json)?;
        text.push(b'}');
        let meta_span = text.len() as u64;
        let blob_offset = align_up(V300_HEADER + meta_span, V300_ALIGN)
            .ok_or_else(|| Error::argument("metadata too large"))?;
        let mut head = Vec::with_capacity(blob_offset as usize);
        head.extend_from_slice(b"MAG!");
        head.extend_from_slice(&300u32.to_le_bytes());
        head.extend_from_slice(&0u32.to_le_bytes()); // little-endian data
        for v in [V300_HEADER, meta_span, blob_offset, blob_span] {
            head.extend_from_slice(&v.to_le_bytes());
        }
        head.extend_from_slice(&text);
        for p in &mut plan {
            p.offset += blob_offset;
        }
        let mut w = MagWriter {
            sink,
            plan,
            next: 0,
            position: 0,
            pad_byte: 0,
            end: blob_offset + blob_span,
        };
        w.emit(&head)?;
        Ok(w)
    }

    fn emit(&mut self, b: &[u8]) -> Result<()> {
        self.sink
            .write_all(b)
            .map_err(|e| Error::io(e, "cannot write .mag data"))?;
        self.position += b.len() as u64;
        Ok(())
    }

    fn pad_to(&mut self, to: u64) -> Result<()> {
        const CHUNK: usize = 4096;
        let fill = [self.pad_byte; CHUNK];
        while self.position < to {
            let n = ((to - self.position) as usize).min(CHUNK);
            self.emit(fill.get(..n).unwrap_or(&[]))?;
        }
        Ok(())
    }

    /// The key of the tensor [`MagWriter::write_tensor`] expects next.
    pub fn next_name(&self) -> Option<&str> {
        self.plan.get(self.next).map(|p| p.name.as_str())
    }

    /// Writes the next tensor's little-endian bytes (exactly its size).
    pub fn write_tensor(&mut self, bytes: &[u8]) -> Result<()> {
        let (offset, length, name) = match self.plan.get(self.next) {
            Some(p) => (p.offset, p.length, p.name.clone()),
            None => return Err(Error::argument("every tensor has been written")),
        };
        if bytes.len() as u64 != length {
            return Err(
                Error::argument(format!("{} bytes given, {length} expected", bytes.len()))
                    .in_object(&name),
            );
        }
        if length > 0 {
            self.pad_to(offset)?;
            self.emit(bytes)?;
        }
        self.next += 1;
        Ok(())
    }

    /// Pads the end (version 1: 0xFF to 64 bytes) and returns the sink, flushed.
    pub fn finish(mut self) -> Result<W> {
        if let Some(p) = self.plan.get(self.next) {
            return Err(Error::argument("tensor was declared but not written").in_object(&p.name));
        }
        self.pad_to(self.end)?;
        self.sink
            .flush()
            .map_err(|e| Error::io(e, "cannot flush"))?;
        Ok(self.sink)
    }
}

fn v1_cannot(key: &str, what: &str) -> Error {
    Error::argument(format!(
        "metadata {key:?}: version 1 holds i64 and f64 values, not {what}"
    ))
}
