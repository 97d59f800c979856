//! A file read front to back from a position, as GGUF's and the legacy GGML files' headers
//! and tensor records are: through the map when there is one, else through a window read
//! ahead [`WINDOW`] bytes at a time (or less: [`Window::read_ahead`]), so that a header of
//! many small fields costs a few reads and not one per field. Every take is checked against
//! the bytes left.

use zt_container::{Error, Result, Source};

/// How much an unmapped file is read ahead at a time.
pub(crate) const WINDOW: u64 = 1 << 20;

/// A position in a file and the window of bytes read ahead of it.
pub(crate) struct Window<'s> {
    source: &'s Source,
    mapped: Option<&'s [u8]>,
    window: Vec<u8>,
    window_at: u64,
    /// How much a read that fills the window reads.
    ahead: u64,
    /// Where the next take starts.
    pub pos: u64,
    /// The file's length.
    pub len: u64,
    /// What the file is, for errors: "GGUF file" gives "invalid GGUF file: ...".
    kind: &'static str,
}

impl<'s> Window<'s> {
    /// A reader of `source` from byte `pos`; `kind` words its errors.
    pub fn new(source: &'s Source, pos: u64, kind: &'static str) -> Self {
        Window {
            source,
            mapped: source.as_slice(),
            window: Vec::new(),
            window_at: 0,
            ahead: WINDOW,
            pos: pos.min(source.len()),
            len: source.len(),
            kind,
        }
    }

    /// Reads `bytes` ahead from now on when the window must be filled: less than [`WINDOW`]
    /// where the fields read lie far apart (records between large tensors), so that what lies
    /// between them is not read.
    #[cfg_attr(not(feature = "ggml"), allow(dead_code))] // GGUF's header is one stretch
    pub fn read_ahead(&mut self, bytes: u64) {
        self.ahead = bytes;
    }

    /// The bytes after the position.
    pub fn remaining(&self) -> u64 {
        self.len - self.pos
    }

    /// Passes over `n` bytes and returns where they start, or says that `what` runs past
    /// the end of the file.
    pub fn skip(&mut self, n: u64, what: &str) -> Result<u64> {
        let at = self.pos;
        if n > self.remaining() {
            return Err(Error::invalid(format!(
                "invalid {}: {what} at byte {at} needs {n} bytes, but the file ends after {}",
                self.kind,
                self.remaining()
            ))
            .at(at));
        }
        self.pos += n;
        Ok(at)
    }

    /// The next `n` bytes (`what` names them in the error when the file ends first).
    pub fn take(&mut self, n: u64, what: &str) -> Result<&[u8]> {
        let start = self.skip(n, what)?;
        let short = |kind: &str| Error::invalid(format!("invalid {kind}: a short read")).at(start);
        if let Some(all) = self.mapped {
            return all
                .get(start as usize..(start + n) as usize)
                .ok_or_else(|| short(self.kind));
        }
        let window_end = self.window_at + self.window.len() as u64;
        if start < self.window_at || start + n > window_end {
            let want = n.max(self.ahead).min(self.len - start);
            self.window = self.source.read_at(start, want)?.into_owned();
            self.window_at = start;
        }
        let from = (start - self.window_at) as usize;
        self.window
            .get(from..from + n as usize)
            .ok_or_else(|| short(self.kind))
    }
}
