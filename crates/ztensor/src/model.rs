//! The one object model every file kind is read into.

use std::fmt;

use smallvec::SmallVec;
use zt_formats::{Digest, ElementType, Encoding, Format};
use zt_manifest::{Attributes, Shape, SpecVersion};

/// Role of the single component that holds a v0.1 sparse entry's packed blob.
pub const LEGACY_BLOB_ROLE: &str = "blob";

/// Which kind of file, and which version of it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileVersion {
    /// zTensor v0.1 (`ZTEN0001`).
    ZTensorV0_1,
    /// zTensor 1.x (`ZTEN1000`) with the manifest's version.
    ZTensor(SpecVersion),
    /// A magnetron `.mag` file of the given layout.
    Mag(zt_mag::Layout),
    /// A `.safetensors` file.
    Safetensors,
    /// zTensor v2 (`\x89ZT2\r\n\x1a\n`, written by ztensor 2.x).
    ZTensorV2,
    /// A NumPy `.npy` array of the given format version (major, minor).
    Npy(u8, u8),
    /// A NumPy `.npz` archive of `.npy` arrays.
    Npz,
    /// A PyTorch checkpoint: the zip archive `torch.save` has written since 1.6.
    PyTorch,
    /// A TorchScript archive (`torch.jit.save`): the module's parameters and buffers, named by
    /// their path in the module, as its state dict names them.
    TorchScript,
    /// A legacy PyTorch checkpoint: pickles and raw storages, as `torch.save` wrote before
    /// 1.6 (and with `_use_new_zipfile_serialization=False`).
    PyTorchLegacy,
    /// A PyTorch distributed checkpoint (`torch.distributed.checkpoint.save`): `.metadata`
    /// and its `*.distcp` data files, each tensor (or each chunk of a sharded one) a
    /// `torch.save` archive in one of them.
    TorchDcp,
    /// An ONNX model (`ModelProto`) of the given IR version: its initializers, constants and
    /// sparse initializers, in every subgraph.
    Onnx {
        /// `ir_version` (0 when the model gives none).
        ir_version: u64,
    },
    /// An HDF5 file (h5py, Keras `.weights.h5`) of the given superblock version (0-3).
    Hdf5 {
        /// The superblock's version.
        superblock: u8,
    },
    /// A Keras 3 `.keras` archive: the HDF5 weights inside it (`model.weights.h5`).
    Keras,
    /// A Flax checkpoint: msgpack as `flax.serialization.to_bytes` writes it
    /// (transformers' `flax_model.msgpack`).
    Flax,
    /// A TensorFlow checkpoint (TensorBundle): its `.index` table and data files.
    TfCheckpoint,
    /// A TensorFlow V1 checkpoint: one file, a table of tensor slices (before TensorFlow 1.0
    /// made TensorBundles the default).
    TfCheckpointV1,
    /// A pickle of NumPy arrays (Paddle's `.pdparams`), of the given pickle protocol (0-5).
    Pickle {
        /// The protocol its `PROTO` opcode names; 0 for a pickle without one (protocols 0
        /// and 1 write none).
        protocol: u8,
    },
    /// Paddle's inference parameters (`.pdiparams`): tensors one after another, named by
    /// the program beside them.
    PaddleParams,
    /// A Caffe model (`.caffemodel`): its layers' blobs.
    Caffe,
    /// An OpenVINO model (IR): the constants of its `.xml`, read from its `.bin`.
    OpenVino,
    /// A TensorFlow Lite model (`.tflite`) of the given schema version (3 today).
    TfLite {
        /// The `Model` table's `version`.
        version: u32,
    },
    /// A legacy GGML file (llama.cpp and whisper.cpp before GGUF): its magic as it reads
    /// (`ggml`, `ggmf`, `ggjt`, `ggla`) and version (0 for `ggml`, which has none).
    Ggml {
        /// `*b"ggjt"` and so on.
        magic: [u8; 4],
        /// The version after the magic; 0 for `ggml`.
        version: u32,
    },
    /// A GGUF file (llama.cpp): its version (1-3) and byte order.
    Gguf {
        /// 1, 2 or 3.
        version: u32,
        /// Whether every number in it is big-endian.
        big_endian: bool,
    },
}

