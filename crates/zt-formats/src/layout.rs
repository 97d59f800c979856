//! Size rules that tie an object's shape to its components, checked before any data is read.

use zt_container::{Error, Result};

use crate::{byte_size, element_count, ElementType, Format};

/// What the layout check needs to know of one component.
#[derive(Debug, Clone, Copy)]
pub struct ComponentLayout<'a> {
    /// Role name.
    pub role: &'a str,
    /// Element type.
    pub element: &'a ElementType,
    /// Bytes after decoding, when known without reading data (raw length, or a zstd
    /// component's `uncompressed_length`).
    pub decoded_len: Option<u64>,
}

/// Checks the components an object of `format` and `shape` must have, and the sizes that follow
/// from the shape alone. Rules that need the data (CSR row pointers, COO coordinates) are checked
/// when the object is decoded.
pub fn check_layout(format: &Format, shape: &[u64], comps: &[ComponentLayout<'_>]) -> Result<()> {
    let find = |role: &str| comps.iter().find(|c| c.role == role);
    for role in format.required_components() {
        if find(role).is_none() {
            return Err(Error::invalid(format!(
                "{format} object has no {role:?} component"
            )));
        }
    }
    let count = element_count(shape)?;
    match format {
        Format::Dense => {
            let data = find("data")
                .ok_or_else(|| Error::invalid("dense object has no \"data\" component"))?;
            let expected = byte_size(count, data.element)?;
            if let Some(len) = data.decoded_len {
                if len != expected {
                    return Err(Error::invalid(format!(
                        "{} bytes of data, but shape {shape:?} of {} takes {expected}",
                        len,
                        data.element.name()
                    ))
                    .in_component("data"));
                }
            }
        }
        Format::SparseCsr | Format::SparseCoo | Format::QuantizedGroup | Format::Unknown(_) => {}
    }
    // Every component with a known size must hold whole elements.
    for c in comps {
        if let Some(len) = c.decoded_len {
            let size = c.element.logical_size();
            if len % size != 0 {
                return Err(Error::invalid(format!(
                    "{len} bytes is not a whole number of {}-byte {} elements",
                    size,
                    c.element.name()
                ))
                .in_component(c.role));
            }
        }
    }
    Ok(())
}

/// Bytes a dense object of `shape` and `element` decodes to.
pub fn dense_len(shape: &[u64], element: &ElementType) -> Result<u64> {
    byte_size(element_count(shape)?, element)
}
