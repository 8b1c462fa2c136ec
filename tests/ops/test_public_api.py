"""The names ``agentskit_chat.ops`` exports, and that importing it needs no extra."""

from __future__ import annotations

import subprocess
import sys

from agentskit_chat import ops

NAMES = [
    "DEFAULT_RATE_LIMIT_PREFIX",
    "DURATION_BUCKETS_MS",
    "OTEL_INSTRUMENTS",
    "OpenTelemetryMetricSink",
    "OtelInstrument",
    "RedisRateLimiter",
]


def test_exported_names_are_pinned() -> None:
    assert ops.__all__ == NAMES
    for name in NAMES:
        assert getattr(ops, name) is not None


def test_importing_the_package_loads_no_driver() -> None:
    probe = (
        "import sys, agentskit_chat.ops, agentskit_chat.agents._writer; "
        "print(sorted(m for m in ('redis', 'opentelemetry', 'prometheus_client', 'pydantic_ai') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
