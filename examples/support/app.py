"""Support desk: the assistant opens a support ticket for a human, but only once you approve it.

Ask for a human ("I need to talk to a person about my invoice") and the model proposes the
``create-support-ticket`` tool; type ``support`` (or ``/support``) and the chat offers the
same action in a choice list. Either
way nothing runs until you approve, the ticket service is called exactly once per approval
(on any worker), a rejection never calls it, and a capability policy fed by the host's
trusted context decides, at proposal and again at execution, whether this caller may create
tickets at all.

Run it (no API key needed: a scripted pydantic-ai model answers by default)::

    python examples/support/app.py                          # the page at http://127.0.0.1:8000
    agentskit-chat serve examples/support/app.py:chat       # the same, through the CLI
    agentskit-chat chat examples/support/app.py:chat        # in the terminal
    python examples/support/app.py --model openai:gpt-4o-mini   # a real model (or AGENTSKIT_MODEL)
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from agentskit_chat import serve
from agentskit_chat.actions import PolicyContext, create_capability_policy
from agentskit_chat.agents import from_pydantic_ai, resolve_model
from agentskit_chat.conversation import (
    ChatDefinition,
    ChatPage,
    ConversationDefinition,
    ConversationStateDefinition,
    Route,
    RouteContext,
    define_chat,
    with_action_policy,
)
from agentskit_chat.protocol import create_assistant_content_encoder
from agentskit_chat.runtime import ChatConfig, ChatTool

__all__ = [
    "DEMO_CONTEXT",
    "TICKET_SCHEMA",
    "TICKET_TOOL",
    "HostContext",
    "InMemoryTicketService",
    "Ticket",
    "TicketService",
    "build_support_chat",
    "chat",
    "main",
    "safe_id",
    "scripted_model",
]

#: The one tool of this chat.
TICKET_TOOL: Final = "create-support-ticket"
#: The capability a caller needs to create tickets.
TICKET_CAPABILITY: Final = "support.ticket.create"
#: The tool's arguments: checked when the call is proposed, and again before it runs.
TICKET_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "subject": {"type": "string", "minLength": 1, "maxLength": 160},
        "priority": {"type": "string", "enum": ["normal", "urgent"]},
    },
    "required": ["subject", "priority"],
    "additionalProperties": False,
}
_SYSTEM_PROMPT: Final = (
    "You are the support assistant of an online shop. When the user asks for a human, a "
    f"person, a specialist or a ticket, call the {TICKET_TOOL} tool once with a short subject "
    "(at most 160 characters) and priority 'normal', or 'urgent' when the user says it is "
    "urgent. The user must approve the call: never say a ticket exists until the tool "
    "returned its id. Otherwise answer briefly."
)
_ASKS_FOR_A_HUMAN: Final = re.compile(
    r"\b(human|person|people|someone|specialist|agent|ticket)s?\b", re.IGNORECASE
)
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._:-]+")


def safe_id(prefix: str, identity: str) -> str:
    """``<prefix>-<identity>`` as a safe identifier (component instance ids are stored and
    compared, so any character outside ``A-Za-z0-9._:-`` becomes ``-``; at most 128)."""
    return _UNSAFE.sub("-", f"{prefix}-{identity}")[:128]


# --- the host's trusted context and the ticket service ---------------------------------------


@dataclass(frozen=True, slots=True)
class HostContext:
    """Who the chat serves, as the host authenticated them: never read from a prompt, a
    component or a tool argument.

    Attributes:
        session_id: The authenticated session.
        customer_id: The customer tickets are created for.
        capabilities: What this caller may do (``support.ticket.create``).
    """

    session_id: str
    customer_id: str
    capabilities: tuple[str, ...] = ()


#: The demo's host context: every caller of the demo server is this customer.
DEMO_CONTEXT: Final = HostContext("support-demo", "customer-demo", (TICKET_CAPABILITY,))


@dataclass(frozen=True, slots=True)
class Ticket:
    """A created ticket."""

    id: str
    customer_id: str
    subject: str
    priority: Literal["normal", "urgent"]


class TicketService(Protocol):
    """Where tickets are created (your help desk's API)."""

    async def create_ticket(
        self, subject: str, priority: Literal["normal", "urgent"], context: HostContext
    ) -> Ticket:
        """Create one ticket for ``context``'s customer."""
        ...


@dataclass
class InMemoryTicketService:
    """Tickets in a list, numbered ``SUP-1``, ``SUP-2``, ...: the demo's help desk."""

    tickets: list[Ticket] = field(default_factory=list)

    async def create_ticket(
        self, subject: str, priority: Literal["normal", "urgent"], context: HostContext
    ) -> Ticket:
        """Append a ticket for ``context``'s customer and return it."""
        ticket = Ticket(f"SUP-{len(self.tickets) + 1}", context.customer_id, subject, priority)
        self.tickets.append(ticket)
        return ticket


# --- the scripted model ------------------------------------------------------------------------


def _last_prompt(message: ModelMessage) -> str:
    for part in message.parts:
        if isinstance(part, UserPromptPart) and isinstance(part.content, str):
            return part.content
    return ""


async def _script(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    last = messages[-1]
    returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
    if any(part.outcome == "success" for part in returns):
        yield " ".join(str(part.content) for part in returns if part.outcome == "success")
        yield " A support specialist will follow up by email."
        return
    if returns or any(isinstance(part, RetryPromptPart) for part in last.parts):
        yield "No ticket was created. Ask again whenever you want a human to follow up."
        return
    prompt = " ".join(_last_prompt(last).split())
    if not _ASKS_FOR_A_HUMAN.search(prompt):
        yield (
            "I'm the support desk's scripted assistant. Ask for a human (or type support) "
            "and I will offer to open a support ticket."
        )
        return
    priority = "urgent" if re.search(r"\burgent\b", prompt, re.IGNORECASE) else "normal"
    arguments = {"subject": prompt[:160], "priority": priority}
    yield "I can ask a support specialist to follow up. Please approve the ticket first."
    yield {0: DeltaToolCall(name=TICKET_TOOL, json_args=json.dumps(arguments))}


def scripted_model() -> FunctionModel:
    """The model used without a real one: it proposes a ticket when you ask for a human, and
    reads back the tool's result once you decided."""

    def unused(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("the chat streams")

    return FunctionModel(unused, stream_function=_script)


# --- the chat definition -----------------------------------------------------------------------


def _support_offer(text: str, context: RouteContext) -> str:
    """The ``/support`` reply: a choice list whose first choice carries the ticket action (as
    ordered assistant content, so a click on it can be checked against the stored message)."""
    identity = context.message_id or context.session_id
    frame = {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": "choice-list",
        "instanceId": safe_id("support-ticket-choice", identity),
        "props": {
            "prompt": "Would you like a human support specialist to follow up?",
            "choices": [
                {
                    "id": "create",
                    "label": "Open support ticket",
                    "description": "Requires confirmation before creation.",
                    "action": {
                        "name": TICKET_TOOL,
                        "input": {"subject": "Chat follow-up requested", "priority": "normal"},
                    },
                },
                {"id": "continue", "label": "Keep chatting"},
            ],
        },
        "fallback": {"kind": "choice-list", "summary": "Open a support ticket or keep chatting."},
    }
    return create_assistant_content_encoder().encode({"kind": "component", "frame": frame})


def build_support_chat(
    *,
    context: HostContext = DEMO_CONTEXT,
    tickets: TicketService | None = None,
    model: Model | str | None = None,
) -> ChatDefinition:
    """The support chat for one authenticated caller.

    Build it once per authenticated session in a host with real identities (for example in
    ``create_chat_app(resolve_definition=...)``), from the context your authentication gives:
    the policy and the ticket service then act for that caller only.

    Args:
        context: The caller, from the host's authentication.
        tickets: The ticket service; a new in-memory one by default.
        model: A pydantic-ai model or model string; the scripted model by default.
    """
    service = tickets if tickets is not None else InMemoryTicketService()

    async def create_ticket(args: Mapping[str, Any]) -> str:
        ticket = await service.create_ticket(args["subject"], args["priority"], context)
        return f"Ticket {ticket.id} created for follow-up."

    tool = ChatTool(
        name=TICKET_TOOL,
        description="Create a support ticket after user confirmation.",
        parameters=TICKET_SCHEMA,
        execute=create_ticket,
        requires_confirmation=True,
    )
    agent: Agent[None, str] = Agent(resolve_model(model) if model is not None else scripted_model())
    definition = define_chat(
        id="support-reference",
        chat=ChatConfig(
            adapter=from_pydantic_ai(agent), tools=(tool,), system_prompt=_SYSTEM_PROMPT
        ),
        conversation=ConversationDefinition(
            initial="ready",
            states={"ready": ConversationStateDefinition(on={"support": "ready"})},
            routes=(
                Route(
                    id="support-ticket",
                    event="support",
                    match=lambda text: text.strip().lower() in {"support", "/support"},
                    response=_support_offer,
                ),
            ),
        ),
        page=ChatPage(
            title="Support desk",
            subtitle="Ask for a human: a ticket is opened only after you approve it.",
            suggestions=("I need to talk to a person about my invoice", "support"),
            placeholder="Ask a question, or ask for a human",
            logo="SD",
        ),
    )
    policy = create_capability_policy(
        session_id=context.session_id,
        get_context=lambda: PolicyContext(context.session_id, context.capabilities),
        requirements={TICKET_TOOL: [TICKET_CAPABILITY]},
    )
    return with_action_policy(definition, policy)


def chat() -> ChatDefinition:
    """The demo chat: the demo customer, an in-memory help desk, and the model named by
    ``AGENTSKIT_MODEL`` (the scripted one when it is not set)."""
    return build_support_chat(model=os.environ.get("AGENTSKIT_MODEL") or None)


def main(argv: Sequence[str] | None = None) -> None:
    """``python examples/support/app.py [--model MODEL] [--port N] [--store URL]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A pydantic-ai model, e.g. openai:gpt-4o-mini.")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--store", default="memory:", help="memory:, sqlite:///support.db, ...")
    options = parser.parse_args(argv)
    model = options.model or os.environ.get("AGENTSKIT_MODEL") or None
    serve(lambda: build_support_chat(model=model), port=options.port, store=options.store)


if __name__ == "__main__":
    main()
