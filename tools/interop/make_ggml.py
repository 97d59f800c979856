"""Writes the legacy GGML fixtures in fixtures/interop/ggml/ with the tools that wrote such
files, and records what llama.cpp's own reader finds in them in expected.json.

The writers come from source distributions on PyPI (fetched by this script): llama.cpp as
vendored by llama-cpp-python 0.1.78 (the last release before GGUF): its `convert.py` writes a
tiny Llama model as ggjt v1 (f16), its `quantize` (built here with `make`) requantizes that as
ggjt v3 (Q4_0, Q5_1), and its `convert-lora-to-ggml.py` writes a PEFT LoRA adapter as ggla;
whisper.cpp as vendored by pywhispercpp 1.5.1: `models/convert-h5-to-ggml.py` writes a tiny
transformers Whisper model (f16, its default).

Expected values: for llama.cpp's files, the tensors as the GGML loader of llama.cpp's
`convert-llama-ggml-to-gguf.py` (vendored by llama-cpp-python 0.1.85) reads them (name,
dimensions, type, its byte range); for whisper.cpp's, as whisper.cpp's loader reads the
format, which has no reader in Python: the script records the arrays it handed the converter
and the mel filters it wrote.

Needs: a C/C++ compiler and make; Python packages numpy, sentencepiece, safetensors, torch,
transformers and pywhispercpp, whose whisper.cpp loads the Whisper model written (a
throwaway environment: torch's wheel is large). Run:

    python tools/interop/make_ggml.py fixtures/interop/ggml
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from pypi_sdist import sdist

LLAMA_WRITER = "0.1.78"
LLAMA_READER = "0.1.85"
WHISPER = ("pywhispercpp", "1.5.1")


def run(*args, cwd=None):
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def tiny_llama(d):
    """A Llama model of one layer in transformers' layout, with a sentencepiece tokenizer."""
    import sentencepiece as spm
    from safetensors.numpy import save_file

    os.makedirs(d)
    text = os.path.join(d, "corpus.txt")
    with open(text, "w") as f:
        for i in range(200):
            f.write(f"the quick brown fox {i} jumps over the lazy dog number {i * 7}\n")
    spm.SentencePieceTrainer.train(
        input=text, model_prefix=os.path.join(d, "tokenizer"), vocab_size=48,
        model_type="bpe", character_coverage=1.0, minloglevel=2,
        normalization_rule_name="identity")
    os.remove(text)
    os.remove(os.path.join(d, "tokenizer.vocab"))
    # n_ff 96 is what convert.py's n_mult search finds for n_embd 32; every row a whole
    # number of 32-element blocks.
    h, ff, v = 32, 96, 48
    config = dict(architectures=["LlamaForCausalLM"], hidden_size=h, intermediate_size=ff,
                  num_attention_heads=4, num_hidden_layers=1, vocab_size=v,
                  rms_norm_eps=1e-6, model_type="llama")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f)
    rng = np.random.default_rng(7)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    p = "model.layers.0."
    t = {"model.embed_tokens.weight": w(v, h), "model.norm.weight": w(h),
         "lm_head.weight": w(v, h), p + "input_layernorm.weight": w(h),
         p + "post_attention_layernorm.weight": w(h), p + "mlp.gate_proj.weight": w(ff, h),
         p + "mlp.up_proj.weight": w(ff, h), p + "mlp.down_proj.weight": w(h, ff)}
    for n in "qkvo":
        t[p + f"self_attn.{n}_proj.weight"] = w(h, h)
    save_file(t, os.path.join(d, "model-00001-of-00001.safetensors"))


def tiny_lora(d):
    """A PEFT LoRA adapter (r 4) over the tiny Llama's q and v projections."""
    import torch

    os.makedirs(d)
    config = dict(peft_type="LORA", r=4, lora_alpha=8, fan_in_fan_out=False, bias="none",
                  modules_to_save=None, target_modules=["q_proj", "v_proj"])
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(config, f)
    g = torch.Generator().manual_seed(3)
    state = {}
    for n in "qv":
        base = f"base_model.model.model.layers.0.self_attn.{n}_proj"
        state[f"{base}.lora_A.weight"] = torch.randn(4, 32, generator=g)
        state[f"{base}.lora_B.weight"] = torch.randn(32, 4, generator=g).half()
    torch.save(state, os.path.join(d, "adapter_model.bin"))


