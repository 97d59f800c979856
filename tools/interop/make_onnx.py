"""Writes the ONNX fixtures with the onnx package and records what onnx says they hold in
fixtures/interop/onnx/expected.json (per file, per tensor: shape, our element type name and
the row-major little-endian bytes in hex; the sub-byte types packed as ONNX's raw_data packs
them: 2-bit four per byte, 4-bit two per byte, 6-bit four in three bytes, lowest bits first). Run in a throwaway environment with onnx installed:

    python -m venv /tmp/onnxv && /tmp/onnxv/bin/pip install onnx numpy ml_dtypes
    /tmp/onnxv/bin/python tools/interop/make_onnx.py fixtures/interop/onnx

- dtypes_raw.onnx: an initializer of every TensorProto type we read, as raw_data (what
  numpy_helper.from_array writes), plus a 0-d, an empty and a string tensor (listed, skipped).
- dtypes_typed.onnx: the same values in the typed fields (float_data, int32_data, int64_data,
  double_data, uint64_data), as onnx.helper.make_tensor(raw=False) writes them.
- subgraphs.onnx: no initializer in the main graph but Constant nodes (value, value_float(s),
  value_int(s)) inside If branches and a Loop body, an initializer inside a subgraph, a sparse
  initializer, and model metadata (producer, doc_string, opset_import, metadata_props).
- external.onnx (+ external.onnx.data): every initializer in an external file
  (save_as_external_data, size_threshold=0), one of them in a subfolder weights/.
"""

import json
import os
import sys

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

OURS = {
    T.FLOAT: "f32", T.UINT8: "u8", T.INT8: "i8", T.UINT16: "u16", T.INT16: "i16", T.INT32: "i32",
    T.INT64: "i64", T.BOOL: "bool", T.FLOAT16: "f16", T.DOUBLE: "f64", T.UINT32: "u32",
    T.UINT64: "u64", T.COMPLEX64: "complex64", T.COMPLEX128: "complex128", T.BFLOAT16: "bf16",
    T.FLOAT8E4M3FN: "f8_e4m3fn", T.FLOAT8E4M3FNUZ: "f8_e4m3fnuz", T.FLOAT8E5M2: "f8_e5m2",
    T.FLOAT8E5M2FNUZ: "f8_e5m2fnuz", T.UINT4: "u4", T.INT4: "i4", T.FLOAT4E2M1: "f4_e2m1",
    T.FLOAT8E8M0: "f8_e8m0", T.UINT2: "u2", T.INT2: "i2", T.FLOAT6E2M3: "f6_e2m3",
    T.FLOAT6E3M2: "f6_e3m2",
}
FOUR_BIT = {T.UINT4, T.INT4, T.FLOAT4E2M1}
# Bits per element of the packed types.
PACKED = {T.UINT2: 2, T.INT2: 2, T.UINT4: 4, T.INT4: 4, T.FLOAT4E2M1: 4, T.FLOAT6E2M3: 6, T.FLOAT6E3M2: 6}


