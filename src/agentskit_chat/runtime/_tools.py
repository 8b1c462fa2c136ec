"""Tools the chat controller can run, and the authorizer that decides whether they may run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

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
