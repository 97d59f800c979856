"""PyTorch distributed checkpoints (a folder of .metadata and *.distcp files, as
torch.distributed.checkpoint.save wrote them, fixtures/interop/torch_dcp): every tensor reads
as torch was given it, by the folder or its .metadata, chunks of sharded tensors assembled,
chunks compressed by DCP's zstd transform decoded; a tensor in one chunk is a numpy array over
the map."""

import json
import os

import numpy as np
import pytest

import ztio
import ztio.numpy

DCP = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "interop", "torch_dcp")
BF16 = np.dtype("V2")


def _expected(sub):
    with open(os.path.join(DCP, "expected.json")) as f:
        return json.load(f)["files"][sub + "/.metadata"]["tensors"]


@pytest.mark.parametrize("sub", ["single", "two_ranks", "byte_tensors", "zstd", "zstd_two_ranks"])
@pytest.mark.parametrize("by_folder", [False, True])
def test_every_tensor_reads_as_torch_saved_it(sub, by_folder):
    want = _expected(sub)
    path = os.path.join(DCP, sub) if by_folder else os.path.join(DCP, sub, ".metadata")
    with ztio.open(path) as f:
        assert sorted(f.keys()) == sorted(want)
        for name, w in want.items():
            a = f.get_tensor(name)
            assert list(a.shape) == w["shape"], name
            assert np.ascontiguousarray(a).tobytes().hex() == w["hex"], name
    assert ztio.verify(path).ok


def test_a_value_that_is_not_a_tensor_is_an_attribute():
    with ztio.open(os.path.join(DCP, "single")) as f:
        assert f.attributes["step"] == 7
        assert f.attributes["torch.dcp.bytes"] == ["step"]


def test_tensors_inside_a_value_are_tensors_beside_its_other_items():
    # DCP pickles a tuple whole: ("cfg", tensor, 3) under "mixed".
    with ztio.open(os.path.join(DCP, "byte_tensors")) as f:
        assert f.get_tensor("mixed.1").shape == (2,)
        assert f.attributes["mixed.0"] == "cfg"
        assert f.attributes["mixed.2"] == 3


def test_a_compressed_checkpoint_loads_into_writable_arrays():
    loaded = ztio.numpy.load_file(os.path.join(DCP, "zstd"))
    assert sorted(loaded) == sorted(_expected("zstd"))
    pair = loaded["pair.1"]
    assert pair.tolist() == [7, -8, 9] and pair.flags.writeable
    pair *= 2
    with ztio.open(os.path.join(DCP, "zstd")) as f:
        assert f.attributes["torch.dcp.bytes"] == ["step", "pair"]
        assert f.get_tensor("pair.1").tolist() == [7, -8, 9]


def test_a_whole_tensor_is_read_in_place():
    loaded = ztio.numpy.load_file(os.path.join(DCP, "single"))
    weight = loaded["embed.weight"]
    assert weight.tolist() == (np.arange(12, dtype=np.float32).reshape(3, 4) / 4).tolist()
    # Zero copy: the array does not own its bytes (they are the data file's map).
    assert not weight.flags.owndata


def test_a_checkpoint_saved_as_safetensors_is_refused_as_torch_refuses_it():
    # dcp.load fails on it too (tools/interop/make_torch_dcp.py checks that it does).
    with pytest.raises(ztio.UnsupportedError, match="serialization_format=SAFETENSORS"):
        ztio.open(os.path.join(DCP, "safetensors_format"))


def test_a_data_file_opened_by_itself_names_the_checkpoint_to_open():
    path = os.path.join(DCP, "two_ranks", "__1_0.distcp")
    with pytest.raises(ztio.UnsupportedError, match="open the checkpoint's folder or its"):
        ztio.open(path)
    with pytest.raises(ztio.UnsupportedError, match="a data file of a PyTorch distributed"):
        ztio.numpy.load_file(path)
