//! Telling the kind of a file from what it shows: [`sniff`], one pure function over the
//! file's first bytes, its length and (for a zip archive) the names in its central directory.
//! The order of its rules is the whole of the detection policy, written once, here; opening
//! is then one `match` on the [`FileKind`] (crate::open). A kind whose cargo feature is off is
//! still told, so that its error can say which feature reads it.

use zt_container::layout::MAGIC_V2;
use zt_container::Error;

/// Bytes read from the start of a file to tell its kind (a JSON index is recognised by a key
/// within them).
pub(crate) const SNIFF_LEN: u64 = 4096;

/// The kinds of file [`sniff`] tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileKind {
    /// A magnetron `.mag` file of any layout.
    Mag,
    /// zTensor v2 (its own magic).
    ZTensorV2,
    /// zTensor 0.1 or 1.x (`ZTEN`: the container says which).
    ZTensor,
    /// A NumPy `.npy` array.
    Npy,
    /// A NumPy `.npz` archive, and any zip not told to be something else.
    Npz,
    /// A PyTorch checkpoint as `torch.save` writes it since 1.6 (a zip).
    PyTorch,
    /// A TorchScript archive (`torch.jit.save`): a zip with code beside the pickle.
    TorchScript,
    /// A Keras 3 `.keras` archive: a zip holding `model.weights.h5` (HDF5).
    Keras,
    /// A GGUF file (llama.cpp).
    Gguf,
    /// A sharded checkpoint's JSON index (`*.index.json`): a set, not one file.
    ShardIndex,
    /// A `.safetensors` file.
    Safetensors,
    /// A PyTorch checkpoint as `torch.save` wrote it before 1.6 (pickles, no zip).
    PyTorchLegacy,
    /// A PyTorch distributed checkpoint's `.metadata` (`torch.distributed.checkpoint`): a
    /// pickle of its `Metadata`, its data in the `*.distcp` files beside it.
    TorchDcp,
    /// An ONNX model (a serialized `ModelProto`).
    Onnx,
    /// An HDF5 file (its superblock signature at 0, 512, 1024 or 2048).
    Hdf5,
    /// A Flax checkpoint (msgpack, `flax.serialization.to_bytes`).
    Flax,
    /// A TensorFlow checkpoint's index (`PREFIX.index`, TensorBundle), its data beside it.
    TfCheckpoint,
    /// A pickle that is not a PyTorch checkpoint, read for the NumPy arrays it holds
    /// (Paddle's `.pdparams`, `pickle.dump` of a dict of arrays).
    Pickle,
    /// Paddle's inference parameters (`.pdiparams`): tensors without names, named by the
    /// program beside them.
    PaddleParams,
    /// A TensorFlow Lite model (`.tflite`): a FlatBuffer with the identifier `TFL3`.
    TfLite,
    /// A Caffe model (`.caffemodel`): a protobuf `NetParameter`.
    Caffe,
    /// An OpenVINO model (IR): `model.xml` (a `<net>`), its weights in `model.bin` beside it.
    OpenVino,
    /// A legacy GGML file (before GGUF): llama.cpp's and whisper.cpp's models of 2023.
    Ggml,
}