impl FileVersion {
    /// `"zt"`, `"mag"`, `"safetensors"`, `"gguf"`, `"npy"`, `"npz"`, `"pytorch"`, `"onnx"`,
    /// `"hdf5"`, `"keras"`, `"flax"`, `"tensorflow"`, `"pickle"`, `"paddle"`, `"tflite"`,
    /// `"caffe"`, `"openvino"` or `"ggml"`.
    pub fn kind(&self) -> &'static str {
        match self {
            FileVersion::ZTensorV0_1 | FileVersion::ZTensor(_) | FileVersion::ZTensorV2 => "zt",
            FileVersion::Mag(_) => "mag",
            FileVersion::Safetensors => "safetensors",
            FileVersion::Npy(..) => "npy",
            FileVersion::Npz => "npz",
            FileVersion::PyTorch
            | FileVersion::PyTorchLegacy
            | FileVersion::TorchScript
            | FileVersion::TorchDcp => "pytorch",
            FileVersion::Gguf { .. } => "gguf",
            FileVersion::Onnx { .. } => "onnx",
            FileVersion::Hdf5 { .. } => "hdf5",
            FileVersion::Keras => "keras",
            FileVersion::Flax => "flax",
            FileVersion::TfCheckpoint | FileVersion::TfCheckpointV1 => "tensorflow",
            FileVersion::Pickle { .. } => "pickle",
            FileVersion::PaddleParams => "paddle",
            FileVersion::TfLite { .. } => "tflite",
            FileVersion::Caffe => "caffe",
            FileVersion::OpenVino => "openvino",
            FileVersion::Ggml { .. } => "ggml",
        }
    }
}

impl FileVersion {
    /// The version alone, as `zt info --json` gives it: `"1.2.0"`, `"0.1.0"`, `"2"`, a .mag
    /// layout's number (`"300"`, `"MAG&1"` for the first), `"1.0"` for a `.npy` array,
    /// `"legacy"` for a pre-1.6 PyTorch checkpoint, `"dcp"` for a distributed one, `"3"` for GGUF v3, an ONNX model's IR
    /// version (`"10"`), a pickle's protocol (`"4"`), a TensorFlow Lite schema version
    /// (`"3"`), `"1"` for a TensorFlow V1 checkpoint, a legacy GGML file's magic and version
    /// (`"ggjt v3"`, `"ggml"`), and `""` for kinds without versions
    /// (safetensors, `.npz`, zip PyTorch checkpoints, Flax checkpoints, TensorFlow's
    /// TensorBundles, Paddle's inference parameters, Caffe and OpenVINO models).
    ///
    /// ```
    /// assert_eq!(ztensor::FileVersion::ZTensorV2.number(), "2");
    /// assert_eq!(ztensor::FileVersion::Npy(1, 0).number(), "1.0");
    /// ```
    pub fn number(&self) -> String {
        match self {
            FileVersion::ZTensorV0_1 => "0.1.0".to_owned(),
            FileVersion::ZTensor(s) => s.to_string(),
            FileVersion::Mag(l) => {
                use zt_mag::Layout;
                match l {
                    Layout::GenA => "MAG&1",
                    Layout::V1 => "1",
                    Layout::V100 => "100",
                    Layout::V200 => "200",
                    Layout::V300 => "300",
                }
                .to_owned()
            }
            FileVersion::ZTensorV2 => "2".to_owned(),
            FileVersion::Npy(major, minor) => format!("{major}.{minor}"),
            FileVersion::Safetensors
            | FileVersion::Npz
            | FileVersion::PyTorch
            | FileVersion::Flax
            | FileVersion::TfCheckpoint
            | FileVersion::PaddleParams
            | FileVersion::Caffe
            | FileVersion::OpenVino => String::new(),
            FileVersion::PyTorchLegacy => "legacy".to_owned(),
            FileVersion::TorchScript => "torchscript".to_owned(),
            FileVersion::TorchDcp => "dcp".to_owned(),
            FileVersion::Gguf { version, .. } => version.to_string(),
            FileVersion::Onnx { ir_version } => ir_version.to_string(),
            FileVersion::Hdf5 { superblock } => superblock.to_string(),
            FileVersion::Keras => "3".to_owned(),
            FileVersion::TfCheckpointV1 => "1".to_owned(),
            FileVersion::Pickle { protocol } => protocol.to_string(),
            FileVersion::TfLite { version } => version.to_string(),
            FileVersion::Ggml { magic, version } => {
                let magic = String::from_utf8_lossy(magic);
                if *version == 0 {
                    magic.into_owned()
                } else {
                    format!("{magic} v{version}")
                }
            }
        }
    }
}

