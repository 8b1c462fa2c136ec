"""Servers and waiting helpers for the terminal chat's tests.

Every app test talks to a real server over a loopback socket: the docs assistant's app over a
small temporary docs folder, or a chat app over the echo model of the chat handler tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
from textual.pilot import Pilot

from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.server import create_docs_assistant_app
from agentskit_chat.storage import open_chat_stores
from agentskit_chat.tui import TerminalChatApp
from tests.assistant._support import clock, serve, write_docs

#: An exact question of the test docs, its answer's first sentence and its one source.
EXACT_QUESTION = "Setup guide"
EXACT_ANSWER = "Install the widget, then tune its cache."
#: A heading two pages share: the answer is a choice between them.
AMBIGUOUS_QUESTION = "Configuring the cache"
#: A question no heading answers: the Ask backend streams a cited answer.
BACKEND_QUESTION = "How do I set the cache size?"


@contextlib.asynccontextmanager
async def docs_server(root: Path) -> AsyncIterator[str]:
    """The docs assistant's app over a fresh copy of the test docs, on 127.0.0.1."""
    docs = write_docs(root / "docs")
    stores = open_chat_stores("memory:")
    async with (
        stores,
        create_docs_assistant(docs, now=clock) as assistant,
        serve(create_docs_assistant_app(assistant, stores=stores)) as url,
    ):
        yield url


async def until(
    pilot: Pilot[Any], condition: Callable[[], bool], what: str, timeout: float = 15.0
) -> None:
    """Let the app run until ``condition()`` holds; fail naming ``what`` after ``timeout``."""
    with anyio.move_on_after(timeout):
        while not condition():
            await pilot.pause(0.02)
        await pilot.pause()
        return
    raise AssertionError(f"timed out waiting for {what}")


async def idle(pilot: Pilot[Any], app: TerminalChatApp, timeout: float = 15.0) -> None:
    """Wait until no turn is running and the last one has been drawn."""
    await pilot.pause(0.05)
    await until(pilot, lambda: app.client is not None and not app.client.running, "idle", timeout)
    await pilot.pause(0.05)


async def ask(pilot: Pilot[Any], app: TerminalChatApp, text: str) -> None:
    """Type ``text`` into the input, press Enter and wait for the answer."""
    app.query_one("#prompt").focus()
    await pilot.press(*text, "enter")
    await idle(pilot, app)


def flat(text: str) -> str:
    """``text`` with every run of whitespace (and panel borders) made one space."""
    return " ".join(text.replace("│", " ").split())


def joined(app: TerminalChatApp) -> str:
    """Everything the transcript shows, as one plain text."""
    return "\n".join(app.message_texts())
