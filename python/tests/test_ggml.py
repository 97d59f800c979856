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
