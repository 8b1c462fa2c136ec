"""The Ask service pipeline, free of any transport (its order: ``docs/ask-service.md``).

:class:`AskService` takes one request through a fixed order: authentication, trusted site,
subject, corpus/persona hints, rate limit, and only then the request itself, its validation, the
stored history, retrieval under its deadline and the grounded sources. What comes back is an
:class:`~agentskit_chat.service.AskResponse`: an error with its fixed diagnostic, or the NDJSON
stream that generates, cites, persists and reports usage as it is read.

In process, :meth:`AskService.answer` takes a typed request. The HTTP edge
(:func:`~agentskit_chat.server.create_ask_service_app`) checks the method and media type, then
calls :meth:`AskService.handle` with a reader that decodes the body: bytes are decoded only
there (or by :meth:`AskService.stream` for callers holding JSON), and the events are the same.
"""

from __future__ import annotations

import inspect
import math
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias, TypeVar

import anyio

from agentskit_chat.errors import AskServiceError
from agentskit_chat.protocol import (
    ASK_ERROR_CASES,
    ASK_REQUEST_MAX_MESSAGES,
    AskDiagnostic,
    AskMessage,
    AskRequest,
    BackendSiteConfig,
    GroundedSource,
    decode_ask_session_record,
    decode_backend_site_config,
    decode_grounded_source,
)
from agentskit_chat.protocol._json import MAX_SAFE_INTEGER
from agentskit_chat.protocol._text import js_trim
from agentskit_chat.protocol._types import is_safe_id

from ._body import decode_request_body
from ._metrics import MetricOutcome, MetricSink, RequestMetrics
from ._ports import (
    AskSessionStore,
    Generator,
    RateLimitDecision,
    RateLimiter,
    RetrievalRequest,
    Retriever,
    SessionKey,
)
from ._stream import AskResponse, StreamPlan

__all__ = [
    "ASGIApp",
    "AskService",
    "AuthResult",
    "Authenticated",
    "Refused",
    "RequestReader",
    "ResolveSite",
    "ResolveSubjectId",
]

T = TypeVar("T")

#: The ASGI callable shape (scope, receive, send), as the host's refusal response uses it.
ASGIApp: TypeAlias = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]
#: Returns the trusted site configuration for an authenticated context (sync or async).
ResolveSite: TypeAlias = Callable[
    [Any], BackendSiteConfig | Mapping[str, Any] | Awaitable[BackendSiteConfig | Mapping[str, Any]]
]
#: Reads and decodes the request body when the pipeline asks for it (after the rate limit);
#: raises :class:`~agentskit_chat.errors.AskServiceError` for a body that does not qualify.
RequestReader: TypeAlias = Callable[[], Awaitable[AskRequest]]
#: Returns the stable subject id of an authenticated context (sync or async).
ResolveSubjectId: TypeAlias = Callable[[Any], str | Awaitable[str]]

_SUBJECT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,255}")
_CONFIG_INVALID: Final = "The Ask handler configuration is invalid."


@dataclass(frozen=True, slots=True)
class Authenticated:
    """Authentication succeeded; ``context`` is the host's identity, passed to every hook."""

    context: Any


@dataclass(frozen=True, slots=True)
class Refused:
    """Authentication refused; ``response`` (an ASGI app, such as a Starlette ``Response``) is
    sent unchanged: no request-id header, no metrics."""

    response: ASGIApp


#: What an authenticator returns.
AuthResult: TypeAlias = Authenticated | Refused


def _case(name: str, *, retry_after: int | None = None) -> AskServiceError:
    case = ASK_ERROR_CASES[name]
    return AskServiceError(
        case.status, case.code, case.message, retryable=case.retryable, retry_after=retry_after
    )


def _internal() -> AskServiceError:
    return _case("internal")


class _Expired(Exception):
    """A deadline of the current phase fired."""


