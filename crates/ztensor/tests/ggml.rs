//! Legacy GGML files as llama.cpp's and whisper.cpp's converters wrote them
//! (tools/interop/make_ggml.py): a Llama model as `convert.py` writes it (ggjt v1, f16) and as
//! `quantize` requantizes it (ggjt v3, Q4_0 and Q5_1), a LoRA adapter (ggla) and a whisper.cpp
//! model (ggml). Every tensor lists and reads as llama.cpp's own GGML loader (its converter to
//! GGUF) finds it, byte for byte, or as whisper.cpp's converter was handed it
//! (fixtures/interop/ggml/expected.json), mapped and unmapped (tests/damage.rs sweeps the
//! files, fixtures/invalid/ggml_* are the reject corpus).

#[path = "support/expected.rs"]
mod expected;

use std::path::{Path, PathBuf};

use ztensor::{FileKind, OpenOptions, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/ggml")
}

#[test]
fn every_tensor_reads_as_llama_cpps_loader_reads_it() {
    let want = expected::load(&dir());
    let files = expected::check_every_file(&dir(), &want, "tensors", |file, r, _| {
        assert_eq!(r.version().kind(), "ggml", "{file}");
        let version = want["files"][file]["version"].as_str().unwrap();
        assert_eq!(r.version().number(), version, "{file}");
    });
    assert_eq!(files, 5);
}

#[test]
fn the_header_becomes_attributes_and_blocks_are_ggufs() {
    let r = ztensor::open(dir().join("llama-ggjt-v3-q4_0.bin")).unwrap();
    let at = |k: &str| r.attributes().get(k).cloned();
    assert_eq!(at("ggml.family"), Some(Value::Text("llama".into())));
    assert_eq!(at("ggml.n_embd"), Some(Value::Integer(32)));
    assert_eq!(at("ggml.ftype"), Some(Value::Integer(2)));
    let o = r.object("layers.0.attention.wq.weight").unwrap();
    assert_eq!(o.format.to_string(), "gguf.q4_0/1");
    assert!(matches!(o.bytes().unwrap(), std::borrow::Cow::Borrowed(_)));
    let whisper = ztensor::open(dir().join("whisper-tiny-f16.bin")).unwrap();
    assert_eq!(
        whisper.attributes().get("ggml.family"),
        Some(&Value::Text("whisper".into()))
    );
    assert_eq!(
        whisper.attributes().get("ggml.n_mels"),
        Some(&Value::Integer(8))
    );
    let lora = ztensor::open(dir().join("lora-ggla.bin")).unwrap();
    assert_eq!(lora.attributes().get("ggml.r"), Some(&Value::Integer(4)));
    assert_eq!(
        lora.attributes().get("ggml.alpha"),
        Some(&Value::Integer(8))
    );
}

#[test]
fn the_bytes_tell_the_kind_without_the_name() {
    for file in [
        "llama-ggjt-v1-f16.bin",
        "lora-ggla.bin",
        "whisper-tiny-f16.bin",
    ] {
        let head = std::fs::read(dir().join(file)).unwrap();
        assert_eq!(
            ztensor::sniff(&head[..64], head.len() as u64, &[]),
            Some(FileKind::Ggml),
            "{file}"
        );
    }
}

#[test]
fn what_the_listing_takes_is_charged_to_the_memory_budget() {
    let e = OpenOptions::new()
        .memory_budget(4096)
        .open(dir().join("whisper-tiny-f16.bin"))
        .unwrap_err();
    assert_eq!(e.kind(), ztensor::ErrorKind::LimitExceeded, "{e}");
    assert!(e.to_string().contains("listing the GGML file"), "{e}");
}
