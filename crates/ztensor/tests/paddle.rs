//! Paddle inference parameters written by Paddle's own `paddle.jit.save`
//! (tools/interop/make_paddle.py): a PIR program in JSON (Paddle 3's default) and a
//! `ProgramDesc` (`.pdmodel`, the PIR API off), each beside its `model.pdiparams`, and Paddle
//! 1's `__model__` beside one file per variable (`paddle.static.save_vars`). Every
//! tensor lists and reads as Paddle's own loader binds it, byte for byte
//! (fixtures/interop/paddle/expected.json), mapped and unmapped; without a program, or beside
//! one that is not its own, the tensors are named by their place and the file says why
//! (tests/damage.rs sweeps the files, fixtures/invalid/paddle_* are the reject corpus).

#[path = "support/expected.rs"]
mod expected;

use std::path::{Path, PathBuf};

use ztensor::{FileKind, FileVersion, OpenOptions, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/paddle")
}

fn expected() -> serde_json::Value {
    expected::load(&dir())
}

fn names_attribute(r: &ztensor::Reader) -> String {
    match r.attributes().get("paddle.names") {
        Some(Value::Text(t)) => t.clone(),
        other => panic!("paddle.names: {other:?}"),
    }
}

#[test]
fn every_tensor_reads_as_paddles_loader_binds_it() {
    let files = expected::check_every_file(&dir(), &expected(), "arrays", |file, r, _| {
        assert_eq!(r.version(), &FileVersion::PaddleParams, "{file}");
        let program = if file.starts_with("pir") {
            "model.json"
        } else if file.starts_with("paddle1") {
            "__model__, one file per variable"
        } else {
            "model.pdmodel"
        };
        assert_eq!(names_attribute(r), format!("from {program}"));
    });
    assert_eq!(files, 3);
}

#[test]
fn tensors_are_ranges_of_the_map() {
    let r = ztensor::open(dir().join("pir/model.pdiparams")).unwrap();
    let o = r.object("linear_10.w_0").unwrap();
    assert!(matches!(o.bytes().unwrap(), std::borrow::Cow::Borrowed(_)));
    // Paddle writes no padding: a tensor starts wherever its header ends.
    let starts: Vec<u64> = r.objects().iter().map(|o| o.components[0].offset).collect();
    assert!(starts.iter().any(|s| s % 4 != 0), "{starts:?}");
}

/// Copies `files` of fixture folder `from` into a fresh folder under the names given.
fn folder_of(from: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for (file, name) in files {
        std::fs::copy(dir().join(from).join(file), tmp.path().join(name)).unwrap();
    }
    tmp
}

#[test]
fn without_a_program_tensors_are_named_by_place_in_file_order() {
    let expected = expected();
    let arrays = expected["files"]["pir/model.pdiparams"]["arrays"]
        .as_object()
        .unwrap();
    // No program beside it; a name that says nothing, so the bytes tell the kind.
    let tmp = folder_of("pir", &[("model.pdiparams", "weights.bin")]);
    let r = ztensor::open(tmp.path().join("weights.bin")).unwrap();
    assert_eq!(r.version(), &FileVersion::PaddleParams);
    assert_eq!(
        names_attribute(&r),
        "by place: no program beside the file names its tensors"
    );
    // Paddle writes the tensors in the order of their names: the n-th name's tensor is "n".
    let mut names: Vec<&String> = arrays.keys().collect();
    names.sort();
    assert_eq!(names.len(), 38);
    for (i, name) in names.into_iter().enumerate() {
        expected::check_object(&r, "weights.bin", &format!("{i:02}"), &arrays[name]);
    }
    let head = std::fs::read(tmp.path().join("weights.bin")).unwrap();
    assert_eq!(
        ztensor::sniff(&head, head.len() as u64, &[]),
        Some(FileKind::PaddleParams)
    );
}

