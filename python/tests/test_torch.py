"""ztio.torch: the safetensors.torch functions, when torch is installed (skipped otherwise)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ztio  # noqa: E402
import ztio.torch  # noqa: E402


def test_torch_round_trip_of_every_dtype(tmp_path):
    tensors = {
        "f32": torch.randn(3, 4),
        "bf16": torch.randn(2, 2).to(torch.bfloat16),
        "f16": torch.randn(5).to(torch.float16),
        "i64": torch.arange(6).reshape(2, 3),
        "u8": torch.arange(4, dtype=torch.uint8),
        "b": torch.tensor([True, False]),
        "e4m3": torch.randn(4).to(torch.float8_e4m3fn),
        "e5m2": torch.randn(4).to(torch.float8_e5m2),
        "c64": torch.randn(3, dtype=torch.complex64),
        "strided": torch.randn(4, 6)[:, ::2],
    }
    for name in ("t.zt", "t.safetensors"):
        # safetensors has C64 only in recent versions of its format; ours writes it too,
        # but the round trip is checked on the .zt file.
        written = {k: v for k, v in tensors.items() if not (name.endswith("safetensors") and k == "c64")}
        ztio.torch.save_file(written, tmp_path / name, metadata={"m": "1"})
        back = ztio.torch.load_file(tmp_path / name)
        assert set(back) == set(written)
        for k, v in back.items():
            want = tensors[k].contiguous()
            assert v.dtype == want.dtype and v.shape == want.shape, k
            # Compared as bytes: FP8 has no equality in torch, and NaN != NaN.
            assert torch.equal(v.reshape(-1).view(torch.uint8), want.reshape(-1).view(torch.uint8)), k


def test_safe_open_pt(tmp_path):
    ztio.numpy.save_file({"w": np.ones((2, 3), np.float32)}, tmp_path / "m.safetensors")
    with ztio.safe_open(tmp_path / "m.safetensors", framework="pt") as f:
        w = f.get_tensor("w")
        assert isinstance(w, torch.Tensor) and w.shape == (2, 3)
        w += 1  # a copy: writable, and the file is untouched
    assert ztio.numpy.load_file(tmp_path / "m.safetensors")["w"].sum() == 6
