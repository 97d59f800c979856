//! A small zip writer for hostile fixtures: stored or deflated entries, local headers, the
//! central directory and its end record, with the offset of every field a fixture may want
//! to make lie. Deterministic (no times, no attributes). Writes zip64 records when asked.

use std::io::Write;

/// One entry to write.
pub struct Entry {
    pub name: String,
    pub data: Vec<u8>,
    /// Deflate the data (method 8) instead of storing it.
    pub deflate: bool,
    /// Declare this uncompressed size in a zip64 extra field of the central directory
    /// record (its 32-bit field then says 0xFFFFFFFF), whatever the data inflates to.
    pub zip64_uncompressed: Option<u64>,
}

impl Entry {
    pub fn stored(name: &str, data: &[u8]) -> Self {
        Entry {
            name: name.to_owned(),
            data: data.to_vec(),
            deflate: false,
            zip64_uncompressed: None,
        }
    }

    pub fn deflated(name: &str, data: &[u8]) -> Self {
        Entry {
            name: name.to_owned(),
            data: data.to_vec(),
            deflate: true,
            zip64_uncompressed: None,
        }
    }
}

/// Where the fields of a written archive are.
#[derive(Debug, Default)]
pub struct Layout {
    /// Each entry's local header offset.
    pub local: Vec<usize>,
    /// Each entry's central directory record offset.
    pub central: Vec<usize>,
    /// The end of central directory record's offset.
    pub eocd: usize,
}

/// Writes an archive of `entries`; returns its bytes and where its records are.
pub fn write(entries: &[Entry]) -> (Vec<u8>, Layout) {
    let mut out = Vec::new();
    let mut layout = Layout::default();
    let mut records = Vec::new();
    for e in entries {
        let (method, stored) = if e.deflate {
            let mut z =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            z.write_all(&e.data).unwrap();
            (8u16, z.finish().unwrap())
        } else {
            (0u16, e.data.clone())
        };
        let crc = crc32(&e.data);
        layout.local.push(out.len());
        let header_offset = out.len() as u32;
        out.extend(0x0403_4b50u32.to_le_bytes());
        out.extend(20u16.to_le_bytes()); // version needed
        out.extend(0u16.to_le_bytes()); // flags
        out.extend(method.to_le_bytes());
        out.extend([0u8; 4]); // time, date
        out.extend(crc.to_le_bytes());
        out.extend((stored.len() as u32).to_le_bytes());
        out.extend((e.data.len() as u32).to_le_bytes());
        out.extend((e.name.len() as u16).to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(e.name.as_bytes());
        out.extend(&stored);
        records.push((e, method, crc, stored.len() as u32, header_offset));
    }
    let cd_offset = out.len();
    for (e, method, crc, compressed, header_offset) in records {
        layout.central.push(out.len());
        out.extend(0x0201_4b50u32.to_le_bytes());
        out.extend(20u16.to_le_bytes()); // version made by
        out.extend(20u16.to_le_bytes()); // version needed
        out.extend(0u16.to_le_bytes()); // flags
        out.extend(method.to_le_bytes());
        out.extend([0u8; 4]);
        out.extend(crc.to_le_bytes());
        out.extend(compressed.to_le_bytes());
        let uncompressed = match e.zip64_uncompressed {
            Some(_) => u32::MAX,
            None => e.data.len() as u32,
        };
        out.extend(uncompressed.to_le_bytes());
        out.extend((e.name.len() as u16).to_le_bytes());
        let extra_len: u16 = if e.zip64_uncompressed.is_some() {
            12
        } else {
            0
        };
        out.extend(extra_len.to_le_bytes());
        out.extend([0u8; 2 + 2 + 2 + 4]); // comment, disk, attributes
        out.extend(header_offset.to_le_bytes());
        out.extend(e.name.as_bytes());
        if let Some(n) = e.zip64_uncompressed {
            out.extend(1u16.to_le_bytes());
            out.extend(8u16.to_le_bytes());
            out.extend(n.to_le_bytes());
        }
    }
    let cd_size = out.len() - cd_offset;
    layout.eocd = out.len();
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0u8; 4]); // disks
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((cd_size as u32).to_le_bytes());
    out.extend((cd_offset as u32).to_le_bytes());
    out.extend(0u16.to_le_bytes());
    (out, layout)
}

/// Offsets of fields within a central directory record.
pub mod central {
    pub const FLAGS: usize = 8;
    pub const METHOD: usize = 10;
    pub const COMPRESSED: usize = 20;
    pub const UNCOMPRESSED: usize = 24;
}

/// Offsets of fields within the end of central directory record.
pub mod eocd {
    pub const DISK: usize = 4;
    pub const ENTRIES_HERE: usize = 8;
    pub const ENTRIES: usize = 10;
    pub const CD_SIZE: usize = 12;
    pub const CD_OFFSET: usize = 16;
}

pub fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// CRC-32 (IEEE), as zip records it and readers (ours too) check it.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
