"""The wheel's `zt` command and `python -m ztio`: the zt tool's own code (crates/zt-cli as a
library), with the binary's output and exit statuses."""

import os
import subprocess
import sys

import pytest

from conftest import FIXTURES

NPY = str(FIXTURES / "interop/numpy/v1_f32.npy")


def module(*args):
    return subprocess.run([sys.executable, "-m", "ztio", *args], capture_output=True, text=True)


def test_python_m_ztio_is_the_zt_tool():
    r = module("info", "--json", NPY)
    assert r.returncode == 0, r.stderr
    assert '"kind":"npy"' in r.stdout
    binary = os.environ.get("ZT_BIN")
    if binary:
        same = subprocess.run([binary, "info", "--json", NPY], capture_output=True, text=True)
        assert same.stdout == r.stdout


def test_exit_statuses_are_the_tools():
    assert module("verify", NPY).returncode == 0
    assert module("verify", "/nonexistent/file.zt").returncode == 1
    bad = module("no-such-command")
    assert bad.returncode == 2 and "no-such-command" in bad.stderr
    assert module("--version").returncode == 0


def test_the_zt_script_is_installed_beside_the_interpreter():
    script = os.path.join(os.path.dirname(sys.executable), "zt")
    if not os.path.exists(script):
        pytest.skip("ztio installed without its scripts")
    r = subprocess.run([script, "verify", NPY], capture_output=True, text=True)
    assert r.returncode == 0 and "OK" in r.stdout


def test_convert_and_diff_from_python(tmp_path):
    import numpy as np

    import ztio

    src = tmp_path / "m.safetensors"
    ztio.numpy.save_file({"w": np.arange(6, dtype=np.float32)}, src)
    ztio.convert(src, tmp_path / "m.zt", compress=3, digest="sha256")
    assert ztio.verify(tmp_path / "m.zt")
    assert ztio.diff(src, tmp_path / "m.zt", values_only=True)
    ztio.numpy.save_file({"w": np.ones(6, dtype=np.float32)}, tmp_path / "other.safetensors")
    assert not ztio.diff(src, tmp_path / "other.safetensors")
    with pytest.raises(ztio.Error):
        ztio.convert(src, tmp_path / "m.zt")  # exists: the tool wants --force
    ztio.convert(src, tmp_path / "m.zt", force=True)
    with pytest.raises(ztio.Error):
        ztio.diff(src, tmp_path / "absent.zt")


def test_convert_can_leave_out_what_it_cannot_read(tmp_path):
    import ztio

    # One entry encrypted (listed, unreadable), the other intact.
    src = FIXTURES / "invalid/zip_encrypted.npz"
    out = tmp_path / "salvaged.safetensors"
    with pytest.raises(ztio.Error):
        ztio.convert(src, out, progress=False)
    assert not out.exists()
    ztio.convert(src, out, skip_unreadable=True, progress=False)
    with ztio.safe_open(out, "np") as f:
        assert list(f.keys()) == ["b"]
