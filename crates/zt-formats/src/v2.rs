//! zTensor v2 (ztensor 2.x) in this crate's terms: its 12 storage dtypes and registered
//! logical types as [`ElementType`]s, and its layouts as [`Format`]s with v2's size rules.
//!
//! Where a v2 layout means what one of our formats means, it maps onto it and is decoded the
//! same way: `dense`, `zt.sparse_csr/1` (u32 or u64 indices) and `zt.sparse_coo/1`
//! (coordinates as structure of arrays, as v1 stores them). Everything else of the registry
//! (`zt.quant_group/1`, `zt.mx/1`, `gguf.<type>/1`) and every unknown id stays
//! [`Format::Unknown`] with its id: listed, its parts readable one by one, never decoded as
//! a whole. A logical type outside v2's registry is [`LogicalType::Unknown`], as v2 says:
//! readable as its dtype, its size never judged.

use zt_container::{Error, Result};

use crate::{byte_size, element_count, DType, ElementType, Format, LogicalType};

/// The id of v2's CSR layout.
pub const CSR_V2: &str = "zt.sparse_csr/1";
/// The id of v2's COO layout.
pub const COO_V2: &str = "zt.sparse_coo/1";

/// Our logical types that v2's registry lacks, which other formats bring (ONNX's sub-byte
/// integers, safetensors' and ONNX's FP6, OpenVINO's NF4): our v2 writers write them by these
/// names on `u8`, and the original opens them as unknown types.
const UNREGISTERED_TYPES: [&str; 7] = ["i4", "u4", "i2", "u2", "f6_e2m3", "f6_e3m2", "nf4"];

/// The type a dense part of `count` elements has when [`element_v2`] left it unknown but it
/// is one of our types v2's registry lacks, on `u8`, of exactly the bytes `count` of them
/// take: as our writers write it. `None` for every other part, which stays as the original
/// reads it (a type it does not know, its size not judged).
///
/// ```
/// use zt_formats::v2::{element_v2, unregistered_element};
/// let fp6 = element_v2("u8", Some("f6_e2m3")).unwrap();
/// assert_eq!(unregistered_element(&fp6, 4, 3).unwrap().name(), "f6_e2m3");
/// // Four FP6 values take three bytes, not four; on i8 it is no type of ours.
/// assert!(unregistered_element(&fp6, 4, 4).is_none());
/// let on_i8 = element_v2("i8", Some("i4")).unwrap();
/// assert!(unregistered_element(&on_i8, 2, 1).is_none());
/// ```
pub fn unregistered_element(
    element: &ElementType,
    count: u64,
    decoded_len: u64,
) -> Option<ElementType> {
    let Some(LogicalType::Unknown(name)) = &element.logical else {
        return None;
    };
    if element.dtype != DType::U8 || !UNREGISTERED_TYPES.contains(&name.as_str()) {
        return None;
    }
    let known = ElementType::logical(LogicalType::parse(name))?;
    (byte_size(count, &known).ok()? == decoded_len).then_some(known)
}

/// One of v2's 12 storage dtypes (v2 has no `bool` dtype: booleans are `u8` with
/// `type: "bool"`).
pub fn dtype_v2(name: &str) -> Option<DType> {
    DType::from_name(name).filter(|d| *d != DType::Bool)
}

/// The element type of a v2 part: its dtype and, if any, its logical type. An unknown dtype
/// is an error (v2's set is closed); a registered type on the wrong dtype is an error; an
/// unregistered type is kept as [`LogicalType::Unknown`].
pub fn element_v2(dtype: &str, logical: Option<&str>) -> Result<ElementType> {
    let d = dtype_v2(dtype).ok_or_else(|| Error::invalid(format!("unknown dtype {dtype:?}")))?;
    let Some(name) = logical else {
        return Ok(ElementType::plain(d));
    };
    let t = match name {
        "bool" => {
            if d != DType::U8 {
                return Err(Error::invalid(format!(
                    "type bool must be stored as dtype u8, not {d}"
                )));
            }
            return Ok(ElementType::plain(DType::Bool));
        }
        "f8_e4m3fn" | "f8_e5m2" | "f8_e4m3fnuz" | "f8_e5m2fnuz" | "f8_e8m0" | "f4_e2m1"
        | "complex64" | "complex128" => LogicalType::parse(name),
        other => LogicalType::Unknown(other.to_owned()),
    };
    if let Some(req) = t.required_dtype() {
        if req != d {
            return Err(Error::invalid(format!(
                "type {t} must be stored as dtype {req}, not {d}"
            )));
        }
    }
    Ok(ElementType {
        dtype: d,
        logical: Some(t),
    })
}

