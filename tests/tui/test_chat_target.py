"""The terminal chat with your own chat definition, served in process the way
``agentskit-chat chat app.py:chat`` serves it (``local_chat_server``, then ``connect``), driven
by key presses."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import pytest
from textual.widgets import Input, Static
from textual.widgets._header import HeaderTitle

from agentskit_chat.conversation import ChatDefinition, ChatPage, define_chat
from agentskit_chat.runtime import AdapterRequest, ChatConfig, reply_adapter
from agentskit_chat.tui import TerminalChatApp, local_chat_server
from tests.tui._support import ask, until

pytestmark = pytest.mark.anyio

SIZE = (110, 40)
PAGE = ChatPage(
    title="Acme support",
    subtitle="Orders and returns",
    welcome_title="Hi, I'm Acme's assistant",
    welcome="Ask me about an order.",
    suggestions=("Where is my order?", "Return an item"),
    placeholder="Your question…",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def streamed(text: str, request: AdapterRequest) -> AsyncIterator[str]:
    """The reply, in pieces, with a pause between them (so the terminal draws it streaming)."""
    for piece in ("You said: ", text, " (", str(len(request.messages)), ")"):
        await anyio.sleep(0.01)
        yield piece


def chat(page: ChatPage | None = PAGE) -> ChatDefinition:
    return define_chat(id="support", chat=ChatConfig(adapter=reply_adapter(streamed)), page=page)


def shown(widget: Static) -> str:
    """What a text widget shows, as plain text."""
    return str(widget.render())


def header(app: TerminalChatApp) -> str:
    return shown(app.query_one(HeaderTitle))


async def test_the_header_welcome_and_input_show_the_chats_own_words() -> None:
    async with local_chat_server(chat()) as url:
        app = TerminalChatApp(starting="Starting the chat…")
        async with app.run_test(size=SIZE) as pilot:
            # On screen before the chat is ready, as run_terminal_chat shows it.
            assert app.sub_title == "Starting the chat…"
            assert app.query_one("#prompt", Input).disabled
            app.connect(url)
            await until(pilot, lambda: app.title == "Acme support", "the chat's title")
            await until(pilot, lambda: "Orders and returns" in header(app), "the header")
            assert "Acme support" in header(app)
            assert app.sub_title == "Orders and returns"
            welcome = shown(app.query_one("#welcome", Static))
            assert "Hi, I'm Acme's assistant" in welcome
            assert "Ask me about an order." in welcome
            assert "Try: Where is my order? · Return an item" in welcome
            prompt = app.query_one("#prompt", Input)
            assert prompt.placeholder == "Your question…"
            assert not prompt.disabled
            assert app.focused is prompt


async def test_typing_a_message_and_enter_shows_the_streamed_reply() -> None:
    async with local_chat_server(chat()) as url:
        app = TerminalChatApp(starting="Starting the chat…")
        async with app.run_test(size=SIZE) as pilot:
            app.connect(url)
            await until(pilot, lambda: app.title == "Acme support", "the chat's title")
            await ask(pilot, app, "hello")
            texts = app.message_texts()
            assert len(texts) == 2
            assert "hello" in texts[0]
            assert "You said: hello (2)" in texts[1]
            assert app.drawn[0] == "streaming"
            assert app.drawn[-1] == "complete"
            # The next message carries the conversation so far.
            await ask(pilot, app, "again")
            assert "You said: again (4)" in app.message_texts()[-1]
            assert app.notice == ""


async def test_a_chat_without_a_page_keeps_the_default_words() -> None:
    async with local_chat_server(chat(page=None)) as url:
        app = TerminalChatApp(starting="Starting the chat…")
        async with app.run_test(size=SIZE) as pilot:
            app.connect(url)
            await until(pilot, lambda: app.title == "Chat", "the default title")
            welcome = shown(app.query_one("#welcome", Static))
            assert "How can I help?" in welcome
            assert "Try:" not in welcome
            await ask(pilot, app, "hi")
            assert "You said: hi (2)" in app.message_texts()[-1]


async def test_the_local_server_opens_the_chat_once_and_closes_it_when_done() -> None:
    opened: list[str] = []

    @contextlib.asynccontextmanager
    async def target() -> AsyncIterator[ChatDefinition]:
        opened.append("enter")
        try:
            yield chat()
        finally:
            opened.append("exit")

    async with local_chat_server(target) as url:
        # Open before the URL is handed out.
        assert opened == ["enter"]
        app = TerminalChatApp(starting="Starting the chat…")
        async with app.run_test(size=SIZE) as pilot:
            app.connect(url)
            await until(pilot, lambda: app.title == "Acme support", "the chat's title")
            await ask(pilot, app, "hello")
            assert "You said: hello (2)" in app.message_texts()[-1]
        assert opened == ["enter"]
    assert opened == ["enter", "exit"]
