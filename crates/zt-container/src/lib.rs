//! The zTensor container layer: magic, footer, 64-byte alignment and bounds-checked blob I/O.
//!
//! This crate knows the outer shape of a `.zt` file and nothing about CBOR:
//!
//! ```text
//! "ZTEN1000" | blob | 0-pad to 64 | blob | ... | manifest | u64 LE manifest size | "ZTEN1000"
//! "ZTEN0001" | blob | 0-pad to 64 | blob | ... | index    | u64 LE index size
//! 89 "ZT2" 0D 0A 1A 0A | blobs at 4096 boundaries | manifest | 40-byte footer (v2)
//! ```
//!
//! - [`layout`]: the constants (magics, alignment, the 1 GiB manifest cap).
//! - [`Source`]: where bytes come from (memory map, owned buffer, positional reads), with one
//!   bounds-checked read call.
//! - [`Container`]: checks header and tail, finds the manifest, approves blob ranges
//!   ([`check_blob_range`], [`check_overlaps`]).
//! - [`ContainerV2`]: the same for zTensor v2 (ztensor 2.x): its footer ([`FooterV2`]), data
//!   shards, and its blob rules ([`check_blob_range_v2`]).
//! - [`BlobWriter`]: writes aligned blobs and the tail to any `io::Write`; [`BlobWriterV2`]
//!   the same for v2 (any power-of-two alignment of 4096 or more, manifest blob, footer).
//! - [`AtomicFile`]: crash-safe replacement of a file (temporary file, then rename).
//! - [`Error`]: the error type every crate of the workspace reports through.
//! - `internal`: hints the crates above share (hidden from the docs; not a stable API).
//!
//! # Example
//!
//! ```
//! use zt_container::{BlobWriter, Container, ContainerVersion, Source};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut w = BlobWriter::new(Vec::new(), ContainerVersion::V1)?;
//! let offset = w.append_blob(&1.5f32.to_le_bytes())?;
//! let bytes = w.finish(b"\xa0")?; // the manifest: an empty CBOR map, as far as we care here
//!
//! let file = Container::parse(Source::from_vec(bytes))?;
//! assert_eq!(offset, 64);
//! assert_eq!(&*file.blob(offset, 4)?, &1.5f32.to_le_bytes());
//! assert_eq!(&*file.manifest_bytes()?, b"\xa0");
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod atomic;
mod error;
pub mod layout;
mod memory;
mod read;
mod read_v2;
mod source;
pub mod temp;
mod write;
mod write_v2;

pub use atomic::{make_room_for_open_files, AtomicFile, Durability, HOLE_MIN};
pub use error::{Error, ErrorKind, Result};
pub use temp::{cleanup, interrupt};

/// What the unit tests of more than one module use.
#[cfg(all(test, unix))]
pub(crate) mod test_support {
    /// Makes a FIFO (a named pipe) at `path`.
    pub fn make_fifo(path: &std::path::Path) {
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path it is given.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    }
}

/// Shared with the crates of this workspace, not part of the stable API.
#[doc(hidden)]
pub mod internal {
    pub use crate::memory::{
        permute_in_place, physical_memory, prefer_huge_pages, try_filled_vec, try_with_capacity,
        try_zeroed_vec, MemoryBudget, SpareCapacity,
    };
}
pub use read::{check_blob_range, check_overlaps, BlobRange, Container, ContainerVersion};
pub use read_v2::{check_blob_range_v2, ContainerV2, FooterV2};
pub use source::{Map, RangeRead, Source};
pub use write::BlobWriter;
pub use write_v2::{write_zeros, BlobWriterV2, Padding};
