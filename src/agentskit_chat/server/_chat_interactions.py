"""Component interactions over the chat handler: ``payload.interaction``.

A form submitted, a button of a button group clicked, a confirmation confirmed or an approval
request denied rides on ``client.turn.submit`` as the optional payload key ``interaction``,
``{instanceId, componentKey, event, value?}`` (the component interaction event of the protocol
without its envelope fields; a server that does not know the key runs ``payload.input`` as
text). It is accepted only when it fits the frame **this session's assistant showed** (found in
the session's stored messages, newest first) and that frame's component in the chat's
manifest: the event is one the component declares, and the value passes the component's own
rule (a form's required fields, field types and option ids; one of a button group's buttons).
Each frame instance answers once: the user message that used it carries the event in its
metadata, so every worker sharing the chat memory refuses a second use.

The accepted interaction becomes the turn's user message: a short text built from the stored
props' labels (``Submitted: Role = Engineering, Goal = Ship it``), with the typed event in its
metadata (see :func:`~agentskit_chat.conversation.interaction_metadata`). The definition's
``on_interaction`` hook answers it; without one the chat answers the text.

Refusals, all before anything runs (the lease is given back, the turn id stays unused):

- ``400 REQUEST_INVALID_EVENT``: the key is not an object of that shape, or comes with
  ``selection``, ``confirmation`` or ``operation``;
- ``409 INTERACTION_UNAVAILABLE``: no frame of this session has that instance id and key, the
  stored frame does not resolve against the manifest, or the instance was already used;
- ``400 INTERACTION_INVALID``: the component has no such event, or the value does not fit. The
  message is fixed and never repeats the value; for a form it names the offending field by its
  label, read from the stored props.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from agentskit_chat.components import (
    CHOICE_LIST_COMPONENT_KEY,
    STANDARD_COMPONENT_KEYS,
    ApprovalRequestProps,
    ButtonGroupProps,
    ComponentManifest,
    ConfirmationProps,
    ErrorNoticeProps,
    FileAttachmentProps,
    FormField,
    FormProps,
    LinkCardProps,
    ResolvedComponent,
    SourceListProps,
    create_component_interaction,
    resolve_component_frame,
)
from agentskit_chat.components._interaction import ABSENT, _field_value_ok
from agentskit_chat.conversation import interaction_metadata
from agentskit_chat.conversation._interactions import interaction_instance
from agentskit_chat.errors import ChatHandlerError, ConfigurationError
from agentskit_chat.protocol import (
    COMPONENT_PROTOCOL,
    ComponentFrame,
    ComponentInteractEvent,
    ComponentPart,
    decode_assistant_content,
)
from agentskit_chat.protocol._decode import validate_model
from agentskit_chat.protocol._json import js_number
from agentskit_chat.protocol._types import thaw
from agentskit_chat.runtime import ChatMessage

__all__ = [
    "INTERACTION_INVALID_MESSAGE",
    "INTERACTION_UNAVAILABLE_MESSAGE",
    "AcceptedInteraction",
    "accept_interaction",
    "find_shown_frame",
    "interaction_request",
]

#: The message of ``INTERACTION_UNAVAILABLE``.
INTERACTION_UNAVAILABLE_MESSAGE: Final = "This component is not waiting for an answer."
#: The message of ``INTERACTION_INVALID`` when no form field can be named.
INTERACTION_INVALID_MESSAGE: Final = "This answer does not fit the component."
_NO_SUCH_EVENT: Final = "This component does not offer that action."
_FORM_KEYS: Final = "The submitted values do not match the form's fields."
_INVALID_EVENT: Final = "Request body must be a valid turn submission."
_OTHER_KEYS: Final = ("selection", "confirmation", "operation")
# The user-message marker of a choice list's click (the handler's ``CHOICE_METADATA_KEY``).
_CHOICE_KEY: Final = "agentskit.chat.choice"


@dataclass(frozen=True, slots=True)
class AcceptedInteraction:
    """An interaction that fits the frame this session showed.

    Attributes:
        event: The typed event (validated against the component).
        text: The user message's content, built from the stored props' labels.
    """

    event: ComponentInteractEvent
    text: str

    @property
    def metadata(self) -> dict[str, Any]:
        """The user message's metadata: the event, and the text it was sent as."""
        return interaction_metadata(self.event, self.text)


