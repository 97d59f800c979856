#!/usr/bin/env python3
"""Checks GGUF files written by `zt` with the `gguf` package's reader and its dump tool.

    python3 -m venv /tmp/gguf-venv && /tmp/gguf-venv/bin/pip install gguf==0.19.0 numpy safetensors
    cargo build --release -p zt-cli
    /tmp/gguf-venv/bin/python tools/interop/check_gguf.py target/release/zt

For every GGUF fixture (fixtures/interop/gguf/*.gguf, fixtures/valid/gguf_*.gguf):
`zt convert` it to zTensor v2 and v1.2, then each back to GGUF, and compare what
`gguf.GGUFReader` reads from the result with what it reads from the original: every
metadata key with its value type(s) and value, every tensor's name, ggml type, shape and
bytes. Also converts fixtures/interop/safetensors/numpy.safetensors (its dense tensors of
the types GGUF holds) to GGUF and compares the tensors with what the `safetensors` package
reads. Each written file must pass `gguf-dump`. Prints one line per check; exits 1 on any
difference.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf

ZT = os.path.abspath(sys.argv[1])
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BIN = os.path.dirname(sys.executable)
failures = []


def zt(*args):
    subprocess.run([ZT, *args], check=True, capture_output=True)


def fields(path):
    """key -> (types, value) as the package reads them; the writer-added keys kept."""
    r = gguf.GGUFReader(path)
    out = {}
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        out[name] = (list(f.types), f.contents())
    return out


def tensors(path):
    r = gguf.GGUFReader(path)
    swapped = r.byte_order == "S"

    def le(t):
        # A big-endian file's tensors compare by value: as little-endian bytes. The package
        # reads BF16 as raw bytes (numpy has no bfloat16), so those are swapped here.
        a = np.asarray(t.data)
        if swapped and t.tensor_type == gguf.GGMLQuantizationType.BF16:
            a = a.view(np.uint16).byteswap()
        return bytes(a.astype(a.dtype.newbyteorder("<")).tobytes())
    return {t.name: (t.tensor_type.name, [int(d) for d in t.shape], le(t)) for t in r.tensors}


def dump_ok(path):
    p = subprocess.run([os.path.join(BIN, "gguf-dump"), path], capture_output=True, text=True)
    return p.returncode == 0 and "tensor" in p.stdout.lower()


def compare(label, original, written):
    fa, fb = fields(original), fields(written)
    ta, tb = tensors(original), tensors(written)
    bad = []
    if fa.keys() != fb.keys():
        bad.append(f"keys differ: {sorted(fa.keys() ^ fb.keys())}")
    for k in fa.keys() & fb.keys():
        if fa[k][0] != fb[k][0]:
            bad.append(f"{k}: types {fa[k][0]} != {fb[k][0]}")
        elif repr(fa[k][1]) != repr(fb[k][1]):
            bad.append(f"{k}: value {fa[k][1]!r} != {fb[k][1]!r}")
    if ta.keys() != tb.keys():
        bad.append(f"tensors differ: {sorted(ta.keys() ^ tb.keys())}")
    for n in ta.keys() & tb.keys():
        if ta[n] != tb[n]:
            bad.append(f"tensor {n}: {ta[n][:2]} vs {tb[n][:2]}, bytes equal: {ta[n][2] == tb[n][2]}")
    if not dump_ok(written):
        bad.append("gguf-dump failed")
    status = "same" if not bad else "DIFFERENT: " + "; ".join(bad)
    print(f"{label}: {len(ta)} tensors, {len(fa)} keys: {status}")
    if bad:
        failures.append(label)


with tempfile.TemporaryDirectory() as tmp:
    sources = [os.path.join(ROOT, "fixtures/interop/gguf", f)
               for f in sorted(os.listdir(os.path.join(ROOT, "fixtures/interop/gguf")))
               if f.endswith(".gguf")]
    sources += [os.path.join(ROOT, "fixtures/valid", f)
                for f in sorted(os.listdir(os.path.join(ROOT, "fixtures/valid")))
                if f.startswith("gguf_") and f.endswith(".gguf")]
    for src in sources:
        base = os.path.splitext(os.path.basename(src))[0]
        for to in ["v2", "v1.2"]:
            mid = os.path.join(tmp, f"{base}.{to}.zt")
            back = os.path.join(tmp, f"{base}.{to}.gguf")
            zt("convert", "--to", to, src, mid)
            zt("convert", mid, back)
            with open(src, "rb") as f:
                version = int.from_bytes(f.read(8)[4:], "little")
            if version & 0xFFFF == 0:  # a big-endian file
                version = int.from_bytes(version.to_bytes(4, "little"), "big")
            if version in (2, 3):
                compare(f"{base} -> {to} -> gguf", src, back)
            else:
                # The package reads v2 and v3 only: a v1 source is checked by what zt
                # itself reads from it (zt diff) and by gguf-dump on the v3 it writes.
                same = subprocess.run([ZT, "diff", src, back], capture_output=True).returncode == 0
                ok = same and dump_ok(back)
                print(f"{base} (GGUF v1) -> {to} -> gguf: gguf-dump {'ok' if ok else 'FAILED'}")
                if not ok:
                    failures.append(base)

    # safetensors -> GGUF: dense types GGUF holds.
    from safetensors.numpy import load_file, save_file
    st_in = load_file(os.path.join(ROOT, "fixtures/interop/safetensors/numpy.safetensors"))
    keep = {k: v for k, v in st_in.items()
            if v.dtype in (np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64)}
    st = os.path.join(tmp, "dense.safetensors")
    save_file(keep, st)
    out = os.path.join(tmp, "from_safetensors.gguf")
    zt("convert", st, out)
    got = tensors(out)
    bad = [k for k, v in keep.items()
           if got.get(k, (None, None, None))[2] != np.ascontiguousarray(v).tobytes()
           or list(reversed(got[k][1])) != list(v.shape if v.shape else [])]
    ok = not bad and dump_ok(out)
    print(f"safetensors ({len(keep)} tensors) -> gguf: {'same' if ok else 'DIFFERENT: ' + str(bad)}")
    if not ok:
        failures.append("safetensors")

sys.exit(1 if failures else 0)
