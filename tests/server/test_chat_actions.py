"""Typed actions over the chat handler: a choice proposes, a human decides, the service runs once.

A click on a choice that carries an action proposes it as a confirmation-gated tool call
(never runs it); a submission with ``payload.confirmation`` approves or rejects it. The action
is always read from the frame this session's assistant showed, never from the click, and the
chat's authorizer decides whether it may be proposed and run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.server._chat_support import (
    JSON,
    SUPPORT_OFFER_FRAME,
    TicketService,
    lines,
    submit,
    ticket_harness,
)
from tests.service._support import serve

pytestmark = pytest.mark.anyio

AT = datetime(2026, 7, 11, tzinfo=UTC)
TICKET_INPUT: dict[str, Any] = {"topic": "billing"}
FRAME: dict[str, Any] = SUPPORT_OFFER_FRAME


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def select(choice_id: str, instance_id: str = "support-offer") -> dict[str, Any]:
    return {
        "selection": {
            "protocol": "agentskit.chat.component",
            "version": 1,
            "type": "select",
            "componentKey": "choice-list",
            "instanceId": instance_id,
            "choiceId": choice_id,
        }
    }


def decide(tool_call_id: str, decision: str, **extra: Any) -> dict[str, Any]:
    return {"confirmation": {"toolCallId": tool_call_id, "decision": decision, **extra}}


async def post(url: str, body: bytes) -> httpx.Response:
    async with httpx.AsyncClient(timeout=20) as client:
        return await client.post(url, content=body, headers=JSON)


def calls_of(response: httpx.Response) -> list[dict[str, Any]]:
    events = lines(response.content)
    assert events, "the turn streamed nothing"
    last = events[-1]
    assert last["event"] == "server.turn.snapshot", last
    return [
        call for message in last["payload"]["messages"] for call in message.get("toolCalls", [])
    ]


async def test_an_actionable_choice_proposes_and_only_approval_runs_the_service_once() -> None:
    service = TicketService()
    harness = ticket_harness(service)
    async with serve(harness.app()) as url:
        proposed = await post(
            url, submit(turn_id="t1", text="Open support ticket", payload=select("ticket"))
        )
        assert proposed.status_code == 200
        (call,) = calls_of(proposed)
        assert call["status"] == "requires_confirmation"
        assert call["name"] == "create-support-ticket"
        assert call["args"] == TICKET_INPUT
        assert service.created == []  # proposing never runs it
        (record,) = harness.stored()["confirmations"]
        assert record["toolCallId"] == call["id"]
        assert record["status"] == "pending"

        again = await post(
            url, submit(turn_id="t2", text="Open support ticket", payload=select("ticket"))
        )
        assert again.status_code == 409
        assert again.json()["error"]["code"] == "CHOICE_UNAVAILABLE"

        approved = await post(
            url, submit(turn_id="t3", text="Approve", payload=decide(call["id"], "approve"))
        )
        assert approved.status_code == 200
        (done,) = calls_of(approved)
        assert done["status"] == "complete"
        assert done["result"] == "SUP-1"
        assert service.created == [TICKET_INPUT]
        assert harness.stored()["confirmations"][0]["status"] == "approved"

        replay = await post(
            url, submit(turn_id="t4", text="Approve", payload=decide(call["id"], "approve"))
        )
        assert replay.status_code == 409
        assert replay.json()["error"]["code"] == "CONFIRMATION_UNAVAILABLE"
    assert service.created == [TICKET_INPUT]


async def test_a_rejected_action_never_runs() -> None:
    service = TicketService()
    harness = ticket_harness(service)
    async with serve(harness.app()) as url:
        proposed = await post(url, submit(turn_id="t1", text="Open", payload=select("ticket")))
        (call,) = calls_of(proposed)
        rejected = await post(
            url,
            submit(turn_id="t2", text="No", payload=decide(call["id"], "reject", reason="not now")),
        )
        assert rejected.status_code == 200
        (done,) = calls_of(rejected)
        assert done["status"] == "error"
        assert done["error"] == "Permission denied: not now"
        approve_after = await post(
            url, submit(turn_id="t3", text="Yes", payload=decide(call["id"], "approve"))
        )
        assert approve_after.status_code == 409
    assert service.created == []
    assert harness.stored()["confirmations"][0]["status"] == "rejected"


async def test_a_denied_proposal_is_a_diagnostic_and_records_nothing() -> None:
    service = TicketService()
    harness = ticket_harness(service, allow=False)
    async with serve(harness.app()) as url:
        refused = await post(url, submit(turn_id="t1", text="Open", payload=select("ticket")))
    assert refused.status_code == 200
    (event,) = lines(refused.content)
    assert event["event"] == "server.turn.diagnostic"
    assert event["payload"]["code"] == "ACTION_FORBIDDEN"
    assert "missing-capability" not in refused.text  # the authorizer's reason stays private
    assert harness.stored()["confirmations"] == []
    assert service.created == []


async def test_a_choice_without_an_action_or_a_frame_never_shown_proposes_nothing() -> None:
    service = TicketService()
    harness = ticket_harness(service)
    async with serve(harness.app()) as url:
        plain = await post(url, submit(turn_id="t1", text="Keep chatting", payload=select("chat")))
        forged = await post(
            url, submit(turn_id="t2", text="hi", payload=select("ticket", instance_id="forged"))
        )
    for response in (plain, forged):
        assert response.status_code == 200
        assert calls_of(response) == []
    assert harness.stored()["confirmations"] == []
    assert harness.adapter.inputs == ["Keep chatting", "hi"]  # answered as ordinary turns


@pytest.mark.parametrize(
    "confirmation",
    [
        {"toolCallId": "app-x", "decision": "maybe"},
        {"toolCallId": "not a safe id", "decision": "approve"},
        {"decision": "approve"},
        {"toolCallId": "app-x", "decision": "reject", "reason": ""},
        "approve",
    ],
)
async def test_an_invalid_confirmation_payload_is_a_bad_request(confirmation: object) -> None:
    harness = ticket_harness(TicketService())
    async with serve(harness.app()) as url:
        response = await post(url, submit(payload={"confirmation": confirmation}))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "REQUEST_INVALID_EVENT"
    assert json.dumps(confirmation) not in response.text


async def test_a_decision_on_an_unknown_call_is_unavailable() -> None:
    harness = ticket_harness(TicketService())
    async with serve(harness.app()) as url:
        response = await post(url, submit(payload=decide("app-unknown", "approve")))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "CONFIRMATION_UNAVAILABLE"
