"""Writing: :func:`save_file` for a dict of arrays, :class:`Writer` for one array at a time.

zTensor files go through the library's writer, so the bytes are those the Rust ``Writer``
makes for the same arrays in the same order (``save_file`` adds them in name order, the
canonical order of v2). Any numpy array is accepted: non-contiguous or big-endian ones are
copied once into little-endian row-major order; bf16 and FP8 need their ml_dtypes dtypes.
A path ending in ``.safetensors`` gets a safetensors file instead (the bytes
``safetensors.numpy.save_file`` writes).
"""

from __future__ import annotations

import collections.abc
import os
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native, _progress
from ._dtypes import StandIn, element_of, packed, packed_element, stand_in_element
from .errors import ArgumentError, ZtWarning

__all__ = ["Writer", "save_file"]

PathLike = Union[str, "os.PathLike[str]"]


def _level(compression: Union[None, bool, int]) -> Optional[int]:
    """``None``/``False``: raw; ``True``: zstd level 3; an int: that zstd level."""
    if compression is None or compression is False:
        return None
    if compression is True:
        return 3
    if isinstance(compression, int) and 1 <= compression <= 22:
        return int(compression)
    raise ArgumentError(f"compression must be None, True or a zstd level 1-22, not {compression!r}")


def _little_endian_row_major(name: str, array: Any) -> Tuple[Tuple[str, Optional[str]], np.ndarray]:
    """An array's element type, and the array in little-endian row-major order (itself
    when it already is); an array that cannot be stored is refused by ``name``."""
    if isinstance(array, StandIn):
        a = np.asarray(array.array)
        element = stand_in_element(array)
    else:
        a = np.asarray(array)
        try:
            element = element_of(a.dtype)
        except ArgumentError as e:
            # A nested dict or a string reaches here as numpy's object or text array.
            given = "" if isinstance(array, np.ndarray) else f" (given a {type(array).__name__})"
            raise ArgumentError(f"tensor {name!r}{given}: {e}") from None
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    if not a.flags.c_contiguous:
        a = a.copy(order="C")  # not ascontiguousarray: it makes a 0-d array 1-d
    return element, a


def _prepared(name: str, array: Any) -> Tuple[Tuple[str, Optional[str]], Tuple[int, ...], np.ndarray]:
    """An array's element type, shape, and its bytes as a flat uint8 array (a view when the
    array is already little-endian and C-contiguous)."""
    element, a = _little_endian_row_major(name, array)
    sub_byte = packed_element(a.dtype)
    if sub_byte is not None:
        return element, a.shape, packed(a, sub_byte[1])
    return element, a.shape, a.reshape(-1).view(np.uint8)


