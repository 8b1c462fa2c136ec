"""The edge of a served app: who the client is, which host names it may use, how often it may call.

:func:`~agentskit_chat.server.create_app` puts :class:`Edge` in front of every route:

1. **The client address.** The socket peer, unless that peer is a trusted proxy
   (``forwarded_allow_ips``): then the right-most address of ``X-Forwarded-For`` that is not
   itself a trusted proxy. Nothing else a client sends (``Forwarded``, ``X-Real-IP``) is ever
   read, and a request that carries a forwarding header no trusted proxy vouched for is never
   taken for a loopback client (see :class:`~agentskit_chat.server._auth.ApiKeyGate`).
2. **The host name.** ``Host`` must be one of the allowed names (by default, without an API key
   or a host ``authenticate``, the loopback names: ``localhost``, ``*.localhost``,
   ``127.0.0.1``, ``[::1]``), so a page on another site that rebinds its DNS name to this
   machine cannot use a keyless server. ``/healthz`` answers any host.
3. **The rate limits.** Every data route (``/api/chat``, ``/api/ask``, ``/api/answer``) takes a
   token from one bucket per client address (:class:`RateLimits`); an empty bucket is 429 with
   ``Retry-After``, in the route's own error shape, before its body is read. The chat handler
   takes a second token, from the new-session bucket, when a submission would create a
   session.
"""

from __future__ import annotations

import inspect
import ipaddress
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from agentskit_chat.errors import ConfigurationError, RateLimitError
from agentskit_chat.protocol import AskDiagnostic
from agentskit_chat.protocol._json import js_stringify
from agentskit_chat.service import InMemoryRateLimiter, RateLimitDecision

from ._asgi import ASGIApp, Receive, Scope, Send, header, route_path, send_response
from ._auth import TRUSTED_FORWARD
from ._errors import error_body, error_headers
from ._observe import note_error

__all__ = [
    "DATA_ROUTES",
    "Edge",
    "EdgeLimiter",
    "HostRule",
    "RateLimits",
    "TrustedProxies",
    "check_names",
    "client_identity",
    "new_session_limit",
    "redis_store_url",
]

#: The routes that read or write data, and share one rate limit per client.
DATA_ROUTES: Final = frozenset({"/api/chat", "/api/ask", "/api/answer"})
#: The route whose errors have the chat handler's shape (with ``version``).
_CHAT_ROUTE: Final = "/api/chat"
#: The routes every host name may reach (a load balancer probes by address).
_ANY_HOST: Final = frozenset({"/healthz"})
_LOOPBACK_NAMES: Final = ("localhost", "*.localhost", "127.0.0.1", "::1")
_REDIS_SCHEMES: Final = ("redis://", "rediss://", "unix://")

Space = Literal["requests", "sessions"]


