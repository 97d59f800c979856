"""TensorFlow checkpoints (PREFIX.index and its PREFIX.data-* files, as TensorFlow wrote
them): every tensor reads as tf.train.load_checkpoint reads it
(fixtures/interop/tensorflow/expected.json), by index or by the folder holding it."""

import json
import os

import numpy as np
import pytest

import ztio
import ztio.numpy

CKPT = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "interop", "tensorflow", "ckpt")


def _expected():
    with open(os.path.join(CKPT, "..", "expected.json")) as f:
        return json.load(f)["checkpoints"]


@pytest.mark.parametrize("prefix", ["all", "sharded", "boxes", "partitioned", "v1", "keras", "saved_model"])
def test_every_tensor_reads_as_tensorflow_reads_it(prefix):
    want = _expected()[prefix]
    # A SavedModel opens by its folder: its variables' checkpoint.
    path = os.path.join(CKPT, "..", "saved_model") if prefix == "saved_model" else os.path.join(CKPT, prefix + ".index")
    # A V1 checkpoint is one file.
    if prefix == "v1":
        path = os.path.join(CKPT, "v1.ckpt")
    with ztio.open(path) as f:
        assert sorted(f.keys()) == sorted(list(want["tensors"]) + want["strings"] + want.get("unread", []))
        for name, w in want["tensors"].items():
            # A variable TensorFlow split into slices (rows or boxes of any shape, across data
            # files) reads whole.
            a = f.get_tensor(name)
            assert list(a.shape) == w["shape"], name
            assert np.ascontiguousarray(a).tobytes().hex() == w["hex"], name


def test_a_checkpoint_loads_whole_and_verifies():
    want = _expected()["keras"]["tensors"]
    loaded = ztio.numpy.load_file(os.path.join(CKPT, "keras.index"))
    assert {n: a.tobytes().hex() for n, a in loaded.items()} == {n: w["hex"] for n, w in want.items()}
    assert ztio.verify(os.path.join(CKPT, "all.index")).ok


def test_a_checkpoint_opens_by_its_prefix_as_tensorflow_takes_it():
    want = _expected()["keras"]["tensors"]
    with ztio.open(os.path.join(CKPT, "keras")) as f:
        assert sorted(f.keys()) == sorted(list(want) + ["_CHECKPOINTABLE_OBJECT_GRAPH"])
