//! ONNX models written by the onnx package (tools/interop/make_onnx.py): every tensor reads
//! as `onnx.numpy_helper.to_array` gives it, byte for byte (fixtures/interop/onnx/expected.json),
//! mapped and unmapped: raw_data and the typed fields, every data type we have, constants in
//! subgraphs, sparse initializers, external data; the model's metadata as file attributes;
//! string tensors listed and skipped; and hostile external-data locations refused.

#[path = "support/expected.rs"]
mod expected;

use std::path::{Path, PathBuf};

use ztensor::{ErrorKind, FileVersion, OpenOptions, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/onnx")
}

fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_tensor_reads_as_onnx_wrote_it() {
    let expected = expected();
    let mut checked = 0;
    for (file, tensors) in expected["files"].as_object().unwrap() {
        for unmapped in [false, true] {
            let r = OpenOptions::new()
                .unmapped(unmapped)
                .open(dir().join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(r.version(), &FileVersion::Onnx { ir_version: 10 });
            let skipped = expected["skipped"][file.as_str()]
                .as_array()
                .map_or(0, Vec::len);
            let sparse = expected["sparse"][file.as_str()]
                .as_object()
                .map_or(0, |m| m.len());
            let tensors = tensors.as_object().unwrap();
            assert_eq!(r.len(), tensors.len() + skipped + sparse, "{file}");
            for (name, want) in tensors {
                expected::check_object(&r, file, name, want);
                checked += 1;
            }
            let report = r.verify();
            assert!(report.failures.is_empty(), "{file}: {:?}", report.failures);
            assert_eq!(report.skipped.len(), skipped, "{file}");
        }
    }
    assert!(checked >= 2 * 60, "{checked}");
}

/// The sub-byte types keep their types and bytes through `.zt` v2 and v1.2. v2 registers
/// none of FP6, the 2-bit and the 4-bit integers: they are read back as ours only on `u8` and
/// of the size the shape takes, as our writers write them; otherwise they stay the unknown
/// types the original reads them as.
#[test]
fn sub_byte_types_keep_their_types_through_zt() {
    let expected = expected();
    let dir_out = tempfile::tempdir().unwrap();
    let names = ["int2", "uint2", "int4", "uint4", "float6e2m3", "float6e3m2"];
    for version in [ztensor::Version::V2, ztensor::Version::V1_2] {
        let out = dir_out.path().join(format!("{version:?}.zt"));
        let options = ztensor::ConvertOptions {
            version,
            ..Default::default()
        };
        ztensor::convert::upgrade(dir().join("dtypes_raw.onnx"), &out, options).unwrap();
        let r = ztensor::open(&out).unwrap();
        for name in names {
            let want = &expected["files"]["dtypes_raw.onnx"][name];
            expected::check_object(&r, "converted", name, want);
        }
    }
    let path = dir_out.path().join("unknown.zt");
    let mut w =
        ztensor::Writer::create_version(&path, ztensor::Version::V2, ztensor::Durability::Unsynced)
            .unwrap();
    let object = |dtype, name: &str, bytes: &[u8]| ztensor::ObjectData {
        shape: vec![4],
        format: ztensor::Format::Dense,
        attributes: Default::default(),
        components: vec![ztensor::ComponentData {
            role: "data".into(),
            element: ztensor::ElementType {
                dtype,
                logical: Some(ztensor::LogicalType::Unknown(name.into())),
            },
            bytes: std::borrow::Cow::Owned(bytes.to_vec()),
        }],
    };
    use ztensor::DType::{U16, U8};
    w.add_object("fp6", object(U8, "f6_e2m3", &[1, 2, 3]))
        .unwrap();
    w.add_object("fp6_on_u16", object(U16, "f6_e2m3", &[0; 8]))
        .unwrap();
    w.add_object("i2_too_long", object(U8, "i2", &[1, 2]))
        .unwrap();
    w.finish().unwrap();
    let r = ztensor::open(&path).unwrap();
    let logical = |name: &str| {
        r.object(name).unwrap().components[0]
            .element
            .logical
            .clone()
    };
    assert_eq!(logical("fp6"), Some(ztensor::LogicalType::F6E2M3));
    for name in ["fp6_on_u16", "i2_too_long"] {
        assert!(
            matches!(logical(name), Some(ztensor::LogicalType::Unknown(_))),
            "{name}"
        );
        assert!(r.object(name).unwrap().bytes().is_ok(), "{name}");
    }
}

/// The sub-byte types decode to the values tools/interop/make_onnx.py gave onnx (its
/// `values()`), from `raw_data` and from `int32_data` alike.
#[test]
fn sub_byte_types_read_as_f32() {
    let want: [(&str, &[f32]); 6] = [
        ("int2", &[-2.0, -1.0, 0.0, 1.0, 1.0, -2.0]),
        ("uint2", &[0.0, 3.0, 1.0, 2.0, 3.0]),
        ("int4", &[-8.0, -1.0, 0.0, 1.0, 6.0, 7.0]),
        ("uint4", &[0.0, 15.0, 3.0, 9.0, 1.0]),
        ("float6e2m3", &[0.5, -7.5, 1.125, 0.0, 3.0]),
        ("float6e3m2", &[28.0, -0.0625, 1.5, -3.0]),
    ];
    for file in ["dtypes_raw.onnx", "dtypes_typed.onnx"] {
        let r = ztensor::open(dir().join(file)).unwrap();
        for (name, values) in want {
            let got = r.object(name).unwrap().read_f32().unwrap();
            assert_eq!(got, values, "{file} {name}");
        }
    }
    // The f32 values count against the decompression cap: six 2-bit codes are 24 bytes.
    let capped = OpenOptions::new()
        .max_decompressed_len(23)
        .open(dir().join("dtypes_raw.onnx"))
        .unwrap();
    let e = capped.object("int2").unwrap().read_f32().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert!(
        e.to_string()
            .contains("decoding 6 packed elements takes 24 bytes, over the cap of 23"),
        "{e}"
    );
}

#[test]
fn typed_fields_decode_to_the_raw_bytes() {
    // The same values written both ways read the same; the typed ones are decoded copies.
    let raw = ztensor::open(dir().join("dtypes_raw.onnx")).unwrap();
    let typed = ztensor::open(dir().join("dtypes_typed.onnx")).unwrap();
    for o in raw.objects().iter().filter(|o| o.skipped().is_none()) {
        let a = raw.object(&o.name).unwrap().bytes().unwrap();
        let b = typed.object(&o.name).unwrap().bytes().unwrap();
        assert_eq!(a, b, "{}", o.name);
    }
    let int8 = typed.object("int8").unwrap();
    assert_eq!(int8.components[0].encoding.name(), "protobuf-varints");
}

#[test]
fn raw_data_is_served_from_the_map() {
    let r = ztensor::open(dir().join("dtypes_raw.onnx")).unwrap();
    let o = r.object("float").unwrap();
    let bytes = o.bytes().unwrap();
    assert!(matches!(bytes, std::borrow::Cow::Borrowed(_)));
}

#[test]
fn sparse_initializers_are_coo_objects() {
    let expected = expected();
    let r = ztensor::open(dir().join("subgraphs.onnx")).unwrap();
    for (name, want) in expected["sparse"]["subgraphs.onnx"].as_object().unwrap() {
        let o = r.object(name).unwrap();
        assert_eq!(o.format.name(), "sparse_coo");
        let (bytes, element) = o.dense_form().unwrap();
        assert_eq!(element.name(), want["type"].as_str().unwrap());
        let hex: String = bytes.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(hex, want["hex"].as_str().unwrap(), "{name}");
    }
}

#[test]
fn constants_and_subgraphs_say_where_they_came_from() {
    let r = ztensor::open(dir().join("subgraphs.onnx")).unwrap();
    let attr = |name: &str, key: &str| -> String {
        let o = r.objects().iter().find(|o| o.name == name).unwrap();
        o.attributes
            .get(key)
            .and_then(Value::as_str)
            .unwrap()
            .to_owned()
    };
    assert_eq!(attr("cond", "onnx.source"), "constant");
    assert_eq!(attr("cond", "onnx.graph"), "main");
    assert_eq!(attr("then_w", "onnx.graph"), "main/if0.then_branch");
    assert_eq!(attr("body_bias", "onnx.source"), "initializer");
    assert_eq!(
        attr("body_bias", "onnx.graph"),
        "main/if0.else_branch/loop0.body"
    );
    assert_eq!(attr("sp", "onnx.source"), "sparse_initializer");
    // The model's metadata, as text.
    let want = &expected()["attributes"]["subgraphs.onnx"];
    let a = r.attributes();
    for key in ["producer_name", "producer_version", "doc_string"] {
        assert_eq!(
            a[&format!("onnx.{key}")].as_str(),
            want[key].as_str(),
            "{key}"
        );
    }
    assert_eq!(a["onnx.ir_version"].as_str(), Some("10"));
    assert_eq!(a["author"].as_str(), Some("ztensor"));
    assert_eq!(a["license"].as_str(), Some("MIT"));
    assert_eq!(a["onnx.opset_import"].as_str(), Some(r#"{"":21}"#));
    assert!(a.values().all(|v| v.as_str().is_some()), "{a:?}");
}

#[test]
fn external_data_lives_beside_the_model() {
    let r = ztensor::open(dir().join("external.onnx")).unwrap();
    let files: Vec<&str> = r.shards().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(files, ["external.onnx.data", "weights/int64.bin"]);
    assert!(r.verify().is_ok());
}

/// A model whose only initializer keeps its data at `location`, beside it in a fresh folder.
fn model_with_external(location: &str) -> (tempfile::TempDir, PathBuf) {
    model_with_external_length(location, Some("8"))
}

/// The same, with `length` (or none: the data runs to the end of the file).
fn model_with_external_length(
    location: &str,
    length: Option<&str>,
) -> (tempfile::TempDir, PathBuf) {
    // Build the protobuf by hand: TensorProto { dims: [2], data_type: FLOAT, name: "w",
    // external_data: [location, length 8], data_location: EXTERNAL }.
    fn bytes_field(n: u8, v: &[u8]) -> Vec<u8> {
        let mut out = vec![(n << 3) | 2, v.len() as u8];
        out.extend_from_slice(v);
        out
    }
    let entry = |k: &str, v: &str| {
        let mut e = bytes_field(1, k.as_bytes());
        e.extend(bytes_field(2, v.as_bytes()));
        bytes_field(13, &e)
    };
    let mut tensor = vec![0x08, 2, 0x10, 1];
    tensor.extend(bytes_field(8, b"w"));
    tensor.extend(entry("location", location));
    if let Some(length) = length {
        tensor.extend(entry("length", length));
    }
    tensor.extend([0x70, 1]);
    let graph = bytes_field(5, &tensor);
    let mut model = vec![0x08, 10];
    model.extend(bytes_field(7, &graph));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, model).unwrap();
    (dir, path)
}

#[test]
fn external_locations_cannot_leave_the_folder() {
    let (dir, path) = model_with_external("w.bin");
    std::fs::write(dir.path().join("w.bin"), 1.5f32.to_le_bytes().repeat(2)).unwrap();
    let r = ztensor::open(&path).unwrap();
    assert_eq!(
        r.object("w").unwrap().read::<f32>().unwrap().as_ref(),
        &[1.5, 1.5]
    );
    for (location, message) in [
        (
            "../w.bin",
            "is not a relative path inside the model's folder",
        ),
        (
            "/etc/hostname",
            "is not a relative path inside the model's folder",
        ),
        ("missing.bin", "No such file"),
    ] {
        let (_dir, path) = model_with_external(location);
        let e = ztensor::open(&path).unwrap_err().to_string();
        assert!(e.contains(message), "{location}: {e}");
        assert!(e.contains("object \"w\""), "{location}: {e}");
    }
    // Too short for the declared length: onnx.load checks the range and refuses the model.
    let (dir, path) = model_with_external("short.bin");
    std::fs::write(dir.path().join("short.bin"), [0u8; 4]).unwrap();
    let e = ztensor::open(&path).unwrap_err().to_string();
    assert!(
        e.contains("at offset 0, 8 bytes, lies past the end of \"short.bin\" (4 bytes)"),
        "{e}"
    );
    // No length: the data runs to the end of the file, here 12 bytes for a tensor of 8.
    // onnx loads the model and fails on the tensor alone.
    let (dir, path) = model_with_external_length("long.bin", None);
    std::fs::write(dir.path().join("long.bin"), [0u8; 12]).unwrap();
    let r = ztensor::open(&path).unwrap();
    let e = r.object("w").unwrap().bytes().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile);
    assert!(e.to_string().contains("external data of 12 bytes"), "{e}");
    // Python's int() reads the numbers: spaces and `_` are fine.
    let (dir, path) = model_with_external_length("w.bin", Some(" 8_0 "));
    std::fs::write(dir.path().join("w.bin"), [0u8; 80]).unwrap();
    let e = ztensor::open(&path)
        .unwrap()
        .object("w")
        .unwrap()
        .bytes()
        .unwrap_err();
    assert!(e.to_string().contains("external data of 80 bytes"), "{e}");
}

#[test]
fn a_model_in_memory_with_external_data_says_why_it_cannot_be_read() {
    let (_dir, path) = model_with_external("w.bin");
    let bytes = std::fs::read(path).unwrap();
    let e = OpenOptions::new()
        .open_bytes(bytes)
        .unwrap_err()
        .to_string();
    assert!(e.contains("opened from memory"), "{e}");
}

/// Protobuf's encoding, for models built field by field.
mod pb {
    pub fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// Field `n` as a varint.
    pub fn int(n: u64, v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        varint(n << 3, &mut out);
        varint(v, &mut out);
        out
    }

    /// Field `n`, length-delimited.
    pub fn bytes(n: u64, v: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        varint((n << 3) | 2, &mut out);
        varint(v.len() as u64, &mut out);
        out.extend_from_slice(v);
        out
    }

    /// Field `n` as four bytes.
    pub fn fixed32(n: u64, v: [u8; 4]) -> Vec<u8> {
        let mut out = Vec::new();
        varint((n << 3) | 5, &mut out);
        out.extend(v);
        out
    }

    /// Field `n` as eight bytes.
    pub fn fixed64(n: u64, v: [u8; 8]) -> Vec<u8> {
        let mut out = Vec::new();
        varint((n << 3) | 1, &mut out);
        out.extend(v);
        out
    }

    /// A model (IR version 10) of `fields` after its version.
    pub fn model(fields: &[Vec<u8>]) -> Vec<u8> {
        let mut m = int(1, 10);
        m.extend(fields.concat());
        m
    }

    /// An initializer (graph field 5) of f32 values in raw_data.
    pub fn initializer(name: &[u8], values: &[f32], more: &[Vec<u8>]) -> Vec<u8> {
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let tensor = [
            int(1, values.len() as u64),
            int(2, 1),
            bytes(8, name),
            bytes(9, &raw),
            more.concat(),
        ]
        .concat();
        bytes(5, &tensor)
    }

    /// An initializer (graph field 5) named `name` of shape `dims` and ONNX type `data_type`,
    /// its values in the fields `data`.
    pub fn typed_tensor(name: &str, dims: &[u64], data_type: u64, data: &[Vec<u8>]) -> Vec<u8> {
        let mut t: Vec<u8> = dims.iter().flat_map(|&d| int(1, d)).collect();
        t.extend(int(2, data_type));
        t.extend(bytes(8, name.as_bytes()));
        t.extend(data.concat());
        bytes(5, &t)
    }

    /// A packed run of varints (without its key).
    pub fn varints(values: &[u64]) -> Vec<u8> {
        let mut out = Vec::new();
        values.iter().for_each(|&x| varint(x, &mut out));
        out
    }
}

fn open_model(bytes: Vec<u8>) -> ztensor::Reader {
    OpenOptions::new().open_bytes(bytes).unwrap()
}

fn names(r: &ztensor::Reader) -> Vec<String> {
    let mut names: Vec<String> = r.objects().iter().map(|o| o.name.clone()).collect();
    names.sort();
    names
}

/// What `onnx.load` (protobuf's parser) does with fields that are not as onnx.proto
/// declares them, found comparing both readers on damaged models: each case here is read as
/// onnx 1.23 reads it.
#[test]
fn fields_are_read_by_protobufs_rules() {
    use pb::*;
    // A field of the wrong wire type is an unknown field: skipped, not an error. Here an
    // initializer given as a varint and a model_version given as bytes.
    let graph = [initializer(b"w", &[1.0], &[]), int(5, 7)].concat();
    let r = open_model(model(&[bytes(7, &graph), bytes(5, b"7")]));
    assert_eq!(names(&r), ["w"]);
    assert!(!r.attributes().contains_key("onnx.model_version"));

    // Text that is not UTF-8 (proto2 does not check it) is read with U+FFFD.
    let graph = initializer(b"w\xff", &[1.0], &[]);
    let r = open_model(model(&[bytes(6, b"doc \xfe"), bytes(7, &graph)]));
    assert_eq!(names(&r), ["w\u{fffd}"]);
    assert_eq!(
        r.attributes()["onnx.doc_string"].as_str(),
        Some("doc \u{fffd}")
    );

    // A message given twice is merged: both pieces of the graph are the main graph.
    let r = open_model(model(&[
        bytes(7, &initializer(b"a", &[1.0], &[])),
        bytes(7, &initializer(b"b", &[2.0], &[])),
    ]));
    assert_eq!(names(&r), ["a", "b"]);

    // A Constant's tensor in two pieces: the shape and type in one, the data in the other.
    let first = [int(1, 2), int(2, 1)].concat();
    let second = bytes(9, &[1.5f32, 2.5].map(f32::to_le_bytes).concat());
    let attribute = [bytes(1, b"value"), bytes(5, &first), bytes(5, &second)].concat();
    let node = [bytes(2, b"c"), bytes(4, b"Constant"), bytes(5, &attribute)].concat();
    let r = open_model(model(&[bytes(7, &bytes(1, &node))]));
    let c = r.object("c").unwrap();
    assert_eq!(c.read::<f32>().unwrap().as_ref(), &[1.5, 2.5]);

    // The same, with float_data in both pieces: onnx concatenates them; we list the tensor
    // unreadable, saying why (one walk of one message cannot gather it).
    let first = [int(1, 2), int(2, 1), fixed32(4, 1.5f32.to_le_bytes())].concat();
    let second = fixed32(4, 2.5f32.to_le_bytes());
    let attribute = [bytes(1, b"value"), bytes(5, &first), bytes(5, &second)].concat();
    let node = [bytes(2, b"c"), bytes(4, b"Constant"), bytes(5, &attribute)].concat();
    let r = open_model(model(&[bytes(7, &bytes(1, &node))]));
    let e = r.object("c").unwrap().bytes().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("in more than one piece"), "{e}");

    // A single value given twice keeps the last: value_float, data_type, data_location.
    let attribute = [
        bytes(1, b"value_float"),
        fixed32(2, 1.0f32.to_le_bytes()),
        fixed32(2, 3.0f32.to_le_bytes()),
    ]
    .concat();
    let node = [bytes(2, b"f"), bytes(4, b"Constant"), bytes(5, &attribute)].concat();
    let r = open_model(model(&[bytes(7, &bytes(1, &node))]));
    assert_eq!(
        r.object("f").unwrap().read::<f32>().unwrap().as_ref(),
        &[3.0]
    );

    // value_ints and value_floats in any form protobuf reads: a packed run, the attribute's
    // type (another field) between, single values, another run.
    let attribute = [
        bytes(1, b"value_ints"),
        bytes(8, &[1, 0xac, 0x02]),
        int(20, 7),
        int(8, -1i64 as u64),
        bytes(8, &[5]),
    ]
    .concat();
    let floats = [
        bytes(1, b"value_floats"),
        fixed32(7, 0.5f32.to_le_bytes()),
        int(20, 6),
        bytes(7, &[1.5f32, 2.5].map(f32::to_le_bytes).concat()),
    ]
    .concat();
    let nodes = [
        bytes(
            1,
            &[bytes(2, b"is"), bytes(4, b"Constant"), bytes(5, &attribute)].concat(),
        ),
        bytes(
            1,
            &[bytes(2, b"fs"), bytes(4, b"Constant"), bytes(5, &floats)].concat(),
        ),
    ];
    let r = open_model(model(&[bytes(7, &nodes.concat())]));
    let ints = r.object("is").unwrap();
    assert_eq!(ints.info().shape.as_slice(), &[4]);
    assert_eq!(ints.read::<i64>().unwrap().as_ref(), &[1, 300, -1, 5]);
    let floats = r.object("fs").unwrap();
    assert_eq!(floats.read::<f32>().unwrap().as_ref(), &[0.5, 1.5, 2.5]);

    // data_type is an int32: a varint's low 32 bits (2^32 + 1 is FLOAT); data_location is a
    // closed enum: 5 names nothing and leaves the data in raw_data.
    let graph = initializer(b"w", &[4.0], &[int(2, (1 << 32) + 1), int(14, 5)]);
    let r = open_model(model(&[bytes(7, &graph)]));
    assert_eq!(
        r.object("w").unwrap().read::<f32>().unwrap().as_ref(),
        &[4.0]
    );
}

