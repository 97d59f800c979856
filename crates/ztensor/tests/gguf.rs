//! GGUF files written by the `gguf` package (tools/interop/make_gguf.py): metadata with its
//! types, dense tensors borrowed from the map, every block type kept byte for byte, big-endian
//! files, and dequantization bit for bit as `gguf.quants.dequantize` computed it.

use std::borrow::Cow;
use std::path::PathBuf;

use ztensor::formats::ggml::GGML_TYPES;
use ztensor::{ErrorKind, FileVersion, Format, OpenOptions, Reader, Value};

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/interop/gguf")
        .join(name)
}

/// The file opened mapped and unmapped.
fn both(name: &str) -> [Reader; 2] {
    [
        OpenOptions::new().open(path(name)).unwrap(),
        OpenOptions::new().unmapped(true).open(path(name)).unwrap(),
    ]
}

fn attr<'r>(r: &'r Reader, key: &str) -> &'r Value {
    r.attributes()
        .get(key)
        .unwrap_or_else(|| panic!("no {key}"))
}

fn int(i: i128) -> Value {
    Value::Integer(i)
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

#[test]
fn every_metadata_type_reads_with_its_type_kept() {
    for r in both("dense.gguf") {
        assert_eq!(
            r.version(),
            &FileVersion::Gguf {
                version: 3,
                big_endian: false
            }
        );
        assert_eq!(r.version().kind(), "gguf");
        let cases: [(&str, Value, &str); 14] = [
            ("t.u8", int(200), "u8"),
            ("t.i8", int(-100), "i8"),
            ("t.u16", int(60000), "u16"),
            ("t.i16", int(-30000), "i16"),
            ("t.u32", int(4_000_000_000), "u32"),
            ("t.i32", int(-2_000_000_000), "i32"),
            ("t.f32", Value::Float(f64::from(0.1f32)), "f32"),
            ("t.bool", Value::Bool(true), "bool"),
            ("t.str", text("h\u{e9}llo"), "str"),
            ("t.u64", int((1 << 63) + 5), "u64"),
            ("t.i64", int(-(1 << 62)), "i64"),
            ("t.f64", Value::Float(0.1), "f64"),
            ("general.alignment", int(64), "u32"),
            ("general.architecture", text("test"), "str"),
        ];
        let Value::Map(types) = attr(&r, "gguf.value_types") else {
            panic!("gguf.value_types is a map")
        };
        for (key, value, ty) in cases {
            assert_eq!(attr(&r, key), &value, "{key}");
            assert_eq!(types.get(key), Some(&text(ty)), "{key}");
        }
        let arrays: [(&str, Vec<Value>, &str); 12] = [
            ("t.arr_u8", vec![int(1), int(2), int(255)], "[u8]"),
            ("t.arr_i8", vec![int(-1), int(2)], "[i8]"),
            ("t.arr_u16", vec![int(1), int(65535)], "[u16]"),
            ("t.arr_i16", vec![int(-1), int(2)], "[i16]"),
            ("t.arr_u32", vec![int(7), int(8), int(9)], "[u32]"),
            ("t.arr_i32", vec![int(-7), int(8)], "[i32]"),
            (
                "t.arr_f32",
                vec![Value::Float(0.5), Value::Float(-1.25)],
                "[f32]",
            ),
            (
                "t.arr_bool",
                vec![Value::Bool(true), Value::Bool(false), Value::Bool(true)],
                "[bool]",
            ),
            (
                "t.arr_str",
                vec![text("a"), text(""), text("\u{fc}\u{f1}\u{ee}")],
                "[str]",
            ),
            ("t.arr_u64", vec![int(u64::MAX.into())], "[u64]"),
            ("t.arr_i64", vec![int(i64::MIN.into())], "[i64]"),
            (
                "t.arr_f64",
                vec![Value::Float(1e300), Value::Float(-0.0)],
                "[f64]",
            ),
        ];
        for (key, values, ty) in arrays {
            assert_eq!(attr(&r, key), &Value::Array(values), "{key}");
            assert_eq!(types.get(key), Some(&text(ty)), "{key}");
        }
        let nested = Value::Array(vec![
            Value::Array(vec![int(1), int(2)]),
            Value::Array(vec![int(3)]),
        ]);
        assert_eq!(attr(&r, "t.arr_arr"), &nested);
        // The package writes Python ints in arrays as i32.
        assert_eq!(
            types.get("t.arr_arr"),
            Some(&Value::Array(vec![text("[i32]"), text("[i32]")]))
        );
        assert!(attr(&r, "t.arr_f64") != &Value::Array(vec![]));
        if let Value::Array(v) = attr(&r, "t.arr_f64") {
            assert!(matches!(v[1], Value::Float(z) if z == 0.0 && z.is_sign_negative()));
        }
    }
}

#[test]
fn dense_tensors_read_row_major_and_borrow_from_the_map() {
    let [mapped, unmapped] = both("dense.gguf");
    for r in [&mapped, &unmapped] {
        let f32s = r.read::<f32>("f32").unwrap();
        assert_eq!(&f32s[..], &[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]);
        // GGUF lists [3, 2] (innermost first); numpy's shape was (2, 3).
        assert_eq!(r.object("f32").unwrap().shape(), &[2, 3]);
        let f16s: Vec<f32> = r
            .read::<half::f16>("f16")
            .unwrap()
            .iter()
            .map(|x| x.to_f32())
            .collect();
        assert_eq!(f16s, [0.5, -1.0, 65504.0]);
        assert_eq!(&r.read::<f64>("f64").unwrap()[..], &[1.5, -2.25]);
        assert_eq!(r.object("f64").unwrap().shape(), &[2, 1]);
        assert_eq!(&r.read::<i8>("i8").unwrap()[..], &[-128, 0, 127]);
        assert_eq!(&r.read::<i16>("i16").unwrap()[..], &[-32768, 1]);
        assert_eq!(&r.read::<i32>("i32").unwrap()[..], &[-5, 6]);
        assert_eq!(r.object("i32").unwrap().shape(), &[1, 1, 2]);
        assert_eq!(&r.read::<i64>("i64").unwrap()[..], &[-(1 << 40), 1 << 40]);
        let bf: Vec<f32> = r
            .read::<half::bf16>("bf16")
            .unwrap()
            .iter()
            .map(|x| x.to_f32())
            .collect();
        assert_eq!(bf, [1.0, -2.0, 0.5]);
        assert_eq!(r.object("scalar").unwrap().shape(), &[] as &[u64]);
        assert_eq!(&r.read::<f32>("scalar").unwrap()[..], &[3.0]);
        assert!(r.verify().is_ok());
    }
    // general.alignment is 64: every tensor starts on a multiple of it.
    for o in mapped.objects() {
        assert_eq!(o.components[0].offset % 64, 0, "{}", o.name);
    }
    assert!(matches!(
        mapped.read::<f32>("f32").unwrap(),
        Cow::Borrowed(_)
    ));
    assert!(matches!(
        mapped.read::<i64>("i64").unwrap(),
        Cow::Borrowed(_)
    ));
}

#[test]
fn every_block_type_is_kept_byte_for_byte() {
    let file = std::fs::read(path("quant.gguf")).unwrap();
    for r in both("quant.gguf") {
        let blocks: Vec<_> = GGML_TYPES.iter().filter(|t| t.dense.is_none()).collect();
        assert_eq!(r.len(), blocks.len(), "one tensor per block type");
        for t in blocks {
            let o = r.object(t.name).unwrap();
            assert_eq!(o.format, Format::Unknown(format!("gguf.{}/1", t.name)));
            assert_eq!(o.ggml_type(), Some(*t));
            assert_eq!(o.shape(), &[2, 2 * t.block_elems], "{}", t.name);
            assert_eq!(
                o.attributes.get("elems_per_block"),
                Some(&int(t.block_elems.into()))
            );
            assert_eq!(
                o.attributes.get("block_bytes"),
                Some(&int(t.block_bytes.into()))
            );
            let data = o.component("data").unwrap();
            assert_eq!(data.length, 4 * t.block_bytes, "{}", t.name);
            let at = data.offset as usize;
            assert_eq!(
                &o.bytes().unwrap()[..],
                &file[at..at + data.length as usize],
                "{}",
                t.name
            );
        }
    }
}

/// Every block type we decode against the golden values of `make_gguf.py`: the gguf
/// package's `dequantize`, and for Q8_K and Q1_0, which the package lacks, ggml's formulas in
/// numpy.
#[test]
fn dequantization_matches_the_gguf_package_bit_for_bit() {
    let mut checked = 0;
    for r in both("quant.gguf") {
        for o in &r {
            let t = o.ggml_type().unwrap();
            let golden = path(&format!("golden/{}.f32", t.name));
            if !t.can_dequantize() {
                assert!(!golden.exists());
                let e = o.read::<f32>().unwrap_err();
                assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
                assert!(e.to_string().contains("read its bytes"), "{e}");
                continue;
            }
            // Every bit, but a NaN's sign, which IEEE 754 leaves open for a product (the
            // block of IQ2_S whose random scale is a NaN: -NaN there, NaN here).
            let canonical = |x: u32| match f32::from_bits(x).is_nan() {
                true => f32::NAN.to_bits(),
                false => x,
            };
            let want: Vec<u32> = std::fs::read(&golden)
                .unwrap()
                .chunks_exact(4)
                .map(|b| canonical(u32::from_le_bytes(b.try_into().unwrap())))
                .collect();
            let bits = |v: &[f32]| v.iter().map(|x| canonical(x.to_bits())).collect::<Vec<_>>();
            assert_eq!(bits(&o.read::<f32>().unwrap()), want, "{}", t.name);
            assert_eq!(bits(&o.read_f32().unwrap()), want, "{}", t.name);
            let (dense, ty) = o.dense_form().unwrap();
            assert_eq!(ty.name(), "f32");
            let dense: Vec<u32> = dense
                .chunks_exact(4)
                .map(|b| canonical(u32::from_le_bytes(b.try_into().unwrap())))
                .collect();
            assert_eq!(dense, want, "{}", t.name);
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        2 * 25,
        "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K-Q6_K, Q8_K, TQ1_0, TQ2_0, Q1_0, the nine IQ types, \
         MXFP4, NVFP4, mapped and not"
    );
}

#[test]
fn a_big_endian_file_reads_the_same_values() {
    for r in both("big_endian.gguf") {
        assert_eq!(
            r.version(),
            &FileVersion::Gguf {
                version: 3,
                big_endian: true
            }
        );
        assert_eq!(r.version().to_string(), "GGUF v3 (big-endian)");
        assert_eq!(attr(&r, "t.u32"), &int(0x0102_0304));
        assert_eq!(attr(&r, "t.f64"), &Value::Float(-0.5));
        assert_eq!(attr(&r, "t.arr_i16"), &Value::Array(vec![int(-2), int(3)]));
        assert_eq!(attr(&r, "t.str"), &text("big"));
        let f = r.read::<f32>("f32").unwrap();
        assert!(matches!(f, Cow::Owned(_)), "swapped, so never borrowed");
        assert_eq!(&f[..], &[1.0, -2.0, 3.5, 1e-3]);
        let h: Vec<f32> = r
            .read::<half::f16>("f16")
            .unwrap()
            .iter()
            .map(|x| x.to_f32())
            .collect();
        assert_eq!(h, [0.5, -1.0]);
        assert_eq!(&r.read::<i64>("i64").unwrap()[..], &[1, -(1 << 40)]);
        let bf: Vec<f32> = r
            .read::<half::bf16>("bf16")
            .unwrap()
            .iter()
            .map(|x| x.to_f32())
            .collect();
        assert_eq!(bf, [1.0, -2.0]);
        // The writer leaves block bytes as they are: the Q8_0 scale stays little-endian.
        let q = r.read::<f32>("q8_0").unwrap();
        let raw = r.object("q8_0").unwrap().bytes().unwrap();
        assert_eq!(q[5], f32::from(raw[2 + 5] as i8) * 0.25);
        assert!(r.verify().is_ok());
    }
}

#[test]
fn a_quantized_object_is_not_dense() {
    let [r, _] = both("quant.gguf");
    let e = r.read::<half::f16>("q4_0").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("not dense"), "{e}");
}

/// Writes `r` as GGUF into `dir` and returns the bytes.
fn written(r: &Reader, dir: &std::path::Path, name: &str) -> Vec<u8> {
    let p = dir.join(name);
    ztensor::write_gguf(r, &p, false).unwrap();
    std::fs::read(p).unwrap()
}

#[test]
fn a_gguf_written_back_keeps_tensors_metadata_and_types() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["dense.gguf", "quant.gguf", "big_endian.gguf"] {
        let [src, _] = both(name);
        let bytes = written(&src, dir.path(), name);
        let back = OpenOptions::new().open_bytes(bytes.clone()).unwrap();
        assert_eq!(
            back.version(),
            &FileVersion::Gguf {
                version: 3,
                big_endian: false
            }
        );
        // Every attribute, the types map included: same keys, values and GGUF types.
        assert_eq!(back.attributes(), src.attributes(), "{name}");
        assert_eq!(back.len(), src.len());
        for o in &src {
            let b = back.object(o.name()).unwrap();
            assert_eq!(b.shape(), o.shape(), "{name}/{}", o.name());
            assert_eq!(b.format, o.format);
            assert_eq!(b.attributes, o.attributes);
            assert_eq!(b.element_type(), o.element_type());
            // Big-endian sources come back little-endian: compare decoded bytes.
            assert_eq!(
                b.bytes().unwrap(),
                o.bytes().unwrap(),
                "{name}/{}",
                o.name()
            );
        }
        // Deterministic: writing what was written gives the same bytes.
        assert_eq!(written(&back, dir.path(), "again.gguf"), bytes, "{name}");
    }
}

