"""Pickles of NumPy arrays (Paddle's .pdparams and .pdopt, pickle.dump of arrays at protocols
2 to 5): every array reads as pickle.load reads it (fixtures/interop/pickle/expected.json);
arrays whose bytes the file holds are views of the map; protocol 2's latin-1 text is decoded;
arrays that hold no numbers are skipped by load_file; nothing in the pickle runs."""

import json
import os
import pickle

import numpy as np
import pytest

import ztio
import ztio.numpy
from conftest import interop

PICKLE, EXPECTED = interop("pickle")



FILES = sorted(EXPECTED["files"])


@pytest.mark.parametrize("file", FILES)
def test_every_array_reads_as_pickle_load_reads_it(file):
    want = EXPECTED["files"][file]
    path = os.path.join(PICKLE, file)
    with ztio.open(path) as f:
        assert sorted(f.keys()) == sorted(list(want["arrays"]) + want["skipped"])
        for name, w in want["arrays"].items():
            a = f.get_tensor(name)
            assert list(a.shape) == w["shape"], name
            le = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"))
            assert le.tobytes().hex() == w["hex"], name
    loaded = ztio.numpy.load_file(path)
    assert sorted(loaded) == sorted(want["arrays"])


def test_arrays_point_into_the_map_and_match_pickle_load():
    path = os.path.join(PICKLE, "paddle", "model.pdparams")
    with open(path, "rb") as fh:
        theirs = pickle.load(fh)
    ours = ztio.numpy.load_file(path)
    for name, a in ours.items():
        np.testing.assert_array_equal(a, theirs[name])
    with ztio.open(path) as f:
        a = f.get_tensor("0.weight")
        # A view of the file's bytes, not a copy.
        assert not a.flags.owndata
    # Protocol 2 keeps the bytes as latin-1 text: decoded, the same arrays.
    p2 = ztio.numpy.load_file(os.path.join(PICKLE, "paddle", "protocol2.pdparams"))
    with open(os.path.join(PICKLE, "paddle", "protocol2.pdparams"), "rb") as fh:
        theirs = pickle.load(fh)
    for name, a in p2.items():
        np.testing.assert_array_equal(a, theirs[name])


def test_a_pickle_that_would_run_code_is_only_read(tmp_path):
    marker = tmp_path / "ran"
    # pickle.load of this would call os.system; ztio lists the call as an opaque leaf.
    code = f"touch {marker}".encode()
    evil = b"\x80\x02cos\nsystem\nX" + len(code).to_bytes(4, "little") + code + b"\x85R."
    path = tmp_path / "evil.pkl"
    path.write_bytes(evil)
    with ztio.open(str(path)) as f:
        assert list(f.keys()) == []
    assert not marker.exists()


def test_a_set_of_pickles_loads_its_numbers_and_passes_over_the_rest(tmp_path):
    # A set whose shard holds an object array: load_file passes over it, as it does for a
    # single file, instead of raising on it.
    with open(tmp_path / "s1.pkl", "wb") as fh:
        pickle.dump({"a": np.ones(3, np.float32), "objs": np.array([1, "x"], dtype=object)}, fh, protocol=4)
    with open(tmp_path / "s2.pkl", "wb") as fh:
        pickle.dump({"b": np.arange(2, dtype=np.int64)}, fh, protocol=4)
    index = tmp_path / "model.pkl.index.json"
    index.write_text(json.dumps({"weight_map": {"a": "s1.pkl", "objs": "s1.pkl", "b": "s2.pkl"}}))
    loaded = ztio.numpy.load_file(str(index))
    assert sorted(loaded) == ["a", "b"]
    np.testing.assert_array_equal(loaded["a"], np.ones(3, np.float32))
    np.testing.assert_array_equal(loaded["b"], np.arange(2))
    with ztio.open(str(index)) as f:
        assert "objs" in f.keys()
