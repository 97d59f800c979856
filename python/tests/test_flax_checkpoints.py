"""Flax checkpoints (msgpack, as flax.serialization.to_bytes and transformers write them):
every array reads as flax's reader reads it (fixtures/interop/flax/expected.json), contiguous
data is a view of the map, the other leaves are metadata, and transformers' shards open as a
set by index or folder."""

import json
import os

import numpy as np
import pytest

import ztio
import ztio.numpy

FLAX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "interop", "flax")


def _expected():
    with open(os.path.join(FLAX, "expected.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("file", ["flax_model.msgpack", "dtypes.msgpack", "chunked.msgpack"])
def test_every_array_reads_as_flax_reads_it(file):
    want = _expected()["files"][file]
    with ztio.open(os.path.join(FLAX, file)) as f:
        assert sorted(f.keys()) == sorted(list(want["arrays"]) + list(want.get("chunked", {})))
        for name, w in want["arrays"].items():
            a = f.get_tensor(name)
            assert list(a.shape) == w["shape"], name
            assert np.ascontiguousarray(a).tobytes().hex() == w["hex"], name
        # An array flax stored in pieces (as it stores arrays over 1 GiB) reads whole.
        for name, w in want.get("chunked", {}).items():
            a = f.get_tensor(name)
            assert list(a.shape) == w["shape"], name
            assert a.tobytes().hex() == w["hex"], name
        metadata = f.metadata() or {}
        for key, value in want["attributes"].items():
            assert key in metadata, key


def test_a_checkpoint_loads_whole_and_its_shards_open_as_a_set():
    want = _expected()
    loaded = ztio.numpy.load_file(os.path.join(FLAX, "flax_model.msgpack"))
    assert {n: a.tobytes().hex() for n, a in loaded.items()} == {
        n: w["hex"] for n, w in want["files"]["flax_model.msgpack"]["arrays"].items()
    }
    for path in ["sharded", os.path.join("sharded", "flax_model.msgpack.index.json")]:
        shards = ztio.numpy.load_file(os.path.join(FLAX, path))
        assert {n: a.tobytes().hex() for n, a in shards.items()} == {n: w["hex"] for n, w in want["sharded"].items()}
