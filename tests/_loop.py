"""A watchdog that fails a test when the event loop is blocked.

Usage inside an anyio test::

    async with no_blocking():
        ...  # every await here must let the loop run at least every 100 ms

A background task sleeps in short ticks and records the longest gap between ticks; leaving the
block raises ``AssertionError`` when a gap exceeded the limit (a synchronous call held the loop).
The cyclic garbage collector is paused inside the block (after a full collection before it): a
collection pause of a large test process is not a blocking call of the code under test.
"""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

__all__ = ["LOOP_BLOCK_LIMIT_S", "no_blocking"]

#: The longest the loop may be held by one synchronous stretch of code.
LOOP_BLOCK_LIMIT_S = 0.1
_TICK_S = 0.005


@asynccontextmanager
async def no_blocking(limit_s: float = LOOP_BLOCK_LIMIT_S) -> AsyncIterator[None]:
    """Fail when, inside the block, the loop went more than ``limit_s`` without running."""
    worst = 0.0

    async def watch() -> None:
        nonlocal worst
        last = time.perf_counter()
        while True:
            await anyio.sleep(_TICK_S)
            now = time.perf_counter()
            worst = max(worst, now - last - _TICK_S)
            last = now

    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            await anyio.sleep(0)
            try:
                yield
                # Let the watcher see the gap a blocking call at the very end left behind.
                await anyio.sleep(2 * _TICK_S)
            finally:
                group.cancel_scope.cancel()
    finally:
        if collecting:
            gc.enable()
    assert worst <= limit_s, f"the event loop was blocked for {worst * 1000:.0f} ms"
