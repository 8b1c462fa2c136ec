"""A model's confirmation-gated calls, approved or rejected over ``POST /api/chat``.

Each test serves the chat handler under uvicorn on a real socket, with a pydantic-ai agent on a
scripted ``FunctionModel`` (see :mod:`tests.server._approval_support`) that calls a gated chat
tool (or its own tool that needs approval). The turn that proposes a call stores a pending
confirmation for it in the session; a later submission with ``payload.confirmation`` decides
it, runs it at most once, and the model answers with its outcome.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agentskit_chat.actions import DEFAULT_CONFIRMATION_TTL_MS
from agentskit_chat.conversation import (
    ChatDefinition,
    InMemorySessionStorage,
    create_chat_session,
    resume_chat_session,
)
from agentskit_chat.conversation._session import epoch_ms
from agentskit_chat.protocol import ToolCall
from agentskit_chat.runtime import ChatMessage
from agentskit_chat.server import create_chat_app
from agentskit_chat.server._chat_approvals import record_waiting_calls, waiting_calls
from tests.agents._pydantic_ai_fakes import T0
from tests.conversation._support import Clock
from tests.server._approval_support import OPENING, Policy, TicketDesk, desk_definition
from tests.server._chat_support import JSON, Memories, lines, submit
from tests.service._support import serve

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Desk:
    """The help desk chat over shared in-memory stores."""

    def __init__(self, *, deny_execute: bool = False) -> None:
        self.desk = TicketDesk()
        self.policy = Policy(deny_execute=deny_execute)
        self.storage = InMemorySessionStorage()
        self.memories = Memories()
        self.clock = Clock()
        self.definition: ChatDefinition = desk_definition(self.desk, self.policy)

    def app(self) -> Any:
        return create_chat_app(
            resolve_definition=lambda context, session_id: self.definition,
            session_storage=lambda context: self.storage,
            chat_memory=self.memories,
            now=self.clock,
        )

    def records(self, session_id: str = "s1") -> list[dict[str, Any]]:
        stored = self.storage._data.get(session_id)
        if stored is None:
            return []
        confirmations: list[dict[str, Any]] = httpx.Response(200, text=stored).json()[
            "confirmations"
        ]
        return confirmations


async def say(url: str, text: str, *, session_id: str = "s1", turn_id: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=20) as client:
        body = submit(session_id=session_id, turn_id=turn_id, event_id=turn_id, text=text)
        return await client.post(url, content=body, headers=JSON)


async def decide(
    url: str,
    call_id: str,
    decision: str,
    *,
    session_id: str = "s1",
    turn_id: str,
    reason: str | None = None,
) -> httpx.Response:
    confirmation: dict[str, Any] = {"toolCallId": call_id, "decision": decision}
    if reason is not None:
        confirmation["reason"] = reason
    body = submit(
        session_id=session_id,
        turn_id=turn_id,
        event_id=turn_id,
        text="Approve" if decision == "approve" else "Reject",
        payload={"confirmation": confirmation},
    )
    async with httpx.AsyncClient(timeout=20) as client:
        return await client.post(url, content=body, headers=JSON)


def final(response: httpx.Response) -> dict[str, Any]:
    """The payload of the stream's last line, which must be a snapshot."""
    assert response.status_code == 200, response.text
    events = lines(response.content)
    assert events, "the turn streamed nothing"
    assert events[-1]["event"] == "server.turn.snapshot", events[-1]
    payload: dict[str, Any] = events[-1]["payload"]
    return payload


