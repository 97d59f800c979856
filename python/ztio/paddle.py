"""safetensors' ``safetensors.paddle`` functions over ztio: Paddle tensors in and out, on
``device`` (``"cpu"`` by default). ``safe_open(..., framework="paddle")`` reads them too.
Paddle is imported only when called."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._bridge import functions
from ._dtypes import OURS_OF_ML, stand_in
from .errors import ArgumentError

__all__ = ["load_file", "save_file", "load", "save"]


def _paddle_tensor(array: np.ndarray, device: str = "cpu", kind: Optional[str] = None) -> Any:
    import paddle

    name = kind or array.dtype.name
    if name == "bfloat16":
        # Same bits as int16, which Paddle takes from numpy; viewed back as bfloat16.
        return paddle.view(_from_array(paddle, array.view(np.int16), device), paddle.bfloat16)
    if name in _FP8:
        return paddle.view(_from_array(paddle, array.view(np.uint8), device), getattr(paddle, name))
    if array.dtype in (np.uint16, np.uint32, np.uint64):
        # Paddle would read uint16 as bfloat16, silently, and has no uint32 or uint64.
        raise ArgumentError(f"Paddle has no {name} type (it has uint8 only of the unsigned ones)")
    return _from_array(paddle, array, device)


def _from_array(paddle: Any, array: np.ndarray, device: Any) -> Any:
    """On the CPU, Paddle takes a writable array through DLPack without a copy: the tensor
    shares the array's memory (for ztio's arrays, the file's private map) and keeps it alive.
    A read-only array is copied: a tensor over it would crash the process on its first
    in-place write. Other devices copy in any case."""
    if device in (None, "cpu") and array.flags.writeable:
        try:
            return paddle.from_dlpack(array)
        except (BufferError, TypeError, ValueError, RuntimeError):
            pass  # a type DLPack cannot carry: copied below
    return paddle.to_tensor(array, place=_place(device))


#: The FP8 types both sides have, by their common name.
_FP8 = ("float8_e4m3fn", "float8_e5m2")


def _place(device: Any) -> Any:
    """Paddle's name for ``device``: callers of safetensors write ``"cuda"``, ``"cuda:1"`` or
    a number, which Paddle calls ``"gpu:0"``, ``"gpu:1"``."""
    import paddle

    if device in (None, "cpu"):
        return paddle.CPUPlace()
    if isinstance(device, int):
        return f"gpu:{device}"
    if isinstance(device, str) and device.startswith(("cuda", "gpu")):
        # With its index: a CPU-only Paddle fails to parse a bare "gpu" (an AttributeError
        # from inside Paddle), where "gpu:0" gives its own clear "not compiled with CUDA".
        rest = device.split(":", 1)[1] if ":" in device else "0"
        return f"gpu:{rest}"
    return device


def _numpy(tensor: Any) -> Any:
    if not hasattr(tensor, "numpy"):
        return np.asarray(tensor)
    import paddle

    kind = str(tensor.dtype).rsplit(".", 1)[-1]
    if kind == "bfloat16":
        return stand_in("bf16", _host_array(paddle, paddle.view(tensor, paddle.int16)).view(np.uint16))
    if kind in _FP8:
        return stand_in(OURS_OF_ML[kind], _host_array(paddle, paddle.view(tensor, paddle.uint8)))
    return _host_array(paddle, tensor)


def _host_array(paddle: Any, tensor: Any) -> np.ndarray:
    """The tensor's bytes as a numpy array: on the CPU a view through DLPack (a save reads the
    tensor's own memory, no copy), elsewhere ``numpy()``'s copy to the host."""
    if tensor.place.is_cpu_place():
        try:
            return np.from_dlpack(tensor)
        except (BufferError, TypeError, ValueError, RuntimeError):
            pass  # not contiguous, or a type DLPack cannot carry: copied below
    return tensor.numpy()


load_file, load, save_file, save = functions(("paddle",), "Paddle tensors", _paddle_tensor, _numpy)
