"""Reading: :func:`open` and :class:`File`, the safetensors-style :func:`safe_open`, and the
objects a read hands back for tensors that are not plain arrays.

A dense tensor stored raw, little-endian and aligned comes back as a numpy array that points
into the file's memory map; the array keeps the map alive, so it stays valid after the file is
closed. It is read-only, unless the file was opened ``writable=True``: then the map is private
and copy-on-write, a write copies one page in this process and never reaches the file (and
later reads through the same handle see it). ``load_file`` and ``safe_open`` open files
writable, as safetensors' arrays are writable. zstd-compressed, big-endian or misaligned data
comes back as an owned, writable array.
"""

from __future__ import annotations

import collections
import collections.abc
import json
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple, Union

import numpy as np

from . import _frameworks, _native, _progress, _slice_rules
from ._dtypes import PACKED_DTYPES, PACKED_READ, STAND_INS, read_table, unpacked
from .errors import ArgumentError, Error, NotFoundError, UnsupportedError

_native.set_dtype_table(read_table())

__all__ = [
    "open",
    "safe_open",
    "File",
    "ShardedFile",
    "Slice",
    "TensorInfo",
    "ComponentInfo",
    "Components",
    "Quantized",
    "VerifyReport",
]


@dataclass(frozen=True)
class ComponentInfo:
    """One stored array of an object: its role, element type, encoding and place in the file."""

    role: str
    dtype: str
    type: Optional[str]
    encoding: str
    offset: int
    length: int
    decoded_length: Optional[int]
    digest: Optional[str]
    file: int
    byte_order: str
    #: Whether the elements lie in another order than packed row-major (strides, a
    #: Fortran-order array): a read gathers them. ``None`` when not known.
    arranged: Optional[bool] = None


@dataclass(frozen=True)
class TensorInfo:
    """What a file says about one object, read without touching its data.

    ``dtype`` is the element type's name (``"f32"``, ``"bf16"``, ``"f8_e4m3fn"``,
    ``"complex64"``, ...), ``storage_dtype`` the type it is stored as (``"u8"`` for FP8),
    ``logical`` the logical type alone (``None`` for plain storage types),
    ``format`` the layout (``"dense"``, ``"sparse_csr"``, ``"sparse_coo"``,
    ``"quantized_group"`` or a format id the library does not decode), ``defect`` why it
    cannot be read, if it cannot.
    """

    name: str
    shape: Tuple[int, ...]
    dtype: Optional[str]
    storage_dtype: Optional[str]
    logical: Optional[str]
    format: str
    attributes: Dict[str, Any]
    components: Tuple[ComponentInfo, ...]
    defect: Optional[str] = None

    @classmethod
    def _of(cls, d: Dict[str, Any]) -> "TensorInfo":
        return cls(
            name=d["name"],
            shape=tuple(d["shape"]),
            dtype=d["dtype"],
            storage_dtype=d["storage_dtype"],
            logical=d["logical"],
            format=d["format"],
            attributes=d["attributes"],
            components=tuple(ComponentInfo(**c) for c in d["components"]),
            defect=d["defect"],
        )


@dataclass(frozen=True)
class Components:
    """An object of a format read as its parts: a sparse tensor when scipy is missing, or a
    format the library lists but does not decode (``gguf.q4_0/1``, ``zt.mx/1``, ...)."""

    name: str
    format: str
    shape: Tuple[int, ...]
    attributes: Dict[str, Any]
    parts: Dict[str, np.ndarray]


@dataclass(frozen=True)
class Quantized:
    """A ``quantized_group`` object: packed codes, per-group scales and zero points, and the
    packing parameters (the object's attributes). :meth:`dequantize` gives float32 values."""

    name: str
    shape: Tuple[int, ...]
    attributes: Dict[str, Any]
    parts: Dict[str, np.ndarray]
    _file: "File" = field(repr=False, compare=False)

    def dequantize(self) -> np.ndarray:
        """``(code - zero) * scale`` for every element, as float32 in the logical shape."""
        return self._file.dequantize(self.name)


@dataclass(frozen=True)
class VerifyReport:
    """What :meth:`File.verify` found: how many digests were checked, and every failure as
    the exception it would raise. True when nothing failed."""

    checked: int
    errors: List[Exception]

    @property
    def ok(self) -> bool:
        return not self.errors

    def __bool__(self) -> bool:
        return self.ok


