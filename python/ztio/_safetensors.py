"""The names of the top-level ``safetensors`` module, over ztio: what a ``safetensors``
package that forwards to ztio exposes (tools/safetensors_suite/run.py builds one).

``safe_open`` and the errors are ztio's own; ``TensorSpec``, ``serialize`` and
``serialize_file`` take tensors by raw pointer as safetensors 0.8 does (the caller keeps the
memory alive while they run); ``deserialize`` gives each tensor's bytes; ``_safe_open_handle``
opens an open file object.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _native
from ._file import File, _SafeOpen, safe_open
from ._write import save_file as _save_file
from .errors import Error

__all__ = [
    "safe_open", "SafetensorError", "TensorSpec", "serialize", "serialize_file", "deserialize",
    "_safe_open_handle",
]

#: safetensors' one error class: every ztio error is one.
SafetensorError = Error

#: safetensors' dtype names (and numpy's) -> numpy dtypes.
_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "I64": "int64", "I32": "int32",
    "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16",
    "U8": "uint8", "BOOL": "bool",
}


@dataclass(frozen=True)
class TensorSpec:
    """A tensor for :func:`serialize`: its dtype (safetensors' name, ``"F32"``, or numpy's,
    ``"float32"``), shape, and ``data_len`` bytes at address ``data_ptr``."""

    dtype: str
    shape: Sequence[int]
    data_ptr: int
    data_len: int

    def __post_init__(self) -> None:
        try:
            np.dtype(_DTYPES.get(self.dtype, self.dtype))
        except TypeError:
            raise SafetensorError(f"unknown dtype {self.dtype!r}") from None

    def _array(self) -> np.ndarray:
        dtype = np.dtype(_DTYPES.get(self.dtype, self.dtype))
        raw = (ctypes.c_char * self.data_len).from_address(self.data_ptr) if self.data_len else b""
        return np.frombuffer(raw, dtype=dtype).reshape(tuple(self.shape))


def _arrays(tensor_dict: Mapping[str, Any]) -> Dict[str, np.ndarray]:
    out = {}
    for name, spec in tensor_dict.items():
        if not isinstance(spec, TensorSpec):
            raise TypeError(f"tensor {name!r} is a {type(spec).__name__}, not a TensorSpec")
        out[name] = spec._array()
    return out


def serialize(tensor_dict: Mapping[str, TensorSpec], metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """The bytes of a ``.safetensors`` file holding the tensors."""
    from ._write import safetensors_bytes

    return safetensors_bytes(_arrays(tensor_dict), metadata)


def serialize_file(
    tensor_dict: Mapping[str, TensorSpec],
    filename: Any,
    metadata: Optional[Mapping[str, str]] = None,
) -> None:
    """Writes the tensors as a ``.safetensors`` file (whatever its name), atomically."""
    items = []
    from ._write import _safetensors_items, _text_metadata

    items = _safetensors_items(_arrays(tensor_dict))
    _native.save_safetensors(items, _text_metadata(metadata), os.fsdecode(filename))


def deserialize(bytes: Any) -> List[Tuple[str, Dict[str, Any]]]:
    """safetensors' ``deserialize``: each tensor of a file's bytes as ``(name, {"shape": [...],
    "dtype": "F32", "data": bytearray(...)})``, its stored little-endian bytes copied once, in
    the order of their data in the file (safetensors gives them in no set order). The bytes
    may be of any kind ztio reads; a dtype is named as safetensors names it.

    >>> import numpy as np, ztio.numpy
    >>> deserialize(ztio.numpy.save({"x": np.arange(2, dtype=np.int16)}))
    [('x', {'shape': [2], 'dtype': 'I16', 'data': bytearray(b'\\x00\\x00\\x01\\x00')})]
    """
    f = File._of_bytes(bytes)
    try:
        out = []
        for name in f.offset_keys():
            part = f.get_slice(name)
            values = np.ascontiguousarray(f.get_tensor(name))
            data = bytearray(values.reshape(-1).view(np.uint8))
            out.append((name, {"shape": part.get_shape(), "dtype": part.get_dtype(), "data": data}))
        return out
    finally:
        f.close()


def _safe_open_handle(f: Any, framework: str = "numpy", device: str = "cpu", *, backend: str = "mmap") -> _SafeOpen:
    """:func:`safe_open` over an open file object ``f``: by its path when it has one, else by
    the bytes it reads (``backend`` then has nothing to choose)."""
    name = getattr(f, "name", None)
    if isinstance(name, (str, bytes, os.PathLike)) and os.path.isfile(name):
        return safe_open(name, framework=framework, device=device, backend=backend)
    return _SafeOpen(None, framework, device, opened=File._of_bytes(f.read()), backend=backend)


del _save_file
