"""Running the terminal chat: against a server's URL, or a chat or docs folder served in
process."""

from __future__ import annotations

from pathlib import Path

import anyio

from agentskit_chat._drivers import require_extra
from agentskit_chat.errors import AgentsKitChatError, ConfigurationError
from agentskit_chat.server import ChatTarget

from ._local import local_chat_server, local_docs_server
from ._theme import ThemeChoice

__all__ = ["run_terminal_chat"]


async def run_terminal_chat(
    *,
    url: str | None = None,
    docs_dir: str | Path | None = None,
    target: ChatTarget | str | None = None,
    api_key: str | None = None,
    session_id: str | None = None,
    theme: ThemeChoice = "dark",
    store: str = "memory:",
    model: str | None = None,
    headless: bool = False,
) -> int:
    """Run the terminal chat until the user quits; return the exit status (0 after Ctrl+C).

    Exactly one of ``url`` (a running server, e.g. ``agentskit-chat serve``), ``docs_dir`` (a
    folder whose docs assistant is served in process, on 127.0.0.1, while the chat runs) and
    ``target`` (your chat definition, served the same way). The app is on screen at once; the
    input opens when the chat is ready.

    Args:
        url: The server to talk to.
        docs_dir: The folder of Markdown to answer from.
        target: A chat definition, a factory, or a reference such as ``"app.py:chat"``.
        api_key: Sent as ``Authorization: Bearer <key>`` (and required by a local server).
        session_id: A stored session to continue.
        theme: ``dark`` or ``light``.
        store: Where a local server keeps sessions (``memory:`` by default).
        model: A local server's pydantic-ai model string.
        headless: Run without a terminal (for tests).

    Raises:
        ConfigurationError: not exactly one of ``url``, ``docs_dir`` and ``target``.
        ImportError: Textual (the ``tui`` extra) or httpx/uvicorn (the ``server`` extra) is
            missing; the message names the extra to install.
    """
    if sum(given is not None for given in (url, docs_dir, target)) != 1:
        raise ConfigurationError("give exactly one of a server URL, a docs folder or a chat")
    require_extra("The terminal chat", "tui", "textual")
    require_extra("The terminal chat", "tui", "httpx", "uvicorn")
    from ._app import TerminalChatApp  # noqa: PLC0415 - the tui extra is optional

    if url is not None:
        app = TerminalChatApp(url, api_key=api_key, session_id=session_id, theme=theme)
        await app.run_async(headless=headless)
        return app.return_code or 0
    if target is not None:
        server = local_chat_server(target, store=store, api_key=api_key)
        starting = "Starting the chat…"
        failed = "The chat did not start"
    else:
        folder = Path(docs_dir or "docs")
        server = local_docs_server(folder, store=store, model=model, api_key=api_key)
        starting = f"Reading {folder} and building its index…"
        failed = "The docs assistant did not start"
    app = TerminalChatApp(
        api_key=api_key,
        session_id=session_id,
        theme=theme,
        starting=starting,
    )
    finished = anyio.Event()
    connected = False

    async def serve_folder() -> None:
        nonlocal connected
        try:
            async with server as base:
                connected = True
                app.connect(base)
                await finished.wait()
        except (AgentsKitChatError, ImportError, RuntimeError, OSError) as error:
            app.show_startup_failure(f"{failed}: {error}")

    async with anyio.create_task_group() as group:
        group.start_soon(serve_folder)
        try:
            await app.run_async(headless=headless)
        finally:
            finished.set()
            if not connected:
                group.cancel_scope.cancel()
    return app.return_code or 0
