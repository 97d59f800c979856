"""Zero copy: raw dense tensors point into the map and keep it alive; everything else is
an owned array."""

import gc

import numpy as np
import pytest

import ztio
from conftest import FIXTURES

ALL = FIXTURES / "interop" / "v123_all.zt"


def address(a):
    return a.__array_interface__["data"][0]


def in_map(f, a):
    start, length = f._native.map_range()
    return start <= address(a) and address(a) + a.nbytes <= start + length


def test_raw_tensor_points_into_the_map():
    with ztio.open(ALL) as f:
        a = f.get_tensor("dense_f32")
        assert not a.flags.owndata
        assert not a.flags.writeable
        assert a.flags.c_contiguous and a.flags.aligned
        assert in_map(f, a)
        # Two reads of one tensor share the same bytes.
        assert np.shares_memory(a, f.get_tensor("dense_f32"))
        assert type(a.base).__name__ == "MapHolder"


def test_array_cannot_be_written():
    with ztio.open(ALL) as f:
        a = f.get_tensor("dense_f32")
        with pytest.raises(ValueError):
            a[0, 0] = 1.0
        with pytest.raises(ValueError):
            a.setflags(write=True)


def test_array_outlives_the_file():
    f = ztio.open(ALL)
    a = f.get_tensor("dense_f32")
    expected = a.copy()
    f.close()
    del f
    gc.collect()
    # The holder keeps the map: no use after close, however the reader went away.
    assert np.array_equal(a, expected)
    view = a[1:]
    del a
    gc.collect()
    assert np.array_equal(view, expected[1:])


def test_ml_dtypes_and_fp8_are_zero_copy_too():
    with ztio.open(ALL) as f:
        for name in ("bf16_t", "fp8", "complex", "bool_t"):
            a = f.get_tensor(name)
            assert in_map(f, a), name


def test_zstd_gives_an_owned_writable_array():
    with ztio.open(ALL) as f:
        z = f.get_tensor("zstd_f32")
        assert not in_map(f, z)
        assert z.flags.writeable
        assert type(z.base).__name__ == "OwnedHolder"
        z[0] = 42.0  # ours to change


def test_big_endian_gives_an_owned_swapped_array():
    with ztio.open(FIXTURES / "valid" / "v01_big_endian.zt") as f:
        found = False
        for info in f.infos():
            if info.format != "dense" or info.components[0].byte_order != "big":
                continue
            a = f.get_tensor(info.name)
            assert not in_map(f, a)
            assert a.dtype.byteorder in ("=", "<", "|")
            found = True
        assert found


def test_misaligned_data_is_copied_and_aligned(tmp_path):
    # A safetensors header of 8 + 13 bytes puts the f32 data at offset 21.
    header = b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    pad = (-(8 + len(header)) % 4) + 1  # misaligned by one byte for f32
    header += b" " * pad
    path = tmp_path / "odd.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + np.array([1.5, 2.5], "<f4").tobytes())
    with ztio.open(path) as f:
        x = f.get_tensor("x")
        assert x.flags.aligned
        assert not in_map(f, x)
        assert x.tolist() == [1.5, 2.5]


def test_load_file_arrays_are_writable_without_a_copy_and_never_reach_the_file(tmp_path):
    path = tmp_path / "m.safetensors"
    ztio.numpy.save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, path)
    before = path.read_bytes()
    w = ztio.numpy.load_file(path)["w"]
    # Zero copy: the array is a view of the map, not an owned buffer.
    assert not w.flags.owndata and type(w.base).__name__ == "MapHolder"
    assert w.flags.writeable
    w *= 2
    assert w.tolist() == [[0, 2, 4], [6, 8, 10]]
    assert path.read_bytes() == before
    # Another load sees the file, not the first load's private pages.
    assert ztio.numpy.load_file(path)["w"].tolist() == [[0, 1, 2], [3, 4, 5]]


def test_safe_open_arrays_are_writable_and_ztio_open_stays_read_only_unless_asked(tmp_path):
    path = tmp_path / "m.safetensors"
    ztio.numpy.save_file({"w": np.ones(4, np.float32)}, path)
    with ztio.safe_open(path, framework="np") as f:
        assert f.get_tensor("w").flags.writeable
    with ztio.open(path) as f:
        assert not f.get_tensor("w").flags.writeable
    with ztio.open(path, writable=True) as f:
        a = f.get_tensor("w")
        assert a.flags.writeable and in_map(f, a)


def test_a_write_to_one_tensor_never_shows_in_another_that_shared_its_blob(tmp_path):
    # The zTensor writer stores equal tensors once (two zero biases: one blob). Writable
    # views of that blob would let `b1 += 1` change b2 too: such bytes are copied instead,
    # and every other tensor stays a view of the map.
    path = tmp_path / "m.zt"
    ztio.save_file({"b1": np.zeros(64, np.float32), "b2": np.zeros(64, np.float32),
                    "w": np.ones(64, np.float32)}, path)
    with ztio.open(path) as f:
        assert np.shares_memory(f.get_tensor("b1"), f.get_tensor("b2")), "one blob for both"
    loaded = ztio.numpy.load_file(path)
    loaded["b1"] += 1
    assert loaded["b2"].tolist() == [0.0] * 64
    assert type(loaded["w"].base).__name__ == "MapHolder" and loaded["w"].flags.writeable
    with ztio.safe_open(path, framework="np") as f:
        b1, b2 = f.get_tensor("b1"), f.get_tensor("b2")
        b1 += 5
        rows = f.get_slice("b1")[:8]
        rows += 7
        assert b2.tolist() == f.get_slice("b2")[:].tolist() == [0.0] * 64
    # Read-only handles keep sharing: nothing can write through them.
    with ztio.open(path) as f:
        assert not f.get_tensor("b1").flags.writeable
