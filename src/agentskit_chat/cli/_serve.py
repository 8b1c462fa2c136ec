"""``agentskit-chat serve``: a chat on the web — your own definition, or a docs folder's assistant.

``serve app.py:chat`` (or ``package.module:chat``) serves a chat definition of yours with
:func:`agentskit_chat.serve`; ``serve docs`` (a folder) serves the docs assistant over that
folder of Markdown. Both serve the chat page at ``/``, ``POST /api/chat``, ``GET /healthz``; a
docs folder also ``/api/answer``, ``/api/ask``, ``/docs/...`` and ``/metrics``. The URL is printed
once the socket is bound. Listening on anything but a loopback address requires an API key
(``--api-key`` or ``AGENTSKIT_API_KEY``).

Chat sessions and their messages live in the store ``--store`` names (SQLite by default, in
``.agentskit/chat.db`` next to the chat file or under the docs folder; PostgreSQL or Redis for
many workers). With ``--workers N``, uvicorn runs N worker processes on one socket; each builds
its own app from the same reference and shares the store, so any worker can take any turn.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from agentskit_chat.errors import ConfigurationError

from ._ask import AgentOption

__all__ = ["serve_command"]

#: Where the default SQLite store lives, under the docs folder or next to the chat file.
_DEFAULT_STORE = Path(".agentskit") / "chat.db"


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _store_url(store: str | None, home: Path) -> str:
    if store:
        return store
    return f"sqlite:///{(home / _DEFAULT_STORE).resolve()}"


def _home_of(reference: str) -> Path:
    """The folder of a chat reference's file (the current folder for a module)."""
    where = reference.rpartition(":")[0] or reference
    return Path(where).parent if where.endswith(".py") else Path.cwd()


