"""safetensors' four functions (``load_file``, ``load``, ``save_file``, ``save``) for a
framework whose tensors go to and from numpy arrays: what ``ztio.flax``, ``ztio.tensorflow``,
``ztio.paddle`` and ``ztio.mlx`` are made of. Part of the core: it imports no framework; each
framework module hands it its two conversions and registers itself for ``safe_open``.
"""

from __future__ import annotations

import collections
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Deque, Dict, Mapping, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import _frameworks, _native
from ._dtypes import STAND_INS
from ._file import File, load_every_tensor, open_any, unmapped_for_backend
from ._write import safetensors_bytes
from ._write import save_file_drop_in as _save
from .errors import ArgumentError

#: ``(array, device, kind) -> tensor``. ``kind`` is None, or ml_dtypes' name of the type
#: (``"bfloat16"``, ``"float8_e4m3fn"``) whose storage integers ``array`` holds because numpy
#: has no such dtype here (ml_dtypes not installed): the tensor must be of that type.
ToFramework = Callable[[np.ndarray, str, Optional[str]], Any]
#: ``tensor -> numpy array``, or a :class:`ztio._dtypes.StandIn` for a bf16 or FP8 tensor
#: when numpy has no such dtype.
ToNumpy = Callable[[Any], Any]


class CopyOnWorkers(NamedTuple):
    """How a framework's conversion splits so that its copy can run on a worker thread (see
    :func:`functions`)."""

    #: ``(array, device, kind) -> bool``: whether the conversion copies ``array`` into fresh
    #: memory (and so is worth a worker).
    copies: Callable[[np.ndarray, str, Optional[str]], bool]
    #: ``(array, device, kind) -> copy``: the copy, in the framework's own memory; safe on any
    #: thread (it touches no stream, device context or other thread-bound state).
    copy: Callable[[np.ndarray, str, Optional[str]], Any]
    #: ``(copy, array, device, kind) -> tensor``: the rest of the conversion, on the caller's
    #: thread.
    finish: Callable[[Any, np.ndarray, str, Optional[str]], Any]


#: A whole-file load hands a copy to a worker only for arrays of at least this many bytes:
#: below it, the hand-off costs more than the copy.
MIN_COPY_ON_WORKER = 1 << 20

#: The alignment of :func:`aligned_copy`'s memory: what TensorFlow's kernels require and what
#: JAX on the CPU keeps in place.
COPY_ALIGN = 64


