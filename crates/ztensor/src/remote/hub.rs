//! `hf://` URLs: a file in a Hugging Face Hub repository, read over HTTPS by ranged requests.
//!
//! - [`resolve`]: `hf://owner/name[@revision]/path/in/repo` (and `hf://datasets/...`,
//!   `hf://spaces/...`, as `huggingface_hub`'s file system spells them) to the Hub's
//!   `/resolve/` URL of that file, under `HF_ENDPOINT` (default `https://huggingface.co`).
//!   The Hub answers a large file's URL with a redirect to its content store, which the HTTP
//!   client follows, ranges and all.
//! - [`MODEL_FILES`]: what a repository named without a file stands for, best first
//!   ([`hub_model_url`](super::hub_model_url) asks the Hub for each in turn).
//! - [`token`]: the user's access token, found where `huggingface_hub` looks (`HF_TOKEN`, then
//!   the file at `HF_TOKEN_PATH`, `$HF_HOME/token` or `~/.cache/huggingface/token`); sent as a
//!   bearer token to the endpoint's own origin only (the client drops it on a redirect to
//!   another host), for gated and private repositories.
//!
//! No Hub API is called: a URL names a file, or a folder whose model file has one of the
//! usual names. A repository id is `owner/name`; the Hub's old
//! ids without an owner (`gpt2`) now redirect from `openai-community/gpt2` and the like.

use url::Url;
use zt_container::{Error, Result};

/// The Hub a `hf://` URL resolves against when `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Whether `s` is a `hf://` URL.
pub fn is_hub_url(s: &str) -> bool {
    s.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("hf://"))
}

/// The endpoint `hf://` URLs resolve against: `HF_ENDPOINT`, else [`DEFAULT_ENDPOINT`].
pub fn endpoint() -> String {
    std::env::var("HF_ENDPOINT")
        .ok()
        .map(|e| e.trim().trim_end_matches('/').to_owned())
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned())
}

/// The HTTPS URL of the file a `hf://` URL names, under `endpoint`.
///
/// ```
/// # use ztensor::remote::hub::resolve;
/// let hub = "https://huggingface.co";
/// let url = resolve("hf://org/model/model.safetensors", hub)?;
/// assert_eq!(url.path(), "/org/model/resolve/main/model.safetensors");
/// let url = resolve("hf://datasets/org/data@v1.0/train/part.npz", hub)?;
/// assert_eq!(url.path(), "/datasets/org/data/resolve/v1.0/train/part.npz");
/// let url = resolve("hf://org/model@refs/pr/3/model.safetensors", hub)?;
/// assert_eq!(url.path(), "/org/model/resolve/refs%2Fpr%2F3/model.safetensors");
/// assert_eq!(url.host_str(), Some("huggingface.co"));
/// assert!(resolve("hf://org/model", hub).is_err()); // names no file
/// # Ok::<(), ztensor::Error>(())
/// ```
pub fn resolve(hf_url: &str, endpoint: &str) -> Result<Url> {
    let usage = |what: &str| {
        Error::argument(format!(
            "{what}; a hf:// URL is hf://owner/name[@revision]/path/in/repo \
             (datasets and spaces: hf://datasets/owner/name/..., hf://spaces/owner/name/...)"
        ))
    };
    let rest = hf_url
        .get(5..)
        .filter(|_| is_hub_url(hf_url))
        .ok_or_else(|| usage("not a hf:// URL"))?;
    if rest.contains(['?', '#']) {
        return Err(usage("a query or fragment has no meaning here"));
    }
    let mut parts = rest.split('/');
    let mut first = parts.next().unwrap_or_default();
    let kind = match first {
        "datasets" | "spaces" | "models" => {
            let kind = first;
            first = parts.next().unwrap_or_default();
            Some(kind).filter(|k| *k != "models")
        }
        _ => None,
    };
    let owner = first;
    let name_and_revision = parts.next().unwrap_or_default();
    let (name, mut revision) = match name_and_revision.split_once('@') {
        Some((name, revision)) => (name, revision.to_owned()),
        None => (name_and_revision, "main".to_owned()),
    };
    // A pull request's or a conversion's ref has slashes of its own: refs/pr/3.
    let mut path: Vec<&str> = parts.collect();
    if revision == "refs" && matches!(path.first(), Some(&"pr") | Some(&"convert")) {
        let taken: Vec<&str> = path.drain(..2.min(path.len())).collect();
        revision = std::iter::once("refs")
            .chain(taken)
            .collect::<Vec<_>>()
            .join("%2F");
    }
    let valid = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains(['\\', '%', ' ']);
    if !valid(owner) || !valid(name) {
        return Err(usage("the repository is not owner/name"));
    }
    if revision.is_empty() || revision.contains(['\\', ' ']) {
        return Err(usage("the revision after @ is empty or malformed"));
    }
    if path.is_empty() || path.iter().any(|s| s.is_empty() || *s == "." || *s == "..") {
        return Err(usage("it names no file in the repository"));
    }
    let mut url = Url::parse(endpoint)
        .map_err(|e| Error::argument(format!("HF_ENDPOINT {endpoint:?} is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::argument(format!(
            "HF_ENDPOINT {endpoint:?} is not an http(s) URL"
        )));
    }
    let mut text = url.as_str().trim_end_matches('/').to_owned();
    for segment in kind
        .into_iter()
        .chain([owner, name, "resolve", revision.as_str()])
    {
        text.push('/');
        text.push_str(segment);
    }
    for segment in path {
        text.push('/');
        text.push_str(segment);
    }
    url = Url::parse(&text).map_err(|e| usage(&format!("it makes no URL ({e})")))?;
    Ok(url)
}

