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

use std::fmt;

pub mod dtype;
mod json;
mod read;
mod write;

pub use read::{parse, ChecksumStatus, MagFile, MagTensor, ParseOptions, MAX_KEY_LEN, MAX_RANK};
pub use write::{MagWriter, TensorSpec, WriteVersion, V300_ALIGN};

/// The `.mag` layouts magnetron has shipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `MAG&` version 1 (git only, never released).
    GenA,
    /// `MAG!` version 1 (magnetron 0.1.2).
    V1,
    /// `MAG!` version 100 (magnetron 0.1.5, 0.1.6).
    V100,
    /// `MAG!` version 200 (magnetron 0.1.7 to 0.1.9).
    V200,
    /// `MAG!` version 300 (magnetron 0.2.x).
    V300,
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::GenA => "MAG& version 1",
            Layout::V1 => "version 1",
            Layout::V100 => "version 100",
            Layout::V200 => "version 200",
            Layout::V300 => "version 300",
        })
    }
}

/// Whether the first four bytes of a file are a `.mag` magic (`MAG!` or `MAG&`).
pub fn is_mag_magic(head: &[u8; 4]) -> bool {
    head == b"MAG!" || head == b"MAG&"
}
