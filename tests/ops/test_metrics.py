"""Backend metrics into OpenTelemetry, the Prometheus endpoint and /healthz.

Instruments are read back through a real ``InMemoryMetricReader``; the endpoints are served by a
real uvicorn on a loopback port (port 0), behind Starlette routes as a host would mount them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import orjson
import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Histogram, InMemoryMetricReader, Sum
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.routing import Route

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.ops import OTEL_INSTRUMENTS, OpenTelemetryMetricSink
from agentskit_chat.protocol import BACKEND_METRIC_NAMES, BACKEND_METRIC_UNIT_BY_NAME, BackendMetric
from agentskit_chat.server import HealthzApp, create_healthz_app, create_prometheus_metrics_app
from agentskit_chat.service import MetricSink
from tests.service._support import QUESTION, body, make_app, serve

pytestmark = pytest.mark.anyio

ATTRIBUTES = {"site_id", "corpus_id", "outcome"}
AUTH = {"authorization": "Bearer valid", "content-type": "application/json"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Telemetry:
    reader: InMemoryMetricReader
    registry: CollectorRegistry
    sink: OpenTelemetryMetricSink

    def points(self) -> dict[str, tuple[Any, list[Any]]]:
        """Instrument name -> (aggregation data, its data points)."""
        data = self.reader.get_metrics_data()
        found: dict[str, tuple[Any, list[Any]]] = {}
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found[metric.name] = (metric, list(metric.data.data_points))
        return found


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    reader = InMemoryMetricReader()
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[reader, PrometheusMetricReader(registry=registry)])
    sink: MetricSink = OpenTelemetryMetricSink(provider)
    assert isinstance(sink, OpenTelemetryMetricSink)
    try:
        yield Telemetry(reader, registry, sink)
    finally:
        provider.shutdown()


def metric(name: str, value: float, **changes: Any) -> BackendMetric:
    wire: dict[str, Any] = {
        "protocol": "agentskit.chat.backend-metric",
        "version": 1,
        "name": name,
        "siteId": "docs",
        "corpusId": "docs-public",
        "requestId": "request-secret-7",
        "value": value,
        "unit": BACKEND_METRIC_UNIT_BY_NAME[name],
        "outcome": "ok",
        "emittedAt": "2026-07-13T00:00:00.000Z",
    }
    wire.update(changes)
    return BackendMetric.model_validate(wire)


# --- the sink ------------------------------------------------------------------------------------


def test_every_metric_name_has_its_own_instrument() -> None:
    assert tuple(OTEL_INSTRUMENTS) == BACKEND_METRIC_NAMES
    names = [spec.name for spec in OTEL_INSTRUMENTS.values()]
    assert len(set(names)) == len(names)
    for metric_name, spec in OTEL_INSTRUMENTS.items():
        is_duration = BACKEND_METRIC_UNIT_BY_NAME[metric_name] == "ms"
        assert spec.kind == ("histogram" if is_duration else "counter"), metric_name
        assert metric_name in spec.description


@pytest.mark.parametrize("name", BACKEND_METRIC_NAMES)
def test_each_metric_records_into_its_instrument_only(telemetry: Telemetry, name: str) -> None:
    telemetry.sink(metric(name, 7, outcome="error"))
    telemetry.sink(metric(name, 5, outcome="error"))
    points = telemetry.points()
    spec = OTEL_INSTRUMENTS[name]
    assert set(points) == {spec.name}
    recorded, data_points = points[spec.name]
    assert recorded.unit == spec.unit
    assert len(data_points) == 1
    (point,) = data_points
    assert dict(point.attributes) == {
        "site_id": "docs",
        "corpus_id": "docs-public",
        "outcome": "error",
    }
    if spec.kind == "histogram":
        assert isinstance(recorded.data, Histogram)
        assert (point.count, point.sum, point.min, point.max) == (2, 12, 5, 7)
    else:
        assert isinstance(recorded.data, Sum)
        assert recorded.data.is_monotonic
        assert point.value == 12


def test_zeros_create_the_series(telemetry: Telemetry) -> None:
    telemetry.sink(metric("stream.snapshots", 0))
    telemetry.sink(metric("deterministic.fallback", 0))
    points = telemetry.points()
    for name in ("stream.snapshots", "deterministic.fallback"):
        _, (point,) = points[OTEL_INSTRUMENTS[name].name]
        assert point.value == 0


def test_outcomes_and_sites_are_separate_series(telemetry: Telemetry) -> None:
    telemetry.sink(metric("request.total_ms", 10, outcome="ok"))
    telemetry.sink(metric("request.total_ms", 20, outcome="cancelled"))
    telemetry.sink(metric("request.total_ms", 30, siteId="registry", corpusId="registry-public"))
    _, data_points = telemetry.points()["agentskit.ask.request.duration"]
    series = {
        (p.attributes["site_id"], p.attributes["corpus_id"], p.attributes["outcome"]): p.sum
        for p in data_points
    }
    assert series == {
        ("docs", "docs-public", "ok"): 10,
        ("docs", "docs-public", "cancelled"): 20,
        ("registry", "registry-public", "ok"): 30,
    }


@pytest.mark.parametrize(
    ("name", "unit"),
    [("request.total_ms", "count"), ("stream.bytes", "ms"), ("cost.usd", "tokens")],
)
def test_a_unit_that_is_not_the_names_unit_is_dropped(
    telemetry: Telemetry, name: str, unit: str
) -> None:
    telemetry.sink(metric(name, 3, unit=unit))
    assert telemetry.points() == {}


def test_no_attribute_ever_carries_a_request_id(telemetry: Telemetry) -> None:
    for name in BACKEND_METRIC_NAMES:
        telemetry.sink(metric(name, 1))
    for _, data_points in telemetry.points().values():
        for point in data_points:
            assert set(point.attributes) == ATTRIBUTES
            assert "request-secret-7" not in orjson.dumps(dict(point.attributes)).decode()


def test_the_global_meter_provider_is_the_default() -> None:
    # No provider configured: OpenTelemetry's no-op default takes the metrics without error.
    sink = OpenTelemetryMetricSink()
    for name in BACKEND_METRIC_NAMES:
        sink(metric(name, 1))


@pytest.mark.parametrize("module", ["opentelemetry", "opentelemetry.metrics"])
def test_missing_opentelemetry_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=r"agentskit-chat\[server\]"):
        OpenTelemetryMetricSink()


def test_missing_prometheus_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(ImportError, match=r"agentskit-chat\[server\]"):
        create_prometheus_metrics_app()


# --- over a real socket --------------------------------------------------------------------------


def ops_app(telemetry: Telemetry, healthz: HealthzApp | None = None, **service: Any) -> Starlette:
    return Starlette(
        routes=[
            Route("/api/ask", make_app(on_metric=telemetry.sink, **service), methods=["POST"]),
            Route("/metrics", create_prometheus_metrics_app(telemetry.registry)),
            Route("/healthz", healthz or create_healthz_app()),
        ]
    )


HAPPY_SERIES = [
    "agentskit_ask_deterministic_fallbacks_total",
    "agentskit_ask_persistence_duration_milliseconds_bucket",
    "agentskit_ask_retrieval_duration_milliseconds_count",
    "agentskit_ask_retrieval_documents_total",
    "agentskit_ask_stream_time_to_first_event_milliseconds_sum",
    "agentskit_ask_stream_time_to_first_token_milliseconds_count",
    "agentskit_ask_usage_input_tokens_total",
    "agentskit_ask_usage_output_tokens_total",
    "agentskit_ask_usage_total_tokens_total",
    "agentskit_ask_cost_usd_total",
    "agentskit_ask_stream_bytes_total",
    "agentskit_ask_stream_events_total",
    "agentskit_ask_stream_snapshots_total",
    "agentskit_ask_request_duration_milliseconds_bucket",
]


async def test_metrics_endpoint_serves_the_ask_services_metrics(telemetry: Telemetry) -> None:
    async with serve(ops_app(telemetry)) as url, httpx.AsyncClient() as client:
        answered = await client.post(f"{url}/api/ask", content=body(), headers=AUTH)
        assert answered.status_code == 200
        scraped = await client.get(f"{url}/metrics")
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert scraped.headers["cache-control"] == "no-store"
    text = scraped.text
    for series in HAPPY_SERIES:
        assert f'{series}{{corpus_id="docs-public"' in text, series
    assert 'agentskit_ask_stream_snapshots_total{corpus_id="docs-public"' in text
    for private in ("request-1", "user-1", "session-1", QUESTION):
        assert private not in text


async def test_metrics_endpoint_answers_the_exact_path_without_redirect(
    telemetry: Telemetry,
) -> None:
    telemetry.sink(metric("error.count", 1, outcome="rejected"))
    async with serve(ops_app(telemetry)) as url, httpx.AsyncClient() as client:
        scraped = await client.get(f"{url}/metrics", follow_redirects=False)
        head = await client.head(f"{url}/metrics")
        posted = await client.post(f"{url}/metrics")
        open_metrics = await client.get(
            f"{url}/metrics", headers={"accept": "application/openmetrics-text; version=1.0.0"}
        )
    assert scraped.status_code == 200
    assert 'agentskit_ask_errors_total{corpus_id="docs-public"' in scraped.text
    assert 'outcome="rejected"' in scraped.text
    assert head.status_code == 200
    assert head.content == b""
    assert posted.status_code == 405
    assert posted.headers["allow"] == "GET, HEAD"
    assert posted.json()["error"]["message"] == "Only GET and HEAD are supported."
    assert open_metrics.headers["content-type"].startswith("application/openmetrics-text")
    assert open_metrics.text.rstrip().endswith("# EOF")


# --- healthz -------------------------------------------------------------------------------------


async def passing() -> bool:
    return True


async def refusing() -> bool:
    return False


async def raising() -> None:
    raise RuntimeError("postgresql://admin:hunter2@db/app is down")


async def hanging() -> None:
    await anyio.sleep_forever()


def quick() -> str:
    return "fine"


@pytest.mark.parametrize(
    ("checks", "status", "payload"),
    [
        ({}, 200, {"status": "ok"}),
        ({"postgres": passing, "index": quick}, 200, {"status": "ok"}),
        (
            {"postgres": raising, "redis": passing, "index": refusing},
            503,
            {"status": "unavailable", "failing": ["postgres", "index"]},
        ),
        (
            {"redis": hanging, "index": passing},
            503,
            {"status": "unavailable", "failing": ["redis"]},
        ),
    ],
    ids=["no-checks", "all-pass", "raise-and-false", "timeout"],
)
async def test_healthz(
    telemetry: Telemetry, checks: dict[str, Any], status: int, payload: dict[str, Any]
) -> None:
    healthz = create_healthz_app(checks, timeout_seconds=0.2)
    async with serve(ops_app(telemetry, healthz)) as url, httpx.AsyncClient() as client:
        response = await client.get(f"{url}/healthz", follow_redirects=False)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "no-store"
    assert response.json() == payload
    assert "hunter2" not in response.text


async def test_healthz_runs_checks_concurrently() -> None:
    both_running = anyio.Event()
    running = 0

    async def rendezvous() -> bool:
        nonlocal running
        running += 1
        if running == 2:
            both_running.set()
        # Passes only if the other check started while this one waits.
        with anyio.move_on_after(5):
            await both_running.wait()
        return both_running.is_set()

    app = create_healthz_app({"a": rendezvous, "b": rendezvous}, timeout_seconds=10)
    assert await app.failing() == ()


@pytest.mark.parametrize(
    ("checks", "timeout"),
    [
        ({"bad name": passing}, 1.0),
        ({"": passing}, 1.0),
        ({"redis": "not callable"}, 1.0),
        ({}, 0),
        ({}, float("nan")),
        ({}, True),
    ],
)
def test_healthz_rejects_bad_options(checks: dict[str, Any], timeout: float) -> None:
    with pytest.raises(ConfigurationError):
        create_healthz_app(checks, timeout_seconds=timeout)
