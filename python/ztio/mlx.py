"""safetensors' ``safetensors.mlx`` functions over ztio: ``mlx.core.array`` in and out (MLX
runs on Apple silicon, and on Linux's CPU with ``pip install "mlx[cpu]"``; where it is not
installed these raise ``ImportError``). ``safe_open(..., framework="mlx")`` reads them too.
MLX is imported only when called."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._bridge import CopyOnWorkers, functions
from ._dtypes import stand_in
from .errors import ArgumentError

__all__ = ["load_file", "save_file", "load", "save"]


def _mlx_array(array: np.ndarray, device: str = "cpu", kind: Optional[str] = None) -> Any:
    return _typed(_copy(array, device, kind), array, device, kind)


def _copy(array: np.ndarray, device: str = "cpu", kind: Optional[str] = None) -> Any:
    """``array``'s bytes copied into an MLX array (bf16 as its bits, uint16): data, not an
    operation, so it may be made on any thread; viewing it as bf16 is an operation, bound to
    the stream of the thread that makes it, and is left to :func:`_typed`."""
    import mlx.core as mx

    name = kind or array.dtype.name
    if name == "bfloat16":
        # numpy's bfloat16 (ml_dtypes) has no buffer format MLX knows: its bits as uint16.
        return mx.array(array.view(np.uint16))
    if name.startswith(("float8_", "float4_", "float6_")):
        raise ArgumentError(f"MLX has no {name} type")
    return mx.array(array)


def _typed(copied: Any, array: np.ndarray, device: str = "cpu", kind: Optional[str] = None) -> Any:
    """``copied`` (made by :func:`_copy` from ``array``) as the MLX array of ``array``'s type."""
    import mlx.core as mx

    return copied.view(mx.bfloat16) if (kind or array.dtype.name) == "bfloat16" else copied


def _numpy(array: Any) -> Any:
    import mlx.core as mx

    if getattr(array, "dtype", None) == mx.bfloat16:
        # A view of the array's own memory (MLX exports it as a buffer), not a copy.
        return stand_in("bf16", np.asarray(array.view(mx.uint16)))
    return np.asarray(array)


# MLX copies every array it is given: a whole-file load makes the copies on worker threads.
_ON_WORKERS = CopyOnWorkers(
    copies=lambda array, device, kind: True,
    copy=_copy,
    finish=_typed,
)

load_file, load, save_file, save = functions(("mlx",), "MLX arrays", _mlx_array, _numpy, _ON_WORKERS)
