//! A model folder: which file in it is the model, as a loader of downloaded checkpoints
//! (transformers' `from_pretrained`) finds it. Only names are looked at; nothing is opened.
//!
//! The rank, best first (docs/decisions.md, "A folder as a model"):
//! 1. an index of `.safetensors` or `.zt` shards (`*.safetensors.index.json`,
//!    `*.zt.index.json`);
//! 2. any other index (`pytorch_model.bin.index.json`, Keras's `model.weights.json`) but
//!    TensorFlow's and Flax's;
//! 3. one `.safetensors` or `.zt` file;
//! 4. one file of another kind we read (`pytorch_model.bin`, `.pt`, `.gguf` or a split GGUF
//!    model's first file, `.mag`, `.onnx`,
//!    `.keras`, `.tflite`, `.caffemodel`, Paddle's `model_state.pdparams` and
//!    `inference.pdiparams`, Paddle 1's `__params__` (else its `__model__`, whose variables
//!    lie in files of their own), an OpenVINO model's `.xml` with its `.bin` beside, a PyTorch
//!    distributed checkpoint's `.metadata`, ...);
//! 5. an index of TensorFlow's or Flax's shards (`tf_model.h5.index.json`,
//!    `flax_model.msgpack.index.json`);
//! 6. one `.h5` or `.msgpack` file (`tf_model.h5`, `flax_model.msgpack`, Keras's
//!    `model.weights.h5`), or a TensorFlow checkpoint's `.index` (`bert_model.ckpt.index`);
//! 7. in a TensorFlow SavedModel (`saved_model.pb` beside a `variables` folder), its
//!    variables' checkpoint, `variables/variables.index`.
//!
//! A model repository often holds the same weights for several frameworks; like
//! transformers' PyTorch loader, the PyTorch and safetensors files come before TensorFlow's
//! and Flax's.
//!
//! Of several candidates of the best rank, the one transformers, diffusers or optimum loads
//! when no variant is asked for (`model.safetensors`, not `model.fp16.safetensors` or
//! mistral's `consolidated.safetensors`; `model.onnx`, not `model_quantized.onnx`) is the
//! model; two candidates of the best rank and no such one
//! are an error listing them: the folder does not say which is the model. Config, tokenizer
//! and other files are not candidates.
//!
//! An OpenVINO model is two files, `model.xml` (the graph, which we open) and `model.bin`
//! (its weights, which alone are no file we read): the `.bin` of an `.xml` beside is not a
//! candidate, an `.xml` is one only with its `.bin`. The tokenizer models optimum-intel saves
//! beside a model (`openvino_tokenizer.xml`, `openvino_detokenizer.xml`) are not candidates.

use std::path::{Path, PathBuf};

use zt_container::{Error, Result};

/// The most names of a folder looked at: a folder of more entries is not a model folder,
/// and listing it must not cost without bound.
const MAX_ENTRIES: usize = 100_000;

