#!/usr/bin/env python3
"""Loads and saves a small Llama model with Hugging Face transformers, with `safetensors`
forwarded to ztio (the shim tools/safetensors_suite/run.py writes), and checks what comes back
against the model itself: every weight equal in bf16 and f32, logits equal, a write into a
loaded weight never reaching the file; for one file and for a sharded set with its index.

transformers 5 reads each weight as `safe_open(path, "pt").get_slice(name)[...]`, so this is
where the torch slice path meets a real loader. Not part of the tests (torch and transformers
are not installed there); run it in a throwaway venv:

    python3 -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers numpy ml_dtypes
    (cd python && VIRTUAL_ENV=/tmp/hf PATH=/tmp/hf/bin:$PATH maturin develop --release)
    /tmp/hf/bin/python tools/safetensors_suite/run.py --shim-only
    PYTHONPATH=target/safetensors-suite/shim /tmp/hf/bin/python tools/interop/check_transformers.py

It exits 1 on any mismatch, and refuses to run if `safetensors` is not the shim.
"""

import os
import sys
import tempfile

import safetensors
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM


def main() -> int:
    if "safetensors-suite" not in safetensors.__file__:
        print(f"safetensors is {safetensors.__file__}, not the ztio shim: set PYTHONPATH", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=320,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    want = model.state_dict()
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        logits = model(ids).logits
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for shard_size in ("100KB", "5GB"):
            out = os.path.join(tmp, shard_size)
            model.save_pretrained(out, max_shard_size=shard_size)
            files = sorted(f for f in os.listdir(out) if "safetensors" in f)
            for dtype in (torch.bfloat16, torch.float32):
                got = AutoModelForCausalLM.from_pretrained(out, dtype=dtype).state_dict()
                bad = [k for k in want if not torch.equal(want[k].to(dtype), got[k])]
                failures += bool(bad) or got.keys() != want.keys()
                print(f"{shard_size} ({len(files)} files), {dtype}: {len(got)} weights, {len(bad)} differ")
            loaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.bfloat16)
            with torch.no_grad():
                same_logits = torch.equal(loaded(ids).logits, logits)
                for p in loaded.parameters():
                    p.add_(1)
            again = AutoModelForCausalLM.from_pretrained(out, dtype=torch.bfloat16).state_dict()
            untouched = all(torch.equal(want[k], again[k]) for k in want)
            failures += (not same_logits) + (not untouched)
            print(f"{shard_size}: logits equal {same_logits}, file untouched by writes {untouched}")
    print("OK" if not failures else f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
