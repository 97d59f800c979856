"""The wheel's `zt` command and `python -m ztio`: the zt tool's own code (crates/zt-cli as a
library), with the binary's output and exit statuses."""

import os
import subprocess
import sys

import pytest

from conftest import FIXTURES

NPY = str(FIXTURES / "interop/numpy/v1_f32.npy")


def module(*args):
    return subprocess.run([sys.executable, "-m", "ztio", *args], capture_output=True, text=True)


def test_python_m_ztio_is_the_zt_tool():
    r = module("info", "--json", NPY)
    assert r.returncode == 0, r.stderr
    assert '"kind":"npy"' in r.stdout
    binary = os.environ.get("ZT_BIN")
    if binary:
        same = subprocess.run([binary, "info", "--json", NPY], capture_output=True, text=True)
        assert same.stdout == r.stdout


def test_exit_statuses_are_the_tools():
    assert module("verify", NPY).returncode == 0
    assert module("verify", "/nonexistent/file.zt").returncode == 1
    bad = module("no-such-command")
    assert bad.returncode == 2 and "no-such-command" in bad.stderr
    assert module("--version").returncode == 0


def test_the_zt_script_is_installed_beside_the_interpreter():
    script = os.path.join(os.path.dirname(sys.executable), "zt")
    if not os.path.exists(script):
        pytest.skip("ztio installed without its scripts")
    r = subprocess.run([script, "verify", NPY], capture_output=True, text=True)
    assert r.returncode == 0 and "OK" in r.stdout


def test_convert_and_diff_from_python(tmp_path):
    import numpy as np

    import ztio

    src = tmp_path / "m.safetensors"
    ztio.numpy.save_file({"w": np.arange(6, dtype=np.float32)}, src)
    ztio.convert(src, tmp_path / "m.zt", compress=3, digest="sha256")
    assert ztio.verify(tmp_path / "m.zt")
    assert ztio.diff(src, tmp_path / "m.zt", values_only=True)
    ztio.numpy.save_file({"w": np.ones(6, dtype=np.float32)}, tmp_path / "other.safetensors")
    assert not ztio.diff(src, tmp_path / "other.safetensors")
    with pytest.raises(FileExistsError, match="force=True"):
        ztio.convert(src, tmp_path / "m.zt")  # exists: the tool wants --force
    ztio.convert(src, tmp_path / "m.zt", force=True)
    with pytest.raises(ztio.Error):
        ztio.diff(src, tmp_path / "absent.zt")
    # A cast, compared by value within a tolerance (a type difference without one).
    ztio.numpy.save_file({"w": np.arange(6, dtype=np.float16) * 1.001}, tmp_path / "half.safetensors")
    assert not ztio.diff(src, tmp_path / "half.safetensors")
    assert ztio.diff(src, tmp_path / "half.safetensors", rtol=0.01)
    assert not ztio.diff(src, tmp_path / "half.safetensors", atol=1e-9)


def test_convert_casts_float_tensors_as_numpy_rounds_them(tmp_path):
    import numpy as np

    import ztio

    rng = np.random.default_rng(7)
    # Values past f16's range, subnormals and NaN among ordinary ones, and two just past a
    # midpoint of f16 and of bf16 by less than f32 holds: rounded through f32 they would be
    # ties, and go down to even.
    w = (rng.standard_normal(4096) * 10.0 ** rng.integers(-9, 7, 4096)).astype(np.float64)
    w[:6] = [np.nan, 1e6, -1e6, 2.0**-20, 1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-8 + 2.0**-40]
    src = tmp_path / "m.safetensors"
    ztio.numpy.save_file({"w": w, "w32": w.astype(np.float32), "i": np.arange(3, dtype=np.int64)}, src)
    for dtype in ["f16", np.float16, "float16", np.dtype("float16")]:
        out = tmp_path / "half.safetensors"
        ztio.convert(src, out, dtype=dtype, force=True, progress=False)
        got = ztio.numpy.load_file(out)
        # numpy's astype is the reference: rounded once, to nearest even.
        for name in ["w", "w32"]:
            assert got[name].dtype == np.float16
            with np.errstate(over="ignore"):  # 1e6 becomes inf, as it must
                want = (w if name == "w" else w.astype(np.float32)).astype(np.float16)
            assert np.array_equal(got[name].view(np.uint16), want.view(np.uint16))
        assert got["i"].dtype == np.int64 and got["i"].tolist() == [0, 1, 2]
    ztio.convert(src, tmp_path / "m.zt", dtype="bfloat16", progress=False)
    f = ztio.open(tmp_path / "m.zt")
    assert f.get_slice("w32").get_dtype() == "BF16"
    with pytest.raises(ztio.ArgumentError, match="bf16, f16, f32 or f64"):
        ztio.convert(src, tmp_path / "x.zt", dtype="int8", progress=False)
    # bf16 against ml_dtypes', which also rounds an f64 once.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    got = ztio.numpy.load_file(tmp_path / "m.zt")
    for name, source in [("w", w), ("w32", w.astype(np.float32))]:
        want = source.astype(ml_dtypes.bfloat16)
        assert np.array_equal(got[name].view(np.uint16), want.view(np.uint16)), name


