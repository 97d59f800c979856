"""safetensors' ``safetensors.flax`` functions over ztio: JAX arrays in and out.

``load_file``/``load`` give ``jax.Array`` values (JAX copies each into its own buffer, as
with safetensors); ``save_file``/``save`` take JAX arrays (or anything ``numpy.asarray``
takes). bf16 and the FP8 types travel as ml_dtypes' numpy types, which JAX uses itself.
``safe_open(..., framework="flax")`` (or ``"jax"``) reads JAX arrays too.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

from . import _frameworks
from ._file import File, open_any
from ._write import safetensors_bytes
from ._write import save_file as _save
from .errors import ArgumentError

__all__ = ["load_file", "save_file", "load", "save"]


def _jnp():
    import jax.numpy as jnp

    return jnp


def _tensor(f: File, name: str, device: str = "cpu") -> Any:
    info = f.info(name)
    if info.format != "dense":
        raise ArgumentError(f"object {name!r} is {info.format}; JAX arrays are read from dense objects only")
    return _jnp().asarray(f.get_tensor(name))


def _numpy(tensors: Mapping[str, Any]) -> Dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in tensors.items()}


def load_file(filename: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """Every dense tensor of a file as JAX arrays."""
    f = open_any(filename)
    try:
        return {name: _tensor(f, name) for name in f.keys()}
    finally:
        f.close()


def load(data: bytes) -> Dict[str, Any]:
    """Every dense tensor of a file's bytes as JAX arrays: safetensors' ``load``."""
    f = File._of_bytes(data)
    try:
        return {name: _tensor(f, name) for name in f.keys()}
    finally:
        f.close()


def save_file(
    tensors: Mapping[str, Any],
    filename: Union[str, "os.PathLike[str]"],
    metadata: Optional[Mapping[str, str]] = None,
) -> None:
    """Writes JAX arrays to ``filename``: safetensors for a ``.safetensors`` name, zTensor v2
    otherwise."""
    _save(_numpy(tensors), filename, metadata)


def save(tensors: Mapping[str, Any], metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """The bytes of a ``.safetensors`` file holding ``tensors``: safetensors' ``save``."""
    return safetensors_bytes(_numpy(tensors), metadata)


_frameworks.register(("flax", "jax"), _tensor, lambda array, device="cpu": _jnp().asarray(array))
