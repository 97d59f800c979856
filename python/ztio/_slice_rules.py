"""The index rules of safetensors 0.8's ``get_slice(name)[...]``, so that ``safe_open`` answers
an index as safetensors does: the same result, or an error of the same class and words.

safetensors has two sets of rules, and which one applies depends on how the file was opened:

- torch and Paddle over a memory map index the whole tensor with the framework's own
  ``__getitem__`` (``None``, lists, bools, negative indexes past the end all mean what they
  mean in torch). :func:`plain_index` tells which indexes our reader can answer with the same
  values without reading the whole tensor; the rest go to the framework.
- every other framework, and any framework with ``backend="pread"``, parses the index itself
  (:func:`safetensors_index`): ints, slices with a positive step, one ``...``; an index past
  the end of a dimension is an error, never clamped.

Two cases are answered where safetensors 0.8 fails, written down in docs/decisions.md: a
slice whose stop lies before its start (safetensors raises ``SystemError`` from a negative
size) selects nothing, and a full slice (``:`` or ``...``) of a dimension of size 0 selects
that empty dimension instead of raising "index 0 out of bounds".
"""

from __future__ import annotations

import itertools
import operator
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .errors import ArgumentError

#: One parsed index per dimension: ``(start, stop, step, selects)``; ``start`` and ``stop``
#: are ``None`` where the slice left them out, ``selects`` is True for an integer index.
_Indexer = Tuple[Optional[int], Optional[int], int, bool]


def plain_index(key: Any, shape: Sequence[int]) -> bool:
    """Whether ``key`` is made only of what means the same to torch (and Paddle) as to our
    reader: Python or numpy ints inside their dimension, slices of int bounds with a positive
    step, at most one ``...``, no more indexes than dimensions. Bools, ``None``, lists and
    tensors are not: the framework answers those."""
    items = key if type(key) is tuple else (key,)
    ellipses = 0
    explicit = 0
    for item in items:
        if item is Ellipsis:
            ellipses += 1
        elif type(item) is slice:
            for bound in (item.start, item.stop):
                if bound is not None and type(bound) is not int:
                    return False
            if item.step is not None and (type(item.step) is not int or item.step < 1):
                return False
            explicit += 1
        elif type(item) is int or isinstance(item, np.integer):
            explicit += 1
        else:
            return False
    if ellipses > 1 or explicit > len(shape):
        return False
    # Ints must lie inside their dimension (torch raises its own IndexError otherwise).
    dim = 0
    for item in items:
        if item is Ellipsis:
            dim += len(shape) - explicit
            continue
        if type(item) is not slice:
            n = shape[dim]
            if not -n <= int(item) < n:
                return False
        dim += 1
    return True


def safetensors_index(key: Any, shape: Sequence[int], bits: int) -> Tuple[List[Tuple[int, int]], Optional[Tuple[Any, ...]]]:
    """``key`` checked by safetensors' rules for a tensor of ``shape`` whose elements take
    ``bits`` bits, as the box to read (one ``(start, stop)`` per dimension) and the index to
    apply to that box (``None``: the box is the answer), giving the values safetensors gives.
    Raises what safetensors raises, with its words.

    >>> safetensors_index((slice(1, 3), 2), (4, 5), 32)
    ([(1, 3), (2, 3)], (slice(None, None, None), 0))
    """
    parsed = _parse(key, shape)

    def failure(what: str) -> ArgumentError:
        shown = "[" + ", ".join(_show(p) for p in parsed) + "]"
        return ArgumentError(f"Error during slicing {shown} with shape {list(shape)}: {what}")

    ndim = len(shape)
    if len(parsed) > ndim:
        raise failure("more slicing indexes than dimensions in tensor")
    box: List[Tuple[int, int]] = [(0, n) for n in shape]
    local: List[Any] = [_ALL] * ndim
    cut = False  # whether the box needs an index to apply to it
    span = bits
    have_runs = False
    # Innermost dimension first, as safetensors walks them: the first error it meets is
    # the one it reports.
    for i in range(len(parsed) - 1, -1, -1):
        n = shape[i]
        start, stop, step, selects = parsed[i]
        if start is None and stop is None:
            if span % 8 and n:
                have_runs = _check_alignment(0, n, step, n, span, have_runs, failure)
            if step != 1 and n:
                local[i] = slice(None, None, step)
                cut = True
            # All of a dimension, an empty one too (safetensors refuses that one).
            span *= n
            continue
        first = 0 if start is None else start
        end = n if stop is None else stop
        if first >= n or end > n:
            asked = first if first >= n else end - 1
            raise failure(f"index {asked} out of bounds for tensor dimension #{i} of size {n}")
        if end < first:
            end = first  # nothing (safetensors fails with a negative size)
        if span % 8:
            have_runs = _check_alignment(first, end, step, n, span, have_runs, failure)
        box[i] = (first, end)
        if selects:
            local[i] = 0
            cut = True
        elif step != 1 and end > first:
            local[i] = slice(None, None, step)
            cut = True
        span *= n
    for n in shape[len(parsed) :]:
        span *= n
    if span % 8 and not have_runs:
        raise failure(_MISALIGNED)
    return box, (tuple(local) if cut else None)


