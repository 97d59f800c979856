"""Saving many small tensors: ztio's save_file to v2 (64 KiB packing), v2 compact and v1.2,
synced and not, beside safetensors' numpy save_file of the same dict.

    python tools/bench/save_small_probe.py OUT_DIR [COUNT] [ELEMENTS]

OUT_DIR must be on the disk being measured (not a tmpfs). Each save goes to a fresh path
(the previous output removed and `sync` run outside the timing), rows in turns, five rounds;
prints the median and the fastest of each row. Needs numpy, safetensors and ztio importable.
For docs/benchmarks.md ("Many small tensors in v2"); never a test.
"""

import os
import sys
import time

import numpy as np


def main() -> None:
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    elements = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    import safetensors.numpy
    import ztio

    rng = np.random.default_rng(0)
    tensors = {f"layer.{i}.weight": rng.standard_normal(elements).astype(np.float32) for i in range(count)}
    os.makedirs(out, exist_ok=True)
    rows = {
        "safetensors .safetensors": ("a.safetensors", lambda p: safetensors.numpy.save_file(tensors, p)),
        "ztio v2, synced": ("b.zt", lambda p: ztio.save_file(tensors, p)),
        "ztio v2": ("c.zt", lambda p: ztio.save_file(tensors, p, sync=False)),
        "ztio v2 compact": ("d.zt", lambda p: ztio.save_file(tensors, p, sync=False, version="v2-compact")),
        "ztio v1.2": ("e.zt", lambda p: ztio.save_file(tensors, p, sync=False, version="v1.2")),
    }
    times = {row: [] for row in rows}
    sizes = {}
    for _ in range(5):
        for row, (name, save) in rows.items():
            path = os.path.join(out, name)
            if os.path.exists(path):
                os.remove(path)
            os.sync()
            start = time.perf_counter()
            save(path)
            times[row].append(time.perf_counter() - start)
            st = os.stat(path)
            sizes[row] = (st.st_size, st.st_blocks * 512)
    for row, t in times.items():
        t.sort()
        size, disk = sizes[row]
        print(f"{row:26s} median {t[len(t) // 2] * 1e3:7.1f} ms  fastest {t[0] * 1e3:7.1f} ms  "
              f"length {size / 1e6:8.1f} MB  on disk {disk / 1e6:7.1f} MB")
    for name, _ in rows.values():
        os.remove(os.path.join(out, name))


if __name__ == "__main__":
    main()