impl fmt::Display for FileVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileVersion::ZTensorV0_1 => f.write_str("zTensor 0.1"),
            FileVersion::ZTensor(v) => write!(f, "zTensor {v}"),
            FileVersion::Mag(l) => write!(f, "magnetron .mag {l}"),
            FileVersion::Safetensors => f.write_str("safetensors"),
            FileVersion::ZTensorV2 => f.write_str("zTensor 2"),
            FileVersion::Npy(major, minor) => write!(f, "NumPy .npy {major}.{minor}"),
            FileVersion::Npz => f.write_str("NumPy .npz"),
            FileVersion::PyTorch => f.write_str("PyTorch checkpoint"),
            FileVersion::TorchScript => f.write_str("TorchScript archive"),
            FileVersion::TorchDcp => f.write_str("PyTorch distributed checkpoint"),
            FileVersion::PyTorchLegacy => f.write_str("PyTorch checkpoint (legacy, before 1.6)"),
            FileVersion::Onnx { ir_version } => write!(f, "ONNX model (IR version {ir_version})"),
            FileVersion::Hdf5 { superblock } => write!(f, "HDF5 (superblock version {superblock})"),
            FileVersion::Keras => f.write_str("Keras .keras archive"),
            FileVersion::Flax => f.write_str("Flax checkpoint (msgpack)"),
            FileVersion::TfCheckpoint => f.write_str("TensorFlow checkpoint (TensorBundle)"),
            FileVersion::TfCheckpointV1 => f.write_str("TensorFlow checkpoint (V1)"),
            FileVersion::Pickle { protocol } => {
                write!(f, "pickle of NumPy arrays (protocol {protocol})")
            }
            FileVersion::PaddleParams => f.write_str("Paddle inference parameters"),
            FileVersion::TfLite { version } => {
                write!(f, "TensorFlow Lite model (schema {version})")
            }
            FileVersion::Caffe => f.write_str("Caffe model"),
            FileVersion::OpenVino => f.write_str("OpenVINO model"),
            FileVersion::Ggml { .. } => write!(f, "legacy GGML file ({})", self.number()),
            FileVersion::Gguf {
                version,
                big_endian,
            } => {
                write!(f, "GGUF v{version}")?;
                if *big_endian {
                    f.write_str(" (big-endian)")?;
                }
                Ok(())
            }
        }
    }
}

/// Byte order of a component's elements on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ByteOrder {
    /// Little-endian: every v1 file, and v0.1 files unless they say otherwise.
    #[default]
    Little,
    /// Big-endian: v0.1 `data_endianness: "big"`. Never served zero-copy.
    Big,
}

