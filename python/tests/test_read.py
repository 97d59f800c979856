"""Reading every fixture kind: values against the sha256 the Rust generator recorded, file
attributes, info, and the interop files written by the original implementations."""

import csv
import hashlib
import json

import numpy as np
import pytest

import ztio
import ztio.numpy
from conftest import FIXTURES

VALID = FIXTURES / "valid"
# Every kind of file the library reads, by suffix.
KINDS = (
    ".zt", ".mag", ".safetensors", ".gguf", ".npy", ".npz", ".pt", ".bin", ".onnx", ".h5", ".keras",
    ".tflite", ".caffemodel", ".pdiparams", ".xml",
)


def expected_rows():
    with open(VALID / "EXPECTED.tsv", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


ROWS = expected_rows()


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['file']}:{r['object']}:{r['role']}")
def test_component_bytes_match_the_recorded_digest(row):
    with ztio.open(VALID / row["file"]) as f:
        part = f.component(row["object"], row["role"])
        assert hashlib.sha256(part.tobytes()).hexdigest() == row["sha256"]
        info = f.info(row["object"])
        assert list(info.shape) == json.loads(row["shape"])


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS if r["role"] == "data"],
    ids=lambda r: f"{r['file']}:{r['object']}",
)
def test_dense_tensor_has_the_recorded_bytes_and_shape(row):
    with ztio.open(VALID / row["file"]) as f:
        if f.info(row["object"]).format != "dense":
            pytest.skip("not dense")
        t = f.get_tensor(row["object"])
        assert isinstance(t, np.ndarray)
        shape = tuple(json.loads(row["shape"]))
        # Packed sub-byte and unknown logical types read as their storage elements.
        packed = row["type"] in ("f4_e2m1", "f6_e2m3", "f6_e3m2") or "/" in row["type"]
        if not packed:
            assert t.shape == shape
        assert hashlib.sha256(t.tobytes()).hexdigest() == row["sha256"]


def every_fixture():
    out = []
    for p in sorted((FIXTURES / "interop").rglob("*")):
        # An ONNX model's external data (weights/*.bin) and an OpenVINO model's weights (the
        # .bin beside its .xml) are raw bytes, not files of their own.
        external = p.parent.name == "weights" and p.parent.parent.name == "onnx"
        external = external or (p.suffix == ".bin" and p.with_suffix(".xml").exists())
        if p.is_file() and p.suffix in KINDS and "-of-" not in p.name and not p.name.startswith("refused_") and not external:
            out.append(p)
    out += sorted(p for p in VALID.iterdir() if p.suffix in KINDS)
    return out


def numpy_and_torch_expectations():
    """What numpy and torch wrote (tools/interop/make_numpy.py, make_torch.py): per file and
    array, its shape, type and the row-major little-endian bytes it must read as."""
    rows = []
    for kind in ("numpy", "pytorch"):
        spec = json.loads((FIXTURES / "interop" / kind / "expected.json").read_text())
        for file, arrays in spec["files"].items():
            for name, want in arrays.items():
                rows.append((FIXTURES / "interop" / kind / file, name, want))
    return rows


@pytest.mark.parametrize("path,name,want", numpy_and_torch_expectations(), ids=lambda x: str(x)[-40:])
def test_numpy_and_torch_files_read_as_their_writers_wrote(path, name, want):
    with ztio.open(path) as f:
        t = f.get_tensor(name)
        assert t.shape == tuple(want["shape"])
        assert t.tobytes() == bytes.fromhex(want["hex"])
        assert f.info(name).dtype == want["type"]


def test_tied_torch_weights_share_memory_and_say_so():
    with ztio.open(FIXTURES / "interop" / "pytorch" / "state_dict.pt") as f:
        by_storage = {}
        for info in f.infos():
            key = info.attributes.get("torch.storage")
            # Strided views (a transpose) are gathered copies; plain ones point into the map.
            if key is not None and "torch.stride" not in info.attributes:
                by_storage.setdefault(key, []).append(info.name)
        tied = [names for names in by_storage.values() if len(names) > 1]
        assert tied, "the fixture has tied weights"
        a, b = (f.get_tensor(n) for n in tied[0][:2])
        assert np.shares_memory(a, b)  # both point into the one stored storage


