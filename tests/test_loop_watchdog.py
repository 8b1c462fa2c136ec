"""The event-loop watchdog used by async tests catches a blocking call and nothing else."""

from __future__ import annotations

import time

import anyio
import pytest

from tests._loop import no_blocking

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_blocking_call_fails_the_block() -> None:
    with pytest.raises(AssertionError, match="blocked"):
        async with no_blocking():
            time.sleep(0.25)


async def test_awaiting_keeps_the_loop_running() -> None:
    async with no_blocking():
        for _ in range(5):
            await anyio.sleep(0.05)