#[test]
fn gguf_to_zt_v2_and_v1_2_and_back_gives_the_same_gguf() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["dense.gguf", "quant.gguf", "big_endian.gguf"] {
        let [src, _] = both(name);
        let direct = written(&src, dir.path(), "direct.gguf");
        for version in [ztensor::Version::V2, ztensor::Version::V1_2] {
            let zt = dir.path().join("m.zt");
            let options = ztensor::ConvertOptions {
                version,
                ..Default::default()
            };
            ztensor::upgrade(path(name), &zt, options).unwrap();
            let mid = ztensor::open(&zt).unwrap();
            // In the .zt, a block tensor is what ztensor 2.x makes of it.
            if let Some(o) = mid.get("q4_0") {
                assert_eq!(o.format, Format::Unknown("gguf.q4_0/1".into()));
                assert_eq!(o.component("data").unwrap().element.name(), "u8");
                assert_eq!(o.shape(), &[2, 64]);
                assert_eq!(o.attributes.get("block_bytes"), Some(&int(18)));
            }
            // The .zt lists tensors in name order, so the GGUF written from it does too; its
            // content is the direct conversion's.
            let via = OpenOptions::new()
                .open_bytes(written(&mid, dir.path(), "via.gguf"))
                .unwrap();
            let direct = OpenOptions::new().open_bytes(direct.clone()).unwrap();
            assert_eq!(
                via.attributes(),
                direct.attributes(),
                "{name} via {version:?}"
            );
            assert_eq!(via.len(), direct.len());
            for o in &direct {
                let v = via.object(o.name()).unwrap();
                assert!(
                    v.shape() == o.shape()
                        && v.format == o.format
                        && v.attributes == o.attributes
                        && v.bytes().unwrap() == o.bytes().unwrap(),
                    "{name} via {version:?}: {}",
                    o.name()
                );
            }
        }
    }
}