@pytest.mark.parametrize("path", every_fixture(), ids=lambda p: p.name)
def test_every_fixture_reads_every_object(path):
    with ztio.open(path) as f:
        assert f.version
        assert isinstance(f.attributes, dict)
        for info in f.infos():
            assert info.name in f
            if info.defect:
                with pytest.raises(ztio.Error):
                    f.get_tensor(info.name)
                continue
            try:
                value = f.get_tensor(info.name)
            except ztio.UnsupportedError:
                continue  # a layout listed but not decoded (FP6, unknown formats' parts)
            if info.format == "dense":
                assert isinstance(value, np.ndarray)


def test_arrays_numpy_cannot_describe_are_refused_by_name():
    for name, what in (("refused_structured.npy", "structured"), ("refused_object.npy", "object")):
        with pytest.raises(ztio.UnsupportedError, match=what):
            ztio.open(FIXTURES / "interop" / "numpy" / name)


def test_kinds_and_versions():
    assert ztio.open(FIXTURES / "interop" / "v014.zt").version == "zt v0.1"
    assert ztio.open(FIXTURES / "interop" / "v123_all.zt").version.startswith("zt v1.2")
    assert ztio.open(FIXTURES / "interop" / "zt2" / "03_zstd_seekable_a4k.zt").version == "zt v2"
    assert ztio.open(FIXTURES / "interop" / "safetensors" / "numpy.safetensors").version == "safetensors"
    assert ztio.open(VALID / "mag_v300.mag").version.startswith("mag")
    assert ztio.open(FIXTURES / "interop" / "numpy" / "v2_i64.npy").version == "npy v2.0"
    assert ztio.open(FIXTURES / "interop" / "numpy" / "all.npz").version == "npz"
    assert ztio.open(FIXTURES / "interop" / "pytorch" / "state_dict.pt").version == "pytorch"
    assert ztio.open(FIXTURES / "interop" / "pytorch" / "legacy.pt").version == "pytorch legacy"
    gguf = sorted((FIXTURES / "interop" / "gguf").glob("*.gguf"))
    assert gguf and all(ztio.open(p).version.startswith("gguf v") for p in gguf)


def test_gguf_blocks_are_components_and_dequantize():
    """A quantized GGUF tensor keeps its blocks (the gguf.<type>/1 object's data) and
    dequantizes to float32 exactly as the gguf package did (its values are in golden/)."""
    golden = FIXTURES / "interop" / "gguf" / "golden"
    checked = 0
    for path in sorted((FIXTURES / "interop" / "gguf").glob("*.gguf")):
        golden_file = path.name == "quant.gguf"  # the file golden/ was computed from
        with ztio.open(path) as f:
            for info in f.infos():
                if not info.format.startswith("gguf."):
                    continue
                t = f.get_tensor(info.name)
                assert isinstance(t, ztio.Components)
                assert t.parts["data"].dtype == np.uint8
                kind = info.format[len("gguf."):-len("/1")]
                want = golden / f"{kind}.f32"
                if golden_file and want.exists() and info.name == kind:
                    values = f.dequantize(info.name)
                    assert values.shape == info.shape
                    expected = np.frombuffer(want.read_bytes(), "<f4")[: values.size].reshape(values.shape)
                    # Every bit but a NaN's sign (IEEE 754 leaves it open for a product).
                    np.testing.assert_array_equal(np.isnan(values), np.isnan(expected))
                    numbers = ~np.isnan(values)
                    assert values[numbers].tobytes() == expected[numbers].tobytes()
                    checked += 1
    # Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K-Q6_K, Q8_K, TQ1_0, TQ2_0, Q1_0, the nine IQ types,
    # MXFP4, NVFP4 (Q8_K's and Q1_0's golden values are ggml's formulas in numpy: the package
    # has none)
    assert checked == 25


def test_info_lists_format_types_and_components():
    with ztio.open(FIXTURES / "interop" / "v123_all.zt") as f:
        csr = f.info("csr")
        assert csr.format == "sparse_csr"
        assert {c.role for c in csr.components} == {"values", "indices", "indptr"}
        fp8 = f.info("fp8")
        assert (fp8.dtype, fp8.storage_dtype, fp8.logical) == ("f8_e4m3fn", "u8", "f8_e4m3fn")
        assert f.info("dense_f32").logical is None
        z = f.info("zstd_f32")
        assert z.components[0].encoding == "zstd"


