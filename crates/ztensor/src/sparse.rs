//! Sparse and quantized objects through the facade: typed reads, dense conversion, writing.

use std::borrow::Cow;

use bytemuck::Pod;
use zt_container::{Error, Result};
use zt_formats::{
    check_coo, check_csr, coo_to_dense, csr_to_dense, fp8::Fp8Format, Accumulate, DType, Element,
    ElementType, Format, LogicalType, QuantParams,
};

use crate::model::{ByteOrder, ComponentInfo, LegacyLayout, LegacyPacking, ObjectInfo};
use crate::reader::{ReadOptions, Reader};
use crate::writer::{le_bytes, ComponentData, ObjectData, Sink, WriteOptions, Writer};

/// A CSR matrix: row `r` holds `values[indptr[r]..indptr[r+1]]` at columns
/// `indices[indptr[r]..indptr[r+1]]`. Checked: indptr starts at 0, never decreases, ends at nnz;
/// every index is below the column count.
#[derive(Debug, Clone, PartialEq)]
pub struct Csr<'a, V: Clone> {
    /// `[rows, cols]`.
    pub shape: [u64; 2],
    /// Non-zero values.
    pub values: Cow<'a, [V]>,
    /// Column of each value (widened to u64 when stored narrower).
    pub indices: Cow<'a, [u64]>,
    /// Row pointers, rows + 1 entries.
    pub indptr: Cow<'a, [u64]>,
}

/// A COO tensor: value `i` sits at `(coords[i], coords[nnz + i], ...)`. Checked: every
/// coordinate lies inside the shape. Duplicates and any order are allowed.
#[derive(Debug, Clone, PartialEq)]
pub struct Coo<'a, V: Clone> {
    /// Logical shape.
    pub shape: Vec<u64>,
    /// Values.
    pub values: Cow<'a, [V]>,
    /// `ndim x nnz` coordinates, structure of arrays.
    pub coords: Cow<'a, [u64]>,
}

/// A `quantized_group` object's parts, scales and zeros widened to `f32`.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantized<'a> {
    /// Logical shape.
    pub shape: Vec<u64>,
    /// Packing parameters.
    pub params: QuantParams,
    /// Packed words as little-endian bytes.
    pub packed: Cow<'a, [u8]>,
    /// One scale per group.
    pub scales: Vec<f32>,
    /// One zero point per group.
    pub zeros: Vec<f32>,
}

impl Quantized<'_> {
    /// `(code - zero) * scale` for every element, row-major.
    pub fn dequantize(&self) -> Result<Vec<f32>> {
        let count = zt_formats::element_count(&self.shape)?;
        self.params
            .dequantize(&self.packed, &self.scales, &self.zeros, count)
    }
}

/// A sparse object before typing: little-endian value bytes, their type, and index arrays
/// (CSR: indices then indptr; COO: coords). The same for v1 components and v0.1 blobs.
struct SparseParts<'a> {
    values: Cow<'a, [u8]>,
    value_type: ElementType,
    first: Cow<'a, [u64]>,
    second: Cow<'a, [u64]>,
}

impl Reader {
    fn expect_format(&self, name: &str, f: Format) -> Result<&ObjectInfo> {
        let obj = self.object(name)?;
        if obj.format != f {
            return Err(
                Error::argument(format!("object is {}, not {f}", obj.format)).in_object(name),
            );
        }
        Ok(obj)
    }

    fn index_component(&self, obj: &ObjectInfo, role: &str) -> Result<Cow<'_, [u64]>> {
        let comp = component(obj, role)?;
        fn widen<T: Pod + Into<u64>>(v: Cow<'_, [T]>) -> Cow<'_, [u64]> {
            Cow::Owned(v.iter().map(|&x| x.into()).collect())
        }
        let o = ReadOptions::default();
        Ok(match comp.element.dtype {
            DType::U64 => self.read_storage::<u64>(&obj.name, role, o)?,
            DType::U32 => widen(self.read_storage::<u32>(&obj.name, role, o)?),
            DType::U16 => widen(self.read_storage::<u16>(&obj.name, role, o)?),
            DType::U8 => widen(self.read_storage::<u8>(&obj.name, role, o)?),
            d => {
                return Err(Error::invalid(format!(
                    "index component holds {d}, not an unsigned integer"
                ))
                .in_component(role)
                .in_object(&obj.name))
            }
        })
    }

