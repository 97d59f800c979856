"""Writes the HDF5 files TensorFlow's own tools write, and records what their readers read
from each in fixtures/interop/tensorflow/expected.json: per tensor, its shape, our element
type name and its little-endian bytes in hex, under the name the file stores it by (HDF5
dataset paths from the root).

- h5/ and safetensors/: a small TensorFlow BERT saved sharded by transformers' own
  `save_pretrained` (the HDF5 shards and index TF models on the Hub ship, and the
  safetensors ones), as transformers' TF loader reads each shard. The index lists every
  variable by its full name (`tf_bert_model/bert/...:0`); the shards drop the first
  component.
- tf_model.h5: the same model saved whole (Keras 2's weights layout: `layer_names` at the
  root, a group per layer with its `weight_names`).
- tf_keras_model.h5: a small model saved whole by tf-keras (Keras 2) in its legacy HDF5
  layout (`model_weights/`, the model's config as an attribute), float16 and float32 layers.
- ckpt/: TensorFlow checkpoints (TensorBundle: PREFIX.index and PREFIX.data-*), as
  `tf.train.load_checkpoint(...).get_tensor` reads them (under `checkpoints`): `all` (every
  dtype `tf.train.Checkpoint` writes, 0-d, empty, strings), `sharded` (three data files, by
  `MaxShardSizePolicy`, one variable split into slices), `boxes` (the same policy over
  variables of rank 2 and 3, cut into boxes of any shape across eleven data files),
  `partitioned` (TensorFlow 1's Saver over two partitioned variables, one split along its
  first axis, one along its second), `v1` (`v1.ckpt`, one file in the V1 format, every dtype
  its writer takes and three partitioned variables) and `keras` (tf-keras's `save_weights` in
  the TensorFlow format).
- saved_model/: a small module saved by `tf.saved_model.save` (its variables are a
  checkpoint in `variables/`), under `saved_model` as the checkpoint reader reads them.

Run in a throwaway environment (transformers 4.x: version 5 has no TensorFlow models):

    python3 -m venv /tmp/tfenv
    /tmp/tfenv/bin/pip install "tensorflow-cpu==2.19.*" "tf-keras==2.19.*" \
        "transformers==4.57.*" h5py
    /tmp/tfenv/bin/python tools/interop/make_tensorflow.py fixtures/interop/tensorflow
"""

import json
import os
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import TFBertModel  # noqa: E402

import tiny_bert  # noqa: E402
from transformers.tf_utils import load_attributes_from_hdf5_group  # noqa: E402

OURS = {
    np.dtype("bool"): "bool",
    np.dtype("int8"): "i8",
    np.dtype("int16"): "i16",
    np.dtype("uint8"): "u8",
    np.dtype("uint16"): "u16",
    np.dtype("uint32"): "u32",
    np.dtype("uint64"): "u64",
    np.dtype("float64"): "f64",
    np.dtype("complex64"): "complex64",
    np.dtype("complex128"): "complex128",
    np.dtype("float16"): "f16",
    np.dtype("float32"): "f32",
    np.dtype("int32"): "i32",
    np.dtype("int64"): "i64",
}


def record(table, name, array):
    a = np.asarray(array)  # np.ascontiguousarray would make a 0-d array 1-d
    ours = OURS.get(a.dtype) or {"bfloat16": "bf16", "float8_e5m2": "f8_e5m2", "float8_e4m3fn": "f8_e4m3fn"}[a.dtype.name]
    table[name] = {"shape": list(a.shape), "type": ours, "hex": a.tobytes(order="C").hex()}


class Affine(tf.Module):
    """`x @ w + b`: a module with two variables and a function, for `tf.saved_model.save`."""

    def __init__(self):
        super().__init__()
        self.w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
        self.b = tf.Variable(np.ones(3, np.float32), name="b")

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def __call__(self, x):
        return x @ self.w + self.b


