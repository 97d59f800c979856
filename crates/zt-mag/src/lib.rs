//! Read and write magnetron `.mag` files: every layout magnetron shipped.
//!
//! | layout | magic, version | magnetron | metadata | checksum |
//! |---|---|---|---|---|
//! | [`Layout::GenA`] | `MAG&` 1 | git only | none | none |
//! | [`Layout::V1`] | `MAG!` 1 | 0.1.2 | i64, f64 | CRC-32C of `[12, end of records)` |
//! | [`Layout::V100`] | `MAG!` 100 | 0.1.5, 0.1.6 | none | CRC-32C of `[20, "BUF!")` |
//! | [`Layout::V200`] | `MAG!` 200 | 0.1.7 to 0.1.9 | none | CRC-32C of `[20, "BUF!")` |
//! | [`Layout::V300`] | `MAG!` 300 | 0.2.x | JSON | none |
//!
//! - [`parse`]: any layout to a [`MagFile`] of validated [`MagTensor`]s (absolute data ranges
//!   inside the file, no overlaps, unique keys, element counts that match shapes) and metadata
//!   in the zTensor attribute model. CRC-32C is verified unless [`ParseOptions`] says not to.
//! - [`MagWriter`]: writes version 1 or version 300, streaming tensor data.
//! - The dtype codes differ per layout; see the `dtype` module's tables.
//!
//! # Example
//!
//! ```
//! use zt_mag::{parse, MagWriter, ParseOptions, TensorSpec, WriteVersion};
//! use zt_formats::{DType, ElementType};
//! use zt_manifest::{Attributes, Value};
//!
//! # fn main() -> zt_container::Result<()> {
//! let mut meta = Attributes::new();
//! meta.insert("n_layers".into(), Value::from(12i64));
//! let spec = TensorSpec { name: "w".into(), element: ElementType::plain(DType::F32), shape: vec![2] };
//! let mut w = MagWriter::new(Vec::new(), WriteVersion::V1, meta.iter().map(|(k, v)| (k.as_str(), v)), &[spec])?;
//! w.write_tensor(&[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40])?;
//! let bytes = w.finish()?;
//!
//! let file = parse(&zt_container::Source::from_vec(bytes), ParseOptions::default())?;
//! assert_eq!(file.metadata["n_layers"], Value::Integer(12));
//! assert_eq!(file.tensors[0].shape, [2]);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

// Module graph (acyclic; no module uses an item defined in this file):
// layout, limits: leaves; dtype -> layout; json -> limits;
// read -> layout, limits, dtype, json; write -> layout, limits, dtype, json.
pub mod dtype;
mod json;
mod layout;
mod limits;
mod read;
mod write;

pub use layout::{is_mag_magic, Layout};
pub use limits::{default_listing_budget, MAX_KEY_LEN, MAX_METADATA_LEN, MAX_RANK};
pub use read::{parse, ChecksumStatus, MagFile, MagTensor, ParseOptions};
pub use write::{MagWriter, TensorSpec, WriteVersion, V300_ALIGN};
