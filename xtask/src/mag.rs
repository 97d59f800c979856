//! `.mag` fixtures: valid files of every layout (our writers for version 1 and 300, hand-built
//! bytes for `MAG&`, 100 and 200, laid out as magnetron lays them), and invalid files for every
//! rule the reader checks.

use ztensor::mag::{MagWriter, TensorSpec, WriteVersion};
use ztensor::{DType, ElementType, LogicalType, Value};

use crate::fixture_set::{Corpus, Line};

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A tensor for the hand-built layouts: key, dtype code, shape, data.
#[derive(Clone)]
struct T {
    key: &'static str,
    code: u8,
    shape: Vec<u64>,
    data: Vec<u8>,
}

fn t(key: &'static str, code: u8, shape: &[u64], data: Vec<u8>) -> T {
    T {
        key,
        code,
        shape: shape.to_vec(),
        data,
    }
}

/// `MAG&` version 1.
fn gen_a(tensors: &[T]) -> Vec<u8> {
    let mut b = b"MAG&".to_vec();
    for v in [1u32, 0, tensors.len() as u32, 0, 0] {
        b.extend(v.to_le_bytes());
    }
    b.extend(b"KVDTTHDR");
    for x in tensors {
        b.extend((x.key.len() as u32).to_le_bytes());
        for i in 0..6 {
            b.extend((x.shape.get(i).copied().unwrap_or(1) as i64).to_le_bytes());
        }
        b.extend((u32::from(x.code) | (x.shape.len() as u32) << 8).to_le_bytes());
        let mut name = [0u8; 64];
        name[..x.key.len()].copy_from_slice(x.key.as_bytes());
        b.extend(name);
        b.extend(x.key.as_bytes());
    }
    b.extend(b"TDAT");
    for x in tensors {
        b.extend(&x.data);
    }
    b
}

/// `MAG!` version 100 or 200, with the CRC-32C patched in.
fn gen_cd(version: u32, tensors: &[T]) -> Vec<u8> {
    let mut b = b"MAG!".to_vec();
    b.extend(version.to_le_bytes());
    b.extend(1_795_301_927u64.to_le_bytes()); // a fixed timestamp
    b.extend(0u32.to_le_bytes()); // CRC, patched below
    for v in [0u32, 0, tensors.len() as u32] {
        b.extend(v.to_le_bytes());
    }
    b.extend(b"SRP!");
    b.extend((tensors.len() as u32).to_le_bytes());
    let mut end = 0u32;
    b.extend(0u32.to_le_bytes());
    for x in tensors {
        end += x.key.len() as u32;
        b.extend(end.to_le_bytes());
    }
    for x in tensors {
        b.extend(x.key.as_bytes());
    }
    b.extend(b"MDT!DSC!");
    let align = if version == 200 { 16 } else { 1 };
    let mut rel = 0u64;
    let mut offsets = Vec::new();
    for (i, x) in tensors.iter().enumerate() {
        rel = rel.div_ceil(align) * align;
        offsets.push(rel);
        b.extend((u32::from(x.shape.len() as u8) | u32::from(x.code) << 8).to_le_bytes());
        b.extend((i as u32).to_le_bytes());
        b.extend(x.shape.iter().product::<u64>().to_le_bytes());
        b.extend(rel.to_le_bytes());
        for d in &x.shape {
            b.extend(d.to_le_bytes());
        }
        rel += x.data.len() as u64;
    }
    let crc = crc32c::crc32c(&b[20..]);
    b[16..20].copy_from_slice(&crc.to_le_bytes());
    b.extend(b"BUF!");
    if version == 200 {
        b.resize(b.len().div_ceil(16) * 16, 0);
    }
    let base = b.len() as u64;
    for (x, off) in tensors.iter().zip(offsets) {
        b.resize((base + off) as usize, 0);
        b.extend(&x.data);
    }
    b
}

