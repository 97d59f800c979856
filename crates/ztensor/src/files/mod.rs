//! One module per kind of file: each turns a file's bytes into the shared
//! [`Listing`](crate::listing::Listing) and knows nothing of the reader, of the other kinds or
//! of how objects are read. [`crate::open`] alone chooses among them.
//!
//! A new kind of file is a new module here (behind its cargo feature), a rule in
//! [`crate::sniff`] and an arm in [`crate::open`]'s dispatch: docs/ARCHITECTURE.md has the
//! checklist.

#[cfg(feature = "caffe")]
pub(crate) mod caffe;
#[cfg(feature = "flax")]
pub(crate) mod flax;
#[cfg(feature = "ggml")]
pub(crate) mod ggml;
#[cfg(feature = "gguf")]
pub(crate) mod gguf;
#[cfg(feature = "hdf5")]
pub(crate) mod hdf5;
pub(crate) mod mag;
#[cfg(feature = "numpy")]
pub(crate) mod npy;
#[cfg(feature = "onnx")]
pub(crate) mod onnx;
#[cfg(feature = "openvino")]
pub(crate) mod openvino;
#[cfg(feature = "paddle")]
pub(crate) mod paddle;
#[cfg(feature = "pickle")]
pub(crate) mod pickled;
#[cfg(any(feature = "onnx", feature = "paddle", feature = "caffe"))]
#[cfg_attr(not(feature = "onnx"), allow(dead_code))] // Paddle and Caffe walk; ONNX checks too.
pub(crate) mod proto;
#[cfg(feature = "safetensors")]
pub(crate) mod safetensors;
#[cfg(feature = "tensorflow")]
pub(crate) mod tf_checkpoint;
#[cfg(feature = "tflite")]
pub(crate) mod tflite;
#[cfg(feature = "torch")]
pub(crate) mod torch;
#[cfg(feature = "torch-dcp")]
pub(crate) mod torch_dcp;
#[cfg(feature = "gguf")]
pub(crate) mod window;
pub(crate) mod zt_v0_1;
pub(crate) mod zt_v1;
pub(crate) mod zt_v1_0;
pub(crate) mod zt_v2;

/// The longest varint: ten bytes carry 64 bits.
#[cfg(any(feature = "onnx", feature = "paddle", feature = "caffe"))]
pub(crate) const MAX_VARINT: usize = 10;

/// A protobuf varint (base 128, little-endian) at the start of `bytes`: its value and length,
/// or `None` when it is cut short or longer than ten bytes. ONNX models and TensorFlow
/// checkpoints (their LevelDB tables too), Paddle's programs and tensor headers and Caffe
/// models write them.
#[cfg(any(
    feature = "onnx",
    feature = "tensorflow",
    feature = "paddle",
    feature = "caffe"
))]
pub(crate) fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    zt_formats::read_varint(bytes)
}

/// All of a file that is listed from its bytes in one piece (a pickle, whose arrays lie
/// between its opcodes; a FlatBuffer, whose tables lie between its buffers): the map itself,
/// or, for a file that cannot be mapped (over HTTP, from an object store), its bytes read
/// into memory, at most `cap` of them. `what` names the file in the limit error.
#[cfg(any(feature = "pickle", feature = "tflite"))]
pub(crate) fn whole_file<'s>(
    source: &'s zt_container::Source,
    cap: u64,
    what: &str,
) -> zt_container::Result<std::borrow::Cow<'s, [u8]>> {
    if source.as_slice().is_none() && source.len() > cap {
        return Err(zt_container::Error::limit(format!(
            "{what} of {} bytes that cannot be mapped exceeds the cap of {cap} bytes read whole \
             (it is listed from all of its bytes); copy it to a local file",
            source.len()
        )));
    }
    source.read_at(0, source.len())
}

/// The path of a file that `location`, named inside the file at `named_in`, gives in that
/// file's folder: relative, without `..`, and once symbolic links are resolved still inside
/// either the folder it was named from or the folder the file itself lies in once its own
/// links are resolved. The second is Hugging Face's cache, where `snapshots/<rev>/model.onnx`
/// and `model.onnx.data` are both links into `blobs/` (onnxruntime's check has taken both
/// since early 2026; onnx's Python package refuses every link). A missing file is not an error
/// here: opening it says so, with its path. `what` and `folder_name` word the error
/// ("external data location", "the model's folder").
#[cfg(any(feature = "onnx", feature = "hdf5", feature = "paddle"))]
pub(crate) fn path_in_folder(
    named_in: &std::path::Path,
    location: &str,
    what: &str,
    folder_name: &str,
) -> zt_container::Result<std::path::PathBuf> {
    use std::path::{Component, Path};
    let relative = Path::new(location);
    let escapes = location.is_empty()
        || location.contains('\0')
        || relative
            .components()
            .any(|p| !matches!(p, Component::Normal(_) | Component::CurDir));
    if escapes {
        return Err(zt_container::Error::invalid(format!(
            "{what} {location:?} is not a relative path inside {folder_name}"
        )));
    }
    // A file named without a folder (`model.onnx`) is in the current one.
    let folder = match named_in.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let path = folder.join(relative);
    let Ok(real) = path.canonicalize() else {
        return Ok(path);
    };
    let holds = |dir: Option<&Path>| {
        dir.and_then(|d| d.canonicalize().ok())
            .is_some_and(|d| real.starts_with(d))
    };
    let real_home = named_in.canonicalize().ok();
    if !holds(Some(folder)) && !holds(real_home.as_deref().and_then(Path::parent)) {
        return Err(zt_container::Error::invalid(format!(
            "{what} {location:?} leads out of {folder_name} (to {})",
            real.display()
        )));
    }
    Ok(path)
}
