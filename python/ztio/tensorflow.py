"""safetensors' ``safetensors.tensorflow`` functions over ztio: ``tf.Tensor`` in and out
(TensorFlow copies each tensor into its own buffer). ``safe_open(..., framework="tf")``
reads them too. TensorFlow is imported only when called."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._bridge import functions, typed_by_ml_dtypes

__all__ = ["load_file", "save_file", "load", "save"]


def _tf_tensor(array: np.ndarray, device: str = "cpu", kind: Optional[str] = None) -> Any:
    import tensorflow as tf

    return tf.convert_to_tensor(typed_by_ml_dtypes(array, kind))


def _numpy(tensor: Any) -> np.ndarray:
    return tensor.numpy() if hasattr(tensor, "numpy") else np.asarray(tensor)


load_file, load, save_file, save = functions(("tf", "tensorflow"), "TensorFlow tensors", _tf_tensor, _numpy)
