"""ztio: read and write tensor files safely and fast, zero-copy into numpy.

One reader for zTensor files of every version (``.zt`` v0.1, v1.x and v2, shards included),
magnetron ``.mag`` files, ``.safetensors``, GGUF, NumPy ``.npy``/``.npz``, PyTorch checkpoints,
TorchScript archives and distributed checkpoints (``torch.distributed.checkpoint``), ONNX models, HDF5 files (Keras ``.weights.h5``/``.keras``), Flax
checkpoints (``flax_model.msgpack``), TensorFlow checkpoints (``PREFIX.index``) and pickles of
NumPy arrays (Paddle's ``.pdparams``; never run) and Paddle's inference parameters
(``.pdiparams``), TensorFlow Lite models (``.tflite``), Caffe models (``.caffemodel``), OpenVINO models (``.xml`` and ``.bin``),
legacy GGML files (llama.cpp's and whisper.cpp's before GGUF); a
writer of zTensor v2 (default) and v1.2, and of ``.safetensors``. A hostile file raises a
:class:`ztio.Error`, never crashes the interpreter.

Reading::

    >>> import numpy as np, ztio, tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()  # removed when the example ends
    >>> path = os.path.join(tmp.name, "model.zt")
    >>> ztio.save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, path,
    ...                metadata={"framework": "numpy"})
    >>> with ztio.open(path) as f:
    ...     w = f.get_tensor("w")        # points into the memory map: no copy
    ...     print(f.keys(), w.shape, w.dtype, w.flags.writeable, f.metadata())
    ['w'] (2, 3) float32 False {'framework': 'numpy'}
    >>> float(w.sum())                   # still valid after the file is closed
    15.0

The safetensors-compatible surface (:func:`safe_open`, :mod:`ztio.numpy`,
:mod:`ztio.torch`, :mod:`ztio.flax`) lets code written for safetensors run by swapping the import.

Who is at fault is in the exception's class: :class:`FileError` (the file),
:class:`ArgumentError` (the caller), :class:`IoError` (the system), :class:`LimitError`
(a limit), :class:`UnsupportedError` (something we do not decode).
"""

from __future__ import annotations

from ._dtypes import HAVE_ML_DTYPES
from ._file import (
    Components,
    ComponentInfo,
    File,
    Quantized,
    ShardedFile,
    Slice,
    TensorInfo,
    VerifyReport,
    open,
    safe_open,
)
from ._write import Writer, save_file
from .errors import (
    ArgumentError,
    ChecksumError,
    Error,
    FileError,
    IoError,
    OutOfMemoryError,
    LimitError,
    NotFoundError,
    UnsupportedError,
    ZtWarning,
)
from .values import Tagged
from ._native import __version__
from . import _native, _progress
from . import flax, mlx, numpy, paddle, tensorflow, torch  # safetensors-style submodules (each imports its framework on use)

__all__ = [
    "open",
    "safe_open",
    "save_file",
    "load_file",
    "verify",
    "convert",
    "diff",
    "upgrade",
    "merge",
    "rm",
    "File",
    "ShardedFile",
    "Writer",
    "Slice",
    "TensorInfo",
    "ComponentInfo",
    "Components",
    "Quantized",
    "VerifyReport",
    "Tagged",
    "Error",
    "FileError",
    "ChecksumError",
    "UnsupportedError",
    "LimitError",
    "ArgumentError",
    "NotFoundError",
    "IoError",
    "OutOfMemoryError",
    "ZtWarning",
    "HAVE_ML_DTYPES",
    "__version__",
]


def load_file(path):
    """Every tensor of a file as a dict of numpy arrays (see :func:`ztio.numpy.load_file`)."""
    return numpy.load_file(path)


def _run_tool(args, what, progress):
    """Runs the ``zt`` tool's code for ``args`` in this process; a failure raises as the
    library's errors do (:class:`ztio.ChecksumError`, ``FileNotFoundError``, ...)."""
    status = _tool(args, progress)
    if status:
        raise Error(f"zt {what} failed with status {status}")


def _tool(args, progress, stacklevel=4):
    """Runs the tool's code in this process and returns its exit status; its notes (an object
    left out of a conversion, and why) become warnings at the caller of the public function
    (``stacklevel``: this function, its caller, the public function, the user's code)."""
    import warnings

    status, notes = _native.run_tool(args, progress=_progress.listener(progress))
    for note in notes:
        warnings.warn(note, ZtWarning, stacklevel=stacklevel)
    return status


