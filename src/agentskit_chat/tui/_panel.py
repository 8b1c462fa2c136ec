"""The widgets of the component that owns the keyboard.

A choice list or a tool call waiting for a decision is a :class:`ComponentPicker` (a list of
options). A form becomes one widget per field (an ``Input`` for text, e-mail and numbers, a
``Select`` for a select field, a ``Checkbox``) and a submit ``Button``; a button group, a
confirmation or an approval request becomes a row of ``Button``: a :class:`ComponentPanel`.
Tab moves between them, Enter in a field or on the submit button submits. What the user did
is posted as :class:`ComponentPanel.Answered` for the app to send; the server checks it (one
rule for every interface), so nothing here refuses a value.

Every word on these widgets comes from the server (labels, titles, choices), so each is plain
:class:`~textual.content.Content`, never Textual markup: a label ``[@click=app.quit]Quit[/]``
is shown as those characters and does nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, Literal

from rich.text import Text
from textual import events, on
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, Label, OptionList, Select
from textual.widgets.option_list import Option

from agentskit_chat.components import FormField

from ._prompts import ButtonPrompt, FormPrompt, InteractivePrompt
from ._render import ChoicePrompt, PendingConfirmation

__all__ = ["ComponentPanel", "ComponentPicker", "plain"]

_SUBMIT: Final = "submit"


def _number(text: str) -> int | float | str:
    """A number field's text as a number, or the text itself when it is not a finite one (the
    server then says which field is wrong)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def plain(text: str) -> Content:
    """Server text as it is: never parsed as Textual markup."""
    return Content(text)


def _field_widgets(field: FormField, draft: Mapping[str, Any]) -> list[Widget]:
    given = draft.get(field.id)
    label = plain(f"{field.label}{' *' if field.required else ''}")
    if field.type == "checkbox":
        return [Checkbox(label, value=given is True, name=field.id)]
    widgets: list[Widget] = [Label(label, classes="field-label")]
    if field.type == "select":
        options = [(Text(option.label), option.id) for option in field.options or ()]
        known = any(option_id == given for _, option_id in options)
        value: Any = given if known else Select.NULL
        widgets.append(Select(options, prompt="Choose…", value=value, name=field.id))
    else:
        kind: Literal["number", "text"] = "number" if field.type == "number" else "text"
        text = given if isinstance(given, str) else ""
        placeholder = field.placeholder or ""
        widgets.append(Input(text, placeholder, type=kind, name=field.id, select_on_focus=False))
    return widgets