/// The model file in folder `dir` (see the module docs for the rank); `dir` itself when it
/// is not a folder, except that a TensorFlow checkpoint's prefix (`model.ckpt`, the name
/// TensorFlow's own loaders take, which names no file) gives its `model.ckpt.index`.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// for name in ["config.json", "tokenizer.json", "model.safetensors", "pytorch_model.bin"] {
///     std::fs::write(dir.path().join(name), b"")?;
/// }
/// assert_eq!(ztensor::model_file(dir.path())?, dir.path().join("model.safetensors"));
/// # Ok(())
/// # }
/// ```
pub fn model_file(dir: &Path) -> Result<PathBuf> {
    // A repository on the Hugging Face Hub: the model file the Hub has in it.
    #[cfg(feature = "remote")]
    if let Some(url) = dir.to_str().filter(|s| crate::remote::hub::is_hub_url(s)) {
        return Ok(crate::remote::hub_model_url(url)?.map_or_else(|| dir.to_owned(), PathBuf::from));
    }
    if !dir.is_dir() {
        let mut index = dir.as_os_str().to_owned();
        index.push(".index");
        let index = PathBuf::from(index);
        if !dir.exists() && index.is_file() {
            return Ok(index);
        }
        return Ok(dir.to_owned());
    }
    let at = |e: Error| e.in_file(dir);
    let entries = std::fs::read_dir(dir).map_err(|e| at(Error::from(e)))?;
    let mut best: Option<(u8, Vec<PathBuf>)> = None;
    for (seen, entry) in entries.enumerate() {
        if seen >= MAX_ENTRIES {
            return Err(at(Error::limit(format!(
                "a folder of more than {MAX_ENTRIES} entries is not a model folder"
            ))));
        }
        let path = entry.map_err(|e| at(Error::from(e)))?.path();
        let Some(rank) = candidate_rank(&path) else {
            continue;
        };
        match &mut best {
            Some((r, paths)) if *r == rank => paths.push(path),
            Some((r, _)) if *r < rank => {}
            _ => best = Some((rank, vec![path])),
        }
    }
    // A SavedModel holds no candidate at its top (`saved_model.pb` is a graph); its weights
    // are the checkpoint in `variables/`.
    let variables = dir.join("variables").join("variables.index");
    if best.is_none() && dir.join("saved_model.pb").is_file() && variables.is_file() {
        return Ok(variables);
    }
    // Of several of the best rank, the one a library loads from the folder when asked for no
    // variant: `model.safetensors` beside `model.fp16.safetensors` (a variant) or
    // `consolidated.safetensors` (mistral-inference's copy of the same weights).
    if let Some((_, paths)) = best.as_mut().filter(|(_, paths)| paths.len() > 1) {
        let is_default = |p: &PathBuf| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| LOADERS_DEFAULT_NAMES.contains(&n))
        };
        if paths.iter().filter(|p| is_default(p)).count() == 1 {
            paths.retain(is_default);
        }
    }
    match best {
        Some((_, paths)) if paths.len() == 1 => Ok(paths.into_iter().next().unwrap_or_default()),
        Some((_, mut paths)) => {
            paths.sort();
            let names: Vec<String> = paths
                .iter()
                .filter_map(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .collect();
            Err(at(Error::argument(format!(
                "is a folder holding {} candidate model files ({}): name the one to open",
                names.len(),
                names.join(", ")
            ))))
        }
        None => {
            // A pipeline's folder (diffusers' unet/, vae/, text_encoder/) or a repository
            // that keeps its model in a subfolder (optimum's onnx/, openvino/): say where.
            let inside = subfolders_with_models(dir);
            let hint = match inside.as_slice() {
                [] => String::new(),
                [one] => format!("; its subfolder {one} holds one: name it"),
                many => format!(
                    "; its subfolders {} hold one each: name the one to open",
                    many.join(", ")
                ),
            };
            Err(at(Error::argument(format!(
                "is a directory, with no model in it: expected a shard index (*.index.json) \
                 or a tensor file (.safetensors, .zt, pytorch_model.bin, .gguf, ...){hint}"
            ))))
        }
    }
}

/// The file names transformers', diffusers' and optimum's loaders look for in a folder when
/// no variant is asked for (`WEIGHTS_NAME`, `SAFE_WEIGHTS_NAME` and their indexes, the
/// framework files, optimum's ONNX and OpenVINO `file_name`s): one of these among several
/// candidates of a rank is the model (`model.onnx` beside `model_quantized.onnx`).
const LOADERS_DEFAULT_NAMES: [&str; 14] = [
    "model.onnx",
    "openvino_model.xml",
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "diffusion_pytorch_model.safetensors",
    "diffusion_pytorch_model.safetensors.index.json",
    "diffusion_pytorch_model.bin",
    "diffusion_pytorch_model.bin.index.json",
    "tf_model.h5",
    "tf_model.h5.index.json",
    "flax_model.msgpack",
    "flax_model.msgpack.index.json",
];

/// The most subfolders of a folder with no model that are looked into for one.
const MAX_SUBFOLDERS: usize = 64;

