//! `ztio._native`: the ztensor library as a Python extension module. The Python package
//! `ztio` (python/ztio) wraps it; users never import this module themselves.
//!
//! - [`reader`]: `Reader`, an open file; dense tensors come back as numpy arrays that point
//!   into the memory map, everything else through the library's decoders.
//! - [`writer`]: `Writer`, a zTensor file being written one array at a time.
//! - [`sharded`]: `Set`, a sharded set (`*.index.json`) whose shards open lazily as
//!   `Reader`s, `Arrivals`, a whole-set load's tensors as they come in, and which file of a
//!   model folder is the model.
//! - [`arrays`]: numpy arrays over bytes the library hands back (borrowed from a map, or
//!   owned), the holder objects that keep those bytes alive, and the dtype table.
//! - [`values`]: attribute values between the library's `Value` and Python objects.
//! - [`errors`]: the library's errors as the exceptions of `ztio.errors`.
//! - [`progress`]: a command's or a check's progress told to a Python callable.
//!
//! The GIL is released around every read, decode, hash and write: a reader is shared by
//! threads through an `Arc`, and a closed reader only drops its own handle, so arrays that
//! still point into the map keep it alive.

// The map above links the crate's own modules: this crate's only readers are its developers.
#![allow(rustdoc::private_intra_doc_links)]

use pyo3::prelude::*;

mod arrays;
mod errors;
mod progress;
mod reader;
mod sharded;
mod slice_rules;
mod values;
mod writer;

/// Runs the `zt` command with `argv` (its name first) as the tool, and returns its exit
/// status: the package's `zt` script and `python -m ztio`. It takes over SIGINT/SIGTERM as
/// the `zt` binary does. The GIL is released while it runs.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| zt_cli::run_from(argv))
}

/// The CPUs this process may use (its affinity mask and cgroup quota, as the library counts
/// them for its own parallel work): how many threads a whole-file load decodes on.
#[pyfunction]
fn usable_cpus() -> usize {
    ztensor::formats::available_threads()
}

/// Runs the `zt` command with `argv` (its name first) in this process, for `ztio.convert`,
/// `ztio.diff` and the like, and returns its exit status and its notes (each what the tool
/// prints after `zt: note: `, for the caller to warn with). A failure is raised, as the
/// library's errors are (their `ztio.errors` class, file, object and offset), not printed.
/// Python keeps its signal handlers: Ctrl-C raises `KeyboardInterrupt` between pieces of
/// work. `progress`: a callable told the command's progress in place of bars on stderr
/// (see the `progress` module).
#[pyfunction]
#[pyo3(signature = (argv, *, progress = None))]
fn run_tool(
    py: Python<'_>,
    argv: Vec<std::ffi::OsString>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(u8, Vec<String>)> {
    let callback = progress.map(|p| std::sync::Arc::new(progress::Callback::new(p)));
    let listener = callback
        .clone()
        .map(|c| c as std::sync::Arc<dyn zt_cli::ProgressListener>);
    let ended = errors::detach_interruptible_with(py, callback, || {
        Ok(zt_cli::run_embedded_reporting(argv, listener))
    })?;
    match ended.failure {
        None => Ok((ended.status, ended.notes)),
        Some(zt_cli::Failed::Error(e)) => Err(errors::to_py(py, &e)),
        Some(zt_cli::Failed::Usage(message)) => Err(errors::argument_worded(py, message)),
        Some(other) => Err(errors::worded(py, "Error", other.to_string())),
    }
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<reader::Reader>()?;
    m.add_class::<writer::Writer>()?;
    m.add_class::<sharded::Set>()?;
    m.add_class::<sharded::Arrivals>()?;
    m.add_function(wrap_pyfunction!(sharded::model_file, m)?)?;
    m.add_function(wrap_pyfunction!(sharded::is_set_path, m)?)?;
    m.add_class::<arrays::MapHolder>()?;
    m.add_class::<arrays::OwnedHolder>()?;
    m.add_function(wrap_pyfunction!(arrays::set_dtype_table, m)?)?;
    m.add_function(wrap_pyfunction!(writer::save_safetensors, m)?)?;
    m.add_function(wrap_pyfunction!(writer::safetensors_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(usable_cpus, m)?)?;
    m.add_function(wrap_pyfunction!(run_tool, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
