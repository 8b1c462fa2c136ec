"""Test-suite wiring: a per-family count of the reference vectors that passed."""

from __future__ import annotations

import atexit
import gc
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from tests._vectors import VECTORS

# Machines differ (CI shares two cores with nothing, a laptop with everything): no per-example
# deadline, so a property fails only on behaviour, never on timing.
settings.register_profile("agentskit", deadline=None, print_blob=True)
settings.load_profile("agentskit")

# The docs assistant keeps its search index in a cache folder: the tests (and the servers and
# commands they start) use one of their own, never the user's, removed when the run ends.
os.environ["AGENTSKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="agentskit-test-cache-")
atexit.register(shutil.rmtree, os.environ["AGENTSKIT_CACHE_DIR"], ignore_errors=True)

_IDS: dict[str, str] = {}
for _path in sorted(VECTORS.glob("*.json")):
    for _case in json.loads(_path.read_text("utf-8"))["cases"]:
        _IDS[_case["id"]] = _path.stem
_TOTALS = Counter(_IDS.values())
_passed: Counter[str] = Counter()
_seen: set[tuple[str, str]] = set()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call" or not report.passed:
        return
    match = re.search(r"\[([^\]]+)\]$", report.nodeid)
    if match is None or match.group(1) not in _IDS:
        return
    case_id = match.group(1)
    family = _IDS[case_id]
    if (family, case_id) not in _seen:
        _seen.add((family, case_id))
        _passed[family] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _passed:
        return
    terminalreporter.section("reference vectors")
    for family in sorted(_TOTALS):
        terminalreporter.write_line(f"{family}: {_passed[family]}/{_TOTALS[family]} cases passed")
    total = sum(_passed.values())
    terminalreporter.write_line(f"all families: {total}/{sum(_TOTALS.values())} cases passed")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # CI sets this so that a vector test that silently stopped running fails the build.
    if os.environ.get("AGENTSKIT_REQUIRE_ALL_VECTORS") and sum(_passed.values()) < len(_IDS):
        missing = {f: _TOTALS[f] - _passed[f] for f in _TOTALS if _passed[f] < _TOTALS[f]}
        print(f"\nreference vectors not all passed: {missing}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _service_url(variable: str, what: str) -> str:
    url = os.environ.get(variable)
    if url:
        return url
    if os.environ.get("AGENTSKIT_REQUIRE_SERVICES") or os.environ.get("CI"):
        pytest.fail(f"{what} is required here but {variable} is not set")
    pytest.skip(f"{what} not available: run scripts/test-services.sh and export {variable}")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of a real PostgreSQL server (``scripts/test-services.sh``); never mocked."""
    return _service_url("AGENTSKIT_TEST_POSTGRES_URL", "PostgreSQL")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of a real Redis server (``scripts/test-services.sh``); never mocked."""
    return _service_url("AGENTSKIT_TEST_REDIS_URL", "Redis")


@pytest.fixture
def collector() -> Iterator[None]:
    """The cyclic garbage collector left on or off as the test found it, whatever it did."""
    enabled = gc.isenabled()
    yield
    if enabled:
        gc.enable()
    else:
        gc.disable()