/// The names of the subfolders of `dir` (at most [`MAX_SUBFOLDERS`] of them looked into, and
/// [`MAX_ENTRIES`] names in all) that hold a model file at their top, sorted.
fn subfolders_with_models(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut budget = MAX_ENTRIES;
    let mut found = Vec::new();
    let folders = entries
        .take(MAX_ENTRIES)
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .take(MAX_SUBFOLDERS);
    for folder in folders {
        let Ok(inner) = std::fs::read_dir(&folder) else {
            continue;
        };
        let holds = inner
            .take(budget)
            .filter_map(|e| e.ok().map(|e| e.path()))
            .inspect(|_| budget = budget.saturating_sub(1))
            .any(|p| candidate_rank(&p).is_some());
        if holds {
            found.extend(folder.file_name().map(|n| n.to_string_lossy().into_owned()));
        }
    }
    found.sort();
    found
}

/// The rank of the file at `path` as a model candidate ([`rank`] of its name, for a regular
/// file that [`openvino_candidate`] keeps), or `None` when it is not one.
fn candidate_rank(path: &Path) -> Option<u8> {
    let rank = path.file_name().and_then(|n| n.to_str()).and_then(rank)?;
    // `__model__` is the model only when its variables are not in `__params__`.
    let paddle_program = path.file_name().is_some_and(|n| n == "__model__");
    let shadowed = paddle_program && path.with_file_name("__params__").is_file();
    (path.is_file() && openvino_candidate(path) && !shadowed).then_some(rank)
}

/// Whether `path`, a candidate by its name, stays one beside the files of an OpenVINO
/// model: an `.xml` is one only with its `.bin` beside, a `.bin` only without its `.xml`.
fn openvino_candidate(path: &Path) -> bool {
    let ext = path.extension().map(|e| e.to_ascii_lowercase());
    match ext.as_ref().and_then(|e| e.to_str()) {
        Some("xml") => path.with_extension("bin").is_file(),
        Some("bin") => !path.with_extension("xml").is_file(),
        _ => true,
    }
}

