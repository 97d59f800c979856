//! `Set`: a sharded set (`model.safetensors.index.json` over its shards), its index checked at
//! open and each shard opened, and checked against the index, on first use. Shards come back
//! as `Reader`s sharing the set's readers, so arrays over a shard keep its map alive after the
//! set is gone. `Arrivals`: a whole-set load's tensor names, as each tensor's bytes come in.
//! Also which file of a model folder is the model.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::{to_py, IntoPy};
use crate::reader::{open_options, verify_outcome, verify_told, Reader};
use crate::values::attributes_to_py;

/// A sharded set, opened lazily.
#[pyclass(frozen, module = "ztio._native")]
pub struct Set {
    inner: Arc<ztensor::ShardedSet>,
}

#[pymethods]
impl Set {
    /// Opens the set whose index is at `path` (or URL), checking the index and that every
    /// shard it names exists; no shard is opened. Shards open with the same keyword
    /// arguments as `Reader`.
    #[new]
    #[pyo3(signature = (path, *, unmapped = false, verify = false, max_memory = None, writable = false))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        unmapped: bool,
        verify: bool,
        max_memory: Option<u64>,
        writable: bool,
    ) -> PyResult<Self> {
        let options = open_options(unmapped, verify, max_memory, writable);
        let set = py
            .detach(|| match path.to_str().filter(|s| ztensor::is_url(s)) {
                Some(url) => ztensor::ShardedSet::open_url(url, options),
                None => ztensor::ShardedSet::open_with(&path, options),
            })
            .py_err(py)?;
        Ok(Set {
            inner: Arc::new(set),
        })
    }

    /// Every tensor name the index lists, sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.inner.names().map(str::to_owned).collect();
        names.sort_unstable();
        names
    }

    /// The shards' paths, in the order `reader(position)` counts them (as `str`, bytes
    /// that are not UTF-8 kept as Python's `os.fsdecode` keeps them).
    fn shard_paths(&self) -> Vec<std::ffi::OsString> {
        self.inner
            .shard_paths()
            .map(|p| p.as_os_str().to_owned())
            .collect()
    }

    /// The position of the shard the index puts `name` in, or `None`.
    fn shard_of(&self, name: &str) -> Option<usize> {
        self.inner.shard_position(name)
    }

    /// The listed name nearest to `name`, one the set lacks, for "did you mean" (`None` when
    /// none is near).
    fn nearest_name(&self, name: &str) -> Option<String> {
        ztensor::nearest_name(name, self.inner.names()).map(str::to_owned)
    }

    /// Opens every shard and reads the set into memory for a load of all of it, several
    /// shards at once, each front to back (`ShardedSet::load_all`); returns once done. Arrays
    /// over the shards then read no disk and take no page fault.
    fn load_all(&self, py: Python<'_>) -> PyResult<()> {
        let set = Arc::clone(&self.inner);
        py.detach(|| set.load_all(|_| {})).py_err(py)
    }

    /// Starts reading the set in on a thread of its own, one shard after another, each front
    /// to back, and returns at once (`ShardedSet::load_all_in_background`): for a load that
    /// makes every tensor at once as a view, and whose work on them then follows the one
    /// stream. Returns whether it was started.
    fn load_all_in_background(&self) -> bool {
        self.inner.load_all_in_background()
    }

    /// Starts a load of the whole set (`ShardedSet::load_each`, on a thread of its own) and
    /// returns at once: iterating the result gives `(shard position, name)` for each tensor
    /// as soon as its bytes are in, several shards coming in at once, each front to back. A
    /// shard that fails raises its error from the iteration, after the tensors that came in.
    /// Abandoned early, the load still runs to its end in the background (within the set's
    /// memory budget), and only then lets the set go.
    fn load_each(&self, py: Python<'_>) -> PyResult<Arrivals> {
        let set = Arc::clone(&self.inner);
        let (arrived, arrivals) = channel();
        // A thread the system refuses is an error to raise, not a panic (`thread::spawn`).
        std::thread::Builder::new()
            .name("zt-load-set".into())
            .spawn(move || {
                let done = set.load_each(|shard, object| {
                    // A closed receiver is a caller that stopped iterating: nothing to tell.
                    let _ = arrived.send(Ok((shard, object.name().to_owned())));
                });
                if let Err(e) = done {
                    let _ = arrived.send(Err(e));
                }
            })
            .map_err(|e| {
                let e = ztensor::Error::io(e, "starting the thread that loads the set");
                to_py(py, &e)
            })?;
        Ok(Arrivals {
            arrivals: Mutex::new(arrivals),
        })
    }

    /// Opens and checks every shard, then checks every digest and data rule of each, in
    /// order, while the set is read ahead beside the checks (`ShardedSet::with_read_ahead`):
    /// `(digests checked, [errors])`, each error naming its shard. `progress` is told
    /// `verify SHARD` for each shard's bytes.
    #[pyo3(signature = (progress = None))]
    fn verify<'py>(
        &self,
        py: Python<'py>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(usize, Bound<'py, PyList>)> {
        let set = Arc::clone(&self.inner);
        let callback = progress.map(crate::progress::Callback::new);
        let outcome = py.detach(|| -> ztensor::Result<(usize, Vec<ztensor::Error>)> {
            set.check()?;
            set.with_read_ahead(|| {
                let (mut checked, mut failures) = (0, Vec::new());
                for (position, path) in set.shard_paths().enumerate() {
                    let r = set.reader(position)?;
                    let what = format!(
                        "verify {}",
                        path.file_name().unwrap_or_default().to_string_lossy()
                    );
                    let report = verify_told(r, callback.as_ref(), &what);
                    checked += report.checked;
                    failures.extend(report.failures.into_iter().map(|e| e.in_file(path)));
                    if callback.as_ref().is_some_and(|c| c.failed()) {
                        break;
                    }
                }
                Ok((checked, failures))
            })
        });
        verify_outcome(py, callback.as_ref(), outcome)
    }

    /// The index's `metadata`, as Python values.
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        attributes_to_py(py, self.inner.metadata())
    }

    /// The reader of shard `position`, opened and checked against the index on first use.
    fn reader(&self, py: Python<'_>, position: usize) -> PyResult<Reader> {
        let set = Arc::clone(&self.inner);
        let shared = py
            .detach(|| set.shared_reader(position).map(Arc::clone))
            .py_err(py)?;
        Ok(Reader::of(shared))
    }
}