def checkpoints(folder, keras_model):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    rng = np.random.default_rng(11)
    f = rng.standard_normal((2, 3)).astype(np.float32)
    values = {
        "f16": f.astype(np.float16),
        "bf16": tf.constant(f, tf.bfloat16),
        "f32": f,
        "f64": f.astype(np.float64),
        **tiny_bert.integers(),
        "bool": np.array([True, False]),
        "c64": (f + 1j * f).astype(np.complex64),
        "c128": (f + 1j * f).astype(np.complex128),
        "f8_e5m2": tf.cast(f, tf.dtypes.experimental.float8_e5m2),
        "f8_e4m3fn": tf.cast(f, tf.dtypes.experimental.float8_e4m3fn),
        "scalar": np.float32(2.5),
        "empty": np.zeros((0, 3), np.float32),
        "text": "hello",
    }
    written = {}
    variables = {k: tf.Variable(v) for k, v in values.items()}
    written["all"] = tf.train.Checkpoint(**variables).write(os.path.join(folder, "all"))
    # Data files of at most 256 bytes: a variable of 256 bytes each; the one of 1,024
    # bytes is split into slices across them.
    parts = {f"v{i}": tf.Variable(np.full((64,), i, np.float32)) for i in range(3)}
    parts["split"] = tf.Variable(np.arange(256, dtype=np.float32))
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=256)
    options = tf.train.CheckpointOptions(experimental_sharding_callback=policy)
    written["sharded"] = tf.train.Checkpoint(**parts).write(os.path.join(folder, "sharded"), options=options)
    # The same policy over variables of rank 2 and 3: it cuts them into boxes of any shape.
    boxes = {
        "m": tf.Variable(np.arange(8 * 64, dtype=np.float32).reshape(8, 64)),
        "t": tf.Variable(np.arange(2 * 3 * 40, dtype=np.float32).reshape(2, 3, 40)),
    }
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=300)
    options = tf.train.CheckpointOptions(experimental_sharding_callback=policy)
    written["boxes"] = tf.train.Checkpoint(**boxes).write(os.path.join(folder, "boxes"), options=options)
    # Variables partitioned as TensorFlow 1's partitioners split them, saved by the Saver:
    # `rows` along its first axis, `cols` along its second.
    graph = tf.Graph()
    with graph.as_default():
        v1 = tf.compat.v1
        rows = v1.get_variable("rows", [10, 3], tf.float32, v1.zeros_initializer(), partitioner=v1.fixed_size_partitioner(3, axis=0))
        cols = v1.get_variable("cols", [4, 6], tf.float32, v1.zeros_initializer(), partitioner=v1.fixed_size_partitioner(2, axis=1))
        saver = v1.train.Saver()
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            for variable, full in [(rows, np.arange(30.0).reshape(10, 3)), (cols, np.arange(24.0).reshape(4, 6))]:
                for part in variable:
                    info = part._get_save_slice_info()
                    box = tuple(slice(o, o + n) for o, n in zip(info.var_offset, info.var_shape))
                    session.run(part.assign(full[box].astype(np.float32)))
            written["partitioned"] = saver.save(session, os.path.join(folder, "partitioned"), write_meta_graph=False)
    # A V1 checkpoint (one file, as TF-slim's model zoo published them): every dtype the V1
    # writer takes, and variables partitioned by rows, by columns, and of a varint type.
    graph = tf.Graph()
    with graph.as_default():
        v1 = tf.compat.v1
        ints = tiny_bert.integers()
        small = {
            "f16": f.astype(np.float16),
            "f32": f,
            "f64": f.astype(np.float64),
            "c64": (f + 1j * f).astype(np.complex64),
            "c128": (f + 1j * f).astype(np.complex128),
            "bool": np.array([True, False, True]),
            "scalar": np.float32(2.5),
            "empty": np.zeros((0, 3), np.float32),
            **{k: v for k, v in ints.items() if k not in ("u16", "u32", "u64")},
        }
        small_vars = {key: v1.get_variable(f"v1/{key}", initializer=tf.constant(value)) for key, value in small.items()}
        parted = {}
        for key, full, axis, dtype in [
            ("rows", np.arange(30.0).reshape(10, 3), 0, tf.float32),
            ("cols", np.arange(24.0).reshape(4, 6), 1, tf.float32),
            ("ints", np.arange(8).reshape(4, 2), 0, tf.int64),
        ]:
            parted[key] = (v1.get_variable(f"v1/{key}", full.shape, dtype, v1.zeros_initializer(), partitioner=v1.fixed_size_partitioner(2, axis=axis)), full)
        saver = v1.train.Saver(write_version=v1.train.SaverDef.V1)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            for variable, full in parted.values():
                for part in variable:
                    info = part._get_save_slice_info()
                    box = tuple(slice(o, o + n) for o, n in zip(info.var_offset, info.var_shape))
                    session.run(part.assign(full[box].astype(part.dtype.base_dtype.as_numpy_dtype)))
            v1_path = saver.save(session, os.path.join(folder, "v1.ckpt"), write_meta_graph=False)
            # TensorFlow's checkpoint reader reads few of a V1 file's dtypes and no partitioned
            # variable; its restore op reads them all: the reference, into zeroed variables.
            session.run(v1.global_variables_initializer())
            saver.restore(session, v1_path)
            v1_tensors = {}
            for key, variable in small_vars.items():
                record(v1_tensors, f"v1/{key}", session.run(variable))
            for key, (variable, full) in parted.items():
                value = session.run(variable.as_tensor())
                assert np.array_equal(value, full), key
                if key != "ints":
                    record(v1_tensors, f"v1/{key}", value)
    # A partitioned variable of integers (varints in the file) is listed, not read.
    v1_expected = {"tensors": v1_tensors, "strings": [], "unread": ["v1/ints"]}
    keras_model.save_weights(os.path.join(folder, "keras"))
    saved = os.path.join(os.path.dirname(folder), "saved_model")
    shutil.rmtree(saved, ignore_errors=True)
    tf.saved_model.save(Affine(), saved)
    written["keras"] = os.path.join(folder, "keras")
    os.remove(os.path.join(folder, "checkpoint"))
    written["saved_model"] = os.path.join(saved, "variables", "variables")
    expected = {}
    for key, prefix in written.items():
        reader = tf.train.load_checkpoint(prefix)
        tensors, other = {}, []
        for name in sorted(reader.get_variable_to_dtype_map()):
            value = reader.get_tensor(name)
            a = np.asarray(value)
            if a.dtype.kind in "OSU":
                other.append(name)
            else:
                record(tensors, name, a)
        expected[key] = {"tensors": tensors, "strings": other}
    expected["v1"] = v1_expected
    return expected


