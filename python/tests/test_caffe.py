"""Caffe models (protobuf over Caffe's schema): every blob reads as protobuf parses it,
shaped as Caffe shapes it (fixtures/interop/caffe/expected.json), as a view of the map."""

import os

import pytest

import ztio
import ztio.numpy
from conftest import assert_as_expected, interop

CAFFE, EXPECTED = interop("caffe")


@pytest.mark.parametrize("file", sorted(EXPECTED["files"]))
def test_every_blob_reads_as_protobuf_parses_it(file):
    want = EXPECTED["files"][file]["blobs"]
    loaded = ztio.numpy.load_file(os.path.join(CAFFE, file))
    assert_as_expected(loaded, want)


def test_layer_types_are_attributes():
    with ztio.open(os.path.join(CAFFE, "lenet.caffemodel")) as f:
        assert f.attributes["caffe.name"] == "LeNet"
        assert f.info("bn1.2").attributes["caffe.type"] == "BatchNorm"
        assert not f.get_tensor("conv1.0").flags.owndata
