//! A legacy GGML model of llama.cpp written as the GGUF llama.cpp loads: its hyperparameters
//! and tokens as llama.cpp's metadata (`llama.*`, `tokenizer.ggml.*`), its tensors under
//! llama.cpp's names (`blk.N.attn_q.weight`), as llama.cpp's `convert-llama-ggml-to-gguf.py`
//! writes them (docs/decisions.md, "Legacy GGML files to GGUF").
//!
//! The GGML header does not hold a model's context length or RMS norm epsilon: they are the
//! script's defaults (2048 and 5e-6) unless the attributes given hold them (as the script's
//! `--context-length` and `--eps` set them; any key given wins, typed as llama.cpp reads
//! it). The number of key-value heads, which the script takes
//! from its `--gqa` flag, is read from the shape of layer 0's key projection instead.
//!
//! What it reads is the listing's: the `ggml.*` attributes the GGML reader makes (so a `.zt`
//! file converted from a GGML file converts the same way) and the tensors' names and shapes.

use std::collections::BTreeMap;

use zt_container::{Error, Result};
use zt_manifest::{Attributes, Value};

use crate::files::gguf::{GGML_SCORES_KEY, GGML_VOCAB_KEY, VALUE_TYPES_KEY};
use crate::view::ObjectView;

/// The context length the script writes unless told (LLaMA 1's).
const CONTEXT_LENGTH: i128 = 2048;

/// The RMS norm epsilon the script writes unless told.
const RMS_NORM_EPS: f64 = 5e-6;

/// llama.cpp's token types (sentencepiece's).
const NORMAL: i128 = 1;
const UNKNOWN: i128 = 2;
const CONTROL: i128 = 3;
const BYTE: i128 = 6;

/// The file types of llama.cpp's GGML files (`llama_ftype`), as the description names them.
const FILE_TYPES: [(u64, &str); 17] = [
    (0, "ALL_F32"),
    (1, "MOSTLY_F16"),
    (2, "MOSTLY_Q4_0"),
    (3, "MOSTLY_Q4_1"),
    (4, "MOSTLY_Q4_1_SOME_F16"),
    (7, "MOSTLY_Q8_0"),
    (8, "MOSTLY_Q5_0"),
    (9, "MOSTLY_Q5_1"),
    (10, "MOSTLY_Q2_K"),
    (11, "MOSTLY_Q3_K_S"),
    (12, "MOSTLY_Q3_K_M"),
    (13, "MOSTLY_Q3_K_L"),
    (14, "MOSTLY_Q4_K_S"),
    (15, "MOSTLY_Q4_K_M"),
    (16, "MOSTLY_Q5_K_S"),
    (17, "MOSTLY_Q5_K_M"),
    (18, "MOSTLY_Q6_K"),
];

/// A GGML model's metadata and tensor names as llama.cpp's GGUF has them.
pub(super) struct LlamaCpp {
    /// The file attributes to write, typed (`gguf.value_types`).
    pub attributes: Attributes,
    /// Each object's name in the GGUF file, in the order of the objects given.
    pub names: Vec<String>,
}

