//! `.mag` through the `ztensor` facade: files written by magnetron itself (fixtures/interop/mag),
//! in every layout, open and read back exactly what their scripts wrote; checksum checking
//! follows `OpenOptions`; `.zt -> .mag -> .zt` keeps every value. Tests that need only zt-mag's
//! own API (the writers against magnetron's bytes, what each layout refuses) live in
//! `crates/zt-mag/tests/read_write.rs`.

use std::path::{Path, PathBuf};

use half::{bf16, f16};
use ztensor::mag::{Layout, WriteVersion};
use ztensor::{DType, ElementType, ErrorKind, FileVersion, OpenOptions, Reader, Value};

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/interop/mag")
        .join(name)
}

fn both(name: &str) -> [Reader; 2] {
    [
        ztensor::open(sample(name)).unwrap(),
        OpenOptions::new()
            .unmapped(true)
            .open(sample(name))
            .unwrap(),
    ]
}

fn f16s(v: &[f32]) -> Vec<f16> {
    v.iter().map(|&x| f16::from_f32(x)).collect()
}

#[test]
fn gen_b_version_1_from_magnetron_0_1_2() {
    for r in both("v1_0.1.2.mag") {
        assert_eq!(r.version(), &FileVersion::Mag(Layout::V1));
        assert_eq!(r.attributes()["n_layers"], Value::Integer(12));
        assert_eq!(r.attributes()["neg"], Value::Integer(-2));
        assert_eq!(r.attributes()["lr"], Value::Float(0.5));
        assert_eq!(
            &r.read::<f32>("w").unwrap()[..],
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        assert_eq!(r.object("w").unwrap().shape[..], [2, 3]);
        assert_eq!(&r.read::<i32>("idx").unwrap()[..], &[7, -1, 258]);
        assert_eq!(&r.read::<f16>("h").unwrap()[..], &f16s(&[-2.0, -2.0])[..]);
        assert_eq!(
            &r.object("m").unwrap().read_bool().unwrap()[..],
            &[true, false, false, true]
        );
        assert_eq!(r.object("m").unwrap().shape[..], [2, 2]);
    }
}

#[test]
fn gen_c_version_100_from_magnetron_0_1_6() {
    for r in both("snap_v100_0.1.6.mag") {
        assert_eq!(r.version(), &FileVersion::Mag(Layout::V100));
        assert_eq!(
            &r.read::<f32>("w").unwrap()[..],
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        assert_eq!(&r.read::<i32>("idx").unwrap()[..], &[7, -1, 258]);
        assert_eq!(
            &r.read::<f16>("h").unwrap()[..],
            &f16s(&[1.0, -2.0, 0.5])[..]
        );
        assert_eq!(
            &r.read::<bf16>("b16").unwrap()[..],
            &[bf16::from_f32(1.0), bf16::from_f32(-2.0)]
        );
        assert_eq!(
            &r.object("m").unwrap().read_bool().unwrap()[..],
            &[true, false, true]
        );
        assert_eq!(&r.read::<u8>("u8").unwrap()[..], &[1, 2, 255]);
        assert_eq!(&r.read::<i64>("i64").unwrap()[..], &[-3]);
        assert_eq!(r.objects().len(), 7);
    }
    for r in both("scalar_v100_0.1.6.mag") {
        assert_eq!(r.object("scalar").unwrap().shape[..], [0u64; 0]);
        assert_eq!(&r.read::<f32>("scalar").unwrap()[..], &[3.5]);
    }
}

#[test]
fn gen_d_version_200_from_magnetron_0_1_9() {
    for r in both("snap_v200_0.1.9.mag") {
        assert_eq!(r.version(), &FileVersion::Mag(Layout::V200));
        assert_eq!(
            &r.read::<f32>("w").unwrap()[..],
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        assert_eq!(&r.read::<i32>("idx").unwrap()[..], &[7, -1, 258]);
        assert_eq!(
            &r.read::<f16>("h").unwrap()[..],
            &f16s(&[1.0, -2.0, 0.5])[..]
        );
        assert_eq!(
            &r.object("m").unwrap().read_bool().unwrap()[..],
            &[true, false, true]
        );
        assert_eq!(&r.read::<i64>("i64").unwrap()[..], &[-3]);
        assert_eq!(
            r.object("f8").unwrap().read_f32().unwrap(),
            [1.0, -2.0, 0.5]
        );
        assert_eq!(
            r.object("f8").unwrap().element_type().unwrap().name(),
            "f8_e4m3fn"
        );
    }
    for r in both("scalar_v200_0.1.9.mag") {
        assert_eq!(&r.read::<f32>("scalar").unwrap()[..], &[3.5]);
    }
}

#[test]
fn gen_e_version_300_from_magnetron_0_2_2() {
    for r in both("snap_v300_0.2.2.mag") {
        assert_eq!(r.version(), &FileVersion::Mag(Layout::V300));
        let a = r.attributes();
        assert_eq!(a["arch"].as_str(), Some("tiny"));
        assert_eq!(a["n_layers"], Value::Integer(12));
        assert_eq!(a["lr"], Value::Float(0.5));
        assert_eq!(a["tied"], Value::Bool(true));
        assert_eq!(a["none"], Value::Null);
        assert_eq!(
            a["list"],
            Value::Array(vec![Value::Integer(1), Value::Float(2.5), Value::from("x")])
        );
        assert_eq!(a["unicode"].as_str(), Some("µ"));
        let Value::Map(nested) = &a["nested"] else {
            panic!("nested is a map")
        };
        assert_eq!(nested["k"], Value::Integer(-1));
        let w = r.read::<f32>("w").unwrap();
        assert_eq!(&w[..], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(&r.read::<i32>("idx").unwrap()[..], &[7, -1, 258]);
        assert_eq!(r.object("empty").unwrap().shape[..], [0, 4]);
        assert!(r.read::<f16>("empty").unwrap().is_empty());
        assert_eq!(
            &r.object("m").unwrap().read_bool().unwrap()[..],
            &[true, false, true]
        );
    }
    // 4096-aligned data is served zero-copy from the map.
    let r = ztensor::open(sample("snap_v300_0.2.2.mag")).unwrap();
    assert!(matches!(
        r.read::<f32>("w").unwrap(),
        std::borrow::Cow::Borrowed(_)
    ));
}

#[test]
fn gen_a_mag_ampersand() {
    for r in both("genA_out_8cbdeb3.mag") {
        assert_eq!(r.version(), &FileVersion::Mag(Layout::GenA));
        assert_eq!(r.object("fc1_w").unwrap().shape[..], [128, 784]);
        assert_eq!(r.object("fc2_b").unwrap().shape[..], [10]);
        let w = r.read::<f32>("fc1_w").unwrap();
        assert_eq!(w.len(), 128 * 784);
        assert_eq!(w[0], -0.027_900_774);
        assert_eq!(r.read::<f32>("fc2_b").unwrap()[0], -0.082_906_88);
    }
}

#[test]
fn checksums_are_verified_unless_turned_off() {
    for name in ["v1_0.1.2.mag", "snap_v100_0.1.6.mag", "snap_v200_0.1.9.mag"] {
        let mut b = std::fs::read(sample(name)).unwrap();
        let at = if name.starts_with("v1") { 8 } else { 16 };
        b[at] ^= 0xff;
        let e = OpenOptions::new().open_bytes(b.clone()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ChecksumMismatch, "{name}");
        assert!(e.message().contains("CRC-32C mismatch"), "{e}");
        let r = OpenOptions::new()
            .verify_mag_checksum(false)
            .open_bytes(b)
            .unwrap();
        assert!(!r.objects().is_empty());
    }
}

/// Writes a .zt with one object per listed type, then .zt -> .mag -> .zt, and compares.
fn round_trip(
    version: WriteVersion,
    objects: &[(&str, ElementType, Vec<u64>)],
    attrs: &ztensor::Attributes,
) {
    let dir = tempfile::tempdir().unwrap();
    let zt = dir.path().join("a.zt");
    let mut w = ztensor::Writer::create(&zt).unwrap();
    w.set_attributes(attrs.clone());
    for (name, el, shape) in objects {
        let n: u64 = shape.iter().product::<u64>() * el.logical_size();
        let bytes: Vec<u8> = (0..n).map(|i| (i * 37 + name.len() as u64) as u8).collect();
        // Bool and FP8 bytes must be valid codes: keep bools 0/1.
        let bytes = if el.dtype == DType::Bool {
            bytes.iter().map(|b| b & 1).collect()
        } else {
            bytes
        };
        let obj = ztensor::ObjectData {
            shape: shape.clone(),
            format: ztensor::Format::Dense,
            attributes: Default::default(),
            components: vec![ztensor::ComponentData {
                role: "data".into(),
                element: el.clone(),
                bytes: bytes.into(),
            }],
        };
        w.add_object(name, obj).unwrap();
    }
    w.finish().unwrap();
    let mag = dir.path().join("a.mag");
    let r = ztensor::open(&zt).unwrap();
    ztensor::write_mag(
        &r,
        &mag,
        ztensor::MagOptions {
            version,
            densify: false,
            durability: ztensor::Durability::Synced,
        },
    )
    .unwrap();
    let back = dir.path().join("b.zt");
    ztensor::upgrade(&mag, &back, Default::default()).unwrap();
    let (a, m, b) = (
        r,
        ztensor::open(&mag).unwrap(),
        ztensor::open(&back).unwrap(),
    );
    assert_eq!(m.attributes(), attrs, "{version:?}");
    assert_eq!(b.attributes(), attrs);
    for (name, el, shape) in objects {
        for x in [&m, &b] {
            let o = x.object(name).unwrap();
            assert_eq!(
                (&o.shape[..], o.element_type().unwrap()),
                (&shape[..], el),
                "{version:?} {name}"
            );
            assert_eq!(
                x.object(name).unwrap().bytes().unwrap(),
                a.object(name).unwrap().bytes().unwrap(),
                "{version:?} {name}"
            );
        }
    }
}

#[test]
fn zt_mag_zt_keeps_every_value_of_every_dtype_version_1_holds() {
    let objects: Vec<(&str, ElementType, Vec<u64>)> = vec![
        ("f32", ElementType::plain(DType::F32), vec![2, 3]),
        ("f16", ElementType::plain(DType::F16), vec![5]),
        (
            "bool",
            ElementType::plain(DType::Bool),
            vec![1, 1, 1, 1, 1, 7],
        ),
        ("i32", ElementType::plain(DType::I32), vec![3, 1]),
    ];
    let mut attrs = ztensor::Attributes::new();
    attrs.insert("n".into(), Value::Integer(i64::MIN.into()));
    attrs.insert("lr".into(), Value::Float(1e-3));
    round_trip(WriteVersion::V1, &objects, &attrs);
}

#[test]
fn zt_mag_zt_keeps_every_value_of_every_dtype_version_300_holds() {
    // Every dtype but f64, which magnetron does not have.
    let mut objects: Vec<(&str, ElementType, Vec<u64>)> = DType::ALL
        .iter()
        .filter(|d| **d != DType::F64)
        .map(|d| (d.name(), ElementType::plain(*d), vec![3, 2]))
        .collect();
    objects.push((
        "fp8",
        ElementType {
            dtype: DType::U8,
            logical: Some(ztensor::LogicalType::F8E4M3Fn),
        },
        vec![4],
    ));
    objects.push(("scalar", ElementType::plain(DType::F32), vec![]));
    objects.push(("empty", ElementType::plain(DType::F16), vec![0, 4]));
    let mut attrs = ztensor::Attributes::new();
    attrs.insert("arch".into(), Value::from("tiny"));
    attrs.insert(
        "list".into(),
        Value::Array(vec![
            Value::Integer(1),
            Value::Float(2.5),
            Value::Null,
            Value::Bool(true),
        ]),
    );
    let mut nested = std::collections::BTreeMap::new();
    nested.insert("k".to_string(), Value::Integer(-1));
    attrs.insert("nested".into(), Value::Map(nested));
    round_trip(WriteVersion::V300, &objects, &attrs);
}

#[test]
fn sparse_and_quantized_objects_need_densify_for_mag() {
    let r = ztensor::open(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/v123_all.zt"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.mag");
    let e = ztensor::write_mag(
        &r,
        &out,
        ztensor::MagOptions {
            version: WriteVersion::V300,
            densify: false,
            durability: ztensor::Durability::Synced,
        },
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.object().is_some(), "{e}");
    assert!(!out.exists());
    // complex has no .mag type even dense: still an error naming it.
    let e = ztensor::write_mag(
        &r,
        &out,
        ztensor::MagOptions {
            version: WriteVersion::V300,
            densify: true,
            durability: ztensor::Durability::Synced,
        },
    )
    .unwrap_err();
    assert_eq!(e.object(), Some("complex"), "{e}");
}
