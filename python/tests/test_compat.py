"""The safetensors surface: safe_open code runs unchanged against ztio, on safetensors files
and on every other kind. (The same code against safetensors itself is the cross-check
tools/interop/check_ztio.py: the default tests never need safetensors installed.)"""

import errno
import os
import stat
import sys

import numpy as np
import pytest

import ztio
import ztio.numpy
from conftest import FIXTURES

SAFETENSORS = FIXTURES / "interop" / "safetensors" / "numpy.safetensors"


def safetensors_style_loader(safe_open, path):
    """Code as written for safetensors' documentation."""
    tensors = {}
    with safe_open(path, framework="np") as f:
        meta = f.metadata()
        for k in f.keys():
            tensors[k] = f.get_tensor(k)
        first = f.keys()[0]
        part = f.get_slice(first)
        shape = part.get_shape()
        rows = part[: max(shape[0] // 2, 1)] if shape else None
    return tensors, meta, rows


def test_safe_open_runs_safetensors_code_on_a_safetensors_file():
    """The fixture was written by safetensors itself (tools/interop/make_safetensors.py)."""
    tensors, meta, rows = safetensors_style_loader(ztio.safe_open, str(SAFETENSORS))
    with ztio.open(SAFETENSORS) as f:
        assert tensors.keys() == set(f.keys())
        for k, v in tensors.items():
            assert np.array_equal(v, f[k])
        assert meta == f.metadata()
        first = f.keys()[0]
        assert np.array_equal(rows, f[first][: max(f[first].shape[0] // 2, 1)])


def test_safe_open_reads_zt_files_too(tmp_path):
    path = tmp_path / "m.zt"
    ztio.numpy.save_file({"w": np.eye(3, dtype=np.float32)}, path, metadata={"a": "b"})
    tensors, meta, rows = safetensors_style_loader(ztio.safe_open, path)
    assert np.array_equal(tensors["w"], np.eye(3))
    assert meta == {"a": "b"}
    assert rows.shape == (1, 3)


def test_numpy_module_round_trip(tmp_path):
    a = {"x": np.arange(5, dtype=np.int16), "y": np.ones((2, 2), np.float64)}
    for name in ("m.zt", "m.safetensors"):
        ztio.numpy.save_file(a, tmp_path / name)
        back = ztio.numpy.load_file(tmp_path / name)
        assert back.keys() == a.keys()
        for k in a:
            assert np.array_equal(back[k], a[k])


@pytest.mark.parametrize("name", ["model.bin", "model", "model.safetensors", "m.zt.tmp"])
def test_framework_save_file_writes_what_safetensors_writes_unless_named_zt(tmp_path, name):
    """Code swapped over from safetensors keeps writing files safetensors reads, whatever
    their names; only a ``.zt`` name asks for zTensor."""
    a = {"x": np.arange(5, dtype=np.int16), "y": np.ones((2, 2), np.float64)}
    ztio.numpy.save_file(a, tmp_path / name, metadata={"k": "v"})
    assert (tmp_path / name).read_bytes() == ztio.numpy.save(a, metadata={"k": "v"})
    ztio.numpy.save_file(a, tmp_path / "m.zt")
    with ztio.open(tmp_path / "m.zt") as f:
        assert f.version == "zt v2"


def test_ztio_save_file_writes_zt_unless_named_safetensors(tmp_path):
    ztio.save_file({"x": np.arange(3, dtype=np.int8)}, tmp_path / "model.bin")
    with ztio.open(tmp_path / "model.bin") as f:
        assert f.version == "zt v2"


def test_unknown_framework_is_an_argument_error():
    with pytest.raises(ztio.ArgumentError):
        ztio.safe_open(SAFETENSORS, framework="mxnet")


def test_the_stubs_name_every_native_function():
    """_native.pyi lists what the compiled module has, and nothing it lacks."""
    import ast
    import pathlib

    from ztio import _native

    stub = ast.parse((pathlib.Path(ztio.__file__).parent / "_native.pyi").read_text())
    names = {n.name for n in stub.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    public = {n for n in dir(_native) if not n.startswith("_")}
    assert names == public
    for cls in stub.body:
        if isinstance(cls, ast.ClassDef):
            methods = {m.name for m in cls.body if isinstance(m, ast.FunctionDef)} - {"__init__"}
            native = getattr(_native, cls.name)
            assert all(hasattr(native, m) for m in methods), cls.name


def test_a_missing_file_is_a_file_not_found_error(tmp_path):
    missing = tmp_path / "absent.safetensors"
    for call in (lambda: ztio.open(missing), lambda: ztio.numpy.load_file(missing)):
        with pytest.raises(FileNotFoundError) as info:
            call()
        e = info.value
        assert isinstance(e, ztio.IoError) and e.kind == "io"
        assert e.errno == 2 and e.filename == str(missing)
        assert e.strerror == os.strerror(errno.ENOENT)


def test_an_output_that_is_a_folder_is_an_is_a_directory_error_and_stays(tmp_path):
    folder = tmp_path / "out.safetensors"
    folder.mkdir()
    for save in (ztio.numpy.save_file, ztio.save_file):
        with pytest.raises(IsADirectoryError) as info:
            save({"a": np.zeros(2, np.float32)}, folder)
        e = info.value
        assert isinstance(e, ztio.IoError) and e.errno == errno.EISDIR
        assert "a folder, not a regular file" in str(e) and str(folder) in str(e)
    assert folder.is_dir() and not any(folder.iterdir())


def test_an_output_in_a_missing_folder_names_the_folder_and_makes_none(tmp_path):
    inside = tmp_path / "nope" / "model.safetensors"
    calls = (
        lambda: ztio.numpy.save_file({"a": np.zeros(2, np.float32)}, inside),
        lambda: ztio.Writer(inside),
    )
    for call in calls:
        with pytest.raises(FileNotFoundError) as info:
            call()
        e = info.value
        assert isinstance(e, ztio.IoError) and e.errno == errno.ENOENT
        assert f"its folder {tmp_path / 'nope'} does not exist" in str(e), str(e)
    assert not (tmp_path / "nope").exists()


def test_a_file_in_place_of_a_folder_is_a_not_a_directory_error(tmp_path):
    plain = tmp_path / "model.safetensors"
    plain.write_bytes(b"not a folder")
    inside = plain / "model.safetensors"
    calls = (
        lambda: ztio.open(inside),
        lambda: ztio.numpy.load_file(inside),
        lambda: ztio.numpy.save_file({"a": np.zeros(2, np.float32)}, inside),
    )
    for call in calls:
        with pytest.raises(NotADirectoryError) as info:
            call()
        e = info.value
        assert isinstance(e, ztio.IoError) and e.errno == errno.ENOTDIR
    assert plain.read_bytes() == b"not a folder"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_pipe_is_refused_as_input_and_output_without_waiting(tmp_path):
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)  # no writer: a plain open for reading would wait forever
    with pytest.raises(ztio.ArgumentError, match="a pipe, not a regular file"):
        ztio.open(fifo)
    with pytest.raises(ztio.ArgumentError, match="a pipe, not a regular file"):
        ztio.numpy.save_file({"a": np.zeros(2, np.float32)}, fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_folder_with_no_model_is_refused_as_a_library_error(tmp_path):
    with pytest.raises(ztio.Error):
        ztio.open(tmp_path)


def test_components_say_whether_their_elements_are_arranged():
    # A Fortran-order .npy array is gathered on read; a C-order one is not.
    with ztio.open(FIXTURES / "interop/numpy/v1_fortran_f64.npy") as f:
        (c,) = f.info(f.keys()[0]).components
        assert c.arranged is True
    with ztio.open(FIXTURES / "interop/numpy/v1_f32.npy") as f:
        (c,) = f.info(f.keys()[0]).components
        assert c.arranged is False


def test_save_and_load_bytes_match_safetensors_layout(tmp_path):
    tensors = {"b": np.arange(3, dtype=np.int64), "a": np.ones((2, 2), np.float32)}
    data = ztio.numpy.save(tensors, metadata={"k": "v"})
    assert isinstance(data, bytes)
    # The same bytes save_file writes to a .safetensors file.
    ztio.numpy.save_file(tensors, tmp_path / "m.safetensors", metadata={"k": "v"})
    assert data == (tmp_path / "m.safetensors").read_bytes()
    back = ztio.numpy.load(data)
    assert set(back) == {"a", "b"} and back["b"].tolist() == [0, 1, 2]
    # load takes the bytes of any kind ztio reads.
    assert ztio.numpy.load((FIXTURES / "interop/numpy/v1_f32.npy").read_bytes())
    with pytest.raises(ztio.FileError):
        ztio.numpy.load(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}     ")


@pytest.mark.parametrize("metadata, header, read_back", [
    (None, b'{"a":', None),
    ({}, b'{"__metadata__":{},"a":', {}),
    ({"k": "v"}, b'{"__metadata__":{"k":"v"},"a":', {"k": "v"}),
])
def test_no_metadata_and_an_empty_map_stay_apart_as_in_safetensors(
    tmp_path, metadata, header, read_back
):
    # safetensors writes `"__metadata__":{}` for `metadata={}` and none for None, and its
    # metadata() gives `{}` and None back: callers test `is None` (transformers does).
    from ztio import _safetensors

    tensors = {"a": np.ones(2, np.float32)}
    path = tmp_path / "m.safetensors"
    array = tensors["a"]
    spec = {"a": _safetensors.TensorSpec("F32", [2], array.ctypes.data, array.nbytes)}
    writers = [
        lambda: path.write_bytes(ztio.numpy.save(tensors, metadata=metadata)),
        lambda: ztio.numpy.save_file(tensors, path, metadata=metadata),
        lambda: ztio.save_file(tensors, path, metadata=metadata),
        lambda: path.write_bytes(_safetensors.serialize(spec, metadata=metadata)),
        lambda: _safetensors.serialize_file(spec, path, metadata=metadata),
    ]
    for write in writers:
        write()
        assert path.read_bytes()[8:].startswith(header)
        with ztio.safe_open(path, framework="np") as f:
            assert f.metadata() == read_back
        with ztio.open(path) as f:
            assert f.metadata() == read_back and f.attributes == (read_back or {})
        # `zt convert` (the same code) keeps it, an empty map included.
        copy = tmp_path / "copy.safetensors"
        ztio.convert(path, copy)
        assert copy.read_bytes() == path.read_bytes()
        path.unlink()
        copy.unlink()


@pytest.mark.parametrize("metadata, words", [
    ({"k": 1}, "metadata 'k': a value of type int, not str"),
    ({"k": None}, "metadata 'k': a value of type NoneType, not str"),
    ({1: "v"}, "metadata key 1: of type int, not str"),
    ("k=v", "metadata: a str, not a dict of str to str"),
    ([("k", "v")], "metadata: a list, not a dict of str to str"),
])
def test_metadata_that_is_not_text_is_a_type_error_as_in_safetensors(tmp_path, metadata, words):
    # safetensors raises TypeError here; code that catches it must catch ours. Nothing is
    # written.
    out = tmp_path / "m.safetensors"
    for save in (lambda: ztio.numpy.save_file({"a": np.ones(2)}, out, metadata=metadata),
                 lambda: ztio.numpy.save({"a": np.ones(2)}, metadata=metadata)):
        with pytest.raises(TypeError, match=words):
            save()
    assert not out.exists()


@pytest.mark.parametrize("framework, device, words", [
    ("np", "cuda", "Device cuda:0 is not supported for framework numpy"),
    ("numpy", 1, "Device 1 is not supported for framework numpy"),
    ("jax", "mps:0", "Device mps is not supported for framework flax"),
    ("tf", "xla:2", "Device xla:2 is not supported for framework tensorflow"),
    ("np", "gpu", "device gpu is invalid"),
    ("np", "cpu:0", "device cpu:0 is invalid"),
    ("pytorch", "meta", "device meta is invalid"),
    ("pt", -1, "device -1 is invalid"),
    ("pt", "cuda:x", "device cuda:x is invalid"),
])
def test_safe_open_refuses_the_devices_safetensors_refuses(framework, device, words):
    # Refused at open, as safetensors 0.8 refuses them (checked against it): a numpy array
    # asked for on a GPU was handed over on the host without a word.
    with pytest.raises(ztio.Error, match=words):
        ztio.safe_open(SAFETENSORS, framework=framework, device=device)


def test_safe_open_takes_its_arguments_by_safetensors_names():
    # Code in the wild passes the file by name: safe_open(filename=path, framework="pt").
    with ztio.safe_open(filename=SAFETENSORS, framework="np", device="cpu", backend="pread") as f:
        assert f.keys()


def test_safe_open_handle_opens_a_file_object_by_its_path_or_its_bytes():
    import io

    from ztio._safetensors import _safe_open_handle

    want = ztio.numpy.load_file(SAFETENSORS)
    with open(SAFETENSORS, "rb") as handle:
        by_path = _safe_open_handle(handle, "np", "cpu", backend="pread")
    by_bytes = _safe_open_handle(io.BytesIO(SAFETENSORS.read_bytes()), framework="np")
    for f in (by_path, by_bytes):
        with f:
            assert f.keys() == sorted(want)
            for name in f.keys():
                assert f.get_tensor(name).tobytes() == want[name].tobytes()


def test_safe_open_takes_the_cpu_and_pytorch_as_safetensors_does():
    for framework in ("np", "numpy", "flax", "jax", "tf", "tensorflow", "mlx"):
        for device in ("cpu", None):
            ztio.safe_open(SAFETENSORS, framework=framework, device=device).keys()
    # torch's third name; torch itself is imported only when a tensor is asked for.
    ztio.safe_open(SAFETENSORS, framework="pytorch", device="cuda:1").keys()


def test_deserialize_gives_each_tensors_bytes_as_safetensors_does():
    from ztio._safetensors import deserialize

    tensors = {"z": np.arange(3, dtype=np.int8), "m": np.ones(1, np.float64),
               "e": np.zeros((0, 2), np.float32), "s": np.float32(2)}
    got = deserialize(ztio.numpy.save(tensors))
    # In the order of their data (safetensors' save puts the widest types first).
    assert [name for name, _ in got] == ["m", "e", "s", "z"]
    for name, entry in got:
        assert set(entry) == {"shape", "dtype", "data"}
        assert type(entry["data"]) is bytearray
        assert entry["shape"] == list(np.shape(tensors[name]))
        assert bytes(entry["data"]) == np.asarray(tensors[name]).tobytes()
    assert dict(got)["m"]["dtype"] == "F64" and dict(got)["z"]["dtype"] == "I8"
    with pytest.raises(ztio.FileError):
        deserialize(b"garbage")


@pytest.mark.parametrize("module", ["numpy", "flax", "tensorflow", "paddle", "mlx", "torch"])
def test_every_load_file_takes_safetensors_backend_argument(module):
    import importlib
    import inspect

    load_file = importlib.import_module(f"ztio.{module}").load_file
    assert inspect.signature(load_file).parameters["backend"].default == "mmap"
    if module == "numpy":
        assert list(ztio.numpy.load_file(SAFETENSORS, backend="pread"))
    with pytest.raises(ztio.ArgumentError, match="backend 'io_uring' is not one of 'mmap', 'pread'"):
        load_file(SAFETENSORS, backend="io_uring")


def test_arrays_loaded_from_bytes_are_writable_and_leave_the_bytes_alone(tmp_path):
    data = ztio.numpy.save({"w": np.arange(4, dtype=np.float32), "z1": np.zeros(8, np.float32),
                            "z2": np.zeros(8, np.float32)})
    before = bytes(data)
    t = ztio.numpy.load(data)
    t["w"] *= 2
    t["z1"] += 1
    assert t["w"].tolist() == [0, 2, 4, 6] and data == before
    assert t["z2"].tolist() == [0.0] * 8
    assert ztio.numpy.load(data)["w"].tolist() == [0, 1, 2, 3]
    # A .zt file's bytes, where the writer stored z1 and z2 once: still independent.
    ztio.save_file({"z1": np.zeros(8, np.float32), "z2": np.zeros(8, np.float32)}, tmp_path / "z.zt")
    u = ztio.numpy.load((tmp_path / "z.zt").read_bytes())
    u["z1"] += 1
    assert u["z2"].tolist() == [0.0] * 8


def test_loads_hand_tensors_over_in_file_order_as_safetensors_does(tmp_path):
    # safetensors lays out tensors by alignment, then name, and its load_file and
    # get_tensors return them in that order (offset_keys); a loader that touches them in
    # dict order then reads the file front to back.
    path = tmp_path / "o.safetensors"
    tensors = {"a": np.arange(3, dtype=np.uint8), "b": np.arange(2, dtype=np.float64), "c": np.ones(1, np.float32)}
    ztio.numpy.save_file(tensors, path)
    with ztio.open(path) as f:
        assert f.keys() == ["a", "b", "c"]
        assert f.offset_keys() == ["b", "c", "a"]
    assert list(ztio.numpy.load_file(path)) == ["b", "c", "a"]
    with ztio.safe_open(path, framework="np") as f:
        assert list(f.get_tensors()) == f.offset_keys() == ["b", "c", "a"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="names of any bytes: Linux")
def test_names_that_are_not_utf8_keep_their_bytes(tmp_path):
    # Given as bytes or as the str os.fsdecode makes of them (lone surrogates), as Python's
    # own open() takes them; every path that comes back holds the same bytes.
    folder = os.fsencode(tmp_path) + b"/set\xff"
    os.mkdir(folder)
    single = folder + b"/\xfe\xfd.zt"
    tensors = {"a": np.arange(4, dtype=np.float32)}
    ztio.save_file(tensors, single)
    assert np.array_equal(ztio.numpy.load_file(os.fsdecode(single))["a"], tensors["a"])
    ztio.numpy.save_file(tensors, os.fsdecode(folder + b"/model.safetensors"))
    assert ztio.open(folder).keys() == ["a"]  # the folder's model: model.safetensors
    ztio.convert(single, folder + b"/copy.mag")
    assert ztio.diff(single, folder + b"/copy.mag")
    missing = folder + b"/\xfe-missing.zt"
    with pytest.raises(FileNotFoundError) as info:
        ztio.open(missing)
    assert os.fsencode(info.value.filename) == missing
