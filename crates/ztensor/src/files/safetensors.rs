//! `.safetensors` files in the facade's object model, read and written with the safetensors
//! crate. `F8_E4M3`, `F8_E5M2`, `F8_E4M3FNUZ`, `F8_E5M2FNUZ` and `C64` map to our logical
//! types; `__metadata__` maps to text file attributes.

use safetensors::tensor::{Dtype, Metadata, TensorInfo};
use zt_container::{Error, Result, Source};
use zt_formats::{DType, ElementType, Encoding, Format, LogicalType};
use zt_manifest::{Attributes, Value};

use crate::listing::Listing;
use crate::model::{
    Components,ByteOrder, ComponentInfo, FileVersion, ObjectInfo};

/// Whether bytes look like a safetensors file: a u64 header size, then a JSON object.
pub(crate) fn looks_like(head: &[u8]) -> bool {
    head.len() >= 9 && head.get(8) == Some(&b'{')
}

fn element_of(d: Dtype) -> Option<ElementType> {
    let plain = |x| Some(ElementType::plain(x));
    let logical = |t| {
        Some(ElementType {
            dtype: DType::U8,
            logical: Some(t),
        })
    };
    match d {
        Dtype::BOOL => plain(DType::Bool),
        Dtype::U8 => plain(DType::U8),
        Dtype::I8 => plain(DType::I8),
        Dtype::I16 => plain(DType::I16),
        Dtype::U16 => plain(DType::U16),
        Dtype::F16 => plain(DType::F16),
        Dtype::BF16 => plain(DType::BF16),
        Dtype::I32 => plain(DType::I32),
        Dtype::U32 => plain(DType::U32),
        Dtype::F32 => plain(DType::F32),
        Dtype::F64 => plain(DType::F64),
        Dtype::I64 => plain(DType::I64),
        Dtype::U64 => plain(DType::U64),
        Dtype::F8_E4M3 => logical(LogicalType::F8E4M3Fn),
        Dtype::F8_E5M2 => logical(LogicalType::F8E5M2),
        Dtype::F8_E4M3FNUZ => logical(LogicalType::F8E4M3Fnuz),
        Dtype::F8_E5M2FNUZ => logical(LogicalType::F8E5M2Fnuz),
        Dtype::C64 => Some(ElementType {
            dtype: DType::F32,
            logical: Some(LogicalType::Complex64),
        }),
        _ => None,
    }
}

/// The safetensors dtype of an element type, if safetensors has one.
pub(crate) fn dtype_of(e: &ElementType) -> Option<Dtype> {
    [
        Dtype::BOOL,
        Dtype::U8,
        Dtype::I8,
        Dtype::I16,
        Dtype::U16,
        Dtype::F16,
        Dtype::BF16,
        Dtype::I32,
        Dtype::U32,
        Dtype::F32,
        Dtype::F64,
        Dtype::I64,
        Dtype::U64,
        Dtype::F8_E4M3,
        Dtype::F8_E5M2,
        Dtype::F8_E4M3FNUZ,
        Dtype::F8_E5M2FNUZ,
        Dtype::C64,
    ]
    .into_iter()
    .find(|d| element_of(*d).as_ref() == Some(e))
}

/// The largest safetensors header accepted, as the safetensors crate caps it.
const MAX_HEADER_LEN: u64 = 100_000_000;

/// Lists a `.safetensors` file. Only the header is read: from a map it is borrowed, from a
/// positional source it is read alone, and tensors are read on demand like every other kind.
pub(crate) fn list(source: &Source) -> Result<Listing> {
    let bad = |what: String| Error::invalid(format!("invalid safetensors file: {what}"));
    let mut size = [0u8; 8];
    source.read_into(0, &mut size)?;
    let n = u64::from_le_bytes(size);
    if n > MAX_HEADER_LEN {
        return Err(Error::limit(format!(
            "safetensors header of {n} bytes exceeds the cap of {MAX_HEADER_LEN}"
        )));
    }
    let base = 8 + n;
    if base > source.len() {
        return Err(bad(format!(
            "header of {n} bytes runs past the end of the {}-byte file",
            source.len()
        ))
        .at(8));
    }
    let header = source.read_at(8, n)?;
    let metadata: Metadata =
        serde_json::from_slice(&header).map_err(|e| bad(format!("header: {e}")).at(8))?;
    let data_len = metadata.data_len() as u64;
    if base.checked_add(data_len) != Some(source.len()) {
        return Err(bad(format!(
            "tensors end at byte {}, but the file has {} bytes",
            base.saturating_add(data_len),
            source.len()
        )));
    }
    let mut objects = Vec::new();
    for (name, info) in metadata.tensors() {
        let TensorInfo {
            dtype,
            shape,
            data_offsets: (start, end),
        } = info;
        let element = element_of(*dtype).ok_or_else(|| {
            Error::unsupported(format!(
                "safetensors dtype {dtype:?} has no zTensor equivalent"
            ))
            .in_object(&name)
        })?;
        let length = (end - start) as u64;
        objects.push(ObjectInfo {
            components: Components::one(ComponentInfo {
                role: "data".into(),
                element,
                offset: base + *start as u64,
                length,
                encoding: Encoding::Raw,
                uncompressed_length: None,
                decoded_len: Some(length),
                digest: None,
                byte_order: ByteOrder::Little,
            }),
            shape: shape.iter().map(|&d| d as u64).collect(),
            format: Format::Dense,
            attributes: Attributes::new(),
            range_digests: Vec::new(),
            legacy_packing: None,
            defect: None,
            name,
        });
    }
    let attributes = metadata
        .metadata()
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), Value::Text(v.clone())))
        .collect();
    // Duplicate names were refused while parsing.
    Ok(Listing::of_unique(
        FileVersion::Safetensors,
        attributes,
        objects,
    ))
}
