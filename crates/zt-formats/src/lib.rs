//! zTensor's meaning layer: storage and logical types, object formats, zstd and digests.
//!
//! Where `zt-manifest` keeps a file's spellings, this crate says what they mean:
//!
//! - [`DType`], [`LogicalType`], [`ElementType`]: the 13 storage types, the open set of logical
//!   types (FP8, complex, unknown), and how they must fit ([`ElementType::resolve`]);
//!   [`element_count`] and [`byte_size`] do the checked size arithmetic.
//! - [`Element`]: Rust types that elements are read into (`f32`, `half::bf16`, [`Complex`],
//!   the FP8 newtypes in [`fp8`]).
//! - [`Format`], [`check_layout`]: the object formats, their components and size rules.
//! - [`check_csr`], [`check_csr_sorted`], [`check_coo`], [`csr_to_dense`], [`coo_to_dense`]: the
//!   sparse rules that need index data, and dense conversion; [`QuantParams`]:
//!   `quantized_group` packing.
//! - [`Encoding`]; [`zstd_decode_into`], [`zstd_decompress_exact`], [`zstd_frame_content_size`]:
//!   decompression bounded by the declared size ([`zstd_part_into`], [`zstd_part_then`],
//!   [`zstd_stream_reader`], [`zstd_reader`]: a span of a stream, its front); the foreign
//!   encodings' decoders ([`varints_decode_into`], [`varint_codes_decode_into`],
//!   [`tagged_decode_into`], [`latin1_decode_into`], [`pieces_decode_into`], [`place_box`],
//!   [`densify_into`] for TensorFlow Lite's sparse tensors), and [`read_varint`], one protobuf
//!   varint (for them and for the protobuf readers of the crates above).
//! - [`seekable`]: zTensor v2's `zt.zstd-seekable/1` (seek table checked before decoding).
//! - [`Digest`], [`DigestAlgorithm`]: `sha256:`, `crc32c:` and `xxh3:` digests.
//! - [`v2`]: zTensor v2's dtypes, logical types and layouts mapped onto this model.
//! - [`ggml`]: ggml's tensor types as GGUF numbers them, and dequantization of block types.
//! - [`szip`], [`lzf`] and [`lookup3`]: the decoders of HDF5's szip filter and of h5py's LZF
//!   filter, and HDF5's metadata checksum.
//!
//! # Features
//!
//! Both are on by default; without them the crate is the vocabulary alone (types, formats,
//! layouts, quantization, sparse checks, FP8, [`Encoding`], and [`Digest`] as a parsed value),
//! with no codec dependencies, for crates such as `zt-mag` that need only that.
//!
//! - `zstd`: the zstd codec (`zstd_*` functions, [`ZSTD_PARALLEL_MIN`]); brings in the `zstd`
//!   crate.
//! - `digests`: computing and checking digests ([`DigestAlgorithm::compute`],
//!   [`Digest::verify`]); brings in `sha2` and `crc32c`.
//!
//! # Example
//!
//! ```
//! use zt_formats::{byte_size, element_count, fp8::Fp8Format, Digest, ElementType};
//!
//! # fn main() -> Result<(), zt_formats::Error> {
//! let t = ElementType::resolve("u8", Some("f8_e4m3fn"))?;
//! assert_eq!(byte_size(element_count(&[2, 3])?, &t)?, 6);
//! assert_eq!(Fp8Format::E4M3Fn.decode(0x38), 1.0);
//!
//! let d = Digest::parse("crc32c:0xE3069283")?;
//! # #[cfg(feature = "digests")]
//! d.verify(b"123456789")?;
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod compress;
mod digest;
mod dtype;
mod element;
mod format;
pub mod fp8;
pub mod ggml;
mod layout;
pub mod lookup3;
pub mod lzf;
mod quant;
pub mod seekable;
mod sparse;
mod sparsity;
pub mod szip;
pub mod v2;

pub use compress::{
    available_threads, bit_planes_decode_into, bit_planes_len, latin1_decode_into,
    pieces_decode_into, place_box, read_varint, tagged_decode_into, tile, varint_codes_decode_into,
    varints_decode_into, BoxTable, Chunk, ChunkTable, Encoding, Piece, StreamSpan, Tiling,
    DEFAULT_MAX_DECOMPRESSED, MAX_BOXES,
};
#[cfg(feature = "zstd")]
pub use compress::{
    zstd_compress, zstd_compress_with_threads, zstd_decode_into, zstd_decode_with_dict_into,
    zstd_decompress_bounded, zstd_decompress_exact, zstd_frame_content_size, zstd_part_into,
    zstd_part_then, zstd_reader, zstd_stream_reader, ZSTD_PARALLEL_MIN,
};
#[cfg(feature = "digests")]
pub use digest::{xxh3_64, Hasher};
pub use digest::{Digest, DigestAlgorithm};
pub use dtype::{byte_size, element_count, packed_codes, DType, ElementType, LogicalType};
pub use element::{element_matches, Complex, Element};
pub use format::Format;
pub use layout::{check_layout, dense_len, ComponentLayout};
pub use quant::QuantParams;
pub use sparse::{check_coo, check_csr, check_csr_sorted, coo_to_dense, csr_to_dense, Accumulate};
pub use sparsity::{densify_into, Level, SparseLevels, MAX_SPARSE_LEVELS};
pub use zt_container::{Error, ErrorKind, Result};