_ALL = slice(None)


_MISALIGNED = (
    "The slice is slicing for subbytes dtypes, and the slice does not end up at a byte "
    "boundary, this is invalid."
)


def _check_alignment(first: int, end: int, step: int, n: int, span: int, have_runs: bool, failure: Any) -> bool:
    """safetensors' byte-boundary checks for elements smaller than a byte; whether runs of
    bytes have been cut by this dimension or an inner one."""
    if not have_runs:
        if step == 1 and first == 0 and end == n:
            return False
        if step == 1:
            if first * span % 8 or end * span % 8:
                raise failure(_MISALIGNED)
            return True
        # Whether m * span is a multiple of 8 repeats with a period dividing 8, so the first
        # eight indexes decide for the whole range.
        picked = list(itertools.islice(range(first, end, step), 8))
        if any(m * span % 8 or (m + 1) * span % 8 for m in picked):
            raise failure(_MISALIGNED)
        return have_runs or bool(picked)
    if any(m * span % 8 for m in itertools.islice(range(first, end, step), 8)):
        raise failure(_MISALIGNED)
    return True


def _parse(key: Any, shape: Sequence[int]) -> List[_Indexer]:
    if isinstance(key, tuple):
        items = key
    elif isinstance(key, list):
        if not key:
            return [(0, 0, 1, False)]  # an empty list selects nothing
        raise ArgumentError("Non empty lists are not implemented")
    else:
        items = (key,)
    ellipses = 0
    for item in items:
        if item is Ellipsis:
            ellipses += 1
    if ellipses > 1:
        raise ArgumentError("Only one ellipsis (...) is allowed in slice index")
    parsed: List[_Indexer] = []
    for item in items:
        if type(item) is slice:
            start, stop, step = item.start, item.stop, item.step
            if start is not None:
                start = _unsigned(start)
            if stop is not None:
                stop = _unsigned(stop)
            if step is None:
                step = 1
            else:
                step = operator.index(step)
                if step < 1:
                    raise ArgumentError(f"Slice step must be a positive integer, got {step}")
            parsed.append((start, stop, step, False))
        elif item is Ellipsis:
            parsed.extend([(None, None, 1, False)] * max(len(shape) - (len(items) - 1), 0))
        else:
            dim = len(parsed)
            index = item if type(item) is int and -(1 << 31) <= item < 1 << 31 else _int32(item)
            if index is None:
                raise ArgumentError(
                    f"Unsupported slice index at position {dim}: expected slice, int, or ellipsis"
                )
            if index < 0:
                size = shape[dim] if dim < len(shape) else 0
                if index + size < 0:
                    raise ArgumentError(f"Invalid index {index} for dimension {dim} of size {size}")
                index += size
            parsed.append((index, index + 1, 1, True))
    return parsed


def _unsigned(bound: Any) -> int:
    """A slice bound as safetensors reads it (an unsigned integer)."""
    value = bound if type(bound) is int else operator.index(bound)
    if value < 0:
        raise OverflowError("can't convert negative int to unsigned")
    if value >= 1 << 64:
        raise OverflowError("int too big to convert")
    return value


def _int32(item: Any) -> Optional[int]:
    """An integer index as safetensors reads it: anything with ``__index__`` that fits 32
    bits; ``None`` for the rest."""
    try:
        value = operator.index(item)
    except TypeError:
        return None
    return value if -(1 << 31) <= value < 1 << 31 else None


def _show(parsed: _Indexer) -> str:
    start, stop, step, selects = parsed
    if selects:
        return str(start)
    text = f"{'' if start is None else start}:{'' if stop is None else stop}"
    return text if step == 1 else f"{text}:{step}"
