"""One reader shared by threads: reads run in parallel (the GIL is released) and give the
same values as one thread; closing the file while others read never breaks an array."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import ztio


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
