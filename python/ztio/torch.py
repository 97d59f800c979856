"""safetensors' ``safetensors.torch`` functions over ztio, for when torch is installed.

A tensor stored raw, little-endian and packed in the file that was opened is served without a
copy, as safetensors serves it: from a private copy-on-write map of the file
(``torch.UntypedStorage.from_file(path, shared=False)``), one per open file, so a tensor is
writable and writing to it never touches the file. Other tensors (compressed, big-endian,
strided, in a shard, misaligned for their type, or read with ``verify=True``) are decoded by
the library into a fresh buffer that torch takes over, without a second copy.
bf16, FP8 (float8_e4m3fn, float8_e5m2, and the fnuz types where torch has them), complex and
the unsigned types map to torch's own dtypes, without ml_dtypes.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

import numpy as np

from . import _frameworks
from ._file import File, load_every_tensor, open_any, unmapped_for_backend
from ._write import Writer, writes_safetensors
from .errors import ArgumentError

__all__ = ["load_file", "save_file", "load", "save", "load_model", "save_model", "storage_ptr", "storage_size"]

# our element name -> torch dtype attribute
_TORCH = {
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u64": "uint64",
    "u32": "uint32",
    "u16": "uint16",
    "u8": "uint8",
    "bool": "bool",
    "f8_e4m3fn": "float8_e4m3fn",
    "f8_e5m2": "float8_e5m2",
    "f8_e4m3fnuz": "float8_e4m3fnuz",
    "f8_e5m2fnuz": "float8_e5m2fnuz",
    "f8_e8m0": "float8_e8m0fnu",
    # Two FP4 values per byte: torch's shape counts bytes, ours (and safetensors') values.
    "f4_e2m1": "float4_e2m1fn_x2",
    "complex64": "complex64",
    "complex128": "complex128",
}


#: ml_dtypes' types that torch has under the same name.
_ML_DTYPES_IN_TORCH = frozenset(
    ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")
)


def _torch():
    import torch

    return torch


def _private_map(f: File, torch: Any) -> Any:
    """The file as one private (copy-on-write) torch storage, made once per open file; `None`
    for what is not a local file."""
    storage = getattr(f, "_torch_storage", None)
    if storage is None:
        path = f.path
        if "://" in path or not os.path.isfile(path):
            return None
        size = os.path.getsize(path)
        if size == 0:
            return None
        storage = torch.UntypedStorage.from_file(path, False, size)
        f._torch_storage = storage
    return storage


#: Our element name -> (torch dtype, its size, an empty tensor of it), made on first use;
#: (None, 0, None) for names torch has no dtype for.
_SPAN_KINDS: Dict[str, Tuple[Any, int, Any]] = {}


def _span_kind(element: str, torch: Any) -> Tuple[Any, int, Any]:
    kind = _SPAN_KINDS.get(element)
    if kind is None:
        attr = _TORCH.get(element)
        dtype = getattr(torch, attr, None) if attr else None
        if dtype is None:
            kind = (None, 0, None)
        else:
            empty = torch.empty(0, dtype=dtype)
            kind = (dtype, empty.element_size(), empty)
        _SPAN_KINDS[element] = kind
    return kind


def _torch_shape(element: str, shape: Sequence[int]) -> Tuple[int, ...]:
    """Our shape as torch's: FP4 holds two values a byte, and torch's shape counts bytes."""
    if element == "f4_e2m1" and shape:
        return (*shape[:-1], shape[-1] // 2)
    return tuple(shape)


def _mapped(f: File, name: str, torch: Any, told: bool = False) -> Optional[Any]:
    """The tensor over the private map of the file, or `None` when its bytes are not the
    tensor as they lie (see the module's doc) and the general path must look closer. Made
    from the object's place in the file alone (`Reader.raw_span`), not its listing: a file
    of many small tensors spent more time building listings than loading. ``told``: tell our
    read-ahead of the read, which torch makes through its own map (``safe_open``'s tensors,
    one at a time, and slices by keys other than plain boxes; a whole-file load fills the
    page cache itself, and a plain box tells it of the box alone)."""
    if getattr(f, "_verify", False) or getattr(f, "_unmapped", False):
        return None
    span = f._native.raw_span(name, told)
    if span is None:
        return None
    element, shape, offset, length = span
    dtype, itemsize, empty = _span_kind(element, torch)
    if dtype is None or offset % itemsize:
        return None
    shape = _torch_shape(element, shape)
    numel = 1
    strides = []
    for d in reversed(shape):
        strides.append(numel)
        numel *= d
    if numel == 0 or length != numel * itemsize:
        return None
    storage = _private_map(f, torch)
    if storage is None or offset + length > storage.nbytes():
        return None
    return empty.new_empty(0).set_(storage, offset // itemsize, shape, tuple(reversed(strides)))


def _tensor(f: File, name: str, device: str = "cpu", told: bool = False) -> Any:
    torch = _torch()
    f = f._file_for(name)  # a set's shard
    t = _mapped(f, name, torch, told)
    if t is not None:
        return t if device == "cpu" else t.to(device)
    info = f.info(name)
    if info.format != "dense":
        raise ArgumentError(f"object {name!r} is {info.format}; torch tensors are read from dense objects only")
    if info.defect:
        f.component(name, "data")  # raises the defect as the library words it
    dtype = _span_kind(info.dtype or "", torch)[0]
    if dtype is None:
        raise ArgumentError(f"torch has no dtype for {info.dtype} (object {name!r})")
    shape = _torch_shape(info.dtype or "", info.shape)
    if any(d == 0 for d in shape):
        # No bytes to view: torch cannot view an empty byte buffer as another dtype.
        t = torch.empty(shape, dtype=dtype)
    else:
        # Its bytes as the array read gives them (decoded on a worker thread during a
        # whole-file load: see ztio._file._DecodeAhead).
        raw = f._stored(name).reshape(-1).view(np.uint8)
        if not raw.flags.writeable:
            # A view of the read-only map (a file that is no local file, a shard):
            # torch tensors are writable, so this one is a copy.
            raw = raw.copy()
        t = torch.from_numpy(raw).view(dtype).reshape(shape)
    return t if device == "cpu" else t.to(device)



def load_file(
    filename: Union[str, "os.PathLike[str]"], device: Union[str, int] = "cpu", backend: str = "mmap"
) -> Dict[str, Any]:
    """Every dense tensor of a file as torch tensors on ``device``; ``backend="pread"`` reads
    with positional reads instead of a map, as safetensors' option of that name."""
    f = open_any(filename, unmapped=unmapped_for_backend(backend))
    try:
        return _all_tensors(f, device)
    finally:
        f.close()


def _all_tensors(f: Any, device: Union[str, int]) -> Dict[str, Any]:
    """Every dense tensor of an open file or set, in the order their data lies in it (as
    safetensors)."""
    device = str(device) if not isinstance(device, str) else device
    if isinstance(f, File):
        # torch reads through a map of its own (`_private_map`), not through ours, so our
        # read-ahead never sees its reads: the file is read into the page cache front to back
        # on a thread of the library's instead, and torch's page faults find it there.
        f._native.read_whole_in_background()
    # A set's tensors are views of torch's own maps, made at once while the set is read in
    # behind them (decoded or copied where they cannot be).
    return load_every_tensor(f, lambda name: _tensor(f, name, device), views=True)


def save_file(
    tensors: Mapping[str, Any],
    filename: Union[str, "os.PathLike[str]"],
    metadata: Optional[Mapping[str, str]] = None,
    *,
    sync: bool = True,
    progress: Any = None,
) -> None:
    """Writes torch tensors (on the CPU or moved there) to ``filename``: safetensors, as
    safetensors' own ``save_file`` does, or zTensor v2 for a name ending in ``.zt``.
    ``sync=False`` returns without waiting for the disk; ``progress`` as
    :func:`ztio.save_file` takes it."""
    from . import _native, _progress

    items = _items(tensors)
    path = os.fsdecode(filename)
    told = _progress.callable_or_silent(progress)
    total = sum(int(item[4].nbytes) for item in items)
    told("save", 0, total, False)
    if writes_safetensors(path, drop_in=True):
        meta = None if metadata is None else dict(metadata)
        _native.save_safetensors(items, meta, path, sync=sync)
        told("save", total, total, True)
        return
    done = 0
    with Writer(path, sync=sync) as w:
        for k, v in (metadata or {}).items():
            w.set_attribute(k, v)
        for name, dtype, logical, shape, data in items:
            w.add_bytes(name, shape, dtype, logical, data)
            done += int(data.nbytes)
            told("save", done, total, False)
    told("save", done, total, True)


def save(tensors: Mapping[str, Any], metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """The bytes of a ``.safetensors`` file holding ``tensors``: safetensors' ``save``."""
    from . import _native

    meta = None if metadata is None else dict(metadata)
    return _native.safetensors_bytes(_items(tensors), meta)


def load(data: bytes, device: Union[str, int] = "cpu") -> Dict[str, Any]:
    """Every dense tensor of a file's bytes as torch tensors on ``device``: safetensors'
    ``load``. Each tensor is a copy (torch tensors are writable; ``data`` is not)."""
    f = File._of_bytes(data)
    try:
        return _all_tensors(f, device)
    finally:
        f.close()


def _items(tensors: Mapping[str, Any]) -> list:
    """`(name, dtype, logical, shape, bytes)` for each tensor, as the native writers take them.

    As safetensors: tensors that share memory are refused (``RuntimeError``; ``save_model``
    removes the duplicates), and so are non-contiguous ones (``ValueError``: writing them
    would silently change what a reader gets back for a view)."""
    torch = _torch()
    if not isinstance(tensors, Mapping):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected torch.Tensor but received {type(t)}")
    sparse = [name for name, t in tensors.items() if t.layout != torch.strided]
    if sparse:
        raise ValueError(
            f"You are trying to save a sparse tensors: `{sparse}` which this library does not support."
            " You can make it a dense tensor before saving with `.to_dense()` but be aware this might"
            " make a much larger file than needed."
        )
    by_dtype = {getattr(torch, v): k for k, v in _TORCH.items() if hasattr(torch, v)}
    shared = [sorted(g) for g in _find_shared_tensors(tensors) if len(g) > 1]
    if shared:
        raise RuntimeError(
            f"Some tensors share memory, this will lead to duplicate memory on disk and potential "
            f"differences when loading them again: {shared}. A potential way to correctly save "
            f"your model is to use `save_model`."
        )
    items = []
    for name in sorted(tensors):
        t = tensors[name]
        if not t.is_contiguous():
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{name}` which is not allowed. It "
                f"either means you are trying to save tensors which are reference of each other in "
                f"which case it's recommended to save only the full tensors, and reslice at load "
                f"time, or simply call `.contiguous()` on your tensor to pack it before saving."
            )
        t = t.detach().to("cpu")
        ours = by_dtype.get(t.dtype)
        if ours is None:
            raise ArgumentError(f"cannot store torch dtype {t.dtype} (tensor {name!r})")
        dtype, logical = _storage(ours)
        data = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else np.zeros(0, np.uint8)
        shape = list(t.shape)
        if ours == "f4_e2m1" and shape:
            shape[-1] *= 2
        items.append((name, dtype, logical, shape, data))
    return items


def _storage(ours: str):
    if ours.startswith("f8_") or ours == "f4_e2m1":
        return "u8", ours
    if ours == "complex64":
        return "f32", "complex64"
    if ours == "complex128":
        return "f64", "complex128"
    return ours, None


def _from_numpy(array: np.ndarray, device: str = "cpu", kind: Optional[str] = None) -> Any:
    torch = _torch()
    # A copy where the array is read-only or strided (not ascontiguousarray: it makes a
    # 0-d array 1-d).
    a = array if array.flags.writeable and array.flags.c_contiguous else array.copy(order="C")
    name = kind or a.dtype.name
    if name in _ML_DTYPES_IN_TORCH:
        # torch.from_numpy knows numpy's own types only: bf16 and FP8 (ml_dtypes, or their
        # storage integers without it) go over as integers of their size and are viewed
        # back, no copy.
        t = torch.from_numpy(a.view(np.uint16 if a.itemsize == 2 else np.uint8))
        t = t.view(getattr(torch, name))
    else:
        t = torch.from_numpy(a)
    return t if device == "cpu" else t.to(device)


# `safe_open`'s reads of whole tensors, one at a time: each is told to our read-ahead.
_frameworks.register(
    ("pt", "torch", "pytorch"),
    lambda f, name, device: _tensor(f, name, device, told=True),
    _from_numpy,
    # A slice's view of the whole tensor: a plain box tells the read-ahead of the box alone.
    lambda f, name, told: _mapped(f, name, _torch(), told),
)


# -- shared tensors and whole models, as safetensors.torch has them ------------------------


def storage_ptr(tensor: Any) -> int:
    """The address of the memory a tensor's storage starts at (0 where it has none)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - tensors without storage (meta, some subclasses)
        return 0


def storage_size(tensor: Any) -> int:
    """The bytes of a tensor's whole storage."""
    try:
        return tensor.untyped_storage().nbytes()
    except Exception:  # noqa: BLE001
        return tensor.nelement() * tensor.element_size()


def _end_ptr(tensor: Any) -> int:
    """The address one past the last byte of the tensor's last element, strides included."""
    if tensor.nelement() == 0:
        return tensor.data_ptr()
    last = sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride()))
    return tensor.data_ptr() + (last + 1) * tensor.element_size()


def _is_complete(tensor: Any) -> bool:
    """Whether the tensor covers its whole storage, exactly."""
    return tensor.data_ptr() == storage_ptr(tensor) and tensor.nelement() * tensor.element_size() == storage_size(
        tensor
    )


def _find_shared_tensors(state_dict: Mapping[str, Any]) -> List[Set[str]]:
    """Names whose tensors overlap in memory, grouped: tensors of one storage that overlap
    (by their first and one-past-last bytes) are one group, a tensor alone is a group of one;
    tensors without memory (the meta device) are left out."""
    storages: Dict[Tuple[Any, int, int], List[Tuple[int, int, str]]] = {}
    for name, t in state_dict.items():
        if t.device.type == "meta" or storage_ptr(t) == 0:
            continue
        key = (t.device, storage_ptr(t), storage_size(t))
        storages.setdefault(key, []).append((t.data_ptr(), _end_ptr(t), name))
    groups: List[Set[str]] = []
    for spans in storages.values():
        end = None
        for start, stop, name in sorted(spans):
            if end is not None and start < end:
                groups[-1].add(name)
                end = max(end, stop)
            else:
                groups.append({name})
                end = stop
    return groups


def _remove_duplicate_names(
    state_dict: Mapping[str, Any],
    *,
    preferred_names: Optional[Iterable[str]] = None,
    discard_names: Optional[Iterable[str]] = None,
) -> Dict[str, List[str]]:
    """For each group of tensors sharing memory: the name kept (one whose tensor covers the
    whole storage, among ``preferred_names`` if any is, not among ``discard_names`` if
    another is, the first in order) and the names dropped. ``RuntimeError`` when no tensor of
    a group covers its storage: saving it would store more memory than the tensors hold."""
    preferred = set(preferred_names or ())
    discard = set(discard_names or ())
    removed: Dict[str, List[str]] = {}
    for group in _find_shared_tensors(state_dict):
        complete = sorted(n for n in group if _is_complete(state_dict[n]))
        if not complete:
            raise RuntimeError(
                f"Error while trying to find names to remove to save state dict, but found no suitable "
                f"name to keep for saving amongst: {sorted(group)}. None is covering the entire storage. "
                f"Refusing to save/load the model since you could be storing much more memory than needed."
            )
        if preferred & set(complete):
            complete = sorted(preferred & set(complete))
        if set(complete) - discard:
            complete = sorted(set(complete) - discard)
        keep = complete[0]
        dropped = sorted(group - {keep})
        if dropped:
            removed[keep] = dropped
    return removed


def save_model(
    model: Any,
    filename: Union[str, "os.PathLike[str]"],
    metadata: Optional[Mapping[str, str]] = None,
    force_contiguous: bool = False,
) -> None:
    """Saves a module's state dict, keeping one name of each group of shared tensors (the
    others are recorded in the metadata, ``dropped -> kept``)."""
    state_dict = model.state_dict()
    # As safetensors: no metadata stays none unless a name is dropped.
    meta = None if metadata is None else dict(metadata)
    for kept, dropped in _remove_duplicate_names(state_dict).items():
        for name in dropped:
            meta = {} if meta is None else meta
            meta.setdefault(name, kept)
            del state_dict[name]
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    try:
        save_file(state_dict, filename, metadata=meta)
    except ValueError as e:
        raise ValueError(f"{e}. Tip: use save_model(..., force_contiguous=True) to make every tensor contiguous.") from e


def load_model(
    model: Any,
    filename: Union[str, "os.PathLike[str]"],
    strict: bool = True,
    device: Union[str, int] = "cpu",
    backend: str = "mmap",
) -> Tuple[List[str], List[str]]:
    """Loads a file into a module, its shared tensors included (the file holds one name of
    each group). Returns the missing and unexpected keys; with ``strict``, either is a
    ``RuntimeError`` naming them, as ``load_state_dict`` words it."""
    state_dict = load_file(filename, device=device, backend=backend)
    model_state = model.state_dict()
    dropped = _remove_duplicate_names(model_state, preferred_names=state_dict.keys())
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = set(missing)
    unexpected = list(unexpected)
    for names in dropped.values():
        for name in names:
            if name in missing:
                missing.discard(name)
            else:
                unexpected.append(name)
    if strict and (missing or unexpected):
        lines = []
        if unexpected:
            keys = ", ".join(f'"{k}"' for k in sorted(unexpected))
            lines.append(f"Unexpected key(s) in state_dict: {keys}.")
        if missing:
            keys = ", ".join(f'"{k}"' for k in sorted(missing))
            lines.append(f"Missing key(s) in state_dict: {keys}.")
        detail = "\n    ".join(lines)
        raise RuntimeError(f"Error(s) in loading state_dict for {model.__class__.__name__}:\n    {detail}")
    return sorted(missing), unexpected
