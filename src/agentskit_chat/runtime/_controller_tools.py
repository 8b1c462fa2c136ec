"""The chat controller's tool checks: registry, argument schemas, authorization, executors."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from jsonschema import Draft202012Validator

from agentskit_chat.errors import ConfigurationError, ToolError
from agentskit_chat.protocol import ToolCall
from agentskit_chat.protocol._bounded import is_bounded_json
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.protocol._types import is_safe_id, thaw

from ._tools import (
    AuthorizationPhase,
    ChatTool,
    ToolAuthorization,
    ToolAuthorizationContext,
    ToolAuthorizer,
)

if TYPE_CHECKING:
    from ._messages import ChatMessage

__all__ = [
    "AUTHORIZATION_FAILED_REASON",
    "DENIED_PREFIX",
    "EXECUTION_CANCELLED",
    "EXECUTION_FAILED",
    "INVALID_ARGUMENTS",
    "NOT_AUTHORIZED_REASON",
    "NOT_RUNNABLE",
    "USER_DENIED_REASON",
    "RequestToolRunner",
    "ToolRegistry",
    "authorize",
    "call_with",
    "checked_arguments",
    "execute",
]

#: The start of a denied call's ``error``: adapters read it as "the user said no".
DENIED_PREFIX: Final = "Permission denied: "
#: The reason of ``deny()`` without one.
USER_DENIED_REASON: Final = "user denied access"
#: The reason of an authorizer that said no without a reason.
NOT_AUTHORIZED_REASON: Final = "tool call was not authorized"
#: The reason when the authorizer raised or answered something else than a verdict.
AUTHORIZATION_FAILED_REASON: Final = "tool call authorization failed"
#: ``error`` of a call whose arguments fail the tool's schema at approval.
INVALID_ARGUMENTS: Final = "Tool call arguments do not match the tool's schema."
#: ``error`` of a call whose executor raised (its exception text may hold data: never shown).
EXECUTION_FAILED: Final = "Tool execution failed."
#: ``error`` of a call whose approval was cancelled while the executor ran.
EXECUTION_CANCELLED: Final = "Tool execution was cancelled."
#: ``error`` of a call an adapter asked to run for a tool the chat has no executor for.
NOT_RUNNABLE: Final = "Tool is not registered with an executor."
_NOT_JSON_RESULT: Final = "Tool result is not JSON."
_UNBOUNDED_ARGUMENTS: Final = "Tool call arguments must be a bounded JSON object."

_CallStatus = Literal["pending", "running", "complete", "error", "requires_confirmation"]


class ToolRegistry:
    """The tools of one configuration, checked once, with their argument validators.

    Raises:
        ConfigurationError: when a tool name is not a safe identifier, two tools share a name,
            or a tool's ``parameters`` is not a valid JSON Schema (draft 2020-12).
    """

    __slots__ = ("_tools", "_validators")

    def __init__(self, tools: Sequence[ChatTool]) -> None:
        self._tools: dict[str, ChatTool] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        for tool in tools:
            if not is_safe_id(tool.name):
                raise ConfigurationError("Chat tool names must be safe identifiers.")
            if tool.name in self._tools:
                raise ConfigurationError("Chat tool names must be unique.")
            self._tools[tool.name] = tool
            if tool.parameters is not None:
                self._validators[tool.name] = _validator(tool.parameters)

    def get(self, name: str) -> ChatTool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def arguments_valid(self, tool: ChatTool, args: Mapping[str, Any]) -> bool:
        """Whether ``args`` satisfy the tool's schema (``True`` when it has none)."""
        validator = self._validators.get(tool.name)
        if validator is None:
            return True
        try:
            return bool(validator.is_valid(thaw(args)))
        except Exception:
            # An unresolvable reference or a hostile pattern: fail closed.
            return False


def _validator(parameters: Mapping[str, Any]) -> Draft202012Validator:
    if not isinstance(parameters, Mapping):
        raise ConfigurationError("Chat tool parameters must be a JSON Schema object.")
    schema = thaw(parameters)
    try:
        Draft202012Validator.check_schema(schema)
    except Exception:
        raise ConfigurationError("Chat tool parameters must be a valid JSON Schema.") from None
    return Draft202012Validator(schema)


def checked_arguments(args: object) -> dict[str, Any]:
    """A plain deep copy of ``args`` when it is a bounded JSON object.

    Raises:
        ToolError: ``AK_TOOL_INVALID_INPUT`` when it is not.
    """
    if not isinstance(args, Mapping) or not is_bounded_json(args):
        raise ToolError("AK_TOOL_INVALID_INPUT", _UNBOUNDED_ARGUMENTS)
    copied: dict[str, Any] = thaw(args)
    return copied


