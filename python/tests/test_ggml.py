"""Legacy GGML files as llama.cpp's and whisper.cpp's converters wrote them: every tensor
reads as llama.cpp's own GGML loader finds it, or as whisper.cpp's converter was handed it
(fixtures/interop/ggml/expected.json), as a view of the map."""

import os

import pytest

import ztio
from conftest import interop

GGML, EXPECTED = interop("ggml")


@pytest.mark.parametrize("file", sorted(EXPECTED["files"]))
def test_every_tensor_reads_as_the_reference_reads_it(file):
    want = EXPECTED["files"][file]["tensors"]
    with ztio.open(os.path.join(GGML, file)) as f:
        assert sorted(f.keys()) == sorted(want)
        for name, w in want.items():
            info = f.info(name)
            assert list(info.shape) == w["shape"], name
            assert f.component(name, "data").tobytes().hex() == w["hex"], name


def test_the_header_is_attributes_and_blocks_are_ggufs():
    with ztio.open(os.path.join(GGML, "llama-ggjt-v3-q4_0.bin")) as f:
        assert f.attributes["ggml.family"] == "llama"
        assert f.attributes["ggml.n_layer"] == 1
        assert f.info("layers.0.attention.wq.weight").format == "gguf.q4_0/1"
        norm = f.get_tensor("layers.0.attention_norm.weight")
        assert not norm.flags.owndata
    with ztio.open(os.path.join(GGML, "whisper-tiny-f16.bin")) as f:
        assert f.attributes["ggml.family"] == "whisper"
        assert f.get_tensor("mel_filters").shape == (8, 201)


def test_a_llama_model_converts_to_the_gguf_llama_cpps_converter_writes(tmp_path):
    # fixtures/interop/ggml/to_gguf holds what llama.cpp's convert-llama-ggml-to-gguf.py wrote
    # of the same file (tools/interop/make_ggml_gguf.py).
    out = tmp_path / "m.gguf"
    ztio.convert(os.path.join(GGML, "llama-ggjt-v3-q4_0.bin"), str(out))
    reference = os.path.join(GGML, "to_gguf", "llama-ggjt-v3-q4_0.gguf")
    with ztio.open(str(out)) as ours, ztio.open(reference) as want:
        assert list(ours.keys()) == list(want.keys())
        assert "blk.0.attn_q.weight" in ours.keys()
        for name in want.keys():
            assert ours.component(name, "data").tobytes() == want.component(name, "data").tobytes()
        for key in ["general.architecture", "llama.feed_forward_length", "tokenizer.ggml.tokens",
                    "tokenizer.ggml.scores", "tokenizer.ggml.token_type"]:
            assert ours.attributes[key] == want.attributes[key], key
    with ztio.open(os.path.join(GGML, "llama-ggjt-v3-q4_0.bin")) as f:
        assert len(f.attributes["ggml.vocab"]) == f.attributes["ggml.tokens"] == 48
        assert f.attributes["ggml.format"] == "ggjt v3"
