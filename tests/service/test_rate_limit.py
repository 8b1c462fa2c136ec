"""The in-memory token bucket, with an injected clock (no sleeping, no wall time)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentskit_chat.errors import ConfigurationError
from agentskit_chat.protocol import BackendSiteConfig
from agentskit_chat.service import InMemoryRateLimiter, RateLimitDecision
from tests.service._support import CONTEXT, LOCAL_SITE, body, make_service, site

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def limiter(
    capacity: int = 3, rate: float = 0.5, **options: Any
) -> tuple[InMemoryRateLimiter, Clock]:
    clock = Clock()
    return InMemoryRateLimiter(
        capacity=capacity, refill_per_second=rate, clock=clock, **options
    ), clock


def test_a_burst_of_capacity_then_refusal_with_retry_after() -> None:
    bucket, _ = limiter(capacity=3, rate=0.5)
    decisions = [bucket.take("docs", "user-1") for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[-1] == RateLimitDecision(allowed=False, retry_after_seconds=2)


@pytest.mark.parametrize(
    ("elapsed", "allowed", "retry_after"),
    [(0.0, False, 2), (1.0, False, 1), (1.9, False, 1), (2.0, True, None), (60.0, True, None)],
)
def test_tokens_come_back_with_time(elapsed: float, allowed: bool, retry_after: int | None) -> None:
    bucket, clock = limiter(capacity=1, rate=0.5)
    assert bucket.take("docs", "user-1").allowed
    clock.now += elapsed
    assert bucket.take("docs", "user-1") == RateLimitDecision(allowed, retry_after)


def test_refill_never_exceeds_capacity() -> None:
    bucket, clock = limiter(capacity=2, rate=10)
    clock.now += 3600
    assert [bucket.take("docs", "u").allowed for _ in range(3)] == [True, True, False]


def test_buckets_are_per_site_and_subject() -> None:
    bucket, _ = limiter(capacity=1)
    assert bucket.take("docs", "user-1").allowed
    assert not bucket.take("docs", "user-1").allowed
    assert bucket.take("docs", "user-2").allowed
    assert bucket.take("registry", "user-1").allowed


def test_a_clock_going_backwards_mints_nothing() -> None:
    bucket, clock = limiter(capacity=1, rate=1)
    assert bucket.take("docs", "u").allowed
    clock.now -= 50
    assert not bucket.take("docs", "u").allowed
    clock.now += 50.5
    assert not bucket.take("docs", "u").allowed
    clock.now += 1
    assert bucket.take("docs", "u").allowed


def test_memory_is_bounded_by_forgetting_the_least_recent_subject() -> None:
    bucket, _ = limiter(capacity=1, max_buckets=2)
    assert bucket.take("docs", "a").allowed
    assert bucket.take("docs", "b").allowed
    assert not bucket.take("docs", "a").allowed  # "a" is now the most recent
    assert bucket.take("docs", "c").allowed  # evicts "b"
    assert bucket.take("docs", "b").allowed  # forgotten: a full bucket again
    assert not bucket.take("docs", "c").allowed


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.integers(1, 5),
    rate=st.floats(0.1, 5),
    steps=st.lists(st.tuples(st.floats(0, 3), st.sampled_from(["a", "b"])), max_size=60),
)
def test_never_more_than_capacity_plus_refill(
    capacity: int, rate: float, steps: list[tuple[float, str]]
) -> None:
    bucket, clock = limiter(capacity=capacity, rate=rate)
    start = clock.now
    allowed = {"a": 0, "b": 0}
    for advance, subject in steps:
        clock.now += advance
        decision = bucket.take("docs", subject)
        if decision.allowed:
            allowed[subject] += 1
            assert decision.retry_after_seconds is None
        else:
            assert decision.retry_after_seconds is not None
            assert 1 <= decision.retry_after_seconds <= 1 / rate + 1
        for count in allowed.values():
            assert count <= capacity + (clock.now - start) * rate + 1e-9


@settings(max_examples=100, deadline=None)
@given(capacity=st.integers(1, 5), rate=st.floats(0.05, 5))
def test_waiting_retry_after_seconds_is_enough(capacity: int, rate: float) -> None:
    bucket, clock = limiter(capacity=capacity, rate=rate)
    while (decision := bucket.take("docs", "u")).allowed:
        pass
    assert decision.retry_after_seconds is not None
    clock.now += decision.retry_after_seconds
    assert bucket.take("docs", "u").allowed


@pytest.mark.parametrize(
    "options",
    [
        {"capacity": 0},
        {"capacity": 1.5},
        {"capacity": True},
        {"refill_per_second": 0},
        {"refill_per_second": float("inf")},
        {"refill_per_second": float("nan")},
        {"max_buckets": 0},
    ],
)
def test_invalid_options_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        InMemoryRateLimiter(**options)


async def test_the_port_limits_the_service_per_subject() -> None:
    bucket, _ = limiter(capacity=2, rate=0.25)
    service = make_service(rate_limiter=bucket, site=site(persistence="disabled"))
    statuses = []
    for _ in range(3):
        response = await service.stream(CONTEXT, body())
        statuses.append(response.status)
        await response.aclose()
    assert statuses == [200, 200, 429]
    assert response.header("retry-after") == "4"
    decision = await bucket.check(
        context=CONTEXT,
        site=BackendSiteConfig.model_validate({**LOCAL_SITE, "siteId": "other"}),
        subject_id="user-1",
    )
    assert decision.allowed