/// What the layout rules need of one part.
#[derive(Debug, Clone, Copy)]
pub struct PartLayout<'a> {
    /// Part name.
    pub name: &'a str,
    /// Element type.
    pub element: &'a ElementType,
    /// Size after decoding (the blob length when raw, else `decoded_length`).
    pub decoded_len: u64,
}

/// The format a v2 layout id maps onto.
pub fn format_v2(layout: &str) -> Format {
    match layout {
        "dense" => Format::Dense,
        CSR_V2 => Format::SparseCsr,
        COO_V2 => Format::SparseCoo,
        other => Format::Unknown(other.to_owned()),
    }
}

/// Checks an object's shape and parts against its layout's rules, before any data is read,
/// and returns the format it maps onto. The shape's element count must fit 64 bits whatever
/// the layout. Rules that need the data (CSR row pointers, COO coordinates, bool bytes) are
/// checked when the object is read or verified.
pub fn check_layout_v2(layout: &str, shape: &[u64], parts: &[PartLayout<'_>]) -> Result<Format> {
    let count = element_count(shape)?;
    let format = format_v2(layout);
    match format {
        Format::Dense => {
            let [data] = parts else {
                return Err(Error::invalid(format!(
                    "dense object must have exactly one part, named \"data\", not {}",
                    parts.len()
                )));
            };
            if data.name != "data" {
                return Err(Error::invalid(format!(
                    "dense object's part is named {:?}, not \"data\"",
                    data.name
                )));
            }
            sized(data, count, shape)?;
        }
        Format::SparseCsr => check_csr(shape, parts)?,
        Format::SparseCoo => check_coo(shape, parts)?,
        _ => {}
    }
    Ok(format)
}

/// A part whose type is known must hold exactly `count` elements; one of an unknown logical
/// type is not judged (v2: its size rule is unknown).
fn sized(p: &PartLayout<'_>, count: u64, shape: &[u64]) -> Result<()> {
    if matches!(p.element.logical, Some(LogicalType::Unknown(_))) {
        return Ok(());
    }
    let want = byte_size(count, p.element)?;
    if p.decoded_len != want {
        return Err(Error::invalid(format!(
            "{} decoded bytes, but {count} elements of {} (shape {shape:?}) take {want}",
            p.decoded_len,
            p.element.name()
        ))
        .in_component(p.name));
    }
    Ok(())
}

/// The parts `names`, in that order, and no others.
fn exactly<'p, 'a, const N: usize>(
    layout: &str,
    parts: &'p [PartLayout<'a>],
    names: [&str; N],
) -> Result<[&'p PartLayout<'a>; N]> {
    if parts.len() != N || names.iter().any(|n| !parts.iter().any(|p| p.name == *n)) {
        let mut have: Vec<&str> = parts.iter().map(|p| p.name).collect();
        have.sort_unstable();
        return Err(Error::invalid(format!(
            "{layout} object must have exactly the parts {names:?}, not {have:?}"
        )));
    }
    let mut out = [parts.first().ok_or_else(|| Error::invalid("no parts"))?; N];
    for (slot, n) in out.iter_mut().zip(names) {
        if let Some(p) = parts.iter().find(|p| p.name == n) {
            *slot = p;
        }
    }
    Ok(out)
}

/// Index parts hold plain u32 or u64.
fn index_width(p: &PartLayout<'_>) -> Result<u64> {
    match (&p.element.logical, p.element.dtype) {
        (None, DType::U32) => Ok(4),
        (None, DType::U64) => Ok(8),
        _ => Err(Error::invalid(format!(
            "index part must hold plain u32 or u64, not {}",
            p.element.name()
        ))
        .in_component(p.name)),
    }
}

