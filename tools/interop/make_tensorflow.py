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
from transformers import BertConfig, TFBertModel  # noqa: E402
from transformers.tf_utils import load_attributes_from_hdf5_group  # noqa: E402

OURS = {
    np.dtype("float16"): "f16",
    np.dtype("float32"): "f32",
    np.dtype("int32"): "i32",
    np.dtype("int64"): "i64",
}


def record(table, name, array):
    a = np.ascontiguousarray(np.asarray(array))
    table[name] = {"shape": list(a.shape), "type": OURS[a.dtype], "hex": a.tobytes().hex()}


def main(out):
    config = BertConfig(
        vocab_size=32,
        hidden_size=4,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=8,
        max_position_embeddings=8,
        type_vocab_size=2,
    )
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