def test_convert_can_leave_out_what_it_cannot_read(tmp_path):
    import numpy as np
    import ztio

    # One entry encrypted (listed, unreadable), the other intact.
    src = FIXTURES / "invalid/zip_encrypted.npz"
    out = tmp_path / "salvaged.safetensors"
    with pytest.raises(ztio.Error, match=r"to write the rest without it: .* skip_unreadable=True"):
        ztio.convert(src, out, progress=False)
    assert not out.exists()
    with pytest.warns(ztio.ZtWarning, match='object "a" left out, unreadable: zip entry "a.npy" is encrypted'):
        ztio.convert(src, out, skip_unreadable=True, progress=False)
    with ztio.safe_open(out, "np") as f:
        assert list(f.keys()) == ["b"]
    # merge: the same refusal and the same way past it.
    other = tmp_path / "other.zt"
    ztio.save_file({"c": np.ones(2, np.float32)}, other)
    merged = tmp_path / "merged.zt"
    with pytest.raises(ztio.Error, match=r"to write the rest without it: .* skip_unreadable=True"):
        ztio.merge([src, other], merged, progress=False)
    assert not merged.exists()
    with pytest.warns(ztio.ZtWarning, match='object "a" left out, unreadable'):
        ztio.merge([src, other], merged, skip_unreadable=True, progress=False)
    with ztio.safe_open(merged, "np") as f:
        assert sorted(f.keys()) == ["b", "c"]


