//! The one error type of the workspace: what went wrong, where, and whose fault it is.
//!
//! Every layer above (manifest, formats, facade, .mag) reports through [`Error`], so a caller
//! matches on [`ErrorKind`] once, whatever the file kind.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Whose fault an error is.
///
/// The kinds answer the question a caller asks first: is the file bad, was I asked for something
/// wrong, did a configured limit stop the work, or did the operating system fail?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file breaks its format: wrong magic, bad offsets, inconsistent sizes, corrupt data.
    #[error("invalid file")]
    InvalidFile,
    /// The file is well-formed but uses something this library does not decode (an unknown
    /// object format, encoding or version).
    #[error("unsupported")]
    Unsupported,
    /// A stored digest or checksum does not match the bytes.
    #[error("checksum mismatch")]
    ChecksumMismatch,
    /// A size declared by the file exceeds a configured limit; raising the limit may help.
    #[error("limit exceeded")]
    LimitExceeded,
    /// The caller asked for something that does not fit (a wrong element type, an unwritable
    /// value, a read the object's format does not have).
    #[error("invalid argument")]
    InvalidArgument,
    /// The caller asked for an object or component the file does not have.
    #[error("not found")]
    NotFound,
    /// The operating system failed a read or write.
    #[error("I/O error")]
    Io,
    /// The allocator could not give memory a read needed, within the budget it was allowed.
    #[error("out of memory")]
    OutOfMemory,
}

/// An error with its kind, message and location.
///
/// The value is one pointer wide: the details live behind a box so that `Result<T, Error>`
/// stays small on hot paths.
pub struct Error {
    inner: Box<Inner>,
}

