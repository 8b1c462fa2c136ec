"""The terminal chat driven by key presses (Textual's pilot) against real servers on loopback."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from textual.widgets import Input

from agentskit_chat.protocol.fixtures.component import STANDARD_COMPONENT_FRAME_FIXTURES
from agentskit_chat.tui import TerminalChatApp
from agentskit_chat.tui._render import ChoicePrompt, PendingConfirmation
from tests.assistant._support import serve
from tests.server._chat_support import EchoAdapter, Harness, TicketService, seeded, ticket_harness
from tests.tui._support import (
    AMBIGUOUS_QUESTION,
    BACKEND_QUESTION,
    EXACT_ANSWER,
    EXACT_QUESTION,
    ask,
    docs_server,
    flat,
    idle,
    joined,
    until,
)

pytestmark = pytest.mark.anyio

SIZE = (110, 50)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_exact_question_shows_the_answer_and_its_source_as_a_link(
    tmp_path: Path,
) -> None:
    async with docs_server(tmp_path) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            assert app.sub_title == url
            await ask(pilot, app, EXACT_QUESTION)
            texts = app.message_texts()
            assert len(texts) == 2
            assert EXACT_QUESTION in texts[0]
            assert EXACT_ANSWER in texts[1]
            assert f"[1] Setup guide {url}/docs/guide" in flat(texts[1])
            assert f"{url}/docs/guide" in texts[1]
            assert app.transcript is not None
            links = app.transcript.messages[-1].links
            assert ("Setup guide", f"{url}/docs/guide") in links
            assert app.notice == ""
            assert app.keyboard_owner is None


async def test_an_ambiguous_question_is_answered_by_number_then_enter(tmp_path: Path) -> None:
    async with docs_server(tmp_path) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, app, AMBIGUOUS_QUESTION)
            owner = app.keyboard_owner
            assert isinstance(owner, ChoicePrompt)
            assert [c.description for c in owner.choices] == [
                "Configuring the cache (Setup guide)",
                "Configuring the cache (Options reference)",
            ]
            assert app.focused is app.query_one("#picker")
            assert "1. Configuring the cache" in joined(app)
            await pilot.press("2", "enter")
            await idle(pilot, app)
            texts = app.message_texts()
            assert "Configuring the cache (Options reference)" in texts[-2]
            assert f"{url}/docs/reference/options#configuring-the-cache" in texts[-1]
            assert app.keyboard_owner is None
            assert "✓2. Configuring the cache (Options reference)" in texts[1]

            # The used list is inert: nothing is sent again, by keys or by a direct pick.
            requests = app.client.requests if app.client else -1
            await pilot.press("enter")
            await pilot.pause(0.2)
            assert app.pick_choice(owner, 0) is False
            assert app.client is not None and app.client.requests == requests
            assert len(app.message_texts()) == len(texts)


async def test_an_ambiguous_question_is_answered_by_down_then_enter(tmp_path: Path) -> None:
    async with docs_server(tmp_path) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, app, AMBIGUOUS_QUESTION)
            assert isinstance(app.keyboard_owner, ChoicePrompt)
            await pilot.press("down", "enter")
            await idle(pilot, app)
            assert "Configuring the cache (Options reference)" in app.message_texts()[-2]
            # Typing while the list owns the keyboard goes to the input, not the list.
            await ask(pilot, app, AMBIGUOUS_QUESTION)
            assert isinstance(app.keyboard_owner, ChoicePrompt)
            await pilot.press(*"Setup guide", "enter")
            await idle(pilot, app)
            assert "Setup guide" in app.message_texts()[-2], app.message_texts()[-2]
            assert EXACT_ANSWER in app.message_texts()[-1]
            assert app.keyboard_owner is None


async def test_a_backend_question_streams_and_cites(tmp_path: Path) -> None:
    async with docs_server(tmp_path) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, app, BACKEND_QUESTION)
            assert app.drawn[:1] == ["streaming"]
            assert app.drawn[-1] == "complete"
            answer = app.message_texts()[-1]
            assert "cache_size" in answer
            assert "[1]" in answer
            assert "Setup guide › Configuring the cache" in answer
            assert f"{url}/docs/guide#configuring-the-cache" in answer
            # Without a model the docs answer the same way again (a new source list id aside).
            await ask(pilot, app, "/regenerate")
            assert app.message_texts()[-1] == answer
            assert app.notice.startswith("Regenerated: the answer is the same as before.")


async def test_escape_stops_the_stream_and_the_app_keeps_running() -> None:
    gate = anyio.Event()
    adapter = EchoAdapter(gate=gate)
    harness = Harness(adapter=adapter)
    async with serve(harness.app()) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press(*"first question", "enter")
            await until(pilot, lambda: "streaming" in app.drawn, "the first streaming snapshot")
            assert app.client is not None and app.client.running
            await pilot.press("escape")
            await idle(pilot, app)
            assert app.is_running
            assert app.notice.startswith("Stopped.")
            assert not app.notice_is_error
            await until(pilot, lambda: adapter.aborts >= 1, "the server to abort the model")
            gate.set()  # the next answer may finish
            await ask(pilot, app, "second question")
            assert app.notice == ""
            assert "Echo: second question" in app.message_texts()[-1]


async def test_escape_without_a_stream_does_nothing() -> None:
    harness = Harness()
    async with serve(harness.app()) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("escape")
            await ask(pilot, app, "hello")
            assert app.is_running
            assert "Echo: hello" in app.message_texts()[-1]


async def test_retry_edit_and_regenerate_by_command() -> None:
    harness = Harness()
    async with serve(harness.app()) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, app, "/retry")
            assert app.notice_is_error
            assert "OPERATION_UNAVAILABLE" in app.notice

            await ask(pilot, app, "first")
            assert harness.adapter.inputs == ["first"]
            first_answer = app.transcript.messages[-1].message_id if app.transcript else ""

            await ask(pilot, app, "/retry")
            assert harness.adapter.inputs == ["first", "first"]
            assert app.notice == "Asked again."
            assert len(app.message_texts()) == 2

            harness.adapter.label = "Echo again"
            await ask(pilot, app, "/regenerate")
            assert harness.adapter.inputs[-1] == "first"
            assert app.transcript is not None
            assert app.transcript.messages[-1].message_id != first_answer
            assert app.notice == "A new answer replaced the last one."
            # The same words again (a chat without a model answers the same way) say so.
            await ask(pilot, app, "/regenerate")
            assert "Echo again: first" in app.message_texts()[-1]
            assert app.notice.startswith("Regenerated: the answer is the same as before.")
            assert not app.notice_is_error
            harness.adapter.label = "Echo"

            await ask(pilot, app, "/edit changed question")
            texts = app.message_texts()
            assert len(texts) == 2
            assert "changed question" in texts[0]
            assert "Echo: changed question" in texts[1]
            assert harness.adapter.inputs[-1] == "changed question"

            await ask(pilot, app, "/edit")
            assert app.notice_is_error and "/edit" in app.notice
            # Not one of the terminal's own commands: the chat answers it (its routes may).
            await ask(pilot, app, "/nope")
            assert not app.notice_is_error
            assert harness.adapter.inputs[-1] == "/nope"
            assert "Echo: /nope" in app.message_texts()[-1]


@pytest.mark.parametrize(("key", "created"), [("a", 1), ("r", 0)])
async def test_a_confirmation_is_approved_or_rejected_by_one_key(key: str, created: int) -> None:
    service = TicketService()
    harness = ticket_harness(service)
    async with serve(harness.app()) as url:
        app = TerminalChatApp(url, session_id="session-1")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.keyboard_owner is not None, "the stored choice list")
            assert isinstance(app.keyboard_owner, ChoicePrompt)
            await pilot.press("1", "enter")
            await idle(pilot, app)
            pending = app.keyboard_owner
            assert isinstance(pending, PendingConfirmation)
            assert pending.name == "create-support-ticket"
            assert "Waiting for you: a to approve, r to reject." in app.message_texts()[-1]
            assert service.created == []
            await pilot.press(key)
            await idle(pilot, app)
            assert len(service.created) == created
            assert app.keyboard_owner is None
            shown = joined(app)
            if created:
                assert "SUP-1" in shown
            assert "requires confirmation" not in shown
            # Deciding again sends nothing.
            assert app.decide(pending, "approve") is False
            assert len(service.created) == created


async def test_every_standard_component_shows_at_least_its_fallback_text() -> None:
    frames = list(STANDARD_COMPONENT_FRAME_FIXTURES)
    assert len(frames) == 12
    harness = Harness()
    seeded(harness, *frames)
    async with serve(harness.app()) as url:
        app = TerminalChatApp(url, session_id="session-1")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(app.message_texts()) == 2, "the stored conversation")
            shown = " ".join(app.message_texts(width=200)[1].split())
            for frame in frames:
                props = frame["props"]
                key = frame["componentKey"]
                if key == "choice-list":
                    expected = [c["label"] for c in props["choices"]]
                elif key == "source-list":
                    expected = [props["label"], *(s["title"] for s in props["sources"])]
                else:
                    expected = []
                for text in expected:
                    assert text in shown, (key, text)
            fallbacks = [
                "Actions: Save.",
                "Contact: Email.",
                "Delete?: This cannot be undone.",
                "Upload: 42%.",
                "Guide: Read the guide.",
                "Failed: Try again.",
                "Search: complete.",
                "Approve send?: Send the email.",
                "Users: 1 rows.",
                "report.pdf (application/pdf).",
            ]
            for fallback in fallbacks:
                assert fallback in shown, fallback
            assert f"{url}/report.pdf" in shown
            assert "https://example.com/guide" in shown
            assert "Ada" in shown


async def test_ctrl_c_exits_with_status_zero(tmp_path: Path) -> None:
    async with docs_server(tmp_path) as url:
        app = TerminalChatApp(url)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, app, EXACT_QUESTION)
            await pilot.press("ctrl+c")
            await pilot.pause()
        assert app.return_code == 0
        assert not app.is_running


async def test_an_unreachable_server_is_a_clear_notice() -> None:
    app = TerminalChatApp("http://127.0.0.1:9")
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, app, "hello")
        assert app.notice_is_error
        assert "Could not reach the chat server at http://127.0.0.1:9." in app.notice
        assert app.is_running
        # The question the server never took is back in the input, ready to send again.
        assert app.query_one("#prompt", Input).value == "hello"
        assert app.message_texts() == []
