"""The exceptions of ztio: one base class, and a subclass for each party at fault.

Every error the library raises is a :class:`Error` with these attributes:

- ``kind``: ``"invalid_file"``, ``"checksum_mismatch"``, ``"unsupported"``,
  ``"limit_exceeded"``, ``"invalid_argument"``, ``"not_found"`` or ``"io"``;
- ``message``: what is wrong, without the location;
- ``offset``, ``object``, ``component``, ``path``: where, when known (else ``None``).

``str(e)`` is the whole message with the location, as the Rust library prints it.

>>> import ztio
>>> try:
...     ztio.open("/nonexistent.zt")
... except ztio.IoError as e:
...     print(e.kind, isinstance(e, OSError))
io True
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "Error",
    "FileError",
    "ChecksumError",
    "UnsupportedError",
    "LimitError",
    "ArgumentError",
    "NotFoundError",
    "IoError",
    "FileMissingError",
    "PermissionDeniedError",
    "IsADirectoryIoError",
    "NotADirectoryIoError",
    "FileExistsIoError",
    "OutOfMemoryError",
    "ZtWarning",
]


class Error(Exception):
    """Base class of every ztio error."""

    kind: str = ""
    message: str = ""
    offset: Optional[int] = None
    object: Optional[str] = None
    component: Optional[str] = None
    path: Optional[str] = None


class FileError(Error):
    """The file breaks its format: the file's fault (corrupt, truncated or hostile)."""

    kind = "invalid_file"


class ChecksumError(FileError):
    """A stored digest does not match the bytes: the file is damaged."""

    kind = "checksum_mismatch"


class UnsupportedError(Error):
    """The file is well formed but uses something this library does not decode."""

    kind = "unsupported"


class LimitError(Error):
    """A size the file declares exceeds a limit; raising the limit may help."""

    kind = "limit_exceeded"


class ArgumentError(Error, ValueError):
    """The caller asked for something that does not fit: the caller's fault."""

    kind = "invalid_argument"


class NotFoundError(ArgumentError, KeyError):
    """The file has no object or component of that name."""

    kind = "not_found"

    def __str__(self) -> str:  # KeyError would quote the message
        return Exception.__str__(self)


class IoError(Error, OSError):
    """The operating system failed a read or a write."""

    kind = "io"

    def __str__(self) -> str:
        # The message says what failed, where and why; OSError's own form would give
        # "[Errno 21] None: 'path'" here, as `errno` and `filename` are set after the fact.
        return Exception.__str__(self)


class FileMissingError(IoError, FileNotFoundError):
    """The file does not exist: ``except FileNotFoundError`` catches it, as it catches
    safetensors' error for a missing file, and says so as safetensors does. An output whose
    folder does not exist is this error too, as for ``open(path, "w")``, and names the
    folder."""

    def __str__(self) -> str:
        if self.filename is None or "does not exist" in str(getattr(self, "message", "")):
            return Exception.__str__(self)
        return f"No such file or directory: {self.filename}"


class PermissionDeniedError(IoError, PermissionError):
    """The operating system refused access to the file."""


class IsADirectoryIoError(IoError, IsADirectoryError):
    """A folder was given where a file was expected."""


class NotADirectoryIoError(IoError, NotADirectoryError):
    """A part of the path that should be a folder is a file (``x.safetensors/y``)."""


class FileExistsIoError(IoError, FileExistsError):
    """The output exists, and the call did not say to replace it (``force=True``)."""


class OutOfMemoryError(Error, MemoryError):
    """The allocator could not give the memory a read needed, within its budget (see
    ``ztio.open(..., max_memory=...)``): never an abort of the interpreter."""

    kind = "out_of_memory"


class ZtWarning(UserWarning):
    """What ``ztio.convert`` and the other tool functions note on the way: an object left out
    of the output (not numbers, or unreadable with ``skip_unreadable=True``), and why. The
    ``zt`` tool prints the same as ``zt: note: ...`` on stderr."""
