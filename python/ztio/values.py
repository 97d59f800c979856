"""Attribute values that have no plain Python type."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Tagged"]


class Tagged(NamedTuple):
    """A CBOR-tagged attribute value: the tag number and the value it tags.

    >>> Tagged(1, 1700000000)
    Tagged(tag=1, value=1700000000)
    """

    tag: int
    value: Any
