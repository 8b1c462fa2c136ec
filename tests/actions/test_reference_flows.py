"""The two reference flows of the product documents, with injected fake services.

A support ticket: a route offers a choice list whose "Open support ticket" choice carries an
action; the host proposes it through a confirmation, and only approval calls the service.
Protected operations: reading and restarting need independent capabilities from the host's
trusted context, and a restart needs a human's confirmation as well.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from agentskit_chat.actions import (
    PolicyContext,
    create_action_confirmation,
    create_capability_policy,
)
from agentskit_chat.components import ChoiceListProps
from agentskit_chat.conversation import (
    ConversationDefinition,
    ConversationStateDefinition,
    command_route,
    create_chat_session,
    define_chat,
    with_action_policy,
)
from agentskit_chat.errors import ToolError
from agentskit_chat.runtime import ChatConfig, ChatController, ChatTool
from tests.actions._support import ReplyAdapter

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- support ticket ------------------------------------------------------------------------------


class TicketService:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    async def create(self, args: Mapping[str, Any]) -> str:
        self.created.append(dict(args))
        return f"SUP-{len(self.created)}"


TICKET_SCHEMA = {
    "type": "object",
    "properties": {"topic": {"type": "string", "minLength": 1}},
    "required": ["topic"],
    "additionalProperties": False,
}


def support_offer(text: str, context: Any) -> str:
    return json.dumps(
        {
            "protocol": "agentskit.chat.component",
            "version": 1,
            "type": "render",
            "componentKey": "choice-list",
            "instanceId": f"support-{context.message_id}",
            "props": {
                "prompt": "Would you like a human support specialist to follow up?",
                "choices": [
                    {
                        "id": "ticket",
                        "label": "Open support ticket",
                        "action": {"name": "create-support-ticket", "input": {"topic": "help"}},
                    },
                    {"id": "chat", "label": "Keep chatting"},
                ],
            },
            "fallback": {"kind": "choice-list", "summary": "Open a ticket or keep chatting."},
        }
    )


def support_definition(service: TicketService, context: PolicyContext | None) -> Any:
    tool = ChatTool(
        name="create-support-ticket",
        parameters=TICKET_SCHEMA,
        execute=service.create,
        requires_confirmation=True,
    )
    definition = define_chat(
        id="support",
        chat=ChatConfig(adapter=ReplyAdapter(), tools=(tool,)),
        conversation=ConversationDefinition(
            initial="idle",
            states={"idle": ConversationStateDefinition(on={"support": "idle"})},
            routes=(
                command_route(
                    command="/support", id="support", event="support", response=support_offer
                ),
            ),
        ),
    )
    policy = create_capability_policy(
        session_id="support-1",
        get_context=lambda: context,
        requirements={"create-support-ticket": ["support.write"]},
    )
    return with_action_policy(definition, policy)


async def offered_action(controller: ChatController) -> tuple[str, Mapping[str, Any]]:
    await controller.send("/support")
    frame = json.loads(controller.state.messages[-1].content)
    props = ChoiceListProps.model_validate(frame["props"])
    (choice,) = [c for c in props.choices if c.id == "ticket"]
    assert choice.action is not None
    return choice.action.name, choice.action.input


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_support_ticket_runs_the_service_once_and_only_after_approval(decision: str) -> None:
    service = TicketService()
    definition = support_definition(service, PolicyContext("support-1", ("support.write",)))
    session = create_chat_session(definition, session_id="support-1")
    controller = ChatController(session.chat)
    name, action_input = await offered_action(controller)
    confirmation = session.create_confirmation(chat=controller, create_id=lambda: "ticket-1")
    record = await confirmation.propose(name=name, input=action_input)
    assert record.status == "pending"
    assert service.created == []  # the model and the frame can only propose
    if decision == "approve":
        done = await confirmation.approve(record.token, "support-1")
        assert done.status == "approved"
        assert service.created == [{"topic": "help"}]
        (call,) = [c for m in controller.state.messages for c in (m.tool_calls or ())]
        assert (call.status, call.result) == ("complete", "SUP-1")
    else:
        done = await confirmation.reject(record.token, "support-1")
        assert done.status == "rejected"
        assert service.created == []
    again = await confirmation.approve(record.token, "support-1")
    assert again.status == done.status
    assert len(service.created) == (1 if decision == "approve" else 0)


async def test_support_ticket_without_the_capability_is_never_proposed() -> None:
    service = TicketService()
    definition = support_definition(service, PolicyContext("support-1", ()))
    session = create_chat_session(definition, session_id="support-1")
    controller = ChatController(session.chat)
    name, action_input = await offered_action(controller)
    confirmation = session.create_confirmation(chat=controller)
    with pytest.raises(ToolError) as refused:
        await confirmation.propose(name=name, input=action_input)
    assert refused.value.code == "AK_TOOL_FORBIDDEN"
    assert confirmation.get_snapshot() == ()
    assert service.created == []


# --- protected operations ------------------------------------------------------------------------


class OperationsService:
    def __init__(self) -> None:
        self.reads: list[str] = []
        self.restarts: list[str] = []

    async def read(self, args: Mapping[str, Any]) -> dict[str, Any]:
        self.reads.append(args["operationId"])
        return {"operationId": args["operationId"], "status": "healthy", "revision": 1}

    async def restart(self, args: Mapping[str, Any]) -> dict[str, Any]:
        self.restarts.append(args["operationId"])
        return {"operationId": args["operationId"], "status": "healthy", "revision": 2}


OPERATION_SCHEMA = {
    "type": "object",
    "properties": {"operationId": {"type": "string", "enum": ["checkout-api"]}},
    "required": ["operationId"],
    "additionalProperties": False,
}


class Operator:
    """The host's trusted context for one operator, changeable (revocation)."""

    def __init__(self, *capabilities: str) -> None:
        self.context: PolicyContext | None = PolicyContext("ops-1", capabilities)

    def __call__(self) -> PolicyContext | None:
        return self.context


