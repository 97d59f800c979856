"""Checks that magnetron reads .mag files we wrote (converted from magnetron's own samples).

    python check_magnetron.py v1   OURS_V1.mag               # needs magnetron==0.1.2
    python check_magnetron.py v300 OURS_V300.mag SAMPLE      # needs magnetron==0.2.2

v1:   magnetron 0.1.2's reader parses header and metadata (it never loads tensors); the metadata
      must be {'lr': 0.5, 'neg': -2, 'n_layers': 12}, as in write_v1_0.1.2.py.
v300: magnetron 0.2.2's deserialize() must load every tensor; values, shapes and dtypes are
      compared with the tensors of SAMPLE as magnetron itself reads it (for a v300 SAMPLE) or
      with the values the sample scripts wrote (for v100/v200 samples, which 0.2.2 cannot read).
"""
import math
import sys

import magnetron as mag

SCRIPT_VALUES = {  # from write_snap_v100_0.1.6.py / write_snap_v200_0.1.9.py
    "w": ([2, 3], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
    "idx": ([3], [7, -1, 258]),
    "h": ([3], [1.0, -2.0, 0.5]),
    "b16": ([2], [1.0, -2.0]),
    "m": ([1, 3], [[True, False, True]]),
    "u8": ([3], [1, 2, 255]),
    "i64": ([1], [-3]),
    "f8": ([3], [1.0, -2.0, 0.5]),
}


def same(a, b) -> bool:
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def check_v1(path: str) -> int:
    from magnetron.io import StorageArchive

    with StorageArchive(path, "r") as a:
        md = a.metadata()
        print("magnetron", mag.__version__ if hasattr(mag, "__version__") else "0.1.2", "metadata:", md, "tensor_keys:", a.tensor_keys())
    want = {"lr": 0.5, "neg": -2, "n_layers": 12}
    ok = md == want
    print("metadata identical" if ok else f"METADATA MISMATCH: want {want}")
    return 0 if ok else 1


def check_v300(path: str, sample: str) -> int:
    from magnetron.snapshot import deserialize

    got, md = deserialize(path)
    print("magnetron", mag.__version__, "loaded", sorted(got), "metadata", md)
    if sample.endswith("0.2.2.mag"):
        want, want_md = deserialize(sample)
        want = {k: (list(t.shape), t.tolist(), str(t.dtype)) for k, t in want.items()}
    else:
        want, want_md = {k: (s, v, None) for k, v_s in SCRIPT_VALUES.items() for s, v in [v_s]}, {}
        if "0.1.6" in sample:
            want.pop("f8")
    bad = 0
    if md != want_md:
        print(f"METADATA MISMATCH: {md} != {want_md}")
        bad += 1
    if sorted(got) != sorted(want):
        print(f"TENSOR NAMES MISMATCH: {sorted(got)} != {sorted(want)}")
        bad += 1
    for k, (shape, values, dtype) in want.items():
        t = got.get(k)
        if t is None:
            continue
        ok = list(t.shape) == shape and same(t.tolist(), values) and (dtype is None or str(t.dtype) == dtype)
        print(f"{k}: {t.dtype} {list(t.shape)} {t.tolist()} {'identical' if ok else 'MISMATCH, want ' + repr((shape, values, dtype))}")
        bad += 0 if ok else 1
    print("all identical" if not bad else f"{bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "v1":
        sys.exit(check_v1(sys.argv[2]))
    sys.exit(check_v300(sys.argv[2], sys.argv[3]))
