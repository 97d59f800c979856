#!/usr/bin/env python3
"""Writes the GGUF samples with the `gguf` package (llama.cpp's Python writer) and the golden
dequantized values of its `gguf.quants.dequantize`.

    python3 -m venv /tmp/gguf-venv && /tmp/gguf-venv/bin/pip install gguf==0.19.0 numpy
    /tmp/gguf-venv/bin/python tools/interop/make_gguf.py fixtures/interop/gguf

Writes (all deterministic: a fixed seed):
- dense.gguf: every dense ggml type (F32, F16, BF16, F64, I8, I16, I32, I64) and every
  metadata value type (scalars, arrays of each, an array of strings, arrays of arrays), with
  general.alignment 64;
- quant.gguf: one tensor of every block type in the package's table (Q4_0 ... Q1_0), shape
  [2, 2 x block size] (row-major), blocks of seeded random bytes whose scale fields are
  finite halves (so that dequantized values are finite and compare bit for bit); Q8_1 with
  ggml's 36-byte block, not the package's stale 40;
- big_endian.gguf: dense tensors, a Q8_0 tensor and metadata written with
  endianess=GGUFEndian.BIG;
- golden/<tensor>.f32: for each tensor of quant.gguf that ztensor dequantizes, the
  package's dequantized values as little-endian f32, row-major (Q8_K and Q1_0, which the
  package does not dequantize: ggml's `dequantize_row_q8_K` and `dequantize_row_q1_0`, in
  numpy).

The default tests read these files; they never run Python.
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

out = sys.argv[1]
os.makedirs(os.path.join(out, "golden"), exist_ok=True)
rng = np.random.default_rng(20261123)

# --- dense.gguf -------------------------------------------------------------------------
w = gguf.GGUFWriter(os.path.join(out, "dense.gguf"), arch="test")
w.add_custom_alignment(64)
w.add_key_value("t.u8", 200, V.UINT8)
w.add_key_value("t.i8", -100, V.INT8)
w.add_key_value("t.u16", 60000, V.UINT16)
w.add_key_value("t.i16", -30000, V.INT16)
w.add_key_value("t.u32", 4000000000, V.UINT32)
w.add_key_value("t.i32", -2000000000, V.INT32)
w.add_key_value("t.f32", 0.1, V.FLOAT32)
w.add_key_value("t.bool", True, V.BOOL)
w.add_key_value("t.str", "h\u00e9llo", V.STRING)
w.add_key_value("t.u64", 2**63 + 5, V.UINT64)
w.add_key_value("t.i64", -(2**62), V.INT64)
w.add_key_value("t.f64", 0.1, V.FLOAT64)
w.add_key_value("t.arr_u8", [1, 2, 255], V.ARRAY, sub_type=V.UINT8)
w.add_key_value("t.arr_i8", [-1, 2], V.ARRAY, sub_type=V.INT8)
w.add_key_value("t.arr_u16", [1, 65535], V.ARRAY, sub_type=V.UINT16)
w.add_key_value("t.arr_i16", [-1, 2], V.ARRAY, sub_type=V.INT16)
w.add_key_value("t.arr_u32", [7, 8, 9], V.ARRAY, sub_type=V.UINT32)
w.add_key_value("t.arr_i32", [-7, 8], V.ARRAY, sub_type=V.INT32)
w.add_key_value("t.arr_f32", [0.5, -1.25], V.ARRAY, sub_type=V.FLOAT32)
w.add_key_value("t.arr_bool", [True, False, True], V.ARRAY, sub_type=V.BOOL)
w.add_key_value("t.arr_str", ["a", "", "\u00fc\u00f1\u00ee"], V.ARRAY, sub_type=V.STRING)
w.add_key_value("t.arr_u64", [2**64 - 1], V.ARRAY, sub_type=V.UINT64)
w.add_key_value("t.arr_i64", [-(2**63)], V.ARRAY, sub_type=V.INT64)
w.add_key_value("t.arr_f64", [1e300, -0.0], V.ARRAY, sub_type=V.FLOAT64)
w.add_key_value("t.arr_arr", [[1, 2], [3]], V.ARRAY, sub_type=V.ARRAY)
w.add_tensor("f32", np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5)
w.add_tensor("f16", np.array([0.5, -1.0, 65504.0], dtype=np.float16))
w.add_tensor("f64", np.array([[1.5], [-2.25]], dtype=np.float64))
w.add_tensor("i8", np.array([-128, 0, 127], dtype=np.int8))
w.add_tensor("i16", np.array([-32768, 1], dtype=np.int16))
w.add_tensor("i32", np.array([[[-5, 6]]], dtype=np.int32))
w.add_tensor("i64", np.array([-(2**40), 2**40], dtype=np.int64))
# numpy has no bfloat16: its bits as int16 (1.0, -2.0, 0.5).
w.add_tensor("bf16", np.array([0x3F80, -16384, 0x3F00], dtype=np.int16), raw_dtype=Q.BF16)
w.add_tensor("scalar", np.array(3.0, dtype=np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

# --- quant.gguf -------------------------------------------------------------------------
# Byte offsets of the f16 scale fields of each block, kept finite.
HALF_FIELDS = {
    Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0], Q.Q8_1: [],
    Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
}
DEQUANTIZED = [
    Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K,
    Q.TQ1_0, Q.TQ2_0, Q.MXFP4, Q.NVFP4, Q.IQ4_NL, Q.IQ4_XS, Q.IQ2_XXS, Q.IQ2_XS, Q.IQ2_S,
    Q.IQ3_XXS, Q.IQ3_S, Q.IQ1_S, Q.IQ1_M,
]

# The package's table gives Q8_1 the 40 bytes of an older ggml; ggml's block_q8_1 is now two
# halves and 32 codes. Such blocks are handed over as int8 with their logical shape, which
# the writer takes as it is.
GGML_SIZE = {Q.Q8_1: 36}

w = gguf.GGUFWriter(os.path.join(out, "quant.gguf"), arch="test")
w.add_key_value("general.quantization_version", 2, V.UINT32)
golden = {}
for qtype, (block, size) in gguf.GGML_QUANT_SIZES.items():
    if block == 1:
        continue
    size = GGML_SIZE.get(qtype, size)
    rows, per_row = 2, 2
    data = rng.integers(0, 256, size=(rows, per_row, size), dtype=np.uint8)
    for at in HALF_FIELDS.get(qtype, []):
        halves = rng.uniform(-2.0, 2.0, size=(rows, per_row)).astype(np.float16)
        data[:, :, at:at + 2] = halves.view(np.uint8).reshape(rows, per_row, 2)
    data = data.reshape(rows, per_row * size)
    name = qtype.name.lower()
    if qtype in GGML_SIZE:
        w.add_tensor(name, data.view(np.int8), raw_shape=(rows, per_row * block), raw_dtype=qtype)
    else:
        w.add_tensor(name, data, raw_dtype=qtype)
    if qtype in DEQUANTIZED:
        values = gguf.quants.dequantize(data, qtype)
        assert values.shape == (rows, per_row * block), values.shape
        golden[name] = values.astype("<f4")
    elif qtype == Q.Q8_K:
        # The package has no Q8_K; ggml's dequantize_row_q8_K is y = d * q in f32 (an f32
        # scale, then 256 signed codes; the 16 group sums after them serve dot products).
        blocks = data.reshape(-1, size)
        d = blocks[:, :4].copy().view("<f4")
        q = blocks[:, 4:4 + block].view(np.int8).astype(np.float32)
        golden[name] = (d * q).reshape(rows, per_row * block).astype("<f4")
    elif qtype == Q.Q1_0:
        # Nor Q1_0; ggml's dequantize_row_q1_0: an f16 scale d, then one bit a value, the
        # lowest first: d where it is set, -d (a negation) where not.
        blocks = data.reshape(-1, size)
        d = blocks[:, :2].copy().view("<f2").astype(np.float32)
        bits = np.unpackbits(blocks[:, 2:], axis=1, bitorder="little").astype(bool)
        values = np.where(bits, d, -d)
        golden[name] = values.reshape(rows, per_row * block).astype("<f4")
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
for name, values in golden.items():
    values.tofile(os.path.join(out, "golden", name + ".f32"))

# --- big_endian.gguf --------------------------------------------------------------------
w = gguf.GGUFWriter(os.path.join(out, "big_endian.gguf"), arch="test",
                    endianess=gguf.GGUFEndian.BIG)
w.add_key_value("t.u32", 0x01020304, V.UINT32)
w.add_key_value("t.f64", -0.5, V.FLOAT64)
w.add_key_value("t.arr_i16", [-2, 3], V.ARRAY, sub_type=V.INT16)
w.add_key_value("t.str", "big", V.STRING)
w.add_tensor("f32", np.array([[1.0, -2.0], [3.5, 1e-3]], dtype=np.float32))
w.add_tensor("f16", np.array([0.5, -1.0], dtype=np.float16))
w.add_tensor("i64", np.array([1, -(2**40)], dtype=np.int64))
w.add_tensor("bf16", np.array([0x3F80, -16384], dtype=np.int16), raw_dtype=Q.BF16)
q8 = rng.integers(0, 256, size=(1, 34), dtype=np.uint8)
q8[0, 0:2] = np.array([0.25], dtype="<f2").view(np.uint8)
w.add_tensor("q8_0", q8, raw_dtype=Q.Q8_0)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

# What the package's own reader sees, for the tests' expectations.
for f in ["dense.gguf", "quant.gguf", "big_endian.gguf"]:
    r = gguf.GGUFReader(os.path.join(out, f))
    print(f, os.path.getsize(os.path.join(out, f)), "bytes,", len(r.fields), "fields,",
          len(r.tensors), "tensors")
    for t in r.tensors[:12]:
        print("  ", t.name, t.tensor_type.name, list(t.shape), t.n_bytes, "@", t.data_offset)
