"""Many small tensors through ztio and safetensors: load_file, safe_open + get_tensor of
every name, and save_file, for numpy or torch.

    python tools/bench/small_tensors_probe.py [COUNT] [numpy|torch] [OUT_DIR]

Writes COUNT tensors of 16 f32 (named like a model's, `model.layers.N.pK.weight`) as
`.safetensors` (by safetensors) and `.zt` v2-compact (by ztio) in OUT_DIR (default
/tmp/zt-small), then times each row seven times in turns and prints the medians (the files
stay in the page cache: these rows are the per-tensor cost, not the disk's). Needs numpy,
safetensors, ztio and, for `torch`, torch. For docs/benchmarks.md ("Many small tensors from
torch"); never a test.
"""

import os
import sys
import time

import numpy as np


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    framework = sys.argv[2] if len(sys.argv) > 2 else "numpy"
    out = sys.argv[3] if len(sys.argv) > 3 else "/tmp/zt-small"
    os.makedirs(out, exist_ok=True)
    import safetensors
    import safetensors.numpy
    import ztio

    rng = np.random.default_rng(0)
    arrays = {f"model.layers.{i // 10}.p{i % 10}.weight": rng.standard_normal(16).astype(np.float32) for i in range(count)}
    st_file, zt_file = os.path.join(out, "small.safetensors"), os.path.join(out, "small.zt")
    safetensors.numpy.save_file(arrays, st_file)
    ztio.save_file(arrays, zt_file, version="v2-compact", sync=False)
    if framework == "numpy":
        import safetensors.numpy as theirs
        import ztio.numpy as ours

        short = "np"
    else:
        import safetensors.torch as theirs
        import ztio.torch as ours

        short = "pt"
    tensors = theirs.load_file(st_file)

    def every_tensor(lib, path):
        with lib.safe_open(path, framework=short) as f:
            for name in f.keys():
                f.get_tensor(name)

    rows = {
        "safetensors load_file": lambda: theirs.load_file(st_file),
        "ztio load_file": lambda: ours.load_file(st_file),
        "ztio load_file (.zt)": lambda: ours.load_file(zt_file),
        "safetensors safe_open": lambda: every_tensor(safetensors, st_file),
        "ztio safe_open": lambda: every_tensor(ztio, st_file),
        "safetensors save_file": lambda: theirs.save_file(tensors, os.path.join(out, "a.safetensors")),
        "ztio save_file": lambda: ours.save_file(tensors, os.path.join(out, "b.safetensors")),
    }
    times = {row: [] for row in rows}
    for _ in range(7):
        for row, run in rows.items():
            start = time.perf_counter()
            run()
            times[row].append(time.perf_counter() - start)
    for row, t in times.items():
        t.sort()
        print(f"{framework:6s} {row:24s} {t[len(t) // 2] * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
