#!/usr/bin/env python3
"""Compares `zt convert x.gguf x.zt` (zTensor v2) with what the original ztensor 2.x makes of
the same GGUF file (`ztensor.convert`, PyPI ztensor 2.1.2).

    python3 -m venv /tmp/zt2-venv && /tmp/zt2-venv/bin/pip install ztensor==2.1.2 gguf==0.19.0 numpy
    cargo build --release -p zt-cli
    /tmp/zt2-venv/bin/python tools/interop/check_gguf_zt2.py target/release/zt

For each GGUF fixture the original can convert (it refuses a whole file over one type id its
table lacks, and big-endian files), and for a copy of quant.gguf holding only the block types
its table has, both .zt files are listed with `zt info --json` and must agree on every
object's format (layout), shape, attributes, and every component's type and length, and on
the file attributes; `zt diff` must find the same values. Our file has one attribute more,
`gguf.value_types`. Prints what the original refused. Exits 1 on any difference.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
import ztensor

ZT = os.path.abspath(sys.argv[1])
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# The block types ztensor 2.1.2's GGUF projection knows (ztensor-compat's type table).
ORIGINAL_KNOWS = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
                  "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",
                  "IQ2_S", "IQ4_XS", "IQ1_M", "MXFP4"}
failures = []


def info(path):
    j = json.loads(subprocess.run([ZT, "info", "--json", path], check=True,
                                  capture_output=True).stdout)
    objects = {}
    for o in j["objects"]:
        comps = {r: (c["dtype"], c["type"], c["length"]) for r, c in o["components"].items()}
        objects[o["name"]] = (o["format"], o["shape"], o["attributes"], comps)
    return j["attributes"], objects


def compare(label, src):
    with tempfile.TemporaryDirectory() as tmp:
        orig, ours = os.path.join(tmp, "orig.zt"), os.path.join(tmp, "ours.zt")
        try:
            ztensor.convert(src, orig)
        except Exception as e:  # the original refuses the whole file
            print(f"{label}: the original refuses it: {e}")
            return
        subprocess.run([ZT, "convert", "--to", "v2", src, ours], check=True, capture_output=True)
        (fa, oa), (fb, ob) = info(orig), info(ours)
        bad = []
        extra = set(fb) - set(fa)
        if extra != {"gguf.value_types"} or any(fa[k] != fb[k] for k in fa):
            bad.append(f"file attributes: {sorted(set(fa) ^ set(fb))}")
        if oa.keys() != ob.keys():
            bad.append(f"objects: {sorted(oa.keys() ^ ob.keys())}")
        for n in oa.keys() & ob.keys():
            if oa[n] != ob[n]:
                bad.append(f"{n}: {oa[n]} vs {ob[n]}")
        d = subprocess.run([ZT, "diff", orig, ours], capture_output=True, text=True)
        # The only difference zt diff may report is the types attribute.
        if d.returncode not in (0, 1) or "gguf.value_types" not in d.stdout and d.returncode == 1:
            bad.append(f"zt diff: {d.stdout.strip()} {d.stderr.strip()}")
        if d.returncode == 1 and any(l and "gguf.value_types" not in l for l in d.stdout.splitlines()):
            bad.append(f"zt diff: {d.stdout.strip()}")
        print(f"{label}: {len(oa)} objects: {'same' if not bad else 'DIFFERENT: ' + '; '.join(bad)}")
        if bad:
            failures.append(label)


for f in ["dense.gguf", "quant.gguf", "big_endian.gguf"]:
    compare(f, os.path.join(ROOT, "fixtures/interop/gguf", f))
for f in ["gguf_v1.gguf", "gguf_v2.gguf"]:
    compare(f, os.path.join(ROOT, "fixtures/valid", f))

# quant.gguf without the types the original does not know.
with tempfile.TemporaryDirectory() as tmp:
    sub = os.path.join(tmp, "known.gguf")
    r = gguf.GGUFReader(os.path.join(ROOT, "fixtures/interop/gguf/quant.gguf"))
    w = gguf.GGUFWriter(sub, arch="test")
    kept = 0
    for t in r.tensors:
        if t.tensor_type.name in ORIGINAL_KNOWS:
            data = np.asarray(t.data)
            w.add_tensor(t.name, data, raw_dtype=t.tensor_type)
            kept += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    compare(f"quant.gguf, the {kept} block types the original knows", sub)

sys.exit(1 if failures else 0)
