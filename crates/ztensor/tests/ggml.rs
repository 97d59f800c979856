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

/// The file attributes and tensors of a GGUF file, as they are compared.
fn gguf_contents(r: &ztensor::Reader) -> (ztensor::Attributes, Vec<(String, Vec<u64>, String)>) {
    let tensors = r
        .iter()
        .map(|o| {
            let bytes = o.component("data").unwrap().bytes().unwrap();
            let digest = format!("{:x}", fnv1a(&bytes));
            (
                o.name().to_owned(),
                o.shape().to_vec(),
                format!("{} {digest}", o.format),
            )
        })
        .collect();
    (r.attributes().clone(), tensors)
}

/// A cheap fingerprint of a tensor's bytes (FNV-1a), so a mismatch prints short.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[test]
fn a_llama_model_converts_to_the_gguf_llama_cpps_converter_writes() {
    let tmp = tempfile::tempdir().unwrap();
    for stem in [
        "llama-ggjt-v1-f16",
        "llama-ggjt-v3-q4_0",
        "llama-ggjt-v3-q5_1",
    ] {
        let reference = dir().join("to_gguf").join(format!("{stem}.gguf"));
        let (mut want_attrs, want_tensors) = gguf_contents(&ztensor::open(&reference).unwrap());
        let ggml = ztensor::open(dir().join(format!("{stem}.bin"))).unwrap();
        // Straight, and by way of a .zt file, which keeps the GGML header's attributes.
        let direct = tmp.path().join(format!("{stem}.gguf"));
        ztensor::write_gguf(&ggml, &direct, false).unwrap();
        let zt = tmp.path().join(format!("{stem}.zt"));
        ztensor::convert::upgrade(dir().join(format!("{stem}.bin")), &zt, Default::default())
            .unwrap();
        let by_zt = tmp.path().join(format!("{stem}-by-zt.gguf"));
        ztensor::write_gguf(&ztensor::open(&zt).unwrap(), &by_zt, false).unwrap();
        // The script names the model by its input file; the library is not told the name.
        // It predates tokenizer.ggml.pre, which its later versions write as "default".
        want_attrs.remove("general.name");
        let Some(Value::Map(types)) = want_attrs.get_mut("gguf.value_types") else {
            panic!("{stem}: the reference's value types");
        };
        types.remove("general.name");
        types.insert("tokenizer.ggml.pre".into(), Value::Text("str".into()));
        want_attrs.insert("tokenizer.ggml.pre".into(), Value::Text("default".into()));
        let (attrs, tensors) = gguf_contents(&ztensor::open(&direct).unwrap());
        assert_eq!(tensors, want_tensors, "{stem}");
        assert_eq!(attrs, want_attrs, "{stem}");
        // A .zt file keeps its objects in its own order.
        let (attrs, mut tensors) = gguf_contents(&ztensor::open(&by_zt).unwrap());
        let mut want_tensors = want_tensors;
        tensors.sort();
        want_tensors.sort();
        assert_eq!(tensors, want_tensors, "{stem} by way of .zt");
        assert_eq!(attrs, want_attrs, "{stem} by way of .zt");
    }
}

#[test]
fn key_value_heads_are_read_from_the_key_projection() {
    // A LLaMA 2 70B-like model in miniature: 4 heads, 1 key-value head (8 of 32 rows).
    let tmp = tempfile::tempdir().unwrap();
    let zt = tmp.path().join("gqa.zt");
    let mut w = ztensor::Writer::create(&zt).unwrap();
    for (key, value) in [("n_embd", 32), ("n_head", 4), ("n_layer", 1), ("ftype", 0)] {
        w.set_attribute(format!("ggml.{key}"), Value::Integer(value));
    }
    w.set_attribute("ggml.family", "llama");
    let tokens = ["", "", "", "a"].map(|t| Value::Text(t.into())).to_vec();
    w.set_attribute("ggml.vocab", Value::Array(tokens));
    w.add("layers.0.attention.wk.weight", &[8, 32], &[0f32; 256])
        .unwrap();
    w.add(
        "layers.0.feed_forward.w1.weight",
        &[96, 32],
        &[0f32; 96 * 32],
    )
    .unwrap();
    w.finish().unwrap();
    let out = tmp.path().join("gqa.gguf");
    ztensor::write_gguf(&ztensor::open(&zt).unwrap(), &out, false).unwrap();
    let g = ztensor::open(&out).unwrap();
    let at = |k: &str| g.attributes().get(k).cloned().unwrap();
    assert_eq!(at("llama.attention.head_count_kv"), Value::Integer(1));
    assert_eq!(at("llama.feed_forward_length"), Value::Integer(96));
    assert_eq!(
        g.iter().map(|o| o.name().to_owned()).collect::<Vec<_>>(),
        ["blk.0.attn_k.weight", "blk.0.ffn_gate.weight"]
    );

    // A tensor LLaMA does not have stops the conversion, named.
    let zt2 = tmp.path().join("odd.zt");
    let mut w = ztensor::Writer::create(&zt2).unwrap();
    w.set_attributes(ztensor::open(&zt).unwrap().attributes().clone());
    w.add(
        "layers.0.feed_forward.w1.weight",
        &[96, 32],
        &[0f32; 96 * 32],
    )
    .unwrap();
    w.add("lm_head.weight", &[2], &[0f32; 2]).unwrap();
    w.finish().unwrap();
    let e = ztensor::write_gguf(
        &ztensor::open(&zt2).unwrap(),
        tmp.path().join("odd.gguf"),
        false,
    )
    .unwrap_err();
    assert_eq!(e.object(), Some("lm_head.weight"), "{e}");
    assert!(e.to_string().contains("no llama.cpp name in GGUF"), "{e}");
    assert!(!tmp.path().join("odd.gguf").exists());
}
