"""Session identity, snapshots, persist, resume; surfaced save failures; restore and rebuild
agree on decisions that no longer replay."""

from __future__ import annotations

import copy
import json
from typing import Any

import anyio
import pytest

from agentskit_chat.conversation import (
    ChatDefinition,
    ConversationTrace,
    InMemorySessionStorage,
    create_chat_session,
    resolve_chat_session,
    resume_chat_session,
)
from agentskit_chat.errors import ConfigurationError, SessionConflictError, StorageError
from agentskit_chat.protocol import SessionSnapshot, decode_session_snapshot
from agentskit_chat.protocol.fixtures import SESSION_SNAPSHOT
from agentskit_chat.runtime import ChatConfig
from tests._loop import no_blocking

from ._support import (
    NOW,
    SECRET,
    Clock,
    ModelAdapter,
    Traces,
    collect,
    definition,
    onboarding,
    reply,
    request,
    state_of,
    user,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def stored(storage: InMemorySessionStorage, session_id: str) -> dict[str, Any]:
    text = await storage.load(session_id)
    assert text is not None
    value: dict[str, Any] = json.loads(text)
    return value


def snapshot_of(value: dict[str, Any]) -> SessionSnapshot:
    result = decode_session_snapshot(value)
    assert result.ok
    return result.value


class FlakyStorage(InMemorySessionStorage):
    """Fails the next ``failures`` saves (with a message holding the secret), then works."""

    def __init__(self, failures: int = 0, conflicts: int = 0) -> None:
        super().__init__()
        self.failures = failures
        self.conflicts = conflicts
        self.saves: list[int | None] = []

    async def save(self, snapshot: SessionSnapshot, expected_cursor: int | None) -> bool:
        self.saves.append(expected_cursor)
        if self.failures:
            self.failures -= 1
            raise StorageError(f"down {SECRET}", retryable=True)
        if self.conflicts:
            self.conflicts -= 1
            return False
        return await super().save(snapshot, expected_cursor)


# --- identity ------------------------------------------------------------------------------------


def test_the_default_session_id_is_the_definition_id_and_the_time_in_base_36() -> None:
    session = create_chat_session(onboarding(ModelAdapter()), now=Clock())
    assert session.session_id == "support:mrfllhc0"
    assert session.definition_id == "support"
    assert session.definition_revision == 1


@pytest.mark.parametrize(
    ("definition_id", "session_id", "message"),
    [
        ("support", "has space", "Chat session identity is invalid."),
        ("support", "", "Chat session identity is invalid."),
        ("a" * 120, None, "Chat session identity is invalid."),
        ("has space", "session", "Chat definition identity is invalid."),
    ],
)
def test_invalid_identities_are_rejected(
    definition_id: str, session_id: str | None, message: str
) -> None:
    declared = ChatDefinition(id=definition_id, chat=ChatConfig(adapter=ModelAdapter()))
    with pytest.raises(ConfigurationError) as caught:
        create_chat_session(declared, session_id=session_id, now=Clock())
    assert caught.value.message == message


def test_resolve_returns_a_matching_session_or_a_new_one() -> None:
    first = onboarding(ModelAdapter())
    prepared = create_chat_session(first, session_id="prepared")
    assert resolve_chat_session(first, prepared) is prepared
    assert resolve_chat_session(first).session_id != "prepared"
    second = ChatDefinition(id="second", chat=first.chat)
    newer = onboarding(ModelAdapter(), revision=2)
    for other in (second, newer):
        with pytest.raises(ConfigurationError) as caught:
            resolve_chat_session(other, prepared)
        assert caught.value.message == "Prepared session is incompatible with this chat definition."


# --- snapshots and persist -----------------------------------------------------------------------


async def test_persist_without_storage_advances_the_cursor() -> None:
    session = create_chat_session(onboarding(ModelAdapter()))
    assert session.get_cursor() == 0
    await session.persist()
    await session.persist()
    assert session.get_cursor() == 2


async def test_the_snapshot_holds_the_fields_in_order_and_never_messages() -> None:
    storage = InMemorySessionStorage()
    session = create_chat_session(
        onboarding(ModelAdapter()), session_id="session-1", storage=storage, now=Clock()
    )
    async with no_blocking():
        await collect(session.chat.adapter.create_source(request(user("/start"))))
        await session.persist()
    assert await storage.load("session-1") == (
        '{"protocol":"agentskit.chat.session","version":1,"sessionId":"session-1",'
        '"definitionId":"support","definitionRevision":1,'
        '"updatedAt":"2026-07-11T00:00:00.000Z","cursor":2,'
        '"conversation":{"state":"collecting","decisions":[{"messageId":"user-1",'
        '"input":"/start","routeId":"start","kind":"deterministic",'
        '"content":"What is your name?","fromState":"idle","toState":"collecting"}]},'
        '"confirmations":[]}'
    )
    assert session.get_cursor() == 2


async def test_a_session_without_conversation_stores_no_conversation() -> None:
    storage = InMemorySessionStorage()
    session = create_chat_session(definition(ModelAdapter()), session_id="s", storage=storage)
    await session.persist()
    assert "conversation" not in (await stored(storage, "s"))


async def test_the_first_save_only_creates_and_a_stale_cursor_conflicts() -> None:
    storage = InMemorySessionStorage()
    declared = onboarding(ModelAdapter())
    first = create_chat_session(declared, session_id="s", storage=storage)
    second = create_chat_session(declared, session_id="s", storage=storage)
    await first.persist()
    with pytest.raises(SessionConflictError) as caught:
        await second.persist()
    assert caught.value.message == "Session snapshot changed in another client."
    assert second.get_cursor() == 0
    resumed = await resume_chat_session(declared, session_id="s", storage=storage)
    await first.persist()
    with pytest.raises(SessionConflictError):
        await resumed.persist()


async def test_persists_are_serial_and_a_failure_does_not_block_later_ones() -> None:
    class Slow(FlakyStorage):
        async def save(self, snapshot: SessionSnapshot, expected_cursor: int | None) -> bool:
            await anyio.sleep(0.01)
            return await super().save(snapshot, expected_cursor)

    storage = Slow(failures=1)
    session = create_chat_session(onboarding(ModelAdapter()), session_id="s", storage=storage)
    outcomes: list[str] = []

    async def persist() -> None:
        try:
            await session.persist()
            outcomes.append("ok")
        except StorageError:
            outcomes.append("failed")

    async with no_blocking(), anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(persist)
    assert sorted(outcomes) == ["failed", "ok", "ok", "ok"]
    assert storage.saves == [None, None, 1, 2]
    assert session.get_cursor() == 3


async def test_dispatch_saves_before_the_turn_ends() -> None:
    storage = InMemorySessionStorage()
    session = create_chat_session(onboarding(ModelAdapter()), session_id="s", storage=storage)
    adapter = session.chat.adapter
    chunks = []
    async for chunk in adapter.create_source(request(user("/start"))).stream():
        chunks.append(chunk.type)
        assert (await stored(storage, "s"))["conversation"]["state"] == "collecting"
    assert chunks == ["text", "done"]
    await collect(adapter.create_source(request(user("/start"), user("hello", "user-2"))))
    await collect(adapter.create_source(request(user("/start"), user("/x", "user-3"))))
    assert (await stored(storage, "s"))["cursor"] == 3


async def test_a_save_in_progress_finishes_when_the_turn_is_cancelled() -> None:
    release, started = anyio.Event(), anyio.Event()

    class Gated(InMemorySessionStorage):
        async def save(self, snapshot: SessionSnapshot, expected_cursor: int | None) -> bool:
            started.set()
            await release.wait()
            return await super().save(snapshot, expected_cursor)

    storage = Gated()
    session = create_chat_session(onboarding(ModelAdapter()), session_id="s", storage=storage)
    source = session.chat.adapter.create_source(request(user("/start")))
    turn = anyio.CancelScope()

    async def consume() -> None:
        with turn:
            await collect(source)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(consume)
            await started.wait()
            turn.cancel()
            await anyio.sleep(0.01)
            release.set()
    assert session.get_cursor() == 1
    await session.persist()
    assert (await stored(storage, "s"))["cursor"] == 2


async def test_scheduled_save_failures_reach_the_observer_and_the_next_persist_decision_12() -> (
    None
):
    storage = FlakyStorage(failures=2)
    errors: list[Exception] = []
    session = create_chat_session(
        onboarding(ModelAdapter()), session_id="s", storage=storage, on_persist_error=errors.append
    )
    adapter = session.chat.adapter
    assert await collect(adapter.create_source(request(user("/start")))) == reply(
        "What is your name?"
    )
    assert len(errors) == 1
    assert isinstance(errors[0], StorageError)
    await collect(adapter.create_source(request(user("/start"), user("hi", "user-2"))))
    assert len(errors) == 2
    with pytest.raises(StorageError) as caught:
        await session.persist()
    assert caught.value is errors[1]
    assert await storage.load("s") is None
    await session.persist()
    assert (await stored(storage, "s"))["conversation"]["state"] == "collecting"


async def test_a_later_successful_save_clears_a_scheduled_failure_decision_12() -> None:
    storage = FlakyStorage(conflicts=1)
    errors: list[Exception] = []
    session = create_chat_session(
        onboarding(ModelAdapter()), session_id="s", storage=storage, on_persist_error=errors.append
    )
    adapter = session.chat.adapter
    await collect(adapter.create_source(request(user("/start"))))
    assert [type(error) for error in errors] == [SessionConflictError]
    await collect(adapter.create_source(request(user("/start"))))
    assert len(errors) == 1
    await session.persist()
    assert session.get_cursor() == 2


@pytest.mark.parametrize("observer", ["raises", "async"])
async def test_a_failing_persist_error_observer_is_isolated_decision_12(observer: str) -> None:
    def raising(_error: Exception) -> None:
        raise RuntimeError("observer")

    async def rejecting(_error: Exception) -> None:
        raise RuntimeError("observer")

    session = create_chat_session(
        onboarding(ModelAdapter()),
        session_id="s",
        storage=FlakyStorage(failures=1),
        on_persist_error=raising if observer == "raises" else rejecting,
    )
    chunks = await collect(session.chat.adapter.create_source(request(user("/start"))))
    assert chunks == reply("What is your name?")
    with pytest.raises(StorageError):
        await session.persist()


async def test_an_explicit_persist_failure_is_raised_to_its_caller_only() -> None:
    storage = FlakyStorage(failures=1)
    errors: list[Exception] = []
    session = create_chat_session(
        onboarding(ModelAdapter()), session_id="s", storage=storage, on_persist_error=errors.append
    )
    with pytest.raises(StorageError):
        await session.persist()
    await session.persist()
    assert errors == []
    assert session.get_cursor() == 1


# --- resume --------------------------------------------------------------------------------------


async def test_a_resumed_session_replays_cached_decisions_without_the_model() -> None:
    storage = InMemorySessionStorage()
    model, traces = ModelAdapter(), Traces()
    declared = onboarding(model, traces, revision=2)
    session = create_chat_session(declared, session_id="s", storage=storage)
    await collect(session.chat.adapter.create_source(request(user("/start"))))
    resumed = await resume_chat_session(declared, session_id="s", storage=storage, now=Clock())
    assert state_of(resumed) == "collecting"
    assert resumed.get_cursor() == 1
    replayed = await collect(resumed.chat.adapter.create_source(request(user("/start"))))
    assert replayed == reply("What is your name?")
    assert model.calls == 0
    assert traces.kinds == ["deterministic", "deterministic"]


async def test_resuming_an_unknown_session_creates_one_whose_first_save_only_creates() -> None:
    storage = InMemorySessionStorage()
    declared = onboarding(ModelAdapter())
    fresh = await resume_chat_session(declared, session_id="s", storage=storage)
    assert fresh.session_id == "s"
    assert fresh.get_cursor() == 0
    await create_chat_session(declared, session_id="s", storage=storage).persist()
    with pytest.raises(SessionConflictError):
        await fresh.persist()


def _storage_with(value: Any, session_id: str = "session") -> InMemorySessionStorage:
    text = value if isinstance(value, str) else json.dumps(value)
    return InMemorySessionStorage({session_id: text})


def _variant(**changes: Any) -> dict[str, Any]:
    value = copy.deepcopy(SESSION_SNAPSHOT)
    value.update(changes)
    return value


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{", "Session snapshot is not valid JSON."),
        ({"version": 99}, "Session snapshot uses an unsupported version."),
        (
            {"protocol": "agentskit.chat.session", "version": 1},
            "Session snapshot payload is invalid.",
        ),
        ([], "Session snapshot payload is invalid."),
        (
            _variant(definitionId="other"),
            "Session snapshot is incompatible with this chat definition.",
        ),
        (
            _variant(definitionRevision=2),
            "Session snapshot is incompatible with this chat definition.",
        ),
        (
            _variant(sessionId="other"),
            "Session snapshot is incompatible with this chat definition.",
        ),
    ],
    ids=["not-json", "version-99", "invalid", "array", "definition", "revision", "session-id"],
)
async def test_resume_rejects_unusable_records(raw: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        await resume_chat_session(
            onboarding(ModelAdapter()), session_id="session", storage=_storage_with(raw)
        )
    assert caught.value.message == message


async def test_a_version_0_record_is_upgraded_on_resume() -> None:
    legacy = _variant(version=0)
    del legacy["protocol"]
    session = await resume_chat_session(
        onboarding(ModelAdapter()), session_id="session", storage=_storage_with(legacy)
    )
    assert state_of(session) == "collecting"
    assert session.build_snapshot().protocol == "agentskit.chat.session"


async def test_conversation_metadata_without_a_conversation_is_incompatible() -> None:
    with pytest.raises(ConfigurationError) as caught:
        await resume_chat_session(
            definition(ModelAdapter()),
            session_id="session",
            storage=_storage_with(SESSION_SNAPSHOT),
        )
    assert caught.value.message == (
        "Session conversation metadata is incompatible with this chat definition."
    )


def test_create_rejects_a_snapshot_of_another_session() -> None:
    with pytest.raises(ConfigurationError) as caught:
        create_chat_session(
            onboarding(ModelAdapter()), session_id="other", snapshot=snapshot_of(SESSION_SNAPSHOT)
        )
    assert caught.value.message == "Session snapshot is incompatible with this chat definition."


async def test_restored_confirmations_and_leases_are_carried_through_unchanged() -> None:
    value = _variant(
        activeTurn={"turnId": "turn-2", "expiresAt": 5},
        terminalTurns=[{"turnId": "turn-1", "outcome": "completed"}],
    )
    storage = _storage_with(value)
    session = await resume_chat_session(
        onboarding(ModelAdapter()), session_id="session", storage=storage, now=Clock()
    )
    await session.persist()
    saved = await stored(storage, "session")
    assert saved["confirmations"] == SESSION_SNAPSHOT["confirmations"]
    assert saved["activeTurn"] == {"turnId": "turn-2", "expiresAt": 5}
    assert saved["terminalTurns"] == [{"turnId": "turn-1", "outcome": "completed"}]
    assert saved["cursor"] == 3


async def test_an_edited_deterministic_turn_is_forgotten_when_persisted() -> None:
    storage = InMemorySessionStorage()
    model = ModelAdapter()
    declared = onboarding(model)
    session = create_chat_session(declared, session_id="s", storage=storage)
    adapter = session.chat.adapter
    await collect(adapter.create_source(request(user("/start"))))
    await collect(adapter.create_source(request(user("changed"))))
    await session.persist()
    assert (await stored(storage, "s"))["conversation"] == {"state": "idle", "decisions": []}
    resumed = await resume_chat_session(declared, session_id="s", storage=storage)
    assert state_of(resumed) == "idle"
    assert model.calls == 1


async def test_a_stored_decision_that_no_longer_replays_is_dropped_on_resume_decision_13() -> None:
    decision = {**SESSION_SNAPSHOT["conversation"]["decisions"][0], "fromState": "active"}
    value = _variant(conversation={"state": "collecting", "decisions": [decision]})
    storage = _storage_with(value)
    traces = Traces()
    session = await resume_chat_session(
        onboarding(ModelAdapter(), traces), session_id="session", storage=storage
    )
    assert state_of(session) == "idle"
    assert traces.seen == [ConversationTrace("repaired", "idle", "idle", "start")]
    await session.persist()
    assert (await stored(storage, "session"))["conversation"] == {"state": "idle", "decisions": []}


async def test_restore_and_rebuild_agree_on_dropped_decisions_decision_13() -> None:
    """The same history gives the same state whether the decisions were restored or rebuilt."""
    model = ModelAdapter()
    traces = Traces()
    declared = onboarding(model, traces)
    start, name = user("/start", "user-1"), user("/name Ada", "user-2")
    live = create_chat_session(declared, session_id="s")
    await collect(live.chat.adapter.create_source(request(start)))
    await collect(live.chat.adapter.create_source(request(start, name)))
    value = live.build_snapshot().to_wire()
    value["conversation"]["decisions"] = value["conversation"]["decisions"][1:]
    restored = create_chat_session(declared, snapshot=snapshot_of(value))
    assert state_of(restored) == "idle"
    await collect(live.chat.adapter.create_source(request(name, user("hi", "user-3"))))
    assert live.get_conversation_snapshot() == restored.get_conversation_snapshot()
    assert traces.kinds.count("repaired") == 2


async def test_a_stored_state_that_disagrees_with_its_decisions_is_repaired_decision_13() -> None:
    traces = Traces()
    value = _variant(conversation={"state": "complete", "decisions": []})
    session = await resume_chat_session(
        onboarding(ModelAdapter(), traces), session_id="session", storage=_storage_with(value)
    )
    assert state_of(session) == "idle"
    assert traces.seen == [ConversationTrace("repaired", "complete", "idle")]


async def test_a_restored_snapshot_needs_no_trace_when_it_replays() -> None:
    traces = Traces()
    session = await resume_chat_session(
        onboarding(ModelAdapter(), traces),
        session_id="session",
        storage=_storage_with(SESSION_SNAPSHOT),
    )
    assert state_of(session) == "collecting"
    assert traces.seen == []
    assert session.build_snapshot().updated_at != "" and NOW.year == 2026
