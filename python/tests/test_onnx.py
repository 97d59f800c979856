"""ONNX models from Python: every tensor of the onnx-written fixtures reads as onnx wrote it
(fixtures/interop/onnx/expected.json), raw tensors point into the map, external data is
found beside the model, and ztio.convert turns a model into a .zt file that diffs equal."""

import json
import os

import numpy as np
import pytest

import ztio
from ztio._dtypes import PACKED_READ
from conftest import PACKED_TYPES, stored_hex

HERE = os.path.dirname(__file__)
ONNX = os.path.join(HERE, "..", "..", "fixtures", "interop", "onnx")


def _expected():
    with open(os.path.join(ONNX, "expected.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("file", ["dtypes_raw.onnx", "dtypes_typed.onnx", "subgraphs.onnx", "external.onnx"])
def test_every_tensor_reads_as_onnx_wrote_it(file):
    want = _expected()["files"][file]
    with ztio.open(os.path.join(ONNX, file)) as f:
        assert f.version.startswith("ONNX model")
        for name, w in want.items():
            a = f.get_tensor(name)
            assert stored_hex(a, w["type"]) == w["hex"], name
            # Packed sub-byte types with no ml_dtypes type read as their storage bytes.
            if w["type"] not in PACKED_TYPES:
                assert list(a.shape) == w["shape"], name


def test_raw_data_is_a_view_of_the_map():
    # protobuf aligns nothing: bytes are always served in place, wider types when their
    # offset happens to suit them (else copied once, as numpy needs aligned elements).
    with ztio.open(os.path.join(ONNX, "dtypes_raw.onnx")) as f:
        start, length = f._reader().map_range()
        a = f.get_tensor("uint8")
        assert start <= a.__array_interface__["data"][0] < start + length


def test_a_model_converts_and_diffs_equal(tmp_path):
    out = tmp_path / "m.zt"
    ztio.convert(os.path.join(ONNX, "external.onnx"), out, progress=False)
    assert ztio.diff(os.path.join(ONNX, "external.onnx"), out, progress=False)
    with ztio.open(out) as f:
        assert f.attributes["onnx.producer_name"] == "ztensor-fixtures"


def test_sub_byte_types_dequantize_to_their_values():
    # The values tools/interop/make_onnx.py gave onnx; get_tensor gives the packed bytes.
    want = {
        "int2": [[-2, -1, 0], [1, 1, -2]],
        "uint2": [0, 3, 1, 2, 3],
        "int4": [[-8, -1, 0], [1, 6, 7]],
        "float6e2m3": [0.5, -7.5, 1.125, 0.0, 3.0],
        "float6e3m2": [[28.0, -0.0625], [1.5, -3.0]],
    }
    for file in ("dtypes_raw.onnx", "dtypes_typed.onnx"):
        with ztio.open(os.path.join(ONNX, file)) as f:
            for name, values in want.items():
                got = f.dequantize(name)
                assert got.dtype == np.float32, name
                np.testing.assert_array_equal(got, np.array(values, np.float32), err_msg=name)
                # Read as ml_dtypes' own types, where it has them: the same values, unpacked.
                if f.info(name).dtype in PACKED_READ:
                    a = f.get_tensor(name)
                    assert a.dtype == PACKED_READ[f.info(name).dtype][0], name
                    np.testing.assert_array_equal(a.astype(np.float32), np.array(values, np.float32), err_msg=name)