def interaction_request(candidate: object) -> ComponentInteractEvent | Literal[False] | None:
    """The submission's ``payload.interaction`` as a component interact event: ``None`` when
    absent, ``False`` when it is not ``{instanceId, componentKey, event, value?}`` (safe id,
    component key, event name, bounded JSON; other keys are dropped). Never raises."""
    payload = candidate.get("payload") if isinstance(candidate, Mapping) else None
    if not isinstance(payload, Mapping) or "interaction" not in payload:
        return None
    given = payload["interaction"]
    if not isinstance(given, Mapping):
        return False
    wire: dict[str, Any] = {
        "protocol": COMPONENT_PROTOCOL,
        "version": 1,
        "type": "interact",
        "componentKey": given.get("componentKey"),
        "instanceId": given.get("instanceId"),
        "event": given.get("event"),
    }
    if "value" in given:
        wire["value"] = given["value"]
    event = validate_model(ComponentInteractEvent, wire)
    return False if event is None else event


def _unavailable() -> ChatHandlerError:
    return ChatHandlerError(409, "INTERACTION_UNAVAILABLE", INTERACTION_UNAVAILABLE_MESSAGE)


def _invalid(message: str = INTERACTION_INVALID_MESSAGE) -> ChatHandlerError:
    return ChatHandlerError(400, "INTERACTION_INVALID", message)


def _used(later: Sequence[ChatMessage], instance_id: str) -> bool:
    return any(
        message.role == "user"
        and (
            interaction_instance(message) == instance_id
            or (message.metadata or {}).get(_CHOICE_KEY) == instance_id
        )
        for message in later
    )


