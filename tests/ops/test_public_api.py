"""Importing ``agentskit_chat.ops`` needs no extra (names: tests/test_public_api.py)."""

from __future__ import annotations

import subprocess
import sys


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
