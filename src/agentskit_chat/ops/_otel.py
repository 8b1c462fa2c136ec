"""The Ask service's metrics, recorded into OpenTelemetry instruments.

Each of the seventeen backend metric names has one instrument: durations (``*_ms``) are
histograms in milliseconds, everything else (counts, bytes, tokens, dollars) is a monotonic
counter that the metric's value is added to. A counter also receives the zeros the service
emits (``stream.snapshots``, ``deterministic.fallback`` = 0), so every series exists from the
first request on.

Only three attributes are ever attached: ``site_id``, ``corpus_id`` and ``outcome``. They come
from the host's configuration and a closed set, so their cardinality stays low; the request id
of a :class:`~agentskit_chat.protocol.BackendMetric` is never an attribute, and the record has no
field for a subject, a session or any content in the first place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal

from agentskit_chat.protocol import BACKEND_METRIC_UNIT_BY_NAME, BackendMetric

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, MeterProvider

__all__ = ["DURATION_BUCKETS_MS", "OTEL_INSTRUMENTS", "OpenTelemetryMetricSink", "OtelInstrument"]

#: The meter every instrument is created on.
_METER_NAME: Final = "agentskit_chat"

#: Histogram bucket boundaries (milliseconds) advised for every duration: from a cache hit to the
#: longest request deadline a site may configure (120 s).
DURATION_BUCKETS_MS: Final = (
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1_000.0,
    2_500.0,
    5_000.0,
    10_000.0,
    30_000.0,
    60_000.0,
    120_000.0,
)


@dataclass(frozen=True, slots=True)
class OtelInstrument:
    """How one backend metric is recorded in OpenTelemetry.

    Attributes:
        name: The instrument name. The Prometheus exporter turns it into the series name by
            replacing dots with underscores and appending the unit (``_milliseconds``) or, for
            counters, ``_total``.
        kind: ``histogram`` (each value is one observation) or ``counter`` (values add up).
        unit: The UCUM unit: ``ms``, ``By``, or an annotation such as ``{token}``.
        description: What it measures, naming the backend metric it comes from.
    """

    name: str
    kind: Literal["histogram", "counter"]
    unit: str
    description: str


def _histogram(name: str, metric: str, what: str) -> OtelInstrument:
    return OtelInstrument(name, "histogram", "ms", f"{what} (backend metric {metric}).")


def _counter(name: str, unit: str, metric: str, what: str) -> OtelInstrument:
    return OtelInstrument(name, "counter", unit, f"{what} (backend metric {metric}).")


#: The instrument of each backend metric name, in the spec's order.
OTEL_INSTRUMENTS: Final[Mapping[str, OtelInstrument]] = MappingProxyType(
    {
        "request.total_ms": _histogram(
            "agentskit.ask.request.duration",
            "request.total_ms",
            "Time from the start of an Ask request to its completion or failure",
        ),
        "stream.first_event_ms": _histogram(
            "agentskit.ask.stream.time_to_first_event",
            "stream.first_event_ms",
            "Time from the start of an Ask request to its first event",
        ),
        "stream.first_token_ms": _histogram(
            "agentskit.ask.stream.time_to_first_token",
            "stream.first_token_ms",
            "Time from the start of an Ask request to its first text event",
        ),
        "stream.bytes": _counter(
            "agentskit.ask.stream.bytes", "By", "stream.bytes", "NDJSON bytes streamed"
        ),
        "stream.events": _counter(
            "agentskit.ask.stream.events", "{event}", "stream.events", "Ask events streamed"
        ),
        "stream.snapshots": _counter(
            "agentskit.ask.stream.snapshots",
            "{snapshot}",
            "stream.snapshots",
            "Turn snapshots streamed (always 0 for Ask)",
        ),
        "deterministic.fallback": _counter(
            "agentskit.ask.deterministic.fallbacks",
            "{request}",
            "deterministic.fallback",
            "Ask requests escalated from the deterministic answer plane",
        ),
        "retrieval.total_ms": _histogram(
            "agentskit.ask.retrieval.duration", "retrieval.total_ms", "Grounded retrieval time"
        ),
        "retrieval.documents": _counter(
            "agentskit.ask.retrieval.documents",
            "{document}",
            "retrieval.documents",
            "Valid sources kept after retrieval",
        ),
        "persistence.total_ms": _histogram(
            "agentskit.ask.persistence.duration",
            "persistence.total_ms",
            "Session load or save time",
        ),
        "cancellation.count": _counter(
            "agentskit.ask.cancellations",
            "{request}",
            "cancellation.count",
            "Ask requests cancelled or timed out",
        ),
        "conflict.count": _counter(
            "agentskit.ask.conflicts",
            "{conflict}",
            "conflict.count",
            "Session saves that lost the compare-and-set",
        ),
        "error.count": _counter(
            "agentskit.ask.errors", "{request}", "error.count", "Ask requests rejected or failed"
        ),
        "usage.input_tokens": _counter(
            "agentskit.ask.usage.input_tokens",
            "{token}",
            "usage.input_tokens",
            "Model input tokens reported by the generator",
        ),
        "usage.output_tokens": _counter(
            "agentskit.ask.usage.output_tokens",
            "{token}",
            "usage.output_tokens",
            "Model output tokens reported by the generator",
        ),
        "usage.total_tokens": _counter(
            "agentskit.ask.usage.total_tokens",
            "{token}",
            "usage.total_tokens",
            "Model tokens in total reported by the generator",
        ),
        "cost.usd": _counter(
            "agentskit.ask.cost.usd", "{USD}", "cost.usd", "Model cost in US dollars"
        ),
    }
)


def _import_api() -> None:
    try:
        import opentelemetry.metrics  # noqa: F401, PLC0415 - the server extra is optional
    except ImportError as exc:
        raise ImportError(
            "OpenTelemetryMetricSink needs the 'server' extra: pip install 'agentskit-chat[server]'"
        ) from exc


class OpenTelemetryMetricSink:
    """A :class:`~agentskit_chat.service.MetricSink` that records into OpenTelemetry instruments.

    Pass it as the Ask service's ``on_metric``. The instruments are created once, on a meter
    named ``agentskit_chat``; :data:`OTEL_INSTRUMENTS` lists them. Attributes are ``site_id``,
    ``corpus_id`` and ``outcome``, nothing else.

    A metric whose unit is not the normative unit of its name
    (:data:`~agentskit_chat.protocol.BACKEND_METRIC_UNIT_BY_NAME`) is dropped rather than mixed
    into an instrument measured in another unit.

    Args:
        meter_provider: Where the instruments live; defaults to OpenTelemetry's global meter
            provider (set by the host, for example with an OTLP or Prometheus reader).

    Raises:
        ImportError: the ``server`` extra (OpenTelemetry) is not installed.

    Example:
        >>> from opentelemetry.sdk.metrics import MeterProvider  # doctest: +SKIP
        >>> from opentelemetry.exporter.prometheus import PrometheusMetricReader  # doctest: +SKIP
        >>> provider = MeterProvider(metric_readers=[PrometheusMetricReader()])  # doctest: +SKIP
        >>> sink = OpenTelemetryMetricSink(provider)  # doctest: +SKIP
    """

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        _import_api()
        from opentelemetry import metrics  # noqa: PLC0415

        provider = metrics.get_meter_provider() if meter_provider is None else meter_provider
        meter = provider.get_meter(_METER_NAME)
        self._histograms: dict[str, Histogram] = {}
        self._counters: dict[str, Counter] = {}
        for metric_name, spec in OTEL_INSTRUMENTS.items():
            if spec.kind == "histogram":
                self._histograms[metric_name] = meter.create_histogram(
                    spec.name,
                    unit=spec.unit,
                    description=spec.description,
                    explicit_bucket_boundaries_advisory=DURATION_BUCKETS_MS,
                )
            else:
                self._counters[metric_name] = meter.create_counter(
                    spec.name, unit=spec.unit, description=spec.description
                )

    def __call__(self, metric: BackendMetric, /) -> None:
        """Record ``metric`` into its instrument.

        Args:
            metric: A validated backend metric, as the Ask service emits it.
        """
        name = metric.name
        if BACKEND_METRIC_UNIT_BY_NAME.get(name) != metric.unit:
            return
        attributes = {
            "site_id": metric.site_id,
            "corpus_id": metric.corpus_id,
            "outcome": metric.outcome,
        }
        histogram = self._histograms.get(name)
        if histogram is not None:
            histogram.record(metric.value, attributes)
            return
        counter = self._counters.get(name)
        if counter is not None:
            counter.add(metric.value, attributes)
