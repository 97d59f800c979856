"""Our element type names by NumPy's `dtype.name` (ml_dtypes' names too), for the fixture
scripts that record what a reference reader read (make_flax.py, make_pickle.py)."""

OURS = {
    "bool": "bool",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "complex64": "complex64",
    "complex128": "complex128",
    "float8_e4m3fn": "f8_e4m3fn",
    "float8_e5m2": "f8_e5m2",
}
