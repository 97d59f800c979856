"""safetensors' ``safetensors.torch`` functions over ztio, for when torch is installed.

A tensor stored raw, little-endian and packed in the file that was opened is served without a
copy, as safetensors serves it: from a private copy-on-write map of the file
(``torch.UntypedStorage.from_file(path, shared=False)``), one per open file, so a tensor is
writable and writing to it never touches the file. Other tensors (compressed, big-endian,
strided, in a shard, misaligned for their type, or read with ``verify=True``) are decoded by
the library into a fresh buffer that torch takes over, without a second copy.
bf16, FP8 (float8_e4m3fn, float8_e5m2, and the fnuz types where torch has them), complex and
the unsigned types map to torch's own dtypes, without ml_dtypes.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

from . import _frameworks
from ._file import File, open_any
from ._write import Writer
from .errors import ArgumentError

__all__ = ["load_file", "save_file", "load", "save"]

# our element name -> torch dtype attribute
_TORCH = {
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u64": "uint64",
    "u32": "uint32",
    "u16": "uint16",
    "u8": "uint8",
    "bool": "bool",
    "f8_e4m3fn": "float8_e4m3fn",
    "f8_e5m2": "float8_e5m2",
    "f8_e4m3fnuz": "float8_e4m3fnuz",
    "f8_e5m2fnuz": "float8_e5m2fnuz",
    "f8_e8m0": "float8_e8m0fnu",
    "complex64": "complex64",
    "complex128": "complex128",
}


def _torch():
    import torch

    return torch


def _private_map(f: File, torch: Any) -> Any:
    """The file as one private (copy-on-write) torch storage, made once per open file; `None`
    for what is not a local file."""
    storage = getattr(f, "_torch_storage", None)
    if storage is None:
        path = f.path
        if "://" in path or not os.path.isfile(path):
            return None
        size = os.path.getsize(path)
        if size == 0:
            return None
        storage = torch.UntypedStorage.from_file(path, False, size)
        f._torch_storage = storage
    return storage


def _mapped(f: File, info: Any, dtype: Any, torch: Any) -> Optional[Any]:
    """The tensor over the private map of the file, or `None` when its bytes are not the
    tensor as they lie (see the module's doc)."""
    if getattr(f, "_verify", False) or len(info.components) != 1:
        return None
    c = info.components[0]
    itemsize = torch.empty((), dtype=dtype).element_size()
    numel = 1
    for d in info.shape:
        numel *= d
    if (
        c.encoding != "raw"
        or c.byte_order != "little"
        or c.file != 0
        or c.arranged is not False
        or c.length != numel * itemsize
        or c.offset % itemsize != 0
    ):
        return None
    storage = _private_map(f, torch)
    if storage is None or c.offset + c.length > storage.nbytes():
        return None
    raw = torch.empty(0, dtype=torch.uint8)
    raw.set_(storage, c.offset, (c.length,))
    return raw.view(dtype).reshape(info.shape)


def _tensor(f: File, name: str, device: str = "cpu") -> Any:
    torch = _torch()
    f = f._file_for(name)  # a set's shard
    info = f.info(name)
    if info.format != "dense":
        raise ArgumentError(f"object {name!r} is {info.format}; torch tensors are read from dense objects only")
    if info.defect:
        f.component(name, "data")  # raises the defect as the library words it
    attr = _TORCH.get(info.dtype or "")
    dtype = getattr(torch, attr, None) if attr else None
    if dtype is None:
        raise ArgumentError(f"torch has no dtype for {info.dtype} (object {name!r})")
    if any(d == 0 for d in info.shape):
        # No bytes to view: torch cannot view an empty byte buffer as another dtype.
        t = torch.empty(tuple(info.shape), dtype=dtype)
    else:
        t = _mapped(f, info, dtype, torch)
        if t is None:
            raw = f.component(name, "data").view(np.uint8)
            if not raw.flags.writeable:
                # A view of the read-only map (a file that is no local file, a shard):
                # torch tensors are writable, so this one is a copy.
                raw = raw.copy()
            t = torch.from_numpy(raw).view(dtype).reshape(info.shape)
    return t if device == "cpu" else t.to(device)



def load_file(filename: Union[str, "os.PathLike[str]"], device: Union[str, int] = "cpu") -> Dict[str, Any]:
    """Every dense tensor of a file as torch tensors on ``device``."""
    f = open_any(filename)
    try:
        return {name: _tensor(f, name, str(device) if not isinstance(device, str) else device) for name in f.keys()}
    finally:
        f.close()


def save_file(
    tensors: Mapping[str, Any],
    filename: Union[str, "os.PathLike[str]"],
    metadata: Optional[Mapping[str, str]] = None,
) -> None:
    """Writes torch tensors (moved to the CPU, made contiguous) to ``filename``:
    safetensors for a ``.safetensors`` name, zTensor v2 otherwise."""
    from . import _native

    items = _items(tensors)
    path = os.fspath(filename)
    if path.endswith(".safetensors"):
        meta = dict(metadata or {})
        _native.save_safetensors(items, meta, path)
        return
    with Writer(path) as w:
        for k, v in (metadata or {}).items():
            w.set_attribute(k, v)
        for name, dtype, logical, shape, data in items:
            w.add_bytes(name, shape, dtype, logical, data)


def save(tensors: Mapping[str, Any], metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """The bytes of a ``.safetensors`` file holding ``tensors``: safetensors' ``save``."""
    from . import _native

    return _native.safetensors_bytes(_items(tensors), dict(metadata or {}))


def load(data: bytes, device: Union[str, int] = "cpu") -> Dict[str, Any]:
    """Every dense tensor of a file's bytes as torch tensors on ``device``: safetensors'
    ``load``. Each tensor is a copy (torch tensors are writable; ``data`` is not)."""
    f = File._of_bytes(data)
    try:
        return {name: _tensor(f, name, str(device) if not isinstance(device, str) else device) for name in f.keys()}
    finally:
        f.close()


def _items(tensors: Mapping[str, Any]) -> list:
    """`(name, dtype, logical, shape, bytes)` for each tensor, as the native writers take them."""
    torch = _torch()
    by_dtype = {getattr(torch, v): k for k, v in _TORCH.items() if hasattr(torch, v)}
    items = []
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        ours = by_dtype.get(t.dtype)
        if ours is None:
            raise ArgumentError(f"cannot store torch dtype {t.dtype} (tensor {name!r})")
        dtype, logical = _storage(ours)
        data = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else np.zeros(0, np.uint8)
        items.append((name, dtype, logical, list(t.shape), data))
    return items


def _storage(ours: str):
    if ours.startswith("f8_"):
        return "u8", ours
    if ours == "complex64":
        return "f32", "complex64"
    if ours == "complex128":
        return "f64", "complex128"
    return ours, None


_frameworks.register(("pt", "torch"), _tensor)
