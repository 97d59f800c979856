"""DLPack: what ztio returns is taken by other frameworks without a copy. The arrays are numpy
arrays, so the protocol is numpy's own ``__dlpack__``/``__dlpack_device__``; a read-only
array (``ztio.open`` without ``writable=True``) is exported only to consumers that speak
DLPack 1.0, which carries the read-only flag (see docs/decisions.md)."""

import numpy as np
import pytest

import ztio


def _address(a):
    return a.__array_interface__["data"][0]


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "m.zt"
    ztio.save_file({"w": np.arange(4096, dtype=np.float32).reshape(64, 64), "e": np.zeros((0, 3), np.int8)}, p)
    return p


def test_every_returned_array_speaks_dlpack(path):
    with ztio.open(path) as f:
        w = f.get_tensor("w")
    assert w.__dlpack_device__() == (1, 0)  # kDLCPU
    back = np.from_dlpack(w)
    assert _address(back) == _address(w)
    assert not back.flags.writeable  # the read-only flag went with it


def test_read_only_arrays_are_refused_to_consumers_that_cannot_carry_the_flag(path):
    with ztio.open(path) as f:
        w = f.get_tensor("w")
    w.__dlpack__(max_version=(1, 0))
    with pytest.raises(BufferError):
        w.__dlpack__()  # legacy DLPack: it would hand a writable view of a read-only map


def test_jax_takes_load_file_arrays_without_a_copy(path):
    jnp = pytest.importorskip("jax.numpy", reason="JAX is not installed")
    for arrays in (ztio.numpy.load_file(path), {"w": ztio.open(path, writable=True).get_tensor("w")}):
        w = arrays["w"]
        j = jnp.from_dlpack(w)
        assert j.unsafe_buffer_pointer() == _address(w)
        assert float(j[1, 2]) == 66.0


def test_torch_takes_read_only_arrays_without_a_copy(path):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    with ztio.open(path) as f:
        w = f.get_tensor("w")
    t = torch.from_dlpack(w)
    assert t.data_ptr() == _address(w)
