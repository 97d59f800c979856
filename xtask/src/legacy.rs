//! Legacy fixtures: zTensor v0.1 and v1.1 files for every case the readers must handle.

use half::{bf16, f16};
use ztensor::container::{BlobWriter, ContainerVersion};
use ztensor::manifest::{encode_index, Component, IndexEntry, Manifest, Object};
use ztensor::{DType, Value};

use crate::fixture_set::{Corpus, Line};

/// A v1.1 object for the manifest: name, shape, format, components by role.
type V11Object<'a> = (&'a str, Vec<u64>, &'a str, Vec<(&'a str, Component)>);
/// A v1.1 object to write: name, shape, format, and per component: role, dtype, bytes, zstd.
type V11Blobs<'a> = (
    &'a str,
    Vec<u64>,
    &'a str,
    Vec<(&'a str, &'a str, Vec<u8>, bool)>,
);

/// One v0.1 entry: metadata (offset and size are filled in) and its stored bytes.
struct Entry {
    meta: IndexEntry,
    stored: Vec<u8>,
}

fn entry(name: &str, dtype: DType, shape: &[u64], layout: &str, stored: Vec<u8>) -> Entry {
    Entry {
        meta: IndexEntry {
            name: name.into(),
            dtype: dtype.long_name().into(),
            shape: shape.to_vec(),
            encoding: "raw".into(),
            layout: layout.into(),
            data_endianness: (dtype.size() > 1).then(|| "little".into()),
            ..Default::default()
        },
        stored,
    }
}

fn v01_file(entries: Vec<Entry>) -> Vec<u8> {
    let mut w = BlobWriter::new(Vec::new(), ContainerVersion::V0_1).expect("in memory");
    let mut metas = Vec::new();
    for mut e in entries {
        e.meta.offset = w.append_blob(&e.stored).expect("in memory");
        e.meta.size = e.stored.len() as u64;
        metas.push(e.meta);
    }
    w.finish(&encode_index(&metas)).expect("in memory")
}

fn crc(b: &[u8]) -> String {
    ztensor::DigestAlgorithm::Crc32c.compute(b).to_string()
}

/// A zstd stream without a content size, as the 0.1.x writers produced.
fn zstd_no_size(b: &[u8]) -> Vec<u8> {
    zstd::stream::encode_all(b, 3).expect("zstd")
}

/// Little- and big-endian bytes of deterministic values for a dtype.
fn sample(dtype: DType, n: usize) -> (Vec<u8>, Vec<u8>) {
    let mut le = Vec::new();
    for i in 0..n {
        let x = i as f64 * 1.5 - 3.0;
        let bytes: Vec<u8> = match dtype {
            DType::F64 => x.to_le_bytes().to_vec(),
            DType::F32 => (x as f32).to_le_bytes().to_vec(),
            DType::F16 => f16::from_f64(x).to_le_bytes().to_vec(),
            DType::BF16 => bf16::from_f64(x).to_le_bytes().to_vec(),
            DType::I64 => (i as i64 * -123_456_789_012).to_le_bytes().to_vec(),
            DType::I32 => (i as i32 * -70_001).to_le_bytes().to_vec(),
            DType::I16 => (i as i16 * -301).to_le_bytes().to_vec(),
            DType::U64 => (u64::MAX - i as u64 * 3).to_le_bytes().to_vec(),
            DType::U32 => (u32::MAX - i as u32 * 3).to_le_bytes().to_vec(),
            DType::U16 => (60_000 + i as u16).to_le_bytes().to_vec(),
            DType::I8 => vec![(i as i8).wrapping_mul(-7) as u8],
            DType::U8 => vec![(i as u8).wrapping_mul(9)],
            DType::Bool => vec![(i % 2) as u8],
        };
        le.extend(bytes);
    }
    let size = dtype.size();
    let mut be = le.clone();
    be.chunks_exact_mut(size).for_each(<[u8]>::reverse);
    (le, be)
}

pub fn generate(c: &mut Corpus) {
    v01_valid(c);
    v01_invalid(c);
    v11_valid(c);
    v11_invalid(c);
}

