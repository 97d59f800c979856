"""One reader shared by threads: reads run in parallel (the GIL is released) and give the
same values as one thread; closing the file while others read never breaks an array."""

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import ztio
import ztio.numpy


def test_threads_read_the_same_values(tmp_path):
    rng = np.random.default_rng(3)
    arrays = {f"t{i}": rng.standard_normal((64, 64)).astype(np.float32) for i in range(16)}
    path = tmp_path / "m.zt"
    with ztio.Writer(path) as w:
        for i, (k, v) in enumerate(sorted(arrays.items())):
            w.add(k, v, compression=(i % 2 == 0))
    with ztio.open(path) as f:
        def work(name):
            total = 0.0
            for _ in range(20):
                total += float(f.get_tensor(name).sum())
                total += float(f.get_slice(name)[3:9, 5].sum())
            return name, total

        with ThreadPoolExecutor(8) as pool:
            results = dict(pool.map(work, sorted(arrays) * 3))
        for name, a in arrays.items():
            expected = 20 * (float(a.sum()) + float(a[3:9, 5].sum()))
            assert np.isclose(results[name], expected, rtol=1e-4)
        assert f.verify().ok


def test_closing_while_threads_read(tmp_path):
    a = np.arange(1 << 16, dtype=np.float32)
    path = tmp_path / "c.zt"
    ztio.save_file({"a": a}, path)
    f = ztio.open(path)
    got, errors = [], []
    start = threading.Barrier(5)

    def reader():
        start.wait()
        for _ in range(200):
            try:
                got.append(f.get_tensor("a"))
            except ztio.ArgumentError as e:  # closed: a clean error, never a crash
                errors.append(e)
                return

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    start.wait()
    f.close()
    for t in threads:
        t.join()
    for x in got:
        assert x[-1] == a[-1]
    assert all("closed" in str(e) for e in errors)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_worker_reads_after_the_parent_did(tmp_path):
    # PyTorch's DataLoader and multiprocessing fork workers (Linux's default) after the
    # parent has read: a fork has none of the parent's threads, so work handed to the
    # parent's thread pool waited forever (a safetensors open, a verify, a zstd decode).
    # Run in a fresh interpreter: this one may hold other libraries' threads (JAX's) that a
    # fork should not copy.
    rng = np.random.default_rng(5)
    arrays = {f"t{i}": rng.standard_normal((256, 1024)).astype(np.float32) for i in range(8)}
    ztio.numpy.save_file(arrays, tmp_path / "m.safetensors")
    ztio.save_file(arrays, tmp_path / "m.zt", compression=True)
    script = r"""
import os, sys, signal
import numpy as np
import ztio, ztio.numpy
files = sys.argv[1:]
expected = ztio.numpy.load_file(files[0])
opened = [ztio.open(p) for p in files]
for p, f in zip(files, opened):  # the parent's pools at work first
    ztio.numpy.load_file(p)
    ztio.verify(p)
    f.get_tensor("t0")
for p, f in zip(files, opened):
    pid = os.fork()
    if pid == 0:  # the worker: a failure or a hang is its exit status
        code = 3
        try:
            signal.alarm(30)
            same = np.array_equal(ztio.numpy.load_file(p)["t3"], expected["t3"])
            same &= not ztio.verify(p).errors
            same &= np.array_equal(ztio.open(p).get_tensor("t5"), expected["t5"])
            same &= np.array_equal(f.get_tensor("t6"), expected["t6"])
            code = 0 if same else 4
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        sys.exit(f"{p}: worker status {status}")
"""
    files = [str(tmp_path / "m.safetensors"), str(tmp_path / "m.zt")]
    run = subprocess.run([sys.executable, "-c", script, *files], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr


def _sum_of(args):
    f, name = args
    return float(f.get_tensor(name).sum())


def test_open_files_pickle_by_path_and_reach_spawned_workers(tmp_path):
    # A dataset holding open files goes to DataLoader workers by pickle when they are
    # spawned (macOS' and Windows' default): the copy opens the file again by its path,
    # with the options it was opened with.
    import multiprocessing
    import pickle

    arrays = {f"t{i}": np.full((8, 8), i, np.float32) for i in range(4)}
    single = tmp_path / "m.safetensors"
    ztio.numpy.save_file(arrays, single)
    (tmp_path / "set").mkdir()
    ztio.numpy.save_file(arrays, tmp_path / "set" / "model-00001-of-00001.safetensors")
    index = tmp_path / "set" / "model.safetensors.index.json"
    shard = {k: "model-00001-of-00001.safetensors" for k in arrays}
    index.write_text(json.dumps({"metadata": {}, "weight_map": shard}))
    for f in (ztio.open(single, verify=True), ztio.open(index), ztio.safe_open(single, framework="np")):
        copy = pickle.loads(pickle.dumps(f))
        assert type(copy) is type(f) and copy.keys() == f.keys()
        assert np.array_equal(copy.get_tensor("t2"), arrays["t2"])
    assert pickle.loads(pickle.dumps(ztio.open(single, verify=True)))._options["verify"]
    closed = ztio.open(single)
    closed.close()
    with pytest.raises(TypeError, match="closed"):
        pickle.dumps(closed)
    with pytest.raises(TypeError, match="bytes"):
        pickle.dumps(ztio.File._of_bytes(single.read_bytes()))
    f = ztio.open(single)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        sums = pool.map(_sum_of, [(f, name) for name in sorted(arrays)])
    assert sums == [64.0 * i for i in range(4)]


def _mixed_file(path, rng):
    """A v2 file of raw objects (every third), small compressed ones (which the caller
    decodes itself) and compressed ones of 512 KiB, interleaved: several MiB to decode."""
    arrays = {}
    with ztio.Writer(path) as w:
        for i in range(24):
            shape = (16, 16) if i % 6 == 1 else (512, 256)
            a = rng.standard_normal(shape).astype(np.float32)
            arrays[f"t{i:02}"] = a
            w.add(f"t{i:02}", a, compression=(i % 3 != 0))
    return arrays


@pytest.fixture
def taken(monkeypatch):
    """The names a load took decoded from the workers, in order. Two CPUs are pretended where
    the machine has one, so that the threads are always tried."""
    from ztio import _file

    monkeypatch.setattr(_file._native, "usable_cpus", lambda: 2)
    names = []
    real_take = _file._DecodeAhead.take

    def take(self, name):
        future = real_take(self, name)
        if future is not None:
            names.append(name)
        return future

    monkeypatch.setattr(_file._DecodeAhead, "take", take)
    return names


def test_a_whole_file_load_decodes_on_worker_threads_and_gives_the_same_arrays(tmp_path, monkeypatch, taken):
    from ztio import _file

    arrays = _mixed_file(tmp_path / "m.zt", np.random.default_rng(5))
    started = []
    real_start = _file._DecodeAhead.start

    def start(f):
        ahead = real_start(f)
        started.append(ahead)
        return ahead

    monkeypatch.setattr(_file._DecodeAhead, "start", staticmethod(start))
    before = threading.active_count()
    loaded = ztio.numpy.load_file(tmp_path / "m.zt")
    assert started and started[0] is not None
    # Every large compressed object came from a worker, in file order; the raw ones and the
    # small ones did not.
    assert taken == [n for i, n in enumerate(sorted(arrays)) if i % 3 != 0 and i % 6 != 1]
    assert list(loaded) == sorted(arrays)
    for name, a in arrays.items():
        np.testing.assert_array_equal(loaded[name], a)
    assert threading.active_count() == before


def _mixed_set(tmp_path, rng):
    """The objects of :func:`_mixed_file` in a set of compressed ``.zt`` shards."""
    arrays = _mixed_file(tmp_path / "m.zt", rng)
    index = tmp_path / "set" / "m.zt.index.json"
    os.makedirs(index.parent)
    ztio.convert(tmp_path / "m.zt", index, compress=3, shard_size=1_500_000, progress=False)
    return arrays, index


def test_a_whole_set_load_decodes_on_worker_threads_and_gives_the_same_arrays(tmp_path, monkeypatch, taken):
    from ztio import _file

    arrays, index = _mixed_set(tmp_path, np.random.default_rng(7))
    added = []
    real_add = _file._DecodeAhead.add

    def add(self, reader, name):
        added.append(name)
        real_add(self, reader, name)

    monkeypatch.setattr(_file._DecodeAhead, "add", add)
    before = threading.active_count()
    with ztio.open(index) as f:
        assert len(f.shards) > 2
    # Each large object (every one compressed now) came from a worker; the small ones not.
    large = sorted(n for i, n in enumerate(sorted(arrays)) if i % 6 != 1)
    for load in (ztio.numpy.load_file, ztio.flax.load_file if _has_jax() else None):
        if load is None:
            continue
        added.clear()
        taken.clear()
        loaded = load(index)
        assert sorted(added) == large
        assert sorted(taken) == large
        assert sorted(loaded) == sorted(arrays)
        for name, a in arrays.items():
            np.testing.assert_array_equal(np.asarray(loaded[name]), a)
    assert threading.active_count() == before
    # One CPU: no threads, the same arrays.
    monkeypatch.setattr(_file._native, "usable_cpus", lambda: 1)
    added.clear()
    loaded = ztio.numpy.load_file(index)
    assert added == []
    for name, a in arrays.items():
        np.testing.assert_array_equal(loaded[name], a)


def _damage_the_middle_of(path, name):
    """Zeroes 64 bytes in the middle of ``name``'s compressed stream in the file at ``path``:
    its decode (or its digest) fails."""
    with ztio.open(path) as f:
        victim = f.info(name).components[0]
    data = bytearray(path.read_bytes())
    middle = victim.offset + victim.length // 2
    data[middle : middle + 64] = bytes(64)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", ["file", "set"])
def test_a_failed_decode_on_a_worker_is_raised_by_the_load(tmp_path, monkeypatch, kind):
    from ztio import _file

    monkeypatch.setattr(_file._native, "usable_cpus", lambda: 2)
    if kind == "file":
        path = holder = tmp_path / "m.zt"
        _mixed_file(path, np.random.default_rng(6))
    else:
        _arrays, path = _mixed_set(tmp_path, np.random.default_rng(8))
        with open(path) as f:
            holder = path.parent / json.load(f)["weight_map"]["t08"]
    _damage_the_middle_of(holder, "t08")
    before = threading.active_count()
    with pytest.raises(ztio.Error) as e:
        ztio.numpy.load_file(path)
    assert "t08" in str(e.value)
    assert threading.active_count() == before


def _has_jax():
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    import ztio.flax  # noqa: F401

    return True


def test_as_read_decodes_ahead_while_it_runs_and_stops_when_left(tmp_path, taken):
    arrays, index = _mixed_set(tmp_path, np.random.default_rng(9))
    _mixed_file(tmp_path / "one.zt", np.random.default_rng(9))
    before = threading.active_count()
    large = sorted(n for i, n in enumerate(sorted(arrays)) if i % 6 != 1)
    for path, decoded in ((index, large), (tmp_path / "one.zt", [n for n in large if int(n[1:]) % 3])):
        with ztio.open(path) as f:
            taken.clear()
            got = dict(f.as_read())
            assert sorted(taken) == decoded
            for name, a in arrays.items():
                np.testing.assert_array_equal(got[name], a)
            # Left after three tensors: the workers end with the iteration, and reads go on.
            taken.clear()
            it = f.as_read()
            for _ in range(3):
                next(it)
            assert threading.active_count() > before
            it.close()
            assert threading.active_count() == before
            assert all(shard._ahead is None for shard in getattr(f, "_shards", {}).values())
            assert getattr(f, "_ahead", None) is None
            np.testing.assert_array_equal(f.get_tensor("t10"), arrays["t10"])
    assert threading.active_count() == before
