"""Writes sharded checkpoints of a small TensorFlow BERT with transformers' own
`save_pretrained` (the HDF5 shards and index TF models on the Hub ship, and the safetensors
ones), and records what transformers' TF loader reads from each shard in
fixtures/interop/transformers_tf/expected.json: per set, per tensor, its shape, our element
type name and its little-endian bytes in hex, under the name the shard stores it by (HDF5
dataset paths from the root). The index lists every variable by its full name
(`tf_bert_model/bert/...:0`); the shards drop the first component. Run in a throwaway
environment (transformers 4.x: version 5 has no TensorFlow models):

    python3 -m venv /tmp/tfenv
    /tmp/tfenv/bin/pip install "tensorflow-cpu==2.19.*" "tf-keras==2.19.*" \
        "transformers==4.57.*" h5py
    /tmp/tfenv/bin/python tools/interop/make_transformers_tf.py fixtures/interop/transformers_tf
"""

import json
import os
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import BertConfig, TFBertModel  # noqa: E402
from transformers.tf_utils import load_attributes_from_hdf5_group  # noqa: E402

OURS = {np.dtype("float32"): "f32", np.dtype("int32"): "i32", np.dtype("int64"): "i64"}


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
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
