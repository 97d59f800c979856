"""HDF5 and Keras files from Python: every dataset of the h5py- and Keras-written fixtures
reads as h5py read it (fixtures/interop/hdf5/expected.json), contiguous data is a view of the
map, and attributes come through."""

import json
import os

import numpy as np
import pytest

import ztio

HDF5 = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "interop", "hdf5")


def _expected():
    with open(os.path.join(HDF5, "expected.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("file", ["h5py_default.h5", "h5py_latest.h5", "other.h5", "keras.weights.h5", "model.keras"])
def test_every_dataset_reads_as_h5py_reads_it(file):
    want = _expected()["files"][file]
    with ztio.open(os.path.join(HDF5, file)) as f:
        for name, w in want.items():
            a = f.get_tensor(name)
            assert list(a.shape) == w["shape"], name
            got = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes().hex()
            assert got == w["hex"], name


def test_keras_weights_are_views_of_the_map_and_attributes_come_through():
    with ztio.open(os.path.join(HDF5, "keras.weights.h5")) as f:
        start, length = f._reader().map_range()
        a = f.get_tensor("/layers/dense/vars/0")
        assert start <= a.__array_interface__["data"][0] < start + length
    with ztio.open(os.path.join(HDF5, "h5py_default.h5")) as f:
        assert f.attributes["keras_version"] == "2.15.0"
        assert f.info("/model_weights/dense/dense/kernel:0").attributes["units"] == 3


@pytest.mark.parametrize("file", ["blosc2.h5.gz", "blosc2_small.h5"])
def test_blosc2_chunks_read_as_h5py_reads_them(tmp_path, file):
    """The Blosc2 filter's chunks from hdf5plugin, PyTables and c-blosc2 (make_hdf5_blosc2.py)
    read from Python as h5py reads them, by SHA-256 of each dataset's bytes."""
    import gzip
    import hashlib

    path = os.path.join(HDF5, file)
    if file.endswith(".gz"):
        path = str(tmp_path / "blosc2.h5")
        with gzip.open(os.path.join(HDF5, file)) as packed, open(path, "wb") as plain:
            plain.write(packed.read())
    with open(os.path.join(HDF5, "blosc2.json")) as f:
        want = json.load(f)["files"][file]
    with ztio.open(path) as f:
        assert sorted(f.keys()) == sorted(want)
        for name, w in want.items():
            a = f.get_tensor(name)
            assert list(a.shape) == w["shape"], name
            got = hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
            assert got == w["sha256"], (name, w["writer"])


@pytest.mark.parametrize("path", ["keras_sharded/model.weights.json", "keras_sharded"])
def test_keras_sharded_weights_open_as_a_set(path):
    """Keras 3's sharded weights (an index of variable groups over .weights.h5 shards), by
    their index or their folder, through ztio.open and ztio.numpy.load_file."""
    import ztio.numpy

    want = _expected()["keras_sharded"]
    full = os.path.join(HDF5, path)
    with ztio.open(full) as f:
        assert sorted(f.keys()) == sorted(want)
        for name, w in want.items():
            a = f.get_tensor(name)
            assert list(a.shape) == w["shape"], name
            assert np.ascontiguousarray(a).tobytes().hex() == w["hex"], name
    loaded = ztio.numpy.load_file(full)
    assert {n: a.tobytes().hex() for n, a in loaded.items()} == {n: w["hex"] for n, w in want.items()}