/// llama.cpp's GGUF form of `attributes` and `objects`, when they are a legacy GGML llama.cpp
/// model's (its listing's `ggml.family` is `llama`, and it has no GGUF metadata already);
/// `None` for anything else, written as it is.
pub(super) fn llama_cpp_form(
    attributes: &Attributes,
    objects: &[ObjectView<'_>],
) -> Result<Option<LlamaCpp>> {
    let family = attributes.get("ggml.family").and_then(Value::as_str);
    if family != Some("llama") || attributes.contains_key("general.architecture") {
        return Ok(None);
    }
    let word = |key: &str| {
        attributes
            .get(&format!("ggml.{key}"))
            .and_then(Value::as_u64)
            .ok_or_else(|| lacks(&format!("the hyperparameter ggml.{key}")))
    };
    let (n_embd, n_head, n_layer, ftype) = (
        word("n_embd")?,
        word("n_head")?,
        word("n_layer")?,
        word("ftype")?,
    );
    if n_embd == 0 || n_head == 0 {
        return Err(Error::invalid(format!(
            "a legacy llama.cpp model of n_embd {n_embd} and n_head {n_head} has no head size"
        )));
    }
    let shape_of = |name: &str| objects.iter().find(|o| o.name() == name).map(|o| o.shape());
    // Layer 0's gate projection is n_ff rows of n_embd.
    let n_ff = match shape_of("layers.0.feed_forward.w1.weight") {
        Some(&[rows, _]) => rows,
        _ => {
            return Err(lacks(
                "the 2-D tensor layers.0.feed_forward.w1.weight (n_ff)",
            ))
        }
    };
    // Layer 0's key projection is n_embd / n_head rows per key-value head (grouped-query
    // attention: fewer than n_head).
    let n_head_kv = match shape_of("layers.0.attention.wk.weight") {
        Some(&[rows, cols]) if cols == n_embd && rows > 0 => rows
            .checked_mul(n_head)
            .filter(|r| r % n_embd == 0)
            .map_or(n_head, |r| r / n_embd),
        _ => n_head,
    };

    let names = objects
        .iter()
        .map(|o| {
            llama_cpp_name(o.name(), n_layer).ok_or_else(|| {
                Error::unsupported(
                    "is no tensor of llama.cpp's LLaMA (a legacy model's are tok_embeddings, \
                     norm, output and layers.N.attention.wq and the like), so it has no \
                     llama.cpp name in GGUF",
                )
                .in_object(o.name())
            })
        })
        .collect::<Result<Vec<_>>>()?;

    // Attributes set beside the GGML header's (in a .zt file on the way, or by the caller) are
    // kept, and win over what this would write for the same key (the script's defaults for
    // what the header lacks, as its --context-length and --eps set them), typed as llama.cpp
    // reads the key.
    let mut out = Attributes::new();
    let mut types = BTreeMap::new();
    let old_types = match attributes.get(VALUE_TYPES_KEY) {
        Some(Value::Map(m)) => Some(m),
        _ => None,
    };
    for (key, value) in attributes {
        if key.starts_with("ggml.") || key == VALUE_TYPES_KEY {
            continue;
        }
        out.insert(key.clone(), value.clone());
        if let Some(t) = old_types.and_then(|m| m.get(key)) {
            types.insert(key.clone(), t.clone());
        }
    }
    let mut put = |key: &str, ty: &str, value: Value| {
        out.entry(key.to_owned()).or_insert(value);
        types.insert(key.to_owned(), Value::Text(ty.to_owned()));
    };
    let int = |n: u64| Value::Integer(n.into());
    put("general.architecture", "str", Value::Text("llama".into()));
    put(
        "general.description",
        "str",
        Value::Text(description(attributes, ftype)),
    );
    put("general.file_type", "u32", int(ftype));
    put(
        "llama.context_length",
        "u32",
        Value::Integer(CONTEXT_LENGTH),
    );
    put("llama.embedding_length", "u32", int(n_embd));
    put("llama.block_count", "u32", int(n_layer));
    put("llama.feed_forward_length", "u32", int(n_ff));
    put("llama.rope.dimension_count", "u32", int(n_embd / n_head));
    put("llama.attention.head_count", "u32", int(n_head));
    put("llama.attention.head_count_kv", "u32", int(n_head_kv));
    put(
        "llama.attention.layer_norm_rms_epsilon",
        "f32",
        Value::Float(RMS_NORM_EPS),
    );
    let (tokens, scores, kinds) = vocabulary(attributes)?;
    put("tokenizer.ggml.model", "str", Value::Text("llama".into()));
    put("tokenizer.ggml.pre", "str", Value::Text("default".into()));
    put("tokenizer.ggml.tokens", "[str]", Value::Array(tokens));
    put("tokenizer.ggml.scores", "[f32]", Value::Array(scores));
    put("tokenizer.ggml.token_type", "[i32]", Value::Array(kinds));
    put("tokenizer.ggml.unknown_token_id", "u32", int(0));
    put("tokenizer.ggml.bos_token_id", "u32", int(1));
    put("tokenizer.ggml.eos_token_id", "u32", int(2));
    out.insert(VALUE_TYPES_KEY.to_owned(), Value::Map(types));
    Ok(Some(LlamaCpp {
        attributes: out,
        names,
    }))
}

fn lacks(what: &str) -> Error {
    Error::invalid(format!(
        "a legacy llama.cpp model without {what} has no llama.cpp form in GGUF"
    ))
}

/// The script's description: the file's format and file type.
fn description(attributes: &Attributes, ftype: u64) -> String {
    // "ggjt v3" -> "GGJTv3"; the unversioned "ggml" is version 1 to the script.
    let format = match attributes.get("ggml.format").and_then(Value::as_str) {
        Some("ggml") | None => "GGMLv1".to_owned(),
        Some(f) => f.replace(' ', "").to_uppercase().replace('V', "v"),
    };
    let file_type = FILE_TYPES
        .iter()
        .find(|(id, _)| *id == ftype)
        .map_or_else(|| format!("ftype {ftype}"), |(_, name)| (*name).to_owned());
    format!("converted from legacy {format} {file_type} format")
}

/// The tokens, their scores and their types as llama.cpp's vocabulary holds them: the
/// first three are `<unk>`, `<s>` and `</s>`, single bytes after them `<0xXX>`, and a space
/// in a token is sentencepiece's `▁` again.
fn vocabulary(attributes: &Attributes) -> Result<(Vec<Value>, Vec<Value>, Vec<Value>)> {
    let tokens = match attributes.get(GGML_VOCAB_KEY) {
        Some(Value::Array(tokens)) if tokens.len() >= 3 => tokens,
        _ => return Err(lacks("its tokens (ggml.vocab, at least three)")),
    };
    let scores = match attributes.get(GGML_SCORES_KEY) {
        Some(Value::Array(scores)) if scores.len() == tokens.len() => Some(scores),
        None => None,
        Some(_) => return Err(lacks("a score for each token (ggml.scores)")),
    };
    let mut out = (Vec::new(), Vec::new(), Vec::new());
    for (id, token) in tokens.iter().enumerate() {
        let bytes = match token {
            Value::Text(t) => t.as_bytes(),
            Value::Bytes(b) => &b[..],
            other => {
                return Err(Error::invalid(format!(
                    "token {id} of ggml.vocab is {}, not text",
                    other.kind_name()
                )))
            }
        };
        let text = |s: &str| Value::Text(s.to_owned());
        let (token, kind) = match (id, bytes) {
            (0, _) => (text("<unk>"), UNKNOWN),
            (1, _) => (text("<s>"), CONTROL),
            (2, _) => (text("</s>"), CONTROL),
            (_, []) => (text(""), CONTROL),
            (3..=258, &[byte]) => (Value::Text(format!("<0x{byte:02X}>")), BYTE),
            _ => (with_sentencepiece_spaces(bytes), NORMAL),
        };
        let score = scores
            .and_then(|s| s.get(id).cloned())
            .unwrap_or(Value::Float(0.0));
        out.0.push(token);
        out.1.push(score);
        out.2.push(Value::Integer(kind));
    }
    Ok(out)
}

/// `bytes` with every space as `▁` (U+2581), as text when it is UTF-8.
fn with_sentencepiece_spaces(bytes: &[u8]) -> Value {
    let mut out = Vec::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b' ' => out.extend("\u{2581}".as_bytes()),
            _ => out.push(b),
        }
    }
    match String::from_utf8(out) {
        Ok(text) => Value::Text(text),
        Err(e) => Value::Bytes(e.into_bytes()),
    }
}

