"""Typed actions in the chat turn handler: a click on an actionable choice proposes the action,
and a submission carrying a decision approves or rejects it.

Both ride on ``client.turn.submit`` as optional payload keys the TypeScript reference drops
(so the same client works with both servers): ``selection`` (a component ``select`` event, as
for deterministic choices) and ``confirmation`` (``{toolCallId, decision, reason?}``). The
action itself never comes from the client: a selection names a choice of a frame this
session's assistant showed, and the action is read from that stored frame; a decision names a
tool call whose confirmation record the session holds. Whether the action may run is decided
by the chat's authorizer (a capability policy fed by the host's trusted context), when it is
proposed and again when it executes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import PlainValidator

from agentskit_chat.components import (
    ComponentManifest,
    ResolvedComponent,
    resolve_choice_action,
    resolve_choice_list_frame,
)
from agentskit_chat.protocol import ComponentFrame
from agentskit_chat.protocol._decode import validate_model
from agentskit_chat.protocol._types import SafeId, WireModel, one_of, text, thaw

__all__ = [
    "CONFIRMATION_LIMIT_MESSAGE",
    "CONFIRMATION_UNAVAILABLE_MESSAGE",
    "ChoiceAction",
    "ConfirmationDecision",
    "action_id",
    "choice_action",
    "confirmation_decision",
]

#: The message of ``CONFIRMATION_UNAVAILABLE``: the call is not (or no longer) waiting.
CONFIRMATION_UNAVAILABLE_MESSAGE: Final = "This action is not waiting for a confirmation."
#: The message of ``CONFIRMATION_LIMIT_REACHED``: 1,000 calls wait for a decision already.
CONFIRMATION_LIMIT_MESSAGE: Final = (
    "Too many actions in this conversation wait for a decision; decide them or start a new"
    " conversation."
)

_Decision = Annotated[Literal["approve", "reject"], PlainValidator(one_of("approve", "reject"))]


class ConfirmationDecision(WireModel):
    """``payload.confirmation`` of a turn submission: a human's decision on a proposed call.

    Attributes:
        tool_call_id: The call the decision is about (the assistant message carries it).
        decision: ``approve`` or ``reject``.
        reason: Why it was rejected, shown to the model (1..256 UTF-16 units), if given.
    """

    tool_call_id: SafeId
    decision: _Decision
    reason: Annotated[str, PlainValidator(text(1, 256))] | None = None


def confirmation_decision(candidate: object) -> ConfirmationDecision | Literal[False] | None:
    """The submission's ``payload.confirmation``: ``None`` when absent, ``False`` when invalid."""
    payload = candidate.get("payload") if isinstance(candidate, Mapping) else None
    if not isinstance(payload, Mapping) or "confirmation" not in payload:
        return None
    decision = validate_model(ConfirmationDecision, payload["confirmation"])
    return False if decision is None else decision


@dataclass(frozen=True, slots=True)
class ChoiceAction:
    """The action a shown choice carries: its tool name and its (validated) input."""

    name: str
    input: Mapping[str, Any]


def choice_action(
    frame: ComponentFrame, choice_id: str, manifest: ComponentManifest
) -> ChoiceAction | None:
    """The action of choice ``choice_id`` in a shown choice list, or ``None`` when it has none.

    Only a choice list the chat's manifest resolves (registered, props valid) can carry an
    action: nothing else a frame says can trigger a side effect.
    """
    if not isinstance(resolve_choice_list_frame(frame, manifest), ResolvedComponent):
        return None
    try:
        action = resolve_choice_action(frame, choice_id)
    except Exception:
        return None
    if action is None:
        return None
    return ChoiceAction(action.name, thaw(action.input))


def action_id(instance_id: str, choice_id: str) -> str:
    """The proposal id of one choice of one list: the same click always proposes the same
    call, so a list's action is proposed at most once."""
    digest = hashlib.sha256(f"{instance_id}\x00{choice_id}".encode()).hexdigest()
    return f"choice-{digest[:32]}"
