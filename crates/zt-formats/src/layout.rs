//! Size rules that tie an object's shape to its components, checked before any data is read.

use zt_container::{Error, Result};

use zt_manifest::Attributes;

use crate::{byte_size, element_count, DType, ElementType, Format, LogicalType, QuantParams};

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
pub fn check_layout(
    format: &Format,
    shape: &[u64],
    attributes: &Attributes,
    comps: &[ComponentLayout<'_>],
) -> Result<()> {
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
                    // A type we do not know is sized as its dtype (v1.2's fallback): say so,
                    // or "of x.future/1 takes 999" reads as a rule of that type.
                    let sized_as = match &data.element.logical {
                        Some(LogicalType::Unknown(_)) => {
                            format!(
                                " (a type unknown here, sized as its dtype {})",
                                data.element.dtype
                            )
                        }
                        _ => String::new(),
                    };
                    return Err(Error::invalid(format!(
                        "{} bytes of data, but shape {shape:?} of {} takes {expected}{sized_as}",
                        len,
                        data.element.name()
                    ))
                    .in_component("data"));
                }
            }
        }
        Format::SparseCsr => check_csr_sizes(shape, &find)?,
        Format::SparseCoo => check_coo_sizes(shape, &find)?,
        Format::QuantizedGroup => check_quantized_sizes(count, attributes, &find)?,
        Format::Unknown(_) => {}
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

type Find<'f, 'a> = dyn Fn(&str) -> Option<&'f ComponentLayout<'a>> + 'f;

/// Elements of a component whose size is known.
fn count_of(c: &ComponentLayout<'_>) -> Option<u64> {
    c.decoded_len.map(|n| n / c.element.logical_size())
}

/// Index components hold plain unsigned integers.
fn check_index(c: &ComponentLayout<'_>) -> Result<()> {
    if c.element.logical.is_some() || !c.element.dtype.is_unsigned() {
        return Err(Error::invalid(format!(
            "index component must hold unsigned integers, not {}",
            c.element.name()
        ))
        .in_component(c.role));
    }
    Ok(())
}

fn check_csr_sizes(shape: &[u64], find: &Find<'_, '_>) -> Result<()> {
    let [rows, _] = shape else {
        return Err(Error::invalid(format!(
            "sparse_csr object must have rank 2, not shape {shape:?}"
        )));
    };
    let (values, indices, indptr) = match (find("values"), find("indices"), find("indptr")) {
        (Some(v), Some(i), Some(p)) => (v, i, p),
        _ => return Err(Error::invalid("sparse_csr object lacks a component")),
    };
    check_index(indices)?;
    check_index(indptr)?;
    if let Some(n) = count_of(indptr) {
        let want = rows
            .checked_add(1)
            .ok_or_else(|| Error::invalid("row count overflows"))?;
        if n != want {
            return Err(Error::invalid(format!(
                "indptr has {n} entries, expected rows + 1 = {want}"
            ))
            .in_component("indptr"));
        }
    }
    if let (Some(v), Some(i)) = (count_of(values), count_of(indices)) {
        if v != i {
            return Err(
                Error::invalid(format!("{i} indices for {v} values")).in_component("indices")
            );
        }
    }
    Ok(())
}

fn check_coo_sizes(shape: &[u64], find: &Find<'_, '_>) -> Result<()> {
    if shape.is_empty() {
        return Err(Error::invalid("sparse_coo object must have rank 1 or more"));
    }
    let (values, coords) = match (find("values"), find("coords")) {
        (Some(v), Some(c)) => (v, c),
        _ => return Err(Error::invalid("sparse_coo object lacks a component")),
    };
    check_index(coords)?;
    if let (Some(v), Some(c)) = (count_of(values), count_of(coords)) {
        let want = v
            .checked_mul(shape.len() as u64)
            .ok_or_else(|| Error::invalid("coordinate count overflows"))?;
        if c != want {
            return Err(Error::invalid(format!(
                "coords has {c} entries, expected ndim x nnz = {} x {v}",
                shape.len()
            ))
            .in_component("coords"));
        }
    }
    Ok(())
}

fn check_quantized_sizes(count: u64, attributes: &Attributes, find: &Find<'_, '_>) -> Result<()> {
    let p = QuantParams::from_attributes(attributes)?;
    let (packed, scales, zeros) = match (find("packed_weight"), find("scales"), find("zeros")) {
        (Some(p), Some(s), Some(z)) => (p, s, z),
        _ => return Err(Error::invalid("quantized_group object lacks a component")),
    };
    let word_ok = match p.word {
        DType::I32 => matches!(packed.element.dtype, DType::I32 | DType::U32),
        _ => packed.element.dtype == DType::U8,
    };
    if !word_ok || packed.element.logical.is_some() {
        return Err(Error::invalid(format!(
            "packing {} needs {} words, not {}",
            p.packing(),
            p.word,
            packed.element.name()
        ))
        .in_component("packed_weight"));
    }
    if let Some(n) = count_of(packed) {
        let want = p.packed_words(count);
        if n != want {
            return Err(Error::invalid(format!(
                "{n} packed words, but {count} elements of {} bits need {want}",
                p.bits
            ))
            .in_component("packed_weight"));
        }
    }
    for c in [scales, zeros] {
        if c.element.logical.is_some()
            || !matches!(c.element.dtype, DType::F16 | DType::BF16 | DType::F32)
        {
            return Err(Error::invalid(format!(
                "{} must be f16, bf16 or f32, not {}",
                c.role,
                c.element.name()
            ))
            .in_component(c.role));
        }
        if let Some(n) = count_of(c) {
            let want = p.groups(count);
            if n != want {
                return Err(Error::invalid(format!(
                    "{n} {}, but {count} elements in groups of {} need {want}",
                    c.role, p.group_size
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