/// One component of an object, validated: its range lies inside the data area, its sizes agree
/// with the object's shape, and its digest (if any) is well-formed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ComponentInfo {
    /// Role name (`data`, `values`, ...); common roles are shared, not allocated.
    pub role: std::borrow::Cow<'static, str>,
    /// Element type.
    pub element: ElementType,
    /// Absolute offset of the stored bytes.
    pub offset: u64,
    /// Stored bytes. For an encoding whose bytes lie in several places (pieces, boxes), the
    /// first piece's range; [`Encoding::pieces_len`] counts them all.
    pub length: u64,
    /// Encoding.
    pub encoding: Encoding,
    /// The declared uncompressed length, as the file gives it.
    pub uncompressed_length: Option<u64>,
    /// Bytes after decoding, when known before reading (always, except for some legacy zstd).
    pub decoded_len: Option<u64>,
    /// Digest (of the stored bytes, or of the decoded bytes for v2: see `digest_scope`).
    pub digest: Option<Digest>,
    /// Byte order of the elements.
    pub byte_order: ByteOrder,
    /// Which file holds the stored bytes: 0 for the file that was opened, `n` for the
    /// `n`-th shard of [`crate::Reader::shards`] (counting from 1). Offsets are in that file.
    pub file: u32,
    /// Which bytes `digest` covers.
    pub digest_scope: DigestScope,
    /// A digest whose algorithm this library does not compute, as the file spells it (v2
    /// allows any algorithm name); verifying it is `Unsupported`.
    pub foreign_digest: Option<Box<str>>,
    /// Where the elements lie in the decoded bytes when they are not all of them in row-major
    /// order (a deflated `.npz` entry's header before them, a Fortran-order array, a strided
    /// PyTorch tensor): reading gathers them into a row-major copy. `None` for every zTensor,
    /// `.mag` and safetensors component.
    pub arrangement: Option<Box<Arrangement>>,
}

/// Where a component's elements lie in its decoded bytes (see
/// [`ComponentInfo::arrangement`]), checked at open to stay inside them.
///
/// ```
/// # #[cfg(feature = "numpy")]
/// # fn main() -> ztensor::Result<()> {
/// let npz = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/numpy/all.npz");
/// let r = ztensor::open(npz)?;
/// let o = r.object("fortran_f32")?;                      // stored column by column
/// let a = o.components[0].arrangement.as_deref().unwrap();
/// assert_eq!((a.dims.as_slice(), a.strides.as_slice()), (&[2, 3][..], &[1, 2][..]));
/// assert_eq!(&o.read::<f32>()?[..], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]); // row-major copy
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "numpy"))]
/// # fn main() {}
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrangement {
    /// Decoded bytes before the span that holds the elements (a `.npy` header).
    pub skip: u64,
    /// Decoded bytes, after `skip`, that hold the elements.
    pub span: u64,
    /// The object's dimensions.
    pub dims: Vec<u64>,
    /// How many elements apart consecutive indices of each dimension are in the span;
    /// empty when the elements are packed in row-major order.
    pub strides: Vec<u64>,
    /// Whether the span is a whole zip record written to a stream, followed in the decoded
    /// bytes by its data descriptor (`PK\x07\x08`, the record's CRC-32, its sizes): a read
    /// that decodes the span checks that CRC-32 (a compressed DCP chunk's archive, whose
    /// records' checksums are known only there), and the archive's central directory entry
    /// of the record where the archive ends within 1 MiB after it.
    pub described: bool,
}

impl Arrangement {
    /// Whether the elements lie packed in row-major order from the start of the span: no
    /// strides, or the strides of a packed array (a dimension of size 1 may have any stride,
    /// and an array with no elements is packed).
    ///
    /// ```
    /// let a = ztensor::Arrangement {
    ///     skip: 0,
    ///     span: 24,
    ///     dims: vec![2, 3],
    ///     strides: vec![3, 1],
    ///     described: false,
    /// };
    /// assert!(a.is_packed());
    /// let t = ztensor::Arrangement { strides: vec![1, 2], ..a };
    /// assert!(!t.is_packed());
    /// ```
    pub fn is_packed(&self) -> bool {
        if self.strides.is_empty() || self.dims.contains(&0) {
            return true;
        }
        let mut step = 1u64;
        for (&n, &s) in self.dims.iter().zip(&self.strides).rev() {
            if n != 1 && s != step {
                return false;
            }
            step = step.saturating_mul(n);
        }
        self.dims.len() == self.strides.len()
    }
}

/// Which bytes a component's digest covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DigestScope {
    /// The stored bytes, compressed or not (zTensor 0.1 and 1.x).
    #[default]
    Stored,
    /// The decoded bytes (zTensor v2).
    Decoded,
}

