"""safetensors' four functions (``load_file``, ``load``, ``save_file``, ``save``) for a
framework whose tensors go to and from numpy arrays: what ``ztio.flax``, ``ztio.tensorflow``,
``ztio.paddle`` and ``ztio.mlx`` are made of. Part of the core: it imports no framework; each
framework module hands it its two conversions and registers itself for ``safe_open``.
"""

from __future__ import annotations

import collections
import math
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Deque, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _frameworks, _native
from ._dtypes import STAND_INS, read_table
from ._file import File, ShardedFile, load_every_tensor, open_any, unmapped_for_backend, unpacked_if_packed
from ._write import safetensors_bytes
from ._write import save_file_drop_in as _save
from .errors import ArgumentError, FileError, IoError

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


def aligned_empty(nbytes: int) -> np.ndarray:
    """``nbytes`` of fresh, writable memory aligned to :data:`COPY_ALIGN` bytes, as a 1-D
    ``uint8`` array (its contents undefined)."""
    block = np.empty(nbytes + COPY_ALIGN, np.uint8)
    start = -block.ctypes.data % COPY_ALIGN
    return block[start : start + nbytes]


def aligned_copy(array: np.ndarray, device: str = "cpu", kind: Optional[str] = None) -> np.ndarray:
    """A writable copy of ``array`` in fresh memory aligned to :data:`COPY_ALIGN` bytes: the
    copy step (:class:`CopyOnWorkers`) of a framework that takes such memory as it lies, so
    the one copy a misaligned tensor needs is made on a worker and the framework adds none.
    numpy copies without the GIL."""
    copied = aligned_empty(array.nbytes).view(array.dtype).reshape(array.shape)
    np.copyto(copied, array, casting="no")
    return copied


#: ``(dtype, device) -> bool``: whether the framework takes a writable, C-contiguous numpy
#: array of ``dtype`` aligned to :data:`COPY_ALIGN` bytes as it lies, for ``device`` (and
#: copies one that is not aligned): see :func:`functions`' ``keeps_aligned``.
KeepsAligned = Callable[[np.dtype, str], bool]

#: A cold whole-file load (:func:`_read_cold`) keeps this many positional reads in flight:
#: the disk serves a deep queue faster than one stream (one ``pread`` stream read a cold GiB
#: in 1443 ms, four in 688: docs/benchmarks.md), and threads waiting on the disk cost no CPU.
COLD_READS_IN_FLIGHT = 8
#: The longest single read of a cold load: a large tensor is read in pieces by several
#: threads at once.
COLD_READ_PIECE = 16 << 20
#: A cold load reads a file's tensors one by one only where they average at least this many
#: bytes: a file of many small tensors is read faster by the map's read-ahead, in large
#: sequential requests, than by a read per tensor.
MIN_COLD_READ_AVERAGE = 64 << 10
#: How many places of a file :func:`_in_page_cache` asks about.
RESIDENCY_SAMPLES = 16

_READ_TABLE: Dict[str, np.dtype] = {}


def _in_page_cache(places: Sequence[Tuple[int, int]]) -> bool:
    """Whether the page cache holds the bytes at each ``(file descriptor, offset)`` of
    ``places``: a one-byte read that may not wait for the disk (``RWF_NOWAIT``) succeeds only
    from the cache. ``True`` where that cannot be asked (no such flag, a file system that
    refuses it): then the caller keeps the path that suits a cached file."""
    nowait = getattr(os, "RWF_NOWAIT", None)
    if nowait is None or not hasattr(os, "preadv"):
        return True
    probe = bytearray(1)
    for fd, offset in places:
        try:
            os.preadv(fd, [probe], offset, nowait)
        except BlockingIOError:
            return False
        except OSError:
            return True
    return True


class _Planned(NamedTuple):
    """A tensor of a cold load (:func:`_read_cold`): ``length`` bytes read from ``offset``
    of file ``source`` (a position in the load's files) into fresh memory, as ``dtype`` in
    ``shape``; or, with ``dtype`` ``None``, made the usual way."""

    name: str
    dtype: Optional[np.dtype]
    shape: Tuple[int, ...]
    source: int
    offset: int
    length: int
    #: See :data:`ToFramework`.
    kind: Optional[str]