fn v01_valid(c: &mut Corpus) {
    // Every dtype, little-endian, with crc32c checksums and custom fields on some.
    let mut entries = Vec::new();
    let mut lines: Vec<(String, Vec<u64>, Vec<u8>, &str)> = Vec::new();
    for d in DType::ALL {
        let (le, _) = sample(d, 6);
        let mut e = entry(d.long_name(), d, &[2, 3], "dense", le.clone());
        if matches!(d, DType::F32 | DType::I64 | DType::Bool) {
            e.meta.checksum = Some(crc(&le));
        }
        if d == DType::F16 {
            e.meta.extra.insert("note".into(), Value::from("custom"));
            e.meta.extra.insert("step".into(), Value::from(42u32));
            e.meta.extra.insert(
                "nested".into(),
                Value::Array(vec![Value::Null, Value::Float(0.5)]),
            );
        }
        lines.push((d.long_name().into(), vec![2, 3], le, d.name()));
        entries.push(e);
    }
    let (le, _) = sample(DType::F32, 1);
    entries.push(entry("scalar", DType::F32, &[], "dense", le.clone()));
    lines.push(("scalar".into(), vec![], le, "f32"));
    let mut sha = entry("sha_checked", DType::U8, &[3], "dense", vec![1, 2, 3]);
    sha.meta.checksum = Some(
        ztensor::DigestAlgorithm::Sha256
            .compute(&[1, 2, 3])
            .to_string(),
    );
    entries.push(sha);
    lines.push(("sha_checked".into(), vec![3], vec![1, 2, 3], "u8"));
    push_valid(c, "v01_dtypes.zt", v01_file(entries), &lines);

    // Big-endian data of every multi-byte dtype, with checksums over the stored bytes.
    let mut entries = Vec::new();
    let mut lines = Vec::new();
    for d in DType::ALL.into_iter().filter(|d| d.size() > 1) {
        let (le, be) = sample(d, 5);
        let mut e = entry(&format!("be_{}", d.name()), d, &[5], "dense", be.clone());
        e.meta.data_endianness = Some("big".into());
        e.meta.checksum = Some(crc(&be));
        lines.push((format!("be_{}", d.name()), vec![5], le, d.name()));
        entries.push(e);
    }
    push_valid(c, "v01_big_endian.zt", v01_file(entries), &lines);

    // zstd without a content size in the frame; size bounded by the shape.
    let mut entries = Vec::new();
    let mut lines = Vec::new();
    for d in [DType::F32, DType::I16, DType::U8] {
        let (le, _) = sample(d, 100);
        let z = zstd_no_size(&le);
        let mut e = entry(
            &format!("zstd_{}", d.name()),
            d,
            &[10, 10],
            "dense",
            z.clone(),
        );
        e.meta.encoding = "zstd".into();
        e.meta.data_endianness = None;
        e.meta.checksum = Some(crc(&z));
        lines.push((format!("zstd_{}", d.name()), vec![10, 10], le, d.name()));
        entries.push(e);
    }
    push_valid(c, "v01_zstd.zt", v01_file(entries), &lines);

    // Sparse: each spelling, raw and zstd, little- and big-endian.
    c.add_valid_raw_lines("v01_sparse.zt", v01_file(sparse_entries()), &sparse_lines());
}

/// The sparse entries all hold the 3x4 matrix with 1.0 at (0,0), 2.0 at (2,2), 3.0 at (2,3).
fn csr_blob(big: bool) -> Vec<u8> {
    let u = |x: u64| {
        if big {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        }
    };
    let f = |x: f32| {
        if big {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        }
    };
    let mut b = Vec::new();
    for p in [0u64, 1, 1, 3] {
        b.extend(u(p));
    }
    for i in [0u64, 2, 3] {
        b.extend(u(i));
    }
    for v in [1.0f32, 2.0, 3.0] {
        b.extend(f(v));
    }
    b
}

fn coo_blob() -> Vec<u8> {
    let mut b = Vec::new();
    for (r, col, v) in [(0u64, 0u64, 1.0f32), (2, 2, 2.0), (2, 3, 3.0)] {
        b.extend(r.to_le_bytes());
        b.extend(col.to_le_bytes());
        b.extend(v.to_le_bytes());
    }
    b
}

fn sparse_entries() -> Vec<Entry> {
    let mut v = vec![
        entry(
            "csr_writer_spelling",
            DType::F32,
            &[3, 4],
            "sparsecsr",
            csr_blob(false),
        ),
        entry(
            "coo_writer_spelling",
            DType::F32,
            &[3, 4],
            "sparsecoo",
            coo_blob(),
        ),
    ];
    let mut e = entry(
        "csr_spec_spelling",
        DType::F32,
        &[3, 4],
        "sparse",
        csr_blob(false),
    );
    e.meta
        .extra
        .insert("sparse_format".into(), Value::from("csr"));
    v.push(e);
    let mut e = entry(
        "coo_spec_spelling",
        DType::F32,
        &[3, 4],
        "sparse",
        coo_blob(),
    );
    e.meta
        .extra
        .insert("sparse_format".into(), Value::from("coo"));
    e.meta.extra.insert(
        "origin".into(),
        Value::from("custom field on a sparse entry"),
    );
    v.push(e);
    let mut e = entry(
        "csr_big_endian",
        DType::F32,
        &[3, 4],
        "sparsecsr",
        csr_blob(true),
    );
    e.meta.data_endianness = Some("big".into());
    v.push(e);
    let z = zstd_no_size(&csr_blob(false));
    let mut e = entry("csr_zstd", DType::F32, &[3, 4], "sparsecsr", z.clone());
    e.meta.encoding = "zstd".into();
    e.meta.checksum = Some(crc(&z));
    v.push(e);
    v
}

