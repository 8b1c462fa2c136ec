"""Running the terminal chat: against a server's URL, or a docs folder served in process."""

from __future__ import annotations

from pathlib import Path

import anyio

from agentskit_chat._drivers import require_extra
from agentskit_chat.errors import AgentsKitChatError, ConfigurationError

from ._local import local_docs_server
from ._theme import ThemeChoice

__all__ = ["run_terminal_chat"]


async def run_terminal_chat(
    *,
    url: str | None = None,
    docs_dir: str | Path | None = None,
    api_key: str | None = None,
    session_id: str | None = None,
    theme: ThemeChoice = "dark",
    store: str = "memory:",
    model: str | None = None,
    headless: bool = False,
) -> int:
    """Run the terminal chat until the user quits; return the exit status (0 after Ctrl+C).

    Exactly one of ``url`` (a running server, e.g. ``agentskit-chat serve``) and ``docs_dir``
    (a folder whose docs assistant is served in process, on 127.0.0.1, while the chat runs).
    The app is on screen at once; with a folder, the input opens when its assistant is ready.

    Args:
        url: The server to talk to.
        docs_dir: The folder of Markdown to answer from.
        api_key: Sent as ``Authorization: Bearer <key>`` (and required by a local server).
        session_id: A stored session to continue.
        theme: ``dark`` or ``light``.
        store: Where a local server keeps sessions (``memory:`` by default).
        model: A local server's pydantic-ai model string.
        headless: Run without a terminal (for tests).

    Raises:
        ConfigurationError: both or neither of ``url`` and ``docs_dir``.
        ImportError: Textual (the ``tui`` extra) or httpx/uvicorn (the ``server`` extra) is
            missing; the message names the extra to install.
    """
    if (url is None) == (docs_dir is None):
        raise ConfigurationError("give either a server URL or a docs folder, not both")
    require_extra("The terminal chat", "tui", "textual")
    require_extra("The terminal chat", "tui", "httpx", "uvicorn")
    from ._app import TerminalChatApp  # noqa: PLC0415 - the tui extra is optional

    if url is not None:
        app = TerminalChatApp(url, api_key=api_key, session_id=session_id, theme=theme)
        await app.run_async(headless=headless)
        return app.return_code or 0
    folder = Path(docs_dir or "docs")
    app = TerminalChatApp(
        api_key=api_key,
        session_id=session_id,
        theme=theme,
        starting=f"Reading {folder} and building its index…",
    )
    finished = anyio.Event()
    connected = False

    async def serve_folder() -> None:
        nonlocal connected
        try:
            async with local_docs_server(folder, store=store, model=model, api_key=api_key) as base:
                connected = True
                app.connect(base)
                await finished.wait()
        except (AgentsKitChatError, ImportError, RuntimeError, OSError) as error:
            app.show_startup_failure(f"The docs assistant did not start: {error}")

    async with anyio.create_task_group() as group:
        group.start_soon(serve_folder)
        try:
            await app.run_async(headless=headless)
        finally:
            finished.set()
            if not connected:
                group.cancel_scope.cancel()
    return app.return_code or 0
