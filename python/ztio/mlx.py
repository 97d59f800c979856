"""safetensors' ``safetensors.mlx`` functions over ztio: ``mlx.core.array`` in and out (MLX
runs on Apple silicon; elsewhere these raise ``ImportError``). ``safe_open(...,
framework="mlx")`` reads them too. MLX is imported only when called."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._bridge import functions
from .errors import ArgumentError

__all__ = ["load_file", "save_file", "load", "save"]


def _mlx_array(array: np.ndarray, device: str = "cpu") -> Any:
    import mlx.core as mx

    name = array.dtype.name
    if name == "bfloat16":
        # numpy's bfloat16 (ml_dtypes) has no buffer format MLX knows: its bits as uint16.
        return mx.array(array.view(np.uint16)).view(mx.bfloat16)
    if name.startswith(("float8_", "float4_", "float6_")):
        raise ArgumentError(f"MLX has no {name} type")
    return mx.array(array)


def _numpy(array: Any) -> np.ndarray:
    import mlx.core as mx

    if getattr(array, "dtype", None) == mx.bfloat16:
        import ml_dtypes

        return np.array(array.view(mx.uint16)).view(ml_dtypes.bfloat16)
    return np.asarray(array)


load_file, load, save_file, save = functions(("mlx",), "MLX arrays", _mlx_array, _numpy)
