"""Failures made visible: log records, Prometheus metrics and the per-request failure note.

:func:`~agentskit_chat.server.create_app` builds one :class:`Watch` per app. It writes one log
record per event through the standard :mod:`logging` module, with its fields as ``extra=``
attributes, and counts the same events in a Prometheus registry served at ``/metrics``:

=================================  ===========================================================
Logger                             One record per
=================================  ===========================================================
``agentskit_chat.server.http``     response with a 5xx status (``event="http.error"``)
``agentskit_chat.server.chat``     chat turn that failed after its stream started
                                   (``event="chat.turn.failed"``)
``agentskit_chat.store``           failed store call, the rate limiter's Redis included
                                   (``event="store.error"``)
``agentskit_chat.server.lease``    turn lease released late after a store failure, or left to
                                   expire (``event="chat.lease.released"`` / ``"chat.lease.kept"``)
=================================  ===========================================================

Records and labels carry fixed words only: a route template, a status, an error code, a store
kind, an operation, exception class names, a duration. Never a prompt, an answer, a source, a
credential, a subject or session id, a request body or an exception's message.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, MutableMapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import orjson

from ._asgi import ASGIApp, Receive, Scope, Send, route_path

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "HTTP_LOGGER",
    "LEASE_LOGGER",
    "STORE_LOGGER",
    "TURN_LOGGER",
    "Observe",
    "TurnEvents",
    "Watch",
    "note_error",
    "route_label",
]

T = TypeVar("T")

HTTP_LOGGER: Final = "agentskit_chat.server.http"
TURN_LOGGER: Final = "agentskit_chat.server.chat"
STORE_LOGGER: Final = "agentskit_chat.store"
LEASE_LOGGER: Final = "agentskit_chat.server.lease"

_http_log = logging.getLogger(HTTP_LOGGER)
_turn_log = logging.getLogger(TURN_LOGGER)
_store_log = logging.getLogger(STORE_LOGGER)
_lease_log = logging.getLogger(LEASE_LOGGER)

#: The scope key of a request's :class:`_Note` (a mutable object, so copies of the scope share it).
_NOTE: Final = "agentskit_chat.failure"
_ROUTES: Final = frozenset(
    {"/", "/api/chat", "/api/ask", "/api/answer", "/healthz", "/metrics", "/docs"}
)
#: Statuses whose error code is read from the (small, JSON) error body the server wrote.
_COUNTED: Final = frozenset({409, 429})
_CODE: Final = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_PEEK_BYTES: Final = 4096
#: A store call cancelled after this long is counted as failed (a deadline cut it off).
_SLOW_CANCEL_S: Final = 1.0
#: The outcomes of a chat turn whose failure is logged, and at which level.
_LOGGED_OUTCOMES: Final = {
    "store_error": logging.ERROR,
    "failed": logging.ERROR,
    "conflict": logging.WARNING,
    "too_large": logging.WARNING,
    "confirmation_limit": logging.WARNING,
}
_TURN_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)


def route_label(path: str) -> str:
    """The route template of ``path``: a served route, ``/static``, ``/docs`` or ``other``
    (never the path itself, which a client chooses)."""
    if path in _ROUTES:
        return path
    if path.startswith("/static/"):
        return "/static"
    if path.startswith("/docs/"):
        return "/docs"
    return "other"


def class_name(error: BaseException | None) -> str | None:
    """The class name of ``error`` (never its message)."""
    return None if error is None else type(error).__name__


def cause_name(error: BaseException) -> str | None:
    """The class name of the driver error behind ``error`` (kept as its context even when it
    was raised ``from None``), if any."""
    cause = error.__cause__ or error.__context__
    return None if cause is None else type(cause).__name__


class _Note:
    """What the handler knew about a request's failure, for the response's log record."""

    __slots__ = ("error_class",)

    def __init__(self) -> None:
        self.error_class: str | None = None


def note_error(scope: Scope, error: BaseException) -> None:
    """Tell the response's log record which exception class made this request fail."""
    note = scope.get(_NOTE)
    if isinstance(note, _Note) and note.error_class is None:
        note.error_class = type(error).__name__


