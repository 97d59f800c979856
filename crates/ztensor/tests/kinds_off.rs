//! A kind whose cargo feature is off is still told apart, and its files get an error that
//! names the feature (run by `cargo test --no-default-features`; with a feature on, that
//! kind's case is left out).

use std::path::Path;

/// Opens a fixture and returns the error's message.
fn refused(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(file);
    let e = ztensor::open(&path).expect_err(file);
    assert_eq!(e.kind(), ztensor::ErrorKind::Unsupported, "{file}: {e}");
    e.message().to_owned()
}

#[test]
fn files_of_a_kind_built_without_say_which_feature_reads_them() {
    let cases: &[(&str, &str, bool)] = &[
        (
            "interop/gguf/dense.gguf",
            "feature \"gguf\"",
            cfg!(feature = "gguf"),
        ),
        (
            "interop/numpy/v1_f32.npy",
            "feature \"numpy\"",
            cfg!(feature = "numpy"),
        ),
        (
            "interop/numpy/mixed.npz",
            "feature \"numpy\"",
            cfg!(feature = "numpy"),
        ),
        (
            "interop/pytorch/state_dict.pt",
            "feature \"torch\"",
            cfg!(feature = "torch"),
        ),
        (
            "interop/pytorch/legacy.pt",
            "feature \"torch\"",
            cfg!(feature = "torch"),
        ),
        (
            "interop/torch_dcp/single/.metadata",
            "feature \"torch-dcp\"",
            cfg!(feature = "torch-dcp"),
        ),
        (
            "interop/safetensors/numpy.safetensors",
            "feature \"safetensors\"",
            cfg!(feature = "safetensors"),
        ),
        (
            "interop/hdf5/h5py_default.h5",
            "feature \"hdf5\"",
            cfg!(feature = "hdf5"),
        ),
        (
            "interop/hdf5/model.keras",
            "feature \"hdf5\"",
            cfg!(feature = "hdf5"),
        ),
        (
            "interop/onnx/subgraphs.onnx",
            "feature \"onnx\"",
            cfg!(feature = "onnx"),
        ),
        (
            "interop/flax/dtypes.msgpack",
            "feature \"flax\"",
            cfg!(feature = "flax"),
        ),
        (
            "interop/tensorflow/ckpt/all.index",
            "feature \"tensorflow\"",
            cfg!(feature = "tensorflow"),
        ),
        (
            "interop/pickle/paddle/model.pdparams",
            "feature \"pickle\"",
            cfg!(feature = "pickle"),
        ),
        (
            "interop/paddle/pir/model.pdiparams",
            "feature \"paddle\"",
            cfg!(feature = "paddle"),
        ),
        (
            "interop/tflite/dense.tflite",
            "feature \"tflite\"",
            cfg!(feature = "tflite"),
        ),
        (
            "interop/caffe/lenet.caffemodel",
            "feature \"caffe\"",
            cfg!(feature = "caffe"),
        ),
        (
            "interop/openvino/model.xml",
            "feature \"openvino\"",
            cfg!(feature = "openvino"),
        ),
        (
            "interop/ggml/llama-ggjt-v3-q4_0.bin",
            "feature \"ggml\"",
            cfg!(feature = "ggml"),
        ),
    ];
    for &(file, feature, built) in cases {
        if built {
            continue;
        }
        let message = refused(file);
        assert!(
            message.contains("built without support") && message.contains(feature),
            "{file}: {message}"
        );
    }
}
