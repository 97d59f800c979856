//! Current-format zTensor fixtures: valid files with the values they hold (dense, unusual and
//! every object format), and invalid files for every container, manifest, object and format
//! rule the reader checks. Every file is built from code here, so it is reproducible; the
//! order the generators run in is decided by `gen_fixtures`.

use std::collections::BTreeMap;

use half::{bf16, f16};
use ztensor::manifest::{Component, Manifest, Object};
use ztensor::{
    Attributes, Complex, DType, DigestAlgorithm, Element, Format, Value, WriteOptions, Writer,
};

use crate::fixture_set::{Corpus, Line};

/// A valid file being written, recording what each object must read back as.
struct ValidFile<'c> {
    corpus: &'c mut Corpus,
    name: String,
    writer: Writer<Vec<u8>>,
    lines: Vec<Line>,
}

impl ValidFile<'_> {
    fn add<T: Element>(
        &mut self,
        object: &str,
        shape: &[u64],
        data: &[T],
        opts: WriteOptions,
    ) -> &mut Self {
        self.add_attrs(object, shape, data, Attributes::new(), opts)
    }

    fn add_attrs<T: Element>(
        &mut self,
        object: &str,
        shape: &[u64],
        data: &[T],
        attrs: Attributes,
        opts: WriteOptions,
    ) -> &mut Self {
        self.writer
            .add_with(object, shape, data, attrs, opts)
            .expect("valid fixture object");
        self.record(
            object,
            "data",
            T::element_type().name(),
            shape,
            bytemuck::cast_slice(data),
        );
        self
    }

    fn add_bool(&mut self, object: &str, shape: &[u64], data: &[bool]) -> &mut Self {
        self.writer
            .add_bool(object, shape, data)
            .expect("valid fixture object");
        self.record(object, "data", "bool", shape, bytemuck::cast_slice(data));
        self
    }

    /// Adds an object of any format, recording every component.
    fn add_object(
        &mut self,
        object: &str,
        obj: ztensor::ObjectData<'_>,
        opts: WriteOptions,
    ) -> &mut Self {
        let shape = obj.shape.clone();
        let lines: Vec<(String, String, Vec<u8>)> = obj
            .components
            .iter()
            .map(|c| {
                (
                    c.role.clone(),
                    c.element.name().to_owned(),
                    c.bytes.to_vec(),
                )
            })
            .collect();
        self.writer
            .add_object_with(object, obj, opts)
            .expect("valid fixture object");
        for (role, ty, bytes) in lines {
            self.record(object, &role, &ty, &shape, &bytes);
        }
        self
    }

    fn record(&mut self, object: &str, role: &str, ty: &str, shape: &[u64], bytes: &[u8]) {
        self.lines.push((
            object.into(),
            role.into(),
            ty.into(),
            shape.to_vec(),
            bytes.to_vec(),
        ));
    }

    fn done(self) {
        let bytes = self.writer.finish().expect("finishing a fixture");
        self.corpus
            .add_valid_raw_lines(&self.name, bytes, &self.lines);
    }
}

/// Valid files written with our own `Writer`; only this module writes fixtures that way, so
/// the constructor lives here rather than beside `Corpus`.
impl Corpus {
    fn file(&mut self, name: &str) -> ValidFile<'_> {
        ValidFile {
            corpus: self,
            name: name.into(),
            // The valid corpus is v1.2 (its v2 files are assembled by hand elsewhere).
            writer: Writer::new_version(Vec::new(), ztensor::Version::V1_2).expect("writer"),
            lines: Vec::new(),
        }
    }
}

/// Deterministic values for each element type.
fn values<T>(n: usize, f: impl Fn(usize) -> T) -> Vec<T> {
    (0..n).map(f).collect()
}

const RAW: WriteOptions = WriteOptions {
    compression: None,
    digest: None,
};
const ZSTD: WriteOptions = WriteOptions {
    compression: Some(3),
    digest: None,
};

fn every_dtype(f: &mut ValidFile<'_>, opts: WriteOptions) {
    let s: &[u64] = &[2, 3];
    f.add("f64", s, &values(6, |i| i as f64 * 0.25 - 1.0), opts);
    f.add("f32", s, &values(6, |i| i as f32 * 1.5 - 2.0), opts);
    f.add(
        "f16",
        s,
        &values(6, |i| f16::from_f32(i as f32 - 2.5)),
        opts,
    );
    f.add(
        "bf16",
        s,
        &values(6, |i| bf16::from_f32(i as f32 * 3.0)),
        opts,
    );
    f.add("i64", s, &values(6, |i| i as i64 * -1_000_000_007), opts);
    f.add("i32", s, &values(6, |i| i as i32 * -70_000), opts);
    f.add("i16", s, &values(6, |i| i as i16 * -300), opts);
    f.add("i8", s, &values(6, |i| i as i8 * -20), opts);
    f.add("u64", s, &values(6, |i| u64::MAX - i as u64), opts);
    f.add("u32", s, &values(6, |i| u32::MAX - i as u32), opts);
    f.add("u16", s, &values(6, |i| 65_000 + i as u16), opts);
    f.add("u8", s, &values(6, |i| 250 + i as u8), opts);
}

