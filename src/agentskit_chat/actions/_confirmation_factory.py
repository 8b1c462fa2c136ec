"""Building a confirmation: its options checked, its records restored, its ids and clock.

:func:`create_action_confirmation` is how hosts build an :class:`ActionConfirmation`; by default
each proposal's id is a process-wide counter and the wall clock, both in base 36.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from typing import Final

from agentskit_chat.protocol import Confirmation
from agentskit_chat.protocol._json import MAX_SAFE_INTEGER
from agentskit_chat.protocol._text import base36
from agentskit_chat.protocol._types import is_safe_id

from ._confirmation import _INVALID_OPTIONS, MAX_CONFIRMATIONS, ActionConfirmation
from ._records import (
    ClaimStatus,
    ConfirmationChangeObserver,
    ConfirmationChat,
    ConfirmationRecord,
    SettleRecord,
    confirmation_error,
)

__all__ = ["DEFAULT_CONFIRMATION_TTL_MS", "create_action_confirmation"]

#: How long a proposal can be approved, by default (five minutes).
DEFAULT_CONFIRMATION_TTL_MS: Final = 300_000
# Shared by every default id maker in the process, so two confirmations never mint one id.
_COUNTER: Final = itertools.count(1)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _restore(
    records: Iterable[ConfirmationRecord | Confirmation], session_id: str
) -> list[ConfirmationRecord]:
    restored: list[ConfirmationRecord] = []
    for item in records:
        wire = item.to_wire() if isinstance(item, ConfirmationRecord) else item
        if not isinstance(wire, Confirmation):
            raise confirmation_error(_INVALID_OPTIONS)
        restored.append(ConfirmationRecord.from_wire(wire, session_id))
    tokens = {record.token for record in restored}
    calls = {record.tool_call_id for record in restored}
    if len(restored) > MAX_CONFIRMATIONS or not len(tokens) == len(calls) == len(restored):
        raise confirmation_error(_INVALID_OPTIONS)
    return restored


def create_action_confirmation(
    *,
    session_id: str,
    chat: ConfirmationChat,
    ttl_ms: int = DEFAULT_CONFIRMATION_TTL_MS,
    now: Callable[[], int] | None = None,
    create_id: Callable[[], str] | None = None,
    initial_records: Iterable[ConfirmationRecord | Confirmation] = (),
    on_change: ConfirmationChangeObserver | None = None,
    claim_status: ClaimStatus | None = None,
    settle: SettleRecord | None = None,
) -> ActionConfirmation:
    """A confirmation coordinator for the tokens of session ``session_id``.

    Args:
        session_id: The session whose tokens it accepts (a safe identifier).
        chat: The upstream chat, such as a :class:`~agentskit_chat.runtime.ChatController`.
        ttl_ms: How long a proposal can be approved (a positive safe integer).
        now: The clock, in epoch milliseconds; the wall clock by default.
        create_id: Makes each proposal's id; by default a process-wide counter and the
            current time, both in base 36 (``1-mc2l4x0``).
        initial_records: Records to restore (from a session snapshot, say); they become
            records of ``session_id``.
        on_change: Told every record after a proposal, and after each status change when
            there is no ``claim_status``; if it raises, the change is undone.
        claim_status: Claims each status change durably before the upstream is called (see
            :data:`ClaimStatus`); without it statuses live in memory.
        settle: Asked for the latest record when a decision finds one in a processing
            status that this coordinator is not working on (see :data:`SettleRecord`).

    Raises:
        ConfigurationError: "Action confirmation options are invalid." (``session_id`` is not
            a safe identifier, ``ttl_ms`` not a positive safe integer, or the initial records
            are not valid confirmations with unique tokens and tool calls).

    Example:
        >>> from agentskit_chat.actions import create_action_confirmation
        >>> confirmation = create_action_confirmation(
        ...     session_id="support-1", chat=controller, now=lambda: 100
        ... )  # doctest: +SKIP
        >>> record = await confirmation.propose(name="email.send", input={"to": "a@b.c"})
        ... # doctest: +SKIP
        >>> await confirmation.approve(record.token, "support-1")  # doctest: +SKIP
    """
    if not is_safe_id(session_id):
        raise confirmation_error(_INVALID_OPTIONS)
    if type(ttl_ms) is not int or not 1 <= ttl_ms <= MAX_SAFE_INTEGER:
        raise confirmation_error(_INVALID_OPTIONS)
    clock = now or _wall_clock_ms

    def default_id() -> str:
        return f"{base36(next(_COUNTER))}-{base36(clock())}"

    return ActionConfirmation(
        session_id=session_id,
        chat=chat,
        ttl_ms=ttl_ms,
        now=clock,
        create_id=create_id or default_id,
        records=_restore(initial_records, session_id),
        on_change=on_change,
        claim_status=claim_status,
        settle=settle,
    )
