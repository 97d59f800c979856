"""Writes Flax checkpoints with flax's own serializer and transformers' `save_pretrained`,
and records what flax's reader (`flax.serialization.msgpack_restore`) reads from each in
fixtures/interop/flax/expected.json: per file, per array (its path of keys joined with `/`),
its shape, our element type name and its bytes in hex; the other leaves under `attributes`;
the arrays flax split in pieces under `chunked`.

- flax_model.msgpack: a small BERT saved by transformers' FlaxBertModel, and sharded/ the
  same saved in shards (`flax_model.msgpack.index.json`).
- dtypes.msgpack: `flax.serialization.to_bytes` of a tree holding every dtype flax writes
  (bf16 and FP8 through ml_dtypes), 0-d and empty arrays, a NumPy scalar (extension 3), a
  Python complex (extension 2), numbers, text, None and a list.
- chunked.msgpack: one array written with flax's chunk size lowered to 64 bytes, so that it
  is stored in pieces as flax stores arrays over 1 GiB, beside a whole one.

Run in a throwaway environment (transformers 4.x: version 5 has no Flax models):

    python3 -m venv /tmp/flaxenv
    /tmp/flaxenv/bin/pip install flax "transformers==4.57.*"
    /tmp/flaxenv/bin/python tools/interop/make_flax.py fixtures/interop/flax
"""

import json
import os
import shutil
import sys

import flax
import flax.serialization as serialization
import jax
import ml_dtypes
import numpy as np
import transformers
from flax.traverse_util import flatten_dict
from transformers import FlaxBertModel

from dtype_names import OURS
import tiny_bert


def restored(path):
    with open(path, "rb") as f:
        tree = serialization.msgpack_restore(f.read())
    arrays, attributes = {}, {}
    for key, value in flatten_dict(tree, sep="/").items():
        if isinstance(value, (np.ndarray, np.generic)):
            a = np.asarray(value)
            arrays[key] = {"shape": list(a.shape), "type": OURS[a.dtype.name], "hex": a.tobytes().hex()}
        elif isinstance(value, list):
            for i, item in enumerate(value):
                attributes[f"{key}/{i}"] = item
        elif isinstance(value, complex):
            attributes[key] = [value.real, value.imag]
        else:
            attributes[key] = value
    return arrays, attributes


def main(out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    config = tiny_bert.config()
    model = FlaxBertModel(config, seed=3)
    model.save_pretrained(out)
    os.remove(os.path.join(out, "config.json"))
    sharded = os.path.join(out, "sharded")
    model.save_pretrained(sharded, max_shard_size="1KB")
    os.remove(os.path.join(sharded, "config.json"))

    rng = np.random.default_rng(7)
    f = rng.standard_normal((2, 3)).astype(np.float32)
    tree = {
        "params": {
            "bool": np.array([True, False, True]),
            **tiny_bert.integers(),
            "f16": f.astype(np.float16),
            "bf16": jax.numpy.asarray(f, dtype=jax.numpy.bfloat16),
            "f32": f,
            "f64": f.astype(np.float64),
            "c64": (f + 1j * f).astype(np.complex64),
            "c128": (f + 1j * f).astype(np.complex128),
            "f8_e4m3fn": f.astype(ml_dtypes.float8_e4m3fn),
            "f8_e5m2": f.astype(ml_dtypes.float8_e5m2),
            "scalar": np.array(2.5, np.float32),
            "empty": np.zeros((0, 3), np.float32),
        },
        "step": np.int64(1234),
        "count": 3,
        "rate": 0.25,
        "name": "adam",
        "nothing": None,
        "z": 1.5 + 2j,
        "betas": [0.9, 0.999],
    }
    with open(os.path.join(out, "dtypes.msgpack"), "wb") as fh:
        fh.write(serialization.to_bytes(tree))

    saved = serialization.MAX_CHUNK_SIZE
    serialization.MAX_CHUNK_SIZE = 64
    try:
        big = {"big": np.arange(40, dtype=np.float32).reshape(4, 10), "small": np.ones(2, np.float32)}
        data = serialization.msgpack_serialize(big)
    finally:
        serialization.MAX_CHUNK_SIZE = saved
    with open(os.path.join(out, "chunked.msgpack"), "wb") as fh:
        fh.write(data)

    expected = {"flax_version": flax.__version__, "transformers_version": transformers.__version__, "files": {}}
    for file in ["flax_model.msgpack", "dtypes.msgpack", "chunked.msgpack"]:
        arrays, attributes = restored(os.path.join(out, file))
        expected["files"][file] = {"arrays": arrays, "attributes": attributes}
    # The chunked array, as flax restores it (kept apart: its data is in pieces).
    chunked = expected["files"]["chunked.msgpack"]
    chunked["chunked"] = {"big": chunked["arrays"].pop("big")}
    shard_arrays = {}
    for shard in sorted(os.listdir(sharded)):
        if shard.endswith(".msgpack"):
            shard_arrays.update(restored(os.path.join(sharded, shard))[0])
    expected["sharded"] = shard_arrays
    with open(os.path.join(out, "expected.json"), "w") as fh:
        json.dump(expected, fh, indent=1, sort_keys=True)
        fh.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