pub fn valid_dense(c: &mut Corpus) {
    let mut f = c.file("dtypes.zt");
    every_dtype(&mut f, RAW);
    f.add_bool("bool", &[2, 3], &[true, false, false, true, true, false]);
    f.done();

    let mut f = c.file("dtypes_zstd.zt");
    every_dtype(&mut f, ZSTD);
    f.done();

    let mut f = c.file("digests.zt");
    let data = values(100, |i| (i as f32).sin());
    for (name, compression, digest) in [
        ("crc32c_raw", None, DigestAlgorithm::Crc32c),
        ("crc32c_zstd", Some(9), DigestAlgorithm::Crc32c),
        ("sha256_raw", None, DigestAlgorithm::Sha256),
        ("sha256_zstd", Some(1), DigestAlgorithm::Sha256),
    ] {
        f.add(
            name,
            &[10, 10],
            &data,
            WriteOptions {
                compression,
                digest: Some(digest),
            },
        );
    }
    f.done();

    let mut f = c.file("scalars.zt");
    f.add("rank0", &[], &[2.5f32], RAW);
    f.add("rank1", &[1], &[-7i64], RAW);
    f.add("rank0_zstd", &[], &[1.0f64], ZSTD);
    f.done();

    let mut f = c.file("zero_size.zt");
    f.add("n0", &[0], &[] as &[f32], RAW);
    f.add("n0x3", &[0, 3], &[] as &[i16], RAW);
    f.add("n3x0x2", &[3, 0, 2], &[] as &[u8], RAW);
    f.add("n0_zstd", &[0], &[] as &[f64], ZSTD);
    f.add("after", &[2], &[1u8, 2], RAW);
    f.done();

    let mut f = c.file("complex_fp8.zt");
    f.add(
        "c64",
        &[2],
        &[
            Complex {
                re: 1.0f32,
                im: 2.0,
            },
            Complex { re: -3.0, im: 0.5 },
        ],
        RAW,
    );
    f.add(
        "c128",
        &[1],
        &[Complex {
            re: 1e300f64,
            im: -1e-300,
        }],
        ZSTD,
    );
    f.add(
        "e4m3fn",
        &[4],
        &[0x38u8, 0x40, 0xb8, 0x00].map(ztensor::fp8::F8E4M3Fn),
        RAW,
    );
    f.add(
        "e5m2",
        &[3],
        &[0x3cu8, 0x7c, 0xfc].map(ztensor::fp8::F8E5M2),
        RAW,
    );
    f.add(
        "e4m3fnuz",
        &[2],
        &[0x40u8, 0x80].map(ztensor::fp8::F8E4M3Fnuz),
        RAW,
    );
    f.add(
        "e5m2fnuz",
        &[2],
        &[0x40u8, 0x7f].map(ztensor::fp8::F8E5M2Fnuz),
        RAW,
    );
    f.done();

    let mut f = c.file("attributes.zt");
    f.writer.set_attributes(every_kind_attributes());
    f.add_attrs("w", &[1], &[1.0f32], every_kind_attributes(), RAW);
    f.done();

    let f = c.file("empty.zt");
    f.done();
}

fn every_kind_attributes() -> Attributes {
    let mut nested = BTreeMap::new();
    nested.insert(
        "inner".to_string(),
        Value::Array(vec![
            Value::Integer(1),
            Value::Text("a".into()),
            Value::Null,
        ]),
    );
    let mut a = Attributes::new();
    a.insert("uint".into(), Value::Integer(u64::MAX.into()));
    a.insert("nint".into(), Value::Integer(-(1i128 << 64)));
    a.insert("small".into(), Value::Integer(-3));
    a.insert("half".into(), Value::Float(1.25));
    a.insert("single".into(), Value::Float(0.1f32.into()));
    a.insert("double".into(), Value::Float(0.1));
    a.insert("text".into(), Value::Text("héllo ✓".into()));
    a.insert("bytes".into(), Value::Bytes(vec![0, 1, 0xff]));
    a.insert("yes".into(), Value::Bool(true));
    a.insert("none".into(), Value::Null);
    a.insert(
        "list".into(),
        Value::Array(vec![Value::Integer(1), Value::Float(2.5)]),
    );
    a.insert("map".into(), Value::Map(nested));
    a.insert(
        "tagged".into(),
        Value::Tag(1, Box::new(Value::Integer(1_700_000_000))),
    );
    a
}

// ---------------------------------------------------------------------------------------------
// Hand-built files.

/// Assembles a v1 file: header, blobs at the given offsets (zero gaps), manifest, size, footer.
fn file_v1(blobs: &[(u64, &[u8])], manifest: &[u8]) -> Vec<u8> {
    let mut f = b"ZTEN1000".to_vec();
    for (offset, bytes) in blobs {
        let off = *offset as usize;
        if f.len() < off {
            f.resize(off, 0);
        }
        f.truncate(off);
        f.extend_from_slice(bytes);
    }
    f.extend_from_slice(manifest);
    f.extend_from_slice(&(manifest.len() as u64).to_le_bytes());
    f.extend_from_slice(b"ZTEN1000");
    f
}

/// A manifest with one dense object `w` whose `data` component is `c`.
fn one(shape: &[u64], c: Component) -> Manifest {
    let mut m = Manifest {
        version: "1.2.0".into(),
        ..Default::default()
    };
    let mut o = Object {
        shape: shape.to_vec(),
        format: "dense".into(),
        ..Default::default()
    };
    o.components.insert("data".into(), c);
    m.objects.insert("w".into(), o);
    m
}

fn comp(dtype: &str, offset: u64, length: u64) -> Component {
    Component {
        dtype: dtype.into(),
        offset,
        length,
        ..Default::default()
    }
}

/// Replaces the first occurrence of `from` in `bytes`.
fn patch(mut bytes: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("patch target present");
    bytes.splice(at..at + from.len(), to.iter().copied());
    bytes
}

