"""Without the optional packages: bf16/FP8 read as their storage integers when ml_dtypes
is missing, sparse objects as components when scipy is missing. Run in a fresh interpreter
where importing them fails."""

import subprocess
import sys

from conftest import FIXTURES

SCRIPT = r"""
import sys
sys.modules["ml_dtypes"] = None  # import fails
sys.modules["scipy"] = None
sys.modules["scipy.sparse"] = None
import numpy as np, ztio
assert not ztio.HAVE_ML_DTYPES
with ztio.open(sys.argv[1]) as f:
    assert f["bf16_t"].dtype == np.uint16, f["bf16_t"].dtype
    assert f["fp8"].dtype == np.uint8
    assert f["dense_f32"].dtype == np.float32
    csr = f["csr"]
    assert isinstance(csr, ztio.Components), type(csr)
    assert set(csr.parts) == {"values", "indices", "indptr"}
    try:
        ztio.save_file({"x": f["bf16_t"]}, sys.argv[2])
    except ztio.ArgumentError:
        raise SystemExit("uint16 is storable")
print("ok")
"""


def run_ok(script, *args):
    """Runs ``script`` in a fresh interpreter with ``args``; it must print ``ok``."""
    out = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_without_ml_dtypes_and_scipy(tmp_path):
    run_ok(SCRIPT, FIXTURES / "interop" / "v123_all.zt", tmp_path / "x.zt")


FRAMEWORK_SCRIPT = r"""
import sys
sys.modules["ml_dtypes"] = None  # import fails
import numpy as np, ztio
from ztio._bridge import functions
from ztio._dtypes import stand_in

seen = {}

def to_fake(array, device="cpu", kind=None):
    return ("fake", array.dtype.name, kind, array.copy())

def to_numpy(t):
    _, dtype, kind, bits = t
    return stand_in("bf16", bits) if kind == "bfloat16" else bits

load_file, load, save_file, save = functions(("fake",), "fake tensors", to_fake, to_numpy)
src, out = sys.argv[1], sys.argv[2]
with ztio.safe_open(src, framework="fake") as f:
    got = {k: f.get_tensor(k) for k in ("bf16_t", "fp8", "dense_f32", "bool_t")}
# The framework is told which type the storage integers stand for, and only then.
assert got["bf16_t"][1:3] == ("uint16", "bfloat16"), got["bf16_t"]
assert got["fp8"][1:3] == ("uint8", "float8_e4m3fn"), got["fp8"]
assert got["dense_f32"][1:3] == ("float32", None)
assert got["bool_t"][1:3] == ("bool", None)
with ztio.safe_open(src, framework="fake") as f:
    assert f.get_slice("bf16_t")[1:][2] == "bfloat16"
    assert f.get_slice("fp8")[:2][2] == "float8_e4m3fn"
    assert f.get_slice("dense_f32")[1:][2] is None
# Saved back, bf16 stays bf16 (not uint16), with the same bits, in both kinds of file.
for path in (out + ".safetensors", out + ".zt"):
    save_file({"b": got["bf16_t"], "u": ("fake", "uint16", None, np.arange(3, dtype=np.uint16))}, path)
    with ztio.open(path) as f:
        assert f.info("b").dtype == "bf16", f.info("b").dtype
        assert f.info("u").dtype == "u16"
        assert f["b"].tobytes() == got["bf16_t"][3].tobytes()
assert load(save({"b": got["bf16_t"]}))["b"][2] == "bfloat16"
assert load_file(out + ".zt")["b"][2] == "bfloat16"
print("ok")
"""


def test_frameworks_without_ml_dtypes_get_bf16_and_fp8_as_themselves(tmp_path):
    """Paddle, MLX and torch have bf16 without ml_dtypes: a framework module is told the type
    the storage integers stand for, and hands a bf16 tensor back as bf16 (Paddle refused it
    as "uint16", MLX made a uint16 array)."""
    run_ok(FRAMEWORK_SCRIPT, FIXTURES / "interop" / "v123_all.zt", tmp_path / "x")
