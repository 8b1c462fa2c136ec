"""The command line's tests: what ``ask`` freezes in this process is unfrozen after each test.

``ask`` freezes the objects it made (:func:`gc.freeze`), which suits a process that ends when
the answer is printed; the test process goes on, so each test gives them back to the collector.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()
