"""Writes fixtures/interop/pytorch/: checkpoints written by torch.save (the zip format of
PyTorch >= 1.6, and one legacy pre-1.6 file), with every dtype that has a zTensor equivalent,
nested dicts, tied weights (one storage, several tensors), views at an offset, strided and
expanded tensors, parameters and non-tensor values. Also expected.json: per file and tensor
(dotted name), the shape, the zTensor type name and the row-major little-endian bytes (hex)
that reading must give. Run once in a throwaway venv (`pip install torch numpy`); the files
are committed and the tests never need Python.

    python tools/interop/make_torch.py [out_dir]
"""
import collections
import json
import os
import sys

import torch

out = sys.argv[1] if len(sys.argv) > 1 else "fixtures/interop/pytorch"
os.makedirs(out, exist_ok=True)

ZT = {
    torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "u8", torch.uint16: "u16", torch.uint32: "u32", torch.uint64: "u64",
    torch.bool: "bool", torch.complex64: "complex64", torch.complex128: "complex128",
    torch.float8_e4m3fn: "f8_e4m3fn", torch.float8_e5m2: "f8_e5m2",
    torch.float8_e4m3fnuz: "f8_e4m3fnuz", torch.float8_e5m2fnuz: "f8_e5m2fnuz",
    torch.float8_e8m0fnu: "f8_e8m0",
}


def le_hex(t):
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    flat = t.contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes().hex() if flat.numel() else ""


def expect(table, name, t):
    table[name] = {"shape": list(t.shape), "type": ZT[t.dtype], "hex": le_hex(t)}


expected = {}

# Every dtype, small values that each type holds exactly.
base = torch.tensor([[0.5, -1.25, 3.0], [-2.0, 0.0, 1.5]])
dtypes = collections.OrderedDict()
for dt in ZT:
    if dt == torch.bool:
        t = base > 0
    elif dt.is_complex:
        t = torch.complex(base, -base).to(dt)
    elif dt in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
        t = (base.abs() * 4).to(torch.int64).to(dt)
    elif not dt.is_floating_point:
        t = (base * 4).to(dt)
    elif dt == torch.float8_e8m0fnu:
        t = base.abs().clamp(min=0.25).to(dt)
    else:
        t = base.to(dt)
    dtypes[str(dt).removeprefix("torch.")] = t
table = {}
for k, t in dtypes.items():
    expect(table, k, t)
torch.save(dtypes, os.path.join(out, "dtypes.pt"))
expected["dtypes.pt"] = table

# A model-like state dict: nested dicts, a parameter, tied weights, views and strides.
emb = torch.arange(12, dtype=torch.float32).reshape(4, 3)
big = torch.arange(20, dtype=torch.int32)
state = collections.OrderedDict()
state["embed.weight"] = emb
state["head.weight"] = emb                      # tied: the same tensor
state["encoder"] = {
    "layer0": {"w": torch.nn.Parameter(torch.ones(2, 2) * 0.25), "b": torch.zeros(2)},
    "layer1": collections.OrderedDict(w=emb.t(), scale=torch.tensor(2.0)),  # a transpose
}
state["window"] = big[5:11].view(2, 3)          # offset into a shared storage
state["every_other"] = big[::2]                 # stride 2 into the same storage
state["expanded"] = torch.tensor([7.0, 8.0]).expand(3, 2)  # stride 0
state["empty"] = torch.zeros(0, 4)
state["scalar_i64"] = torch.tensor(-5)
torch.save({"state_dict": state, "epoch": 3, "name": "tiny", "lr": 0.5,
            "betas": (0.9, 0.999), "flags": [True, None]},
           os.path.join(out, "state_dict.pt"))
table = {}
flat = {
    "state_dict.embed.weight": emb, "state_dict.head.weight": emb,
    "state_dict.encoder.layer0.w": state["encoder"]["layer0"]["w"],
    "state_dict.encoder.layer0.b": state["encoder"]["layer0"]["b"],
    "state_dict.encoder.layer1.w": emb.t(),
    "state_dict.encoder.layer1.scale": torch.tensor(2.0),
    "state_dict.window": state["window"], "state_dict.every_other": state["every_other"],
    "state_dict.expanded": state["expanded"], "state_dict.empty": state["empty"],
    "state_dict.scalar_i64": state["scalar_i64"],
}
for k, t in flat.items():
    expect(table, k, t)
expected["state_dict.pt"] = table

# A plain model's state_dict, as pytorch_model.bin files hold them.
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
sd = model.state_dict()
torch.save(sd, os.path.join(out, "pytorch_model.bin"))
table = {}
for k, t in sd.items():
    expect(table, k, t)
