"""What the TensorFlow and Flax fixture scripts (make_tensorflow.py, make_flax.py) both
save: the configuration of a small BERT for transformers (a few kilobytes of weights, every
kind of layer a BERT has), and integer arrays at each type's extremes."""

import numpy as np
from transformers import BertConfig


def integers() -> dict:
    return {
        "i8": np.array([-128, 0, 127], np.int8),
        "i16": np.array([-32768, 7], np.int16),
        "i32": np.arange(-3, 3, dtype=np.int32).reshape(2, 3),
        "i64": np.array([-(2**63), 2**63 - 1], np.int64),
        "u8": np.array([0, 255], np.uint8),
        "u16": np.array([65535], np.uint16),
        "u32": np.array([2**32 - 1], np.uint32),
        "u64": np.array([2**64 - 1], np.uint64),
    }


def config() -> BertConfig:
    return BertConfig(
        vocab_size=32,
        hidden_size=4,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=8,
        max_position_embeddings=8,
        type_vocab_size=2,
    )
