"""Reading a session's stored confirmations, waiting for another client to settle one, and
settling a stuck one on purpose."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import anyio

from agentskit_chat.actions import ConfirmationRecord, TerminalConfirmationStatus
from agentskit_chat.protocol import Confirmation, Decoded, ToolCall, decode_session_snapshot

from ._storage import SessionStorage

if TYPE_CHECKING:
    from ._session import ChatSession

__all__ = [
    "DEFAULT_SETTLE_TIMEOUT_S",
    "PROCESSING",
    "load_confirmation",
    "reconcile_confirmation",
    "wait_settled",
]

#: How long a decision that lost its claim waits, by default, for the winner to finish.
DEFAULT_SETTLE_TIMEOUT_S: Final = 5.0
PROCESSING: Final = frozenset({"approving", "rejecting", "expiring"})
# The first poll comes soon (a winner usually finishes within milliseconds), later ones less
# often, so a stuck record costs a few loads, not hundreds.
_FIRST_POLL_S: Final = 0.002
_LONGEST_POLL_S: Final = 0.1


async def load_confirmation(
    storage: SessionStorage, session_id: str, token: str
) -> Confirmation | None:
    """The stored confirmation ``token`` of ``session_id``; ``None`` when there is none or the
    stored record is not a valid snapshot of that session."""
    stored = await storage.load(session_id)
    if stored is None:
        return None
    result = decode_session_snapshot(stored)
    if not isinstance(result, Decoded) or result.value.session_id != session_id:
        return None
    for confirmation in result.value.confirmations:
        if confirmation.token == token:
            return confirmation
    return None


async def wait_settled(
    storage: SessionStorage, session_id: str, current: Confirmation, timeout_s: float
) -> Confirmation:
    """``current`` once the stored record leaves its processing status, or as it stands when
    ``timeout_s`` seconds have passed."""
    deadline = anyio.current_time() + max(0.0, timeout_s)
    delay = _FIRST_POLL_S
    while current.status in PROCESSING:
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            break
        await anyio.sleep(min(delay, remaining))
        delay = min(delay * 2, _LONGEST_POLL_S)
        loaded = await load_confirmation(storage, session_id, current.token)
        if loaded is None or loaded.tool_call_id != current.tool_call_id:
            break
        current = loaded
    return current


class _NoUpstream:
    """The chat of a confirmation that only reconciles: it never delegates anything."""

    async def propose_tool_call(self, *, id: str, name: str, args: Mapping[str, Any]) -> ToolCall:
        raise AssertionError("a reconciling confirmation never proposes")

    async def approve(self, tool_call_id: str) -> None:
        raise AssertionError("a reconciling confirmation never approves")

    async def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        raise AssertionError("a reconciling confirmation never denies")


async def reconcile_confirmation(
    session: ChatSession, *, token: str, status: TerminalConfirmationStatus
) -> ConfirmationRecord:
    """Settle the session's confirmation ``token``, stuck in a processing status, as ``status``.

    A persistent confirmation whose upstream call failed (or whose worker died) stays in
    ``approving``, ``rejecting`` or ``expiring``: it is never run again by itself, because
    the upstream may have acted. Once the host knows what happened, this moves it to
    ``approved``, ``rejected`` or ``expired`` through the session's compare-and-set save,
    without calling the upstream, and tells the session's ``on_confirmation_change``
    observer. When another client settled it first, that record is returned.

    Args:
        session: The session (resume it first, so it holds the stored record).
        token: The confirmation token.
        status: The terminal status to record.

    Raises:
        ConfigurationError: "Action confirmation token is invalid for this session.", "Action
            confirmation reconciliation status is invalid." (``status`` is not terminal),
            "Action confirmation is not awaiting reconciliation." (the record is pending or
            already terminal).
        SessionConflictError: the stored snapshot changed in another client; resume and try
            again.

    Example:
        >>> session = await resume_chat_session(definition, session_id="s1", storage=storage)
        ... # doctest: +SKIP
        >>> await reconcile_confirmation(session, token="confirm-1", status="rejected")
        ... # doctest: +SKIP
    """
    confirmation = session.create_confirmation(chat=_NoUpstream(), settle_timeout_s=0)
    return await confirmation.reconcile(token, session.session_id, status)