expected["pytorch_model.bin"] = table

# The legacy (pre-1.6) format: a pickle followed by raw storages, not a zip.
torch.save(sd, os.path.join(out, "legacy.pt"), _use_new_zipfile_serialization=False)
expected["legacy.pt"] = table

# Legacy at pickle protocol 4 (framed pickles).
torch.save(sd, os.path.join(out, "legacy_p4.pt"), _use_new_zipfile_serialization=False,
           pickle_protocol=4)
expected["legacy_p4.pt"] = table

# A big-endian checkpoint, as torch.save writes on a big-endian machine: the same archive
# with every storage byte-swapped per element and the byteorder record "big". torch.load
# must read it back as the original values.
import io
import zipfile

import numpy as np

be_tensors = collections.OrderedDict(
    f32=torch.tensor([[1.5, -2.0], [3.25, 1e-3]]), i64=torch.tensor([1, -2, 2**40]),
    bf16=torch.tensor([0.5, -8.0]).to(torch.bfloat16),
    c128=torch.tensor([1 + 2j, -3 - 4j], dtype=torch.complex128),
    u8=torch.tensor([1, 255], dtype=torch.uint8))
buf = io.BytesIO()
torch.save(be_tensors, buf)
sizes = [t.element_size() // (2 if t.is_complex() else 1) for t in be_tensors.values()]
src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
be_path = os.path.join(out, "big_endian.pt")
with zipfile.ZipFile(be_path, "w", zipfile.ZIP_STORED) as dst:
    for info in src.infolist():
        data = src.read(info.filename)
        parts = info.filename.split("/")
        if parts[-1] == "byteorder":
            data = b"big"
        elif len(parts) == 3 and parts[1] == "data":
            es = sizes[int(parts[2])]
            data = np.frombuffer(data, np.uint8).reshape(-1, es)[:, ::-1].tobytes()
        dst.writestr(info.filename, data)
back = torch.load(be_path)
for k, t in be_tensors.items():
    assert torch.equal(back[k], t), k
table = {}
for k, t in be_tensors.items():
    expect(table, k, t)
expected["big_endian.pt"] = table

# A training checkpoint: model and Adam optimizer state (int keys, lists of dicts), plus
# objects the reader must not build (an argparse.Namespace, a datetime, a set): they become
# opaque attributes. Flattened as the reader flattens: dicts by key, lists and tuples that
# hold containers or tensors by index.
import argparse
import datetime

# Last: the optimizer step changes the model's weights in place.
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model(torch.ones(1, 3)).sum().backward()
opt.step()
training = {
    "model": model.state_dict(),
    "optimizer": opt.state_dict(),
    "epoch": 7,
    "args": argparse.Namespace(lr=1e-3, name="run"),
    "when": datetime.datetime(2024, 1, 2, 3, 4, 5),
    "tags": {"a", "b"},
}
torch.save(training, os.path.join(out, "training.pt"))


def flatten(v, name, table):
    if isinstance(v, torch.Tensor):
        expect(table, name or "tensor", v)
    elif isinstance(v, dict):
        for k, x in v.items():
            flatten(x, f"{name}.{k}" if name else str(k), table)
    elif isinstance(v, (list, tuple)) and any(
            isinstance(x, (torch.Tensor, dict, list, tuple)) for x in v):
        for i, x in enumerate(v):
            flatten(x, f"{name}.{i}" if name else str(i), table)


training_table = {}
flatten(training, "", training_table)
expected["training.pt"] = training_table

# A whole model pickled by torch.save, inside a dict as training scripts save one
# (Ultralytics' checkpoints hold {"model": <the module>, ...}). torch.load(weights_only=True)
# refuses it; the reader lists what model.state_dict() gives, and builds no class.
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 1, bias=False)     # a parameter that is None
        self.bn = torch.nn.BatchNorm2d(3)                      # buffers, one of them int64
        self.register_buffer("cache", torch.arange(3.0), persistent=False)  # not saved
        self.register_buffer("scale", torch.tensor(0.5))
        self.register_module("gap", None)                      # a submodule that is None
        self.head = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()).half()
        self.plain = torch.ones(2)                             # an attribute: not saved


torch.manual_seed(1)
block = Block()
torch.save({"model": block, "epoch": 5}, os.path.join(out, "whole_model.pt"))
table = {}
for k, t in block.state_dict().items():
    expect(table, "model." + k, t)
expected["whole_model.pt"] = table

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"torch": torch.__version__, "files": expected}, f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote", sorted(os.listdir(out)))
