"""numpy dtypes for the library's element types, both ways.

bf16 and the FP8 types read as ``ml_dtypes`` dtypes when ``ml_dtypes`` is importable;
without it they read as their storage integers (bf16 as ``uint16``, FP8 as ``uint8``), with
the same bytes. Packed 4-, 2- and 6-bit types (int4, FP4, FP6, ...) read unpacked as
ml_dtypes' own (``int4``, ``float4_e2m1fn``) when it has them, else as their storage bytes.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

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


# Our packed sub-byte types -> (ml_dtypes' type, bits an element). The file packs the
# elements lowest bits first (two 4-bit codes a byte, four 2-bit, four 6-bit in three bytes);
# ml_dtypes holds one a byte, the code in its low bits. Reads unpack them (a copy: the
# encoding demands one) and writes pack them. NF4 has no ml_dtypes type: its bytes.
_PACKED = {
    "i4": ("int4", 4),
    "u4": ("uint4", 4),
    "i2": ("int2", 2),
    "u2": ("uint2", 2),
    "f4_e2m1": ("float4_e2m1fn", 4),
    "f6_e2m3": ("float6_e2m3fn", 6),
    "f6_e3m2": ("float6_e3m2fn", 6),
}

#: Every packed sub-byte type, by our name (NF4 among them: no ml_dtypes type).
PACKED_DTYPES = frozenset([*_PACKED, "nf4"])

#: The packed types this ml_dtypes has: our name -> (its dtype, bits an element).
PACKED_READ: Dict[str, Tuple[np.dtype, int]] = {
    ours: (np.dtype(getattr(_ml, attr)), bits)
    for ours, (attr, bits) in _PACKED.items()
    if _ml is not None and hasattr(_ml, attr)
}
_PACKED_WRITE: Dict[np.dtype, Tuple[str, int]] = {
    dtype: (ours, bits) for ours, (dtype, bits) in PACKED_READ.items()
}


def unpacked(storage: np.ndarray, type_name: str, shape: Tuple[int, ...]) -> np.ndarray:
    """A packed object's storage bytes as its ml_dtypes elements in ``shape`` (see
    ``_PACKED``); the bytes were checked to hold them when the file was listed."""
    dtype, bits = PACKED_READ[type_name]
    count = 1
    for d in shape:
        count *= int(d)
    packed = storage.reshape(-1).view(np.uint8)
    if bits == 6:
        # Four codes in every three bytes: shifts and masks, no array of bits (8x the bytes).
        whole = np.zeros(-(-packed.size // 3) * 3, np.uint8)
        whole[: packed.size] = packed
        b0, b1, b2 = (whole[k::3] for k in range(3))
        codes = np.empty((b0.size, 4), np.uint8)
        np.bitwise_and(b0, 0x3F, out=codes[:, 0])
        codes[:, 1] = (b0 >> 6) | ((b1 & 0x0F) << 2)
        codes[:, 2] = (b1 >> 4) | ((b2 & 0x03) << 4)
        codes[:, 3] = b2 >> 2
        codes = codes.reshape(-1)[:count]
    else:
        per_byte = 8 // bits
        mask = (1 << bits) - 1
        codes = np.empty((packed.size, per_byte), np.uint8)
        for j in range(per_byte):
            np.bitwise_and(packed >> (bits * j), mask, out=codes[:, j])
        codes = codes.reshape(-1)[:count]
    return codes.view(dtype).reshape(shape)


def packed_element(dtype: np.dtype) -> Optional[Tuple[str, int]]:
    """``(our type, bits)`` when arrays of ``dtype`` are stored packed (ml_dtypes' int4,
    float4_e2m1fn, ...), else ``None``."""
    return _PACKED_WRITE.get(dtype)


def packed(array: np.ndarray, bits: int) -> np.ndarray:
    """The elements of a C-contiguous ml_dtypes sub-byte array packed lowest bits first, as
    the file stores them (the last byte's unused bits zero)."""
    codes = array.reshape(-1).view(np.uint8) & np.uint8((1 << bits) - 1)
    if bits == 6:
        # Four codes into three bytes; the last group's bytes past the codes are dropped.
        whole = np.zeros(-(-codes.size // 4) * 4, np.uint8)
        whole[: codes.size] = codes
        c0, c1, c2, c3 = (whole[k::4] for k in range(4))
        out = np.empty((c0.size, 3), np.uint8)
        out[:, 0] = c0 | (c1 << 6)
        out[:, 1] = (c1 >> 2) | (c2 << 4)
        out[:, 2] = (c2 >> 4) | (c3 << 2)
        return out.reshape(-1)[: -(-codes.size * 6 // 8)]
    per_byte = 8 // bits
    whole = np.zeros(-(-codes.size // per_byte) * per_byte, np.uint8)
    whole[: codes.size] = codes
    lanes = whole.reshape(-1, per_byte)
    out = lanes[:, 0].copy()
    for j in range(1, per_byte):
        out |= lanes[:, j] << np.uint8(bits * j)
    return out


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


#: What the writers take, for the refusal of anything else: named, as an ml_dtypes dtype
#: that is not here (``int4``, ``float8_e4m3``, ``float6_e2m3fn``) looks like one that is.
_STORABLE = "ztio stores bool, integer, float16/32/64 and complex64/128 dtypes" + (
    ", and of ml_dtypes' "
    + ", ".join([a for a in _ML.values() if hasattr(_ml, a)] + [a for a, _ in _PACKED.values() if hasattr(_ml, a)])
    + " only"
    if _ml is not None
    else "; install ml_dtypes for bfloat16 and FP8"
)


def element_of(dtype: np.dtype) -> Tuple[str, Optional[str]]:
    """The element type an array of ``dtype`` is written as: ``(dtype, logical type)``."""
    key = dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype
    sub_byte = _PACKED_WRITE.get(key)
    if sub_byte is not None:
        return "u8", sub_byte[0]
    try:
        return _WRITE[key]
    except KeyError:
        from .errors import ArgumentError

        raise ArgumentError(f"cannot store numpy dtype {dtype} ({_STORABLE})") from None


#: Without ml_dtypes (or with one too old for a type), the types that read as their storage
#: integers: our name -> ml_dtypes' name, which the frameworks use too (``"bfloat16"``).
STAND_INS: Dict[str, str] = {
    ours: attr for ours, attr in _ML.items() if _ml is None or not hasattr(_ml, attr)
}


class StandIn(NamedTuple):
    """A bf16 or FP8 tensor's storage integers, with the type they stand in for (our name:
    ``"bf16"``, ``"f8_e4m3fn"``): what a framework module hands the writers when numpy has
    no such dtype (ml_dtypes not installed), so that the file says bf16, not uint16."""

    array: np.ndarray
    type_name: str

    @property
    def nbytes(self) -> int:
        """The bytes the tensor holds (for progress)."""
        return int(self.array.nbytes)


def stand_in_element(value: StandIn) -> Tuple[str, Optional[str]]:
    """The element type a :class:`StandIn` is written as: ``(dtype, logical type)``."""
    if value.type_name == "bf16":
        return "bf16", None
    if value.type_name in _ML and value.type_name.startswith("f8_"):
        return "u8", value.type_name
    from .errors import ArgumentError

    raise ArgumentError(f"cannot store {value.type_name!r} from its storage integers")


def stand_in(type_name: str, bits: np.ndarray) -> "np.ndarray | StandIn":
    """A framework's bf16 or FP8 tensor, given as its storage integers ``bits``, in the form
    the writers take: an ml_dtypes array when ml_dtypes has the type, else a :class:`StandIn`."""
    attr = _ML[type_name]
    if type_name in STAND_INS:
        return StandIn(bits, type_name)
    return bits.view(getattr(_ml, attr))


#: ml_dtypes' name -> ours (``"bfloat16"`` -> ``"bf16"``).
OURS_OF_ML: Dict[str, str] = {attr: ours for ours, attr in _ML.items()}