fn ours(
    version: WriteVersion,
    meta: &[(&str, Value)],
    tensors: &[(&str, ElementType, &[u64], Vec<u8>)],
) -> Vec<u8> {
    let specs: Vec<TensorSpec> = tensors
        .iter()
        .map(|(n, e, s, _)| TensorSpec {
            name: (*n).into(),
            element: e.clone(),
            shape: s.to_vec(),
        })
        .collect();
    let mut w = MagWriter::new(
        Vec::new(),
        version,
        meta.iter().map(|(k, v)| (*k, v)),
        &specs,
    )
    .expect("valid .mag");
    for (_, _, _, d) in tensors {
        w.write_tensor(d).expect("tensor");
    }
    w.finish().expect("finish")
}

fn line(object: &str, ty: &str, shape: &[u64], data: &[u8]) -> Line {
    (
        object.into(),
        "data".into(),
        ty.into(),
        shape.to_vec(),
        data.to_vec(),
    )
}

pub fn generate(c: &mut Corpus) {
    let w6 = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let idx: Vec<u8> = [7i32, -1, 258]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let h: Vec<u8> = [1.0f32, -2.0, 0.5]
        .iter()
        .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
        .collect();
    let m = vec![1u8, 0, 1];
    let plain = |d| ElementType::plain(d);

    // Valid, every layout.
    let a = gen_a(&[
        t("w", 0, &[2, 3], w6.clone()),
        t("m", 2, &[3], m.clone()),
        t("idx", 3, &[3], idx.clone()),
    ]);
    c.add_valid_raw_lines(
        "mag_gen_a.mag",
        a,
        &[
            line("idx", "i32", &[3], &idx),
            line("m", "bool", &[3], &m),
            line("w", "f32", &[2, 3], &w6),
        ],
    );

    let meta = [
        ("lr", Value::Float(0.5)),
        ("n_layers", Value::Integer(12)),
        ("neg", Value::Integer(-2)),
    ];
    let v1 = ours(
        WriteVersion::V1,
        &meta,
        &[
            ("h", plain(DType::F16), &[3], h.clone()),
            ("idx", plain(DType::I32), &[3], idx.clone()),
            ("w", plain(DType::F32), &[2, 3], w6.clone()),
            ("m", plain(DType::Bool), &[1, 3], m.clone()),
        ],
    );
    c.add_valid_raw_lines(
        "mag_v1.mag",
        v1.clone(),
        &[
            line("h", "f16", &[3], &h),
            line("idx", "i32", &[3], &idx),
            line("m", "bool", &[1, 3], &m),
            line("w", "f32", &[2, 3], &w6),
        ],
    );

    let cd = |v| {
        let mut ts = vec![
            t("w", 0, &[2, 3], w6.clone()),
            t("h", 1, &[3], h.clone()),
            t("scalar", 0, &[], f32s(&[3.5])),
        ];
        if v == 200 {
            ts.push(t("f8", 3, &[3], vec![0x38, 0xc0, 0x30]));
            ts.push(t("i64", 12, &[1], (-3i64).to_le_bytes().to_vec()));
        } else {
            ts.push(t("i64", 11, &[1], (-3i64).to_le_bytes().to_vec()));
        }
        gen_cd(v, &ts)
    };
    let common = |mut l: Vec<Line>| {
        l.extend([
            line("h", "f16", &[3], &h),
            line("i64", "i64", &[1], &(-3i64).to_le_bytes()),
            line("scalar", "f32", &[], &f32s(&[3.5])),
            line("w", "f32", &[2, 3], &w6),
        ]);
        l.sort();
        l
    };
    c.add_valid_raw_lines("mag_v100.mag", cd(100), &common(vec![]));
    c.add_valid_raw_lines(
        "mag_v200.mag",
        cd(200),
        &common(vec![line("f8", "f8_e4m3fn", &[3], &[0x38, 0xc0, 0x30])]),
    );

    let meta300 = [
        ("arch", Value::from("tiny")),
        (
            "list",
            Value::Array(vec![Value::Integer(1), Value::Float(2.5), Value::Null]),
        ),
    ];
    let fp8 = ElementType {
        dtype: DType::U8,
        logical: Some(LogicalType::F8E4M3Fn),
    };
    let v300 = ours(
        WriteVersion::V300,
        &meta300,
        &[
            ("w", plain(DType::F32), &[2, 3], w6.clone()),
            ("empty", plain(DType::F16), &[0, 4], vec![]),
            ("f8", fp8, &[3], vec![0x38, 0xc0, 0x30]),
            ("m", plain(DType::Bool), &[3], m.clone()),
        ],
    );
    c.add_valid_raw_lines(
        "mag_v300.mag",
        v300.clone(),
        &[
            line("empty", "f16", &[0, 4], &[]),
            line("f8", "f8_e4m3fn", &[3], &[0x38, 0xc0, 0x30]),
            line("m", "bool", &[3], &m),
            line("w", "f32", &[2, 3], &w6),
        ],
    );

    invalid(c, &v1, &v300, &w6, &idx);
}