/// Expectation lines of the sparse file: the one component of each entry is its decoded blob.
fn sparse_lines() -> Vec<Line> {
    let blob = |name: &str, b: Vec<u8>| {
        (
            name.to_string(),
            ztensor::LEGACY_BLOB_ROLE.to_string(),
            "u8".to_string(),
            vec![3, 4],
            b,
        )
    };
    vec![
        blob("coo_spec_spelling", coo_blob()),
        blob("coo_writer_spelling", coo_blob()),
        blob("csr_big_endian", csr_blob(true)),
        blob("csr_spec_spelling", csr_blob(false)),
        blob("csr_writer_spelling", csr_blob(false)),
        blob("csr_zstd", csr_blob(false)),
    ]
}

fn push_valid(
    c: &mut Corpus,
    file: &str,
    bytes: Vec<u8>,
    lines: &[(String, Vec<u64>, Vec<u8>, &str)],
) {
    let lines: Vec<_> = lines
        .iter()
        .map(|(n, s, b, t)| {
            (
                n.clone(),
                "data".to_string(),
                t.to_string(),
                s.clone(),
                b.clone(),
            )
        })
        .collect();
    c.add_valid_raw_lines(file, bytes, &lines);
}

fn v01_invalid(c: &mut Corpus) {
    let one = |mut e: Entry, f: &dyn Fn(&mut Entry)| {
        f(&mut e);
        v01_file(vec![e])
    };
    let f4 = || {
        entry(
            "t",
            DType::F32,
            &[2],
            "dense",
            vec![0, 0, 0x80, 0x3f, 0, 0, 0, 0x40],
        )
    };
    c.invalid(
        "v01_bad_checksum.zt",
        one(f4(), &|e| {
            e.meta.checksum = Some("crc32c:0x00000001".into())
        }),
        "verify",
        "ChecksumMismatch",
        "digest mismatch",
    );
    c.invalid(
        "v01_malformed_checksum.zt",
        one(f4(), &|e| e.meta.checksum = Some("crc32c:nothex!!".into())),
        "open",
        "InvalidFile",
        "is not 8 hex digits",
    );
    c.invalid(
        "v01_unknown_dtype.zt",
        one(f4(), &|e| e.meta.dtype = "float31".into()),
        "open",
        "InvalidFile",
        "unknown dtype \"float31\"",
    );
    c.invalid(
        "v01_bad_endianness.zt",
        one(f4(), &|e| e.meta.data_endianness = Some("middle".into())),
        "open",
        "InvalidFile",
        "data_endianness \"middle\"",
    );
    c.invalid(
        "v01_unknown_layout.zt",
        one(f4(), &|e| e.meta.layout = "blocked".into()),
        "read",
        "Unsupported",
        "unknown v0.1 layout \"blocked\"",
    );
    c.invalid(
        "v01_unknown_encoding.zt",
        one(f4(), &|e| e.meta.encoding = "lz4".into()),
        "read",
        "Unsupported",
        "unknown v0.1 encoding \"lz4\"",
    );
    c.invalid(
        "v01_sparse_without_format.zt",
        one(f4(), &|e| e.meta.layout = "sparse".into()),
        "read",
        "Unsupported",
        "v0.1 sparse entry has no sparse_format",
    );
    c.invalid(
        "v01_size_mismatch.zt",
        one(f4(), &|e| e.meta.shape = vec![3]),
        "read",
        "InvalidFile",
        "8 bytes of data, but shape [3] of f32 takes 12",
    );
    let mut e = f4();
    e.meta.layout = "sparsecsr".into();
    e.meta.shape = vec![2, 2];
    c.invalid(
        "v01_csr_too_small.zt",
        v01_file(vec![e]),
        "read",
        "InvalidFile",
        "too small for the indptr of 2 rows",
    );
    let mut bad = csr_blob(false);
    bad[8..16].copy_from_slice(&5u64.to_le_bytes());
    c.invalid(
        "v01_csr_bad_indptr.zt",
        v01_file(vec![entry("t", DType::F32, &[3, 4], "sparsecsr", bad)]),
        "read",
        "InvalidFile",
        "indptr decreases after row 1",
    );
    let mut bad = csr_blob(false);
    bad[24..32].copy_from_slice(&5u64.to_le_bytes());
    c.invalid(
        "v01_csr_indptr_past_blob.zt",
        v01_file(vec![entry("t", DType::F32, &[3, 4], "sparsecsr", bad)]),
        "read",
        "InvalidFile",
        "v0.1 CSR blob is 68 bytes, but its indptr ends at 5 values, which take 92",
    );
    let mut bad = coo_blob();
    bad[8..16].copy_from_slice(&9u64.to_le_bytes());
    c.invalid(
        "v01_coo_out_of_shape.zt",
        v01_file(vec![entry("t", DType::F32, &[3, 4], "sparsecoo", bad)]),
        "read",
        "InvalidFile",
        "coordinate 9 of value 0 on axis 1 is not below 4",
    );
    let short = zstd_no_size(&[1u8; 7]);
    let mut e = entry("t", DType::U8, &[8], "dense", short);
    e.meta.encoding = "zstd".into();
    c.invalid(
        "v01_zstd_short.zt",
        v01_file(vec![e]),
        "read",
        "InvalidFile",
        "inflates to 7 bytes, fewer than the declared 8",
    );
    let mut e = f4();
    e.stored = vec![0; 64];
    let mut b = v01_file(vec![e]);
    // Declare 2^40 bytes for the blob: the index is re-encoded with the new size.
    let mut meta = entry("t", DType::U8, &[1 << 40], "dense", vec![]).meta;
    meta.offset = 64;
    meta.size = 1 << 40;
    let index = encode_index(&[meta]);
    b.truncate(128);
    b.extend(&index);
    b.extend((index.len() as u64).to_le_bytes());
    c.invalid(
        "v01_size_2e40.zt",
        b,
        "open",
        "InvalidFile",
        "reaches past the data area",
    );
    c.invalid(
        "v01_duplicate_names.zt",
        v01_file(vec![f4(), f4()]),
        "open",
        "InvalidFile",
        "two v0.1 entries have this name",
    );
    let mut b = b"ZTEN0001".to_vec();
    b.push(0xa0);
    b.extend(1u64.to_le_bytes());
    c.invalid(
        "v01_index_not_array.zt",
        b,
        "open",
        "InvalidFile",
        "the v0.1 index must be an array, found map",
    );
    let mut b = b"ZTEN0001".to_vec();
    let idx = [0x81, 0xbf, 0x64, b's', b'i', b'z', b'e', 0x01, 0xff];
    b.extend(idx);
    b.extend((idx.len() as u64).to_le_bytes());
    c.invalid(
        "v01_missing_name.zt",
        b,
        "open",
        "InvalidFile",
        "v0.1 tensor entry has no \"name\"",
    );
    let mut b = b"ZTEN0001".to_vec();
    b.extend(0u64.to_le_bytes());
    c.invalid(
        "v01_index_size_zero.zt",
        b,
        "open",
        "InvalidFile",
        "index size is 0",
    );
}

