"""Writes the open-of-many benchmark file with the original zTensor implementation.

100,000 tensors of 16 f32 named like `blk.12.expert.34.w4`, the same names `cargo xtask bench
--only open` writes with ours, so that the bench's open row can be measured on a file whose
manifest the original encoded. With ztensor 1.2.3 installed it writes v1.2 (the bench looks
for `many-original.zt`), with ztensor 2.x it writes v2 (`many-original-v2.zt`):

    python3 -m venv /tmp/zt123 && /tmp/zt123/bin/pip install ztensor==1.2.3 numpy
    /tmp/zt123/bin/python tools/bench/many_original.py target/bench-data/scale-1/many-original.zt
    python3 -m venv /tmp/zt212 && /tmp/zt212/bin/pip install ztensor==2.1.2 numpy
    /tmp/zt212/bin/python tools/bench/many_original.py target/bench-data/scale-1/many-original-v2.zt

Not part of the tests: the bench reports each row only when its file exists.
"""

import sys
from importlib.metadata import version

import numpy as np
import ztensor

path = sys.argv[1]
names = [f"blk.{i // 500}.expert.{i // 5 % 100}.w{i % 5}" for i in range(100_000)]

if int(version("ztensor").split(".")[0]) >= 2:
    # The 2.x writer stores equal tensors once (every part an alias of one blob), which no
    # model file does: each tensor gets a value of its own. 4096-byte packing, as the bench's
    # own v2 file has (the canonical 64 KiB would make a 6.5 GB file).
    with ztensor.Writer(path, canonical=False, align=4096) as w:
        for i, name in enumerate(names):
            values = np.full(16, i, dtype=np.float32)
            w.add(name, values.view(np.uint8), [16], "f32")
else:
    zeros = np.zeros(16, dtype=np.float32)
    with ztensor.Writer(path) as w:
        for name in names:
            w.write_numpy(name, zeros)
