"""The chat turn handler over a real uvicorn socket: order of checks, leases, streaming, cleanup.

Every response is read over HTTP from uvicorn on 127.0.0.1 (port 0); the stores are the
in-memory ones (the storage backends have their own conformance suite, and the multi-worker
tests run this handler on PostgreSQL and Redis).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from starlette.responses import JSONResponse

from agentskit_chat.errors import ChatHandlerError
from agentskit_chat.protocol import Decoded, SnapshotEvent, decode_turn_event
from agentskit_chat.server import create_chat_app
from agentskit_chat.service import Authenticated, Refused
from tests.server._chat_support import (
    JSON,
    EchoAdapter,
    Harness,
    RejectingLaterSaves,
    lines,
    submit,
)
from tests.server._sockets import read_response
from tests.service._support import serve

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}
    return dict(body["error"])


async def post(url: str, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=20) as client:
        return await client.post(url, content=body, headers=JSON if headers is None else headers)


# --- the order of checks -------------------------------------------------------------------------


async def test_method_media_type_json_and_size_are_refused_in_that_order() -> None:
    harness = Harness()
    async with serve(harness.app(max_body_bytes=20)) as url, httpx.AsyncClient() as client:
        got = await client.put(url)
        assert got.status_code == 405
        assert got.headers["allow"] == "GET, POST"
        assert error_of(got)["code"] == "REQUEST_METHOD_NOT_ALLOWED"
        no_type = await client.post(url, content=b"{}")
        assert no_type.status_code == 415
        assert error_of(no_type)["code"] == "REQUEST_UNSUPPORTED_MEDIA_TYPE"
        bad = await client.post(url, content=b"{", headers=JSON)
        assert bad.status_code == 400
        assert error_of(bad)["code"] == "REQUEST_INVALID_JSON"
        large = await client.post(url, content=json.dumps("x" * 100).encode(), headers=JSON)
        assert large.status_code == 413
        assert large.content == (
            b'{"error":{"version":1,"code":"REQUEST_TOO_LARGE",'
            b'"message":"Request body is too large.","retryable":false}}'
        )
        assert large.headers["content-type"] == "application/json; charset=utf-8"
        assert large.headers["cache-control"] == "no-store"
    assert harness.calls == []  # nothing got as far as the definition


async def test_an_endless_chunked_body_is_cut_at_the_limit_without_buffering_it() -> None:
    harness = Harness()
    async with serve(harness.app(max_body_bytes=64)) as url:
        port = int(url.rsplit(":", 1)[1])
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(
                b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            sent = 0

            async def drip() -> None:
                nonlocal sent
                for _ in range(400):
                    try:
                        await stream.send(b"10\r\n" + b" " * 16 + b"\r\n")
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        return
                    sent += 16
                    await anyio.sleep(0.01)

            async with anyio.create_task_group() as group:
                group.start_soon(drip)
                raw = await read_response(stream)
                group.cancel_scope.cancel()
    assert raw.startswith(b"HTTP/1.1 413")
    assert b"REQUEST_TOO_LARGE" in raw
    assert sent < 400 * 16  # refused while the client was still sending


async def test_authentication_runs_before_the_body_is_parsed_and_its_refusal_is_sent() -> None:
    harness = Harness()
    seen: list[str] = []

    def authenticate(request: Any) -> Any:
        seen.append(request.headers.get("authorization", ""))
        return Refused(JSONResponse({"nope": True}, status_code=401))

    async with serve(harness.app(authenticate=authenticate)) as url:
        refused = await post(url, b"{ not json")
    assert refused.status_code == 401
    assert refused.json() == {"nope": True}
    assert seen == [""]
    assert harness.calls == []


async def test_the_trusted_context_comes_only_from_authentication() -> None:
    harness = Harness()
    body = submit(extra={"context": {"tenantId": "attacker"}})
    app = harness.app(authenticate=lambda request: Authenticated("trusted"))
    async with serve(app) as url:
        response = await post(url, body)
    assert response.status_code == 200
    assert harness.calls == ["definition:trusted"]
    events = lines(response.content)
    assert events
    for event in events:
        assert isinstance(decode_turn_event(event), Decoded)
        assert event["event"] == "server.turn.snapshot"


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'"hello"',
        submit(text="   "),
        submit(extra={"event": "server.turn.snapshot"}),
        submit(extra={"version": 2}),
        submit(payload={"selection": {"type": "select"}}),
    ],
    ids=["array", "string", "blank-input", "snapshot-event", "version-2", "bad-selection"],
)
async def test_anything_but_a_valid_submission_is_an_invalid_event(body: bytes) -> None:
    harness = Harness()
    async with serve(harness.app()) as url:
        response = await post(url, body)
    assert response.status_code == 400
    assert error_of(response) == {
        "version": 1,
        "code": "REQUEST_INVALID_EVENT",
        "message": "Request body must be a valid turn submission.",
        "retryable": False,
    }
    assert harness.adapter.calls == 0


@pytest.mark.parametrize(
    "options",
    [
        {"timeout": 0},
        {"timeout": float("inf")},
        {"cleanup_timeout": -1},
        {"max_body_bytes": 0},
        {"max_body_bytes": 1.5},
        {"timeout": 1e300},
    ],
    ids=["zero-timeout", "infinite-timeout", "negative-cleanup", "zero-body", "float-body", "huge"],
)
def test_invalid_options_fail_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(ChatHandlerError) as caught:
        create_chat_app(
            resolve_definition=lambda context, session_id: None,  # type: ignore[arg-type,return-value]
            session_storage=lambda context: None,  # type: ignore[arg-type,return-value]
            **options,
        )
    assert (caught.value.status, caught.value.code) == (500, "SERVER_INVALID_CONFIG")
    assert caught.value.message == "Chat handler configuration is invalid."
    assert caught.value.retryable is False


# --- turns ---------------------------------------------------------------------------------------


async def test_turns_stream_snapshots_and_the_next_turn_reloads_history_from_memory() -> None:
    harness = Harness()
    async with serve(harness.app()) as url:
        first = await post(url, submit())
        second = await post(url, submit(turn_id="turn-2", event_id="event-2", text="again"))
    assert first.status_code == second.status_code == 200
    assert first.headers["content-type"] == "application/x-ndjson; charset=utf-8"
    assert first.headers["cache-control"] == "no-store"
    assert first.headers["x-content-type-options"] == "nosniff"
    one, two = lines(first.content), lines(second.content)
    assert one and two
    sequences = [event["sequence"] for event in one + two]
    assert sequences == sorted(sequences)
    assert len(set(sequences)) == len(sequences)  # each snapshot is its own stored cursor
    assert one[-1]["payload"]["status"] == "complete"
    assert one[-1]["payload"]["messages"][-1]["content"] == "Echo: hello"
    assert one[-1]["payload"]["lineage"] == {"operation": "submit"}
    assert two[0]["sequence"] > one[-1]["sequence"]
    contents = [message["content"] for message in two[-1]["payload"]["messages"]]
    assert contents == ["hello", "Echo: hello", "again", "Echo: again"]
    stored = harness.stored()
    assert stored["cursor"] >= two[-1]["sequence"]
    assert "activeTurn" not in stored
    assert stored["terminalTurns"] == [
        {"turnId": "turn-1", "outcome": "completed"},
        {"turnId": "turn-2", "outcome": "completed"},
    ]
    assert [m.content for m in harness.memories.messages("session-1")] == contents


async def test_the_first_line_arrives_before_the_model_finishes() -> None:
    harness = Harness(adapter=EchoAdapter(gate=anyio.Event()))
    async with (
        serve(harness.app()) as url,
        httpx.AsyncClient(timeout=20) as client,
        client.stream("POST", url, content=submit(), headers=JSON) as response,
    ):
        received = response.aiter_lines()
        with anyio.fail_after(10):
            first = json.loads(await received.__anext__())
        assert harness.adapter.finished == 0
        assert first["payload"]["status"] == "streaming"
        assert harness.adapter.gate is not None
        harness.adapter.gate.set()
        rest = [json.loads(line) async for line in received if line]
    assert rest[-1]["payload"]["status"] == "complete"
    assert harness.adapter.finished == 1


async def test_a_concurrent_turn_is_refused_before_the_model_runs_and_a_replay_too() -> None:
    harness = Harness(adapter=EchoAdapter(gate=anyio.Event()))
    async with serve(harness.app()) as url, httpx.AsyncClient(timeout=20) as client:
        async with client.stream("POST", url, content=submit(), headers=JSON) as held:
            received = held.aiter_lines()
            with anyio.fail_after(10):
                await received.__anext__()
            other = await client.post(url, content=submit(event_id="event-9"), headers=JSON)
            another = await client.post(
                url, content=submit(turn_id="turn-2", event_id="event-8"), headers=JSON
            )
            assert harness.adapter.gate is not None
            harness.adapter.gate.set()
            assert [line async for line in received]
        replay = await client.post(url, content=submit(event_id="event-7"), headers=JSON)
    for busy in (other, another):
        assert busy.status_code == 409
        assert error_of(busy) == {
            "version": 1,
            "code": "SESSION_BUSY",
            "message": "Another turn is active for this session.",
            "retryable": True,
        }
    assert replay.status_code == 409
    assert error_of(replay) == {
        "version": 1,
        "code": "SESSION_BUSY",
        "message": "This turn already completed.",
        "retryable": False,
    }
    assert harness.adapter.calls == 1


async def test_an_expired_lease_is_taken_over() -> None:
    harness = Harness(adapter=EchoAdapter(gate=anyio.Event()))
    app = harness.app(timeout=1, cleanup_timeout=1)  # a 4 s lease
    async with (
        serve(app) as url,
        httpx.AsyncClient(timeout=20) as client,
        client.stream("POST", url, content=submit(), headers=JSON) as held,
    ):
        received = held.aiter_lines()
        with anyio.fail_after(10):
            await received.__anext__()
        assert harness.stored()["activeTurn"]["turnId"] == "turn-1"
        # The first worker "dies": its lease stays in storage. Four seconds later it is
        # expired, and another turn takes the session over.
        harness.clock.advance(4001)
        first_gate, harness.adapter.gate = harness.adapter.gate, None
        taken = await client.post(
            url, content=submit(turn_id="turn-2", event_id="e2"), headers=JSON
        )
        assert first_gate is not None
        first_gate.set()
        late = [json.loads(line) async for line in received if line]
    assert taken.status_code == 200
    assert lines(taken.content)[-1]["payload"]["status"] == "complete"
    # The first turn lost its session to the takeover: it is told so, and writes nothing more.
    assert late[-1]["event"] == "server.turn.diagnostic"
    assert late[-1]["payload"]["code"] == "SESSION_CONFLICT"
    assert harness.stored()["terminalTurns"] == [
        {"turnId": "turn-1", "outcome": "indeterminate"},
        {"turnId": "turn-2", "outcome": "completed"},
    ]
    saved = [m.content for m in harness.memories.messages("session-1")]
    assert saved == ["hello", "Echo: hello"]  # turn 2's messages, not overwritten by turn 1
    assert harness.memories.saves == 1


async def test_a_replay_of_a_turn_whose_memory_save_failed_is_told_apart() -> None:
    harness = Harness()
    harness.memories.fail_save = True
    async with serve(harness.app()) as url:
        failed = await post(url, submit())
        harness.memories.fail_save = False
        replay = await post(url, submit(event_id="event-2"))
    events = lines(failed.content)
    assert events[-1]["event"] == "server.turn.diagnostic"
    assert events[-1]["payload"]["code"] == "SERVER_INTERNAL"
    assert events[-1]["payload"]["message"] == "The chat request failed."
    assert harness.stored()["terminalTurns"] == [{"turnId": "turn-1", "outcome": "indeterminate"}]
    assert "activeTurn" not in harness.stored()
    assert replay.status_code == 409
    assert error_of(replay)["message"] == (
        "This turn already ended without a known outcome; start a new turn."
    )


async def test_a_storage_that_refuses_saves_mid_stream_gives_a_conflict_diagnostic() -> None:
    harness = Harness(storage=RejectingLaterSaves(accept=1))
    async with serve(harness.app()) as url:
        response = await post(url, submit())
    assert response.status_code == 200
    events = lines(response.content)
    assert events[-1]["event"] == "server.turn.diagnostic"
    assert events[-1]["payload"] == {
        "version": 1,
        "code": "SESSION_CONFLICT",
        "message": "The session changed in another request; submit the turn again.",
        "retryable": True,
    }
    assert all(event["event"] != "server.turn.snapshot" for event in events)


async def test_a_failure_before_the_model_ran_gives_the_lease_back_for_the_same_turn() -> None:
    harness = Harness()
    harness.memories.fail_load = True
    async with serve(harness.app()) as url:
        failed = await post(url, submit())
        harness.memories.fail_load = False
        retried = await post(url, submit(event_id="event-2"))
    assert failed.status_code == 500
    assert error_of(failed)["code"] == "SERVER_INTERNAL"
    assert retried.status_code == 200
    assert lines(retried.content)[-1]["payload"]["messages"][-1]["content"] == "Echo: hello"
    assert harness.stored()["terminalTurns"] == [{"turnId": "turn-1", "outcome": "completed"}]


async def test_the_deadline_stops_the_model_once_and_the_session_is_usable_again() -> None:
    harness = Harness(adapter=EchoAdapter(gate=anyio.Event()))
    async with serve(harness.app(timeout=0.3, cleanup_timeout=1)) as url:
        timed_out = await post(url, submit())
        harness.adapter.gate = None
        after = await post(url, submit(turn_id="turn-2", event_id="event-2", text="again"))
    events = lines(timed_out.content)
    assert events[-1]["event"] == "server.turn.diagnostic"
    assert events[-1]["payload"]["code"] == "SERVER_TIMEOUT"
    assert events[-1]["payload"]["retryable"] is True
    assert harness.adapter.aborts == 1
    assert after.status_code == 200
    contents = [m["content"] for m in lines(after.content)[-1]["payload"]["messages"]]
    assert contents[0] == "hello"  # the stopped turn's messages were saved
    assert contents[-2:] == ["again", "Echo: again"]
    assert harness.stored()["terminalTurns"][0] == {"turnId": "turn-1", "outcome": "completed"}


async def test_a_client_that_goes_away_mid_stream_stops_the_model_and_frees_the_session() -> None:
    harness = Harness(adapter=EchoAdapter(gate=anyio.Event()))
    async with serve(harness.app()) as url:
        async with (
            httpx.AsyncClient(timeout=20) as client,
            client.stream("POST", url, content=submit(), headers=JSON) as response,
        ):
            with anyio.fail_after(10):
                await response.aiter_lines().__anext__()
        with anyio.fail_after(10):
            while "activeTurn" in harness.stored():
                await anyio.sleep(0.01)
        assert harness.adapter.aborts == 1
        saved = [m.content for m in harness.memories.messages("session-1")]
        assert saved == ["hello", "Echo"]  # the partial answer is kept
        harness.adapter.gate = None
        after = await post(url, submit(turn_id="turn-2", event_id="event-2"))
    assert after.status_code == 200
    assert harness.stored()["terminalTurns"][0] == {"turnId": "turn-1", "outcome": "completed"}


async def test_a_model_failure_is_a_failed_snapshot_without_its_text() -> None:
    harness = Harness(adapter=EchoAdapter(fail=True))
    async with serve(harness.app()) as url:
        response = await post(url, submit())
    last = lines(response.content)[-1]
    assert last["payload"]["status"] == "error"
    assert last["payload"]["error"] == {
        "version": 1,
        "code": "CHAT_TURN_FAILED",
        "message": "The chat turn failed.",
        "retryable": True,
    }
    assert b"exploded" not in response.content
    assert isinstance(decode_turn_event(last), Decoded)
    assert isinstance(decode_turn_event(last).value, SnapshotEvent)


async def test_a_conversation_moves_to_a_second_client_and_a_stale_snapshot_never_rolls_back() -> (
    None
):
    from agentskit_chat.protocol import create_turn_snapshot_cursor  # noqa: PLC0415

    harness = Harness()
    web, terminal = (
        create_turn_snapshot_cursor("session-1"),
        create_turn_snapshot_cursor("session-1"),
    )
    async with serve(harness.app()) as url:
        first = await post(url, submit())
        for event in lines(first.content):
            assert web.apply(event)
        second = await post(url, submit(turn_id="turn-2", event_id="e2", text="again"))
        for event in lines(second.content):
            assert terminal.apply(event)
    latest = terminal.snapshot
    assert latest is not None
    contents = [m.content for m in latest.payload.messages]
    assert contents == ["hello", "Echo: hello", "again", "Echo: again"]  # the full history
    # The web client now sees the terminal's turn; its own older snapshot is refused.
    for event in lines(second.content):
        assert web.apply(event)
    assert web.apply(lines(first.content)[-1]) is False
    assert web.snapshot == latest
