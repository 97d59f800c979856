//! Writing to a URL: a finished local file uploaded whole.
//!
//! Our writers write a local file (a temporary beside the target, then a rename); putting it
//! in a store is one more step, [`upload`]. A file up to [`PART_LEN`] is one PUT; a larger
//! one is a multipart upload of [`PART_LEN`] parts, at most [`PARTS_IN_FLIGHT`] at once,
//! read from the file as they go (memory: the parts in flight, never the file). Stores make
//! an object visible only when its upload completes: a failed or killed upload leaves the
//! old object as it was (a failed multipart upload is aborted; one killed with the process
//! leaves parts the store's lifecycle rules remove).

use std::io::Read;
use std::path::Path;

use object_store::{ObjectStore, PutPayload, WriteMultipart};
use zt_container::{Error, Result};

use super::store::{connect, one_line, redacted, runtime};

/// Bytes of one PUT, and of each part of a multipart upload (S3's parts must be at least
/// 5 MiB, all but the last).
pub const PART_LEN: usize = 16 << 20;
/// Parts of one upload in flight at once.
pub const PARTS_IN_FLIGHT: usize = 4;

/// Uploads the file at `local` to `url` (`s3://bucket/key`, `gs://...`, `az://...`, or an
/// `http(s)://` server that takes PUT), replacing what is there; returns the bytes sent.
///
/// ```no_run
/// # fn main() -> ztensor::Result<()> {
/// ztensor::remote::upload("model.zt".as_ref(), "s3://bucket/models/model.zt")?;
/// # Ok(())
/// # }
/// ```
pub fn upload(local: &Path, url: &str) -> Result<u64> {
    let parsed = target(url)?;
    let shown = redacted(&parsed);
    let (store, path) = connect(&parsed)?;
    let failed = |e: object_store::Error| {
        Error::io(
            std::io::Error::other(one_line(&e)),
            format!("uploading to {shown}"),
        )
    };
    let mut file = std::fs::File::open(local).map_err(|e| Error::io(e, "").in_file(local))?;
    let len = file
        .metadata()
        .map_err(|e| Error::io(e, "").in_file(local))?
        .len();
    let rt = runtime()?;
    let read_part = |file: &mut std::fs::File| -> Result<Vec<u8>> {
        let mut part = Vec::with_capacity(PART_LEN);
        file.by_ref()
            .take(PART_LEN as u64)
            .read_to_end(&mut part)
            .map_err(|e| Error::io(e, "").in_file(local))?;
        Ok(part)
    };
    if len <= PART_LEN as u64 {
        let bytes = read_part(&mut file)?;
        rt.block_on(store.put(&path, PutPayload::from(bytes)))
            .map_err(failed)?;
        return Ok(len);
    }
    let started = rt.block_on(store.put_multipart(&path)).map_err(failed)?;
    let mut parts = WriteMultipart::new_with_chunk_size(started, PART_LEN);
    let mut sent = 0u64;
    let streamed: Result<()> = (|| {
        loop {
            rt.block_on(parts.wait_for_capacity(PARTS_IN_FLIGHT))
                .map_err(failed)?;
            let part = read_part(&mut file)?;
            if part.is_empty() {
                return Ok(());
            }
            sent += part.len() as u64;
            // Parts are started as tasks on the runtime.
            let _inside = rt.enter();
            parts.put(part.into());
        }
    })();
    match streamed {
        Ok(()) => {
            rt.block_on(parts.finish()).map_err(failed)?;
            Ok(sent)
        }
        Err(e) => {
            // The parts sent so far are removed; the object is untouched.
            let _ = rt.block_on(parts.abort());
            Err(e)
        }
    }
}

/// Whether an object exists at `url` (one HEAD request).
pub fn exists(url: &str) -> Result<bool> {
    exists_at(&target(url)?)
}

/// As [`exists`], for a parsed URL of any store (a Hub file's `https://` URL included).
pub(crate) fn exists_at(parsed: &url::Url) -> Result<bool> {
    let shown = redacted(parsed);
    let (store, path) = connect(parsed)?;
    match runtime()?.block_on(store.head(&path)) {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(Error::io(std::io::Error::other(one_line(&e)), shown)),
    }
}

/// `url` parsed as a place to write to. A `hf://` URL is refused: the Hub takes files by
/// commits through its API, not by `PUT`.
fn target(url: &str) -> Result<url::Url> {
    if super::hub::is_hub_url(url) {
        return Err(Error::argument(format!(
            "{url}: hf:// URLs are read, not written; write a local file and upload it with \
             huggingface_hub (`hf upload`)"
        )));
    }
    url::Url::parse(url).map_err(|e| Error::argument(format!("not a URL ({e})")))
}
