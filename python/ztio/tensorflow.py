"""safetensors' ``safetensors.tensorflow`` functions over ztio: ``tf.Tensor`` in and out.
A tensor whose bytes lie aligned to 64 bytes in the file's private (copy-on-write) map
becomes a TensorFlow tensor over those bytes through DLPack, with no copy (every tensor of a
``.zt`` file ztio wrote); the tensor holds the map while it lives. Others are copied, as
safetensors copies every one: by numpy into memory aligned to 64 bytes that TensorFlow takes
as it lies (on worker threads in a whole-file load). ``safe_open(..., framework="tf")`` reads
them too. TensorFlow is imported only when called."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._bridge import CopyOnWorkers, aligned_copy, functions, typed_by_ml_dtypes

__all__ = ["load_file", "save_file", "load", "save"]


#: The alignment TensorFlow's kernels require of a tensor's memory (Eigen's widest vectors,
#: `Tensor::IsAligned`): a kernel handed a tensor that is not so aligned aborts the process,
#: so only such memory is shared.
_TF_ALIGN = 64


def _tf_tensor(array: np.ndarray, device: str = "cpu", kind: Optional[str] = None) -> Any:
    import tensorflow as tf

    typed = typed_by_ml_dtypes(array, kind)
    shared = _shared(tf, typed)
    if shared is None and _copies(typed, device, None):
        # Copied aligned by numpy and shared: `tf.convert_to_tensor` makes the same one copy
        # about ten times slower (3.3-5.1 s against 0.27-0.43 s for a 1 GiB load, warm).
        shared = _shared(tf, aligned_copy(typed))
    return shared if shared is not None else tf.convert_to_tensor(typed)


def _shared(tf: Any, array: np.ndarray) -> Any:
    """A tensor over ``array``'s own memory, through DLPack, or ``None`` where TensorFlow must
    have a copy: memory not aligned to :data:`_TF_ALIGN`, a strided array, no elements, or a
    read-only array (TensorFlow may reuse an input's buffer for an op's output, and write
    into it: only a private map or the reader's own buffer may take that). Types numpy's
    DLPack export does not carry (ml_dtypes' bfloat16 and FP8) travel as their bits and are
    cast back without a copy (`tf.bitcast`)."""
    if not (array.flags.writeable and array.flags.c_contiguous and array.size):
        return None
    if array.ctypes.data % _TF_ALIGN:
        return None
    from_dlpack = tf.experimental.dlpack.from_dlpack
    try:
        if array.dtype.isbuiltin == 1:
            return from_dlpack(array.__dlpack__())
        bits = array.view(f"u{array.dtype.itemsize}")
        return tf.bitcast(from_dlpack(bits.__dlpack__()), tf.as_dtype(array.dtype))
    except (AttributeError, BufferError, TypeError, ValueError, RuntimeError, tf.errors.OpError):
        return None  # an older TensorFlow or numpy, or a type one of them lacks: a copy


def _numpy(tensor: Any) -> np.ndarray:
    # `np.asarray` takes an eager tensor on the CPU through its `__array__`, a view of the
    # tensor's own buffer; `.numpy()` copies it first (a save of 1 GiB spent 0.2-2.2 s in those
    # copies, more than the write). A tensor elsewhere comes to the host either way.
    return np.asarray(tensor)


def _keeps_aligned(dtype: np.dtype, device: str) -> bool:
    """Whether TensorFlow keeps an aligned array of ``dtype`` as it lies (:func:`_shared`
    takes it through DLPack). The one-byte types of ml_dtypes (FP8) go through
    `tf.convert_to_tensor` in any case, so an aligned copy of them would be a second one."""
    return dtype.isbuiltin == 1 or dtype.itemsize > 1


def _copies(array: np.ndarray, device: str, kind: Optional[str]) -> bool:
    """Whether TensorFlow would copy ``array`` (it is not aligned, or read-only): then a
    whole-file load makes the copy on a worker, aligned, and TensorFlow takes that as it
    lies (:func:`_shared`)."""
    shareable = array.flags.writeable and array.ctypes.data % _TF_ALIGN == 0
    carried = _keeps_aligned(array.dtype, device)
    return not shareable and carried and array.flags.c_contiguous and array.size > 0


_ON_WORKERS = CopyOnWorkers(
    copies=_copies,
    copy=aligned_copy,
    finish=lambda copied, array, device, kind: _tf_tensor(copied, device, kind),
)


load_file, load, save_file, save = functions(
    ("tf", "tensorflow"),
    "TensorFlow tensors",
    _tf_tensor,
    _numpy,
    on_workers=_ON_WORKERS,
    keeps_aligned=_keeps_aligned,
)
