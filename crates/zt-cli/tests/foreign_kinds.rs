//! `zt info` on the kinds whose objects are not one range of one file, or whose names come
//! from elsewhere: a partitioned TensorFlow variable counts every slice it is stored in,
//! Paddle's inference parameters say where their names came from, a TensorFlow Lite model
//! shows its kind and its quantization parameters; an ONNX model's external data is found
//! through Hugging Face's cache links, and never out of the model's folder.

mod support;

use std::path::Path;

use support::{ok, zt};

fn fx(p: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/interop")
        .join(p);
    path.to_string_lossy().into_owned()
}

#[test]
fn info_counts_every_slice_of_a_partitioned_variable() {
    let out = ok(&zt(&["info", &fx("tensorflow/ckpt/partitioned.index")]));
    // rows: [10, 3] f32 in row slices; cols: [4, 6] f32 in boxes. Both stored whole.
    let row = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {out}"))
            .to_owned()
    };
    assert!(row("rows ").contains(" 120 B "), "{out}");
    assert!(row("cols ").contains(" 96 B "), "{out}");
    assert!(out.contains("216 B of data"), "{out}");
}

#[test]
fn info_of_paddle_parameters_and_a_tflite_model() {
    let out = ok(&zt(&["info", &fx("paddle/pir/model.pdiparams")]));
    assert!(
        out.contains("Paddle inference parameters, 38 objects"),
        "{out}"
    );
    assert!(out.contains("@paddle.names = \"from model.json\""), "{out}");
    let out = ok(&zt(&["info", "--json", &fx("tflite/dynamic_int8.tflite")]));
    let info: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(info["kind"], "tflite");
    let q = info["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "tfl.pseudo_qconst")
        .unwrap();
    assert_eq!(q["dtype"], "i8");
    assert_eq!(
        q["attributes"]["tflite.scale"].as_array().unwrap().len(),
        16
    );
}

#[test]
fn a_legacy_llama_model_converts_to_what_llama_cpps_converter_writes() {
    // fixtures/interop/ggml/to_gguf: convert-llama-ggml-to-gguf.py's output of the same file.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("llama-ggjt-v3-q5_1.bin");
    std::fs::copy(fx("ggml/llama-ggjt-v3-q5_1.bin"), &input).unwrap();
    let out = dir.path().join("m.gguf");
    ok(&zt(&[
        "convert",
        input.to_str().unwrap(),
        out.to_str().unwrap(),
    ]));
    let ours = ztensor::open(&out).unwrap();
    let want = ztensor::open(fx("ggml/to_gguf/llama-ggjt-v3-q5_1.gguf")).unwrap();
    // Every key, value and type the script wrote, the model's name (its file's) included;
    // tokenizer.ggml.pre is the script's since 2024.
    let mut attributes = ours.attributes().clone();
    assert_eq!(
        attributes.remove("tokenizer.ggml.pre"),
        Some(ztensor::Value::Text("default".into()))
    );
    if let Some(ztensor::Value::Map(types)) = attributes.get_mut("gguf.value_types") {
        types.remove("tokenizer.ggml.pre");
    }
    assert_eq!(&attributes, want.attributes());
    let names = |r: &ztensor::Reader| r.iter().map(|o| o.name().to_owned()).collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&want));
    for o in want.iter() {
        let data = |r: &ztensor::Reader| r.object(o.name()).unwrap().bytes().unwrap().to_vec();
        assert_eq!(data(&ours), data(&want), "{}", o.name());
    }
}

#[test]
fn a_legacy_llama_models_context_and_epsilon_are_set_as_the_scripts_options_set_them() {
    // The header holds neither (LLaMA 2's are 4096 and 1e-5, not the script's 2048, 5e-6).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.gguf");
    let o = zt(&[
        "convert",
        &fx("ggml/llama-ggjt-v3-q5_1.bin"),
        out.to_str().unwrap(),
        "--set",
        "llama.context_length=4096",
        "--set",
        "llama.attention.layer_norm_rms_epsilon=1e-5",
    ]);
    ok(&o);
    let r = ztensor::open(&out).unwrap();
    let a = r.attributes();
    assert_eq!(a["llama.context_length"], ztensor::Value::Integer(4096));
    let eps = a["llama.attention.layer_norm_rms_epsilon"]
        .as_f64()
        .unwrap();
    assert_eq!(eps, f64::from(1e-5f32));
    // Typed as llama.cpp reads them (it refuses a key of another type).
    let ztensor::Value::Map(types) = &a["gguf.value_types"] else {
        panic!("no value types")
    };
    assert_eq!(types["llama.context_length"].as_str(), Some("u32"));
    assert_eq!(
        types["llama.attention.layer_norm_rms_epsilon"].as_str(),
        Some("f32")
    );
    // A value the type cannot hold is an error naming the key.
    let bad = zt(&[
        "convert",
        &fx("ggml/llama-ggjt-v3-q5_1.bin"),
        dir.path().join("bad.gguf").to_str().unwrap(),
        "--set",
        "llama.context_length=-1",
    ]);
    assert!(!bad.status.success());
    let e = support::stderr(&bad);
    assert!(e.contains("llama.context_length"), "{e}");
}

