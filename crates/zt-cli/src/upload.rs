//! `zt convert IN URL`: the conversion written to local files in a temporary folder, then
//! uploaded (feature `remote`).
//!
//! The writers write local files only; [`convert_to_url`] runs the same conversion into a
//! folder under the system's temporary directory (`TMPDIR` chooses it: it must hold the
//! output), then puts every file it wrote beside the URL, the one the URL names last but
//! one and an index (`*.index.json`) last, so that a reader never finds an index or a root
//! whose shards are not there yet. The folder is removed afterwards, whatever happened.

use std::path::{Path, PathBuf};

use crate::common::{Failure, Outcome};

/// Runs `convert` into a temporary folder and uploads what it wrote to `url` and beside it.
/// Without `force`, an object already at `url` is a usage error (one HEAD request).
pub fn convert_to_url(url: &str, force: bool, convert: impl FnOnce(&Path) -> Outcome) -> Outcome {
    if ztensor::remote::hub::is_hub_url(url) {
        return Err(Failure::Usage(
            format!("{url}: hf:// URLs are read, not written; convert to a local file").into(),
        ));
    }
    let parsed =
        url::Url::parse(url).map_err(|e| Failure::Usage(format!("not a URL ({e})").into()))?;
    let shown = ztensor::remote::store::redacted(&parsed);
    let name = parsed
        .path_segments()
        .and_then(|mut s| s.next_back())
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| Failure::Usage(format!("{shown}: the URL names no file").into()))?;
    // The last segment as a local file name: percent-decoded, and nothing that leaves the
    // folder.
    let local_name = percent_encoding::percent_decode_str(&name)
        .decode_utf8_lossy()
        .into_owned();
    if local_name.contains(['/', '\\']) || local_name == "." || local_name == ".." {
        return Err(Failure::Usage(
            format!("{shown}: {local_name:?} is not a file name").into(),
        ));
    }
    if !force && ztensor::remote::exists(url).map_err(|e| Failure::Failed(e.into()))? {
        return Err(Failure::Usage(
            crate::common::output_exists(std::path::Path::new(&shown)).into(),
        ));
    }
    let folder = tempfile::Builder::new()
        .prefix("zt-upload-")
        .tempdir()
        .map_err(|e| Failure::Failed(format!("cannot make a temporary folder: {e}").into()))?;
    // Removed on drop; on SIGINT or SIGTERM by the handler in main.
    let _registered = ztensor::container::cleanup::register(folder.path().to_path_buf());
    let local = folder.path().join(&local_name);
    // Notes name the file the user asked for: the URL, not the temporary it goes up from.
    let (converted, notes) = crate::common::collecting_notes(|| convert(&local));
    let local_shown = local.display().to_string();
    for text in notes {
        crate::common::note(text.replace(&local_shown, &shown));
    }
    converted?;
    for file in upload_order(folder.path(), &local)? {
        let file_name = file.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
            Failure::Failed(format!("{}: not a UTF-8 name", file.display()).into())
        })?;
        let target = if file == local {
            parsed.clone()
        } else {
            parsed
                .join(file_name)
                .map_err(|e| Failure::Failed(format!("{shown}: {e}").into()))?
        };
        ztensor::remote::upload(&file, target.as_str()).map_err(|e| Failure::Failed(e.into()))?;
    }
    Ok(())
}

/// The files the conversion wrote: shards (by name), then `main`, then an index.
fn upload_order(folder: &Path, main: &Path) -> Result<Vec<PathBuf>, Failure> {
    let listed = std::fs::read_dir(folder)
        .map_err(|e| Failure::Failed(format!("{}: {e}", folder.display()).into()))?;
    let mut files = Vec::new();
    for entry in listed {
        let entry =
            entry.map_err(|e| Failure::Failed(format!("{}: {e}", folder.display()).into()))?;
        files.push(entry.path());
    }
    let rank = |p: &Path| {
        if ztensor::is_index_path(p) {
            2
        } else if p == main {
            1
        } else {
            0
        }
    };
    files.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
    Ok(files)
}
