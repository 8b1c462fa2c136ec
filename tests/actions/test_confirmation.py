"""Typed action confirmation: the reference vectors, token validity, expiry and failures."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest

from agentskit_chat.actions import (
    CONFIRMATION_HINT,
    ClaimLost,
    ConfirmationRecord,
    create_action_confirmation,
)
from agentskit_chat.errors import ConfigurationError, ToolError
from agentskit_chat.protocol import Confirmation
from agentskit_chat.runtime import ChatTool

from ._support import TOOL, Executor, ScriptedChat, controller

pytestmark = pytest.mark.anyio

INVALID_TOKEN = "Action confirmation token is invalid for this session."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    """Epoch milliseconds, settable."""

    def __init__(self, ms: int = 100) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def ids(*values: str) -> Any:
    queue = list(values)
    return lambda: queue.pop(0)


def expect_config_error(message: str, error: pytest.ExceptionInfo[ConfigurationError]) -> None:
    assert error.value.message == message
    assert error.value.code == "AK_CONFIG_INVALID"
    assert error.value.hint == CONFIRMATION_HINT


async def test_a_proposal_is_pending_with_derived_ids_and_a_copied_input() -> None:
    executor = Executor()
    chat = controller(executor)
    confirmation = create_action_confirmation(
        session_id="session-a", chat=chat, now=lambda: 100, create_id=lambda: "choice-1"
    )
    payload = {"to": "ada@example.com", "tags": ["a"]}
    record = await confirmation.propose(name=TOOL, input=payload)
    payload["to"] = "changed"
    payload["tags"].append("b")  # type: ignore[attr-defined]
    assert record == ConfirmationRecord(
        token="confirm-choice-1",
        session_id="session-a",
        action=TOOL,
        input={"to": "ada@example.com", "tags": ("a",)},
        tool_call_id="app-choice-1",
        expires_at=300100,
        status="pending",
    )
    with pytest.raises(TypeError):
        record.input["to"] = "x"  # type: ignore[index]
    assert confirmation.get_by_tool_call("app-choice-1") == record
    assert confirmation.get_by_tool_call("app-other") is None
    assert confirmation.get_snapshot() == (record,)
    assert executor.calls == []


async def test_two_concurrent_approvals_both_get_approved_and_the_executor_runs_once() -> None:
    executor = Executor(gate=anyio.Event())
    chat = controller(executor)
    confirmation = create_action_confirmation(
        session_id="session-a", chat=chat, now=lambda: 100, create_id=lambda: "choice-1"
    )
    record = await confirmation.propose(name=TOOL, input={"to": "ada@example.com"})
    results: list[ConfirmationRecord] = []

    async def approve() -> None:
        results.append(await confirmation.approve(record.token, "session-a"))

    async with anyio.create_task_group() as group:
        group.start_soon(approve)
        group.start_soon(approve)
        await anyio.wait_all_tasks_blocked()
        assert executor.gate is not None
        executor.gate.set()
    assert [r.status for r in results] == ["approved", "approved"]
    assert executor.calls == [{"to": "ada@example.com"}]
    # The executor cleared its arguments; the record kept its own copy.
    assert confirmation.get_snapshot()[0].input == {"to": "ada@example.com"}


async def test_ttl_reject_cross_session_expiry_and_unknown_tokens() -> None:
    chat = ScriptedChat()
    clock = Clock(100)
    confirmation = create_action_confirmation(
        session_id="session-a", chat=chat, ttl_ms=5, now=clock, create_id=ids("one", "two")
    )
    first = await confirmation.propose(name=TOOL, input={})
    second = await confirmation.propose(name=TOOL, input={})
    assert first.expires_at == 105

    rejected = await confirmation.reject(first.token, "session-a", "not now")
    assert rejected.status == "rejected"
    assert (await confirmation.approve(first.token, "session-a")).status == "rejected"
    assert chat.denied == [("app-one", "not now")]
    assert chat.approved == []

    with pytest.raises(ConfigurationError) as error:
        await confirmation.approve(second.token, "session-b")
    expect_config_error(INVALID_TOKEN, error)

    clock.ms = 105
    expired = await confirmation.approve(second.token, "session-a")
    assert expired.status == "expired"
    assert chat.denied[-1] == ("app-two", "confirmation expired")
    assert chat.approved == []

    for token in ("confirm-unknown", "", first.tool_call_id):
        with pytest.raises(ConfigurationError) as error:
            await confirmation.approve(token, "session-a")
        expect_config_error(INVALID_TOKEN, error)


async def test_a_token_of_another_confirmation_is_invalid_here_and_runs_nothing() -> None:
    executor = Executor()
    chat_a, chat_b = controller(executor), controller(executor)
    a = create_action_confirmation(session_id="session-a", chat=chat_a, create_id=lambda: "x1")
    b = create_action_confirmation(session_id="session-b", chat=chat_b, create_id=lambda: "y1")
    record = await a.propose(name=TOOL, input={"to": "ada"})
    await b.propose(name=TOOL, input={"to": "bob"})
    for call in (b.approve, b.reject):
        with pytest.raises(ConfigurationError) as error:
            await call(record.token, "session-b")
        expect_config_error(INVALID_TOKEN, error)
    assert executor.calls == []
    assert [r.status for r in (*a.get_snapshot(), *b.get_snapshot())] == ["pending", "pending"]


@pytest.mark.parametrize("kind", ["approve", "reject"])
async def test_an_upstream_failure_without_storage_reverts_to_pending(kind: str) -> None:
    chat = ScriptedChat(fail=1)
    changes: list[tuple[str, ...]] = []
    confirmation = create_action_confirmation(
        session_id="session-a",
        chat=chat,
        now=lambda: 100,
        create_id=lambda: "choice-1",
        on_change=lambda records: changes.append(tuple(r.status for r in records)),
    )
    record = await confirmation.propose(name=TOOL, input={})
    decide = confirmation.approve if kind == "approve" else confirmation.reject
    with pytest.raises(RuntimeError):
        await decide(record.token, "session-a")
    assert confirmation.get_snapshot() == (record,)
    final = await decide(record.token, "session-a")
    expected = "approved" if kind == "approve" else "rejected"
    assert final.status == expected
    assert len(chat.approved if kind == "approve" else chat.denied) == 2
    processing = "approving" if kind == "approve" else "rejecting"
    assert changes == [
        ("pending",),
        (processing,),
        ("pending",),
        (processing,),
        (expected,),
    ]


@pytest.mark.parametrize(
    "made",
    ["a" * 121, "", "-leading", "has space", "ünïcode", 12],
    ids=["121-chars", "empty", "leading-dash", "space", "non-ascii", "not-a-string"],
)
async def test_an_invalid_created_id_is_refused_before_the_upstream(made: Any) -> None:
    chat = ScriptedChat()
    confirmation = create_action_confirmation(
        session_id="session-a", chat=chat, create_id=lambda: made
    )
    with pytest.raises(ConfigurationError) as error:
        await confirmation.propose(name=TOOL, input={})
    expect_config_error("Action confirmation id is invalid.", error)
    assert confirmation.get_snapshot() == ()


async def test_an_id_of_120_characters_makes_safe_identifiers() -> None:
    confirmation = create_action_confirmation(
        session_id="session-a", chat=ScriptedChat(), create_id=lambda: "a" * 120
    )
    record = await confirmation.propose(name=TOOL, input={})
    assert record.token == "confirm-" + "a" * 120
    assert record.tool_call_id == "app-" + "a" * 120


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"session_id": "bad id"}, "Action confirmation options are invalid."),
        ({"session_id": ""}, "Action confirmation options are invalid."),
        ({"ttl_ms": 0}, "Action confirmation options are invalid."),
        ({"ttl_ms": 1.5}, "Action confirmation options are invalid."),
        ({"ttl_ms": True}, "Action confirmation options are invalid."),
        ({"ttl_ms": 2**53}, "Action confirmation options are invalid."),
    ],
    ids=["unsafe-session", "empty-session", "zero-ttl", "float-ttl", "bool-ttl", "huge-ttl"],
)
async def test_invalid_options_are_refused(options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"session_id": "session-a", "chat": ScriptedChat(), **options}
    with pytest.raises(ConfigurationError) as error:
        create_action_confirmation(**arguments)
    expect_config_error(message, error)


async def test_a_proposal_the_upstream_did_not_gate_is_recorded_rejected() -> None:
    chat = ScriptedChat(status="pending")
    confirmation = create_action_confirmation(session_id="s", chat=chat, create_id=lambda: "c")
    record = await confirmation.propose(name=TOOL, input={})
    assert record.status == "rejected"
    assert (await confirmation.approve(record.token, "s")).status == "rejected"
    assert chat.approved == []


async def test_upstream_refusals_propagate_and_record_nothing() -> None:
    executor = Executor()
    plain = ChatTool(name="plain", execute=executor)
    confirmation = create_action_confirmation(
        session_id="s", chat=controller(executor, plain), create_id=ids("a", "b")
    )
    with pytest.raises(ToolError) as refused:
        await confirmation.propose(name="missing", input={})
    assert refused.value.code == "AK_TOOL_NOT_FOUND"
    with pytest.raises(ConfigurationError):
        await confirmation.propose(name="plain", input={})
    assert confirmation.get_snapshot() == ()


@pytest.mark.parametrize(
    ("first", "second", "processing", "final"),
    [
        ("approve", "reject", "approving", "approved"),
        ("reject", "approve", "rejecting", "rejected"),
    ],
)
async def test_approve_and_reject_race_by_claim(
    first: str, second: str, processing: str, final: str
) -> None:
    chat = ScriptedChat(gate=anyio.Event())
    confirmation = create_action_confirmation(session_id="s", chat=chat, create_id=lambda: "c")
    record = await confirmation.propose(name=TOOL, input={})
    results: dict[str, ConfirmationRecord] = {}

    async def decide(kind: str) -> None:
        call = confirmation.approve if kind == "approve" else confirmation.reject
        results[kind] = await call(record.token, "s")

    async with anyio.create_task_group() as group:
        group.start_soon(decide, first)
        await anyio.wait_all_tasks_blocked()
        # The second call returns while the winner's upstream call is still in flight.
        await decide(second)
        assert results[second].status == processing
        assert chat.gate is not None
        chat.gate.set()
    assert results[first].status == final
    assert results[second].status == processing  # never the winner's outcome as its own
    assert len(chat.approved) + len(chat.denied) == 1
    assert confirmation.get_snapshot()[0].status == final


async def test_two_concurrent_rejections_share_one_denial() -> None:
    chat = ScriptedChat(gate=anyio.Event())
    confirmation = create_action_confirmation(session_id="s", chat=chat, create_id=lambda: "c")
    record = await confirmation.propose(name=TOOL, input={})
    results: list[ConfirmationRecord] = []

    async def reject(reason: str) -> None:
        results.append(await confirmation.reject(record.token, "s", reason))

    async with anyio.create_task_group() as group:
        group.start_soon(reject, "first")
        group.start_soon(reject, "second")
        await anyio.wait_all_tasks_blocked()
        assert chat.gate is not None
        chat.gate.set()
    assert [r.status for r in results] == ["rejected", "rejected"]
    assert chat.denied == [("app-c", "first")]


async def test_concurrent_approvals_share_a_failure() -> None:
    chat = ScriptedChat(fail=1, gate=anyio.Event())
    confirmation = create_action_confirmation(session_id="s", chat=chat, create_id=lambda: "c")
    record = await confirmation.propose(name=TOOL, input={})
    failures: list[BaseException] = []

    async def approve() -> None:
        try:
            await confirmation.approve(record.token, "s")
        except RuntimeError as error:
            failures.append(error)

    async with anyio.create_task_group() as group:
        group.start_soon(approve)
        group.start_soon(approve)
        await anyio.wait_all_tasks_blocked()
        assert chat.gate is not None
        chat.gate.set()
    assert len(failures) == 2
    assert chat.approved == ["app-c"]
    assert confirmation.get_snapshot()[0].status == "pending"


class DurableClaims:
    """A claim hook that records each claim and answers from a script."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.claims: list[tuple[str, str]] = []

    async def __call__(self, record: ConfirmationRecord, status: str) -> Any:
        self.claims.append((record.status, status))
        return self.answers.pop(0) if self.answers else True