def _located(error: Any, message: str, path: str, name: str, offset: int) -> Any:
    """``error`` (a ztio exception) carrying ``message`` and where it happened."""
    error.message, error.path, error.object, error.offset = message, path, name, offset
    return error


def _files_of(f: Any) -> Optional[List[File]]:
    """The local files a whole load of ``f`` reads, in the order it hands their tensors over
    (a set's shards in the index's order); ``None`` for what :func:`_read_cold` leaves to the
    usual path (bytes in memory, a load with ``verify``)."""
    if f._verify:
        return None
    if isinstance(f, ShardedFile):
        files = [f._shard(position) for position in range(len(f.shards))]
    elif isinstance(f, File):
        files = [f]
    else:
        return None
    return None if any(file.path == "<bytes>" for file in files) else files


def _read_cold(
    f: Any, device: str, keeps_aligned: KeepsAligned, to_framework: ToFramework, usual: Callable[[str], Any]
) -> Optional[Dict[str, Any]]:
    """Every tensor of ``f`` (a file or a set) as a whole-file load gives them, for a
    framework that copies each tensor not aligned in the file (``keeps_aligned``), when ``f``
    is local and not in the page cache; ``None`` otherwise (the caller then loads the usual
    way).

    The copy such a framework makes of a cold map reads the file by page faults and copies
    each page again; instead, each such tensor is read with positional reads straight into
    fresh memory aligned to :data:`COPY_ALIGN`, which the framework then keeps as it lies:
    one copy (the kernel's, from the page cache), :data:`COLD_READS_IN_FLIGHT` reads queued
    at the disk, and the file read in large page-cache folios. Aligned tensors stay views of
    the map, as on the usual path. A file whose tensors must be decoded, one read with
    ``verify``, one in memory, or one of many small tensors takes the usual path, and each
    tensor not read so is made by ``usual(name)``."""
    files = _files_of(f) if hasattr(os, "preadv") else None
    if files is None:
        return None
    if not _READ_TABLE:
        _READ_TABLE.update(read_table())
    plan: List[_Planned] = []
    read_bytes = 0
    reads = 0
    for source, file in enumerate(files):
        native = file._native
        skipped = frozenset(native.names_skipped())
        for name in file.offset_keys():
            if name in skipped:
                continue
            span = native.raw_span(name)
            if span is None:
                return None  # an object to decode, or in another file: the usual path has it all
            element, shape, offset, length = span
            dtype = _READ_TABLE.get(element)
            if (
                dtype is None
                or offset % COPY_ALIGN == 0
                or length == 0
                or length != math.prod(shape) * dtype.itemsize
                or not keeps_aligned(dtype, device)
            ):
                plan.append(_Planned(name, None, (), source, 0, 0, None))
                continue
            kind = STAND_INS.get(element) if STAND_INS else None
            plan.append(_Planned(name, dtype, tuple(shape), source, offset, length, kind))
            reads += 1
            read_bytes += length
    if reads == 0 or read_bytes < reads * MIN_COLD_READ_AVERAGE:
        return None
    # A descriptor for each file with a tensor to read, by its position in `files`.
    fds: Dict[int, int] = {}
    try:
        for source in {p.source for p in plan if p.dtype is not None}:
            try:
                fds[source] = os.open(files[source].path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                return None  # not a local file after all (a URL): the usual path reads it
        places = [(fds[p.source], p.offset) for p in plan if p.dtype is not None]
        step = max(1, len(places) // RESIDENCY_SAMPLES)
        if _in_page_cache(places[::step]):
            return None
        return _read_planned([file.path for file in files], fds, plan, device, to_framework, usual)
    finally:
        for fd in fds.values():
            os.close(fd)


def _read_planned(
    paths: List[str],
    fds: Mapping[int, int],
    plan: List["_Planned"],
    device: str,
    to_framework: ToFramework,
    usual: Callable[[str], Any],
) -> Dict[str, Any]:
    """:func:`_read_cold`'s reads: every piece queued at once on
    :data:`COLD_READS_IN_FLIGHT` threads in the order of ``plan`` (each file's in file order,
    a set's files one after another), each tensor handed to the framework as soon as its
    pieces are in, in that order. ``paths[i]`` and ``fds[i]`` are the file of the tensors of
    ``plan`` whose ``source`` is ``i``."""

    def read_piece(p: _Planned, raw: np.ndarray, at: int, length: int) -> None:
        view = memoryview(raw)[at : at + length]
        done = 0
        path = paths[p.source]
        while done < length:
            at_byte = p.offset + at + done
            try:
                got = os.preadv(fds[p.source], [view[done:]], at_byte)
            except OSError as e:
                raise _located(
                    IoError(f"reading object {p.name!r} at byte {at_byte} of {path}: {e}"),
                    str(e), path, p.name, at_byte,
                ) from e
            if got == 0:
                raise _located(
                    FileError(f"object {p.name!r}: {path} ends at byte {at_byte}, before its data does (changed while read?)"),
                    "the file ends before the object's data", path, p.name, at_byte,
                )
            done += got

    pool = ThreadPoolExecutor(COLD_READS_IN_FLIGHT, thread_name_prefix="ztio-read")
    try:
        pieces: Dict[str, Tuple[np.ndarray, List[Future[None]]]] = {}
        for p in plan:
            if p.dtype is not None:
                # Fresh memory of the tensor's own size (the listing checked that it lies
                # within the file): the memory the framework's own copy would take.
                raw = aligned_empty(p.length)
                pieces[p.name] = (
                    raw.view(p.dtype).reshape(p.shape),
                    [
                        pool.submit(read_piece, p, raw, at, min(COLD_READ_PIECE, p.length - at))
                        for at in range(0, p.length, COLD_READ_PIECE)
                    ],
                )
        loaded: Dict[str, Any] = {}
        for p in plan:
            if p.dtype is None:
                loaded[p.name] = usual(p.name)
                continue
            array, reads = pieces[p.name]
            for piece in reads:
                piece.result()
            loaded[p.name] = to_framework(array, device, p.kind)
        return loaded
    finally:
        # On an error, the reads not started are dropped; those under way finish first.
        pool.shutdown(wait=True, cancel_futures=True)


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
    keeps_aligned: Optional[KeepsAligned] = None,
    sub_byte: Optional[Callable[[np.dtype], bool]] = None,
) -> Tuple[Callable[..., Dict[str, Any]], Callable[..., Dict[str, Any]], Callable[..., None], Callable[..., bytes]]:
    """``(load_file, load, save_file, save)`` for a framework, registered for ``safe_open``
    under ``names``; ``what`` names its tensors in errors ("JAX arrays").

    ``on_workers`` lets a whole-file load make its copies on worker threads: a framework
    that cannot take the map's bytes as they lie (MLX always) spends most of a load faulting
    in the fresh pages it copies into, one 4 KiB page at a time, and two threads fault in
    twice the pages (a warm 1 GiB MLX load: median 870 ms on the caller alone, 739 ms with
    two workers, and a tail of 2.5 s cut to 1.0 s). Only the copy runs there; what may be
    bound to the caller's thread (a stream, a device context) stays with the caller.

    ``keeps_aligned`` says which arrays the framework keeps as they lie when they are
    aligned (and copies when not): a whole-file load of a cold local file then reads each
    tensor the framework would copy straight into aligned memory (:func:`_read_cold`).

    ``sub_byte`` says which of ml_dtypes' sub-byte types the framework takes (JAX: ``int4``,
    ``float4_e2m1fn``, not FP6): packed 4-, 2- and 6-bit objects of those are handed over
    unpacked; the rest, and everything for a framework without it, as their storage bytes,
    as numpy gives them without ml_dtypes."""

    def array_of(f: Any, name: str) -> Tuple[np.ndarray, Optional[str]]:
        """The numpy array of ``name`` and the type it stands in for (see
        :data:`ToFramework`)."""
        array = f._stored(name)
        if sub_byte is not None:
            array = unpacked_if_packed(f, name, array, sub_byte)
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
            if keeps_aligned is not None:
                cold = _read_cold(f, device, keeps_aligned, to_framework, lambda name: tensor(f, name, device))
                if cold is not None:
                    return cold
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