/// A file name's rank as a model candidate (lower is better), or `None` when it is not one.
fn rank(name: &str) -> Option<u8> {
    // A split GGUF model is a candidate once, as its first file (which opens every split).
    #[cfg(feature = "sharded")]
    if crate::sharded::gguf_split_name(Path::new(name)).is_some_and(|(_, n, _)| n != 1) {
        return None;
    }
    // Paddle 1's inference model: its parameters in `__params__`, or each in a file of its
    // own beside the program `__model__` (which opens them).
    if name == "__params__" || name == "__model__" {
        return Some(3);
    }
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".index.json") {
        let over = lower.trim_end_matches(".index.json");
        return Some(if over.ends_with(".safetensors") || over.ends_with(".zt") {
            0
        } else if over.ends_with(".h5") || over.ends_with(".msgpack") {
            4
        } else {
            1
        });
    }
    // Keras 3's index of sharded weights.
    if lower.ends_with(".weights.json") {
        return Some(1);
    }
    let (stem, ext) = lower.rsplit_once('.')?;
    match ext {
        "safetensors" | "zt" => Some(2),
        "bin" | "pt" | "pth" | "ckpt" | "gguf" | "mag" | "npz" | "npy" | "onnx" | "keras"
        | "pdparams" | "pdiparams" | "tflite" | "caffemodel" => Some(3),
        // An OpenVINO model's graph; optimum-intel's tokenizer models beside it are not
        // the model.
        "xml" if !stem.ends_with("tokenizer") => Some(3),
        "h5" | "hdf5" | "msgpack" | "index" => Some(5),
        // A distributed checkpoint's folder: its `.metadata` (its data files are not models).
        "metadata" if stem.is_empty() => Some(3),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for n in names {
            std::fs::write(dir.path().join(n), b"").unwrap();
        }
        dir
    }

    fn chosen(names: &[&str]) -> Result<String> {
        let dir = folder(names);
        let p = model_file(dir.path())?;
        Ok(p.file_name().unwrap().to_string_lossy().into_owned())
    }

    #[cfg(feature = "sharded")]
    #[test]
    fn a_split_gguf_model_is_its_first_file() {
        let split = [
            "m-00001-of-00002.gguf",
            "m-00002-of-00002.gguf",
            "README.md",
        ];
        assert_eq!(chosen(&split).unwrap(), "m-00001-of-00002.gguf");
        // Beside another model, it is one candidate among two.
        let two = [
            "m-00001-of-00002.gguf",
            "m-00002-of-00002.gguf",
            "other.gguf",
        ];
        let e = chosen(&two).unwrap_err().to_string();
        assert!(e.contains("2 candidate model files"), "{e}");
    }

    #[test]
    fn an_index_before_a_single_file_and_safetensors_before_bin() {
        let cases: &[(&[&str], &str)] = &[
            (
                &[
                    "config.json",
                    "model.safetensors.index.json",
                    "model-00001-of-00002.safetensors",
                    "model-00002-of-00002.safetensors",
                ],
                "model.safetensors.index.json",
            ),
            (
                &[
                    "model.safetensors.index.json",
                    "pytorch_model.bin.index.json",
                ],
                "model.safetensors.index.json",
            ),
            (
                &["pytorch_model.bin", "model.safetensors"],
                "model.safetensors",
            ),
            (
                &["pytorch_model.bin.index.json", "model.safetensors"],
                "pytorch_model.bin.index.json",
            ),
            (
                &["tokenizer.json", "pytorch_model.bin"],
                "pytorch_model.bin",
            ),
            (&["model.zt", "README.md"], "model.zt"),
            (
                &[
                    "model.weights.json",
                    "model_00000.weights.h5",
                    "model_00001.weights.h5",
                    "config.json",
                ],
                "model.weights.json",
            ),
            (&["model.onnx", "vocab.txt"], "model.onnx"),
            // PaddleNLP's folder: the weights beside their config; the optimizer's state
            // (`.pdopt`) is not a model.
            (
                &[
                    "model_config.json",
                    "model_state.pdparams",
                    "model_state.pdopt",
                ],
                "model_state.pdparams",
            ),
            (&["__model__", "__params__"], "__params__"),
            (&["__model__", "fc_0.w_0", "fc_0.b_0"], "__model__"),
            (
                &[
                    "inference.json",
                    "inference.pdiparams",
                    "inference.pdiparams.info",
                    "inference.yml",
                ],
                "inference.pdiparams",
            ),
            (&["tf_model.h5", "model.safetensors"], "model.safetensors"),
            (
                &["flax_model.msgpack", "tf_model.h5", "pytorch_model.bin"],
                "pytorch_model.bin",
            ),
            (
                &[
                    "tf_model.h5.index.json",
                    "tf_model-00001-of-00002.h5",
                    "tf_model-00002-of-00002.h5",
                ],
                "tf_model.h5.index.json",
            ),
            (
                &[
                    "flax_model.msgpack.index.json",
                    "flax_model-00001-of-00001.msgpack",
                ],
                "flax_model.msgpack.index.json",
            ),
            (&["model.weights.h5", "config.json"], "model.weights.h5"),
            (
                &[
                    "bert_model.ckpt.index",
                    "bert_model.ckpt.data-00000-of-00001",
                    "bert_model.ckpt.meta",
                    "checkpoint",
                    "vocab.txt",
                ],
                "bert_model.ckpt.index",
            ),
        ];
        for (names, want) in cases {
            assert_eq!(chosen(names).unwrap(), *want, "{names:?}");
        }
    }

    #[test]
    fn an_openvino_model_is_its_xml_with_its_bin() {
        // As optimum-intel exports a language model.
        let exported = [
            "config.json",
            "openvino_model.xml",
            "openvino_model.bin",
            "openvino_tokenizer.xml",
            "openvino_tokenizer.bin",
            "openvino_detokenizer.xml",
            "openvino_detokenizer.bin",
            "tokenizer.json",
        ];
        assert_eq!(chosen(&exported).unwrap(), "openvino_model.xml");
        // A graph without its weights is no candidate; a `.bin` without a graph is one.
        assert!(chosen(&["model.xml"]).is_err());
        assert_eq!(
            chosen(&["model.xml", "weights.bin"]).unwrap(),
            "weights.bin"
        );
        assert_eq!(
            chosen(&["model.safetensors", "model.xml", "model.bin"]).unwrap(),
            "model.safetensors"
        );
        let e = chosen(&["encoder.xml", "encoder.bin", "decoder.xml", "decoder.bin"]);
        assert!(
            e.unwrap_err()
                .message()
                .contains("decoder.xml, encoder.xml"),
            "two models are named"
        );
    }

    #[test]
    fn a_tensorflow_checkpoint_prefix_names_its_index() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("model.ckpt");
        assert_eq!(model_file(&prefix).unwrap(), prefix);
        std::fs::write(dir.path().join("model.ckpt.index"), b"").unwrap();
        assert_eq!(
            model_file(&prefix).unwrap(),
            dir.path().join("model.ckpt.index")
        );
        // A file of that name is itself, whatever lies beside it.
        std::fs::write(&prefix, b"").unwrap();
        assert_eq!(model_file(&prefix).unwrap(), prefix);
    }

    #[test]
    fn a_saved_model_gives_its_variables_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("variables")).unwrap();
        for name in [
            "saved_model.pb",
            "fingerprint.pb",
            "variables/variables.index",
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        assert_eq!(
            model_file(dir.path()).unwrap(),
            dir.path().join("variables/variables.index")
        );
        // Without its graph it is no SavedModel: nothing is chosen.
        std::fs::remove_file(dir.path().join("saved_model.pb")).unwrap();
        assert!(model_file(dir.path()).is_err());
    }

    #[test]
    fn a_folder_with_models_only_in_subfolders_names_them() {
        // diffusers' layout: a model_index.json at the top, one model per component folder.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("model_index.json"), b"{}").unwrap();
        for name in [
            "vae/diffusion_pytorch_model.safetensors",
            "unet/diffusion_pytorch_model.safetensors",
            "scheduler/scheduler_config.json",
        ] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"").unwrap();
        }
        let e = model_file(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("no model in it") && e.contains("subfolders unet, vae hold one each"),
            "{e}"
        );
        std::fs::remove_dir_all(dir.path().join("vae")).unwrap();
        let e = model_file(dir.path()).unwrap_err().to_string();
        assert!(e.contains("its subfolder unet holds one: name it"), "{e}");
        std::fs::remove_dir_all(dir.path().join("unet")).unwrap();
        let e = model_file(dir.path()).unwrap_err().to_string();
        assert!(e.ends_with("pytorch_model.bin, .gguf, ...)"), "{e}");
    }

    #[test]
    fn the_file_loaders_take_by_default_comes_before_variants() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["model.safetensors", "model.fp16.safetensors"],
                "model.safetensors",
            ),
            (
                &["consolidated.safetensors", "model.safetensors"],
                "model.safetensors",
            ),
            (
                &[
                    "diffusion_pytorch_model.fp16.safetensors",
                    "diffusion_pytorch_model.safetensors",
                ],
                "diffusion_pytorch_model.safetensors",
            ),
            (
                &["pytorch_model.bin", "training_args.bin"],
                "pytorch_model.bin",
            ),
            (
                &["model_quantized.onnx", "model.onnx", "model_fp16.onnx"],
                "model.onnx",
            ),
        ];
        for (names, want) in cases {
            assert_eq!(chosen(names).unwrap(), *want, "{names:?}");
        }
        // No default among them: still the caller's choice.
        assert!(chosen(&["a.safetensors", "model.fp16.safetensors"]).is_err());
    }

    #[test]
    fn two_of_the_best_rank_are_listed() {
        let e = chosen(&["a.safetensors.index.json", "b.safetensors.index.json"]).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        assert!(
            e.message().contains(
                "2 candidate model files (a.safetensors.index.json, b.safetensors.index.json)"
            ),
            "{e}"
        );
        let e = chosen(&["m-1.safetensors", "m-2.safetensors"]).unwrap_err();
        assert!(
            e.message().contains("m-1.safetensors, m-2.safetensors"),
            "{e}"
        );
    }

    #[test]
    fn an_empty_folder_says_what_was_expected() {
        let e = chosen(&["config.json"]).unwrap_err();
        assert!(e.message().starts_with("is a directory"), "{e}");
        assert!(e.message().contains("*.index.json"), "{e}");
        let e = chosen(&[]).unwrap_err();
        assert!(e.message().starts_with("is a directory"), "{e}");
    }

    #[test]
    fn a_file_is_itself() {
        let dir = folder(&["m.zt"]);
        let p = dir.path().join("m.zt");
        assert_eq!(model_file(&p).unwrap(), p);
    }
}