#[test]
fn what_gguf_cannot_hold_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let zt = dir.path().join("m.zt");
    let out = dir.path().join("m.gguf");
    let write = |build: &dyn Fn(&mut ztensor::Writer<ztensor::container::AtomicFile>)| {
        let mut w = ztensor::Writer::create(&zt).unwrap();
        build(&mut w);
        w.finish().unwrap();
        let r = ztensor::open(&zt).unwrap();
        (
            ztensor::write_gguf(&r, &out, false),
            ztensor::write_gguf(&r, &out, true),
        )
    };
    let (e, _) = write(&|w| w.add("bytes", &[2], &[1u8, 2]).unwrap());
    let e = e.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(e.object(), Some("bytes"));
    assert!(e.to_string().contains("GGUF has no u8 type"), "{e}");

    let (e, densified) = write(&|w| {
        w.add_csr("m", [2, 2], &[5.0f32], &[1], &[0, 1, 1]).unwrap();
    });
    assert!(e.unwrap_err().to_string().contains("use densify"));
    densified.unwrap();
    let g = ztensor::open(&out).unwrap();
    assert_eq!(&g.read::<f32>("m").unwrap()[..], &[0.0, 5.0, 0.0, 0.0]);

    let (e, _) = write(&|w| {
        w.set_attribute("nested", Value::Map(Default::default()));
        w.add("w", &[1], &[1.0f32]).unwrap();
    });
    let e = e.unwrap_err();
    assert!(
        e.to_string()
            .contains("attribute \"nested\": GGUF metadata has no map values"),
        "{e}"
    );
}