/// A CBOR text string.
fn t(s: &str) -> Vec<u8> {
    let mut v = vec![0x60 + s.len() as u8];
    v.extend_from_slice(s.as_bytes());
    v
}

const EIGHT: &[u8] = &[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]; // f32 [1.0, 2.0]

fn good() -> Vec<u8> {
    file_v1(&[(64, EIGHT)], &one(&[2], comp("f32", 64, 8)).encode())
}

pub fn valid_unusual(c: &mut Corpus) {
    // An unknown logical type reads as its dtype, and keeps its name.
    let mut co = comp("i16", 64, 4);
    co.logical_type = Some("my_int_type".into());
    let bytes = file_v1(&[(64, &[1, 0, 2, 0])], &one(&[2], co).encode());
    c.valid_raw(
        "unknown_type.zt",
        bytes,
        &[("w", "data", "my_int_type", &[2], &[1, 0, 2, 0])],
    );

    // An unknown format stays listed; its components read one by one.
    let mut m = one(&[3], comp("u8", 64, 3));
    let o = m.objects.get_mut("w").expect("w");
    o.format = "my_format".into();
    let cs = std::mem::take(&mut o.components);
    o.components
        .insert("payload".into(), cs.into_values().next().expect("one"));
    o.components.insert("aux".into(), comp("u16", 128, 2));
    let bytes = file_v1(&[(64, &[9, 8, 7]), (128, &[1, 1])], &m.encode());
    c.valid_raw(
        "unknown_format.zt",
        bytes,
        &[
            ("w", "payload", "u8", &[3], &[9, 8, 7]),
            ("w", "aux", "u16", &[3], &[1, 1]),
        ],
    );

    // Two objects sharing one blob (identical ranges) are allowed.
    let mut m = one(&[2], comp("f32", 64, 8));
    let alias = m.objects.get("w").expect("w").clone();
    m.objects.insert("v".into(), alias);
    let bytes = file_v1(&[(64, EIGHT)], &m.encode());
    c.valid_raw(
        "aliased_blobs.zt",
        bytes,
        &[
            ("v", "data", "f32", &[2], EIGHT),
            ("w", "data", "f32", &[2], EIGHT),
        ],
    );

    // Non-zero padding: writers must zero it, readers may ignore it.
    let mut bytes = good();
    bytes[8..64].fill(0xAA);
    c.valid_raw(
        "nonzero_padding.zt",
        bytes,
        &[("w", "data", "f32", &[2], EIGHT)],
    );

    // Unknown fields everywhere are ignored.
    let m = one(&[2], comp("f32", 64, 8)).encode();
    let m = patch(
        m,
        &[0xa2, 0x67],
        &[
            0xa3, 0x63, b'x', b'y', b'z', 0xa1, 0x61, b'k', 0x82, 0x01, 0xf6, 0x67,
        ],
    );
    c.valid_raw(
        "unknown_fields.zt",
        file_v1(&[(64, EIGHT)], &m),
        &[("w", "data", "f32", &[2], EIGHT)],
    );
}

pub fn invalid_container(c: &mut Corpus) {
    c.invalid(
        "empty_file.zt",
        vec![],
        "open",
        "InvalidFile",
        "shorter than the 8-byte header",
    );
    c.invalid(
        "header_only.zt",
        b"ZTEN1000".to_vec(),
        "open",
        "InvalidFile",
        "shorter than header and footer (24 bytes)",
    );
    c.invalid(
        "short_footer.zt",
        b"ZTEN1000\x01\0\0\0\0\0\0\0ZTEN".to_vec(),
        "open",
        "InvalidFile",
        "shorter than header and footer",
    );
    let mut b = good();
    b[0] = b'X';
    c.invalid(
        "bad_header_magic.zt",
        b,
        "open",
        "InvalidFile",
        "bad header magic",
    );
    let mut b = good();
    let n = b.len();
    b[n - 1] = b'1';
    c.invalid(
        "bad_footer_magic.zt",
        b,
        "open",
        "InvalidFile",
        "bad footer magic",
    );
    let size_at = |b: &[u8]| b.len() - 16;
    let mut b = good();
    let s = size_at(&b);
    b[s..s + 8].copy_from_slice(&0u64.to_le_bytes());
    c.invalid(
        "manifest_size_zero.zt",
        b,
        "open",
        "InvalidFile",
        "manifest size is 0",
    );
    let mut b = good();
    let s = size_at(&b);
    let past = b.len() as u64;
    b[s..s + 8].copy_from_slice(&past.to_le_bytes());
    c.invalid(
        "manifest_size_past_file.zt",
        b,
        "open",
        "InvalidFile",
        "is larger than the",
    );
    let mut b = good();
    let s = size_at(&b);
    b[s..s + 8].copy_from_slice(&((1u64 << 30) + 1).to_le_bytes());
    c.invalid(
        "manifest_size_over_cap.zt",
        b,
        "open",
        "LimitExceeded",
        "exceeds the cap of 1073741824 bytes",
    );
    let mut b = good();
    let s = size_at(&b);
    let reach = (b.len() - 16 - 4) as u64;
    b[s..s + 8].copy_from_slice(&reach.to_le_bytes());
    c.invalid(
        "manifest_into_header.zt",
        b,
        "open",
        "InvalidFile",
        "between header and footer",
    );
}

