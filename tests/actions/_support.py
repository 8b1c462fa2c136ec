"""Shared pieces of the confirmation tests: a model adapter, a gated tool, a scripted chat."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import anyio

from agentskit_chat.protocol import ToolCall
from agentskit_chat.runtime import (
    AdapterCapabilities,
    AdapterRequest,
    ChatConfig,
    ChatController,
    ChatTool,
    StreamChunk,
)

NOW: Final = datetime(2026, 7, 11, tzinfo=UTC)
TOOL: Final = "email.send"


class ReplySource:
    """Answers one short text, then ``done``."""

    def abort(self) -> None:
        pass

    async def stream(self) -> AsyncIterator[StreamChunk]:
        yield StreamChunk("text", content="ok")
        yield StreamChunk("done")


@dataclass
class ReplyAdapter:
    """The model after a tool call: counts its turns."""

    turns: int = 0
    capabilities: AdapterCapabilities | None = None

    def create_source(self, request: AdapterRequest) -> ReplySource:
        self.turns += 1
        return ReplySource()


@dataclass
class Executor:
    """Records each execution's arguments; mutates them to prove records are copies."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    gate: anyio.Event | None = None

    async def __call__(self, args: Mapping[str, Any]) -> Any:
        self.calls.append(dict(args))
        if self.gate is not None:
            await self.gate.wait()
        await anyio.sleep(0)
        if isinstance(args, dict):
            args.clear()
        return "sent"


def gated_tool(executor: Executor, *, name: str = TOOL, confirm: bool = True) -> ChatTool:
    return ChatTool(name=name, execute=executor, requires_confirmation=confirm)


def controller(executor: Executor, *tools: ChatTool) -> ChatController:
    """A real controller offering the gated ``email.send`` tool (plus ``tools``)."""
    config = ChatConfig(
        adapter=ReplyAdapter(), tools=(gated_tool(executor), *tools), clock=lambda: NOW
    )
    return ChatController(config)


@dataclass
class ScriptedChat:
    """A stand-in upstream: records calls, fails the first ``fail`` approvals and denials."""

    fail: int = 0
    gate: anyio.Event | None = None
    approved: list[str] = field(default_factory=list)
    denied: list[tuple[str, str | None]] = field(default_factory=list)
    status: str = "requires_confirmation"

    async def propose_tool_call(self, *, id: str, name: str, args: Mapping[str, Any]) -> ToolCall:
        await anyio.sleep(0)
        return ToolCall(id=id, name=name, args=dict(args), status=self.status)

    async def _step(self) -> None:
        if self.gate is not None:
            await self.gate.wait()
        await anyio.sleep(0)
        if self.fail:
            self.fail -= 1
            raise RuntimeError("upstream failed")

    async def approve(self, tool_call_id: str) -> None:
        self.approved.append(tool_call_id)
        await self._step()

    async def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        self.denied.append((tool_call_id, reason))
        await self._step()