def find_shown_frame(
    messages: Sequence[ChatMessage], instance_id: str, component_key: str
) -> tuple[int, ComponentFrame] | None:
    """The newest frame with ``instance_id`` and ``component_key`` that this session's
    assistant showed, with the index of its message; ``None`` when it showed none."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role != "assistant":
            continue
        decoded = decode_assistant_content(message.content)
        if not decoded.ok:
            continue
        for part in decoded.parts:
            if (
                isinstance(part, ComponentPart)
                and part.frame.instance_id == instance_id
                and part.frame.component_key == component_key
            ):
                return index, part.frame
    return None


def _shown_frame(messages: Sequence[ChatMessage], wanted: ComponentInteractEvent) -> ComponentFrame:
    """The frame ``wanted`` names, as this session's assistant showed it (newest first).

    Raises:
        ChatHandlerError: 409 ``INTERACTION_UNAVAILABLE`` when none has its instance id and
            key, or the instance was already used.
    """
    found = find_shown_frame(messages, wanted.instance_id, wanted.component_key)
    if found is None or _used(messages[found[0] + 1 :], wanted.instance_id):
        raise _unavailable()
    return found[1]


def _quoted(field: FormField) -> str:
    return f'"{field.label}"'


def _form_problem(props: FormProps, value: object) -> str | None:
    """What is wrong with a form's submitted values (a fixed sentence naming the field by
    its label), or ``None``."""
    if not isinstance(value, Mapping):
        return _FORM_KEYS
    ids = {field.id for field in props.fields}
    if any(key not in ids for key in value):
        return _FORM_KEYS
    for field in props.fields:
        given = value.get(field.id, ABSENT)
        if given is ABSENT or (type(given) is str and given == ""):
            if field.required is True:
                return f"The field {_quoted(field)} is required."
            continue
        if not _field_value_ok(field, given):
            return f"The field {_quoted(field)} has a value it does not accept."
    return None


def accept_interaction(
    candidate: object, messages: Sequence[ChatMessage], manifest: ComponentManifest
) -> AcceptedInteraction | None:
    """The submission's interaction checked against this session's ``messages``, or ``None``
    when the submission carries none.

    Raises:
        ChatHandlerError: 400 ``REQUEST_INVALID_EVENT``, 409 ``INTERACTION_UNAVAILABLE`` or
            400 ``INTERACTION_INVALID`` (see the module's docstring).
    """
    requested = interaction_request(candidate)
    if requested is None:
        return None
    payload = candidate.get("payload") if isinstance(candidate, Mapping) else None
    if (
        requested is False
        or not isinstance(payload, Mapping)
        or any(k in payload for k in _OTHER_KEYS)
    ):
        raise ChatHandlerError(400, "REQUEST_INVALID_EVENT", _INVALID_EVENT)
    resolution = resolve_component_frame(_shown_frame(messages, requested), manifest)
    if not isinstance(resolution, ResolvedComponent):
        raise _unavailable()  # a frame the chat cannot render can trigger nothing
    definition = resolution.definition
    if definition.key == CHOICE_LIST_COMPONENT_KEY or definition.event(requested.event) is None:
        raise _invalid(_NO_SUCH_EVENT)
    value = thaw(requested.value) if requested.has_value else ABSENT
    standard = definition.key in STANDARD_COMPONENT_KEYS
    if standard and isinstance(resolution.props, FormProps):
        problem = _form_problem(resolution.props, value)
        if problem is not None:
            raise _invalid(problem)
    try:
        event = create_component_interaction(resolution.frame, manifest, requested.event, value)
    except ConfigurationError:
        raise _invalid() from None
    text = describe(resolution, event) if standard else _custom_text(resolution, event)
    return AcceptedInteraction(event, text)


def _custom_text(resolution: ResolvedComponent, event: ComponentInteractEvent) -> str:
    return f"{event.event}: {resolution.fallback_text}"


def _shown_value(field: FormField, given: object) -> str:
    if field.type == "checkbox":
        return "yes" if given is True else "no"
    if field.type == "select":
        options = field.options or ()
        return next((option.label for option in options if option.id == given), str(given))
    if type(given) is int or type(given) is float:
        return js_number(given)
    return str(given)


def _form_text(props: FormProps, value: object) -> str:
    values: Mapping[Any, Any] = value if isinstance(value, Mapping) else {}
    pairs = [
        f"{field.label} = {_shown_value(field, values[field.id])}"
        for field in props.fields
        if field.id in values and values[field.id] != ""
    ]
    return f"Submitted: {', '.join(pairs)}" if pairs else "Submitted the form."


def describe(resolution: ResolvedComponent, event: ComponentInteractEvent) -> str:
    """How a standard component's accepted interaction reads as a user message: the label the
    user acted on, from the stored props (a form: ``Submitted: <label> = <value>, ...``)."""
    props = resolution.props
    value = thaw(event.value) if event.has_value else ABSENT
    if isinstance(props, FormProps):
        return _form_text(props, value)
    if isinstance(props, ButtonGroupProps):
        return next(button.label for button in props.buttons if button.id == value)
    if isinstance(props, ConfirmationProps):
        return props.confirm_label if event.event == "confirm" else props.cancel_label
    if isinstance(props, ApprovalRequestProps):
        return props.approve_label if event.event == "approve" else props.deny_label
    if isinstance(props, ErrorNoticeProps) and props.retry_label is not None:
        return props.retry_label
    if isinstance(props, SourceListProps):
        return "Open: " + next(source.title for source in props.sources if source.id == value)
    if isinstance(props, LinkCardProps):
        return f"Open: {props.title}"
    if isinstance(props, FileAttachmentProps):
        return f"Open: {props.name}"
    return _custom_text(resolution, event)
