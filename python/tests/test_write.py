"""Writing: round trips of every dtype, the writer context manager, crash safety, and the
same bytes as the Rust writer."""

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import ztio
import ztio.numpy
from conftest import FIXTURES, zt_bin

RNG = np.random.default_rng(7)

ARRAYS = {
    "f64": RNG.standard_normal((3, 4)),
    "f32": RNG.standard_normal((2, 3)).astype(np.float32),
    "f16": RNG.standard_normal(5).astype(np.float16),
    "bf16": RNG.standard_normal((2, 2)).astype(ml_dtypes.bfloat16),
    "i64": np.arange(-3, 3, dtype=np.int64),
    "i32": np.arange(6, dtype=np.int32).reshape(2, 3),
    "i16": np.array([-1, 2], np.int16),
    "i8": np.array([-128, 127], np.int8),
    "u64": np.array([2**64 - 1], np.uint64),
    "u32": np.array([1, 2], np.uint32),
    "u16": np.array([65535], np.uint16),
    "u8": np.arange(10, dtype=np.uint8),
    "bool": np.array([[True, False], [False, True]]),
    "c64": np.array([1 + 2j, -3j], np.complex64),
    "c128": np.array([[1 + 2j]], np.complex128),
    "e4m3": np.array([0.5, -2.0], ml_dtypes.float8_e4m3fn),
    "e5m2": np.array([0.5, -2.0], ml_dtypes.float8_e5m2),
    "e4m3fnuz": np.array([0.5], ml_dtypes.float8_e4m3fnuz),
    "e5m2fnuz": np.array([0.5], ml_dtypes.float8_e5m2fnuz),
    "scalar": np.array(3.0, np.float32),
    "empty": np.zeros((0, 3), np.float32),
}


@pytest.mark.parametrize("version", ["v2", "v2-compact", "v1.2"])
@pytest.mark.parametrize("compression", [None, True])
def test_every_dtype_round_trips(tmp_path, version, compression):
    path = tmp_path / "all.zt"
    digest = "crc32c" if version == "v1.2" else None
    ztio.save_file(ARRAYS, path, metadata={"who": "test", "n": 3}, compression=compression,
                   digest=digest, version=version)
    with ztio.open(path) as f:
        assert f.version == ("zt v2" if version.startswith("v2") else "zt v1.2.0")
        assert sorted(f.keys()) == sorted(ARRAYS)
        assert f.attributes == {"who": "test", "n": 3}
        for name, a in ARRAYS.items():
            b = f.get_tensor(name)
            assert b.dtype == a.dtype, name
            assert b.shape == a.shape, name
            assert b.tobytes() == a.tobytes(), name
        assert f.verify().ok


def test_non_contiguous_and_big_endian_arrays_are_stored_as_their_values(tmp_path):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    arrays = {"t": base.T, "s": base[::2, 1::2], "be": base.astype(">f4"), "f": np.asfortranarray(base)}
    ztio.save_file(arrays, tmp_path / "x.zt")
    with ztio.open(tmp_path / "x.zt") as f:
        for k, a in arrays.items():
            assert np.array_equal(f[k], a)
            assert f[k].dtype == np.float32


def test_same_input_same_bytes(tmp_path):
    ztio.save_file(ARRAYS, tmp_path / "a.zt", metadata={"k": "v"})
    ztio.save_file(dict(reversed(list(ARRAYS.items()))), tmp_path / "b.zt", metadata={"k": "v"})
    assert (tmp_path / "a.zt").read_bytes() == (tmp_path / "b.zt").read_bytes()


def test_output_is_the_rust_writers(tmp_path):
    """`zt convert` (the Rust writer, through the library) and ztio.save_file make the same
    v2 file from the same tensors and metadata."""
    zt = zt_bin()
    if zt is None:
        pytest.skip("the zt binary is not built (the test command builds it)")
    src = FIXTURES / "interop" / "safetensors" / "numpy.safetensors"
    rust = tmp_path / "rust.zt"
    subprocess.run([zt, "convert", str(src), str(rust)], check=True, capture_output=True)
    with ztio.open(src) as f:
        tensors = {k: f[k] for k in f.keys()}
        meta = f.attributes
    ours = tmp_path / "ours.zt"
    ztio.save_file(tensors, ours, metadata=meta)
    assert ours.read_bytes() == rust.read_bytes()


