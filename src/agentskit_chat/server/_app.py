"""Any chat definition on the web: the page, the chat handler, storage and health in one app.

:func:`create_app` is what ``agentskit-chat serve app.py:chat`` runs, and what a FastAPI or
Starlette host mounts:

- ``GET /``: the chat page, with the definition's title, words, logo and theme
  (:class:`~agentskit_chat.conversation.ChatPage`); ``GET /static/...``: its files;
- ``POST /api/chat`` and ``GET /api/chat?sessionId=``: the turn protocol, with sessions and
  messages in one :class:`~agentskit_chat.storage.ChatStores` backend, so any worker can take
  any turn;
- ``GET /healthz``: readiness (the definition is open, the store answers a round trip within
  two seconds, and every check given in ``checks`` passes);
- ``GET /metrics``: the chat's metrics for Prometheus (turns, outcomes, latency, store errors,
  busy and rate-limited refusals, 5xx responses), and its 5xx responses, failed turns and
  store errors as log records (:mod:`agentskit_chat.server._observe`).

Every route but ``/``, ``/static/...`` and ``/healthz`` follows one rule: with an API key,
clients send ``Authorization: Bearer <key>``; without one, only loopback clients are served
(or the host's own ``authenticate`` decides, for the chat routes). In front of all of them the
edge (:mod:`agentskit_chat.server._edge`) decides the client's address (trusted proxies only),
checks the ``Host`` name, and rate-limits the data routes per client.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio

from agentskit_chat.assistant import Caller
from agentskit_chat.conversation import ChatDefinition
from agentskit_chat.errors import ConfigurationError
from agentskit_chat.runtime import ChatMemory
from agentskit_chat.service import Authenticated, AuthResult, Refused
from agentskit_chat.storage import ChatStores, open_chat_stores

from ._asgi import ASGIApp, Receive, Scope, Send, route_path
from ._auth import ApiKeyGate
from ._chat_app import ChatAuthenticate, create_chat_app
from ._edge import (
    Edge,
    EdgeLimiter,
    HostRule,
    RateLimits,
    TrustedProxies,
    check_names,
    new_session_limit,
    redis_store_url,
)
from ._healthz import HealthCheck, create_healthz_app
from ._observe import Observe, Watch
from ._target import ChatTarget, ChatTargetHolder
from ._watched_stores import WatchedMemory, WatchedSessions, ping_store
from ._web_page import (
    PageBundle,
    StaticAssets,
    WebPage,
    method_not_allowed,
    not_found,
    render_page_bundle,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from starlette.applications import Starlette
    from starlette.routing import BaseRoute

__all__ = ["ChatSite", "create_app"]

#: The routes every client may call: the page and its files hold no data, and a load balancer
#: probes readiness.
_PUBLIC: Final = frozenset({"/", "/healthz"})
_PUBLIC_PREFIXES: Final = ("/static/",)
#: Routes that authenticate themselves, after their protocol's method and media checks.
_SELF_AUTHENTICATED: Final = frozenset({"/api/ask", "/api/chat"})
#: The deadline of ``/healthz``'s round trip to the store, in seconds.
STORE_PING_TIMEOUT: Final = 2.0


class Guard:
    """Refuses every caller the gate does not admit, on every route but the public ones."""

    def __init__(self, app: ASGIApp, gate: ApiKeyGate) -> None:
        self._app = app
        self._gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = route_path(scope)
        if (
            scope.get("type") == "http"
            and path not in _PUBLIC
            and not path.startswith(_PUBLIC_PREFIXES)
            and path not in _SELF_AUTHENTICATED
            and self._gate.admit(scope) is None
        ):
            await self._gate.refuse(scope, send)
            return
        await self._app(scope, receive, send)


class ChatSite:
    """The state of one app made by :func:`create_app`: the opened definition, the stores,
    and the page rendered for the definition (once per definition).

    It is ``app.state.chat_site``; a host that runs the app without its lifespan (an
    in-process server, a test) opens it with ``async with app.state.chat_site:``, or lets the
    first request open it (``open_on_first_use``, the default).

    Args:
        holder: The chat target.
        stores: Where sessions and messages live.
        owns_stores: Whether opening the site opens (and closing closes) ``stores``.
        open_on_first_use: Whether a request to a site nothing opened opens it (or a
            function deciding it at that moment); otherwise the site answers ``500`` until the
            app's lifespan or the host opens it.
    """

    def __init__(
        self,
        holder: ChatTargetHolder,
        stores: ChatStores,
        *,
        owns_stores: bool,
        open_on_first_use: bool | Callable[[], bool] = True,
    ) -> None:
        self._holder = holder
        self._open_on_first_use = open_on_first_use
        self.stores = stores
        self._owns_stores = owns_stores
        self._bundle: tuple[ChatDefinition, PageBundle] | None = None
        self._depth = 0
        self._lock = anyio.Lock()
        self._closers: list[Callable[[], Awaitable[None]]] = []

    def close_with(self, close: Callable[[], Awaitable[None]]) -> None:
        """Also call ``close`` when the site closes (errors ignored): a resource of the app,
        such as its rate limiter's Redis client."""
        self._closers.append(close)

    @property
    def is_open(self) -> bool:
        """Whether the definition is ready to serve."""
        return self._holder.is_open

    @property
    def definition(self) -> ChatDefinition:
        """The served definition.

        Raises:
            ConfigurationError: the site is not open.
        """
        return self._holder.definition

    async def ensure_open(self) -> None:
        """Open the site on first use when no lifespan opened it (an app called directly, as
        by httpx's ASGI transport in a test); it then stays open for the process.

        Raises:
            ConfigurationError: the site is not open and opens only with the app.
        """
        if self._holder.is_open:
            return
        allowed = self._open_on_first_use
        if not (allowed() if callable(allowed) else allowed):
            raise ConfigurationError("The chat is not open yet.")
        async with self._lock:
            if not self._holder.is_open:
                await self.open()

    async def current_page(self) -> PageBundle:
        """:meth:`page`, opening the site first if nothing did."""
        await self.ensure_open()
        return self.page()

    async def current_definition(self) -> ChatDefinition:
        """:attr:`definition`, opening the site first if nothing did."""
        await self.ensure_open()
        return self._holder.definition

    def page(self) -> PageBundle:
        """The page of the served definition (rendered on first use).

        Raises:
            ConfigurationError: the site is not open, or the page's logo cannot be read.
        """
        definition = self._holder.definition
        cached = self._bundle
        if cached is None or cached[0] is not definition:
            cached = (definition, render_page_bundle(definition.page, definition.manifest))
            self._bundle = cached
        return cached[1]

    async def open(self) -> None:
        """Open the stores (when the site owns them) and the definition, and render its page
        (so a bad logo fails at start, not on a user's screen). Nested opens are counted."""
        self._depth += 1
        if self._depth > 1:
            return
        try:
            if self._owns_stores:
                await self.stores.open()
            await self._holder.open()
            self.page()
        except BaseException:
            self._depth = 0
            with contextlib.suppress(Exception):
                await self._holder.aclose()
            if self._owns_stores:
                await self.stores.aclose()
            raise

    async def aclose(self) -> None:
        """Close what :meth:`open` opened (when the last nested open ends)."""
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth > 0:
            return
        try:
            await self._holder.aclose()
        finally:
            if self._owns_stores:
                await self.stores.aclose()
            for close in self._closers:
                with contextlib.suppress(Exception):
                    await close()

    async def __aenter__(self) -> ChatSite:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _stores(store: str | ChatStores, retention_days: float | None) -> tuple[ChatStores, bool]:
    if isinstance(store, ChatStores):
        return store, False
    if not isinstance(store, str):
        raise ConfigurationError("store must be a store URL or ChatStores.")
    return open_chat_stores(store, retention_days=retention_days), True