    fn sparse_parts(&self, obj: &ObjectInfo) -> Result<SparseParts<'_>> {
        let name = &obj.name;
        if let Some(p) = obj.legacy_packing {
            return self.legacy_parts(obj, p).map_err(|e| e.in_object(name));
        }
        let values = component(obj, "values")?;
        let (first, second) = match obj.format {
            Format::SparseCsr => (
                self.index_component(obj, "indices")?,
                self.index_component(obj, "indptr")?,
            ),
            _ => (self.index_component(obj, "coords")?, Cow::Borrowed(&[][..])),
        };
        Ok(SparseParts {
            values: self.component_bytes(name, "values", ReadOptions::default())?,
            value_type: values.element.clone(),
            first,
            second,
        })
    }

    /// Splits a v0.1 one-blob sparse entry, swapping byte order where the entry says so.
    fn legacy_parts(&self, obj: &ObjectInfo, p: LegacyPacking) -> Result<SparseParts<'_>> {
        let blob =
            self.component_bytes(&obj.name, crate::LEGACY_BLOB_ROLE, ReadOptions::default())?;
        let vsize = p.values.size();
        let u64s = |b: &[u8]| -> Vec<u64> {
            b.chunks_exact(8)
                .map(|c| {
                    let a: [u8; 8] = c.try_into().unwrap_or_default();
                    match p.byte_order {
                        ByteOrder::Little => u64::from_le_bytes(a),
                        ByteOrder::Big => u64::from_be_bytes(a),
                    }
                })
                .collect()
        };
        let le_values = |b: &[u8]| -> Vec<u8> {
            let mut v = b.to_vec();
            if p.byte_order == ByteOrder::Big && vsize > 1 {
                v.chunks_exact_mut(vsize).for_each(<[u8]>::reverse);
            }
            v
        };
        let too_small = || {
            Error::invalid(format!(
                "v0.1 sparse blob of {} bytes is too small for its shape {:?}",
                blob.len(),
                obj.shape
            ))
        };
        match p.layout {
            LegacyLayout::Csr => {
                let rows = obj.shape.first().copied().ok_or_else(too_small)?;
                let ip_len = usize::try_from(rows)
                    .ok()
                    .and_then(|r| r.checked_add(1)?.checked_mul(8))
                    .ok_or_else(too_small)?;
                let indptr = u64s(blob.get(..ip_len).ok_or_else(too_small)?);
                let nnz = usize::try_from(indptr.last().copied().unwrap_or(0))
                    .map_err(|_| too_small())?;
                let ix_end = nnz
                    .checked_mul(8)
                    .and_then(|n| n.checked_add(ip_len))
                    .ok_or_else(too_small)?;
                let end = nnz
                    .checked_mul(vsize)
                    .and_then(|n| n.checked_add(ix_end))
                    .ok_or_else(too_small)?;
                if end != blob.len() {
                    return Err(Error::invalid(format!(
                        "v0.1 CSR blob is {} bytes, but its indptr ends at {nnz} values, which take {end}",
                        blob.len()
                    )));
                }
                Ok(SparseParts {
                    values: Cow::Owned(le_values(blob.get(ix_end..end).ok_or_else(too_small)?)),
                    value_type: ElementType::plain(p.values),
                    first: Cow::Owned(u64s(blob.get(ip_len..ix_end).ok_or_else(too_small)?)),
                    second: Cow::Owned(indptr),
                })
            }
            LegacyLayout::Coo => {
                let ndim = obj.shape.len();
                let rec = ndim * 8 + vsize;
                if ndim == 0 || blob.len() % rec != 0 {
                    return Err(too_small());
                }
                let nnz = blob.len() / rec;
                // Records are (coords, value) pairs; our model stores coordinates axis by axis.
                let mut coords = vec![0u64; ndim * nnz];
                let mut values = Vec::with_capacity(nnz * vsize);
                for (i, r) in blob.chunks_exact(rec).enumerate() {
                    let (c, v) = r.split_at(ndim * 8);
                    for (d, x) in u64s(c).into_iter().enumerate() {
                        if let Some(slot) = coords.get_mut(d * nnz + i) {
                            *slot = x;
                        }
                    }
                    values.extend_from_slice(v);
                }
                Ok(SparseParts {
                    values: Cow::Owned(le_values(&values)),
                    value_type: ElementType::plain(p.values),
                    first: Cow::Owned(coords),
                    second: Cow::Borrowed(&[][..]),
                })
            }
        }
    }

    /// A v0.1 CSR entry's parts: value bytes (little-endian), indices, indptr; checked.
    pub(crate) fn legacy_csr_bytes(
        &self,
        obj: &ObjectInfo,
    ) -> Result<(Vec<u8>, Vec<u64>, Vec<u64>)> {
        let parts = self.sparse_parts(obj)?;
        let [rows, cols] = obj.shape[..] else {
            return Err(Error::invalid(format!(
                "sparse_csr object must have rank 2, not {:?}",
                obj.shape
            ))
            .in_object(&obj.name));
        };
        let nnz = parts.values.len() / parts.value_type.dtype.size();
        check_csr(rows, cols, &parts.second, &parts.first, nnz)
            .map_err(|e| e.in_object(&obj.name))?;
        Ok((
            parts.values.into_owned(),
            parts.first.into_owned(),
            parts.second.into_owned(),
        ))
    }

    /// A v0.1 COO entry's parts: value bytes (little-endian) and SoA coordinates; checked.
    pub(crate) fn legacy_coo_bytes(&self, obj: &ObjectInfo) -> Result<(Vec<u8>, Vec<u64>)> {
        let parts = self.sparse_parts(obj)?;
        let nnz = parts.values.len() / parts.value_type.dtype.size();
        check_coo(&obj.shape, &parts.first, nnz).map_err(|e| e.in_object(&obj.name))?;
        Ok((parts.values.into_owned(), parts.first.into_owned()))
    }

    /// A `sparse_csr` object (v1 components, or a v0.1 one-blob entry), checked.
    pub fn read_csr<V: Element>(&self, name: &str) -> Result<Csr<'_, V>> {
        let obj = self.expect_format(name, Format::SparseCsr)?;
        let [rows, cols] = obj.shape[..] else {
            return Err(Error::invalid(format!(
                "sparse_csr object must have rank 2, not {:?}",
                obj.shape
            ))
            .in_object(name));
        };
        let parts = self.sparse_parts(obj)?;
        let values = typed::<V>(parts.values, &parts.value_type)
            .map_err(|e| e.in_component("values").in_object(name))?;
        check_csr(rows, cols, &parts.second, &parts.first, values.len())
            .map_err(|e| e.in_object(name))?;
        Ok(Csr {
            shape: [rows, cols],
            values,
            indices: parts.first,
            indptr: parts.second,
        })
    }

    /// A `sparse_coo` object (v1 components, or a v0.1 one-blob entry), checked.
    pub fn read_coo<V: Element>(&self, name: &str) -> Result<Coo<'_, V>> {
        let obj = self.expect_format(name, Format::SparseCoo)?;
        let parts = self.sparse_parts(obj)?;
        let values = typed::<V>(parts.values, &parts.value_type)
            .map_err(|e| e.in_component("values").in_object(name))?;
        check_coo(&obj.shape, &parts.first, values.len()).map_err(|e| e.in_object(name))?;
        Ok(Coo {
            shape: obj.shape.to_vec(),
            values,
            coords: parts.first,
        })
    }

    /// A `quantized_group` object's parts.
    pub fn read_quantized(&self, name: &str) -> Result<Quantized<'_>> {
        let obj = self.expect_format(name, Format::QuantizedGroup)?;
        let params =
            QuantParams::from_attributes(&obj.attributes).map_err(|e| e.in_object(name))?;
        Ok(Quantized {
            shape: obj.shape.to_vec(),
            params,
            packed: self.component_bytes(name, "packed_weight", ReadOptions::default())?,
            scales: self.component_f32(obj, "scales")?,
            zeros: self.component_f32(obj, "zeros")?,
        })
    }

    fn component_f32(&self, obj: &ObjectInfo, role: &str) -> Result<Vec<f32>> {
        let comp = component(obj, role)?;
        let bytes = self.component_bytes(&obj.name, role, ReadOptions::default())?;
        to_f32(&bytes, &comp.element).map_err(|e| e.in_component(role).in_object(&obj.name))
    }

    /// Any dense, CSR or COO object as a dense row-major array of `V` (duplicates summed). The
    /// dense size is capped by [`crate::Limits::max_decompressed_len`].
    pub fn to_dense<V: Element + Accumulate>(&self, name: &str) -> Result<Cow<'_, [V]>> {
        let obj = self.object(name)?;
        let cap = self.limits().max_decompressed_len;
        let dense = match obj.format {
            Format::Dense => return self.read::<V>(name),
            Format::SparseCsr => {
                let c = self.read_csr::<V>(name)?;
                csr_to_dense(
                    c.shape[0], c.shape[1], &c.indptr, &c.indices, &c.values, cap,
                )
            }
            Format::SparseCoo => {
                let c = self.read_coo::<V>(name)?;
                coo_to_dense(&c.shape, &c.coords, &c.values, cap)
            }
            ref f => {
                return Err(Error::argument(format!(
                    "a {f} object has no exact dense form; use read_f32"
                ))
                .in_object(name))
            }
        };
        dense.map(Cow::Owned).map_err(|e| e.in_object(name))
    }

    /// Any object's dense form as little-endian bytes and their element type: dense data as
    /// stored, sparse objects densified in their value type, quantized objects dequantized to
    /// f32. This is what formats without sparse or quantized objects (.mag, .safetensors) hold.
    pub fn dense_form(&self, name: &str) -> Result<(Cow<'_, [u8]>, ElementType)> {
        let o = self.object(name)?;
        match o.format {
            Format::Dense => {
                let ty = component(o, "data")?.element.clone();
                Ok((
                    self.component_bytes(name, "data", ReadOptions::default())?,
                    ty,
                ))
            }
            Format::QuantizedGroup => {
                let v = self.read_f32(name)?;
                Ok((
                    Cow::Owned(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
                    ElementType::plain(DType::F32),
                ))
            }
            Format::SparseCsr | Format::SparseCoo => {
                let ty = match o.legacy_packing {
                    Some(p) => ElementType::plain(p.values),
                    None => component(o, "values")?.element.clone(),
                };
                Ok((crate::convert::dense_bytes(self, o)?, ty))
            }
            ref f => {
                Err(Error::argument(format!("a {f} object has no dense form")).in_object(name))
            }
        }
    }

    /// Any numeric object as `f32` values, row-major: dense data converted, FP8 decoded, sparse
    /// objects densified, quantized objects dequantized. Complex values and unknown formats are
    /// refused.
    pub fn read_f32(&self, name: &str) -> Result<Vec<f32>> {
        let obj = self.object(name)?;
        let cap = self.limits().max_decompressed_len;
        let at = |e: Error| e.in_object(name);
        match obj.format {
            Format::Dense => self.component_f32(obj, "data"),
            Format::QuantizedGroup => self.read_quantized(name)?.dequantize().map_err(at),
            Format::SparseCsr | Format::SparseCoo => {
                let parts = self.sparse_parts(obj)?;
                let values = to_f32(&parts.values, &parts.value_type)
                    .map_err(|e| at(e.in_component("values")))?;
                if obj.format == Format::SparseCsr {
                    let [rows, cols] = obj.shape[..] else {
                        return Err(at(Error::invalid(format!(
                            "sparse_csr object must have rank 2, not {:?}",
                            obj.shape
                        ))));
                    };
                    csr_to_dense(rows, cols, &parts.second, &parts.first, &values, cap).map_err(at)
                } else {
                    coo_to_dense(&obj.shape, &parts.first, &values, cap).map_err(at)
                }
            }
            ref f => Err(at(Error::unsupported(format!(
                "cannot convert a {f} object to f32"
            )))),
        }
    }
}

