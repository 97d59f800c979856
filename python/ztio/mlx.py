"""safetensors' ``safetensors.mlx`` functions over ztio: ``mlx.core.array`` in and out (MLX
runs on Apple silicon; elsewhere these raise ``ImportError``). ``safe_open(...,
framework="mlx")`` reads them too. MLX is imported only when called."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._bridge import functions

__all__ = ["load_file", "save_file", "load", "save"]


def _mlx_array(array: np.ndarray, device: str = "cpu") -> Any:
    import mlx.core as mx

    return mx.array(array)


load_file, load, save_file, save = functions(("mlx",), "MLX arrays", _mlx_array)