#[test]
fn untyped_attributes_get_the_types_the_gguf_package_would_give() {
    let dir = tempfile::tempdir().unwrap();
    let zt = dir.path().join("m.zt");
    let mut w = ztensor::Writer::create(&zt).unwrap();
    w.set_attribute("small", 5i64);
    w.set_attribute("big", 1i64 << 40);
    w.set_attribute("half", 0.5f64);
    w.set_attribute("tenth", 0.1f64);
    w.set_attribute("name", "x");
    w.set_attribute("list", Value::Array(vec![int(1), int(1 << 40)]));
    w.add("w", &[1], &[1.0f32]).unwrap();
    w.finish().unwrap();
    let bytes = written(&ztensor::open(&zt).unwrap(), dir.path(), "m.gguf");
    let g = OpenOptions::new().open_bytes(bytes).unwrap();
    let Value::Map(types) = attr(&g, "gguf.value_types") else {
        panic!("types")
    };
    for (k, t) in [
        ("small", "i32"),
        ("big", "i64"),
        ("half", "f32"),
        ("tenth", "f64"),
        ("name", "str"),
        ("list", "[i64]"),
    ] {
        assert_eq!(types.get(k), Some(&text(t)), "{k}");
    }
    assert_eq!(attr(&g, "tenth"), &Value::Float(0.1));
}

