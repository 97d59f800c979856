"""safetensors' ``safetensors.numpy`` functions over ztio: swap the import and keep the code.

>>> import numpy as np, tempfile, os
>>> from ztio.numpy import save_file, load_file
>>> tmp = tempfile.TemporaryDirectory()  # removed when the example ends
>>> path = os.path.join(tmp.name, "model.safetensors")
>>> save_file({"a": np.zeros((2, 2), np.float32)}, path)
>>> load_file(path)["a"].shape
(2, 2)

``load_file`` opens any kind ztio reads (``.zt`` of every version, ``.mag``,
``.safetensors``); its arrays point into the memory map where the data allows.
``save_file`` writes safetensors, as safetensors does, and zTensor v2 to a name ending in ``.zt``.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

from ._file import File, load_every_tensor, open_any, unmapped_for_backend
from ._write import safetensors_bytes
from ._write import save_file_drop_in as _save

__all__ = ["load_file", "save_file", "load", "save"]


def load_file(
    filename: Union[str, "os.PathLike[str]"], *, verify: bool = False, backend: str = "mmap"
) -> Dict[str, np.ndarray]:
    """Every tensor of a file, by name. Dense raw tensors point into a private, copy-on-write
    map of the file (the arrays keep it alive): writable, as safetensors' are, without a copy
    until a page is written, and a write never reaches the file. Other formats come back as
    :meth:`ztio.File.get_tensor` gives them. ``verify=True`` checks every digest and checksum
    the file carries, zero-copy reads too."""
    f = open_any(filename, verify=verify, writable=True, unmapped=unmapped_for_backend(backend))
    try:
        # Without checks, the arrays are views of the maps (their bytes read as touched).
        return load_every_tensor(f, f.get_tensor, views=not verify)
    finally:
        f.close()


def save_file(
    tensor_dict: Mapping[str, np.ndarray],
    filename: Union[str, "os.PathLike[str]"],
    metadata: Optional[Mapping[str, str]] = None,
    *,
    sync: bool = True,
    progress: Any = None,
) -> None:
    """Writes ``tensor_dict`` to ``filename`` (safetensors, as safetensors' own ``save_file``
    does; zTensor v2 for a name ending in ``.zt``), replacing it atomically. ``sync=False`` returns without waiting
    for the disk (safetensors never waits); ``progress`` as :func:`ztio.save_file` takes it."""
    _save(tensor_dict, filename, metadata, sync=sync, progress=progress)


def save(tensor_dict: Mapping[str, np.ndarray], metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """The bytes of a ``.safetensors`` file holding ``tensor_dict``, as safetensors' ``save``
    makes them (byte for byte: same order, same header)."""
    return safetensors_bytes(tensor_dict, metadata)


def load(data: bytes) -> Dict[str, np.ndarray]:
    """Every tensor of a file's bytes (any kind ztio reads), by name: safetensors' ``load``.
    The arrays are writable views of one copy of ``data``, as safetensors' are writable: a
    write changes that copy only, never ``data``."""
    f = File._of_bytes(data)
    try:
        return {name: f.get_tensor(name) for name in f.keys()}
    finally:
        f.close()
