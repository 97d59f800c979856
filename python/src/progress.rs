//! Progress told to a Python callable: the `progress=` argument of `ztio.convert`,
//! `ztio.diff` and `File.verify`, or the tqdm adapter `ztio` builds when a person watches.
//!
//! The callable is called as `progress(what, done, total, finished)`, from whichever thread
//! did the work (taking the GIL for the call). Calls are thinned to about 500 per piece of
//! work, so a file of a million small objects does not make a million Python calls. An
//! exception the callable raises stops the work at its next check (as Ctrl-C does) and is
//! raised to the caller.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use pyo3::prelude::*;

/// A Python progress callable, and the first exception it raised.
pub struct Callback {
    call: Py<PyAny>,
    /// The piece of work last told, and the `done` it was told.
    last: Mutex<(String, u64)>,
    /// The same, as the callable heard it: checked again under the GIL, because threads
    /// that passed the check above in one order can take the GIL in another.
    heard: Mutex<(String, u64)>,
    failed: AtomicBool,
    raised: Mutex<Option<PyErr>>,
}

impl Callback {
    pub fn new(call: Py<PyAny>) -> Self {
        Callback {
            call,
            last: Mutex::new((String::new(), 0)),
            heard: Mutex::new((String::new(), 0)),
            failed: AtomicBool::new(false),
            raised: Mutex::new(None),
        }
    }

    /// Whether the callable has raised: the work should stop.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// The exception the callable raised, once.
    pub fn take_error(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Tells the callable, unless it has failed or this step is too small to show.
    pub fn tell(&self, what: &str, done: u64, total: u64, finished: bool) {
        if self.failed() {
            return;
        }
        {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            let step = (total / 500).max(1);
            let new_piece = last.0 != what;
            if !(finished || new_piece || done == 0 || done.saturating_sub(last.1) >= step) {
                return;
            }
            if new_piece {
                last.0 = what.to_owned();
            }
            last.1 = done;
        }
        Python::attach(|py| {
            {
                // Never tell less done than already told for the same piece.
                let mut heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
                if heard.0 == what && done < heard.1 {
                    return;
                }
                if heard.0 != what {
                    heard.0 = what.to_owned();
                }
                heard.1 = done;
            }
            if let Err(e) = self.call.call1(py, (what, done, total, finished)) {
                self.failed.store(true, Ordering::Relaxed);
                let mut slot = self.raised.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(e);
            }
        });
    }
}

impl zt_cli::ProgressListener for Callback {
    fn report(&self, what: &str, done: u64, total: u64, finished: bool) {
        self.tell(what, done, total, finished);
    }
}
