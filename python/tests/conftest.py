"""Shared paths for the ztio tests: the repository's fixtures, and the Rust `zt` binary when
the test command built it (ZT_BIN)."""

import json
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def interop(kind):
    """The folder of the files a reference tool wrote (fixtures/interop/<kind>), and what the
    tool read from them (its expected.json, as tools/interop's script wrote it)."""
    folder = FIXTURES / "interop" / kind
    with open(folder / "expected.json") as f:
        return str(folder), json.load(f)


# Types packed below a byte an element: they read as their storage bytes (uint8), so their
# arrays have the bytes' shape, not the tensor's.
PACKED_TYPES = ("i2", "u2", "i4", "u4", "nf4", "f4_e2m1", "f6_e2m3", "f6_e3m2")


def assert_as_expected(loaded, want):
    """Each array of `loaded` (name -> array) has the shape and the little-endian bytes its
    entry in an expected.json gives (packed types: the bytes), and no array is missing or
    extra."""
    assert sorted(loaded) == sorted(want)
    for name, w in want.items():
        if w["type"] not in PACKED_TYPES:
            assert list(loaded[name].shape) == w["shape"], name
        assert loaded[name].tobytes().hex() == w["hex"], name


@pytest.fixture
def tmp(tmp_path):
    return tmp_path


def zt_bin():
    """The `zt` binary the test command built, or None when run by hand without it."""
    path = os.environ.get("ZT_BIN")
    if path and os.path.exists(path):
        return path
    guess = ROOT / "target" / "debug" / "zt"
    return str(guess) if guess.exists() else None
