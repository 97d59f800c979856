"""The index rules of safetensors 0.8's ``get_slice(name)[...]``, so that ``safe_open`` answers
an index as safetensors does: the same result, or an error of the same class and words.

safetensors has two sets of rules, and which one applies depends on how the file was opened:

- torch and Paddle over a memory map index the whole tensor with the framework's own
  ``__getitem__`` (``None``, lists, bools, negative indexes past the end all mean what they
  mean in torch). :func:`plain_index` tells which indexes our reader can answer with the same
  values without reading the whole tensor; the rest go to the framework.
- every other framework, and any framework with ``backend="pread"``, parses the index itself:
  ints, slices with a positive step, one ``...``; an index past the end of a dimension is an
  error, never clamped. That parse is in the native module (``python/src/slice_rules.rs``,
  ``Reader.slice_by_safetensors_rules``): for a small tensor, parsing the index in Python
  cost three times the read.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


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