def _dims(key: Any, shape: Sequence[int]) -> Tuple[List[Tuple[int, int]], Optional[Tuple[Any, ...]]]:
    """A numpy-style index (ints, slices with any step, one Ellipsis) as the bounding box to
    read, one ``(start, stop)`` per dimension, and the index to apply to that box (``None``:
    the box is the answer)."""
    if type(key) is slice and shape and key.step is None:
        # Rows a..b: the most common slice, answered first.
        start, stop, _ = key.indices(shape[0])
        if start < stop:
            return [(start, stop), *((0, n) for n in shape[1:])], None
    simple = key if type(key) is tuple else (key,)
    if shape and len(simple) <= len(shape) and all(type(k) is slice for k in simple):
        # The common case, a box of steps of 1 (`[a:b]`, `[:, a:b]`), without the general
        # walk below, which cost more than the read itself for a small tensor.
        steps_of_one: List[Tuple[int, int]] = []
        for k, n in zip(simple, shape):
            if k.step not in (None, 1):
                break
            start, stop, _ = k.indices(n)
            if start >= stop:
                break
            steps_of_one.append((start, stop))
        else:
            steps_of_one.extend((0, n) for n in shape[len(simple) :])
            return steps_of_one, None
    if not isinstance(key, tuple):
        key = (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        fill = len(shape) - (len(key) - 1)
        key = key[:i] + (slice(None),) * max(fill, 0) + key[i + 1 :]
    if len(key) > len(shape):
        raise IndexError(f"too many indices: the tensor has {len(shape)} dimensions")
    key = key + (slice(None),) * (len(shape) - len(key))
    box: List[Tuple[int, int]] = []
    local: List[Any] = []
    for k, n in zip(key, shape):
        if isinstance(k, slice):
            idx = range(*k.indices(n))
            if len(idx) == 0:
                box.append((0, 0))
                local.append(slice(0, 0))
                continue
            lo, hi = min(idx[0], idx[-1]), max(idx[0], idx[-1]) + 1
            box.append((lo, hi))
            start, last = idx[0] - lo, idx[-1] - lo
            stop = last + (1 if idx.step > 0 else -1)
            local.append(slice(start, stop if stop >= 0 else None, idx.step))
        else:
            try:
                i = int(k.__index__())
            except (AttributeError, TypeError):
                raise TypeError(f"index {k!r}: only integers, slices and ... are supported") from None
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for a dimension of size {n}")
            i %= n
            box.append((i, i + 1))
            local.append(0)
    return box, tuple(local)


class Slice:
    """A lazily read tensor: index it to read only the part asked for.

    ``f.get_slice("w")[a:b]`` reads rows ``a..b`` and nothing else; a run of whole rows of a
    raw tensor points into the map, any other box is gathered in one pass.
    """

    # Slots: a slice is made per tensor by loaders that only ask its shape.
    __slots__ = ("_file", "_name", "_dtype", "_shape")

    def __init__(self, file: "File", name: str):
        self._file = file
        self._name = name
        # Shape and type only: the whole listing (`info`) cost more than the slice itself
        # for small tensors.
        self._shape, self._dtype = file._native.shape_dtype(name)
        file.__dict__["_sliced"] = True  # close() keeps an open twin for the slices

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    def get_shape(self) -> List[int]:
        """The tensor's shape (safetensors' spelling)."""
        return list(self._shape)

    def get_dtype(self) -> str:
        """The element type's name as safetensors spells it (``F32``, ``BF16``, ``F8_E4M3``)."""
        name = _SAFETENSORS_NAMES.get(self._dtype or "")
        return name if name is not None else (self._dtype or "").upper()

    @property
    def dtype(self) -> Optional[str]:
        return self._dtype

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        if self._file.closed:
            self._file = self._file._kept_for_slices()
        box, local = _dims(key, self._shape)
        if self._dtype in PACKED_READ:
            # Packed sub-byte elements: the box's packed bytes, unpacked into its shape. A box
            # off the bytes' boundaries cannot be read alone: the whole object, indexed.
            try:
                part = self._file._reader().slice(self._name, box)
            except UnsupportedError:
                return self._file.get_tensor(self._name)[key]
            part = unpacked(part, self._dtype, tuple(b - a for a, b in box))
            return part if local is None else part[local]
        part = self._file._reader().slice(self._name, box)
        if self._dtype in PACKED_DTYPES:
            # NF4, or any packed type without ml_dtypes: the box's packed bytes, as get_tensor
            # gives the whole object's.
            if local is None:
                return part
            raise ArgumentError(
                f"object {self._name!r}: {self._dtype} elements have no numpy dtype to index; "
                "ask for a box (slices of step 1) to get its packed bytes"
            )
        return part if local is None else part[local]


_SAFETENSORS_NAMES = {
    "f64": "F64",
    "f32": "F32",
    "f16": "F16",
    "bf16": "BF16",
    "i64": "I64",
    "i32": "I32",
    "i16": "I16",
    "i8": "I8",
    "u64": "U64",
    "u32": "U32",
    "u16": "U16",
    "u8": "U8",
    "bool": "BOOL",
    "f8_e4m3fn": "F8_E4M3",
    "f8_e5m2": "F8_E5M2",
    "f8_e4m3fnuz": "F8_E4M3FNUZ",
    "f8_e5m2fnuz": "F8_E5M2FNUZ",
    "f8_e8m0": "F8_E8M0",
    "f4_e2m1": "F4",
    "complex64": "C64",
}


class _TensorsInFileOrder(collections.abc.ItemsView):
    """``f.items()``: ``(name, tensor)`` pairs read as :meth:`File.as_read` reads them."""

    def __iter__(self) -> Iterator[Tuple[str, Any]]:
        return iter(self._mapping.as_read())


class _ValuesInFileOrder(collections.abc.ValuesView):
    """``f.values()``: the tensors, read as :meth:`File.as_read` reads them."""

    def __iter__(self) -> Iterator[Any]:
        return (tensor for _, tensor in self._mapping.as_read())


class _ReadOnlyMapping:
    """What a read-only ``Mapping`` of names to tensors offers beyond ``keys``, ``[]``,
    ``in``, ``len`` and iteration (the classes are registered as ``collections.abc.Mapping``
    without its mixins: its ``==`` would read and compare every tensor, and would make a
    file unhashable)."""

    def get(self, name: str, default: Any = None) -> Any:
        """The tensor ``name``, or ``default`` when the file holds no object of that name."""
        return self[name] if name in self else default

    def items(self) -> "collections.abc.ItemsView[str, Any]":
        """``(name, tensor)`` of every object, in the order the bytes are read (file order,
        the file read ahead: the fast way through the whole file); ``dict(f.items())`` loads
        it all."""
        return _TensorsInFileOrder(self)

    def values(self) -> "collections.abc.ValuesView[Any]":
        """Every tensor, in the order :meth:`items` gives them."""
        return _ValuesInFileOrder(self)


class File(_ReadOnlyMapping):
    """An open tensor file. Use :func:`open`; close it, or use it as a context manager.

    Iterating gives the names; ``f[name]`` is :meth:`get_tensor`; it is a read-only
    ``collections.abc.Mapping`` of names to tensors (``get``, ``items``, ``values``). Safe to
    use from several threads: reads release the GIL and run in parallel.
    """

    #: Arrays being decoded on worker threads while a whole-file load runs
    #: (:func:`load_every_tensor`); ``None`` otherwise.
    _ahead: Optional["_DecodeAhead"] = None

    #: Whether reads tell this file's read-ahead what they read; ``False`` while a whole set's
    #: load reads the set in on a stream of its own (:meth:`ShardedFile._views_read_behind`).
    _told: bool = True

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        *,
        unmapped: bool = False,
        verify: bool = False,
        max_memory: Optional[int] = None,
        writable: bool = False,
    ):
        self.path = os.fsdecode(path)
        self._verify = verify
        self._unmapped = unmapped
        self._options = dict(unmapped=unmapped, verify=verify, max_memory=max_memory, writable=writable)
        self._native = _native.Reader(
            path, unmapped=unmapped, verify=verify, max_memory=max_memory, writable=writable
        )

    @classmethod
    def _of_bytes(cls, data: bytes, *, verify: bool = False) -> "File":
        """A file held in memory (what ``safetensors.*.load`` reads)."""
        f = cls.__new__(cls)
        f.path = "<bytes>"
        f._verify = verify
        f._native = _native.Reader.from_bytes(bytes(data), verify=verify)
        return f

    def _file_for(self, name: str) -> "File":
        """The file that holds ``name``: this one (a set answers with its shard)."""
        return self

    def _reader(self) -> "_native.Reader":
        return self._native

    # -- the file --------------------------------------------------------------------------

    @property
    def version(self) -> str:
        """The file's kind and version: ``"zt v2"``, ``"zt v1.2"``, ``"mag v300"``,
        ``"safetensors"``, ..."""
        return self._native.version

    @property
    def attributes(self) -> Dict[str, Any]:
        """The file attributes as Python values."""
        return self._native.attributes()

    def metadata(self) -> Optional[Dict[str, str]]:
        """File attributes as strings, as safetensors' ``metadata()`` gives them: text as is,
        other values as JSON; ``None`` when the file has none, ``{}`` when it declares an
        empty map (a ``.safetensors`` header's ``"__metadata__":{}``)."""
        return _as_text(self._native.attributes(), self._native.has_empty_metadata())

    def keys(self) -> List[str]:
        """Object names, sorted."""
        return self._native.names()

    def offset_keys(self) -> List[str]:
        """Object names in the order their data lies in the file (objects without data
        last): the order that reads the file front to back, and safetensors' order."""
        return self._native.names_in_file_order()

    def __iter__(self) -> Iterator[str]:
        return iter(self._native.names())

    def __len__(self) -> int:
        return len(self._native)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._native

    def info(self, name: str) -> TensorInfo:
        """One object's listing: shape, element type, format, attributes, components."""
        return TensorInfo._of(self._native.info(name))

    def infos(self) -> List[TensorInfo]:
        """Every object's listing, in name order."""
        return [TensorInfo._of(d) for d in self._native.infos()]

    def verify(self, *, progress: Any = None) -> VerifyReport:
        """Checks every digest and data rule of the file (reading all of it), on every core.
        ``progress``: see :mod:`ztio._progress`."""
        checked, errors = self._native.verify(progress=_progress.callable_or_silent(progress))
        return VerifyReport(checked, list(errors))

    # -- reading ---------------------------------------------------------------------------

    def get_tensor(self, name: str, *, verify: bool = False) -> Any:
        """An object's values.

        A read that decodes or copies checks the digests and checksums the file carries for
        them; a zero-copy read does not (it would cost a pass over the bytes) unless
        ``verify=True`` here or at :func:`open`. A mismatch raises
        :class:`ztio.ChecksumError` naming the object, component and offset.

        - dense: a numpy array (read-only and pointing into the map when stored raw,
          little-endian and aligned; owned otherwise). bf16/FP8 use ml_dtypes dtypes when
          it is installed, else their storage integers; complex is numpy complex. Packed
          4-, 2- and 6-bit types (int4, uint4, int2, uint2, FP4, FP6) come unpacked as
          ml_dtypes' types in their shape (a copy) when it has them, else as their bytes.
        - ``sparse_csr``/``sparse_coo``: a ``scipy.sparse`` array when scipy is importable,
          else :class:`Components`.
        - ``quantized_group``: :class:`Quantized` (see :meth:`Quantized.dequantize`).
        - any other format: :class:`Components`.
        """
        return unpacked_if_packed(self, name, self._stored(name, verify))

    __getitem__ = get_tensor

    def _stored(self, name: str, verify: bool = False) -> Any:
        """:meth:`get_tensor`, with packed sub-byte elements as their storage bytes: what
        frameworks without such types (torch's FP4 is two values a byte) take."""
        ahead = self._ahead  # read once: a load on another thread may end meanwhile
        if ahead is not None and not verify:
            decoded = ahead.take(name)
            if decoded is not None:
                return decoded.result()
        array = self._native.array(name, verify, self._told)
        if array is not None:
            return array
        return self._structured(name)

    def as_read(self) -> Iterator[Tuple[str, Any]]:
        """Every tensor as ``(name, tensor)``, in the order their data lies in the file, the
        file read front to back ahead of the reads and the large compressed tensors decoded
        a few ahead on worker threads (as :meth:`ShardedFile.as_read` does for a set, where
        the order is the order the bytes come in)."""
        return self._each_made(self.get_tensor)

    def _each_made(self, make: Callable[[str], Any]) -> Iterator[Tuple[str, Any]]:
        """``(name, make(name))`` of every object, in the order their data lies in the file:
        the file is read front to back ahead of the calls, and the large objects that must
        be decoded are decoded on worker threads a few ahead (:class:`_DecodeAhead`), for
        as long as the iteration runs."""
        self._native.expect_to_read_all()
        ahead = _DecodeAhead.start(self)
        try:
            for name in self.offset_keys():
                yield name, make(name)
        finally:
            if ahead is not None:
                ahead.stop(self)

    def get_slice(self, name: str) -> Slice:
        """A lazily read tensor: ``f.get_slice(name)[a:b]`` reads only rows ``a..b``."""
        return Slice(self, name)

    def component(self, name: str, role: str) -> np.ndarray:
        """One stored array of an object (``data``, ``values``, ``indptr``, ...), 1-D."""
        return self._native.component(name, role)

    def dequantize(self, name: str) -> np.ndarray:
        """Any numeric object as float32 values in its logical shape: dense values
        converted, FP8 decoded, sparse densified, quantized dequantized."""
        return self._native.read_f32(name)

    def _parts(self, info: TensorInfo) -> Dict[str, np.ndarray]:
        return {c.role: self._native.component(info.name, c.role) for c in info.components}

    def sparse_parts(self, name: str) -> Dict[str, np.ndarray]:
        """A sparse object's checked parts, whatever its storage: ``values`` and, for CSR,
        ``indices`` and ``indptr``, for COO ``coords`` (``ndim x nnz``), indices as uint64."""
        return dict(self._native.sparse(name))

    def _structured(self, name: str) -> Any:
        info = self.info(name)
        if info.format in ("sparse_csr", "sparse_coo"):
            parts = self.sparse_parts(name)
            sparse = _scipy_sparse(info, parts)
            if sparse is not None:
                return sparse
            return Components(info.name, info.format, info.shape, info.attributes, parts)
        parts = self._parts(info)
        if info.format == "quantized_group":
            return Quantized(info.name, info.shape, info.attributes, parts, self)
        return Components(info.name, info.format, info.shape, info.attributes, parts)

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the file. Arrays already read stay valid: they keep the map alive. Slices
        made before stay readable, as safetensors' are: a file that gave out slices keeps an
        open twin for them, which goes with the last of them and this object."""
        if self.__dict__.pop("_sliced", False) and not self._native.closed:
            twin = object.__new__(type(self))
            twin.__dict__.update(self.__dict__)
            try:
                twin._native = self._native.handle()
                self.__dict__["_twin"] = twin
            except Error:
                pass  # closed meanwhile on another thread: its slices answer as closed
        self._native.close()

    def _kept_for_slices(self) -> "File":
        """For a slice of this closed file: the open twin :meth:`close` kept (this file
        itself where there is none, whose reads then say it is closed)."""
        return self.__dict__.get("_twin", self)

    @property
    def closed(self) -> bool:
        return self._native.closed

    def __enter__(self) -> "File":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Tuple[Any, ...]:
        return _pickled(self)

    def __repr__(self) -> str:
        if "_native" not in self.__dict__:  # the open failed
            return f"<ztio.File {getattr(self, 'path', '?')!r} (not open)>"
        state = "closed" if self.closed else f"{len(self)} objects, {self.version}"
        return f"<ztio.File {self.path!r} ({state})>"


class ShardedFile(_ReadOnlyMapping):
    """A sharded set (``model.safetensors.index.json`` and the shards it names) with the
    reading surface of :class:`File`: names from the index, each tensor read from its shard.
    The index is checked at open and every shard it names must exist; a shard is opened, and
    checked against the index, when a tensor of it is first read. Use :func:`open`.
    """

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        *,
        unmapped: bool = False,
        verify: bool = False,
        max_memory: Optional[int] = None,
        writable: bool = False,
    ):
        self.path = os.fsdecode(path)
        self._verify = verify
        self._unmapped = unmapped
        self._options = dict(unmapped=unmapped, verify=verify, max_memory=max_memory, writable=writable)
        self._set = _native.Set(path, unmapped=unmapped, verify=verify, max_memory=max_memory, writable=writable)
        self._paths = self._set.shard_paths()
        self._shards: Dict[int, File] = {}
        self._closed = False

    def _arrivals(self) -> Iterator[Tuple[int, str]]:
        """Starts reading every shard in, several at once (a whole-set load is about to read
        all of them: the disk serves large concurrent reads instead of one shard after
        another), and gives ``(shard position, name)`` of each tensor as soon as its bytes
        are in."""
        return iter(self._open_set().load_each())

    def _each_made(self, make: Callable[[str], Any]) -> Iterator[Tuple[str, Any]]:
        """``(name, make(name))`` of every tensor of the set, made in the order their bytes
        come in (:meth:`_arrivals`). The large objects that must be decoded (compressed
        shards) are decoded on worker threads as they arrive (:class:`_DecodeAhead`): the
        caller makes the tensors that arrived before while a few later ones decode, so a set
        of compressed shards decodes on every core, as a single file does."""
        workers = _native.usable_cpus()
        ahead = _DecodeAhead(workers) if workers >= 2 else None
        # Per shard seen: its File and the names a worker should decode.
        worth: Dict[int, Tuple[File, Set[str]]] = {}
        arrived: Deque[str] = collections.deque()
        try:
            for position, name in self._arrivals():
                if ahead is not None:
                    seen = worth.get(position)
                    if seen is None:
                        shard = self._shard(position)
                        # The shard's reads (a framework may read through the shard, not the
                        # set) take from the same decodes.
                        shard._ahead = ahead
                        seen = worth[position] = (shard, {n for n, _ in ahead.worth_decoding(shard._native)})
                    shard, names = seen
                    if name in names:
                        ahead.add(shard._native, name)
                arrived.append(name)
                # Make what arrived before, except that while a worker is free, a decode at
                # the front waits for more arrivals to start theirs beside it.
                while arrived and not (ahead is not None and not ahead.full and ahead.has(arrived[0])):
                    front = arrived.popleft()
                    yield front, make(front)
            while arrived:
                front = arrived.popleft()
                yield front, make(front)
        finally:
            if ahead is not None:
                ahead.stop(*(shard for shard, _ in worth.values()))

    def _views_read_behind(self, make: Callable[[str], Any]) -> Optional[Dict[str, Any]]:
        """Every tensor of a set of local mapped shards, made at once by ``make``, which
        makes views and reads none of their bytes (numpy arrays over the shards' maps,
        torch's over its own), while one stream reads the shards in, in order, each front to
        back (``load_all_in_background``): the caller's work on the views follows that
        stream as it comes in, as it follows a single file's read-ahead, instead of waiting
        for every byte first (:meth:`_arrivals`). Shard by shard, each in file order; a cold
        shard's own read-ahead is told nothing meanwhile. ``None`` for a set read another
        way: remote, without maps, or with large objects to decode (those are decoded on
        worker threads as their bytes come in, across the set: :meth:`_each_made`)."""
        if self._unmapped or "://" in self.path:
            return None
        shards = [self._shard(position) for position in range(len(self._paths))]
        if any(_DecodeAhead.worth_decoding(shard._native) for shard in shards):
            return None
        self._open_set().load_all_in_background()
        tensors: Dict[str, Any] = {}
        for shard in shards:
            shard._told = False
            try:
                tensors.update(load_every_tensor(shard, make))
            finally:
                del shard._told
        return tensors

    def as_read(self) -> Iterator[Tuple[str, Any]]:
        """Every tensor of the set as ``(name, tensor)``, in the order their bytes come in:
        the shards are read several at once, each front to back, on threads of their own, and
        each tensor is handed over as soon as it is in, without a copy (the large compressed
        ones decoded a few ahead on worker threads). For loaders that put each tensor in place
        as it arrives (the Run:ai Model Streamer's ``get_tensors``)."""
        return self._each_made(self.get_tensor)

    def _open_set(self) -> "_native.Set":
        """The native set, or the error a closed file gives (as a :class:`File`'s)."""
        if self._closed:
            raise ArgumentError("File is closed")
        return self._set

    def _file_for(self, name: str) -> File:
        native = self._open_set()
        position = native.shard_of(name)
        if position is None:
            near = native.nearest_name(name)
            hint = f"; did you mean {near!r}?" if near is not None else ""
            raise NotFoundError(f"no object named {name!r} in the set {self.path}{hint}")
        return self._shard(position)

    def _shard(self, position: int) -> File:
        """Shard ``position``, opened (and checked against the index) on first use."""
        self._open_set()  # a closed file opens no shard again
        shard = self._shards.get(position)
        if shard is None:
            shard = File.__new__(File)
            shard.path = self._paths[position]
            shard._verify = self._verify
            shard._unmapped = self._unmapped
            shard._native = self._set.reader(position)
            self._shards[position] = shard
        return shard

    @property
    def version(self) -> str:
        return "set"

    @property
    def shards(self) -> List[str]:
        """The shard files' paths."""
        return list(self._paths)

    @property
    def attributes(self) -> Dict[str, Any]:
        """The index's ``metadata``."""
        return self._open_set().metadata()

    def metadata(self) -> Optional[Dict[str, str]]:
        """The index's ``metadata`` as text, as safetensors gives a file's; ``None`` if empty."""
        return _as_text(self._open_set().metadata())

    def keys(self) -> List[str]:
        return self._open_set().names()

    def offset_keys(self) -> List[str]:
        """Names shard by shard (in the index's order of the shard files), each shard's in
        the order their data lies in it. Opens every shard."""
        return [name for position in range(len(self._paths)) for name in self._shard(position).offset_keys()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._open_set().names())

    def __len__(self) -> int:
        return len(self._open_set().names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._open_set().shard_of(name) is not None

    def info(self, name: str) -> TensorInfo:
        return self._file_for(name).info(name)

    def infos(self) -> List[TensorInfo]:
        return [self.info(n) for n in self.keys()]

    def get_tensor(self, name: str, *, verify: bool = False) -> Any:
        return self._file_for(name).get_tensor(name, verify=verify)

    def _stored(self, name: str, verify: bool = False) -> Any:
        return self._file_for(name)._stored(name, verify)

    __getitem__ = get_tensor

    def get_slice(self, name: str) -> Slice:
        return self._file_for(name).get_slice(name)

    def component(self, name: str, role: str) -> np.ndarray:
        return self._file_for(name).component(name, role)

    def dequantize(self, name: str) -> np.ndarray:
        return self._file_for(name).dequantize(name)

    def verify(self, *, progress: Any = None) -> VerifyReport:
        """Opens every shard (checking it against the index) and verifies it, shard after
        shard, while the set is read ahead beside the checks, several shards at once (as
        ``zt verify`` does). Each error names its shard.
        ``progress``: see :mod:`ztio._progress` (one piece of work per shard)."""
        checked, errors = self._open_set().verify(progress=_progress.callable_or_silent(progress))
        return VerifyReport(checked, list(errors))

    def close(self) -> None:
        """Closes the set and the shards it opened; arrays already read stay valid."""
        for shard in self._shards.values():
            shard.close()
        self._shards.clear()
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "ShardedFile":
        return self

    def __reduce__(self) -> Tuple[Any, ...]:
        return _pickled(self)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ztio.ShardedFile {self.path!r} ({len(self._paths)} shards)>"


def unpacked_if_packed(
    f: Union[File, "ShardedFile"], name: str, stored: Any, takes: Callable[[np.dtype], bool] = lambda _: True
) -> Any:
    """``stored`` (what :meth:`File._stored` gave for ``name``), or, when it is the storage
    bytes of packed 4-, 2- or 6-bit elements whose ml_dtypes type ``takes`` accepts, those
    elements unpacked in the object's shape."""
    if (
        PACKED_READ
        and isinstance(stored, np.ndarray)
        and stored.dtype == np.uint8
        and (stored.ndim == 1 or stored.size <= 1)
    ):
        # Maybe packed elements as their bytes (1-D, or in the object's shape when it holds
        # no more elements than bytes: none or one): the listing says (asked only here: it
        # costs more than most reads).
        info = f.info(name)
        if info.dtype in PACKED_READ and takes(PACKED_READ[info.dtype][0]):
            return unpacked(stored, info.dtype, info.shape)
    return stored


def load_every_tensor(
    f: Union[File, ShardedFile], make: Callable[[str], Any], *, views: bool = False
) -> Dict[str, Any]:
    """Every tensor of ``f``, made by ``make(name)``, as a ``load_file`` returns them: in the
    order their data lies in the file (safetensors' order; a set's shard by shard, in the
    index's order). A single file is read front to back ahead of the reads; a set's shards
    are read several at once, and each tensor is made as soon as its bytes are in, so a
    framework that copies works on the first tensors while the rest come in. Either way the
    large objects that must be decoded are decoded on worker threads (:class:`_DecodeAhead`).
    ``views``: ``make`` makes views and reads nothing; a local set's tensors are then all
    made at once while one stream reads the set in behind them
    (:meth:`ShardedFile._views_read_behind`)."""
    # Objects that hold no numbers (strings, compounds, object arrays, TensorFlow's object
    # graph) are not tensors: passed over, as `verify` and conversions pass over them; a
    # set's, shard by shard.
    if isinstance(f, ShardedFile):
        behind = f._views_read_behind(make) if views else None
        if behind is not None:
            return behind
        by_shard: Dict[int, FrozenSet[str]] = {}

        def skip(name: str) -> bool:
            shard = f._file_for(name)
            names = by_shard.get(id(shard))
            if names is None:
                names = by_shard[id(shard)] = frozenset(shard._native.names_skipped())
            return name in names

        made = dict(f._each_made(lambda name: None if skip(name) else make(name)))
        return {
            name: made[name] if name in made else make(name)
            for name in f.offset_keys()
            if not skip(name)
        }
    skipped = frozenset(f._native.names_skipped())
    if not skipped:
        return dict(f._each_made(make))
    tensors = lambda name: None if name in skipped else make(name)  # noqa: E731
    return {name: t for name, t in f._each_made(tensors) if name not in skipped}


collections.abc.Mapping.register(File)
collections.abc.Mapping.register(ShardedFile)


class _DecodeAhead:
    """The arrays of a whole-file or whole-set load that must be decoded (compressed,
    byte-swapped or gathered) and are not small, decoded on worker threads a few ahead of the
    caller, in the order the caller will ask for them, while the caller converts the ones
    before: a load of a compressed file uses every core, not one. Only the decoding runs on
    the workers (the native read, without the GIL); the framework's conversion stays on the
    caller's thread, with its device and context. At most ``workers`` arrays are decoding or
    wait decoded, so a load onto a device holds few host copies at once."""

    #: Below this many stored bytes to decode in a single file, threads cost more than they
    #: save.
    MIN_BYTES = 1 << 20
    #: Objects that store less are decoded by the caller: handing one to a worker and taking
    #: it back costs tens of microseconds, more than decoding a small tensor (20,000 zstd
    #: tensors of 1 KiB loaded in 0.5 s on one thread and in 1.0 s through the workers).
    MIN_OBJECT_BYTES = 256 << 10

    def __init__(self, workers: int):
        self._waiting: Deque[Tuple["_native.Reader", str]] = collections.deque()
        self._futures: Dict[str, "Future[Any]"] = {}
        self._workers = workers
        self._pool: Optional[ThreadPoolExecutor] = None
        # A file is shared by threads: another may read from it (and take a decode) while
        # the load runs.
        self._lock = threading.Lock()

    @classmethod
    def worth_decoding(cls, reader: "_native.Reader") -> List[Tuple[str, int]]:
        """The objects of ``reader`` that a worker should decode, in file order, each with
        the bytes it stores."""
        return [(name, size) for name, size in reader.names_decoded() if size >= cls.MIN_OBJECT_BYTES]

    @classmethod
    def start(cls, f: File) -> Optional["_DecodeAhead"]:
        """Starts decoding ahead for ``f``, in file order (``f.get_tensor`` then takes from
        it), or returns ``None`` when there is too little to decode or one CPU to decode it
        on."""
        decoded = cls.worth_decoding(f._native)
        workers = min(_native.usable_cpus(), len(decoded))
        if workers < 2 or sum(size for _, size in decoded) < cls.MIN_BYTES:
            return None
        ahead = cls(workers)
        for name, _ in decoded:
            ahead.add(f._native, name)
        f._ahead = ahead
        return ahead

    def add(self, reader: "_native.Reader", name: str) -> None:
        """Queues the decode of ``name`` from ``reader``: it starts as soon as fewer than
        ``workers`` decodes are under way or waiting to be taken."""
        with self._lock:
            self._waiting.append((reader, name))
            self._refill()

    def has(self, name: str) -> bool:
        """Whether ``name`` is queued or decoding here (and not yet taken)."""
        with self._lock:
            return name in self._futures or any(queued == name for _, queued in self._waiting)

    @property
    def full(self) -> bool:
        """Whether every worker's share of the window is taken: a decode added now waits."""
        return len(self._futures) >= self._workers

    def _refill(self) -> None:
        """Starts queued decodes while the window has room (the lock held)."""
        while self._waiting and not self.full:
            reader, name = self._waiting.popleft()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="ztio-decode")
            self._futures[name] = self._pool.submit(reader.array, name, False)

    def take(self, name: str) -> Optional["Future[Any]"]:
        """The decode of ``name`` if it was started (each is taken once), and the next one
        started. The load asks in the order the decodes start in."""
        with self._lock:
            future = self._futures.pop(name, None)
            self._refill()
        return future

    def stop(self, *files: File) -> None:
        """Ends the decoding ahead for ``files``: what was not taken is dropped, the threads
        joined."""
        for f in files:
            f._ahead = None
        with self._lock:
            self._waiting.clear()
            for future in self._futures.values():
                future.cancel()
            pool = self._pool
        if pool is not None:
            pool.shutdown(wait=True)


def unmapped_for_backend(backend: str) -> bool:
    """Whether safetensors' ``backend`` argument asks for positional reads (``"pread"``)
    rather than a map (``"mmap"``, its default); any other value is refused.

    >>> unmapped_for_backend("pread"), unmapped_for_backend("mmap")
    (True, False)
    """
    if backend not in ("mmap", "pread"):
        raise ArgumentError(f"backend {backend!r} is not one of 'mmap', 'pread'")
    return backend == "pread"


def open_any(path: Union[str, "os.PathLike[str]"], **options: Any) -> Union[File, ShardedFile]:
    """A file, a sharded set's index, one file of a split GGUF model (the whole model), or a
    model folder (its model: an index before a single file), opened as :func:`open` does."""
    p = os.fsdecode(path)
    if "://" not in p or p[:5].lower() == "hf://":
        p = _native.model_file(p)  # a Hub repository named without a file is a folder too
    if _native.is_set_path(p):
        return ShardedFile(p, **options)
    return File(p, **options)


def _as_text(attrs: Dict[str, Any], empty_map: bool = False) -> Optional[Dict[str, str]]:
    """Attributes as safetensors' ``metadata()`` gives them: text as is, other values as JSON;
    ``None`` when there are none, unless the file declares an empty map (``empty_map``:
    ``"__metadata__":{}``), which is ``{}``."""
    if not attrs:
        return {} if empty_map else None
    return {k: v if isinstance(v, str) else json.dumps(v, default=repr) for k, v in attrs.items()}


def _scipy_sparse(info: TensorInfo, parts: Dict[str, np.ndarray]) -> Any:
    try:
        import scipy.sparse as sp
    except ImportError:
        return None
    shape = info.shape
    if info.format == "sparse_csr":
        if len(shape) != 2:
            return None
        return sp.csr_array((parts["values"], parts["indices"], parts["indptr"]), shape=shape)
    coords = parts["coords"]
    if len(shape) != 2 and not _scipy_has_nd_coo(sp):
        return None
    return sp.coo_array((parts["values"], tuple(coords)), shape=shape)


def _scipy_has_nd_coo(sp: Any) -> bool:
    try:
        sp.coo_array((np.zeros(0), (np.zeros(0, int),) * 3), shape=(1, 1, 1))
        return True
    except Exception:
        return False


def _pickled(f: Union[File, "ShardedFile"]) -> Tuple[Any, ...]:
    """How a :class:`File` or :class:`ShardedFile` pickles: its path and the options it was
    opened with, so that the copy opens the file again where it is unpickled (a worker
    process started by ``spawn``: PyTorch's DataLoader on macOS and Windows, or anywhere with
    ``multiprocessing_context="spawn"``). The copy reads the file as it then is. A file read
    from bytes, or closed, is refused: there is nothing to open again."""
    options = getattr(f, "_options", None)
    if options is None:
        raise TypeError(f"{f!r} was read from bytes and cannot be pickled: pickle the bytes instead")
    if f.closed:
        raise TypeError(f"{f!r} is closed and cannot be pickled")
    return (_reopened, (type(f), f.path, options))


def _reopened(cls: Any, path: str, options: Dict[str, Any]) -> Union[File, "ShardedFile"]:
    """Unpickles a :class:`File` or :class:`ShardedFile` (see :func:`_pickled`)."""
    return cls(path, **options)


def open(
    path: Union[str, "os.PathLike[str]"],
    *,
    unmapped: bool = False,
    verify: bool = False,
    max_memory: Optional[int] = None,
    writable: bool = False,
) -> Union[File, "ShardedFile"]:
    """Opens a tensor file of any kind ztio reads: zTensor ``.zt`` of every version,
    ``.mag``, ``.safetensors``, GGUF, NumPy and PyTorch files.

    The file is memory-mapped; ``unmapped=True`` reads with positional reads instead (safe
    if another process may truncate the file; every read then copies). ``path`` may also be
    an ``s3://``, ``gs://``, ``az://``, ``http://``, ``https://`` or ``hf://`` (Hugging Face
    Hub: ``hf://owner/name[@revision]/path``, token from ``HF_TOKEN``) URL: the file is then
    read by ranged requests (credentials from the store's usual environment variables;
    docs/remote.md gives what each read costs), and arrays are copies.

    Reads that decode or copy check the digests and checksums the file carries;
    ``verify=True`` makes every read check, zero-copy ones too (one pass over their bytes).

    ``max_memory``: what one read may allocate for a copy larger than the file stores for it
    (a broadcast or strided tensor materialized); by default twice the stored bytes plus
    64 MiB. A read over it raises :class:`ztio.LimitError`; an allocator that fails within it,
    :class:`ztio.OutOfMemoryError`. It also raises the caps on what opening may take for the
    file's listing and its attribute values (256 MiB and more), when set above them.

    ``writable=True`` maps the file privately, copy-on-write: arrays over the map are
    writable, a write copies one page in this process and never reaches the file, and later
    reads through this handle see it.
    """
    return open_any(path, unmapped=unmapped, verify=verify, max_memory=max_memory, writable=writable)


class _SafeOpen:
    """What :func:`safe_open` returns: safetensors' ``safe_open`` surface over a
    :class:`File`."""

    def __init__(self, path: Any, framework: str, device: str, *, opened: Any = None, backend: str = "mmap"):
        self._to_tensor = _frameworks.converter(framework)
        self._framework = framework
        self._device = _frameworks.checked_device(framework, device)
        unmapped = unmapped_for_backend(backend)
        self._backend = backend
        # Writable arrays, as safetensors gives: a private copy-on-write map (or positional
        # reads, safetensors' "pread" backend).
        self._file = opened if opened is not None else open_any(path, writable=True, unmapped=unmapped)

    def keys(self) -> List[str]:
        return self._file.keys()

    def offset_keys(self) -> List[str]:
        """Names in the order of their data in the file."""
        return self._file.offset_keys()

    def metadata(self) -> Optional[Dict[str, str]]:
        return self._file.metadata()

    def get_tensor(self, name: str) -> Any:
        try:
            return self._to_tensor(self._file, name, self._device)
        except NotFoundError:
            if name in self._file:
                raise
            raise NotFoundError(f"File does not contain tensor {name}") from None

    def get_tensors(self) -> Dict[str, Any]:
        """Every tensor, in the order their data lies in the file (as safetensors)."""
        return load_every_tensor(self._file, self.get_tensor)

    def get_slice(self, name: str) -> "_SafeSlice":
        try:
            return _SafeSlice(
                self._file._file_for(name),
                name,
                self._framework,
                self._device,
                framework_rules=self._framework in ("pt", "torch", "pytorch", "paddle") and self._backend == "mmap",
            )
        except NotFoundError:
            if name in self._file:
                raise
            raise NotFoundError(f"File does not contain tensor {name}") from None

    def __enter__(self) -> "_SafeOpen":
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def __reduce__(self) -> Tuple[Any, ...]:
        _pickled(self._file)  # refuses what cannot be opened again
        return (_reopened_safe_open, (self._file.path, self._framework, self._device, self._backend))


def _reopened_safe_open(path: str, framework: str, device: str, backend: str) -> _SafeOpen:
    """Unpickles what :func:`safe_open` returned: the file opened again (see :func:`_pickled`)."""
    return _SafeOpen(path, framework, device, backend=backend)


class _SafeSlice(Slice):
    """What ``safe_open(...).get_slice`` returns: safetensors 0.8's slice, with its rules and
    messages (``_slice_rules``), handing back the framework's tensors. A :class:`Slice`
    itself, not a wrapper of one: a slice of a small tensor costs about as much in Python
    calls as in reading."""

    __slots__ = ("_framework", "_device", "_framework_rules")

    def __init__(self, file: "File", name: str, framework: str, device: str, framework_rules: bool):
        # Slice.__init__'s two lines, not a call to it: loaders make a slice per tensor just
        # to ask its shape and type (transformers does, for every checkpoint it loads).
        self._file = file
        self._name = name
        self._shape, self._dtype = file._native.shape_dtype(name)
        file.__dict__["_sliced"] = True  # close() keeps an open twin for the slices
        self._framework = framework
        self._device = device
        # torch and Paddle over a map: the framework's own indexing (safetensors indexes the
        # whole tensor there).
        self._framework_rules = framework_rules

    def __getitem__(self, key: Any) -> Any:
        if self._file.closed:
            self._file = self._file._kept_for_slices()
        shape = self._shape
        if self._framework_rules and not _rows_inside(key, shape):
            # A tensor whose bytes lie in the map as they are: the framework indexes a view
            # of the whole of it, as safetensors does, and a box of columns is a strided view
            # too, not a copy (rows inside are a view on the path below, without the
            # framework's indexing). The box's pages are asked for first, so that touching
            # the view in a cold file reads them and not the disk's read-around.
            whole = None
            plain = _slice_rules.plain_index(key, shape)
            if self._device == "cpu" and self._dtype != "f4_e2m1":
                # A key other than a plain box (lists, None, bools) may touch any part of the
                # tensor: told as a read of all of it.
                whole = _frameworks.mapped(self._framework, self._file, self._name, told=not plain)
            if whole is not None:
                if plain:
                    try:
                        box, _ = _dims(key, shape)
                        self._file._reader().will_need_slice(self._name, box, own_map=True)
                    except Error:
                        pass  # a hint only: the answer, or the error, is torch's below
                return whole[key]
            if not plain:
                # None, lists, bools, indexes past the end: what the framework makes of them.
                to_tensor = _frameworks.converter(self._framework)
                return to_tensor(self._file, self._name, self._device)[key]
            values = Slice.__getitem__(self, key)
        else:
            # safetensors' own parse of the index, in the native module (python/src/slice_rules.rs);
            # rows inside the tensor mean the same under the framework's rules.
            values, local = self._file._reader().slice_by_safetensors_rules(
                self._name, key, 4 if self._dtype == "f4_e2m1" else 8
            )
            if local is not None:
                values = values[local]
        if isinstance(values, np.generic):
            values = np.array(values)  # a 0-d array, as safetensors gives, not a numpy scalar
        kind = STAND_INS.get(self._dtype or "") if STAND_INS else None
        return _frameworks.from_numpy(self._framework, values, self._device, kind)


def _rows_inside(key: Any, shape: Tuple[int, ...]) -> bool:
    """Whether ``key`` is rows ``a:b`` inside the tensor, given as Python ints: an index that
    means the same to torch and Paddle as to safetensors' own parse."""
    return (
        type(key) is slice
        and bool(shape)
        and key.step is None
        and (key.start is None or (type(key.start) is int and 0 <= key.start < shape[0]))
        and (key.stop is None or (type(key.stop) is int and (key.start or 0) < key.stop <= shape[0]))
    )


def safe_open(filename: Any, framework: str = "numpy", device: str = "cpu", backend: str = "mmap") -> _SafeOpen:
    """safetensors' ``safe_open``, for every file kind ztio reads (``filename``: a path, a set's
    index, a model folder or a URL; named as safetensors names it, for callers that pass it by
    name).

    >>> import ztio, numpy as np, tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()  # removed when the example ends
    >>> p = os.path.join(tmp.name, "m.safetensors")
    >>> import ztio.numpy
    >>> ztio.numpy.save_file({"x": np.ones((4, 2), np.float32)}, p)
    >>> with ztio.safe_open(p, framework="np") as f:
    ...     print(f.keys(), f.get_slice("x")[1:3].shape)
    ['x'] (2, 2)
    """
    return _SafeOpen(filename, framework, device, backend=backend)

