//! safetensors 0.8's index rules for `get_slice(name)[...]`, the ones it applies for numpy,
//! JAX, TensorFlow, MLX and for any framework opened with `backend="pread"` (torch and Paddle
//! over a map use the framework's own indexing: `ztio/_slice_rules.py`).
//!
//! [`cut`] turns a Python index into the box to read and what to do within it, or raises what
//! safetensors raises, with its class and its words. It lives here, not in Python, because
//! for a small tensor parsing the index cost three times the read (docs/benchmarks.md,
//! "Slices by safetensors' rules, parsed in Rust").
//!
//! The rules, as safetensors 0.8 has them:
//! - an index is a tuple of ints, slices with a positive step and at most one `...`; a lone
//!   item is a tuple of one; an empty list selects nothing of the first dimension; a
//!   non-empty list is refused;
//! - slice bounds are unsigned (a negative one is an `OverflowError`); ints fit 32 bits and a
//!   negative int counts from the end;
//! - an index past the end of a dimension is an error, never clamped; dimensions are checked
//!   innermost first, so the first error met is the one reported;
//! - for elements smaller than a byte, every run of bytes cut must start and end on a byte.
//!
//! Two cases are answered where safetensors 0.8 fails (docs/decisions.md): a stop before its
//! start selects nothing, and a full slice of a dimension of size 0 selects that dimension.

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PyInt, PyList, PySlice, PyTuple};

use crate::errors::argument_worded as argument;

/// What an index asks of a tensor, in the tensor's dimensions.
#[derive(Debug, PartialEq)]
pub struct Cut {
    /// The box to read: one `(start, stop)` per dimension.
    pub boxed: Vec<(u64, u64)>,
    /// Per dimension: whether an int selected it (the dimension is dropped from the answer).
    pub selects: Vec<bool>,
    /// Per dimension: the step to take within the box (1: all of it).
    pub steps: Vec<u64>,
}

/// One dimension of a parsed index: `start` and `stop` are `None` where the slice left them
/// out; `selects` is true for an int.
#[derive(Clone, Copy)]
struct Indexer {
    start: Option<u64>,
    stop: Option<u64>,
    step: u64,
    selects: bool,
}

const MISALIGNED: &str = "The slice is slicing for subbytes dtypes, and the slice does not end up at a byte boundary, this is invalid.";

/// `key` checked by safetensors' rules for a tensor of `shape` whose elements take `bits`
/// bits.
pub fn cut(py: Python<'_>, key: &Bound<'_, PyAny>, shape: &[u64], bits: u64) -> PyResult<Cut> {
    let parsed = parse(py, key, shape)?;
    let failure = |what: &str| {
        let shown: Vec<String> = parsed.iter().map(show).collect();
        argument(
            py,
            format!(
                "Error during slicing [{}] with shape {shape:?}: {what}",
                shown.join(", ")
            ),
        )
    };
    let ndim = shape.len();
    if parsed.len() > ndim {
        return Err(failure("more slicing indexes than dimensions in tensor"));
    }
    let mut boxed: Vec<(u64, u64)> = shape.iter().map(|&n| (0, n)).collect();
    let mut selects = vec![false; ndim];
    let mut steps = vec![1u64; ndim];
    // Bits spanned by one step of the current dimension, modulo 8: only whether runs of
    // bytes start and end on a byte matters.
    let mut span = bits % 8;
    // Whether a dimension inner to this one has cut the tensor into runs of bytes.
    let mut runs = false;
    // Every dimension, innermost first, as safetensors walks them: the first error it meets
    // is the one it reports.
    for (i, &n) in shape.iter().enumerate().rev() {
        let Some(p) = parsed.get(i) else {
            span = span * (n % 8) % 8;
            continue;
        };
        let first = p.start.unwrap_or(0);
        let end = p.stop.unwrap_or(n);
        let whole_of_empty = p.start.is_none() && p.stop.is_none() && n == 0;
        if whole_of_empty {
            // All of an empty dimension selects it (safetensors refuses this one): no bits.
            span = 0;
            continue;
        }
        if first >= n || end > n {
            let asked = if first >= n { first } else { end - 1 };
            return Err(failure(&format!(
                "index {asked} out of bounds for tensor dimension #{i} of size {n}"
            )));
        }
        // Once a step spans whole bytes it does for every outer dimension: nothing is left
        // to check. The stop as given, before the line below, as safetensors checks it.
        if span != 0 {
            runs = runs_on_bytes(first, end, p.step, n, span, runs)
                .ok_or_else(|| failure(MISALIGNED))?;
        }
        // A stop before the start selects nothing (safetensors fails with a negative size).
        let end = end.max(first);
        boxed[i] = (first, end);
        if p.selects {
            selects[i] = true;
        } else if p.step != 1 && end > first {
            steps[i] = p.step;
        }
        span = span * (n % 8) % 8;
    }
    if span != 0 && !runs {
        return Err(failure(MISALIGNED));
    }
    Ok(Cut {
        boxed,
        selects,
        steps,
    })
}