fn v11_manifest(objects: Vec<V11Object<'_>>) -> Manifest {
    let mut m = Manifest {
        version: "1.1.0".into(),
        ..Default::default()
    };
    for (name, shape, format, comps) in objects {
        let mut o = Object {
            shape,
            format: format.into(),
            ..Default::default()
        };
        for (role, c) in comps {
            o.components.insert(role.into(), c);
        }
        m.objects.insert(name.into(), o);
    }
    m
}

/// A v1.1 file: blobs appended in order, components pointed at them.
fn v11_file(blobs: Vec<V11Blobs<'_>>, attrs: &[(&str, &str)]) -> Vec<u8> {
    let mut w = BlobWriter::new(Vec::new(), ContainerVersion::V1).expect("in memory");
    let mut objects = Vec::new();
    for (name, shape, format, comps) in blobs {
        let mut cs = Vec::new();
        for (role, dtype, bytes, zstd) in comps {
            let stored = if zstd {
                zstd::bulk::compress(&bytes, 3).expect("zstd")
            } else {
                bytes
            };
            let offset = w.append_blob(&stored).expect("in memory");
            cs.push((
                role,
                Component {
                    dtype: dtype.into(),
                    offset,
                    length: stored.len() as u64,
                    encoding: zstd.then(|| "zstd".into()),
                    digest: Some(crc(&stored)),
                    ..Default::default()
                },
            ));
        }
        objects.push((name, shape, format, cs));
    }
    let mut m = v11_manifest(objects);
    for (k, v) in attrs {
        m.attributes.insert((*k).into(), Value::from(*v));
    }
    w.finish(&m.encode()).expect("in memory")
}

