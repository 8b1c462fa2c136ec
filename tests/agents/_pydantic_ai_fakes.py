"""Shared fakes for the pydantic-ai adapter tests: a scripted ``FunctionModel`` and helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingPart,
    DeltaToolCall,
    DeltaToolCalls,
    FunctionModel,
)

from agentskit_chat.protocol import ToolCall
from agentskit_chat.runtime import (
    AdapterContext,
    AdapterRequest,
    ChatMessage,
    ChatSource,
    StreamChunk,
)

T0 = datetime(2026, 7, 13, 9, 0, tzinfo=UTC)
StreamItem = str | DeltaToolCalls | dict[int, DeltaThinkingPart]


def user(text: str, message_id: str = "u1") -> ChatMessage:
    return ChatMessage(id=message_id, role="user", content=text, created_at=T0)


def assistant(
    text: str = "", message_id: str = "a1", calls: Sequence[ToolCall] | None = None
) -> ChatMessage:
    return ChatMessage(
        id=message_id,
        role="assistant",
        content=text,
        created_at=T0,
        tool_calls=tuple(calls) if calls is not None else None,
    )


def placeholder(message_id: str = "p1") -> ChatMessage:
    return ChatMessage(
        id=message_id, role="assistant", content="", created_at=T0, status="streaming"
    )


def call(
    call_id: str,
    name: str,
    status: str,
    args: dict[str, Any] | None = None,
    **extra: str,
) -> ToolCall:
    return ToolCall.model_validate(
        {"id": call_id, "name": name, "args": args or {}, "status": status, **extra}
    )


def request(*messages: ChatMessage, system_prompt: str | None = None) -> AdapterRequest:
    return AdapterRequest(
        messages=tuple(messages), context=AdapterContext(system_prompt=system_prompt)
    )


def summary(messages: Sequence[ModelMessage]) -> list[tuple[str, ...]]:
    """What the model was sent, one tuple per message: its kind, then its parts."""
    out: list[tuple[str, ...]] = []
    for message in messages:
        parts: list[str] = []
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                parts.append(f"user:{part.content}")
            elif isinstance(part, SystemPromptPart):
                parts.append(f"system:{part.content}")
            elif isinstance(part, TextPart):
                parts.append(f"text:{part.content}")
            elif isinstance(part, ToolCallPart):
                parts.append(f"call:{part.tool_call_id}:{part.tool_name}:{part.args_as_json_str()}")
            elif isinstance(part, ToolReturnPart):
                parts.append(f"return:{part.tool_call_id}:{part.outcome}:{part.content}")
            else:
                parts.append(type(part).__name__)
        out.append(("request" if isinstance(message, ModelRequest) else "response", *parts))
    return out


@dataclass
class Script:
    """A FunctionModel: each model request streams the next list of items.

    ``hold`` makes the last request wait forever after its items, ``closed`` counts the model
    streams whose ``finally`` ran, ``seen`` holds the messages of each request.
    """

    steps: list[list[StreamItem]]
    hold: bool = False
    fail: BaseException | None = None
    seen: list[list[ModelMessage]] = field(default_factory=list)
    infos: list[AgentInfo] = field(default_factory=list)
    closed: int = 0

    def model(self) -> FunctionModel:
        def unused(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            raise AssertionError("the adapter streams")

        return FunctionModel(unused, stream_function=self.stream)

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        self.seen.append(list(messages))
        self.infos.append(info)
        step = self.steps[min(len(self.seen), len(self.steps)) - 1]
        try:
            for item in step:
                yield item
            if self.fail is not None:
                raise self.fail
            if self.hold and len(self.seen) >= len(self.steps):
                await anyio.sleep_forever()
        finally:
            self.closed += 1


async def collect(source: ChatSource) -> list[StreamChunk]:
    return [chunk async for chunk in source.stream()]


def kinds(chunks: Sequence[StreamChunk]) -> list[str]:
    return [chunk.type for chunk in chunks]


def calls_of(chunks: Sequence[StreamChunk]) -> list[tuple[str, str, str]]:
    return [
        (chunk.type, chunk.tool_call.id, chunk.tool_call.status)
        for chunk in chunks
        if chunk.tool_call is not None
    ]


def tool_call(index: int, name: str, args: str, call_id: str) -> DeltaToolCalls:
    return {index: DeltaToolCall(name=name, json_args=args, tool_call_id=call_id)}


def ids() -> Callable[[], str]:
    counter = iter(range(1, 1000))
    return lambda: f"m{next(counter)}"