impl FileKind {
    /// The kind as users name it.
    ///
    /// ```
    /// assert_eq!(ztensor::FileKind::Npz.name(), "NumPy .npz archive");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Mag => "magnetron .mag file",
            FileKind::ZTensorV2 => "zTensor v2 file",
            FileKind::ZTensor => "zTensor file",
            FileKind::Npy => "NumPy .npy array",
            FileKind::Npz => "NumPy .npz archive",
            FileKind::PyTorch => "PyTorch checkpoint",
            FileKind::TorchScript => "TorchScript archive (torch.jit.save)",
            FileKind::Keras => "Keras .keras archive",
            FileKind::Gguf => "GGUF file",
            FileKind::ShardIndex => "sharded checkpoint index (*.index.json)",
            FileKind::Safetensors => "safetensors file",
            FileKind::PyTorchLegacy => "legacy PyTorch checkpoint (before 1.6)",
            FileKind::TorchDcp => "PyTorch distributed checkpoint (.metadata)",
            FileKind::Onnx => "ONNX model",
            FileKind::Hdf5 => "HDF5 file",
            FileKind::Flax => "Flax checkpoint (msgpack)",
            FileKind::TfCheckpoint => "TensorFlow checkpoint (.index)",
            FileKind::Pickle => "pickle of NumPy arrays (Paddle .pdparams)",
            FileKind::PaddleParams => "Paddle inference parameters (.pdiparams)",
            FileKind::TfLite => "TensorFlow Lite model (.tflite)",
            FileKind::Caffe => "Caffe model (.caffemodel)",
            FileKind::OpenVino => "OpenVINO model (IR .xml and .bin)",
            FileKind::Ggml => "legacy GGML file (ggml, ggmf, ggjt, ggla)",
        }
    }

    /// The cargo feature of this crate that reads the kind, if one does.
    ///
    /// ```
    /// assert_eq!(ztensor::FileKind::PyTorchLegacy.feature(), Some("torch"));
    /// assert_eq!(ztensor::FileKind::ZTensor.feature(), None);
    /// ```
    pub fn feature(self) -> Option<&'static str> {
        match self {
            FileKind::Mag | FileKind::ZTensorV2 | FileKind::ZTensor | FileKind::ShardIndex => None,
            FileKind::Npy | FileKind::Npz => Some("numpy"),
            FileKind::PyTorch | FileKind::PyTorchLegacy | FileKind::TorchScript => Some("torch"),
            FileKind::TorchDcp => Some("torch-dcp"),
            FileKind::Keras | FileKind::Hdf5 => Some("hdf5"),
            FileKind::Gguf => Some("gguf"),
            FileKind::Safetensors => Some("safetensors"),
            FileKind::Onnx => Some("onnx"),
            FileKind::Flax => Some("flax"),
            FileKind::TfCheckpoint => Some("tensorflow"),
            FileKind::Pickle => Some("pickle"),
            FileKind::PaddleParams => Some("paddle"),
            FileKind::TfLite => Some("tflite"),
            FileKind::Caffe => Some("caffe"),
            FileKind::OpenVino => Some("openvino"),
            FileKind::Ggml => Some("ggml"),
        }
    }

    /// Whether this build reads the kind as one file: its feature is on (a set's index is
    /// never one file).
    ///
    /// ```
    /// assert!(ztensor::FileKind::ZTensor.is_built());
    /// ```
    pub fn is_built(self) -> bool {
        match self {
            FileKind::Mag | FileKind::ZTensorV2 | FileKind::ZTensor => true,
            FileKind::Npy | FileKind::Npz => cfg!(feature = "numpy"),
            FileKind::PyTorch | FileKind::PyTorchLegacy | FileKind::TorchScript => {
                cfg!(feature = "torch")
            }
            FileKind::TorchDcp => cfg!(feature = "torch-dcp"),
            FileKind::Gguf => cfg!(feature = "gguf"),
            FileKind::Safetensors => cfg!(feature = "safetensors"),
            FileKind::Onnx => cfg!(feature = "onnx"),
            FileKind::Keras | FileKind::Hdf5 => cfg!(feature = "hdf5"),
            FileKind::Flax => cfg!(feature = "flax"),
            FileKind::TfCheckpoint => cfg!(feature = "tensorflow"),
            FileKind::Pickle => cfg!(feature = "pickle"),
            FileKind::PaddleParams => cfg!(feature = "paddle"),
            FileKind::TfLite => cfg!(feature = "tflite"),
            FileKind::Caffe => cfg!(feature = "caffe"),
            FileKind::OpenVino => cfg!(feature = "openvino"),
            FileKind::Ggml => cfg!(feature = "ggml"),
            FileKind::ShardIndex => false,
        }
    }

    /// The error for a file of a kind this build does not read as one file.
    pub(crate) fn unread(self) -> Error {
        match self {
            FileKind::ShardIndex => Error::unsupported(
                "a sharded checkpoint index (model.safetensors.index.json): open it as a set \
                 (ShardedSet::open in Rust, ztio.open in Python; every zt command takes \
                 one), not as one file",
            ),
            _ => Error::unsupported(format!(
                "a {}: this build of ztensor was built without support for it (feature {:?})",
                self.name(),
                self.feature().unwrap_or_default()
            )),
        }
    }
}

/// Whether a file that starts with `head` is a zip archive (a local file header, or the end
/// record of an empty archive): its kind is then told by its entries' names.
pub(crate) fn is_zip(head: &[u8]) -> bool {
    head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06")
}

