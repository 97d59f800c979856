"""ztio.tensorflow, ztio.paddle and ztio.mlx: safetensors' functions for each framework, where
it is installed (each skips with its reason where it is not: TensorFlow and Paddle are large
wheels, MLX installs on Apple silicon and, as ``mlx[cpu]``, on Linux). JAX's module has tests/test_flax.py, run in CI."""

import os

import numpy as np
import pytest

import ztio
import ztio.numpy
from conftest import FIXTURES

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


#: Every dtype a file may hold, and which of them each framework has (the rest must raise
#: ztio.ArgumentError, never come back as another type).
_ALL = ["float64", "float32", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
        "uint16", "uint32", "uint64", "bool", "complex64", "float8_e4m3fn", "float8_e5m2"]
_LACKS = {
    "tensorflow": set(),
    # Paddle reads numpy's uint16 as its bfloat16 and has no uint32/uint64.
    "paddle": {"uint16", "uint32", "uint64"},
    # MLX has no FP8 types, and stores float64 as float32 (its own conversion).
    "mlx": {"float8_e4m3fn", "float8_e5m2"},
}


def _dtype(name):
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


@pytest.mark.parametrize("dtype", _ALL)
def test_every_dtype_comes_back_as_itself_or_is_refused(framework, dtype, tmp_path):
    module, name = framework
    fw = next(k for k, v in CASES.items() if v[1] == name)
    want = (np.arange(6) % 2 == 1 if dtype == "bool" else np.arange(6)).astype(_dtype(dtype)).reshape(2, 3)
    path = tmp_path / "m.safetensors"
    ztio.numpy.save_file({"t": want}, path)
    if dtype in _LACKS[fw]:
        with pytest.raises(ztio.ArgumentError, match=f"no {dtype} type"):
            module.load_file(path)
        return
    got = module.load_file(path)["t"]
    # Back to numpy through the module's own conversion (bf16 and FP8 have no buffer format).
    back = ztio.numpy.load(module.save({"t": got}))["t"]
    if fw == "mlx" and dtype == "float64":
        assert back.dtype == np.float32 and np.array_equal(back, want.astype(np.float32))
        return
    assert back.dtype == want.dtype, (back.dtype, want.dtype)
    assert back.tobytes() == want.tobytes()


def test_paddle_tensors_share_the_array_and_writes_stay_in_the_process(tmp_path):
    paddle = pytest.importorskip("paddle", reason="paddle is not installed")
    import ml_dtypes

    from ztio.paddle import _paddle_tensor

    for array in (np.arange(4, dtype=np.float32), np.arange(4).astype(ml_dtypes.bfloat16)):
        tensor = _paddle_tensor(array)
        assert tensor.data_ptr() == array.ctypes.data, array.dtype  # no copy
    frozen = np.arange(4, dtype=np.float32)
    frozen.flags.writeable = False
    assert _paddle_tensor(frozen).data_ptr() != frozen.ctypes.data  # read-only: copied

    path = tmp_path / "m.safetensors"
    ztio.numpy.save_file({"w": np.arange(4, dtype=np.float32)}, path)
    before = path.read_bytes()
    loaded = ztio.paddle.load_file(path)["w"]
    loaded[0] = 99.0
    assert float(loaded[0]) == 99.0
    assert path.read_bytes() == before  # a private map: the write never reaches the file
    assert paddle.to_tensor(ztio.numpy.load_file(path)["w"]).numpy()[0] == 0.0


def test_paddle_saves_read_the_tensors_own_memory(tmp_path):
    paddle = pytest.importorskip("paddle", reason="paddle is not installed")

    from ztio.paddle import _numpy

    for dtype in ("float32", "bfloat16", "float8_e4m3fn"):
        tensor = paddle.to_tensor(np.arange(4, dtype=np.float32)).astype(getattr(paddle, dtype))
        array = _numpy(tensor)
        assert array.dtype.name == dtype and array.ctypes.data == tensor.data_ptr(), dtype
    assert float(_numpy(paddle.to_tensor([1.5, 2.5]).astype(paddle.bfloat16))[1]) == 2.5


