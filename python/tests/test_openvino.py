"""OpenVINO models (IR, written by openvino.save_model): every constant reads as OpenVINO's
reader holds it (fixtures/interop/openvino/expected.json), from the .bin beside the .xml;
packed types as their bytes, and dequantized as the values OpenVINO unpacks."""

import os

import numpy as np
import pytest

import ztio
import ztio.numpy
from conftest import assert_as_expected, interop

OPENVINO, EXPECTED = interop("openvino")


@pytest.mark.parametrize("file", sorted(EXPECTED["files"]))
def test_every_constant_reads_as_openvino_holds_it(file):
    want = EXPECTED["files"][file]["constants"]
    loaded = ztio.numpy.load_file(os.path.join(OPENVINO, file))
    assert_as_expected(loaded, want)


def test_packed_constants_dequantize_to_the_values_openvino_unpacks():
    want = EXPECTED["files"]["packed.xml"]["constants"]
    with ztio.open(os.path.join(OPENVINO, "packed.xml")) as f:
        for kind in ("u2", "u4", "nf4"):
            got = f.dequantize(kind)
            np.testing.assert_array_equal(got, np.array(want[kind]["values"], np.float32))