/// One shard of a sharded zTensor v2 file: a file beside the root that holds some of its
/// parts, resolved and opened with the root.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ShardInfo {
    /// The name in the shard table (`00001-of-00002`).
    pub name: String,
    /// Where it was found: `<root stem>-<name>.zt` beside the root.
    pub path: std::path::PathBuf,
    /// Its size, as the shard table gives it and as checked at open.
    pub size: u64,
    /// The whole-file digest the table gives (checked by [`crate::Reader::verify`]), or
    /// `None` for an algorithm this library does not compute.
    pub digest: Option<Digest>,
    /// The digest as the file spells it.
    pub digest_text: String,
    /// Whether it is a data shard (a footer with no manifest).
    pub data_shard: bool,
    /// Where its own manifest lies, `(offset, length)`, for a shard that has one: a blob of the
    /// root's may no more overlap it than the root's own manifest.
    pub manifest: Option<(u64, u64)>,
}

impl ShardInfo {
    /// A file another names that holds only data (ONNX external data, an OpenVINO `.bin`, a
    /// TensorFlow data file, a Paddle variable's file, ...): no digest, no manifest.
    #[cfg_attr(
        not(any(
            feature = "onnx",
            feature = "hdf5",
            feature = "paddle",
            feature = "tensorflow",
            feature = "torch-dcp",
            feature = "openvino"
        )),
        allow(dead_code)
    )]
    pub(crate) fn data_file(name: String, path: std::path::PathBuf, size: u64) -> Self {
        Self {
            name,
            path,
            size,
            digest: None,
            digest_text: String::new(),
            data_shard: true,
            manifest: None,
        }
    }
}

/// A byte range of the file with a digest over it (v0.1 checksums cover a whole tensor entry,
/// which for the legacy sparse layout spans several components).
#[derive(Debug, Clone, PartialEq)]
pub struct RangeDigest {
    /// Start offset.
    pub offset: u64,
    /// Length.
    pub length: u64,
    /// Digest.
    pub digest: Digest,
}

/// An object's components, sorted by role; reads as a `&[ComponentInfo]` (through `Deref`).
/// The one component of a dense object is stored inline, without an allocation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Components(pub(crate) SmallVec<[ComponentInfo; 1]>);

impl Components {
    /// The components of an object that has just one.
    pub(crate) fn one(c: ComponentInfo) -> Self {
        Components(smallvec::smallvec![c])
    }
}

impl std::ops::Deref for Components {
    type Target = [ComponentInfo];

    fn deref(&self) -> &[ComponentInfo] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a Components {
    type Item = &'a ComponentInfo;
    type IntoIter = std::slice::Iter<'a, ComponentInfo>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// One object as listed by a reader.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ObjectInfo {
    /// Name.
    pub name: String,
    /// Logical shape (a slice; up to four dimensions inline).
    pub shape: Shape,
    /// Layout.
    pub format: Format,
    /// Attributes (for v0.1 files: the entry's custom fields).
    pub attributes: Attributes,
    /// Components, sorted by role (a slice; one inline, as dense objects have).
    pub components: Components,
    /// Digests that cover more than one component (v0.1).
    pub range_digests: Vec<RangeDigest>,
    /// How a v0.1 sparse entry packs its arrays into one blob (`None` for everything else).
    pub legacy_packing: Option<LegacyPacking>,
    /// Why this object cannot be decoded, for legacy entries that are listed but unreadable
    /// (an unknown v0.1 layout, a sparse entry too small for its shape). Boxed: rare, and
    /// every object pays for the field.
    pub defect: Option<Box<Defect>>,
}

impl ObjectInfo {
    /// Why `verify` and conversions pass over this object (a structured or object array:
    /// not numbers we decode), or `None` when they do not.
    pub fn skipped(&self) -> Option<&str> {
        self.defect
            .as_ref()
            .filter(|d| d.skip)
            .map(|d| d.message.as_str())
    }

