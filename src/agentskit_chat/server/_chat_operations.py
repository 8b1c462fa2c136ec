"""Retry, edit and regenerate in the chat turn handler.

They ride on ``client.turn.submit`` as the optional ``payload.operation`` key, which the
TypeScript reference drops (so a client that sends it still works there, as a plain submit):

- ``{"kind": "retry"}``: answer the last user message again (the last two messages must be the
  user's question and the assistant's answer);
- ``{"kind": "regenerate", "messageId"?: id}``: answer again in place of an assistant message
  (by default the last one);
- ``{"kind": "edit", "messageId": id}``: replace a user message's text with ``payload.input``
  and answer it again; every later message is dropped.

The target is checked against the stored messages before a controller runs, so an operation
with nothing to act on is refused (409) instead of streaming a turn that does nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Final, Literal

from pydantic import PlainValidator

from agentskit_chat.conversation import ChatSession
from agentskit_chat.protocol._decode import validate_model
from agentskit_chat.protocol._types import SafeId, WireModel, is_safe_id, one_of
from agentskit_chat.runtime import ChatController, ChatMessage

__all__ = [
    "OPERATION_UNAVAILABLE_MESSAGE",
    "OperationTarget",
    "TurnOperation",
    "operation_lineage",
    "operation_target",
    "target_operation",
    "turn_operation",
]

#: The message of ``OPERATION_UNAVAILABLE``: the conversation has no message it can act on.
OPERATION_UNAVAILABLE_MESSAGE: Final = "There is no message to retry, edit or regenerate."

OperationKind = Literal["retry", "regenerate", "edit"]
_Kind = Annotated[OperationKind, PlainValidator(one_of("retry", "regenerate", "edit"))]


class TurnOperation(WireModel):
    """``payload.operation`` of a turn submission.

    Attributes:
        kind: ``retry``, ``regenerate`` or ``edit``.
        message_id: The message acted on: required for ``edit`` (a user message), optional for
            ``regenerate`` (an assistant message; by default the last one), ignored by ``retry``.
    """

    kind: _Kind
    message_id: SafeId | None = None


def turn_operation(candidate: object) -> TurnOperation | Literal[False] | None:
    """The submission's ``payload.operation``: ``None`` when absent, ``False`` when invalid."""
    payload = candidate.get("payload") if isinstance(candidate, Mapping) else None
    if not isinstance(payload, Mapping) or "operation" not in payload:
        return None
    operation = validate_model(TurnOperation, payload["operation"])
    if operation is None or (operation.kind == "edit" and operation.message_id is None):
        return False
    return operation


@dataclass(frozen=True, slots=True)
class OperationTarget:
    """What an operation acts on.

    Attributes:
        kind: The operation.
        message_id: The message the controller is told about (``edit``: the user message;
            ``regenerate``: the assistant message; ``retry``: none).
        source_message_id: The message the new answer derives from, for the snapshot's lineage.
    """

    kind: OperationKind
    message_id: str | None
    source_message_id: str


def operation_target(
    operation: TurnOperation, messages: Sequence[ChatMessage]
) -> OperationTarget | None:
    """The target of ``operation`` in the stored ``messages``, or ``None`` when it has none.

    The rules are the controller's own (so a target found here is one it acts on).
    """
    if operation.kind == "retry":
        if len(messages) >= 2 and messages[-2].role == "user" and messages[-1].role == "assistant":
            return OperationTarget("retry", None, messages[-2].id)
        return None
    if operation.kind == "edit":
        for message in messages:
            if message.id == operation.message_id and message.role == "user":
                return OperationTarget("edit", message.id, message.id)
        return None
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if operation.message_id is None or message.id == operation.message_id:
            if message.role != "assistant":
                return None
            if not any(earlier.role == "user" for earlier in messages[:index]):
                return None
            return OperationTarget("regenerate", message.id, message.id)
    return None


def target_operation(
    target: OperationTarget, controller: ChatController, text: str
) -> Callable[[], Awaitable[object]]:
    """The controller call that carries out ``target`` (``text``: an edit's new input)."""
    if target.kind == "retry":
        return controller.retry
    if target.kind == "regenerate":
        return partial(controller.regenerate, target.message_id)
    assert target.message_id is not None
    return partial(controller.edit, target.message_id, text)


def operation_lineage(session: ChatSession, target: OperationTarget) -> Mapping[str, str]:
    """``{operation, parentTurnId, sourceMessageId}``: the parent is the session's last
    finished turn. Without one (or with a message id that is not a safe id) no lineage can be
    told, and the snapshot carries none."""
    finished = session.terminal_turns
    if not finished or not is_safe_id(target.source_message_id):
        return {}
    return {
        "operation": target.kind,
        "parentTurnId": finished[-1].turn_id,
        "sourceMessageId": target.source_message_id,
    }
