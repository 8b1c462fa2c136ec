"""An in-memory token-bucket rate limiter for one Ask worker.

Each (site, subject) pair owns a bucket of ``capacity`` tokens that refills continuously at
``refill_per_second``. A request takes one token; with none left it is refused, with the whole
seconds until a token is back. The state lives in this process: behind several workers, use a
shared limiter (Redis) instead, or each worker grants its own allowance.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import BackendSiteConfig

from ._ports import RateLimitDecision

__all__ = ["InMemoryRateLimiter"]

_TOLERANCE: Final = 1e-9


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class InMemoryRateLimiter:
    """Token bucket per (site, subject), in this process's memory.

    Args:
        capacity: Burst size: how many requests a rested subject may make at once.
        refill_per_second: Sustained rate: tokens added back per second.
        clock: Monotonic seconds; injectable for tests. Defaults to ``time.monotonic``.
        max_buckets: How many subjects are tracked at once. When full, the least recently seen
            subject is forgotten, which grants it a full bucket on its next request: memory
            stays bounded, at the cost of leniency for subjects idle the longest.

    Raises:
        ConfigurationError: when an option is not a positive, finite number (``capacity`` and
            ``max_buckets`` must be integers).

    >>> limiter = InMemoryRateLimiter(capacity=2, refill_per_second=0.5)
    """

    def __init__(
        self,
        *,
        capacity: int = 20,
        refill_per_second: float = 1.0,
        clock: Callable[[], float] | None = None,
        max_buckets: int = 10_000,
    ) -> None:
        if type(capacity) is not int or capacity < 1:
            raise ConfigurationError("The rate limiter capacity must be a positive integer.")
        if (
            type(refill_per_second) not in (int, float)
            or not math.isfinite(refill_per_second)
            or refill_per_second <= 0
        ):
            raise ConfigurationError("The rate limiter refill rate must be a positive number.")
        if type(max_buckets) is not int or max_buckets < 1:
            raise ConfigurationError("The rate limiter bucket limit must be a positive integer.")
        self._capacity = capacity
        self._rate = float(refill_per_second)
        self._clock = clock or time.monotonic
        self._max_buckets = max_buckets
        self._buckets: OrderedDict[tuple[str, str], _Bucket] = OrderedDict()

    def take(self, site_id: str, subject_id: str) -> RateLimitDecision:
        """Take one token from the bucket of (``site_id``, ``subject_id``), synchronously."""
        now = self._clock()
        key = (site_id, subject_id)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(float(self._capacity), now)
            self._buckets[key] = bucket
            while len(self._buckets) > self._max_buckets:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            # A clock that goes backwards never mints tokens.
            elapsed = max(0.0, now - bucket.updated)
            bucket.tokens = min(float(self._capacity), bucket.tokens + elapsed * self._rate)
            bucket.updated = max(bucket.updated, now)
        # The tolerance absorbs float rounding, so waiting ``retry_after_seconds`` is enough.
        if bucket.tokens >= 1.0 - _TOLERANCE:
            bucket.tokens = max(0.0, bucket.tokens - 1.0)
            return RateLimitDecision(allowed=True)
        wait = (1.0 - bucket.tokens) / self._rate
        return RateLimitDecision(allowed=False, retry_after_seconds=max(1, math.ceil(wait)))

    async def check(
        self, *, context: Any, site: BackendSiteConfig, subject_id: str
    ) -> RateLimitDecision:
        """The :class:`~agentskit_chat.service.RateLimiter` port: one request for ``subject_id``."""
        return self.take(site.site_id, subject_id)
