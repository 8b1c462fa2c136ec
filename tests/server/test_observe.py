"""The outermost middleware on its own: what it counts and logs of a response."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

from agentskit_chat.server._asgi import Receive, Scope, Send
from agentskit_chat.server._observe import HTTP_LOGGER, Observe, Watch

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _scope() -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": "/api/chat", "headers": []}


async def _receive() -> dict[str, Any]:
    return {"type": "http.disconnect"}


def _errors(registry: CollectorRegistry) -> float:
    value = registry.get_sample_value(
        "agentskit_chat_http_server_errors_total", {"route": "/api/chat", "status": "500"}
    )
    return value or 0.0


async def test_an_app_that_raises_before_answering_is_a_logged_and_counted_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()

    async def broken(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("secret detail")

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    caplog.set_level(logging.INFO, logger=HTTP_LOGGER)
    with pytest.raises(RuntimeError):
        await Observe(broken, watch=Watch(registry, "memory"))(_scope(), _receive, send)
    assert _errors(registry) == 1.0
    (record,) = [r for r in caplog.records if r.name == HTTP_LOGGER]
    assert (record.status, record.error_class) == (500, "RuntimeError")  # type: ignore[attr-defined]
    assert "secret detail" not in repr(record.__dict__) + record.getMessage()


async def test_a_request_cancelled_before_answering_is_no_5xx(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()

    async def waiting(scope: Scope, receive: Receive, send: Send) -> None:
        await anyio.sleep_forever()

    async def send(message: Any) -> None:
        raise AssertionError("nothing is sent")

    caplog.set_level(logging.INFO, logger=HTTP_LOGGER)
    with anyio.move_on_after(0.05) as scope:
        await Observe(waiting, watch=Watch(registry, "memory"))(_scope(), _receive, send)
    assert scope.cancelled_caught
    assert _errors(registry) == 0.0
    assert [r for r in caplog.records if r.name == HTTP_LOGGER] == []
