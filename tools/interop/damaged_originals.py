#!/usr/bin/env python3
"""Reads damaged copies of zTensor and .mag files with the original implementation and with
ztio, and prints every copy where the two disagree: which files open, which tensors read and
whether their bytes are still the intact file's, and (zTensor v2) what `verify` says.

    python3 -m venv /tmp/zt2 && /tmp/zt2/bin/pip install ztensor==2.1.2 numpy
    python3 -m venv /tmp/zt12 && /tmp/zt12/bin/pip install ztensor==1.2.3 numpy ml_dtypes
    python3 -m venv /tmp/mag19 && /tmp/mag19/bin/pip install magnetron==0.1.9 numpy
    python3 tools/interop/damaged_originals.py --original /tmp/zt2/bin/python \\
        --ours target/pyenv/bin/python --seed 2 --copies 1500 ../shared/interop/zt2/0[2-5]*.zt
    python3 tools/interop/damaged_originals.py --original /tmp/zt12/bin/python --api 1 \\
        --ours target/pyenv/bin/python --seed 3 --copies 1000 fixtures/interop/v1[12]*.zt
    python3 tools/interop/damaged_originals.py --original /tmp/mag19/bin/python --api mag1 \\
        --ours target/pyenv/bin/python --seed 2 --copies 500 ../shared/interop/mag/*_v200_*.mag

`--api`: `2` ztensor 2.x, `1` ztensor 1.x, `mag1` magnetron 0.1.5-0.1.9 (`.mag` versions 100
and 200), `mag2` magnetron 0.2.x (version 300); and the reference readers of the other formats,
installed in the --original environment: `safetensors` (`safe_open`, numpy), `gguf` (gguf-py's
`GGUFReader`), `numpy` (`np.load`, no pickles; `.npy` and `.npz`), `onnx` (`onnx.load` and
`numpy_helper`), `hdf5` (h5py, every dataset), `torch` (`torch.load(weights_only=True)`, a
state dict's tensors). Each copy has 1 to 3 random changes (a byte replaced, a bit flipped,
1-16 bytes cut, 1-8 inserted), half of them in the last 2 KiB, where
a zTensor manifest and footer are, or with `--near head` in the first 2 KiB (where the headers
of safetensors, GGUF and NumPy files are). Each reader runs in its own process with a timeout, so a
crash or a hang is reported too. Copies that differ are kept in --keep (default
/tmp/damaged_originals). Not part of the tests: the runs and what they found are in
docs/decisions.md ("A damaged object entry", ".npz", GGUF's "Hostile input") and docs/mag.md.
"""

import argparse
import json
import os
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor

# Each reader prints one JSON object, as its last line: "open" ("ok" or the error), "tensors"
# (name -> short SHA-256 of the bytes, or the error), "verify" (None when the reader has none).
# The readers differ in how they open a file, list and get a tensor's bytes, and verify.
READER = r'''
import sys, json, hashlib
import {module}


def failed(e, n):
    return "ERR " + type(e).__name__ + ": " + str(e)[:n]


def short_sha(parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p.tobytes())
    return h.hexdigest()[:16]


out = {{"verify": None}}
try:
    f = {open}(sys.argv[1])
    out["open"] = "ok"
    t = {{}}
    for k in list({keys}):
        try:
            t[k] = short_sha({parts})
        except BaseException as e:
            t[k] = failed(e, 200)
    out["tensors"] = t
except BaseException as e:
    out["open"] = failed(e, 300)
try:
    {verify}
except BaseException as e:
    out["verify"] = failed(e, 300)
print(json.dumps(out))
'''

# ztensor 2.x: a sparse tensor's parts by name; verify raises on a failure.
ORIGINAL_V2 = READER.format(
    module="ztensor",
    open="ztensor.open",
    keys="f.keys()",
    parts="(lambda x: [x[p] for p in sorted(x.parts)] if len(x.parts) > 1 else [x])(f.get(k))",
    verify='out["verify"] = "ok " + str(ztensor.verify(sys.argv[1]))',
)

# ztensor 1.x reads dense tensors only (`read_numpy`) and has no verify.
ORIGINAL_V1 = READER.format(
    module="ztensor",
    open="ztensor.Reader",
    keys="f.keys()",
    parts="[f.read_numpy(k)]",
    verify="pass",
)

