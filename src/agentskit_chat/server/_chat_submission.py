"""One turn submission: read from the body, then routed by what its payload asks for.

The body is read within its bound (413) and must be JSON under the protocol's JSON rule (400
``REQUEST_INVALID_JSON``) and a ``client.turn.submit`` (400 ``REQUEST_INVALID_EVENT``). Its
payload may carry one of ``operation`` (retry, edit, regenerate), ``confirmation`` (a
decision on a waiting call), ``selection`` (a click on a shown choice) or ``interaction`` (a
component's answer); ``operation`` with another of them is refused. Each is checked against
the stored conversation before a controller runs, and becomes the controller call of the turn;
a plain submission sends ``payload.input``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from agentskit_chat.conversation import ChatDefinition, ChatSession
from agentskit_chat.protocol import Decoded, SubmitEvent, decode_turn_event
from agentskit_chat.protocol._decode import NOT_JSON, as_text, parse_candidate
from agentskit_chat.runtime import ChatController, ChatMessage

from ._body import BodyTimedOut, BodyTooLarge, ClientDisconnected, RequestBody
from ._chat_actions import ChoiceAction, ConfirmationDecision, confirmation_decision
from ._chat_approvals import decision_operation
from ._chat_choices import ReservedChoice, action_operation, choose, selection
from ._chat_failures import INVALID_EVENT, aborted, refusal, unavailable
from ._chat_interactions import AcceptedInteraction, accept_interaction
from ._chat_operations import (
    OPERATION_UNAVAILABLE_MESSAGE,
    OperationTarget,
    operation_lineage,
    operation_target,
    target_operation,
    turn_operation,
)
from ._chat_turn import SUBMIT_LINEAGE

__all__ = ["Route", "read_submission", "route_submission"]


async def read_submission(body: RequestBody) -> tuple[SubmitEvent, object]:
    """The submission in ``body``, and the JSON value it was decoded from.

    Raises:
        Failure: 413 for a body past its bound, 400 for a body that is not JSON or not a turn
            submission, 408 or 499 when the deadline passed or the client went away.
    """
    try:
        raw = await body.read()
    except BodyTooLarge:
        raise refusal(413, "REQUEST_TOO_LARGE", "Request body is too large.") from None
    except BodyTimedOut:
        raise aborted("timeout") from None
    except ClientDisconnected:
        raise aborted("cancelled") from None
    try:
        candidate = parse_candidate(as_text(raw)) if raw else NOT_JSON
    except Exception:
        candidate = NOT_JSON
    if candidate is NOT_JSON:
        raise refusal(400, "REQUEST_INVALID_JSON", "Request body is not valid JSON.")
    result = decode_turn_event(candidate)
    if not isinstance(result, Decoded) or not isinstance(result.value, SubmitEvent):
        raise refusal(400, "REQUEST_INVALID_EVENT", INVALID_EVENT)
    return result.value, candidate


@dataclass(frozen=True, slots=True)
class Route:
    """What a submission asks for, checked against the stored conversation.

    Attributes:
        submission: The submission to run (a deterministic choice replaced its input).
        reservation: The choice this turn reserved, if any.
        target: What a retry, edit or regenerate acts on.
        decision: A human's decision on a waiting call.
        action: The proposal id and action of a clicked actionable choice.
        interaction: A component's answer that fits the frame this session showed.
    """

    submission: SubmitEvent
    reservation: ReservedChoice | None
    target: OperationTarget | None
    decision: ConfirmationDecision | None
    action: tuple[str, ChoiceAction] | None
    interaction: AcceptedInteraction | None

    def operation(
        self, session: ChatSession, controller: ChatController
    ) -> tuple[Callable[[], Awaitable[object]] | None, Mapping[str, str]]:
        """The controller call of this turn (``None``: send ``payload.input``) and its lineage.

        Raises:
            Failure: 409 when the decided call or the proposed action is no longer available.
        """
        if self.target is not None:
            text = self.submission.payload.input
            lineage = operation_lineage(session, self.target)
            return target_operation(self.target, controller, text), lineage
        if self.decision is not None:
            operation = decision_operation(session, controller, self.decision)
            if operation is None:
                raise unavailable()
            return operation, SUBMIT_LINEAGE
        if self.action is not None:
            return action_operation(session, controller, self.action), SUBMIT_LINEAGE
        if self.interaction is not None:
            interaction = self.interaction
            send = partial(controller.send, interaction.text, metadata=interaction.metadata)
            return send, SUBMIT_LINEAGE
        return None, SUBMIT_LINEAGE


def route_submission(
    definition: ChatDefinition,
    session_id: str,
    submission: SubmitEvent,
    candidate: object,
    messages: Sequence[ChatMessage],
) -> Route:
    """Check what ``submission`` (decoded from ``candidate``) asks for against ``messages``.

    Raises:
        Failure: 400 for payload keys that are invalid or do not go together, 409 when there
            is nothing to retry, edit or regenerate, or the choice is no longer available.
        ChatHandlerError: an interaction that does not fit the frame this session showed.
    """
    decision = confirmation_decision(candidate)
    requested = turn_operation(candidate)
    mixed = requested is not None and (decision is not None or selection(candidate) is not None)
    if decision is False or requested is False or mixed:
        raise refusal(400, "REQUEST_INVALID_EVENT", INVALID_EVENT)
    # A component interaction checked against the frame this session showed.
    interaction = accept_interaction(candidate, messages, definition.manifest)
    action: tuple[str, ChoiceAction] | None = None
    reservation: ReservedChoice | None = None
    target = None
    if requested is not None:
        target = operation_target(requested, messages)
        if target is None:
            raise refusal(409, "OPERATION_UNAVAILABLE", OPERATION_UNAVAILABLE_MESSAGE)
    elif decision is None:
        submission, reservation, action = choose(
            definition, session_id, submission, candidate, messages
        )
    return Route(submission, reservation, target, decision, action, interaction)
