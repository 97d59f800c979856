"""Writes fixtures/interop/pytorch/torchscript.pt and torchscript_traced.pt with
torch.jit.save and adds what torch says they hold to fixtures/interop/pytorch/expected.json
(its other files stay as make_torch.py wrote them): a scripted module with a submodule's
parameters and a buffer, its state dict's names and values; and a traced module whose forward
holds a tensor literal, which tracing keeps in constants.pkl (listed as `constants.0`). Run
with torch installed:

    python tools/interop/make_torchscript.py fixtures/interop/pytorch
"""

import json
import os
import sys

import torch

out = sys.argv[1]
# The table format of make_torch.py (which writes its files when imported).
TYPES = {torch.float32: "f32", torch.int64: "i64"}


def expect(table, name, t):
    flat = t.detach().contiguous().reshape(-1)
    table[name] = {"shape": list(t.shape), "type": TYPES[t.dtype], "hex": flat.view(torch.uint8).numpy().tobytes().hex()}


class Scripted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        with torch.no_grad():
            self.lin.weight.copy_(torch.arange(6.0).reshape(2, 3) / 4)
            self.lin.bias.copy_(torch.tensor([0.5, -0.5]))
        self.register_buffer("steps", torch.arange(4, dtype=torch.int64))

    def forward(self, x):
        return self.lin(x) + self.steps.sum()


scripted = torch.jit.script(Scripted())
scripted.save(os.path.join(out, "torchscript.pt"))
table = {}
for name, t in scripted.state_dict().items():
    expect(table, name, t)


class Traced(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        with torch.no_grad():
            self.lin.weight.copy_(torch.tensor([[1.0, -1.0], [0.25, 2.0]]))
            self.lin.bias.copy_(torch.tensor([0.5, 0.0]))

    def forward(self, x):
        return self.lin(x) + torch.tensor([1.5, -2.0])


traced = torch.jit.trace(Traced(), torch.ones(1, 2))
traced.save(os.path.join(out, "torchscript_traced.pt"))
traced_table = {}
for name, t in traced.state_dict().items():
    expect(traced_table, name, t)
expect(traced_table, "constants.0", torch.tensor([1.5, -2.0]))
path = os.path.join(out, "expected.json")
with open(path) as f:
    expected = json.load(f)
expected["files"]["torchscript.pt"] = table
expected["files"]["torchscript_traced.pt"] = traced_table
with open(path, "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote torchscript.pt:", sorted(table), "and torchscript_traced.pt:", sorted(traced_table))
