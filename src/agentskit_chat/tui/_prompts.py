"""The components the terminal answers with real widgets: forms and rows of buttons.

A form (its fields), a button group, a confirmation and an approval request are read from
their validated props as data; the app gives the latest unanswered one the keyboard and sends
what the user does as ``payload.interaction`` (``{instanceId, componentKey, event, value?}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentskit_chat.components import (
    ApprovalRequestProps,
    ButtonGroupProps,
    ConfirmationProps,
    FormProps,
)
from agentskit_chat.protocol import ComponentFrame

__all__ = ["ButtonOption", "ButtonPrompt", "FormPrompt", "InteractivePrompt", "prompt_for"]


@dataclass(frozen=True, slots=True)
class FormPrompt:
    """A form the user fills in and submits.

    Attributes:
        message_id: The assistant message that shows it.
        frame: The frame (its ``instance_id`` names the form in an interaction).
        props: Its validated props: fields, labels, options, the submit label.
    """

    message_id: str
    frame: ComponentFrame
    props: FormProps

    @property
    def instance_id(self) -> str:
        """The form's instance id."""
        return self.frame.instance_id

    def interaction(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``payload.interaction`` submitting ``values`` (field id → value)."""
        return _interaction(self.frame, "submit", dict(values))

    def text(self, values: Mapping[str, Any]) -> str:
        """The submission as ``Label: value`` lines (what a server that does not know
        interactions answers instead)."""
        lines = []
        for field in self.props.fields:
            given = values.get(field.id, "")
            shown = ("yes" if given else "no") if field.type == "checkbox" else str(given)
            lines.append(f"{field.label}: {shown}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ButtonOption:
    """One button: its label, the event it emits and the event's value (``None``: none)."""

    label: str
    event: str
    value: str | None = None
    disabled: bool = False


@dataclass(frozen=True, slots=True)
class ButtonPrompt:
    """A row of buttons: a button group, a confirmation or an approval request.

    Attributes:
        message_id: The assistant message that shows it.
        frame: The frame.
        title: What the buttons are about.
        options: The buttons, in order.
    """

    message_id: str
    frame: ComponentFrame
    title: str
    options: tuple[ButtonOption, ...]

    @property
    def instance_id(self) -> str:
        """The component's instance id."""
        return self.frame.instance_id

    def interaction(self, option: ButtonOption) -> dict[str, Any]:
        """``payload.interaction`` pressing ``option``."""
        if option.value is None:
            return _interaction(self.frame, option.event)
        return _interaction(self.frame, option.event, option.value)


#: A component the terminal answers with widgets.
InteractivePrompt = FormPrompt | ButtonPrompt


def _interaction(frame: ComponentFrame, event: str, *value: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "instanceId": frame.instance_id,
        "componentKey": frame.component_key,
        "event": event,
    }
    if value:
        (body["value"],) = value
    return body


def prompt_for(message_id: str, frame: ComponentFrame, props: object) -> InteractivePrompt | None:
    """The prompt of a resolved standard component, or ``None`` for one without widgets."""
    if isinstance(props, FormProps):
        return FormPrompt(message_id, frame, props)
    if isinstance(props, ButtonGroupProps):
        options = tuple(
            ButtonOption(b.label, "select", b.id, b.disabled is True) for b in props.buttons
        )
        return ButtonPrompt(message_id, frame, props.label, options)
    if isinstance(props, ConfirmationProps):
        pair = (
            ButtonOption(props.confirm_label, "confirm"),
            ButtonOption(props.cancel_label, "cancel"),
        )
        return ButtonPrompt(message_id, frame, props.title, pair)
    if isinstance(props, ApprovalRequestProps):
        pair = (
            ButtonOption(props.approve_label, "approve"),
            ButtonOption(props.deny_label, "deny"),
        )
        return ButtonPrompt(message_id, frame, props.title, pair)
    return None
