"""Writes fixtures/interop/pytorch_fp4/: a checkpoint torch.save wrote with torch's FP4 dtype
(`float4_e2m1fn_x2`, torch >= 2.8: two E2M1 values a byte, low nibble first; torch's shape and
strides count the bytes), and expected.json in make_torch.py's schema, with the shapes as
ztensor lists them (the last dimension counts values: twice torch's) and the type `f4_e2m1`.
Separate from make_torch.py so that its fixtures, written by an older torch, stay as they are.
Run once in a throwaway venv (`pip install torch numpy`); the tests never need Python.

    python tools/interop/make_torch_fp4.py [out_dir]
"""
import collections
import json
import os
import sys

import torch

out = sys.argv[1] if len(sys.argv) > 1 else "fixtures/interop/pytorch_fp4"
os.makedirs(out, exist_ok=True)
fp4 = torch.float4_e2m1fn_x2

codes = torch.tensor([[0x21, 0x43, 0x65], [0x87, 0xA9, 0xCB]], dtype=torch.uint8)
wide = torch.arange(32, dtype=torch.uint8).reshape(4, 8) * 7
tensors = collections.OrderedDict()
tensors["packed"] = codes.view(fp4)                  # [2, 3] bytes: [2, 6] values
tensors["rows"] = wide.view(fp4)[1:3]                # a view at an offset into its storage
tensors["columns"] = wide.view(fp4)[:, ::2]          # strided: every other byte of each row
tensors["transposed"] = codes.view(fp4).t()          # [3, 2] bytes, strides (1, 3)
tensors["vector"] = torch.tensor([0x10, 0xF0], dtype=torch.uint8).view(fp4)
tensors["empty"] = torch.zeros(0, 4, dtype=torch.uint8).view(fp4)
# 0-d: one byte, two values, which no shape of ours without dimensions says; listed with a
# defect, so not in expected.json.
tensors["scalar"] = torch.tensor(0x21, dtype=torch.uint8).view(fp4)
path = os.path.join(out, "fp4.pt")
torch.save(tensors, path)

back = torch.load(path)
table = {}
for name, t in tensors.items():
    # The bytes in row-major order, as made and as torch.load gives them back.
    raw = t.contiguous().view(torch.uint8)
    assert back[name].dtype == fp4 and back[name].shape == t.shape, name
    assert torch.equal(back[name].contiguous().view(torch.uint8), raw), name
    if t.dim() == 0:
        continue
    shape = list(t.shape)
    shape[-1] *= 2
    table[name] = {"shape": shape, "type": "f4_e2m1",
                   "hex": raw.reshape(-1).numpy().tobytes().hex()}
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"torch": torch.__version__, "files": {"fp4.pt": table}}, f, indent=1,
              sort_keys=True)
    f.write("\n")
print("wrote", sorted(os.listdir(out)))