fn component<'o>(obj: &'o ObjectInfo, role: &str) -> Result<&'o ComponentInfo> {
    obj.component(role)
        .ok_or_else(|| Error::invalid(format!("no {role:?} component")).in_object(&obj.name))
}

/// Little-endian element bytes as `V`, if `V` is their type: borrowed when aligned.
fn typed<'a, V: Element>(bytes: Cow<'a, [u8]>, ty: &ElementType) -> Result<Cow<'a, [V]>> {
    if !zt_formats::element_matches::<V>(ty) {
        return Err(Error::argument(format!(
            "holds {} elements, not {}",
            ty.name(),
            V::element_type().name()
        )));
    }
    Ok(match bytes {
        Cow::Borrowed(b) => match bytemuck::try_cast_slice(b) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => Cow::Owned(bytemuck::pod_collect_to_vec(b)),
        },
        Cow::Owned(v) => Cow::Owned(bytemuck::pod_collect_to_vec(&v)),
    })
}

/// Little-endian element bytes of any real numeric type, converted to `f32`.
pub(crate) fn to_f32(bytes: &[u8], ty: &ElementType) -> Result<Vec<f32>> {
    if let Some(f) = ty.logical.as_ref().and_then(Fp8Format::of) {
        return Ok(bytes.iter().map(|&b| f.decode(b)).collect());
    }
    if matches!(
        ty.logical,
        Some(LogicalType::Complex64 | LogicalType::Complex128)
    ) {
        return Err(Error::argument(format!(
            "{} values have no f32 form",
            ty.name()
        )));
    }
    Ok(to_f32_dtype(ty.dtype, bytes))
}

