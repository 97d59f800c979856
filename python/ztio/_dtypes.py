"""numpy dtypes for the library's element types, both ways.

bf16 and the FP8 types read as ``ml_dtypes`` dtypes when ``ml_dtypes`` is importable;
without it they read as their storage integers (bf16 as ``uint16``, FP8 as ``uint8``), with
the same bytes. Packed FP4/FP6 read as their storage bytes.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

try:  # optional: real dtypes for bf16 and FP8
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - depends on the environment
    _ml = None

HAVE_ML_DTYPES = _ml is not None

_PLAIN = {
    "f64": "<f8",
    "f32": "<f4",
    "f16": "<f2",
    "i64": "<i8",
    "i32": "<i4",
    "i16": "<i2",
    "i8": "i1",
    "u64": "<u8",
    "u32": "<u4",
    "u16": "<u2",
    "u8": "u1",
    "bool": "?",
    "complex64": "<c8",
    "complex128": "<c16",
}

# Our logical type name -> ml_dtypes attribute.
_ML = {
    "bf16": "bfloat16",
    "f8_e4m3fn": "float8_e4m3fn",
    "f8_e5m2": "float8_e5m2",
    "f8_e4m3fnuz": "float8_e4m3fnuz",
    "f8_e5m2fnuz": "float8_e5m2fnuz",
    "f8_e8m0": "float8_e8m0fnu",
}


def read_table() -> Dict[str, np.dtype]:
    """The dtype each element type name reads as."""
    table = {name: np.dtype(code) for name, code in _PLAIN.items()}
    table["bf16"] = np.dtype("<u2")  # replaced below when ml_dtypes has it
    if _ml is not None:
        for ours, attr in _ML.items():
            if hasattr(_ml, attr):
                table[ours] = np.dtype(getattr(_ml, attr))
    return table


# numpy dtype -> (storage dtype, logical type), for writing.
_WRITE: Dict[np.dtype, Tuple[str, Optional[str]]] = {
    np.dtype(code): (name, None) for name, code in _PLAIN.items() if not name.startswith("complex")
}
_WRITE[np.dtype("<c8")] = ("f32", "complex64")
_WRITE[np.dtype("<c16")] = ("f64", "complex128")
if _ml is not None:
    for _ours, _attr in _ML.items():
        if hasattr(_ml, _attr):
            _WRITE[np.dtype(getattr(_ml, _attr))] = ("bf16", None) if _ours == "bf16" else ("u8", _ours)


def element_of(dtype: np.dtype) -> Tuple[str, Optional[str]]:
    """The element type an array of ``dtype`` is written as: ``(dtype, logical type)``."""
    key = dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype
    try:
        return _WRITE[key]
    except KeyError:
        from .errors import ArgumentError

        raise ArgumentError(
            f"cannot store numpy dtype {dtype} (numeric, bool, complex, and with ml_dtypes bf16 and FP8)"
        ) from None
