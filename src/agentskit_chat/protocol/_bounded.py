"""The bounded-JSON rule shared by component props, interaction values and confirmation inputs.

A depth-first walk that counts every node (the root and every primitive included), caps
depth, string, key, array and object sizes, and rejects anything that is not plain JSON,
including containers reached twice in the same walk.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Annotated, Any, Final

from pydantic import PlainSerializer, PlainValidator

from ._text import utf16_len
from ._types import freeze, thaw

__all__ = [
    "MAX_BOUNDED_ARRAY_ITEMS",
    "MAX_BOUNDED_DEPTH",
    "MAX_BOUNDED_KEY_UNITS",
    "MAX_BOUNDED_NODES",
    "MAX_BOUNDED_OBJECT_KEYS",
    "MAX_BOUNDED_STRING_UNITS",
    "BoundedJson",
    "is_bounded_json",
]

#: The bounded-JSON limits: nodes (root and primitives included), depth (root is 0), string, array,
#: object and key sizes (lengths in UTF-16 units).
MAX_BOUNDED_NODES: Final = 1000
MAX_BOUNDED_DEPTH: Final = 20
MAX_BOUNDED_STRING_UNITS: Final = 16384
MAX_BOUNDED_ARRAY_ITEMS: Final = 1000
MAX_BOUNDED_OBJECT_KEYS: Final = 1000
MAX_BOUNDED_KEY_UNITS: Final = 256


class _Unbounded(Exception):
    """Internal signal: the walk found a violation and stops."""


class _Walk:
    __slots__ = ("nodes", "seen")

    def __init__(self) -> None:
        self.nodes = 0
        self.seen: set[int] = set()

    def visit(self, value: Any, depth: int) -> None:
        # Both limits are checked on entry, before the node's type is looked at.
        self.nodes += 1
        if self.nodes > MAX_BOUNDED_NODES or depth > MAX_BOUNDED_DEPTH:
            raise _Unbounded
        if value is None or value is True or value is False:
            return
        kind = type(value)
        if kind is str:
            if utf16_len(value) > MAX_BOUNDED_STRING_UNITS:
                raise _Unbounded
            return
        if kind is int or kind is float:
            # JavaScript has one number type: an int too large for a double is Infinity there.
            if not math.isfinite(float(value)):
                raise _Unbounded
            return
        if kind is list or kind is tuple:
            self._enter(value)
            if len(value) > MAX_BOUNDED_ARRAY_ITEMS:
                raise _Unbounded
            for item in value:
                self.visit(item, depth + 1)
            return
        # MappingProxyType is this package's own frozen form of an already-validated object.
        if kind is dict or kind is MappingProxyType:
            self._enter(value)
            items = list(value.items())
            if len(items) > MAX_BOUNDED_OBJECT_KEYS:
                raise _Unbounded
            for key, _ in items:
                if type(key) is not str or utf16_len(key) > MAX_BOUNDED_KEY_UNITS:
                    raise _Unbounded
            for _, item in items:
                self.visit(item, depth + 1)
            return
        raise _Unbounded

    def _enter(self, container: Any) -> None:
        # The empty tuple is a CPython singleton: sharing it is not a reference the caller made,
        # and it cannot form a cycle.
        if type(container) is tuple and not container:
            return
        marker = id(container)
        if marker in self.seen:
            raise _Unbounded
        self.seen.add(marker)


def is_bounded_json(value: object) -> bool:
    """Whether ``value`` is bounded JSON.

    At most 1000 nodes counting the root and every primitive, depth at most 20 (the root is 0),
    strings at most 16384 UTF-16 units, arrays at most 1000 items, objects plain ``dict`` with at
    most 1000 ``str`` keys of at most 256 units each, finite non-bool numbers, and no container
    reached twice (cycles and shared references both fail). Never raises: any internal error,
    such as a hostile object, means ``False``.

    ``tuple`` and ``MappingProxyType`` count as array and object so that values this package has
    already frozen validate again unchanged.

    >>> is_bounded_json({"choices": [1, 2, None]}), is_bounded_json(float("inf"))
    (True, False)
    """
    try:
        _Walk().visit(value, 0)
    except Exception:
        return False
    return True


def _bounded_value(value: Any) -> Any:
    if not is_bounded_json(value):
        raise ValueError("not bounded JSON")
    return freeze(value)


#: Any bounded JSON value (``null`` included), held read-only, written back as plain JSON.
BoundedJson = Annotated[Any, PlainValidator(_bounded_value), PlainSerializer(thaw)]
