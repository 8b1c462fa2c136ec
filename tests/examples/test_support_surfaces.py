"""The support example as a person uses it: approved in Chromium on one worker, approved again
by a key press in the terminal on another; the ticket is created once."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import anyio
from playwright.sync_api import Browser, expect

from agentskit_chat.server import create_app
from agentskit_chat.tui import TerminalChatApp
from agentskit_chat.tui._render import PendingConfirmation
from examples.support import app as support
from tests.tui._support import idle, until
from tests.web._support import serving


class Terminal:
    """The terminal chat on its own thread (Playwright's sync API owns this one): it opens the
    page's session, waits until told, then presses ``a`` on the pending ticket."""

    def __init__(self, url: str, session_id: str) -> None:
        self.url = url
        self.session_id = session_id
        self.pending = threading.Event()
        self.go = threading.Event()
        self.notice = ""
        self.sent: bool | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join(60)
        assert not self._thread.is_alive()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            anyio.run(self._drive)
        except BaseException as error:
            self.error = error
            self.pending.set()

    async def _drive(self) -> None:
        app = TerminalChatApp(self.url, session_id=self.session_id)
        async with app.run_test(size=(110, 50)) as pilot:
            await until(
                pilot,
                lambda: isinstance(app.keyboard_owner, PendingConfirmation),
                "the pending ticket in the terminal",
            )
            self.pending.set()
            await anyio.to_thread.run_sync(self.go.wait, 30)
            await pilot.press("a")
            await idle(pilot, app)
            await until(pilot, lambda: bool(app.notice), "the terminal's notice")
            self.notice = app.notice


def test_the_page_approves_and_the_terminal_on_another_worker_cannot_approve_again(
    browser: Browser, tmp_path: Path
) -> None:
    service = support.InMemoryTicketService()
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    page_app = create_app(support.build_support_chat(tickets=service), store=store)
    terminal_app = create_app(support.build_support_chat(tickets=service), store=store)
    with serving(page_app) as page_url, serving(terminal_app) as terminal_url:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            page = context.new_page()
            page.set_default_timeout(15000)
            page.goto(page_url)
            expect(page.locator("body[data-ready=true]")).to_be_attached()
            expect(page.get_by_role("heading", name="Support desk")).to_be_visible()
            page.get_by_label("Your message").fill("I need to talk to a person about my invoice")
            page.locator("#send").click()
            confirm = page.locator("fieldset.confirm")
            expect(confirm).to_contain_text(support.TICKET_TOOL)
            assert service.tickets == []
            session_id = page.evaluate(
                "() => window.localStorage.getItem('agentskit.chat.session')"
            )
            assert isinstance(session_id, str) and session_id

            terminal = Terminal(terminal_url, session_id)
            terminal.start()
            assert terminal.pending.wait(30)
            assert terminal.error is None

            confirm.get_by_role("button", name="Approve").click()
            expect(page.locator("fieldset.confirm")).to_have_count(0)
            expect(page.locator(".tool-status").last).to_contain_text("SUP-1")
            assert [ticket.id for ticket in service.tickets] == ["SUP-1"]

            terminal.go.set()
            terminal.join()
        finally:
            context.close()
    assert re.search("not waiting for a confirmation", terminal.notice)
    assert len(service.tickets) == 1
