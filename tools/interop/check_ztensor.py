"""Reads our files with the original ztensor package and compares values with EXPECTED.tsv."""
import hashlib
import pathlib
import sys

import numpy as np
import ztensor


def main(folder: str) -> int:
    root = pathlib.Path(folder)
    expected = {}
    for line in (root / "EXPECTED.tsv").read_text().splitlines()[1:]:
        file, obj, role, ty, shape, sha = line.split("\t")
        if role in ("data",):
            expected[(file, obj)] = (ty, sha)
    bad = ok = unreadable = 0
    for path in sorted(root.glob("*.zt")):
        try:
            reader = ztensor.Reader(str(path))
        except Exception as e:  # noqa: BLE001 - we report every failure
            print(f"{path.name}: OPEN FAILED: {e}")
            bad += 1
            continue
        for name in reader.keys():
            key = (path.name, name)
            if key not in expected:
                continue
            ty, sha = expected[key]
            try:
                arr = np.ascontiguousarray(reader[name])
            except Exception as e:  # noqa: BLE001
                print(f"{path.name}/{name} ({ty}): unreadable by the original reader: {e}")
                unreadable += 1
                continue
            got = hashlib.sha256(arr.tobytes()).hexdigest()
            if got == sha:
                ok += 1
                print(f"{path.name}/{name} ({ty}): identical")
            else:
                bad += 1
                print(f"{path.name}/{name} ({ty}): MISMATCH {arr!r}")
    print(f"\n{ok} identical, {bad} failed, {unreadable} unreadable by the original reader")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
