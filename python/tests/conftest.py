"""Shared paths for the ztio tests: the repository's fixtures, and the Rust `zt` binary when
the test command built it (ZT_BIN)."""

import json
import os
import pathlib

import numpy as np
import pytest

from ztio._dtypes import PACKED_READ, packed

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def interop(kind):
    """The folder of the files a reference tool wrote (fixtures/interop/<kind>), and what the
    tool read from them (its expected.json, as tools/interop's script wrote it)."""
    folder = FIXTURES / "interop" / kind
    with open(folder / "expected.json") as f:
        return str(folder), json.load(f)


# Types packed below a byte an element that read as their storage bytes (uint8, 1-D), so
# that their arrays have the bytes' shape, not the tensor's: NF4, and without ml_dtypes (or
# with one that lacks them) the rest. The others read unpacked as ml_dtypes' types.
PACKED_TYPES = tuple(
    t for t in ("i2", "u2", "i4", "u4", "nf4", "f4_e2m1", "f6_e2m3", "f6_e3m2") if t not in PACKED_READ
)


def stored_hex(array, type_name):
    """The bytes the file stores for `array`, as hex: an unpacked sub-byte array (ml_dtypes'
    int4, float4_e2m1fn, ...) packed back as the file packs them."""
    if type_name in PACKED_READ:
        return packed(np.asarray(array, order="C"), PACKED_READ[type_name][1]).tobytes().hex()
    return np.asarray(array, order="C").reshape(-1).view(np.uint8).tobytes().hex()


def assert_as_expected(loaded, want):
    """Each array of `loaded` (name -> array) has the shape and the little-endian bytes its
    entry in an expected.json gives (packed types read as bytes: the bytes alone), and no
    array is missing or extra."""
    assert sorted(loaded) == sorted(want)
    for name, w in want.items():
        if w["type"] not in PACKED_TYPES:
            assert list(loaded[name].shape) == w["shape"], name
        assert stored_hex(loaded[name], w["type"]) == w["hex"], name


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
