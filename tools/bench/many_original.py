"""Writes the open-of-many benchmark file with the original zTensor implementation.

100,000 tensors of 16 f32 named like `blk.12.expert.34.w4`, the same names and values as
`cargo xtask bench --only open` writes with ours, so that the bench's open row can be
measured on a file whose manifest the original encoded.

    python3 -m venv /tmp/zt123 && /tmp/zt123/bin/pip install ztensor==1.2.3 numpy
    /tmp/zt123/bin/python tools/bench/many_original.py target/bench-data/scale-1/many-original.zt

Not part of the tests: the bench reports the row only when the file exists.
"""

import sys

import numpy as np
import ztensor

path = sys.argv[1]
zeros = np.zeros(16, dtype=np.float32)
with ztensor.Writer(path) as w:
    for i in range(100_000):
        w.write_numpy(f"blk.{i // 500}.expert.{i // 5 % 100}.w{i % 5}", zeros)
