"""Retry, edit and regenerate (``payload.operation``) and resuming a session (``GET``).

Over a real uvicorn socket, with the echo model and in-memory stores of the other chat handler
tests: the stored messages show what each operation did, the snapshots carry the operation's
lineage, and an operation with nothing to act on is refused before the model runs.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.responses import JSONResponse

from agentskit_chat.protocol import Decoded, SnapshotEvent, decode_turn_event
from agentskit_chat.service import Refused
from tests.server._chat_support import JSON, Harness, lines, submit
from tests.service._support import serve

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def turn(client: httpx.AsyncClient, url: str, **fields: Any) -> list[dict[str, Any]]:
    got = await client.post(url, content=submit(**fields), headers=JSON)
    assert got.status_code == 200, got.text
    return lines(got.content)


def last_messages(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    assert events, "no snapshot"
    return [(m["role"], m["content"]) for m in events[-1]["payload"]["messages"]]


async def test_retry_answers_the_last_question_again_with_its_lineage() -> None:
    harness = Harness()
    async with serve(harness.app()) as url, httpx.AsyncClient(timeout=20) as client:
        first = await turn(client, url, turn_id="t1", text="hello")
        user_id = first[-1]["payload"]["messages"][0]["id"]
        retried = await turn(
            client, url, turn_id="t2", text="/retry", payload={"operation": {"kind": "retry"}}
        )
    assert last_messages(retried) == [("user", "hello"), ("assistant", "Echo: hello")]
    assert harness.adapter.inputs == ["hello", "hello"]
    assert retried[-1]["payload"]["lineage"] == {
        "operation": "retry",
        "parentTurnId": "t1",
        "sourceMessageId": user_id,
    }
    assert [m.content for m in harness.memories.messages("session-1")] == ["hello", "Echo: hello"]


async def test_edit_replaces_a_user_message_and_drops_what_followed() -> None:
    harness = Harness()
    async with serve(harness.app()) as url, httpx.AsyncClient(timeout=20) as client:
        first = await turn(client, url, turn_id="t1", text="first")
        await turn(client, url, turn_id="t2", text="second")
        first_id = first[-1]["payload"]["messages"][0]["id"]
        edited = await turn(
            client,
            url,
            turn_id="t3",
            text="changed",
            payload={"operation": {"kind": "edit", "messageId": first_id}},
        )
    assert last_messages(edited) == [("user", "changed"), ("assistant", "Echo: changed")]
    assert edited[-1]["payload"]["messages"][0]["id"] == first_id
    assert edited[-1]["payload"]["lineage"]["operation"] == "edit"
    assert edited[-1]["payload"]["lineage"]["parentTurnId"] == "t2"


async def test_regenerate_replaces_the_last_answer_or_a_named_one() -> None:
    harness = Harness()
    async with serve(harness.app()) as url, httpx.AsyncClient(timeout=20) as client:
        first = await turn(client, url, turn_id="t1", text="one")
        await turn(client, url, turn_id="t2", text="two")
        again = await turn(
            client,
            url,
            turn_id="t3",
            text="/regenerate",
            payload={"operation": {"kind": "regenerate"}},
        )
        assert last_messages(again) == [
            ("user", "one"),
            ("assistant", "Echo: one"),
            ("user", "two"),
            ("assistant", "Echo: two"),
        ]
        answer_id = first[-1]["payload"]["messages"][1]["id"]
        named = await turn(
            client,
            url,
            turn_id="t4",
            text="/regenerate",
            payload={"operation": {"kind": "regenerate", "messageId": answer_id}},
        )
    assert last_messages(named) == [("user", "one"), ("assistant", "Echo: one")]
    assert named[-1]["payload"]["lineage"]["sourceMessageId"] == answer_id
    assert harness.adapter.inputs == ["one", "two", "two", "one"]


@pytest.mark.parametrize(
    "operation",
    [
        {"kind": "retry"},
        {"kind": "regenerate"},
        {"kind": "edit", "messageId": "no-such-message"},
    ],
)
async def test_an_operation_with_nothing_to_act_on_is_refused_before_the_model_runs(
    operation: dict[str, Any],
) -> None:
    harness = Harness()
    async with serve(harness.app()) as url, httpx.AsyncClient(timeout=20) as client:
        got = await client.post(
            url, content=submit(text="x", payload={"operation": operation}), headers=JSON
        )
        assert got.status_code == 409
        assert got.json()["error"]["code"] == "OPERATION_UNAVAILABLE"
        # The refusal gave the lease back: the same turn id runs next.
        assert (await turn(client, url, text="hello"))[-1]["payload"]["status"] == "complete"
    assert harness.adapter.calls == 1


@pytest.mark.parametrize(
    "payload",
    [
        {"operation": {"kind": "undo"}},
        {"operation": {"kind": "edit"}},
        {"operation": {"kind": "edit", "messageId": "bad id\n"}},
        {"operation": "retry"},
        {
            "operation": {"kind": "retry"},
            "confirmation": {"toolCallId": "c", "decision": "approve"},
        },
        {
            "operation": {"kind": "retry"},
            "selection": {"protocol": "agentskit.chat.component", "version": 1},
        },
    ],
)
async def test_a_malformed_or_mixed_operation_is_an_invalid_event(payload: dict[str, Any]) -> None:
    harness = Harness()
    async with serve(harness.app()) as url, httpx.AsyncClient(timeout=20) as client:
        got = await client.post(url, content=submit(text="x", payload=payload), headers=JSON)
    assert got.status_code == 400
    assert got.json()["error"]["code"] == "REQUEST_INVALID_EVENT"
    assert harness.adapter.calls == 0


async def test_get_returns_the_stored_conversation_as_one_snapshot_for_a_resuming_client() -> None:
    harness = Harness()
    async with serve(harness.app()) as url, httpx.AsyncClient(timeout=20) as client:
        empty = await client.get(url, params={"sessionId": "session-1"})
        assert empty.status_code == 200
        assert empty.headers["cache-control"] == "no-store"
        assert empty.json()["payload"]["messages"] == []
        assert empty.json()["payload"]["status"] == "idle"
        streamed = await turn(client, url, turn_id="t1", text="hello")
        resumed = await client.get(url, params={"sessionId": "session-1"})
        after = await turn(client, url, turn_id="t2", text="again")
    decoded = decode_turn_event(resumed.content)
    assert isinstance(decoded, Decoded) and isinstance(decoded.value, SnapshotEvent)
    body = resumed.json()
    assert body["turnId"] == "t1"
    assert body["payload"]["status"] == "complete"
    assert body["payload"]["messages"] == streamed[-1]["payload"]["messages"]
    # The resumed snapshot holds the stored cursor: every later line is newer.
    assert body["sequence"] >= streamed[-1]["sequence"]
    assert all(line["sequence"] > body["sequence"] for line in after)
    assert harness.adapter.calls == 2


@pytest.mark.parametrize("query", ["", "?sessionId=", "?sessionId=bad%20id", "?other=1"])
async def test_get_without_a_valid_session_id_is_refused(query: str) -> None:
    harness = Harness()
    async with serve(harness.app()) as url, httpx.AsyncClient(timeout=20) as client:
        got = await client.get(url + query)
    assert got.status_code == 400
    assert got.json()["error"]["code"] == "REQUEST_INVALID_QUERY"
    assert "bad" not in got.text


async def test_get_runs_the_same_authentication_as_a_turn() -> None:
    harness = Harness()
    app = harness.app(authenticate=lambda request: Refused(JSONResponse({"no": 1}, 401)))
    async with serve(app) as url, httpx.AsyncClient(timeout=20) as client:
        got = await client.get(url, params={"sessionId": "session-1"})
    assert (got.status_code, got.json()) == (401, {"no": 1})
    assert harness.calls == []