/// What `numpy_helper.to_array` fails on is listed and unreadable, not a refused model:
/// onnx.load reads such a model.
#[test]
fn tensors_onnx_cannot_convert_are_listed_unreadable() {
    use pb::*;
    let negative = bytes(
        5,
        &[
            int(1, 2),
            int(1, u64::MAX),
            int(2, 1),
            bytes(8, b"neg"),
            bytes(9, &[]),
        ]
        .concat(),
    );
    // Six floats in float_data for a shape of no elements.
    let empty = bytes(
        5,
        &[int(1, 0), int(2, 1), bytes(8, b"empty"), bytes(4, &[0; 24])].concat(),
    );
    let good = initializer(b"w", &[1.0], &[]);
    let r = open_model(model(&[bytes(7, &[negative, empty, good].concat())]));
    assert_eq!(names(&r), ["empty", "neg", "w"]);
    for (name, message) in [
        ("neg", "dimension -1 is negative (shape [2, -1])"),
        ("empty", "field 4 holds 24 bytes; shape [0] of f32 needs 0"),
    ] {
        let e = r.object(name).unwrap().bytes().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidFile, "{name}");
        assert!(e.to_string().contains(message), "{name}: {e}");
    }
    assert!(r.object("w").unwrap().bytes().is_ok());
}

