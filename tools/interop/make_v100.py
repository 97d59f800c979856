#!/usr/bin/env python3
"""Writes the zTensor v1.0 samples with PyPI ztensor 1.0.0 or 1.0.1 and prints what it reads back.

    python3 -m venv /tmp/zt101 && /tmp/zt101/bin/pip install ztensor==1.0.1 numpy ml_dtypes
    /tmp/zt101/bin/python tools/interop/make_v100.py fixtures/interop

Writes v100_dtypes.zt (every dtype the 1.0 writer takes, two compressed) and v100_coo.zt
(a COO tensor, a compressed CSR tensor, a scalar and an empty tensor). 1.0.0 and 1.0.1 write
the same bytes. The printed values are what crates/ztensor/tests/interop.rs expects.
"""
import importlib.metadata
import os
import sys

import numpy as np
import ztensor
from ml_dtypes import bfloat16

out = sys.argv[1]

with ztensor.Writer(os.path.join(out, "v100_dtypes.zt")) as w:
    w.add_tensor("f64", np.array([1.5, -2.25], np.float64))
    w.add_tensor("f16", np.array([0.5, -1.0, 2.0], np.float16))
    w.add_tensor("bf16", np.array([1.0, -2.0, 0.5], bfloat16))
    w.add_tensor("i64", np.array([-1, 2**40], np.int64))
    w.add_tensor("i32", np.array([[-3, 4], [5, -6]], np.int32))
    w.add_tensor("i16", np.array([-7, 8], np.int16))
    w.add_tensor("i8", np.array([-9, 10, 11], np.int8))
    w.add_tensor("u64", np.array([2**63 + 1], np.uint64))
    w.add_tensor("u32", np.array([4000000000], np.uint32))
    w.add_tensor("u16", np.array([65535, 1], np.uint16))
    w.add_tensor("u8", np.array([0, 255, 7], np.uint8))
    w.add_tensor("zstd_i32", np.arange(100, dtype=np.int32) % 3, compress=True)
    w.add_tensor("zstd_bool", np.array([True, False] * 20), compress=True)

with ztensor.Writer(os.path.join(out, "v100_coo.zt")) as w:
    # coords are (ndim, nnz), row-major: rows then columns.
    w.add_sparse_coo("coo", np.array([7, 8, 9], np.int32),
                     np.array([[0, 1, 2], [3, 0, 1]], np.uint64), (3, 4))
    w.add_sparse_csr("csr_f64", np.array([0.5, 1.5], np.float64),
                     np.array([1, 0], np.uint64), np.array([0, 1, 2], np.uint64), (2, 2))
    w.add_tensor("scalar", np.array(2.5, np.float32))
    w.add_tensor("empty", np.zeros((0, 3), np.float32))

# The 1.0.x reader hands out views of memory it has already freed (its first elements come back
# as garbage), so the files are checked by decoding them here, independently of it.
import struct  # noqa: E402

import cbor2  # noqa: E402
import zstandard  # noqa: E402

NP = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": bfloat16,
      "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8,
      "uint64": np.uint64, "uint32": np.uint32, "uint16": np.uint16, "uint8": np.uint8,
      "bool": np.bool_}

print("written by ztensor", importlib.metadata.version("ztensor"))
for f in ("v100_dtypes.zt", "v100_coo.zt"):
    b = open(os.path.join(out, f), "rb").read()
    assert b[:8] == b"ZTEN1000"
    n = struct.unpack("<Q", b[-8:])[0]
    m = cbor2.loads(b[-8 - n:-8])
    print(f, len(b), "bytes", {k: v for k, v in m.items() if k != "tensors"})
    for name, t in sorted(m["tensors"].items()):
        parts = {}
        for role, c in sorted(t["components"].items()):
            raw = b[c["offset"]:c["offset"] + c["length"]]
            if c.get("encoding") == "zstd":
                raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
            dt = np.uint64 if role in ("indices", "indptr", "coords") else NP[t["dtype"]]
            parts[role] = np.frombuffer(raw, dt).tolist()
        print(f, name, t["dtype"], t["shape"], t["format"], parts)
