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


def test_without_ml_dtypes_and_scipy(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(FIXTURES / "interop" / "v123_all.zt"), str(tmp_path / "x.zt")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
