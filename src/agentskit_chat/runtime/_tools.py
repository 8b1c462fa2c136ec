"""Tools the chat controller can run, and the authorizer that decides whether they may run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, runtime_checkable

from agentskit_chat.protocol import ToolCall

if TYPE_CHECKING:
    from ._messages import ChatMessage

__all__ = [
    "AuthorizationPhase",
    "ChatTool",
    "ToolAuthorization",
    "ToolAuthorizationContext",
    "ToolAuthorizer",
    "ToolExecutor",
    "ToolRunner",
]

#: When an authorizer is asked: when a call is proposed, and again just before it executes.
AuthorizationPhase = Literal["propose", "execute"]

#: Runs an approved call with its (validated) arguments; the result is text or JSON data, which
#: the controller records as the call's ``result`` (JSON data compactly serialized).
ToolExecutor = Callable[[Mapping[str, Any]], Awaitable[Any]]

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatTool:
    """A tool the chat offers.

    Attributes:
        name: The tool's name, a safe identifier.
        description: What the tool does, for the model.
        parameters: The JSON Schema (draft 2020-12) of the arguments object, or ``None`` when
            the tool takes any object.
        execute: The executor; a tool without one can only be run by its adapter.
        requires_confirmation: Whether a human must approve each call before it runs.
        metadata: Free-form data for adapters (held read-only).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] | None = None
    execute: ToolExecutor | None = None
    requires_confirmation: bool = False
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class ToolAuthorization:
    """An authorizer's verdict: ``allowed``, or not with a ``reason`` shown to the user."""

    allowed: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolAuthorizationContext:
    """What an authorizer is told besides the call.

    Attributes:
        phase: ``propose`` or ``execute``.
        messages: The conversation at that moment.
        tool: The registered tool, when there is one.
    """

    phase: AuthorizationPhase
    messages: tuple[ChatMessage, ...]
    tool: ChatTool | None = None


#: ``authorize(call, context)`` returns a :class:`ToolAuthorization` (or an awaitable of one);
#: a raised exception counts as a denial.
ToolAuthorizer = Callable[
    [ToolCall, ToolAuthorizationContext],
    ToolAuthorization | Awaitable[ToolAuthorization],
]


@runtime_checkable
class ToolRunner(Protocol):
    """The chat's tool checks, for the calls an adapter runs inside its own agent loop.

    The chat controller puts one in the context of every request it sends
    (:attr:`AdapterContext.tool_runner`), bound to that turn: its authorizer, its tools and
    their argument schemas, and the conversation as it is when a call runs. An adapter whose
    agent runs tools itself asks it before each execution, so a capability policy holds for
    every call, whoever made it.
    """

    async def authorize(self, call: ToolCall) -> ToolAuthorization:
        """Whether ``call`` may run now: the chat's authorizer, asked in phase ``execute``.

        Never raises: an authorizer that fails counts as a denial, and a denial always has a
        reason.
        """
        ...

    async def execute(self, call: ToolCall) -> ToolCall:
        """Run the chat's tool for ``call`` exactly as the controller runs an approved call.

        The arguments are checked against the tool's schema (when the chat validates them),
        the call is authorized in phase ``execute``, and then the executor runs. Returns the
        call's outcome: ``complete`` with its result, or ``error`` (``Permission denied:
        <reason>`` when the authorizer said no; the executor then never ran). Only
        cancellation propagates.
        """
        ...