/// Tells a file's kind from its first bytes (`head`, up to 4096 of them: `SNIFF_LEN`), its length,
/// and, when `head` starts a zip archive, the names of its entries (else an empty slice).
/// `None`: no kind we know (`open` then goes by the file's name when it names one kind, and
/// otherwise says that no kind's signature matches).
///
/// The rules, in order; the first that holds decides:
/// 1. a `.mag` magic (4 bytes; magnetron's layouts have several);
/// 2. zTensor v2's 8-byte magic;
/// 3. NumPy's `\x93NUMPY`;
/// 4. a zip archive, by its entries' names: code or constants beside the pickle make a
///    TorchScript archive, a `<archive>/data.pkl` (or torch's `byteorder`, `.format_version`,
///    `.data/` records) a PyTorch checkpoint, `model.weights.h5` beside `config.json` a
///    `.keras` archive, and anything else a `.npz` (whose reader lists what is not an array
///    as unreadable objects; an empty zip is an empty `.npz`, as `numpy.savez` writes one);
/// 5. `GGUF`;
/// 6. `ZTEN`, zTensor 0.1 and 1.x (before the next rules: a v0.1 file's byte 8 may be `{`);
///    then `lmgg`, `fmgg`, `tjgg` or `algg`, the magics of legacy GGML files (their byte 8 is
///    a hyperparameter's low byte, which may be `{`; read as a safetensors header size they
///    exceed any file);
/// 7. a JSON object naming `"weight_map"` whose first 8 bytes are no safetensors header size
///    that fits the file: a sharded checkpoint's index;
/// 8. a u64 and then `{`: a safetensors header (none of the magics above can start one that
///    the safetensors reader accepts: read as a header size they exceed its cap or the file);
///    or a u64 that fits the file, then JSON whitespace and `{`, which safetensors reads too;
/// 9. a pickle protocol 2-5 opcode: a legacy PyTorch checkpoint if its first pickle is
///    `torch.save`'s magic number, a distributed checkpoint's `.metadata` if its first 64
///    bytes name `torch.distributed.checkpoint.metadata` (its first global, `Metadata`),
///    else a pickle of NumPy arrays (after safetensors, whose header size can start the same
///    way);
/// 10. the HDF5 signature at byte 0, 512, 1024 or 2048 (after a user block);
/// 11. protobuf field 1 (`ir_version`, 1-15) and then another field of a `ModelProto`: an
///     ONNX model (last: two bytes of protobuf are a weak sign, and none of the magics
///     above starts that way);
/// 12. a msgpack map whose first key is text: a Flax checkpoint (weaker still: a map's
///     header and a string's; a pickle's `80 02` is an empty map and then no string);
/// 13. `00 00`, a one-byte length and `08`: the header entry that opens a TensorFlow
///     checkpoint's index table; or `00 00`, a varint length and `0a`: the meta entry that
///     opens a V1 checkpoint (the reader then wants the table's footer magic);
/// 14. a Paddle tensor: version 0, no LoD levels, version 0, a header of 2 to 255 bytes that
///     starts with protobuf field 1 (its data type) and a type Paddle writes (files of
///     tensors with LoD levels are told by their name, `.pdiparams`);
/// 15. `TFL3` at byte 4 (a FlatBuffer's file identifier, after its root offset): a
///     TensorFlow Lite model;
/// 16. a protobuf text field 1 of under 128 bytes (a net's name) followed by field 100 or 2,
///     or field 100 first: a Caffe `NetParameter` and its first layer (after ONNX and
///     TensorFlow, whose first fields differ: a file of another kind that starts so is
///     then read as Caffe and refused by its reader, naming what it expected);
/// 17. XML (after an optional byte order mark, white space and `<?xml ...?>`) whose first
///     element is `<net `: an OpenVINO model's `.xml`.
///
/// ```
/// use ztensor::{sniff, FileKind};
/// assert_eq!(sniff(b"GGUF\x03\0\0\0", 8, &[]), Some(FileKind::Gguf));
/// let names = ["archive/data.pkl", "archive/data/0"];
/// assert_eq!(sniff(b"PK\x03\x04", 4096, &names), Some(FileKind::PyTorch));
/// assert_eq!(sniff(b"", 0, &[]), None);
/// ```
pub fn sniff(head: &[u8], file_len: u64, zip_names: &[&str]) -> Option<FileKind> {
    if head.first_chunk::<4>().is_some_and(zt_mag::is_mag_magic) {
        return Some(FileKind::Mag);
    }
    if head.starts_with(&MAGIC_V2) {
        return Some(FileKind::ZTensorV2);
    }
    if head.starts_with(b"\x93NUMPY") {
        return Some(FileKind::Npy);
    }
    if is_zip(head) {
        return Some(zip_kind(zip_names));
    }
    if head.starts_with(b"GGUF") {
        return Some(FileKind::Gguf);
    }
    if head.starts_with(b"ZTEN") {
        return Some(FileKind::ZTensor);
    }
    if [b"lmgg", b"fmgg", b"tjgg", b"algg"]
        .iter()
        .any(|m| head.starts_with(*m))
    {
        return Some(FileKind::Ggml);
    }
    if is_json_index(head, file_len) {
        return Some(FileKind::ShardIndex);
    }
    if head.len() >= 9 && head.get(8) == Some(&b'{') || is_spaced_safetensors(head, file_len) {
        return Some(FileKind::Safetensors);
    }
    if matches!(head, [0x80, 2..=5, ..]) {
        return Some(if is_legacy_torch_magic(head) {
            FileKind::PyTorchLegacy
        } else if is_dcp_metadata(head) {
            FileKind::TorchDcp
        } else {
            FileKind::Pickle
        });
    }
    let hdf5_at = |at: usize| {
        head.get(at..)
            .is_some_and(|h| h.starts_with(HDF5_SIGNATURE))
    };
    if [0, 512, 1024, 2048].into_iter().any(hdf5_at) {
        return Some(FileKind::Hdf5);
    }
    if looks_like_onnx(head) {
        return Some(FileKind::Onnx);
    }
    if looks_like_flax(head) {
        return Some(FileKind::Flax);
    }
    if looks_like_tf_index(head) {
        return Some(FileKind::TfCheckpoint);
    }
    if looks_like_paddle_tensor(head) {
        return Some(FileKind::PaddleParams);
    }
    if head.get(4..8) == Some(b"TFL3") {
        return Some(FileKind::TfLite);
    }
    if looks_like_caffe(head) {
        return Some(FileKind::Caffe);
    }
    if looks_like_openvino(head) {
        return Some(FileKind::OpenVino);
    }
    None
}

