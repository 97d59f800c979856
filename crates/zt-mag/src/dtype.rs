//! The dtype code tables: they differ by layout (code 2 is bool in version 1 and bf16 later;
//! FP8 appears at version 200 and shifts every code after it).

use zt_formats::{DType, ElementType, LogicalType};

use crate::layout::Layout;

/// Version 1 and `MAG&`: magnetron 0.1.2's four types.
const GEN_AB: [Code; 4] = [
    Code::D(DType::F32),
    Code::D(DType::F16),
    Code::D(DType::Bool),
    Code::D(DType::I32),
];

/// Version 100 (magnetron 0.1.5, 0.1.6).
const GEN_C: [Code; 12] = [
    Code::D(DType::F32),
    Code::D(DType::F16),
    Code::D(DType::BF16),
    Code::D(DType::Bool),
    Code::D(DType::U8),
    Code::D(DType::I8),
    Code::D(DType::U16),
    Code::D(DType::I16),
    Code::D(DType::U32),
    Code::D(DType::I32),
    Code::D(DType::U64),
    Code::D(DType::I64),
];

/// Version 200 and 300: FP8 inserted at 3.
const GEN_DE: [Code; 13] = [
    Code::D(DType::F32),
    Code::D(DType::F16),
    Code::D(DType::BF16),
    Code::F8E4M3Fn,
    Code::D(DType::Bool),
    Code::D(DType::U8),
    Code::D(DType::I8),
    Code::D(DType::U16),
    Code::D(DType::I16),
    Code::D(DType::U32),
    Code::D(DType::I32),
    Code::D(DType::U64),
    Code::D(DType::I64),
];

/// magnetron's dtype names, by the version 200/300 code (the `dtype` field of version 300).
const NAMES_DE: [&str; 13] = [
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "boolean",
    "uint8",
    "int8",
    "uint16",
    "int16",
    "uint32",
    "int32",
    "uint64",
    "int64",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    D(DType),
    F8E4M3Fn,
}

impl Code {
    fn element(self) -> ElementType {
        match self {
            Code::D(d) => ElementType::plain(d),
            Code::F8E4M3Fn => ElementType {
                dtype: DType::U8,
                logical: Some(LogicalType::F8E4M3Fn),
            },
        }
    }
}

fn table(layout: Layout) -> &'static [Code] {
    match layout {
        Layout::GenA | Layout::V1 => &GEN_AB,
        Layout::V100 => &GEN_C,
        Layout::V200 | Layout::V300 => &GEN_DE,
    }
}

/// The element type of a dtype code in `layout`, if the code exists there.
pub fn element_of(layout: Layout, code: u32) -> Option<ElementType> {
    table(layout).get(code as usize).map(|c| c.element())
}

/// The code of an element type in `layout`, if the layout can hold it.
pub fn code_of(layout: Layout, ty: &ElementType) -> Option<u32> {
    table(layout)
        .iter()
        .position(|c| c.element() == *ty)
        .map(|i| i as u32)
}

/// Number of codes in `layout`.
pub fn code_count(layout: Layout) -> usize {
    table(layout).len()
}

/// magnetron's name of a version 200/300 code.
pub fn name_of_code_de(code: u32) -> &'static str {
    NAMES_DE.get(code as usize).copied().unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_layout_has_its_own_table() {
        // Code 2 is bool in version 1 and bf16 later; code 3 is i32, bool, then FP8.
        assert_eq!(
            element_of(Layout::V1, 2),
            Some(ElementType::plain(DType::Bool))
        );
        assert_eq!(
            element_of(Layout::V100, 2),
            Some(ElementType::plain(DType::BF16))
        );
        assert_eq!(
            element_of(Layout::V1, 3),
            Some(ElementType::plain(DType::I32))
        );
        assert_eq!(
            element_of(Layout::V100, 3),
            Some(ElementType::plain(DType::Bool))
        );
        assert_eq!(element_of(Layout::V200, 3).unwrap().name(), "f8_e4m3fn");
        assert_eq!(
            element_of(Layout::V300, 12),
            Some(ElementType::plain(DType::I64))
        );
        assert_eq!(
            element_of(Layout::V100, 11),
            Some(ElementType::plain(DType::I64))
        );
        assert_eq!(element_of(Layout::V1, 4), None);
        assert_eq!(element_of(Layout::V100, 12), None);
        assert_eq!(element_of(Layout::V300, 13), None);
        for l in [
            Layout::GenA,
            Layout::V1,
            Layout::V100,
            Layout::V200,
            Layout::V300,
        ] {
            for c in 0..code_count(l) as u32 {
                assert_eq!(code_of(l, &element_of(l, c).unwrap()), Some(c));
            }
        }
        assert_eq!(name_of_code_de(4), "boolean");
    }
}