fn to_f32_dtype(d: DType, b: &[u8]) -> Vec<f32> {
    fn conv<T: Pod, F: Fn(T) -> f32>(b: &[u8], f: F) -> Vec<f32> {
        b.chunks_exact(std::mem::size_of::<T>())
            .map(|c| f(bytemuck::pod_read_unaligned(c)))
            .collect()
    }
    match d {
        DType::F64 => conv(b, |x: f64| x as f32),
        DType::F32 => conv(b, |x: f32| x),
        DType::F16 => conv(b, |x: half::f16| x.to_f32()),
        DType::BF16 => conv(b, |x: half::bf16| x.to_f32()),
        DType::I64 => conv(b, |x: i64| x as f32),
        DType::I32 => conv(b, |x: i32| x as f32),
        DType::I16 => conv(b, |x: i16| f32::from(x)),
        DType::I8 => conv(b, |x: i8| f32::from(x)),
        DType::U64 => conv(b, |x: u64| x as f32),
        DType::U32 => conv(b, |x: u32| x as f32),
        DType::U16 => conv(b, |x: u16| f32::from(x)),
        DType::U8 | DType::Bool => b.iter().map(|&x| f32::from(x)).collect(),
    }
}

impl<W: Sink> Writer<W> {
    /// Adds a `sparse_csr` matrix (u64 indices, as the spec requires), checked first.
    pub fn add_csr<V: Element>(
        &mut self,
        name: &str,
        shape: [u64; 2],
        values: &[V],
        indices: &[u64],
        indptr: &[u64],
    ) -> Result<()> {
        check_csr(shape[0], shape[1], indptr, indices, values.len())
            .map_err(|e| Error::argument(e.message()).in_object(name))?;
        let obj = ObjectData {
            shape: shape.to_vec(),
            format: Format::SparseCsr,
            attributes: Default::default(),
            components: vec![
                ComponentData::of("values", values),
                ComponentData::of("indices", indices),
                ComponentData::of("indptr", indptr),
            ],
        };
        self.add_object(name, obj)
    }