def _positive(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value > 0


@dataclass(frozen=True, slots=True)
class RateLimits:
    """How often one client (one address) may call the data routes, and start conversations.

    Two token buckets per client address: every request to ``/api/chat``, ``/api/ask`` or
    ``/api/answer`` takes a token from the first; a chat submission that creates a session takes
    one from the second too. A bucket holds up to its burst and refills continuously.

    Attributes:
        request_burst: Requests a rested client may make at once.
        requests_per_second: The sustained request rate.
        session_burst: New conversations a rested client may start at once.
        sessions_per_hour: The sustained rate of new conversations.
        redis_url: A Redis URL (``redis://``, ``rediss://``, ``unix://``) to keep the buckets
            in, shared by every worker; ``None`` keeps them in this process (each worker then
            grants its own allowance).

    Raises:
        ConfigurationError: a burst that is not a positive integer, a rate that is not a
            positive number, or a URL that is not a Redis URL.
    """

    request_burst: int = 60
    requests_per_second: float = 5.0
    session_burst: int = 60
    sessions_per_hour: float = 360.0
    redis_url: str | None = None

    def __post_init__(self) -> None:
        for burst in (self.request_burst, self.session_burst):
            if type(burst) is not int or burst < 1:
                raise ConfigurationError("A rate limit's burst must be a positive integer.")
        if not _positive(self.requests_per_second) or not _positive(self.sessions_per_hour):
            raise ConfigurationError("A rate limit's rate must be a positive number.")
        url = self.redis_url
        if url is not None and (not isinstance(url, str) or not url.startswith(_REDIS_SCHEMES)):
            raise ConfigurationError("The rate limits' store must be a redis:// URL.")


class EdgeLimiter:
    """The two buckets of :class:`RateLimits`, in this process or in Redis.

    Args:
        limits: The limits.
        redis_url: Where the buckets live when ``limits.redis_url`` is not set (the app's own
            Redis store, when it has one); ``None`` keeps them in this process.

    Attributes:
        on_error: Told of every failed take (the error and the seconds it took), before
            it is raised; ``create_app`` logs and counts it.

    Raises:
        ImportError: the buckets are in Redis and the ``redis`` extra is not installed.
    """

    def __init__(self, limits: RateLimits, *, redis_url: str | None = None) -> None:
        url = limits.redis_url or redis_url
        self.shared = url is not None
        self.on_error: Callable[[RateLimitError, float], None] | None = None
        self._limiters: dict[Space, Any]
        rates: dict[Space, tuple[int, float]] = {
            "requests": (limits.request_burst, float(limits.requests_per_second)),
            "sessions": (limits.session_burst, limits.sessions_per_hour / 3600.0),
        }
        if url is None:
            self._limiters = {
                space: InMemoryRateLimiter(capacity=burst, refill_per_second=rate)
                for space, (burst, rate) in rates.items()
            }
        else:
            from agentskit_chat.ops import RedisRateLimiter  # noqa: PLC0415 - the redis extra

            self._limiters = {
                space: RedisRateLimiter(url, capacity=burst, refill_per_second=rate)
                for space, (burst, rate) in rates.items()
            }

    async def take(self, space: Space, identity: str) -> RateLimitDecision:
        """Take one token from ``identity``'s bucket of ``space``.

        Raises:
            RateLimitError: the Redis buckets cannot be reached.
        """
        start = time.perf_counter()
        try:
            decision = self._limiters[space].take(f"edge-{space}", identity)
            if inspect.isawaitable(decision):
                decision = await decision
        except RateLimitError as error:
            if self.on_error is not None:
                self.on_error(error, time.perf_counter() - start)
            raise
        assert isinstance(decision, RateLimitDecision)
        return decision

    async def aclose(self) -> None:
        """Close the Redis clients (nothing to do in process)."""
        for limiter in self._limiters.values():
            close = getattr(limiter, "aclose", None)
            if close is not None:
                await close()


def _network(entry: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(entry.strip().strip("[]"), strict=False)
    except ValueError:
        raise ConfigurationError(
            "A trusted proxy must be an IP address or network (or '*')."
        ) from None


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class TrustedProxies:
    """The proxies whose ``X-Forwarded-For`` names the client: addresses, networks or ``*``.

    Raises:
        ConfigurationError: an entry is neither an address, a network nor ``*``.
    """

    def __init__(self, entries: Iterable[str] = ()) -> None:
        listed = [entry for entry in entries if entry.strip()]
        self.everyone = any(entry.strip() == "*" for entry in listed)
        self._networks = [_network(entry) for entry in listed if entry.strip() != "*"]

    def __bool__(self) -> bool:
        return self.everyone or bool(self._networks)

    def trusts(self, host: str) -> bool:
        """Whether the peer ``host`` is a trusted proxy."""
        if self.everyone:
            return True
        address = _address(host)
        return address is not None and any(address in network for network in self._networks)

    def client(self, peer: str, forwarded_for: str) -> str:
        """The client behind trusted proxy ``peer``: the right-most ``X-Forwarded-For``
        entry that is not itself trusted (the left-most when all are)."""
        entries = [entry.strip() for entry in forwarded_for.split(",") if entry.strip()]
        if not entries:
            return peer
        for entry in reversed(entries):
            if not self.trusts(entry):
                return entry
        return entries[0]


class HostRule:
    """Which ``Host`` names a request may use: exact names, ``*.suffix`` or ``*`` (any).

    Names are compared without case and without the port; ``None`` allows every name.
    """

    def __init__(self, names: Iterable[str] | None) -> None:
        self.any = names is None
        exact: set[str] = set()
        suffixes: list[str] = []
        for name in names or ():
            cleaned = name.strip().lower().strip("[]")
            if cleaned == "*":
                self.any = True
            elif cleaned.startswith("*."):
                suffixes.append(cleaned[1:])
            elif cleaned:
                exact.add(cleaned)
        self._exact = frozenset(exact)
        self._suffixes = tuple(suffixes)

    @classmethod
    def loopback(cls) -> HostRule:
        """The loopback names: ``localhost``, ``*.localhost``, ``127.0.0.1`` and ``::1``."""
        return cls(_LOOPBACK_NAMES)

    def allows(self, host: str | None) -> bool:
        """Whether the ``Host`` header value ``host`` is allowed (a missing one never is,
        unless every name is)."""
        if self.any:
            return True
        if not host:
            return False
        name = host.strip().lower()
        if name.startswith("["):
            name = name[1 : name.find("]")] if "]" in name else name[1:]
        elif name.count(":") == 1:
            name = name.partition(":")[0]
        name = name.rstrip(".")
        address = _address(name)
        if address is not None and address.is_loopback and "127.0.0.1" in self._exact:
            return True  # all of 127.0.0.0/8 (and ::ffff:127.x) is this machine
        return name in self._exact or any(name.endswith(suffix) for suffix in self._suffixes)


def client_identity(scope: Scope) -> str:
    """Whom a request's rate limits count against: its client address (as :class:`Edge`
    resolved it), or ``unknown``."""
    client = scope.get("client")
    if isinstance(client, list | tuple) and client and isinstance(client[0], str):
        return client[0]
    return "unknown"


_HOST_REFUSED: Final = "This host name is not served here."
_RATE_LIMITED: Final = "Too many requests; wait before trying again."
_ASK_RATE_LIMITED: Final = "The Ask rate limit was exceeded."
_UNAVAILABLE: Final = "The chat request failed."


def _chat_error(code: str, message: str, *, retryable: bool) -> bytes:
    body = {"version": 1, "code": code, "message": message, "retryable": retryable}
    return js_stringify({"error": body}).encode()


def _ask_error(code: str, message: str, *, retryable: bool) -> bytes:
    diagnostic = AskDiagnostic.model_validate(
        {"code": code, "message": message, "retryable": retryable}
    )
    return error_body(diagnostic)


class Edge:
    """The ASGI middleware of the module documentation.

    Args:
        app: The app behind the edge.
        hosts: The allowed host names.
        proxies: The trusted proxies.
        limiter: The data routes' rate limits (``None``: unlimited).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: HostRule,
        proxies: TrustedProxies,
        limiter: EdgeLimiter | None,
    ) -> None:
        self._app = app
        self._hosts = hosts
        self._proxies = proxies
        self._limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") not in ("http", "websocket"):
            await self._app(scope, receive, send)
            return
        client = scope.get("client")
        peer = client[0] if isinstance(client, list | tuple) and client else None
        if isinstance(peer, str) and self._proxies and self._proxies.trusts(peer):
            forwarded = header(scope, b"x-forwarded-for")
            if forwarded is not None:
                scope = dict(scope)
                scope["client"] = (self._proxies.client(peer, forwarded), 0)
                scope[TRUSTED_FORWARD] = True
        path = route_path(scope)
        if path not in _ANY_HOST and not self._hosts.allows(header(scope, b"host")):
            await self._refuse(scope, send, 400, "host")
            return
        if self._limiter is not None and path in DATA_ROUTES:
            try:
                decision = await self._limiter.take("requests", client_identity(scope))
            except RateLimitError as error:
                note_error(scope, error)
                await self._refuse(scope, send, 500, "unavailable")
                return
            if not decision.allowed:
                await self._refuse(scope, send, 429, "rate", decision.retry_after_seconds)
                return
        await self._app(scope, receive, send)

    async def _refuse(
        self,
        scope: Scope,
        send: Send,
        status: int,
        why: Literal["host", "rate", "unavailable"],
        retry_after: int | None = None,
    ) -> None:
        if scope.get("type") == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        chat = route_path(scope) == _CHAT_ROUTE
        if why == "host":
            body = (
                _chat_error("REQUEST_HOST_NOT_ALLOWED", _HOST_REFUSED, retryable=False)
                if chat
                else _ask_error("ASK_INVALID_REQUEST", _HOST_REFUSED, retryable=False)
            )
        elif why == "rate":
            body = (
                _chat_error("REQUEST_RATE_LIMITED", _RATE_LIMITED, retryable=True)
                if chat
                else _ask_error("ASK_RATE_LIMITED", _ASK_RATE_LIMITED, retryable=True)
            )
        else:
            body = (
                _chat_error("SERVER_INTERNAL", _UNAVAILABLE, retryable=True)
                if chat
                else _ask_error("ASK_INTERNAL", "The Ask request failed.", retryable=True)
            )
        headers = error_headers(retry_after=max(1, retry_after or 1) if why == "rate" else None)
        await send_response(scope, send, status, headers, body)


def new_session_limit(
    limiter: EdgeLimiter,
) -> Callable[[Any], Awaitable[RateLimitDecision]]:
    """The chat handler's ``new_session_limit`` hook: a token of the caller's new-session
    bucket (the caller as :class:`Edge` resolved it)."""

    async def limit(request: Any) -> RateLimitDecision:
        return await limiter.take("sessions", client_identity(getattr(request, "scope", {})))

    return limit


def redis_store_url(store: object) -> str | None:
    """The store URL when it is a Redis one (where the rate limits then live too)."""
    if isinstance(store, str) and store.startswith(_REDIS_SCHEMES):
        return store
    return None


def check_names(names: Sequence[str] | None, what: str) -> tuple[str, ...] | None:
    """``names`` as a tuple of strings, or ``None``.

    Raises:
        ConfigurationError: not a sequence of strings.
    """
    if names is None:
        return None
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise ConfigurationError(f"{what} must be a list of strings.")
    return tuple(names)