async def test_with_durable_claims_a_failed_upstream_keeps_the_processing_status() -> None:
    chat = ScriptedChat(fail=1)
    claims = DurableClaims()
    changes: list[tuple[str, ...]] = []
    confirmation = create_action_confirmation(
        session_id="s",
        chat=chat,
        create_id=lambda: "c",
        claim_status=claims,
        on_change=lambda records: changes.append(tuple(r.status for r in records)),
    )
    record = await confirmation.propose(name=TOOL, input={})
    with pytest.raises(RuntimeError):
        await confirmation.approve(record.token, "s")
    assert confirmation.get_snapshot()[0].status == "approving"
    assert (await confirmation.approve(record.token, "s")).status == "approving"
    assert chat.approved == ["app-c"]
    # Claims go to the hook; on_change only hears of the proposal.
    assert claims.claims == [("pending", "approving")]
    assert changes == [("pending",)]

    settled = await confirmation.reconcile(record.token, "s", "rejected")
    assert settled.status == "rejected"
    assert claims.claims[-1] == ("approving", "rejected")
    assert chat.approved == ["app-c"]
    assert chat.denied == []


async def test_a_refused_claim_is_already_resolved_and_calls_nothing() -> None:
    chat = ScriptedChat()
    confirmation = create_action_confirmation(
        session_id="s", chat=chat, create_id=lambda: "c", claim_status=DurableClaims(False)
    )
    record = await confirmation.propose(name=TOOL, input={})
    with pytest.raises(ConfigurationError) as error:
        await confirmation.approve(record.token, "s")
    expect_config_error("Action confirmation was already resolved by another client.", error)
    assert chat.approved == []