#[test]
fn a_program_that_is_not_the_files_names_nothing() {
    // The legacy model's 36 tensors beside the PIR model's program of 38 parameters.
    let tmp = folder_of("legacy", &[("model.pdiparams", "model.pdiparams")]);
    std::fs::copy(dir().join("pir/model.json"), tmp.path().join("model.json")).unwrap();
    let r = ztensor::open(tmp.path().join("model.pdiparams")).unwrap();
    assert_eq!(
        names_attribute(&r),
        "by place: model.json names more persistable variables than the file's 36 tensors"
    );
    assert!(r.object("00").is_ok());
    // As many names, one shape not the tensor's: named by place too.
    let pir = folder_of("pir", &[("model.json", "model.json")]);
    let mut program: serde_json::Value =
        serde_json::from_slice(&std::fs::read(pir.path().join("model.json")).unwrap()).unwrap();
    let ops = program
        .pointer_mut("/program/regions/0/blocks/0/ops")
        .unwrap()
        .as_array_mut()
        .unwrap();
    let op = ops
        .iter_mut()
        .find(|op| op["A"].as_array().unwrap().last().unwrap() == "linear_0.w_0")
        .unwrap();
    *op.pointer_mut("/O/TT/D/1").unwrap() = serde_json::json!([3, 4]);
    std::fs::write(pir.path().join("model.json"), program.to_string()).unwrap();
    std::fs::copy(
        dir().join("pir/model.pdiparams"),
        pir.path().join("model.pdiparams"),
    )
    .unwrap();
    let r = ztensor::open(pir.path().join("model.pdiparams")).unwrap();
    assert_eq!(
        names_attribute(&r),
        "by place: model.json declares \"linear_0.w_0\" of dims [3, 4]; the tensor in its \
         place has [3, 3]"
    );
}

#[test]
fn paddle_1_names_its_files_model_and_params() {
    for (model, params) in [("__model__", "__params__"), ("model", "params")] {
        let tmp = folder_of(
            "legacy",
            &[("model.pdmodel", model), ("model.pdiparams", params)],
        );
        let r = ztensor::open(tmp.path().join(params)).unwrap();
        assert_eq!(names_attribute(&r), format!("from {model}"));
        assert!(r.object("linear_11.w_0").is_ok());
    }
}

#[test]
fn a_program_that_is_no_program_is_an_error_naming_it() {
    let tmp = folder_of("pir", &[("model.pdiparams", "model.pdiparams")]);
    std::fs::write(tmp.path().join("model.json"), b"{\"program\": 7}").unwrap();
    let e = ztensor::open(tmp.path().join("model.pdiparams")).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("not a Paddle PIR program"), "{text}");
    assert!(text.contains("model.json"), "{text}");
}

#[test]
fn converts_to_safetensors_with_the_programs_names() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("model.safetensors");
    let r = ztensor::open(dir().join("legacy/model.pdiparams")).unwrap();
    ztensor::write_safetensors(&r, &out, false).unwrap();
    let back = ztensor::open(&out).unwrap();
    assert_eq!(back.len(), r.len());
    let a = r.object("net_0.w_2").unwrap();
    let b = back.object("net_0.w_2").unwrap();
    assert_eq!(a.bytes().unwrap(), b.bytes().unwrap());
}

#[test]
fn the_info_file_gives_each_variable_its_path_in_the_model() {
    // paddle.jit.save wrote model.pdiparams.info beside the legacy ProgramDesc: each
    // variable's structured name, as the layer's state dict names it.
    let r = ztensor::open(dir().join("legacy/model.pdiparams")).unwrap();
    for (name, path) in [
        ("linear_10.w_0", "layers.10.weight"),
        ("batch_norm1d_0.w_2", "norm._variance"),
        ("generated_tensor_0", "ints64"),
        ("net_0.w_2", "w_double"),
    ] {
        let o = r.object(name).unwrap();
        assert_eq!(
            o.attributes.get("paddle.structured_name"),
            Some(&Value::Text(path.into())),
            "{name}"
        );
    }
    // The PIR model has no .info: no structured names.
    let r = ztensor::open(dir().join("pir/model.pdiparams")).unwrap();
    let o = r.object("linear_10.w_0").unwrap();
    assert!(!o.attributes.contains_key("paddle.structured_name"));
}

