"""Fixtures of the fault tests: a store of each backend that the test may stop and restart.

PostgreSQL and Redis are private instances (:mod:`tests.faults._instances`), never the shared
ones on 5432 and 6379. Without their binaries the tests skip locally and fail in CI, like every
other service-backed test.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.faults._instances import (
    SQLiteOutage,
    postgres_bin,
    private_postgres,
    private_redis,
)

__all__ = ["FaultyStore"]


@dataclass(frozen=True, slots=True)
class FaultyStore:
    """A store URL and how to take its store away and bring it back (both blocking).

    Attributes:
        backend: ``sqlite-folder``, ``sqlite-lock``, ``postgresql`` or ``redis``.
        url: The store URL for ``create_app``.
        stop: Makes the store unavailable.
        restart: Makes it available again, with everything it had.
    """

    backend: str
    url: str
    stop: Callable[[], None]
    restart: Callable[[], None]


def _missing(what: str) -> None:
    if os.environ.get("AGENTSKIT_REQUIRE_SERVICES") or os.environ.get("CI"):
        pytest.fail(f"{what} is required here but not installed (scripts/test-services.sh)")
    pytest.skip(f"{what} is not installed: run scripts/test-services.sh")


@pytest.fixture(params=["sqlite-folder", "sqlite-lock", "postgresql", "redis"])
def faulty_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FaultyStore]:
    """A store of each backend, private to the test, that it may stop and restart (SQLite
    twice: its folder gone, and its write lock held elsewhere)."""
    backend: str = request.param
    if backend.startswith("sqlite"):
        database = tmp_path / "store" / "chat.db"
        database.parent.mkdir()
        outage = SQLiteOutage(database, backend.partition("-")[2])
        try:
            yield FaultyStore(backend, f"sqlite:///{database}", outage.begin, outage.end)
        finally:
            outage.end()
    elif backend == "postgresql":
        if postgres_bin() is None:
            _missing("PostgreSQL")
        with private_postgres() as postgres:
            yield FaultyStore(backend, postgres.url, postgres.stop, postgres.start)
    else:
        if shutil.which("redis-server") is None:
            _missing("Redis")
        with private_redis() as redis:
            yield FaultyStore(backend, redis.url, redis.stop, redis.start)
