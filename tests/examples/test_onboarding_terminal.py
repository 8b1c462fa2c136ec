"""The onboarding form in the terminal, by key presses: a missing field is refused with its
typed message and nothing runs; filled in, the answers are saved."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Select

from agentskit_chat.server import create_app
from agentskit_chat.tui import TerminalChatApp
from agentskit_chat.tui._prompts import FormPrompt
from examples.onboarding import app as onboarding
from tests.assistant._support import serve
from tests.tui._support import ask, idle, until

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_onboarding_form_by_key_presses() -> None:
    async with serve(create_app(onboarding.build_onboarding_chat())) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=(110, 60)) as pilot:
            await ask(pilot, app, "onboarding")
            await until(pilot, lambda: isinstance(app.keyboard_owner, FormPrompt), "the form")
            await until(pilot, lambda: app.focused is not None, "the form's first field")
            # Past Primary role (left unchosen) to First goal, then Save answers.
            await pilot.press("tab", *"Automate handoffs", "tab", "enter")
            await idle(pilot, app)
            assert app.notice_is_error
            assert app.notice == 'The field "Primary role" is required. (INTERACTION_INVALID)'
            assert len(app.message_texts()) == 2  # nothing ran
            await until(pilot, lambda: isinstance(app.keyboard_owner, FormPrompt), "the form")
            assert [i.value for i in app.query("#panel Input").results(Input)] == [
                "Automate handoffs"
            ]
            app.query_one("#panel Select", Select).focus()
            await pilot.press("enter")  # Primary role: open its list
            await pilot.pause(0.1)
            await pilot.press("down", "enter")  # the first option
            await until(
                pilot,
                lambda: app.query_one("#panel Select", Select).value == "engineering",
                "Engineering chosen",
            )
            await pilot.press("tab", "tab", "enter")  # past First goal to Save answers
            await idle(pilot, app)
            texts = app.message_texts()
            assert "Saved: Engineering, “Automate handoffs”." in texts[-1]
            assert app.notice == ""
            await ask(pilot, app, "recommend")
            assert "engineering starter" in app.message_texts()[-1]