def llama_reference(reader_dir):
    """The GGML loader of llama.cpp's converter to GGUF."""
    script = os.path.join(reader_dir, "convert-llama-ggml-to-gguf.py")
    sys.path.insert(0, os.path.join(reader_dir, "gguf-py"))
    spec = importlib.util.spec_from_file_location("ggml_to_gguf", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TYPE_NAMES = {0: "f32", 1: "f16"}


def read_back(module, path):
    """Each tensor of `path` as the converter's loader finds it."""
    data = np.memmap(path, mode="r")
    model = module.GGMLModel()
    model.load(data, 0)
    tensors = {}
    for t in model.tensors:
        start, length = int(t.start_offset), int(t.len_bytes)
        tensors[t.name.decode()] = {
            "shape": list(reversed(t.dims)),
            "type": TYPE_NAMES.get(int(t.dtype), "u8"),
            "hex": bytes(data[start:start + length]).hex(),
        }
    hp = model.hyperparameters
    return {"tensors": tensors, "version": f"{model.file_format.name.lower()} v"
            f"{model.format_version}", "n_vocab": hp.n_vocab, "ftype": int(hp.ftype)}


def whisper(converter, out, work):
    """Runs whisper.cpp's converter over a tiny random Whisper; returns what it was given."""
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    model_dir = os.path.join(work, "whisper-tiny")
    n_mels = 8
    config = WhisperConfig(vocab_size=96, num_mel_bins=n_mels, encoder_layers=1,
                           decoder_layers=1, encoder_attention_heads=2,
                           decoder_attention_heads=2, d_model=16, encoder_ffn_dim=64,
                           decoder_ffn_dim=64, max_source_positions=8,
                           max_target_positions=16, decoder_start_token_id=1,
                           pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(5)
    model = WhisperForConditionalGeneration(config)
    model.save_pretrained(model_dir)
    vocab = {f"t{i}": i for i in range(90)}
    vocab.update({"Ġ": 90, "é": 91})
    with open(os.path.join(model_dir, "vocab.json"), "w") as f:
        json.dump(vocab, f)
    with open(os.path.join(model_dir, "added_tokens.json"), "w") as f:
        json.dump({"<|endoftext|>": 92}, f)
    assets = os.path.join(work, "whisper-repo", "whisper", "assets")
    os.makedirs(assets)
    filters = np.random.default_rng(11).random((n_mels, 201)).astype(np.float32)
    np.savez(os.path.join(assets, "mel_filters.npz"), **{f"mel_{n_mels}": filters})
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    written = {}
    # f16, whisper.cpp's default (its small tensors stay f32).
    for f32 in (False,):
        out_dir = os.path.join(work, "whisper-out")
        os.makedirs(out_dir, exist_ok=True)
        args = [sys.executable, converter, model_dir, os.path.join(work, "whisper-repo"),
                out_dir] + (["use-f32"] if f32 else [])
        run(*args)
        name = "ggml-model-f32.bin" if f32 else "ggml-model.bin"
        target = f"whisper-tiny-{'f32' if f32 else 'f16'}.bin"
        shutil.copy(os.path.join(out_dir, name), os.path.join(out, target))
        written[target] = f32
    return state, filters, written


def whisper_cpp_loads(path):
    """whisper.cpp itself (pywhispercpp's build) loads the model: its loader checks every
    tensor's name, shape and type against the header, and that none is missing."""
    code = f"from pywhispercpp.model import Model; Model({path!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    log = done.stdout + done.stderr
    assert done.returncode == 0 and "failed to load" not in log and "model size" in log, log


def whisper_expected(state, filters, f32):
    """Each tensor as whisper.cpp's converter writes it: renamed, squeezed, f16 or f32."""
    converter_names = {
        "self_attn.k_proj": "attn.key", "self_attn.q_proj": "attn.query",
        "self_attn.v_proj": "attn.value", "self_attn.out_proj": "attn.out",
        "self_attn_layer_norm": "attn_ln", "encoder_attn.q_proj": "cross_attn.query",
        "encoder_attn.v_proj": "cross_attn.value", "encoder_attn.out_proj": "cross_attn.out",
        "encoder_attn_layer_norm": "cross_attn_ln", "fc1": "mlp.0", "fc2": "mlp.2",
        "final_layer_norm": "mlp_ln", "encoder.layer_norm.bias": "encoder.ln_post.bias",
        "encoder.layer_norm.weight": "encoder.ln_post.weight",
        "encoder.embed_positions.weight": "encoder.positional_embedding",
        "decoder.layer_norm.bias": "decoder.ln.bias",
        "decoder.layer_norm.weight": "decoder.ln.weight",
        "decoder.embed_positions.weight": "decoder.positional_embedding",
        "decoder.embed_tokens.weight": "decoder.token_embedding.weight"}
    tensors = {"mel_filters": {"shape": list(filters.shape), "type": "f32",
                               "hex": filters.astype("<f4").tobytes().hex()}}
    for src, value in state.items():
        if src == "proj_out.weight":
            continue
        nn = src.split(".")[1:]
        if nn[1] == "layers":
            nn[1] = "blocks"
            inner = ".".join(nn[3:-1])
            if inner == "encoder_attn.k_proj":
                mapped = "attn.key" if nn[0] == "encoder" else "cross_attn.key"
            else:
                mapped = converter_names[inner]
            name = ".".join(nn[:3] + [mapped] + nn[-1:])
        else:
            name = ".".join(nn)
            name = converter_names.get(name, name)
        data = value.squeeze().astype(np.float16)
        if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
            data = data.reshape(data.shape[0], 1)
        small = data.ndim < 2 or name in (
            "encoder.conv1.bias", "encoder.conv2.bias", "encoder.positional_embedding",
            "decoder.positional_embedding")
        if f32 or small:
            data = data.astype(np.float32)
        tensors[name] = {"shape": list(data.shape), "type": str(data.dtype).replace(
            "float", "f"), "hex": data.astype(data.dtype.newbyteorder("<")).tobytes().hex()}
    return tensors


def main(out):
    os.makedirs(out, exist_ok=True)
    expected = {"files": {}}
    with tempfile.TemporaryDirectory() as work:
        writer = os.path.join(sdist("llama-cpp-python", LLAMA_WRITER, work), "vendor",
                              "llama.cpp")
        reader = os.path.join(sdist("llama-cpp-python", LLAMA_READER, work), "vendor",
                              "llama.cpp")
        run("make", "-j2", "quantize", cwd=writer)
        hf = os.path.join(work, "hf")
        tiny_llama(hf)
        f16 = os.path.join(out, "llama-ggjt-v1-f16.bin")
        run(sys.executable, os.path.join(writer, "convert.py"), hf, "--outtype", "f16",
            "--outfile", f16)
        for q in ("q4_0", "q5_1"):
            run(os.path.join(writer, "quantize"), f16,
                os.path.join(out, f"llama-ggjt-v3-{q}.bin"), q)
        lora = os.path.join(work, "lora")
        tiny_lora(lora)
        sys.path.insert(0, writer)
        run(sys.executable, os.path.join(writer, "convert-lora-to-ggml.py"), lora)
        shutil.copy(os.path.join(lora, "ggml-adapter-model.bin"),
                    os.path.join(out, "lora-ggla.bin"))
        module = llama_reference(reader)
        for name in ("llama-ggjt-v1-f16.bin", "llama-ggjt-v3-q4_0.bin",
                     "llama-ggjt-v3-q5_1.bin"):
            expected["files"][name] = read_back(module, os.path.join(out, name))
        # The converter's loader reads llama models only: the adapter's tensors are what
        # the converter was handed, transposed and typed as it writes them.
        import torch
        state = torch.load(os.path.join(lora, "adapter_model.bin"))
        tensors = {}
        for k, v in state.items():
            layer = k.split(".")[4]
            proj = k.split(".")[6][0]
            ab = "loraA" if "lora_A" in k else "loraB"
            name = f"layers.{layer}.attention.w{proj}.weight.{ab}"
            t = v.T.numpy() if ab == "loraA" else v.float().numpy()
            tensors[name] = {"shape": list(t.shape), "type": str(t.dtype).replace(
                "float", "f"), "hex": np.ascontiguousarray(t).tobytes().hex()}
        expected["files"]["lora-ggla.bin"] = {"tensors": tensors, "version": "ggla v1"}
        converter = os.path.join(sdist(*WHISPER, work), "whisper.cpp", "models",
                                 "convert-h5-to-ggml.py")
        state, filters, written = whisper(converter, out, work)
        for name in written:
            whisper_cpp_loads(os.path.join(out, name))
        for name, f32 in written.items():
            expected["files"][name] = {"tensors": whisper_expected(state, filters, f32),
                                       "version": "ggml"}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
