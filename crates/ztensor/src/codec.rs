//! The zstd calls of the facade in one place, so that the `zstd` feature switches them as a
//! whole: with it, they are zt-formats' bounded codec; without it, reading or writing a zstd
//! component is [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) and everything else
//! works unchanged.

#[cfg(not(feature = "zstd"))]
use zt_container::Result;

#[cfg(feature = "zstd")]
pub(crate) use zt_formats::seekable::{zstd_seekable_decode_into, zstd_seekable_encode};
#[cfg(feature = "zstd")]
pub(crate) use zt_formats::{
    zstd_compress, zstd_decode_into, zstd_decompress_bounded, zstd_frame_content_size,
};

#[cfg(not(feature = "zstd"))]
fn without_zstd<T>() -> Result<T> {
    Err(zt_container::Error::unsupported(
        "zstd component: this build of ztensor has no zstd support (feature \"zstd\")",
    ))
}

/// Without zstd: decoding is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_decode_into(_src: &[u8], _dst: &mut [u8]) -> Result<()> {
    without_zstd()
}

/// Without zstd: decoding v2's seekable zstd is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_seekable_decode_into(_src: &[u8], _dst: &mut [u8]) -> Result<()> {
    without_zstd()
}

/// Without zstd: no frame is read, so no size is known.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_frame_content_size(_src: &[u8]) -> Option<u64> {
    None
}

/// Without zstd: decoding is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_decompress_bounded(_src: &[u8], _cap: u64) -> Result<Vec<u8>> {
    without_zstd()
}

/// Without zstd: compressing is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_compress(_data: &[u8], _level: i32) -> Result<Vec<u8>> {
    without_zstd()
}

/// Without zstd: encoding v2's seekable zstd is unsupported.
#[cfg(not(feature = "zstd"))]
pub(crate) fn zstd_seekable_encode(_data: &[u8], _level: i32) -> Result<Vec<u8>> {
    without_zstd()
}