class TurnEvents:
    """What the chat turn handler reports; these do nothing (a handler outside ``create_app``)."""

    def turn_started(self) -> None:
        """A turn claimed its session and its controller starts."""

    def turn_finished(
        self,
        outcome: str,
        seconds: float,
        *,
        error: BaseException | None = None,
        code: str | None = None,
    ) -> None:
        """A started turn ended: ``outcome`` is a fixed word (``completed``, ``error``, ...)."""

    def lease_released(self, *, attempts: int, seconds: float, released: bool) -> None:
        """A lease cleanup could not release at once was retried until it was released (or
        given up to its expiry)."""


class Watch(TurnEvents):
    """The log records and Prometheus metrics of one app (see the module documentation).

    Args:
        registry: Where the metrics are registered (``/metrics`` serves it).
        store: The store kind: ``memory``, ``sqlite``, ``postgresql`` or ``redis``.

    Raises:
        ImportError: the ``server`` extra (``prometheus-client``) is not installed.
    """

    def __init__(self, registry: CollectorRegistry, store: str) -> None:
        from prometheus_client import Counter, Histogram  # noqa: PLC0415 - the server extra

        self.store = store
        self._turns_started = Counter(
            "agentskit_chat_turns_started",
            "Chat turns that claimed their session and started.",
            registry=registry,
        )
        self._turns_finished = Counter(
            "agentskit_chat_turns_finished",
            "Chat turns that ended, by outcome.",
            ["outcome"],
            registry=registry,
        )
        self._turn_seconds = Histogram(
            "agentskit_chat_turn_duration_seconds",
            "From a chat turn's request to its stream's end, by outcome.",
            ["outcome"],
            buckets=_TURN_BUCKETS,
            registry=registry,
        )
        self._store_errors = Counter(
            "agentskit_chat_store_errors",
            "Failed store calls, by store kind and operation.",
            ["store", "operation"],
            registry=registry,
        )
        self._busy = Counter(
            "agentskit_chat_busy_refusals",
            "Chat submissions refused because another turn holds the session (409 SESSION_BUSY).",
            registry=registry,
        )
        self._rate_limited = Counter(
            "agentskit_chat_rate_limited",
            "Requests refused by a rate limit (429), by route and error code.",
            ["route", "code"],
            registry=registry,
        )
        self._server_errors = Counter(
            "agentskit_chat_http_server_errors",
            "Responses with a 5xx status, by route and status.",
            ["route", "status"],
            registry=registry,
        )
        self._late_releases = Counter(
            "agentskit_chat_lease_late_releases",
            "Turn leases released after a store failure, by whether the release succeeded.",
            ["released"],
            registry=registry,
        )

    # --- the chat turn ---------------------------------------------------------------------

    def turn_started(self) -> None:
        """Count a started turn."""
        self._turns_started.inc()

    def turn_finished(
        self,
        outcome: str,
        seconds: float,
        *,
        error: BaseException | None = None,
        code: str | None = None,
    ) -> None:
        """Count an ended turn and time it; log it when it failed on the server's side."""
        self._turns_finished.labels(outcome).inc()
        self._turn_seconds.labels(outcome).observe(max(0.0, seconds))
        level = _LOGGED_OUTCOMES.get(outcome)
        if level is None:
            return
        fields = {
            "event": "chat.turn.failed",
            "route": "/api/chat",
            "outcome": outcome,
            "error_code": code,
            "error_class": class_name(error),
            "cause_class": None if error is None else cause_name(error),
            "store": self.store,
            "duration_ms": round(seconds * 1000, 1),
        }
        _turn_log.log(
            level,
            "chat turn failed: %s %s (%s)",
            outcome,
            code,
            fields["error_class"],
            extra=fields,
        )

    def lease_released(self, *, attempts: int, seconds: float, released: bool) -> None:
        """Count and log a lease released late (or kept until it expires)."""
        self._late_releases.labels("true" if released else "false").inc()
        fields = {
            "event": "chat.lease.released" if released else "chat.lease.kept",
            "store": self.store,
            "attempts": attempts,
            "duration_ms": round(seconds * 1000, 1),
        }
        if released:
            _lease_log.info("turn lease released after %d attempts", attempts, extra=fields)
        else:
            _lease_log.warning(
                "turn lease not released after %d attempts; it expires", attempts, extra=fields
            )

    # --- the store --------------------------------------------------------------------------

    def store_error(
        self, operation: str, error: BaseException, seconds: float, *, store: str | None = None
    ) -> None:
        """Count and log one failed store call."""
        kind = store or self.store
        self._store_errors.labels(kind, operation).inc()
        retryable = getattr(error, "retryable", None)
        fields = {
            "event": "store.error",
            "store": kind,
            "operation": operation,
            "error_class": class_name(error),
            "cause_class": cause_name(error),
            "retryable": retryable if isinstance(retryable, bool) else None,
            "duration_ms": round(seconds * 1000, 1),
        }
        _store_log.error(
            "store call failed: %s %s %s (%s)",
            kind,
            operation,
            fields["error_class"],
            fields["cause_class"],
            extra=fields,
        )

    async def call(self, operation: str, work: Awaitable[T], *, store: str | None = None) -> T:
        """Await one store call, recording its failure (an exception, or a cancellation after
        a second or more: a deadline that cut a waiting call off)."""
        start = time.perf_counter()
        try:
            return await work
        except anyio.get_cancelled_exc_class() as cancelled:
            elapsed = time.perf_counter() - start
            if elapsed >= _SLOW_CANCEL_S:
                self.store_error(operation, cancelled, elapsed, store=store)
            raise
        except Exception as error:
            self.store_error(operation, error, time.perf_counter() - start, store=store)
            raise

    def rate_limiter_error(self, error: BaseException, seconds: float) -> None:
        """The rate limiter's Redis failed (a store error of kind ``redis``)."""
        self.store_error("rate_limit", error, seconds, store="redis")

    # --- responses --------------------------------------------------------------------------

    def response(
        self,
        path: str,
        status: int,
        code: str | None,
        seconds: float,
        note: _Note,
    ) -> None:
        """Count (and for a 5xx, log) one response."""
        route = route_label(path)
        if status == 409 and code == "SESSION_BUSY":
            self._busy.inc()
        elif status == 429:
            self._rate_limited.labels(route, code or "unknown").inc()
        elif status >= 500:
            self._server_errors.labels(route, str(status)).inc()
            fields = {
                "event": "http.error",
                "route": route,
                "status": status,
                "error_code": code,
                "error_class": note.error_class,
                "store": self.store,
                "duration_ms": round(seconds * 1000, 1),
            }
            _http_log.error(
                "HTTP %d on %s: %s (%s)",
                status,
                route,
                code,
                note.error_class,
                extra=fields,
            )