/// The kind a file's name says, for a file whose first bytes match no rule of [`sniff`]: a
/// damaged ONNX model or safetensors header then gets its own reader's error, which says what
/// is wrong and where, rather than the zTensor container's magic error. Only extensions that
/// name one kind count (`.zt` and `.mag` name their containers, whose parsers report a bad
/// magic themselves; `.bin` and `.pt` name several).
pub(crate) fn kind_by_name(path: &std::path::Path) -> Option<FileKind> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match extension.as_str() {
        "onnx" => FileKind::Onnx,
        "safetensors" => FileKind::Safetensors,
        "gguf" => FileKind::Gguf,
        "npy" => FileKind::Npy,
        "h5" | "hdf5" => FileKind::Hdf5,
        "msgpack" => FileKind::Flax,
        "index" => FileKind::TfCheckpoint,
        "pdparams" | "pdopt" | "pkl" | "pickle" => FileKind::Pickle,
        "pdiparams" => FileKind::PaddleParams,
        "tflite" | "lite" => FileKind::TfLite,
        "caffemodel" => FileKind::Caffe,
        "zt" => FileKind::ZTensor,
        _ => return None,
    })
}

/// The magic number every legacy PyTorch checkpoint's first pickle holds,
/// `0x1950a86a20f9469cfc6c`, as the LONG1 opcode writes it (10 bytes, little-endian).
const LEGACY_TORCH_MAGIC: &[u8; 12] = b"\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

/// Rule 9: whether a pickle's first 64 bytes name the module of a distributed checkpoint's
/// `Metadata`, the first global its `.metadata` pickles.
pub(crate) fn is_dcp_metadata(head: &[u8]) -> bool {
    const MODULE: &[u8] = b"torch.distributed.checkpoint.metadata";
    let first = head.get(..64).unwrap_or(head);
    first.windows(MODULE.len()).any(|w| w == MODULE)
}

/// Rule 9: whether a file starts with the legacy `torch.save` magic pickle: `PROTO` 2-5, a
/// `FRAME` (protocol 4 and up), the magic number, `STOP`.
pub(crate) fn is_legacy_torch_magic(head: &[u8]) -> bool {
    let rest = match head {
        [0x80, 2..=5, rest @ ..] => rest,
        _ => return false,
    };
    let rest = match rest {
        [0x95, _, _, _, _, _, _, _, _, tail @ ..] => tail,
        _ => rest,
    };
    rest.starts_with(LEGACY_TORCH_MAGIC) && rest.get(LEGACY_TORCH_MAGIC.len()) == Some(&b'.')
}

/// The signature that starts an HDF5 superblock.
const HDF5_SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// Rule 11: `ir_version` (field 1, a one-byte varint of 1 to 15) first, as every protobuf
/// writer puts it, then the key of another `ModelProto` field: `producer_name` to `graph`
/// (fields 2-7), `opset_import` (8), `metadata_props` (14), `training_info` (20),
/// `functions` (25).
fn looks_like_onnx(head: &[u8]) -> bool {
    let [0x08, ir, key, rest @ ..] = head else {
        return false;
    };
    if !(1..=15).contains(ir) {
        return false;
    }
    match key {
        0x12 | 0x1a | 0x22 | 0x28 | 0x32 | 0x3a | 0x42 | 0x72 => true,
        // Two-byte keys: field 20 (0xa2 0x01) and 25 (0xca 0x01).
        0xa2 | 0xca => rest.first() == Some(&0x01),
        _ => false,
    }
}