def test_writer_adds_one_array_at_a_time(tmp_path):
    path = tmp_path / "w.zt"
    with ztio.Writer(path, compression=5, digest="sha256") as w:
        for i in range(4):
            w.add(f"layer.{i}", np.full((8, 8), i, np.float32), attributes={"index": i})
        w.set_attribute("nested", {"a": [1, 2.5, None, b"\x00"], "b": True})
    with ztio.open(path) as f:
        assert f.keys() == [f"layer.{i}" for i in range(4)]
        assert f.info("layer.2").attributes == {"index": 2}
        assert f.info("layer.2").components[0].encoding == "zt.zstd-seekable/1"
        assert f.info("layer.2").components[0].digest.startswith("sha256:")
        assert f.attributes["nested"] == {"a": [1, 2.5, None, b"\x00"], "b": True}
        assert f["layer.3"].sum() == 3 * 64


def test_numpy_scalars_are_attributes_and_arrays_are_refused_with_the_way(tmp_path):
    # A computed learning rate or step is a numpy scalar: stored as the number it holds.
    metadata = {"lr": np.float32(0.5), "step": np.int64(-3), "done": np.bool_(True), "xs": [np.uint8(7)]}
    ztio.save_file({"x": np.ones(1, np.float32)}, tmp_path / "s.zt", metadata=metadata)
    got = ztio.open(tmp_path / "s.zt").attributes
    assert got == {"lr": 0.5, "step": -3, "done": True, "xs": [7]}
    assert [type(got[k]) for k in ("lr", "step", "done")] == [float, int, bool]
    with pytest.raises(ztio.ArgumentError, match=r"numpy\.ndarray .*array\.tolist\(\)$"):
        ztio.save_file({"x": np.ones(1)}, tmp_path / "a.zt", metadata={"a": np.arange(3)})
    # A name v2 refuses is the caller's error, not an invalid file.
    with pytest.raises(ztio.ArgumentError, match="^invalid argument: attribute name is empty$"):
        ztio.save_file({"x": np.ones(1)}, tmp_path / "e.zt", metadata={"": 1})


def test_tagged_values_go_to_v1_2_and_are_refused_by_v2(tmp_path):
    with ztio.Writer(tmp_path / "t.zt", version="v1.2") as w:
        w.set_attribute("when", ztio.Tagged(1, 1700000000))
        w.add("x", np.ones(1, np.float32))
    assert ztio.open(tmp_path / "t.zt").attributes == {"when": ztio.Tagged(1, 1700000000)}
    with pytest.raises(ztio.ArgumentError, match="no tags"):
        with ztio.Writer(tmp_path / "t2.zt") as w:
            w.set_attribute("when", ztio.Tagged(1, 1700000000))
            w.add("x", np.ones(1, np.float32))


def test_an_exception_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "keep.zt"
    ztio.save_file({"old": np.ones(2, np.float32)}, path)
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        with ztio.Writer(path) as w:
            w.add("new", np.zeros(3, np.float32))
            raise RuntimeError("killed")
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["keep.zt"]


def test_nothing_is_at_the_path_until_finish(tmp_path):
    path = tmp_path / "late.zt"
    w = ztio.Writer(path)
    w.add("x", np.ones(1, np.float32))
    assert not path.exists()
    w.finish()
    assert path.exists()
    with pytest.raises(ztio.ArgumentError, match="finished"):
        w.add("y", np.ones(1, np.float32))


def test_bad_arguments_are_argument_errors(tmp_path):
    with pytest.raises(ztio.ArgumentError, match="^tensor 'o': cannot store numpy dtype object"):
        ztio.save_file({"o": np.array(["a"], dtype=object)}, tmp_path / "o.zt")
    nested = {"layer": {"w": np.ones(2, np.float32)}}
    for save in (ztio.save_file, ztio.numpy.save_file):
        with pytest.raises(ztio.ArgumentError, match="^tensor 'layer' [(]given a dict[)]: cannot store"):
            save(nested, tmp_path / "n.safetensors")
    with pytest.raises(ztio.ArgumentError, match="^tensor 's' [(]given a str[)]: cannot store numpy dtype <U1"):
        ztio.Writer(tmp_path / "w.zt").add("s", "x")
    with pytest.raises(ztio.ArgumentError, match="compression"):
        ztio.save_file({"x": np.ones(1)}, tmp_path / "x.zt", compression=99)
    with pytest.raises(ztio.ArgumentError, match="version"):
        ztio.Writer(tmp_path / "x.zt", version="v9")
    with pytest.raises(ztio.ArgumentError):
        with ztio.Writer(tmp_path / "d.zt") as w:
            w.add("a", np.ones(1))
            w.add("a", np.ones(1))
    with pytest.raises(ztio.ArgumentError, match="attribute"):
        with ztio.Writer(tmp_path / "e.zt") as w:
            w.set_attribute("bad", object())
    # An ml_dtypes dtype that looks like a stored one: the refusal lists those it takes.
    ml = pytest.importorskip("ml_dtypes")
    with pytest.raises(ztio.ArgumentError) as refused:
        ztio.save_file({"q": np.zeros(2, ml.float8_e4m3)}, tmp_path / "q.zt")
    assert str(refused.value) == (
        "tensor 'q': cannot store numpy dtype float8_e4m3 (ztio stores bool, integer, float16/32/64 "
        "and complex64/128 dtypes, and of ml_dtypes' bfloat16, float8_e4m3fn, float8_e5m2, "
        "float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu, int4, uint4, int2, uint2, float4_e2m1fn, "
        "float6_e2m3fn, float6_e3m2fn only)"
    )


