"""The cited-answers example in the terminal, by key presses, loaded the way
``agentskit-chat chat examples/rag/app.py:chat`` loads it: a question its docs answer shows the
answer and its numbered sources; one they do not answer shows the refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentskit_chat.tui import TerminalChatApp, local_chat_server
from tests.tui._support import ask, flat, until

pytestmark = pytest.mark.anyio

APP = Path(__file__).parents[2] / "examples" / "rag" / "app.py"
#: What the example says when its folder has no answer (as its README documents it).
REFUSAL = "No grounded sources were found for this question."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_answer_with_its_sources_and_a_refusal_by_key_presses() -> None:
    async with local_chat_server(f"{APP}:chat") as url:
        app = TerminalChatApp(starting="Starting the chat…")
        async with app.run_test(size=(110, 50)) as pilot:
            app.connect(url)
            await until(pilot, lambda: app.title == "Lumen Notes help", "the chat's title")
            await ask(pilot, app, "How often do devices sync?")
            answered = flat(app.message_texts()[-1])
            assert "Grounded answer for “How often do devices sync?”" in answered
            assert "Devices sync every 30 seconds" in answered
            assert "[1] Sync and offline use › How often devices sync" in answered
            await ask(pilot, app, "How do I bake bread?")
            texts = app.message_texts()
            assert len(texts) == 4
            assert flat(texts[-1]) == REFUSAL
            assert "[1]" not in texts[-1]
            assert app.notice == ""
