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


def _registered_for_this_test(monkeypatch):
    from ztio import _frameworks

    monkeypatch.setattr(_frameworks, "_CONVERTERS", dict(_frameworks._CONVERTERS))
    monkeypatch.setattr(_frameworks, "_FROM_NUMPY", dict(_frameworks._FROM_NUMPY))


def _big_and_small(tmp_path):
    """A `.safetensors` file of tensors over and under the size a worker copies, big ones
    first and last so the order of the result is tested across both kinds."""
    rows = (1 << 20) // (4 * 64) + 1  # just over 1 MiB of float32
    want = {
        "a_big": np.arange(rows * 64, dtype=np.float32).reshape(rows, 64),
        "b_small": np.arange(10, dtype=np.int16),
        "c_big": -np.arange(rows * 64, dtype=np.float32).reshape(rows, 64),
        "d_small": np.array(3.5, np.float64),
        "e_big": np.arange(rows * 64 * 2, dtype=np.uint16),
    }
    path = tmp_path / "m.safetensors"
    ztio.numpy.save_file(want, path)
    return path, want


def test_a_framework_that_copies_copies_large_tensors_on_workers_and_finishes_on_the_caller(
    tmp_path, monkeypatch
):
    # The core a copying framework's module is made of (MLX's, TensorFlow's), with stand-in
    # conversions that say on which thread they ran: runs where no framework is installed.
    import threading

    from ztio import _bridge, _native

    _registered_for_this_test(monkeypatch)
    monkeypatch.setattr(_native, "usable_cpus", lambda: 2)  # workers even on one CPU
    caller = threading.current_thread().name
    where = {}

    def inline(array, device, kind):
        where[array.nbytes] = ("inline", threading.current_thread().name)
        return ("inline", array.copy())

    def copy(array, device, kind):
        where[array.nbytes] = ("copy", threading.current_thread().name)
        return array.copy()

    def finish(copied, array, device, kind):
        assert threading.current_thread().name == caller
        assert np.array_equal(copied, array) and device == "cpu"
        return ("finished", copied)

    on_workers = _bridge.CopyOnWorkers(copies=lambda array, device, kind: True, copy=copy, finish=finish)
    load_file, _, _, _ = _bridge.functions(("copies-for-tests",), "test arrays", inline, on_workers=on_workers)
    path, want = _big_and_small(tmp_path)
    got = load_file(path)
    assert list(got) == list(ztio.numpy.load_file(path))  # the file's order, as before
    for name, value in want.items():
        how, array = got[name]
        big = value.nbytes >= _bridge.MIN_COPY_ON_WORKER
        assert how == ("finished" if big else "inline"), name
        assert array.dtype == value.dtype and np.array_equal(array, value), name
        step, thread = where[value.nbytes]
        assert step == ("copy" if big else "inline"), name
        assert thread.startswith("ztio-copy") if big else thread == caller, name


def test_an_error_in_a_copy_on_a_worker_reaches_the_caller(tmp_path, monkeypatch):
    from ztio import _bridge, _native

    _registered_for_this_test(monkeypatch)
    monkeypatch.setattr(_native, "usable_cpus", lambda: 2)

    def copy(array, device, kind):
        if array.dtype == np.uint16:
            raise ztio.ArgumentError("no uint16 here")
        return array

    on_workers = _bridge.CopyOnWorkers(
        copies=lambda array, device, kind: True, copy=copy, finish=lambda c, a, d, k: c
    )
    load_file, _, _, _ = _bridge.functions(
        ("failing-for-tests",), "test arrays", lambda a, d, k: a, on_workers=on_workers
    )
    path, _ = _big_and_small(tmp_path)
    with pytest.raises(ztio.ArgumentError, match="no uint16 here"):
        load_file(path)


def test_a_cold_load_reads_misaligned_tensors_into_aligned_memory(tmp_path, monkeypatch):
    # A framework that keeps aligned arrays in place (JAX, TensorFlow): a cold local file's
    # misaligned tensors are read by positional reads into fresh aligned memory, handed over
    # as they are; aligned ones stay views of the map. The page cache is said to be cold.
    from ztio import _bridge

    _registered_for_this_test(monkeypatch)
    monkeypatch.setattr(_bridge, "_in_page_cache", lambda places: False)
    monkeypatch.setattr(_bridge, "COLD_READ_PIECE", 4096)  # large tensors in several pieces
    path, want = _big_and_small(tmp_path)
    load_file, _, _, _ = _bridge.functions(
        ("cold-for-tests",), "test arrays", lambda a, d, k: a, keeps_aligned=lambda dtype, device: True
    )
    got = load_file(path)
    assert list(got) == list(ztio.numpy.load_file(path))
    spans = {}
    with ztio.open(path) as f:
        for name in want:
            spans[name] = f._native.raw_span(name)
    fresh = 0
    for name, value in want.items():
        array = got[name]
        assert array.dtype == value.dtype and np.array_equal(array, value), name
        if spans[name][2] % _bridge.COPY_ALIGN:
            assert array.ctypes.data % _bridge.COPY_ALIGN == 0 and array.flags.writeable, name
            fresh += 1
    assert fresh > 0
    # Warm (the real probe on a file just written): the usual path, no reads of its own.
    monkeypatch.undo()
    _registered_for_this_test(monkeypatch)
    called = []
    monkeypatch.setattr(_bridge, "_read_planned", lambda *a: called.append(1))
    load_file(path)
    assert not called