async def _resolve(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


def _positive_int(value: object) -> bool:
    return type(value) is int and 0 < value <= MAX_SAFE_INTEGER


def _diagnostic_of(error: AskServiceError) -> AskDiagnostic | None:
    try:
        return AskDiagnostic.model_validate(
            {"code": error.code, "message": error.message, "retryable": error.retryable}
        )
    except Exception:
        return None


@dataclass(slots=True)
class _Call:
    """The state of one request while its response is prepared."""

    request_id: str
    bootstrap_deadline: float
    metrics: RequestMetrics | None = None
    in_bootstrap: bool = True
    request_deadline: float = field(default=math.inf)


class AskService:
    """The trusted Ask pipeline, with every dependency injected.

    Args:
        resolve_site: ``context -> site configuration`` (a ``BackendSiteConfig`` or its wire
            mapping, validated strictly). Sync or async; bounded by the bootstrap deadline.
        resolve_subject_id: ``context -> subject id`` for persistence and rate limiting; must
            match ``[A-Za-z0-9][A-Za-z0-9._:@-]{0,255}``.
        retrievers: Retrievers by corpus mode (``"local"``, ``"federated"``); the site's
            ``corpus.mode`` picks one. The client never does.
        generator: Streams the grounded answer.
        session_store: Revisioned CAS storage of conversations, used when the site requires
            persistence. Optional.
        rate_limiter: Consulted before the body is read. Optional (everything allowed).
        new_session_limiter: Consulted when a request would start a stored conversation (the
            site requires persistence and the store holds nothing under its session key),
            after the history is loaded; a refusal is the same 429 ``ASK_RATE_LIMITED`` with
            ``retry-after``, and nothing is stored. Bounds how many conversations one caller
            can make the store keep. Optional (every new conversation allowed).
        on_metric: Receives each validated metric (isolated: what it raises is ignored).
        max_body_bytes: The body limit.
        bootstrap_timeout_ms: The deadline of authentication and site resolution.
        create_id: Request ids; a failure or an unsafe id falls back to a random UUID.
        now: Wall clock for metric timestamps.
        clock: Milliseconds for metric durations (deadlines use anyio's clock).

    Raises:
        AskServiceError: 500 ``ASK_INTERNAL`` "The Ask handler configuration is invalid." when
            ``max_body_bytes`` or ``bootstrap_timeout_ms`` is not a positive safe integer.
    """

    def __init__(
        self,
        *,
        resolve_site: ResolveSite,
        resolve_subject_id: ResolveSubjectId,
        retrievers: Mapping[str, Retriever],
        generator: Generator,
        session_store: AskSessionStore | None = None,
        rate_limiter: RateLimiter | None = None,
        new_session_limiter: RateLimiter | None = None,
        on_metric: MetricSink | None = None,
        max_body_bytes: int = 65536,
        bootstrap_timeout_ms: int = 30000,
        create_id: Callable[[], str] | None = None,
        now: Callable[[], datetime] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not _positive_int(max_body_bytes) or not _positive_int(bootstrap_timeout_ms):
            raise AskServiceError(500, "ASK_INTERNAL", _CONFIG_INVALID, retryable=False)
        self._resolve_site = resolve_site
        self._resolve_subject_id = resolve_subject_id
        self._retrievers = dict(retrievers)
        self._generator = generator
        self._store = session_store
        self._rate_limiter = rate_limiter
        self._new_session_limiter = new_session_limiter
        self._on_metric = on_metric
        self._max_body_bytes = max_body_bytes
        self._bootstrap_seconds = bootstrap_timeout_ms / 1000
        self._create_id = create_id
        self._now = now or (lambda: datetime.now(UTC))
        self._clock = clock or (lambda: time.perf_counter() * 1000)

    # --- entry points ----------------------------------------------------------------------------

    @property
    def max_body_bytes(self) -> int:
        """The largest request body the service accepts, in bytes (the HTTP edge enforces it)."""
        return self._max_body_bytes

    async def answer(
        self,
        context: Any,
        request: AskRequest,
        *,
        query: Mapping[str, str] | None = None,
        request_id: str | None = None,
    ) -> AskResponse:
        """Answer a typed, already-authenticated request in process (no bytes, no HTTP hop).

        Args:
            context: The authenticated context, as an authenticator would return it.
            request: The decoded request.
            query: The ``corpus`` / ``persona`` hints, if any.
            request_id: The request id to use (an unsafe id is replaced by a fresh one).

        Returns:
            The response; for ``200``, its events stream as it is read.
        """

        async def read() -> AskRequest:
            return request

        return await self._in_process(context, read, query, request_id)

    async def stream(
        self,
        context: Any,
        body: bytes | str | AskRequest,
        query: Mapping[str, str] | None = None,
    ) -> AskResponse:
        """Answer an already-authenticated request in process, given as JSON or typed.

        JSON text or bytes are held to ``max_body_bytes`` and decoded exactly as the HTTP edge
        decodes them, once the rate limit has allowed the request; an ``AskRequest`` goes
        straight to :meth:`answer`.

        Args:
            context: The authenticated context, as an authenticator would return it.
            body: The request: JSON bytes or text, or an ``AskRequest``.
            query: The ``corpus`` / ``persona`` hints, if any.

        Returns:
            The response; for ``200``, its events stream as it is read.
        """
        if isinstance(body, AskRequest):
            return await self.answer(context, body, query=query)
        payload = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body

        async def read() -> AskRequest:
            return self.decode_body(payload)

        return await self._in_process(context, read, query, None)

    def decode_body(self, raw: bytes) -> AskRequest:
        """Decode a complete request body: at most ``max_body_bytes``, then the protocol's
        decoder.

        Raises:
            AskServiceError: 413 ``Request body is too large.``, or 400 with the decoder's
                diagnostic (not JSON, an invalid payload, a blank question).
        """
        return decode_request_body(raw, limit=self._max_body_bytes)

    async def _in_process(
        self,
        context: Any,
        read: RequestReader,
        query: Mapping[str, str] | None,
        request_id: str | None,
    ) -> AskResponse:
        result = await self.handle(
            authenticate=lambda: Authenticated(context),
            read_request=read,
            query=query,
            request_id=request_id,
        )
        if isinstance(result, Refused):  # pragma: no cover - the authenticator above never refuses
            raise AssertionError("in-process requests are authenticated")
        return result

    async def handle(
        self,
        *,
        authenticate: Callable[[], AuthResult | Awaitable[AuthResult]],
        read_request: RequestReader,
        query: Mapping[str, str] | None = None,
        request_id: str | None = None,
    ) -> AskResponse | Refused:
        """Take one request through the pipeline, in its fixed order.

        This is the seam for transports: the HTTP edge
        (:func:`agentskit_chat.server.create_ask_service_app`) checks the method and media type,
        then calls this with a reader that pulls and decodes the body.

        Args:
            authenticate: Authenticates the request (sync or async), under the bootstrap
                deadline.
            read_request: Reads and decodes the request, called only after the rate limit
                allowed it, under the request deadline; raises :class:`AskServiceError` for a
                body that is too large or does not decode.
            query: Query parameters (first value of each); ``corpus`` and ``persona`` are
                hints that may only confirm the trusted site.
            request_id: The request id to use, when the caller already drew one with
                :meth:`new_request_id` (an unsafe id is replaced by a fresh one).

        Returns:
            The host's refusal unchanged, or a response (an error or the stream).
        """
        if request_id is None or not is_safe_id(request_id):
            request_id = self.new_request_id()
        call = _Call(
            request_id=request_id,
            bootstrap_deadline=anyio.current_time() + self._bootstrap_seconds,
        )
        started_at = self._mark()
        try:
            return await self._prepare(
                call,
                started_at,
                authenticate=authenticate,
                query=query or {},
                read_request=read_request,
            )
        except anyio.get_cancelled_exc_class():
            if call.metrics is not None:
                call.metrics.fail("cancelled")
            raise
        except Exception as exc:
            return self._failure(call, exc)

    def error_response(self, case: str, request_id: str) -> AskResponse:
        """The catalogue's error ``case`` as a response, for refusals made before the pipeline
        (a wrong method or media type at the HTTP edge): no metrics, the request id header."""
        return self._failure(_Call(request_id=request_id, bootstrap_deadline=math.inf), _case(case))

    # --- helpers ---------------------------------------------------------------------------------

    def new_request_id(self) -> str:
        """A request id from ``create_id``, or a random UUID when it fails or is not safe."""
        if self._create_id is not None:
            try:
                candidate = self._create_id()
            except Exception:
                candidate = None
            if is_safe_id(candidate):
                return candidate  # type: ignore[return-value]
        return str(uuid.uuid4())

    def _mark(self) -> float:
        try:
            return float(self._clock())
        except Exception:
            return 0.0

    def _failure(self, call: _Call, exc: Exception) -> AskResponse:
        """What a failure before the stream starts answers: a timeout, the error's own
        diagnostic, or the internal error (whose text never reaches the client)."""
        now = anyio.current_time()
        expired = (
            isinstance(exc, _Expired)
            or (call.in_bootstrap and now >= call.bootstrap_deadline)
            or now >= call.request_deadline
        )
        error = _case("request_timeout") if expired else exc
        diagnostic = _diagnostic_of(error) if isinstance(error, AskServiceError) else None
        if diagnostic is None or not isinstance(error, AskServiceError):
            error = _internal()
            diagnostic = _diagnostic_of(error)
            assert diagnostic is not None
        outcome: MetricOutcome = (
            "cancelled" if expired else "rejected" if error.status < 500 else "error"
        )
        if call.metrics is not None:
            call.metrics.fail(outcome)
        return AskResponse.error(
            diagnostic,
            status=error.status,
            request_id=call.request_id,
            retry_after=error.retry_after,
        )

    async def _prepare(
        self,
        call: _Call,
        started_at: float,
        *,
        authenticate: Callable[[], AuthResult | Awaitable[AuthResult]],
        query: Mapping[str, str],
        read_request: RequestReader,
    ) -> AskResponse | Refused:
        # Bootstrap: identity and trusted site, under their own deadline.
        with anyio.CancelScope(deadline=call.bootstrap_deadline) as bootstrap:
            auth = await _resolve(authenticate())
            if isinstance(auth, Refused):
                return auth
            if not isinstance(auth, Authenticated):
                raise _internal()
            context = auth.context
            try:
                raw_site = await _resolve(self._resolve_site(context))
            except Exception:
                raise _internal() from None
            decoded_site = decode_backend_site_config(raw_site)
            if not decoded_site.ok:
                raise _internal()
            site = decoded_site.value
            call.metrics = RequestMetrics(
                self._on_metric,
                site_id=site.site_id,
                corpus_id=site.corpus.id,
                request_id=call.request_id,
                started_at=started_at,
                clock=self._clock,
                now=self._now,
            )
            subject_id = await _resolve(self._resolve_subject_id(context))
        if bootstrap.cancelled_caught:
            raise _Expired
        if type(subject_id) is not str or _SUBJECT.fullmatch(subject_id) is None:
            raise _case("host_identity_invalid")
        corpus_hint = query.get("corpus")
        persona_hint = query.get("persona")
        if (corpus_hint is not None and corpus_hint != site.corpus.id) or (
            persona_hint is not None and persona_hint != site.assistant.id
        ):
            raise _case("forbidden")

        # The bootstrap deadline ends with bootstrap, so a slow authenticator cannot cut the
        # answer short; the request deadline starts now.
        call.in_bootstrap = False
        call.request_deadline = anyio.current_time() + site.limits.request_timeout_ms / 1000
        with anyio.CancelScope(deadline=call.request_deadline) as request_scope:
            plan = await self._admit(
                call,
                site=site,
                context=context,
                subject_id=subject_id,
                read_request=read_request,
            )
        if request_scope.cancelled_caught:
            raise _Expired
        return AskResponse.streaming(plan)

    async def _admit(
        self,
        call: _Call,
        *,
        site: BackendSiteConfig,
        context: Any,
        subject_id: str,
        read_request: RequestReader,
    ) -> StreamPlan:
        """Steps 9-20: rate limit, body, validation, history, retrieval, sources."""
        metrics = call.metrics
        assert metrics is not None
        if self._rate_limiter is not None:
            await _check_limit(self._rate_limiter, context, site, subject_id)

        request = await read_request()
        if request.messages[-1].role != "user":
            # Answering the last user message of such a history would silently re-answer an
            # older question: the request is refused instead.
            raise _case("invalid_request")
        metrics.record("deterministic.fallback", 0 if request.deterministic is None else 1)

        key: SessionKey | None = None
        if site.persistence.mode == "required":
            if self._store is None:
                raise _case("persistence_not_configured")
            if request.session_id is None:
                # The site requires persistence and the client left out the session: the
                # client's error (400), not a server fault.
                raise _case("invalid_request")
            key = SessionKey(site.site_id, subject_id, request.session_id)
        # With persistence disabled nothing is loaded or saved, even with a store and a
        # session id at hand: the site's setting is the only authority.

        stored_revision = 0
        messages: tuple[AskMessage, ...] = request.messages
        if key is not None and self._store is not None:
            started = metrics.mark()
            loaded = await self._store.load(key)
            if loaded is not None:
                record = decode_ask_session_record(loaded)
                if not record.ok:
                    raise _internal()
                stored_revision = record.value.revision
                messages = _merge(record.value.messages, request.messages[-1])
            metrics.record("persistence.total_ms", metrics.elapsed_ms(started))
            if loaded is None and self._new_session_limiter is not None:
                # This request would start a conversation the store keeps: the host bounds
                # how many one caller may start, so a client cannot fill the store.
                await _check_limit(self._new_session_limiter, context, site, subject_id)

        query = js_trim(messages[-1].content)
        if not query:
            raise _case("question_required")

        retriever = self._retrievers.get(site.corpus.mode)
        if retriever is None:
            raise _case("retriever_unavailable")
        started = metrics.mark()
        sources = await _retrieve(
            retriever,
            RetrievalRequest(query=query, messages=messages, site=site),
            limit=site.limits.max_sources,
            deadline=anyio.current_time() + site.limits.retrieval_timeout_ms / 1000,
        )
        metrics.record("retrieval.total_ms", metrics.elapsed_ms(started))
        metrics.record("retrieval.documents", len(sources))
        if not sources:
            raise _case("no_grounded_sources")
        return StreamPlan(
            request_id=call.request_id,
            site=site,
            query=query,
            messages=messages,
            sources=sources,
            generator=self._generator,
            store=self._store if key is not None else None,
            key=key,
            stored_revision=stored_revision,
            metrics=metrics,
            request_deadline=call.request_deadline,
        )


async def _check_limit(
    limiter: RateLimiter, context: Any, site: BackendSiteConfig, subject_id: str
) -> None:
    """Raise the rate-limited case (with a valid ``retry-after``) when ``limiter`` refuses."""
    decision = await limiter.check(context=context, site=site, subject_id=subject_id)
    if not isinstance(decision, RateLimitDecision):
        raise _internal()
    if decision.allowed is not True:
        retry = decision.retry_after_seconds
        valid_retry = type(retry) is int and 0 <= retry <= MAX_SAFE_INTEGER
        raise _case("rate_limited", retry_after=retry if valid_retry else None)


def _merge(stored: tuple[AskMessage, ...], question: AskMessage) -> tuple[AskMessage, ...]:
    """Server history wins: only the client's latest question is added to it (a client cannot
    rewrite what was said)."""
    if stored and stored[-1].role == "user" and stored[-1].content == question.content:
        return stored
    return (*stored, question)[-ASK_REQUEST_MAX_MESSAGES:]


async def _retrieve(
    retriever: Retriever, request: RetrievalRequest, *, limit: int, deadline: float
) -> tuple[GroundedSource, ...]:
    """Retrieval under its own deadline; the retriever's own errors never leave here."""
    failed = False
    candidates: Any = ()
    with anyio.CancelScope(deadline=deadline) as scope:
        try:
            candidates = await _resolve(retriever.retrieve(request))
            kept: list[GroundedSource] = []
            for candidate in candidates:
                decoded = decode_grounded_source(candidate)
                if decoded.ok:
                    kept.append(decoded.value)
                    if len(kept) == limit:
                        break
        except Exception:
            failed = True
    if scope.cancelled_caught or (failed and anyio.current_time() >= deadline):
        raise _case("retrieval_timeout")
    if failed:
        raise _case("retrieval_failed")
    return tuple(kept)
