"""ztio.flax: safetensors' flax functions over JAX arrays (JAX installs from PyPI with the
test requirements; skipped where it does not)."""

import os

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX is not installed")
jnp = pytest.importorskip("jax.numpy")

import ztio  # noqa: E402
import ztio.flax  # noqa: E402


def _tensors():
    return {
        "f32": jnp.arange(6, dtype=jnp.float32).reshape(2, 3),
        "bf16": jnp.ones((2, 2), dtype=jnp.bfloat16),
        "i64": jnp.arange(3, dtype=jnp.int32),
        "b": jnp.array([True, False]),
        "empty": jnp.zeros((0, 4), dtype=jnp.float32),
        "scalar": jnp.array(7.5, dtype=jnp.float32),
    }


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name", ["m.safetensors", "m.zt"])
def test_round_trip_of_files(tmp_path, name):
    tensors = _tensors()
    ztio.flax.save_file(tensors, tmp_path / name, metadata={"k": "v"})
    back = ztio.flax.load_file(tmp_path / name)
    assert set(back) == set(tensors)
    for k, v in back.items():
        assert isinstance(v, jax.Array)
        _same(v, tensors[k])


def test_sub_byte_arrays_round_trip_as_jax_has_them(tmp_path):
    # JAX's int4/uint4 (and int2/uint2 and float4_e2m1fn where it has them) are stored
    # packed, as ONNX and OpenVINO pack them, and read back as the same JAX types.
    names = ["int4", "uint4", "int2", "uint2", "float4_e2m1fn"]
    tensors = {
        n: jnp.array([[0, 1, -2], [3, 0.5, 1]] if n.startswith("float") else [[0, 1, 1], [0, 1, 0]], getattr(jnp, n))
        for n in names
        if hasattr(jnp, n)
    }
    assert {"int4", "uint4"} <= set(tensors)
    ztio.flax.save_file(tensors, tmp_path / "q.zt")
    back = ztio.flax.load_file(tmp_path / "q.zt")
    for k, v in back.items():
        _same(v, tensors[k])
    with ztio.open(tmp_path / "q.zt") as f:
        assert f.info("int4").dtype == "i4" and f.info("int4").shape == (2, 3)
        np.testing.assert_array_equal(f.dequantize("int4"), np.asarray(tensors["int4"], np.float32))
    # A model's packed weights as JAX has them; FP6, which JAX cannot hold, as its bytes.
    onnx = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "interop", "onnx", "dtypes_raw.onnx")
    loaded = ztio.flax.load_file(onnx)
    assert loaded["int4"].dtype == jnp.int4 and loaded["int4"].shape == (2, 3)
    assert np.asarray(loaded["int4"]).astype(np.int8).tolist() == [[-8, -1, 0], [1, 6, 7]]
    assert loaded["float6e2m3"].dtype == jnp.uint8 and loaded["float6e2m3"].shape == (4,)


def test_round_trip_of_bytes():
    tensors = _tensors()
    back = ztio.flax.load(ztio.flax.save(tensors))
    assert back.keys() == tensors.keys()
    for k, v in back.items():
        _same(v, tensors[k])


def test_safe_open_flax_and_jax(tmp_path):
    ztio.flax.save_file({"w": jnp.ones((2, 3))}, tmp_path / "m.safetensors")
    for framework in ("flax", "jax"):
        with ztio.safe_open(tmp_path / "m.safetensors", framework=framework) as f:
            w = f.get_tensor("w")
            assert isinstance(w, jax.Array) and w.shape == (2, 3)


def _mapped(path) -> bool:
    with open("/proc/self/maps") as maps:
        return any(line.rstrip("\n").endswith(str(path)) for line in maps)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_load_file_keeps_aligned_tensors_in_the_map_without_a_copy(tmp_path):
    import gc
    import inspect

    if "may_alias" not in inspect.signature(jax.device_put).parameters:
        pytest.skip("this JAX copies every array (no may_alias)")
    path = tmp_path / "m.zt"  # v2 aligns every tensor to 64 bytes
    ztio.flax.save_file({"w": jnp.arange(4096, dtype=jnp.float32), "b": jnp.ones(16)}, path)
    back = ztio.flax.load_file(path)
    gc.collect()
    # The arrays hold the file's map: their bytes are the file's, not a copy.
    assert _mapped(path)
    _same(back["w"], jnp.arange(4096, dtype=jnp.float32))
    # A JAX computation on them works, and the map goes once the last array does.
    assert float(jnp.sum(back["b"])) == 16.0
    del back
    gc.collect()
    assert not _mapped(path)
