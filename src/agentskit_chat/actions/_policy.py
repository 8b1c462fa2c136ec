"""The capability policy: which actions a session may propose and run, decided from the host's
trusted context only.

Prompts, messages, tool arguments and component props never reach a decision: the policy reads
the call's id and name, the authorization phase, and whatever ``get_context`` returns. It is
asked when a call is proposed and again just before it executes, so a capability revoked in
between stops the execution.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from agentskit_chat._observers import notify
from agentskit_chat.protocol import ToolCall
from agentskit_chat.protocol._types import is_safe_id
from agentskit_chat.runtime import (
    AuthorizationPhase,
    ToolAuthorization,
    ToolAuthorizationContext,
    ToolAuthorizer,
)

from ._records import confirmation_error

__all__ = [
    "CapabilityPolicy",
    "PolicyContext",
    "PolicyDecision",
    "PolicyReason",
    "PolicyTrace",
    "PolicyTraceObserver",
    "create_capability_policy",
]

#: Why a decision came out as it did; only ``allowed`` allows.
PolicyReason = Literal[
    "allowed",
    "missing-context",
    "session-mismatch",
    "action-unregistered",
    "missing-capability",
    "composed-policy-denied",
    "policy-failure",
]
#: ``allow`` exactly when the reason is ``allowed``.
PolicyDecision = Literal["allow", "deny"]

_INVALID_SESSION: Final = "Action policy session is invalid."
_INVALID_REQUIREMENTS: Final = "Action policy requirements are invalid."


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """The trusted host context a decision reads: whose session, and what it may do.

    Attributes:
        session_id: The session the caller is authenticated for.
        capabilities: The capability names the caller holds.
    """

    session_id: str
    capabilities: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "capabilities", tuple(self.capabilities))


@dataclass(frozen=True, slots=True)
class PolicyTrace:
    """One authorization decision, for an audit log. It never holds the context, the call's
    arguments or the conversation.

    Attributes:
        id: ``policy-<n>``, counting from 1 per policy.
        tool_call_id: The call decided on.
        action: The call's name.
        phase: ``propose`` or ``execute``.
        decision: ``allow`` or ``deny``.
        reason: See :data:`PolicyReason`.
        required_capabilities: What the action requires (empty for an unregistered action).
        timestamp: When, in epoch milliseconds.
    """

    id: str
    tool_call_id: str
    action: str
    phase: AuthorizationPhase
    decision: PolicyDecision
    reason: PolicyReason
    required_capabilities: tuple[str, ...]
    timestamp: int

    def to_wire(self) -> dict[str, Any]:
        """The trace as JSON data, with camelCase keys."""
        return {
            "id": self.id,
            "toolCallId": self.tool_call_id,
            "action": self.action,
            "phase": self.phase,
            "decision": self.decision,
            "reason": self.reason,
            "requiredCapabilities": list(self.required_capabilities),
            "timestamp": self.timestamp,
        }


#: Told about every trace; called synchronously, its errors ignored.
PolicyTraceObserver = Callable[[PolicyTrace], object]
#: Returns the trusted context, or ``None`` when there is none.
GetContext = Callable[[], PolicyContext | None]


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class CapabilityPolicy:
    """Authorizes tool calls from the trusted context. Build it with
    :func:`create_capability_policy`; hand :meth:`authorize_tool_call` (or :meth:`compose`) to
    a chat's ``authorize_tool_call``.
    """

    def __init__(
        self,
        *,
        session_id: str,
        get_context: GetContext,
        requirements: Mapping[str, tuple[str, ...]],
        on_trace: PolicyTraceObserver | None,
        now: Callable[[], int],
    ) -> None:
        self._session_id = session_id
        self._get_context = get_context
        self._requirements = dict(requirements)
        self._on_trace = on_trace
        self._now = now
        self._traces: list[PolicyTrace] = []

    @property
    def session_id(self) -> str:
        """The session this policy authorizes."""
        return self._session_id

    @property
    def traces(self) -> tuple[PolicyTrace, ...]:
        """Every decision so far, oldest first."""
        return tuple(self._traces)

    def requirements(self, action: str) -> tuple[str, ...] | None:
        """The capabilities ``action`` requires, or ``None`` when it is not registered."""
        return self._requirements.get(action)

    def _decide(self, call: ToolCall) -> PolicyReason:
        try:
            context = self._get_context()
        except Exception:
            return "policy-failure"
        if context is not None and not _well_formed(context):
            return "policy-failure"
        required = self._requirements.get(call.name)
        if required is None:
            return "action-unregistered"
        if context is None:
            return "missing-context"
        if context.session_id != self._session_id:
            return "session-mismatch"
        held = set(context.capabilities)
        if any(capability not in held for capability in required):
            return "missing-capability"
        return "allowed"

    def _record(self, call: ToolCall, phase: AuthorizationPhase, reason: PolicyReason) -> None:
        trace = PolicyTrace(
            id=f"policy-{len(self._traces) + 1}",
            tool_call_id=call.id,
            action=call.name,
            phase=phase,
            decision="allow" if reason == "allowed" else "deny",
            reason=reason,
            required_capabilities=self._requirements.get(call.name, ()),
            timestamp=self._now(),
        )
        self._traces.append(trace)
        notify(self._on_trace, trace)

    def authorize_tool_call(
        self, call: ToolCall, context: ToolAuthorizationContext
    ) -> ToolAuthorization:
        """Decide on ``call`` in ``context.phase``, record one trace, and answer.

        A denial's reason is the policy reason (``missing-capability``, ...).
        """
        reason = self._decide(call)
        self._record(call, context.phase, reason)
        return _verdict(reason)

    def compose(
        self, existing: ToolAuthorizer | None = None
    ) -> Callable[[ToolCall, ToolAuthorizationContext], Awaitable[ToolAuthorization]]:
        """An authorizer that decides here first and asks ``existing`` only when this policy
        allows; exactly one trace is recorded per call, with the effective reason.

        ``existing`` denying gives ``composed-policy-denied``; raising (or answering something
        that is not a verdict) gives ``policy-failure``; allowing makes this policy decide
        again, so a capability revoked while ``existing`` ran still denies.
        """

        async def authorize(call: ToolCall, context: ToolAuthorizationContext) -> ToolAuthorization:
            reason = self._decide(call)
            if reason == "allowed" and existing is not None:
                reason = await _ask(existing, call, context)
                if reason == "allowed":
                    reason = self._decide(call)
            self._record(call, context.phase, reason)
            return _verdict(reason)

        return authorize


def _well_formed(context: object) -> bool:
    if not isinstance(context, PolicyContext):
        return False
    capabilities = context.capabilities
    return (
        type(context.session_id) is str
        and isinstance(capabilities, tuple)
        and all(type(item) is str for item in capabilities)
    )


async def _ask(
    existing: ToolAuthorizer, call: ToolCall, context: ToolAuthorizationContext
) -> PolicyReason:
    try:
        verdict: object = existing(call, context)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception:
        return "policy-failure"
    if not isinstance(verdict, ToolAuthorization):
        return "policy-failure"
    return "allowed" if verdict.allowed is True else "composed-policy-denied"


def _verdict(reason: PolicyReason) -> ToolAuthorization:
    if reason == "allowed":
        return ToolAuthorization(True)
    return ToolAuthorization(False, reason)


def _requirements(requirements: object) -> dict[str, tuple[str, ...]]:
    if not isinstance(requirements, Mapping):
        raise confirmation_error(_INVALID_REQUIREMENTS)
    checked: dict[str, tuple[str, ...]] = {}
    for action, capabilities in requirements.items():
        if not is_safe_id(action) or isinstance(capabilities, str | bytes):
            raise confirmation_error(_INVALID_REQUIREMENTS)
        if not isinstance(capabilities, Sequence | set | frozenset | tuple):
            raise confirmation_error(_INVALID_REQUIREMENTS)
        unique: dict[str, None] = {}
        for capability in capabilities:
            if not is_safe_id(capability):
                raise confirmation_error(_INVALID_REQUIREMENTS)
            unique.setdefault(capability, None)
        checked[action] = tuple(unique)
    return checked


def create_capability_policy(
    *,
    session_id: str,
    get_context: GetContext | Callable[[], Awaitable[PolicyContext | None]],
    requirements: Mapping[str, Sequence[str]],
    on_trace: PolicyTraceObserver | None = None,
    now: Callable[[], int] | None = None,
) -> CapabilityPolicy:
    """A capability policy for one session.

    Decisions, in this order: ``get_context`` raising or returning something that is not a
    :class:`PolicyContext` → ``policy-failure``; an action not in ``requirements`` →
    ``action-unregistered``; no context → ``missing-context``; a context of another session →
    ``session-mismatch``; a required capability missing → ``missing-capability``; otherwise
    ``allowed`` (an empty requirement list makes an action public to its session).

    Args:
        session_id: The session it authorizes.
        get_context: The trusted host seam, called on every decision (so revocation takes
            effect at once): the caller's :class:`PolicyContext`, or ``None``. It must be
            synchronous; an awaitable it returns counts as a failure.
        requirements: Action name → the capabilities it requires (safe identifiers;
            duplicates dropped, first occurrence kept).
        on_trace: Told about each :class:`PolicyTrace` (errors ignored).
        now: The clock of trace timestamps, in epoch milliseconds.

    Raises:
        ConfigurationError: "Action policy session is invalid." (an empty or non-string
            session id), "Action policy requirements are invalid."

    Example:
        >>> policy = create_capability_policy(
        ...     session_id="session-a",
        ...     get_context=lambda: PolicyContext("session-a", ("email.send",)),
        ...     requirements={"send-email": ["email.send"], "delete-user": ["users.delete"]},
        ... )
    """
    if type(session_id) is not str or session_id == "":
        raise confirmation_error(_INVALID_SESSION)
    checked = _requirements(requirements)

    def context() -> PolicyContext | None:
        value: object = get_context()
        if inspect.isawaitable(value):
            close = getattr(value, "close", None)
            if close is not None:
                close()
            raise TypeError("get_context must be synchronous")
        return value  # type: ignore[return-value]

    return CapabilityPolicy(
        session_id=session_id,
        get_context=context,
        requirements=checked,
        on_trace=on_trace,
        now=now or _wall_clock_ms,
    )