pub fn invalid_manifest(c: &mut Corpus) {
    let m = |manifest: &[u8]| file_v1(&[(64, EIGHT)], manifest);
    let good_m = one(&[2], comp("f32", 64, 8)).encode();
    c.invalid(
        "not_cbor.zt",
        m(&[0xff, 0xff, 0xff]),
        "open",
        "InvalidFile",
        "must be a map, found break",
    );
    let mut trailing = good_m.clone();
    trailing.push(0x00);
    c.invalid(
        "trailing_after_manifest.zt",
        m(&trailing),
        "open",
        "InvalidFile",
        "1 trailing bytes after the manifest root",
    );
    c.invalid(
        "root_not_map.zt",
        m(&[0x82, 0x01, 0x02]),
        "open",
        "InvalidFile",
        "the manifest root must be a map, found array",
    );
    let no_version = [vec![0xa1], t("objects"), vec![0xa0]].concat();
    c.invalid(
        "missing_version.zt",
        m(&no_version),
        "open",
        "InvalidFile",
        "manifest has no \"version\"",
    );
    let no_objects = [vec![0xa1], t("version"), t("1.2.0")].concat();
    c.invalid(
        "missing_objects.zt",
        m(&no_objects),
        "open",
        "InvalidFile",
        "manifest has no \"objects\"",
    );
    let v2 = patch(good_m.clone(), &t("1.2.0"), &t("2.0.0"));
    c.invalid(
        "major_version_2.zt",
        m(&v2),
        "open",
        "Unsupported",
        "has major version 2",
    );
    let junk_version = patch(good_m.clone(), &t("1.2.0"), &t("one"));
    c.invalid(
        "version_not_numeric.zt",
        m(&junk_version),
        "open",
        "InvalidFile",
        "is not of the form MAJOR.MINOR.PATCH",
    );
    c.invalid(
        "cbor_map_length_huge.zt",
        m(&[0xbb, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x61]),
        "open",
        "InvalidFile",
        "larger than the remaining input",
    );
    c.invalid(
        "cbor_text_length_huge.zt",
        m(&[0xa1, 0x7b, 0, 0, 0, 0xff, 0, 0, 0, 0]),
        "open",
        "InvalidFile",
        "runs past the end of the manifest",
    );
    let mut deep = [
        vec![0xa3],
        t("version"),
        t("1.2.0"),
        t("objects"),
        vec![0xa0],
        t("x"),
    ]
    .concat();
    deep.extend(std::iter::repeat_n(0x81, 10_000));
    deep.push(0x00);
    c.invalid(
        "nesting_10000.zt",
        m(&deep),
        "open",
        "LimitExceeded",
        "CBOR nesting deeper than 128 levels",
    );
    let dup = [
        vec![0xa3],
        t("version"),
        t("1.2.0"),
        t("objects"),
        vec![0xa0],
        t("version"),
        t("1.2.0"),
    ]
    .concat();
    c.invalid(
        "duplicate_root_key.zt",
        m(&dup),
        "open",
        "InvalidFile",
        "duplicate key \"version\" in the manifest root",
    );
    let mut two = one(&[2], comp("f32", 64, 8));
    let w = two.objects.get("w").expect("w").clone();
    two.objects.insert("x".into(), w);
    let dup_obj = patch(two.encode(), &t("x"), &t("w"));
    c.invalid(
        "duplicate_object.zt",
        m(&dup_obj),
        "open",
        "InvalidFile",
        "duplicate key \"w\" in objects",
    );
    let non_text = [
        vec![0xa3],
        t("version"),
        t("1.2.0"),
        t("objects"),
        vec![0xa0, 0x01, 0x02],
    ]
    .concat();
    c.invalid(
        "non_text_key.zt",
        m(&non_text),
        "open",
        "InvalidFile",
        "keys of the manifest root must be text, found u8",
    );
    let bad_utf8 = patch(good_m.clone(), &t("w"), &[0x61, 0xff]);
    c.invalid(
        "invalid_utf8_name.zt",
        m(&bad_utf8),
        "open",
        "InvalidFile",
        "invalid CBOR",
    );
    let neg_offset = patch(
        good_m.clone(),
        &[t("offset").as_slice(), &[0x18, 0x40]].concat(),
        &[t("offset").as_slice(), &[0x38, 0x3f]].concat(),
    );
    c.invalid(
        "negative_offset.zt",
        m(&neg_offset),
        "open",
        "InvalidFile",
        "offset must be an unsigned integer, found a negative number",
    );
    let float_len = patch(
        good_m.clone(),
        &[t("length").as_slice(), &[0x08]].concat(),
        &[t("length").as_slice(), &[0xf9, 0x48, 0x00]].concat(),
    );
    c.invalid(
        "float_length.zt",
        m(&float_len),
        "open",
        "InvalidFile",
        "length must be an unsigned integer, found f16",
    );
    let neg_dim = patch(
        good_m.clone(),
        &[t("shape").as_slice(), &[0x81, 0x02]].concat(),
        &[t("shape").as_slice(), &[0x81, 0x21]].concat(),
    );
    c.invalid(
        "negative_dimension.zt",
        m(&neg_dim),
        "open",
        "InvalidFile",
        "a dimension must be an unsigned integer, found a negative number",
    );
    let mut rank = patch(
        good_m.clone(),
        &[t("shape").as_slice(), &[0x81, 0x02]].concat(),
        &[t("shape").as_slice(), &[0x1a, 0x00, 0x0f, 0x42, 0x40]].concat(),
    );
    // Array header for 1,000,000 dimensions, followed by 100 ones: the rank cap stops it.
    let at = rank
        .windows(5)
        .position(|w| w == [0x1a, 0x00, 0x0f, 0x42, 0x40])
        .expect("marker");
    rank.splice(
        at..at + 5,
        [0x9a, 0x00, 0x0f, 0x42, 0x40]
            .into_iter()
            .chain(std::iter::repeat_n(0x01, 100)),
    );
    c.invalid(
        "rank_1000000.zt",
        m(&rank),
        "open",
        "LimitExceeded",
        "rank exceeds the cap of 64 dimensions",
    );
    let missing_dtype = patch(
        good_m.clone(),
        &[t("dtype").as_slice(), &t("f32")].concat(),
        &[t("dtypx").as_slice(), &t("f32")].concat(),
    );
    c.invalid(
        "missing_dtype.zt",
        m(&missing_dtype),
        "open",
        "InvalidFile",
        "component has no \"dtype\"",
    );
}

