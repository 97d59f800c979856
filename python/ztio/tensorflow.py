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
    # `np.asarray` takes an eager tensor on the CPU through its `__array__`, a view of the
    # tensor's own buffer; `.numpy()` copies it first (a save of 1 GiB spent 0.2-2.2 s in those
    # copies, more than the write). A tensor elsewhere comes to the host either way.
    return np.asarray(tensor)


load_file, load, save_file, save = functions(("tf", "tensorflow"), "TensorFlow tensors", _tf_tensor, _numpy)
