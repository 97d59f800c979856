"""The configuration of the small BERT the TensorFlow and Flax fixture scripts save with
transformers (make_tensorflow.py, make_flax.py): a few kilobytes of weights, every kind of
layer a BERT has."""

from transformers import BertConfig


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
