//! `.safetensors` files: the header parsed by us, with the safetensors crate's checks; MX
//! element types; a dtype we do not know is one unreadable tensor, not an unreadable file;
//! and conversion to safetensors streams, writing what the crate writes.

use std::collections::HashMap;

use ztensor::{ErrorKind, LogicalType, OpenOptions, Reader};

/// A safetensors file of this header (padded to 8 bytes, as the crate does) and data.
fn file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.as_bytes().to_vec();
    h.resize(h.len().next_multiple_of(8), b' ');
    let mut b = (h.len() as u64).to_le_bytes().to_vec();
    b.extend(h);
    b.extend(data);
    b
}

fn open(header: &str, data: &[u8]) -> ztensor::Result<Reader> {
    OpenOptions::new().open_bytes(file(header, data))
}

fn invalid(header: &str, data: &[u8], message: &str) {
    let Err(e) = open(header, data) else {
        panic!("the file must not open")
    };
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(
        e.to_string().contains(message),
        "{e:#}\nshould say: {message}"
    );
}

#[test]
fn a_dtype_we_do_not_know_is_one_defective_tensor() {
    // "F3" is no dtype of the safetensors crate: its own parser refuses the whole file.
    let header = r#"{"__metadata__":{"format":"pt"},
        "w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
        "future":{"dtype":"F3","shape":[7],"data_offsets":[8,11]},
        "b":{"dtype":"U8","shape":[1],"data_offsets":[11,12]}}"#;
    let mut data = Vec::new();
    data.extend(1.5f32.to_le_bytes());
    data.extend((-2.0f32).to_le_bytes());
    data.extend([1, 2, 3, 9]);
    assert!(safetensors::SafeTensors::deserialize(&file(header, &data)).is_err());

    let r = open(header, &data).unwrap();
    assert_eq!(r.names().collect::<Vec<_>>(), ["b", "future", "w"]);
    assert_eq!(&r.read::<f32>("w").unwrap()[..], &[1.5, -2.0]);
    assert_eq!(&r.read::<u8>("b").unwrap()[..], &[9]);
    let future = r.object("future").unwrap();
    let defect = future.defect.as_ref().expect("listed with a defect");
    assert_eq!(defect.kind, ErrorKind::Unsupported);
    assert_eq!(defect.message, "safetensors dtype \"F3\" is not supported");
    assert_eq!(future.shape(), &[7]);
    assert_eq!(future.element_type().unwrap().name(), "F3");
    let e = future.bytes().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert_eq!(
        r.read::<u8>("future").unwrap_err().kind(),
        ErrorKind::Unsupported
    );
    assert_eq!(
        r.attributes().get("format"),
        Some(&ztensor::Value::Text("pt".into()))
    );
}

#[test]
fn offsets_of_an_unknown_dtype_stay_inside_the_data() {
    // An unknown dtype has no length check: its end must still lie inside the file, before
    // the next tensor's offsets are added to anything.
    let huge = u64::MAX - 10;
    invalid(
        &format!(
            r#"{{"a":{{"dtype":"F3","shape":[1],"data_offsets":[0,{huge}]}},"b":{{"dtype":"U8","shape":[1],"data_offsets":[{huge},{}]}}}}"#,
            huge + 1
        ),
        &[0],
        "tensors end at byte",
    );
}

