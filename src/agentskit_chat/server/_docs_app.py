"""The docs assistant on the web: the Ask API, exact-first answers, health and metrics.

One Starlette app:

- ``GET /``: the chat page (and ``GET /static/...``, its files; both open to every client, as
  they hold no data), and ``GET /docs/<page>``: the pages its citations link to;
- ``POST /api/answer``: ``{"question": "...", "sessionId"?: "..."}`` in, one
  ``agentskit.chat.answer`` v1 envelope out: the same path as
  :meth:`~agentskit_chat.assistant.DocsAssistant.ask`, exact answers first;
- ``POST /api/ask``: the Ask service (``agentskit.chat.ask`` v1 in, NDJSON events out), in the
  Ask protocol's order of checks;
- ``POST /api/chat``: the assistant as a chat (``agentskit.chat.turn`` v1: one
  ``client.turn.submit`` in, ``server.turn.snapshot`` lines out), exact answers first, with
  sessions and messages in the app's :class:`~agentskit_chat.storage.ChatStores`;
- ``GET /metrics``: the Ask service's and the chat's metrics for Prometheus;
- ``GET /healthz``: readiness, and nothing else (``{"status":"ok"}``, or ``503`` naming the
  failing check): the one route open to every client, so a load balancer can probe it.

Every other route follows one rule (:class:`~agentskit_chat.server._auth.ApiKeyGate`): with an
API key, every client must send ``Authorization: Bearer <key>``; without one, only loopback
clients are served. A refused client gets ``401 ASK_UNAUTHORIZED`` and nothing else. Bodies are
read by the one bounded reader (64 KiB, 10 seconds) and parsed by the protocol's JSON rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from agentskit_chat.assistant import Caller, DocsAssistant
from agentskit_chat.errors import AskServiceError
from agentskit_chat.protocol._decode import NOT_JSON, as_text, parse_candidate
from agentskit_chat.service import Authenticated, AuthResult, RateLimitDecision, Refused
from agentskit_chat.storage import ChatStores, open_chat_stores

from ._asgi import (
    Receive,
    Scope,
    Send,
    handle_non_http,
    header,
    send_response,
)
from ._ask_app import AskServiceApp
from ._auth import ApiKeyGate
from ._body import (
    DEFAULT_BODY_TIMEOUT_S,
    BodyTimedOut,
    BodyTooLarge,
    ClientDisconnected,
    RequestBody,
    check_body_timeout,
)
from ._docs_chat import docs_chat_target
from ._edge import EdgeLimiter, RateLimits, client_identity
from ._errors import send_case, send_service_error
from ._web_page import DocsPages

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from starlette.applications import Starlette

__all__ = ["MAX_ANSWER_BODY", "create_docs_assistant_app"]

#: The largest ``/api/answer`` body read, in bytes (as the Ask service's default).
MAX_ANSWER_BODY: Final = 65536
_JSON: Final = (b"content-type", b"application/json; charset=utf-8")
_NOSNIFF: Final = (b"x-content-type-options", b"nosniff")


class _AskRoute:
    """``/api/ask``: the Ask service app of whichever service the assistant has open."""

    def __init__(self, assistant: DocsAssistant, gate: ApiKeyGate, body_timeout: float) -> None:
        self._assistant = assistant
        self._gate = gate
        self._body_timeout = body_timeout
        self._app: AskServiceApp | None = None

    def _authenticate(self, request: object) -> AuthResult:
        scope = getattr(request, "scope", {})
        verdict = self._gate.admit(scope)
        if verdict is None:
            return Refused(self._gate.refuse_app)
        return Authenticated(Caller("http", verdict, client_identity(scope)))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._assistant.is_open:
            await send_case(scope, send, "internal")
            return
        service = self._assistant.service
        if self._app is None or self._app.service is not service:
            self._app = AskServiceApp(service, self._authenticate, body_timeout=self._body_timeout)
        await self._app(scope, receive, send)


class _AnswerRoute:
    """``/api/answer``: one question in, one answer envelope out."""

    def __init__(self, assistant: DocsAssistant, gate: ApiKeyGate, body_timeout: float) -> None:
        self._assistant = assistant
        self._gate = gate
        self._body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await handle_non_http(scope, receive, send):
            return
        if scope.get("method") != "POST":
            await send_case(scope, send, "method_not_allowed")
            return
        verdict = self._gate.admit(scope)
        if verdict is None:
            await self._gate.refuse(scope, send)
            return
        content_type = (header(scope, b"content-type") or "").lower()
        if not content_type.startswith("application/json"):
            await send_case(scope, send, "unsupported_media_type")
            return
        body = RequestBody(
            receive,
            content_length=header(scope, b"content-length"),
            limit=MAX_ANSWER_BODY,
            timeout=self._body_timeout,
        )
        try:
            raw = await body.read()
        except BodyTooLarge:
            await send_case(scope, send, "body_too_large")
            return
        except BodyTimedOut:
            await send_case(scope, send, "request_timeout")
            return
        except ClientDisconnected:
            return  # nobody is left to answer
        payload = parse_candidate(as_text(raw))
        if payload is NOT_JSON:
            await send_case(scope, send, "invalid_json")
            return
        question = payload.get("question") if isinstance(payload, dict) else None
        session_id = payload.get("sessionId") if isinstance(payload, dict) else None
        if not isinstance(question, str) or not (session_id is None or isinstance(session_id, str)):
            await send_case(scope, send, "invalid_request")
            return
        if not self._assistant.is_open:
            await send_case(scope, send, "internal")
            return
        try:
            envelope = await self._assistant.answer_for(
                question, Caller("http", verdict, client_identity(scope)), session_id=session_id
            )
        except AskServiceError as error:
            await send_service_error(scope, send, error)
            return
        await send_response(
            scope, send, 200, [_JSON, _NOSNIFF], envelope.to_json().encode("utf-8", "surrogatepass")
        )


class _NewSessionsPerClient:
    """The rate limiter port over the edge's new-sessions bucket: a new stored Ask
    conversation takes a token of its client's bucket, the one ``/api/chat`` new sessions
    take from."""

    def __init__(self, limiter: EdgeLimiter) -> None:
        self._limiter = limiter

    async def check(self, *, context: object, site: object, subject_id: str) -> RateLimitDecision:
        """One token of the caller's client address (``unknown`` without one)."""
        client = context.client if isinstance(context, Caller) else None
        return await self._limiter.take("sessions", client or "unknown")


