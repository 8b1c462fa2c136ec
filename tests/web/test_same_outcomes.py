"""One scripted conversation, two interfaces: the web page and the terminal show the same thing.

The same four steps (an exact question, an ambiguous one, its first choice, a question the Ask
backend answers) run in Chromium and in the Textual app, each against its own docs server over
the same docs. Both must show the same messages, in the same order: the same questions (the
chosen choice included), answers that start with the same words, and the same cited pages.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from playwright.sync_api import Browser, expect

from agentskit_chat.tui import TerminalChatApp
from tests.tui._support import ask as tui_ask
from tests.tui._support import docs_server, flat, idle, until

STEPS = ("Setup guide", "Configuring the cache", 1, "How do I see every render in the log?")
WORDS = 6


@dataclass(frozen=True)
class Shown:
    """One message as an interface showed it."""

    role: str
    text: str  # flattened
    pages: frozenset[str]  # the paths of the docs pages it links to


def _pages(hrefs: list[str]) -> frozenset[str]:
    return frozenset(
        urlsplit(href).path for href in hrefs if urlsplit(href).path.startswith("/docs")
    )


def _serve_in_thread(root: Path, run: Any) -> Any:
    """Run ``run(url)`` (async) against a docs server, in a thread with its own event loop."""
    outcome: dict[str, Any] = {}

    async def main() -> None:
        async with docs_server(root) as url:
            outcome["value"] = await run(url)

    def target() -> None:
        try:
            anyio.run(main)
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def on_the_web(browser: Browser, root: Path) -> list[Shown]:
    ready = threading.Event()
    done = threading.Event()
    holder: dict[str, str] = {}

    async def hold(url: str) -> None:
        holder["url"] = url
        ready.set()
        await anyio.to_thread.run_sync(done.wait)

    thread, outcome = _serve_in_thread(root, hold)
    assert ready.wait(60), outcome
    try:
        page = browser.new_page()
        page.goto(holder["url"])
        expect(page.locator("body[data-ready=true]")).to_be_attached()
        for step in STEPS:
            if isinstance(step, int):
                page.locator("button.choice").nth(step - 1).click()
            else:
                page.get_by_label("Your message").fill(step)
                page.locator("#send").click()
            page.wait_for_timeout(50)
            expect(page.locator("#send")).to_be_visible()
        shown = page.evaluate(
            """() => [...document.querySelectorAll("#log article.message")].map((node) => {
              const parts = [...node.querySelector(".body").children].filter(
                (part) => !part.matches("nav, fieldset"),
              );
              return {
                role: node.classList.contains("user") ? "user" : "assistant",
                text: parts.map((part) => part.innerText).join(" "),
                hrefs: [...node.querySelectorAll("a[href]")].map((a) => a.getAttribute("href")),
              };
            })"""
        )
        page.close()
    finally:
        done.set()
        thread.join(30)
    return [Shown(m["role"], " ".join(m["text"].split()), _pages(m["hrefs"])) for m in shown]


def in_the_terminal(root: Path) -> list[Shown]:
    async def drive(url: str) -> list[Shown]:
        app = TerminalChatApp(url)
        async with app.run_test(size=(120, 60)) as pilot:
            await until(pilot, lambda: app.client is not None, "connected")
            await idle(pilot, app)
            for step in STEPS:
                if isinstance(step, int):
                    await until(pilot, lambda: app.keyboard_owner is not None, "a choice list")
                    await pilot.press(str(step), "enter")
                    await idle(pilot, app)
                else:
                    await tui_ask(pilot, app, step)
            assert app.transcript is not None
            return [
                Shown(
                    message.role,
                    flat(text),
                    _pages([href for _, href in message.links]),
                )
                for message, text in zip(app.transcript.messages, app.message_texts(), strict=True)
            ]

    thread, outcome = _serve_in_thread(root, drive)
    thread.join(120)
    if "error" in outcome:
        raise outcome["error"]
    result: list[Shown] = outcome["value"]
    return result


def test_the_web_page_and_the_terminal_show_the_same_conversation(
    browser: Browser, tmp_path: Path
) -> None:
    web = on_the_web(browser, tmp_path / "web")
    terminal = in_the_terminal(tmp_path / "terminal")
    assert len(web) == 8  # four questions (one a chosen choice), four answers (one a list)
    assert [m.role for m in web] == [m.role for m in terminal]
    for seen, drawn in zip(web, terminal, strict=True):
        # The same words: the terminal draws the answer's first words as the page does.
        assert seen.text, seen
        first = " ".join(seen.text.split()[:WORDS]).strip("[]")
        assert first in drawn.text, (seen, drawn)
        # The same pages cited (the web page also links [n] to them: the set is the same).
        assert seen.pages == drawn.pages, (seen, drawn)
    questions = [m.text for m in web if m.role == "user"]
    assert questions[2] == "Configuring the cache (Setup guide)"
    assert any(m.pages for m in web if m.role == "assistant")
