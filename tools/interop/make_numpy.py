"""Writes fixtures/interop/numpy/: .npy files of format versions 1.0, 2.0 and 3.0, .npz archives
stored (numpy.savez) and deflated (numpy.savez_compressed) with every numeric dtype, big-endian
and Fortran-order arrays, and arrays we must refuse (structured, object). Also expected.json:
per file and array, the shape, the zTensor type name and the row-major little-endian bytes
(hex) that reading must give. Run once in a throwaway venv (`pip install numpy`); the files
are committed and the tests never need Python.

    python tools/interop/make_numpy.py [out_dir]
"""
import io
import json
import os
import sys

import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else "fixtures/interop/numpy"
os.makedirs(out, exist_ok=True)

ZT_NAMES = {
    "b1": "bool", "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64",
    "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64",
    "f2": "f16", "f4": "f32", "f8": "f64", "c8": "complex64", "c16": "complex128",
}


def zt_type(a):
    return ZT_NAMES[a.dtype.str[1:]]


def le_bytes(a):
    """Row-major, little-endian bytes of the array's values: what a reader must give."""
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes().hex()


arrays = {
    "bool": np.array([[True, False, True], [False, False, True]]),
    "i8": np.array([-128, 0, 127], dtype=np.int8),
    "i16": np.array([-300, 300], dtype=np.int16),
    "i32": np.arange(-3, 3, dtype=np.int32).reshape(2, 3),
    "i64": np.array([-(2**62), 7], dtype=np.int64),
    "u8": np.array([[1, 2], [3, 255]], dtype=np.uint8),
    "u16": np.array([65535, 1], dtype=np.uint16),
    "u32": np.array([4000000000, 5], dtype=np.uint32),
    "u64": np.array([2**64 - 1, 0], dtype=np.uint64),
    "f16": np.array([1.0, -2.0, 0.099975586, np.inf], dtype=np.float16),
    "f32": np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5,
    "f64": np.array([[0.5, -1.25], [3.0, 1e-300]], dtype=np.float64),
    "c64": np.array([1 + 2j, -3.5 - 0.25j, 1j], dtype=np.complex64),
    "c128": np.array([[1e100 + 1j, -1 - 1e-100j]], dtype=np.complex128),
    "scalar": np.array(2.5, dtype=np.float32),
    "empty": np.zeros((0, 3), dtype=np.float32),
    # Fortran order: stored column by column, read as the same array.
    "fortran_f32": np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
    "fortran_i16_3d": np.asfortranarray(np.arange(24, dtype=np.int16).reshape(2, 3, 4)),
    # Big-endian: swapped when read.
    "be_f32": (np.arange(5) * 1.5).astype(">f4"),
    "be_i64": np.array([1, -2, 2**40], dtype=">i8"),
    "be_c128": np.array([1 + 2j, 3 - 4j], dtype=">c16"),
    "be_fortran_u16": np.asfortranarray(np.arange(6, dtype=">u2").reshape(3, 2)),
}
for k, a in arrays.items():
    assert a.dtype.str[1:] in ZT_NAMES, k
assert arrays["fortran_f32"].flags.f_contiguous and not arrays["fortran_f32"].flags.c_contiguous

expected = {}


def expect(file, name, a):
    expected.setdefault(file, {})[name] = {
        "shape": list(a.shape), "type": zt_type(a), "hex": le_bytes(a),
    }


np.savez(os.path.join(out, "all.npz"), **arrays)
np.savez_compressed(os.path.join(out, "all_deflated.npz"), **arrays)
for k, a in arrays.items():
    expect("all.npz", k, a)
    expect("all_deflated.npz", k, a)
np.savez(os.path.join(out, "empty.npz"))
expected["empty.npz"] = {}


def save_version(path, a, version):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, version=version)


singles = {
    "v1_f32.npy": (arrays["f32"], (1, 0)),
    "v2_i64.npy": (arrays["i64"], (2, 0)),
    "v3_c64.npy": (arrays["c64"], (3, 0)),
    "v1_fortran_f64.npy": (np.asfortranarray(np.arange(12.0).reshape(3, 4)), (1, 0)),
    "v1_be_fortran_i32.npy": (np.asfortranarray(np.arange(6, dtype=">i4").reshape(2, 3)), (1, 0)),
    "v1_bool_scalar.npy": (np.array(True), (1, 0)),
}
for file, (a, v) in singles.items():
    save_version(os.path.join(out, file), a, v)
    expect(file, "array", a)

# Refused: a structured array and an object array (a pickle inside).
np.save(os.path.join(out, "refused_structured.npy"),
        np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]))
np.save(os.path.join(out, "refused_object.npy"),
        np.array([{"x": 1}, None], dtype=object), allow_pickle=True)
# An archive with one refused array among readable ones: the rest reads.
np.savez(os.path.join(out, "mixed.npz"), good=np.arange(3, dtype=np.int32),
         structured=np.zeros(1, dtype=[("a", "<i4")]))
expect("mixed.npz", "good", np.arange(3, dtype=np.int32))

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"numpy": np.__version__, "files": expected}, f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote", sorted(os.listdir(out)))