def _metrics_registry(assistant: DocsAssistant) -> CollectorRegistry:
    """A Prometheus registry of this app's own, fed by the assistant (``create_app`` adds the
    chat's metrics and serves it at ``/metrics``)."""
    from agentskit_chat.ops import OpenTelemetryMetricSink  # noqa: PLC0415

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
    return registry


def create_docs_assistant_app(
    assistant: DocsAssistant,
    *,
    api_key: str | None = None,
    body_timeout: float = DEFAULT_BODY_TIMEOUT_S,
    stores: ChatStores | None = None,
    chat_timeout: float = 30.0,
    rate_limits: RateLimits | None = RateLimits(),  # noqa: B008 - frozen, never mutated
    allowed_hosts: Sequence[str] | None = None,
    forwarded_allow_ips: Sequence[str] = (),
) -> Starlette:
    """The web app of ``assistant`` (see the module documentation for its routes).

    It is :func:`~agentskit_chat.server.create_app` serving the docs assistant's chat
    definition, with the docs pages, ``/api/ask``, ``/api/answer`` and ``/metrics`` as more
    routes. Its lifespan opens the assistant when it is not open yet, and closes it again on
    shutdown; an assistant that was already open is left as it is.

    Args:
        assistant: The docs assistant to serve.
        api_key: The key every client must send as ``Authorization: Bearer <key>``; by default
            the assistant's own ``api_key``. Without a key, only loopback clients are served.
        body_timeout: How long a client may take to send a request body, in seconds.
        stores: Where ``/api/chat`` keeps sessions and messages (borrowed: the caller opens
            and closes them); by default this process's memory. Give the assistant the same
            stores' ``ask_sessions`` so that every worker shares everything.
        chat_timeout: The deadline of one chat turn, in seconds.
        rate_limits: The limits per client of ``/api/chat``, ``/api/ask`` and ``/api/answer``
            together, and of new conversations: a new chat session, and a question to
            ``/api/ask`` or ``/api/answer`` that starts an Ask conversation the assistant's
            ``session_store`` keeps, take from one bucket (see
            :func:`~agentskit_chat.server.create_app`;
            give ``RateLimits(redis_url=...)`` to share them between workers). ``None`` turns
            them off (the assistant's own Ask limiter still applies to ``/api/ask``).
        allowed_hosts: The ``Host`` names clients may use (see ``create_app``); by default,
            without a key, the loopback names.
        forwarded_allow_ips: The trusted proxies (see ``create_app``); none by default.

    Raises:
        ConfigurationError: a blank key or one with white space, or a non-positive timeout.
        ImportError: the ``server`` extra is not installed.

    Example::

        app = create_docs_assistant_app(create_docs_assistant("docs"))
        # uvicorn.run(app, host="127.0.0.1", port=8000)
    """
    try:
        from starlette.routing import Route  # noqa: PLC0415 - the server extra
    except ImportError as exc:  # pragma: no cover - the dev environment has the extra
        raise ImportError(
            "The docs assistant's web app needs the 'server' extra: "
            "pip install 'agentskit-chat[server]'"
        ) from exc

    from ._app import ChatSite, create_app  # noqa: PLC0415
    from ._observe import Watch  # noqa: PLC0415
    from ._target import ChatTargetHolder  # noqa: PLC0415
    from ._watched_stores import WatchedAskSessions  # noqa: PLC0415

    key = assistant.api_key if api_key is None else api_key
    gate = ApiKeyGate(key)
    timeout = check_body_timeout(body_timeout)
    # An assistant is opened by the app's lifespan or by its host, never by a request: a
    # request to an assistant nobody opened is answered 500 at once, and one its host opened
    # is served without a lifespan.
    site = ChatSite(
        ChatTargetHolder(docs_chat_target(assistant)),
        open_chat_stores("memory:") if stores is None else stores,
        owns_stores=stores is None,
        open_on_first_use=lambda: assistant.is_open,
    )
    app = create_app(
        site,
        api_key=key,
        timeout=chat_timeout,
        routes=[
            Route("/docs", DocsPages(assistant)),
            Route("/docs/{page:path}", DocsPages(assistant)),
            Route("/api/ask", _AskRoute(assistant, gate, timeout)),
            Route("/api/answer", _AnswerRoute(assistant, gate, timeout)),
        ],
        metrics_registry=_metrics_registry(assistant),
        checks={"index": assistant.ready},
        rate_limits=rate_limits,
        allowed_hosts=allowed_hosts,
        forwarded_allow_ips=forwarded_allow_ips,
    )
    limiter: EdgeLimiter | None = app.state.edge_limiter
    assistant.limit_new_sessions(None if limiter is None else _NewSessionsPerClient(limiter))
    watch: Watch = app.state.watch
    # Failed calls of the Ask conversations' store are logged and counted like the chat's.
    assistant.watch_session_store(lambda store: WatchedAskSessions(store, watch))
    return app