/// The files looked for in a repository (or a folder in one) named without a file, best
/// first: safetensors before PyTorch's pickles, as transformers' and diffusers' loaders
/// prefer them, an index before a single file.
pub const MODEL_FILES: [&str; 6] = [
    "model.safetensors.index.json",
    "model.safetensors",
    "diffusion_pytorch_model.safetensors.index.json",
    "diffusion_pytorch_model.safetensors",
    "pytorch_model.bin.index.json",
    "pytorch_model.bin",
];

/// The user's Hugging Face access token, if one is set: `HF_TOKEN`, else the first line of
/// the file at `HF_TOKEN_PATH`, `$HF_HOME/token` or `~/.cache/huggingface/token`.
pub fn token() -> Option<String> {
    let set = |s: String| Some(s.trim().to_owned()).filter(|t| !t.is_empty());
    if let Some(t) = std::env::var("HF_TOKEN").ok().and_then(set) {
        return Some(t);
    }
    let file = std::env::var_os("HF_TOKEN_PATH")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HF_HOME").map(|h| std::path::Path::new(&h).join("token")))
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            Some(std::path::Path::new(&home).join(".cache/huggingface/token"))
        })?;
    // A token is a line; a file much larger than that is not a token file.
    let meta = std::fs::metadata(&file).ok()?;
    if !meta.is_file() || meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().next().map(str::to_owned).and_then(set)
}

/// The bearer token to send with requests to `url`: the user's [`token`] when `url` is on
/// the Hub's endpoint (same scheme, host and port), else none.
pub fn token_for(url: &Url) -> Option<String> {
    let hub = Url::parse(&endpoint()).ok()?;
    (hub.origin() == url.origin()).then(token).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_resolves_or_says_what_is_wrong() {
        let hub = "http://127.0.0.1:8080/";
        let ok = |u: &str| resolve(u, hub).map(|u| u.to_string()).unwrap();
        assert_eq!(
            ok("hf://a/b/c.zt"),
            "http://127.0.0.1:8080/a/b/resolve/main/c.zt"
        );
        assert_eq!(
            ok("HF://a/b/d/c.zt"),
            "http://127.0.0.1:8080/a/b/resolve/main/d/c.zt"
        );
        assert_eq!(
            ok("hf://models/a/b/c.zt"),
            "http://127.0.0.1:8080/a/b/resolve/main/c.zt"
        );
        assert_eq!(
            ok("hf://spaces/a/b@0123abc/c.zt"),
            "http://127.0.0.1:8080/spaces/a/b/resolve/0123abc/c.zt"
        );
        assert_eq!(
            ok("hf://a/b@refs/convert/parquet/x.npz"),
            "http://127.0.0.1:8080/a/b/resolve/refs%2Fconvert%2Fparquet/x.npz"
        );
        assert_eq!(
            ok("hf://a/b/a b.zt"),
            "http://127.0.0.1:8080/a/b/resolve/main/a%20b.zt"
        );
        let err = |u: &str| resolve(u, hub).unwrap_err().to_string();
        assert!(err("hf://gpt2/model.safetensors").contains("names no file"));
        assert!(err("hf://a/b").contains("names no file"));
        assert!(err("hf://a/b/").contains("names no file"));
        assert!(err("hf://a/b/../../x").contains("names no file"));
        assert!(err("hf://a/b@/x").contains("revision"));
        assert!(err("hf://../b/x").contains("owner/name"));
        assert!(err("hf://a/b/x?download=1").contains("query"));
        assert!(err("hf://datasets").contains("owner/name"));
        assert!(resolve("hf://a/b/c", "ftp://x").is_err());
    }
}
