"""A model's gated calls approved over HTTP by two worker processes on one store, twice each.

Two uvicorn processes (``tests.server._approval_app``) serve the same help desk chat on one
SQLite file, one PostgreSQL database or one Redis server. First each session's turn makes the
``FunctionModel`` propose one confirmation-gated ``open_ticket`` call (half of them on each
worker). Then, for every call at once, two clients approve it at the same moment, one through
each worker, retrying while the session is busy with the other's turn (``409 SESSION_BUSY`` or
``SESSION_CONFLICT``, both retryable).

What must hold: the executor (a line appended to a shared file by whichever worker ran it) ran
exactly once per call; exactly one client got the ``200`` stream whose final snapshot shows the
call complete and the model's answer to its result; the other got ``409
CONFIRMATION_UNAVAILABLE`` (the call no longer waits), and reading the session from its own
worker shows the same outcome; the stored confirmation record is ``approved``.

``AGENTSKIT_MODEL_APPROVAL_CALLS`` sets how many calls race (30 by default).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import httpx
import pytest

from agentskit_chat.storage import open_chat_stores
from tests.server._approval_support import OPENING
from tests.server._chat_support import JSON, lines, submit

pytestmark = pytest.mark.anyio

CALLS: Final = int(os.environ.get("AGENTSKIT_MODEL_APPROVAL_CALLS", "30"))
WORKERS: Final = ("w1", "w2")
BACKENDS: Final = ("sqlite", "postgresql", "redis")
ROOT: Final = Path(__file__).resolve().parents[2]
#: How long a client keeps retrying a busy session before the test gives up on it.
PATIENCE_S: Final = 60.0
_LISTENING: Final = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'approvals.db'}"
    url: str = request.getfixturevalue("postgres_url" if backend == "postgresql" else "redis_url")
    return url


@contextlib.contextmanager
def workers(store: str, log: Path, work: Path) -> Iterator[dict[str, str]]:
    """Both worker processes, started together; yields their base URLs by worker name."""
    processes: dict[str, subprocess.Popen[bytes]] = {}
    errors = {name: work / f"{name}.stderr" for name in WORKERS}
    try:
        for name in WORKERS:
            env = {
                **os.environ,
                "AGENTSKIT_APPROVAL_STORE": store,
                "AGENTSKIT_APPROVAL_LOG": str(log),
                "AGENTSKIT_APPROVAL_WORKER": name,
            }
            command = [sys.executable, "-m", "uvicorn", "tests.server._approval_app:app"]
            options = ["--factory", "--host", "127.0.0.1", "--port", "0", "--no-access-log"]
            with errors[name].open("wb") as stderr:
                processes[name] = subprocess.Popen(
                    [*command, *options], cwd=ROOT, env=env, stderr=stderr, start_new_session=True
                )
        urls: dict[str, str] = {}
        deadline = time.monotonic() + 120
        while len(urls) < len(WORKERS):
            for name, process in processes.items():
                text = errors[name].read_text("utf-8", "replace")
                found = _LISTENING.search(text)
                if found is not None:
                    urls[name] = found.group(1)
                elif process.poll() is not None:
                    pytest.fail(f"{name} exited early: {text[-2000:]}")
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.05)
        yield urls
    finally:
        for process in processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGINT)
        for process in processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@dataclass
class Outcome:
    """What one client's approval came to, after its retries of a busy session."""

    worker: str
    status: int
    code: str | None  # the refusal's code, or the stream's diagnostic; None for a snapshot
    payload: dict[str, Any] | None  # the final snapshot's payload
    busy: int  # how many retryable refusals it met first


def call_of(payload: dict[str, Any], call_id: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        call
        for message in payload["messages"]
        for call in message.get("toolCalls", [])
        if call["id"] == call_id
    ]
    assert found, f"{call_id} is not in the snapshot"
    return found[-1]


async def propose(http: httpx.AsyncClient, url: str, session_id: str, ref: str) -> None:
    body = submit(session_id=session_id, turn_id="t1", event_id="t1", text=f"open {ref}")
    response = await http.post(f"{url}/api/chat", content=body, headers=JSON)
    assert response.status_code == 200, response.text
    last = lines(response.content)[-1]
    assert last["event"] == "server.turn.snapshot", last
    assert call_of(last["payload"], f"call-{ref}")["status"] == "requires_confirmation"
    assert last["payload"]["messages"][-1]["content"] == OPENING


async def approve(
    http: httpx.AsyncClient, url: str, worker: str, session_id: str, call_id: str
) -> Outcome:
    turn_id = f"approve-{worker}"
    busy = 0
    until = time.monotonic() + PATIENCE_S
    while True:
        body = submit(
            session_id=session_id,
            turn_id=turn_id,
            event_id=f"{turn_id}-{busy}",
            text="Approve",
            payload={"confirmation": {"toolCallId": call_id, "decision": "approve"}},
        )
        response = await http.post(f"{url}/api/chat", content=body, headers=JSON)
        if response.status_code != 200:
            code = response.json()["error"]["code"]
            if code in ("SESSION_BUSY", "SESSION_CONFLICT") and time.monotonic() < until:
                busy += 1
                await anyio.sleep(0.01)
                continue
            return Outcome(worker, response.status_code, code, None, busy)
        events = lines(response.content)
        assert events, "an empty stream"
        last = events[-1]
        if last["event"] != "server.turn.snapshot":
            return Outcome(worker, 200, last["payload"]["code"], None, busy)
        return Outcome(worker, 200, None, last["payload"], busy)


