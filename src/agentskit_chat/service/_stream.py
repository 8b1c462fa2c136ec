"""The Ask response: a pull-driven NDJSON stream (its events: ``docs/ask-service.md``).

Generation runs only while the consumer pulls the next line, so a slow reader slows the
generator down instead of filling a buffer, and nothing runs in the background. Each pull runs
in its own cancel scope carrying the phase's deadline: the generation deadline (and the request
deadline) while the generator streams, the request deadline alone while the exchange is saved.
No cancel scope ever spans a ``yield``, so deadlines and cancellation land inside the pipeline,
never in the consumer's code.

Cancellation from outside (the client went away, the caller's task was cancelled) or
:meth:`AskResponse.aclose` before the end closes the generator and records the request as
cancelled.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import anyio

from agentskit_chat.errors import AskServiceError, StorageError
from agentskit_chat.protocol import (
    ASK_REQUEST_MAX_MESSAGE_CHARS,
    ASK_REQUEST_MAX_MESSAGES,
    AskDiagnostic,
    AskDoneEvent,
    AskErrorEvent,
    AskEventModel,
    AskMessage,
    AskSessionRecord,
    AskTextEvent,
    AskToolEvent,
    AskUsage,
    BackendSiteConfig,
    GroundedSource,
    decode_ask_usage,
    encode_ask_event,
)
from agentskit_chat.protocol._json import js_stringify, utf8_len
from agentskit_chat.protocol._text import js_trim, utf16_len

from ._metrics import RequestMetrics
from ._ports import (
    AskSessionStore,
    CitedSources,
    GenerationRequest,
    Generator,
    SessionKey,
    TextDelta,
    UsageReport,
)

__all__ = ["AskResponse", "StreamPlan", "diagnostic_body"]

#: How long closing a generator may take after its consumer left.
_CLEANUP_SECONDS: Final = 5.0

_TOO_LONG: Final = "The grounded answer exceeded its safe limit."
_EMPTY: Final = "The grounded answer was empty."


def _generation_failed(message: str) -> AskServiceError:
    # The same question over the same sources fails the same way, so a retry
    # cannot be promised to succeed.
    return AskServiceError(502, "ASK_GENERATION_FAILED", message, retryable=False)


def _conflict() -> AskServiceError:
    return AskServiceError(
        409, "ASK_PERSISTENCE_CONFLICT", "The Ask session changed concurrently.", retryable=True
    )


class _PastDeadline(Exception):
    """A chunk arrived after its deadline: it is not emitted."""


class _BadChunk(Exception):
    """The generator yielded something that is neither text nor usage."""


def diagnostic_body(diagnostic: AskDiagnostic) -> str:
    """The JSON error body ``{"error": {"code", "message", "retryable"}}``."""
    return js_stringify({"error": diagnostic.to_wire()})


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """Everything the stream needs, fixed before the response starts."""

    request_id: str
    site: BackendSiteConfig
    query: str
    messages: tuple[AskMessage, ...]
    sources: tuple[GroundedSource, ...]
    generator: Generator
    store: AskSessionStore | None
    key: SessionKey | None
    stored_revision: int
    metrics: RequestMetrics
    request_deadline: float


@dataclass(frozen=True, slots=True)
class _Frame:
    event: AskEventModel
    line: str


def _read_chunk(chunk: object) -> tuple[Literal["text", "usage", "sources"], Any]:
    if isinstance(chunk, TextDelta):
        return "text", chunk.delta
    if isinstance(chunk, UsageReport):
        return "usage", chunk.usage
    if isinstance(chunk, CitedSources):
        return "sources", chunk.positions
    if isinstance(chunk, Mapping):
        kind = chunk.get("type")
        if kind == "text":
            return "text", chunk.get("delta")
        if kind == "usage":
            return "usage", chunk.get("usage")
    raise _BadChunk


def _cited_sources(
    positions: object, sources: tuple[GroundedSource, ...]
) -> tuple[GroundedSource, ...]:
    """The sources a generator says its answer cites: distinct positions within ``sources``,
    at least one; anything else is a bad chunk."""
    if not isinstance(positions, tuple) or not positions:
        raise _BadChunk
    if any(type(p) is not int or not 0 <= p < len(sources) for p in positions):
        raise _BadChunk
    if len(set(positions)) != len(positions):
        raise _BadChunk
    return tuple(sources[p] for p in positions)


async def _close_quietly(iterator: object) -> None:
    close = getattr(iterator, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception:
        return


def _in_stream_diagnostic(error: BaseException | None, timed_out: bool) -> AskDiagnostic:
    if timed_out:
        code, message, retryable = "ASK_TIMEOUT", "The Ask request timed out.", True
    elif isinstance(error, AskServiceError):
        code, message, retryable = error.code, error.message, error.retryable
    elif isinstance(error, StorageError):
        # Only a transient storage failure is worth retrying: the diagnostic says so.
        code, message, retryable = "ASK_INTERNAL", "The Ask request failed.", error.retryable
    else:
        code, message, retryable = "ASK_INTERNAL", "The Ask request failed.", False
    try:
        return AskDiagnostic.model_validate(
            {"code": code, "message": message, "retryable": retryable}
        )
    except Exception:
        return AskDiagnostic.model_validate(
            {"code": "ASK_INTERNAL", "message": "The Ask request failed.", "retryable": False}
        )


class _AskStream:
    """The stream's steps (text, citations, persistence, usage, done), one frame per pull."""

    def __init__(self, plan: StreamPlan) -> None:
        self._plan = plan
        self._generation_deadline = min(
            plan.request_deadline,
            anyio.current_time() + plan.site.limits.generation_timeout_ms / 1000,
        )
        self._generating = True
        self._completed = False
        self._finished = False
        self._events = 0
        self._bytes = 0
        self._first_event = True
        self._first_token = True
        self._inner = self._produce()

    # --- emission --------------------------------------------------------------------------------

    def _emit(self, event: AskEventModel) -> _Frame:
        line = encode_ask_event(event)
        metrics = self._plan.metrics
        if self._first_event:
            self._first_event = False
            metrics.record("stream.first_event_ms", metrics.elapsed_ms())
        if self._first_token and isinstance(event, AskTextEvent):
            self._first_token = False
            metrics.record("stream.first_token_ms", metrics.elapsed_ms())
        self._bytes += utf8_len(line)
        self._events += 1
        return _Frame(event, line)

    def _deadline(self) -> float:
        if self._generating:
            return self._generation_deadline
        return self._plan.request_deadline

    # --- the pipeline, as frames -----------------------------------------------------------------

    async def _produce(self) -> AsyncGenerator[_Frame, None]:
        plan = self._plan
        metrics = plan.metrics
        parts: list[str] = []
        units = 0
        usage: AskUsage | None = None
        cited: tuple[GroundedSource, ...] = plan.sources
        chunks = plan.generator.generate(
            GenerationRequest(
                query=plan.query, messages=plan.messages, site=plan.site, sources=plan.sources
            )
        )
        try:
            async for chunk in chunks:
                if anyio.current_time() >= self._generation_deadline:
                    raise _PastDeadline
                kind, value = _read_chunk(chunk)
                if kind == "usage":
                    decoded = decode_ask_usage(value)
                    if not decoded.ok:
                        raise _BadChunk
                    usage = decoded.value
                    continue
                if kind == "sources":
                    cited = _cited_sources(value, plan.sources)
                    continue
                if type(value) is not str:
                    raise _BadChunk
                if not value:
                    continue
                units += utf16_len(value)
                if units > ASK_REQUEST_MAX_MESSAGE_CHARS:
                    raise _generation_failed(_TOO_LONG)
                parts.append(value)
                yield self._emit(AskTextEvent(delta=value))
        finally:
            await _close_quietly(chunks)
        self._generating = False
        answer = "".join(parts)
        if not js_trim(answer):
            raise _generation_failed(_EMPTY)
        yield self._emit(
            AskToolEvent(
                id=f"sources-{plan.request_id}",
                name="cite",
                args={
                    "sources": [
                        {"id": source.id, "title": source.title, "path": source.href}
                        for source in cited
                    ]
                },
            )
        )
        if plan.store is not None and plan.key is not None:
            history = (*plan.messages, AskMessage(role="assistant", content=answer))
            record = AskSessionRecord(
                revision=plan.stored_revision + 1,
                messages=history[-ASK_REQUEST_MAX_MESSAGES:],
            )
            started = metrics.mark()
            saved = await plan.store.save(plan.key, record, plan.stored_revision) is True
            metrics.record(
                "persistence.total_ms", metrics.elapsed_ms(started), "ok" if saved else "error"
            )
            if not saved:
                metrics.record("conflict.count", 1, "error")
                raise _conflict()
        model = None
        if usage is not None:
            for name, value in (
                ("usage.input_tokens", usage.input_tokens),
                ("usage.output_tokens", usage.output_tokens),
                ("usage.total_tokens", usage.total_tokens),
                ("cost.usd", usage.cost_usd),
            ):
                if value is not None:
                    metrics.record(name, value)
            model = usage.model
        done = self._emit(AskDoneEvent() if model is None else AskDoneEvent(model=model))
        metrics.record("stream.bytes", self._bytes)
        metrics.record("stream.events", self._events)
        metrics.record("stream.snapshots", 0)
        metrics.succeed()
        self._completed = True
        yield done

    # --- driving it ------------------------------------------------------------------------------

    async def next_frame(self) -> _Frame:
        """The next frame; ``StopAsyncIteration`` after ``done`` or ``error``."""
        if self._finished:
            raise StopAsyncIteration
        error: Exception | None = None
        try:
            with anyio.CancelScope(deadline=self._deadline()) as scope:
                try:
                    frame = await self._inner.__anext__()
                except StopAsyncIteration:
                    self._finished = True
                    raise
                except Exception as exc:
                    error = exc
                else:
                    if self._completed:
                        self._finished = True
                        await _close_quietly(self._inner)
                    return frame
        except StopAsyncIteration:
            raise
        except BaseException:
            # Cancelled from outside this scope: the consumer is gone. The generator was the
            # one waiting, so the cancellation went through it and closed it.
            self._consumer_gone()
            raise
        now = anyio.current_time()
        timed_out = (
            scope.cancelled_caught
            or now >= self._plan.request_deadline
            or (self._generating and now >= self._generation_deadline)
        )
        return self._fail(error, timed_out)

    def _fail(self, error: BaseException | None, timed_out: bool) -> _Frame:
        self._finished = True
        diagnostic = _in_stream_diagnostic(error, timed_out)
        frame = self._emit(
            AskErrorEvent(
                message=diagnostic.message, code=diagnostic.code, retryable=diagnostic.retryable
            )
        )
        self._plan.metrics.fail("error")
        return frame

    def _consumer_gone(self) -> None:
        if not self._finished:
            self._finished = True
            self._plan.metrics.fail("cancelled")

    async def aclose(self) -> None:
        """Stop early: close the generator and record the request as cancelled."""
        self._consumer_gone()
        with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
            await _close_quietly(self._inner)