def test_a_conversion_that_is_mostly_padding_warns_how_to_pack_closer(tmp_path):
    import warnings

    import numpy as np
    import ztio

    # 300 tensors of 16 bytes: at 64 KiB a blob, about 20 MB for 4.7 KiB of data.
    src = tmp_path / "small.zt"
    small = {f"t{i:03}": np.full(4, i, np.float32) for i in range(300)}
    ztio.save_file(small, src, version="v1.2")
    with pytest.warns(ztio.ZtWarning, match='version="v2-compact" packs them') as caught:
        ztio.save_file(small, tmp_path / "saved.zt")
    assert caught[0].filename == __file__, "the warning points at the caller"
    with pytest.warns(ztio.ZtWarning, match=r"--compact \(compact=True from Python\)"):
        ztio.convert(src, tmp_path / "wide.zt", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ztio.convert(src, tmp_path / "close.zt", compact=True, progress=False)
    assert (tmp_path / "close.zt").stat().st_size * 10 < (tmp_path / "wide.zt").stat().st_size


def test_one_calls_options_do_not_carry_over_to_the_next(tmp_path):
    import ztio

    # A v1.1 file whose object's digest does not match its bytes.
    bad = FIXTURES / "invalid/v11_bad_digest.zt"
    good = FIXTURES / "valid/dtypes.zt"
    ztio.convert(good, tmp_path / "good.zt", verify=False, sync=False, progress=False)
    # verify=False was the call before's; this one checks, and refuses.
    with pytest.raises(ztio.ChecksumError, match="digest mismatch"):
        ztio.convert(bad, tmp_path / "bad.zt", progress=False)
    assert not (tmp_path / "bad.zt").exists()
    ztio.convert(bad, tmp_path / "copied.zt", verify=False, progress=False)
    with pytest.raises(ztio.ChecksumError, match="digest mismatch"):
        ztio.convert(bad, tmp_path / "bad.zt", progress=False)


def test_the_tools_failures_raise_as_reads_do(tmp_path, capfd):
    import ztio

    # The library's error, its class by kind and where it happened; nothing on stderr.
    with pytest.raises(ztio.ChecksumError) as raised:
        ztio.convert(FIXTURES / "invalid/v11_bad_digest.zt", tmp_path / "a.zt", progress=False)
    e = raised.value
    assert (e.kind, e.object, e.component, e.offset) == ("checksum_mismatch", "w", "data", 0x40)
    assert e.path.endswith("v11_bad_digest.zt")
    with pytest.raises(FileNotFoundError):
        ztio.convert(tmp_path / "absent.safetensors", tmp_path / "b.zt", progress=False)
    with pytest.raises(FileNotFoundError):
        ztio.diff(FIXTURES / "valid/dtypes.zt", tmp_path / "absent.zt", progress=False)
    # A conversion the output cannot hold, and an argument the tool refuses: the caller's.
    with pytest.raises(ztio.ArgumentError, match="safetensors metadata holds text only"):
        ztio.convert(FIXTURES / "valid/attributes.zt", tmp_path / "c.safetensors", progress=False)
    with pytest.raises(ztio.ArgumentError, match="invalid value 'md5' for '--digest"):
        ztio.convert(FIXTURES / "valid/dtypes.zt", tmp_path / "d.zt", digest="md5", progress=False)
    assert capfd.readouterr().err == ""


def test_upgrade_merge_and_rm_from_python(tmp_path):
    import numpy as np

    import ztio

    a, b = tmp_path / "a.zt", tmp_path / "b.safetensors"
    ztio.save_file({"x": np.arange(4, dtype=np.float32), "-dash": np.ones(2, np.int8)}, a, version="v1.2")
    ztio.save_file({"y": np.zeros(3, np.float64)}, b)

    ztio.upgrade(a, tmp_path / "up.zt", progress=False)
    assert ztio.open(tmp_path / "up.zt").version == "zt v2"
    assert ztio.diff(a, tmp_path / "up.zt")
    ztio.upgrade(tmp_path / "up.zt", tmp_path / "down.zt", to="v1.2", progress=False)
    assert ztio.open(tmp_path / "down.zt").version == "zt v1.2.0"

    ztio.merge([a, b], tmp_path / "ab.zt", progress=False)
    with ztio.open(tmp_path / "ab.zt") as f:
        assert sorted(f.keys()) == ["-dash", "x", "y"]
        assert f.get_tensor("y").dtype == np.float64
    # A name in two inputs: an error, and nothing written.
    with pytest.raises(ztio.Error):
        ztio.merge([a, a], tmp_path / "clash.zt", progress=False)
    assert not (tmp_path / "clash.zt").exists()
    with pytest.raises(ztio.ArgumentError):
        ztio.merge(a, tmp_path / "one.zt")
    # File attributes the inputs disagree on: an error naming the key, unless given.
    ztio.save_file({"p": np.zeros(1, np.float32)}, tmp_path / "p.zt", metadata={"format": "pt"})
    ztio.save_file({"q": np.zeros(1, np.float32)}, tmp_path / "q.zt", metadata={"format": "np"})
    with pytest.raises(ztio.Error, match="--set format=VALUE"):
        ztio.merge([tmp_path / "p.zt", tmp_path / "q.zt"], tmp_path / "pq.zt", progress=False)
    ztio.merge([tmp_path / "p.zt", tmp_path / "q.zt"], tmp_path / "pq.zt", attributes={"format": "pt"},
               progress=False)
    with ztio.open(tmp_path / "pq.zt") as f:
        assert f.metadata() == {"format": "pt"}
    # None leaves the key out (--unset), in a merge and in a convert (v2's own shards too).
    ztio.merge([tmp_path / "p.zt", tmp_path / "q.zt"], tmp_path / "none.zt", attributes={"format": None},
               progress=False)
    with ztio.open(tmp_path / "none.zt") as f:
        assert f.metadata() is None  # as safetensors says "no metadata"
    ztio.convert(tmp_path / "p.zt", tmp_path / "sh.zt", shard_size=1, attributes={"format": None, "n": 2},
                 progress=False)
    with ztio.open(tmp_path / "sh.zt") as f:
        assert f.metadata() == {"n": "2"}

    # A name that looks like an option is a name.
    ztio.rm(a, "-dash", tmp_path / "rm.zt", progress=False)
    with ztio.open(tmp_path / "rm.zt") as f:
        assert list(f.keys()) == ["x"]
        np.testing.assert_array_equal(f.get_tensor("x"), np.arange(4, dtype=np.float32))
    with pytest.raises(ztio.Error):
        ztio.rm(a, ["absent"], tmp_path / "rm2.zt", progress=False)
    assert not (tmp_path / "rm2.zt").exists()
    with pytest.raises(ztio.Error):
        ztio.rm(a, ["x"], tmp_path / "rm.zt", progress=False)  # exists: the tool wants force
    ztio.rm(a, ["x"], tmp_path / "rm.zt", force=True, progress=False)
    assert list(ztio.open(tmp_path / "rm.zt").keys()) == ["-dash"]


def test_compact_v2_output_from_python(tmp_path):
    import numpy as np

    import ztio

    src = tmp_path / "m.safetensors"
    ztio.numpy.save_file({f"t{i}": np.full(4, i, np.float32) for i in range(8)}, src)
    ztio.convert(src, tmp_path / "wide.zt", progress=False)
    ztio.convert(src, tmp_path / "compact.zt", compact=True, progress=False)
    ztio.merge([src], tmp_path / "merged.zt", compact=True, progress=False)
    wide, compact = (os.path.getsize(tmp_path / n) for n in ("wide.zt", "compact.zt"))
    # Eight blobs on 64 KiB boundaries against 4 KiB ones.
    assert wide >= 8 * 65536 > 8 * 4096 * 2 >= compact
    assert os.path.getsize(tmp_path / "merged.zt") == compact
    assert ztio.diff(src, tmp_path / "compact.zt", values_only=True)


def test_paths_that_start_with_a_dash_are_paths(tmp_path, monkeypatch):
    import numpy as np

    import ztio

    monkeypatch.chdir(tmp_path)
    ztio.save_file({"w": np.arange(3, dtype=np.int16)}, "-in.safetensors")
    ztio.convert("-in.safetensors", "-out.zt", progress=False)
    ztio.upgrade("-out.zt", "-v12.zt", to="v1.2", progress=False)
    ztio.merge(["-v12.zt"], "-merged.zt", progress=False)
    assert ztio.diff("-in.safetensors", "-merged.zt", values_only=True)
    assert ztio.open("-merged.zt").keys() == ["w"]


def test_convert_can_write_attributes_as_json_text(tmp_path):
    import json

    import ztio

    gguf = FIXTURES / "interop/gguf/dense.gguf"
    out = tmp_path / "dense.safetensors"
    with pytest.raises(ztio.ArgumentError, match="attributes_as_json=True"):
        ztio.convert(gguf, out, progress=False)
    ztio.convert(gguf, out, attributes_as_json=True, progress=False)
    with ztio.safe_open(out, "np") as f:
        metadata = f.metadata()
    assert metadata["general.alignment"] == "64"
    assert json.loads(metadata["gguf.value_types"])["general.alignment"] == "u32"
    with ztio.open(gguf) as src, ztio.safe_open(out, "np") as f:
        assert sorted(f.keys()) == sorted(src.keys())


def test_what_the_tool_notes_is_a_warning_at_the_callers_line(tmp_path, capfd):
    import ztio

    # One of the archive's arrays is structured (not numbers): left out, and said so.
    src = FIXTURES / "interop/numpy/mixed.npz"
    with pytest.warns(ztio.ZtWarning, match='object "structured" skipped') as caught:
        ztio.convert(src, tmp_path / "m.zt", progress=False)
    assert caught[0].filename == __file__
    assert "zt: note" not in capfd.readouterr().err
    with ztio.open(tmp_path / "m.zt") as f:
        assert "structured" not in f.keys()


def test_convert_to_gguf_can_write_attributes_as_json_text(tmp_path):
    import ztio

    # A training checkpoint's arguments are a map (an argparse.Namespace, never run).
    src = FIXTURES / "interop/pytorch/training.pt"
    out = tmp_path / "training.gguf"
    with pytest.raises(ztio.ArgumentError, match="GGUF metadata has no map values"):
        ztio.convert(src, out, progress=False)
    ztio.convert(src, out, attributes_as_json=True, progress=False)
    with ztio.open(out) as f:
        assert f.attributes["args"] == '{"opaque":"argparse.Namespace"}'
        assert f.attributes["epoch"] == 7