def calls(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every tool call of a snapshot, by id (the newest message carrying it wins)."""
    found: dict[str, dict[str, Any]] = {}
    for message in payload["messages"]:
        for call in message.get("toolCalls", []):
            found[call["id"]] = call
    return found


def refused(response: httpx.Response) -> str:
    assert response.status_code == 409, response.text
    code: str = response.json()["error"]["code"]
    return code


async def test_a_models_gated_call_is_recorded_and_one_approval_runs_it_once() -> None:
    desk = Desk()
    async with serve(desk.app()) as url:
        proposed = final(await say(url, "open r1", turn_id="t1"))
        assert calls(proposed)["call-r1"]["status"] == "requires_confirmation"
        assert proposed["messages"][-1]["content"] == OPENING
        assert desk.desk.runs == []
        (record,) = desk.records()
        assert (record["toolCallId"], record["action"], record["status"]) == (
            "call-r1",
            "open_ticket",
            "pending",
        )
        assert record["input"] == {"ref": "r1"}
        assert record["token"].startswith("confirm-call-")

        approved = final(await decide(url, "call-r1", "approve", turn_id="t2"))
        call = calls(approved)["call-r1"]
        assert (call["status"], call["result"]) == ("complete", "TICKET-r1")
        # The model continued with the tool's result.
        assert approved["messages"][-1]["content"] == "success: TICKET-r1"
        assert approved["status"] == "complete"
        assert desk.desk.runs == ["open_ticket:r1"]
        assert [r["status"] for r in desk.records()] == ["approved"]

        again = await decide(url, "call-r1", "approve", turn_id="t3")
        late_reject = await decide(url, "call-r1", "reject", turn_id="t4")
    assert refused(again) == "CONFIRMATION_UNAVAILABLE"
    assert refused(late_reject) == "CONFIRMATION_UNAVAILABLE"
    assert desk.desk.runs == ["open_ticket:r1"]
    assert [r["status"] for r in desk.records()] == ["approved"]
    assert desk.policy.asked == [("call-r1", "propose"), ("call-r1", "execute")]


async def test_a_rejected_model_call_never_runs_and_the_model_hears_why() -> None:
    desk = Desk()
    async with serve(desk.app()) as url:
        final(await say(url, "open r1", turn_id="t1"))
        rejected = final(await decide(url, "call-r1", "reject", turn_id="t2", reason="not now"))
        approve_after = await decide(url, "call-r1", "approve", turn_id="t3")
    call = calls(rejected)["call-r1"]
    assert (call["status"], call["error"]) == ("error", "Permission denied: not now")
    assert rejected["messages"][-1]["content"] == "denied: Permission denied: not now"
    assert refused(approve_after) == "CONFIRMATION_UNAVAILABLE"
    assert desk.desk.runs == []
    assert [r["status"] for r in desk.records()] == ["rejected"]


async def test_a_decision_from_another_session_is_refused_and_runs_nothing() -> None:
    desk = Desk()
    async with serve(desk.app()) as url:
        final(await say(url, "open r1", turn_id="t1"))
        final(await say(url, "open r2", session_id="s2", turn_id="t1"))
        foreign = [
            await decide(url, "call-r1", decision, session_id=session_id, turn_id=f"x-{n}")
            for n, (session_id, decision) in enumerate(
                [("s2", "approve"), ("s2", "reject"), ("s3", "approve")]
            )
        ]
        assert [refused(response) for response in foreign] == ["CONFIRMATION_UNAVAILABLE"] * 3
        assert desk.desk.runs == []
        assert [r["status"] for r in desk.records("s1")] == ["pending"]
        assert [r["status"] for r in desk.records("s2")] == ["pending"]
        # The owner's decision still works, once.
        owned = final(await decide(url, "call-r1", "approve", turn_id="t2"))
    assert calls(owned)["call-r1"]["status"] == "complete"
    assert desk.desk.runs == ["open_ticket:r1"]
    assert [r["status"] for r in desk.records("s2")] == ["pending"]


async def test_an_approval_the_policy_refuses_at_execution_is_action_forbidden() -> None:
    desk = Desk(deny_execute=True)
    async with serve(desk.app()) as url:
        final(await say(url, "open r1", turn_id="t1"))
        response = await decide(url, "call-r1", "approve", turn_id="t2")
    assert response.status_code == 200
    events = lines(response.content)
    assert events
    assert events[-1]["event"] == "server.turn.diagnostic"
    assert events[-1]["payload"]["code"] == "ACTION_FORBIDDEN"
    snapshots = [event for event in events if event["event"] == "server.turn.snapshot"]
    assert snapshots
    last = snapshots[-1]["payload"]
    denial = "Permission denied: missing-capability"
    assert calls(last)["call-r1"]["error"] == denial
    assert last["messages"][-1]["content"] == f"denied: {denial}"  # the model was told
    assert desk.desk.runs == []
    # The human approved; the policy, asked again at execution, refused.
    assert [r["status"] for r in desk.records()] == ["approved"]
    assert desk.policy.asked == [("call-r1", "propose"), ("call-r1", "execute")]


async def test_an_agents_own_tool_that_needs_approval_runs_once_inside_the_agent() -> None:
    desk = Desk()
    async with serve(desk.app()) as url:
        proposed = final(await say(url, "purge r1", turn_id="t1"))
        assert calls(proposed)["call-r1"]["status"] == "requires_confirmation"
        assert [(r["action"], r["status"]) for r in desk.records()] == [("purge", "pending")]
        approved = final(await decide(url, "call-r1", "approve", turn_id="t2"))
        again = await decide(url, "call-r1", "approve", turn_id="t3")
    assert calls(approved)["call-r1"]["status"] == "complete"
    assert approved["messages"][-1]["content"] == "success: purged r1"
    assert refused(again) == "CONFIRMATION_UNAVAILABLE"
    assert desk.desk.runs == ["purge:r1"]
    assert desk.policy.asked == [("call-r1", "propose"), ("call-r1", "execute")]


async def test_calls_proposed_together_each_get_a_record_and_the_model_waits_for_both() -> None:
    desk = Desk()
    async with serve(desk.app()) as url:
        proposed = final(await say(url, "open r1 r2", turn_id="t1"))
        assert [calls(proposed)[i]["status"] for i in ("call-r1", "call-r2")] == [
            "requires_confirmation"
        ] * 2
        assert [(r["toolCallId"], r["status"]) for r in desk.records()] == [
            ("call-r1", "pending"),
            ("call-r2", "pending"),
        ]
        first = final(await decide(url, "call-r1", "approve", turn_id="t2"))
        # One decision of two: the tool ran, the model has not been asked again yet.
        assert calls(first)["call-r1"]["status"] == "complete"
        assert calls(first)["call-r2"]["status"] == "requires_confirmation"
        assert first["messages"][-1]["content"] == OPENING
        second = final(await decide(url, "call-r2", "reject", turn_id="t3"))
    assert second["messages"][-1]["content"] == (
        "success: TICKET-r1 denied: Permission denied: user denied access"
    )
    assert desk.desk.runs == ["open_ticket:r1"]
    assert [r["status"] for r in desk.records()] == ["approved", "rejected"]


async def test_a_model_call_approved_after_its_expiry_is_denied_and_never_runs() -> None:
    desk = Desk()
    async with serve(desk.app()) as url:
        final(await say(url, "open r1", turn_id="t1"))
        desk.clock.advance(300_000)  # the default time to live of a confirmation
        expired = final(await decide(url, "call-r1", "approve", turn_id="t2"))
    call = calls(expired)["call-r1"]
    assert (call["status"], call["error"]) == ("error", "Permission denied: confirmation expired")
    assert expired["messages"][-1]["content"] == "denied: Permission denied: confirmation expired"
    assert desk.desk.runs == []
    assert [r["status"] for r in desk.records()] == ["expired"]


async def test_a_later_turn_records_only_new_waiting_calls() -> None:
    desk = Desk()
    async with serve(desk.app()) as url:
        final(await say(url, "open r1", turn_id="t1"))
        # The call is still waiting when the user asks for another one: its record is kept
        # as it is, and the new call gets its own.
        final(await say(url, "open r2", turn_id="t2"))
        tokens = [r["token"] for r in desk.records()]
        approved = final(await decide(url, "call-r2", "approve", turn_id="t3"))
    assert [(r["toolCallId"], r["status"]) for r in desk.records()] == [
        ("call-r1", "pending"),
        ("call-r2", "approved"),
    ]
    assert [r["token"] for r in desk.records()] == tokens
    assert calls(approved)["call-r2"]["result"] == "TICKET-r2"
    assert desk.desk.runs == ["open_ticket:r2"]


# --- the records, directly --------------------------------------------------------------------


def tool_message(message_id: str, *calls: tuple[str, str]) -> ChatMessage:
    return ChatMessage(
        id=message_id,
        role="assistant",
        content="",
        created_at=T0,
        tool_calls=tuple(
            ToolCall.model_validate(
                {"id": call_id, "name": "open_ticket", "args": {"ref": call_id}, "status": status}
            )
            for call_id, status in calls
        ),
    )


async def test_each_waiting_call_gets_one_record_and_a_settled_one_none() -> None:
    storage = InMemorySessionStorage()
    session = create_chat_session(
        desk_definition(TicketDesk()), session_id="s1", storage=storage, now=Clock()
    )
    messages = (
        tool_message("a1", ("c1", "requires_confirmation"), ("c2", "complete")),
        # c3 waited once, but the newest message carrying it says it ran.
        tool_message("a2", ("c3", "requires_confirmation")),
        tool_message("a3", ("c3", "complete"), ("c4", "requires_confirmation")),
    )
    assert [call.id for call in waiting_calls(messages)] == ["c1", "c4"]
    assert await record_waiting_calls(session, messages) == 2
    assert await record_waiting_calls(session, messages) == 0  # never twice
    records = session.confirmations
    assert [(r.tool_call_id, r.status) for r in records] == [
        ("c1", "pending"),
        ("c4", "pending"),
    ]
    assert records[0].expires_at == epoch_ms(Clock()()) + DEFAULT_CONFIRMATION_TTL_MS
    resumed = await resume_chat_session(
        desk_definition(TicketDesk()), session_id="s1", storage=storage, now=Clock()
    )
    assert resumed.confirmations == records  # saved with the session


async def test_a_call_whose_id_cannot_name_a_record_is_left_without_one() -> None:
    session = create_chat_session(
        desk_definition(TicketDesk()),
        session_id="s1",
        storage=InMemorySessionStorage(),
        now=Clock(),
    )
    # A decision could not name it either (``toolCallId`` must be a safe identifier).
    messages = (
        tool_message("a1", ("call 1", "requires_confirmation"), ("c2", "requires_confirmation")),
    )
    assert await record_waiting_calls(session, messages) == 1
    assert [r.tool_call_id for r in session.confirmations] == ["c2"]