async def test_a_lost_claim_adopts_the_other_clients_record() -> None:
    chat = ScriptedChat()
    claims = DurableClaims()
    confirmation = create_action_confirmation(
        session_id="s", chat=chat, create_id=lambda: "c", claim_status=claims
    )
    record = await confirmation.propose(name=TOOL, input={})
    elsewhere = ConfirmationRecord(
        token=record.token,
        session_id="whatever",
        action=record.action,
        input=record.input,
        tool_call_id=record.tool_call_id,
        expires_at=record.expires_at,
        status="rejected",
    )
    claims.answers.append(ClaimLost(elsewhere))
    result = await confirmation.approve(record.token, "s")
    assert (result.status, result.session_id) == ("rejected", "s")
    assert confirmation.get_snapshot() == (result,)
    assert chat.approved == []
    assert chat.denied == []


async def test_in_memory_reconcile_refuses_pending_records() -> None:
    confirmation = create_action_confirmation(
        session_id="s", chat=ScriptedChat(), create_id=lambda: "c"
    )
    record = await confirmation.propose(name=TOOL, input={})
    with pytest.raises(ConfigurationError) as error:
        await confirmation.reconcile(record.token, "s", "approved")
    expect_config_error("Action confirmation is not awaiting reconciliation.", error)


async def test_initial_records_are_restored_into_this_session_in_order() -> None:
    stored = [
        Confirmation(
            token=f"confirm-{n}",
            action=TOOL,
            input={"n": n},
            tool_call_id=f"app-{n}",
            expires_at=10,
            status="pending",
        )
        for n in range(3)
    ]
    chat = ScriptedChat()
    confirmation = create_action_confirmation(
        session_id="s", chat=chat, initial_records=stored, now=lambda: 5
    )
    snapshot = confirmation.get_snapshot()
    assert [(r.token, r.session_id) for r in snapshot] == [
        ("confirm-0", "s"),
        ("confirm-1", "s"),
        ("confirm-2", "s"),
    ]
    assert confirmation.get_by_tool_call("app-1") == snapshot[1]
    assert (await confirmation.approve("confirm-1", "s")).status == "approved"
    assert chat.approved == ["app-1"]


