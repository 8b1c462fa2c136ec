"""Fixtures shared by the server tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a served chat keeps its conversations: a SQLite file of the test's own, the real
    PostgreSQL and the real Redis (their URLs from ``tests/conftest.py``: they skip locally
    without the services, and fail in CI). A module may define its own ``store_url``."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chat.db'}"
    fixture = "postgres_url" if request.param == "postgres" else "redis_url"
    url: str = request.getfixturevalue(fixture)
    return url