class Writer:
    """A zTensor file written one array at a time, with memory bounded by the largest array.

    Nothing is at ``path`` until :meth:`finish` (or the end of a ``with`` block without an
    exception); the old file stays intact until then, and an exception inside the block
    leaves it untouched and no temporary file behind.

    >>> import ztio, numpy as np, tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()  # removed when the example ends
    >>> path = os.path.join(tmp.name, "big.zt")
    >>> with ztio.Writer(path, compression=True) as w:
    ...     for i in range(3):
    ...         w.add(f"layer.{i}", np.full((4, 4), i, np.float32))
    ...     w.set_attribute("layers", 3)
    >>> ztio.open(path).keys()
    ['layer.0', 'layer.1', 'layer.2']

    ``version`` is ``"v2"`` (default), ``"v2-compact"`` (4096-byte packing) or ``"v1.2"``;
    ``compression`` ``None``, ``True`` (zstd 3) or a zstd level; ``digest`` ``None`` (v2:
    xxh3), ``"xxh3"``, ``"sha256"`` or ``"crc32c"`` (v1.2 only); ``sync=False`` skips the
    wait for the disk at the end.
    """

    def __init__(
        self,
        path: PathLike,
        *,
        version: str = "v2",
        compression: Union[None, bool, int] = None,
        digest: Optional[str] = None,
        sync: bool = True,
    ):
        self._compression = _level(compression)
        self._digest = digest
        self._native = _native.Writer(os.fsdecode(path), version=version, sync=sync)

    def add(
        self,
        name: str,
        array: Any,
        *,
        compression: Union[None, bool, int, str] = "default",
        digest: Optional[str] = "default",
        attributes: Optional[Mapping[str, Any]] = None,
    ) -> None:
        """Writes one array now (compressed and hashed with the GIL released)."""
        (dtype, logical), shape, data = _prepared(name, array)
        level = self._compression if compression == "default" else _level(compression)  # type: ignore[arg-type]
        dig = self._digest if digest == "default" else digest
        self._native.add(
            name,
            list(shape),
            dtype,
            logical,
            data,
            compression=level,
            digest=dig,
            attributes=dict(attributes) if attributes is not None else None,
        )

    def add_bytes(
        self,
        name: str,
        shape: Sequence[int],
        dtype: str,
        logical: Optional[str],
        data: Any,
        *,
        compression: Union[None, bool, int, str] = "default",
        digest: Optional[str] = "default",
    ) -> None:
        """Writes one object from its little-endian bytes (any C-contiguous buffer), with its
        element type by name: ``dtype`` (``"f32"``, ``"u8"``, ...) and ``logical``
        (``"bf16"``-style logical types, ``"f8_e4m3fn"``, or ``None``). For frameworks whose
        tensors are not numpy arrays: they hand their bytes over without a copy."""
        level = self._compression if compression == "default" else _level(compression)  # type: ignore[arg-type]
        dig = self._digest if digest == "default" else digest
        self._native.add(
            name, list(shape), dtype, logical, data, compression=level, digest=dig
        )

    def set_attribute(self, key: str, value: Any) -> None:
        """Sets a file attribute (str, int, float, bool, bytes, None, list, dict)."""
        self._native.set_attribute(key, value)

    def finish(self) -> None:
        """Writes the manifest and puts the file in place."""
        self._native.finish()

    def abort(self) -> None:
        """Drops the file being written; the old file at the path stays as it was."""
        self._native.abort()

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()


