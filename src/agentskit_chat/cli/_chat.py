"""``agentskit-chat chat``: the terminal chat, with your chat, a docs folder or a running server.

``chat app.py:chat`` serves your chat definition in process (on 127.0.0.1, only while the chat
runs), ``chat docs`` the folder's docs assistant, and the terminal talks to it over HTTP;
``chat --url URL`` talks to a server that is already running, such as ``agentskit-chat
serve``. Ctrl+C quits with status 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, NoReturn

import typer

from agentskit_chat.errors import ConfigurationError

if TYPE_CHECKING:
    from agentskit_chat.server import ChatTarget

__all__ = ["chat_command"]


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def chat_command(
    target: Annotated[
        str | None,
        typer.Argument(
            help="Your chat (app.py:chat, package.module:chat) or a folder of Markdown "
            "(default: docs). Leave it out with --url.",
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
            help="Where the chat's sessions live: memory: (default), sqlite:///chat.db, ...",
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
    """Chat in the terminal: with your chat (app.py:chat), a docs folder, or --url of a server."""
    # Imported when the command runs, so that --help and the other commands start fast.
    import anyio  # noqa: PLC0415 - start-up time

    from agentskit_chat.protocol import TurnSnapshotCursor  # noqa: PLC0415 - start-up time

    if url is not None and target is not None:
        _fail("give a chat, a docs folder or --url, not more than one", 2)
    if url is not None and not url.startswith(("http://", "https://")):
        _fail(f"--url must be an http:// or https:// URL, not {url!r}", 2)
    if session is not None:
        try:
            TurnSnapshotCursor(session)
        except ValueError:
            _fail(f"--session {session!r} is not a valid session id", 2)
    definition: ChatTarget | None = None
    folder: Path | None = None
    if (
        target is not None
        and not Path(target).is_dir()
        and (":" in target or target.endswith(".py"))
    ):
        if model is not None:
            _fail("--model applies to a docs folder; your chat chooses its own model", 2)
        try:
            from agentskit_chat.server import load_chat_target  # noqa: PLC0415 - start-up

            # Imported here, before the screen opens, so an error in it reads as usual.
            definition = load_chat_target(target)
        except ConfigurationError as error:
            _fail(str(error), 2)
    elif url is None:
        folder = Path(target or "docs")
        if not folder.is_dir():
            hint = (
                " (run it from your project, name the folder: agentskit-chat chat DOCS_DIR,"
                " or name your chat: agentskit-chat chat app.py:chat)"
            )
            _fail(f"{folder}: the docs folder does not exist or is not a folder{hint}", 2)

    async def chat() -> int:
        from agentskit_chat.tui import run_terminal_chat  # noqa: PLC0415 - the tui extra

        return await run_terminal_chat(
            url=url,
            docs_dir=folder,
            target=definition,
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