def test_sub_byte_arrays_are_stored_packed_and_read_unpacked(tmp_path):
    ml = pytest.importorskip("ml_dtypes")
    # Each type's values, and the bytes onnx packs them into (fixtures/interop/onnx, dtypes_raw).
    cases = {
        "int4": ([[-8, -1, 0], [1, 6, 7]], "i4", "f81076"),
        "uint4": ([0, 15, 3, 9, 1], "u4", "f09301"),
        "int2": ([[-2, -1, 0], [1, 1, -2]], "i2", "4e09"),
        "uint2": ([0, 3, 1, 2, 3], "u2", "9c03"),
        "float4_e2m1fn": ([0.5, -6.0, 1.5], "f4_e2m1", "f103"),
        "float6_e2m3fn": ([0.5, -7.5, 1.125, 0.0, 3.0], "f6_e2m3", "c49f0014"),
    }
    for name, (values, ours, hex_bytes) in cases.items():
        a = np.array(values, np.float32).astype(getattr(ml, name))
        for target, options in [("v2.zt", {}), ("v12.zt", {"version": "v1.2"}), ("z.zt", {"compression": True})]:
            path = tmp_path / f"{name}.{target}"
            ztio.save_file({"x": a}, path, **options)
            with ztio.open(path) as f:
                assert f.info("x").dtype == ours and f.info("x").shape == a.shape, (name, target)
                assert f.component("x", "data").tobytes().hex() == hex_bytes, (name, target)
                back = f.get_tensor("x")
                assert back.dtype == a.dtype and back.shape == a.shape, (name, target)
                np.testing.assert_array_equal(back.astype(np.float32), np.array(values, np.float32))
                np.testing.assert_array_equal(f.dequantize("x"), np.array(values, np.float32))
    # One element, and none: the storage is one byte, and no byte.
    for shape in [(), (0, 3)]:
        a = np.zeros(shape, ml.int4)
        ztio.save_file({"x": a}, tmp_path / "small.zt")
        back = ztio.numpy.load_file(tmp_path / "small.zt")["x"]
        assert back.dtype == a.dtype and back.shape == shape
    # safetensors stores FP4 (F4); it has no 4- or 2-bit integers.
    fp4 = np.array([0.5, -6.0, 1.5, 1.0], np.float32).astype(ml.float4_e2m1fn)
    back = ztio.numpy.load(ztio.numpy.save({"x": fp4}))["x"]
    assert back.dtype == fp4.dtype and np.array_equal(back.astype(np.float32), fp4.astype(np.float32))
    with pytest.raises(ztio.ArgumentError, match="safetensors has no i4 type"):
        ztio.numpy.save({"x": np.zeros(2, ml.int4)})


def test_safetensors_output_is_the_rust_writers(tmp_path):
    """ztio.numpy.save_file to a .safetensors path writes what `zt convert` writes (the Rust
    writer, itself checked byte for byte against safetensors.serialize)."""
    zt = zt_bin()
    if zt is None:
        pytest.skip("the zt binary is not built (the test command builds it)")
    plain = {k: v for k, v in ARRAYS.items() if k not in ("c128", "e4m3fnuz", "e5m2fnuz")}
    ours, via_zt, rust = tmp_path / "ours.safetensors", tmp_path / "src.zt", tmp_path / "rust.safetensors"
    ztio.numpy.save_file(plain, ours, metadata={"a": "b"})
    ztio.save_file(plain, via_zt, metadata={"a": "b"})
    subprocess.run([zt, "convert", str(via_zt), str(rust)], check=True, capture_output=True)
    assert ours.read_bytes() == rust.read_bytes()
    back = ztio.numpy.load_file(ours)
    for k, a in plain.items():
        assert back[k].tobytes() == a.tobytes() and back[k].shape == a.shape, k


