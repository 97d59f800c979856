"""Progress of long work (convert, diff, verify, save_file) where a person watches.

Every such call takes ``progress=``:

- ``None`` (the default): a tqdm bar when tqdm is installed and someone is watching (stderr
  is a terminal, or the code runs in a Jupyter kernel); else the ``zt`` tool's own bars when
  stderr is a terminal; nothing in a pipe or a log.
- ``False``: nothing, ever.
- a callable ``progress(what, done, total, finished)``: told each piece of work (``what``,
  a short text such as ``"convert"`` or ``"verify"``) with the bytes done of ``total`` (0
  when not known), when it starts, as it advances (about 500 times at most; ``save_file``
  tells each array written) and once with
  ``finished=True``. It is called from worker threads; an exception it raises stops the work
  and is raised to the caller.

>>> import ztio, numpy as np, tempfile, os
>>> seen = []
>>> tmp = tempfile.TemporaryDirectory()  # removed when the example ends
>>> p = os.path.join(tmp.name, "m.zt")
>>> ztio.save_file({"w": np.ones(4, np.float32)}, p,
...                progress=lambda what, done, total, finished: seen.append((what, done, total, finished)))
>>> seen[-1]
('save', 16, 16, True)
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

Progress = Callable[[str, int, int, bool], None]


def _silent(what: str, done: int, total: int, finished: bool) -> None:
    return None


def _watched() -> bool:
    """Whether a person is likely watching stderr."""
    if "ipykernel" in sys.modules:
        return True
    stream = sys.stderr
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        return False


class _Tqdm:
    """One tqdm bar per piece of work, in bytes."""

    def __init__(self, tqdm: Any) -> None:
        self._tqdm = tqdm
        self._what: Optional[str] = None
        self._bar: Any = None

    def __call__(self, what: str, done: int, total: int, finished: bool) -> None:
        if what != self._what or self._bar is None:
            self.close()
            self._what = what
            self._bar = self._tqdm(
                total=total or None, desc=what, unit="B", unit_scale=True, unit_divisor=1024, leave=False
            )
        self._bar.update(done - self._bar.n)
        if finished:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._what = None


def listener(progress: Any) -> Optional[Progress]:
    """The callable to hand the native code for ``progress=``, or ``None`` for the tool's own
    bars on a terminal (which never draw in a pipe)."""
    if progress is False:
        return _silent
    if progress is None or progress is True:
        if not _watched():
            return _silent if progress is None else None
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return None
        return _Tqdm(tqdm)
    if callable(progress):
        return progress
    raise TypeError(f"progress must be None, a bool or a callable, not {type(progress).__name__}")


def callable_or_silent(progress: Any) -> Progress:
    """As :func:`listener`, for work done in Python (no tool bars to fall back on)."""
    chosen = listener(progress)
    return _silent if chosen is None else chosen
