"""safetensors' ``safetensors.torch`` functions over ztio, for when torch is installed.

Tensors are CPU copies moved to ``device``: a torch tensor cannot be read-only, and one
pointing into a read-only map would crash the interpreter on its first in-place write.
bf16, FP8 (float8_e4m3fn, float8_e5m2, and the fnuz types where torch has them), complex and
the unsigned types map to torch's own dtypes, without ml_dtypes.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

from . import _frameworks
from ._file import File
from ._write import Writer
from .errors import ArgumentError

__all__ = ["load_file", "save_file"]

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


def _tensor(f: File, name: str, device: str = "cpu") -> Any:
    torch = _torch()
    info = f.info(name)
    if info.format != "dense":
        raise ArgumentError(f"object {name!r} is {info.format}; torch tensors are read from dense objects only")
    attr = _TORCH.get(info.dtype or "")
    dtype = getattr(torch, attr, None) if attr else None
    if dtype is None:
        raise ArgumentError(f"torch has no dtype for {info.dtype} (object {name!r})")
    raw = f.component(name, "data").view(np.uint8)
    t = torch.from_numpy(raw.copy()).view(dtype).reshape(info.shape)
    return t if device == "cpu" else t.to(device)


def load_file(filename: Union[str, "os.PathLike[str]"], device: Union[str, int] = "cpu") -> Dict[str, Any]:
    """Every dense tensor of a file as torch tensors on ``device``."""
    f = File(filename)
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


def _storage(ours: str):
    if ours.startswith("f8_"):
        return "u8", ours
    if ours == "complex64":
        return "f32", "complex64"
    if ours == "complex128":
        return "f64", "complex128"
    return ours, None


_frameworks.register(("pt", "torch"), _tensor)
