"""Long conversations: what a turn starts from stays within fixed bounds, on every store.

A turn snapshot carries the whole conversation, and the protocol bounds one at 10,000 JSON
values; before compaction a conversation stopped saving after a few hundred turns (every turn
then failed with a retryable ``SERVER_INTERNAL``). These tests drive 2,000 turns through the
controller and each real store, a few hundred over HTTP on a real socket, and one turn too
large to keep.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentskit_chat.conversation import InMemorySessionStorage, define_chat
from agentskit_chat.protocol import (
    ToolCall,
    create_snapshot_event,
    is_within_message_limits,
)
from agentskit_chat.protocol._message import (
    MessageImagePart,
    MessageTextPart,
    message_record_nodes,
)
from agentskit_chat.runtime import (
    AdapterRequest,
    ChatConfig,
    ChatController,
    ChatMessage,
    ChatSource,
    StreamChunk,
)
from agentskit_chat.server import create_app, create_chat_app
from agentskit_chat.server._history import (
    HISTORY_MAX_CHARS,
    HISTORY_MAX_MESSAGES,
    HISTORY_MAX_NODES,
    compact_history,
    exceeds_record_limits,
    message_nodes,
)
from agentskit_chat.storage import open_chat_stores
from tests.assistant._support import serve
from tests.server._chat_support import JSON, Memories, lines, submit

pytestmark = pytest.mark.anyio

AT = datetime(2026, 7, 11, tzinfo=UTC)
TURNS = 2000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def message(index: int, role: str = "user", **fields: Any) -> ChatMessage:
    return ChatMessage(
        id=f"m{index}",
        role=role,  # type: ignore[arg-type]
        content=fields.pop("content", f"message {index}"),
        created_at=AT + timedelta(seconds=index),
        **fields,
    )


def conversation(turns: int, **answer: Any) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for turn in range(turns):
        messages.append(message(2 * turn))
        messages.append(message(2 * turn + 1, "assistant", **answer))
    return messages


# --- the bounds, unit by unit ----------------------------------------------------------------


def test_a_message_counts_the_json_values_the_protocol_counts() -> None:
    samples = [
        message(1),
        message(2, "assistant", metadata={"answer": {"sources": [1, None, {"a": [True]}]}}),
        message(3, "tool", tool_call_id="call-1"),
        message(
            4,
            "assistant",
            tool_calls=(
                ToolCall(id="c1", name="lookup", args={"q": ["a", "b"]}, status="complete"),
                ToolCall(id="c2", name="open", args={}, status="error", error="no"),
            ),
        ),
        message(
            5,
            parts=(
                MessageTextPart(type="text", text="see"),
                MessageImagePart(type="image", source="https://x/y.png", detail="low"),
            ),
        ),
    ]
    assert samples
    for sample in samples:
        assert message_nodes(sample) == message_record_nodes(sample.to_wire())


def test_a_conversation_within_every_bound_is_left_as_it_is() -> None:
    messages = conversation(HISTORY_MAX_MESSAGES // 2)
    assert compact_history(messages) == tuple(messages)


@pytest.mark.parametrize(
    ("turns", "answer"),
    [
        (HISTORY_MAX_MESSAGES // 2 + 1, {}),  # one message too many
        (260, {"metadata": {"sources": [{"id": "s", "title": "t", "href": "/docs/a"}] * 2}}),
        (101, {"content": "x" * (HISTORY_MAX_CHARS // 100)}),  # a million characters and more
    ],
    ids=["messages", "json-values", "characters"],
)
def test_past_a_bound_the_newest_turns_are_kept_within_three_quarters_of_each(
    turns: int, answer: dict[str, Any]
) -> None:
    messages = conversation(turns, **answer)
    kept = compact_history(messages)
    assert 0 < len(kept) < len(messages)
    assert kept == tuple(messages[-len(kept) :])  # the newest, in order
    assert kept[0].role == "user"  # cut at a question
    assert len(kept) <= HISTORY_MAX_MESSAGES * 3 // 4
    assert sum(message_nodes(m) for m in kept) <= HISTORY_MAX_NODES * 3 // 4
    assert sum(len(m.content) for m in kept) <= HISTORY_MAX_CHARS * 3 // 4
    # One turn more would not have fitted: nothing newer was dropped needlessly.
    assert (
        len(kept) + 2 > HISTORY_MAX_MESSAGES * 3 // 4
        or (sum(message_nodes(m) for m in messages[-len(kept) - 2 :]) > HISTORY_MAX_NODES * 3 // 4)
        or (sum(len(m.content) for m in messages[-len(kept) - 2 :]) > HISTORY_MAX_CHARS * 3 // 4)
    )


def test_a_leading_system_prompt_is_kept_and_the_cut_never_orphans_an_answer() -> None:
    system = message(-1, "system", content="You answer briefly.")
    tail = [message(0, "assistant")]  # an answer whose question is already gone
    messages = [system, *tail, *conversation(HISTORY_MAX_MESSAGES)]
    kept = compact_history(messages)
    assert kept[0] is system
    assert kept[1].role == "user"
    assert kept[-1] is messages[-1]
    assert len(kept) <= HISTORY_MAX_MESSAGES * 3 // 4


# --- 2,000 turns on each store ----------------------------------------------------------------


class _Sourced:
    """An answer citing ``sources`` pages in its metadata (four JSON values each)."""

    def __init__(self, request: AdapterRequest, sources: int) -> None:
        self.question = request.messages[-2].content
        self.sources = sources

    def abort(self) -> None:
        return None

    async def stream(self) -> AsyncIterator[StreamChunk]:
        cited = [
            {"id": f"s{n}", "title": "Guide", "href": f"/docs/p{n}"} for n in range(self.sources)
        ]
        yield StreamChunk("text", content=f"About {self.question}.", metadata={"sources": cited})
        yield StreamChunk("done")


class SourcedAdapter:
    """Answers every question, citing ``sources`` pages."""

    capabilities = None

    def __init__(self, sources: int = 3) -> None:
        self.sources = sources

    def create_source(self, request: AdapterRequest) -> ChatSource:
        return _Sourced(request, self.sources)


def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'chat.db'}"
    return str(request.getfixturevalue("postgres_url" if backend == "postgresql" else "redis_url"))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "redis"])
async def test_two_thousand_turns_keep_saving_on_each_store(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each turn as the chat handler runs it: a new memory loads, the history is compacted,
    the controller answers, and the memory saves what the snapshot showed."""
    session_id = f"long-{uuid.uuid4().hex[:8]}"
    adapter = SourcedAdapter()
    compactions = 0
    most = 0
    started = time.perf_counter()
    async with open_chat_stores(store_url(backend, tmp_path, request)) as stores:
        for turn in range(1, TURNS + 1):
            memory = stores.memory(session_id)
            loaded = tuple(await memory.load())
            history = compact_history(loaded)
            compactions += len(history) < len(loaded)
            most = max(most, len(loaded))
            controller = ChatController(ChatConfig(adapter=adapter, initial_messages=history))
            await controller.send(f"question {turn}")
            messages = controller.state.messages
            assert messages[-1].content == f"About question {turn}."
            assert not exceeds_record_limits(messages)
            if turn % 250 == 0:  # the protocol's own check of the snapshot this turn sends
                assert is_within_message_limits([m.to_wire() for m in messages])
                create_snapshot_event(
                    event_id="e",
                    session_id=session_id,
                    turn_id=f"t{turn}",
                    sequence=turn,
                    emitted_at=AT,
                    messages=[m.to_record() for m in messages],
                    status="complete",
                    usage={"promptTokens": 0, "completionTokens": 0, "totalTokens": 0},
                )
            await memory.save(messages)
            close = getattr(memory, "aclose", None)
            if close is not None:
                await close()
        memory = stores.memory(session_id)
        stored = await memory.load()
        close = getattr(memory, "aclose", None)
        if close is not None:
            await close()
    elapsed = time.perf_counter() - started
    assert stored[-1].content == f"About question {TURNS}."
    assert compactions >= 10  # compaction ran again and again, not once
    assert most <= HISTORY_MAX_MESSAGES + 2  # at most one turn past a bound is ever stored
    print(f"{backend}: {TURNS} turns in {elapsed:.1f} s, {compactions} compactions")