pub fn invalid_objects(c: &mut Corpus) {
    let one_file = |shape: &[u64], co: Component, blobs: &[(u64, &[u8])]| {
        file_v1(blobs, &one(shape, co).encode())
    };
    c.invalid(
        "offset_unaligned.zt",
        one_file(&[2], comp("f32", 65, 8), &[(65, EIGHT)]),
        "open",
        "InvalidFile",
        "offset 65 is not a multiple of 64",
    );
    c.invalid(
        "offset_in_header.zt",
        one_file(&[2], comp("f32", 0, 8), &[(64, EIGHT)]),
        "open",
        "InvalidFile",
        "offset 0 lies inside the header",
    );
    c.invalid(
        "offset_length_overflow.zt",
        one_file(&[2], comp("f32", 64, u64::MAX - 10), &[(64, EIGHT)]),
        "open",
        "InvalidFile",
        "overflows 64 bits",
    );
    c.invalid(
        "blob_into_manifest.zt",
        one_file(&[4], comp("f32", 64, 16), &[(64, EIGHT)]),
        "open",
        "InvalidFile",
        "reaches past the data area",
    );
    c.invalid(
        "blob_past_end.zt",
        one_file(&[2], comp("f32", 1 << 20, 8), &[(64, EIGHT)]),
        "open",
        "InvalidFile",
        "reaches past the data area",
    );
    c.invalid(
        "raw_length_mismatch.zt",
        one_file(&[3], comp("f32", 64, 8), &[(64, EIGHT)]),
        "open",
        "InvalidFile",
        "8 bytes of data, but shape [3] of f32 takes 12",
    );
    c.invalid(
        "shape_count_overflow.zt",
        one_file(&[1 << 32, 1 << 32, 2], comp("f32", 64, 8), &[(64, EIGHT)]),
        "open",
        "InvalidFile",
        "more elements than fit in 64 bits",
    );
    c.invalid(
        "shape_bytes_overflow.zt",
        one_file(&[1 << 62], comp("f32", 64, 8), &[(64, EIGHT)]),
        "open",
        "InvalidFile",
        "take more bytes than fit in 64 bits",
    );
    c.invalid(
        "unknown_dtype.zt",
        one_file(&[2], comp("f31", 64, 8), &[(64, EIGHT)]),
        "open",
        "InvalidFile",
        "unknown dtype \"f31\"",
    );
    let mut co = comp("f32", 64, 8);
    co.logical_type = Some("f8_e4m3fn".into());
    c.invalid(
        "fp8_on_f32.zt",
        one_file(&[2], co, &[(64, EIGHT)]),
        "open",
        "InvalidFile",
        "type f8_e4m3fn must be stored as dtype u8, not f32",
    );
    let mut co = comp("f64", 64, 16);
    co.logical_type = Some("complex64".into());
    c.invalid(
        "complex64_on_f64.zt",
        one_file(&[1], co, &[(64, &[0; 16])]),
        "open",
        "InvalidFile",
        "type complex64 must be stored as dtype f32, not f64",
    );
    let mut co = comp("f32", 64, 12);
    co.logical_type = Some("complex64".into());
    c.invalid(
        "complex_odd_count.zt",
        one_file(&[1], co, &[(64, &[0; 12])]),
        "open",
        "InvalidFile",
        "12 bytes of data, but shape [1] of complex64 takes 8",
    );
    let bools = [0u8, 1, 2];
    c.invalid(
        "bool_byte_2.zt",
        one_file(&[3], comp("bool", 64, 3), &[(64, &bools)]),
        "read",
        "InvalidFile",
        "bool element 2 is byte 0x02",
    );

    // Partial overlap between two objects.
    let mut m = one(&[2], comp("f32", 64, 8));
    let mut o = m.objects.get("w").expect("w").clone();
    o.components.insert("data".into(), comp("f32", 64, 16));
    o.shape = vec![4];
    m.objects.insert("v".into(), o);
    c.invalid(
        "partial_overlap.zt",
        file_v1(&[(64, &[0; 16])], &m.encode()),
        "open",
        "InvalidFile",
        "partially overlap",
    );
    let mut m = one(&[2], comp("f32", 64, 8));
    m.objects.get_mut("w").expect("w").components.clear();
    c.invalid(
        "dense_without_data.zt",
        file_v1(&[(64, EIGHT)], &m.encode()),
        "open",
        "InvalidFile",
        "dense object has no \"data\" component",
    );

    // zstd.
    let data = [7u8; 64];
    let z = zstd::bulk::compress(&data, 3).expect("zstd");
    let zc = |declared: Option<u64>, len: usize| Component {
        dtype: "u8".into(),
        offset: 64,
        length: len as u64,
        uncompressed_length: declared,
        encoding: Some("zstd".into()),
        ..Default::default()
    };
    c.invalid(
        "zstd_no_uncompressed_length.zt",
        one_file(&[64], zc(None, z.len()), &[(64, &z)]),
        "open",
        "InvalidFile",
        "zstd component has no uncompressed_length",
    );
    c.invalid(
        "zstd_inflates_more.zt",
        one_file(&[32], zc(Some(32), z.len()), &[(64, &z)]),
        "read",
        "InvalidFile",
        "inflates past its declared length of 32 bytes",
    );
    c.invalid(
        "zstd_inflates_fewer.zt",
        one_file(&[65], zc(Some(65), z.len()), &[(64, &z)]),
        "read",
        "InvalidFile",
        "inflates to 64 bytes, fewer than the declared 65",
    );
    let mut corrupt = z.clone();
    let n = corrupt.len();
    corrupt[n / 2] ^= 0x55;
    corrupt.truncate(n - 2);
    c.invalid(
        "zstd_corrupt.zt",
        one_file(&[64], zc(Some(64), corrupt.len()), &[(64, &corrupt)]),
        "read",
        "InvalidFile",
        "corrupt zstd stream",
    );
    let bomb = zstd::bulk::compress(&vec![0u8; 8 << 20], 19).expect("zstd");
    c.invalid(
        "zstd_bomb.zt",
        one_file(&[4096], zc(Some(4096), bomb.len()), &[(64, &bomb)]),
        "read",
        "InvalidFile",
        "inflates past its declared length of 4096",
    );
    c.invalid(
        "zstd_declared_2e40.zt",
        one_file(&[1 << 40], zc(Some(1 << 40), z.len()), &[(64, &z)]),
        "read",
        "LimitExceeded",
        "exceeds the cap",
    );

    // Digests.
    let mut co = comp("f32", 64, 8);
    co.digest = Some("crc32c:0x1234".into());
    c.invalid(
        "digest_malformed.zt",
        one_file(&[2], co, &[(64, EIGHT)]),
        "open",
        "InvalidFile",
        "is not 8 hex digits",
    );
    let mut co = comp("f32", 64, 8);
    co.digest = Some("md5:00".into());
    c.invalid(
        "digest_unknown_algorithm.zt",
        one_file(&[2], co, &[(64, EIGHT)]),
        "open",
        "Unsupported",
        "unknown digest algorithm \"md5\"",
    );
    let mut co = comp("f32", 64, 8);
    co.digest = Some("crc32c:0x00000000".into());
    c.invalid(
        "digest_mismatch.zt",
        one_file(&[2], co, &[(64, EIGHT)]),
        "verify",
        "ChecksumMismatch",
        "digest mismatch: stored crc32c:0x00000000",
    );
}