def test_a_cold_load_of_a_set_reads_every_shards_misaligned_tensors_into_aligned_memory(
    tmp_path, monkeypatch
):
    # The same through an index: the shards are read one after another, each tensor handed
    # over in the order a set's load gives them (shard by shard, each in file order).
    from ztio import _bridge

    _registered_for_this_test(monkeypatch)
    monkeypatch.setattr(_bridge, "_in_page_cache", lambda places: False)
    path, want = _big_and_small(tmp_path)
    index = tmp_path / "model.safetensors.index.json"
    ztio.convert(path, index, shard_size=1_500_000, progress=False)
    load_file, _, _, _ = _bridge.functions(
        ("cold-set-for-tests",), "test arrays", lambda a, d, k: a, keeps_aligned=lambda dtype, device: True
    )
    read = []
    real = _bridge._read_planned
    monkeypatch.setattr(_bridge, "_read_planned", lambda paths, *rest: read.append(paths) or real(paths, *rest))
    got = load_file(index)
    assert list(got) == list(ztio.numpy.load_file(index))
    assert len(read) == 1 and len(read[0]) >= 3  # one plan over every shard
    shards_read = set()
    with ztio.open(index) as f:
        for name, value in want.items():
            array = got[name]
            assert array.dtype == value.dtype and np.array_equal(array, value), name
            shard = f._file_for(name)
            if shard._native.raw_span(name)[2] % _bridge.COPY_ALIGN:
                assert array.ctypes.data % _bridge.COPY_ALIGN == 0 and array.flags.writeable, name
                shards_read.add(shard.path)
    assert len(shards_read) >= 2


def test_a_cold_load_of_a_file_cut_short_says_so(tmp_path, monkeypatch):
    from ztio import _bridge

    _registered_for_this_test(monkeypatch)
    monkeypatch.setattr(_bridge, "_in_page_cache", lambda places: False)
    path, _ = _big_and_small(tmp_path)
    f = ztio.open(path)
    # The file shrinks after it was opened and checked: the reads find its end.
    os.truncate(path, os.path.getsize(path) // 2)
    try:
        with pytest.raises(ztio.FileError, match="ends at byte"):
            _bridge._read_cold(f, "cpu", lambda dtype, device: True, lambda a, d, k: a, lambda n: None)
    finally:
        f.close()


@pytest.mark.parametrize("offset", [0, 1, 2, 6])
def test_an_aligned_copy_is_fresh_writable_memory_aligned_to_64_bytes(offset):
    import ml_dtypes

    from ztio._bridge import COPY_ALIGN, aligned_copy

    raw = np.arange(3 * 5 * 2 + 8, dtype=np.uint8)
    for dtype in (np.uint8, np.int16, ml_dtypes.bfloat16):
        size = np.dtype(dtype).itemsize
        source = raw[offset : offset + 3 * 5 * size].view(dtype).reshape(3, 5)
        copied = aligned_copy(source)
        assert copied.ctypes.data % COPY_ALIGN == 0 and copied.flags.writeable, dtype
        assert copied.dtype == source.dtype and copied.shape == (3, 5), dtype
        assert np.array_equal(copied.view(np.uint8), source.view(np.uint8)), dtype
        assert not np.shares_memory(copied, raw), dtype


def test_mlx_loads_large_bf16_tensors_made_on_workers(tmp_path):
    # MLX ties an operation (the view that makes bits bf16) to the stream of the thread that
    # made it: made on a worker, the caller could not evaluate it ("There is no Stream").
    mx = pytest.importorskip("mlx.core", reason="mlx is not installed")
    import ml_dtypes

    import ztio.mlx

    want = {
        "h": np.linspace(-1, 1, 1 << 20, dtype=np.float32).astype(ml_dtypes.bfloat16),
        "w": np.arange(1 << 19, dtype=np.float32),
    }
    path = tmp_path / "m.safetensors"
    ztio.numpy.save_file(want, path)
    got = ztio.mlx.load_file(path)
    assert got["h"].dtype == mx.bfloat16 and got["w"].dtype == mx.float32
    mx.eval(got["h"])  # on this thread, as a caller does
    assert np.array_equal(np.asarray(got["h"].view(mx.uint16)), want["h"].view(np.uint16))
    assert np.array_equal(np.asarray(got["w"]), want["w"])


def test_tensorflow_takes_large_misaligned_tensors_as_aligned_copies(tmp_path):
    tf = pytest.importorskip("tensorflow", reason="tensorflow is not installed")

    path, want = _big_and_small(tmp_path)
    with open(path, "rb") as f:
        header = int.from_bytes(f.read(8), "little")
    if (8 + header) % 64 == 0:  # the data section must start off 64 for this test to test
        pytest.skip("this file's tensors happen to be aligned")
    got = ztio.tensorflow.load_file(path)
    for name, value in want.items():
        assert np.asarray(got[name]).ctypes.data % 64 == 0, name
        assert np.array_equal(np.asarray(got[name]), value), name
    assert float(tf.reduce_sum(got["a_big"] + got["c_big"])) == 0.0
