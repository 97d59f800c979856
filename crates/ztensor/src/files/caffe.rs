//! Caffe models (`.caffemodel`) in the facade's object model: every layer's blobs (weights,
//! biases, batch-norm statistics), read in place with the protobuf walker of
//! [`crate::files::proto`].
//!
//! ```text
//!  NetParameter      1 name   100 layer: LayerParameter   2 layers: V1LayerParameter (old)
//!  LayerParameter    1 name   2 type (text)   7 blobs: BlobProto
//!  V1LayerParameter  4 name   5 type (enum)   6 blobs   1 layer: V0LayerParameter (older)
//!  V0LayerParameter  1 name   2 type (text)   50 blobs
//!  BlobProto         7 shape: BlobShape (1 dim, int64)   5 data (float)   8 double_data
//!                    6 diff (float)   9 double_diff
//!                    1 num   2 channels   3 height   4 width (the 4-D shape before `shape`)
//! ```
//!
//! - A blob is named `<layer>.<index>` (`conv1.0` the weights, `conv1.1` the bias), as
//!   `net.params[layer][index]` names it in pycaffe; a layer without a name is `layer<n>`, a
//!   name given twice gets `#<n>`. Its layer's type is the attribute `caffe.type`.
//! - The shape is Caffe's (`Blob::FromProto`): `num, channels, height, width` when the blob
//!   gives any of them, else `shape`. The values are `double_data` when it holds any (f64),
//!   else `data` (f32), and must be exactly the shape's count, as Caffe requires. Protobuf
//!   writes both fields packed: the run's bytes are the little-endian values, a range of the
//!   file (zero copy). What protobuf also reads is read too, with a copy: several packed runs
//!   (one after the other, [`Encoding::Pieces`]), and values written unpacked (each its own
//!   field), runs and unpacked values mixed, other fields between them, gathered from the
//!   blob as protobuf gathers them ([`Encoding::ProtoTagged`]).
//! - A blob that holds gradients (`diff`, or `double_diff` when it holds any: a solver's
//!   snapshot with `snapshot_diff`) has them as a second object `<layer>.<index>.diff`, as
//!   pycaffe's `net.params[layer][index].diff`, of the blob's shape and read the same way;
//!   their count must be the shape's too, as Caffe requires.
//! - Every length is checked by the walker; what the listing takes is charged to
//!   [`Limits::listing_budget`] first.

use foldhash::fast::RandomState;
use hashbrown::HashSet;
use zt_container::internal::MemoryBudget;
use zt_container::{Error, Result, Source};
use zt_formats::{DType, ElementType, Encoding, Piece};
use zt_manifest::{Attributes, Shape, Value as Attr};

use crate::files::proto::{self, Field, Fields, Span, Value};
use crate::listing::{Limits, Listing};
use crate::model::{FileVersion, ObjectInfo};
use crate::ByteOrder;

/// `V1LayerParameter.LayerType`, by number, as caffe.proto spells it.
#[rustfmt::skip]
const V1_TYPES: [&str; 40] = [
    "NONE", "ACCURACY", "BNLL", "CONCAT", "CONVOLUTION", "DATA", "DROPOUT", "EUCLIDEAN_LOSS",
    "FLATTEN", "HDF5_DATA", "HDF5_OUTPUT", "IM2COL", "IMAGE_DATA", "INFOGAIN_LOSS",
    "INNER_PRODUCT", "LRN", "MULTINOMIAL_LOGISTIC_LOSS", "POOLING", "RELU", "SIGMOID",
    "SOFTMAX", "SOFTMAX_LOSS", "SPLIT", "TANH", "WINDOW_DATA", "ELTWISE", "POWER",
    "SIGMOID_CROSS_ENTROPY_LOSS", "HINGE_LOSS", "MEMORY_DATA", "ARGMAX", "THRESHOLD",
    "DUMMY_DATA", "SLICE", "MVN", "ABSVAL", "SILENCE", "CONTRASTIVE_LOSS", "EXP",
    "DECONVOLUTION",
];

/// The longest layer name or type read.
const MAX_TEXT: u64 = 1 << 20;

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("invalid Caffe model: {what}"))
}

/// Where a blob's values lie, as protobuf may write a repeated number: one packed run (what
/// protobuf writes for Caffe's `[packed = true]` fields), several packed runs (protobuf
/// concatenates them), or any other mix of runs, values written unpacked (one field each)
/// and other fields between them.
enum Values {
    /// One run: `(offset, length)`, a range of the file.
    Run((u64, u64)),
    /// Several runs, read one after the other.
    Runs(Vec<Piece>),
    /// The part of the blob from the field's first occurrence to the end of its last,
    /// `(offset, length)`, gathered as protobuf reads it ([`Encoding::ProtoTagged`]), and
    /// the bytes of values it holds.
    Gathered((u64, u64), u64),
}