// ---------------------------------------------------------------------------------------------
// Sparse and quantized objects.

fn part<'a, T: Element>(role: &str, data: &'a [T]) -> ztensor::ComponentData<'a> {
    ztensor::ComponentData::of(role, data)
}

fn object<'a>(
    shape: &[u64],
    format: Format,
    attributes: Attributes,
    components: Vec<ztensor::ComponentData<'a>>,
) -> ztensor::ObjectData<'a> {
    ztensor::ObjectData {
        shape: shape.to_vec(),
        format,
        attributes,
        components,
    }
}

fn csr_parts<'a>(
    values: &'a [f32],
    indices: &'a [u64],
    indptr: &'a [u64],
) -> Vec<ztensor::ComponentData<'a>> {
    vec![
        part("values", values),
        part("indices", indices),
        part("indptr", indptr),
    ]
}

pub fn valid_formats(c: &mut Corpus) {
    let mut f = c.file("sparse.zt");
    let (v, i, p) = ([1.0f32, 2.0, 3.0], [0u64, 2, 3], [0u64, 1, 1, 3]);
    f.add_object(
        "csr",
        object(
            &[3, 4],
            Format::SparseCsr,
            Attributes::new(),
            csr_parts(&v, &i, &p),
        ),
        RAW,
    );
    f.add_object(
        "csr_zstd_sha",
        object(
            &[3, 4],
            Format::SparseCsr,
            Attributes::new(),
            csr_parts(&v, &i, &p),
        ),
        WriteOptions {
            compression: Some(3),
            digest: Some(DigestAlgorithm::Sha256),
        },
    );
    let (i32s, p32) = ([0u32, 2, 3], [0u32, 1, 1, 3]);
    f.add_object(
        "csr_u32_index",
        object(
            &[3, 4],
            Format::SparseCsr,
            Attributes::new(),
            vec![
                part("values", &v),
                part("indices", &i32s),
                part("indptr", &p32),
            ],
        ),
        RAW,
    );
    f.add_object(
        "csr_empty",
        object(
            &[2, 5],
            Format::SparseCsr,
            Attributes::new(),
            csr_parts(&[], &[], &[0, 0, 0]),
        ),
        RAW,
    );
    let coords = [0u64, 2, 2, /* axis 1 */ 1, 3, 3];
    f.add_object(
        "coo_dups",
        object(
            &[3, 4],
            Format::SparseCoo,
            Attributes::new(),
            vec![part("values", &[5.0f64, 6.0, 1.0]), part("coords", &coords)],
        ),
        RAW,
    );
    f.add_object(
        "coo_3d_crc",
        object(
            &[2, 2, 2],
            Format::SparseCoo,
            Attributes::new(),
            vec![part("values", &[7i16]), part("coords", &[1u64, 0, 1])],
        ),
        WriteOptions {
            compression: Some(1),
            digest: Some(DigestAlgorithm::Crc32c),
        },
    );
    f.done();

    let mut f = c.file("quantized.zt");
    for (name, bits, word, gs) in [
        ("q4_i32", 4, DType::I32, 16),
        ("q2_u8", 2, DType::U8, 5),
        ("q8_u8", 8, DType::U8, 7),
        ("q8_i32", 8, DType::I32, 3),
    ] {
        let p = ztensor::QuantParams::new(bits, gs, word).expect("params");
        let n = 2 * 8u64;
        let codes: Vec<u8> = (0..n).map(|k| (k * 7 % (1 << bits)) as u8).collect();
        let packed = p.pack(&codes).expect("pack");
        let g = p.groups(n) as usize;
        let scales: Vec<f16> = (0..g).map(|i| f16::from_f32(0.5 + i as f32)).collect();
        let zeros: Vec<f16> = (0..g).map(|i| f16::from_f32(i as f32)).collect();
        let comps = vec![
            ztensor::ComponentData {
                role: "packed_weight".into(),
                element: ztensor::ElementType::plain(word),
                bytes: packed.into(),
            },
            part("scales", &scales),
            part("zeros", &zeros),
        ];
        f.add_object(
            name,
            object(&[2, 8], Format::QuantizedGroup, p.attributes(), comps),
            RAW,
        );
    }
    let p = ztensor::QuantParams::new(4, 4, DType::I32).expect("params");
    let packed = p.pack(&[1, 2, 3, 4, 5, 6]).expect("pack");
    let zeros = [bf16::from_f32(0.0), bf16::from_f32(1.0)];
    let comps = vec![
        ztensor::ComponentData {
            role: "packed_weight".into(),
            element: ztensor::ElementType::plain(DType::I32),
            bytes: packed.into(),
        },
        part("scales", &[1.0f32, 2.0]),
        part("zeros", &zeros),
    ];
    f.add_object(
        "q4_partial_group_bf16_zeros",
        object(&[6], Format::QuantizedGroup, p.attributes(), comps),
        ZSTD,
    );
    f.done();
}