/// safetensors' byte-boundary checks for elements smaller than a byte, for the indexes
/// `first, first + step, ... < end` of a dimension of `n` whose steps span `span` bits
/// (modulo 8), given whether an inner dimension has cut `runs` of bytes: whether there are
/// runs of bytes to read after this dimension, or `None` when one would not start or end on
/// a byte.
fn runs_on_bytes(first: u64, end: u64, step: u64, n: u64, span: u64, runs: bool) -> Option<bool> {
    // Whether m * span is a multiple of 8 repeats with a period dividing 8, so the first
    // eight indexes decide for the whole range.
    let picked = std::iter::successors(Some(first), |m| m.checked_add(step))
        .take_while(|&m| m < end)
        .take(8);
    let off = |m: u64| (m % 8) * span % 8 != 0;
    if runs {
        // Each run is repeated at every index: none if there is no index.
        let mut any = false;
        for m in picked {
            if off(m) {
                return None;
            }
            any = true;
        }
        return Some(any);
    }
    if step == 1 && first == 0 && end == n {
        return Some(false); // all of it: the element just grows
    }
    if step == 1 {
        return (!off(first) && !off(end)).then_some(true);
    }
    let mut any = false;
    for m in picked {
        if off(m) || off(m + 1) {
            return None;
        }
        any = true;
    }
    Some(any)
}

fn parse(py: Python<'_>, key: &Bound<'_, PyAny>, shape: &[u64]) -> PyResult<Vec<Indexer>> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(tuple) = key.cast::<PyTuple>() {
        tuple.iter().collect()
    } else if let Ok(list) = key.cast::<PyList>() {
        if list.is_empty() {
            // An empty list selects nothing.
            return Ok(vec![Indexer {
                start: Some(0),
                stop: Some(0),
                step: 1,
                selects: false,
            }]);
        }
        return Err(argument(py, "Non empty lists are not implemented"));
    } else {
        vec![key.clone()]
    };
    let ellipsis = PyEllipsis::get(py);
    if items.iter().filter(|item| item.is(&*ellipsis)).count() > 1 {
        return Err(argument(
            py,
            "Only one ellipsis (...) is allowed in slice index",
        ));
    }
    let mut parsed = Vec::with_capacity(items.len().max(shape.len()));
    for item in &items {
        if let Ok(slice) = item.cast::<PySlice>() {
            let bound = |name: &Bound<'_, pyo3::types::PyString>| -> PyResult<Option<u64>> {
                let value = slice.getattr(name)?;
                // Unsigned, as safetensors reads them: a negative bound is an OverflowError.
                Ok(if value.is_none() {
                    None
                } else {
                    Some(value.extract::<u64>()?)
                })
            };
            let start = bound(intern!(py, "start"))?;
            let stop = bound(intern!(py, "stop"))?;
            let step = step_of(py, &slice.getattr(intern!(py, "step"))?)?;
            parsed.push(Indexer {
                start,
                stop,
                step,
                selects: false,
            });
        } else if item.is(&*ellipsis) {
            let all = Indexer {
                start: None,
                stop: None,
                step: 1,
                selects: false,
            };
            let fill = shape.len().saturating_sub(items.len() - 1);
            parsed.extend(std::iter::repeat_n(all, fill));
        } else {
            let dim = parsed.len();
            let unsupported = || {
                argument(
                    py,
                    format!("Unsupported slice index at position {dim}: expected slice, int, or ellipsis"),
                )
            };
            // Anything with `__index__` that fits 32 bits (a bool is the int 0 or 1).
            let index = match item.extract::<i64>() {
                Ok(v) if i32::try_from(v).is_ok() => v,
                Ok(_) => return Err(unsupported()),
                Err(e)
                    if e.is_instance_of::<PyTypeError>(py)
                        || e.is_instance_of::<PyOverflowError>(py) =>
                {
                    return Err(unsupported())
                }
                Err(e) => return Err(e),
            };
            let index = if index < 0 {
                let size = shape.get(dim).copied().unwrap_or(0);
                // size <= u64::MAX and index >= -2^31: exact in i128.
                let counted = i128::from(index) + i128::from(size);
                if counted < 0 {
                    return Err(argument(
                        py,
                        format!("Invalid index {index} for dimension {dim} of size {size}"),
                    ));
                }
                counted as u64
            } else {
                index as u64
            };
            parsed.push(Indexer {
                start: Some(index),
                stop: Some(index + 1),
                step: 1,
                selects: true,
            });
        }
    }
    Ok(parsed)
}

/// A slice's step: `None` is 1; otherwise an integer of at least 1.
fn step_of(py: Python<'_>, step: &Bound<'_, PyAny>) -> PyResult<u64> {
    if step.is_none() {
        return Ok(1);
    }
    match step.extract::<i64>() {
        Ok(v) if v >= 1 => Ok(v as u64),
        Ok(v) => Err(argument(
            py,
            format!("Slice step must be a positive integer, got {v}"),
        )),
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => {
            // Beyond 64 bits: any positive step that large takes the first index only.
            let index = step
                .cast::<PyInt>()
                .map(|i| i.clone().into_any())
                .or_else(|_| {
                    py.import(intern!(py, "operator"))?
                        .getattr(intern!(py, "index"))?
                        .call1((step,))
                })?;
            if index.lt(0)? {
                Err(argument(
                    py,
                    format!("Slice step must be a positive integer, got {index}"),
                ))
            } else {
                Ok(u64::MAX)
            }
        }
        Err(e) => Err(e),
    }
}

fn show(p: &Indexer) -> String {
    if p.selects {
        return p.start.unwrap_or(0).to_string();
    }
    let bound = |b: Option<u64>| b.map(|v| v.to_string()).unwrap_or_default();
    let text = format!("{}:{}", bound(p.start), bound(p.stop));
    if p.step == 1 {
        text
    } else {
        format!("{text}:{}", p.step)
    }
}