impl Values {
    /// The values of a blob's `fields` (all of one field number, values of `width` bytes);
    /// `empty_at` is where an empty blob points.
    fn of(fields: &[Field], width: u64, empty_at: u64) -> Values {
        let packed = fields
            .iter()
            .filter(|f| matches!(f.value, Value::Bytes(_)))
            .count();
        match fields {
            [] => Values::Run((empty_at, 0)),
            [Field {
                value: Value::Bytes(run),
                ..
            }] => Values::Run((run.start, run.len())),
            _ if packed == fields.len() => Values::Runs(
                fields
                    .iter()
                    .filter_map(|f| match f.value {
                        Value::Bytes(run) => Some(Piece {
                            file: 0,
                            offset: run.start,
                            length: run.len(),
                            crc32c: None,
                        }),
                        _ => None,
                    })
                    .collect(),
            ),
            [first, .., last] => {
                let held = fields.iter().fold(0u64, |n, f| {
                    n.saturating_add(match f.value {
                        Value::Bytes(run) => run.len(),
                        _ => width,
                    })
                });
                Values::Gathered((first.at, last.end() - first.at), held)
            }
            [one] => Values::Gathered((one.at, one.end() - one.at), width),
        }
    }

    /// How many bytes of values they hold.
    fn bytes(&self) -> u64 {
        match self {
            Values::Run((_, len)) => *len,
            Values::Runs(pieces) => pieces.iter().map(|p| p.length).sum(),
            Values::Gathered(_, held) => *held,
        }
    }
}

/// `object` with its one component under `encoding`, decoding to `decoded` bytes.
fn decoded(mut object: ObjectInfo, encoding: Encoding, len: u64) -> ObjectInfo {
    if let Some(c) = object.components.0.first_mut() {
        c.encoding = encoding;
        c.decoded_len = Some(len);
        c.uncompressed_length = Some(len);
    }
    object
}

/// Where a layer's fields are, by layout.
struct LayerFields {
    name: u64,
    kind: u64,
    blobs: u64,
}

const LAYER: LayerFields = LayerFields {
    name: 1,
    kind: 2,
    blobs: 7,
};
const V1_LAYER: LayerFields = LayerFields {
    name: 4,
    kind: 5,
    blobs: 6,
};
const V0_LAYER: LayerFields = LayerFields {
    name: 1,
    kind: 2,
    blobs: 50,
};

/// The listing being made.
struct Net<'s> {
    source: &'s Source,
    limits: &'s Limits,
    budget: MemoryBudget,
    taken: HashSet<String, RandomState>,
    objects: Vec<ObjectInfo>,
    layers: usize,
}

/// Lists a Caffe model.
pub(crate) fn list(source: &Source, limits: &Limits) -> Result<Listing> {
    let mut net = Net {
        source,
        limits,
        budget: MemoryBudget::new(
            limits.listing_budget(source.len()),
            "listing the Caffe model",
        ),
        taken: HashSet::default(),
        objects: Vec::new(),
        layers: 0,
    };
    let mut attributes = Attributes::new();
    let whole = Span {
        start: 0,
        end: source.len(),
    };
    for field in Fields::of(source, whole)? {
        let field = field?;
        match (field.number, field.value) {
            (1, Value::Bytes(s)) => {
                let name = proto::text(source, s, MAX_TEXT, "the net's name")?;
                net.budget.charge(name.len() as u64)?;
                attributes.insert("caffe.name".into(), Attr::Text(name));
            }
            (100, Value::Bytes(layer)) => net.layer(layer, &LAYER)?,
            (2, Value::Bytes(layer)) => net.v1_layer(layer)?,
            _ => {}
        }
    }
    Ok(Listing::of_unique(
        FileVersion::Caffe,
        attributes,
        net.objects,
    ))
}