/// A file with one object `x` of the given parts, built without the writer's checks.
fn raw_object(
    shape: &[u64],
    format: &str,
    attributes: Attributes,
    parts: &[(&str, &str, &[u8])],
) -> Vec<u8> {
    let mut m = Manifest {
        version: "1.2.0".into(),
        ..Default::default()
    };
    let mut o = Object {
        shape: shape.to_vec(),
        format: format.into(),
        attributes,
        ..Default::default()
    };
    let mut blobs = Vec::new();
    let mut offset = 64u64;
    for (role, dtype, bytes) in parts {
        o.components
            .insert((*role).into(), comp(dtype, offset, bytes.len() as u64));
        blobs.push((offset, *bytes));
        offset += (bytes.len() as u64).div_ceil(64).max(1) * 64;
    }
    m.objects.insert("x".into(), o);
    file_v1(&blobs, &m.encode())
}

fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn invalid_formats(c: &mut Corpus) {
    let none = Attributes::new;
    let v3 = f32s(&[1.0, 2.0, 3.0]);
    let csr = |name: &str,
               shape: &[u64],
               indices: &[u64],
               indptr: &[u64],
               stage: &str,
               msg: &str,
               c: &mut Corpus| {
        let bytes = raw_object(
            shape,
            "sparse_csr",
            none(),
            &[
                ("values", "f32", &v3),
                ("indices", "u64", &u64s(indices)),
                ("indptr", "u64", &u64s(indptr)),
            ],
        );
        c.invalid(name, bytes, stage, "InvalidFile", msg);
    };
    csr(
        "csr_rank_3.zt",
        &[3, 4, 1],
        &[0, 2, 3],
        &[0, 1, 1, 3],
        "open",
        "sparse_csr object must have rank 2",
        c,
    );
    csr(
        "csr_indptr_count.zt",
        &[3, 4],
        &[0, 2, 3],
        &[0, 1, 3],
        "open",
        "indptr has 3 entries, expected rows + 1 = 4",
        c,
    );
    csr(
        "csr_indptr_not_zero.zt",
        &[3, 4],
        &[0, 2, 3],
        &[1, 1, 1, 3],
        "read",
        "indptr does not start at 0",
        c,
    );
    csr(
        "csr_indptr_decreasing.zt",
        &[3, 4],
        &[0, 2, 3],
        &[0, 2, 1, 3],
        "read",
        "indptr decreases after row 1",
        c,
    );
    csr(
        "csr_indptr_end.zt",
        &[3, 4],
        &[0, 2, 3],
        &[0, 1, 1, 2],
        "read",
        "indptr ends at 2, but there are 3 values",
        c,
    );
    csr(
        "csr_index_out_of_range.zt",
        &[3, 4],
        &[0, 4, 3],
        &[0, 1, 1, 3],
        "read",
        "column index 4 at position 1 is not below the 4 columns",
        c,
    );
    csr(
        "csr_values_indices_count.zt",
        &[3, 4],
        &[0, 2],
        &[0, 1, 1, 3],
        "open",
        "2 indices for 3 values",
        c,
    );
    let bytes = raw_object(
        &[3, 4],
        "sparse_csr",
        none(),
        &[
            ("values", "f32", &v3),
            ("indices", "i64", &u64s(&[0, 2, 3])),
            ("indptr", "u64", &u64s(&[0, 1, 1, 3])),
        ],
    );
    c.invalid(
        "csr_signed_indices.zt",
        bytes,
        "open",
        "InvalidFile",
        "index component must hold unsigned integers, not i64",
    );
    let bytes = raw_object(
        &[3, 4],
        "sparse_csr",
        none(),
        &[
            ("values", "f32", &v3),
            ("indices", "u64", &u64s(&[0, 2, 3])),
            ("indptr", "f64", &u64s(&[0, 1, 1, 3])),
        ],
    );
    c.invalid(
        "csr_float_indptr.zt",
        bytes,
        "open",
        "InvalidFile",
        "index component must hold unsigned integers, not f64",
    );
    let bytes = raw_object(
        &[3, 4],
        "sparse_csr",
        none(),
        &[
            ("values", "f32", &v3),
            ("indices", "u64", &u64s(&[0, 2, 3])),
        ],
    );
    c.invalid(
        "csr_missing_indptr.zt",
        bytes,
        "open",
        "InvalidFile",
        "sparse_csr object has no \"indptr\" component",
    );

    let v2 = f32s(&[5.0, 6.0]);
    let coo = |name: &str,
               shape: &[u64],
               dtype: &str,
               coords: &[u64],
               stage: &str,
               msg: &str,
               c: &mut Corpus| {
        let bytes = raw_object(
            shape,
            "sparse_coo",
            none(),
            &[("values", "f32", &v2), ("coords", dtype, &u64s(coords))],
        );
        c.invalid(name, bytes, stage, "InvalidFile", msg);
    };
    coo(
        "coo_coords_count.zt",
        &[3, 4],
        "u64",
        &[0, 2, 1],
        "open",
        "coords has 3 entries, expected ndim x nnz = 2 x 2",
        c,
    );
    coo(
        "coo_out_of_shape.zt",
        &[3, 4],
        "u64",
        &[0, 2, 1, 4],
        "read",
        "coordinate 4 of value 1 on axis 1 is not below 4",
        c,
    );
    coo(
        "coo_signed_coords.zt",
        &[3, 4],
        "i64",
        &[0, 2, 1, 3],
        "open",
        "index component must hold unsigned integers, not i64",
        c,
    );
    coo(
        "coo_rank_0.zt",
        &[],
        "u64",
        &[],
        "open",
        "sparse_coo object must have rank 1 or more",
        c,
    );

    let q = |bits: u64, gs: u64, packing: &str| {
        let mut a = Attributes::new();
        a.insert("bits".into(), Value::from(bits));
        a.insert("group_size".into(), Value::from(gs));
        a.insert("packing".into(), Value::from(packing));
        a
    };
    let scale = f32s(&[0.5]);
    let zero = f32s(&[8.0]);
    let packed = [0x78u8, 0x56, 0x34, 0x12, 0, 0, 0, 0];
    let quant = |name: &str,
                 attrs: Attributes,
                 parts: &[(&str, &str, &[u8])],
                 msg: &str,
                 c: &mut Corpus| {
        c.invalid(
            name,
            raw_object(&[2, 8], "quantized_group", attrs, parts),
            "open",
            "InvalidFile",
            msg,
        );
    };
    let good_parts: [(&str, &str, &[u8]); 3] = [
        ("packed_weight", "i32", &packed),
        ("scales", "f32", &scale),
        ("zeros", "f32", &zero),
    ];
    quant(
        "qg_bits_3.zt",
        q(3, 16, "8_per_i32"),
        &good_parts,
        "bits 3 is not 2, 4 or 8",
        c,
    );
    quant(
        "qg_group_size_0.zt",
        q(4, 0, "8_per_i32"),
        &good_parts,
        "group_size is 0",
        c,
    );
    quant(
        "qg_packing_mismatch.zt",
        q(4, 16, "4_per_i32"),
        &good_parts,
        "packing \"4_per_i32\" does not fit bits 4",
        c,
    );
    quant(
        "qg_packing_unknown.zt",
        q(4, 16, "8_per_i64"),
        &good_parts,
        "is not N_per_i32 or N_per_u8",
        c,
    );
    let mut no_bits = q(4, 16, "8_per_i32");
    no_bits.remove("bits");
    quant(
        "qg_no_bits.zt",
        no_bits,
        &good_parts,
        "quantized_group object has no \"bits\" attribute",
        c,
    );
    quant(
        "qg_packed_count.zt",
        q(4, 16, "8_per_i32"),
        &[
            ("packed_weight", "i32", &packed[..4]),
            ("scales", "f32", &scale),
            ("zeros", "f32", &zero),
        ],
        "1 packed words, but 16 elements of 4 bits need 2",
        c,
    );
    quant(
        "qg_scales_count.zt",
        q(4, 8, "8_per_i32"),
        &good_parts,
        "1 scales, but 16 elements in groups of 8 need 2",
        c,
    );
    quant(
        "qg_int_zeros.zt",
        q(4, 16, "8_per_i32"),
        &[
            ("packed_weight", "i32", &packed),
            ("scales", "f32", &scale),
            ("zeros", "i32", &[8, 0, 0, 0]),
        ],
        "zeros must be f16, bf16 or f32, not i32",
        c,
    );
    quant(
        "qg_packed_dtype.zt",
        q(4, 16, "8_per_i32"),
        &[
            ("packed_weight", "u16", &packed),
            ("scales", "f32", &scale),
            ("zeros", "f32", &zero),
        ],
        "packing 8_per_i32 needs i32 words, not u16",
        c,
    );
    quant(
        "qg_missing_zeros.zt",
        q(4, 16, "8_per_i32"),
        &good_parts[..2],
        "quantized_group object has no \"zeros\" component",
        c,
    );
}