def create_app(
    target: ChatTarget | ChatSite,
    *,
    store: str | ChatStores = "memory:",
    api_key: str | None = None,
    authenticate: ChatAuthenticate | None = None,
    timeout: float = 30.0,
    retention_days: float | None = None,
    routes: Sequence[BaseRoute] = (),
    checks: Mapping[str, HealthCheck] | None = None,
    rate_limits: RateLimits | None = RateLimits(),  # noqa: B008 - frozen, never mutated
    allowed_hosts: Sequence[str] | None = None,
    forwarded_allow_ips: Sequence[str] = (),
    metrics_registry: CollectorRegistry | None = None,
) -> Starlette:
    """Serve a chat definition: its page, the turn protocol, storage, health and metrics.

    Args:
        target: A :class:`~agentskit_chat.conversation.ChatDefinition`, or a zero-argument
            function returning one (sync or async), or returning an async context manager that
            yields one (entered when the app starts, left when it stops) — see
            :func:`load_chat_target`.
        store: Where sessions and messages live: a store URL (``memory:``, ``sqlite:///chat.db``,
            ``postgresql://...``, ``redis://...``; opened and closed with the app) or
            :class:`~agentskit_chat.storage.ChatStores` (borrowed: the caller opens and closes
            them). Use PostgreSQL or Redis when several workers serve the chat.
        api_key: The key clients must send as ``Authorization: Bearer <key>``. Without one,
            only loopback clients are served.
        authenticate: The host's own decision on who may chat (``request`` →
            ``Authenticated(context)`` or ``Refused(response)``, whose response is sent as
            it is), for ``/api/chat``; by default the API-key rule above. One definition
            serves every caller: a chat whose tools depend on who asks builds that into its
            definition (its capability policy), or is mounted per tenant with
            :func:`create_chat_app`, whose factories receive the context.
        timeout: The deadline of one chat turn, in seconds.
        retention_days: With a store URL: delete conversations idle longer than this
            (``ChatStores.prune``); ``None`` keeps them.
        routes: More Starlette routes served by the same app, behind the same rule.
        checks: More readiness checks for ``/healthz``, by name.
        rate_limits: The limits per client address of ``/api/chat`` (and any ``/api/ask`` or
            ``/api/answer`` route), shared by all of them, and of the conversations a client
            starts (:class:`RateLimits`; by default a burst of 60 requests and 5 a second, 60
            new conversations and 360 an hour, in this process — in Redis when ``store`` is a
            Redis URL or ``rate_limits.redis_url`` is set). ``None`` turns them off.
        allowed_hosts: The ``Host`` names clients may use (``example.com``,
            ``*.example.com``, ``*`` for any). By default, without ``api_key`` and
            ``authenticate``, the loopback names (``localhost``, ``127.0.0.1``, ``[::1]``), so
            no other site can reach a keyless server by rebinding its DNS name; otherwise any.
        forwarded_allow_ips: The proxies (addresses, networks, or ``*``) whose
            ``X-Forwarded-For`` names the client, for the loopback rule and the rate limits;
            by default none: the socket peer is the client, and a request carrying a
            forwarding header is never taken for a loopback client.
        metrics_registry: The ``prometheus_client`` registry the chat's metrics are
            registered in and ``/metrics`` serves (a route named ``/metrics`` in ``routes``
            takes its place); by default one of this app's own.

    Raises:
        ConfigurationError: the target is neither a definition nor a function, a blank key, an
            unknown store URL, a non-positive timeout, an invalid trusted proxy, or host names
            or rate limits of the wrong type.
        ImportError: the ``server`` extra (or the store's driver) is not installed.

    Example::

        from agentskit_chat.server import create_app
        from chat import chat  # your ChatDefinition

        app = create_app(chat, store="sqlite:///chat.db")
        # uvicorn app:app, or mount it last in FastAPI: fastapi_app.mount("/", app)
    """
    try:
        from starlette.applications import Starlette  # noqa: PLC0415 - the server extra
        from starlette.routing import Route  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - the dev environment has the extra
        raise ImportError(
            "Serving a chat needs the 'server' extra: pip install 'agentskit-chat[server]'"
        ) from exc

    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ConfigurationError("timeout must be a positive number of seconds.")
    gate = ApiKeyGate(api_key)
    hosts = check_names(allowed_hosts, "allowed_hosts")
    proxies = TrustedProxies(check_names(forwarded_allow_ips, "forwarded_allow_ips") or ())
    if rate_limits is not None and not isinstance(rate_limits, RateLimits):
        raise ConfigurationError("rate_limits must be RateLimits or None.")
    if isinstance(target, ChatSite):
        site = target
    else:
        chat_stores, owns = _stores(store, retention_days)
        site = ChatSite(ChatTargetHolder(target), chat_stores, owns_stores=owns)

    def gate_authenticate(request: object) -> AuthResult:
        verdict = gate.admit(getattr(request, "scope", {}))
        if verdict is None:
            return Refused(gate.refuse_app)
        return Authenticated(Caller("http", verdict))

    from prometheus_client import CollectorRegistry  # noqa: PLC0415 - the server extra

    from ._prometheus import create_prometheus_metrics_app  # noqa: PLC0415

    registry = CollectorRegistry() if metrics_registry is None else metrics_registry
    watch = Watch(registry, site.stores.backend)
    sessions = WatchedSessions(site.stores.sessions, watch)

    def memory(context: Any, session_id: str) -> ChatMemory:
        return WatchedMemory(site.stores.memory(session_id), watch)

    limiter = (
        None if rate_limits is None else EdgeLimiter(rate_limits, redis_url=redis_store_url(store))
    )
    if limiter is not None:
        site.close_with(limiter.aclose)
        limiter.on_error = watch.rate_limiter_error

    chat = create_chat_app(
        authenticate=authenticate or gate_authenticate,
        resolve_definition=lambda context, session_id: site.current_definition(),
        session_storage=lambda context: sessions,
        chat_memory=memory,
        timeout=timeout,
        new_session_limit=None if limiter is None else new_session_limit(limiter),
    )
    chat.watch = watch

    async def store_ready() -> None:
        with anyio.fail_after(STORE_PING_TIMEOUT):
            await ping_store(site.stores, watch)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with site:
            yield

    health: dict[str, HealthCheck] = {"chat": site.ensure_open, "store": store_ready}
    health.update(checks or {})
    app = Starlette(
        routes=[
            Route("/", WebPage(site.current_page)),
            Route("/static/{name:path}", StaticAssets(site.current_page)),
            *routes,
            Route("/api/chat", chat),
            Route("/healthz", create_healthz_app(health)),
            Route("/metrics", create_prometheus_metrics_app(registry)),
        ],
        lifespan=lifespan,
        exception_handlers={404: not_found, 405: method_not_allowed},
    )
    app.state.chat_site = site
    app.state.edge_limiter = limiter  # the docs assistant's new Ask conversations share it
    app.state.watch = watch  # and its Ask conversations' store reports here
    app.add_middleware(Guard, gate=gate)
    if hosts is not None:
        rule = HostRule(hosts)
    elif api_key is None and authenticate is None:
        rule = HostRule.loopback()  # keyless: no other site may reach it by DNS rebinding
    else:
        rule = HostRule(None)
    app.add_middleware(Edge, hosts=rule, proxies=proxies, limiter=limiter)
    app.add_middleware(Observe, watch=watch)  # outermost: it sees the edge's answers too
    return app
