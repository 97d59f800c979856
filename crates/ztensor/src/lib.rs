//! Read and write tensor files safely and fast: zTensor (`.zt`, every spec version) and
//! magnetron's `.mag`.
//!
//! This crate is the facade over the layers below it; a reader of the code should start here
//! and then go down:
//!
//! - [`open`] / [`OpenOptions`] → [`Reader`]: opens any file we read, tells its kind from the
//!   magic, validates every offset, length, size and overlap once, and lists [`ObjectInfo`]s.
//!   [`Reader::read`] returns a dense object as `Cow<[T]>`: borrowed straight from the memory
//!   map when the data is raw, little-endian and aligned.
//! - Loading every tensor fast: [`OpenOptions::populate`] maps the file's pages on a second
//!   core ahead of the reads; without a map, [`Reader::read_chunked`] hands tensors out in
//!   cache-sized pieces and [`Reader::read_into`] reuses one buffer.
//! - [`Writer`]: streams a v1.2 file to a temporary file and renames it into place.
//! - [`container`], [`manifest`], [`formats`], [`mag`]: the layers, re-exported whole.
//!
//! # Example
//!
//! ```
//! # fn main() -> ztensor::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("model.zt");
//! let mut w = ztensor::Writer::create(&path)?;
//! w.set_attribute("framework", "none");
//! w.add("w", &[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! w.set_options(ztensor::WriteOptions { compression: Some(3), digest: Some(ztensor::DigestAlgorithm::Sha256) });
//! w.add("b", &[3], &[1i64, 2, 3])?;
//! w.finish()?;
//!
//! let r = ztensor::open(&path)?;
//! assert_eq!(r.names().collect::<Vec<_>>(), ["b", "w"]);
//! let w = r.read::<f32>("w")?; // zero-copy: points into the memory map
//! assert_eq!(&w[..], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
//! assert_eq!(&r.object("b")?.read_verified::<i64>()?[..], &[1, 2, 3]);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub mod convert;
mod decode;
mod files;
mod listing;
mod model;
mod open;
mod reader;
mod sparse;
mod view;
mod writer;

pub use zt_container as container;
pub use zt_formats as formats;
pub use zt_mag as mag;
pub use zt_manifest as manifest;

pub use convert::{
    upgrade, write_mag, write_safetensors, ConvertOptions, ConvertReport, Keep, MagOptions,
};
pub use decode::ReadOptions;
pub use listing::Limits;
pub use model::{
    ByteOrder, ComponentInfo, Components, Defect, FileVersion, LegacyLayout, LegacyPacking,
    ObjectInfo, RangeDigest, LEGACY_BLOB_ROLE,
};
pub use open::{open, OpenOptions};
pub use reader::{Iter, Reader, VerifyReport};
pub use sparse::{Coo, Csr, Quantized};
pub use view::{ComponentView, ObjectView};
pub use writer::{ComponentData, EncodedComponent, ObjectData, Sink, WriteOptions, Writer};
pub use zt_container::{Error, ErrorKind, Result, Source};
pub use zt_formats::{
    fp8, Accumulate, Complex, DType, Digest, DigestAlgorithm, Element, ElementType, Encoding,
    Format, LogicalType, QuantParams,
};
pub use zt_manifest::{Attributes, Value};