fn patched(mut b: Vec<u8>, at: usize, bytes: &[u8]) -> Vec<u8> {
    b[at..at + bytes.len()].copy_from_slice(bytes);
    b
}

/// Re-patches a version 1 file's CRC after a change, so the change itself is what is caught.
fn fix_crc_v1(mut b: Vec<u8>, records_end: usize) -> Vec<u8> {
    let crc = crc32c::crc32c(&b[12..records_end]);
    b[8..12].copy_from_slice(&crc.to_le_bytes());
    b
}

fn replace(mut b: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = b
        .windows(from.len())
        .position(|w| w == from)
        .expect("pattern present");
    b.splice(at..at + from.len(), to.iter().copied());
    b
}

fn invalid(c: &mut Corpus, v1: &[u8], v300: &[u8], w6: &[u8], idx: &[u8]) {
    let v1 = v1.to_vec();
    // Version 1 layout: header 24, metadata lr (16+2), n_layers (16+8), neg (16+3), then tensors.
    let meta_end = 24 + 18 + 24 + 19;
    let data0 = u64::from_le_bytes(
        v1[meta_end + 12..meta_end + 20]
            .try_into()
            .expect("8 bytes"),
    ) as usize;
    let rec_end = {
        // h: 24 + 8 + 1 = 33; idx: 24 + 8 + 3 = 35; w: 24 + 16 + 1 = 41; m: 24 + 16 + 1 = 41
        meta_end + 33 + 35 + 41 + 41
    };
    assert!(rec_end <= data0);
    c.invalid(
        "mag_bad_magic.mag",
        patched(v1.clone(), 0, b"MAGX"),
        "open",
        "InvalidFile",
        "bad header magic",
    );
    c.invalid(
        "mag_version_2.mag",
        patched(v1.clone(), 4, &2u32.to_le_bytes()),
        "open",
        "Unsupported",
        "unknown .mag version 2: we read versions 1, 100, 200 and 300",
    );
    c.invalid(
        "mag_ampersand_version_2.mag",
        patched(gen_a(&[]), 4, &2u32.to_le_bytes()),
        "open",
        "Unsupported",
        "MAG& version 2",
    );
    c.invalid(
        "mag_v1_crc_mismatch.mag",
        patched(v1.clone(), 8, &[0, 0, 0, 0]),
        "open",
        "ChecksumMismatch",
        "header CRC-32C mismatch",
    );
    c.invalid(
        "mag_v1_tensor_count_lies.mag",
        fix_crc_v1(patched(v1.clone(), 12, &99u32.to_le_bytes()), rec_end),
        "open",
        "InvalidFile",
        "99 records need at least",
    );
    c.invalid(
        "mag_v1_meta_count_lies.mag",
        patched(v1.clone(), 16, &1000u32.to_le_bytes()),
        "open",
        "InvalidFile",
        "1000 records need at least",
    );
    c.invalid(
        "mag_v1_header_aux.mag",
        patched(v1.clone(), 20, &1u32.to_le_bytes()),
        "open",
        "InvalidFile",
        "header aux is 0x1, must be 0",
    );
    c.invalid(
        "mag_v1_meta_type_0.mag",
        fix_crc_v1(patched(v1.clone(), 24, &0u32.to_le_bytes()), rec_end),
        "open",
        "InvalidFile",
        "metadata type 0 is not 1 (i64) or 2 (f64)",
    );
    c.invalid(
        "mag_v1_dtype_code_4.mag",
        fix_crc_v1(patched(v1.clone(), meta_end, &[4, 1, 0, 0]), rec_end),
        "open",
        "InvalidFile",
        "dtype code 4 is not one of the 4 codes of version 1",
    );
    c.invalid(
        "mag_v1_rank_7.mag",
        fix_crc_v1(patched(v1.clone(), meta_end, &[1, 7, 0, 0]), rec_end),
        "open",
        "InvalidFile",
        "rank 7 is not 1..6",
    );
    c.invalid(
        "mag_v1_numel_mismatch.mag",
        fix_crc_v1(
            patched(v1.clone(), meta_end + 4, &5u64.to_le_bytes()),
            rec_end,
        ),
        "open",
        "InvalidFile",
        "element count 5 is not the product 3 of shape [3]",
    );
    c.invalid(
        "mag_v1_misaligned.mag",
        fix_crc_v1(
            patched(
                v1.clone(),
                meta_end + 12,
                &((data0 + 4) as u64).to_le_bytes(),
            ),
            rec_end,
        ),
        "open",
        "InvalidFile",
        "is not a multiple of 64",
    );
    c.invalid(
        "mag_v1_data_past_end.mag",
        fix_crc_v1(
            patched(v1.clone(), meta_end + 12, &(1u64 << 40).to_le_bytes()),
            rec_end,
        ),
        "open",
        "InvalidFile",
        "runs past the end of the",
    );
    c.invalid(
        "mag_v1_data_in_records.mag",
        fix_crc_v1(
            patched(v1.clone(), meta_end + 12, &64u64.to_le_bytes()),
            rec_end,
        ),
        "open",
        "InvalidFile",
        "lies inside the records",
    );
    c.invalid(
        "mag_v1_overlap.mag",
        fix_crc_v1(
            patched(
                v1.clone(),
                meta_end + 33 + 12,
                &(data0 as u64).to_le_bytes(),
            ),
            rec_end,
        ),
        "open",
        "InvalidFile",
        "overlap",
    );
    // Tensor "w" renamed "h": two tensors named "h" (metadata keys are a separate namespace).
    c.invalid(
        "mag_v1_duplicate_key.mag",
        fix_crc_v1(replace(v1.clone(), b"\x01\0\0\0w", b"\x01\0\0\0h"), rec_end),
        "open",
        "InvalidFile",
        "duplicate tensor key \"h\"",
    );
    // Metadata "lr" renamed "neg": the records grow by one byte, the data stays where it was.
    c.invalid(
        "mag_v1_duplicate_meta_key.mag",
        fix_crc_v1(
            replace(v1.clone(), b"\x02\0\0\0lr", b"\x03\0\0\0neg"),
            rec_end + 1,
        ),
        "open",
        "InvalidFile",
        "duplicate metadata key \"neg\"",
    );
    c.invalid(
        "mag_v1_empty_key.mag",
        fix_crc_v1(patched(v1.clone(), 24 + 12, &0u32.to_le_bytes()), rec_end),
        "open",
        "InvalidFile",
        "key is empty",
    );
    c.invalid(
        "mag_v1_bad_utf8_key.mag",
        fix_crc_v1(
            replace(v1.clone(), b"\x02\0\0\0lr", b"\x02\0\0\0\xff\xfe"),
            rec_end,
        ),
        "open",
        "InvalidFile",
        "key is not valid UTF-8",
    );
    c.invalid(
        "mag_v1_truncated_records.mag",
        v1[..60].to_vec(),
        "open",
        "InvalidFile",
        "3 records need at least 51 bytes, but only 36 remain",
    );
    c.invalid(
        "mag_v1_truncated_data.mag",
        v1[..v1.len() - 100].to_vec(),
        "open",
        "InvalidFile",
        "runs past the end of the",
    );

    let w = |v: u32, ts: Vec<T>| gen_cd(v, &ts);
    let one = |code: u8| vec![t("w", code, &[2, 3], w6.to_vec())];
    c.invalid(
        "mag_v100_dtype_code_12.mag",
        w(100, one(12)),
        "open",
        "InvalidFile",
        "dtype code 12 is not one of the 12 codes of version 100",
    );
    c.invalid(
        "mag_v200_dtype_code_13.mag",
        w(200, one(13)),
        "open",
        "InvalidFile",
        "dtype code 13 is not one of the 13 codes of version 200",
    );
    let good100 = w(
        100,
        vec![
            t("w", 0, &[2, 3], w6.to_vec()),
            t("idx", 9, &[3], idx.to_vec()),
        ],
    );
    c.invalid(
        "mag_v100_crc_mismatch.mag",
        patched(good100.clone(), 16, &[1, 2, 3, 4]),
        "open",
        "ChecksumMismatch",
        "header CRC-32C mismatch",
    );
    c.invalid(
        "mag_v100_bad_marker.mag",
        replace(good100.clone(), b"DSC!", b"DSX!"),
        "open",
        "InvalidFile",
        "expected section marker \"DSC!\"",
    );
    c.invalid(
        "mag_v100_count_lies.mag",
        patched(good100.clone(), 28, &9999u32.to_le_bytes()),
        "open",
        "InvalidFile",
        "9999 records need at least",
    );
    c.invalid(
        "mag_v100_truncated.mag",
        good100[..good100.len() - 5].to_vec(),
        "open",
        "InvalidFile",
        "runs past the end of the",
    );
    c.invalid(
        "mag_v100_duplicate_key.mag",
        w(
            100,
            vec![
                t("w", 0, &[1], w6[..4].to_vec()),
                t("w", 0, &[1], w6[..4].to_vec()),
            ],
        ),
        "open",
        "InvalidFile",
        "duplicate tensor key \"w\"",
    );
    let pad200 = w(
        200,
        vec![t("h", 1, &[3], vec![0; 6]), t("w", 0, &[2, 3], w6.to_vec())],
    );
    // The second descriptor's relative offset is 16; make it 8 (not 16-aligned).
    c.invalid(
        "mag_v200_misaligned.mag",
        replace(pad200, &16u64.to_le_bytes(), &8u64.to_le_bytes()),
        "open",
        "InvalidFile",
        "data offset 8 is not 16-aligned and at or after the running end 6",
    );
    c.invalid(
        "mag_gen_a_checksum_nonzero.mag",
        patched(
            gen_a(&[t("w", 0, &[2, 3], w6.to_vec())]),
            8,
            &1u32.to_le_bytes(),
        ),
        "open",
        "InvalidFile",
        "MAG& checksum field is 0x1, must be 0",
    );
    c.invalid(
        "mag_gen_a_truncated.mag",
        {
            let b = gen_a(&[t("w", 0, &[2, 3], w6.to_vec())]);
            b[..b.len() - 1].to_vec()
        },
        "open",
        "InvalidFile",
        "runs past the end of the",
    );

    let v300 = v300.to_vec();
    c.invalid(
        "mag_v300_bad_json.mag",
        replace(v300.clone(), b"\"manifest_ver\":1", b"\"manifest_ver\":}"),
        "open",
        "InvalidFile",
        "metadata is not valid JSON",
    );
    c.invalid(
        "mag_v300_nbytes_lie.mag",
        replace(v300.clone(), b"\"nbytes\":24", b"\"nbytes\":28"),
        "open",
        "InvalidFile",
        "nbytes 28 is not shape [2, 3] x f32, 24",
    );
    c.invalid(
        "mag_v300_dtype_id_99.mag",
        replace(
            v300.clone(),
            b"\"dtype\":\"float32\",\"dtype_id\":0",
            b"\"dtype\":\"float3\",\"dtype_id\":99",
        ),
        "open",
        "InvalidFile",
        "dtype_id 99 is not one of the 13 codes of version 300",
    );
    c.invalid(
        "mag_v300_aux_bits.mag",
        patched(v300.clone(), 8, &2u32.to_le_bytes()),
        "open",
        "InvalidFile",
        "header aux 0x2 has reserved bits set",
    );
    c.invalid(
        "mag_v300_blob_unaligned.mag",
        patched(v300.clone(), 28, &4000u64.to_le_bytes()),
        "open",
        "InvalidFile",
        "is not 4096-aligned",
    );
    c.invalid(
        "mag_v300_truncated.mag",
        v300[..v300.len() - 1].to_vec(),
        "open",
        "InvalidFile",
        "reaches past the end of the",
    );
    c.invalid(
        "mag_v300_duplicate_key.mag",
        replace(v300.clone(), b"\"empty\":", b"\"w\":    "),
        "open",
        "InvalidFile",
        "duplicate key \"w\"",
    );
}
