"""``AskService(new_session_limiter=...)``: asked only when a request would start a stored
conversation, refusing with the Ask service's own 429; on a real SQLite session store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat.protocol import ASK_ERROR_CASES, BackendSiteConfig
from agentskit_chat.service import RateLimitDecision, SessionKey
from agentskit_chat.storage import ChatStores, open_chat_stores
from tests.service._support import (
    CONTEXT,
    FixedLimiter,
    ListRetriever,
    body,
    error_body,
    make_service,
    read_all,
    site,
)

pytestmark = pytest.mark.anyio

REFUSED = RateLimitDecision(allowed=False, retry_after_seconds=30)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[ChatStores]:
    async with open_chat_stores(f"sqlite:///{tmp_path / 'ask.db'}") as opened:
        yield opened


def rate_limited() -> dict[str, Any]:
    case = ASK_ERROR_CASES["rate_limited"]
    return {"error": {"code": case.code, "message": case.message, "retryable": case.retryable}}


class FailingLimiter:
    """A limiter whose store is down."""

    async def check(
        self, *, context: Any, site: BackendSiteConfig, subject_id: str
    ) -> RateLimitDecision:
        raise ConnectionError("limiter store at 10.0.0.9 is down")


async def test_a_new_stored_conversation_is_refused_and_nothing_is_stored(
    stores: ChatStores,
) -> None:
    limiter = FixedLimiter(REFUSED)
    retriever = ListRetriever()
    service = make_service(
        session_store=stores.ask_sessions,
        new_session_limiter=limiter,
        retrievers={"local": retriever},
    )
    response = await service.stream(CONTEXT, body(sessionId="new-1"))
    assert (response.status, error_body(response)) == (429, rate_limited())
    assert response.header("retry-after") == "30"
    assert response.header("x-request-id") == "request-1"
    assert limiter.calls == [("docs", "user-1")]
    assert retriever.requests == []  # refused before any retrieval
    assert await stores.ask_sessions.load(SessionKey("docs", "user-1", "new-1")) is None


async def test_a_stored_conversation_goes_on_without_asking_the_limiter(
    stores: ChatStores,
) -> None:
    allowed = FixedLimiter(RateLimitDecision(allowed=True))
    first = make_service(session_store=stores.ask_sessions, new_session_limiter=allowed)
    events = await read_all(await first.stream(CONTEXT, body(sessionId="kept-1")))
    assert events[-1]["type"] == "done"
    assert allowed.calls == [("docs", "user-1")]
    refusing = FixedLimiter(REFUSED)
    second = make_service(session_store=stores.ask_sessions, new_session_limiter=refusing)
    response = await second.stream(CONTEXT, body(sessionId="kept-1"))
    assert response.status == 200
    assert (await read_all(response))[-1]["type"] == "done"
    assert refusing.calls == []


async def test_without_persistence_the_limiter_is_never_asked(stores: ChatStores) -> None:
    limiter = FixedLimiter(REFUSED)
    service = make_service(
        site=site(persistence="disabled"),
        session_store=stores.ask_sessions,
        new_session_limiter=limiter,
    )
    response = await service.stream(CONTEXT, body(sessionId="free-1"))
    assert response.status == 200
    assert (await read_all(response))[-1]["type"] == "done"
    assert limiter.calls == []


async def test_a_failing_limiter_is_an_internal_error_that_names_nothing(
    stores: ChatStores,
) -> None:
    service = make_service(session_store=stores.ask_sessions, new_session_limiter=FailingLimiter())
    response = await service.stream(CONTEXT, body(sessionId="down-1"))
    case = ASK_ERROR_CASES["internal"]
    assert response.status == 500
    assert error_body(response) == {
        "error": {"code": case.code, "message": case.message, "retryable": case.retryable}
    }
    assert "10.0.0.9" not in str(error_body(response))
    assert await stores.ask_sessions.load(SessionKey("docs", "user-1", "down-1")) is None