struct Inner {
    kind: ErrorKind,
    message: String,
    offset: Option<u64>,
    object: Option<String>,
    component: Option<String>,
    path: Option<PathBuf>,
    source: Option<io::Error>,
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with a message that says what is wrong.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            inner: Box::new(Inner {
                kind,
                message: message.into(),
                offset: None,
                object: None,
                component: None,
                path: None,
                source: None,
            }),
        }
    }

    /// The file breaks its format.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidFile, message)
    }

    /// The file uses something this library does not decode.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }

    /// A declared size exceeds a configured limit.
    pub fn limit(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::LimitExceeded, message)
    }

    /// A tensor's rank is over the cap on dimensions (64 by default, as in the v2 spec and
    /// numpy 2): the one error every kind of file gives for it. `rank` is `None` where the
    /// parser stops counting at the cap.
    ///
    /// ```
    /// let e = zt_container::Error::rank_over_cap(Some(65), 64);
    /// assert_eq!(e.message(), "rank 65 exceeds the cap of 64 dimensions");
    /// ```
    pub fn rank_over_cap(rank: Option<u64>, cap: usize) -> Self {
        match rank {
            Some(rank) => Self::limit(format!("rank {rank} exceeds the cap of {cap} dimensions")),
            None => Self::limit(format!("rank exceeds the cap of {cap} dimensions")),
        }
    }

    /// The allocator failed.
    pub fn out_of_memory(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::OutOfMemory, message)
    }

    /// The caller asked for something wrong.
    pub fn argument(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }

    /// The caller asked for something the file does not have.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// A digest or checksum does not match.
    pub fn checksum(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ChecksumMismatch, message)
    }

    /// The operating system failed; `doing` says what we were doing.
    pub fn io(source: io::Error, doing: impl Into<String>) -> Self {
        let mut e = Self::new(ErrorKind::Io, doing);
        e.inner.source = Some(source);
        e
    }

    /// Records the absolute byte offset in the file where the problem is.
    #[must_use]
    pub fn at(mut self, offset: u64) -> Self {
        if self.inner.offset.is_none() {
            self.inner.offset = Some(offset);
        }
        self
    }

    /// Records the object the problem belongs to (kept if already set).
    #[must_use]
    pub fn in_object(mut self, name: &str) -> Self {
        if self.inner.object.is_none() {
            self.inner.object = Some(name.to_owned());
        }
        self
    }

    /// Records the component (role) the problem belongs to (kept if already set).
    #[must_use]
    pub fn in_component(mut self, role: &str) -> Self {
        if self.inner.component.is_none() {
            self.inner.component = Some(role.to_owned());
        }
        self
    }

    /// Records the file the problem is in (kept if already set).
    #[must_use]
    pub fn in_file(mut self, path: &Path) -> Self {
        if self.inner.path.is_none() {
            self.inner.path = Some(path.to_owned());
        }
        self
    }

    /// The same error, blamed on someone else: for a layer that knows better whose fault it
    /// is (a value the caller handed over that turns out to come from a file, say). Message
    /// and location stay.
    ///
    /// ```
    /// use zt_container::{Error, ErrorKind};
    /// let e = Error::argument("bad shape").with_kind(ErrorKind::InvalidFile);
    /// assert_eq!(e.kind(), ErrorKind::InvalidFile);
    /// assert_eq!(e.message(), "bad shape");
    /// ```
    pub fn with_kind(mut self, kind: ErrorKind) -> Self {
        self.inner.kind = kind;
        self
    }

    /// The same error with `advice`, what the caller can do about it, after its message
    /// (`"...; advice"`): for a layer that knows a remedy the one that raised it does not.
    ///
    /// ```
    /// use zt_container::Error;
    /// let e = Error::invalid("blob too small").in_object("w").with_advice("leave it out");
    /// assert_eq!(e.message(), "blob too small; leave it out");
    /// assert_eq!(e.object(), Some("w"));
    /// ```
    pub fn with_advice(mut self, advice: &str) -> Self {
        self.inner.message = format!("{}; {advice}", self.inner.message);
        self
    }

    /// Whose fault the error is.
    pub fn kind(&self) -> ErrorKind {
        self.inner.kind
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// What is wrong and, when known, where in the file: the message with
    /// `(at offset 0x..)` after it, as [`Display`](fmt::Display) writes them. For a reader
    /// that keeps a failure as text to report later (an object listed as unreadable).
    ///
    /// ```
    /// use zt_container::Error;
    /// let e = Error::invalid("bad length").at(0x40);
    /// assert_eq!(e.located_message(), "bad length (at offset 0x40)");
    /// assert_eq!(Error::invalid("bad length").located_message(), "bad length");
    /// ```
    pub fn located_message(&self) -> String {
        match self.inner.offset {
            Some(at) => format!("{} (at offset {at:#x})", self.inner.message),
            None => self.inner.message.clone(),
        }
    }

    /// The absolute byte offset of the problem, when known.
    pub fn offset(&self) -> Option<u64> {
        self.inner.offset
    }

    /// The object the problem belongs to, when known.
    pub fn object(&self) -> Option<&str> {
        self.inner.object.as_deref()
    }

    /// The component the problem belongs to, when known.
    pub fn component(&self) -> Option<&str> {
        self.inner.component.as_deref()
    }

    /// The file the problem is in, when known.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        if let Some(p) = &i.path {
            write!(f, "{}: ", p.display())?;
        }
        write!(f, "{}: ", i.kind)?;
        if let Some(o) = &i.object {
            write!(f, "object {o:?}: ")?;
        }
        if let Some(c) = &i.component {
            write!(f, "component {c:?}: ")?;
        }
        f.write_str(&i.message)?;
        if let Some(off) = i.offset {
            write!(f, " (at offset {off:#x})")?;
        }
        if let Some(s) = &i.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Debug prints the same line as Display: `unwrap()` in a test then shows a useful message.
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source.as_ref().map(|e| e as _)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::io(e, "I/O failed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_kind_place_and_offset() {
        let e = Error::invalid("blob reaches past the end of the file")
            .at(0x40)
            .in_component("data")
            .in_object("w");
        assert_eq!(
            e.to_string(),
            "invalid file: object \"w\": component \"data\": blob reaches past the end of the file (at offset 0x40)"
        );
        assert_eq!(e.kind(), ErrorKind::InvalidFile);
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
    }

    #[test]
    fn first_location_wins() {
        let e = Error::invalid("x")
            .at(1)
            .at(2)
            .in_object("a")
            .in_object("b");
        assert_eq!(e.offset(), Some(1));
        assert_eq!(e.object(), Some("a"));
    }
}
