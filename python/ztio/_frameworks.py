"""The frameworks ``safe_open(..., framework=...)`` can hand tensors to: a small registry in
the core, filled by the framework modules (``ztio.torch``, ...) when they are imported, so that
the core never imports a framework module; each framework module imports the core and numpy
only."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional

#: framework name -> ``to_tensor(file, name, device)``.
_CONVERTERS: Dict[str, Callable[[Any, str, str], Any]] = {}
#: framework name -> ``from_numpy(array, device, kind)``, for values read as numpy (slices).
_FROM_NUMPY: Dict[str, Callable[[Any, str, Optional[str]], Any]] = {}


def register(
    names: Iterable[str],
    to_tensor: Callable[[Any, str, str], Any],
    from_numpy: Optional[Callable[[Any, str, Optional[str]], Any]] = None,
) -> None:
    """Makes ``to_tensor(file, name, device)`` the reader of objects for every framework name
    in ``names`` (``("pt", "torch")``), and ``from_numpy(array, device, kind)`` its conversion
    of arrays read as numpy."""
    for n in names:
        _CONVERTERS[n] = to_tensor
        if from_numpy is not None:
            _FROM_NUMPY[n] = from_numpy


def from_numpy(framework: str, array: Any, device: str, kind: Optional[str] = None) -> Any:
    """A numpy array as the framework's tensor (numpy arrays as they are). ``kind``: the type
    whose storage integers the array holds, when numpy has no such dtype (see
    ``ztio._bridge.ToFramework``)."""
    convert = _FROM_NUMPY.get(framework)
    return array if convert is None else convert(array, device, kind)


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