class AskResponse:
    """What the Ask service answers: a status, headers, and a body read line by line.

    A ``200`` response streams Ask NDJSON: iterate it for the lines (each ends with LF), or use
    :meth:`events` for the event models. Any other status carries :attr:`diagnostic` and a body
    of one JSON document, ``{"error": {...}}``; its :meth:`events` yields nothing.

    The stream runs as it is read. Read it to the end (``done`` or ``error``), or close it with
    :meth:`aclose` (or ``async with response:``): closing early cancels the generator and records
    the request as cancelled.

    Attributes:
        status: The HTTP status.
        headers: Lower-case response headers, in order.
        request_id: The id in the ``x-request-id`` header.
        diagnostic: The error of a non-``200`` response, else ``None``.
    """

    def __init__(
        self,
        *,
        status: int,
        headers: Sequence[tuple[str, str]],
        request_id: str,
        diagnostic: AskDiagnostic | None = None,
        stream: _AskStream | None = None,
    ) -> None:
        self.status = status
        self.headers: tuple[tuple[str, str], ...] = tuple(headers)
        self.request_id = request_id
        self.diagnostic = diagnostic
        self._stream = stream
        self._body: str | None = None if diagnostic is None else diagnostic_body(diagnostic)

    @classmethod
    def streaming(cls, plan: StreamPlan) -> AskResponse:
        """The ``200`` NDJSON response of a request that passed every check."""
        return cls(
            status=200,
            headers=(
                ("content-type", "application/x-ndjson; charset=utf-8"),
                ("cache-control", "no-store"),
                ("x-content-type-options", "nosniff"),
                ("x-request-id", plan.request_id),
            ),
            request_id=plan.request_id,
            stream=_AskStream(plan),
        )

    @classmethod
    def error(
        cls, diagnostic: AskDiagnostic, *, status: int, request_id: str, retry_after: int | None
    ) -> AskResponse:
        """A JSON error response ``{"error": diagnostic}``."""
        headers = [
            ("content-type", "application/json; charset=utf-8"),
            ("cache-control", "no-store"),
            ("x-content-type-options", "nosniff"),
            ("x-request-id", request_id),
        ]
        if retry_after is not None:
            headers.append(("retry-after", str(retry_after)))
        if status == 405:
            headers.append(("allow", "POST"))
        return cls(status=status, headers=headers, request_id=request_id, diagnostic=diagnostic)

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)

    def __aiter__(self) -> AskResponse:
        return self

    async def __anext__(self) -> str:
        """The next piece of the body: one NDJSON line, or the whole JSON error document."""
        if self._stream is not None:
            return (await self._stream.next_frame()).line
        if self._body is None:
            raise StopAsyncIteration
        body, self._body = self._body, None
        return body

    async def events(self) -> AsyncIterator[AskEventModel]:
        """The streamed events as models, in order; nothing for an error response."""
        if self._stream is None:
            return
        while True:
            try:
                frame = await self._stream.next_frame()
            except StopAsyncIteration:
                return
            yield frame.event

    async def aclose(self) -> None:
        """Stop reading. Before the end of a stream this cancels the generator."""
        self._body = None
        if self._stream is not None:
            await self._stream.aclose()

    async def __aenter__(self) -> AskResponse:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
