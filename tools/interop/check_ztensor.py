"""Reads our files with the original ztensor package and compares them with EXPECTED.tsv.

Every component of every object is compared as bytes: dense objects through the public
`reader[name]`, and every component (sparse, quantized, complex, FP8) through
`reader.read(name).components`, falling back to the raw component reader where the
original's typed path fails (its complex support cannot reshape complex64 data).
"""
import hashlib
import pathlib
import sys

import numpy as np
import ztensor


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def main(folder: str) -> int:
    root = pathlib.Path(folder)
    expected = {}
    for line in (root / "EXPECTED.tsv").read_text().splitlines()[1:]:
        file, obj, role, ty, shape, digest = line.split("\t")
        expected.setdefault((file, obj), {})[role] = (ty, digest)
    bad = ok = 0
    for path in sorted(root.glob("*.zt")):
        try:
            reader = ztensor.Reader(str(path))
        except Exception as e:  # noqa: BLE001 - every failure is reported
            print(f"{path.name}: OPEN FAILED: {e}")
            bad += 1
            continue
        for name in reader.keys():
            roles = expected.get((path.name, name))
            if roles is None:
                continue
            try:
                comps = reader.read(name).components
            except Exception as e:  # noqa: BLE001
                comps = {}
                print(f"{path.name}/{name}: typed read failed ({e}); using raw components")
            for role, (ty, digest) in sorted(roles.items()):
                if role in comps:
                    got = np.ascontiguousarray(comps[role]).tobytes()
                else:
                    buf, _ = reader._inner._read_component_raw(name, role)
                    got = bytes(buf)
                if sha(got) == digest:
                    ok += 1
                    print(f"{path.name}/{name}/{role} ({ty}): identical")
                else:
                    bad += 1
                    print(f"{path.name}/{name}/{role} ({ty}): MISMATCH")
    print(f"\n{ok} components identical, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