def _paths(*paths):
    """Paths as the tool's last arguments, after ``--``: a name that starts with ``-`` (a
    file's or an object's) is then never read as an option."""
    import os as _os

    return ["--", *(_os.fsdecode(p) for p in paths)]


def _writing(*, force, verify, sync, to=None, compact=False, skip_unreadable=False):
    """The tool's options every writing command takes, as arguments."""
    args = []
    if to is not None:
        args += ["--to", str(to)]
    if compact:
        args.append("--compact")
    if force:
        args.append("--force")
    if not verify:
        args.append("--no-verify")
    if not sync:
        args.append("--no-sync")
    if skip_unreadable:
        args.append("--skip-unreadable")
    return args


def _set_attributes(attributes):
    """``attributes`` (a mapping) as the tool's ``--set KEY=VALUE`` arguments: each value as
    JSON, so text stays text (``"4096"``) and numbers, booleans and lists keep their type;
    ``bytes`` as ``{"bytes": "<hex>"}``, the form the tool reads. ``None`` is ``--unset KEY``:
    the key is left out (as ``dict.pop`` would), not written as null."""
    import json as _json

    from .errors import ArgumentError

    def plain(v):
        if isinstance(v, (bytes, bytearray, memoryview)):
            return {"bytes": bytes(v).hex()}
        if hasattr(v, "tolist"):  # a numpy scalar or array
            return v.tolist()
        raise TypeError(f"{type(v).__name__} is not an attribute value")

    args = []
    for key, value in attributes.items():
        if not isinstance(key, str) or not key or "=" in key:
            raise ArgumentError(f"attribute key {key!r}: a non-empty text without '='")
        if value is None:
            args += ["--unset", key]
            continue
        try:
            text = _json.dumps(value, default=plain, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ArgumentError(f"attribute {key!r}: {e}") from None
        args += ["--set", f"{key}={text}"]
    return args


# What `convert(dtype=...)` takes, by name, to what `zt convert --dtype` calls it.
_CAST_TYPES = {
    "f64": "f64", "float64": "f64", "double": "f64",
    "f32": "f32", "float32": "f32", "float": "f32",
    "f16": "f16", "float16": "f16", "half": "f16",
    "bf16": "bf16", "bfloat16": "bf16",
}


def _cast_type(dtype) -> str:
    """``dtype`` (a name, a numpy dtype or type, a torch dtype) as ``--dtype`` spells it."""
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type):  # np.float16, ml_dtypes.bfloat16
        name = dtype.__name__
    else:  # np.dtype("float16") has a name; torch.float16 prints as "torch.float16"
        name = getattr(dtype, "name", None) or str(dtype)
    name = str(name).lower().removeprefix("torch.")
    try:
        return _CAST_TYPES[name]
    except KeyError:
        raise ArgumentError(
            f"dtype {dtype!r}: floating-point tensors are cast to bf16, f16, f32 or f64"
        ) from None


