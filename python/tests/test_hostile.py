"""The reject corpus: every invalid fixture raises the exception of its recorded kind, with
its recorded message, at its recorded stage; none crashes the interpreter. Plus truncations
of every valid fixture."""

import csv

import pytest

import ztio
from conftest import FIXTURES

INVALID = FIXTURES / "invalid"

CLASSES = {
    "InvalidFile": ztio.FileError,
    "ChecksumMismatch": ztio.ChecksumError,
    "Unsupported": ztio.UnsupportedError,
    "LimitExceeded": ztio.LimitError,
    "InvalidArgument": ztio.ArgumentError,
    "NotFound": ztio.NotFoundError,
    "Io": ztio.IoError,
}


def rows():
    with open(INVALID / "EXPECTED.tsv", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def read_everything(f):
    for name in f.keys():
        info = f.info(name)
        if info.format in ("dense", "sparse_csr", "sparse_coo", "quantized_group"):
            if info.format == "dense":
                f.get_tensor(name)
            else:
                f.dequantize(name)
        for c in info.components:
            f.component(name, c.role)


@pytest.mark.parametrize("row", rows(), ids=lambda r: r["file"])
def test_each_invalid_file_gives_its_error(row):
    cls = CLASSES[row["kind"]]
    path = INVALID / row["file"]
    if row["stage"] == "open":
        with pytest.raises(cls) as e:
            ztio.open(path)
    elif row["stage"] == "read":
        with ztio.open(path) as f:
            with pytest.raises(cls) as e:
                read_everything(f)
    else:
        with ztio.open(path) as f:
            report = f.verify()
            assert not report.ok
            assert any(isinstance(x, cls) and row["message"] in str(x) for x in report.errors), report.errors
            return
    assert row["message"] in str(e.value)
    assert isinstance(e.value, ztio.Error)


def valid_files():
    kinds = (".zt", ".mag", ".gguf", ".npy", ".npz", ".pt", ".bin")
    files = [p for p in (FIXTURES / "valid").iterdir() if p.suffix in kinds]
    for sub in ("gguf", "numpy", "pytorch"):
        files += [p for p in (FIXTURES / "interop" / sub).iterdir() if p.suffix in kinds]
    return sorted(files)


@pytest.mark.parametrize("path", valid_files(), ids=lambda p: p.name)
def test_truncated_files_raise_and_never_crash(tmp_path, path):
    data = path.read_bytes()
    cuts = sorted({0, 1, 7, 8, 16, 63, 64, len(data) // 3, len(data) // 2, len(data) - 41, len(data) - 1})
    for cut in (c for c in cuts if 0 <= c < len(data)):
        p = tmp_path / f"cut{cut}{path.suffix}"
        p.write_bytes(data[:cut])
        try:
            with ztio.open(p) as f:
                read_everything(f)
                f.verify()
        except ztio.Error:
            pass


def test_every_failure_says_where():
    with pytest.raises(ztio.FileError) as e:
        ztio.open(INVALID / "bad_header_magic.zt")
    assert e.value.path and e.value.path.endswith("bad_header_magic.zt")
    assert e.value.kind == "invalid_file"
    assert "magic" in e.value.message


def test_metadata_of_one_byte_values_is_refused_not_grown_into_gigabytes(tmp_path):
    """A GGUF holding one array of 9 M u8 values: 9 MB of file, 288 MB of values. Refused
    by the cap on attribute values before anything is allocated, naming how to raise it."""
    import struct

    n = 9 << 20
    path = tmp_path / "bomb.gguf"
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1))
        f.write(struct.pack("<Q", 4) + b"bomb")
        f.write(struct.pack("<IIQ", 9, 0, n))
        f.write(bytes(n))
    with pytest.raises(ztio.LimitError) as info:
        ztio.open(path)
    message = str(info.value)
    assert "the attribute values would take more than the memory budget of 268435456" in message
    assert "ztio.open(max_memory=...)" in message
    assert info.value.offset == 44
