"""TensorFlow Lite models (TensorFlow's converter): every constant tensor reads as LiteRT's
interpreter holds it (fixtures/interop/tflite/expected.json), as a view of the map, with its
quantization parameters as attributes."""

import os

import numpy as np
import pytest

import ztio
import ztio.numpy
from conftest import assert_as_expected, interop

TFLITE, EXPECTED = interop("tflite")



@pytest.mark.parametrize("file", sorted(EXPECTED["files"]))
def test_every_constant_reads_as_litert_holds_it(file):
    want = EXPECTED["files"][file]["tensors"]
    path = os.path.join(TFLITE, file)
    loaded = ztio.numpy.load_file(path)
    assert_as_expected(loaded, want)


def test_quantization_parameters_are_attributes():
    want = EXPECTED["files"]["dynamic_int8.tflite"]["tensors"]["tfl.pseudo_qconst"]
    with ztio.open(os.path.join(TFLITE, "dynamic_int8.tflite")) as f:
        assert f.version.startswith("TensorFlow Lite model")
        attributes = f.info("tfl.pseudo_qconst").attributes
        np.testing.assert_array_equal(
            np.float32(attributes["tflite.scale"]), np.float32(want["scale"])
        )
        assert attributes["tflite.zero_point"] == want["zero_point"]
        a = f.get_tensor("tfl.pseudo_qconst")
        assert a.dtype == np.int8 and not a.flags.owndata


def test_packed_constants_dequantize_to_the_values_litert_unpacks():
    # types.tflite: LiteRT 2.x's INT4, INT2 and UINT4 (tools/interop/make_tflite_types.py).
    want = EXPECTED["files"]["types.tflite"]["tensors"]
    packed = {name: w for name, w in want.items() if "values" in w}
    assert len(packed) == 6
    with ztio.open(os.path.join(TFLITE, "types.tflite")) as f:
        for name, w in packed.items():
            got = f.dequantize(name)
            assert list(got.shape) == w["shape"], name
            np.testing.assert_array_equal(got.ravel(), np.array(w["values"], np.float32))
