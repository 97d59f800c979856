//! Read and write tensor files safely and fast: zTensor (`.zt`, every spec version read; v2,
//! with its shards, and v1.2 written),
//! magnetron's `.mag`, `.safetensors` and GGUF (v1-v3 read, v3 written), and read NumPy
//! `.npy`/`.npz`, PyTorch checkpoints and pickles of arrays (without executing them), ONNX,
//! HDF5/Keras, Flax, TensorFlow and TensorFlow Lite models, Paddle's inference parameters,
//! Caffe and OpenVINO models and legacy GGML files, all listed into one object model.
//!
//! This crate is the facade over the layers below it; a reader of the code should start here
//! and then go down:
//!
//! - [`open`] / [`OpenOptions`] → [`Reader`]: opens any file we read, tells its kind from its
//!   first bytes, validates every offset, length, size and overlap once, and lists
//!   [`ObjectInfo`]s.
//! - [`Reader::object`] → [`ObjectView`]: one object, looked up once; every read hangs off it.
//!   [`ObjectView::read`] returns a dense object as `Cow<[T]>`, borrowed straight from the
//!   memory map when the data is raw, little-endian and aligned.
//! - Loading every tensor fast is the default: reads that follow each other (by name, or
//!   `for o in &reader` in file order) have the next objects read from the disk and mapped
//!   on a second core ahead of the caller, and a lone read asks the kernel for its own range
//!   only, so a tool that looks at one tensor of a large file reads that tensor and the
//!   manifest, nothing more. [`OpenOptions::populate`] maps the whole file ahead instead;
//!   without a map, [`ObjectView::read_chunked`] hands tensors out in cache-sized pieces and
//!   [`ObjectView::read_into`] reuses one buffer.
//! - [`Writer`]: streams a zTensor file to a temporary file and renames it into place: v2 by
//!   default, byte for byte as ztensor 2.x writes the same tensors ([`Version::V2`], 64 KiB
//!   packing; [`Version::V2Compact`], 4096), or v1.2 ([`Version::V1_2`]).
//! - [`convert`]: any file to zTensor v2 or v1.2 ([`upgrade`]), `.mag` ([`write_mag`]),
//!   `.safetensors` ([`write_safetensors`]) or GGUF ([`write_gguf`]).
//! - GGUF block tensors (Q4_0 ... IQ-types, MXFP4) are objects of format `gguf.<type>/1`
//!   whose blocks are kept byte for byte ([`ObjectView::ggml_type`]); `read::<f32>()`
//!   dequantizes the common ones ([`formats::ggml`]).
//! - [`ShardedSet`]: a sharded checkpoint (`*.index.json` over `.safetensors` or `.zt`
//!   shards) opened as one model, each shard opened on the first lookup that needs it.
//! - [`container`], [`manifest`], [`formats`], [`mag`]: the layers, re-exported whole.
//!
//! # Common tasks
//!
//! Read a PyTorch checkpoint without running its pickle, and convert it:
//!
//! ```
//! # #[cfg(feature = "torch")]
//! # fn main() -> ztensor::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let ckpt = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/pytorch/pytorch_model.bin");
//! let r = ztensor::open(ckpt)?;                          // also .pt, .npy, .npz
//! let w = r.read::<f32>("0.weight")?;                     // borrowed from the map
//! assert_eq!(w.len(), 12);
//! ztensor::upgrade(ckpt, dir.path().join("model.zt"), ztensor::ConvertOptions::default())?;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "torch"))]
//! # fn main() {}
//! ```
//!
//! Write a file with attributes, compression and digests:
//!
//! ```
//! # #[cfg(feature = "zstd")]
//! # fn main() -> ztensor::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("model.zt");
//! let mut w = ztensor::Writer::create(&path)?;
//! w.set_attribute("framework", "none");
//! w.add("w", &[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! w.set_options(ztensor::WriteOptions { compression: Some(3), digest: Some(ztensor::DigestAlgorithm::Sha256) });
//! w.add("b", &[3], &[1i64, 2, 3])?;
//! w.finish()?; // nothing is at `path` until here
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "zstd"))]
//! # fn main() {}
//! ```
//!
//! Open a file and iterate its objects; read one typed, and the bytes of any object:
//!
//! ```
//! # fn main() -> ztensor::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("model.zt");
//! # let mut w = ztensor::Writer::create(&path)?;
//! # w.add("w", &[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! # w.add("b", &[3], &[1i64, 2, 3])?;
//! # w.finish()?;
//! let r = ztensor::open(&path)?;
//! for object in &r {
//!     // Any format and type: the decoded little-endian bytes of its values.
//!     let bytes = object.bytes()?;
//!     println!("{} {:?} {} bytes", object.name(), object.dims()?, bytes.len());
//! }
//! let w = r.read::<f32>("w")?; // zero-copy: points into the memory map
//! assert_eq!(&w[..], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
//! let b = r.object("b")?;
//! assert_eq!(b.dims()?, [3]);
//! assert_eq!(&b.read_verified::<i64>()?[..], &[1, 2, 3]);
//! // A wrong type is the caller's error; a missing name is its own kind.
//! assert_eq!(b.read::<f32>().unwrap_err().kind(), ztensor::ErrorKind::InvalidArgument);
//! assert_eq!(r.object("c").unwrap_err().kind(), ztensor::ErrorKind::NotFound);
//! # Ok(())
//! # }
//! ```
//!
//! Convert: any file we read to zTensor (v2 by default, [`ConvertOptions::version`]),
//! `.safetensors`, `.mag` or GGUF:
//!
//! ```
//! # #[cfg(feature = "safetensors")]
//! # fn main() -> ztensor::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let zt = dir.path().join("model.zt");
//! # let mut w = ztensor::Writer::create(&zt)?;
//! # w.add("w", &[2], &[1.0f32, 2.0])?;
//! # w.finish()?;
//! let st = dir.path().join("model.safetensors");
//! ztensor::write_safetensors(&ztensor::open(&zt)?, &st, false)?;
//! let back = dir.path().join("back.zt");
//! ztensor::upgrade(&st, &back, ztensor::ConvertOptions::default())?;
//! assert_eq!(&ztensor::open(&back)?.read::<f32>("w")?[..], &[1.0, 2.0]);
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "safetensors"))]
//! # fn main() {}
//! ```

