"""The Redis token bucket against a real Redis (``redis_url``; never mocked).

Time is injected through the limiter's ``clock`` (passed to the Lua script) wherever a test
needs tokens to come back; one test uses the server's own ``TIME`` with a sub-second sleep.
Every test uses its own key prefix and deletes its keys.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.asyncio import ConnectionPool, Redis

from agentskit_chat.errors import ConfigurationError, RateLimitError
from agentskit_chat.ops import RedisRateLimiter
from agentskit_chat.protocol import BackendSiteConfig
from agentskit_chat.service import InMemoryRateLimiter, RateLimitDecision, RateLimiter
from tests.service._support import FEDERATED_SITE, LOCAL_SITE

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Redis]:
    redis = Redis.from_url(redis_url)
    try:
        yield redis
    finally:
        await redis.aclose()


@pytest.fixture
async def prefix(client: Redis) -> AsyncIterator[str]:
    value = f"test:ratelimit:{secrets.token_hex(6)}:"
    try:
        yield value
    finally:
        keys = [key async for key in client.scan_iter(match=f"{value}*")]
        if keys:
            await client.delete(*keys)


def limiter(
    client: Redis, prefix: str, *, capacity: int = 3, rate: float = 0.5, **options: Any
) -> RedisRateLimiter:
    return RedisRateLimiter(
        client, capacity=capacity, refill_per_second=rate, prefix=prefix, **options
    )


async def test_a_burst_of_capacity_then_refusal_with_retry_after(
    client: Redis, prefix: str
) -> None:
    bucket = limiter(client, prefix, capacity=3, rate=0.5, clock=Clock())
    decisions = [await bucket.take("docs", "user-1") for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[-1] == RateLimitDecision(allowed=False, retry_after_seconds=2)


@pytest.mark.parametrize(
    ("elapsed", "allowed", "retry_after"),
    [(0.0, False, 2), (1.0, False, 1), (1.9, False, 1), (2.0, True, None), (60.0, True, None)],
)
async def test_tokens_come_back_with_time(
    client: Redis, prefix: str, elapsed: float, allowed: bool, retry_after: int | None
) -> None:
    clock = Clock()
    bucket = limiter(client, prefix, capacity=1, rate=0.5, clock=clock)
    assert (await bucket.take("docs", "user-1")).allowed
    clock.now += elapsed
    assert await bucket.take("docs", "user-1") == RateLimitDecision(allowed, retry_after)


async def test_refill_never_exceeds_capacity(client: Redis, prefix: str) -> None:
    clock = Clock()
    bucket = limiter(client, prefix, capacity=2, rate=1.0, clock=clock)
    assert (await bucket.take("docs", "user-1")).allowed
    clock.now += 3600
    decisions = [(await bucket.take("docs", "user-1")).allowed for _ in range(3)]
    assert decisions == [True, True, False]


async def test_a_clock_going_backwards_mints_no_tokens(client: Redis, prefix: str) -> None:
    clock = Clock()
    bucket = limiter(client, prefix, capacity=1, rate=1.0, clock=clock)
    assert (await bucket.take("docs", "user-1")).allowed
    clock.now -= 3600
    assert not (await bucket.take("docs", "user-1")).allowed
    clock.now += 3600 + 0.5
    # Half a token since the latest time seen: still refused.
    assert not (await bucket.take("docs", "user-1")).allowed


async def test_the_server_clock_refills_the_bucket(client: Redis, prefix: str) -> None:
    bucket = limiter(client, prefix, capacity=1, rate=2.0)
    for _ in range(10):
        if not (await bucket.take("docs", "user-1")).allowed:
            break
    else:
        pytest.fail("the bucket never ran dry")
    await anyio.sleep(0.6)  # 1.2 tokens at 2 per second
    assert (await bucket.take("docs", "user-1")).allowed


@pytest.mark.parametrize("workers", [1, 5])
async def test_concurrent_checks_never_over_admit(
    redis_url: str, prefix: str, workers: int
) -> None:
    # Each worker has its own client, as separate processes would.
    limiters = [
        RedisRateLimiter(redis_url, capacity=10, refill_per_second=0.001, prefix=prefix)
        for _ in range(workers)
    ]
    site = BackendSiteConfig.model_validate(LOCAL_SITE)
    results: list[bool] = []

    async def ask(index: int) -> None:
        decision = await limiters[index % workers].check(
            context={"subject": "user-1"}, site=site, subject_id="user-1"
        )
        results.append(decision.allowed)

    try:
        async with anyio.create_task_group() as group:
            for index in range(50):
                group.start_soon(ask, index)
    finally:
        for each in limiters:
            await each.aclose()
    assert len(results) == 50
    assert results.count(True) == 10


async def test_a_burst_beyond_the_pool_waits_for_a_connection(redis_url: str, prefix: str) -> None:
    results: list[bool] = []
    async with RedisRateLimiter(
        redis_url, capacity=10, refill_per_second=0.001, prefix=prefix, max_connections=3
    ) as bucket:

        async def ask() -> None:
            results.append((await bucket.take("docs", "user-1")).allowed)

        async with anyio.create_task_group() as group:
            for _ in range(200):
                group.start_soon(ask)
    assert len(results) == 200
    assert results.count(True) == 10


async def test_an_exhausted_borrowed_pool_never_fails_open(redis_url: str, prefix: str) -> None:
    tiny = Redis(connection_pool=ConnectionPool.from_url(redis_url, max_connections=1))
    bucket = RedisRateLimiter(tiny, capacity=1, prefix=prefix, fail_open=True)
    allowed: list[bool] = []
    errors: list[str] = []

    async def ask() -> None:
        try:
            allowed.append((await bucket.take("docs", "user-1")).allowed)
        except RateLimitError as error:
            errors.append(error.message)

    try:
        async with anyio.create_task_group() as group:
            for _ in range(20):
                group.start_soon(ask)
    finally:
        await tiny.aclose()
    assert errors
    assert set(errors) == {"The Redis rate limiter failed."}
    assert allowed.count(True) <= 1


async def test_sites_and_subjects_have_separate_buckets(client: Redis, prefix: str) -> None:
    bucket: RateLimiter = limiter(client, prefix, capacity=1, clock=Clock())
    local = BackendSiteConfig.model_validate(LOCAL_SITE)
    federated = BackendSiteConfig.model_validate(FEDERATED_SITE)
    calls = [(local, "user-1"), (local, "user-2"), (federated, "user-1"), (local, "user-1")]
    decisions = [
        (await bucket.check(context=None, site=site, subject_id=subject)).allowed
        for site, subject in calls
    ]
    assert decisions == [True, True, True, False]


async def test_keys_hold_no_subject_id_and_expire(client: Redis, prefix: str) -> None:
    subject = "person@example.com"
    bucket = limiter(client, prefix, capacity=4, rate=0.5)
    await bucket.take("docs", subject)
    keys = [key.decode() async for key in client.scan_iter(match=f"{prefix}*")]
    assert keys == [bucket.key("docs", subject)]
    assert keys[0].startswith(f"{prefix}docs:")
    assert subject not in keys[0]
    assert "person" not in keys[0]
    # Gone once it would be full again: 4 tokens at 0.5 per second, plus a second of slack.
    assert 0 < await client.pttl(keys[0]) <= 9000


@settings(max_examples=60)
@given(
    capacity=st.integers(1, 5),
    rate=st.sampled_from([0.25, 0.5, 1.0, 3.0]),
    steps=st.lists(st.floats(-2, 5, allow_nan=False).map(lambda x: round(x, 3)), max_size=12),
)
async def test_agrees_with_the_in_memory_bucket(
    redis_url: str, capacity: int, rate: float, steps: list[float]
) -> None:
    clock = Clock()
    prefix = f"test:ratelimit:{secrets.token_hex(6)}:"
    memory = InMemoryRateLimiter(capacity=capacity, refill_per_second=rate, clock=clock)
    async with RedisRateLimiter(
        redis_url, capacity=capacity, refill_per_second=rate, prefix=prefix, clock=clock
    ) as shared:
        try:
            for step in [0.0, *steps]:
                clock.now += step
                assert await shared.take("docs", "user-1") == memory.take("docs", "user-1")
        finally:
            await shared._client.delete(shared.key("docs", "user-1"))


async def test_an_unreachable_redis_raises_a_fixed_error() -> None:
    url = "redis://:hunter2@127.0.0.1:1/0"
    async with RedisRateLimiter(url, connect_timeout=2) as bucket:
        with pytest.raises(RateLimitError) as caught:
            await bucket.take("docs", "user-1")
    assert caught.value.message == "The Redis rate limiter is unavailable."
    assert "hunter2" not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


async def test_fail_open_allows_when_redis_is_unreachable() -> None:
    async with RedisRateLimiter("redis://127.0.0.1:1/0", fail_open=True) as bucket:
        assert await bucket.take("docs", "user-1") == RateLimitDecision(allowed=True)


async def test_a_key_of_another_type_is_a_failure_not_an_allowance(
    client: Redis, prefix: str
) -> None:
    bucket = limiter(client, prefix)
    await client.set(bucket.key("docs", "user-1"), "not a hash")
    with pytest.raises(RateLimitError, match="failed"):
        await bucket.take("docs", "user-1")


async def test_a_borrowed_client_stays_open_and_an_owned_one_closes(
    client: Redis, redis_url: str, prefix: str
) -> None:
    async with limiter(client, prefix):
        pass
    assert await client.ping()
    name = f"limiter-{secrets.token_hex(4)}"
    separator = "&" if "?" in redis_url else "?"
    owned = RedisRateLimiter(f"{redis_url}{separator}client_name={name}", prefix=prefix)
    assert (await owned.take("docs", "user-1")).allowed
    assert name in await connected_names(client)
    await owned.aclose()
    with anyio.fail_after(5):
        while name in await connected_names(client):
            await anyio.sleep(0.01)


async def connected_names(client: Redis) -> set[str]:
    return {entry.get("name", "") for entry in await client.client_list()}


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"capacity": 0}, ConfigurationError),
        ({"capacity": 1.5}, ConfigurationError),
        ({"capacity": True}, ConfigurationError),
        ({"refill_per_second": 0}, ConfigurationError),
        ({"refill_per_second": -1.0}, ConfigurationError),
        ({"refill_per_second": float("inf")}, ConfigurationError),
        ({"refill_per_second": True}, ConfigurationError),
        ({"prefix": 7}, ConfigurationError),
        ({"max_connections": 0}, ConfigurationError),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        RedisRateLimiter("redis://127.0.0.1:6379/0", **options)


def test_neither_url_nor_client_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        RedisRateLimiter(6379)  # type: ignore[arg-type]


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    with pytest.raises(ImportError, match=r"agentskit-chat\[redis\]"):
        RedisRateLimiter("redis://127.0.0.1:6379/0")