def call_with(
    call: ToolCall,
    status: _CallStatus,
    *,
    result: str | None = None,
    error: str | None = None,
) -> ToolCall:
    """A copy of ``call`` with a new status and outcome (previous result and error dropped)."""
    fields: dict[str, Any] = {"id": call.id, "name": call.name, "args": call.args, "status": status}
    if result is not None:
        fields["result"] = result
    if error is not None:
        fields["error"] = error
    return ToolCall.model_validate(fields)


async def authorize(
    authorizer: ToolAuthorizer | None, call: ToolCall, context: ToolAuthorizationContext
) -> ToolAuthorization:
    """Ask ``authorizer`` (sync or async) about ``call``; without one, everything is allowed.

    A raised exception, or an answer that is not a :class:`ToolAuthorization`, is a denial with
    a fixed reason (never the exception text). A denial always carries a non-empty reason.
    """
    if authorizer is None:
        return ToolAuthorization(True)
    try:
        verdict: object = authorizer(call, context)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception:
        return ToolAuthorization(False, AUTHORIZATION_FAILED_REASON)
    if not isinstance(verdict, ToolAuthorization):
        return ToolAuthorization(False, AUTHORIZATION_FAILED_REASON)
    if verdict.allowed is True:
        return verdict
    reason = verdict.reason
    return ToolAuthorization(
        False, reason if isinstance(reason, str) and reason else NOT_AUTHORIZED_REASON
    )


async def execute(tool: ChatTool, call: ToolCall) -> ToolCall:
    """Run the tool's executor on a copy of the call's arguments; the call's outcome.

    A string result is kept as is, other results as compact JSON. An executor raising
    :class:`ToolError` gives its (safe) message as the error; any other exception gives a fixed
    text. Cancellation propagates.
    """
    assert tool.execute is not None
    try:
        value = await tool.execute(thaw(call.args))
    except ToolError as exc:
        message = exc.message if isinstance(exc.message, str) and exc.message else EXECUTION_FAILED
        return call_with(call, "error", error=message)
    except Exception:
        return call_with(call, "error", error=EXECUTION_FAILED)
    if isinstance(value, str):
        return call_with(call, "complete", result=value)
    try:
        text = js_stringify(value)
    except Exception:
        return call_with(call, "error", error=_NOT_JSON_RESULT)
    return call_with(call, "complete", result=text)


class RequestToolRunner:
    """The controller's tool checks for one request (a :class:`~._tools.ToolRunner`).

    Args:
        registry: The tools of the configuration the turn started with.
        authorizer: The chat's authorizer, or ``None`` (everything allowed).
        validate_args: Whether arguments are checked against each tool's schema.
        messages: The conversation as it is now (read at each decision).
    """

    __slots__ = ("_authorizer", "_messages", "_registry", "_validate")

    def __init__(
        self,
        registry: ToolRegistry,
        authorizer: ToolAuthorizer | None,
        *,
        validate_args: bool,
        messages: Callable[[], tuple[ChatMessage, ...]],
    ) -> None:
        self._registry = registry
        self._authorizer = authorizer
        self._validate = validate_args
        self._messages = messages

    async def _ask(self, call: ToolCall, phase: AuthorizationPhase) -> ToolAuthorization:
        context = ToolAuthorizationContext(
            phase=phase, messages=self._messages(), tool=self._registry.get(call.name)
        )
        return await authorize(self._authorizer, call, context)

    async def authorize(self, call: ToolCall) -> ToolAuthorization:
        """The authorizer's verdict on ``call`` in phase ``execute``."""
        return await self._ask(call, "execute")

    async def execute(self, call: ToolCall) -> ToolCall:
        """Validate, authorize (phase ``execute``) and run the chat's tool; the outcome."""
        tool = self._registry.get(call.name)
        if tool is None or tool.execute is None:
            return call_with(call, "error", error=NOT_RUNNABLE)
        if self._validate and not self._registry.arguments_valid(tool, call.args):
            return call_with(call, "error", error=INVALID_ARGUMENTS)
        verdict = await self._ask(call, "execute")
        if not verdict.allowed:
            return call_with(call, "error", error=f"{DENIED_PREFIX}{verdict.reason}")
        return await execute(tool, call)

    async def check_proposal(self, call: ToolCall) -> ToolCall:
        """``call`` (awaiting confirmation, proposed by the adapter) once it is checked.

        The arguments of a registered tool are checked against its schema, then the call is
        authorized in phase ``propose``. Returns ``call`` itself when both pass, else the call
        ended in ``error`` (``Permission denied: <reason>`` on a denial).
        """
        tool = self._registry.get(call.name)
        checked = tool if self._validate else None
        if checked is not None and not self._registry.arguments_valid(checked, call.args):
            return call_with(call, "error", error=INVALID_ARGUMENTS)
        verdict = await self._ask(call, "propose")
        if not verdict.allowed:
            return call_with(call, "error", error=f"{DENIED_PREFIX}{verdict.reason}")
        return call
