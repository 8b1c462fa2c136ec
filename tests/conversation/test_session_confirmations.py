"""Session-bound confirmations: persisted with the session, claimed by compare-and-set before
the upstream runs, settled across clients, reconciled on purpose, observed in isolation."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from agentskit_chat.actions import ConfirmationRecord
from agentskit_chat.conversation import (
    ChatDefinition,
    ChatSession,
    InMemorySessionStorage,
    create_chat_session,
    reconcile_confirmation,
    resume_chat_session,
)
from agentskit_chat.errors import ConfigurationError, SessionConflictError
from agentskit_chat.protocol import SessionSnapshot
from tests.actions._support import TOOL, ScriptedChat

from ._support import NOW_MS, Clock, ModelAdapter, definition

pytestmark = pytest.mark.anyio

SESSION = "support-1"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def chat_definition() -> ChatDefinition:
    return definition(ModelAdapter())


async def stored_confirmations(storage: InMemorySessionStorage) -> list[dict[str, Any]]:
    text = await storage.load(SESSION)
    assert text is not None
    confirmations: list[dict[str, Any]] = json.loads(text)["confirmations"]
    return confirmations


async def resume(
    chat_definition: ChatDefinition, storage: InMemorySessionStorage, **options: Any
) -> ChatSession:
    return await resume_chat_session(
        chat_definition, session_id=SESSION, storage=storage, now=Clock(), **options
    )


async def proposed(
    chat_definition: ChatDefinition, storage: InMemorySessionStorage, chat: ScriptedChat
) -> ConfirmationRecord:
    """A persisted session holding one pending proposal ``confirm-c1``."""
    session = await resume(chat_definition, storage)
    confirmation = session.create_confirmation(chat=chat, create_id=lambda: "c1")
    return await confirmation.propose(name=TOOL, input={"to": "ada@example.com"})


async def test_a_proposal_is_stored_with_the_session_and_expires_by_its_clock(
    chat_definition: ChatDefinition,
) -> None:
    storage = InMemorySessionStorage()
    record = await proposed(chat_definition, storage, ScriptedChat())
    assert record.session_id == SESSION
    assert record.expires_at == NOW_MS + 300_000  # the session's clock, not today's date
    assert await stored_confirmations(storage) == [
        {
            "token": "confirm-c1",
            "action": TOOL,
            "input": {"to": "ada@example.com"},
            "toolCallId": "app-c1",
            "expiresAt": NOW_MS + 300_000,
            "status": "pending",
        }
    ]


async def test_persisted_resumed_approved_resumed_approved_calls_the_upstream_once(
    chat_definition: ChatDefinition,
) -> None:
    storage = InMemorySessionStorage()
    chat = ScriptedChat()
    record = await proposed(chat_definition, storage, chat)
    for _ in range(2):
        session = await resume(chat_definition, storage)
        confirmation = session.create_confirmation(chat=chat)
        approved = await confirmation.approve(record.token, SESSION)
        assert approved.status == "approved"
        await session.persist()
    assert chat.approved == ["app-c1"]
    assert [c["status"] for c in await stored_confirmations(storage)] == ["approved"]


async def test_two_resumed_clients_approving_one_token_run_the_upstream_once(
    chat_definition: ChatDefinition,
) -> None:
    storage = InMemorySessionStorage()
    chat = ScriptedChat(gate=anyio.Event())
    record = await proposed(chat_definition, storage, chat)
    first = await resume(chat_definition, storage)
    second = await resume(chat_definition, storage)
    results: dict[str, ConfirmationRecord] = {}

    async def approve(name: str, session: ChatSession) -> None:
        confirmation = session.create_confirmation(chat=chat)
        results[name] = await confirmation.approve(record.token, SESSION)

    async with anyio.create_task_group() as group:
        group.start_soon(approve, "first", first)
        group.start_soon(approve, "second", second)
        await anyio.wait_all_tasks_blocked()
        assert chat.gate is not None
        chat.gate.set()
    assert chat.approved == ["app-c1"]
    # The loser of the claim neither failed nor reported the winner's processing status: it
    # waited for the stored record to settle.
    assert {name: r.status for name, r in results.items()} == {
        "first": "approved",
        "second": "approved",
    }
    assert [c["status"] for c in await stored_confirmations(storage)] == ["approved"]


async def test_a_decision_that_finds_another_clients_claim_waits_for_its_outcome(
    chat_definition: ChatDefinition,
) -> None:
    storage = InMemorySessionStorage()
    chat = ScriptedChat(gate=anyio.Event())
    record = await proposed(chat_definition, storage, chat)
    winner = await resume(chat_definition, storage)
    seen: list[ConfirmationRecord] = []

    async def late_client() -> None:
        # Resumed after the winner's claim was stored: it starts from "approving".
        session = await resume(chat_definition, storage)
        assert [r.status for r in session.confirmations] == ["approving"]
        seen.append(await session.create_confirmation(chat=chat).approve(record.token, SESSION))

    async with anyio.create_task_group() as group:
        group.start_soon(winner.create_confirmation(chat=chat).approve, record.token, SESSION)
        await anyio.wait_all_tasks_blocked()
        group.start_soon(late_client)
        await anyio.wait_all_tasks_blocked()
        assert chat.gate is not None
        chat.gate.set()
    assert [r.status for r in seen] == ["approved"]
    assert chat.approved == ["app-c1"]


async def test_no_stuck_confirmations_a_failed_upstream_stays_processing_until_reconciled(
    chat_definition: ChatDefinition,
) -> None:
    storage = InMemorySessionStorage()
    chat = ScriptedChat(fail=1)
    record = await proposed(chat_definition, storage, chat)
    session = await resume(chat_definition, storage)
    with pytest.raises(RuntimeError):
        await session.create_confirmation(chat=chat).approve(record.token, SESSION)
    assert [c["status"] for c in await stored_confirmations(storage)] == ["approving"]

    # Every client sees the processing status; approving again never calls the upstream.
    for _ in range(2):
        other = await resume(chat_definition, storage)
        assert [r.status for r in other.confirmations] == ["approving"]
        confirmation = other.create_confirmation(chat=chat, settle_timeout_s=0.01)
        assert (await confirmation.approve(record.token, SESSION)).status == "approving"
        assert (await confirmation.reject(record.token, SESSION)).status == "approving"
    assert chat.approved == ["app-c1"]
    assert chat.denied == []

    changes: list[tuple[str, ...]] = []
    host = await resume(
        chat_definition,
        storage,
        on_confirmation_change=lambda records: changes.append(tuple(r.status for r in records)),
    )
    settled = await reconcile_confirmation(host, token=record.token, status="approved")
    assert settled.status == "approved"
    assert changes == [("approved",)]
    assert [c["status"] for c in await stored_confirmations(storage)] == ["approved"]
    assert chat.approved == ["app-c1"]


@pytest.mark.parametrize(
    ("status", "target", "message"),
    [
        ("pending", "approved", "Action confirmation is not awaiting reconciliation."),
        ("approved", "rejected", "Action confirmation is not awaiting reconciliation."),
        ("expired", "expired", "Action confirmation is not awaiting reconciliation."),
        ("approving", "pending", "Action confirmation reconciliation status is invalid."),
        ("rejecting", "approving", "Action confirmation reconciliation status is invalid."),
    ],
)
async def test_reconcile_refuses_what_is_not_stuck_or_not_terminal(
    chat_definition: ChatDefinition, status: str, target: Any, message: str
) -> None:
    storage = InMemorySessionStorage()
    await proposed(chat_definition, storage, ScriptedChat())
    text = await storage.load(SESSION)
    assert text is not None
    value = json.loads(text)
    value["confirmations"][0]["status"] = status
    await storage.delete(SESSION)
    assert await storage.save(SessionSnapshot.model_validate(value), None)
    session = await resume(chat_definition, storage)
    with pytest.raises(ConfigurationError) as error:
        await reconcile_confirmation(session, token="confirm-c1", status=target)
    assert error.value.message == message
    assert [c["status"] for c in await stored_confirmations(storage)] == [status]


async def test_reconcile_refuses_an_unknown_token(chat_definition: ChatDefinition) -> None:
    storage = InMemorySessionStorage()
    await proposed(chat_definition, storage, ScriptedChat())
    session = await resume(chat_definition, storage)
    with pytest.raises(ConfigurationError) as error:
        await reconcile_confirmation(session, token="confirm-other", status="approved")
    assert error.value.message == "Action confirmation token is invalid for this session."


async def test_reconcile_on_a_stale_session_returns_what_another_client_stored(
    chat_definition: ChatDefinition,
) -> None:
    storage = InMemorySessionStorage()
    chat = ScriptedChat(fail=1)
    record = await proposed(chat_definition, storage, chat)
    with pytest.raises(RuntimeError):
        await (
            (await resume(chat_definition, storage))
            .create_confirmation(chat=chat)
            .approve(record.token, SESSION)
        )
    stale = await resume(chat_definition, storage)
    fresh = await resume(chat_definition, storage)
    await reconcile_confirmation(fresh, token=record.token, status="rejected")
    settled = await reconcile_confirmation(stale, token=record.token, status="approved")
    assert settled.status == "rejected"
    assert [c["status"] for c in await stored_confirmations(storage)] == ["rejected"]


async def test_a_conflict_that_leaves_the_record_pending_raises_and_calls_nothing(
    chat_definition: ChatDefinition,
) -> None:
    storage = InMemorySessionStorage()
    chat = ScriptedChat()
    record = await proposed(chat_definition, storage, chat)
    stale = await resume(chat_definition, storage)
    other = await resume(chat_definition, storage)
    assert await other.claim_turn("turn-1", 1000)  # another change of the same session
    confirmation = stale.create_confirmation(chat=chat)
    with pytest.raises(SessionConflictError):
        await confirmation.approve(record.token, SESSION)
    assert chat.approved == []
    assert [r.status for r in confirmation.get_snapshot()] == ["pending"]
    assert [r.status for r in stale.confirmations] == ["pending"]
    assert [c["status"] for c in await stored_confirmations(storage)] == ["pending"]


async def test_without_storage_statuses_change_after_the_upstream_and_failures_revert(
    chat_definition: ChatDefinition,
) -> None:
    chat = ScriptedChat(fail=1)
    changes: list[tuple[str, ...]] = []
    session = create_chat_session(
        chat_definition,
        session_id=SESSION,
        now=Clock(),
        on_confirmation_change=lambda records: changes.append(tuple(r.status for r in records)),
    )
    confirmation = session.create_confirmation(chat=chat, create_id=lambda: "c1")
    record = await confirmation.propose(name=TOOL, input={})
    with pytest.raises(RuntimeError):
        await confirmation.approve(record.token, SESSION)
    assert [r.status for r in session.confirmations] == ["pending"]
    assert (await confirmation.approve(record.token, SESSION)).status == "approved"
    assert [r.status for r in session.confirmations] == ["approved"]
    assert changes == [
        ("pending",),
        ("approving",),
        ("pending",),
        ("approving",),
        ("approved",),
    ]
    assert session.get_cursor() == 5
    assert len(chat.approved) == 2


def broken_observer(records: tuple[ConfirmationRecord, ...]) -> None:
    raise RuntimeError("observer failed")


async def broken_async_observer(records: tuple[ConfirmationRecord, ...]) -> None:
    raise RuntimeError("observer failed")


@pytest.mark.parametrize("observer", [broken_observer, broken_async_observer])
async def test_a_raising_confirmation_observer_never_breaks_the_flow(
    chat_definition: ChatDefinition, observer: Any
) -> None:
    storage = InMemorySessionStorage()
    chat = ScriptedChat()
    session = await resume(chat_definition, storage, on_confirmation_change=observer)
    confirmation = session.create_confirmation(chat=chat, create_id=lambda: "c1")
    record = await confirmation.propose(name=TOOL, input={})
    assert (await confirmation.approve(record.token, SESSION)).status == "approved"
    assert [c["status"] for c in await stored_confirmations(storage)] == ["approved"]


async def test_resumed_sessions_tell_their_observer_every_record_with_its_session(
    chat_definition: ChatDefinition,
) -> None:
    storage = InMemorySessionStorage()
    chat = ScriptedChat()
    record = await proposed(chat_definition, storage, chat)
    seen: list[tuple[ConfirmationRecord, ...]] = []
    session = await resume(chat_definition, storage, on_confirmation_change=seen.append)
    await session.create_confirmation(chat=chat).reject(record.token, SESSION, "no")
    assert [[(r.session_id, r.status) for r in records] for records in seen] == [
        [(SESSION, "rejecting")],
        [(SESSION, "rejected")],
    ]
    assert chat.denied == [("app-c1", "no")]


class FailingSave(InMemorySessionStorage):
    """Saves fail while ``failing`` is set."""

    failing = False

    async def save(self, snapshot: SessionSnapshot, expected_cursor: int | None) -> bool:
        if self.failing:
            raise OSError("disk full")
        return await super().save(snapshot, expected_cursor)


async def test_a_proposal_that_cannot_be_saved_is_not_kept(
    chat_definition: ChatDefinition,
) -> None:
    storage = FailingSave()
    session = await resume_chat_session(chat_definition, session_id=SESSION, storage=storage)
    confirmation = session.create_confirmation(chat=ScriptedChat(), create_id=lambda: "c1")
    storage.failing = True
    with pytest.raises(OSError):
        await confirmation.propose(name=TOOL, input={})
    assert confirmation.get_snapshot() == ()
    assert session.confirmations == ()


async def test_a_claim_that_cannot_be_saved_calls_nothing_and_stays_pending(
    chat_definition: ChatDefinition,
) -> None:
    storage = FailingSave()
    chat = ScriptedChat()
    session = await resume_chat_session(chat_definition, session_id=SESSION, storage=storage)
    confirmation = session.create_confirmation(chat=chat, create_id=lambda: "c1")
    record = await confirmation.propose(name=TOOL, input={})
    storage.failing = True
    with pytest.raises(OSError):
        await confirmation.approve(record.token, SESSION)
    assert chat.approved == []
    assert [r.status for r in (*confirmation.get_snapshot(), *session.confirmations)] == [
        "pending",
        "pending",
    ]
    storage.failing = False
    assert (await confirmation.approve(record.token, SESSION)).status == "approved"
    assert chat.approved == ["app-c1"]


async def test_a_token_of_another_session_is_refused_by_this_one(
    chat_definition: ChatDefinition,
) -> None:
    storage = InMemorySessionStorage()
    chat = ScriptedChat()
    record = await proposed(chat_definition, storage, chat)
    other = await resume_chat_session(chat_definition, session_id="support-2", storage=storage)
    confirmation = other.create_confirmation(chat=chat)
    for token, session_id in ((record.token, "support-2"), (record.token, SESSION)):
        with pytest.raises(ConfigurationError) as error:
            await confirmation.approve(token, session_id)
        assert error.value.message == "Action confirmation token is invalid for this session."
    assert chat.approved == []
