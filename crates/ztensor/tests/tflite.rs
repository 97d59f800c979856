//! TensorFlow Lite models written by TensorFlow's own converter (tools/interop/make_tflite.py):
//! float32, dynamic-range int8 and float16 weights, constants of eight types, a while loop's
//! subgraphs, and buffers addressed by offset past the FlatBuffer; and a model of LiteRT
//! 2.x's newer types built with its schema (make_tflite_types.py). Every constant tensor lists
//! and reads as LiteRT's interpreter holds it, byte for byte, with its quantization
//! parameters (fixtures/interop/tflite/expected.json), mapped and unmapped
//! (tests/damage.rs sweeps the files, fixtures/invalid/tflite_* are the reject corpus).

#[path = "support/expected.rs"]
mod expected;

use std::path::{Path, PathBuf};

use ztensor::{FileVersion, OpenOptions, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/tflite")
}

fn expected() -> serde_json::Value {
    expected::load(&dir())
}

fn numbers(v: Option<&Value>) -> Vec<f64> {
    match v {
        Some(Value::Array(items)) => items
            .iter()
            .map(|x| match x {
                Value::Float(f) => *f,
                Value::Integer(i) => *i as f64,
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_constant_reads_as_litert_holds_it() {
    let files = expected::check_every_file(&dir(), &expected(), "tensors", |file, r, tensors| {
        assert_eq!(r.version(), &FileVersion::TfLite { version: 3 }, "{file}");
        for (name, want) in tensors {
            let o = r.object(name).unwrap();
            match want.get("scale") {
                Some(scale) => {
                    let scale: Vec<f64> = serde_json::from_value(scale.clone()).unwrap();
                    let ours = numbers(o.attributes.get("tflite.scale"));
                    // LiteRT hands the f32 scales over as f32: compare as f32.
                    let ours: Vec<f32> = ours.iter().map(|&x| x as f32).collect();
                    let theirs: Vec<f32> = scale.iter().map(|&x| x as f32).collect();
                    assert_eq!(ours, theirs, "{file} {name}");
                    let zero: Vec<f64> =
                        serde_json::from_value(want["zero_point"].clone()).unwrap();
                    assert_eq!(numbers(o.attributes.get("tflite.zero_point")), zero);
                    assert_eq!(
                        o.attributes.get("tflite.quantized_dimension"),
                        Some(&Value::Integer(
                            want["quantized_dimension"].as_i64().unwrap().into()
                        ))
                    );
                }
                None => assert!(!o.attributes.contains_key("tflite.scale"), "{name}"),
            }
        }
    });
    assert_eq!(files, 9);
}

#[test]
fn weights_are_ranges_of_the_map() {
    for file in ["dense.tflite", "offsets.tflite"] {
        let r = ztensor::open(dir().join(file)).unwrap();
        for o in r.objects() {
            let view = r.object(&o.name).unwrap();
            assert!(matches!(
                view.bytes().unwrap(),
                std::borrow::Cow::Borrowed(_)
            ));
            // Past the FlatBuffer the converter aligns each buffer to 16 bytes; inside it,
            // to 4 only (the schema's force_align is not applied to small vectors).
            let align = if file == "offsets.tflite" { 16 } else { 4 };
            assert_eq!(o.components[0].offset % align, 0, "{file} {}", o.name);
        }
    }
}

#[test]
fn buffers_past_the_flatbuffer_are_read_by_offset() {
    // The same model, its buffers after the FlatBuffer: the same tensors, other places.
    let inline = ztensor::open(dir().join("dense.tflite")).unwrap();
    let apart = ztensor::open(dir().join("offsets.tflite")).unwrap();
    assert_eq!(inline.len(), apart.len());
    let weights = "functional_1/conv_1/convolution";
    let a = inline.object(weights).unwrap();
    let b = apart.object(weights).unwrap();
    assert_eq!(a.bytes().unwrap(), b.bytes().unwrap());
    assert_ne!(a.components[0].offset, b.components[0].offset);
}

#[test]
fn packed_constants_read_as_the_values_litert_unpacks() {
    // types.tflite (tools/interop/make_tflite_types.py): LiteRT 2.x's INT4, INT2 and UINT4
    // constants, whose values are what LiteRT's interpreter unpacks them to.
    let expected = expected();
    let tensors = expected["files"]["types.tflite"]["tensors"]
        .as_object()
        .unwrap();
    let r = ztensor::open(dir().join("types.tflite")).unwrap();
    let mut packed = 0;
    for (name, want) in tensors {
        let Some(values) = want.get("values") else {
            continue;
        };
        let want: Vec<f32> = values
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap() as f32)
            .collect();
        let got = r.object(name).unwrap().read_f32().unwrap();
        assert_eq!(got, want, "{name}");
        packed += 1;
    }
    assert_eq!(packed, 6);
}

#[test]
fn later_subgraphs_qualify_their_names() {
    let r = ztensor::open(dir().join("subgraphs.tflite")).unwrap();
    let names: Vec<&str> = r.objects().iter().map(|o| o.name.as_str()).collect();
    assert!(names.contains(&"while_body/arith.constant3"), "{names:?}");
    assert!(names.contains(&"while_cond/while/Less/y"), "{names:?}");
    assert!(names.contains(&"arith.constant"), "{names:?}");
}

#[test]
fn converts_to_safetensors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("model.safetensors");
    let r = ztensor::open(dir().join("fp16.tflite")).unwrap();
    ztensor::write_safetensors(&r, &out, false).unwrap();
    let back = ztensor::open(&out).unwrap();
    assert_eq!(back.len(), r.len());
    let a = r.object("arith.constant5").unwrap();
    assert_eq!(
        a.bytes().unwrap(),
        back.object("arith.constant5").unwrap().bytes().unwrap()
    );
}

#[test]
fn what_the_listing_takes_is_charged_to_the_memory_budget() {
    // Each tensor listed costs its entry and name: a budget below two of them refuses the
    // model before the listing is made, naming what would not fit.
    let e = OpenOptions::new()
        .memory_budget(4096)
        .open(dir().join("dense.tflite"))
        .unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::LimitExceeded, "{e}");
    assert!(e.to_string().contains("listing the model"), "{e}");
}
