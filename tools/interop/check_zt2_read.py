#!/usr/bin/env python3
"""Has the original (ztensor 2.x) write one file per storage dtype, logical type and encoding,
with file attributes and a tensor shared under two names, then reads each with our `zt` and
checks names, shapes, types and bytes against what was written.

    python3 -m venv /tmp/zt2 && /tmp/zt2/bin/pip install ztensor==2.1.2 numpy
    cargo build -p zt-cli
    /tmp/zt2/bin/python tools/interop/check_zt2_read.py target/debug/zt

Exits 1 on any difference. Not part of the tests (they never need Python).
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import ztensor

zt = sys.argv[1] if len(sys.argv) > 1 else "target/debug/zt"
rng = np.random.default_rng(7)

# (dtype, logical type or None, numpy dtype of the storage, element count per stored element)
cases = [(d, None, d) for d in
         ["f64", "i64", "u64", "f32", "i32", "u32", "f16", "i16", "u16", "i8", "u8"]]
cases += [("bf16", None, "u16")]
cases += [("u8", t, "u8") for t in
          ["bool", "f8_e4m3fn", "f8_e5m2", "f8_e4m3fnuz", "f8_e5m2fnuz", "f8_e8m0"]]
cases += [("f32", "complex64", "f32"), ("f64", "complex128", "f64")]


def storage(dtype, logical, np_dtype, shape):
    n = int(np.prod(shape))
    if logical == "bool":
        return rng.integers(0, 2, n).astype(np.uint8)
    floats = {"f64": np.float64, "f32": np.float32, "f16": np.float16}
    if logical in ("complex64", "complex128"):
        return rng.standard_normal(2 * n).astype(floats[np_dtype])
    if np_dtype in floats:
        return rng.standard_normal(n).astype(floats[np_dtype])
    info = np.iinfo({"i64": np.int64, "u64": np.uint64, "i32": np.int32, "u32": np.uint32,
                     "i16": np.int16, "u16": np.uint16, "i8": np.int8, "u8": np.uint8}[np_dtype])
    return rng.integers(info.min, info.max, n, dtype=info.dtype, endpoint=True)


def run(*args):
    return subprocess.run([zt, *args], capture_output=True, check=False)


failures = 0
with tempfile.TemporaryDirectory() as d:
    for encoding in [None, "zt.zstd-seekable/1"]:
        path = os.path.join(d, f"all_{'zstd' if encoding else 'raw'}.zt")
        written = {}
        # Canonical form (the default) takes no encoded parts.
        w = ztensor.Writer(path, canonical=encoding is None)
        w.set_attributes({"framework": "check", "n": 3, "list": [1, 2.5, "x"]})
        for dtype, logical, np_dtype in cases:
            shape = [3, 5]
            data = storage(dtype, logical, np_dtype, shape)
            written[f"{dtype}.{logical or 'plain'}"] = (shape, dtype, logical, data.tobytes())
        # f4_e2m1: 15 elements packed in 8 bytes, the last high nibble 0.
        packed = rng.integers(0, 256, 8, dtype=np.uint8)
        packed[-1] &= 0x0F
        written["u8.f4_e2m1"] = ([15], "u8", "f4_e2m1", packed.tobytes())
        # The original's canonical writer takes names in sorted order only.
        for name in sorted(written):
            shape, dtype, logical, raw = written[name]
            try:
                w.add(name, raw, shape, dtype, logical=logical, encoding=encoding)
            except Exception as e:
                raise SystemExit(f"the original refused {name}: {e}")
        w.finish()

        info = run("info", "--json", path)
        if info.returncode != 0:
            print(f"FAIL {path}: zt info: {info.stderr.decode()}")
            failures += 1
            continue
        listing = json.loads(info.stdout)
        if listing.get("version") != "2" or listing.get("attributes", {}).get("n") != 3:
            print(f"FAIL {path}: version or attributes: {listing.get('version')}, "
                  f"{listing.get('attributes')}")
            failures += 1
        objects = {o["name"]: o for o in listing["objects"]}
        if set(objects) != set(written):
            print(f"FAIL {path}: names differ: {sorted(set(objects) ^ set(written))}")
            failures += 1
        for name, (shape, dtype, logical, raw) in written.items():
            o = objects.get(name)
            if o is None:
                continue
            if o["shape"] != shape:
                print(f"FAIL {path} {name}: shape {o['shape']} != {shape}")
                failures += 1
            # Ours names a logical type as its type, or as the dtype it maps onto (bool).
            want = logical or dtype
            if want not in (o.get("type"), o.get("dtype")):
                print(f"FAIL {path} {name}: type {o.get('dtype')}/{o.get('type')} != {want}")
                failures += 1
            got = run("cat", path, name, "--component", "data")
            if got.returncode != 0 or got.stdout != raw:
                print(f"FAIL {path} {name}: bytes differ ({got.stderr.decode().strip()})")
                failures += 1
        verify = run("verify", path)
        if verify.returncode != 0:
            print(f"FAIL {path}: zt verify: {verify.stdout.decode()}{verify.stderr.decode()}")
            failures += 1
        print(f"{path}: {len(written)} tensors checked")

print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