def safetensors_bytes(tensors: Mapping[str, Any], metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """The bytes of a ``.safetensors`` file holding ``tensors`` (numpy arrays or anything
    ``numpy.asarray`` takes), with ``metadata`` as ``__metadata__``: safetensors' ``save``."""
    return _native.safetensors_bytes(_safetensors_items(tensors), _text_metadata(metadata))


def _text_metadata(metadata: Optional[Mapping[str, Any]]) -> Optional[Dict[str, str]]:
    """``metadata`` as safetensors' header holds it: text to text. Anything else is a
    ``TypeError``, the class safetensors raises, naming the entry at fault. ``None`` stays
    ``None`` (no ``__metadata__``), and an empty mapping writes ``{}``, as safetensors does:
    its ``metadata()`` tells the two apart.

    >>> _text_metadata({"format": 1})
    Traceback (most recent call last):
    TypeError: metadata 'format': a value of type int, not str (safetensors metadata is text)
    """
    if metadata is None:
        return None
    if not isinstance(metadata, collections.abc.Mapping):
        raise TypeError(f"metadata: a {type(metadata).__name__}, not a dict of str to str")
    meta = dict(metadata)
    for k, v in meta.items():
        if not isinstance(k, str):
            raise TypeError(f"metadata key {k!r}: of type {type(k).__name__}, not str "
                            "(safetensors metadata is text)")
        if not isinstance(v, str):
            raise TypeError(f"metadata {k!r}: a value of type {type(v).__name__}, not str "
                            "(safetensors metadata is text)")
    return meta


def _safetensors_items(
    tensors: Mapping[str, Any],
) -> List[Tuple[str, str, Optional[str], Optional[Tuple[int, ...]], np.ndarray]]:
    """``(name, dtype, logical, None, array)`` for each, as the native writers take them
    (``None``: the shape is the array's; packed sub-byte elements give their shape and
    bytes). No object per tensor beyond the tuple where the
    array is already little-endian and C-contiguous: a million tiny tensors stay small."""
    items = []
    for name in sorted(tensors):
        (dtype, logical), a = _little_endian_row_major(name, tensors[name])
        sub_byte = packed_element(a.dtype)
        if sub_byte is not None:
            items.append((name, dtype, logical, a.shape, packed(a, sub_byte[1])))
        else:
            items.append((name, dtype, logical, None, a))
    return items


def writes_safetensors(path: Union[str, "os.PathLike[str]"], *, drop_in: bool) -> bool:
    """Whether a save to ``path`` writes safetensors rather than zTensor. ``ztio.save_file``
    writes zTensor unless the name ends in ``.safetensors``; the framework modules, which
    stand in for safetensors' own, write safetensors unless the name ends in ``.zt``, so that
    code swapped over from safetensors never writes a file safetensors cannot read.

    >>> writes_safetensors("model.bin", drop_in=True), writes_safetensors("model.bin", drop_in=False)
    (True, False)
    """
    name = os.fsdecode(path)
    return not name.endswith(".zt") if drop_in else name.endswith(".safetensors")


def save_file(
    tensors: Mapping[str, Any],
    path: PathLike,
    metadata: Optional[Mapping[str, Any]] = None,
    compression: Union[None, bool, int] = None,
    digest: Optional[str] = None,
    *,
    version: str = "v2",
    sync: bool = True,
    progress: Any = None,
) -> None:
    """Writes a dict of arrays to ``path``, replacing it atomically.

    A ``.safetensors`` path gets a safetensors file (``metadata`` must then be text, and
    ``compression``/``digest`` are refused: safetensors has neither); any other path a
    zTensor file (v2 unless ``version="v1.2"``) with ``metadata`` as file attributes.
    v2 places every tensor on a 64 KiB boundary (the original's packing): for many small
    tensors, ``version="v2-compact"`` (4 KiB) or ``"v1.2"`` (64 bytes) keeps the file small
    (a million 16-byte tensors make 62 GB of v2; the padding is left as holes, so on disk it
    takes about a page a tensor, but a copy or an upload carries all of it).
    ``progress``: see :mod:`ztio._progress` (bytes of the arrays written, as ``"save"``).
    """
    path = os.fsdecode(path)
    names = sorted(tensors)
    told = _progress.callable_or_silent(progress)
    if writes_safetensors(path, drop_in=False):
        if compression or digest:
            raise ArgumentError("safetensors files have no compression and no digests")
        _save_safetensors(tensors, path, metadata, sync=sync, told=told)
        return
    total = sum(int(getattr(tensors[name], "nbytes", 0)) for name in names)
    done = 0
    told("save", 0, total, False)
    with Writer(path, version=version, compression=compression, digest=digest, sync=sync) as w:
        for key, value in (metadata or {}).items():
            w.set_attribute(key, value)
        for name in names:
            w.add(name, tensors[name])
            done += int(getattr(tensors[name], "nbytes", 0))
            told("save", done, total, False)
    told("save", done, total, True)
    _warn_if_mostly_padding(path, version, done, len(names))


# Padding worth a word (as ``zt convert`` says it): below this, 64 KiB packing goes unremarked.
_NOTEWORTHY_PADDING = 16 << 20


def _warn_if_mostly_padding(path: str, version: str, data: int, count: int) -> None:
    """A :class:`ZtWarning` when v2's 64 KiB packing made the file just written more padding
    than data, naming the versions that pack closer; the file stays as written."""
    if version != "v2":
        return
    size = os.stat(path).st_size
    if size - data >= _NOTEWORTHY_PADDING and size - data > data:
        warnings.warn(
            f"{path} takes {size} bytes for {data} bytes of data in {count} tensors: v2 puts "
            'each on a 64 KiB boundary, as the original does; version="v2-compact" packs them '
            'on 4 KiB boundaries, version="v1.2" on 64 bytes',
            ZtWarning,
            stacklevel=3,
        )


def save_file_drop_in(
    tensors: Mapping[str, Any],
    path: PathLike,
    metadata: Optional[Mapping[str, str]] = None,
    *,
    sync: bool = True,
    progress: Any = None,
) -> None:
    """The framework modules' ``save_file``: safetensors, unless the name ends in ``.zt``
    (:func:`writes_safetensors`)."""
    if not writes_safetensors(path, drop_in=True):
        save_file(tensors, path, metadata, sync=sync, progress=progress)
        return
    _save_safetensors(tensors, os.fsdecode(path), metadata, sync=sync, told=_progress.callable_or_silent(progress))


def _save_safetensors(
    tensors: Mapping[str, Any], path: str, metadata: Optional[Mapping[str, Any]], *, sync: bool, told: Any
) -> None:
    items = _safetensors_items(tensors)
    total = sum(int(item[4].nbytes) for item in items)
    told("save", 0, total, False)
    _native.save_safetensors(items, _text_metadata(metadata), path, sync=sync)
    told("save", total, total, True)
