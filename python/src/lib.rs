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

/// Runs the `zt` command with `argv` (its name first) and returns its exit status: the
/// package's `zt` script and `python -m ztio`. The GIL is released while it runs. As the tool
/// (`embedded=False`) it takes over SIGINT/SIGTERM as the `zt` binary does; embedded (for
/// `ztio.convert` and `ztio.diff`) Python keeps its handler and Ctrl-C raises
/// `KeyboardInterrupt` between pieces of work.
///
/// `progress` (embedded only): a callable told the command's progress in place of bars on
/// stderr (see the `progress` module). Embedded, a failure is raised (its `ztio.errors`
/// class) instead of printed.
#[pyfunction]
#[pyo3(signature = (argv, *, embedded = false, progress = None))]
fn run_cli(
    py: Python<'_>,
    argv: Vec<std::ffi::OsString>,
    embedded: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<u8> {
    if embedded {
        let callback = progress.map(|p| std::sync::Arc::new(progress::Callback::new(p)));
        let listener = callback
            .clone()
            .map(|c| c as std::sync::Arc<dyn zt_cli::ProgressListener>);
        let ended = errors::detach_interruptible_with(py, callback, || {
            Ok(zt_cli::run_embedded_reporting(argv, listener))
        })?;
        // The command's failure as the exception the library's error would be (its class
        // by kind, its file, object and offset), not a line on stderr.
        match ended.failure {
            None => Ok(ended.status),
            Some(zt_cli::Failed::Error(e)) => Err(errors::to_py(py, &e)),
            Some(zt_cli::Failed::Usage(message)) => Err(errors::argument_worded(py, message)),
            Some(other) => Err(errors::worded(py, "Error", other.to_string())),
        }
    } else {
        Ok(py.detach(|| zt_cli::run_from(argv)))
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
    m.add_function(wrap_pyfunction!(sharded::is_index_path, m)?)?;
    m.add_class::<arrays::MapHolder>()?;
    m.add_class::<arrays::OwnedHolder>()?;
    m.add_function(wrap_pyfunction!(arrays::set_dtype_table, m)?)?;
    m.add_function(wrap_pyfunction!(writer::save_safetensors, m)?)?;
    m.add_function(wrap_pyfunction!(writer::safetensors_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
