"""The docs assistant on the web: the Ask API, exact-first answers, health and metrics.

One Starlette app, four routes:

- ``POST /api/ask``: the Ask service (``agentskit.chat.ask`` v1 in, NDJSON events out), in the
  spec's order of checks;
- ``POST /api/answer``: ``{"question": "..."}`` in, one ``agentskit.chat.answer`` v1 envelope
  out: the same path as :meth:`DocsAssistant.ask`, exact answers first;
- ``GET /healthz``: ready when the index answers;
- ``GET /metrics``: the Ask service's metrics for Prometheus.

Who may call it: with an API key, every client must send ``Authorization: Bearer <key>``;
without one, only loopback clients (``127.0.0.0/8``, ``::1``) are served. A refused client gets
``401 ASK_UNAUTHORIZED`` and nothing else.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any, Final

import orjson

from agentskit_chat.ask import (
    AskServiceApp,
    Authenticated,
    AuthResult,
    Refused,
)
from agentskit_chat.errors import AskServiceError
from agentskit_chat.protocol import ASK_ERROR_CASES
from agentskit_chat.protocol._text import js_trim

from ._assistant import DocsAssistant
from ._backend import Caller

try:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - the dev environment has the extra
    raise ImportError(
        "The docs assistant's web app needs the 'server' extra: "
        "pip install 'agentskit-chat[server]'"
    ) from exc

if TYPE_CHECKING:
    from agentskit_chat.ops import PrometheusMetricsApp

__all__ = ["create_docs_assistant_app", "is_loopback"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: The largest ``/api/answer`` body read, in bytes (as the Ask service's default).
MAX_ANSWER_BODY: Final = 65536
_NO_STORE: Final = {"cache-control": "no-store", "x-content-type-options": "nosniff"}
_UNAUTHORIZED: Final = "A valid API key is required."
_INDEX: Final = (
    "agentskit-chat docs assistant\n\n"
    'POST /api/answer  {"question": "..."} -> one agentskit.chat.answer envelope (JSON)\n'
    "POST /api/ask     agentskit.chat.ask request -> NDJSON events\n"
    "GET  /healthz     readiness\n"
    "GET  /metrics     Prometheus metrics\n"
)


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``, or IPv4-mapped)."""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _error(
    status: int, code: str, message: str, retryable: bool, retry_after: int | None = None
) -> Response:
    headers = dict(_NO_STORE)
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    body = {"error": {"code": code, "message": message, "retryable": retryable}}
    return Response(
        orjson.dumps(body),
        status_code=status,
        media_type="application/json; charset=utf-8",
        headers=headers,
    )


def _case(name: str) -> Response:
    case = ASK_ERROR_CASES[name]
    return _error(case.status, case.code, case.message, case.retryable)


def _unauthorized() -> Response:
    response = _error(401, "ASK_UNAUTHORIZED", _UNAUTHORIZED, False)
    response.headers["www-authenticate"] = "Bearer"
    return response


class _Gate:
    """Authentication of HTTP callers: an API key, or loopback clients only."""

    def __init__(self, api_key: str | None) -> None:
        self._expected = None if api_key is None else api_key.encode("utf-8")

    def caller(self, request: Request) -> Caller | None:
        """The authenticated caller, or ``None`` when the request is refused."""
        if self._expected is not None:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            presented = js_trim(token).encode("utf-8", "replace")
            if scheme.lower() == "bearer" and hmac.compare_digest(presented, self._expected):
                return Caller("http", "api-key")
            return None
        client = request.client
        if client is not None and is_loopback(client.host):
            return Caller("http", "loopback")
        return None

    def authenticate(self, request: Request) -> AuthResult:
        """The Ask service's ``authenticate`` hook."""
        caller = self.caller(request)
        return Refused(_unauthorized()) if caller is None else Authenticated(caller)


class _AskRoute:
    """``/api/ask``: the Ask service app of whichever service the assistant has open."""

    def __init__(self, assistant: DocsAssistant, gate: _Gate) -> None:
        self._assistant = assistant
        self._gate = gate
        self._app: AskServiceApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._assistant.is_open:
            await _case("internal")(scope, receive, send)
            return
        service = self._assistant.service
        if self._app is None or self._app.service is not service:
            self._app = AskServiceApp(service, self._gate.authenticate)
        await self._app(scope, receive, send)


async def _bounded_body(request: Request, limit: int) -> bytes | None:
    """The body, or ``None`` as soon as it is longer than ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _answer_endpoint(
    assistant: DocsAssistant, gate: _Gate
) -> Callable[[Request], Awaitable[Response]]:
    async def answer(request: Request) -> Response:
        caller = gate.caller(request)
        if caller is None:
            return _unauthorized()
        content_type = request.headers.get("content-type", "").lower()
        if not content_type.startswith("application/json"):
            return _case("unsupported_media_type")
        body = await _bounded_body(request, MAX_ANSWER_BODY)
        if body is None:
            return _case("body_too_large")
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            return _case("invalid_json")
        question = payload.get("question") if isinstance(payload, dict) else None
        session_id = payload.get("sessionId") if isinstance(payload, dict) else None
        if not isinstance(question, str) or not (session_id is None or isinstance(session_id, str)):
            return _case("invalid_request")
        if not assistant.is_open:
            return _case("internal")
        try:
            envelope = await assistant.answer_for(question, caller, session_id=session_id)
        except AskServiceError as error:
            return _error(
                error.status, error.code, error.message, error.retryable, error.retry_after
            )
        return Response(
            envelope.to_json(),
            media_type="application/json; charset=utf-8",
            headers=dict(_NO_STORE),
        )

    return answer


def _metrics_app(assistant: DocsAssistant) -> PrometheusMetricsApp:
    """A Prometheus endpoint over a registry of this app's own, fed by the assistant."""
    from agentskit_chat.ops import (  # noqa: PLC0415 - the server extra is optional
        OpenTelemetryMetricSink,
        create_prometheus_metrics_app,
    )

    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader  # noqa: PLC0415
        from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415
        from prometheus_client import CollectorRegistry  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - the dev environment has the extra
        raise ImportError(
            "The /metrics endpoint needs the 'server' extra: pip install 'agentskit-chat[server]'"
        ) from exc
    # A registry per app: two assistants in one process never share (or clash on) series.
    registry = CollectorRegistry()
    provider = MeterProvider(
        metric_readers=[PrometheusMetricReader(registry=registry)], shutdown_on_exit=False
    )
    assistant.add_metric_sink(OpenTelemetryMetricSink(provider))
    return create_prometheus_metrics_app(registry)


def create_docs_assistant_app(assistant: DocsAssistant) -> Starlette:
    """The web app of ``assistant`` (see the module documentation for its routes).

    Its lifespan opens the assistant when it is not open yet, and closes it again on
    shutdown; an assistant that was already open is left as it is.

    Raises:
        ImportError: the ``server`` extra is not installed.
    """
    from agentskit_chat.ops import create_healthz_app  # noqa: PLC0415

    gate = _Gate(assistant.api_key)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if assistant.is_open:
            yield
            return
        await assistant.open()
        try:
            yield
        finally:
            await assistant.aclose()

    async def index(request: Request) -> Response:
        return PlainTextResponse(_INDEX)

    return Starlette(
        routes=[
            Route("/", index, methods=["GET"]),
            Route("/api/ask", _AskRoute(assistant, gate)),
            Route("/api/answer", _answer_endpoint(assistant, gate), methods=["POST"]),
            Route("/healthz", create_healthz_app({"index": assistant.ready})),
            Route("/metrics", _metrics_app(assistant)),
        ],
        lifespan=lifespan,
    )
