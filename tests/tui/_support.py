"""Servers and waiting helpers for the terminal chat's tests.

Every app test talks to a real server over a loopback socket: the docs assistant's app over a
small temporary docs folder, or a chat app over the echo model of the chat handler tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import anyio
from textual.pilot import Pilot

from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.protocol import create_assistant_content_encoder
from agentskit_chat.runtime import ChatMessage, ChatTool, InMemoryChatMemory, ToolAuthorization
from agentskit_chat.server import create_docs_assistant_app
from agentskit_chat.storage import open_chat_stores
from agentskit_chat.tui import TerminalChatApp
from tests.assistant._support import clock, serve, write_docs
from tests.server._chat_support import SUPPORT_OFFER_FRAME, Harness

AT = datetime(2026, 7, 11, tzinfo=UTC)
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


ACTION_FRAME: Final = SUPPORT_OFFER_FRAME


class TicketService:
    """The gated tool's service: records every ticket it creates."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    async def __call__(self, args: Any) -> str:
        self.created.append(dict(args))
        return f"SUP-{len(self.created)}"


def seeded(harness: Harness, *frames: dict[str, Any], session_id: str = "session-1") -> None:
    """Store a conversation whose answer shows ``frames`` (in one ordered-content message)."""
    encoder = create_assistant_content_encoder()
    content = "".join(encoder.encode({"kind": "component", "frame": f}) for f in frames)
    harness.memories.by_session[session_id] = InMemoryChatMemory(
        [
            ChatMessage(id="u1", role="user", content="/support", created_at=AT),
            ChatMessage(id="m1", role="assistant", content=content, created_at=AT),
        ]
    )


def ticket_harness(service: TicketService) -> Harness:
    """A chat app whose ``create-support-ticket`` tool waits for a human's approval."""
    tool = ChatTool(
        name="create-support-ticket",
        parameters={
            "type": "object",
            "properties": {"topic": {"type": "string"}},
            "required": ["topic"],
            "additionalProperties": False,
        },
        execute=service,
        requires_confirmation=True,
    )

    def authorize(call: Any, context: Any) -> ToolAuthorization:
        return ToolAuthorization(True, None)

    harness = Harness()
    harness.fields.update(tools=(tool,), authorize=authorize)
    seeded(harness, ACTION_FRAME)
    return harness