def test_logical_types_use_ml_dtypes():
    import ml_dtypes

    with ztio.open(FIXTURES / "interop" / "v123_all.zt") as f:
        assert f["bf16_t"].dtype == np.dtype(ml_dtypes.bfloat16)
        assert f["fp8"].dtype == np.dtype(ml_dtypes.float8_e4m3fn)
        assert f["complex"].dtype == np.complex64
        assert f["bool_t"].dtype == np.bool_


def test_sparse_as_scipy_and_quantized_dequantizes():
    import scipy.sparse as sp

    with ztio.open(FIXTURES / "interop" / "v123_all.zt") as f:
        csr = f["csr"]
        assert isinstance(csr, sp.csr_array)
        assert np.array_equal(csr.toarray(), f.dequantize("csr"))
        coo = f["coo"]
        assert isinstance(coo, sp.coo_array)
        assert np.array_equal(coo.toarray(), f.dequantize("coo"))
        q = f["qg"]
        assert isinstance(q, ztio.Quantized)
        assert set(q.parts) == {"packed_weight", "scales", "zeros"}
        d = q.dequantize()
        assert d.shape == q.shape and d.dtype == np.float32


def test_verify_reports_and_raises_nothing_on_a_good_file():
    with ztio.open(FIXTURES / "interop" / "v123_all.zt") as f:
        report = f.verify()
        assert report.ok and report.checked > 0


def test_closed_file_refuses_reads():
    f = ztio.open(FIXTURES / "interop" / "v123_all.zt")
    f.close()
    assert f.closed
    with pytest.raises(ztio.ArgumentError, match="closed"):
        f.get_tensor("dense_f32")


def test_a_closed_file_says_so_in_safetensors_words():
    """safetensors raises SafetensorError("File is closed"): the same words, from the file
    and from the native reader under it."""
    path = FIXTURES / "interop" / "v123_all.zt"
    with ztio.safe_open(path, framework="np") as f:
        pass
    for read in [lambda: f.get_tensor("dense_f32"), lambda: f.keys(), lambda: f.metadata()]:
        with pytest.raises(ztio.ArgumentError) as e:
            read()
        assert str(e.value) == "File is closed"
    g = ztio.open(path)
    g.close()
    with pytest.raises(ztio.ArgumentError) as e:
        g.get_tensor("dense_f32")
    assert str(e.value) == "File is closed"


def test_slices_made_before_close_keep_reading_as_safetensors_slices_do(tmp_path):
    """safetensors' slices hold the file's storage: one made inside `with safe_open(...)`
    reads after the block. Ours did not (it said the file was closed); the file itself still
    refuses reads once closed, and one that gave out no slices keeps nothing open."""
    w = np.arange(24, dtype=np.float32).reshape(4, 6)
    path = tmp_path / "m.safetensors"
    ztio.numpy.save_file({"w": w, "b": w[0].copy()}, path)
    with ztio.safe_open(path, framework="np") as f:
        rows = f.get_slice("w")
    np.testing.assert_array_equal(rows[1:3, 2:], w[1:3, 2:])
    with pytest.raises(ztio.ArgumentError, match="closed"):
        f.get_tensor("w")
    g = ztio.open(path)
    s = g.get_slice("b")
    g.close()
    np.testing.assert_array_equal(s[2:4], w[0, 2:4])
    with pytest.raises(ztio.ArgumentError, match="closed"):
        g.get_slice("w")
    h = ztio.open(path)
    h.close()
    assert "_twin" not in h.__dict__


def test_missing_name_is_not_found_and_a_key_error():
    with ztio.open(FIXTURES / "interop" / "v123_all.zt") as f:
        with pytest.raises(ztio.NotFoundError) as e:
            f.get_tensor("nope")
        assert isinstance(e.value, KeyError)
        assert e.value.kind == "not_found"


def test_missing_file_is_an_os_error():
    with pytest.raises(ztio.IoError) as e:
        ztio.open(FIXTURES / "no-such-file.zt")
    assert isinstance(e.value, OSError)
    assert e.value.path is not None and "no-such-file" in e.value.path


def test_unmapped_reads_the_same_values():
    path = FIXTURES / "interop" / "v123_all.zt"
    with ztio.open(path) as a, ztio.open(path, unmapped=True) as b:
        for name in a.keys():
            if a.info(name).format == "dense":
                assert a[name].tobytes() == b[name].tobytes()
        assert b._native.map_range() is None
