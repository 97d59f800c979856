//! zTensor v2 fixtures: valid files of every layout, type and encoding the reader handles,
//! the original's three crash cases, and one invalid file per reader rule (container, CBOR,
//! schema, names, types, layouts, blobs, data). We have no v2 writer, so files are assembled
//! here from a small deterministic-CBOR encoder: blobs at 4096-byte boundaries, the manifest
//! after them, the 40-byte footer with the manifest's XXH3 last.

use ztensor::formats::{xxh3_64, DigestAlgorithm};

use crate::fixture_set::{Corpus, Line};

/// A CBOR value to encode (broken encodings are written as bytes directly).
#[derive(Clone)]
pub enum C {
    U(u64),
    N(i64),
    T(String),
    A(Vec<C>),
    M(Vec<(C, C)>),
    F16(u16),
    Null,
}

fn t(s: &str) -> C {
    C::T(s.to_owned())
}

/// A text-keyed map.
fn m(entries: Vec<(&str, C)>) -> C {
    C::M(entries.into_iter().map(|(k, v)| (t(k), v)).collect())
}

fn head(major: u8, n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    match n {
        0..=23 => out.push(major << 5 | n as u8),
        24..=0xff => out.extend([major << 5 | 24, n as u8]),
        0x100..=0xffff => {
            out.push(major << 5 | 25);
            out.extend((n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(major << 5 | 26);
            out.extend((n as u32).to_be_bytes());
        }
        _ => {
            out.push(major << 5 | 27);
            out.extend(n.to_be_bytes());
        }
    }
    out
}

/// Deterministic CBOR: shortest heads, map entries sorted by their encoded keys.
pub fn enc(c: &C) -> Vec<u8> {
    match c {
        C::U(n) => head(0, *n),
        C::N(n) => head(1, (-1 - *n) as u64),
        C::T(s) => [head(3, s.len() as u64), s.as_bytes().to_vec()].concat(),
        C::A(v) => {
            let mut out = head(4, v.len() as u64);
            v.iter().for_each(|x| out.extend(enc(x)));
            out
        }
        C::M(v) => {
            let mut items: Vec<(Vec<u8>, Vec<u8>)> =
                v.iter().map(|(k, x)| (enc(k), enc(x))).collect();
            items.sort();
            let mut out = head(5, items.len() as u64);
            for (k, x) in items {
                out.extend(k);
                out.extend(x);
            }
            out
        }
        C::F16(bits) => [vec![0xf9], bits.to_be_bytes().to_vec()].concat(),
        C::Null => vec![0xf6],
    }
}

const MAGIC: [u8; 8] = *b"\x89ZT2\r\n\x1a\n";
const PAGE: usize = 4096;

/// Blobs at successive 4096-byte boundaries from 4096: their offsets.
fn offsets(blobs: &[Vec<u8>]) -> Vec<u64> {
    let mut at = PAGE;
    blobs
        .iter()
        .map(|b| {
            let o = at;
            at += b.len().div_ceil(PAGE).max(1) * PAGE;
            o as u64
        })
        .collect()
}

/// A v2 file: the blobs at `offsets(blobs)`, then the manifest on the next boundary, then the
/// footer with the manifest's XXH3.
fn file(blobs: &[Vec<u8>], manifest: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for (b, o) in blobs.iter().zip(offsets(blobs)) {
        out.resize(o as usize, 0);
        out.extend_from_slice(b);
    }
    out.resize(out.len().div_ceil(PAGE).max(1) * PAGE, 0);
    let at = out.len() as u64;
    out.extend_from_slice(manifest);
    footer(&mut out, at, manifest.len() as u64, xxh3_64(manifest));
    out
}

fn footer(out: &mut Vec<u8>, offset: u64, length: u64, hash: u64) {
    out.extend(offset.to_le_bytes());
    out.extend(length.to_le_bytes());
    out.extend(hash.to_le_bytes());
    out.extend(2u32.to_le_bytes());
    out.extend(0u32.to_le_bytes());
    out.extend(MAGIC);
}

/// A file whose manifest is `objects` (and `extra` root entries) over `blobs`; `objects`
/// gets the blobs' offsets.
fn build(
    blobs: &[Vec<u8>],
    objects: impl Fn(&[u64]) -> Vec<(C, C)>,
    extra: Vec<(&str, C)>,
) -> Vec<u8> {
    let offs = offsets(blobs);
    let mut root = vec![(t("objects"), C::M(objects(&offs)))];
    root.extend(extra.into_iter().map(|(k, v)| (t(k), v)));
    file(blobs, &enc(&C::M(root)))
}

fn xxh3(b: &[u8]) -> C {
    t(&DigestAlgorithm::Xxh3.compute(b).to_string())
}

/// A part map: dtype, blob, digest of `data`, and `extra` fields (which replace those of
/// the same name).
fn part(dtype: &str, off: u64, data: &[u8], extra: Vec<(&str, C)>) -> C {
    let mut e = vec![
        ("dtype", t(dtype)),
        ("blob", C::A(vec![C::U(off), C::U(data.len() as u64)])),
        ("digest", xxh3(data)),
    ];
    for (k, v) in extra {
        match e.iter_mut().find(|(key, _)| *key == k) {
            Some(slot) => slot.1 = v,
            None => e.push((k, v)),
        }
    }
    m(e)
}

fn object(shape: &[u64], layout: &str, parts: Vec<(&str, C)>) -> C {
    m(vec![
        ("shape", C::A(shape.iter().map(|&d| C::U(d)).collect())),
        ("layout", t(layout)),
        ("parts", m(parts)),
    ])
}

/// The parts of a test object, given its blob's offset and bytes.
type PartsOf = fn(u64, &[u8]) -> Vec<(&'static str, C)>;

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One dense f32 object `w` of shape [2] over its 8 bytes, with `extra` part fields.
fn dense_w(extra: Vec<(&str, C)>) -> Vec<u8> {
    let data = f32s(&[1.0, 2.0]);
    let d = data.clone();
    build(
        &[data],
        move |o| {
            vec![(
                t("w"),
                object(
                    &[2],
                    "dense",
                    vec![("data", part("f32", o[0], &d, extra.clone()))],
                ),
            )]
        },
        vec![],
    )
}

/// A seekable-zstd blob of `data` in frames of `frame` bytes, as the original writes it
/// (level 3, content checksum on, no content size, no checksum column).
fn seekable(data: &[u8], frame: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut entries = Vec::new();
    for chunk in data.chunks(frame) {
        let mut c = zstd::bulk::Compressor::new(3).expect("zstd");
        c.include_checksum(true).expect("zstd");
        c.include_contentsize(false).expect("zstd");
        let z = c.compress(chunk).expect("zstd");
        entries.push((z.len() as u32, chunk.len() as u32));
        out.extend(z);
    }
    seek_table(&mut out, &entries);
    out
}

fn seek_table(out: &mut Vec<u8>, entries: &[(u32, u32)]) {
    out.extend(0x184D_2A5Eu32.to_le_bytes());
    out.extend(((entries.len() * 8 + 9) as u32).to_le_bytes());
    for (c, d) in entries {
        out.extend(c.to_le_bytes());
        out.extend(d.to_le_bytes());
    }
    out.extend((entries.len() as u32).to_le_bytes());
    out.push(0);
    out.extend(0x8F92_EAB1u32.to_le_bytes());
}

fn line(o: &str, role: &str, ty: &str, shape: &[u64], data: &[u8]) -> Line {
    (
        o.into(),
        role.into(),
        ty.into(),
        shape.to_vec(),
        data.to_vec(),
    )
}

/// Valid v2 files: every layout we map, the structural ones, types and the encoding.
pub fn valid(c: &mut Corpus) {
    // Sparse CSR with u64 indices and COO with u32 coordinates; a CSR object whose parts
    // are read one by one (the original exposed a part with the object's shape).
    let (vals, ind, ptr) = (f32s(&[1.0, 2.0, 3.0]), u64s(&[0, 2, 1]), u64s(&[0, 2, 3]));
    let (cvals, coords) = (f32s(&[4.0, 5.0]), u32s(&[0, 3, 1, 2]));
    let blobs = vec![
        vals.clone(),
        ind.clone(),
        ptr.clone(),
        cvals.clone(),
        coords.clone(),
    ];
    let bytes = build(
        &blobs,
        |o| {
            vec![
                (
                    t("csr"),
                    object(
                        &[2, 3],
                        "zt.sparse_csr/1",
                        vec![
                            ("values", part("f32", o[0], &vals, vec![])),
                            ("indices", part("u64", o[1], &ind, vec![])),
                            ("indptr", part("u64", o[2], &ptr, vec![])),
                        ],
                    ),
                ),
                (
                    t("coo"),
                    object(
                        &[4, 4],
                        "zt.sparse_coo/1",
                        vec![
                            ("values", part("f32", o[3], &cvals, vec![])),
                            ("coords", part("u32", o[4], &coords, vec![])),
                        ],
                    ),
                ),
            ]
        },
        vec![],
    );
    c.add_valid_raw_lines(
        "v2_sparse.zt",
        bytes,
        &[
            line("coo", "coords", "u32", &[4, 4], &coords),
            line("coo", "values", "f32", &[4, 4], &cvals),
            line("csr", "indices", "u64", &[2, 3], &ind),
            line("csr", "indptr", "u64", &[2, 3], &ptr),
            line("csr", "values", "f32", &[2, 3], &vals),
        ],
    );

    // The registry's structural layouts and an unknown one, and an unknown logical type
    // whose size is never judged (shape [999] over 8 bytes).
    let (q, s, g, x, fut) = (
        vec![0x12u8; 8],
        vec![0x7fu8; 2],
        vec![3u8; 18],
        vec![1u8; 5],
        vec![9u8; 8],
    );
    let blobs = vec![q.clone(), s.clone(), g.clone(), x.clone(), fut.clone()];
    let bytes = build(
        &blobs,
        |o| {
            let mut mx = object(
                &[16],
                "zt.mx/1",
                vec![
                    ("data", part("u8", o[0], &q, vec![("type", t("f4_e2m1"))])),
                    ("scales", part("u8", o[1], &s, vec![("type", t("f8_e8m0"))])),
                ],
            );
            if let C::M(e) = &mut mx {
                e.push((
                    t("attributes"),
                    m(vec![
                        ("block_size", C::U(8)),
                        ("scale_form", t("e8m0_exponent")),
                    ]),
                ));
            }
            // v2's group quantization is not our quantized_group (other parts and
            // attributes): structural. Its parts share the MX object's blobs exactly.
            let mut qg = object(
                &[16],
                "zt.quant_group/1",
                vec![
                    ("data", part("u8", o[0], &q, vec![])),
                    ("scales", part("f16", o[1], &s, vec![])),
                ],
            );
            if let C::M(e) = &mut qg {
                e.push((
                    t("attributes"),
                    m(vec![
                        ("bits", C::U(4)),
                        ("group_size", C::U(0)),
                        ("axis", C::U(0)),
                    ]),
                ));
            }
            vec![
                (t("mx"), mx),
                (t("qg"), qg),
                (
                    t("q4"),
                    object(
                        &[32],
                        "gguf.q4_0/1",
                        vec![("data", part("u8", o[2], &g, vec![]))],
                    ),
                ),
                (
                    t("custom"),
                    object(
                        &[5],
                        "x.custom/1",
                        vec![("payload", part("i8", o[3], &x, vec![]))],
                    ),
                ),
                (
                    t("future"),
                    object(
                        &[999],
                        "dense",
                        vec![(
                            "data",
                            part("u8", o[4], &fut, vec![("type", t("x.future/1"))]),
                        )],
                    ),
                ),
            ]
        },
        vec![(
            "attributes",
            m(vec![
                ("nan", C::F16(0x7e00)),
                ("neg", C::N(-2)),
                ("none", C::Null),
            ]),
        )],
    );
    c.add_valid_raw_lines(
        "v2_structural.zt",
        bytes,
        &[
            line("custom", "payload", "i8", &[5], &x),
            line("future", "data", "x.future/1", &[999], &fut),
            line("mx", "data", "f4_e2m1", &[16], &q),
            line("mx", "scales", "f8_e8m0", &[16], &s),
            line("q4", "data", "u8", &[32], &g),
            line("qg", "data", "u8", &[16], &q),
            line("qg", "scales", "f16", &[16], &s),
        ],
    );

    // Seekable zstd in three frames, complex64, FP8, and a part shared by two objects.
    let data: Vec<u8> = (0..3000u32)
        .flat_map(|i| ((i % 17) as f32).to_le_bytes())
        .collect();
    let z = seekable(&data, 4096);
    let cplx = f32s(&[1.0, -1.0, 0.5, 2.0]);
    let fp8 = vec![0x38u8, 0xb8, 0x40];
    let blobs = vec![z.clone(), cplx.clone(), fp8.clone()];
    let bytes = build(
        &blobs,
        |o| {
            let zpart = m(vec![
                ("dtype", t("f32")),
                ("blob", C::A(vec![C::U(o[0]), C::U(z.len() as u64)])),
                ("encoding", t("zt.zstd-seekable/1")),
                ("decoded_length", C::U(data.len() as u64)),
                ("digest", xxh3(&data)),
            ]);
            vec![
                (t("z"), object(&[3000], "dense", vec![("data", zpart)])),
                (
                    t("c64"),
                    object(
                        &[2],
                        "dense",
                        vec![(
                            "data",
                            part("f32", o[1], &cplx, vec![("type", t("complex64"))]),
                        )],
                    ),
                ),
                (
                    t("fp8"),
                    object(
                        &[3],
                        "dense",
                        vec![(
                            "data",
                            part("u8", o[2], &fp8, vec![("type", t("f8_e4m3fn"))]),
                        )],
                    ),
                ),
                (
                    t("fp8_again"),
                    object(
                        &[3],
                        "dense",
                        vec![(
                            "data",
                            part("u8", o[2], &fp8, vec![("type", t("f8_e4m3fn"))]),
                        )],
                    ),
                ),
            ]
        },
        vec![],
    );
    c.add_valid_raw_lines(
        "v2_encoded_types.zt",
        bytes,
        &[
            line("c64", "data", "complex64", &[2], &cplx),
            line("fp8", "data", "f8_e4m3fn", &[3], &fp8),
            line("fp8_again", "data", "f8_e4m3fn", &[3], &fp8),
            line("z", "data", "f32", &[3000], &data),
        ],
    );
}

/// Every dtype of v2 and every registered logical type on its pinned dtype, dense, two
/// elements each (the bytes count up, so each object differs).
pub fn valid_types(c: &mut Corpus) {
    let types: [(&str, Option<&str>, usize); 20] = [
        ("f64", None, 8),
        ("f32", None, 4),
        ("f16", None, 2),
        ("bf16", None, 2),
        ("i64", None, 8),
        ("i32", None, 4),
        ("i16", None, 2),
        ("i8", None, 1),
        ("u64", None, 8),
        ("u32", None, 4),
        ("u16", None, 2),
        ("u8", None, 1),
        ("u8", Some("bool"), 1),
        ("u8", Some("f8_e4m3fn"), 1),
        ("u8", Some("f8_e5m2"), 1),
        ("u8", Some("f8_e4m3fnuz"), 1),
        ("u8", Some("f8_e5m2fnuz"), 1),
        ("u8", Some("f8_e8m0"), 1),
        ("f32", Some("complex64"), 8),
        ("f64", Some("complex128"), 16),
    ];
    let blobs: Vec<Vec<u8>> = types
        .iter()
        .enumerate()
        .map(|(i, (_, ty, width))| match ty {
            Some("bool") => vec![1, 0],
            _ => (0..2 * width).map(|k| (i * 16 + k) as u8 % 0x70).collect(),
        })
        .collect();
    let name = |dtype: &str, ty: Option<&str>| ty.unwrap_or(dtype).to_owned();
    let bytes = build(
        &blobs,
        |o| {
            types
                .iter()
                .zip(&blobs)
                .zip(o)
                .map(|(((dtype, ty, _), b), &off)| {
                    let extra = ty.map(|t_| vec![("type", t(t_))]).unwrap_or_default();
                    (
                        t(&name(dtype, *ty)),
                        object(&[2], "dense", vec![("data", part(dtype, off, b, extra))]),
                    )
                })
                .collect()
        },
        vec![],
    );
    let lines: Vec<Line> = types
        .iter()
        .zip(&blobs)
        .map(|((dtype, ty, _), b)| {
            let n = name(dtype, *ty);
            line(&n, "data", &n, &[2], b)
        })
        .collect();
    c.add_valid_raw_lines("v2_every_type.zt", bytes, &lines);
}

/// One invalid file per rule, with the stage, kind and message the reader must give.
pub fn invalid(c: &mut Corpus) {
    let good = dense_w(vec![]);
    let n = good.len();
    let mut bad = |name: &str, bytes: Vec<u8>, stage: &str, kind: &str, msg: &str| {
        c.invalid(&format!("v2_{name}.zt"), bytes, stage, kind, msg);
    };
    let patched = |at: usize, with: &[u8]| {
        let mut b = good.clone();
        b[at..at + with.len()].copy_from_slice(with);
        b
    };

    // The container.
    bad(
        "too_short",
        MAGIC.iter().copied().chain([0; 39]).collect(),
        "open",
        "InvalidFile",
        "shorter than header and footer",
    );
    bad(
        "footer_magic",
        patched(n - 1, b"\x00"),
        "open",
        "InvalidFile",
        "bad v2 footer magic",
    );
    bad(
        "version_3",
        patched(n - 16, &3u32.to_le_bytes()),
        "open",
        "Unsupported",
        "v2 footer version 3",
    );
    bad(
        "manifest_cap",
        patched(n - 32, &(1u64 << 31).to_le_bytes()),
        "open",
        "LimitExceeded",
        "manifest size 2147483648 exceeds the cap",
    );
    bad(
        "manifest_misaligned",
        patched(n - 40, &4097u64.to_le_bytes()),
        "open",
        "InvalidFile",
        "manifest: blob offset 4097 is not a multiple of 4096",
    );
    bad(
        "manifest_past_footer",
        patched(n - 32, &4000u64.to_le_bytes()),
        "open",
        "InvalidFile",
        "manifest: blob [8192, 12192) reaches past the data area",
    );
    bad(
        "manifest_hash",
        patched(n - 24, &1u64.to_le_bytes()),
        "open",
        "ChecksumMismatch",
        "manifest hash mismatch",
    );
    let mut shard = MAGIC.to_vec();
    footer(&mut shard, 4096, 0, 0);
    bad(
        "data_shard_offset",
        shard,
        "open",
        "InvalidFile",
        "data shard footer (manifest length 0) has a non-zero manifest offset",
    );
    // The original's third crash: an append that failed after its first blobs reached the
    // disk leaves the old file, then new blob bytes, and no footer at the end. The file is
    // what its last 40 bytes say; they are not a footer, and nothing is guessed.
    let mut torn = good.clone();
    torn.resize(torn.len().div_ceil(PAGE) * PAGE + 100, 0x5a);
    bad(
        "torn_append",
        torn,
        "open",
        "InvalidFile",
        "bad v2 footer magic (file truncated or appended to?)",
    );

    // Deterministic CBOR, each rule once: the manifest `{ "objects": <item> }` or a whole
    // manifest of raw bytes.
    let raw_manifest = |bytes: &[u8]| file(&[], bytes);
    let objects_is = |item: &[u8]| raw_manifest(&[&[0xa1, 0x67][..], b"objects", item].concat());
    bad(
        "cbor_not_shortest",
        objects_is(&[0xb8, 0x00]),
        "open",
        "InvalidFile",
        "CBOR head is not the shortest for its argument 0",
    );
    bad(
        "cbor_indefinite",
        objects_is(&[0xbf, 0xff]),
        "open",
        "InvalidFile",
        "CBOR indefinite length is not allowed",
    );
    bad(
        "cbor_tag",
        objects_is(&[0xc0, 0xa0]),
        "open",
        "InvalidFile",
        "CBOR tags are not allowed",
    );
    bad(
        "cbor_trailing",
        raw_manifest(&[
            0xa1, 0x67, b'o', b'b', b'j', b'e', b'c', b't', b's', 0xa0, 0x00,
        ]),
        "open",
        "InvalidFile",
        "CBOR: 1 trailing bytes after the manifest",
    );
    bad(
        "cbor_unsorted",
        raw_manifest(
            &[
                vec![0xa2],
                enc(&t("attributes")),
                vec![0xa0],
                enc(&t("objects")),
                vec![0xa0],
            ]
            .concat(),
        ),
        "open",
        "InvalidFile",
        "key \"objects\" of the manifest is out of order",
    );
    bad(
        "cbor_duplicate",
        raw_manifest(
            &[
                vec![0xa2],
                enc(&t("objects")),
                vec![0xa0],
                enc(&t("objects")),
                vec![0xa0],
            ]
            .concat(),
        ),
        "open",
        "InvalidFile",
        "duplicate key \"objects\" in the manifest",
    );
    let attrs_is = |item: &[u8]| {
        raw_manifest(
            &[
                vec![0xa2],
                enc(&t("objects")),
                vec![0xa0],
                enc(&t("attributes")),
                vec![0xa1],
                enc(&t("k")),
                item.to_vec(),
            ]
            .concat(),
        )
    };
    bad(
        "cbor_undefined",
        attrs_is(&[0xf7]),
        "open",
        "InvalidFile",
        "CBOR simple value 23 is not allowed",
    );
    bad(
        "cbor_float_not_shortest",
        attrs_is(&[0xfa, 0x3e, 0x80, 0, 0]),
        "open",
        "InvalidFile",
        "CBOR float fits a shorter width than single",
    );
    bad(
        "cbor_nan",
        attrs_is(&[0xfb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 1]),
        "open",
        "InvalidFile",
        "CBOR NaN must be encoded as f9 7e00",
    );
    bad(
        "cbor_depth",
        attrs_is(&[vec![0x81; 40], vec![0]].concat()),
        "open",
        "InvalidFile",
        "CBOR nesting deeper than 32 levels",
    );
    bad(
        "cbor_length",
        attrs_is(&[0x7a, 0x7f, 0xff, 0xff, 0xff]),
        "open",
        "InvalidFile",
        "CBOR length 2147483647 is larger than",
    );
    bad(
        "cbor_utf8",
        attrs_is(&[0x62, 0xff, 0xfe]),
        "open",
        "InvalidFile",
        "is not valid UTF-8",
    );

    // The schema and names.
    bad(
        "no_objects",
        raw_manifest(&[0xa0]),
        "open",
        "InvalidFile",
        "manifest has no \"objects\" map",
    );
    let one = |name: &str, o: C| file(&[], &enc(&m(vec![("objects", C::M(vec![(t(name), o)]))])));
    bad(
        "no_parts",
        one("w", object(&[2], "dense", vec![])),
        "open",
        "InvalidFile",
        "object has no parts",
    );
    bad(
        "no_shape",
        one("w", m(vec![("layout", t("dense")), ("parts", m(vec![]))])),
        "open",
        "InvalidFile",
        "object has no \"shape\"",
    );
    bad(
        "name_empty",
        one("", object(&[0], "dense", vec![])),
        "open",
        "InvalidFile",
        "object name is empty",
    );
    bad(
        "name_nul",
        one("a\0b", object(&[0], "dense", vec![])),
        "open",
        "InvalidFile",
        "contains NUL",
    );
    bad(
        "name_long",
        one(&"n".repeat(1025), object(&[0], "dense", vec![])),
        "open",
        "InvalidFile",
        "object name of 1025 bytes is longer than 1024",
    );
    bad(
        "rank_65",
        one("w", object(&[1; 65], "dense", vec![])),
        "open",
        "LimitExceeded",
        "rank 65 exceeds the cap of 64 dimensions",
    );
    bad(
        "blob_three",
        dense_w(vec![("blob", C::A(vec![C::U(4096), C::U(8), C::U(0)]))]),
        "open",
        "InvalidFile",
        "blob must be [offset, length], not 3 elements",
    );
    bad(
        "decoded_length_alone",
        dense_w(vec![("decoded_length", C::U(8))]),
        "open",
        "InvalidFile",
        "\"decoded_length\" exactly when it has \"encoding\"",
    );
    bad(
        "encoding_alone",
        dense_w(vec![("encoding", t("zt.zstd-seekable/1"))]),
        "open",
        "InvalidFile",
        "\"decoded_length\" exactly when it has \"encoding\"",
    );
    bad(
        "dtype_bool",
        dense_w(vec![("dtype", t("bool"))]),
        "open",
        "InvalidFile",
        "unknown dtype \"bool\"",
    );
    bad(
        "dtype_f4",
        dense_w(vec![("dtype", t("f4"))]),
        "open",
        "InvalidFile",
        "unknown dtype \"f4\"",
    );
    bad(
        "type_wrong_dtype",
        dense_w(vec![("type", t("bool"))]),
        "open",
        "InvalidFile",
        "type bool must be stored as dtype u8, not f32",
    );
    bad(
        "digest_uppercase",
        dense_w(vec![("digest", t("xxh3:0123456789ABCDEF"))]),
        "open",
        "InvalidFile",
        "is not lowercase hex digits",
    );
    bad(
        "digest_short",
        dense_w(vec![("digest", t("xxh3:0123"))]),
        "open",
        "InvalidFile",
        "is not 16 hex digits",
    );
    bad(
        "digest_no_algorithm",
        dense_w(vec![("digest", t("0123"))]),
        "open",
        "InvalidFile",
        "is not of the form algorithm:hex",
    );
    bad(
        "shard_unknown",
        dense_w(vec![("shard", t("00001-of-00001"))]),
        "open",
        "InvalidFile",
        "part names shard \"00001-of-00001\", which the shard table does not list",
    );
    bad(
        "shard_ref_path",
        dense_w(vec![("shard", t("../x"))]),
        "open",
        "InvalidFile",
        "shard name \"../x\" contains '/'",
    );
    let with_shard_entry = |name: &str, size: u64, digest: &str| {
        build(
            &[],
            |_| vec![],
            vec![(
                "shards",
                C::M(vec![(
                    t(name),
                    m(vec![("size", C::U(size)), ("digest", t(digest))]),
                )]),
            )],
        )
    };
    let with_shard = |name: &str| with_shard_entry(name, 4096, "sha256:00");
    bad(
        "shard_size_small",
        with_shard_entry("00001-of-00001", 47, &format!("sha256:{}", "0".repeat(64))),
        "open",
        "InvalidFile",
        "shard \"00001-of-00001\": size 47 is smaller than any v2 file",
    );
    bad(
        "shard_digest_uppercase",
        with_shard_entry("00001-of-00001", 4096, "sha256:AB"),
        "open",
        "InvalidFile",
        "shard \"00001-of-00001\": digest \"sha256:AB\" is not lowercase hex digits",
    );
    bad(
        "attribute_name_empty",
        build(
            &[],
            |_| vec![],
            vec![("attributes", m(vec![("", C::U(1))]))],
        ),
        "open",
        "InvalidFile",
        "attribute name is empty",
    );
    bad(
        "part_name_nul",
        one("w", object(&[2], "dense", vec![("d\0", m(vec![]))])),
        "open",
        "InvalidFile",
        "part name \"d\\0\" contains NUL",
    );
    bad(
        "shard_name_dotdot",
        with_shard(".."),
        "open",
        "InvalidFile",
        "shard name \"..\" starts with a dot or contains \"..\"",
    );
    bad(
        "shard_name_hidden",
        with_shard(".x"),
        "open",
        "InvalidFile",
        "shard name \".x\" starts with a dot",
    );
    bad(
        "shard_name_slash",
        with_shard("a/b"),
        "open",
        "InvalidFile",
        "shard name \"a/b\" contains '/'",
    );
    bad(
        "shard_name_backslash",
        with_shard("a\\b"),
        "open",
        "InvalidFile",
        "contains '\\\\'",
    );

    // Layouts.
    let data = f32s(&[1.0, 2.0]);
    let d2 = data.clone();
    let dense_of = |shape: &'static [u64], parts: PartsOf| {
        let d = d2.clone();
        build(
            std::slice::from_ref(&d),
            |o| vec![(t("w"), object(shape, "dense", parts(o[0], &d)))],
            vec![],
        )
    };
    bad(
        "dense_size",
        dense_of(&[3], |o, d| vec![("data", part("f32", o, d, vec![]))]),
        "open",
        "InvalidFile",
        "8 decoded bytes, but 3 elements of f32 (shape [3]) take 12",
    );
    bad(
        "dense_two_parts",
        dense_of(&[2], |o, d| {
            vec![
                ("data", part("f32", o, d, vec![])),
                ("more", part("f32", o, d, vec![])),
            ]
        }),
        "open",
        "InvalidFile",
        "dense object must have exactly one part, named \"data\", not 2",
    );
    bad(
        "dense_part_name",
        dense_of(&[2], |o, d| vec![("values", part("f32", o, d, vec![]))]),
        "open",
        "InvalidFile",
        "dense object's part is named \"values\"",
    );
    bad(
        "shape_overflow",
        dense_of(&[1 << 32, 1 << 32], |o, d| {
            vec![("data", part("f32", o, d, vec![]))]
        }),
        "open",
        "InvalidFile",
        "has more elements than fit in 64 bits",
    );
    let idx = u32s(&[0, 1]);
    let i2 = idx.clone();
    let sparse = |layout: &'static str, shape: &'static [u64], parts: PartsOf| {
        let d = i2.clone();
        build(
            std::slice::from_ref(&d),
            |o| vec![(t("s"), object(shape, layout, parts(o[0], &d)))],
            vec![],
        )
    };
    // Every part shares the one 8-byte blob: [0, 1] as u32, or [1.4e-45] as f32 x 2.
    bad(
        "csr_rank_3",
        sparse("zt.sparse_csr/1", &[1, 1, 1], |o, d| {
            vec![
                ("values", part("f32", o, d, vec![])),
                ("indices", part("u32", o, d, vec![])),
                ("indptr", part("u32", o, d, vec![])),
            ]
        }),
        "open",
        "InvalidFile",
        "zt.sparse_csr/1 object must have rank 2",
    );
    bad(
        "csr_signed",
        sparse("zt.sparse_csr/1", &[1, 2], |o, d| {
            vec![
                ("values", part("f32", o, d, vec![])),
                ("indices", part("i32", o, d, vec![])),
                ("indptr", part("i32", o, d, vec![])),
            ]
        }),
        "open",
        "InvalidFile",
        "index part must hold plain u32 or u64, not i32",
    );
    bad(
        "csr_mixed_index",
        sparse("zt.sparse_csr/1", &[1, 2], |o, d| {
            vec![
                ("values", part("f32", o, d, vec![])),
                ("indices", part("u32", o, d, vec![])),
                ("indptr", part("u16", o, d, vec![])),
            ]
        }),
        "open",
        "InvalidFile",
        "indptr is u16 but indices is u32",
    );
    bad(
        "csr_indptr_size",
        sparse("zt.sparse_csr/1", &[2, 2], |o, d| {
            vec![
                ("values", part("f32", o, d, vec![])),
                ("indices", part("u32", o, d, vec![])),
                ("indptr", part("u32", o, d, vec![])),
            ]
        }),
        "open",
        "InvalidFile",
        "indptr has 8 bytes, but 2 rows need (rows + 1) x 4 = 12",
    );
    bad(
        "csr_missing_part",
        sparse("zt.sparse_csr/1", &[1, 2], |o, d| {
            vec![
                ("values", part("f32", o, d, vec![])),
                ("indices", part("u32", o, d, vec![])),
            ]
        }),
        "open",
        "InvalidFile",
        "zt.sparse_csr/1 object must have exactly the parts [\"values\", \"indices\", \"indptr\"]",
    );
    bad(
        "csr_indptr_data",
        sparse("zt.sparse_csr/1", &[1, 2], |o, d| {
            vec![
                ("values", part("f32", o, d, vec![])),
                ("indices", part("u32", o, d, vec![])),
                ("indptr", part("u32", o, d, vec![])),
            ]
        }),
        "read",
        "InvalidFile",
        "indptr ends at 1, but there are 2 values",
    );
    bad(
        "coo_count",
        sparse("zt.sparse_coo/1", &[2, 2, 2], |o, d| {
            vec![
                ("values", part("f32", o, d, vec![])),
                ("coords", part("u32", o, d, vec![])),
            ]
        }),
        "open",
        "InvalidFile",
        "coords has 8 bytes, not a whole number of 3-dimensional 4-byte coordinates",
    );
    bad(
        "coo_rank_0",
        sparse("zt.sparse_coo/1", &[], |o, d| {
            vec![
                ("values", part("f32", o, d, vec![])),
                ("coords", part("u32", o, d, vec![])),
            ]
        }),
        "open",
        "InvalidFile",
        "zt.sparse_coo/1 object must have rank 1 or more",
    );
    bad(
        "coo_out_of_shape",
        sparse("zt.sparse_coo/1", &[1], |o, d| {
            vec![
                ("values", part("f32", o, d, vec![])),
                ("coords", part("u32", o, d, vec![])),
            ]
        }),
        "read",
        "InvalidFile",
        "is not below 1",
    );

    // Blobs.
    let at = |off: u64, len: u64| dense_w(vec![("blob", C::A(vec![C::U(off), C::U(len)]))]);
    bad(
        "blob_misaligned",
        at(4100, 8),
        "open",
        "InvalidFile",
        "blob offset 4100 is not a multiple of 4096",
    );
    bad(
        "blob_in_header_page",
        at(0, 8),
        "open",
        "InvalidFile",
        "blob offset 0 lies before 4096",
    );
    bad(
        "blob_overflow",
        at(u64::MAX - 4095, 8192),
        "open",
        "InvalidFile",
        "overflows 64 bits",
    );
    bad(
        "blob_past_end",
        at(1 << 20, 8),
        "open",
        "InvalidFile",
        "reaches past the data area",
    );
    bad(
        "blob_on_manifest",
        at(8192, 8),
        "open",
        "InvalidFile",
        "blobs of w/data and the manifest partially overlap",
    );
    let two = f32s(&[1.0, 2.0, 3.0, 4.0]);
    let tw = two.clone();
    let overlap = build(
        std::slice::from_ref(&two),
        move |o| {
            vec![
                (
                    t("a"),
                    object(
                        &[4],
                        "dense",
                        vec![("data", part("f32", o[0], &tw, vec![]))],
                    ),
                ),
                (
                    t("b"),
                    object(
                        &[2],
                        "dense",
                        vec![("data", part("f32", o[0], &tw[..8], vec![]))],
                    ),
                ),
            ]
        },
        vec![],
    );
    bad(
        "blob_partial_overlap",
        overlap,
        "open",
        "InvalidFile",
        "blobs of b/data and a/data partially overlap",
    );

    // Data, found when reading or verifying.
    bad(
        "digest_mismatch",
        dense_w(vec![("digest", t("xxh3:0000000000000000"))]),
        "verify",
        "ChecksumMismatch",
        "digest mismatch: stored xxh3:0000000000000000",
    );
    bad(
        "digest_unknown_algorithm",
        dense_w(vec![("digest", t("blake3:00"))]),
        "verify",
        "Unsupported",
        "digest \"blake3:00\": its algorithm is not one this library computes",
    );
    bad(
        "encoding_unknown",
        dense_w(vec![
            ("encoding", t("x.zip/1")),
            ("decoded_length", C::U(8)),
        ]),
        "read",
        "Unsupported",
        "unknown encoding \"x.zip/1\"",
    );
    bad(
        "encoding_zstd_unregistered",
        dense_w(vec![("encoding", t("zstd")), ("decoded_length", C::U(8))]),
        "read",
        "Unsupported",
        "unknown encoding \"zstd\"",
    );
    let typed = |ty: &'static str, shape: &'static [u64], bytes: Vec<u8>| {
        let b = bytes.clone();
        build(
            &[bytes],
            move |o| {
                vec![(
                    t("t"),
                    object(
                        shape,
                        "dense",
                        vec![("data", part("u8", o[0], &b, vec![("type", t(ty))]))],
                    ),
                )]
            },
            vec![],
        )
    };
    bad(
        "bool_byte_2",
        typed("bool", &[3], vec![1, 2, 0]),
        "read",
        "InvalidFile",
        "bool element 1 is byte 0x02",
    );
    bad(
        "fp4_odd_tail",
        typed("f4_e2m1", &[3], vec![0x21, 0x13]),
        "verify",
        "InvalidFile",
        "the unused high nibble of the last byte is 0x1",
    );

    // Seekable zstd: tables that lie, frames without checksums, and the original's first
    // crash: a 41 KB file declaring 4096 frames of 16 MiB (64 GiB) that it allocated up front.
    let zs = |blob: Vec<u8>, decoded: u64, shape: &'static [u64]| {
        let b = blob.clone();
        build(
            &[blob],
            move |o| {
                let p = m(vec![
                    ("dtype", t("f32")),
                    ("blob", C::A(vec![C::U(o[0]), C::U(b.len() as u64)])),
                    ("encoding", t("zt.zstd-seekable/1")),
                    ("decoded_length", C::U(decoded)),
                ]);
                vec![(t("z"), object(shape, "dense", vec![("data", p)]))]
            },
            vec![],
        )
    };
    let mut bomb = Vec::new();
    let frames: Vec<(u32, u32)> = (0..4096).map(|_| (2, 16 << 20)).collect();
    bomb.extend(std::iter::repeat_n(0u8, 2 * 4096));
    seek_table(&mut bomb, &frames);
    bad("zstd_seekable_64gib", zs(bomb, 64 << 30, &[16 << 30]), "open", "InvalidFile", "declares 68719476736 decoded bytes, but 40977 bytes of zstd can produce at most 1342734336");
    let zeros = vec![0u8; 4000];
    let good_z = seekable(&zeros, 4096);
    // The table says 3996 bytes (and so does the part); the frame holds 4000.
    let mut lying = good_z.clone();
    let k = lying.len() - 9 - 4;
    lying[k..k + 4].copy_from_slice(&3996u32.to_le_bytes());
    bad(
        "zstd_seekable_frame_size",
        zs(lying, 3996, &[999]),
        "read",
        "InvalidFile",
        "zstd-seekable frame 0: zstd stream inflates past its declared length of 3996 bytes",
    );
    // The frames' compressed sizes do not tile the bytes before the table.
    let mut short = good_z.clone();
    let k = short.len() - 9 - 8;
    let c0 = u32::from_le_bytes(short[k..k + 4].try_into().expect("4 bytes"));
    short[k..k + 4].copy_from_slice(&(c0 - 1).to_le_bytes());
    bad(
        "zstd_seekable_table_sum",
        zs(short, 4000, &[1000]),
        "read",
        "InvalidFile",
        "zstd-seekable: the frames' compressed sizes add up to",
    );
    let mut c = zstd::bulk::Compressor::new(3).expect("zstd");
    c.include_checksum(false).expect("zstd");
    let z = c.compress(&zeros).expect("zstd");
    let mut nosum = z.clone();
    seek_table(&mut nosum, &[(z.len() as u32, 4000)]);
    bad(
        "zstd_seekable_no_checksum",
        zs(nosum, 4000, &[1000]),
        "read",
        "InvalidFile",
        "zstd-seekable: frame 0 carries no content checksum",
    );
}