fn v11_valid(c: &mut Corpus) {
    let c64: Vec<u8> = [1.0f32, 2.0, -3.0, 0.5]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let c128: Vec<u8> = [1e300f64, -2.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let fp8 = vec![0x38u8, 0x40, 0xb8, 0x00];
    let (f32s, _) = sample(DType::F32, 12);
    let idx16: Vec<u8> = [0u16, 2, 3].iter().flat_map(|x| x.to_le_bytes()).collect();
    let ptr32: Vec<u8> = [0u32, 1, 1, 3]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let vals: Vec<u8> = [1.0f32, 2.0, 3.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let bytes = v11_file(
        vec![
            (
                "c64",
                vec![2],
                "dense",
                vec![("data", "complex64", c64.clone(), false)],
            ),
            (
                "c128",
                vec![1],
                "dense",
                vec![("data", "complex128", c128.clone(), true)],
            ),
            (
                "e4m3",
                vec![4],
                "dense",
                vec![("data", "f8_e4m3", fp8.clone(), false)],
            ),
            (
                "e5m2",
                vec![4],
                "dense",
                vec![("data", "f8_e5m2", fp8.clone(), true)],
            ),
            (
                "zstd_f32",
                vec![3, 4],
                "dense",
                vec![("data", "f32", f32s.clone(), true)],
            ),
            (
                "csr_narrow",
                vec![3, 4],
                "sparse_csr",
                vec![
                    ("values", "f32", vals.clone(), true),
                    ("indices", "u16", idx16.clone(), true),
                    ("indptr", "u32", ptr32.clone(), false),
                ],
            ),
        ],
        &[("framework", "PyTorch"), ("license", "MIT")],
    );
    let lines = vec![
        ("c128", "data", "complex128", vec![1], c128),
        ("c64", "data", "complex64", vec![2], c64),
        ("csr_narrow", "indices", "u16", vec![3, 4], idx16),
        ("csr_narrow", "indptr", "u32", vec![3, 4], ptr32),
        ("csr_narrow", "values", "f32", vec![3, 4], vals),
        ("e4m3", "data", "f8_e4m3fn", vec![4], fp8.clone()),
        ("e5m2", "data", "f8_e5m2", vec![4], fp8),
        ("zstd_f32", "data", "f32", vec![3, 4], f32s),
    ];
    let lines: Vec<_> = lines
        .into_iter()
        .map(|(o, r, t, s, b)| (o.to_string(), r.to_string(), t.to_string(), s, b))
        .collect();
    c.add_valid_raw_lines("v11_types.zt", bytes, &lines);
}

fn v11_invalid(c: &mut Corpus) {
    let (f32s, _) = sample(DType::F32, 12);
    let b = v11_file(
        vec![(
            "w",
            vec![3, 5],
            "dense",
            vec![("data", "f32", f32s.clone(), true)],
        )],
        &[],
    );
    c.invalid(
        "v11_zstd_shorter_than_shape.zt",
        b,
        "read",
        "InvalidFile",
        "inflates to 48 bytes, fewer than the declared 60",
    );
    let b = v11_file(
        vec![("w", vec![3, 3], "dense", vec![("data", "f32", f32s, true)])],
        &[],
    );
    c.invalid(
        "v11_zstd_longer_than_shape.zt",
        b,
        "read",
        "InvalidFile",
        "inflates past its declared length of 36 bytes",
    );
    let b = v11_file(
        vec![(
            "w",
            vec![2],
            "dense",
            vec![("data", "complex64", vec![0; 12], false)],
        )],
        &[],
    );
    c.invalid(
        "v11_complex_odd.zt",
        b,
        "open",
        "InvalidFile",
        "12 bytes of data, but shape [2] of complex64 takes 16",
    );
    let b = v11_file(
        vec![(
            "w",
            vec![2],
            "dense",
            vec![("data", "f8_e4m3", vec![0; 2], false)],
        )],
        &[],
    );
    // Flip one hex digit of the stored digest.
    let m = b"crc32c:0x";
    let pos = b
        .windows(m.len())
        .position(|w| w == m)
        .expect("digest present")
        + m.len();
    let mut bad = b;
    bad[pos] = if bad[pos] == b'0' { b'1' } else { b'0' };
    c.invalid(
        "v11_bad_digest.zt",
        bad,
        "verify",
        "ChecksumMismatch",
        "digest mismatch",
    );
}