def main(out):
    config = tiny_bert.config()
    tf.keras.utils.set_random_seed(3)
    model = TFBertModel(config)
    model(model.dummy_inputs)
    expected = {"transformers_version": transformers.__version__, "tensorflow_version": tf.__version__}
    for kind, safe in [("h5", False), ("safetensors", True)]:
        folder = os.path.join(out, kind)
        shutil.rmtree(folder, ignore_errors=True)
        # 1 KB shards: more than one shard, each weight whole in one.
        model.save_pretrained(folder, max_shard_size="1KB", safe_serialization=safe)
        os.remove(os.path.join(folder, "config.json"))
        table = {}
        for shard in sorted(os.listdir(folder)):
            path = os.path.join(folder, shard)
            if shard.endswith(".h5"):
                # As transformers' load_tf_shard reads a shard: the names in `layer_names`.
                with h5py.File(path, "r") as f:
                    for name in load_attributes_from_hdf5_group(f, "layer_names"):
                        record(table, "/" + name, f[name][()])
            elif shard.endswith(".safetensors"):
                with safe_open(path, "np") as f:
                    for name in f.keys():
                        record(table, name, f.get_tensor(name))
        expected[kind] = table
    model.save_pretrained(os.path.join(out, "single"), safe_serialization=False)
    os.replace(os.path.join(out, "single", "tf_model.h5"), os.path.join(out, "tf_model.h5"))
    shutil.rmtree(os.path.join(out, "single"))
    small = tf_keras.Sequential(
        [
            tf_keras.layers.Input((3,)),
            tf_keras.layers.Dense(4, dtype="float16"),
            tf_keras.layers.BatchNormalization(),
            tf_keras.layers.Dense(2),
        ]
    )
    small.save(os.path.join(out, "tf_keras_model.h5"))
    expected["checkpoints"] = checkpoints(os.path.join(out, "ckpt"), small)
    expected["files"] = {}
    for file in ["tf_model.h5", "tf_keras_model.h5"]:
        table = {}
        with h5py.File(os.path.join(out, file), "r") as f:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    record(table, "/" + name, obj[()])
            f.visititems(visit)
        expected["files"][file] = table
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
