#!/usr/bin/env python3
"""Saves whole models with `torch.save(model)` (a Llama and a BERT from transformers, an LSTM,
a convolution with batch norm, a transformer encoder layer) and checks that `ztio.open` lists
exactly what `torch.load(path, weights_only=False).state_dict()` returns: the same names
(tied weights both, non-persistent buffers none), shapes and values. ztio reads the pickle
without running it; torch.load runs it, which is why this lives here and not in the tests.
Run it in a throwaway venv:

    python3 -m venv /tmp/tm && /tmp/tm/bin/pip install torch transformers numpy ml_dtypes
    (cd python && VIRTUAL_ENV=/tmp/tm PATH=/tmp/tm/bin:$PATH maturin develop --release)
    /tmp/tm/bin/python tools/interop/check_torch_modules.py

It prints one line per model and exits 1 on any difference.
"""

import os
import sys
import tempfile
import warnings

import numpy as np
import torch
from transformers import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM

import ztio

warnings.simplefilter("ignore")
torch.manual_seed(0)
MODELS = {
    "llama (tied embeddings, rotary buffer)": lambda: LlamaForCausalLM(LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)),
    "bert": lambda: BertModel(BertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=40)),
    "lstm": lambda: torch.nn.LSTM(4, 3, 2),
    "conv + batch norm (half)": lambda: torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.Dropout()).half(),
    "transformer encoder layer": lambda: torch.nn.TransformerEncoderLayer(8, 2, 16),
}


def differences(path):
    want = torch.load(path, weights_only=False).state_dict()
    with ztio.open(path) as f:
        got = set(f.keys())
        out = [f"missing {k}" for k in sorted(set(want) - got)]
        out += [f"extra {k}" for k in sorted(got - set(want))]
        for k in sorted(set(want) & got):
            w = want[k].detach()
            t = np.asarray(f.get_tensor(k))
            if w.dtype == torch.bfloat16:
                w, t = w.float(), t.astype(np.float32)
            if tuple(t.shape) != tuple(w.shape) or not np.array_equal(t, w.numpy()):
                out.append(f"values of {k}")
    return len(want), out


failed = False
with tempfile.TemporaryDirectory() as tmp:
    for name, make in MODELS.items():
        path = os.path.join(tmp, "model.pt")
        torch.save(make(), path)
        count, diffs = differences(path)
        failed |= bool(diffs)
        print(f"{name}: {count} tensors, " + ("same" if not diffs else "; ".join(diffs[:5])))
sys.exit(1 if failed else 0)
