"""Turn leases and the bounded terminal-turn history."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentskit_chat.conversation import (
    MAX_TERMINAL_TURNS,
    ChatSession,
    InMemorySessionStorage,
    create_chat_session,
    resume_chat_session,
)
from agentskit_chat.errors import ConfigurationError, SessionConflictError, StorageError
from agentskit_chat.protocol import ActiveTurn, TerminalTurn
from agentskit_chat.runtime import ChatController

from ._support import NOW_MS, Clock, ModelAdapter, onboarding

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def session_with(
    storage: InMemorySessionStorage | None = None, clock: Clock | None = None
) -> ChatSession:
    return create_chat_session(
        onboarding(ModelAdapter()), session_id="s", storage=storage, now=clock or Clock()
    )


@pytest.mark.parametrize(
    ("turn_id", "lease_ms"),
    [
        ("has space", 1000),
        ("", 1000),
        ("turn-1", 0),
        ("turn-1", -5),
        ("turn-1", True),
        ("turn-1", 1.5),
        ("turn-1", 2**53),
    ],
)
async def test_invalid_claims_are_rejected(turn_id: Any, lease_ms: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        await session_with().claim_turn(turn_id, lease_ms)
    assert caught.value.message == "Turn claim is invalid."


async def test_a_claim_sets_the_lease_and_saves() -> None:
    storage = InMemorySessionStorage()
    session = session_with(storage)
    assert await session.claim_turn("turn-1", 30000) is True
    assert session.active_turn == ActiveTurn(turn_id="turn-1", expires_at=NOW_MS + 30000)
    assert json.loads(await storage.load("s") or "{}")["activeTurn"] == {
        "turnId": "turn-1",
        "expiresAt": NOW_MS + 30000,
    }
    assert session.get_cursor() == 1


async def test_an_unexpired_lease_blocks_every_other_claim_and_an_expired_one_is_taken() -> None:
    clock = Clock()
    session = session_with(clock=clock)
    assert await session.claim_turn("turn-1", 1000) is True
    assert await session.claim_turn("turn-2", 1000) is False
    assert await session.claim_turn("turn-1", 1000) is False
    clock.advance(999)
    assert await session.claim_turn("turn-2", 1000) is False
    clock.advance(1)
    assert await session.claim_turn("turn-2", 1000) is True
    assert session.active_turn is not None
    assert session.active_turn.turn_id == "turn-2"
    assert session.get_cursor() == 2
    # The turn whose lease expired never released it: its outcome is unknown.
    assert session.terminal_turns == (TerminalTurn(turn_id="turn-1", outcome="indeterminate"),)


async def test_an_expired_turn_claimed_again_is_recorded_indeterminate_and_not_run() -> None:
    clock = Clock()
    storage = InMemorySessionStorage()
    session = session_with(storage, clock=clock)
    assert await session.claim_turn("turn-1", 1000) is True
    clock.advance(1000)
    assert await session.claim_turn("turn-1", 1000) is False
    assert session.active_turn is None
    assert session.terminal_turns == (TerminalTurn(turn_id="turn-1", outcome="indeterminate"),)
    stored = json.loads(await storage.load("s") or "{}")
    assert "activeTurn" not in stored
    assert stored["terminalTurns"] == [{"turnId": "turn-1", "outcome": "indeterminate"}]
    assert await session.claim_turn("turn-2", 1000) is True


async def test_release_records_the_outcome_and_a_finished_turn_is_never_claimed_again() -> None:
    storage = InMemorySessionStorage()
    session = session_with(storage)
    await session.claim_turn("turn-1", 1000)
    await session.release_turn("turn-1", "completed")
    assert session.active_turn is None
    assert session.terminal_turns == (TerminalTurn(turn_id="turn-1", outcome="completed"),)
    stored = json.loads(await storage.load("s") or "{}")
    assert "activeTurn" not in stored
    assert stored["terminalTurns"] == [{"turnId": "turn-1", "outcome": "completed"}]
    assert await session.claim_turn("turn-1", 1000) is False
    assert session.get_cursor() == 2


async def test_releasing_a_turn_that_does_not_hold_the_lease_does_nothing() -> None:
    session = session_with()
    await session.release_turn("turn-1", "completed")
    await session.claim_turn("turn-1", 1000)
    await session.release_turn("turn-2", "indeterminate")
    assert session.active_turn is not None
    assert session.terminal_turns == ()
    assert session.get_cursor() == 1


async def test_release_rejects_an_unknown_outcome() -> None:
    session = session_with()
    await session.claim_turn("turn-1", 1000)
    with pytest.raises(ConfigurationError) as caught:
        await session.release_turn("turn-1", "maybe")  # type: ignore[arg-type]
    assert caught.value.message == "Turn outcome is invalid."


async def test_only_the_last_64_finished_turns_are_kept() -> None:
    session = session_with()
    for index in range(70):
        assert await session.claim_turn(f"turn-{index}", 1000)
        await session.release_turn(f"turn-{index}", "completed" if index % 2 else "indeterminate")
    turns = session.terminal_turns
    assert len(turns) == MAX_TERMINAL_TURNS == 64
    assert [turn.turn_id for turn in turns] == [f"turn-{index}" for index in range(6, 70)]
    assert session.build_snapshot().terminal_turns == turns
    assert await session.claim_turn("turn-0", 1000) is True


async def test_a_released_turn_moves_to_the_end_of_the_history_once() -> None:
    storage = InMemorySessionStorage(
        {
            "s": json.dumps(
                {
                    "protocol": "agentskit.chat.session",
                    "version": 1,
                    "sessionId": "s",
                    "definitionId": "support",
                    "definitionRevision": 1,
                    "updatedAt": "2026-07-11T00:00:00.000Z",
                    "cursor": 4,
                    "activeTurn": {"turnId": "turn-1", "expiresAt": NOW_MS + 10},
                    "terminalTurns": [
                        {"turnId": "turn-1", "outcome": "indeterminate"},
                        {"turnId": "turn-2", "outcome": "completed"},
                    ],
                    "confirmations": [],
                }
            )
        }
    )
    session = await resume_chat_session(
        onboarding(ModelAdapter()), session_id="s", storage=storage, now=Clock()
    )
    await session.release_turn("turn-1", "completed")
    assert session.terminal_turns == (
        TerminalTurn(turn_id="turn-2", outcome="completed"),
        TerminalTurn(turn_id="turn-1", outcome="completed"),
    )


async def test_a_claim_that_loses_the_race_raises_and_holds_no_unsaved_lease_decision_5() -> None:
    storage = InMemorySessionStorage()
    first, second = session_with(storage), session_with(storage)
    assert await first.claim_turn("turn-1", 1000) is True
    with pytest.raises(SessionConflictError):
        await second.claim_turn("turn-2", 1000)
    assert second.active_turn is None  # the reference keeps the stale lease here
    resumed = await resume_chat_session(
        onboarding(ModelAdapter()), session_id="s", storage=storage, now=Clock()
    )
    assert await resumed.claim_turn("turn-2", 1000) is False


class FailingOnce(InMemorySessionStorage):
    """Fails the next save once, as a transient storage outage would."""

    fail_next = False

    async def save(self, snapshot: Any, expected_cursor: int | None) -> bool:
        if self.fail_next:
            self.fail_next = False
            raise StorageError("The session storage is unavailable.", retryable=True)
        return await super().save(snapshot, expected_cursor)


async def test_a_lease_is_released_even_after_a_failed_scheduled_save_decision_5() -> None:
    storage = FailingOnce()
    failures: list[Exception] = []
    session = create_chat_session(
        onboarding(ModelAdapter()),
        session_id="s",
        storage=storage,
        now=Clock(),
        on_persist_error=failures.append,
    )
    assert await session.claim_turn("turn-1", 60_000) is True
    storage.fail_next = True
    controller = ChatController(session.chat)
    await controller.send("/start")  # the turn's scheduled save fails once
    assert len(failures) == 1
    await session.release_turn("turn-1", "completed")
    stored = json.loads(await storage.load("s") or "{}")
    assert "activeTurn" not in stored
    assert stored["terminalTurns"] == [{"turnId": "turn-1", "outcome": "completed"}]
    assert stored["conversation"]["state"] == "collecting"
    other = await resume_chat_session(
        onboarding(ModelAdapter()), session_id="s", storage=storage, now=Clock()
    )
    assert await other.claim_turn("turn-2", 60_000) is True


async def test_a_release_whose_save_fails_keeps_the_lease_so_it_can_be_retried_decision_5() -> None:
    storage = FailingOnce()
    session = session_with(storage)
    assert await session.claim_turn("turn-1", 60_000) is True
    storage.fail_next = True
    with pytest.raises(StorageError):
        await session.release_turn("turn-1", "completed")
    assert session.active_turn is not None
    assert session.terminal_turns == ()
    await session.release_turn("turn-1", "completed")
    assert session.active_turn is None
    stored = json.loads(await storage.load("s") or "{}")
    assert "activeTurn" not in stored


async def test_resuming_with_a_memory_continues_its_conversation_and_refuses_another() -> None:
    from agentskit_chat.conversation import resume_chat_session  # noqa: PLC0415
    from agentskit_chat.runtime import InMemoryChatMemory  # noqa: PLC0415
    from agentskit_chat.storage import SQLiteChatMemory  # noqa: PLC0415

    storage = InMemorySessionStorage()
    definition = onboarding(ModelAdapter(reply="hello back"))
    async with SQLiteChatMemory(":memory:", "s") as memory:
        first = await resume_chat_session(
            definition, session_id="s", storage=storage, memory=memory
        )
        controller = ChatController(first.chat)
        await controller.send("hello")
        # Another client, another process: the session and its messages come back together.
        again = await resume_chat_session(
            definition, session_id="s", storage=storage, memory=memory
        )
        assert [m.content for m in again.chat.initial_messages] == [
            m.content for m in controller.state.messages
        ]
        assert len(again.chat.initial_messages) == 2
        assert again.chat.memory is memory
    async with SQLiteChatMemory(":memory:", "someone-else") as foreign:
        with pytest.raises(ConfigurationError, match="another conversation"):
            await resume_chat_session(definition, session_id="s", storage=storage, memory=foreign)
    fresh = await resume_chat_session(
        definition, session_id="t", storage=storage, memory=InMemoryChatMemory()
    )
    assert fresh.chat.initial_messages == ()
