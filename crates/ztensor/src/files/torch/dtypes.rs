//! Torch dtypes and storage classes as zTensor element types: a leaf that both the pickle
//! machine (which tells a dtype global from any other) and the checkpoint walk use.

use zt_formats::{DType, ElementType, LogicalType};

/// The zTensor element type of a torch dtype name (`float32`, `bfloat16`, `float8_e4m3fn`,
/// and the aliases `float`, `half`, `long`, ...). `float4_e2m1fn_x2` is `f4_e2m1`, one
/// storage byte holding two of its values: a tensor's shape of ours doubles torch's last
/// dimension ([`packs_two`]).
pub(crate) fn dtype_element(name: &str) -> Option<ElementType> {
    let plain = |d| Some(ElementType::plain(d));
    let logical = |d, t| {
        Some(ElementType {
            dtype: d,
            logical: Some(t),
        })
    };
    match name {
        "float32" | "float" => plain(DType::F32),
        "float64" | "double" => plain(DType::F64),
        "float16" | "half" => plain(DType::F16),
        "bfloat16" => plain(DType::BF16),
        "int64" | "long" => plain(DType::I64),
        "int32" | "int" => plain(DType::I32),
        "int16" | "short" => plain(DType::I16),
        "int8" => plain(DType::I8),
        "uint8" => plain(DType::U8),
        "uint16" => plain(DType::U16),
        "uint32" => plain(DType::U32),
        "uint64" => plain(DType::U64),
        "bool" => plain(DType::Bool),
        "complex64" | "cfloat" => logical(DType::F32, LogicalType::Complex64),
        "complex128" | "cdouble" => logical(DType::F64, LogicalType::Complex128),
        "float8_e4m3fn" => logical(DType::U8, LogicalType::F8E4M3Fn),
        "float8_e5m2" => logical(DType::U8, LogicalType::F8E5M2),
        "float8_e4m3fnuz" => logical(DType::U8, LogicalType::F8E4M3Fnuz),
        "float8_e5m2fnuz" => logical(DType::U8, LogicalType::F8E5M2Fnuz),
        "float8_e8m0fnu" => logical(DType::U8, LogicalType::F8E8M0),
        // Two FP4 values a byte, low nibble first, as ours; torch's shape counts the bytes.
        "float4_e2m1fn_x2" => logical(DType::U8, LogicalType::F4E2M1),
        _ => None,
    }
}

/// Whether a torch element of `dtype` holds two of our values (`float4_e2m1fn_x2`): torch's
/// size and strides count its bytes, our shape counts the values.
pub(crate) fn packs_two(dtype: &str) -> bool {
    dtype == "float4_e2m1fn_x2"
}

/// The dtype of a typed storage class (`FloatStorage` -> `float32`).
pub(crate) fn storage_dtype(class: &str) -> Option<&'static str> {
    Some(match class {
        "FloatStorage" => "float32",
        "DoubleStorage" => "float64",
        "HalfStorage" => "float16",
        "BFloat16Storage" => "bfloat16",
        "LongStorage" => "int64",
        "IntStorage" => "int32",
        "ShortStorage" => "int16",
        "CharStorage" => "int8",
        "ByteStorage" => "uint8",
        "BoolStorage" => "bool",
        "ComplexFloatStorage" => "complex64",
        "ComplexDoubleStorage" => "complex128",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_name_torch_writes_maps() {
        for n in [
            "float32",
            "float64",
            "float16",
            "bfloat16",
            "int64",
            "int32",
            "int16",
            "int8",
            "uint8",
            "uint16",
            "uint32",
            "uint64",
            "bool",
            "complex64",
            "complex128",
            "float8_e4m3fn",
            "float8_e5m2",
            "float8_e4m3fnuz",
            "float8_e5m2fnuz",
            "float8_e8m0fnu",
            "float4_e2m1fn_x2",
        ] {
            assert!(dtype_element(n).is_some(), "{n}");
        }
        assert!(dtype_element("complex32").is_none());
        assert!(dtype_element("qint8").is_none());
    }
}
