"""safetensors' four functions (``load_file``, ``load``, ``save_file``, ``save``) for a
framework whose tensors go to and from numpy arrays: what ``ztio.flax``, ``ztio.tensorflow``,
``ztio.paddle`` and ``ztio.mlx`` are made of. Part of the core: it imports no framework; each
framework module hands it its two conversions and registers itself for ``safe_open``.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from . import _frameworks
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
    names: Tuple[str, ...], what: str, to_framework: ToFramework, to_numpy: ToNumpy = np.asarray
) -> Tuple[Callable[..., Dict[str, Any]], Callable[..., Dict[str, Any]], Callable[..., None], Callable[..., bytes]]:
    """``(load_file, load, save_file, save)`` for a framework, registered for ``safe_open``
    under ``names``; ``what`` names its tensors in errors ("JAX arrays")."""

    def tensor(f: Any, name: str, device: str = "cpu") -> Any:
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
        return to_framework(array, device, kind)

    def read_all(f: Any, device: str) -> Dict[str, Any]:
        try:
            return load_every_tensor(f, lambda name: tensor(f, name, device))
        finally:
            f.close()

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
