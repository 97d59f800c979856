"""safetensors' ``safetensors.paddle`` functions over ztio: Paddle tensors in and out, on
``device`` (``"cpu"`` by default). ``safe_open(..., framework="paddle")`` reads them too.
Paddle is imported only when called."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._bridge import functions

__all__ = ["load_file", "save_file", "load", "save"]


def _paddle_tensor(array: np.ndarray, device: str = "cpu") -> Any:
    import paddle

    place = paddle.CPUPlace() if device in (None, "cpu") else device
    return paddle.to_tensor(array, place=place)


def _numpy(tensor: Any) -> np.ndarray:
    return tensor.numpy() if hasattr(tensor, "numpy") else np.asarray(tensor)


load_file, load, save_file, save = functions(("paddle",), "Paddle tensors", _paddle_tensor, _numpy)
