"""The frameworks ``safe_open(..., framework=...)`` can hand tensors to: a small registry in
the core, filled by the framework modules (``ztio.torch``, ...) when they are imported, so that
the core never imports a framework module; each framework module imports the core and numpy
only."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional, Union

#: framework name -> ``to_tensor(file, name, device)``.
_CONVERTERS: Dict[str, Callable[[Any, str, str], Any]] = {}
#: framework name -> ``from_numpy(array, device, kind)``, for values read as numpy (slices).
_FROM_NUMPY: Dict[str, Callable[[Any, str, Optional[str]], Any]] = {}
#: framework name -> ``mapped(file, name, told)``: the whole tensor over a map of the file
#: that the framework makes itself (torch's private map), without a copy, or ``None`` where its
#: bytes cannot be viewed as they lie. ``told``: our read-ahead is told of a read of the whole
#: tensor; else the caller tells it of the part it reads (``will_need_slice(...,
#: own_map=True)``).
_MAPPED: Dict[str, Callable[[Any, str, bool], Any]] = {}


def register(
    names: Iterable[str],
    to_tensor: Callable[[Any, str, str], Any],
    from_numpy: Optional[Callable[[Any, str, Optional[str]], Any]] = None,
    mapped: Optional[Callable[[Any, str, bool], Any]] = None,
) -> None:
    """Makes ``to_tensor(file, name, device)`` the reader of objects for every framework name
    in ``names`` (``("pt", "torch")``), ``from_numpy(array, device, kind)`` its conversion
    of arrays read as numpy, and ``mapped(file, name, told)`` its view of a whole tensor in
    its own map of the file (for a framework whose tensors can be strided views of it)."""
    for n in names:
        _CONVERTERS[n] = to_tensor
        if from_numpy is not None:
            _FROM_NUMPY[n] = from_numpy
        if mapped is not None:
            _MAPPED[n] = mapped


def mapped(framework: str, file: Any, name: str, told: bool = False) -> Any:
    """The framework's tensor over the whole of ``name`` in its own map of ``file``, no copy
    made, or ``None`` (no such view for this framework or this tensor); ``told``: tell our
    read-ahead that the whole tensor is read through it."""
    view = _MAPPED.get(framework)
    return None if view is None else view(file, name, told)


def from_numpy(framework: str, array: Any, device: str, kind: Optional[str] = None) -> Any:
    """A numpy array as the framework's tensor (numpy arrays as they are). ``kind``: the type
    whose storage integers the array holds, when numpy has no such dtype (see
    ``ztio._bridge.ToFramework``)."""
    convert = _FROM_NUMPY.get(framework)
    return array if convert is None else convert(array, device, kind)


#: The frameworks whose tensors live on the host only, by the name safetensors gives each.
_HOST_ONLY = {"np": "numpy", "numpy": "numpy", "flax": "flax", "jax": "flax", "tf": "tensorflow",
              "tensorflow": "tensorflow", "mlx": "mlx"}
#: The accelerators safetensors names; ``mps`` is the one that takes no index.
_DEVICE_KINDS = ("cuda", "mps", "npu", "xpu", "xla", "mlu", "musa", "hpu")


def checked_device(framework: str, device: Any) -> Any:
    """``device`` as ``safe_open`` takes it for ``framework``, refused as safetensors 0.8
    refuses it: a device it does not know (``"gpu"``, ``"cpu:0"``, a negative number) is
    invalid for every framework; any device but the CPU is refused for the frameworks whose
    arrays live on the host (numpy, flax, TensorFlow, MLX) rather than ignored. torch and
    Paddle get their device as given, to place tensors as the framework does.

    >>> checked_device("np", None), checked_device("pt", "cuda:1")
    ('cpu', 'cuda:1')
    >>> checked_device("np", "cuda")
    Traceback (most recent call last):
    ztio.errors.ArgumentError: Device cuda:0 is not supported for framework numpy
    """
    from .errors import ArgumentError

    if device is None:
        return "cpu"
    if not isinstance(device, (str, int)):
        # A `torch.device`, say: the framework's to judge; the host-only ones take text.
        if framework in _HOST_ONLY:
            raise ArgumentError(f"device {device} is invalid")
        return device
    shown = _device_name(device)
    if shown is None:
        raise ArgumentError(f"device {device} is invalid")
    host_framework = _HOST_ONLY.get(framework)
    if host_framework is not None and shown != "cpu":
        raise ArgumentError(f"Device {shown} is not supported for framework {host_framework}")
    return device


def _device_name(device: Union[str, int]) -> Optional[str]:
    """How safetensors names ``device`` (``"cuda"`` is ``cuda:0``, ``7`` is CUDA device 7,
    shown as ``7``), or ``None`` where it calls the device invalid."""
    if isinstance(device, int):
        return str(int(device)) if 0 <= device < 2**64 else None
    if device == "cpu":
        return device
    kind, colon, index = device.partition(":")
    if kind not in _DEVICE_KINDS:
        return None
    if colon and not (index.isascii() and index.isdigit()):
        from .errors import ArgumentError

        raise ArgumentError(f"device {device} is invalid: {index!r} is not a device number")
    if kind == "mps":
        return kind
    return f"{kind}:{int(index) if colon else 0}"


def converter(framework: str) -> Callable[[Any, str, str], Any]:
    """The reader registered for ``framework``; the numpy names read as numpy arrays."""
    if framework in ("np", "numpy"):
        return lambda f, name, device: f.get_tensor(name)
    try:
        return _CONVERTERS[framework]
    except KeyError:
        from .errors import ArgumentError

        known = sorted({"np", "numpy", *_CONVERTERS})
        raise ArgumentError(
            f"framework {framework!r} is not supported ({', '.join(known)})"
        ) from None