# --- over HTTP --------------------------------------------------------------------------------


async def test_two_hundred_turns_over_a_socket_keep_their_newest_messages(tmp_path: Path) -> None:
    """Fifteen sources a turn: about 75 JSON values, so without compaction the snapshots would
    pass the protocol's 10,000 after about 135 turns and every later turn would fail."""
    chat = define_chat(id="long", chat=ChatConfig(adapter=SourcedAdapter(sources=15)))
    # One client sends 200 turns as fast as it can: the per-client rate limit is not tested here.
    app = create_app(chat, store=f"sqlite:///{tmp_path / 'chat.db'}", rate_limits=None)
    last_sequence = 0
    most = 0
    async with serve(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        for turn in range(1, 201):
            response = await client.post(
                "/api/chat",
                content=submit(turn_id=f"t{turn}", event_id=f"e{turn}", text=f"q{turn}"),
                headers=JSON,
            )
            assert response.status_code == 200
            events = lines(response.content)
            assert [e["event"] for e in events] == ["server.turn.snapshot"] * len(events)
            final = events[-1]
            assert final["payload"]["status"] == "complete"
            assert final["sequence"] > last_sequence
            last_sequence = final["sequence"]
            shown = final["payload"]["messages"]
            assert [m["content"] for m in shown[-2:]] == [f"q{turn}", f"About q{turn}."]
            assert shown[0]["role"] == "user"
            most = max(most, len(shown))
        resumed = await client.get("/api/chat", params={"sessionId": "session-1"})
    assert resumed.status_code == 200
    kept = resumed.json()["payload"]["messages"]
    assert kept[-1]["content"] == "About q200."
    assert most <= HISTORY_MAX_MESSAGES + 2  # the oldest turns were dropped, again and again
    assert len(kept) <= HISTORY_MAX_MESSAGES


# --- a turn too large to keep ------------------------------------------------------------------


class _Huge:
    def __init__(self, values: int) -> None:
        self.values = values

    def abort(self) -> None:
        return None

    async def stream(self) -> AsyncIterator[StreamChunk]:
        yield StreamChunk(
            "text", content="Here is everything.", metadata={"rows": [0] * self.values}
        )
        yield StreamChunk("done")


class HugeOnce:
    """Answers ``huge`` with one answer of 9,990 JSON values, anything else plainly."""

    capabilities = None

    def create_source(self, request: AdapterRequest) -> ChatSource:
        question = request.messages[-2].content
        return _Huge(9990 if question == "huge" else 1)


async def test_a_turn_too_large_to_keep_is_refused_for_good_and_the_conversation_goes_on() -> None:
    memories = Memories()
    chat = define_chat(id="support", chat=ChatConfig(adapter=HugeOnce()))
    storage = InMemorySessionStorage()
    app = create_chat_app(
        resolve_definition=lambda context, session_id: chat,
        session_storage=lambda context: storage,
        chat_memory=memories,
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:

        async def post(turn: str, text: str) -> list[dict[str, Any]]:
            response = await client.post(
                "/", content=submit(turn_id=turn, event_id=f"e-{turn}", text=text), headers=JSON
            )
            assert response.status_code == 200
            return lines(response.content)

        first = await post("t1", "hello")
        assert first[-1]["payload"]["status"] == "complete"
        refused = await post("t2", "huge")
        assert refused[-1]["event"] == "server.turn.diagnostic"
        assert refused[-1]["payload"] == {
            "version": 1,
            "code": "CONVERSATION_TOO_LARGE",
            "message": "This turn is too large to be kept in the conversation.",
            "retryable": False,
        }
        stored = memories.messages("session-1")
        assert [m.content for m in stored] == ["hello", "Here is everything."]
        after = await post("t3", "and now?")
        assert after[-1]["payload"]["status"] == "complete"
        assert [m["content"] for m in after[-1]["payload"]["messages"]][-2:] == [
            "and now?",
            "Here is everything.",
        ]
