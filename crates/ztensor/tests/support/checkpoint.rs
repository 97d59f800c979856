//! Zip archives and PyTorch checkpoints built by hand, as torch.save lays them out, for tests
//! that need a tensor of any size, stride and offset over a storage (and for the CLI's).

#![allow(dead_code)]

/// A zip of the given entries, as torch.save lays out a checkpoint; entries named in
/// `deflated` are deflated (torch never does this; other zip tools may).
pub fn zip(entries: &[(&str, &[u8])], deflated: &[&str]) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let (method, stored) = if deflated.contains(name) {
            let mut z =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            z.write_all(data).unwrap();
            (8u8, z.finish().unwrap())
        } else {
            (0u8, data.to_vec())
        };
        let at = out.len() as u32;
        // Readers check each entry's CRC-32 when they read it whole, as zipfile does.
        let crc = crc32fast::hash(data).to_le_bytes();
        out.extend(0x0403_4b50u32.to_le_bytes());
        out.extend([20, 0, 0, 0, method, 0, 0, 0, 0, 0]);
        out.extend(crc);
        out.extend((stored.len() as u32).to_le_bytes());
        out.extend((data.len() as u32).to_le_bytes());
        out.extend((name.len() as u16).to_le_bytes());
        out.extend([0, 0]);
        out.extend(name.as_bytes());
        out.extend(&stored);
        central.extend(0x0201_4b50u32.to_le_bytes());
        central.extend([20, 0, 20, 0, 0, 0, method, 0, 0, 0, 0, 0]);
        central.extend(crc);
        central.extend((stored.len() as u32).to_le_bytes());
        central.extend((data.len() as u32).to_le_bytes());
        central.extend((name.len() as u16).to_le_bytes());
        central.extend([0u8; 12]);
        central.extend(at.to_le_bytes());
        central.extend(name.as_bytes());
    }
    let cd_at = out.len() as u32;
    out.extend(&central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0, 0, 0, 0]);
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend(cd_at.to_le_bytes());
    out.extend([0, 0]);
    out
}

/// `{"t": tensor}` over an IntStorage "0" of `numel` elements, its record deflated or not.
pub fn checkpoint(numel: u64, offset: u64, size: &[u64], stride: &[u64], deflate: bool) -> Vec<u8> {
    let mut p = vec![0x80, 2, b'}', b'(', b'X', 1, 0, 0, 0, b't'];
    p.extend(b"ctorch._utils\n_rebuild_tensor_v2\n((");
    let text = |p: &mut Vec<u8>, s: &str| {
        p.push(b'X');
        p.extend((s.len() as u32).to_le_bytes());
        p.extend(s.as_bytes());
    };
    let int = |p: &mut Vec<u8>, v: u64| match i32::try_from(v) {
        Ok(v) => {
            p.push(b'J');
            p.extend(v.to_le_bytes());
        }
        Err(_) => {
            p.extend([0x8a, 8]);
            p.extend(v.to_le_bytes());
        }
    };
    text(&mut p, "storage");
    p.extend(b"ctorch\nIntStorage\n");
    text(&mut p, "0");
    text(&mut p, "cpu");
    int(&mut p, numel);
    p.extend(b"tQ");
    int(&mut p, offset);
    p.push(b'(');
    size.iter().for_each(|&d| int(&mut p, d));
    p.extend(b"t(");
    stride.iter().for_each(|&d| int(&mut p, d));
    p.extend(b"t\x89}tRu.");
    let storage: Vec<u8> = (0..numel.min(1 << 20) as i32)
        .flat_map(|v| (v * 7 - 3).to_le_bytes())
        .collect();
    let deflated: &[&str] = if deflate { &["archive/data/0"] } else { &[] };
    zip(
        &[
            ("archive/data.pkl", &p),
            ("archive/byteorder", b"little"),
            ("archive/data/0", &storage),
        ],
        deflated,
    )
}
