"""Writes fixtures/interop/safetensors/numpy.safetensors with the Python safetensors package
(run once; the file is committed). Every numpy dtype safetensors takes, plus metadata."""
import sys

import numpy as np
from safetensors.numpy import save_file

out = sys.argv[1] if len(sys.argv) > 1 else "fixtures/interop/safetensors/numpy.safetensors"
tensors = {
    "f64": np.array([[0.5, -1.25], [3.0, 1e-300]], dtype=np.float64),
    "f32": np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5,
    "f16": np.array([1.0, -2.0, 0.099975586], dtype=np.float16),
    "i64": np.array([-(2**62), 7], dtype=np.int64),
    "i32": np.array([7, -1, 258], dtype=np.int32),
    "i16": np.array([-300, 300], dtype=np.int16),
    "i8": np.array([-128, 127], dtype=np.int8),
    "u64": np.array([2**64 - 1], dtype=np.uint64),
    "u32": np.array([4000000000], dtype=np.uint32),
    "u16": np.array([65535, 1], dtype=np.uint16),
    "u8": np.array([[1, 2], [3, 255]], dtype=np.uint8),
    "bool": np.array([True, False, True]),
    "scalar": np.array(2.5, dtype=np.float32),
    "empty": np.zeros((0, 3), dtype=np.float32),
}
save_file(tensors, out, metadata={"format": "np", "note": "made by safetensors (Python)"})
print("wrote", out)