def serve_command(
    target: Annotated[
        str,
        typer.Argument(
            help="Your chat (app.py:chat, package.module:chat) or a folder of Markdown to "
            "answer from.",
            show_default=True,
        ),
    ] = "docs",
    *,
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The port (0 picks a free one).")
    ] = 8000,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="A docs folder's pydantic-ai model string; default: AGENTSKIT_MODEL, else "
            "the model-free extractive generator.",
        ),
    ] = None,
    agent: AgentOption = None,
    index: Annotated[
        Path | None,
        typer.Option("--index", help="Keep a docs folder's search index in this SQLite file."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="AGENTSKIT_API_KEY",
            help="Clients must send 'Authorization: Bearer <key>'. Required off loopback.",
            show_envvar=True,
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            envvar="AGENTSKIT_STORE",
            help="Where chat sessions, messages and Ask conversations live: sqlite:///path.db, "
            "postgresql://..., redis://... or memory:. Default: .agentskit/chat.db next to the "
            "chat file or under the docs folder.",
            show_envvar=True,
        ),
    ] = None,
    retention_days: Annotated[
        float,
        typer.Option(
            "--retention-days",
            min=0,
            help="Delete conversations idle longer than this many days (0 keeps them all).",
        ),
    ] = 30,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="Worker processes sharing the socket and the store (use PostgreSQL or Redis "
            "beyond one machine).",
        ),
    ] = 1,
    reload: Annotated[
        bool,
        typer.Option(
            "--reload", help="Restart when a file next to the chat changes (development)."
        ),
    ] = False,
    rate_limit: Annotated[
        float,
        typer.Option(
            "--rate-limit",
            min=0,
            help="Requests a second each client address may make to /api/chat, /api/answer "
            "and /api/ask together, in bursts of 12 seconds' worth; 0 turns rate limits off.",
        ),
    ] = 5.0,
    new_sessions_per_hour: Annotated[
        float,
        typer.Option(
            "--new-sessions-per-hour",
            min=0.001,
            help="Conversations each client address may start an hour, in bursts of ten "
            "minutes' worth.",
        ),
    ] = 360.0,
    rate_limit_store: Annotated[
        str | None,
        typer.Option(
            "--rate-limit-store",
            help="A redis:// URL keeping the rate limits for every worker. Default: the "
            "--store when it is redis://, otherwise each worker counts on its own.",
        ),
    ] = None,
    allowed_hosts: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A Host name clients may use (repeat it; '*.example.com', or '*' for any). "
            "Default without an API key: localhost, 127.0.0.1, [::1]; with one: any.",
        ),
    ] = None,
    forwarded_allow_ips: Annotated[
        str,
        typer.Option(
            "--forwarded-allow-ips",
            help="Proxies (addresses or networks, comma-separated, or '*') whose "
            "X-Forwarded-For names the client. Default: none, the socket peer is the client.",
        ),
    ] = "",
    header_timeout: Annotated[
        float,
        typer.Option(
            "--header-timeout",
            min=0.001,
            help="Seconds a client may take to send a request's headers.",
        ),
    ] = 10.0,
) -> None:
    """Serve a chat: the page at /, /api/chat and /healthz (a docs folder also /api/answer,
    /api/ask, /docs and /metrics)."""
    from agentskit_chat.server._edge import (  # noqa: PLC0415 - the server extra
        RateLimits,
        TrustedProxies,
    )
    from agentskit_chat.server._run import ServeError, run  # noqa: PLC0415 - the server extra

    folder = Path(target)
    is_docs = folder.is_dir()
    if not is_docs and ":" not in target and not target.endswith(".py"):
        _fail(
            f"{target}: the docs folder does not exist or is not a folder (to serve your own "
            "chat, name it: app.py:chat or package.module:chat)"
        )
    if not is_docs:
        for name, given in (("--model", model), ("--agent", agent), ("--index", index)):
            if given is not None:
                _fail(f"{name} applies to a docs folder; your chat chooses its own model", 2)
    if workers > 1 and index is not None:
        _fail("--index keeps one SQLite index per process: leave it out with --workers", 2)
    home = folder if is_docs else _home_of(target)
    options: dict[str, Any] = {"kind": "app"}
    if is_docs:
        options = {
            "kind": "docs",
            "docs_dir": str(folder),
            "index": None if index is None else str(index),
            "model": model,
            "agent": agent,
        }
    what = f"the docs assistant for {folder}" if is_docs else target

    def ready(url: str) -> None:
        shown = f" ({workers} workers)" if workers > 1 else ""
        shown += " (reloading on changes)" if reload else ""
        typer.echo(f"Serving {what} at {url}{shown}")
        reference = "" if target == "docs" else f" {target}"
        typer.echo(f"  Open {url}/ in a browser to chat, or run: agentskit-chat chat --url {url}")
        if not is_docs:
            typer.echo(
                f"  (or chat in this terminal without a server: agentskit-chat chat{reference})"
            )
        typer.echo(f"  POST {url}/api/chat     turn protocol: submission -> NDJSON snapshots")
        if is_docs:
            typer.echo(f'  POST {url}/api/answer   {{"question": "..."}} -> answer envelope')
            typer.echo(f"  POST {url}/api/ask      Ask protocol, NDJSON events")
            typer.echo(f"  GET  {url}/healthz      GET {url}/metrics")
        else:
            typer.echo(f"  GET  {url}/healthz")
        typer.echo("Press Ctrl+C to stop.")

    options.update(store=_store_url(store, home), retention_days=retention_days or None)
    proxies = [entry.strip() for entry in forwarded_allow_ips.split(",") if entry.strip()]
    try:
        TrustedProxies(proxies)  # checked here, once, before any worker starts
        limits = (
            None
            if rate_limit == 0
            else RateLimits(
                request_burst=max(1, round(rate_limit * 12)),
                requests_per_second=rate_limit,
                session_burst=max(1, round(new_sessions_per_hour / 6)),
                sessions_per_hour=new_sessions_per_hour,
                redis_url=rate_limit_store,
            )
        )
    except ConfigurationError as error:
        _fail(str(error), 2)
    options.update(
        rate_limits=None if limits is None else dataclasses.asdict(limits),
        allowed_hosts=allowed_hosts or None,
        forwarded_allow_ips=proxies,
    )
    try:
        run(
            options,
            target,
            host=host,
            port=port,
            api_key=api_key,
            workers=workers,
            reload=reload,
            on_ready=ready,
            header_timeout=header_timeout,
        )
    except ConfigurationError as error:
        _fail(str(error), 2)
    except ServeError as error:
        if error.reported:
            raise typer.Exit(1) from None
        _fail(str(error))
    except ImportError as error:
        _fail(str(error))
