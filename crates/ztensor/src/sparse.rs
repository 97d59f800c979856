//! Sparse and quantized objects: their reads on [`ObjectView`] (typed parts, dense forms,
//! f32), their writes on [`Writer`], and the v0.1 one-blob layouts split into the same parts.

use std::borrow::Cow;

use bytemuck::Pod;
use zt_container::{Error, ErrorKind, Result};
use zt_formats::ggml::GgmlType;
use zt_formats::{
    check_coo, check_csr, coo_to_dense, csr_to_dense, fp8, fp8::Fp8Format, Accumulate, DType,
    Element, ElementType, Format, LogicalType, QuantParams,
};

use crate::decode::ReadOptions;
use crate::model::{
    ByteOrder, DigestScope, LegacyLayout, LegacyPacking, ObjectInfo, LEGACY_BLOB_ROLE,
};
use crate::view::ObjectView;
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

/// A sparse object's checked parts with untyped values ([`ObjectView::read_sparse`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SparseData<'a> {
    /// The values as little-endian bytes.
    pub values: Cow<'a, [u8]>,
    /// The values' type.
    pub value_type: ElementType,
    /// CSR: the column of each value (empty for COO).
    pub indices: Cow<'a, [u64]>,
    /// CSR: where each row starts in `values`, rows + 1 entries (empty for COO).
    pub indptr: Cow<'a, [u64]>,
    /// COO: `ndim x nnz` coordinates, structure of arrays (empty for CSR).
    pub coords: Cow<'a, [u64]>,
}

/// A sparse object before typing: little-endian value bytes, their type, and index arrays
/// (CSR: indices then indptr; COO: coords). The same for v1 components and v0.1 blobs.
struct SparseParts<'a> {
    values: Cow<'a, [u8]>,
    value_type: ElementType,
    first: Cow<'a, [u64]>,
    second: Cow<'a, [u64]>,
}

