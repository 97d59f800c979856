//! The library's errors as Python exceptions. The classes live in `ztio.errors` (Python),
//! where multiple inheritance is plain (`NotFoundError` is also a `KeyError`, `IoError` an
//! `OSError`); this module picks the class by the error's kind and sets the attributes that
//! say where it happened.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use ztensor::ErrorKind;

/// The class of `ztio.errors` for each kind of error.
fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidFile => "FileError",
        ErrorKind::ChecksumMismatch => "ChecksumError",
        ErrorKind::Unsupported => "UnsupportedError",
        ErrorKind::LimitExceeded => "LimitError",
        ErrorKind::InvalidArgument => "ArgumentError",
        ErrorKind::NotFound => "NotFoundError",
        ErrorKind::Io => "IoError",
        ErrorKind::OutOfMemory => "OutOfMemoryError",
        _ => "Error",
    }
}

/// The kind's short name, as `ztio.Error.kind` gives it.
fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidFile => "invalid_file",
        ErrorKind::ChecksumMismatch => "checksum_mismatch",
        ErrorKind::Unsupported => "unsupported",
        ErrorKind::LimitExceeded => "limit_exceeded",
        ErrorKind::InvalidArgument => "invalid_argument",
        ErrorKind::NotFound => "not_found",
        ErrorKind::Io => "io",
        ErrorKind::OutOfMemory => "out_of_memory",
        _ => "error",
    }
}

/// The `ztio.errors` module, imported once.
static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The Python exception for a library error: the class of its kind, the full message as the
/// argument, and `kind`, `message`, `offset`, `object`, `component` and `path` attributes.
pub fn to_py(py: Python<'_>, e: &ztensor::Error) -> PyErr {
    match build(py, e) {
        Ok(err) => err,
        // Only a broken installation gets here (ztio.errors missing).
        Err(import_failure) => PyRuntimeError::new_err(format!("{e} ({import_failure})")),
    }
}

/// `ztio.errors`, imported once.
fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    Ok(ERRORS
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("ztio.errors")?.unbind()))?
        .bind(py))
}

fn build(py: Python<'_>, e: &ztensor::Error) -> PyResult<PyErr> {
    let module = errors_module(py)?;
    let os_error = io_kind(e);
    let name = match os_error {
        Some(std::io::ErrorKind::NotFound) => "FileMissingError",
        Some(std::io::ErrorKind::PermissionDenied) => "PermissionDeniedError",
        Some(std::io::ErrorKind::IsADirectory) => "IsADirectoryIoError",
        Some(std::io::ErrorKind::AlreadyExists) => "FileExistsIoError",
        Some(std::io::ErrorKind::NotADirectory) => "NotADirectoryIoError",
        _ => class_name(e.kind()),
    };
    let class = module.getattr(name)?.cast_into::<PyType>()?;
    let value = class.call1((e.to_string(),))?;
    if let Some(code) = io_errno(e) {
        // What `except OSError as e: e.errno` callers look at, and the file it was about.
        value.setattr("errno", code)?;
        // `strerror` too, as `OSError(errno, strerror, filename)` sets it: callers print it.
        value.setattr(
            "strerror",
            py.import("os")?.getattr("strerror")?.call1((code,))?,
        )?;
        value.setattr("filename", e.path().map(std::path::Path::as_os_str))?;
    }
    value.setattr("kind", kind_name(e.kind()))?;
    value.setattr("message", e.message())?;
    value.setattr("offset", e.offset())?;
    value.setattr("object", e.object())?;
    value.setattr("component", e.component())?;
    value.setattr("path", e.path().map(std::path::Path::as_os_str))?;
    Ok(PyErr::from_value(value))
}

/// The operating system's error under a library error, if there is one.
fn io_source(e: &ztensor::Error) -> Option<&std::io::Error> {
    std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>())
}

fn io_kind(e: &ztensor::Error) -> Option<std::io::ErrorKind> {
    io_source(e).map(std::io::Error::kind)
}

fn io_errno(e: &ztensor::Error) -> Option<i32> {
    io_source(e).and_then(std::io::Error::raw_os_error)
}

/// `Result<T, ztensor::Error>` to `PyResult<T>`.
pub trait IntoPy<T> {
    /// Raises the error as its `ztio.errors` class.
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for ztensor::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, &e))
    }
}

/// A caller's mistake found by the binding itself, as `ztio.errors.ArgumentError`.
pub fn argument(py: Python<'_>, message: impl Into<String>) -> PyErr {
    to_py(py, &ztensor::Error::argument(message))
}

/// A caller's mistake worded exactly as another library words it (`message` is the whole
/// text, with no "invalid argument" before it), as `ztio.errors.ArgumentError`.
pub fn argument_worded(py: Python<'_>, message: impl Into<String>) -> PyErr {
    worded(py, "ArgumentError", message)
}

/// The `ztio.errors` class named `class` with `message` as its whole text.
pub fn worded(py: Python<'_>, class: &str, message: impl Into<String>) -> PyErr {
    let message = message.into();
    let built = errors_module(py).and_then(|module| {
        let value = module.getattr(class)?.call1((&message,))?;
        value.setattr("message", &message)?;
        Ok(PyErr::from_value(value))
    });
    built.unwrap_or_else(|import_failure| {
        PyRuntimeError::new_err(format!("{message} ({import_failure})"))
    })
}

/// Runs `work` without the GIL, as `py.detach` does, but with Python's signals checked
/// between its pieces of work (every few megabytes written): a Ctrl-C raises
/// `KeyboardInterrupt` promptly, through Python's own handler, which the library never
/// replaces. The write stops, its temporary file goes, and the target stays as it was.
pub fn detach_interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> ztensor::Result<T> + Send,
) -> PyResult<T> {
    detach_interruptible_with(py, None, work)
}

/// As [`detach_interruptible`], also stopping when the `progress` callable has raised (its
/// exception is then the one raised here).
pub fn detach_interruptible_with<T: Send>(
    py: Python<'_>,
    progress: Option<std::sync::Arc<crate::progress::Callback>>,
    work: impl FnOnce() -> ztensor::Result<T> + Send,
) -> PyResult<T> {
    use std::sync::{Arc, Mutex};
    let raised: Arc<Mutex<Option<PyErr>>> = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&raised);
    let watched = progress.clone();
    let result = py.detach(move || {
        let check = move || {
            watched.as_ref().is_some_and(|p| p.failed())
                || Python::attach(|py| match py.check_signals() {
                    Ok(()) => false,
                    Err(e) => {
                        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                        true
                    }
                })
        };
        ztensor::container::interrupt::with_check(check, work)
    });
    if let Some(e) = progress.and_then(|p| p.take_error()) {
        return Err(e);
    }
    if let Some(e) = raised.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    result.py_err(py)
}