/// Typed fields in the forms protobuf reads besides one packed run, each read as onnx 1.23's
/// `numpy_helper.to_array` reads it (checked with it): values written unpacked, floats and
/// doubles in several packed runs, booleans by their low byte, varints in several runs,
/// values with another field between them, both forms at once, and more runs than are kept
/// as pieces; a count the shape does not take, as onnx, fails.
#[test]
fn typed_fields_are_read_in_the_forms_protobuf_takes() {
    use pb::*;
    let tensor = typed_tensor;
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let f = |v: f32| fixed32(4, v.to_le_bytes());
    let graph = [
        tensor("floats_unpacked", &[3], 1, &[f(1.5), f(-2.0), f(3.0)]),
        tensor(
            "floats_in_runs",
            &[3],
            1,
            &[bytes(4, &f32s(&[1.0, 2.0])), bytes(4, &f32s(&[3.0]))],
        ),
        tensor(
            "doubles_in_runs",
            &[2],
            11,
            &[
                bytes(10, &0.25f64.to_le_bytes()),
                bytes(10, &8f64.to_le_bytes()),
            ],
        ),
        tensor(
            "doubles_unpacked",
            &[2],
            11,
            &[
                fixed64(10, 0.25f64.to_le_bytes()),
                fixed64(10, 8f64.to_le_bytes()),
            ],
        ),
        tensor(
            "int64_unpacked",
            &[3],
            7,
            &[int(7, 5), int(7, -5i64 as u64), int(7, 1 << 40)],
        ),
        tensor("int8_unpacked", &[2], 3, &[int(5, u64::MAX), int(5, 300)]),
        tensor("complex_unpacked", &[1], 14, &[f(1.0), f(-2.0)]),
        tensor("int4_unpacked", &[3], 22, &[int(5, 0x21), int(5, 0x0f)]),
        tensor(
            "bool_unpacked",
            &[3],
            9,
            &[int(5, 256), int(5, 0), int(5, 2)],
        ),
        tensor(
            "bool_packed",
            &[4],
            9,
            &[bytes(5, &varints(&[256, 0, 1, u64::MAX]))],
        ),
        tensor("scattered", &[2], 1, &[f(1.0), bytes(12, b"doc"), f(2.0)]),
        tensor("mixed", &[3], 1, &[bytes(4, &f32s(&[1.0, 2.0])), f(3.0)]),
        tensor(
            "varints_in_runs",
            &[3],
            7,
            &[bytes(7, &varints(&[1, 2])), bytes(7, &varints(&[3]))],
        ),
        tensor(
            "int32_everywhere",
            &[4],
            6,
            &[
                bytes(5, &varints(&[1, 300])),
                fixed32(5, [9; 4]),
                int(5, -7i64 as u64),
                bytes(12, b"doc"),
                bytes(5, &varints(&[u64::MAX])),
            ],
        ),
        tensor(
            "floats_in_many_runs",
            &[1100],
            1,
            &(0..1100)
                .map(|i| bytes(4, &f32s(&[i as f32])))
                .collect::<Vec<_>>(),
        ),
        tensor(
            "runs_short",
            &[4],
            1,
            &[bytes(4, &f32s(&[1.0, 2.0])), bytes(4, &f32s(&[3.0]))],
        ),
        tensor("unpacked_short", &[4], 1, &[f(1.0), f(2.0)]),
        tensor(
            "mixed_short",
            &[4],
            1,
            &[bytes(4, &f32s(&[1.0, 2.0])), f(3.0)],
        ),
        tensor(
            "varints_in_runs_short",
            &[4],
            7,
            &[bytes(7, &varints(&[1, 2])), bytes(7, &varints(&[3]))],
        ),
    ]
    .concat();
    let r = open_model(model(&[bytes(7, &graph)]));
    let object = |name: &str| r.object(name).unwrap();
    assert_eq!(
        object("floats_unpacked").read::<f32>().unwrap().as_ref(),
        &[1.5, -2.0, 3.0]
    );
    assert_eq!(
        object("floats_in_runs").read::<f32>().unwrap().as_ref(),
        &[1.0, 2.0, 3.0]
    );
    for name in ["doubles_in_runs", "doubles_unpacked"] {
        assert_eq!(
            object(name).read::<f64>().unwrap().as_ref(),
            &[0.25, 8.0],
            "{name}"
        );
    }
    assert_eq!(
        object("int64_unpacked").read::<i64>().unwrap().as_ref(),
        &[5, -5, 1 << 40]
    );
    assert_eq!(
        object("int8_unpacked").bytes().unwrap().as_ref(),
        &[0xff, 44]
    );
    // Two floats an element; two 4-bit elements a value.
    let complex = object("complex_unpacked").bytes().unwrap();
    assert_eq!(complex.as_ref(), f32s(&[1.0, -2.0]).as_slice());
    let int4 = object("int4_unpacked").bytes().unwrap();
    assert_eq!(int4.as_ref(), &[0x21, 0x0f]);
    assert_eq!(
        object("bool_unpacked").bytes().unwrap().as_ref(),
        &[0, 0, 1]
    );
    assert_eq!(
        object("bool_packed").bytes().unwrap().as_ref(),
        &[0, 0, 1, 1]
    );
    assert_eq!(
        object("scattered").read::<f32>().unwrap().as_ref(),
        &[1.0, 2.0]
    );
    assert_eq!(
        object("mixed").read::<f32>().unwrap().as_ref(),
        &[1.0, 2.0, 3.0]
    );
    assert_eq!(
        object("varints_in_runs").read::<i64>().unwrap().as_ref(),
        &[1, 2, 3]
    );
    // The fixed32 of field 5 is an unknown field to protobuf (int32_data is varints).
    assert_eq!(
        object("int32_everywhere").read::<i32>().unwrap().as_ref(),
        &[1, 300, -7, -1]
    );
    let many = object("floats_in_many_runs").read::<f32>().unwrap();
    assert!(many.iter().enumerate().all(|(i, &v)| v == i as f32));
    for (name, kind, message) in [
        (
            "mixed_short",
            ErrorKind::InvalidFile,
            "field 4 holds 12 bytes in 1 packed run and 1 unpacked value; shape [4] of f32 \
             needs 16",
        ),
        (
            "varints_in_runs_short",
            ErrorKind::InvalidFile,
            "the field holds 3 values, the shape needs 4",
        ),
        (
            "runs_short",
            ErrorKind::InvalidFile,
            "field 4 holds 12 bytes in 2 runs; shape [4] of f32 needs 16",
        ),
        (
            "unpacked_short",
            ErrorKind::InvalidFile,
            "field 4 holds 2 values; shape [4] of f32 needs 4",
        ),
    ] {
        let e = object(name).bytes().unwrap_err();
        assert_eq!(e.kind(), kind, "{name}: {e}");
        assert!(e.to_string().contains(message), "{name}: {e}");
    }
}

