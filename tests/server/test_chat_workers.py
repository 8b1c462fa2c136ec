"""Many workers, one store: ``agentskit-chat serve --workers 2`` on PostgreSQL and on Redis.

Sixteen clients submit turns to four shared sessions for :data:`RACE_SECONDS` seconds through
two uvicorn worker processes, with no sticky sessions. Afterwards the stored records prove that
no two turns of a session overlapped and no message was lost, and no client ever saw a
session's sequence go back.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import anyio
import httpx
import pytest

from agentskit_chat.storage import open_chat_stores
from tests.assistant._support import write_docs
from tests.server._chat_support import JSON, submit

pytestmark = pytest.mark.anyio

#: How long the clients race (the acceptance run is 30 s; set AGENTSKIT_RACE_SECONDS).
RACE_SECONDS: Final = float(os.environ.get("AGENTSKIT_RACE_SECONDS", "30"))
CLIENTS: Final = 16
SESSIONS: Final = 4
QUESTIONS: Final = ("How do I set the cache size?", "Setup guide", "Which license is it under?")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.contextmanager
def serving(docs: Path, store: str, *, workers: int = 2) -> Iterator[str]:
    """``agentskit-chat serve`` in a subprocess; yields its URL once a worker is ready."""
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTSKIT_API_KEY", "AGENTSKIT_MODEL")}
    command = [sys.executable, "-c", "from agentskit_chat.cli import main; main()"]
    # Many clients race from one address: the per-client rate limit is not what is tested.
    command += ["serve", "--rate-limit", "0"]
    process = subprocess.Popen(
        [*command, str(docs), "--port", "0", "--workers", str(workers), "--store", store],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 120
        line = ""
        while time.monotonic() < deadline and not line.startswith("Serving"):
            ready, _, _ = select.select([process.stdout], [], [], 0.2)
            if ready:
                line = process.stdout.readline()
            elif process.poll() is not None:
                break
        assert line.startswith("Serving"), process.stderr.read() if process.stderr else ""
        yield line.split(" at ", 1)[1].split()[0]
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class Race:
    """What the clients saw: completed turns per session, and any sequence that went back."""

    def __init__(self) -> None:
        self.completed: dict[str, list[str]] = {}
        self.busy = 0
        self.rollbacks = 0
        self.failures: list[str] = []


async def client(url: str, number: int, session_id: str, race: Race, until: float) -> None:
    seen = -1
    turn = 0
    async with httpx.AsyncClient(timeout=30) as http:
        while time.monotonic() < until:
            turn += 1
            turn_id = f"c{number}-t{turn}"
            text = f"{QUESTIONS[turn % len(QUESTIONS)]} [{turn_id}]"
            body = submit(session_id=session_id, turn_id=turn_id, event_id=turn_id, text=text)
            response = await http.post(f"{url}/api/chat", content=body, headers=JSON)
            if response.status_code == 409:
                race.busy += 1
                await anyio.sleep(0.005 * (number % 4))
                continue
            if response.status_code != 200:
                race.failures.append(f"{response.status_code} {response.text[:200]}")
                continue
            events = [json.loads(line) for line in response.text.splitlines() if line]
            for event in events:
                if event["sequence"] <= seen and event["event"] == "server.turn.snapshot":
                    race.rollbacks += 1
                seen = max(seen, event["sequence"])
            last = events[-1]
            if last["event"] != "server.turn.snapshot" or last["payload"]["status"] != "complete":
                race.failures.append(json.dumps(last["payload"])[:300])
                continue
            race.completed.setdefault(session_id, []).append(text)


async def check_records(store: str, race: Race, sessions: list[str]) -> None:
    stores = open_chat_stores(store)
    await stores.open()
    try:
        for session_id in sessions:
            texts = race.completed.get(session_id, [])
            assert texts, f"no turn of {session_id} completed"
            memory = stores.memory(session_id)
            messages = list(await memory.load())
            await getattr(memory, "aclose", _nothing)()
            # Turns never overlapped: the stored conversation is question, answer, question,
            # answer..., each answer right after its own question.
            assert [m.role for m in messages] == ["user", "assistant"] * (len(messages) // 2)
            questions = [m.content for m in messages if m.role == "user"]
            # No message was lost: every turn a client saw complete is stored, once. A long
            # conversation keeps only its newest turns (compaction), so past 100 turns the
            # newest completed ones must all be there (two of slack: clients learn of
            # completions a moment apart).
            assert len(set(questions)) == len(questions)
            assert set(questions) <= set(texts)
            if len(texts) <= 100:
                assert sorted(questions) == sorted(texts)
            else:
                assert set(texts[-(len(questions) - 2) :]) <= set(questions)
            for question, answer in zip(messages[::2], messages[1::2], strict=True):
                assert answer.content, question.content
            raw = await stores.sessions.load(session_id)
            assert raw is not None
            snapshot = json.loads(raw) if isinstance(raw, str) else dict(raw)
            assert "activeTurn" not in snapshot
            finished = snapshot["terminalTurns"]
            assert finished
            assert {turn["outcome"] for turn in finished} == {"completed"}
            assert len(finished) == min(64, len(texts))
    finally:
        await stores.aclose()


async def _nothing() -> None:
    return None


@pytest.mark.parametrize("backend", ["postgresql", "redis"])
async def test_two_workers_serialize_turns_per_session_and_lose_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = request.getfixturevalue("postgres_url" if backend == "postgresql" else "redis_url")
    docs = write_docs(tmp_path / "docs")
    run = uuid.uuid4().hex[:8]
    sessions = [f"race-{run}-{n}" for n in range(SESSIONS)]
    race = Race()
    with serving(docs, store) as url:
        until = time.monotonic() + RACE_SECONDS
        async with anyio.create_task_group() as group:
            for number in range(CLIENTS):
                group.start_soon(client, url, number, sessions[number % SESSIONS], race, until)
    assert race.failures == []
    assert race.rollbacks == 0
    assert race.busy > 0  # the clients really did collide
    await check_records(store, race, sessions)