/// Rule 12: whether `head` starts a Flax checkpoint: a msgpack map of at least one entry whose first
/// key is text (`fixmap`, `map16` or `map32`, then a `fixstr` or `str8`/`16`/`32` header).
/// A pickle starts `80 02`-`80 05`: an empty map followed by a number, refused here.
fn looks_like_flax(head: &[u8]) -> bool {
    let key_at = match head.first() {
        Some(0x81..=0x8f) => 1,
        Some(0xde) if head.get(1..3).is_some_and(|n| n != [0, 0]) => 3,
        Some(0xdf) if head.get(1..5).is_some_and(|n| n != [0, 0, 0, 0]) => 5,
        _ => return false,
    };
    matches!(head.get(key_at), Some(0xa0..=0xbf | 0xd9..=0xdb))
}

/// Rule 13: whether `head` starts a TensorFlow checkpoint's table: its first entry is key ""
/// (no shared or new key bytes), whose value opens, in a TensorBundle index (V2), with
/// `num_shards` (protobuf field 1, a varint; a one-byte value length), and in a V1
/// checkpoint with `meta` (field 1, a message; the length a varint of at most 3 bytes).
fn looks_like_tf_index(head: &[u8]) -> bool {
    match head {
        [0x00, 0x00, 0x01..=0x7f, 0x08, ..] => true,
        [0x00, 0x00, rest @ ..] => {
            let len_bytes = rest.iter().take(3).position(|b| b & 0x80 == 0);
            len_bytes.is_some_and(|n| rest.get(n + 1) == Some(&0x0a))
        }
        _ => false,
    }
}

/// Rule 14: a Paddle dense tensor without LoD levels: `u32 0`, `u64 0`, `u32 0`, an `i32`
/// header length of 2-255, then the header's field 1 (wire type 0) holding a data type of
/// 0-6 or 19-38 (what `VarType.Type` names a tensor's elements).
fn looks_like_paddle_tensor(head: &[u8]) -> bool {
    match head {
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, len, 0, 0, 0, 0x08, code, ..] => {
            *len >= 2 && matches!(code, 0..=6 | 19..=38)
        }
        _ => false,
    }
}

/// Rule 16: a Caffe `NetParameter`: `0a`, a one-byte length and that many bytes of name,
/// then a layer (`a2 06`, field 100) or an old-style layer (`12`, field 2); or a layer first.
fn looks_like_caffe(head: &[u8]) -> bool {
    let layer = |rest: &[u8]| rest.starts_with(&[0xa2, 0x06]) || rest.first() == Some(&0x12);
    match head {
        [0x0a, len @ 0..=0x7f, rest @ ..] => rest.get(usize::from(*len)..).is_some_and(layer),
        _ => head.starts_with(&[0xa2, 0x06]),
    }
}

/// Rule 17: XML whose first element is `<net ` (an OpenVINO IR).
fn looks_like_openvino(head: &[u8]) -> bool {
    let mut rest = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let skip_space =
        |r: &[u8]| -> usize { r.iter().take_while(|b| b.is_ascii_whitespace()).count() };
    rest = rest.get(skip_space(rest)..).unwrap_or_default();
    if rest.starts_with(b"<?xml") {
        let Some(end) = rest.windows(2).position(|w| w == b"?>") else {
            return false;
        };
        rest = rest.get(end + 2..).unwrap_or_default();
        rest = rest.get(skip_space(rest)..).unwrap_or_default();
    }
    rest.starts_with(b"<net ")
}

/// Rule 4: which zip-based kind, by the names of the archive's entries.
fn zip_kind(names: &[&str]) -> FileKind {
    // `<archive>/<rest>`: torch writes every record under one top-level folder.
    let under_archive = |rest: fn(&str) -> bool| {
        names
            .iter()
            .any(|n| n.split_once('/').is_some_and(|(_, r)| rest(r)))
    };
    let torch = under_archive(|r| r == "data.pkl" || r == "byteorder" || r == ".format_version")
        || under_archive(|r| r.starts_with(".data/"));
    let script = under_archive(|r| r == "constants.pkl" || r.starts_with("code/"));
    if script {
        FileKind::TorchScript
    } else if torch {
        FileKind::PyTorch
    } else if names.contains(&"model.weights.h5") && names.contains(&"config.json") {
        FileKind::Keras
    } else {
        FileKind::Npz
    }
}