#[test]
fn what_the_listing_takes_is_charged_to_the_memory_budget() {
    let e = OpenOptions::new()
        .memory_budget(4096)
        .open(dir().join("pir/model.pdiparams"))
        .unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::LimitExceeded, "{e}");
    assert!(
        e.to_string().contains("listing the Paddle parameters"),
        "{e}"
    );
}

/// A copy of the Paddle 1 folder (`__model__` and one file per variable) to damage.
fn per_variable_folder() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dir().join("paddle1")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, tmp.path().join(p.file_name().unwrap())).unwrap();
    }
    tmp
}

#[test]
fn paddle_1_variables_in_files_of_their_own_open_from_the_folder_without_a_copy() {
    let folder = dir().join("paddle1");
    assert_eq!(
        ztensor::model_file(&folder).unwrap(),
        folder.join("__model__")
    );
    let r = ztensor::open(folder.join("__model__")).unwrap();
    assert_eq!(r.len(), 8);
    // Each variable is its file's bytes after the header, from that file's map.
    let o = r.object("fc_0.w_0").unwrap();
    let bytes = o.bytes().unwrap();
    assert!(matches!(bytes, std::borrow::Cow::Borrowed(_)));
    let file = std::fs::read(folder.join("fc_0.w_0")).unwrap();
    assert!(file.ends_with(&bytes) && bytes.len() == 4 * 3 * 4);
    assert_eq!(r.shards().len(), 8);
    // Converted, every variable keeps its name and bytes.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("model.safetensors");
    ztensor::write_safetensors(&r, &out, false).unwrap();
    let back = ztensor::open(&out).unwrap();
    assert!(back.names().eq(r.names()));
    assert_eq!(back.object("fc_0.w_0").unwrap().bytes().unwrap(), bytes);
}

#[test]
fn a_paddle_1_variable_file_missing_or_not_its_programs_is_an_error_naming_it() {
    // Missing: Paddle's loader fails on it too.
    let tmp = per_variable_folder();
    std::fs::remove_file(tmp.path().join("fc_1.b_0")).unwrap();
    let e = ztensor::open(tmp.path().join("__model__")).unwrap_err();
    assert!(e.path().is_some_and(|p| p.ends_with("fc_1.b_0")), "{e}");
    assert!(e.to_string().contains("fc_1.b_0"), "{e}");
    // A tensor of other dims than the program declares, and a file of two tensors.
    let tmp = per_variable_folder();
    let other = tmp.path().join("fc_1.b_0");
    std::fs::copy(tmp.path().join("fc_0.b_0"), &other).unwrap();
    let e = ztensor::open(tmp.path().join("__model__")).unwrap_err();
    assert!(
        e.to_string()
            .contains("the program declares dims [2]; the file's tensor has [3]"),
        "{e}"
    );
    let mut twice = std::fs::read(tmp.path().join("fc_1.w_0")).unwrap();
    twice.extend_from_within(..);
    std::fs::copy(dir().join("paddle1/fc_1.b_0"), &other).unwrap();
    std::fs::write(tmp.path().join("fc_1.w_0"), &twice).unwrap();
    let e = ztensor::open(tmp.path().join("__model__")).unwrap_err();
    assert!(e.to_string().contains("bytes after its one tensor"), "{e}");
    assert!(e.path().is_some_and(|p| p.ends_with("fc_1.w_0")), "{e}");
}

#[test]
fn a_paddle_1_program_beside_its_params_file_points_there() {
    let tmp = folder_of(
        "legacy",
        &[
            ("model.pdmodel", "__model__"),
            ("model.pdiparams", "__params__"),
        ],
    );
    assert_eq!(
        ztensor::model_file(tmp.path()).unwrap(),
        tmp.path().join("__params__")
    );
    let e = ztensor::open(tmp.path().join("__model__")).unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("in __params__ beside it"), "{e}");
}