/// A legacy llama.cpp tensor's name in llama.cpp's GGUF (`gguf` package's name map for
/// LLaMA, the original checkpoints' names), for a model of `n_layer` blocks.
fn llama_cpp_name(name: &str, n_layer: u64) -> Option<String> {
    let stem = |stem: &str| -> Option<String> {
        let top = match stem {
            "tok_embeddings" => "token_embd",
            "norm" => "output_norm",
            "output" => "output",
            "rope.freqs" => "rope_freqs",
            _ => {
                let (block, part) = stem.strip_prefix("layers.")?.split_once('.')?;
                let n: u64 = block.parse().ok()?;
                // The map holds blocks 0 to n_layer - 1, written plainly ("7", not "07").
                if n >= n_layer || n.to_string() != block {
                    return None;
                }
                let part = match part {
                    "attention_norm" => "attn_norm",
                    "attention.wq" => "attn_q",
                    "attention.wk" => "attn_k",
                    "attention.wv" => "attn_v",
                    "attention.wo" => "attn_output",
                    "attention.inner_attention.rope.freqs" => "attn_rot_embd",
                    "ffn_norm" => "ffn_norm",
                    "feed_forward.w1" => "ffn_gate",
                    "feed_forward.w2" => "ffn_down",
                    "feed_forward.w3" => "ffn_up",
                    _ => return None,
                };
                return Some(format!("blk.{n}.{part}"));
            }
        };
        Some(top.to_owned())
    };
    // The name itself, else its stem before `.weight` or `.bias`.
    stem(name).or_else(|| {
        let (head, suffix) = name.rsplit_once('.')?;
        matches!(suffix, "weight" | "bias")
            .then(|| stem(head))
            .flatten()
            .map(|s| format!("{s}.{suffix}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_as_the_gguf_package_maps_llama_checkpoints() {
        let name = |n: &str| llama_cpp_name(n, 2);
        assert_eq!(name("tok_embeddings.weight").unwrap(), "token_embd.weight");
        assert_eq!(name("norm.weight").unwrap(), "output_norm.weight");
        assert_eq!(name("rope.freqs").unwrap(), "rope_freqs");
        assert_eq!(
            name("layers.1.feed_forward.w2.weight").unwrap(),
            "blk.1.ffn_down.weight"
        );
        assert_eq!(
            name("layers.0.attention.inner_attention.rope.freqs").unwrap(),
            "blk.0.attn_rot_embd"
        );
        // Past the model's blocks, not plainly numbered, or not LLaMA's: none.
        for other in [
            "layers.2.ffn_norm.weight",
            "layers.01.ffn_norm.weight",
            "layers.0.ffn_norm.scale",
            "model.embed_tokens.weight",
        ] {
            assert_eq!(name(other), None, "{other}");
        }
    }

    #[test]
    fn the_vocabulary_is_sentencepieces_again() {
        let mut a = Attributes::new();
        let tokens = ["", "", "", "\u{1}", "a b", ""]
            .map(|t| Value::Text(t.into()))
            .to_vec();
        let mut tokens = tokens;
        tokens.push(Value::Bytes(vec![0x80]));
        a.insert(GGML_VOCAB_KEY.into(), Value::Array(tokens));
        let (tokens, scores, kinds) = vocabulary(&a).unwrap();
        let text = |t: &str| Value::Text(t.into());
        assert_eq!(
            tokens,
            [
                text("<unk>"),
                text("<s>"),
                text("</s>"),
                text("<0x01>"),
                text("a\u{2581}b"),
                text(""),
                text("<0x80>")
            ]
        );
        assert_eq!(kinds, [2, 3, 3, 6, 1, 3, 6].map(Value::Integer));
        assert!(scores.iter().all(|s| *s == Value::Float(0.0)));
    }
}
