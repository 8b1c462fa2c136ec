"""Observers are isolated: their errors and returned coroutines never reach the caller."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from agentskit_chat._observers import notify


async def _async_observer(value: object) -> None:
    raise AssertionError("an observer's coroutine is never run")


def _raising(value: object) -> None:
    raise RuntimeError("observer failed")


@pytest.mark.parametrize(
    "observer",
    [None, str, _raising, _async_observer, lambda value: 42],
    ids=["none", "plain", "raising", "coroutine", "returns-a-value"],
)
def test_notify_never_raises(observer: Callable[[Any], object] | None) -> None:
    notify(observer, "value")


def test_a_returned_coroutine_is_closed_without_running() -> None:
    returned: list[Coroutine[Any, Any, None]] = []

    def observer(value: object) -> Coroutine[Any, Any, None]:
        returned.append(_async_observer(value))
        return returned[0]

    notify(observer, "value")
    assert inspect.getcoroutinestate(returned[0]) == inspect.CORO_CLOSED


def test_notify_passes_the_value_once() -> None:
    seen: list[str] = []
    notify(seen.append, "value")
    assert seen == ["value"]


def test_notify_lets_base_exceptions_through() -> None:
    def interrupted(value: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        notify(interrupted, "value")