# magnetron 0.1.5-0.1.9: `Snapshot`; a tensor's values as a list (its bf16 has no numpy
# type), hashed through numpy; no verify (it never checks its CRC).
ORIGINAL_MAG1 = READER.format(
    module="magnetron, numpy",
    open="magnetron.Snapshot.read",
    keys="f.tensor_keys()",
    parts="[numpy.array(f.get_tensor(k).tolist())]",
    verify="pass",
)

# magnetron 0.2.x: `deserialize` gives every tensor and the metadata at once.
ORIGINAL_MAG2 = READER.format(
    module="magnetron.snapshot",
    open="(lambda p: magnetron.snapshot.deserialize(p)[0])",
    keys="f.keys()",
    parts="[f[k]]",
    verify="pass",
)

# The reference readers of the other formats, each read as its users read it.
# safetensors 0.8: `safe_open` with numpy.
REFERENCE_SAFETENSORS = READER.format(
    module="safetensors",
    open="(lambda p: safetensors.safe_open(p, framework='np'))",
    keys="f.keys()",
    parts="[f.get_tensor(k)]",
    verify="pass",
)

# gguf-py (llama.cpp's reader): a tensor's stored bytes, quantized blocks as they are.
REFERENCE_GGUF = READER.format(
    module="gguf",
    open="(lambda p: {t.name: t for t in gguf.GGUFReader(p).tensors})",
    keys="f",
    parts="[f[k].data]",
    verify="pass",
)

# numpy: `load` without pickles; a .npy is one array, named "array" as ztio names it.
REFERENCE_NUMPY = READER.format(
    module="numpy",
    open="(lambda p: (lambda x: {'array': x} if isinstance(x, numpy.ndarray) else x)"
    "(numpy.load(p, allow_pickle=False)))",
    keys="(f.files if hasattr(f, 'files') else f)",
    parts="[f[k]]",
    verify="pass",
)

# onnx: `load` (external data beside the file) and every initializer as numpy; a name that is
# not UTF-8 (protobuf hands it over as bytes) with U+FFFD, as ztio lists it.
REFERENCE_ONNX = READER.format(
    module="onnx, onnx.numpy_helper",
    open="(lambda p: {(i.name if isinstance(i.name, str) else i.name.decode('utf-8', 'replace')):"
    " i for i in onnx.load(p).graph.initializer})",
    keys="f",
    parts="[onnx.numpy_helper.to_array(f[k])]",
    verify="pass",
)

# h5py: every dataset by its path from the root, read whole.
REFERENCE_HDF5 = READER.format(
    module="h5py",
    open="(lambda p: (lambda h: (h, h.visititems(lambda n, o: None)))(h5py.File(p, 'r'))[0])",
    keys="(lambda names: (f.visititems(lambda n, o: names.append('/' + n) "
    "if isinstance(o, h5py.Dataset) else None), names)[1])([])",
    parts="[f[k][()]]",
    verify="pass",
)

# torch: `load` with `weights_only=True` (its unpickler that builds tensors and containers and
# refuses anything else), the top-level tensors of a state dict, each as its bytes.
REFERENCE_TORCH = READER.format(
    module="torch",
    open="(lambda p: (lambda sd: {k: v for k, v in (sd.items() if isinstance(sd, dict) else [])"
    " if isinstance(v, torch.Tensor)})(torch.load(p, weights_only=True, map_location='cpu')))",
    keys="f",
    parts="[f[k].contiguous().reshape(-1).view(torch.uint8).numpy()]",
    verify="pass",
)

ORIGINALS = {
    "2": ORIGINAL_V2,
    "1": ORIGINAL_V1,
    "mag1": ORIGINAL_MAG1,
    "mag2": ORIGINAL_MAG2,
    "safetensors": REFERENCE_SAFETENSORS,
    "gguf": REFERENCE_GGUF,
    "numpy": REFERENCE_NUMPY,
    "onnx": REFERENCE_ONNX,
    "hdf5": REFERENCE_HDF5,
    "torch": REFERENCE_TORCH,
}

# ztio: a sparse tensor comes back as a scipy array; verify returns a report.
OURS = READER.format(
    module="ztio",
    open="ztio.open",
    keys="f.keys()",
    parts="(lambda a: [a.indices, a.indptr, a.data] if hasattr(a, 'indptr') else [a])(f.get_tensor(k))",
    verify='r = ztio.verify(sys.argv[1]); out["verify"] = ("ok " if not r.errors else "ERR ") + str(r)[:300]',
)