def convert(
    src,
    dst,
    *,
    to=None,
    compress=None,
    digest=None,
    compact=False,
    force=False,
    verify=True,
    sync=True,
    shard_size=None,
    densify=False,
    dtype=None,
    attributes_as_json=False,
    attributes=None,
    skip_unreadable=False,
    progress=None,
) -> None:
    """What ``zt convert`` does, from Python: any file, set, folder or URL ztio reads to
    ``dst`` (its kind from its extension, or ``to``: ``"zt"``, ``"v1.2"``, ``"safetensors"``,
    ``"gguf"``, ``"mag"``; an ``*.index.json`` makes a sharded set). ``compress`` (a zstd
    level) and ``digest`` (``"sha256"``, ``"crc32c"``, ...) for ``.zt`` output; ``compact``
    puts v2 blobs on 4096-byte boundaries instead of 64 KiB (for files of many small
    tensors); ``force`` replaces an existing ``dst``; ``verify=False`` skips checking the
    digests the input carries; ``sync=False`` skips the fsync; ``shard_size`` (bytes, or a
    text such as ``"5GB"``) cuts a set's shards when ``dst`` is an index, a ``.zt`` into
    zTensor v2's own shards (a root and ``model-00001-of-0000N.zt`` beside it), and a
    ``.gguf`` in llama.cpp's splits (``model-00001-of-0000N.gguf``); ``densify`` writes
    sparse objects dense and quantized ones as f32; ``dtype`` (``"bf16"``, ``"f16"``,
    ``"f32"``, ``"f64"``, their long names such as ``"bfloat16"``, or a numpy or torch float
    type) casts floating-point tensors to it, rounded to nearest, ties to even, and keeps
    integer, bool, FP8 and quantized tensors as they are (``zt convert --dtype``);
    ``attributes_as_json`` writes the file
    attributes the output's metadata cannot hold as their JSON text (else they are an
    error): for ``.safetensors``, whose metadata is text only, a GGUF's numbers or a
    checkpoint's lists; for GGUF, null, maps and lists of mixed types; ``attributes`` (a
    dict) sets file attributes of the output in place of the input's (``zt convert --set``):
    ``{"format": "pt"}`` for transformers, or a legacy llama.cpp model's
    ``llama.context_length`` and ``llama.attention.layer_norm_rms_epsilon`` in GGUF; a key
    whose value is ``None`` is left out (``zt convert --unset``);
    ``skip_unreadable`` leaves out the objects the input lists but cannot read (damaged
    entries), which otherwise fail the conversion.

    >>> import ztio, numpy as np, tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()  # removed when the example ends
    >>> src, dst = os.path.join(tmp.name, "m.zt"), os.path.join(tmp.name, "m.safetensors")
    >>> ztio.save_file({"w": np.ones(2, np.float32)}, src)
    >>> ztio.convert(src, dst, attributes={"format": "pt"}, progress=False)
    >>> ztio.open(dst).metadata()
    {'format': 'pt'}

    The same code as the ``zt`` tool. What it notes on the way (an object left out, and
    why) is a :class:`ztio.ZtWarning`; a failure raises as reads do:
    :class:`ztio.ChecksumError` for bytes whose digest fails, ``FileNotFoundError`` for a
    missing input, ``FileExistsError`` for an existing ``dst`` without ``force``,
    :class:`ztio.ArgumentError` for a conversion the output cannot hold, each with the file,
    object and offset. Ctrl-C raises ``KeyboardInterrupt`` and leaves ``dst`` as it was.
    ``progress``: see :mod:`ztio._progress` (a tqdm bar where a person watches, ``False`` for
    none, or a callable).
    """
    args = ["zt", "convert"]
    args += _writing(
        force=force, verify=verify, sync=sync, to=to, compact=compact, skip_unreadable=skip_unreadable
    )
    if compress is not None:
        args.append(f"--compress={int(compress)}")
    if digest is not None:
        args += ["--digest", str(digest)]
    if shard_size is not None:
        args += ["--shard-size", str(shard_size)]
    if densify:
        args.append("--densify")
    if dtype is not None:
        args += ["--dtype", _cast_type(dtype)]
    if attributes_as_json:
        args.append("--attributes-as-json")
    if attributes:
        args += _set_attributes(attributes)
    _run_tool(args + _paths(src, dst), "convert", progress)


def upgrade(
    src, dst, *, to=None, compact=False, force=False, verify=True, sync=True, skip_unreadable=False, progress=None
) -> None:
    """What ``zt upgrade`` does: any zTensor file (or any file ztio reads) to a ``.zt`` of
    version ``to`` (``"zt"`` or ``"v2"``, the default, or ``"v1.2"``), losslessly: attributes,
    encodings and digests carried over. Other arguments as :func:`convert` takes them.

    >>> import ztio, numpy as np, tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()  # removed when the example ends
    >>> d = tmp.name
    >>> ztio.save_file({"w": np.ones(3, np.float32)}, os.path.join(d, "old.zt"), version="v1.2")
    >>> ztio.upgrade(os.path.join(d, "old.zt"), os.path.join(d, "new.zt"), progress=False)
    >>> ztio.open(os.path.join(d, "new.zt")).version
    'zt v2'
    """
    args = ["zt", "upgrade"]
    args += _writing(
        force=force, verify=verify, sync=sync, to=to, compact=compact, skip_unreadable=skip_unreadable
    )
    _run_tool(args + _paths(src, dst), "upgrade", progress)


