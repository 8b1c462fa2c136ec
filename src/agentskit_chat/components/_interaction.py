"""Whether an interaction a standard component emitted fits that component's props.

Untrusted input all the way down: the validator answers ``True`` or ``False`` and never raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from agentskit_chat.protocol._component import _ABSENT
from agentskit_chat.protocol._decode import validate_model
from agentskit_chat.protocol._text import js_trim

from ._js_number import js_to_number
from ._standard_props import (
    ButtonGroupProps,
    ErrorNoticeProps,
    FileAttachmentProps,
    FormField,
    FormProps,
    LinkCardProps,
    SourceListProps,
)

__all__ = ["ABSENT", "validate_standard_component_interaction"]

#: The "no value" marker: an event without a ``value`` key (``None`` is JSON ``null``).
ABSENT: Final[Any] = _ABSENT

M = TypeVar("M", bound=BaseModel)


def _props(model: type[M], props: object) -> M | None:
    if isinstance(props, model):
        return props
    return validate_model(model, props)


def _button_group(props: object, event: str, value: object) -> bool:
    model = _props(ButtonGroupProps, props)
    if model is None or event != "select":
        return False
    return any(b.id == value and b.disabled is not True for b in model.buttons)


def _is_finite_number(value: object) -> bool:
    if type(value) is int or type(value) is float:
        try:
            return math.isfinite(float(value))
        except OverflowError:
            return False
    return False


def _field_value_ok(field: FormField, value: object) -> bool:
    if field.type == "checkbox":
        return type(value) is bool
    if field.type == "number":
        if type(value) is str:
            number = js_to_number(value) if js_trim(value) else None
            return number is not None and math.isfinite(number)
        return _is_finite_number(value)
    if field.type == "select":
        options = field.options or ()
        return type(value) is str and any(option.id == value for option in options)
    return type(value) is str


def _form(props: object, event: str, value: object) -> bool:
    model = _props(FormProps, props)
    if model is None or event != "submit":
        return False
    if type(value) is not dict and type(value) is not MappingProxyType:
        return False
    values: Mapping[Any, Any] = value
    ids = {field.id for field in model.fields}
    if any(key not in ids for key in values):
        return False
    for field in model.fields:
        given = values.get(field.id, ABSENT)
        if given is ABSENT or (type(given) is str and given == ""):
            if field.required is True:
                return False
            continue
        if not _field_value_ok(field, given):
            return False
    return True


def _no_value(*events: str) -> Callable[[object, str, object], bool]:
    def check(props: object, event: str, value: object) -> bool:
        return event in events and value is ABSENT

    return check


def _source_list(props: object, event: str, value: object) -> bool:
    model = _props(SourceListProps, props)
    if model is None or event != "open":
        return False
    return any(s.id == value and s.url is not None for s in model.sources)


def _link_card(props: object, event: str, value: object) -> bool:
    model = _props(LinkCardProps, props)
    return model is not None and event == "open" and type(value) is str and value == model.href


def _error_notice(props: object, event: str, value: object) -> bool:
    model = _props(ErrorNoticeProps, props)
    return (
        model is not None and event == "retry" and model.retry_label is not None and value is ABSENT
    )


def _file_attachment(props: object, event: str, value: object) -> bool:
    model = _props(FileAttachmentProps, props)
    if model is None or event != "open" or model.url is None:
        return False
    return type(value) is str and value == model.url


# Confirmation and approval requests accept their events without looking at the props: a frame
# reaches this check only after its props resolved.
_RULES: Final[dict[str, Callable[[object, str, object], bool]]] = {
    "button-group": _button_group,
    "form": _form,
    "confirmation": _no_value("confirm", "cancel"),
    "source-list": _source_list,
    "link-card": _link_card,
    "error-notice": _error_notice,
    "approval-request": _no_value("approve", "deny"),
    "file-attachment": _file_attachment,
}


def validate_standard_component_interaction(
    key: str, props: object, event: str, value: object = ABSENT
) -> bool:
    """Whether ``event`` with ``value`` is an interaction the standard component ``key`` allows.

    ``props`` is the component's props, as wire data or as its validated props model; where
    the rule needs them they are validated again, and invalid props mean ``False``.

    - ``button-group``: ``select`` with the id of a button that is not disabled.
    - ``form``: ``submit`` with an object whose keys are all field ids; a missing or empty
      value only for a field that is not required; a checkbox takes a boolean, a number a
      finite number or non-blank text JavaScript reads as a finite number (``" 0x10 "``,
      ``"1e3"``, not ``"1_000"``), a select one of its option ids, text and email any string.
    - ``confirmation``: ``confirm`` or ``cancel``; ``approval-request``: ``approve`` or ``deny``;
      both without a value.
    - ``source-list``: ``open`` with the id of a source that has a ``url``.
    - ``link-card``: ``open`` with exactly its ``href``.
    - ``error-notice``: ``retry`` without a value, only when it has a ``retryLabel``.
    - ``file-attachment``: ``open`` with exactly its ``url``, when it has one.
    - ``choice-list`` (it selects instead), ``progress``, ``tool-call``, ``table`` and any other
      key: never.

    Args:
        key: The component key.
        props: The component's props.
        event: The event name.
        value: The event's value. Leave it out for an event without one; ``None`` is JSON
            ``null``, which is a value.

    Returns:
        Whether the interaction is allowed. Never raises.

    >>> props = {"label": "Actions", "buttons": [{"id": "save", "label": "Save"}]}
    >>> validate_standard_component_interaction("button-group", props, "select", "save")
    True
    >>> validate_standard_component_interaction("button-group", props, "submit", {})
    False
    """
    try:
        if type(key) is not str or type(event) is not str:
            return False
        rule = _RULES.get(key)
        return rule is not None and rule(props, event, value)
    except Exception:
        return False