def operations(operator: Operator, service: OperationsService) -> tuple[ChatController, Any]:
    tools = (
        ChatTool(
            name="read-operation",
            parameters=OPERATION_SCHEMA,
            execute=service.read,
            requires_confirmation=True,
        ),
        ChatTool(
            name="restart-operation",
            parameters=OPERATION_SCHEMA,
            execute=service.restart,
            requires_confirmation=True,
        ),
    )
    policy = create_capability_policy(
        session_id="ops-1",
        get_context=operator,
        requirements={
            "read-operation": ["operations.read"],
            "restart-operation": ["operations.restart"],
        },
    )
    definition = with_action_policy(
        define_chat(id="operations", chat=ChatConfig(adapter=ReplyAdapter(), tools=tools)), policy
    )
    controller = ChatController(definition.chat)
    ids = iter(f"op-{n}" for n in range(1, 100))
    confirmation = create_action_confirmation(
        session_id="ops-1", chat=controller, now=lambda: 0, create_id=lambda: next(ids)
    )
    return controller, (confirmation, policy)


CHECKOUT = {"operationId": "checkout-api"}


async def test_read_and_restart_capabilities_are_independent() -> None:
    service = OperationsService()
    _, (reader, _) = operations(Operator("operations.read"), service)
    read = await reader.propose(name="read-operation", input=CHECKOUT)
    assert (await reader.approve(read.token, "ops-1")).status == "approved"
    with pytest.raises(ToolError):
        await reader.propose(name="restart-operation", input=CHECKOUT)

    _, (restarter, _) = operations(Operator("operations.restart"), service)
    with pytest.raises(ToolError):
        await restarter.propose(name="read-operation", input=CHECKOUT)
    restart = await restarter.propose(name="restart-operation", input=CHECKOUT)
    assert service.restarts == []  # a capability alone is not enough: a human must confirm
    assert (await restarter.approve(restart.token, "ops-1")).status == "approved"
    assert service.reads == ["checkout-api"]
    assert service.restarts == ["checkout-api"]


async def test_a_restart_revoked_before_approval_never_runs() -> None:
    service = OperationsService()
    operator = Operator("operations.read", "operations.restart")
    controller, (confirmation, policy) = operations(operator, service)
    record = await confirmation.propose(name="restart-operation", input=CHECKOUT)
    operator.context = PolicyContext("ops-1", ("operations.read",))
    await confirmation.approve(record.token, "ops-1")
    assert service.restarts == []
    (call,) = [c for m in controller.state.messages for c in (m.tool_calls or ())]
    assert call.status == "error"
    assert call.error == "Permission denied: missing-capability"
    assert [(t.phase, t.reason) for t in policy.traces] == [
        ("propose", "allowed"),
        ("execute", "missing-capability"),
    ]


async def test_malformed_or_extra_arguments_never_reach_the_service() -> None:
    service = OperationsService()
    _, (confirmation, _) = operations(Operator("operations.restart"), service)
    for bad in ({"operationId": "payments-api"}, {**CHECKOUT, "force": True}, {}):
        with pytest.raises(ToolError) as refused:
            await confirmation.propose(name="restart-operation", input=bad)
        assert refused.value.code == "AK_TOOL_INVALID_INPUT"
    assert service.restarts == []
