"""The Ask service as an ASGI app: a thin transport around :class:`AskService`.

The app reads nothing the pipeline has not asked for: the authenticator gets a Starlette
``Request`` with no receive channel (it cannot read the body), and the body is pulled from the
ASGI ``receive`` only when the pipeline reaches that step, after the rate limit. Once the body
is in, a watcher listens for ``http.disconnect``; a client that goes away cancels whatever is
running (retrieval, generation, persistence) and the request is recorded as cancelled.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import parse_qsl

import anyio
import anyio.lowlevel

from agentskit_chat.protocol import ASK_ERROR_CASES

from ._metrics import MetricSink
from ._ports import AskSessionStore, Generator, RateLimiter, Retriever
from ._service import AskService, AuthResult, Refused, ResolveSite, ResolveSubjectId
from ._service_stream import AskResponse

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["AskServiceApp", "Authenticate", "create_ask_service_app"]

Scope: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send: TypeAlias = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: Authenticates a request (sync or async). It receives a Starlette ``Request`` whose body
#: cannot be read, and returns ``Authenticated(context)`` or ``Refused(response)``.
Authenticate: TypeAlias = Callable[[Any], AuthResult | Awaitable[AuthResult]]


def _import_request() -> type[Request]:
    try:
        from starlette.requests import Request  # noqa: PLC0415 - the server extra is optional
    except ImportError as exc:  # pragma: no cover - the dev environment has the extra
        raise ImportError(
            "The Ask service app needs the 'server' extra: pip install 'agentskit-chat[server]'"
        ) from exc
    return Request


def _header(scope: Scope, name: bytes) -> str | None:
    # Fetch's ``headers.get`` joins repeated headers with ", ".
    values = [value for key, value in scope.get("headers", ()) if key.lower() == name]
    if not values:
        return None
    return ", ".join(value.decode("latin-1") for value in values)


def _query(scope: Scope) -> dict[str, str]:
    raw = scope.get("query_string", b"")
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else str(raw)
    first: dict[str, str] = {}
    for key, value in parse_qsl(text, keep_blank_values=True):
        # ``URLSearchParams.get`` answers the first value of a repeated parameter.
        first.setdefault(key, value)
    return first


class _RequestBody:
    """The ASGI request body, pulled from ``receive`` only when iterated."""

    def __init__(self, receive: Receive, on_disconnect: Callable[[], None]) -> None:
        self._receive = receive
        self._on_disconnect = on_disconnect
        self.complete = anyio.Event()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        while not self.complete.is_set():
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._on_disconnect()
                await anyio.lowlevel.checkpoint()
                return
            if message["type"] != "http.request":
                continue
            more = bool(message.get("more_body", False))
            if not more:
                self.complete.set()
            chunk = message.get("body", b"")
            if chunk:
                yield bytes(chunk)


class AskServiceApp:
    """An ASGI app serving the Ask service on whatever path it is mounted at.

    Usable standalone (``uvicorn module:app``) or mounted in Starlette or FastAPI. The
    pipeline is :attr:`service`, for in-process callers that want the same events without
    HTTP.

    Attributes:
        service: The transport-free pipeline this app wraps.
    """

    def __init__(self, service: AskService, authenticate: Authenticate) -> None:
        self.service = service
        self._authenticate = authenticate
        self._request_class = _import_request()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection scope."""
        kind = scope["type"]
        if kind == "lifespan":
            await _lifespan(receive, send)
            return
        if kind != "http":
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1003})
            return
        request_id = self.service.new_request_id()
        responded = False
        async with anyio.create_task_group() as watchers:
            with anyio.CancelScope() as work:
                body = _RequestBody(receive, work.cancel)
                watchers.start_soon(_watch_disconnect, body, receive, work)
                request = self._request_class(scope)
                result = await self.service.handle(
                    authenticate=lambda: self._authenticate(request),
                    body=body,
                    method=scope["method"],
                    content_type=_header(scope, b"content-type"),
                    content_length=_header(scope, b"content-length"),
                    query=_query(scope),
                    request_id=request_id,
                )
                responded = True
                if isinstance(result, Refused):
                    await result.response(scope, receive, send)
                else:
                    await _send(result, send)
            watchers.cancel_scope.cancel()
        if not responded:
            # The client went away before the response was ready. It will most likely never
            # read this, but a proxy or a bridge still gets the catalogue's answer.
            await _send(_cancelled(request_id), send)


def _cancelled(request_id: str) -> AskResponse:
    case = ASK_ERROR_CASES["cancelled"]
    return AskResponse.error(
        case.to_diagnostic(), status=case.status, request_id=request_id, retry_after=None
    )


async def _watch_disconnect(body: _RequestBody, receive: Receive, work: anyio.CancelScope) -> None:
    await body.complete.wait()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            work.cancel()
            return


async def _send(response: AskResponse, send: Send) -> None:
    headers = [(key.encode("latin-1"), value.encode("latin-1")) for key, value in response.headers]
    try:
        if response.diagnostic is not None:
            body = "".join([chunk async for chunk in response]).encode()
            headers.append((b"content-length", str(len(body)).encode()))
            await send(
                {"type": "http.response.start", "status": response.status, "headers": headers}
            )
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        async for line in response:
            await send({"type": "http.response.body", "body": line.encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        # The client went away while we were writing (the server says so with an OSError).
        return
    finally:
        await response.aclose()


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def create_ask_service_app(
    *,
    authenticate: Authenticate,
    resolve_site: ResolveSite,
    resolve_subject_id: ResolveSubjectId,
    retrievers: Mapping[str, Retriever],
    generator: Generator,
    session_store: AskSessionStore | None = None,
    rate_limiter: RateLimiter | None = None,
    on_metric: MetricSink | None = None,
    max_body_bytes: int = 65536,
    bootstrap_timeout_ms: int = 30000,
    create_id: Callable[[], str] | None = None,
    now: Callable[[], datetime] | None = None,
    clock: Callable[[], float] | None = None,
) -> AskServiceApp:
    """Build the Ask service as an ASGI app.

    ``authenticate(request)`` receives a Starlette ``Request`` whose body cannot be read and
    returns :class:`Authenticated` ``(context)`` or :class:`Refused` ``(response)``; every other
    option is :class:`AskService`'s.

    Raises:
        AskServiceError: 500 ``ASK_INTERNAL`` "The Ask handler configuration is invalid." for
            a non-positive ``max_body_bytes`` or ``bootstrap_timeout_ms``.
        ImportError: when the ``server`` extra (Starlette) is not installed.

    Example::

        app = create_ask_service_app(
            authenticate=lambda request: Authenticated({"user": "me"}),
            resolve_site=lambda context: SITE,
            resolve_subject_id=lambda context: "me",
            retrievers={"local": retriever},
            generator=ExtractiveGenerator(),
        )
    """
    service = AskService(
        resolve_site=resolve_site,
        resolve_subject_id=resolve_subject_id,
        retrievers=retrievers,
        generator=generator,
        session_store=session_store,
        rate_limiter=rate_limiter,
        on_metric=on_metric,
        max_body_bytes=max_body_bytes,
        bootstrap_timeout_ms=bootstrap_timeout_ms,
        create_id=create_id,
        now=now,
        clock=clock,
    )
    return AskServiceApp(service, authenticate)
