//! Reading files that live in an object store or on an HTTP server (feature `remote`):
//! `s3://`, `gs://`, `az://`, `http://`, `https://` and `hf://` URLs, through the
//! `object_store` crate with ranged reads, made blocking by a private tokio runtime.
//!
//! - [`store`]: URL to store (credentials from the environment), the runtime, URLs as
//!   messages show them (never with credentials).
//! - [`hub`]: `hf://owner/name/path` (a file in a Hugging Face Hub repository) to the
//!   Hub's HTTPS URL of that file, and the user's token for it; [`hub_model_url`]: the model
//!   file of a repository named without a file.
//! - [`object`]: [`RemoteObject`], a zt-container [`RangeRead`](zt_container::RangeRead) with
//!   the object's head and tail cached; what each step costs is documented there and in
//!   docs/remote.md.
//! - [`open_url`] / [`OpenOptions::open_url`]: a [`Reader`] over a URL. Everything above
//!   the source (listing, validation, decoding, digests, slices) is the local code path.
//! - [`upload()`]: a finished local file put at a URL (multipart when large); the writers
//!   themselves write local files only.
//!
//! Do not call these from inside an async runtime's worker thread: they block.

pub mod hub;
pub mod object;
pub mod store;
pub mod upload;

use std::sync::Arc;

use zt_container::{Error, Result, Source};

pub use object::{RemoteObject, RemoteStats};
pub use store::is_url;
pub use upload::{exists, upload};

use crate::open::OpenOptions;
use crate::reader::Reader;

/// Opens the file at `url` (`s3://bucket/key`, `gs://...`, `az://...`, `https://host/path`)
/// with default options.
///
/// ```no_run
/// # fn main() -> ztensor::Result<()> {
/// let r = ztensor::open_url("s3://bucket/model.zt")?; // AWS_* from the environment
/// let w = r.read::<f32>("w")?; // one ranged request
/// # Ok(())
/// # }
/// ```
pub fn open_url(url: &str) -> Result<Reader> {
    OpenOptions::new().open_url(url)
}

impl OpenOptions {
    /// Opens the file at `url`: one request for its head (and size), then as
    /// [`OpenOptions::open_source`] over ranged reads (a `.zt` footer and manifest: the
    /// tail, and one more request if the manifest is larger). A zTensor v2 file with shards
    /// opens each shard by URL beside it (`<stem>-<name>.zt`, the original's convention),
    /// at open, as the original does: one request for each shard's head, and its tail.
    pub fn open_url(&self, url: &str) -> Result<Reader> {
        let (reader, _) = self.open_url_counted(url)?;
        Ok(reader)
    }

    /// As [`OpenOptions::open_url`], with the object, whose [`RemoteObject::stats`] tell the
    /// requests and bytes every later read costs.
    pub fn open_url_counted(&self, url: &str) -> Result<(Reader, Arc<RemoteObject>)> {
        let parsed = store::parse(url)?;
        let shown = store::redacted(&parsed);
        let located = |e: Error| e.in_file(std::path::Path::new(&shown));
        let (store, path) = store::connect(&parsed)?;
        let object = Arc::new(
            RemoteObject::open(
                store,
                path,
                shown.clone(),
                self.requests_in_flight_or_default(),
            )
            .map_err(located)?,
        );
        let source = object.source().map_err(located)?;
        // A file another names (a v2 shard, ONNX external data, a Paddle variable's file) has
        // its path made in the folder of the root's (`shown`, a path to that code): its
        // path from that folder, in place of the root's name in the real URL, is where it is.
        let folder = std::path::Path::new(&shown).parent();
        let open_shard = |p: &std::path::Path| -> Result<Source> {
            let relative = folder
                .and_then(|f| p.strip_prefix(f).ok())
                .and_then(|r| r.to_str())
                .filter(|r| !r.is_empty())
                .ok_or_else(|| {
                    Error::invalid(format!("{} is not in the folder of {shown}", p.display()))
                })?;
            let url = store::url_beside(&parsed, relative)?;
            let (store, path) = store::connect(&url)?;
            let shard = RemoteObject::open(
                store,
                path,
                store::redacted(&url),
                self.requests_in_flight_or_default(),
            )?;
            Arc::new(shard).source()
        };
        let reader = self
            .open_at(
                source,
                Some(std::path::Path::new(&shown)),
                Some(&open_shard),
            )
            .map_err(located)?;
        Ok((reader, object))
    }
}

/// For a `hf://` URL of a repository or a folder in one (`hf://owner/name`,
/// `hf://owner/name@rev/unet/`), the URL of the model file in it: the first of
/// [`MODEL_FILES`](hub::MODEL_FILES) the Hub has there, asked by one `HEAD` request each in
/// turn. `None` for a URL that names a file; `NotFound` when the repository has none of them.
pub fn hub_model_url(hf_url: &str) -> Result<Option<String>> {
    let hub = hub::endpoint();
    let not_a_file = match hub::resolve(hf_url, &hub) {
        Ok(_) => return Ok(None),
        Err(e) => e,
    };
    let folder = hf_url.trim_end_matches('/');
    // Not a file: a folder only if a file in it would be a URL (else the URL's own error).
    hub::resolve(&format!("{folder}/{}", hub::MODEL_FILES[0]), &hub).map_err(|_| not_a_file)?;
    for file in hub::MODEL_FILES {
        let candidate = format!("{folder}/{file}");
        if upload::exists_at(&hub::resolve(&candidate, &hub)?)? {
            return Ok(Some(candidate));
        }
    }
    // `hf://gpt2/model.safetensors`: an old id without its owner, taken as owner/name.
    let last = folder.rsplit('/').next().unwrap_or_default();
    let looks_like_a_file = last.contains('.') && !last.contains('@');
    let hint = if looks_like_a_file {
        format!(" ({last:?} was taken as a folder: a repository id is owner/name)")
    } else {
        String::new()
    };
    Err(Error::not_found(format!(
        "{folder} holds none of {}: name the file (hf://owner/name/path/in/repo){hint}",
        hub::MODEL_FILES.join(", ")
    )))
}