/// Rule 8's second form: a header size that fits the file, then JSON whitespace and `{`.
/// The safetensors reader parses the header with serde_json, which skips whitespace before
/// the object, so it reads such a file; a size that fits keeps this form from matching the
/// first bytes of other kinds.
fn is_spaced_safetensors(head: &[u8], file_len: u64) -> bool {
    let Some(size) = head.first_chunk::<8>().map(|n| u64::from_le_bytes(*n)) else {
        return false;
    };
    if size < 2 || size.checked_add(8).is_none_or(|end| end > file_len) {
        return false;
    }
    let header_end =
        usize::try_from(size).map_or(head.len(), |n| n.saturating_add(8).min(head.len()));
    head.get(8..header_end)
        .unwrap_or_default()
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .is_some_and(|&b| b == b'{')
}

/// Rule 7: a JSON object naming a `"weight_map"` in its first bytes, whose first 8 bytes do
/// not make a safetensors header size that fits the file.
fn is_json_index(head: &[u8], file_len: u64) -> bool {
    let starts_object = head
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{');
    let safetensors_size_fits = head.first_chunk::<8>().is_some_and(|n| {
        u64::from_le_bytes(*n)
            .checked_add(8)
            .is_some_and(|e| e <= file_len)
    });
    starts_object && !safetensors_size_fits && head.windows(12).any(|w| w == b"\"weight_map\"")
}

#[cfg(test)]
mod tests {
    //! Every kind, every near miss, empty and short files.

    use super::{kind_by_name, sniff, FileKind, LEGACY_TORCH_MAGIC};

    #[test]
    fn names_that_say_one_kind() {
        let by = |name: &str| kind_by_name(std::path::Path::new(name));
        assert_eq!(by("dir/model.ONNX"), Some(FileKind::Onnx));
        assert_eq!(by("model.safetensors"), Some(FileKind::Safetensors));
        assert_eq!(by("w.h5"), Some(FileKind::Hdf5));
        assert_eq!(by("m.zt"), Some(FileKind::ZTensor));
        assert_eq!(by("model.pdparams"), Some(FileKind::Pickle));
        assert_eq!(by("inference.pdiparams"), Some(FileKind::PaddleParams));
        assert_eq!(by("model.tflite"), Some(FileKind::TfLite));
        assert_eq!(by("deploy.caffemodel"), Some(FileKind::Caffe));
        for name in ["pytorch_model.bin", "m.pt", "m.mag", "onnx", "m.onnx.data"] {
            assert_eq!(by(name), None, "{name}");
        }
    }

    #[test]
    fn tells_an_openvino_model_by_its_root_element() {
        assert_eq!(
            kind(b"<?xml version=\"1.0\"?>\n<net name=\"m\">"),
            Some(FileKind::OpenVino)
        );
        assert_eq!(
            kind(b"\xef\xbb\xbf <net version=\"11\">"),
            Some(FileKind::OpenVino)
        );
        assert_eq!(kind(b"<?xml version=\"1.0\"?><svg>"), None);
        assert_eq!(kind(b"<?xml version=\"1.0\""), None);
    }

    #[test]
    fn tells_a_caffe_model_by_its_first_fields() {
        assert_eq!(kind(b"\x0a\x03netx\xa2\x06\x05"), None); // the name is 3 bytes
        assert_eq!(kind(b"\x0a\x03net\xa2\x06\x05"), Some(FileKind::Caffe));
        assert_eq!(kind(b"\x0a\x03net\x12\x05"), Some(FileKind::Caffe));
        assert_eq!(kind(b"\xa2\x06\x05\x0a"), Some(FileKind::Caffe));
        assert_eq!(kind(b"\x0a\x03net\x1a\x05"), None);
    }

    #[test]
    fn tells_a_legacy_ggml_file_by_its_magic() {
        for magic in [b"lmgg", b"fmgg", b"tjgg", b"algg"] {
            let mut head = magic.to_vec();
            head.extend(b"\x03\0\0\0{\0\0\0");
            assert_eq!(kind(&head), Some(FileKind::Ggml), "{magic:?}");
        }
        assert_eq!(kind(b"ggjt\x03\0\0\0"), None);
    }

    #[test]
    fn tells_a_tflite_model_by_its_identifier() {
        assert_eq!(kind(b"\x1c\0\0\0TFL3\0\0"), Some(FileKind::TfLite));
        assert_eq!(kind(b"\x1c\0\0\0TFL2\0\0"), None);
    }

    #[test]
    fn tells_a_paddle_tensor_by_its_header() {
        let mut head = [0u8; 24];
        head[16] = 4; // a 4-byte TensorDesc: FP32, dims [3]
        head[20..24].copy_from_slice(&[0x08, 5, 0x10, 3]);
        assert_eq!(kind(&head), Some(FileKind::PaddleParams));
        // A header of one byte, a data type Paddle gives no tensor, LoD levels: not by bytes.
        for (at, byte) in [(16, 1), (21, 7), (4, 1)] {
            let mut other = head;
            other[at] = byte;
            assert_eq!(kind(&other), None, "byte {at} = {byte}");
        }
    }

    fn kind(head: &[u8]) -> Option<FileKind> {
        sniff(head, head.len() as u64, &[])
    }

    fn zip(names: &[&str]) -> Option<FileKind> {
        sniff(b"PK\x03\x04\x14\0", 1 << 20, names)
    }

    #[test]
    fn empty_and_short_files_are_no_kind() {
        assert_eq!(kind(b""), None);
        for short in [&b"Z"[..], b"ZTE", b"GGU", b"\x93NUMP", b"PK\x03", b"\x80"] {
            assert_eq!(kind(short), None, "{short:?}");
        }
    }

    #[test]
    fn each_magic_tells_its_kind() {
        assert_eq!(kind(b"MAG!\x01\0\0\0"), Some(FileKind::Mag));
        let mut v2 = zt_container::layout::MAGIC_V2.to_vec();
        v2.extend([0; 8]);
        assert_eq!(kind(&v2), Some(FileKind::ZTensorV2));
        assert_eq!(kind(b"\x93NUMPY\x01\x00"), Some(FileKind::Npy));
        assert_eq!(kind(b"GGUF\x03\0\0\0"), Some(FileKind::Gguf));
        assert_eq!(kind(b"ZTEN0001"), Some(FileKind::ZTensor));
        assert_eq!(kind(b"ZTEN1000"), Some(FileKind::ZTensor));
        // A pickle is a legacy checkpoint only when it starts with torch.save's magic.
        let mut legacy = b"\x80\x02".to_vec();
        legacy.extend(LEGACY_TORCH_MAGIC);
        legacy.push(b'.');
        assert_eq!(kind(&legacy), Some(FileKind::PyTorchLegacy));
        let mut framed = b"\x80\x04\x95\x0d\0\0\0\0\0\0\0".to_vec();
        framed.extend(LEGACY_TORCH_MAGIC);
        framed.push(b'.');
        assert_eq!(kind(&framed), Some(FileKind::PyTorchLegacy));
        assert_eq!(kind(b"\x80\x02}q\0."), Some(FileKind::Pickle));
        assert_eq!(kind(b"\x80\x05\x95\0"), Some(FileKind::Pickle));
    }

    #[test]
    fn a_distributed_checkpoints_metadata_is_told_by_its_first_global() {
        // As torch 2.x pickles `Metadata`: PROTO 4, FRAME, the module as a short string.
        let mut head = b"\x80\x04\x95\x85\x05\0\0\0\0\0\0\x8c\x25".to_vec();
        head.extend(b"torch.distributed.checkpoint.metadata\x94\x8c\x08Metadata");
        assert_eq!(kind(&head), Some(FileKind::TorchDcp));
        // The module named only after the first 64 bytes: any pickle.
        let mut late = b"\x80\x04".to_vec();
        late.extend([b'N'; 62]);
        late.extend(b"torch.distributed.checkpoint.metadata");
        assert_eq!(kind(&late), Some(FileKind::Pickle));
    }

    #[test]
    fn onnx_models_are_told_by_their_first_fields() {
        // ir_version 10, then producer_name, graph, opset_import, functions.
        for head in [
            &b"\x08\x0a\x12\x07pytorch"[..],
            b"\x08\x07\x3a\x10",
            b"\x08\x08\x42\x04",
            b"\x08\x0a\xca\x01\x02",
        ] {
            assert_eq!(kind(head), Some(FileKind::Onnx), "{head:?}");
        }
        // IR version 0 or past 15, an unknown next field, a two-byte key cut short.
        for head in [
            &b"\x08\x00\x12\x01"[..],
            b"\x08\x10\x12\x01",
            b"\x08\x0a\x10\x01",
            b"\x08\x0a\xca",
            b"\x08\x0a",
        ] {
            assert_eq!(kind(head), None, "{head:?}");
        }
    }

    #[test]
    fn near_misses_are_not_taken() {
        // One byte off each magic.
        assert_eq!(kind(b"\x93NUMPX\x01\x00"), None);
        assert_eq!(kind(b"GGUG\x03\0\0\0"), None);
        assert_eq!(kind(b"ZTEM0001"), None);
        assert_eq!(kind(b"PK\x03\x05\0\0"), None);
        // Pickle protocols 0, 1 and 6 are no torch.save output.
        assert_eq!(kind(b"\x80\x01}q\0."), None);
        assert_eq!(kind(b"\x80\x06}q\0."), None);
        // A zTensor v0.1 file whose byte 8 is '{' stays a zTensor file.
        assert_eq!(kind(b"ZTEN0001{\"a\":1}"), Some(FileKind::ZTensor));
    }

    #[test]
    fn safetensors_and_json_indexes_are_told_apart() {
        let header = br#"{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#;
        let mut st = (header.len() as u64).to_le_bytes().to_vec();
        st.extend(header);
        st.extend([0; 4]);
        assert_eq!(kind(&st), Some(FileKind::Safetensors));
        let index = br#"{"metadata": {"total_size": 8}, "weight_map": {"w": "a.safetensors"}}"#;
        assert_eq!(kind(index), Some(FileKind::ShardIndex));
        // JSON without a weight map is no index; nor is an index-like text whose first 8
        // bytes make a header size that fits (a safetensors file that mentions the key).
        assert_eq!(kind(br#"{"metadata": {}, "other": 1}"#), None);
        let mut tricky = 20u64.to_le_bytes().to_vec();
        tricky.extend(br#"{"weight_map":1}    "#);
        assert_eq!(kind(&tricky), Some(FileKind::Safetensors));
    }

    #[test]
    fn a_safetensors_header_may_start_with_json_whitespace() {
        // safetensors' reader (serde_json) skips it, so the file is one it reads.
        let header = b" \t\r\n{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
        let mut st = (header.len() as u64).to_le_bytes().to_vec();
        st.extend(header);
        st.extend([0; 4]);
        assert_eq!(kind(&st), Some(FileKind::Safetensors));
        // Only with a header size that fits the file, and only JSON's whitespace.
        assert_eq!(sniff(&st, 12, &[]), None);
        st[8] = 0x0c; // form feed: not JSON whitespace
        assert_eq!(kind(&st), None);
        let mut empty = 3u64.to_le_bytes().to_vec();
        empty.extend(b"   ");
        assert_eq!(kind(&empty), None);
    }

    #[test]
    fn zip_archives_are_told_by_their_entries() {
        assert_eq!(
            sniff(b"PK\x05\x06", 22, &[]),
            Some(FileKind::Npz),
            "empty zip"
        );
        assert_eq!(zip(&["a.npy", "b.npy"]), Some(FileKind::Npz));
        assert_eq!(zip(&["notes.txt"]), Some(FileKind::Npz));
        let torch = ["archive/data.pkl", "archive/byteorder", "archive/data/0"];
        assert_eq!(zip(&torch), Some(FileKind::PyTorch));
        // Records before data.pkl, or without it: still torch's layout.
        assert_eq!(zip(&["m/byteorder", "m/data/0"]), Some(FileKind::PyTorch));
        assert_eq!(zip(&["m/.data/version"]), Some(FileKind::PyTorch));
        // data.pkl at the top level or two folders down is not torch's layout.
        assert_eq!(zip(&["data.pkl"]), Some(FileKind::Npz));
        let script = ["m/data.pkl", "m/constants.pkl", "m/code/__torch__.py"];
        assert_eq!(zip(&script), Some(FileKind::TorchScript));
        let keras = ["metadata.json", "config.json", "model.weights.h5"];
        assert_eq!(zip(&keras), Some(FileKind::Keras));
        assert_eq!(zip(&["model.weights.h5"]), Some(FileKind::Npz));
    }

    #[test]
    fn tells_a_flax_checkpoint_from_a_pickle() {
        assert!(super::looks_like_flax(b"\x83\xaaembeddings"));
        assert!(super::looks_like_flax(b"\xde\x00\x11\xd9\x20"));
        assert!(!super::looks_like_flax(b"\x80\x02}q"));
        assert!(!super::looks_like_flax(b"\x80"));
        assert!(!super::looks_like_flax(b"\xde\x00\x00\xa1"));
        assert!(!super::looks_like_flax(b"\x81\x01"));
    }

    #[test]
    fn tells_a_tensorflow_index_by_its_header_entry() {
        assert!(super::looks_like_tf_index(b"\0\0\x06\x08\x01\x1a\x02"));
        assert!(!super::looks_like_tf_index(b"\0\0\0\x08"));
        assert!(!super::looks_like_tf_index(b"\0\x01\x06\x08"));
        assert!(!super::looks_like_tf_index(b"\0\0\x06\x10"));
        // A V1 checkpoint's meta entry: a message, its length one or more varint bytes.
        assert!(super::looks_like_tf_index(b"\0\0\x2e\x0a\x2c"));
        assert!(super::looks_like_tf_index(b"\0\0\xae\x01\x0a\x2c"));
        assert!(!super::looks_like_tf_index(b"\0\0\xae\x01\x12"));
        assert!(!super::looks_like_tf_index(b"\0\0\xff\xff\xff\xff\x0a"));
        assert_eq!(
            sniff(b"\0\0\x06\x08\x01\x1a\x02\x08", 345, &[]),
            Some(FileKind::TfCheckpoint)
        );
    }
}