/// FLOAT6 and the 2-bit types in `int32_data`, as onnx 1.23's `helper.make_tensor` writes
/// them: FLOAT6 one value to an entry, packed when read (each value's low six bits, as
/// `numpy_helper.to_array` masks them); 2-bit four to an entry (its low byte). Three and four
/// FLOAT6 values both pack into three bytes, so the count is checked against the shape's.
#[test]
fn sub_byte_values_in_int32_data_are_packed_as_raw_data_packs_them() {
    use pb::*;
    let tensor = typed_tensor;
    let graph = [
        tensor("f6", &[4], 27, &[bytes(5, &varints(&[1, 2, 127, 0]))]),
        tensor(
            "f6_one_too_many",
            &[3],
            27,
            &[bytes(5, &varints(&[1, 2, 3, 4]))],
        ),
        tensor("f6_short", &[4], 28, &[bytes(5, &varints(&[1, 2, 3]))]),
        tensor("f6_unpacked", &[2], 28, &[int(5, 1), int(5, 2)]),
        tensor("i2", &[5], 26, &[bytes(5, &varints(&[0x4e, 0x1ff]))]),
        tensor("u2_unpacked", &[3], 25, &[int(5, 0x39)]),
    ]
    .concat();
    let r = open_model(model(&[bytes(7, &graph)]));
    let object = |name: &str| r.object(name).unwrap();
    let f6 = object("f6");
    assert_eq!(f6.components[0].encoding.name(), "protobuf-varint-codes");
    // 1, 2, 63 and 0, six bits each, lowest first.
    assert_eq!(f6.bytes().unwrap().as_ref(), &[0x81, 0xf0, 0x03]);
    assert_eq!(object("i2").bytes().unwrap().as_ref(), &[0x4e, 0xff]);
    assert_eq!(object("u2_unpacked").bytes().unwrap().as_ref(), &[0x39]);
    for (name, kind, message) in [
        (
            "f6_one_too_many",
            ErrorKind::InvalidFile,
            "the run holds more than the 3 values the shape needs",
        ),
        (
            "f6_short",
            ErrorKind::InvalidFile,
            "the run holds 3 values, the shape needs 4",
        ),
        (
            "f6_unpacked",
            ErrorKind::Unsupported,
            "f6_e3m2 values in field 5 in any form but one packed run",
        ),
    ] {
        let e = object(name).bytes().unwrap_err();
        assert_eq!(e.kind(), kind, "{name}: {e}");
        assert!(e.to_string().contains(message), "{name}: {e}");
    }
}

/// The listing's memory budget names how many tensors it was listing, in the singular for one.
#[test]
fn a_listing_over_its_budget_counts_its_tensors() {
    // ir_version 10; a graph of one initializer named "w" (float, no data).
    let model = vec![0x08, 10, 0x3a, 0x05, 0x2a, 0x03, 0x42, 0x01, b'w'];
    let open = |budget: u64| {
        let limits = ztensor::Limits {
            memory_budget: Some(budget),
            ..Default::default()
        };
        OpenOptions::new().limits(limits).open_bytes(model.clone())
    };
    assert_eq!(open(64 << 10).unwrap().len(), 1);
    let e = open(64).map(drop).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert!(
        e.message()
            .starts_with("listing the model's 1 tensor would take more than the memory budget"),
        "{e}"
    );
}
