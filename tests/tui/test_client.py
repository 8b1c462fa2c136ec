"""The turn client over a scripted HTTP transport: what it sends, what it accepts, how it fails."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import SnapshotEvent, create_snapshot_event
from agentskit_chat.tui import ChatTurnClient, TurnResult
from agentskit_chat.tui._client import BUSY, INVALID_RESPONSE, UNREACHABLE

pytestmark = pytest.mark.anyio

BASE = "http://chat.test"
USAGE = {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def snapshot(
    sequence: int, text: str = "hi", *, session_id: str = "s1", status: str = "complete"
) -> str:
    return create_snapshot_event(
        event_id=f"e{sequence}",
        session_id=session_id,
        turn_id="t1",
        sequence=sequence,
        emitted_at="2026-07-11T00:00:00.000Z",
        messages=[
            {
                "id": "a1",
                "role": "assistant",
                "content": text,
                "status": "complete",
                "createdAt": "2026-07-11T00:00:00.000Z",
            }
        ],
        status=status,
        usage=USAGE,
    ).to_json()


def diagnostic(code: str = "SERVER_TIMEOUT", session_id: str = "s1") -> str:
    return json.dumps(
        {
            "protocol": "agentskit.chat.turn",
            "version": 1,
            "eventId": "d1",
            "sessionId": session_id,
            "turnId": "t1",
            "sequence": 9,
            "emittedAt": "2026-07-11T00:00:00.000Z",
            "event": "server.turn.diagnostic",
            "payload": {"version": 1, "code": code, "message": "Too slow.", "retryable": True},
        }
    )


def ndjson(*lines: str, status: int = 200) -> httpx.Response:
    return httpx.Response(status, content="\n".join(lines).encode() + b"\n")


def client_with(
    handler: Callable[[httpx.Request], Any], **options: Any
) -> tuple[ChatTurnClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        result = handler(request)
        if hasattr(result, "__await__"):
            result = await result
        assert isinstance(result, httpx.Response)
        return result

    http = httpx.AsyncClient(transport=httpx.MockTransport(record))
    return ChatTurnClient(BASE, session_id="s1", http=http, **options), seen


def body(request: httpx.Request) -> dict[str, Any]:
    value = json.loads(request.content)
    assert isinstance(value, dict)
    return value


async def test_only_newer_snapshots_of_its_own_session_are_accepted() -> None:
    turns = [
        [
            snapshot(3, "three"),
            snapshot(3, "three again"),
            snapshot(2, "stale"),
            snapshot(7, "other session", session_id="s2"),
            "not json",
            snapshot(5, "five"),
        ],
        [snapshot(4, "older")],
    ]
    client, _ = client_with(lambda request: ndjson(*turns.pop(0)))
    shown: list[SnapshotEvent] = []
    result = await client.submit("hello", on_snapshot=shown.append)
    assert result.ok
    assert result.accepted == 2
    assert [s.sequence for s in shown] == [3, 5]
    assert result.snapshot is not None
    assert result.snapshot.payload.messages[0].content == "five"
    # The next turn continues the same cursor: an older line is ignored.
    again = await client.submit("again", on_snapshot=shown.append)
    assert again.accepted == 0
    assert again.ok
    assert again.snapshot is result.snapshot
    assert len(shown) == 2


async def test_every_submission_names_the_session_and_a_fresh_turn() -> None:
    client, seen = client_with(lambda request: ndjson(snapshot(len(seen))), api_key="k-1")
    frame_select = {"type": "select", "choiceId": "c1"}
    await client.submit("question")
    await client.select(frame_select, "Choice one")
    await client.decide("call-1", "reject", reason="not now")
    await client.operation("retry")
    await client.operation("edit", text="new text", message_id="u1")
    await client.operation("regenerate")
    assert len(seen) == 6
    events = [body(request) for request in seen]
    assert {e["sessionId"] for e in events} == {"s1"}
    assert len({e["turnId"] for e in events}) == 6
    assert len({e["eventId"] for e in events}) == 6
    assert all(e["event"] == "client.turn.submit" for e in events)
    assert all(r.headers["authorization"] == "Bearer k-1" for r in seen)
    assert all(r.headers["content-type"] == "application/json" for r in seen)
    payloads = [e["payload"] for e in events]
    assert payloads[0] == {"input": "question"}
    assert payloads[1] == {"input": "Choice one", "selection": frame_select}
    assert payloads[2] == {
        "input": "Reject",
        "confirmation": {"toolCallId": "call-1", "decision": "reject", "reason": "not now"},
    }
    assert payloads[3] == {"input": "/retry", "operation": {"kind": "retry"}}
    assert payloads[4] == {"input": "new text", "operation": {"kind": "edit", "messageId": "u1"}}
    assert payloads[5] == {"input": "/regenerate", "operation": {"kind": "regenerate"}}


@pytest.mark.parametrize(
    ("response", "code", "status", "message"),
    [
        (
            httpx.Response(
                409,
                json={
                    "error": {
                        "version": 1,
                        "code": "CHOICE_UNAVAILABLE",
                        "message": "This choice is no longer available.",
                        "retryable": False,
                    }
                },
            ),
            "CHOICE_UNAVAILABLE",
            409,
            "This choice is no longer available.",
        ),
        (
            httpx.Response(502, text="<html>bad gateway</html>"),
            INVALID_RESPONSE,
            502,
            "The server answered HTTP 502 without a chat error.",
        ),
        (ndjson(diagnostic()), "SERVER_TIMEOUT", None, "Too slow."),
        (ndjson("{}", "[]"), INVALID_RESPONSE, None, "The server's answer held no turn snapshot."),
    ],
)
async def test_refusals_and_diagnostics_are_failures_to_show(
    response: httpx.Response, code: str, status: int | None, message: str
) -> None:
    client, _ = client_with(lambda request: response)
    result = await client.submit("hello")
    assert not result.ok
    assert result.failure is not None
    assert (result.failure.code, result.failure.status, result.failure.message) == (
        code,
        status,
        message,
    )


async def test_an_error_in_the_last_snapshot_is_a_failure() -> None:
    line = json.loads(snapshot(1, status="error"))
    line["payload"]["error"] = {
        "version": 1,
        "code": "CHAT_TURN_FAILED",
        "message": "The answer failed.",
        "retryable": True,
    }
    client, _ = client_with(lambda request: ndjson(json.dumps(line)))
    result = await client.submit("hello")
    assert result.failure is not None
    assert result.failure.code == "CHAT_TURN_FAILED"
    assert result.accepted == 1


async def test_a_busy_session_is_tried_again_until_it_is_free() -> None:
    busy = {"error": {"version": 1, "code": "SESSION_BUSY", "message": "Busy.", "retryable": True}}
    answers = [httpx.Response(409, json=busy), httpx.Response(409, json=busy)]
    client, seen = client_with(lambda r: answers.pop(0) if answers else ndjson(snapshot(1)))
    result = await client.submit("hello")
    assert result.ok
    assert len(seen) == 3

    client, seen = client_with(lambda r: httpx.Response(409, json=busy), busy_wait_s=0.3)
    result = await client.submit("hello")
    assert result.failure is not None
    assert result.failure.code == "SESSION_BUSY"
    assert len(seen) > 1

    done = {"error": {"version": 1, "code": "SESSION_BUSY", "message": "Done.", "retryable": False}}
    client, seen = client_with(lambda r: httpx.Response(409, json=done))
    result = await client.submit("hello")
    assert result.failure is not None
    assert result.failure.message == "Done."
    assert len(seen) == 1


async def test_an_unreachable_server_is_a_retryable_failure() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client, _ = client_with(refuse)
    for result in (await client.submit("hello"), await client.resume()):
        assert result.failure is not None
        assert result.failure.code == UNREACHABLE
        assert result.failure.retryable
        assert result.failure.message == f"Could not reach the chat server at {BASE}."


async def test_stop_closes_the_stream_and_one_turn_runs_at_a_time() -> None:
    release = anyio.Event()

    async def slow_lines() -> AsyncIterator[bytes]:
        yield (snapshot(1, "partial", status="streaming") + "\n").encode()
        await release.wait()
        yield (snapshot(2, "never") + "\n").encode()

    client, _ = client_with(lambda request: httpx.Response(200, content=slow_lines()))
    assert client.stop() is False
    results: list[TurnResult] = []

    async def run() -> None:
        results.append(await client.submit("hello"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        with anyio.fail_after(5):
            while client.snapshot is None:
                await anyio.sleep(0.01)
        assert client.running
        second = await client.submit("again")
        assert second.failure is not None and second.failure.code == BUSY
        assert client.stop() is True
    (result,) = results
    assert result.stopped
    assert result.failure is None
    assert not result.ok
    assert not client.running
    assert result.snapshot is not None
    assert result.snapshot.payload.messages[0].content == "partial"


async def test_resume_loads_the_stored_conversation_into_the_cursor() -> None:
    client, seen = client_with(
        lambda request: httpx.Response(200, content=snapshot(4, "stored").encode())
    )
    result = await client.resume()
    assert result.ok
    assert seen[0].method == "GET"
    assert seen[0].url.params["sessionId"] == "s1"
    assert client.snapshot is not None and client.snapshot.sequence == 4

    client_bad, _ = client_with(lambda request: httpx.Response(200, content=b"[]"))
    failed = await client_bad.resume()
    assert failed.failure is not None and failed.failure.code == INVALID_RESPONSE


def test_invalid_options_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        ChatTurnClient("ftp://chat.test")
    with pytest.raises(ConfigurationError):
        ChatTurnClient(BASE, session_id="not a safe id!")
    client = ChatTurnClient(BASE + "/")
    assert client.base_url == BASE
    assert client.absolute_url("/docs/guide") == f"{BASE}/docs/guide"
    assert client.absolute_url("https://example.com/x") == "https://example.com/x"
    assert client.absolute_url("//evil.test/x") == "//evil.test/x"


_LINES = st.one_of(
    st.sampled_from([snapshot(1), snapshot(2, status="streaming"), diagnostic(), "{}", "null"]),
    st.text(max_size=40),
)


@given(
    status=st.sampled_from([200, 200, 400, 409, 413, 500, 502]),
    lines=st.lists(_LINES, max_size=6),
    raw=st.binary(max_size=64),
)
def test_no_server_answer_makes_the_client_raise(status: int, lines: list[str], raw: bytes) -> None:
    content = "\n".join(lines).encode() + raw

    async def main() -> TurnResult:
        client, _ = client_with(lambda request: httpx.Response(status, content=content))
        async with client:
            return await client.submit("hello")

    result = anyio.run(main)
    assert isinstance(result, TurnResult)
    assert result.ok or result.failure is not None