class ComponentPanel(VerticalScroll):
    """The keyboard of the latest unanswered form or row of buttons (hidden otherwise)."""

    DEFAULT_CSS = """
    ComponentPanel {
        height: auto;
        max-height: 20;
        border: round $primary;
        background: $surface;
        margin: 0 1;
        padding: 0 1;
    }
    ComponentPanel .field-label { margin: 1 0 0 0; color: $text-muted; }
    ComponentPanel Horizontal { height: auto; margin: 1 0 0 0; }
    ComponentPanel Button { margin: 0 1 0 0; }
    """

    class Answered(Message):
        """The user submitted the form or pressed a button.

        Attributes:
            prompt: The form or the row of buttons.
            interaction: ``payload.interaction``.
            text: What a server that does not know interactions answers instead.
            draft: The form's widgets' values, to show again if the server refuses them.
        """

        def __init__(
            self,
            prompt: InteractivePrompt,
            interaction: dict[str, Any],
            text: str,
            draft: dict[str, Any],
        ) -> None:
            super().__init__()
            self.prompt = prompt
            self.interaction = interaction
            self.text = text
            self.draft = draft

    def __init__(self) -> None:
        super().__init__(id="panel")
        self.owner: InteractivePrompt | None = None

    def own(self, owner: InteractivePrompt | None, draft: Mapping[str, Any]) -> None:
        """Show ``owner``'s widgets, a form's fields filled from ``draft`` (or hide)."""
        self.owner = owner
        self.remove_children()
        self.display = owner is not None
        if isinstance(owner, FormPrompt):
            props = owner.props
            self.border_title = plain(props.title or "Form")
            widgets = [w for field in props.fields for w in _field_widgets(field, draft)]
            submit = Button(plain(props.submit_label), variant="primary", name=_SUBMIT)
            self.mount_all([*widgets, Horizontal(submit)])
        elif isinstance(owner, ButtonPrompt):
            self.border_title = plain(owner.title)
            buttons = [
                Button(plain(option.label), name=str(index), disabled=option.disabled)
                for index, option in enumerate(owner.options)
            ]
            self.mount(Horizontal(*buttons))

    def focus_first(self) -> None:
        """Focus the first field or button (once the widgets are on screen)."""

        def focus() -> None:
            first = next((w for w in self.query("*") if w.focusable), None)
            if first is not None:
                first.focus()

        self.call_after_refresh(focus)

    def _form_values(self, prompt: FormPrompt) -> tuple[dict[str, Any], dict[str, Any]]:
        """The values to send (empty fields left out) and the widgets' values."""
        values: dict[str, Any] = {}
        draft: dict[str, Any] = {}
        for field in prompt.props.fields:
            widget = next((w for w in self.query("*") if w.name == field.id), None)
            if isinstance(widget, Checkbox) or (
                isinstance(widget, Select) and not widget.is_blank()
            ):
                values[field.id] = draft[field.id] = widget.value
            elif isinstance(widget, Input):
                draft[field.id] = widget.value
                if widget.value != "":
                    number = field.type == "number"
                    values[field.id] = _number(widget.value) if number else widget.value
        return values, draft

    def _submit(self) -> None:
        prompt = self.owner
        if isinstance(prompt, FormPrompt):
            values, draft = self._form_values(prompt)
            self.post_message(
                self.Answered(prompt, prompt.interaction(values), prompt.text(values), draft)
            )

    @on(Input.Submitted)
    def _field_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        prompt = self.owner
        if isinstance(prompt, FormPrompt) and event.button.name == _SUBMIT:
            self._submit()
        elif isinstance(prompt, ButtonPrompt) and event.button.name is not None:
            option = prompt.options[int(event.button.name)]
            self.post_message(self.Answered(prompt, prompt.interaction(option), option.label, {}))


class ComponentPicker(OptionList):
    """The keyboard of the latest unresolved component: a choice list or a confirmation.

    Up/Down move, a digit jumps to that choice, Enter picks; for a confirmation ``a`` approves
    and ``r`` rejects at once. Any other printable key goes to the input, so typing a question
    needs no Tab first.
    """

    DEFAULT_CSS = """
    ComponentPicker {
        height: auto;
        max-height: 12;
        border: round $primary;
        background: $surface;
        margin: 0 1;
    }
    """

    def __init__(self) -> None:
        super().__init__(id="picker")
        self.owner: ChoicePrompt | PendingConfirmation | None = None
        self._digits = ""

    def own(self, owner: ChoicePrompt | PendingConfirmation | None) -> None:
        """Show ``owner``'s options (or hide when ``None``)."""
        self.owner = owner
        self._digits = ""
        self.clear_options()
        if isinstance(owner, ChoicePrompt):
            self.border_title = "Choose one"
            self.add_options(
                Option(plain(f"{index + 1}. {owner.caption(index)}"), id=str(index))
                for index in range(len(owner.choices))
            )
        elif owner is not None:
            self.border_title = plain(f"Run {owner.name}?")
            self.add_options(
                [
                    Option(plain(f"a. {owner.approve_label}"), id="approve"),
                    Option(plain(f"r. {owner.reject_label}"), id="reject"),
                ]
            )
        self.highlighted = 0 if owner is not None else None
        self.display = owner is not None

    def on_key(self, event: events.Key) -> None:
        character = event.character
        if character is None or not character.isprintable() or event.key == "space":
            self._digits = ""
            return
        event.stop()
        event.prevent_default()
        if character.isdigit():
            self._jump(character)
        elif isinstance(self.owner, PendingConfirmation) and character.lower() in "ar":
            self.highlighted = 0 if character.lower() == "a" else 1
            self.action_select()
        else:
            self._digits = ""
            prompt = self.app.query_one("#prompt", Input)
            prompt.focus()
            prompt.insert_text_at_cursor(character)

    def _jump(self, digit: str) -> None:
        count = self.option_count
        wanted = self._digits + digit
        if not 1 <= int(wanted) <= count:
            wanted = digit
        self._digits = wanted if int(wanted) * 10 <= count else ""
        if 1 <= int(wanted) <= count:
            self.highlighted = int(wanted) - 1