fn check_csr(shape: &[u64], parts: &[PartLayout<'_>]) -> Result<()> {
    let [values, indices, indptr] = exactly(CSR_V2, parts, ["values", "indices", "indptr"])?;
    let [rows, _] = shape else {
        return Err(Error::invalid(format!(
            "{CSR_V2} object must have rank 2, not shape {shape:?}"
        )));
    };
    let w = index_width(indices)?;
    if indptr.element != indices.element {
        return Err(Error::invalid(format!(
            "indptr is {} but indices is {}: they must have the same dtype",
            indptr.element.name(),
            indices.element.name()
        ))
        .in_component("indptr"));
    }
    let want = rows
        .checked_add(1)
        .and_then(|r| r.checked_mul(w))
        .ok_or_else(|| Error::invalid("row count overflows"))?;
    if indptr.decoded_len != want {
        return Err(Error::invalid(format!(
            "indptr has {} bytes, but {rows} rows need (rows + 1) x {w} = {want}",
            indptr.decoded_len
        ))
        .in_component("indptr"));
    }
    if indices.decoded_len % w != 0 {
        return Err(Error::invalid(format!(
            "indices has {} bytes, not a whole number of {w}-byte indices",
            indices.decoded_len
        ))
        .in_component("indices"));
    }
    sized(values, indices.decoded_len / w, shape)
}

fn check_coo(shape: &[u64], parts: &[PartLayout<'_>]) -> Result<()> {
    let [values, coords] = exactly(COO_V2, parts, ["values", "coords"])?;
    if shape.is_empty() {
        return Err(Error::invalid(format!(
            "{COO_V2} object must have rank 1 or more"
        )));
    }
    let w = index_width(coords)?;
    let per = w.saturating_mul(shape.len() as u64);
    if coords.decoded_len % per != 0 {
        return Err(Error::invalid(format!(
            "coords has {} bytes, not a whole number of {}-dimensional {w}-byte coordinates",
            coords.decoded_len,
            shape.len()
        ))
        .in_component("coords"));
    }
    sized(values, coords.decoded_len / per, shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part<'a>(name: &'a str, element: &'a ElementType, len: u64) -> PartLayout<'a> {
        PartLayout {
            name,
            element,
            decoded_len: len,
        }
    }

    #[test]
    fn elements() {
        assert_eq!(
            element_v2("u8", Some("bool")).unwrap(),
            ElementType::plain(DType::Bool)
        );
        assert!(element_v2("bool", None).is_err());
        assert!(element_v2("f4", None).is_err());
        assert!(element_v2("i8", Some("bool")).is_err());
        assert!(element_v2("f32", Some("f8_e4m3fn")).is_err());
        let u = element_v2("f32", Some("x.future/1")).unwrap();
        assert_eq!(u.logical, Some(LogicalType::Unknown("x.future/1".into())));
        // FP6 and the sub-byte integers are not in v2's registry: unknown there (and on any
        // dtype), as the original reads them.
        for name in UNREGISTERED_TYPES {
            let t = element_v2("u16", Some(name)).unwrap();
            assert!(matches!(t.logical, Some(LogicalType::Unknown(_))), "{name}");
            assert!(unregistered_element(&t, 1, 2).is_none());
            let t = element_v2("u8", Some(name)).unwrap();
            let bits = LogicalType::parse(name).packed_bits().unwrap();
            let known = unregistered_element(&t, 8, bits).unwrap();
            assert_eq!(known.name(), name);
            assert!(unregistered_element(&t, 8, bits + 1).is_none());
        }
        assert_eq!(element_v2("u8", Some("f4_e2m1")).unwrap().name(), "f4_e2m1");
    }

    #[test]
    fn dense_rules() {
        let f32t = ElementType::plain(DType::F32);
        assert_eq!(
            check_layout_v2("dense", &[2, 3], &[part("data", &f32t, 24)]).unwrap(),
            Format::Dense
        );
        assert!(check_layout_v2("dense", &[2, 3], &[part("data", &f32t, 20)]).is_err());
        assert!(check_layout_v2("dense", &[2, 3], &[part("x", &f32t, 24)]).is_err());
        let f4 = element_v2("u8", Some("f4_e2m1")).unwrap();
        check_layout_v2("dense", &[5], &[part("data", &f4, 3)]).unwrap();
        let unknown = element_v2("u8", Some("x.future/1")).unwrap();
        check_layout_v2("dense", &[999], &[part("data", &unknown, 8)]).unwrap();
        assert!(check_layout_v2("dense", &[u64::MAX, 2], &[part("data", &f32t, 8)]).is_err());
    }

    #[test]
    fn sparse_rules() {
        let (f, u32t, u64t) = (
            ElementType::plain(DType::F32),
            ElementType::plain(DType::U32),
            ElementType::plain(DType::U64),
        );
        let csr = |v, i, p, it: &ElementType, pt: &ElementType| {
            check_layout_v2(
                CSR_V2,
                &[2, 3],
                &[
                    part("values", &f, v),
                    part("indices", it, i),
                    part("indptr", pt, p),
                ],
            )
        };
        assert_eq!(csr(12, 12, 12, &u32t, &u32t).unwrap(), Format::SparseCsr);
        csr(12, 24, 24, &u64t, &u64t).unwrap();
        assert!(csr(12, 12, 24, &u32t, &u64t).is_err());
        assert!(csr(12, 12, 16, &u32t, &u32t).is_err());
        assert!(csr(16, 12, 12, &u32t, &u32t).is_err());
        let coo = check_layout_v2(
            COO_V2,
            &[4, 4],
            &[part("values", &f, 8), part("coords", &u32t, 16)],
        );
        assert_eq!(coo.unwrap(), Format::SparseCoo);
        assert_eq!(
            check_layout_v2("zt.mx/1", &[4], &[part("anything", &f, 3)]).unwrap(),
            Format::Unknown("zt.mx/1".into())
        );
    }
}
