//! From a URL to an `object_store` store and the path in it, and the private tokio runtime
//! that turns its requests into blocking calls.
//!
//! - [`connect`]: `s3://`, `gs://`, `az://` (and `abfs://`, `adl://`), `http://`, `https://`;
//!   credentials and settings from each store's usual environment variables (`AWS_*`,
//!   `GOOGLE_*`, `AZURE_*`) through object_store's `from_env` builders, and the cloud SDKs'
//!   config files where object_store reads them. An `http(s)://` URL's query goes with every
//!   request for its object (a presigned URL's signature).
//! - [`runtime`]: one multi-threaded runtime (two workers) for the process, started on first
//!   use.
//! - [`redacted`]: a URL as it may appear in a message: no user, password, query or fragment
//!   (a presigned URL carries its credentials in the query).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::path::Path as StorePath;
use object_store::{ClientConfigKey, ClientOptions, ObjectStore, ObjectStoreScheme, RetryConfig};
use url::Url;
use zt_container::{Error, Result};

/// Whether `s` is a URL this module opens (by its scheme), rather than a local path.
pub fn is_url(s: &str) -> bool {
    [
        "s3://", "gs://", "az://", "abfs://", "abfss://", "adl://", "azure://", "http://",
        "https://", "hf://",
    ]
    .iter()
    .any(|p| s.len() > p.len() && s[..p.len()].eq_ignore_ascii_case(p))
}

/// `s` as a URL to read from: a `hf://` URL becomes the Hub's HTTPS URL of its file
/// ([`hub::resolve`](super::hub::resolve)), any other is parsed as it is.
pub fn parse(s: &str) -> Result<Url> {
    if super::hub::is_hub_url(s) {
        return super::hub::resolve(s, &super::hub::endpoint());
    }
    Url::parse(s).map_err(|e| Error::argument(format!("not a URL ({e})")))
}

/// The URL without anything secret: scheme, host, port and path only.
pub fn redacted(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// The URL of the file at `relative` (a `/`-separated relative path, already checked to stay
/// in its folder) in the folder of the file at `url`: its components put in place of that
/// file's name, each percent-encoded as it is spelled (a `%2e%2e` in a name stays a name, never
/// a `..`; a `?` or `#` stays in the name; `.` and `..` components are passed over, never
/// followed), with no query or fragment (a presigned URL's signature signs its own object
/// only).
///
/// ```
/// # use ztensor::remote::store::url_beside;
/// let index = url::Url::parse("https://h/m/x.index.json?sig=1").unwrap();
/// assert_eq!(url_beside(&index, "part/a b.zt")?.as_str(), "https://h/m/part/a%20b.zt");
/// # Ok::<(), ztensor::Error>(())
/// ```
pub fn url_beside(url: &Url, relative: &str) -> Result<Url> {
    let mut beside = url.clone();
    beside.set_query(None);
    beside.set_fragment(None);
    beside
        .path_segments_mut()
        .map_err(|()| {
            Error::argument(format!(
                "{}: a URL with no path to find {relative:?} beside",
                redacted(url)
            ))
        })?
        .pop()
        .extend(relative.split('/'));
    Ok(beside)
}

/// An object_store error as one line: its first line, at most 300 characters (a server's
/// error page can follow the status in the message; a message is one line).
///
/// A store that found no credentials in the environment asks the cloud's instance metadata
/// service (169.254.169.254) for some; off a cloud machine that fails with a confusing
/// request error, which is said for what it means instead.
pub fn one_line(e: &object_store::Error) -> String {
    let text = e.to_string();
    if text.contains("169.254.169.254") || text.contains("metadata.google.internal") {
        return "no credentials found: none are set in the environment (for S3: \
                AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_WEB_IDENTITY_TOKEN_FILE; \
                for GCS: GOOGLE_SERVICE_ACCOUNT; for Azure: AZURE_STORAGE_ACCOUNT_KEY), and \
                the cloud's instance metadata service gave none; for a public S3 bucket \
                set AWS_SKIP_SIGNATURE=true"
            .to_owned();
    }
    let first = text.lines().next().unwrap_or_default().trim_end();
    let mut cut: String = first.chars().take(300).collect();
    if cut.len() < first.len() {
        cut.push_str("...");
    }
    cut
}

/// The runtime every remote request runs on.
pub fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("ztensor-remote")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            Error::io(
                std::io::Error::other(e.clone()),
                "starting the remote runtime",
            )
        })
}

/// How long one request may take, and how long to wait for a connection.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// object_store's own retries: server errors (5xx), throttling and failed connections are
/// retried with backoff, a few times within a bounded time.
fn retry() -> RetryConfig {
    RetryConfig {
        max_retries: 4,
        retry_timeout: Duration::from_secs(60),
        ..Default::default()
    }
}

