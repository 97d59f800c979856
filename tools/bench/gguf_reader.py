#!/usr/bin/env python3
"""Times the `gguf` package's reader on a file for `cargo xtask bench` (section gguf).

    GGUF_PYTHON=/tmp/gguf-venv/bin/python cargo xtask bench --only gguf

Usage: gguf_reader.py FILE RUNS DEQUANTIZE_COUNT. Prints one JSON object with the median
seconds of: `open` (GGUFReader(FILE): header, metadata, tensor infos, as the package
parses them), `read` (open, then every tensor's data folded to one 64-bit word with XOR, as
the Rust side touches every byte), and `dequantize` (gguf.quants.dequantize of the first
DEQUANTIZE_COUNT Q4_0 tensors). The first run of each is a warm-up, not counted.
"""
import json
import statistics
import sys
import time

import numpy as np
import gguf

path, runs, n_deq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


def timed(f):
    f()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def open_only():
    gguf.GGUFReader(path)


def read_all():
    r = gguf.GGUFReader(path)
    acc = np.uint64(0)
    for t in r.tensors:
        b = np.asarray(t.data).reshape(-1).view(np.uint8)
        whole = b[: b.size // 8 * 8].view(np.uint64)
        acc ^= np.bitwise_xor.reduce(whole) if whole.size else np.uint64(0)
    return acc


def dequantize():
    r = gguf.GGUFReader(path)
    done = 0
    for t in r.tensors:
        if t.tensor_type == gguf.GGMLQuantizationType.Q4_0 and done < n_deq:
            gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
            done += 1


print(json.dumps({"open": timed(open_only), "read": timed(read_all),
                  "dequantize": timed(dequantize)}))
