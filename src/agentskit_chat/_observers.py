"""Calling a host's observer so that it can never steer what it observes.

Observers (decision, trace, persistence-error and metric hooks, state listeners) are plain
callables called synchronously. Whatever one raises is swallowed, and an awaitable it returns
is never awaited: a returned coroutine is closed so it does not linger as "never awaited".
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

__all__ = ["notify"]

T = TypeVar("T")


def notify(observer: Callable[[T], object] | None, value: T) -> None:
    """Tell ``observer`` about ``value``, isolated; nothing happens when it is ``None``.

    Example:
        >>> notify(lambda value: 1 / 0, "ignored")  # the error stays with the observer
    """
    if observer is None:
        return
    try:
        result = observer(value)
        if inspect.iscoroutine(result):
            result.close()
    except Exception:
        pass
