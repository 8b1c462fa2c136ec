"""Executors, authorizers and tools for the chat controller's tool tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from agentskit_chat.errors import ToolError
from agentskit_chat.protocol import ToolCall
from agentskit_chat.runtime import (
    ChatController,
    ChatTool,
    ToolAuthorization,
    ToolAuthorizationContext,
)

from ._controller_fakes import ScriptedAdapter, config

SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string", "maxLength": 20}},
    "required": ["path"],
    "additionalProperties": False,
}


class Executor:
    """An executor that records its calls and returns (or raises) what it is told."""

    def __init__(self, result: Any = "deleted", error: BaseException | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.result = result
        self.error = error

    async def __call__(self, args: Mapping[str, Any]) -> Any:
        self.calls.append(dict(args))
        await anyio.sleep(0)
        if self.error is not None:
            raise self.error
        if isinstance(args, dict):
            args.clear()  # an executor that mutates its arguments changes no record
        return self.result


class Authorizer:
    """Records every question; answers from a table keyed by phase."""

    def __init__(self, **verdicts: ToolAuthorization | Exception) -> None:
        self.verdicts = verdicts
        self.asked: list[tuple[str, str, ToolAuthorizationContext]] = []

    async def __call__(
        self, call: ToolCall, context: ToolAuthorizationContext
    ) -> ToolAuthorization:
        self.asked.append((call.id, context.phase, context))
        await anyio.sleep(0)
        verdict = self.verdicts.get(context.phase, ToolAuthorization(True))
        if isinstance(verdict, Exception):
            raise verdict
        return verdict


def gated(executor: Executor | None = None, **changes: Any) -> ChatTool:
    fields: dict[str, Any] = {
        "name": "delete_file",
        "description": "Delete a file.",
        "parameters": SCHEMA,
        "execute": executor or Executor(),
        "requires_confirmation": True,
    }
    fields.update(changes)
    return ChatTool(**fields)


def make(
    *tools: ChatTool, authorizer: Any = None, adapter: ScriptedAdapter | None = None, **extra: Any
) -> tuple[ChatController, ScriptedAdapter]:
    adapter = adapter or ScriptedAdapter()
    controller = ChatController(
        config(adapter, tools=tools, authorize_tool_call=authorizer, **extra)
    )
    return controller, adapter


async def expect_tool_error(code: str, coroutine: Any) -> ToolError:
    with pytest.raises(ToolError) as caught:
        await coroutine
    assert caught.value.code == code
    return caught.value
