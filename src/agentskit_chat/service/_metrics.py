"""Privacy-safe metrics of the Ask service (names and fields: ``docs/operations.md``).

Every measurement leaves the service as a validated :class:`~agentskit_chat.protocol.BackendMetric`
with exactly ten fields. The record has no place for a question, an answer, a source, a subject
or a session id, so nothing private can reach a sink by construction. Sinks are isolated: one
that raises never changes a response.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final, Literal, Protocol

from agentskit_chat._observers import notify
from agentskit_chat.protocol import (
    BACKEND_METRIC_PROTOCOL,
    BACKEND_METRIC_UNIT_BY_NAME,
    BACKEND_METRIC_VERSION,
    BackendMetric,
)

__all__ = ["MetricOutcome", "MetricSink", "RequestMetrics", "iso_timestamp"]

#: How a request (or one of its steps) ended, as metrics report it.
MetricOutcome = Literal["ok", "rejected", "cancelled", "error"]

_FAILURE_COUNTER: Final = {
    "rejected": "error.count",
    "error": "error.count",
    "cancelled": "cancellation.count",
}


class MetricSink(Protocol):
    """Receives each metric of the Ask service, in emission order.

    A plain function (or ``list.append``) is a sink. It is called synchronously from the
    request's task, so it should hand the metric off quickly (to an OpenTelemetry instrument,
    a Prometheus counter, a queue). Whatever it raises is swallowed.
    """

    def __call__(self, metric: BackendMetric, /) -> object:
        """Record one metric."""
        ...


def iso_timestamp(moment: datetime) -> str:
    """``moment`` as JavaScript's ``Date.prototype.toISOString`` writes it (UTC, milliseconds).

    A naive datetime is read as UTC.

    >>> iso_timestamp(datetime(2026, 7, 13, tzinfo=UTC))
    '2026-07-13T00:00:00.000Z'
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


class RequestMetrics:
    """The metrics of one Ask request, once its site is known.

    ``record`` emits one metric; ``fail`` emits the failure pair (``error.count`` or
    ``cancellation.count``, then ``request.total_ms``) at most once per request, so a later
    classification can never add a second failure. ``request.total_ms`` is always the last
    metric of a request.
    """

    def __init__(
        self,
        sink: MetricSink | None,
        *,
        site_id: str,
        corpus_id: str,
        request_id: str,
        started_at: float,
        clock: Callable[[], float],
        now: Callable[[], datetime],
    ) -> None:
        self._sink = sink
        self._site_id = site_id
        self._corpus_id = corpus_id
        self._request_id = request_id
        self._started_at = started_at
        self._clock = clock
        self._now = now
        self._finished = False

    @property
    def finished(self) -> bool:
        """Whether the request's final metrics (success or failure) were recorded."""
        return self._finished

    def elapsed_ms(self, since: float | None = None) -> float:
        """Milliseconds from ``since`` (default: the request start) to now, per the clock."""
        try:
            return self._clock() - (self._started_at if since is None else since)
        except Exception:
            return 0.0

    def mark(self) -> float:
        """The clock's current reading, to measure a step with :meth:`elapsed_ms`."""
        try:
            return self._clock()
        except Exception:
            return self._started_at

    def record(self, name: str, value: float, outcome: MetricOutcome = "ok") -> None:
        """Validate and deliver one metric; negative values are clamped to 0.

        A value that is not finite, or a clock that misbehaves, drops the metric silently.
        """
        if self._sink is None:
            return
        try:
            number = float(value)
            if not math.isfinite(number):
                return
            metric = BackendMetric.model_validate(
                {
                    "protocol": BACKEND_METRIC_PROTOCOL,
                    "version": BACKEND_METRIC_VERSION,
                    "name": name,
                    "siteId": self._site_id,
                    "corpusId": self._corpus_id,
                    "requestId": self._request_id,
                    "value": value if type(value) is int and value >= 0 else max(number, 0.0),
                    "unit": BACKEND_METRIC_UNIT_BY_NAME[name],
                    "outcome": outcome,
                    "emittedAt": iso_timestamp(self._now()),
                }
            )
        except Exception:
            return
        # Isolated by contract: an observer never changes what the client sees.
        notify(self._sink, metric)

    def succeed(self) -> None:
        """Record ``request.total_ms`` with outcome ``ok`` and close the request's metrics."""
        if self._finished:
            return
        self._finished = True
        self.record("request.total_ms", self.elapsed_ms(), "ok")

    def fail(self, outcome: MetricOutcome) -> None:
        """Record the failure metrics once: the failure counter, then ``request.total_ms``."""
        if self._finished:
            return
        self._finished = True
        self.record(_FAILURE_COUNTER.get(outcome, "error.count"), 1, outcome)
        self.record("request.total_ms", self.elapsed_ms(), outcome)
