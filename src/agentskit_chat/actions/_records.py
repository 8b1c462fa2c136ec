"""Confirmation records, the statuses they move through, and the chat they delegate to."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import Confirmation, ConfirmationStatus, ToolCall

__all__ = [
    "CONFIRMATION_HINT",
    "PROCESSING_STATUSES",
    "TERMINAL_STATUSES",
    "ClaimLost",
    "ClaimStatus",
    "ConfirmationChangeObserver",
    "ConfirmationChat",
    "ConfirmationRecord",
    "SettleRecord",
    "TerminalConfirmationStatus",
    "confirmation_error",
]

#: The hint every confirmation error carries.
CONFIRMATION_HINT: Final = (
    "Approve or reject a pending confirmation token in the session that proposed it."
)
#: Statuses claimed before the upstream call completes; a record in one of them is inert.
PROCESSING_STATUSES: Final = frozenset({"approving", "rejecting", "expiring"})
#: Final statuses.
TERMINAL_STATUSES: Final = frozenset({"approved", "rejected", "expired"})

#: A status a confirmation ends in.
TerminalConfirmationStatus = Literal["approved", "rejected", "expired"]


def confirmation_error(message: str) -> ConfigurationError:
    """A configuration error with the confirmation hint."""
    return ConfigurationError(message, hint=CONFIRMATION_HINT)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfirmationRecord:
    """One proposed action and where its confirmation stands; immutable.

    Attributes:
        token: The confirmation token the user approves or rejects (``confirm-<id>``).
        session_id: The session the token belongs to; no other session can use it.
        action: The action (tool) name, such as ``email.send``.
        input: The action's arguments: a deep, read-only copy taken when it was proposed.
        tool_call_id: The upstream tool call it is bound to (``app-<id>``).
        expires_at: When an approval stops being accepted, in epoch milliseconds.
        status: ``pending``, a processing status (``approving``, ``rejecting``,
            ``expiring``) or a terminal one (``approved``, ``rejected``, ``expired``).
    """

    token: str
    session_id: str
    action: str
    input: Mapping[str, Any]
    tool_call_id: str
    expires_at: int
    status: ConfirmationStatus

    @classmethod
    def from_wire(cls, confirmation: Confirmation, session_id: str) -> ConfirmationRecord:
        """A stored confirmation as a record of ``session_id``."""
        return cls(
            token=confirmation.token,
            session_id=session_id,
            action=confirmation.action,
            input=confirmation.input,
            tool_call_id=confirmation.tool_call_id,
            expires_at=confirmation.expires_at,
            status=confirmation.status,
        )

    def to_wire(self) -> Confirmation:
        """The record as a session snapshot stores it (without ``session_id``)."""
        return Confirmation(
            token=self.token,
            action=self.action,
            input=self.input,
            tool_call_id=self.tool_call_id,
            expires_at=self.expires_at,
            status=self.status,
        )


class ConfirmationChat(Protocol):
    """The upstream chat a confirmation delegates to; a
    :class:`~agentskit_chat.runtime.ChatController` is one."""

    async def propose_tool_call(self, *, id: str, name: str, args: Mapping[str, Any]) -> ToolCall:
        """Propose a confirmation-gated tool call; returns it."""
        ...

    async def approve(self, tool_call_id: str) -> None:
        """Run the approved call."""
        ...

    async def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        """End the call as denied."""
        ...


@dataclass(frozen=True, slots=True)
class ClaimLost:
    """What a claim hook returns when another client changed the record first.

    Attributes:
        current: The record as that client left it (processing or terminal); the
            confirmation adopts it and returns it instead of calling the upstream.
    """

    current: ConfirmationRecord


#: ``claim_status(record, status)``: durably move ``record`` to ``status`` before anything
#: happens upstream. ``True``: claimed. ``False``: refused ("already resolved by another
#: client"). :class:`ClaimLost`: another client got there first. May be async.
ClaimStatus = Callable[
    [ConfirmationRecord, ConfirmationStatus],
    "bool | ClaimLost | Awaitable[bool | ClaimLost]",
]
#: Told every record (in creation order) after a change; may be async, and when it raises the
#: change is undone.
ConfirmationChangeObserver = Callable[
    [tuple[ConfirmationRecord, ...]], "object | Awaitable[object]"
]
#: ``settle(record)``: for a record in a processing status that this process is not working
#: on, the latest record another client left (it may wait a little for that client to finish).
SettleRecord = Callable[[ConfirmationRecord], Awaitable[ConfirmationRecord]]
