#!/usr/bin/env python3
"""Opens our generated zTensor v2 fixtures (fixtures/valid/v2_*.zt, hand-assembled by
`cargo xtask gen-fixtures`) with the original implementation and checks that it verifies
every digest and reads the bytes fixtures/valid/EXPECTED.tsv lists for each part.

    /tmp/zt2/bin/python tools/interop/check_zt2.py fixtures/valid

Exits 1 on any mismatch or refusal.
"""

import hashlib
import os
import sys

import ztensor

folder = sys.argv[1] if len(sys.argv) > 1 else "fixtures/valid"
expected = {}
with open(os.path.join(folder, "EXPECTED.tsv")) as f:
    for line in f.read().splitlines()[1:]:
        name, obj, role, _ty, _shape, sha = line.split("\t")
        if name.startswith("v2_"):
            expected.setdefault(name, []).append((obj, role, sha))

failed = False
for name, parts in sorted(expected.items()):
    try:
        with ztensor.open(os.path.join(folder, name)) as src:
            checked, undigested = tuple(src.verify())
            bad = []
            for obj, role, sha in parts:
                t = src[obj]
                # One-part objects are read whole; multi-part ones by part.
                try:
                    data = bytes(t[role].tobytes())
                except Exception:
                    data = bytes(t.tobytes())
                if hashlib.sha256(data).hexdigest() != sha:
                    bad.append(f"{obj}/{role}")
            print(f"{name}: {checked} digests verified, {len(parts) - len(bad)}/{len(parts)} parts equal"
                  + (f"; MISMATCH {bad}" if bad else ""))
            failed |= bool(bad)
    except Exception as e:
        print(f"{name}: REFUSED: {e}")
        failed = True
sys.exit(1 if failed else 0)
