"""``agentskit-chat serve``: the docs assistant over HTTP, with uvicorn.

Serves ``POST /api/ask``, ``POST /api/answer``, ``GET /healthz`` and ``GET /metrics`` for one
docs folder and prints the URL once the socket is bound. Listening on anything but a loopback
address requires an API key (``--api-key`` or ``AGENTSKIT_API_KEY``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from agentskit_chat.assistant import DocsAssistant, create_docs_assistant
from agentskit_chat.errors import AgentsKitChatError, ConfigurationError
from agentskit_chat.server import create_docs_assistant_app, is_loopback

from ._ask import AgentOption

__all__ = ["serve_command"]

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


def _owning_lifespan(app: Any, assistant: DocsAssistant) -> Any:
    """``app``, with a lifespan that opens ``assistant`` and reports a failure in one line."""

    async def serve(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        await receive()  # lifespan.startup
        try:
            await assistant.open()
        except (AgentsKitChatError, ImportError) as error:
            typer.echo(f"error: {error}", err=True)
            await send({"type": "lifespan.startup.failed", "message": "startup failed"})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        await assistant.aclose()
        await send({"type": "lifespan.shutdown.complete"})

    return serve


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
) -> None:
    """Serve the docs assistant: /api/answer, /api/ask, /healthz and /metrics."""
    if not api_key and not _is_local(host):
        _fail(_NEEDS_KEY.format(host=host), 2)
    if not docs_dir.is_dir():
        _fail(f"{docs_dir}: the docs folder does not exist or is not a folder")
    try:
        import uvicorn  # noqa: PLC0415 - the server extra is optional

        assistant = create_docs_assistant(
            docs_dir, index_path=index, model=model, agent=agent, api_key=api_key or None
        )
        app = create_docs_assistant_app(assistant)
    except ConfigurationError as error:
        _fail(str(error), 2)
    except ImportError as error:
        _fail(str(error))

    def ready(url: str) -> None:
        typer.echo(f"Serving the docs assistant for {docs_dir} at {url}")
        typer.echo(f'  POST {url}/api/answer   {{"question": "..."}} -> answer envelope')
        typer.echo(f"  POST {url}/api/ask      Ask protocol, NDJSON events")
        typer.echo(f"  GET  {url}/healthz      GET {url}/metrics")
        typer.echo("Press Ctrl+C to stop.")

    config = uvicorn.Config(
        _owning_lifespan(app, assistant),
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
    )
    server = _server(config, ready)
    try:
        server.run()
    except SystemExit as exit_:  # uvicorn exits with 3 when it cannot start
        if exit_.code not in (0, None):
            _fail("the server did not start")
        raise