def run(python, code, path):
    try:
        p = subprocess.run([python, "-c", code, path], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return {"open": "HANG"}
    if p.returncode != 0:
        return {"open": f"CRASH (exit {p.returncode}): {p.stderr[-300:]}"}
    # magnetron's C library may print lines of its own before ours.
    lines = p.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"open": f"CRASH (no result): {p.stdout[-300:]!r} {p.stderr[-300:]}"}


def damage(data, rng, near="tail"):
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.5:
            i = rng.randrange(len(b))
        elif near == "head":
            i = rng.randrange(min(len(b), 2048))
        else:
            i = max(0, len(b) - 1 - rng.randrange(min(len(b), 2048)))
        op = rng.choice(["set", "flip", "cut", "insert"])
        if op == "set":
            b[i] = rng.randrange(256)
        elif op == "flip":
            b[i] ^= 1 << rng.randrange(8)
        elif op == "cut":
            del b[i:i + rng.randint(1, 16)]
        else:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return bytes(b)


def tensor_class(result, intact, name):
    """How a reader did on one tensor, against what it read from the intact file."""
    if intact["tensors"].get(name, "ERR").startswith("ERR"):
        return "unread when intact"
    got = result["tensors"].get(name)
    if got is None:
        return "missing"
    if got.startswith("ERR"):
        return "error"
    return "intact bytes" if got == intact["tensors"][name] else "other bytes"


def compare(original, ours, intact_original, intact_ours):
    notes = []
    for who, r in (("original", original), ("ours", ours)):
        if r["open"].startswith(("CRASH", "HANG")):
            notes.append(f"{who}: {r['open']}")
    opened = (original["open"] == "ok", ours["open"] == "ok")
    if opened[0] != opened[1]:
        notes.append(f"open: original {original['open'][:200]} / ours {ours['open'][:300]}")
    if all(opened):
        names = set(intact_original["tensors"]) | set(original["tensors"]) | set(ours["tensors"])
        for name in sorted(names):
            a = tensor_class(original, intact_original, name)
            b = tensor_class(ours, intact_ours, name)
            if a != b and "unread when intact" not in (a, b):
                notes.append(
                    f"tensor {name}: original {a} {original['tensors'].get(name, '')[:150]}"
                    f" / ours {b} {ours['tensors'].get(name, '')[:200]}"
                )
    if original.get("verify") is not None:
        v = (original["verify"].startswith("ok"), str(ours.get("verify", "")).startswith("ok"))
        if v[0] != v[1]:
            notes.append(f"verify: original {original['verify'][:200]} / ours {ours.get('verify', '')[:250]}")
    return notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--original", required=True, help="python with the original ztensor or magnetron")
    ap.add_argument("--api", choices=sorted(ORIGINALS), default="2", help="which original (see above)")
    ap.add_argument("--ours", required=True, help="python with ztio")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--copies", type=int, default=200)
    ap.add_argument("--keep", default="/tmp/damaged_originals")
    ap.add_argument(
        "--near",
        choices=["head", "tail"],
        default="tail",
        help="where half the changes go: the first or the last 2 KiB (headers of safetensors, "
        "GGUF and NumPy files are at the head; zTensor's manifest at the tail)",
    )
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    original_code = ORIGINALS[a.api]
    os.makedirs(a.keep, exist_ok=True)
    intact = {f: (run(a.original, original_code, f), run(a.ours, OURS, f)) for f in a.files}

    def one(i):
        rng = random.Random(a.seed * 1_000_003 + i)
        base = rng.choice(a.files)
        with open(base, "rb") as fh:
            data = damage(fh.read(), rng, a.near)
        # magnetron 0.1.x refuses a name that does not end in .mag.
        path = os.path.join(a.keep, f"{a.seed}_{i}{os.path.splitext(base)[1]}")
        with open(path, "wb") as fh:
            fh.write(data)
        notes = compare(run(a.original, original_code, path), run(a.ours, OURS, path), *intact[base])
        if not notes:
            os.remove(path)
        return path, base, notes

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        results = list(pool.map(one, range(a.copies)))
    differ = [r for r in results if r[2]]
    for path, base, notes in differ:
        print(f"{path} (from {base})")
        for n in notes:
            print("   ", n)
    print(f"{len(differ)} of {a.copies} copies differ")


if __name__ == "__main__":
    main()
