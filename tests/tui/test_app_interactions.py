"""Forms and buttons in the terminal: real Textual widgets, filled and pressed by key presses,
sent as ``payload.interaction`` to a real chat server on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from textual.widgets import Button, Checkbox, Input, Select

from agentskit_chat.conversation import InMemorySessionStorage, define_chat
from agentskit_chat.runtime import ChatConfig, InMemoryChatMemory
from agentskit_chat.server import create_chat_app
from agentskit_chat.tui import TerminalChatApp
from agentskit_chat.tui._prompts import ButtonPrompt, FormPrompt
from tests.assistant._support import serve
from tests.server._interaction_support import NEXT_STEP, SIGNUP_FORM, FrameModel, RecordingHook
from tests.tui._support import ask, idle, until

pytestmark = pytest.mark.anyio

SIZE = (110, 60)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def chat_server(model: FrameModel, hook: RecordingHook) -> AsyncIterator[str]:
    definition = define_chat(id="signup", chat=ChatConfig(adapter=model), on_interaction=hook)
    storage = InMemorySessionStorage()
    memories: dict[str, InMemoryChatMemory] = {}
    app = create_chat_app(
        resolve_definition=lambda context, session_id: definition,
        session_storage=lambda context: storage,
        chat_memory=lambda context, session_id: memories.setdefault(
            session_id, InMemoryChatMemory()
        ),
    )
    async with serve(app) as url:
        yield url


async def test_a_form_is_filled_and_submitted_by_keys_and_a_refusal_keeps_its_values() -> None:
    model = FrameModel({"sign up": SIGNUP_FORM})
    hook = RecordingHook()
    async with chat_server(model, hook) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, app, "sign up")
            await until(pilot, lambda: isinstance(app.focused, Input), "the form's first field")
            assert isinstance(app.keyboard_owner, FormPrompt)
            assert app.focused is not None and app.focused.name == "name"
            # Name, then past Role (left unchosen) to Age, Newsletter and Join.
            await pilot.press(*"Ada", "tab", "tab", *"36", "tab", "space", "tab", "enter")
            await idle(pilot, app)
            assert app.notice_is_error
            assert app.notice == 'The field "Role" is required. (INTERACTION_INVALID)'
            assert hook.seen == []
            assert model.inputs == ["sign up"]
            assert len(app.message_texts()) == 2  # nothing ran
            # The form owns the keyboard again, with what was typed.
            await until(pilot, lambda: isinstance(app.focused, Input), "the form again")
            assert isinstance(app.keyboard_owner, FormPrompt)
            assert [i.value for i in app.query("#panel Input").results(Input)] == ["Ada", "36"]
            assert app.query_one("#panel Checkbox", Checkbox).value is True

            await pilot.press("tab", "enter")  # Role: open its list
            await pilot.pause(0.1)
            await pilot.press("down", "enter")  # the first option
            await until(
                pilot,
                lambda: app.query_one("#panel Select", Select).value == "eng",
                "Engineering chosen",
            )
            await pilot.press("tab", "tab", "tab", "enter")  # past Age and Newsletter to Join
            await idle(pilot, app)
            texts = app.message_texts()
            assert (
                "Submitted: Name = Ada, Role = Engineering, Age = 36, Newsletter = yes"
                in (texts[-2])
            )
            assert "Welcome, Ada (eng)!" in texts[-1]
            assert app.notice == ""
            assert app.keyboard_owner is None
            assert not app.query_one("#panel").display
            ((key, instance, event, value, _),) = hook.seen
            assert (key, instance, event) == ("form", "signup-form", "submit")
            assert value == {"name": "Ada", "role": "eng", "age": 36, "news": True}
            assert model.inputs == ["sign up"]  # the hook answered


async def test_a_button_group_is_a_row_of_buttons_pressed_by_keys() -> None:
    model = FrameModel({"next": NEXT_STEP})
    hook = RecordingHook()
    async with chat_server(model, hook) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, app, "next")
            await until(pilot, lambda: isinstance(app.focused, Button), "the first button")
            owner = app.keyboard_owner
            assert isinstance(owner, ButtonPrompt)
            buttons = list(app.query("#panel Button").results(Button))
            assert [str(b.label) for b in buttons] == ["Save draft", "Send now", "Later"]
            assert buttons[2].disabled
            await pilot.press("tab", "enter")  # the second button
            await idle(pilot, app)
            assert "Send now" in app.message_texts()[-2]
            assert "Hook: next-step select" in app.message_texts()[-1]
            assert [seen[:4] for seen in hook.seen] == [
                ("button-group", "next-step", "select", "send")
            ]
            assert app.keyboard_owner is None
            # The answered row is inert: pressing it again sends nothing.
            requests = app.client.requests if app.client else -1
            assert app.answer(owner, owner.interaction(owner.options[0]), "Save draft") is False
            assert app.client is not None and app.client.requests == requests
