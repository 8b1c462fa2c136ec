"""A click on a choice list this session showed: ``payload.selection``.

The selection names a choice of a frame this session's assistant showed (found in the stored
messages, newest first); nothing else of the click is trusted. An actionable choice proposes
the action read from that stored frame (see :mod:`._chat_actions`). Otherwise the definition's
``choice_submission`` turns the choice into the turn's input and reserves it; the reservation
is committed only when the turn succeeds, and the user message that used the list is marked
with :data:`CHOICE_METADATA_KEY`, so no worker sharing the chat memory offers it again.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Final, Literal

from agentskit_chat.conversation import ChatDefinition, ChatSession
from agentskit_chat.protocol import ComponentFrame, ComponentSelectEvent, SubmitEvent
from agentskit_chat.protocol._decode import validate_model
from agentskit_chat.runtime import ChatController, ChatMessage

from ._chat_actions import ChoiceAction, action_id, choice_action
from ._chat_failures import INVALID_EVENT, refusal
from ._chat_interactions import find_shown_frame

__all__ = [
    "CHOICE_EXPIRED",
    "CHOICE_METADATA_KEY",
    "ReservedChoice",
    "action_operation",
    "choose",
    "mark_choice",
    "selection",
]

#: Metadata a choice turn's user message carries: the instance id of the choice list it used.
CHOICE_METADATA_KEY: Final = "agentskit.chat.choice"
#: The message of ``CHOICE_UNAVAILABLE``.
CHOICE_EXPIRED: Final = "This deterministic choice expired. Ask the question again."


@dataclass(frozen=True, slots=True)
class ReservedChoice:
    """A reserved choice of this turn: the reservation and the choice list it came from."""

    reservation: Any
    instance_id: str


@dataclass(frozen=True, slots=True)
class _Shown:
    """A choice list as the session's assistant showed it, and the question it answered."""

    frame: ComponentFrame
    question: ChatMessage | None
    used: bool


def selection(candidate: object) -> ComponentSelectEvent | Literal[False] | None:
    """The submission's ``payload.selection``: ``None`` when absent, ``False`` when invalid."""
    payload = candidate.get("payload") if isinstance(candidate, Mapping) else None
    if not isinstance(payload, Mapping) or "selection" not in payload:
        return None
    event = validate_model(ComponentSelectEvent, payload["selection"])
    return False if event is None else event


def _shown_frame(messages: Sequence[ChatMessage], selection: ComponentSelectEvent) -> _Shown | None:
    """The frame ``selection`` refers to, as this session's assistant showed it (newest first)."""
    found = find_shown_frame(messages, selection.instance_id, selection.component_key)
    if found is None:
        return None
    index, frame = found
    before = messages[index - 1] if index > 0 else None
    question = before if before is not None and before.role == "user" else None
    used = any(
        later.role == "user"
        and (later.metadata or {}).get(CHOICE_METADATA_KEY) == selection.instance_id
        for later in messages[index + 1 :]
    )
    return _Shown(frame, question, used)


def _accepts_question(submit: Callable[..., Any]) -> bool:
    """Whether a ``choice_submission`` takes ``question=`` and ``message_id=``."""
    try:
        parameters = inspect.signature(submit).parameters
    except (TypeError, ValueError):
        return False
    return "question" in parameters and "message_id" in parameters


def mark_choice(messages: tuple[ChatMessage, ...], instance_id: str) -> tuple[ChatMessage, ...]:
    """``messages`` with the last user message marked as the one that used ``instance_id``."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user":
            metadata = {**(message.metadata or {}), CHOICE_METADATA_KEY: instance_id}
            marked = replace(message, metadata=metadata)
            return (*messages[:index], marked, *messages[index + 1 :])
    return messages


def choose(
    definition: ChatDefinition,
    session_id: str,
    submission: SubmitEvent,
    candidate: object,
    messages: Sequence[ChatMessage],
) -> tuple[SubmitEvent, ReservedChoice | None, tuple[str, ChoiceAction] | None]:
    """For a click on a shown choice: the submission to run and its choice reservation,
    or the action the choice carries (its proposal id and the action).

    Raises:
        Failure: 400 ``REQUEST_INVALID_EVENT`` for a selection of the wrong shape, 409
            ``CHOICE_UNAVAILABLE`` for a list not shown, used already, or expired.
    """
    chosen_event = selection(candidate)
    if chosen_event is False:
        raise refusal(400, "REQUEST_INVALID_EVENT", INVALID_EVENT)
    if chosen_event is None:
        return submission, None, None
    shown = _shown_frame(messages, chosen_event)
    # An action is read from the frame this session showed, never from the click.
    action = (
        None
        if shown is None
        else choice_action(shown.frame, chosen_event.choice_id, definition.manifest)
    )
    if action is not None:
        proposal = action_id(chosen_event.instance_id, chosen_event.choice_id)
        return submission, None, (proposal, action)
    submit = definition.choice_submission
    if submit is None:
        return submission, None, None
    if shown is None or shown.used:
        raise refusal(409, "CHOICE_UNAVAILABLE", CHOICE_EXPIRED)
    if shown.question is not None and _accepts_question(submit):
        # Another worker may have shown it: the adapter can re-derive it from the question.
        result = submit(
            shown.frame,
            chosen_event.choice_id,
            session_id=session_id,
            question=shown.question.content,
            message_id=shown.question.id,
        )
    else:
        result = submit(shown.frame, chosen_event.choice_id, session_id=session_id)
    if result is None:
        return submission, None, None
    value = getattr(result, "value", None)
    if getattr(result, "unavailable", False) or not isinstance(value, str):
        raise refusal(409, "CHOICE_UNAVAILABLE", CHOICE_EXPIRED)
    chosen = submission.model_copy(
        update={"payload": submission.payload.model_copy(update={"input": value})}
    )
    return chosen, ReservedChoice(result, shown.frame.instance_id), None


def action_operation(
    session: ChatSession, controller: ChatController, action: tuple[str, ChoiceAction]
) -> Callable[[], Awaitable[object]]:
    """The proposal of a clicked actionable choice's action (``action``: its proposal id and
    the action), as the session's confirmation proposes it.

    Raises:
        Failure: 409 ``CHOICE_UNAVAILABLE`` when this click's action was proposed already.
    """
    suffix, chosen = action
    confirmation = session.create_confirmation(chat=controller, create_id=lambda: suffix)
    if confirmation.get_by_tool_call(f"app-{suffix}") is not None:
        raise refusal(409, "CHOICE_UNAVAILABLE", CHOICE_EXPIRED)
    return partial(confirmation.propose, name=chosen.name, input=chosen.input)
