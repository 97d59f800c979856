"""Writes fixtures/interop/tflite/types.tflite, a model whose constants are of LiteRT 2.x's
newer tensor types (INT4, INT2, UINT4, FLOAT8_E4M3FN, FLOAT8_E5M2), and adds to
fixtures/interop/tflite/expected.json what LiteRT's own interpreter reads from each: the
stored bytes in hex (packed types as stored, two or four elements a byte), and for the
packed types the values the interpreter unpacks them to (`values`).

TensorFlow's converter writes none of these types from a tf.function, so the model is built
with the FlatBuffer schema LiteRT ships (`ai_edge_litert.schema_py_generated`), as its own
tools build models; the interpreter is the reference for how the bytes read.

Run in a throwaway environment (no TensorFlow needed):

    python3 -m venv /tmp/lrtenv && /tmp/lrtenv/bin/pip install "ai-edge-litert==2.3.*" flatbuffers numpy
    cd tools/interop && /tmp/lrtenv/bin/python make_tflite_types.py ../../fixtures/interop/tflite
"""

import json
import os
import sys

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

T = schema.TensorType

# (name, TFLite type, our type name, shape, stored bytes). Odd counts leave the last byte's
# high bits unused, as LiteRT's packer leaves them.
CONSTANTS = [
    ("int4", T.INT4, "i4", [2, 3], bytes([0x21, 0x8F, 0x07])),
    ("int4_odd", T.INT4, "i4", [5], bytes([0x9A, 0x7F, 0x03])),
    ("int2", T.INT2, "i2", [6], bytes([0b11100100, 0b0110])),
    ("int2_rows", T.INT2, "i2", [2, 4], bytes([0b00011011, 0b10101010])),
    ("uint4", T.UINT4, "u4", [3], bytes([0x21, 0x0F])),
    ("uint4_rows", T.UINT4, "u4", [2, 2], bytes([0xF0, 0x5A])),
    ("fp8_e4m3fn", T.FLOAT8_E4M3FN, "f8_e4m3fn", [4], bytes([0x38, 0xB8, 0x7E, 0x01])),
    ("fp8_e5m2", T.FLOAT8_E5M2, "f8_e5m2", [3], bytes([0x3C, 0xBC, 0x7B])),
]
PACKED = {"i4", "i2", "u4"}


def model():
    """A model of one subgraph: an input passed through (no operators) and the constants."""
    m = schema.ModelT()
    m.version = 3
    m.description = "constants of LiteRT's newer tensor types"
    m.buffers = [schema.BufferT()]
    m.operatorCodes = []
    g = schema.SubGraphT()
    g.name = "main"
    x = schema.TensorT()
    x.shape, x.type, x.buffer, x.name = [1], T.FLOAT32, 0, "x"
    g.tensors, g.inputs, g.outputs, g.operators = [x], [0], [0], []
    for name, ttype, _, shape, data in CONSTANTS:
        b = schema.BufferT()
        b.data = list(data)
        m.buffers.append(b)
        t = schema.TensorT()
        t.shape, t.type, t.buffer, t.name = shape, ttype, len(m.buffers) - 1, name
        g.tensors.append(t)
    m.subgraphs = [g]
    builder = flatbuffers.Builder(0)
    builder.Finish(m.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def read_back(content):
    """What the interpreter reads from each constant, checked against what was stored."""
    interpreter = Interpreter(model_content=content)
    tensors = {}
    for index, (name, _, ours, shape, data) in enumerate(CONSTANTS, start=1):
        value = np.array(interpreter.get_tensor(index))
        assert list(value.shape) == shape, (name, value.shape)
        entry = {"shape": shape, "type": ours, "hex": data.hex()}
        if ours in PACKED:
            # The interpreter unpacks them (lowest bits first), sign-extending INT4 and INT2.
            entry["values"] = [int(v) for v in value.ravel()]
        else:
            # FP8: their bytes, as stored.
            assert value.tobytes() == data, name
        tensors[name] = entry
    return tensors


def main(out):
    content = model()
    path = os.path.join(out, "types.tflite")
    with open(path, "wb") as f:
        f.write(content)
    expected_path = os.path.join(out, "expected.json")
    with open(expected_path) as f:
        expected = json.load(f)
    expected["files"]["types.tflite"] = {"tensors": read_back(content)}
    with open(expected_path, "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
