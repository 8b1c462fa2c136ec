"""A help desk whose model proposes confirmation-gated calls, for the model-approval tests.

The model is a pydantic-ai ``FunctionModel`` that reads only the messages it is sent, so every
request (on any worker) gets the same answer to the same history: a question ``open r1 r2``
makes it call the chat tool ``open_ticket`` once per reference (call ids ``call-r1``,
``call-r2``) in one step, ``purge r1`` makes it call the agent's own ``purge`` tool (which needs
approval); once it is sent the calls' outcomes it answers ``<outcome>: <content>`` for each.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from agentskit_chat.agents import from_pydantic_ai
from agentskit_chat.conversation import ChatDefinition, define_chat
from agentskit_chat.protocol import ToolCall
from agentskit_chat.runtime import (
    ChatConfig,
    ChatTool,
    ToolAuthorization,
    ToolAuthorizationContext,
)

TICKET_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"ref": {"type": "string", "minLength": 1}},
    "required": ["ref"],
    "additionalProperties": False,
}
OPENING: Final = "Opening. "


async def _stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    last = messages[-1]
    returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
    if returns:
        yield " ".join(f"{part.outcome}: {part.content}" for part in returns)
        return
    prompt = next(part.content for part in last.parts if isinstance(part, UserPromptPart))
    assert isinstance(prompt, str)
    verb, *refs = prompt.split()
    tool = "open_ticket" if verb == "open" else "purge"
    yield OPENING
    yield {
        index: DeltaToolCall(name=tool, json_args=f'{{"ref": "{ref}"}}', tool_call_id=f"call-{ref}")
        for index, ref in enumerate(refs)
    }


def desk_model() -> FunctionModel:
    """The scripted model (streams only)."""

    def unused(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("the adapter streams")

    return FunctionModel(unused, stream_function=_stream)


@dataclass
class TicketDesk:
    """The executors: ``open_ticket`` (a chat tool) and ``purge`` (the agent's own tool).

    Every run is recorded in ``runs`` as ``<tool>:<ref>``; with ``log`` each is also appended
    to that file as ``<ref> <worker>`` (one ``O_APPEND`` write, so lines of several processes
    never interleave).
    """

    log: str | None = None
    worker: str = "w1"
    runs: list[str] = field(default_factory=list)

    def _ran(self, tool: str, ref: str) -> None:
        self.runs.append(f"{tool}:{ref}")
        if self.log is not None:
            descriptor = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(descriptor, f"{ref} {self.worker}\n".encode())
            finally:
                os.close(descriptor)

    async def open_ticket(self, args: Mapping[str, Any]) -> str:
        ref = str(args["ref"])
        self._ran("open_ticket", ref)
        await anyio.sleep(0)
        return f"TICKET-{ref}"

    def purge(self, ref: str) -> str:
        self._ran("purge", ref)
        return f"purged {ref}"


@dataclass
class Policy:
    """The chat's authorizer: refuses phase ``execute`` with ``missing-capability`` while
    ``deny_execute`` is set; records every question."""

    deny_execute: bool = False
    asked: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, call: ToolCall, context: ToolAuthorizationContext) -> ToolAuthorization:
        self.asked.append((call.id, context.phase))
        if self.deny_execute and context.phase == "execute":
            return ToolAuthorization(False, "missing-capability")
        return ToolAuthorization(True)


def desk_definition(desk: TicketDesk, policy: Policy | None = None) -> ChatDefinition:
    """The help desk chat: the scripted agent, ``open_ticket`` behind a confirmation."""
    agent: Agent[None, str] = Agent(desk_model())
    agent.tool_plain(requires_approval=True)(desk.purge)
    tool = ChatTool(
        name="open_ticket",
        description="Open a support ticket.",
        parameters=TICKET_SCHEMA,
        execute=desk.open_ticket,
        requires_confirmation=True,
    )
    config = ChatConfig(
        adapter=from_pydantic_ai(agent), tools=(tool,), authorize_tool_call=policy or Policy()
    )
    return define_chat(id="desk", chat=config)
