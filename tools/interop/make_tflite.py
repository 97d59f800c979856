"""Writes TensorFlow Lite models with TensorFlow's own converter and records what LiteRT's
interpreter (`tf.lite.Interpreter`) reads from each constant tensor in
fixtures/interop/tflite/expected.json: per file, per tensor (by the name ztensor gives it),
its shape, our element type name, its bytes in hex and its quantization parameters.

- dense.tflite: a small Keras model (Conv2D, Dense, BatchNormalization folded in),
  float32;
- dynamic_int8.tflite: the same with dynamic-range quantization (int8 weights, per-channel
  scales);
- fp16.tflite: the same with float16 weights;
- dtypes.tflite: a tf.function whose constants are of every type the converter keeps
  (int8, int16, int32, int64, uint8, bool, float64, complex64);
- subgraphs.tflite: a tf.function with a while loop (a second and third subgraph, whose
  constants are named `<subgraph>/<name>`);
- offsets.tflite: the dense model with its buffers after the FlatBuffer, addressed by
  offset and size, as the converter writes models over 2 GiB;
- sparse.tflite, sparse_int8.tflite: a Dense layer with a mostly-zero kernel converted
  with sparsity on (float32; int8): the kernel stored compressed (rows dense, columns CSR),
  its expected values what LiteRT's DENSIFY op makes of it. (The converter chose no blocks
  for either; blocked levels are tested on tables built by hand in zt-formats.)

Run in a throwaway environment:

    python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install "tensorflow-cpu==2.19.*"
    cd tools/interop && /tmp/tfenv/bin/python make_tflite.py ../../fixtures/interop/tflite
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import tensorflow as tf
from tensorflow.lite.python import schema_py_generated as schema

from dtype_names import OURS


def keras_model():
    tf.keras.utils.set_random_seed(5)
    inputs = tf.keras.Input((8, 8, 3))
    x = tf.keras.layers.Conv2D(4, 3, name="conv")(inputs)
    x = tf.keras.layers.BatchNormalization(name="norm")(x)
    x = tf.keras.layers.Flatten()(x)
    x = tf.keras.layers.Dense(16, activation="relu", name="hidden")(x)
    outputs = tf.keras.layers.Dense(5, name="head")(x)
    return tf.keras.Model(inputs, outputs)


def convert_keras(model, **options):
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    for key, value in options.items():
        setattr(converter, key, value)
    return converter.convert()


def dtypes_model():
    consts = {
        "i8": tf.constant([-3, 4, 5], tf.int8),
        "i16": tf.constant([-300, 301, 302], tf.int16),
        "i32": tf.constant([[7, -8, 9], [1, 2, 3]], tf.int32),
        "i64": tf.constant([1 << 40, -2, 3], tf.int64),
        "u8": tf.constant([0, 128, 255], tf.uint8),
        "flags": tf.constant([True, False, True]),
        "f64": tf.constant([0.5, -1.25, 3.0], tf.float64),
        "c64": tf.constant([1 + 2j, 3 - 4j, 0.5j], tf.complex64),
    }

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def f(x):
        out = x
        out += tf.cast(tf.cast(x, tf.int8) + consts["i8"], tf.float32)
        out += tf.cast(tf.cast(x, tf.int16) * consts["i16"], tf.float32)
        out += tf.cast(tf.reduce_sum(tf.cast(x, tf.int32) * consts["i32"], 0), tf.float32)
        out += tf.cast(tf.cast(x, tf.int64) + consts["i64"], tf.float32)
        out += tf.cast(tf.cast(x, tf.uint8) + consts["u8"], tf.float32)
        out += tf.cast(tf.logical_and(x > 0, consts["flags"]), tf.float32)
        out += tf.cast(tf.cast(x, tf.float64) * consts["f64"], tf.float32)
        out += tf.math.real(tf.cast(x, tf.complex64) * consts["c64"])
        return out

    converter = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS,
        tf.lite.OpsSet.SELECT_TF_OPS,
    ]
    return converter.convert()


def loop_model():
    weights = tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4) / 10)

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def f(x):
        i = tf.constant(0)
        def body(i, x):
            return i + 1, tf.tanh(tf.linalg.matvec(weights, x, transpose_a=True)[:3] + 0.5)
        _, y = tf.while_loop(lambda i, x: i < 4, body, [i, x])
        return y

    converter = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    return converter.convert()


def sparse_model(int8):
    """A Dense layer whose kernel is mostly zeros, converted with sparsity on: its weights
    stored compressed (rows dense, columns CSR), float32 or, with `int8`, quantized."""
    tf.keras.utils.set_random_seed(9)
    inputs = tf.keras.Input((32,))
    layer = tf.keras.layers.Dense(16, name="pruned")
    outputs = layer(inputs)
    model = tf.keras.Model(inputs, outputs)
    kernel = np.random.default_rng(3).normal(size=(32, 16)).astype(np.float32)
    kernel[np.random.default_rng(4).random((32, 16)) < 0.8] = 0  # 80% zeros
    layer.set_weights([kernel, np.linspace(-1, 1, 16).astype(np.float32)])
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
    if int8:
        converter.optimizations.append(tf.lite.Optimize.DEFAULT)
        data = np.random.default_rng(6).normal(size=(8, 32)).astype(np.float32)
        converter.representative_dataset = lambda: ([row[None]] for row in data)
    return converter.convert()


def tensors_by_our_names(content):
    """(our name, subgraph index, tensor index) of every tensor whose buffer holds bytes."""
    model = schema.Model.GetRootAs(content, 0)
    out = []
    taken = set()
    for g in range(model.SubgraphsLength()):
        sub = model.Subgraphs(g)
        prefix = ""
        if g > 0:
            name = (sub.Name() or b"").decode()
            prefix = f"{name or g}/"
        for i in range(sub.TensorsLength()):
            t = sub.Tensors(i)
            b = model.Buffers(t.Buffer())
            has = t.Buffer() != 0 and (b.DataLength() > 0 or (b.Offset() > 1 and b.Size() > 0))
            if not has:
                continue
            name = prefix + ((t.Name() or b"").decode() or f"tensor_{i}")
            if name in taken:
                name = f"{name}#{i}"
            taken.add(name)
            out.append((name, g, i))
    return out


def densified(path, content):
    """The dense array LiteRT's DENSIFY op makes of each sparse constant (the model run once
    on zeros, without the delegate that would take the op over), by the sparse tensor's
    index in subgraph 0."""
    model = schema.Model.GetRootAs(content, 0)
    sub = model.Subgraphs(0)
    interpreter = tf.lite.Interpreter(
        model_path=path,
        experimental_preserve_all_tensors=True,
        experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    interpreter.allocate_tensors()
    for d in interpreter.get_input_details():
        interpreter.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    interpreter.invoke()
    out = {}
    for k in range(sub.OperatorsLength()):
        op = sub.Operators(k)
        code = model.OperatorCodes(op.OpcodeIndex())
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == schema.BuiltinOperator.DENSIFY:
            out[op.Inputs(0)] = np.array(interpreter.get_tensor(op.Outputs(0)))
    return out


def read_back(path):
    """What LiteRT's interpreter holds in each constant tensor (a sparse one as its DENSIFY
    op makes it dense)."""
    content = open(path, "rb").read()
    model = schema.Model.GetRootAs(content, 0)
    dense = {}
    if any(
        model.Subgraphs(0).Tensors(i).Sparsity() is not None
        for i in range(model.Subgraphs(0).TensorsLength())
    ):
        dense = densified(path, content)
    # Constant tensors are readable before any allocation (which a model of TensorFlow ops,
    # dtypes.tflite, would need the Flex delegate for).
    interpreter = tf.lite.Interpreter(model_path=path)
    tensors = {}
    for name, g, i in tensors_by_our_names(content):
        if g == 0 and i in dense:
            value = dense[i]
        else:
            value = np.array(interpreter.get_tensor(i, subgraph_index=g))
        entry = {
            "shape": list(value.shape),
            "type": OURS[value.dtype.name],
            "hex": np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes().hex(),
        }
        if g == 0:
            q = interpreter._get_tensor_details(i, 0)["quantization_parameters"]
            if len(q["scales"]):
                entry["scale"] = [float(s) for s in q["scales"]]
                entry["zero_point"] = [int(z) for z in q["zero_points"]]
                entry["quantized_dimension"] = int(q["quantized_dimension"])
        tensors[name] = entry
    return tensors


def main(out):
    os.makedirs(out, exist_ok=True)
    model = keras_model()
    files = {
        "dense.tflite": convert_keras(model),
        "dynamic_int8.tflite": convert_keras(model, optimizations=[tf.lite.Optimize.DEFAULT]),
        "offsets.tflite": convert_keras(model, _experimental_use_buffer_offset=True),
        "dtypes.tflite": dtypes_model(),
        "subgraphs.tflite": loop_model(),
        "sparse.tflite": sparse_model(int8=False),
        "sparse_int8.tflite": sparse_model(int8=True),
    }
    fp16 = tf.lite.TFLiteConverter.from_keras_model(model)
    fp16.optimizations = [tf.lite.Optimize.DEFAULT]
    fp16.target_spec.supported_types = [tf.float16]
    files["fp16.tflite"] = fp16.convert()
    # Entries of files another script writes (make_tflite_types.py) are kept.
    expected = {"files": {}}
    expected_path = os.path.join(out, "expected.json")
    if os.path.exists(expected_path):
        with open(expected_path) as f:
            expected["files"] = {k: v for k, v in json.load(f)["files"].items() if k not in files}
    for name, content in sorted(files.items()):
        path = os.path.join(out, name)
        with open(path, "wb") as f:
            f.write(content)
        expected["files"][name] = {"tensors": read_back(path)}
    with open(expected_path, "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
