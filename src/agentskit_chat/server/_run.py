"""Running a chat on uvicorn: one process, many workers, or with reloading.

:func:`serve` runs any chat target (what ``agentskit-chat serve`` runs): it builds the app
(:func:`~agentskit_chat.server.create_app`, or the docs assistant's app for a folder), opens its
stores and definition before the first request, reports a failure to start in one line, prunes
idle conversations hourly, and prints nothing but what ``on_ready`` prints.

With ``workers > 1`` or ``reload=True``, uvicorn starts processes that each build the app
again; they find it through :func:`worker_app` and the options in :data:`WORKER_ENV`, so the
target must then be a reference (``"app.py:chat"``) every process can import.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import anyio

from agentskit_chat.errors import AgentsKitChatError, ConfigurationError, StorageError
from agentskit_chat.storage import ChatStores, open_chat_stores

from ._app import ChatSite, create_app
from ._edge import RateLimits, redis_store_url
from ._target import ChatTarget, load_chat_target
from ._uvicorn import DEFAULT_HEADER_TIMEOUT_S, UVICORN_OPTIONS, set_header_timeout

__all__ = ["WORKER_ENV", "ServeError", "run", "serve", "worker_app"]

#: The environment variable that hands a worker process its options (JSON).
WORKER_ENV: Final = "AGENTSKIT_SERVE_WORKER"
#: The environment variable of the API key (never written into :data:`WORKER_ENV`).
API_KEY_ENV: Final = "AGENTSKIT_API_KEY"
#: How often idle conversations are deleted (with a retention).
_PRUNE_EVERY_S: Final = 3600.0
#: How long a worker may take to become ready before no "ready" line is printed.
_READY_TIMEOUT_S: Final = 300.0
#: Days an idle conversation is kept when the options do not say (as ``serve``'s default).
DEFAULT_RETENTION_DAYS: Final = 30.0


def _report(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)


class ServeError(RuntimeError):
    """The server did not start; why was printed on stderr (one line for our own errors).

    Attributes:
        reported: Whether the reason was already printed, so that nothing more need be.
    """

    def __init__(self, message: str, *, reported: bool = False) -> None:
        super().__init__(message)
        self.reported = reported


class _Served:
    """What a served process runs: the app, its chat site and the stores it owns."""

    def __init__(self, app: Any, stores: ChatStores | None) -> None:
        self.app = app
        self.site: ChatSite = app.state.chat_site
        self._stores = stores

    @property
    def stores(self) -> ChatStores:
        return self._stores or self.site.stores

    async def open(self) -> bool:
        """Open the stores and the chat; ``False`` (after one line on stderr) when one of our
        own checks failed. The user's own code's errors propagate with their traceback."""
        try:
            if self._stores is not None:
                await self._stores.open()
            await self.site.open()
        except (AgentsKitChatError, ImportError) as error:
            _report(str(error))
            if self._stores is not None:
                await self._stores.aclose()
            return False
        except BaseException:
            if self._stores is not None:
                await self._stores.aclose()
            raise
        return True

    async def aclose(self) -> None:
        try:
            await self.site.aclose()
        finally:
            if self._stores is not None:
                await self._stores.aclose()

    def with_lifespan(self) -> Any:
        """The app, whose lifespan opens and closes it and prunes hourly (for workers)."""

        async def serve(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "lifespan":
                await self.app(scope, receive, send)
                return
            await receive()  # lifespan.startup
            if not await self.open():
                await send({"type": "lifespan.startup.failed", "message": "startup failed"})
                return
            await send({"type": "lifespan.startup.complete"})
            async with anyio.create_task_group() as group:
                group.start_soon(_prune_hourly, self.stores)
                await receive()  # lifespan.shutdown
                group.cancel_scope.cancel()
            await self.aclose()
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
            print(f"warning: pruning old conversations failed: {error.message}", file=sys.stderr)
        await anyio.sleep(_PRUNE_EVERY_S)


def _rate_limits(options: Mapping[str, Any]) -> RateLimits | None:
    """The options' rate limits (``RateLimits`` fields; ``None``: off), in the store's Redis
    when the store is a Redis one and no other Redis is named."""
    given = options.get("rate_limits", {})
    if given is None:
        return None
    limits = RateLimits(**given)
    shared = redis_store_url(options.get("store"))
    if limits.redis_url is None and shared is not None:
        limits = dataclasses.replace(limits, redis_url=shared)
    return limits


def _edge_options(options: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "rate_limits": _rate_limits(options),
        "allowed_hosts": options.get("allowed_hosts") or None,
        "forwarded_allow_ips": tuple(options.get("forwarded_allow_ips") or ()),
    }


def _build(options: Mapping[str, Any], target: ChatTarget | None = None) -> _Served:
    """What to serve for ``options`` (see :func:`serve`).

    ``options["kind"]`` is ``"app"`` (``target``, or ``options["target"]``, a reference) or
    ``"docs"`` (a docs folder's assistant; the kind when ``"docs_dir"`` is given alone).
    Options left out take ``serve``'s defaults: ``retention_days`` 30, the default rate limits,
    the loopback host names without a key, no trusted proxy.
    """
    retention = options.get("retention_days", DEFAULT_RETENTION_DAYS) or None
    api_key = options.get("api_key") or None
    kind = options.get("kind", "docs" if "docs_dir" in options else "app")
    if kind == "docs":
        from agentskit_chat.assistant import create_docs_assistant  # noqa: PLC0415

        from ._docs_app import create_docs_assistant_app  # noqa: PLC0415

        stores = open_chat_stores(options["store"], retention_days=retention)
        index = options.get("index")
        assistant = create_docs_assistant(
            options["docs_dir"],
            index_path=None if index is None else Path(index),
            model=options.get("model"),
            agent=options.get("agent"),
            api_key=api_key,
            session_store=stores.ask_sessions,
        )
        app = create_docs_assistant_app(
            assistant,
            stores=stores,
            chat_timeout=options.get("timeout", 30.0),
            **_edge_options(options),
        )
        return _Served(app, stores)
    chosen = target if target is not None else load_chat_target(options["target"])
    app = create_app(
        chosen,
        store=options["store"],
        api_key=api_key,
        timeout=options.get("timeout", 30.0),
        retention_days=retention,
        **_edge_options(options),
    )
    return _Served(app, None)


def worker_app() -> Any:
    """The app of one worker process of :func:`serve` (an ASGI app factory for uvicorn).

    Its options come from :data:`WORKER_ENV`; the API key from :data:`API_KEY_ENV`.
    """
    options = json.loads(os.environ[WORKER_ENV])
    options["api_key"] = os.environ.get(API_KEY_ENV)
    return _build(options).with_lifespan()


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


def _announce_when_ready(url: str, ready: Callable[[str], None]) -> None:
    """Call ``ready(url)`` once a worker answers ``/healthz``."""
    import httpx  # noqa: PLC0415 - the server extra is optional

    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                ready(url)
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)


def _ignore(url: str) -> None:
    return None


def serve(
    target: ChatTarget | str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    store: str = "memory:",
    api_key: str | None = None,
    workers: int = 1,
    reload: bool = False,
    timeout: float = 30.0,
    retention_days: float | None = None,
    on_ready: Callable[[str], None] | None = None,
    rate_limits: RateLimits | None = RateLimits(),  # noqa: B008 - frozen, never mutated
    allowed_hosts: Sequence[str] | None = None,
    forwarded_allow_ips: Sequence[str] = (),
    header_timeout: float = DEFAULT_HEADER_TIMEOUT_S,
) -> None:
    """Serve a chat on uvicorn until Ctrl+C: the page at ``/``, ``/api/chat``, ``/healthz``.

    Args:
        target: A chat definition or factory (see :func:`create_app`), or a reference such as
            ``"app.py:chat"`` or ``"package.module:chat"`` — required with ``workers > 1`` or
            ``reload``, since every process imports it.
        host: The address to listen on. Anything but loopback needs ``api_key``.
        port: The port (``0`` picks a free one; ``on_ready`` is told the URL).
        store: Where sessions and messages live (``memory:``, ``sqlite:///chat.db``,
            ``postgresql://...``, ``redis://...``); PostgreSQL or Redis beyond one machine.
        api_key: The key clients send as ``Authorization: Bearer <key>``.
        workers: Worker processes sharing the socket and the store.
        reload: Restart when a file under the target's folder changes (development).
        timeout: The deadline of one chat turn, in seconds.
        retention_days: Delete conversations idle longer than this (hourly); ``None`` keeps them.
        on_ready: Told the URL once the server answers.
        rate_limits: Per client address: requests to ``/api/chat`` and new conversations (see
            :func:`~agentskit_chat.server.create_app`); in the store's Redis with a Redis
            store. ``None`` turns them off.
        allowed_hosts: The ``Host`` names clients may use; by default, without a key, the
            loopback names.
        forwarded_allow_ips: Proxies whose ``X-Forwarded-For`` names the client.
        header_timeout: Seconds a client may take to send a request's headers.

    Raises:
        ConfigurationError: an unusable target or option (a remote host without a key, an
            in-memory store or a non-reference target with several workers or reloading).
        ServeError: the server did not start (why was printed on stderr).
        ImportError: the ``server`` extra is not installed.

    Example::

        from agentskit_chat import serve
        serve("app.py:chat", store="sqlite:///chat.db")
    """
    options = {
        "kind": "app",
        "store": store,
        "timeout": timeout,
        "retention_days": retention_days,
        "rate_limits": None if rate_limits is None else dataclasses.asdict(rate_limits),
        "allowed_hosts": None if allowed_hosts is None else list(allowed_hosts),
        "forwarded_allow_ips": list(forwarded_allow_ips),
    }
    run(
        options,
        target,
        host=host,
        port=port,
        api_key=api_key,
        workers=workers,
        reload=reload,
        on_ready=on_ready,
        header_timeout=header_timeout,
    )


def run(
    options: Mapping[str, Any],
    target: ChatTarget | str | None,
    *,
    host: str,
    port: int,
    api_key: str | None,
    workers: int,
    reload: bool,
    on_ready: Callable[[str], None] | None,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT_S,
) -> None:
    """:func:`serve` with the options of :func:`build_app` (how ``agentskit-chat serve``
    serves a chat or a docs folder).

    Raises:
        ConfigurationError: see :func:`serve`.
    """
    from ._auth import is_loopback  # noqa: PLC0415

    if not api_key and not (host.lower() == "localhost" or is_loopback(host)):
        raise ConfigurationError(
            f"serving on {host} would expose the chat beyond this machine: set an API key "
            "with --api-key or AGENTSKIT_API_KEY, or use --host 127.0.0.1"
        )
    if workers < 1:
        raise ConfigurationError("workers must be at least 1")
    if workers > 1 and reload:
        raise ConfigurationError("reloading runs one worker: leave out workers or reload")
    chosen: dict[str, Any] = dict(options)
    several = workers > 1 or reload
    if chosen.get("kind", "app") == "app":
        if isinstance(target, str):
            chosen["target"] = target
        elif several:
            raise ConfigurationError(
                "with several workers or reloading, name the chat by reference "
                "(for example 'app.py:chat'), so every process can import it"
            )
    if several and chosen["store"] == "memory:":
        raise ConfigurationError(
            "memory: keeps sessions in one process: use sqlite:///, postgresql:// or redis:// "
            "with several workers or reloading"
        )
    if several and "target" in chosen:
        # A bad reference is reported here once, not by every worker uvicorn keeps restarting.
        load_chat_target(chosen["target"])
    ready = on_ready or _ignore
    import uvicorn  # noqa: PLC0415 - the server extra is optional

    if several:
        _serve_processes(
            chosen,
            host=host,
            port=port,
            workers=workers,
            reload=reload,
            api_key=api_key,
            ready=ready,
            header_timeout=header_timeout,
        )
        return
    definition = None if isinstance(target, str) else target
    served = _build({**chosen, "api_key": api_key}, definition)
    config = uvicorn.Config(
        served.app, host=host, port=port, log_level="warning", lifespan="off", **UVICORN_OPTIONS
    )
    set_header_timeout(config, header_timeout)
    server = _server(config, ready)

    async def main() -> bool | None:
        if not await served.open():
            return None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_prune_hourly, served.stores)
                await server.serve()
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await served.aclose()
        return bool(server.started)

    try:
        started = anyio.run(main)
    except SystemExit as exit_:  # uvicorn exits with 1 when it cannot bind (and says why)
        if exit_.code not in (0, None):
            raise ServeError("the server did not start") from None
        raise
    if started is None:
        raise ServeError("the server did not start", reported=True)
    if not started:
        raise ServeError("the server did not start")


def _serve_processes(
    options: Mapping[str, Any],
    *,
    host: str,
    port: int,
    workers: int,
    reload: bool,
    api_key: str | None,
    ready: Callable[[str], None],
    header_timeout: float,
) -> None:
    """Run uvicorn worker processes (or one reloading process) on one socket."""
    import uvicorn  # noqa: PLC0415 - the server extra is optional

    os.environ[WORKER_ENV] = json.dumps(options)
    if api_key:
        os.environ[API_KEY_ENV] = api_key
    reload_dirs: list[str] | None = None
    if reload:
        reference = str(options.get("target") or options.get("docs_dir") or ".")
        where = reference.rpartition(":")[0] or reference
        folder = Path(where).parent if where.endswith(".py") else Path(where)
        reload_dirs = [str((folder if folder.is_dir() else Path.cwd()).resolve())]
    config = uvicorn.Config(
        "agentskit_chat.server._run:worker_app",
        factory=True,
        host=host,
        port=port,
        workers=None if reload else workers,
        reload=reload,
        reload_dirs=reload_dirs,
        log_level="warning",
        lifespan="on",
        **UVICORN_OPTIONS,
    )
    set_header_timeout(config, header_timeout)
    from uvicorn.supervisors import ChangeReload, Multiprocess  # noqa: PLC0415

    try:
        sock = config.bind_socket()
    except SystemExit:  # uvicorn logs why it could not bind, then exits
        raise ServeError("the server did not start") from None
    url = _url(sock)
    started = threading.Event()

    def announce(url: str) -> None:
        started.set()
        ready(url)

    threading.Thread(target=_announce_when_ready, args=(url, announce), daemon=True).start()
    interrupted = False
    try:
        if reload:
            server = uvicorn.Server(config)
            ChangeReload(config, target=server.run, sockets=[sock]).run()
        else:
            Multiprocess(config, sockets=[sock]).run()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sock.close()
    if not started.is_set() and not interrupted:
        # The workers stopped before one answered (each reported why on stderr).
        raise ServeError("the server did not start")