def _mapped(path) -> bool:
    with open("/proc/self/maps") as maps:
        return any(line.rstrip("\n").endswith(str(path)) for line in maps)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_tensorflow_tensors_stay_in_the_map_without_a_copy(tmp_path):
    tf = pytest.importorskip("tensorflow", reason="tensorflow is not installed")
    import gc

    import ml_dtypes

    path = tmp_path / "m.zt"  # v2 aligns every tensor to 64 bytes
    want = {
        "w": np.arange(4096, dtype=np.float32).reshape(64, 64),
        "h": np.arange(64).astype(ml_dtypes.bfloat16),
    }
    ztio.numpy.save_file(want, path)
    back = ztio.tensorflow.load_file(path)
    gc.collect()
    assert _mapped(path)  # the tensors hold the file's map: their bytes are the file's
    for k, v in want.items():
        assert back[k].dtype == tf.as_dtype(v.dtype) and np.array_equal(np.asarray(back[k]), v), k
    assert float(tf.reduce_sum(tf.matmul(back["w"], back["w"]))) > 0
    del back
    gc.collect()
    assert not _mapped(path)


def test_tensorflow_is_never_handed_memory_it_would_abort_on(tmp_path):
    tf = pytest.importorskip("tensorflow", reason="tensorflow is not installed")

    # Tensors of 17 float32 (68 bytes) lie at 16 different offsets modulo 64 in a
    # `.safetensors` file: a kernel given one that is not aligned to 64 aborts the process,
    # so those must come as copies.
    want = {f"t{i:02}": np.full(17, i, np.float32) for i in range(16)}
    path = tmp_path / "m.safetensors"
    ztio.numpy.save_file(want, path)
    back = ztio.tensorflow.load_file(path)
    for k, v in want.items():
        assert np.asarray(back[k]).ctypes.data % 64 == 0, k
        assert float(tf.reduce_sum(back[k] * 2.0)) == float(v.sum() * 2), k
    with ztio.safe_open(path, framework="tf") as f:
        assert all(float(tf.reduce_sum(f.get_tensor(k))) == float(v.sum()) for k, v in want.items())


def test_tensorflow_saves_read_the_tensors_own_memory():
    tf = pytest.importorskip("tensorflow", reason="tensorflow is not installed")
    import ml_dtypes

    from ztio.tensorflow import _numpy

    for want in (np.arange(4, dtype=np.float32), np.arange(4).astype(ml_dtypes.bfloat16)):
        tensor = tf.constant(want)
        array = _numpy(tensor)
        # `.numpy()` hands back a fresh copy each call; a view of the tensor's buffer is the
        # same memory every time.
        assert not array.flags.owndata and np.shares_memory(array, _numpy(tensor)), want.dtype
        assert array.dtype == want.dtype and np.array_equal(array, want)


def test_mlx_saves_read_the_arrays_own_memory():
    mx = pytest.importorskip("mlx.core", reason="mlx is not installed")

    from ztio._dtypes import StandIn
    from ztio.mlx import _numpy

    def bits(value):
        return value.array if isinstance(value, StandIn) else value

    for array in (mx.array([1.5, 2.5]), mx.array([1.5, 2.5]).astype(mx.bfloat16)):
        got = bits(_numpy(array))
        assert got.view(np.uint16 if got.itemsize == 2 else np.float32).tolist() == (
            [0x3FC0, 0x4020] if got.itemsize == 2 else [1.5, 2.5]
        ), array.dtype
        # A copy is fresh memory each call; a view of MLX's buffer is the same memory.
        assert np.shares_memory(got, bits(_numpy(array))), array.dtype


def test_a_framework_module_refuses_objects_that_are_not_dense_naming_their_format(monkeypatch):
    # The core every framework module is made of, with a conversion that changes nothing:
    # runs where no framework is installed. Registered for this test only.
    from ztio import _bridge, _frameworks

    monkeypatch.setattr(_frameworks, "_CONVERTERS", dict(_frameworks._CONVERTERS))
    monkeypatch.setattr(_frameworks, "_FROM_NUMPY", dict(_frameworks._FROM_NUMPY))
    load_file, _, _, _ = _bridge.functions(("identity-for-tests",), "test arrays", lambda a, device, kind: a)
    with pytest.raises(ztio.ArgumentError, match="object 'csr' is sparse_csr; test arrays are read from dense objects only"):
        load_file(FIXTURES / "interop" / "v123_all.zt")
