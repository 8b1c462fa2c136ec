"""The Ask service over HTTP: the edge that turns a request into a typed call of the pipeline.

The app checks the method and the media type, then hands :class:`~agentskit_chat.service.AskService`
a reader for the body; the pipeline calls it only after authentication, the trusted site and the
rate limit, so nothing of a refused request is read. The authenticator gets a Starlette
``Request`` with no receive channel (it cannot read the body). The body is read by the one
bounded reader of :mod:`agentskit_chat.server` (size and time bounds) and decoded by the
protocol's decoder. Once it is in, a watcher listens for ``http.disconnect``: a client that goes
away cancels whatever is running (retrieval, generation, persistence) and the request is
recorded as cancelled.

A client that leaves *before* its body is read cannot be noticed earlier: ASGI reports a
disconnect only through ``receive``, which hands out the body first, and reading the body before
the rate limit is exactly what the pipeline must not do. Such a request stops at the body step
with nothing retrieved or generated (``docs/differences.md``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, TypeAlias

import anyio
import anyio.lowlevel

from agentskit_chat.errors import AskServiceError
from agentskit_chat.protocol import ASK_ERROR_CASES, AskRequest
from agentskit_chat.protocol._types import build_wire_models
from agentskit_chat.service import (
    AskResponse,
    AskService,
    AskSessionStore,
    AuthResult,
    Generator,
    MetricSink,
    RateLimiter,
    Refused,
    ResolveSite,
    ResolveSubjectId,
    Retriever,
)

from ._asgi import Receive, Scope, Send, handle_non_http, header, query_params
from ._auth import request_class
from ._body import (
    DEFAULT_BODY_TIMEOUT_S,
    BodySource,
    BodyTimedOut,
    BodyTooLarge,
    ClientDisconnected,
    RequestBody,
    check_body_timeout,
    read_body_source,
)

__all__ = ["AskServiceApp", "Authenticate", "create_ask_service_app", "serve_ask"]

#: Authenticates a request (sync or async). It receives a Starlette ``Request`` whose body
#: cannot be read, and returns ``Authenticated(context)`` or ``Refused(response)``.
Authenticate: TypeAlias = Callable[[Any], AuthResult | Awaitable[AuthResult]]


def _case(name: str) -> AskServiceError:
    case = ASK_ERROR_CASES[name]
    return AskServiceError(case.status, case.code, case.message, retryable=case.retryable)


async def serve_ask(
    service: AskService,
    *,
    authenticate: Callable[[], AuthResult | Awaitable[AuthResult]],
    body: BodySource,
    method: str = "POST",
    content_type: str | None = "application/json",
    content_length: str | None = None,
    query: Mapping[str, str] | None = None,
    request_id: str | None = None,
) -> AskResponse | Refused:
    """One Ask request at the HTTP edge, with no socket: what the app does for each request.

    Checks the method (``POST``) and the media type (``application/json``), then runs the
    pipeline with a reader that takes ``body`` (bytes, or a :class:`RequestBody`) within
    ``service.max_body_bytes`` and decodes it with the protocol's decoder.

    Returns:
        The host's refusal unchanged, or a response (an error or the stream).
    """
    if request_id is None:
        request_id = service.new_request_id()
    if method != "POST":
        return service.error_response("method_not_allowed", request_id)
    if not (content_type or "").lower().startswith("application/json"):
        return service.error_response("unsupported_media_type", request_id)

    async def read() -> AskRequest:
        try:
            raw = await read_body_source(
                body, content_length=content_length, limit=service.max_body_bytes
            )
        except BodyTooLarge:
            raise _case("body_too_large") from None
        except BodyTimedOut:
            raise _case("request_timeout") from None
        return service.decode_body(raw)

    return await service.handle(
        authenticate=authenticate, read_request=read, query=query, request_id=request_id
    )


class AskServiceApp:
    """An ASGI app serving the Ask service on whatever path it is mounted at.

    Usable standalone (``uvicorn module:app``) or mounted in Starlette or FastAPI. The
    pipeline is :attr:`service`, for in-process callers that want the same events without
    HTTP.

    Attributes:
        service: The transport-free pipeline this app wraps.
        body_timeout: How long a client may take to send its body, in seconds.
    """

    def __init__(
        self,
        service: AskService,
        authenticate: Authenticate,
        *,
        body_timeout: float = DEFAULT_BODY_TIMEOUT_S,
    ) -> None:
        self.service = service
        self.body_timeout = check_body_timeout(body_timeout)
        self._authenticate = authenticate
        self._request_class = request_class("Ask service app")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection scope."""
        if await handle_non_http(scope, receive, send):
            return
        request_id = self.service.new_request_id()
        responded = False
        async with anyio.create_task_group() as watchers:
            with anyio.CancelScope() as work:
                body = _WatchedBody(
                    RequestBody(
                        receive,
                        content_length=header(scope, b"content-length"),
                        limit=self.service.max_body_bytes,
                        timeout=self.body_timeout,
                    ),
                    work,
                )
                watchers.start_soon(_watch_disconnect, body.inner, work)
                request = self._request_class(scope)
                result = await serve_ask(
                    self.service,
                    authenticate=lambda: self._authenticate(request),
                    body=body,
                    method=scope["method"],
                    content_type=header(scope, b"content-type"),
                    content_length=header(scope, b"content-length"),
                    query=query_params(scope),
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


class _WatchedBody:
    """A request body whose client leaving mid-body cancels the request's work."""

    def __init__(self, inner: RequestBody, work: anyio.CancelScope) -> None:
        self.inner = inner
        self._work = work

    async def read(self) -> bytes:
        try:
            return await self.inner.read()
        except ClientDisconnected:
            self._work.cancel()
            await anyio.lowlevel.checkpoint()
            raise


def _cancelled(request_id: str) -> AskResponse:
    case = ASK_ERROR_CASES["cancelled"]
    return AskResponse.error(
        case.to_diagnostic(), status=case.status, request_id=request_id, retry_after=None
    )


async def _watch_disconnect(body: RequestBody, work: anyio.CancelScope) -> None:
    await body.wait_disconnect()
    work.cancel()


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
    body_timeout: float = DEFAULT_BODY_TIMEOUT_S,
) -> AskServiceApp:
    """Build the Ask service as an ASGI app.

    ``authenticate(request)`` receives a Starlette ``Request`` whose body cannot be read and
    returns :class:`Authenticated` ``(context)`` or :class:`Refused` ``(response)``; every other
    option but ``body_timeout`` (how long a client may take to send its body, in seconds) is
    :class:`~agentskit_chat.service.AskService`'s.

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
    build_wire_models()  # a server validates on several threads: nothing is built lazily
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
    return AskServiceApp(service, authenticate, body_timeout=body_timeout)