    /// An object as a file lists it: no legacy parts, no defect (set those on the result).
    pub(crate) fn listed(
        name: String,
        shape: Shape,
        format: Format,
        attributes: Attributes,
        components: Components,
    ) -> Self {
        ObjectInfo {
            name,
            shape,
            format,
            attributes,
            components,
            range_digests: Vec::new(),
            legacy_packing: None,
            defect: None,
        }
    }

    /// An object the file lists but whose entry failed its checks with `e`: its name, shape
    /// and declared format, no components (none could be trusted; listings show no type and
    /// no bytes), its defect the error (component and offset kept), so the rest of the file
    /// still reads (zTensor 0.1 and 1.x entries).
    pub(crate) fn unreadable(
        name: String,
        shape: Shape,
        format: Format,
        e: &zt_container::Error,
    ) -> Self {
        let mut o = Self::listed(
            name,
            shape,
            format,
            Attributes::default(),
            Components(SmallVec::new()),
        );
        o.defect = Some(Box::new(Defect::from_error(e)));
        o
    }

    /// An object with no bytes (a 0-d `u8` range of nothing) and a defect that says why:
    /// listed so that reads and conversions say what is missing.
    #[cfg(any(feature = "torch", feature = "tflite", feature = "openvino"))]
    pub(crate) fn defective(name: String, defect: Defect) -> Self {
        let mut o = Self::raw_dense(
            name,
            Shape::new(),
            ElementType::plain(zt_formats::DType::U8),
            (0, 0),
            ByteOrder::Little,
        );
        o.defect = Some(Box::new(defect));
        o
    }

    /// An object saved in parts (TensorFlow's partitioned variables, the chunks of PyTorch's
    /// distributed checkpoints) that `tiling` says how to read: one component in the
    /// tiling's files, the CRC-32C of a single piece its digest (each piece of several is
    /// checked as it is read).
    #[cfg(any(feature = "tensorflow", feature = "torch-dcp"))]
    pub(crate) fn tiled(
        name: String,
        shape: Shape,
        element: ElementType,
        tiling: zt_formats::Tiling,
        order: ByteOrder,
    ) -> Self {
        let range = tiling.first.map_or((0, 0), |p| (p.offset, p.length));
        let mut o = Self::raw_dense(name, shape, element, range, order);
        if let Some(c) = o.components.0.first_mut() {
            c.file = tiling.first.map_or(1, |p| p.file);
            if matches!(tiling.encoding, Encoding::Raw) {
                c.digest = tiling.first.and_then(|p| p.crc32c).map(Digest::Crc32c);
            } else {
                c.decoded_len = Some(tiling.total);
                c.uncompressed_length = Some(tiling.total);
            }
            c.encoding = tiling.encoding;
        }
        o
    }

    /// A dense object of one raw `data` component in the opened file (.mag, safetensors).
    pub(crate) fn raw_dense(
        name: String,
        shape: Shape,
        element: ElementType,
        (offset, length): (u64, u64),
        byte_order: ByteOrder,
    ) -> Self {
        let data = ComponentInfo {
            role: "data".into(),
            element,
            offset,
            length,
            encoding: Encoding::Raw,
            uncompressed_length: None,
            decoded_len: Some(length),
            digest: None,
            byte_order,
            file: 0,
            digest_scope: DigestScope::Stored,
            foreign_digest: None,
            arrangement: None,
        };
        Self::listed(
            name,
            shape,
            Format::Dense,
            Attributes::new(),
            Components::one(data),
        )
    }

    /// A component by role.
    pub fn component(&self, role: &str) -> Option<&ComponentInfo> {
        self.components.iter().find(|c| c.role == role)
    }

    /// The component that carries the object's values: `data`, `values` or `packed_weight`
    /// (or the first, for unknown formats).
    pub fn main_component(&self) -> Option<&ComponentInfo> {
        ["data", "values", "packed_weight"]
            .iter()
            .find_map(|r| self.component(r))
            .or_else(|| self.components.first())
    }

    /// The element type of the object's values (see [`ObjectInfo::main_component`]).
    pub fn element_type(&self) -> Option<&ElementType> {
        self.main_component().map(|c| &c.element)
    }