/// The store `url` lives in and its path there.
pub fn connect(url: &Url) -> Result<(Arc<dyn ObjectStore>, StorePath)> {
    let shown = redacted(url);
    let (scheme, path) = ObjectStoreScheme::parse(url)
        .map_err(|e| Error::argument(format!("{shown}: not a URL we can open ({e})")))?;
    // The builders' `from_env` put what the environment says (AWS_ALLOW_HTTP, proxies, ...)
    // into their client options: only the timeouts are added, key by key, so none of it is
    // replaced.
    let timeouts = [
        (ClientConfigKey::Timeout, REQUEST_TIMEOUT),
        (ClientConfigKey::ConnectTimeout, CONNECT_TIMEOUT),
    ];
    let secs = |d: Duration| format!("{}s", d.as_secs());
    let built: std::result::Result<Arc<dyn ObjectStore>, object_store::Error> = match scheme {
        ObjectStoreScheme::AmazonS3 => {
            let mut b = AmazonS3Builder::from_env()
                .with_url(url.as_str())
                .with_retry(retry());
            for (k, d) in timeouts {
                b = b.with_config(AmazonS3ConfigKey::Client(k), secs(d));
            }
            b.build().map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            let mut b = GoogleCloudStorageBuilder::from_env()
                .with_url(url.as_str())
                .with_retry(retry());
            for (k, d) in timeouts {
                b = b.with_config(GoogleConfigKey::Client(k), secs(d));
            }
            b.build().map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        }
        ObjectStoreScheme::MicrosoftAzure => {
            let mut b = MicrosoftAzureBuilder::from_env()
                .with_url(url.as_str())
                .with_retry(retry());
            for (k, d) in timeouts {
                b = b.with_config(AzureConfigKey::Client(k), secs(d));
            }
            b.build().map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        }
        ObjectStoreScheme::Http => {
            // The store's base: the origin, and the URL's query, which object_store keeps on
            // every request it makes from that base (a presigned URL's signature is its query).
            let mut base = Url::parse(&url.origin().ascii_serialization())
                .map_err(|e| Error::argument(format!("{shown}: not a URL we can open ({e})")))?;
            base.set_query(url.query());
            let mut client = ClientOptions::new()
                .with_timeout(REQUEST_TIMEOUT)
                .with_connect_timeout(CONNECT_TIMEOUT)
                // The user named a plain http:// URL: that is what they asked for.
                .with_allow_http(true);
            // A gated or private file on the Hugging Face Hub: the user's token, to the
            // Hub only (the client drops it on a redirect to another host).
            if let Some(token) = super::hub::token_for(url) {
                let mut value = http::HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| Error::argument("the Hugging Face token is not a header value"))?;
                value.set_sensitive(true);
                let mut headers = http::HeaderMap::new();
                headers.insert(http::header::AUTHORIZATION, value);
                client = client.with_default_headers(headers);
            }
            object_store::http::HttpBuilder::new()
                .with_url(base.as_str())
                .with_client_options(client)
                .with_retry(retry())
                .build()
                .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        }
        _ => {
            return Err(Error::argument(format!(
                "{shown}: only s3://, gs://, az://, http:// and https:// URLs are opened"
            )))
        }
    };
    // object_store's messages name the option or variable that is wrong, never its value.
    let store = built.map_err(|e| Error::argument(format!("{shown}: {e}")))?;
    Ok((store, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_metadata_request_says_no_credentials_were_found() {
        let e = object_store::Error::Generic {
            store: "S3",
            source: "Error performing token request: HTTP status client error (403 \
                     Forbidden) for url (http://169.254.169.254/latest/api/token)"
                .into(),
        };
        let m = one_line(&e);
        assert!(m.starts_with("no credentials found"), "{m}");
        assert!(m.contains("AWS_SKIP_SIGNATURE=true"), "{m}");
        let other = object_store::Error::Generic {
            store: "S3",
            source: "connection refused\n<html>...".into(),
        };
        assert_eq!(one_line(&other), "Generic S3 error: connection refused");
    }

    #[test]
    fn a_file_beside_a_url_stays_below_its_folder_whatever_its_name_spells() {
        let index = Url::parse("https://h/m/set/x.index.json?sig=1#f").unwrap();
        let url = |file: &str| url_beside(&index, file).unwrap().to_string();
        assert_eq!(url("a.safetensors"), "https://h/m/set/a.safetensors");
        assert_eq!(url("part/a b.zt"), "https://h/m/set/part/a%20b.zt");
        // Spelled as a parent in a URL, but a plain name in an index: kept a plain name.
        assert_eq!(url("%2e%2e/a"), "https://h/m/set/%252e%252e/a");
        assert_eq!(url("a?b#c"), "https://h/m/set/a%3Fb%23c");
        // `.` and `..` components (refused before they get here) are passed over, never
        // followed up.
        assert_eq!(url("./w.bin"), "https://h/m/set/w.bin");
        assert_eq!(url("a/../../b"), "https://h/m/set/a/b");
    }
}
