"""Chat storage: memory saves over a long conversation, and session compare-and-set throughput.

Run with ``.venv/bin/python bench/storage.py``. One conversation of 300 turns (a 200-character
question and a 400-character answer each) is saved after every turn, as a chat does, through
:class:`~agentskit_chat.storage.SQLiteChatMemory` (a file), and through the PostgreSQL and Redis
memories when ``AGENTSKIT_TEST_POSTGRES_URL`` / ``AGENTSKIT_TEST_REDIS_URL`` name a server
(``eval "$(scripts/test-services.sh)"``). For each backend it prints:

- the mean save time of turns 1–10 and of turns 291–300, and their ratio (the goal is at most
  1.5: a save writes what changed, not the conversation);
- the floor: one raw single-row write on the same backend with its driver (SQLite
  ``INSERT OR REPLACE`` in a transaction, PostgreSQL ``INSERT ... ON CONFLICT``, Redis
  ``HSET``), measured in the same run, and a save at turns 291–300 as a multiple of it;
- the stored size per turn: the SQLite file (with its WAL), the PostgreSQL tables
  (``pg_total_relation_size``, indexes and TOAST included) and the Redis keys
  (``MEMORY USAGE``).

Then the session storages' compare-and-set: 500 sequential saves of a chat session snapshot,
each at the cursor the previous one wrote, on each backend, as saves per second beside the
same number of raw single-row writes with the backend's driver (the floor).

Five runs of each; the median of each figure.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from agentskit_chat.protocol import SessionSnapshot
from agentskit_chat.runtime import ChatMessage
from agentskit_chat.storage import (
    PostgresChatMemory,
    PostgresSessionStorage,
    RedisChatMemory,
    RedisSessionStorage,
    SQLiteChatMemory,
    SQLiteSessionStorage,
)

TURNS = 300
RUNS = 5
T0 = datetime(2026, 7, 13, tzinfo=UTC)


def turn(n: int) -> tuple[ChatMessage, ChatMessage]:
    created = T0 + timedelta(seconds=n)
    question = (f"question {n} " + "q" * 200)[:200]
    answer = (f"answer {n} " + "a" * 400)[:400]
    return (
        ChatMessage(id=f"q{n}", role="user", content=question, created_at=created),
        ChatMessage(id=f"a{n}", role="assistant", content=answer, created_at=created),
    )


async def conversation(memory: Any) -> list[float]:
    """Save after every turn; the seconds each save took."""
    messages: list[ChatMessage] = []
    times = []
    for n in range(TURNS):
        messages += turn(n)
        started = time.perf_counter()
        await memory.save(messages)
        times.append(time.perf_counter() - started)
    return times


async def floor_writes(write: Callable[[int], Awaitable[None]], count: int = 50) -> float:
    """The median seconds of one raw single-row write."""
    times = []
    for n in range(count):
        started = time.perf_counter()
        await write(n)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def sqlite_backend(folder: Path) -> tuple[list[float], float, float]:
    path = folder / f"chat-{uuid.uuid4().hex}.db"
    async with SQLiteChatMemory(path, "bench") as memory:
        times = await conversation(memory)
    size = path.stat().st_size + sum(
        p.stat().st_size for p in folder.glob(path.name + "-*") if p.is_file()
    )
    raw = sqlite3.connect(
        folder / f"floor-{uuid.uuid4().hex}.db", isolation_level=None, check_same_thread=False
    )
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=NORMAL")
    raw.execute("CREATE TABLE rows (k INTEGER PRIMARY KEY, v TEXT)")
    row = "x" * 600

    async def write(n: int) -> None:
        def run() -> None:
            raw.execute("BEGIN IMMEDIATE")
            raw.execute("INSERT OR REPLACE INTO rows VALUES (?, ?)", (n, row))
            raw.execute("COMMIT")

        await anyio.to_thread.run_sync(run)

    floor = await floor_writes(write)
    raw.close()
    return times, floor, size / TURNS


async def postgres_backend(url: str) -> tuple[list[float], float, float]:
    import psycopg  # noqa: PLC0415

    table = f"bench_messages_{uuid.uuid4().hex}"
    try:
        async with PostgresChatMemory(url, "bench", table=table) as memory:
            times = await conversation(memory)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
            cursor = await connection.execute(
                "SELECT pg_total_relation_size(%s) + pg_total_relation_size(%s)",
                (table, f"{table}_heads"),
            )
            found = await cursor.fetchone()
            size = float(found[0]) / TURNS if found else float("nan")
            await connection.execute(f"CREATE TABLE {table}_floor (k int PRIMARY KEY, v text)")
            row = "x" * 600

            async def write(n: int) -> None:
                await connection.execute(
                    f"INSERT INTO {table}_floor VALUES (%s, %s)"
                    " ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
                    (n, row),
                )

            floor = await floor_writes(write)
    finally:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
            await connection.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads, {table}_floor")
    return times, floor, size


async def redis_backend(url: str) -> tuple[list[float], float, float]:
    import redis.asyncio  # noqa: PLC0415

    prefix = f"agentskit-bench:{uuid.uuid4().hex}:"
    async with redis.asyncio.Redis.from_url(url) as client:
        try:
            async with RedisChatMemory(url, "bench", prefix=prefix) as memory:
                times = await conversation(memory)
            used = 0
            async for name in client.scan_iter(match=prefix + "*"):
                used += int(await client.memory_usage(name) or 0)
            size = used / TURNS
            row = "x" * 600

            async def write(n: int) -> None:
                await client.hset(prefix + "floor", str(n), row)

            floor = await floor_writes(write)
        finally:
            names = [name async for name in client.scan_iter(match=prefix + "*")]
            if names:
                await client.delete(*names)
    return times, floor, size


SAVES = 500


def snapshot(cursor: int) -> SessionSnapshot:
    return SessionSnapshot.model_validate(
        {
            "protocol": "agentskit.chat.session",
            "version": 1,
            "session_id": "bench",
            "definition_id": "support",
            "definition_revision": 1,
            "updated_at": "2026-07-11T00:00:00.000Z",
            "cursor": cursor,
            "conversation": {"state": "idle", "decisions": []},
            "confirmations": [],
        }
    )


async def cas_rate(storage: Any) -> float:
    """Compare-and-set saves per second, each at the cursor the previous one wrote."""
    snapshots = [snapshot(cursor) for cursor in range(1, SAVES + 1)]
    started = time.perf_counter()
    for cursor, value in enumerate(snapshots):
        assert await storage.save(value, cursor or None)
    return SAVES / (time.perf_counter() - started)


async def raw_rate(write: Callable[[int], Awaitable[None]]) -> float:
    started = time.perf_counter()
    for n in range(SAVES):
        await write(n)
    return SAVES / (time.perf_counter() - started)


async def sessions(name: str, folder: Path) -> tuple[float, float]:
    """(CAS saves per second, raw writes per second) on one backend, one run."""
    text = snapshot(1).to_json()
    if name == "SQLite":
        path = folder / f"sessions-{uuid.uuid4().hex}.db"
        async with SQLiteSessionStorage(path) as storage:
            ours = await cas_rate(storage)
        raw = sqlite3.connect(
            folder / f"raw-{uuid.uuid4().hex}.db", isolation_level=None, check_same_thread=False
        )
        raw.execute("PRAGMA journal_mode=WAL")
        raw.execute("PRAGMA synchronous=NORMAL")
        raw.execute("CREATE TABLE s (k TEXT PRIMARY KEY, c INTEGER, v TEXT)")

        async def write(n: int) -> None:
            def run() -> None:
                raw.execute("BEGIN IMMEDIATE")
                raw.execute("INSERT OR REPLACE INTO s VALUES ('bench', ?, ?)", (n, text))
                raw.execute("COMMIT")

            await anyio.to_thread.run_sync(run)

        floor = await raw_rate(write)
        raw.close()
        return ours, floor
    if name == "PostgreSQL":
        import psycopg  # noqa: PLC0415

        url = os.environ["AGENTSKIT_TEST_POSTGRES_URL"]
        table = f"bench_sessions_{uuid.uuid4().hex}"
        try:
            async with PostgresSessionStorage(url, table=table) as shared:
                ours = await cas_rate(shared)
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
                await connection.execute(f"CREATE TABLE {table}_raw (k text PRIMARY KEY, v text)")

                async def write_pg(n: int) -> None:
                    await connection.execute(
                        f"INSERT INTO {table}_raw VALUES ('bench', %s)"
                        " ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
                        (text,),
                    )

                floor = await raw_rate(write_pg)
        finally:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
                await connection.execute(f"DROP TABLE IF EXISTS {table}, {table}_raw")
        return ours, floor
    import redis.asyncio  # noqa: PLC0415

    url = os.environ["AGENTSKIT_TEST_REDIS_URL"]
    prefix = f"agentskit-bench:{uuid.uuid4().hex}:"
    async with redis.asyncio.Redis.from_url(url) as client:
        try:
            async with RedisSessionStorage(url, prefix=prefix) as hashes:
                ours = await cas_rate(hashes)

            async def write_redis(n: int) -> None:
                await client.hset(prefix + "raw", "snapshot", text)

            floor = await raw_rate(write_redis)
        finally:
            names = [name async for name in client.scan_iter(match=prefix + "*")]
            if names:
                await client.delete(*names)
    return ours, floor


def figures(runs: list[tuple[list[float], float, float]]) -> dict[str, float]:
    first = statistics.median(statistics.mean(times[:10]) for times, _, _ in runs)
    last = statistics.median(statistics.mean(times[-10:]) for times, _, _ in runs)
    floor = statistics.median(f for _, f, _ in runs)
    size = statistics.median(s for _, _, s in runs)
    return {"first": first, "last": last, "floor": floor, "size": size}


async def main() -> None:
    backends: list[tuple[str, Callable[[], Awaitable[tuple[list[float], float, float]]]]] = []
    folder = Path(tempfile.mkdtemp(prefix="agentskit-bench-"))
    backends.append(("SQLite", lambda: sqlite_backend(folder)))
    postgres = os.environ.get("AGENTSKIT_TEST_POSTGRES_URL")
    if postgres:
        backends.append(("PostgreSQL", lambda: postgres_backend(postgres)))
    redis_url = os.environ.get("AGENTSKIT_TEST_REDIS_URL")
    if redis_url:
        backends.append(("Redis", lambda: redis_backend(redis_url)))
    print(f"chat memory: one {TURNS}-turn conversation saved after every turn, {RUNS} runs")
    print(
        f"{'backend':<11} {'turns 1-10':>11} {'291-300':>9} {'ratio':>6} "
        f"{'floor':>8} {'291-300/floor':>14} {'bytes/turn':>11}"
    )
    for name, run in backends:
        runs = [await run() for _ in range(RUNS)]
        f = figures(runs)
        size = "-" if f["size"] != f["size"] else f"{f['size']:.0f}"
        print(
            f"{name:<11} {f['first'] * 1000:>9.2f}ms {f['last'] * 1000:>7.2f}ms "
            f"{f['last'] / f['first']:>5.2f}x {f['floor'] * 1000:>6.3f}ms "
            f"{f['last'] / f['floor']:>13.1f}x {size:>11}"
        )
    print()
    print(f"session storage: {SAVES} compare-and-set saves in a row, {RUNS} runs")
    print(f"{'backend':<11} {'CAS saves/s':>12} {'raw writes/s':>13} {'cost ratio':>11}")
    for name, _ in backends:
        runs_cas = [await sessions(name, folder) for _ in range(RUNS)]
        ours = statistics.median(r for r, _ in runs_cas)
        floor = statistics.median(f for _, f in runs_cas)
        print(f"{name:<11} {ours:>12.0f} {floor:>13.0f} {floor / ours:>10.2f}x")
    for name in ("PostgreSQL", "Redis"):
        if name not in {n for n, _ in backends}:
            variable = "POSTGRES" if name == "PostgreSQL" else "REDIS"
            print(f"{name:<11} not measured: set AGENTSKIT_TEST_{variable}_URL")


if __name__ == "__main__":
    anyio.run(main)
