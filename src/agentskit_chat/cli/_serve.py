"""``agentskit-chat serve``: the docs assistant over HTTP, with uvicorn.

Serves ``POST /api/chat``, ``POST /api/ask``, ``POST /api/answer``, ``GET /healthz`` and
``GET /metrics`` for one docs folder and prints the URL once the socket is bound. Listening on
anything but a loopback address requires an API key (``--api-key`` or ``AGENTSKIT_API_KEY``).

Chat sessions, their messages and Ask conversations live in the store ``--store`` names
(SQLite by default, in ``.agentskit/chat.db`` under the docs folder; PostgreSQL or Redis for
many workers). With ``--workers N``, uvicorn runs N worker processes on one socket; each builds
its own assistant from the same folder and shares the store, so any worker can take any turn.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import anyio
import typer

from agentskit_chat.assistant import DocsAssistant, create_docs_assistant
from agentskit_chat.errors import AgentsKitChatError, ConfigurationError, StorageError
from agentskit_chat.server import create_docs_assistant_app, is_loopback
from agentskit_chat.storage import ChatStores, open_chat_stores

from ._ask import AgentOption

__all__ = ["WORKER_ENV", "serve_command", "worker_app"]

#: The environment variable that hands a worker process its options (JSON).
WORKER_ENV = "AGENTSKIT_SERVE_WORKER"
#: How often ``serve`` deletes conversations idle longer than ``--retention-days``.
_PRUNE_EVERY_S = 3600.0
#: Where the default SQLite store lives, under the docs folder.
_DEFAULT_STORE = Path(".agentskit") / "chat.db"

_NEEDS_KEY = (
    "serving on {host} would expose the assistant beyond this machine: "
    "set an API key with --api-key or AGENTSKIT_API_KEY, or use --host 127.0.0.1"
)


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _is_local(host: str) -> bool:
    return host.lower() == "localhost" or is_loopback(host)


def _url(sock: socket.socket) -> str:
    address = sock.getsockname()
    host, port = address[0], address[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _server(config: Any, on_ready: Callable[[str], None]) -> Any:
    import uvicorn  # noqa: PLC0415 - the server extra is optional

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and self.servers and self.servers[0].sockets:
                on_ready(_url(self.servers[0].sockets[0]))

    return Server(config)


def _owning_lifespan(app: Any, assistant: DocsAssistant, stores: ChatStores) -> Any:
    """``app``, with a lifespan that opens ``stores`` and ``assistant`` and closes them again,
    reporting a failure to start in one line."""

    async def serve(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        await receive()  # lifespan.startup
        try:
            await stores.open()
            await assistant.open()
        except (AgentsKitChatError, ImportError) as error:
            typer.echo(f"error: {error}", err=True)
            await stores.aclose()
            await send({"type": "lifespan.startup.failed", "message": "startup failed"})
            return
        await send({"type": "lifespan.startup.complete"})
        async with anyio.create_task_group() as group:
            group.start_soon(_prune_hourly, stores)
            await receive()  # lifespan.shutdown
            group.cancel_scope.cancel()
        await assistant.aclose()
        await stores.aclose()
        await send({"type": "lifespan.shutdown.complete"})

    return serve


async def _prune_hourly(stores: ChatStores) -> None:
    """Delete idle conversations now and then every hour (nothing without a retention)."""
    if stores.retention_days is None:
        return
    while True:
        try:
            await stores.prune()
        except StorageError as error:
            typer.echo(f"warning: pruning old conversations failed: {error.message}", err=True)
        await anyio.sleep(_PRUNE_EVERY_S)


def _build(options: dict[str, Any]) -> Any:
    """The served app for ``options`` (what the command line chose), with its lifespan."""
    retention = options.get("retention_days")
    stores = open_chat_stores(options["store"], retention_days=retention or None)
    index = options.get("index")
    assistant = create_docs_assistant(
        options["docs_dir"],
        index_path=None if index is None else Path(index),
        model=options.get("model"),
        agent=options.get("agent"),
        api_key=options.get("api_key") or None,
        session_store=stores.ask_sessions,
    )
    app = create_docs_assistant_app(assistant, stores=stores)
    return _owning_lifespan(app, assistant, stores)


def worker_app() -> Any:
    """The app of one worker process of ``serve --workers N`` (an ASGI app factory).

    Its options come from :data:`WORKER_ENV`, which ``serve`` sets before uvicorn starts the
    workers; the API key is read from ``AGENTSKIT_API_KEY`` so it never lands in that JSON.
    """
    options = json.loads(os.environ[WORKER_ENV])
    options["api_key"] = os.environ.get("AGENTSKIT_API_KEY")
    return _build(options)


def _store_url(store: str | None, docs_dir: Path) -> str:
    if store:
        return store
    return f"sqlite:///{(docs_dir / _DEFAULT_STORE).resolve()}"


def serve_command(
    docs_dir: Annotated[
        Path, typer.Argument(help="The folder of Markdown to answer from.", show_default=True)
    ] = Path("docs"),
    *,
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The port (0 picks a free one).")
    ] = 8000,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="A pydantic-ai model string; default: AGENTSKIT_MODEL, else the model-free "
            "extractive generator.",
        ),
    ] = None,
    agent: AgentOption = None,
    index: Annotated[
        Path | None,
        typer.Option("--index", help="Keep the search index in this SQLite file."),
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
            "postgresql://..., redis://... or memory:. Default: DOCS/.agentskit/chat.db.",
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
) -> None:
    """Serve the docs assistant: the chat page at /, /api/chat, /api/answer, /api/ask, /healthz
    and /metrics."""
    if not api_key and not _is_local(host):
        _fail(_NEEDS_KEY.format(host=host), 2)
    if not docs_dir.is_dir():
        _fail(f"{docs_dir}: the docs folder does not exist or is not a folder")
    if workers > 1 and index is not None:
        _fail("--index keeps one SQLite index per process: leave it out with --workers", 2)
    options: dict[str, Any] = {
        "docs_dir": str(docs_dir),
        "store": _store_url(store, docs_dir),
        "index": None if index is None else str(index),
        "model": model,
        "agent": agent,
        "retention_days": retention_days,
    }
    try:
        import uvicorn  # noqa: PLC0415 - the server extra is optional

        app = _build({**options, "api_key": api_key})
    except ConfigurationError as error:
        _fail(str(error), 2)
    except ImportError as error:
        _fail(str(error))

    def ready(url: str) -> None:
        shown = f" ({workers} workers)" if workers > 1 else ""
        typer.echo(f"Serving the docs assistant for {docs_dir} at {url}{shown}")
        typer.echo(f"  Open {url}/ in a browser to chat, or run: agentskit-chat chat --url {url}")
        typer.echo(f"  POST {url}/api/chat     turn protocol: submission -> NDJSON snapshots")
        typer.echo(f'  POST {url}/api/answer   {{"question": "..."}} -> answer envelope')
        typer.echo(f"  POST {url}/api/ask      Ask protocol, NDJSON events")
        typer.echo(f"  GET  {url}/healthz      GET {url}/metrics")
        typer.echo("Press Ctrl+C to stop.")

    if workers > 1:
        _serve_workers(options, host=host, port=port, workers=workers, api_key=api_key, ready=ready)
        return
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = _server(config, ready)
    try:
        server.run()
    except SystemExit as exit_:  # uvicorn exits with 3 when it cannot start
        if exit_.code not in (0, None):
            _fail("the server did not start")
        raise


def _announce_when_ready(url: str, ready: Callable[[str], None]) -> None:
    """Call ``ready(url)`` once a worker answers ``/healthz`` (each builds its own index)."""
    import httpx  # noqa: PLC0415 - the server extra is optional

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                ready(url)
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)


def _serve_workers(
    options: dict[str, Any],
    *,
    host: str,
    port: int,
    workers: int,
    api_key: str | None,
    ready: Callable[[str], None],
) -> None:
    """Run ``workers`` uvicorn worker processes on one socket, each building the app."""
    import uvicorn  # noqa: PLC0415 - the server extra is optional

    os.environ[WORKER_ENV] = json.dumps(options)
    if api_key:
        os.environ["AGENTSKIT_API_KEY"] = api_key
    config = uvicorn.Config(
        "agentskit_chat.cli._serve:worker_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        lifespan="on",
    )
    from uvicorn.supervisors import Multiprocess  # noqa: PLC0415

    try:
        sock = config.bind_socket()
    except SystemExit:  # uvicorn logs why it could not bind, then exits
        _fail("the server did not start")
    url = _url(sock)
    threading.Thread(target=_announce_when_ready, args=(url, ready), daemon=True).start()
    try:
        Multiprocess(config, sockets=[sock]).run()
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
