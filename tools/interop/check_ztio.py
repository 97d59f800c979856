#!/usr/bin/env python3
"""Cross-checks of the Python package ztio, with the originals installed beside it (the
names do not collide: ztio is ours, ztensor the original's):

1. files ztio writes (every dtype the original knows, raw and zstd, with attributes, v2 and
   v2-compact) are verified and read by the original ztensor 2.x with the same values;
2. code written for safetensors' ``safe_open`` runs unchanged against ztio.safe_open and
   gives what safetensors gives, on a file safetensors wrote and on one ztio wrote.

    python3 -m venv /tmp/ztio-x && /tmp/ztio-x/bin/pip install ztensor==2.1.2 safetensors numpy ml_dtypes maturin
    (cd python && VIRTUAL_ENV=/tmp/ztio-x PATH=/tmp/ztio-x/bin:$PATH maturin develop --release)
    /tmp/ztio-x/bin/python tools/interop/check_ztio.py

Prints one line per check; exits 1 on any difference.
"""

import os
import sys
import tempfile

import ml_dtypes
import numpy as np
import safetensors
import safetensors.numpy
import ztensor

import ztio
import ztio.numpy

failed = False


def report(what, ok, detail=""):
    global failed
    failed |= not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}")


rng = np.random.default_rng(11)
arrays = {
    "f64": rng.standard_normal((3, 5)),
    "f32": rng.standard_normal((4, 4)).astype(np.float32),
    "f16": rng.standard_normal(7).astype(np.float16),
    "bf16": rng.standard_normal((2, 3)).astype(ml_dtypes.bfloat16),
    "i64": np.arange(-5, 5, dtype=np.int64),
    "i32": np.arange(6, dtype=np.int32).reshape(2, 3),
    "i16": np.array([-7, 7], np.int16),
    "i8": np.array([-128, 127], np.int8),
    "u64": np.array([1, 2**63], np.uint64),
    "u32": np.array([4], np.uint32),
    "u16": np.array([65535, 0], np.uint16),
    "u8": np.arange(9, dtype=np.uint8).reshape(3, 3),
    "bool": np.array([True, False, True]),
    "e4m3": np.array([0.5, -1.5], ml_dtypes.float8_e4m3fn),
    "e5m2": np.array([0.25, 8.0], ml_dtypes.float8_e5m2),
    "c64": np.array([1 + 2j], np.complex64),
}

_tmp_dir = tempfile.TemporaryDirectory()  # removed at exit
tmp = _tmp_dir.name
for version in ("v2", "v2-compact"):
    for compression in (None, True):
        path = os.path.join(tmp, f"{version}-{compression}.zt")
        ztio.save_file(arrays, path, metadata={"source": "ztio", "n": 3}, compression=compression, version=version)
        try:
            with ztensor.open(path) as f:
                checked, _ = tuple(f.verify())
                bad = []
                for k, a in arrays.items():
                    b = f[k]  # the original's Tensor: its bytes and shape
                    if bytes(b.tobytes()) != a.tobytes() or tuple(b.shape) != a.shape:
                        bad.append(k)
                report(f"ztensor 2.x reads ztio {version} compression={compression}",
                       not bad, f"{checked} digests verified" + (f"; differ: {bad}" if bad else ""))
        except Exception as e:
            report(f"ztensor reads ztio {version} compression={compression}", False, repr(e))


def loader(safe_open, path):
    """safe_open code as safetensors' documentation writes it."""
    out = {}
    with safe_open(path, framework="np") as f:
        meta = f.metadata()
        for k in f.keys():
            out[k] = f.get_tensor(k)
        sl = f.get_slice(f.keys()[0])
        shape = sl.get_shape()
        rows = sl[: max(1, shape[0] // 2)] if shape else None
        dtype = sl.get_dtype()
    return out, meta, rows, dtype


plain = {k: v for k, v in arrays.items() if k not in ("c64", "e4m3", "e5m2", "bf16")}
theirs_path = os.path.join(tmp, "theirs.safetensors")
safetensors.numpy.save_file(plain, theirs_path, metadata={"a": "b"})
ours_path = os.path.join(tmp, "ours.safetensors")
ztio.numpy.save_file(plain, ours_path, metadata={"a": "b"})
report("ztio.numpy.save_file writes safetensors' bytes", open(ours_path, "rb").read() == open(theirs_path, "rb").read())
for path in (theirs_path, ours_path, os.path.join(os.path.dirname(__file__), "../../fixtures/interop/safetensors/numpy.safetensors")):
    a = loader(safetensors.safe_open, path)
    b = loader(ztio.safe_open, path)
    same = (a[0].keys() == b[0].keys() and all(np.array_equal(a[0][k], b[0][k]) and a[0][k].dtype == b[0][k].dtype for k in a[0])
            and a[1] == b[1] and np.array_equal(a[2], b[2]) and a[3] == b[3])
    report(f"safe_open code gives the same on {os.path.basename(path)}", same)
sys.exit(1 if failed else 0)