#![deny(missing_docs)]

mod cast;
#[cfg(feature = "hdf5")]
mod chunks;
mod codec;
pub mod convert;
mod decode;
mod files;
mod folder;
#[cfg(feature = "hdf5")]
#[doc(hidden)]
pub mod fuzzing;
mod listing;
mod model;
mod open;
mod pool;
mod readahead;
mod reader;
#[cfg(feature = "remote")]
pub mod remote;
#[cfg(feature = "sharded")]
mod sharded;
mod sink;
mod slice;
mod sniff;
mod sparse;
mod suggest;
mod view;
mod writer;
mod writer_v2;
mod zip;

pub use zt_container as container;
pub use zt_formats as formats;
pub use zt_mag as mag;
pub use zt_manifest as manifest;

pub use convert::{upgrade, write_mag, ConvertOptions, ConvertReport, Keep, MagOptions};
#[cfg(feature = "gguf")]
pub use convert::{write_gguf, write_gguf_with};
#[cfg(feature = "safetensors")]
pub use convert::{write_safetensors, write_safetensors_with};
pub use decode::{ReadOptions, Verify};
#[cfg(feature = "gguf")]
pub use files::gguf::VALUE_TYPES_KEY as GGUF_VALUE_TYPES_KEY;
pub use folder::model_file;
pub use listing::{Limits, MIN_LISTING_BUDGET};
pub use model::{
    Arrangement, ByteOrder, ComponentInfo, Components, Defect, DigestScope, FileVersion,
    LegacyLayout, LegacyPacking, ObjectInfo, RangeDigest, ShardInfo, LEGACY_BLOB_ROLE,
};
pub use open::{open, OpenOptions};
pub use reader::{Iter, Reader, VerifyReport, REMOTE_BATCH};
#[cfg(feature = "remote")]
pub use remote::{is_url, open_url};
#[cfg(feature = "sharded")]
pub use sharded::{gguf_split_name, index::ShardIndex, is_index_path, is_set_path, ShardedSet};
pub use sink::Staged;
pub use slice::Hyperslab;
pub use sniff::{sniff, FileKind};
pub use sparse::{Coo, Csr, Quantized, SparseData};
pub use suggest::nearest_name;
pub use view::{ComponentView, ObjectView};
pub use writer::{
    ComponentData, EncodedComponent, ObjectData, Sink, Version, WriteOptions, Writer,
};
pub use zt_container::{Durability, Error, ErrorKind, RangeRead, Result, Source};
pub use zt_formats::{
    fp8, Accumulate, Complex, DType, Digest, DigestAlgorithm, Element, ElementType, Encoding,
    Format, LogicalType, QuantParams,
};
pub use zt_manifest::{Attributes, Value};
