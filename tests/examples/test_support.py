"""The support example over a real socket: a ticket only after approval, once, on any worker."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from agentskit_chat.conversation import RouteContext
from agentskit_chat.protocol._types import is_safe_id
from agentskit_chat.server import create_app
from examples.support import app as support
from tests.assistant._support import serve
from tests.examples._support import Client, waiting

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_question_without_a_request_for_a_human_is_just_answered() -> None:
    service = support.InMemoryTicketService()
    async with serve(create_app(support.build_support_chat(tickets=service))) as url:
        turn = await Client(url).send("Where is my parcel?")
    assert turn.status == 200
    assert "scripted assistant" in turn.answer
    assert turn.calls() == []
    assert service.tickets == []


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_asking_for_a_human_proposes_a_ticket_that_runs_only_when_approved(
    decision: str,
) -> None:
    service = support.InMemoryTicketService()
    async with serve(create_app(support.build_support_chat(tickets=service))) as url:
        client = Client(url)
        asked = await client.send("I need to talk to a person about my invoice, it is urgent")
        call = waiting(asked)
        assert call["name"] == support.TICKET_TOOL
        assert call["args"]["priority"] == "urgent"
        assert service.tickets == []  # the model can only propose
        decided = await client.decide(call["id"], decision)
    assert decided.status == 200
    if decision == "approve":
        assert [ticket.id for ticket in service.tickets] == ["SUP-1"]
        assert service.tickets[0].customer_id == "customer-demo"
        assert "Ticket SUP-1 created for follow-up." in decided.answer
    else:
        assert service.tickets == []
        assert "No ticket was created" in decided.answer


async def test_a_ticket_approved_on_two_workers_is_created_once(tmp_path: Path) -> None:
    service = support.InMemoryTicketService()
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    first = create_app(support.build_support_chat(tickets=service), store=store)
    second = create_app(support.build_support_chat(tickets=service), store=store)
    async with serve(first) as one, serve(second) as two:
        client = Client(one)
        offered = await client.send("support")
        frame = offered.frame()
        assert frame["componentKey"] == "choice-list"
        assert frame["props"]["choices"][0]["action"]["name"] == support.TICKET_TOOL
        call = waiting(await client.select(frame, "create"))
        assert service.tickets == []
        approved = await client.decide(call["id"], "approve")
        assert approved.status == 200
        assert [ticket.id for ticket in service.tickets] == ["SUP-1"]
        # The follow-up is the model's, with the ticket in view (the list is not shown again).
        assert approved.answer.startswith("Ticket SUP-1 created for follow-up.")
        client.url = two  # the same conversation, on another worker
        again = await client.decide(call["id"], "approve")
    # The other worker finds the decided record: nothing runs again.
    assert again.diagnostics == ["CONFIRMATION_UNAVAILABLE"]
    assert len(service.tickets) == 1


async def test_without_the_capability_nothing_is_proposed_or_created() -> None:
    service = support.InMemoryTicketService()
    caller = support.HostContext("support-demo", "customer-demo", ())
    definition = support.build_support_chat(context=caller, tickets=service)
    async with serve(create_app(definition)) as url:
        client = Client(url)
        frame = (await client.send("support")).frame()
        clicked = await client.select(frame, "create")
        asked = await client.send("Please get me a human")
    assert clicked.diagnostics == ["ACTION_FORBIDDEN"]
    (refused,) = asked.calls()
    assert refused["status"] == "error"
    assert refused["error"].startswith("Permission denied")
    assert service.tickets == []


def _malformed(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    raise AssertionError("the chat streams")


async def _propose_malformed(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    if len(messages) > 1:
        yield "ok"
        return
    arguments = json.dumps({"subject": "", "priority": "critical"})
    yield {0: DeltaToolCall(name=support.TICKET_TOOL, json_args=arguments)}


async def test_malformed_arguments_are_refused_when_proposed() -> None:
    service = support.InMemoryTicketService()
    model = FunctionModel(_malformed, stream_function=_propose_malformed)
    definition = support.build_support_chat(tickets=service, model=model)
    async with serve(create_app(definition)) as url:
        asked = await Client(url).send("a ticket please")
    (call,) = asked.calls()
    assert call["status"] == "error"
    assert call["error"] == "Tool call arguments do not match the tool's schema."
    assert service.tickets == []


def test_example_component_ids_are_sanitized() -> None:
    # An identity with characters a safe identifier refuses still gives a usable instance id.
    odd = "message id/with spaces#and?more" + "x" * 200
    made = support.safe_id("support-ticket-choice", odd)
    assert is_safe_id(made)
    assert made.startswith("support-ticket-choice-message-id-with-spaces-and-more")
    frame_text = support._support_offer("/support", RouteContext("s", odd))
    assert made in frame_text
