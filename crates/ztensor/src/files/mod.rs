//! One module per kind of file: each turns a file's bytes into the shared
//! [`Listing`](crate::listing::Listing) and knows nothing of the reader, of the other kinds or
//! of how objects are read. [`crate::open`] alone chooses among them.
//!
//! A new kind of file is a new module here (behind its cargo feature), a rule in
//! [`crate::sniff`] and an arm in [`crate::open`]'s dispatch: docs/ARCHITECTURE.md has the
//! checklist.

#[cfg(feature = "gguf")]
pub(crate) mod gguf;
#[cfg(feature = "hdf5")]
pub(crate) mod hdf5;
pub(crate) mod mag;
#[cfg(feature = "numpy")]
pub(crate) mod npy;
#[cfg(feature = "onnx")]
pub(crate) mod onnx;
#[cfg(feature = "safetensors")]
pub(crate) mod safetensors;
#[cfg(feature = "torch")]
pub(crate) mod torch;
pub(crate) mod zt_v0_1;
pub(crate) mod zt_v1;
pub(crate) mod zt_v1_0;
pub(crate) mod zt_v2;