#[test]
fn safetensors_to_gguf_keeps_dense_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let zt = dir.path().join("m.zt");
    let mut w = ztensor::Writer::create(&zt).unwrap();
    w.set_attribute("note", "from safetensors");
    w.add("a", &[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])
        .unwrap();
    w.add("b", &[3], &[half::f16::from_f32(0.5); 3]).unwrap();
    w.add("c", &[2], &[-7i64, 1 << 40]).unwrap();
    w.add("d", &[], &[2.5f64]).unwrap();
    w.finish().unwrap();
    let st = dir.path().join("m.safetensors");
    ztensor::write_safetensors(&ztensor::open(&zt).unwrap(), &st, false).unwrap();
    let src = ztensor::open(&st).unwrap();
    let out = dir.path().join("m.gguf");
    ztensor::write_gguf(&src, &out, false).unwrap();
    let g = ztensor::open(&out).unwrap();
    assert_eq!(g.len(), 4);
    for o in &src {
        let b = g.object(o.name()).unwrap();
        assert_eq!(b.shape(), o.shape());
        assert_eq!(b.element_type(), o.element_type());
        assert_eq!(b.bytes().unwrap(), o.bytes().unwrap());
    }
    assert_eq!(attr(&g, "note"), &text("from safetensors"));
}

mod metadata_round_trip {
    use proptest::prelude::*;
    use ztensor::{Attributes, Value};

