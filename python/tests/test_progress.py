"""Progress of long work from Python: callbacks, tqdm where a person watches, silence in a
pipe, and a callback that raises stopping the work."""

import os
import subprocess
import sys
import types

import numpy as np
import pytest

import ztio
from ztio import _progress


def _arrays(n=40, size=50_000):
    return {f"t{i:03d}": np.full(size, i, np.float32) for i in range(n)}


class Seen:
    def __init__(self):
        self.calls = []

    def __call__(self, what, done, total, finished):
        self.calls.append((what, done, total, finished))

    def pieces(self):
        return [c[0] for c in self.calls if c[3]]


def _check_monotone(calls, what):
    mine = [c for c in calls if c[0] == what]
    assert mine, f"nothing told for {what!r}: {calls[:5]}"
    dones = [c[1] for c in mine]
    assert dones == sorted(dones)
    assert mine[-1][3] is True and mine[-1][1] == mine[-1][2] > 0
    assert all(not c[3] for c in mine[:-1])


def test_save_file_tells_each_array(tmp_path):
    seen = Seen()
    arrays = _arrays()
    ztio.save_file(arrays, tmp_path / "m.zt", progress=seen)
    _check_monotone(seen.calls, "save")
    assert seen.calls[-1][2] == sum(a.nbytes for a in arrays.values())
    assert len(seen.calls) == len(arrays) + 2


def test_save_safetensors_tells_start_and_end(tmp_path):
    seen = Seen()
    ztio.save_file(_arrays(4), tmp_path / "m.safetensors", progress=seen)
    assert [c[3] for c in seen.calls] == [False, True]


def test_verify_tells_bytes_checked(tmp_path):
    path = tmp_path / "m.zt"
    arrays = _arrays()
    ztio.save_file(arrays, path, digest="sha256")
    seen = Seen()
    assert ztio.verify(path, progress=seen)
    _check_monotone(seen.calls, "verify")
    assert seen.calls[-1][1] == sum(a.nbytes for a in arrays.values())
    # thinned: never more calls than objects plus the ends, and about 500 at most
    assert len(seen.calls) <= len(arrays) + 2


def test_verify_of_a_set_tells_each_shard(tmp_path):
    src = tmp_path / "m.zt"
    ztio.save_file(_arrays(8), src)
    index = tmp_path / "set" / "model.safetensors.index.json"
    os.makedirs(index.parent)
    ztio.convert(src, index, shard_size=500_000, progress=False)
    shards = ztio.open(index).shards
    assert len(shards) > 1
    seen = Seen()
    assert ztio.verify(index, progress=seen)
    assert len(seen.pieces()) == len(shards)
    assert all(p.startswith("verify ") for p in seen.pieces())


def test_convert_tells_its_pieces(tmp_path):
    src = tmp_path / "m.zt"
    ztio.save_file(_arrays(), src, compression=3)
    seen = Seen()
    ztio.convert(src, tmp_path / "out.zt", progress=seen)
    _check_monotone(seen.calls, "convert")
    seen = Seen()
    ztio.convert(src, tmp_path / "out.safetensors", progress=seen)
    assert seen.pieces() == ["convert to .safetensors"]


def test_diff_tells_bytes_compared(tmp_path):
    a, b = tmp_path / "a.zt", tmp_path / "b.safetensors"
    arrays = _arrays(6)
    ztio.save_file(arrays, a)
    ztio.save_file(arrays, b)
    seen = Seen()
    assert ztio.diff(a, b, progress=seen)
    assert seen.pieces(), seen.calls


def test_a_raising_callback_stops_the_work_and_leaves_no_output(tmp_path):
    src = tmp_path / "m.zt"
    ztio.save_file(_arrays(), src)

    def boom(what, done, total, finished):
        if done > 0:
            raise RuntimeError("stop here")

    dst = tmp_path / "out.zt"
    with pytest.raises(RuntimeError, match="stop here"):
        ztio.convert(src, dst, progress=boom)
    assert not dst.exists()
    assert sorted(os.listdir(tmp_path)) == ["m.zt"]
    with pytest.raises(RuntimeError, match="stop here"):
        ztio.verify(src, progress=boom)


def test_a_bad_progress_argument_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="progress must be"):
        ztio.save_file(_arrays(1), tmp_path / "m.zt", progress="yes")


class _FakeTqdm:
    bars = []

    def __init__(self, total=None, desc=None, **kw):
        self.total, self.desc, self.n, self.closed = total, desc, 0, False
        _FakeTqdm.bars.append(self)

    def update(self, k):
        self.n += k

    def close(self):
        self.closed = True


def test_tqdm_is_used_where_a_person_watches(monkeypatch, tmp_path):
    fake = types.ModuleType("tqdm.auto")
    fake.tqdm = _FakeTqdm
    monkeypatch.setitem(sys.modules, "tqdm", types.ModuleType("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.auto", fake)
    monkeypatch.setattr(_progress, "_watched", lambda: True)
    _FakeTqdm.bars = []
    arrays = _arrays(5)
    ztio.save_file(arrays, tmp_path / "m.zt", digest="xxh3")
    ztio.verify(tmp_path / "m.zt")
    assert [b.desc for b in _FakeTqdm.bars] == ["save", "verify"]
    assert all(b.closed and b.n == b.total == sum(a.nbytes for a in arrays.values()) for b in _FakeTqdm.bars)


def test_nothing_is_drawn_in_a_pipe(tmp_path):
    # A child whose stderr is a pipe: the default progress draws nothing there.
    src = tmp_path / "m.zt"
    ztio.save_file(_arrays(), src)
    code = (
        "import ztio, sys;"
        f"ztio.convert({str(src)!r}, {str(tmp_path / 'o.safetensors')!r});"
        f"assert ztio.verify({str(src)!r})"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr == ""
