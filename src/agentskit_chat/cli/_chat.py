"""``agentskit-chat chat``: the terminal chat, with a docs folder or a running server.

``chat docs`` serves the folder's docs assistant in process (on 127.0.0.1, only while the chat
runs) and talks to it over HTTP; ``chat --url URL`` talks to a server that is already running,
such as ``agentskit-chat serve``. Ctrl+C quits with status 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, NoReturn

import anyio
import typer

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import TurnSnapshotCursor
from agentskit_chat.tui import run_terminal_chat

__all__ = ["chat_command"]


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def chat_command(
    docs_dir: Annotated[
        Path | None,
        typer.Argument(
            help="The folder of Markdown to chat with (default: docs). Leave it out with --url.",
            show_default=False,
        ),
    ] = None,
    *,
    url: Annotated[
        str | None,
        typer.Option(
            "--url", help="Chat with a running server instead, e.g. http://127.0.0.1:8000."
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="AGENTSKIT_API_KEY",
            help="Sent as 'Authorization: Bearer <key>' (what the server's --api-key set).",
            show_envvar=True,
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", help="Continue this stored session instead of a new one."),
    ] = None,
    theme: Annotated[
        Literal["dark", "light"], typer.Option("--theme", help="The colour palette.")
    ] = "dark",
    store: Annotated[
        str,
        typer.Option(
            "--store",
            help="Where a docs folder's sessions live: memory: (default), sqlite:///chat.db, ...",
        ),
    ] = "memory:",
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="A docs folder's pydantic-ai model; default: AGENTSKIT_MODEL, else the "
            "model-free extractive generator.",
        ),
    ] = None,
) -> None:
    """Chat with the docs assistant in the terminal (a docs folder, or --url of a server)."""
    if url is not None and docs_dir is not None:
        _fail("give a docs folder or --url, not both", 2)
    if url is not None and not url.startswith(("http://", "https://")):
        _fail(f"--url must be an http:// or https:// URL, not {url!r}", 2)
    if session is not None:
        try:
            TurnSnapshotCursor(session)
        except ValueError:
            _fail(f"--session {session!r} is not a valid session id", 2)
    folder = None if url is not None else (docs_dir or Path("docs"))
    if folder is not None and not folder.is_dir():
        hint = " (run it from your project, or name the folder: agentskit-chat chat DOCS_DIR)"
        _fail(f"{folder}: the docs folder does not exist or is not a folder{hint}", 2)

    async def chat() -> int:
        return await run_terminal_chat(
            url=url,
            docs_dir=folder,
            api_key=api_key,
            session_id=session,
            theme=theme,
            store=store,
            model=model,
        )

    try:
        status = anyio.run(chat)
    except ConfigurationError as error:
        _fail(str(error), 2)
    except ImportError as error:
        _fail(str(error))
    raise typer.Exit(status)