@pytest.mark.parametrize("duplicate", ["token", "tool_call_id"])
async def test_initial_records_with_duplicates_are_invalid(duplicate: str) -> None:
    base = ConfirmationRecord(
        token="confirm-1",
        session_id="s",
        action=TOOL,
        input={},
        tool_call_id="app-1",
        expires_at=10,
        status="pending",
    )
    other: dict[str, Any] = {"token": "confirm-2", "tool_call_id": "app-2"}
    del other[duplicate]
    twin = dataclasses.replace(base, **other)
    with pytest.raises(ConfigurationError) as error:
        create_action_confirmation(
            session_id="s", chat=ScriptedChat(), initial_records=[base, twin]
        )
    expect_config_error("Action confirmation options are invalid.", error)


async def test_a_repeated_id_is_refused_before_the_upstream() -> None:
    chat = ScriptedChat()
    confirmation = create_action_confirmation(session_id="s", chat=chat, create_id=lambda: "c")
    await confirmation.propose(name=TOOL, input={})
    with pytest.raises(ConfigurationError) as error:
        await confirmation.propose(name=TOOL, input={"other": True})
    expect_config_error("Action confirmation id is already in use.", error)
    assert len(confirmation.get_snapshot()) == 1


async def test_default_ids_are_distinct_and_valid() -> None:
    confirmation = create_action_confirmation(session_id="s", chat=ScriptedChat(), now=lambda: 100)
    first = await confirmation.propose(name=TOOL, input={})
    second = await confirmation.propose(name=TOOL, input={})
    assert first.token != second.token
    assert first.token.endswith("-2s")  # now() = 100 in base 36
