"""A chat definition or a docs folder's assistant, served in process for the terminal chat.

The terminal always talks HTTP, so a chat is served exactly like ``agentskit-chat serve``
would serve it (the same app, the same ``/api/chat``), on 127.0.0.1 with a port the system
picks, by a uvicorn server in the caller's own event loop. It stops when the block ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import anyio

from agentskit_chat._drivers import require_extra
from agentskit_chat.assistant import create_docs_assistant
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.server import (
    ChatTarget,
    create_app,
    create_docs_assistant_app,
    load_chat_target,
)
from agentskit_chat.storage import open_chat_stores

__all__ = ["local_chat_server", "local_docs_server"]

_STARTUP_TIMEOUT_S: Final = 300.0


def _quiet_server(config: Any) -> Any:
    import uvicorn  # noqa: PLC0415 - the server extra is optional

    class QuietServer(uvicorn.Server):
        """A uvicorn server that leaves the process's signals alone: the terminal app owns
        Ctrl+C, and the server stops when its block ends."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return QuietServer(config)


@contextlib.asynccontextmanager
async def _serve_opened(app: Any) -> AsyncIterator[str]:
    """Serve ``app`` (whose chat site is open) on 127.0.0.1 and yield its base URL."""
    import uvicorn  # noqa: PLC0415 - the server extra is optional

    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        lifespan="off",
        log_level="critical",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    server = _quiet_server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        try:
            with anyio.fail_after(_STARTUP_TIMEOUT_S):
                while not server.started:
                    if server.should_exit:
                        raise RuntimeError("the local chat server did not start")
                    await anyio.sleep(0.01)
            port = server.servers[0].sockets[0].getsockname()[1]
            yield f"http://127.0.0.1:{port}"
        finally:
            # uvicorn finishes the open requests, then serve() returns.
            server.should_exit = True


@contextlib.asynccontextmanager
async def local_chat_server(
    target: ChatTarget | str,
    *,
    store: str = "memory:",
    api_key: str | None = None,
) -> AsyncIterator[str]:
    """Serve a chat definition on 127.0.0.1 and yield its base URL (what
    ``agentskit-chat chat app.py:chat`` talks to).

    The definition is opened (its factory called, its context manager entered) before the URL
    is yielded, and closed with the server when the block ends.

    Args:
        target: A chat definition, a factory, or a reference such as ``"app.py:chat"``.
        store: Where chat sessions live (``memory:`` by default).
        api_key: The key clients must send (the terminal client sends the same one).

    Raises:
        ConfigurationError: the reference or the definition is unusable.
        ImportError: uvicorn or httpx is missing (names the ``server`` extra).
        RuntimeError: the server did not start.
    """
    require_extra("The terminal chat", "tui", "uvicorn", "httpx")
    chosen = load_chat_target(target) if isinstance(target, str) else target
    app = create_app(chosen, store=store, api_key=api_key or None)
    async with app.state.chat_site, _serve_opened(app) as base:
        yield base


@contextlib.asynccontextmanager
async def local_docs_server(
    docs_dir: str | Path,
    *,
    store: str = "memory:",
    model: str | None = None,
    api_key: str | None = None,
) -> AsyncIterator[str]:
    """Serve the docs assistant of ``docs_dir`` on 127.0.0.1 and yield its base URL.

    The assistant is built (the folder read, the index made) before the URL is yielded; the
    server, the assistant and the stores are closed when the block ends.

    Args:
        docs_dir: The folder of Markdown.
        store: Where chat sessions live (``memory:`` by default; ``sqlite:///path.db`` keeps
            them, so a session can be continued later).
        model: A pydantic-ai model string; by default ``AGENTSKIT_MODEL``, else the model-free
            extractive generator.
        api_key: The key clients must send (the terminal client sends the same one).

    Raises:
        ConfigurationError: ``docs_dir`` is not a folder, or the assistant's options are
            invalid.
        ImportError: uvicorn or httpx is missing (names the ``server`` extra).
        RuntimeError: the server did not start.
    """
    require_extra("The terminal chat of a docs folder", "tui", "uvicorn", "httpx")

    folder = Path(docs_dir)
    if not folder.is_dir():
        raise ConfigurationError(f"{folder}: the docs folder does not exist or is not a folder")
    stores = open_chat_stores(store)
    assistant = create_docs_assistant(
        folder, model=model, api_key=api_key or None, session_store=stores.ask_sessions
    )
    async with stores, assistant:
        app = create_docs_assistant_app(assistant, stores=stores)
        async with app.state.chat_site, _serve_opened(app) as base:
            yield base