    /// The element type of the object's dense form ([`crate::ObjectView::dense_form`]): dense
    /// data's own, a sparse object's value type, `f32` for quantized objects (GGUF block types
    /// that [`zt_formats::ggml::dequantize`] decodes too). `None` for formats that have no
    /// dense form.
    pub fn dense_element_type(&self) -> Option<ElementType> {
        match self.format {
            Format::Dense => self.component("data").map(|c| c.element.clone()),
            Format::QuantizedGroup => Some(ElementType::plain(zt_formats::DType::F32)),
            Format::Unknown(ref id)
                if zt_formats::ggml::GgmlType::by_layout_id(id)
                    .is_some_and(|t| t.can_dequantize()) =>
            {
                Some(ElementType::plain(zt_formats::DType::F32))
            }
            Format::SparseCsr | Format::SparseCoo => match self.legacy_packing {
                Some(p) => Some(ElementType::plain(p.values)),
                None => self.component("values").map(|c| c.element.clone()),
            },
            _ => None,
        }
    }

    /// Number of logical elements the shape holds.
    pub fn element_count(&self) -> u64 {
        // Checked when the file was opened; saturate rather than trust that here.
        self.shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .unwrap_or(u64::MAX)
    }
}

/// The one-blob sparse layouts of zTensor v0.1, as the 0.1.x writer produced them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LegacyPacking {
    /// CSR or COO.
    pub layout: LegacyLayout,
    /// The values' storage type.
    pub values: zt_formats::DType,
    /// Byte order of every multi-byte number in the blob.
    pub byte_order: ByteOrder,
}

/// How a v0.1 sparse blob is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LegacyLayout {
    /// `[indptr: u64 x (rows+1)][indices: u64 x nnz][values x nnz]`, nnz = last indptr entry.
    Csr,
    /// nnz records of `[coordinates: u64 x ndim][value]`, back to back.
    Coo,
}

/// Why a listed object cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defect {
    /// `Unsupported` (an unknown layout or encoding) or `InvalidFile` (sizes that cannot fit).
    pub kind: zt_container::ErrorKind,
    /// What is wrong.
    pub message: String,
    /// The object holds something other than numbers we decode (a structured or object
    /// array, text): nothing is wrong with the file. `verify` and conversions pass over it
    /// with a note instead of failing.
    pub skip: bool,
}

impl Defect {
    pub(crate) fn unsupported(message: impl Into<String>) -> Self {
        Defect {
            kind: zt_container::ErrorKind::Unsupported,
            message: message.into(),
            skip: false,
        }
    }

    /// An object that is not numbers we decode: listed as what it is, skipped.
    #[cfg(any(
        feature = "numpy",
        feature = "onnx",
        feature = "hdf5",
        feature = "tensorflow",
        feature = "tflite",
        feature = "openvino"
    ))]
    pub(crate) fn not_numbers(message: impl Into<String>) -> Self {
        Defect {
            skip: true,
            ..Defect::unsupported(message)
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Defect {
            kind: zt_container::ErrorKind::InvalidFile,
            message: message.into(),
            skip: false,
        }
    }

    /// An object that fails to read with `e` (a damaged header, an unknown encoding), kept as
    /// a defect so the rest of the file still opens; the message keeps `e`'s component and
    /// offset (the object is named when the defect is read).
    pub(crate) fn from_error(e: &zt_container::Error) -> Self {
        let message = match e.component() {
            Some(role) => format!("component {role:?}: {}", e.located_message()),
            None => e.located_message(),
        };
        Defect {
            kind: e.kind(),
            message,
            skip: false,
        }
    }

    /// The error reading the object `name` gives: named by the object alone, since what
    /// is listed for an unreadable object stands in for parts the file failed to give (the
    /// message names the failing component when there is one).
    pub(crate) fn error_in(&self, name: &str) -> zt_container::Error {
        self.to_error().in_object(name)
    }

    /// The error reading the object gives.
    pub fn to_error(&self) -> zt_container::Error {
        zt_container::Error::new(self.kind, self.message.clone())
    }
}

impl std::fmt::Display for Defect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