impl<'r> ObjectView<'r> {
    fn expect_format(&self, f: Format) -> Result<&'r ObjectInfo> {
        let obj = self.info();
        if obj.format != f {
            return Err(
                Error::argument(format!("object is {}, not {f}", obj.format)).in_object(&obj.name),
            );
        }
        Ok(obj)
    }

    fn index_component(&self, role: &str) -> Result<Cow<'r, [u64]>> {
        let obj = self.info();
        let comp = self.component(role)?;
        fn widen<T: Pod + Into<u64>>(v: Cow<'_, [T]>) -> Cow<'static, [u64]> {
            Cow::Owned(v.iter().map(|&x| x.into()).collect())
        }
        let o = self.read_options();
        Ok(match comp.element.dtype {
            DType::U64 => comp.read_storage::<u64>(o)?,
            DType::U32 => widen(comp.read_storage::<u32>(o)?),
            DType::U16 => widen(comp.read_storage::<u16>(o)?),
            DType::U8 => widen(comp.read_storage::<u8>(o)?),
            d => {
                return Err(Error::invalid(format!(
                    "index component holds {d}, not an unsigned integer"
                ))
                .in_component(role)
                .in_object(&obj.name))
            }
        })
    }

    fn sparse_parts(&self) -> Result<SparseParts<'r>> {
        let obj = self.info();
        if let Some(p) = obj.legacy_packing {
            return self.legacy_parts(p).map_err(|e| e.in_object(&obj.name));
        }
        let values = self.component("values")?;
        let (first, second) = match obj.format {
            Format::SparseCsr => (
                self.index_component("indices")?,
                self.index_component("indptr")?,
            ),
            _ => (self.index_component("coords")?, Cow::Borrowed(&[][..])),
        };
        Ok(SparseParts {
            values: values.bytes()?,
            value_type: values.element.clone(),
            first,
            second,
        })
    }

    /// Splits a v0.1 one-blob sparse entry, swapping byte order where the entry says so.
    fn legacy_parts(&self, p: LegacyPacking) -> Result<SparseParts<'r>> {
        let obj = self.info();
        let blob = self.component(LEGACY_BLOB_ROLE)?.bytes()?;
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
                let mut coords = zt_container::internal::try_zeroed_vec::<u64>(ndim * nnz)?;
                let mut values = zt_container::internal::try_with_capacity(nnz * vsize)?;
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
    pub(crate) fn legacy_csr_bytes(&self) -> Result<(Vec<u8>, Vec<u64>, Vec<u64>)> {
        let obj = self.info();
        let parts = self.sparse_parts()?;
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
    pub(crate) fn legacy_coo_bytes(&self) -> Result<(Vec<u8>, Vec<u64>)> {
        let obj = self.info();
        let parts = self.sparse_parts()?;
        let nnz = parts.values.len() / parts.value_type.dtype.size();
        check_coo(&obj.shape, &parts.first, nnz).map_err(|e| e.in_object(&obj.name))?;
        Ok((parts.values.into_owned(), parts.first.into_owned()))
    }

    /// Verifies every digest of the object, and for a zTensor v2 CSR or COO object its
    /// structure (v2 makes that part of verification); returns how many digests it checked.
    /// [`Reader::verify`](crate::Reader::verify) runs this on every object.
    pub fn verify(&self) -> Result<usize> {
        // An object listed as unreadable fails verification with why: it holds no bytes to
        // digest, and passing over it would call a damaged file sound. (Objects that are
        // not numbers, a `skip` defect, are passed over by `Reader::verify` with a note.)
        let info = self.info();
        if let Some(d) = info.defect.as_ref().filter(|d| !d.skip) {
            return Err(d.error_in(&info.name));
        }
        let checked = self.verify_digests()?;
        if self
            .components
            .iter()
            .any(|c| c.digest_scope == DigestScope::Decoded)
        {
            self.check_sparse_structure()?;
        }
        Ok(checked)
    }

    /// The CSR rules of the object's format version: [`check_csr`], and for zTensor v2 (whose
    /// parts carry decoded-bytes digests) column indices strictly increasing within a row.
    fn check_csr_rules(
        &self,
        rows: u64,
        cols: u64,
        indptr: &[u64],
        indices: &[u64],
        nnz: usize,
    ) -> Result<()> {
        check_csr(rows, cols, indptr, indices, nnz)?;
        let v2 = self
            .components
            .iter()
            .any(|c| c.digest_scope == DigestScope::Decoded);
        if v2 {
            zt_formats::check_csr_sorted(indptr, indices)?;
        }
        Ok(())
    }

    /// Checks the data-level rules of a CSR or COO object without decoding its values:
    /// row pointers start at 0, never decrease and end at the number of indices; column
    /// indices increase within a row and stay below the column count; coordinates lie in
    /// the shape. (The values' count was checked against the indices' at open.) Anything else
    /// passes.
    pub(crate) fn check_sparse_structure(&self) -> Result<()> {
        let obj = self.info();
        let name = &obj.name;
        match (&obj.format, obj.legacy_packing) {
            (Format::SparseCsr, None) => {
                let [rows, cols] = obj.shape[..] else {
                    return Ok(());
                };
                let indices = self.index_component("indices")?;
                let indptr = self.index_component("indptr")?;
                self.check_csr_rules(rows, cols, &indptr, &indices, indices.len())
                    .map_err(|e| e.in_object(name))
            }
            (Format::SparseCoo, None) => {
                let coords = self.index_component("coords")?;
                let n = coords.len() / obj.shape.len().max(1);
                check_coo(&obj.shape, &coords, n).map_err(|e| e.in_object(name))
            }
            _ => Ok(()),
        }
    }

    /// A `sparse_csr` or `sparse_coo` object of any value type, checked, with its values as
    /// little-endian bytes and its indices widened to `u64`: for callers that type the values
    /// themselves (language bindings, converters).
    ///
    /// ```
    /// # fn main() -> ztensor::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("m.zt");
    /// let mut w = ztensor::Writer::create(&path)?;
    /// w.add_csr("m", [2, 3], &[5i16, 6], &[0, 2], &[0, 1, 2])?;
    /// w.finish()?;
    /// let r = ztensor::open(&path)?;
    /// let s = r.object("m")?.read_sparse()?;
    /// assert_eq!(s.value_type.name(), "i16");
    /// assert_eq!(&s.values[..], &[5, 0, 6, 0]);
    /// assert_eq!((&s.indices[..], &s.indptr[..]), (&[0, 2][..], &[0, 1, 2][..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_sparse(&self) -> Result<SparseData<'r>> {
        self.readable()?;
        let obj = self.info();
        let name = &obj.name;
        let parts = match obj.format {
            Format::SparseCsr | Format::SparseCoo => self.sparse_parts()?,
            ref f => {
                return Err(Error::argument(format!("object is {f}, not sparse")).in_object(name))
            }
        };
        let size = parts.value_type.logical_size();
        let nnz = (parts.values.len() as u64).checked_div(size).unwrap_or(0);
        if obj.format == Format::SparseCsr {
            let [rows, cols] = obj.shape[..] else {
                return Err(Error::invalid(format!(
                    "sparse_csr object must have rank 2, not {:?}",
                    obj.shape
                ))
                .in_object(name));
            };
            self.check_csr_rules(rows, cols, &parts.second, &parts.first, nnz as usize)
                .map_err(|e| e.in_object(name))?;
            Ok(SparseData {
                values: parts.values,
                value_type: parts.value_type,
                indices: parts.first,
                indptr: parts.second,
                coords: Cow::Borrowed(&[]),
            })
        } else {
            check_coo(&obj.shape, &parts.first, nnz as usize).map_err(|e| e.in_object(name))?;
            Ok(SparseData {
                values: parts.values,
                value_type: parts.value_type,
                indices: Cow::Borrowed(&[]),
                indptr: Cow::Borrowed(&[]),
                coords: parts.first,
            })
        }
    }

    /// A `sparse_csr` object (v1 components, or a v0.1 one-blob entry), checked.
    pub fn read_csr<V: Element>(&self) -> Result<Csr<'r, V>> {
        let obj = self.expect_format(Format::SparseCsr)?;
        let name = &obj.name;
        let [rows, cols] = obj.shape[..] else {
            return Err(Error::invalid(format!(
                "sparse_csr object must have rank 2, not {:?}",
                obj.shape
            ))
            .in_object(name));
        };
        let parts = self.sparse_parts()?;
        let values = typed::<V>(parts.values, &parts.value_type)
            .map_err(|e| e.in_component("values").in_object(name))?;
        self.check_csr_rules(rows, cols, &parts.second, &parts.first, values.len())
            .map_err(|e| e.in_object(name))?;
        Ok(Csr {
            shape: [rows, cols],
            values,
            indices: parts.first,
            indptr: parts.second,
        })
    }

    /// A `sparse_coo` object (v1 components, or a v0.1 one-blob entry), checked.
    pub fn read_coo<V: Element>(&self) -> Result<Coo<'r, V>> {
        let obj = self.expect_format(Format::SparseCoo)?;
        let name = &obj.name;
        let parts = self.sparse_parts()?;
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
    pub fn read_quantized(&self) -> Result<Quantized<'r>> {
        self.readable()?;
        let obj = self.expect_format(Format::QuantizedGroup)?;
        let params =
            QuantParams::from_attributes(&obj.attributes).map_err(|e| e.in_object(&obj.name))?;
        Ok(Quantized {
            shape: obj.shape.to_vec(),
            params,
            packed: self.component("packed_weight")?.bytes()?,
            scales: self.component_f32("scales")?,
            zeros: self.component_f32("zeros")?,
        })
    }

    fn component_f32(&self, role: &str) -> Result<Vec<f32>> {
        let comp = self.component(role)?;
        let bytes = comp.bytes()?;
        to_f32(&bytes, &comp.element).map_err(|e| e.in_component(role).in_object(self.name()))
    }

    /// Any dense, CSR or COO object as a dense row-major array of `V` (duplicates summed). The
    /// dense size is capped by [`crate::Limits::max_decompressed_len`].
    pub fn to_dense<V: Element + Accumulate>(&self) -> Result<Cow<'r, [V]>> {
        let obj = self.info();
        let name = &obj.name;
        let cap = self.backing().limits.max_decompressed_len;
        let dense = match obj.format {
            Format::Dense => return self.read::<V>(),
            Format::SparseCsr => {
                let c = self.read_csr::<V>()?;
                csr_to_dense(
                    c.shape[0], c.shape[1], &c.indptr, &c.indices, &c.values, cap,
                )
            }
            Format::SparseCoo => {
                let c = self.read_coo::<V>()?;
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

    /// A sparse object's dense little-endian bytes, in its own value type.
    fn dense_bytes(&self, ty: &ElementType) -> Result<Cow<'r, [u8]>> {
        use zt_formats::fp8::{F8E4M3Fn, F8E4M3Fnuz, F8E5M2Fnuz, F8E5M2};
        use zt_formats::Complex;
        let name = self.name();
        macro_rules! dense {
            ($t:ty) => {
                self.to_dense::<$t>()
                    .map(|d| Cow::Owned(bytemuck::cast_slice::<$t, u8>(&d).to_vec()))
            };
        }
        match (&ty.logical, ty.dtype) {
            (Some(LogicalType::F8E4M3Fn), _) => dense!(F8E4M3Fn),
            (Some(LogicalType::F8E5M2), _) => dense!(F8E5M2),
            (Some(LogicalType::F8E4M3Fnuz), _) => dense!(F8E4M3Fnuz),
            (Some(LogicalType::F8E5M2Fnuz), _) => dense!(F8E5M2Fnuz),
            (Some(LogicalType::Complex64), _) => dense!(Complex<f32>),
            (Some(LogicalType::Complex128), _) => dense!(Complex<f64>),
            (_, DType::F64) => dense!(f64),
            (_, DType::F32) => dense!(f32),
            (_, DType::F16) => dense!(half::f16),
            (_, DType::BF16) => dense!(half::bf16),
            (_, DType::I64) => dense!(i64),
            (_, DType::I32) => dense!(i32),
            (_, DType::I16) => dense!(i16),
            (_, DType::I8) => dense!(i8),
            (_, DType::U64) => dense!(u64),
            (_, DType::U32) => dense!(u32),
            (_, DType::U16) => dense!(u16),
            (_, DType::U8) => dense!(u8),
            // Summing duplicate bools has no meaning that keeps them bools.
            (_, DType::Bool) => {
                Err(Error::unsupported("sparse bool objects cannot be densified").in_object(name))
            }
        }
    }

    /// The ggml block type of a GGUF-origin quantized object (format `gguf.<type>/1`, from a
    /// GGUF file or a zTensor file converted from one).
    ///
    /// ```
    /// # #[cfg(feature = "gguf")]
    /// # fn main() -> ztensor::Result<()> {
    /// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/gguf/quant.gguf");
    /// let r = ztensor::open(path)?;
    /// let q = r.object("q4_0")?;
    /// let t = q.ggml_type().unwrap();
    /// assert_eq!((t.name, t.block_elems, t.block_bytes), ("q4_0", 32, 18));
    /// assert_eq!(q.shape(), &[2, 64]);                  // logical, row-major
    /// assert_eq!(q.bytes()?.len(), 4 * 18);             // the blocks, byte for byte
    /// assert_eq!(q.read::<f32>()?.len(), 128);          // dequantized
    /// # Ok(())
    /// # }
    /// # #[cfg(not(feature = "gguf"))]
    /// # fn main() {}
    /// ```
    pub fn ggml_type(&self) -> Option<GgmlType> {
        match &self.info().format {
            Format::Unknown(id) => GgmlType::by_layout_id(id),
            _ => None,
        }
    }

    /// A GGUF-origin quantized object dequantized to f32, row-major (Q4_0, Q4_1, Q5_0, Q5_1,
    /// Q8_0, Q2_K-Q6_K, TQ1_0, TQ2_0, the IQ types, MXFP4 and NVFP4, bit for bit as the `gguf`
    /// package's `gguf.quants.dequantize`; Q8_K and Q1_0 as ggml's `dequantize_row_*`);
    /// `None` for any other object. The values are capped like any decoded data
    /// ([`crate::Limits::max_decompressed_len`]).
    pub(crate) fn dequantize_ggml(&self, opts: ReadOptions) -> Result<Option<Vec<f32>>> {
        let Some(GgmlBlocks { t, blocks, count }) = self.ggml_blocks(opts)? else {
            return Ok(None);
        };
        let at = |e: Error| e.in_object(&self.info().name).in_component("data");
        let mut out = zt_container::internal::try_zeroed_vec::<f32>(count).map_err(at)?;
        dequantize_on_the_pool(&t, &blocks, &mut out).map_err(at)?;
        Ok(Some(out))
    }

    /// [`Self::dequantize_ggml`] as little-endian bytes, written where they are returned: the
    /// dense form of a GGUF block tensor without a copy of its values.
    fn dequantize_ggml_le_bytes(&self, opts: ReadOptions) -> Result<Option<Vec<u8>>> {
        let Some(GgmlBlocks { t, blocks, count }) = self.ggml_blocks(opts)? else {
            return Ok(None);
        };
        let at = |e: Error| e.in_object(&self.info().name).in_component("data");
        let bytes =
            f32_le_bytes(count, |out| dequantize_on_the_pool(&t, &blocks, out)).map_err(at)?;
        Ok(Some(bytes))
    }

    /// A GGUF block tensor's type, blocks and element count, checked against the cap on
    /// decoded data; `None` for any other object.
    fn ggml_blocks(&self, opts: ReadOptions) -> Result<Option<GgmlBlocks<'r>>> {
        let Some(t) = self.ggml_type() else {
            return Ok(None);
        };
        let obj = self.info();
        let at = |e: Error| e.in_object(&obj.name);
        if !t.can_dequantize() {
            // The same refusal dequantize gives, before any byte is read.
            let mut none = [];
            zt_formats::ggml::dequantize(t.id, &[], &mut none).map_err(at)?;
        }
        let count = obj.element_count();
        let cap = self.backing().limits.max_decompressed_len;
        if count.saturating_mul(4) > cap {
            return Err(at(Error::limit(format!(
                "dequantizing {count} elements takes {} bytes, over the cap of {cap}",
                count.saturating_mul(4)
            ))));
        }
        let blocks = self.component("data")?.bytes_with(opts)?;
        // Not over the cap on decoded bytes, which is a `usize`'s worth.
        let count = usize::try_from(count).map_err(|_| at(Error::limit("too many elements")))?;
        Ok(Some(GgmlBlocks { t, blocks, count }))
    }

    /// Any object's dense form as little-endian bytes and their element type: dense data as
    /// stored, sparse objects densified in their value type, quantized objects dequantized to
    /// f32. This is what formats without sparse or quantized objects (.mag, .safetensors) hold.
    /// A view with a float cast ([`ObjectView::cast_floats`]) gives its float elements cast.
    pub fn dense_form(&self) -> Result<(Cow<'r, [u8]>, ElementType)> {
        let (bytes, element) = self.stored_dense_form()?;
        match self.float_cast() {
            Some(to) if crate::cast::castable(&element) => {
                let cap = self.backing().limits.max_decompressed_len;
                let cast = crate::cast::cast_bytes(bytes, element.dtype, to, cap)
                    .map_err(|e| e.in_object(self.name()))?;
                Ok((cast, ElementType::plain(to)))
            }
            _ => Ok((bytes, element)),
        }
    }

    /// [`ObjectView::dense_form`] in the element type the file gives it, before any cast.
    fn stored_dense_form(&self) -> Result<(Cow<'r, [u8]>, ElementType)> {
        self.readable()?;
        let o = self.info();
        let name = &o.name;
        if let Some(bytes) = self.dequantize_ggml_le_bytes(self.read_options())? {
            return Ok((Cow::Owned(bytes), ElementType::plain(DType::F32)));
        }
        match o.format {
            Format::Dense => {
                let data = self.component("data")?;
                Ok((data.bytes()?, data.element.clone()))
            }
            Format::QuantizedGroup => {
                let v = self.read_f32()?;
                Ok((
                    Cow::Owned(le_bytes(&v).into_owned()),
                    ElementType::plain(DType::F32),
                ))
            }
            Format::SparseCsr | Format::SparseCoo => {
                let ty = o.dense_element_type().ok_or_else(|| {
                    Error::not_found("object has no component \"values\"").in_object(name)
                })?;
                Ok((self.dense_bytes(&ty)?, ty))
            }
            ref f => {
                Err(Error::argument(format!("a {f} object has no dense form")).in_object(name))
            }
        }
    }

    /// Any numeric object as `f32` values, row-major: dense data converted, FP8 decoded, sparse
    /// objects densified, quantized objects dequantized (GGUF block types too, see
    /// [`ObjectView::ggml_type`]). Complex values and unknown formats are refused.
    pub fn read_f32(&self) -> Result<Vec<f32>> {
        self.readable()?;
        let obj = self.info();
        let cap = self.backing().limits.max_decompressed_len;
        let at = |e: Error| e.in_object(&obj.name);
        if let Some(v) = self.dequantize_ggml(self.read_options())? {
            return Ok(v);
        }
        match obj.format {
            Format::Dense => {
                // Packed codes take up to 16 times their bytes as f32: capped, as dequantizing.
                let count = obj.element_count();
                let packed = obj.components.iter().any(|c| c.element.bits() < 8);
                if packed && count.saturating_mul(4) > cap {
                    return Err(at(Error::limit(format!(
                        "decoding {count} packed elements takes {} bytes, over the cap of {cap}",
                        count.saturating_mul(4)
                    ))));
                }
                let mut values = self.component_f32("data")?;
                // Packed types decode whole bytes: the last byte's unused codes are dropped.
                values.truncate(usize::try_from(count).unwrap_or(usize::MAX));
                Ok(values)
            }
            Format::QuantizedGroup => {
                // The f32 values take 16 times the bytes of 2-bit codes: capped, as GGUF's.
                let count = obj.element_count();
                if count.saturating_mul(4) > cap {
                    return Err(at(Error::limit(format!(
                        "dequantizing {count} elements takes {} bytes, over the cap of {cap}",
                        count.saturating_mul(4)
                    ))));
                }
                self.read_quantized()?.dequantize().map_err(at)
            }
            Format::SparseCsr | Format::SparseCoo => {
                let parts = self.sparse_parts()?;
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

/// Dequantizes `blocks` of the ggml type `t` into `out` on the pool, in pieces of about
/// [`DEQUANTIZE_PIECE`] values when there are several: each block decodes alone. Blocks that
/// do not fill `out` exactly are refused by the whole call, with the message it gives.
fn dequantize_on_the_pool(t: &GgmlType, blocks: &[u8], out: &mut [f32]) -> Result<()> {
    use rayon::prelude::*;
    let (bb, be) = (t.block_bytes as usize, t.block_elems as usize);
    let whole = bb > 0
        && be > 0
        && blocks.len() % bb == 0
        && (blocks.len() / bb).checked_mul(be) == Some(out.len());
    if !whole || out.len() <= DEQUANTIZE_PIECE || crate::pool::threads() < 2 {
        return zt_formats::ggml::dequantize(t.id, blocks, out);
    }
    let per_piece = (DEQUANTIZE_PIECE / be).max(1);
    crate::pool::install(|| {
        blocks
            .par_chunks(bb * per_piece)
            .zip(out.par_chunks_mut(be * per_piece))
            .try_for_each(|(b, o)| zt_formats::ggml::dequantize(t.id, b, o))
    })
}

/// A GGUF block tensor's blocks, ready to dequantize.
struct GgmlBlocks<'r> {
    t: GgmlType,
    blocks: Cow<'r, [u8]>,
    /// The elements they hold (within the cap on decoded data).
    count: usize,
}

/// `count` f32 values that `fill` writes, as little-endian bytes: written into the byte
/// buffer itself where the allocator aligned it for f32 (as it does), else into an f32
/// buffer and copied.
fn f32_le_bytes(count: usize, fill: impl FnOnce(&mut [f32]) -> Result<()>) -> Result<Vec<u8>> {
    let len = count
        .checked_mul(4)
        .ok_or_else(|| Error::limit(format!("{count} f32 values overflow a buffer")))?;
    let mut bytes = zt_container::internal::try_zeroed_vec::<u8>(len)?;
    match bytemuck::try_cast_slice_mut::<u8, f32>(&mut bytes) {
        Ok(values) => {
            fill(values)?;
            if cfg!(target_endian = "big") {
                for v in values.iter_mut() {
                    *v = f32::from_bits(v.to_bits().to_le());
                }
            }
        }
        Err(_) => {
            let mut values = zt_container::internal::try_zeroed_vec::<f32>(count)?;
            fill(&mut values)?;
            bytes.copy_from_slice(&le_bytes(&values));
        }
    }
    Ok(bytes)
}

/// The values one piece of a dequantization on the pool makes: a quarter of a million f32
/// (1 MiB), enough that handing it to a thread costs nothing beside decoding it.
const DEQUANTIZE_PIECE: usize = 1 << 18;

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
///
/// The packed sub-byte types (FP4, FP6, 4- and 2-bit integers) give every code their bytes
/// hold, lowest bits first (FP4: low nibble first); a caller that knows the element count
/// drops the unused codes of the last byte.
pub(crate) fn to_f32(bytes: &[u8], ty: &ElementType) -> Result<Vec<f32>> {
    if let Some(f) = ty.logical.as_ref().and_then(Fp8Format::of) {
        return Ok(bytes.iter().map(|&b| f.decode(b)).collect());
    }
    // The packed sub-byte types (FP4, FP6, NF4, 4- and 2-bit integers): code by code.
    if let Some((t, bits)) = ty
        .logical
        .as_ref()
        .and_then(|t| Some((t, t.packed_bits()?)))
    {
        return Ok(zt_formats::packed_codes(bytes, bits)
            .map(|c| fp8::packed_value(t, c).unwrap_or(f32::NAN))
            .collect());
    }
    if ty.logical == Some(LogicalType::F8E8M0) {
        return Ok(bytes.iter().map(|&b| fp8::e8m0_to_f32(b)).collect());
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
            .map_err(|e| e.with_kind(ErrorKind::InvalidArgument).in_object(name))?;
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
            .map_err(|e| e.with_kind(ErrorKind::InvalidArgument).in_object(name))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dequantization_in_pieces_matches_one_in_a_piece() {
        // Every block type that dequantizes, over more values than a piece holds (and a last
        // piece cut short), from bytes that make every scale and code.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for id in 0..64 {
            let Some(t) = GgmlType::by_id(id).filter(|t| t.can_dequantize()) else {
                continue;
            };
            let blocks_count = (DEQUANTIZE_PIECE as u64 * 5 / 2).div_ceil(t.block_elems);
            let blocks: Vec<u8> = (0..blocks_count * t.block_bytes)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let n = (blocks_count * t.block_elems) as usize;
            let (mut pieces, mut whole) = (vec![0f32; n], vec![0f32; n]);
            dequantize_on_the_pool(&t, &blocks, &mut pieces).unwrap();
            zt_formats::ggml::dequantize(t.id, &blocks, &mut whole).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(bits(&pieces) == bits(&whole), "{}", t.name);
            // Blocks that do not fill the output are refused as the whole call refuses them.
            let short = &blocks[..blocks.len() - 1];
            let e = dequantize_on_the_pool(&t, short, &mut pieces).unwrap_err();
            let want = zt_formats::ggml::dequantize(t.id, short, &mut whole).unwrap_err();
            assert_eq!(e.to_string(), want.to_string());
        }
    }
}
