"""Server text is shown as text in the terminal: a label written in Textual markup
(``[@click=app.quit]…[/]``, ``[b]…[/b]``) reads as those characters and does nothing when
clicked — in the choice picker, a form's fields and buttons, and their titles."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import pytest
from textual.content import Content
from textual.visual import visualize
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Label, OptionList

from agentskit_chat.conversation import define_chat
from agentskit_chat.protocol import create_assistant_content_encoder
from agentskit_chat.runtime import AdapterRequest, ChatConfig, reply_adapter
from agentskit_chat.server import create_app
from agentskit_chat.tui import TerminalChatApp
from agentskit_chat.tui._panel import ComponentPanel
from agentskit_chat.tui._render import ChoicePrompt
from tests.assistant._support import serve
from tests.tui._support import ask, idle

pytestmark = pytest.mark.anyio

SIZE = (110, 50)
QUIT: Final = "[@click=app.quit]Quit now[/]"
BOLD: Final = "[b]Bold[/b] claim"


def frame(key: str, instance: str, props: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "protocol": "agentskit.chat.component",
        "version": 1,
        "type": "render",
        "componentKey": key,
        "instanceId": instance,
        "props": dict(props),
        "fallback": {"kind": key, "summary": "A component."},
    }


FRAMES: Final = {
    "menu": frame(
        "choice-list",
        "menu-1",
        {
            "prompt": QUIT,
            "choices": [{"id": "quit", "label": QUIT}, {"id": "bold", "label": BOLD}],
        },
    ),
    "form": frame(
        "form",
        "form-1",
        {
            "title": QUIT,
            "submitLabel": QUIT,
            "fields": [
                {"id": "name", "label": BOLD, "type": "text"},
                {"id": "agree", "label": QUIT, "type": "checkbox"},
            ],
        },
    ),
    "buttons": frame(
        "button-group",
        "buttons-1",
        {"label": QUIT, "buttons": [{"id": "go", "label": QUIT}]},
    ),
}


def answer(text: str, request: AdapterRequest) -> str:
    chosen = FRAMES.get(text)
    if chosen is None:
        return f"You said: {text}"
    return create_assistant_content_encoder().encode({"kind": "component", "frame": chosen})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def shown_text(widget: Widget, value: object) -> str:
    """What the widget draws for ``value``: its text as Textual renders it."""
    visual = visualize(widget, value)
    return visual.plain if isinstance(visual, Content) else str(visual)


def app_of() -> Any:
    return create_app(define_chat(id="markup", chat=ChatConfig(adapter=reply_adapter(answer))))


async def test_a_choice_label_in_markup_is_text_and_clicking_it_does_not_quit() -> None:
    async with serve(app_of()) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, app, "menu")
            assert isinstance(app.keyboard_owner, ChoicePrompt)
            picker = app.query_one("#picker", OptionList)
            shown = [shown_text(picker, picker.get_option_at_index(i).prompt) for i in range(2)]
            assert shown == [f"1. {QUIT}", f"2. {BOLD}"]
            # Click on the words of the first choice, where markup would have put the action.
            await pilot.click("#picker", offset=(8, 1))
            await idle(pilot, app)
            assert app.is_running
            assert app.return_code is None
            # The click picked the choice, as a click on any choice does.
            assert app.keyboard_owner is None
            assert QUIT in app.message_texts()[-2]


async def test_form_and_button_words_in_markup_are_text() -> None:
    async with serve(app_of()) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, app, "form")
            panel = app.query_one("#panel", ComponentPanel)
            labels = [shown_text(label, label.content) for label in panel.query(Label)]
            assert labels == [BOLD]
            checkbox = panel.query_one(Checkbox)
            assert shown_text(checkbox, checkbox.label) == QUIT
            assert [shown_text(b, b.label) for b in panel.query(Button)] == [QUIT]
            assert panel.border_title is not None
            assert panel.border_title.replace("\\", "") == QUIT  # shown as written
            await ask(pilot, app, "buttons")
            assert [shown_text(b, b.label) for b in panel.query(Button)] == [QUIT]
            await pilot.click(Button)
            await idle(pilot, app)
            assert app.is_running
            assert app.return_code is None
