"""OpenVINO models (IR, written by openvino.save_model): every constant reads as OpenVINO's
reader holds it (fixtures/interop/openvino/expected.json), from the .bin beside the .xml."""

import os

import pytest

import ztio.numpy
from conftest import assert_as_expected, interop

OPENVINO, EXPECTED = interop("openvino")


@pytest.mark.parametrize("file", sorted(EXPECTED["files"]))
def test_every_constant_reads_as_openvino_holds_it(file):
    want = EXPECTED["files"][file]["constants"]
    loaded = ztio.numpy.load_file(os.path.join(OPENVINO, file))
    assert_as_expected(loaded, want)
