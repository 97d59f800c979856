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