def _code(body: bytes) -> str | None:
    """The ``error.code`` of a JSON error body this server wrote, when it is a code word."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    error = document.get("error") if isinstance(document, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) and _CODE.fullmatch(code) else None


class Observe:
    """The outermost middleware: times every HTTP response and reports it to the watch
    (5xx, 409 ``SESSION_BUSY`` and 429 responses; everything else is only passed through)."""

    def __init__(self, app: ASGIApp, *, watch: Watch) -> None:
        self._app = app
        self._watch = watch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self._app(scope, receive, send)
            return
        note = _Note()
        scope = {**scope, _NOTE: note}
        start = time.perf_counter()
        status = 0
        code: str | None = None
        reported = False

        def report() -> None:
            nonlocal reported
            if not reported and (status >= 500 or status in _COUNTED):
                reported = True
                self._watch.response(
                    route_path(scope), status, code, time.perf_counter() - start, note
                )

        async def observed(message: MutableMapping[str, Any]) -> None:
            nonlocal status, code
            kind = message.get("type")
            if kind == "http.response.start":
                status = int(message.get("status", 0))
            elif kind == "http.response.body" and code is None and status >= 400:
                body = message.get("body", b"")
                if not message.get("more_body", False) and len(body) <= _PEEK_BYTES:
                    code = _code(body)
            await send(message)
            if kind == "http.response.body" and not message.get("more_body", False):
                report()

        try:
            await self._app(scope, receive, observed)
        except anyio.get_cancelled_exc_class():
            raise  # nobody is answered (a shutdown): not a 5xx
        except BaseException as error:
            if status == 0:
                status = 500  # the server answers it so
                note_error(scope, error)
            raise
        finally:
            report()