impl Net<'_> {
    /// A V1 layer: its own blobs, and those of the V0 layer it may wrap.
    fn v1_layer(&mut self, span: Span) -> Result<()> {
        for field in Fields::of(self.source, span)? {
            let field = field?;
            if let (1, Value::Bytes(inner)) = (field.number, field.value) {
                self.layer(inner, &V0_LAYER)?;
            }
        }
        self.layer(span, &V1_LAYER)
    }

    /// One layer's blobs as objects.
    fn layer(&mut self, span: Span, at: &LayerFields) -> Result<()> {
        let mut name = None;
        let mut kind = None;
        let mut blobs = Vec::new();
        for field in Fields::of(self.source, span)? {
            let field = field?;
            match (field.number, field.value) {
                (n, Value::Bytes(s)) if n == at.name => {
                    name = Some(proto::text(self.source, s, MAX_TEXT, "a layer's name")?)
                }
                (n, Value::Bytes(s)) if n == at.kind => {
                    kind = Some(proto::text(self.source, s, MAX_TEXT, "a layer's type")?)
                }
                (n, Value::Varint(v, _)) if n == at.kind => {
                    let named = usize::try_from(v).ok().and_then(|v| V1_TYPES.get(v));
                    kind = Some(named.map_or_else(|| v.to_string(), |t| (*t).to_owned()));
                }
                (n, Value::Bytes(s)) if n == at.blobs => {
                    self.budget.charge(std::mem::size_of::<Span>() as u64)?;
                    blobs.push(s)
                }
                _ => {}
            }
        }
        let index = self.layers;
        self.layers += 1;
        if blobs.is_empty() {
            return Ok(());
        }
        let layer = match name {
            Some(n) if !n.is_empty() => n,
            _ => format!("layer{index}"),
        };
        for (i, blob) in blobs.into_iter().enumerate() {
            let full = format!("{layer}.{i}");
            let (values, diff) = self.blob(blob).map_err(|e| e.in_object(&full))?;
            let diff_name = format!("{full}.diff");
            self.add(values, full, index, kind.as_ref())?;
            if let Some(diff) = diff {
                self.add(diff, diff_name, index, kind.as_ref())?;
            }
        }
        Ok(())
    }

    /// Lists `o` as `name` (with `#<layer index>` when the name is taken), of layer type
    /// `kind`.
    fn add(
        &mut self,
        mut o: ObjectInfo,
        mut name: String,
        layer_index: usize,
        kind: Option<&String>,
    ) -> Result<()> {
        if self.taken.contains(&name) {
            name = format!("{name}#{layer_index}");
        }
        self.budget.charge(Limits::listing_cost(&name))?;
        if let Some(k) = kind {
            o.attributes
                .insert("caffe.type".into(), Attr::Text(k.clone()));
        }
        self.taken.insert(name.clone());
        o.name = name;
        self.objects
            .try_reserve(1)
            .map_err(|_| Error::out_of_memory("listing the Caffe model"))?;
        self.objects.push(o);
        Ok(())
    }

    /// One blob: its shape as Caffe takes it, and its values and, when it holds any, its
    /// gradients, each as a range of the file.
    fn blob(&mut self, span: Span) -> Result<(ObjectInfo, Option<ObjectInfo>)> {
        let max_rank = self.limits.decode.max_rank;
        let mut legacy = [None::<u64>; 4];
        let mut dims: Option<Vec<u64>> = None;
        let (mut floats, mut doubles) = (Vec::new(), Vec::new());
        let (mut diffs, mut double_diffs) = (Vec::new(), Vec::new());
        for field in Fields::of(self.source, span)? {
            let field = field?;
            match (field.number, field.value) {
                (n @ 1..=4, Value::Varint(v, _)) => {
                    let v = i32::try_from(v as i64)
                        .ok()
                        .and_then(|v| u64::try_from(v).ok())
                        .ok_or_else(|| bad(format!("a legacy dimension of {}", v as i64)))?;
                    legacy[n as usize - 1] = Some(v);
                }
                (7, Value::Bytes(shape)) => dims = Some(self.shape(shape, max_rank)?),
                // A value of another wire type is an unknown field to protobuf: passed over.
                (5, Value::Bytes(_) | Value::Fixed32(_)) => {
                    self.budget.charge(std::mem::size_of::<Field>() as u64)?;
                    floats.push(field)
                }
                (8, Value::Bytes(_) | Value::Fixed64(_)) => {
                    self.budget.charge(std::mem::size_of::<Field>() as u64)?;
                    doubles.push(field)
                }
                (6, Value::Bytes(_) | Value::Fixed32(_)) => {
                    self.budget.charge(std::mem::size_of::<Field>() as u64)?;
                    diffs.push(field)
                }
                (9, Value::Bytes(_) | Value::Fixed64(_)) => {
                    self.budget.charge(std::mem::size_of::<Field>() as u64)?;
                    double_diffs.push(field)
                }
                _ => {}
            }
        }
        let dims = if legacy.iter().any(Option::is_some) {
            legacy.iter().map(|d| d.unwrap_or(0)).collect()
        } else {
            dims.unwrap_or_default()
        };
        let count = dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .ok_or_else(|| bad(format!("shape {dims:?} overflows")))?;
        let shape: Shape = dims.iter().copied().collect();
        // Caffe's `Blob::FromProto`: `double_data` when it holds any value, else `data`;
        // `double_diff` when it holds any, else `diff` when it holds any, else no gradients.
        // (A value of its own, or a run of any bytes.)
        let holds_any = |runs: &[Field]| {
            runs.iter()
                .any(|f| !matches!(f.value, Value::Bytes(run) if run.len() == 0))
        };
        let data = if holds_any(&doubles) {
            values_of(&doubles, (DType::F64, "values"), &shape, count, span)?
        } else {
            values_of(&floats, (DType::F32, "values"), &shape, count, span)?
        };
        let diff = if holds_any(&double_diffs) {
            Some(values_of(
                &double_diffs,
                (DType::F64, "gradients"),
                &shape,
                count,
                span,
            ))
        } else if holds_any(&diffs) {
            Some(values_of(
                &diffs,
                (DType::F32, "gradients"),
                &shape,
                count,
                span,
            ))
        } else {
            None
        };
        Ok((data, diff.transpose()?))
    }

    /// A `BlobShape`: its `dim`s, packed or not, each non-negative.
    fn shape(&mut self, span: Span, max_rank: usize) -> Result<Vec<u64>> {
        let mut dims = Vec::new();
        let mut push = |v: u64, at: u64| {
            if dims.len() >= max_rank {
                return Err(Error::rank_over_cap(None, max_rank).at(at));
            }
            let d = v as i64;
            dims.push(u64::try_from(d).map_err(|_| bad(format!("a dimension of {d}")).at(at))?);
            Ok(())
        };
        for field in Fields::of(self.source, span)? {
            let field = field?;
            match (field.number, field.value) {
                (1, Value::Varint(v, _)) => push(v, field.at)?,
                (1, Value::Bytes(run)) => {
                    proto::each_varint(self.source, run, max_rank, "a blob's shape", |v| {
                        push(v, run.start)
                    })?;
                }
                _ => {}
            }
        }
        Ok(dims)
    }
}

