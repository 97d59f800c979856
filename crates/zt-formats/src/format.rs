//! Object formats: which components each needs and how their sizes must agree.

use std::fmt;

/// An object's layout.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Format {
    /// One `data` component, row-major.
    Dense,
    /// Compressed sparse row: `values`, `indices`, `indptr`.
    SparseCsr,
    /// Coordinate list: `values`, `coords`.
    SparseCoo,
    /// Group-wise quantization: `packed_weight`, `scales`, `zeros`.
    QuantizedGroup,
    /// A format this library does not decode; its components stay readable one by one.
    Unknown(String),
}

impl Format {
    /// Parses a format name.
    pub fn parse(s: &str) -> Self {
        match s {
            "dense" => Format::Dense,
            "sparse_csr" => Format::SparseCsr,
            "sparse_coo" => Format::SparseCoo,
            "quantized_group" => Format::QuantizedGroup,
            other => Format::Unknown(other.to_owned()),
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        match self {
            Format::Dense => "dense",
            Format::SparseCsr => "sparse_csr",
            Format::SparseCoo => "sparse_coo",
            Format::QuantizedGroup => "quantized_group",
            Format::Unknown(s) => s,
        }
    }

    /// The components this format requires.
    pub fn required_components(&self) -> &'static [&'static str] {
        match self {
            Format::Dense => &["data"],
            Format::SparseCsr => &["values", "indices", "indptr"],
            Format::SparseCoo => &["values", "coords"],
            Format::QuantizedGroup => &["packed_weight", "scales", "zeros"],
            Format::Unknown(_) => &[],
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