#[test]
fn mx_dtypes_are_listed_and_read_as_bytes() {
    // F8_E8M0 [3], F4 [2, 3] (3 bytes), F6_E2M3 [4] (3 bytes), F6_E3M2 [8] (6 bytes).
    let header = r#"{
        "scales":{"dtype":"F8_E8M0","shape":[3],"data_offsets":[0,3]},
        "fp4":{"dtype":"F4","shape":[2,3],"data_offsets":[3,6]},
        "fp6a":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[6,9]},
        "fp6b":{"dtype":"F6_E3M2","shape":[2,4],"data_offsets":[9,15]}}"#;
    let data: Vec<u8> = vec![127, 128, 0xFF, 0x72, 0x0A, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9];
    // The safetensors crate agrees on every size.
    let st = file(header, &data);
    safetensors::SafeTensors::deserialize(&st).unwrap();

    let r = open(header, &data).unwrap();
    let ty = |n: &str| r.object(n).unwrap().element_type().unwrap().clone();
    assert_eq!(ty("scales").logical, Some(LogicalType::F8E8M0));
    assert_eq!(ty("fp4").logical, Some(LogicalType::F4E2M1));
    assert_eq!(ty("fp6a").logical, Some(LogicalType::F6E2M3));
    assert_eq!(ty("fp6b").logical, Some(LogicalType::F6E3M2));
    for n in ["scales", "fp4", "fp6a", "fp6b"] {
        assert!(r.object(n).unwrap().defect.is_none());
        assert_eq!(ty(n).dtype, ztensor::DType::U8);
    }
    let scales = r.read::<ztensor::fp8::F8E8M0>("scales").unwrap();
    let scales: Vec<f32> = scales.iter().map(|s| s.to_f32()).collect();
    assert_eq!(scales[..2], [1.0, 2.0]);
    assert!(scales[2].is_nan());
    let fp4 = r.object("fp4").unwrap().bytes().unwrap();
    assert_eq!(
        ztensor::fp8::unpack_f4_e2m1(&fp4, 6).unwrap(),
        [1.0, 6.0, -1.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(&r.object("fp6b").unwrap().bytes().unwrap()[..], &data[9..]);
}

#[test]
fn the_crates_checks_are_kept() {
    let f32x2 = [0u8; 8];
    // Offsets must tile the data area from 0, in offset order.
    invalid(
        r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
        &f32x2,
        "must start at 0",
    );
    invalid(
        r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},
            "b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}"#,
        &f32x2,
        "must start at 4",
    );
    invalid(
        r#"{"a":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}}"#,
        &f32x2,
        "data_offsets [8, 0]",
    );
    // Byte length from the shape and dtype.
    invalid(
        r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
        &f32x2,
        "8 bytes of data, but shape [3] of F32 takes 12",
    );
    invalid(
        r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
        &[0, 0],
        "3 elements of F4 are not a whole number of bytes",
    );
    invalid(
        r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#,
        &f32x2,
        "overflows",
    );
    invalid(
        r#"{"a":{"dtype":"F8_E8M0","shape":[4611686018427387904],"data_offsets":[0,8]}}"#,
        &f32x2,
        "4611686018427387904",
    );
    // The tensors must end where the file does.
    invalid(
        r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
        &f32x2,
        "tensors end at byte",
    );
    // An unknown dtype's length is not checked, but its range is.
    invalid(
        r#"{"a":{"dtype":"F3","shape":[1],"data_offsets":[0,12]}}"#,
        &f32x2,
        "tensors end at byte",
    );
    invalid(
        r#"{"a":{"dtype":"F3","shape":[1],"data_offsets":[0,6]},
            "b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}"#,
        &f32x2,
        "must start at 6",
    );
    invalid(
        r#"{"a":{"dtype":"F3","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#,
        &f32x2,
        "overflows",
    );
    // Names are unique, even where a JSON map would keep the last.
    invalid(
        r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},
            "a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
        &f32x2,
        "tensor \"a\" is named twice",
    );
    invalid(
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
            "a":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}}"#,
        &f32x2,
        "tensor \"a\" is named twice",
    );
    // Field types.
    invalid(
        r#"{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}}"#,
        &f32x2,
        "-1 is not an unsigned integer",
    );
    invalid(
        r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}}"#,
        &f32x2,
        "data_offsets is not an array of two numbers",
    );
    // Every kind of wrong `data_offsets`, each pinned to its message: a parse of the value
    // that skips the JSON tree must keep them.
    for (offsets, message) in [
        ("[0,8,9]", "data_offsets is not an array of two numbers"),
        ("[]", "data_offsets is not an array of two numbers"),
        ("{\"0\":0}", "data_offsets is not an array of two numbers"),
        ("\"0,8\"", "data_offsets is not an array of two numbers"),
        ("null", "data_offsets is not an array of two numbers"),
        ("true", "data_offsets is not an array of two numbers"),
        ("8", "data_offsets is not an array of two numbers"),
        ("-8", "data_offsets is not an array of two numbers"),
        ("0.5", "data_offsets is not an array of two numbers"),
        ("[-1,8]", "-1 is not an unsigned integer"),
        ("[0,1.5]", "1.5 is not an unsigned integer"),
        ("[\"0\",8]", "\"0\" is not an unsigned integer"),
        ("[0,[8]]", "[8] is not an unsigned integer"),
        (
            "[-1,\"8\",9]",
            "data_offsets is not an array of two numbers",
        ),
    ] {
        invalid(
            &format!(r#"{{"a":{{"dtype":"F32","shape":[2],"data_offsets":{offsets}}}}}"#),
            &f32x2,
            message,
        );
    }
    invalid(
        r#"{"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}}"#,
        &f32x2,
        "dtype is not a string",
    );
    invalid(
        r#"{"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
        &f32x2,
        "__metadata__ value of \"k\" is not a string",
    );
    invalid(r#"{"a":"#, &[], "header");
}

/// Every dtype the crate knows opens with the size the crate computes, and names the same
/// element type the writer maps back.
#[test]
fn every_crate_dtype_round_trips_through_a_header() {
    use safetensors::tensor::{Dtype, TensorView};
    let all = [
        Dtype::BOOL,
        Dtype::F4,
        Dtype::F6_E2M3,
        Dtype::F6_E3M2,
        Dtype::U8,
        Dtype::I8,
        Dtype::F8_E5M2,
        Dtype::F8_E4M3,
        Dtype::F8_E8M0,
        Dtype::F8_E4M3FNUZ,
        Dtype::F8_E5M2FNUZ,
        Dtype::I16,
        Dtype::U16,
        Dtype::F16,
        Dtype::BF16,
        Dtype::I32,
        Dtype::U32,
        Dtype::F32,
        Dtype::C64,
        Dtype::F64,
        Dtype::I64,
        Dtype::U64,
    ];
    let buffers: Vec<(String, Dtype, Vec<u8>)> = all
        .iter()
        .map(|&d| (d.to_string(), d, vec![0u8; 8 * d.bitsize() / 8]))
        .collect();
    let views: HashMap<String, TensorView> = buffers
        .iter()
        .map(|(n, d, b)| (n.clone(), TensorView::new(*d, vec![8], b).unwrap()))
        .collect();
    let bytes = safetensors::serialize(&views, None).unwrap();
    let r = OpenOptions::new().open_bytes(bytes.clone()).unwrap();
    assert_eq!(r.objects().len(), all.len());
    for o in r.objects() {
        assert!(o.defect.is_none(), "{}", o.name);
        assert_eq!(o.shape.to_vec(), [8]);
    }
    // And back: the whole file is written again byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("back.safetensors");
    ztensor::write_safetensors(&r, &out, false).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
}

/// A zTensor file of several zstd-compressed tensors of different types, names out of order.
#[cfg(feature = "zstd")]
fn zstd_file(attributes: &[(&str, &str)]) -> Reader {
    use ztensor::fp8::F8E4M3Fn;
    let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
    w.set_options(ztensor::WriteOptions {
        compression: Some(3),
        digest: Some(ztensor::DigestAlgorithm::Crc32c),
    });
    for (k, v) in attributes {
        w.set_attribute(*k, *v);
    }
    let f32s: Vec<f32> = (0..3000).map(|i| (i % 17) as f32 * 0.25).collect();
    w.add("z.weight", &[30, 100], &f32s).unwrap();
    w.add("a.bias", &[7], &[1i64, -2, 3, -4, 5, -6, 7]).unwrap();
    let halves: Vec<half::bf16> = (0..512).map(|i| half::bf16::from_f32(i as f32)).collect();
    w.add("m.\"quoted\"\nname", &[2, 256], &halves).unwrap();
    w.add("b.mask", &[4], &[0u8, 1, 1, 0]).unwrap();
    w.add("e.fp8", &[2], &[F8E4M3Fn(0x38), F8E4M3Fn(0xC0)])
        .unwrap();
    w.add::<f32>("empty", &[0, 3], &[]).unwrap();
    w.add("scalar", &[], &[2.5f64]).unwrap();
    let r = OpenOptions::new().open_bytes(w.finish().unwrap()).unwrap();
    assert!(r
        .objects()
        .iter()
        .filter(|o| o.element_count() > 0)
        .all(|o| o.components[0].encoding == ztensor::Encoding::Zstd));
    r
}

/// What safetensors::serialize writes for the objects of `r`, read whole.
#[cfg(feature = "zstd")]
fn crate_serialized(r: &Reader, meta: Option<HashMap<String, String>>) -> Vec<u8> {
    use safetensors::tensor::TensorView;
    let data: Vec<(String, ztensor::ElementType, Vec<usize>, Vec<u8>)> = r
        .objects()
        .iter()
        .map(|o| {
            let v = r.object(&o.name).unwrap();
            let (bytes, ty) = v.dense_form().unwrap();
            (o.name.clone(), ty, v.dims().unwrap(), bytes.into_owned())
        })
        .collect();
    let dtype = |t: &ztensor::ElementType| match (t.dtype, &t.logical) {
        (_, Some(LogicalType::F8E4M3Fn)) => safetensors::Dtype::F8_E4M3,
        (ztensor::DType::F32, None) => safetensors::Dtype::F32,
        (ztensor::DType::F64, None) => safetensors::Dtype::F64,
        (ztensor::DType::I64, None) => safetensors::Dtype::I64,
        (ztensor::DType::BF16, None) => safetensors::Dtype::BF16,
        (ztensor::DType::U8, None) => safetensors::Dtype::U8,
        other => panic!("{other:?}"),
    };
    let views: Vec<(String, TensorView)> = data
        .iter()
        .map(|(n, t, s, b)| (n.clone(), TensorView::new(dtype(t), s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize(views, meta).unwrap()
}

#[test]
#[cfg(feature = "zstd")]
fn converting_zstd_zt_writes_what_the_crate_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.safetensors");
    for meta in [vec![], vec![("format", "pt")]] {
        let r = zstd_file(&meta);
        ztensor::write_safetensors(&r, &out, false).unwrap();
        let written = std::fs::read(&out).unwrap();
        let map = (!meta.is_empty()).then(|| {
            meta.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        });
        assert_eq!(written, crate_serialized(&r, map));
        let st = safetensors::SafeTensors::deserialize(&written).unwrap();
        assert_eq!(st.len(), r.objects().len());
        let z = st.tensor("z.weight").unwrap();
        assert_eq!(z.shape(), [30, 100]);
        assert_eq!(
            z.data(),
            &r.object("z.weight").unwrap().bytes().unwrap()[..]
        );
        // And it reads back here with the same values.
        let back = ztensor::open(&out).unwrap();
        for o in r.objects() {
            let a = r.object(&o.name).unwrap().dense_form().unwrap();
            let b = back.object(&o.name).unwrap().dense_form().unwrap();
            assert_eq!(a, b, "{}", o.name);
        }
    }
}

#[test]
#[cfg(feature = "zstd")]
fn metadata_is_written_sorted() {
    let r = zstd_file(&[("b", "2"), ("a", "1"), ("c", "\"3\"")]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.safetensors");
    ztensor::write_safetensors(&r, &out, false).unwrap();
    let written = std::fs::read(&out).unwrap();
    assert!(written[8..].starts_with(br#"{"__metadata__":{"a":"1","b":"2","c":"\"3\""},"#));
    let (_, m) = safetensors::SafeTensors::read_metadata(&written).unwrap();
    let m = m.metadata().clone().unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!(m["c"], "\"3\"");
}

#[test]
fn sizes_safetensors_cannot_hold_are_refused_before_writing() {
    use ztensor::{ComponentData, ElementType, Format, ObjectData};
    let f4 = |n: u64, bytes: Vec<u8>| ObjectData {
        shape: vec![n],
        format: Format::Dense,
        attributes: Default::default(),
        components: vec![ComponentData {
            role: "data".into(),
            element: ElementType::logical(LogicalType::F4E2M1).unwrap(),
            bytes: bytes.into(),
        }],
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.safetensors");

    // Four FP4 elements: two bytes, in .zt and in safetensors alike.
    let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
    w.add_object("even", f4(4, vec![0x72, 0x0A])).unwrap();
    let r = OpenOptions::new().open_bytes(w.finish().unwrap()).unwrap();
    ztensor::write_safetensors(&r, &out, false).unwrap();
    let st = std::fs::read(&out).unwrap();
    let st = safetensors::SafeTensors::deserialize(&st).unwrap();
    assert_eq!(st.tensor("even").unwrap().dtype(), safetensors::Dtype::F4);
    assert_eq!(st.tensor("even").unwrap().data(), [0x72, 0x0A]);

    // Three: two bytes in .zt (the last half used), none whole in safetensors.
    let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
    w.add_object("odd", f4(3, vec![0x72, 0x0A])).unwrap();
    let r = OpenOptions::new().open_bytes(w.finish().unwrap()).unwrap();
    std::fs::remove_file(&out).unwrap();
    let e = ztensor::write_safetensors(&r, &out, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(e.object(), Some("odd"));
    assert!(e.message().contains("3 elements of f4_e2m1"), "{e}");
    assert!(!out.exists());
}

#[test]
fn a_header_that_starts_with_whitespace_is_read_as_the_crate_reads_it() {
    // The crate parses the header with serde_json, which skips whitespace before the object.
    let r = open(
        "\n  {\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        &1.5f32.to_le_bytes(),
    )
    .unwrap();
    assert_eq!(*r.version(), ztensor::FileVersion::Safetensors);
    assert_eq!(r.object("w").unwrap().read_f32().unwrap(), vec![1.5]);
}

#[test]
fn tensors_held_in_memory_are_written_as_the_crate_writes_them() {
    use ztensor::convert::{safetensors_bytes, SafetensorsTensor};
    use ztensor::{DType, ElementType};
    let wide = [1.0f64, -2.0, 3.5];
    let narrow = [7u8, 8];
    let half = [0x3c00u16, 0x4000, 0x4200, 0x4400];
    let held = |name, d, shape: Vec<u64>, bytes| SafetensorsTensor {
        name,
        element: ElementType::plain(d),
        shape,
        bytes,
    };
    // Out of the crate's order (dtype alignment, then name) on purpose.
    let tensors = [
        held("b.narrow", DType::U8, vec![2], &narrow[..]),
        held(
            "a.half",
            DType::F16,
            vec![2, 2],
            bytemuck::cast_slice(&half),
        ),
        held("c.wide", DType::F64, vec![3], bytemuck::cast_slice(&wide)),
        held("d.empty", DType::F32, vec![0, 4], &[][..]),
    ];
    let ours = safetensors_bytes(&tensors, None).unwrap();
    let views: Vec<(&str, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|t| {
            let dtype = match t.element.dtype {
                DType::U8 => safetensors::Dtype::U8,
                DType::F16 => safetensors::Dtype::F16,
                DType::F64 => safetensors::Dtype::F64,
                _ => safetensors::Dtype::F32,
            };
            let shape = t.shape.iter().map(|&d| d as usize).collect();
            (
                t.name,
                safetensors::tensor::TensorView::new(dtype, shape, t.bytes).unwrap(),
            )
        })
        .collect();
    assert_eq!(ours, safetensors::serialize(views.clone(), None).unwrap());
    // An empty map is written as one, as the crate writes `Some` of an empty map, and read
    // back as declared: safetensors' `metadata()` gives `{}` for it and `None` without it.
    let empty = std::collections::BTreeMap::new();
    let ours = safetensors_bytes(&tensors, Some(&empty)).unwrap();
    let theirs = safetensors::serialize(views.clone(), Some(Default::default())).unwrap();
    assert_eq!(ours, theirs);
    assert!(ours[8..].starts_with(br#"{"__metadata__":{},"#));
    let r = OpenOptions::new().open_bytes(ours).unwrap();
    assert!(r.attributes().is_empty() && r.has_empty_metadata());
    // It survives a conversion to .safetensors (it is not an attribute).
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.safetensors");
    ztensor::write_safetensors(&r, &copy, false).unwrap();
    assert_eq!(std::fs::read(&copy).unwrap(), theirs);
    let r = OpenOptions::new()
        .open_bytes(safetensors_bytes(&tensors, None).unwrap())
        .unwrap();
    assert!(!r.has_empty_metadata());
    let with_key = std::collections::BTreeMap::from([("format".into(), "pt".into())]);
    let r = OpenOptions::new()
        .open_bytes(safetensors_bytes(&tensors, Some(&with_key)).unwrap())
        .unwrap();
    assert!(!r.has_empty_metadata());
    assert_eq!(r.attributes().len(), 1);

    // The same name twice is refused, naming it, also when the two differ in type (the
    // crate's order would not put them side by side).
    let twice = [
        held("w", DType::F64, vec![3], bytemuck::cast_slice(&wide)),
        held("x", DType::U8, vec![2], &narrow[..]),
        held("w", DType::U8, vec![2], &narrow[..]),
    ];
    let e = safetensors_bytes(&twice, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(
        e.to_string().contains("same name") && e.to_string().contains("\"w\""),
        "{e}"
    );

    // Bytes that do not match the shape are refused before anything is written.
    let short = [held("w", DType::F64, vec![4], bytemuck::cast_slice(&wide))];
    let e = safetensors_bytes(&short, None).unwrap_err();
    assert!(
        e.to_string()
            .contains("has 24 bytes, but its shape and type take 32"),
        "{e}"
    );
}
