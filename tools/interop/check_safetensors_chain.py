"""A safetensors file written by the Python safetensors package, converted by `zt`, read back by
the original implementations:

    python check_safetensors_chain.py ZT_BINARY WORKDIR ZTENSOR_PYTHON MAGNETRON_PYTHON

Writes WORKDIR/py.safetensors (numpy arrays of every dtype both targets hold), runs
`zt convert` to WORKDIR/out.zt and WORKDIR/out.mag (version 300), then reads out.zt with the
ztensor package (in ZTENSOR_PYTHON's environment) and out.mag with magnetron (in
MAGNETRON_PYTHON's), comparing every tensor and the metadata with the numpy originals.
"""
import json
import subprocess
import sys
import textwrap

zt, work, zt_py, mag_py = sys.argv[1:5]
make = textwrap.dedent(f"""
    import numpy as np, json
    from safetensors.numpy import save_file
    t = {{
        "f32": np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5,
        "f16": np.array([1.0, -2.0, 0.5], dtype=np.float16),
        "i64": np.array([-(2**62), 7], dtype=np.int64),
        "i32": np.array([7, -1, 258], dtype=np.int32),
        "i16": np.array([-300, 300], dtype=np.int16),
        "i8": np.array([-128, 127], dtype=np.int8),
        "u64": np.array([2**63 + 5], dtype=np.uint64),
        "u32": np.array([4000000000], dtype=np.uint32),
        "u16": np.array([65535, 1], dtype=np.uint16),
        "u8": np.array([[1, 2], [3, 255]], dtype=np.uint8),
        "bool": np.array([True, False, True]),
    }}
    save_file(t, "{work}/py.safetensors", metadata={{"format": "np", "author": "python"}})
    json.dump({{k: [list(v.shape), v.tolist()] for k, v in t.items()}}, open("{work}/want.json", "w"))
""")
subprocess.run([zt_py, "-c", make], check=True)
for out in ["out.zt", "out.mag"]:
    subprocess.run([zt, "convert", f"{work}/py.safetensors", f"{work}/{out}", "--force"], check=True)

read_zt = textwrap.dedent(f"""
    import ztensor, json, numpy as np
    want = json.load(open("{work}/want.json"))
    r = ztensor.Reader("{work}/out.zt")
    bad = 0
    for k, (shape, values) in want.items():
        a = r[k]
        ok = list(a.shape) == shape and a.tolist() == values
        bad += not ok
        print("ztensor 1.2.3", k, a.dtype, list(a.shape), "identical" if ok else "MISMATCH")
    raise SystemExit(bad)
""")
read_mag = textwrap.dedent(f"""
    import json
    from magnetron.snapshot import deserialize
    want = json.load(open("{work}/want.json"))
    got, md = deserialize("{work}/out.mag")
    bad = 0
    for k, (shape, values) in want.items():
        t = got[k]
        ok = list(t.shape) == shape and t.tolist() == values
        bad += not ok
        print("magnetron 0.2.2", k, t.dtype, list(t.shape), "identical" if ok else f"MISMATCH {{t.tolist()}}")
    ok = md == {{"format": "np", "author": "python"}}
    print("magnetron metadata:", md, "identical" if ok else "MISMATCH")
    raise SystemExit(bad + (not ok))
""")
a = subprocess.run([zt_py, "-c", read_zt]).returncode
b = subprocess.run([mag_py, "-c", read_mag]).returncode
print("all identical" if a == b == 0 else "FAILED")
sys.exit(1 if a or b else 0)