def le_bytes(array: np.ndarray, data_type: int) -> bytes:
    """Row-major little-endian bytes of what onnx reads, packed for the 4-bit types."""
    flat = np.ascontiguousarray(array).reshape(-1)
    if data_type in PACKED:
        bits = PACKED[data_type]
        stream = 0
        for i, code in enumerate(flat.view(np.uint8)):
            stream |= (int(code) & ((1 << bits) - 1)) << (bits * i)
        return stream.to_bytes((bits * len(flat) + 7) // 8, "little")
    if flat.dtype.byteorder == ">":
        flat = flat.byteswap().view(flat.dtype.newbyteorder("<"))
    return flat.tobytes()


def record(table, name, array, data_type):
    table[name] = {"shape": list(np.shape(array)), "type": OURS[data_type], "hex": le_bytes(np.asarray(array), data_type).hex()}


def values():
    """(name, data_type, numpy array in onnx's numpy type for it)."""
    rng = np.random.default_rng(7)
    f = rng.standard_normal((2, 3)).astype(np.float32)
    yield "float", T.FLOAT, f
    yield "double", T.DOUBLE, f.astype(np.float64) * 3
    yield "float16", T.FLOAT16, f.astype(np.float16)
    yield "bfloat16", T.BFLOAT16, f.astype(ml_dtypes.bfloat16)
    yield "uint8", T.UINT8, np.array([[0, 1, 255], [7, 128, 3]], np.uint8)
    yield "int8", T.INT8, np.array([[-128, -1, 0], [1, 5, 127]], np.int8)
    yield "uint16", T.UINT16, np.array([0, 65535, 300], np.uint16)
    yield "int16", T.INT16, np.array([-32768, -2, 32767], np.int16)
    yield "int32", T.INT32, np.array([[-(2**31), -1], [0, 2**31 - 1]], np.int32)
    yield "int64", T.INT64, np.array([-(2**63), -1, 0, 2**63 - 1], np.int64)
    yield "uint32", T.UINT32, np.array([0, 2**32 - 1, 5], np.uint32)
    yield "uint64", T.UINT64, np.array([0, 2**64 - 1, 5], np.uint64)
    yield "bool", T.BOOL, np.array([[True, False, True], [False, False, True]])
    yield "complex64", T.COMPLEX64, (f + 1j * f[::-1]).astype(np.complex64)
    yield "complex128", T.COMPLEX128, (f + 2j).astype(np.complex128)
    yield "f8e4m3fn", T.FLOAT8E4M3FN, f.astype(ml_dtypes.float8_e4m3fn)
    yield "f8e4m3fnuz", T.FLOAT8E4M3FNUZ, f.astype(ml_dtypes.float8_e4m3fnuz)
    yield "f8e5m2", T.FLOAT8E5M2, f.astype(ml_dtypes.float8_e5m2)
    yield "f8e5m2fnuz", T.FLOAT8E5M2FNUZ, f.astype(ml_dtypes.float8_e5m2fnuz)
    yield "f8e8m0", T.FLOAT8E8M0, np.array([0.25, 1.0, 8.0], ml_dtypes.float8_e8m0fnu)
    yield "int4", T.INT4, np.array([[-8, -1, 0], [1, 6, 7]], ml_dtypes.int4)
    yield "uint4", T.UINT4, np.array([0, 15, 3, 9, 1], ml_dtypes.uint4)
    yield "float4e2m1", T.FLOAT4E2M1, np.array([0.5, -6.0, 1.5], ml_dtypes.float4_e2m1fn)
    yield "int2", T.INT2, np.array([[-2, -1, 0], [1, 1, -2]], ml_dtypes.int2)
    yield "uint2", T.UINT2, np.array([0, 3, 1, 2, 3], ml_dtypes.uint2)
    yield "float6e2m3", T.FLOAT6E2M3, np.array([0.5, -7.5, 1.125, 0.0, 3.0], ml_dtypes.float6_e2m3fn)
    yield "float6e3m2", T.FLOAT6E3M2, np.array([[28.0, -0.0625], [1.5, -3.0]], ml_dtypes.float6_e3m2fn)
    yield "scalar", T.FLOAT, np.array(2.5, np.float32)
    yield "empty", T.FLOAT, np.zeros((0, 3), np.float32)


def tensor(name, data_type, array, raw):
    if raw:
        t = numpy_helper.from_array(array, name)
        assert t.data_type == data_type, (name, t.data_type)
        return t
    return helper.make_tensor(name, data_type, array.shape, array.reshape(-1).tolist() if data_type not in PACKED and data_type != T.BFLOAT16 and data_type < 17 else array.reshape(-1), raw=False)


def graph_with(initializers, nodes=(), sparse=(), name="g"):
    x = helper.make_tensor_value_info("x", T.FLOAT, [1])
    y = helper.make_tensor_value_info("y", T.FLOAT, [1])
    nodes = list(nodes) or [helper.make_node("Identity", ["x"], ["y"])]
    return helper.make_graph(nodes, name, [x], [y], initializer=initializers, sparse_initializer=list(sparse))


def model_of(graph, **kw):
    m = helper.make_model(graph, producer_name="ztensor-fixtures", opset_imports=[helper.make_opsetid("", 21)], **kw)
    m.ir_version = 10
    return m


expected = {"files": {}, "sparse": {}, "skipped": {}}

for raw in (True, False):
    file = "dtypes_raw.onnx" if raw else "dtypes_typed.onnx"
    inits, table = [], {}
    for name, dt, array in values():
        t = tensor(name, dt, array, raw)
        back = numpy_helper.to_array(t)
        assert back.shape == array.shape and le_bytes(back, dt) == le_bytes(array, dt), name
        # The packing recorded is onnx's own: raw_data holds exactly these bytes.
        assert not raw or t.raw_data == le_bytes(array, dt), name
        inits.append(t)
        record(table, name, back, dt)
    inits.append(helper.make_tensor("text", T.STRING, [2], [b"ab", b"c"]))
    onnx.save_model(model_of(graph_with(inits)), os.path.join(out, file))
    expected["files"][file] = table
    expected["skipped"][file] = ["text"]

# Constants in subgraphs, an initializer in a subgraph, a sparse initializer, metadata.
sub = {}
then_const = helper.make_node("Constant", [], ["then_w"], value=numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "then_w"))
then_g = helper.make_graph([then_const, helper.make_node("Identity", ["then_w"], ["then_out"])], "then", [], [helper.make_tensor_value_info("then_out", T.FLOAT, [2, 3])])
record(sub, "then_w", np.arange(6, dtype=np.float32).reshape(2, 3), T.FLOAT)
body_init = numpy_helper.from_array(np.array([1, -2, 3], np.int32), "body_bias")
record(sub, "body_bias", np.array([1, -2, 3], np.int32), T.INT32)
body_nodes = [
    helper.make_node("Constant", [], ["body_f"], value_float=0.75),
    helper.make_node("Constant", [], ["body_fs"], value_floats=[1.0, -2.5, 3.25]),
    helper.make_node("Constant", [], ["body_i"], value_int=-42),
    helper.make_node("Constant", [], ["body_is"], value_ints=[5, -6, 2**40]),
    helper.make_node("Identity", ["cond_in"], ["cond_out"]),
]
record(sub, "body_f", np.array(0.75, np.float32), T.FLOAT)
record(sub, "body_fs", np.array([1.0, -2.5, 3.25], np.float32), T.FLOAT)
record(sub, "body_i", np.array(-42, np.int64), T.INT64)
record(sub, "body_is", np.array([5, -6, 2**40], np.int64), T.INT64)
body = helper.make_graph(
    body_nodes, "body",
    [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, [])],
    [helper.make_tensor_value_info("cond_out", T.BOOL, [])],
    initializer=[body_init],
)
loop = helper.make_node("Loop", ["", "cond"], [], body=body, name="loop0")
else_const = helper.make_node("Constant", [], ["else_w"], value=numpy_helper.from_array(np.array([[7, 8, 9], [1, 2, 3]], np.float32), "else_w"))
record(sub, "else_w", np.array([[7, 8, 9], [1, 2, 3]], np.float32), T.FLOAT)
else_g = helper.make_graph([else_const, loop, helper.make_node("Identity", ["else_w"], ["else_out"])], "else", [], [helper.make_tensor_value_info("else_out", T.FLOAT, [2, 3])])
if_node = helper.make_node("If", ["cond"], ["z"], then_branch=then_g, else_branch=else_g, name="if0")
main_const = helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(np.array(True), "cond"))
record(sub, "cond", np.array(True), T.BOOL)
sp_values = numpy_helper.from_array(np.array([1.5, -2.0, 4.0], np.float32), "sp")
sp_indices = numpy_helper.from_array(np.array([[0, 1], [1, 0], [2, 3]], np.int64), "sp_indices")
sparse = helper.make_sparse_tensor(sp_values, sp_indices, [3, 4])
dense = np.zeros((3, 4), np.float32)
dense[0, 1], dense[1, 0], dense[2, 3] = 1.5, -2.0, 4.0
expected["sparse"]["subgraphs.onnx"] = {"sp": {"shape": [3, 4], "type": "f32", "hex": dense.tobytes().hex()}}
g = helper.make_graph([main_const, if_node], "main", [], [helper.make_tensor_value_info("z", T.FLOAT, [2, 3])], sparse_initializer=[sparse])
m = model_of(g, doc_string="a model of subgraphs")
m.producer_version = "1.0"
helper.set_model_props(m, {"author": "ztensor", "license": "MIT"})
onnx.save_model(m, os.path.join(out, "subgraphs.onnx"))
expected["files"]["subgraphs.onnx"] = sub
expected["attributes"] = {"subgraphs.onnx": {"producer_name": "ztensor-fixtures", "producer_version": "1.0", "doc_string": "a model of subgraphs", "ir_version": 10, "metadata_props": {"author": "ztensor", "license": "MIT"}, "opset_import": {"": 21}}}

