"""Confirmations of the calls a model proposes, so that a human can decide them over HTTP.

A model ends its turn with calls that wait for a human when it calls a chat tool with
``requires_confirmation`` or a pydantic-ai agent tool that needs approval. Before the turn's
conversation is saved, :func:`record_waiting_calls` stores one confirmation record per such
call in the session snapshot (the same session-bound records an action proposed by a click
gets), so a later submission with ``payload.confirmation`` finds it on any worker.

:func:`decision_operation` turns such a submission into the turn's operation. The call must be
waiting in the stored conversation and its record ``pending``; the record's status is then
claimed by compare-and-set before the controller approves (runs the call, the chat's authorizer
deciding in phase ``execute``, then lets the model continue) or denies it, so the call runs at
most once whichever worker decides it. A decision that this request's controller did not carry
out (another client claimed the record first) is reported as resolved elsewhere, and an
approval the authorizer refused at execution as forbidden.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final

from agentskit_chat.actions import MAX_CONFIRMATIONS, ActionConfirmation, ConfirmationRecord
from agentskit_chat.conversation import ChatSession
from agentskit_chat.errors import (
    ConfigurationError,
    ConfirmationLimitError,
    ConfirmationResolvedElsewhereError,
    ToolError,
)
from agentskit_chat.protocol import ToolCall
from agentskit_chat.runtime import ChatController, ChatMessage
from agentskit_chat.runtime._controller_tools import DENIED_PREFIX

from ._chat_actions import ConfirmationDecision

__all__ = ["decision_operation", "record_waiting_calls", "waiting_calls"]

# The statuses of a decided record (one that may make room for a new one).
_DECIDED: Final = frozenset({"approved", "rejected", "expired"})
# The message of the ToolError that becomes ACTION_FORBIDDEN (the client never sees it).
_REFUSED_AT_EXECUTION: Final = "The approved call was refused when it was to run."


def waiting_calls(messages: Sequence[ChatMessage]) -> tuple[ToolCall, ...]:
    """The calls ``messages`` leave waiting for a human, oldest first.

    A call id counts as its newest message carries it (as the controller reads it).
    """
    seen: set[str] = set()
    waiting: list[ToolCall] = []
    for message in reversed(messages):
        for call in reversed(message.tool_calls or ()):
            if call.id in seen:
                continue
            seen.add(call.id)
            if call.status == "requires_confirmation":
                waiting.append(call)
    return tuple(reversed(waiting))


def _record_id(tool_call_id: str) -> str:
    """The proposal id of one call: its token is ``confirm-call-<digest>``, the same on every
    worker, so one call never gets two records."""
    digest = hashlib.sha256(tool_call_id.encode()).hexdigest()
    return f"call-{digest[:32]}"


class _Proposed:
    """The upstream of a confirmation that records a call the model already proposed.

    The call is in the conversation already, so proposing returns it as it is, with the
    model's own id rather than the ``app-`` id a proposal asks for: the record is bound to that
    call. This upstream never decides anything (the controller does, when a human decides).
    """

    def __init__(self, call: ToolCall) -> None:
        self._call = call

    async def propose_tool_call(self, *, id: str, name: str, args: Mapping[str, Any]) -> ToolCall:
        return self._call

    async def approve(self, tool_call_id: str) -> None:
        raise AssertionError("a recording confirmation never approves")

    async def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        raise AssertionError("a recording confirmation never denies")


async def record_waiting_calls(session: ChatSession, messages: Sequence[ChatMessage]) -> int:
    """Store a ``pending`` confirmation record for every call ``messages`` leave waiting for a
    human that has none yet; how many were stored.

    Each record is saved with the session (compare-and-set) and expires like any proposal,
    ``DEFAULT_CONFIRMATION_TTL_MS`` after now; the oldest decided records make room when the
    session holds ``MAX_CONFIRMATIONS``. A call whose id or input do not fit a record is left
    without one: a decision on it is then refused as unavailable.

    Raises:
        ConfirmationLimitError: the undecided records and the new ones would be more than
            ``MAX_CONFIRMATIONS`` (nothing was recorded).
        SessionConflictError: the stored session changed in another client (this turn no
            longer holds it).
        StorageError: the store failed.
    """
    records = session.confirmations
    known = {record.tool_call_id for record in records}
    new = [call for call in waiting_calls(messages) if call.id not in known]
    undecided = sum(1 for record in records if record.status not in _DECIDED)
    if new and undecided + len(new) > MAX_CONFIRMATIONS:
        # All or none: a call recorded now would wait with no way to decide its neighbours.
        raise ConfirmationLimitError()
    stored = 0
    for call in new:
        confirmation = session.create_confirmation(
            chat=_Proposed(call), create_id=partial(_record_id, call.id)
        )
        try:
            await confirmation.propose(name=call.name, input=call.args)
        except ConfirmationLimitError:
            raise
        except ConfigurationError:
            continue
        known.add(call.id)
        stored += 1
    return stored


def decision_operation(
    session: ChatSession, controller: ChatController, decision: ConfirmationDecision
) -> Callable[[], Awaitable[ConfirmationRecord]] | None:
    """The operation that carries out ``decision`` in this turn, or ``None`` when its call is
    not waiting for one (unknown to this session, already decided, or without a record).

    The operation raises :class:`~agentskit_chat.errors.ConfirmationResolvedElsewhereError`
    when another client decided the call first, and ``ToolError`` ``AK_TOOL_FORBIDDEN`` when an
    approved call was refused by the chat's authorizer at execution (it never ran; the model
    was told).
    """
    call_id = decision.tool_call_id
    if all(call.id != call_id for call in waiting_calls(controller.state.messages)):
        return None
    confirmation = session.create_confirmation(chat=controller)
    record = confirmation.get_by_tool_call(call_id)
    if record is None or record.status != "pending":
        return None
    return partial(_decide, confirmation, controller, record.token, decision)


async def _decide(
    confirmation: ActionConfirmation,
    controller: ChatController,
    token: str,
    decision: ConfirmationDecision,
) -> ConfirmationRecord:
    session_id = confirmation.session_id
    if decision.decision == "approve":
        record = await confirmation.approve(token, session_id)
    else:
        record = await confirmation.reject(token, session_id, decision.reason)
    outcome = next(
        (
            call
            for message in reversed(controller.state.messages)
            for call in message.tool_calls or ()
            if call.id == decision.tool_call_id
        ),
        None,
    )
    if outcome is None or outcome.status == "requires_confirmation":
        # This controller never decided the call: another client's claim won.
        raise ConfirmationResolvedElsewhereError()
    denied = outcome.status == "error" and (outcome.error or "").startswith(DENIED_PREFIX)
    if decision.decision == "approve" and record.status == "approved" and denied:
        raise ToolError("AK_TOOL_FORBIDDEN", _REFUSED_AT_EXECUTION)
    return record
