"""Writes OpenVINO models (IR: `.xml` and `.bin`) with OpenVINO's own `save_model`, and
records what OpenVINO's reader (`Core.read_model`) holds in every constant in
fixtures/interop/openvino/expected.json: per model, per constant (by its layer's name), its
shape, our element type name and its bytes in hex.

- model.xml: a small network whose constants are f32 weights, and constants of f16, bf16,
  i8, u8, i16, i32, i64 and boolean, a scalar and an empty one, saved as they are
  (`compress_to_fp16=False`);
- fp16.xml: the same saved with OpenVINO's default, which stores f32 weights as f16 (each
  followed by a Convert in the graph);
- packed.xml: constants of OpenVINO's packed and 8-bit float types (u2, u4, nf4, i4,
  f4e2m1, f8e4m3, f8e5m2, f8e8m0), stored as OpenVINO packs them; for u2 and u4 the values
  OpenVINO unpacks (`get_vector`) are recorded too, and for nf4 (every one of its sixteen
  codes) the values its CPU plugin converts them to (a Convert to f32, run), so the bit
  order and the NF4 table are checked by OpenVINO itself; and u1, u3, u6, which OpenVINO
  stores in bit planes and we read as u8: their expected bytes are the values `get_vector`
  unpacks, their stored bytes `stored`.

Run in a throwaway environment:

    python3 -m venv /tmp/ovenv && /tmp/ovenv/bin/pip install openvino numpy
    cd tools/interop && /tmp/ovenv/bin/python make_openvino.py ../../fixtures/interop/openvino
"""

import json
import os
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from dtype_names import OURS


def network():
    rng = np.random.default_rng(17)
    x = ops.parameter([2, 8], np.float32, name="x")
    w1 = ops.constant(rng.normal(size=(8, 16)).astype(np.float32), name="dense1.weight")
    b1 = ops.constant(rng.normal(size=(16,)).astype(np.float32), name="dense1.bias")
    y = ops.add(ops.matmul(x, w1, False, False), b1)
    w2 = ops.constant(rng.normal(size=(16, 4)).astype(np.float32), name="dense2.weight")
    y = ops.matmul(ops.relu(y), w2, False, False)
    extra = {
        "half": ops.constant(np.array([0.5, -2, 3], np.float16)),
        "brain": ops.constant(np.array([1.5, -0.25, 8], np.float32), dtype=ov.Type.bf16),
        "ints8": ops.constant(np.array([-3, 4, 127], np.int8)),
        "bytes": ops.constant(np.array([0, 128, 255], np.uint8)),
        "ints16": ops.constant(np.array([-300, 301, 2], np.int16)),
        "ints32": ops.constant(np.array([7, -8, 9], np.int32)),
        "ints64": ops.constant(np.array([1 << 40, -2, 3], np.int64)),
        "flags": ops.constant(np.array([True, False, True])),
        "scalar": ops.constant(np.float32(2.5)),
        "empty": ops.constant(np.zeros((0, 3), np.float32)),
    }
    for name, node in extra.items():
        node.set_friendly_name(name)
        axes = {"scalar": [], "empty": [0, 1]}.get(name, [0])
        axes = ops.constant(np.array(axes, np.int64))
        axes.set_friendly_name(f"{name}.axes")
        y = ops.add(y, ops.reduce_sum(ops.convert(node, "f32"), axes, False))
    return ov.Model([y], [x], "zt-fixture")


# OpenVINO's packed and 8-bit float types, our names for them, and values to store.
PACKED = {
    "u2": ("u2", [0, 1, 2, 3, 3, 2, 1]),
    "u4": ("u4", [1, 2, 15, 0, 7]),
    # Stored in bit planes; read as u8 (the values themselves): odd counts pad a block.
    "u1": ("u8", [1, 0, 1, 1, 0, 0, 1, 0, 1]),
    "u3": ("u8", [0, 1, 2, 3, 4, 5, 6, 7, 5, 3]),
    "u6": ("u8", [0, 1, 63, 32, 17, 42]),
    # Each of the sixteen NF4 values (the constant quantizes to the nearest), codes 0..15.
    "nf4": ("nf4", [-1.0, -0.6961928, -0.5250731, -0.3949175, -0.2844414, -0.1847734,
                    -0.0910500, 0.0, 0.0795803, 0.1609302, 0.2461123, 0.3379152, 0.4407098,
                    0.5626170, 0.7229568, 1.0]),
    "i4": ("i4", [-8, 7, -1, 0, 3]),
    "f4e2m1": ("f4_e2m1", [0.5, -6.0, 1.5]),
    "f8e4m3": ("f8_e4m3fn", [0.5, -448.0, 3.0]),
    "f8e5m2": ("f8_e5m2", [0.25, -3.0]),
    "f8e8m0": ("f8_e8m0", [1.0, 0.25, 1024.0]),
}


def packed_network():
    x = ops.parameter([1], np.float32, name="x")
    y = x
    for kind, (_, values) in PACKED.items():
        node = ops.constant(np.array(values, np.float32), dtype=getattr(ov.Type, kind))
        node.set_friendly_name(kind)
        axes = ops.constant(np.array([0], np.int64))
        axes.set_friendly_name(f"{kind}.axes")
        y = ops.add(y, ops.reduce_sum(ops.convert(node, "f32"), axes, True))
    return ov.Model([y], [x], "zt-packed")


def converted_to_f32(constant):
    """What OpenVINO's CPU plugin makes of `constant` converted to f32 (the model run)."""
    x = ops.parameter([1], np.float32)
    model = ov.Model([ops.add(ops.convert(constant, "f32"), x)], [x])
    out = ov.Core().compile_model(model, "CPU")(np.zeros(1, np.float32))[0]
    return [float(v) for v in np.asarray(out, np.float32).ravel()]


def read_back(xml):
    """What OpenVINO's reader holds in each constant, by its layer's name."""
    model = ov.Core().read_model(xml)
    out = {}
    for op in model.get_ordered_ops():
        if op.get_type_name() != "Constant":
            continue
        kind = op.get_element_type().get_type_name()
        names = {"boolean": "bool", "f16": "float16", "f32": "float32", "f64": "float64",
                 "bf16": "bfloat16", "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32",
                 "i64": "int64"}
        entry = {"shape": list(op.get_output_shape(0))}
        if kind in PACKED:
            # The bytes as OpenVINO holds them, packed.
            entry["type"] = PACKED[kind][0]
            entry["hex"] = op.data.tobytes().hex()
            if kind in ("u2", "u4"):
                entry["values"] = [int(v) for v in op.get_vector()]
            elif kind in ("u1", "u3", "u6"):
                # Read as the bytes of the values OpenVINO unpacks; `stored` as it packs them.
                entry["stored"] = entry["hex"]
                entry["hex"] = bytes(int(v) for v in op.get_vector()).hex()
            elif kind == "nf4":
                entry["values"] = converted_to_f32(op)
        else:
            entry["type"] = OURS[names[kind]]
            entry["hex"] = np.ascontiguousarray(op.get_data()).tobytes().hex()
        out[op.get_friendly_name()] = entry
    return out


def main(out):
    os.makedirs(out, exist_ok=True)
    expected = {"files": {}}
    for name, build, compress in [
        ("model.xml", network, False),
        ("fp16.xml", network, True),
        ("packed.xml", packed_network, False),
    ]:
        path = os.path.join(out, name)
        ov.save_model(build(), path, compress_to_fp16=compress)
        expected["files"][name] = {"constants": read_back(path)}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
