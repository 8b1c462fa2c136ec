"""Where a chat's tools meet a pydantic-ai agent's, under one authorizer.

The chat's tools (``ChatTool`` values with an executor) are offered to each run as a run-time
toolset: name, description and JSON Schema as they are, ``requires_confirmation`` as
``requires_approval``. Calling one runs it through the request's
:class:`~agentskit_chat.runtime.ToolRunner`, so it meets the controller's own checks (its
argument schema, the authorizer in phase ``execute``, its executor) and its outcome is the one
the controller would record. One that needs confirmation is deferred like any approval; the
controller then checks, runs and records it when a human approves, and the next run hands the
agent its outcome.

The agent's own tools are authorized too: a run-time capability asks the runner, in phase
``execute``, before each of them runs. A call that was deferred and then approved was
authorized by the controller's ``approve`` just before this run, so it is not asked twice. A
denial reaches the model as a denied tool return, and the chat records it as
``Permission denied: <reason>``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Final

from pydantic import ValidationError
from pydantic_ai import RunContext, Tool, ToolDenied, ToolFailed
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.capabilities import (
    AbstractCapability,
    ValidatedToolArgs,
    WrapToolExecuteHandler,
)
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from agentskit_chat.answer_commit import ANSWER_COMMIT_TOOL_NAME
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import ToolCall
from agentskit_chat.protocol._types import thaw
from agentskit_chat.runtime import AdapterContext, ChatTool, ToolRunner

from ._pydantic_ai_history import DENIED_PREFIX

__all__ = [
    "CALL_NOT_CHECKABLE",
    "ToolGate",
    "agent_tool_names",
    "chat_tools",
    "chat_toolset",
    "check_tool_names",
]

#: The error of a call the chat cannot check (an id or arguments it cannot record): never run.
CALL_NOT_CHECKABLE: Final = "The tool call could not be checked, so it did not run."
_FAILED: Final = "The tool call failed."
# What a chat tool without a schema takes: any object.
_ANY_OBJECT: Final = {"type": "object", "properties": {}}


def chat_tools(context: AdapterContext) -> tuple[ChatTool, ...]:
    """The request's chat tools an agent can run: those with an executor."""
    return tuple(
        tool for tool in context.tools if isinstance(tool, ChatTool) and tool.execute is not None
    )


def _function_tool_names(toolset: AbstractToolset[Any]) -> Iterable[str]:
    if isinstance(toolset, FunctionToolset):
        yield from toolset.tools


def agent_tool_names(agent: AbstractAgent[Any, Any], *, answer_commit: bool) -> frozenset[str]:
    """The tool names the agent declares before a run (function tools, ``answer_commit``).

    Toolsets that only know their tools during a run (MCP servers, dynamic toolsets) are not
    listed; pydantic-ai refuses a clash with one of them when the run starts.
    """
    names = {name for toolset in agent.toolsets for name in _function_tool_names(toolset)}
    if answer_commit:
        names.add(ANSWER_COMMIT_TOOL_NAME)
    return frozenset(names)


def check_tool_names(taken: frozenset[str], tools: Iterable[object]) -> None:
    """Refuse chat tools named like one of the agent's.

    Raises:
        ConfigurationError: when a chat tool's name is one the agent already uses.
    """
    if any(isinstance(tool, ChatTool) and tool.name in taken for tool in tools):
        raise ConfigurationError(
            "A chat tool has the same name as one of the agent's tools; rename one of them."
        )


def _call(call_id: str, name: str, args: object) -> ToolCall | None:
    try:
        return ToolCall.model_validate(
            {"id": call_id, "name": name, "args": args, "status": "running"}
        )
    except ValidationError:
        return None


def _to_model(outcome: ToolCall) -> Any:
    """What the model is shown for the outcome the runner recorded."""
    if outcome.status == "complete":
        return outcome.result or ""
    error = outcome.error or _FAILED
    if error.startswith(DENIED_PREFIX):
        return ToolDenied(error)
    raise ToolFailed(error)


def _runs(tool: ChatTool, runner: ToolRunner) -> Callable[..., Awaitable[Any]]:
    async def run(ctx: RunContext[Any], **args: Any) -> Any:
        call = _call(ctx.tool_call_id or "", tool.name, args)
        if call is None:
            raise ToolFailed(CALL_NOT_CHECKABLE)
        return _to_model(await runner.execute(call))

    return run


def chat_toolset(tools: Sequence[ChatTool], runner: ToolRunner) -> FunctionToolset[Any]:
    """The chat's tools as a pydantic-ai toolset whose calls run through ``runner``.

    Arguments are not validated by pydantic-ai: the runner checks them against the tool's
    JSON Schema, exactly as the controller does.
    """
    built: list[Tool[Any]] = []
    for tool in tools:
        schema = thaw(tool.parameters) if tool.parameters is not None else dict(_ANY_OBJECT)
        offered: Tool[Any] = Tool.from_schema(
            _runs(tool, runner),
            name=tool.name,
            description=tool.description or None,
            json_schema=schema,
            takes_ctx=True,
        )
        offered.requires_approval = tool.requires_confirmation
        built.append(offered)
    return FunctionToolset(built)


class ToolGate(AbstractCapability[Any]):
    """Authorizes each execution of the agent's own tools with the request's runner.

    Args:
        runner: The request's tool checks.
        chat_tool_names: The chat's tools in this run; their calls are checked by the runner
            when they run, so they pass here.
    """

    def __init__(self, runner: ToolRunner, chat_tool_names: frozenset[str]) -> None:
        self._runner = runner
        self._chat_tools = chat_tool_names

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Run the call when the authorizer allows it; a denied tool return otherwise."""
        if call.tool_name in self._chat_tools or ctx.tool_call_approved:
            return await handler(args)
        # The model's own arguments (plain JSON), not the validated ones (which may hold models).
        try:
            raw = call.args_as_dict(raise_if_invalid=True)
        except (ValueError, AssertionError):
            raw = None
        checked = _call(call.tool_call_id, call.tool_name, raw)
        if checked is None:
            return ToolDenied(f"{DENIED_PREFIX}{CALL_NOT_CHECKABLE}")
        verdict = await self._runner.authorize(checked)
        if not verdict.allowed:
            return ToolDenied(f"{DENIED_PREFIX}{verdict.reason}")
        return await handler(args)
