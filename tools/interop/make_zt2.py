#!/usr/bin/env python3
"""zTensor v2 interop: regenerate the one sample too large to commit, and print what the
original implementation reads from every sample in fixtures/interop/zt2/.

Needs a throwaway venv with the original's package (never a dependency of the tests):

    python3 -m venv /tmp/zt2 && /tmp/zt2/bin/pip install ztensor==2.1.2 numpy
    /tmp/zt2/bin/python tools/interop/make_zt2.py fixtures/interop/zt2

The shared sample 01 is canonical, so every blob sits on a 64 KiB boundary and the file is
196,944 bytes of mostly zeros. `01_tied_f32_a4k.zt` holds the same three tensors (the tied
weight sharing one blob with `weight`) written by the original at its 4 KiB floor instead.
The values printed are what crates/ztensor/tests/interop_v2.rs expects.
"""

import os
import sys

import numpy as np
import ztensor

out = sys.argv[1] if len(sys.argv) > 1 else "fixtures/interop/zt2"


def f32(values):
    return np.asarray(values, dtype=np.float32).reshape(-1).view(np.uint8)


tied = os.path.join(out, "01_tied_f32_a4k.zt")
if os.path.exists(tied):
    os.remove(tied)
with ztensor.Writer(tied, canonical=False, align=4096) as w:
    w.add("bias", f32([0.5, -1.0, 2.0]), [3], "f32")
    w.add("weight", f32(np.arange(6)), [2, 3], "f32")
    w.add("weight_tied", f32(np.arange(6)), [2, 3], "f32")

for name in sorted(os.listdir(out)):
    if not name.endswith(".zt") or "-0000" in name:
        continue
    print(f"== {name} ({os.path.getsize(os.path.join(out, name))} bytes)")
    with ztensor.open(os.path.join(out, name)) as f:
        print("  verify:", tuple(f.verify(deep=True)))
        for obj in f:
            t = f[obj]
            # A multi-part object has no single byte view: show each part.
            parts = ["indices", "indptr", "values"] if name.startswith("04") else [None]
            for part in parts:
                raw = bytes((t if part is None else t[part]).tobytes())
                shown = raw.hex() if len(raw) <= 32 else f"{raw[:32].hex()}... ({len(raw)} bytes, {len(set(raw))} distinct)"
                print(f"  {obj}{'' if part is None else '/' + part}: {shown}")
