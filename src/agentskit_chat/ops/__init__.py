"""Operating the Ask backend: metrics, health, shared rate limiting.

- :class:`OpenTelemetryMetricSink` records every backend metric into OpenTelemetry instruments
  (pass it as the Ask service's ``on_metric``).
- :func:`create_prometheus_metrics_app` serves a Prometheus registry at ``/metrics``.
- :func:`create_healthz_app` answers ``/healthz`` from the host's readiness checks.
- :class:`RedisRateLimiter` is a token bucket per subject shared by every worker through Redis.

Each needs its extra (``server`` for the first two, ``redis`` for the limiter) only when it is
built; importing this package needs none.
"""

from __future__ import annotations

from ._healthz import HealthCheck, HealthzApp, create_healthz_app
from ._otel import DURATION_BUCKETS_MS, OTEL_INSTRUMENTS, OpenTelemetryMetricSink, OtelInstrument
from ._prometheus import PrometheusMetricsApp, create_prometheus_metrics_app
from ._redis_rate_limit import DEFAULT_RATE_LIMIT_PREFIX, RedisRateLimiter

__all__ = [
    "DEFAULT_RATE_LIMIT_PREFIX",
    "DURATION_BUCKETS_MS",
    "OTEL_INSTRUMENTS",
    "HealthCheck",
    "HealthzApp",
    "OpenTelemetryMetricSink",
    "OtelInstrument",
    "PrometheusMetricsApp",
    "RedisRateLimiter",
    "create_healthz_app",
    "create_prometheus_metrics_app",
]