# External data: one file for most tensors, one tensor in a subfolder.
ext, inits = {}, []
for name, dt, array in values():
    if dt in (T.FLOAT, T.INT64, T.FLOAT16, T.BFLOAT16, T.INT4) and name != "empty":
        t = numpy_helper.from_array(array, name)
        inits.append(t)
        record(ext, name, numpy_helper.to_array(t), dt)
path = os.path.join(out, "external.onnx")
m = model_of(graph_with(inits))
onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="external.onnx.data", size_threshold=0)
m = onnx.load(path, load_external_data=False)
# Move one tensor's bytes to weights/int64.bin, as models with one file per tensor keep them.
for t in m.graph.initializer:
    if t.name == "int64":
        info = {e.key: e.value for e in t.external_data}
        with open(os.path.join(out, "external.onnx.data"), "rb") as f:
            f.seek(int(info.get("offset", 0)))
            data = f.read(int(info["length"]))
        os.makedirs(os.path.join(out, "weights"), exist_ok=True)
        with open(os.path.join(out, "weights", "int64.bin"), "wb") as f:
            f.write(data)
        del t.external_data[:]
        for key, value in (("location", "weights/int64.bin"), ("offset", "0"), ("length", str(len(data)))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
onnx.save_model(m, path)
check = onnx.load(path)
for t in check.graph.initializer:
    assert le_bytes(numpy_helper.to_array(t), t.data_type) == bytes.fromhex(ext[t.name]["hex"]), t.name
expected["files"]["external.onnx"] = ext

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote", sorted(expected["files"]), f"onnx {onnx.__version__}")