/// What arrives from a whole-set load: `(shard position, name)` per tensor, then the end or
/// the load's error.
type Arrival = ztensor::Result<(usize, String)>;

/// The tensors of a whole-set load as they come in: see `Set.load_each`.
#[pyclass(module = "ztio._native")]
pub struct Arrivals {
    arrivals: Mutex<Receiver<Arrival>>,
}

#[pymethods]
impl Arrivals {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next tensor whose bytes are in, waiting for it without holding the GIL.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<(usize, String)>> {
        let next = py.detach(|| {
            let arrivals = self.arrivals.lock().unwrap_or_else(PoisonError::into_inner);
            arrivals.recv().ok()
        });
        match next {
            None => Ok(None),
            Some(arrival) => arrival.map(Some).py_err(py),
        }
    }
}

/// Which file of a model folder is the model (an index before a single file,
/// `.safetensors` before `pytorch_model.bin`); a path that is no folder comes back as it is.
#[pyfunction]
pub fn model_file(py: Python<'_>, path: PathBuf) -> PyResult<std::ffi::OsString> {
    let found = py.detach(|| ztensor::model_file(&path)).py_err(py)?;
    // Not `display()`: a name that is not UTF-8 must come back as the same bytes.
    Ok(found.into_os_string())
}

/// Whether a path opens as a set: a sharded set's index (`*.index.json`), or one file of a
/// split GGUF model (`model-00001-of-00003.gguf`).
#[pyfunction]
pub fn is_set_path(path: PathBuf) -> bool {
    ztensor::is_set_path(&path)
}
