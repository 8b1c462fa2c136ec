"""A chat session's 1,000 confirmation records: decided ones make room, undecided ones never do.

A help desk whose model proposes confirmation-gated calls (:mod:`tests.server._approval_support`)
is served by ``create_app`` on a real socket, its sessions in a real store (SQLite always;
PostgreSQL and Redis when their URLs are set). The stored session is filled to 1,000 records
through the store itself, then the model proposes one more call.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agentskit_chat.protocol import decode_session_snapshot
from agentskit_chat.server import create_app
from agentskit_chat.storage import ChatStores, open_chat_stores
from tests.assistant._support import serve
from tests.server._approval_support import TicketDesk, desk_definition
from tests.server._chat_support import JSON, lines, submit

pytestmark = pytest.mark.anyio

FULL = 1000
#: Far in the future: a filler record never expires during a test.
LATER = 4_102_444_800_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.asynccontextmanager
async def desk_server(store: str) -> AsyncIterator[tuple[str, TicketDesk, ChatStores]]:
    desk = TicketDesk()
    stores = open_chat_stores(store)
    app = create_app(desk_definition(desk), store=stores, rate_limits=None)
    async with stores, serve(app) as url:
        yield url, desk, stores


async def post(url: str, session_id: str, turn: str, text: str, **payload: Any) -> httpx.Response:
    body = submit(
        session_id=session_id,
        turn_id=turn,
        event_id=f"e-{turn}",
        text=text,
        payload=payload or None,
    )
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(f"{url}/api/chat", content=body, headers=JSON)


async def approve(url: str, session_id: str, turn: str, call_id: str) -> httpx.Response:
    confirmation = {"toolCallId": call_id, "decision": "approve"}
    return await post(url, session_id, turn, "Approve", confirmation=confirmation)


def last(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    events = lines(response.content)
    assert events, "the turn streamed nothing"
    event: dict[str, Any] = events[-1]
    return event


async def records(stores: ChatStores, session_id: str) -> list[dict[str, Any]]:
    """The stored session's confirmations, as the wire has them."""
    decoded = decode_session_snapshot(await stores.sessions.load(session_id))
    assert decoded.ok
    return [c.model_dump(by_alias=True) for c in decoded.value.confirmations]


async def fill(stores: ChatStores, session_id: str, status: str) -> None:
    """Put filler records of ``status`` before the stored ones, up to 1,000 in all."""
    decoded = decode_session_snapshot(await stores.sessions.load(session_id))
    assert decoded.ok
    snapshot = decoded.value
    fillers = [
        {
            "token": f"confirm-old-{n}",
            "action": "open_ticket",
            "input": {"ref": f"old-{n}"},
            "toolCallId": f"old-{n}",
            "expiresAt": LATER,
            "status": status,
        }
        for n in range(FULL - len(snapshot.confirmations))
    ]
    kept = [c.model_dump(by_alias=True) for c in snapshot.confirmations]
    wire = snapshot.model_dump(by_alias=True, exclude_none=True)
    wire.update(cursor=snapshot.cursor + 1, confirmations=fillers + kept)
    filled = decode_session_snapshot(wire)
    assert filled.ok
    assert await stores.sessions.save(filled.value, snapshot.cursor)


async def test_decided_records_make_room_for_a_models_new_call(store_url: str) -> None:
    session = f"full-{uuid.uuid4().hex[:8]}"
    async with desk_server(store_url) as (url, desk, stores):
        assert last(await post(url, session, "t1", "open r1"))["payload"]["status"] == "complete"
        await fill(stores, session, "approved")
        held = await records(stores, session)
        assert len(held) == FULL
        assert held[0]["toolCallId"] == "old-0"
        # The model proposes one more call: the oldest decided record makes room for it.
        assert last(await post(url, session, "t2", "open r2"))["payload"]["status"] == "complete"
        held = await records(stores, session)
        assert len(held) == FULL
        ids = [record["toolCallId"] for record in held]
        assert ids[0] == "old-1"  # old-0 was the oldest decided one
        assert ids[-2:] == ["call-r1", "call-r2"]
        assert [r["status"] for r in held[-2:]] == ["pending", "pending"]
        # Its call can be decided, and runs once.
        decided = last(await approve(url, session, "t3", "call-r2"))
        assert decided["event"] == "server.turn.snapshot"
        assert desk.runs == ["open_ticket:r2"]


async def test_a_session_full_of_undecided_records_refuses_a_new_call_for_good(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    session = f"stuck-{uuid.uuid4().hex[:8]}"
    async with desk_server(store_url) as (url, desk, stores):
        assert last(await post(url, session, "t1", "open r1"))["payload"]["status"] == "complete"
        await fill(stores, session, "pending")
        before = await records(stores, session)
        with caplog.at_level(logging.INFO, logger="agentskit_chat"):
            refused = last(await post(url, session, "t2", "open r2"))
        # The client's to decide, not a server fault: a warning with its own outcome.
        turns = [r for r in caplog.records if r.name == "agentskit_chat.server.chat"]
        assert [(r.levelno, getattr(r, "outcome", None)) for r in turns] == [
            (logging.WARNING, "confirmation_limit")
        ]
        assert refused["event"] == "server.turn.diagnostic"
        assert refused["payload"] == {
            "version": 1,
            "code": "CONFIRMATION_LIMIT_REACHED",
            "message": (
                "Too many actions in this conversation wait for a decision; decide them or"
                " start a new conversation."
            ),
            "retryable": False,
        }
        # Nothing was kept of that turn: no record, no message, and no pending one dropped.
        assert await records(stores, session) == before
        async with httpx.AsyncClient(timeout=30) as client:
            shown = await client.get(f"{url}/api/chat", params={"sessionId": session})
        texts = [m.get("content") for m in shown.json()["payload"]["messages"]]
        assert "open r2" not in texts
        # Deciding a waiting call makes room: the same question then goes through.
        assert last(await approve(url, session, "t3", "call-r1"))["payload"]["status"] in (
            "complete",
            "requires_confirmation",
        )
        assert desk.runs == ["open_ticket:r1"]
        again = last(await post(url, session, "t4", "open r2"))
        assert again["payload"]["status"] == "complete"
        ids = [record["toolCallId"] for record in await records(stores, session)]
        assert len(ids) == FULL
        assert "call-r1" not in ids  # the one decided record made the room
        assert ids[-1] == "call-r2"
