"""Typed action confirmation: the reference vectors, token validity, expiry and failures."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentskit_chat.actions import (
    CONFIRMATION_HINT,
    ConfirmationRecord,
    create_action_confirmation,
)
from agentskit_chat.errors import ConfigurationError, ToolError
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