    /// A GGUF value type and a value of it.
    fn typed_scalar() -> impl Strategy<Value = (String, Value)> {
        let int = |t: &'static str, lo: i128, hi: i128| {
            (lo..=hi).prop_map(move |i| (t.to_owned(), Value::Integer(i)))
        };
        prop_oneof![
            int("u8", 0, 255),
            int("i8", -128, 127),
            int("u16", 0, 65535),
            int("i16", -32768, 32767),
            int("u32", 0, u32::MAX.into()),
            int("i32", i32::MIN.into(), i32::MAX.into()),
            int("u64", 0, u64::MAX.into()),
            int("i64", i64::MIN.into(), i64::MAX.into()),
            any::<f32>()
                .prop_filter("NaN payloads are not kept", |f| !f.is_nan())
                .prop_map(|f| ("f32".to_owned(), Value::Float(f.into()))),
            any::<f64>()
                .prop_filter("NaN payloads are not kept", |f| !f.is_nan())
                .prop_map(|f| ("f64".to_owned(), Value::Float(f))),
            any::<bool>().prop_map(|b| ("bool".to_owned(), Value::Bool(b))),
            ".{0,12}".prop_map(|s| ("str".to_owned(), Value::Text(s))),
        ]
    }

    /// An array of one scalar type, with its type.
    fn typed_array() -> impl Strategy<Value = (Value, Value)> {
        (typed_scalar(), 0usize..5).prop_flat_map(|((t, _), n)| {
            let t2 = t.clone();
            proptest::collection::vec(
                typed_scalar().prop_filter("same type", move |(u, _)| *u == t),
                n,
            )
            .prop_map(move |items| {
                let values = items.into_iter().map(|(_, v)| v).collect();
                (Value::Text(format!("[{t2}]")), Value::Array(values))
            })
        })
    }

    /// A scalar, an array of one scalar type, or an array of such arrays; with its type.
    fn typed_value() -> impl Strategy<Value = (Value, Value)> {
        let scalar = typed_scalar().prop_map(|(t, v)| (Value::Text(t), v));
        let array = typed_array();
        let nested = proptest::collection::vec(typed_array(), 0..3).prop_map(|arrays| {
            let (types, values) = arrays.into_iter().unzip();
            (Value::Array(types), Value::Array(values))
        });
        prop_oneof![scalar, array, nested]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn every_typed_value_reads_back_with_its_type(
            entries in proptest::collection::btree_map("[a-z.]{1,10}", typed_value(), 0..8)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let zt = dir.path().join("m.zt");
            let mut w = ztensor::Writer::create(&zt).unwrap();
            let mut types = Attributes::new();
            let mut attrs = Attributes::new();
            for (k, (t, v)) in &entries {
                types.insert(k.clone(), t.clone());
                attrs.insert(k.clone(), v.clone());
            }
            attrs.insert("gguf.value_types".into(), Value::Map(types.clone()));
            w.set_attributes(attrs.clone());
            w.add("w", &[1], &[0.0f32]).unwrap();
            w.finish().unwrap();
            let out = dir.path().join("m.gguf");
            ztensor::write_gguf(&ztensor::open(&zt).unwrap(), &out, false).unwrap();
            let g = ztensor::open(&out).unwrap();
            prop_assert_eq!(g.attributes(), &attrs);
        }
    }
}

#[test]
fn a_string_that_is_not_utf8_is_written_back_as_it_was() {
    let mut f = b"GGUF".to_vec();
    f.extend(3u32.to_le_bytes());
    f.extend(0u64.to_le_bytes());
    f.extend(1u64.to_le_bytes());
    f.extend(1u64.to_le_bytes());
    f.push(b'k');
    f.extend(8u32.to_le_bytes());
    f.extend(3u64.to_le_bytes());
    f.extend(b"a\xffb");
    let r = OpenOptions::new().open_bytes(f.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = written(&r, dir.path(), "k.gguf");
    // The same key, type and bytes: the file itself, padded to the alignment.
    assert_eq!(&out[..f.len()], &f[..]);
    assert!(out[f.len()..].iter().all(|&b| b == 0));
    assert_eq!(out.len(), f.len().next_multiple_of(32));
}