    /// Adds a `sparse_coo` tensor: `coords` holds `ndim x nnz` u64, all first coordinates first.
    pub fn add_coo<V: Element>(
        &mut self,
        name: &str,
        shape: &[u64],
        values: &[V],
        coords: &[u64],
    ) -> Result<()> {
        check_coo(shape, coords, values.len())
            .map_err(|e| Error::argument(e.message()).in_object(name))?;
        let obj = ObjectData {
            shape: shape.to_vec(),
            format: Format::SparseCoo,
            attributes: Default::default(),
            components: vec![
                ComponentData::of("values", values),
                ComponentData::of("coords", coords),
            ],
        };
        self.add_object(name, obj)
    }

    /// Adds a `quantized_group` object: `packed` holds the packed words as little-endian bytes
    /// (see [`QuantParams::pack`]); one scale and one zero point per group.
    pub fn add_quantized<S: Element>(
        &mut self,
        name: &str,
        shape: &[u64],
        params: QuantParams,
        packed: &[u8],
        scales: &[S],
        zeros: &[S],
    ) -> Result<()> {
        let obj = ObjectData {
            shape: shape.to_vec(),
            format: Format::QuantizedGroup,
            attributes: params.attributes(),
            components: vec![
                ComponentData {
                    role: "packed_weight".into(),
                    element: ElementType::plain(params.word),
                    bytes: Cow::Borrowed(packed),
                },
                ComponentData {
                    role: "scales".into(),
                    element: S::element_type(),
                    bytes: le_bytes(scales),
                },
                ComponentData {
                    role: "zeros".into(),
                    element: S::element_type(),
                    bytes: le_bytes(zeros),
                },
            ],
        };
        self.add_object(name, obj)
    }

    /// As [`Writer::add_csr`], etc., with options for just this object.
    pub fn with_options<R>(
        &mut self,
        options: WriteOptions,
        f: impl FnOnce(&mut Self) -> Result<R>,
    ) -> Result<R> {
        let saved = self.options();
        self.set_options(options);
        let r = f(self);
        self.set_options(saved);
        r
    }
}