def aligned_copy(array: np.ndarray, device: str = "cpu", kind: Optional[str] = None) -> np.ndarray:
    """A writable copy of ``array`` in fresh memory aligned to :data:`COPY_ALIGN` bytes: the
    copy step (:class:`CopyOnWorkers`) of a framework that takes such memory as it lies, so
    the one copy a misaligned tensor needs is made on a worker and the framework adds none.
    numpy copies without the GIL."""
    block = np.empty(array.nbytes + COPY_ALIGN, np.uint8)
    start = -block.ctypes.data % COPY_ALIGN
    copied = block[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    np.copyto(copied, array, casting="no")
    return copied


Path = Union[str, "os.PathLike[str]"]


def typed_by_ml_dtypes(array: np.ndarray, kind: Optional[str]) -> np.ndarray:
    """``array`` viewed as ml_dtypes' type ``kind`` (see :data:`ToFramework`), for frameworks
    that take ml_dtypes' arrays (JAX and TensorFlow, which depend on ml_dtypes themselves)."""
    if kind is None:
        return array
    try:
        import ml_dtypes

        return array.view(getattr(ml_dtypes, kind))
    except (ImportError, AttributeError):
        raise ArgumentError(f"reading {kind} needs ml_dtypes with that type (pip install -U ml_dtypes)") from None


def functions(
    names: Tuple[str, ...],
    what: str,
    to_framework: ToFramework,
    to_numpy: ToNumpy = np.asarray,
    on_workers: Optional[CopyOnWorkers] = None,
) -> Tuple[Callable[..., Dict[str, Any]], Callable[..., Dict[str, Any]], Callable[..., None], Callable[..., bytes]]:
    """``(load_file, load, save_file, save)`` for a framework, registered for ``safe_open``
    under ``names``; ``what`` names its tensors in errors ("JAX arrays").

    ``on_workers`` lets a whole-file load make its copies on worker threads: a framework
    that cannot take the map's bytes as they lie (MLX always) spends most of a load faulting
    in the fresh pages it copies into, one 4 KiB page at a time, and two threads fault in
    twice the pages (a warm 1 GiB MLX load: median 870 ms on the caller alone, 739 ms with
    two workers, and a tail of 2.5 s cut to 1.0 s). Only the copy runs there; what may be
    bound to the caller's thread (a stream, a device context) stays with the caller."""

    def array_of(f: Any, name: str) -> Tuple[np.ndarray, Optional[str]]:
        """The numpy array of ``name`` and the type it stands in for (see
        :data:`ToFramework`)."""
        array = f.get_tensor(name)
        # A dense object is the one kind that reads as a numpy array; asking for the listing
        # first would cost more than the read itself (a dict per tensor).
        if not isinstance(array, np.ndarray):
            fmt = f.info(name).format
            raise ArgumentError(f"object {name!r} is {fmt}; {what} are read from dense objects only")
        kind = None
        if STAND_INS and array.dtype.kind == "u" and array.dtype.itemsize <= 2:
            # Storage integers that may stand in for bf16 or FP8: the listing says which
            # (asked only here, without ml_dtypes: it costs more than the read).
            kind = STAND_INS.get(f.info(name).dtype or "")
        return array, kind

    def tensor(f: Any, name: str, device: str = "cpu") -> Any:
        array, kind = array_of(f, name)
        return to_framework(array, device, kind)

    def read_all(f: Any, device: str) -> Dict[str, Any]:
        try:
            workers = min(_native.usable_cpus(), 8) if on_workers is not None else 1
            if workers < 2:
                return load_every_tensor(f, lambda name: tensor(f, name, device))
            return _copied_on_workers(f, workers, device)
        finally:
            f.close()

    def _copied_on_workers(f: Any, workers: int, device: str) -> Dict[str, Any]:
        """Every tensor, as ``load_every_tensor`` gives them, the large copies made on
        ``workers`` threads in the order the file is read (the caller's thread reads the
        arrays and hands them on: the worker threads only copy). The caller's reads stay at
        most ``2 * workers`` copies ahead of the copies: a read tells the file's read-ahead
        where the load is, and a cold file's bytes are read ahead of the copies, not of a
        caller that has asked for every array before the first copy is done."""
        assert on_workers is not None
        pool = ThreadPoolExecutor(workers, thread_name_prefix="ztio-copy")
        sources: Dict[str, Tuple[np.ndarray, Optional[str]]] = {}
        in_flight: Deque[Future[Any]] = collections.deque()
        try:

            def made(name: str) -> Any:
                array, kind = array_of(f, name)
                if array.nbytes >= MIN_COPY_ON_WORKER and on_workers.copies(array, device, kind):
                    sources[name] = (array, kind)
                    copied = pool.submit(on_workers.copy, array, device, kind)
                    in_flight.append(copied)
                    while len(in_flight) > 2 * workers:
                        in_flight.popleft().result()
                    return copied
                return to_framework(array, device, kind)

            def finished(name: str, copied: Future[Any]) -> Any:
                array, kind = sources[name]
                return on_workers.finish(copied.result(), array, device, kind)

            loaded = load_every_tensor(f, made)
            return {name: finished(name, t) if isinstance(t, Future) else t for name, t in loaded.items()}
        finally:
            # On an error, the copies not started are dropped; those under way finish first.
            pool.shutdown(wait=True, cancel_futures=True)

    def load_file(filename: Path, device: str = "cpu", *, backend: str = "mmap") -> Dict[str, Any]:
        # Writable arrays over a private map, as safe_open gives: a framework that can share
        # them (Paddle, through DLPack) does so without a copy, and a write stays in the process.
        # `backend="pread"`: positional reads, no map, as in safetensors.
        return read_all(open_any(filename, writable=True, unmapped=unmapped_for_backend(backend)), device)

    def load(data: bytes, device: str = "cpu") -> Dict[str, Any]:
        return read_all(File._of_bytes(data), device)

    def numpy_of(tensors: Mapping[str, Any]) -> Dict[str, np.ndarray]:
        return {k: to_numpy(v) for k, v in tensors.items()}

    def save_file(
        tensors: Mapping[str, Any],
        filename: Path,
        metadata: Optional[Mapping[str, str]] = None,
        *,
        sync: bool = True,
        progress: Any = None,
    ) -> None:
        _save(numpy_of(tensors), filename, metadata, sync=sync, progress=progress)

    def save(tensors: Mapping[str, Any], metadata: Optional[Mapping[str, str]] = None) -> bytes:
        return safetensors_bytes(numpy_of(tensors), metadata)

    load_file.__doc__ = f"Every dense tensor of a file (any kind ztio reads, a set, a folder) as {what}."
    load.__doc__ = f"Every dense tensor of a file's bytes as {what}: safetensors' ``load``."
    save_file.__doc__ = f"Writes {what} to ``filename``: safetensors, or zTensor v2 for a name ending in ``.zt``."
    save.__doc__ = f"The bytes of a ``.safetensors`` file holding {what}: safetensors' ``save``."
    _frameworks.register(names, tensor, to_framework)
    return load_file, load, save_file, save
