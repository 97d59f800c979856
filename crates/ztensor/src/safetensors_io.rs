//! `.safetensors` files in the facade's object model, read and written with the safetensors
//! crate. `F8_E4M3`, `F8_E5M2`, `F8_E4M3FNUZ`, `F8_E5M2FNUZ` and `C64` map to our logical
//! types; `__metadata__` maps to text file attributes.

use smallvec::smallvec;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorInfo, View};
use safetensors::SafeTensors;
use zt_container::{AtomicFile, Error, Result, Source};
use zt_formats::{DType, ElementType, Encoding, Format, LogicalType};
use zt_manifest::{Attributes, Value};

use crate::model::{ByteOrder, ComponentInfo, FileVersion, ObjectInfo};
use crate::reader::{sort_by_name, Limits, Parsed, Reader};

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

fn dtype_of(e: &ElementType) -> Option<Dtype> {
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

pub(crate) fn open(source: Source, limits: &Limits) -> Result<Reader> {
    // The safetensors crate validates against the whole buffer; positional sources read it.
    let source = match source {
        Source::File { .. } => {
            let n =
                usize::try_from(source.len()).map_err(|_| Error::limit("file exceeds usize"))?;
            let mut v = vec![0u8; n];
            source.read_into(0, &mut v)?;
            Source::from_vec(v)
        }
        s => s,
    };
    let bytes = source.as_slice().unwrap_or(&[]);
    let (n, metadata) = SafeTensors::read_metadata(bytes)
        .map_err(|e| Error::invalid(format!("invalid safetensors file: {e}")))?;
    let base = 8 + n as u64;
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
            components: smallvec![ComponentInfo {
                role: "data".into(),
                element,
                offset: base + *start as u64,
                length,
                encoding: Encoding::Raw,
                uncompressed_length: None,
                decoded_len: Some(length),
                digest: None,
                byte_order: ByteOrder::Little,
            }],
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
    sort_by_name(&mut objects);
    let parsed = Parsed {
        version: FileVersion::Safetensors,
        attributes,
        objects,
        index: None,
    };
    Ok(Reader::new(source, parsed, *limits))
}

struct Tensor<'a> {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Cow<'a, [u8]>,
}

impl View for &Tensor<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// Writes every object of `reader` as a `.safetensors` file at `output`, crash-safely. File
/// attributes become `__metadata__` and must be text. Sparse and quantized objects need
/// `densify`; types safetensors lacks are an error naming the object.
pub fn write_safetensors(reader: &Reader, output: impl AsRef<Path>, densify: bool) -> Result<()> {
    let output = output.as_ref();
    let mut meta = HashMap::new();
    for (k, v) in reader.attributes() {
        match v {
            Value::Text(s) => meta.insert(k.clone(), s.clone()),
            other => {
                return Err(Error::argument(format!(
                    "attribute {k:?} is {}; safetensors metadata holds text only",
                    other.kind_name()
                )))
            }
        };
    }
    let mut tensors = Vec::with_capacity(reader.objects().len());
    for obj in reader.objects() {
        let at = |e: Error| e.in_object(&obj.name);
        let (data, element) = match obj.format {
            Format::Dense => reader.dense_form(&obj.name)?,
            Format::SparseCsr | Format::SparseCoo | Format::QuantizedGroup if densify => {
                reader.dense_form(&obj.name)?
            }
            ref f => {
                return Err(at(Error::argument(format!(
                    "a {f} object cannot be stored in .safetensors as it is (use densify)"
                ))))
            }
        };
        let dtype = dtype_of(&element).ok_or_else(|| {
            at(Error::argument(format!(
                "safetensors has no {} type",
                element.name()
            )))
        })?;
        let shape = obj
            .shape
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| at(Error::limit("dimension exceeds usize"))))
            .collect::<Result<_>>()?;
        tensors.push((obj.name.clone(), Tensor { dtype, shape, data }));
    }
    let file = AtomicFile::create(output)?;
    let views = tensors.iter().map(|(n, t)| (n.as_str(), t));
    safetensors::serialize_to_file(
        views,
        if meta.is_empty() { None } else { Some(meta) },
        file.temp_path(),
    )
    .map_err(|e| {
        Error::io(
            std::io::Error::other(e.to_string()),
            "cannot write safetensors",
        )
        .in_file(output)
    })?;
    file.commit()
}
