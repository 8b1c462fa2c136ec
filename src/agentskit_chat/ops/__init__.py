"""Operating the Ask backend: OpenTelemetry metrics and shared rate limiting.

- :class:`OpenTelemetryMetricSink` records every backend metric into OpenTelemetry instruments
  (pass it as the Ask service's ``on_metric``).
- :class:`RedisRateLimiter` is a token bucket per subject shared by every worker through Redis.

The HTTP endpoints that expose them (``/metrics``, ``/healthz``) live in
:mod:`agentskit_chat.server`. Each part needs its extra (``server`` for OpenTelemetry, ``redis``
for the limiter) only when it is built; importing this package needs none.
"""

from __future__ import annotations

from ._otel import DURATION_BUCKETS_MS, OTEL_INSTRUMENTS, OpenTelemetryMetricSink, OtelInstrument
from ._redis_rate_limit import DEFAULT_RATE_LIMIT_PREFIX, RedisRateLimiter

__all__ = [
    "DEFAULT_RATE_LIMIT_PREFIX",
    "DURATION_BUCKETS_MS",
    "OTEL_INSTRUMENTS",
    "OpenTelemetryMetricSink",
    "OtelInstrument",
    "RedisRateLimiter",
]