async def read(http: httpx.AsyncClient, url: str, session_id: str) -> dict[str, Any]:
    response = await http.get(f"{url}/api/chat", params={"sessionId": session_id})
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()["payload"]
    return payload


@pytest.mark.parametrize("backend", BACKENDS)
async def test_two_workers_approving_each_model_call_at_once_run_it_exactly_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert CALLS > 0
    store = store_url(backend, tmp_path, request)
    run = uuid.uuid4().hex[:8]
    sessions = [f"approve-{run}-{n}" for n in range(CALLS)]
    refs = [f"r{n}" for n in range(CALLS)]
    log = tmp_path / "executor.log"
    async with open_chat_stores(store) as stores:
        try:
            with workers(store, log, tmp_path) as urls:
                async with httpx.AsyncClient(timeout=60) as http:
                    began = time.monotonic()
                    limiter = anyio.CapacityLimiter(8)

                    async def setup(n: int) -> None:
                        async with limiter:
                            url = urls[WORKERS[n % 2]]
                            await propose(http, url, sessions[n], refs[n])

                    async with anyio.create_task_group() as group:
                        for n in range(CALLS):
                            group.start_soon(setup, n)
                    print(
                        f"\n{backend}: {CALLS} calls proposed in {time.monotonic() - began:.2f} s"
                    )
                    assert not log.exists()  # proposing never runs anything
                    for session_id, ref in zip(sessions, refs, strict=True):
                        raw = await stores.sessions.load(session_id)
                        assert raw is not None
                        stored = json.loads(raw) if isinstance(raw, str) else dict(raw)
                        records = [(c["toolCallId"], c["status"]) for c in stored["confirmations"]]
                        assert records == [(f"call-{ref}", "pending")], session_id

                    outcomes: dict[str, list[Outcome]] = {s: [] for s in sessions}
                    start = anyio.Event()

                    async def client(worker: str, n: int) -> None:
                        await start.wait()
                        outcome = await approve(
                            http, urls[worker], worker, sessions[n], f"call-{refs[n]}"
                        )
                        outcomes[sessions[n]].append(outcome)

                    began = time.monotonic()
                    async with anyio.create_task_group() as group:
                        for n in range(CALLS):
                            for worker in WORKERS:
                                group.start_soon(client, worker, n)
                        await anyio.sleep(0.1)  # every client is waiting for the start
                        start.set()
                    print(
                        f"{backend}: {CALLS} calls approved twice at once in "
                        f"{time.monotonic() - began:.2f} s"
                    )

                    # The executor ran exactly once per call, and for nothing else.
                    executed = log.read_text("utf-8").splitlines()
                    assert executed
                    ran = Counter(line.split(" ")[0] for line in executed)
                    assert len(executed) == CALLS
                    assert ran == Counter(refs)
                    ran_on = dict(line.split(" ") for line in executed)
                    print(f"{backend}: calls run by each worker: {Counter(ran_on.values())}")

                    busy = 0
                    for session_id, ref in zip(sessions, refs, strict=True):
                        pair = outcomes[session_id]
                        assert sorted(o.worker for o in pair) == sorted(WORKERS), session_id
                        busy += sum(o.busy for o in pair)
                        (winner,) = [o for o in pair if o.status == 200 and o.code is None]
                        (loser,) = [o for o in pair if o is not winner]
                        # The winner's stream: the call ran, and the model answered its result.
                        assert winner.payload is not None
                        call = call_of(winner.payload, f"call-{ref}")
                        assert (call["status"], call["result"]) == ("complete", f"TICKET-{ref}")
                        assert winner.payload["messages"][-1]["content"] == f"success: TICKET-{ref}"
                        assert ran_on[ref] == winner.worker
                        # The loser is told the call no longer waits; its worker shows the outcome.
                        assert (loser.status, loser.code) == (409, "CONFIRMATION_UNAVAILABLE")
                        seen = await read(http, urls[loser.worker], session_id)
                        assert call_of(seen, f"call-{ref}")["status"] == "complete"
                        raw = await stores.sessions.load(session_id)
                        assert raw is not None
                        stored = json.loads(raw) if isinstance(raw, str) else dict(raw)
                        assert [c["status"] for c in stored["confirmations"]] == ["approved"]
                        assert "activeTurn" not in stored
                    print(f"{backend}: retries of a busy session: {busy}")
                    assert busy > 0  # the two approvals of a call really collided
        finally:
            delete = getattr(stores.sessions, "delete", None)
            if delete is not None:
                for session_id in sessions:
                    await delete(session_id)
