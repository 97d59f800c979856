//! The zTensor manifest as Rust types, encoded and decoded with minicbor.
//!
//! - [`Manifest`], [`Object`], [`Components`], [`Component`]: the v1 manifest (v1.1 and v1.2 share the layout;
//!   v1.1 spells some dtypes differently, which `zt-formats` maps). [`Manifest::decode`] is strict
//!   about structure (duplicate keys, trailing bytes, depth, required fields, major version) and
//!   lenient about content (unknown fields are skipped, names are kept as spelled).
//!   [`Manifest::encode`] is deterministic and matches the byte layout of real v1.2 files.
//!   An object's components are a map kept as a sorted vector ([`Components`]): objects
//!   have a few, files may have millions of objects.
//! - [`IndexEntry`], [`decode_index`], [`encode_index`]: the v0.1 index.
//! - [`ManifestV2`], [`decode_manifest_v2`]: the zTensor v2 manifest (ztensor 2.x), read with
//!   a strict deterministic-CBOR reader (shortest heads, sorted keys, no indefinite lengths,
//!   tags or trailing bytes, at most [`MAX_DEPTH_V2`] levels) and the v2 name rules;
//!   [`encode_manifest_v2`] writes one as deterministic CBOR, as ztensor 2.x does.
//! - [`Value`], [`Attributes`]: attribute values, every CBOR kind real files hold.
//! - [`DecodeLimits`]: the caps that keep hostile input from exhausting the stack or memory;
//!   [`ValueBudget`] counts the memory decoded attribute values take against one of them.
//!
//! # Example
//!
//! ```
//! use zt_manifest::{Component, DecodeLimits, Manifest, Object, Value};
//!
//! # fn main() -> Result<(), zt_manifest::Error> {
//! let mut m = Manifest { version: "1.2.0".into(), ..Default::default() };
//! m.attributes.insert("license".into(), Value::from("MIT"));
//! let mut w = Object { shape: vec![2, 3], format: "dense".into(), ..Default::default() };
//! w.components.insert(
//!     "data".into(),
//!     Component { dtype: "f32".into(), offset: 64, length: 24, ..Default::default() },
//! );
//! m.objects.insert("w".into(), w);
//!
//! let bytes = m.encode();
//! assert_eq!(Manifest::decode(&bytes, 0, DecodeLimits::default())?, m);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod cbor;
mod det;
mod encode;
mod index;
mod manifest;
mod shape;
mod v2;
mod v2_encode;
mod value;

pub use det::MAX_DEPTH_V2;
pub use index::{decode_index, encode_index, IndexEntry};
pub use manifest::{
    decode_objects, decode_value, decode_value_at, encode_value, Component, ComponentRef,
    Components, Manifest, ManifestHead, Object, ObjectRef, SpecVersion, WRITE_VERSION,
};
pub use shape::Shape;
pub use v2::{
    check_name, check_shard_name, decode_manifest_v2, shard_index, visit_manifest_v2, ManifestV2,
    ManifestV2Rest, ObjectV2, ObjectV2Ref, PartV2, PartV2Ref, ShardV2, MAX_NAME_LEN_V2,
    MAX_SHARD_NAME_LEN, MIN_OBJECT_ENTRY_V2,
};
pub use v2_encode::encode_manifest_v2;
pub use value::{Attributes, Value, ValueBudget, CBOR_INT_MAX, CBOR_INT_MIN};
pub use zt_container::{Error, ErrorKind, Result};

/// Caps on the manifest's structure, so hostile input cannot exhaust the stack or memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Deepest nesting of CBOR arrays, maps and tags, counting from the root.
    pub max_depth: usize,
    /// Most dimensions a shape may have.
    pub max_rank: usize,
    /// Most memory the attribute values of one manifest may take once decoded, counted as
    /// they are built ([`ValueBudget`]): a one-byte CBOR integer is a 32-byte [`Value`].
    pub max_value_bytes: u64,
}

/// Default [`DecodeLimits::max_depth`]: deep enough for any real attribute tree.
pub const DEFAULT_MAX_DEPTH: usize = 128;
/// Default [`DecodeLimits::max_rank`]: NumPy's and PyTorch's own limit.
pub const DEFAULT_MAX_RANK: usize = 64;
/// Default [`DecodeLimits::max_value_bytes`]: 256 MiB, a hundred times the attributes of
/// any file we have met (a GGUF vocabulary of 256,000 tokens takes about 30 MB).
pub const DEFAULT_MAX_VALUE_BYTES: u64 = 256 << 20;

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_depth: DEFAULT_MAX_DEPTH,
            max_rank: DEFAULT_MAX_RANK,
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
        }
    }
}
