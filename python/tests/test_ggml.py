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


def test_a_llama_models_context_and_epsilon_are_set_as_attributes(tmp_path):
    # The GGML header holds neither; LLaMA 2's are 4096 and 1e-5 (the script's --context-length
    # and --eps), typed as llama.cpp reads them.
    import numpy as np

    out = tmp_path / "m.gguf"
    given = {"llama.context_length": np.uint32(4096), "llama.attention.layer_norm_rms_epsilon": 1e-5,
             "general.name": "LLaMA 2", "general.url": b"\x00\xff", "x.ids": np.arange(3)}
    ztio.convert(os.path.join(GGML, "llama-ggjt-v3-q4_0.bin"), str(out), attributes=given, progress=False)
    with ztio.open(str(out)) as f:
        a = f.attributes
        assert a["llama.context_length"] == 4096
        assert a["llama.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-5, rel=1e-6)
        assert a["general.name"] == "LLaMA 2"
        assert list(a["x.ids"]) == [0, 1, 2]
        assert a["gguf.value_types"]["llama.context_length"] == "u32"
        assert a["gguf.value_types"]["llama.attention.layer_norm_rms_epsilon"] == "f32"
    # A key the tool could not take, or a value JSON cannot carry, is the caller's error.
    for bad in [{"a=b": 1}, {"": 1}, {"x": float("nan")}, {"x": object()}]:
        with pytest.raises(ztio.ArgumentError):
            ztio.convert(os.path.join(GGML, "llama-ggjt-v3-q4_0.bin"), str(tmp_path / "x.gguf"),
                         attributes=bad, progress=False)
