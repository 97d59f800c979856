"""safetensors' ``safetensors.tensorflow`` functions over ztio: ``tf.Tensor`` in and out
(TensorFlow copies each tensor into its own buffer). ``safe_open(..., framework="tf")``
reads them too. TensorFlow is imported only when called."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._bridge import functions

__all__ = ["load_file", "save_file", "load", "save"]


def _tf_tensor(array: np.ndarray, device: str = "cpu") -> Any:
    import tensorflow as tf

    return tf.convert_to_tensor(array)


def _numpy(tensor: Any) -> np.ndarray:
    return tensor.numpy() if hasattr(tensor, "numpy") else np.asarray(tensor)


load_file, load, save_file, save = functions(("tf", "tensorflow"), "TensorFlow tensors", _tf_tensor, _numpy)
