"""Slices: get_slice reads the box asked for, any index numpy takes of ints, slices with any
step and an ellipsis gives numpy's answer, and a run of whole rows points into the map."""

import numpy as np
import pytest

import ztio
from conftest import FIXTURES


@pytest.fixture
def cube(tmp_path):
    a = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    z = np.arange(30, dtype=np.int64).reshape(5, 6)
    path = tmp_path / "cube.zt"
    with ztio.Writer(path) as w:
        w.add("a", a)
        w.add("z", z, compression=True)
        w.add("be", a.astype(">f4"))
    return path, a, z


KEYS = [
    np.s_[1:3],
    np.s_[:],
    np.s_[2],
    np.s_[-1],
    np.s_[1:3, 2:4],
    np.s_[:, 1],
    np.s_[..., 2],
    np.s_[::2, ::-1, 1:5:2],
    np.s_[3:1:-1],
    np.s_[1:1],
    np.s_[0, 0, 0],
    np.s_[..., ::3],
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_slices_match_numpy(cube, key):
    path, a, _ = cube
    with ztio.open(path) as f:
        got = f.get_slice("a")[key]
        assert got.shape == a[key].shape
        assert np.array_equal(got, a[key])
        assert np.array_equal(f.get_slice("be")[key], a[key])


def test_random_boxes_match_numpy(cube):
    path, a, z = cube
    rng = np.random.default_rng(1)
    with ztio.open(path) as f:
        for _ in range(200):
            key = tuple(slice(*sorted(rng.integers(0, n + 1, 2))) for n in a.shape)
            assert np.array_equal(f.get_slice("a")[key], a[key])
            zk = tuple(slice(*sorted(rng.integers(0, n + 1, 2))) for n in z.shape)
            assert np.array_equal(f.get_slice("z")[zk], z[zk])


def test_whole_rows_point_into_the_map(cube):
    path, a, _ = cube
    with ztio.open(path) as f:
        rows = f.get_slice("a")[1:3]
        start, length = f._native.map_range()
        addr = rows.__array_interface__["data"][0]
        assert start <= addr < start + length
        assert not rows.flags.writeable
        cols = f.get_slice("a")[:, 1]
        assert cols.flags.writeable  # gathered: an owned copy


def test_slice_metadata_and_errors(cube):
    path, a, _ = cube
    with ztio.open(path) as f:
        s = f.get_slice("a")
        assert s.get_shape() == [4, 5, 6] and s.get_dtype() == "F32" and len(s) == 4
        with pytest.raises(IndexError):
            s[4]
        with pytest.raises(IndexError):
            s[0, 0, 0, 0]
        with pytest.raises(TypeError):
            s["x"]
    with ztio.open(FIXTURES / "interop" / "v123_all.zt") as f:
        with pytest.raises(ztio.ArgumentError, match="not dense"):
            f.get_slice("csr")[0]


def test_packed_sub_byte_slices_match_numpy(tmp_path):
    # int4 ... FP6 are stored packed: a box on byte boundaries is read alone and unpacked,
    # any other index (steps, a box off the boundaries) is the whole object indexed; numpy's
    # answer either way, for any index numpy takes.
    ml = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(20261206)
    for name in ("int4", "uint2", "float4_e2m1fn", "float6_e3m2fn"):
        for shape in [(7,), (4, 6), (3, 5), (2, 3, 4), (1, 7)]:
            a = rng.integers(0, 2, size=shape).astype(np.float32).astype(getattr(ml, name))
            path = tmp_path / f"{name}.zt"
            ztio.save_file({"x": a}, path)
            with ztio.open(path) as f:
                s = f.get_slice("x")
                for _ in range(30):
                    key = []
                    for d in shape:
                        i, j = sorted(int(v) for v in rng.integers(0, d + 1, size=2))
                        step = int(rng.choice([1, 1, 2, -1]))
                        key.append(slice(i, j, step) if step > 0 else slice(j, i, step))
                    key = tuple(key[: rng.integers(1, len(shape) + 1)])
                    got, want = s[key], a[key]
                    assert got.dtype == want.dtype and got.shape == want.shape, (name, shape, key)
                    assert got.tobytes() == np.ascontiguousarray(want).tobytes(), (name, shape, key)
                assert s[-1].tobytes() == a[-1].tobytes()
    # Rows of whole bytes: their unpacked values.
    a = np.arange(16, dtype=np.int8).reshape(4, 4).astype(ml.int4)
    ztio.save_file({"x": a}, tmp_path / "rows.zt")
    with ztio.open(tmp_path / "rows.zt") as f:
        rows = f.get_slice("x")[1:3]
        assert rows.dtype == ml.int4 and rows.tolist() == a[1:3].tolist()