/// An object of a blob's `shape` (`count` elements) over the values of `runs` (fields of one
/// number, values of `dtype`: `what`, values or gradients) in the blob at `span`: one packed
/// run in place, several packed runs as pieces, any other mix gathered as protobuf reads it.
/// Refused, as Caffe refuses it, when they are not whole values or not exactly the shape's
/// count.
fn values_of(
    runs: &[Field],
    (dtype, what): (DType, &str),
    shape: &Shape,
    count: u64,
    span: Span,
) -> Result<ObjectInfo> {
    let width = dtype.size() as u64;
    let values = Values::of(runs, width, span.start);
    // Protobuf refuses a packed run of fixed-width values that is not whole values.
    let ragged = runs.iter().find_map(|f| match f.value {
        Value::Bytes(run) if run.len() % width != 0 => Some(run),
        _ => None,
    });
    if let Some(run) = ragged {
        return Err(bad(format!(
            "a run of {} bytes of {} values is not whole values",
            run.len(),
            dtype.name()
        ))
        .at(run.start));
    }
    let held = values.bytes();
    if held != count.saturating_mul(width) || count.checked_mul(width).is_none() {
        return Err(bad(format!(
            "a blob of shape {:?} needs {count} {what}; it holds {held} bytes of {}",
            shape.as_slice(),
            dtype.name()
        ))
        .at(runs.first().map_or(span.start, |f| f.at)));
    }
    let element = ElementType::plain(dtype);
    let order = ByteOrder::Little;
    Ok(match values {
        Values::Run(data) => {
            ObjectInfo::raw_dense(String::new(), shape.clone(), element, data, order)
        }
        Values::Runs(pieces) => {
            let (first, last) = (pieces.first(), pieces.last());
            let start = first.map_or(0, |p| p.offset);
            let end = last.map_or(start, |p| p.offset + p.length);
            let o = ObjectInfo::raw_dense(
                String::new(),
                shape.clone(),
                element,
                (start, end - start),
                order,
            );
            decoded(o, Encoding::Pieces(Box::new(pieces)), held)
        }
        Values::Gathered(data, _) => {
            let o = ObjectInfo::raw_dense(String::new(), shape.clone(), element, data, order);
            let tagged = Encoding::ProtoTagged {
                width: width as u8,
                varint: false,
                boolean: false,
            };
            decoded(o, tagged, held)
        }
    })
}
