"""ztio.tensorflow, ztio.paddle and ztio.mlx: safetensors' functions for each framework, where
it is installed (each skips with its reason where it is not: TensorFlow and Paddle are large
wheels, MLX runs on Apple silicon only). JAX's module has tests/test_flax.py, run in CI."""

import numpy as np
import pytest

import ztio

CASES = {
    "tensorflow": ("tensorflow", "tf"),
    "paddle": ("paddle", "paddle"),
    "mlx": ("mlx.core", "mlx"),
}


def _tensors():
    return {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "i64": np.arange(4, dtype=np.int64),
        "u8": np.arange(3, dtype=np.uint8),
        "b": np.array([True, False]),
        "empty": np.zeros((0, 2), np.float32),
        "scalar": np.array(2.5, np.float32),
    }


def _numpy(t):
    return t.numpy() if hasattr(t, "numpy") else np.asarray(t)


@pytest.fixture(params=sorted(CASES))
def framework(request):
    package, name = CASES[request.param]
    pytest.importorskip(package, reason=f"{package} is not installed")
    module = __import__(f"ztio.{request.param}", fromlist=["load_file"])
    return module, name


def test_round_trip_of_files_and_bytes(framework, tmp_path):
    module, name = framework
    tensors = _tensors()
    module.save_file(tensors, tmp_path / "m.safetensors", metadata={"k": "v"})
    for back in (module.load_file(tmp_path / "m.safetensors"), module.load(module.save(tensors))):
        assert set(back) == set(tensors)
        for k, want in tensors.items():
            got = _numpy(back[k])
            assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), k
    with ztio.safe_open(tmp_path / "m.safetensors", framework=name) as f:
        assert np.array_equal(_numpy(f.get_tensor("f32")), tensors["f32"])