def merge(
    inputs,
    dst,
    *,
    to=None,
    compact=False,
    force=False,
    verify=True,
    sync=True,
    attributes=None,
    skip_unreadable=False,
    progress=None,
) -> None:
    """What ``zt merge`` does: the objects of every file in ``inputs`` (files, sets, folders
    or URLs) in one ``.zt`` at ``dst``; a name found in two inputs is an error and nothing is
    written, as is a file attribute the inputs give different values, unless ``attributes``
    (a dict, ``zt merge --set``) gives the output its value (``None``: none, ``--unset``).
    Other arguments (``skip_unreadable`` among them) as :func:`upgrade` takes them.

    >>> import ztio, numpy as np, tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()  # removed when the example ends
    >>> d = tmp.name
    >>> a, b, out = (os.path.join(d, n) for n in ("a.zt", "b.safetensors", "ab.zt"))
    >>> ztio.save_file({"a": np.ones(2, np.float32)}, a)
    >>> ztio.save_file({"b": np.zeros(2, np.int8)}, b)
    >>> ztio.merge([a, b], out, progress=False)
    >>> sorted(ztio.open(out).keys())
    ['a', 'b']
    """
    import os as _os

    if isinstance(inputs, (str, bytes, _os.PathLike)):
        raise ArgumentError("merge takes a list of inputs, not one path")
    args = ["zt", "merge", f"--output={_os.fsdecode(dst)}"]
    args += _writing(
        force=force, verify=verify, sync=sync, to=to, compact=compact, skip_unreadable=skip_unreadable
    )
    if attributes:
        args += _set_attributes(attributes)
    _run_tool(args + _paths(*inputs), "merge", progress)


def rm(src, names, dst, *, to=None, compact=False, force=False, verify=True, sync=True, progress=None) -> None:
    """What ``zt rm`` does: a copy of ``src`` without the objects named in ``names`` (each
    must be there), written as a ``.zt`` to ``dst``; ``src`` itself is not changed. Other
    arguments as :func:`upgrade` takes them.

    >>> import ztio, numpy as np, tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()  # removed when the example ends
    >>> d = tmp.name
    >>> src, out = os.path.join(d, "m.zt"), os.path.join(d, "small.zt")
    >>> ztio.save_file({"keep": np.ones(2, np.float32), "drop": np.zeros(2, np.float32)}, src)
    >>> ztio.rm(src, ["drop"], out, progress=False)
    >>> list(ztio.open(out).keys())
    ['keep']
    """
    import os as _os

    if isinstance(names, str):
        names = [names]
    names = [str(n) for n in names]
    if not names:
        raise ArgumentError("rm needs at least one object name")
    args = ["zt", "rm", f"--output={_os.fsdecode(dst)}"]
    args += _writing(force=force, verify=verify, sync=sync, to=to, compact=compact)
    _run_tool(args + _paths(src) + names, "rm", progress)


def diff(a, b, *, atol=0.0, rtol=0.0, values_only=False, progress=None) -> bool:
    """What ``zt diff`` does: whether two files (sets, folders) hold the same objects with the
    same values; the differences are printed as the tool prints them. A file that cannot be
    read raises as reads do (``FileNotFoundError``, :class:`ztio.FileError`, ...).
    ``atol``/``rtol``: floats are equal when ``|a - b| <= atol + rtol * |b|`` (numpy's rule);
    with either above 0, float objects of different types (a cast) are compared by value.
    ``progress`` as :func:`convert` takes it."""
    args = ["zt", "diff"]
    if atol:
        args.append(f"--atol={float(atol)!r}")
    if rtol:
        args.append(f"--rtol={float(rtol)!r}")
    if values_only:
        args.append("--values-only")
    args += _paths(a, b)
    status = _tool(args, progress, stacklevel=3)
    if status > 1:
        raise Error(f"zt diff failed with status {status}")
    return status == 0


def verify(path, *, progress=None, **options) -> VerifyReport:
    """What ``zt verify`` checks, for a file, a set or a model folder: every digest and
    checksum the file carries and every data rule of its formats (reading all of it; a set
    opens and checks every shard). True when nothing failed; ``errors`` holds each failure as
    the exception it would raise. ``options`` as :func:`open` takes them; ``progress`` as
    :func:`convert` takes it.

    >>> import ztio, numpy as np, tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()  # removed when the example ends
    >>> p = os.path.join(tmp.name, "m.zt")
    >>> ztio.save_file({"w": np.ones(3, np.float32)}, p, digest="sha256")
    >>> bool(ztio.verify(p))
    True
    """
    with open(path, **options) as f:
        return f.verify(progress=progress)
