//! The shape of `onnx.proto` (ONNX 1.20's messages, every field), as tables for
//! [`proto::check`](super::proto::check): which field numbers hold which wire type, and which
//! are messages to look into.
//!
//! onnx's own loader (protobuf's C parser) checks the wire format of every message before it
//! hands a model over; the listing walk reads only the messages that hold tensors. The check
//! walks these tables so that a model whose graph inputs, node attributes or type annotations
//! are damaged is refused as `onnx.load` refuses it, and not read past.
//!
//! ```text
//!  ModelProto ── graph ─▶ GraphProto ── node ─▶ NodeProto ── attribute ─▶ AttributeProto
//!      │                    │  ├ initializer ─▶ TensorProto ◀── t, tensors ──┤
//!      │                    │  └ input, output, value_info ─▶ ValueInfoProto ─▶ TypeProto
//!      └ training_info, functions, configuration ...        g, graphs ─▶ GraphProto (again)
//! ```

use crate::files::proto::{Kind, Message, Scalar};

const fn message(name: &'static str, fields: &'static [(u64, &'static str, Kind)]) -> Message {
    Message { name, fields }
}

use Kind::{Message as M, Repeated as R, Single as S, Text as T};
use Scalar::{Fixed32, Fixed64, Varint};

/// `ModelProto`, the file.
pub(crate) static MODEL: Message = message(
    "ModelProto",
    &[
        (1, "ir_version", S),
        (2, "producer_name", T),
        (3, "producer_version", T),
        (4, "domain", T),
        (5, "model_version", S),
        (6, "doc_string", T),
        (7, "graph", M(&GRAPH)),
        (8, "opset_import", M(&OPERATOR_SET)),
        (14, "metadata_props", M(&STRING_PAIR)),
        (20, "training_info", M(&TRAINING_INFO)),
        (25, "functions", M(&FUNCTION)),
        (26, "configuration", M(&DEVICE_CONFIGURATION)),
    ],
);

static OPERATOR_SET: Message =
    message("OperatorSetIdProto", &[(1, "domain", T), (2, "version", S)]);

static STRING_PAIR: Message = message("StringStringEntryProto", &[(1, "key", T), (2, "value", T)]);

static GRAPH: Message = message(
    "GraphProto",
    &[
        (1, "node", M(&NODE)),
        (2, "name", T),
        (5, "initializer", M(&TENSOR)),
        (15, "sparse_initializer", M(&SPARSE_TENSOR)),
        (10, "doc_string", T),
        (11, "input", M(&VALUE_INFO)),
        (12, "output", M(&VALUE_INFO)),
        (13, "value_info", M(&VALUE_INFO)),
        (14, "quantization_annotation", M(&TENSOR_ANNOTATION)),
        (16, "metadata_props", M(&STRING_PAIR)),
    ],
);

static TRAINING_INFO: Message = message(
    "TrainingInfoProto",
    &[
        (1, "initialization", M(&GRAPH)),
        (2, "algorithm", M(&GRAPH)),
        (3, "initialization_binding", M(&STRING_PAIR)),
        (4, "update_binding", M(&STRING_PAIR)),
    ],
);

static FUNCTION: Message = message(
    "FunctionProto",
    &[
        (1, "name", T),
        (4, "input", T),
        (5, "output", T),
        (6, "attribute", T),
        (11, "attribute_proto", M(&ATTRIBUTE)),
        (7, "node", M(&NODE)),
        (8, "doc_string", T),
        (9, "opset_import", M(&OPERATOR_SET)),
        (10, "domain", T),
        (13, "overload", T),
        (12, "value_info", M(&VALUE_INFO)),
        (14, "metadata_props", M(&STRING_PAIR)),
    ],
);

static DEVICE_CONFIGURATION: Message = message(
    "DeviceConfigurationProto",
    &[(1, "name", T), (2, "num_devices", S), (3, "device", T)],
);

static NODE: Message = message(
    "NodeProto",
    &[
        (1, "input", T),
        (2, "output", T),
        (3, "name", T),
        (4, "op_type", T),
        (7, "domain", T),
        (8, "overload", T),
        (5, "attribute", M(&ATTRIBUTE)),
        (6, "doc_string", T),
        (9, "metadata_props", M(&STRING_PAIR)),
        (10, "device_configurations", M(&NODE_DEVICE_CONFIGURATION)),
    ],
);

static TENSOR: Message = message(
    "TensorProto",
    &[
        (1, "dims", R(Varint)),
        (2, "data_type", S),
        (3, "segment", M(&SEGMENT)),
        (4, "float_data", R(Fixed32)),
        (5, "int32_data", R(Varint)),
        (6, "string_data", T),
        (7, "int64_data", R(Varint)),
        (8, "name", T),
        (12, "doc_string", T),
        (9, "raw_data", T),
        (13, "external_data", M(&STRING_PAIR)),
        (14, "data_location", S),
        (10, "double_data", R(Fixed64)),
        (11, "uint64_data", R(Varint)),
        (16, "metadata_props", M(&STRING_PAIR)),
    ],
);

static SEGMENT: Message = message("TensorProto.Segment", &[(1, "begin", S), (2, "end", S)]);

static SPARSE_TENSOR: Message = message(
    "SparseTensorProto",
    &[
        (1, "values", M(&TENSOR)),
        (2, "indices", M(&TENSOR)),
        (3, "dims", R(Varint)),
    ],
);

static VALUE_INFO: Message = message(
    "ValueInfoProto",
    &[
        (1, "name", T),
        (2, "type", M(&TYPE)),
        (3, "doc_string", T),
        (4, "metadata_props", M(&STRING_PAIR)),
    ],
);

static TENSOR_ANNOTATION: Message = message(
    "TensorAnnotation",
    &[
        (1, "tensor_name", T),
        (2, "quant_parameter_tensor_names", M(&STRING_PAIR)),
    ],
);

static ATTRIBUTE: Message = message(
    "AttributeProto",
    &[
        (1, "name", T),
        (21, "ref_attr_name", T),
        (13, "doc_string", T),
        (20, "type", S),
        (2, "f", S),
        (3, "i", S),
        (4, "s", T),
        (5, "t", M(&TENSOR)),
        (6, "g", M(&GRAPH)),
        (22, "sparse_tensor", M(&SPARSE_TENSOR)),
        (14, "tp", M(&TYPE)),
        (7, "floats", R(Fixed32)),
        (8, "ints", R(Varint)),
        (9, "strings", T),
        (10, "tensors", M(&TENSOR)),
        (11, "graphs", M(&GRAPH)),
        (23, "sparse_tensors", M(&SPARSE_TENSOR)),
        (15, "type_protos", M(&TYPE)),
    ],
);

static NODE_DEVICE_CONFIGURATION: Message = message(
    "NodeDeviceConfigurationProto",
    &[
        (1, "configuration_id", T),
        (2, "sharding_spec", M(&SHARDING_SPEC)),
        (3, "pipeline_stage", S),
    ],
);

static TYPE: Message = message(
    "TypeProto",
    &[
        (1, "tensor_type", M(&TYPE_TENSOR)),
        (4, "sequence_type", M(&TYPE_ELEMENT)),
        (5, "map_type", M(&TYPE_MAP)),
        (9, "optional_type", M(&TYPE_ELEMENT)),
        (8, "sparse_tensor_type", M(&TYPE_TENSOR)),
        (7, "opaque_type", M(&TYPE_OPAQUE)),
        (6, "denotation", T),
    ],
);

/// `TypeProto.Tensor` and `TypeProto.SparseTensor`: the same two fields.
static TYPE_TENSOR: Message = message(
    "TypeProto.Tensor",
    &[(1, "elem_type", S), (2, "shape", M(&TENSOR_SHAPE))],
);

/// `TypeProto.Sequence` and `TypeProto.Optional`: one element type.
static TYPE_ELEMENT: Message = message("TypeProto.Sequence", &[(1, "elem_type", M(&TYPE))]);

static TYPE_MAP: Message = message(
    "TypeProto.Map",
    &[(1, "key_type", S), (2, "value_type", M(&TYPE))],
);

static TYPE_OPAQUE: Message = message("TypeProto.Opaque", &[(1, "domain", T), (2, "name", T)]);

static SHARDING_SPEC: Message = message(
    "ShardingSpecProto",
    &[
        (1, "tensor_name", T),
        (2, "device", R(Varint)),
        (3, "index_to_device_group_map", M(&INT_LIST_PAIR)),
        (4, "sharded_dim", M(&SHARDED_DIM)),
    ],
);

static INT_LIST_PAIR: Message = message(
    "IntIntListEntryProto",
    &[(1, "key", S), (2, "value", R(Varint))],
);

static SHARDED_DIM: Message = message(
    "ShardedDimProto",
    &[
        (1, "axis", S),
        (2, "simple_sharding", M(&SIMPLE_SHARDED_DIM)),
    ],
);

static SIMPLE_SHARDED_DIM: Message = message(
    "SimpleShardedDimProto",
    &[
        (1, "dim_value", S),
        (2, "dim_param", T),
        (3, "num_shards", S),
    ],
);

static TENSOR_SHAPE: Message = message("TensorShapeProto", &[(1, "dim", M(&DIMENSION))]);

static DIMENSION: Message = message(
    "TensorShapeProto.Dimension",
    &[
        (1, "dim_value", S),
        (2, "dim_param", T),
        (3, "denotation", T),
    ],
);