def _interrupted(code: str, tmp_path, sig) -> subprocess.CompletedProcess:
    """Runs ``code`` (which saves something large to ``out``) in a fresh interpreter and sends
    it ``sig`` once it has started writing."""
    import signal
    import sys
    import time

    script = (
        "import numpy as np, ztio, ztio.numpy, sys\n"
        "big = {f't{i}': np.random.default_rng(i).standard_normal(1 << 24) for i in range(8)}\n"
        "print('ready', flush=True)\n" + code
    )
    p = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout.readline().strip() == b"ready"
    time.sleep(0.3)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


@pytest.mark.parametrize(
    "code",
    [
        "ztio.numpy.save_file(big, 'out.safetensors')",
        "ztio.save_file(big, 'out.zt', compression=True)",
    ],
)
def test_ctrl_c_stops_a_save_promptly_and_leaves_nothing(tmp_path, code):
    import signal

    done = _interrupted(code, tmp_path, signal.SIGINT)
    assert b"KeyboardInterrupt" in done.stderr, done.stderr.decode()
    assert sorted(os.listdir(tmp_path)) == []


def test_a_killed_save_leaves_nothing(tmp_path):
    import signal

    done = _interrupted("ztio.save_file(big, 'out.zt', compression=True)", tmp_path, signal.SIGKILL)
    assert done.returncode == -signal.SIGKILL
    assert sorted(os.listdir(tmp_path)) == []


def test_verify_true_checks_a_zero_copy_read(tmp_path):
    path = tmp_path / "m.zt"
    ztio.save_file({"a": np.arange(16, dtype=np.float32)}, path)
    with ztio.open(path) as f:
        offset = f.info("a").components[0].offset
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    bad = tmp_path / "bad.zt"
    bad.write_bytes(bytes(data))
    with ztio.open(bad) as f:
        f.get_tensor("a")  # zero-copy: not hashed
        with pytest.raises(ztio.ChecksumError, match='object "a"'):
            f.get_tensor("a", verify=True)
    with ztio.open(bad, verify=True) as f, pytest.raises(ztio.ChecksumError):
        f.get_tensor("a")
    with pytest.raises(ztio.ChecksumError):
        ztio.numpy.load_file(bad, verify=True)
    # An unmapped read copies every byte, and checks what it copies.
    with ztio.open(bad, unmapped=True) as f, pytest.raises(ztio.ChecksumError):
        f.get_tensor("a")


def test_a_million_tiny_tensors_cost_little_more_than_their_listing(tmp_path):
    # Memory per tensor of a .safetensors save, in a process of its own (peak resident size
    # only grows): about 420 bytes here, where safetensors 0.8 takes about 520 and ztio took
    # about 1,070 when each tensor's shape, name, type and buffer export were copied over.
    probe = (
        "import resource, sys, numpy as np, ztio.numpy\n"
        "n = 200_000\n"
        "tensors = {f'layer.{i}.w': np.full(4, i, np.float32) for i in range(n)}\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "ztio.numpy.save_file(tensors, sys.argv[1])\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print((after - before) * 1024 / n)\n"
    )
    out = tmp_path / "many.safetensors"
    run = subprocess.run([sys.executable, "-c", probe, str(out)], check=True, capture_output=True, text=True)
    per_tensor = float(run.stdout)
    assert per_tensor < 600, f"{per_tensor:.0f} bytes of memory per tensor saved"
    with ztio.open(out) as f:
        assert len(f.keys()) == 200_000
        assert f["layer.199999.w"].tolist() == [199999.0] * 4


def test_the_native_safetensors_writer_takes_explicit_shapes_as_torch_hands_them(tmp_path):
    # ztio.torch passes each tensor as bytes (a uint8 view) with its shape given apart: for
    # FP4 the shape counts two elements a byte. numpy callers pass None, the array's own.
    from ztio import _native

    packed = np.array([0x21, 0x43, 0x65, 0x87], np.uint8)
    items = [
        ("fp4", "u8", "f4_e2m1", [2, 4], packed),
        ("plain", "f32", None, None, np.arange(6, dtype=np.float32).reshape(2, 3)),
    ]
    path = tmp_path / "explicit.safetensors"
    _native.save_safetensors(items, {}, str(path))
    with ztio.open(path) as f:
        assert f.info("fp4").shape == (2, 4)
        assert f.info("plain").shape == (2, 3)
        assert f["plain"].tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ztio.ArgumentError, match="numpy array"):
        _native.save_safetensors([("b", "u8", None, [3], b"abc")], {}, str(path))
    with pytest.raises(ztio.ArgumentError, match="C-contiguous"):
        _native.save_safetensors([("t", "f32", None, None, np.ones((3, 3), np.float32).T[:2])], {}, str(path))