/// Copies the ONNX fixture `external.onnx` and every file it names into `dir` with `place`,
/// which writes one file (`place(from, to)`).
#[cfg(unix)]
fn external_model_in(dir: &Path, place: &dyn Fn(&Path, &Path)) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/onnx");
    std::fs::create_dir_all(dir.join("weights")).unwrap();
    let mut names = vec!["external.onnx".to_owned(), "external.onnx.data".to_owned()];
    for entry in std::fs::read_dir(fixtures.join("weights")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        names.push(format!("weights/{name}"));
    }
    for name in names {
        place(&fixtures.join(&name), &dir.join(&name));
    }
}

#[cfg(unix)]
#[test]
fn a_model_named_from_its_own_folder_keeps_its_data_inside() {
    let (dir, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    external_model_in(dir.path(), &|from, to| {
        std::fs::copy(from, to).unwrap();
    });
    let data = dir.path().join("external.onnx.data");
    std::fs::rename(&data, outside.path().join("data")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("data"), &data).unwrap();
    // `external.onnx` from its folder: its folder is the empty path, which was taken as no
    // folder to check against.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zt"))
        .args(["verify", "external.onnx"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", support::stdout(&out));
    let said = format!("{}{}", support::stdout(&out), support::stderr(&out));
    assert!(said.contains("leads out of the model's folder"), "{said}");
}

#[cfg(unix)]
#[test]
fn an_onnx_model_in_the_hugging_face_cache_reads_its_external_data() {
    // models--org--name/snapshots/<rev>/<file> -> ../../blobs/<hash>, as huggingface_hub
    // lays out what it downloads: the data's real path is in blobs/, beside the model's.
    let repo = tempfile::tempdir().unwrap();
    let (blobs, snapshot) = (repo.path().join("blobs"), repo.path().join("snapshots/r1"));
    std::fs::create_dir_all(&blobs).unwrap();
    let counter = std::cell::Cell::new(0);
    external_model_in(&snapshot, &|from, to| {
        counter.set(counter.get() + 1);
        let blob = blobs.join(format!("blob{}", counter.get()));
        std::fs::copy(from, &blob).unwrap();
        std::os::unix::fs::symlink(&blob, to).unwrap();
    });
    let model = snapshot.join("external.onnx");
    let out = ok(&zt(&["verify", model.to_str().unwrap()]));
    assert!(out.contains("OK (ONNX model"), "{out}");
}

/// Objects that are not numbers (text, object arrays, a TensorFlow checkpoint's object graph)
/// are passed over by `diff` as by `verify`, and named: a file compared with itself is the
/// same (it was trouble, exit 2), and a pickle of protocol 2 against protocol 5 too.
#[test]
fn diff_names_objects_of_no_numbers_and_passes_over_them() {
    for (a, b) in [
        ("pickle/arrays_p2.pkl", "pickle/arrays_p5.pkl"),
        ("numpy/mixed.npz", "numpy/mixed.npz"),
        ("tensorflow/ckpt/boxes.index", "tensorflow/ckpt/boxes.index"),
    ] {
        let out = ok(&zt(&["diff", &fx(a), &fx(b)]));
        assert!(out.contains("hold the same objects and values\n"), "{out}");
        assert!(out.contains("\n  not compared: object "), "{out}");
    }
    let out = ok(&zt(&[
        "diff",
        "--json",
        &fx("pickle/arrays_p2.pkl"),
        &fx("pickle/arrays_p5.pkl"),
    ]));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["same"], true);
    let names: Vec<&str> = j["not_compared"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["objects", "text"]);
    assert!(j["not_compared"][1]["reason"]
        .as_str()
        .unwrap()
        .contains("text array"));
    // Still a difference: one that lacks the other's objects.
    let o = zt(&["diff", &fx("pickle/arrays_p2.pkl"), &fx("numpy/mixed.npz")]);
    assert_eq!(o.status.code(), Some(1));
}
